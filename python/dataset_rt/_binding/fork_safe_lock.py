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

# Forks of this process so far, as seen by the child (`os.register_at_fork`):
# a lock made in an earlier generation may have been held by a thread of the
# parent, and is replaced on its next use.
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forked)


class ForkSafeLock:
    """A `threading.Lock`, replaced by a new one in a forked child."""

    __slots__ = ("_lock", "_generation")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = _generation

    def held(self) -> threading.Lock:
        """This process's lock, for a ``with`` statement.

        The `with` must be given the `threading.Lock` itself: its C-level enter
        and exit leave no gap for a KeyboardInterrupt between taking the lock and
        the block that releases it, where Python-level `__enter__`/`__exit__`
        methods would (the lock then stays held and the next `close()` hangs).
        """
        if self._generation != _generation:
            self._lock = threading.Lock()
            self._generation = _generation
        return self._lock
