"""`dataset-rt` on caches at URLs: `info`, `head`, `get`, `metadata` and `verify` read
an s3:// or http:// cache as they read its local copy, `ls` lists the caches under an
s3:// prefix and refuses an http:// URL (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from cli_helpers import invoke, invoke_json, write
from conftest import ListSource
from dataset_rt import (
    CacheUploadSuccess,
    DatasetRuntime,
    ReaderConfig,
    RemoteConfig,
    WriterConfig,
)
from fault_proxy import FaultProxy, StaticServer
from remote_fixtures import BUCKET

SMALL_SHARDS = WriterConfig(show_progress=False, max_shard_bytes=1_500)


def publish(runtime: DatasetRuntime, local: Path, base: str, tmp_path: Path) -> str:
    """The samples of the local cache `local`, written to `base` under its name; its URL."""
    dataset = runtime.cached_dataset([local], reader_config=ReaderConfig(seed=0, shuffle=False))
    samples = [(bytes(s.data), dict(s.metadata)) for s in dataset]
    [result] = runtime.write_cache(
        ListSource(local.name, samples),
        base,
        writer_config=SMALL_SHARDS,
        remote=RemoteConfig(local_dir=tmp_path / "writer"),
    )
    assert isinstance(result, CacheUploadSuccess), result
    return result.url


def without_location(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in ("path", "bytes_on_disk")}


def test_info_head_get_metadata_and_verify_read_an_s3_cache_as_its_local_copy(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    local = write(runtime, tmp_path / "local", "c")
    url = publish(runtime, local, f"s3://{BUCKET}/cli", tmp_path)
    copies = ("--local-dir", tmp_path / "copies")
    [remote_info] = invoke_json("info", url, *copies)
    [local_info] = invoke_json("info", local)
    assert remote_info["path"] == url and remote_info["bytes_on_disk"] is None
    assert without_location(remote_info) == without_location(local_info)
    assert "shard bytes (remote)" in invoke("info", url, *copies, code=0).stdout
    assert (tmp_path / "copies").is_dir()  # --local-dir is where the files went
    head = invoke_json("head", url, "-n", "5", *copies)
    assert head["samples"] == invoke_json("head", local, "-n", "5")["samples"]
    payload = tmp_path / "payload.bin"
    invoke("get", url, "3", "--out", payload, *copies, code=0)
    assert payload.read_bytes() == invoke("get", local, "3", code=0).stdout_bytes
    invoke("metadata", url, "-o", tmp_path / "remote.parquet", *copies, code=0)
    invoke("metadata", local, "-o", tmp_path / "local.parquet", code=0)
    assert pl.read_parquet(tmp_path / "remote.parquet").equals(
        pl.read_parquet(tmp_path / "local.parquet")
    )
    verified = invoke_json("verify", url, "--no-progress", *copies)
    assert verified["ok"] is True
    [checked] = verified["caches"]
    assert checked["path"] == url and checked["format_version"] == local_info["format_version"]
    assert checked["bytes"] == local_info["shard_bytes"]


def test_info_describes_the_version_it_opened_and_verify_fetches_the_manifest_twice(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    """`info` describes the manifest its open fetched (one GET; it fetched it again
    before); `verify` fetches it to size the scrub and once in the scrub (three before)."""
    url = publish(runtime, write(runtime, tmp_path / "local", "c"), f"s3://{BUCKET}/once", tmp_path)
    copies = ("--local-dir", tmp_path / "copies")

    def manifest_gets() -> int:
        return sum(r.startswith("GET ") and "manifest.json" in r for r in s3_proxy.requests)

    before = manifest_gets()
    [info] = invoke_json("info", url, *copies)
    assert info["samples"] == 40 and manifest_gets() - before == 1
    before = manifest_gets()
    verified = invoke_json("verify", url, "--no-progress", *copies)
    assert verified["ok"] is True and verified["caches"][0]["bytes"] == info["shard_bytes"]
    assert manifest_gets() - before == 2


def test_ls_lists_the_caches_under_an_s3_prefix(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/listed"
    urls = [
        publish(runtime, write(runtime, tmp_path / "local", name), base, tmp_path)
        for name in ("b", "a")
    ]
    # A cache one level deeper is not a cache of this base.
    publish(runtime, write(runtime, tmp_path / "deeper", "x"), f"{base}/nested", tmp_path)
    copies = ("--local-dir", tmp_path / "copies")
    listing = invoke_json("ls", base, *copies)
    assert listing["path"] == base
    assert [(c["name"], c["path"], c["samples"]) for c in listing["caches"]] == [
        ("a", urls[1], 40),
        ("b", urls[0], 40),
    ]
    assert listing["other"] == []
    text = invoke("ls", base + "/", *copies, code=0).stdout
    assert "shard bytes" in text and "bytes on disk" not in text
    assert invoke_json("ls", f"s3://{BUCKET}/nothing-here", *copies)["caches"] == []
    refused = invoke("ls", urls[0], *copies, code=1)
    assert "is a cache, not a base" in refused.stderr


def test_an_http_cache_is_read_and_its_server_cannot_be_listed(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write(runtime, tmp_path / "site" / "caches", "web")
    copies = ("--local-dir", tmp_path / "copies")
    with StaticServer(tmp_path / "site") as server:
        host, port = server.address
        base = f"http://{host}:{port}/caches"
        [info] = invoke_json("info", f"{base}/web", *copies)
        assert without_location(info) == without_location(invoke_json("info", local)[0])
        head = invoke_json("head", f"{base}/web", *copies)
        assert head["samples"] == invoke_json("head", local)["samples"]
        refused = invoke("ls", base, *copies, code=2)
    assert f"cannot list {base}" in refused.stderr
    assert "no listing" in refused.stderr


@pytest.mark.parametrize("command", ["info", "head", "verify", "ls"])
def test_a_url_of_an_unsupported_scheme_is_a_usage_error(command: str) -> None:
    result = invoke(command, "gs://bucket/cache", code=2)
    assert "unsupported URL scheme 'gs'" in result.stderr
