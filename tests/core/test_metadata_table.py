"""The editable metadata table (SPEC 3 `get_metadata`/`update_metadata`, SPEC 5 validation)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from conftest import QUIET, ListSource, simple_samples
from dataset_rt import CachedDataset, CacheInput, CacheWriteSuccess, DatasetRuntime, ReaderConfig

FIRST = simple_samples(5)
SECOND = simple_samples(8, payload_bytes=5)
SOURCES = [FIRST, SECOND]
STORED = ["flag", "index", "label", "score"]  # simple_samples' keys, sorted by name


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    """Cache 0 has 5 samples, cache 1 has 8.

    (0, 6) is an unknown identity although sample 6 exists in cache 1.
    """
    base = tmp_path_factory.mktemp("table")
    results = runtime.write_cache(
        [ListSource("first", FIRST), ListSource("second", SECOND)], base, writer_config=QUIET
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), results
    return [r.path for r in results if isinstance(r, CacheWriteSuccess)]


def load(
    runtime: DatasetRuntime, caches: list[Path], *, shuffle: bool = False, seed: int = 0
) -> CachedDataset:
    return runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=seed, shuffle=shuffle))


def identities(ds: CachedDataset) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in ds]


def table_order(table: pl.DataFrame) -> list[tuple[int, int]]:
    return list(zip(table["cache_id"].to_list(), table["sample_id"].to_list(), strict=True))


# ---------------------------------------------------------------- shape and content


def test_table_columns_are_identity_stored_sorted_then_weight(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    table = load(runtime, caches).get_metadata()
    assert table.columns == ["cache_id", "sample_id", *STORED, "weight"]
    assert dict(table.schema) == {
        "cache_id": pl.UInt64,
        "sample_id": pl.UInt64,
        "flag": pl.Boolean,
        "index": pl.Int64,
        "label": pl.String,
        "score": pl.Float64,
        "weight": pl.Float64,
    }


def test_stored_columns_are_sorted_by_name_whatever_the_key_order(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    samples = [
        (b"x", {"zeta": i, "Alpha": f"a{i}", "mid": i * 0.5, "_u": i % 2 == 1}) for i in range(3)
    ]
    [result] = runtime.write_cache(ListSource("keys", samples), tmp_path, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    table = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0)).get_metadata()
    assert table.columns == ["cache_id", "sample_id", "Alpha", "_u", "mid", "zeta", "weight"]
    assert table["zeta"].to_list() == [0, 1, 2]
    assert table["Alpha"].to_list() == ["a0", "a1", "a2"]


def test_table_holds_written_values_and_default_weights(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    table = load(runtime, caches).get_metadata()
    assert table.height == len(FIRST) + len(SECOND)
    expected = [
        {"cache_id": c, "sample_id": s, **dict(sorted(metadata.items())), "weight": 1.0}
        for c, source in enumerate(SOURCES)
        for s, (_, metadata) in enumerate(source)
    ]
    assert table.to_dicts() == expected


def test_samples_metadata_is_get_metadata(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    ds.update_metadata(ds.get_metadata().tail(4).with_columns(weight=pl.lit(2.5), note=pl.lit("n")))
    assert_frame_equal(ds.samples_metadata(), ds.get_metadata())
    assert ds.samples_metadata().height == 4


def test_editing_the_returned_frame_changes_nothing(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.update_metadata(ds.get_metadata().with_columns(extra=pl.int_range(pl.len())))
    before = ds.get_metadata()
    edited = ds.get_metadata()
    edited[0, "weight"] = 50.0
    edited[0, "extra"] = 99
    edited[1, "label"] = "changed"
    edited.drop_in_place("score")
    assert_frame_equal(ds.get_metadata(), before)
    assert identities(ds) == table_order(before)


def test_editing_the_frame_given_to_update_changes_nothing(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    given = ds.get_metadata().head(3).with_columns(extra=pl.Series(["a", "b", "c"]))
    ds.update_metadata(given)
    expected = given.clone()
    given[0, "extra"] = "zzz"
    given[0, "weight"] = 7.0
    assert_frame_equal(ds.get_metadata(), expected)


def test_filtered_reordered_duplicated_table_drives_unshuffled_iteration(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    full = ds.get_metadata()
    picked = full.filter(pl.col("index") % 2 == 1).reverse()
    table = pl.concat(
        [
            picked,
            full.filter((pl.col("cache_id") == 0) & (pl.col("sample_id") == 1)),
            picked.head(2),
        ]
    )
    ds.update_metadata(table)
    order = table_order(table)
    assert len(ds) == len(order)
    assert_frame_equal(ds.get_metadata(), table)
    samples = list(ds)
    assert [(s.cache_id, s.sample_id) for s in samples] == order
    for s in samples:
        data, metadata = SOURCES[s.cache_id][s.sample_id]
        assert s.data == data
        assert dict(s.metadata) == metadata
    ds.set_epoch_len(len(order) + 3)
    assert identities(ds) == order + order[:3]
    assert identities(ds) == order[3:] + order[:6]


def test_set_samples_metadata_is_update_metadata(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    by_set = load(runtime, caches)
    by_update = load(runtime, caches)
    table = (
        by_set.get_metadata()
        .sample(fraction=1.0, shuffle=True, seed=4)
        .head(9)
        .with_columns(tag=pl.lit(True))
    )
    by_set.set_samples_metadata(table)
    by_update.update_metadata(table)
    assert_frame_equal(by_set.get_metadata(), by_update.get_metadata())
    assert identities(by_set) == identities(by_update) == table_order(table)
    with pytest.raises(ValueError, match="positive and finite"):
        by_set.set_samples_metadata(table.with_columns(weight=pl.lit(0.0)))


def test_extra_columns_are_kept_at_the_end_in_order(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    base = ds.get_metadata().head(6)
    given = base.with_columns(
        split=pl.Series(["train", "val"] * 3),
        rank=pl.int_range(pl.len(), dtype=pl.Int32),
        maybe=pl.Series([1.5, None, 2.5, None, 3.5, None]),
    ).select("split", "cache_id", "weight", "rank", "sample_id", *reversed(STORED), "maybe")
    ds.update_metadata(given)
    table = ds.get_metadata()
    assert table.columns == ["cache_id", "sample_id", *STORED, "weight", "split", "rank", "maybe"]
    assert table["split"].to_list() == ["train", "val"] * 3
    assert table["rank"].dtype == pl.Int32
    assert table["maybe"].to_list() == [1.5, None, 2.5, None, 3.5, None]
    assert_frame_equal(table.select(base.columns), base)
    # A later table without them drops them.
    ds.update_metadata(base)
    assert ds.get_metadata().columns == base.columns


def test_stored_columns_may_come_in_any_order(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    table = ds.get_metadata()
    ds.update_metadata(table.select(reversed(table.columns)))
    assert_frame_equal(ds.get_metadata(), table)


@pytest.mark.parametrize("dtype", [pl.Int64, pl.Int32, pl.UInt32, pl.UInt8])
def test_identity_columns_of_any_integer_type_are_accepted(
    runtime: DatasetRuntime, caches: list[Path], dtype: pl.DataType
) -> None:
    ds = load(runtime, caches)
    table = ds.get_metadata().reverse()
    ds.update_metadata(table.with_columns(pl.col("cache_id", "sample_id").cast(dtype)))
    assert_frame_equal(ds.get_metadata(), table)
    assert identities(ds) == table_order(table)


def test_integer_weights_are_accepted(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    table = ds.get_metadata()
    ds.update_metadata(table.with_columns(weight=pl.int_range(1, pl.len() + 1)))
    assert ds.get_metadata()["weight"].to_list() == [float(k) for k in range(1, table.height + 1)]
    assert ds.get_metadata()["weight"].dtype == pl.Float64


def test_sliced_and_chunked_frames_are_read_at_their_offset(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    full = ds.get_metadata()
    poisoned = full.head(1).with_columns(
        cache_id=pl.lit(None, dtype=pl.UInt64),
        sample_id=pl.lit(None, dtype=pl.UInt64),
        weight=pl.lit(None, dtype=pl.Float64),
    )
    weighted = full.tail(5).with_columns(weight=pl.Series([1.0, 2.0, 3.0, 4.0, 5.0]))
    chunked = pl.concat([poisoned, weighted], rechunk=False)
    assert chunked.n_chunks() == 2
    ds.update_metadata(chunked.slice(1))
    assert_frame_equal(ds.get_metadata(), weighted)
    assert identities(ds) == table_order(weighted)
    # A null after the slice's start is still seen, and reported at its row in the slice.
    with pytest.raises(ValueError, match=r"'cache_id' contains null in row 1;"):
        ds.update_metadata(
            pl.concat([weighted.head(2), poisoned, weighted], rechunk=False).slice(1)
        )
    with pytest.raises(ValueError, match=r"'weight' contains null in row 2;"):
        ds.update_metadata(
            pl.concat([weighted.head(2), _null_at("weight")(weighted)], rechunk=False).slice(1)
        )
    assert_frame_equal(ds.get_metadata(), weighted)


# ---------------------------------------------------------------- rejections


def _null_at(column: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(table: pl.DataFrame) -> pl.DataFrame:
        return table.with_columns(
            pl.when(pl.int_range(pl.len()) == 1).then(None).otherwise(pl.col(column)).alias(column)
        )

    return edit


def _set_identity(
    row: int, cache_id: int, sample_id: int
) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(table: pl.DataFrame) -> pl.DataFrame:
        position = pl.int_range(pl.len()) == row
        return table.with_columns(
            pl.when(position)
            .then(pl.lit(cache_id))
            .otherwise(pl.col("cache_id").cast(pl.Int64))
            .alias("cache_id"),
            pl.when(position)
            .then(pl.lit(sample_id, dtype=pl.UInt64))
            .otherwise(pl.col("sample_id"))
            .alias("sample_id"),
        )

    return edit


def _weight(value: float) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(table: pl.DataFrame) -> pl.DataFrame:
        return table.with_columns(
            pl.when(pl.int_range(pl.len()) == 2)
            .then(value)
            .otherwise(pl.col("weight"))
            .alias("weight")
        )

    return edit


REJECTIONS: dict[str, tuple[Callable[[pl.DataFrame], pl.DataFrame], str]] = {
    "empty": (lambda t: t.clear(), "metadata table must include at least one sample"),
    "empty-filter": (
        lambda t: t.filter(pl.col("cache_id") > 5),
        "metadata table must include at least one sample",
    ),
    "no-columns": (lambda t: pl.DataFrame(), "metadata table must include at least one sample"),
    "missing-cache_id": (
        lambda t: t.drop("cache_id"),
        "samples metadata missing 'cache_id' column",
    ),
    "missing-sample_id": (
        lambda t: t.drop("sample_id"),
        "samples metadata missing 'sample_id' column",
    ),
    "missing-weight": (lambda t: t.drop("weight"), "samples metadata missing 'weight' column"),
    "cache_id-float": (
        lambda t: t.with_columns(pl.col("cache_id").cast(pl.Float64)),
        "'cache_id' must be an integer",
    ),
    "cache_id-string": (
        lambda t: t.with_columns(pl.col("cache_id").cast(pl.String)),
        "'cache_id' must be an integer",
    ),
    "sample_id-float": (
        lambda t: t.with_columns(pl.col("sample_id").cast(pl.Float64)),
        "'sample_id' must be an integer",
    ),
    "sample_id-string": (
        lambda t: t.with_columns(pl.col("sample_id").cast(pl.String)),
        "'sample_id' must be an integer",
    ),
    "cache_id-null": (_null_at("cache_id"), "'cache_id' contains null"),
    "sample_id-null": (_null_at("sample_id"), "'sample_id' contains null"),
    "weight-null": (_null_at("weight"), "'weight' contains null"),
    "cache_id-negative": (_set_identity(0, -1, 0), "'cache_id' must be non-negative"),
    "sample_id-negative": (
        lambda t: t.with_columns(pl.col("sample_id").cast(pl.Int64) - 1),
        "'sample_id' must be non-negative",
    ),
    "cache_id-out-of-range": (_set_identity(1, 2, 0), "unknown samples metadata row identity"),
    "sample_id-out-of-its-cache": (_set_identity(1, 0, 6), "unknown samples metadata row identity"),
    "sample_id-past-every-cache": (_set_identity(1, 1, 8), "unknown samples metadata row identity"),
    "sample_id-above-i64": (
        _set_identity(1, 0, 2**63 + 1),
        "unknown samples metadata row identity",
    ),
    "stored-missing": (lambda t: t.drop("label"), "samples metadata missing 'label' column"),
    "stored-missing-flag": (lambda t: t.drop("flag"), "samples metadata missing 'flag' column"),
    "stored-string-as-int": (
        lambda t: t.with_columns(label=pl.lit(1)),
        "'label' must have Arrow type",
    ),
    "stored-int-as-float": (
        lambda t: t.with_columns(pl.col("index").cast(pl.Float64)),
        "'index' must have Arrow type",
    ),
    "stored-int-as-int32": (
        lambda t: t.with_columns(pl.col("index").cast(pl.Int32)),
        "'index' must have Arrow type",
    ),
    "stored-float-as-string": (
        lambda t: t.with_columns(pl.col("score").cast(pl.String)),
        "'score' must have Arrow type",
    ),
    "stored-bool-as-int": (
        lambda t: t.with_columns(pl.col("flag").cast(pl.Int64)),
        "'flag' must have Arrow type",
    ),
    "weight-zero": (_weight(0.0), "positive and finite"),
    "weight-negative": (_weight(-1.5), "positive and finite"),
    "weight-nan": (_weight(math.nan), "positive and finite"),
    "weight-inf": (_weight(math.inf), "positive and finite"),
    "weight-minus-inf": (_weight(-math.inf), "positive and finite"),
    "weight-int-zero": (lambda t: t.with_columns(weight=pl.lit(0)), "positive and finite"),
    "weight-string": (
        lambda t: t.with_columns(weight=pl.lit("1.0")),
        "'weight' must be numeric",
    ),
    "weight-bool": (lambda t: t.with_columns(weight=pl.lit(True)), "'weight' must be numeric"),
}


@pytest.fixture
def edited(
    runtime: DatasetRuntime, caches: list[Path]
) -> tuple[CachedDataset, pl.DataFrame, list[tuple[int, int]]]:
    """A dataset on a custom table (with an extra column), one epoch of 4 consumed.

    Returns the dataset, its table and the identities its next epoch must yield.
    """
    ds = load(runtime, caches)
    full = ds.get_metadata()
    table = pl.concat(
        [
            full.filter(pl.col("cache_id") == 1).reverse(),
            full.filter(pl.col("cache_id") == 0).head(2),
        ]
    )
    table = table.with_columns(
        weight=pl.int_range(1, pl.len() + 1).cast(pl.Float64), extra=pl.int_range(pl.len())
    )
    ds.update_metadata(table)
    ds.set_epoch_len(4)
    order = table_order(table)
    assert identities(ds) == order[:4]
    return ds, table, order[4:8]


# Types wider than 64 bits are refused by type, not by a failed narrowing cast (for the
# polars releases that have them: Int128 and UInt128 are newer than polars' floor).
if hasattr(pl, "Int128"):
    REJECTIONS["sample_id-int128-beyond-u64"] = (
        lambda t: t.with_columns(pl.col("sample_id").cast(pl.Int128) + pl.lit(2**64, pl.Int128)),
        "'sample_id' must be an integer: expected an integer Arrow type, got Int128",
    )
if hasattr(pl, "UInt128"):
    REJECTIONS["cache_id-uint128"] = (
        lambda t: t.with_columns(pl.col("cache_id").cast(pl.UInt128)),
        "'cache_id' must be an integer: expected an integer Arrow type, got UInt128",
    )


@pytest.mark.parametrize("case", list(REJECTIONS))
def test_update_metadata_rejection_names_the_problem_and_changes_nothing(
    edited: tuple[CachedDataset, pl.DataFrame, list[tuple[int, int]]], case: str
) -> None:
    ds, table, next_epoch = edited
    edit, message = REJECTIONS[case]
    bad = edit(table)
    with pytest.raises(ValueError) as excinfo:
        ds.update_metadata(bad)
    assert message in str(excinfo.value)
    assert_frame_equal(ds.get_metadata(), table)
    assert len(ds) == 4
    assert identities(ds) == next_epoch


@pytest.mark.parametrize("bad", [None, {"cache_id": [0]}, "table", [1, 2]], ids=repr)
def test_update_metadata_rejects_non_frames_with_type_error(
    edited: tuple[CachedDataset, pl.DataFrame, list[tuple[int, int]]], bad: object
) -> None:
    ds, table, next_epoch = edited
    with pytest.raises(TypeError):
        ds.update_metadata(bad)  # type: ignore[arg-type]
    assert_frame_equal(ds.get_metadata(), table)
    assert identities(ds) == next_epoch


def test_update_metadata_rejects_lazy_frames_and_arrow_tables(
    edited: tuple[CachedDataset, pl.DataFrame, list[tuple[int, int]]],
) -> None:
    ds, table, next_epoch = edited
    for bad in (table.lazy(), table.to_arrow()):
        with pytest.raises(TypeError):
            ds.update_metadata(bad)  # type: ignore[arg-type]
    assert identities(ds) == next_epoch


# ---------------------------------------------------------------- a million rows

MILLION = 1_000_000


class _Million:
    name = "million"

    def __iter__(self) -> Iterator[CacheInput]:
        for i in range(MILLION):
            yield CacheInput(i.to_bytes(8, "little"), {"i": i})


@pytest.fixture(scope="session")
def million_rows(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    base = tmp_path_factory.mktemp("million")
    [result] = runtime.write_cache(_Million(), base, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path


def test_million_row_table_round_trips(runtime: DatasetRuntime, million_rows: Path) -> None:
    ds = runtime.cached_dataset([million_rows], reader_config=ReaderConfig(seed=17))
    start = time.perf_counter()
    table = ds.get_metadata()
    elapsed = time.perf_counter() - start
    print(f"\nget_metadata() on {MILLION:,} rows: {elapsed:.3f} s")
    assert table.height == MILLION
    assert table.columns == ["cache_id", "sample_id", "i", "weight"]
    for row in (0, 1, 123_456, MILLION - 1):
        assert table.row(row) == (0, row, row, 1.0)
    assert (table["i"] == table["sample_id"].cast(pl.Int64)).all()
    assert (table["cache_id"] == 0).all()

    start = time.perf_counter()
    ds.update_metadata(table.with_columns(weight=(pl.col("i") % 10 + 1).cast(pl.Float64)))
    print(f"update_metadata() on {MILLION:,} rows: {time.perf_counter() - start:.3f} s")
    updated = ds.get_metadata()
    assert updated.height == MILLION
    assert updated.row(123_457) == (0, 123_457, 123_457, 8.0)
    assert (updated["weight"] == (updated["i"] % 10 + 1).cast(pl.Float64)).all()

    # Draws follow the new weights: the mean weight drawn is sum(w^2)/sum(w) = 7 (5.5 if uniform).
    ds.set_epoch_len(4000)
    drawn = []
    for sample in ds:
        assert sample.data == sample.sample_id.to_bytes(8, "little")
        assert sample.metadata["i"] == sample.sample_id
        drawn.append(sample.sample_id % 10 + 1)
    mean = sum(drawn) / len(drawn)
    assert 6.75 < mean < 7.25, mean


def test_million_row_table_filtered_to_a_few_rows(
    runtime: DatasetRuntime, million_rows: Path
) -> None:
    ds = runtime.cached_dataset([million_rows], reader_config=ReaderConfig(seed=0, shuffle=False))
    table = ds.get_metadata()
    picked = table.filter(pl.col("i").is_in([999_999, 5, 500_000]))
    ds.update_metadata(picked.reverse())
    assert len(ds) == 3
    assert [(s.sample_id, s.data) for s in ds] == [
        (i, i.to_bytes(8, "little")) for i in (999_999, 500_000, 5)
    ]


def test_get_metadata_never_pairs_a_table_with_another_updates_extra_columns(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    # The extra columns live in the binding and the table in the core: an update
    # on one thread must not let a get_metadata on another mix two updates.
    ds = load(runtime, caches)
    full = ds.get_metadata()
    tables = [
        full.with_columns(position=pl.col("sample_id") + 10 * pl.col("cache_id")),
        full.reverse().with_columns(position=pl.col("sample_id") + 10 * pl.col("cache_id")),
    ]
    ds.update_metadata(tables[0])
    stop = time.monotonic() + 2
    mixed: list[pl.DataFrame] = []

    def update_repeatedly() -> None:
        flips = 0
        while time.monotonic() < stop and not mixed:
            ds.update_metadata(tables[flips % 2])
            flips += 1

    thread = threading.Thread(target=update_repeatedly)
    thread.start()
    reads = 0
    while time.monotonic() < stop and not mixed:
        got = ds.get_metadata()
        reads += 1
        if not (got["position"] == got["sample_id"] + 10 * got["cache_id"]).all():
            mixed.append(got)
    thread.join()
    assert reads > 0
    assert not mixed, mixed[0]
