"""Cache ids (docs/storage-format.md, "Format 3: persisted cache ids"): a format 3
cache is named by the cache_id its manifest persists, a format 2 cache by its
position in the list of paths, and everything users see (samples, the metadata
table, get/get_many, update_metadata, resume states) uses those ids; two caches
with one id are refused naming both. dataset-rt 0.4.8's behaviour is the model
(tests/interop/test_interop_peer.py runs it)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import (
    QUIET,
    ListSource,
    as_format_3,
    flip_last_byte_of_record,
    name_cache_id,
    simple_samples,
)
from dataset_rt import (
    CachedDataset,
    CacheSource,
    CacheSourcesDatasetSuccess,
    CacheWriteResult,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
)

TRAIN_ID = 4883758774605530659  # the id dataset-rt 0.4.8 gives source "train-00"
SAMPLES = {"p0": simple_samples(3), "train-00": simple_samples(4), "p1": simple_samples(2)}


@pytest.fixture
def caches(runtime: DatasetRuntime, tmp_path: Path) -> dict[str, Path]:
    """Format 2 caches p0 and p1, format 3 cache train-00 (its name's id)."""
    sources: list[CacheSource] = [ListSource(name, samples) for name, samples in SAMPLES.items()]
    paths = {
        path.name: path
        for path in written(runtime.write_cache(sources, tmp_path, writer_config=QUIET))
    }
    as_format_3(paths["train-00"], TRAIN_ID)
    return paths


def written(results: list[CacheWriteResult]) -> list[Path]:
    """The paths of `results`, every one a success."""
    paths = []
    for result in results:
        assert isinstance(result, CacheWriteSuccess), result
        paths.append(result.path)
    return paths


def open_(runtime: DatasetRuntime, paths: list[Path], **config: object) -> CachedDataset:
    settings: dict[str, object] = {"seed": 0, "shuffle": False, **config}
    reader_config = ReaderConfig(**settings)  # type: ignore[arg-type]
    return runtime.cached_dataset(paths, reader_config=reader_config)


def mixed(runtime: DatasetRuntime, caches: dict[str, Path], **config: object) -> CachedDataset:
    return open_(runtime, [caches["p0"], caches["train-00"], caches["p1"]], **config)


def expected_identities(counts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(cache_id, sample_id) for cache_id, count in counts for sample_id in range(count)]


MIXED = expected_identities([(0, 3), (TRAIN_ID, 4), (2, 2)])


def test_format_2_caches_keep_positions_and_format_3_caches_their_persisted_ids(
    runtime: DatasetRuntime, caches: dict[str, Path]
) -> None:
    dataset = mixed(runtime, caches)
    assert dataset.cache_ids == [0, TRAIN_ID, 2]
    samples = list(dataset)
    assert [(s.cache_id, s.sample_id) for s in samples] == MIXED
    table = dataset.get_metadata()
    assert table.schema["cache_id"] == pl.UInt64
    assert list(zip(table["cache_id"], table["sample_id"], strict=True)) == MIXED
    for sample, (_, name) in zip(samples, [(0, "p0")] * 3 + [(0, "train-00")] * 4, strict=False):
        assert sample.data == SAMPLES[name][sample.sample_id][0]
    # The list's order still orders the table and the stream, whatever the ids.
    reordered = open_(runtime, [caches["train-00"], caches["p0"]])
    assert reordered.cache_ids == [TRAIN_ID, 1]
    assert [(s.cache_id, s.sample_id) for s in reordered] == expected_identities(
        [(TRAIN_ID, 4), (1, 3)]
    )


def test_a_single_format_3_cache_names_every_sample_by_its_id(
    runtime: DatasetRuntime, caches: dict[str, Path]
) -> None:
    dataset = open_(runtime, [caches["train-00"]])
    assert {s.cache_id for s in dataset} == {TRAIN_ID}
    assert set(dataset.get_metadata()["cache_id"]) == {TRAIN_ID}
    assert dataset.get(TRAIN_ID, 3).data == SAMPLES["train-00"][3][0]
    with pytest.raises(IndexError, match=r"no cache of the dataset has cache_id 0"):
        dataset.get(0, 0)


def test_get_and_get_many_take_cache_ids_and_refuse_positions_of_format_3_caches(
    runtime: DatasetRuntime, caches: dict[str, Path]
) -> None:
    dataset = mixed(runtime, caches)
    pairs = [(2, 1), (TRAIN_ID, 0), (0, 2), (TRAIN_ID, 3)]
    got = dataset.get_many(pairs)
    assert [(s.cache_id, s.sample_id) for s in got] == pairs
    assert got[1].data == SAMPLES["train-00"][0][0]
    frame = dataset.get_metadata().filter(pl.col("cache_id") == TRAIN_ID)
    assert [s.sample_id for s in dataset.get_many(frame)] == [0, 1, 2, 3]
    # Position 1 is train-00's, whose id is not 1.
    with pytest.raises(IndexError, match=r"\(cache_id=1, sample_id=0\) \(request 0\): no cache"):
        dataset.get(1, 0)
    with pytest.raises(IndexError, match=rf"cache {TRAIN_ID} has 4 samples"):
        dataset.get_many([(0, 0), (TRAIN_ID, 4)])
    with pytest.raises(IndexError, match=r"cache_id=18446744073709551615"):
        dataset.get(2**64 - 1, 0)


def test_update_metadata_takes_cache_ids(runtime: DatasetRuntime, caches: dict[str, Path]) -> None:
    dataset = mixed(runtime, caches)
    table = dataset.get_metadata()
    chosen = table.filter(pl.col("cache_id").is_in([TRAIN_ID, 2])).reverse()
    dataset.update_metadata(chosen)
    assert [(s.cache_id, s.sample_id) for s in dataset] == list(
        zip(chosen["cache_id"], chosen["sample_id"], strict=True)
    )
    assert dataset.get_metadata()["cache_id"].to_list() == chosen["cache_id"].to_list()
    # Signed identity columns name the same caches.
    dataset.update_metadata(chosen.with_columns(pl.col("cache_id").cast(pl.Int64)))
    assert len(dataset) == chosen.height
    for position_not_id in (1, 3):
        wrong = table.with_columns(
            cache_id=pl.when(pl.col("cache_id") == TRAIN_ID)
            .then(position_not_id)
            .otherwise(pl.col("cache_id"))
        )
        with pytest.raises(
            ValueError, match=rf"unknown samples metadata row identity \(cache_id={position_not_id}"
        ):
            dataset.update_metadata(wrong)


@pytest.mark.parametrize(
    ("order", "duplicate", "pair"),
    [
        # A format 3 id equal to the position of a later format 2 cache, and of an earlier one.
        (["id1", "p0", "p1"], 1, r"id1 \(paths\[0\]\) and .*p0 \(paths\[1\]\)"),
        (["p0", "p1", "id1"], 1, r"p1 \(paths\[1\]\) and .*id1 \(paths\[2\]\)"),
        # The same format 3 cache twice.
        (["train-00", "p0", "train-00"], TRAIN_ID, r"train-00 \(paths\[0\]\) and .*\[2\]"),
    ],
)
def test_two_caches_with_one_cache_id_are_refused_naming_both(
    runtime: DatasetRuntime,
    caches: dict[str, Path],
    tmp_path: Path,
    order: list[str],
    duplicate: int,
    pair: str,
) -> None:
    shutil.copytree(caches["p0"], tmp_path / "id1")
    as_format_3(tmp_path / "id1", 1)
    paths = [tmp_path / "id1" if name == "id1" else caches[name] for name in order]
    with pytest.raises(ValueError, match=rf"duplicate cache_id {duplicate}: .*{pair}"):
        open_(runtime, paths)


def test_a_format_3_id_equal_to_its_own_position_or_an_unused_one_is_no_conflict(
    runtime: DatasetRuntime, caches: dict[str, Path], tmp_path: Path
) -> None:
    for name, cache_id in (("own", 0), ("unused", 5)):
        shutil.copytree(caches["p1"], tmp_path / name)
        as_format_3(tmp_path / name, cache_id)
    dataset = open_(runtime, [tmp_path / "own", caches["p0"], tmp_path / "unused"])
    assert dataset.cache_ids == [0, 1, 5]
    # A format 2 cache listed twice has two positions, so two ids.
    twice = open_(runtime, [caches["p0"], caches["p0"]])
    assert twice.cache_ids == [0, 1]
    assert len(list(twice)) == 6


def test_resume_states_and_pickles_of_a_mixed_dataset_keep_the_ids(
    runtime: DatasetRuntime, caches: dict[str, Path]
) -> None:
    dataset = mixed(runtime, caches, shuffle=True)
    dataset.update_metadata(dataset.get_metadata().with_columns(weight=pl.col("sample_id") + 1.0))
    dataset.set_epoch_len(5)
    iterator = iter(dataset)
    head = [(s.cache_id, s.sample_id) for s in [next(iterator), next(iterator)]]
    state = iterator.state_dict()
    rest = [(s.cache_id, s.sample_id) for s in iterator]
    twin = pickle.loads(pickle.dumps(dataset))
    assert twin.cache_ids == [0, TRAIN_ID, 2]
    assert [(s.cache_id, s.sample_id) for s in twin] == [(s.cache_id, s.sample_id) for s in dataset]
    resumed = mixed(runtime, caches, shuffle=True)
    resumed.update_metadata(dataset.get_metadata())
    resumed.set_epoch_len(5)
    resumed.load_state_dict(state)
    assert [(s.cache_id, s.sample_id) for s in resumed] == rest
    assert {cache_id for cache_id, _ in head + rest} <= {0, TRAIN_ID, 2}


def test_a_skipped_corrupt_sample_is_reported_with_its_cache_id(
    runtime: DatasetRuntime, caches: dict[str, Path]
) -> None:
    flip_last_byte_of_record(caches["train-00"], 2)
    dataset = mixed(runtime, caches, on_corrupt="skip")
    iterator = iter(dataset)
    with pytest.warns(
        RuntimeWarning, match=rf"cache_id={TRAIN_ID}, sample_id=2\) of cache .*train-00"
    ):
        samples = list(iterator)
    assert iterator.skipped == [(TRAIN_ID, 2)]
    assert len(samples) == len(MIXED) - 1


def test_caches_written_as_format_3_carry_their_source_names_ids(
    runtime: DatasetRuntime, caches: dict[str, Path], tmp_path: Path
) -> None:
    assert name_cache_id("train-00") == TRAIN_ID
    config = WriterConfig(show_progress=False, format_version=3)
    sources: list[CacheSource] = [ListSource(name, simple_samples(2)) for name in ("b", "a")]
    paths = written(runtime.write_cache(sources, tmp_path / "v3", writer_config=config))
    dataset = open_(runtime, [*paths, caches["p0"]])
    assert dataset.cache_ids == [name_cache_id("b"), name_cache_id("a"), 2]
    assert [s.cache_id for s in dataset][:4] == [name_cache_id("b")] * 2 + [name_cache_id("a")] * 2
    # from_cache_sources writes missing caches in the configured format and
    # reuses existing ones in theirs.
    more: list[CacheSource] = [
        ListSource("a", simple_samples(2)),
        ListSource("c", simple_samples(1)),
    ]
    result = runtime.from_cache_sources(
        more, tmp_path / "v3", reader_config=ReaderConfig(seed=0), writer_config=config
    )
    assert isinstance(result, CacheSourcesDatasetSuccess)
    assert result.dataset.cache_ids == [name_cache_id("a"), name_cache_id("c")]
    reused_as_2 = runtime.from_cache_sources(
        more,
        tmp_path / "v3",
        reader_config=ReaderConfig(seed=0),
        writer_config=WriterConfig(show_progress=False),
    )
    assert isinstance(reused_as_2, CacheSourcesDatasetSuccess)
    assert reused_as_2.dataset.cache_ids == [name_cache_id("a"), name_cache_id("c")]
