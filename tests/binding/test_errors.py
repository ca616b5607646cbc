"""dataset_rt.errors: every failure raises a public class under `DatasetRtError` that
keeps its built-in base, and the core's messages say what the system refused in words
(`not a directory`, `too many open files: the limit is 64 (ulimit -n)`), never with a
Zig error name (`NotDir`, `ProcessFdQuotaExceeded`)."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dataset_rt
from conftest import QUIET, ListSource, pythonpath_before_inherited, simple_samples
from dataset_rt import (
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
    verify,
)
from dataset_rt._binding import native as _native
from dataset_rt.errors import (
    CacheExistsError,
    CacheIOError,
    DatasetRtError,
    InvalidArgumentError,
    InvalidCacheError,
    InvalidInputError,
    OutOfMemoryError,
    RemoteError,
    SampleNotFoundError,
    StateError,
    WrongProcessError,
)

CONFIG = ReaderConfig(seed=0, shuffle=False)
# Two or more capitalized parts run together, as Zig error names are: NotDir, IsDir,
# FileNotFound, ProcessFdQuotaExceeded, SyntaxError.
ERROR_NAME = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")

# Each class, the status the core reports it with, and the built-ins it keeps.
CLASSES: list[tuple[type[DatasetRtError], int, tuple[type[BaseException], ...]]] = [
    (InvalidArgumentError, _native.ERR_INVALID_ARGUMENT, (ValueError,)),
    (InvalidInputError, _native.ERR_INVALID_INPUT, (ValueError,)),
    (InvalidCacheError, _native.ERR_INVALID_CACHE, (ValueError, RuntimeError)),
    (CacheIOError, _native.ERR_IO, (OSError, RuntimeError)),
    (OutOfMemoryError, _native.ERR_OUT_OF_MEMORY, (MemoryError,)),
    (CacheExistsError, _native.ERR_ALREADY_EXISTS, (FileExistsError, OSError)),
    (WrongProcessError, _native.ERR_WRONG_PROCESS, (RuntimeError,)),
    (StateError, _native.ERR_STATE, (RuntimeError,)),
    (SampleNotFoundError, _native.ERR_OUT_OF_RANGE, (IndexError,)),
]
CLASS_IDS = [cls.__name__ for cls, _, _ in CLASSES]


def assert_in_words(message: str, *words: str) -> None:
    for expected in words:
        assert expected in message, f"{expected!r} is not in: {message}"
    assert not ERROR_NAME.search(message), f"an error name reached the user: {message}"


# ---- the classes --------------------------------------------------------------------


def test_the_errors_module_is_a_submodule_of_the_package() -> None:
    assert dataset_rt.errors.DatasetRtError is DatasetRtError
    # RemoteError: the transports' CacheIOError (a remote file not fetched), no status
    # of its own.
    assert sorted(dataset_rt.errors.__all__) == sorted(
        ["DatasetRtError", "RemoteError", "CacheWriteFailedError", *CLASS_IDS]
    )
    # CacheWriteFailedError: a partition's write failed (raised by the package, with
    # the cause's status when it has one).
    failed = dataset_rt.errors.CacheWriteFailedError("partition 0 failed")
    assert isinstance(failed, (DatasetRtError, RuntimeError)) and failed.status == 2
    assert dataset_rt.errors.CacheWriteFailedError("x", 6).status == 6
    assert issubclass(RemoteError, CacheIOError) and RemoteError.status == _native.ERR_IO


@pytest.mark.parametrize(("cls", "status", "builtins"), CLASSES, ids=CLASS_IDS)
def test_each_status_raises_its_class_which_keeps_its_builtin_bases(
    cls: type[DatasetRtError], status: int, builtins: tuple[type[BaseException], ...]
) -> None:
    with pytest.raises(cls) as raised:
        _native.check(status)
    assert type(raised.value) is cls
    assert raised.value.status == status == cls.status
    expected: tuple[type[BaseException], ...] = (DatasetRtError, *builtins)
    for builtin in expected:
        assert isinstance(raised.value, builtin), (cls, builtin)


@pytest.mark.parametrize(("cls", "status", "builtins"), CLASSES, ids=CLASS_IDS)
def test_an_error_survives_pickling_as_a_dataloader_worker_sends_it(
    cls: type[DatasetRtError], status: int, builtins: tuple[type[BaseException], ...]
) -> None:
    again = pickle.loads(pickle.dumps(cls("cache c: it broke")))
    assert type(again) is cls
    assert str(again) == "cache c: it broke"
    assert again.status == status


@pytest.mark.parametrize(("cls", "status", "builtins"), CLASSES, ids=CLASS_IDS)
def test_an_error_survives_tblibs_pickling_as_dask_installs_it(
    cls: type[DatasetRtError], status: int, builtins: tuple[type[BaseException], ...]
) -> None:
    """dask installs tblib's reducer for every exception class; one without its own
    __reduce__ was rebuilt through cls.__new__(cls), which MemoryError refuses."""
    support = pytest.importorskip("tblib.pickling_support")
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = {cls: support.pickle_exception}  # as install() registers it
    pickler.dump(cls("cache c: it broke", status=99))
    again = pickle.loads(buffer.getvalue())
    assert type(again) is cls
    assert str(again) == "cache c: it broke"
    assert again.status == 99


# ---- which operation raises which ------------------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    base = tmp_path_factory.mktemp("errors")
    [result] = runtime.write_cache(ListSource("c", simple_samples(5)), base, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path


def test_a_closed_runtime_raises_a_state_error(cache: Path) -> None:
    closed = DatasetRuntime(num_workers=1)
    closed.close()
    with pytest.raises(StateError, match="this DatasetRuntime is closed"):
        closed.cached_dataset([cache], reader_config=CONFIG)


def test_an_unknown_identity_raises_sample_not_found(runtime: DatasetRuntime, cache: Path) -> None:
    dataset = runtime.cached_dataset([cache], reader_config=CONFIG)
    with pytest.raises(SampleNotFoundError, match=r"cache 0 has 5 samples") as raised:
        dataset.get(0, 5)
    assert raised.value.status == _native.ERR_OUT_OF_RANGE
    with pytest.raises(SampleNotFoundError, match=r"no sample \(cache_id=0, sample_id=-1\)"):
        dataset.get_many([(0, -1)])


def test_bad_arguments_and_tables_raise_their_classes(runtime: DatasetRuntime, cache: Path) -> None:
    dataset = runtime.cached_dataset([cache], reader_config=CONFIG)
    with pytest.raises(InvalidArgumentError, match="epoch_len must be at least 1"):
        dataset.set_epoch_len(0)
    with pytest.raises(InvalidArgumentError, match="not a DatasetRT state"):
        dataset.load_state_dict({})
    null_weight = dataset.get_metadata().with_columns(weight=pl.lit(None, dtype=pl.Float64))
    with pytest.raises(InvalidInputError, match="'weight' contains null") as raised:
        dataset.update_metadata(null_weight)
    assert raised.value.status == _native.ERR_INVALID_INPUT


def test_a_write_target_that_exists_is_a_cache_exists_error(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    from dataset_rt._binding.writer import NativeWriter

    (tmp_path / "taken").mkdir()
    writer = NativeWriter()
    try:
        with pytest.raises(CacheExistsError, match="cache path already exists"):
            writer.create(runtime._live_handle(), tmp_path, "taken", QUIET)
    finally:
        writer.destroy()


# ---- messages in words ---------------------------------------------------------------


def test_a_cache_path_that_is_a_file_is_not_a_directory(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    file = tmp_path / "afile"
    file.write_text("x")
    with pytest.raises(InvalidCacheError) as raised:
        runtime.cached_dataset([file], reader_config=CONFIG)
    assert_in_words(str(raised.value), f"cache {file}: ", "not a directory")


def test_a_missing_cache_is_no_such_file_or_directory(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(InvalidCacheError) as raised:
        runtime.cached_dataset([missing], reader_config=CONFIG)
    assert_in_words(
        str(raised.value),
        f"cache {missing}: missing manifest: cannot open the cache directory: "
        "no such file or directory",
    )
    report = verify(missing, show_progress=False)
    [problem] = report.problems
    assert_in_words(problem.message, "cannot open the cache directory: no such file or directory")


def test_a_name_too_long_for_the_system_is_an_os_error_in_words(runtime: DatasetRuntime) -> None:
    with pytest.raises(CacheIOError) as raised:
        runtime.cached_dataset(["x" * 300], reader_config=CONFIG)
    assert isinstance(raised.value, OSError)
    assert_in_words(str(raised.value), "I/O error: cannot open the cache directory: ")
    assert "file name too long" in str(raised.value)


def test_writing_below_a_file_is_not_a_directory(runtime: DatasetRuntime, tmp_path: Path) -> None:
    file = tmp_path / "afile"
    file.write_text("x")
    [result] = runtime.write_cache(
        ListSource("s", simple_samples(2)), file / "sub", writer_config=QUIET
    )
    assert isinstance(result, CacheWriteError), result
    assert_in_words(result.message, f"cannot create directory {file / 'sub'}: not a directory")


def test_a_manifest_that_is_not_json_says_so_in_words(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "manifest.json").write_text("{not json")
    with pytest.raises(InvalidCacheError) as raised:
        runtime.cached_dataset([tmp_path / "j"], reader_config=CONFIG)
    assert_in_words(
        str(raised.value),
        "JSON error: manifest.json is invalid JSON (syntax error at line 1, column 2)",
    )


OPEN_WITH_FEW_FILES = textwrap.dedent(
    """
    import json, os, resource, sys
    from dataset_rt import DatasetRuntime, ReaderConfig

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), hard))
    runtime = DatasetRuntime(num_workers=1)
    # The process's own files take every descriptor left.
    files = []
    try:
        while True:
            files.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        runtime.cached_dataset([sys.argv[1]], reader_config=ReaderConfig(seed=0))
    except Exception as error:
        print(json.dumps({"mro": [c.__name__ for c in type(error).__mro__],
                          "status": getattr(error, "status", None), "message": str(error)}))
    else:
        print(json.dumps({"opened": True}))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_too_many_open_files_names_the_limit(runtime: DatasetRuntime, tmp_path: Path) -> None:
    # One shard per sample; the cache would open with 64 descriptors (the process
    # holds at most 64 shard files open), but the process's own files take them all.
    config = WriterConfig(show_progress=False, max_shard_bytes=1)
    [result] = runtime.write_cache(
        ListSource("many", simple_samples(200)), tmp_path, writer_config=config
    )
    assert isinstance(result, CacheWriteSuccess), result
    assert len(list((result.path / "shards").iterdir())) == 200
    package_parent = Path(dataset_rt.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": pythonpath_before_inherited(package_parent)}
    done = subprocess.run(
        [sys.executable, "-c", OPEN_WITH_FEW_FILES, str(result.path), "64"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert "mro" in outcome, f"the cache opened with 64 files: {outcome}"
    assert outcome["mro"][:2] == ["CacheIOError", "DatasetRtError"], outcome
    assert {"OSError", "RuntimeError"} <= set(outcome["mro"]), outcome
    assert outcome["status"] == _native.ERR_IO
    assert_in_words(
        outcome["message"],
        f"cache {result.path}: I/O error: cannot open the cache directory",
        ": too many open files: the limit is 64 (ulimit -n); dataset_rt holds 0 shard files",
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_base_folder_that_cannot_be_written_is_refused_in_words(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    """Root ignores permission bits, so there a read-only mount stands in for them."""
    base = tmp_path / "base"
    base.mkdir()
    if os.geteuid() != 0:
        base.chmod(0o500)
        expected = "permission denied"
    else:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(base)],
            capture_output=True,
            text=True,
        )
        if mounted.returncode != 0:
            pytest.skip(f"root, and cannot mount a read-only tmpfs: {mounted.stderr.strip()}")
        expected = "read-only file system"
    try:
        [result] = runtime.write_cache(
            ListSource("s", simple_samples(2)), base, writer_config=QUIET
        )
    finally:
        if os.geteuid() != 0:
            base.chmod(0o700)
        else:
            subprocess.run(["umount", str(base)], check=True)
    assert isinstance(result, CacheWriteError), result
    assert_in_words(result.message, f"cannot create {base}/tmp: {expected}")
