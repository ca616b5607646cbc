"""Caches built in partitions (`write_partition`) and published by one commit
(`commit_partitions`): the result equals one `write_cache` of the same samples,
retries replace attempts, failures publish nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataset_rt
from cache_compare import SMALL_SHARDS, Sample, assert_same_cache, single_write
from conftest import pythonpath_before_inherited
from dataset_rt import (
    CacheInput,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    PartitionResult,
    WriterConfig,
    errors,
)
from dataset_rt._core import partitions as partitions_module
from dataset_rt._core.partition_attempts import committed_text, pointer_part, published_by_commit

QUIET = SMALL_SHARDS
PYTHON_DIR = Path(dataset_rt.__file__).resolve().parent.parent


def samples_of(count: int, start: int = 0, tag: str = "") -> list[Sample]:
    return [
        (bytes([i % 251]) * (i % 40), {"i": i, "f": i / 4, "s": f"{tag}{i}", "b": i % 3 == 0})
        for i in range(start, start + count)
    ]


def inputs(samples: Sequence[Sample]) -> list[CacheInput]:
    return [CacheInput(data, metadata) for data, metadata in samples]  # type: ignore[arg-type]


def write_parts(
    base: Path, name: str, parts: Sequence[Sequence[Sample]], config: WriterConfig = QUIET
) -> list[PartitionResult]:
    return [
        dataset_rt.write_partition(inputs(part), base, name, partition=n, writer_config=config)
        for n, part in enumerate(parts)
    ]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(min_value=1, max_value=60),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=5),
    version=st.sampled_from([2, 3]),
)
def test_committed_partitions_equal_one_write(
    runtime: DatasetRuntime, count: int, cuts: list[int], version: int
) -> None:
    samples = samples_of(count)
    bounds = [0, *sorted(min(cut, count) for cut in cuts), count]
    parts = [samples[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    config = QUIET.model_copy(update={"format_version": version})
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        results = write_parts(base / "parts", "c", parts, config)
        assert [r.sample_count for r in results] == [len(p) for p in parts]
        outcome = dataset_rt.commit_partitions(base / "parts", "c", results)
        assert outcome == CacheWriteSuccess("c", base / "parts" / "c")
        single = single_write(runtime, base / "single", "c", samples, config)
        assert_same_cache(runtime, base / "parts" / "c", single)
        # Staging holds only the commit's record.
        staged = sorted(p.name for p in (base / "parts" / "tmp" / "partitions" / "c").iterdir())
        assert staged == ["committed.json"]


def test_a_retried_partition_replaces_the_earlier_attempt(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    base = tmp_path / "b"
    first, second, third = samples_of(4), samples_of(3, 4, "old"), samples_of(5, 7)
    results = write_parts(base, "c", [first, second, third])
    retry = samples_of(6, 4, "new")
    again = dataset_rt.write_partition(inputs(retry), base, "c", partition=1, writer_config=QUIET)
    assert again.attempt != results[1].attempt and again.sample_count == 6
    folder = base / "tmp" / "partitions" / "c"
    # The earlier attempt stays until the commit (an attempt never removes another).
    attempts = sorted(p.name for p in folder.glob("part-000001.*") if p.is_dir())
    assert attempts == sorted([results[1].path.name, again.path.name])
    # A killed attempt of partition 2: a folder with a half-written cache, no pointer.
    killed = folder / "part-000002.killed" / "c" / "shards"
    killed.mkdir(parents=True)
    (killed / "000000.bin").write_bytes(b"half")
    outcome = dataset_rt.commit_partitions(base, "c", 3)
    assert isinstance(outcome, CacheWriteSuccess), outcome
    assert [p.name for p in folder.iterdir()] == ["committed.json"]
    single = single_write(runtime, tmp_path / "single", "c", first + retry + third)
    assert_same_cache(runtime, base / "c", single)


def test_two_attempts_of_a_partition_at_once_commit_the_one_sealed_last(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Speculative execution: attempt A has written its cache and is about to seal
    # when attempt B of the same partition writes, seals and returns; then A seals.
    base = tmp_path / "b"
    [zero] = write_parts(base, "c", [samples_of(3)])
    slow, fast = samples_of(4, 10, "a"), samples_of(5, 20, "b")
    seal = partitions_module._seal
    others: list[PartitionResult] = []
    calls: list[int] = []

    def seal_after_the_other(*arguments: object) -> None:
        calls.append(1)
        if len(calls) == 1:  # A's seal: B runs whole first (its own seal is the second)
            others.append(write_partition(fast))
        seal(*arguments)  # type: ignore[arg-type]

    def write_partition(samples: list[Sample]) -> PartitionResult:
        return dataset_rt.write_partition(
            inputs(samples), base, "c", partition=1, writer_config=QUIET
        )

    monkeypatch.setattr(partitions_module, "_seal", seal_after_the_other)
    last = write_partition(slow)
    assert [other.sample_count for other in others] == [5]
    outcome = dataset_rt.commit_partitions(base, "c", [zero, last])
    assert isinstance(outcome, CacheWriteSuccess), outcome
    single = single_write(runtime, tmp_path / "single", "c", samples_of(3) + slow)
    assert_same_cache(runtime, base / "c", single)


def test_a_missing_partition_fails_naming_it_and_a_later_commit_succeeds(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    parts = [samples_of(3), samples_of(2, 3), samples_of(4, 5)]
    dataset_rt.write_partition(inputs(parts[0]), tmp_path, "c", partition=0, writer_config=QUIET)
    dataset_rt.write_partition(inputs(parts[2]), tmp_path, "c", partition=2, writer_config=QUIET)
    outcome = dataset_rt.commit_partitions(tmp_path, "c", 3)
    assert isinstance(outcome, CacheWriteError)
    assert outcome.message.startswith("partition 1 of 3 was not written")
    assert not (tmp_path / "c").exists()
    dataset_rt.write_partition(inputs(parts[1]), tmp_path, "c", partition=1, writer_config=QUIET)
    assert dataset_rt.commit_partitions(tmp_path, "c", 3) == CacheWriteSuccess("c", tmp_path / "c")
    single = single_write(runtime, tmp_path / "single", "c", parts[0] + parts[1] + parts[2])
    assert_same_cache(runtime, tmp_path / "c", single)


def test_another_build_of_a_published_name_is_refused_not_taken_for_it(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    first = [samples_of(3), [], samples_of(2, 3)]
    results = write_parts(tmp_path, "c", first)
    folder = tmp_path / "tmp" / "partitions" / "c"
    pointers = [pointer_part((folder / f"part-{n:06d}.json").read_bytes(), n, "") for n in range(3)]
    done = dataset_rt.commit_partitions(tmp_path, "c", results)
    assert done == CacheWriteSuccess("c", tmp_path / "c")
    # The core's committed.json is the one the package computes (the s3:// commit's).
    manifest = (tmp_path / "c" / "manifest.json").read_bytes()
    recorded = (folder / "committed.json").read_bytes()
    assert recorded == committed_text(manifest, pointers)
    assert published_by_commit(recorded, manifest, pointers)
    assert published_by_commit(recorded, manifest, None)
    # A new build of the name with other samples, committed over it: refused, and
    # its partitions kept (discard_partitions removes them); the cache unchanged.
    rebuilt = write_parts(tmp_path, "c", [samples_of(5, 10, "new"), samples_of(1, 20, "new")])
    refused = dataset_rt.commit_partitions(tmp_path, "c", rebuilt)
    assert refused == CacheWriteError("c", f"cache path already exists: {tmp_path / 'c'}")
    assert all(part.path.is_dir() for part in rebuilt)
    assert not published_by_commit(recorded, manifest, [pointers[0], pointers[1], pointers[0]])
    single = single_write(runtime, tmp_path / "single", "c", first[0] + first[2])
    assert_same_cache(runtime, tmp_path / "c", single)
    # Only some partitions of a new build sealed: refused too.
    dataset_rt.discard_partitions(tmp_path, "c")
    write_parts(tmp_path, "c", [samples_of(2, 30, "part")])
    partial = dataset_rt.commit_partitions(tmp_path, "c", 2)
    assert partial == CacheWriteError("c", f"cache path already exists: {tmp_path / 'c'}")


def test_different_schemas_fail_naming_the_partitions_and_the_column(tmp_path: Path) -> None:
    good = samples_of(3)
    other = [(data, {**metadata, "s": 7}) for data, metadata in samples_of(2, 3)]
    results = write_parts(tmp_path, "c", [good, [], other])
    outcome = dataset_rt.commit_partitions(tmp_path, "c", results)
    assert outcome == CacheWriteError(
        "c",
        "partitions 0 and 2 have different metadata schemas: column 's' is string in "
        "partition 0 and int in partition 2",
    )
    assert not (tmp_path / "c").exists()


def test_a_repeated_commit_succeeds_again_and_a_foreign_cache_is_refused(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    results = write_parts(tmp_path / "b", "c", [samples_of(2), samples_of(3, 2)])
    done = dataset_rt.commit_partitions(tmp_path / "b", "c", results)
    assert done == CacheWriteSuccess("c", tmp_path / "b" / "c")
    assert dataset_rt.commit_partitions(tmp_path / "b", "c", results) == done
    assert dataset_rt.commit_partitions(tmp_path / "b", "c", 2) == done
    # A cache of that name written otherwise is not this commit's.
    single_write(runtime, tmp_path / "f", "c", samples_of(1))
    write_parts(tmp_path / "f", "c", [samples_of(2)])
    refused = dataset_rt.commit_partitions(tmp_path / "f", "c", 1)
    assert refused == CacheWriteError("c", f"cache path already exists: {tmp_path / 'f' / 'c'}")
    assert dataset_rt.commit_partitions(tmp_path / "g", "c", 1) == CacheWriteError(
        "c",
        f"partition 0 of 1 was not written (no sealed attempt in {tmp_path}/g/tmp/partitions/c)",
    )


def test_an_exception_of_the_samples_surfaces_with_its_cause_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    def broken() -> Iterator[CacheInput]:
        yield from inputs(samples_of(5))
        raise KeyError("label")

    earlier = dataset_rt.write_partition(inputs(samples_of(2)), tmp_path, "c", partition=4)
    with pytest.raises(errors.CacheWriteFailedError) as raised:
        dataset_rt.write_partition(broken(), tmp_path, "c", partition=4, writer_config=QUIET)
    assert (
        str(raised.value)
        == "partition 4 of cache 'c' was not written: source raised KeyError: 'label'"
    )
    assert isinstance(raised.value.__cause__, KeyError)
    folder = tmp_path / "tmp" / "partitions" / "c"
    # Only the earlier attempt and its pointer: the failed one left nothing.
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [earlier.path.name, "part-000004.json"]
    )
    # A sample of the wrong shape fails the same way, chained to the writer's error.
    with pytest.raises(errors.CacheWriteFailedError, match="partition 0 of cache 'c'") as bad:
        dataset_rt.write_partition([CacheInput("text", {})], tmp_path, "c", partition=0)  # type: ignore[arg-type]
    assert isinstance(bad.value.__cause__, ValueError)


def test_bad_arguments_raise_naming_the_value(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="partition must be an int, got str"):
        dataset_rt.write_partition([], tmp_path, "c", partition="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition must be >= 0, got -1"):
        dataset_rt.write_partition([], tmp_path, "c", partition=-1)
    with pytest.raises(ValueError, match="source name"):
        dataset_rt.write_partition([], tmp_path, "a/b", partition=0)
    with pytest.raises(ValueError, match="partitions must be at least 1, got 0"):
        dataset_rt.commit_partitions(tmp_path, "c", 0)
    with pytest.raises(TypeError, match="partitions must be a sequence of PartitionResult"):
        dataset_rt.commit_partitions(tmp_path, "c", 2.0)  # type: ignore[arg-type]
    part = dataset_rt.write_partition([], tmp_path, "c", partition=1)
    with pytest.raises(ValueError, match=r"partition 1 is not in 0..0 \(1 results given\)"):
        dataset_rt.commit_partitions(tmp_path, "c", [part])
    with pytest.raises(ValueError, match="partition 1 is of cache 'c', not 'd'"):
        dataset_rt.commit_partitions(tmp_path, "d", [part, part])


_CHILD = """
import sys
from pathlib import Path
import dataset_rt
from dataset_rt import CacheInput, WriterConfig
base, number, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
samples = (
    CacheInput(b"p%d" % i * (i % 7), {"i": i, "s": str(i)}) for i in range(start, start + count)
)
config = WriterConfig(show_progress=False, max_shard_bytes=128)
result = dataset_rt.write_partition(samples, base, "c", partition=number, writer_config=config)
print(result.sample_count)
"""


def test_three_plain_processes_build_the_cache_of_one_write(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    env = {"PYTHONPATH": pythonpath_before_inherited(PYTHON_DIR)}
    bounds = [(0, 40), (40, 0), (40, 25)]  # partition 1 is empty
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path / "b"), str(n), str(a), str(c)],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for n, (a, c) in enumerate(bounds)
    ]
    outputs = [child.communicate(timeout=120)[0].strip() for child in children]
    assert [child.returncode for child in children] == [0, 0, 0]
    assert outputs == ["40", "0", "25"]
    assert dataset_rt.commit_partitions(tmp_path / "b", "c", 3) == CacheWriteSuccess(
        "c", tmp_path / "b" / "c"
    )
    samples: list[Sample] = [(b"p%d" % i * (i % 7), {"i": i, "s": str(i)}) for i in range(65)]
    config = WriterConfig(show_progress=False, max_shard_bytes=128)
    single = single_write(runtime, tmp_path / "single", "c", samples, config)
    assert_same_cache(runtime, tmp_path / "b" / "c", single)


def test_a_commit_failing_after_placing_the_shards_leaves_the_partitions_whole(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    parts = [samples_of(6), samples_of(5, 6)]
    results = write_parts(tmp_path, "c", parts)
    shards_before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.bin"))
    # committed.json cannot be written (a folder is in its place): the commit fails
    # after the joined files and the shards are in its staging directory.
    blocker = tmp_path / "tmp" / "partitions" / "c" / "committed.json"
    (blocker / "x").mkdir(parents=True)
    failed = dataset_rt.commit_partitions(tmp_path, "c", results)
    assert isinstance(failed, CacheWriteError) and "committed.json" in failed.message, failed
    assert not (tmp_path / "c").exists()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.bin")) == shards_before
    assert not list((tmp_path / "tmp").glob("*.staging"))
    shutil.rmtree(blocker)
    assert dataset_rt.commit_partitions(tmp_path, "c", results) == CacheWriteSuccess(
        "c", tmp_path / "c"
    )
    single = single_write(runtime, tmp_path / "single", "c", parts[0] + parts[1])
    assert_same_cache(runtime, tmp_path / "c", single)


def test_discarding_a_failed_build_removes_its_partitions_and_keeps_a_published_cache(
    tmp_path: Path,
) -> None:
    write_parts(tmp_path, "c", [samples_of(3), samples_of(2, 3)])
    (tmp_path / "tmp" / "partitions" / "c" / "part-000002.killed" / "c").mkdir(parents=True)
    dataset_rt.discard_partitions(tmp_path, "c")
    assert list((tmp_path / "tmp" / "partitions" / "c").iterdir()) == []
    assert dataset_rt.commit_partitions(tmp_path, "c", 2).message.startswith(  # type: ignore[union-attr]
        "partition 0 of 2 was not written"
    )
    results = write_parts(tmp_path, "c", [samples_of(4)])
    done = dataset_rt.commit_partitions(tmp_path, "c", results)
    write_parts(tmp_path, "c", [samples_of(1)])  # a later, failed build of the name
    dataset_rt.discard_partitions(tmp_path, "c")
    assert [p.name for p in (tmp_path / "tmp" / "partitions" / "c").iterdir()] == ["committed.json"]
    assert dataset_rt.commit_partitions(tmp_path, "c", 1) == done
    assert len(list((tmp_path / "c" / "shards").iterdir())) >= 1
