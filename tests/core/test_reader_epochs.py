"""Epoch windows over the sample stream (SPEC 5) and iterator snapshots (SPEC 3)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, CacheSource, DatasetRuntime, ReaderConfig

SAMPLES = simple_samples(5)


def identities(iterable: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in iterable]


def rows(iterable: Iterable[CachedSample]) -> list[int]:
    """Sample ids of one-cache iterations."""
    return [s.sample_id for s in iterable]


@pytest.fixture(scope="module")
def five_rows(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    """One cache with five samples (rows 1..5 of SPEC 5 are sample ids 0..4)."""
    base = tmp_path_factory.mktemp("epochs")
    [path] = written_paths(
        runtime.write_cache(ListSource("five", SAMPLES), base, writer_config=QUIET)
    )
    return path


@pytest.fixture(scope="module")
def two_caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("epochs2")
    sources: list[CacheSource] = [
        ListSource("a", simple_samples(7)),
        ListSource("b", simple_samples(4, payload_bytes=3)),
    ]
    return written_paths(runtime.write_cache(sources, base, writer_config=QUIET))


def open_ds(
    runtime: DatasetRuntime,
    paths: Path | list[Path],
    *,
    shuffle: bool,
    seed: int = 3,
    prefetch: int = 64,
) -> CachedDataset:
    return runtime.cached_dataset(
        [paths] if isinstance(paths, Path) else paths,
        reader_config=ReaderConfig(seed=seed, shuffle=shuffle, prefetch_size=prefetch),
    )


# ---------------------------------------------------------------- windows


def test_unshuffled_epochs_continue_a_cyclic_cursor(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False)
    ds.set_epoch_len(2)
    assert len(ds) == 2
    assert [rows(ds) for _ in range(4)] == [[0, 1], [2, 3], [4, 0], [1, 2]]


def test_unshuffled_samples_carry_their_rows_payload_and_metadata(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False)
    ds.set_epoch_len(7)
    samples = list(ds)
    assert rows(samples) == [0, 1, 2, 3, 4, 0, 1]
    for sample in samples:
        data, metadata = SAMPLES[sample.sample_id]
        assert sample.cache_id == 0
        assert sample.data == data
        assert dict(sample.metadata) == metadata


def test_epoch_longer_than_table_wraps_around(runtime: DatasetRuntime, five_rows: Path) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False)
    ds.set_epoch_len(12)
    assert rows(ds) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert rows(ds) == [2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3]


def test_default_epoch_len_is_number_of_active_rows(
    runtime: DatasetRuntime, two_caches: list[Path]
) -> None:
    ds = open_ds(runtime, two_caches, shuffle=False)
    assert len(ds) == 11
    assert identities(ds) == [(0, i) for i in range(7)] + [(1, i) for i in range(4)]
    shuffled = open_ds(runtime, two_caches, shuffle=True)
    assert len(shuffled) == 11
    assert len(list(shuffled)) == 11


def test_default_epoch_len_follows_the_active_table(
    runtime: DatasetRuntime, two_caches: list[Path]
) -> None:
    ds = open_ds(runtime, two_caches, shuffle=False)
    table = ds.get_metadata()
    ds.update_metadata(table.filter(pl.col("cache_id") == 1))
    assert len(ds) == 4
    assert identities(ds) == [(1, i) for i in range(4)]


def test_len_is_the_epoch_length_and_every_iterator_yields_it(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    for shuffle in (False, True):
        ds = open_ds(runtime, five_rows, shuffle=shuffle)
        for epoch_len in (1, 3, 5, 13):
            ds.set_epoch_len(epoch_len)
            assert len(ds) == epoch_len
            assert len(list(ds)) == epoch_len


@pytest.mark.parametrize("bad", [0, -1, -(2**40)])
def test_set_epoch_len_below_one_is_rejected(
    runtime: DatasetRuntime, five_rows: Path, bad: int
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False)
    ds.set_epoch_len(2)
    with pytest.raises(ValueError, match="epoch_len must be at least 1"):
        ds.set_epoch_len(bad)
    assert len(ds) == 2
    assert rows(ds) == [0, 1]


def test_epoch_len_stops_at_sys_maxsize_so_len_can_return_it(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=True)
    ds.set_epoch_len(sys.maxsize)
    assert len(ds) == sys.maxsize
    expected = r"epoch_len must be at most sys.maxsize .*got 9223372036854775808"
    with pytest.raises(ValueError, match=expected):
        ds.set_epoch_len(sys.maxsize + 1)
    assert len(ds) == sys.maxsize


@pytest.mark.parametrize("shuffle", [False, True])
def test_an_epoch_across_stream_position_2_64_wraps_to_position_0(
    runtime: DatasetRuntime, five_rows: Path, shuffle: bool
) -> None:
    fresh = open_ds(runtime, five_rows, shuffle=shuffle)
    fresh.set_epoch_len(5)
    first_positions = rows(fresh)  # positions 0..4
    ds = open_ds(runtime, five_rows, shuffle=shuffle)
    ds.set_epoch_len(sys.maxsize)
    iter(ds).close()
    iter(ds).close()  # the two epochs cover positions 0 .. 2**64 - 3
    crossing = iter(ds)
    got = [next(crossing).sample_id for _ in range(7)]
    crossing.close()
    assert got[2:] == first_positions
    if not shuffle:
        assert got[:2] == [(2**64 - 2) % 5, (2**64 - 1) % 5]


def test_shuffled_short_epochs_equal_one_long_epoch(
    runtime: DatasetRuntime, two_caches: list[Path]
) -> None:
    short = open_ds(runtime, two_caches, shuffle=True, seed=11)
    short.set_epoch_len(7)
    pieces = [s for _ in range(3) for s in short]
    long = open_ds(runtime, two_caches, shuffle=True, seed=11)
    long.set_epoch_len(21)
    whole = list(long)
    assert identities(pieces) == identities(whole)
    assert [s.data for s in pieces] == [s.data for s in whole]
    # And the stream is really shuffled: not the table order.
    assert identities(whole)[:11] != identities(
        open_ds(runtime, two_caches, shuffle=False, seed=11)
    )


@settings(max_examples=15, deadline=None)
@given(
    shuffle=st.booleans(),
    seed=st.integers(0, 2**64 - 1),
    splits=st.lists(st.integers(1, 9), min_size=1, max_size=6),
)
def test_any_split_of_the_stream_equals_one_epoch(
    runtime: DatasetRuntime, two_caches: list[Path], shuffle: bool, seed: int, splits: list[int]
) -> None:
    split = open_ds(runtime, two_caches, shuffle=shuffle, seed=seed)
    pieces = []
    for epoch_len in splits:
        split.set_epoch_len(epoch_len)
        pieces.extend(identities(split))
    whole = open_ds(runtime, two_caches, shuffle=shuffle, seed=seed)
    whole.set_epoch_len(sum(splits))
    assert pieces == identities(whole)


# ---------------------------------------------------------------- update_metadata and snapshots


def test_update_metadata_resets_the_cursor_and_keeps_epoch_len(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False)
    ds.set_epoch_len(3)
    assert rows(ds) == [0, 1, 2]
    ds.update_metadata(ds.get_metadata())
    assert len(ds) == 3
    assert rows(ds) == [0, 1, 2]
    assert rows(ds) == [3, 4, 0]


def test_update_metadata_resets_the_shuffled_stream(
    runtime: DatasetRuntime, two_caches: list[Path]
) -> None:
    ds = open_ds(runtime, two_caches, shuffle=True, seed=5)
    ds.set_epoch_len(9)
    first = identities(ds)
    second = identities(ds)
    assert first != second
    ds.update_metadata(ds.get_metadata())
    assert len(ds) == 9
    assert identities(ds) == first
    assert identities(ds) == second


def test_iterator_keeps_table_and_length_of_its_creation(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    # prefetch 1: the old iterator cannot have read its epoch ahead of the update.
    ds = open_ds(runtime, five_rows, shuffle=False, prefetch=1)
    old = iter(ds)
    table = ds.get_metadata()
    ds.update_metadata(table.filter(pl.col("sample_id") >= 3))
    ds.set_epoch_len(3)
    assert rows(old) == [0, 1, 2, 3, 4]
    assert rows(ds) == [3, 4, 3]
    assert len(ds) == 3


def test_iterator_created_before_set_epoch_len_keeps_its_length(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False, prefetch=1)
    ds.set_epoch_len(4)
    old = iter(ds)
    ds.set_epoch_len(2)
    new = iter(ds)
    assert rows(new) == [4, 0]
    assert rows(old) == [0, 1, 2, 3]


def test_partially_consumed_iterator_and_new_iterator_interleave(
    runtime: DatasetRuntime, five_rows: Path
) -> None:
    ds = open_ds(runtime, five_rows, shuffle=False, prefetch=1)
    old = iter(ds)
    assert [next(old).sample_id for _ in range(2)] == [0, 1]
    reordered = ds.get_metadata().sort("sample_id", descending=True)
    ds.update_metadata(reordered)
    ds.set_epoch_len(4)
    new = iter(ds)
    interleaved = []
    for _ in range(3):
        interleaved.append(("old", next(old).sample_id))
        interleaved.append(("new", next(new).sample_id))
    assert interleaved == [("old", 2), ("new", 4), ("old", 3), ("new", 3), ("old", 4), ("new", 2)]
    assert rows(new) == [1]
    with pytest.raises(StopIteration):
        next(old)
    # The cursor of the new table advanced by one epoch of 4.
    assert rows(ds) == [0, 4, 3, 2]


def test_shuffled_iterator_snapshots_its_weights(
    runtime: DatasetRuntime, two_caches: list[Path]
) -> None:
    twin = open_ds(runtime, two_caches, shuffle=True, seed=9, prefetch=1)
    twin.set_epoch_len(30)
    expected = identities(twin)
    ds = open_ds(runtime, two_caches, shuffle=True, seed=9, prefetch=1)
    ds.set_epoch_len(30)
    old = iter(ds)
    first = next(old)
    # Only row (1, 2) stays active: every new draw is it.
    ds.update_metadata(
        ds.get_metadata().filter((pl.col("cache_id") == 1) & (pl.col("sample_id") == 2))
    )
    assert set(identities(ds)) == {(1, 2)}
    assert [(first.cache_id, first.sample_id), *identities(old)] == expected
