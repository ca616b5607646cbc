"""PyTorch integration: DataLoader workers, distributed ranks and exact resume.

Importing this module imports torch (never a dependency of the package).

- `TorchIterableDataset` (from `CachedDataset.to_torch_iterable_dataset`) reads a
  dataset's stream in DataLoader worker processes and under several ranks:
  each worker of each rank reads only its own batches, so the loaders' outputs,
  interleaved rank by rank and step by step, are exactly the single-process
  stream.
- `DataLoader` is `torch.utils.data.DataLoader` that moves the stream on by one
  epoch per iteration whatever the number of workers, and counts the batches it
  has handed out, so `state_dict()` is one global stream position: resuming it
  with any number of workers or ranks continues the same stream.

Several workers or ranks give the single-process stream only when the loader
batches at the adapter's batch size. torch does not tell a dataset its loader's
batch size, so the loader tells the adapter: `DataLoader` does at every
iteration, and `TorchIterableDataset.attach_loader` does it for another loader
(through its ``worker_init_fn``). Without it, an adapter built with a batch
size refuses to be read in the worker processes of a loader with several
workers or under several ranks.

docs/training.md describes the layout, padding, resume and the threads that run.
"""

from __future__ import annotations

import inspect
import operator
import os
import warnings
from array import array
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import torch.utils.data as torch_data

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.native import MAX_WORKERS
from dataset_rt._binding.reader import SampleIterator
from dataset_rt._records import CachedSample

__all__ = ["DataLoader", "TorchIterableDataset", "TorchMapDataset"]


@runtime_checkable
class CachedDataset(Protocol):
    """What the adapters use of a `dataset_rt.CachedDataset` (which imports this
    module when asked for an adapter, so this module does not import it)."""

    def __len__(self) -> int: ...
    def _iterate(self, share: _native.Share, skip: int) -> SampleIterator: ...
    def _open_here(self, threads: int) -> None: ...
    def _read(self, cache_ids: Any, sample_ids: Any) -> list[CachedSample]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...
    def set_epoch(self, epoch: int) -> None: ...
    def get_metadata(self) -> Any: ...
    def _take_state(self) -> dict[str, Any]: ...
    def to_torch_iterable_dataset(
        self, *, batch_size: int | None = ..., drop_last: bool = ...
    ) -> Any: ...


class TorchIterableDataset(torch_data.IterableDataset):  # type: ignore[type-arg]
    """A sized `IterableDataset` over a `CachedDataset`'s stream, for DataLoaders
    with any number of worker processes and ranks.

    Made by `CachedDataset.to_torch_iterable_dataset`. Each iteration reads the
    dataset's next epoch (or the rest of the epoch a loaded state stopped in):

    - One rank, ``dataset_rt.torch.DataLoader(adapter, batch_size=B,
      num_workers=W)`` with the adapter's own ``batch_size=B`` (or ``None`` for
      both): the loader yields the epoch's samples in order, batch k from
      worker ``k % W``. Another loader reads it with several workers or ranks
      once `attach_loader` has checked its batch size.
    - Several ranks (`rank`/`world_size`, or ``torch.distributed`` once it is
      initialized): global step g gives rank r the epoch's positions
      ``g*R*B + r*B .. + B``. Every rank yields the same number of batches:
      ``drop_last=True`` drops an incomplete last step, otherwise the last step
      is filled with the positions after the epoch (as ``DistributedSampler``
      pads). With one rank nothing is padded.

    In the main process (``num_workers=0``) iterating it moves the dataset on by
    one epoch, as iterating the dataset does. Worker processes cannot move the
    main process's dataset: with a plain ``torch.utils.data.DataLoader`` and
    workers, call `set_epoch` before each epoch, or use `dataset_rt.torch.DataLoader`,
    which does it. Each worker process reopens the caches (after checking that
    every manifest is the one opened in the main process) with a runtime of
    `worker_threads` native threads, and runs `transform` on each sample.

    Examples:
        >>> ids = lambda s: s.sample_id
        >>> halves = [
        ...     dataset.to_torch_iterable_dataset(
        ...         transform=ids, batch_size=25, rank=rank, world_size=2
        ...     )
        ...     for rank in (0, 1)
        ... ]
        >>> [len(h) for h in halves]  # each rank gets every other batch of 25
        [50, 50]
    """

    def __init__(
        self,
        dataset: CachedDataset,
        *,
        transform: Callable[[CachedSample], Any] | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        worker_threads: int = 1,
    ) -> None:
        _check_dataset_and_transform(dataset, transform)
        if not isinstance(drop_last, bool):
            raise TypeError(f"drop_last must be a bool, got {type(drop_last).__name__}")
        if (rank is None) != (world_size is None):
            raise errors.InvalidArgumentError(
                "rank and world_size must be given together (or neither)"
            )
        _check_int("batch_size", batch_size, 0, _native.U64_MAX)
        _check_int("rank", rank, 0, _native.U32_MAX)
        _check_int("world_size", world_size, 0, _native.U32_MAX)
        _check_int("worker_threads", worker_threads, 1, MAX_WORKERS)
        # The core checks the ranges (batch size, ranks, rank below world_size).
        topology = (0, 1) if rank is None or world_size is None else (rank, world_size)
        _share_counts(0, _share_of(batch_size, *topology, drop_last))
        self._dataset = dataset
        self._transform = transform
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._rank = rank
        self._world_size = world_size
        self._worker_threads = worker_threads
        # Ranks resolved in the process that pickled this adapter (spawned
        # workers have no process group of their own).
        self._inherited_topology: tuple[int, int] | None = None
        # An epoch taken by the main process for the next iteration
        # (`DataLoader`), and the process that has read it already.
        self._claim: dict[str, Any] | None = None
        self._claim_read_by: int | None = None
        # A state given to `load_state_dict`, read by the next iteration.
        self._resume: dict[str, Any] | None = None
        # This process's current iteration: its iterator, share and skipped samples.
        self._current: tuple[SampleIterator, _native.Share, int] | None = None
        # The handshake: a loader that batches at `batch_size` told this copy so
        # (`DataLoader` while it starts an iteration, which its workers' copies
        # keep; `attach_loader`'s worker_init_fn in a worker process).
        self._told_by_loader = False

    @property
    def dataset(self) -> CachedDataset:
        """The `CachedDataset` read.

        Examples:
            >>> dataset.to_torch_iterable_dataset().dataset is dataset
            True
        """
        return self._dataset

    @property
    def batch_size(self) -> int | None:
        """The per-rank batch size the DataLoader must use (``None``: samples, B = 1).

        Examples:
            >>> dataset.to_torch_iterable_dataset(batch_size=32).batch_size
            32
        """
        return self._batch_size

    @property
    def drop_last(self) -> bool:
        """Whether an incomplete last global step is dropped.

        Examples:
            >>> adapter = dataset.to_torch_iterable_dataset(batch_size=32, drop_last=True)
            >>> adapter.drop_last, len(adapter)  # 100 samples: 3 whole batches
            (True, 96)
        """
        return self._drop_last

    def rank_and_world_size(self) -> tuple[int, int]:
        """This process's rank and the number of ranks: as given, else from an
        initialized ``torch.distributed``, else ``(0, 1)``.

        Examples:
            >>> dataset.to_torch_iterable_dataset().rank_and_world_size()
            (0, 1)
            >>> dataset.to_torch_iterable_dataset(rank=1, world_size=4).rank_and_world_size()
            (1, 4)
        """
        if self._rank is not None and self._world_size is not None:
            return self._rank, self._world_size
        distributed = _initialized_distributed()
        if distributed is not None:
            return distributed.get_rank(), distributed.get_world_size()
        if self._inherited_topology is not None:
            return self._inherited_topology
        return 0, 1

    def set_epoch(self, epoch: int) -> None:
        """Make epoch `epoch` the next iteration's (see `CachedDataset.set_epoch`).

        With a plain ``torch.utils.data.DataLoader`` and worker processes, call
        it at the start of every epoch, as with ``DistributedSampler.set_epoch``.

        Examples:
            >>> import torch.utils.data
            >>> adapter = dataset.to_torch_iterable_dataset(transform=lambda s: s.sample_id)
            >>> loader = torch.utils.data.DataLoader(adapter, batch_size=None)
            >>> adapter.set_epoch(2)
            >>> epoch_2 = [int(i) for i in loader]
            >>> dataset.set_epoch(2)
            >>> epoch_2 == [s.sample_id for s in dataset]
            True
        """
        self._claim = None
        self._resume = None
        self._dataset.set_epoch(epoch)

    def __len__(self) -> int:
        """Samples this rank yields in the next iteration, padding included."""
        return int(_share_counts(len(self._dataset), self._share(0, 1)).rank_samples)

    def _share(self, worker: int, num_workers: int) -> _native.Share:
        rank, world_size = self.rank_and_world_size()
        share = _share_of(self._batch_size, rank, world_size, self._drop_last)
        share.worker, share.num_workers = worker, num_workers
        return share

    def attach_loader(self, loader: torch_data.DataLoader) -> None:  # type: ignore[type-arg]
        """Let `loader`, a DataLoader other than `dataset_rt.torch.DataLoader`
        (a plain ``torch.utils.data.DataLoader``, torchdata's
        ``StatefulDataLoader``), read this adapter with several workers or ranks.

        Checks that the loader reads this adapter with its ``batch_size`` and
        ``drop_last``, in order (``ValueError`` saying what to set otherwise), and
        tells the adapter so in each of the loader's worker processes, through
        the loader's ``worker_init_fn`` (which then runs the loader's own
        function, if any). `dataset_rt.torch.DataLoader` does this by itself at
        every iteration.

        Examples:
            >>> import torch.utils.data
            >>> adapter = dataset.to_torch_iterable_dataset(batch_size=10)
            >>> loader = torch.utils.data.DataLoader(adapter, batch_size=10, num_workers=2)
            >>> adapter.attach_loader(loader)
            >>> len(loader)
            10
            >>> other = torch.utils.data.DataLoader(adapter, batch_size=8)
            >>> adapter.attach_loader(other)
            Traceback (most recent call last):
            ...
            dataset_rt.errors.InvalidArgumentError: the DataLoader has batch_size=8 ...
        """
        if not isinstance(loader, torch_data.DataLoader):
            raise TypeError(f"loader must be a torch DataLoader, got {type(loader).__name__}")
        if loader.dataset is not self:
            raise errors.InvalidArgumentError(
                "the loader reads another dataset: attach it to its own adapter"
            )
        _check_loader_settings(
            self,
            loader.batch_size,
            loader.drop_last,
            loader.num_workers,
            getattr(loader, "in_order", True),  # torch 2.6 and later
        )
        if isinstance(loader, DataLoader):
            return  # it tells the adapter at every iteration
        if not isinstance(loader.worker_init_fn, _TellWorkers):
            loader.worker_init_fn = _TellWorkers(loader.worker_init_fn)

    def __iter__(self) -> Iterator[Any]:
        info = torch_data.get_worker_info()
        self._check_told(info)
        if info is None:
            worker, num_workers = 0, 1
        else:
            worker, num_workers = info.id, info.num_workers
            self._dataset._open_here(self._worker_threads)
        share = self._share(worker, num_workers)
        skip = self._start_position(share)
        iterator = self._dataset._iterate(share, skip)
        self._current = (iterator, share, skip)
        return self._samples(iterator)

    def _start_position(self, share: _native.Share) -> int:
        """Move the dataset to where this iteration starts; returns how many
        samples of the share to skip."""
        resume, self._resume = self._resume, None
        claim = self._claim
        if claim is not None and self._claim_read_by != os.getpid():
            self._claim_read_by = os.getpid()
        else:
            claim = None
        if resume is not None:
            self._dataset.load_state_dict(resume["span"])
            if resume["share"] is None:
                return 0
            if resume["share"] != _share_fields(share):
                raise errors.InvalidArgumentError(
                    f"this state is the share of one DataLoader reader ({resume['share']}); "
                    f"it resumes only the same reader ({_share_fields(share)}): keep the number of "
                    "workers and ranks, or resume from dataset_rt.torch.DataLoader's global state"
                )
            return int(resume["consumed"])
        if claim is not None:
            self._dataset.load_state_dict(claim)
        return 0

    def _check_told(self, info: Any) -> None:
        """In a DataLoader worker process, refuse to read a batched share under
        several workers or ranks unless the loader said it batches at
        `batch_size`: another batch size would interleave the workers' and ranks'
        batches out of stream order. One worker of one rank yields the stream in
        order whatever batches it; the main process cannot tell a loader
        (``num_workers=0``) from a loop, and reads."""
        if info is None or self._batch_size is None or self._told_by_loader:
            return
        readers = info.num_workers
        _, ranks = self.rank_and_world_size()
        if readers == 1 and ranks == 1:
            return
        parts = [f"{readers} DataLoader workers"] if readers > 1 else []
        parts += [f"{ranks} ranks"] if ranks > 1 else []
        raise errors.InvalidArgumentError(
            f"the adapter (batch_size={self._batch_size}) is read by {' and '.join(parts)}, "
            f"which give the stream in order only with a loader of batch_size="
            f"{self._batch_size}, and no loader said so: use dataset_rt.torch.DataLoader("
            f"adapter, batch_size={self._batch_size}), or call adapter.attach_loader(loader) "
            "before iterating another loader"
        )

    def _samples(self, iterator: SampleIterator) -> Iterator[Any]:
        if self._transform is None:
            yield from iterator
        else:
            yield from map(self._transform, iterator)

    def state_dict(self) -> dict[str, Any]:
        """This reader's resume state, in the form torchdata's
        ``StatefulDataLoader`` asks each worker for: the state its share was cut
        from (``span``), the share (``share``: its batch size, rank and worker),
        and the samples it has yielded (``consumed``). Between iterations, the
        dataset's state.

        Examples:
            >>> adapter = dataset.to_torch_iterable_dataset()
            >>> sorted(adapter.state_dict())
            ['consumed', 'share', 'span']
        """
        if self._current is None:
            return {"span": self._dataset.state_dict(), "share": None, "consumed": 0}
        iterator, share, skip = self._current
        return {
            "span": iterator._span(),
            "share": _share_fields(share),
            "consumed": skip + iterator.consumed(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next iteration continue from `state`: this adapter's
        `state_dict` (the same reader resumes), or a global state from
        `DataLoader.state_dict` or `CachedDataset.state_dict` (any reader).
        A reader state whose share is under the former key ``"shard"`` is read
        with a `DeprecationWarning`; that key is read until the next major
        version.

        Examples:
            >>> adapter = dataset.to_torch_iterable_dataset(transform=lambda s: s.sample_id)
            >>> state = dataset.state_dict()
            >>> first = list(adapter)
            >>> adapter.load_state_dict(state)
            >>> list(adapter) == first
            True
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a dict, got {type(state).__name__}")
        if "span" in state:
            consumed = state.get("consumed")
            if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
                raise errors.InvalidArgumentError(
                    f"state['consumed'] must be a non-negative int, got {consumed!r}"
                )
            self._resume = {
                "span": state["span"],
                "share": _state_share(state),
                "consumed": consumed,
            }
        else:
            self._resume = {"span": state, "share": None, "consumed": 0}
        self._claim = None

    def _claim_epoch(self) -> dict[str, Any]:
        """Take the next epoch in the main process for the next iteration,
        wherever its readers run; returns its state."""
        resume, self._resume = self._resume, None
        if resume is not None:
            if resume["share"] is not None:
                raise errors.InvalidArgumentError(
                    "a DataLoader reader's own state resumes through torchdata's "
                    "StatefulDataLoader; dataset_rt.torch.DataLoader resumes from its state_dict()"
                )
            self._dataset.load_state_dict(resume["span"])
        self._claim = self._dataset._take_state()
        self._claim_read_by = None
        return self._claim

    def _claim_handed_out(self) -> None:
        """The readers of the claimed epoch have started (workers have their
        copies): this process must not read it again."""
        self._claim_read_by = os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_current"] = None
        state["_inherited_topology"] = self.rank_and_world_size()
        return state

    def __copy__(self) -> TorchIterableDataset:
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._current = None
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> TorchIterableDataset:
        # The dataset is shared, as `copy` shares it: its caches are immutable.
        return self.__copy__()


class TorchMapDataset(torch_data.Dataset):  # type: ignore[type-arg]
    """A map-style `torch.utils.data.Dataset` over a `CachedDataset`'s active table.

    Made by `CachedDataset.to_torch_map_dataset`. ``len(ds)`` is the number of
    rows the table had then, and ``ds[i]`` reads row i's sample by its identity
    (`CachedDataset.get`), through `transform` when given; a DataLoader fetches
    a batch with one `CachedDataset.get_many` (``__getitems__``). The order and
    the choice of samples are the sampler's (``shuffle=True``,
    ``DistributedSampler``, your own); the dataset's stream does not move.

    The identities are kept as two arrays (12 bytes a row), so the object
    pickles compactly to spawned workers. Each worker process reopens the caches
    with a runtime of `worker_threads` native threads, as `TorchIterableDataset`
    does.

    Examples:
        >>> from torch.utils.data import DataLoader as TorchLoader
        >>> squares = dataset.to_torch_map_dataset(transform=lambda s: int(s.data))
        >>> len(squares), squares[7]
        (100, 49)
        >>> next(iter(TorchLoader(squares, batch_size=4)))
        tensor([0, 1, 4, 9])
    """

    def __init__(
        self,
        dataset: CachedDataset,
        *,
        transform: Callable[[CachedSample], Any] | None = None,
        worker_threads: int = 1,
    ) -> None:
        _check_dataset_and_transform(dataset, transform)
        _check_int("worker_threads", worker_threads, 1, MAX_WORKERS)
        from dataset_rt._core import metadata_frame as _metadata_frame

        self._dataset = dataset
        self._transform = transform
        self._worker_threads = worker_threads
        table = dataset.get_metadata().select("cache_id", "sample_id")
        self._cache_ids, self._sample_ids = _metadata_frame.identity_arrays(table)

    @property
    def dataset(self) -> CachedDataset:
        """The `CachedDataset` read.

        Examples:
            >>> dataset.to_torch_map_dataset().dataset is dataset
            True
        """
        return self._dataset

    def __len__(self) -> int:
        return len(self._sample_ids)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """The samples of rows `indices` (one read of them all)."""
        if torch_data.get_worker_info() is not None:
            self._dataset._open_here(self._worker_threads)
        count = len(self._sample_ids)
        cache_ids, sample_ids = array("Q"), array("Q")
        for index in indices:
            index = operator.index(index)  # ints, and numpy or torch integer scalars
            row = index + count if index < 0 else index
            if not 0 <= row < count:
                raise errors.SampleNotFoundError(
                    f"row {index} is out of range for a table of {count} rows"
                )
            cache_ids.append(self._cache_ids[row])
            sample_ids.append(self._sample_ids[row])
        samples = self._dataset._read(cache_ids, sample_ids)
        if self._transform is None:
            return samples
        return [self._transform(sample) for sample in samples]


class DataLoader(torch_data.DataLoader):  # type: ignore[type-arg]
    """`torch.utils.data.DataLoader` for DatasetRT, with exact, elastic resume.

    Takes the same arguments as torch's, with a `CachedDataset` (the adapter
    is made with this loader's ``batch_size`` and ``drop_last``) or a
    `TorchIterableDataset` built with the same ``batch_size`` and ``drop_last``
    (``in_order=False`` with several workers is refused). Every iteration
    tells the adapter that it batches at its batch size (the handshake its
    workers and ranks need) and reads the dataset's next epoch, with any number
    of workers. It counts the batches it has handed out: `state_dict` is the
    stream position of the next unconsumed sample with the fingerprint of the
    data, the same on every rank, and `load_state_dict` continues from it with
    any number of workers or ranks.

    Examples:
        >>> loader = DataLoader(dataset.to_torch_iterable_dataset(
        ...     transform=lambda s: s.sample_id, batch_size=10), batch_size=10)
        >>> epoch_0 = [batch.tolist() for batch in loader]
        >>> len(epoch_0), len(epoch_0[0])
        (10, 10)
    """

    def __init__(self, dataset: Any, *args: Any, **kwargs: Any) -> None:
        bound = _DATALOADER_SIGNATURE.bind(None, dataset, *args, **kwargs)
        bound.apply_defaults()
        batch_size = bound.arguments["batch_size"]
        drop_last = bound.arguments["drop_last"]
        if isinstance(dataset, CachedDataset):
            dataset = dataset.to_torch_iterable_dataset(batch_size=batch_size, drop_last=drop_last)
        elif not isinstance(dataset, TorchIterableDataset):
            raise TypeError(
                "dataset_rt.torch.DataLoader reads a CachedDataset or its "
                f"to_torch_iterable_dataset() adapter, got {type(dataset).__name__}"
            )
        arguments = bound.arguments
        _check_loader_settings(
            dataset,
            batch_size,
            drop_last,
            arguments["num_workers"],
            arguments.get("in_order", True),
        )
        bound.arguments["dataset"] = dataset
        super().__init__(*bound.args[1:], **bound.kwargs)
        self._span: dict[str, Any] | None = None
        self._steps = 0
        self._expected_next: dict[str, Any] | None = None
        self._counting: _CountingIterator | None = None
        self._workers_kept = False  # persistent workers have started

    def __iter__(self) -> _CountingIterator:  # type: ignore[override]
        adapter: TorchIterableDataset = self.dataset  # type: ignore[assignment]
        span = adapter._claim_epoch()
        if self._workers_kept and span != self._expected_next:
            raise errors.StateError(
                "persistent DataLoader workers continue the epochs they started with and "
                "cannot follow set_epoch, load_state_dict or update_metadata; create a new "
                "DataLoader after changing the dataset"
            )
        self._span, self._steps = span, 0
        self._expected_next = {
            **span,
            "epoch": span["epoch"] + 1,
            "epoch_start": span["epoch_start"] + span["epoch_len"],
            "position": span["epoch_start"] + span["epoch_len"],
        }
        # The handshake: the readers this starts (the main process's iterator,
        # the workers' copies of the adapter) see that this loader batches at the
        # adapter's batch size; readers started later by another loader do not.
        adapter._told_by_loader = True
        try:
            iterator = super().__iter__()
        finally:
            adapter._told_by_loader = False
        self._workers_kept = self.persistent_workers and self.num_workers > 0
        adapter._claim_handed_out()
        self._counting = _CountingIterator(self, iterator)
        return self._counting

    def state_dict(self) -> dict[str, Any]:
        """The resume state: the stream position of the next sample not yet
        handed out (over all ranks, which move in step), its epoch, and the
        fingerprint of the data (manifest SHA-256s, active-table digest, seed,
        ``shuffle``, ``epoch_len``, sampling algorithm). Small and global: no
        per-worker or per-rank part.

        Examples:
            >>> loader = DataLoader(dataset, batch_size=10)
            >>> batches = iter(loader)
            >>> _ = next(batches), next(batches)
            >>> loader.state_dict()["position"]  # two batches handed out
            20
        """
        adapter: TorchIterableDataset = self.dataset  # type: ignore[assignment]
        if self._span is None:
            return adapter.dataset.state_dict()
        span = self._span
        start = _native.StreamPosition(
            epoch=span["epoch"],
            epoch_start=span["epoch_start"],
            epoch_len=span["epoch_len"],
            position=span["position"],
        )
        after = _native.stream_after_steps(start, adapter._share(0, 1), self._steps)
        return {
            **span,
            "epoch": after.epoch,
            "epoch_start": after.epoch_start,
            "position": after.position,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state` (from `state_dict`, in any process, with any
        number of workers and ranks): the next iteration yields the rest of its
        epoch. Raises `ValueError` naming what differs when the state belongs
        to other data (caches, active table or weights, seed, ``shuffle``,
        ``epoch_len``); nothing changes then.

        Examples:
            >>> ids = lambda s: s.sample_id
            >>> adapter = dataset.to_torch_iterable_dataset(transform=ids, batch_size=10)
            >>> loader = DataLoader(adapter, batch_size=10)
            >>> batches = iter(loader)
            >>> seen = [next(batches).tolist() for _ in range(3)]
            >>> state = loader.state_dict()  # checkpoint, then a new job:
            >>> again = runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
            >>> adapter = again.to_torch_iterable_dataset(transform=ids, batch_size=10)
            >>> resumed = DataLoader(adapter, batch_size=10)
            >>> resumed.load_state_dict(state)
            >>> rest = [batch.tolist() for batch in resumed]
            >>> len(seen) + len(rest)
            10
        """
        adapter: TorchIterableDataset = self.dataset  # type: ignore[assignment]
        adapter.dataset.load_state_dict(state)
        adapter._resume = None
        self._span = None


class _CountingIterator:
    """The torch iterator of one `DataLoader` iteration, counting what it hands out."""

    __slots__ = ("_loader", "_iterator")

    def __init__(self, loader: DataLoader, iterator: Any) -> None:
        self._loader = loader
        self._iterator = iterator

    def __iter__(self) -> _CountingIterator:
        return self

    def __next__(self) -> Any:
        loader = self._loader
        try:
            batch = next(self._iterator)
        except StopIteration:
            if loader._counting is self:
                loader._span = None
            raise
        if loader._counting is self:
            loader._steps += 1
        return batch

    def __len__(self) -> int:
        return len(self._iterator)


_DATALOADER_SIGNATURE = inspect.signature(torch_data.DataLoader.__init__)


def _share_fields(share: _native.Share) -> dict[str, int]:
    return {
        name: int(getattr(share, name))
        for name in (field[0] for field in _native.Share._fields_)
        if name != "reserved"
    }


def _state_share(state: Mapping[str, Any]) -> Any:
    """A reader state's share: its ``share`` entry, or the ``shard`` entry that
    holds it in states saved under the former name (deprecated)."""
    if "share" in state or "shard" not in state:
        return state.get("share")
    warnings.warn(
        "this reader state names its share 'shard', the former name of 'share', which is "
        "read until the next major version: save the state again with state_dict()",
        DeprecationWarning,
        stacklevel=3,
    )
    return state["shard"]


def _share_of(batch_size: int | None, rank: int, world_size: int, drop_last: bool) -> _native.Share:
    return _native.Share(
        batch_size=1 if batch_size is None else batch_size,
        rank=rank,
        world_size=world_size,
        worker=0,
        num_workers=1,
        drop_last=int(drop_last),
    )


def _share_counts(span_len: int, share: _native.Share) -> _native.ShareCounts:
    """How `span_len` positions divide among `share`'s ranks and workers; the
    core refuses a share out of range (`ValueError` naming the value)."""
    return _native.share_counts(span_len, share)


def _initialized_distributed() -> Any:
    try:
        import torch.distributed as distributed
    except ImportError:
        return None
    if distributed.is_available() and distributed.is_initialized():
        return distributed
    return None


def _check_dataset_and_transform(dataset: object, transform: object) -> None:
    if not isinstance(dataset, CachedDataset):
        raise TypeError(f"dataset must be a CachedDataset, got {type(dataset).__name__}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable, got {type(transform).__name__}")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    """A Python int within the C field's range (None passes: not given)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise errors.InvalidArgumentError(f"{name} must be between {low} and {high}, got {value}")


def _check_loader_settings(
    adapter: TorchIterableDataset,
    batch_size: int | None,
    drop_last: bool,
    num_workers: int,
    in_order: bool,
) -> None:
    """Refuse a loader that would not hand out the adapter's batches in stream
    order: another batch size or ``drop_last``, or workers' batches taken as
    they finish."""
    if (adapter.batch_size or 1) != (batch_size or 1):
        raise errors.InvalidArgumentError(
            f"the DataLoader has batch_size={batch_size} and the adapter "
            f"batch_size={adapter.batch_size}: pass DataLoader(batch_size={adapter.batch_size}) "
            f"or build the adapter with to_torch_iterable_dataset(batch_size={batch_size})"
        )
    if adapter.drop_last != drop_last:
        raise errors.InvalidArgumentError(
            f"the adapter was built with drop_last={adapter.drop_last} and the loader has "
            f"drop_last={drop_last}: set both the same"
        )
    if num_workers > 1 and not in_order:
        raise errors.InvalidArgumentError(
            "the DataLoader has in_order=False, which hands out its workers' batches as "
            "they finish, out of stream order: keep in_order=True"
        )


class _TellWorkers:
    """A DataLoader's ``worker_init_fn`` that tells the worker's copy of the
    adapter that its loader was checked (`TorchIterableDataset.attach_loader`),
    then runs the loader's own function. Picklable for spawned workers when that
    function is."""

    __slots__ = ("_then",)

    def __init__(self, then: Callable[[int], None] | None) -> None:
        self._then = then

    def __call__(self, worker_id: int) -> None:
        info = torch_data.get_worker_info()
        if info is not None and isinstance(info.dataset, TorchIterableDataset):
            info.dataset._told_by_loader = True
        if self._then is not None:
            self._then(worker_id)
