"""What a cache's files mean, for the fuzz harness (`cache_files.py`): the seed samples and
their source, a seed cache's files (`Variant`), and the model of a mutated cache's files
(`Model`), each record's meaning as the reference decoder (`cache_reference.py`) reads it.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cache_reference as reference

from dataset_rt import CacheInput

MANIFEST = "manifest.json"
METADATA = "metadata.arrow"
INDEX = "index.bin"
CHECKSUMS = "records.crc32c"
SCHEMA = {"b": "bool", "f": "float", "i": "int", "s": "string"}


def seed_samples() -> list[tuple[bytes, dict[str, object]]]:
    """Payloads of every size class (empty, small, a run of records, deferred in several
    pieces or LZ4-compressed with long matches) and metadata of the four kinds, with
    values at the edges of their encodings."""
    noise = random.Random(20240601)
    text = b"the quick brown fox jumps over the lazy dog " * 50
    return [
        (b"", {"b": True, "f": 0.0, "i": 0, "s": ""}),
        (b"\x00", {"b": False, "f": -0.0, "i": -1, "s": "\u00e9\U0001f600"}),
        (text[:100], {"b": True, "f": 0.1, "i": 2**63 - 1, "s": 'q"b\\n\n'}),
        (noise.randbytes(300), {"b": False, "f": 1e21, "i": -(2**63), "s": "s3"}),
        (text[:2000], {"b": True, "f": 5e-324, "i": 4, "s": "\x00\x1f"}),
        (
            noise.randbytes(256 * 1024 + 4099),
            {"b": False, "f": 1.7976931348623157e308, "i": 5, "s": "x" * 40},
        ),
        (text * 3 + noise.randbytes(2000), {"b": True, "f": 1.5, "i": 6, "s": "s6"}),
    ]


class ListSource:
    def __init__(self, name: str, samples: list[tuple[bytes, dict[str, object]]]) -> None:
        self.name = name
        self.samples = samples

    def __iter__(self) -> Iterator[CacheInput]:
        for data, metadata in self.samples:
            yield CacheInput(data, metadata)  # type: ignore[arg-type]


@dataclass
class Variant:
    """A seed cache: its files' bytes and what they hold."""

    name: str
    files: dict[str, bytes]
    manifest: dict[str, Any]
    rows: list[tuple[int, int, int]]
    checksums: bool
    hot: dict[str, list[int]]

    def record(self, sample_id: int) -> bytes:
        shard_id, offset, length = self.rows[sample_id]
        return self.files[reference.shard_name(shard_id)][offset : offset + length]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=128)
def record_crc32c(record: bytes) -> int:
    return reference.crc32c(record)


@functools.lru_cache(maxsize=128)
def record_meaning(record: bytes, algo: str) -> reference.Sample | str:
    return reference.record_meaning(record, algo, SCHEMA)


def parse_manifest(data: bytes | None) -> Any:
    """The manifest as strict JSON, or the StrictJsonError saying why it is not."""
    if data is None:
        return reference.StrictJsonError("manifest.json is missing")
    try:
        return reference.strict_json(data)
    except reference.StrictJsonError as error:
        return error


class Model:
    """What a cache's files mean, given its (Python-parsed) manifest."""

    def __init__(self, files: dict[str, bytes | None], manifest: dict[str, Any]) -> None:
        self.files = files
        self.manifest = manifest
        self.schema = {field["name"]: field["kind"] for field in manifest["metadata_schema"]}
        self.rows = reference.index_rows(files.get(INDEX) or b"")
        self.count = manifest["sample_count"]

    def record(self, sample_id: int) -> bytes | str:
        if sample_id >= len(self.rows):
            return f"index.bin has no row {sample_id}"
        shard_id, offset, length = self.rows[sample_id]
        shard = self.files.get(reference.shard_name(shard_id))
        if shard_id >= len(self.manifest["shards"]) or shard is None:
            return f"row {sample_id} names no shard"
        if offset + length > len(shard):
            return f"row {sample_id} runs past its shard"
        return shard[offset : offset + length]

    def sample(self, sample_id: int) -> reference.Sample | str:
        record = self.record(sample_id)
        if isinstance(record, str):
            return record
        shard_id = self.rows[sample_id][0]
        algo = self.manifest["shards"][shard_id]["compression"]["algo"]
        if self.schema != SCHEMA:
            return reference.record_meaning(record, algo, self.schema)
        return record_meaning(record, algo)
