"""The records that cross the public API: inputs, samples and results.

They are NamedTuples so that ``match`` works with positional and keyword
patterns, exactly as with dataset-rt 0.2.4.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

MetadataValue: TypeAlias = bool | int | float | str
"""A primitive metadata value: stored as Arrow bool, int64, float64 or utf8."""

Metadata: TypeAlias = Mapping[str, MetadataValue]
"""One sample's metadata: column name to primitive value."""

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""A payload as accepted by `CacheInput`; stored and returned as opaque bytes."""


class CacheInput(NamedTuple):
    """One sample yielded by a `CacheSource`: serialized payload plus metadata.

    Examples:
        >>> CacheInput(data=b"\\x89PNG...", metadata={"label": 3, "split": "train", "score": 0.5})
        CacheInput(data=b'\\x89PNG...', metadata={'label': 3, 'split': 'train', 'score': 0.5})
    """

    data: BytesLike
    """The payload bytes; DatasetRT never decodes them."""

    metadata: Metadata
    """Primitive metadata columns; the first sample fixes the schema."""


class CachedSample(NamedTuple):
    """One sample read back from a cache.

    Examples:
        >>> sample = dataset.get(0, 5)
        >>> sample.data, sample.metadata["label"], (sample.cache_id, sample.sample_id)
        (b'25', 5, (0, 5))
        >>> sample.metadata.to_dict()
        {'i': 5, 'label': 5}
    """

    data: bytes | memoryview
    """The payload bytes exactly as written."""

    metadata: Mapping[str, MetadataValue]
    """The sample's metadata row; a read-only mapping decoded on first access."""

    cache_id: int
    """Position of the sample's cache in the paths given to `cached_dataset`."""

    sample_id: int
    """Physical row of the sample inside its cache."""


class CacheWriteSuccess(NamedTuple):
    """A source that was written (or reused) and published.

    Examples:
        >>> [result] = runtime.write_cache(Squares(5), "caches")
        >>> result.source_name, result.path
        ('squares', PosixPath('caches/squares'))
    """

    source_name: str
    """The source's name, also the cache directory's name."""

    path: Path
    """The published cache directory."""


class CacheWriteError(NamedTuple):
    """A source that was not written; nothing of it was published.

    Examples:
        >>> class Broken:
        ...     name = "broken"
        ...     def __iter__(self):
        ...         yield CacheInput(data="text, not bytes", metadata={})
        >>> [result] = runtime.write_cache(Broken(), "caches")
        >>> result.source_name, "bytes" in result.message
        ('broken', True)
    """

    source_name: str
    """The source's name, or ``source[N]`` (its position) when the name is missing or unusable."""

    message: str
    """What went wrong, naming the sample and field where there is one."""


class PartitionResult(NamedTuple):
    """One partition of a cache, written and sealed by `dataset_rt.write_partition`;
    `dataset_rt.commit_partitions` takes these (or their count). Picklable, so a
    task on another machine can return it.

    Examples:
        >>> part = dataset_rt.write_partition(Squares(3), "caches", "squares", partition=0)
        >>> part.name, part.partition, part.sample_count
        ('squares', 0, 3)
        >>> part.path.name.startswith("part-000000.")
        True
    """

    name: str
    """The cache's source name."""

    partition: int
    """The partition's number: its samples follow those of lower numbers in the cache."""

    sample_count: int
    """The samples it holds (0 for an empty partition, which adds nothing)."""

    attempt: str
    """The unique id of the attempt that wrote it; a later attempt replaces it."""

    path: Path
    """The attempt's staging directory, ``<base>/tmp/partitions/<name>/part-NNNNNN.<attempt>``
    (the partition's cache is in its subdirectory ``<name>``; nothing for an empty one)."""

    manifest_sha256: str
    """The SHA-256 of the partition cache's manifest.json, as its pointer sealed it
    (64 hex digits; empty for an empty partition)."""


UploadOutcome: TypeAlias = Literal["uploaded", "reused", "other_writer"]
"""How a cache came to be published at its URL: ``"uploaded"`` by this write,
``"reused"`` (it was published already, its source was not iterated) or
``"other_writer"`` (written here, but another writer published that name first:
the cache at the URL is that writer's)."""


class CacheUploadSuccess(NamedTuple):
    """A source whose cache is published in object storage (a write to an ``s3://`` base).

    Examples:
        >>> result = CacheUploadSuccess("squares", "s3://bucket/caches/squares", "other_writer")
        >>> match result:
        ...     case CacheUploadSuccess(url=url, outcome="other_writer"):
        ...         print(f"{url} was published by another writer first; reading theirs")
        s3://bucket/caches/squares was published by another writer first; reading theirs
    """

    source_name: str
    """The source's name, also the last segment of the cache's URL."""

    url: str
    """The published cache's URL (``<base>/<source_name>``)."""

    outcome: UploadOutcome
    """Whether this write uploaded it, found it published, or lost the race to publish it."""


CacheWriteResult: TypeAlias = CacheWriteSuccess | CacheUploadSuccess | CacheWriteError
"""The outcome of one source of `DatasetRuntime.write_cache`: `CacheWriteSuccess` for a
local base, `CacheUploadSuccess` for an ``s3://`` base, `CacheWriteError` for either."""


class CacheSource(Protocol):
    """A named, synchronous source of samples.

    DatasetRT pulls ``iter(source)`` on the calling thread and hands the samples
    to its native workers in batches; sources need no threads of their own.

    Examples:
        >>> class Lines:
        ...     name = "lines"
        ...     def __init__(self, lines):
        ...         self.lines = lines
        ...     def __iter__(self):
        ...         for number, line in enumerate(self.lines):
        ...             yield CacheInput(data=line.encode(), metadata={"line": number})
        >>> [result] = runtime.write_cache(Lines(["a", "bc"]), "caches")
        >>> config = ReaderConfig(seed=0, shuffle=False)
        >>> [s.data for s in runtime.cached_dataset([result.path], reader_config=config)]
        [b'a', b'bc']
    """

    name: str
    """One plain path segment; the cache is written to ``base_cache_dir / name``."""

    def __iter__(self) -> Iterator[CacheInput]:
        """Yield the source's samples in the order they should be stored."""
        ...


@runtime_checkable
class SizedTorchIterableDataset(Protocol):
    """What `CachedDataset.to_torch_iterable_dataset` returns, as a type: an
    iterable with a length (dataset-rt 0.2.4's name for it; the class is
    `dataset_rt.torch.TorchIterableDataset`).

    Examples:
        >>> def samples_per_epoch(view: SizedTorchIterableDataset) -> int:
        ...     return len(view)
        >>> samples_per_epoch(dataset)  # a CachedDataset has the same shape
        100
        >>> isinstance(dataset, SizedTorchIterableDataset)
        True
    """

    def __iter__(self) -> Iterator[CachedSample]:
        """Yield the samples of the next epoch."""
        ...

    def __len__(self) -> int:
        """The number of samples an iteration yields."""
        ...
