"""Ray Data integration: build a cache from a Ray Dataset, read a cache into one.

Importing this module imports ``ray`` (the ``ray`` extra: ``dataset-rt[ray]``).

- `CacheSink` is a Ray Data ``Datasink``: ``ray_dataset.write_datasink(sink)``
  writes one partition per write task with `dataset_rt.write_partition` and
  publishes the cache with one `dataset_rt.commit_partitions` when every task
  has finished; a failed write publishes nothing and removes what its tasks
  staged.
- `read_cache` is a Ray Dataset of a cache's sample stream for one seed and
  epoch, read by parallel Ray tasks, each over its own range of stream
  positions.

docs/distributed.md describes the protocol, the guarantees and the limits.
"""

from __future__ import annotations

from dataset_rt.ray._read import read_cache
from dataset_rt.ray._sink import CacheSink

__all__ = ["CacheSink", "read_cache"]
