"""Shards of a cache in object storage (moto's S3 server) fetched ahead of the reads:
in the order the stream first reads them, never more than `max_in_flight` at once,
with the samples of the local copy."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import ListSource, record
from dataset_rt import DatasetRuntime, ReaderConfig, RemoteConfig, WriterConfig
from dataset_rt._remote import RetryPolicy, Transport, transport_for
from fault_proxy import FaultProxy
from remote_fixtures import BUCKET, direct_client

SMALL_SHARDS = WriterConfig(show_progress=False, max_shard_bytes=4096)
# Long enough that fetches started together overlap.
SHARD_DELAY_S = 0.03


class FetchLog:
    """The shard fetches the transports made: their order, and how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.running = 0
        self.peak = 0


class RecordingTransport:
    """A transport that logs each shard fetch in `log` and makes it last a little."""

    def __init__(self, inner: Transport, log: FetchLog) -> None:
        self.inner = inner
        self.log = log

    def fetch(self, name: str, dest: Path) -> bool:
        if not name.startswith("shards/"):
            return self.inner.fetch(name, dest)
        with self.log.lock:
            self.log.started.append(name)
            self.log.running += 1
            self.log.peak = max(self.log.peak, self.log.running)
        try:
            time.sleep(SHARD_DELAY_S)
            return self.inner.fetch(name, dest)
        finally:
            with self.log.lock:
                self.log.running -= 1


def write_and_upload(
    runtime: DatasetRuntime, tmp_path: Path, moto_server: tuple[str, int], prefix: str
) -> tuple[Path, str]:
    """A cache of 240 samples in about a dozen shards, locally and in the bucket."""
    samples = [(bytes([i % 251]) * (100 + i), {"i": i}) for i in range(240)]
    [_] = runtime.write_cache(
        [ListSource("train", samples)], tmp_path / "local", writer_config=SMALL_SHARDS
    )
    local = tmp_path / "local" / "train"
    client = direct_client(*moto_server)
    for file in sorted(local.rglob("*")):
        if file.is_file():
            client.upload_file(str(file), BUCKET, f"{prefix}/{file.relative_to(local).as_posix()}")
    return local, f"s3://{BUCKET}/{prefix}"


def first_uses(local: Path, sample_ids: list[int]) -> list[str]:
    """The shards of `sample_ids`, each at its first read."""
    order: list[str] = []
    for sample_id in sample_ids:
        name = f"shards/{record(local, sample_id)[0].name}"
        if name not in order:
            order.append(name)
    return order


@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_a_shuffled_read_fetches_shards_in_first_use_order_max_in_flight_at_once(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
    max_in_flight: int,
) -> None:
    local, url = write_and_upload(runtime, tmp_path, moto_server, f"ahead-{max_in_flight}")
    log = FetchLog()

    def recording_transport_for(url: str, policy: RetryPolicy) -> Transport:
        return RecordingTransport(transport_for(url, policy), log)

    # Where the fetch hook of `RemoteHandle` finds each cache's transport.
    monkeypatch.setattr("dataset_rt._binding.remote.transport_for", recording_transport_for)
    config = ReaderConfig(seed=7, replacement=False)
    remote = RemoteConfig(
        local_dir=tmp_path / "copies", retries=2, timeout_s=5.0, max_in_flight=max_in_flight
    )
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote)
    got: list[tuple[Any, ...]] = [(s.sample_id, bytes(s.data), dict(s.metadata)) for s in dataset]
    expected = runtime.cached_dataset([local], reader_config=config)
    assert got == [(s.sample_id, bytes(s.data), dict(s.metadata)) for s in expected]

    order = first_uses(local, [sample_id for sample_id, _, _ in got])
    assert len(order) == len(list((local / "shards").iterdir())) >= 8
    # Each shard once, in first-use order up to fetches that started together: none
    # starts max_in_flight or more places from its own.
    assert sorted(log.started) == sorted(order)
    distances = [abs(order.index(name) - at) for at, name in enumerate(log.started)]
    assert max(distances) < max_in_flight, (log.started, order)
    assert log.peak <= max_in_flight
    if max_in_flight > 1:
        assert log.peak > 1
    assert dataset.remote_stats().shards_fetched == len(order)
