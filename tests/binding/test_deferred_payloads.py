"""Large uncompressed payloads are deferred: the core verifies their records
ahead, and reads each payload from its file straight into the bytes object the
binding hands out (one copy) when its sample is reached."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import cache_reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ListSource, without_record_checksums
from dataset_rt import (
    CacheInput,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

# The core's threshold for DRT_DEFER_DEFAULT (dataset_rt.h), which the binding passes.
THRESHOLD = 64 * 1024
# Around the threshold, far below and far above it, and empty.
SIZES = [0, 7, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, 3 * THRESHOLD + 5, 1 << 20, 100]


def payload(i: int, size: int) -> bytes:
    return (i.to_bytes(4, "little") + os.urandom(4)) * (size // 8) + bytes(size % 8)


def write(
    runtime: DatasetRuntime,
    base: Path,
    sizes: list[int],
    algo: Literal["none", "lz4"] = "none",
    max_shard_bytes: int = 64 << 20,
) -> tuple[Path, list[bytes]]:
    payloads = [payload(i, size) for i, size in enumerate(sizes)]
    samples = [(data, {"i": i, "size": len(data)}) for i, data in enumerate(payloads)]
    config = WriterConfig(
        show_progress=False,
        shard_compression=ShardCompression(algo=algo),
        max_shard_bytes=max_shard_bytes,
    )
    [result] = runtime.write_cache(ListSource("big", samples), base, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path, payloads


@pytest.fixture(scope="module")
def mixed_cache(
    tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime
) -> tuple[Path, list[bytes]]:
    return write(runtime, tmp_path_factory.mktemp("deferred"), SIZES * 3)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("prefetch", [1, 3, 64])
@pytest.mark.parametrize("shuffle", [False, True])
def test_mixed_sizes_read_back_exactly(
    mixed_cache: tuple[Path, list[bytes]], workers: int, prefetch: int, shuffle: bool
) -> None:
    path, payloads = mixed_cache
    runtime = DatasetRuntime(num_workers=workers)
    config = ReaderConfig(shuffle=shuffle, seed=3, prefetch_size=prefetch)
    ds = runtime.cached_dataset([path], reader_config=config)
    seen = list(ds)
    assert len(seen) == len(payloads)
    for sample in seen:
        assert type(sample.data) is bytes
        assert sample.data == payloads[sample.sample_id]
        assert sample.metadata["i"] == sample.sample_id
        assert sample.metadata["size"] == len(sample.data)
        # The object is an ordinary bytes: its hash is that of an equal copy.
        assert hash(sample.data) == hash(bytes(bytearray(sample.data)))
    if not shuffle:
        assert [s.sample_id for s in seen] == list(range(len(payloads)))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sizes=st.lists(st.sampled_from(SIZES + [2 * THRESHOLD, 5]), min_size=1, max_size=12))
def test_any_mix_of_sizes_round_trips(
    runtime: DatasetRuntime, tmp_path_factory: pytest.TempPathFactory, sizes: list[int]
) -> None:
    path, payloads = write(runtime, tmp_path_factory.mktemp("mix"), sizes)
    ds = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=2)
    )
    assert [s.data for s in ds] == payloads


@pytest.mark.parametrize("max_shard_bytes", [1, 200_000, 64 << 20])
def test_payloads_written_from_the_pushed_memory_frame_and_hash_like_copied_ones(
    runtime: DatasetRuntime, tmp_path: Path, max_shard_bytes: int
) -> None:
    # Large uncompressed payloads go to the shard from the pushed memory, next to
    # their framed heads; small ones are framed with them. Checked against the
    # byte format itself (SPEC): index rows, record framing, shard SHA-256s.
    sizes = SIZES * 2 + [THRESHOLD * 2] * 4
    path, payloads = write(runtime, tmp_path, sizes, max_shard_bytes=max_shard_bytes)
    manifest = cache_reference.read_manifest(path)
    shards = [(path / "shards" / shard["name"]).read_bytes() for shard in manifest["shards"]]
    for shard, entry in zip(shards, manifest["shards"], strict=True):
        assert hashlib.sha256(shard).hexdigest() == entry["sha256"]
        assert len(shard) == entry["byte_len"]
    index = (path / "index.bin").read_bytes()
    expected_offsets = [0] * len(shards)
    for sample_id, data in enumerate(payloads):
        shard_id, offset, record_len = cache_reference.index_row(index, sample_id)
        assert offset == expected_offsets[shard_id], f"sample {sample_id} is not back to back"
        expected_offsets[shard_id] += record_len
        record = shards[shard_id][offset : offset + record_len]
        metadata = json.loads(cache_reference.record_json(record))
        assert metadata == {"i": sample_id, "size": len(data)}
        assert cache_reference.record_stored(record) == data, f"sample {sample_id}: payload differs"
    assert expected_offsets == [len(shard) for shard in shards]
    if max_shard_bytes == 1:
        assert len(shards) == len(payloads)  # one record per shard
    ds = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    assert [s.data for s in ds] == payloads


def test_compressed_large_payloads_are_read_whole(runtime: DatasetRuntime, tmp_path: Path) -> None:
    path, payloads = write(runtime, tmp_path, SIZES, algo="lz4")
    ds = runtime.cached_dataset([path], reader_config=ReaderConfig(seed=0, shuffle=False))
    assert [s.data for s in ds] == payloads


def test_read_ahead_holds_only_metadata_of_deferred_samples(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    path, _ = write(runtime, tmp_path, [1 << 20] * 40)
    ds = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=16)
    )
    iterator = iter(ds)
    next(iterator)
    held = iterator.bytes_held()
    assert held < 40 * 64, f"{held} bytes held: payloads were read into the batches"
    assert sum(len(s.data) for s in iterator) == 39 << 20


# A 1 MiB payload is read in 256 KiB pieces by several threads at once: cut
# in the last piece, or so that later pieces start past the end.
@pytest.mark.parametrize(
    ("size", "cut"), [(THRESHOLD * 2, 10), (1 << 20, 10), (1 << 20, 700 * 1024)]
)
def test_a_shard_shortened_after_open_fails_naming_shard_and_sample(
    runtime: DatasetRuntime, tmp_path: Path, size: int, cut: int
) -> None:
    path, _ = write(runtime, tmp_path, [size] * 6)
    ds = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=1)
    )
    shard = path / "shards" / "000000.bin"
    size_on_disk = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(size_on_disk - cut)  # cuts the last sample's payload only
    got = []
    with pytest.raises(ValueError) as raised:
        for sample in ds:
            got.append(sample.sample_id)
    assert got == [0, 1, 2, 3, 4]
    message = str(raised.value)
    assert str(path) in message and "000000.bin" in message and "sample 5" in message, message


@pytest.mark.parametrize("how", ["close", "del"])
def test_leaving_a_deferred_batch_midway_is_safe(
    runtime: DatasetRuntime, tmp_path: Path, how: str
) -> None:
    path, payloads = write(runtime, tmp_path, [THRESHOLD] * 30)
    ds = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, prefetch_size=8)
    )
    ds.set_epoch_len(5)
    for epoch in range(20):
        iterator = iter(ds)
        first = next(iterator)
        assert first.sample_id == epoch * 5 % 30
        assert first.data == payloads[first.sample_id]
        if how == "close":
            iterator.close()
            # The rest of the batch already handed to Python may still come
            # out, complete (its payloads were read with it); nothing more.
            rest = list(iterator)
            assert len(rest) <= 4
            assert [s.sample_id for s in rest] == [
                (epoch * 5 + k) % 30 for k in range(1, len(rest) + 1)
            ]
            assert [s.data for s in rest] == [payloads[s.sample_id] for s in rest]
        del iterator
        gc.collect()
    # The stream continues after the 20 abandoned epochs of 5.
    ds.set_epoch_len(3)
    assert [s.data for s in ds] == [payloads[i] for i in (10, 11, 12)]


class LargeSource:
    """Large payloads as bytes, reused bytearrays and memoryviews; optionally fails midway."""

    name = "large"

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count = count
        self.fail_at = fail_at

    def __iter__(self) -> Iterator[CacheInput]:
        reused = bytearray(THRESHOLD * 2)
        for i in range(self.count):
            if i == self.fail_at:
                raise RuntimeError(f"source broke at {i}")
            data = self.payload(i)
            if i % 3 == 1:
                reused[:] = data
                yield CacheInput(reused, {"i": i})  # edited again after the yield
            elif i % 3 == 2:
                yield CacheInput(memoryview(data), {"i": i})
            else:
                yield CacheInput(data, {"i": i})

    @staticmethod
    def payload(i: int) -> bytes:
        return i.to_bytes(4, "little") + bytes([i % 251]) * (THRESHOLD * 2 - 4)


def test_large_payloads_are_written_without_copies_and_read_back(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    source = LargeSource(200)  # several batches of borrowed payloads in flight
    [result] = runtime.write_cache(
        source, tmp_path, writer_config=WriterConfig(show_progress=False)
    )
    assert isinstance(result, CacheWriteSuccess), result
    ds = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0, shuffle=False))
    got = [(s.metadata["i"], s.data) for s in ds]
    assert got == [(i, LargeSource.payload(i)) for i in range(200)]


def test_a_source_failing_with_borrowed_batches_in_flight_publishes_nothing(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    [result] = runtime.write_cache(
        LargeSource(300, fail_at=250), tmp_path, writer_config=WriterConfig(show_progress=False)
    )
    assert isinstance(result, CacheWriteError), result
    assert "source broke at 250" in result.message
    assert not (tmp_path / "large").exists()


@pytest.mark.parametrize("record_len", [0, 1, 5, 7])
def test_a_record_shorter_than_its_header_is_an_error_with_any_deferral_size(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_len: int
) -> None:
    # A C caller may defer payloads from 1 byte on; such a record is then read
    # by its head, which must not be taken for a whole header.
    path, _ = write(runtime, tmp_path, [3])
    without_record_checksums(path)  # the header check is what this is about
    shard = path / "shards" / "000000.bin"
    shard.write_bytes(shard.read_bytes()[:record_len])
    (path / "index.bin").write_bytes(cache_reference.encode_index_row(0, 0, record_len))
    manifest = cache_reference.read_manifest(path)
    manifest["shards"][0]["byte_len"] = manifest["shards"][0]["uncompressed_byte_len"] = record_len
    cache_reference.write_manifest(path, manifest, indent=None)
    monkeypatch.setattr("dataset_rt._binding.native.DEFER_DEFAULT", 1)
    ds = runtime.cached_dataset([path], reader_config=ReaderConfig(seed=0, shuffle=False))
    expected = f"record of {record_len} bytes is shorter than its 8-byte header"
    with pytest.raises(ValueError, match=expected):
        list(ds)
