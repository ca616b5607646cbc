"""`DatasetRuntime`: the native worker pool and the operations that use it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, TypeAlias

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.native import MAX_WORKERS, RuntimeHandle
from dataset_rt._binding.reader import CachePath
from dataset_rt._config import ReaderConfig, RemoteConfig, WriterConfig
from dataset_rt._core.dataset import CachedDataset
from dataset_rt._core.remote_writing import staging_base, writable_publisher, write_to_url
from dataset_rt._core.writing import (
    Reuse,
    SampleError,
    check_unique_targets,
    invalid_source_label,
    source_list,
    source_name,
    write_sources,
)
from dataset_rt._records import (
    CacheSource,
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
)
from dataset_rt._remote import is_remote, parse_remote_url


class CacheSourcesDatasetSuccess(NamedTuple):
    """`from_cache_sources` loaded at least one cache.

    Examples:
        >>> config = ReaderConfig(seed=0)
        >>> result = runtime.from_cache_sources(Squares(5), "caches", reader_config=config)
        >>> type(result).__name__, len(result.dataset), result.results[0].source_name
        ('CacheSourcesDatasetSuccess', 5, 'squares')
    """

    dataset: CachedDataset
    """The dataset over every successfully written or reused cache, in source order."""

    results: list[CacheWriteResult]
    """One result per source, including failures."""


class CacheSourcesDatasetError(NamedTuple):
    """`from_cache_sources` could not load any cache.

    Examples:
        >>> result = runtime.from_cache_sources([], "caches", reader_config=ReaderConfig(seed=0))
        >>> type(result).__name__, result.message
        ('CacheSourcesDatasetError', 'no cache sources were provided')
    """

    results: list[CacheWriteResult]
    """One result per source, explaining each failure."""

    message: str
    """``"no caches were written: <name>: <message>; ..."``."""


CacheSourcesDatasetResult: TypeAlias = CacheSourcesDatasetSuccess | CacheSourcesDatasetError
"""The outcome of `DatasetRuntime.from_cache_sources`."""


class DatasetRuntime:
    """A fixed pool of native worker threads shared by every operation.

    ``DatasetRuntime(num_workers=N)`` starts exactly N threads once; writing,
    loading and reading through this runtime reuse them. The threads stop when
    the runtime and everything created through it are garbage-collected, or
    after `close` once those are gone.

    Examples:
        >>> with DatasetRuntime(num_workers=2) as runtime:
        ...     [result] = runtime.write_cache(Squares(), "caches")
        >>> result.path
        PosixPath('caches/squares')
    """

    __slots__ = ("_handle", "_num_workers")

    def __init__(self, *, num_workers: int) -> None:
        """Start `num_workers` (>= 1) native threads."""
        if isinstance(num_workers, bool) or not isinstance(num_workers, int):
            raise TypeError(f"num_workers must be an int, got {type(num_workers).__name__}")
        # The core checks the range; values the C field cannot hold are refused
        # here, with the core's words.
        if num_workers < 0:
            raise errors.InvalidArgumentError("num_workers must be greater than zero")
        if num_workers > _native.U32_MAX:
            raise errors.InvalidArgumentError(
                f"num_workers must be at most {MAX_WORKERS}, got {num_workers}"
            )
        self._num_workers = num_workers
        self._handle: RuntimeHandle | None = RuntimeHandle(num_workers)

    @property
    def num_workers(self) -> int:
        """The number of native worker threads.

        Examples:
            >>> DatasetRuntime(num_workers=3).num_workers
            3
        """
        return self._num_workers

    def close(self) -> None:
        """Release the pool; datasets already created keep it alive until they go.

        Examples:
            >>> runtime = DatasetRuntime(num_workers=1)
            >>> runtime.close()
            >>> runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
            Traceback (most recent call last):
            dataset_rt.errors.StateError: this DatasetRuntime is closed
        """
        self._handle = None

    def __enter__(self) -> DatasetRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _live_handle(self) -> RuntimeHandle:
        if self._handle is None:
            raise errors.StateError("this DatasetRuntime is closed")
        return self._handle

    def write_cache(
        self,
        sources: CacheSource | Sequence[CacheSource],
        base_cache_dir: str | Path,
        *,
        writer_config: WriterConfig = WriterConfig(),  # noqa: B008 - frozen model
        remote: RemoteConfig | None = None,
    ) -> list[CacheWriteResult]:
        """Write each source to ``base_cache_dir / source.name``; one result per source, in order.

        A failing source becomes `CacheWriteError` and the others still run; a
        target that already exists is never overwritten. Two sources with the
        same name raise `ValueError` before anything is written.

        `base_cache_dir` may be an ``s3://bucket/prefix`` URL (docs/remote.md): each
        cache is written in the staging area of ``remote.local_dir`` (`RemoteConfig`;
        None: its defaults), uploaded with its manifest last, and reported as a
        `CacheUploadSuccess`. An ``http(s)://`` URL is refused (read-only).

        Examples:
            >>> results = runtime.write_cache([Squares(10)], "caches")
            >>> results
            [CacheWriteSuccess(source_name='squares', path=PosixPath('caches/squares'))]
            >>> runtime.write_cache(Squares(10), "caches")[0].message
            'cache path already exists: caches/squares'
        """
        return self._write(sources, base_cache_dir, writer_config, reuse=None, remote=remote)

    def _write(
        self,
        sources: CacheSource | Sequence[CacheSource],
        base_cache_dir: str | os.PathLike[str],
        writer_config: WriterConfig,
        reuse: Reuse | None,
        remote: RemoteConfig | None,
    ) -> list[CacheWriteResult]:
        handle = self._live_handle()
        if not isinstance(writer_config, WriterConfig):
            raise TypeError(
                f"writer_config must be a WriterConfig, got {type(writer_config).__name__}"
            )
        if remote is not None and not isinstance(remote, RemoteConfig):
            raise TypeError(f"remote must be a RemoteConfig or None, got {type(remote).__name__}")
        listed = source_list(sources)
        names: list[str | CacheWriteError] = []
        for position, source in enumerate(listed):
            try:
                names.append(source_name(source, position))
            except SampleError as error:
                names.append(CacheWriteError(invalid_source_label(position), str(error)))
        if is_remote(base_cache_dir):
            return self._write_to_url(
                listed, names, str(base_cache_dir), writer_config, reuse, remote or RemoteConfig()
            )
        # Kept as given (relative stays relative), like dataset-rt 0.2.4's result paths.
        base = Path(os.fspath(base_cache_dir))
        check_unique_targets((n for n in names if isinstance(n, str)), base)
        return _write_local(handle, listed, names, base, writer_config, reuse)

    def _write_to_url(
        self,
        listed: list[CacheSource],
        names: list[str | CacheWriteError],
        url: str,
        writer_config: WriterConfig,
        reuse: Reuse | None,
        remote: RemoteConfig,
    ) -> list[CacheWriteResult]:
        """Write to an ``s3://`` base: locally in the staging area, then published."""
        publisher = writable_publisher(url, remote)
        base_url = publisher.base.shown()
        check_unique_targets((n for n in names if isinstance(n, str)), base_url)
        handle = self._live_handle()

        def write_local(
            positions: list[int], staging: Path, staged: Reuse
        ) -> list[CacheWriteResult]:
            subset = [listed[p] for p in positions]
            subset_names = [names[p] for p in positions]
            return _write_local(handle, subset, subset_names, staging, writer_config, staged)

        staging = staging_base(remote, base_url)
        return write_to_url(
            names, publisher, staging, write_local, reuse_published=reuse is not None
        )

    def cached_dataset(
        self,
        paths: Sequence[str | Path],
        *,
        reader_config: ReaderConfig,
        remote: RemoteConfig | None = None,
    ) -> CachedDataset:
        """Load caches in order for reading.

        A sample's ``cache_id`` is its cache's: the id a format 3 manifest
        stores, else the cache's position in `paths`; two caches with one id
        are refused. Validates manifests, sample counts, index sizes, shard
        existence and lengths, and with ``reader_config.validate_cache`` every
        SHA-256.

        A path may be the URL of a cache in object storage (``s3://bucket/prefix``,
        ``http(s)://host/path``; docs/remote.md): its manifest and small files are
        fetched at once into ``remote.local_dir`` (`RemoteConfig`; None: its
        defaults), each shard on first use, verified against its SHA-256. Local
        paths ignore `remote`.

        Examples:
            >>> dataset = runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
            >>> len(dataset), dataset.cache_paths == [cache_path]
            (100, True)
        """
        if not isinstance(reader_config, ReaderConfig):
            raise TypeError(
                f"reader_config must be a ReaderConfig, got {type(reader_config).__name__}"
            )
        if isinstance(paths, (str, Path)):
            raise TypeError("paths must be a sequence of cache paths, not a single path")
        if remote is not None and not isinstance(remote, RemoteConfig):
            raise TypeError(f"remote must be a RemoteConfig or None, got {type(remote).__name__}")
        located = [cache_location(path) for path in paths]
        return CachedDataset._open(self._live_handle(), located, reader_config, remote)

    def from_cache_sources(
        self,
        sources: CacheSource | Sequence[CacheSource],
        base_cache_dir: str | Path,
        *,
        reader_config: ReaderConfig,
        writer_config: WriterConfig = WriterConfig(),  # noqa: B008 - frozen model
        remote: RemoteConfig | None = None,
    ) -> CacheSourcesDatasetResult:
        """Reuse complete caches (without iterating their sources), write the
        missing ones, and load every success into one dataset.

        With an ``s3://`` base (`write_cache`), a cache whose manifest is at the URL
        is reused, the others are written and uploaded, and the dataset reads every
        cache from its URL (through ``remote``, as `cached_dataset` does).

        Examples:
            >>> result = runtime.from_cache_sources(
            ...     [Squares(10)], "caches", reader_config=ReaderConfig(seed=0)
            ... )
            >>> len(result.dataset)
            10
            >>> again = runtime.from_cache_sources(  # reused: the source is not iterated
            ...     [Squares(10)], "caches", reader_config=ReaderConfig(seed=0)
            ... )
            >>> again.results == result.results
            True
        """
        validate = ReaderConfig(seed=0, validate_cache=writer_config.validate_cache)

        def reuse(name: str, path: Path) -> CacheWriteResult:
            return self._opened(CacheWriteSuccess(name, path), path, validate, None)

        results = self._write(sources, base_cache_dir, writer_config, reuse=reuse, remote=remote)
        results = [self._checked_reuse(result, validate, remote) for result in results]
        paths: list[str | Path] = []
        for result in results:
            if isinstance(result, CacheWriteSuccess):
                paths.append(result.path)
            elif isinstance(result, CacheUploadSuccess):
                paths.append(result.url)
        if not paths:
            details = "; ".join(
                f"{r.source_name}: {r.message}" for r in results if isinstance(r, CacheWriteError)
            )
            message = (
                f"no caches were written: {details}"
                if details
                else "no cache sources were provided"
            )
            return CacheSourcesDatasetError(results, message)
        return CacheSourcesDatasetSuccess(
            self.cached_dataset(paths, reader_config=reader_config, remote=remote), results
        )

    def _checked_reuse(
        self, result: CacheWriteResult, validate: ReaderConfig, remote: RemoteConfig | None
    ) -> CacheWriteResult:
        """A cache reused at a URL, checked as a reused local one is (`_opened`)."""
        if not isinstance(result, CacheUploadSuccess) or result.outcome != "reused":
            return result
        return self._opened(result, result.url, validate, remote)

    def _opened(
        self,
        result: CacheWriteResult,
        cache: str | Path,
        validate: ReaderConfig,
        remote: RemoteConfig | None,
    ) -> CacheWriteResult:
        """`result` for a reused cache once `cache` opens (and with ``validate_cache``
        is scrubbed); a `CacheWriteError` naming why when it does not."""
        try:
            self.cached_dataset([cache], reader_config=validate, remote=remote)
        except (ValueError, OSError) as error:
            return CacheWriteError(result.source_name, str(error))
        return result


def _write_local(
    handle: RuntimeHandle,
    listed: list[CacheSource],
    names: list[str | CacheWriteError],
    base: Path,
    writer_config: WriterConfig,
    reuse: Reuse | None,
) -> list[CacheWriteResult]:
    """Write the sources into the local folder `base`, in this process or in processes."""
    if writer_config.num_processes > 0:
        from dataset_rt._core.process_writing import write_sources_in_processes

        return write_sources_in_processes(handle, listed, names, base, writer_config, reuse=reuse)
    return write_sources(handle, listed, names, base, writer_config, reuse=reuse)


def cache_location(path: str | Path) -> CachePath:
    """A cache path as the reader takes it: a URL checked and kept as a `str`
    (`ValueError` naming one of an unsupported scheme), anything else a `Path`."""
    if is_remote(path):
        parse_remote_url(str(path))
        return str(path)
    return Path(path)
