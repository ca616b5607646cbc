"""Training-loader benchmark: a DatasetRT cache read through torch DataLoaders.

Usage (the project venv's interpreter, with torch and Pillow installed):

    python benchmarks/training.py                  # full run (about 6 minutes)
    python benchmarks/training.py --quick          # smoke test: small sizes, 1 repeat
    python benchmarks/training.py --no-peers       # DatasetRT only
    python benchmarks/training.py --out results.json

What it measures, in samples/s over one full epoch (from ``iter(loader)`` to
the last batch; opening the dataset and building the loader are not timed):

- W1 (200,000 samples x 1 KiB, half random, half a repeated pattern: the
  payloads of `benchmarks/workload.py`), shuffled, batch 64:
  ``for s in ds`` in one process (the reference, no torch), and
  ``dataset_rt.torch.DataLoader(ds, batch_size=64, num_workers=W)`` for
  W = 0, 1, 2 with a module-level collate that returns the batch's payloads.
  Time to the first batch (worker start-up included) is reported apart, and
  the steady rate is the rest of the epoch without it. A ceiling row: torch's
  DataLoader with 2 workers over an IterableDataset that reads nothing and
  yields fresh 1 KiB payloads (what any reader's workers can deliver here).
- PNG decode (20,000 RGB PNGs of 96x96, photo-like content: a smooth field
  plus noise, about 19 KB each; a pool of 2,000 distinct images cycled),
  shuffled: ``torch.utils.data.DataLoader(ds.to_torch_iterable_dataset(
  transform=decode_png, batch_size=64), batch_size=64, num_workers=W)`` for
  W = 0, 1, 2; `decode_png` runs Pillow and makes a uint8 HxWx3 tensor in the
  worker, the default collate stacks the batch. Decode-bound: the speedup of
  W=2 over W=0 is the figure.
- Peers on the same W1 data, 2 workers, batch 64, shuffled, same collate
  (`benchmarks/training_peers.py`, run under a virtual environment of its own,
  created on first use in ``~/.cache/dataset_rt_bench/loaders`` or
  ``$DATASET_RT_LOADERS_VENV``): LitData (``optimize`` then
  ``StreamingDataset`` + ``StreamingDataLoader``) and MosaicML Streaming
  (``MDSWriter`` then ``StreamingDataset(local=..., predownload=...)`` + torch
  DataLoader), with the settings of ``training_peers.SETTINGS``.

Method, as `benchmarks/run.py`: every measurement is a fresh process (this
script with ``child``, or the peer script) that first reads every file of the
data once (warm page cache), and prints one JSON object on its last stdout
line. The caches are written once per run; the repeats go round-robin over
the rows so that a change of machine load hits every row alike. Figures are
medians over the repeats (5 for W1 rows, 3 for decode rows; 1 with --quick),
with the min-max spread. Each measurement records the 1-minute load average
at its start and "other CPU": the machine's busy CPU time during the timed
epoch (/proc/stat) less this measurement's own (main process and reaped
workers), in cores. Peak RSS is the high-water mark (VmHWM) of the main process
and, for the workers, the largest of its reaped children (fork workers count the
parent's pages they touch).

DataLoaders use the fork start method (Linux default) and torch's defaults
otherwise (prefetch_factor 2, no pinned memory). DatasetRT's main process
runs ``DatasetRuntime(num_workers=2)``; each DataLoader worker reopens the
caches with one native thread (``worker_threads=1``).

Results: ``benchmarks/results/training-latest.json`` (or --out) with every raw
figure, and the Markdown table (printed, and written beside the JSON as .md).
Progress goes to stderr. Caches go under --work-dir (deleted at the end).
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
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import children  # this directory's runner of measurement processes
import peer_venvs  # this directory's pinned peer versions and their venvs
import training_child  # the measurement processes: `training.py child ...`
import workload  # this directory's measurement helpers (machine_info)
from children import Json
from training_child import BATCH_SIZE, RUNTIME_THREADS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_SCRIPT = HERE / "training_peers.py"
DEFAULT_PEER_VENV = Path.home() / ".cache" / "dataset_rt_bench" / "loaders"
PEER_REQUIREMENTS = peer_venvs.requirements("litdata", "mosaicml-streaming")
PEER_DISTRIBUTIONS = ("torch", "litdata", "mosaicml-streaming")
CHILD_TIMEOUT = 900


@dataclass(frozen=True)
class Sizes:
    """How many samples, how big the PNGs, how many repeats: a full or a quick run."""

    w1_samples: int
    png_samples: int
    png_side: int
    png_pool: int
    fast_repeats: int  # W1 rows
    slow_repeats: int  # decode rows


FULL = Sizes(200_000, 20_000, 96, 2_000, fast_repeats=5, slow_repeats=3)
QUICK = Sizes(20_000, 2_000, 96, 2_000, fast_repeats=1, slow_repeats=1)


@dataclass(frozen=True)
class Case:
    """One row of the table: who reads what, how."""

    key: str
    workload: str  # "W1" | "PNG decode"
    reader: str  # label in the table
    system: str  # "ours" | "litdata" | "mosaic"
    mode: str  # ours: "direct" | "loader" | "decode"; peers: "loader"
    workers: int
    slow: bool = False


CASES = (
    Case("w1-direct", "W1", "`for s in ds`, one process", "ours", "direct", 0),
    *(
        Case(f"w1-loader-{w}", "W1", "dataset_rt.torch.DataLoader", "ours", "loader", w)
        for w in (0, 1, 2)
    ),
    Case(
        "w1-ceiling",
        "W1",
        "torch ceiling: DataLoader over 1 KiB bytes, no reading",
        "ours",
        "ceiling",
        2,
    ),
    Case("w1-litdata", "W1", "LitData StreamingDataLoader", "litdata", "loader", 2),
    Case("w1-mosaic", "W1", "MosaicML StreamingDataset + DataLoader", "mosaic", "loader", 2),
    *(
        Case(
            f"png-decode-{w}",
            "PNG decode",
            "torch DataLoader(adapter, transform=decode)",
            "ours",
            "decode",
            w,
            slow=True,
        )
        for w in (0, 1, 2)
    ),
)


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[training {stamp}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- harness


def ensure_peers(explicit: str | None) -> Path:
    """The peer interpreter: given, or a reused/created venv with the peer loaders
    (LitData and MosaicML at their pins, which are compatible, in one venv)."""
    if explicit:
        return Path(explicit)
    venv = Path(os.environ.get("DATASET_RT_LOADERS_VENV", DEFAULT_PEER_VENV))
    return peer_venvs.ensure_venv(
        venv, PEER_REQUIREMENTS, PEER_DISTRIBUTIONS, lambda message: log(f"peers: {message}")
    )


class ChildFailed(RuntimeError):
    """A measurement process failed: its row reports the error, the others go on."""


class Harness:
    """Starts the measurement processes, ours (`training.py child`) and the peers'
    (`training_peers.py`), and keeps the load at each start."""

    def __init__(self, ours: Path, peers: Path | None) -> None:
        self.ours = ours
        self.peers = peers
        self.loads: list[float] = []

    def child(self, system: str, *arguments: str) -> Json:
        load = os.getloadavg()[0]
        self.loads.append(load)
        if system == "ours":
            command = [str(self.ours), str(Path(__file__).resolve()), "child", *arguments]
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        else:
            assert self.peers is not None
            command = [str(self.peers), str(PEERS_SCRIPT), *arguments, "--system", system]
            env = peer_venvs.clean_environment()
        try:
            result = children.run_json(command, env, HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise ChildFailed(
                f"{system} {' '.join(arguments)} exited {failed.returncode}:\n" + failed.tail(15)
            ) from None
        result["harness_load"] = load
        return result


def write_all(harness: Harness, sizes: Sizes, work: Path, systems: set[str]) -> dict[str, Json]:
    """Write every cache once; returns system/workload -> write result (or error)."""
    writes: dict[str, Json] = {}
    jobs = [
        ("ours-w1", "ours", ["write", "--kind", "w1", "--count", str(sizes.w1_samples)]),
        (
            "ours-png",
            "ours",
            ["write", "--kind", "png", "--count", str(sizes.png_samples)]
            + ["--side", str(sizes.png_side), "--pool", str(sizes.png_pool)],
        ),
        ("litdata-w1", "litdata", ["write", "--count", str(sizes.w1_samples)]),
        ("mosaic-w1", "mosaic", ["write", "--count", str(sizes.w1_samples)]),
    ]
    for key, system, arguments in jobs:
        if system not in systems:
            continue
        where = work / key
        shutil.rmtree(where, ignore_errors=True)
        flag = "--base-dir" if system == "ours" else "--dir"
        try:
            result = harness.child(system, *arguments, flag, str(where))
        except (ChildFailed, subprocess.TimeoutExpired) as error:
            log(f"write {key} FAILED: {error}")
            writes[key] = {"error": str(error)}
            continue
        writes[key] = result
        log(
            f"write {key}: {result['samples']:,} samples in {result['seconds']:.2f} s, "
            f"{result['bytes_on_disk'] / 1e6:,.1f} MB on disk"
        )
    return writes


def read_arguments(case: Case, sizes: Sizes, writes: dict[str, Json]) -> list[str] | None:
    """The arguments of `case`'s read process, or None where its data was not written."""
    if case.mode == "ceiling":
        return ["read", "--mode", "ceiling", "--count", str(sizes.w1_samples)] + [
            "--workers",
            str(case.workers),
        ]
    if case.system == "ours":
        write = writes.get("ours-png" if case.mode == "decode" else "ours-w1", {})
        if "cache_path" not in write:
            return None
        return ["read", "--cache", write["cache_path"], "--mode", case.mode] + [
            "--workers",
            str(case.workers),
        ]
    write = writes.get(f"{case.system}-w1", {})
    if "dir" not in write:
        return None
    return ["read", "--dir", write["dir"], "--workers", str(case.workers)] + [
        "--batch-size",
        str(BATCH_SIZE),
    ]


def read_all(
    harness: Harness, cases: list[Case], sizes: Sizes, writes: dict[str, Json]
) -> dict[str, Json]:
    """Round-robin over the rows, one fresh process per measurement."""
    raw: dict[str, Json] = {case.key: {"runs": [], "error": None} for case in cases}
    rounds = max(sizes.fast_repeats, sizes.slow_repeats)
    for repeat in range(rounds):
        for case in cases:
            repeats = sizes.slow_repeats if case.slow else sizes.fast_repeats
            entry = raw[case.key]
            if repeat >= repeats or entry["error"]:
                continue
            arguments = read_arguments(case, sizes, writes)
            if arguments is None:
                entry["error"] = "its data was not written (see the write error)"
                continue
            try:
                result = harness.child(case.system, *arguments)
            except (ChildFailed, subprocess.TimeoutExpired) as error:
                log(f"{case.key} r{repeat + 1} FAILED: {error}")
                entry["error"] = str(error)
                continue
            entry["runs"].append(result)
            sps = result["samples"] / result["seconds"]
            log(
                f"{case.key} r{repeat + 1}/{repeats}: {sps:,.0f} samples/s, first batch "
                f"{result['first_batch_seconds'] * 1000:.0f} ms, other CPU "
                f"{result['other_cpu_cores']:.2f} cores, load {result['harness_load']:.2f}"
            )
    return raw


# --------------------------------------------------------------------------- summary


def median(values: list[float]) -> float:
    """The median, or NaN for a row that has no runs."""
    return statistics.median(values) if values else float("nan")


def summarize(case: Case, entry: Json) -> Json:
    """A row of the table: the medians (and the spread) of its runs."""
    runs = entry["runs"]
    sps = [run["samples"] / run["seconds"] for run in runs]
    return {
        "key": case.key,
        "workload": case.workload,
        "reader": case.reader,
        "system": case.system,
        "workers": case.workers,
        "repeats": len(runs),
        "error": entry["error"],
        "sps": median(sps),
        "sps_values": sps,
        "sps_min": min(sps, default=float("nan")),
        "sps_max": max(sps, default=float("nan")),
        "first_batch_s": median([run["first_batch_seconds"] for run in runs]),
        "steady_sps": median([run["steady_sps"] for run in runs]),
        "main_cpu_share": median([run["main_cpu_seconds"] / run["seconds"] for run in runs]),
        "workers_cpu_share": median([run["workers_cpu_seconds"] / run["seconds"] for run in runs]),
        "peak_rss_main_mib": median([run["peak_rss_kib"] / 1024 for run in runs]),
        "peak_rss_worker_mib": median([run["workers_peak_rss_kib"] / 1024 for run in runs]),
        "other_cpu_cores": median([run["other_cpu_cores"] for run in runs]),
        "load": median([run["harness_load"] for run in runs]),
        "open_s": median([run.get("open_seconds", 0.0) for run in runs]),
    }


def relative(row: Json, rows: dict[str, Json]) -> str:
    """W1 rows against ``for s in ds``; decode rows against W=0."""
    if row["workload"] == "W1":
        base = rows.get("w1-direct")
        return "" if not base or row["key"] == "w1-direct" else f"{row['sps'] / base['sps']:.2f}x"
    base = rows.get("png-decode-0")
    if not base or row["key"] == "png-decode-0":
        return ""
    return f"{row['sps'] / base['sps']:.2f}x"


def fmt_sps(value: float) -> str:
    """Samples per second, or "-" for NaN."""
    return "-" if value != value else f"{value:,.0f}"


def markdown(report: Json) -> str:
    """The Markdown table of a report, with the lines above it that say how it was measured."""
    meta = report["meta"]
    machine = meta["machine"]
    sizes = meta["sizes"]
    lines = [
        f"# DatasetRT training loaders ({'quick' if meta['quick'] else 'full'} run)",
        "",
        f"- date: {meta['started']}; wall time {meta['wall_seconds']:.0f} s; "
        f"batch {BATCH_SIZE}; repeats {sizes['fast_repeats']} (W1) / "
        f"{sizes['slow_repeats']} (decode); medians, min-max over the repeats",
        f"- W1: {sizes['w1_samples']:,} x 1 KiB; PNG: {sizes['png_samples']:,} x "
        f"{sizes['png_side']}x{sizes['png_side']} RGB "
        f"({meta['writes'].get('ours-png', {}).get('payload_bytes_mean', 0):,.0f} B mean), "
        f"{meta.get('png_decode_ms', float('nan')):.3f} ms per decode_png (one process)",
        f"- machine: {machine.get('nproc')} CPUs ({machine.get('cpu', '?')}), "
        f"{machine.get('ram_gib', '?')} GiB RAM, Python {machine['python']}, "
        f"{machine['platform']}, git {machine.get('git', '?')}",
        f"- load average (1 min): {meta['load']['start']:.2f} at start, "
        f"{meta['load']['end']:.2f} at end, {meta['load']['min']:.2f}-{meta['load']['max']:.2f} "
        "over the measurements",
        f"- versions: dataset_rt {meta['versions'].get('dataset_rt', '?')}, torch "
        f"{meta['versions'].get('torch', '?')}, Pillow {meta['versions'].get('pillow', '?')}; "
        f"peers: {meta['versions'].get('peers') or 'not run'}",
        "",
        "| workload | reader | workers | samples/s | min-max | rel. | first batch | "
        "steady samples/s | main CPU | workers CPU | RSS main | RSS worker | other CPU | load |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    rows = {row["key"]: row for row in report["rows"]}
    for row in report["rows"]:
        if row["error"] and not row["repeats"]:
            error = row["error"].strip().splitlines()[-1][:120].replace("|", "/")
            lines.append(
                f"| {row['workload']} | {row['reader']} | {row['workers']} | failed: {error} "
                "| | | | | | | | | | |"
            )
            continue
        worker_rss = f"{row['peak_rss_worker_mib']:,.0f} MiB" if row["workers"] else "-"
        lines.append(
            f"| {row['workload']} | {row['reader']} | {row['workers']} | "
            f"{fmt_sps(row['sps'])} | {fmt_sps(row['sps_min'])}-{fmt_sps(row['sps_max'])} | "
            f"{relative(row, rows)} | {row['first_batch_s'] * 1000:,.1f} ms | "
            f"{fmt_sps(row['steady_sps'])} | {row['main_cpu_share']:.2f} | "
            f"{row['workers_cpu_share']:.2f} | {row['peak_rss_main_mib']:,.0f} MiB | "
            f"{worker_rss} | {row['other_cpu_cores']:.2f} | {row['load']:.2f} |"
        )
    lines += [
        "",
        "rel.: W1 rows against `for s in ds`, decode rows against W=0. first batch: "
        "from iter() to the first batch (worker start-up included); steady: the rest of "
        "the epoch. main/workers CPU: CPU seconds per wall second of the epoch. other CPU: "
        "cores busy with anything else during the epoch (/proc/stat). load: 1-minute load "
        "average at the start of the measurement.",
        "",
    ]
    return "\n".join(lines)


def ours_versions(python: Path) -> Json:
    """The versions of dataset_rt, torch and Pillow that `python` imports."""
    probe = (
        "import importlib.metadata as m, json, dataset_rt; "
        "print(json.dumps({'dataset_rt': dataset_rt.__version__, "
        "'torch': m.version('torch'), 'pillow': m.version('pillow')}))"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=False, cwd=str(HERE)
    )
    if done.returncode != 0:
        raise SystemExit(
            "this interpreter needs dataset_rt, torch and Pillow "
            "(the project venv; pip install pillow):\n" + done.stderr
        )
    return cast(Json, json.loads(done.stdout.strip().splitlines()[-1]))


def png_decode_ms(harness: Harness, sizes: Sizes) -> float:
    """Cost of one decode_png in a fresh process (not a row): context for the table."""
    try:
        result = harness.child("ours", "decode-cost", "--side", str(sizes.png_side))
    except ChildFailed as error:
        log(f"decode cost FAILED: {error}")
        return float("nan")
    decode_ms: float = result["decode_ms"]
    return decode_ms


def parse_arguments() -> argparse.Namespace:
    """The command line (this module's docstring is its help)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (smoke test)")
    parser.add_argument(
        "--out", default=str(HERE / "results" / "training-latest.json"), help="JSON results"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip LitData and MosaicML")
    parser.add_argument("--peer-python", help="an interpreter with litdata and mosaicml-streaming")
    parser.add_argument(
        "--work-dir",
        default=str(HERE / ".work-training"),
        help="where caches are written (deleted after)",
    )
    return parser.parse_args()


def choose_systems(args: argparse.Namespace, versions: Json) -> tuple[Path | None, set[str]]:
    """The peers' interpreter (None without it) and the systems to measure; the peers'
    versions, or why they are unavailable, go into `versions`."""
    peers: Path | None = None
    systems = {"ours"}
    if not args.no_peers:
        try:
            peers = ensure_peers(args.peer_python)
            versions["peers"] = peer_venvs.installed_versions(peers, PEER_DISTRIBUTIONS)
            systems |= {"litdata", "mosaic"}
        except (OSError, subprocess.CalledProcessError) as error:
            log(f"peers unavailable: {error}")
            versions["peers"] = f"unavailable: {error}"
    return peers, systems


@dataclass(frozen=True)
class Measured:
    """What a run measured: every write, the cost of one decode, every row's raw runs."""

    writes: dict[str, Json]
    decode_ms: float
    raw: dict[str, Json]


def measure(harness: Harness, sizes: Sizes, cases: list[Case], work: Path) -> Measured:
    """Every write, the decode cost and every row's reads; the work folder deleted after."""
    systems = {case.system for case in cases}
    try:
        writes = write_all(harness, sizes, work, systems)
        decode_ms = png_decode_ms(harness, sizes)
        log(f"decode_png: {decode_ms:.3f} ms per image")
        raw = read_all(harness, cases, sizes, writes)
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Measured(writes, decode_ms, raw)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        training_child.main(sys.argv[2:])
        return
    args = parse_arguments()
    sizes = QUICK if args.quick else FULL
    ours = Path(sys.executable)
    versions = ours_versions(ours)
    peers, systems = choose_systems(args, versions)
    cases = [case for case in CASES if case.system in systems]
    harness = Harness(ours, peers)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now().astimezone()
    load_start = os.getloadavg()[0]
    wall_start = time.perf_counter()
    log(f"{'quick' if args.quick else 'full'} run, {len(cases)} rows, load {load_start:.2f}")
    measured = measure(harness, sizes, cases, work)
    wall = time.perf_counter() - wall_start

    report = {
        "meta": {
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": wall,
            "quick": args.quick,
            "sizes": sizes.__dict__,
            "batch_size": BATCH_SIZE,
            "runtime_threads": RUNTIME_THREADS,
            "machine": workload.machine_info(),
            "versions": versions,
            "png_decode_ms": measured.decode_ms,
            "load": {
                "start": load_start,
                "end": os.getloadavg()[0],
                "min": min(harness.loads),
                "max": max(harness.loads),
            },
            "writes": measured.writes,
            "method": (
                "each measurement is a fresh process; page cache warmed before opening; one "
                "epoch timed from iter() to the last batch; rows measured round-robin; medians "
                "and min-max over repeats"
            ),
        },
        "rows": [summarize(case, measured.raw[case.key]) for case in cases],
        "raw": measured.raw,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    out.with_suffix(".md").write_text(table)
    print(table)
    log(f"done in {wall:.0f} s; wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
