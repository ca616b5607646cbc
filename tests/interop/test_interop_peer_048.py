"""Interoperability with dataset-rt 0.4.8 from PyPI, which writes format 3.

Like tests/interop/test_interop_peer.py (dataset-rt 0.2.4), with the same machinery
(tests/helpers/peer_venv.py) and inputs (tests/helpers/peer_inputs.py), it runs the peer in a
virtual environment of its own (`$DATASET_RT_PEER_048_VENV`
or ``~/.cache/dataset_rt_tests/peer-0.4.8``, created once and reused; the
tests are skipped when PyPI cannot be reached) through tests/helpers/peer_driver.py,
and checks, on the same inputs:

- its format 3 caches read here as it reads them: samples with their cache_ids
  (the source names' ids), the metadata table, reads by identity, a table kept
  to some cache_ids; and ours written with ``format_version=3`` read there the
  same, with the same ids, our manifest being its manifest but for the digest
  of metadata.arrow and the records.crc32c entry (which it ignores, validated
  or not);
- datasets mixing format 2 and format 3 caches get the same ids and samples on
  both sides, and the same ones are refused (``duplicate cache_id``);
- caches migrated to format 3 on either side read on the other with the ids
  they had, however they are listed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import peer_driver
from conftest import name_cache_id
from peer_inputs import SHARED, SOURCES, encode_sources, first_difference
from peer_venv import peer_venv_python, run_peer

PEER_VERSION = "0.4.8"
VARIANTS = {
    "none": {"algo": "none", "ratio": 1.0, "max_shard_bytes": 900},
    "lz4": {"algo": "lz4", "ratio": 2.0, "max_shard_bytes": 900},
}
IDS = {source["name"]: name_cache_id(source["name"]) for source in SOURCES}
ALPHA, BETA, GAMMA = (IDS[name] for name in SHARED)
PAIRS = [[BETA, 3], [ALPHA, 0], [GAMMA, 0], [ALPHA, 30]]


@pytest.fixture(scope="session")
def peer048_python() -> Path:
    """The interpreter of a virtual environment with dataset-rt==0.4.8."""
    return peer_venv_python(PEER_VERSION)


def reads(root: Path) -> dict[str, dict[str, Any]]:
    """The read steps both implementations run, by name."""
    peer, ours3, ours2 = root / "peer", root / "ours-v3", root / "ours-v2"
    migrated = {"ours": root / "migrated-by-ours", "peer": root / "migrated-by-peer"}

    def step(paths: list[Path], **extra: Any) -> dict[str, Any]:
        return {"op": "read", "paths": [str(p) for p in paths], "validate_cache": True, **extra}

    steps: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        for name, base in (("peer", peer), ("ours", ours3)):
            shared = [base / variant / s for s in SHARED]
            steps[f"{name}-v3/{variant}"] = step(shared, pairs=PAIRS, keep_cache_ids=[BETA])
            steps[f"{name}-v3/{variant}/unvalidated"] = step(shared) | {"validate_cache": False}
            steps[f"{name}-v3/{variant}/other"] = step([base / variant / "other"])
    steps["ours-v2/none"] = step([ours2 / "none" / s for s in SHARED], pairs=[[2, 0], [1, 6]])
    steps["mixed"] = step(
        [ours2 / "none" / "alpha", peer / "none" / "beta", ours2 / "none" / "gamma"],
        pairs=[[2, 0], [BETA, 1], [0, 5], [1, 0]],
        keep_cache_ids=[BETA, 2],
    )
    steps["mixed-ours-v3-first"] = step([ours3 / "none" / "alpha", ours2 / "none" / "beta"])
    steps["duplicate"] = step([ours3 / "none" / "alpha", peer / "none" / "alpha"])
    # gamma is format 2 at position 0; the alpha migrated with id 0 clashes with it.
    steps["position-clash"] = step([ours2 / "none" / "gamma", migrated["ours"] / "alpha"])
    for side, base in migrated.items():
        steps[f"migrated-by-{side}"] = step(
            [base / "gamma", base / "alpha", base / "beta"], pairs=[[1, 2]]
        )
    return steps


@pytest.fixture(scope="module")
def runs(peer048_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both implementations write, migrate and read (two runs of the peer)."""
    root = tmp_path_factory.mktemp("interop048")
    sources = encode_sources(SOURCES)
    peer_writes = run_peer(
        peer048_python,
        [
            {"op": "write", "base": str(root / "peer" / variant), "sources": sources, "writer": w}
            for variant, w in VARIANTS.items()
        ],
        root / "peer-write",
    )
    our_writes = []
    for version in (2, 3):
        for variant, writer in VARIANTS.items():
            base = root / f"ours-v{version}" / variant
            writer = writer | {"format_version": version}
            our_writes.append(
                peer_driver.op_write({"base": str(base), "sources": sources, "writer": writer})
            )
    for side in ("ours", "peer"):
        for name in SHARED:
            shutil.copytree(root / "ours-v2" / "none" / name, root / f"migrated-by-{side}" / name)
    migrate = [str(root / "migrated-by-{side}" / name) for name in SHARED]
    our_migration = peer_driver.op_update_manifests(
        {"paths": [path.format(side="ours") for path in migrate]}
    )
    steps = reads(root)
    peer_out = run_peer(
        peer048_python,
        [{"op": "update_manifests", "paths": [p.format(side="peer") for p in migrate]}]
        + list(steps.values()),
        root / "peer-read",
    )
    return {
        "root": root,
        "peer_writes": peer_writes,
        "our_writes": our_writes,
        "migration": {"ours": our_migration, "peer": peer_out[0]},
        "peer": dict(zip(steps, peer_out[1:], strict=True)),
        "ours": {name: peer_driver.op_read(step) for name, step in steps.items()},
    }


def expected(caches: list[tuple[str, int]]) -> list[list[Any]]:
    """The samples of the caches of `caches` (source name, cache_id) in order, encoded."""
    by_name = {source["name"]: source["samples"] for source in SOURCES}
    enc = peer_driver.encode_value
    return [
        [
            enc(cache_id),
            enc(sample_id),
            peer_driver.encode_bytes(data),
            peer_driver.encode_metadata(m),
        ]
        for name, cache_id in caches
        for sample_id, (data, m) in enumerate(by_name[name])
    ]


def comparable(read: dict[str, Any], key: str) -> Any:
    value = read.get(key)
    if isinstance(value, dict) and "error" in value:
        return value["error"][0]
    return value


def assert_same_read(runs: dict[str, Any], name: str, caches: list[tuple[str, int]]) -> None:
    """Both implementations read step `name` alike, and what the caches hold."""
    peer, ours = runs["peer"][name], runs["ours"][name]
    for who, read in (("dataset-rt 0.4.8", peer), ("DatasetRT", ours)):
        assert "error" not in read, f"{name}: {who} refused it: {read['error']}"
        want = expected(caches)
        assert read["samples"] == want, f"{name}, {who}: {first_difference(read['samples'], want)}"
    # The tables (cache_id column included), reads by identity (a refusal by its
    # exception class: the messages differ) and kept rows, alike.
    different = [
        key
        for key in sorted(set(peer) | set(ours))
        if comparable(peer, key) != comparable(ours, key)
    ]
    assert not different, f"{name}: the implementations differ in {different}"
    ids = [cache_id for _, cache_id in caches]
    cache_id_column = ours["table"]["values"][0]
    assert {peer_driver.decode_value(value) for value in cache_id_column} == set(ids)


def test_both_write_every_cache(runs: dict[str, Any]) -> None:
    for who, results in (
        ("dataset-rt 0.4.8", runs["peer_writes"]),
        ("DatasetRT", runs["our_writes"]),
    ):
        for result in results:
            assert all(r[0] == "success" for r in result["results"]), (who, result["results"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_its_format_3_manifests_persist_the_ids_of_the_source_names_as_ours_do(
    runs: dict[str, Any], variant: str
) -> None:
    for source in SOURCES:
        theirs = json.loads(
            (runs["root"] / "peer" / variant / source["name"] / "manifest.json").read_text()
        )
        ours = json.loads(
            (runs["root"] / "ours-v3" / variant / source["name"] / "manifest.json").read_text()
        )
        assert (theirs["format_version"], theirs["cache_id"]) == (3, IDS[source["name"]])
        assert (ours["format_version"], ours["cache_id"]) == (3, IDS[source["name"]])
        assert list(ours)[:3] == list(theirs)[:3] == ["format_version", "cache_id", "source_name"]
        # The same cache but for the bytes of metadata.arrow and of the record JSON
        # (dataset-rt 0.4.8 spells some floats otherwise: `-2.5e-8` for `-2.5e-08`),
        # which their digests and lengths cover, and our records.crc32c entry.
        for manifest in (theirs, ours):
            for key in ("metadata_sha256", "index_sha256", "record_checksums"):
                manifest.pop(key, None)
            for shard in manifest["shards"]:
                del shard["byte_len"], shard["sha256"]
        assert ours == theirs


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_its_format_3_caches_read_here_as_it_reads_them(runs: dict[str, Any], variant: str) -> None:
    assert_same_read(runs, f"peer-v3/{variant}", [(n, IDS[n]) for n in SHARED])
    assert_same_read(runs, f"peer-v3/{variant}/other", [("other", IDS["other"])])
    got = runs["ours"][f"peer-v3/{variant}"]
    by_identity = {(s[0][1], s[1][1]): s for s in got["samples"]}
    assert got["get"] == [by_identity[(cache_id, sample_id)] for cache_id, sample_id in PAIRS]
    assert got["kept"] == [[BETA, k] for k in range(7)]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_our_format_3_caches_read_in_it_with_the_same_ids_and_their_checksums_ignored(
    runs: dict[str, Any], variant: str
) -> None:
    caches = [(n, IDS[n]) for n in SHARED]
    assert_same_read(runs, f"ours-v3/{variant}", caches)
    assert_same_read(runs, f"ours-v3/{variant}/unvalidated", caches)
    assert_same_read(runs, f"ours-v3/{variant}/other", [("other", IDS["other"])])
    manifest = json.loads(
        (runs["root"] / "ours-v3" / variant / "alpha" / "manifest.json").read_text()
    )
    assert manifest["record_checksums"]["file"] == "records.crc32c"
    # And as it reads its own caches of the same input.
    assert runs["peer"][f"ours-v3/{variant}"] == runs["peer"][f"peer-v3/{variant}"]


def test_format_2_caches_read_alike_with_their_positions_as_ids(runs: dict[str, Any]) -> None:
    assert_same_read(runs, "ours-v2/none", [(n, position) for position, n in enumerate(SHARED)])


def test_a_dataset_mixing_formats_gets_the_same_ids_and_samples_on_both_sides(
    runs: dict[str, Any],
) -> None:
    assert_same_read(runs, "mixed", [("alpha", 0), ("beta", BETA), ("gamma", 2)])
    mixed = runs["ours"]["mixed"]
    assert mixed["kept"] == [[BETA, k] for k in range(7)] + [[2, 0]]
    assert mixed["get"] == {"error": ["IndexError", mixed["get"]["error"][1]]}, mixed["get"]
    assert "(cache_id=1, sample_id=0)" in mixed["get"]["error"][1]
    assert_same_read(runs, "mixed-ours-v3-first", [("alpha", ALPHA), ("beta", 1)])


@pytest.mark.parametrize("name", ["duplicate", "position-clash"])
def test_the_same_datasets_are_refused_for_a_duplicate_cache_id(
    runs: dict[str, Any], name: str
) -> None:
    peer, ours = runs["peer"][name], runs["ours"][name]
    assert "error" in peer and "duplicate cache_id" in peer["error"][1], peer
    assert "error" in ours and "duplicate cache_id" in ours["error"][1], ours
    # Ours names both caches.
    assert ours["error"][1].count(str(runs["root"])) == 2, ours["error"][1]


def test_caches_migrated_on_either_side_keep_their_ids_on_the_other(runs: dict[str, Any]) -> None:
    for side in ("ours", "peer"):
        migration = runs["migration"][side]
        assert "error" not in migration, f"{side}: {migration}"
        assert [(e[1], e[2]) for e in migration["entries"]] == [
            (0, "updated"),
            (1, "updated"),
            (2, "updated"),
        ], migration
        # Listed in another order, each cache keeps the id it was migrated with.
        assert_same_read(runs, f"migrated-by-{side}", [("gamma", 2), ("alpha", 0), ("beta", 1)])
    for name in SHARED:
        ours = json.loads((runs["root"] / "migrated-by-ours" / name / "manifest.json").read_text())
        theirs = json.loads(
            (runs["root"] / "migrated-by-peer" / name / "manifest.json").read_text()
        )
        assert ours == theirs, f"{name}: the migrated manifests mean different things"


def test_a_format_3_cache_committed_from_partitions_reads_in_it_as_here(
    peer048_python: Path, tmp_path: Path
) -> None:
    """`commit_partitions` of format 3 partitions: dataset-rt 0.4.8 reads the cache,
    validated, with the name's cache_id and the samples of the partitions in order."""
    import dataset_rt
    from dataset_rt import CacheInput, CacheWriteSuccess

    samples = next(s for s in SOURCES if s["name"] == "other")["samples"]
    config = peer_driver.writer_config({**VARIANTS["lz4"], "format_version": 3})
    cuts = [0, len(samples) // 3, len(samples) // 3, len(samples)]
    results = [
        dataset_rt.write_partition(
            [CacheInput(data, metadata) for data, metadata in samples[start:end]],
            tmp_path,
            "other",
            partition=number,
            writer_config=config,
        )
        for number, (start, end) in enumerate(zip(cuts, cuts[1:], strict=False))
    ]
    assert dataset_rt.commit_partitions(tmp_path, "other", results) == CacheWriteSuccess(
        "other", tmp_path / "other"
    )
    plan = [{"op": "read", "paths": [str(tmp_path / "other")], "validate_cache": True}]
    [theirs] = run_peer(peer048_python, plan, tmp_path / "peer")
    ours = peer_driver.op_read(plan[0])
    assert "error" not in theirs, theirs
    difference = first_difference(theirs["samples"], ours["samples"])
    assert theirs["samples"] == ours["samples"], difference
    assert theirs["table"] == ours["table"]
    ids = {peer_driver.decode_value(sample[0]) for sample in theirs["samples"]}
    assert ids == {IDS["other"]} and len(theirs["samples"]) == len(samples)
