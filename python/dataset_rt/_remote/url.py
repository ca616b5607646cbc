"""Remote cache locations: ``s3://bucket/prefix`` and ``http(s)://host[:port]/path``.

A location is parsed once into a `RemoteUrl`, which names each file of the cache
under it, both as the request needs it and as an error message may show it (the
query string, which may hold a presigned signature, is never shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from os import PathLike
from urllib.parse import quote, urlsplit

# `scheme://` at the start: a string the user meant as a URL, supported or not.
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
_SCHEMES = ("s3", "http", "https")
_EXPECTED = "expected s3://bucket/prefix or http(s)://host[:port]/path"
# S3 bucket names: 3 to 63 of lowercase letters, digits, dots and hyphens (older
# buckets may hold uppercase letters and underscores, which are accepted too).
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")
QUERY_HIDDEN = "?<query hidden>"


def is_remote(path: str | PathLike[str]) -> bool:
    """Whether `path` is a URL (``scheme://...``) rather than a local path. A URL of a
    scheme that is not supported is remote too: `parse_remote_url` rejects it by name,
    instead of it being read as a local folder named ``gs:``."""
    return isinstance(path, str) and _URL_LIKE.match(path) is not None


def _shown(url: str) -> str:
    """`url` as an error message may show it: without user info and query string."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = QUERY_HIDDEN if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


@dataclass(frozen=True)
class RemoteUrl:
    """A parsed remote location.

    Attributes:
        scheme: ``"s3"``, ``"http"`` or ``"https"``.
        host: the bucket (s3) or ``host[:port]`` (http).
        path: the prefix or path under it, without leading or trailing ``/``
            (percent-encoded as given, for http).
        query: the query string added to every request (http only; may hold a
            signature, so never shown).
    """

    scheme: str
    host: str
    path: str
    query: str = ""

    def key(self, name: str) -> str:
        """The object key (s3) or unencoded path of file `name` of the cache."""
        check_file_name(name)
        return f"{self.path}/{name}" if self.path else name

    def request_target(self, name: str) -> str:
        """The http request target of file `name`: its encoded path and the query."""
        check_file_name(name)
        path = f"/{self.path}/" if self.path else "/"
        target = path + quote(name, safe="/")
        return f"{target}?{self.query}" if self.query else target

    def shown(self, name: str | None = None) -> str:
        """The URL of the location, or of its file `name`, for messages: the query
        string, if any, replaced by ``?<query hidden>``."""
        path = f"/{self.path}" if self.path else ""
        if name is not None:
            path += f"/{name}"
        query = QUERY_HIDDEN if self.query else ""
        return f"{self.scheme}://{self.host}{path}{query}"


def check_file_name(name: str) -> None:
    """Rejects a file name that is not a relative path of plain segments
    (``manifest.json``, ``shards/000017.bin``)."""
    segments = name.split("/")
    if not name or "\\" in name or any(s in ("", ".", "..") for s in segments):
        raise ValueError(
            f"a remote cache's file name must be a relative path of plain segments, got {name!r}"
        )


def parse_remote_url(url: str) -> RemoteUrl:
    """Parses ``s3://bucket[/prefix]`` or ``http(s)://host[:port][/path][?query]``;
    anything else is a ValueError naming it (user info and query hidden)."""
    if not isinstance(url, str) or not is_remote(url):
        raise ValueError(f"not a remote URL: {url!r} ({_EXPECTED})")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    shown = _shown(url)
    if scheme not in _SCHEMES:
        raise ValueError(f"unsupported URL scheme {scheme!r} in {shown!r} ({_EXPECTED})")
    if "@" in parts.netloc:
        raise ValueError(
            f"{shown!r}: credentials in the URL are not accepted; s3 reads them from the "
            "AWS configuration, http(s) takes a presigned query string"
        )
    if parts.fragment:
        raise ValueError(f"{shown!r}: a URL of a remote cache has no #fragment")
    path = parts.path.strip("/")
    if scheme == "s3":
        return _s3_url(parts.netloc, path, parts.query, shown)
    try:
        parts.port  # noqa: B018 (parsed on access: a bad port raises here)
    except ValueError as error:
        raise ValueError(f"{shown!r}: invalid port ({error})") from None
    if not parts.hostname:
        raise ValueError(f"{shown!r} names no host ({_EXPECTED})")
    return RemoteUrl(scheme, parts.netloc, path, parts.query)


def _s3_url(bucket: str, prefix: str, query: str, shown: str) -> RemoteUrl:
    if not _BUCKET.match(bucket):
        raise ValueError(f"{shown!r} names no valid bucket ({_EXPECTED})")
    if query:
        raise ValueError(f"{shown!r}: an s3:// URL takes no query string")
    if "//" in prefix:
        raise ValueError(f"{shown!r}: the prefix has an empty segment (//)")
    return RemoteUrl("s3", bucket, prefix)
