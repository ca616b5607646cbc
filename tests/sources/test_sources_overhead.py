"""The bytes a cache spends per sample beyond its payload, as docs/storage-format.md and
docs/sources.md state them: for any source, and for FolderSource's metadata."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypedDict

import pytest

from conftest import QUIET
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, ShardCompression, WriterConfig
from dataset_rt.sources import FolderSource
from source_helpers import make_tree


class FolderLabels(TypedDict, total=False):
    """FolderSource's label arguments."""

    label_from: Literal["parent"] | None
    label_kind: Literal["index", "name"]


def file_sizes(cache: Path) -> dict[str, int]:
    """Each file's size, shards summed as "shards"."""
    sizes: dict[str, int] = {"shards": 0}
    for path in cache.rglob("*"):
        if path.is_file():
            name = path.relative_to(cache).as_posix()
            key = "shards" if name.startswith("shards/") else name
            sizes[key] = sizes.get(key, 0) + path.stat().st_size
    return sizes


class SmallSamples:
    """docs/storage-format.md's overhead example: 100 random bytes, label and a 20-char path."""

    def __init__(self, name: str, count: int) -> None:
        self.name = name
        self.count = count

    def __iter__(self) -> Iterator[CacheInput]:
        payloads = random.Random(0)
        for i in range(self.count):
            path = f"train/{i % 10}/{i:06d}.png__"
            yield CacheInput(payloads.randbytes(100), {"label": i % 10, "path": path})


@pytest.mark.parametrize(("compression", "stored_payload"), [("none", 100), ("lz4", 106)])
def test_per_sample_overhead_is_the_documented_figure(
    runtime: DatasetRuntime,
    tmp_path: Path,
    compression: Literal["none", "lz4"],
    stored_payload: int,
) -> None:
    count = 2_000
    config = WriterConfig(
        show_progress=False, shard_compression=ShardCompression(algo=compression, ratio=1.0)
    )
    [result] = runtime.write_cache(SmallSamples("small", count), tmp_path, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    sizes = file_sizes(result.path)
    # header 8 + JSON 41 + payload; index row 24; CRC 4; Arrow int64 8 + offset 4 + 20 bytes.
    assert sizes["shards"] == count * (8 + 41 + stored_payload)
    assert sizes["index.bin"] == count * 24
    assert sizes["records.crc32c"] == count * 4
    assert 0 < sizes["metadata.arrow"] - count * 32 < 1024
    assert 0 < sizes["manifest.json"] < 1024


@pytest.mark.parametrize(
    ("arguments", "json_bytes", "arrow_bytes"),
    [({}, 71, 41), ({"label_kind": "name"}, 56, 33), ({"label_from": None}, 42, 26)],
)
def test_folder_source_overhead_is_the_documented_figure(
    runtime: DatasetRuntime,
    tmp_path: Path,
    arguments: FolderLabels,
    json_bytes: int,
    arrow_bytes: int,
) -> None:
    """docs/sources.md: a 100-byte file at cat/000123.png."""
    make_tree(
        tmp_path / "files", [f"{name}/{i:06d}.png" for name in ("cat", "dog") for i in range(50)]
    )
    for path in (tmp_path / "files").rglob("*.png"):
        path.write_bytes(bytes(100))
    source = FolderSource(tmp_path / "files", **arguments)
    [result] = runtime.write_cache(source, tmp_path / "caches", writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    sizes = file_sizes(result.path)
    assert sizes["shards"] == 100 * (8 + json_bytes + 100)
    assert 0 < sizes["metadata.arrow"] - 100 * arrow_bytes < 2048  # + schema and footer
