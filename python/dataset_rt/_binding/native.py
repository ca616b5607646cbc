"""Every ctypes declaration of the core's C ABI (``zig/include/dataset_rt.h``).

This module loads the shared library once, declares argtypes/restype for each
function, and turns status codes into Python exceptions carrying the core's
message. Nothing else in the package touches ctypes function pointers.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import platform
import sys
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_int32,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any

from dataset_rt import errors

ABI_VERSION = 4
MAX_WORKERS = 256
"""The core's limit on native worker threads per runtime."""

LIBRARY_ENV = "DATASET_RT_LIBRARY"

COMPRESSION_CODES = {"none": 0, "lz4": 1}
# drt_writer_set_page_cache policies (DRT_PAGE_CACHE_*), by WriterConfig.page_cache.
PAGE_CACHE_CODES = {"auto": 0, "keep": 1, "drop": 2}
ON_CORRUPT_CODES = {"raise": 0, "skip": 1}

OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_INVALID_INPUT = 2
ERR_INVALID_CACHE = 3
ERR_IO = 4
ERR_OUT_OF_MEMORY = 5
ERR_ALREADY_EXISTS = 6
ERR_WRONG_PROCESS = 7
ERR_STATE = 8
ERR_OUT_OF_RANGE = 9


# The exception raised for each status.
_ERROR_TYPES: dict[int, type[errors.DatasetRtError]] = {
    ERR_INVALID_ARGUMENT: errors.InvalidArgumentError,
    ERR_INVALID_INPUT: errors.InvalidInputError,
    ERR_INVALID_CACHE: errors.InvalidCacheError,
    ERR_IO: errors.CacheIOError,
    ERR_OUT_OF_MEMORY: errors.OutOfMemoryError,
    ERR_ALREADY_EXISTS: errors.CacheExistsError,
    ERR_WRONG_PROCESS: errors.WrongProcessError,
    ERR_STATE: errors.StateError,
    ERR_OUT_OF_RANGE: errors.SampleNotFoundError,
}


class WriterOptions(Structure):
    _fields_ = [
        ("max_shard_bytes", c_uint64),
        ("batches_in_flight_max", c_uint32),
        ("compression", c_uint32),
        ("compression_ratio", c_double),
        ("format_version", c_uint32),
        ("reserved", c_uint32),
    ]


class StageStats(Structure):
    _fields_ = [("calls", c_uint64), ("nanoseconds", c_uint64), ("bytes", c_uint64)]


WRITER_STAGES = (
    "ingress_wait",
    "encode",
    "compression",
    "hashing",
    "disk_write",
    "finish_manifest",
    "publish",
)


class WriterStats(Structure):
    _fields_ = [
        ("samples_committed", c_uint64),
        ("payload_bytes_committed", c_uint64),
        ("shard_bytes_committed", c_uint64),
        *((stage, StageStats) for stage in WRITER_STAGES),
    ]


class ReaderOptions(Structure):
    _fields_ = [
        ("seed", c_uint64),
        ("prefetch_size", c_uint32),
        ("shuffle", c_uint32),
        ("validate_cache", c_uint32),
        ("without_replacement", c_uint32),
    ]


class BatchColumn(Structure):
    _fields_ = [
        ("kind", c_uint32),
        ("distinct", c_uint32),
        ("values", c_void_p),
        ("offsets", POINTER(c_uint64)),
        ("bytes", c_void_p),
    ]


KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_STRING = 0, 1, 2, 3


class PushColumn(Structure):
    """``drt_push_column``: one metadata column of a writer batch."""

    _fields_ = [
        ("name", c_void_p),
        ("name_len", c_uint64),
        ("kind", c_uint32),
        ("reserved", c_uint32),
        ("values", c_void_p),
        ("offsets", c_void_p),
        ("bytes", c_void_p),
    ]


class Batch(Structure):
    _fields_ = [
        ("count", c_uint64),
        ("payloads", c_void_p),
        ("payload_offsets", POINTER(c_uint64)),
        ("metadata_json", c_void_p),
        ("metadata_offsets", POINTER(c_uint64)),
        ("cache_ids", POINTER(c_uint64)),
        ("sample_ids", POINTER(c_uint64)),
        ("column_count", c_uint64),
        ("columns", POINTER(BatchColumn)),
        ("packed", c_void_p),
        ("packed_len", c_uint64),
    ]


class Buffer(Structure):
    _fields_ = [("data", c_void_p), ("len", c_uint64)]


class IntColumn(Structure):
    _fields_ = [
        ("values", c_void_p),
        ("validity", c_void_p),
        ("validity_offset", c_uint64),
        ("is_signed", c_uint32),
        ("reserved", c_uint32),
    ]


class FloatColumn(Structure):
    _fields_ = [("values", c_void_p), ("validity", c_void_p), ("validity_offset", c_uint64)]


class StreamPosition(Structure):
    """``drt_stream_position``: where a stream stands (see dataset_rt.h)."""

    _fields_ = [
        ("epoch", c_uint64),
        ("epoch_start", c_uint64),
        ("epoch_len", c_uint64),
        ("position", c_uint64),
    ]


ALGORITHM_NAME_BYTES = 64


class StreamState(Structure):
    """``drt_stream_state``: a position with the fingerprint of its data."""

    _fields_ = [
        ("at", StreamPosition),
        ("seed", c_uint64),
        ("shuffle", c_uint32),
        ("cache_count", c_uint32),
        ("table_sha256", c_uint8 * 32),
        ("algorithm", ctypes.c_char * ALGORITHM_NAME_BYTES),
    ]


class MixEntry(Structure):
    """``drt_mix_entry``: one cache's part of a mix (see dataset_rt.h)."""

    _fields_ = [
        ("cache", c_uint32),
        ("form", c_uint32),
        ("value", ctypes.c_double),
        ("count", c_uint64),
    ]


MIX_REPEAT = 1
MIX_CHOOSE = 2
MIX_PROPORTION = 3


class Share(Structure):
    """``drt_share``: one reader's share of an epoch among ranks and workers."""

    _fields_ = [
        ("batch_size", c_uint64),
        ("rank", c_uint32),
        ("world_size", c_uint32),
        ("worker", c_uint32),
        ("num_workers", c_uint32),
        ("drop_last", c_uint32),
        ("reserved", c_uint32),
    ]


class ShareCounts(Structure):
    _fields_ = [
        ("steps", c_uint64),
        ("rank_samples", c_uint64),
        ("worker_batches", c_uint64),
        ("worker_samples", c_uint64),
    ]


def _library_path() -> Path:
    override = os.environ.get(LIBRARY_ENV)
    if override:
        # Absolute: dlopen searches the system's library path for a name without a slash.
        return Path(override).absolute()
    if sys.platform == "win32":
        name = "dataset_rt.dll"
    elif sys.platform == "darwin":
        name = "libdataset_rt.dylib"
    else:
        name = "libdataset_rt.so"
    return Path(__file__).parent.parent / "_lib" / name


def _load(path: Path) -> ctypes.CDLL:
    if os.environ.get(LIBRARY_ENV):
        remedy = f"point {LIBRARY_ENV} at a library built from this version, or unset it"
    else:
        remedy = f"reinstall the package (or `just build`), or set {LIBRARY_ENV} to a built library"
    if not path.exists():
        raise ImportError(f"the DatasetRT core library is missing: {path} ({remedy})")
    try:
        library = ctypes.CDLL(str(path))
        library.drt_abi_version.argtypes = []
        library.drt_abi_version.restype = c_uint32
        found = library.drt_abi_version()
    except (OSError, AttributeError) as error:
        raise ImportError(
            f"cannot load the DatasetRT core library {path}: {error} (is it a DatasetRT build "
            f"for this platform, {sys.platform} {platform.machine()}? {remedy})"
        ) from error
    if found != ABI_VERSION:
        raise ImportError(
            f"{path} implements C ABI version {found}; this package needs {ABI_VERSION} ({remedy})"
        )
    try:
        _declare(library)
    except AttributeError as error:
        raise ImportError(
            f"the DatasetRT core library {path} is older than this package: {error} ({remedy})"
        ) from error
    return library


class VerifyProblem(Structure):
    _fields_ = [
        ("file", c_void_p),
        ("file_len", c_uint64),
        ("message", c_void_p),
        ("message_len", c_uint64),
        ("sample_id", c_uint64),
        ("offset", c_uint64),
        ("has_sample", c_uint32),
        ("has_offset", c_uint32),
    ]


class OpenShardsStatsStruct(Structure):
    _fields_ = [
        ("open", c_uint64),
        ("max", c_uint64),
        ("opens", c_uint64),
        ("evictions", c_uint64),
    ]


class RemoteStatsStruct(Structure):
    """``drt_remote_stats``: what a remote has fetched."""

    _fields_ = [
        ("fetched_files", c_uint64),
        ("fetched_bytes", c_uint64),
        ("shards_fetched", c_uint64),
        ("shard_bytes_fetched", c_uint64),
        ("refetches", c_uint64),
        ("evicted_shards", c_uint64),
        ("evicted_bytes", c_uint64),
        ("reserved", c_uint64 * 2),
    ]


# drt_fetch_fn: (context, url, url_len, name, name_len, dest_path, dest_path_len, message,
# message_cap) -> DRT_FETCH_*. Pointers as c_void_p: the lengths say where strings end.
FETCH_FN = ctypes.CFUNCTYPE(
    c_int32,
    c_void_p,
    c_void_p,
    c_uint64,
    c_void_p,
    c_uint64,
    c_void_p,
    c_uint64,
    c_void_p,
    c_uint64,
)
FETCH_OK, FETCH_NOT_FOUND, FETCH_FAILED = 0, 1, 2

_Handle = c_void_p  # every drt_* handle (runtime, writer, dataset, iterator, verifier)
# One entry per function of dataset_rt.h: name -> (argtypes, restype).
_SIGNATURES: dict[str, tuple[list[Any], Any]] = {
    "drt_last_error": ([], c_char_p),
    "drt_runtime_create": ([c_uint32, POINTER(_Handle)], c_int32),
    "drt_runtime_destroy": ([_Handle], None),
    "drt_runtime_num_workers": ([_Handle], c_uint32),
    "drt_writer_create": (
        [
            _Handle,
            c_char_p,
            c_uint64,
            c_char_p,
            c_uint64,
            POINTER(WriterOptions),
            POINTER(_Handle),
        ],
        c_int32,
    ),
    "drt_check_source_name": ([c_char_p, c_uint64], c_int32),
    "drt_cache_replace": (
        [c_char_p, c_uint64, c_char_p, c_uint64, c_char_p, c_uint64, POINTER(c_uint32)],
        c_int32,
    ),
    "drt_cache_writer_active": (
        [c_char_p, c_uint64, c_char_p, c_uint64, POINTER(c_uint32)],
        c_int32,
    ),
    "drt_caches_migrate": (
        [c_void_p, c_void_p, c_void_p, c_uint32, c_void_p],
        c_int32,
    ),
    "drt_partitions_commit": (
        [c_char_p, c_uint64, c_char_p, c_uint64, c_void_p, c_void_p, c_void_p, c_void_p]
        + [c_uint32, POINTER(c_uint32)],
        c_int32,
    ),
    "drt_writer_push": (
        [_Handle, c_char_p, c_uint64, POINTER(c_uint64), c_uint64, c_char_p, c_uint64],
        c_int32,
    ),
    "drt_writer_push_borrowed": (
        [_Handle, POINTER(c_void_p), POINTER(c_uint64), c_uint64, c_char_p, c_uint64],
        c_int32,
    ),
    "drt_writer_push_columns": (
        [_Handle, POINTER(c_void_p), POINTER(c_uint64), c_uint64, POINTER(PushColumn), c_uint64],
        c_int32,
    ),
    "drt_writer_push_columns_joined": (
        [_Handle, c_char_p, c_uint64, POINTER(c_uint64), c_uint64]
        + [POINTER(PushColumn), c_uint64],
        c_int32,
    ),
    "drt_writer_finish": ([_Handle], c_int32),
    "drt_writer_set_page_cache": ([_Handle, c_uint32], c_int32),
    "drt_writer_path": ([_Handle], c_char_p),
    "drt_writer_stats_get": ([_Handle, POINTER(WriterStats)], c_int32),
    "drt_writer_destroy": ([_Handle], None),
    "drt_dataset_open": (
        [
            _Handle,
            POINTER(c_char_p),
            POINTER(c_uint64),
            c_uint32,
            POINTER(ReaderOptions),
            POINTER(_Handle),
        ],
        c_int32,
    ),
    "drt_dataset_destroy": ([_Handle], None),
    "drt_dataset_len": ([_Handle, POINTER(c_uint64)], c_int32),
    "drt_dataset_set_epoch_len": ([_Handle, c_uint64], c_int32),
    "drt_buffer_release": ([POINTER(Buffer)], None),
    "drt_dataset_schema_json": ([_Handle, POINTER(POINTER(Buffer))], c_int32),
    "drt_dataset_metadata_arrow": ([_Handle, POINTER(POINTER(Buffer))], c_int32),
    "drt_dataset_metadata_arrow_stream": ([_Handle, c_void_p], c_int32),
    "drt_dataset_set_table": (
        [
            _Handle,
            c_char_p,
            c_uint64,
            POINTER(IntColumn),
            POINTER(IntColumn),
            POINTER(FloatColumn),
        ],
        c_int32,
    ),
    "drt_dataset_cache_sha256s": ([_Handle, c_void_p, c_uint32], c_int32),
    "drt_dataset_cache_ids": ([_Handle, c_void_p, c_uint32], c_int32),
    "drt_dataset_cache_info": ([_Handle, c_uint32, POINTER(POINTER(Buffer))], c_int32),
    "drt_dataset_position": ([_Handle, POINTER(StreamPosition)], c_int32),
    "drt_dataset_state": ([_Handle, POINTER(StreamState)], c_int32),
    "drt_dataset_take_state": ([_Handle, POINTER(StreamState)], c_int32),
    "drt_dataset_load_state": (
        [_Handle, POINTER(StreamState), c_char_p, c_uint32],
        c_int32,
    ),
    "drt_dataset_set_epoch": ([_Handle, c_uint64], c_int32),
    "drt_iterator_create_share": (
        [_Handle, POINTER(Share), c_uint64, c_uint64, POINTER(_Handle)],
        c_int32,
    ),
    "drt_iterator_state": ([_Handle, c_uint64, POINTER(StreamState)], c_int32),
    "drt_iterator_span": ([_Handle, POINTER(StreamState)], c_int32),
    "drt_share_count": ([c_uint64, POINTER(Share), POINTER(ShareCounts)], c_int32),
    "drt_stream_after_steps": (
        [POINTER(StreamPosition), POINTER(Share), c_uint64, POINTER(StreamPosition)],
        c_int32,
    ),
    "drt_iterator_create": ([_Handle, POINTER(_Handle)], c_int32),
    "drt_iterator_create_deferring": ([_Handle, c_uint64, POINTER(_Handle)], c_int32),
    "drt_iterator_create_reads": (
        [_Handle, c_void_p, c_void_p, c_uint64, c_uint64, POINTER(_Handle)],
        c_int32,
    ),
    "drt_iterator_next": ([_Handle, POINTER(POINTER(Batch))], c_int32),
    "drt_batch_deferred": ([POINTER(Batch), POINTER(POINTER(c_uint64))], c_int32),
    "drt_iterator_read_deferred": ([_Handle, POINTER(Batch), c_uint64, c_void_p], c_int32),
    "drt_iterator_read_deferred_batch": ([_Handle, POINTER(Batch), c_void_p], c_int32),
    "drt_batch_release": ([POINTER(Batch)], None),
    "drt_iterator_bytes_held": ([_Handle], c_uint64),
    "drt_iterator_destroy": ([_Handle], None),
    "drt_lz4_compress_bound": ([c_uint64], c_uint64),
    "drt_lz4_compress": (
        [c_char_p, c_uint64, POINTER(c_uint8), c_uint64, POINTER(c_uint64)],
        c_int32,
    ),
    "drt_lz4_decompress": ([c_char_p, c_uint64, POINTER(c_uint8), c_uint64], c_int32),
    "drt_cache_published": ([c_char_p, c_uint64, POINTER(c_uint32)], c_int32),
    "drt_cache_info": ([c_char_p, c_uint64, POINTER(POINTER(Buffer))], c_int32),
    "drt_check_compression": ([c_uint32, c_double], c_int32),
    "drt_dataset_set_mix": ([_Handle, POINTER(MixEntry), c_uint64], c_int32),
    "drt_dataset_mix_counts": ([_Handle, POINTER(c_uint64), c_uint32, POINTER(c_uint32)], c_int32),
    "drt_permutation_rows": (
        [c_uint64, c_uint64, c_uint64, c_uint64, POINTER(c_uint64)],
        c_int32,
    ),
    "drt_sampler_draws": (
        [POINTER(c_double), c_uint64, c_uint64, c_uint64, c_uint64, POINTER(c_uint64)],
        c_int32,
    ),
    "drt_sha256": ([c_char_p, c_uint64, POINTER(c_uint8 * 32)], None),
    "drt_dataset_set_on_corrupt": ([_Handle, c_uint32], c_int32),
    "drt_dataset_set_payloads": ([_Handle, c_uint32], c_int32),
    "drt_batch_mapped": (
        [POINTER(Batch), POINTER(POINTER(c_void_p)), POINTER(POINTER(c_void_p))],
        c_int32,
    ),
    "drt_mapping_retain": ([c_void_p, POINTER(c_void_p), POINTER(c_uint64)], c_int32),
    "drt_mapping_release": ([c_void_p], None),
    "drt_batch_skipped": (
        [POINTER(Batch), POINTER(c_uint64), POINTER(POINTER(c_uint64))],
        c_int32,
    ),
    "drt_verify_create": ([_Handle, c_char_p, c_uint64, POINTER(_Handle)], c_int32),
    "drt_verify_run": ([_Handle], c_int32),
    "drt_verify_progress": ([_Handle, POINTER(c_uint64), POINTER(c_uint64)], c_int32),
    "drt_verify_problem_count": ([_Handle, POINTER(c_uint64), POINTER(c_uint64)], c_int32),
    "drt_verify_problem": ([_Handle, c_uint64, POINTER(VerifyProblem)], c_int32),
    "drt_verify_destroy": ([_Handle], None),
    "drt_set_max_open_shards": ([c_uint32], c_int32),
    "drt_open_shards_stats_get": ([POINTER(OpenShardsStatsStruct)], c_int32),
    "drt_remote_create": ([FETCH_FN, c_void_p, c_char_p, c_uint64, POINTER(_Handle)], c_int32),
    "drt_remote_destroy": ([_Handle], None),
    "drt_verify_create_remote": ([_Handle, c_char_p, c_uint64, _Handle, POINTER(_Handle)], c_int32),
    "drt_remote_stats_get": ([_Handle, POINTER(RemoteStatsStruct)], c_int32),
    "drt_remote_set_budget": ([_Handle, c_uint64], c_int32),
    "drt_remote_set_max_in_flight": ([_Handle, c_uint32], c_int32),
    "drt_remote_set_revalidate": ([_Handle, c_int32], c_int32),
    "drt_remote_pin_version": ([_Handle, c_char_p, c_uint64, c_char_p], c_int32),
    "drt_dataset_open_remote": (
        [
            _Handle,
            POINTER(c_char_p),
            POINTER(c_uint64),
            c_uint32,
            POINTER(ReaderOptions),
            _Handle,
            POINTER(_Handle),
        ],
        c_int32,
    ),
}


def _declare(library: ctypes.CDLL) -> None:
    for name, (argtypes, restype) in _SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes = argtypes
        function.restype = restype


library_path = _library_path()
lib = _load(library_path)

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
# defer_payload_bytes asking for the core's own threshold (DRT_DEFER_DEFAULT).
DEFER_DEFAULT = U64_MAX
# drt_dataset_set_payloads: DRT_PAYLOADS_MAPPED.
PAYLOADS_MAPPED = 1


class _Shutdown:
    """Set when the interpreter exits: handle finalizers then leave native objects
    to the OS, since module teardown may finalize them in any order."""

    started = False


def _mark_shutdown() -> None:
    _Shutdown.started = True


atexit.register(_mark_shutdown)


def shutting_down() -> bool:
    """True once the interpreter has started exiting."""
    return _Shutdown.started


def check(status: int) -> None:
    """Raise the exception for a non-zero status, with the core's message."""
    if status == OK:
        return
    message = (lib.drt_last_error() or b"").decode("utf-8", errors="replace")
    raise _ERROR_TYPES.get(status, errors.StateError)(message or f"status {status}", status)


def share_counts(span_len: int, share: Share) -> ShareCounts:
    """How `span_len` positions divide among `share`'s ranks and workers."""
    counts = ShareCounts()
    check(lib.drt_share_count(span_len, ctypes.byref(share), ctypes.byref(counts)))
    return counts


def stream_after_steps(span: StreamPosition, share: Share, steps: int) -> StreamPosition:
    """The position after `steps` global steps of `share`'s layout from `span`."""
    after = StreamPosition()
    check(
        lib.drt_stream_after_steps(
            ctypes.byref(span), ctypes.byref(share), steps, ctypes.byref(after)
        )
    )
    return after


def check_source_name(encoded_name: bytes) -> None:
    """Raise `ValueError` unless the core accepts the source name (UTF-8 bytes)."""
    check(lib.drt_check_source_name(encoded_name, len(encoded_name)))


def replace_cache(base: str | os.PathLike[str], name: str, fresh: str) -> bool:
    """Publish the complete cache at `base`/`fresh` (inside `base`/tmp) as `base`/`name`,
    replacing the cache there under the name's writer lock (the core's `drt_cache_replace`:
    old aside, new in, fsync, old removed). True when a cache was replaced."""
    base_bytes = os.fsencode(base)
    name_bytes = name.encode("utf-8")
    fresh_bytes = fresh.encode("utf-8")
    replaced = c_uint32(0)
    check(
        lib.drt_cache_replace(
            base_bytes,
            len(base_bytes),
            name_bytes,
            len(name_bytes),
            fresh_bytes,
            len(fresh_bytes),
            ctypes.byref(replaced),
        )
    )
    return bool(replaced.value)


def writer_active(base: str | os.PathLike[str], name: str) -> bool:
    """True when a writer of the cache `name` under `base` holds its lock right now (the
    core's `drt_cache_writer_active`: a shared lock tried on `base`/tmp/`name`.lock and
    dropped at once). No lock file is False. An invalid name raises
    `errors.InvalidArgumentError`, a lock file that cannot be opened `errors.CacheIOError`."""
    base_bytes = os.fsencode(base)
    name_bytes = os.fsencode(name)
    active = c_uint32(0)
    check(
        lib.drt_cache_writer_active(
            base_bytes, len(base_bytes), name_bytes, len(name_bytes), ctypes.byref(active)
        )
    )
    return bool(active.value)


MIGRATE_OUTCOMES = ("updated", "unchanged", "not reached")
"""What `drt_caches_migrate` did to each cache, by its DRT_MIGRATE_* code."""


def migrate_caches(paths: list[Path], cache_ids: list[int]) -> list[str]:
    """Make the caches at `paths` format 3 with `cache_ids` (the core's
    `drt_caches_migrate`); each cache's outcome, from `MIGRATE_OUTCOMES`. On a
    failure the exception's message also names the caches updated before it."""
    encoded = [os.fsencode(path) for path in paths]
    count = len(encoded)
    array = (ctypes.c_char_p * count)(*encoded)
    lengths = (c_uint64 * count)(*map(len, encoded))
    ids = (c_uint64 * count)(*cache_ids)
    outcomes = (c_uint32 * count)()
    status = lib.drt_caches_migrate(array, lengths, ids, count, outcomes)
    done = [MIGRATE_OUTCOMES[outcome] for outcome in outcomes]
    try:
        check(status)
    except errors.DatasetRtError as error:
        updated = [
            str(path) for path, outcome in zip(paths, done, strict=True) if outcome == "updated"
        ]
        if updated:
            error.args = (
                f"{error.args[0]}; updated before the failure: {', '.join(updated)} "
                "(running the migration again completes it)",
                *error.args[1:],
            )
        raise
    return done


def check_compression(algo: str, ratio: float) -> None:
    """Raise `ValueError` unless `ratio` fits the codec (the core's rule)."""
    check(lib.drt_check_compression(COMPRESSION_CODES[algo], ratio))


def cache_published(path: os.PathLike[str] | str) -> bool:
    """True when `path` is a published cache (the core's rule: it holds its manifest)."""
    encoded = os.fsencode(path)
    published = c_uint32()
    check(lib.drt_cache_published(encoded, len(encoded), ctypes.byref(published)))
    return bool(published.value)


def take_buffer(function: object, *arguments: object) -> bytes:
    """Call a ``drt_*(arguments..., drt_buffer **out)`` function and return a copy of the bytes."""
    pointer = POINTER(Buffer)()
    check(function(*arguments, ctypes.byref(pointer)))  # type: ignore[operator]
    try:
        buffer = pointer.contents
        return ctypes.string_at(buffer.data, buffer.len) if buffer.len else b""
    finally:
        lib.drt_buffer_release(pointer)


def lz4_compress(data: bytes) -> bytes:
    """Compress `data` into one LZ4 block with the core's codec."""
    capacity = lib.drt_lz4_compress_bound(len(data))
    out = (c_uint8 * max(capacity, 1))()
    written = c_uint64()
    check(lib.drt_lz4_compress(data, len(data), out, capacity, ctypes.byref(written)))
    return bytes(out[: written.value])


def lz4_decompress(block: bytes, uncompressed_len: int) -> bytes:
    """Decode one LZ4 block that must expand to exactly `uncompressed_len` bytes."""
    out = (c_uint8 * max(uncompressed_len, 1))()
    check(lib.drt_lz4_decompress(block, len(block), out, uncompressed_len))
    return bytes(out[:uncompressed_len])


def sha256(data: bytes) -> bytes:
    """SHA-256 digest computed by the core."""
    out = (c_uint8 * 32)()
    lib.drt_sha256(data, len(data), ctypes.byref(out))
    return bytes(out)


# A bytes object whose contents the core writes before anyone else sees it: the
# one way to hand out a payload as `bytes` with a single copy from the file.
_new_bytes = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, ctypes.c_ssize_t)(
    ("PyBytes_FromStringAndSize", ctypes.pythonapi)
)


def _bytes_data_offset() -> int:
    probe = b"dataset_rt"
    # c_char_p built from bytes points at the object's own buffer.
    offset = ctypes.cast(c_char_p(probe), c_void_p).value - id(probe)  # type: ignore[operator]
    if ctypes.string_at(id(probe) + offset, len(probe)) != probe:
        raise ImportError("dataset_rt: cannot locate the data of a bytes object")
    return offset


BYTES_DATA_OFFSET = _bytes_data_offset()


def bytes_address(data: bytes) -> int:
    """Where a bytes object's data are (valid while the object lives)."""
    return id(data) + BYTES_DATA_OFFSET


def unfilled_bytes(size: int) -> bytes:
    """A new ``bytes`` of ``size`` bytes with undefined contents, to be filled in
    place at ``bytes_address(result)`` before it is shared."""
    return _new_bytes(None, size)  # type: ignore[no-any-return]


class RuntimeHandle:
    """Owns a native pool; destroyed when the last runtime, dataset or
    iterator holding it is gone, so no native object outlives its threads."""

    def __init__(self, num_workers: int) -> None:
        handle = c_void_p()
        check(lib.drt_runtime_create(num_workers, ctypes.byref(handle)))
        self.value = handle
        self.num_workers = num_workers
        self.process_id = os.getpid()

    def owned_here(self) -> bool:
        """False in a child forked after the pool started: its threads are the parent's."""
        return self.process_id == os.getpid()

    def __del__(self) -> None:
        # In a forked child the threads do not exist; the core's destroy knows that.
        if getattr(self, "value", None) and not shutting_down():
            lib.drt_runtime_destroy(self.value)
            self.value = ctypes.c_void_p()
