"""DatasetRT: a correctness-first dataset cache for ML training loops.

Write sources into immutable, checksummed caches with
`DatasetRuntime.write_cache`, and read them back as a deterministic stream of
`CachedSample` with `DatasetRuntime.cached_dataset`. The work happens in a
native core (Zig, C ABI) loaded through ctypes.
"""

# The exception classes, as a submodule: `dataset_rt.errors.DatasetRtError`.
from dataset_rt import errors
from dataset_rt.api import (
    BytesLike,
    CachedDataset,
    CachedSample,
    CacheInput,
    CacheSource,
    CacheSourcesDatasetError,
    CacheSourcesDatasetResult,
    CacheSourcesDatasetSuccess,
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
    DatasetRuntime,
    ManifestUpdateEntry,
    ManifestUpdateReport,
    Metadata,
    MetadataValue,
    OpenShardsStats,
    PartitionResult,
    ReaderConfig,
    RemoteConfig,
    RemoteStats,
    ShardCompression,
    SizedTorchIterableDataset,
    UploadOutcome,
    VerifyProblem,
    VerifyReport,
    WriterConfig,
    WriterProfilerConfig,
    commit_partitions,
    discard_partitions,
    open_shards_stats,
    set_max_open_shards,
    verify,
    write_partition,
)

__version__ = "0.1.0"

__all__ = [
    "BytesLike",
    "CacheInput",
    "CacheSource",
    "CacheSourcesDatasetError",
    "CacheSourcesDatasetResult",
    "CacheSourcesDatasetSuccess",
    "CacheUploadSuccess",
    "CacheWriteError",
    "CacheWriteResult",
    "CacheWriteSuccess",
    "CachedDataset",
    "CachedSample",
    "DatasetRuntime",
    "ManifestUpdateEntry",
    "ManifestUpdateReport",
    "Metadata",
    "MetadataValue",
    "OpenShardsStats",
    "PartitionResult",
    "ReaderConfig",
    "RemoteConfig",
    "RemoteStats",
    "ShardCompression",
    "SizedTorchIterableDataset",
    "UploadOutcome",
    "WriterConfig",
    "VerifyProblem",
    "VerifyReport",
    "WriterProfilerConfig",
    "errors",
    "commit_partitions",
    "discard_partitions",
    "open_shards_stats",
    "set_max_open_shards",
    "verify",
    "write_partition",
]
