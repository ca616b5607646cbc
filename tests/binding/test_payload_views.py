"""ReaderConfig(payload="memoryview"): payloads handed out as read-only views.

Large uncompressed payloads are views of their shard's mapping, checked in place
by the read-ahead workers; the others are views of a copy. Either way the bytes
are those written, in the same stream as with payload="bytes".
"""

from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import flip_last_byte_of_record, written_paths
from dataset_rt import (
    CacheInput,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

KIB = 1024
QUIET = WriterConfig(show_progress=False, max_shard_bytes=1 << 20)


def payload(i: int, length: int) -> bytes:
    return (i.to_bytes(4, "little") * (length // 4 + 1))[:length]


# Sizes on both sides of the core's 64 KiB deferral threshold.
SIZES = [0, 1, 100, 64 * KIB - 1, 64 * KIB, 64 * KIB + 1, 300 * KIB, 1100 * KIB]


class Sized:
    name = "sized"

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __iter__(self) -> Iterator[CacheInput]:
        for i, length in enumerate(self.sizes):
            yield CacheInput(payload(i, length), {"i": i})


Algo = Literal["none", "lz4"]


def write(runtime: DatasetRuntime, base: Path, sizes: list[int], algo: Algo = "none") -> Path:
    compression = ShardCompression(algo=algo, ratio=1.0 if algo == "none" else 2.0)
    config = QUIET.model_copy(update={"shard_compression": compression})
    [path] = written_paths(runtime.write_cache(Sized(sizes), base, writer_config=config))
    return path


def buffer_bytes(view: memoryview) -> int:
    """The size of the whole buffer `view` is a view of."""
    return memoryview(view.obj).nbytes


def shard_is_mapped(cache: Path) -> bool:
    shards = str(cache / "shards")
    with open("/proc/self/maps") as maps:
        return any(shards in line for line in maps)


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_views_hold_the_bytes_written_in_the_same_stream(
    runtime: DatasetRuntime, tmp_path: Path, shuffle: bool, algo: Algo
) -> None:
    sizes = SIZES * 3
    cache = write(runtime, tmp_path, sizes, algo)

    def stream(kind: Literal["bytes", "memoryview"]) -> list[tuple[int, bytes | memoryview]]:
        config = ReaderConfig(seed=3, shuffle=shuffle, payload=kind, prefetch_size=8)
        return [
            (s.sample_id, s.data) for s in runtime.cached_dataset([cache], reader_config=config)
        ]

    copies, views = stream("bytes"), stream("memoryview")
    assert [i for i, _ in views] == [i for i, _ in copies]
    for (sample_id, view), (_, copy) in zip(views, copies, strict=True):
        assert isinstance(copy, bytes)
        assert isinstance(view, memoryview) and view.readonly and view.format == "B"
        assert view == copy == payload(sample_id, sizes[sample_id])


def test_large_payloads_are_views_of_the_mapped_shard_and_outlive_the_dataset(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sizes = [200 * KIB] * 12 + [10] * 4
    cache = write(runtime, tmp_path, sizes)
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=False, payload="memoryview")
    )
    kept: dict[int, memoryview] = {}
    for sample in dataset:
        assert isinstance(sample.data, memoryview), type(sample.data)
        kept[sample.sample_id] = sample.data
    del sample
    assert shard_is_mapped(cache)
    # A view of the mapping is a slice of a buffer over the whole shard; a small
    # payload's is a view of its own copy.
    assert kept[0].obj is kept[1].obj and buffer_bytes(kept[0]) > 200 * KIB
    assert buffer_bytes(kept[12]) == 10
    del dataset
    gc.collect()
    # The dataset is gone; the views keep their shards mapped and readable.
    assert shard_is_mapped(cache)
    for sample_id, view in kept.items():
        assert zlib.crc32(view) == zlib.crc32(payload(sample_id, sizes[sample_id]))
    with pytest.raises(TypeError):
        kept[0][0] = 1
    del kept, view
    gc.collect()
    assert not shard_is_mapped(cache), "the last view is gone but the shard is still mapped"


def test_get_and_get_many_hand_out_views_too(runtime: DatasetRuntime, tmp_path: Path) -> None:
    sizes = [100 * KIB, 5, 70 * KIB]
    cache = write(runtime, tmp_path, sizes)
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, payload="memoryview")
    )
    sample = dataset.get(0, 2)
    assert isinstance(sample.data, memoryview) and sample.data == payload(2, 70 * KIB)
    many = dataset.get_many([(0, 0), (0, 1)])
    assert [bytes(s.data) for s in many] == [payload(0, 100 * KIB), payload(1, 5)]


def test_a_corrupt_mapped_payload_is_refused_before_it_is_handed_out(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, [300 * KIB] * 6)
    shard = flip_last_byte_of_record(cache, 4)
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=False, payload="memoryview")
    )
    seen = []
    with pytest.raises(ValueError, match=rf"{shard}: sample 4 at offset \d+: .*checksum"):
        for sample in dataset:
            seen.append(sample.sample_id)
    # The failing chunk's samples before 4 go with it: what was handed out is
    # a prefix of the stream that stops before sample 4.
    assert seen == list(range(len(seen))) and len(seen) < 4


def test_with_on_corrupt_skip_views_are_of_copies_and_the_corrupt_sample_is_left_out(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, [300 * KIB] * 6)
    flip_last_byte_of_record(cache, 2)
    config = ReaderConfig(seed=0, shuffle=False, payload="memoryview", on_corrupt="skip")
    dataset = runtime.cached_dataset([cache], reader_config=config)
    with pytest.warns(RuntimeWarning, match="skipped corrupt sample"):
        samples = list(dataset)
    assert [s.sample_id for s in samples] == [0, 1, 3, 4, 5]
    assert all(
        isinstance(s.data, memoryview) and s.data == payload(s.sample_id, 300 * KIB)
        for s in samples
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=12),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_views_equal_copies_for_any_sizes(
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    shuffle: bool,
    seed: int,
) -> None:
    cache = write(runtime, tmp_path_factory.mktemp("views"), sizes)
    config = ReaderConfig(seed=seed, shuffle=shuffle, prefetch_size=4)
    copies = [(s.sample_id, s.data) for s in runtime.cached_dataset([cache], reader_config=config)]
    views_config = config.model_copy(update={"payload": "memoryview"})
    views = [
        (s.sample_id, s.data) for s in runtime.cached_dataset([cache], reader_config=views_config)
    ]
    assert [(i, bytes(v)) for i, v in views] == copies
