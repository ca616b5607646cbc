"""benchmarks/belady.py: the minimum that the remote benchmark's budget is held to."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

# Loaded from its file, benchmarks/ left off sys.path: its distributed.py would shadow
# dask's `distributed` package for every later test in the session.
_SPEC = importlib.util.spec_from_file_location(
    "belady", Path(__file__).resolve().parents[2] / "benchmarks" / "belady.py"
)
assert _SPEC is not None and _SPEC.loader is not None
belady = importlib.util.module_from_spec(_SPEC)
sys.modules["belady"] = belady  # its dataclasses look their module up
_SPEC.loader.exec_module(belady)


def test_belady_evicts_the_shard_used_farthest_ahead() -> None:
    # Room for two of three shards: after 0 and 1, shard 2 evicts 1 (next used at 4,
    # after 0 at 3); then 1 evicts 0 (never used again); 2 is still kept.
    fetches = belady.belady_fetches([0, 1, 2, 0, 1, 2], [1, 1, 1], budget=2)

    assert fetches == belady.Fetches(shards=4, bytes=4)


def test_belady_fetches_every_shard_once_when_the_budget_holds_them_all() -> None:
    fetches = belady.belady_fetches([0, 1, 0, 2, 1, 2, 0], [5, 7, 3], budget=15)

    assert fetches == belady.Fetches(shards=3, bytes=15)


def test_belady_counts_bytes_by_shard_size_and_keeps_within_the_budget() -> None:
    # 10 bytes of room: the 6-byte shard 1 and 4-byte shard 0 fit, shard 2 (8) evicts both.
    fetches = belady.belady_fetches([0, 1, 2, 0], [4, 6, 8], budget=10)

    assert fetches == belady.Fetches(shards=4, bytes=4 + 6 + 8 + 4)


def test_a_budget_below_the_largest_shard_is_refused() -> None:
    with pytest.raises(ValueError, match="below the largest shard, 8"):
        belady.belady_fetches([0, 1], [4, 8], budget=7)


def test_shard_accesses_come_from_the_index_rows_and_merge_runs(tmp_path: Path) -> None:
    rows = [(0, 0, 10), (0, 10, 10), (1, 0, 10), (0, 20, 10)]
    (tmp_path / "index.bin").write_bytes(b"".join(struct.pack("<QQQ", *row) for row in rows))
    shards = [{"byte_len": 30}, {"byte_len": 10}]
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": shards}))

    accesses = belady.shard_accesses([0, 1, 2, 3], belady.sample_shards(tmp_path))

    assert accesses == [0, 1, 0]
    assert belady.shard_bytes(tmp_path) == [30, 10]
