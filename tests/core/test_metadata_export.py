"""`get_metadata` imports the core's Arrow C stream of the table (SPEC 3). For
any caches and any edit it holds the rows written, in table order, the same
table as the C ABI's IPC export; another consumer (pyarrow) reads the stream
as valid Arrow, and a frame handed out does not depend on its dataset."""

from __future__ import annotations

import gc
import io
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from conftest import QUIET, ListSource
from dataset_rt import CachedDataset, CacheSource, CacheWriteSuccess, DatasetRuntime, ReaderConfig
from dataset_rt._binding import native as _native
from dataset_rt._core import metadata_frame as _metadata_frame

IN_ORDER = ReaderConfig(seed=0, shuffle=False)
KIND_VALUES = {
    "bool": st.booleans(),
    "int": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
}
POLARS_TYPES = {"bool": pl.Boolean, "int": pl.Int64, "float": pl.Float64, "str": pl.String}


@st.composite
def caches_rows(draw: st.DrawFn) -> tuple[dict[str, str], list[list[dict[str, object]]]]:
    """A schema and the metadata rows of 1-3 caches written with it."""
    schema = draw(
        st.dictionaries(
            st.sampled_from(["a", "flag", "label", "score", "é", "z9"]),
            st.sampled_from(sorted(KIND_VALUES)),
            min_size=1,
            max_size=4,
        )
    )
    caches = []
    for _ in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 9))
        caches.append([{n: draw(KIND_VALUES[k]) for n, k in schema.items()} for _ in range(count)])
    return schema, caches


def expected_table(schema: dict[str, str], caches: list[list[dict[str, object]]]) -> pl.DataFrame:
    """The default table, built from what was written, not from the core."""
    names = sorted(schema)
    rows = [
        (cache_id, sample_id, *(row[n] for n in names), 1.0)
        for cache_id, cache in enumerate(caches)
        for sample_id, row in enumerate(cache)
    ]
    columns = {
        "cache_id": pl.UInt64,
        "sample_id": pl.UInt64,
        **{n: POLARS_TYPES[schema[n]] for n in names},
        "weight": pl.Float64,
    }
    return pl.DataFrame(rows, schema=columns, orient="row")


def ipc_export(dataset: CachedDataset) -> pl.DataFrame:
    """The same table through the C ABI's other export, an Arrow IPC file."""
    data = _native.take_buffer(_native.lib.drt_dataset_metadata_arrow, dataset._handle.value)
    frame = pl.read_ipc(io.BytesIO(data))
    return frame.with_columns(pl.col("cache_id", "sample_id").cast(pl.UInt64))


def pyarrow_import(dataset: CachedDataset) -> pa.Table:
    stream = _metadata_frame.core_stream(dataset._handle)
    try:
        table = pa.RecordBatchReader.from_stream(stream).read_all()
    finally:
        stream.close()
    table.validate(full=True)
    return table


def assert_exports_agree(dataset: CachedDataset, expected: pl.DataFrame) -> None:
    frame = dataset.get_metadata()
    assert_frame_equal(frame, expected)
    assert_frame_equal(ipc_export(dataset), expected)
    imported = pl.from_arrow(pyarrow_import(dataset))
    assert isinstance(imported, pl.DataFrame), type(imported)
    assert_frame_equal(imported, expected)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(written=caches_rows(), data=st.data())
def test_table_matches_what_was_written_before_and_after_an_edit(
    runtime: DatasetRuntime,
    written: tuple[dict[str, str], list[list[dict[str, object]]]],
    data: st.DataObject,
) -> None:
    schema, caches = written
    with tempfile.TemporaryDirectory() as base:
        sources: list[CacheSource] = [
            ListSource(f"c{i}", [(b"x", row) for row in rows]) for i, rows in enumerate(caches)
        ]
        results = runtime.write_cache(sources, Path(base), writer_config=QUIET)
        paths = [r.path for r in results if isinstance(r, CacheWriteSuccess)]
        assert len(paths) == len(caches), results
        dataset = runtime.cached_dataset(paths, reader_config=IN_ORDER)
        expected = expected_table(schema, caches)
        # The default table: one cache's columns as stored, or several caches' in order.
        assert_exports_agree(dataset, expected)

        # An edit that filters, reorders and duplicates rows, with new weights.
        picks = data.draw(st.lists(st.integers(0, expected.height - 1), min_size=1, max_size=20))
        weights = data.draw(
            st.lists(
                st.floats(min_value=1e-6, max_value=1e6), min_size=len(picks), max_size=len(picks)
            )
        )
        edited = expected[picks].with_columns(weight=pl.Series(weights, dtype=pl.Float64))
        dataset.update_metadata(edited)
        assert_exports_agree(dataset, edited)


def test_frame_outlives_its_dataset_and_runtime(tmp_path: Path) -> None:
    rows = [(b"x", {"index": i, "label": f"label {i % 5}"}) for i in range(3000)]
    runtime = DatasetRuntime(num_workers=2)
    [result] = runtime.write_cache(ListSource("kept", rows), tmp_path, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset([result.path], reader_config=IN_ORDER)
    frame = dataset.get_metadata()
    del dataset
    runtime.close()
    gc.collect()
    # Memory freed with the dataset is likely reused by these.
    scratch = [bytes(4096) for _ in range(2000)]
    expected = expected_table(
        {"index": "int", "label": "str"}, [[metadata for _, metadata in rows]]
    )
    assert_frame_equal(frame, expected)
    del scratch


def test_an_unread_stream_is_released_once(runtime: DatasetRuntime, tmp_path: Path) -> None:
    [result] = runtime.write_cache(
        ListSource("unread", [(b"x", {"i": 1})]), tmp_path, writer_config=QUIET
    )
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset([result.path], reader_config=IN_ORDER)
    stream = _metadata_frame.core_stream(dataset._handle)
    assert stream._stream.release, "the core filled no stream"
    stream.close()
    assert not stream._stream.release, "the stream's release did not mark it released"
    stream.close()  # a second close must not release it again
