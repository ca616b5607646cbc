"""The shuffled draw stream can be reproduced from docs/determinism.md alone.

This file holds an independent pure-Python implementation of the documented algorithm
(SipHash-2-4-128 written from the paper, hashlib for SHA-256, binary64 floats) and checks
it against rows produced by the Zig sampler (zig/stream/sampler.zig), pinned below, and, once the
library exports `drt_sampler_draws`, against the library itself for random inputs.
"""

from __future__ import annotations

import ctypes
import hashlib
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

KEY_DOMAIN = b"dataset_rt/sampler/v1"
MASK_64 = (1 << 64) - 1
THRESHOLD_ONE = 1 << 53

# --------------------------------------------------------------------------------------
# Reference implementation (docs/determinism.md, sections 2-6)


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & MASK_64


def siphash_2_4_128(key: bytes, message: bytes) -> bytes:
    """SipHash-2-4 with 128-bit output (Aumasson & Bernstein, reference `siphash.c`)."""
    assert len(key) == 16
    k0, k1 = struct.unpack("<QQ", key)
    v = [
        k0 ^ 0x736F6D6570736575,
        k1 ^ 0x646F72616E646F6D ^ 0xEE,  # the 128-bit variant flips v1 with 0xee
        k0 ^ 0x6C7967656E657261,
        k1 ^ 0x7465646279746573,
    ]

    def sip_round() -> None:
        v[0] = (v[0] + v[1]) & MASK_64
        v[1] = _rotate_left(v[1], 13) ^ v[0]
        v[0] = _rotate_left(v[0], 32)
        v[2] = (v[2] + v[3]) & MASK_64
        v[3] = _rotate_left(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & MASK_64
        v[3] = _rotate_left(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & MASK_64
        v[1] = _rotate_left(v[1], 17) ^ v[2]
        v[2] = _rotate_left(v[2], 32)

    whole = len(message) - len(message) % 8
    tail = message[whole:] + bytes(7 - (len(message) - whole)) + bytes([len(message) & 0xFF])
    for offset in [*range(0, whole, 8), None]:
        block = tail if offset is None else message[offset : offset + 8]
        word = int.from_bytes(block, "little")
        v[3] ^= word
        sip_round()
        sip_round()
        v[0] ^= word
    v[2] ^= 0xEE
    for _ in range(4):
        sip_round()
    low = v[0] ^ v[1] ^ v[2] ^ v[3]
    v[1] ^= 0xDD
    for _ in range(4):
        sip_round()
    high = v[0] ^ v[1] ^ v[2] ^ v[3]
    return struct.pack("<QQ", low, high)


def key_from_seed(seed: int) -> bytes:
    return hashlib.sha256(KEY_DOMAIN + seed.to_bytes(8, "little")).digest()[:16]


def uniform_pair(key: bytes, position: int) -> tuple[int, int]:
    a, b = struct.unpack("<QQ", siphash_2_4_128(key, position.to_bytes(8, "little")))
    return a, b


@dataclass(frozen=True)
class AliasTable:
    thresholds: list[int]
    aliases: list[int]


def build_alias_table(weights: Sequence[float]) -> AliasTable:
    """Vose's construction in binary64, exactly in the documented order of operations."""
    n = len(weights)
    assert n >= 1 and all(0.0 < w < float("inf") for w in weights)
    weight_max = max(weights)
    scaled = [w / weight_max for w in weights]
    total = 0.0
    for normalized in scaled:
        total += normalized
    scaled = [(normalized * float(n)) / total for normalized in scaled]

    aliases = list(range(n))
    small: list[int] = []
    large: list[int] = []
    for row, value in enumerate(scaled):
        (small if value < 1.0 else large).append(row)
    while small and large:
        small_row = small.pop()
        large_row = large.pop()
        aliases[small_row] = large_row
        scaled[large_row] = (scaled[large_row] + scaled[small_row]) - 1.0
        (small if scaled[large_row] < 1.0 else large).append(large_row)
    for row in small + large:
        scaled[row] = 1.0
        aliases[row] = row
    thresholds = [min(max(int(p * 2.0**53), 0), THRESHOLD_ONE) for p in scaled]
    return AliasTable(thresholds, aliases)


def draw(table: AliasTable, key: bytes, position: int) -> int:
    a, b = uniform_pair(key, position)
    column = (a * len(table.thresholds)) >> 64
    return column if (b >> 11) < table.thresholds[column] else table.aliases[column]


def draws(weights: Sequence[float], seed: int, positions: Iterable[int]) -> list[int]:
    table = build_alias_table(weights)
    key = key_from_seed(seed)
    return [draw(table, key, position) for position in positions]


# --------------------------------------------------------------------------------------
# The reference against published vectors and against pinned Zig output

TEST_KEY = bytes(range(16))
# veorq/SipHash vectors.h, vectors_sip128[i]: key 00..0f, message bytes 00..i-1.
SIPHASH_128_VECTORS = {
    0: "a3817f04ba25a8e66df67214c7550293",
    7: "a1f1ebbed8dbc153c0b84aa61ff08239",
    8: "3b62a9ba6258f5610f83e264f31497b4",
    15: "5493e99933b0a8117e08ec0f97cfc3d9",
    16: "6ee2a4ca67b054bbfd3315bf85230577",
    63: "5150d1772f50834a503e069a973fbd7c",
}


@pytest.mark.parametrize(("length", "expected"), sorted(SIPHASH_128_VECTORS.items()))
def test_siphash_reference_matches_published_vectors(length: int, expected: str) -> None:
    assert siphash_2_4_128(TEST_KEY, bytes(range(length))).hex() == expected


def test_key_is_the_first_half_of_sha256_of_domain_and_seed() -> None:
    # Pinned in zig/stream/sampler.zig's test "the key is the first half of SHA-256 ...".
    assert key_from_seed(42).hex() == "3ca3de6316f8a2646ead162f5d2896c8"


def _pinned(weights: list[float], seed: int, start: int, rows: str, name: str) -> Any:
    """One pinned case: `rows` are the Zig rows of positions start, start + 1, ..."""
    return pytest.param(weights, seed, start, [int(row) for row in rows.split()], id=name)


EXTREME_WEIGHTS = [1e-300, 1e300, 3e300, 1e-300, 2.5]
THOUSAND_WEIGHTS = [((i * 7919) % 1000 + 1) / 37.0 for i in range(1000)]

# Rows produced by zig/stream/sampler.zig (AliasTable.build + drawRange).
PINNED_ZIG_DRAWS = [
    _pinned([1.0, 2.0, 3.0], 42, 0, "2 1 0 1 2 1 2 2 1 2", "worked-example"),
    _pinned(
        [1.0, 2.0, 3.0, 4.0, 0.5, 10.0],
        0,
        0,
        "3 5 1 2 5 3 3 5 3 2 3 5 2 3 5 5 1 4 3 2 5 0 5 5 1 3 2 5 5 2 2 5",
        "six-weights",
    ),
    _pinned(EXTREME_WEIGHTS, 7, 0, "2 2 2 2 2 2 2 2 2 1 2 1 2 2 1 2 1 2 1 1", "extreme-weights"),
    _pinned(EXTREME_WEIGHTS, 7, 2**63, "2 2 1 2 2 1 2 2 2 2 2 2", "position-2**63"),
    _pinned(EXTREME_WEIGHTS, 7, 2**64 - 12, "2 2 1 2 2 1 2 2 2 2 1 2", "last-positions"),
    _pinned([0.1] * 7, 123, 0, "6 1 3 2 0 0 4 4 5 1 0 0 5 2 4 6", "equal-weights"),
    _pinned(
        [0.3, 0.1, 0.1],
        5,
        0,
        "2 2 1 0 0 0 0 0 2 2 0 1 0 0 0 0 0 0 1 0 0 1 0 0",
        "rounding-leftover",
    ),
    _pinned(
        THOUSAND_WEIGHTS,
        2**64 - 1,
        10**12,
        "203 715 226 582 328 69 298 40 176 600 434 375 470 496 191 474 558 97 183 139",
        "thousand-rows",
    ),
]


@pytest.mark.parametrize(("weights", "seed", "start", "expected"), PINNED_ZIG_DRAWS)
def test_reference_reproduces_pinned_zig_draws(
    weights: list[float], seed: int, start: int, expected: list[int]
) -> None:
    assert draws(weights, seed, range(start, start + len(expected))) == expected


@pytest.mark.parametrize(
    ("weights", "thresholds", "aliases"),
    [
        ([1.0, 2.0, 3.0], [2**52, 2**53, 2**53], [2, 1, 2]),
        # Row 0 is left in `small` with scaled 0.9999999999999993 and becomes certain.
        ([0.3, 0.1, 0.1], [2**53, 5404319552844594, 5404319552844594], [0, 0, 0]),
        # Row 3 is left in `small` with scaled 0.9999999999999996.
        (
            [1.1, 0.7, 0.9, 3.0],
            [6952925740501819, 4424589107592066, 5688757424046942, 2**53],
            [3, 3, 3, 3],
        ),
    ],
)
def test_reference_builds_the_pinned_zig_tables(
    weights: list[float], thresholds: list[int], aliases: list[int]
) -> None:
    assert build_alias_table(weights) == AliasTable(thresholds, aliases)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 1000, 4097])
@pytest.mark.parametrize("value", [1.0, 0.1, 1.0 / 3.0, 7e-300, 1e300])
def test_equal_weights_build_the_identity_table(n: int, value: float) -> None:
    # So a table of unmaterialized default weights (row = column) gives the same stream.
    assert build_alias_table([value] * n) == AliasTable([THRESHOLD_ONE] * n, list(range(n)))


# --------------------------------------------------------------------------------------
# The reference against the library


@pytest.fixture(scope="module")
def library_draws() -> Callable[[Sequence[float], int, int, int], list[int]]:
    """`drt_sampler_draws` called through ctypes: (weights, seed, start, count) -> rows."""
    from dataset_rt._binding import native as _native

    if not hasattr(_native.lib, "drt_sampler_draws"):
        pytest.skip("library does not export drt_sampler_draws yet")
    function = _native.lib.drt_sampler_draws
    function.argtypes = [
        ctypes.POINTER(ctypes.c_double),  # weights
        ctypes.c_uint64,  # n
        ctypes.c_uint64,  # seed
        ctypes.c_uint64,  # start position
        ctypes.c_uint64,  # count
        ctypes.POINTER(ctypes.c_uint64),  # rows_out
    ]
    function.restype = ctypes.c_int32

    def call(weights: Sequence[float], seed: int, start: int, count: int) -> list[int]:
        weights_array = (ctypes.c_double * len(weights))(*weights)
        rows = (ctypes.c_uint64 * count)()
        status = function(weights_array, len(weights), seed, start, count, rows)
        assert status == 0, f"drt_sampler_draws returned {status}"
        return list(rows)

    return call


positive_finite = st.floats(
    min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False
)
weight_lists = st.one_of(
    st.lists(positive_finite, min_size=1, max_size=60),
    st.lists(st.floats(min_value=0.01, max_value=100.0), min_size=1, max_size=200),
    st.lists(st.sampled_from([0.1, 0.2, 0.3, 1.0, 1.0 / 3.0, 2.5]), min_size=1, max_size=60),
    st.builds(lambda w, n: [w] * n, positive_finite, st.integers(1, 50)),
)


@st.composite
def position_windows(draw_from: st.DrawFn) -> tuple[int, int]:
    count = draw_from(st.integers(1, 16))
    start = draw_from(
        st.one_of(
            st.integers(0, 1000),
            st.just(2**63),
            st.just(2**64 - count),
            st.integers(0, 2**64 - count),
        )
    )
    return start, count


@settings(max_examples=150, deadline=None)
@given(
    weights=weight_lists,
    seed=st.one_of(st.sampled_from([0, 1, 42, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1)),
    window=position_windows(),
)
def test_library_draws_match_the_reference(
    library_draws: Callable[[Sequence[float], int, int, int], list[int]],
    weights: list[float],
    seed: int,
    window: tuple[int, int],
) -> None:
    start, count = window
    expected = draws(weights, seed, range(start, start + count))
    assert library_draws(weights, seed, start, count) == expected


def test_library_draws_match_the_pinned_zig_draws(
    library_draws: Callable[[Sequence[float], int, int, int], list[int]],
) -> None:
    for case in PINNED_ZIG_DRAWS:
        weights, seed, start, expected = case.values
        assert library_draws(weights, seed, start, len(expected)) == expected, case.id


def test_library_draws_match_the_reference_on_a_large_table(
    library_draws: Callable[[Sequence[float], int, int, int], list[int]],
) -> None:
    generator = random.Random(20240501)
    weights = [10.0 ** generator.uniform(-12.0, 12.0) for _ in range(100_000)]
    table = build_alias_table(weights)
    key = key_from_seed(99)
    starts = [0, 2**32, 2**63 - 3, 2**64 - 8] + [generator.randrange(2**64 - 8) for _ in range(20)]
    for start in starts:
        expected = [draw(table, key, position) for position in range(start, start + 8)]
        assert library_draws(weights, 99, start, 8) == expected, f"positions {start}..{start + 7}"


# --------------------------------------------------------------------------------------
# Permutation (docs/determinism.md, section 11): replacement=False with shuffle=True

PERMUTATION_DOMAIN = b"dataset_rt/permutation/v1"


def permutation_key(seed: int) -> bytes:
    return hashlib.sha256(PERMUTATION_DOMAIN + seed.to_bytes(8, "little")).digest()[:16]


def murmur_fmix64(value: int) -> int:
    value ^= value >> 33
    value = (value * 0xFF51AFD7ED558CCD) & MASK_64
    value ^= value >> 33
    value = (value * 0xC4CEB9FE1A85EC53) & MASK_64
    value ^= value >> 33
    return value


def permutation_round_keys(key: bytes, n: int, epoch: int) -> tuple[int, list[int]]:
    """(t, round keys) of epoch `epoch` for a table of n rows."""
    bits = (n - 1).bit_length()
    rounds = 24 if bits <= 4 else 8
    round_keys: list[int] = []
    for pair in range(rounds // 2):
        message = epoch.to_bytes(8, "little") + pair.to_bytes(8, "little")
        round_keys.extend(struct.unpack("<QQ", siphash_2_4_128(key, message)))
    return bits, round_keys


def feistel(bits: int, round_keys: list[int], value: int) -> int:
    high, low = bits - bits // 2, bits // 2
    for round_key in round_keys:
        low_part = value & ((1 << low) - 1)
        high_part = value >> low
        f = murmur_fmix64(low_part ^ round_key) >> (64 - high) if high else 0
        value = (low_part << high) | (high_part ^ f)
        high, low = low, high
    return value


def _pinned_permutation(n: int, seed: int, start: int, rows: str, name: str) -> Any:
    return pytest.param(n, seed, start, [int(row) for row in rows.split()], id=name)


def permutation_rows(n: int, seed: int, positions: Iterable[int]) -> list[int]:
    key = permutation_key(seed)
    rows = []
    for position in positions:
        epoch, index = divmod(position, n)
        bits, round_keys = permutation_round_keys(key, n, epoch)
        value = feistel(bits, round_keys, index)
        while value >= n:  # cycle walking
            value = feistel(bits, round_keys, value)
        rows.append(value)
    return rows


PERMUTATION_KEY_42 = "1cf4a759c06712b20b99550b7883286e"

# Rows of zig/stream/permutation.zig (rowRange), pinned in its tests too.
PINNED_PERMUTATIONS = [
    _pinned_permutation(5, 42, 0, "4 1 3 0 2 3 4 1 0 2", "worked-example"),
    _pinned_permutation(10, 7, 0, "3 5 1 9 8 7 0 4 2 6 4 9 3 6 5 0 7 1 8 2", "two-epochs"),
    _pinned_permutation(1000, 0, 995, "703 0 600 862 296 260 68 894 205 771", "epoch-boundary"),
    _pinned_permutation(
        2**20 + 1,
        2**64 - 1,
        2**63,
        "304639 250474 878957 965723 946662 1017725 311956 812489",
        "cycle-walking",
    ),
    _pinned_permutation(3, 1, 2**64 - 6, "2 1 2 1 0 0", "last-positions"),
]


@pytest.fixture(scope="module")
def library_permutation() -> Callable[[int, int, int, int], list[int]]:
    """`drt_permutation_rows` through ctypes: (n, seed, start, count) -> rows."""
    from dataset_rt._binding import native as _native

    function = _native.lib.drt_permutation_rows
    function.argtypes = [ctypes.c_uint64] * 4 + [ctypes.POINTER(ctypes.c_uint64)]
    function.restype = ctypes.c_int32

    def call(n: int, seed: int, start: int, count: int) -> list[int]:
        rows = (ctypes.c_uint64 * count)()
        status = function(n, seed, start, count, rows)
        assert status == 0, f"drt_permutation_rows returned {status}"
        return list(rows)

    return call


def test_permutation_key_is_sha256_of_its_own_domain() -> None:
    # Pinned in zig/stream/permutation.zig's test "the check values of docs/determinism.md".
    assert permutation_key(42).hex() == PERMUTATION_KEY_42


@pytest.mark.parametrize(("n", "seed", "start", "expected"), PINNED_PERMUTATIONS)
def test_reference_reproduces_pinned_permutations(
    n: int, seed: int, start: int, expected: list[int]
) -> None:
    assert permutation_rows(n, seed, range(start, start + len(expected))) == expected


@pytest.mark.parametrize(("n", "seed", "start", "expected"), PINNED_PERMUTATIONS)
def test_library_reproduces_pinned_permutations(
    library_permutation: Callable[[int, int, int, int], list[int]],
    n: int,
    seed: int,
    start: int,
    expected: list[int],
) -> None:
    assert library_permutation(n, seed, start, len(expected)) == expected


@settings(max_examples=150, deadline=None)
@given(
    n=st.one_of(
        st.integers(1, 40),
        st.integers(1, 2**20),
        st.sampled_from([2**16, 2**16 + 1, 2**32 - 1, 2**53]),
        st.integers(1, 2**53),
    ),
    seed=st.one_of(st.sampled_from([0, 1, 2**64 - 1]), st.integers(0, 2**64 - 1)),
    window=position_windows(),
)
def test_library_permutation_matches_the_reference(
    library_permutation: Callable[[int, int, int, int], list[int]],
    n: int,
    seed: int,
    window: tuple[int, int],
) -> None:
    start, count = window
    expected = permutation_rows(n, seed, range(start, start + count))
    assert library_permutation(n, seed, start, count) == expected
