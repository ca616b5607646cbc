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
import subprocess
import sys
import time
from pathlib import Path

import children  # this directory's runner of measurement processes
import peer_venvs  # this directory's peer pins and their venvs
import report as doc_report  # this directory's tables (the same as docs/benchmarks.md's)
import workload  # this directory's measurement script, run as a child per figure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOAD = HERE / "workload.py"
RESULTS = HERE / "results"
PEER_VERSION = peer_venvs.PINS["dataset-rt"]
PEER_REQUIREMENT = f"dataset-rt=={PEER_VERSION}"
DEFAULT_PEER_VENV = Path.home() / ".cache" / "dataset_rt_bench" / f"peer-{PEER_VERSION}"
SIDES = ("ours", "peer")
MB = 1e6
MIB = 1024 * 1024
CHILD_TIMEOUT = 3600

# name -> (samples, payload bytes, compression, payload kind, kind of workload)
FULL_SIZES = {
    "W1": (200_000, 1024, "none", "mixed", "rw"),
    "W1-lz4": (200_000, 1024, "lz4", "mixed", "rw"),
    "W2": (512, 1 << 20, "none", "random", "rw"),
    "W3": (1_000_000, 64, "none", "mixed", "scale"),
}
QUICK_SIZES = {
    "W1": (20_000, 1024, "none", "mixed", "rw"),
    "W1-lz4": (20_000, 1024, "lz4", "mixed", "rw"),
    "W2": (64, 1 << 20, "none", "random", "rw"),
    "W3": (100_000, 64, "none", "mixed", "scale"),
}
READ_MODES = ("ordered", "ordered_meta", "shuffled")
# Workloads `--peers` measures every peer library on (uncompressed: the peers
# write without compression).
PEER_WORKLOADS = ("W1", "W2")

# Even: the side that writes first swaps every repeat, and writing second can be
# slower (docs/benchmarks.md, "Large writes are slower a few seconds after
# memory was freed"), so each side must write first as often as the other.
DEFAULT_REPEATS = 4
# Seconds of rest before each write process (full runs). Our W2 write started
# right after the peer's was slow in 3 of 5 tries (0.33-0.46 s against 0.27 s,
# the extra time in the kernel), started 2 s later in 0 of 5 and 4 s later in
# 0 of 4; without the rest the peer's W2 write right after ours was slow in the
# first repeat of 4 of 6 full runs (0.97-1.48 s against 0.58-0.63 s). Each
# write gets a machine the other side's write has finished with.
WRITE_SETTLE_SECONDS = 3.0
# Timed passes per read (and copy-ceiling) process, median reported: W2's passes
# take about 0.1 s, too short for one to be timed reliably on a shared machine,
# and single W1 passes (0.3-0.6 s ours) swung by 2x between repeats. The same
# number for both sides.
READ_PASSES = {"W1": 3, "W1-lz4": 3, "W2": 5}

# Targets: figure -> (kind, threshold). "ratio>=": ours/peer >= x; "ratio<=": ours/peer <= x;
# "frac>=": ours' absolute value >= x (a fraction of the copy ceiling or Python floor).
TARGETS = {
    "W1": {
        "write_sps": ("ratio>=", 4.0),
        "read_ordered_sps": ("ratio>=", 8.0),
        "read_ordered_meta_sps": ("ratio>=", 3.0),
        "read_ordered_floor_frac": ("frac>=", 0.6),
        "read_shuffled_sps": ("ratio>=", 8.0),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_read_mib": ("ratio<=", 1.0),
        "peak_rss_read_polars_mib": ("ratio<=", 1.0),
    },
    "W2": {
        "write_sps": ("ratio>=", 2.0),
        "read_ordered_sps": ("ratio>=", 1.5),
        "read_shuffled_sps": ("ratio>=", 1.5),
        "read_ordered_ceiling_frac": ("frac>=", 0.5),
        "read_shuffled_ceiling_frac": ("frac>=", 0.5),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_read_mib": ("ratio<=", 1.0),
        "peak_rss_read_polars_mib": ("ratio<=", 1.0),
    },
    "W3": {
        "open_s": ("ratio<=", 1.0),
        "get_metadata_s": ("ratio<=", 1.0),
        "update_metadata_s": ("ratio<=", 1.0),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_scale_mib": ("ratio<=", 1.0),
    },
}
TARGETS["W1-lz4"] = TARGETS["W1"]

# Measured once per repeat for both sides (shown as "(same)", no ratio).
SAME_FOR_BOTH = ("copy_ceiling_mbps", "disk_ceiling_mbps", "python_floor_sps")

# Workloads whose ordered read is also measured against the per-sample Python
# floor (floor.py: the binding's objects for 1 KiB payloads, no native work).
FLOOR_WORKLOADS = ("W1",)

# figure -> (label, unit, higher is better)
FIGURES = {
    "write_sps": ("write", "samples/s", True),
    "write_mbps": ("write", "MB/s", True),
    "write_durable_sps": ("write, then fsync every cache file", "samples/s", True),
    "read_ordered_sps": ("ordered read, data only", "samples/s", True),
    "read_ordered_mbps": ("ordered read, data only", "MB/s", True),
    "read_ordered_meta_sps": ('ordered read, data + metadata["label"]', "samples/s", True),
    "read_shuffled_sps": ("shuffled read, data only", "samples/s", True),
    "read_shuffled_mbps": ("shuffled read, data only", "MB/s", True),
    "read_after_write_mbps": ("ordered read right after the write (no warm-up)", "MB/s", True),
    "copy_ceiling_mbps": ("copy ceiling (1 copy per sample)", "MB/s", True),
    "read_ordered_ceiling_frac": ("ordered read / copy ceiling", "fraction", True),
    "read_shuffled_ceiling_frac": ("shuffled read / copy ceiling", "fraction", True),
    "python_floor_sps": (
        "Python floor: the binding's per-sample objects alone (floor.py)",
        "samples/s",
        True,
    ),
    "read_ordered_floor_frac": ("ordered read / Python floor", "fraction", True),
    "disk_ceiling_mbps": (
        "disk ceiling (64 MiB files written and fsynced, no hashing)",
        "MB/s",
        True,
    ),
    "write_disk_ceiling_frac": ("write / disk ceiling (the peer does not fsync)", "fraction", True),
    "write_bound_sps": (
        "disk ceiling (ours column) against the peer's write: the most a durable write reaches",
        "samples/s",
        True,
    ),
    "open_s": ("open (cached_dataset)", "s", False),
    "get_metadata_s": ("get_metadata()", "s", False),
    "update_metadata_s": ("update_metadata(new weights)", "s", False),
    "update_metadata_again_s": ("update_metadata, second call", "s", False),
    "first_sample_s": ("first-sample latency, ordered", "s", False),
    "first_sample_after_update_s": ("first-sample latency, shuffled, after update", "s", False),
    "peak_rss_write_mib": ("peak RSS, write process", "MiB", False),
    "peak_rss_read_mib": ("peak RSS, read processes (max)", "MiB", False),
    "peak_rss_read_polars_mib": ("peak RSS, ordered read, polars imported first", "MiB", False),
    "peak_rss_scale_mib": ("peak RSS, open+metadata process", "MiB", False),
    "disk_bytes": ("bytes on disk", "bytes", False),
}


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- environments


def side_environment(side: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if side == "peer":
        # The peer must import its own dataset_rt, never this project's.
        for name in ("PYTHONPATH", "DATASET_RT_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME"):
            env.pop(name, None)
        env["PYTHONNOUSERSITE"] = "1"
    else:
        # Children run in benchmarks/: relative paths given to the harness
        # (PYTHONPATH=python, DATASET_RT_LIBRARY=zig-out/...) must keep their meaning.
        if env.get("PYTHONPATH"):
            entries = env["PYTHONPATH"].split(os.pathsep)
            env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e) if e else e for e in entries)
        if env.get("DATASET_RT_LIBRARY"):
            env["DATASET_RT_LIBRARY"] = os.path.abspath(env["DATASET_RT_LIBRARY"])
    return env


def peer_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = (
        "import importlib.metadata as m, dataset_rt, dataset_rt._dataset_rt; "
        "print(m.version('dataset-rt'))"
    )
    done = subprocess.run(
        [str(python), "-c", probe],
        env=side_environment("peer"),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_peer(explicit: str | None) -> Path:
    """The peer interpreter: given, or a reused/created venv with dataset-rt==0.2.4."""
    if explicit:
        python = Path(explicit)
        version = peer_version(python)
        if version is None:
            raise SystemExit(f"--peer-python {python} cannot import dataset_rt")
        if version != PEER_VERSION:
            log(f"warning: peer interpreter has dataset-rt {version}, not {PEER_VERSION}")
        return python
    venv = Path(os.environ.get("DATASET_RT_PEER_VENV", DEFAULT_PEER_VENV))
    python = venv / "bin" / "python"
    if peer_version(python) == PEER_VERSION:
        log(f"peer: reusing {venv}")
        return python
    peer_venvs.ensure_venv(
        venv, (PEER_REQUIREMENT,), ("dataset-rt",), lambda message: log(f"peer: {message}")
    )
    if peer_version(python) != PEER_VERSION:
        raise SystemExit(f"could not install {PEER_REQUIREMENT} into {venv}")
    return python


def check_ours() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import dataset_rt, dataset_rt._binding.native; print(dataset_rt.__file__)",
        ],
        env=side_environment("ours"),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            "this project's dataset_rt is not importable by the current interpreter "
            "(use the project venv or PYTHONPATH=python):\n" + done.stderr
        )


# --------------------------------------------------------------------------- running


class Runner:
    def __init__(self, pythons: dict[str, Path], workers: int, write_settle: float) -> None:
        self.pythons = pythons
        self.workers = workers
        self.write_settle = write_settle
        self.loads: list[float] = []
        self.steals: list[float] = []
        self.implementations: dict[str, dict] = {}

    def child(self, side: str, phase: str, *arguments: str) -> dict:
        load = os.getloadavg()[0]
        self.loads.append(load)
        command = [
            str(self.pythons[side]),
            str(WORKLOAD),
            phase,
            "--workers",
            str(self.workers),
            *arguments,
        ]
        if phase not in workload.MACHINE_PHASES:
            command += ["--expect", side]
        try:
            result = children.run_json(command, side_environment(side), HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise SystemExit(
                f"{side} {phase} failed ({failed.returncode}):\n{failed.stderr}\n{failed.stdout}"
            ) from None
        result["load_at_start"] = load
        self.steals += [f for f in result.get("pass_steal_fractions", []) if f is not None]
        if result.get("implementation"):
            self.implementations.setdefault(side, result["implementation"])
        return result


def steal_note(result: dict) -> str:
    """ ", steal N %": the most CPU time the hypervisor took from this machine
    during one of a child's timed passes, where it reports it (old results and
    the peer-only phases do not)."""
    fractions = [f for f in result.get("pass_steal_fractions", []) if f is not None]
    return f", steal {max(fractions):.0%}" if fractions else ""


def write_child(runner: Runner, side: str, spec: tuple, base_dir: Path) -> dict:
    """One write process of workload `spec` into `base_dir`, after a rest."""
    count, size, compression, kind, _ = spec
    time.sleep(runner.write_settle)
    return runner.child(
        side,
        "write",
        "--count", str(count),
        "--size", str(size),
        "--compression", compression,
        "--payload-kind", kind,
        "--base-dir", str(base_dir),
    )  # fmt: skip


class Figures(dict[str, dict[str, list[float]]]):
    """Figure name -> side -> one value per repeat, in the order figures are put."""

    def put(self, figure: str, side: str, value: float) -> None:
        self.setdefault(figure, {"ours": [], "peer": []})[side].append(value)


def run_rw(runner: Runner, name: str, spec: tuple, repeats: int, work: Path) -> dict:
    count, size, compression, kind, _ = spec
    passes = READ_PASSES.get(name, 1)
    raw: dict[str, list[dict]] = {side: [] for side in SIDES}
    ceilings: list[dict] = []
    disk_ceilings: list[dict] = []
    floors: list[dict] = []
    for repeat in range(repeats):
        order = SIDES if repeat % 2 == 0 else SIDES[::-1]
        base = work / name / f"r{repeat}"
        shutil.rmtree(base, ignore_errors=True)
        sample: dict[str, dict] = {}
        for side in order:
            write = write_child(runner, side, spec, base / side)
            log(
                f"{name} r{repeat + 1}/{repeats} {side:4} write: {write['seconds']:.3f}s "
                f"({count / write['seconds']:,.0f} samples/s, "
                f"peak {write['peak_rss_kib'] / 1024:.0f} MiB)"
            )
            # The first epoch right after the write, as a job that writes its caches
            # and then trains reads it: nothing read in between.
            after = runner.child(
                side,
                "read",
                "--cache", write["cache_path"],
                "--mode", "ordered",
                "--as-written",
            )  # fmt: skip
            after_mbps = after["payload_bytes"] / after["seconds"] / MB
            log(
                f"{name} r{repeat + 1}/{repeats} {side:4} ordered right after the write: "
                f"{after['seconds']:.3f}s ({after_mbps:,.0f} MB/s)"
            )
            sample[side] = {
                "write": write,
                "reads": {},
                "read_after_write": after,
                "wrote_first": side == order[0],
            }
        for mode in READ_MODES:
            for side in order:
                read = runner.child(
                    side,
                    "read",
                    "--cache", sample[side]["write"]["cache_path"],
                    "--mode", mode,
                    "--passes", str(passes),
                )  # fmt: skip
                if read["payload_bytes"] != count * size and mode != "shuffled":
                    raise SystemExit(
                        f"{side} {mode}: read {read['payload_bytes']} bytes, "
                        f"expected {count * size}"
                    )
                log(
                    f"{name} r{repeat + 1}/{repeats} {side:4} {mode}: {read['seconds']:.3f}s "
                    f"({read['samples'] / read['seconds']:,.0f} samples/s, "
                    f"peak {read['peak_rss_kib'] / 1024:.0f} MiB{steal_note(read)})"
                )
                sample[side]["reads"][mode] = read
            if mode == "ordered" and name in FLOOR_WORKLOADS:
                # The per-sample Python floor, between the two sides' ordered reads
                # of the same repeat (target: a fraction of it, TARGETS).
                floors.append(
                    runner.child("ours", "floor", "--count", str(count), "--passes", str(passes))
                )
                log(
                    f"{name} r{repeat + 1}/{repeats} Python floor: "
                    f"{count / floors[-1]['seconds']:,.0f} samples/s{steal_note(floors[-1])}"
                )
        # A script that uses the metadata table has polars imported when it reads
        # (the peer imports it with dataset_rt, ours only when a table is asked for).
        for side in order:
            sample[side]["read_polars"] = runner.child(
                side,
                "read",
                "--cache", sample[side]["write"]["cache_path"],
                "--mode", "ordered",
                "--passes", str(passes),
                "--import-polars",
            )  # fmt: skip
            log(
                f"{name} r{repeat + 1}/{repeats} {side:4} ordered, polars imported first: "
                f"peak {sample[side]['read_polars']['peak_rss_kib'] / 1024:.0f} MiB"
            )
        if name == "W2":
            ceiling = runner.child(
                "ours",
                "ceiling",
                "--count",
                str(count),
                "--size",
                str(size),
                "--payload-kind",
                kind,
                "--passes",
                str(passes),
            )
            log(
                f"{name} r{repeat + 1}/{repeats} copy ceiling: "
                f"{count * size / ceiling['seconds'] / MB:,.0f} MB/s"
            )
            ceilings.append(ceiling)
            disk = runner.child(
                "ours",
                "disk_ceiling",
                "--count", str(count),
                "--size", str(size),
                "--payload-kind", kind,
                "--base-dir", str(base / "disk_ceiling"),
            )  # fmt: skip
            log(
                f"{name} r{repeat + 1}/{repeats} disk ceiling (written and fsynced): "
                f"{count * size / disk['seconds'] / MB:,.0f} MB/s"
            )
            disk_ceilings.append(disk)
        for side in SIDES:
            raw[side].append(sample[side])
        shutil.rmtree(base, ignore_errors=True)

    figures = Figures()
    put = figures.put

    for side in SIDES:
        for sample in raw[side]:
            write = sample["write"]
            reads = sample["reads"]
            put("write_sps", side, count / write["seconds"])
            put("write_mbps", side, count * size / write["seconds"] / MB)
            put("write_durable_sps", side, count / (write["seconds"] + write["flush_seconds"]))
            for mode in READ_MODES:
                read = reads[mode]
                put(f"read_{mode}_sps", side, read["samples"] / read["seconds"])
                put(f"read_{mode}_mbps", side, read["payload_bytes"] / read["seconds"] / MB)
            put(
                "open_s",
                side,
                statistics.median(reads[mode]["open_seconds"] for mode in READ_MODES),
            )
            put("first_sample_s", side, reads["ordered"]["first_sample_seconds"])
            after = sample["read_after_write"]
            put("read_after_write_mbps", side, after["payload_bytes"] / after["seconds"] / MB)
            put("peak_rss_write_mib", side, write["peak_rss_kib"] / 1024)
            put(
                "peak_rss_read_mib",
                side,
                max(reads[mode]["peak_rss_kib"] for mode in READ_MODES) / 1024,
            )
            put("peak_rss_read_polars_mib", side, sample["read_polars"]["peak_rss_kib"] / 1024)
            put("disk_bytes", side, write["bytes_on_disk"])
    figures.pop("read_ordered_meta_mbps", None)
    extra = {
        "generator_seconds": {
            side: [s["write"]["generator_seconds"] for s in raw[side]] for side in SIDES
        }
    }
    cpu = {"write": {side: [s["write"]["cpu_seconds"] for s in raw[side]] for side in SIDES}}
    for mode in READ_MODES:
        cpu[f"read_{mode}"] = {
            side: [s["reads"][mode]["cpu_seconds"] for s in raw[side]] for side in SIDES
        }
    if ceilings:
        values = [c["payload_bytes"] / c["seconds"] / MB for c in ceilings]
        figures["copy_ceiling_mbps"] = {"ours": values, "peer": values}
        ceiling = statistics.median(values)
        for mode in ("ordered", "shuffled"):
            figures[f"read_{mode}_ceiling_frac"] = {
                side: [statistics.median(figures[f"read_{mode}_mbps"][side]) / ceiling]
                for side in SIDES
            }
    if floors:
        values = [count / f["seconds"] for f in floors]
        figures["python_floor_sps"] = {"ours": values, "peer": values}
        # Per repeat: the ordered read against the floor measured beside it.
        figures["read_ordered_floor_frac"] = {
            side: [
                read / floor
                for read, floor in zip(figures["read_ordered_sps"][side], values, strict=True)
            ]
            for side in SIDES
        }
    if disk_ceilings:
        values = [d["payload_bytes"] / d["seconds"] / MB for d in disk_ceilings]
        figures["disk_ceiling_mbps"] = {"ours": values, "peer": values}
        disk_ceiling = statistics.median(values)
        figures["write_disk_ceiling_frac"] = {
            side: [statistics.median(figures["write_mbps"][side]) / disk_ceiling] for side in SIDES
        }
        # This project publishes only once every file is fsynced (SPEC), so its
        # write cannot beat the disk; the peer does not fsync. The ratio of this
        # row is the highest write ratio the disk allows in this run.
        figures["write_bound_sps"] = {
            "ours": [d["payload_bytes"] / size / d["seconds"] for d in disk_ceilings],
            "peer": list(figures["write_sps"]["peer"]),
        }
    return {
        "spec": spec_dict(spec),
        "figures": figures,
        "cpu_seconds": cpu,
        "extra": extra,
        "raw": raw,
        "ceilings": ceilings,
        "disk_ceilings": disk_ceilings,
        "floors": floors,
    }


def run_scale(runner: Runner, name: str, spec: tuple, repeats: int, work: Path) -> dict:
    count, size, compression, kind, _ = spec
    raw: dict[str, list[dict]] = {side: [] for side in SIDES}
    for repeat in range(repeats):
        order = SIDES if repeat % 2 == 0 else SIDES[::-1]
        base = work / name / f"r{repeat}"
        shutil.rmtree(base, ignore_errors=True)
        sample: dict[str, dict] = {}
        for side in order:
            write = write_child(runner, side, spec, base / side)
            log(f"{name} r{repeat + 1}/{repeats} {side:4} write: {write['seconds']:.3f}s")
            sample[side] = {"write": write, "wrote_first": side == order[0]}
        for side in order:
            scale = runner.child(
                side, "scale", "--cache", sample[side]["write"]["cache_path"], "--count", str(count)
            )
            log(
                f"{name} r{repeat + 1}/{repeats} {side:4} open {scale['open_seconds']:.3f}s, "
                f"get_metadata {scale['get_metadata_seconds']:.3f}s, "
                f"update {scale['update_metadata_seconds']:.3f}s, "
                f"first sample {scale['first_sample_seconds']:.4f}s"
            )
            sample[side]["scale"] = scale
        for side in SIDES:
            raw[side].append(sample[side])
        shutil.rmtree(base, ignore_errors=True)

    figures = Figures()
    put = figures.put

    for side in SIDES:
        for sample in raw[side]:
            write, scale = sample["write"], sample["scale"]
            put("write_sps", side, count / write["seconds"])
            put("write_durable_sps", side, count / (write["seconds"] + write["flush_seconds"]))
            put("open_s", side, scale["open_seconds"])
            put("get_metadata_s", side, scale["get_metadata_seconds"])
            put("update_metadata_s", side, scale["update_metadata_seconds"])
            put("update_metadata_again_s", side, scale["update_metadata_again_seconds"])
            put("first_sample_after_update_s", side, scale["first_sample_seconds"])
            put("peak_rss_write_mib", side, write["peak_rss_kib"] / 1024)
            put("peak_rss_scale_mib", side, scale["peak_rss_kib"] / 1024)
            put("disk_bytes", side, write["bytes_on_disk"])
    return {"spec": spec_dict(spec), "figures": figures, "raw": raw}


def spec_dict(spec: tuple) -> dict:
    count, size, compression, kind, _ = spec
    return {
        "samples": count,
        "payload_bytes": size,
        "compression": compression,
        "payload_kind": kind,
    }


# --------------------------------------------------------------------------- summary


def summarize(name: str, result: dict) -> list[dict]:
    rows = []
    targets = TARGETS.get(name, {})
    for figure, values in result["figures"].items():
        label, unit, higher = FIGURES[figure]
        ours = statistics.median(values["ours"])
        peer = statistics.median(values["peer"])
        ratio = ours / peer if peer else None
        row = {
            "workload": name,
            "figure": figure,
            "label": label,
            "unit": unit,
            "higher_is_better": higher,
            "ours": ours,
            "peer": peer,
            "ratio": ratio,
            "ours_values": values["ours"],
            "peer_values": values["peer"],
            "target": None,
            "pass": None,
        }
        if figure in SAME_FOR_BOTH:
            row["ratio"] = None
        target = targets.get(figure)
        if target:
            kind, threshold = target
            if kind == "ratio>=":
                row["target"] = f">= {threshold:g}x"
                row["pass"] = ratio is not None and ratio >= threshold
            elif kind == "ratio<=":
                row["target"] = "<= peer" if threshold == 1.0 else f"<= {threshold:g}x"
                row["pass"] = ratio is not None and ratio <= threshold
            else:
                bound = "floor" if figure.endswith("floor_frac") else "ceiling"
                row["target"] = f">= {threshold:.0%} of {bound}"
                row["pass"] = ours >= threshold
        rows.append(row)
    return rows


def main() -> None:
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
    args = parser.parse_args()

    if not 0 < args.scale <= 1:
        raise SystemExit(f"--scale must be in (0, 1], got {args.scale}")
    sizes = scaled(QUICK_SIZES if args.quick else FULL_SIZES, args.scale)
    repeats = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
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


def run_main(
    args: argparse.Namespace,
    runner: Runner,
    sizes: dict,
    selected: list[str],
    repeats: int,
    out: Path,
) -> None:
    """The main stage: ours against dataset-rt 0.2.4, into ``run.json``."""
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now().astimezone()
    machine = workload.machine_info()  # the checkout as measured, before anything else runs
    load_start = os.getloadavg()[0]
    wall_start = time.perf_counter()
    log(f"workloads {selected}, {repeats} repeat(s), load {load_start:.2f}, ours={sys.executable}")

    results = {}
    rows: list[dict] = []
    for name in selected:
        spec = sizes[name]
        log(f"{name}: {spec[0]:,} samples x {spec[1]:,} B, compression {spec[2]}")
        if spec[4] == "scale":
            results[name] = run_scale(runner, name, spec, repeats, work)
        else:
            results[name] = run_rw(runner, name, spec, repeats, work)
        rows += summarize(name, results[name])
    wall = time.perf_counter() - wall_start
    shutil.rmtree(work, ignore_errors=True)

    report = {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": wall,
            "command": command_line(),
            "quick": args.quick,
            "scale": args.scale,
            "repeats": repeats,
            "workers": args.workers,
            "workloads": {name: spec_dict(sizes[name]) for name in selected},
            "machine": machine,
            "load": {
                "start": load_start,
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
        },
        "rows": rows,
        "workloads": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(report, indent=1) + "\n")
    print(doc_report.render_run(report))
    log(f"done in {wall:.0f} s; wrote {out / 'run.json'}")

    if not args.no_chart:
        draw_chart("write_chart", out / "run.json", out / "run_ratios.png")


def command_line() -> str:
    """How this run was started, to repeat it: ``python benchmarks/run.py ...``."""
    return " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])


def scaled(sizes: dict, scale: float) -> dict:
    """`sizes` with every sample count times `scale` (at least 8 samples)."""
    return {name: (max(8, round(count * scale)), *rest) for name, (count, *rest) in sizes.items()}


def steal_summary(fractions: list[float]) -> dict:
    """The hypervisor's steal over every timed pass: passes measured, median, max."""
    if not fractions:
        return {"passes": 0}
    return {
        "passes": len(fractions),
        "median": statistics.median(fractions),
        "max": max(fractions),
    }


def run_peers(
    peers_run,
    args: argparse.Namespace,
    sizes: dict,
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
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now().astimezone()
    machine = workload.machine_info()  # the checkout as measured, before anything else runs
    wall_start = time.perf_counter()
    results = {}
    try:
        for name in names:
            log(f"peers {name}: {sizes[name][0]:,} samples x {sizes[name][1]:,} B")
            results[name] = peers_run.run_workload(name, sizes[name], repeats, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": time.perf_counter() - wall_start,
            "command": command_line(),
            "quick": args.quick,
            "scale": args.scale,
            "repeats": repeats,
            "workloads": {name: spec_dict(sizes[name]) for name in names},
            "machine": machine,
            "versions": peers_run.versions(),
            "torch": peers.peer_venvs.TORCH.split("==")[1],
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

    getattr(chart, drawer)(report, png)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
