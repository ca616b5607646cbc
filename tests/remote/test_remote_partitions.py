"""Caches built in partitions at an ``s3://`` base (moto's S3 server behind the fault
proxy): partitions uploaded and sealed, committed by copies inside the store, read
back from the URL as one `write_cache` of the same samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cache_reference
import pytest

import dataset_rt
from conftest import ListSource
from dataset_rt import (
    CacheInput,
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    PartitionResult,
    ReaderConfig,
    RemoteConfig,
    WriterConfig,
    errors,
)
from dataset_rt._core import remote_partitions
from fault_proxy import SLOW_DOWN_XML, FaultProxy, reset, status
from remote_fixtures import BUCKET, direct_client

CONFIG = WriterConfig(show_progress=False, max_shard_bytes=2048)
ORDERED = ReaderConfig(seed=0, shuffle=False, validate_cache=True)


def samples(start: int, stop: int, tag: str = "") -> list[tuple[bytes, dict[str, object]]]:
    return [(bytes([i % 251]) * (50 + i), {"i": i, "tag": f"{tag}{i}"}) for i in range(start, stop)]


def write(
    base: str, number: int, rows: list[tuple[bytes, dict[str, object]]], remote: RemoteConfig
) -> PartitionResult:
    inputs = [CacheInput(data, metadata) for data, metadata in rows]  # type: ignore[arg-type]
    return dataset_rt.write_partition(
        inputs, base, "c", partition=number, writer_config=CONFIG, remote=remote
    )


def test_partitions_committed_at_an_s3_base_read_as_one_write(
    s3_proxy: FaultProxy, moto_server: tuple[str, int], tmp_path: Path
) -> None:
    base = f"s3://{BUCKET}/parted"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)
    parts = [samples(0, 30), [], samples(30, 41)]
    results = [write(base, n, rows, remote) for n, rows in enumerate(parts)]
    retried = samples(30, 45, "new")
    results[2] = write(base, 2, retried, remote)  # replaces the first attempt
    missing = dataset_rt.commit_partitions(base, "c", 4, remote=remote)
    assert isinstance(missing, CacheWriteError)
    assert missing.message.startswith("partition 3 of 4 was not written"), missing
    done = dataset_rt.commit_partitions(base, "c", results, remote=remote)
    assert done == CacheUploadSuccess("c", f"{base}/c", "uploaded")
    again = dataset_rt.commit_partitions(base, "c", 3, remote=remote)
    assert again == CacheUploadSuccess("c", f"{base}/c", "reused")
    write(base, 0, samples(0, 2), remote)  # a later build that failed: discarded
    dataset_rt.discard_partitions(base, "c", remote=remote)
    # Only the commit's record is left of the staging keys.
    listing = direct_client(*moto_server).list_objects_v2(Bucket=BUCKET, Prefix="parted/tmp/")
    assert [o["Key"] for o in listing["Contents"]] == ["parted/tmp/partitions/c/committed.json"]
    runtime = DatasetRuntime(num_workers=2)
    [single] = runtime.write_cache(
        ListSource("c", parts[0] + retried), tmp_path / "single", writer_config=CONFIG
    )
    assert isinstance(single, CacheWriteSuccess)
    ours = runtime.cached_dataset([f"{base}/c"], reader_config=ORDERED, remote=remote)
    theirs = runtime.cached_dataset([single.path], reader_config=ORDERED)
    assert [(bytes(s.data), dict(s.metadata)) for s in ours] == [
        (bytes(s.data), dict(s.metadata)) for s in theirs
    ]
    assert ours.get_metadata().equals(theirs.get_metadata())
    # Each shard was copied inside the store (one PUT with a copy source per shard of
    # the committed cache), never downloaded from the partitions.
    shards = len(cache_reference.read_manifest(single.path)["shards"])
    committed = direct_client(*moto_server).list_objects_v2(Bucket=BUCKET, Prefix="parted/c/")
    assert sum("/shards/" in o["Key"] for o in committed["Contents"]) >= shards > 2
    requests = s3_proxy.requests
    assert not [r for r in requests if r.startswith("GET ") and "/tmp/" in r and "/shards/" in r]


def test_at_an_s3_base_a_failed_partition_leaves_no_key_and_a_foreign_cache_is_kept(
    s3_proxy: FaultProxy, moto_server: tuple[str, int], tmp_path: Path
) -> None:
    base = f"s3://{BUCKET}/foreign"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)

    def broken() -> Iterator[CacheInput]:
        yield CacheInput(b"a", {"i": 0, "tag": "a"})
        raise KeyError("label")

    with pytest.raises(errors.CacheWriteFailedError) as raised:
        dataset_rt.write_partition(broken(), base, "c", partition=0, remote=remote)
    assert isinstance(raised.value.__cause__, KeyError)
    client = direct_client(*moto_server)
    assert "Contents" not in client.list_objects_v2(Bucket=BUCKET, Prefix="foreign/")
    runtime = DatasetRuntime(num_workers=2)
    [other] = runtime.write_cache(
        ListSource("c", samples(0, 3)), base, writer_config=CONFIG, remote=remote
    )
    assert isinstance(other, CacheUploadSuccess)
    write(base, 0, samples(0, 5), remote)
    refused = dataset_rt.commit_partitions(base, "c", 1, remote=remote)
    assert refused == CacheWriteError("c", f"cache path already exists: {base}/c")
    kept = runtime.cached_dataset([f"{base}/c"], reader_config=ORDERED, remote=remote)
    assert len(kept) == 3


def test_every_request_of_a_partitioned_build_is_retried_as_a_fetch_is(
    s3_proxy: FaultProxy, moto_server: tuple[str, int], tmp_path: Path
) -> None:
    # One throttled or failed answer on each kind of the protocol's small requests:
    # the seal (pointer PUT), the commit's reads (pointer GET, listing), its copies,
    # committed.json, the conditional manifest PUT and the cleanup's batch delete.
    base = f"s3://{BUCKET}/retried"
    folder = f"/{BUCKET}/retried/tmp/partitions/c"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)
    throttled = status(503, SLOW_DOWN_XML)
    s3_proxy.script_for(f"PUT {folder}/part-000000.json", throttled)
    results = [
        write(base, n, rows, remote) for n, rows in enumerate([samples(0, 20), samples(20, 31)])
    ]
    # Throttled past the retries: the partition fails, naming the request and its attempts.
    s3_proxy.script_for(f"PUT {folder}/part-000002.json", *[throttled] * 3)
    with pytest.raises(errors.CacheWriteFailedError) as failed:
        write(base, 2, samples(0, 3), remote)
    assert f"s3:/{folder}/part-000002.json: 3 attempt(s) failed" in str(failed.value)
    assert "the last with: HTTP 503 SlowDown" in str(failed.value)
    scripted = {
        f"GET {folder}/part-000001.json": status(500),
        "list-type=2": throttled,
        f"PUT /{BUCKET}/retried/c/shards/000000.bin": reset(),
        f"PUT {folder}/committed.json": throttled,
        f"PUT /{BUCKET}/retried/c/manifest.json": status(500),
        "?delete": throttled,
    }
    for path_part, fault in scripted.items():
        s3_proxy.script_for(path_part, fault)
    done = dataset_rt.commit_partitions(base, "c", results, remote=remote)
    assert done == CacheUploadSuccess("c", f"{base}/c", "uploaded")
    for path_part in [f"PUT {folder}/part-000000.json", *scripted]:
        assert sum(path_part in r for r in s3_proxy.requests) >= 2, path_part
    listing = direct_client(*moto_server).list_objects_v2(Bucket=BUCKET, Prefix="retried/tmp/")
    assert [o["Key"] for o in listing["Contents"]] == ["retried/tmp/partitions/c/committed.json"]
    runtime = DatasetRuntime(num_workers=2)
    [single] = runtime.write_cache(
        ListSource("c", samples(0, 31)), tmp_path / "single", writer_config=CONFIG
    )
    assert isinstance(single, CacheWriteSuccess)
    ours = runtime.cached_dataset([f"{base}/c"], reader_config=ORDERED, remote=remote)
    theirs = runtime.cached_dataset([single.path], reader_config=ORDERED)
    assert [bytes(s.data) for s in ours] == [bytes(s.data) for s in theirs]


def test_two_attempts_of_a_partition_at_once_at_an_s3_base_commit_the_last_sealed(
    s3_proxy: FaultProxy,
    moto_server: tuple[str, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Speculative execution: attempt A has uploaded its files and is about to seal
    # when attempt B of the same partition uploads, seals and returns; then A seals.
    base = f"s3://{BUCKET}/speculative"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)
    zero = write(base, 0, samples(0, 7), remote)
    put = remote_partitions._Store.put
    others: list[PartitionResult] = []
    seals: list[str] = []

    def put_after_the_other(store: object, key: str, body: bytes) -> None:
        if key.endswith("/part-000001.json"):
            seals.append(key)
            if len(seals) == 1:  # A's seal: B runs whole first (its seal is the second)
                others.append(write(base, 1, samples(40, 45, "b"), remote))
        put(store, key, body)  # type: ignore[arg-type]

    monkeypatch.setattr(remote_partitions._Store, "put", put_after_the_other)
    last = write(base, 1, samples(7, 19, "a"), remote)
    assert [other.sample_count for other in others] == [5]
    done = dataset_rt.commit_partitions(base, "c", [zero, last], remote=remote)
    assert done == CacheUploadSuccess("c", f"{base}/c", "uploaded")
    ours = DatasetRuntime(num_workers=2).cached_dataset(
        [f"{base}/c"], reader_config=ORDERED, remote=remote
    )
    assert [bytes(s.data) for s in ours] == [
        data for data, _ in samples(0, 7) + samples(7, 19, "a")
    ]


def test_another_build_at_an_s3_base_is_refused_not_taken_for_the_published_one(
    s3_proxy: FaultProxy, moto_server: tuple[str, int], tmp_path: Path
) -> None:
    base = f"s3://{BUCKET}/rebuilt"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)
    first = [write(base, n, rows, remote) for n, rows in enumerate([samples(0, 6), samples(6, 9)])]
    done = dataset_rt.commit_partitions(base, "c", first, remote=remote)
    assert done == CacheUploadSuccess("c", f"{base}/c", "uploaded")
    assert dataset_rt.commit_partitions(base, "c", 2, remote=remote) == CacheUploadSuccess(
        "c", f"{base}/c", "reused"
    )
    # A new build of the name with other samples: refused, its partitions kept.
    rebuilt = [write(base, n, samples(20, 30 + n, "new"), remote) for n in range(2)]
    refused = dataset_rt.commit_partitions(base, "c", rebuilt, remote=remote)
    assert refused == CacheWriteError("c", f"cache path already exists: {base}/c")
    client = direct_client(*moto_server)
    staged = client.list_objects_v2(Bucket=BUCKET, Prefix="rebuilt/tmp/partitions/c/part-")
    pointers = {f"rebuilt/tmp/partitions/c/part-{n:06d}.json" for n in range(2)}
    assert pointers <= {o["Key"] for o in staged["Contents"]}
    kept = DatasetRuntime(num_workers=2).cached_dataset(
        [f"{base}/c"], reader_config=ORDERED, remote=remote
    )
    assert [bytes(s.data) for s in kept] == [data for data, _ in samples(0, 9)]


def test_keys_the_store_did_not_delete_are_deleted_again(
    s3_proxy: FaultProxy, moto_server: tuple[str, int], tmp_path: Path
) -> None:
    # DeleteObjects answers 200 and lists the keys it could not delete.
    base = f"s3://{BUCKET}/undeleted"
    remote = RemoteConfig(local_dir=tmp_path / "local", retries=2, timeout_s=5.0)
    write(base, 0, samples(0, 4), remote)
    key = "undeleted/tmp/partitions/c/part-000000.json"
    partial = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult><Error><Key>'
        + key.encode()
        + b"</Key><Code>InternalError</Code><Message>We encountered an internal error."
        b"</Message></Error></DeleteResult>"
    )
    s3_proxy.script_for("?delete", status(200, partial))
    dataset_rt.discard_partitions(base, "c", remote=remote)
    assert sum("?delete" in r for r in s3_proxy.requests) == 2
    listing = direct_client(*moto_server).list_objects_v2(Bucket=BUCKET, Prefix="undeleted/")
    assert "Contents" not in listing
