"""Publishing caches to ``s3://bucket/prefix``: upload a cache's files, its manifest last.

A cache at a URL is published when its ``manifest.json`` exists there: readers open
nothing else first. So every other file is uploaded before the manifest, and the
manifest is put with ``If-None-Match: *``, which S3 grants to exactly one writer of
a key: two writers of one name never both publish, and a write that dies on the way
leaves no manifest. Large files go up in parts (boto3's managed transfer).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset_rt._remote.retry import NotFound, Refused, RetryPolicy, Transient, run_with_retries
from dataset_rt._remote.s3 import classify, connection_failure, s3_client, s3_request, status_of
from dataset_rt._remote.url import RemoteUrl

MANIFEST = "manifest.json"
# Files above the threshold go up in parts of PART_BYTES (S3's part minimum is 5 MiB).
MULTIPART_THRESHOLD_BYTES = 16 * 1024 * 1024
PART_BYTES = 8 * 1024 * 1024
_INSTALL = "writing s3:// URLs needs boto3: pip install 'dataset-rt-zig[s3]'"
# Keys listed per ListObjectsV2 page, and pages read at most by `list_caches`.
_LIST_PAGE_KEYS = 1000
_LIST_PAGES_MAX = 100_000


class Published(enum.Enum):
    """What `S3Publisher.publish` did."""

    uploaded = "uploaded"  # this writer's manifest is the published one
    other_writer = "other_writer"  # another writer's manifest was there first (412)


@dataclass(frozen=True)
class Transfer:
    """The managed transfer's part sizes (tests lower them to exercise parts)."""

    multipart_threshold_bytes: int = MULTIPART_THRESHOLD_BYTES
    part_bytes: int = PART_BYTES


class S3Publisher:
    """Publishes caches under an ``s3://bucket/prefix`` base: cache `name` goes to
    ``prefix/name/``."""

    def __init__(self, base: RemoteUrl, policy: RetryPolicy, transfer: Transfer) -> None:
        if base.scheme != "s3":
            raise ValueError(f"S3Publisher takes s3:// URLs, got {base.shown()!r}")
        try:
            import boto3  # noqa: F401
        except ImportError:
            raise ImportError(_INSTALL) from None
        assert transfer.part_bytes > 0 and transfer.multipart_threshold_bytes > 0
        self.base = base
        self.policy = policy
        self.transfer = transfer

    def cache_url(self, name: str) -> RemoteUrl:
        """The location of cache `name` under the base."""
        path = f"{self.base.path}/{name}" if self.base.path else name
        return RemoteUrl("s3", self.base.host, path)

    def is_published(self, name: str) -> bool:
        """Whether cache `name` has its manifest at the URL (HEAD of it)."""
        return self._exists(self.cache_url(name))

    def base_is_cache(self) -> bool:
        """Whether the base itself holds a manifest: it is a cache, not a base."""
        return self._exists(self.base)

    def _exists(self, cache: RemoteUrl) -> bool:
        """Whether `cache` has its manifest (HEAD, retried as a fetch is)."""
        key = cache.key(MANIFEST)
        try:
            s3_request(
                f"cannot look for {cache.shown(MANIFEST)}",
                self.policy,
                lambda client: client.head_object(Bucket=self.base.host, Key=key),
            )
        except NotFound:
            return False
        return True

    def publish(self, name: str, cache: Path) -> Published:
        """Uploads the files of the local cache `cache` as cache `name`, every file
        but the manifest first, then the manifest if no writer has published one.

        Before each file it looks whether another writer has published the name
        meanwhile, and stops if so: a loser of the race stops overwriting the
        published cache's files as soon as it can tell (it cannot earlier: files
        uploaded before the other writer's manifest are overwritten by that writer's,
        or by this one's, whichever comes last)."""
        manifest = cache / MANIFEST
        assert manifest.is_file(), f"{cache} is not a complete cache"
        for relative in _data_files(cache):
            if self.is_published(name):
                return Published.other_writer
            self._upload(name, relative, cache / relative)
        return self._put_manifest(name, manifest)

    def _upload(self, name: str, relative: str, file: Path) -> None:
        """Uploads one file, retried as a fetch is (`RetryPolicy`) when it fails in a
        way that may pass: a PUT of a data file can be repeated, it is not published."""
        key = self.cache_url(name).key(relative)
        run_with_retries(
            f"cannot upload {self.cache_url(name).shown(relative)}",
            self.policy,
            lambda: self._upload_attempt(file, key),
        )

    def _upload_attempt(self, file: Path, key: str) -> None:
        """One managed transfer of `file`; Refused or Transient when it fails."""
        from boto3.exceptions import S3UploadFailedError
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        config = TransferConfig(
            multipart_threshold=self.transfer.multipart_threshold_bytes,
            multipart_chunksize=self.transfer.part_bytes,
            use_threads=False,
        )
        try:
            self._client().upload_file(str(file), self.base.host, key, Config=config)
        except ClientError as error:
            raise _upload_failure(error) from None
        except BotoCoreError as error:
            raise connection_failure(error, self.policy.timeout_s) from None
        except S3UploadFailedError as error:  # boto3 wraps the ClientError of a PUT
            cause = error.__context__
            if isinstance(cause, ClientError):
                raise _upload_failure(cause) from None
            raise Transient(str(error)) from None
        except OSError as error:  # the local file: gone (another writer published it)
            raise Refused(f"cannot read {file}: {error.strerror or error}") from None

    def _put_manifest(self, name: str, manifest: Path) -> Published:
        url = self.cache_url(name)
        if put_if_absent(self.policy, url, MANIFEST, manifest.read_bytes()):
            return Published.uploaded
        return Published.other_writer

    def list_caches(self) -> list[str]:
        """The names of the caches directly under the base: the keys
        ``prefix/<name>/manifest.json`` (ListObjectsV2), sorted."""
        names = {
            key.removesuffix("/" + MANIFEST)
            for key in self._keys()
            if key.endswith("/" + MANIFEST) and "/" not in key.removesuffix("/" + MANIFEST)
        }
        return sorted(names)

    def _keys(self) -> list[str]:
        """Every key under the base, relative to it (the listing retried whole)."""
        prefix = f"{self.base.path}/" if self.base.path else ""
        return s3_request(
            f"cannot list {self.base.shown()}",
            self.policy,
            lambda client: [
                key[len(prefix) :] for key, _ in list_keys(client, self.base.host, prefix)
            ],
        )

    def _client(self) -> Any:
        return s3_client(self.policy.timeout_s)


def list_keys(client: Any, bucket: str, prefix: str) -> list[tuple[str, int]]:
    """(key, size) of every object under `prefix` (ListObjectsV2, page by page); one
    attempt, for `s3_request`."""
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": _LIST_PAGE_KEYS}
    )
    found: list[tuple[str, int]] = []
    for count, page in enumerate(pages):
        assert count < _LIST_PAGES_MAX, "listing bound reached"
        found.extend((str(entry["Key"]), int(entry["Size"])) for entry in page.get("Contents", []))
    return found


def get_bytes(policy: RetryPolicy, url: RemoteUrl, relative: str) -> bytes | None:
    """The object `relative` under `url`, None when there is none (GET, retried as a
    fetch is)."""
    try:
        return s3_request(
            f"cannot read {url.shown(relative)}",
            policy,
            lambda client: bytes(
                client.get_object(Bucket=url.host, Key=url.key(relative))["Body"].read()
            ),
        )
    except NotFound:
        return None


def put_if_absent(policy: RetryPolicy, url: RemoteUrl, relative: str, body: bytes) -> bool:
    """Puts `body` as object `relative` under `url` unless one is there (``If-None-Match:
    *``), retried as a fetch is. True when `body` is the object now: this put made it,
    or an earlier attempt whose answer was lost did (the object has `body`'s bytes);
    False when another writer's object was there first (412)."""
    from botocore.exceptions import ClientError

    attempts = 0

    def put(client: Any) -> bool:
        nonlocal attempts
        attempts += 1
        try:
            client.put_object(Bucket=url.host, Key=url.key(relative), Body=body, IfNoneMatch="*")
        except ClientError as error:
            if status_of(error) == 412:
                return False
            raise
        return True

    if s3_request(f"cannot publish {url.shown(relative)}", policy, put):
        return True
    return attempts > 1 and get_bytes(policy, url, relative) == body


def _data_files(cache: Path) -> list[str]:
    """Every file of the cache but its manifest, relative, in a stable order."""
    files = [
        file.relative_to(cache).as_posix()
        for file in sorted(cache.rglob("*"))
        if file.is_file() and file != cache / MANIFEST
    ]
    return files


def _upload_failure(error: Any) -> Exception:
    """Refused or Transient for a ClientError of an upload (a 404 is a missing bucket)."""
    failure = classify(error)
    return Refused(f"not found ({error})") if isinstance(failure, NotFound) else failure
