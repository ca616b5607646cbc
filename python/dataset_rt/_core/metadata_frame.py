"""The active metadata table as a Polars frame: imported from the core's Arrow
C stream, and an edited frame handed back to the core.

Imported by `CachedDataset.get_metadata` / `update_metadata` on first use, so
that a process that only writes or reads samples never loads Polars (about
24 MiB of resident memory in the benchmark processes, and its import time).
"""

from __future__ import annotations

import io
import json
from array import array
from typing import TYPE_CHECKING, Any

import polars as pl

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.arrow_c_stream import ColumnBuffers, CoreStream

if TYPE_CHECKING:
    from dataset_rt._binding.reader import DatasetHandle

IDENTITY_COLUMNS = ("cache_id", "sample_id")
WEIGHT_COLUMN = "weight"


def core_stream(handle: DatasetHandle) -> CoreStream:
    """The core's Arrow C stream of the active table (without extra columns)."""

    return CoreStream(handle.fill_metadata_stream)


def read(handle: DatasetHandle, extra_columns: pl.DataFrame | None) -> pl.DataFrame:
    """The active table with the extra columns of the last `install`, if any."""
    # Polars takes the core's columns as they are: no serialized copy of the
    # table (45 MiB for 1,000,000 rows) nor a second one in Python bytes.
    stream = core_stream(handle)
    try:
        frame = pl.DataFrame(stream)
    finally:
        stream.close()
    if extra_columns is not None:
        frame = pl.concat([frame, extra_columns], how="horizontal")
    return frame


def install(handle: DatasetHandle, metadata: pl.DataFrame) -> pl.DataFrame | None:
    """Make `metadata` the active table (the core validates it first); returns
    its extra columns, which the next `read` appends."""
    if not isinstance(metadata, pl.DataFrame):
        raise TypeError(f"metadata must be a polars DataFrame, got {type(metadata).__name__}")
    columns = [[name, _arrow_type_name(dtype)] for name, dtype in metadata.schema.items()]
    _set_table(handle, metadata, columns)
    known = {*IDENTITY_COLUMNS, WEIGHT_COLUMN, *handle.stored_names()}
    extras = [name for name in metadata.columns if name not in known]
    return metadata.select(extras) if extras else None


class IdentityColumns:
    """The identity and weight columns of a table `install` accepted, widened to
    64 bits and exported once, in the process that installed it: enough to
    install the same table again (`install_identities`). A child forked from
    that process installs it from the exported buffers without calling into
    Polars, whose thread pool does not survive fork."""

    def __init__(self, frame: pl.DataFrame) -> None:
        # Widened, keeping the sign: the UInt64 and Float64 columns of a frame
        # from get_metadata are taken as they are, without a copy.
        self.frame = frame.select(
            *(_widened(frame.get_column(name)) for name in IDENTITY_COLUMNS),
            frame.get_column(WEIGHT_COLUMN).cast(pl.Float64),
        ).rechunk()
        self.buffers = [ColumnBuffers(series) for series in self.frame.get_columns()]
        self.signed = [series.dtype.is_signed_integer() for series in self.frame.get_columns()[:2]]

    def to_ipc(self) -> bytes:
        """The columns as an Arrow IPC file."""
        return write_ipc(self.frame)

    @classmethod
    def from_ipc(cls, data: bytes) -> IdentityColumns:
        return cls(read_ipc(data))

    def install(self, handle: DatasetHandle) -> None:
        """See `install_identities`."""
        install_identities(handle, self)


def identity_arrays(frame: pl.DataFrame) -> tuple[array[int], array[int]]:
    """(uint32 cache ids, uint64 sample ids) of a frame's identity columns, for
    `CachedDataset.get_many`; an identity outside those ranges is an `IndexError`."""
    for name in IDENTITY_COLUMNS:
        if name not in frame.columns:
            raise errors.InvalidArgumentError(
                f"get_many: the frame has no '{name}' column; it has {frame.columns}"
            )
        series = frame.get_column(name)
        if not series.dtype.is_integer():
            raise TypeError(f"get_many: column '{name}' must be integers, got {series.dtype}")
        if series.null_count():
            raise errors.InvalidArgumentError(
                f"get_many: column '{name}' has {series.null_count()} nulls"
            )
    cache_id, sample_id = (pl.col(name) for name in IDENTITY_COLUMNS)
    outside = (
        frame.select(*IDENTITY_COLUMNS)
        .with_row_index("request")
        .filter((cache_id < 0) | (sample_id < 0))
    )
    if outside.height:
        request, bad_cache, bad_sample = outside.row(0)
        raise errors.SampleNotFoundError(
            f"no sample (cache_id={bad_cache}, sample_id={bad_sample}) (request {request})"
        )
    return (
        _packed(frame.get_column("cache_id"), pl.UInt64, "Q"),
        _packed(frame.get_column("sample_id"), pl.UInt64, "Q"),
    )


def _packed(series: pl.Series, dtype: type[pl.DataType], typecode: str) -> array[int]:
    values = series.cast(dtype).rechunk().to_arrow()
    width = values.type.bit_width // 8
    data = memoryview(values.buffers()[1])[
        values.offset * width : (values.offset + len(values)) * width
    ]
    packed: array[int] = array(typecode)
    packed.frombytes(data)
    return packed


def write_ipc(frame: pl.DataFrame) -> bytes:
    """A frame as Arrow IPC file bytes."""
    sink = io.BytesIO()
    frame.write_ipc(sink)
    return sink.getvalue()


def read_ipc(data: bytes) -> pl.DataFrame:
    return pl.read_ipc(io.BytesIO(data))


def install_identities(handle: DatasetHandle, identities: IdentityColumns) -> None:
    """Make the table of `identities` active; the stored columns' values come
    from the caches, as with `install`. Calls nothing of Polars."""
    cache_signed, sample_signed = identities.signed
    columns = [
        ["cache_id", "int64" if cache_signed else "uint64"],
        ["sample_id", "int64" if sample_signed else "uint64"],
        [WEIGHT_COLUMN, "float64"],
    ]
    columns += [[name, arrow_type] for name, arrow_type in handle.stored_arrow_types.items()]
    cache_ids, sample_ids, weights = identities.buffers
    handle.set_table(
        json.dumps(columns).encode(),
        identities.frame.height,
        _int_column(cache_ids, signed=cache_signed),
        _int_column(sample_ids, signed=sample_signed),
        _float_column_of(weights),
    )


def _widened(series: pl.Series) -> pl.Series:
    return series.cast(pl.Int64 if series.dtype.is_signed_integer() else pl.UInt64)


def _int_column(buffers: ColumnBuffers, *, signed: bool) -> _native.IntColumn:
    return _native.IntColumn(
        values=buffers.values + buffers.offset * 8,
        validity=buffers.validity,
        validity_offset=buffers.offset,
        is_signed=int(signed),
    )


def _float_column_of(buffers: ColumnBuffers) -> _native.FloatColumn:
    return _native.FloatColumn(
        values=buffers.values + buffers.offset * 8,
        validity=buffers.validity,
        validity_offset=buffers.offset,
    )


def _set_table(handle: DatasetHandle, frame: pl.DataFrame, columns: list[list[str]]) -> None:
    """Hand the core `frame`'s identity and weight columns, `columns` naming
    every column of the table with its Arrow type."""
    cache_ids, cache_array = _integer_column(frame, "cache_id")
    sample_ids, sample_array = _integer_column(frame, "sample_id")
    weights, weight_array = _float_column(frame, WEIGHT_COLUMN)
    handle.set_table(json.dumps(columns).encode(), frame.height, cache_ids, sample_ids, weights)
    del cache_array, sample_array, weight_array


_ARROW_TYPE_NAMES: dict[Any, str] = {
    pl.Int8: "int8",
    pl.Int16: "int16",
    pl.Int32: "int32",
    pl.Int64: "int64",
    pl.UInt8: "uint8",
    pl.UInt16: "uint16",
    pl.UInt32: "uint32",
    pl.UInt64: "uint64",
    pl.Float32: "float32",
    pl.Float64: "float64",
    pl.Boolean: "bool",
    pl.String: "utf8",
}


_INTEGER_TYPE_NAMES = frozenset(
    name for dtype, name in _ARROW_TYPE_NAMES.items() if dtype.is_integer()
)


def _arrow_type_name(dtype: pl.DataType) -> str:
    return _ARROW_TYPE_NAMES.get(dtype.base_type(), str(dtype))


def _integer_column(frame: pl.DataFrame, name: str) -> tuple[_native.IntColumn, Any]:
    """The column's buffers widened to 64 bits; the export is returned to keep them alive."""
    series = frame.get_column(name) if name in frame.columns else None
    # Types the core refuses (Int128, UInt128) are not cast: a value beyond 64 bits
    # would fail the cast with a Polars error instead of the core's message.
    if series is None or _arrow_type_name(series.dtype) not in _INTEGER_TYPE_NAMES:
        return _native.IntColumn(), None
    signed = series.dtype.is_signed_integer()
    buffers = ColumnBuffers(series.cast(pl.Int64 if signed else pl.UInt64))
    column = _native.IntColumn(
        values=buffers.values + buffers.offset * 8,
        validity=buffers.validity,
        validity_offset=buffers.offset,
        is_signed=int(signed),
    )
    return column, buffers


def _float_column(frame: pl.DataFrame, name: str) -> tuple[_native.FloatColumn, Any]:
    series = frame.get_column(name) if name in frame.columns else None
    if series is None or not series.dtype.is_numeric():
        return _native.FloatColumn(), None
    buffers = ColumnBuffers(series.cast(pl.Float64))
    column = _native.FloatColumn(
        values=buffers.values + buffers.offset * 8,
        validity=buffers.validity,
        validity_offset=buffers.offset,
    )
    return column, buffers
