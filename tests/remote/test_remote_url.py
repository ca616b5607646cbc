"""Remote URLs: what parses, what is refused by name, and what a message may show."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_rt._remote import RemoteUrl, is_remote, parse_remote_url
from dataset_rt._remote.url import check_file_name


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("s3://bucket/caches/train-00", RemoteUrl("s3", "bucket", "caches/train-00")),
        ("s3://bucket/caches/train-00/", RemoteUrl("s3", "bucket", "caches/train-00")),
        ("s3://bucket", RemoteUrl("s3", "bucket", "")),
        ("S3://bucket/c", RemoteUrl("s3", "bucket", "c")),
        ("https://host/c/val", RemoteUrl("https", "host", "c/val")),
        ("http://127.0.0.1:9000/c", RemoteUrl("http", "127.0.0.1:9000", "c")),
        ("https://host/c?sig=abc&x=1", RemoteUrl("https", "host", "c", "sig=abc&x=1")),
        ("http://[::1]:8080/a%20b", RemoteUrl("http", "[::1]:8080", "a%20b")),
    ],
)
def test_supported_urls_parse(url: str, parsed: RemoteUrl) -> None:
    assert is_remote(url)
    assert parse_remote_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("gs://bucket/c", "unsupported URL scheme 'gs' in 'gs://bucket/c'"),
        ("file:///tmp/c", "unsupported URL scheme 'file'"),
        ("caches/train", "not a remote URL: 'caches/train'"),
        ("s3://", "'s3://' names no valid bucket"),
        ("s3://b/c", "'s3://b/c' names no valid bucket"),
        ("s3://bucket/c?versionId=1", "an s3:// URL takes no query string"),
        ("s3://bucket/a//b", "empty segment"),
        ("http:///c", "names no host"),
        ("http://host:99999/c", "invalid port"),
        ("https://host/c#part", "no #fragment"),
        ("https://user:hunter2@host/c", "credentials in the URL are not accepted"),
        ("s3://KEY:hunter2@bucket/c", "credentials in the URL are not accepted"),
    ],
)
def test_other_urls_are_refused_by_name(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?")) as caught:
        parse_remote_url(url)
    assert "hunter2" not in str(caught.value)


def test_local_paths_are_not_remote() -> None:
    for path in ("caches/train", "/data/caches", "C:\\caches", "./s3:/x", "s3:/bucket"):
        assert not is_remote(path)
    assert not is_remote(Path("s3://bucket"))  # a Path is always local (and collapses //)


def test_a_shown_url_hides_the_query() -> None:
    url = parse_remote_url("https://host/c/val?X-Amz-Signature=secret")
    assert url.shown() == "https://host/c/val?<query hidden>"
    assert url.shown("shards/000017.bin") == "https://host/c/val/shards/000017.bin?<query hidden>"
    assert url.request_target("shards/a b.bin") == "/c/val/shards/a%20b.bin?X-Amz-Signature=secret"
    assert parse_remote_url("s3://bucket").key("manifest.json") == "manifest.json"


@pytest.mark.parametrize("name", ["", "/manifest.json", "shards/../x", "a//b", "./m", "a\\b", "m/"])
def test_file_names_must_be_plain_relative_paths(name: str) -> None:
    with pytest.raises(ValueError, match="relative path of plain segments"):
        check_file_name(name)


_SEGMENT = st.text(st.characters(codec="utf-8", exclude_characters="/\\\x00"), min_size=1).filter(
    lambda s: s not in (".", "..")
)


@given(
    prefix=st.lists(
        _SEGMENT.filter(lambda s: "?" not in s and "#" not in s and "%" not in s), max_size=3
    ),
    name=st.lists(_SEGMENT, min_size=1, max_size=3),
)
def test_keys_and_shown_urls_join_prefix_and_name(prefix: list[str], name: list[str]) -> None:
    url = RemoteUrl("s3", "bucket", "/".join(prefix))
    file_name = "/".join(name)
    assert url.key(file_name) == "/".join([*prefix, *name])
    assert url.shown(file_name) == "s3://bucket/" + "/".join([*prefix, *name])
    signed = RemoteUrl("https", "host", "/".join(prefix), "sig=secret")
    joined = "/".join([*prefix, *name])
    assert signed.shown(file_name) == f"https://host/{joined}?<query hidden>"
