"""A mutex that a forked child does not inherit held.

`fork()` copies a `threading.Lock` in whatever state it is: a lock that another
thread of the parent held at that moment stays held in the child forever, and
the child's first use of it would hang. SPEC 6 asks a forked child to fail
clearly, never hang, so the binding's locks start afresh in a new process (the
child has only the forking thread, so nothing of its own can hold them).
"""

from __future__ import annotations

import os
import threading
from types import TracebackType


class ForkSafeLock:
    """A `threading.Lock` for ``with`` blocks, replaced by a new one in a forked child."""

    __slots__ = ("_lock", "_process_id")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process_id = os.getpid()

    def __enter__(self) -> None:
        if self._process_id != os.getpid():
            self._lock = threading.Lock()
            self._process_id = os.getpid()
        self._lock.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._lock.release()
