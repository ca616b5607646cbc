"""Caches built in partitions, by any process that sees the base folder
(`write_partition`), and published by one commit (`commit_partitions`).

Layout under ``<base>/tmp/partitions/<name>/`` (docs/storage-format.md,
"Partitions"): each attempt writes an ordinary cache named `name` into its own
folder ``part-NNNNNN.<attempt>/``; once published there, the attempt is sealed
by atomically replacing the pointer ``part-NNNNNN.json`` (the attempt, its
sample count, its manifest's SHA-256). Other attempts of the partition are
left alone: one may still be writing, or about to seal (speculative execution);
the commit, or `discard_partitions`, removes every attempt. The commit reads the
pointers and hands them to the core (`drt_partitions_commit`), which verifies
and joins the partitions and publishes ``<base>/<name>``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.partitions import SealedPart
from dataset_rt._binding.partitions import commit_partitions as _commit
from dataset_rt._config import RemoteConfig, WriterConfig
from dataset_rt._core.partition_attempts import (
    COMMITTED,
    attempt_id,
    failure,
    part_prefix,
    pointer_part,
    pointer_text,
    pointers_problem,
    write_attempt,
)
from dataset_rt._core.remote_partitions import (
    commit_partitions_to_url,
    discard_partitions_at_url,
    write_partition_to_url,
)
from dataset_rt._core.runtime import DatasetRuntime
from dataset_rt._records import (
    CacheInput,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
    PartitionResult,
)
from dataset_rt._remote.url import is_remote


def partitions_folder(base: str | os.PathLike[str], name: str) -> Path:
    """Where the partitions of the cache `name` under `base` are staged."""
    return Path(base) / "tmp" / "partitions" / name


def write_partition(
    samples: Iterable[CacheInput],
    base: str | os.PathLike[str],
    name: str,
    *,
    partition: int,
    writer_config: WriterConfig | None = None,
    runtime: DatasetRuntime | None = None,
    remote: RemoteConfig | None = None,
) -> PartitionResult:
    """Write `samples` as partition `partition` of the cache `name` under `base`,
    in the staging area ``base/tmp/partitions/name/`` that no reader sees, and seal
    it; `commit_partitions` publishes the cache once every partition is written.

    Any process that sees `base` (a shared file system) may write any partition.
    Writing a partition again (a retried task, or two at once: speculative
    execution) seals the new attempt in place of the earlier one; the one sealed
    last is committed, and the commit removes the others. An empty partition is
    fine: it adds no samples. `runtime` (None: a temporary one with up to 4
    threads) runs the writer; `writer_config` (None: the defaults) sets shards,
    compression and the format version, which all partitions must share
    (`num_processes` does not apply: the partition is written here).

    `base` may be an ``s3://bucket/prefix`` URL: the partition is written in the
    staging area of ``remote.local_dir`` (`RemoteConfig`; None: its defaults),
    uploaded under ``<base>/tmp/partitions/name/`` and sealed there; `path` is then
    the local folder it was written in, removed once uploaded. Local bases ignore
    `remote`.

    Raises `errors.CacheWriteFailedError` when the samples cannot be written (the
    message names the partition and the cause, chained as ``__cause__``); nothing
    of the attempt is left then and no earlier attempt is replaced.

    Examples:
        >>> parts = [
        ...     dataset_rt.write_partition(Squares(3), "caches", "squares", partition=0),
        ...     dataset_rt.write_partition(Squares(2), "caches", "squares", partition=1),
        ... ]
        >>> [part.sample_count for part in parts]
        [3, 2]
        >>> dataset_rt.commit_partitions("caches", "squares", parts)
        CacheWriteSuccess(source_name='squares', path=PosixPath('caches/squares'))
    """
    config = _writer_config(writer_config)
    number = _partition_number(partition)
    _check_name(name)
    if runtime is not None and not isinstance(runtime, DatasetRuntime):
        raise TypeError(f"runtime must be a DatasetRuntime or None, got {type(runtime).__name__}")
    _check_remote(base, remote)
    if is_remote(base):
        url = str(base)
        return write_partition_to_url(
            samples, url, name, number, config, runtime, remote or RemoteConfig()
        )
    folder = partitions_folder(os.fspath(base), name)
    folder.mkdir(parents=True, exist_ok=True)
    attempt = attempt_id()
    attempt_dir = folder / f"{part_prefix(number)}{attempt}"
    attempt_dir.mkdir()
    try:
        sample_count, digest = write_attempt(samples, attempt_dir, name, config, runtime)
        if sample_count == 0:
            shutil.rmtree(attempt_dir)
        _seal(folder, number, attempt, sample_count, digest)
    except BaseException as error:
        shutil.rmtree(attempt_dir, ignore_errors=True)
        if not isinstance(error, Exception):
            raise
        raise failure(number, name, error) from error
    return PartitionResult(name, number, sample_count, attempt, attempt_dir, digest)


def commit_partitions(
    base: str | os.PathLike[str],
    name: str,
    partitions: Sequence[PartitionResult] | int,
    *,
    remote: RemoteConfig | None = None,
) -> CacheWriteResult:
    """Publish the cache ``base/name`` made of the written partitions, in ascending
    partition order: its sample ids run through partition 0, then 1, and so on.

    `partitions` is the `PartitionResult` of every partition (each number from 0
    to ``len(partitions) - 1`` once) or their count. For each partition the
    latest sealed attempt is used. The core verifies every partition (manifest,
    index, checksums and metadata table against their SHA-256; shards were hashed
    when written), joins the index, record checksums and metadata tables, moves
    the shard files into place (no payload is copied), writes the manifest last
    and publishes the cache with one rename. The result equals one `write_cache`
    of the same samples in the same order; only shard boundaries may differ.

    Returns `CacheWriteSuccess`, also when called again after it published, or
    `CacheWriteError` naming the problem: a partition not written (its number),
    partitions whose metadata schemas differ (both numbers and the column), an
    existing cache at ``base/name`` (``cache path already exists``), also one an
    earlier build of the name published from other partitions. Nothing is
    published then. Arguments of the wrong type or value raise
    `TypeError`/`ValueError`.

    At an ``s3://`` base the core joins and verifies the partitions' small files
    fetched into ``remote.local_dir``, the shards are copied to their final keys
    inside the store (CopyObject: no payload is downloaded), and the manifest is
    put last, only if no writer has published the name; the result is a
    `CacheUploadSuccess` (outcome ``"uploaded"``, or ``"reused"`` when an earlier
    commit published it).

    Examples:
        >>> dataset_rt.write_partition(Squares(4), "caches", "squares", partition=0).sample_count
        4
        >>> dataset_rt.commit_partitions("caches", "squares", 2).message
        'partition 1 of 2 was not written (no sealed attempt in caches/tmp/partitions/squares)'
        >>> _ = dataset_rt.write_partition([], "caches", "squares", partition=1)
        >>> dataset_rt.commit_partitions("caches", "squares", 2)
        CacheWriteSuccess(source_name='squares', path=PosixPath('caches/squares'))
    """
    _check_name(name)
    _check_remote(base, remote)
    count = _partition_count(partitions, name)
    if is_remote(base):
        return commit_partitions_to_url(str(base), name, count, remote or RemoteConfig())
    local_base = os.fspath(base)
    folder = partitions_folder(local_base, name)
    target = Path(base) / name
    try:
        pointers = [_read_pointer(folder, number) for number in range(count)]
    except errors.InvalidCacheError as error:
        return CacheWriteError(name, str(error))
    missing = [number for number, part in enumerate(pointers) if part is None]
    problem = pointers_problem(missing, count, os.path.lexists(target), str(target), str(folder))
    if problem is not None:
        return CacheWriteError(name, problem)
    # No pointer at all, and a cache there: the core tells whether a commit
    # published it (its clean-up removed the pointers); the parts are not known.
    sealed = [part or SealedPart(None, 0, bytes(32)) for part in pointers]
    try:
        _commit(local_base, name, sealed)
    except errors.DatasetRtError as error:
        return CacheWriteError(name, str(error))
    _clean(folder)
    return CacheWriteSuccess(name, target)


def discard_partitions(
    base: str | os.PathLike[str], name: str, *, remote: RemoteConfig | None = None
) -> None:
    """Remove every partition written for the cache `name` under `base` (pointers
    and attempts, sealed or not): what a build that failed calls (Ray's
    ``on_write_failed``) so that a later build of the name starts from nothing.

    A cache published at ``base/name`` is not touched, nor is the record that lets
    `commit_partitions` answer for it again. Call it only when no task of the build
    still writes: a partition written after it is kept. `base` may be an
    ``s3://`` URL (its keys are deleted; `remote` as for `write_partition`).

    Examples:
        >>> _ = dataset_rt.write_partition(Squares(3), "caches", "squares", partition=0)
        >>> dataset_rt.discard_partitions("caches", "squares")
        >>> dataset_rt.commit_partitions("caches", "squares", 1).message
        'partition 0 of 1 was not written (no sealed attempt in caches/tmp/partitions/squares)'
    """
    _check_name(name)
    _check_remote(base, remote)
    if is_remote(base):
        discard_partitions_at_url(str(base), name, remote or RemoteConfig())
        return
    _clean(partitions_folder(os.fspath(base), name))


def _seal(folder: Path, number: int, attempt: str, sample_count: int, digest: str) -> None:
    """Atomically make `attempt` the partition's sealed attempt (temporary file,
    fsync, rename over the pointer, fsync of the folder)."""
    text = pointer_text(attempt, sample_count, digest)
    temporary = folder / f".{attempt}.pointer"
    with open(temporary, "wb") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, folder / f"{part_prefix(number)}json")
    _sync_dir(folder)


def _read_pointer(folder: Path, number: int) -> SealedPart | None:
    """The sealed attempt of partition `number`; None when there is none."""
    path = folder / f"{part_prefix(number)}json"
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    return pointer_part(text, number, str(path))


def _clean(folder: Path) -> None:
    """Remove pointers and attempts (after a commit: the leftovers, unsealed,
    killed or replaced), keeping the commit's record."""
    with contextlib.suppress(FileNotFoundError):
        for entry in folder.iterdir():
            if entry.name == COMMITTED:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()


def _sync_dir(folder: Path) -> None:
    if os.name == "nt":
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _writer_config(writer_config: WriterConfig | None) -> WriterConfig:
    if writer_config is None:
        return WriterConfig()
    if not isinstance(writer_config, WriterConfig):
        raise TypeError(
            f"writer_config must be a WriterConfig or None, got {type(writer_config).__name__}"
        )
    return writer_config


def _partition_number(partition: object) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise TypeError(f"partition must be an int, got {type(partition).__name__}")
    if partition < 0:
        raise errors.InvalidArgumentError(f"partition must be >= 0, got {partition}", 1)
    return partition


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    _native.check_source_name(name.encode("utf-8", "surrogatepass"))


def _check_remote(base: object, remote: object) -> None:
    if not isinstance(base, (str, os.PathLike)):
        raise TypeError(f"base must be a str or a path, got {type(base).__name__}")
    if remote is not None and not isinstance(remote, RemoteConfig):
        raise TypeError(f"remote must be a RemoteConfig or None, got {type(remote).__name__}")


def _partition_count(partitions: object, name: str) -> int:
    """The number of partitions; refuses results of another cache, numbers out
    of range and a number given twice."""
    if isinstance(partitions, int) and not isinstance(partitions, bool):
        if partitions < 1:
            raise errors.InvalidArgumentError(f"partitions must be at least 1, got {partitions}", 1)
        return partitions
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Sequence):
        raise TypeError(
            "partitions must be a sequence of PartitionResult or an int, "
            f"got {type(partitions).__name__}"
        )
    count = len(partitions)
    if count == 0:
        raise errors.InvalidArgumentError("partitions is empty: no partition to commit", 1)
    seen: set[int] = set()
    for result in partitions:
        if not isinstance(result, PartitionResult):
            raise TypeError(f"partitions must hold PartitionResult, got {type(result).__name__}")
        if result.name != name:
            raise errors.InvalidArgumentError(
                f"partition {result.partition} is of cache {result.name!r}, not {name!r}", 1
            )
        if not 0 <= result.partition < count or result.partition in seen:
            what = "given twice" if result.partition in seen else f"not in 0..{count - 1}"
            raise errors.InvalidArgumentError(
                f"partition {result.partition} is {what} ({count} results given)", 1
            )
        seen.add(result.partition)
    return count
