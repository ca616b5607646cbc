"""`dataset-rt verify`: sound caches pass; every problem of a corrupt cache is listed,
each saying where, and the command exits 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import Algo, invoke, invoke_json, write
from conftest import flip_last_byte_of_record, record
from dataset_rt import DatasetRuntime


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_verify_passes_sound_caches(runtime: DatasetRuntime, tmp_path: Path, algo: Algo) -> None:
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
