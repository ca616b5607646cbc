"""`dataset-rt write folder` and `write parquet`: names checked before any work, the
default name, --overwrite that never loses the old cache, progress on terminals only,
and the columns `write parquet` leaves out."""

from __future__ import annotations

import datetime
import inspect
import os
import pty
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from cli_helpers import (
    PACKAGE_ROOT,
    invoke,
    invoke_json,
    make_folder,
    make_parquet,
    no_internal_words,
    read_back,
)
from conftest import pythonpath_before_inherited
from dataset_rt import CacheInput, DatasetRuntime
from dataset_rt._binding import native as _native
from dataset_rt.sources import FolderSource, ParquetSource


@pytest.fixture
def no_input_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a source is made: the command must stop before reading any input."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the input was read")

    monkeypatch.setattr(FolderSource, "__init__", refuse)
    monkeypatch.setattr(ParquetSource, "__init__", refuse)


# --- one sample per file or per row ---------------------------------------------------------


@pytest.mark.parametrize("lz4", [False, True])
def test_write_folder_writes_one_sample_per_file(
    runtime: DatasetRuntime, tmp_path: Path, lz4: bool
) -> None:
    files = make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    flags = ["--lz4"] if lz4 else []
    written = invoke_json(
        "write", "folder", tmp_path / "images", "--out", base, "--name", "pics",
        "--labels", "name", *flags,
    )  # fmt: skip
    cache = base / "pics"
    assert written["source_name"] == "pics" and written["path"] == str(cache)
    assert written["samples"] == len(files) and written["bytes_on_disk"] > 0
    expected = [
        (data, {"label": relative.split("/")[0], "path": relative, "size_bytes": len(data)})
        for relative, data in sorted(files.items())
    ]
    assert read_back(runtime, cache) == expected
    [info] = invoke_json("info", cache)
    assert info["compression"][0]["algo"] == ("lz4" if lz4 else "none")


def test_write_folder_options_and_refusals(runtime: DatasetRuntime, tmp_path: Path) -> None:
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    images = tmp_path / "images"
    result = invoke(
        "write", "folder", images, "-o", base, "--name", "png", "-e", ".png",
        "--labels", "none", "--no-progress", code=0,
    )  # fmt: skip
    assert result.stdout.startswith(f"wrote {base / 'png'}: 3 samples")
    assert [metadata for _, metadata in read_back(runtime, base / "png")][0] == {
        "path": "cat/001.png",
        "size_bytes": 12,
    }
    # The target exists: the write is refused, the cache kept.
    again = invoke("write", "folder", images, "-o", base, "--name", "png", code=1)
    assert (
        again.stderr
        == f"dataset-rt: {base / 'png'} already exists; pass --overwrite to replace it\n"
    )
    # Nothing matches: the source refuses.
    none = invoke("write", "folder", images, "-o", base, "--name", "x", "-e", ".jpg", code=1)
    assert "no files with extensions ['.jpg']" in none.stderr
    # Usage errors: a missing folder, a file instead of a folder, a missing --name.
    invoke("write", "folder", tmp_path / "nope", "-o", base, "--name", "x", code=2)
    invoke("write", "folder", images / "cat" / "001.png", "-o", base, "--name", "x", code=2)
    invoke("write", "folder", images, "--name", "x", code=2)  # no --out
    invoke("write", "folder", images, "-o", base, "--name", "x", "--labels", "child", code=2)
    assert sorted(p.name for p in base.iterdir() if p.name != "tmp") == ["png"]


@pytest.mark.parametrize("lz4", [False, True])
def test_write_parquet_writes_one_sample_per_row(
    runtime: DatasetRuntime, tmp_path: Path, lz4: bool
) -> None:
    expected = make_parquet(tmp_path / "a.parquet", 0, 50)
    expected += make_parquet(tmp_path / "b.parquet", 50, 30)
    base = tmp_path / "caches"
    flags = ["--lz4"] if lz4 else []
    written = invoke_json(
        "write", "parquet", tmp_path / "a.parquet", tmp_path / "b.parquet",
        "--data-column", "image", "-m", "label", "-m", "split",
        "--out", base, "--name", "rows", *flags,
    )  # fmt: skip
    assert written["samples"] == 80 and written["path"] == str(base / "rows")
    assert read_back(runtime, base / "rows") == expected
    [info] = invoke_json("info", base / "rows")
    assert info["compression"][0]["algo"] == ("lz4" if lz4 else "none")


def test_write_parquet_refusals(tmp_path: Path) -> None:
    make_parquet(tmp_path / "a.parquet", 0, 5)
    base = tmp_path / "caches"
    source = tmp_path / "a.parquet"
    missing = invoke(
        "write", "parquet", source, "--data-column", "nope", "-o", base, "--name", "x", code=1
    )
    assert "data column 'nope' is not in" in missing.stderr
    not_binary = invoke(
        "write", "parquet", source, "--data-column", "label", "-o", base, "--name", "x", code=1
    )
    assert "data column 'label' has type int64" in not_binary.stderr
    invoke(
        "write",
        "parquet",
        tmp_path / "nope.parquet",
        "--data-column",
        "image",
        "-o",
        base,
        "--name",
        "x",
        code=2,
    )
    invoke("write", "parquet", source, "-o", base, "--name", "x", code=2)  # no --data-column
    assert not (base / "x").exists()


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a/b", '"a/b" contains a path separator'),
        ("..", '".." is a relative directory reference'),
        (".", '"." is a relative directory reference'),
        ("tmp", "'tmp' is reserved"),
        ("", '"" is empty'),
        ("x" * 251, f'"{"x" * 251}" is longer than 250 bytes'),
    ],
)
def test_a_bad_name_is_a_usage_error_before_any_work(
    tmp_path: Path, no_input_read: None, name: str, reason: str
) -> None:
    make_folder(tmp_path / "images")
    make_parquet(tmp_path / "t.parquet", 0, 3)
    base = tmp_path / "caches"
    commands: list[list[str | Path]] = [
        ["folder", tmp_path / "images"],
        ["parquet", tmp_path / "t.parquet", "--data-column", "image"],
    ]
    for command in commands:
        result = invoke("write", *command, "-o", base, "--name", name, code=2)
        assert "Usage:" in result.stderr
        assert f"Invalid value for '--name': {reason}" in result.stderr, result.stderr
        no_internal_words(result.stderr)
    assert not base.exists()


def test_the_name_defaults_to_the_folder_or_the_first_files_stem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_folder(tmp_path / "images")
    make_parquet(tmp_path / "part-0.parquet", 0, 5)
    make_parquet(tmp_path / "part-1.parquet", 5, 5)
    base = tmp_path / "caches"
    folder = invoke_json("write", "folder", tmp_path / "images", "-o", base)
    assert (folder["source_name"], folder["path"]) == ("images", str(base / "images"))
    # "." and a trailing slash name the folder itself.
    monkeypatch.chdir(tmp_path / "images")
    assert invoke_json("write", "folder", ".", "-o", tmp_path / "b1")["source_name"] == "images"
    assert (
        invoke_json("write", "folder", "cat/", "-o", tmp_path / "b2", "--labels", "none")[
            "source_name"
        ]
        == "cat"
    )
    rows = invoke_json(
        "write", "parquet", tmp_path / "part-0.parquet", tmp_path / "part-1.parquet",
        "--data-column", "image", "-o", base,
    )  # fmt: skip
    assert (rows["source_name"], rows["samples"]) == ("part-0", 10)


def test_a_default_name_that_cannot_be_used_is_a_usage_error(
    tmp_path: Path, no_input_read: None
) -> None:
    folder = tmp_path / "tmp"
    folder.mkdir()
    result = invoke("write", "folder", folder, "-o", tmp_path / "caches", code=2)
    assert (
        "Invalid value for '--name': the cache would be named after the folder, but "
        "'tmp' is reserved" in result.stderr
    )
    assert "pass --name NAME" in result.stderr


def test_an_existing_target_is_refused_before_the_input_is_read(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, code=0)
    monkeypatch.setattr(FolderSource, "__init__", lambda *a, **k: pytest.fail("input read"))
    result = invoke("write", "folder", tmp_path / "images", "-o", base, code=1)
    assert result.stderr == (
        f"dataset-rt: {base / 'images'} already exists; pass --overwrite to replace it\n"
    )
    (base / "stray").mkdir()
    for flags in ([], ["--overwrite"]):
        result = invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "stray",
                        *flags, code=1)  # fmt: skip
        assert (
            result.stderr
            == f"dataset-rt: {base / 'stray'} exists and is not a cache; not replacing it\n"
        )


def test_an_out_that_is_a_file_is_a_usage_error(tmp_path: Path, no_input_read: None) -> None:
    make_folder(tmp_path / "images")
    (tmp_path / "caches").write_text("")
    result = invoke("write", "folder", tmp_path / "images", "-o", tmp_path / "caches", code=2)
    assert "is a file" in result.stderr


# --- --overwrite ----------------------------------------------------------------------------


def payloads(runtime: DatasetRuntime, cache: Path) -> list[bytes]:
    return [data for data, _ in read_back(runtime, cache)]


def leftovers(base: Path) -> list[str]:
    """What the base holds besides its caches and an empty staging area."""
    found = [
        p.name for p in base.iterdir() if p.name != "tmp" and not (p / "manifest.json").exists()
    ]
    if (base / "tmp").exists():
        found += [f"tmp/{p.name}" for p in (base / "tmp").iterdir()]
    return found


def test_overwrite_publishes_the_new_cache_before_removing_the_old(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "pics", code=0)
    old_payloads = payloads(runtime, base / "pics")
    (tmp_path / "images" / "cat" / "003.png").write_bytes(b"\x89PNG cat three")
    removals: list[tuple[str, list[bytes]]] = []
    real_rmtree = shutil.rmtree

    def watching_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        # When the old cache is removed, the new one is already in place.
        removals.append((Path(path).name, payloads(runtime, base / "pics")))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", watching_rmtree)
    written = invoke_json(
        "write", "folder", tmp_path / "images", "-o", base, "--name", "pics", "--overwrite"
    )
    assert written["replaced"] is True and written["samples"] == len(old_payloads) + 1
    new_payloads = payloads(runtime, base / "pics")
    assert new_payloads == [*old_payloads[:2], b"\x89PNG cat three", *old_payloads[2:]]
    [(work, seen)] = removals
    assert work.endswith(".overwrite") and seen == new_payloads
    assert leftovers(base) == []
    text = invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "pics",
                  "--overwrite", code=0).stdout  # fmt: skip
    assert text.rstrip().endswith("(replaced the old cache)")


def test_overwrite_without_an_old_cache_just_writes(tmp_path: Path) -> None:
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    written = invoke_json("write", "folder", tmp_path / "images", "-o", base, "--overwrite")
    assert (written["replaced"], written["samples"]) == (False, 4)
    assert leftovers(base) == []


def failing_after(count: int) -> Any:
    """A FolderSource.__iter__ that raises after `count` samples."""
    real_iter = FolderSource.__iter__

    def iterate(self: FolderSource) -> Iterator[CacheInput]:
        for index, item in enumerate(real_iter(self)):
            if index == count:
                raise OSError("the disk went away")
            yield item

    return iterate


def test_overwrite_that_fails_midway_leaves_the_old_cache_intact(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "pics", code=0)
    before = {p.relative_to(base): p.read_bytes() for p in base.rglob("*") if p.is_file()}
    monkeypatch.setattr(FolderSource, "__iter__", failing_after(2))
    result = invoke(
        "write", "folder", tmp_path / "images", "-o", base, "--name", "pics", "--overwrite", code=1
    )
    assert "the disk went away" in result.stderr
    no_internal_words(result.stderr)
    after = {p.relative_to(base): p.read_bytes() for p in base.rglob("*") if p.is_file()}
    assert after == before  # byte for byte, and nothing added
    assert leftovers(base) == []
    monkeypatch.undo()
    assert payloads(runtime, base / "pics") == [files[k] for k in sorted(files)]
    assert invoke_json("verify", base / "pics")["ok"] is True


def test_overwrite_whose_swap_fails_puts_the_old_cache_back(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The core moves the old cache aside, then the new one in: that second rename is
    # made to fail by an immutable work folder (as root too), after the first succeeded.
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "pics", code=0)
    old_payloads = payloads(runtime, base / "pics")
    (tmp_path / "images" / "new.png").write_bytes(b"new")
    probe = tmp_path / "probe"
    (probe / "entry").mkdir(parents=True)
    if subprocess.run(["chattr", "+i", probe], capture_output=True, check=False).returncode:
        pytest.skip("chattr +i is not available on this file system")
    subprocess.run(["chattr", "-i", probe], check=True)
    real_replace = _native.replace_cache

    def replace_from_an_immutable_folder(base_dir: Path, name: str, fresh: str) -> bool:
        work = Path(base_dir) / Path(fresh).parent
        subprocess.run(["chattr", "+i", work], check=True)
        try:
            return real_replace(base_dir, name, fresh)
        finally:
            subprocess.run(["chattr", "-i", work], check=True)

    monkeypatch.setattr(_native, "replace_cache", replace_from_an_immutable_folder)
    result = invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "pics",
                    "--labels", "none", "--overwrite", code=1)  # fmt: skip
    assert "cannot rename" in result.stderr and "operation not permitted" in result.stderr
    assert payloads(runtime, base / "pics") == old_payloads
    assert leftovers(base) == []


# --- labels ---------------------------------------------------------------------------------


def test_labels_name_and_none(runtime: DatasetRuntime, tmp_path: Path) -> None:
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "n",
           "--labels", "name", code=0)  # fmt: skip
    assert [m["label"] for _, m in read_back(runtime, base / "n")] == ["cat", "cat", "dog", "dog"]
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "x",
           "--labels", "none", code=0)  # fmt: skip
    assert all(set(m) == {"path", "size_bytes"} for _, m in read_back(runtime, base / "x"))


def test_labels_index_stores_class_indexes(runtime: DatasetRuntime, tmp_path: Path) -> None:
    if "label_kind" not in inspect.signature(FolderSource).parameters:
        pytest.skip("this FolderSource stores folder names only (no label_kind yet)")
    make_folder(tmp_path / "images")
    base = tmp_path / "caches"
    invoke("write", "folder", tmp_path / "images", "-o", base, "--name", "i", code=0)
    metadata = [m for _, m in read_back(runtime, base / "i")]
    assert [(m["label"], m["label_name"]) for m in metadata] == [
        (0, "cat"),
        (0, "cat"),
        (1, "dog"),
        (1, "dog"),
    ]


def test_a_folder_a_source_refuses_is_reported_in_the_commands_words(tmp_path: Path) -> None:
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(b"png")
    result = invoke("write", "folder", tmp_path / "flat", "-o", tmp_path / "c",
                    "--labels", "name", code=1)  # fmt: skip
    assert result.stderr.startswith("dataset-rt: cannot read the input: 'a.png' lies directly in")
    assert "--labels none" in result.stderr
    for python_word in ("FolderSource", "label_from", "extensions="):
        assert python_word not in result.stderr


# --- write parquet: columns left out --------------------------------------------------------


def test_write_parquet_names_every_column_it_leaves_out(tmp_path: Path) -> None:
    rows = 5
    table = pa.table(
        {
            "image": [b"png"] * rows,
            "label": list(range(rows)),
            "ts": pa.array([datetime.datetime(2024, 1, 1)] * rows, pa.timestamp("us")),
            "boxes": [[1, 2]] * rows,
            "price": pa.array([1] * rows, pa.decimal128(5, 2)),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    base = tmp_path / "caches"
    result = invoke("write", "parquet", tmp_path / "t.parquet", "--data-column", "image",
                    "-o", base, code=0)  # fmt: skip
    assert result.stderr.splitlines() == [
        "dataset-rt: left out column 'ts': type timestamp[us] is not bool/int/float/string",
        "dataset-rt: left out column 'boxes': type list<element: int64> is not "
        "bool/int/float/string",
        "dataset-rt: left out column 'price': type decimal128(5, 2) is not bool/int/float/string",
    ]
    written = invoke_json("write", "parquet", tmp_path / "t.parquet", "--data-column", "image",
                          "-o", base, "--name", "j", "-m", "label")  # fmt: skip
    assert written["left_out"] == [
        {"column": "ts", "type": "timestamp[us]", "reason": "not named with -m/--metadata-column"},
        {
            "column": "boxes",
            "type": "list<element: int64>",
            "reason": "not named with -m/--metadata-column",
        },
        {
            "column": "price",
            "type": "decimal128(5, 2)",
            "reason": "not named with -m/--metadata-column",
        },
    ]
    # A column named with -m that cannot be stored is refused, not left out.
    refused = invoke("write", "parquet", tmp_path / "t.parquet", "--data-column", "image",
                     "-o", base, "--name", "k", "-m", "label", "-m", "ts", code=1)  # fmt: skip
    assert "metadata column 'ts' has type timestamp[us]" in refused.stderr
    assert "ParquetSource" not in refused.stderr


# --- progress -------------------------------------------------------------------------------


def child_environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT),
        "TERM": "xterm-256color",
        "COLUMNS": "160",
        "FORCE_COLOR": "1",  # rich would take a pipe for a terminal; the command must not
    }


def write_commands(tmp_path: Path) -> list[list[str]]:
    make_folder(tmp_path / "images")
    make_parquet(tmp_path / "t.parquet", 0, 300)
    base = str(tmp_path / "caches")
    return [
        ["write", "folder", str(tmp_path / "images"), "-o", base, "--progress"],
        ["write", "parquet", str(tmp_path / "t.parquet"), "--data-column", "image", "-o", base],
    ]


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    for command in write_commands(tmp_path):
        completed = subprocess.run(
            [sys.executable, "-m", "dataset_rt", *command],
            capture_output=True,
            env=child_environment(),
            timeout=120,
        )
        assert completed.returncode == 0, completed.stderr
        for output in (completed.stdout, completed.stderr):
            assert b"\r" not in output and b"\x1b" not in output, output
        assert b"%" not in completed.stderr
    # In-process too (the test runner's stderr is no terminal).
    result = invoke("verify", tmp_path / "caches" / "images", "--progress", code=0)
    assert "\r" not in result.stderr and "\x1b" not in result.stderr


def run_on_a_terminal(command: list[str]) -> tuple[int, str, bytes]:
    """Run the command with stderr on a pseudo-terminal: (exit code, what the terminal
    showed, stdout)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "dataset_rt", *command],
        stdout=subprocess.PIPE,
        stderr=terminal,
        env=child_environment(),
    )
    os.close(terminal)
    shown = bytearray()
    while True:
        ready, _, _ = select.select([controller], [], [], 120)
        if not ready:
            process.kill()
            raise AssertionError("no output from the command for 120 s")
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed (Linux)
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.stdout is not None
    with process.stdout:
        stdout = process.stdout.read()
    return process.wait(timeout=120), shown.decode("utf-8", "replace"), stdout


def test_progress_on_a_terminal_shows_percent_and_eta(tmp_path: Path) -> None:
    folder, parquet = write_commands(tmp_path)
    for command, total in ((folder, 4), (parquet, 300)):
        code, shown, stdout = run_on_a_terminal(command)
        assert code == 0, shown
        assert "100%" in shown and f"{total}/{total}" in shown and "ETA" in shown, shown
        assert stdout.startswith(b"wrote ") and b"\x1b" not in stdout
    code, shown, _ = run_on_a_terminal([*folder[:-1], "--name", "quiet", "--no-progress"])
    assert code == 0 and shown == "", shown
