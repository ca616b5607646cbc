"""The order of a mix epoch is a uniform permutation of its multiset, and the
partial pass a uniform subset: statistics over many seeds of the core's rows
(`drt_mix_rows`), each held to a bound that the same statistic of
`random.shuffle` / `random.sample` also meets (the calibration)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import pytest
from test_mix_reference import library_rows
from test_permutation import CHI2_999, _normal_quantile

Epoch = list[tuple[int, int]]
SEEDS = 3000


def core_epochs(counts: Sequence[int], row_counts: Sequence[int]) -> Callable[[int], Epoch]:
    return lambda seed: library_rows(seed, counts, row_counts, 0, sum(counts))


def shuffled_epochs(counts: Sequence[int], row_counts: Sequence[int]) -> Callable[[int], Epoch]:
    """The same law drawn with Python's generator: whole passes plus a random
    subset, shuffled together."""

    def epoch(seed: int) -> Epoch:
        generator = random.Random(seed)
        samples: Epoch = []
        for cache, (count, rows) in enumerate(zip(counts, row_counts, strict=True)):
            samples += [(cache, row) for row in range(rows)] * (count // rows)
            samples += [(cache, row) for row in generator.sample(range(rows), count % rows)]
        generator.shuffle(samples)
        return samples

    return epoch


def chi_square(observed: Sequence[int], expected: Sequence[float]) -> float:
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))


SOURCES = [pytest.param(core_epochs, id="core"), pytest.param(shuffled_epochs, id="random")]
Source = Callable[[Sequence[int], Sequence[int]], Callable[[int], Epoch]]


@pytest.mark.parametrize("source", SOURCES)
def test_where_a_sample_lands_is_uniform(source: Source) -> None:
    # Cache 0 read once (5 rows), cache 1 choose 5 of 9: sample (0, 2) is at each of
    # the 10 positions with probability 1/10.
    epochs = source([5, 5], [5, 9])
    counts = [0] * 10
    for seed in range(SEEDS):
        counts[epochs(seed).index((0, 2))] += 1
    assert chi_square(counts, [SEEDS / 10] * 10) < CHI2_999[9], counts


@pytest.mark.parametrize("source", SOURCES)
def test_each_position_holds_a_cache_in_proportion_to_its_count(source: Source) -> None:
    # repeat 2.0 over 3 rows (6), 0.5 over 4 rows (2): position i holds cache 0 with
    # probability 6/8 whatever i; counted over the first 5 positions.
    epochs = source([6, 2], [3, 4])
    zero = [0] * 5
    for seed in range(SEEDS):
        epoch = epochs(seed)
        for position in range(5):
            zero[position] += epoch[position][0] == 0
    expected = [SEEDS * 6 / 8] * 5
    observed_other = [SEEDS - z for z in zero]
    statistic = chi_square(zero, expected) + chi_square(observed_other, [SEEDS * 2 / 8] * 5)
    # Each position adds a chi-square of 1 degree of freedom; the positions of one epoch
    # are slightly negatively correlated, which only narrows the sum. 0.999 quantile of
    # chi-square with 5 degrees of freedom:
    assert statistic < 20.515, zero


@pytest.mark.parametrize("source", SOURCES)
def test_pair_orders_are_fair(source: Source) -> None:
    # Six distinct samples (cache 0 whole, cache 1 choose 2 of 2): each pair's order
    # is Binomial(seeds, 1/2).
    epochs = source([4, 2], [4, 2])
    samples = [(0, r) for r in range(4)] + [(1, r) for r in range(2)]
    before = {(a, b): 0 for a in samples for b in samples if a < b}
    for seed in range(SEEDS):
        where = {sample: index for index, sample in enumerate(epochs(seed))}
        for a, b in before:
            before[(a, b)] += where[a] < where[b]
    limit = _normal_quantile(1 - 1e-4 / (2 * len(before)))
    worst = max(abs(count - SEEDS / 2) / (math.sqrt(SEEDS) / 2) for count in before.values())
    assert worst < limit


@pytest.mark.parametrize("source", SOURCES)
def test_the_partial_pass_is_a_uniform_subset(source: Source) -> None:
    # choose 2 of 5: each of the 10 pairs of rows is the subset with probability 1/10.
    epochs = source([2], [5])
    pairs = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    counts = dict.fromkeys(pairs, 0)
    for seed in range(SEEDS):
        rows = sorted(row for _, row in epochs(seed))
        counts[(rows[0], rows[1])] += 1
    assert chi_square(list(counts.values()), [SEEDS / 10] * 10) < CHI2_999[9], counts


def test_subsets_of_one_seed_are_independent_across_epochs() -> None:
    # choose 1 of 4 over 4000 epochs of one seed: the row of epoch e+1 is uniform
    # given the row of epoch e (16 cells).
    rows = [row for _, row in library_rows(3, [1], [4], 0, 4000)]
    cells = [0] * 16
    for a, b in zip(rows, rows[1:], strict=False):
        cells[4 * a + b] += 1
    # 0.999 quantile of chi-square with 15 degrees of freedom.
    assert chi_square(cells, [(len(rows) - 1) / 16] * 16) < 37.697, cells
