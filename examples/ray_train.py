"""Train on two Ray Train workers over DatasetRT caches, stop, and resume from the checkpoint.

    python examples/ray_train.py            # about 50 s on 2 CPU cores, mostly Ray's start-up
    python examples/ray_train.py --quick    # fewer samples and steps

What it does, on the CPU, in a local Ray instance that it starts and shuts down:

1. writes two caches of float32 feature vectors (an int label as metadata), so
   that samples are told apart by (cache_id, sample_id);
2. runs a `ray.train.torch.TorchTrainer` with 2 workers of one CPU each. Each
   worker is one rank: it reads its own share of the stream through
   `dataset_rt.torch.DataLoader` (rank and world size from
   `ray.train.get_context()`), trains a linear classifier under
   DistributedDataParallel (gloo), and after `--stop-at` steps reports a
   `ray.train.Checkpoint` holding the model, the optimizer and the loader's
   `state_dict()`, then stops as a preempted job would;
3. calls `fit()` again with the same `RunConfig(name, storage_path)`: Ray Train
   finds the run's latest checkpoint, `ray.train.get_checkpoint()` returns it,
   and each worker loads it and trains to the end of the second epoch;
4. checks, rank by rank, that the (cache_id, sample_id) sequence seen by the
   stopped and the resumed runs together is exactly what an uninterrupted run of
   the same loader yields, computed here in the driver without Ray. Exit 1 on
   any difference.

Ray is started with `ray.init(address="local")` in a temporary directory, so the
example never joins another Ray instance running on the machine. Token
authentication stays on: unless RAY_AUTH_MODE, RAY_AUTH_TOKEN or
RAY_AUTH_TOKEN_PATH is set, the example generates a token for its own instance
and passes it in the environment (rather than letting Ray write one to
~/.ray/auth_token). Resuming through the run's latest checkpoint is Ray Train
V2's behaviour (the default in Ray 2.60): the example sets
RAY_TRAIN_V2_ENABLED=1 before importing ray.train.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dataset_rt import (
    CachedDataset,
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
WORKERS = 2
SEED = 7
RUN_NAME = "dataset_rt_ray_train"


class Features:
    """A source of samples: a noisy class centre as 16 float32 values."""

    def __init__(self, name: str, count: int, seed: int) -> None:
        self.name = name
        self.count = count
        self.seed = seed

    def __iter__(self) -> Iterator[CacheInput]:
        centres = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0))
        noise = torch.Generator().manual_seed(self.seed)
        for index in range(self.count):
            label = index % CLASSES
            vector = centres[label] + 0.7 * torch.randn(FEATURES, generator=noise)
            payload = bytes(vector.to(torch.float32).contiguous().untyped_storage())
            yield CacheInput(payload, {"label": label})


def decode(sample: CachedSample) -> tuple[torch.Tensor, int, int, int]:
    """The loader's transform: payload bytes to a tensor, with the sample's identity."""
    vector = torch.frombuffer(bytearray(sample.data), dtype=torch.float32)
    return vector, int(sample.metadata["label"]), sample.cache_id, sample.sample_id


def open_loader(job: dict[str, Any], rank: int, world_size: int) -> DataLoader:
    """Rank `rank`'s loader: the same caches, seed and batch size on every rank."""
    dataset: CachedDataset = DatasetRuntime(num_workers=1).cached_dataset(
        job["caches"], reader_config=ReaderConfig(seed=SEED, replacement=False)
    )
    adapter = dataset.to_torch_iterable_dataset(
        transform=decode, batch_size=job["batch_size"], rank=rank, world_size=world_size
    )
    return DataLoader(adapter, batch_size=job["batch_size"], num_workers=0)


def batches(loader: DataLoader, steps: int) -> Iterator[Any]:
    """`steps` batches of the loader, epoch after epoch."""
    while steps > 0:
        for batch in loader:
            yield batch
            steps -= 1
            if steps == 0:
                return


def identities(cache_ids: torch.Tensor, sample_ids: torch.Tensor) -> list[list[int]]:
    """A batch's [cache_id, sample_id] pairs, as lists (what JSON gives back)."""
    return [list(pair) for pair in zip(cache_ids.tolist(), sample_ids.tolist(), strict=True)]


def train_loop(job: dict[str, Any]) -> None:
    """One Ray Train worker (one rank): resume if the run has a checkpoint, train,
    and report a checkpoint with what this rank saw."""
    import ray.train
    import ray.train.torch

    context = ray.train.get_context()
    rank = context.get_world_rank()
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(nn.Linear(FEATURES, CLASSES))  # DDP over gloo
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = open_loader(job, rank, context.get_world_size())
    step = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            state = torch.load(Path(directory) / "state.pt", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        step = state["step"]
    resumed_at = step
    end = job["stop_at"] if checkpoint is None else job["total_steps"]
    seen: list[list[int]] = []
    losses: list[float] = []
    for features, labels, cache_ids, sample_ids in batches(loader, end - step):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
        seen += identities(cache_ids, sample_ids)
        losses.append(loss.item())
        step += 1
    with tempfile.TemporaryDirectory() as directory:
        # Every rank's files land in one checkpoint directory: rank 0 writes the
        # training state (the loader's state is global, the same on every rank),
        # each rank the samples it saw in this run.
        if rank == 0:
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "loader": loader.state_dict(),
                "step": step,
            }
            torch.save(state, Path(directory) / "state.pt")
        Path(directory, f"seen-rank{rank}.json").write_text(json.dumps(seen))
        metrics = {
            "resumed_at": resumed_at,
            "step": step,
            "first_loss": losses[0],
            "last_loss": losses[-1],
        }
        ray.train.report(
            metrics,
            checkpoint=ray.train.Checkpoint.from_directory(directory),
            checkpoint_dir_name=f"step_{step:06d}",
        )


def uninterrupted(job: dict[str, Any], rank: int) -> list[list[int]]:
    """What rank `rank`'s loader yields over the whole job, read here without Ray."""
    seen: list[list[int]] = []
    loader = open_loader(job, rank, WORKERS)
    for _, _, cache_ids, sample_ids in batches(loader, job["total_steps"]):
        seen += identities(cache_ids, sample_ids)
    return seen


def private_ray_environment() -> None:
    """Ray Train V2, a token of this process's own for Ray's token authentication, and
    settings for a short run on one machine (each may be overridden from the environment)."""
    os.environ["RAY_TRAIN_V2_ENABLED"] = "1"
    # The controller polls the workers every 2 s by default: most of the time between a
    # run's last report and fit() returning. The preemption watcher (one more actor per
    # fit()) follows node draining, which a local instance never does.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")
    os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")
    auth = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    if not any(name in os.environ for name in auth):
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def fit(job: dict[str, Any], storage: Path) -> tuple[dict[str, Any], list[list[list[int]]]]:
    """One `TorchTrainer.fit()` of the run: its metrics (rank 0's) and each rank's samples."""
    import ray.train
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        train_loop,
        train_loop_config=job,
        scaling_config=ray.train.ScalingConfig(
            num_workers=WORKERS, use_gpu=False, resources_per_worker={"CPU": 1}
        ),
        run_config=ray.train.RunConfig(name=RUN_NAME, storage_path=str(storage)),
    )
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError(f"the run in {storage} reported no checkpoint")
    with result.checkpoint.as_directory() as directory:
        seen = [
            json.loads(Path(directory, f"seen-rank{rank}.json").read_text())
            for rank in range(WORKERS)
        ]
    return dict(result.metrics or {}), seen


def write_caches(work: Path, samples: int) -> list[str]:
    """Two caches of `samples // 2` samples each; their paths."""
    sources = [Features(f"features-{part}", samples // 2, seed=part) for part in range(2)]
    results = DatasetRuntime(num_workers=2).write_cache(
        sources, work / "caches", writer_config=WriterConfig(show_progress=False)
    )
    paths = []
    for result in results:
        if not isinstance(result, CacheWriteSuccess):
            raise RuntimeError(f"writing the caches failed: {result}")
        paths.append(str(result.path))
    return paths


def compare(job: dict[str, Any], stopped: list[Any], resumed: list[Any]) -> bool:
    """Print what each rank saw; True when every rank saw exactly the uninterrupted run."""
    exact = True
    for rank in range(WORKERS):
        expected = uninterrupted(job, rank)
        together = stopped[rank] + resumed[rank]
        same = together == expected
        exact = exact and same
        print(
            f"rank {rank}: {len(stopped[rank])} samples before the stop + "
            f"{len(resumed[rank])} after the resume = {len(together)}; "
            f"uninterrupted run: {len(expected)} "
            + ("(identical sequence)" if same else "(DIFFERENT)")
        )
        if not same:
            where = next(
                (
                    i
                    for i, pair in enumerate(zip(together, expected, strict=False))
                    if pair[0] != pair[1]
                ),
                min(len(together), len(expected)),
            )
            print(f"rank {rank}: first difference at sample {where}", file=sys.stderr)
    return exact


def train_twice(job: dict[str, Any], storage: Path, verbose: bool) -> tuple[list[Any], list[Any]]:
    """Start a local Ray instance, fit() until the stop, fit() again from the run's
    checkpoint, shut Ray down; what each rank saw in each fit()."""
    private_ray_environment()
    import ray

    ray_dir = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths live in it
    started = time.perf_counter()
    try:
        # address="local": always a new instance, never one already running here.
        ray.init(
            address="local",
            num_cpus=WORKERS,
            include_dashboard=False,
            _temp_dir=ray_dir,
            log_to_driver=verbose,
            logging_level=logging.INFO if verbose else logging.ERROR,
        )
        print(f"Ray started in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        metrics, stopped = fit(job, storage)
        print(
            f"first fit(): from scratch, stopped after step {metrics['step']} "
            f"({time.perf_counter() - started:.1f} s); rank 0's loss "
            f"{metrics['first_loss']:.3f} -> {metrics['last_loss']:.3f}"
        )
        started = time.perf_counter()
        metrics, resumed = fit(job, storage)
        print(
            f"second fit(): resumed at step {metrics['resumed_at']} from the run's latest "
            f"checkpoint, ended at step {metrics['step']} ({time.perf_counter() - started:.1f} s); "
            f"rank 0's loss {metrics['first_loss']:.3f} -> {metrics['last_loss']:.3f}"
        )
    finally:
        ray.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    return stopped, resumed


def run(args: argparse.Namespace, work: Path) -> int:
    """Write the caches, stop and resume the run on Ray, check what the ranks saw."""
    samples = 1024 if args.quick else 4096
    batch_size = 16 if args.quick else 32
    steps_per_epoch = -(-samples // (WORKERS * batch_size))
    total_steps = 2 * steps_per_epoch
    stop_at = args.stop_at if args.stop_at is not None else steps_per_epoch // 2
    if not 0 < stop_at < total_steps:
        print(f"error: --stop-at must be in 1..{total_steps - 1}, got {stop_at}", file=sys.stderr)
        return 2
    job = {
        "caches": write_caches(work, samples),
        "batch_size": batch_size,
        "total_steps": total_steps,
        "stop_at": stop_at,
    }
    print(
        f"{samples} samples in 2 caches; {WORKERS} Ray Train workers (1 CPU each), "
        f"batch {batch_size} per rank, {total_steps} steps over 2 epochs "
        f"({steps_per_epoch} per epoch), stopping after step {stop_at}"
    )
    stopped, resumed = train_twice(job, work / "ray_results", args.verbose)
    if not compare(job, stopped, resumed):
        print(
            "the stopped and resumed runs did not see the uninterrupted run's samples",
            file=sys.stderr,
        )
        return 1
    total = sum(len(part) for part in stopped + resumed)
    print(
        f"exact resume: all {total} samples seen over both fit() calls are, rank by rank, "
        "the uninterrupted run's, in order"
    )
    return 0


def main() -> int:
    """Parse the command line, run in a work directory, clean it up unless it was given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples and steps")
    parser.add_argument("--stop-at", type=int, help="the step the first fit() stops after")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="an empty or new directory for the caches and the run's storage (kept)",
    )
    parser.add_argument("--verbose", action="store_true", help="show Ray's logs")
    args = parser.parse_args()
    if args.work_dir is not None and args.work_dir.exists() and any(args.work_dir.iterdir()):
        # A run's storage that holds a checkpoint would make the first fit() resume it.
        print(f"error: --work-dir {args.work_dir} is not empty", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ray_train_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, work.resolve())
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
