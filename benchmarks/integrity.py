"""What checking every record costs: reads with records.crc32c against the same
caches without it.

Usage (the project venv's interpreter):

    python benchmarks/integrity.py              # full run (about 2 minutes)
    python benchmarks/integrity.py --quick      # smoke test: small caches, 1 repeat
    python benchmarks/integrity.py --out /tmp/integrity.json

For W1 (200,000 x 1 KiB) and W2 (512 x 1 MiB), compression none, the payloads
of `benchmarks/workload.py`, the cache is written once and copied; the copy's
manifest loses its `record_checksums` entry and its records.crc32c file, which
is how a cache written by dataset-rt looks: the same build then reads it with
the per-record check switched off, and nothing else differs. Each repeat is a
fresh process that reads every file of both caches once (warm page cache),
opens both with one ``DatasetRuntime(num_workers=2)`` and times full passes
``for s in ds`` (ordered: ``shuffle=False``; shuffled: the default sampler)
over the two in turn, in swapped order from round to round: 6 rounds for W1,
20 for W2 (a W2 pass takes about 60 ms). A round's ratio is the checked
pass's speed over the unchecked pass's next to it, so a slow spell of a shared
host falls on both; a repeat's figure is the median over its rounds, and the
table gives the median over repeats with the min-max spread. Hypervisor steal
during each repeat is recorded beside it.

Results: the Markdown table on stdout and the raw figures in
``benchmarks/results/integrity.json`` (committed: ``benchmarks/report.py``
makes the table of docs/integrity.md from it; ``--quick`` writes to
``benchmarks/results/quick/``), or --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import report  # this directory's tables (the same as docs/integrity.md's)
import workload  # this directory's measurement helpers
from children import Json

HERE = Path(__file__).resolve().parent
RUNTIME_THREADS = 2
WORKLOADS = {"W1": (200_000, 1024, 6), "W2": (512, 1 << 20, 20)}
QUICK = {"W1": (20_000, 1024, 2), "W2": (64, 1 << 20, 2)}
SIDES = ("checked", "unchecked")


def log(message: str) -> None:
    """A progress line, on stderr."""
    print(f"[integrity {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def child_main(checked: str, unchecked: str, mode: str, rounds: int) -> None:
    """`integrity.py child CHECKED UNCHECKED MODE ROUNDS`: both caches read in turns."""
    import dataset_rt

    paths = {"checked": checked, "unchecked": unchecked}
    for path in paths.values():
        workload.warm_page_cache(Path(path))
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.ReaderConfig(seed=0, shuffle=mode == "shuffled")
    datasets = {
        side: runtime.cached_dataset([path], reader_config=config) for side, path in paths.items()
    }
    passes: dict[str, list[Json]] = {side: [] for side in SIDES}
    ticks = workload.machine_ticks()
    for round_index in range(rounds):
        for side in SIDES if round_index % 2 == 0 else reversed(SIDES):
            dataset = datasets[side]
            passes[side].append(workload.read_pass(dataset, mode, len(dataset)))
    steal = workload.steal_fraction(ticks, workload.machine_ticks())
    ratios = [
        off["seconds"] / on["seconds"]
        for on, off in zip(passes["checked"], passes["unchecked"], strict=True)
    ]
    figures: dict[str, Json] = {}
    for side in SIDES:
        middle = workload.median_pass(passes[side])
        figures[side] = {
            "samples_per_second": middle["samples"] / middle["seconds"],
            "bytes_per_second": middle["payload_bytes"] / middle["seconds"],
            "pass_seconds": middle["pass_seconds"],
        }
    print(
        json.dumps(
            {
                "ratio": statistics.median(ratios),
                "round_ratios": ratios,
                "steal_fraction": steal,
                **figures,
            }
        )
    )
    del datasets, runtime


def run_child(checked: Path, unchecked: Path, mode: str, rounds: int) -> Json:
    """One read process over both caches; its result and the load at its start."""
    load = os.getloadavg()[0]
    done = subprocess.run(
        [sys.executable, __file__, "child", str(checked), str(unchecked), mode, str(rounds)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = cast(Json, json.loads(done.stdout.strip().splitlines()[-1]))
    return {**result, "load_at_start": load}


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
    if not isinstance(result, dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {result!r}")
    checked = result.path
    unchecked = work / "unchecked" / checked.name
    shutil.copytree(checked, unchecked)
    manifest = json.loads((unchecked / "manifest.json").read_text())
    del manifest["record_checksums"]
    (unchecked / "manifest.json").write_text(json.dumps(manifest, indent=2))
    (unchecked / "records.crc32c").unlink()
    return checked, unchecked


def parse_arguments() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", default="W1,W2", help="workloads, comma-separated")
    parser.add_argument(
        "--out", help="default benchmarks/results/integrity.json (--quick: results/quick/)"
    )
    parser.add_argument("--work-dir", default=str(HERE / ".work-integrity"))
    return parser.parse_args()


def measure_workload(
    work: Path, name: str, spec: tuple[int, int, int], repeats: int
) -> dict[str, list[Json]]:
    """Both caches of workload `name`, then `repeats` processes per read mode."""
    samples, size, rounds = spec
    checked, unchecked = write_caches(work / name, name, samples, size)
    log(f"wrote {name}: {samples:,} x {size:,} B")
    modes: dict[str, list[Json]] = {}
    for mode in ("ordered", "shuffled"):
        runs: list[Json] = []
        for repeat in range(repeats):
            runs.append(run_child(checked, unchecked, mode, rounds))
            log(
                f"{name} {mode} r{repeat + 1}: checked / unchecked {runs[-1]['ratio']:.3f} "
                f"({runs[-1]['checked']['samples_per_second']:,.0f} against "
                f"{runs[-1]['unchecked']['samples_per_second']:,.0f} samples/s, "
                f"steal {report.percent(runs[-1]['steal_fraction'])})"
            )
        modes[mode] = runs
    return modes


def load_and_steal(rows: dict[str, dict[str, list[Json]]]) -> Json:
    """The load range at the processes' starts and the steal over their passes."""
    runs = [run for modes in rows.values() for runs in modes.values() for run in runs]
    steals = [run["steal_fraction"] for run in runs if run["steal_fraction"] is not None]
    loads = [run["load_at_start"] for run in runs]
    return {
        "load": {"min": min(loads), "max": max(loads)},
        "steal": {
            "passes": len(steals),
            "median": statistics.median(steals) if steals else None,
            "max": max(steals, default=None),
        },
    }


def main() -> None:
    args = parse_arguments()
    repeats = args.repeats or (1 if args.quick else 6)
    sizes = QUICK if args.quick else WORKLOADS
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    started_at = dt.datetime.now().astimezone()
    machine = workload.machine_info()  # the checkout as measured, before anything else runs
    rows: dict[str, dict[str, list[Json]]] = {}
    try:
        for name in args.only.split(","):
            rows[name] = measure_workload(work, name, sizes[name], repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        "meta": {
            "started": started_at.isoformat(timespec="seconds"),
            "wall_seconds": time.perf_counter() - started,
            "command": " ".join(["python", "benchmarks/integrity.py", *sys.argv[1:]]),
            "quick": args.quick,
            "repeats": repeats,
            "workloads": {
                name: {"samples": sizes[name][0], "payload_bytes": sizes[name][1]} for name in rows
            },
            "machine": machine,
            **load_and_steal(rows),
        },
        "workloads": rows,
    }
    print(report.render_integrity(results))
    default = HERE / "results" / ("quick" if args.quick else "") / "integrity.json"
    out = Path(args.out or default)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
