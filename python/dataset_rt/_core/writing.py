"""Pulling sources and handing their samples to the core's writer in batches.

Python's part is to iterate the source, check the shape of each sample (bytes
payload, mapping with string keys) and serialize a batch: the payloads joined
into one buffer and the metadata as one JSON array. Everything else — schema
inference and enforcement, canonical JSON, framing, compression, hashing,
shard rotation, publication — happens in the core.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.metadata_columns import to_columns
from dataset_rt._binding.native import RuntimeHandle
from dataset_rt._binding.writer import NativeWriter, SerializedBatch, payload_lengths
from dataset_rt._config import WriterConfig
from dataset_rt._core.profiling import WriterProfile
from dataset_rt._core.progress import WriteProgress
from dataset_rt._records import (
    CacheInput,
    CacheSource,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
)

# A batch closes at whichever bound it reaches first. Each batch is a pool job,
# a commit and a wake-up of this thread, so large payloads go in a few MiB at a
# time rather than one per batch.
_BATCH_SAMPLES_MIN = 1024
_BATCH_BYTES_MAX = 4 * 1024 * 1024

# Raw UTF-8 (not \u escapes) so that a lone surrogate reaches the core as invalid
# UTF-8 and is rejected there, instead of being paired up by the JSON escape rules.
_encode_metadata = json.JSONEncoder(
    ensure_ascii=False, allow_nan=True, check_circular=False, separators=(",", ":")
).encode


class SampleError(ValueError):
    """A sample of a source has the wrong shape; the message names it."""


# `from_cache_sources`' answer for a target that is already a published cache.
Reuse = Callable[[str, Path], CacheWriteResult]


def source_list(sources: CacheSource | Sequence[CacheSource]) -> list[CacheSource]:
    """Accept one source or a list/tuple of sources."""
    if isinstance(sources, (list, tuple)):
        return list(sources)
    return [sources]  # type: ignore[list-item]


def source_name(source: object, position: int) -> str:
    """The source's name; `SampleError` when it has none or it is not a str."""
    try:
        name = source.name  # type: ignore[attr-defined]
    except AttributeError:
        raise SampleError(f"source {position} has no 'name' attribute") from None
    if not isinstance(name, str):
        raise SampleError(f"source {position} name must be a str, got {type(name).__name__}")
    return name


def invalid_source_label(position: int) -> str:
    """How a source whose name is unusable is labelled in its result (as dataset-rt 0.2.4 does)."""
    return f"source[{position}]"


def check_unique_targets(names: Iterable[str], base_cache_dir: Path | str) -> None:
    """Reject two sources that would write the same cache path, before writing anything
    (`base_cache_dir`: a local folder, or the URL of a remote base as a str)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            target = (
                base_cache_dir / name
                if isinstance(base_cache_dir, Path)
                else f"{base_cache_dir}/{name}"
            )
            raise errors.InvalidArgumentError(f"duplicate generated cache path: {target}")
        seen.add(name)


def _payload_bytes(data: object, index: int) -> bytes:
    """The payload as immutable bytes, copied now: later edits of a reused buffer cannot leak in."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray):
        return bytes(data)
    if isinstance(data, memoryview):
        if not data.c_contiguous:
            raise SampleError(f"sample {index}: payload memoryview must be C-contiguous")
        return data.tobytes()
    raise SampleError(  # "data must be bytes-like": dataset-rt 0.2.4's phrase
        f"sample {index}: data must be bytes-like: the payload must be bytes, bytearray "
        f"or memoryview, got {type(data).__name__}"
    )


def _metadata_copy(metadata: object, index: int) -> dict[str, Any]:
    """A private dict copy of a metadata mapping that is not a dict (its keys
    are checked with its batch, `_serialize`, like a dict's)."""
    if not isinstance(metadata, Mapping):
        raise SampleError(
            f"sample {index}: metadata must be a mapping of str to bool/int/float/str, "
            f"got {type(metadata).__name__}"
        )
    return dict(metadata)


def _check_keys(metadata: Mapping[Any, Any], index: int) -> None:
    for key in metadata:
        if not isinstance(key, str):
            raise SampleError(
                f"sample {index}: metadata key {key!r} must be a str, got {type(key).__name__}"
            )


def _describe_unserializable(metadatas: list[dict[str, Any]], first_index: int) -> str:
    for offset, metadata in enumerate(metadatas):
        for key, value in metadata.items():
            field = f"sample {first_index + offset}: metadata field '{key}'"
            if type(value) is not bool and isinstance(value, int):
                if not -(2**63) <= value < 2**63:
                    return f"{field} integer {_int_text(value)} is outside the signed 64-bit range"
            elif not isinstance(value, (bool, str, float)) or not _encodes(value):
                return f"{field} must be bool, int, float or str, got {type(value).__name__}"
    return (
        f"samples {first_index}..{first_index + len(metadatas) - 1}: metadata cannot be serialized"
    )


def _int_text(value: int) -> str:
    """The int's first digits (as the core shows them), or its size where Python
    refuses to print that many digits."""
    try:
        digits = str(value)
    except ValueError:
        return f"of {value.bit_length()} bits"
    return digits if len(digits) <= 40 else digits[:40] + "..."


def _encodes(value: object) -> bool:
    try:
        _encode_metadata(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _serialize(
    writer: NativeWriter,
    payloads: list[bytes],
    metadatas: list[dict[str, Any]],
    first_index: int,
    payload_bytes: int,
) -> SerializedBatch:
    """One batch for the core: (payloads, lengths, count, metadata by column or as a
    JSON array, `payload_bytes`: the payloads' bytes in all, counted by the caller)."""
    count = len(payloads)
    lengths = payload_lengths(payloads)
    schema = writer.column_schema(metadatas[0])
    # Same number of keys as the schema in every sample, and (to_columns) each of
    # the schema's keys present: exactly the schema's keys, all str.
    if schema is not None and set(map(len, metadatas)) == {len(schema)}:
        columns = to_columns(metadatas, schema)
        if columns is not None:
            return payloads, lengths, count, columns, payload_bytes
    for offset, metadata in enumerate(metadatas):
        _check_keys(metadata, first_index + offset)  # JSON would turn 1 into "1"
    try:
        encoded = _encode_metadata(metadatas).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        raise SampleError(_describe_unserializable(metadatas, first_index)) from None
    return payloads, lengths, count, encoded, payload_bytes


def write_source(
    writer: NativeWriter,
    source: CacheSource,
    config: WriterConfig,
    progress: WriteProgress,
    profile: WriterProfile,
) -> Path:
    """Pull every sample of `source` into `writer` and publish the cache.

    The loop is the writer's Python hot path: per sample it checks the shape and
    takes private copies (the source may reuse its dict or buffer); everything
    else happens per batch.
    """
    samples_max = max(config.prefetch_size, _BATCH_SAMPLES_MIN)
    timed = profile.enabled
    clock = time.perf_counter
    payloads: list[bytes] = []
    metadatas: list[dict[str, Any]] = []
    add_payload, add_metadata = payloads.append, metadatas.append
    batch_bytes = 0
    first_index = 0
    index = 0
    batch_end = samples_max  # the index at which the current batch is full
    iterator = iter(source)
    started = clock() if timed else 0.0
    pulling = True  # whether an exception comes from the source's `next()` (kept when timed)
    try:
        for item in iterator:
            if timed:
                profile.add("python_next", clock() - started)
                started, pulling = clock(), False
            if type(item) is not CacheInput and not (isinstance(item, tuple) and len(item) == 2):
                raise SampleError(
                    f"sample {index}: expected CacheInput(data, metadata), "
                    f"got {type(item).__name__}"
                )
            data, metadata = item
            payload = data if type(data) is bytes else _payload_bytes(data, index)
            add_payload(payload)
            add_metadata(
                metadata.copy() if type(metadata) is dict else _metadata_copy(metadata, index)
            )
            batch_bytes += len(payload)
            index += 1
            if index == batch_end or batch_bytes >= _BATCH_BYTES_MAX:
                batch = _serialize(writer, payloads, metadatas, first_index, batch_bytes)
                pushing_seconds = _push(writer, batch, profile, progress)
                # The native push (and any wait for capacity) is the core's
                # ingress_wait, not Python's.
                started += pushing_seconds
                first_index, batch_end = index, index + samples_max
                payloads, metadatas, batch_bytes = [], [], 0
                add_payload, add_metadata = payloads.append, metadatas.append
            if timed:
                profile.add("python_extract", clock() - started, len(payload))
                started, pulling = clock(), True
    except BaseException:
        # The call that raised (KeyboardInterrupt included) is one more `next()`.
        if timed and pulling:
            profile.add("python_next", clock() - started)
        raise
    if timed:  # the call that ended the source
        profile.add("python_next", clock() - started)
    if payloads:
        batch = _serialize(writer, payloads, metadatas, first_index, batch_bytes)
        _push(writer, batch, profile, progress)
    path = writer.finish()
    stats = writer.stats()
    progress.finish_source(stats.samples_committed, stats.payload_bytes_committed)
    return path


def _push(
    writer: NativeWriter,
    batch: SerializedBatch,
    profile: WriterProfile,
    progress: WriteProgress,
) -> float:
    """Hand one batch to the core; returns the seconds the call took when profiling."""
    started = time.perf_counter() if profile.enabled else 0.0
    writer.push(batch)
    seconds = time.perf_counter() - started if profile.enabled else 0.0
    stats = writer.stats()
    writer.release_committed(stats.samples_committed)
    progress.update(stats.samples_committed, stats.payload_bytes_committed)
    return seconds


def write_sources(
    runtime_handle: RuntimeHandle,
    sources: list[CacheSource],
    names: list[str | CacheWriteError],
    base_cache_dir: Path,
    config: WriterConfig,
    *,
    reuse: Reuse | None = None,
) -> list[CacheWriteResult]:
    """Write each source in order; failures become `CacheWriteError` results.

    `reuse(name, path)` may return a result for a target that already holds a
    cache (used by `from_cache_sources`); without it such a target is an error.
    """
    results: list[CacheWriteResult] = []
    progress = WriteProgress(config.show_progress, len(sources))
    profile = WriterProfile(config.profiler)
    try:
        for position, (source, name) in enumerate(zip(sources, names, strict=True)):
            if isinstance(name, CacheWriteError):
                progress.skip_source()
                results.append(name)
                continue
            done_before = progress.sources_done
            result = write_one(
                runtime_handle,
                source,
                (position, name),
                base_cache_dir,
                config,
                progress,
                profile,
                reuse,
            )
            if progress.sources_done == done_before:  # reused or failed: still one source done
                progress.skip_source()
            results.append(result)
    finally:
        progress.end_line()
        profile.write()
    return results


def write_one(
    runtime_handle: RuntimeHandle,
    source: CacheSource,
    position_and_name: tuple[int, str],
    base_cache_dir: Path,
    config: WriterConfig,
    progress: WriteProgress,
    profile: WriterProfile,
    reuse: Reuse | None,
) -> CacheWriteResult:
    """Write one source with a writer of its own (in this process); every failure
    of the source becomes its `CacheWriteError`."""
    position, name = position_and_name
    settled = settle_before_writing(position, name, base_cache_dir, reuse)
    if settled is not None:
        return settled
    target = base_cache_dir / name
    progress.start_source(name)
    writer = NativeWriter()
    profiled = False  # set once this source has its own entry in the profile
    try:
        try:
            writer.create(runtime_handle, base_cache_dir, name, config)
        except errors.CacheExistsError as error:
            if reuse is not None:
                return reuse(name, target)
            return CacheWriteError(name, str(error))
        except errors.DatasetRtError as error:
            return CacheWriteError(name, str(error))
        # Profiled from here: a source whose writer could not be created wrote nothing.
        profile.start_source(name)
        profiled = True
        path = write_source(writer, source, config, progress, profile)
        return CacheWriteSuccess(name, path)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:  # noqa: BLE001 - a failing source must not stop the others
        return CacheWriteError(name, _describe_failure(error))
    finally:
        try:
            if profiled and profile.enabled and writer.usable():
                profile.finish_source(writer.stats())
        finally:
            writer.destroy()  # also releases the target's lock: never skipped


def settle_before_writing(
    position: int, name: str, base_cache_dir: Path, reuse: Reuse | None
) -> CacheWriteResult | None:
    """The result of a source that needs no writer: an unusable name, or (with
    `reuse`) a target that is already a published cache; None otherwise."""
    try:
        _native.check_source_name(name.encode("utf-8", "surrogatepass"))
    except errors.DatasetRtError as error:
        return CacheWriteError(invalid_source_label(position), str(error))
    target = base_cache_dir / name
    if reuse is not None and _native.cache_published(target):
        return reuse(name, target)
    return None


def _describe_failure(error: Exception) -> str:
    if isinstance(error, (SampleError, errors.DatasetRtError)):
        return str(error)
    return f"source raised {type(error).__name__}: {error}"
