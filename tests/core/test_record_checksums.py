"""Per-record checksums (records.crc32c): every read path checks each record's
stored bytes before anything reaches Python, and a mismatch names the cache,
the shard, the sample and the record's offset."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import cache_reference
import pytest

from conftest import ListSource, crc32c, record, without_record_checksums, written_paths
from dataset_rt import (
    CachedDataset,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

PIECE = 256 * 1024  # deferred payloads are read in pieces of this size (deferred_reads.zig)
# Read whole in a run of records; deferred in one piece; deferred in several pieces.
SIZES = {"small": 100, "deferred": 70 * 1024, "pieces": 3 * PIECE + 17}


def payload(i: int, size: int) -> bytes:
    return bytes((i * 7 + k) % 251 for k in range(size))


def write(
    runtime: DatasetRuntime,
    base: Path,
    size: int,
    algo: Literal["none", "lz4"] = "none",
    count: int = 6,
) -> Path:
    samples = [(payload(i, size), {"i": i}) for i in range(count)]
    config = WriterConfig(
        show_progress=False, shard_compression=ShardCompression(algo=algo, ratio=1.0)
    )
    [path] = written_paths(
        runtime.write_cache(ListSource("c", samples), base, writer_config=config)
    )
    return path


def record_of(cache: Path, sample_id: int) -> tuple[Path, int, int, int]:
    """(shard path, record offset, record length, offset of the stored payload)."""
    shard, offset, record_len = record(cache, sample_id)
    with shard.open("rb") as file:
        file.seek(offset)
        header = file.read(cache_reference.RECORD_HEADER_BYTES)
    meta_len = cache_reference.record_meta_len(header)
    return shard, offset, record_len, offset + cache_reference.RECORD_HEADER_BYTES + meta_len


def flip_payload_byte(cache: Path, sample_id: int, from_end: int = 1) -> int:
    """Flips one byte of the sample's stored payload; returns the record's offset."""
    shard, offset, record_len, _ = record_of(cache, sample_id)
    data = bytearray(shard.read_bytes())
    data[offset + record_len - from_end] ^= 0x10
    shard.write_bytes(bytes(data))
    return offset


def open_dataset(runtime: DatasetRuntime, cache: Path, **config: Any) -> CachedDataset:
    return runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(**({"seed": 3, "shuffle": False} | config))
    )


def assert_names_the_record(message: str, cache: Path, sample_id: int, offset: int) -> None:
    assert "record checksum mismatch" in message, message
    assert str(cache) in message, message
    assert f"sample {sample_id} at offset {offset}" in message, message
    assert "shards/000000.bin" in message or "shards/0000" in message, message


def test_the_writer_stores_the_crc32c_of_every_record(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    for algo in ("none", "lz4"):
        cache = write(runtime, tmp_path / algo, SIZES["deferred"], algo)
        stored = (cache / "records.crc32c").read_bytes()
        for sample_id in range(6):
            shard, offset, record_len, _ = record_of(cache, sample_id)
            record = shard.read_bytes()[offset : offset + record_len]
            assert cache_reference.record_checksum(stored, sample_id) == crc32c(record), (
                f"{algo}: sample {sample_id}"
            )


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("how", ["ordered", "shuffled", "get", "get_many", "no_deferral"])
def test_a_flipped_payload_byte_fails_every_read_path(
    runtime: DatasetRuntime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    size: str,
    how: str,
) -> None:
    cache = write(runtime, tmp_path, SIZES[size])
    bad = 3
    offset = flip_payload_byte(cache, bad)
    if how == "no_deferral":
        # Large payloads then go through the batch path, read straight into it.
        monkeypatch.setattr("dataset_rt._binding.native.DEFER_DEFAULT", 0)
    ds = open_dataset(runtime, cache, shuffle=how == "shuffled")
    good = ds.get(0, bad - 1)
    assert good.data == payload(bad - 1, SIZES[size])
    with pytest.raises(ValueError) as raised:
        if how == "get":
            ds.get(0, bad)
        elif how == "get_many":
            ds.get_many([(0, 1), (0, bad), (0, 5)])
        else:
            list(ds)
    assert_names_the_record(str(raised.value), cache, bad, offset)


def test_an_ordered_pass_hands_out_only_good_samples_before_the_error(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, SIZES["pieces"])
    flip_payload_byte(cache, 4, from_end=PIECE + 5)  # inside a middle piece
    received = []
    with pytest.raises(ValueError, match="sample 4 .*record checksum mismatch"):
        for sample in open_dataset(runtime, cache):
            received.append(
                (sample.sample_id, sample.data == payload(sample.sample_id, SIZES["pieces"]))
            )
    # Samples come a batch at a time: those before the corrupt one in its batch
    # are not handed out either, and nothing after it is.
    assert received == [(i, True) for i in range(len(received))] and len(received) <= 4


def test_lz4_records_are_checked_before_they_are_decoded(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, SIZES["small"], "lz4")
    offset = flip_payload_byte(cache, 2)
    with pytest.raises(ValueError) as raised:
        list(open_dataset(runtime, cache))
    assert_names_the_record(str(raised.value), cache, 2, offset)


def test_a_damaged_checksum_file_fails_the_read_of_its_record(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, SIZES["small"])
    checksums = bytearray((cache / "records.crc32c").read_bytes())
    checksums[4 * 5] ^= 0x01
    (cache / "records.crc32c").write_bytes(bytes(checksums))
    ds = open_dataset(runtime, cache)
    assert [s.sample_id for s in ds.get_many([(0, i) for i in range(5)])] == list(range(5))
    with pytest.raises(ValueError, match="sample 5 .*record checksum mismatch"):
        ds.get(0, 5)
    with pytest.raises(ValueError, match="records.crc32c: SHA-256 does not match"):
        open_dataset(runtime, cache, validate_cache=True)


def test_a_checksum_file_of_the_wrong_length_is_refused_at_open(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, SIZES["small"])
    (cache / "records.crc32c").write_bytes((cache / "records.crc32c").read_bytes()[:-1])
    with pytest.raises(ValueError, match=r"records.crc32c has 23 bytes, expected 24"):
        open_dataset(runtime, cache)
    (cache / "records.crc32c").unlink()
    with pytest.raises(ValueError, match="cannot open records.crc32c"):
        open_dataset(runtime, cache)


def test_without_checksums_payloads_are_unchecked_unless_validate_cache(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # A cache as dataset-rt writes it: the documented gap that validate_cache closes.
    cache = write(runtime, tmp_path, SIZES["small"])
    without_record_checksums(cache)
    flip_payload_byte(cache, 1)
    samples = list(open_dataset(runtime, cache))
    assert samples[1].data != payload(1, SIZES["small"])
    assert [s.data for s in samples[2:]] == [payload(i, SIZES["small"]) for i in range(2, 6)]
    with pytest.raises(ValueError, match="SHA-256 does not match"):
        open_dataset(runtime, cache, validate_cache=True)
