"""Columns crossing between Polars and the core through the Arrow C stream
interface (PyCapsule), in both directions, without a serialized copy.

`update_metadata` hands the identity and weight columns to the core as Arrow
buffers (`ColumnBuffers`), and `get_metadata` hands the core's stream of the
table to Polars (`CoreStream`). Neither needs a pyarrow import (slow the first
time): the structs below are the Arrow C data interface's, not DatasetRT's own.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int64, c_void_p
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


class ArrowArray(Structure):
    pass


ArrowArray._fields_ = [
    ("length", c_int64),
    ("null_count", c_int64),
    ("offset", c_int64),
    ("n_buffers", c_int64),
    ("n_children", c_int64),
    ("buffers", POINTER(c_void_p)),
    ("children", POINTER(POINTER(ArrowArray))),
    ("dictionary", POINTER(ArrowArray)),
    ("release", CFUNCTYPE(None, POINTER(ArrowArray))),
    ("private_data", c_void_p),
]


class ArrowArrayStream(Structure):
    pass


ArrowArrayStream._fields_ = [
    ("get_schema", CFUNCTYPE(c_int, POINTER(ArrowArrayStream), c_void_p)),
    ("get_next", CFUNCTYPE(c_int, POINTER(ArrowArrayStream), POINTER(ArrowArray))),
    ("get_last_error", CFUNCTYPE(c_char_p, POINTER(ArrowArrayStream))),
    ("release", CFUNCTYPE(None, POINTER(ArrowArrayStream))),
    ("private_data", c_void_p),
]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, c_char_p]
_capsule_pointer.restype = c_void_p

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.argtypes = [c_void_p, c_char_p, c_void_p]
_capsule_new.restype = ctypes.py_object

# The capsule keeps a pointer to its name: a module constant outlives every capsule.
_STREAM_CAPSULE_NAME = b"arrow_array_stream"


class CoreStream:
    """A stream the core fills, offered once to a consumer such as ``pl.DataFrame``.

    The consumer moves the stream out of the capsule (leaving ``release``
    unset here); `close` releases it if the consumer did not. The capsule has
    no destructor, so it must not outlive this object: hand it over only
    while the object is alive, as ``pl.DataFrame(core_stream)`` does.
    """

    def __init__(self, fill: Callable[[object], None]) -> None:
        self._stream = ArrowArrayStream()
        fill(ctypes.byref(self._stream))

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        # A requested schema may be ignored (the consumer then checks or casts).
        return _capsule_new(ctypes.addressof(self._stream), _STREAM_CAPSULE_NAME, None)

    def close(self) -> None:
        if self._stream.release:
            self._stream.release(ctypes.byref(self._stream))

    def __del__(self) -> None:
        self.close()


class ColumnBuffers:
    """The validity bitmap and values of one single-chunk primitive column.

    Holds the exported array until `release` (or garbage collection), so the
    addresses stay valid while the core reads them.
    """

    def __init__(self, series: pl.Series) -> None:
        self._capsule = series.rechunk().__arrow_c_stream__()
        stream = ctypes.cast(
            _capsule_pointer(self._capsule, b"arrow_array_stream"), POINTER(ArrowArrayStream)
        )
        self._array = ArrowArray()
        if (
            stream.contents.get_next(stream, ctypes.byref(self._array)) != 0
            or not self._array.release
        ):
            raise RuntimeError(
                f"column {series.name!r} could not be exported through the Arrow C interface"
            )
        self.offset = int(self._array.offset)
        self.validity = self._array.buffers[0]
        self.values = self._array.buffers[1]

    def release(self) -> None:
        if self._array.release:
            self._array.release(ctypes.byref(self._array))

    def __del__(self) -> None:
        self.release()
