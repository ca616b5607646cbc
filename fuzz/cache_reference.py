"""What the bytes of a cache mean, computed in Python independently of the core.

The fuzz harness (`cache_files.py`) compares what the library returns with this
meaning: a sample the library hands out must be the record its index row names,
with the metadata its record JSON states (strict JSON, kinds as the manifest
schema says) and the payload its stored bytes decode to. Nothing here decides
which caches the library must reject; it only says what an accepted one holds.

It is also the one place outside the core that knows the byte layout of a cache
(docs/storage-format.md): the tests read and write index rows, record headers,
LZ4 size prefixes, records.crc32c entries and manifest.json through it, never
with struct formats of their own.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

INDEX_ROW_BYTES = 24
CHECKSUM_BYTES = 4
# A record: meta_len (u64 LE), the metadata JSON, then the stored payload; an lz4
# payload is its decoded size (u32 LE) and one LZ4 block.
RECORD_HEADER_BYTES = 8
LZ4_SIZE_BYTES = 4
MANIFEST_FILE = "manifest.json"
_INDEX_ROW = struct.Struct("<QQQ")
_META_LEN = struct.Struct("<Q")
_U32 = struct.Struct("<I")
KINDS = {"bool": bool, "int": int, "float": float, "string": str}
METADATA_FIELDS_MAX = 4096
U64_MAX = 2**64 - 1
CACHE_ID_LIMIT = 2**63  # format 3: every cache_id is below it
LZ4_MIN_MATCH = 4


class StrictJsonError(ValueError):
    """Text that RFC 8259 does not accept as JSON (or that repeats a key)."""


class JsonTooDeep(StrictJsonError):
    """JSON nested deeper than Python's parser recurses: valid or not, it cannot tell."""


class SignedInt(int):
    """A JSON integer written with a minus sign (`-0` included): not a plain digit string."""


def _integer(text: str) -> int:
    return SignedInt(text) if text.startswith("-") else int(text)


def _no_constants(name: str) -> Any:
    raise StrictJsonError(f"{name} is not JSON")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            raise StrictJsonError(f"key {key!r} is repeated")
        members[key] = value
    return members


def strict_json(data: bytes) -> Any:
    """`data` parsed as UTF-8 JSON; StrictJsonError unless RFC 8259 accepts it and no key repeats.

    Integers keep their sign (`SignedInt`); floats are parsed with correct rounding.
    """
    try:
        text = data.decode("utf-8")
        return json.loads(
            text,
            parse_int=_integer,
            parse_constant=_no_constants,
            object_pairs_hook=_unique_members,
        )
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StrictJsonError(str(error)) from error
    except RecursionError as error:
        raise JsonTooDeep(str(error)) from error


def same_value(got: object, expected: object) -> bool:
    """Equal value and exact type, floats bit for bit, recursively through lists and dicts."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, float):
        return struct.pack("<d", got) == struct.pack("<d", expected)
    if isinstance(expected, dict):
        assert isinstance(got, dict)
        return got.keys() == expected.keys() and all(
            same_value(got[key], expected[key]) for key in expected
        )
    if isinstance(expected, list):
        assert isinstance(got, list)
        return len(got) == len(expected) and all(map(same_value, got, expected))
    return got == expected


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as records.crc32c stores it."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def lz4_decode(block: bytes, size: int) -> bytes | None:
    """The bytes an LZ4 block stands for if they are exactly `size` long, else None.

    Lenient about the format's end-of-block conventions (the last five bytes as
    literals, a last sequence without match), which do not change what a block
    means; strict about what does: no read past the block, no match offset 0 or
    reaching before the output, no output beyond `size`.
    """
    out = bytearray()
    position = 0
    end = len(block)
    while position < end:
        token = block[position]
        position += 1
        literals, position = _lz4_length(block, position, token >> 4)
        if literals is None or position + literals > end or len(out) + literals > size:
            return None
        out += block[position : position + literals]
        position += literals
        if position == end:
            break
        if position + 2 > end:
            return None
        offset = block[position] | block[position + 1] << 8
        position += 2
        match, position = _lz4_length(block, position, token & 15)
        if match is None or offset == 0 or offset > len(out):
            return None
        match += LZ4_MIN_MATCH
        if len(out) + match > size:
            return None
        _copy_match(out, offset, match)
    return bytes(out) if len(out) == size else None


def _lz4_length(block: bytes, position: int, nibble: int) -> tuple[int | None, int]:
    length = nibble
    if nibble != 15:
        return length, position
    while True:
        if position >= len(block):
            return None, position
        extra = block[position]
        position += 1
        length += extra
        if extra != 255:
            return length, position


def _copy_match(out: bytearray, offset: int, length: int) -> None:
    start = len(out) - offset
    if offset >= length:
        out += out[start : start + length]
        return
    pattern = bytes(out[start:])
    repeats, rest = divmod(length, offset)
    out += pattern * repeats + pattern[:rest]


@dataclass(frozen=True)
class Sample:
    """What one record means: its metadata (with the schema's kinds) and its payload."""

    metadata: dict[str, object]
    payload: bytes


def record_meaning(record: bytes, algo: str, schema: dict[str, str]) -> Sample | str:
    """The sample `record` stores, or why it stores none (a string)."""
    if len(record) < RECORD_HEADER_BYTES:
        return "record shorter than its 8-byte header"
    meta_len = record_meta_len(record)
    if meta_len > len(record) - RECORD_HEADER_BYTES:
        return "meta_len runs past the record"
    metadata = metadata_meaning(record_json(record), schema)
    if isinstance(metadata, str):
        return metadata
    stored = record_stored(record)
    if algo == "none":
        return Sample(metadata, stored)
    if len(stored) < LZ4_SIZE_BYTES:
        return "lz4 record without its 4-byte length"
    payload = lz4_decode(stored[LZ4_SIZE_BYTES:], lz4_size(stored))
    if payload is None:
        return "lz4 block does not decode to its stated length"
    return Sample(metadata, payload)


def metadata_meaning(text: bytes, schema: dict[str, str]) -> dict[str, object] | str:
    """The metadata a record's JSON states, or why it states none matching `schema`."""
    try:
        value = strict_json(text)
    except StrictJsonError as error:
        return f"record JSON is not JSON: {error}"
    if not isinstance(value, dict):
        return "record JSON is not an object"
    if value.keys() != schema.keys():
        return "record JSON keys differ from the schema"
    for name, kind in schema.items():
        field = value[name]
        if type(field) is SignedInt:
            value[name] = field = int(field)
        if type(field) is not KINDS[kind]:
            return f"record field {name!r} is not of kind {kind}"
    return value


def index_row(index: bytes, sample_id: int) -> tuple[int, int, int]:
    """(shard_id, offset, record_len) of sample `sample_id`: its 24-byte row of index.bin."""
    shard_id, offset, record_len = _INDEX_ROW.unpack_from(index, INDEX_ROW_BYTES * sample_id)
    return shard_id, offset, record_len


def index_rows(index: bytes) -> list[tuple[int, int, int]]:
    """(shard_id, offset, record_len) of every whole 24-byte row."""
    return [index_row(index, row) for row in range(len(index) // INDEX_ROW_BYTES)]


def encode_index_row(shard_id: int, offset: int, record_len: int) -> bytes:
    """One row of index.bin."""
    return _INDEX_ROW.pack(shard_id, offset, record_len)


def set_index_row(
    index: bytearray, sample_id: int, shard_id: int, offset: int, record_len: int
) -> None:
    """Write sample `sample_id`'s row of index.bin."""
    _INDEX_ROW.pack_into(index, INDEX_ROW_BYTES * sample_id, shard_id, offset, record_len)


def encode_index(rows: list[tuple[int, int, int]]) -> bytes:
    """index.bin of these (shard_id, offset, record_len) rows."""
    return b"".join(encode_index_row(*row) for row in rows)


def record_meta_len(data: bytes, offset: int = 0) -> int:
    """meta_len, the header of the record at `offset` of `data`: its JSON's length."""
    (meta_len,) = _META_LEN.unpack_from(data, offset)
    return int(meta_len)


def encode_record_header(meta_len: int) -> bytes:
    """A record's 8-byte header for `meta_len` bytes of JSON."""
    return _META_LEN.pack(meta_len)


def set_record_meta_len(data: bytearray, offset: int, meta_len: int) -> None:
    """Write `meta_len` into the header of the record at `offset` of `data`."""
    _META_LEN.pack_into(data, offset, meta_len)


def record_json(record: bytes) -> bytes:
    """The metadata JSON of a whole record (bytes 8 .. 8 + meta_len)."""
    return record[RECORD_HEADER_BYTES : RECORD_HEADER_BYTES + record_meta_len(record)]


def record_stored(record: bytes) -> bytes:
    """The stored payload of a whole record, after its JSON: the payload itself, or an
    lz4 payload's size prefix and block."""
    return record[RECORD_HEADER_BYTES + record_meta_len(record) :]


def stored_offset(data: bytes, offset: int) -> int:
    """Where the stored payload of the record at `offset` of `data` starts."""
    return offset + RECORD_HEADER_BYTES + record_meta_len(data, offset)


def lz4_size(data: bytes, offset: int = 0) -> int:
    """The decoded size an lz4 payload at `offset` of `data` states before its block."""
    (size,) = _U32.unpack_from(data, offset)
    return int(size)


def encode_lz4_size(size: int) -> bytes:
    """The 4-byte size prefix of an lz4 payload decoding to `size` bytes."""
    return _U32.pack(size)


def set_lz4_size(data: bytearray, offset: int, size: int) -> None:
    """Write the size prefix of the lz4 payload at `offset` of `data`."""
    _U32.pack_into(data, offset, size)


def record_checksum(checksums: bytes, sample_id: int) -> int:
    """Sample `sample_id`'s entry of records.crc32c."""
    (value,) = _U32.unpack_from(checksums, CHECKSUM_BYTES * sample_id)
    return int(value)


def set_record_checksum(checksums: bytearray, sample_id: int, value: int) -> None:
    """Write sample `sample_id`'s entry of records.crc32c."""
    _U32.pack_into(checksums, CHECKSUM_BYTES * sample_id, value)


def shard_name(shard_id: int) -> str:
    """A shard's file, relative to its cache."""
    return f"shards/{shard_id:06d}.bin"


def read_manifest(cache: Path) -> Any:
    """The JSON value of a cache's manifest.json, which must be UTF-8 (its fields are
    not checked: see `manifest_problems`)."""
    return json.loads((cache / MANIFEST_FILE).read_bytes().decode("utf-8"))


def write_manifest(cache: Path, manifest: object, indent: int | None = 2) -> None:
    """Replace a cache's manifest.json with `manifest` as JSON (pretty with `indent`)."""
    (cache / MANIFEST_FILE).write_text(json.dumps(manifest, indent=indent), encoding="utf-8")


def manifest_problems(manifest: object) -> list[str]:
    """How a parsed manifest breaks the rules the reader documents (storage-format.md)."""
    if not isinstance(manifest, dict):
        return ["root is not an object"]
    problems: list[str] = []
    version = manifest.get("format_version")
    if not (_is_u64(version) and version in (2, 3)):
        problems.append(f"format_version is {version!r}")
    if version == 3:
        problems += _field_problems(manifest, "cache_id", _is_cache_id)
    problems += _field_problems(manifest, "sample_count", _is_u64)
    name = manifest.get("source_name")
    plain = (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not any(c in name for c in "/\\\x00")
    )
    if not plain:
        problems.append(f"source_name is {name!r}")
    problems += _schema_problems(manifest.get("metadata_schema"))
    for field in ("metadata_sha256", "index_sha256"):
        problems += _field_problems(manifest, field, _is_digest)
    problems += _shards_problems(manifest.get("shards"))
    if "record_checksums" in manifest:
        problems += _record_checksums_problems(manifest["record_checksums"], manifest)
    return problems


def cache_ids(manifests: list[dict[str, Any]]) -> list[int]:
    """The cache_id of each cache of a dataset opened from caches with these (valid)
    manifests, in order: a format 3 manifest's `cache_id`, else the position."""
    return [
        manifest["cache_id"] if manifest["format_version"] == 3 else position
        for position, manifest in enumerate(manifests)
    ]


def _is_cache_id(value: object) -> bool:
    return type(value) is int and 0 <= value < CACHE_ID_LIMIT


def _is_u64(value: object) -> TypeGuard[int]:
    return type(value) is int and 0 <= value <= U64_MAX


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _field_problems(container: dict[str, Any], field: str, valid: Any) -> list[str]:
    value = container.get(field)
    return [] if valid(value) else [f"{field} is {value!r}"[:200]]


def _schema_problems(schema: object) -> list[str]:
    if not isinstance(schema, list) or len(schema) > METADATA_FIELDS_MAX:
        return ["metadata_schema is not a list of at most 4096 fields"]
    names = []
    for field in schema:
        if not isinstance(field, dict):
            return ["a metadata_schema entry is not an object"]
        name, kind = field.get("name"), field.get("kind")
        if not isinstance(name, str) or kind not in KINDS:
            return [f"metadata_schema entry {field!r} is invalid"[:200]]
        names.append(name.encode("utf-8", "surrogatepass"))
    if any(a >= b for a, b in zip(names, names[1:], strict=False)):
        return ["metadata_schema names are not strictly sorted"]
    return []


def _shards_problems(shards: object) -> list[str]:
    if not isinstance(shards, list):
        return ["shards is not a list"]
    problems = []
    for position, shard in enumerate(shards):
        if not isinstance(shard, dict):
            problems.append(f"shards[{position}] is not an object")
            continue
        if shard.get("name") != f"{position:06d}.bin":
            problems.append(f"shards[{position}].name is {shard.get('name')!r}")
        for field in ("uncompressed_byte_len", "byte_len"):
            problems += _field_problems(shard, field, _is_u64)
        problems += _field_problems(shard, "sha256", _is_digest)
        compression = shard.get("compression")
        if not isinstance(compression, dict):
            problems.append(f"shards[{position}].compression is not an object")
            continue
        algo, ratio = compression.get("algo"), compression.get("ratio")
        number = (
            isinstance(ratio, int | float) and not isinstance(ratio, bool) and math.isfinite(ratio)
        )
        if algo == "none" and not (number and ratio == 1.0):
            problems.append(f"shards[{position}]: none with ratio {ratio!r}")
        elif algo == "lz4" and not (number and ratio is not None and ratio > 0):
            problems.append(f"shards[{position}]: lz4 with ratio {ratio!r}")
        elif algo not in ("none", "lz4"):
            problems.append(f"shards[{position}].compression.algo is {algo!r}")
    return problems


def _record_checksums_problems(listed: object, manifest: dict[str, Any]) -> list[str]:
    if not isinstance(listed, dict):
        return ["record_checksums is not an object"]
    problems = []
    if listed.get("algo") != "crc32c" or listed.get("file") != "records.crc32c":
        problems.append(f"record_checksums names {listed.get('algo')!r}, {listed.get('file')!r}")
    count = manifest.get("sample_count")
    if not (_is_u64(count) and listed.get("byte_len") == CHECKSUM_BYTES * count):
        problems.append(f"record_checksums.byte_len is {listed.get('byte_len')!r}")
    problems += _field_problems(listed, "sha256", _is_digest)
    return problems
