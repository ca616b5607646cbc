"""The native side of writing: the owner of a core writer handle. Every call
into the library on the write path is made here (or in `_native`)."""

from __future__ import annotations

import ctypes
import operator
import os
from array import array
from collections import deque
from itertools import repeat
from pathlib import Path
from typing import Any

from dataset_rt._binding import native as _native
from dataset_rt._binding.metadata_columns import PushColumns, Schema, schema_of
from dataset_rt._config import WriterConfig

# Batches whose payloads average at least this many bytes are handed to the core
# without copying (drt_writer_push_borrowed, drt_writer_push_columns); smaller
# ones are joined first (drt_writer_push, drt_writer_push_columns_joined).
_BORROW_BYTES_MIN = 64 * 1024

# (payloads, their lengths, count, metadata as a JSON array or by column, payload
# bytes in all): one batch for the core.
SerializedBatch = tuple[list[bytes], ctypes.Array[ctypes.c_uint64], int, "bytes | PushColumns", int]

# array.array typecodes of a C pointer and of a uint64.
_POINTER_TYPECODE = "Q" if ctypes.sizeof(ctypes.c_void_p) == 8 else "I"
assert array(_POINTER_TYPECODE).itemsize == ctypes.sizeof(ctypes.c_void_p)
assert array("Q").itemsize == 8


def payload_lengths(payloads: list[bytes]) -> ctypes.Array[ctypes.c_uint64]:
    """Each payload's length, as the core reads a batch's lengths."""
    lengths = array("Q", map(len, payloads))
    return (ctypes.c_uint64 * len(lengths)).from_buffer(lengths)


class NativeWriter:
    """One native writer handle: create, push batches, finish, destroy.

    Made empty, then `create`d: whoever made it can always `destroy` it, even when
    an interrupt lands right after the core created the writer.
    """

    def __init__(self) -> None:
        self._handle = ctypes.c_void_p()
        self._process_id = os.getpid()
        # Batches pushed without copying: (samples pushed after it, its payloads),
        # kept alive until the core has committed them.
        self._borrowed: deque[tuple[int, list[bytes]]] = deque()
        self._samples_pushed = 0
        self._column_schema: Schema | None = None
        self._schema_fixed = False

    def create(
        self,
        runtime_handle: _native.RuntimeHandle,
        base_cache_dir: Path,
        name: str,
        config: WriterConfig,
    ) -> None:
        options = _native.WriterOptions(
            max_shard_bytes=config.max_shard_bytes,
            # A cap: the core keeps as many batches in flight as its workers need.
            batches_in_flight_max=config.prefetch_size,
            compression=_native.COMPRESSION_CODES[config.shard_compression.algo],
            compression_ratio=config.shard_compression.ratio,
            format_version=config.format_version,
        )
        base = os.fsencode(base_cache_dir)
        encoded_name = name.encode("utf-8", "surrogatepass")
        _native.check(
            _native.lib.drt_writer_create(
                runtime_handle.value,
                base,
                len(base),
                encoded_name,
                len(encoded_name),
                ctypes.byref(options),
                ctypes.byref(self._handle),
            )
        )
        _native.check(
            _native.lib.drt_writer_set_page_cache(
                self._handle, _native.PAGE_CACHE_CODES[config.page_cache]
            )
        )

    def column_schema(self, first_metadata: dict[str, Any]) -> Schema | None:
        """The schema for metadata columns, fixed by the write's first sample."""
        if not self._schema_fixed:
            self._column_schema = schema_of(first_metadata)
            self._schema_fixed = True
        return self._column_schema

    def push(self, batch: SerializedBatch) -> None:
        payloads, lengths, count, metadata, payload_bytes = batch
        large = payload_bytes >= _BORROW_BYTES_MIN * count
        if isinstance(metadata, PushColumns) and large:
            # The core reads the payloads from these bytes objects on the pool
            # (kept alive until committed) and takes the metadata by column.
            _native.check(
                _native.lib.drt_writer_push_columns(
                    self._handle,
                    _addresses(payloads),
                    lengths,
                    count,
                    metadata.array,
                    len(metadata.array),
                )
            )
            self._borrowed.append((self._samples_pushed + count, payloads))
        elif isinstance(metadata, PushColumns):
            # Small payloads: joining them costs a fraction of taking each one's
            # address; the core reads them from the joined copy, kept alive
            # until committed.
            joined = b"".join(payloads)
            _native.check(
                _native.lib.drt_writer_push_columns_joined(
                    self._handle,
                    joined,
                    len(joined),
                    lengths,
                    count,
                    metadata.array,
                    len(metadata.array),
                )
            )
            self._borrowed.append((self._samples_pushed + count, [joined]))
        elif large:
            # Large payloads: the core reads them from these bytes objects on the
            # pool instead of Python joining them and the core copying them.
            _native.check(
                _native.lib.drt_writer_push_borrowed(
                    self._handle, _addresses(payloads), lengths, count, metadata, len(metadata)
                )
            )
            self._borrowed.append((self._samples_pushed + count, payloads))
        else:
            joined = b"".join(payloads)
            _native.check(
                _native.lib.drt_writer_push(
                    self._handle, joined, len(joined), lengths, count, metadata, len(metadata)
                )
            )
        self._samples_pushed += count

    def release_committed(self, samples_committed: int) -> None:
        """Drop the borrowed payloads of batches the core has committed."""
        borrowed = self._borrowed
        while borrowed and borrowed[0][0] <= samples_committed:
            borrowed.popleft()

    def finish(self) -> Path:
        _native.check(_native.lib.drt_writer_finish(self._handle))
        self._borrowed.clear()  # every batch is committed
        return Path(os.fsdecode(_native.lib.drt_writer_path(self._handle)))

    def stats(self) -> _native.WriterStats:
        stats = _native.WriterStats()
        _native.check(_native.lib.drt_writer_stats_get(self._handle, ctypes.byref(stats)))
        return stats

    def usable(self) -> bool:
        """False in a process forked after the writer was created (its threads are not there)."""
        return self._process_id == os.getpid()

    def destroy(self) -> None:
        if self._handle and not _native.shutting_down():
            _native.lib.drt_writer_destroy(self._handle)  # waits for every job
            self._handle = ctypes.c_void_p()
            self._borrowed.clear()


def _addresses(payloads: list[bytes]) -> ctypes.Array[ctypes.c_void_p]:
    """Where each payload's bytes are (the objects must outlive their use by the core)."""
    # `_native.bytes_address` inlined as C-level maps: this runs for every sample.
    # Filled as an array.array, which ctypes then views: initialising a ctypes
    # array item by item costs several times more.
    offset = _native.BYTES_DATA_OFFSET
    addresses = array(_POINTER_TYPECODE, map(operator.add, map(id, payloads), repeat(offset)))
    return (ctypes.c_void_p * len(addresses)).from_buffer(addresses)
