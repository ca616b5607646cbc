"""The public API in one module, for code written against ``dataset_rt.api``."""

from dataset_rt._config import ReaderConfig, ShardCompression, WriterConfig, WriterProfilerConfig
from dataset_rt._dataset import CachedDataset
from dataset_rt._migration import ManifestUpdateEntry, ManifestUpdateReport
from dataset_rt._native import OpenShardsStats, open_shards_stats, set_max_open_shards
from dataset_rt._records import (
    BytesLike,
    CachedSample,
    CacheInput,
    CacheSource,
    CacheWriteError,
    CacheWriteResult,
    CacheWriteSuccess,
    Metadata,
    MetadataValue,
    SizedTorchIterableDataset,
)
from dataset_rt._runtime import (
    CacheSourcesDatasetError,
    CacheSourcesDatasetResult,
    CacheSourcesDatasetSuccess,
    DatasetRuntime,
)
from dataset_rt._verify import VerifyProblem, VerifyReport, verify

__all__ = [
    "BytesLike",
    "CacheInput",
    "CacheSource",
    "CacheSourcesDatasetError",
    "CacheSourcesDatasetResult",
    "CacheSourcesDatasetSuccess",
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
    "ReaderConfig",
    "ShardCompression",
    "SizedTorchIterableDataset",
    "WriterConfig",
    "VerifyProblem",
    "VerifyReport",
    "WriterProfilerConfig",
    "open_shards_stats",
    "set_max_open_shards",
    "verify",
]
