"""`dataset-rt info`: what a cache holds (and --json), a bad cache in one line with exit
code 1, and the caches of a base folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import SAMPLES, Algo, cache_row, invoke, invoke_json, write
from conftest import without_record_checksums
from dataset_rt import DatasetRuntime


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_info_reports_what_the_cache_holds(
    runtime: DatasetRuntime, tmp_path: Path, algo: Algo
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
