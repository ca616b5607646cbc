"""`dataset-rt metadata`: a dataset's metadata table exported with its identities as
Parquet, CSV or an Arrow IPC file."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.ipc  # type: ignore[import-untyped]
import pytest
from polars.testing import assert_frame_equal

from cli_helpers import SAMPLES, TEXT_SAMPLES, invoke, invoke_json, write
from dataset_rt import DatasetRuntime, ReaderConfig


def read_table(path: Path, schema: pl.Schema) -> pl.DataFrame:
    if path.suffix == ".parquet":
        return pl.read_parquet(path)
    if path.suffix == ".arrow":
        with pyarrow.ipc.open_file(path) as reader:  # an Arrow IPC *file*
            assert reader.num_record_batches >= 1
        return pl.read_ipc(path)
    return pl.read_csv(path, schema=schema)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".arrow"])
def test_metadata_exports_the_table_with_identities(
    runtime: DatasetRuntime, tmp_path: Path, suffix: str
) -> None:
    first = write(runtime, tmp_path / "base", "a")
    second = write(runtime, tmp_path / "base", "b", SAMPLES[:7])
    out = tmp_path / f"table{suffix}"
    summary = invoke_json("metadata", first, second, "--out", out)
    expected = runtime.cached_dataset(
        [first, second], reader_config=ReaderConfig(seed=0)
    ).get_metadata()
    assert summary == {
        "out": str(out),
        "format": suffix[1:],
        "rows": len(SAMPLES) + 7,
        "columns": ["cache_id", "sample_id", "flag", "index", "label", "score", "weight"],
        "caches": [{"cache_id": 0, "path": str(first)}, {"cache_id": 1, "path": str(second)}],
    }
    assert_frame_equal(read_table(out, expected.schema), expected)
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [out.name]  # no staging left


def test_metadata_replaces_an_existing_file(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path / "base")
    out = tmp_path / "table.parquet"
    out.write_text("old")
    assert "wrote 40 rows x 7 columns" in invoke("metadata", cache, "-o", out, code=0).stdout
    assert pl.read_parquet(out).height == len(SAMPLES)


def test_metadata_takes_the_format_from_the_suffix_or_refuses(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path / "base")
    for out in (tmp_path / "table.txt", tmp_path / "table"):
        assert ".parquet, .csv, .arrow" in invoke("metadata", cache, "-o", out, code=2).stderr
        assert not out.exists()
    missing_directory = tmp_path / "no" / "table.csv"
    assert "does not exist" in invoke("metadata", cache, "-o", missing_directory, code=2).stderr


def test_metadata_of_caches_with_different_schemas_exits_1(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    first = write(runtime, tmp_path / "base", "a")
    other = write(runtime, tmp_path / "base", "t", TEXT_SAMPLES)
    out = tmp_path / "table.csv"
    result = invoke("metadata", first, other, "-o", out, code=1)
    assert "all caches must share the same metadata schema" in result.stderr
    assert not out.exists()
