"""The process's bounded set of open shard files: its maximum and its figures."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from dataset_rt import errors
from dataset_rt._binding import native as _native


@dataclass(frozen=True)
class OpenShardsStats:
    """The shard files this process holds open, for every cache of every dataset
    together (`open_shards_stats`).

    Examples:
        >>> stats = dataset_rt.open_shards_stats()
        >>> 0 <= stats.open <= stats.max_open_shards
        True
        >>> stats.evictions <= stats.opens
        True
    """

    open: int
    """Shard files open now (above `max_open_shards` only while more reads than
    that use files at once)."""
    max_open_shards: int
    """The most shard files the process holds open (`set_max_open_shards`)."""
    opens: int
    """Shard files opened since the process started (in a forked child: since the fork)."""
    evictions: int
    """Shard files closed to make room for another; when it grows about as fast as
    `opens`, the reads cycle through more shards than the set holds."""


def set_max_open_shards(n: int) -> None:
    """Hold at most `n` (>= 1) shard files open in this process, for every cache of
    every dataset together; the default is 64.

    A shard's file opens when a read needs it and closes when another needs the room,
    never while a read uses it; lowering the maximum closes the files above it now.
    Each DataLoader worker process has its own set.

    Examples:
        >>> before = dataset_rt.open_shards_stats().max_open_shards
        >>> dataset_rt.set_max_open_shards(16)
        >>> dataset_rt.open_shards_stats().max_open_shards
        16
        >>> dataset_rt.set_max_open_shards(before)
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"max_open_shards must be an int, got {type(n).__name__}")
    # The core refuses 0; values the C field cannot hold are refused here.
    if not 0 <= n <= _native.U32_MAX:
        raise errors.InvalidArgumentError(
            f"max_open_shards must be between 1 and {_native.U32_MAX}, got {n}"
        )
    _native.check(_native.lib.drt_set_max_open_shards(n))


def open_shards_stats() -> OpenShardsStats:
    """How many shard files this process holds open, its maximum, and how many it
    has opened and closed to make room (`OpenShardsStats`).

    Examples:
        >>> dataset.get(0, 0).metadata["i"]  # opens the sample's shard if it is not
        0
        >>> dataset_rt.open_shards_stats().open >= 1
        True
    """
    out = _native.OpenShardsStatsStruct()
    _native.check(_native.lib.drt_open_shards_stats_get(ctypes.byref(out)))
    return OpenShardsStats(
        open=out.open, max_open_shards=out.max, opens=out.opens, evictions=out.evictions
    )
