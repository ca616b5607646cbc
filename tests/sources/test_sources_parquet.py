"""ParquetSource (dataset_rt.sources): the rows of Parquet files, in file then row order,
streamed in bounded memory; bad columns and files are refused naming them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_rt import DatasetRuntime
from dataset_rt.sources import ParquetSource
from source_helpers import PROPERTY, pixels, png_bytes, read_back, write_error

rows = st.lists(
    st.tuples(
        st.binary(max_size=64),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.text(st.characters(exclude_categories=["Cs"]), max_size=6),
    ),
    min_size=1,
    max_size=60,
)


def rows_table(part: list[tuple[bytes, int, float, bool, str]], binary: pa.DataType) -> pa.Table:
    data, number, score, flag, text = zip(*part, strict=True) if part else ([],) * 5
    return pa.table(
        {
            "data": pa.array(data, binary),
            "number": pa.array(number, pa.int64()),
            "score": pa.array(score, pa.float64()),
            "flag": pa.array(flag, pa.bool_()),
            "text": pa.array(text, pa.string()).dictionary_encode(),
        }
    )


@PROPERTY
@given(
    rows=rows,
    files=st.integers(1, 4),
    row_group_rows=st.integers(1, 20),
    batch_rows=st.integers(1, 16),
    binary=st.sampled_from([pa.binary(), pa.large_binary()]),
)
def test_parquet_source_round_trips_rows_in_file_then_row_order(
    runtime: DatasetRuntime,
    rows: list[tuple[bytes, int, float, bool, str]],
    files: int,
    row_group_rows: int,
    batch_rows: int,
    binary: pa.DataType,
) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        size = -(-len(rows) // files)
        parts = [rows[start : start + size] for start in range(0, len(rows), size)]
        # Named so that sorting the names would reverse them: the order given must win.
        paths = [Path(temporary) / f"part-{len(parts) - i}.parquet" for i in range(len(parts))]
        for part, path in zip(parts, paths, strict=True):
            pq.write_table(rows_table(part, binary), path, row_group_size=row_group_rows)
        source = ParquetSource(paths, data_column="data", name="rows", batch_rows=batch_rows)
        samples = read_back(runtime, source, Path(temporary) / "caches")
    assert samples == [
        (data, {"number": number, "score": score, "flag": flag, "text": text})
        for data, number, score, flag, text in rows
    ]
    assert source.metadata_schema == {"number": int, "score": float, "flag": bool, "text": str}


def test_parquet_source_keeps_the_chosen_columns_and_converts_their_types(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    images = [png_bytes(seed) for seed in range(5)]
    table = pa.table(
        {
            "label": pa.array([0, 1, 2, 3, 250], pa.uint8()),
            "jpeg": pa.array(images, pa.binary()),
            "score": pa.array([0.5, 1.5, -2.0, 0.25, 8.0], pa.float32()),
            "split": pa.array(["train"] * 5, pa.large_string()),
            "tags": pa.array([["a"], [], ["b", "c"], [], []], pa.list_(pa.string())),
        }
    )
    pq.write_table(table, tmp_path / "train.parquet")

    everything = ParquetSource(tmp_path / "train.parquet", data_column="jpeg")
    assert everything.name == "train"
    assert everything.metadata_schema == {"label": int, "score": float, "split": str}
    samples = read_back(runtime, everything, tmp_path / "caches")
    assert [data for data, _ in samples] == images
    assert [metadata for _, metadata in samples] == [
        {"label": label, "score": score, "split": "train"}
        for label, score in zip([0, 1, 2, 3, 250], [0.5, 1.5, -2.0, 0.25, 8.0], strict=True)
    ]
    assert pixels(samples[3][0]) == pixels(png_bytes(3))

    chosen = ParquetSource(
        str(tmp_path / "train.parquet"), data_column="jpeg", metadata_columns="label", name="l"
    )
    assert [metadata for _, metadata in read_back(runtime, chosen, tmp_path / "caches")] == [
        {"label": label} for label in [0, 1, 2, 3, 250]
    ]


def parquet_file(path: Path, **columns: pa.Array) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize(
    ("columns", "arguments", "message"),
    [
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "image"},
            "data column 'image' is not in ",
        ),
        (
            {"data": pa.array(["text"]), "label": pa.array([1])},
            {"data_column": "data"},
            "data column 'data' has type string; it must be binary",
        ),
        (
            {"data": pa.array([b"x"]), "tags": pa.array([[1, 2]])},
            {"data_column": "data", "metadata_columns": ["tags"]},
            "metadata column 'tags' has nested type list<",
        ),
        (
            {"data": pa.array([b"x"]), "box": pa.array([{"x": 1}])},
            {"data_column": "data", "metadata_columns": ["box"]},
            "metadata column 'box' has nested type struct<x: int64>",
        ),
        (
            {"data": pa.array([b"x"]), "when": pa.array([0], pa.timestamp("us"))},
            {"data_column": "data", "metadata_columns": ["when"]},
            "metadata column 'when' has type timestamp[us]",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["label", "split"]},
            "metadata column 'split' is not in ",
        ),
        (
            {"data": pa.array([b"x"]), "tags": pa.array([[1, 2]])},
            {"data_column": "data"},
            "no metadata column besides data column 'data'",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["label", "label"]},
            "metadata_columns names 'label' more than once",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["data", "label"]},
            "data column 'data' cannot also be a metadata column",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "batch_rows": 0},
            "batch_rows must be a positive int, got 0",
        ),
    ],
)
def test_parquet_source_rejects_bad_columns_when_made(
    tmp_path: Path, columns: dict[str, pa.Array], arguments: dict[str, object], message: str
) -> None:
    path = parquet_file(tmp_path / "bad.parquet", **columns)
    with pytest.raises(ValueError) as raised:
        ParquetSource(path, **arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert str(raised.value).startswith("ParquetSource: ")


def test_parquet_source_names_the_columns_a_missing_one_could_be(tmp_path: Path) -> None:
    path = parquet_file(tmp_path / "a.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    with pytest.raises(ValueError) as raised:
        ParquetSource(path, data_column="image")
    assert str(raised.value) == (
        f"ParquetSource: data column 'image' is not in {path}; its columns are 'data', 'label'"
    )


def test_parquet_source_rejects_files_it_cannot_use(tmp_path: Path) -> None:
    good = parquet_file(tmp_path / "good.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    with pytest.raises(FileNotFoundError, match="no such file: .*missing.parquet"):
        ParquetSource(tmp_path / "missing.parquet", data_column="data")
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="text.parquet is not a Parquet file"):
        ParquetSource(tmp_path / "text.parquet", data_column="data")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        ParquetSource(tmp_path, data_column="data")
    with pytest.raises(ValueError, match="pass name=... when reading several files"):
        ParquetSource([good, good], data_column="data")
    with pytest.raises(ValueError, match="paths is empty"):
        ParquetSource([], data_column="data")


def test_parquet_source_refuses_files_whose_columns_differ(tmp_path: Path) -> None:
    ints = parquet_file(tmp_path / "a.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    texts = parquet_file(tmp_path / "b.parquet", data=pa.array([b"x"]), label=pa.array(["1"]))
    more = parquet_file(
        tmp_path / "c.parquet", data=pa.array([b"x"]), label=pa.array([1]), extra=pa.array([1])
    )
    with pytest.raises(ValueError, match="'label' holds int in .*a.parquet but str in .*b.parquet"):
        ParquetSource([ints, texts], data_column="data", name="x")
    with pytest.raises(ValueError, match="different metadata columns .*'extra'"):
        ParquetSource([ints, more], data_column="data", name="x")
    assert ParquetSource([ints, more], data_column="data", metadata_columns=["label"], name="x")


def test_parquet_source_nulls_fail_the_write_naming_column_and_row(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    nulls = parquet_file(
        tmp_path / "nulls.parquet", data=pa.array([b"a", b"b", b"c"]), label=pa.array([1, 2, None])
    )
    message = write_error(runtime, ParquetSource(nulls, data_column="data"), tmp_path / "caches")
    assert "metadata column 'label' contains null at row 2" in message
    assert "nulls.parquet" in message
    empty = parquet_file(
        tmp_path / "empty.parquet", data=pa.array([b"a", None]), label=pa.array([1, 2])
    )
    message = write_error(runtime, ParquetSource(empty, data_column="data"), tmp_path / "caches")
    assert "data column 'data' is null at row 1" in message


def test_parquet_source_streams_a_file_in_bounded_memory(tmp_path: Path) -> None:
    payload_bytes, row_count = 32 * 1024, 1024  # 32 MiB of incompressible payloads
    path = tmp_path / "big.parquet"
    with pq.ParquetWriter(path, pa.schema({"data": pa.binary(), "row": pa.int64()})) as writer:
        for start in range(0, row_count, 64):
            data = [os.urandom(payload_bytes) for _ in range(64)]
            writer.write_table(pa.table({"data": data, "row": range(start, start + 64)}))
    assert path.stat().st_size > 32 * 1024 * 1024
    source = ParquetSource(path, data_column="data", batch_rows=64)
    arrow_bytes_max = 0
    for position, sample in enumerate(source):
        assert sample.metadata == {"row": position}
        arrow_bytes_max = max(arrow_bytes_max, pa.total_allocated_bytes())
    assert position == row_count - 1
    # A few copies of one row group (2 MiB: the file's pages, decoded, a batch), not
    # the file: pyarrow's default pre-buffering would hold all 16 row groups.
    assert arrow_bytes_max < 12 * 1024 * 1024
