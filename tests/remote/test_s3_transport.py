"""The s3 transport against moto's S3 server on 127.0.0.1, through the fault proxy:
each fault with its outcome (recovered after the right number of attempts, or a
RemoteError naming the URL, the file, the attempts and the cause), within a bounded
time; credentials never in a message; a forked child fetching on a client of its own."""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import pytest

import fault_proxy
from dataset_rt._remote import RetryPolicy, S3Transport, parse_remote_url, transport_for
from dataset_rt._remote import s3 as s3_transport
from dataset_rt.errors import CacheIOError, RemoteError
from fault_proxy import Fault, FaultProxy
from remote_fixtures import ACCESS_KEY_ID, BUCKET, FAST, SECRET_ACCESS_KEY, direct_client

PREFIX = "caches/train-00"
SHARD = "shards/000017.bin"
SHARD_BYTES = bytes((i * 7 + i // 251) % 256 for i in range(300_000))
MANIFEST = b'{"format_version": 2}\n'
# A test's whole fetch, retries included, ends well within this (the stalls last 30 s).
WALL_S = 10.0


@pytest.fixture(scope="module")
def objects(moto_server: tuple[str, int]) -> None:
    client = direct_client(*moto_server)
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{SHARD}", Body=SHARD_BYTES)
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/manifest.json", Body=MANIFEST)


def transport(policy: RetryPolicy = FAST) -> S3Transport:
    made = transport_for(f"s3://{BUCKET}/{PREFIX}", policy)
    assert isinstance(made, S3Transport)
    return made


def gets(proxy: FaultProxy) -> list[str]:
    return [request for request in proxy.requests if request.startswith("GET ")]


def timed_fetch(dest: Path, name: str = SHARD, policy: RetryPolicy = FAST) -> bool:
    start = time.monotonic()
    try:
        return transport(policy).fetch(name, dest)
    finally:
        assert time.monotonic() - start < WALL_S


def test_a_file_is_fetched_whole_in_one_request(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    assert timed_fetch(tmp_path / "shard", SHARD)
    assert (tmp_path / "shard").read_bytes() == SHARD_BYTES
    assert timed_fetch(tmp_path / "manifest.json", "manifest.json")
    assert (tmp_path / "manifest.json").read_bytes() == MANIFEST
    assert gets(s3_proxy) == [
        f"GET /{BUCKET}/{PREFIX}/{SHARD}",
        f"GET /{BUCKET}/{PREFIX}/manifest.json",
    ]


RECOVERED = {
    "503 SlowDown": fault_proxy.status(503, fault_proxy.SLOW_DOWN_XML),
    "500": fault_proxy.status(500),
    "429": fault_proxy.status(429),
    "connection reset": fault_proxy.reset(),
    "stall before the body": fault_proxy.stall(30.0, at="headers"),
    "stall in the body": fault_proxy.stall(30.0),
    "truncated body": fault_proxy.truncate(),
}


@pytest.mark.parametrize("fault", list(RECOVERED.values()), ids=list(RECOVERED))
def test_a_transient_failure_is_retried_and_recovered(
    fault: Fault, objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    s3_proxy.script(fault, fault)  # the first two attempts fail, the third succeeds
    assert timed_fetch(tmp_path / "shard")
    assert (tmp_path / "shard").read_bytes() == SHARD_BYTES
    assert len(gets(s3_proxy)) == 3


def test_when_the_retries_run_out_the_error_names_url_file_attempts_and_cause(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    s3_proxy.script(*[fault_proxy.status(503, fault_proxy.SLOW_DOWN_XML)] * 3)
    with pytest.raises(RemoteError) as caught:
        timed_fetch(tmp_path / "shard")
    message = str(caught.value)
    assert f"cannot fetch {SHARD} from s3://{BUCKET}/{PREFIX}/{SHARD}: " in message
    assert "3 attempt(s) failed, the last with: HTTP 503 SlowDown" in message
    assert len(gets(s3_proxy)) == 3
    assert not (tmp_path / "shard").exists()
    assert isinstance(caught.value, CacheIOError) and caught.value.status == 4


def test_a_stall_on_every_attempt_ends_within_the_timeouts(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    s3_proxy.script(*[fault_proxy.stall(30.0)] * 3)
    start = time.monotonic()
    with pytest.raises(RemoteError, match=r"3 attempt\(s\) failed, the last with: stalled"):
        timed_fetch(tmp_path / "shard")
    # Three stalls of timeout_s each, and little else.
    assert time.monotonic() - start < 3 * FAST.timeout_s + 3.0
    assert not (tmp_path / "shard").exists()  # the half written is gone


def test_botocore_does_not_retry_on_its_own(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    s3_proxy.script(fault_proxy.status(500), fault_proxy.status(500))
    with pytest.raises(RemoteError, match=r"1 attempt\(s\) failed"):
        timed_fetch(tmp_path / "shard", policy=RetryPolicy(retries=0, timeout_s=FAST.timeout_s))
    assert len(gets(s3_proxy)) == 1


def test_access_denied_fails_at_once_naming_the_url(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    s3_proxy.script(fault_proxy.status(403, fault_proxy.ACCESS_DENIED_XML))
    with pytest.raises(RemoteError) as caught:
        timed_fetch(tmp_path / "shard")
    message = str(caught.value)
    assert f"s3://{BUCKET}/{PREFIX}/{SHARD}" in message and "access denied" in message
    assert len(gets(s3_proxy)) == 1
    for secret in (SECRET_ACCESS_KEY, ACCESS_KEY_ID):
        assert secret not in message and secret not in repr(caught.value)


def test_a_missing_file_is_not_found_at_once(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    assert not timed_fetch(tmp_path / "absent", "shards/999999.bin")
    s3_proxy.script(fault_proxy.status(404, fault_proxy.NO_SUCH_KEY_XML))
    assert not timed_fetch(tmp_path / "shard")
    assert len(gets(s3_proxy)) == 2
    assert not (tmp_path / "absent").exists() and not (tmp_path / "shard").exists()


def test_a_missing_bucket_is_an_error_not_a_missing_file(
    s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    missing = S3Transport(parse_remote_url("s3://no-such-bucket-here/x"), FAST)
    with pytest.raises(RemoteError, match="no such bucket"):
        missing.fetch("manifest.json", tmp_path / "m")
    assert len(gets(s3_proxy)) == 1


def test_secrets_appear_in_no_message_of_any_failure(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    faults = [fault_proxy.reset(), fault_proxy.truncate(), fault_proxy.stall(30.0)]
    s3_proxy.script(*faults)
    with pytest.raises(RemoteError) as caught:
        timed_fetch(tmp_path / "shard")
    for secret in (SECRET_ACCESS_KEY, ACCESS_KEY_ID):
        assert secret not in str(caught.value)


def test_a_flipped_byte_is_caught_by_botocore_where_it_checks_responses(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    """botocore 1.36 and later check a response against the object's checksum: the
    flipped body is retried. Older ones deliver it as sent (the core checks every file
    against the manifest); the proxy's flip changes exactly one byte."""
    import botocore

    checks = tuple(int(part) for part in botocore.__version__.split(".")[:2]) >= (1, 36)
    s3_proxy.script(fault_proxy.flip())
    assert timed_fetch(tmp_path / "shard")
    got = (tmp_path / "shard").read_bytes()
    assert len(got) == len(SHARD_BYTES)
    changed = [i for i in range(len(got)) if got[i] != SHARD_BYTES[i]]
    assert (changed, len(gets(s3_proxy))) == (([], 2) if checks else ([len(got) // 2], 1))


def test_the_endpoint_for_every_service_is_read_too(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_proxy.url)
    s3_transport.forget_clients()
    assert timed_fetch(tmp_path / "manifest.json", "manifest.json")
    assert gets(s3_proxy) == [f"GET /{BUCKET}/{PREFIX}/manifest.json"]


def test_the_endpoint_of_a_profile_is_read_too(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "aws-config"
    config.write_text(
        "[profile proxied]\nservices = proxied\n\n"
        f"[services proxied]\ns3 =\n  endpoint_url = {s3_proxy.url}\n"
    )
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "proxied")
    s3_transport.forget_clients()
    assert timed_fetch(tmp_path / "manifest.json", "manifest.json")
    assert gets(s3_proxy) == [f"GET /{BUCKET}/{PREFIX}/manifest.json"]


def test_without_boto3_an_s3_url_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if not installed
    with pytest.raises(ImportError, match=r"needs boto3: pip install 'dataset-rt-zig\[s3\]'"):
        transport_for(f"s3://{BUCKET}/{PREFIX}", FAST)


def test_a_client_is_made_once_per_process_and_anew_when_the_pid_changes(
    objects: None, s3_proxy: FaultProxy
) -> None:
    first = s3_transport.s3_client(0.5)
    assert s3_transport.s3_client(0.5) is first
    s3_transport._clients.pid = -1  # as a child forked without the at-fork hook sees it
    assert s3_transport.s3_client(0.5) is not first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
def test_a_forked_child_fetches_on_a_client_of_its_own_within_a_deadline(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    assert timed_fetch(tmp_path / "parent")  # the parent's client, with pooled connections
    assert s3_transport._clients.by_timeout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, 3.12+
        pid = os.fork()
    if pid == 0:  # the child: exit codes tell the parent what went wrong
        code = 3
        try:
            code = 2 if s3_transport._clients.by_timeout else 1
            if code == 1 and transport().fetch(SHARD, tmp_path / "child"):
                code = 0
        finally:
            os._exit(code)
    assert exit_code_of(pid) == 0, "1: fetch failed, 2: inherited client"
    assert (tmp_path / "child").read_bytes() == SHARD_BYTES


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
def test_a_forked_childs_client_is_made_from_what_the_parent_parsed(
    objects: None, s3_proxy: FaultProxy, tmp_path: Path
) -> None:
    import botocore.loaders

    assert timed_fetch(tmp_path / "parent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, 3.12+
        pid = os.fork()
    if pid == 0:
        code = 3
        try:
            loaded: list[str] = []
            load_file = botocore.loaders.JSONFileLoader.load_file

            def counted(self: object, path: str) -> object:
                loaded.append(path)
                return load_file(self, path)

            botocore.loaders.JSONFileLoader.load_file = counted
            fetched = transport().fetch(SHARD, tmp_path / "child")
            code = 0 if fetched and not loaded else 1 if loaded else 2
        finally:
            os._exit(code)
    assert exit_code_of(pid) == 0, "1: botocore's data files parsed again, 2: fetch failed"
    assert (tmp_path / "child").read_bytes() == SHARD_BYTES


def exit_code_of(pid: int, wall_s: float = 20.0) -> int:
    """The exit code of forked child `pid`; killed, and the test failed, past `wall_s`."""
    deadline = time.monotonic() + wall_s
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child did not finish within {wall_s:g} s")
    return os.waitstatus_to_exitcode(done[1])
