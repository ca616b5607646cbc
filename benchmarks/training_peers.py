"""Peer loaders for `benchmarks/training.py`: one measurement per fresh process.

Runs under the peer virtual environment that `training.py` creates (torch 2.13.0
CPU, `litdata`, `mosaicml-streaming`), never under the project's: it does not
import `dataset_rt`. It writes the W1 data (the same payloads and metadata as
`benchmarks/workload.py` makes for DatasetRT) in each peer's own format, or
reads one shuffled epoch of it through the peer's DataLoader, and prints one
JSON object on its last stdout line.

Phases:
  write  --system litdata|mosaic --count N --dir DIR
         LitData: `optimize` (2 worker processes, 64 MB chunks, no compression);
         MosaicML: `MDSWriter` (64 MiB shards, no compression).
  read   --system litdata|mosaic --dir DIR --workers W --batch-size B
         warm the page cache, open the dataset (shuffled, seed 0), time one
         epoch from iter() to the last batch. LitData: `StreamingDataset` +
         `StreamingDataLoader`; MosaicML: `StreamingDataset(local=...,
         batch_size=B, shuffle=True)` + `torch.utils.data.DataLoader`.

Both loaders collate a batch to the list of its payloads, as `training.py`
does for DatasetRT. mosaicml-streaming imports torchvision, whose PyPI wheel is
a CUDA build that cannot load against torch's CPU build: when torchvision does
not import, it is hidden and `streaming.vision` is stubbed (MDS reading never
uses either).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import sys
import time
import types
from pathlib import Path

import workload  # this directory's helpers: payloads, metadata, page-cache warming
from training import ChildClock, collate_dicts, finish_child, run_epoch

CHUNK_BYTES = 64 << 20
MOSAIC_COLUMNS = {"data": "bytes", "index": "int", "label": "str", "score": "float64"}

# Module level: LitData's optimize workers are spawned and import this module.
PAYLOAD_BYTES = 1024
PAYLOADS = workload.make_payloads(PAYLOAD_BYTES, "mixed")


def w1_sample(index: int) -> dict:
    """One W1 sample as a dict: the payload and the metadata DatasetRT stores."""
    meta = workload.metadata_for(index)
    return {"data": PAYLOADS[index % len(PAYLOADS)], **meta}


def hide_torchvision() -> None:
    """Make `import streaming` work where torchvision cannot load (see module doc).

    torchvision is marked absent (``sys.modules[name] = None``: imports raise
    ImportError and ``find_spec`` answers None, so transformers, which
    streaming imports, and LitData skip it), and ``streaming.vision`` (the
    torchvision datasets, the only module that needs it) is an empty module.
    """
    try:
        import torchvision  # noqa: F401
    except Exception:
        for name in [name for name in sys.modules if name.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        sys.modules["torchvision"] = None  # type: ignore[assignment]
        vision = types.ModuleType("streaming.vision")
        vision.__spec__ = importlib.machinery.ModuleSpec("streaming.vision", None)
        sys.modules["streaming.vision"] = vision


# --------------------------------------------------------------------------- write


def write_litdata(count: int, out: Path) -> None:
    from litdata import optimize

    optimize(
        fn=w1_sample,
        inputs=list(range(count)),
        output_dir=str(out),
        chunk_bytes=CHUNK_BYTES,
        num_workers=2,
        mode="overwrite",
        verbose=False,
    )


def write_mosaic(count: int, out: Path) -> None:
    hide_torchvision()
    from streaming import MDSWriter

    with MDSWriter(out=str(out), columns=MOSAIC_COLUMNS, size_limit=CHUNK_BYTES) as writer:
        for index in range(count):
            writer.write(w1_sample(index))


def phase_write(args: argparse.Namespace) -> dict:
    out = Path(args.dir)
    start = time.perf_counter()
    if args.system == "litdata":
        write_litdata(args.count, out)
    else:
        write_mosaic(args.count, out)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "samples": args.count,
        "bytes_on_disk": workload.dir_bytes(out),
        "dir": str(out),
    }


# --------------------------------------------------------------------------- read


def open_litdata(path: Path, workers: int, batch_size: int):  # noqa: ANN201
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(input_dir=str(path), shuffle=True, seed=0)
    loader = StreamingDataLoader(
        dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate_dicts
    )
    return dataset, loader


def open_mosaic(path: Path, workers: int, batch_size: int):  # noqa: ANN201
    hide_torchvision()
    import torch.utils.data
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    dataset = StreamingDataset(local=str(path), batch_size=batch_size, shuffle=True, shuffle_seed=0)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate_dicts
    )
    return dataset, loader


def phase_read(args: argparse.Namespace) -> dict:
    path = Path(args.dir)
    warm_seconds = workload.warm_page_cache(path)
    opener = open_litdata if args.system == "litdata" else open_mosaic
    start = time.perf_counter()
    dataset, loader = opener(path, args.workers, args.batch_size)
    open_seconds = time.perf_counter() - start
    expected = len(dataset)
    clock = ChildClock()
    result = run_epoch(loader, clock)
    if result["samples"] != expected:
        raise SystemExit(f"read {result['samples']} samples, expected {expected}")
    return {**result, "open_seconds": open_seconds, "warm_seconds": warm_seconds}


def versions() -> dict:
    import importlib.metadata

    return {
        name: importlib.metadata.version(name)
        for name in ("torch", "litdata", "mosaicml-streaming")
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=["write", "read"])
    parser.add_argument("--system", choices=["litdata", "mosaic"], required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = phase_write(args) if args.phase == "write" else phase_read(args)
    result.update({"phase": args.phase, "system": args.system, "versions": versions()})
    finish_child(result)


if __name__ == "__main__":
    main()
