"""`CachedDataset.to_torch_dataloader`: dataset-rt 0.4.8's keywords, resolved into
our exact, resumable `dataset_rt.torch.DataLoader`.

Importing this module imports torch; `CachedDataset` imports it when called.
docs/training.md says what each keyword does here and where 0.4.8 differs.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any, Protocol

from dataset_rt import errors
from dataset_rt._config import ReaderConfig
from dataset_rt._core import cpus as _cpus
from dataset_rt.torch import DataLoader

_LOG = logging.getLogger("dataset_rt.loader")
_CONTEXTS = ("inherit", "fork", "spawn", "forkserver")
_PARTITIONS = (None, "split", "replicate")
# The keywords `to_torch_dataloader` sets itself; `dataloader_kwargs` may not.
_OWN_KEYWORDS = frozenset(
    {
        "dataset",
        "sampler",
        "batch_sampler",
        "shuffle",
        "batch_size",
        "collate_fn",
        "num_workers",
        "drop_last",
        "pin_memory",
        "timeout",
        "multiprocessing_context",
        "worker_init_fn",
        "prefetch_factor",
        "persistent_workers",
    }
)


class CachedDataset(Protocol):
    """What this module uses of a `dataset_rt.CachedDataset` (which imports this
    module when called, so this module does not import it)."""

    @property
    def reader_config(self) -> ReaderConfig: ...
    def state_dict(self) -> dict[str, Any]: ...
    def _with_stream(self, config: ReaderConfig, epoch_len: int | None) -> CachedDataset: ...
    def to_torch_iterable_dataset(
        self,
        *,
        transform: Callable[[Any], Any] | None = ...,
        batch_size: int | None = ...,
        drop_last: bool = ...,
        worker_threads: int = ...,
    ) -> Any: ...


@dataclass(frozen=True)
class LoaderRequest:
    """The arguments of `CachedDataset.to_torch_dataloader`, as given."""

    batch_size: Any
    sample_transform_fn: Any
    collate_fn: Any
    shuffle: Any
    seed: Any
    samples_per_epoch: Any
    worker_partition: Any
    work_dir: Any
    num_workers: Any
    drop_last: Any
    pin_memory: Any
    timeout: Any
    native_num_workers: Any
    multiprocessing_context: Any
    worker_init_fn: Any
    prefetch_factor: Any
    persistent_workers: Any
    verbose: Any
    dataloader_kwargs: Any


def make_loader(dataset: CachedDataset, request: LoaderRequest) -> DataLoader:
    """The `DataLoader` `request` describes, over `dataset` or (when the stream's
    shuffle, seed or epoch length differ from the dataset's) over a copy of it."""
    _check_plain(request)
    extra = _extra_keywords(request.dataloader_kwargs)
    source = _stream_dataset(dataset, request.shuffle, request.seed, request.samples_per_epoch)
    workers, threads = _topology(request.num_workers, request.native_num_workers)
    context = _context(request.multiprocessing_context, workers)
    prefetch = _prefetch(request.prefetch_factor, workers)
    persistent = _persistent(request.persistent_workers, workers)
    if workers > 0 and _start_method(context) != "fork":
        for name in ("sample_transform_fn", "collate_fn", "worker_init_fn"):
            _check_pickles(name, getattr(request, name), context)
    adapter = source.to_torch_iterable_dataset(
        transform=request.sample_transform_fn,
        batch_size=request.batch_size,
        drop_last=request.drop_last,
        worker_threads=threads,
    )
    loader = DataLoader(
        adapter,
        batch_size=request.batch_size,
        drop_last=request.drop_last,
        collate_fn=request.collate_fn,
        num_workers=workers,
        pin_memory=request.pin_memory,
        timeout=request.timeout,
        worker_init_fn=request.worker_init_fn,
        multiprocessing_context=None if context == "inherit" else context,
        prefetch_factor=prefetch,
        persistent_workers=persistent,
        **extra,
    )
    if request.verbose:
        _LOG.info(
            "DataLoader: batch_size=%d, num_workers=%d, native threads per worker=%d, "
            "multiprocessing_context=%s, prefetch_factor=%s, persistent_workers=%s, "
            "stream: seed=%d shuffle=%s samples_per_epoch=%d (%s)",
            request.batch_size,
            workers,
            threads,
            context,
            prefetch,
            persistent,
            source.reader_config.seed,
            source.reader_config.shuffle,
            source.state_dict()["epoch_len"],
            "this dataset" if source is dataset else "a copy of the dataset",
        )
    return loader


def local_ranks() -> int:
    """The training processes of this machine: ``LOCAL_WORLD_SIZE`` (torchrun sets
    it), else the world size of an initialized ``torch.distributed``, else 1."""
    given = os.environ.get("LOCAL_WORLD_SIZE")
    if given is not None:
        try:
            count = int(given)
        except ValueError:
            count = 0
        if count < 1:
            raise errors.InvalidArgumentError(
                f"LOCAL_WORLD_SIZE must be a positive integer, got {given!r}"
            )
        return count
    import torch.distributed as distributed

    if distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_world_size())
    return 1


def _check_plain(request: LoaderRequest) -> None:
    """The keywords passed on as they are: their types and ranges."""
    _check_count("batch_size", request.batch_size, 1, sys.maxsize)
    for name in ("drop_last", "pin_memory", "verbose"):
        value = getattr(request, name)
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")
    for name in ("sample_transform_fn", "collate_fn", "worker_init_fn"):
        value = getattr(request, name)
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
    timeout = request.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise errors.InvalidArgumentError(
            f"timeout must be a number of seconds >= 0, got {timeout!r}"
        )
    if request.worker_partition not in _PARTITIONS:
        raise errors.InvalidArgumentError(
            f"worker_partition must be None, 'split' or 'replicate', got "
            f"{request.worker_partition!r}"
        )
    work_dir = request.work_dir
    if work_dir is not None and not Path(os.fspath(work_dir)).is_dir():
        raise errors.InvalidArgumentError(
            f"work_dir must be an existing directory, got {os.fspath(work_dir)!r}"
        )


def _check_count(name: str, value: object, low: int, high: int, kind: str = "an int") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {kind}, got {value!r}")
    if not low <= value <= high:
        raise errors.InvalidArgumentError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _extra_keywords(given: object) -> dict[str, Any]:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(f"dataloader_kwargs must be a mapping, got {type(given).__name__}")
    taken = sorted(_OWN_KEYWORDS.intersection(given))
    if taken:
        raise errors.InvalidArgumentError(
            f"dataloader_kwargs must not set {', '.join(taken)}: pass it as a keyword of "
            "to_torch_dataloader (dataset, sampler, batch_sampler and shuffle are its own)"
        )
    return dict(given)


def _stream_dataset(
    dataset: CachedDataset, shuffle: object, seed: object, samples_per_epoch: object
) -> CachedDataset:
    """`dataset` when the stream asked for is its own, else a copy with that stream."""
    config: ReaderConfig = dataset.reader_config
    if shuffle is not None and not isinstance(shuffle, bool):
        raise TypeError(f"shuffle must be a bool or None, got {shuffle!r}")
    if isinstance(seed, str):
        raise errors.InvalidArgumentError(
            f"seed={seed!r} is not supported: a DatasetRT stream is keyed by an explicit seed, "
            "which every resume state records; pass an int, or leave seed out to use the "
            f"dataset's (ReaderConfig(seed={config.seed}))"
        )
    if seed is not None:
        _check_count("seed", seed, 0, 2**64 - 1)
    epoch_len = int(dataset.state_dict()["epoch_len"])
    wanted_len = epoch_len
    if samples_per_epoch is not None:
        wanted_len = _check_count("samples_per_epoch", samples_per_epoch, 1, sys.maxsize)
    wanted = ReaderConfig(
        **{
            **config.model_dump(),
            "shuffle": config.shuffle if shuffle is None else shuffle,
            "seed": config.seed if seed is None else seed,
        }
    )
    if wanted == config and wanted_len == epoch_len:
        return dataset
    return dataset._with_stream(wanted, None if wanted_len == epoch_len else wanted_len)


def _topology(num_workers: object, native_num_workers: object) -> tuple[int, int]:
    """(DataLoader worker processes, native threads of each), "auto" resolved."""
    cpus: int | None = None
    if num_workers == "auto" or native_num_workers == "auto":
        cpus, ranks = _cpus.usable_cpu_count(), local_ranks()
    if num_workers == "auto":
        assert cpus is not None
        workers = _cpus.loader_workers(cpus, ranks)
    else:
        workers = _check_count("num_workers", num_workers, 0, 1024, "an int or 'auto'")
    if native_num_workers == "auto":
        assert cpus is not None
        threads = _cpus.native_threads(cpus, workers, ranks)
    else:
        threads = _check_count(
            "native_num_workers", native_num_workers, 1, 1024, "an int or 'auto'"
        )
    return workers, threads


def _context(given: object, workers: int) -> str | BaseContext:
    if not isinstance(given, BaseContext) and given not in _CONTEXTS:
        raise errors.InvalidArgumentError(
            f"multiprocessing_context must be one of {', '.join(map(repr, _CONTEXTS))} or a "
            f"multiprocessing context, got {given!r}"
        )
    return "inherit" if workers == 0 else given


def _prefetch(given: object, workers: int) -> int | None:
    if given == "auto":
        return 2 if workers > 0 else None
    value = _check_count("prefetch_factor", given, 1, 2**31 - 1, "an int or 'auto'")
    if workers == 0:
        raise errors.InvalidArgumentError(
            f"prefetch_factor={value} needs num_workers > 0 (batches are prefetched by "
            "worker processes): leave it 'auto'"
        )
    return value


def _persistent(given: object, workers: int) -> bool:
    if given == "auto":
        return workers > 0
    if not isinstance(given, bool):
        raise TypeError(f"persistent_workers must be a bool or 'auto', got {given!r}")
    if given and workers == 0:
        raise errors.InvalidArgumentError(
            "persistent_workers=True needs num_workers > 0: leave it 'auto'"
        )
    return given


def _start_method(context: str | BaseContext) -> str:
    if isinstance(context, BaseContext):
        return str(context.get_start_method())
    return multiprocessing.get_start_method() if context == "inherit" else context


def _check_pickles(name: str, value: Callable[..., Any] | None, context: object) -> None:
    """Worker processes started by ``spawn`` or ``forkserver`` receive `value` pickled."""
    if value is None:
        return
    try:
        pickle.dumps(value)
    except Exception as error:  # noqa: BLE001 - any pickling failure is reported alike
        method = context if isinstance(context, str) else type(context).__name__
        raise errors.InvalidArgumentError(
            f"{name} cannot be pickled ({type(error).__name__}: {error}), and worker "
            f"processes started with multiprocessing_context={method!r} receive it pickled: "
            "define it at module level, or use num_workers=0"
        ) from None
