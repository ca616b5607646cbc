"""Migrating caches to format 3 (`CachedDataset.update_manifests(version=3)`, the
core's `drt_caches_migrate`): ids kept as they were, only manifest.json changed,
atomically, safe to run again, nothing written unless every cache can be
migrated. dataset-rt 0.4.8 reading the migrated caches is in test_interop_peer.py."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

from conftest import QUIET, ListSource, as_format_3, simple_samples
from dataset_rt import (
    CachedDataset,
    CacheSource,
    CacheWriteSuccess,
    DatasetRuntime,
    ManifestUpdateEntry,
    ManifestUpdateReport,
    ReaderConfig,
)
from dataset_rt.errors import InvalidArgumentError, InvalidCacheError, StateError

TRAIN_ID = 4883758774605530659  # the id of source "train-00"


@pytest.fixture
def caches(runtime: DatasetRuntime, tmp_path: Path) -> list[Path]:
    """Format 2 caches p0 and p1 around format 3 cache train-00."""
    sources: list[CacheSource] = [
        ListSource(name, simple_samples(3)) for name in ("p0", "train-00", "p1")
    ]
    paths = []
    for result in runtime.write_cache(sources, tmp_path, writer_config=QUIET):
        assert isinstance(result, CacheWriteSuccess), result
        paths.append(result.path)
    as_format_3(paths[1], TRAIN_ID)
    return paths


def open_(runtime: DatasetRuntime, paths: list[Path], validate: bool = False) -> CachedDataset:
    config = ReaderConfig(seed=0, shuffle=False, validate_cache=validate)
    return runtime.cached_dataset(paths, reader_config=config)


def manifests(paths: list[Path]) -> list[str]:
    return [(path / "manifest.json").read_text() for path in paths]


def identities(dataset: CachedDataset) -> list[tuple[int, int, bytes]]:
    return [(s.cache_id, s.sample_id, bytes(s.data)) for s in dataset]


def test_format_2_caches_become_format_3_with_the_ids_they_had(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    before = manifests(caches)
    dataset = open_(runtime, caches)
    samples = identities(dataset)
    report = dataset.update_manifests(version=3)
    assert report == ManifestUpdateReport(
        (
            ManifestUpdateEntry(caches[0].resolve() / "manifest.json", 0, "updated"),
            ManifestUpdateEntry(caches[1].resolve() / "manifest.json", TRAIN_ID, "unchanged"),
            ManifestUpdateEntry(caches[2].resolve() / "manifest.json", 2, "updated"),
        )
    )
    after = manifests(caches)
    # Format 2 plus the cache_id line, and nothing else; the format 3 cache as it was.
    for old, new, cache_id in ((before[0], after[0], 0), (before[2], after[2], 2)):
        head = '{\n  "format_version": 2,\n'
        assert new == f'{{\n  "format_version": 3,\n  "cache_id": {cache_id},\n' + old[len(head) :]
    assert after[1] == before[1]
    # The ids are the manifests' now: any order, same ids, same samples.
    assert identities(open_(runtime, caches, validate=True)) == samples
    reordered = open_(runtime, [caches[2], caches[0], caches[1]])
    assert reordered.cache_ids == [2, 0, TRAIN_ID]
    assert sorted(identities(reordered)) == sorted(samples)
    # Running it again changes nothing.
    again = open_(runtime, caches).update_manifests(version=3)
    assert [entry.status for entry in again.entries] == ["unchanged"] * 3
    assert manifests(caches) == after
    assert not [p for p in (caches[0].parent / "tmp").iterdir()], "tmp/ keeps a leftover"


@pytest.mark.parametrize(
    ("version", "error"),
    [(2, InvalidArgumentError), (4, InvalidArgumentError), ("3", TypeError), (True, TypeError)],
)
def test_only_format_3_is_a_migration_target(
    runtime: DatasetRuntime, caches: list[Path], version: object, error: type[Exception]
) -> None:
    before = manifests(caches)
    with pytest.raises(error, match="version"):
        open_(runtime, caches).update_manifests(version=version)  # type: ignore[arg-type]
    assert manifests(caches) == before


def test_a_cache_being_written_is_refused_and_nothing_is_migrated(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    fcntl = pytest.importorskip("fcntl", reason="takes the lock as a POSIX writer does")
    before = manifests(caches)
    dataset = open_(runtime, caches)
    lock_path = caches[2].parent / "tmp" / "p1.lock"
    lock_path.parent.mkdir(exist_ok=True)
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # as a writer of "p1" holds it
        with pytest.raises(StateError, match=r"p1 is being written by another process .*p1\.lock"):
            dataset.update_manifests(version=3)
    finally:
        os.close(descriptor)
    assert manifests(caches) == before, "a manifest changed although the migration was refused"
    assert [entry.status for entry in dataset.update_manifests(version=3).entries] == [
        "updated",
        "unchanged",
        "updated",
    ]


def test_a_cache_listed_twice_is_refused(runtime: DatasetRuntime, caches: list[Path]) -> None:
    before = manifests(caches)
    twice = open_(runtime, [caches[0], caches[2], caches[0]])
    assert twice.cache_ids == [0, 1, 2]
    with pytest.raises(InvalidArgumentError, match=r"listed twice \(paths\[0\] and paths\[2\]\)"):
        twice.update_manifests(version=3)
    assert manifests(caches) == before


def test_a_manifest_that_would_lose_its_layout_is_refused(
    runtime: DatasetRuntime, caches: list[Path], tmp_path: Path
) -> None:
    respelled = tmp_path / "respelled"
    shutil.copytree(caches[2], respelled)
    text = (respelled / "manifest.json").read_text()
    (respelled / "manifest.json").write_text(text.replace("\n", "\r\n"))
    before = manifests(caches)
    dataset = open_(runtime, [caches[0], respelled])
    with pytest.raises(InvalidCacheError, match="not laid out as the writers lay it out"):
        dataset.update_manifests(version=3)
    assert manifests(caches) == before


def test_a_migrated_cache_keeps_its_record_checksums_and_validates(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    open_(runtime, [caches[0]]).update_manifests(version=3)
    assert '"record_checksums"' in (caches[0] / "manifest.json").read_text()
    dataset = open_(runtime, [caches[0]], validate=True)
    assert dataset.cache_ids == [0]
    assert len(identities(dataset)) == 3


def test_a_dataset_opened_before_the_migration_is_reopened_only_after_opening_it_again(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    # Its pickles name the manifests it read; the migration replaced them.
    dataset = open_(runtime, caches)
    state = dataset.state_dict()
    dataset.update_manifests(version=3)
    with pytest.raises(ValueError, match=r"cannot reopen the dataset in process .*manifest"):
        len(pickle.loads(pickle.dumps(dataset)))
    reopened = open_(runtime, caches)
    assert pickle.loads(pickle.dumps(reopened)).cache_ids == [0, TRAIN_ID, 2]
    # A resume state of before names the old manifests too.
    with pytest.raises(ValueError, match="manifest"):
        reopened.load_state_dict(state)
