"""`ArrowSource`: the rows of an Arrow table or stream of record batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from dataset_rt._records import CacheInput
from dataset_rt.sources._columns import (
    _BATCH_ROWS_DEFAULT,
    _check_batch_rows,
    _column_names,
    _plan,
    _samples,
)


class ArrowSource:
    """The rows of an Arrow table or stream of record batches, one sample per row.

    Columns are used as in `ParquetSource`: the payload from the binary
    ``data_column``, the metadata from primitive columns. ``table_or_batches``
    is one of:

    - a ``pyarrow.Table`` or ``pyarrow.RecordBatch``;
    - a list or tuple of ``pyarrow.RecordBatch`` sharing one schema;
    - a ``pyarrow.RecordBatchReader``: batches are pulled one at a time as the
      writer needs them, so a stream larger than memory can be written. A
      reader can be read once: iterating the source a second time raises
      ``RuntimeError``.

    A Polars ``DataFrame`` becomes a table with ``df.to_arrow()``.

    Args:
        table_or_batches: the rows, as above.
        data_column: the binary column holding the payloads.
        metadata_columns: the columns to store as metadata; by default every
            primitive column but ``data_column``.
        name: the cache's name.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        TypeError: ``table_or_batches`` is none of the above.
        ValueError: as `ParquetSource` for columns; an empty list of batches;
            batches with different schemas.

    Examples:
        >>> import pyarrow as pa
        >>> table = pa.table({"data": [b"\\x00\\x01", b"\\x02"], "label": [0, 1]})
        >>> source = ArrowSource(table, data_column="data", name="tiny")
        >>> [result] = runtime.write_cache(source, "caches")
        >>> result.path.name
        'tiny'
        >>> [sample.metadata for sample in source]
        [{'label': 0}, {'label': 1}]
    """

    name: str
    """The cache's name."""

    def __init__(
        self,
        table_or_batches: Any,
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "ArrowSource"
        self.name = name
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        self._batches, schema = _arrow_input(table_or_batches)
        self._reader_used = False
        self._plan = _plan(
            owner, schema, data_column, _column_names(owner, metadata_columns), "the table"
        )

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import pyarrow as pa
            >>> table = pa.table({"data": [b"x"], "label": [0], "score": [0.5]})
            >>> ArrowSource(table, data_column="data", name="t").metadata_schema
            {'label': <class 'int'>, 'score': <class 'float'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Yield the rows in order, one record batch at a time."""
        batches: Iterable[Any] = self._batches
        if isinstance(batches, pa.RecordBatchReader):
            if self._reader_used:
                raise RuntimeError(
                    f"ArrowSource {self.name!r} reads a RecordBatchReader, which can be read "
                    "once; make a new source with a new reader"
                )
            self._reader_used = True
        return _samples(batches, self._plan, "ArrowSource", self._batch_rows)


def _arrow_input(table_or_batches: Any) -> tuple[Any, Any]:
    """(something iterable as record batches, its schema)."""
    if isinstance(table_or_batches, pa.Table):
        return table_or_batches.to_batches(), table_or_batches.schema
    if isinstance(table_or_batches, pa.RecordBatch):
        return [table_or_batches], table_or_batches.schema
    if isinstance(table_or_batches, pa.RecordBatchReader):
        return table_or_batches, table_or_batches.schema
    if isinstance(table_or_batches, (list, tuple)):
        batches = list(table_or_batches)
        if not batches:
            raise ValueError("ArrowSource: the list of record batches is empty")
        for position, batch in enumerate(batches):
            if not isinstance(batch, pa.RecordBatch):
                raise TypeError(
                    f"ArrowSource: item {position} of the list is a {type(batch).__name__}, "
                    "not a pyarrow.RecordBatch"
                )
            if not batch.schema.equals(batches[0].schema):
                raise ValueError(
                    f"ArrowSource: record batch {position} has schema {batch.schema}, "
                    f"batch 0 has {batches[0].schema}"
                )
        return batches, batches[0].schema
    raise TypeError(
        "ArrowSource: table_or_batches must be a pyarrow Table, RecordBatch, "
        f"RecordBatchReader or list of RecordBatch, got {type(table_or_batches).__name__}"
    )
