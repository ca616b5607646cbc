"""Shuffled draws follow the active table's weights (SPEC 5): chi-square goodness of fit.

The streams are deterministic (fixed seeds), so these tests never flake: a
failure means the sampler's distribution is wrong for that seed at the
0.999 level.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from pathlib import Path
from typing import TypeVar

import polars as pl
import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, DatasetRuntime, ReaderConfig

# 0.999 quantiles of the chi-square distribution (scipy.stats.chi2.ppf(0.999, dof)).
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 9: 27.877, 35: 66.619}

DRAWS = 60_000
Row = TypeVar("Row", bound=Hashable)


@pytest.fixture(scope="module")
def ten_rows(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    base = tmp_path_factory.mktemp("sampling")
    source = ListSource("ten", simple_samples(10, payload_bytes=4))
    [path] = written_paths(runtime.write_cache(source, base, writer_config=QUIET))
    return path


def load(runtime: DatasetRuntime, path: Path, seed: int = 1234) -> CachedDataset:
    return runtime.cached_dataset([path], reader_config=ReaderConfig(seed=seed, shuffle=True))


def draw(ds: CachedDataset, count: int) -> list[int]:
    ds.set_epoch_len(count)
    return [s.sample_id for s in ds]


def chi_square(counts: Counter[Row], expected: dict[Row, float]) -> float:
    assert set(counts) <= set(expected), (
        f"drew rows outside the table: {set(counts) - set(expected)}"
    )
    return sum((counts.get(row, 0) - e) ** 2 / e for row, e in expected.items())


def test_draws_follow_the_weights(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows)
    weights = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0, 5: 10.0}
    table = ds.get_metadata().filter(pl.col("sample_id") < 6)
    ds.update_metadata(
        table.with_columns(
            weight=pl.col("sample_id").replace_strict(weights, return_dtype=pl.Float64)
        )
    )
    counts = Counter(draw(ds, DRAWS))
    total = sum(weights.values())
    expected = {row: DRAWS * w / total for row, w in weights.items()}
    statistic = chi_square(counts, expected)
    assert statistic < CHI2_999[5], (statistic, counts)
    # The heaviest row really is drawn about 10x as often as the lightest.
    assert 7 < counts[5] / counts[0] < 14


def test_default_weights_draw_uniformly(runtime: DatasetRuntime, ten_rows: Path) -> None:
    counts = Counter(draw(load(runtime, ten_rows, seed=7), DRAWS))
    statistic = chi_square(counts, {row: DRAWS / 10 for row in range(10)})
    assert statistic < CHI2_999[9], (statistic, counts)


def test_consecutive_draws_are_independent(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows, seed=99)
    ds.update_metadata(ds.get_metadata().filter(pl.col("sample_id") < 6))
    stream = draw(ds, DRAWS)
    pairs = Counter(zip(stream[0::2], stream[1::2], strict=True))
    n = len(stream) // 2
    statistic = chi_square(pairs, {(a, b): n / 36 for a in range(6) for b in range(6)})
    assert statistic < CHI2_999[35], statistic


def test_filtered_out_rows_are_never_drawn(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows, seed=3)
    kept = [1, 4, 6, 7, 9]
    ds.update_metadata(ds.get_metadata().filter(pl.col("sample_id").is_in(kept)))
    count = 20_000
    counts = Counter(draw(ds, count))
    assert set(counts) == set(kept)
    statistic = chi_square(counts, {row: count / len(kept) for row in kept})
    assert statistic < CHI2_999[4], (statistic, counts)


def test_duplicated_rows_are_drawn_twice_as_often(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows, seed=5)
    table = ds.get_metadata().filter(pl.col("sample_id") < 3)
    ds.update_metadata(pl.concat([table, table.filter(pl.col("sample_id") == 0)]))
    count = 30_000
    counts = Counter(draw(ds, count))
    statistic = chi_square(counts, {0: count / 2, 1: count / 4, 2: count / 4})
    assert statistic < CHI2_999[2], (statistic, counts)


def test_duplicated_row_weights_add_up(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows, seed=8)
    table = ds.get_metadata().filter(pl.col("sample_id").is_in([2, 3]))
    # Row 2 appears twice with weights 1 and 2, row 3 once with weight 3: equal mass.
    doubled = pl.concat([table, table.filter(pl.col("sample_id") == 2)]).with_columns(
        weight=pl.Series([1.0, 3.0, 2.0])
    )
    ds.update_metadata(doubled)
    count = 20_000
    counts = Counter(draw(ds, count))
    statistic = chi_square(counts, {2: count / 2, 3: count / 2})
    assert statistic < CHI2_999[1], (statistic, counts)


def test_tiny_weights_are_drawn_in_proportion(runtime: DatasetRuntime, ten_rows: Path) -> None:
    ds = load(runtime, ten_rows, seed=21)
    table = ds.get_metadata().filter(pl.col("sample_id") < 3)
    ds.update_metadata(table.with_columns(weight=pl.Series([1e-300, 2e-300, 1e-300])))
    count = 20_000
    counts = Counter(draw(ds, count))
    statistic = chi_square(counts, {0: count / 4, 1: count / 2, 2: count / 4})
    assert statistic < CHI2_999[2], (statistic, counts)
