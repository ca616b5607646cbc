"""The loopback S3 server of `benchmarks/remote.py`: moto's server on 127.0.0.1,
counting the bytes it sends.

moto's `ThreadedMotoServer` serves its WSGI application with werkzeug in a thread
of this process. `LoopbackS3` serves the same application (moto's own request
handler, the same werkzeug server) wrapped in a counter of the response bytes per
bucket and method, so every system's downloads are counted in one place, whatever
its client: the body bytes of every response, as the server hands them to the
socket. moto checks no signature: any credentials do.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

# WSGI's types, as far as the counter needs them.
Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

ACCESS_KEY_ID = "AKIADATASETRTBENCH00"
SECRET_ACCESS_KEY = "dataset-rt-bench-secret-0123456789abcdef"
REGION = "us-east-1"


@dataclass(frozen=True)
class Traffic:
    """What the server sent for one bucket: GET requests and their body bytes."""

    get_requests: int
    get_bytes: int

    def minus(self, before: Traffic) -> Traffic:
        return Traffic(self.get_requests - before.get_requests, self.get_bytes - before.get_bytes)


class _CountingApp:
    """A WSGI middleware: counts the requests and response body bytes per
    (bucket, method) of path-style requests (`/bucket/key`)."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.requests: Counter[tuple[str, str]] = Counter()
        self.bytes: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterator[bytes]:
        bucket = str(environ.get("PATH_INFO", "/")).lstrip("/").split("/", 1)[0]
        key = (bucket, str(environ.get("REQUEST_METHOD", "")))
        with self.lock:
            self.requests[key] += 1
        body = self.app(environ, start_response)
        try:
            for chunk in body:
                with self.lock:
                    self.bytes[key] += len(chunk)
                yield chunk
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()


class LoopbackS3:
    """moto's S3 server on 127.0.0.1 (a free port) with a byte counter; a context
    manager that starts and stops it. `endpoint` is its URL."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class QuietHandler(MotoRequestHandler):
            def log_request(self, *args: Any) -> None:
                pass

        self.counter = _CountingApp(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", 0, self.counter, threaded=True, request_handler=QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def traffic(self, bucket: str) -> Traffic:
        """What the server has sent for `bucket` so far."""
        with self.counter.lock:
            return Traffic(
                self.counter.requests[(bucket, "GET")], self.counter.bytes[(bucket, "GET")]
            )

    def environment(self, home: Path) -> dict[str, str]:
        """The variables that point every client at this server: the standard AWS
        ones (boto3, obstore), MosaicML's `S3_ENDPOINT_URL`, and config files of
        our own so that no profile of the machine's user leaks in."""
        home.mkdir(parents=True, exist_ok=True)
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "S3_ENDPOINT_URL": self.endpoint,
            "AWS_CONFIG_FILE": str(home / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self) -> Any:
        """A boto3 client of this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
        )

    def upload_dir(self, local: Path, bucket: str, prefix: str) -> int:
        """Upload every file under `local` to `s3://bucket/prefix/<relative path>`;
        the bytes uploaded."""
        client = self.client()
        total = 0
        for root, _dirs, files in os.walk(local):
            for name in sorted(files):
                path = Path(root) / name
                key = f"{prefix}/{path.relative_to(local).as_posix()}"
                client.upload_file(str(path), bucket, key)
                total += path.stat().st_size
        return total

    def __enter__(self) -> LoopbackS3:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._thread.join()
