"""Writing sources in spawned processes: ``WriterConfig(num_processes=N)``.

The calling process (the parent) hands each source, pickled, to one of up to N
writer processes started with the ``"spawn"`` method. Each writes its source with
`write_one`, the in-process path, so the bytes on disk are the same; the parent
keeps the results in source order, shows the progress of all of them and merges
their profiles. A source that takes longer than ``process_timeout_seconds`` has
its process stopped (SIGTERM, which removes the staging directory through the
writer's own cleanup; SIGKILL after a grace period, and then the parent removes
the staging directory, whose name starts with the process id) and becomes a
`CacheWriteError`; the other sources go on in a fresh process.

Messages a writer process sends (pickled tuples):

- ``("ready",)``: its runtime is up; it waits for jobs.
- ``("progress", samples, payload_bytes)``: the source's committed figures.
- ``("done", result, reused, profile_sources, samples, payload_bytes)``.
- ``("raised", "KeyboardInterrupt" | "SystemExit", exit_code)``: the source raised
  it; the parent raises it too, as the in-process path lets it propagate.

A job is ``(position, name, pickled source)``; an empty message ends the process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from dataset_rt._binding import native as _native
from dataset_rt._config import WriterConfig
from dataset_rt._core.profiling import WriterProfile
from dataset_rt._core.progress import WriteProgress
from dataset_rt._core.writing import Reuse, settle_before_writing, write_one
from dataset_rt._records import CacheSource, CacheWriteError, CacheWriteResult, CacheWriteSuccess

_SPAWN = multiprocessing.get_context("spawn")
# How long a process may take to stop after SIGTERM before it is killed.
_STOP_GRACE_SECONDS = 5.0
# How often a writer process reports its figures, and the parent refreshes its line.
_PROGRESS_SECONDS = 0.5
_STAGING_AREA = "tmp"  # <base>/tmp/<pid>.<hex ns>.<counter>.staging (storage-format.md)


class _Stopped(SystemExit):
    """Raised in a writer process by SIGTERM: unwinds the write, whose cleanup
    removes the staging directory, and ends the process quietly."""


@dataclass
class _Job:
    position: int
    name: str
    deadline: float
    samples: int = 0
    payload_bytes: int = 0


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    deadline: float  # to be ready, or to finish `job`
    ready: bool = False
    job: _Job | None = None


def write_sources_in_processes(
    runtime: _native.RuntimeHandle,
    sources: list[CacheSource],
    names: list[str | CacheWriteError],
    base_cache_dir: Path,
    config: WriterConfig,
    *,
    reuse: Reuse | None = None,
) -> list[CacheWriteResult]:
    """`write_sources` with ``config.num_processes`` writer processes, each with a
    runtime of as many native threads as `runtime`."""
    assert config.num_processes > 0
    pool = _Pool(runtime.num_workers, sources, names, base_cache_dir, config, reuse)
    try:
        pool.run()
    finally:
        pool.close()
    return pool.results()


class _Pool:
    """The writer processes of one `write_cache` call and what they have written."""

    def __init__(
        self,
        threads: int,
        sources: list[CacheSource],
        names: list[str | CacheWriteError],
        base_cache_dir: Path,
        config: WriterConfig,
        reuse: Reuse | None,
    ) -> None:
        self._threads = threads
        self._sources = sources
        self._names = names
        self._base = base_cache_dir
        self._config = config
        self._reuse = reuse
        self._workers: list[_Worker] = []
        self._outcomes: list[CacheWriteResult | None] = [None] * len(sources)
        self._profiles: list[list[dict[str, Any]]] = [[] for _ in sources]
        self._pending: deque[int] = deque()
        self._progress = WriteProgress(config.show_progress, len(sources))
        self._profile = WriterProfile(config.profiler)
        self._samples_done = 0
        self._bytes_done = 0
        # Lowered when a process fails to start while others run: no restarts then.
        self._processes_max = config.num_processes
        for position, name in enumerate(names):
            if isinstance(name, CacheWriteError):
                self._settle(position, name)
            else:
                self._pending.append(position)
        processes = min(config.num_processes, len(self._pending))
        self._progress.start_source(f"{len(self._pending)} sources in {processes} processes")

    def results(self) -> list[CacheWriteResult]:
        assert all(outcome is not None for outcome in self._outcomes)
        return [outcome for outcome in self._outcomes if outcome is not None]

    def run(self) -> None:
        while self._pending or any(worker.job is not None for worker in self._workers):
            self._start_workers()
            self._dispatch()
            self._wait()

    def close(self) -> None:
        """Stop every process (those still writing are stopped as on a timeout),
        end the progress line and write the profile."""
        try:
            for worker in self._workers:
                with contextlib.suppress(OSError):
                    worker.connection.send_bytes(b"")  # a worker between jobs ends
            for worker in list(self._workers):
                self._stop(worker, grace=_STOP_GRACE_SECONDS if worker.job is None else 0.0)
        finally:
            self._progress.end_line()
            for sources in self._profiles:
                self._profile.add_sources(sources)
            self._profile.write()

    # ---- the loop -----------------------------------------------------------

    def _start_workers(self) -> None:
        busy = sum(worker.job is not None for worker in self._workers)
        wanted = min(self._processes_max, busy + len(self._pending))
        while len(self._workers) < wanted:
            receiver, sender = _SPAWN.Pipe(duplex=True)
            child_config = self._config.model_copy(update={"num_processes": 0})
            process = _SPAWN.Process(
                target=_writer_process,
                args=(sender, self._base, child_config, self._threads, self._reuse is not None),
                name="dataset_rt-writer",
            )
            process.start()
            sender.close()
            deadline = time.monotonic() + self._config.process_timeout_seconds
            self._workers.append(_Worker(process, receiver, deadline))

    def _dispatch(self) -> None:
        for worker in self._workers:
            while worker.ready and worker.job is None and self._pending:
                position = self._pending.popleft()
                name = self._names[position]
                assert isinstance(name, str)
                job = self._job_message(position, name)
                if job is None:
                    continue  # settled without a writer
                worker.job = _Job(position, name, time.monotonic() + self._timeout)
                worker.deadline = worker.job.deadline
                try:
                    worker.connection.send_bytes(job)
                except OSError:
                    pass  # the process has died: `_wait` sees it

    def _job_message(self, position: int, name: str) -> bytes | None:
        settled = settle_before_writing(position, name, self._base, self._reuse)
        if settled is not None:
            self._settle(position, settled)
            return None
        try:
            pickled = pickle.dumps(self._sources[position], protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001 - any pickling failure is the source's
            message = (
                f"source {name!r} cannot be pickled ({type(error).__name__}: {error}); with "
                f"WriterConfig(num_processes={self._config.num_processes}) each source is "
                "sent to a writer process and must pickle (num_processes=0 writes it here)"
            )
            self._settle(position, CacheWriteError(name, message))
            return None
        return pickle.dumps((position, name, pickled), protocol=pickle.HIGHEST_PROTOCOL)

    def _wait(self) -> None:
        if not self._workers:
            return
        now = time.monotonic()
        soonest = min(worker.deadline for worker in self._workers)
        objects: list[Any] = [worker.connection for worker in self._workers]
        objects += [worker.process.sentinel for worker in self._workers]
        wait(objects, timeout=min(max(soonest - now, 0.0), _PROGRESS_SECONDS))
        for worker in list(self._workers):
            self._read_messages(worker)
            if worker not in self._workers:
                continue
            if worker.connection.closed or _ended(worker.process, 0.0):
                self._lost(worker, timed_out=False)
            elif time.monotonic() >= worker.deadline:
                self._lost(worker, timed_out=True)

    def _read_messages(self, worker: _Worker) -> None:
        try:
            while worker.connection.poll():
                self._handle(worker, pickle.loads(worker.connection.recv_bytes()))
        except (EOFError, OSError):
            worker.connection.close()

    def _handle(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            worker.ready = True
            worker.deadline = float("inf")
        elif kind == "progress" and worker.job is not None:
            worker.job.samples, worker.job.payload_bytes = message[1], message[2]
            samples, payload_bytes = self._figures()
            self._progress.update(samples, payload_bytes)
        elif kind == "done" and worker.job is not None:
            _, result, reused, profile_sources, samples, payload_bytes = message
            job, worker.job = worker.job, None
            worker.deadline = float("inf")
            self._profiles[job.position] = profile_sources
            if reused and self._reuse is not None:
                result = self._reuse(job.name, self._base / job.name)
            self._samples_done += samples
            self._bytes_done += payload_bytes
            self._settle(job.position, result, written=isinstance(result, CacheWriteSuccess))
        elif kind == "raised":
            self._stop(worker, grace=_STOP_GRACE_SECONDS)  # it is ending by itself
            if message[1] == "KeyboardInterrupt":
                raise KeyboardInterrupt
            raise SystemExit(message[2])

    def _lost(self, worker: _Worker, *, timed_out: bool) -> None:
        """A process that ended without finishing, or passed its deadline: stop it,
        clean up after it, and settle what it was doing."""
        exit_code = self._stop(worker, grace=0.0)
        ended = "was stopped" if timed_out else f"exited with code {exit_code}"
        job = worker.job
        if job is not None:
            if timed_out:
                message = (
                    f"writing source {job.name!r} took longer than process_timeout_seconds="
                    f"{self._timeout:g}: its writer process was stopped"
                )
            else:
                message = f"the writer process of source {job.name!r} {ended} while writing it"
            self._settle(job.position, CacheWriteError(job.name, message))
        elif not worker.ready:
            if self._workers:
                self._processes_max = len(self._workers)  # go on with the others
                return
            limit = f" within process_timeout_seconds={self._timeout:g}" if timed_out else ""
            self._fail_pending(
                f"no writer process could start: one {ended} before it was ready{limit} "
                "(its error, if any, is on stderr)"
            )

    def _fail_pending(self, message: str) -> None:
        while self._pending:
            position = self._pending.popleft()
            name = self._names[position]
            assert isinstance(name, str)
            self._settle(position, CacheWriteError(name, message))

    def _stop(self, worker: _Worker, *, grace: float) -> int | None:
        """End `worker`'s process, at once unless it ends by itself within `grace`
        seconds: SIGTERM, then SIGKILL. Then remove what it left in the staging
        area, before the process is reaped (its id cannot be reused until then).
        Returns its exit code."""
        process = worker.process
        if not _ended(process, grace):
            process.terminate()
            if not _ended(process, _STOP_GRACE_SECONDS):
                process.kill()
                _ended(process, None)
        if worker.job is not None:
            _remove_staging(self._base, process.pid)
        process.join()
        exit_code = process.exitcode
        worker.connection.close()
        process.close()
        self._workers.remove(worker)
        return exit_code

    # ---- results and progress ------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self._config.process_timeout_seconds

    def _figures(self) -> tuple[int, int]:
        """Committed samples and payload bytes of every source, finished or not."""
        samples, payload_bytes = self._samples_done, self._bytes_done
        for worker in self._workers:
            if worker.job is not None:
                samples += worker.job.samples
                payload_bytes += worker.job.payload_bytes
        return samples, payload_bytes

    def _settle(self, position: int, result: CacheWriteResult, *, written: bool = False) -> None:
        assert self._outcomes[position] is None
        self._outcomes[position] = result
        if written:
            self._progress.finish_source(*self._figures())
        else:
            self._progress.skip_source()


def _ended(process: BaseProcess, timeout: float | None) -> bool:
    """Whether `process` has exited (waiting up to `timeout` seconds), without
    reaping it."""
    return bool(wait([process.sentinel], timeout))


def _remove_staging(base_cache_dir: Path, pid: int | None) -> None:
    """Remove the staging directories of writer process `pid` (stopped or killed)."""
    area = base_cache_dir / _STAGING_AREA
    if pid is None or not area.is_dir():
        return
    for entry in area.iterdir():
        if entry.name.startswith(f"{pid}.") and entry.name.endswith(".staging"):
            shutil.rmtree(entry, ignore_errors=True)


# ---- the writer process -------------------------------------------------------


class _PipeProgress(WriteProgress):
    """A writer process's progress: sent to the parent instead of printed."""

    def __init__(self, connection: Connection, enabled: bool) -> None:
        super().__init__(False, 1)
        self._connection = connection
        self._sending = enabled
        self._sent = 0.0
        self.final = (0, 0)

    def update(self, samples: int, payload_bytes: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if self._sending and (force or now - self._sent >= _PROGRESS_SECONDS):
            self._sent = now
            self._connection.send(("progress", samples, payload_bytes))

    def finish_source(self, samples: int, payload_bytes: int) -> None:
        self.final = (samples, payload_bytes)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise _Stopped(128 + signum)


def _writer_process(
    connection: Connection, base_cache_dir: Path, config: WriterConfig, threads: int, reuse: bool
) -> None:
    """The body of a writer process: one runtime, then jobs until an empty message."""
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        runtime = _native.RuntimeHandle(threads)
        connection.send(("ready",))
        while job := connection.recv_bytes():
            position, name, pickled = pickle.loads(job)
            connection.send(
                _write_job(
                    runtime, connection, (position, name), pickled, base_cache_dir, config, reuse
                )
            )
    except _Stopped:
        return
    except (EOFError, OSError):
        return  # the parent has gone
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            connection.send(("raised", "KeyboardInterrupt", None))
    except SystemExit as error:
        with contextlib.suppress(OSError):
            connection.send(("raised", "SystemExit", error.code))


def _write_job(
    runtime: _native.RuntimeHandle,
    connection: Connection,
    position_and_name: tuple[int, str],
    pickled: bytes,
    base_cache_dir: Path,
    config: WriterConfig,
    reuse: bool,
) -> tuple[Any, ...]:
    """Write one source; the ``"done"`` message that reports it."""
    position, name = position_and_name
    try:
        source = pickle.loads(pickled)
    except Exception as error:  # noqa: BLE001 - any unpickling failure is the source's
        message = (
            f"source {name!r} cannot be unpickled in its writer process "
            f"({type(error).__name__}: {error}); with num_processes > 0 its class must be "
            "importable there (defined in a module, not in __main__ of an interactive session)"
        )
        return ("done", CacheWriteError(name, message), False, [], 0, 0)
    progress = _PipeProgress(connection, config.show_progress)
    profile = WriterProfile(config.profiler)
    reused: list[bool] = []

    def note_reuse(reused_name: str, path: Path) -> CacheWriteResult:
        reused.append(True)  # the parent loads and checks it, as in-process writing does
        return CacheWriteSuccess(reused_name, path)

    noted: Callable[[str, Path], CacheWriteResult] | None = note_reuse if reuse else None
    result = write_one(
        runtime, source, (position, name), base_cache_dir, config, progress, profile, noted
    )
    samples, payload_bytes = progress.final
    return ("done", result, bool(reused), profile.taken_sources(), samples, payload_bytes)
