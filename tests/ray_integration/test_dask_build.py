"""The partition protocol is engine-neutral: the same build through write_partition on a
Dask LocalCluster (two worker processes) equals one write_cache of the samples."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dataset_rt
from cache_compare import SMALL_SHARDS, Sample, assert_same_cache, single_write
from conftest import pythonpath_before_inherited
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, PartitionResult
from ray_fixtures import PACKAGE_PARENT, TESTS

distributed = pytest.importorskip("dask.distributed", reason="the Dask test needs distributed")

BOUNDS = [(0, 40), (40, 40), (40, 75), (75, 100)]  # partition 1 is empty


def samples_of(start: int, stop: int) -> list[Sample]:
    return [
        (f"row {i}".encode() * (i % 5), {"i": i, "even": i % 2 == 0}) for i in range(start, stop)
    ]


def write(base: str, partition: int) -> PartitionResult:
    """One Dask task: rows BOUNDS[partition] as partition `partition`."""
    samples = samples_of(*BOUNDS[partition])
    rows = (CacheInput(data, metadata) for data, metadata in samples)  # type: ignore[arg-type]
    return dataset_rt.write_partition(
        rows, base, "built", partition=partition, writer_config=SMALL_SHARDS
    )


def test_a_dask_build_equals_one_write(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [PACKAGE_PARENT, TESTS, TESTS / "helpers", TESTS / "ray_integration"]
    monkeypatch.setenv("PYTHONPATH", pythonpath_before_inherited(*paths))
    base = str(tmp_path / "dask")
    with warnings.catch_warnings():
        # distributed warns of its own choices on a small machine (ports, memory).
        warnings.simplefilter("ignore")
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            futures = [client.submit(write, base, k, pure=False) for k in range(len(BOUNDS))]
            results = client.gather(futures)
    assert [r.sample_count for r in results] == [b - a for a, b in BOUNDS]
    outcome = dataset_rt.commit_partitions(base, "built", results)
    assert outcome == CacheWriteSuccess("built", tmp_path / "dask" / "built")
    single = single_write(runtime, tmp_path / "single", "built", samples_of(0, 100))
    assert_same_cache(runtime, tmp_path / "dask" / "built", single)
