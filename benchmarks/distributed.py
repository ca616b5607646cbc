"""Building one cache on Ray Data against one `write_cache` process.

Two workloads, each built three ways into an empty folder, every measurement in
a fresh process:

- W1-png: W1's 200,000 samples through per-sample Python work, each 1 KiB
  payload encoded as a 32x32 grayscale PNG with Pillow (as in
  ``process_writers.py``): the case a cluster is for.
- W2: W2's 512 samples of 1 MiB random bytes, no per-sample work: the case
  where the write itself is the work and Ray only adds moving the rows.

The three ways:

- ``single``: one process, ``DatasetRuntime(num_workers=2).write_cache(source, base)``.
- ``ray-1`` and ``ray-2``: a local Ray instance with 1 or 2 CPUs
  (``ray.init(address="local", num_cpus=N)``),
  ``ray.data.range(samples).map_batches(make)`` building the same rows
  (payload and metadata) in BLOCKS blocks, written with
  ``write_datasink(dataset_rt.ray.CacheSink(base, name))``: one partition per
  write task, then one commit.

Reported separately: Ray's start-up (``ray.init``), the whole
``write_datasink`` call (the build: making the rows, the write tasks and the
commit), and the commit's own time (``CacheSink.on_write_complete``). Every
built cache is opened and its sample count checked. Figures are medians over the
repeats; within a repeat the three ways run back to back, the first one rotating.

Usage:

    python benchmarks/distributed.py                       # full sizes, 3 repeats
    python benchmarks/distributed.py --scale 0.1 --repeats 1

Results: ``benchmarks/results/distributed.json``; ``benchmarks/report.py`` makes
the table of docs/benchmarks.md from it (and this script prints it).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import children
import report
import results_file
import workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "distributed.json"
# name -> (samples, payload bytes, payload kind, PNG-encoded)
WORKLOADS = {"W1-png": (200_000, 1024, "mixed", True), "W2": (512, 1 << 20, "random", False)}
WAYS = ("single", "ray-1", "ray-2")
BLOCKS = 16  # Ray Data blocks (and so write tasks, partitions) per build
SIDE = 32  # a 1 KiB grayscale image: SIDE x SIDE pixels
CHILD_TIMEOUT = 1800
AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def encode_png(payload: bytes) -> bytes:
    """`payload` (SIDE * SIDE bytes) as a grayscale PNG."""
    from PIL import Image

    image = Image.frombytes("L", (SIDE, SIDE), payload)
    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    return encoded.getvalue()


class Rows:
    """Sample `index`'s payload and metadata for one workload (the same in every way)."""

    def __init__(self, name: str) -> None:
        _, size, kind, png = WORKLOADS[name]
        self.payloads = workload.make_payloads(size, kind)
        self.png = png

    def payload(self, index: int) -> bytes:
        raw = self.payloads[index % len(self.payloads)]
        return encode_png(raw) if self.png else raw


class Source:
    """A `CacheSource` of the first `count` samples of a workload."""

    def __init__(self, name: str, count: int) -> None:
        self.name = name.lower()
        self.workload = name
        self.count = count

    def __iter__(self) -> Iterator[Any]:
        from dataset_rt import CacheInput

        rows = Rows(self.workload)
        for index in range(self.count):
            yield CacheInput(rows.payload(index), workload.metadata_for(index))


def build_single(name: str, samples: int, base: Path) -> dict[str, Any]:
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    config = dataset_rt.WriterConfig(show_progress=False)
    started = time.perf_counter()
    [result] = runtime.write_cache(Source(name, samples), base, writer_config=config)
    seconds = time.perf_counter() - started
    runtime.close()
    if not isinstance(result, dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {result}")
    return {"build_seconds": seconds}


def build_ray(name: str, samples: int, base: Path, cpus: int) -> dict[str, Any]:
    # A local instance of its own (never another one on the machine), with a token
    # of its own for Ray 2.60's token authentication (none written to ~/.ray). Ray
    # reads the mode when it is first imported, so this comes before the import.
    if not any(key in os.environ for key in AUTH):
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    import ray

    from dataset_rt.ray import CacheSink

    class TimedSink(CacheSink):
        """CacheSink that records how long its commit takes."""

        commit_seconds = 0.0

        def on_write_complete(self, write_result: Any) -> None:
            started = time.perf_counter()
            super().on_write_complete(write_result)
            TimedSink.commit_seconds = time.perf_counter() - started

    def make(batch: dict[str, Any]) -> dict[str, Any]:
        rows = Rows(name)
        indexes = [int(i) for i in batch["id"]]
        metadata = [workload.metadata_for(i) for i in indexes]
        columns: dict[str, Any] = {"data": [rows.payload(i) for i in indexes]}
        for key in metadata[0] if metadata else ():
            columns[key] = [m[key] for m in metadata]
        return columns

    started = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="ray_bench_"),
        log_to_driver=False,
    )
    startup = time.perf_counter() - started
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        rows = ray.data.range(samples, override_num_blocks=BLOCKS).map_batches(make)
        started = time.perf_counter()
        rows.write_datasink(TimedSink(str(base), name.lower()))
        seconds = time.perf_counter() - started
    finally:
        ray.shutdown()
    return {
        "startup_seconds": startup,
        "build_seconds": seconds,
        "commit_seconds": TimedSink.commit_seconds,
    }


def child(name: str, way: str, samples: int, base: Path) -> dict[str, Any]:
    """One build, in a fresh process; its figures and the built cache's sample count."""
    import dataset_rt

    if way == "single":
        figures = build_single(name, samples, base)
    else:
        figures = build_ray(name, samples, base, int(way.split("-")[1]))
    with dataset_rt.DatasetRuntime(num_workers=1) as runtime:
        dataset = runtime.cached_dataset(
            [base / name.lower()], reader_config=dataset_rt.ReaderConfig(seed=0)
        )
        if len(dataset) != samples:
            raise SystemExit(f"{way} built {len(dataset)} samples of {name}, not {samples}")
    figures["disk_bytes"] = workload.dir_bytes(base / name.lower())
    return figures


def run_child(arguments: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    env.pop("DATASET_RT_LIBRARY", None)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *arguments]
    try:
        return children.run_json(command, env, ROOT, CHILD_TIMEOUT)
    except children.ChildFailed as failed:
        raise SystemExit(f"{' '.join(command)} failed:\n{failed.tail(60)}") from None


Figures = dict[str, dict[str, dict[str, list[float]]]]  # [workload][way][figure]


def measure(sizes: dict[str, int], repeats: int) -> tuple[Figures, list[float]]:
    figures: Figures = {name: {way: {} for way in WAYS} for name in sizes}
    loads: list[float] = []
    for repeat in range(repeats):
        order = WAYS[repeat % len(WAYS) :] + WAYS[: repeat % len(WAYS)]
        for name, samples in sizes.items():
            for way in order:
                loads.append(os.getloadavg()[0])
                with tempfile.TemporaryDirectory(prefix="dataset_rt_dist_") as scratch:
                    result = run_child([name, way, str(samples), scratch + "/caches"])
                for key, value in result.items():
                    figures[name][way].setdefault(key, []).append(value)
                shown = ", ".join(f"{k} {v:.2f}" for k, v in result.items() if "seconds" in k)
                print(f"repeat {repeat}: {name} {way}: {shown}", file=sys.stderr, flush=True)
    return figures, loads


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each workload")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=4, metavar=("WORKLOAD", "WAY", "SAMPLES", "BASE"))
    args = parser.parse_args()
    if args.child:
        name, way, samples, base = args.child
        print(json.dumps(child(name, way, int(samples), Path(base))))
        return
    chosen = args.workloads.split(",")
    unknown = sorted(set(chosen) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"unknown workloads {unknown}; known: {sorted(WORKLOADS)}")
    sizes = {name: max(BLOCKS, int(WORKLOADS[name][0] * args.scale)) for name in chosen}
    started = time.strftime("%Y-%m-%d")
    figures, loads = measure(sizes, args.repeats)
    workloads = {
        name: {"samples": samples, "payload_bytes": WORKLOADS[name][1]}
        for name, samples in sizes.items()
    }
    results = {
        "meta": results_file.run_meta("distributed.py", started, args, loads, workloads),
        "blocks": BLOCKS,
        "figures": figures,
        "medians": {
            name: {
                way: {key: statistics.median(values) for key, values in by_key.items()}
                for way, by_key in by_way.items()
            }
            for name, by_way in figures.items()
        },
    }
    results_file.write_results(args.out, results)
    print(report.render_distributed(results))


if __name__ == "__main__":
    main()
