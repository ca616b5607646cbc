"""The sample stream is a pure function of (caches, table, weights, seed, position) (SPEC 5, 6).

It must not depend on the dataset object, the runtime's pool size or the
prefetch window.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TypeAlias

import polars as pl
import pytest

from conftest import QUIET, ListSource, written_paths
from dataset_rt import CachedDataset, CacheSource, DatasetRuntime, MetadataValue, ReaderConfig

SEED = 20240611
EPOCH_LEN = 160


def varied_samples(count: int, salt: int) -> list[tuple[bytes, dict[str, object]]]:
    """Payloads of varied sizes (0 to ~3 KiB) so that reads finish out of order."""
    out: list[tuple[bytes, dict[str, object]]] = []
    for i in range(count):
        size = (i * 977 + salt * 131) % 3000 if i % 5 else 0
        out.append(
            (bytes([(i + salt) % 256]) * size + f"#{salt}:{i}".encode(), {"i": i, "salt": salt})
        )
    return out


SOURCES = {"first": varied_samples(40, 1), "second": varied_samples(25, 2)}


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("determinism")
    sources: list[CacheSource] = [ListSource(n, s) for n, s in SOURCES.items()]
    return written_paths(runtime.write_cache(sources, base, writer_config=QUIET))


def load(
    runtime: DatasetRuntime,
    caches: list[Path],
    *,
    seed: int = SEED,
    shuffle: bool = True,
    **settings: int | bool,
) -> CachedDataset:
    config = ReaderConfig.model_validate({"seed": seed, "shuffle": shuffle, **settings})
    return runtime.cached_dataset(caches, reader_config=config)


# (cache_id, sample_id, payload, metadata) of one sample read.
Row: TypeAlias = tuple[int, int, bytes | memoryview, dict[str, MetadataValue]]


def stream(ds: CachedDataset, epochs: int = 2) -> list[Row]:
    return [(s.cache_id, s.sample_id, s.data, dict(s.metadata)) for _ in range(epochs) for s in ds]


def weighted(table: pl.DataFrame) -> pl.DataFrame:
    """A filtered, reordered, duplicated and reweighted table."""
    kept = table.filter(pl.col("sample_id") % 3 != 1).reverse()
    return pl.concat([kept, kept.head(5)]).with_columns(
        weight=(pl.col("i") % 4 + 1).cast(pl.Float64)
    )


def reference(
    runtime: DatasetRuntime, caches: list[Path], *, shuffle: bool, reweight: bool
) -> list[Row]:
    ds = load(runtime, caches, shuffle=shuffle)
    if reweight:
        ds.update_metadata(weighted(ds.get_metadata()))
    ds.set_epoch_len(EPOCH_LEN)
    return stream(ds)


def check_payloads(samples: list[Row]) -> None:
    names = list(SOURCES)
    for cache_id, sample_id, data, metadata in samples:
        expected_data, expected_metadata = SOURCES[names[cache_id]][sample_id]
        assert data == expected_data
        assert metadata == expected_metadata


@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffled", "ordered"])
@pytest.mark.parametrize("reweight", [False, True], ids=["default-table", "edited-table"])
def test_stream_does_not_depend_on_pool_size_or_prefetch(
    caches: list[Path], shuffle: bool, reweight: bool
) -> None:
    expected = reference(DatasetRuntime(num_workers=1), caches, shuffle=shuffle, reweight=reweight)
    assert len(expected) == 2 * EPOCH_LEN
    check_payloads(expected)
    for num_workers in (1, 2, 3):
        runtime = DatasetRuntime(num_workers=num_workers)
        for prefetch_size in (1, 7, 64):
            ds = load(runtime, caches, shuffle=shuffle, prefetch_size=prefetch_size)
            if reweight:
                ds.update_metadata(weighted(ds.get_metadata()))
            ds.set_epoch_len(EPOCH_LEN)
            assert stream(ds) == expected, (
                f"num_workers={num_workers} prefetch_size={prefetch_size}"
            )


def test_unshuffled_stream_is_exactly_table_order(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches, shuffle=False)
    table = weighted(ds.get_metadata())
    ds.update_metadata(table)
    ds.set_epoch_len(EPOCH_LEN)
    order = list(zip(table["cache_id"].to_list(), table["sample_id"].to_list(), strict=True))
    expected = [order[k % len(order)] for k in range(2 * EPOCH_LEN)]
    assert [(c, s) for c, s, _, _ in stream(ds)] == expected


def test_reloading_reproduces_the_stream(caches: list[Path]) -> None:
    runtime = DatasetRuntime(num_workers=2)
    first = load(runtime, caches)
    first.set_epoch_len(EPOCH_LEN)
    expected = stream(first, epochs=3)
    check_payloads(expected)
    del first
    gc.collect()
    for again in (
        load(runtime, caches),
        load(DatasetRuntime(num_workers=3), caches),
        load(runtime, caches, validate_cache=True),
    ):
        again.set_epoch_len(EPOCH_LEN)
        assert stream(again, epochs=3) == expected


def test_stream_depends_only_on_table_not_on_history(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    used = load(runtime, caches)
    used.set_epoch_len(33)
    for _ in range(3):
        stream(used, epochs=1)
    used.update_metadata(weighted(used.get_metadata().filter(pl.col("cache_id") == 0)))
    used.set_epoch_len(EPOCH_LEN)
    fresh = load(runtime, caches)
    fresh.set_epoch_len(EPOCH_LEN)
    fresh.update_metadata(weighted(fresh.get_metadata().filter(pl.col("cache_id") == 0)))
    assert stream(used) == stream(fresh)


def draws(
    runtime: DatasetRuntime, caches: list[Path], seed: int, count: int = 400
) -> list[tuple[int, int]]:
    ds = load(runtime, caches, seed=seed)
    ds.set_epoch_len(count)
    return [(s.cache_id, s.sample_id) for s in ds]


def test_different_seeds_give_unrelated_streams(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    seeds = [0, 1, 2, SEED, SEED + 1, 2**63, 2**64 - 1]
    streams = {seed: draws(runtime, caches, seed) for seed in seeds}
    rows = 65
    for a in seeds:
        for b in seeds:
            if a >= b:
                continue
            sa, sb = streams[a], streams[b]
            assert sa != sb, (a, b)
            # Not shifted copies of each other either: agreement stays near 1/rows.
            for shift in range(-3, 4):
                pairs = list(zip(sa[max(shift, 0) :], sb[max(-shift, 0) :], strict=False))
                agreement = sum(x == y for x, y in pairs) / len(pairs)
                assert agreement < 5 / rows, (a, b, shift, agreement)
