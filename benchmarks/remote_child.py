"""One measurement of `benchmarks/remote.py`, in a fresh process.

Runs under this project's interpreter (`--system ours`) or a peer's own virtual
environment (`--system mosaic` or `litdata`, `peer_venvs.py`; it then never
imports `dataset_rt`). The S3 endpoint and credentials come from the environment
the harness sets (`remote_server.LoopbackS3.environment`). Prints one JSON object
on its last stdout line.

Phases:
  write  the W1 or W2 samples (`training_peers.make_sample`, as `workload.py`
         makes them) in the system's own format, shards of --shard-bytes:
         ours straight to --url with `write_cache(..., remote=RemoteConfig(...))`;
         a peer into --dir with its own writer (the harness uploads the folder).
  read   one epoch of the data at --url, iterated plainly in this process, timed
         from the dataset's creation to the last sample; the system's local copies
         in --dir (a fresh folder: cold; the folder a cold read filled: warm), at
         most --budget-bytes of them where given. Ours with --local-cache reads
         that folder as a local cache instead (the warm run's reference). With
         --positions, only the epoch's first that many samples are read (a budget
         run whose whole epoch would fetch far more than the harness can wait for).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any

import training_peers
import workload
from training_child import finish_child
from workload import Json

BATCH_SIZE = 64
# Our runtimes, alive as long as the process: a dataset reads through its runtime.
_RUNTIMES: list[Any] = []


# --------------------------------------------------------------------------- write


def write_ours(args: argparse.Namespace) -> Json:
    """`write_cache` of the samples straight to the s3:// base of --url."""
    import dataset_rt

    payloads = workload.make_payloads(args.size, args.payload_kind)
    base, name = args.url.rsplit("/", 1)
    source = workload.SyntheticSource(name, args.count, payloads, dataset_rt.CacheInput)
    config = dataset_rt.WriterConfig(max_shard_bytes=args.shard_bytes, show_progress=False)
    remote = dataset_rt.RemoteConfig(local_dir=args.dir)
    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    results = runtime.write_cache([source], base, writer_config=config, remote=remote)
    if len(results) != 1 or not isinstance(results[0], dataset_rt.CacheUploadSuccess):
        raise SystemExit(f"write failed: {results!r}")
    return {"outcome": results[0].outcome}


def write_litdata(args: argparse.Namespace) -> Json:
    """LitData's `optimize` (its README's call), 2 workers, chunks of --shard-bytes."""
    import functools

    from litdata import optimize

    optimize(
        fn=functools.partial(training_peers.make_sample, size=args.size, kind=args.payload_kind),
        inputs=list(range(args.count)),
        output_dir=args.dir,
        chunk_bytes=args.shard_bytes,
        num_workers=2,
        mode="overwrite",
        verbose=False,
    )
    return {}


def write_mosaic(args: argparse.Namespace) -> Json:
    """MosaicML's `MDSWriter`, shards of --shard-bytes (`size_limit`)."""
    training_peers.hide_torchvision()
    from streaming import MDSWriter

    columns = training_peers.MOSAIC_COLUMNS
    with MDSWriter(out=args.dir, columns=columns, size_limit=args.shard_bytes) as writer:
        for index in range(args.count):
            writer.write(training_peers.make_sample(index, args.size, args.payload_kind))
    return {}


WRITERS = {"ours": write_ours, "litdata": write_litdata, "mosaic": write_mosaic}


# --------------------------------------------------------------------------- read


def open_ours(args: argparse.Namespace, shuffle: bool) -> Any:
    """Our dataset of --url through a `RemoteConfig` (or of --local-cache)."""
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    _RUNTIMES.append(runtime)
    # Shuffled: a permutation per epoch, as the peers' shuffles read each sample once.
    config = dataset_rt.ReaderConfig(seed=0, shuffle=shuffle, replacement=False)
    if args.local_cache:
        return runtime.cached_dataset([args.local_cache], reader_config=config)
    remote = dataset_rt.RemoteConfig(
        local_dir=args.dir, budget_bytes=args.budget_bytes, revalidate=not args.no_revalidate
    )
    return runtime.cached_dataset([args.url], reader_config=config, remote=remote)


def open_mosaic(args: argparse.Namespace, shuffle: bool) -> Any:
    """MosaicML's `StreamingDataset(remote, local, cache_limit)`, `predownload` raised
    to the whole epoch as `training_peers.SETTINGS` says (its tuning guide's first advice)."""
    training_peers.hide_torchvision()
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    return StreamingDataset(
        remote=args.url,
        local=args.dir,
        batch_size=BATCH_SIZE,
        shuffle=shuffle,
        shuffle_seed=0,
        predownload=args.count,
        cache_limit=args.budget_bytes,
    )


def open_litdata(args: argparse.Namespace, shuffle: bool) -> Any:
    """LitData's `StreamingDataset("s3://...", cache_dir, max_cache_size, storage_options)`.

    `storage_options` go to its boto3 client; its chunk downloads go through an
    obstore S3 store built from that client with LitData's fixed client options,
    which refuse the server's http:// endpoint: `allow_http` is added to them, the
    one change LitData needs to read from a plain-http endpoint."""
    from litdata import StreamingDataset
    from litdata.streaming import downloader

    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True

    options = {
        "endpoint_url": os.environ["AWS_ENDPOINT_URL"],
        "region_name": os.environ["AWS_DEFAULT_REGION"],
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    return StreamingDataset(
        args.url,
        cache_dir=args.dir,
        shuffle=shuffle,
        seed=0,
        max_cache_size=args.budget_bytes,
        storage_options=options,
    )


OPENERS = {"ours": open_ours, "litdata": open_litdata, "mosaic": open_mosaic}


class Prefix:
    """The first `positions` samples of one pass over `dataset` (iter() called once)."""

    def __init__(self, dataset: Any, positions: int) -> None:
        self.dataset = dataset
        self.positions = positions

    def __iter__(self) -> Any:
        return itertools.islice(iter(self.dataset), self.positions)


def import_system(system: str) -> None:
    """Import the system's library and boto3 (every system's S3 client; ours imports
    it at the first s3:// open), so that neither import is timed."""
    import boto3  # noqa: F401

    if system == "ours":
        import dataset_rt  # noqa: F401
    elif system == "mosaic":
        training_peers.hide_torchvision()
        import streaming  # noqa: F401
    else:
        import litdata  # noqa: F401


def phase_read(args: argparse.Namespace) -> Json:
    """Open the dataset and read one epoch; seconds from the open to the last sample."""
    shuffle = args.mode == "shuffled"
    start = time.perf_counter()
    import_system(args.system)
    import_seconds = time.perf_counter() - start
    start = time.perf_counter()
    try:
        dataset = OPENERS[args.system](args, shuffle)
    except Exception as error:  # a refused option is a result, not a crash
        if args.budget_bytes is None:
            raise
        return {"skipped": f"{type(error).__name__}: {error}"}
    open_seconds = time.perf_counter() - start
    read: Any = dataset if args.positions is None else Prefix(dataset, args.positions)
    expected = args.count if args.positions is None else args.positions
    if args.system == "ours":
        result = workload.read_pass(read, "ordered", expected)
    else:
        result = training_peers.read_pass(read, expected)
    result["wall_seconds"] = time.perf_counter() - start
    result["open_seconds"] = open_seconds
    result["import_seconds"] = import_seconds
    if args.system == "ours" and not args.local_cache:
        result["remote_stats"] = dataclasses.asdict(dataset.remote_stats())
    result["local_dir_bytes"] = workload.dir_bytes(Path(args.dir)) if args.dir else 0
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=["write", "read"])
    parser.add_argument("--system", choices=list(WRITERS), required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--dir", default="")
    parser.add_argument("--local-cache", default="")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--payload-kind", choices=["mixed", "random"], default="mixed")
    parser.add_argument("--shard-bytes", type=int, default=8 << 20)
    parser.add_argument("--mode", choices=["ordered", "shuffled"], default="ordered")
    parser.add_argument("--budget-bytes", type=int, default=None)
    parser.add_argument(
        "--positions", type=int, default=None, help="read the epoch's first N samples only"
    )
    parser.add_argument(
        "--no-revalidate", action="store_true", help="ours: RemoteConfig(revalidate=False)"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.phase == "write":
        result = WRITERS[args.system](args)
        result["seconds"] = time.perf_counter() - start
    else:
        result = phase_read(args)
    result.update({"phase": args.phase, "system": args.system, "python": sys.version.split()[0]})
    finish_child(result)


if __name__ == "__main__":
    main()
