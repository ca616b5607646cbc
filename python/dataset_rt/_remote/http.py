"""The http(s) transport: a GET per file with the standard library's http.client,
read-only (public URLs, or a presigned query string kept on every request).

One connection per attempt, never shared: nothing to go stale across a fork.
"""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path

from dataset_rt._remote.retry import (
    NotFound,
    Refused,
    RetryPolicy,
    Transient,
    copy_body,
    fetch_with_retries,
)
from dataset_rt._remote.url import RemoteUrl

# Statuses retried: request timeout, too many requests, and every 5xx.
_RETRIED = {408, 429}
_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "dataset-rt"}


class HttpTransport:
    """Fetches the files of a cache under an ``http(s)://`` URL."""

    def __init__(self, url: RemoteUrl, policy: RetryPolicy) -> None:
        if url.scheme not in ("http", "https"):
            raise ValueError(f"HttpTransport takes http(s) URLs, got {url.shown()!r}")
        self.url = url
        self.policy = policy

    def fetch(self, name: str, dest: Path) -> bool:
        """Writes file `name` of the cache to `dest`; False when it does not exist
        (404 or 410). Raises RemoteError for anything else that is not recovered."""
        target = self.url.request_target(name)
        return fetch_with_retries(
            name, self.url.shown(name), dest, self.policy, lambda d: self._attempt(target, d)
        )

    def _connection(self) -> http.client.HTTPConnection:
        timeout = self.policy.timeout_s
        if self.url.scheme == "https":
            context = ssl.create_default_context()
            return http.client.HTTPSConnection(self.url.host, timeout=timeout, context=context)
        return http.client.HTTPConnection(self.url.host, timeout=timeout)

    def _attempt(self, target: str, dest: Path) -> None:
        connection = self._connection()
        try:
            connection.request("GET", target, headers=_HEADERS)
            response = connection.getresponse()
            _check_status(response.status, response.reason)
            length = response.getheader("Content-Length")
            expected = int(length) if length is not None and length.isdigit() else None
            copy_body(response.read, dest, expected)
        except http.client.IncompleteRead as error:
            missing = f"{error.expected} bytes early" if error.expected is not None else "early"
            raise Transient(f"truncated body: the connection closed {missing}") from None
        except TimeoutError:
            raise Transient(f"stalled: no byte for {self.policy.timeout_s:g} s") from None
        except ssl.SSLCertVerificationError as error:
            raise Refused(f"TLS certificate not trusted: {error.verify_message}") from None
        except (OSError, http.client.HTTPException) as error:
            raise Transient(_describe(error)) from None
        finally:
            connection.close()


def _check_status(status: int, reason: str) -> None:
    if status == 200:
        return
    if status in (404, 410):
        raise NotFound()
    if status in _RETRIED or 500 <= status <= 599:
        raise Transient(f"HTTP {status} {reason}")
    if status in (401, 403):
        raise Refused(f"access denied: HTTP {status} {reason}")
    raise Refused(f"unexpected response: HTTP {status} {reason}")


def _describe(error: BaseException) -> str:
    """A connection failure in words, without any URL."""
    if isinstance(error, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, http.client.RemoteDisconnected):
        return "the server closed the connection without a response"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}"
