"""Random access by identity: `CachedDataset.get`, `get_many` and the map-style
torch dataset read the same checked samples as iteration, without moving the stream."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import polars as pl
import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import (
    CachedDataset,
    CachedSample,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

FIRST = simple_samples(30)
SECOND = simple_samples(12, payload_bytes=3000)


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("random_access")
    plain = runtime.write_cache(ListSource("plain", FIRST), base, writer_config=QUIET)
    lz4 = runtime.write_cache(
        ListSource("lz4", SECOND),
        base,
        writer_config=WriterConfig(
            show_progress=False, shard_compression=ShardCompression(algo="lz4", ratio=0.5)
        ),
    )
    return written_paths(plain + lz4)


def load(runtime: DatasetRuntime, caches: list[Path]) -> CachedDataset:
    return runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=1, prefetch_size=8))


def expected(cache_id: int, sample_id: int) -> tuple[bytes, dict[str, object]]:
    return (FIRST, SECOND)[cache_id][sample_id]


def check(sample: CachedSample, cache_id: int, sample_id: int) -> None:
    data, metadata = expected(cache_id, sample_id)
    assert (sample.cache_id, sample.sample_id) == (cache_id, sample_id)
    assert sample.data == data
    assert dict(sample.metadata) == metadata


def test_get_reads_any_sample_as_iteration_does(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    streamed = {(s.cache_id, s.sample_id): s for s in ds}
    for (cache_id, sample_id), sample in streamed.items():
        got = ds.get(cache_id, sample_id)
        check(got, cache_id, sample_id)
        assert (got.data, dict(got.metadata)) == (sample.data, dict(sample.metadata))


def test_get_many_keeps_order_and_repeats_and_leaves_the_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    state = ds.state_dict()
    pairs = [(1, 11), (0, 0), (1, 11), (0, 29), (1, 0)] + [(0, i) for i in range(30)]
    samples = ds.get_many(iter(pairs))
    assert len(samples) == len(pairs)
    for sample, (cache_id, sample_id) in zip(samples, pairs, strict=True):
        check(sample, cache_id, sample_id)
    assert ds.get_many([]) == []
    assert ds.state_dict() == state
    twin = load(runtime, caches)
    assert [s.sample_id for s in ds] == [s.sample_id for s in twin]


def test_get_many_takes_a_filtered_metadata_frame(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    chosen = ds.get_metadata().filter(pl.col("index") % 3 == 0).reverse()
    samples = ds.get_many(chosen)
    assert [(s.cache_id, s.sample_id) for s in samples] == list(
        zip(chosen["cache_id"], chosen["sample_id"], strict=True)
    )
    for sample in samples:
        check(sample, sample.cache_id, sample.sample_id)
    # Narrower integer columns are fine too.
    narrow = chosen.select(pl.col("cache_id").cast(pl.Int8), pl.col("sample_id").cast(pl.UInt16))
    assert [s.data for s in ds.get_many(narrow)] == [s.data for s in samples]


def test_samples_outside_the_active_table_are_readable(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.update_metadata(ds.get_metadata().filter(pl.col("cache_id") == 0).head(3))
    check(ds.get(1, 5), 1, 5)
    check(ds.get(0, 20), 0, 20)


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ((2, 0), r"no sample \(cache_id=2, sample_id=0\) \(request 1\): the dataset has 2 caches"),
        ((0, 30), r"no sample \(cache_id=0, sample_id=30\) \(request 1\): cache 0 has 30 samples"),
        ((1, 2**64 - 1), r"no sample \(cache_id=1, sample_id=18446744073709551615\)"),
        ((-1, 0), r"no sample \(cache_id=-1, sample_id=0\) \(request 1\)"),
        ((0, -5), r"no sample \(cache_id=0, sample_id=-5\) \(request 1\)"),
        ((2**32, 0), r"no sample \(cache_id=4294967296, sample_id=0\) \(request 1\)"),
    ],
)
def test_unknown_identities_raise_index_error_naming_them(
    runtime: DatasetRuntime, caches: list[Path], pair: tuple[int, int], message: str
) -> None:
    ds = load(runtime, caches)
    with pytest.raises(IndexError, match=message):
        ds.get_many([(0, 1), pair])
    with pytest.raises(IndexError, match=message.replace("request 1", "request 0")):
        ds.get(*pair)
    # Typed explicitly: polars releases differ in what they infer for 2**64 - 1.
    dtype = pl.UInt64 if max(pair) >= 2**63 else pl.Int64
    frame = pl.DataFrame(
        {"cache_id": [0, pair[0]], "sample_id": [1, pair[1]]},
        schema={"cache_id": dtype, "sample_id": dtype},
    )
    with pytest.raises(IndexError, match=r"no sample \(cache_id="):
        ds.get_many(frame)


def test_bad_arguments_say_what_is_wrong(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    with pytest.raises(TypeError, match=r"item 1 must be a \(cache_id, sample_id\) pair"):
        ds.get_many([(0, 1), (0, 1, 2)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="item 0: sample_id must be an int, got str"):
        ds.get_many([(0, "1")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="the frame has no 'sample_id' column"):
        ds.get_many(pl.DataFrame({"cache_id": [0]}))
    with pytest.raises(ValueError, match="column 'cache_id' has 1 nulls"):
        ds.get_many(pl.DataFrame({"cache_id": [None, 0], "sample_id": [0, 1]}))


def test_a_corrupt_record_is_refused_by_get(runtime: DatasetRuntime, tmp_path: Path) -> None:
    samples = simple_samples(8)
    [cache] = written_paths(
        runtime.write_cache(ListSource("c", samples), tmp_path, writer_config=QUIET)
    )
    ds = runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0))
    [shard] = (cache / "shards").iterdir()
    raw = bytearray(shard.read_bytes())
    # The embedded metadata JSON of a record: flip a digit of its "index" value.
    at = raw.find(b'"index":5')
    assert at >= 0
    raw[at + len(b'"index":')] = ord("6")
    # And one payload byte of sample 2.
    payload_at = raw.find(samples[2][0])
    assert payload_at >= 0
    raw[payload_at] ^= 0x01
    shard.write_bytes(bytes(raw))
    check_ok = ds.get(0, 4)
    assert check_ok.sample_id == 4
    for sample_id in (5, 2):
        with pytest.raises(ValueError, match=f"sample {sample_id} .*record checksum mismatch"):
            ds.get(0, sample_id)


# ---- the map-style torch dataset

torch = pytest.importorskip("torch")
torch_data = pytest.importorskip("torch.utils.data")


def identity(sample: CachedSample) -> tuple[int, int]:
    return (sample.cache_id, sample.sample_id)


def as_list(batch: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return batch


def test_the_map_dataset_indexes_the_active_table(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    table = ds.get_metadata().filter(pl.col("index") % 2 == 0).reverse()
    ds.update_metadata(table)
    mapped = ds.to_torch_map_dataset(transform=identity)
    assert isinstance(mapped, torch_data.Dataset)
    rows = list(zip(table["cache_id"], table["sample_id"], strict=True))
    assert len(mapped) == len(rows)
    assert [mapped[i] for i in range(len(rows))] == rows
    assert mapped[-1] == rows[-1]
    assert mapped[torch.tensor(2)] == rows[2]
    with pytest.raises(IndexError, match=f"row {len(rows)} is out of range"):
        mapped[len(rows)]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_shuffling_dataloader_with_workers_reads_every_row_once(
    runtime: DatasetRuntime, caches: list[Path], start_method: str
) -> None:
    if start_method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {start_method} start method here")
    ds = load(runtime, caches)
    mapped = ds.to_torch_map_dataset(transform=identity)
    loader = torch_data.DataLoader(
        mapped,
        batch_size=5,
        shuffle=True,
        num_workers=2,
        collate_fn=as_list,
        multiprocessing_context=start_method,
        generator=torch.Generator().manual_seed(0),
    )
    seen = [pair for batch in loader for pair in batch]
    assert sorted(seen) == sorted([(0, i) for i in range(30)] + [(1, i) for i in range(12)])


def test_a_distributed_sampler_splits_the_rows(runtime: DatasetRuntime, caches: list[Path]) -> None:
    mapped = load(runtime, caches).to_torch_map_dataset(transform=identity)
    shares = []
    for rank in range(3):
        sampler = torch_data.DistributedSampler(mapped, num_replicas=3, rank=rank, seed=2)
        loader = torch_data.DataLoader(mapped, batch_size=4, sampler=sampler, collate_fn=as_list)
        shares.append([pair for batch in loader for pair in batch])
    assert [len(share) for share in shares] == [14, 14, 14]
    assert len({pair for share in shares for pair in share}) == 42
