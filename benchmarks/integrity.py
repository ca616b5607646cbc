"""What checking every record costs: reads with records.crc32c against the same
caches without it.

Usage (the project venv's interpreter):

    python benchmarks/integrity.py              # full run (about 2 minutes)
    python benchmarks/integrity.py --quick      # smoke test: small caches, 1 repeat
    python benchmarks/integrity.py --out results.json

For W1 (200,000 x 1 KiB) and W2 (512 x 1 MiB), compression none, the payloads
of `benchmarks/workload.py`, the cache is written once and copied; the copy's
manifest loses its `record_checksums` entry and its records.crc32c file, which
is how a cache written by dataset-rt looks: the same build then reads it with
the per-record check switched off, and nothing else differs. Each measurement
is a fresh process that reads every file of its cache once (warm page cache),
opens it with ``DatasetRuntime(num_workers=2)`` and times full passes
``for s in ds`` (ordered: ``shuffle=False``; shuffled: the default sampler),
taking the median of 3 passes (5 for W2). Checked and unchecked processes
alternate, in swapped order from repeat to repeat; the figure is the median
over repeats of checked / unchecked per pair, with the min-max spread.

Results: the Markdown table on stdout and the raw figures in
``benchmarks/results/integrity-latest.json`` (or --out).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import workload  # this directory's measurement helpers
from workload import spread

HERE = Path(__file__).resolve().parent
RUNTIME_THREADS = 2
WORKLOADS = {"W1": (200_000, 1024, 3), "W2": (512, 1 << 20, 5)}
QUICK = {"W1": (20_000, 1024, 1), "W2": (64, 1 << 20, 1)}


def log(message: str) -> None:
    print(f"[integrity {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def child_main(path: str, mode: str, passes: int) -> None:
    import dataset_rt

    workload.warm_page_cache(Path(path))
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.ReaderConfig(seed=0, shuffle=mode == "shuffled")
    dataset = runtime.cached_dataset([path], reader_config=config)
    results = [workload.read_pass(dataset, mode, len(dataset)) for _ in range(passes)]
    seconds = statistics.median(r["seconds"] for r in results)
    print(
        json.dumps(
            {
                "samples_per_second": results[0]["samples"] / seconds,
                "bytes_per_second": results[0]["payload_bytes"] / seconds,
                "pass_seconds": [r["seconds"] for r in results],
            }
        )
    )
    del runtime


def run_child(path: Path, mode: str, passes: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "child", str(path), mode, str(passes)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_caches(work: Path, name: str, samples: int, size: int) -> tuple[Path, Path]:
    """The cache as written (checked) and a copy without record checksums."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    kind = "mixed" if size <= 4096 else "random"
    source = workload.SyntheticSource(
        name.lower(), samples, workload.make_payloads(size, kind), dataset_rt.CacheInput
    )
    config = dataset_rt.WriterConfig(show_progress=False)
    [result] = runtime.write_cache([source], work / "checked", writer_config=config)
    checked = result.path
    unchecked = work / "unchecked" / checked.name
    shutil.copytree(checked, unchecked)
    manifest = json.loads((unchecked / "manifest.json").read_text())
    del manifest["record_checksums"]
    (unchecked / "manifest.json").write_text(json.dumps(manifest, indent=2))
    (unchecked / "records.crc32c").unlink()
    return checked, unchecked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", default="W1,W2", help="workloads, comma-separated")
    parser.add_argument("--out", default=str(HERE / "results" / "integrity-latest.json"))
    parser.add_argument("--work-dir", default=str(HERE / ".work-integrity"))
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 6)
    sizes = QUICK if args.quick else WORKLOADS
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    rows: dict[str, dict[str, dict[str, list[dict]]]] = {}
    try:
        for name in args.only.split(","):
            samples, size, passes = sizes[name]
            checked, unchecked = write_caches(work / name, name, samples, size)
            log(f"wrote {name}: {samples:,} x {size:,} B")
            rows[name] = {}
            for mode in ("ordered", "shuffled"):
                runs: dict[str, list[dict]] = {"checked": [], "unchecked": []}
                for repeat in range(repeats):
                    order = ["checked", "unchecked"]
                    if repeat % 2:
                        order.reverse()
                    for which in order:
                        path = checked if which == "checked" else unchecked
                        runs[which].append(run_child(path, mode, passes))
                        log(
                            f"{name} {mode} r{repeat + 1} {which}: "
                            f"{runs[which][-1]['samples_per_second']:,.0f} samples/s"
                        )
                rows[name][mode] = runs
    finally:
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        f"# Per-record checksums: cost on reads ({'quick' if args.quick else 'full'})",
        "",
        f"{repeats} repeats; medians (min-max); wall time {time.perf_counter() - started:.0f} s",
        "",
        "| workload | pass | checked (MB/s) | unchecked (MB/s) | checked / unchecked |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, modes in rows.items():
        for mode, runs in modes.items():
            on = [r["bytes_per_second"] / 1e6 for r in runs["checked"]]
            off = [r["bytes_per_second"] / 1e6 for r in runs["unchecked"]]
            ratios = [a / b for a, b in zip(on, off, strict=True)]
            lines.append(
                f"| {name} | {mode} | {spread(on)} | {spread(off)} | {spread(ratios, 3)} |"
            )
    print("\n".join(lines))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeats": repeats, "quick": args.quick, **rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
