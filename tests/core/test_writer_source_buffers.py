"""A source may reuse one dict or one buffer for every sample: each sample is stored
as it was when yielded, never as the object looked later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from conftest import QUIET
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, MetadataValue, ReaderConfig


class ReusingSource:
    name = "reusing"

    def __iter__(self) -> Iterator[CacheInput]:
        metadata: dict[str, MetadataValue] = {}
        buffer = bytearray(4)
        for i in range(1000):
            metadata["index"] = i
            buffer[:] = i.to_bytes(4, "little")
            yield CacheInput(buffer if i % 2 else memoryview(buffer), metadata)


def test_reused_metadata_dict_and_payload_buffer_are_copied_at_yield(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    [result] = runtime.write_cache(ReusingSource(), tmp_path, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset(
        [result.path], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    for sample in dataset:
        i = sample.sample_id
        assert sample.metadata == {"index": i}, f"sample {i} carries another sample's metadata"
        assert sample.data == i.to_bytes(4, "little"), (
            f"sample {i} carries another sample's payload"
        )
