"""A fault-injecting HTTP proxy and a static file server, both threaded on 127.0.0.1
with a port of the system's choosing, for the tests of remote caches.

The proxy forwards each request to its upstream (an S3 server, a static file server)
unless a fault is scripted for it: `FaultProxy.script(...)` queues faults, and each
request takes the next one (then requests pass through again). It records every
request it saw, so a test can count the attempts a transport made.
"""

from __future__ import annotations

import functools
import http.client
import socket
import struct
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

SLOW_DOWN_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
ACCESS_DENIED_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)
NO_SUCH_KEY_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code>'
    b"<Message>The specified key does not exist.</Message></Error>"
)
# Headers that describe one hop's connection, not the response: never forwarded.
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one request instead of forwarding it faithfully.

    kind: ``status`` answers `status` with `body` itself; ``reset`` resets the
    connection (RST) without a response; ``lost`` forwards the request, then resets
    the connection instead of answering (the request took effect, its answer was
    lost); ``stall`` forwards the headers and, with
    ``at="body"``, half the body, then sends nothing for `seconds`; ``truncate``
    forwards the headers with the full Content-Length and half the body, then closes;
    ``flip`` forwards the response with one byte of its body flipped (the middle one).
    """

    kind: Literal["status", "reset", "lost", "stall", "truncate", "flip"]
    status: int = 0
    body: bytes = b""
    seconds: float = 0.0
    at: Literal["headers", "body"] = "body"


def status(code: int, body: bytes = b"") -> Fault:
    return Fault("status", status=code, body=body)


def reset() -> Fault:
    return Fault("reset")


def lost() -> Fault:
    return Fault("lost")


def stall(seconds: float, at: Literal["headers", "body"] = "body") -> Fault:
    return Fault("stall", seconds=seconds, at=at)


def truncate() -> Fault:
    return Fault("truncate")


def flip() -> Fault:
    return Fault("flip")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return  # a connection reset on purpose (its files closed), or a client gone
        super().handle_error(request, client_address)


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):
            pass  # the connection was reset on purpose (files closed), or the client left

    def _handle(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        request_body = self.rfile.read(length) if length else b""
        fault = proxy.record_and_take(f"{self.command} {self.path}")
        if proxy.delay_s > 0:
            proxy.stopping.wait(proxy.delay_s)
        if fault is not None and fault.kind == "reset":
            self._reset()
            return
        if fault is not None and fault.kind == "status":
            self._answer(fault.status, {"Content-Type": "application/xml"}, fault.body)
            return
        code, headers, body = proxy.forward(
            self.command, self.path, dict(self.headers), request_body
        )
        if fault is not None and fault.kind == "lost":
            self._reset()
        elif fault is None:
            self._answer(code, headers, body)
        elif fault.kind == "flip":
            flipped = bytearray(body)
            flipped[len(flipped) // 2] ^= 0x01
            self._answer(code, headers, bytes(flipped))
        else:  # stall or truncate: headers announce the whole body, half of it comes
            self._start(code, headers, len(body))
            if fault.kind == "truncate" or fault.at == "body":
                self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if fault.kind == "stall":
                proxy.stopping.wait(fault.seconds)
            self.close_connection = True

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

    def _reset(self) -> None:
        """Closes the connection with RST (linger 0); its files hold it open until closed too."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.wfile.close()
        self.connection.close()
        self.close_connection = True

    def _start(self, code: int, headers: dict[str, str], length: int) -> None:
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _answer(self, code: int, headers: dict[str, str], body: bytes) -> None:
        self._start(code, headers, len(body))
        if self.command != "HEAD":
            self.wfile.write(body)


class FaultProxy:
    """The proxy in front of `upstream` (host, port), every answer `delay_s` late; a
    context manager that starts and stops it. `url` is its base URL."""

    def __init__(self, upstream: tuple[str, int], delay_s: float = 0.0) -> None:
        self.upstream = upstream
        # Every request waits this long before it is answered: slow downloads.
        self.delay_s = delay_s
        self.requests: list[str] = []
        self.stopping = threading.Event()
        self._faults: deque[Fault] = deque()
        # Faults for the requests whose path contains a key (`script_for`).
        self._targeted: dict[str, deque[Fault]] = {}
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _ProxyHandler)
        self._server.proxy = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *faults: Fault) -> None:
        """Queues `faults`: the next requests take them in order."""
        with self._lock:
            self._faults.extend(faults)

    def script_for(self, path_part: str, *faults: Fault) -> None:
        """Queues `faults` for the next requests whose path contains `path_part`,
        before any fault of `script`."""
        with self._lock:
            self._targeted.setdefault(path_part, deque()).extend(faults)

    def record_and_take(self, request: str) -> Fault | None:
        with self._lock:
            self.requests.append(request)
            for path_part, faults in self._targeted.items():
                if faults and path_part in request:
                    return faults.popleft()
            return self._faults.popleft() if self._faults else None

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            connection.request(method, path, body=body or None, headers=sent)
            response = connection.getresponse()
            data = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
            return response.status, kept, data
        finally:
            connection.close()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()  # ends the stalls
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class StaticServer:
    """The files under `root` over plain HTTP (GET, HEAD); a context manager."""

    def __init__(self, root: Path) -> None:
        handler = functools.partial(_QuietFiles, directory=str(root))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def __enter__(self) -> StaticServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
