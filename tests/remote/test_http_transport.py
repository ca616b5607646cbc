"""The http(s) transport against a static file server on 127.0.0.1, through the fault
proxy: each fault with its outcome, the presigned query string sent on every request
and shown in no message, 404 and 403 at once, a refused connection retried."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fault_proxy
from dataset_rt._remote import HttpTransport, RetryPolicy, transport_for
from dataset_rt.errors import RemoteError
from fault_proxy import Fault, FaultProxy, StaticServer
from remote_fixtures import FAST

SHARD = "shards/000017.bin"
SHARD_BYTES = bytes((i * 13 + i // 257) % 256 for i in range(200_000))
SIGNATURE = "X-Amz-Signature=0123456789abcdef-secret"
WALL_S = 10.0


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[FaultProxy]:
    root = tmp_path / "served"
    (root / "c" / "val" / "shards").mkdir(parents=True)
    (root / "c" / "val" / SHARD).write_bytes(SHARD_BYTES)
    (root / "c" / "val" / "manifest.json").write_bytes(b"{}\n")
    with StaticServer(root) as server, FaultProxy(server.address) as front:
        yield front


def transport(
    proxy: FaultProxy, policy: RetryPolicy = FAST, query: str = SIGNATURE
) -> HttpTransport:
    made = transport_for(f"{proxy.url}/c/val?{query}" if query else f"{proxy.url}/c/val", policy)
    assert isinstance(made, HttpTransport)
    return made


def timed_fetch(made: HttpTransport, dest: Path, name: str = SHARD) -> bool:
    start = time.monotonic()
    try:
        return made.fetch(name, dest)
    finally:
        assert time.monotonic() - start < WALL_S


def test_a_file_is_fetched_with_the_query_string_of_the_url(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    assert timed_fetch(transport(proxy), tmp_path / "shard")
    assert (tmp_path / "shard").read_bytes() == SHARD_BYTES
    assert timed_fetch(transport(proxy, query=""), tmp_path / "m", "manifest.json")
    assert (tmp_path / "m").read_bytes() == b"{}\n"
    assert proxy.requests == [f"GET /c/val/{SHARD}?{SIGNATURE}", "GET /c/val/manifest.json"]


RECOVERED = {
    "503": fault_proxy.status(503),
    "500": fault_proxy.status(500),
    "408": fault_proxy.status(408),
    "connection reset": fault_proxy.reset(),
    "stall before the body": fault_proxy.stall(30.0, at="headers"),
    "stall in the body": fault_proxy.stall(30.0),
    "truncated body": fault_proxy.truncate(),
}


@pytest.mark.parametrize("fault", list(RECOVERED.values()), ids=list(RECOVERED))
def test_a_transient_failure_is_retried_and_recovered(
    fault: Fault, proxy: FaultProxy, tmp_path: Path
) -> None:
    proxy.script(fault, fault)
    assert timed_fetch(transport(proxy), tmp_path / "shard")
    assert (tmp_path / "shard").read_bytes() == SHARD_BYTES
    assert len(proxy.requests) == 3


EXHAUSTED = {
    "503": (fault_proxy.status(503), "HTTP 503 Service Unavailable"),
    "connection reset": (fault_proxy.reset(), "connection reset by the server"),
    "stall": (fault_proxy.stall(30.0), "stalled: no byte for 1 s"),
    "truncated body": (fault_proxy.truncate(), "truncated body"),
}


@pytest.mark.parametrize(("fault", "cause"), list(EXHAUSTED.values()), ids=list(EXHAUSTED))
def test_when_the_retries_run_out_the_error_names_url_file_attempts_and_cause(
    fault: Fault, cause: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    proxy.script(fault, fault, fault)
    with pytest.raises(RemoteError) as caught:
        timed_fetch(transport(proxy), tmp_path / "shard")
    message = str(caught.value)
    assert message.startswith(
        f"cannot fetch {SHARD} from {proxy.url}/c/val/{SHARD}?<query hidden>: "
        f"3 attempt(s) failed, the last with: {cause}"
    ), message
    assert "secret" not in message and "Signature" not in message
    assert len(proxy.requests) == 3
    assert not (tmp_path / "shard").exists()


def test_forbidden_fails_at_once_naming_the_url_without_its_query(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    proxy.script(fault_proxy.status(403))
    with pytest.raises(RemoteError) as caught:
        timed_fetch(transport(proxy), tmp_path / "shard")
    message = str(caught.value)
    assert f"{proxy.url}/c/val/{SHARD}?<query hidden>" in message
    assert "access denied: HTTP 403" in message and "secret" not in message
    assert len(proxy.requests) == 1


def test_a_missing_file_is_not_found_at_once(proxy: FaultProxy, tmp_path: Path) -> None:
    assert not timed_fetch(transport(proxy), tmp_path / "absent", "shards/999999.bin")
    proxy.script(fault_proxy.status(404))
    assert not timed_fetch(transport(proxy), tmp_path / "shard")
    assert len(proxy.requests) == 2
    assert not (tmp_path / "absent").exists() and not (tmp_path / "shard").exists()


def test_a_flipped_byte_is_delivered_as_sent(proxy: FaultProxy, tmp_path: Path) -> None:
    """The transport does not check content: the core checks every file against the
    manifest. The proxy's flip changes exactly one byte, for the core's tests."""
    proxy.script(fault_proxy.flip())
    assert timed_fetch(transport(proxy), tmp_path / "shard")
    got = (tmp_path / "shard").read_bytes()
    assert [i for i in range(len(got)) if got[i] != SHARD_BYTES[i]] == [len(got) // 2]
    assert len(got) == len(SHARD_BYTES) and len(proxy.requests) == 1


def test_a_refused_connection_is_retried_then_named(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port with no listener once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    made = transport_for(f"http://127.0.0.1:{port}/c", FAST)
    start = time.monotonic()
    with pytest.raises(
        RemoteError, match=r"3 attempt\(s\) failed, the last with: connection refused"
    ):
        made.fetch("manifest.json", tmp_path / "m")
    assert time.monotonic() - start < WALL_S
    assert not (tmp_path / "m").exists()


def test_a_destination_that_cannot_be_written_fails_at_once(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    with pytest.raises(RemoteError, match=r"cannot write .*missing-dir.*\(attempt 1\)"):
        timed_fetch(transport(proxy), tmp_path / "missing-dir" / "shard")
    assert len(proxy.requests) == 1
