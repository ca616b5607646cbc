"""`ReaderConfig(on_corrupt="skip")`: a corrupt record is left out of the stream,
counted, warned about once per cache, and the stream and its resume states are
otherwise exactly those of a sound cache."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Literal

import pytest

from conftest import ListSource, record
from dataset_rt import (
    CachedDataset,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

COUNT = 40
# Batch-path payloads, and ones large enough to be read on their own with "raise".
SIZES = {"small": 64, "large": 70 * 1024}

Algo = Literal["none", "lz4"]


def payload(i: int, size: int) -> bytes:
    return bytes((i * 13 + k) % 253 for k in range(size))


def write(runtime: DatasetRuntime, base: Path, name: str, size: int, algo: Algo = "none") -> Path:
    samples = [(payload(i, size), {"i": i}) for i in range(COUNT)]
    config = WriterConfig(
        show_progress=False, shard_compression=ShardCompression(algo=algo, ratio=1.0)
    )
    [result] = runtime.write_cache(ListSource(name, samples), base, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path


def corrupt(cache: Path, sample_id: int) -> None:
    """Flip the last byte of the sample's record (its payload)."""
    shard, offset, record_len = record(cache, sample_id)
    data = bytearray(shard.read_bytes())
    data[offset + record_len - 1] ^= 0x80
    shard.write_bytes(bytes(data))


def open_dataset(
    runtime: DatasetRuntime,
    paths: list[Path],
    on_corrupt: Literal["raise", "skip"],
    *,
    shuffle: bool = False,
    replacement: bool = True,
) -> CachedDataset:
    config = ReaderConfig(
        seed=5,
        shuffle=shuffle,
        replacement=replacement,
        on_corrupt=on_corrupt,
        prefetch_size=8,
    )
    return runtime.cached_dataset(paths, reader_config=config)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_skip_leaves_out_exactly_the_corrupt_samples_and_warns_once(
    runtime: DatasetRuntime, tmp_path: Path, size: str, algo: Algo
) -> None:
    cache = write(runtime, tmp_path, "c", SIZES[size], algo)
    for sample_id in (0, 3, 7, 8, COUNT - 1):
        corrupt(cache, sample_id)
    ds = open_dataset(runtime, [cache], "skip")
    iterator = iter(ds)
    with pytest.warns(RuntimeWarning, match=r"skipped corrupt sample \(cache_id=0, sample_id=0\)"):
        samples = list(iterator)
    good = [i for i in range(COUNT) if i not in (0, 3, 7, 8, COUNT - 1)]
    assert [s.sample_id for s in samples] == good
    assert all(s.data == payload(s.sample_id, SIZES[size]) for s in samples)
    assert [dict(s.metadata) for s in samples] == [{"i": i} for i in good]
    assert iterator.skipped == [(0, 0), (0, 3), (0, 7), (0, 8), (0, COUNT - 1)]
    assert iterator.consumed() == COUNT  # positions, skipped ones included
    # The next epoch skips the same samples, without a second warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = iter(ds)
        assert [s.sample_id for s in again] == good
    assert again.skipped == iterator.skipped
    # "raise" (the default) fails on the first one.
    with pytest.raises(ValueError, match="sample 0 .*record checksum mismatch"):
        list(open_dataset(runtime, [cache], "raise"))


def test_a_shuffled_skipping_stream_is_the_sound_stream_without_the_corrupt_samples(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sound = write(runtime, tmp_path / "a", "c", SIZES["small"])
    damaged = tmp_path / "b" / "c"
    shutil.copytree(sound, damaged)
    bad = {2, 11, 30}
    for sample_id in bad:
        corrupt(damaged, sample_id)
    for replacement in (True, False):
        expected = [
            s.sample_id
            for s in open_dataset(runtime, [sound], "skip", shuffle=True, replacement=replacement)
        ]
        with pytest.warns(RuntimeWarning):
            got = [
                s.sample_id
                for s in open_dataset(
                    runtime, [damaged], "skip", shuffle=True, replacement=replacement
                )
            ]
        assert got == [i for i in expected if i not in bad]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_states_taken_around_skipped_samples_resume_exactly(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, "c", SIZES["small"])
    for sample_id in (5, 6, 9, 16, 24):  # a run, and holes at batch edges (prefetch 8)
        corrupt(cache, sample_id)
    whole = [s.sample_id for s in open_dataset(runtime, [cache], "skip", shuffle=True)]
    # (After the last sample a state is the next epoch's start.)
    for taken in range(len(whole)):
        ds = open_dataset(runtime, [cache], "skip", shuffle=True)
        iterator = iter(ds)
        first = [next(iterator).sample_id for _ in range(taken)]
        state = iterator.state_dict()
        iterator.close()
        resumed = open_dataset(runtime, [cache], "skip", shuffle=True)
        resumed.load_state_dict(state)
        rest = [s.sample_id for s in resumed]
        assert first + rest == whole, f"resumed after {taken} samples"


def test_each_cache_is_warned_about_once(runtime: DatasetRuntime, tmp_path: Path) -> None:
    first = write(runtime, tmp_path, "first", SIZES["small"])
    second = write(runtime, tmp_path, "second", SIZES["small"])
    corrupt(first, 1)
    corrupt(first, 2)
    corrupt(second, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iterator = iter(open_dataset(runtime, [first, second], "skip"))
        assert len(list(iterator)) == 2 * COUNT - 3
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert "cache_id=0, sample_id=1" in messages[0] and str(first) in messages[0]
    assert "cache_id=1, sample_id=4" in messages[1] and str(second) in messages[1]
    assert iterator.skipped == [(0, 1), (0, 2), (1, 4)]


def test_reads_by_identity_still_raise(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path, "c", SIZES["small"])
    corrupt(cache, 3)
    ds = open_dataset(runtime, [cache], "skip")
    assert ds.get(0, 2).sample_id == 2
    with pytest.raises(ValueError, match="record checksum mismatch"):
        ds.get(0, 3)
    with pytest.raises(ValueError, match="record checksum mismatch"):
        ds.get_many([(0, 1), (0, 3)])


def test_on_corrupt_takes_only_the_two_policies() -> None:
    with pytest.raises(ValueError, match="on_corrupt"):
        ReaderConfig(seed=0, on_corrupt="ignore")  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_workers_skip_the_same_samples(
    runtime: DatasetRuntime, tmp_path: Path, num_workers: int
) -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    cache = write(runtime, tmp_path, "c", SIZES["small"])
    for sample_id in (4, 13, 14):
        corrupt(cache, sample_id)
    adapter = open_dataset(runtime, [cache], "skip").to_torch_iterable_dataset()
    context = {"multiprocessing_context": "fork"} if num_workers else {}
    loader = torch_data.DataLoader(adapter, batch_size=None, num_workers=num_workers, **context)
    ids = sorted(sample.sample_id for sample in loader)
    assert ids == [i for i in range(COUNT) if i not in (4, 13, 14)]
