"""The one retry policy of every transport: which failures are retried, the backoff
between attempts, and writing a response body to its destination file.

A transport's attempt raises `NotFound` (404: the fetch returns False at once),
`Refused` (403 and other failures that a retry cannot mend: a RemoteError at once)
or `Transient` (retried after a backoff, up to the policy's retries). A partial
destination file is removed whenever an attempt fails.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dataset_rt._config import RemoteConfig
from dataset_rt.errors import RemoteError

# Full-jitter exponential backoff: before retry k (k = 0, 1, ...), a sleep drawn
# uniformly from [0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**k)] seconds.
BACKOFF_BASE_S = 0.2
BACKOFF_CAP_S = 20.0
# Bytes read from a response and written to the file at a time.
CHUNK_BYTES = 1 << 20

T = TypeVar("T")


class NotFound(Exception):
    """The file does not exist at the remote location (404)."""


class Refused(Exception):
    """A failure that a retry cannot mend (403, a malformed request, a local write)."""


class Transient(Exception):
    """A failure that may pass: throttling, 5xx, 408/429, a reset or refused
    connection, a stall past the timeout, a truncated body."""


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts, timeout and backoff of a fetch (see the module constants)."""

    retries: int = 5
    timeout_s: float = 60.0
    backoff_base_s: float = BACKOFF_BASE_S
    backoff_cap_s: float = BACKOFF_CAP_S

    @classmethod
    def from_config(cls, config: RemoteConfig) -> RetryPolicy:
        """The policy of a `RemoteConfig`: its retries and timeout, the module's backoff."""
        return cls(retries=config.retries, timeout_s=config.timeout_s)

    def backoff_s(self, retry: int, draw: Callable[[], float] = random.random) -> float:
        """The sleep before retry number `retry` (0-based): full jitter, uniform in
        [0, min(cap, base * 2**retry)]."""
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2.0 ** min(retry, 64))
        return draw() * ceiling


def copy_body(read: Callable[[int], bytes], dest: Path, expected: int | None) -> int:
    """Writes the body that `read(n)` yields to `dest` in chunks; returns its length.
    Raises Transient when the body ends before `expected` bytes (truncated), Refused
    when `dest` cannot be written."""
    try:
        file = dest.open("wb")
    except OSError as error:
        raise Refused(f"cannot write {dest}: {error.strerror or error}") from None
    written = 0
    with file:
        while chunk := read(CHUNK_BYTES):
            try:
                file.write(chunk)
            except OSError as error:
                raise Refused(f"cannot write {dest}: {error.strerror or error}") from None
            written += len(chunk)
    if expected is not None and written != expected:
        raise Transient(f"truncated body: {written} of {expected} bytes")
    return written


def fetch_with_retries(
    name: str,
    shown: str,
    dest: Path,
    policy: RetryPolicy,
    attempt: Callable[[Path], None],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Runs `attempt(dest)` until it succeeds (True), finds nothing (False, at once)
    or fails for good: a RemoteError naming the file `name`, `shown` (its URL, query
    hidden), the attempts and the last cause. `dest` is removed after every failed attempt."""

    def once() -> None:
        try:
            attempt(dest)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise

    try:
        run_with_retries(f"cannot fetch {name} from {shown}", policy, once, sleep)
    except NotFound:
        return False
    return True


def run_with_retries(
    doing: str,
    policy: RetryPolicy,
    attempt: Callable[[], T],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Runs `attempt()` until it returns (its value is returned), again after a
    backoff while it raises `Transient`, up to the policy's retries. `Refused`, or
    `Transient` on the last attempt, is a RemoteError ``"<doing>: <cause> (attempt
    n)"`` or ``"<doing>: n attempt(s) failed, the last with: <cause>"``; anything
    else (`NotFound` included) is raised as it is."""
    attempts = policy.retries + 1
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except Refused as error:
            raise RemoteError(f"{doing}: {error} (attempt {number})") from None
        except Transient as error:
            if number == attempts:
                raise RemoteError(
                    f"{doing}: {attempts} attempt(s) failed, the last with: {error}"
                ) from None
        sleep(policy.backoff_s(number - 1))
    raise AssertionError("unreachable: the last attempt returns or raises")
