"""Our LZ4 block codec interoperates with the reference implementation (PyPI `lz4`).

Blocks written by the core must decode with `lz4.block.decompress`, blocks written
by `lz4.block.compress(store_size=False)` must decode with the core, and a corrupt
block must raise ValueError (never crash, never return wrong-length output).
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dataset_rt._binding import native as _native

lz4_block = pytest.importorskip("lz4.block")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LENGTHS = sorted(set(range(0, 301)) | set(range(301, 70001, 97)) | {65535, 65536, 65537, 70000})


def has_zero_offset(block: bytes) -> bool:
    """Whether a (possibly corrupt) block has a sequence with match offset 0.

    The LZ4 block format says a 0 offset denotes a corrupted block; the `lz4`
    package's decoder still accepts it, so such blocks count as corrupt here.
    """
    position = 0
    while position < len(block):
        token = block[position]
        position += 1
        literals = token >> 4
        if literals == 15:
            while position < len(block):
                literals += block[position]
                position += 1
                if block[position - 1] != 255:
                    break
        position += literals
        if position >= len(block) - 1:
            return False
        if block[position] == 0 and block[position + 1] == 0:
            return True
        position += 2
        if token & 15 == 15:
            while position < len(block) and block[position] == 255:
                position += 1
            position += 1
    return False


def reference_decode(block: bytes, size: int) -> bytes | None:
    """The reference decoding of `block` to exactly `size` bytes, or None when it is corrupt.

    `lz4.block.decompress(uncompressed_size=n)` treats n as a capacity, so a block
    that decodes to fewer bytes counts as a rejection for an exact-size decoder.
    """
    if has_zero_offset(block):
        return None
    try:
        decoded = lz4_block.decompress(block, uncompressed_size=size)
    except Exception:  # noqa: BLE001 - LZ4BlockError and friends
        return None
    return decoded if len(decoded) == size else None


def compressible(length: int, seed: int) -> bytes:
    """Low-entropy data with short and long matches (so the encoder emits real sequences)."""
    rng = random.Random(seed)
    pieces = []
    total = 0
    while total < length:
        choice = rng.randrange(3)
        if choice == 0:
            piece = bytes([rng.randrange(256)]) * rng.randrange(1, 300)
        elif choice == 1:
            piece = bytes(rng.choice(b"abcd") for _ in range(rng.randrange(1, 64)))
        else:
            piece = (b"the quick brown fox " * 20)[: rng.randrange(4, 400)]
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)[:length]


_COMPRESSIBLE_POOL = compressible(2 * 70000, seed=12345)


def compressible_slice(length: int) -> bytes:
    """A `length`-byte window of a shared compressible buffer, at a length-dependent offset."""
    start = (length * 7919) % 70000
    return _COMPRESSIBLE_POOL[start : start + length]


def assert_both_directions(data: bytes, what: str) -> None:
    ours = _native.lz4_compress(data)
    assert isinstance(ours, bytes), (
        f"{what}: lz4_compress returned {type(ours).__name__}, not bytes"
    )
    decoded_by_reference = reference_decode(ours, len(data))
    assert decoded_by_reference is not None, (
        f"{what}: the reference lz4 rejected our block of {len(ours)} bytes "
        f"for {len(data)} input bytes"
    )
    assert decoded_by_reference == data, (
        f"{what}: the reference lz4 decoded our block to different bytes"
    )
    assert _native.lz4_decompress(ours, len(data)) == data, (
        f"{what}: our decoder does not invert our encoder"
    )

    theirs = lz4_block.compress(data, store_size=False)
    assert _native.lz4_decompress(theirs, len(data)) == data, (
        f"{what}: our decoder got different bytes from the reference block of {len(theirs)} bytes"
    )


@SETTINGS
@given(data=st.binary(max_size=5000))
def test_arbitrary_bytes_round_trip_through_our_codec_and_the_reference_in_both_directions(
    data: bytes,
) -> None:
    assert_both_directions(data, f"arbitrary {len(data)} bytes")


@SETTINGS
@given(
    chunks=st.lists(
        st.tuples(st.binary(min_size=1, max_size=16), st.integers(1, 400)), min_size=1, max_size=20
    )
)
def test_repetitive_hypothesis_data_round_trips_in_both_directions(
    chunks: list[tuple[bytes, int]],
) -> None:
    data = b"".join(chunk * repeat for chunk, repeat in chunks)
    assert_both_directions(data, f"repetitive {len(data)} bytes")


@pytest.mark.parametrize("kind", ["incompressible", "compressible"])
def test_every_length_from_0_to_70000_round_trips_in_both_directions(kind: str) -> None:
    for length in LENGTHS:
        data = os.urandom(length) if kind == "incompressible" else compressible_slice(length)
        assert_both_directions(data, f"{kind} length {length}")


def test_compressible_data_actually_shrinks() -> None:
    for length in (1000, 65536, 70000):
        data = compressible(length, seed=7)
        block = _native.lz4_compress(data)
        assert len(block) < length // 2, f"{length} compressible bytes only shrank to {len(block)}"
        zeros = bytes(length)
        assert len(_native.lz4_compress(zeros)) < length // 50, (
            f"{length} zero bytes did not compress"
        )


def test_incompressible_data_stays_within_the_lz4_bound() -> None:
    for length in (0, 1, 15, 16, 65536, 70000):
        data = os.urandom(length)
        block = _native.lz4_compress(data)
        bound = length + length // 255 + 16
        assert len(block) <= bound, (
            f"{length} random bytes compressed to {len(block)} > LZ4 bound {bound}"
        )


def check_corrupt(block: bytes, size: int) -> None:
    """Our decoder agrees with the reference: same bytes, or ValueError when it rejects."""
    expected = reference_decode(block, size)
    try:
        got = _native.lz4_decompress(block, size)
    except ValueError:
        got = None
    # The reference special-cases an empty output (only b"\x00" is accepted); a decoder that
    # treats any lone token without literals as an empty last sequence is equally safe.
    lone_empty_token = size == 0 and len(block) == 1 and block[0] >> 4 == 0
    if expected is None and not lone_empty_token:
        assert got is None, (
            "our decoder accepted a block the reference rejects: "
            f"block={block[:32]!r} ({len(block)} bytes), "
            f"size={size}, decoded to {got[:32]!r}"
        )
    elif expected is not None:
        assert got == expected, (
            f"our decoder {'rejected' if got is None else 'mis-decoded'} "
            "a block the reference decodes: "
            f"block={block[:32]!r} ({len(block)} bytes), size={size}"
        )


@SETTINGS
@given(
    data=st.one_of(
        st.binary(min_size=1, max_size=2000), st.integers(1, 3000).map(compressible_slice)
    ),
    position=st.integers(min_value=0),
    mask=st.integers(1, 255),
    size_delta=st.sampled_from([0, 0, 0, -1, 1, 100]),
)
def test_a_block_with_one_flipped_byte_decodes_like_the_reference_or_raises_value_error(
    data: bytes, position: int, mask: int, size_delta: int
) -> None:
    block = bytearray(_native.lz4_compress(data))
    block[position % len(block)] ^= mask
    check_corrupt(bytes(block), max(0, len(data) + size_delta))


@SETTINGS
@given(
    data=st.one_of(
        st.binary(min_size=1, max_size=2000), st.integers(1, 3000).map(compressible_slice)
    ),
    cut=st.integers(min_value=0),
)
def test_a_truncated_block_raises_value_error(data: bytes, cut: int) -> None:
    block = _native.lz4_compress(data)
    truncated = block[: cut % len(block)]
    assume(reference_decode(truncated, len(data)) is None)
    with pytest.raises(ValueError):
        _native.lz4_decompress(truncated, len(data))


@SETTINGS
@given(block=st.binary(max_size=64), size=st.one_of(st.integers(0, 16), st.integers(0, 4096)))
def test_arbitrary_garbage_blocks_decode_like_the_reference_or_raise_value_error(
    block: bytes, size: int
) -> None:
    check_corrupt(block, size)


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"\x00",
        b"\xf0",
        b"\xff" * 64,
        b"\x1f\x41\x00\x00",
        b"\x10A\xff\xff",
        b"\x0f\x01\x00" + b"\xff" * 30,
    ],
)
@pytest.mark.parametrize("size", [1, 100, 1 << 20])
def test_hand_made_corrupt_blocks_raise_value_error(block: bytes, size: int) -> None:
    with pytest.raises(ValueError):
        _native.lz4_decompress(block, size)


def test_a_block_decoded_to_the_wrong_size_raises_value_error() -> None:
    data = compressible(5000, seed=3)
    block = _native.lz4_compress(data)
    for size in (0, 1, 4999, 5001, 10000):
        with pytest.raises(ValueError):
            _native.lz4_decompress(block, size)


def test_an_empty_payload_decodes_only_from_the_canonical_empty_block() -> None:
    assert _native.lz4_decompress(b"\x00", 0) == b"", (
        "the canonical empty block b'\\x00' was rejected"
    )
    for block in (b"", b"\x10A", b"\x00\x01\x00", b"\x1fA\x01\x00", b"\x00\x00"):
        with pytest.raises(ValueError):
            _native.lz4_decompress(block, 0)


def test_compress_bound_is_zero_past_the_largest_block_input() -> None:
    # As LZ4_compressBound: a length no block can take has no bound (and must not overflow).
    largest = 0x7E00_0000
    assert _native.lib.drt_lz4_compress_bound(largest) == largest + largest // 255 + 16
    for too_long in (largest + 1, 2**63, 2**64 - 1):
        assert _native.lib.drt_lz4_compress_bound(too_long) == 0
