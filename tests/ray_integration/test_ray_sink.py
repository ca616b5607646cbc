"""dataset_rt.ray.CacheSink on a two-node Ray cluster: the cache equals one write_cache of
the rows, a worker killed mid-write is retried without duplicating rows, a failure in the
user's code publishes nothing and leaves no staging, and bad inputs are refused."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.data", reason="dataset_rt.ray needs ray[data] (the ray extra)")

import ray.data

from cache_compare import Sample, assert_same_cache, single_write
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ReaderConfig, WriterConfig, errors
from dataset_rt.ray import CacheSink

CONFIG = WriterConfig(show_progress=False, max_shard_bytes=256)

pytestmark = pytest.mark.usefixtures("ordered_ray_data")


def samples_of(count: int) -> list[Sample]:
    return [
        (bytes([i % 251]) * (i % 40), {"i": i, "f": i / 4, "s": f"s{i}", "b": i % 3 == 0})
        for i in range(count)
    ]


def rows_of(samples: list[Sample], blocks: int) -> ray.data.Dataset:
    rows = [{"data": data, **metadata} for data, metadata in samples]
    return ray.data.from_items(rows, override_num_blocks=blocks)


def staging(base: Path, name: str) -> Path:
    return base / "tmp" / "partitions" / name


def test_the_sink_writes_the_cache_of_one_write(runtime: DatasetRuntime, tmp_path: Path) -> None:
    samples = samples_of(120)
    sink = CacheSink(tmp_path / "ray", "c", writer_config=CONFIG)
    rows_of(samples, blocks=5).write_datasink(sink)
    assert sink.result == CacheWriteSuccess("c", tmp_path / "ray" / "c")
    single = single_write(runtime, tmp_path / "single", "c", samples)
    assert_same_cache(runtime, tmp_path / "ray" / "c", single)
    assert [p.name for p in staging(tmp_path / "ray", "c").iterdir()] == ["committed.json"]


class DieOnce:
    """A map_batches function whose worker process exits in the middle of the write
    task that holds row `row`, the first time only (a marker file remembers it)."""

    def __init__(self, marker: Path, row: int) -> None:
        self.marker = marker
        self.row = row

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.row in list(batch["i"]) and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return batch


def test_a_worker_killed_mid_write_is_retried_and_every_row_is_written_once(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = samples_of(100)
    marker = tmp_path / "died"
    sink = CacheSink(tmp_path / "ray", "c", writer_config=CONFIG)
    # Batches of 5 rows within blocks of 25: the task dies with part of its partition
    # written (row 37 is in its second batch).
    rows = rows_of(samples, blocks=4).map_batches(DieOnce(marker, row=37), batch_size=5)
    rows.write_datasink(sink)
    assert marker.exists()
    assert sink.result == CacheWriteSuccess("c", tmp_path / "ray" / "c")
    single = single_write(runtime, tmp_path / "single", "c", samples)
    assert_same_cache(runtime, tmp_path / "ray" / "c", single)


def fail_on_row_13(batch: dict[str, Any]) -> dict[str, Any]:
    if 13 in list(batch["i"]):
        raise ValueError("row 13 has no label")
    return batch


def test_an_error_in_user_code_publishes_nothing_and_removes_the_staging(
    tmp_path: Path,
) -> None:
    sink = CacheSink(tmp_path, "c", writer_config=CONFIG)
    rows = rows_of(samples_of(40), blocks=4).map_batches(fail_on_row_13, batch_size=5)
    with pytest.raises(Exception, match="row 13 has no label") as raised:
        rows.write_datasink(sink)
    # Ray's own report of the user's exception, not wrapped by the sink.
    assert isinstance(raised.value, ray.exceptions.UserCodeException), type(raised.value)
    assert "was not written" not in str(raised.value)
    assert sink.result is None
    assert not (tmp_path / "c").exists()
    assert not staging(tmp_path, "c").exists()


def test_an_empty_dataset_is_refused_naming_the_cache(tmp_path: Path) -> None:
    sink = CacheSink(tmp_path, "empty", writer_config=CONFIG)
    with pytest.raises(ValueError, match="the Ray Dataset is empty: cache 'empty'"):
        rows_of(samples_of(10), blocks=2).limit(0).write_datasink(sink)
    assert not (tmp_path / "empty").exists()
    assert not staging(tmp_path, "empty").exists()


def test_a_published_cache_is_refused_before_any_task_writes(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    existing = single_write(runtime, tmp_path, "c", samples_of(3))
    sink = CacheSink(tmp_path, "c", writer_config=CONFIG)
    with pytest.raises(errors.CacheExistsError, match=f"cache path already exists: {existing}"):
        rows_of(samples_of(10), blocks=2).write_datasink(sink)
    assert sink.result is None
    assert not staging(tmp_path, "c").exists()


def test_rows_the_sink_cannot_write_fail_naming_the_column(tmp_path: Path) -> None:
    rows = ray.data.from_items([{"data": "text", "i": 1}, {"data": "more", "i": 2}])
    with pytest.raises(Exception, match="column 'data' must hold bytes, got str"):
        rows.write_datasink(CacheSink(tmp_path, "c", writer_config=CONFIG))
    rows = ray.data.from_items([{"payload": b"x", "i": 1}])
    with pytest.raises(Exception, match="the rows have no column 'data'"):
        rows.write_datasink(CacheSink(tmp_path, "c", writer_config=CONFIG))
    assert not (tmp_path / "c").exists()


def test_the_columns_to_write_are_chosen_by_name(runtime: DatasetRuntime, tmp_path: Path) -> None:
    samples = samples_of(30)
    rows = [{"payload": data, "skip": 1.5, **metadata} for data, metadata in samples]
    sink = CacheSink(
        tmp_path / "ray",
        "c",
        data_column="payload",
        metadata_columns=["s", "i"],
        writer_config=CONFIG,
    )
    ray.data.from_items(rows, override_num_blocks=3).write_datasink(sink)
    chosen = [(data, {"s": m["s"], "i": m["i"]}) for data, m in samples]
    single = single_write(runtime, tmp_path / "single", "c", chosen)
    assert_same_cache(runtime, tmp_path / "ray" / "c", single)


def test_without_preserve_order_every_row_is_written_once(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = samples_of(60)
    options = ray.data.DataContext.get_current().execution_options
    options.preserve_order = False  # the fixture restores it
    sink = CacheSink(tmp_path, "c", writer_config=CONFIG)
    rows_of(samples, blocks=6).write_datasink(sink)
    assert sink.result == CacheWriteSuccess("c", tmp_path / "c")
    dataset = runtime.cached_dataset([tmp_path / "c"], reader_config=ReaderConfig(seed=0))
    written = sorted(
        (int(s.metadata["i"]), bytes(s.data))
        for s in dataset.get_many([(0, sample_id) for sample_id in range(len(dataset))])
    )
    assert written == [(m["i"], data) for data, m in samples]


class RecordNode:
    """A map_batches function that leaves a file named after the node it runs on."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        (self.folder / ray.get_runtime_context().get_node_id()).touch()
        time.sleep(0.2)  # each task holds its node's one CPU a while: the next goes elsewhere
        return batch


def test_both_nodes_write_partitions(runtime: DatasetRuntime, tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    samples = samples_of(200)
    sink = CacheSink(tmp_path / "ray", "c", writer_config=CONFIG)
    rows_of(samples, blocks=8).map_batches(RecordNode(nodes)).write_datasink(sink)
    listed = ray.nodes()  # type: ignore[no-untyped-call]
    alive = [node["NodeID"] for node in listed if node["Alive"]]
    assert sorted(path.name for path in nodes.iterdir()) == sorted(alive) and len(alive) == 2
    single = single_write(runtime, tmp_path / "single", "c", samples)
    assert_same_cache(runtime, tmp_path / "ray" / "c", single)
