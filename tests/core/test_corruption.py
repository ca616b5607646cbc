"""Corrupted caches (SPEC sections 3 and 8): damage is detected, or harmless —
never different data returned silently. Errors name the cache path and the file.

Every example works on a fresh `shutil.copytree` of a small pristine cache.

Every record is covered by records.crc32c, so with default settings a flipped
byte anywhere in a shard is an error. What is exempt, and only that:
- manifest.json has no checksum of its own: a flip that leaves its JSON meaning
  unchanged (whitespace), or changes only ``source_name`` (caches may be renamed),
  the advisory lz4 ``ratio``, or a format 3 cache's identity (its ``cache_id``, or
  ``format_version`` 3 to 2, which makes the id the cache's position), may go
  unnoticed even with ``validate_cache=True``; the samples then carry the id the
  manifest states.

The flips run on a format 2 cache of each codec and on a format 3 cache.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Literal

import cache_reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ListSource, same_value, without_record_checksums
from dataset_rt import (
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

ALGOS = ("none", "lz4")
# The caches the flip tests damage, and their codecs: "v3" is a format 3 cache.
KINDS: dict[str, Literal["none", "lz4"]] = {"none": "none", "lz4": "lz4", "v3": "none"}
FILE_REFERENCE = re.compile(
    r"manifest\.json|index\.bin|metadata\.arrow|records\.crc32c|shards?[/ ]"
)

SAMPLES = [
    (
        bytes([i]) * (5 + 3 * i) + b"hello hello hello",
        {"i": i, "f": i / 3, "s": "x" * i + '"q"', "b": i % 2 == 0},
    )
    for i in range(8)
]


@pytest.fixture(scope="module")
def pristine(runtime: DatasetRuntime, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    caches = {}
    for kind, algo in KINDS.items():
        base = tmp_path_factory.mktemp(f"pristine_{kind}")
        config = WriterConfig(
            show_progress=False,
            max_shard_bytes=180,
            shard_compression=ShardCompression(algo=algo, ratio=1.0),
            format_version=3 if kind == "v3" else 2,
        )
        results = runtime.write_cache(ListSource("c", SAMPLES), base, writer_config=config)
        assert results == [CacheWriteSuccess("c", base / "c")], f"pristine write failed: {results}"
        assert len(list((base / "c" / "shards").iterdir())) >= 3, (
            "the pristine cache should have several shards"
        )
        caches[kind] = base / "c"
    return caches


def files_of(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


def fresh_copy(cache: Path, factory: pytest.TempPathFactory) -> Path:
    target = factory.mktemp("corrupt") / "copy"
    shutil.copytree(cache, target)
    return target


def flip(path: Path, position: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def load(runtime: DatasetRuntime, cache: Path, validate: bool) -> list[Any]:
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=validate)
    )
    return list(dataset)


def stated_cache_id(cache: Path) -> int:
    """The cache_id the manifest of `cache` (a dataset's only cache) gives it."""
    manifest = json.loads((cache / "manifest.json").read_bytes())
    cache_id: int = manifest["cache_id"] if manifest["format_version"] == 3 else 0
    return cache_id


def assert_original(samples: list[Any], what: str, cache_id: int = 0) -> None:
    """The samples are exactly SAMPLES, of the cache `cache_id`."""
    assert len(samples) == len(SAMPLES), (
        f"{what}: read {len(samples)} samples, wrote {len(SAMPLES)}"
    )
    for sample_id, (sample, (payload, metadata)) in enumerate(zip(samples, SAMPLES, strict=True)):
        assert (sample.cache_id, sample.sample_id) == (cache_id, sample_id), (
            f"{what}: sample {sample_id} has identity {sample[2:]}"
        )
        got = dict(sample.metadata)
        assert set(got) == set(metadata) and all(
            same_value(got[k], v) for k, v in metadata.items()
        ), f"{what}: sample {sample_id} metadata silently became {got!r} (was {metadata!r})"
        assert sample.data == payload, (
            f"{what}: sample {sample_id} payload silently changed "
            f"({len(sample.data)} bytes read, {len(payload)} written)"
        )


def assert_names_cache_and_file(
    error: BaseException, cache: Path, what: str, file: str | None = None
) -> None:
    """The message names the cache path and `file` ("" = any cache file, None = path only)."""
    message = str(error)
    assert str(cache) in message, f"{what}: error does not name the cache path {cache}: {message!r}"
    if file is None:
        return
    if file == "":
        assert FILE_REFERENCE.search(message), (
            f"{what}: error names no file of the cache: {message!r}"
        )
    else:
        assert file in message, f"{what}: error does not name {file}: {message!r}"


def manifest_change_is_undetectable(original: bytes, corrupted: bytes, algo: str) -> bool:
    """True when the corrupted manifest means the same but for source_name, the lz4
    ratio, or the cache's identity (cache_id, format_version 2 or 3)."""
    try:
        before = json.loads(original.decode("utf-8"))
        after = json.loads(corrupted.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    if not isinstance(after, dict):
        return False
    for document in (before, after):
        document.pop("source_name", None)
        if document.get("format_version") in (2, 3):
            document.pop("format_version")
            document.pop("cache_id", None)
        if algo == "lz4":
            for shard in (
                document.get("shards", []) if isinstance(document.get("shards"), list) else []
            ):
                if isinstance(shard, dict) and isinstance(shard.get("compression"), dict):
                    ratio = shard["compression"].get("ratio")
                    if isinstance(ratio, float) and ratio > 0 and ratio != float("inf"):
                        shard["compression"]["ratio"] = "advisory"
    return before == after and json.dumps(before) == json.dumps(after)


def framing_positions(cache: Path, file: str, algo: str) -> list[int]:
    """Positions of a shard holding record framing: meta_len, JSON copy, lz4 length prefix."""
    if not file.startswith("shards/"):
        return []
    shard_id = int(Path(file).stem)
    index = (cache / "index.bin").read_bytes()
    shard = (cache / file).read_bytes()
    positions: list[int] = []
    prefix_bytes = cache_reference.LZ4_SIZE_BYTES if algo == "lz4" else 0
    for row_shard, offset, _ in cache_reference.index_rows(index):
        if row_shard == shard_id:
            positions.extend(
                range(offset, cache_reference.stored_offset(shard, offset) + prefix_bytes)
            )
    return positions


CORRUPTION = settings(
    max_examples=150,
    deadline=None,
    # The same examples on every CI run; deterministic tests below pin the known weak spots.
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@CORRUPTION
@given(kind=st.sampled_from(sorted(KINDS)), data=st.data())
def test_a_flipped_byte_anywhere_is_detected_with_validation_and_detected_or_harmless_without(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    data: st.DataObject,
) -> None:
    source, algo = pristine[kind], KINDS[kind]
    file = data.draw(st.sampled_from(files_of(source)), label="file")
    size = (source / file).stat().st_size
    framing = framing_positions(source, file, algo)
    anywhere = st.integers(0, size - 1)
    position = data.draw(
        st.one_of(anywhere, st.sampled_from(framing)) if framing else anywhere, label="position"
    )
    mask = data.draw(st.integers(1, 255), label="mask")
    what = f"{kind} cache, {file} byte {position} ^ {mask:#04x}"

    cache = fresh_copy(source, tmp_path_factory)
    flip(cache / file, position, mask)

    # validate_cache=True: every SHA-256 is checked while loading.
    try:
        samples = load(runtime, cache, validate=True)
    except (ValueError, OSError) as error:
        assert_names_cache_and_file(
            error, cache, f"{what} (validate_cache=True)", "" if file == "manifest.json" else file
        )
    else:
        undetectable = file == "manifest.json" and manifest_change_is_undetectable(
            (source / file).read_bytes(), (cache / file).read_bytes(), algo
        )
        assert undetectable, (
            f"{what}: validate_cache=True loaded the corrupted cache without an error"
        )
        assert_original(samples, f"{what} (validate_cache=True)", stated_cache_id(cache))

    # validate_cache=False: every record's checksum and structure; whatever is
    # returned must be the original data, payloads included.
    try:
        samples = load(runtime, cache, validate=False)
    except (ValueError, OSError) as error:
        # The file a read-time error must name is pinned by
        # test_read_time_record_errors_name_the_shard.
        assert_names_cache_and_file(error, cache, f"{what} (validate_cache=False)")
    else:
        assert_original(samples, f"{what} (validate_cache=False)", stated_cache_id(cache))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_single_byte_flip_of_every_file_is_an_error_or_changes_nothing(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
) -> None:
    # Exhaustive over positions, with default settings (the hypothesis test
    # above draws the flipped bits too): never different bytes returned as data.
    cache = fresh_copy(pristine[kind], tmp_path_factory)
    flips = errors = 0
    for file in files_of(cache):
        path = cache / file
        original = path.read_bytes()
        for position in range(len(original)):
            corrupted = bytearray(original)
            corrupted[position] ^= 0x01
            path.write_bytes(bytes(corrupted))
            what = f"{kind} cache, {file} byte {position} ^ 0x01"
            try:
                samples = load(runtime, cache, validate=False)
            except (ValueError, OSError) as error:
                assert_names_cache_and_file(error, cache, what)
                errors += 1
            else:
                assert_original(samples, what, stated_cache_id(cache))
            flips += 1
        path.write_bytes(original)
    # Every flip in a shard, index.bin or records.crc32c is an error; the rest
    # (manifest layout, metadata.arrow padding) may be harmless.
    assert errors >= sum(
        (cache / f).stat().st_size
        for f in files_of(cache)
        if f.startswith("shards/") or f in ("index.bin", "records.crc32c")
    ), f"{errors} errors in {flips} flips"


# ---- deterministic damage ----------------------------------------------------------------


def expect_failure(
    runtime: DatasetRuntime, cache: Path, what: str, file: str | None, validate: bool = False
) -> str:
    with pytest.raises((ValueError, OSError)) as raised:
        load(runtime, cache, validate)
    assert_names_cache_and_file(raised.value, cache, what, file)
    return str(raised.value)


@pytest.mark.parametrize("algo", ALGOS)
def test_every_file_truncated_to_any_shorter_length_is_detected(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    algo: str,
) -> None:
    source = pristine[algo]
    for file in files_of(source):
        content = (source / file).read_bytes()
        meaningful = len(content.rstrip()) if file == "manifest.json" else len(content)
        for length in sorted(
            {0, 1, 8, 23, meaningful // 2, meaningful - 1} & set(range(meaningful))
        ):
            cache = fresh_copy(source, tmp_path_factory)
            (cache / file).write_bytes(content[:length])
            expect_failure(runtime, cache, f"{algo}: {file} truncated to {length} bytes", file)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(
    "file",
    ["manifest.json", "index.bin", "metadata.arrow", "shards/000000.bin", "shards/000002.bin"],
)
def test_a_missing_file_is_detected_naming_it(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    algo: str,
    file: str,
) -> None:
    cache = fresh_copy(pristine[algo], tmp_path_factory)
    (cache / file).unlink()
    for validate in (False, True):
        expect_failure(runtime, cache, f"{algo}: {file} missing", file, validate)


def test_a_missing_shards_directory_is_detected(
    runtime: DatasetRuntime, pristine: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    shutil.rmtree(cache / "shards")
    expect_failure(runtime, cache, "shards/ missing", "shard")


def test_a_missing_cache_directory_is_an_error_naming_it(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    expect_failure(runtime, tmp_path / "nowhere", "missing cache directory", None)


def first_record_of_shard(cache: Path, shard_id: int) -> tuple[int, int, int]:
    """(sample_id, offset, record_len) of the first record stored in shard `shard_id`."""
    index = (cache / "index.bin").read_bytes()
    for sample_id, (row_shard, offset, record_len) in enumerate(cache_reference.index_rows(index)):
        if row_shard == shard_id:
            return sample_id, offset, record_len
    raise AssertionError(f"no record in shard {shard_id}")


@pytest.mark.parametrize(
    ("algo", "damage"),
    [
        ("none", "meta_len"),
        ("lz4", "meta_len"),
        ("lz4", "lz4_prefix"),
        ("lz4", "lz4_prefix_huge"),
        ("lz4", "lz4_block"),
    ],
)
@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "no_checksums"])
def test_read_time_record_errors_name_the_shard(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    algo: str,
    damage: str,
    checksums: bool,
) -> None:
    cache = fresh_copy(pristine[algo], tmp_path_factory)
    if not checksums:
        # As dataset-rt writes it: the record's own checks must catch the damage.
        without_record_checksums(cache)
    sample_id, offset, record_len = first_record_of_shard(cache, 2)
    shard = cache / "shards" / "000002.bin"
    original = shard.read_bytes()
    data = bytearray(original)
    prefix_at = cache_reference.stored_offset(original, offset)
    if damage == "meta_len":
        cache_reference.set_record_meta_len(data, offset, record_len)  # longer than the record
    elif damage == "lz4_prefix":
        cache_reference.set_lz4_size(
            data, prefix_at, cache_reference.lz4_size(original, prefix_at) + 1
        )
    elif damage == "lz4_prefix_huge":
        # Refused from the block's length alone, not after allocating 4 GiB to decode into.
        cache_reference.set_lz4_size(data, prefix_at, 0xFFFFFFFF)
    else:
        block_at = prefix_at + cache_reference.LZ4_SIZE_BYTES
        data[block_at] = 0xF0  # token claiming 15+ literals, then garbage
        data[block_at + 1] = 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError) as raised:
        load(runtime, cache, validate=False)
    message = str(raised.value)
    assert str(cache) in message, f"{damage}: error does not name the cache: {message!r}"
    assert f"sample {sample_id}" in message, (
        f"{damage}: error does not name sample {sample_id}: {message!r}"
    )
    assert "000002.bin" in message or "shard 2" in message, (
        f"{damage}: error does not name the shard file: {message!r}"
    )
    if checksums:
        assert "record checksum mismatch" in message, message
    elif damage == "lz4_prefix_huge":
        assert "claims 4294967295 decoded bytes, impossible" in message, message


@pytest.mark.parametrize("version", [4, 1, 0, "2", 2.5, None])
def test_a_manifest_of_another_format_version_is_refused_naming_the_version(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    version: object,
) -> None:
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    manifest = cache_reference.read_manifest(cache)
    manifest["format_version"] = version
    cache_reference.write_manifest(cache, manifest)
    message = expect_failure(runtime, cache, f"format_version {version!r}", "manifest.json")
    assert "version" in message, (
        f"format_version {version!r}: message does not mention the version: {message!r}"
    )
    if version == 4:
        assert "4" in message, f"message does not say which version was found: {message!r}"


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("shard", ["000000.bin", "000002.bin"])
def test_a_garbage_byte_appended_to_a_shard_is_detected_naming_the_shard(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    algo: str,
    shard: str,
) -> None:
    cache = fresh_copy(pristine[algo], tmp_path_factory)
    with open(cache / "shards" / shard, "ab") as handle:
        handle.write(b"\x00")
    for validate in (False, True):
        expect_failure(runtime, cache, f"{algo}: byte appended to {shard}", shard, validate)


def test_an_unlisted_extra_shard_does_not_change_what_is_read(
    runtime: DatasetRuntime, pristine: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    (cache / "shards" / "999999.bin").write_bytes(b"garbage")
    assert_original(load(runtime, cache, validate=True), "unlisted extra shard")


@pytest.mark.parametrize("delta", [-1, 1])
def test_an_index_record_length_off_by_one_is_detected_without_validation(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    delta: int,
) -> None:
    # Row 0's record is followed by row 1's in the same shard: a longer length stays inside it.
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    original = (cache / "index.bin").read_bytes()
    index = bytearray(original)
    shard_id, offset, record_len = cache_reference.index_row(original, 0)
    assert cache_reference.index_row(original, 1)[0] == shard_id, (
        "rows 0 and 1 should share a shard"
    )
    cache_reference.set_index_row(index, 0, shard_id, offset, record_len + delta)
    (cache / "index.bin").write_bytes(bytes(index))
    try:
        samples = load(runtime, cache, validate=False)
    except (ValueError, OSError) as error:
        assert_names_cache_and_file(error, cache, f"record_len {delta:+d}", "")
    else:
        assert_original(samples, f"index row 0 record_len {delta:+d} (validate_cache=False)")


def test_swapped_index_rows_are_detected_by_the_embedded_metadata_check(
    runtime: DatasetRuntime, pristine: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    original = (cache / "index.bin").read_bytes()
    index = bytearray(original)
    first, second = cache_reference.index_row(original, 0), cache_reference.index_row(original, 1)
    cache_reference.set_index_row(index, 0, *second)
    cache_reference.set_index_row(index, 1, *first)
    (cache / "index.bin").write_bytes(bytes(index))
    expect_failure(runtime, cache, "index rows 0 and 1 swapped", "")


def test_a_metadata_table_from_another_cache_with_the_same_schema_is_detected(
    runtime: DatasetRuntime, pristine: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    other_base = tmp_path_factory.mktemp("other")
    shuffled = [
        (payload, {**metadata, "i": i + 100}) for i, (payload, metadata) in enumerate(SAMPLES)
    ]
    results = runtime.write_cache(
        ListSource("c", shuffled), other_base, writer_config=WriterConfig(show_progress=False)
    )
    assert isinstance(results[0], CacheWriteSuccess), f"write failed: {results}"
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    shutil.copyfile(other_base / "c" / "metadata.arrow", cache / "metadata.arrow")
    expect_failure(
        runtime, cache, "foreign metadata.arrow (validate_cache=False)", "metadata.arrow"
    )
    expect_failure(
        runtime,
        cache,
        "foreign metadata.arrow (validate_cache=True)",
        "metadata.arrow",
        validate=True,
    )


@pytest.mark.parametrize("algo", ALGOS)
def test_a_wrong_uncompressed_byte_len_is_detected_with_validation(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    algo: str,
) -> None:
    cache = fresh_copy(pristine[algo], tmp_path_factory)
    manifest = cache_reference.read_manifest(cache)
    manifest["shards"][0]["uncompressed_byte_len"] += 1
    cache_reference.write_manifest(cache, manifest)
    expect_failure(
        runtime,
        cache,
        f"{algo}: uncompressed_byte_len + 1 (validate_cache=True)",
        "",
        validate=True,
    )


@pytest.mark.parametrize(
    "key",
    [
        "sample_count",
        "metadata_schema",
        "shards",
        "metadata_sha256",
        "index_sha256",
        "format_version",
    ],
)
def test_a_manifest_missing_a_field_is_refused_naming_it(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    key: str,
) -> None:
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    manifest = cache_reference.read_manifest(cache)
    del manifest[key]
    cache_reference.write_manifest(cache, manifest, indent=None)
    message = expect_failure(runtime, cache, f"manifest without {key}", "manifest.json")
    assert key in message, f"manifest without {key}: message does not name the field: {message!r}"


def test_a_source_name_with_a_nul_byte_is_shown_escaped(
    runtime: DatasetRuntime, pristine: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Unescaped, the NUL would end the C string that carries the message.
    cache = fresh_copy(pristine["none"], tmp_path_factory)
    manifest = cache_reference.read_manifest(cache)
    manifest["source_name"] = "a\x00b"
    cache_reference.write_manifest(cache, manifest, indent=None)
    message = expect_failure(runtime, cache, "source_name with a NUL byte", "manifest.json")
    assert "not 'a\\x00b'" in message, message


def test_a_record_mismatch_on_a_very_long_key_still_says_what_differs(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # A message holds about 1 KiB: the key is cut, not the reason after it.
    key = "k" * 3000
    config = WriterConfig(show_progress=False)
    [result] = runtime.write_cache(
        ListSource("long", [(b"payload", {key: 12345})]), tmp_path, writer_config=config
    )
    assert isinstance(result, CacheWriteSuccess), result
    without_record_checksums(result.path)  # else the checksum catches it first
    shard = result.path / "shards" / "000000.bin"
    data = shard.read_bytes()
    shard.write_bytes(data.replace(b"12345", b"12346"))
    with pytest.raises(ValueError) as raised:
        load(runtime, result.path, validate=False)
    message = str(raised.value)
    cut_key = "k" * 200 + "..."
    assert f"does not match metadata.arrow: field '{cut_key}': " in message, message[-300:]
    assert "12346" in message and "12345" in message, message[-300:]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace('  "cache_id": ', '  "cache_idx": '), "'cache_id' is missing"),
        (
            lambda text: re.sub(r'"cache_id": \d+', '"cache_id": 9223372036854775808', text),
            "'cache_id' is 9223372036854775808; a cache_id must be below 2^63",
        ),
        (
            lambda text: re.sub(r'"cache_id": \d+', '"cache_id": -1', text),
            "'cache_id' must be a non-negative integer",
        ),
    ],
    ids=["missing", "2^63", "negative"],
)
def test_a_format_3_manifest_without_a_valid_cache_id_is_refused_naming_it(
    runtime: DatasetRuntime,
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    edit: Any,
    message: str,
) -> None:
    cache = fresh_copy(pristine["v3"], tmp_path_factory)
    text = (cache / "manifest.json").read_text()
    (cache / "manifest.json").write_text(edit(text))
    refused = expect_failure(runtime, cache, "format 3 cache_id", "manifest.json")
    assert f"manifest field {message}" in refused, refused
