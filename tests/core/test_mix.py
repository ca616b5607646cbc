"""Mixing caches without replacement (`CachedDataset.set_mix`): exact per-epoch
counts per cache and per row, fresh subsets, composition with the active table,
resume states and bad input. The order itself is checked bit for bit against a
pure-Python reference in test_mix_reference.py."""

from __future__ import annotations

import pickle
import shutil
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError
from test_mix_reference import library_rows

from conftest import QUIET, ListSource, flip_last_byte_of_record, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, CacheSource, DatasetRuntime, Mix, ReaderConfig

SIZES = [6, 10, 4]


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("mix")
    sources: list[CacheSource] = [
        ListSource(name, simple_samples(size))
        for name, size in zip(["web", "books", "code"], SIZES, strict=True)
    ]
    return written_paths(runtime.write_cache(sources, base, writer_config=QUIET))


def load(
    runtime: DatasetRuntime, caches: list[Path], seed: int = 5, *, replacement: bool = False
) -> CachedDataset:
    config = ReaderConfig(seed=seed, replacement=replacement, prefetch_size=8)
    return runtime.cached_dataset(caches, reader_config=config)


def ids(samples: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in samples]


def expect_exact_epoch(
    epoch: list[tuple[int, int]], counts: dict[int, int], rows: dict[int, list[int]]
) -> None:
    """Cache c appears counts[c] times; each of its rows floor(k/n) or one more
    times, the extra ones on k mod n distinct rows."""
    per_cache = Counter(cache for cache, _ in epoch)
    assert dict(per_cache) == {c: k for c, k in counts.items() if k > 0}
    per_row = Counter(epoch)
    for cache, count in counts.items():
        active = rows[cache]
        times = [per_row[(cache, row)] for row in active]
        base = count // len(active)
        assert all(t in (base, base + 1) for t in times), (cache, times)
        assert sum(t - base for t in times) == count % len(active)
        assert set(row for c, row in epoch if c == cache) <= set(active)


ALL_ROWS = {cache: list(range(size)) for cache, size in enumerate(SIZES)}


def test_repeat_and_choose_give_exact_counts_every_epoch(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({0: Mix(repeat=0.5), 1: Mix(repeat=2.5), 2: Mix(choose=7)})
    # 0.5 * 6 + 1/2 = 3.5 -> 3; 2.5 * 10 + 1/2 = 25.5 -> 25; 7.
    counts = {0: 3, 1: 25, 2: 7}
    assert ds.mix_counts() == counts
    assert len(ds) == 35
    subsets = set()
    for _ in range(6):
        epoch = ids(ds)
        assert len(epoch) == 35
        expect_exact_epoch(epoch, counts, ALL_ROWS)
        subsets.add(frozenset(row for cache, row in epoch if cache == 0))
    assert len(subsets) > 1  # a fresh half of cache 0 each epoch


def test_an_unlisted_cache_repeats_once_and_keys_may_be_folder_names(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({"books": Mix(choose=3)})
    assert ds.mix_counts() == {0: 6, 1: 3, 2: 4}
    expect_exact_epoch(ids(ds), {0: 6, 1: 3, 2: 4}, ALL_ROWS)


def test_subsets_cover_the_cache_over_many_epochs(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({1: Mix(choose=1), 0: Mix(choose=1), 2: Mix(choose=1)})
    seen: Counter[tuple[int, int]] = Counter()
    for _ in range(200):
        epoch = ids(ds)
        assert sorted(cache for cache, _ in epoch) == [0, 1, 2]
        seen.update(epoch)
    assert set(seen) == {(c, r) for c, rows in ALL_ROWS.items() for r in rows}


def test_proportions_split_the_epoch_length_with_the_leftover_rule(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_epoch_len(7)
    ds.set_mix({0: Mix(proportion=0.7), 1: Mix(proportion=0.2), 2: Mix(proportion=0.1)})
    # 4.9, 1.4, 0.7: floors 4, 1, 0; the two left go to 0.9 and 0.7.
    assert ds.mix_counts() == {0: 5, 1: 1, 2: 1}
    for _ in range(3):
        expect_exact_epoch(ids(ds), {0: 5, 1: 1, 2: 1}, ALL_ROWS)
    ds.set_epoch_len(40)  # recomputed for the new length
    assert ds.mix_counts() == {0: 28, 1: 8, 2: 4}
    assert len(ds) == 40
    expect_exact_epoch(ids(ds), {0: 28, 1: 8, 2: 4}, ALL_ROWS)


def test_the_stream_is_the_cores_mix_rows(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches, seed=9)
    ds.set_mix({0: Mix(repeat=1.5), 2: Mix(choose=2)})
    counts = [9, 10, 2]
    stream = ids(ds) + ids(ds) + ids(ds)
    assert stream == library_rows(9, counts, SIZES, 0, 3 * sum(counts))


def test_a_mix_applies_to_the_active_rows_after_update_metadata(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({0: Mix(repeat=2.0), 1: Mix(choose=4)})
    table = ds.get_metadata()
    # Filtered and interleaved: cache 1's rows before and after cache 0's.
    kept = pl.concat(
        [
            table.filter((pl.col("cache_id") == 1) & (pl.col("sample_id") < 3)),
            table.filter((pl.col("cache_id") == 0) & (pl.col("sample_id") % 2 == 0)),
            table.filter((pl.col("cache_id") == 1) & (pl.col("sample_id") >= 8)),
            table.filter(pl.col("cache_id") == 2).reverse(),
        ]
    )
    ds.update_metadata(kept)
    rows = {0: [0, 2, 4], 1: [0, 1, 2, 8, 9], 2: [3, 2, 1, 0]}
    assert ds.mix_counts() == {0: 6, 1: 4, 2: 4}
    for _ in range(4):
        expect_exact_epoch(ids(ds), {0: 6, 1: 4, 2: 4}, rows)
    ds.set_mix(None)
    assert ds.mix_counts() is None
    assert sorted(ids(ds)) == sorted(zip(kept["cache_id"], kept["sample_id"], strict=True))


def test_resume_is_exact_past_the_first_epoch_and_through_pickling(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    mix = {0: Mix(repeat=0.5), 1: Mix(repeat=2.0), 2: Mix(choose=5)}
    uninterrupted = load(runtime, caches)
    uninterrupted.set_mix(mix)
    expected = [sample for _ in range(5) for sample in ids(uninterrupted)]
    first = load(runtime, caches)
    first.set_mix(mix)
    head = ids(first) + ids(first)
    iterator = iter(first)
    head += ids(next(iterator) for _ in range(11))  # inside epoch 2
    state = iterator.state_dict()
    assert state["algorithm"].startswith("dataset_rt/mix/v1#")
    resumed = load(runtime, caches)
    resumed.set_mix(mix)
    resumed.load_state_dict(state)
    tail = [sample for _ in range(3) for sample in ids(resumed)]
    assert head + tail == expected
    # A pickled dataset (what DataLoader workers get) keeps its mix and position:
    # the iterator took epoch 2, so the copy reads epoch 3.
    copy = pickle.loads(pickle.dumps(first))
    assert len(copy) == 28
    assert ids(copy) == expected[3 * 28 : 4 * 28]


def test_a_state_of_another_mix_is_refused_naming_it(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    mixed = load(runtime, caches)
    mixed.set_mix({1: Mix(choose=3)})
    state = mixed.state_dict()
    other = load(runtime, caches)
    other.set_mix({1: Mix(choose=4)})
    with pytest.raises(ValueError, match=r"taken under mix 'dataset_rt/mix/v1#.*under mix"):
        other.load_state_dict(state)
    plain = load(runtime, caches)
    with pytest.raises(ValueError, match=r"under mix .* under no mix, sampling"):
        plain.load_state_dict(state)
    with pytest.raises(ValueError, match=r"under no mix, sampling .* under mix"):
        mixed.load_state_dict(plain.state_dict())
    # The same counts from another spelling resume fine.
    same = load(runtime, caches)
    same.set_mix({1: Mix(repeat=0.3)})  # 0.3 * 10 + 1/2 -> 3
    same.load_state_dict(state)


def test_random_access_is_unaffected(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    before = [s.data for s in ds.get_many([(0, 1), (2, 3)])]
    ds.set_mix({0: Mix(choose=1)})
    assert [s.data for s in ds.get_many([(0, 1), (2, 3)])] == before
    assert ds.get(1, 9).sample_id == 9


def test_mixing_needs_sampling_without_replacement(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    with pytest.raises(ValueError, match=r"needs ReaderConfig\(shuffle=True, replacement=False\)"):
        load(runtime, caches, replacement=True).set_mix({0: Mix(repeat=2.0)})
    config = ReaderConfig(seed=0, shuffle=False)
    unshuffled = runtime.cached_dataset(caches, reader_config=config)
    with pytest.raises(ValueError, match="shuffle=False, replacement=True"):
        unshuffled.set_mix({0: Mix(repeat=2.0)})


def test_an_explicit_epoch_length_and_counts_are_refused_together(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({0: Mix(choose=2)})
    with pytest.raises(ValueError, match=r"set_epoch_len\(9\) and set_mix with repeat/choose"):
        ds.set_epoch_len(9)
    assert len(ds) == 2 + 10 + 4
    other = load(runtime, caches)
    other.set_epoch_len(9)
    with pytest.raises(ValueError, match=r"set_epoch_len\(9\) and a mix of repeat/choose"):
        other.set_mix({0: Mix(choose=2)})
    assert other.mix_counts() is None and len(other) == 9
    with pytest.raises(ValueError, match=r"call set_epoch_len\(E\) before set_mix"):
        load(runtime, caches).set_mix({c: Mix(proportion=1 / 3) for c in range(3)})


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ({0: Mix(proportion=0.5), 1: Mix(proportion=0.5)}, "every cache one: 2 of 3"),
        ({0: Mix(proportion=0.5), 1: Mix(proportion=0.2), 2: Mix(proportion=0.2)}, "sum to 0.8999"),
        ({0: Mix(proportion=0.5), 1: Mix(repeat=1.0)}, "combines proportions"),
        ({7: Mix(choose=1)}, r"no cache has cache_id 7; this dataset's are \[0, 1, 2\]"),
        ({"nope": Mix(choose=1)}, "no cache named 'nope'"),
        ({0: Mix(choose=1), "web": Mix(choose=2)}, "names cache 0"),
        ({}, "at least one cache"),
    ],
)
def test_bad_mixes_are_refused_and_change_nothing(
    runtime: DatasetRuntime, caches: list[Path], mix: dict[int | str, Mix], message: str
) -> None:
    ds = load(runtime, caches)
    ds.set_epoch_len(20)
    with pytest.raises(ValueError, match=message):
        ds.set_mix(mix)
    assert ds.mix_counts() is None and len(ds) == 20


def test_mix_takes_exactly_one_valid_form() -> None:
    with pytest.raises(ValidationError, match="exactly one of proportion, repeat or choose"):
        Mix(repeat=1.0, choose=2)
    with pytest.raises(ValidationError, match="got none"):
        Mix()
    for bad in [{"repeat": 0.0}, {"repeat": float("inf")}, {"choose": 0}, {"proportion": 1.5}]:
        with pytest.raises(ValidationError):
            Mix(**bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a Mix"):
        set_mix_on_nothing({0: 2.0})


def set_mix_on_nothing(mix: object) -> None:
    from dataset_rt._core.mixing import mix_entries

    mix_entries(mix, ["a"], [0])  # type: ignore[arg-type]


def test_skipped_corrupt_samples_keep_their_positions(
    runtime: DatasetRuntime, caches: list[Path], tmp_path: Path
) -> None:
    damaged = [tmp_path / path.name for path in caches]
    for source, target in zip(caches, damaged, strict=True):
        shutil.copytree(source, target)
    flip_last_byte_of_record(damaged[1], 4)
    mix = {0: Mix(repeat=0.5), 1: Mix(repeat=2.0)}
    sound = load(runtime, caches)
    sound.set_mix(mix)
    config = ReaderConfig(seed=5, replacement=False, prefetch_size=8, on_corrupt="skip")
    skipping = runtime.cached_dataset(damaged, reader_config=config)
    skipping.set_mix(mix)
    for _ in range(2):
        expected = ids(sound)
        iterator = iter(skipping)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the first skip is warned about
            got = ids(iterator)
        assert expected.count((1, 4)) == 2  # repeat 2.0: every row of cache 1 twice
        assert got == [sample for sample in expected if sample != (1, 4)]
        assert iterator.skipped == [(1, 4), (1, 4)]
        assert iterator.consumed() == len(expected)


def test_a_table_the_mix_cannot_apply_to_is_refused_and_changes_nothing(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.set_mix({2: Mix(choose=7)})
    before = ids(load_mixed(runtime, caches, {2: Mix(choose=7)}))
    table = ds.get_metadata()
    with pytest.raises(ValueError, match=r"the cache at paths\[2\] has no active rows but its"):
        ds.update_metadata(table.filter(pl.col("cache_id") != 2))
    assert ds.mix_counts() == {0: 6, 1: 10, 2: 7}
    assert ids(ds) == before
    # Without the mix, the same table is fine; a cache with no rows and no count too.
    ds.set_mix(None)
    ds.update_metadata(table.filter(pl.col("cache_id") != 2))
    ds.set_mix({0: Mix(repeat=2.0)})
    assert ds.mix_counts() == {0: 12, 1: 10, 2: 0}


def load_mixed(runtime: DatasetRuntime, caches: list[Path], mix: dict[int, Mix]) -> CachedDataset:
    ds = load(runtime, caches)
    ds.set_mix(mix)
    return ds
