"""The writer's runtime behaviour: progress on stderr, the profile JSON, the fixed
native thread pool, and two processes racing for the same target."""

from __future__ import annotations

import gc
import io
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

from conftest import QUIET, ListSource, published_entries, simple_samples, staging_dirs
from dataset_rt import (
    CacheInput,
    CacheSource,
    CacheSourcesDatasetSuccess,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
    WriterProfilerConfig,
)
from dataset_rt._binding import native as _native
from dataset_rt._core.profiling import WriterProfile

REQUIRED_STAGES = {
    "python_next",
    "python_extract",
    "ingress_wait",
    "compression",
    "disk_write",
    "finish_manifest",
    "publish",
}
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "python"


class InterruptingSource:
    """`good` samples, then `error` (by default as Ctrl-C would)."""

    def __init__(self, name: str, good: int, error: BaseException | None = None) -> None:
        self.name = name
        self.good = good
        self.error = error if error is not None else KeyboardInterrupt()

    def __iter__(self) -> Iterator[CacheInput]:
        yield from ListSource(self.name, simple_samples(self.good))
        raise self.error


# ---- progress ----------------------------------------------------------------------


def test_progress_shows_samples_per_second_and_megabytes_per_second(
    runtime: DatasetRuntime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = runtime.write_cache(
        ListSource("one", simple_samples(50)),
        tmp_path,
        writer_config=WriterConfig(show_progress=True),
    )
    assert results == [CacheWriteSuccess("one", tmp_path / "one")], f"write failed: {results}"
    err = capsys.readouterr().err
    assert "samples/s" in err, f"progress on stderr lacks samples/s: {err!r}"
    assert "MB/s" in err, f"progress on stderr lacks MB/s: {err!r}"
    assert "one" in err, f"progress does not name the source: {err!r}"


def test_progress_for_several_sources_shows_sources_done_of_total_and_an_eta(
    runtime: DatasetRuntime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources: list[CacheSource] = [ListSource(f"s{i}", simple_samples(20)) for i in range(3)]
    results = runtime.write_cache(sources, tmp_path, writer_config=WriterConfig(show_progress=True))
    assert all(isinstance(r, CacheWriteSuccess) for r in results), f"write failed: {results}"
    err = capsys.readouterr().err
    done = [tuple(map(int, m)) for m in re.findall(r"sources (\d+)/(\d+)", err)]
    assert done, f"no 'sources i/n' in progress output: {err!r}"
    assert all(total == 3 for _, total in done), f"sources total is not 3: {done}"
    assert (3, 3) in done, f"progress never reports 3/3 sources done: {done}"
    assert "ETA" in err, f"no ETA in multi-source progress: {err!r}"


class OnceBlockedStream(io.StringIO):
    """A non-blocking stderr that is full once (EAGAIN), then drains."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked = False

    def write(self, text: str) -> int:
        if not self.blocked:
            self.blocked = True
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return super().write(text)


def test_progress_goes_on_after_a_stderr_that_was_full_once(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stderr = OnceBlockedStream()
    monkeypatch.setattr(sys, "stderr", stderr)
    sources: list[CacheSource] = [ListSource(f"s{i}", simple_samples(600)) for i in range(2)]
    results = runtime.write_cache(sources, tmp_path, writer_config=WriterConfig())
    assert all(isinstance(r, CacheWriteSuccess) for r in results), results
    assert stderr.blocked and "writing s1: 600 samples" in stderr.getvalue(), stderr.getvalue()


class BrokenStream:
    """A stderr whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("stderr", [BrokenStream(), None], ids=["broken-pipe", "closed"])
def test_a_stderr_that_cannot_be_written_does_not_fail_the_write(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: object
) -> None:
    # Progress is best effort: the caches are published and reported as written.
    monkeypatch.setattr(sys, "stderr", stderr)
    sources: list[CacheSource] = [ListSource(f"s{i}", simple_samples(600)) for i in range(2)]
    results = runtime.write_cache(sources, tmp_path, writer_config=WriterConfig())
    assert results == [CacheWriteSuccess(f"s{i}", tmp_path / f"s{i}") for i in range(2)], results


class TerminalStream(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_failed_or_interrupted_source_ends_its_progress_line(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Otherwise the next line (another source's, a warning, a traceback) is glued on.
    # (2,500 samples: a batch of 1,024 or more is pushed, so each shows progress.)
    stderr = TerminalStream()
    monkeypatch.setattr(sys, "stderr", stderr)
    broken = InterruptingSource("broken", 2500, RuntimeError("the source broke"))
    sources: list[CacheSource] = [broken, ListSource("fine", simple_samples(600))]
    results = runtime.write_cache(sources, tmp_path / "a", writer_config=WriterConfig())
    assert results[1] == CacheWriteSuccess("fine", tmp_path / "a" / "fine"), results
    err = stderr.getvalue()
    assert re.search(r"writing broken: [^\r\n]*\x1b\[K\n", err), repr(err)
    stderr.seek(0)
    stderr.truncate()
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(
            InterruptingSource("cut", 2500),
            tmp_path / "b",
            writer_config=WriterConfig(),
        )
    err = stderr.getvalue()
    assert "writing cut" in err and err.endswith("\x1b[K\n"), repr(err)


def test_progress_into_a_log_is_whole_lines_without_control_codes(
    runtime: DatasetRuntime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # stderr captured by pytest is not a terminal, as a log file or CI's pipe is not.
    sources: list[CacheSource] = [ListSource(f"s{i}", simple_samples(600)) for i in range(2)]
    results = runtime.write_cache(sources, tmp_path, writer_config=WriterConfig())
    assert all(isinstance(r, CacheWriteSuccess) for r in results), results
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err, repr(err)
    lines = err.splitlines()
    assert err.endswith("\n") and [line for line in lines if "writing s1: 600 samples" in line]
    assert all(line.startswith("dataset_rt: writing ") for line in lines), lines


def test_no_progress_output_when_disabled(
    runtime: DatasetRuntime, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    sources: list[CacheSource] = [ListSource(f"s{i}", simple_samples(20)) for i in range(3)]
    results = runtime.write_cache(
        sources, tmp_path, writer_config=WriterConfig(show_progress=False)
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), f"write failed: {results}"
    out, err = capfd.readouterr()
    assert out == "", f"stdout not empty with show_progress=False: {out!r}"
    assert err == "", f"stderr not empty with show_progress=False: {err!r}"


# ---- profiler ----------------------------------------------------------------------


def profiled(path: Path) -> WriterConfig:
    """A quiet writer config with the profiler writing to `path`."""
    return WriterConfig(show_progress=False, profiler=WriterProfilerConfig(enabled=True, path=path))


def check_profile(path: Path, names: list[str]) -> dict[str, Any]:
    assert path.exists(), f"profile {path} was not written"
    document = json.loads(path.read_text())
    assert isinstance(document, dict), f"profile is a {type(document).__name__}"
    assert document.get("format_version") == 1, (
        f"profile format_version {document.get('format_version')!r}"
    )
    sources = document.get("sources")
    assert isinstance(sources, list), f"profile 'sources' is {type(sources).__name__}"
    assert [s.get("source_name") for s in sources] == names, (
        f"profile sources {[s.get('source_name') for s in sources]}"
    )
    for source in sources:
        stages = source.get("stages")
        assert isinstance(stages, list), (
            f"{source['source_name']}: stages is {type(stages).__name__}"
        )
        stage_names = [stage.get("name") for stage in stages]
        missing = REQUIRED_STAGES - set(stage_names)
        assert not missing, f"{source['source_name']}: profile lacks stages {sorted(missing)}"
        assert len(stage_names) == len(set(stage_names)), (
            f"{source['source_name']}: repeated stages {stage_names}"
        )
        for stage in stages:
            assert set(stage) >= {"name", "calls", "seconds", "bytes"}, (
                f"stage {stage} lacks fields"
            )
            assert type(stage["calls"]) is int and stage["calls"] >= 0, (
                f"stage {stage['name']} calls {stage['calls']!r}"
            )
            assert type(stage["bytes"]) is int and stage["bytes"] >= 0, (
                f"stage {stage['name']} bytes {stage['bytes']!r}"
            )
            assert isinstance(stage["seconds"], (int, float)) and stage["seconds"] >= 0, (
                f"stage {stage['name']} seconds {stage['seconds']!r}"
            )
    return document


def test_profiler_writes_the_stage_json_for_every_source(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    profile = tmp_path / "p.json"
    config = profiled(profile)
    results = runtime.write_cache(
        [ListSource("first", simple_samples(300)), ListSource("second", simple_samples(10))],
        tmp_path / "c",
        writer_config=config,
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), f"write failed: {results}"
    document = check_profile(profile, ["first", "second"])
    stages = {stage["name"]: stage for stage in document["sources"][0]["stages"]}
    assert stages["python_next"]["calls"] >= 1, (
        "python_next was never counted for a 300-sample source"
    )
    assert stages["disk_write"]["bytes"] > 0, (
        "disk_write counted no bytes although shards were written"
    )
    assert stages["publish"]["calls"] >= 1, (
        "publish was never counted although the cache was published"
    )


def test_profiler_is_written_when_the_write_is_interrupted(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    profile = tmp_path / "p.json"
    config = profiled(profile)
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(
            [ListSource("done", simple_samples(5)), InterruptingSource("cut", 400)],
            tmp_path / "c",
            writer_config=config,
        )
    check_profile(profile, ["done", "cut"])


@pytest.mark.parametrize(
    "path", ["", "..", "a\x00b", "p\ud800.json"], ids=["empty", "dotdot", "nul", "surrogate"]
)
def test_profiler_config_refuses_a_path_that_cannot_name_a_file(path: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="path must name a file"):
        WriterProfilerConfig.model_validate({"enabled": True, "path": path})


def test_a_profile_that_cannot_be_written_warns_and_keeps_the_results(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # The profile is written after the caches are published: failing there must
    # not lose the results (the path here is a directory).
    blocked = tmp_path / "profile_dir"
    blocked.mkdir()
    with pytest.warns(RuntimeWarning, match="cannot write the writer profile"):
        results = runtime.write_cache(
            ListSource("s", simple_samples(3)), tmp_path / "c", writer_config=profiled(blocked)
        )
    assert results == [CacheWriteSuccess("s", tmp_path / "c" / "s")], results
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "profile_dir"], "a temp file is left"


def test_an_interrupted_profile_write_leaves_no_temporary_file(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted_replace(source: object, target: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("dataset_rt._core.profiling.os.replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(
            ListSource("s", simple_samples(3)),
            tmp_path / "c",
            writer_config=profiled(tmp_path / "p.json"),
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"], "a temp file is left"


def test_profiler_disabled_writes_no_file(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    results = runtime.write_cache(
        ListSource("a", simple_samples(3)), tmp_path / "c", writer_config=QUIET
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), f"write failed: {results}"
    assert not (tmp_path / "dataset_rt_profile.json").exists(), (
        "a profile was written with the profiler disabled"
    )


# ---- native threads ------------------------------------------------------------------


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def settle(predicate: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc/self/task")
def test_runtime_starts_exactly_num_workers_threads_reuses_them_and_stops_them_when_collected(
    tmp_path: Path,
) -> None:
    gc.collect()
    time.sleep(0.2)
    before = thread_count()
    runtime = DatasetRuntime(num_workers=3)
    assert runtime.num_workers == 3, f"num_workers reads back {runtime.num_workers}"
    settle(lambda: thread_count() >= before + 3, 2.0)
    time.sleep(0.1)
    assert thread_count() == before + 3, (
        f"DatasetRuntime(num_workers=3) added {thread_count() - before} threads"
    )

    results = runtime.write_cache(
        ListSource("t", simple_samples(600)), tmp_path, writer_config=QUIET
    )
    assert results == [CacheWriteSuccess("t", tmp_path / "t")], f"write failed: {results}"
    dataset = runtime.cached_dataset([tmp_path / "t"], reader_config=ReaderConfig(seed=1))
    assert len(list(dataset)) == 600, "reading through the runtime lost samples"
    assert thread_count() == before + 3, (
        f"operations changed the thread count to before+{thread_count() - before}"
    )

    del dataset, runtime
    gc.collect()
    assert settle(lambda: thread_count() == before), (
        f"{thread_count() - before} threads remain after the runtime was collected"
    )


# ---- concurrent writers ----------------------------------------------------------------


def child_environment() -> dict[str, str]:
    """This environment, with this checkout's package first on the path."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PACKAGE_DIR), os.environ.get("PYTHONPATH", "")]),
    }


WRITER_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, WriterConfig

    base, tag, go = sys.argv[1], sys.argv[2], sys.argv[3]

    class Slow:
        name = "shared"
        def __iter__(self):
            for i in range(400):
                if i % 40 == 0:
                    time.sleep(0.02)
                yield CacheInput(f"{tag}-{i}".encode() * 50, {"writer": tag, "i": i})

    runtime = DatasetRuntime(num_workers=2)
    while not os.path.exists(go):
        time.sleep(0.001)
    config = WriterConfig(show_progress=False, max_shard_bytes=20000)
    (result,) = runtime.write_cache(Slow(), base, writer_config=config)
    ok = isinstance(result, CacheWriteSuccess)
    print(json.dumps({"ok": ok, "name": result[0], "detail": str(result[1])}))
    """
)


@pytest.mark.parametrize("round_", range(2))
def test_two_processes_writing_the_same_target_publish_exactly_one_complete_cache(
    runtime: DatasetRuntime, tmp_path: Path, round_: int
) -> None:
    base = tmp_path / "caches"
    go = tmp_path / "go"
    env = child_environment()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(base), tag, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("A", "B")
    ]
    time.sleep(1.0)  # let both import the package and create their runtime
    go.touch()
    outcomes = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, (
            f"writer process failed ({process.returncode}):\n{out}\n{err}"
        )
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    winners = [o for o in outcomes if o["ok"]]
    losers = [o for o in outcomes if not o["ok"]]
    assert len(winners) == 1 and len(losers) == 1, (
        f"expected one success and one error, got {outcomes}"
    )
    expected_path = str(base / "shared")
    assert losers[0]["detail"] == f"cache path already exists: {expected_path}", (
        f"loser's message: {losers[0]['detail']!r}"
    )
    assert winners[0]["detail"] == expected_path, f"winner published at {winners[0]['detail']!r}"
    assert published_entries(base) == ["shared"], f"published {published_entries(base)}"
    assert staging_dirs(base) == [], f"staging left: {staging_dirs(base)}"

    dataset = runtime.cached_dataset(
        [base / "shared"], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    samples = list(dataset)
    assert len(samples) == 400, f"the published cache holds {len(samples)} of 400 samples"
    writers = {s.metadata["writer"] for s in samples}
    assert len(writers) == 1, f"the published cache mixes samples of writers {writers}"
    (tag,) = writers
    for i, sample in enumerate(samples):
        assert sample.data == f"{tag}-{i}".encode() * 50 and sample.metadata["i"] == i, (
            f"sample {i} is not writer {tag}'s"
        )


# ---- more shards than the pool's queue holds ------------------------------------------

# One worker, one batch of 3,000 samples and a shard per record: the committer
# (on the only worker) closes 3,000 shards in one go, each with an fsync and a
# hash job, more than the pool's queue holds (1,024). It once waited for room
# in the queue that only it could make, and the write hung.
MANY_SHARDS_SCRIPT = textwrap.dedent(
    """
    import sys
    from dataset_rt import CacheInput, DatasetRuntime, WriterConfig

    class Tiny:
        name = "tiny"
        def __iter__(self):
            for i in range(3000):
                yield CacheInput(i.to_bytes(4, "little") * 4, {"i": i})

    config = WriterConfig(show_progress=False, max_shard_bytes=1, prefetch_size=4096)
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    runtime = DatasetRuntime(num_workers=workers)
    (result,) = runtime.write_cache(Tiny(), sys.argv[1], writer_config=config)
    print(type(result).__name__, result[1])
    """
)


def test_one_worker_closing_more_shards_at_once_than_the_pool_queue_holds_finishes(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    env = child_environment()
    try:
        done = subprocess.run(
            [sys.executable, "-c", MANY_SHARDS_SCRIPT, str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("writing 3,000 one-record shards on one worker hung (over 120 s)")
    assert done.returncode == 0, f"writer process failed ({done.returncode}):\n{done.stderr}"
    assert done.stdout.split()[0] == "CacheWriteSuccess", f"write result: {done.stdout}"
    assert len(list((tmp_path / "tiny" / "shards").iterdir())) == 3000, "one shard per record"
    dataset = runtime.cached_dataset(
        [tmp_path / "tiny"], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    payloads = [sample.data for sample in dataset]
    assert payloads == [i.to_bytes(4, "little") * 4 for i in range(3000)], "payloads differ"


def cached_pages(path: Path) -> int:
    """How many pages of the file at `path` are in the page cache (Linux `mincore`)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    )
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        # Mapped without touching it, so the check itself reads nothing in.
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), f"mmap: {ctypes.get_errno()}"
        try:
            resident = ctypes.create_string_buffer(pages)
            assert libc.mincore(address, size, resident) == 0, f"mincore: {ctypes.get_errno()}"
            return sum(byte & 1 for byte in resident.raw)
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the writer drops pages on Linux")
def test_a_published_cache_holds_none_of_its_shards_in_the_page_cache(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # Where the file system keeps pages it is asked to drop (tmpfs), there is nothing to see.
    control = tmp_path / "control.bin"
    control.write_bytes(b"x" * (256 << 10))
    with control.open("rb+") as file:
        os.fsync(file.fileno())
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if cached_pages(control) != 0:
        pytest.skip("this file system keeps a synced file's pages when asked to drop them")
    samples = [(bytes([i]) * (300 << 10), {"i": i}) for i in range(12)]
    config = WriterConfig(show_progress=False, max_shard_bytes=1 << 20, page_cache="drop")
    [result] = runtime.write_cache(ListSource("dropped", samples), tmp_path, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    shards = sorted((tmp_path / "dropped" / "shards").iterdir())
    assert len(shards) >= 3, f"expected several shards, got {[s.name for s in shards]}"
    cached = {shard.name: cached_pages(shard) for shard in shards}
    assert all(count == 0 for count in cached.values()), f"pages still cached: {cached}"
    # Dropped from memory only: the cache reads back whole.
    dataset = runtime.cached_dataset(
        [tmp_path / "dropped"],
        reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True),
    )
    assert [sample.data for sample in dataset] == [data for data, _ in samples]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the writer drops pages on Linux")
@pytest.mark.parametrize("page_cache", ["keep", "auto"])
def test_a_cache_that_fits_stays_in_the_page_cache(
    runtime: DatasetRuntime, tmp_path: Path, page_cache: Literal["keep", "auto"]
) -> None:
    # 4 MiB: "auto" keeps a cache of at most half the available memory.
    samples = [(os.urandom(300 << 10), {"i": i}) for i in range(14)]
    config = WriterConfig(show_progress=False, max_shard_bytes=1 << 20, page_cache=page_cache)
    [result] = runtime.write_cache(ListSource("kept", samples), tmp_path, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    shards = sorted((tmp_path / "kept" / "shards").iterdir())
    assert len(shards) >= 3, f"expected several shards, got {[s.name for s in shards]}"
    missing = {
        shard.name: cached_pages(shard)
        for shard in shards
        if cached_pages(shard) != -(-shard.stat().st_size // mmap.PAGESIZE)
    }
    assert not missing, f"pages dropped: {missing}"


def test_an_unknown_page_cache_policy_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="page_cache"):
        WriterConfig(page_cache="sometimes")  # type: ignore[arg-type]


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_many_small_shards_stay_within_a_small_open_file_limit(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # Each closed shard waiting for its fsync and its hash holds two open files; they
    # once piled up to the pool queue's 1,024 jobs and failed the write with
    # "too many open files" under the usual limit of 1,024.
    import resource

    def limit_open_files() -> None:
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(160, hard), hard))

    done = subprocess.run(
        [sys.executable, "-c", MANY_SHARDS_SCRIPT, str(tmp_path), "2"],
        capture_output=True,
        text=True,
        env=child_environment(),
        timeout=120,
        preexec_fn=limit_open_files,
    )
    assert done.returncode == 0, f"writer process failed ({done.returncode}):\n{done.stderr}"
    assert done.stdout.split()[0] == "CacheWriteSuccess", f"write result: {done.stdout}"
    dataset = runtime.cached_dataset(
        [tmp_path / "tiny"], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    assert [sample.data for sample in dataset] == [i.to_bytes(4, "little") * 4 for i in range(3000)]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a file name that is not UTF-8")
def test_a_cache_under_a_directory_whose_name_is_not_utf8_is_reported_written(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    base = Path(os.fsdecode(os.fsencode(tmp_path) + b"/dir_\xff"))
    results = runtime.write_cache(ListSource("s", simple_samples(10)), base, writer_config=QUIET)
    assert results == [CacheWriteSuccess("s", base / "s")], results
    dataset = runtime.cached_dataset([base / "s"], reader_config=ReaderConfig(seed=0))
    assert len(list(dataset)) == 10


def test_a_source_whose_writer_cannot_be_created_gets_no_profile_entry(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # It wrote nothing; an entry without stages would break the profile's format.
    profile = tmp_path / "p.json"
    config = profiled(profile)
    base = tmp_path / "c"
    (base / "taken").mkdir(parents=True)
    results = runtime.write_cache(
        [ListSource("taken", simple_samples(3)), ListSource("fresh", simple_samples(3))],
        base,
        writer_config=config,
    )
    assert not isinstance(results[0], CacheWriteSuccess), results
    assert isinstance(results[1], CacheWriteSuccess), results
    check_profile(profile, ["fresh"])


def test_an_interrupt_before_a_source_is_profiled_leaves_the_previous_entry_alone(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second source's writer exists when the interrupt lands, but it has no
    # entry yet: its figures must not overwrite the first source's.
    start_source = WriterProfile.start_source

    def interrupted(profile: WriterProfile, name: str) -> None:
        if name == "second":
            raise KeyboardInterrupt
        start_source(profile, name)

    monkeypatch.setattr(WriterProfile, "start_source", interrupted)
    profile = tmp_path / "p.json"
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(
            [ListSource("first", simple_samples(300)), ListSource("second", simple_samples(3))],
            tmp_path / "c",
            writer_config=profiled(profile),
        )
    document = check_profile(profile, ["first"])
    stages = {stage["name"]: stage for stage in document["sources"][0]["stages"]}
    assert stages["python_next"]["calls"] >= 300, stages["python_next"]
    assert stages["disk_write"]["bytes"] > 0, stages["disk_write"]


def test_threads_writing_with_one_profile_path_each_write_a_whole_profile(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    profile = tmp_path / "p.json"
    config = profiled(profile)
    errors: list[BaseException] = []

    def write(thread: int) -> None:
        try:
            for round_ in range(15):
                name = f"t{thread}-{round_}"
                results = runtime.write_cache(
                    ListSource(name, simple_samples(2)), tmp_path / "c", writer_config=config
                )
                assert isinstance(results[0], CacheWriteSuccess), results
        except BaseException as error:  # noqa: BLE001 - reported to the main thread
            errors.append(error)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(json.loads(profile.read_text())["sources"]) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def tls_block_bytes(library: Path) -> int | None:
    """The size of an ELF64 little-endian library's thread-local block (PT_TLS p_memsz)."""
    data = library.read_bytes()
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return None
    (table,) = struct.unpack_from("<Q", data, 0x20)
    entry_bytes, entries = struct.unpack_from("<HH", data, 0x36)
    for entry in range(entries):
        at = table + entry * entry_bytes
        if struct.unpack_from("<I", data, at)[0] == 7:  # PT_TLS
            (size,) = struct.unpack_from("<Q", data, at + 0x28)
            return int(size)
    return 0


def test_the_library_gives_each_thread_a_small_thread_local_block() -> None:
    # glibc allocates and zeroes a dlopen'ed library's whole TLS block for every
    # thread that touches it: each worker and each calling thread. Zig's default
    # per-thread signal stack (256 KiB, a threadlocal array) once made that
    # 67 MiB for a runtime of 256 workers.
    size = tls_block_bytes(Path(_native.library_path))
    if size is None:
        pytest.skip("not an ELF64 little-endian library")
    assert size < 16 * 1024, f"thread-local block of {size} bytes"


def test_write_cache_and_from_cache_sources_take_any_sequence_of_a_source_class(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # Typed as the user's own class: mypy (strict, over the tests) checks that the
    # signatures take a Sequence, which a `list[CacheSource]` parameter would refuse.
    listed: list[ListSource] = [ListSource("a", simple_samples(3))]
    paired: tuple[ListSource, ...] = (ListSource("b", simple_samples(2)),)
    written = runtime.write_cache(listed, tmp_path, writer_config=QUIET)
    assert [type(result) for result in written] == [CacheWriteSuccess]
    opened = runtime.from_cache_sources(
        paired, tmp_path, reader_config=ReaderConfig(seed=0), writer_config=QUIET
    )
    assert isinstance(opened, CacheSourcesDatasetSuccess)
    assert len(opened.dataset) == 2
