"""A cache described by the core from its manifest: `drt_cache_info` for a folder,
`drt_dataset_cache_info` for a cache of an open dataset (`DatasetHandle.cache_info`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from dataset_rt._binding import native as _native


@dataclass(frozen=True)
class CacheInfo:
    """A cache described by the core from its manifest alone (``drt_cache_info``)."""

    format_version: int
    cache_id: int | None
    """The cache_id a format 3 manifest persists; None in format 2."""
    source_name: str
    samples: int
    shards: int
    shard_bytes: int
    """The shard files' total size."""
    payload_bytes_uncompressed: int
    compression: tuple[tuple[str, float], ...]
    """Each (algo, ratio) of the shards once, by algo, then ratio."""
    record_checksums: bool
    """Whether the cache lists records.crc32c."""
    schema: tuple[tuple[str, str], ...]
    """(name, kind) of each stored metadata column, in name order."""


def cache_info(path: os.PathLike[str] | str) -> CacheInfo:
    """The core's description of the cache at `path`, from its manifest.json
    (checked as opening checks it; no other file is read). A folder without a
    manifest, or an invalid one, raises `errors.InvalidCacheError`."""
    encoded = os.fsencode(path)
    return parse_cache_info(_native.take_buffer(_native.lib.drt_cache_info, encoded, len(encoded)))


def parse_cache_info(text: bytes) -> CacheInfo:
    """A `CacheInfo` of the JSON object `drt_cache_info` and `drt_dataset_cache_info` give."""
    info = json.loads(text.decode("utf-8", "surrogatepass"))
    return CacheInfo(
        format_version=info["format_version"],
        cache_id=info["cache_id"],
        source_name=info["source_name"],
        samples=info["sample_count"],
        shards=info["shard_count"],
        shard_bytes=info["shard_bytes"],
        payload_bytes_uncompressed=info["payload_bytes_uncompressed"],
        compression=tuple((c["algo"], c["ratio"]) for c in info["compression"]),
        record_checksums=info["record_checksums"],
        schema=tuple((f["name"], f["kind"]) for f in info["metadata_schema"]),
    )
