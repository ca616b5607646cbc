"""The on-disk formats 2 and 3, checked byte by byte with independent readers
(json, hashlib, the reference decoder fuzz/cache_reference.py, pyarrow, the
reference lz4)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

import cache_reference
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.ipc  # type: ignore[import-untyped]
import pytest

from conftest import ListSource, crc32c, same_value
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ShardCompression, WriterConfig

HEX64 = re.compile(r"[0-9a-f]{64}")
MANIFEST_KEYS = {
    "format_version",
    "source_name",
    "sample_count",
    "metadata_schema",
    "metadata_sha256",
    "index_sha256",
    "shards",
    "record_checksums",
}
SHARD_KEYS = {"name", "uncompressed_byte_len", "byte_len", "compression", "sha256"}
KIND_OF = {bool: "bool", int: "int", float: "float", str: "string"}
ARROW_TYPE_OF = {
    "bool": pa.bool_(),
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
}

FLOATS = [100.0, 1e21, -0.0, 5e-324, 1e300, 0.1 + 0.2, -2.5, 1e-7, 123456789.125, 2.0**53, 3.0]
STRINGS = [
    "plain",
    'quote " and \\ backslash',
    "\x00\x01\x1f\x7f",
    "tab\tnew\nline",
    "é😀\u2028",
    "",
    '{"k":1}',
    "z",
]


def make_samples() -> list[tuple[bytes, dict[str, Any]]]:
    samples = []
    for i in range(40):
        payload = (
            (bytes([i]) * (i * 37 % 300)) + (b"repeat-me " * (i % 5)) + i.to_bytes(2, "little")
        )
        metadata = {
            "zeta": STRINGS[i % len(STRINGS)],
            "alpha": i * 7 - 100,
            "Beta": FLOATS[i % len(FLOATS)],
            "é": i % 3 == 0,
            "a b": -(2**63) if i % 2 else 2**63 - 1,
            "": f"empty-name-{i}",
        }
        samples.append((payload, metadata))
    return samples


SAMPLES = make_samples()
SCHEMA = sorted((name, KIND_OF[type(value)]) for name, value in SAMPLES[0][1].items())
SOURCE_NAME = "files é😀"


@pytest.fixture(scope="module", params=["none", "lz4", "lz4_v3"])
def cache(
    request: pytest.FixtureRequest,
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    base = tmp_path_factory.mktemp(f"files_{request.param}")
    algo: Literal["none", "lz4"] = "none" if request.param == "none" else "lz4"
    config = WriterConfig(
        show_progress=False,
        max_shard_bytes=3000,
        shard_compression=ShardCompression(algo=algo, ratio=1.0 if algo == "none" else 2.5),
        format_version=3 if request.param.endswith("_v3") else 2,
    )
    results = runtime.write_cache(ListSource(SOURCE_NAME, SAMPLES), base, writer_config=config)
    assert results == [CacheWriteSuccess(SOURCE_NAME, base / SOURCE_NAME)], (
        f"write failed: {results}"
    )
    return base / SOURCE_NAME


def algo_of(cache: Path) -> str:
    return "lz4" if "lz4" in cache.parent.name else "none"


def manifest_of(cache: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = cache_reference.read_manifest(cache)
    return manifest


def index_rows(cache: Path) -> list[tuple[int, int, int]]:
    data = (cache / "index.bin").read_bytes()
    assert len(data) % cache_reference.INDEX_ROW_BYTES == 0, f"index.bin has {len(data)} bytes"
    return cache_reference.index_rows(data)


def records(cache: Path) -> list[tuple[int, bytes, bytes]]:
    """(shard_id, embedded metadata JSON bytes, stored payload) per sample, from index.bin."""
    shards = sorted((cache / "shards").iterdir())
    contents = [p.read_bytes() for p in shards]
    out = []
    for sample_id, (shard_id, offset, record_len) in enumerate(index_rows(cache)):
        record = contents[shard_id][offset : offset + record_len]
        assert len(record) == record_len, (
            f"sample {sample_id}: record runs past the end of shard {shard_id}"
        )
        meta_len = cache_reference.record_meta_len(record)
        assert cache_reference.RECORD_HEADER_BYTES + meta_len <= record_len, (
            f"sample {sample_id}: meta_len {meta_len} exceeds record_len {record_len}"
        )
        stored = cache_reference.record_stored(record)
        out.append((shard_id, cache_reference.record_json(record), stored))
    return out


def significant_digits(number_token: str) -> str:
    mantissa = number_token.lower().split("e")[0].lstrip("-")
    return mantissa.replace(".", "").strip("0") or "0"


def whitespace_outside_strings(text: str) -> list[int]:
    positions, in_string, escaped = [], False, False
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in " \t\r\n":
            positions.append(position)
    return positions


# ---- manifest.json ---------------------------------------------------------------


def test_manifest_has_exactly_the_fields_of_its_version_with_their_values(cache: Path) -> None:
    manifest = manifest_of(cache)
    version = 3 if "_v3" in cache.parent.name else 2
    keys = MANIFEST_KEYS | ({"cache_id"} if version == 3 else set())
    assert set(manifest) == keys, f"manifest keys {sorted(manifest)} != v{version} {sorted(keys)}"
    assert manifest["format_version"] == version and type(manifest["format_version"]) is int, (
        f"format_version is not {version}"
    )
    if version == 3:
        digest = hashlib.sha256(SOURCE_NAME.encode()).digest()
        assert manifest["cache_id"] == int.from_bytes(digest[:8], "big") & (2**63 - 1)
        assert list(manifest)[:2] == ["format_version", "cache_id"]
    assert manifest["source_name"] == SOURCE_NAME, f"source_name {manifest['source_name']!r}"
    assert manifest["sample_count"] == len(SAMPLES), f"sample_count {manifest['sample_count']}"


def test_manifest_metadata_schema_is_sorted_by_name_with_kinds(cache: Path) -> None:
    schema = manifest_of(cache)["metadata_schema"]
    assert all(set(field) == {"name", "kind"} for field in schema), (
        f"schema entries have other keys: {schema}"
    )
    assert [(f["name"], f["kind"]) for f in schema] == SCHEMA, (
        f"metadata_schema {schema} != sorted {SCHEMA}"
    )


def test_manifest_hashes_are_lowercase_hex_sha256_of_the_files(cache: Path) -> None:
    manifest = manifest_of(cache)
    for key, file in (("metadata_sha256", "metadata.arrow"), ("index_sha256", "index.bin")):
        assert HEX64.fullmatch(manifest[key]), (
            f"{key} {manifest[key]!r} is not 64 lowercase hex digits"
        )
        actual = hashlib.sha256((cache / file).read_bytes()).hexdigest()
        assert manifest[key] == actual, f"{key} {manifest[key]} != sha256({file}) {actual}"
    for shard in manifest["shards"]:
        assert HEX64.fullmatch(shard["sha256"]), (
            f"shard {shard['name']} sha256 {shard['sha256']!r} is not lowercase hex"
        )
        actual = hashlib.sha256((cache / "shards" / shard["name"]).read_bytes()).hexdigest()
        assert shard["sha256"] == actual, (
            f"shard {shard['name']} sha256 {shard['sha256']} != {actual}"
        )


def test_manifest_shards_are_numbered_files_with_sizes_and_compression(cache: Path) -> None:
    manifest = manifest_of(cache)
    shards = manifest["shards"]
    assert len(shards) >= 2, f"max_shard_bytes=3000 should give several shards, got {len(shards)}"
    names = [s["name"] for s in shards]
    assert names == [f"{i:06d}.bin" for i in range(len(shards))], f"shard names {names}"
    on_disk = sorted(p.name for p in (cache / "shards").iterdir())
    assert on_disk == names, f"shards/ holds {on_disk}, manifest lists {names}"
    algo = algo_of(cache)
    expected_compression = {"algo": algo, "ratio": 1.0 if algo == "none" else 2.5}
    payload_per_shard = [0] * len(shards)
    for (shard_id, _, _), (payload, _) in zip(index_rows(cache), SAMPLES, strict=True):
        payload_per_shard[shard_id] += len(payload)
    for shard, payload_bytes in zip(shards, payload_per_shard, strict=True):
        assert set(shard) == SHARD_KEYS, f"shard {shard['name']} keys {sorted(shard)}"
        size = (cache / "shards" / shard["name"]).stat().st_size
        assert shard["byte_len"] == size, (
            f"shard {shard['name']} byte_len {shard['byte_len']} != file size {size}"
        )
        assert shard["uncompressed_byte_len"] == payload_bytes, (
            f"shard {shard['name']} uncompressed_byte_len {shard['uncompressed_byte_len']} != "
            f"sum of its payload lengths {payload_bytes}"
        )
        assert shard["compression"] == expected_compression, (
            f"shard {shard['name']} compression {shard['compression']}"
        )
        assert type(shard["compression"]["ratio"]) is float, (
            "compression ratio is not written as a JSON float"
        )


def test_manifest_and_record_checksums_are_the_only_other_files_next_to_the_data(
    cache: Path,
) -> None:
    entries = sorted(p.name for p in cache.iterdir())
    assert entries == [
        "index.bin",
        "manifest.json",
        "metadata.arrow",
        "records.crc32c",
        "shards",
    ], f"cache directory holds {entries}"


def test_record_checksums_are_the_crc32c_of_every_stored_record(cache: Path) -> None:
    manifest = manifest_of(cache)
    listed = manifest["record_checksums"]
    data = (cache / "records.crc32c").read_bytes()
    assert listed == {
        "algo": "crc32c",
        "file": "records.crc32c",
        "byte_len": 4 * len(SAMPLES),
        "sha256": hashlib.sha256(data).hexdigest(),
    }, f"record_checksums entry {listed}"
    # The manifest keeps the peer's layout up to the new key, which comes last.
    assert list(manifest)[-1] == "record_checksums", f"manifest key order {list(manifest)}"
    shards = [p.read_bytes() for p in sorted((cache / "shards").iterdir())]
    for sample_id, (shard_id, offset, record_len) in enumerate(index_rows(cache)):
        record = shards[shard_id][offset : offset + record_len]
        stored = cache_reference.record_checksum(data, sample_id)
        assert stored == crc32c(record), (
            f"sample {sample_id}: records.crc32c has {stored:08x}, the record's CRC-32C is "
            f"{crc32c(record):08x}"
        )


# ---- index.bin and shard records ----------------------------------------------------


def test_index_has_24_bytes_per_sample_and_records_tile_each_shard(cache: Path) -> None:
    size = (cache / "index.bin").stat().st_size
    assert size == 24 * len(SAMPLES), f"index.bin has {size} bytes for {len(SAMPLES)} samples"
    manifest = manifest_of(cache)
    fill = {i: 0 for i in range(len(manifest["shards"]))}
    for sample_id, (shard_id, offset, record_len) in enumerate(index_rows(cache)):
        assert shard_id in fill, (
            f"sample {sample_id} names shard {shard_id} which the manifest does not list"
        )
        assert offset == fill[shard_id], (
            f"sample {sample_id} at offset {offset}, previous record ends at {fill[shard_id]}"
        )
        assert all(fill[later] == 0 for later in fill if later > shard_id), (
            f"sample {sample_id} goes back to shard {shard_id}"
        )
        fill[shard_id] += record_len
    for shard in manifest["shards"]:
        shard_id = int(shard["name"][:6])
        assert fill[shard_id] == shard["byte_len"], (
            f"records of {shard['name']} cover {fill[shard_id]} of {shard['byte_len']} bytes"
        )


def test_records_hold_the_payload_raw_or_as_a_reference_decodable_lz4_block(cache: Path) -> None:
    for sample_id, ((_, _, stored), (payload, _)) in enumerate(
        zip(records(cache), SAMPLES, strict=True)
    ):
        if algo_of(cache) == "none":
            assert stored == payload, (
                f"sample {sample_id}: raw stored payload differs from the written payload"
            )
        else:
            lz4_block = pytest.importorskip("lz4.block")
            assert len(stored) >= 4, f"sample {sample_id}: lz4 payload has no u32 length prefix"
            length = cache_reference.lz4_size(stored)
            assert length == len(payload), (
                f"sample {sample_id}: u32 prefix {length} != payload length {len(payload)}"
            )
            block = stored[cache_reference.LZ4_SIZE_BYTES :]
            decoded = lz4_block.decompress(block, uncompressed_size=length)
            assert decoded == payload, (
                f"sample {sample_id}: the reference lz4 decodes the block to different bytes"
            )


def test_embedded_metadata_is_compact_json_with_sorted_keys_and_exact_values(cache: Path) -> None:
    for sample_id, ((_, text_bytes, _), (_, metadata)) in enumerate(
        zip(records(cache), SAMPLES, strict=True)
    ):
        text = text_bytes.decode("utf-8")
        assert not whitespace_outside_strings(text), (
            f"sample {sample_id}: JSON is not compact: {text!r}"
        )
        float_tokens: list[str] = []
        int_tokens: list[str] = []
        keys: list[list[str]] = []

        def parse_float(token: str, float_tokens: list[str] = float_tokens) -> float:
            float_tokens.append(token)
            return float(token)

        def parse_int(token: str, int_tokens: list[str] = int_tokens) -> int:
            int_tokens.append(token)
            return int(token)

        def pairs(items: list[tuple[str, Any]], keys: list[list[str]] = keys) -> dict[str, Any]:
            keys.append([k for k, _ in items])
            return dict(items)

        parsed = json.loads(
            text, parse_float=parse_float, parse_int=parse_int, object_pairs_hook=pairs
        )
        assert keys == [sorted(metadata)], (
            f"sample {sample_id}: keys {keys} are not the sorted names {sorted(metadata)}"
        )
        for key, value in metadata.items():
            assert same_value(parsed[key], value), (
                f"sample {sample_id}: field {key!r} is {parsed[key]!r}, wrote {value!r}"
            )
        assert len(float_tokens) == 1, (
            f"sample {sample_id}: float field written as {int_tokens} (an int token)"
        )
        token = float_tokens[0]
        value = metadata["Beta"]
        assert "." in token or "e" in token.lower(), (
            f"sample {sample_id}: float {value!r} written as {token!r}"
        )
        assert significant_digits(token) == significant_digits(repr(value)), (
            f"sample {sample_id}: float {value!r} written as {token!r}, "
            "not in shortest round-trip form"
        )
        if value == 100.0:
            assert token == "100.0", f"100.0 written as {token!r}"
        if value == 1e21:
            assert token == "1e+21", f"1e21 written as {token!r}"


# ---- metadata.arrow -------------------------------------------------------------------


def test_metadata_arrow_is_an_ipc_file_with_sorted_non_null_columns_of_the_four_types(
    cache: Path,
) -> None:
    raw = (cache / "metadata.arrow").read_bytes()
    assert raw[:6] == b"ARROW1" and raw[-6:] == b"ARROW1", (
        "metadata.arrow lacks the Arrow IPC file magic"
    )
    table = pyarrow.ipc.open_file(cache / "metadata.arrow").read_all()
    assert table.column_names == [name for name, _ in SCHEMA], (
        f"columns {table.column_names} are not sorted by name"
    )
    assert table.num_rows == len(SAMPLES), f"metadata.arrow has {table.num_rows} rows"
    for (name, kind), field in zip(SCHEMA, table.schema, strict=True):
        assert field.type == ARROW_TYPE_OF[kind], (
            f"column {name!r} has Arrow type {field.type}, expected {ARROW_TYPE_OF[kind]}"
        )
        assert not field.nullable, f"column {name!r} is declared nullable"
        assert table.column(name).null_count == 0, f"column {name!r} has nulls"


def test_metadata_arrow_rows_hold_the_written_values(cache: Path) -> None:
    rows = pyarrow.ipc.open_file(cache / "metadata.arrow").read_all().to_pylist()
    for sample_id, (row, (_, metadata)) in enumerate(zip(rows, SAMPLES, strict=True)):
        assert set(row) == set(metadata), f"row {sample_id} columns {sorted(row)}"
        for key, value in metadata.items():
            assert same_value(row[key], value), (
                f"row {sample_id} column {key!r} is {row[key]!r}, wrote {value!r}"
            )


def test_metadata_arrow_is_readable_by_polars(cache: Path) -> None:
    polars = pytest.importorskip("polars")
    frame = polars.read_ipc(cache / "metadata.arrow")
    assert frame.columns == [name for name, _ in SCHEMA], f"polars sees columns {frame.columns}"
    assert frame.height == len(SAMPLES), f"polars sees {frame.height} rows"
    assert frame["alpha"].to_list() == [m["alpha"] for _, m in SAMPLES], (
        "polars reads different int values"
    )


def test_a_single_sample_cache_has_one_shard_and_one_index_row(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    results = runtime.write_cache(
        ListSource("one", [(b"", {"x": 1})]),
        tmp_path,
        writer_config=WriterConfig(show_progress=False),
    )
    assert results == [CacheWriteSuccess("one", tmp_path / "one")], f"write failed: {results}"
    manifest = manifest_of(tmp_path / "one")
    assert manifest["sample_count"] == 1 and len(manifest["shards"]) == 1, f"manifest {manifest}"
    assert index_rows(tmp_path / "one") == [(0, 0, 8 + len(b'{"x":1}'))], (
        f"index rows {index_rows(tmp_path / 'one')}"
    )
    assert (tmp_path / "one" / "shards" / "000000.bin").read_bytes() == (
        cache_reference.encode_record_header(7) + b'{"x":1}'
    ), "record bytes"


def test_the_core_calls_a_directory_with_a_manifest_published(cache: Path, tmp_path: Path) -> None:
    from dataset_rt._binding import native as _native

    assert _native.cache_published(cache)
    assert not _native.cache_published(tmp_path / "absent")
    unpublished = tmp_path / "half"
    unpublished.mkdir()
    (unpublished / "index.bin").write_bytes(b"")
    assert not _native.cache_published(unpublished)
    (unpublished / "manifest.json").write_text("{}")
    assert _native.cache_published(unpublished)  # published; whether valid is the reader's call


def test_a_format_3_cache_is_the_format_2_cache_with_a_cache_id_line(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # The same files, and the manifest text of format 2 with one line more (as
    # dataset-rt 0.4.8 writes it); records.crc32c in both.
    caches = {}
    for version in (2, 3):
        config = WriterConfig(show_progress=False, max_shard_bytes=3000, format_version=version)
        [result] = runtime.write_cache(
            ListSource(SOURCE_NAME, SAMPLES), tmp_path / f"v{version}", writer_config=config
        )
        assert isinstance(result, CacheWriteSuccess), result
        caches[version] = result.path
    files = {
        version: {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}
        for version, path in caches.items()
    }
    v2_manifest = files[2].pop("manifest.json").decode()
    v3_manifest = files[3].pop("manifest.json").decode()
    assert files[2] == files[3] and "records.crc32c" in files[3]
    cache_id = manifest_of(caches[3])["cache_id"]
    head_v2 = '{\n  "format_version": 2,\n'
    head_v3 = f'{{\n  "format_version": 3,\n  "cache_id": {cache_id},\n'
    assert v2_manifest.startswith(head_v2) and v3_manifest.startswith(head_v3)
    assert v3_manifest[len(head_v3) :] == v2_manifest[len(head_v2) :]
