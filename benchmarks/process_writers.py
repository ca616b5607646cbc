"""W1 through a source that PNG-encodes every sample, written with
``WriterConfig(num_processes=P)``: ours against dataset-rt 0.4.8.

The source is the kind process writers are for: its Python work (Pillow
encoding a 32x32 8-bit grayscale PNG of W1's 1 KiB payload, about 770 B) costs
far more than writing the record. W1's samples are split into 8 sources of equal
length; each measurement is one fresh process that writes them all with
``DatasetRuntime(num_workers=2)``, ``show_progress=False`` and otherwise default
settings, for P = 0 (in the calling process), 1 and 2, timing the
``write_cache`` call (process start-up and the import of Pillow in the writer
processes included). Per repeat, every P runs both systems back to back, the
side going first swapping every repeat; figures are medians over the repeats.

dataset-rt 0.4.8 runs in a virtual environment of its own with Pillow,
``~/.cache/dataset_rt_bench/dataset-rt-0.4.8-pillow`` (created on first use,
with the pins below); ours is this checkout's ``python/``.

Usage:

    python benchmarks/process_writers.py                 # W1: 200,000 samples, 3 repeats
    python benchmarks/process_writers.py --scale 0.25 --repeats 1

Results: ``benchmarks/results/process_writers.json``; ``benchmarks/report.py``
makes the table of docs/benchmarks.md from it (and this script prints it).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import children
import peer_venvs
import report
import results_file
import workload

if TYPE_CHECKING:
    from dataset_rt import CacheSource

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "process_writers.json"
PEER = ("dataset-rt==0.4.8", "pillow==13.0.0")
PEER_VENV = peer_venvs.CACHE_DIR / "dataset-rt-0.4.8-pillow"
W1_SAMPLES = 200_000
PAYLOAD_BYTES = 1024
SIDE = 32  # a PAYLOAD_BYTES grayscale image: SIDE x SIDE pixels
SOURCES = 8
PROCESSES = (0, 1, 2)
SYSTEMS = ("ours", "dataset-rt 0.4.8")
CHILD_TIMEOUT = 3600


class PngSource:
    """Samples `first` .. `first + count - 1` of W1, each payload as a PNG image."""

    def __init__(self, name: str, first: int, count: int) -> None:
        self.name = name
        self.first = first
        self.count = count

    def __iter__(self) -> Iterator[Any]:
        from PIL import Image

        from dataset_rt import CacheInput

        payloads = workload.make_payloads(PAYLOAD_BYTES, "mixed")
        for index in range(self.first, self.first + self.count):
            image = Image.frombytes("L", (SIDE, SIDE), payloads[index % len(payloads)])
            encoded = io.BytesIO()
            image.save(encoded, format="PNG")
            yield CacheInput(encoded.getvalue(), workload.metadata_for(index))


def child(samples: int, processes: int, base: Path, expect: str) -> dict[str, Any]:
    """One measurement, in the interpreter of the system measured."""
    import dataset_rt

    info = workload.implementation_info(expect)
    share = samples // SOURCES
    sources: list[CacheSource] = [
        PngSource(f"part-{k:02d}", k * share, share) for k in range(SOURCES)
    ]
    config = dataset_rt.WriterConfig(num_processes=processes, show_progress=False)
    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    results = runtime.write_cache(sources, base, writer_config=config)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    failed = [r for r in results if not isinstance(r, dataset_rt.CacheWriteSuccess)]
    if failed:
        raise SystemExit(f"write failed: {failed}")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "samples": share * SOURCES,
        "disk_bytes": workload.dir_bytes(base),
        "implementation": info,
    }


def cpu_seconds() -> float:
    """User and system CPU time of this process and of its children that have ended
    (the writer processes, once the write has stopped them)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def run_child(python: Path, env: dict[str, str], arguments: list[str]) -> dict[str, Any]:
    command = [str(python), str(Path(__file__).resolve()), "--child", *arguments]
    try:
        return children.run_json(command, env, ROOT, CHILD_TIMEOUT)
    except children.ChildFailed as failed:
        raise SystemExit(f"{' '.join(command)} failed:\n{failed.tail(60)}") from None


def interpreters() -> dict[str, tuple[Path, dict[str, str]]]:
    """Each system's interpreter and environment."""
    ours = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    ours.pop("DATASET_RT_LIBRARY", None)
    peer = peer_venvs.ensure_venv(
        PEER_VENV, PEER, ("dataset-rt", "pillow"), lambda line: print(line, file=sys.stderr)
    )
    return {
        "ours": (Path(sys.executable), ours),
        SYSTEMS[1]: (peer, peer_venvs.clean_environment()),
    }


Figures = dict[str, dict[str, list[float]]]  # [system][processes]: one per repeat


def measure(samples: int, repeats: int) -> tuple[Figures, Figures, list[float]]:
    """Wall and CPU seconds of each write, and the load averages seen."""
    systems = interpreters()
    seconds: Figures = {s: {str(p): [] for p in PROCESSES} for s in SYSTEMS}
    cpu: Figures = {s: {str(p): [] for p in PROCESSES} for s in SYSTEMS}
    loads: list[float] = []
    for repeat in range(repeats):
        order = SYSTEMS if repeat % 2 == 0 else SYSTEMS[::-1]
        for processes in PROCESSES:
            for system in order:
                python, env = systems[system]
                expect = "ours" if system == "ours" else "peer"
                loads.append(os.getloadavg()[0])
                with tempfile.TemporaryDirectory(prefix="dataset_rt_pw_") as scratch:
                    arguments = [str(samples), str(processes), scratch + "/caches", expect]
                    result = run_child(python, env, arguments)
                    shutil.rmtree(scratch + "/caches", ignore_errors=True)
                seconds[system][str(processes)].append(result["seconds"])
                cpu[system][str(processes)].append(result["cpu_seconds"])
                rate = result["samples"] / result["seconds"]
                print(
                    f"repeat {repeat}: {system}, num_processes={processes}: "
                    f"{result['seconds']:.2f} s, {rate:,.0f} samples/s, "
                    f"{result['cpu_seconds']:.2f} CPU s",
                    file=sys.stderr,
                    flush=True,
                )
    return seconds, cpu, loads


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of W1's samples")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=4, metavar=("SAMPLES", "P", "BASE", "EXPECT"))
    args = parser.parse_args()
    if args.child:
        samples, processes, base, expect = args.child
        print(json.dumps(child(int(samples), int(processes), Path(base), expect)))
        return
    samples = int(W1_SAMPLES * args.scale) // SOURCES * SOURCES
    started = time.strftime("%Y-%m-%d")
    seconds, cpu, loads = measure(samples, args.repeats)
    workloads = {"W1-png": {"samples": samples, "payload_bytes": PAYLOAD_BYTES}}
    results = {
        "meta": results_file.run_meta("process_writers.py", started, args, loads, workloads),
        "sources": SOURCES,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "medians": {
            system: {p: statistics.median(values) for p, values in by_processes.items()}
            for system, by_processes in seconds.items()
        },
    }
    results_file.write_results(args.out, results)
    print(report.render_process_writers(results))


if __name__ == "__main__":
    main()
