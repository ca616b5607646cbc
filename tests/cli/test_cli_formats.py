"""The command line and the storage formats (docs/cli.md): `info`, `ls` and `verify`
show each cache's format version and persisted cache_id; `migrate --to 3` makes format 2
caches format 3 keeping the ids they have (docs/storage-format.md, "Migrating to format 3")."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cli_helpers import SAMPLES, invoke, invoke_json, write
from conftest import ListSource, flip_last_byte_of_record, name_cache_id
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ReaderConfig, WriterConfig
from dataset_rt.cli import app


def test_info_ls_and_verify_show_the_format_version_and_the_persisted_cache_id(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    base = tmp_path / "caches"
    v2 = write(runtime, base, "b")
    config = WriterConfig(show_progress=False, format_version=3)
    [result] = runtime.write_cache(ListSource("a", SAMPLES[:3]), base, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    v3 = result.path
    cache_id = name_cache_id("a")
    info = invoke_json("info", v3, v2)
    assert [(i["format_version"], i["cache_id"]) for i in info] == [(3, cache_id), (2, None)]
    text = invoke("info", v3, v2, code=0).stdout
    rows = [row.split("│") for row in text.splitlines() if "cache id" in row]
    assert [row[2].strip() for row in rows][0] == str(cache_id), text
    assert "none (format 2" in rows[1][2], text
    listing = invoke_json("ls", base)
    assert [(c["name"], c["format_version"], c["cache_id"]) for c in listing["caches"]] == [
        ("a", 3, cache_id),
        ("b", 2, None),
    ]
    wide = CliRunner(env={"COLUMNS": "160"}).invoke(app, ["ls", str(base)])
    assert str(cache_id) in wide.stdout, wide.stdout
    report = invoke_json("verify", v3, v2, "--no-progress")
    assert [(c["format_version"], c["cache_id"]) for c in report["caches"]] == [
        (3, cache_id),
        (2, None),
    ]
    lines = invoke("verify", v3, v2, "--no-progress", code=0).stdout.splitlines()
    assert lines[0].startswith(f"ok: {v3} (format 3, cache_id {cache_id}; ")
    assert lines[1].startswith(f"ok: {v2} (format 2; ")
    flip_last_byte_of_record(v3, 1)
    failed = invoke("verify", v3, "--no-progress", code=1).stdout
    assert failed.startswith(f"FAILED: {v3} (format 3, cache_id {cache_id}): "), failed


def test_migrate_makes_format_2_caches_format_3_keeping_their_positions_as_ids(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    first = write(runtime, tmp_path, "a", SAMPLES[:2])
    second = write(runtime, tmp_path, "b", SAMPLES[:3])
    lines = invoke("migrate", "--to", "3", second, first, code=0).stdout.splitlines()
    assert lines == [f"updated: {second} (cache_id 0)", f"updated: {first} (cache_id 1)"]
    report = invoke_json("migrate", "--to", "3", second, first)
    assert [(c["path"], c["cache_id"], c["status"]) for c in report["caches"]] == [
        (str(second), 0, "unchanged"),
        (str(first), 1, "unchanged"),
    ]
    assert report["caches"][0]["manifest"] == str(second.resolve() / "manifest.json")
    [info] = invoke_json("info", first)
    assert (info["format_version"], info["cache_id"]) == (3, 1)
    # Listed in the other order now, the format 3 caches keep their ids.
    dataset = runtime.cached_dataset([first, second], reader_config=ReaderConfig(seed=0))
    assert dataset.cache_ids == [1, 0]


def test_migrate_refuses_another_format_and_a_problem_exits_1(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, "a", SAMPLES[:2])
    before = (cache / "manifest.json").read_bytes()
    refused = invoke("migrate", "--to", "2", cache, code=1)
    assert "caches migrate to format 3 only" in refused.stderr
    twice = invoke("migrate", "--to", "3", cache, cache, code=1)
    assert "is listed twice" in twice.stderr
    assert (cache / "manifest.json").read_bytes() == before
    invoke("migrate", cache, code=2)  # --to is required
