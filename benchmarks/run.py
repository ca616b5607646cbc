"""Benchmark harness: this project against dataset-rt==0.2.4 on identical workloads.

Usage (``just bench [args]`` runs ``python benchmarks/run.py [args]``):

    python benchmarks/run.py                 # full run, 4 repeats
    python benchmarks/run.py --quick         # smoke test: small sizes, 1 repeat
    python benchmarks/run.py --only W1,W2    # a selection of workloads
    python benchmarks/run.py --repeats 6
    python benchmarks/run.py --scale 0.25    # a quarter of the samples of every workload
    python benchmarks/run.py --peers --only W1,W2   # also every peer library (peers.py)

"Ours" is the interpreter running this script with this project's `dataset_rt`
importable (the project venv, or ``PYTHONPATH=python``; `DATASET_RT_LIBRARY`
selects the native library as usual). "Peer" is `dataset-rt==0.2.4` from PyPI in
a virtual environment of its own (same import name), created on first use in
``~/.cache/dataset_rt_bench/peer-0.2.4`` (or ``$DATASET_RT_PEER_VENV``) and
reused afterwards; ``--peer-python`` points at an existing interpreter instead.

Every measurement is one fresh process running ``benchmarks/workload.py`` (the
same script for both sides), so peak RSS is per measurement. The two sides
alternate measurement by measurement, and the side that goes first swaps every
repeat; an even number of repeats (the default is 4) gives each side the first
place equally often, which matters where the second writer of a repeat is
slower. Each read process first reads every file of the cache once with plain
reads (warm page cache for both), then opens the cache and times one pass.
Figures are medians over the repeats; the ratio is ours/peer of the medians.

Results: ``benchmarks/results/run.json`` (committed: ``benchmarks/report.py``
makes the table of docs/benchmarks.md from it, and its history is git's), the
table printed; ``--quick`` runs write to ``benchmarks/results/quick/`` instead
(not committed). Progress goes to stderr. With matplotlib importable, a chart
of the ratios is written beside the JSON as ``run_ratios.png``
(``benchmarks/chart.py`` writes the one in docs/).

With ``--peers``, the same run then measures ours, dataset-rt 0.2.4, LitData,
MosaicML Streaming, Hugging Face datasets and WebDataset on W1 and W2 (write,
ordered, shuffled, peak RSS, a DataLoader epoch with 2 workers), each peer in
a virtual environment of its own (``benchmarks/peers.py``; results in
``peers.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import peer_venvs  # this directory's peer pins and their venvs
import report as doc_report  # this directory's tables (the same as docs/benchmarks.md's)
import workload  # this directory's measurement script, run as a child per figure
from children import Json
from run_measure import run_rw, run_scale, summarize
from run_plan import (
    DEFAULT_REPEATS,
    FULL_SIZES,
    PEER_WORKLOADS,
    QUICK_SIZES,
    READ_PASSES,
    WRITE_SETTLE_SECONDS,
    Spec,
    scaled,
    spec_dict,
)
from run_sides import Runner, check_ours, ensure_peer, log, side_environment

if TYPE_CHECKING:
    import peers

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def parse_arguments() -> argparse.Namespace:
    """The command line (this module's docstring is its help)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and 1 repeat (smoke test)"
    )
    parser.add_argument("--only", help="comma-separated workloads (W1,W1-lz4,W2,W3)")
    parser.add_argument(
        "--repeats", type=int, help="repeats per side (default 4, quick 1; even keeps writes fair)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="DatasetRuntime num_workers (default 2)"
    )
    parser.add_argument("--peer-python", help="an interpreter with dataset-rt 0.2.4 installed")
    parser.add_argument(
        "--work-dir", default=str(HERE / ".work"), help="where caches are written (deleted after)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every workload's sample count (a shorter run; the report says so)",
    )
    parser.add_argument(
        "--results-dir", help="default benchmarks/results (--quick: benchmarks/results/quick)"
    )
    parser.add_argument(
        "--no-chart", action="store_true", help="skip the PNG chart even if matplotlib is present"
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also measure every peer library on W1 and W2 (benchmarks/peers.py)",
    )
    parser.add_argument(
        "--peers-only",
        action="store_true",
        help="measure only the peer libraries (peers.json), not the main stage (run.json)",
    )
    return parser.parse_args()


def chosen_workloads(args: argparse.Namespace) -> tuple[dict[str, Spec], list[str], int]:
    """The sizes of every workload, the selected ones and the repeats, from `args`."""
    if not 0 < args.scale <= 1:
        raise SystemExit(f"--scale must be in (0, 1], got {args.scale}")
    sizes = scaled(QUICK_SIZES if args.quick else FULL_SIZES, args.scale)
    repeats: int = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
    if repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {repeats}")
    if repeats % 2 and repeats > 1:
        log(
            f"warning: {repeats} repeats: ours writes first {repeats // 2 + 1} times, "
            f"the peer {repeats // 2}; an even number keeps the write figures fair"
        )
    selected = list(sizes)
    if args.only:
        selected = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in selected if name not in sizes]
        if unknown:
            raise SystemExit(f"unknown workload(s) {unknown}; choose from {list(sizes)}")
    return sizes, selected, repeats


def main() -> None:
    args = parse_arguments()
    sizes, selected, repeats = chosen_workloads(args)
    check_ours()
    pythons = {"ours": Path(sys.executable), "peer": ensure_peer(args.peer_python)}
    runner = Runner(pythons, args.workers, 0.0 if args.quick else WRITE_SETTLE_SECONDS)
    peers_run = None
    if args.peers or args.peers_only:
        import peers

        peers_run = peers.PeersRun(runner, READ_PASSES, lambda: side_environment("ours"))
        peers_run.prepare()
    out = Path(args.results_dir or (RESULTS / "quick" if args.quick else RESULTS))
    if not args.peers_only:
        run_main(args, runner, sizes, selected, repeats, out)
    if peers_run is not None:
        run_peers(peers_run, args, sizes, selected, repeats, out)


@dataclass(frozen=True)
class Stage:
    """A stage of the run (the main one, or --peers) as it starts: its work folder (made),
    when it started, on what machine, at what load."""

    work: Path
    started: dt.datetime
    machine: Json
    load_start: float
    wall_start: float

    @classmethod
    def begin(cls, args: argparse.Namespace) -> Stage:
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        started = dt.datetime.now().astimezone()
        machine = workload.machine_info()  # the checkout as measured, before anything else runs
        return cls(work, started, machine, os.getloadavg()[0], time.perf_counter())


def run_main(
    args: argparse.Namespace,
    runner: Runner,
    sizes: dict[str, Spec],
    selected: list[str],
    repeats: int,
    out: Path,
) -> None:
    """The main stage: ours against dataset-rt 0.2.4, into ``run.json``."""
    stage = Stage.begin(args)
    log(
        f"workloads {selected}, {repeats} repeat(s), load {stage.load_start:.2f}, "
        f"ours={sys.executable}"
    )
    results: dict[str, Json] = {}
    rows: list[Json] = []
    for name in selected:
        spec = sizes[name]
        log(f"{name}: {spec[0]:,} samples x {spec[1]:,} B, compression {spec[2]}")
        if spec.kind == "scale":
            results[name] = run_scale(runner, name, spec, repeats, stage.work)
        else:
            results[name] = run_rw(runner, name, spec, repeats, stage.work)
        rows += summarize(name, results[name])
    wall = time.perf_counter() - stage.wall_start
    shutil.rmtree(stage.work, ignore_errors=True)
    specs = {name: sizes[name] for name in selected}
    report = {
        "meta": main_meta(args, runner, specs, repeats, stage, wall),
        "rows": rows,
        "workloads": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(report, indent=1) + "\n")
    print(doc_report.render_run(report))
    log(f"done in {wall:.0f} s; wrote {out / 'run.json'}")

    if not args.no_chart:
        draw_chart("write_chart", out / "run.json", out / "run_ratios.png")


def main_meta(
    args: argparse.Namespace,
    runner: Runner,
    specs: dict[str, Spec],
    repeats: int,
    stage: Stage,
    wall: float,
) -> Json:
    """What ``run.json`` says of the main stage: when, how, where, under what load."""
    return {
        "started": stage.started.isoformat(timespec="seconds"),
        "wall_seconds": wall,
        "command": command_line(),
        "quick": args.quick,
        "scale": args.scale,
        "repeats": repeats,
        "workers": args.workers,
        "workloads": {name: spec_dict(spec) for name, spec in specs.items()},
        "machine": stage.machine,
        "load": {
            "start": stage.load_start,
            "end": os.getloadavg()[0],
            "min": min(runner.loads),
            "max": max(runner.loads),
        },
        "steal": steal_summary(runner.steals),
        "ours": {
            **runner.implementations.get("ours", {}),
            "python": str(runner.pythons["ours"]),
        },
        "peer": {
            **runner.implementations.get("peer", {}),
            "python": str(runner.pythons["peer"]),
        },
        "method": (
            "each measurement is a fresh process; sides alternate per measurement and "
            "the first side swaps every repeat; read processes warm the page cache by "
            "reading every cache file once before opening; medians over repeats; "
            "ratio = ours/peer of medians; MB = 1e6 bytes"
        ),
    }


def command_line() -> str:
    """How this run was started, to repeat it: ``python benchmarks/run.py ...``."""
    return " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])


def steal_summary(fractions: list[float]) -> dict[str, float]:
    """The hypervisor's steal over every timed pass: passes measured, median, max."""
    if not fractions:
        return {"passes": 0}
    return {
        "passes": len(fractions),
        "median": statistics.median(fractions),
        "max": max(fractions),
    }


def run_peers(
    peers_run: peers.PeersRun,
    args: argparse.Namespace,
    sizes: dict[str, Spec],
    selected: list[str],
    repeats: int,
    out: Path,
) -> None:
    """The --peers stage: every peer library on the selected W1 and W2."""
    import peers

    names = [name for name in selected if name in PEER_WORKLOADS]
    if not names:
        log(f"--peers: none of {list(PEER_WORKLOADS)} selected, no peers measured")
        return
    stage = Stage.begin(args)
    results: dict[str, Json] = {}
    try:
        for name in names:
            log(f"peers {name}: {sizes[name][0]:,} samples x {sizes[name][1]:,} B")
            results[name] = peers_run.run_workload(name, sizes[name], repeats, stage.work)
    finally:
        shutil.rmtree(stage.work, ignore_errors=True)
    report = {
        "meta": {
            "started": stage.started.isoformat(timespec="seconds"),
            "wall_seconds": time.perf_counter() - stage.wall_start,
            "command": command_line(),
            "quick": args.quick,
            "scale": args.scale,
            "repeats": repeats,
            "workloads": {name: spec_dict(sizes[name]) for name in names},
            "machine": stage.machine,
            "versions": peers_run.versions(),
            "torch": peer_venvs.TORCH.split("==")[1],
            "load": {"min": min(peers_run.loads), "max": max(peers_run.loads)},
            "steal": steal_summary(peers_run.steals),
            "settings": peers.settings(),
            "method": peers.__doc__,
        },
        "workloads": results,
    }
    path = peers.write_report(report, out)
    log(f"wrote {path}")
    if not args.no_chart:
        draw_chart("write_peers_chart", path, out / "peers.png")


def draw_chart(drawer: str, report: Path, png: Path) -> None:
    """`chart.<drawer>(report, png)` where matplotlib is importable."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("matplotlib not installed: no chart (benchmarks/chart.py makes it later)")
        return
    sys.path.insert(0, str(HERE))
    import chart

    draw: Callable[[Path, Path], None] = getattr(chart, drawer)
    draw(report, png)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
