"""What the Arrow-based sources share: a column plan checked against a schema, and
record batches turned into samples."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa  # type: ignore[import-untyped]

from dataset_rt._records import CacheInput

_BATCH_ROWS_DEFAULT = 256
"""Rows converted to Python objects at a time: a few MiB of typical images,
and large enough that the per-batch work is negligible per row."""

_PRIMITIVE_TYPES = "bool, integer, floating point or string"
_BINARY_TYPES = "binary, large_binary, binary_view or fixed_size_binary"

# The payload column's kind: an Arrow binary column, or a Hugging Face Image
# feature (a struct of the encoded bytes and the file they came from).
_PayloadKind = Literal["binary", "image"]


@dataclass(frozen=True)
class _ColumnPlan:
    """Which columns make a sample, checked against a schema."""

    data_column: str
    payload_kind: _PayloadKind
    metadata_schema: dict[str, type]

    def columns(self) -> list[str]:
        return [self.data_column, *self.metadata_schema]


def _primitive_type(data_type: Any) -> type | None:
    """The Python type of a primitive Arrow type's values; None for any other type."""
    if pa.types.is_dictionary(data_type):
        return _primitive_type(data_type.value_type)
    if pa.types.is_boolean(data_type):
        return bool
    if pa.types.is_integer(data_type):
        return int
    if pa.types.is_floating(data_type):
        return float
    if (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
    ):
        return str
    return None


def _metadata_type(owner: str, column: str, data_type: Any) -> type:
    """The Python type of a metadata column's values; ValueError for a non-primitive column."""
    primitive = _primitive_type(data_type)
    if primitive is not None:
        return primitive
    if pa.types.is_nested(data_type):
        raise ValueError(
            f"{owner}: metadata column {column!r} has nested type {data_type}; metadata "
            f"columns must be {_PRIMITIVE_TYPES}"
        )
    raise ValueError(
        f"{owner}: metadata column {column!r} has type {data_type}; metadata columns "
        f"must be {_PRIMITIVE_TYPES} (cast it first, e.g. to int64 or string)"
    )


def _is_binary(data_type: Any) -> bool:
    return bool(
        pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_binary_view(data_type)
        or pa.types.is_fixed_size_binary(data_type)
    )


def _column_names(owner: str, metadata_columns: str | Iterable[str] | None) -> list[str] | None:
    """The requested metadata columns (a lone str is one column), without repeats."""
    if metadata_columns is None:
        return None
    names = [metadata_columns] if isinstance(metadata_columns, str) else list(metadata_columns)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(
                f"{owner}: metadata_columns must hold str, got {type(name).__name__} {name!r}"
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{owner}: metadata_columns names {repeated[0]!r} more than once")
    return names


def _missing_column(owner: str, column: str, role: str, schema: Any, where: str) -> ValueError:
    present = ", ".join(repr(name) for name in schema.names)
    return ValueError(
        f"{owner}: {role} column {column!r} is not in {where}; its columns are {present}"
    )


def _plan(
    owner: str,
    schema: Any,
    data_column: str,
    metadata_columns: list[str] | None,
    where: str,
    image_columns: frozenset[str] | None = None,
) -> _ColumnPlan:
    """Check `schema` (a pyarrow.Schema) for a data column and primitive metadata columns.

    `metadata_columns=None` means every primitive column but the data column;
    `image_columns` are the Hugging Face Image columns (None outside a Hugging Face
    dataset), accepted as the data column.
    """
    if not isinstance(data_column, str):
        raise TypeError(f"{owner}: data_column must be a str, got {type(data_column).__name__}")
    if data_column not in schema.names:
        raise _missing_column(owner, data_column, "data", schema, where)
    data_type = schema.field(data_column).type
    payload_kind: _PayloadKind
    if image_columns is not None and data_column in image_columns:
        payload_kind = "image"
    elif _is_binary(data_type):
        payload_kind = "binary"
    else:
        expected = _BINARY_TYPES + ("" if image_columns is None else " (or an Image feature)")
        raise ValueError(
            f"{owner}: data column {data_column!r} has type {data_type}; it must be {expected}"
        )
    if metadata_columns is None:
        metadata_columns = [
            name
            for name in schema.names
            if name != data_column and _primitive_type(schema.field(name).type) is not None
        ]
    elif data_column in metadata_columns:
        raise ValueError(f"{owner}: data column {data_column!r} cannot also be a metadata column")
    metadata_schema: dict[str, type] = {}
    for column in metadata_columns:
        if column not in schema.names:
            raise _missing_column(owner, column, "metadata", schema, where)
        metadata_schema[column] = _metadata_type(owner, column, schema.field(column).type)
    if not metadata_schema:
        raise ValueError(
            f"{owner}: no metadata column besides data column {data_column!r} in {where}; "
            "a cache needs at least one metadata field per sample"
        )
    return _ColumnPlan(data_column, payload_kind, metadata_schema)


def _first_null(array: Any) -> int:
    return int(array.is_null().to_pylist().index(True))


def _payloads(array: Any, plan: _ColumnPlan, origin: str, first_row: int) -> list[bytes]:
    """The payloads of one batch's data column, as bytes."""
    if array.null_count:
        row = first_row + _first_null(array)
        raise ValueError(f"{origin}: data column {plan.data_column!r} is null at row {row}")
    if plan.payload_kind == "binary":
        return list(array.to_pylist())
    payloads: list[bytes] = []
    for offset, image in enumerate(array.to_pylist()):
        payloads.append(_image_bytes(image, plan.data_column, origin, first_row + offset))
    return payloads


def _image_bytes(image: dict[str, Any], column: str, origin: str, row: int) -> bytes:
    """A Hugging Face Image value's encoded bytes: stored in the table, or in the file it names."""
    if image["bytes"] is not None:
        return bytes(image["bytes"])
    if image["path"] is not None:
        return Path(image["path"]).read_bytes()
    raise ValueError(f"{origin}: image column {column!r} has neither bytes nor a path at row {row}")


def _metadata_values(array: Any, column: str, origin: str, first_row: int) -> list[Any]:
    if array.null_count:
        row = first_row + _first_null(array)
        raise ValueError(f"{origin}: metadata column {column!r} contains null at row {row}")
    return list(array.to_pylist())


def _samples(
    batches: Iterable[Any], plan: _ColumnPlan, origin: str, batch_rows: int
) -> Iterator[CacheInput]:
    """The samples of record batches, `batch_rows` rows converted to Python at a time.

    `origin` names the input in errors (with the row, counted from its first batch).
    """
    names = list(plan.metadata_schema)
    first_row = 0
    for batch in batches:
        for start in range(0, batch.num_rows, batch_rows):
            part = batch.slice(start, batch_rows)  # zero-copy
            payloads = _payloads(part.column(plan.data_column), plan, origin, first_row)
            columns = [
                _metadata_values(part.column(name), name, origin, first_row) for name in names
            ]
            for payload, *values in zip(payloads, *columns, strict=True):
                yield CacheInput(payload, dict(zip(names, values, strict=True)))
            first_row += part.num_rows


def _check_batch_rows(owner: str, batch_rows: int) -> int:
    if type(batch_rows) is not int or batch_rows < 1:
        raise ValueError(f"{owner}: batch_rows must be a positive int, got {batch_rows!r}")
    return batch_rows
