"""One benchmark measurement, run in a fresh process by `benchmarks/run.py`.

The same script runs under two interpreters: ours (the interpreter that runs
the harness, with this project's `dataset_rt` importable) and the peer (a
virtual environment with `dataset-rt==0.2.4` from PyPI, same import name). It
only uses the public API both share, the standard library and polars (which
both depend on), and prints one JSON object on its last stdout line.

Phases:
  write    write one cache from a synthetic source, time `write_cache`
  read     warm the page cache, open the cache, time one full pass, or the
           median of --passes passes (mode ordered | ordered_meta | shuffled)
  scale    open a large cache, time get_metadata, update_metadata and the
           first sample of the next iterator
  open     how opening costs as a cache grows: RSS over a baseline taken
           before opening, at open and after get_metadata; first-sample
           latency of fresh datasets, shuffled and ordered
  floor    ours only: the per-sample Python floor of a data-only read, the
           binding's objects built with no native work (floor.py) and
           consumed by the same loop as `read`'s passes
  ceiling  this machine's copy ceiling: one copy of the same bytes into a
           fresh `bytes` object per sample
  disk_ceiling
           this disk's durable-write ceiling: as many bytes written in 64 MiB
           files through the page cache and fsynced, as the writer does, with
           no hashing (a cache is published only once fsynced)

Peak RSS is this process's own high-water mark (`VmHWM` of /proc/self/status
on Linux, else `getrusage(RUSAGE_SELF).ru_maxrss`), so every figure is for one
workload in one fresh interpreter. Not `ru_maxrss` on Linux: the kernel carries
the parent's peak RSS over `execve` into the child's, so a child of a harness
holding 85 MB reported at least 85 MB whatever it used.
"""

from __future__ import annotations

import argparse
import gc
import json
import mmap
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

# A measurement's result: the JSON object this script prints on its last stdout line.
Json = dict[str, Any]
# A sample's metadata row, as both implementations' `CacheInput` take it.
Row = dict[str, int | float | str]

LABELS = ("cat", "dog", "bird", "fish")
DISTINCT_PAYLOADS = 16
PAYLOAD_SEED = 20240501


# --------------------------------------------------------------------------- helpers


def _status_kib(field: str) -> int | None:
    """A `kB` field of /proc/self/status (`VmRSS`, `VmHWM`), or None without /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_now_kib() -> int:
    """Current VmRSS of this process in KiB (0 where /proc is missing)."""
    return _status_kib("VmRSS") or 0


def peak_rss_kib() -> int:
    """Peak RSS of this process's memory in KiB (see the module docstring)."""
    peak = _status_kib("VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def cpu_seconds() -> float:
    """User + system CPU time of this process so far (every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_ticks() -> tuple[int, int] | None:
    """(steal, all) CPU ticks of the whole machine so far (the `cpu` line of
    /proc/stat), or None without it. Steal is time the hypervisor ran something
    else on this guest's CPUs: a pass that saw much of it was slowed from outside."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def steal_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time stolen between two `machine_ticks`."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def make_payloads(size: int, kind: str) -> list[bytes]:
    """A few distinct payloads the source cycles through (generation is not timed).

    kind "mixed": the first half random, the second half one repeated byte
    pattern (lz4 compresses it to a bit over half); "random": all random.
    """
    rng = random.Random(PAYLOAD_SEED + size)
    payloads = []
    for index in range(DISTINCT_PAYLOADS):
        if kind == "random":
            payloads.append(rng.randbytes(size))
        else:
            random_len = size // 2
            pattern = bytes([index]) + b"DatasetRT-bench-pattern-" + bytes([index])
            repeated = (pattern * (size // len(pattern) + 1))[: size - random_len]
            payloads.append(rng.randbytes(random_len) + repeated)
    return payloads


def metadata_for(index: int) -> Row:
    """The full metadata of sample `index`: its index, a label and a score."""
    return {"index": index, "label": LABELS[index & 3], "score": (index % 1000) * 0.125}


def metadata_index_only(index: int) -> Row:
    """Only the index of sample `index`."""
    return {"index": index}


# --metadata: the columns every sample carries.
METADATA = {"full": metadata_for, "index": metadata_index_only}


class SyntheticSource:
    """A `CacheSource`: `count` samples cycling the pre-generated payloads."""

    def __init__(
        self,
        name: str,
        count: int,
        payloads: list[bytes],
        cache_input: Callable[[bytes, Row], object],
        metadata: Callable[[int], Row] = metadata_for,
    ) -> None:
        self.name = name
        self.count = count
        self.payloads = payloads
        self.cache_input = cache_input
        self.metadata = metadata

    def __iter__(self) -> Iterator[Any]:  # the CacheInput of either implementation
        payloads = self.payloads
        distinct = len(payloads)
        make = self.cache_input
        metadata = self.metadata
        for index in range(self.count):
            yield make(payloads[index % distinct], metadata(index))


def implementation_info(expect: str) -> dict[str, str]:
    """Which dataset_rt was imported; refuses to run the wrong one."""
    import importlib.metadata

    import dataset_rt

    location = str(Path(dataset_rt.__file__).resolve().parent)
    is_ours = hasattr(dataset_rt, "__version__") and _has_module("dataset_rt._binding.native")
    if expect == "ours" and not is_ours:
        raise SystemExit(f"expected this project's dataset_rt, imported {location}")
    if expect == "peer" and is_ours:
        raise SystemExit(f"expected the peer dataset_rt, imported this project's from {location}")
    info = {"module_path": location}
    if is_ours:
        from dataset_rt._binding import native as _native

        info["version"] = dataset_rt.__version__
        info["library"] = str(getattr(_native.lib, "_name", ""))
    else:
        info["version"] = importlib.metadata.version("dataset-rt")
    # The version without importing it: only what the workload itself loads
    # counts in the process's peak RSS.
    info["polars"] = importlib.metadata.version("polars")
    return info


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def dir_bytes(path: Path) -> int:
    """Sum of the sizes of every file under `path`."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_size
    return total


def fsync_tree(path: Path) -> float:
    """fsync every file and directory of the cache; returns the seconds it took.

    dataset-rt 0.2.4 publishes without fsync, this project fsyncs before the
    rename; running the same flush after both makes a durable-write figure
    that compares like with like (for ours the files are already clean)."""
    start = time.perf_counter()
    for root, _dirs, files in os.walk(path):
        for name in files:
            descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        descriptor = os.open(root, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    return time.perf_counter() - start


def warm_page_cache(path: Path) -> float:
    """Read every file of the cache once with plain reads into one reused buffer,
    so both implementations start from the same warm page cache (and the
    buffer does not count toward RSS beyond 1 MiB).

    The buffer is an anonymous mapping, not a ``bytearray``: a 1 MiB block
    freed through glibc's malloc raises its adaptive mmap threshold for the
    rest of the process. The bytearray this used to be spared both sides' W2
    read processes most of the page faults a plain script takes on 1 MiB
    payloads (our pass with the malloc settings off: 3,200 instead of 63,600
    faults), so the read process now starts as a user's script does.
    """
    start = time.perf_counter()
    with mmap.mmap(-1, 1 << 20) as buffer:
        view = memoryview(buffer)
        for root, _dirs, files in os.walk(path):
            for name in sorted(files):
                with open(os.path.join(root, name), "rb", buffering=0) as handle:
                    while handle.readinto(view):
                        pass
        view.release()
    return time.perf_counter() - start


def machine_info() -> Json:
    """CPU, memory, Python, platform and the checkout's git revision, for a report."""
    info: Json = {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            info["cpu"] = next(
                line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
            )
        with open("/proc/meminfo") as meminfo:
            kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
            info["ram_gib"] = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration):
        pass
    # Read-only git queries: no optional locks (no index refresh).
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    checkout = str(Path(__file__).resolve().parent.parent)
    try:
        revision = subprocess.run(
            ["git", "-C", checkout, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", checkout, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        info["git"] = revision + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


# --------------------------------------------------------------------------- phases


def phase_write(args: argparse.Namespace, dataset_rt: ModuleType) -> Json:
    """Write one cache of --count samples; time `write_cache`, then fsync it all."""
    payloads = make_payloads(args.size, args.payload_kind)
    source = SyntheticSource(
        args.name, args.count, payloads, dataset_rt.CacheInput, METADATA[args.metadata]
    )
    # Cost of the source alone (same generator for both sides), to show it is not the bottleneck.
    start = time.perf_counter()
    for _sample in source:
        pass
    generator_seconds = time.perf_counter() - start

    compression = dataset_rt.ShardCompression(
        algo=args.compression, ratio=1.0 if args.compression == "none" else 2.0
    )
    config = dataset_rt.WriterConfig(shard_compression=compression, show_progress=False)
    base = Path(args.base_dir)
    base.mkdir(parents=True, exist_ok=True)
    rss_before = rss_now_kib()
    with_runtime = time.perf_counter()
    runtime = dataset_rt.DatasetRuntime(num_workers=args.workers)
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    results = runtime.write_cache([source], base, writer_config=config)
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_start
    runtime_seconds = start - with_runtime
    if len(results) != 1 or not isinstance(results[0], dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {results!r}")
    path = Path(results[0].path)
    flush_seconds = fsync_tree(path)
    return {
        "seconds": seconds,
        "flush_seconds": flush_seconds,
        "cpu_seconds": cpu,
        "runtime_create_seconds": runtime_seconds,
        "generator_seconds": generator_seconds,
        "samples": args.count,
        "payload_bytes": args.count * args.size,
        "bytes_on_disk": dir_bytes(path),
        "files": sum(len(files) for _r, _d, files in os.walk(path)),
        "cache_path": str(path),
        "rss_before_kib": rss_before,
    }


def open_dataset(
    dataset_rt: ModuleType, path: str, workers: int, shuffle: bool
) -> tuple[Any, Any, float]:
    """A runtime and the dataset of the cache at `path` (either implementation's), and the
    seconds `cached_dataset` took."""
    runtime = dataset_rt.DatasetRuntime(num_workers=workers)
    config = dataset_rt.ReaderConfig(seed=0, shuffle=shuffle)
    start = time.perf_counter()
    dataset = runtime.cached_dataset([path], reader_config=config)
    return runtime, dataset, time.perf_counter() - start


def phase_read(args: argparse.Namespace, dataset_rt: ModuleType) -> Json:
    """Open the cache and time --passes passes over it in --mode."""
    # --as-written: the page cache as the write left it (the first epoch of a job
    # that writes its caches, then trains).
    warm_seconds = 0.0 if args.as_written else warm_page_cache(Path(args.cache))
    if args.import_polars:
        # As a script that uses the metadata table does (the peer imports
        # polars with dataset_rt, ours only when a table is asked for).
        import polars  # noqa: F401
    rss_before = rss_now_kib()
    shuffle = args.mode == "shuffled"
    _runtime, dataset, open_seconds = open_dataset(dataset_rt, args.cache, args.workers, shuffle)
    expected = len(dataset)
    gc_was_enabled = gc.isenabled()
    passes = [read_pass(dataset, args.mode, expected) for _ in range(args.passes)]
    # Several passes (one epoch each, same process) only where one pass is too
    # short to time on a shared machine; the figure is their median.
    return {
        **median_pass(passes),
        "mode": args.mode,
        "first_sample_seconds": passes[0]["first_sample_seconds"],
        "open_seconds": open_seconds,
        "warm_seconds": warm_seconds,
        "gc_enabled": gc_was_enabled,
        "import_polars": args.import_polars,
        "rss_before_kib": rss_before,
    }


def median_pass(passes: list[Json]) -> Json:
    """The figures of several timed passes in one process: `seconds` and
    `cpu_seconds` are their true medians (the mean of the two middle passes for
    an even count), the other fields those of the faster middle pass; with every
    pass's seconds and steal (None where a pass did not measure it)."""
    ordered = sorted(passes, key=lambda one: one["seconds"])
    middle = ordered[(len(ordered) - 1) // 2]
    result = {**middle, "seconds": statistics.median(one["seconds"] for one in passes)}
    if all("cpu_seconds" in one for one in passes):
        result["cpu_seconds"] = statistics.median(one["cpu_seconds"] for one in passes)
    return {
        **result,
        "pass_seconds": [one["seconds"] for one in passes],
        "pass_steal_fractions": [one.get("steal_fraction") for one in passes],
    }


def read_pass(dataset: Iterable[Any], mode: str, expected: int) -> Json:
    """One timed epoch: from iter() to the last sample."""
    cats = 0
    ticks = machine_ticks()
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    iterator = iter(dataset)
    first = next(iterator)
    first_seconds = time.perf_counter() - start
    samples = 1
    payload_bytes = len(first.data)
    if mode == "ordered_meta":
        cats = first.metadata["label"] == "cat"
        for sample in iterator:
            payload_bytes += len(sample.data)
            if sample.metadata["label"] == "cat":
                cats += 1
            samples += 1
    else:
        for sample in iterator:
            payload_bytes += len(sample.data)
            samples += 1
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_start
    steal = steal_fraction(ticks, machine_ticks())
    if samples != expected:
        raise SystemExit(f"read {samples} samples, expected {expected}")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "steal_fraction": steal,
        "first_sample_seconds": first_seconds,
        "samples": samples,
        "payload_bytes": payload_bytes,
        "label_cat": int(cats),
    }


def phase_scale(args: argparse.Namespace, dataset_rt: ModuleType) -> Json:
    """Open a large cache; time get_metadata, update_metadata and the first sample."""
    import polars as pl

    warm_seconds = warm_page_cache(Path(args.cache))
    rss_before = rss_now_kib()
    _runtime, dataset, open_seconds = open_dataset(
        dataset_rt, args.cache, args.workers, shuffle=True
    )
    get_metadata = getattr(dataset, "get_metadata", None) or dataset.samples_metadata
    update_metadata = getattr(dataset, "update_metadata", None) or dataset.set_samples_metadata

    start = time.perf_counter()
    frame = get_metadata()
    get_seconds = time.perf_counter() - start
    rows = frame.height

    start = time.perf_counter()
    edited = frame.with_columns(weight=((pl.col("index") % 7) + 1).cast(pl.Float64))
    edit_seconds = time.perf_counter() - start

    start = time.perf_counter()
    update_metadata(edited)
    update_seconds = time.perf_counter() - start

    start = time.perf_counter()
    iterator = iter(dataset)
    first = next(iterator)
    first_seconds = time.perf_counter() - start
    del iterator, first

    # The same update once more: without one-time costs (lazy imports, first allocations).
    start = time.perf_counter()
    update_metadata(edited)
    update_again_seconds = time.perf_counter() - start

    # The update took effect: the next table carries the new weights.
    check = get_metadata()
    weights_ok = bool(check.get_column("weight").cast(pl.Float64).max() == 7.0)
    if rows != args.count or not weights_ok:
        raise SystemExit(
            f"scale check failed: rows={rows} expected={args.count} weights_ok={weights_ok}"
        )
    return {
        "open_seconds": open_seconds,
        "get_metadata_seconds": get_seconds,
        "edit_seconds": edit_seconds,
        "update_metadata_seconds": update_seconds,
        "update_metadata_again_seconds": update_again_seconds,
        "first_sample_seconds": first_seconds,
        "rows": rows,
        "warm_seconds": warm_seconds,
        "rss_before_kib": rss_before,
    }


def phase_open(args: argparse.Namespace, dataset_rt: ModuleType) -> Json:
    """Open an existing cache after taking a baseline, then fresh datasets' first samples.

    The baseline is this process's RSS with the interpreter, dataset_rt and
    polars imported (the peer imports polars with dataset_rt; importing it on
    both sides keeps a one-time import out of the per-sample figures) and the
    page cache warmed, just before the timed `cached_dataset` call. RSS and
    peak RSS are read right after the open and right after `get_metadata()`.
    Then --passes fresh runtimes and datasets per order, alternating shuffled
    and ordered, each timed from `iter()` to the first sample.
    """
    import polars  # noqa: F401

    warm_seconds = warm_page_cache(Path(args.cache))
    gc.collect()
    rss_baseline = rss_now_kib()
    peak_baseline = peak_rss_kib()
    runtime, dataset, open_seconds = open_dataset(
        dataset_rt, args.cache, args.workers, shuffle=True
    )
    # The high-water mark can trail VmRSS by a few pages: the peak is at least the current RSS.
    rss_open = rss_now_kib()
    peak_open = max(rss_open, peak_rss_kib())
    get_metadata = getattr(dataset, "get_metadata", None) or dataset.samples_metadata
    start = time.perf_counter()
    frame = get_metadata()
    get_seconds = time.perf_counter() - start
    rss_metadata = rss_now_kib()
    peak_metadata = max(rss_metadata, peak_rss_kib())
    rows = frame.height
    if rows != args.count:
        raise SystemExit(f"get_metadata returned {rows} rows, expected {args.count}")
    del frame
    # Once more, without the first call's one-time costs.
    start = time.perf_counter()
    get_metadata()
    get_again_seconds = time.perf_counter() - start
    del dataset, runtime
    gc.collect()

    first: dict[str, list[float]] = {"shuffled": [], "ordered": []}
    opens: list[float] = []
    for _ in range(args.passes):
        for order in first:
            runtime, dataset, seconds = open_dataset(
                dataset_rt, args.cache, args.workers, shuffle=order == "shuffled"
            )
            start = time.perf_counter()
            iterator = iter(dataset)
            next(iterator)
            first[order].append(time.perf_counter() - start)
            opens.append(seconds)
            del iterator, dataset, runtime
    return {
        "open_seconds": open_seconds,
        "open_again_seconds": opens,
        "get_metadata_seconds": get_seconds,
        "get_metadata_again_seconds": get_again_seconds,
        "first_sample_shuffled_seconds": first["shuffled"],
        "first_sample_ordered_seconds": first["ordered"],
        "rows": rows,
        "warm_seconds": warm_seconds,
        "rss_baseline_kib": rss_baseline,
        "peak_rss_baseline_kib": peak_baseline,
        "rss_open_kib": rss_open,
        "peak_rss_open_kib": peak_open,
        "rss_metadata_kib": rss_metadata,
        "peak_rss_metadata_kib": peak_metadata,
    }


def phase_floor(args: argparse.Namespace, dataset_rt: ModuleType) -> Json:
    """The per-sample Python floor of a data-only read (`floor.FloorDataset`):
    --count samples through `read_pass`, median of --passes passes."""
    import floor  # this directory's; it imports this project's dataset_rt internals

    stand_in = floor.FloorDataset(args.count)
    return median_pass([read_pass(stand_in, "ordered", args.count) for _ in range(args.passes)])


def phase_ceiling(args: argparse.Namespace) -> Json:
    """One copy of the same bytes per sample into a fresh bytes object."""
    payloads = make_payloads(args.size, args.payload_kind)
    big = bytearray(args.count * args.size)
    view = memoryview(big)
    for index in range(args.count):
        view[index * args.size : (index + 1) * args.size] = payloads[index % len(payloads)]
    size = args.size
    pass_seconds = []
    for _ in range(args.passes):
        total = 0
        start = time.perf_counter()
        for index in range(args.count):
            offset = index * size
            copy = bytes(view[offset : offset + size])
            total += len(copy)
        pass_seconds.append(time.perf_counter() - start)
    return {
        "seconds": statistics.median(pass_seconds),
        "pass_seconds": pass_seconds,
        "samples": args.count,
        "payload_bytes": total,
    }


def phase_disk_ceiling(args: argparse.Namespace) -> Json:
    """What this disk takes for a durable write of the same bytes, written the
    way this project's writer writes them but with no hashing and no pipeline:
    files of 64 MiB (the default `max_shard_bytes`) written through the page
    cache in 512 KiB calls, writeback started every 8 MiB (`sync_file_range`,
    Linux), and each file fsynced on a thread once complete, then dropped from
    the page cache, all fsyncs waited for. A bound for the disk's part of a
    write, not for the whole write.

    Until 2026-12-02 this wrote one file with `O_DIRECT` (two 8 MiB writes in
    flight, then fsync), which took 0.21-0.27 s per 512 MiB where this takes
    0.19-0.21 s: the disk takes more than that measured.
    """
    file_bytes = 64 << 20
    call_bytes = 512 << 10
    writeback_bytes = 8 << 20
    total = args.count * args.size
    payloads = make_payloads(args.size, args.payload_kind)
    pattern = b"".join(payloads)
    chunk = (pattern * (call_bytes // len(pattern) + 1))[:call_bytes]
    start_writeback = sync_file_range_write()
    base = Path(args.base_dir)
    base.mkdir(parents=True, exist_ok=True)
    paths = [base / f"disk_ceiling_{index:04d}.bin" for index in range(-(-total // file_bytes))]
    failures: list[BaseException] = []

    def sync_and_close(fd: int) -> None:
        try:
            os.fsync(fd)
            if hasattr(os, "posix_fadvise"):  # as the writer drops a written shard
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)
        finally:
            os.close(fd)

    cpu_start = cpu_seconds()
    start = time.perf_counter()
    try:
        syncs = []
        for index, path in enumerate(paths):
            length = min(file_bytes, total - index * file_bytes)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            offset = started = 0
            while offset < length:
                piece = memoryview(chunk)[: min(call_bytes, length - offset)]
                if os.pwrite(fd, piece, offset) != len(piece):
                    raise OSError(f"short write at {offset} of {path}")
                offset += len(piece)
                if start_writeback and offset - started >= writeback_bytes:
                    start_writeback(fd, started, offset - started)
                    started = offset
            syncs.append(threading.Thread(target=sync_and_close, args=(fd,)))
            syncs[-1].start()
        written_seconds = time.perf_counter() - start
        for sync in syncs:
            sync.join()
        if failures:
            raise failures[0]
        seconds = time.perf_counter() - start
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    return {
        "seconds": seconds,
        "written_seconds": written_seconds,  # until the last write call returned
        "cpu_seconds": cpu_seconds() - cpu_start,
        "samples": args.count,
        "payload_bytes": total,
    }


def sync_file_range_write() -> Callable[[int, int, int], int] | None:
    """`sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)` from libc, or
    None where there is none (then only the fsyncs write back)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    function = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None)
    if function is None:
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    write_flag = 2  # SYNC_FILE_RANGE_WRITE: start writeback, do not wait
    return lambda fd, offset, length: function(fd, offset, length, write_flag)


# Phases that measure a library (`dataset_rt`, imported only for them), and
# phases that measure this machine without one (run.py passes them no --expect).
LIBRARY_PHASES = {
    "write": phase_write,
    "read": phase_read,
    "scale": phase_scale,
    "open": phase_open,
    "floor": phase_floor,
}
MACHINE_PHASES = {"ceiling": phase_ceiling, "disk_ceiling": phase_disk_ceiling}


def spread(values: list[float], digits: int = 0) -> str:
    """The median of `values` with their min-max range: "1,234 (1,100-1,300)"."""
    median, low, high = (
        f"{value:,.{digits}f}" for value in (statistics.median(values), min(values), max(values))
    )
    return f"{median} ({low}-{high})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=[*LIBRARY_PHASES, *MACHINE_PHASES])
    parser.add_argument("--expect", choices=["ours", "peer", "any"], default="any")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--payload-kind", choices=["mixed", "random"], default="mixed")
    parser.add_argument(
        "--metadata",
        choices=list(METADATA),
        default="full",
        help="write: index, label and score per sample (full) or only the index",
    )
    parser.add_argument("--compression", choices=["none", "lz4"], default="none")
    parser.add_argument("--base-dir")
    parser.add_argument("--name", default="bench")
    parser.add_argument("--cache")
    parser.add_argument(
        "--mode", choices=["ordered", "ordered_meta", "shuffled"], default="ordered"
    )
    parser.add_argument(
        "--passes", type=int, default=1, help="read/ceiling: timed passes, report the median"
    )
    parser.add_argument(
        "--as-written",
        action="store_true",
        help="read: do not read the files first; the page cache is as the write left it",
    )
    parser.add_argument(
        "--import-polars",
        action="store_true",
        help="read: import polars before opening the cache (counted in peak RSS)",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    if args.phase in MACHINE_PHASES:
        import_seconds = 0.0
        info = {}
        result = MACHINE_PHASES[args.phase](args)
    else:
        import dataset_rt

        info = implementation_info(args.expect)
        import_seconds = time.perf_counter() - started
        result = LIBRARY_PHASES[args.phase](args, dataset_rt)
    result.update(
        {
            "phase": args.phase,
            "implementation": info,
            "import_seconds": import_seconds,
            "peak_rss_kib": peak_rss_kib(),
            "python": sys.version.split()[0],
        }
    )
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
