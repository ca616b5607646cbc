"""`run.py --peers`: every peer library on the same W1 and W2 data, one table.

Systems: ours (this project's `dataset_rt`), dataset-rt 0.2.4 (run.py's peer),
LitData, MosaicML Streaming, Hugging Face `datasets` and WebDataset, each of
the last four in its own virtual environment (`peer_venvs.py` pins them and
creates the venvs on first use). Per workload and repeat, each system in turn
(the first system rotates every repeat) runs in fresh processes:

- write: the same samples as `workload.py` makes (payloads, metadata), in the
  system's own format; samples/s and MB/s of the timed write.
- ordered and shuffled: one process each, warm page cache, timed passes from
  iter() to the last sample touching each payload's length; peak RSS of the
  read process is the larger of the two processes' peak RSS (`VmHWM`).
- loader: one shuffled epoch through 2 DataLoader workers, batch 64, a collate
  that returns the batch's payloads (`training.py`'s child for ours, with
  `dataset_rt.torch.DataLoader`; `training_peers.py` for the peers). dataset-rt
  0.2.4 has no DataLoader of its own and is not measured there.

Then its data is deleted. Results: ``peers-latest.json`` and ``.md`` beside
run.py's; ``python benchmarks/chart.py --peers`` draws the chart of
``docs/benchmarks_peers.png`` from them (matplotlib), which run.py also draws
into the results folder.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import children
import peer_venvs
import workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRAINING = HERE / "training.py"
PEERS_SCRIPT = HERE / "training_peers.py"
MB = 1e6
CHILD_TIMEOUT = 3600
LOADER_WORKERS = 2
BATCH_SIZE = 64

# system -> label, in table order
LABELS = {
    "ours": "DatasetRT (ours)",
    "dataset-rt": "dataset-rt 0.2.4",
    **{system: label for system, (label, _distribution) in peer_venvs.SYSTEMS.items()},
}
PHASES = ("write", "ordered", "shuffled", "loader")
# figure -> (column heading, unit)
COLUMNS = {
    "write_sps": ("write", "samples/s"),
    "write_mbps": ("write", "MB/s"),
    "ordered_sps": ("ordered", "samples/s"),
    "shuffled_sps": ("shuffled", "samples/s"),
    "loader_sps": ("DataLoader, 2 workers", "samples/s"),
    "peak_rss_read_mib": ("peak RSS, read", "MiB"),
    "disk_mb": ("on disk", "MB"),
}


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[peers {stamp}] {message}", file=sys.stderr, flush=True)


@dataclass
class PeersRun:
    """What `run.py` hands over: its runner (children of `workload.py` for ours and
    dataset-rt 0.2.4), how many passes a read times, and ours' environment."""

    runner: object  # run.Runner: .child(side, phase, *args) and .write_settle
    read_passes: dict[str, int]
    ours_environment: Callable[[], dict[str, str]]
    pythons: dict[str, Path] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)

    def prepare(self) -> None:
        """Create or reuse every peer's venv."""
        for system in peer_venvs.SYSTEMS:
            self.pythons[system] = peer_venvs.ensure_system(system, log)

    def versions(self) -> dict[str, str]:
        """system -> the version its processes imported (after a workload ran)."""
        implementations = getattr(self.runner, "implementations", {})
        versions = {
            "ours": implementations.get("ours", {}).get("version", "?"),
            "dataset-rt": implementations.get("peer", {}).get("version", "?"),
        }
        for system, (_label, distribution) in peer_venvs.SYSTEMS.items():
            found = peer_venvs.installed_versions(self.pythons[system], (distribution,))
            versions[system] = (found or {}).get(distribution, "?")
        return versions

    def peer_child(self, system: str, phase: str, *arguments: str) -> dict:
        command = [str(self.pythons[system]), str(PEERS_SCRIPT), phase, "--system", system]
        return self.run(command + list(arguments), peer_venvs.clean_environment())

    def run(self, command: list[str], env: dict[str, str]) -> dict:
        load = os.getloadavg()[0]
        self.loads.append(load)
        try:
            result = children.run_json(command, env, HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise SystemExit(
                f"{' '.join(command[1:4])} failed ({failed.returncode}):\n" + failed.tail(20)
            ) from None
        result["load_at_start"] = load
        return result

    # ----------------------------------------------------------------- one system

    def measure(self, system: str, name: str, spec: tuple, where: Path) -> dict:
        """write, ordered, shuffled, loader of one system in fresh processes."""
        if system in ("ours", "dataset-rt"):
            return self.measure_dataset_rt(system, name, spec, where)
        count, size, _compression, kind, _ = spec
        data = ["--count", str(count), "--size", str(size), "--payload-kind", kind]
        time.sleep(self.runner.write_settle)
        result = {"write": self.peer_child(system, "write", "--dir", str(where), *data)}
        passes = str(self.read_passes.get(name, 1))
        for mode in ("ordered", "shuffled"):
            result[mode] = self.peer_child(
                system, "read", "--dir", str(where), *data, "--mode", mode, "--passes", passes
            )
        result["loader"] = self.peer_child(
            system, "read", "--dir", str(where), *data, "--mode", "loader",
            "--workers", str(LOADER_WORKERS), "--batch-size", str(BATCH_SIZE),
        )  # fmt: skip
        return result

    def measure_dataset_rt(self, system: str, name: str, spec: tuple, where: Path) -> dict:
        """Ours or dataset-rt 0.2.4 through `workload.py`, as run.py measures them."""
        count, size, compression, kind, _ = spec
        side = "ours" if system == "ours" else "peer"
        time.sleep(self.runner.write_settle)
        write = self.runner.child(
            side, "write",
            "--count", str(count), "--size", str(size), "--compression", compression,
            "--payload-kind", kind, "--base-dir", str(where),
        )  # fmt: skip
        write["dir"] = write["cache_path"]
        result = {"write": write}
        for mode in ("ordered", "shuffled"):
            result[mode] = self.runner.child(
                side, "read", "--cache", write["cache_path"], "--mode", mode,
                "--passes", str(self.read_passes.get(name, 1)),
            )  # fmt: skip
        if system == "ours":
            command = [
                sys.executable, str(TRAINING), "child", "read", "--cache", write["cache_path"],
                "--mode", "loader", "--workers", str(LOADER_WORKERS),
            ]  # fmt: skip
            result["loader"] = self.run(command, self.ours_environment())
        return result

    # ----------------------------------------------------------------- a workload

    def run_workload(self, name: str, spec: tuple, repeats: int, work: Path) -> dict:
        systems = list(LABELS)
        raw: dict[str, list[dict]] = {system: [] for system in systems}
        for repeat in range(repeats):
            shift = repeat % len(systems)
            order = systems[shift:] + systems[:shift]
            for system in order:
                where = work / f"peers-{name}-{system}"
                shutil.rmtree(where, ignore_errors=True)
                try:
                    result = self.measure(system, name, spec, where)
                finally:
                    shutil.rmtree(where, ignore_errors=True)
                    shutil.rmtree(where.with_name("hf-cache"), ignore_errors=True)
                raw[system].append(result)
                log(f"{name} r{repeat + 1}/{repeats} {system}: {progress_line(result, spec)}")
        return {"spec": spec_dict(spec), "figures": figures_of(raw, spec), "raw": raw}


def progress_line(result: dict, spec: tuple) -> str:
    count = spec[0]
    parts = [f"write {count / result['write']['seconds']:,.0f}/s"]
    for phase in PHASES[1:]:
        if phase in result:
            one = result[phase]
            parts.append(f"{phase} {one['samples'] / one['seconds']:,.0f}/s")
    return ", ".join(parts)


def spec_dict(spec: tuple) -> dict:
    count, size, compression, kind, _ = spec
    return {"samples": count, "payload_bytes": size, "compression": compression, "kind": kind}


def figures_of(raw: dict[str, list[dict]], spec: tuple) -> dict[str, dict[str, list[float]]]:
    """figure -> system -> one value per repeat."""
    count, size = spec[0], spec[1]
    figures: dict[str, dict[str, list[float]]] = {figure: {} for figure in COLUMNS}
    for system, results in raw.items():
        for result in results:
            values = {
                "write_sps": count / result["write"]["seconds"],
                "write_mbps": count * size / result["write"]["seconds"] / MB,
                "ordered_sps": rate(result["ordered"]),
                "shuffled_sps": rate(result["shuffled"]),
                "peak_rss_read_mib": max(
                    result[mode]["peak_rss_kib"] for mode in ("ordered", "shuffled")
                )
                / 1024,
                "disk_mb": result["write"]["bytes_on_disk"] / MB,
            }
            if "loader" in result:
                values["loader_sps"] = rate(result["loader"])
            for figure, value in values.items():
                figures[figure].setdefault(system, []).append(value)
    return figures


def rate(result: dict) -> float:
    return result["samples"] / result["seconds"]


# --------------------------------------------------------------------------- report


def cell(values: list[float] | None, unit: str) -> str:
    if not values:
        return "-"
    digits = 1 if unit in ("MB/s", "MB") and statistics.median(values) < 100 else 0
    return workload.spread(values, digits)


def table_lines(report: dict) -> list[str]:
    head = " | ".join(f"{label} ({unit})" for label, unit in COLUMNS.values())
    lines = [
        f"| workload | system | {head} |",
        "| --- | --- |" + " ---: |" * len(COLUMNS),
    ]
    for name, result in report["workloads"].items():
        for system, label in LABELS.items():
            cells = [cell(result["figures"][f].get(system), u) for f, (_l, u) in COLUMNS.items()]
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict) -> str:
    meta = report["meta"]
    machine = meta["machine"]
    versions = ", ".join(
        f"{LABELS[system]}: {version}" for system, version in meta["versions"].items()
    )
    load = meta["load"]
    return "\n".join(
        [
            f"# Every peer on W1 and W2 ({'quick' if meta['quick'] else 'full'} run)",
            "",
            f"- date: {meta['started']}; wall time {meta['wall_seconds']:.0f} s; "
            f"repeats {meta['repeats']}; medians (min-max over the repeats)",
            f"- machine: {machine.get('nproc')} CPUs ({machine.get('cpu', '?')}), "
            f"{machine.get('ram_gib', '?')} GiB RAM, Python {machine['python']}, "
            f"git {machine.get('git', '?')}",
            f"- load average (1 min) over the measurements: {load['min']:.2f}-{load['max']:.2f}",
            f"- versions: {versions}; torch {meta['torch']} (peers' DataLoaders)",
            "",
            *table_lines(report),
            "",
            "ordered / shuffled: one process, warm page cache, each payload's length "
            "read; W2 samples are 1 MiB (MB/s = samples/s x 1.05). DataLoader: one "
            f"shuffled epoch, {LOADER_WORKERS} workers, batch {BATCH_SIZE}. peak RSS, read: "
            "the larger peak RSS (VmHWM) of the ordered and the shuffled process.",
            "",
        ]
    )


def write_report(report: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "peers-latest.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    path.with_suffix(".md").write_text(table)
    print(table)
    return path
