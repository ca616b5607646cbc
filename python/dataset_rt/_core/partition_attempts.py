"""The pieces of a partition's attempt that local and ``s3://`` bases share: its id,
its cache written by the ordinary writer, its pointer's text, and its failure."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from dataset_rt import errors
from dataset_rt._binding.partitions import SealedPart
from dataset_rt._binding.writer import NativeWriter
from dataset_rt._config import WriterConfig
from dataset_rt._core.cpus import usable_cpu_count
from dataset_rt._core.profiling import WriterProfile
from dataset_rt._core.progress import WriteProgress
from dataset_rt._core.runtime import DatasetRuntime
from dataset_rt._core.writing import SampleError, write_source
from dataset_rt._records import CacheInput

COMMITTED = "committed.json"
"""The record of a published commit in the partitions folder of its name."""

_NATIVE_THREADS_MAX = 4  # a temporary runtime's threads (a partition is one of many tasks)


def attempt_id() -> str:
    """A new attempt's id, unique across processes and machines."""
    return f"{os.getpid()}-{time.time_ns():x}-{secrets.token_hex(4)}"


def part_prefix(number: int) -> str:
    """The start of the names of partition `number`'s attempts and pointer."""
    return f"part-{number:06d}."


def pointer_text(attempt: str, sample_count: int, digest: str) -> bytes:
    """A pointer: the sealed attempt, its sample count, its manifest's SHA-256."""
    fields = {"attempt": attempt, "sample_count": sample_count, "manifest_sha256": digest}
    return json.dumps(fields).encode()


def pointer_part(text: bytes, number: int, where: str) -> SealedPart:
    """The partition a pointer's `text` (read from `where`) seals."""
    try:
        pointer = json.loads(text)
        attempt, count, digest = (
            pointer["attempt"],
            pointer["sample_count"],
            pointer["manifest_sha256"],
        )
        if not isinstance(attempt, str) or not isinstance(count, int) or count < 0:
            raise ValueError("bad field types")
        sha = bytes.fromhex(digest) if count > 0 else bytes(32)
        if len(sha) != 32:
            raise ValueError("manifest_sha256 is not 32 bytes")
    except (ValueError, KeyError, TypeError) as error:
        raise errors.InvalidCacheError(
            f"partition {number}: its pointer {where} is damaged ({error})", 3
        ) from error
    return SealedPart(attempt if count > 0 else None, count, sha)


def parts_digest(parts: Iterable[SealedPart]) -> str:
    """The hex SHA-256 naming the partitions a commit joins, as ``committed.json``'s
    ``parts_sha256`` records it (docs/storage-format.md, "Partitions"; the core's
    `partsDigest`): over each partition in order, ``<attempt>\\n<sample_count>\\n
    <manifest_sha256, hex>\\n``, the attempt empty for a partition of no samples."""
    digest = hashlib.sha256()
    for part in parts:
        fields = (part.attempt or "", str(part.sample_count), part.manifest_sha256.hex())
        digest.update("".join(f"{field}\n" for field in fields).encode())
    return digest.hexdigest()


def committed_text(manifest: bytes, parts: Iterable[SealedPart]) -> bytes:
    """``committed.json`` for a published `manifest` and the partitions joined."""
    return _committed_prefix(manifest) + f'{parts_digest(parts)}"}}'.encode()


def _committed_prefix(manifest: bytes) -> bytes:
    """``committed.json`` up to the partitions' digest."""
    manifest_sha256 = hashlib.sha256(manifest).hexdigest()
    return f'{{"manifest_sha256": "{manifest_sha256}", "parts_sha256": "'.encode()


def published_by_commit(
    committed: bytes | None, manifest: bytes, parts: list[SealedPart] | None
) -> bool:
    """Whether `committed` (``committed.json``) records that a commit of `parts`
    published `manifest` (the core's rule): with `parts` None (not known: the
    pointers were removed after a commit), and for a ``committed.json`` of an
    earlier version (the manifest's digest only), the manifest decides."""
    if committed is None:
        return False
    legacy = f'{{"manifest_sha256": "{hashlib.sha256(manifest).hexdigest()}"}}'.encode()
    if committed == legacy:
        return True
    if parts is not None:
        return committed == committed_text(manifest, parts)
    prefix = _committed_prefix(manifest)
    return committed.startswith(prefix) and len(committed) == len(prefix) + 64 + len(b'"}')


def pointers_problem(
    missing: list[int], count: int, published: bool, shown: str, where: str
) -> str | None:
    """Why a commit of `count` partitions stops before the core, given the numbers
    of those with no pointer (`missing`) and whether a cache is at the name
    (`shown`): some pointers missing there (another build, not all written), or
    any missing where none is; None when the commit goes on (every pointer, or
    none at a published name: removed after the commit that published it)."""
    if published and 0 < len(missing) < count:
        return f"cache path already exists: {shown}"
    if missing and not published:
        return f"partition {missing[0]} of {count} was not written (no sealed attempt in {where})"
    return None


def failure(number: int, name: str, error: Exception) -> errors.CacheWriteFailedError:
    """The error of partition `number` that `error` stopped (chain it as the cause)."""
    return errors.CacheWriteFailedError(
        f"partition {number} of cache {name!r} was not written: {_describe(error)}",
        error.status if isinstance(error, errors.DatasetRtError) else None,
    )


class _Samples:
    """The samples of a partition as the writer's source."""

    def __init__(self, name: str, samples: Iterator[CacheInput]) -> None:
        self.name = name
        self._samples = samples

    def __iter__(self) -> Iterator[CacheInput]:
        return self._samples


def write_attempt(
    samples: Iterable[CacheInput],
    attempt_dir: Path,
    name: str,
    config: WriterConfig,
    runtime: DatasetRuntime | None,
) -> tuple[int, str]:
    """Write the samples as the cache `name` inside `attempt_dir`; its sample count
    and its manifest's SHA-256 (0 and "" for no samples: no cache is written)."""
    iterator = iter(samples)
    end = object()
    first = next(iterator, end)
    if first is end:
        return 0, ""
    owned = runtime is None
    live = runtime or DatasetRuntime(num_workers=min(_NATIVE_THREADS_MAX, usable_cpu_count()))
    writer = NativeWriter()
    try:
        writer.create(live._live_handle(), attempt_dir, name, config)
        source = _Samples(name, itertools.chain([first], iterator))  # type: ignore[list-item]
        progress = WriteProgress(config.show_progress, 1)
        try:
            path = write_source(writer, source, config, progress, WriterProfile(config.profiler))
        finally:
            progress.end_line()
    finally:
        writer.destroy()
        if owned:
            live.close()
    text = (path / "manifest.json").read_bytes()
    return int(json.loads(text)["sample_count"]), hashlib.sha256(text).hexdigest()


def _describe(error: Exception) -> str:
    if isinstance(error, (SampleError, errors.DatasetRtError)):
        return str(error)
    return f"source raised {type(error).__name__}: {error}"
