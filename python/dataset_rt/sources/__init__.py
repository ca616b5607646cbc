"""Ready-made sources: write a cache from a folder of files, Parquet files, an
Arrow table or a Hugging Face dataset without writing a source class.

Each class is an ordinary `CacheSource` (a ``name`` attribute and ``__iter__``
yielding `CacheInput`), so `DatasetRuntime.write_cache` and
`DatasetRuntime.from_cache_sources` take it as they take any source. Each one
checks its arguments when it is made (missing folder or column, a data column
that is not binary, a metadata column that is not primitive) and streams its
samples when iterated: one file, or one record batch of rows, at a time.

Examples:
    >>> from dataset_rt import DatasetRuntime, ReaderConfig
    >>> from dataset_rt.sources import FolderSource
    >>> runtime = DatasetRuntime(num_workers=4)
    >>> [result] = runtime.write_cache(FolderSource("images/train"), "caches")
    >>> dataset = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0))
"""

from __future__ import annotations

from dataset_rt.sources._arrow import ArrowSource
from dataset_rt.sources._folder import FolderSource
from dataset_rt.sources._hf import HFDatasetSource
from dataset_rt.sources._parquet import ParquetSource

__all__ = ["ArrowSource", "FolderSource", "HFDatasetSource", "ParquetSource"]
