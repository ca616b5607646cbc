"""ArrowSource (dataset_rt.sources): a pyarrow Table, record batch, list of batches or
reader, in order; a reader is pulled one batch at a time and only once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from dataset_rt import DatasetRuntime
from dataset_rt.sources import ArrowSource
from source_helpers import read_back


def test_arrow_source_writes_a_table_a_batch_and_a_list_of_batches(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    table = pa.table({"data": [b"a", b"bc", b"", b"def"], "label": [3, 1, 4, 1]})
    expected = [
        (b"a", {"label": 3}),
        (b"bc", {"label": 1}),
        (b"", {"label": 4}),
        (b"def", {"label": 1}),
    ]
    batches = table.to_batches(max_chunksize=3)
    assert len(batches) == 2
    for name, rows in [("table", table), ("batch", table.to_batches()[0]), ("list", batches)]:
        source = ArrowSource(rows, data_column="data", name=name, batch_rows=3)
        assert read_back(runtime, source, tmp_path / "caches") == expected
        assert list(source) == list(source)  # a table or a list can be read again


def test_arrow_source_pulls_a_reader_one_batch_at_a_time_and_only_once(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    schema = pa.schema({"data": pa.binary(), "row": pa.int64()})
    pulled: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 40, 10):
            pulled.append(start)
            yield pa.record_batch(
                {
                    "data": [b"%d" % i for i in range(start, start + 10)],
                    "row": range(start, start + 10),
                },
                schema=schema,
            )

    source = ArrowSource(
        pa.RecordBatchReader.from_batches(schema, batches()), data_column="data", name="stream"
    )
    samples = iter(source)
    assert next(samples) == (b"0", {"row": 0})
    assert pulled == [0]
    assert [sample.metadata["row"] for sample in samples] == list(range(1, 40))
    assert pulled == [0, 10, 20, 30]
    with pytest.raises(RuntimeError, match="RecordBatchReader, which can be read once"):
        iter(source)

    fresh = pa.RecordBatchReader.from_batches(schema, batches())
    samples_read = read_back(runtime, ArrowSource(fresh, data_column="data", name="s"), tmp_path)
    assert samples_read == [(b"%d" % i, {"row": i}) for i in range(40)]


def test_arrow_source_rejects_what_it_cannot_read() -> None:
    batch = pa.record_batch({"data": [b"x"], "label": [1]})
    other = pa.record_batch({"data": [b"x"], "label": ["1"]})
    with pytest.raises(TypeError, match="must be a pyarrow Table, .* got dict"):
        ArrowSource({"data": [b"x"]}, data_column="data", name="x")
    with pytest.raises(ValueError, match="the list of record batches is empty"):
        ArrowSource([], data_column="data", name="x")
    with pytest.raises(ValueError, match="record batch 1 has schema"):
        ArrowSource([batch, other], data_column="data", name="x")
    with pytest.raises(TypeError, match="item 1 of the list is a Table"):
        ArrowSource([batch, pa.table(batch)], data_column="data", name="x")
    with pytest.raises(ValueError, match="ArrowSource: data column 'label' has type int64"):
        ArrowSource(batch, data_column="label", name="x")
