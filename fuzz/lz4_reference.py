"""LZ4 blocks for the fuzz harness (`cache_files.py`): the reference implementation's
decoding (the `lz4` package, a dev dependency), the length a block's sequences add up to,
and where its tokens are (the places worth mutating).
"""

from __future__ import annotations

try:
    import lz4.block as lz4_block  # the reference LZ4 implementation (a dev dependency)
except ImportError:  # pragma: no cover - e.g. a Python without the dev extras
    lz4_block = None
# Whether the reference implementation is there to compare the core's decoding with.
HAVE_REFERENCE = lz4_block is not None

LZ4_EXPANSION_MAX = 255  # no LZ4 block decodes to more than 255 times its length
DIRECT_DECODE_MAX = 1 << 24  # bound on what the harness asks the codec to allocate


def reference_lz4(block: bytes, size: int) -> bytes | None:
    """The reference implementation's decoding of `block` to exactly `size` bytes."""
    assert lz4_block is not None
    if size > DIRECT_DECODE_MAX:
        return None
    try:
        decoded: bytes = lz4_block.decompress(block, uncompressed_size=size)
    except Exception:  # noqa: BLE001 - LZ4BlockError and friends
        return None
    return decoded if len(decoded) == size else None


def lz4_decoded_len(block: bytes) -> int | None:
    """How many bytes the sequences of `block` add up to, whatever its stated size."""
    out_len = 0
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
        out_len += literals
        if position >= len(block):
            return out_len if position == len(block) else None
        position += 2
        match = token & 15
        if match == 15:
            while position < len(block):
                match += block[position]
                position += 1
                if block[position - 1] != 255:
                    break
        out_len += match + 4
    return out_len


def lz4_hot_points(block: bytes) -> list[int]:
    """Where the block's tokens and match offsets are."""
    points: list[int] = []
    position = 0
    while position < len(block) and len(points) < 256:
        token = block[position]
        points.append(position)
        position += 1
        literals = token >> 4
        if literals == 15:
            while position < len(block) and block[position] == 255:
                position += 1
            literals += block[position] if position < len(block) else 0
            position += 1
        position += literals
        points.append(position)
        position += 2
        if token & 15 == 15:
            while position < len(block) and block[position] == 255:
                position += 1
            position += 1
    return points
