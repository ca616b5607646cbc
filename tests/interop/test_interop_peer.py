"""Interoperability with the reference implementation, `dataset-rt==0.2.4` from PyPI:
caches written by either read identically in the other.

The reference is a Rust/PyO3 package with the same import name, so it lives in a
virtual environment of its own (tests/helpers/peer_venv.py creates or reuses it) and is driven
in a subprocess by tests/helpers/peer_driver.py. Both directions are checked on the same inputs
(tests/helpers/peer_inputs.py: lz4 and none, one shard and several, every metadata kind,
several sources):

- caches written by dataset-rt load here with ``validate_cache=True`` and read
  back identically (payload bytes, metadata type and value, float bit for bit,
  cache_id and sample_id), and so does their samples metadata table;
- caches written here read back identically in dataset-rt, and every SHA-256
  and length in their manifest matches the files (checked with hashlib).

dataset-rt 0.2.4 parses the JSON floats embedded in shard records without
correct rounding, so it misreads a few floats of its OWN caches (and rejects
them with ``validate_cache=True``). Its results are therefore compared on
values it round-trips itself, and, for arbitrary floats, against what it
returns for its own cache of the same input.

The user script written for dataset-rt that runs on both is in
tests/interop/test_interop_peer_script.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import cache_reference
import pytest

import dataset_rt
import peer_driver
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, ReaderConfig
from peer_inputs import (
    FLOAT_SOURCES,
    QUICKSTART_SOURCES,
    SHARED,
    SOURCES,
    VARIANTS,
    SourceSpec,
    WriterSpec,
    encode_sources,
    expected_read,
    expected_table,
    first_difference,
)
from peer_venv import PEER_VERSION, peer_venv_python, run_peer


@pytest.fixture(scope="session")
def peer_python() -> Path:
    """The interpreter of a virtual environment with dataset-rt==0.2.4, created once, reused."""
    return peer_venv_python(PEER_VERSION)


# --- checks ---------------------------------------------------------------------------------------


def read_here(paths: list[Path], *, validate_cache: bool = True) -> dict[str, Any]:
    """Read with this project through the driver's own encoding (in-process)."""
    return peer_driver.op_read(
        {"paths": [str(p) for p in paths], "validate_cache": validate_cache, "seed": 0}
    )


def assert_read_matches(
    result: dict[str, Any], sources: list[SourceSpec], names: list[str], what: str
) -> None:
    assert "error" not in result, f"{what}: reading failed: {result.get('error')}"
    expected = expected_read(sources, names)
    assert result["samples"] == expected, (
        f"{what}: samples differ: {first_difference(result['samples'], expected)}"
    )
    assert result["len"] == len(expected), (
        f"{what}: len(dataset) is {result['len']}, expected {len(expected)}"
    )
    table = expected_table(sources, names)
    assert result["table"]["columns"] == table["columns"], (
        f"{what}: samples_metadata columns differ"
    )
    for (name, _), got, want in zip(
        table["columns"], result["table"]["values"], table["values"], strict=True
    ):
        assert got == want, (
            f"{what}: samples_metadata column {name!r}: {first_difference(got, want)}"
        )


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


KINDS = {bool: "bool", int: "int", float: "float", str: "string"}


def check_cache_files(
    cache: Path, samples: list[tuple[bytes, dict[str, Any]]], writer: WriterSpec
) -> None:
    """Every hash and length in the manifest matches the files; the manifest describes the input."""
    manifest = cache_reference.read_manifest(cache)
    assert manifest["format_version"] == 2
    assert manifest["source_name"] == cache.name
    assert manifest["sample_count"] == len(samples)
    first = samples[0][1]
    assert manifest["metadata_schema"] == [
        {"name": n, "kind": KINDS[type(first[n])]} for n in sorted(first)
    ]
    assert manifest["metadata_sha256"] == sha256_file(cache / "metadata.arrow"), (
        f"{cache}: metadata_sha256"
    )
    assert manifest["index_sha256"] == sha256_file(cache / "index.bin"), f"{cache}: index_sha256"
    assert (cache / "index.bin").stat().st_size == 24 * len(samples)
    assert (cache / "metadata.arrow").read_bytes()[:6] == b"ARROW1"
    names = [shard["name"] for shard in manifest["shards"]]
    assert names == [f"{i:06d}.bin" for i in range(len(names))], f"{cache}: shard names {names}"
    assert sorted(p.name for p in (cache / "shards").iterdir()) == names, (
        f"{cache}: shard files differ from manifest"
    )
    for shard in manifest["shards"]:
        path = cache / "shards" / shard["name"]
        assert shard["sha256"] == sha256_file(path), (
            f"{path}: sha256 in manifest does not match the file"
        )
        assert shard["byte_len"] == path.stat().st_size, f"{path}: byte_len"
        assert shard["compression"] == {"algo": writer["algo"], "ratio": writer["ratio"]}
        assert all(c in "0123456789abcdef" for c in shard["sha256"]) and len(shard["sha256"]) == 64
    assert sum(s["uncompressed_byte_len"] for s in manifest["shards"]) == sum(
        len(d) for d, _ in samples
    )
    check_rotation(cache, manifest, writer["max_shard_bytes"] or 64 * 1024 * 1024)
    if writer["max_shard_bytes"] is not None and len(samples) >= 5:
        assert len(names) > 1, (
            f"{cache}: max_shard_bytes={writer['max_shard_bytes']} gave one shard"
        )


def check_rotation(cache: Path, manifest: dict[str, Any], max_shard_bytes: int) -> None:
    """index.bin places records back to back, starting a shard only when the next record would
    push a non-empty one past max_shard_bytes; shard lengths are the sums of their records."""
    index = (cache / "index.bin").read_bytes()
    shard, offset = 0, 0
    for row, (shard_id, record_offset, length) in enumerate(cache_reference.index_rows(index)):
        if offset > 0 and offset + length > max_shard_bytes:
            shard, offset = shard + 1, 0
        assert (shard_id, record_offset) == (shard, offset), (
            f"{cache}: record {row} at shard {shard_id} offset {record_offset}, "
            f"the rotation rule says {shard}/{offset}"
        )
        offset += length
        assert manifest["shards"][shard]["byte_len"] >= offset
    assert len(manifest["shards"]) == shard + 1, (
        f"{cache}: {len(manifest['shards'])} shards, expected {shard + 1}"
    )
    assert manifest["shards"][shard]["byte_len"] == offset, (
        f"{cache}: last shard has bytes beyond its records"
    )


def embedded_records(cache: Path) -> list[tuple[str, bytes]]:
    """(embedded metadata JSON text, stored payload) per sample, following index.bin."""
    index = (cache / "index.bin").read_bytes()
    records = []
    for shard_id, offset, length in cache_reference.index_rows(index):
        with open(cache / cache_reference.shard_name(shard_id), "rb") as shard:
            shard.seek(offset)
            record = shard.read(length)
        text = cache_reference.record_json(record).decode("utf-8")
        records.append((text, cache_reference.record_stored(record)))
    return records


def check_embedded_json(
    cache: Path, samples: list[tuple[bytes, dict[str, Any]]], algo: str
) -> None:
    """Each record's JSON has sorted keys, parses (correctly rounded) to the sample's values, and
    writes every float with a '.' or an exponent; the payload is raw or one size-prefixed LZ4
    block."""
    records = embedded_records(cache)
    assert len(records) == len(samples)
    for sample_id, ((text, stored), (data, metadata)) in enumerate(
        zip(records, samples, strict=True)
    ):
        parsed = json.loads(
            text, object_pairs_hook=lambda pairs: pairs
        )  # a float token parses to float
        keys = [key for key, _ in parsed]
        assert keys == sorted(metadata), (
            f"{cache} sample {sample_id}: keys {keys} are not the sorted metadata keys"
        )
        for key, value in parsed:
            want = metadata[key]
            assert type(value) is type(want) and peer_driver.encode_value(
                value
            ) == peer_driver.encode_value(want), (
                f"{cache} sample {sample_id}: embedded {key!r} is {value!r}, "
                f"expected {want!r} in {text}"
            )
        outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
        assert not re.search(r"\s", outside_strings), (
            f"{cache} sample {sample_id}: JSON is not compact: {text}"
        )
        if algo == "none":
            assert stored == data, f"{cache} sample {sample_id}: stored payload differs"
        else:
            size = cache_reference.lz4_size(stored)
            assert size == len(data), (
                f"{cache} sample {sample_id}: lz4 size prefix {size} != {len(data)}"
            )
            with contextlib.suppress(ImportError):
                import lz4.block

                block = stored[cache_reference.LZ4_SIZE_BYTES :]
                assert lz4.block.decompress(block, uncompressed_size=size) == data


# --- the two directions, computed once ----------------------------------------------------------


def write_steps(base: Path) -> list[dict[str, Any]]:
    """The driver's steps writing every variant of SOURCES, the floats and the quickstart
    under `base`."""
    steps: list[dict[str, Any]] = [
        {
            "op": "write",
            "base": str(base / name),
            "sources": encode_sources(SOURCES),
            "writer": writer,
        }
        for name, writer in VARIANTS.items()
    ]
    steps.append(
        {"op": "write", "base": str(base / "floats"), "sources": encode_sources(FLOAT_SOURCES)}
    )
    steps.append(
        {
            "op": "write",
            "base": str(base / "quickstart"),
            "sources": encode_sources(QUICKSTART_SOURCES),
        }
    )
    return steps


def read_steps(base: Path, validate: bool) -> list[dict[str, Any]]:
    """The driver's steps reading what `write_steps(base)` wrote: per variant the shared
    caches together, then "other"; last the floats."""
    steps: list[dict[str, Any]] = []
    for name in VARIANTS:
        steps.append(
            {
                "op": "read",
                "paths": [str(base / name / s) for s in SHARED],
                "validate_cache": validate,
            }
        )
        steps.append(
            {"op": "read", "paths": [str(base / name / "other")], "validate_cache": validate}
        )
    steps.append(
        {"op": "read", "paths": [str(base / "floats" / "floats")], "validate_cache": validate}
    )
    return steps


def by_variant(results: list[Any]) -> dict[str, Any]:
    """The results of `read_steps` by variant ("shared" and "other"), and "floats"."""
    named = {}
    for position, name in enumerate(VARIANTS):
        named[name] = {"shared": results[2 * position], "other": results[2 * position + 1]}
    named["floats"] = results[-1]
    return named


@pytest.fixture(scope="module")
def interop(peer_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Write every variant with both implementations, read ours with the peer (two peer runs)."""
    root = tmp_path_factory.mktemp("interop")
    peer_base = root / "peer"
    ours_base = root / "ours"
    peer_writes = run_peer(peer_python, write_steps(peer_base), root / "peer-write")
    our_writes = [peer_driver.op_write(step) for step in write_steps(ours_base)]
    plan = (
        read_steps(ours_base, False)
        + read_steps(ours_base, True)
        + read_steps(peer_base, False)
        + read_steps(peer_base, True)
    )
    peer_reads = run_peer(peer_python, plan, root / "peer-read")
    size = len(plan) // 4
    return {
        "peer_base": peer_base,
        "ours_base": ours_base,
        "peer_writes": peer_writes,
        "our_writes": our_writes,
        "peer_reads_ours": by_variant(peer_reads[:size]),
        "peer_reads_ours_validated": by_variant(peer_reads[size : 2 * size]),
        "peer_reads_peer": by_variant(peer_reads[2 * size : 3 * size]),
        "peer_reads_peer_validated": by_variant(peer_reads[3 * size :]),
    }


def assert_all_written(results: list[Any], what: str) -> None:
    for result in results:
        assert result["results"] and all(r[0] == "success" for r in result["results"]), (
            f"{what}: not every source was written: {result['results']}"
        )


def test_both_implementations_write_every_variant(interop: dict[str, Any]) -> None:
    assert_all_written(interop["peer_writes"], "dataset-rt 0.2.4")
    assert_all_written(interop["our_writes"], "DatasetRT")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_by_the_peer_reads_here_identically_and_validates(
    interop: dict[str, Any], variant: str
) -> None:
    base = interop["peer_base"] / variant
    for name, source in ((s["name"], s) for s in SOURCES):
        check_cache_files(
            base / name, source["samples"], VARIANTS[variant]
        )  # the harness reads what it thinks
    shared = read_here([base / name for name in SHARED], validate_cache=True)
    assert_read_matches(
        shared, SOURCES, SHARED, f"peer {variant} cache read here (validate_cache=True)"
    )
    other = read_here([base / "other"], validate_cache=True)
    assert_read_matches(other, SOURCES, ["other"], f"peer {variant} 'other' cache read here")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_here_has_the_hashes_and_lengths_its_manifest_says(
    interop: dict[str, Any], variant: str
) -> None:
    base = interop["ours_base"] / variant
    for source in SOURCES:
        check_cache_files(base / source["name"], source["samples"], VARIANTS[variant])
        check_embedded_json(base / source["name"], source["samples"], VARIANTS[variant]["algo"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_here_reads_identically_in_the_peer(
    interop: dict[str, Any], variant: str
) -> None:
    reads = interop["peer_reads_ours"][variant]
    assert_read_matches(
        reads["shared"], SOURCES, SHARED, f"our {variant} cache read by dataset-rt 0.2.4"
    )
    assert_read_matches(
        reads["other"], SOURCES, ["other"], f"our {variant} 'other' cache read by dataset-rt 0.2.4"
    )
    # and the same as the peer reads its own cache of the same input (guards the harness itself)
    own = interop["peer_reads_peer"][variant]
    assert reads == own


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_peer_ignores_our_record_checksums_with_and_without_validation(
    interop: dict[str, Any], variant: str
) -> None:
    # Our caches carry records.crc32c and a manifest key dataset-rt does not know;
    # it reads them, validated or not, exactly as it reads its own.
    for source in SOURCES:
        cache = interop["ours_base"] / variant / source["name"]
        manifest = cache_reference.read_manifest(cache)
        assert manifest["record_checksums"]["file"] == "records.crc32c", manifest
        assert (cache / "records.crc32c").stat().st_size == 4 * len(source["samples"])
    for reads, what in (
        (interop["peer_reads_ours"][variant], "unvalidated"),
        (interop["peer_reads_ours_validated"][variant], "validate_cache=True"),
    ):
        for part in ("shared", "other"):
            assert "error" not in reads[part], (
                f"dataset-rt 0.2.4 ({what}) refuses our {variant} cache: {reads[part]['error']}"
            )
        assert_read_matches(reads["shared"], SOURCES, SHARED, f"our {variant} cache, {what}")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_peer_validates_a_cache_written_here_as_it_validates_its_own(
    interop: dict[str, Any], variant: str
) -> None:
    ours = interop["peer_reads_ours_validated"][variant]
    own = interop["peer_reads_peer_validated"][variant]
    for part in ("shared", "other"):
        assert "error" not in own[part], (
            f"dataset-rt 0.2.4 rejects its own {variant} cache: {own[part]['error']}"
        )
        assert "error" not in ours[part], (
            f"dataset-rt 0.2.4 with validate_cache=True rejects our {variant} cache: "
            f"{ours[part]['error']}"
        )
        assert ours[part] == own[part]


def test_arbitrary_floats_written_by_the_peer_read_here_bit_for_bit(
    interop: dict[str, Any],
) -> None:
    result = read_here([interop["peer_base"] / "floats" / "floats"], validate_cache=True)
    assert_read_matches(
        result, FLOAT_SOURCES, ["floats"], "peer float cache read here (validate_cache=True)"
    )


def test_arbitrary_floats_written_here_read_in_the_peer_as_its_own_and_exactly_in_its_table(
    interop: dict[str, Any],
) -> None:
    cache = interop["ours_base"] / "floats" / "floats"
    samples = FLOAT_SOURCES[0]["samples"]
    check_cache_files(cache, samples, {"algo": "none", "ratio": 1.0, "max_shard_bytes": None})
    check_embedded_json(cache, samples, "none")
    ours = interop["peer_reads_ours"]["floats"]
    own = interop["peer_reads_peer"]["floats"]
    assert "error" not in ours, f"dataset-rt 0.2.4 cannot read our float cache: {ours['error']}"
    # dataset-rt's iteration parses the embedded JSON (not correctly rounded): as for its own cache
    assert ours["samples"] == own["samples"], first_difference(ours["samples"], own["samples"])
    # its table comes from metadata.arrow: exact
    table = expected_table(FLOAT_SOURCES, ["floats"])
    assert ours["table"] == table, "dataset-rt 0.2.4 reads different floats from our metadata.arrow"
    payloads = [s[2] for s in ours["samples"]]
    assert payloads == [peer_driver.encode_bytes(d) for d, _ in samples]


def test_the_peer_quickstart_cache_with_a_sample_id_column_reads_here(
    interop: dict[str, Any],
) -> None:
    """The peer's README stores a metadata column named like the identity column 'sample_id'."""
    cache = interop["peer_base"] / "quickstart" / "train_images"
    runtime = DatasetRuntime(num_workers=2)
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    samples = QUICKSTART_SOURCES[0]["samples"]
    got = [(s.data, dict(s.metadata), s.cache_id, s.sample_id) for s in dataset]
    assert got == [(data, metadata, 0, i) for i, (data, metadata) in enumerate(samples)]
    # samples_metadata must work or fail with a clear ValueError, never a panic from the IPC reader
    try:
        dataset.samples_metadata()
    except ValueError as error:
        assert "sample_id" in str(error), f"unclear error for a stored 'sample_id' column: {error}"
    except BaseException as error:  # noqa: BLE001 - pyo3's PanicException derives from BaseException
        pytest.fail(
            f"samples_metadata() on a cache with a stored 'sample_id' column raised "
            f"{type(error).__module__}.{type(error).__name__}: {str(error)[:300]}"
        )


@pytest.mark.parametrize("variant", ["none-small-shards", "lz4-small-shards"])
def test_a_cache_committed_from_partitions_reads_identically_in_the_peer(
    peer_python: Path, tmp_path: Path, variant: str
) -> None:
    """`commit_partitions` publishes a plain format 2 cache: dataset-rt 0.2.4 reads it,
    validated or not, as the samples of the partitions in order."""
    source = next(s for s in SOURCES if s["name"] == "other")
    samples = source["samples"]
    config = peer_driver.writer_config(dict(VARIANTS[variant]))
    cuts = [0, 3, 3, len(samples) // 2, len(samples)]  # partition 1 is empty
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
    committed = dataset_rt.commit_partitions(tmp_path, "other", results)
    assert committed == CacheWriteSuccess("other", tmp_path / "other")
    manifest = cache_reference.read_manifest(tmp_path / "other")
    assert manifest["format_version"] == 2 and len(manifest["shards"]) > 3
    plan = [
        {"op": "read", "paths": [str(tmp_path / "other")], "validate_cache": validate}
        for validate in (False, True)
    ]
    for validate, result in zip(
        (False, True), run_peer(peer_python, plan, tmp_path / "peer"), strict=True
    ):
        assert_read_matches(
            result, SOURCES, ["other"], f"committed cache read by dataset-rt 0.2.4 ({validate=})"
        )
    assert_read_matches(
        read_here([tmp_path / "other"]), SOURCES, ["other"], "committed cache read here"
    )
