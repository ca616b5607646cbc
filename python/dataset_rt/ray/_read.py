"""`read_cache`: a cache's sample stream as a Ray Dataset, read by parallel tasks
over ranges of stream positions."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow  # type: ignore[import-untyped]
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from dataset_rt import CachedDataset, DatasetRuntime, ReaderConfig, RemoteConfig, errors

if TYPE_CHECKING:
    from ray.data.context import DataContext

# Without override_num_blocks, no read task gets fewer positions than this: each task
# opens the caches, which costs more than reading a few hundred samples.
POSITIONS_PER_TASK_MIN = 1024
# A block holds at most this many samples, or this many payload bytes.
BLOCK_SAMPLES_MAX = 4096
BLOCK_BYTES_MAX = 64 * 1024 * 1024
IDENTITY_COLUMNS = ("data", "cache_id", "sample_id")


def read_cache(
    paths: Sequence[str | Path],
    *,
    reader_config: ReaderConfig,
    remote: RemoteConfig | None = None,
    epoch: int = 0,
    override_num_blocks: int | None = None,
) -> ray.data.Dataset:
    """The sample stream of the caches at `paths` for epoch `epoch`, as a Ray Dataset
    of rows ``{"data": bytes, "cache_id": int, "sample_id": int, <metadata columns>}``.

    The rows are exactly the samples that iterating
    ``runtime.cached_dataset(paths, reader_config=reader_config, remote=remote)``
    after ``set_epoch(epoch)`` yields, in that order: the Dataset's order (what
    Ray gives when ``DataContext.get_current().execution_options.preserve_order``
    is True). The caches are opened here to learn the epoch's length; the
    positions are then cut into contiguous ranges, one per read task (at most
    `override_num_blocks` tasks; None: Ray's choice, with at least 1,024
    positions per task), and each task opens the caches itself (it checks that
    their manifests are still the ones opened here), moves the stream to its
    range's first position and reads only its range. Every node must see the
    paths (a shared file system, or URLs of remote caches read through `remote`).

    Raises what `DatasetRuntime.cached_dataset` raises for caches that cannot be
    opened, and `ValueError` for a metadata column named like an identity column.

    Examples:
        >>> config = ReaderConfig(seed=0)
        >>> rows = read_cache(["/shared/caches/letters"], reader_config=config)  # doctest: +SKIP
        >>> rows.take(1)  # doctest: +SKIP
        [{'data': b'b', 'cache_id': 0, 'sample_id': 1, 'label': 1}]
    """
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise TypeError(f"epoch must be an int, got {type(epoch).__name__}")
    if override_num_blocks is not None and (
        isinstance(override_num_blocks, bool) or not isinstance(override_num_blocks, int)
    ):
        raise TypeError(
            f"override_num_blocks must be an int or None, got {type(override_num_blocks).__name__}"
        )
    if override_num_blocks is not None and override_num_blocks < 1:
        raise errors.InvalidArgumentError(
            f"override_num_blocks must be at least 1, got {override_num_blocks}", 1
        )
    runtime = DatasetRuntime(num_workers=1)
    dataset = runtime.cached_dataset(paths, reader_config=reader_config, remote=remote)
    dataset.set_epoch(epoch)
    minimum = 1 if override_num_blocks is not None else POSITIONS_PER_TASK_MIN
    source = _CacheDatasource(dataset, minimum)
    rows = ray.data.read_datasource(source, override_num_blocks=override_num_blocks)
    return cast(ray.data.Dataset, rows)


class _CacheDatasource(Datasource):
    """One epoch of a dataset's stream, in read tasks over ranges of positions."""

    def __init__(self, dataset: CachedDataset, positions_min: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._dataset = dataset
        self._positions = len(dataset)
        self._positions_min = positions_min

    def get_name(self) -> str:
        return "DatasetRtCache"

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: DataContext | None = None,
    ) -> list[ReadTask]:
        ranges = position_ranges(self._positions, parallelism, self._positions_min)
        return [
            ReadTask(
                functools.partial(_read_range, self._dataset, start, stop),
                BlockMetadata(
                    num_rows=stop - start, size_bytes=None, input_files=None, exec_stats=None
                ),
                per_task_row_limit=per_task_row_limit,
            )
            for start, stop in ranges
        ]


def position_ranges(positions: int, tasks: int, positions_min: int) -> list[tuple[int, int]]:
    """`positions` cut into at most `tasks` contiguous ranges of near-equal length
    (none shorter than `positions_min` but when there are fewer positions)."""
    assert positions >= 0 and tasks >= 1 and positions_min >= 1
    count = max(1, min(tasks, positions // positions_min))
    bounds = [positions * k // count for k in range(count + 1)]
    ranges = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    assert sum(b - a for a, b in ranges) == positions
    return ranges


def _read_range(dataset: CachedDataset, start: int, stop: int) -> Iterator[Any]:
    """The blocks of stream positions ``start .. stop - 1`` of the dataset's epoch
    (run in a read task, on an unpickled copy of the driver's dataset)."""
    state = dataset.state_dict()
    state["position"] = state["epoch_start"] + start
    dataset.load_state_dict(state)
    iterator = iter(dataset)
    count = stop - start
    batch = _Batch()
    try:
        for sample in iterator:
            if iterator.consumed() > count:
                break  # positions left out as corrupt ran past the range
            batch.add(sample)
            if batch.full():
                yield batch.table()
                batch = _Batch()
            if iterator.consumed() == count:
                break
    finally:
        iterator.close()
    if batch.rows:
        yield batch.table()


class _Batch:
    """Samples gathered column by column into one Arrow block."""

    def __init__(self) -> None:
        self.rows = 0
        self.payload_bytes = 0
        self.columns: dict[str, list[Any]] = {name: [] for name in IDENTITY_COLUMNS}

    def add(self, sample: Any) -> None:
        data = bytes(sample.data)
        metadata = dict(sample.metadata)
        if self.rows == 0:
            for name in metadata:
                if name in IDENTITY_COLUMNS:
                    raise errors.InvalidArgumentError(
                        f"the caches have a metadata column named {name!r}, like the "
                        "identity column read_cache adds",
                        1,
                    )
                self.columns[name] = []
        self.columns["data"].append(data)
        self.columns["cache_id"].append(sample.cache_id)
        self.columns["sample_id"].append(sample.sample_id)
        for name, value in metadata.items():
            self.columns[name].append(value)
        self.rows += 1
        self.payload_bytes += len(data)

    def full(self) -> bool:
        return self.rows >= BLOCK_SAMPLES_MAX or self.payload_bytes >= BLOCK_BYTES_MAX

    def table(self) -> Any:
        arrays = {
            name: pyarrow.array(values, pyarrow.binary() if name == "data" else None)
            for name, values in self.columns.items()
        }
        return pyarrow.table(arrays)
