"""Caches written to object storage (moto's S3 server on 127.0.0.1, behind the fault
proxy): written in the staging area of the local directory, uploaded with the
manifest last and only by the first writer of a name, then read back from the URL."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import ListSource
from dataset_rt import (
    CachedDataset,
    CacheSourcesDatasetSuccess,
    CacheUploadSuccess,
    CacheWriteError,
    DatasetRuntime,
    ReaderConfig,
    RemoteConfig,
    WriterConfig,
)
from dataset_rt._core.remote_writing import staging_base
from dataset_rt._remote.upload import MULTIPART_THRESHOLD_BYTES
from dataset_rt.errors import InvalidArgumentError
from fault_proxy import (
    ACCESS_DENIED_XML,
    NO_SUCH_KEY_XML,
    SLOW_DOWN_XML,
    FaultProxy,
    lost,
    reset,
    status,
)
from remote_fixtures import BUCKET, direct_client

SMALL_SHARDS = WriterConfig(show_progress=False, max_shard_bytes=4096)
ORDERED = ReaderConfig(seed=0, shuffle=False)


def sources(count: int = 2) -> list[ListSource]:
    return [
        ListSource(
            f"part{k}",
            [(bytes([(i + k) % 251]) * (90 + i), {"i": i, "part": k}) for i in range(150)],
        )
        for k in range(count)
    ]


def remote_config(tmp_path: Path, folder: str = "copies") -> RemoteConfig:
    return RemoteConfig(local_dir=tmp_path / folder, retries=2, timeout_s=5.0)


def rows(dataset: CachedDataset) -> list[tuple[Any, ...]]:
    return [(s.cache_id, s.sample_id, bytes(s.data), dict(s.metadata)) for s in dataset]


def keys(moto_server: tuple[str, int], prefix: str) -> dict[str, Any]:
    """The objects under `prefix` in the test bucket: key to (ETag, LastModified)."""
    listing = direct_client(*moto_server).list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    return {o["Key"]: (o["ETag"], o["LastModified"]) for o in listing.get("Contents", [])}


def puts(proxy: FaultProxy) -> list[str]:
    return [r for r in proxy.requests if r.startswith(("PUT ", "POST "))]


def write_from_sources(
    runtime: DatasetRuntime,
    base: str,
    tmp_path: Path,
    folder: str = "copies",
    count: int = 2,
    given: list[ListSource] | None = None,
) -> CacheSourcesDatasetSuccess:
    """`from_cache_sources` of `given` (else `count` new sources) to `base`, with
    `folder` of `tmp_path` as the local directory; asserted to succeed."""
    result = runtime.from_cache_sources(
        sources(count) if given is None else given,
        base,
        reader_config=ORDERED,
        writer_config=SMALL_SHARDS,
        remote=remote_config(tmp_path, folder),
    )
    assert isinstance(result, CacheSourcesDatasetSuccess), result
    return result


def test_caches_written_to_s3_read_back_as_the_local_write(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/written"
    result = write_from_sources(runtime, base, tmp_path)
    assert result.results == [
        CacheUploadSuccess("part0", f"{base}/part0", "uploaded"),
        CacheUploadSuccess("part1", f"{base}/part1", "uploaded"),
    ]
    assert result.dataset.cache_paths == [f"{base}/part0", f"{base}/part1"]
    local = runtime.from_cache_sources(
        sources(), tmp_path / "local", reader_config=ORDERED, writer_config=SMALL_SHARDS
    )
    assert isinstance(local, CacheSourcesDatasetSuccess)
    assert rows(result.dataset) == rows(local.dataset)
    # Every file of the local cache is at the URL, and the staging copies are gone.
    for name in ("part0", "part1"):
        written = sorted(
            p.relative_to(tmp_path / "local" / name).as_posix()
            for p in (tmp_path / "local" / name).rglob("*")
            if p.is_file()
        )
        assert (
            sorted(k.split(f"written/{name}/")[1] for k in keys(moto_server, f"written/{name}"))
            == written
        )
    staging = staging_base(remote_config(tmp_path), base)
    assert not (staging / "part0").exists() and not (staging / "part1").exists()
    # Each cache's manifest went up after every other file of it.
    for name in ("part0", "part1"):
        mine = [r for r in puts(s3_proxy) if f"/written/{name}/" in r]
        assert mine[-1].endswith(f"/written/{name}/manifest.json"), mine


def test_a_second_write_reuses_the_published_caches_without_uploading(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/reused"
    first = write_from_sources(runtime, base, tmp_path)
    before = keys(moto_server, "reused")
    uploads = len(puts(s3_proxy))
    again = sources()
    second = write_from_sources(runtime, base, tmp_path, "elsewhere", given=again)
    assert [r.outcome for r in second.results if isinstance(r, CacheUploadSuccess)] == [
        "reused",
        "reused",
    ]
    assert [source.iterations for source in again] == [0, 0]
    assert len(puts(s3_proxy)) == uploads  # not one PUT: no file was uploaded again
    assert keys(moto_server, "reused") == before
    assert rows(second.dataset) == rows(first.dataset)
    # write_cache does not overwrite a published cache, as with a local folder.
    [refused] = runtime.write_cache(
        sources(1), base, writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert refused == CacheWriteError("part0", f"cache path already exists: {base}/part0")


def test_an_upload_that_fails_leaves_no_manifest_and_the_next_write_completes(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/killed"
    s3_proxy.script_for(f"PUT /{BUCKET}/killed/part0/shards/", status(403, ACCESS_DENIED_XML))
    [failed] = runtime.write_cache(
        sources(1), base, writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert isinstance(failed, CacheWriteError)
    assert f"{base}/part0/shards/" in failed.message and "uploads it again" in failed.message
    uploaded = keys(moto_server, "killed/part0")
    assert "killed/part0/manifest.json" not in uploaded
    assert uploaded  # the files before the refused one are there, unpublished
    # The next write uploads the cache left complete in the staging area, without
    # iterating its source again.
    retry = sources(1)
    result = runtime.from_cache_sources(
        retry, base, reader_config=ORDERED, remote=remote_config(tmp_path)
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    assert result.results == [CacheUploadSuccess("part0", f"{base}/part0", "uploaded")]
    assert retry[0].iterations == 0
    assert "killed/part0/manifest.json" in keys(moto_server, "killed/part0")
    runtime.write_cache(sources(1), tmp_path / "local", writer_config=SMALL_SHARDS)
    expected = runtime.cached_dataset([tmp_path / "local" / "part0"], reader_config=ORDERED)
    assert rows(result.dataset) == rows(expected)


def test_an_upload_that_fails_for_a_while_is_retried(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/throttled"
    shard = f"PUT /{BUCKET}/throttled/part0/shards/000001.bin"
    s3_proxy.script_for(shard, status(503, SLOW_DOWN_XML), status(500))
    [result] = runtime.write_cache(
        sources(1), base, writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert result == CacheUploadSuccess("part0", f"{base}/part0", "uploaded")
    assert sum(r.startswith(shard) for r in s3_proxy.requests) == 3  # retries=2
    again = f"PUT /{BUCKET}/throttled-again/part0/shards/000001.bin"
    s3_proxy.script_for(again, *[status(503, SLOW_DOWN_XML)] * 3)
    [failed] = runtime.write_cache(
        sources(1), f"{base}-again", writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert isinstance(failed, CacheWriteError)
    assert "3 attempt(s) failed" in failed.message and "SlowDown" in failed.message


def test_the_manifests_head_and_conditional_put_are_retried_as_uploads_are(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/small-requests"
    head = f"HEAD /{BUCKET}/small-requests/part0/manifest.json"
    put = f"PUT /{BUCKET}/small-requests/part0/manifest.json"
    s3_proxy.script_for(head, status(503, SLOW_DOWN_XML), reset())
    s3_proxy.script_for(put, status(500), status(503, SLOW_DOWN_XML))
    [result] = runtime.write_cache(
        sources(1), base, writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert result == CacheUploadSuccess("part0", f"{base}/part0", "uploaded")
    assert sum(r.startswith(put) for r in s3_proxy.requests) == 3  # retries=2
    assert sum(r.startswith(head) for r in s3_proxy.requests) >= 3
    runtime.write_cache(sources(1), tmp_path / "local", writer_config=SMALL_SHARDS)
    expected = runtime.cached_dataset([tmp_path / "local" / "part0"], reader_config=ORDERED)
    written = runtime.cached_dataset(
        [f"{base}/part0"], reader_config=ORDERED, remote=remote_config(tmp_path)
    )
    assert rows(written) == rows(expected)


def test_a_manifest_put_whose_answer_was_lost_is_known_as_this_writers(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    # The conditional put reaches the server and publishes, but its answer is lost:
    # the retry gets 412, and the manifest found there is this writer's own.
    base = f"s3://{BUCKET}/lost-answer"
    put = f"PUT /{BUCKET}/lost-answer/part0/manifest.json"
    s3_proxy.script_for(put, lost())
    [result] = runtime.write_cache(
        sources(1), base, writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert result == CacheUploadSuccess("part0", f"{base}/part0", "uploaded")
    assert sum(r.startswith(put) for r in s3_proxy.requests) == 2


def test_of_two_writers_of_one_name_one_publishes_and_the_other_reads_it(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/race"
    winner = write_from_sources(runtime, base, tmp_path, "winner", count=1)
    published = keys(moto_server, "race/part0")["race/part0/manifest.json"]
    # The loser looks before the winner publishes, each time (every HEAD of the
    # manifest says 404), so it writes and uploads too; its conditional put fails.
    not_yet = [status(404, NO_SUCH_KEY_XML)] * 100
    s3_proxy.script_for(f"HEAD /{BUCKET}/race/part0/manifest.json", *not_yet)
    loser_source = sources(1)
    loser = write_from_sources(runtime, base, tmp_path, "loser", given=loser_source)
    assert loser_source[0].iterations == 1
    assert loser.results == [CacheUploadSuccess("part0", f"{base}/part0", "other_writer")]
    assert keys(moto_server, "race/part0")["race/part0/manifest.json"] == published
    assert rows(loser.dataset) == rows(winner.dataset)
    staging = staging_base(remote_config(tmp_path, "loser"), base)
    assert not (staging / "part0").exists()


def test_a_shard_above_the_multipart_threshold_goes_up_in_parts(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    payload = bytes(range(256)) * ((MULTIPART_THRESHOLD_BYTES + (1 << 20)) // 256)
    source = ListSource("large", [(payload, {"i": 0}), (b"small", {"i": 1})])
    base = f"s3://{BUCKET}/multipart"
    result = runtime.from_cache_sources(
        [source],
        base,
        reader_config=ORDERED,
        writer_config=WriterConfig(show_progress=False),
        remote=remote_config(tmp_path),
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    assert result.results == [CacheUploadSuccess("large", f"{base}/large", "uploaded")]
    requests = puts(s3_proxy)
    assert any(
        r.startswith("POST ") and "/multipart/large/shards/" in r and "uploads" in r
        for r in requests
    )
    assert sum("partNumber=" in r for r in requests) >= 2
    assert [bytes(s.data) for s in result.dataset] == [payload, b"small"]


@pytest.mark.parametrize("base", ["http://127.0.0.1:9/caches", "https://host/caches?sig=1"])
def test_writing_to_an_http_url_is_refused_before_anything_is_written(
    runtime: DatasetRuntime, tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = ListSource("never", [(b"x", {"i": 0})])
    shown = base.split("?")[0]
    with pytest.raises(InvalidArgumentError, match=f"{shown}.*read-only"):
        runtime.write_cache([source], base, remote=RemoteConfig(local_dir=tmp_path / "copies"))
    with pytest.raises(InvalidArgumentError, match="read-only"):
        runtime.from_cache_sources([source], base, reader_config=ORDERED)
    assert source.iterations == 0
    assert list(tmp_path.iterdir()) == []


def test_a_writer_that_finds_the_name_published_while_it_uploads_stops(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/late"
    winner = write_from_sources(runtime, base, tmp_path, "winner", count=1)
    before = keys(moto_server, "late/part0")
    # Only the first look misses the manifest: the look before the first upload sees it.
    s3_proxy.script_for(f"HEAD /{BUCKET}/late/part0/manifest.json", status(404, NO_SUCH_KEY_XML))
    uploads = len(puts(s3_proxy))
    loser = write_from_sources(runtime, base, tmp_path, "loser", count=1)
    assert loser.results == [CacheUploadSuccess("part0", f"{base}/part0", "other_writer")]
    assert len(puts(s3_proxy)) == uploads  # not one file of the winner's overwritten
    assert keys(moto_server, "late/part0") == before
    assert rows(loser.dataset) == rows(winner.dataset)


def test_concurrent_writers_of_one_name_publish_it_once(
    tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    base = f"s3://{BUCKET}/concurrent"
    outcomes: list[str] = []
    datasets: list[CachedDataset] = []

    def write(folder: str) -> None:
        with DatasetRuntime(num_workers=1) as runtime:
            result = write_from_sources(runtime, base, tmp_path, folder, count=1)
            [only] = result.results
            assert isinstance(only, CacheUploadSuccess)
            outcomes.append(only.outcome)
            datasets.append(result.dataset)

    threads = [threading.Thread(target=write, args=(f"writer{k}",)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == 2, outcomes
    assert outcomes.count("uploaded") == 1, outcomes
    assert set(outcomes) - {"uploaded"} <= {"other_writer", "reused"}
    assert rows(datasets[0]) == rows(datasets[1])


def test_an_unusable_name_is_refused_before_any_request(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], s3_proxy: FaultProxy
) -> None:
    unusable = [ListSource(name, [(b"x", {"i": 0})]) for name in ("a/b", "..", "tmp")]
    results = runtime.write_cache(
        unusable, f"s3://{BUCKET}/names", writer_config=SMALL_SHARDS, remote=remote_config(tmp_path)
    )
    assert [r.source_name for r in results] == ["source[0]", "source[1]", "source[2]"]
    assert all(isinstance(r, CacheWriteError) for r in results)
    assert s3_proxy.requests == []
    assert [source.iterations for source in unusable] == [0, 0, 0]
