"""Loading caches: `cached_dataset` and `from_cache_sources` (SPEC 3)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import (
    CachedDataset,
    CacheSource,
    CacheSourcesDatasetError,
    CacheSourcesDatasetSuccess,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
)
from dataset_rt.errors import InvalidCacheError

CONFIG = ReaderConfig(seed=0, shuffle=False)
OTHER_TYPES = [
    (b"x", {"index": 1.5, "label": "x", "score": 1.0, "flag": True})
]  # index: float, not int


def records(ds: CachedDataset) -> list[tuple[int, int, bytes | memoryview]]:
    return [(s.cache_id, s.sample_id, s.data) for s in ds]


def expected_records(
    *sources: list[tuple[bytes, dict[str, object]]],
) -> list[tuple[int, int, bytes | memoryview]]:
    return [(c, i, data) for c, source in enumerate(sources) for i, (data, _) in enumerate(source)]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    base = tmp_path_factory.mktemp("loading")
    results = runtime.write_cache(
        [
            ListSource("a", simple_samples(4)),
            ListSource("b", simple_samples(3, payload_bytes=2)),
            ListSource("float_index", OTHER_TYPES),
            ListSource("other_keys", [(b"y", {"other": 1})]),
        ],
        base,
        writer_config=QUIET,
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), results
    (base / "empty").mkdir()
    (base / "junk").mkdir()
    (base / "junk" / "manifest.json").write_text("{")
    return base


# ---------------------------------------------------------------- cached_dataset


def test_cache_ids_follow_the_order_of_paths(runtime: DatasetRuntime, written: Path) -> None:
    ds = runtime.cached_dataset([str(written / "b"), written / "a"], reader_config=CONFIG)
    assert ds.cache_paths == [written / "b", written / "a"]
    assert ds.reader_config == CONFIG
    assert records(ds) == expected_records(simple_samples(3, payload_bytes=2), simple_samples(4))


SCHEMA = "all caches must share the same metadata schema: column"


@pytest.mark.parametrize(
    ("entries", "named", "message"),
    [
        (["missing"], "missing", "cannot open the cache directory: no such file or directory"),
        (["a", "missing"], "missing", "cannot open the cache directory"),
        (["empty"], "empty", "manifest.json"),
        (["a", "junk"], "junk", "manifest.json"),
        (["a", "float_index"], "float_index", f"{SCHEMA} 'index' is int in {{a}} but float in"),
        (["a", "other_keys"], "other_keys", f"{SCHEMA} 'flag' is in {{a}} but not in"),
        (["a", "b", "other_keys"], "other_keys", f"{SCHEMA} 'flag' is in {{a}} but not in"),
        (["other_keys", "a"], "other_keys", f"{SCHEMA} 'flag' is in {{a}} but not in"),
    ],
)
def test_loading_a_bad_cache_raises_naming_it(
    runtime: DatasetRuntime, written: Path, entries: list[str], named: str, message: str
) -> None:
    with pytest.raises(ValueError) as excinfo:
        runtime.cached_dataset([written / e for e in entries], reader_config=CONFIG)
    assert message.format(a=written / "a") in str(excinfo.value)
    assert str(written / named) in str(excinfo.value)


def test_a_schema_mismatch_names_the_column_both_kinds_and_both_caches(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    results = runtime.write_cache(
        [
            ListSource("a", [(b"x", {"label": 1, "split": "train"})]),
            ListSource("b", [(b"x", {"label": "cat", "split": "train"})]),
            ListSource("c", [(b"x", {"label": 1})]),
        ],
        tmp_path,
        writer_config=QUIET,
    )
    assert all(isinstance(r, CacheWriteSuccess) for r in results), results
    a, b, c = (str(tmp_path / name) for name in "abc")
    expected = {
        (a, b): f"{SCHEMA} 'label' is int in {a} but string in {b}",
        (b, a): f"{SCHEMA} 'label' is string in {b} but int in {a}",
        (a, c): f"{SCHEMA} 'split' is in {a} but not in {c}",
        (c, a): f"{SCHEMA} 'split' is in {a} but not in {c}",
    }
    for paths, message in expected.items():
        with pytest.raises(InvalidCacheError) as excinfo:
            runtime.cached_dataset(list(paths), reader_config=CONFIG)
        assert str(excinfo.value) == message


def test_loading_no_paths_is_rejected(runtime: DatasetRuntime) -> None:
    with pytest.raises(ValueError, match="at least one cache path"):
        runtime.cached_dataset([], reader_config=CONFIG)


def test_cached_dataset_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError):
        CachedDataset()


def test_dataset_keeps_its_runtime_alive(written: Path) -> None:
    ds = DatasetRuntime(num_workers=2).cached_dataset([written / "a"], reader_config=CONFIG)
    gc.collect()
    assert records(ds) == expected_records(simple_samples(4))
    assert records(ds) == expected_records(simple_samples(4))


def test_iterator_keeps_its_dataset_and_runtime_alive(written: Path) -> None:
    iterator = iter(
        DatasetRuntime(num_workers=1).cached_dataset(
            [written / "a", written / "b"], reader_config=CONFIG
        )
    )
    gc.collect()
    assert [(s.cache_id, s.sample_id, s.data) for s in iterator] == expected_records(
        simple_samples(4), simple_samples(3, payload_bytes=2)
    )


def test_closed_runtime_keeps_its_datasets_working(written: Path) -> None:
    runtime = DatasetRuntime(num_workers=2)
    ds = runtime.cached_dataset([written / "a"], reader_config=CONFIG)
    runtime.close()
    gc.collect()
    assert records(ds) == expected_records(simple_samples(4))
    # Matched by message: a cache error is a RuntimeError too (as in dataset-rt 0.2.4).
    with pytest.raises(RuntimeError, match="this DatasetRuntime is closed"):
        runtime.cached_dataset([written / "a"], reader_config=CONFIG)


def python_blocks_held_by_open(runtime: DatasetRuntime, path: Path) -> int:
    """Python memory blocks (objects, buffers) an open dataset holds on to."""
    gc.collect()
    before = sys.getallocatedblocks()
    dataset = runtime.cached_dataset([path], reader_config=CONFIG)
    gc.collect()
    held = sys.getallocatedblocks() - before
    del dataset
    return held


def test_opening_a_cache_makes_no_python_objects_per_sample(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    # The rule: opening costs O(manifest), not O(samples) in Python objects.
    # The index and the metadata table stay in the core; a list of one object per
    # sample would add at least 100,000 blocks here.
    counts = (100, 100_000)
    sources: list[CacheSource] = [
        ListSource(f"n{count}", simple_samples(count, payload_bytes=4)) for count in counts
    ]
    results = runtime.write_cache(sources, tmp_path, writer_config=QUIET)
    paths = dict(zip(counts, written_paths(results), strict=True))
    python_blocks_held_by_open(runtime, paths[100])  # first-use imports and caches
    held = {count: python_blocks_held_by_open(runtime, paths[count]) for count in counts}
    assert held[100_000] - held[100] < 1_000, held


# ---------------------------------------------------------------- from_cache_sources


def test_from_cache_sources_reuses_complete_caches_and_writes_missing_ones(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    first_samples, second_samples = simple_samples(5), simple_samples(6, payload_bytes=9)
    [existing] = written_paths(
        runtime.write_cache(ListSource("first", first_samples), tmp_path, writer_config=QUIET)
    )
    before = snapshot(existing)
    first, second = ListSource("first", first_samples), ListSource("second", second_samples)
    result = runtime.from_cache_sources(
        [first, second], tmp_path, reader_config=CONFIG, writer_config=QUIET
    )
    match result:
        case CacheSourcesDatasetSuccess(dataset, results):
            pass
        case _:
            pytest.fail(f"expected a success, got {result!r}")
    assert first.iterations == 0
    assert second.iterations == 1
    assert results == [
        CacheWriteSuccess("first", tmp_path / "first"),
        CacheWriteSuccess("second", tmp_path / "second"),
    ]
    assert snapshot(existing) == before
    assert dataset.cache_paths == [tmp_path / "first", tmp_path / "second"]
    assert dataset.reader_config == CONFIG
    assert records(dataset) == expected_records(first_samples, second_samples)

    # A second call reuses both.
    again_first, again_second = (
        ListSource("first", first_samples),
        ListSource("second", second_samples),
    )
    again = runtime.from_cache_sources(
        [again_first, again_second], tmp_path, reader_config=CONFIG, writer_config=QUIET
    )
    assert isinstance(again, CacheSourcesDatasetSuccess)
    assert (again_first.iterations, again_second.iterations) == (0, 0)
    assert records(again.dataset) == expected_records(first_samples, second_samples)


def test_from_cache_sources_keeps_source_order_around_failures(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    good, bad, late = (
        simple_samples(3),
        [(b"x", {"n": 1}), ("not bytes", {"n": 2})],
        simple_samples(2, payload_bytes=3),
    )
    runtime.write_cache(ListSource("late", late), tmp_path, writer_config=QUIET)
    result = runtime.from_cache_sources(
        [ListSource("good", good), ListSource("bad", bad), ListSource("late", late)],
        tmp_path,
        reader_config=CONFIG,
        writer_config=QUIET,
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    names = [r.source_name for r in result.results]
    assert names == ["good", "bad", "late"]
    assert [type(r) for r in result.results] == [
        CacheWriteSuccess,
        CacheWriteError,
        CacheWriteSuccess,
    ]
    assert not (tmp_path / "bad").exists()
    assert result.dataset.cache_paths == [tmp_path / "good", tmp_path / "late"]
    assert records(result.dataset) == expected_records(good, late)


def test_from_cache_sources_reports_when_nothing_loads(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    sources: list[CacheSource] = [
        ListSource("one", [(123, {"a": 1})]),
        ListSource("two", [(b"x", {"a": [1]})]),
    ]
    result = runtime.from_cache_sources(
        sources, tmp_path, reader_config=CONFIG, writer_config=QUIET
    )
    match result:
        case CacheSourcesDatasetError(results, message):
            pass
        case _:
            pytest.fail(f"expected an error, got {result!r}")
    failures = [r for r in results if isinstance(r, CacheWriteError)]
    assert [r.source_name for r in failures] == ["one", "two"]
    assert len(failures) == len(results)
    assert all(r.message for r in failures)
    assert message == "no caches were written: " + "; ".join(
        f"{r.source_name}: {r.message}" for r in failures
    )
    assert message.startswith("no caches were written: one: ")
    assert "; two: " in message


def corrupt_first_shard(cache: Path) -> None:
    """Flip one payload byte in place (same length: only a checksum can tell)."""
    shard = cache / "shards" / "000000.bin"
    content = bytearray(shard.read_bytes())
    content[-1] ^= 0xFF
    shard.write_bytes(bytes(content))


def test_validated_reuse_reports_a_corrupted_cache_and_leaves_it_alone(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    samples, other = simple_samples(6), simple_samples(2)
    runtime.write_cache(ListSource("broken", samples), tmp_path, writer_config=QUIET)
    corrupt_first_shard(tmp_path / "broken")
    before = snapshot(tmp_path / "broken")
    broken, fresh = ListSource("broken", samples), ListSource("fresh", other)
    validating = WriterConfig(validate_cache=True, show_progress=False)
    result = runtime.from_cache_sources(
        [broken, fresh], tmp_path, reader_config=CONFIG, writer_config=validating
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    [broken_result, fresh_result] = result.results
    assert isinstance(broken_result, CacheWriteError)
    assert broken_result.source_name == "broken"
    assert "000000.bin" in broken_result.message
    assert "sha" in broken_result.message.lower()  # a checksum mismatch, named as such
    assert fresh_result == CacheWriteSuccess("fresh", tmp_path / "fresh")
    assert broken.iterations == 0
    assert snapshot(tmp_path / "broken") == before
    assert result.dataset.cache_paths == [tmp_path / "fresh"]
    assert records(result.dataset) == expected_records(other)

    # Only the corrupted cache, validated: nothing loads, and the message says why.
    alone = runtime.from_cache_sources(
        [ListSource("broken", samples)], tmp_path, reader_config=CONFIG, writer_config=validating
    )
    assert isinstance(alone, CacheSourcesDatasetError)
    assert alone.message.startswith("no caches were written: broken: ")
    assert snapshot(tmp_path / "broken") == before


def test_unvalidated_reuse_checks_structure_only(tmp_path: Path, runtime: DatasetRuntime) -> None:
    samples = simple_samples(6)
    runtime.write_cache(
        [ListSource("flipped", samples), ListSource("truncated", samples)],
        tmp_path,
        writer_config=QUIET,
    )
    corrupt_first_shard(tmp_path / "flipped")
    shard = tmp_path / "truncated" / "shards" / "000000.bin"
    shard.write_bytes(shard.read_bytes()[:-1])
    before = {name: snapshot(tmp_path / name) for name in ("flipped", "truncated")}
    flipped, truncated = ListSource("flipped", samples), ListSource("truncated", samples)
    result = runtime.from_cache_sources(
        [flipped, truncated], tmp_path, reader_config=CONFIG, writer_config=QUIET
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    # Same length: without validate_cache only a checksum could tell, so it is reused as is.
    assert result.results[0] == CacheWriteSuccess("flipped", tmp_path / "flipped")
    # A shard of the wrong length is caught by the structural checks.
    assert isinstance(result.results[1], CacheWriteError)
    assert "000000.bin" in result.results[1].message
    assert (flipped.iterations, truncated.iterations) == (0, 0)
    assert {name: snapshot(tmp_path / name) for name in ("flipped", "truncated")} == before
