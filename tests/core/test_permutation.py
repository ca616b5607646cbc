"""Epochs without replacement (`ReaderConfig(replacement=False)`): every epoch is a
uniform permutation of the active table, computed per position (docs/determinism.md,
section 11). tests/core/test_sampler_reference.py checks the rows bit for bit."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, CacheSource, DatasetRuntime, ReaderConfig
from dataset_rt._binding import native as _native


def permutation_rows(n: int, seed: int, start: int, count: int) -> list[int]:
    rows = (ctypes.c_uint64 * count)()
    _native.check(_native.lib.drt_permutation_rows(n, seed, start, count, rows))
    return list(rows)


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("permutation")
    sources: list[CacheSource] = [
        ListSource("a", simple_samples(23)),
        ListSource("b", simple_samples(10, 30)),
    ]
    return written_paths(runtime.write_cache(sources, base, writer_config=QUIET))


def load(
    runtime: DatasetRuntime, caches: list[Path], seed: int = 3, *, shuffle: bool = True
) -> CachedDataset:
    config = ReaderConfig(seed=seed, shuffle=shuffle, replacement=False, prefetch_size=8)
    return runtime.cached_dataset(caches, reader_config=config)


def ids(samples: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in samples]


ALL_IDS = sorted([(0, i) for i in range(23)] + [(1, i) for i in range(10)])


@pytest.mark.parametrize("n", [1, 2, 3, 7919, 1024, 1025, 10**6])
def test_every_epoch_is_a_permutation(n: int) -> None:
    for seed, epoch in [(0, 0), (1, 1), (2**64 - 1, 12345)]:
        rows = permutation_rows(n, seed, epoch * n, n)
        assert sorted(rows) == list(range(n)), (n, seed, epoch)


def test_datasets_visit_every_row_once_per_epoch_and_epochs_differ(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    epochs = [ids(ds) for _ in range(4)]
    for epoch in epochs:
        assert sorted(epoch) == ALL_IDS
    assert len({tuple(epoch) for epoch in epochs}) == 4
    # Same seed, same order; another seed, another order.
    assert [ids(ds) for ds in [load(runtime, caches)] for _ in range(4)] == epochs
    assert ids(load(runtime, caches, seed=4)) != epochs[0]


def test_the_default_still_draws_with_replacement(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=3))
    assert ReaderConfig(seed=3).replacement is True
    assert ds.state_dict()["algorithm"] == "dataset_rt/sampler/v1"
    assert load(runtime, caches).state_dict()["algorithm"] == "dataset_rt/permutation/v1"
    unshuffled = load(runtime, caches, shuffle=False)
    assert unshuffled.state_dict()["algorithm"] == "dataset_rt/table-order/v1"
    assert ids(unshuffled) == ALL_IDS


def test_an_explicit_epoch_len_cuts_the_same_sequence_of_permutations(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    reference = load(runtime, caches)
    whole = ids(reference) + ids(reference) + ids(reference)
    windows = load(runtime, caches)
    windows.set_epoch_len(10)
    cut = [sample for _ in range(10) for sample in ids(windows)]
    assert cut[:99] == whole[:99]
    # Position p is row π_{p // n}(p mod n) of the table.
    table = reference.get_metadata()
    identities = list(zip(table["cache_id"], table["sample_id"], strict=True))
    rows = permutation_rows(len(identities), 3, 0, 99)
    assert [identities[row] for row in rows] == whole[:99]


def test_duplicated_rows_are_visited_as_often_as_listed(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    table = ds.get_metadata()
    doubled = pl.concat([table.head(5), table.head(5), table.tail(2)])
    ds.update_metadata(doubled.with_columns(weight=pl.lit(2.5)))  # equal weights are fine
    for _ in range(3):
        epoch = ids(ds)
        assert sorted(epoch) == sorted(ids_of(doubled))


def ids_of(frame: pl.DataFrame) -> list[tuple[int, int]]:
    return list(zip(frame["cache_id"], frame["sample_id"], strict=True))


def test_unequal_weights_are_refused(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    before = ids(load(runtime, caches))
    table = ds.get_metadata()
    weighted = table.with_columns(weight=pl.when(pl.col("sample_id") == 3).then(2.0).otherwise(1.0))
    with pytest.raises(ValueError, match=r"weights need replacement=True.*row 3 has weight 2"):
        ds.update_metadata(weighted)
    assert ids(ds) == before  # nothing changed
    # In table order too: the weights would be ignored.
    with pytest.raises(ValueError, match="weights need replacement=True"):
        load(runtime, caches, shuffle=False).update_metadata(weighted)


def test_a_state_of_the_other_sampler_is_refused(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    drawn = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=3))
    with pytest.raises(ValueError, match="dataset_rt/sampler/v1.*dataset_rt/permutation/v1"):
        load(runtime, caches).load_state_dict(drawn.state_dict())


def test_resume_inside_a_permutation_epoch_is_exact(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    uninterrupted = load(runtime, caches)
    expected = ids(uninterrupted) + ids(uninterrupted)
    first = load(runtime, caches)
    iterator = iter(first)
    head = [next(iterator) for _ in range(12)]
    state = iterator.state_dict()
    resumed = load(runtime, caches)
    resumed.load_state_dict(state)
    assert ids(head) + ids(resumed) + ids(resumed) == expected[: 12 + 21 + 33]


# ---- uniformity over many seeds (the core's rows, through drt_permutation_rows)

# 0.999 quantiles of chi-square.
CHI2_999 = {9: 27.877, 4: 18.467}


@pytest.mark.parametrize("n", [5, 10, 1000])
def test_where_row_zero_lands_is_uniform(n: int) -> None:
    seeds = 4000
    bins = min(n, 10)
    counts = [0] * bins
    for seed in range(seeds):
        index = permutation_rows(n, seed, 0, n).index(0)
        counts[index * bins // n] += 1
    expected = [seeds * (len(range(b * n // bins, (b + 1) * n // bins)) / n) for b in range(bins)]
    # Bins of equal width when bins divides n (5, 10, 1000).
    statistic = sum((c - e) ** 2 / e for c, e in zip(counts, expected, strict=True))
    assert statistic < CHI2_999[bins - 1], counts


@pytest.mark.parametrize("n", [4, 6, 9, 40])
def test_pair_orders_are_fair(n: int) -> None:
    """Row a comes before row b in half the permutations, for every pair: each
    count is Binomial(seeds, 1/2) under a uniform permutation."""
    seeds = 3000
    before = [[0] * n for _ in range(n)]
    for seed in range(seeds):
        where = [0] * n
        for index, row in enumerate(permutation_rows(n, seed, 0, n)):
            where[row] = index
        for a in range(n):
            for b in range(a + 1, n):
                before[a][b] += where[a] < where[b]
    pairs = n * (n - 1) // 2
    # Bonferroni over the pairs at a 1e-4 family-wise level.
    limit = _normal_quantile(1 - 1e-4 / (2 * pairs))
    sd = math.sqrt(seeds) / 2
    worst = max(abs(before[a][b] - seeds / 2) / sd for a in range(n) for b in range(a + 1, n))
    assert worst < limit


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF by bisection on erfc."""
    low, high = 0.0, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        if 0.5 * math.erfc(middle / math.sqrt(2)) > 1 - p:
            low = middle
        else:
            high = middle
    return low


def test_consecutive_epochs_are_independent_orders() -> None:
    n = 1000
    first, second = permutation_rows(n, 11, 0, n), permutation_rows(n, 11, n, n)
    same_place = sum(a == b for a, b in zip(first, second, strict=True))
    assert same_place < 12  # about Poisson(1) for independent permutations
    assert first != list(range(n))


def test_bad_row_counts_are_refused() -> None:
    rows = (ctypes.c_uint64 * 1)()
    for n in (0, 2**53 + 1):
        with pytest.raises(ValueError, match=f"n must be between 1 and 2\\^53, got {n}"):
            _native.check(_native.lib.drt_permutation_rows(n, 0, 0, 1, rows))


def test_workers_ranks_and_resume_read_the_permutation_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    pytest.importorskip("torch")
    import torch_jobs
    from dataset_rt.torch import DataLoader

    reference = load(runtime, caches)
    stream = ids(reference) + ids(reference)
    loader = DataLoader(load(runtime, caches), batch_size=4, num_workers=2)
    assert [s for _ in range(2) for s in torch_jobs.flatten(loader)] == stream
    # Two ranks, interleaved step by step, give the stream (padded past the epoch).
    shares = [
        torch_jobs.flatten(
            load(runtime, caches).to_torch_iterable_dataset(batch_size=2, rank=rank, world_size=2)
        )
        for rank in range(2)
    ]
    interleaved = [
        sample for step in range(9) for share in shares for sample in share[2 * step : 2 * step + 2]
    ]
    assert interleaved[:33] == stream[:33]
    # Stopped after 5 batches and resumed with one worker: the rest of the run.
    first = DataLoader(load(runtime, caches), batch_size=4, num_workers=2)
    seen = []
    for batch in first:
        seen += torch_jobs.flatten([batch])
        if len(seen) == 20:
            break
    resumed = DataLoader(load(runtime, caches), batch_size=4, num_workers=1)
    resumed.load_state_dict(first.state_dict())
    assert seen + [s for _ in range(2) for s in torch_jobs.flatten(resumed)] == stream[:66]
