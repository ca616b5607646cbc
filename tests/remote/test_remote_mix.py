"""A mix (`CachedDataset.set_mix`) over a cache in object storage: the samples are
the local copy's, and each shard is fetched once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_remote_fetch_ahead import write_and_upload
from test_remote_read import remote_config

from dataset_rt import DatasetRuntime, Mix, ReaderConfig
from fault_proxy import FaultProxy


def test_a_mixed_remote_stream_is_the_local_one(
    runtime: DatasetRuntime,
    tmp_path: Path,
    moto_server: tuple[str, int],
    s3_proxy: FaultProxy,
) -> None:
    local, url = write_and_upload(runtime, tmp_path, moto_server, "mix")
    config = ReaderConfig(seed=3, replacement=False)
    dataset = runtime.cached_dataset([url], reader_config=config, remote=remote_config(tmp_path))
    dataset.set_mix({0: Mix(repeat=1.25)})  # 300 samples of 240 rows
    expected = runtime.cached_dataset([local], reader_config=config)
    expected.set_mix({0: Mix(repeat=1.25)})
    for _ in range(2):
        got: list[tuple[Any, ...]] = [(s.sample_id, bytes(s.data)) for s in dataset]
        assert len(got) == 300
        assert got == [(s.sample_id, bytes(s.data)) for s in expected]
    assert dataset.remote_stats().shards_fetched == len(list((local / "shards").iterdir()))
