"""Bar charts of the benchmark reports (needs matplotlib).

    python benchmarks/chart.py [benchmarks/results/run.json] [--out docs/benchmarks_ratios.png]
    python benchmarks/chart.py --peers [benchmarks/results/peers.json]
        [--out docs/benchmarks_peers.png]

The first, of run.py's report: the ours/peer ratios.

Every bar is drawn as "times better than the peer": the ratio ours/peer for
throughputs and peer/ours for times, memory and size, so a bar right of 1 is
always in our favour. A tick marks each target.

With --peers, of the report of ``run.py --peers``: samples/s of each system in
each phase, one panel per workload, log scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import cast

import peers  # this directory's --peers stage: its systems and figures
from children import Json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


SKIPPED_SUFFIXES = ("_mbps", "_ceiling_frac")  # the same ratio as the samples/s row
# Not a comparison of the two libraries: the ratio the disk allows a durable write.
SKIPPED_FIGURES = ("write_bound_sps",)


def advantage(row: Json) -> float | None:
    """How many times better than the peer a row is (None: a row not charted)."""
    if row["figure"].endswith(SKIPPED_SUFFIXES) or row["figure"] in SKIPPED_FIGURES:
        return None
    ratio: float | None = row.get("ratio")
    if not ratio:
        return None
    return ratio if row["higher_is_better"] else 1.0 / ratio


def target_advantage(row: Json) -> float | None:
    """A row's target as an advantage over the peer (None: no ratio target)."""
    target: str = row.get("target") or ""
    if target.startswith(">=") and target.endswith("x"):
        return float(target[2:-1])
    if target == "<= peer":
        return 1.0
    return None


def run_kind(meta: Json) -> str:
    """ "full run", "quick run" or "0.25 of the full run's samples"."""
    if meta.get("quick"):
        return "quick run"
    scale = meta.get("scale", 1.0)
    return "full run" if scale == 1.0 else f"{scale:g} of the full run's samples"


def write_chart(report_path: Path, out_path: Path) -> None:
    """The ours/peer advantage of every row of run.py's report, with its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = cast(Json, json.loads(Path(report_path).read_text()))
    charted = [(row, value) for row in report["rows"] if (value := advantage(row)) is not None]
    charted.reverse()  # first row at the top
    rows = [row for row, _value in charted]
    labels = [f"{row['workload']}: {row['label']}" for row in rows]
    values = [value for _row, value in charted]
    colors = []
    for row in rows:
        if row["pass"] is None:
            colors.append("#9aa5b1")
        else:
            colors.append("#2e8b57" if row["pass"] else "#c0392b")

    fig, axis = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.6))
    positions = range(len(rows))
    axis.barh(list(positions), values, color=colors)
    axis.set_xscale("log")
    axis.axvline(1.0, color="black", linewidth=0.8)
    for position, row, value in zip(positions, rows, values, strict=True):
        goal = target_advantage(row)
        if goal is not None:
            axis.plot([goal, goal], [position - 0.4, position + 0.4], color="black", linewidth=2)
        axis.text(value * 1.04, position, f"{value:.2f}x", va="center", fontsize=7)
    axis.set_yticks(list(positions))
    axis.set_yticklabels(labels, fontsize=7)
    axis.set_xlabel(
        "times better than dataset-rt 0.2.4 (log scale; >1 = ours better; black tick = target)"
    )
    meta = report["meta"]
    axis.set_title(
        f"DatasetRT vs dataset-rt 0.2.4 ({run_kind(meta)}, "
        f"{meta['started'][:10]}, "
        f"medians of {meta['repeats']})\ngreen PASS, red FAIL, grey no target",
        fontsize=9,
    )
    low = min(min(values), 0.5)
    high = max(max(values), max((target_advantage(r) or 1) for r in rows)) * 1.6
    axis.set_xlim(low * 0.8, high)
    fig.tight_layout()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


PEERS_FIGURES = ("write_sps", "ordered_sps", "shuffled_sps", "loader_sps")
PEERS_COLORS = {
    "ours": "#2e8b57",
    "dataset-rt": "#8fbc8f",
    "litdata": "#6a5acd",
    "mosaic": "#d2691e",
    "hf": "#daa520",
    "wds": "#4682b4",
}


def write_peers_chart(report_path: Path, out_path: Path) -> None:
    """One panel per workload: samples/s of each phase, a bar per system, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = cast(Json, json.loads(Path(report_path).read_text()))
    workloads = report["workloads"]
    fig, axes = plt.subplots(1, len(workloads), figsize=(6.5 * len(workloads), 4.6))
    axes = axes if len(workloads) > 1 else [axes]
    width = 0.8 / len(peers.LABELS)
    for axis, (name, result) in zip(axes, workloads.items(), strict=True):
        for offset, (system, label) in enumerate(peers.LABELS.items()):
            positions, heights = [], []
            for index, figure in enumerate(PEERS_FIGURES):
                values = result["figures"][figure].get(system)
                if values:
                    positions.append(index - 0.4 + width * (offset + 0.5))
                    heights.append(statistics.median(values))
            axis.bar(positions, heights, width, label=label, color=PEERS_COLORS[system])
        axis.set_yscale("log")
        axis.set_xticks(range(len(PEERS_FIGURES)))
        axis.set_xticklabels([peers.COLUMNS[f][0] for f in PEERS_FIGURES], fontsize=8)
        spec = result["spec"]
        axis.set_title(f"{name}: {spec['samples']:,} x {spec['payload_bytes']:,} B", fontsize=9)
        axis.set_ylabel("samples/s (log scale, higher is better)", fontsize=8)
        axis.grid(axis="y", which="major", linewidth=0.4)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(peers.LABELS), fontsize=8)
    meta = report["meta"]
    fig.suptitle(
        f"Every peer on the same data ({run_kind(meta)}, "
        f"{meta['started'][:10]}, medians of {meta['repeats']})",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "report", nargs="?", help="default: results/run.json (--peers: results/peers.json)"
    )
    parser.add_argument(
        "--out", help="default: docs/benchmarks_ratios.png (--peers: benchmarks_peers.png)"
    )
    parser.add_argument("--peers", action="store_true", help="the chart of run.py --peers")
    args = parser.parse_args()
    name = "peers" if args.peers else "run"
    report = Path(args.report or HERE / "results" / f"{name}.json")
    out = Path(args.out or ROOT / "docs" / f"benchmarks_{'peers' if args.peers else 'ratios'}.png")
    (write_peers_chart if args.peers else write_chart)(report, out)
    print(out)


if __name__ == "__main__":
    main()
