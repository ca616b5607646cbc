"""Remote caches on a loopback S3 server: ours against MosaicML Streaming and LitData.

Usage:

    python benchmarks/remote.py            # W1 and W2, ordered and shuffled (~10 min)
    python benchmarks/remote.py --quick    # a tenth of W1's samples, 64 of W2's
    python benchmarks/remote.py --modes ordered --workloads W1

moto's S3 server runs in this process on 127.0.0.1 (`remote_server.LoopbackS3`,
which counts the bytes it sends per bucket). Each system writes the W1 or W2
samples (`workload.py`'s payloads and metadata) in its own format with shards of
one size for all (the data over SHARDS, so that a 25 % budget holds several
shards): ours straight to ``s3://`` with `write_cache(..., remote=...)`, the peers
into a folder with their own writers (MosaicML's `MDSWriter` `size_limit`,
LitData's `optimize` `chunk_bytes`), which this harness uploads to the same
server. Then, per workload and order, every system reads one epoch in fresh
processes (`remote_child.py`; the peers in their own venvs, `peer_venvs.py`),
iterating its dataset plainly in one process:

- cold: an empty local folder;
- warm: a new process on the folder the cold read filled (remote options as
  before: each system checks the server as it does on any open);
- warm, `revalidate=False` (ours only): the same, with the open that trusts the
  version held in the folder and makes no request;
- local (ours only): the cold read's folder, which holds the cache as written,
  opened as a local cache: the reference of the warm target. Ours runs warm,
  warm with `revalidate=False` and local in turn --repeats times and keeps the
  median run of each (a peer's warm read runs once);
- budget: an empty folder and at most BUDGET_FRACTION of the system's data kept
  in it (ours: `RemoteConfig(budget_bytes=...)`, recorded as skipped while the
  core refuses a budget; MosaicML: `cache_limit`; LitData: `max_cache_size`);
  a run that has not finished after BUDGET_TIMEOUT is killed and recorded with
  the bytes it fetched until then. Where Belady's minimum for the epoch is more
  than PREFIX_FACTOR times the data, every system's budget run reads only the
  epoch's longest prefix within that (`--positions`), and ours is measured
  against Belady's minimum for that prefix.

Bytes fetched are what the server sent for the system's bucket during the run.
Belady's minimum for the budget run (`belady.py`) is simulated over our stream's
shard accesses: the sample order of the same seed and order, read from the
local copy, mapped to shards by its ``index.bin``.

Results: ``benchmarks/results/remote.json``; ``benchmarks/report.py`` makes the
"Remote caches (loopback S3)" section of docs/benchmarks.md from it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import belady
import children
import peer_venvs
import report as doc_report
import workload
from children import Json
from remote_server import LoopbackS3

HERE = Path(__file__).resolve().parent
CHILD = HERE / "remote_child.py"
RESULTS = HERE / "results" / "remote.json"
MIB = 1 << 20
CHILD_TIMEOUT = 600
# A budget run that thrashes is stopped: its bytes fetched so far already tell.
BUDGET_TIMEOUT = 120
# Shards per cache the shard size aims at (at least 16, so that a quarter of the
# cache holds several shards: the core refuses a budget below its two largest).
SHARDS = 24
BUDGET_FRACTION = 0.25
# A budget run reads the whole epoch where Belady's policy fetches at most this many
# times the cache's shards for it (W1 shuffled: about 3,800 times, 820 GB, hours on
# loopback for any reader); otherwise the epoch's longest prefix within that, and is
# measured against Belady's minimum for that prefix.
PREFIX_FACTOR = 20
SYSTEMS = ("ours", "mosaic", "litdata")
BUCKETS = {system: f"bench-{system}" for system in SYSTEMS}
# name -> (samples, payload bytes, payload kind), full and --quick
WORKLOADS = {"W1": (200_000, 1024, "mixed"), "W2": (512, 1 << 20, "random")}
QUICK = {"W1": (20_000, 1024, "mixed"), "W2": (64, 1 << 20, "random")}
# system -> how it reads, stored with the results and printed under the table.
SETTINGS = {
    "ours": "`cached_dataset([url], ReaderConfig(seed=0, shuffle, replacement=False), "
    "remote=RemoteConfig(local_dir, budget_bytes))`, 2 runtime workers; shards fetched "
    "ahead in stream order, `max_in_flight=4`",
    "mosaic": "`StreamingDataset(remote=url, local, batch_size=64, shuffle, shuffle_seed=0, "
    "predownload=<samples in the epoch>, cache_limit)`, endpoint from `S3_ENDPOINT_URL`",
    "litdata": "`StreamingDataset(url, cache_dir=local, shuffle, seed=0, max_cache_size, "
    "storage_options={endpoint_url, region_name, credentials})` (its boto3 client); "
    "`allow_http` added to the client options of its obstore chunk downloads, which "
    "refuse the server's plain-http endpoint otherwise",
}
LABELS = {"ours": "DatasetRT (ours)", "mosaic": "MosaicML Streaming", "litdata": "LitData"}


def log(message: str) -> None:
    print(f"[remote {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def shard_bytes_for(count: int, size: int) -> int:
    """One shard size for every system: the payloads over SHARDS, whole MiB, at least 1 MiB."""
    return max(MIB, count * size // SHARDS // MIB * MIB)


class Harness:
    """The server, the interpreters and the work folder of one run."""

    def __init__(self, server: LoopbackS3, work: Path, pythons: dict[str, Path]) -> None:
        self.server = server
        self.work = work
        self.pythons = pythons
        self.aws = server.environment(work / "aws")
        self.loads: list[float] = []
        # Runs of each of our warm reads (warm, revalidate=False, local).
        self.repeats = 1

    def environment(self, system: str) -> dict[str, str]:
        base = dict(os.environ) if system == "ours" else peer_venvs.clean_environment()
        return {**base, **self.aws}

    def child(self, system: str, arguments: list[str], timeout: float = CHILD_TIMEOUT) -> Json:
        """One run of remote_child.py; with the bytes the server sent for the system
        meanwhile. A run past `timeout` is killed and recorded with what it fetched."""
        bucket = BUCKETS[system]
        before = self.server.traffic(bucket)
        self.loads.append(os.getloadavg()[0])
        command = [str(self.pythons[system]), str(CHILD), *arguments, "--system", system]
        try:
            result = children.run_json(command, self.environment(system), HERE, timeout)
        except children.ChildFailed as failure:
            log(f"{system} {' '.join(arguments[:1])} failed:\n{failure.tail(15)}")
            result = {"failed": failure.tail(3)}
        except subprocess.TimeoutExpired:
            log(f"{system} {' '.join(arguments[:1])} killed after {timeout:g} s")
            result = {"timed_out_seconds": timeout}
        traffic = self.server.traffic(bucket).minus(before)
        result["get_requests"] = traffic.get_requests
        result["bytes_fetched"] = traffic.get_bytes
        return result


def write_all(harness: Harness, name: str, spec: tuple[int, int, str]) -> Json:
    """Every system's copy of workload `name` on the server; per system its URL,
    write result and data bytes (the files uploaded)."""
    count, size, kind = spec
    shard = shard_bytes_for(count, size)
    common = ["--count", str(count), "--size", str(size), "--payload-kind", kind]
    common += ["--shard-bytes", str(shard)]
    written: Json = {}
    for system in SYSTEMS:
        url = f"s3://{BUCKETS[system]}/{name}"
        folder = harness.work / f"write-{system}-{name}"
        log(f"{name}: {system} writes")
        result = harness.child(system, ["write", "--url", url, "--dir", str(folder), *common])
        if system != "ours" and "failed" not in result:
            start = time.perf_counter()
            result["uploaded_bytes"] = harness.server.upload_dir(folder, BUCKETS[system], name)
            result["upload_seconds"] = time.perf_counter() - start
        shutil.rmtree(folder, ignore_errors=True)
        written[system] = {"url": url, **result}
    return {"shard_bytes": shard, "systems": written}


def cache_folder(local_dir: Path) -> Path:
    """The folder of our remote copies that holds the cache (its manifest.json)."""
    found = sorted(path.parent for path in local_dir.glob("*/manifest.json"))
    if len(found) != 1:
        raise SystemExit(f"expected one cache copy under {local_dir}, found {found}")
    return found[0]


def data_bytes(harness: Harness, system: str, name: str, copy: Path | None) -> int:
    """The bytes of the system's shards: ours from the manifest, a peer's the whole
    upload (its index is a few KiB)."""
    if system == "ours" and copy is not None:
        return sum(belady.shard_bytes(copy))
    client = harness.server.client()
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKETS[system], Prefix=f"{name}/"
    )
    return sum(item["Size"] for page in pages for item in page.get("Contents", []))


def read_runs(harness: Harness, system: str, url: str, base: list[str], tag: str) -> Json:
    """Cold, warm (and ours: warm with revalidate=False, and local) reads of one
    system; the cold run's folder kept. Ours repeats the three warm reads in turn
    `harness.repeats` times and keeps each one's median run (`median_run`)."""
    folder = harness.work / f"{tag}-{system}"
    shutil.rmtree(folder, ignore_errors=True)
    runs: Json = {}
    arguments = ["read", "--url", url, "--dir", str(folder), *base]
    for state in ("cold", "warm"):
        log(f"{tag}: {system} {state}")
        runs[state] = harness.child(system, arguments)
    if system == "ours" and "failed" not in runs["cold"]:
        local = ["read", "--url", url, "--local-cache", str(cache_folder(folder)), *base]
        states = {
            "warm": arguments,
            "trusted": [*arguments, "--no-revalidate"],
            "local": local,
        }
        repeated: dict[str, list[Json]] = {"warm": [runs["warm"]], "trusted": [], "local": []}
        for repeat in range(harness.repeats):
            for state, state_arguments in states.items():
                if len(repeated[state]) > repeat:
                    continue  # the warm run above
                log(f"{tag}: ours {state} ({repeat + 1} of {harness.repeats})")
                repeated[state].append(harness.child(system, state_arguments))
        for state, measured in repeated.items():
            runs[state] = median_run(measured)
    return runs


def median_run(measured: list[Json]) -> Json:
    """The run of median `wall_seconds` (the lower middle one of an even count), with
    every run's wall time; a failed run, if any, instead."""
    for run in measured:
        if "wall_seconds" not in run:
            return run
    ordered = sorted(measured, key=lambda run: run["wall_seconds"])
    return {
        **ordered[(len(ordered) - 1) // 2],
        "wall_seconds_all": [r["wall_seconds"] for r in measured],
    }


def budget_run(
    harness: Harness, system: str, url: str, base: list[str], budget: int, tag: str
) -> Json:
    folder = harness.work / f"{tag}-{system}-budget"
    shutil.rmtree(folder, ignore_errors=True)
    log(f"{tag}: {system} budget {budget:,} B")
    arguments = ["read", "--url", url, "--dir", str(folder), "--budget-bytes", str(budget)]
    result = harness.child(system, [*arguments, *base], BUDGET_TIMEOUT)
    shutil.rmtree(folder, ignore_errors=True)
    return {**result, "budget_bytes": budget}


def stream_sample_ids(copy: Path, shuffle: bool) -> list[int]:
    """Our stream's sample ids for one epoch (seed 0), read from the local copy."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    config = dataset_rt.ReaderConfig(seed=0, shuffle=shuffle, replacement=False)
    dataset = runtime.cached_dataset([copy], reader_config=config)
    return [sample.sample_id for sample in dataset]


def belady_minimum(copy: Path, shuffle: bool, budget: int) -> Json:
    """Belady's fetches over our stream of one epoch under `budget`; where they exceed
    PREFIX_FACTOR times the shards' bytes, also over the epoch's longest prefix within
    that (`prefix`), the part a budget run then reads."""
    shards = belady.sample_shards(copy)
    sample_ids = stream_sample_ids(copy, shuffle)
    sizes = belady.shard_bytes(copy)

    def over(positions: int) -> Json:
        accesses = belady.shard_accesses(sample_ids[:positions], shards)
        fetches = belady.belady_fetches(accesses, sizes, budget)
        return {
            "positions": positions,
            "shard_accesses": len(accesses),
            "min_shards": fetches.shards,
            "min_bytes": fetches.bytes,
        }

    minimum = {"budget_bytes": budget, "shards": len(sizes), **over(len(sample_ids))}
    limit = PREFIX_FACTOR * sum(sizes)
    if minimum["min_bytes"] > limit:
        # A prefix's fetches grow with it (Belady's are the fewest for equal shards):
        # bisect for the longest prefix within the limit.
        low, high = 1, len(sample_ids)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if over(middle)["min_bytes"] <= limit else (low, middle)
        minimum["prefix"] = over(low)
    return minimum


def measure_order(
    harness: Harness, name: str, written: Json, spec: tuple[int, int, str], mode: str
) -> Json:
    """Every system's runs of workload `name` read in `mode`, and Belady's minimum."""
    count, size, kind = spec
    base = ["--count", str(count), "--size", str(size), "--payload-kind", kind, "--mode", mode]
    tag = f"{name}-{mode}"
    runs: Json = {}
    for system in SYSTEMS:
        url = written["systems"][system]["url"]
        runs[system] = read_runs(harness, system, url, base, tag)
    copy = None
    if "local" in runs["ours"]:
        copy = cache_folder(harness.work / f"{tag}-ours")
    data = {system: data_bytes(harness, system, name, copy) for system in SYSTEMS}
    budgets = {system: int(data[system] * BUDGET_FRACTION) for system in SYSTEMS}
    minimum = None if copy is None else belady_minimum(copy, mode == "shuffled", budgets["ours"])
    read: Json = {"positions": count}
    if minimum is not None and "prefix" in minimum:
        read["positions"] = minimum["prefix"]["positions"]
        base = [*base, "--positions", str(read["positions"])]
    for system in SYSTEMS:
        url = written["systems"][system]["url"]
        budget = budget_run(harness, system, url, base, budgets[system], tag)
        runs[system]["budget"] = {**budget, **read}
        shutil.rmtree(harness.work / f"{tag}-{system}", ignore_errors=True)
    return {"runs": runs, "belady": minimum, "data_bytes": data}


def versions(pythons: dict[str, Path]) -> dict[str, str]:
    """The version of every system and of the server, as the interpreters import them."""
    import importlib.metadata

    import dataset_rt

    found = {"ours": dataset_rt.__version__}
    for system in ("mosaic", "litdata"):
        distribution = peer_venvs.SYSTEMS[system][1]
        installed = peer_venvs.installed_versions(pythons[system], (distribution,)) or {}
        found[system] = installed.get(distribution, "?")
    for name in ("moto", "boto3"):
        found[name] = importlib.metadata.version(name)
    return found


def run(args: argparse.Namespace, pythons: dict[str, Path], work: Path) -> Json:
    specs = QUICK if args.quick else WORKLOADS
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    workloads: Json = {}
    with LoopbackS3() as server:
        harness = Harness(server, work, pythons)
        harness.repeats = args.repeats
        client = server.client()
        for bucket in BUCKETS.values():
            client.create_bucket(Bucket=bucket)
        for name in args.workloads:
            spec = specs[name]
            written = write_all(harness, name, spec)
            orders = {
                mode: measure_order(harness, name, written, spec, mode) for mode in args.modes
            }
            workloads[name] = {
                "spec": {"samples": spec[0], "payload_bytes": spec[1], "kind": spec[2]},
                "written": written,
                "orders": orders,
            }
    loads = harness.loads or [0.0]
    meta = {
        "started": started,
        "machine": workload.machine_info(),
        "command": " ".join(["python benchmarks/remote.py", *sys.argv[1:]]),
        "quick": args.quick,
        "repeats": args.repeats,
        "load": {"min": min(loads), "max": max(loads)},
        "versions": versions(pythons),
        "settings": SETTINGS,
        "labels": LABELS,
        "budget_fraction": BUDGET_FRACTION,
        "warm": "a new process on the folder the cold read filled, remote options unchanged"
        + f"; ours: the median of {args.repeats} runs",
        "bytes_fetched": "response body bytes of the server's GETs for the system's bucket",
        "workloads": {name: workloads[name]["spec"] for name in workloads},
    }
    return {"meta": meta, "workloads": workloads}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small workloads (a smoke run)")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument(
        "--modes", nargs="+", choices=["ordered", "shuffled"], default=["ordered", "shuffled"]
    )
    parser.add_argument("--out", default=str(RESULTS), help="the results file")
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs of each of our warm reads (median kept)"
    )
    args = parser.parse_args()
    pythons = {"ours": Path(sys.executable)}
    for system in ("mosaic", "litdata"):
        pythons[system] = peer_venvs.ensure_system(system, log)
    work = Path(tempfile.mkdtemp(prefix="drt-remote-"))
    try:
        report = run(args, pythons, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {out}")
    print(doc_report.render_remote(report))


if __name__ == "__main__":
    main()
