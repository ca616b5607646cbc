"""The commit of a cache built in partitions (the core's `drt_partitions_commit`)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import NamedTuple

from dataset_rt._binding import native as _native


class SealedPart(NamedTuple):
    """One partition as its pointer file sealed it: the attempt whose cache holds
    it (None for a partition of no samples), its sample count and the SHA-256 of
    the attempt's manifest.json."""

    attempt: str | None
    sample_count: int
    manifest_sha256: bytes


def commit_partitions(base: str | os.PathLike[str], name: str, parts: Sequence[SealedPart]) -> bool:
    """Join the sealed partitions of `name` under `base` into the published cache
    `base`/`name` (partition i is `parts[i]`). True when this call published it,
    False when an earlier commit had (the core's committed.json names it). Raises
    the core's error otherwise; nothing is published then."""
    base_bytes = os.fsencode(base)
    name_bytes = name.encode("utf-8", "surrogatepass")
    count = len(parts)
    attempts = [None if part.attempt is None else part.attempt.encode() for part in parts]
    attempt_array = (ctypes.c_char_p * count)(*attempts)
    lengths = (ctypes.c_uint64 * count)(*(len(a) if a is not None else 0 for a in attempts))
    counts = (ctypes.c_uint64 * count)(*(part.sample_count for part in parts))
    digests = (ctypes.c_uint8 * (32 * count)).from_buffer_copy(
        b"".join(part.manifest_sha256 for part in parts)
    )
    outcome = ctypes.c_uint32(0)
    _native.check(
        _native.lib.drt_partitions_commit(
            base_bytes,
            len(base_bytes),
            name_bytes,
            len(name_bytes),
            attempt_array,
            lengths,
            counts,
            digests,
            count,
            ctypes.byref(outcome),
        )
    )
    return outcome.value == 0
