"""What the Python side of the API costs per sample on this machine, with no
native work at all: the floor under W1's figures (docs/benchmarks.md).

Read floor: from one already-copied batch of 1 KiB payloads and metadata
columns, build what the binding hands out per sample (a `bytes` slice, a
`MetadataRow`, a `CachedSample`) with the binding's own C-level maps, and
consume it with the loop that times the benchmark's read passes
(`workload.read_pass`; `workload.py floor` runs it as run.py's W1 figure
`python_floor_sps`). Write floor: iterate
the benchmark's source and do the binding's per-sample work (shape checks,
private dict copy) plus each batch's metadata by column (the usual route) or as
JSON.

Usage: python benchmarks/floor.py   (with this project's dataset_rt importable)
"""

from __future__ import annotations

import array
import io
import itertools
import os
import statistics
import time
from collections.abc import Iterator
from itertools import repeat
from typing import Any

import workload  # this directory's measurement helpers

from dataset_rt._binding.metadata_columns import to_columns
from dataset_rt._binding.metadata_row import MetadataRow
from dataset_rt._binding.packed_batch import BatchMetadata
from dataset_rt._binding.reader import _samples
from dataset_rt._binding.writer import _addresses, payload_lengths
from dataset_rt._core.writing import _encode_metadata
from dataset_rt._records import CachedSample, CacheInput, MetadataValue

SAMPLES = 200_000
CHUNK = 64  # samples per batch with the default prefetch_size
LABELS = ["cat", "dog", "bird", "fish"]


class FloorDataset:
    """Stands in for a dataset of `count` samples: its iterator hands out what
    the binding hands out, built by the binding's own code from one
    already-copied batch of 1 KiB payloads, with no native work at all."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.joined = os.urandom(CHUNK * 1024)
        # Lengths and ids as the binding has them: views of the batch's packed copy.
        self.lengths = memoryview(array.array("Q", [1024] * CHUNK))
        self.ids = memoryview(array.array("Q", range(CHUNK)))
        self.names = ["index", "label", "score"]
        # A data-only pass never decodes metadata: the batch's packed copy is
        # not read, so an empty one stands in for it.
        self.no_columns = memoryview(b"").cast("Q")

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[CachedSample]:
        batches = (self.batch(min(CHUNK, self.count - at)) for at in range(0, self.count, CHUNK))
        return itertools.chain.from_iterable(batches)

    def batch(self, count: int) -> list[CachedSample]:
        """One batch as `NativeIterator.next_batch` builds it from the core's."""
        payloads = map(io.BytesIO(self.joined).read, self.lengths[:count])
        metadata = BatchMetadata(self.names, b"", self.no_columns, 0)
        rows = map(MetadataRow, repeat(metadata, count), range(count))
        ids = self.ids[:count]
        return _samples(count, zip(payloads, rows, repeat(0, count), ids, strict=False))


def read_floor(count: int = SAMPLES) -> float:
    """Samples/s of a data-only pass over a `FloorDataset`, consumed by the very
    loop that times the benchmark's read passes (`workload.read_pass`)."""
    result = workload.read_pass(FloorDataset(count), "ordered", count)
    samples_per_second: float = result["samples"] / result["seconds"]
    return samples_per_second


def write_floor(by_columns: bool) -> tuple[float, float]:
    """(samples/s of iterating the source alone, samples/s of source + binding work),
    the batch metadata transposed into columns (the binding's usual route) or as JSON."""
    payloads = [os.urandom(512) + bytes(512) for _ in range(16)]

    def source() -> Iterator[CacheInput]:
        for i in range(SAMPLES):
            metadata: dict[str, MetadataValue] = {
                "index": i,
                "label": LABELS[i % 4],
                "score": i * 0.5,
            }
            yield CacheInput(payloads[i % 16], metadata)

    started = time.perf_counter()
    for _ in source():
        pass
    source_only = SAMPLES / (time.perf_counter() - started)

    schema = {"index": int, "label": str, "score": float}
    started = time.perf_counter()
    metadatas: list[dict[str, Any]] = []
    datas: list[bytes] = []
    for item in source():
        data, metadata = item
        if type(data) is not bytes:
            raise TypeError(type(data))
        datas.append(data)
        # As the binding copies it (a dict here: the other branch is not taken).
        metadatas.append(metadata.copy() if type(metadata) is dict else dict(metadata))
        if len(metadatas) == 1024:
            payload_lengths(datas)
            if by_columns:
                set(map(len, metadatas))  # the binding's check that keys can match
                to_columns(metadatas, schema)
                _addresses(datas)
            else:
                _encode_metadata(metadatas).encode("utf-8", "surrogatepass")
                b"".join(datas)
            metadatas, datas = [], []
    with_binding = SAMPLES / (time.perf_counter() - started)
    return source_only, with_binding


def main() -> None:
    reads = [read_floor() for _ in range(5)]
    print(f"read floor (objects only, data-only pass): {statistics.median(reads):,.0f} samples/s")
    # The two routes alternate, so that a change in the machine's speed hits both.
    rounds = [(write_floor(True), write_floor(False)) for _ in range(3)]
    for position, route in ((0, "metadata columns"), (1, "metadata JSON")):
        source_only = statistics.median(r[position][0] for r in rounds)
        with_binding = statistics.median(r[position][1] for r in rounds)
        print(
            f"write floor: source alone {source_only:,.0f} samples/s; source + per-sample "
            f"checks/copies + batch {route} {with_binding:,.0f} samples/s"
        )


if __name__ == "__main__":
    main()
