"""The byte budget of remote caches (`RemoteConfig.budget_bytes`, read/shard_budget.zig),
checked from outside: a watcher thread lists local_dir every millisecond or so while a
cache of 15 shards is read from moto's S3 server on 127.0.0.1, and the shard bytes it
sees (final names and download temporaries) never exceed the budget."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from budget_watcher import Watcher, shard_bytes
from conftest import ListSource
from dataset_rt import CachedDataset, DatasetRuntime, ReaderConfig, RemoteConfig, WriterConfig
from dataset_rt.errors import InvalidArgumentError
from fault_proxy import FaultProxy
from remote_fixtures import upload

# About 10 samples of 300 to 450 bytes per shard: 15 shards.
SHARDED = WriterConfig(show_progress=False, max_shard_bytes=4096)
SAMPLE_COUNT = 150


def write_local(runtime: DatasetRuntime, base: Path, name: str) -> Path:
    samples = [(bytes([i % 251]) * (300 + i), {"i": i}) for i in range(SAMPLE_COUNT)]
    runtime.write_cache([ListSource(name, samples)], base, writer_config=SHARDED)
    return base / name


def shard_sizes(cache: Path) -> list[int]:
    return sorted((p.stat().st_size for p in (cache / "shards").glob("*.bin")), reverse=True)


def budget_for(cache: Path) -> int:
    """About a quarter of the cache's shard bytes, and never below its two largest."""
    sizes = shard_sizes(cache)
    return max(sum(sizes) // 4, sizes[0] + sizes[1])


def rows(dataset: CachedDataset) -> list[tuple[Any, ...]]:
    return [(s.cache_id, s.sample_id, bytes(s.data), dict(s.metadata)) for s in dataset]


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_a_read_under_a_budget_never_holds_more_shard_bytes_than_it(
    shuffle: bool,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    runtime = DatasetRuntime(num_workers=2)
    local = write_local(runtime, tmp_path / "local", "budget")
    assert len(shard_sizes(local)) >= 15
    url = upload(moto_server, local, f"budget-{shuffle}/budget")
    config = ReaderConfig(seed=5, shuffle=shuffle)
    expected = rows(runtime.cached_dataset([local], reader_config=config))
    budget = budget_for(local)
    assert budget < sum(shard_sizes(local)) // 3
    local_dir = tmp_path / "copies"
    remote = RemoteConfig(local_dir=local_dir, budget_bytes=budget, retries=2, timeout_s=5.0)
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote)
    with Watcher(local_dir).running() as watcher:
        samples = rows(dataset)
    assert samples == expected
    assert watcher.samples > 10
    assert 0 < watcher.max_bytes <= budget, (watcher.max_bytes, budget)
    stats = dataset.remote_stats()
    assert stats.shards_evicted > 0 and stats.shard_bytes_evicted > 0
    sizes = shard_sizes(local)
    assert stats.shards_fetched >= len(sizes) and stats.shard_bytes_fetched >= sum(sizes)
    # What stays is what was fetched and not evicted.
    kept = stats.shard_bytes_fetched - stats.shard_bytes_evicted
    assert kept == shard_bytes(local_dir) <= budget
    assert not list(local_dir.rglob("*.tmp-*")) and not list(local_dir.rglob("*.reserved-*"))


@pytest.mark.parametrize("payload", ["bytes", "memoryview"])
def test_large_payloads_under_a_budget_are_read_whole_while_shards_are_evicted(
    payload: str,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    # Payloads of 96 KiB and more, which a read leaves in their shard to be copied
    # once the batch is handed out, unless a budget may evict the shard by then.
    runtime = DatasetRuntime(num_workers=2)
    samples = [(bytes([i % 251]) * ((96 << 10) + 37 * i), {"i": i}) for i in range(48)]
    config = WriterConfig(show_progress=False, max_shard_bytes=400 << 10)
    runtime.write_cache([ListSource("large", samples)], tmp_path / "local", writer_config=config)
    local = tmp_path / "local" / "large"
    assert len(shard_sizes(local)) >= 12
    url = upload(moto_server, local, f"large-{payload}/large")
    reader = ReaderConfig(seed=3, shuffle=True, payload=payload)  # type: ignore[arg-type]
    expected = rows(runtime.cached_dataset([local], reader_config=reader))
    remote = RemoteConfig(local_dir=tmp_path / "copies", budget_bytes=budget_for(local))
    dataset = runtime.cached_dataset([url], reader_config=reader, remote=remote)
    assert rows(dataset) == expected
    assert dataset.remote_stats().shards_evicted > 0


def test_a_budget_below_the_two_largest_shards_is_refused_naming_both(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    local = write_local(runtime, tmp_path / "local", "small-budget")
    url = upload(moto_server, local, "small-budget/cache")
    first, second = shard_sizes(local)[:2]
    remote = RemoteConfig(local_dir=tmp_path / "copies", budget_bytes=first + second - 1)
    message = (
        f"RemoteConfig.budget_bytes={first + second - 1} is below the two largest shards "
        f"of {url}: {first} + {second} = {first + second} bytes"
    )
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        runtime.cached_dataset([url], reader_config=ReaderConfig(seed=0), remote=remote)
    assert not list((tmp_path / "copies").rglob("*.bin"))
    at_the_limit = RemoteConfig(local_dir=tmp_path / "copies", budget_bytes=first + second)
    dataset = runtime.cached_dataset([url], reader_config=ReaderConfig(seed=0), remote=at_the_limit)
    assert len(rows(dataset)) == SAMPLE_COUNT


def test_four_workers_read_through_a_budget_of_the_two_largest_shards(
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    # More readers than shards that fit: each holds its shard only while it reads.
    runtime = DatasetRuntime(num_workers=4)
    local = write_local(runtime, tmp_path / "local", "tight")
    url = upload(moto_server, local, "tight/cache")
    config = ReaderConfig(seed=9)
    expected = rows(runtime.cached_dataset([local], reader_config=config))
    first, second = shard_sizes(local)[:2]
    local_dir = tmp_path / "copies"
    remote = RemoteConfig(local_dir=local_dir, budget_bytes=first + second, timeout_s=5.0)
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote)
    with Watcher(local_dir).running() as watcher:
        assert rows(dataset) == expected
    assert watcher.max_bytes <= first + second
    assert dataset.remote_stats().shards_evicted > 0
