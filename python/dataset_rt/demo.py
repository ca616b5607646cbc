"""The main job end to end: write a real cache from a generated source and read it back.

    python -m dataset_rt.demo [--samples N] [--payload-bytes B] [--compression none|lz4] [--dir DIR]

Prints what it wrote, how fast, and verifies every sample read back.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from dataset_rt import (
    CacheInput,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
    verify,
)
from dataset_rt._binding.native import MAX_WORKERS

LABELS = ("cat", "dog", "bird", "fish")


class GeneratedSource:
    """Deterministic samples: payload bytes derived from the index, simple metadata."""

    def __init__(self, name: str, samples: int, payload_bytes: int) -> None:
        self.name = name
        self.samples = samples
        self.payload_bytes = payload_bytes

    def payload(self, index: int) -> bytes:
        seed = hashlib.blake2b(index.to_bytes(8, "little"), digest_size=32).digest()
        repeats = -(-self.payload_bytes // len(seed))
        return (seed * repeats)[: self.payload_bytes]

    def metadata(self, index: int) -> dict[str, bool | int | float | str]:
        return {
            "index": index,
            "label": LABELS[index % 4],
            "score": index / 7,
            "even": index % 2 == 0,
        }

    def __iter__(self) -> Iterator[CacheInput]:
        for index in range(self.samples):
            yield CacheInput(self.payload(index), self.metadata(index))


def _failure(result: CacheWriteResult) -> str:
    """Why a write to a local folder failed (it yields no `CacheUploadSuccess`)."""
    if isinstance(result, CacheWriteError):
        return result.message
    return f"unexpected result {result!r}"


def run(
    samples: int,
    payload_bytes: int,
    compression: Literal["none", "lz4"],
    directory: Path,
    workers: int,
) -> int:
    source = GeneratedSource("demo", samples, payload_bytes)
    runtime = DatasetRuntime(num_workers=workers)
    ratio = 2.0 if compression == "lz4" else 1.0
    # The writer's progress line only on a terminal: a log gets no carriage returns.
    config = WriterConfig(
        shard_compression=ShardCompression(algo=compression, ratio=ratio),
        show_progress=sys.stderr.isatty(),
    )
    total_mb = samples * payload_bytes / 1e6
    print(
        f"writing {samples:,} samples x {payload_bytes:,} bytes "
        f"({total_mb:,.1f} MB, {compression}) to {directory}"
    )
    started = time.perf_counter()
    [result] = runtime.write_cache(source, directory, writer_config=config)
    write_seconds = time.perf_counter() - started
    if not isinstance(result, CacheWriteSuccess):
        print(f"write failed: {_failure(result)}", file=sys.stderr)
        return 1
    disk = sum(f.stat().st_size for f in result.path.rglob("*") if f.is_file())
    print(
        f"  wrote {result.path} in {write_seconds:.2f}s: {samples / write_seconds:,.0f} samples/s, "
        f"{total_mb / write_seconds:,.1f} MB/s, {disk / 1e6:,.1f} MB on disk"
    )

    dataset = runtime.cached_dataset(
        [result.path], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    started = time.perf_counter()
    checked = 0
    for sample in dataset:
        index = sample.sample_id
        # Unshuffled: the cache's samples in order, each exactly once.
        if index != checked or sample.cache_id != 0:
            got = f"{sample.cache_id}/{index}"
            print(f"read sample {got} at position {checked}, expected 0/{checked}", file=sys.stderr)
            return 1
        if sample.data != source.payload(index) or sample.metadata != source.metadata(index):
            print(f"sample {index} differs from what was written", file=sys.stderr)
            return 1
        checked += 1
    read_seconds = time.perf_counter() - started
    if checked != samples:
        print(f"read {checked} samples, expected {samples}", file=sys.stderr)
        return 1
    print(
        f"  read back and verified {checked:,} samples in {read_seconds:.2f}s "
        f"(including regenerating each payload to compare): {checked / read_seconds:,.0f} samples/s"
    )

    started = time.perf_counter()
    report = verify(result.path, num_workers=workers, show_progress=False)
    verify_seconds = time.perf_counter() - started
    if not report.ok:
        print(
            f"verify found {report.problems_total} problems: {report.problems[:3]}", file=sys.stderr
        )
        return 1
    print(
        f"  verify (every SHA-256, every record's CRC-32C and metadata) found no problem "
        f"in {verify_seconds:.2f}s: {disk / verify_seconds / 1e6:,.0f} MB/s"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--payload-bytes", type=int, default=1024)
    parser.add_argument("--compression", choices=("none", "lz4"), default="lz4")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="base cache directory (default: a temporary one, removed)",
    )
    args = parser.parse_args(argv)
    if args.samples < 1 or args.payload_bytes < 0 or not 1 <= args.workers <= MAX_WORKERS:
        parser.error(
            f"--samples must be at least 1, --payload-bytes at least 0, "
            f"--workers from 1 to {MAX_WORKERS}"
        )
    if args.dir is not None:
        return run(args.samples, args.payload_bytes, args.compression, args.dir, args.workers)
    directory = Path(tempfile.mkdtemp(prefix="dataset_rt_demo_"))
    try:
        return run(args.samples, args.payload_bytes, args.compression, directory, args.workers)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
