"""The public API in one module, for code written against ``dataset_rt.api``."""

from dataset_rt._binding.open_shards import OpenShardsStats, open_shards_stats, set_max_open_shards
from dataset_rt._binding.remote import RemoteStats
from dataset_rt._config import (
    Mix,
    ReaderConfig,
    RemoteConfig,
    ShardCompression,
    WriterConfig,
    WriterProfilerConfig,
)
from dataset_rt._core.dataset import CachedDataset
from dataset_rt._core.migration import ManifestUpdateEntry, ManifestUpdateReport
from dataset_rt._core.partitions import commit_partitions, discard_partitions, write_partition
from dataset_rt._core.runtime import (
    CacheSourcesDatasetError,
    CacheSourcesDatasetResult,
    CacheSourcesDatasetSuccess,
    DatasetRuntime,
)
from dataset_rt._core.verify import VerifyProblem, VerifyReport, verify
from dataset_rt._records import (
    BytesLike,
    CachedSample,
    CacheInput,
    CacheSource,
    CacheUploadSuccess,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
    Metadata,
    MetadataValue,
    PartitionResult,
    SizedTorchIterableDataset,
    UploadOutcome,
)

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
    "Mix",
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
    "commit_partitions",
    "discard_partitions",
    "open_shards_stats",
    "set_max_open_shards",
    "verify",
    "write_partition",
]
