"""`CachedDataset.to_torch_dataloader`: dataset-rt 0.4.8's keywords (checked
against 0.4.8's own signature in its venv), our exact stream through the returned
`dataset_rt.torch.DataLoader`, its resume, the loader's settings as resolved
(``"auto"`` from fake cgroup files and ``LOCAL_WORLD_SIZE``), and the refusals."""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import QUIET, ListSource, simple_samples
from dataset_rt import (
    CachedDataset,
    CachedSample,
    CacheSource,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    errors,
)
from dataset_rt._core import cpus as _cpus

torch = pytest.importorskip("torch", reason="to_torch_dataloader needs torch, not installed")
from dataset_rt.torch import DataLoader, TorchIterableDataset  # noqa: E402 - after the torch check

# dataset-rt 0.4.8's keywords of to_torch_dataloader, as its signature lists them.
PEER_KEYWORDS = {
    "batch_size",
    "sample_transform_fn",
    "collate_fn",
    "shuffle",
    "seed",
    "samples_per_epoch",
    "worker_partition",
    "work_dir",
    "num_workers",
    "drop_last",
    "pin_memory",
    "timeout",
    "native_num_workers",
    "multiprocessing_context",
    "worker_init_fn",
    "prefetch_factor",
    "persistent_workers",
    "verbose",
    "dataloader_kwargs",
}
SEED = 7


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("loader")
    sources: list[CacheSource] = [
        ListSource("a", simple_samples(23)),
        ListSource("b", simple_samples(18, 30)),
    ]
    results = runtime.write_cache(sources, base, writer_config=QUIET)
    return [result.path for result in results if isinstance(result, CacheWriteSuccess)]


def load(runtime: DatasetRuntime, caches: list[Path], **config: Any) -> CachedDataset:
    return runtime.cached_dataset(caches, reader_config=ReaderConfig(**{"seed": SEED, **config}))


def identity(sample: CachedSample) -> tuple[int, int]:
    return (sample.cache_id, sample.sample_id)


def as_list(batch: list[Any]) -> list[Any]:
    """A collate_fn that keeps the batch as the list it is given."""
    return batch


def stream(dataset: CachedDataset) -> list[tuple[int, int]]:
    return [identity(sample) for sample in dataset]


def flattened(batches: Iterator[list[tuple[int, int]]] | DataLoader) -> list[tuple[int, int]]:
    return [pair for batch in batches for pair in batch]


def loader_of(dataset: CachedDataset, **keywords: Any) -> DataLoader:
    given = {
        "batch_size": 4,
        "sample_transform_fn": identity,
        "collate_fn": as_list,
        "num_workers": 0,
        **keywords,
    }
    loader = dataset.to_torch_dataloader(**given)
    assert type(loader) is DataLoader
    return loader


def test_the_keywords_are_dataset_rt_048s() -> None:
    ours = inspect.signature(CachedDataset.to_torch_dataloader).parameters
    assert set(ours) - {"self"} == PEER_KEYWORDS
    assert all(p.kind is p.KEYWORD_ONLY for name, p in ours.items() if name != "self")


def test_the_keywords_match_the_signature_of_the_real_048() -> None:
    from peer_venv import peer_env, peer_venv_python

    probe = (
        "import inspect, json, dataset_rt\n"
        "p = inspect.signature(dataset_rt.CachedDataset.to_torch_dataloader).parameters\n"
        "print(json.dumps(sorted(n for n, v in p.items() if v.kind is v.KEYWORD_ONLY)))\n"
    )
    python = peer_venv_python("0.4.8")
    done = subprocess.run(
        [str(python), "-c", probe], env=peer_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(json.loads(done.stdout)) == PEER_KEYWORDS


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_loader_yields_the_datasets_stream_and_moves_it_on(
    runtime: DatasetRuntime, caches: list[Path], num_workers: int
) -> None:
    dataset, twin = load(runtime, caches), load(runtime, caches)
    loader = loader_of(dataset, num_workers=num_workers, multiprocessing_context="spawn")
    assert loader.num_workers == num_workers
    for _ in range(2):  # each iteration is the next epoch, as for the dataset itself
        assert flattened(loader) == stream(twin)
    assert dataset.state_dict() == twin.state_dict()


def test_collate_fn_receives_a_list_also_with_batch_size_1(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    seen: list[Any] = []

    def collate(batch: list[Any]) -> int:
        seen.append(batch)
        return len(batch)

    loader = loader_of(load(runtime, caches), batch_size=1, collate_fn=collate)
    assert set(loader) == {1}
    assert all(isinstance(batch, list) for batch in seen) and len(seen) == 41


def test_default_collate_without_collate_fn(runtime: DatasetRuntime, caches: list[Path]) -> None:
    loader = loader_of(load(runtime, caches), collate_fn=None, sample_transform_fn=None)
    first = next(iter(loader))
    expected = stream(load(runtime, caches))[:4]
    assert isinstance(first, CachedSample)  # torch collates each field
    cache_ids: Any = first.cache_id
    sample_ids: Any = first.sample_id
    assert list(zip(cache_ids.tolist(), sample_ids.tolist(), strict=True)) == expected


def test_another_shuffle_or_seed_reads_a_copy_with_that_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    dataset = load(runtime, caches)
    before = dataset.state_dict()
    in_order = loader_of(dataset, shuffle=False)
    assert flattened(in_order) == stream(load(runtime, caches, shuffle=False))
    reseeded = loader_of(dataset, seed=99)
    assert flattened(reseeded) == stream(load(runtime, caches, seed=99))
    assert dataset.state_dict() == before  # the dataset's own stream did not move


def test_samples_per_epoch_sets_the_copys_epoch_length(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    dataset = load(runtime, caches)
    dataset.set_epoch(2)
    loader = loader_of(dataset, samples_per_epoch=50, drop_last=True)
    assert len(loader) == 50 // 4
    twin = load(runtime, caches)
    twin.set_epoch_len(50)
    twin.set_epoch(2)  # the copy starts at the epoch the dataset stands in
    assert flattened(loader) == stream(twin)[:48]


def test_the_datasets_own_settings_given_explicitly_read_the_dataset(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    dataset = load(runtime, caches)
    loader = loader_of(dataset, shuffle=True, seed=SEED, samples_per_epoch=len(dataset))
    assert loader.dataset.dataset is dataset  # type: ignore[attr-defined]


@pytest.mark.parametrize(("first", "second"), [(0, 2), (2, 0)])
def test_resume_through_the_returned_loader_continues_the_stream_exactly(
    runtime: DatasetRuntime, caches: list[Path], first: int, second: int
) -> None:
    settings = {"shuffle": True, "seed": 3, "samples_per_epoch": 30}
    loader = loader_of(load(runtime, caches), num_workers=first, **settings)
    batches = iter(loader)
    seen = [next(batches) for _ in range(4)]
    state = loader.state_dict()
    del batches
    resumed = loader_of(load(runtime, caches), num_workers=second, **settings)
    resumed.load_state_dict(state)
    rest = flattened(resumed)
    twin = load(runtime, caches, seed=3)
    twin.set_epoch_len(30)
    assert flattened(iter(seen)) + rest == stream(twin)
    assert flattened(resumed) == stream(twin)  # and then the next epoch


def test_auto_counts_the_cpus_of_the_fake_cgroup_per_local_rank(
    runtime: DatasetRuntime,
    caches: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    unified = tmp_path / "cgroup"
    (unified / "job").mkdir(parents=True)
    (unified / "job" / "cpu.max").write_text("800000 100000\n")  # 8 CPUs
    (proc / "cgroup").write_text("0::/job\n")
    (proc / "mountinfo").write_text(f"30 23 0:30 / {unified} rw - cgroup2 cgroup2 rw\n")
    monkeypatch.setattr(_cpus, "PROC_SELF", proc)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    dataset = load(runtime, caches)
    expected = {"1": (4, 2), "2": (3, 1), "8": (0, 1)}  # LOCAL_WORLD_SIZE: (workers, threads)
    for ranks, (workers, threads) in expected.items():
        monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks)
        loader = dataset.to_torch_dataloader(batch_size=4, num_workers="auto")
        assert loader.num_workers == workers
        adapter = loader.dataset
        assert isinstance(adapter, TorchIterableDataset)
        assert adapter._worker_threads == threads
        assert loader.persistent_workers is (workers > 0)
        assert loader.prefetch_factor == (2 if workers else None)
        assert loader.multiprocessing_context is None or workers > 0


def test_auto_on_this_machine_is_its_cpus_less_one(
    runtime: DatasetRuntime, caches: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    loader = load(runtime, caches).to_torch_dataloader(batch_size=4)
    assert loader.num_workers == min(4, _cpus.usable_cpu_count() - 1)


def test_an_explicit_context_and_the_rest_reach_torch(
    runtime: DatasetRuntime, caches: list[Path], tmp_path: Path
) -> None:
    def init(worker_id: int) -> None:
        del worker_id

    loader = loader_of(
        load(runtime, caches),
        num_workers=2,
        multiprocessing_context="fork",
        prefetch_factor=3,
        persistent_workers=False,
        pin_memory=False,
        timeout=30,
        worker_init_fn=init,
        worker_partition="split",
        work_dir=tmp_path,
        dataloader_kwargs={"in_order": True},
    )
    assert loader.multiprocessing_context.get_start_method() == "fork"
    assert (loader.prefetch_factor, loader.persistent_workers, loader.timeout) == (3, False, 30)
    assert loader.in_order is True


def test_verbose_logs_the_resolved_settings(
    runtime: DatasetRuntime, caches: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="dataset_rt.loader"):
        loader_of(load(runtime, caches), shuffle=False)
        loader_of(load(runtime, caches), verbose=False)
    [record] = caplog.records
    assert "num_workers=0" in record.getMessage()
    assert "shuffle=False" in record.getMessage() and "a copy of the dataset" in record.getMessage()


def not_picklable_transform() -> Any:
    return lambda sample: sample


@pytest.mark.parametrize(
    ("keywords", "error", "expected"),
    [
        ({"seed": "random"}, errors.InvalidArgumentError, "seed='random' is not supported"),
        ({"seed": -1}, errors.InvalidArgumentError, "seed must be between 0 and"),
        ({"batch_size": 0}, errors.InvalidArgumentError, "batch_size must be between 1 and"),
        ({"batch_size": None}, TypeError, "batch_size must be an int, got None"),
        ({"num_workers": -1}, errors.InvalidArgumentError, "num_workers must be between 0"),
        ({"num_workers": "many"}, TypeError, "num_workers must be an int or 'auto', got 'many'"),
        ({"native_num_workers": 0}, errors.InvalidArgumentError, "native_num_workers must be"),
        ({"samples_per_epoch": 0}, errors.InvalidArgumentError, "samples_per_epoch must be"),
        ({"prefetch_factor": 2}, errors.InvalidArgumentError, "prefetch_factor=2 needs num_"),
        ({"persistent_workers": True}, errors.InvalidArgumentError, "persistent_workers=True"),
        ({"worker_partition": "spread"}, errors.InvalidArgumentError, "worker_partition must"),
        ({"work_dir": "/nonexistent/dir"}, errors.InvalidArgumentError, "work_dir must be an"),
        ({"multiprocessing_context": "thread"}, errors.InvalidArgumentError, "must be one of"),
        ({"timeout": -1}, errors.InvalidArgumentError, "timeout must be a number of seconds"),
        ({"shuffle": "yes"}, TypeError, "shuffle must be a bool or None"),
        ({"drop_last": 1}, TypeError, "drop_last must be a bool, got 1"),
        ({"collate_fn": 3}, TypeError, "collate_fn must be callable or None, got int"),
        ({"dataloader_kwargs": {"sampler": None}}, errors.InvalidArgumentError, "not set sampler"),
        ({"dataloader_kwargs": [1]}, TypeError, "dataloader_kwargs must be a mapping"),
        (
            {"num_workers": 1, "sample_transform_fn": not_picklable_transform()},
            errors.InvalidArgumentError,
            "sample_transform_fn cannot be pickled",
        ),
    ],
)
def test_bad_keywords_are_refused_naming_the_value(
    runtime: DatasetRuntime,
    caches: list[Path],
    keywords: dict[str, Any],
    error: type[Exception],
    expected: str,
) -> None:
    with pytest.raises(error) as caught:
        loader_of(load(runtime, caches), **keywords)
    assert expected in str(caught.value)


def test_a_malformed_local_world_size_is_refused(
    runtime: DatasetRuntime, caches: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(errors.InvalidArgumentError, match="LOCAL_WORLD_SIZE must be a positive"):
        load(runtime, caches).to_torch_dataloader(num_workers="auto")


def test_len_is_the_batches_of_an_epoch(runtime: DatasetRuntime, caches: list[Path]) -> None:
    dataset = load(runtime, caches)
    assert len(loader_of(dataset, batch_size=3)) == math.ceil(41 / 3)
    assert len(loader_of(dataset, batch_size=3, drop_last=True)) == 41 // 3
