"""Train a small model on two ranks over a DatasetRT cache, stop it, and resume it.

    python examples/ddp_train.py            # about a minute on 2 CPU cores
    python examples/ddp_train.py --quick    # a few seconds of training

What it does, all on the CPU with torch.distributed's gloo backend:

1. writes a cache of 4,096 samples (a float32 feature vector as the payload,
   an int label as metadata);
2. trains a linear classifier with DistributedDataParallel on two ranks, each
   reading its share through `dataset_rt.torch.DataLoader` with two worker
   processes (decoding runs in the workers), for three epochs of shuffled,
   weighted sampling: the uninterrupted run;
3. runs the same job again, stops it in the middle of the second epoch as a
   preemption would (rank 0 checkpoints the model, the optimizer and the
   loader's state), and starts a new job from the checkpoint, with one worker
   per rank this time: the loader's state is one global stream position, so
   the worker count may change;
4. checks that the stopped and the resumed job together saw exactly the
   samples of the uninterrupted run, in the same order, and ended with the
   same weights.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as distributed
from torch import nn
from torch.multiprocessing.spawn import spawn

from dataset_rt import (
    CachedSample,
    CacheInput,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
)
from dataset_rt.torch import DataLoader

FEATURES = 16
CLASSES = 4
WORLD_SIZE = 2


class Features:
    """A source of samples: a noisy class centre as 16 float32 values."""

    name = "features"

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> Iterator[CacheInput]:
        generator = torch.Generator().manual_seed(0)
        centres = torch.randn(CLASSES, FEATURES, generator=generator)
        for index in range(self.count):
            label = index % CLASSES
            vector = centres[label] + 0.5 * torch.randn(FEATURES, generator=generator)
            yield CacheInput(_to_bytes(vector), {"label": label})


def _to_bytes(vector: torch.Tensor) -> bytes:
    return bytes(vector.to(torch.float32).contiguous().untyped_storage())


def decode(sample: CachedSample) -> tuple[torch.Tensor, int, int]:
    """Runs in the DataLoader worker: payload bytes to a tensor."""
    vector = torch.frombuffer(bytearray(sample.data), dtype=torch.float32)
    return vector, int(sample.metadata["label"]), sample.sample_id


def open_dataset(cache: str) -> Any:
    runtime = DatasetRuntime(num_workers=1)
    dataset = runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=2024))
    # Weighted sampling: label 0 twice as often as the others.
    table = dataset.get_metadata()
    dataset.update_metadata(table.with_columns(weight=(table["label"] == 0).cast(float) + 1.0))
    return dataset


def train(rank: int, job: dict[str, Any]) -> None:
    """One rank of a job: train `job["epochs"]` epochs, or stop after
    `job["stop_at"]` global steps and checkpoint, or resume from a checkpoint."""
    distributed.init_process_group(
        "gloo", init_method=f"file://{job['rendezvous']}", rank=rank, world_size=WORLD_SIZE
    )
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(FEATURES, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    dataset = open_dataset(job["cache"])
    adapter = dataset.to_torch_iterable_dataset(transform=decode, batch_size=job["batch_size"])
    # Processes started by torch.multiprocessing.spawn start their DataLoader
    # workers by spawn too: persistent workers pay that start-up once, not per epoch.
    loader = DataLoader(
        adapter,
        batch_size=job["batch_size"],
        num_workers=job["num_workers"],
        persistent_workers=True,
    )
    step = 0
    if job.get("resume"):
        checkpoint = torch.load(job["checkpoint"], weights_only=False)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])
        step = checkpoint["step"]
    seen: list[int] = []
    while step < job["total_steps"]:
        for features, labels, sample_ids in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
            seen += sample_ids.tolist()
            step += 1
            if step == job.get("stop_at") or step == job["total_steps"]:
                break
        if step == job.get("stop_at"):
            if rank == 0:
                checkpoint = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(),
                    "step": step,
                }
                torch.save(checkpoint, job["checkpoint"])
            break
    weights = model.module.weight.detach().flatten().tolist()
    Path(job["out"].format(rank=rank)).write_text(json.dumps({"seen": seen, "weights": weights}))
    distributed.barrier()
    distributed.destroy_process_group()


def run(job: dict[str, Any]) -> list[dict[str, Any]]:
    rendezvous = Path(tempfile.mkdtemp()) / "rendezvous"
    job = {**job, "rendezvous": str(rendezvous)}
    spawn(train, args=(job,), nprocs=WORLD_SIZE, join=True)
    shutil.rmtree(rendezvous.parent)
    return [
        json.loads(Path(job["out"].format(rank=rank)).read_text()) for rank in range(WORLD_SIZE)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds of training")
    parser.add_argument("--work-dir", type=Path, help="where the cache and checkpoints go")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ddp_train_"))
    work.mkdir(parents=True, exist_ok=True)
    samples = 1024 if args.quick else 4096
    batch_size = 16 if args.quick else 32
    [written] = (
        DatasetRuntime(num_workers=2)
        .from_cache_sources(
            Features(samples),
            work / "caches",
            reader_config=ReaderConfig(seed=0),
            writer_config=WriterConfig(show_progress=False),
        )
        .results
    )
    if not isinstance(written, CacheWriteSuccess):  # a CacheWriteError (a local folder)
        print(f"error: {written}", file=sys.stderr)
        return 1
    steps_per_epoch = -(-samples // (WORLD_SIZE * batch_size))
    job = {
        "cache": str(written.path),
        "batch_size": batch_size,
        "num_workers": 2,
        "total_steps": 3 * steps_per_epoch,
        "checkpoint": str(work / "checkpoint.pt"),
    }
    print(
        f"{samples} samples, {WORLD_SIZE} ranks x 2 workers, batch {batch_size} per rank, "
        f"{job['total_steps']} steps ({steps_per_epoch} per epoch)"
    )
    uninterrupted = run({**job, "out": str(work / "full-{rank}.json")})
    stop_at = steps_per_epoch + steps_per_epoch // 3
    stopped = run({**job, "stop_at": stop_at, "out": str(work / "stopped-{rank}.json")})
    print(f"stopped after step {stop_at} (epoch 2), checkpoint {job['checkpoint']}")
    resumed = run(
        {**job, "resume": True, "num_workers": 1, "out": str(work / "resumed-{rank}.json")}
    )
    print("resumed with 1 worker per rank")
    for rank in range(WORLD_SIZE):
        if stopped[rank]["seen"] + resumed[rank]["seen"] != uninterrupted[rank]["seen"]:
            print(f"rank {rank}: the resumed run saw other samples", file=sys.stderr)
            return 1
        if resumed[rank]["weights"] != uninterrupted[rank]["weights"]:
            print(f"rank {rank}: the resumed run ended with other weights", file=sys.stderr)
            return 1
    seen = sum(len(r["seen"]) for r in uninterrupted)
    print(
        f"the stopped and resumed runs saw exactly the {seen} samples of the uninterrupted "
        "run, in order, and ended with the same weights"
    )
    if args.work_dir is None:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
