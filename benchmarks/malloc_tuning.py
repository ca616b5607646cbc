"""Fixed glibc malloc thresholds for large payloads, measured on and off.

DatasetRT leaves the process's allocator settings alone. This measures what
fixing glibc's thresholds would change when reading large payloads: "on" calls
``mallopt(M_MMAP_THRESHOLD, 32 MiB)`` and ``mallopt(M_TRIM_THRESHOLD, 64 MiB)``
in the reading process before it opens the cache (blocks up to 32 MiB from
the heap, and up to 64 MiB of freed heap kept), "off" keeps glibc's adaptive
defaults.

Usage (the project venv's interpreter, ``PYTHONPATH=python``):

    python benchmarks/malloc_tuning.py              # full run (about 4 minutes)
    python benchmarks/malloc_tuning.py --quick      # smoke test: small caches, 1 repeat
    python benchmarks/malloc_tuning.py --out results.json

What it measures, in a fresh process per read (this script's ``child``: it
warms the page cache with `benchmarks/workload.py`'s helpers, opens the cache
with ``DatasetRuntime(num_workers=2)``, reads one untimed pass, then times
passes and reports their median samples/s, the minor page faults of the median
pass and the process's peak RSS, ``VmHWM``), with the settings on and off:

- W2: 512 samples x 1 MiB (random), 11 timed passes a process: ordered and
  shuffled with workload.py's loop (``for s in ds: len(s.data)``: each sample
  dropped at once), and ordered holding batches: the loop keeps 16 samples in
  a list and drops them together, as a training loop drops a collated batch;
- W1: 200,000 samples x 1 KiB (mixed), ordered, 3 timed passes, with glibc's
  defaults on both sides (an A/A row): the two columns differ by the machine's
  noise only.

The caches are written once (``workload.py write``). Every repeat runs each
read with the settings on and off, in fresh processes, the order swapped from
one repeat to the next, so that a change of machine load hits both alike.
Figures are medians over the repeats with the min-max spread, and the median
of the per-repeat ratios on / off. Any ``MALLOC_*`` or ``GLIBC_TUNABLES`` of
the caller's environment is removed from the children's.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import children  # this directory's child-process runner
import workload  # this directory's measurement helpers
from workload import spread

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
SETTINGS = ("on", "off")
# mallopt parameters (malloc.h) and the values "on" sets.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
RUNTIME_THREADS = 2
CHILD_TIMEOUT = 600

HELD_BATCH = 16

# name -> (samples, payload bytes, payload kind, read modes, passes per process)
FULL = {
    "W2": (512, 1 << 20, "random", ("ordered", "shuffled", "held"), 11),
    "W1": (200_000, 1024, "mixed", ("ordered",), 3),
}
QUICK = {
    "W2": (64, 1 << 20, "random", ("ordered", "shuffled", "held"), 3),
    "W1": (20_000, 1024, "mixed", ("ordered",), 1),
}


def log(message: str) -> None:
    print(f"[malloc {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def environment() -> dict[str, str]:
    """The children's environment: the caller's without its own malloc settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MALLOC_") and name != "GLIBC_TUNABLES"
    }
    if env.get("PYTHONPATH"):
        entries = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e) if e else e for e in entries)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def fix_thresholds() -> bool:
    """The "on" settings, for this whole process; True when glibc took both."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        raise SystemExit("not glibc: nothing to measure")
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting either stops glibc adapting both.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def held_pass(dataset: Any, expected: int) -> dict[str, Any]:
    """One timed epoch that keeps `HELD_BATCH` samples, then drops them together."""
    cpu_start = workload.cpu_seconds()
    start = time.perf_counter()
    held: list[Any] = []
    samples = 0
    for sample in dataset:
        held.append(sample)
        samples += 1
        if len(held) == HELD_BATCH:
            held = []
    seconds = time.perf_counter() - start
    cpu = workload.cpu_seconds() - cpu_start
    if samples != expected:
        raise SystemExit(f"read {samples} samples, expected {expected}")
    return {"seconds": seconds, "cpu_seconds": cpu, "samples": samples}


def child_read(cache: str, mode: str, passes: int, fixed: bool) -> dict[str, Any]:
    """A fresh process's reads of `cache` (see the module docstring)."""
    import dataset_rt

    tuned = fix_thresholds() if fixed else False
    workload.warm_page_cache(Path(cache))
    _runtime, dataset, _open = workload.open_dataset(
        dataset_rt, cache, RUNTIME_THREADS, mode == "shuffled"
    )
    expected = len(dataset)

    def one_pass() -> dict[str, Any]:
        before = minor_faults()
        if mode == "held":
            result = held_pass(dataset, expected)
        else:
            result = workload.read_pass(dataset, mode, expected)
        return {**result, "minor_faults": minor_faults() - before}

    one_pass()  # untimed: the first pass grows the heap
    median = workload.median_pass([one_pass() for _ in range(passes)])
    return {
        **median,
        "samples_per_second": expected / median["seconds"],
        "tuned": tuned,
        "peak_rss_kib": workload.peak_rss_kib(),
    }


def child(phase: str, *arguments: str) -> dict[str, Any]:
    if phase == "read":
        command = [sys.executable, str(Path(__file__).resolve()), "child", *arguments]
    else:
        command = [sys.executable, str(WORKLOAD), phase, "--workers", str(RUNTIME_THREADS)]
        command += [*arguments, "--expect", "ours"]
    try:
        return children.run_json(command, environment(), HERE, CHILD_TIMEOUT)
    except children.ChildFailed as failed:
        raise SystemExit(f"{phase} failed ({failed.returncode}):\n{failed.tail(30)}") from None


def write(name: str, spec: tuple[Any, ...], base: Path) -> str:
    count, size, kind, _modes, _passes = spec
    result = child(
        "write",
        "--count", str(count),
        "--size", str(size),
        "--payload-kind", kind,
        "--base-dir", str(base / name),
        "--name", name,
    )  # fmt: skip
    return str(result["cache_path"])


def measure(sizes: dict[str, tuple[Any, ...]], repeats: int, base: Path) -> dict[str, Any]:
    """Every (workload, mode) read with the settings on and off, per repeat."""
    caches = {name: write(name, spec, base) for name, spec in sizes.items()}
    log("wrote " + ", ".join(f"{name} ({sizes[name][0]:,} samples)" for name in caches))
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for repeat in range(repeats):
        order = ("on", "off") if repeat % 2 == 0 else ("off", "on")
        for name, (count, _size, _kind, modes, passes) in sizes.items():
            for mode in modes:
                row = rows.setdefault(f"{name} {mode}", {"on": [], "off": []})
                for side in order:
                    fixed = side == "on" and name == "W2"
                    result = child("read", caches[name], mode, str(passes), str(fixed))
                    if result["samples"] != count or result["tuned"] != fixed:
                        raise SystemExit(f"{name} {mode} {side}: unexpected {result}")
                    row[side].append(result)
                    log(
                        f"r{repeat + 1}/{repeats} {name} {mode} {side:3}: "
                        f"{result['samples_per_second']:,.0f} samples/s, "
                        f"{result['minor_faults']:,} faults a pass, "
                        f"peak {result['peak_rss_kib'] / 1024:.0f} MiB"
                    )
    return rows


def table(rows: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    lines = [
        "| read | samples/s on | samples/s off | on / off | CPU ms a pass on | "
        "CPU ms a pass off | faults a pass on | faults a pass off | peak RSS MiB on | "
        "peak RSS MiB off |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, sides in rows.items():
        rates = {side: [r["samples_per_second"] for r in sides[side]] for side in SETTINGS}
        faults = {side: [r["minor_faults"] for r in sides[side]] for side in SETTINGS}
        cpus = {side: [r["cpu_seconds"] * 1e3 for r in sides[side]] for side in SETTINGS}
        peaks = {side: [r["peak_rss_kib"] / 1024 for r in sides[side]] for side in SETTINGS}
        ratios = [a / b for a, b in zip(rates["on"], rates["off"], strict=True)]
        lines.append(
            f"| {label} | {spread(rates['on'])} | {spread(rates['off'])} | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
            f"{spread(cpus['on'])} | {spread(cpus['off'])} | "
            f"{spread(faults['on'])} | {spread(faults['off'])} | "
            f"{spread(peaks['on'])} | {spread(peaks['off'])} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", help="also write the raw results here (JSON)")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or (1 if args.quick else 6)
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="malloc-tuning-"))
    try:
        rows = measure(sizes, repeats, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    lines = [
        f"# glibc malloc settings on and off ({'quick' if args.quick else 'full'})",
        "",
        f"- {repeats} repeats, each read a fresh process; medians (min-max); "
        f"wall time {time.perf_counter() - started:.0f} s; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end",
        "",
        *table(rows),
    ]
    print("\n".join(lines))
    if args.out:
        machine = workload.machine_info()
        Path(args.out).write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        cache, mode, passes, fixed = sys.argv[2:]
        print(json.dumps(child_read(cache, mode, int(passes), fixed == "True")))
    else:
        main()
