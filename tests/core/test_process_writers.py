"""`WriterConfig(num_processes=N, process_timeout_seconds=T)`: sources written by
spawned processes. Results in source order, the same bytes as in-process writing,
a timeout that stops the process and leaves no staging directory, sources that do
not pickle, progress and the profile, and the checks of both fields.

The sources below are module-level classes: the writer processes import this
module to unpickle them."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

import pydantic
import pytest

from conftest import ListSource, published_entries, simple_samples, staging_dirs
from dataset_rt import (
    CacheInput,
    CacheSource,
    CacheSourcesDatasetSuccess,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
    WriterProfilerConfig,
)
from dataset_rt._core import process_writing as _process_writing

TWO = WriterConfig(num_processes=2, show_progress=False)


class Sleeper:
    """Yields one sample, then sleeps (a hung source)."""

    def __init__(self, name: str, seconds: float, ignore_sigterm: bool = False) -> None:
        self.name = name
        self.seconds = seconds
        self.ignore_sigterm = ignore_sigterm

    def __iter__(self) -> Iterator[CacheInput]:
        if self.ignore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        yield CacheInput(b"first", {"i": 0})
        time.sleep(self.seconds)
        yield CacheInput(b"second", {"i": 1})


class Exits:
    """Ends its writer process in the middle of the source, as a crash would."""

    name = "exits"

    def __iter__(self) -> Iterator[CacheInput]:
        yield CacheInput(b"x", {"i": 0})
        os._exit(3)


def _refuse_to_unpickle() -> NoReturn:
    raise RuntimeError("this source cannot be rebuilt here")


class PicklesButDoesNotUnpickle(ListSource):
    def __reduce__(self) -> tuple[Any, ...]:
        return (_refuse_to_unpickle, ())


class Interrupts:
    name = "interrupts"

    def __iter__(self) -> Iterator[CacheInput]:
        yield CacheInput(b"x", {"i": 0})
        raise KeyboardInterrupt


def sources(count: int, samples: int = 300) -> list[ListSource]:
    """Sources of different lengths (the first the longest), so they finish out of order."""
    return [
        ListSource(f"part-{k}", simple_samples(samples if k == 0 else 20 + k, payload_bytes=64))
        for k in range(count)
    ]


def as_sources(given: Iterable[CacheSource]) -> list[CacheSource]:
    return list(given)


def read_back(runtime: DatasetRuntime, path: Path) -> list[tuple[bytes, dict[str, Any]]]:
    config = ReaderConfig(seed=0, shuffle=False)
    return [
        (bytes(s.data), dict(s.metadata))
        for s in runtime.cached_dataset([path], reader_config=config)
    ]


def cache_files(base: Path) -> dict[str, bytes]:
    """Every file of every cache under `base`, by its path relative to `base`."""
    return {
        str(path.relative_to(base)): path.read_bytes()
        for path in sorted(base.rglob("*"))
        if path.is_file() and path.relative_to(base).parts[0] != "tmp"
    }


def test_results_keep_source_order_and_each_cache_holds_its_source(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    given = sources(5)
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=TWO)
    assert results == [CacheWriteSuccess(s.name, tmp_path / s.name) for s in given]
    for source in given:
        assert read_back(runtime, tmp_path / source.name) == source.samples
    assert staging_dirs(tmp_path) == []


@pytest.mark.parametrize("format_version", [2, 3])
def test_caches_written_by_processes_equal_in_process_ones_byte_for_byte(
    runtime: DatasetRuntime, tmp_path: Path, format_version: Literal[2, 3]
) -> None:
    base = WriterConfig(show_progress=False, max_shard_bytes=2000, format_version=format_version)
    in_process, by_processes = tmp_path / "n0", tmp_path / "n2"
    runtime.write_cache(as_sources(sources(3)), in_process, writer_config=base)
    config = base.model_copy(update={"num_processes": 2})
    runtime.write_cache(as_sources(sources(3)), by_processes, writer_config=config)
    expected = cache_files(in_process)
    assert len([name for name in expected if name.endswith(".bin")]) > 6  # several shards
    assert cache_files(by_processes) == expected


def test_a_source_past_the_timeout_is_an_error_naming_it_and_leaves_no_staging(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    config = WriterConfig(num_processes=2, process_timeout_seconds=2.5, show_progress=False)
    given: list[CacheSource] = [Sleeper("hung", 60), *sources(3)]
    started = time.monotonic()
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=config)
    assert time.monotonic() - started < 30
    assert results[0] == CacheWriteError(
        "hung",
        "writing source 'hung' took longer than process_timeout_seconds=2.5: "
        "its writer process was stopped",
    )
    assert [type(r) for r in results[1:]] == [CacheWriteSuccess] * 3
    assert published_entries(tmp_path) == ["part-0", "part-1", "part-2"]
    # SIGTERM unwound the write: its staging directory and lock file are gone.
    assert sorted(os.listdir(tmp_path / "tmp")) == []


def test_a_source_that_ignores_sigterm_is_killed_and_its_staging_removed(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process_writing, "_STOP_GRACE_SECONDS", 0.5)
    config = WriterConfig(num_processes=1, process_timeout_seconds=2.0, show_progress=False)
    given: list[CacheSource] = [Sleeper("stubborn", 60, ignore_sigterm=True), *sources(1)]
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=config)
    assert isinstance(results[0], CacheWriteError)
    assert "process_timeout_seconds=2" in results[0].message
    assert results[1] == CacheWriteSuccess("part-0", tmp_path / "part-0")
    assert staging_dirs(tmp_path) == []
    assert published_entries(tmp_path) == ["part-0"]


def test_a_source_that_does_not_pickle_is_an_error_saying_it_must(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    unpicklable = ListSource("lambda", [(b"x", {"i": 0})])
    unpicklable.transform = lambda x: x  # type: ignore[attr-defined]
    given = [unpicklable, *sources(1)]
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=TWO)
    assert isinstance(results[0], CacheWriteError)
    assert results[0].source_name == "lambda"
    assert results[0].message.startswith("source 'lambda' cannot be pickled (")
    assert "num_processes=2" in results[0].message and "must pickle" in results[0].message
    assert results[1] == CacheWriteSuccess("part-0", tmp_path / "part-0")


def test_a_source_that_cannot_be_unpickled_in_its_process_is_an_error(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    given = [PicklesButDoesNotUnpickle("odd", [(b"x", {"i": 0})]), *sources(1)]
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=TWO)
    assert isinstance(results[0], CacheWriteError)
    assert results[0].message.startswith(
        "source 'odd' cannot be unpickled in its writer process "
        "(RuntimeError: this source cannot be rebuilt here)"
    )
    assert isinstance(results[1], CacheWriteSuccess)


def test_a_writer_process_that_dies_fails_its_source_only(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    given: list[CacheSource] = [Exits(), *sources(3)]
    results = runtime.write_cache(as_sources(given), tmp_path, writer_config=TWO)
    assert results[0] == CacheWriteError(
        "exits", "the writer process of source 'exits' exited with code 3 while writing it"
    )
    assert [type(r) for r in results[1:]] == [CacheWriteSuccess] * 3
    assert staging_dirs(tmp_path) == []


def test_source_errors_and_bad_names_are_reported_as_in_process(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    given = [
        ListSource("bad", [(b"x", {"i": 0}), ("text", {"i": 1})]),
        ListSource("tmp", [(b"x", {"i": 0})]),
        *sources(1),
    ]
    serial = runtime.write_cache(
        as_sources(given), tmp_path / "n0", writer_config=WriterConfig(show_progress=False)
    )
    parallel = runtime.write_cache(as_sources(given), tmp_path / "n2", writer_config=TWO)
    assert [type(r) for r in serial] == [CacheWriteError, CacheWriteError, CacheWriteSuccess]
    assert parallel[:2] == serial[:2]


def test_keyboard_interrupt_in_a_source_propagates(runtime: DatasetRuntime, tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(as_sources([Interrupts()]), tmp_path, writer_config=TWO)
    assert staging_dirs(tmp_path) == []


def test_progress_counts_every_source_and_sample(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    config = WriterConfig(num_processes=2)
    given = sources(3)
    runtime.write_cache(as_sources(given), tmp_path, writer_config=config)
    lines = stream.getvalue().splitlines()
    total = sum(len(source.samples) for source in given)
    assert lines[0].startswith("dataset_rt: writing 3 sources in 2 processes: ")
    assert lines[-1].startswith(f"dataset_rt: writing 3 sources in 2 processes: {total} samples")
    assert lines[-1].endswith("| sources 3/3, ETA 0s")
    assert all("samples/s" in line and "MB/s" in line for line in lines)


def test_the_profile_lists_every_source_in_source_order(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    profile_path = tmp_path / "profile.json"
    profiler = WriterProfilerConfig(enabled=True, path=profile_path)
    config = TWO.model_copy(update={"profiler": profiler})
    given = sources(3)
    runtime.write_cache(as_sources(given), tmp_path / "caches", writer_config=config)
    profile = json.loads(profile_path.read_text())
    assert [entry["source_name"] for entry in profile["sources"]] == [s.name for s in given]
    for entry, source in zip(profile["sources"], given, strict=True):
        stages = {stage["name"]: stage for stage in entry["stages"]}
        assert stages["python_extract"]["calls"] == len(source.samples)


def test_from_cache_sources_reuses_published_caches_and_writes_the_rest(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    given = sources(3)
    runtime.write_cache(as_sources(given[:1]), tmp_path, writer_config=TWO)
    result = runtime.from_cache_sources(
        as_sources(given),
        tmp_path,
        reader_config=ReaderConfig(seed=0, shuffle=False),
        writer_config=TWO,
    )
    assert result.results == [CacheWriteSuccess(s.name, tmp_path / s.name) for s in given]
    assert isinstance(result, CacheSourcesDatasetSuccess)
    assert len(result.dataset) == sum(len(s.samples) for s in given)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"num_processes": -1}, "num_processes must be between 0 (write in this process) and"),
        ({"num_processes": 4097}, "and 4096, got 4097"),
        ({"num_processes": True}, "num_processes must be an int (0 writes in this process)"),
        ({"num_processes": 1.5}, "num_processes must be an int"),
        ({"process_timeout_seconds": 0}, "positive, finite number of seconds, got 0"),
        ({"process_timeout_seconds": -2.0}, "positive, finite number of seconds, got -2.0"),
        ({"process_timeout_seconds": float("inf")}, "got inf"),
        ({"process_timeout_seconds": float("nan")}, "got nan"),
        ({"process_timeout_seconds": "10"}, "process_timeout_seconds must be a number, got '10'"),
    ],
)
def test_the_fields_are_checked_with_the_value_named(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        WriterConfig(**fields)
    assert expected in str(caught.value)


def test_the_defaults_write_in_this_process() -> None:
    config = WriterConfig()
    assert (config.num_processes, config.process_timeout_seconds) == (0, 3600.0)
    assert WriterConfig(process_timeout_seconds=2).process_timeout_seconds == 2.0


def test_processes_that_cannot_start_in_time_fail_every_source(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    config = WriterConfig(num_processes=2, process_timeout_seconds=0.001, show_progress=False)
    results = runtime.write_cache(as_sources(sources(3)), tmp_path, writer_config=config)
    assert [r.source_name for r in results] == ["part-0", "part-1", "part-2"]
    for result in results:
        assert isinstance(result, CacheWriteError)
        assert result.message.startswith(
            "no writer process could start: one was stopped before it was ready within "
            "process_timeout_seconds=0.001"
        )
    assert published_entries(tmp_path) == []
