"""A mix of caches (`CachedDataset.set_mix`) under torch: DataLoader workers and
ranks yield the single-process stream, and resume is exact and elastic in any
epoch, including past the first (where MosaicML Streaming's choose/repeat resumes
went wrong, mosaicml/streaming#869)."""

from __future__ import annotations

import multiprocessing
import pickle
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, DatasetRuntime, Mix, ReaderConfig

torch = pytest.importorskip("torch")
torch_data = pytest.importorskip("torch.utils.data")

import torch_jobs  # noqa: E402 - after the torch check: it imports nothing of torch itself
from dataset_rt.torch import DataLoader  # noqa: E402

MIX = {0: Mix(repeat=0.5), 1: Mix(repeat=2.0), 2: Mix(choose=9)}
EPOCH_LEN = 12 + 24 + 9  # floor(0.5 * 23 + 1/2), 2 * 12, 9


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("torch-mix")
    sources = [
        ListSource("clean", simple_samples(23)),
        ListSource("books", simple_samples(12, payload_bytes=40)),
        ListSource("code", simple_samples(30)),
    ]
    return written_paths(runtime.write_cache(sources, base, writer_config=QUIET))


def load(runtime: DatasetRuntime, caches: list[Path], *, edited: bool = False) -> CachedDataset:
    config = ReaderConfig(seed=11, replacement=False, prefetch_size=8)
    ds = runtime.cached_dataset(caches, reader_config=config)
    ds.set_mix(MIX)
    if edited:  # cache 2 loses its odd rows: 15 left, from which 9 are chosen
        table = ds.get_metadata()
        ds.update_metadata(table.filter((pl.col("cache_id") != 2) | (pl.col("sample_id") % 2 == 0)))
    return ds


def ids(samples: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in samples]


def fork_context(num_workers: int) -> dict[str, str]:
    fork = num_workers > 0 and "fork" in multiprocessing.get_all_start_methods()
    return {"multiprocessing_context": "fork"} if fork else {}


@pytest.mark.parametrize("batch_size", [None, 4])
@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_workers_yield_the_single_process_stream_in_later_epochs(
    runtime: DatasetRuntime, caches: list[Path], num_workers: int, batch_size: int | None
) -> None:
    twin = load(runtime, caches)
    twin.set_epoch(2)
    expected = ids(twin)
    assert Counter(cache for cache, _ in expected) == {0: 12, 1: 24, 2: 9}
    ds = load(runtime, caches)
    ds.set_epoch(2)
    adapter = ds.to_torch_iterable_dataset(batch_size=batch_size)
    loader = torch_data.DataLoader(
        adapter, batch_size=batch_size, num_workers=num_workers, **fork_context(num_workers)
    )
    if batch_size is not None:
        adapter.attach_loader(loader)
    assert torch_jobs.flatten(list(loader)) == expected


def test_spawned_workers_rebuild_the_mix_of_an_edited_table(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    if "spawn" not in multiprocessing.get_all_start_methods():
        pytest.skip("no spawn start method here")
    twin = load(runtime, caches, edited=True)
    list(twin)
    expected = ids(twin)
    chosen = [row for cache, row in expected if cache == 2]
    assert len(chosen) == len(set(chosen)) == 9 and set(chosen) <= set(range(0, 30, 2))
    ds = load(runtime, caches, edited=True)
    list(ds)
    adapter = ds.to_torch_iterable_dataset(batch_size=3, transform=torch_jobs.identity_of)
    loader = torch_data.DataLoader(
        adapter, batch_size=3, num_workers=2, multiprocessing_context="spawn"
    )
    adapter.attach_loader(loader)
    assert torch_jobs.flatten(loader) == expected


@pytest.mark.parametrize(("world_size", "num_workers"), [(2, 0), (3, 2)])
def test_ranks_interleave_into_the_stream(
    runtime: DatasetRuntime, caches: list[Path], world_size: int, num_workers: int
) -> None:
    batch_size = 4
    step = world_size * batch_size
    total = -(-EPOCH_LEN // step) * step  # padded into the next epoch's positions
    twin = load(runtime, caches)
    expected = (ids(twin) + ids(twin))[:total]
    per_rank = []
    for rank in range(world_size):
        adapter = load(runtime, caches).to_torch_iterable_dataset(
            batch_size=batch_size, rank=rank, world_size=world_size
        )
        loader = torch_data.DataLoader(
            adapter, batch_size=batch_size, num_workers=num_workers, **fork_context(num_workers)
        )
        adapter.attach_loader(loader)
        per_rank.append([torch_jobs.flatten([b]) for b in loader])
    interleaved = [s for steps in zip(*per_rank, strict=True) for batch in steps for s in batch]
    assert interleaved == expected


@pytest.mark.parametrize("stop_after", [14, 27])
def test_resume_past_the_first_epoch_is_exact_with_other_workers_and_ranks(
    runtime: DatasetRuntime, caches: list[Path], stop_after: int
) -> None:
    # 12 batches of 4 (the last of 1) per epoch: stopping after 14 or 27 batches
    # stops in epoch 1 or 2; the resumed runs use other worker counts, and one of them two ranks.
    def run(loader: DataLoader, epochs: int) -> list[tuple[int, int]]:
        return [s for _ in range(epochs) for s in torch_jobs.flatten(loader)]

    uninterrupted = run(DataLoader(load(runtime, caches), batch_size=4, num_workers=2), 4)
    first = DataLoader(load(runtime, caches), batch_size=4, num_workers=2)
    seen: list[tuple[int, int]] = []
    batches = 0
    while batches < stop_after:
        for batch in first:
            seen += torch_jobs.flatten([batch])
            batches += 1
            if batches == stop_after:
                break
    state = pickle.loads(pickle.dumps(first.state_dict()))
    assert state["algorithm"].startswith("dataset_rt/mix/v1#")
    for num_workers in (0, 3):
        resumed = DataLoader(
            load(DatasetRuntime(num_workers=1), caches), batch_size=4, num_workers=num_workers
        )
        resumed.load_state_dict(state)
        rest = run(resumed, 1)
        assert seen + rest == uninterrupted[: len(seen) + len(rest)]
    # Two ranks: each resumes its share, and together they continue the stream.
    rest_by_rank = []
    for rank in range(2):
        adapter = load(runtime, caches).to_torch_iterable_dataset(
            batch_size=2, rank=rank, world_size=2
        )
        loader = DataLoader(adapter, batch_size=2)
        loader.load_state_dict(state)
        rest_by_rank.append([torch_jobs.flatten([b]) for b in loader])
    rest = [s for step in zip(*rest_by_rank, strict=True) for batch in step for s in batch]
    left = EPOCH_LEN - len(seen) % EPOCH_LEN
    assert rest[:left] == uninterrupted[len(seen) : len(seen) + left]


def test_a_loader_state_under_another_mix_is_refused(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    loader = DataLoader(load(runtime, caches), batch_size=4)
    next(iter(loader))
    state = loader.state_dict()
    other = load(runtime, caches)
    other.set_mix({2: Mix(choose=8)})
    with pytest.raises(ValueError, match="taken under mix"):
        DataLoader(other, batch_size=4).load_state_dict(state)
