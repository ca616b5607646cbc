"""The native side of reading: the owners of the core's dataset and iterator
handles, and the unpacking of the core's batches into `CachedSample`s. Every
call into the library on the read path is made here (or in `_native`)."""

from __future__ import annotations

import ctypes
import io
import itertools
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, cast

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding import stream_state as _stream_state
from dataset_rt._binding.cache_info import CacheInfo, parse_cache_info
from dataset_rt._binding.fork_safe_lock import ForkSafeLock
from dataset_rt._binding.metadata_row import MetadataRow
from dataset_rt._binding.native import RuntimeHandle
from dataset_rt._binding.packed_batch import unpack
from dataset_rt._binding.remote import RemoteHandle
from dataset_rt._config import ReaderConfig, RemoteConfig
from dataset_rt._records import CachedSample
from dataset_rt._remote import is_remote

# A cache's location: a local folder, or the URL of a remote cache (a str, kept
# as given: `Path` would fold the `//` of ``s3://``).
CachePath = Path | str


def _remote_hook(
    paths: Sequence[CachePath], config: RemoteConfig | None, versions: Sequence[bytes] | None
) -> RemoteHandle | None:
    """The fetch hook of the caches of `paths` given as URLs (None if there is none),
    with each one's version from `versions` pinned."""
    if not any(map(is_remote, paths)):
        return None
    hook = RemoteHandle(config or RemoteConfig())
    if versions is not None:
        for path, version in zip(paths, versions, strict=True):
            if is_remote(path):
                hook.pin_version(str(path), version)
    return hook


class DatasetHandle:
    """Owns the native dataset and keeps its runtime alive."""

    def __init__(
        self,
        runtime: RuntimeHandle,
        paths: Sequence[CachePath],
        config: ReaderConfig,
        remote: RemoteConfig | None = None,
        versions: Sequence[bytes] | None = None,
    ) -> None:
        """Opens the caches at `paths`. `versions`, the SHA-256 of each cache's
        manifest.json when this dataset was first opened (`cache_sha256s`), has
        each remote cache open that version (`RemoteHandle.pin_version`)."""
        self.runtime = runtime
        # The fetch hook of the caches given as URLs; kept while this handle lives.
        self.remote = _remote_hook(paths, remote, versions)
        options = _native.ReaderOptions(
            seed=config.seed,
            prefetch_size=config.prefetch_size,
            shuffle=int(config.shuffle),
            validate_cache=int(config.validate_cache),
            without_replacement=int(not config.replacement),
        )
        encoded = [os.fsencode(path) for path in paths]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        lengths = (ctypes.c_uint64 * len(encoded))(*map(len, encoded))
        handle = ctypes.c_void_p()
        _native.check(
            _native.lib.drt_dataset_open_remote(
                runtime.value,
                array,
                lengths,
                len(encoded),
                ctypes.byref(options),
                self.remote.value if self.remote is not None else None,
                ctypes.byref(handle),
            )
        )
        self.value = handle
        self.cache_count = len(paths)
        self.paths = paths
        if config.on_corrupt != "raise":
            _native.check(
                _native.lib.drt_dataset_set_on_corrupt(
                    handle, _native.ON_CORRUPT_CODES[config.on_corrupt]
                )
            )
        # payload="memoryview": the views of the shards mapped so far, by the
        # core's mapping (see `mapped_view`).
        self.payload_views = config.payload == "memoryview"
        self.mapped_views: dict[int, tuple[int, memoryview]] = {}
        if self.payload_views:
            _native.check(_native.lib.drt_dataset_set_payloads(handle, _native.PAYLOADS_MAPPED))
        # Caches whose first skipped sample was warned about (on_corrupt="skip").
        self.warned_caches: set[int] = set()
        # Read here rather than with the first batch, where it would delay the
        # first sample.
        text = _native.take_buffer(_native.lib.drt_dataset_schema_json, handle)
        schema = json.loads(text)
        self._stored_names: list[str] = [field["name"] for field in schema]
        # Each stored column's Arrow type in the metadata table, as the core names it.
        self.stored_arrow_types: dict[str, str] = {f["name"]: f["arrow_type"] for f in schema}
        digests = (ctypes.c_uint8 * (32 * len(paths)))()
        _native.check(_native.lib.drt_dataset_cache_sha256s(handle, digests, len(paths)))
        joined = bytes(digests)
        self.cache_sha256s = [joined[at : at + 32] for at in range(0, len(joined), 32)]
        ids = (ctypes.c_uint64 * len(paths))()
        _native.check(_native.lib.drt_dataset_cache_ids(handle, ids, len(paths)))
        # What samples and tables call each cache (see `CachedDataset.cache_ids`).
        self.cache_ids: list[int] = list(ids)
        self._path_of_id = dict(zip(self.cache_ids, paths, strict=True))
        self.mirror = self.position()

    def mapped_view(self, mapping: int) -> tuple[int, memoryview]:
        """(address, read-only view) of a whole shard the core mapped.

        The view's buffer is a ctypes array over the mapping, which holds a
        reference to the mapping (`_MappingReference`): a payload sliced from
        the view keeps the shard mapped while it lives, whatever else is gone.
        """
        entry = self.mapped_views.get(mapping)
        if entry is None:
            base, length = ctypes.c_void_p(), ctypes.c_uint64()
            _native.check(
                _native.lib.drt_mapping_retain(mapping, ctypes.byref(base), ctypes.byref(length))
            )
            address = base.value or 0
            array = (ctypes.c_char * length.value).from_address(address)
            array._reference = _MappingReference(mapping)  # type: ignore[attr-defined]
            entry = (address, memoryview(array).cast("B").toreadonly())
            self.mapped_views[mapping] = entry
        return entry

    def cache_info(self, index: int) -> CacheInfo:
        """The core's description of cache `index` from the manifest this dataset opened
        (for a URL: the version read, with no request)."""
        text = _native.take_buffer(_native.lib.drt_dataset_cache_info, self.value, index)
        return parse_cache_info(text)

    @property
    def single_cache_id(self) -> int | None:
        """The only cache's cache_id, or None when there are several."""
        return self.cache_ids[0] if self.cache_count == 1 else None

    def path_of(self, cache_id: int) -> CachePath:
        """The path of the cache whose cache_id is `cache_id`."""
        return self._path_of_id[cache_id]

    def stored_names(self) -> list[str]:
        """The stored metadata columns' names, in schema order."""
        return self._stored_names

    def owned_here(self) -> bool:
        """False in a child forked from the process that opened it."""
        return self.runtime.owned_here()

    def position(self) -> _native.StreamPosition:
        """Where the next iterator starts."""
        position = _native.StreamPosition()
        _native.check(_native.lib.drt_dataset_position(self.value, ctypes.byref(position)))
        return position

    def refresh_mirror(self) -> None:
        """Remember the stream's place in Python, where a forked child, which
        cannot call into its parent's core, can still read it."""
        self.mirror = self.position()

    def state(self) -> dict[str, Any]:
        """The next iterator's start with the data's fingerprint, as a dict."""
        native = _native.StreamState()
        _native.check(_native.lib.drt_dataset_state(self.value, ctypes.byref(native)))
        return _stream_state.to_dict(native, self.cache_sha256s)

    def take_state(self) -> dict[str, Any]:
        """Like `state`, and moves the stream past that epoch."""
        native = _native.StreamState()
        _native.check(_native.lib.drt_dataset_take_state(self.value, ctypes.byref(native)))
        self.refresh_mirror()
        return _stream_state.to_dict(native, self.cache_sha256s)

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from `state`; the core refuses one of other data."""
        native, digests = _stream_state.from_dict(state)
        _native.check(
            _native.lib.drt_dataset_load_state(
                self.value, ctypes.byref(native), digests, native.cache_count
            )
        )
        self.refresh_mirror()

    def set_epoch(self, epoch: int) -> None:
        _native.check(_native.lib.drt_dataset_set_epoch(self.value, epoch))
        self.refresh_mirror()

    def fill_metadata_stream(self, stream: object) -> None:
        """Fill an Arrow C stream struct with the active table's columns."""
        _native.check(_native.lib.drt_dataset_metadata_arrow_stream(self.value, stream))

    def set_table(
        self,
        columns_json: bytes,
        row_count: int,
        cache_ids: _native.IntColumn,
        sample_ids: _native.IntColumn,
        weights: _native.FloatColumn,
    ) -> None:
        """Install a new active table (see `drt_dataset_set_table`)."""
        _native.check(
            _native.lib.drt_dataset_set_table(
                self.value,
                columns_json,
                row_count,
                ctypes.byref(cache_ids),
                ctypes.byref(sample_ids),
                ctypes.byref(weights),
            )
        )

    def len(self) -> int:
        """Samples the next iterator yields."""
        length = ctypes.c_uint64()
        _native.check(_native.lib.drt_dataset_len(self.value, ctypes.byref(length)))
        return length.value

    def set_epoch_len(self, epoch_len: int) -> None:
        _native.check(_native.lib.drt_dataset_set_epoch_len(self.value, epoch_len))
        self.refresh_mirror()

    def set_mix(self, entries: Sequence[tuple[int, int, float, int]]) -> None:
        """Install a mix of (cache position, form, value, count) entries; none: no mix."""
        c_entries = (_native.MixEntry * max(1, len(entries)))()
        for slot, (position, form, value, count) in zip(c_entries, entries, strict=False):
            slot.cache, slot.form, slot.value, slot.count = position, form, value, count
        _native.check(_native.lib.drt_dataset_set_mix(self.value, c_entries, len(entries)))
        self.refresh_mirror()

    def mix_counts(self) -> list[int] | None:
        """Each cache's samples per epoch under the mix, in cache order; None without one."""
        cache_count = len(self.cache_sha256s)
        counts = (ctypes.c_uint64 * cache_count)()
        mixed = ctypes.c_uint32()
        _native.check(
            _native.lib.drt_dataset_mix_counts(self.value, counts, cache_count, ctypes.byref(mixed))
        )
        return list(counts) if mixed.value else None

    def __del__(self) -> None:
        if getattr(self, "value", None) and not _native.shutting_down():
            _native.lib.drt_dataset_destroy(self.value)
            self.value = ctypes.c_void_p()


class NativeIterator:
    """Owns one native iterator; hands out its batches as lists of samples."""

    def __init__(
        self,
        dataset: DatasetHandle,
        share: _native.Share | None = None,
        skip: int = 0,
        identities: tuple[Any, Any] | None = None,
    ) -> None:
        self.handle: ctypes.c_void_p | None = None
        # Held around every call on the handle: closing from another thread
        # waits for a call in progress instead of freeing the iterator under it.
        self.lock = ForkSafeLock()
        self.dataset = dataset  # keeps the native dataset (and runtime) alive
        # Samples handed out: those of the batches before `current`, plus
        # `current`'s taken so far (its length hint says how many are left).
        self.handed_before = 0
        # (cache_id, sample_id) of the samples left out as corrupt (on_corrupt="skip").
        self.skipped: list[tuple[int, int]] = []
        self.current: Iterator[CachedSample] | None = None
        self.current_len = 0
        self.finished = False
        handle = ctypes.c_void_p()
        if identities is not None:
            # Arrays of uint64 cache ids and sample ids; the core copies them.
            cache_ids, sample_ids = identities
            status = _native.lib.drt_iterator_create_reads(
                dataset.value,
                cache_ids.buffer_info()[0],
                sample_ids.buffer_info()[0],
                len(sample_ids),
                _native.DEFER_DEFAULT,
                ctypes.byref(handle),
            )
        elif share is None:
            status = _native.lib.drt_iterator_create_deferring(
                dataset.value, _native.DEFER_DEFAULT, ctypes.byref(handle)
            )
        else:
            status = _native.lib.drt_iterator_create_share(
                dataset.value,
                ctypes.byref(share),
                skip,
                _native.DEFER_DEFAULT,
                ctypes.byref(handle),
            )
        _native.check(status)
        self.handle = handle
        dataset.refresh_mirror()

    def consumed(self) -> int:
        """Samples this iterator has handed out."""
        current = self.current
        if current is None:
            return self.handed_before
        # A list iterator's length hint: the samples of its batch not yet taken.
        left: int = current.__length_hint__()  # type: ignore[attr-defined]
        return self.handed_before + self.current_len - left

    def state(self) -> dict[str, Any]:
        """The stream state after the samples handed out so far."""
        with self.lock.held():
            if self.handle is None:
                raise errors.StateError("this iterator is closed; its state is gone with it")
            native = _native.StreamState()
            _native.check(
                _native.lib.drt_iterator_state(self.handle, self.consumed(), ctypes.byref(native))
            )
        return _stream_state.to_dict(native, self.dataset.cache_sha256s)

    def span(self) -> dict[str, Any]:
        """The state this iterator's share was cut from (see `drt_iterator_span`)."""
        with self.lock.held():
            if self.handle is None:
                raise errors.StateError("this iterator is closed; its state is gone with it")
            native = _native.StreamState()
            _native.check(_native.lib.drt_iterator_span(self.handle, ctypes.byref(native)))
        return _stream_state.to_dict(native, self.dataset.cache_sha256s)

    def next_batch(self) -> tuple[list[CachedSample], list[tuple[int, int, int]]] | None:
        with self.lock.held():
            return self._next_batch()

    def bytes_held(self) -> int:
        with self.lock.held():
            if self.handle is None:
                return 0
            return int(_native.lib.drt_iterator_bytes_held(self.handle))

    def note_skipped(self, cache_id: int, sample_id: int) -> None:
        """Count a sample the core left out as corrupt; warn on a cache's first."""
        self.skipped.append((cache_id, sample_id))
        dataset = self.dataset
        if cache_id not in dataset.warned_caches:
            dataset.warned_caches.add(cache_id)
            path = dataset.path_of(cache_id)
            warnings.warn(
                f"dataset_rt: skipped corrupt sample (cache_id={cache_id}, "
                f"sample_id={sample_id}) of cache {path} (on_corrupt='skip'); later "
                f"skips in this cache are counted in the iterator's `skipped`, not "
                f"warned about; dataset_rt.verify({str(path)!r}) lists every problem",
                RuntimeWarning,
                stacklevel=3,
            )

    def _next_batch(self) -> tuple[list[CachedSample], list[tuple[int, int, int]]] | None:
        if self.handle is None or self.finished:
            return None
        batch = ctypes.POINTER(_native.Batch)()
        _native.check(_native.lib.drt_iterator_next(self.handle, ctypes.byref(batch)))
        if not batch:
            # The native iterator stays until closed: it holds nothing more
            # than the table snapshot that `state` reports on.
            self.finished = True
            return None
        try:
            contents = batch.contents
            base = contents.payloads
            payload_bytes = contents.payload_offsets[contents.count]
            # `packed` (everything but the payloads; layout in dataset_rt.h) lies
            # after the payloads in their buffer, from the next multiple of 8.
            packed_at = contents.packed - base
            if packed_at != (payload_bytes + 7) & ~7:
                raise RuntimeError(
                    f"dataset_rt: the library's batch layout is not this package's "
                    f"(packed at {packed_at} after {payload_bytes} payload bytes)"
                )
            joined = None
            if payload_bytes > _DIRECT_COPY_BYTES * contents.count:
                packed = ctypes.string_at(contents.packed, contents.packed_len)
            else:
                # Small payloads and packed in one copy.
                joined = ctypes.string_at(base, packed_at + contents.packed_len)
                packed = joined[packed_at:]
            parts = unpack(packed, self.dataset.stored_names(), self.dataset.single_cache_id)
            count = parts.sample_count
            payloads: Iterable[bytes | memoryview]
            if parts.deferred and self.dataset.payload_views:
                payloads = _mapped_payloads(self.dataset, batch)
            elif parts.deferred:
                payloads = _read_payloads(self.handle, batch)
            elif joined is None:
                payloads = _copy_each_payload(base, parts.lengths)
            else:
                # Reading the payloads in turn from a BytesIO sharing `joined`
                # makes each bytes object in one C call, without a slice object
                # per sample: about half the cost of slicing `joined`.
                payloads = map(io.BytesIO(joined).read, parts.lengths)
            if self.dataset.payload_views and not parts.deferred:
                payloads = map(memoryview, payloads)
            rows = map(MetadataRow, repeat(parts.metadata, count), range(count))
            fields = zip(payloads, rows, parts.cache_ids, parts.sample_ids, strict=False)
            return _samples(count, fields), parts.skipped
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


def _batches(native: NativeIterator) -> Iterator[Iterator[CachedSample]]:
    while (batch := native.next_batch()) is not None:
        samples, skipped = batch
        # Only the list iterator handed to the chain holds the batch: an
        # exhausted list iterator lets go of its list, so a batch's samples (up
        # to 4 MiB of payloads) are freed before the next batch is read instead
        # of being kept by this frame while it is.
        del batch
        if skipped:
            yield from _segments(native, samples, skipped)
            del samples
            continue
        # The chain consumes this very list iterator, so its length hint
        # counts the samples handed out without a Python call per sample.
        native.handed_before += native.current_len
        native.current = iter(samples)
        native.current_len = len(samples)
        del samples
        yield native.current


def _segments(
    native: NativeIterator, samples: list[CachedSample], skipped: list[tuple[int, int, int]]
) -> Iterator[Iterator[CachedSample]]:
    """A batch with samples left out, as runs of samples between them. The
    positions of the samples left out before a run are counted when the run
    starts, so `consumed` stays a count of stream positions."""
    start = holes = 0
    for at, cache_id, sample_id in skipped:
        if at > start:
            yield _segment(native, samples[start:at], holes)
            start, holes = at, 0
        native.note_skipped(cache_id, sample_id)
        holes += 1
    yield _segment(native, samples[start:], holes)


def _segment(
    native: NativeIterator, samples: list[CachedSample], holes: int
) -> Iterator[CachedSample]:
    native.handed_before += native.current_len + holes
    native.current = items = iter(samples)
    native.current_len = len(samples)
    return items


class SampleIterator(itertools.chain[CachedSample]):
    """One epoch of samples in planned order.

    Created by ``iter(dataset)``: it snapshots the dataset's active table,
    weights and epoch length, and the core starts reading ahead at once.
    Dropping or closing it mid-epoch stops the read-ahead and frees its memory.
    Stepping from sample to sample runs in C (it is an ``itertools.chain`` over
    the core's batches), so iteration costs no Python call per sample.
    """

    __slots__ = ("_iterator",)
    _iterator: NativeIterator

    @classmethod
    def _start(
        cls, dataset: DatasetHandle, share: _native.Share | None = None, skip: int = 0
    ) -> SampleIterator:
        native = NativeIterator(dataset, share, skip)
        iterator = cast(SampleIterator, cls.from_iterable(_batches(native)))
        iterator._iterator = native
        return iterator

    def _span(self) -> dict[str, Any]:
        """The state this iterator's share was cut from (see `NativeIterator.span`)."""
        return self._iterator.span()

    def state_dict(self) -> dict[str, Any]:
        """The resume state of the stream after the samples yielded so far.

        Loaded with `CachedDataset.load_state_dict` (in this or a new process,
        caches reopened), the next iterator yields this epoch's remaining
        samples and the one after it the next epoch, exactly as this run
        continues. Taken after the last sample, it is the next epoch's start.
        """
        return self._iterator.state()

    def consumed(self) -> int:
        """Stream positions this iterator has moved past: the samples it has
        yielded, and those it left out as corrupt (``on_corrupt="skip"``)."""
        return self._iterator.consumed()

    @property
    def skipped(self) -> list[tuple[int, int]]:
        """The ``(cache_id, sample_id)`` of every sample this iterator left out
        because its record is corrupt (``ReaderConfig(on_corrupt="skip")``), in
        stream order; empty with ``"raise"``."""
        return list(self._iterator.skipped)

    def bytes_held(self) -> int:
        """Bytes of samples the core has read ahead and still holds for this iterator."""
        return self._iterator.bytes_held()

    def close(self) -> None:
        """Stop reading ahead and release the native iterator."""
        self._iterator.close()


def _samples(count: int, fields: Iterable[tuple[Any, ...]]) -> list[CachedSample]:
    """`count` CachedSamples from 4-tuples, each built in C by ``tuple.__new__``
    without the NamedTuple's Python ``__new__``."""
    return list(map(tuple.__new__, repeat(CachedSample, count), fields))


# Above this mean payload size, each payload is copied straight from native memory
# (one copy); below it, one copy of the whole batch (with its packed part) and
# C-level reads from it are faster.
_DIRECT_COPY_BYTES = 64 * 1024


def _read_payloads(handle: ctypes.c_void_p, batch: Any) -> list[bytes]:
    """The payloads of a batch that left its large ones in their files: each of
    those is read by the core straight into a new bytes object (all of the
    batch's at once, by the calling thread and the pool together), the others
    are copied out of the batch."""
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


class _MappingReference:
    """One reference to a shard mapping of the core, released with this object."""

    def __init__(self, mapping: int) -> None:
        self.mapping = mapping

    def __del__(self) -> None:
        if not _native.shutting_down():
            _native.lib.drt_mapping_release(self.mapping)


def _mapped_payloads(dataset: DatasetHandle, batch: Any) -> list[bytes | memoryview]:
    """The payloads of a batch whose large ones the core checked in place in
    their shards' mappings: views of those, and views of copies of the others.
    (With the dataset's payloads mapped, every deferred payload is: the core
    gives addresses whenever it gives deferred lengths.)"""
    deferred = ctypes.POINTER(ctypes.c_uint64)()
    _native.check(_native.lib.drt_batch_deferred(batch, ctypes.byref(deferred)))
    addresses = ctypes.POINTER(ctypes.c_void_p)()
    mappings = ctypes.POINTER(ctypes.c_void_p)()
    _native.check(
        _native.lib.drt_batch_mapped(batch, ctypes.byref(addresses), ctypes.byref(mappings))
    )
    contents = batch.contents
    count = contents.count
    offsets = contents.payload_offsets[: count + 1]
    base = contents.payloads
    payloads: list[bytes | memoryview] = []
    for length, address, mapping, start, end in zip(
        deferred[:count], addresses[:count], mappings[:count], offsets, offsets[1:], strict=False
    ):
        if address:
            mapped_at, view = dataset.mapped_view(mapping)
            at = address - mapped_at
            payloads.append(view[at : at + length])
        else:
            payloads.append(memoryview(ctypes.string_at(base + start, end - start)))
    return payloads


def _copy_each_payload(base: int, lengths: memoryview) -> list[bytes]:
    """The batch's payloads (`lengths` of them, joined at `base`), each copied
    straight out of it."""
    starts = itertools.accumulate(lengths, initial=base)
    return list(map(ctypes.string_at, starts, lengths))


class NativeVerifier:
    """Owns one native scrub of a cache (``drt_verify_*``)."""

    def __init__(
        self, runtime: RuntimeHandle, path: CachePath, remote: RemoteConfig | None = None
    ) -> None:
        self.runtime = runtime  # keeps the pool alive while the verifier lives
        encoded = os.fsencode(path)
        handle = ctypes.c_void_p()
        # A remote cache's fetch hook, kept while the verifier lives.
        self.remote = RemoteHandle(remote or RemoteConfig()) if is_remote(path) else None
        if self.remote is not None:
            status = _native.lib.drt_verify_create_remote(
                runtime.value, encoded, len(encoded), self.remote.value, ctypes.byref(handle)
            )
        else:
            status = _native.lib.drt_verify_create(
                runtime.value, encoded, len(encoded), ctypes.byref(handle)
            )
        _native.check(status)
        self.handle: ctypes.c_void_p | None = handle

    def run(self) -> None:
        """Runs the scrub to its end (the GIL is released meanwhile)."""
        _native.check(_native.lib.drt_verify_run(self.handle))

    def progress(self) -> tuple[int, int]:
        """(bytes read so far, bytes to read in all)."""
        done, total = ctypes.c_uint64(), ctypes.c_uint64()
        _native.check(
            _native.lib.drt_verify_progress(self.handle, ctypes.byref(done), ctypes.byref(total))
        )
        return done.value, total.value

    def problems(self) -> tuple[list[tuple[str, int | None, int | None, str]], int]:
        """The problems kept, as (file, sample_id, offset, message), and how many were found."""
        kept, total = ctypes.c_uint64(), ctypes.c_uint64()
        _native.check(
            _native.lib.drt_verify_problem_count(
                self.handle, ctypes.byref(kept), ctypes.byref(total)
            )
        )
        found = []
        problem = _native.VerifyProblem()
        for index in range(kept.value):
            _native.check(_native.lib.drt_verify_problem(self.handle, index, ctypes.byref(problem)))
            found.append(
                (
                    ctypes.string_at(problem.file, problem.file_len).decode("utf-8", "replace"),
                    problem.sample_id if problem.has_sample else None,
                    problem.offset if problem.has_offset else None,
                    ctypes.string_at(problem.message, problem.message_len).decode(
                        "utf-8", "replace"
                    ),
                )
            )
        return found, total.value

    def close(self) -> None:
        if self.handle is not None:
            _native.lib.drt_verify_destroy(self.handle)
            self.handle = None

    def __del__(self) -> None:
        if not _native.shutting_down():
            self.close()
