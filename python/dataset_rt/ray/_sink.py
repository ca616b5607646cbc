"""`CacheSink`: a Ray Data ``Datasink`` that writes a cache in partitions, one per
write task, and publishes it with one commit."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ray.data.block import BlockAccessor
from ray.data.datasource import Datasink, WriteResult

import dataset_rt
from dataset_rt import (
    CacheInput,
    CacheWriteError,
    CacheWriteResult,
    PartitionResult,
    RemoteConfig,
    WriterConfig,
    errors,
)
from dataset_rt._core.partitions import partitions_folder
from dataset_rt._remote.url import is_remote

if TYPE_CHECKING:
    from ray.data._internal.execution.interfaces import TaskContext
    from ray.data.block import Block

_PRIMITIVES = (bool, int, float, str)


class CacheSink(Datasink[PartitionResult]):
    """Writes a Ray Dataset as the cache `name` under `base`:
    ``ray_dataset.write_datasink(CacheSink(base, name))``.

    Each write task writes its rows as one partition (`dataset_rt.write_partition`)
    numbered by the task's index; when every task has finished, the driver fills
    the numbers of tasks that wrote nothing with empty partitions and publishes
    the cache with `dataset_rt.commit_partitions`, whose result is then `result`.
    The cache's sample ids run through the write tasks in the order of their
    indexes: with ``DataContext.get_current().execution_options.preserve_order =
    True`` that is the Ray Dataset's order.

    A row becomes one sample: the bytes of `data_column` are its payload and the
    columns of `metadata_columns` (None: every other column) its metadata, each
    value a bool, int, float or str (NumPy scalars are converted). `writer_config`
    (None: `WriterConfig()`) and `remote` are `write_partition`'s; `base` must be a
    folder every node of the cluster sees (a shared file system) or an ``s3://``
    URL.

    A task that Ray retries (its worker died) writes its partition again, and the
    later attempt replaces the earlier one: every row is in the cache once. When
    the write fails (an error in any task, in the user's code upstream of the
    sink, or in the commit), nothing is published and `on_write_failed` removes
    every partition staged for `name`; the error Ray raises carries the cause's
    message. A cache already published at ``base/name`` is refused before any
    task writes (`errors.CacheExistsError`; for an ``s3://`` base the commit
    refuses it). An empty Dataset raises `ValueError` naming the cache.

    Examples:
        >>> import ray
        >>> rows = ray.data.from_items([{"data": b"a", "label": 0}, {"data": b"b", "label": 1}])
        >>> sink = CacheSink("/shared/caches", "letters")  # doctest: +SKIP
        >>> rows.write_datasink(sink)  # doctest: +SKIP
        >>> sink.result  # doctest: +SKIP
        CacheWriteSuccess(source_name='letters', path=PosixPath('/shared/caches/letters'))
    """

    result: CacheWriteResult | None
    """What the commit returned, once the write has completed (None before)."""

    def __init__(
        self,
        base: str | os.PathLike[str],
        name: str,
        *,
        data_column: str = "data",
        metadata_columns: Sequence[str] | None = None,
        writer_config: WriterConfig | None = None,
        remote: RemoteConfig | None = None,
    ) -> None:
        if not isinstance(data_column, str):
            raise TypeError(f"data_column must be a str, got {type(data_column).__name__}")
        if isinstance(metadata_columns, str):
            raise TypeError("metadata_columns must be a sequence of column names, not a str")
        columns = None if metadata_columns is None else tuple(metadata_columns)
        if columns is not None and data_column in columns:
            raise errors.InvalidArgumentError(
                f"metadata_columns holds the data column {data_column!r}", 1
            )
        self.base = base
        self.name = name
        self.data_column = data_column
        self.metadata_columns = columns
        self.writer_config = writer_config
        self.remote = remote
        self.result = None

    def on_write_start(self, schema: Any = None) -> None:
        """Before the first write task (on the driver): refuse a cache published at
        ``base/name`` and remove what an earlier, failed build of the name staged."""
        target = os.path.join(os.fspath(self.base), self.name)
        if not is_remote(self.base) and os.path.lexists(target):
            raise errors.CacheExistsError(f"cache path already exists: {target}")
        dataset_rt.discard_partitions(self.base, self.name, remote=self.remote)

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> PartitionResult:
        """One write task: its rows as partition ``ctx.task_idx``.

        An exception raised upstream (the user's code that produces the blocks) is
        raised again as it is, so that Ray reports it as it would without the sink.
        """
        upstream = _Upstream(blocks)
        try:
            return dataset_rt.write_partition(
                self._samples(upstream),
                self.base,
                self.name,
                partition=ctx.task_idx,
                writer_config=self.writer_config,
                remote=self.remote,
            )
        except errors.CacheWriteFailedError as failed:
            if upstream.error is None or failed.__cause__ is not upstream.error:
                raise
        raise upstream.error

    def on_write_complete(self, write_result: WriteResult[PartitionResult]) -> None:
        """After every write task (on the driver): fill the partitions of tasks that
        wrote nothing, commit, and keep the outcome in `result`."""
        written = [_partition_result(value) for value in write_result.write_returns]
        count = 1 + max((part.partition for part in written), default=-1)
        samples = sum(part.sample_count for part in written)
        if samples == 0:
            raise ValueError(
                f"the Ray Dataset is empty: cache {self.name!r} under {self.base} was not "
                "written (a cache holds at least one sample)"
            )
        if samples != write_result.num_rows:
            raise errors.CacheWriteFailedError(
                f"cache {self.name!r}: the write tasks wrote {samples} samples, Ray counted "
                f"{write_result.num_rows} rows"
            )
        numbers = {part.partition for part in written}
        for number in range(count):
            if number not in numbers:
                written.append(self._empty_partition(number))
        assert sorted(part.partition for part in written) == list(range(count))
        outcome = dataset_rt.commit_partitions(self.base, self.name, written, remote=self.remote)
        self.result = outcome
        if not isinstance(outcome, CacheWriteError):
            return
        message = f"cache {self.name!r} was not committed: {outcome.message}"
        if outcome.message.startswith("cache path already exists"):
            raise errors.CacheExistsError(message)
        raise errors.CacheWriteFailedError(message)

    def on_write_failed(self, error: Exception) -> None:
        """After a failed write (on the driver): remove every partition staged for
        the name, so that nothing of this build is left or committed later."""
        dataset_rt.discard_partitions(self.base, self.name, remote=self.remote)
        if not is_remote(self.base):
            # Empty unless a commit published the name before (its record stays).
            with contextlib.suppress(OSError):
                partitions_folder(self.base, self.name).rmdir()

    def get_name(self) -> str:
        """The name of the write tasks in Ray's progress and logs."""
        return "DatasetRtCache"

    def _empty_partition(self, number: int) -> PartitionResult:
        return dataset_rt.write_partition(
            [],
            self.base,
            self.name,
            partition=number,
            writer_config=self.writer_config,
            remote=self.remote,
        )

    def _samples(self, blocks: Iterable[Block]) -> Iterator[CacheInput]:
        for block in blocks:
            table = BlockAccessor.for_block(block).to_arrow()
            names = self._metadata_names(list(table.column_names))
            for batch in table.to_batches():
                payloads = batch.column(self.data_column).to_pylist()
                columns = [batch.column(name).to_pylist() for name in names]
                for row, payload in enumerate(payloads):
                    metadata = {
                        name: _primitive(name, values[row])
                        for name, values in zip(names, columns, strict=True)
                    }
                    yield CacheInput(_payload(self.data_column, payload), metadata)

    def _metadata_names(self, columns: list[str]) -> list[str]:
        """The metadata columns of a block with `columns`; refuses a missing one."""
        wanted = self.metadata_columns
        names = [c for c in columns if c != self.data_column] if wanted is None else list(wanted)
        missing = [c for c in (self.data_column, *names) if c not in columns]
        if missing:
            raise errors.InvalidInputError(
                f"the rows have no column {missing[0]!r} (their columns: {', '.join(columns)})"
            )
        return names


class _Upstream:
    """The blocks of a write task, remembering the exception that iterating them
    raised (the user's code that produces them)."""

    def __init__(self, blocks: Iterable[Block]) -> None:
        self._blocks = iter(blocks)
        self.error: BaseException | None = None

    def __iter__(self) -> Iterator[Block]:
        return self

    def __next__(self) -> Block:
        try:
            return next(self._blocks)
        except StopIteration:
            raise
        except BaseException as error:
            self.error = error
            raise


def _payload(column: str, value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    raise TypeError(f"column {column!r} must hold bytes, got {type(value).__name__}")


def _primitive(column: str, value: object) -> bool | int | float | str:
    item = getattr(value, "item", None)
    if not isinstance(value, _PRIMITIVES) and type(value).__module__ == "numpy" and item:
        value = item()  # a NumPy scalar: its Python value
    if isinstance(value, _PRIMITIVES):
        return value
    raise TypeError(
        f"metadata column {column!r} must hold bool, int, float or str values, "
        f"got {type(value).__name__}"
    )


def _partition_result(value: object) -> PartitionResult:
    if isinstance(value, PartitionResult):
        return value
    raise errors.CacheWriteFailedError(
        f"a write task returned {type(value).__name__}, not a PartitionResult"
    )
