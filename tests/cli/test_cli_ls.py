"""`dataset-rt ls`: the caches of a base folder and what else is there (staging areas,
locks, unreadable manifests), from the manifests alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import SAMPLES, cache_row, invoke, invoke_json, write
from conftest import without_record_checksums
from dataset_rt import DatasetRuntime


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
