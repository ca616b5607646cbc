"""The s3 transport: GetObject per file with boto3 (the `s3` extra).

Credentials, region and endpoint come from the standard AWS configuration, which
botocore reads itself: the environment (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, ...), ``~/.aws/config``
and ``~/.aws/credentials`` profiles, and instance and web-identity roles. botocore's
own retries are off: `retry.fetch_with_retries` is the one policy of every scheme.

One client per process and timeout: a client holds pooled connections, which must
never be used across a fork, so the clients are forgotten in a forked child (by an
at-fork hook, and by comparing the process id) and made anew there. What botocore
parsed to make the first one (the S3 service model, endpoint rules and partitions:
its data loader, plain data without connections or locks) is kept by the process
and its forked children, whose first client then takes ~0.03 s instead of ~0.11 s.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dataset_rt._remote.retry import (
    NotFound,
    Refused,
    RetryPolicy,
    Transient,
    copy_body,
    fetch_with_retries,
    run_with_retries,
)
from dataset_rt._remote.url import RemoteUrl

_INSTALL = "reading s3:// URLs needs boto3: pip install 'dataset-rt-zig[s3]'"
# Error codes retried whatever their status; every 5xx, 408 and 429 are retried too.
# ConditionalRequestConflict (409): a conditional write raced another request on the
# key, and S3 asks for a retry.
_RETRIED_CODES = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestTimeout",
    "ConditionalRequestConflict",
}
_RETRIED_STATUSES = {408, 429}
T = TypeVar("T")


class _Clients:
    """The process's S3 clients by timeout, forgotten in a forked child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.by_timeout: dict[float, Any] = {}


_clients = _Clients()
# botocore's data loader of this process's first client; inherited by a forked child.
_data_loader: Any = None


def forget_clients() -> None:
    """Drops this process's clients: the next fetch makes a new one (after a fork, and
    in tests that change the endpoint)."""
    global _clients
    _clients = _Clients()  # a new lock too: the parent's may be held by another thread


os.register_at_fork(after_in_child=forget_clients)


def s3_client(timeout_s: float) -> Any:
    """This process's S3 client for a timeout: made on first use, and anew in a
    forked child."""
    if _clients.pid != os.getpid():
        forget_clients()
    clients = _clients
    with clients.lock:
        client = clients.by_timeout.get(timeout_s)
        if client is None:
            client = _new_client(timeout_s)
            clients.by_timeout[timeout_s] = client
        return client


def _new_client(timeout_s: float) -> Any:
    import boto3
    import botocore.session
    from botocore.config import Config

    global _data_loader
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"mode": "standard", "total_max_attempts": 1},
    )
    core_session = botocore.session.get_session()
    session = boto3.session.Session(botocore_session=core_session)
    # After boto3's own setup, which adds its data folder to the session's loader:
    # the kept loader has it from the first client's session.
    if _data_loader is None:
        _data_loader = core_session.get_component("data_loader")
    else:
        core_session.register_component("data_loader", _data_loader)
    return session.client("s3", config=config)


class S3Transport:
    """Fetches the files of a cache under an ``s3://bucket/prefix`` URL."""

    def __init__(self, url: RemoteUrl, policy: RetryPolicy) -> None:
        if url.scheme != "s3":
            raise ValueError(f"S3Transport takes s3:// URLs, got {url.shown()!r}")
        try:
            import boto3  # noqa: F401
        except ImportError:
            raise ImportError(_INSTALL) from None
        self.url = url
        self.policy = policy

    def fetch(self, name: str, dest: Path) -> bool:
        """Writes file `name` of the cache to `dest`; False when it does not exist
        (NoSuchKey). Raises RemoteError for anything else that is not recovered."""
        key = self.url.key(name)
        return fetch_with_retries(
            name, self.url.shown(name), dest, self.policy, lambda d: self._attempt(key, d)
        )

    def _attempt(self, key: str, dest: Path) -> None:
        timeout_s = self.policy.timeout_s
        response = classified(
            lambda: s3_client(timeout_s).get_object(Bucket=self.url.host, Key=key), timeout_s
        )
        body = response["Body"]
        try:
            classified(lambda: copy_body(body.read, dest, response.get("ContentLength")), timeout_s)
        except OSError as error:
            raise Transient(f"connection failed: {error.strerror or error}") from None
        finally:
            body.close()


def classified(call: Callable[[], T], timeout_s: float) -> T:
    """`call()`, one attempt of a request on a client of `timeout_s`, with botocore's
    errors as the retry policy's: a ClientError classified (`classify`: NotFound,
    Refused or Transient), a BotoCoreError a connection failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as error:
        raise classify(error) from None
    except BotoCoreError as error:
        raise connection_failure(error, timeout_s) from None


def s3_request(doing: str, policy: RetryPolicy, call: Callable[[Any], T]) -> T:
    """`call(client)` on this process's client (one request, or a managed transfer),
    retried as a fetch is (`classified`): `Transient` is retried after a backoff,
    `Refused` or the last failure is a RemoteError starting with `doing`, and
    `NotFound` (404) is raised as it is, for the caller to say what a missing key
    means. `call` must be safe to repeat: the request may have taken effect when its
    answer was lost."""
    timeout_s = policy.timeout_s
    return run_with_retries(
        doing, policy, lambda: classified(lambda: call(s3_client(timeout_s)), timeout_s)
    )


def connection_failure(error: Exception, timeout_s: float) -> Exception:
    """Transient or Refused for a BotoCoreError (no status: the request did not get an
    answer, or was not sent)."""
    from botocore import exceptions

    if isinstance(error, exceptions.ReadTimeoutError):
        return Transient(f"stalled: no byte for {timeout_s:g} s")
    if isinstance(error, exceptions.IncompleteReadError):
        return Transient(f"truncated body: {error}")
    # botocore 1.36 and later check a response against the object's checksum.
    checksum_error = getattr(exceptions, "FlexibleChecksumError", None)
    if checksum_error is not None and isinstance(error, checksum_error):
        return Transient(f"body does not match its checksum: {error}")
    retried = (
        exceptions.ConnectionError,
        exceptions.HTTPClientError,
        exceptions.ResponseStreamingError,
    )
    if isinstance(error, retried):
        return Transient(f"connection failed: {error}")
    return Refused(str(error))  # no credentials, a bad configuration, ...


def classify(error: Any) -> Exception:
    """NotFound, Refused or Transient for a ClientError of a request (GetObject,
    PutObject, ...)."""
    details = error.response.get("Error", {})
    code = str(details.get("Code", ""))
    status = status_of(error)
    cause = f"{code or 'HTTP ' + str(status)}: {details.get('Message') or 'no message'}"
    if code == "NoSuchBucket":
        return Refused(f"no such bucket ({cause})")
    if code == "NoSuchKey" or status == 404:
        return NotFound()
    if status == 403 or code == "AccessDenied":
        return Refused(f"access denied ({cause})")
    if code in _RETRIED_CODES or status in _RETRIED_STATUSES or 500 <= status <= 599:
        return Transient(f"HTTP {status} {cause}")
    return Refused(f"HTTP {status} {cause}")


def status_of(error: Any) -> int:
    """The HTTP status of a botocore ClientError (0 when it has none)."""
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
