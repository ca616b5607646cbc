"""A slow or stalled consumer keeps the reader's memory bounded (SPEC 6).

The cache is ~94 MiB; an iterator may hold only its prefetch window of it.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from conftest import QUIET, written_paths
from dataset_rt import CachedDataset, CacheInput, DatasetRuntime, ReaderConfig

# Below the size from which payloads are deferred (read later, straight into the
# bytes handed out, see test_deferred_payloads.py), so read-ahead holds them.
SAMPLE_BYTES = 48 * 1024
SAMPLES = 2000
CACHE_BYTES = SAMPLE_BYTES * SAMPLES
MIB = 1024 * 1024
# Far below the cache size, far above any prefetch window used here.
RSS_GROWTH_MAX = 32 * MIB


def payload(i: int) -> bytes:
    return i.to_bytes(8, "little") * (SAMPLE_BYTES // 8)


class BigSource:
    name = "big"

    def __iter__(self) -> Iterator[CacheInput]:
        for i in range(SAMPLES):
            yield CacheInput(payload(i), {"i": i})


def rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def window_bound(prefetch_size: int) -> int:
    """Prefetch window x sample size, with a factor 2 and one sample of slack for framing."""
    return 2 * prefetch_size * SAMPLE_BYTES + SAMPLE_BYTES


@pytest.fixture(scope="module")
def big_cache(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> Path:
    base = tmp_path_factory.mktemp("memory")
    [path] = written_paths(runtime.write_cache(BigSource(), base, writer_config=QUIET))
    return path


@pytest.fixture(scope="module")
def pool() -> DatasetRuntime:
    return DatasetRuntime(num_workers=2)


def load(
    pool: DatasetRuntime, path: Path, *, prefetch_size: int, shuffle: bool = False
) -> CachedDataset:
    return pool.cached_dataset(
        [path], reader_config=ReaderConfig(seed=1, prefetch_size=prefetch_size, shuffle=shuffle)
    )


class ReadAhead(Protocol):
    """An iterator over a dataset, as far as these tests watch its read-ahead."""

    def bytes_held(self) -> int: ...


def wait_for_read_ahead(iterator: ReadAhead, minimum: int = 1, timeout: float = 2.0) -> int:
    """Wait until the iterator holds at least `minimum` bytes read ahead; return what it holds."""
    deadline = time.monotonic() + timeout
    while iterator.bytes_held() < minimum and time.monotonic() < deadline:
        time.sleep(0.002)
    return iterator.bytes_held()


@pytest.mark.parametrize("prefetch_size", [1, 8])
@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_stalled_consumer_holds_only_the_prefetch_window(
    pool: DatasetRuntime, big_cache: Path, prefetch_size: int, shuffle: bool
) -> None:
    ds = load(pool, big_cache, prefetch_size=prefetch_size, shuffle=shuffle)
    gc.collect()
    before = rss()
    iterator = iter(ds)
    first = next(iterator)
    assert first.data == payload(first.sample_id)
    time.sleep(0.5)
    held = iterator.bytes_held()
    growth = rss() - before
    print(
        f"\nprefetch={prefetch_size} shuffle={shuffle}: held {held} B after stall, "
        f"RSS +{growth / MIB:.1f} MiB"
    )
    assert 0 < held <= window_bound(prefetch_size)
    assert growth < RSS_GROWTH_MAX

    # Consuming resumes the stream where it stopped, still within the window.
    held_max = held
    count = 1
    previous = first.sample_id
    for sample in iterator:
        count += 1
        if not shuffle:
            assert sample.sample_id == previous + 1
        previous = sample.sample_id
        if count % 97 == 0:
            assert sample.data == payload(sample.sample_id)
            held_max = max(held_max, iterator.bytes_held())
    assert count == SAMPLES
    assert held_max <= window_bound(prefetch_size)
    assert rss() - before < RSS_GROWTH_MAX


def test_several_stalled_iterators_are_each_bounded(pool: DatasetRuntime, big_cache: Path) -> None:
    ds = load(pool, big_cache, prefetch_size=8)
    gc.collect()
    before = rss()
    iterators = [iter(ds) for _ in range(4)]
    heads = [next(it).sample_id for it in iterators]
    assert heads == [0, 0, 0, 0]  # default epoch: the whole table, cursor wraps each time
    time.sleep(0.5)
    for it in iterators:
        assert it.bytes_held() <= window_bound(8)
    assert rss() - before < RSS_GROWTH_MAX
    for it in iterators:
        it.close()


def test_closed_iterator_holds_nothing_and_reads_no_more(
    pool: DatasetRuntime, big_cache: Path
) -> None:
    ds = load(pool, big_cache, prefetch_size=8)
    iterator = iter(ds)
    next(iterator)
    assert wait_for_read_ahead(iterator) > 0
    iterator.close()
    assert iterator.bytes_held() == 0
    iterator.close()  # idempotent
    # Samples already handed to Python may still come out; nothing more is read.
    rest = [s.sample_id for s in iterator]
    assert rest == list(range(1, 1 + len(rest)))
    assert len(rest) <= 8
    assert iterator.bytes_held() == 0


@pytest.mark.parametrize("how", ["close", "del"])
def test_abandoned_iterators_release_their_memory(
    pool: DatasetRuntime, big_cache: Path, how: str
) -> None:
    ds = load(pool, big_cache, prefetch_size=8)
    ds.set_epoch_len(SAMPLES)
    gc.collect()
    before = rss()
    abandoned = 200  # ~75 MiB if each kept its 8 x 48 KiB window
    held_total = 0
    for _ in range(abandoned):
        iterator = iter(ds)
        next(iterator)
        held_total += wait_for_read_ahead(iterator, minimum=4 * SAMPLE_BYTES, timeout=1.0)
        if how == "close":
            iterator.close()
        del iterator
    gc.collect()
    growth = rss() - before
    print(
        f"\n{abandoned} iterators abandoned by {how}: {held_total / MIB:.1f} MiB had been "
        f"read ahead, RSS +{growth / MIB:.1f} MiB"
    )
    assert held_total > RSS_GROWTH_MAX  # they really had read ahead that much in total
    assert growth < RSS_GROWTH_MAX
    # The pool is not stuck on abandoned reads: the next epoch continues the stream.
    ds.set_epoch_len(10)
    samples = list(ds)
    assert [s.sample_id for s in samples] == list(range(10))
    assert all(s.data == payload(s.sample_id) for s in samples)


def test_writing_and_reading_samples_never_import_polars(tmp_path: Path) -> None:
    # Polars (about 24 MiB resident) is loaded by get_metadata/update_metadata
    # only: a process that writes and reads samples does without it.
    script = f"""
import sys
import dataset_rt
runtime = dataset_rt.DatasetRuntime(num_workers=1)
source = [dataset_rt.CacheInput(bytes([i]) * 10, {{"i": i, "s": "x"}}) for i in range(50)]
class Source:
    name = "src"
    def __iter__(self):
        return iter(source)
[result] = runtime.write_cache([Source()], {str(tmp_path)!r},
    writer_config=dataset_rt.WriterConfig(show_progress=False))
dataset = runtime.cached_dataset([result.path], reader_config=dataset_rt.ReaderConfig(seed=0))
assert sum(s.metadata["i"] for s in dataset) > 0
assert "polars" not in sys.modules, "reading samples imported polars"
dataset.get_metadata()
assert "polars" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_first_chunks_fill_the_window_and_no_more(pool: DatasetRuntime, big_cache: Path) -> None:
    # Creating the iterator submits a one-sample first chunk and a second chunk
    # with the rest of the window (read_pipeline.chunkSize): 64 samples of
    # 48 KiB are read ahead before the first next(), and nothing past them
    # until samples are handed out.
    ds = load(pool, big_cache, prefetch_size=64)
    iterator = iter(ds)
    read_ahead = wait_for_read_ahead(iterator, minimum=64 * SAMPLE_BYTES)
    assert 64 * SAMPLE_BYTES <= read_ahead < 65 * SAMPLE_BYTES
    for expected, sample in zip(range(64), iterator, strict=False):
        assert sample.sample_id == expected
    # Handing the window out submits the next one.
    assert wait_for_read_ahead(iterator, minimum=64 * SAMPLE_BYTES) >= 64 * SAMPLE_BYTES
    iterator.close()


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_a_batch_of_large_payloads_is_freed_before_the_next_is_read(
    pool: DatasetRuntime, tmp_path: Path, shuffle: bool
) -> None:
    # 1 MiB payloads are read straight into the bytes handed out, 4 to a batch
    # (4 MiB chunks). A consumer that keeps nothing holds one batch and the sample
    # it is on; the iterator must not keep the previous batch while it reads the
    # next one (which made it 8 MiB).
    import tracemalloc

    class Large:
        name = "large"

        def __iter__(self) -> Iterator[CacheInput]:
            for i in range(16):
                yield CacheInput(bytes([i]) * MIB, {"i": i})

    [path] = written_paths(pool.write_cache(Large(), tmp_path, writer_config=QUIET))
    dataset = load(pool, path, prefetch_size=64, shuffle=shuffle)
    gc.collect()
    tracemalloc.start()
    try:
        seen = 0
        for sample in dataset:
            seen += len(sample.data)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 16 * MIB
    assert peak < 6.5 * MIB, f"peak {peak / MIB:.1f} MiB of Python memory while reading"
