"""Writing caches to an ``s3://`` base: each cache is written locally, in a staging
area of `RemoteConfig.local_dir`, by the ordinary writer, then published at the URL
(`_remote.upload`: every file, the manifest last and only if no writer has published
that name). An ``http(s)://`` base is refused: that transport only reads.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from dataset_rt import errors
from dataset_rt._config import RemoteConfig
from dataset_rt._core.writing import Reuse, settle_before_writing
from dataset_rt._records import (
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
)
from dataset_rt._remote import RetryPolicy, parse_remote_url
from dataset_rt._remote.upload import Published, S3Publisher, Transfer

# The sub-folder of the local directory that holds the caches being written for a URL.
STAGING_SUBDIR = "staging"

# Writes the given sources (positions of the caller's list) into a local base folder,
# reusing a complete cache found there: the caller's `_write` over a subset.
LocalWrite = Callable[[list[int], Path, Reuse], list[CacheWriteResult]]


def staging_base(remote: RemoteConfig, url: str) -> Path:
    """Where the caches of base `url` are written before they are uploaded:
    ``<local_dir>/staging/<first 16 hex digits of the SHA-256 of the URL>``."""
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return remote.resolved_local_dir() / STAGING_SUBDIR / digest


def writable_publisher(url: str, remote: RemoteConfig) -> S3Publisher:
    """The publisher of an ``s3://`` base; an ``http(s)://`` base (read-only) or a
    malformed URL is an `InvalidArgumentError` naming it."""
    try:
        parsed = parse_remote_url(url)
    except ValueError as error:
        raise errors.InvalidArgumentError(str(error)) from None
    if parsed.scheme != "s3":
        raise errors.InvalidArgumentError(
            f"cannot write caches to {parsed.shown()}: {parsed.scheme}:// is read-only "
            "(caches are read over http(s), written to s3://bucket/prefix or a local folder)"
        )
    return S3Publisher(parsed, RetryPolicy.from_config(remote), Transfer())


def write_to_url(
    names: list[str | CacheWriteError],
    publisher: S3Publisher,
    staging: Path,
    write_local: LocalWrite,
    *,
    reuse_published: bool,
) -> list[CacheWriteResult]:
    """Each source's result for base `publisher.base`: a name published already is
    reused (`reuse_published`, from `from_cache_sources`) or refused as an existing
    cache; the others are written under `staging` and published."""
    results: list[CacheWriteResult | None] = [None] * len(names)
    to_write: list[int] = []
    for position, name in enumerate(names):
        if isinstance(name, CacheWriteError):
            results[position] = name
        elif (unusable := settle_before_writing(position, name, staging, None)) is not None:
            results[position] = unusable  # a name that is no plain segment: no request
        elif _published(publisher, name, results, position, reuse_published):
            continue
        else:
            to_write.append(position)
    if to_write:
        written = write_local(to_write, staging, _reuse_staged)
        for position, result in zip(to_write, written, strict=True):
            results[position] = _publish(publisher, result)
    assert all(result is not None for result in results)
    return [result for result in results if result is not None]


def _published(
    publisher: S3Publisher,
    name: str,
    results: list[CacheWriteResult | None],
    position: int,
    reuse_published: bool,
) -> bool:
    """Settles `position` when cache `name` is published at the URL already (or the
    look fails); True when it did."""
    try:
        published = publisher.is_published(name)
    except (ValueError, errors.RemoteError) as error:
        results[position] = CacheWriteError(name, str(error))
        return True
    if not published:
        return False
    url = publisher.cache_url(name).shown()
    if reuse_published:
        results[position] = CacheUploadSuccess(name, url, "reused")
    else:
        results[position] = CacheWriteError(name, f"cache path already exists: {url}")
    return True


def _reuse_staged(name: str, path: Path) -> CacheWriteResult:
    """A complete cache in the staging area (left by an upload that did not finish,
    or written by another writer on this machine) is uploaded as it is."""
    return CacheWriteSuccess(name, path)


def _publish(publisher: S3Publisher, result: CacheWriteResult) -> CacheWriteResult:
    """Uploads a cache written in the staging area; its staging copy is removed once
    the cache is published (by this writer or another)."""
    if not isinstance(result, CacheWriteSuccess):
        return result
    name = result.source_name
    url = publisher.cache_url(name).shown()
    try:
        published = publisher.publish(name, result.path)
    except (OSError, ValueError) as error:
        # Another writer (on this machine too: the staging area is shared) may have
        # published the name while this one uploaded; its cache is the one to use.
        if _published_anyway(publisher, name):
            _remove_staged(result.path)
            return CacheUploadSuccess(name, url, "other_writer")
        return CacheWriteError(name, f"{error} (the next write of {name!r} uploads it again)")
    _remove_staged(result.path)
    if published is Published.uploaded:
        return CacheUploadSuccess(name, url, "uploaded")
    return CacheUploadSuccess(name, url, "other_writer")


def _published_anyway(publisher: S3Publisher, name: str) -> bool:
    try:
        return publisher.is_published(name)
    except (ValueError, errors.RemoteError):
        return False


def _remove_staged(cache: Path) -> None:
    shutil.rmtree(cache, ignore_errors=True)
