"""The exceptions DatasetRT raises, with one common base, `DatasetRtError`.

Each class also derives from the built-in exception that code written for
dataset-rt 0.2.4 (or for Python in general) catches for the same failure, so
``except ValueError``, ``except RuntimeError`` and ``except OSError`` keep
working. ``status`` is the core's status code for the failure (``DRT_ERR_*``
in the C ABI), also when the package detects it before calling the core.

    >>> from dataset_rt.errors import DatasetRtError, InvalidCacheError
    >>> issubclass(InvalidCacheError, (DatasetRtError, ValueError, RuntimeError))
    True

Type errors (an argument of the wrong Python type) stay plain `TypeError`, and
invalid configuration stays `pydantic.ValidationError`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CacheExistsError",
    "CacheIOError",
    "CacheWriteFailedError",
    "DatasetRtError",
    "InvalidArgumentError",
    "InvalidCacheError",
    "InvalidInputError",
    "OutOfMemoryError",
    "RemoteError",
    "SampleNotFoundError",
    "StateError",
    "WrongProcessError",
]


class DatasetRtError(Exception):
    """Base of every exception DatasetRT raises for a failure it detects.

    Attributes:
        status: the core's status code for the failure (``DRT_ERR_*``); None
            only on the base class itself.

    Examples:
        >>> try:
        ...     runtime.cached_dataset(["no/such/cache"], reader_config=ReaderConfig(seed=0))
        ... except DatasetRtError as error:
        ...     print(type(error).__name__, error.status)
        InvalidCacheError 3
    """

    status: int | None = None

    def __init__(self, message: str, status: int | None = None) -> None:
        # One argument suffices, as for any exception: torch rebuilds an
        # exception raised in a DataLoader worker from its message alone.
        super().__init__(message)
        if status is not None:
            self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__, with the instance's attributes as its state. Said
        # explicitly: tblib's pickling support (which dask installs for every exception
        # class when imported) rebuilds a class without its own __reduce__ through
        # `cls.__new__(cls)`, which MemoryError's refuses for OutOfMemoryError.
        return (type(self), self.args, self.__dict__ or None)


class InvalidArgumentError(DatasetRtError, ValueError):
    """A call-level mistake: an argument, option, name or state that the
    call cannot take (``DRT_ERR_INVALID_ARGUMENT``).

    Examples:
        >>> dataset.set_epoch_len(0)
        Traceback (most recent call last):
        ...
        dataset_rt.errors.InvalidArgumentError: epoch_len must be at least 1...
    """

    status = 1


class InvalidInputError(DatasetRtError, ValueError):
    """Supplied samples or a metadata table break a rule of the format, or a
    compressed block does not decode (``DRT_ERR_INVALID_INPUT``).

    Examples:
        >>> table = dataset.get_metadata().with_columns(weight=pl.lit(None, dtype=pl.Float64))
        >>> dataset.update_metadata(table)
        Traceback (most recent call last):
        ...
        dataset_rt.errors.InvalidInputError: samples metadata column 'weight' contains null...
    """

    status = 2


class InvalidCacheError(DatasetRtError, ValueError, RuntimeError):
    """A cache on disk is missing, truncated, corrupt, of another format
    version, or does not fit the other caches of a dataset
    (``DRT_ERR_INVALID_CACHE``).

    Also a `RuntimeError`: dataset-rt 0.2.4 raises `RuntimeError` for a cache
    file it cannot read ("I/O error") and a manifest it cannot parse ("JSON
    error"), `ValueError` for the rest; code catching either keeps working.

    Examples:
        >>> runtime.cached_dataset(["no/such/cache"], reader_config=ReaderConfig(seed=0))
        Traceback (most recent call last):
        ...
        dataset_rt.errors.InvalidCacheError: cache no/such/cache: ...: no such file or directory
    """

    status = 3


class CacheIOError(DatasetRtError, OSError, RuntimeError):
    """The operating system refused a file operation on a cache: the message
    names the file and the reason in words, e.g. ``too many open files: the
    limit is 1024 (ulimit -n)`` (``DRT_ERR_IO``).

    Also a `RuntimeError`, as dataset-rt 0.2.4's "I/O error" is.

    Examples:
        >>> runtime.cached_dataset(["x" * 300], reader_config=ReaderConfig(seed=0))
        Traceback (most recent call last):
        ...
        dataset_rt.errors.CacheIOError: cache x...x: I/O error: ...: file name too long
    """

    status = 4


class OutOfMemoryError(DatasetRtError, MemoryError):
    """The core ran out of memory (``DRT_ERR_OUT_OF_MEMORY``).

    Examples:
        >>> issubclass(OutOfMemoryError, MemoryError)
        True
    """

    status = 5


class CacheExistsError(DatasetRtError, FileExistsError):
    """The write target already exists; nothing was overwritten
    (``DRT_ERR_ALREADY_EXISTS``).

    `write_cache` returns it as a `CacheWriteError` result, with its message.

    Examples:
        >>> first = runtime.write_cache(Squares(3), "caches")
        >>> [again] = runtime.write_cache(Squares(3), "caches")
        >>> again.message
        'cache path already exists: caches/squares'
        >>> issubclass(CacheExistsError, FileExistsError)
        True
    """

    status = 6


class CacheWriteFailedError(DatasetRtError, RuntimeError):
    """Writing a part of a cache failed (`dataset_rt.write_partition`): the
    message names the partition and the cause, the exception that stopped it is
    chained as ``__cause__``, and nothing of that attempt is left behind. Its
    status is the cause's when the cause is a DatasetRT error, else
    ``DRT_ERR_INVALID_INPUT`` (2: the samples could not be written).
    `dataset_rt.ray.CacheSink` raises it too when the commit of its partitions
    fails (the message names the cache and the commit's reason).

    Examples:
        >>> def broken():
        ...     yield CacheInput(b"a", {"i": 0})
        ...     raise KeyError("label")
        >>> try:
        ...     dataset_rt.write_partition(broken(), "caches", "c", partition=3)
        ... except CacheWriteFailedError as error:
        ...     print(error)
        ...     print(repr(error.__cause__))
        partition 3 of cache 'c' was not written: source raised KeyError: 'label'
        KeyError('label')
    """

    status = 2


class WrongProcessError(DatasetRtError, RuntimeError):
    """A runtime, dataset or iterator was used in a child process created by
    ``fork()`` after it was made; create a new `DatasetRuntime` in the child
    (``DRT_ERR_WRONG_PROCESS``).

    Examples:
        >>> issubclass(WrongProcessError, RuntimeError)
        True
    """

    status = 7


class StateError(DatasetRtError, RuntimeError):
    """The call is not valid in the object's current state: a closed runtime
    or iterator, an iterator that has no stream position, a writer already
    finished, persistent DataLoader workers asked to follow a changed dataset
    (``DRT_ERR_STATE``).

    Examples:
        >>> closed = DatasetRuntime(num_workers=1)
        >>> closed.close()
        >>> closed.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0))
        Traceback (most recent call last):
        ...
        dataset_rt.errors.StateError: this DatasetRuntime is closed
    """

    status = 8


class SampleNotFoundError(DatasetRtError, IndexError):
    """An identity ``(cache_id, sample_id)`` or a row index names no sample
    (``DRT_ERR_OUT_OF_RANGE``).

    Examples:
        >>> dataset.get(0, 100)
        Traceback (most recent call last):
        ...
        dataset_rt.errors.SampleNotFoundError: no sample (cache_id=0, sample_id=100) ...
    """

    status = 9


class RemoteError(CacheIOError):
    """A file of a remote cache (``s3://``, ``http(s)://``) could not be fetched:
    access was refused (403), the request was malformed, or a failure that is
    retried (throttling, 5xx, a reset or refused connection, a stall past the
    timeout, a truncated body) outlasted the retries. The message names the URL,
    the file, the attempts and the last cause; never a credential or a query
    string (``DRT_ERR_IO``).

    A subclass of `CacheIOError`, so ``except OSError`` catches it too.

    Examples:
        >>> issubclass(RemoteError, (CacheIOError, OSError))
        True
    """

    status = 4
