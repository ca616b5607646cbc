"""Functions the torch tests run in other processes (DataLoader workers started by
spawn or forkserver, distributed ranks): they must be importable by name."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dataset_rt import CachedSample, DatasetRuntime, ReaderConfig


def identity_of(sample: CachedSample) -> tuple[int, int]:
    """A transform: the sample's identity."""
    return (sample.cache_id, sample.sample_id)


def identity_and_process(sample: CachedSample) -> tuple[int, int, int]:
    """A transform that tells which process ran it."""
    return (sample.cache_id, sample.sample_id, os.getpid())


def mark_worker(worker_id: int) -> None:
    """A DataLoader worker_init_fn: leaves a mark that `identity_and_marker` reads."""
    os.environ["DATASET_RT_TEST_WORKER_MARK"] = f"worker {worker_id}"


def identity_and_marker(sample: CachedSample) -> tuple[int, int, str | None]:
    """A transform: the sample's identity and the mark `mark_worker` left."""
    return (sample.cache_id, sample.sample_id, os.environ.get("DATASET_RT_TEST_WORKER_MARK"))


def thread_count(sample: CachedSample) -> int:
    """A transform that counts the threads of the process running it (Linux)."""
    return len(os.listdir("/proc/self/task"))


@runtime_checkable
class Column(Protocol):
    """A column torch's default_collate made of one field of a batch: a tensor."""

    def tolist(self) -> list[Any]: ...


def column(values: object) -> list[Any]:
    """The values of a collated column. A CachedSample collated by torch holds a tensor in
    each field (a dict of them in `metadata`) where its annotations say int."""
    assert isinstance(values, Column), f"not a collated column: {values!r}"
    return values.tolist()


def flatten(batches: Iterable[object]) -> list[tuple[int, int]]:
    """Identities out of whatever a DataLoader yielded: samples, collated
    CachedSamples, or transforms' identity tuples (collated into two tensors)."""
    out: list[tuple[int, int]] = []
    for batch in batches:
        if isinstance(batch, CachedSample) and isinstance(batch.cache_id, int):
            out.append((batch.cache_id, batch.sample_id))
        elif isinstance(batch, CachedSample):
            out += zip(column(batch.cache_id), column(batch.sample_id), strict=True)
        elif isinstance(batch, tuple) and isinstance(batch[0], int):
            out.append((batch[0], batch[1]))
        else:
            assert isinstance(batch, list | tuple) and len(batch) >= 2, batch
            out += zip(column(batch[0]), column(batch[1]), strict=True)
    return out


def distributed_rank(rank: int, job: dict[str, Any]) -> None:
    """One rank of a two-process gloo job: reads its share of two epochs
    through dataset_rt.torch.DataLoader, with the rank taken from
    torch.distributed, and writes what it read and its state after step 2."""
    import torch.distributed as distributed

    from dataset_rt.torch import DataLoader

    distributed.init_process_group(
        "gloo", init_method=job["rendezvous"], rank=rank, world_size=job["world_size"]
    )
    try:
        runtime = DatasetRuntime(num_workers=1)
        dataset = runtime.cached_dataset(
            job["caches"], reader_config=ReaderConfig(seed=job["seed"])
        )
        dataset.set_epoch_len(job["epoch_len"])
        loader = DataLoader(
            dataset,
            batch_size=job["batch_size"],
            num_workers=job["num_workers"],
            collate_fn=list,
        )
        result: dict[str, Any] = {"epochs": [], "len": len(loader)}
        for _ in range(2):
            batches = []
            for step, batch in enumerate(loader, start=1):
                batches.append([[s.cache_id, s.sample_id] for s in batch])
                if step == 2 and "state" not in result:
                    result["state"] = loader.state_dict()
            result["epochs"].append(batches)
        # Every rank must reach the end with the same number of batches: a
        # barrier here would hang otherwise.
        distributed.barrier()
        Path(job["out"].format(rank=rank)).write_text(json.dumps(result))
    finally:
        distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit("import this module; it has no command line")
