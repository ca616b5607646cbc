"""Fixtures of the remote-cache tests (a pytest plugin of tests/conftest.py): moto's S3
server on 127.0.0.1 for the session, and a fault-injecting proxy in front of it for each
test, with the transport's S3 client pointed at the proxy through the standard AWS
configuration variables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dataset_rt._remote import RetryPolicy
from dataset_rt._remote import s3 as s3_transport
from fault_proxy import FaultProxy

BUCKET = "dataset-rt-tests"
# Tiny backoffs, so that a retry costs next to nothing, and a timeout that a stall trips
# within a second but a loaded machine (or the emulated aarch64 run) does not.
FAST = RetryPolicy(retries=2, timeout_s=1.0, backoff_base_s=0.001, backoff_cap_s=0.01)
# Credentials of the fake server: values the tests look for in error messages.
ACCESS_KEY_ID = "AKIADATASETRTTESTKEY"
SECRET_ACCESS_KEY = "dataset-rt-test-secret-never-shown-0123456789"
_AWS_VARIABLES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """moto's S3 server on 127.0.0.1 (a free port), with dummy credentials in the
    environment and the test bucket created; (host, port)."""
    pytest.importorskip("boto3", reason="the s3 transport needs boto3 (the s3 extra)")
    server_module = pytest.importorskip("moto.server", reason="the S3 server is moto's")
    home = tmp_path_factory.mktemp("aws")
    with pytest.MonkeyPatch.context() as patch:
        for name in _AWS_VARIABLES:
            patch.delenv(name, raising=False)
        # No profile or file of the machine's user may leak in.
        patch.setenv("AWS_CONFIG_FILE", str(home / "config"))
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials"))
        patch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            direct_client(host, port).create_bucket(Bucket=BUCKET)
            yield host, port
        finally:
            server.stop()


def direct_client(host: str, port: int) -> Any:
    """A boto3 client of the server itself (not through the proxy), to put objects."""
    import boto3

    return boto3.client("s3", endpoint_url=f"http://{host}:{port}")


def upload(moto_server: tuple[str, int], cache: Path, prefix: str) -> str:
    """Puts every file of `cache` under `prefix` in the test bucket; its s3:// URL."""
    client = direct_client(*moto_server)
    for file in sorted(cache.rglob("*")):
        if file.is_file():
            key = f"{prefix}/{file.relative_to(cache).as_posix()}"
            client.upload_file(str(file), BUCKET, key)
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture
def s3_proxy(moto_server: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A fault proxy in front of the server, named by AWS_ENDPOINT_URL_S3 (which
    botocore reads itself); the process's S3 clients made anew for it."""
    with FaultProxy(moto_server) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        s3_transport.forget_clients()
        yield proxy
    s3_transport.forget_clients()
