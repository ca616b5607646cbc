"""Caches read from object storage (moto's S3 server and a static HTTP server on
127.0.0.1): the same samples, tables and identities as the local copy, each shard
fetched once and checked against its SHA-256."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import dataset_rt
from conftest import ListSource
from dataset_rt import (
    CachedDataset,
    DatasetRuntime,
    ReaderConfig,
    RemoteConfig,
    WriterConfig,
)
from dataset_rt.errors import InvalidCacheError
from fault_proxy import FaultProxy, StaticServer, flip
from remote_fixtures import BUCKET, upload

SMALL_SHARDS = WriterConfig(show_progress=False, max_shard_bytes=4096)


def write_local(runtime: DatasetRuntime, base: Path, name: str, count: int) -> Path:
    samples = [(bytes([i % 251]) * (100 + i), {"i": i, "name": f"s{i}"}) for i in range(count)]
    [result] = runtime.write_cache([ListSource(name, samples)], base, writer_config=SMALL_SHARDS)
    return base / name


def shard_count(cache: Path) -> int:
    return len(list((cache / "shards").iterdir()))


def rows(dataset: CachedDataset) -> list[tuple[Any, ...]]:
    return [(s.cache_id, s.sample_id, bytes(s.data), dict(s.metadata)) for s in dataset]


def remote_config(tmp_path: Path) -> RemoteConfig:
    return RemoteConfig(local_dir=tmp_path / "copies", retries=2, timeout_s=5.0)


def test_a_cache_in_s3_reads_exactly_as_its_local_copy(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    local = write_local(runtime, tmp_path / "local", "train", 300)
    url = upload(moto_server, local, "read-exact/train")
    remote = remote_config(tmp_path)
    for config in (
        ReaderConfig(seed=3, shuffle=False),
        ReaderConfig(seed=3),
        ReaderConfig(seed=3, replacement=False),
    ):
        expected = runtime.cached_dataset([local], reader_config=config)
        dataset = runtime.cached_dataset([url], reader_config=config, remote=remote)
        assert dataset.cache_paths == [url]
        assert rows(dataset) == rows(expected)
        assert dataset.get_metadata().equals(expected.get_metadata())
        pairs = [(0, 299), (0, 0), (0, 150)]
        assert [bytes(s.data) for s in dataset.get_many(pairs)] == [
            bytes(s.data) for s in expected.get_many(pairs)
        ]
    # The first dataset fetched every shard once; the later ones found them in local_dir.
    first = runtime.cached_dataset([url], reader_config=ReaderConfig(seed=0), remote=remote)
    assert sum(1 for _ in first) == 300
    assert first.remote_stats().shards_fetched == 0
    # Beside each copy, its (empty) lock file.
    files = [p for p in (tmp_path / "copies").rglob("shards/*") if p.is_file()]
    copies = [p for p in files if p.suffix != ".lock"]
    assert len(copies) == shard_count(local)
    assert sorted(p.name for p in files) == sorted(
        name for p in copies for name in (p.name, f"{p.name}.lock")
    )


def test_a_local_copy_damaged_on_disk_is_fetched_again_by_the_read_that_finds_it(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    local = write_local(runtime, tmp_path / "local", "flip", 200)
    url = upload(moto_server, local, "damaged/flip")
    remote = remote_config(tmp_path)
    config = ReaderConfig(seed=2, shuffle=False)
    expected = rows(runtime.cached_dataset([local], reader_config=config))
    assert rows(runtime.cached_dataset([url], reader_config=config, remote=remote)) == expected
    # One byte of every local copy flipped, inside a record, as a failing disk would.
    copies = sorted((tmp_path / "copies").rglob("shards/*.bin"))
    for copy in copies:
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 0x40
        copy.write_bytes(bytes(data))
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote)
    assert rows(dataset) == expected
    assert dataset.remote_stats().shards_fetched == len(copies)
    assert [copy.read_bytes() for copy in copies] == [
        (local / "shards" / copy.name).read_bytes() for copy in copies
    ]


def test_local_and_remote_caches_mix_in_one_dataset(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    first = write_local(runtime, tmp_path / "local", "first", 40)
    second = write_local(runtime, tmp_path / "local", "second", 60)
    url = upload(moto_server, second, "mix/second")
    config = ReaderConfig(seed=5)
    expected = runtime.cached_dataset([first, second], reader_config=config)
    dataset = runtime.cached_dataset(
        [first, url], reader_config=config, remote=remote_config(tmp_path)
    )
    assert dataset.cache_paths == [first, url]
    assert rows(dataset) == rows(expected)
    stats = dataset.remote_stats()
    assert stats.shards_fetched == shard_count(second)
    assert stats.shard_bytes_fetched == sum(p.stat().st_size for p in (second / "shards").iterdir())


@contextmanager
def served(root: Path) -> Iterator[FaultProxy]:
    """The files under `root` over plain HTTP on 127.0.0.1, behind a fault proxy
    (S3 through botocore would catch a flipped byte itself by S3's checksums)."""
    with StaticServer(root) as server, FaultProxy(server.address) as proxy:
        yield proxy


def test_a_shard_that_arrives_damaged_once_is_fetched_again(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write_local(runtime, tmp_path / "site", "flip", 50)
    config = ReaderConfig(seed=0, shuffle=False)
    with served(tmp_path / "site") as proxy:
        url = f"{proxy.url}/flip"
        dataset = runtime.cached_dataset(
            [url], reader_config=config, remote=remote_config(tmp_path)
        )
        proxy.script_for("/shards/000000.bin", flip())
        assert rows(dataset) == rows(runtime.cached_dataset([local], reader_config=config))
        assert dataset.remote_stats().refetches == 1
        assert dataset.remote_stats().shards_fetched == shard_count(local)


def test_with_revalidate_off_a_held_cache_opens_without_a_request(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write_local(runtime, tmp_path / "site", "held", 60)
    config = ReaderConfig(seed=1)
    expected = rows(runtime.cached_dataset([local], reader_config=config))
    trusted = remote_config(tmp_path).model_copy(update={"revalidate": False})
    with served(tmp_path / "site") as proxy:
        url = f"{proxy.url}/held"
        # Nothing held yet: the first open fetches as the default does.
        assert rows(runtime.cached_dataset([url], reader_config=config, remote=trusted)) == expected
        before = len(proxy.requests)
        dataset = runtime.cached_dataset([url], reader_config=config, remote=trusted)
        assert rows(dataset) == expected
        assert dataset.remote_stats().files_fetched == 0
        assert len(proxy.requests) == before
        # The default fetches manifest.json at every open, and only that.
        checked = runtime.cached_dataset(
            [url], reader_config=config, remote=remote_config(tmp_path)
        )
        assert rows(checked) == expected
        assert len(proxy.requests) == before + 1
        assert "manifest.json" in proxy.requests[-1]


def test_a_reopened_remote_dataset_reads_its_first_version_without_a_request(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write_local(runtime, tmp_path / "site", "pinned", 60)
    config = ReaderConfig(seed=1)
    expected = rows(runtime.cached_dataset([local], reader_config=config))
    with served(tmp_path / "site") as proxy:
        url = f"{proxy.url}/pinned"
        dataset = runtime.cached_dataset(
            [url], reader_config=config, remote=remote_config(tmp_path)
        )
        pickled = pickle.dumps(dataset)
        assert rows(dataset) == expected
        before = len(proxy.requests)
        # The cache at the URL is written again, with other samples.
        shutil.rmtree(local)
        write_local(runtime, tmp_path / "site", "pinned", 61)
        # A copy (as a DataLoader worker gets one) reads the version the dataset
        # read, from local_dir, without a request; it used to be refused.
        copy = pickle.loads(pickled)
        assert rows(copy) == expected
        assert copy.remote_stats().files_fetched == 0
        assert len(proxy.requests) == before
        # A new open fetches the manifest and finds the new version.
        fresh = runtime.cached_dataset([url], reader_config=config, remote=remote_config(tmp_path))
        assert fresh.get_metadata().height == 61
        assert len(proxy.requests) > before


def test_a_shard_that_never_matches_fails_naming_both_digests(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write_local(runtime, tmp_path / "site", "bad", 50)
    expected = hashlib.sha256((local / "shards" / "000000.bin").read_bytes()).hexdigest()
    with served(tmp_path / "site") as proxy:
        url = f"{proxy.url}/bad"
        config = ReaderConfig(seed=0)
        dataset = runtime.cached_dataset(
            [url], reader_config=config, remote=remote_config(tmp_path)
        )
        # Two copies for the fetch ahead of the read (its failure is dropped), then
        # two for the read's own fetch, which reports it.
        proxy.script_for("/shards/000000.bin", flip(), flip(), flip(), flip())
        with pytest.raises(OSError, match="000000.bin") as caught:
            dataset.get(0, 0)
    message = str(caught.value)
    assert expected in message
    assert len(set(re.findall(r"\b[0-9a-f]{64}\b", message)) - {expected}) == 1
    # The damaged bytes are gone: no copy of the shard under any name, only its lock file.
    left = [p for p in (tmp_path / "copies").rglob("shards/*")]
    assert [p.name for p in left if p.name.startswith("000000.bin")] == ["000000.bin.lock"]
    assert all(p.stat().st_size == 0 for p in left)


def test_a_missing_remote_cache_is_named(
    runtime: DatasetRuntime, tmp_path: Path, s3_proxy: FaultProxy
) -> None:
    url = f"s3://{BUCKET}/no/such/cache"
    with pytest.raises(InvalidCacheError, match="no/such/cache.*manifest.json: not found"):
        runtime.cached_dataset(
            [url], reader_config=ReaderConfig(seed=0), remote=remote_config(tmp_path)
        )


def test_an_unsupported_url_scheme_is_refused_by_name(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="gs://bucket/cache"):
        runtime.cached_dataset(["gs://bucket/cache"], reader_config=ReaderConfig(seed=0))


def test_a_cache_over_plain_http_reads_as_its_local_copy(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    local = write_local(runtime, tmp_path / "site" / "caches", "web", 80)
    config = ReaderConfig(seed=9)
    with StaticServer(tmp_path / "site") as server:
        host, port = server.address
        url = f"http://{host}:{port}/caches/web"
        dataset = runtime.cached_dataset(
            [url], reader_config=config, remote=remote_config(tmp_path)
        )
        assert rows(dataset) == rows(runtime.cached_dataset([local], reader_config=config))


def _identities_in_child(dataset: CachedDataset, queue: Any) -> None:
    queue.put(sorted((s.cache_id, s.sample_id) for s in dataset))


def remote_dataset(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], name: str
) -> tuple[CachedDataset, Path]:
    local = write_local(runtime, tmp_path / "local", "child", 70)
    url = upload(moto_server, local, f"{name}/child")
    config = ReaderConfig(seed=1)
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote_config(tmp_path))
    assert dataset.get(0, 3).metadata["i"] == 3  # the parent has made requests
    return dataset, local


def test_a_remote_dataset_pickles_into_a_spawned_process(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    dataset, _ = remote_dataset(runtime, tmp_path, moto_server, "spawned")
    assert pickle.loads(pickle.dumps(dataset)).remote_config == dataset.remote_config
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_identities_in_child, args=(dataset, queue))
    child.start()
    try:
        seen = queue.get(timeout=120)
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert seen == sorted((s.cache_id, s.sample_id) for s in dataset)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_read_a_remote_cache_as_one_process_does(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
    method: str,
) -> None:
    pytest.importorskip("torch", reason="DataLoader workers need torch")
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    from dataset_rt.torch import DataLoader

    dataset, local = remote_dataset(runtime, tmp_path, moto_server, f"loader-{method}")
    loader = DataLoader(
        dataset,
        batch_size=8,
        num_workers=2,
        multiprocessing_context=method,
        collate_fn=list,
        timeout=120,
    )
    manifests = sum("manifest.json" in request for request in s3_proxy.requests)
    assert manifests == 1
    seen = [(s.cache_id, s.sample_id, bytes(s.data)) for batch in loader for s in batch]
    expected = runtime.cached_dataset([local], reader_config=ReaderConfig(seed=1))
    assert seen == [(s.cache_id, s.sample_id, bytes(s.data)) for s in expected]
    # The workers opened the version the parent read, from local_dir: no manifest request.
    assert sum("manifest.json" in request for request in s3_proxy.requests) == manifests


def test_verify_fetches_a_remote_cache_and_scrubs_its_copy(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    local = write_local(runtime, tmp_path / "local", "scrub", 120)
    url = upload(moto_server, local, "verify/scrub")
    remote = remote_config(tmp_path)
    report = dataset_rt.verify(url, remote=remote, show_progress=False)
    assert (report.ok, report.path) == (True, url)
    copies = sorted((tmp_path / "copies").rglob("shards/*.bin"))
    assert len(copies) == shard_count(local)
    # A byte flipped in the local copy: the next scrub finds it, deletes the
    # copy and fetches the shard again, so the cache at the URL is whole.
    damaged = copies[-1]
    original = damaged.read_bytes()
    data = bytearray(original)
    data[len(data) // 2] ^= 0x40
    damaged.write_bytes(bytes(data))
    again = dataset_rt.verify(url, remote=remote, show_progress=False)
    assert (again.ok, again.problems) == (True, [])
    assert damaged.read_bytes() == original
