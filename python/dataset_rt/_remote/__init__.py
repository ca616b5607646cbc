"""Transports for caches in object storage: what the core's fetch callback calls.

`transport_for` gives a transport for a remote location; its ``fetch(name, dest)``
writes one file of the cache (``manifest.json``, ``shards/000017.bin``) to `dest`
and returns True, returns False when the file does not exist, and raises
`dataset_rt.errors.RemoteError` otherwise, after the retries of `RetryPolicy`.
Imports no ctypes (layer 1, beside the binding): the binding's callback calls it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dataset_rt._remote.http import HttpTransport
from dataset_rt._remote.retry import BACKOFF_BASE_S, BACKOFF_CAP_S, RetryPolicy
from dataset_rt._remote.s3 import S3Transport
from dataset_rt._remote.url import RemoteUrl, is_remote, parse_remote_url

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_CAP_S",
    "HttpTransport",
    "RemoteUrl",
    "RetryPolicy",
    "S3Transport",
    "Transport",
    "is_remote",
    "parse_remote_url",
    "transport_for",
]


class Transport(Protocol):
    """Fetches files of one remote cache."""

    def fetch(self, name: str, dest: Path) -> bool:
        """Writes file `name` to `dest`: True, or False when it does not exist."""
        ...


def transport_for(url: str | RemoteUrl, policy: RetryPolicy) -> Transport:
    """The transport of a remote location (a URL string or a parsed `RemoteUrl`)."""
    parsed = parse_remote_url(url) if isinstance(url, str) else url
    if parsed.scheme == "s3":
        return S3Transport(parsed, policy)
    return HttpTransport(parsed, policy)
