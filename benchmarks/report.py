"""The results tables of the docs, made from the committed benchmark results.

Usage:

    python benchmarks/report.py           # rewrite the docs' tables from benchmarks/results/
    python benchmarks/report.py --check   # exit 1 if a doc's table differs from its results

The harnesses write their results into ``benchmarks/results/`` (`run.py`:
``run.json``, with ``--peers`` also ``peers.json``; `integrity.py`:
``integrity.json``; `process_writers.py`: ``process_writers.json``), and
those files are committed. Each table of the docs
that comes from them sits between two marker lines naming its results file:

    <!-- report.py: run -->
    ...
    <!-- /report.py: run -->

This script rewrites what lies between the markers from the file (here
``benchmarks/results/run.json``) and nothing else; ``--check`` writes nothing
and fails, showing the difference, where a doc does not hold what its results
give (``tests/project/test_benchmarks_report.py`` runs it). The harnesses print the
same tables, from the same functions.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A results file, as json.loads gives it.
Json = dict[str, Any]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The docs that hold generated tables (relative to the checkout).
DOCS = ("docs/benchmarks.md", "docs/integrity.md")
RESULTS = "benchmarks/results"
MIB = 1024 * 1024
MARKER = re.compile(
    r"(?P<open><!-- report\.py: (?P<name>[a-z_]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /report\.py: (?P=name) -->)",
    re.DOTALL,
)


# --------------------------------------------------------------------------- shared


def percent(fraction: float | None) -> str:
    """A fraction as a whole percentage, or "n/a" where it was not measured."""
    return "n/a" if fraction is None else f"{fraction:.0%}"


def spread(values: list[float], digits: int = 0) -> str:
    """The median of `values` with their min-max range: "1,234 (1,100-1,300)"."""
    median, low, high = (
        f"{value:,.{digits}f}" for value in (statistics.median(values), min(values), max(values))
    )
    return f"{median} ({low}-{high})"


def plural(count: int, noun: str) -> str:
    """ "1 repeat", "2 repeats"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def machine_line(machine: Json) -> str:
    """The machine a results file was measured on, in one sentence (the commit stays in the
    results file: docs are reference, their history is git's)."""
    return (
        f"{machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}), "
        f"{machine.get('ram_gib', '?')} GiB RAM, {machine.get('platform', '?')}, "
        f"Python {machine.get('python', '?')}"
    )


def steal_line(steal: Json | None, over: str = "timed passes") -> str:
    """The hypervisor's steal (the share of the machine's CPU time it gave other
    guests, from /proc/stat) over a run's measurements, in one clause."""
    if not steal or not steal.get("passes"):
        return "hypervisor steal not measured"
    return (
        f"hypervisor steal over its {steal['passes']} {over}: median "
        f"{percent(steal['median'])}, at most {percent(steal['max'])}"
    )


def sizes_line(workloads: Json) -> str:
    """ "W1 50,000 samples x 1,024 B, W2 ..." from a results file's workload specs."""
    parts = []
    for name, spec in workloads.items():
        parts.append(f"{name} {spec['samples']:,} samples x {spec['payload_bytes']:,} B")
    return ", ".join(parts)


def run_header(
    meta: Json, workloads: Json, ranges: bool = False, steal_over: str = "timed passes"
) -> list[str]:
    """The lines above a table: when, where, what size, how loaded, how to repeat it."""
    load = meta.get("load", {})
    scale = meta.get("scale", 1.0)
    sizes = "Sizes" if scale == 1.0 else f"Sizes ({scale:g} of the full run's samples)"
    each = " (a process each)" if steal_over == "processes" else ""
    lines = [
        f"- Measured {meta['started']} on {machine_line(meta['machine'])}.",
        f"- {sizes}: {sizes_line(workloads)}; {plural(meta['repeats'], 'repeat')}{each}, "
        f"medians{' (min-max over the repeats)' if ranges else ''}.",
        f"- Load average (1 min) {load.get('min', 0):.1f}-{load.get('max', 0):.1f} over the "
        f"measurements; {steal_line(meta.get('steal'), steal_over)}.",
    ]
    nproc = meta["machine"].get("nproc") or 0
    if load.get("max", 0) > nproc:
        lines.append(
            f"- Other jobs shared the machine (a load above its {nproc} CPUs): figures are "
            "lower, and ratios noisier, than on an otherwise idle machine."
        )
    if meta.get("command"):
        lines.append(f"- Command: `{meta['command']}`.")
    return lines


# --------------------------------------------------------------------------- run.py


def fmt_value(value: float, unit: str) -> str:
    """A figure of run.py's table in its unit."""
    if unit == "s":
        return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"
    if unit == "fraction":
        return f"{value:.0%}"
    if unit == "bytes":
        return f"{value / MIB:,.1f} MiB"
    if unit == "MiB":
        return f"{value:,.0f} MiB"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.1f} {unit}"


def render_run(report: Json) -> str:
    """run.py's table: ours against dataset-rt 0.2.4, with the targets."""
    meta = report["meta"]
    ours, peer = meta.get("ours", {}), meta.get("peer", {})
    lines = [
        *run_header(meta, meta["workloads"]),
        f"- Ours: dataset_rt {ours.get('version', '?')}, polars {ours.get('polars', '?')}; "
        f"peer: dataset-rt {peer.get('version', '?')} from PyPI, "
        f"polars {peer.get('polars', '?')}.",
        "",
        "| workload | figure | ours | peer | ours/peer | target | status |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    same_for_both = ("copy_ceiling_mbps", "disk_ceiling_mbps", "python_floor_sps")
    for row in report["rows"]:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        status = "" if row["pass"] is None else ("PASS" if row["pass"] else "**FAIL**")
        peer_cell = fmt_value(row["peer"], row["unit"])
        if row["figure"] in same_for_both:
            peer_cell = "(same)"
        lines.append(
            f"| {row['workload']} | {row['label']} ({row['unit']}) | "
            f"{fmt_value(row['ours'], row['unit'])} | {peer_cell} | {ratio} | "
            f"{row['target'] or ''} | {status} |"
        )
    passed = sum(1 for row in report["rows"] if row["pass"])
    total = sum(1 for row in report["rows"] if row["pass"] is not None)
    lines += ["", f"Targets met: {passed} of {total}."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- peers


def peer_cell(values: list[float] | None, unit: str) -> str:
    """Median (min-max) of one figure of one system, or "-" where not measured."""
    if not values:
        return "-"
    digits = 1 if unit in ("MB/s", "MB") and statistics.median(values) < 100 else 0
    return spread(values, digits)


def render_peers(report: Json) -> str:
    """`run.py --peers`' table: every system on W1 and W2, and how each was driven."""
    meta = report["meta"]
    labels: dict[str, str] = meta["labels"]
    columns: dict[str, list[str]] = meta["columns"]
    workloads = {name: result["spec"] for name, result in report["workloads"].items()}
    versions = ", ".join(
        labels[system] if version in labels[system] else f"{labels[system]} {version}"
        for system, version in meta["versions"].items()
    )
    head = " | ".join(f"{label} ({unit})" for label, unit in columns.values())
    lines = [
        *run_header(meta, workloads, ranges=True),
        f"- Versions: {versions}; torch {meta['torch']} (CPU build) for every DataLoader.",
        "",
        f"| workload | system | {head} |",
        "| --- | --- |" + " ---: |" * len(columns),
    ]
    for name, result in report["workloads"].items():
        for system, label in labels.items():
            cells = [
                peer_cell(result["figures"][figure].get(system), unit)
                for figure, (_label, unit) in columns.items()
            ]
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "How each system was driven (the settings are stored with the results):",
        "",
        "| system | write | ordered and shuffled reads | shuffle | DataLoader |",
        "| --- | --- | --- | --- | --- |",
    ]
    for system, setting in meta["settings"].items():
        lines.append(
            f"| {labels[system]} | {setting['write']} | {setting['read']} | "
            f"{setting['shuffle']} | {setting['loader']} |"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- integrity


def render_integrity(report: Json) -> str:
    """integrity.py's table: reads with the per-record check against without it."""
    meta = report["meta"]
    lines = [
        *run_header(meta, meta["workloads"], ranges=True, steal_over="processes"),
        "",
        "| workload | pass | checked (MB/s) | unchecked (MB/s) | checked / unchecked "
        "| steal, worst repeat |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, modes in report["workloads"].items():
        for mode, runs in modes.items():
            on = [run["checked"]["bytes_per_second"] / 1e6 for run in runs]
            off = [run["unchecked"]["bytes_per_second"] / 1e6 for run in runs]
            ratios = [run["ratio"] for run in runs]
            steals = [run["steal_fraction"] for run in runs if run["steal_fraction"] is not None]
            lines.append(
                f"| {name} | {mode} | {spread(on)} | {spread(off)} | {spread(ratios, 2)} "
                f"| {percent(max(steals, default=None))} |"
            )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- process writers


def render_process_writers(report: Json) -> str:
    """process_writers.py's table: a PNG-encoding source written with num_processes
    0, 1 and 2, ours against dataset-rt 0.4.8: wall time, CPU time of the process
    and its writer processes, samples/s, the gain over one process, the ratio."""
    meta = report["meta"]
    samples = meta["workloads"]["W1-png"]["samples"]
    seconds, cpu = report["seconds"], report["cpu_seconds"]
    lines = [
        *run_header(meta, meta["workloads"], ranges=True, steal_over="processes"),
        "",
        "| num_processes | side | wall (s) | CPU (s) | samples/s | vs 1 process "
        "| ours / 0.4.8 (speed) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    sides = {"ours": "ours", "dataset-rt 0.4.8": "0.4.8"}
    for processes in seconds["ours"]:
        peer = statistics.median(seconds["dataset-rt 0.4.8"][processes])
        ratio = peer / statistics.median(seconds["ours"][processes])
        for system, label in sides.items():
            walls = seconds[system][processes]
            one = statistics.median(seconds[system]["1"]) / statistics.median(walls)
            lines.append(
                f"| {processes} | {label} | {spread(walls, 2)} "
                f"| {spread(cpu[system][processes], 2)} "
                f"| {spread([samples / wall for wall in walls])} | {one:.2f}x "
                f"| {f'{ratio:.2f}x' if system == 'ours' else ''} |"
            )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- distributed.py

DISTRIBUTED_WAYS = {
    "single": "one process",
    "ray-1": "Ray, 1 CPU",
    "ray-2": "Ray, 2 CPUs",
}


def render_distributed(report: Json) -> str:
    """distributed.py's table: each workload built by one process and by Ray with 1
    and 2 CPUs: Ray's start-up, the build, the commit within it, samples/s, and the
    speed against the single process (build only, and with Ray's start-up)."""
    meta = report["meta"]
    lines = [
        *run_header(meta, meta["workloads"], ranges=True, steal_over="processes"),
        "",
        "| workload | built by | Ray start-up (s) | build (s) | commit (s) | samples/s "
        "| vs one process | with start-up |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by_way in report["figures"].items():
        samples = meta["workloads"][name]["samples"]
        single = statistics.median(by_way["single"]["build_seconds"])
        for way, label in DISTRIBUTED_WAYS.items():
            figures = by_way.get(way)
            if not figures:
                continue
            builds = figures["build_seconds"]
            build = statistics.median(builds)
            startup = figures.get("startup_seconds")
            commit = figures.get("commit_seconds")
            start = statistics.median(startup) if startup else 0.0
            lines.append(
                f"| {name} | {label} | {spread(startup, 2) if startup else ''} "
                f"| {spread(builds, 2)} | {spread(commit, 3) if commit else ''} "
                f"| {spread([samples / b for b in builds])} | {single / build:.2f}x "
                f"| {single / (build + start):.2f}x |"
            )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- remote.py

REMOTE_RUNS = ("cold", "warm", "trusted", "local", "budget")
REMOTE_RUN_LABELS = {
    "cold": "cold",
    "warm": "warm",
    "trusted": "warm, `revalidate=False`",
    "local": "same copy as a local cache",
    "budget": "budget 25 %",
}


def remote_cell(run: Json | None, samples: int, data_bytes: int) -> list[str]:
    """samples/s, wall, open and fetched cells of one run of remote.py."""
    if run is None:
        return ["-"] * 4
    if "skipped" in run:
        return ["skipped", "-", "-", "-"]
    if "failed" in run:
        return ["failed", "-", "-", "-"]
    fetched = run["bytes_fetched"]
    if "timed_out_seconds" in run:
        killed = f"killed at {run['timed_out_seconds']:g} s"
        return [killed, "-", "-", f"{fetched / 1e6:,.1f} ({fetched / data_bytes:.2f}x) so far"]
    wall = run["wall_seconds"]
    if fetched >= 1e5:
        amount = f"{fetched / 1e6:,.1f} ({fetched / data_bytes:.2f}x)"
    else:
        amount = f"{fetched / 1e6:,.3f}" if fetched else "0"
    return [f"{samples / wall:,.0f}", f"{wall:,.2f}", f"{run['open_seconds']:,.2f}", amount]


def remote_targets(name: str, order: str, result: Json, labels: dict[str, str]) -> list[str]:
    """The three targets of one workload and order, one table row each."""
    runs = result["runs"]
    ours = runs["ours"]
    rows = []
    peers = {
        system: run["cold"]["wall_seconds"]
        for system, run in runs.items()
        if system != "ours" and "wall_seconds" in run["cold"]
    }
    if "wall_seconds" in ours["cold"] and peers:
        best = min(peers, key=peers.__getitem__)
        ratio = peers[best] / ours["cold"]["wall_seconds"]
        rows.append(
            f"| {name} | {order} | cold first epoch ahead of the best peer | ours "
            f"{ours['cold']['wall_seconds']:.2f} s, {labels[best]} {peers[best]:.2f} s: "
            f"{ratio:.2f}x | {'PASS' if ratio > 1 else '**FAIL**'} |"
        )
    local = ours.get("local", {})
    for run, how in (("warm", ""), ("trusted", ", `revalidate=False`")):
        warm = ours.get(run, {})
        if "wall_seconds" not in warm or "wall_seconds" not in local:
            continue
        ratio = local["wall_seconds"] / warm["wall_seconds"]
        epoch = local["seconds"] / warm["seconds"]
        rows.append(
            f"| {name} | {order} | warm{how} >= 0.95x of the same copy read locally | "
            f"{ratio:.2f}x (open to last sample: {warm['wall_seconds']:.2f} s against "
            f"{local['wall_seconds']:.2f} s); iteration alone {epoch:.2f}x | "
            f"{'PASS' if ratio >= 0.95 else '**FAIL**'} |"
        )
    rows.append(remote_budget_row(name, order, ours["budget"], result["belady"]))
    return rows


def remote_budget_row(name: str, order: str, budget: Json, minimum: Json | None) -> str:
    """The budget target's row: our fetched bytes over Belady's minimum (for the
    epoch's prefix the budget runs read, where they read one)."""
    target = "budget 25 %: fetched <= 1.1x of Belady's minimum"
    if minimum is None:
        return f"| {name} | {order} | {target} | no minimum (no local copy) | not measured |"
    least = f"Belady's minimum {minimum['min_bytes'] / 1e6:,.1f} MB"
    prefix = minimum.get("prefix")
    if prefix is not None:
        least = (
            f"first {prefix['positions']:,} of {minimum['positions']:,} positions (the "
            f"whole epoch: {least}); Belady's minimum for them "
            f"{prefix['min_bytes'] / 1e6:,.1f} MB"
        )
    if "skipped" in budget:
        return (
            f"| {name} | {order} | {target} | {least}; ours not run: the budget is "
            f"refused (`{budget['skipped'][:60]}...`) | not measured |"
        )
    if "failed" in budget:
        return f"| {name} | {order} | {target} | {least}; ours failed | **FAIL** |"
    if "timed_out_seconds" in budget:
        seconds = budget["timed_out_seconds"]
        return (
            f"| {name} | {order} | {target} | {least}; ours killed at {seconds:g} s after "
            f"{budget['bytes_fetched'] / 1e6:,.1f} MB | not finished |"
        )
    ratio = budget["bytes_fetched"] / (prefix or minimum)["min_bytes"]
    return (
        f"| {name} | {order} | {target} | {least}; ours fetched "
        f"{budget['bytes_fetched'] / 1e6:,.1f} MB: {ratio:.2f}x | "
        f"{'PASS' if ratio <= 1.1 else '**FAIL**'} |"
    )


def remote_belady_lines(report: Json) -> list[str]:
    """One line per workload and order: Belady's minimum and what each system fetched."""
    labels: dict[str, str] = report["meta"]["labels"]
    lines = []
    for name, result in report["workloads"].items():
        for order, measured in result["orders"].items():
            minimum = measured["belady"]
            if minimum is None:
                continue
            fetched = ", ".join(
                f"{labels[system]} {runs['budget']['bytes_fetched'] / 1e6:,.1f} MB of "
                f"{measured['data_bytes'][system] / 1e6:,.1f} MB"
                + (" (killed unfinished)" if "timed_out_seconds" in runs["budget"] else "")
                for system, runs in measured["runs"].items()
                if "bytes_fetched" in runs["budget"] and "skipped" not in runs["budget"]
            )
            line = (
                f"- {name} {order}: our stream reads {minimum['shards']} shards in "
                f"{minimum['shard_accesses']:,} runs; with {minimum['budget_bytes'] / 1e6:,.1f} "
                f"MB kept, Belady's policy fetches {minimum['min_shards']:,} shards, "
                f"{minimum['min_bytes'] / 1e6:,.1f} MB."
            )
            prefix = minimum.get("prefix")
            if prefix is not None:
                line += (
                    f" The budget runs read the first {prefix['positions']:,} positions "
                    f"({prefix['shard_accesses']:,} runs), for which Belady's policy "
                    f"fetches {prefix['min_shards']:,} shards, "
                    f"{prefix['min_bytes'] / 1e6:,.1f} MB."
                )
            lines.append(
                f"{line} Fetched under each system's own 25 % budget: {fetched or 'none measured'}."
            )
    return lines


def render_remote(report: Json) -> str:
    """remote.py's tables: every system's cold, warm and budget reads from the loopback
    S3 server, the targets, Belady's minimum and how each system was driven."""
    meta = report["meta"]
    labels: dict[str, str] = meta["labels"]
    versions = meta["versions"]
    shards = ", ".join(
        f"{name} {result['written']['shard_bytes'] / MIB:g} MiB"
        for name, result in report["workloads"].items()
    )
    lines = [
        *run_header(meta, meta["workloads"], steal_over="processes"),
        f"- Versions: ours {versions['ours']}, MosaicML Streaming {versions['mosaic']}, "
        f"LitData {versions['litdata']}; server moto {versions['moto']} (boto3 "
        f"{versions['boto3']}).",
        f"- Shard and chunk size, every system: {shards}. Warm: {meta['warm']}. Bytes "
        f"fetched: {meta['bytes_fetched']}.",
        "",
        "| workload | order | system | run | samples/s | wall (s) | open (s) "
        "| fetched (MB, x data) |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, result in report["workloads"].items():
        samples = result["spec"]["samples"]
        for order, measured in result["orders"].items():
            for system, runs in measured["runs"].items():
                data = measured["data_bytes"][system]
                for run in REMOTE_RUNS:
                    if run not in runs:
                        continue
                    read = runs[run].get("positions", samples)
                    cells = remote_cell(runs[run], read, data)
                    label = REMOTE_RUN_LABELS[run]
                    if read != samples:
                        label += f", first {read:,} samples"
                    lines.append(
                        f"| {name} | {order} | {labels[system]} | {label} | "
                        + " | ".join(cells)
                        + " |"
                    )
    lines += [
        "",
        "| workload | order | target | figures | status |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, result in report["workloads"].items():
        for order, measured in result["orders"].items():
            lines += remote_targets(name, order, measured, labels)
    lines += ["", *remote_belady_lines(report), "", "| system | how it reads |", "| --- | --- |"]
    lines += [f"| {labels[system]} | {how} |" for system, how in meta["settings"].items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- docs

RENDERERS: dict[str, Callable[[Json], str]] = {
    "run": render_run,
    "peers": render_peers,
    "integrity": render_integrity,
    "process_writers": render_process_writers,
    "remote": render_remote,
    "distributed": render_distributed,
}


def render_doc(text: str, results: Path) -> str:
    """`text` with every marked section rewritten from its results file."""

    def section(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise SystemExit(f"unknown report section {name!r}; known: {sorted(RENDERERS)}")
        path = results / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"section {name!r} needs {path}, which does not exist")
        body = RENDERERS[name](json.loads(path.read_text()))
        return f"{match['open']}{body}{match['close']}"

    return MARKER.sub(section, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 where a doc differs"
    )
    parser.add_argument(
        "--root", default=str(ROOT), help="the checkout (docs/ and benchmarks/results/)"
    )
    args = parser.parse_args(argv)
    root = Path(args.root)
    stale = []
    for doc in DOCS:
        path = root / doc
        text = path.read_text()
        if not MARKER.search(text):
            raise SystemExit(f"{doc} has no report.py section")
        new = render_doc(text, root / RESULTS)
        if new == text:
            continue
        stale.append(doc)
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    f"{doc} (as committed)",
                    f"{doc} (from {RESULTS}/)",
                )
            )
        else:
            path.write_text(new)
            print(f"rewrote the report.py sections of {doc}")
    if args.check and stale:
        print(
            f"\n{', '.join(stale)}: the tables differ from {RESULTS}/*.json; "
            "run `python benchmarks/report.py` and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
