"""Iterators used from several Python threads at once (SPEC 3, 6).

ctypes releases the GIL during native calls, so these really run concurrently
in the core. Every thread must get its full, correct epoch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeAlias, TypeVar

import polars as pl
import pytest

from conftest import QUIET, ListSource, pythonpath_before_inherited, written_paths
from dataset_rt import CachedSample, CacheSource, DatasetRuntime, ReaderConfig
from dataset_rt._binding import native as _native

JOIN_TIMEOUT = 60.0
T = TypeVar("T")
# (cache_id, sample_id, payload) of one sample read.
Record: TypeAlias = tuple[int, int, bytes | memoryview]


def run_in_child(script: str, directory: Path) -> str:
    """Runs `script` with `directory` as its argument in a child interpreter with the
    package under test (a crash or hang then fails one test, not the run); its output."""
    package_parent = Path(_native.__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath_before_inherited(package_parent)},
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def samples(count: int, salt: int) -> list[tuple[bytes, dict[str, object]]]:
    return [
        (bytes([salt, i % 256]) * (500 + (i * 37) % 1500), {"i": i, "salt": salt})
        for i in range(count)
    ]


SOURCES = {"alpha": samples(300, 1), "beta": samples(200, 2)}


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("threads")
    sources: list[CacheSource] = [ListSource(n, s) for n, s in SOURCES.items()]
    paths = written_paths(runtime.write_cache(sources, base, writer_config=QUIET))
    return dict(zip(SOURCES, paths, strict=True))


def run_threads(targets: Sequence[Callable[[], T]]) -> list[T]:
    """Run each target in its own thread, all started together.

    Returns the targets' results, or raises the first error of any thread.
    """
    barrier = threading.Barrier(len(targets))
    results: dict[int, T] = {}
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            barrier.wait()
            results[k] = targets[k]()
        except BaseException as error:  # noqa: BLE001 - reported to the main thread
            errors.append(error)

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a reader thread hung"
    if errors:
        raise errors[0]
    return [results[k] for k in range(len(targets))]


def records(iterable: Iterable[CachedSample]) -> list[Record]:
    return [(s.cache_id, s.sample_id, s.data) for s in iterable]


def check_correct(name: str, epoch: list[Record]) -> None:
    for _, sample_id, data in epoch:
        assert data == SOURCES[name][sample_id][0]


def test_four_threads_each_read_a_full_epoch_of_one_dataset(caches: dict[str, Path]) -> None:
    pool = DatasetRuntime(num_workers=2)
    ds = pool.cached_dataset(
        [caches["alpha"]], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=4)
    )
    expected = [(0, i, data) for i, (data, _) in enumerate(SOURCES["alpha"])]
    # Each thread creates its own iterator; the default epoch is the whole table
    # and the cursor wraps exactly, so every epoch is the same.
    results = run_threads([lambda: records(iter(ds)) for _ in range(4)])
    for epoch in results:
        assert epoch == expected


def test_threads_get_consecutive_shuffled_epochs(caches: dict[str, Path]) -> None:
    pool = DatasetRuntime(num_workers=3)
    config = ReaderConfig(seed=42, prefetch_size=8)
    twin = pool.cached_dataset([caches["alpha"]], reader_config=config)
    twin.set_epoch_len(150)
    expected = [records(twin) for _ in range(4)]
    ds = pool.cached_dataset([caches["alpha"]], reader_config=config)
    ds.set_epoch_len(150)
    iterators = [iter(ds) for _ in range(4)]  # epochs 0..3, in creation order
    results = run_threads([partial(records, it) for it in iterators])
    assert results == expected
    for epoch in results:
        check_correct("alpha", epoch)


def test_racing_iterator_creation_hands_out_each_epoch_once(caches: dict[str, Path]) -> None:
    pool = DatasetRuntime(num_workers=2)
    config = ReaderConfig(seed=7, prefetch_size=16)
    per_thread, threads = 4, 6
    twin = pool.cached_dataset([caches["beta"]], reader_config=config)
    twin.set_epoch_len(40)
    expected = [tuple(records(twin)) for _ in range(per_thread * threads)]
    ds = pool.cached_dataset([caches["beta"]], reader_config=config)
    ds.set_epoch_len(40)
    results = run_threads(
        [lambda: [tuple(records(iter(ds))) for _ in range(per_thread)] for _ in range(threads)]
    )
    got = [epoch for epochs in results for epoch in epochs]
    assert sorted(got) == sorted(expected)


def test_threads_read_two_datasets_at_once(caches: dict[str, Path]) -> None:
    pool = DatasetRuntime(num_workers=2)
    first = pool.cached_dataset(
        [caches["alpha"]], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=3)
    )
    second = pool.cached_dataset(
        [caches["beta"], caches["alpha"]],
        reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=64),
    )
    expected_first = [(0, i, d) for i, (d, _) in enumerate(SOURCES["alpha"])]
    expected_second = [(0, i, d) for i, (d, _) in enumerate(SOURCES["beta"])] + [
        (1, i, d) for i, (d, _) in enumerate(SOURCES["alpha"])
    ]
    targets = [lambda: records(iter(first)), lambda: records(iter(second))] * 2
    results = run_threads(targets)
    assert results == [expected_first, expected_second] * 2


def test_table_updates_during_concurrent_reads_leave_snapshots_intact(
    caches: dict[str, Path],
) -> None:
    pool = DatasetRuntime(num_workers=2)
    ds = pool.cached_dataset(
        [caches["alpha"]], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=2)
    )
    full = ds.get_metadata()
    expected = [(0, i, d) for i, (d, _) in enumerate(SOURCES["alpha"])]
    iterators = [iter(ds) for _ in range(3)]

    def churn() -> int:
        for k in range(60):
            ds.update_metadata(
                full.filter(pl.col("sample_id") % 7 == k % 7).with_columns(weight=pl.lit(k + 1.0))
            )
            ds.get_metadata()
            ds.set_epoch_len(1 + k % 5)
        return k

    readers: list[Callable[[], list[Record] | int]] = [partial(records, it) for it in iterators]
    results = run_threads([*readers, churn])
    for epoch in results[:3]:
        assert epoch == expected
    # The last update stands: rows with sample_id % 7 == 59 % 7, epoch length 1 + 59 % 5.
    rows = [i for i in range(300) if i % 7 == 59 % 7]
    assert len(ds) == 5
    assert [s.sample_id for s in ds] == rows[:5]


CLOSE_WHILE_READING = textwrap.dedent(
    """
    import sys, threading, time
    from dataset_rt import CacheInput, DatasetRuntime, ReaderConfig, WriterConfig

    class Large:
        name = "large"
        def __iter__(self):
            return (CacheInput(bytes([i % 256]) * 300_000, {"i": i}) for i in range(200))

    runtime = DatasetRuntime(num_workers=2)
    quiet = WriterConfig(show_progress=False)
    (written,) = runtime.write_cache(Large(), sys.argv[1], writer_config=quiet)
    config = ReaderConfig(seed=0, prefetch_size=4)
    ds = runtime.cached_dataset([written.path], reader_config=config)
    for round_ in range(40):
        iterator = iter(ds)
        errors = []
        def consume():
            try:
                for _ in iterator:
                    pass
            except Exception as error:
                errors.append(repr(error))
        thread = threading.Thread(target=consume)
        thread.start()
        time.sleep(0.002 + (round_ % 10) * 0.003)
        iterator.close()
        thread.join(60)
        assert not thread.is_alive(), "the consumer hung"
        assert not errors, errors
    print("closed 40 iterators under their consumers")
    """
)


def test_closing_an_iterator_while_another_thread_is_in_next_is_safe(tmp_path: Path) -> None:
    # A watchdog thread stopping a training loop: close() must wait for a next()
    # in progress (the native iterator was once freed under it: a crash). In a
    # child process, so that a crash fails this test rather than the run.
    assert "closed 40 iterators" in run_in_child(CLOSE_WHILE_READING, tmp_path)


INTERRUPTED_NEXT = textwrap.dedent(
    """
    import signal, sys, threading, time
    from dataset_rt import CacheInput, DatasetRuntime, ReaderConfig, WriterConfig

    class Interrupt(Exception):
        pass

    armed = False
    def interrupt(signum, frame):
        if armed:
            raise Interrupt

    class Small:
        name = "small"
        def __iter__(self):
            return (CacheInput(b"x", {"i": i}) for i in range(50))

    runtime = DatasetRuntime(num_workers=1)
    quiet = WriterConfig(show_progress=False)
    (written,) = runtime.write_cache(Small(), sys.argv[1], writer_config=quiet)
    config = ReaderConfig(seed=0, prefetch_size=1)
    ds = runtime.cached_dataset([written.path], reader_config=config)
    ds.set_epoch_len(10**12)
    iterator = iter(ds)
    native = iterator._iterator
    signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.00003, 0.00003)
    interrupts = 0
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and not native.lock.held().locked():
        try:
            armed = True
            native.next_batch()
            armed = False
        except Interrupt:
            armed = False
            interrupts += 1
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    assert not native.lock.held().locked(), f"lock left held after {interrupts} interrupts"
    closing = threading.Thread(target=iterator.close, daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "close() hangs"
    print(f"{interrupts} interrupts, lock free")
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGALRM")
def test_an_interrupt_inside_next_never_leaves_the_iterator_locked(tmp_path: Path) -> None:
    # Ctrl-C lands between bytecodes: if it can fall between taking the
    # iterator's lock and the block that releases it, the next close() hangs.
    assert "lock free" in run_in_child(INTERRUPTED_NEXT, tmp_path)
