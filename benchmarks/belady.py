"""The fewest shard bytes a reader must fetch to read a stream under a byte budget:
Belady's policy, simulated over the stream's shard accesses.

A reader reads shard after shard; a shard must be in the local directory to be
read, so every access of a shard that is not there fetches it whole, and the
shards kept may never exceed the budget. Belady's policy evicts the kept shard
whose next use is farthest away (one never used again first): with shards of one
size it fetches the fewest bytes any policy can. The benchmark reports a reader's
fetched bytes against this minimum, computed from the cache's own files: the
shard of each sample from ``index.bin`` (24-byte rows, ``shard_id: u64 LE``
first) and each shard's size from ``manifest.json``.
"""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INDEX_ROW_BYTES = 24
NEVER = sys.maxsize


@dataclass(frozen=True)
class Fetches:
    """What a policy fetched over a stream: shards and their bytes."""

    shards: int
    bytes: int


def sample_shards(cache: Path) -> list[int]:
    """The shard id of each sample of the cache at `cache`, by sample id."""
    data = (cache / "index.bin").read_bytes()
    if len(data) % INDEX_ROW_BYTES:
        raise ValueError(f"{cache}/index.bin: {len(data)} bytes is not a whole number of rows")
    if sys.byteorder != "little":
        raise ValueError("index.bin is little-endian; this simulation reads it natively")
    return memoryview(data).cast("Q")[::3].tolist()


def shard_bytes(cache: Path) -> list[int]:
    """The size in bytes of each shard of the cache at `cache`, by shard id."""
    manifest = json.loads((cache / "manifest.json").read_text())
    return [int(shard["byte_len"]) for shard in manifest["shards"]]


def shard_accesses(sample_ids: Sequence[int], shards: Sequence[int]) -> list[int]:
    """The shards a stream of samples reads, one entry per run of samples of one shard."""
    accesses: list[int] = []
    for sample_id in sample_ids:
        shard = shards[sample_id]
        if not accesses or accesses[-1] != shard:
            accesses.append(shard)
    return accesses


def next_uses(accesses: Sequence[int]) -> list[int]:
    """For each access, the position of the next access of the same shard (NEVER if none)."""
    following = [NEVER] * len(accesses)
    seen: dict[int, int] = {}
    for position in range(len(accesses) - 1, -1, -1):
        shard = accesses[position]
        following[position] = seen.get(shard, NEVER)
        seen[shard] = position
    return following


def belady_fetches(accesses: Sequence[int], sizes: Sequence[int], budget: int) -> Fetches:
    """The shards and bytes Belady's policy fetches to read `accesses` (shard ids)
    with at most `budget` bytes of shards kept (`sizes`: bytes by shard id)."""
    largest = max((sizes[shard] for shard in set(accesses)), default=0)
    if budget < largest:
        raise ValueError(f"a budget of {budget} bytes is below the largest shard, {largest}")
    following = next_uses(accesses)
    kept: dict[int, int] = {}  # shard -> its next use
    farthest: list[tuple[int, int]] = []  # (-next use, shard); stale entries skipped
    kept_bytes = fetched_shards = fetched_bytes = 0
    for position, shard in enumerate(accesses):
        if shard not in kept:
            fetched_shards += 1
            fetched_bytes += sizes[shard]
            while kept_bytes + sizes[shard] > budget:
                negative_use, victim = heapq.heappop(farthest)
                if kept.get(victim) == -negative_use:
                    del kept[victim]
                    kept_bytes -= sizes[victim]
            kept_bytes += sizes[shard]
        kept[shard] = following[position]
        heapq.heappush(farthest, (-following[position], shard))
    assert kept_bytes <= budget
    return Fetches(fetched_shards, fetched_bytes)
