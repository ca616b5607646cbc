"""What the Python side of the API costs per sample on this machine, with no
native work at all: the floor under W1's figures (docs/benchmarks.md).

Read floor: from one already-copied batch of 1 KiB payloads and metadata
columns, build what the binding hands out per sample (a `bytes` slice, a
`MetadataRow`, a `CachedSample`) with the binding's own C-level maps, and
consume it as the benchmark does (`for s in it: s.data`). Write floor: iterate
the benchmark's source and do the binding's per-sample work (shape checks,
private dict copy) plus each batch's metadata by column (the usual route) or as
JSON.

Usage: python benchmarks/floor.py   (with this project's dataset_rt importable)
"""

from __future__ import annotations

import io
import itertools
import operator
import os
import statistics
import time
from itertools import repeat

from dataset_rt._metadata_columns import to_columns
from dataset_rt._metadata_row import MetadataRow
from dataset_rt._packed_batch import BatchMetadata
from dataset_rt._reader import _samples
from dataset_rt._records import CacheInput
from dataset_rt._writer import _addresses
from dataset_rt._writing import _encode_metadata, _lengths

SAMPLES = 200_000
CHUNK = 64  # samples per batch with the default prefetch_size
LABELS = ["cat", "dog", "bird", "fish"]


def read_floor() -> float:
    """Samples/s of building and consuming the objects of a data-only pass."""
    joined = os.urandom(CHUNK * 1024)
    offsets = list(range(0, (CHUNK + 1) * 1024, 1024))
    names = ["index", "label", "score"]
    # A data-only pass never decodes metadata: the batch's packed copy is not
    # read, so an empty one stands in for it.
    no_columns = memoryview(b"").cast("Q")

    def batch() -> list[tuple]:
        payloads = map(io.BytesIO(joined).read, map(operator.sub, offsets[1:], offsets))
        metadata = BatchMetadata(names, b"", no_columns, 0)
        rows = map(MetadataRow, repeat(metadata, CHUNK), range(CHUNK))
        ids = range(CHUNK)
        return _samples(CHUNK, zip(payloads, rows, repeat(0), ids, strict=False))

    started = time.perf_counter()
    for sample in itertools.chain.from_iterable(batch() for _ in range(SAMPLES // CHUNK)):
        sample.data  # noqa: B018 (what the benchmark's pass does)
    return SAMPLES / (time.perf_counter() - started)


def write_floor(by_columns: bool) -> tuple[float, float]:
    """(samples/s of iterating the source alone, samples/s of source + binding work),
    the batch metadata transposed into columns (the binding's usual route) or as JSON."""
    payloads = [os.urandom(512) + bytes(512) for _ in range(16)]

    def source():  # noqa: ANN202
        for i in range(SAMPLES):
            metadata = {"index": i, "label": LABELS[i % 4], "score": i * 0.5}
            yield CacheInput(payloads[i % 16], metadata)

    started = time.perf_counter()
    for _ in source():
        pass
    source_only = SAMPLES / (time.perf_counter() - started)

    schema = {"index": int, "label": str, "score": float}
    started = time.perf_counter()
    metadatas: list[dict] = []
    datas: list[bytes] = []
    for item in source():
        data, metadata = item
        if type(data) is not bytes:
            raise TypeError(type(data))
        datas.append(data)
        metadatas.append(metadata.copy())
        if len(metadatas) == 1024:
            _lengths(datas)
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
