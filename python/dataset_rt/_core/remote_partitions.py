"""Caches built in partitions at an ``s3://`` base: the layout of the local one
(docs/storage-format.md, "Partitions") as object keys.

A partition is written locally, in the staging area of `RemoteConfig.local_dir`,
uploaded under ``<base>/tmp/partitions/<name>/part-NNNNNN.<attempt>/<name>/``
(its manifest last) and sealed by putting the pointer ``part-NNNNNN.json`` (one
PUT replaces an object atomically). The commit downloads each partition's
manifest, index, checksums and metadata table, stands in for its shards with
sparse local files of their listed sizes (checked against the objects' sizes),
and has the core join and verify them exactly as for a local base; then it
copies the shards to their final keys inside the store (CopyObject: no payload
passes through this machine), uploads the joined files and ``committed.json``,
and puts the manifest last with ``If-None-Match: *``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dataset_rt import errors
from dataset_rt._binding.partitions import SealedPart
from dataset_rt._binding.partitions import commit_partitions as _commit
from dataset_rt._config import RemoteConfig, WriterConfig
from dataset_rt._core.partition_attempts import (
    COMMITTED,
    attempt_id,
    committed_text,
    failure,
    part_prefix,
    pointer_part,
    pointer_text,
    pointers_problem,
    published_by_commit,
    write_attempt,
)
from dataset_rt._core.remote_writing import staging_base, writable_publisher
from dataset_rt._core.runtime import DatasetRuntime
from dataset_rt._records import (
    CacheInput,
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteResult,
    PartitionResult,
)
from dataset_rt._remote.retry import Refused, Transient
from dataset_rt._remote.s3 import s3_request
from dataset_rt._remote.upload import S3Publisher, Transfer, get_bytes, list_keys, put_if_absent
from dataset_rt._remote.url import RemoteUrl

_SMALL_FILES = ("manifest.json", "index.bin", "records.crc32c", "metadata.arrow")


class _Store:
    """The keys of the partitions of cache `name` under an ``s3://`` base. Every
    request is retried as a fetch is (`s3_request`): each is safe to repeat."""

    def __init__(self, url: str, name: str, remote: RemoteConfig) -> None:
        self.publisher = writable_publisher(url, remote)
        self.policy = self.publisher.policy
        self.base = self.publisher.base
        self.name = name
        self.url = url
        self.bucket = self.base.host
        self.folder = self._under(f"tmp/partitions/{name}")
        self.root = RemoteUrl("s3", self.bucket, "")

    def _under(self, path: str) -> str:
        return f"{self.base.path}/{path}" if self.base.path else path

    def attempt_url(self, number: int, attempt: str) -> RemoteUrl:
        return RemoteUrl("s3", self.bucket, f"{self.folder}/{part_prefix(number)}{attempt}")

    def get(self, key: str) -> bytes | None:
        """The object at `key`, None when there is none."""
        return get_bytes(self.policy, self.root, key)

    def put(self, key: str, body: bytes) -> None:
        s3_request(
            f"cannot upload s3://{self.bucket}/{key}",
            self.policy,
            lambda client: client.put_object(Bucket=self.bucket, Key=key, Body=body),
        )

    def put_if_absent(self, key: str, body: bytes) -> bool:
        """`upload.put_if_absent`: False when another writer's object is at `key`."""
        return put_if_absent(self.policy, self.root, key, body)

    def copy(self, source: str, target: str) -> None:
        """Copies object `source` to `target` inside the bucket (no payload passes here)."""
        s3_request(
            f"cannot copy s3://{self.bucket}/{source} to {target}",
            self.policy,
            lambda client: client.copy({"Bucket": self.bucket, "Key": source}, self.bucket, target),
        )

    def keys(self, prefix: str) -> list[tuple[str, int]]:
        """(key, size) of every object under `prefix`."""
        return s3_request(
            f"cannot list s3://{self.bucket}/{prefix}",
            self.policy,
            lambda client: list_keys(client, self.bucket, prefix),
        )

    def delete(self, keys: Iterable[str]) -> None:
        batch = [{"Key": key} for key in keys]
        for start in range(0, len(batch), 1000):
            self._delete_objects(batch[start : start + 1000])

    def _delete_objects(self, objects: list[dict[str, str]]) -> None:
        """One DeleteObjects request (at most 1,000 keys). S3 answers 200 and lists
        the keys it could not delete: those make the attempt fail, and the retry
        sends the batch again (deleting a deleted key is no error)."""

        def delete(client: Any) -> None:
            answer = client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects})
            failed = answer.get("Errors") or []
            if failed:
                first = failed[0]
                cause = f"{first.get('Code')}: {first.get('Message')} ({first.get('Key')})"
                error = Refused if first.get("Code") == "AccessDenied" else Transient
                raise error(f"{len(failed)} key(s) not deleted, the first with {cause}")

        s3_request(f"cannot delete under s3://{self.bucket}/{self.folder}", self.policy, delete)


def write_partition_to_url(
    samples: Iterable[CacheInput],
    url: str,
    name: str,
    number: int,
    config: WriterConfig,
    runtime: DatasetRuntime | None,
    remote: RemoteConfig,
) -> PartitionResult:
    """`write_partition` for an ``s3://`` base (see the module's comment)."""
    store = _Store(url, name, remote)
    local = staging_base(remote, url) / "partitions" / name
    local.mkdir(parents=True, exist_ok=True)
    attempt = attempt_id()
    attempt_dir = local / f"{part_prefix(number)}{attempt}"
    attempt_dir.mkdir()
    try:
        count, digest = write_attempt(samples, attempt_dir, name, config, runtime)
        if count > 0:
            publisher = S3Publisher(
                store.attempt_url(number, attempt), store.publisher.policy, Transfer()
            )
            publisher.publish(name, attempt_dir / name)
        store.put(f"{store.folder}/{part_prefix(number)}json", pointer_text(attempt, count, digest))
    except Exception as error:
        store.delete(key for key, _ in store.keys(store.attempt_url(number, attempt).path + "/"))
        raise failure(number, name, error) from error
    finally:
        shutil.rmtree(attempt_dir, ignore_errors=True)
    # Other attempts' keys stay until the commit or discard_partitions: one may
    # still be uploading, or about to seal.
    return PartitionResult(name, number, count, attempt, attempt_dir, digest)


def commit_partitions_to_url(
    url: str, name: str, count: int, remote: RemoteConfig
) -> CacheWriteResult:
    """`commit_partitions` for an ``s3://`` base (see the module's comment)."""
    store = _Store(url, name, remote)
    shown = store.publisher.cache_url(name).shown()
    published = store.publisher.is_published(name)
    where = f"s3://{store.bucket}/{store.folder}"
    texts = [store.get(f"{store.folder}/{part_prefix(number)}json") for number in range(count)]
    missing = [number for number, text in enumerate(texts) if text is None]
    try:
        pointers = [pointer_part(t, n, where) for n, t in enumerate(texts) if t is not None]
    except errors.InvalidCacheError as error:
        return CacheWriteError(name, str(error))
    problem = pointers_problem(missing, count, published, shown, where)
    if problem is not None:
        return CacheWriteError(name, problem)
    if published:  # all pointers: the partitions to compare; none: removed after a commit
        return _already(store, shown, None if missing else pointers)
    sealed = pointers
    work = staging_base(remote, url) / "commits" / f"{name}.{attempt_id()}"
    try:
        sources = _stage_locally(store, work, sealed)
        _commit(work, name, sealed)
        return _upload(store, work / name, sources, shown, sealed)
    except errors.DatasetRtError as error:
        return CacheWriteError(name, str(error))
    except Exception as error:  # noqa: BLE001 - botocore's errors: the commit can run again
        return CacheWriteError(name, f"cannot commit {shown}: {error} (running it again is safe)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _already(store: _Store, shown: str, parts: list[SealedPart] | None) -> CacheWriteResult:
    """A cache published at the name: this build's (its committed.json names its
    manifest and these partitions, `published_by_commit`), or another's."""
    manifest = store.get(store.publisher.cache_url(store.name).key("manifest.json"))
    committed = store.get(f"{store.folder}/{COMMITTED}")
    if manifest is not None and published_by_commit(committed, manifest, parts):
        return CacheUploadSuccess(store.name, shown, "reused")
    return CacheWriteError(store.name, f"cache path already exists: {shown}")


def _stage_locally(store: _Store, work: Path, sealed: list[SealedPart]) -> list[str]:
    """Each partition's small files under `work` as the core expects them, its shards
    as sparse files of their sizes; the shards' keys in the committed cache's order."""
    sources: list[str] = []
    for number, part in enumerate(sealed):
        if part.attempt is None:
            continue
        remote_cache = f"{store.attempt_url(number, part.attempt).path}/{store.name}"
        local = work / "tmp" / "partitions" / store.name / f"{part_prefix(number)}{part.attempt}"
        local = local / store.name
        (local / "shards").mkdir(parents=True)
        for file in _SMALL_FILES:
            body = store.get(f"{remote_cache}/{file}")
            if body is None and file == "manifest.json":
                raise errors.InvalidCacheError(
                    f"partition {number}: s3://{store.bucket}/{remote_cache}/{file} is missing", 3
                )
            if body is not None:
                (local / file).write_bytes(body)
        manifest = json.loads((local / "manifest.json").read_bytes())
        sizes = dict(store.keys(f"{remote_cache}/shards/"))
        for shard in manifest["shards"]:
            key = f"{remote_cache}/shards/{shard['name']}"
            size = sizes.get(key)
            if size != shard["byte_len"]:
                raise errors.InvalidCacheError(
                    f"partition {number}: s3://{store.bucket}/{key} has {size} bytes, "
                    f"its manifest says {shard['byte_len']}",
                    3,
                )
            with open(local / "shards" / shard["name"], "wb") as stand_in:
                stand_in.truncate(size)
            sources.append(key)
    return sources


def _upload(
    store: _Store, cache: Path, sources: list[str], shown: str, sealed: list[SealedPart]
) -> CacheWriteResult:
    """The committed cache at the URL: shards copied inside the store, the joined files
    uploaded, committed.json, then the manifest if no writer has published one."""
    cache_url = store.publisher.cache_url(store.name)
    for position, source in enumerate(sources):
        store.copy(source, cache_url.key(f"shards/{position:06d}.bin"))
    for file in _SMALL_FILES[1:]:
        if (cache / file).is_file():
            store.put(cache_url.key(file), (cache / file).read_bytes())
    manifest = (cache / "manifest.json").read_bytes()
    store.put(f"{store.folder}/{COMMITTED}", committed_text(manifest, sealed))
    if not store.put_if_absent(cache_url.key("manifest.json"), manifest):
        return CacheWriteError(store.name, f"cache path already exists: {shown}")
    _discard(store)
    return CacheUploadSuccess(store.name, shown, "uploaded")


def discard_partitions_at_url(url: str, name: str, remote: RemoteConfig) -> None:
    """`discard_partitions` for an ``s3://`` base: every key of the partitions of
    `name` but the commit's record."""
    _discard(_Store(url, name, remote))


def _discard(store: _Store) -> None:
    committed = f"{store.folder}/{COMMITTED}"
    store.delete(key for key, _ in store.keys(store.folder + "/") if key != committed)
