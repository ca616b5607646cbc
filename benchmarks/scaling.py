"""How cost grows with the number of samples: this project against dataset-rt 0.2.4.

Usage (the project venv's interpreter):

    python benchmarks/scaling.py                 # full run: 10^4 to 10^7 samples, 3 repeats
    python benchmarks/scaling.py --no-largest    # without 10^7 (about half the time)
    python benchmarks/scaling.py --quick         # smoke test: 10^4 and 10^5, 1 repeat
    python benchmarks/scaling.py --from-json benchmarks/results/scaling-latest.json
                                                 # the table and chart again, no measuring

Each size is a cache of that many 16-byte random payloads with one int column
(`{"index": i}`), compression none, written and then opened by each side. Every
figure comes from a fresh process running `benchmarks/workload.py` under the
side's own interpreter (the peer's virtual environment is the one `run.py`
creates and reuses):

- `write`: the `write_cache` call, in samples/s, and the CPU time of all the
  process's threads during it, per sample (less sensitive to other load on the
  machine than wall time); the process's peak RSS;
- `open`: page cache warmed, dataset_rt and polars imported, RSS taken as the
  baseline; then `cached_dataset([path])` (the open time), RSS and peak RSS,
  `get_metadata()` (its time), RSS and peak RSS; then 5 fresh runtimes and
  datasets per order, shuffled and ordered alternating, each timed from
  `iter()` to the first sample (the process's figure is their median).

Memory is reported as bytes per sample: peak RSS at open (and after
`get_metadata()`) minus the baseline, divided by the number of samples. At
small sizes fixed costs (the library's threads and buffers) dominate it.

The sides alternate process by process and the side that goes first swaps
every repeat and every size; write processes of 10^6 samples and more start
after the rest `run.py` uses. Figures are medians over the repeats with the
min-max range. Growth is checked as the slope of log(cost) against
log(samples) between consecutive sizes: 1 is linear; a slope above
`SLOPE_LINEAR_MAX` is reported as growing faster than linearly.

Results: ``benchmarks/results/scaling-latest.json`` and ``scaling-latest.md``
(also printed) and, with matplotlib importable, the log-log chart
``docs/benchmarks_scaling.png`` (``--chart``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import run_sides  # the peer's environment and the child runner
import workload  # the measurement script each child runs
from children import Json
from run_plan import WRITE_SETTLE_SECONDS
from workload import spread

# samples -> figure -> side -> {"values": [...], "median", "min", "max"}
Summary = dict[int, dict[str, dict[str, Json]]]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIZES = (10_000, 100_000, 1_000_000, 5_000_000)
SIZE_LARGEST = 10_000_000
SIZES_QUICK = (10_000, 100_000)
PAYLOAD_BYTES = 16
DEFAULT_REPEATS = 3
FIRST_SAMPLE_TRIES = 5
# Writes this large get the rest before them that run.py gives every write.
SETTLE_SAMPLES_MIN = 1_000_000
# Noise allowance: a slope up to this counts as linear.
SLOPE_LINEAR_MAX = 1.15

# figure -> (label, unit, higher is better)
FIGURES = {
    "write_sps": ("write", "samples/s", True),
    "write_cpu_us": ("write, CPU time of all threads", "us/sample", False),
    "open_s": ("open (cached_dataset)", "ms", False),
    "first_sample_shuffled_s": ("first sample, shuffled (iter to next)", "ms", False),
    "first_sample_ordered_s": ("first sample, ordered (iter to next)", "ms", False),
    "get_metadata_s": ("get_metadata()", "ms", False),
    "get_metadata_again_s": ("get_metadata(), second call", "ms", False),
    "rss_open_bytes": ("peak RSS at open over the baseline", "bytes/sample", False),
    "rss_metadata_bytes": ("peak RSS after get_metadata over the baseline", "bytes/sample", False),
    "peak_rss_metadata_mib": ("peak RSS after get_metadata", "MiB", False),
    "peak_rss_write_mib": ("peak RSS, write process", "MiB", False),
    "disk_bytes": ("bytes on disk", "bytes/sample", False),
}
# The cost whose growth a figure shows: figure -> function(samples, median of the figure).
COSTS: dict[str, Callable[[int, float], float]] = {
    "write_sps": lambda samples, value: samples / value,  # seconds
    "write_cpu_us": lambda samples, value: samples * value,
    "open_s": lambda samples, value: value,
    "first_sample_shuffled_s": lambda samples, value: value,
    "first_sample_ordered_s": lambda samples, value: value,
    "get_metadata_s": lambda samples, value: value,
    "get_metadata_again_s": lambda samples, value: value,
    "rss_open_bytes": lambda samples, value: samples * value,  # bytes over the baseline
    "rss_metadata_bytes": lambda samples, value: samples * value,
    "disk_bytes": lambda samples, value: samples * value,
}


def log(message: str) -> None:
    print(f"[scaling {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- measuring


def measure_size(runner: run_sides.Runner, samples: int, first: int, work: Path) -> dict[str, Json]:
    """One repeat at one size: both sides write, then both sides open."""
    order = run_sides.SIDES if first % 2 == 0 else run_sides.SIDES[::-1]
    base = work / f"n{samples}"
    shutil.rmtree(base, ignore_errors=True)
    measured: dict[str, Json] = {}
    try:
        for side in order:
            if samples >= SETTLE_SAMPLES_MIN:
                time.sleep(runner.write_settle)
            write = runner.child(
                side, "write", "--count", str(samples), "--size", str(PAYLOAD_BYTES),
                "--payload-kind", "random", "--metadata", "index", "--base-dir", str(base / side),
            )  # fmt: skip
            measured[side] = {"write": write}
        for side in order:
            cache = measured[side]["write"]["cache_path"]
            measured[side]["open"] = runner.child(
                side, "open", "--cache", cache, "--count", str(samples),
                "--passes", str(FIRST_SAMPLE_TRIES),
            )  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for side in order:
        log(f"{samples:>10,} {side:4} " + describe(figures_of(measured[side], samples)))
    return measured


def figures_of(measured: Json, samples: int) -> dict[str, float]:
    """The figures of one side's write and open processes."""
    write, opened = measured["write"], measured["open"]
    baseline_bytes = opened["rss_baseline_kib"] * 1024
    return {
        "write_sps": samples / write["seconds"],
        "write_cpu_us": write["cpu_seconds"] / samples * 1e6,
        "open_s": opened["open_seconds"],
        "first_sample_shuffled_s": statistics.median(opened["first_sample_shuffled_seconds"]),
        "first_sample_ordered_s": statistics.median(opened["first_sample_ordered_seconds"]),
        "get_metadata_s": opened["get_metadata_seconds"],
        "get_metadata_again_s": opened["get_metadata_again_seconds"],
        "rss_open_bytes": (opened["peak_rss_open_kib"] * 1024 - baseline_bytes) / samples,
        "rss_metadata_bytes": (opened["peak_rss_metadata_kib"] * 1024 - baseline_bytes) / samples,
        "peak_rss_metadata_mib": opened["peak_rss_metadata_kib"] / 1024,
        "peak_rss_write_mib": write["peak_rss_kib"] / 1024,
        "disk_bytes": write["bytes_on_disk"] / samples,
    }


def describe(figures: dict[str, float]) -> str:
    """One side's figures at one size, in a progress line."""
    return (
        f"write {figures['write_sps']:,.0f}/s, open {figures['open_s'] * 1e3:.1f} ms, "
        f"first {figures['first_sample_shuffled_s'] * 1e3:.2f}/"
        f"{figures['first_sample_ordered_s'] * 1e3:.2f} ms, "
        f"get_metadata {figures['get_metadata_s'] * 1e3:.1f} ms, "
        f"RSS {figures['rss_open_bytes']:.1f}/{figures['rss_metadata_bytes']:.1f} B/sample"
    )


# --------------------------------------------------------------------------- summary


def summarize(raw: dict[int, dict[str, list[Json]]]) -> Summary:
    """samples -> figure -> side -> {"values", "median", "min", "max"}."""
    summary: Summary = {}
    for samples, sides in raw.items():
        per_figure: dict[str, dict[str, list[float]]] = {}
        for side, repeats in sides.items():
            for one in repeats:
                for figure, value in figures_of(one, samples).items():
                    per_figure.setdefault(figure, {}).setdefault(side, []).append(value)
        summary[samples] = {
            figure: {
                side: {
                    "values": values,
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
                for side, values in by_side.items()
            }
            for figure, by_side in per_figure.items()
        }
    return summary


def slopes(summary: Summary) -> dict[str, dict[str, list[float | None]]]:
    """figure -> side -> the log-log slope of its cost between consecutive sizes."""
    sizes = sorted(summary)
    result: dict[str, dict[str, list[float | None]]] = {}
    for figure, cost in COSTS.items():
        for side in run_sides.SIDES:
            row: list[float | None] = []
            for low, high in zip(sizes, sizes[1:], strict=False):
                cost_low = cost(low, summary[low][figure][side]["median"])
                cost_high = cost(high, summary[high][figure][side]["median"])
                if cost_low <= 0 or cost_high <= 0:
                    row.append(None)  # no growth over the baseline to take a log of
                else:
                    row.append(math.log(cost_high / cost_low) / math.log(high / low))
            result.setdefault(figure, {})[side] = row
    return result


def scaled(value: float, unit: str) -> float:
    """A figure in the unit the table shows it in (seconds as ms)."""
    return value * 1e3 if unit == "ms" else value


def markdown(report: Json) -> str:
    """The Markdown report: how each cost grows with the samples, ours and the peer's."""
    meta = report["meta"]
    machine = meta["machine"]
    summary = {int(samples): figures for samples, figures in report["summary"].items()}
    sizes = sorted(summary)
    lines = [
        f"# How cost grows ({'quick' if meta['quick'] else 'full'} run)",
        "",
        f"- date: {meta['started']}; wall time {meta['wall_seconds']:.0f} s; "
        f"repeats: {meta['repeats']}; num_workers: {meta['workers']}",
        f"- machine: {machine.get('nproc')} CPUs ({machine.get('cpu', '?')}), "
        f"{machine.get('ram_gib', '?')} GiB RAM, Python {machine['python']}, "
        f"{machine['platform']}; load average (1 min) {meta['load']['min']:.2f}-"
        f"{meta['load']['max']:.2f} over the measurements",
        f"- ours: dataset_rt {meta['ours'].get('version', '?')} (git {machine.get('git', '?')}); "
        f"peer: dataset-rt {meta['peer'].get('version', '?')}",
        f"- {PAYLOAD_BYTES}-byte random payloads, one int column; medians (min-max)",
        "",
        "| samples | figure | ours | peer | ours/peer |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for samples in sizes:
        for figure, (label, unit, _higher) in FIGURES.items():
            cells = []
            for side in run_sides.SIDES:
                values = [scaled(v, unit) for v in summary[samples][figure][side]["values"]]
                digits = 0 if unit in ("samples/s", "MiB") else 2
                cells.append(spread(values, digits))
            ours = summary[samples][figure]["ours"]["median"]
            peer = summary[samples][figure]["peer"]["median"]
            ratio = f"{ours / peer:.2f}x" if peer else ""
            lines.append(f"| {samples:,} | {label} ({unit}) | {cells[0]} | {cells[1]} | {ratio} |")
    steps = [f"{low:.0e}-{high:.0e}" for low, high in zip(sizes, sizes[1:], strict=False)]
    lines += [
        "",
        "Growth of each cost (write: seconds; memory: bytes over the baseline): the slope "
        "of log(cost) against log(samples) between consecutive sizes, 1 = linear; "
        f"above {SLOPE_LINEAR_MAX} counts as faster than linear.",
        "",
        "| cost | side | " + " | ".join(steps) + " | faster than linear |",
        "| --- | --- | " + " | ".join("---:" for _ in steps) + " | --- |",
    ]
    for figure, by_side in report["slopes"].items():
        for side, row in by_side.items():
            cells = ["-" if slope is None else f"{slope:.2f}" for slope in row]
            faster = [
                step
                for step, slope in zip(steps, row, strict=True)
                if slope and slope > SLOPE_LINEAR_MAX
            ]
            lines.append(
                f"| {FIGURES[figure][0]} | {side} | " + " | ".join(cells) + f" | "
                f"{', '.join(faster) if faster else 'no'} |"
            )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- chart

# (figures drawn in the panel, the first solid-marked; title)
CHART_PANELS = (
    (("write_sps",), "write (samples/s; flat = linear cost)"),
    (("open_s",), "open (s)"),
    (("get_metadata_s",), "get_metadata() (s)"),
    (("first_sample_shuffled_s",), "first sample, shuffled (s)"),
    (("first_sample_ordered_s",), "first sample, ordered (s)"),
    (
        ("rss_metadata_bytes", "rss_open_bytes"),
        "peak RSS over the baseline (bytes/sample):\nafter get_metadata, and at open (hollow)",
    ),
)


def write_chart(report: Json, out_path: Path) -> None:
    """A panel per cost against the samples, log-log, both sides (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = {int(samples): figures for samples, figures in report["summary"].items()}
    sizes = sorted(summary)
    figure, axes = plt.subplots(2, 3, figsize=(12, 7))
    styles = {"ours": ("#2e8b57", "-", "o"), "peer": ("#c0392b", "--", "s")}
    for axis, (names, title) in zip(axes.flat, CHART_PANELS, strict=True):
        for position, name in enumerate(names):
            for side, (color, line, marker) in styles.items():
                one = [summary[n][name][side] for n in sizes]
                medians = [figures["median"] for figures in one]
                spread_low = [m - f["min"] for m, f in zip(medians, one, strict=True)]
                spread_high = [f["max"] - m for m, f in zip(medians, one, strict=True)]
                label = "ours" if side == "ours" else f"dataset-rt {run_sides.PEER_VERSION}"
                axis.errorbar(
                    sizes, medians, yerr=[spread_low, spread_high], color=color, linestyle=line,
                    marker=marker, markersize=4, capsize=2, label=None if position else label,
                    markerfacecolor=color if position == 0 else "none",
                )  # fmt: skip
        name = names[0]
        if name in ("open_s", "get_metadata_s"):
            # A linear-cost guide through the peer's largest point.
            anchor = summary[sizes[-1]][name]["peer"]["median"]
            axis.plot(
                sizes, [anchor * n / sizes[-1] for n in sizes], color="grey", linestyle=":",
                linewidth=1, label="linear",
            )  # fmt: skip
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("samples", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(True, which="major", linewidth=0.3)
    axes.flat[0].legend(fontsize=7)
    axes.flat[1].legend(fontsize=7)
    meta = report["meta"]
    figure.suptitle(
        f"How cost grows: {PAYLOAD_BYTES}-byte payloads, one int column "
        f"({meta['started'][:10]}, medians of {meta['repeats']}, bars min-max)",
        fontsize=10,
    )
    figure.tight_layout()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path, dpi=110)
    plt.close(figure)


# --------------------------------------------------------------------------- main


def measure(args: argparse.Namespace) -> Json:
    """Run every size and repeat; the report with its raw results."""
    sizes = SIZES_QUICK if args.quick else SIZES + (() if args.no_largest else (SIZE_LARGEST,))
    repeats = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
    if repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {repeats}")
    run_sides.check_ours()
    pythons = {"ours": Path(sys.executable), "peer": run_sides.ensure_peer(args.peer_python)}
    runner = run_sides.Runner(pythons, args.workers, 0.0 if args.quick else WRITE_SETTLE_SECONDS)
    work = Path(args.work_dir)
    started = dt.datetime.now().astimezone()
    wall_start = time.perf_counter()
    log(f"sizes {list(sizes)}, {repeats} repeat(s), ours={sys.executable}")
    raw: dict[int, dict[str, list[Json]]] = {}
    try:
        for repeat in range(repeats):
            for index, samples in enumerate(sizes):
                measured = measure_size(runner, samples, repeat + index, work)
                for side in run_sides.SIDES:
                    raw.setdefault(samples, {}).setdefault(side, []).append(measured[side])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": time.perf_counter() - wall_start,
            "quick": args.quick,
            "repeats": repeats,
            "workers": args.workers,
            "sizes": list(sizes),
            "payload_bytes": PAYLOAD_BYTES,
            "machine": workload.machine_info(),
            "load": {"min": min(runner.loads), "max": max(runner.loads)},
            "ours": {**runner.implementations.get("ours", {}), "python": str(pythons["ours"])},
            "peer": {**runner.implementations.get("peer", {}), "python": str(pythons["peer"])},
        },
        "raw": raw,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10^4 and 10^5, 1 repeat")
    parser.add_argument(
        "--no-largest", action="store_true", help=f"leave out {SIZE_LARGEST:,} samples"
    )
    parser.add_argument("--repeats", type=int, help=f"default {DEFAULT_REPEATS}, quick 1")
    parser.add_argument("--workers", type=int, default=2, help="DatasetRuntime num_workers")
    parser.add_argument("--peer-python", help="an interpreter with dataset-rt 0.2.4 installed")
    parser.add_argument("--work-dir", default=str(HERE / ".work-scaling"))
    parser.add_argument("--results-dir", default=str(HERE / "results"))
    parser.add_argument(
        "--chart",
        default=str(ROOT / "docs" / "benchmarks_scaling.png"),
        help="where the log-log chart goes ('' for none)",
    )
    parser.add_argument(
        "--from-json",
        help="measure nothing: the table and chart again from a results file's raw figures",
    )
    args = parser.parse_args()
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        report["raw"] = {int(samples): sides for samples, sides in report["raw"].items()}
    else:
        report = measure(args)
    report["summary"] = summarize(report["raw"])
    report["slopes"] = slopes(report["summary"])
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling-latest.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(json.loads(json.dumps(report)))
    (out / "scaling-latest.md").write_text(table)
    print(table)
    log(f"wrote scaling-latest.json and scaling-latest.md in {out}")
    if args.chart:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            log("matplotlib not installed: no chart")
            return
        write_chart(report, Path(args.chart))
        log(f"wrote {args.chart}")


if __name__ == "__main__":
    main()
