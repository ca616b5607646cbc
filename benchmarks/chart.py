"""Bar chart of the ours/peer ratios in a benchmark report (needs matplotlib).

    python benchmarks/chart.py [benchmarks/results/latest.json] [--out docs/benchmarks_ratios.png]

Every bar is drawn as "times better than the peer": the ratio ours/peer for
throughputs and peer/ours for times, memory and size, so a bar right of 1 is
always in our favour. A tick marks each target.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


SKIPPED_SUFFIXES = ("_mbps", "_ceiling_frac")  # the same ratio as the samples/s row
# Not a comparison of the two libraries: the ratio the disk allows a durable write.
SKIPPED_FIGURES = ("write_bound_sps",)


def advantage(row: dict) -> float | None:
    if row["figure"].endswith(SKIPPED_SUFFIXES) or row["figure"] in SKIPPED_FIGURES:
        return None
    ratio = row.get("ratio")
    if not ratio:
        return None
    return ratio if row["higher_is_better"] else 1.0 / ratio


def target_advantage(row: dict) -> float | None:
    target = row.get("target") or ""
    if target.startswith(">=") and target.endswith("x"):
        return float(target[2:-1])
    if target == "<= peer":
        return 1.0
    return None


def write_chart(report_path: Path, out_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = json.loads(Path(report_path).read_text())
    rows = [row for row in report["rows"] if advantage(row) is not None]
    rows.reverse()  # first row at the top
    labels = [f"{row['workload']}: {row['label']}" for row in rows]
    values = [advantage(row) for row in rows]
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
        f"DatasetRT vs dataset-rt 0.2.4 ({'quick' if meta['quick'] else 'full'} run, "
        f"{meta['started'][:10]}, "
        f"medians of {meta['repeats']}); green PASS, red FAIL, grey no target",
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("report", nargs="?", default=str(HERE / "results" / "latest.json"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks_ratios.png"))
    args = parser.parse_args()
    write_chart(Path(args.report), Path(args.out))
    print(args.out)


if __name__ == "__main__":
    main()
