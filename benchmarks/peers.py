"""`run.py --peers`: every peer library on the same W1 and W2 data, one table.

Systems: ours (this project's `dataset_rt`), dataset-rt 0.2.4 (run.py's peer),
LitData, MosaicML Streaming, Hugging Face `datasets` and WebDataset, each of
the last four in its own virtual environment (`peer_venvs.py` pins them and
creates the venvs on first use). Per workload and repeat, each system in turn
(the first system rotates every repeat) runs in fresh processes:

- write: the same samples as `workload.py` makes (payloads, metadata), in the
  system's own format; samples/s and MB/s of the timed write.
- ordered and shuffled: one process each, warm page cache, the same number of
  timed passes from iter() to the last sample for every system (run.py's
  READ_PASSES), each touching every payload's length, and their median; peak
  RSS of the read process is the larger of the two processes' (`VmHWM`).
- loader: one shuffled epoch through 2 DataLoader workers, batch 64, a collate
  that returns the batch's payloads (`training.py`'s child for ours, with
  `dataset_rt.torch.DataLoader`; `training_peers.py` for the peers). dataset-rt
  0.2.4 has no DataLoader of its own and is not measured there.

Each peer is driven the way its own documentation recommends; how, and why,
is `training_peers.SETTINGS`, stored with the results. Then its data is
deleted. Results: ``peers.json`` beside run.py's ``run.json``
(``benchmarks/report.py`` makes the table of docs/benchmarks.md from it);
``python benchmarks/chart.py --peers`` draws ``docs/benchmarks_peers.png``
from it (matplotlib), which run.py also draws into the results folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import children
import peer_venvs
import report as doc_report
import training_peers
from children import Json
from run_plan import Spec
from run_sides import Runner

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

    runner: Runner
    read_passes: dict[str, int]
    ours_environment: Callable[[], dict[str, str]]
    pythons: dict[str, Path] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    steals: list[float] = field(default_factory=list)

    def prepare(self) -> None:
        """Create or reuse every peer's venv."""
        for system in peer_venvs.SYSTEMS:
            self.pythons[system] = peer_venvs.ensure_system(system, log)

    def versions(self) -> dict[str, str]:
        """system -> the version its processes imported (after a workload ran)."""
        implementations = self.runner.implementations
        versions = {
            "ours": implementations.get("ours", {}).get("version", "?"),
            "dataset-rt": implementations.get("peer", {}).get("version", "?"),
        }
        for system, (_label, distribution) in peer_venvs.SYSTEMS.items():
            found = peer_venvs.installed_versions(self.pythons[system], (distribution,))
            versions[system] = (found or {}).get(distribution, "?")
        return versions

    def peer_child(self, system: str, phase: str, *arguments: str) -> Json:
        command = [str(self.pythons[system]), str(PEERS_SCRIPT), phase, "--system", system]
        return self.run(command + list(arguments), peer_venvs.clean_environment())

    def run(self, command: list[str], env: dict[str, str]) -> Json:
        load = os.getloadavg()[0]
        self.loads.append(load)
        try:
            result = children.run_json(command, env, HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise SystemExit(
                f"{' '.join(command[1:4])} failed ({failed.returncode}):\n" + failed.tail(20)
            ) from None
        result["load_at_start"] = load
        self.note_steal(result)
        return result

    def note_steal(self, result: Json) -> None:
        """Keep the steal of a child's timed passes (or of its one epoch)."""
        fractions = result.get("pass_steal_fractions") or [result.get("steal_fraction")]
        self.steals += [fraction for fraction in fractions if fraction is not None]

    # ----------------------------------------------------------------- one system

    def measure(self, system: str, name: str, spec: Spec, where: Path) -> dict[str, Json]:
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

    def measure_dataset_rt(
        self, system: str, name: str, spec: Spec, where: Path
    ) -> dict[str, Json]:
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
            self.note_steal(result[mode])
        if system == "ours":
            command = [
                sys.executable, str(TRAINING), "child", "read", "--cache", write["cache_path"],
                "--mode", "loader", "--workers", str(LOADER_WORKERS),
            ]  # fmt: skip
            result["loader"] = self.run(command, self.ours_environment())
        return result

    # ----------------------------------------------------------------- a workload

    def run_workload(self, name: str, spec: Spec, repeats: int, work: Path) -> Json:
        systems = list(LABELS)
        raw: dict[str, list[dict[str, Json]]] = {system: [] for system in systems}
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


def progress_line(result: dict[str, Json], spec: Spec) -> str:
    count = spec[0]
    parts = [f"write {count / result['write']['seconds']:,.0f}/s"]
    for phase in PHASES[1:]:
        if phase in result:
            one = result[phase]
            parts.append(f"{phase} {one['samples'] / one['seconds']:,.0f}/s")
    return ", ".join(parts)


def spec_dict(spec: Spec) -> dict[str, int | str]:
    count, size, compression, kind, _ = spec
    return {"samples": count, "payload_bytes": size, "compression": compression, "kind": kind}


def figures_of(
    raw: dict[str, list[dict[str, Json]]], spec: Spec
) -> dict[str, dict[str, list[float]]]:
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


def rate(result: Json) -> float:
    """Samples per second of a read."""
    samples: float = result["samples"] / result["seconds"]
    return samples


# --------------------------------------------------------------------------- report


# system -> (write, read, shuffle, DataLoader), as training_peers.SETTINGS has
# them for the peer libraries.
OWN_SETTINGS = {
    "ours": (
        "`DatasetRuntime(num_workers=2).write_cache`, default `WriterConfig` (no "
        "compression; every file fsynced before the cache is published)",
        "`cached_dataset` with `ReaderConfig(seed=0, shuffle=False / True)`; payloads are `bytes`",
        "independent uniform draws over the whole table (weighted, with replacement): "
        "each read is a random access anywhere in the cache",
        "`dataset_rt.torch.DataLoader`; each worker reopens the caches with one native thread",
    ),
    "dataset-rt": (
        "the same API and settings as ours",
        "the same API and settings as ours",
        "weighted draws over the whole table (the sampler this project re-implements)",
        "none of its own; not measured",
    ),
}


def settings() -> dict[str, dict[str, str]]:
    """system -> how each phase drives it and why (OWN_SETTINGS, and
    training_peers.SETTINGS for the peer libraries)."""
    phases = ("write", "read", "shuffle", "loader")
    every = {**OWN_SETTINGS, **training_peers.SETTINGS}
    return {system: dict(zip(phases, every[system], strict=True)) for system in LABELS}


def write_report(report: Json, out: Path) -> Path:
    """``peers.json`` in `out`; the table printed."""
    report["meta"]["labels"] = LABELS
    report["meta"]["columns"] = {figure: list(heading) for figure, heading in COLUMNS.items()}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "peers.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(doc_report.render_peers(report))
    return path
