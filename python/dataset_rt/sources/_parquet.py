"""`ParquetSource`: the rows of Parquet files, one sample per row."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from dataset_rt._records import CacheInput
from dataset_rt.sources._columns import (
    _BATCH_ROWS_DEFAULT,
    _check_batch_rows,
    _column_names,
    _ColumnPlan,
    _plan,
    _samples,
)


class ParquetSource:
    """The rows of one or more Parquet files, one sample per row.

    The payload is the value of ``data_column``, a binary column; the metadata
    is the values of ``metadata_columns``, each a bool, integer, floating point
    or string column (dictionary-encoded ones included), stored under the
    column's name. Integers are stored as int64, floating point as float64.

    Samples come in file order (``paths`` as given), then row order. The files
    are read with pyarrow in record batches of ``batch_rows`` rows, so memory
    holds about one row group of the selected columns plus one batch, whatever
    the files' size. Every file's schema is checked when the source is made.

    Args:
        paths: a Parquet file, or a list of them.
        data_column: the binary column holding the payloads.
        metadata_columns: the columns to store as metadata (a list of names);
            by default every column but ``data_column`` whose type is primitive
            (the others are left out; `metadata_schema` shows what is kept).
        name: the cache's name; by default the file's name without its suffix
            (``train`` for ``train.parquet``). Required with several files.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: a file is not Parquet; a column is missing; the data column
            is not binary; a column named in ``metadata_columns`` is nested
            (list, struct, map) or of another non-primitive type (timestamp,
            decimal, binary...); no metadata column is left; the files'
            column types differ; several files and no ``name``.

    Null values cannot be stored: a null in a used column fails that source's
    write with ``... contains null at row N`` (a `CacheWriteError`).

    Examples:
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> for part in range(2):
        ...     table = pa.table({"jpeg": [b"\\xff\\xd8", b"\\xff\\xd9"], "label": [part, 7]})
        ...     pq.write_table(table, f"part-{part}.parquet")
        >>> source = ParquetSource(
        ...     ["part-0.parquet", "part-1.parquet"],
        ...     data_column="jpeg",
        ...     metadata_columns=["label"],
        ...     name="train",
        ... )
        >>> [result] = runtime.write_cache(source, "caches")
        >>> dataset = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0))
        >>> dataset.get_metadata()["label"].to_list()  # file order, then row order
        [0, 7, 1, 7]
    """

    name: str
    """The cache's name (the file's stem unless given)."""

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str | None = None,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "ParquetSource"
        if isinstance(paths, (str, os.PathLike)):
            self._paths = [Path(paths)]
        else:
            self._paths = [Path(path) for path in paths]
        if not self._paths:
            raise ValueError("ParquetSource: paths is empty; pass at least one Parquet file")
        if name is None and len(self._paths) > 1:
            raise ValueError("ParquetSource: pass name=... when reading several files")
        self.name = name if name is not None else self._paths[0].stem
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        requested = _column_names(owner, metadata_columns)
        plan: _ColumnPlan | None = None
        for path in self._paths:
            file_plan = _plan(owner, _parquet_schema(path), data_column, requested, str(path))
            if plan is not None:
                _check_same_columns(plan, file_plan, self._paths[0], path)
            plan = file_plan
        assert plan is not None
        self._plan = plan

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import pyarrow as pa, pyarrow.parquet as pq
            >>> table = pa.table({"jpeg": [b"..."], "label": [3], "split": ["a"], "box": [[1, 2]]})
            >>> pq.write_table(table, "train.parquet")
            >>> ParquetSource("train.parquet", data_column="jpeg").metadata_schema  # not "box"
            {'label': <class 'int'>, 'split': <class 'str'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Read the files in order, one record batch at a time."""
        columns = self._plan.columns()
        for path in self._paths:
            # pyarrow pre-buffers every row group by default: the whole file in memory.
            with pq.ParquetFile(path, pre_buffer=False) as parquet_file:
                batches = parquet_file.iter_batches(batch_size=self._batch_rows, columns=columns)
                yield from _samples(
                    batches, self._plan, f"ParquetSource file {path}", self._batch_rows
                )


def _parquet_schema(path: Path) -> Any:
    """The file's Arrow schema, read from its footer."""
    if not path.exists():
        raise FileNotFoundError(f"ParquetSource: no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"ParquetSource: {path} is a folder; pass the files in it")
    try:
        with pq.ParquetFile(path) as parquet_file:
            return parquet_file.schema_arrow
    except pa.ArrowInvalid as error:
        raise ValueError(f"ParquetSource: {path} is not a Parquet file ({error})") from None


def _check_same_columns(
    first: _ColumnPlan, other: _ColumnPlan, first_path: Path, path: Path
) -> None:
    """Every file must give the same kinds of values, or the write would fail midway."""
    if first.payload_kind != other.payload_kind:
        raise ValueError(
            f"ParquetSource: data column {first.data_column!r} differs between "
            f"{first_path} and {path}"
        )
    if first.metadata_schema.keys() != other.metadata_schema.keys():
        only = sorted(first.metadata_schema.keys() ^ other.metadata_schema.keys())
        raise ValueError(
            f"ParquetSource: {first_path} and {path} have different metadata columns "
            f"(only in one of them: {', '.join(map(repr, only))})"
        )
    for column, kind in first.metadata_schema.items():
        if other.metadata_schema[column] is not kind:
            raise ValueError(
                f"ParquetSource: metadata column {column!r} holds {kind.__name__} in "
                f"{first_path} but {other.metadata_schema[column].__name__} in {path}"
            )
