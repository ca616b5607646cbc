"""`CachedDataset`: caches loaded for reading, iterated by the core."""

from __future__ import annotations

import ctypes
import io
import itertools
import json
import os
import struct
import sys
from collections.abc import Iterable, Iterator
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataset_rt import _native, malloc_tuning
from dataset_rt.config import ReaderConfig
from dataset_rt.fork_safe_lock import ForkSafeLock
from dataset_rt.metadata_row import BatchMetadata, MetadataRow
from dataset_rt.records import CachedSample

if TYPE_CHECKING:
    import polars as pl

    from dataset_rt.runtime import RuntimeHandle


class _DatasetHandle:
    """Owns the native dataset and keeps its runtime alive."""

    def __init__(self, runtime: RuntimeHandle, paths: list[Path], config: ReaderConfig) -> None:
        self.runtime = runtime
        options = _native.ReaderOptions(
            seed=config.seed,
            prefetch_size=config.prefetch_size,
            shuffle=int(config.shuffle),
            validate_cache=int(config.validate_cache),
        )
        encoded = [os.fsencode(path) for path in paths]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        lengths = (ctypes.c_uint64 * len(encoded))(*map(len, encoded))
        handle = ctypes.c_void_p()
        _native.check(
            _native.lib.drt_dataset_open(
                runtime.value,
                array,
                lengths,
                len(encoded),
                ctypes.byref(options),
                ctypes.byref(handle),
            )
        )
        self.value = handle
        self.cache_count = len(paths)
        # Read here rather than with the first batch, where it would delay the
        # first sample.
        text = _native.take_buffer(_native.lib.drt_dataset_schema_json, handle)
        self._stored_names: list[str] = [field["name"] for field in json.loads(text)]

    def stored_names(self) -> list[str]:
        """The stored metadata columns' names, in schema order."""
        return self._stored_names

    def __del__(self) -> None:
        if getattr(self, "value", None) and not _native.shutting_down():
            _native.lib.drt_dataset_destroy(self.value)
            self.value = None


class _NativeIterator:
    """Owns one native iterator; hands out its batches as lists of samples."""

    def __init__(self, dataset: _DatasetHandle) -> None:
        self.handle: ctypes.c_void_p | None = None
        # Held around every call on the handle: closing from another thread
        # waits for a call in progress instead of freeing the iterator under it.
        self.lock = ForkSafeLock()
        self.dataset = dataset  # keeps the native dataset (and runtime) alive
        handle = ctypes.c_void_p()
        _native.check(
            _native.lib.drt_iterator_create_deferring(
                dataset.value, _DEFER_PAYLOAD_BYTES, ctypes.byref(handle)
            )
        )
        self.handle = handle

    def next_batch(self) -> list[CachedSample] | None:
        with self.lock.held():
            return self._next_batch()

    def bytes_held(self) -> int:
        with self.lock.held():
            if self.handle is None:
                return 0
            return int(_native.lib.drt_iterator_bytes_held(self.handle))

    def _next_batch(self) -> list[CachedSample] | None:
        if self.handle is None:
            return None
        batch = ctypes.POINTER(_native.Batch)()
        _native.check(_native.lib.drt_iterator_next(self.handle, ctypes.byref(batch)))
        if not batch:
            self._destroy()
            return None
        try:
            contents = batch.contents
            # One copy of everything but the payloads (layout in dataset_rt.h).
            packed = ctypes.string_at(contents.packed, contents.packed_len)
            count, column_count, payload_bytes, deferred = _PACKED_HEAD.unpack_from(packed)
            words = memoryview(packed).cast("Q")
            lengths_at = _PACKED_HEAD_WORDS + 5 * column_count
            ids_at = lengths_at + count
            cache_ids_at = 8 * (ids_at + count)
            # With one cache every id is 0: repeating it spares unpacking one per sample.
            cache_ids = (
                repeat(0, count)
                if self.dataset.cache_count == 1
                else memoryview(packed)[cache_ids_at : cache_ids_at + 4 * count].cast("I")
            )
            metadata = BatchMetadata(
                self.dataset.stored_names(),
                packed,
                words[_PACKED_HEAD_WORDS:lengths_at],
                cache_ids_at + ((4 * count + 7) & ~7),  # cache ids padded to 8 bytes
            )
            if deferred:
                payloads = _read_payloads(self.handle, batch)
            else:
                lengths = words[lengths_at:ids_at]
                payloads = _copy_payloads(contents.payloads, payload_bytes, lengths)
            rows = map(MetadataRow, repeat(metadata, count), range(count))
            fields = zip(payloads, rows, cache_ids, words[ids_at : ids_at + count], strict=False)
            return _samples(count, fields)
        finally:
            _native.lib.drt_batch_release(batch)

    def close(self) -> None:
        with self.lock.held():
            self._destroy()

    def _destroy(self) -> None:
        if self.handle is not None:
            _native.lib.drt_iterator_destroy(self.handle)
            self.handle = None

    def __del__(self) -> None:
        if not _native.shutting_down():
            self._destroy()


def _batches(native: _NativeIterator) -> Iterator[list[CachedSample]]:
    while (batch := native.next_batch()) is not None:
        yield batch


class SampleIterator(itertools.chain):  # type: ignore[type-arg]
    """One epoch of samples in planned order.

    Created by ``iter(dataset)``: it snapshots the dataset's active table,
    weights and epoch length, and the core starts reading ahead at once.
    Dropping or closing it mid-epoch stops the read-ahead and frees its memory.
    Stepping from sample to sample runs in C (it is an ``itertools.chain`` over
    the core's batches), so iteration costs no Python call per sample.
    """

    __slots__ = ("_native",)

    @classmethod
    def _start(cls, dataset: _DatasetHandle) -> SampleIterator:
        native = _NativeIterator(dataset)
        iterator = cls.from_iterable(_batches(native))
        iterator._native = native
        return iterator

    def bytes_held(self) -> int:
        """Bytes of samples the core has read ahead and still holds for this iterator."""
        return self._native.bytes_held()

    def close(self) -> None:
        """Stop reading ahead and release the native iterator."""
        self._native.close()


def _samples(count: int, fields: Iterable[tuple[Any, ...]]) -> list[CachedSample]:
    """`count` CachedSamples from 4-tuples, each built in C by ``tuple.__new__``
    without the NamedTuple's Python ``__new__``."""
    return list(map(tuple.__new__, repeat(CachedSample, count), fields))  # type: ignore[arg-type]


# Above this mean payload size, each payload is copied straight from native memory
# (one copy); below it, one copy of the whole batch and C-level slicing is faster.
_DIRECT_COPY_BYTES = 64 * 1024

# Uncompressed payloads of at least this size are not copied into the core's
# batches: the core reads each from its file into the bytes object handed out.
_DEFER_PAYLOAD_BYTES = 64 * 1024


# drt_batch.packed starts with count, column_count, payload_bytes and deferred.
_PACKED_HEAD_WORDS = 4
_PACKED_HEAD = struct.Struct(f"={_PACKED_HEAD_WORDS}Q")


def _read_payloads(handle: ctypes.c_void_p, batch: Any) -> list[bytes]:
    """The payloads of a batch that left its large ones in their files: each of
    those is read by the core straight into a new bytes object (all of the
    batch's at once, by the calling thread and the pool together), the others
    are copied out of the batch."""
    malloc_tuning.tune_once()
    deferred = ctypes.POINTER(ctypes.c_uint64)()
    _native.check(_native.lib.drt_batch_deferred(batch, ctypes.byref(deferred)))
    contents = batch.contents
    count = contents.count
    lengths = deferred[:count]
    offsets = contents.payload_offsets[: count + 1]
    base = contents.payloads
    payloads = [
        _native.unfilled_bytes(length) if length else ctypes.string_at(base + start, end - start)
        for length, start, end in zip(lengths, offsets, offsets[1:], strict=False)
    ]
    destinations = (ctypes.c_void_p * count)(
        *[
            _native.bytes_address(payload) if length else None
            for payload, length in zip(payloads, lengths, strict=True)
        ]
    )
    _native.check(_native.lib.drt_iterator_read_deferred_batch(handle, batch, destinations))
    return payloads


def _copy_payloads(base: int | None, payload_bytes: int, lengths: memoryview) -> Iterable[bytes]:
    """The batch's payloads (`lengths` of them, joined at `base`), copied out of it."""
    if payload_bytes > _DIRECT_COPY_BYTES * len(lengths):
        malloc_tuning.tune_once()
        starts = itertools.accumulate(lengths, initial=base)
        return list(map(ctypes.string_at, starts, lengths))
    joined = ctypes.string_at(base, payload_bytes) if payload_bytes else b""
    # Reading the payloads in turn from a BytesIO sharing `joined` makes each
    # bytes object in one C call, without a slice object per sample: about
    # half the cost of slicing `joined`.
    return map(io.BytesIO(joined).read, lengths)


class CachedDataset:
    """Immutable caches loaded for reading; iterate it for `CachedSample`s.

    Create it with `DatasetRuntime.cached_dataset` or `from_cache_sources`.
    """

    cache_paths: list[Path]
    """The loaded caches; a sample's ``cache_id`` is its cache's position here."""

    reader_config: ReaderConfig
    """The configuration the dataset was loaded with."""

    def __init__(self) -> None:
        raise TypeError("use DatasetRuntime.cached_dataset() to create a CachedDataset")

    @classmethod
    def _open(
        cls, runtime: RuntimeHandle, paths: list[Path], config: ReaderConfig
    ) -> CachedDataset:
        dataset = cls.__new__(cls)
        dataset.cache_paths = paths
        dataset.reader_config = config
        dataset._handle = _DatasetHandle(runtime, paths, config)
        dataset._extra_columns = None
        # Keeps the core's table and the extra columns of the same update together.
        dataset._metadata_lock = ForkSafeLock()
        return dataset

    def __len__(self) -> int:
        """Samples the next iteration yields (the epoch length)."""
        length = ctypes.c_uint64()
        _native.check(_native.lib.drt_dataset_len(self._handle.value, ctypes.byref(length)))
        return length.value

    def __iter__(self) -> SampleIterator:
        """Start the next epoch of the sample stream (see `ReaderConfig.shuffle`)."""
        return SampleIterator._start(self._handle)

    def set_epoch_len(self, epoch_len: int) -> None:
        """Make every following iterator yield `epoch_len` (>= 1) samples.

        Iterators continue the stream: with epoch_len 2 over rows 1..5 and
        shuffle=False, successive iterators yield ``1 2``, ``3 4``, ``5 1``.
        """
        if isinstance(epoch_len, bool) or not isinstance(epoch_len, int):
            raise TypeError(f"epoch_len must be an int, got {type(epoch_len).__name__}")
        if epoch_len < 1:
            raise ValueError("epoch_len must be at least 1")
        if epoch_len > sys.maxsize:
            # len(ds) returns it, and Python lengths stop at sys.maxsize.
            raise ValueError(
                f"epoch_len must be at most sys.maxsize ({sys.maxsize}), got {epoch_len}"
            )
        _native.check(_native.lib.drt_dataset_set_epoch_len(self._handle.value, epoch_len))

    def get_metadata(self) -> pl.DataFrame:
        """The active table: ``cache_id | sample_id | <stored columns> | weight | <extra columns>``.

        A copy: editing it changes nothing until it is passed to `update_metadata`.
        """
        from dataset_rt import metadata_frame  # Polars is loaded on first use

        with self._metadata_lock.held():
            return metadata_frame.read(self._handle, self._extra_columns)

    def update_metadata(self, metadata: pl.DataFrame) -> None:
        """Replace the active table (rows, order, weights) from a frame like `get_metadata`'s.

        Rows may be filtered, reordered and duplicated; extra columns are kept.
        The core validates the frame (identities known, stored columns with
        their types, weights positive and finite) before anything changes, then
        resets the stream position; the epoch length is kept.
        """
        from dataset_rt import metadata_frame  # Polars is loaded on first use

        with self._metadata_lock.held():
            self._extra_columns = metadata_frame.install(self._handle, metadata)

    samples_metadata = get_metadata
    set_samples_metadata = update_metadata

    def to_torch_iterable_dataset(self) -> Any:
        """A sized `torch.utils.data.IterableDataset` yielding this dataset's `CachedSample`s.

        With ``DataLoader(num_workers=0)`` it yields exactly the dataset's
        stream. DataLoader worker processes are refused with a clear error:
        use ``DatasetRuntime(num_workers=N)`` for parallel reads instead.
        """
        from dataset_rt.torch_adapter import make_torch_iterable_dataset

        return make_torch_iterable_dataset(self)
