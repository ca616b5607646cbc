"""The `dataset-rt` command (`dataset_rt.cli`): every command on real caches, its exit
codes (0 success, 1 a problem found, 2 a usage error) and its --json output."""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from typer.testing import CliRunner, Result

from conftest import (
    ListSource,
    flip_last_byte_of_record,
    pythonpath_before_inherited,
    record,
    simple_samples,
    without_record_checksums,
)
from dataset_rt import DatasetRuntime, ReaderConfig, ShardCompression, WriterConfig
from dataset_rt.cli import app, main

SAMPLES = simple_samples(40, payload_bytes=100)
TEXT_SAMPLES = [(f"line {i}: hello".encode(), {"i": i}) for i in range(5)]
PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "python"


def invoke(*args: str | Path, code: int) -> Result:
    """Run the command in-process; `code` is the exit code it must end with. A Python
    exception other than SystemExit (a traceback for the user) fails the test."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"dataset-rt {args} raised") from result.exception
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def invoke_json(*args: str | Path, code: int = 0) -> Any:
    return json.loads(invoke(*args, "--json", code=code).stdout)


def write(
    runtime: DatasetRuntime,
    base: Path,
    name: str = "c",
    samples: list[tuple[bytes, dict[str, object]]] = SAMPLES,
    algo: str = "none",
) -> Path:
    config = WriterConfig(
        show_progress=False,
        max_shard_bytes=1_500,
        shard_compression=ShardCompression(algo=algo, ratio=1.0),  # type: ignore[arg-type]
    )
    [result] = runtime.write_cache(ListSource(name, samples), base, writer_config=config)
    return result.path  # type: ignore[union-attr]


# --- the command as a whole -----------------------------------------------------------------

COMMANDS = [
    [],
    ["ls"],
    ["info"],
    ["get"],
    ["head"],
    ["metadata"],
    ["verify"],
    ["migrate"],
    ["write"],
    ["write", "folder"],
    ["write", "parquet"],
    ["demo"],
    ["bench"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "dataset-rt")
def test_every_command_has_help(command: list[str]) -> None:
    result = invoke(*command, "--help", code=0)
    assert "Usage:" in result.stdout and "--help" in result.stdout


def test_no_command_or_an_unknown_one_is_a_usage_error() -> None:
    assert "Usage:" in invoke(code=2).output
    assert "No such command" in invoke("frobnicate", code=2).stderr
    assert "No such option" in invoke("info", "--frobnicate", code=2).stderr


def test_python_m_dataset_rt_runs_the_command() -> None:
    environment = {**os.environ, "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT)}
    completed = subprocess.run(
        [sys.executable, "-m", "dataset_rt", "--help"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    for command in ("ls", "info", "head", "get", "metadata", "verify", "write", "demo", "bench"):
        assert command in completed.stdout
    version = subprocess.run(
        [sys.executable, "-m", "dataset_rt", "--version"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert version.returncode == 0 and version.stdout.startswith("dataset-rt "), version


def test_the_console_script_names_the_entry_point() -> None:
    pyproject = tomllib.loads((PACKAGE_ROOT.parent / "pyproject.toml").read_text())
    target = pyproject["project"]["scripts"]["dataset-rt"]
    module, function = target.split(":")
    assert getattr(importlib.import_module(module), function) is main


# --- info -----------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_info_reports_what_the_cache_holds(
    runtime: DatasetRuntime, tmp_path: Path, algo: str
) -> None:
    cache = write(runtime, tmp_path, algo=algo)
    [info] = invoke_json("info", cache)
    shard_files = sorted((cache / "shards").iterdir())
    assert len(shard_files) >= 3
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert info == {
        "path": str(cache),
        "source_name": "c",
        "format_version": 2,
        "cache_id": None,
        "samples": len(SAMPLES),
        "shards": len(shard_files),
        "bytes_on_disk": sum(p.stat().st_size for p in files),
        "shard_bytes": sum(p.stat().st_size for p in shard_files),
        "payload_bytes_uncompressed": sum(len(data) for data, _ in SAMPLES),
        "compression": [{"algo": algo, "ratio": 1.0}],
        "schema": [
            {"name": "flag", "kind": "bool"},
            {"name": "index", "kind": "int"},
            {"name": "label", "kind": "string"},
            {"name": "score", "kind": "float"},
        ],
        "record_checksums": True,
    }
    text = invoke("info", cache, code=0).stdout
    for expected in ("source name", "format version", "record checksums", "score: float", algo):
        assert expected in text, text


def test_info_tells_whether_record_checksums_are_present(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    without_record_checksums(cache)
    [info] = invoke_json("info", cache)
    assert info["record_checksums"] is False
    rows = invoke("info", cache, code=0).stdout.splitlines()
    [checksums_row] = [row for row in rows if "record checksums" in row]
    assert checksums_row.split("│")[2].strip() == "no", checksums_row


def test_info_reports_a_bad_cache_in_one_line_and_exits_1(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    good = write(runtime, tmp_path / "base")
    not_a_cache = tmp_path / "empty"
    not_a_cache.mkdir()
    good_info, bad_info = invoke_json("info", good, not_a_cache, code=1)
    assert good_info["samples"] == len(SAMPLES)
    message = f"{not_a_cache} is not a cache: it has no manifest.json, and holds no cache"
    assert bad_info == {"path": str(not_a_cache), "error": message}
    result = invoke("info", not_a_cache, code=1)
    assert result.stderr == f"dataset-rt: {message}\n"
    # A cache whose files disagree with its manifest does not open either.
    shard = good / "shards" / "000000.bin"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-1])
    message = f"shards/000000.bin has {size - 1} bytes but the manifest says {size}"
    assert message in invoke("info", good, code=1).stderr


def test_a_missing_path_or_a_file_is_a_usage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_bytes(b"")
    for command in ("ls", "info", "head", "verify"):
        result = invoke(command, tmp_path / "nope", code=2)
        assert "does not exist" in result.stderr
        assert "is a file" in invoke(command, a_file, code=2).stderr
    assert "does not exist" in invoke("get", tmp_path / "nope", "0", code=2).stderr
    assert (
        "does not exist"
        in invoke("metadata", tmp_path / "nope", "-o", tmp_path / "m.csv", code=2).stderr
    )


# --- head -----------------------------------------------------------------------------------


def test_head_shows_the_first_samples_with_a_preview(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    shown = invoke_json("head", cache, "-n", "3")
    assert shown["path"] == str(cache)
    assert [s["sample_id"] for s in shown["samples"]] == [0, 1, 2]
    for sample, (data, metadata) in zip(shown["samples"], SAMPLES, strict=False):
        assert sample["cache_id"] == 0
        assert sample["metadata"] == metadata
        assert sample["payload_bytes"] == len(data)
        assert sample["preview_kind"] == "hex"
        assert bytes.fromhex(sample["preview"]) == data[: sample["preview_bytes"]]
    assert len(invoke_json("head", cache)["samples"]) == 10  # the default
    assert len(invoke_json("head", cache, "-n", "1000")["samples"]) == len(SAMPLES)
    text = invoke("head", cache, "-n", "2", code=0).stdout
    assert "00 01 02 03" in text and '"label": "l1"' in text


def test_head_previews_text_payloads_as_text(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path, samples=TEXT_SAMPLES)  # type: ignore[arg-type]
    [first, *_] = invoke_json("head", cache)["samples"]
    assert (first["preview_kind"], first["preview"]) == ("text", "line 0: hello")
    assert "'line 0: hello'" in invoke("head", cache, code=0).stdout


def test_head_rejects_a_negative_count(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path)
    invoke("head", cache, "-n", "-1", code=2)


def test_head_of_a_corrupt_record_exits_1_with_the_readers_message(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    flip_last_byte_of_record(cache, 1)
    result = invoke("head", cache, code=1)
    assert result.stderr.startswith("dataset-rt: ") and result.stderr.count("\n") == 1
    assert "record checksum mismatch" in result.stderr


# --- metadata -------------------------------------------------------------------------------


def read_table(path: Path, schema: pl.Schema) -> pl.DataFrame:
    if path.suffix == ".parquet":
        return pl.read_parquet(path)
    if path.suffix == ".arrow":
        with pyarrow.ipc.open_file(path) as reader:  # an Arrow IPC *file*
            assert reader.num_record_batches >= 1
        return pl.read_ipc(path)
    return pl.read_csv(path, schema=schema)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".arrow"])
def test_metadata_exports_the_table_with_identities(
    runtime: DatasetRuntime, tmp_path: Path, suffix: str
) -> None:
    first = write(runtime, tmp_path / "base", "a")
    second = write(runtime, tmp_path / "base", "b", SAMPLES[:7])
    out = tmp_path / f"table{suffix}"
    summary = invoke_json("metadata", first, second, "--out", out)
    expected = runtime.cached_dataset(
        [first, second], reader_config=ReaderConfig(seed=0)
    ).get_metadata()
    assert summary == {
        "out": str(out),
        "format": suffix[1:],
        "rows": len(SAMPLES) + 7,
        "columns": ["cache_id", "sample_id", "flag", "index", "label", "score", "weight"],
        "caches": [{"cache_id": 0, "path": str(first)}, {"cache_id": 1, "path": str(second)}],
    }
    assert_frame_equal(read_table(out, expected.schema), expected)
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [out.name]  # no staging left


def test_metadata_replaces_an_existing_file(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path / "base")
    out = tmp_path / "table.parquet"
    out.write_text("old")
    assert "wrote 40 rows x 7 columns" in invoke("metadata", cache, "-o", out, code=0).stdout
    assert pl.read_parquet(out).height == len(SAMPLES)


def test_metadata_takes_the_format_from_the_suffix_or_refuses(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path / "base")
    for out in (tmp_path / "table.txt", tmp_path / "table"):
        assert ".parquet, .csv, .arrow" in invoke("metadata", cache, "-o", out, code=2).stderr
        assert not out.exists()
    missing_directory = tmp_path / "no" / "table.csv"
    assert "does not exist" in invoke("metadata", cache, "-o", missing_directory, code=2).stderr


def test_metadata_of_caches_with_different_schemas_exits_1(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    first = write(runtime, tmp_path / "base", "a")
    other = write(runtime, tmp_path / "base", "t", TEXT_SAMPLES)  # type: ignore[arg-type]
    out = tmp_path / "table.csv"
    result = invoke("metadata", first, other, "-o", out, code=1)
    assert "all caches must share the same metadata schema" in result.stderr
    assert not out.exists()


# --- verify ---------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_verify_passes_sound_caches(runtime: DatasetRuntime, tmp_path: Path, algo: str) -> None:
    first = write(runtime, tmp_path, "a", algo=algo)
    second = write(runtime, tmp_path, "b", algo=algo)
    report = invoke_json("verify", first, second, "--workers", "2")
    assert report["ok"] is True
    assert [(c["path"], c["ok"], c["problems"]) for c in report["caches"]] == [
        (str(first), True, []),
        (str(second), True, []),
    ]
    text = invoke("verify", first, "--no-progress", code=0).stdout
    assert text.startswith(f"ok: {first}")


def test_verify_lists_the_problems_of_a_corrupt_cache_and_exits_1(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sound = write(runtime, tmp_path, "sound")
    cache = write(runtime, tmp_path, "c")
    shard = flip_last_byte_of_record(cache, 5)
    report = invoke_json("verify", sound, cache, code=1)
    assert report["ok"] is False
    [sound_report, corrupt] = report["caches"]
    assert sound_report["ok"] is True
    assert corrupt["ok"] is False and corrupt["problems_total"] == len(corrupt["problems"]) >= 2
    by_file = {(p["file"], p["sample_id"]): p for p in corrupt["problems"]}
    assert "SHA-256 does not match" in by_file[(shard, None)]["message"]
    record_problem = by_file[(shard, 5)]
    assert record_problem["offset"] == record(cache, 5)[1]
    assert "checksum" in record_problem["message"]
    text = invoke("verify", cache, code=1).stdout
    assert f"FAILED: {cache} (format 2): {corrupt['problems_total']} problems" in text
    # Each problem on a line of its own; the messages say where (file, sample, offset).
    assert f"\n  {record_problem['message']}\n" in text
    assert f"sample 5 at offset {record_problem['offset']}" in record_problem["message"]
    assert f"\n  checksum mismatch: {shard}: SHA-256 does not match the manifest\n" in text


def test_verify_reports_a_directory_that_is_not_a_cache(tmp_path: Path) -> None:
    report = invoke_json("verify", tmp_path, code=1)
    [problem] = report["caches"][0]["problems"]
    assert (
        problem["message"]
        == "missing manifest: cannot read manifest.json: no such file or directory"
    )


def test_verify_refuses_a_bad_worker_count(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path)
    invoke("verify", cache, "--workers", "0", code=2)


# --- write ----------------------------------------------------------------------------------


def make_folder(root: Path) -> dict[str, bytes]:
    files = {
        "cat/001.png": b"\x89PNG cat one",
        "cat/002.png": b"\x89PNG cat two",
        "dog/001.png": b"\x89PNG dog",
        "dog/notes.txt": b"not an image",
    }
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    return files


def read_back(runtime: DatasetRuntime, cache: Path) -> list[tuple[bytes, dict[str, object]]]:
    dataset = runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0, shuffle=False))
    return [(sample.data, dict(sample.metadata)) for sample in dataset]


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


def make_parquet(path: Path, first: int, rows: int) -> list[tuple[bytes, dict[str, object]]]:
    table = pa.table(
        {
            "image": [f"payload {i}".encode() * 3 for i in range(first, first + rows)],
            "label": [i % 4 for i in range(first, first + rows)],
            "split": ["train" if i % 5 else "val" for i in range(first, first + rows)],
            "extra": [float(i) for i in range(first, first + rows)],
        }
    )
    pq.write_table(table, path, row_group_size=16)
    return [
        (row["image"], {"label": row["label"], "split": row["split"]}) for row in table.to_pylist()
    ]


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


# --- demo and bench -------------------------------------------------------------------------


def test_demo_runs_with_its_options(tmp_path: Path) -> None:
    result = invoke(
        "demo", "--samples", "300", "--payload-bytes", "64", "--compression", "none",
        "--workers", "2", "--dir", tmp_path, code=0,
    )  # fmt: skip
    assert "writing 300 samples x 64 bytes (0.0 MB, none)" in result.stdout
    assert "read back and verified 300 samples" in result.stdout
    assert (tmp_path / "demo" / "manifest.json").exists()
    invoke("demo", "--samples", "0", code=2)
    invoke("demo", "--compression", "zstd", code=2)


def test_bench_prints_a_table_of_passes(tmp_path: Path) -> None:
    report = invoke_json("bench", "--samples", "500", "--payload-bytes", "256", "--dir", tmp_path)
    assert {k: report[k] for k in ("samples", "payload_bytes", "compression")} == {
        "samples": 500,
        "payload_bytes": 256,
        "compression": "none",
    }
    assert [p["pass"] for p in report["passes"]] == ["write", "read, ordered", "read, shuffled"]
    for row in report["passes"]:
        assert row["samples"] == 500 and row["seconds"] > 0 and row["samples_per_second"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary cache is gone
    text = invoke("bench", "--samples", "200", "--compression", "lz4", code=0).stdout
    assert "read, shuffled" in text and "samples/s" in text and "lz4" in text
    invoke("bench", "--samples", "0", code=2)


def test_a_problem_line_says_where_unless_the_message_does() -> None:
    from dataset_rt.cli import _problem_line

    where = {"file": "index.bin", "sample_id": 3, "offset": 72}
    assert (
        _problem_line({**where, "message": "bad row"}) == "index.bin, sample 3, offset 72: bad row"
    )
    said = "index.bin: sample 3 at offset 72: bad row"
    assert _problem_line({**where, "message": said}) == said
    whole = {"file": "", "sample_id": None, "offset": None, "message": "cannot open"}
    assert _problem_line(whole) == "cannot open"


# --- ls and info on a base folder -----------------------------------------------------------


def cache_row(cache: Path, samples: int, algo: str = "none") -> dict[str, object]:
    return {
        "name": cache.name,
        "path": str(cache),
        "samples": samples,
        "format_version": 2,
        "cache_id": None,
        "bytes_on_disk": sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()),
        "compression": [{"algo": algo, "ratio": 1.0}],
        "record_checksums": True,
    }


def test_ls_lists_the_caches_of_a_base_and_what_else_is_there(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    base = tmp_path / "caches"
    first = write(runtime, base, "b-cache")
    second = write(runtime, base, "a-cache", SAMPLES[:7], algo="lz4")
    without_record_checksums(first)
    (base / "tmp" / "4242.18c0a2f.0.staging" / "shards").mkdir(parents=True)
    (base / "tmp" / "4242.18c0a2f.0.staging" / "index.bin").write_bytes(b"x" * 24)
    (base / "tmp" / "a-cache.lock").write_bytes(b"")
    (base / "notes.txt").write_text("hello")
    (base / "half-copied").mkdir()
    listing = invoke_json("ls", base)
    assert listing["path"] == str(base)
    assert listing["caches"] == [
        cache_row(second, 7, "lz4"),
        {**cache_row(first, len(SAMPLES)), "record_checksums": False},
    ]
    other = {entry["path"]: entry for entry in listing["other"]}
    assert sorted(other) == [
        "half-copied",
        "notes.txt",
        "tmp/4242.18c0a2f.0.staging",
        "tmp/a-cache.lock",
    ]
    assert [other[path]["kind"] for path in sorted(other)] == ["folder", "file", "staging", "lock"]
    assert other["tmp/4242.18c0a2f.0.staging"]["bytes"] == 24
    assert other["tmp/a-cache.lock"]["held"] is False
    assert "not a cache" in other["half-copied"]["note"]
    text = invoke("ls", base, code=0).stdout
    assert text.index("a-cache") < text.index("b-cache") < text.index("not caches:")
    for path, entry in other.items():
        assert f"  {path}" in text and entry["note"] in text


def test_ls_tells_a_lock_held_by_a_running_writer(runtime: DatasetRuntime, tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    write(runtime, tmp_path, "c")
    lock = tmp_path / "tmp" / "c.lock"
    with lock.open("wb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        [entry] = invoke_json("ls", tmp_path)["other"]
        assert (entry["path"], entry["held"]) == ("tmp/c.lock", True)
        assert entry["note"] == "lock file of a running writer of 'c'"


def test_ls_of_an_empty_folder_and_of_a_cache(runtime: DatasetRuntime, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke_json("ls", empty) == {"path": str(empty), "caches": [], "other": []}
    assert invoke("ls", empty, code=0).stdout == f"{empty}: no caches\n"
    cache = write(runtime, tmp_path / "base")
    result = invoke("ls", cache, code=1)
    assert f"{cache} is a cache, not a base folder" in result.stderr
    assert f"dataset-rt info {cache}" in result.stderr


def test_ls_lists_a_cache_whose_manifest_the_core_refuses_as_unreadable(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    base = tmp_path / "caches"
    newer = write(runtime, base, "newer")
    manifest = json.loads((newer / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps({**manifest, "format_version": 4}))
    (base / "junk").mkdir()
    (base / "junk" / "manifest.json").write_text("{")
    listing = invoke_json("ls", base)
    assert listing["caches"] == []
    notes = {entry["path"]: (entry["kind"], entry["note"]) for entry in listing["other"]}
    version = "unsupported cache format version 4 (this reader supports versions 2 and 3)"
    assert notes["newer"] == (
        "unreadable",
        f"its manifest.json cannot be read (cache {newer}: manifest.json: {version})",
    )
    invalid = "manifest.json: JSON error: manifest.json is invalid JSON (unexpected end of input"
    assert notes["junk"] == (
        "unreadable",
        f"its manifest.json cannot be read (cache {base / 'junk'}: {invalid} at line 1, column 2))",
    )


def test_ls_reads_only_the_manifest(runtime: DatasetRuntime, tmp_path: Path) -> None:
    """The listing's figures come from the core's reading of manifest.json alone: a cache
    whose other files are gone is still listed with them."""
    base = tmp_path / "caches"
    cache = write(runtime, base, "c", algo="lz4")
    for name in ("index.bin", "metadata.arrow", "records.crc32c"):
        (cache / name).unlink()
    for shard in (cache / "shards").iterdir():
        shard.unlink()
    [row] = invoke_json("ls", base)["caches"]
    assert row == {**cache_row(cache, len(SAMPLES), "lz4"), "bytes_on_disk": row["bytes_on_disk"]}
    assert row["bytes_on_disk"] == (cache / "manifest.json").stat().st_size


def test_info_of_a_base_folder_lists_its_caches(runtime: DatasetRuntime, tmp_path: Path) -> None:
    base = tmp_path / "caches"
    cache = write(runtime, base, "c")
    [shown] = invoke_json("info", base)
    assert shown == {"path": str(base), "base": True, "caches": [cache_row(cache, 40)], "other": []}
    text = invoke("info", base, code=0).stdout
    assert text.startswith(f"{base} is a base folder, not a cache; it holds 1 cache:\n")
    assert "c " in text and "40" in text
    # Only a staging area left: still a base, with no caches.
    cache.rename(tmp_path / "elsewhere")
    assert invoke_json("info", base) == [
        {"path": str(base), "base": True, "caches": [], "other": []}
    ]


# --- get ------------------------------------------------------------------------------------


def test_get_writes_one_raw_payload_to_stdout_or_a_file(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path / "base")
    data, metadata = SAMPLES[3]
    assert invoke("get", cache, "3", code=0).stdout_bytes == data
    out = tmp_path / "payload.bin"
    out.write_bytes(b"old")
    assert invoke("get", cache, "3", "--out", out, code=0).stdout == ""
    assert out.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["payload.bin"]  # no staging
    assert invoke_json("get", cache, "3") == {
        "path": str(cache),
        "sample_id": 3,
        "metadata": metadata,
        "payload_bytes": len(data),
        "out": None,
    }
    assert invoke_json("get", cache, "4", "-o", out)["out"] == str(out)
    assert out.read_bytes() == SAMPLES[4][0]
    assert invoke("get", cache, "5", "--out", "-", code=0).stdout_bytes == SAMPLES[5][0]


def test_get_refusals(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path / "base")
    result = invoke("get", cache, "40", code=1)
    assert (
        result.stderr
        == f"dataset-rt: {cache} has 40 samples (ids 0 to 39); there is no sample 40\n"
    )
    invoke("get", cache, "-1", code=2)
    invoke("get", cache, "x", code=2)
    assert "does not exist" in invoke("get", cache, "0", "-o", tmp_path / "no" / "f", code=2).stderr
    flip_last_byte_of_record(cache, 2)
    assert "record checksum mismatch" in invoke("get", cache, "2", code=1).stderr


# --- head: kinds of payloads ----------------------------------------------------------------


def image_bytes(
    size: tuple[int, int], image_format: str, mode: str = "RGB", **options: Any
) -> bytes:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.new(mode, size).save(buffer, image_format, **options)
    return buffer.getvalue()


def npy_bytes(array: Any) -> bytes:
    numpy = pytest.importorskip("numpy")
    buffer = io.BytesIO()
    numpy.save(buffer, numpy.asarray(array))
    return buffer.getvalue()


def test_head_tells_common_payload_kinds(runtime: DatasetRuntime, tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    payloads = [
        (image_bytes((32, 24), "PNG"), "png", "PNG image, 32 x 24, RGB"),
        (image_bytes((7, 5), "PNG", "LA"), "png", "PNG image, 7 x 5, grayscale+alpha"),
        (image_bytes((40, 30), "JPEG"), "jpeg", "JPEG image, 40 x 30"),
        (image_bytes((50, 20), "WEBP"), "webp", "WebP image, 50 x 20"),  # VP8
        (image_bytes((51, 21), "WEBP", lossless=True), "webp", "WebP image, 51 x 21"),  # VP8L
        (image_bytes((52, 22), "WEBP", "RGBA"), "webp", "WebP image, 52 x 22"),  # VP8X
        (
            npy_bytes(numpy.zeros((3, 4), numpy.float32)),
            "npy",
            "NumPy array, float32, shape (3, 4)",
        ),
        (
            npy_bytes(numpy.arange(5, dtype=">i8")),
            "npy",
            "NumPy array, int64 big-endian, shape (5,)",
        ),
        (npy_bytes(numpy.ones(2, bool)), "npy", "NumPy array, bool, shape (2,)"),
        ("grüße, 世界".encode(), "text", "grüße, 世界"),
        (b"\x89PNG but cut", "hex", "89 50 4e 47 20 62 75 74 20 63 75 74"),
    ]
    cache = write(
        runtime, tmp_path, samples=[(data, {"i": i}) for i, (data, _, _) in enumerate(payloads)]
    )
    shown = invoke_json("head", cache, "-n", "20")["samples"]
    assert [(s["preview_kind"], s["preview"]) for s in shown] == [
        (kind, preview) for _, kind, preview in payloads
    ]
    assert (shown[0]["width"], shown[0]["height"]) == (32, 24)
    assert (shown[6]["dtype"], shown[6]["shape"]) == ("float32", [3, 4])
    assert [s["preview_bytes"] for s in shown[:9]] == [None] * 9
    text = invoke("head", cache, "-n", "20", code=0).stdout
    assert "PNG image, 32 x 24, RGB" in text and "'grüße, 世界'" in text


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.sampled_from(
        [
            b"",
            b"\x89PNG\r\n\x1a\n",
            b"\xff\xd8\xff",
            b"RIFF\x00\x00\x00\x00WEBPVP8X",
            b"\x93NUMPY\x01\x00",
        ]
    ),
    rest=st.binary(max_size=64),
)
def test_a_payload_preview_never_fails(prefix: bytes, rest: bytes) -> None:
    from dataset_rt.cli import _preview

    preview = _preview(prefix + rest)
    assert preview["preview_kind"] in ("png", "jpeg", "webp", "npy", "text", "hex")
    assert isinstance(preview["preview"], str)


def test_binary_is_not_written_to_a_terminal(runtime: DatasetRuntime, tmp_path: Path) -> None:
    import pty

    cache = write(
        runtime, tmp_path / "base", samples=[(b"\x00\x01binary", {"i": 0}), (b"text\n", {"i": 1})]
    )
    environment = {**os.environ, "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT)}

    def on_a_terminal(*args: str) -> tuple[int, bytes, str]:
        controller, terminal = pty.openpty()
        completed = subprocess.run(
            [sys.executable, "-m", "dataset_rt", *args],
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=environment,
            timeout=120,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        os.close(controller)
        return completed.returncode, shown, completed.stderr.decode()

    code, shown, stderr = on_a_terminal("get", str(cache), "0")
    assert (code, shown) == (1, b""), stderr
    assert "not writing them to a terminal" in stderr and "--out" in stderr
    code, shown, _ = on_a_terminal("get", str(cache), "0", "--out", "-")
    assert code == 0 and shown.startswith(b"\x00\x01binary")
    code, shown, _ = on_a_terminal("get", str(cache), "1")
    assert code == 0 and shown.replace(b"\r\n", b"\n") == b"text\n"


def test_the_commands_own_messages_use_no_internal_words(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    from test_cli_write import no_internal_words

    cache = write(runtime, tmp_path / "base")
    empty = tmp_path / "empty"
    empty.mkdir()
    make_folder(tmp_path / "images")
    failures = [
        (["info", empty], 1),
        (["ls", cache], 1),
        (["get", cache, "99"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "--name", "c"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "--name", "tmp"], 2),
        (["write", "folder", empty, "-o", tmp_path / "base"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "-e", ".jpg"], 1),
        (["head", tmp_path / "nope"], 2),
    ]
    for args, code in failures:
        result = invoke(*args, code=code)
        assert result.stderr.strip(), args
        no_internal_words(result.stderr)
