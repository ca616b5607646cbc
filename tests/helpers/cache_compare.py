"""Comparing a cache built in partitions with one `write_cache` of the same samples:
what tests/core/test_partitions.py and the engine tests (tests/ray_integration/) share."""

from __future__ import annotations

from pathlib import Path

from conftest import ListSource
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ReaderConfig, WriterConfig

# Tiny shards, so that even a small cache spans several.
SMALL_SHARDS = WriterConfig(show_progress=False, max_shard_bytes=256)

Sample = tuple[bytes, dict[str, object]]


def assert_same_cache(runtime: DatasetRuntime, committed: Path, single: Path) -> None:
    """Same samples, payloads, metadata and metadata table, sample id by sample id."""
    config = ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    ours = runtime.cached_dataset([committed], reader_config=config)
    theirs = runtime.cached_dataset([single], reader_config=config)
    assert len(ours) == len(theirs)
    table = theirs.get_metadata()
    pairs = list(zip(table["cache_id"], table["sample_id"], strict=True))
    assert [sample_id for _, sample_id in pairs] == list(range(len(theirs)))
    for a, b in zip(ours.get_many(pairs), theirs.get_many(pairs), strict=True):
        assert bytes(a.data) == bytes(b.data)
        assert dict(a.metadata) == dict(b.metadata)
        assert (a.cache_id, a.sample_id) == (b.cache_id, b.sample_id)
    assert ours.get_metadata().equals(theirs.get_metadata())


def single_write(
    runtime: DatasetRuntime,
    base: Path,
    name: str,
    samples: list[Sample],
    config: WriterConfig = SMALL_SHARDS,
) -> Path:
    """The cache of one `write_cache` of `samples`, in this order; its path."""
    [result] = runtime.write_cache(ListSource(name, samples), base, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path
