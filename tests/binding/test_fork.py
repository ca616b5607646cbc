"""After fork() a child never uses the parent's threads: calls on inherited handles
fail with a clear error, dropping them neither hangs nor touches the parent's files,
and a runtime created in the child works."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import QUIET, ListSource, simple_samples
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ReaderConfig
from dataset_rt._binding.writer import NativeWriter, SerializedBatch
from dataset_rt.errors import WrongProcessError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _run_in_child(body: Callable[[], int]) -> int:
    """Fork, run `body` in the child, and return the child's exit code (never hangs the test)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    deadline_seconds = 60
    for _ in range(deadline_seconds * 20):
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return os.waitstatus_to_exitcode(status)
        import time

        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


def test_a_forked_child_gets_a_clear_error_and_can_start_its_own_runtime(tmp_path: Path) -> None:
    runtime = DatasetRuntime(num_workers=2)
    [result] = runtime.write_cache(
        ListSource("parent", simple_samples(50)), tmp_path, writer_config=QUIET
    )
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset(
        [result.path], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    iterator = iter(dataset)
    next(iterator)  # the parent's pool is busy reading ahead when the fork happens

    def child() -> int:
        try:
            list(dataset)
        except RuntimeError as error:
            if "another process" not in str(error):
                print(f"unclear error: {error}", file=sys.stderr)
                return 2
            if not isinstance(error, WrongProcessError) or error.status != 7:
                print(f"not a WrongProcessError: {type(error).__mro__}", file=sys.stderr)
                return 5
        else:
            return 3
        del iterator_in_child[:]  # drops the inherited iterator: must not hang
        fresh = DatasetRuntime(num_workers=1)
        ds = fresh.cached_dataset([result.path], reader_config=ReaderConfig(seed=0, shuffle=False))
        return 0 if sum(1 for _ in ds) == 50 else 4

    iterator_in_child = [iterator]
    assert _run_in_child(child) == 0
    rest = list(iterator)
    assert len(rest) == 49, "the parent's iterator was disturbed by the child"


def test_a_child_destroying_an_inherited_writer_keeps_the_parents_staging(tmp_path: Path) -> None:
    runtime = DatasetRuntime(num_workers=2)
    writer = NativeWriter()
    writer.create(runtime._live_handle(), tmp_path, "forked", QUIET)
    payloads, metadatas = zip(*simple_samples(10), strict=True)
    writer.push(_batch(writer, list(payloads), list(metadatas)))

    def child() -> int:
        # What unwinding through write_cache does; the parent's files must stay.
        writer.destroy()
        return 0

    assert _run_in_child(child) == 0
    writer.push(_batch(writer, list(payloads), list(metadatas)))
    path = writer.finish()
    writer.destroy()
    dataset = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, validate_cache=True)
    )
    assert len(dataset) == 20


def _batch(
    writer: NativeWriter, payloads: list[bytes], metadatas: list[dict[str, object]]
) -> SerializedBatch:
    from dataset_rt._core.writing import _serialize

    return _serialize(writer, payloads, metadatas, 0, sum(map(len, payloads)))


def test_a_lock_another_thread_held_at_the_fork_is_free_in_the_child() -> None:
    import threading

    from dataset_rt._binding.fork_safe_lock import ForkSafeLock

    lock = ForkSafeLock()
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.held():
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(30)
    try:

        def child() -> int:
            fresh = lock.held()
            if not fresh.acquire(timeout=5):
                return 3
            fresh.release()
            return 0

        assert _run_in_child(child) == 0
        # The parent's lock is the one its thread still holds.
        assert not lock.held().acquire(blocking=False)
    finally:
        release.set()
        holder.join()
    assert lock.held().acquire(blocking=False)
