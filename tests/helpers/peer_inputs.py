"""What the interoperability tests (tests/test_interop_peer*.py) write with both
implementations, and what reading it must give, encoded as tests/helpers/peer_driver.py encodes.

The inputs cover every metadata kind, payloads empty, compressible and not, several
sources of one schema (loaded together) and one of another, and floats: those dataset-rt
0.2.4 reads back exactly from its own caches, and arbitrary ones.
"""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any, Literal, TypedDict

import peer_driver


class SourceSpec(TypedDict):
    """A source as the tests give it to the driver (before `encode_sources`)."""

    name: str
    samples: list[tuple[bytes, dict[str, Any]]]


class WriterSpec(TypedDict):
    """A write step's "writer" (see tests/helpers/peer_driver.py)."""

    algo: Literal["none", "lz4"]
    ratio: float
    max_shard_bytes: int | None


# Floats dataset-rt 0.2.4 reads back exactly from its own caches (it misreads e.g.
# 0.9999999999999999 and -1.23456e-198: see test_arbitrary_floats_*).
FLOATS = [
    0.1,
    1e21,
    -0.0,
    0.0,
    5e-324,
    1.5,
    100.0,
    -2.5e-8,
    1e-7,
    123456.789,
    2.0**53,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    2.2250738585072014e-308,
    2.225073858507201e-308,
    0.30000000000000004,
    1e22,
    1e23,
    -1e-300,
    3.141592653589793,
    1 / 3,
    1e16,
    12345678901234567890.0,
    4.35,
    0.7,
    1e-5,
    1e15,
    1e17,
    5e-310,
    6.02214076e23,
    1.0000000000000002,
]
INTS = [
    0,
    -1,
    1,
    2**63 - 1,
    -(2**63),
    2**53 + 1,
    -(2**53) - 1,
    4611686018427387904,
    1234567890123456789,
    42,
]
STRINGS = [
    "",
    "plain",
    'with "quotes"',
    "back\\slash",
    "new\nline\ttab\rret",
    "\x00nul\x01\x1f\x7f",
    "é ü ß",
    "😀 emoji",
    "\u2028\u2029 separators",
    "</script>",
    "'single'",
    "\\u0041 not an escape",
    "x" * 300,
]


def payload(rng: random.Random, index: int) -> bytes:
    kind = index % 4
    if kind == 0:
        return b""
    if kind == 1:
        return bytes([index % 256]) * rng.randrange(1, 700)  # compressible
    if kind == 2:
        return rng.randbytes(rng.randrange(1, 1500))  # incompressible
    return (b"the quick brown fox %d " % index) * rng.randrange(1, 40)


def shared_schema_samples(
    count: int, offset: int, rng: random.Random
) -> list[tuple[bytes, dict[str, Any]]]:
    samples = []
    for i in range(count):
        k = i + offset
        samples.append(
            (
                payload(rng, k),
                {
                    "flag": k % 3 == 0,
                    "count": INTS[k % len(INTS)],
                    "score": FLOATS[k % len(FLOATS)],
                    "label": STRINGS[k % len(STRINGS)],
                    "Zeta": FLOATS[(k * 7 + 3) % len(FLOATS)],
                    "a_int": k,
                },
            )
        )
    return samples


def other_schema_samples(rng: random.Random) -> list[tuple[bytes, dict[str, Any]]]:
    """A cache of its own schema: string and bool columns with non-ASCII and quoting names."""
    return [
        (
            payload(rng, i),
            {"é": STRINGS[i % len(STRINGS)], 'q"uote': i % 2 == 1, "~last": STRINGS[-1 - i]},
        )
        for i in range(len(STRINGS))
    ]


def sources_for(seed: int) -> list[SourceSpec]:
    rng = random.Random(seed)
    return [
        {"name": "alpha", "samples": shared_schema_samples(31, 0, rng)},
        {"name": "beta", "samples": shared_schema_samples(7, 100, rng)},
        {"name": "gamma", "samples": shared_schema_samples(1, 200, rng)},
        {"name": "other", "samples": other_schema_samples(rng)},
    ]


SHARED = ["alpha", "beta", "gamma"]  # loaded together: cache_id 0, 1, 2
VARIANTS: dict[str, WriterSpec] = {
    "none-one-shard": {"algo": "none", "ratio": 1.0, "max_shard_bytes": None},
    "none-small-shards": {"algo": "none", "ratio": 1.0, "max_shard_bytes": 900},
    "lz4-one-shard": {"algo": "lz4", "ratio": 2.0, "max_shard_bytes": None},
    "lz4-small-shards": {"algo": "lz4", "ratio": 2.0, "max_shard_bytes": 900},
}
SOURCES = sources_for(2024)


def encode_sources(sources: list[SourceSpec]) -> list[dict[str, Any]]:
    """Sources as a write step of the driver takes them."""
    return [
        {
            "name": source["name"],
            "samples": [
                [peer_driver.encode_bytes(data), peer_driver.encode_metadata(metadata)]
                for data, metadata in source["samples"]
            ],
        }
        for source in sources
    ]


def expected_read(sources: list[SourceSpec], names: list[str]) -> list[list[Any]]:
    """What reading `names` in order with shuffle=False yields, encoded like the driver's output."""
    by_name = {source["name"]: source["samples"] for source in sources}
    return [
        [
            peer_driver.encode_value(cache_id),
            peer_driver.encode_value(sample_id),
            peer_driver.encode_bytes(data),
            peer_driver.encode_metadata(metadata),
        ]
        for cache_id, name in enumerate(names)
        for sample_id, (data, metadata) in enumerate(by_name[name])
    ]


POLARS_DTYPE = {bool: "Boolean", int: "Int64", float: "Float64", str: "String"}


def expected_table(sources: list[SourceSpec], names: list[str]) -> dict[str, Any]:
    """The samples metadata table of `names` loaded in order, encoded like the driver's."""
    by_name = {source["name"]: source["samples"] for source in sources}
    first = by_name[names[0]][0][1]
    stored = sorted(first)
    rows = [
        (cache_id, sample_id, metadata)
        for cache_id, name in enumerate(names)
        for sample_id, (_, metadata) in enumerate(by_name[name])
    ]
    enc = peer_driver.encode_value
    return {
        "columns": [["cache_id", "UInt64"], ["sample_id", "UInt64"]]
        + [[name, POLARS_DTYPE[type(first[name])]] for name in stored]
        + [["weight", "Float64"]],
        "values": [[enc(c) for c, _, _ in rows], [enc(s) for _, s, _ in rows]]
        + [[enc(m[name]) for _, _, m in rows] for name in stored]
        + [[enc(1.0) for _ in rows]],
    }


def first_difference(actual: list[Any], expected: list[Any]) -> str:
    """Where two encoded lists first differ, for an assertion's message."""
    if len(actual) != len(expected):
        return f"{len(actual)} items instead of {len(expected)}"
    for position, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got != want:
            return (
                f"item {position}: got {json.dumps(got)[:600]}, expected {json.dumps(want)[:600]}"
            )
    return "no difference"


def random_floats(count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    values: list[float] = []
    while len(values) < count:
        value = struct.unpack("<d", rng.randbytes(8))[0]
        if math.isfinite(value):
            values.append(value)
    return values + [0.9999999999999999, -1.23456e-198, 5e-324, -5e-324, 2.2250738585072009e-308]


def float_sources() -> list[SourceSpec]:
    values = random_floats(300, 7)
    return [
        {
            "name": "floats",
            "samples": [(struct.pack("<d", v), {"f": v, "i": i}) for i, v in enumerate(values)],
        }
    ]


FLOAT_SOURCES = float_sources()

# The peer's README quickstart stores a metadata column named "sample_id", like the identity column.
QUICKSTART_SOURCES: list[SourceSpec] = [
    {
        "name": "train_images",
        "samples": [
            (
                bytes([i]) * (5 + i),
                {"sample_id": i, "label": "rare_class" if i % 3 == 0 else "common"},
            )
            for i in range(6)
        ],
    }
]
