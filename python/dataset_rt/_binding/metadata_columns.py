"""A writer batch's metadata as typed columns (`drt_writer_push_columns`).

Transposing a batch of dicts into one array per field with C-level maps costs
about a fifth of encoding it as JSON, and the core then has nothing to parse.
It is only a faster route for batches that are certainly valid: every sample
has the schema's keys, every value has the schema's exact type (bool, int,
float or str), ints fit in int64, floats are finite and strings encode as
UTF-8. Anything else goes as JSON, so the core reports it exactly as before.
"""

from __future__ import annotations

import ctypes
import itertools
import math
from array import array
from operator import itemgetter
from typing import Any

from dataset_rt._binding import native as _native

Schema = dict[str, type]
"""Field name to the exact Python type of its values, fixed by the first sample."""

_KINDS = {
    bool: _native.KIND_BOOL,
    int: _native.KIND_INT,
    float: _native.KIND_FLOAT,
    str: _native.KIND_STRING,
}


def schema_of(metadata: dict[str, Any]) -> Schema | None:
    """The schema a first sample fixes, if every key is a str and every value has
    a column type."""
    schema = {name: type(value) for name, value in metadata.items()}
    keys_ok = all(isinstance(name, str) for name in schema)
    return schema if schema and keys_ok and all(map(_KINDS.__contains__, schema.values())) else None


def _string_column(values: list[str]) -> tuple[array[int], bytes]:
    """A string column's byte offsets and UTF-8 bytes (UnicodeEncodeError for
    a lone surrogate)."""
    joined = "".join(values)
    if joined.isascii():
        # One byte per character: the offsets come from the str lengths and the
        # whole column is encoded at once.
        return array("Q", itertools.accumulate(map(len, values), initial=0)), joined.encode("ascii")
    encoded = list(map(str.encode, values))
    return array("Q", itertools.accumulate(map(len, encoded), initial=0)), b"".join(encoded)


class PushColumns:
    """The ``drt_push_column`` array of one batch and the buffers it points into."""

    __slots__ = ("array", "_buffers")

    def __init__(self, array_: ctypes.Array[_native.PushColumn], buffers: list[object]) -> None:
        self.array = array_
        self._buffers = buffers  # the arrays and bytes the pointers refer to


def to_columns(metadatas: list[dict[str, Any]], schema: Schema) -> PushColumns | None:
    """The batch (at least one sample) by column, or None when it must go as JSON
    (see the module doc), for instance when a sample lacks one of the schema's
    keys. The caller has checked that every dict has as many keys as the schema."""
    pushed = (_native.PushColumn * len(schema))()
    buffers: list[object] = []
    for column, (name, kind) in zip(pushed, schema.items(), strict=True):
        try:
            values = list(map(itemgetter(name), metadatas))
        except KeyError:
            return None
        if list(map(type, values)).count(kind) != len(values):  # (cheaper than a set)
            return None
        try:
            encoded_name = name.encode("utf-8")
            if kind is str:
                offsets, text = _string_column(values)
                column.offsets = offsets.buffer_info()[0]
                column.bytes = _native.bytes_address(text)
                buffers += (offsets, text)
            else:
                if kind is bool:
                    stored = array("B", values)
                elif kind is int:
                    stored = array("q", values)
                else:
                    # A finite sum means every value is finite (a NaN or an
                    # infinity would show in it); only a sum that is not (an
                    # overflow, or a bad value) is checked value by value.
                    if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
                        return None
                    stored = array("d", values)
                column.values = stored.buffer_info()[0]
                buffers.append(stored)
        except (UnicodeEncodeError, OverflowError):
            return None
        column.name = _native.bytes_address(encoded_name)
        column.name_len = len(encoded_name)
        column.kind = _KINDS[kind]
        buffers.append(encoded_name)
    return PushColumns(pushed, buffers)
