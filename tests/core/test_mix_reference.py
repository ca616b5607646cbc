"""A pure-Python reference of mixing (docs/determinism.md, section 12): the counts
and the (cache, row) of every position, checked against the core bit for bit under
hypothesis, and the check values the spec lists."""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import math
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sampler_reference import feistel, permutation_round_keys, siphash_2_4_128

from dataset_rt import errors
from dataset_rt._binding import native as _native

MIX_DOMAIN = b"dataset_rt/mix/v1"
SUBSET_DOMAIN = b"dataset_rt/mix/v1/subset"
REPEAT, CHOOSE, PROPORTION = 1, 2, 3
Entry = tuple[int, int, float, int]  # (cache, form, value, count)


def derive(domain: bytes, seed: int) -> bytes:
    return hashlib.sha256(domain + seed.to_bytes(8, "little")).digest()[:16]


def permuted(key: bytes, n: int, epoch: int, index: int) -> int:
    """Index `index` of epoch `epoch`'s permutation of [0, n) under `key`
    (permutation.zig's Feistel network with cycle walking)."""
    bits, round_keys = permutation_round_keys(key, n, epoch)
    value = feistel(bits, round_keys, index)
    while value >= n:
        value = feistel(bits, round_keys, value)
    return value


def reference_rows(
    seed: int, counts: Sequence[int], row_counts: Sequence[int], positions: Iterable[int]
) -> list[tuple[int, int]]:
    """(cache, row within the cache) at each position."""
    epoch_len = sum(counts)
    order_key = derive(MIX_DOMAIN, seed)
    subset_root = derive(SUBSET_DOMAIN, seed)
    ends = [sum(counts[: cache + 1]) for cache in range(len(counts))]
    result = []
    for position in positions:
        epoch, index = divmod(position, epoch_len)
        slot = permuted(order_key, epoch_len, epoch, index)
        cache = bisect.bisect_right(ends, slot)
        count, rows = counts[cache], row_counts[cache]
        within = slot - (ends[cache] - count)
        whole = count // rows * rows
        if within < whole:
            row = within % rows
        else:
            subset_key = siphash_2_4_128(subset_root, cache.to_bytes(8, "little"))
            row = permuted(subset_key, rows, epoch, within - whole)
        result.append((cache, row))
    return result


def reference_counts(
    entries: Sequence[Entry], row_counts: Sequence[int], epoch_len: int | None
) -> list[int]:
    """Each cache's count: repeat floor(r * n + 1/2) in binary64, choose k, an unlisted
    cache n; proportions floor(p * E) plus the leftover to the largest fractions."""
    if entries[0][1] != PROPORTION:
        counts = list(row_counts)
        for cache, form, value, count in entries:
            counts[cache] = count if form == CHOOSE else math.floor(value * row_counts[cache] + 0.5)
        return counts
    assert epoch_len is not None
    values = {cache: value for cache, _, value, _ in entries}
    exact = [values[cache] * float(epoch_len) for cache in range(len(row_counts))]
    counts = [math.floor(x) for x in exact]
    fractions = [x - math.floor(x) for x in exact]
    order = sorted(range(len(counts)), key=lambda cache: (-fractions[cache], cache))
    for cache in order[: epoch_len - sum(counts)]:
        counts[cache] += 1
    return counts


# The pure mixing functions are the tests' alone: the package never calls them.
_native.lib.drt_mix_counts.argtypes = [
    ctypes.POINTER(_native.MixEntry),
    ctypes.c_uint64,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_uint32,
    ctypes.c_uint64,
    ctypes.POINTER(ctypes.c_uint64),
]
_native.lib.drt_mix_counts.restype = ctypes.c_int32
_native.lib.drt_mix_rows.argtypes = [
    ctypes.c_uint64,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_uint32,
    ctypes.c_uint64,
    ctypes.c_uint64,
    ctypes.POINTER(ctypes.c_uint32),
    ctypes.POINTER(ctypes.c_uint64),
]
_native.lib.drt_mix_rows.restype = ctypes.c_int32


def library_rows(
    seed: int, counts: Sequence[int], row_counts: Sequence[int], start: int, count: int
) -> list[tuple[int, int]]:
    caches = (ctypes.c_uint32 * count)()
    rows = (ctypes.c_uint64 * count)()
    _native.check(
        _native.lib.drt_mix_rows(
            seed,
            (ctypes.c_uint64 * len(counts))(*counts),
            (ctypes.c_uint64 * len(row_counts))(*row_counts),
            len(counts),
            start,
            count,
            caches,
            rows,
        )
    )
    return list(zip(caches, rows, strict=True))


def library_counts(
    entries: Sequence[Entry], row_counts: Sequence[int], epoch_len: int | None
) -> list[int]:
    c_entries = (_native.MixEntry * len(entries))()
    for slot, (cache, form, value, count) in zip(c_entries, entries, strict=True):
        slot.cache, slot.form, slot.value, slot.count = cache, form, value, count
    out = (ctypes.c_uint64 * len(row_counts))()
    _native.check(
        _native.lib.drt_mix_counts(
            c_entries,
            len(entries),
            (ctypes.c_uint64 * len(row_counts))(*row_counts),
            len(row_counts),
            epoch_len or 0,
            out,
        )
    )
    return list(out)


@st.composite
def mixes(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    """(seed, counts, row counts): some caches empty of counts, some with more samples
    than rows, some fewer."""
    caches = draw(st.integers(1, 5))
    row_counts = draw(st.lists(st.integers(1, 40), min_size=caches, max_size=caches))
    counts = [draw(st.integers(0, 3 * rows + 2)) for rows in row_counts]
    if sum(counts) == 0:
        counts[0] = 1
    return draw(st.integers(0, 2**64 - 1)), counts, row_counts


@settings(max_examples=150, deadline=None)
@given(mix=mixes(), epoch=st.integers(0, 2**20), offset=st.integers(0, 50))
def test_library_rows_match_the_reference(
    mix: tuple[int, list[int], list[int]], epoch: int, offset: int
) -> None:
    seed, counts, row_counts = mix
    start = epoch * sum(counts) + offset % sum(counts)
    count = min(60, 2 * sum(counts))
    expected = reference_rows(seed, counts, row_counts, range(start, start + count))
    assert library_rows(seed, counts, row_counts, start, count) == expected


@settings(max_examples=200, deadline=None)
@given(
    row_counts=st.lists(st.integers(1, 10**6), min_size=1, max_size=6),
    data=st.data(),
)
def test_library_counts_match_the_reference(row_counts: list[int], data: st.DataObject) -> None:
    caches = len(row_counts)
    listed = data.draw(st.lists(st.integers(0, caches - 1), min_size=1, unique=True))
    entries: list[Entry] = []
    for cache in listed:
        if data.draw(st.booleans()):
            repeat = data.draw(st.floats(0.01, 20.0, allow_nan=False, allow_infinity=False))
            entries.append((cache, REPEAT, repeat, 0))
        else:
            entries.append((cache, CHOOSE, 0.0, data.draw(st.integers(1, 10**7))))
    expected = reference_counts(entries, row_counts, None)
    if sum(expected) == 0:
        with pytest.raises(errors.InvalidArgumentError, match="this one 0"):
            library_counts(entries, row_counts, None)
    else:
        assert library_counts(entries, row_counts, None) == expected


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(st.integers(1, 1000), min_size=1, max_size=6),
    epoch_len=st.integers(1, 10**12),
)
def test_library_proportions_match_the_reference(weights: list[int], epoch_len: int) -> None:
    total = sum(weights)
    entries: list[Entry] = [
        (cache, PROPORTION, weight / total, 0) for cache, weight in enumerate(weights)
    ]
    row_counts = [1] * len(weights)
    expected = reference_counts(entries, row_counts, epoch_len)
    assert sum(expected) == epoch_len
    assert library_counts(entries, row_counts, epoch_len) == expected


# The check values of docs/determinism.md, section 12.
CHECK_SEED = 42
CHECK_COUNTS = [5, 2, 3]
CHECK_ROW_COUNTS = [2, 4, 3]
CHECK_ROWS = [
    (0, 1), (0, 1), (2, 0), (0, 1), (1, 1), (0, 0), (1, 2), (2, 1), (0, 0), (2, 2),
    (2, 2), (1, 0), (0, 1), (1, 1), (0, 1), (0, 1), (0, 0), (0, 0), (2, 1), (2, 0),
]  # fmt: skip
CHECK_ALGORITHM = "dataset_rt/mix/v1#4d88eedb594a6fb5"


def test_the_reference_and_the_library_give_the_check_values() -> None:
    positions = range(len(CHECK_ROWS))
    assert reference_rows(CHECK_SEED, CHECK_COUNTS, CHECK_ROW_COUNTS, positions) == CHECK_ROWS
    assert library_rows(CHECK_SEED, CHECK_COUNTS, CHECK_ROW_COUNTS, 0, len(CHECK_ROWS)) == (
        CHECK_ROWS
    )


def test_the_algorithm_name_is_the_digest_of_the_counts() -> None:
    words = [len(CHECK_COUNTS), *CHECK_COUNTS]
    message = MIX_DOMAIN + b"".join(word.to_bytes(8, "little") for word in words)
    assert CHECK_ALGORITHM == "dataset_rt/mix/v1#" + hashlib.sha256(message).hexdigest()[:16]


@pytest.mark.parametrize(
    ("entries", "epoch_len", "expected"),
    [
        ([(0, REPEAT, 0.5, 0), (1, REPEAT, 2.0, 0), (2, CHOOSE, 0.0, 75)], None, [2, 8, 75]),
        ([(0, PROPORTION, 0.5, 0), (1, PROPORTION, 0.25, 0), (2, PROPORTION, 0.25, 0)], 10,
         [5, 3, 2]),
        ([(0, PROPORTION, 0.7, 0), (1, PROPORTION, 0.2, 0), (2, PROPORTION, 0.1, 0)], 7,
         [5, 1, 1]),
    ],
)  # fmt: skip
def test_the_count_check_values(
    entries: list[Entry], epoch_len: int | None, expected: list[int]
) -> None:
    row_counts = [3, 4, 10]
    assert reference_counts(entries, row_counts, epoch_len) == expected
    assert library_counts(entries, row_counts, epoch_len) == expected


def test_bad_counts_are_refused_with_the_cores_message() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="sum to 0.9"):
        library_counts([(0, PROPORTION, 0.5, 0), (1, PROPORTION, 0.4, 0)], [3, 3], 10)
    with pytest.raises(errors.InvalidArgumentError, match="mix form must be 1"):
        library_counts([(0, 7, 0.5, 0)], [3], None)
