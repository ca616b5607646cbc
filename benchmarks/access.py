"""Sampling without replacement and random access, on W1.

Usage (the project venv's interpreter):

    python benchmarks/access.py              # full run (about 10 seconds)
    python benchmarks/access.py --quick      # smoke test: 20,000 samples, 1 repeat
    python benchmarks/access.py --out results.json

What it measures on W1 (200,000 samples x 1 KiB, the payloads of
`benchmarks/workload.py`, compression none), each in a fresh process that first
reads every file of the cache once (warm page cache), with
``DatasetRuntime(num_workers=2)``:

- one shuffled pass ``for s in ds`` with ``ReaderConfig(replacement=True)``
  (weighted draws, the default) and with ``replacement=False`` (a permutation
  per epoch), in samples/s; the repeats alternate the two, with a new seed each;
- ``ds.get(0, i)`` latency for 2,000 random identities (after 200 warm-up
  calls): median and 99th percentile per call;
- ``ds.get_many(pairs)`` of 10,000 random identities: samples/s (median of 3 calls).

Figures are medians over the repeats (5, or 1 with --quick) with the min-max
spread. Results: the Markdown table on stdout and the raw figures in
``benchmarks/results/access-latest.json`` (or --out).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import workload  # this directory's measurement helpers
from children import Json
from workload import spread

if TYPE_CHECKING:
    import dataset_rt

HERE = Path(__file__).resolve().parent
RUNTIME_THREADS = 2


def log(message: str) -> None:
    """A progress line, on stderr."""
    print(f"[access {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def open_dataset(path: str, seed: int, replacement: bool) -> dataset_rt.CachedDataset:
    """The cache at `path`, shuffled with `seed`, with or without replacement."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.ReaderConfig(seed=seed, replacement=replacement)
    return runtime.cached_dataset([path], reader_config=config)


def child_pass(path: str, seed: int, replacement: bool, samples: int) -> Json:
    """One timed shuffled pass."""
    workload.warm_page_cache(Path(path))
    dataset = open_dataset(path, seed, replacement)
    result = workload.read_pass(dataset, "shuffled", samples)
    return {"samples_per_second": samples / result["seconds"], **result}


def child_access(path: str, seed: int, samples: int) -> Json:
    """Latencies of `get` by identity and the rate of `get_many`."""
    workload.warm_page_cache(Path(path))
    dataset = open_dataset(path, seed, True)
    rng = random.Random(seed)
    for _ in range(200):
        dataset.get(0, rng.randrange(samples))
    latencies = []
    for _ in range(2_000):
        sample_id = rng.randrange(samples)
        start = time.perf_counter()
        dataset.get(0, sample_id)
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    rates = []
    for _ in range(3):
        pairs = [(0, rng.randrange(samples)) for _ in range(10_000)]
        start = time.perf_counter()
        got = dataset.get_many(pairs)
        rates.append(len(got) / (time.perf_counter() - start))
    return {
        "get_median_us": statistics.median(latencies) * 1e6,
        "get_p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
        "get_many_samples_per_second": statistics.median(rates),
    }


def child_main(argv: list[str]) -> None:
    """`access.py child KIND PATH SEED SAMPLES [REPLACEMENT]`: one measurement's JSON."""
    kind, path, seed, samples, *rest = argv
    if kind == "pass":
        result = child_pass(path, int(seed), rest[0] == "true", int(samples))
    else:
        result = child_access(path, int(seed), int(samples))
    print(json.dumps(result))


def run_child(*arguments: object) -> Json:
    """One measurement process; its result."""
    done = subprocess.run(
        [sys.executable, __file__, "child", *map(str, arguments)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return cast(Json, json.loads(done.stdout.strip().splitlines()[-1]))


def write_w1(work: Path, samples: int) -> Path:
    """W1's cache of `samples` samples under `work`; its path."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    source = workload.SyntheticSource(
        "w1", samples, workload.make_payloads(1024, "mixed"), dataset_rt.CacheInput
    )
    config = dataset_rt.WriterConfig(show_progress=False)
    [result] = runtime.write_cache([source], work, writer_config=config)
    if not isinstance(result, dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {result!r}")
    return result.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "access-latest.json"))
    parser.add_argument("--work-dir", default=str(HERE / ".work-access"))
    args = parser.parse_args()
    samples = 20_000 if args.quick else 200_000
    repeats = args.repeats or (1 if args.quick else 5)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    try:
        path = write_w1(work, samples)
        log(f"wrote W1: {samples:,} samples")
        rows: dict[str, list[Json]] = {"replacement": [], "permutation": [], "access": []}
        for repeat in range(repeats):
            order = [True, False] if repeat % 2 == 0 else [False, True]
            for replacement in order:
                result = run_child("pass", path, repeat, samples, str(replacement).lower())
                rows["replacement" if replacement else "permutation"].append(result)
                log(
                    f"r{repeat + 1} replacement={replacement}: "
                    f"{result['samples_per_second']:,.0f} samples/s"
                )
            rows["access"].append(run_child("access", path, repeat, samples))
            log(f"r{repeat + 1} access: {rows['access'][-1]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    with_rates = [r["samples_per_second"] for r in rows["replacement"]]
    without_rates = [r["samples_per_second"] for r in rows["permutation"]]
    pair_ratios = [b / a for a, b in zip(with_rates, without_rates, strict=True)]
    access = rows["access"]
    lines = [
        f"# Sampling without replacement and random access ({'quick' if args.quick else 'full'})",
        "",
        f"- W1: {samples:,} x 1 KiB; {repeats} repeats; medians (min-max); "
        f"wall time {time.perf_counter() - started:.0f} s",
        "",
        "| measurement | figure |",
        "| --- | ---: |",
        f"| shuffled pass, replacement=True (samples/s) | {spread(with_rates)} |",
        f"| shuffled pass, replacement=False (samples/s) | {spread(without_rates)} |",
        f"| replacement=False / True, per repeat pair | {spread(pair_ratios, 3)} |",
        f"| get(), median latency (us) | {spread([a['get_median_us'] for a in access], 1)} |",
        f"| get(), p99 latency (us) | {spread([a['get_p99_us'] for a in access], 1)} |",
        "| get_many(10,000 random), samples/s | "
        f"{spread([a['get_many_samples_per_second'] for a in access])} |",
    ]
    print("\n".join(lines))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"samples": samples, "repeats": repeats, **rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    else:
        main()
