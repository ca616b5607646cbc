"""Training with torch (SPEC 9, training): DataLoader workers, ranks, exact and
elastic resume. Every test compares what a loader yields with the plain
single-process stream of a twin dataset in the same state."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import polars as pl
import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, DatasetRuntime, ReaderConfig

torch = pytest.importorskip("torch")
torch_data = pytest.importorskip("torch.utils.data")

import torch_jobs  # noqa: E402 - after the torch check: it imports nothing of torch itself
from dataset_rt.torch import DataLoader, TorchIterableDataset  # noqa: E402

FIRST = simple_samples(37)
SECOND = simple_samples(20, payload_bytes=40)
EPOCH_LEN = 45


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("training")
    results = runtime.write_cache(
        [ListSource("first", FIRST), ListSource("second", SECOND)], base, writer_config=QUIET
    )
    return written_paths(results)


def load(runtime: DatasetRuntime, caches: list[Path], *, seed: int = 5) -> CachedDataset:
    ds = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=seed, prefetch_size=8))
    ds.set_epoch_len(EPOCH_LEN)
    return ds


def edited(runtime: DatasetRuntime, caches: list[Path]) -> CachedDataset:
    """A dataset whose table was filtered, duplicated and reweighted, with its own epoch length."""
    ds = load(runtime, caches)
    table = ds.get_metadata()
    table = pl.concat([table.filter(pl.col("sample_id") % 4 != 1), table.tail(3)])
    ds.update_metadata(table.with_columns(weight=(pl.col("sample_id") % 5 + 1).cast(pl.Float64)))
    ds.set_epoch_len(31)
    return ds


def ids(samples: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in samples]


def has_start_method(method: str) -> bool:
    return method in multiprocessing.get_all_start_methods()


@pytest.mark.parametrize("batch_size", [None, 1, 4, 7])
@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
def test_a_plain_dataloader_with_workers_yields_the_single_process_stream(
    runtime: DatasetRuntime, caches: list[Path], num_workers: int, batch_size: int | None
) -> None:
    expected = ids(load(runtime, caches))
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=batch_size)
    context = (
        {"multiprocessing_context": "fork"} if num_workers and has_start_method("fork") else {}
    )
    loader = torch_data.DataLoader(
        adapter, batch_size=batch_size, num_workers=num_workers, **context
    )
    if batch_size is not None:
        adapter.attach_loader(loader)  # an unbatched adapter needs no handshake
    batches = list(loader)
    assert torch_jobs.flatten(batches) == expected
    assert len(loader) == len(batches)
    if batch_size is not None:
        assert [len(b.sample_id) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_workers_started_without_fork_rebuild_an_edited_dataset(
    runtime: DatasetRuntime, caches: list[Path], start_method: str
) -> None:
    # The dataset travels pickled: its edited table (Arrow IPC), epoch length and
    # position, read two epochs in, must give the same samples.
    if not has_start_method(start_method):
        pytest.skip(f"no {start_method} start method here")
    twin = edited(runtime, caches)
    list(twin)
    expected = ids(twin)
    ds = edited(runtime, caches)
    list(ds)
    adapter = ds.to_torch_iterable_dataset(batch_size=3, transform=torch_jobs.identity_of)
    loader = torch_data.DataLoader(
        adapter, batch_size=3, num_workers=2, multiprocessing_context=start_method
    )
    adapter.attach_loader(loader)  # its worker_init_fn travels pickled too
    assert torch_jobs.flatten(loader) == expected


def test_transforms_run_in_the_worker_processes(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    expected = ids(load(runtime, caches))
    adapter = load(runtime, caches).to_torch_iterable_dataset(
        transform=torch_jobs.identity_and_process
    )
    loader = torch_data.DataLoader(adapter, batch_size=None, num_workers=2)
    out = list(loader)
    assert [(c, s) for c, s, _ in out] == expected
    processes = {p for _, _, p in out}
    assert len(processes) == 2 and os.getpid() not in processes


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_each_worker_starts_only_worker_threads_native_threads(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    def threads_in_workers(worker_threads: int) -> int:
        adapter = load(runtime, caches).to_torch_iterable_dataset(
            transform=torch_jobs.thread_count, worker_threads=worker_threads
        )
        counts: list[int] = list(torch_data.DataLoader(adapter, batch_size=None, num_workers=2))
        return max(counts)

    assert threads_in_workers(4) - threads_in_workers(1) == 3


def test_cached_samples_pickle(runtime: DatasetRuntime, caches: list[Path]) -> None:
    for sample in load(runtime, caches):
        twin = pickle.loads(pickle.dumps(sample))
        assert isinstance(twin, CachedSample)
        assert twin == sample
        assert dict(twin.metadata) == dict(sample.metadata)


def test_the_default_collate_keeps_samples_readable(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
    batch = next(iter(torch_data.DataLoader(adapter, batch_size=4, num_workers=1)))
    assert isinstance(batch, CachedSample)
    assert len(batch.data) == 4 and all(isinstance(d, bytes) for d in batch.data)
    assert torch_jobs.column(batch.metadata["index"]) == torch_jobs.column(batch.sample_id)


def test_a_batch_size_mismatch_is_refused_saying_what_to_set(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
    for batch_size in (8, None):
        loader = torch_data.DataLoader(adapter, batch_size=batch_size, num_workers=2)
        with pytest.raises(
            ValueError,
            match=f"the DataLoader has batch_size={batch_size} and the adapter batch_size=4: "
            "pass DataLoader\\(batch_size=4\\) or build the adapter",
        ):
            adapter.attach_loader(loader)
    with pytest.raises(ValueError, match="pass DataLoader\\(batch_size=4\\)"):
        DataLoader(adapter, batch_size=2)
    with pytest.raises(ValueError, match="drop_last=False and the loader has drop_last=True"):
        DataLoader(adapter, batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match="drop_last=False and the loader has drop_last=True"):
        adapter.attach_loader(torch_data.DataLoader(adapter, batch_size=4, drop_last=True))
    # None and 1 read the same positions.
    samples = load(runtime, caches).to_torch_iterable_dataset()
    assert torch_jobs.flatten(torch_data.DataLoader(samples, batch_size=1)) == ids(
        load(runtime, caches)
    )


NO_HANDSHAKE = (
    "the adapter \\(batch_size=4\\) is read by {readers}, which give the stream in order "
    "only with a loader of batch_size=4, and no loader said so: use "
    "dataset_rt.torch.DataLoader\\(adapter, batch_size=4\\), or call "
    "adapter.attach_loader\\(loader\\)"
)


@pytest.mark.parametrize("batch_size", [4, 8, None])
def test_a_plain_dataloader_with_workers_is_refused_without_the_handshake(
    runtime: DatasetRuntime, caches: list[Path], batch_size: int | None
) -> None:
    # torch does not tell a dataset its loader's batch size: a batched adapter
    # read by several workers refuses a loader that did not say it, whatever
    # its batch size (raised in the worker, re-raised by the loader).
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
    loader = torch_data.DataLoader(adapter, batch_size=batch_size, num_workers=2)
    with pytest.raises(ValueError, match=NO_HANDSHAKE.format(readers="2 DataLoader workers")):
        list(loader)


def test_a_plain_dataloader_under_several_ranks_is_refused_without_the_handshake(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4, rank=0, world_size=2)
    with pytest.raises(ValueError, match=NO_HANDSHAKE.format(readers="2 ranks")):
        list(torch_data.DataLoader(adapter, batch_size=8, num_workers=1))
    with pytest.raises(
        ValueError, match=NO_HANDSHAKE.format(readers="2 DataLoader workers and 2 ranks")
    ):
        list(torch_data.DataLoader(adapter, batch_size=4, num_workers=2))
    # The main process cannot tell a loader from a loop: a rank's share reads.
    share = load(runtime, caches).to_torch_iterable_dataset(batch_size=4, rank=1, world_size=2)
    assert len(ids(share)) == len(share)


@pytest.mark.parametrize("batch_size", [None, 3, 8])
def test_one_reader_of_one_rank_needs_no_handshake(
    runtime: DatasetRuntime, caches: list[Path], batch_size: int | None
) -> None:
    # One reader yields the stream in order whatever the loader batches.
    expected = ids(load(runtime, caches))
    for num_workers in (0, 1):
        adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
        loader = torch_data.DataLoader(adapter, batch_size=batch_size, num_workers=num_workers)
        assert torch_jobs.flatten(loader) == expected
    assert ids(load(runtime, caches).to_torch_iterable_dataset(batch_size=4)) == expected


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_unbatched_adapter_reads_with_a_plain_unbatched_dataloader(
    runtime: DatasetRuntime, caches: list[Path], num_workers: int
) -> None:
    expected = ids(load(runtime, caches))
    adapter = load(runtime, caches).to_torch_iterable_dataset()
    loader = torch_data.DataLoader(adapter, batch_size=None, num_workers=num_workers)
    assert ids(loader) == expected


@pytest.mark.parametrize("batch_size", [None, 5])
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_the_project_dataloader_tells_the_adapter_at_every_iteration(
    runtime: DatasetRuntime, caches: list[Path], num_workers: int, batch_size: int | None
) -> None:
    twin = load(runtime, caches)
    expected = [ids(twin) for _ in range(2)]
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=batch_size)
    loader = DataLoader(adapter, batch_size=batch_size, num_workers=num_workers)
    assert [torch_jobs.flatten(loader) for _ in range(2)] == expected
    if batch_size is not None:
        # The handshake was this loader's: another loader's workers are not told.
        with pytest.raises(ValueError, match="no loader said so"):
            list(torch_data.DataLoader(adapter, batch_size=batch_size, num_workers=2))


def test_attach_loader_refuses_a_loader_that_would_reorder_the_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
    with pytest.raises(ValueError, match="in_order=False, which hands out its workers' batches"):
        adapter.attach_loader(
            torch_data.DataLoader(adapter, batch_size=4, num_workers=2, in_order=False)
        )
    with pytest.raises(ValueError, match="in_order=False"):
        DataLoader(adapter, batch_size=4, num_workers=2, in_order=False)
    other = load(runtime, caches).to_torch_iterable_dataset(batch_size=4)
    with pytest.raises(ValueError, match="the loader reads another dataset"):
        adapter.attach_loader(torch_data.DataLoader(other, batch_size=4))
    with pytest.raises(TypeError, match="loader must be a torch DataLoader, got list"):
        adapter.attach_loader([adapter])  # type: ignore[arg-type]


def test_attach_loader_keeps_the_loaders_own_worker_init_fn(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    expected = ids(load(runtime, caches))
    adapter = load(runtime, caches).to_torch_iterable_dataset(
        batch_size=4, transform=torch_jobs.identity_and_marker
    )
    loader = torch_data.DataLoader(
        adapter,
        batch_size=4,
        num_workers=2,
        collate_fn=list,
        worker_init_fn=torch_jobs.mark_worker,
    )
    adapter.attach_loader(loader)
    adapter.attach_loader(loader)  # once is enough; twice changes nothing
    out = [item for batch in loader for item in batch]
    assert [(c, s) for c, s, _ in out] == expected
    assert {marker for _, _, marker in out} == {"worker 0", "worker 1"}


def test_the_package_uses_no_private_torch_names() -> None:
    # Frame inspection and torch's private modules and classes would tie the
    # adapter to one torch release's internals.
    module_file = sys.modules["dataset_rt.torch"].__file__
    assert module_file is not None, "dataset_rt.torch has no file"
    package = Path(module_file).parent
    private = ["_getframe", "_IterableDatasetFetcher", "_BaseDataLoaderIter", "_DatasetKind"]
    private += ["data._utils", "torch._C", "_MultiProcessingDataLoaderIter"]
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        assert [name for name in private if name in text] == [], path.name


def test_bad_ranks_are_refused(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    with pytest.raises(ValueError, match="rank must be below world_size \\(2\\), got 2"):
        ds.to_torch_iterable_dataset(rank=2, world_size=2)
    with pytest.raises(ValueError, match="rank must be between 0 and 4294967295, got -1"):
        ds.to_torch_iterable_dataset(rank=-1, world_size=2)
    with pytest.raises(ValueError, match="world_size must be between 1 and 1048576, got 0"):
        ds.to_torch_iterable_dataset(rank=0, world_size=0)
    with pytest.raises(ValueError, match="given together"):
        ds.to_torch_iterable_dataset(rank=1)
    with pytest.raises(ValueError, match="batch_size must be between 1 and 2147483648, got 0"):
        ds.to_torch_iterable_dataset(batch_size=0)
    with pytest.raises(ValueError, match="batch_size must be between 0 and"):
        ds.to_torch_iterable_dataset(batch_size=-4)
    with pytest.raises(TypeError, match="rank must be an int, got str"):
        ds.to_torch_iterable_dataset(rank="0", world_size=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="worker_threads must be between 1"):
        ds.to_torch_iterable_dataset(worker_threads=0)
    with pytest.raises(TypeError, match="transform must be callable"):
        ds.to_torch_iterable_dataset(transform=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_interleave_step_by_step_into_the_stream(
    runtime: DatasetRuntime,
    caches: list[Path],
    world_size: int,
    num_workers: int,
    drop_last: bool,
) -> None:
    batch_size = 4
    step = world_size * batch_size
    total = EPOCH_LEN // step * step if drop_last else -(-EPOCH_LEN // step) * step
    twin = load(runtime, caches)
    twin.set_epoch_len(total)  # padding continues into the positions after the epoch
    expected = ids(twin)
    per_rank = []
    for rank in range(world_size):
        adapter = load(runtime, caches).to_torch_iterable_dataset(
            batch_size=batch_size, drop_last=drop_last, rank=rank, world_size=world_size
        )
        loader = torch_data.DataLoader(
            adapter, batch_size=batch_size, drop_last=drop_last, num_workers=num_workers
        )
        adapter.attach_loader(loader)
        batches = [torch_jobs.flatten([b]) for b in loader]
        assert len(batches) == len(loader) == total // step
        assert all(len(b) == batch_size for b in batches)
        per_rank.append(batches)
    interleaved = [s for steps in zip(*per_rank, strict=True) for batch in steps for s in batch]
    assert interleaved == expected


def test_two_distributed_processes_take_their_rank_from_torch_distributed(
    caches: list[Path], tmp_path: Path
) -> None:
    from torch.multiprocessing.spawn import spawn

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    job = {
        "rendezvous": f"file://{tmp_path / 'rendezvous'}",
        "world_size": 2,
        "caches": [str(c) for c in caches],
        "seed": 5,
        "epoch_len": EPOCH_LEN,
        "batch_size": 4,
        "num_workers": 1,
        "out": str(tmp_path / "rank{rank}.json"),
    }
    spawn(torch_jobs.distributed_rank, args=(job,), nprocs=2, join=True)
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    twin = DatasetRuntime(num_workers=1).cached_dataset(caches, reader_config=ReaderConfig(seed=5))
    steps = -(-EPOCH_LEN // 8)
    twin.set_epoch_len(EPOCH_LEN)
    epochs = []
    for _ in range(2):
        epochs.append(ids(twin))
    stream_positions = []
    for epoch in range(2):
        first = epoch * EPOCH_LEN
        stream_positions.append((first, first + steps * 8))
    long = DatasetRuntime(num_workers=1).cached_dataset(caches, reader_config=ReaderConfig(seed=5))
    long.set_epoch_len(EPOCH_LEN * 2 + 8)
    stream = ids(long)
    for epoch, (first, last) in enumerate(stream_positions):
        got = [
            tuple(sample)
            for step_batches in zip(
                results[0]["epochs"][epoch], results[1]["epochs"][epoch], strict=True
            )
            for batch in step_batches
            for sample in batch
        ]
        assert got == stream[first:last]
        assert got[:EPOCH_LEN] == epochs[epoch]
    assert results[0]["len"] == results[1]["len"] == steps
    # The state is global: both ranks save the same one.
    assert results[0]["state"] == results[1]["state"]
    assert results[0]["state"]["position"] == 2 * 2 * 4


def test_the_project_dataloader_moves_on_one_epoch_per_iteration_with_workers(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    twin = load(runtime, caches)
    expected = [ids(twin) for _ in range(3)]
    loader = DataLoader(load(runtime, caches), batch_size=5, num_workers=2)
    assert [torch_jobs.flatten(loader) for _ in range(3)] == expected


def test_a_plain_dataloader_with_workers_reads_the_epoch_set_epoch_chose(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    twin = load(runtime, caches)
    expected = [ids(twin) for _ in range(3)]
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=5)
    loader = torch_data.DataLoader(adapter, batch_size=5, num_workers=2)
    adapter.attach_loader(loader)
    got = []
    for epoch in (2, 0, 1):
        adapter.set_epoch(epoch)
        got.append(torch_jobs.flatten(loader))
    assert got == [expected[2], expected[0], expected[1]]


@pytest.mark.parametrize("stop_after", [0, 1, 4, 9, 10, 13])
def test_resuming_the_project_dataloader_is_exact_with_other_worker_counts(
    runtime: DatasetRuntime, caches: list[Path], stop_after: int
) -> None:
    # 9 batches of 5 per epoch: stopping after 9, 10 or 13 batches resumes in
    # the second epoch; the resumed run uses other worker counts and reopens the
    # caches, and the concatenation is the uninterrupted run.
    def run(loader: DataLoader, epochs: int) -> list[tuple[int, int]]:
        return [s for _ in range(epochs) for s in torch_jobs.flatten(loader)]

    uninterrupted = run(DataLoader(edited(runtime, caches), batch_size=5, num_workers=2), 3)
    first = DataLoader(edited(runtime, caches), batch_size=5, num_workers=2)
    seen: list[tuple[int, int]] = []
    batches = 0
    while batches < stop_after:
        for batch in first:
            seen += torch_jobs.flatten([batch])
            batches += 1
            if batches == stop_after:
                break
    state = pickle.loads(pickle.dumps(first.state_dict()))
    for num_workers in (0, 3):
        resumed = DataLoader(
            edited(DatasetRuntime(num_workers=1), caches), batch_size=5, num_workers=num_workers
        )
        resumed.load_state_dict(state)
        rest = run(resumed, 2)
        assert seen + rest == uninterrupted[: len(seen) + len(rest)]
        assert len(seen) + len(rest) > 31


def test_a_global_state_resumes_on_another_number_of_ranks(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    # Two ranks stop after 3 steps of 4; three ranks resume from their state.
    loaders = [
        DataLoader(
            load(runtime, caches).to_torch_iterable_dataset(batch_size=4, rank=rank, world_size=2),
            batch_size=4,
        )
        for rank in range(2)
    ]
    iterators = [iter(loader) for loader in loaders]
    seen = []
    for _ in range(3):
        for iterator in iterators:
            seen += torch_jobs.flatten([next(iterator)])
    states = [loader.state_dict() for loader in loaders]
    assert states[0] == states[1] and states[0]["position"] == 24
    rest_by_rank = []
    for rank in range(3):
        adapter = load(runtime, caches).to_torch_iterable_dataset(
            batch_size=4, rank=rank, world_size=3
        )
        loader = DataLoader(adapter, batch_size=4, num_workers=1)
        loader.load_state_dict(states[0])
        rest_by_rank.append([torch_jobs.flatten([b]) for b in loader])
    rest = [s for step in zip(*rest_by_rank, strict=True) for batch in step for s in batch]
    long = load(runtime, caches)
    long.set_epoch_len(24 + 24)  # 21 left, padded to two steps of 12
    assert seen + rest == ids(long)


def test_a_state_of_other_data_is_refused_by_the_dataloader(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    loader = DataLoader(load(runtime, caches), batch_size=5)
    next(iter(loader))
    state = loader.state_dict()
    for other, message in [
        (load(runtime, caches, seed=6), "the state has seed 5, this dataset 6"),
        (edited(runtime, caches), "epoch_len|another active table"),
        (load(runtime, caches[:1]), "the state belongs to 2 caches"),
    ]:
        with pytest.raises(ValueError, match=message):
            DataLoader(other, batch_size=5).load_state_dict(state)


class Resumable(Protocol):
    """A loader that saves and restores its position (torchdata's StatefulDataLoader)."""

    def __iter__(self) -> Iterator[object]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def test_torchdata_stateful_dataloader_resumes_exactly(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def attached(dataset: CachedDataset, num_workers: int) -> Resumable:
        adapter = dataset.to_torch_iterable_dataset(batch_size=3)
        made = stateful.StatefulDataLoader(adapter, batch_size=3, num_workers=num_workers)
        adapter.attach_loader(made)
        loader: Resumable = made
        return loader

    for num_workers in (0, 2):
        uninterrupted = torch_jobs.flatten(attached(edited(runtime, caches), num_workers))
        loader = attached(edited(runtime, caches), num_workers)
        iterator = iter(loader)
        seen = torch_jobs.flatten([next(iterator) for _ in range(4)])
        state = loader.state_dict()
        resumed = attached(edited(DatasetRuntime(num_workers=1), caches), num_workers)
        resumed.load_state_dict(state)
        assert seen + torch_jobs.flatten(resumed) == uninterrupted


def test_a_reader_state_names_its_share_and_one_saved_as_shard_still_resumes(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    """The state of one reader (what StatefulDataLoader keeps per worker) holds
    its share under "share"; a state saved under the former key "shard"
    resumes that reader exactly, with a DeprecationWarning."""
    expected = ids(load(runtime, caches))
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=3)
    samples = iter(adapter)
    seen = ids(next(samples) for _ in range(7))
    state = adapter.state_dict()
    assert state["share"] == {
        "batch_size": 3,
        "rank": 0,
        "world_size": 1,
        "worker": 0,
        "num_workers": 1,
        "drop_last": 0,
    }
    assert "shard" not in state and state["consumed"] == 7
    saved_as_shard = {("shard" if key == "share" else key): value for key, value in state.items()}
    for saved in (state, saved_as_shard):
        resumed = load(runtime, caches).to_torch_iterable_dataset(batch_size=3)
        if "shard" in saved:
            with pytest.warns(DeprecationWarning, match="'shard', the former name of 'share'"):
                resumed.load_state_dict(saved)
        else:
            resumed.load_state_dict(saved)
        assert seen + ids(resumed) == expected


def test_persistent_workers_follow_the_epochs_and_refuse_a_jump(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    twin = load(runtime, caches)
    expected = [ids(twin) for _ in range(3)]
    ds = load(runtime, caches)
    loader = DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=True)
    assert [torch_jobs.flatten(loader) for _ in range(3)] == expected
    ds.set_epoch(0)
    with pytest.raises(RuntimeError, match="persistent DataLoader workers"):
        iter(loader)


def test_workers_report_caches_replaced_or_deleted_since_opening(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    [path] = written_paths(
        runtime.write_cache(ListSource("c", FIRST), tmp_path, writer_config=QUIET)
    )
    ds = runtime.cached_dataset([path], reader_config=ReaderConfig(seed=1))
    adapter = ds.to_torch_iterable_dataset(batch_size=2)
    shutil.rmtree(path)
    runtime.write_cache(ListSource("c", SECOND), tmp_path, writer_config=QUIET)
    loader = torch_data.DataLoader(adapter, batch_size=2, num_workers=2, timeout=60)
    adapter.attach_loader(loader)
    with pytest.raises(ValueError, match="cannot reopen the dataset in process .*manifest SHA-256"):
        list(loader)
    shutil.rmtree(path)
    with pytest.raises(ValueError, match="cannot open the cache directory"):
        list(loader)


def test_the_adapter_is_a_torch_iterable_dataset(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    adapter = load(runtime, caches).to_torch_iterable_dataset(batch_size=4, drop_last=True)
    assert isinstance(adapter, TorchIterableDataset)
    assert isinstance(adapter, torch_data.IterableDataset)
    assert (adapter.batch_size, adapter.drop_last) == (4, True)
    assert adapter.rank_and_world_size() == (0, 1)
    assert len(adapter) == EPOCH_LEN // 4 * 4
    with pytest.raises(TypeError, match="reads a CachedDataset or its"):
        DataLoader(list(range(3)))
    assert sys.modules["dataset_rt.torch"] is not None
