"""dataset_rt.ray.read_cache on a two-node Ray cluster: the rows are the library's own
stream for the seed and epoch, read by several tasks over ranges of positions."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray.data", reason="dataset_rt.ray needs ray[data] (the ray extra)")

from cache_compare import single_write
from dataset_rt import DatasetRuntime, ReaderConfig
from dataset_rt.ray import read_cache
from dataset_rt.ray._read import position_ranges

pytestmark = pytest.mark.usefixtures("ordered_ray_data")


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    """Two caches of 150 and 90 samples."""
    base = tmp_path_factory.mktemp("read")
    return [
        single_write(
            runtime,
            base,
            name,
            [(f"{name} {i}".encode(), {"i": i, "label": f"l{i % 7}"}) for i in range(count)],
        )
        for name, count in (("a", 150), ("b", 90))
    ]


@pytest.mark.parametrize("epoch", [0, 1])
def test_the_rows_are_the_stream_of_the_seed_and_epoch(
    runtime: DatasetRuntime, caches: list[Path], epoch: int
) -> None:
    config = ReaderConfig(seed=11)
    rows = read_cache(caches, reader_config=config, epoch=epoch, override_num_blocks=3)
    materialized = rows.materialize()
    assert materialized.num_blocks() == 3  # one block per read task
    got = materialized.take_all()
    dataset = runtime.cached_dataset(caches, reader_config=config)
    dataset.set_epoch(epoch)
    expected = list(dataset)
    assert len(got) == len(expected) == 240
    assert [row["data"] for row in got] == [bytes(s.data) for s in expected]
    assert [(row["cache_id"], row["sample_id"]) for row in got] == [
        (s.cache_id, s.sample_id) for s in expected
    ]
    assert [(row["i"], row["label"]) for row in got] == [
        (s.metadata["i"], s.metadata["label"]) for s in expected
    ]
    assert set(got[0]) == {"data", "cache_id", "sample_id", "i", "label"}


def test_the_epochs_differ(caches: list[Path]) -> None:
    config = ReaderConfig(seed=11)
    epochs = [
        [row["sample_id"] for row in read_cache(caches, reader_config=config, epoch=e).take_all()]
        for e in (0, 1)
    ]
    assert epochs[0] != epochs[1]


def test_positions_are_cut_into_contiguous_ranges() -> None:
    assert position_ranges(240, 3, 1) == [(0, 80), (80, 160), (160, 240)]
    assert position_ranges(10, 4, 1) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert position_ranges(5000, 200, 1024) == [(0, 1250), (1250, 2500), (2500, 3750), (3750, 5000)]
    assert position_ranges(100, 200, 1024) == [(0, 100)]
    assert position_ranges(2, 8, 1) == [(0, 1), (1, 2)]


def test_bad_arguments_are_refused_before_any_task(caches: list[Path]) -> None:
    config = ReaderConfig(seed=0)
    with pytest.raises(TypeError, match="paths must be a sequence of cache paths"):
        read_cache(str(caches[0]), reader_config=config)
    with pytest.raises(ValueError, match="override_num_blocks must be at least 1, got 0"):
        read_cache(caches, reader_config=config, override_num_blocks=0)
    with pytest.raises(TypeError, match="epoch must be an int, got str"):
        read_cache(caches, reader_config=config, epoch="1")  # type: ignore[arg-type]
