"""Peer libraries for `benchmarks/training.py` and `benchmarks/run.py --peers`.

One measurement per fresh process, under a peer's own virtual environment
(`benchmarks/peer_venvs.py`), never under the project's: it does not import
`dataset_rt`. It writes the W1 or W2 data (the same payloads and metadata as
`benchmarks/workload.py` makes for DatasetRT, chosen by --count, --size and
--payload-kind) in one peer's own format, or reads it back, and prints one
JSON object on its last stdout line.

Phases:
  write  --system S --dir DIR --count N --size B --payload-kind K
         each system's own writer, as SETTINGS says; the import is not timed.
  read   --system S --dir DIR --mode M [--passes P | --workers W --batch-size B]
         warm the page cache, open the dataset, then time from iter() to the
         last sample. Mode ordered: one process, storage order; shuffled: one
         process, the system's own shuffle with seed 0; both report the median
         of P passes in the same process (what `workload.py` does for
         DatasetRT: no pass is left out, none is added). Mode loader (the
         default): one shuffled epoch through W DataLoader workers.

Each system is driven the way its own documentation recommends (SETTINGS,
which the report prints beside the table): the defaults, except where the
documentation says to change one for speed.

Consumers touch every payload as `workload.py` does for DatasetRT (its
length); DataLoaders collate a batch to the list of its payloads, as
`training.py` does for DatasetRT. mosaicml-streaming imports torchvision, whose
PyPI wheel is a CUDA build that cannot load against torch's CPU build: when
torchvision does not import, it is hidden and `streaming.vision` is stubbed
(MDS reading never uses either).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.machinery
import os
import shutil
import sys
import time
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from pathlib import Path
from typing import Any

import workload  # this directory's helpers: payloads, metadata, page-cache warming
from training_child import ChildClock, collate_dicts, finish_child, run_epoch
from workload import Json

# An object of a peer library (a dataset, a loader): the peers have no type information
# (pyproject.toml's mypy overrides), so what they hand out is typed by their docs only.
PeerObject = Any
# One sample as every peer writes it: the payload ("data") and the metadata DatasetRT stores.
Sample = dict[str, bytes | int | float | str]

CHUNK_BYTES = 64 << 20
SHARD_BYTES = 64_000_000
# WebDataset's README: "usually, pick something bigger, like 1000".
WDS_SHUFFLE_BUFFER = 1000
# Hugging Face datasets' `to_iterable_dataset` docstring, for shuffling and
# for a DataLoader: 64 shards and a 10,000-sample shuffle buffer.
HF_SHARDS = 64
HF_SHUFFLE_BUFFER = 10_000
MOSAIC_COLUMNS = {"data": "bytes", "index": "int", "label": "str", "score": "float64"}
# system -> (write, read, shuffle, DataLoader): how it is driven and why, one
# line each; `peers.py` stores them with the results and `report.py` prints them.
SETTINGS = {
    "litdata": (
        "`optimize(fn, inputs, chunk_bytes=64 MiB, num_workers=2)`: its README's "
        "call, one worker per core",
        "`StreamingDataset(input_dir, shuffle, seed=0)`, defaults (payloads are "
        "`memoryview`s of the mapped chunk)",
        "chunk order permuted, then items shuffled in blocks of 256 inside each "
        "chunk (its default `item_shuffle_window`)",
        "`StreamingDataLoader`, as its README shows",
    ),
    "mosaic": (
        "`MDSWriter(columns, size_limit=64 MiB)`, one process",
        "`StreamingDataset(local=dir, batch_size=64, shuffle, shuffle_seed=0, "
        "predownload=<samples in the epoch>)`: its performance-tuning guide's first "
        "advice is to raise `predownload`; the default (8 x batch) makes its "
        "threads sleep 7 ms whenever they are 512 samples ahead, and the shards "
        "are local, so preparing the whole epoch ahead costs nothing",
        "default `py1e`: shard order shuffled, then samples within blocks of "
        "4,000,000 samples on one node (larger than W1 and W2: close to a global "
        "permutation)",
        "`torch.utils.data.DataLoader`, as its quick start shows",
    ),
    "hf": (
        "`Dataset.from_generator`, then `save_to_disk(max_shard_size=64 MB)` (both "
        "timed); the build cache is deleted afterwards",
        "`load_from_disk(dir).to_iterable_dataset(num_shards=64)`: its docs call "
        "iterable datasets much faster to read in order than row access",
        "`.shuffle(seed=0, buffer_size=10_000)` of the 64-shard iterable dataset, "
        "the docs' recommendation for shuffling (an indices mapping is \"up to "
        '10x slower"): shard order shuffled, then a 10,000-sample buffer',
        "`torch.utils.data.DataLoader` over the shuffled iterable dataset, its "
        "shards split between the workers, as its docs show",
    ),
    "wds": (
        "`ShardWriter(pattern, maxsize=64 MB, mtime=<the write's start, whole "
        "seconds>)`: `mtime` is the `TarWriter` option its docstring gives for "
        "fixed times; the default float time makes Python's `tarfile` add a PAX "
        "header to every member",
        "`WebDataset(shards, shardshuffle=False)`, streamed tar reading; the "
        "`.json` member is left undecoded",
        "shard order shuffled (`shardshuffle=len(shards)`, `seed=0`), then "
        "`.shuffle(1000)`, the buffer its README advises",
        "`WebLoader` over the dataset batched in the workers (`.batched(64)`), "
        "shards split between the workers, as its README shows",
    ),
}
DISTRIBUTIONS = {
    "litdata": "litdata",
    "mosaic": "mosaicml-streaming",
    "hf": "datasets",
    "wds": "webdataset",
}


@functools.cache
def payloads_of(size: int, kind: str) -> list[bytes]:
    """`workload.make_payloads`, made once per process."""
    return workload.make_payloads(size, kind)


def make_sample(index: int, size: int = 1024, kind: str = "mixed") -> Sample:
    """One sample as a dict: the payload and the metadata DatasetRT stores.
    Module level: LitData's optimize workers are spawned and import this module."""
    payloads = payloads_of(size, kind)
    return {"data": payloads[index % len(payloads)], **workload.metadata_for(index)}


def hide_torchvision() -> None:
    """Make `import streaming` work where torchvision cannot load (see module doc).

    torchvision is marked absent (``sys.modules[name] = None``: imports raise
    ImportError and ``find_spec`` answers None, so transformers, which
    streaming imports, and LitData skip it), and ``streaming.vision`` (the
    torchvision datasets, the only module that needs it) is an empty module.
    """
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken torchvision fails in many ways; drop it
        for name in [name for name in sys.modules if name.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        sys.modules["torchvision"] = None  # type: ignore[assignment]
        vision = types.ModuleType("streaming.vision")
        vision.__spec__ = importlib.machinery.ModuleSpec("streaming.vision", None)
        sys.modules["streaming.vision"] = vision


# --------------------------------------------------------------------------- write


def write_litdata(args: argparse.Namespace, out: Path) -> Json:
    """`optimize` with 2 workers into chunks of CHUNK_BYTES."""
    from litdata import optimize

    optimize(
        fn=functools.partial(make_sample, size=args.size, kind=args.payload_kind),
        inputs=list(range(args.count)),
        output_dir=str(out),
        chunk_bytes=CHUNK_BYTES,
        num_workers=2,
        mode="overwrite",
        verbose=False,
    )
    return {}


def write_mosaic(args: argparse.Namespace, out: Path) -> Json:
    """`MDSWriter` into shards of CHUNK_BYTES."""
    hide_torchvision()
    from streaming import MDSWriter

    with MDSWriter(out=str(out), columns=MOSAIC_COLUMNS, size_limit=CHUNK_BYTES) as writer:
        for index in range(args.count):
            writer.write(make_sample(index, args.size, args.payload_kind))
    return {}


def hf_samples(count: int, size: int, kind: str) -> Iterator[Sample]:
    """The samples, for `Dataset.from_generator`."""
    for index in range(count):
        yield make_sample(index, size, kind)


def write_hf(args: argparse.Namespace, out: Path) -> Json:
    """`from_generator` builds the Arrow table in a cache directory, and
    `save_to_disk` makes the dataset directory `load_from_disk` opens: the way
    the library's docs keep a dataset built in Python on local disk."""
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features(
        {
            "data": datasets.Value("binary"),
            "index": datasets.Value("int64"),
            "label": datasets.Value("string"),
            "score": datasets.Value("float64"),
        }
    )
    build = out.with_name(out.name + "-build")
    start = time.perf_counter()
    dataset = datasets.Dataset.from_generator(
        hf_samples,
        features=features,
        cache_dir=str(build),
        gen_kwargs={"count": args.count, "size": args.size, "kind": args.payload_kind},
    )
    build_seconds = time.perf_counter() - start
    dataset.save_to_disk(str(out), max_shard_size=SHARD_BYTES)
    del dataset
    shutil.rmtree(build, ignore_errors=True)
    return {"build_seconds": build_seconds}


def write_wds(args: argparse.Namespace, out: Path) -> Json:
    """`ShardWriter` into tar shards of SHARD_BYTES, a whole-second mtime."""
    import webdataset as wds

    out.mkdir(parents=True, exist_ok=True)
    pattern = str(out / "shard-%06d.tar")
    # A whole number of seconds: a float mtime (the default, time.time() per
    # member) does not fit the ustar header, so tarfile writes a PAX header
    # (1 KiB more) before every member.
    mtime = int(time.time())
    with wds.ShardWriter(
        pattern, maxcount=args.count, maxsize=SHARD_BYTES, verbose=0, mtime=mtime
    ) as sink:
        for index in range(args.count):
            sample = make_sample(index, args.size, args.payload_kind)
            payload = sample.pop("data")
            sink.write({"__key__": f"{index:09d}", "bin": payload, "json": sample})
    return {}


WRITERS = {"litdata": write_litdata, "mosaic": write_mosaic, "hf": write_hf, "wds": write_wds}
MODULES = {"litdata": "litdata", "mosaic": "streaming", "hf": "datasets", "wds": "webdataset"}


def phase_write(args: argparse.Namespace) -> Json:
    """Write --count samples in --system's format; time the write."""
    out = Path(args.dir)
    if args.system == "mosaic":
        hide_torchvision()
    importlib.import_module(MODULES[args.system])  # not timed, as for DatasetRT
    cpu_start = workload.cpu_seconds()
    start = time.perf_counter()
    extra = WRITERS[args.system](args, out)
    seconds = time.perf_counter() - start
    return {
        **extra,
        "seconds": seconds,
        "cpu_seconds": workload.cpu_seconds() - cpu_start,
        "samples": args.count,
        "payload_bytes": args.count * args.size,
        "bytes_on_disk": workload.dir_bytes(out),
        "files": sum(len(files) for _root, _dirs, files in os.walk(out)),
        "dir": str(out),
    }


# --------------------------------------------------------------------------- read


def open_litdata(path: Path, shuffle: bool) -> tuple[PeerObject, int]:
    """LitData's `StreamingDataset`, seed 0, and its length."""
    from litdata import StreamingDataset

    dataset = StreamingDataset(input_dir=str(path), shuffle=shuffle, seed=0)
    return dataset, len(dataset)


def open_mosaic(path: Path, shuffle: bool, batch_size: int) -> tuple[PeerObject, int]:
    """`predownload` raised to the whole epoch (SETTINGS): every shard is local."""
    hide_torchvision()
    import json

    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    index = json.loads((path / "index.json").read_text())
    samples = sum(shard["samples"] for shard in index["shards"])
    dataset = StreamingDataset(
        local=str(path),
        batch_size=batch_size,
        shuffle=shuffle,
        shuffle_seed=0,
        predownload=samples,
    )
    return dataset, len(dataset)


def open_hf(path: Path, shuffle: bool) -> tuple[PeerObject, int]:
    """The saved Arrow dataset as a 64-shard iterable dataset; shuffled: shard
    order shuffled and a 10,000-sample buffer (SETTINGS)."""
    import datasets

    table = datasets.load_from_disk(str(path))
    dataset = table.to_iterable_dataset(num_shards=HF_SHARDS)
    if shuffle:
        dataset = dataset.shuffle(seed=0, buffer_size=HF_SHUFFLE_BUFFER)
    return dataset, len(table)


def wds_shards(path: Path) -> list[str]:
    """The tar shards of a WebDataset directory, in order."""
    return sorted(str(shard) for shard in path.glob("shard-*.tar"))


def open_wds(path: Path, shuffle: bool, count: int) -> tuple[PeerObject, int]:
    """Shards in order, or shard order shuffled (all shards) and the samples
    through the 1,000-sample shuffle buffer, seed 0."""
    import webdataset as wds

    shards = wds_shards(path)
    if not shuffle:
        return wds.WebDataset(shards, shardshuffle=False), count
    # empty_check off: a DataLoader worker left without a shard (fewer shards
    # than workers in --quick runs) yields nothing, which is right here.
    dataset = wds.WebDataset(shards, shardshuffle=len(shards), seed=0, empty_check=False)
    return dataset.shuffle(WDS_SHUFFLE_BUFFER, seed=0), count


def open_dataset(args: argparse.Namespace, shuffle: bool) -> tuple[PeerObject, int]:
    """(dataset, samples in one epoch) for one pass in this process."""
    path = Path(args.dir)
    if args.system == "litdata":
        return open_litdata(path, shuffle)
    if args.system == "mosaic":
        # MosaicML asks for the batch size even without a DataLoader (it
        # partitions the epoch by batches); the DataLoaders' batch size.
        return open_mosaic(path, shuffle, args.batch_size)
    if args.system == "hf":
        return open_hf(path, shuffle)
    return open_wds(path, shuffle, args.count)


def payload_of(sample: Mapping[str, Any]) -> bytes | memoryview:
    """The payload of one sample as the peer hands it out (wds: its `.bin` member)."""
    payload: bytes | memoryview = sample["data"] if "data" in sample else sample["bin"]
    return payload


def read_pass(dataset: Iterable[Mapping[str, Any]], expected: int) -> Json:
    """One timed pass from iter() to the last sample, touching each payload as
    `workload.read_pass` does for DatasetRT (its length)."""
    ticks = workload.machine_ticks()
    cpu_start = workload.cpu_seconds()
    start = time.perf_counter()
    # A generator, not iter(dataset): LitData's StreamingDataset is its own
    # iterator, and the `for` below would call its __iter__ again, which
    # restarts it after the first sample (that sample then comes twice).
    iterator = (sample for sample in dataset)
    first = next(iterator)
    first_seconds = time.perf_counter() - start
    samples, payload_bytes = 1, len(payload_of(first))
    for sample in iterator:
        payload_bytes += len(payload_of(sample))
        samples += 1
    seconds = time.perf_counter() - start
    if samples != expected:
        raise SystemExit(f"read {samples} samples, expected {expected}")
    return {
        "seconds": seconds,
        "cpu_seconds": workload.cpu_seconds() - cpu_start,
        "steal_fraction": workload.steal_fraction(ticks, workload.machine_ticks()),
        "first_sample_seconds": first_seconds,
        "samples": samples,
        "payload_bytes": payload_bytes,
    }


def phase_pass(args: argparse.Namespace) -> Json:
    """Modes ordered and shuffled: the median of --passes passes in this process,
    as `workload.py` times DatasetRT's."""
    warm_seconds = workload.warm_page_cache(Path(args.dir))
    start = time.perf_counter()
    dataset, expected = open_dataset(args, args.mode == "shuffled")
    open_seconds = time.perf_counter() - start
    passes = [read_pass(dataset, expected) for _ in range(args.passes)]
    return {
        **workload.median_pass(passes),
        "open_seconds": open_seconds,
        "warm_seconds": warm_seconds,
    }


def loader_litdata(args: argparse.Namespace) -> tuple[Iterable[Sized], int]:
    """LitData's `StreamingDataLoader` over its shuffled dataset."""
    from litdata import StreamingDataLoader

    dataset, expected = open_litdata(Path(args.dir), shuffle=True)
    loader = StreamingDataLoader(
        dataset, batch_size=args.batch_size, num_workers=args.workers, collate_fn=collate_dicts
    )
    return loader, expected


def loader_mosaic(args: argparse.Namespace) -> tuple[Iterable[Sized], int]:
    """torch's DataLoader over MosaicML's shuffled `StreamingDataset`."""
    import torch.utils.data

    dataset, expected = open_mosaic(Path(args.dir), shuffle=True, batch_size=args.batch_size)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, num_workers=args.workers, collate_fn=collate_dicts
    )
    return loader, expected


def loader_hf(args: argparse.Namespace) -> tuple[Iterable[Sized], int]:
    """The shuffled 64-shard iterable dataset; torch's DataLoader splits its
    shards between the workers."""
    import torch.utils.data

    dataset, expected = open_hf(Path(args.dir), shuffle=True)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, num_workers=args.workers, collate_fn=collate_dicts
    )
    return loader, expected


def loader_wds(args: argparse.Namespace) -> tuple[Iterable[Sized], int]:
    """Shards split among the workers, batches made in the workers (WebLoader)."""
    import webdataset as wds

    dataset, expected = open_wds(Path(args.dir), shuffle=True, count=args.count)
    batches = dataset.batched(args.batch_size, collation_fn=wds_collate)
    loader = wds.WebLoader(batches, batch_size=None, num_workers=args.workers)
    return loader, expected


def wds_collate(batch: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """`collate_dicts` for WebDataset's samples, whose payload is the `.bin` member."""
    return [bytes(sample["bin"]) for sample in batch]


LOADERS = {"litdata": loader_litdata, "mosaic": loader_mosaic, "hf": loader_hf, "wds": loader_wds}


def phase_loader(args: argparse.Namespace) -> Json:
    """Mode loader: one shuffled epoch through --system's DataLoader, timed."""
    warm_seconds = workload.warm_page_cache(Path(args.dir))
    start = time.perf_counter()
    loader, expected = LOADERS[args.system](args)
    open_seconds = time.perf_counter() - start
    result = run_epoch(loader, ChildClock())
    if result["samples"] != expected:
        raise SystemExit(f"read {result['samples']} samples, expected {expected}")
    return {**result, "open_seconds": open_seconds, "warm_seconds": warm_seconds}


def versions(system: str) -> dict[str, str]:
    """The versions of torch and of `system`'s distribution, as imported here."""
    import importlib.metadata

    return {name: importlib.metadata.version(name) for name in ("torch", DISTRIBUTIONS[system])}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=["write", "read"])
    parser.add_argument("--system", choices=list(DISTRIBUTIONS), required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--payload-kind", choices=["mixed", "random"], default="mixed")
    parser.add_argument("--mode", choices=["ordered", "shuffled", "loader"], default="loader")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Hugging Face libraries: no network, and no cache outside the work directory.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_CACHE", str(Path(args.dir).with_name("hf-cache")))
    if args.phase == "write":
        result = phase_write(args)
    elif args.mode == "loader":
        result = phase_loader(args)
    else:
        result = phase_pass(args)
    result.update({"phase": args.phase, "system": args.system, "versions": versions(args.system)})
    finish_child(result)


if __name__ == "__main__":
    main()
