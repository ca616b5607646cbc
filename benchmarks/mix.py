"""Mixing caches without replacement against the plain permutation, on W1.

Usage (the project venv's interpreter):

    python benchmarks/mix.py              # full run
    python benchmarks/mix.py --quick      # smoke test: 20,000 samples, 10^5 rows, 1 repeat
    python benchmarks/mix.py --out results.json

What it measures, each in a fresh process that first reads every file of the
caches once (warm page cache), with ``DatasetRuntime(num_workers=2)``:

- W1 (200,000 samples x 1 KiB, the payloads of `benchmarks/workload.py`,
  compression none) written as three caches of 50 %, 30 % and 20 % of the
  samples; one shuffled epoch ``for s in ds`` with ``ReaderConfig(replacement=False)``
  of the plain table (200,000 positions) and of the mix
  ``{0: Mix(repeat=0.5), 1: Mix(repeat=1.5), 2: Mix(repeat=1.5)}``
  (also 200,000 positions), in samples/s; the repeats alternate the two, each
  with a new seed. The target is a mixed/plain ratio of at least 0.95.
- Memory: three caches of 10^7 rows in all (8-byte payloads), opened with
  ``replacement=False``; the process's RSS after reading 20,000 samples of the
  plain table, and of the mix (a fresh process each). The mix holds O(caches)
  for the default table, so the two should be equal within noise.

Figures are medians over the repeats (5, or 1 with --quick) with the min-max
spread. Results: the Markdown table on stdout and the raw figures in
``benchmarks/results/mix-latest.json`` (or --out), with the machine and the commit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import results_file
import workload  # this directory's measurement helpers
from children import Json
from workload import spread

if TYPE_CHECKING:
    import dataset_rt

HERE = Path(__file__).resolve().parent
RUNTIME_THREADS = 2
SHARES = (0.5, 0.3, 0.2)
MEMORY_SAMPLES = 20_000
# Cache 2 read one and a half times: a whole pass and a fresh half.
REPEATS = {0: 0.5, 1: 1.5, 2: 1.5}


def log(message: str) -> None:
    """A progress line, on stderr."""
    print(f"[mix {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def open_dataset(paths: list[str], seed: int, mixed: bool) -> dataset_rt.CachedDataset:
    """The caches at `paths` without replacement, mixed (see the module's docstring) or not."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.ReaderConfig(seed=seed, replacement=False)
    dataset = runtime.cached_dataset(paths, reader_config=config)
    if mixed:
        dataset.set_mix({cache: dataset_rt.Mix(repeat=r) for cache, r in REPEATS.items()})
    return dataset


def child_pass(paths: list[str], seed: int, mixed: bool) -> Json:
    """One timed shuffled epoch."""
    for path in paths:
        workload.warm_page_cache(Path(path))
    dataset = open_dataset(paths, seed, mixed)
    samples = len(dataset)
    result = workload.read_pass(dataset, "shuffled", samples)
    return {"samples_per_second": samples / result["seconds"], **result}


def child_memory(paths: list[str], mixed: bool) -> Json:
    """RSS after opening the caches and reading the first samples."""
    dataset = open_dataset(paths, 0, mixed)
    iterator = iter(dataset)
    for _ in range(MEMORY_SAMPLES):
        next(iterator)
    return {"rss_kib": workload.rss_now_kib(), "peak_rss_kib": workload.peak_rss_kib()}


def child_main(argv: list[str]) -> None:
    """`mix.py child KIND SEED MIXED PATH...`: one measurement's JSON."""
    kind, seed, mixed, *paths = argv
    if kind == "pass":
        result = child_pass(paths, int(seed), mixed == "true")
    else:
        result = child_memory(paths, mixed == "true")
    print(json.dumps(result))


def run_child(kind: str, seed: int, mixed: bool, paths: list[Path]) -> Json:
    """One measurement process; its result."""
    done = subprocess.run(
        [sys.executable, __file__, "child", kind, str(seed), str(mixed).lower(), *map(str, paths)],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return cast(Json, json.loads(done.stdout.strip().splitlines()[-1]))


def write_caches(work: Path, samples: int, payload_bytes: int) -> list[Path]:
    """Three caches of SHARES of `samples` samples under `work`; their paths."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    payloads = workload.make_payloads(payload_bytes, "mixed")
    sources = [
        workload.SyntheticSource(
            f"part{index}",
            int(samples * share),
            payloads,
            dataset_rt.CacheInput,
            workload.metadata_index_only,
        )
        for index, share in enumerate(SHARES)
    ]
    config = dataset_rt.WriterConfig(show_progress=False)
    results = runtime.write_cache(sources, work, writer_config=config)
    paths = []
    for result in results:
        if not isinstance(result, dataset_rt.CacheWriteSuccess):
            raise SystemExit(f"write failed: {result!r}")
        paths.append(result.path)
    return paths


def measure(args: argparse.Namespace, work: Path) -> tuple[dict[str, list[Json]], int, int]:
    samples = 20_000 if args.quick else 200_000
    rows_total = 10**5 if args.quick else 10**7
    repeats = args.repeats or (1 if args.quick else 5)
    rows: dict[str, list[Json]] = {"plain": [], "mixed": [], "memory_plain": [], "memory_mixed": []}
    paths = write_caches(work / "w1", samples, 1024)
    log(f"wrote W1 as three caches: {samples:,} samples")
    for repeat in range(repeats):
        order = [False, True] if repeat % 2 == 0 else [True, False]
        for mixed in order:
            result = run_child("pass", repeat, mixed, paths)
            rows["mixed" if mixed else "plain"].append(result)
            log(f"r{repeat + 1} mixed={mixed}: {result['samples_per_second']:,.0f} samples/s")
    shutil.rmtree(work / "w1", ignore_errors=True)
    large = write_caches(work / "large", rows_total, 8)
    log(f"wrote {rows_total:,} rows")
    for mixed in (False, True):
        result = run_child("memory", 0, mixed, large)
        rows["memory_mixed" if mixed else "memory_plain"].append(result)
        log(f"memory mixed={mixed}: {result}")
    return rows, samples, rows_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "mix-latest.json"))
    parser.add_argument("--work-dir", default=str(HERE / ".work-mix"))
    args = parser.parse_args()
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    try:
        rows, samples, rows_total = measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain = [r["samples_per_second"] for r in rows["plain"]]
    mixed = [r["samples_per_second"] for r in rows["mixed"]]
    ratios = [b / a for a, b in zip(plain, mixed, strict=True)]
    memory = {key: rows[key][0]["rss_kib"] / 1024 for key in ("memory_plain", "memory_mixed")}
    lines = [
        f"# Mixing without replacement ({'quick' if args.quick else 'full'})",
        "",
        f"- W1: {samples:,} x 1 KiB in three caches; {len(plain)} repeats; medians (min-max); "
        f"wall time {time.perf_counter() - started:.0f} s",
        "",
        "| measurement | figure |",
        "| --- | ---: |",
        f"| shuffled epoch, plain replacement=False (samples/s) | {spread(plain)} |",
        f"| shuffled epoch, mixed (samples/s) | {spread(mixed)} |",
        f"| mixed / plain, per repeat pair (target >= 0.95) | {spread(ratios, 3)} |",
        f"| RSS at {rows_total:,} rows, plain (MiB) | {memory['memory_plain']:.1f} |",
        f"| RSS at {rows_total:,} rows, mixed (MiB) | {memory['memory_mixed']:.1f} |",
    ]
    print("\n".join(lines))
    meta = {
        "started": started_at,
        "wall_seconds": time.perf_counter() - started,
        "command": " ".join(["python benchmarks/mix.py", *sys.argv[1:]]),
        "quick": args.quick,
        "machine": workload.machine_info(),
    }
    results = {"meta": meta, "samples": samples, "rows": rows_total, **rows}
    results_file.write_results(Path(args.out), results)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    else:
        main()
