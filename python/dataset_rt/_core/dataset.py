"""`CachedDataset`: caches loaded for reading, iterated by the core."""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.fork_safe_lock import ForkSafeLock
from dataset_rt._binding.native import RuntimeHandle
from dataset_rt._binding.reader import CachePath, DatasetHandle, NativeIterator, SampleIterator
from dataset_rt._binding.remote import RemoteStats
from dataset_rt._config import ReaderConfig, RemoteConfig
from dataset_rt._core import mixing as _mixing
from dataset_rt._records import CachedSample

if TYPE_CHECKING:
    import polars as pl

    from dataset_rt._core import metadata_frame as _metadata_frame
    from dataset_rt._core.migration import ManifestUpdateReport
    from dataset_rt.torch import DataLoader, TorchIterableDataset, TorchMapDataset


class CachedDataset:
    """Immutable caches loaded for reading; iterate it for `CachedSample`s.

    Create it with `DatasetRuntime.cached_dataset` or `from_cache_sources`.
    A dataset pickles as what it is made of (cache paths, configuration,
    active table as Arrow IPC, epoch length, stream position): unpickled in
    another process, it reopens the caches on first use, with a runtime of as
    many threads as the original's, after checking that each cache's manifest
    is still the one it was opened with.

    Examples:
        >>> dataset = runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
        >>> sample = next(iter(dataset))
        >>> sample.data == str(sample.metadata["i"] ** 2).encode()
        True
        >>> config = ReaderConfig(seed=0, shuffle=False)
        >>> in_order = runtime.cached_dataset([cache_path], reader_config=config)
        >>> [s.sample_id for s in in_order][:3]
        [0, 1, 2]
    """

    cache_paths: list[CachePath]
    """The loaded caches, in the order they were given: local folders as `Path`s,
    remote caches as their URLs (`str`)."""

    remote_config: RemoteConfig | None
    """How the remote caches are fetched (`RemoteConfig`); None when none was given."""

    reader_config: ReaderConfig
    """The configuration the dataset was loaded with."""

    _native_handle: DatasetHandle | None
    _identity_columns: _metadata_frame.IdentityColumns | None
    _epoch_len: int | None
    _mix: list[_mixing.Entry] | None
    _extra_columns: pl.DataFrame | None
    _unopened_recipe: dict[str, Any] | None
    _metadata_lock: ForkSafeLock

    def __init__(self) -> None:
        raise TypeError("use DatasetRuntime.cached_dataset() to create a CachedDataset")

    @classmethod
    def _open(
        cls,
        runtime: RuntimeHandle,
        paths: list[CachePath],
        config: ReaderConfig,
        remote: RemoteConfig | None = None,
    ) -> CachedDataset:
        dataset = cls._blank(paths, config, remote)
        dataset._native_handle = DatasetHandle(runtime, paths, config, remote)
        return dataset

    @classmethod
    def _blank(
        cls, paths: list[CachePath], config: ReaderConfig, remote: RemoteConfig | None
    ) -> CachedDataset:
        dataset = cls.__new__(cls)
        dataset.cache_paths = paths
        dataset.reader_config = config
        dataset.remote_config = remote
        dataset._native_handle = None
        # What reopening needs and the core cannot be asked for from a forked
        # child: the identity and weight columns of the last table installed,
        # and an explicit epoch length.
        dataset._identity_columns = None
        dataset._epoch_len = None
        dataset._mix = None
        dataset._extra_columns = None
        dataset._unopened_recipe = None
        # Keeps the core's table and the extra columns of the same update together.
        dataset._metadata_lock = ForkSafeLock()
        return dataset

    @property
    def _handle(self) -> DatasetHandle:
        handle = self._native_handle
        if handle is None:
            recipe = self._unopened_recipe
            assert recipe is not None
            handle = self._reopen(recipe, recipe["num_workers"])
        return handle

    @property
    def cache_ids(self) -> list[int]:
        """The ``cache_id`` of each cache of `cache_paths`, in that order.

        A format 3 cache's id is the one its manifest stores; a format 2
        cache's id is its position in `cache_paths` (docs/storage-format.md,
        "Format 3: persisted cache ids").

        Examples:
            >>> dataset.cache_ids
            [0]
        """
        return list(self._handle.cache_ids)

    def remote_stats(self) -> RemoteStats:
        """What this dataset's remote caches have fetched in this process: files and
        bytes, shards and their bytes, and shards fetched again after a SHA-256
        mismatch (`RemoteStats`). All zero when every cache is local.

        Examples:
            >>> dataset.remote_stats().shards_fetched
            0
        """
        remote = self._handle.remote
        if remote is None:
            return RemoteStats(0, 0, 0, 0, 0)
        return remote.stats()

    def __len__(self) -> int:
        """Samples the next iteration yields: the epoch length, or what is left
        of the epoch a loaded state stopped in."""
        return self._handle.len()

    def __iter__(self) -> SampleIterator:
        """Start the next epoch of the sample stream (see `ReaderConfig.shuffle`)."""
        return SampleIterator._start(self._handle)

    def _iterate(self, share: _native.Share, skip: int) -> SampleIterator:
        """The next epoch's share of one rank's DataLoader worker (see `drt_share`)."""
        return SampleIterator._start(self._handle, share, skip)

    def set_epoch_len(self, epoch_len: int) -> None:
        """Make every following iterator yield `epoch_len` (>= 1) samples.

        Iterators continue the stream: with epoch_len 2 over rows 1..5 and
        shuffle=False, successive iterators yield ``1 2``, ``3 4``, ``5 1``.

        Examples:
            >>> dataset.set_epoch_len(250)
            >>> len(dataset), len(list(dataset))
            (250, 250)
        """
        if isinstance(epoch_len, bool) or not isinstance(epoch_len, int):
            raise TypeError(f"epoch_len must be an int, got {type(epoch_len).__name__}")
        # The core refuses 0; a negative value cannot reach it.
        if epoch_len < 0:
            raise errors.InvalidArgumentError(f"epoch_len must be at least 1, got {epoch_len}")
        if epoch_len > sys.maxsize:
            # len(ds) returns it, and Python lengths stop at sys.maxsize.
            raise errors.InvalidArgumentError(
                f"epoch_len must be at most sys.maxsize ({sys.maxsize}), got {epoch_len}"
            )
        self._handle.set_epoch_len(epoch_len)
        self._epoch_len = epoch_len

    def set_mix(self, mix: _mixing.MixSpec | None) -> None:
        """Mix the caches without replacement: each epoch holds an exact count of
        samples of every cache, in one random order (docs/training.md, "Mixing
        datasets"; docs/determinism.md specifies it).

        Keys are cache ids (`cache_ids`), or a cache's folder name when exactly
        one cache has it; values are `Mix`. Either every entry is ``repeat`` or
        ``choose`` (a cache not listed has ``repeat=1.0``; the epoch length is the
        sum of the counts, so `set_epoch_len` is refused), or every cache has a
        ``proportion`` (summing to 1) of the epoch length `set_epoch_len` gives.
        Needs ``ReaderConfig(replacement=False)`` and equal weights; it is kept
        across `update_metadata` (a cache's rows are its active rows) and is part
        of resume states. Resets the stream like a new table. ``None`` goes back
        to the plain table.

        Examples:
            >>> config = ReaderConfig(seed=0, replacement=False)
            >>> mixed = runtime.cached_dataset([cache_path], reader_config=config)
            >>> mixed.set_mix({0: Mix(repeat=2.5)})
            >>> len(mixed), sorted(s.sample_id for s in mixed).count(7) in (2, 3)
            (250, True)
            >>> mixed.set_mix(None)
            >>> len(mixed)
            100
        """
        handle = self._handle
        if mix is None:
            entries: list[_mixing.Entry] = []
        else:
            entries = _mixing.mix_entries(mix, self.cache_paths, self.cache_ids)
        handle.set_mix(entries)
        self._mix = entries or None

    def mix_counts(self) -> dict[int, int] | None:
        """Samples of each cache (by cache id) in every epoch under the mix; None
        without a mix.

        Examples:
            >>> config = ReaderConfig(seed=0, replacement=False)
            >>> mixed = runtime.cached_dataset([cache_path], reader_config=config)
            >>> mixed.set_mix({0: Mix(choose=30)})
            >>> mixed.mix_counts()
            {0: 30}
        """
        counts = self._handle.mix_counts()
        if counts is None:
            return None
        return dict(zip(self.cache_ids, counts, strict=True))

    def set_epoch(self, epoch: int) -> None:
        """Make epoch `epoch` (counted from 0 since the table was installed) the
        next iterator's, from its start.

        Epoch e covers stream positions ``e * len(dataset)`` onwards, as if every
        epoch had the current length. Call it at the start of each epoch when a
        plain ``torch.utils.data.DataLoader`` with worker processes reads the
        dataset, as with ``DistributedSampler.set_epoch``: the workers read the
        epoch the dataset stands at and cannot move it on in this process.

        Examples:
            >>> epochs = [[s.sample_id for s in dataset] for _ in range(3)]
            >>> dataset.set_epoch(1)
            >>> [s.sample_id for s in dataset] == epochs[1]
            True
        """
        _check_index("epoch", epoch)
        self._handle.set_epoch(epoch)

    def _take_state(self) -> dict[str, Any]:
        """Like `state_dict`, and moves the stream past that epoch: for a process
        that hands the epoch to others (DataLoader workers) to read."""
        return self._handle.take_state()

    def state_dict(self) -> dict[str, Any]:
        """Where the next iterator starts, with the fingerprint of the data.

        A dict of primitives: ``epoch``, ``epoch_start`` and ``position`` (the
        next unconsumed stream position), and what the stream is a function of:
        each cache's manifest SHA-256 (``caches``), a digest of the active table's
        identities and weights (``table``), ``seed``, ``shuffle``, ``epoch_len``
        and the sampling ``algorithm``. An iterator's `SampleIterator.state_dict`
        gives the state in the middle of an epoch.

        Examples:
            >>> state = dataset.state_dict()
            >>> state["epoch"], state["position"], state["seed"]
            (0, 0, 0)
            >>> _ = list(dataset)
            >>> dataset.state_dict()["epoch"]
            1
        """
        return self._handle.state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the stream from `state` (from `state_dict` here, an iterator,
        or `dataset_rt.torch.DataLoader`): the next iterator yields the rest of
        its epoch and the one after it the next epoch, exactly as the run that
        saved it continued.

        Raises `ValueError` naming what differs when the state belongs to other
        data: other caches, another active table or weights, another seed,
        `shuffle` or epoch length. Nothing changes then.

        Examples:
            >>> iterator = iter(dataset)
            >>> first = [next(iterator).sample_id for _ in range(30)]
            >>> state = iterator.state_dict()
            >>> again = runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
            >>> again.load_state_dict(state)
            >>> first + [s.sample_id for s in again] == [s.sample_id for s in
            ...     runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))]
            True
        """
        self._handle.load_state(state)

    def get_metadata(self) -> pl.DataFrame:
        """The active table: ``cache_id | sample_id | <stored columns> | weight | <extra columns>``.

        A copy: editing it changes nothing until it is passed to `update_metadata`.

        Examples:
            >>> table = dataset.get_metadata()
            >>> table.columns
            ['cache_id', 'sample_id', 'i', 'label', 'weight']
            >>> table.height
            100
        """
        from dataset_rt._core import (
            metadata_frame as _metadata_frame,  # Polars is loaded on first use
        )

        with self._metadata_lock.held():
            return _metadata_frame.read(self._handle, self._extra_columns)

    def update_metadata(self, metadata: pl.DataFrame) -> None:
        """Replace the active table (rows, order, weights) from a frame like `get_metadata`'s.

        Rows may be filtered, reordered and duplicated; extra columns are kept.
        The core validates the frame (identities known, stored columns with
        their types, weights positive and finite) before anything changes, then
        resets the stream position; the epoch length is kept. The dataset keeps
        the frame's identity and weight columns (widened to 64 bits: a copy
        unless they were Int64 and Float64), from which worker processes
        rebuild the table.

        Examples:
            >>> import polars as pl
            >>> table = dataset.get_metadata()
            >>> dataset.update_metadata(table.filter(pl.col("label") == 3))  # 10 rows
            >>> sorted({s.metadata["label"] for s in dataset}), len(dataset)
            ([3], 10)
            >>> dataset.update_metadata(table.with_columns(weight=pl.col("i") + 1.0))
        """
        from dataset_rt._core import (
            metadata_frame as _metadata_frame,  # Polars is loaded on first use
        )

        with self._metadata_lock.held():
            handle = self._handle
            self._extra_columns = _metadata_frame.install(handle, metadata)
            self._identity_columns = _metadata_frame.IdentityColumns(metadata)
            handle.refresh_mirror()

    samples_metadata = get_metadata
    set_samples_metadata = update_metadata

    def update_manifests(self, version: int) -> ManifestUpdateReport:
        """Make every format 2 cache of the dataset format 3, keeping its cache_id.

        A format 2 cache's id is its position in `cache_paths`; migrating writes
        that id into its manifest, so samples keep their ids (and saved tables
        keep naming them) however the caches are listed afterwards. Only
        manifest.json changes, atomically; format 3 caches are left unchanged,
        so running it again is safe. Every cache is checked before anything is
        written: a cache a writer is writing (its lock in the base folder's
        ``tmp/`` held) is refused (`errors.StateError`), and so is a manifest
        that could not be rewritten without loss. Afterwards dataset-rt 0.2.4 no
        longer reads the caches, and resume states saved before name the old
        manifests: take new ones. This dataset keeps naming the old manifests
        too, so open the caches again before pickling it or handing it to
        DataLoader workers. ``version`` must be 3.

        Examples:
            >>> quiet = WriterConfig(show_progress=False)
            >>> [written] = runtime.write_cache(Squares(10), "caches", writer_config=quiet)
            >>> legacy = runtime.cached_dataset([written.path], reader_config=ReaderConfig(seed=0))
            >>> report = legacy.update_manifests(version=3)
            >>> [(entry.cache_id, entry.status) for entry in report.entries]
            [(0, 'updated')]
            >>> [entry.status for entry in legacy.update_manifests(version=3).entries]
            ['unchanged']
        """
        from dataset_rt._core import migration as _migration

        _migration.check_version(version)
        local = [path for path in self.cache_paths if isinstance(path, Path)]
        if len(local) != len(self.cache_paths):
            remote = next(path for path in self.cache_paths if not isinstance(path, Path))
            raise errors.InvalidArgumentError(
                f"update_manifests rewrites local caches; {remote} is remote: migrate the "
                "cache where it was written and upload its new manifest.json"
            )
        return _migration.update_manifests(local, self.cache_ids)

    # ---- random access --------------------------------------------------------

    def get(self, cache_id: int, sample_id: int) -> CachedSample:
        """The sample `(cache_id, sample_id)`, read and checked as iteration reads it.

        Any sample of the caches, in the active table or not; the stream does not
        move. Raises `IndexError` naming the identity when there is no such sample.

        Examples:
            >>> dataset.get(0, 12)
            CachedSample(data=b'144', metadata={'i': 12, 'label': 2}, cache_id=0, sample_id=12)
        """
        return self.get_many([(cache_id, sample_id)])[0]

    def get_many(self, pairs: Iterable[tuple[int, int]] | pl.DataFrame) -> list[CachedSample]:
        """The samples named by `pairs`, in order, read on the runtime's threads.

        `pairs` is any iterable of ``(cache_id, sample_id)``, or a Polars frame
        with ``cache_id`` and ``sample_id`` columns (a filtered `get_metadata()`,
        say). Each sample is read and checked as iteration reads it (embedded
        metadata compared with the index, lz4 decoded); repeated identities are
        read as often as they are named. Raises `IndexError` naming the first
        identity that names no sample, before anything is read.

        Examples:
            >>> [s.data for s in dataset.get_many([(0, 3), (0, 4), (0, 3)])]
            [b'9', b'16', b'9']
            >>> import polars as pl
            >>> sevens = dataset.get_metadata().filter(pl.col("label") == 7)
            >>> [s.sample_id for s in dataset.get_many(sevens)][:3]
            [7, 17, 27]
        """
        return self._read(*_identity_arrays(pairs))

    def _read(self, cache_ids: array[int], sample_ids: array[int]) -> list[CachedSample]:
        """The samples (cache_ids[i], sample_ids[i]) (uint64 arrays)."""
        if not sample_ids:
            return []
        native = NativeIterator(self._handle, identities=(cache_ids, sample_ids))
        samples: list[CachedSample] = []
        try:
            while (batch := native.next_batch()) is not None:
                # Reads by identity never skip (the core fails them instead).
                samples.extend(batch[0])
        finally:
            native.close()
        return samples

    def to_torch_map_dataset(
        self,
        transform: Callable[[CachedSample], Any] | None = None,
        *,
        worker_threads: int = 1,
    ) -> TorchMapDataset:
        """A map-style `torch.utils.data.Dataset` over the active table's rows.

        ``len`` is the number of rows and ``ds[i]`` is row i's sample (through
        `transform` when given), so ``DistributedSampler``, custom samplers and
        ``DataLoader(ds, shuffle=True, num_workers=W)`` apply. The rows are the
        table's when this is called; a DataLoader's batch is fetched with one
        `get_many`. See `dataset_rt.torch.TorchMapDataset`.

        Examples:
            >>> images = dataset.to_torch_map_dataset(transform=lambda s: int(s.data))
            >>> len(images), images[12]
            (100, 144)
        """
        try:
            import_module("torch.utils.data")
        except ImportError as error:
            raise ImportError(
                "CachedDataset.to_torch_map_dataset requires PyTorch; install torch to use it"
            ) from error
        from dataset_rt.torch import TorchMapDataset

        return TorchMapDataset(self, transform=transform, worker_threads=worker_threads)

    def to_torch_iterable_dataset(
        self,
        *,
        transform: Callable[[CachedSample], Any] | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        worker_threads: int = 1,
    ) -> TorchIterableDataset:
        """A sized `torch.utils.data.IterableDataset` over this dataset's stream.

        With ``DataLoader(adapter, batch_size=batch_size, num_workers=W)`` it
        yields, flattened, exactly ``list(dataset)`` for any W; under several
        ranks each gets its share, padded to equal batch counts (see
        `dataset_rt.torch.TorchIterableDataset` and docs/training.md).
        `transform` runs on each sample inside the worker process.

        Examples:
            >>> from dataset_rt.torch import DataLoader
            >>> ids = lambda s: s.sample_id
            >>> adapter = dataset.to_torch_iterable_dataset(transform=ids, batch_size=10)
            >>> batches = list(DataLoader(adapter, batch_size=10, num_workers=0))
            >>> len(batches), batches[0].shape
            (10, torch.Size([10]))
        """
        try:
            import_module("torch.utils.data")
        except ImportError as error:
            raise ImportError(
                "CachedDataset.to_torch_iterable_dataset requires PyTorch; install torch to use it"
            ) from error
        from dataset_rt.torch import TorchIterableDataset

        return TorchIterableDataset(
            self,
            transform=transform,
            batch_size=batch_size,
            drop_last=drop_last,
            rank=rank,
            world_size=world_size,
            worker_threads=worker_threads,
        )

    def to_torch_dataloader(
        self,
        *,
        batch_size: int = 1,
        sample_transform_fn: Callable[[CachedSample], Any] | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        shuffle: bool | None = None,
        seed: int | None = None,
        samples_per_epoch: int | None = None,
        worker_partition: Literal["split", "replicate"] | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        num_workers: int | Literal["auto"] = "auto",
        drop_last: bool = False,
        pin_memory: bool = False,
        timeout: float = 0,
        native_num_workers: int | Literal["auto"] = "auto",
        multiprocessing_context: str | BaseContext = "spawn",
        worker_init_fn: Callable[[int], None] | None = None,
        prefetch_factor: int | Literal["auto"] = "auto",
        persistent_workers: bool | Literal["auto"] = "auto",
        verbose: bool = True,
        dataloader_kwargs: Mapping[str, Any] | None = None,
    ) -> DataLoader:
        """A `dataset_rt.torch.DataLoader` over this dataset's stream, made from
        dataset-rt 0.4.8's keywords: exact for any number of workers and ranks,
        and resumable with ``state_dict()`` / ``load_state_dict()``.

        ``shuffle``, ``seed`` and ``samples_per_epoch`` default to the dataset's
        own (``reader_config``, its epoch length): the loader then reads this
        dataset and moves its stream on. Set to other values, the loader reads a
        copy of the dataset with that stream. ``num_workers="auto"`` counts the
        CPUs this process may use (affinity and cgroup quotas) per local rank
        (``LOCAL_WORLD_SIZE``), less one for training, at most 4. docs/training.md
        describes every keyword and where dataset-rt 0.4.8 differs.

        Examples:
            >>> ids = lambda s: s.sample_id
            >>> loader = dataset.to_torch_dataloader(
            ...     batch_size=10, sample_transform_fn=ids, num_workers=0
            ... )
            >>> batches = iter(loader)
            >>> seen = [next(batches).tolist() for _ in range(3)]
            >>> state = loader.state_dict()  # a checkpoint; later, in a new job:
            >>> resumed = dataset.to_torch_dataloader(
            ...     batch_size=10, sample_transform_fn=ids, num_workers=0
            ... )
            >>> resumed.load_state_dict(state)
            >>> len(seen) + len(list(resumed))
            10
        """
        arguments = {name: value for name, value in locals().items() if name != "self"}
        try:
            import_module("torch.utils.data")
        except ImportError as error:
            raise ImportError(
                "CachedDataset.to_torch_dataloader requires PyTorch; install torch to use it"
            ) from error
        from dataset_rt import _torch_loader

        return _torch_loader.make_loader(self, _torch_loader.LoaderRequest(**arguments))

    def _with_stream(self, config: ReaderConfig, epoch_len: int | None) -> CachedDataset:
        """A copy over the same caches and active table with another stream: `config`'s
        seed and shuffle, and `epoch_len` when given, at the start of the epoch this
        dataset stands in."""
        handle = self._handle
        recipe = {**self._recipe(), "reader_config": config, "position": (0, 0, 0, 0)}
        if epoch_len is not None:
            recipe["epoch_len"] = epoch_len
        twin = CachedDataset._blank(list(self.cache_paths), config, self.remote_config)
        twin_handle = DatasetHandle(
            handle.runtime, twin.cache_paths, config, self.remote_config, handle.cache_sha256s
        )
        _restore(twin, twin_handle, recipe)
        twin._native_handle = twin_handle
        twin.set_epoch(int(self.state_dict()["epoch"]))
        return twin

    # ---- processes: pickling, fork and DataLoader workers -----------------

    def __reduce__(self) -> tuple[Any, ...]:
        recipe = self._recipe()
        identities, extra = recipe["identity_columns"], recipe["extra_columns"]
        if identities is not None or extra is not None:
            from dataset_rt._core import metadata_frame as _metadata_frame

            recipe = {
                **recipe,
                "identity_columns": None if identities is None else identities.to_ipc(),
                "extra_columns": None if extra is None else _metadata_frame.write_ipc(extra),
            }
        return (_unpickle_dataset, (recipe,))

    def _recipe(self) -> dict[str, Any]:
        """What reopening this dataset needs, in memory. In a child forked from
        the process that opened it, the stream position is the one last seen
        there, and nothing here calls into Polars."""
        if self._native_handle is None:
            assert self._unopened_recipe is not None
            return self._unopened_recipe
        handle = self._native_handle
        at = handle.position() if handle.owned_here() else handle.mirror
        return {
            "paths": self.cache_paths,
            "reader_config": self.reader_config,
            "remote": self.remote_config,
            "num_workers": handle.runtime.num_workers,
            "identity_columns": self._identity_columns,
            "extra_columns": self._extra_columns,
            "epoch_len": self._epoch_len,
            "mix": self._mix,
            "position": (at.epoch, at.epoch_start, at.epoch_len, at.position),
            "caches": handle.cache_sha256s,
        }

    def _open_here(self, threads: int) -> None:
        """Make the dataset usable in this process: reopen it, with a runtime of
        `threads` native threads, unless it was opened here already."""
        handle = self._native_handle
        if handle is not None and handle.owned_here():
            return
        self._reopen(self._recipe(), threads)

    def _reopen(self, recipe: dict[str, Any], threads: int) -> DatasetHandle:
        try:
            # The remote caches open the versions the first open read.
            handle = DatasetHandle(
                RuntimeHandle(threads),
                recipe["paths"],
                recipe["reader_config"],
                recipe["remote"],
                recipe["caches"],
            )
            _restore(self, handle, recipe)
        except ValueError as error:
            # Same class (a cache error is also a RuntimeError), with the process named.
            error.args = (f"cannot reopen the dataset in process {os.getpid()}: {error}",)
            raise error.with_traceback(None) from None
        self._native_handle = handle
        self._unopened_recipe = None
        return handle


def _restore(dataset: CachedDataset, handle: DatasetHandle, recipe: dict[str, Any]) -> None:
    """Bring a freshly opened `handle` to the state `recipe` describes."""
    identities = recipe["identity_columns"]
    if identities is not None:
        identities.install(handle)
    dataset._identity_columns = identities
    dataset._extra_columns = recipe["extra_columns"]
    if recipe["epoch_len"] is not None:
        handle.set_epoch_len(recipe["epoch_len"])
    dataset._epoch_len = recipe["epoch_len"]
    if recipe["mix"] is not None:
        handle.set_mix(recipe["mix"])
    dataset._mix = recipe["mix"]
    # Our own fingerprint at the recipe's position, with the caches' digests as
    # they were when the dataset was first opened: the core refuses a cache
    # replaced since.
    state = handle.state()
    epoch, epoch_start, _, position = recipe["position"]
    state.update(
        epoch=epoch,
        epoch_start=epoch_start,
        position=position,
        caches=[digest.hex() for digest in recipe["caches"]],
    )
    handle.load_state(state)


def _unpickle_dataset(pickled: dict[str, Any]) -> CachedDataset:
    recipe = dict(pickled)
    if pickled["identity_columns"] is not None or pickled["extra_columns"] is not None:
        from dataset_rt._core import metadata_frame as _metadata_frame

        if pickled["identity_columns"] is not None:
            recipe["identity_columns"] = _metadata_frame.IdentityColumns.from_ipc(
                pickled["identity_columns"]
            )
        if pickled["extra_columns"] is not None:
            recipe["extra_columns"] = _metadata_frame.read_ipc(pickled["extra_columns"])
    dataset = CachedDataset._blank(list(recipe["paths"]), recipe["reader_config"], recipe["remote"])
    dataset._unopened_recipe = recipe
    return dataset


def _identity_arrays(pairs: Any) -> tuple[array[int], array[int]]:
    """(uint64 cache ids, uint64 sample ids) of `get_many`'s argument."""
    cache_ids: array[int] = array("Q")
    sample_ids: array[int] = array("Q")
    assert cache_ids.itemsize == 8 and sample_ids.itemsize == 8
    if type(pairs).__module__.startswith("polars") and hasattr(pairs, "get_column"):
        from dataset_rt._core import metadata_frame as _metadata_frame

        return _metadata_frame.identity_arrays(pairs)
    for index, pair in enumerate(pairs):
        try:
            cache_id, sample_id = pair
        except (TypeError, ValueError):
            raise TypeError(
                f"get_many: item {index} must be a (cache_id, sample_id) pair, got {pair!r}"
            ) from None
        for name, value in (("cache_id", cache_id), ("sample_id", sample_id)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"get_many: item {index}: {name} must be an int, got {type(value).__name__}"
                )
        if not (0 <= cache_id <= _native.U64_MAX and 0 <= sample_id <= _native.U64_MAX):
            raise errors.SampleNotFoundError(
                f"no sample (cache_id={cache_id}, sample_id={sample_id}) (request {index})"
            )
        cache_ids.append(cache_id)
        sample_ids.append(sample_id)
    return cache_ids, sample_ids


def _check_index(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= _native.U64_MAX:
        raise errors.InvalidArgumentError(f"{name} must be between 0 and 2**64 - 1, got {value}")
