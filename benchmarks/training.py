"""Training-loader benchmark: a DatasetRT cache read through torch DataLoaders.

Usage (the project venv's interpreter, with torch and Pillow installed):

    python benchmarks/training.py                  # full run (about 6 minutes)
    python benchmarks/training.py --quick          # smoke test: small sizes, 1 repeat
    python benchmarks/training.py --no-peers       # DatasetRT only
    python benchmarks/training.py --out results.json

What it measures, in samples/s over one full epoch (from ``iter(loader)`` to
the last batch; opening the dataset and building the loader are not timed):

- W1 (200,000 samples x 1 KiB, half random, half a repeated pattern: the
  payloads of `benchmarks/workload.py`), shuffled, batch 64:
  ``for s in ds`` in one process (the reference, no torch), and
  ``dataset_rt.torch.DataLoader(ds, batch_size=64, num_workers=W)`` for
  W = 0, 1, 2 with a module-level collate that returns the batch's payloads.
  Time to the first batch (worker start-up included) is reported apart, and
  the steady rate is the rest of the epoch without it. A ceiling row: torch's
  DataLoader with 2 workers over an IterableDataset that reads nothing and
  yields fresh 1 KiB payloads (what any reader's workers can deliver here).
- PNG decode (20,000 RGB PNGs of 96x96, photo-like content: a smooth field
  plus noise, about 19 KB each; a pool of 2,000 distinct images cycled),
  shuffled: ``torch.utils.data.DataLoader(ds.to_torch_iterable_dataset(
  transform=decode_png, batch_size=64), batch_size=64, num_workers=W)`` for
  W = 0, 1, 2; `decode_png` runs Pillow and makes a uint8 HxWx3 tensor in the
  worker, the default collate stacks the batch. Decode-bound: the speedup of
  W=2 over W=0 is the figure.
- Peers on the same W1 data, 2 workers, batch 64, shuffled, same collate
  (`benchmarks/training_peers.py`, run under a virtual environment of its own,
  created on first use in ``~/.cache/dataset_rt_bench/loaders`` or
  ``$DATASET_RT_LOADERS_VENV``): LitData (``optimize`` then
  ``StreamingDataset`` + ``StreamingDataLoader``) and MosaicML Streaming
  (``MDSWriter`` then ``StreamingDataset(local=..., predownload=...)`` + torch
  DataLoader), with the settings of ``training_peers.SETTINGS``.

Method, as `benchmarks/run.py`: every measurement is a fresh process (this
script with ``child``, or the peer script) that first reads every file of the
data once (warm page cache), and prints one JSON object on its last stdout
line. The caches are written once per run; the repeats go round-robin over
the rows so that a change of machine load hits every row alike. Figures are
medians over the repeats (5 for W1 rows, 3 for decode rows; 1 with --quick),
with the min-max spread. Each measurement records the 1-minute load average
at its start and "other CPU": the machine's busy CPU time during the timed
epoch (/proc/stat) less this measurement's own (main process and reaped
workers), in cores. Peak RSS is the high-water mark (VmHWM) of the main process
and, for the workers, the largest of its reaped children (fork workers count the
parent's pages they touch).

DataLoaders use the fork start method (Linux default) and torch's defaults
otherwise (prefetch_factor 2, no pinned memory). DatasetRT's main process
runs ``DatasetRuntime(num_workers=2)``; each DataLoader worker reopens the
caches with one native thread (``worker_threads=1``).

Results: ``benchmarks/results/training-latest.json`` (or --out) with every raw
figure, and the Markdown table (printed, and written beside the JSON as .md).
Progress goes to stderr. Caches go under --work-dir (deleted at the end).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import children  # this directory's runner of measurement processes
import peer_venvs  # this directory's pinned peer versions and their venvs
import workload  # this directory's measurement helpers (payloads, warm_page_cache)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_SCRIPT = HERE / "training_peers.py"
DEFAULT_PEER_VENV = Path.home() / ".cache" / "dataset_rt_bench" / "loaders"
PEER_REQUIREMENTS = peer_venvs.requirements("litdata", "mosaicml-streaming")
PEER_DISTRIBUTIONS = ("torch", "litdata", "mosaicml-streaming")
BATCH_SIZE = 64
RUNTIME_THREADS = 2
CHILD_TIMEOUT = 900
PNG_SEED = 20240601


@dataclass(frozen=True)
class Sizes:
    w1_samples: int
    png_samples: int
    png_side: int
    png_pool: int
    fast_repeats: int  # W1 rows
    slow_repeats: int  # decode rows


FULL = Sizes(200_000, 20_000, 96, 2_000, fast_repeats=5, slow_repeats=3)
QUICK = Sizes(20_000, 2_000, 96, 2_000, fast_repeats=1, slow_repeats=1)


@dataclass(frozen=True)
class Case:
    """One row of the table: who reads what, how."""

    key: str
    workload: str  # "W1" | "PNG decode"
    reader: str  # label in the table
    system: str  # "ours" | "litdata" | "mosaic"
    mode: str  # ours: "direct" | "loader" | "decode"; peers: "loader"
    workers: int
    slow: bool = False


CASES = (
    Case("w1-direct", "W1", "`for s in ds`, one process", "ours", "direct", 0),
    *(
        Case(f"w1-loader-{w}", "W1", "dataset_rt.torch.DataLoader", "ours", "loader", w)
        for w in (0, 1, 2)
    ),
    Case(
        "w1-ceiling",
        "W1",
        "torch ceiling: DataLoader over 1 KiB bytes, no reading",
        "ours",
        "ceiling",
        2,
    ),
    Case("w1-litdata", "W1", "LitData StreamingDataLoader", "litdata", "loader", 2),
    Case("w1-mosaic", "W1", "MosaicML StreamingDataset + DataLoader", "mosaic", "loader", 2),
    *(
        Case(
            f"png-decode-{w}",
            "PNG decode",
            "torch DataLoader(adapter, transform=decode)",
            "ours",
            "decode",
            w,
            slow=True,
        )
        for w in (0, 1, 2)
    ),
)


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[training {stamp}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- child: shared


def collate_payloads(batch: list) -> list[bytes]:
    """A cheap, realistic collate for DatasetRT samples: the batch's payloads."""
    return [sample.data for sample in batch]


def collate_dicts(batch: list) -> list[bytes]:
    """The same for the peers' samples (dicts). LitData hands out payloads as
    memoryviews of its chunk (which a worker cannot send): `bytes` copies them
    once, as DatasetRT's samples are; MosaicML's are bytes already (no copy)."""
    return [bytes(sample["data"]) for sample in batch]


def decode_png(sample: Any) -> Any:  # CachedSample -> torch.Tensor (H, W, 3) uint8
    """The decode-bound transform: Pillow decode, then a uint8 tensor (one copy
    into a writable buffer, which `torch.frombuffer` asks for)."""
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(sample.data)).convert("RGB")
    width, height = image.size
    return torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8).view(height, width, 3)


def busy_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # guest time is already in user
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user + system CPU seconds."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


class ChildClock:
    """Wall time, own CPU, the machine's other CPU and the hypervisor's steal
    over one timed epoch."""

    def start(self) -> None:
        self.load = os.getloadavg()[0]
        self.ticks = workload.machine_ticks()
        self.busy = busy_cpu_seconds()
        self.cpu = own_cpu_seconds()
        self.wall = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.wall

    def finish(self, seconds: float) -> dict:
        """After the loader's workers have been reaped."""
        main_cpu = own_cpu_seconds()[0] - self.cpu[0]
        workers_cpu = own_cpu_seconds()[1] - self.cpu[1]
        other = busy_cpu_seconds() - self.busy - main_cpu - workers_cpu
        return {
            "load_at_start": self.load,
            "steal_fraction": workload.steal_fraction(self.ticks, workload.machine_ticks()),
            "main_cpu_seconds": main_cpu,
            "workers_cpu_seconds": workers_cpu,
            "other_cpu_cores": max(0.0, other) / seconds if seconds > 0 else 0.0,
        }


def run_epoch(loader: Any, clock: ChildClock) -> dict:
    """Time one epoch of `loader` (an iterable of batches): first batch apart."""
    clock.start()
    iterator = iter(loader)
    first = next(iterator)
    first_seconds = clock.elapsed()
    first_samples = samples = len(first)
    for batch in iterator:
        samples += len(batch)
    seconds = clock.elapsed()
    del iterator, first  # non-persistent workers are joined once the epoch ends
    rest = seconds - first_seconds
    return {
        "seconds": seconds,
        "samples": samples,
        "first_batch_seconds": first_seconds,
        "steady_sps": (samples - first_samples) / rest if rest > 0 else 0.0,
        **clock.finish(seconds),
    }


def run_direct(dataset: Any, clock: ChildClock) -> dict:
    """Time one epoch of ``for s in ds`` (touching each payload), first sample apart."""
    clock.start()
    iterator = iter(dataset)
    first = next(iterator)
    first_seconds = clock.elapsed()
    samples, payload_bytes = 1, len(first.data)
    for sample in iterator:
        payload_bytes += len(sample.data)
        samples += 1
    seconds = clock.elapsed()
    rest = seconds - first_seconds
    return {
        "seconds": seconds,
        "samples": samples,
        "first_batch_seconds": first_seconds,
        "steady_sps": (samples - 1) / rest if rest > 0 else 0.0,
        "payload_bytes": payload_bytes,
        **clock.finish(seconds),
    }


def finish_child(result: dict) -> None:
    """Peak RSS of this process and its largest worker, then the JSON line."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result.update(
        {
            "peak_rss_kib": workload.peak_rss_kib(),
            "workers_peak_rss_kib": children // 1024 if sys.platform == "darwin" else children,
            "python": sys.version.split()[0],
        }
    )
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- child: ours


def png_bytes(side: int, seed: int) -> bytes:
    """A photo-like RGB PNG: a smooth random field (a grid of side/8 random
    colours, upscaled bicubic) blended with Gaussian noise, so it neither
    compresses to nothing nor is pure noise (which PNG stores nearly raw and
    Pillow decodes at close to copy speed)."""
    import random

    from PIL import Image

    rng = random.Random(PNG_SEED + seed)
    cells = max(2, side // 8)
    field = Image.frombytes("RGB", (cells, cells), rng.randbytes(cells * cells * 3))
    field = field.resize((side, side), Image.Resampling.BICUBIC)
    noise = Image.merge("RGB", [Image.effect_noise((side, side), 24) for _ in range(3)])
    buffer = io.BytesIO()
    Image.blend(field, noise, 0.25).save(buffer, format="PNG")
    return buffer.getvalue()


def child_write(args: argparse.Namespace) -> dict:
    import dataset_rt

    if args.kind == "w1":
        payloads = workload.make_payloads(1024, "mixed")
    else:
        payloads = [png_bytes(args.side, seed) for seed in range(min(args.pool, args.count))]
    source = workload.SyntheticSource(args.kind, args.count, payloads, dataset_rt.CacheInput)
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.WriterConfig(show_progress=False)
    start = time.perf_counter()
    results = runtime.write_cache([source], Path(args.base_dir), writer_config=config)
    seconds = time.perf_counter() - start
    if len(results) != 1 or not isinstance(results[0], dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {results!r}")
    path = Path(results[0].path)
    return {
        "seconds": seconds,
        "samples": args.count,
        "payload_bytes_mean": sum(len(p) for p in payloads) / len(payloads),
        "bytes_on_disk": workload.dir_bytes(path),
        "cache_path": str(path),
        "version": dataset_rt.__version__,
    }


def child_read(args: argparse.Namespace) -> dict:
    if args.mode == "ceiling":
        return child_ceiling(args)
    import dataset_rt

    warm_seconds = workload.warm_page_cache(Path(args.cache))
    start = time.perf_counter()
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    dataset = runtime.cached_dataset([args.cache], reader_config=dataset_rt.ReaderConfig(seed=0))
    open_seconds = time.perf_counter() - start
    expected = len(dataset)
    clock = ChildClock()
    if args.mode == "direct":
        result = run_direct(dataset, clock)
    else:
        start = time.perf_counter()
        loader = make_loader(dataset, args.mode, args.workers)
        loader_seconds = time.perf_counter() - start  # torch imported here
        result = {**run_epoch(loader, clock), "loader_build_seconds": loader_seconds}
    if result["samples"] != expected:
        raise SystemExit(f"read {result['samples']} samples, expected {expected}")
    return {**result, "open_seconds": open_seconds, "warm_seconds": warm_seconds}


class PlainSample:
    """What the ceiling row's workers yield: a payload, as a CachedSample has."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def ceiling_loader(count: int, workers: int) -> Any:
    """torch's own DataLoader ceiling for W1: an IterableDataset that reads
    nothing and yields a fresh copy of a 1 KiB payload per sample, batch k from
    worker k % W (DatasetRT's layout), with the same collate."""
    import torch.utils.data

    payloads = workload.make_payloads(1024, "mixed")

    class Payloads(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
            for batch in range(worker, -(-count // BATCH_SIZE), workers):
                for index in range(batch * BATCH_SIZE, min(count, (batch + 1) * BATCH_SIZE)):
                    yield PlainSample(bytes(memoryview(payloads[index % len(payloads)])))

    return torch.utils.data.DataLoader(
        Payloads(), batch_size=BATCH_SIZE, num_workers=workers, collate_fn=collate_payloads
    )


def child_ceiling(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    loader = ceiling_loader(args.count, args.workers)
    loader_seconds = time.perf_counter() - start
    result = run_epoch(loader, ChildClock())
    if result["samples"] != args.count:
        raise SystemExit(f"yielded {result['samples']} samples, expected {args.count}")
    return {**result, "loader_build_seconds": loader_seconds}


def make_loader(dataset: Any, mode: str, workers: int) -> Any:
    if mode == "loader":
        from dataset_rt.torch import DataLoader

        return DataLoader(
            dataset, batch_size=BATCH_SIZE, num_workers=workers, collate_fn=collate_payloads
        )
    import torch.utils.data

    # A plain torch DataLoader: told the adapter's batch size through attach_loader.
    adapter = dataset.to_torch_iterable_dataset(transform=decode_png, batch_size=BATCH_SIZE)
    loader = torch.utils.data.DataLoader(adapter, batch_size=BATCH_SIZE, num_workers=workers)
    adapter.attach_loader(loader)
    return loader


def child_decode_cost(args: argparse.Namespace) -> dict:
    """Milliseconds per `decode_png` on a pool of 200 PNGs, after one warm-up pass."""

    class Sample:
        def __init__(self, data: bytes) -> None:
            self.data = data

    samples = [Sample(png_bytes(args.side, seed)) for seed in range(200)]
    for sample in samples:
        decode_png(sample)
    passes = 5
    start = time.perf_counter()
    for _ in range(passes):
        for sample in samples:
            decode_png(sample)
    seconds = time.perf_counter() - start
    return {"decode_ms": seconds / (passes * len(samples)) * 1000}


def child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="training.py child")
    parser.add_argument("phase", choices=["write", "read", "decode-cost"])
    parser.add_argument("--kind", choices=["w1", "png"], default="w1")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--side", type=int, default=96)
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--base-dir")
    parser.add_argument("--cache")
    parser.add_argument(
        "--mode", choices=["direct", "loader", "decode", "ceiling"], default="loader"
    )
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args(argv)
    phases = {"write": child_write, "read": child_read, "decode-cost": child_decode_cost}
    result = phases[args.phase](args)
    result["phase"] = args.phase
    finish_child(result)


# --------------------------------------------------------------------------- harness


def ensure_peers(explicit: str | None) -> Path:
    """The peer interpreter: given, or a reused/created venv with the peer loaders
    (LitData and MosaicML at their pins, which are compatible, in one venv)."""
    if explicit:
        return Path(explicit)
    venv = Path(os.environ.get("DATASET_RT_LOADERS_VENV", DEFAULT_PEER_VENV))
    return peer_venvs.ensure_venv(
        venv, PEER_REQUIREMENTS, PEER_DISTRIBUTIONS, lambda message: log(f"peers: {message}")
    )


class ChildFailed(RuntimeError):
    pass


class Harness:
    def __init__(self, ours: Path, peers: Path | None) -> None:
        self.ours = ours
        self.peers = peers
        self.loads: list[float] = []

    def child(self, system: str, *arguments: str) -> dict:
        load = os.getloadavg()[0]
        self.loads.append(load)
        if system == "ours":
            command = [str(self.ours), str(Path(__file__).resolve()), "child", *arguments]
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        else:
            assert self.peers is not None
            command = [str(self.peers), str(PEERS_SCRIPT), *arguments, "--system", system]
            env = peer_venvs.clean_environment()
        try:
            result = children.run_json(command, env, HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise ChildFailed(
                f"{system} {' '.join(arguments)} exited {failed.returncode}:\n" + failed.tail(15)
            ) from None
        result["harness_load"] = load
        return result


def write_all(harness: Harness, sizes: Sizes, work: Path, systems: set[str]) -> dict:
    """Write every cache once; returns system/workload -> write result (or error)."""
    writes: dict[str, dict] = {}
    jobs = [
        ("ours-w1", "ours", ["write", "--kind", "w1", "--count", str(sizes.w1_samples)]),
        (
            "ours-png",
            "ours",
            ["write", "--kind", "png", "--count", str(sizes.png_samples)]
            + ["--side", str(sizes.png_side), "--pool", str(sizes.png_pool)],
        ),
        ("litdata-w1", "litdata", ["write", "--count", str(sizes.w1_samples)]),
        ("mosaic-w1", "mosaic", ["write", "--count", str(sizes.w1_samples)]),
    ]
    for key, system, arguments in jobs:
        if system not in systems:
            continue
        where = work / key
        shutil.rmtree(where, ignore_errors=True)
        flag = "--base-dir" if system == "ours" else "--dir"
        try:
            result = harness.child(system, *arguments, flag, str(where))
        except (ChildFailed, subprocess.TimeoutExpired) as error:
            log(f"write {key} FAILED: {error}")
            writes[key] = {"error": str(error)}
            continue
        writes[key] = result
        log(
            f"write {key}: {result['samples']:,} samples in {result['seconds']:.2f} s, "
            f"{result['bytes_on_disk'] / 1e6:,.1f} MB on disk"
        )
    return writes


def read_arguments(case: Case, sizes: Sizes, writes: dict) -> list[str] | None:
    if case.mode == "ceiling":
        return ["read", "--mode", "ceiling", "--count", str(sizes.w1_samples)] + [
            "--workers",
            str(case.workers),
        ]
    if case.system == "ours":
        write = writes.get("ours-png" if case.mode == "decode" else "ours-w1", {})
        if "cache_path" not in write:
            return None
        return ["read", "--cache", write["cache_path"], "--mode", case.mode] + [
            "--workers",
            str(case.workers),
        ]
    write = writes.get(f"{case.system}-w1", {})
    if "dir" not in write:
        return None
    return ["read", "--dir", write["dir"], "--workers", str(case.workers)] + [
        "--batch-size",
        str(BATCH_SIZE),
    ]


def read_all(harness: Harness, cases: list[Case], sizes: Sizes, writes: dict) -> dict:
    """Round-robin over the rows, one fresh process per measurement."""
    raw: dict[str, dict] = {case.key: {"runs": [], "error": None} for case in cases}
    rounds = max(sizes.fast_repeats, sizes.slow_repeats)
    for repeat in range(rounds):
        for case in cases:
            repeats = sizes.slow_repeats if case.slow else sizes.fast_repeats
            entry = raw[case.key]
            if repeat >= repeats or entry["error"]:
                continue
            arguments = read_arguments(case, sizes, writes)
            if arguments is None:
                entry["error"] = "its data was not written (see the write error)"
                continue
            try:
                result = harness.child(case.system, *arguments)
            except (ChildFailed, subprocess.TimeoutExpired) as error:
                log(f"{case.key} r{repeat + 1} FAILED: {error}")
                entry["error"] = str(error)
                continue
            entry["runs"].append(result)
            sps = result["samples"] / result["seconds"]
            log(
                f"{case.key} r{repeat + 1}/{repeats}: {sps:,.0f} samples/s, first batch "
                f"{result['first_batch_seconds'] * 1000:.0f} ms, other CPU "
                f"{result['other_cpu_cores']:.2f} cores, load {result['harness_load']:.2f}"
            )
    return raw


# --------------------------------------------------------------------------- summary


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(case: Case, entry: dict) -> dict:
    runs = entry["runs"]
    sps = [run["samples"] / run["seconds"] for run in runs]
    return {
        "key": case.key,
        "workload": case.workload,
        "reader": case.reader,
        "system": case.system,
        "workers": case.workers,
        "repeats": len(runs),
        "error": entry["error"],
        "sps": median(sps),
        "sps_values": sps,
        "sps_min": min(sps, default=float("nan")),
        "sps_max": max(sps, default=float("nan")),
        "first_batch_s": median([run["first_batch_seconds"] for run in runs]),
        "steady_sps": median([run["steady_sps"] for run in runs]),
        "main_cpu_share": median([run["main_cpu_seconds"] / run["seconds"] for run in runs]),
        "workers_cpu_share": median([run["workers_cpu_seconds"] / run["seconds"] for run in runs]),
        "peak_rss_main_mib": median([run["peak_rss_kib"] / 1024 for run in runs]),
        "peak_rss_worker_mib": median([run["workers_peak_rss_kib"] / 1024 for run in runs]),
        "other_cpu_cores": median([run["other_cpu_cores"] for run in runs]),
        "load": median([run["harness_load"] for run in runs]),
        "open_s": median([run.get("open_seconds", 0.0) for run in runs]),
    }


def relative(row: dict, rows: dict[str, dict]) -> str:
    """W1 rows against ``for s in ds``; decode rows against W=0."""
    if row["workload"] == "W1":
        base = rows.get("w1-direct")
        return "" if not base or row["key"] == "w1-direct" else f"{row['sps'] / base['sps']:.2f}x"
    base = rows.get("png-decode-0")
    if not base or row["key"] == "png-decode-0":
        return ""
    return f"{row['sps'] / base['sps']:.2f}x"


def fmt_sps(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}"


def markdown(report: dict) -> str:
    meta = report["meta"]
    machine = meta["machine"]
    sizes = meta["sizes"]
    lines = [
        f"# DatasetRT training loaders ({'quick' if meta['quick'] else 'full'} run)",
        "",
        f"- date: {meta['started']}; wall time {meta['wall_seconds']:.0f} s; "
        f"batch {BATCH_SIZE}; repeats {sizes['fast_repeats']} (W1) / "
        f"{sizes['slow_repeats']} (decode); medians, min-max over the repeats",
        f"- W1: {sizes['w1_samples']:,} x 1 KiB; PNG: {sizes['png_samples']:,} x "
        f"{sizes['png_side']}x{sizes['png_side']} RGB "
        f"({meta['writes'].get('ours-png', {}).get('payload_bytes_mean', 0):,.0f} B mean), "
        f"{meta.get('png_decode_ms', float('nan')):.3f} ms per decode_png (one process)",
        f"- machine: {machine.get('nproc')} CPUs ({machine.get('cpu', '?')}), "
        f"{machine.get('ram_gib', '?')} GiB RAM, Python {machine['python']}, "
        f"{machine['platform']}, git {machine.get('git', '?')}",
        f"- load average (1 min): {meta['load']['start']:.2f} at start, "
        f"{meta['load']['end']:.2f} at end, {meta['load']['min']:.2f}-{meta['load']['max']:.2f} "
        "over the measurements",
        f"- versions: dataset_rt {meta['versions'].get('dataset_rt', '?')}, torch "
        f"{meta['versions'].get('torch', '?')}, Pillow {meta['versions'].get('pillow', '?')}; "
        f"peers: {meta['versions'].get('peers') or 'not run'}",
        "",
        "| workload | reader | workers | samples/s | min-max | rel. | first batch | "
        "steady samples/s | main CPU | workers CPU | RSS main | RSS worker | other CPU | load |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    rows = {row["key"]: row for row in report["rows"]}
    for row in report["rows"]:
        if row["error"] and not row["repeats"]:
            error = row["error"].strip().splitlines()[-1][:120].replace("|", "/")
            lines.append(
                f"| {row['workload']} | {row['reader']} | {row['workers']} | failed: {error} "
                "| | | | | | | | | | |"
            )
            continue
        worker_rss = f"{row['peak_rss_worker_mib']:,.0f} MiB" if row["workers"] else "-"
        lines.append(
            f"| {row['workload']} | {row['reader']} | {row['workers']} | "
            f"{fmt_sps(row['sps'])} | {fmt_sps(row['sps_min'])}-{fmt_sps(row['sps_max'])} | "
            f"{relative(row, rows)} | {row['first_batch_s'] * 1000:,.1f} ms | "
            f"{fmt_sps(row['steady_sps'])} | {row['main_cpu_share']:.2f} | "
            f"{row['workers_cpu_share']:.2f} | {row['peak_rss_main_mib']:,.0f} MiB | "
            f"{worker_rss} | {row['other_cpu_cores']:.2f} | {row['load']:.2f} |"
        )
    lines += [
        "",
        "rel.: W1 rows against `for s in ds`, decode rows against W=0. first batch: "
        "from iter() to the first batch (worker start-up included); steady: the rest of "
        "the epoch. main/workers CPU: CPU seconds per wall second of the epoch. other CPU: "
        "cores busy with anything else during the epoch (/proc/stat). load: 1-minute load "
        "average at the start of the measurement.",
        "",
    ]
    return "\n".join(lines)


def ours_versions(python: Path) -> dict:
    probe = (
        "import importlib.metadata as m, json, dataset_rt; "
        "print(json.dumps({'dataset_rt': dataset_rt.__version__, "
        "'torch': m.version('torch'), 'pillow': m.version('pillow')}))"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=False, cwd=str(HERE)
    )
    if done.returncode != 0:
        raise SystemExit(
            "this interpreter needs dataset_rt, torch and Pillow "
            "(the project venv; pip install pillow):\n" + done.stderr
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def png_decode_ms(harness: Harness, sizes: Sizes) -> float:
    """Cost of one decode_png in a fresh process (not a row): context for the table."""
    try:
        result = harness.child("ours", "decode-cost", "--side", str(sizes.png_side))
    except ChildFailed as error:
        log(f"decode cost FAILED: {error}")
        return float("nan")
    return result["decode_ms"]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (smoke test)")
    parser.add_argument(
        "--out", default=str(HERE / "results" / "training-latest.json"), help="JSON results"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip LitData and MosaicML")
    parser.add_argument("--peer-python", help="an interpreter with litdata and mosaicml-streaming")
    parser.add_argument(
        "--work-dir",
        default=str(HERE / ".work-training"),
        help="where caches are written (deleted after)",
    )
    args = parser.parse_args()

    sizes = QUICK if args.quick else FULL
    ours = Path(sys.executable)
    versions = ours_versions(ours)
    peers: Path | None = None
    systems = {"ours"}
    if not args.no_peers:
        try:
            peers = ensure_peers(args.peer_python)
            versions["peers"] = peer_venvs.installed_versions(peers, PEER_DISTRIBUTIONS)
            systems |= {"litdata", "mosaic"}
        except (OSError, subprocess.CalledProcessError) as error:
            log(f"peers unavailable: {error}")
            versions["peers"] = f"unavailable: {error}"
    cases = [case for case in CASES if case.system in systems]
    harness = Harness(ours, peers)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now().astimezone()
    load_start = os.getloadavg()[0]
    wall_start = time.perf_counter()
    log(f"{'quick' if args.quick else 'full'} run, {len(cases)} rows, load {load_start:.2f}")
    try:
        writes = write_all(harness, sizes, work, systems)
        decode_ms = png_decode_ms(harness, sizes)
        log(f"decode_png: {decode_ms:.3f} ms per image")
        raw = read_all(harness, cases, sizes, writes)
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - wall_start

    report = {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": wall,
            "quick": args.quick,
            "sizes": sizes.__dict__,
            "batch_size": BATCH_SIZE,
            "runtime_threads": RUNTIME_THREADS,
            "machine": workload.machine_info(),
            "versions": versions,
            "png_decode_ms": decode_ms,
            "load": {
                "start": load_start,
                "end": os.getloadavg()[0],
                "min": min(harness.loads),
                "max": max(harness.loads),
            },
            "writes": writes,
            "method": (
                "each measurement is a fresh process; page cache warmed before opening; one "
                "epoch timed from iter() to the last batch; rows measured round-robin; medians "
                "and min-max over repeats"
            ),
        },
        "rows": [summarize(case, raw[case.key]) for case in cases],
        "raw": raw,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    out.with_suffix(".md").write_text(table)
    print(table)
    log(f"done in {wall:.0f} s; wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
