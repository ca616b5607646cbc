"""`CachedDataset`: caches loaded for reading, iterated by the core."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dataset_rt import _native
from dataset_rt.config import ReaderConfig
from dataset_rt.metadata_row import MetadataRow
from dataset_rt.records import CachedSample

if TYPE_CHECKING:
    from dataset_rt.runtime import RuntimeHandle

# Samples per ctypes call; large enough to amortize the call, small enough to stay responsive.
_BATCH_SAMPLES = 256


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
        encoded = [str(path).encode() for path in paths]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        handle = ctypes.c_void_p()
        _native.check(
            _native.lib.drt_dataset_open(runtime.value, array, len(encoded), ctypes.byref(options), ctypes.byref(handle))
        )
        self.value = handle

    def __del__(self) -> None:
        if getattr(self, "value", None):
            _native.lib.drt_dataset_destroy(self.value)
            self.value = None


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
    def _open(cls, runtime: RuntimeHandle, paths: list[Path], config: ReaderConfig) -> CachedDataset:
        dataset = cls.__new__(cls)
        dataset.cache_paths = paths
        dataset.reader_config = config
        dataset._handle = _DatasetHandle(runtime, paths, config)
        return dataset

    def __len__(self) -> int:
        """Samples one iteration yields (the epoch length)."""
        return int(_native.lib.drt_dataset_len(self._handle.value))

    def __iter__(self) -> Iterator[CachedSample]:
        """Iterate one epoch of samples in the planned order."""
        return _iterate(self._handle)


def _iterate(dataset: _DatasetHandle) -> Iterator[CachedSample]:
    iterator = ctypes.c_void_p()
    _native.check(_native.lib.drt_iterator_create(dataset.value, ctypes.byref(iterator)))
    batch_pointer = ctypes.POINTER(_native.Batch)()
    try:
        while True:
            _native.check(_native.lib.drt_iterator_next(iterator, _BATCH_SAMPLES, ctypes.byref(batch_pointer)))
            if not batch_pointer:
                return
            try:
                samples = _unpack(batch_pointer.contents)
            finally:
                _native.lib.drt_batch_release(batch_pointer)
            yield from samples
    finally:
        _native.lib.drt_iterator_destroy(iterator)


def _unpack(batch: _native.Batch) -> list[CachedSample]:
    count = batch.count
    payload_offsets = batch.payload_offsets[: count + 1]
    metadata_offsets = batch.metadata_offsets[: count + 1]
    cache_ids = batch.cache_ids[:count]
    sample_ids = batch.sample_ids[:count]
    payloads = ctypes.string_at(batch.payloads, payload_offsets[count]) if payload_offsets[count] else b""
    metadata = ctypes.string_at(batch.metadata_json, metadata_offsets[count])
    return [
        CachedSample(
            payloads[payload_offsets[i] : payload_offsets[i + 1]],
            MetadataRow(metadata[metadata_offsets[i] : metadata_offsets[i + 1]]),
            cache_ids[i],
            sample_ids[i],
        )
        for i in range(count)
    ]
