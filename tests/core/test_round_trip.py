"""Whatever a source yields is read back exactly: payload bytes, metadata values
and types, cache ids and sample ids in order, whatever the codec and shard size."""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import cache_reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import QUIET, ListSource, same_value, simple_samples
from dataset_rt import (
    CachedSample,
    CacheSource,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)
from dataset_rt._binding import packed_batch as packed_batch
from dataset_rt._binding.metadata_row import MetadataRow

IN_ORDER = ReaderConfig(seed=0, shuffle=False)
MiB = 1024 * 1024
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
# The samples of one source: (payload, metadata).
Samples: TypeAlias = list[tuple[bytes, dict[str, object]]]

HYPOTHESIS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

# ---- strategies ---------------------------------------------------------------

unicode_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
tricky_strings = st.sampled_from(
    [
        "",
        '"',
        "\\",
        '\\"',
        "\x00",
        "\x1f\x7f",
        "\n\r\t\b\f",
        "\u2028\u2029",
        "é",
        "😀",
        "\ufeff",
        "'; --",
        "{}[],:",
    ]
)
field_names = st.one_of(
    unicode_text, st.sampled_from(["", "a", "A", "é", "😀", " ", "\x00", '"', "weight", "cache_id"])
)
KINDS = ("bool", "int", "float", "str")

VALUES = {
    "bool": st.booleans(),
    "int": st.one_of(
        st.integers(I64_MIN, I64_MAX), st.sampled_from([0, -1, 1, I64_MIN, I64_MAX, 2**53 + 1])
    ),
    "float": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(
            [
                0.0,
                -0.0,
                1e300,
                -1e300,
                5e-324,
                -5e-324,
                100.0,
                1e21,
                1e16,
                0.1,
                2.0**53,
                1.7976931348623157e308,
            ]
        ),
    ),
    "str": st.one_of(st.text(st.characters(exclude_categories=["Cs"])), tricky_strings),
}

payloads = st.one_of(
    st.binary(max_size=64),
    st.just(b""),
    st.binary(min_size=1000, max_size=20000),
    st.integers(1, 200_000).map(lambda n: (b"compressible " * (n // 13 + 1))[:n]),
)

compressions = st.one_of(
    st.just(ShardCompression()),
    st.floats(min_value=0.01, max_value=100.0).map(lambda r: ShardCompression(algo="lz4", ratio=r)),
)

max_shard_bytes = st.one_of(st.just(1), st.integers(1, 4000), st.just(64 * MiB))


schemas = st.dictionaries(field_names, st.sampled_from(KINDS), min_size=1, max_size=6)


@st.composite
def sources_samples(
    draw: st.DrawFn, max_samples: int = 12, schema: dict[str, str] | None = None
) -> Samples:
    if schema is None:
        schema = draw(schemas)
    count = draw(st.integers(1, max_samples))
    rows: Samples = []
    for _ in range(count):
        metadata = {name: draw(VALUES[kind]) for name, kind in schema.items()}
        rows.append((draw(payloads), metadata))
    return rows


# ---- helpers ------------------------------------------------------------------


def assert_sample_equals(
    sample: CachedSample,
    payload: bytes,
    metadata: Mapping[str, object],
    cache_id: int,
    sample_id: int,
) -> None:
    where = f"cache {cache_id} sample {sample_id}"
    assert isinstance(sample, CachedSample), (
        f"{where}: got {type(sample).__name__}, not CachedSample"
    )
    assert type(sample.data) is bytes, (
        f"{where}: payload is {type(sample.data).__name__}, not bytes"
    )
    assert sample.data == bytes(payload), (
        f"{where}: payload differs ({len(sample.data)} bytes read, {len(payload)} written)"
    )
    assert sample.cache_id == cache_id, f"{where}: cache_id {sample.cache_id}"
    assert sample.sample_id == sample_id, (
        f"{where}: sample_id {sample.sample_id}, expected {sample_id}"
    )
    got = dict(sample.metadata)
    assert sample.metadata == metadata, f"{where}: metadata {got!r} != written {metadata!r}"
    assert set(got) == set(metadata), f"{where}: metadata keys {sorted(got)} != {sorted(metadata)}"
    absent = "".join(metadata) + "?"  # longer than every key
    assert absent not in sample.metadata and sample.metadata.get(absent) is None, where
    with pytest.raises(KeyError):
        sample.metadata[absent]
    for key, value in metadata.items():
        assert same_value(got[key], value), (
            f"{where}: field {key!r} read back as {got[key]!r} ({type(got[key]).__name__}), "
            f"written {value!r} ({type(value).__name__})"
        )


def read_all(runtime: DatasetRuntime, paths: list[Path]) -> list[CachedSample]:
    dataset = runtime.cached_dataset(paths, reader_config=IN_ORDER)
    samples = list(dataset)
    assert len(samples) == len(dataset), (
        f"one epoch yielded {len(samples)} samples but len(dataset) is {len(dataset)}"
    )
    return samples


def index_rows(cache: Path) -> list[tuple[int, int, int]]:
    data = (cache / "index.bin").read_bytes()
    assert len(data) % cache_reference.INDEX_ROW_BYTES == 0, f"index.bin has {len(data)} bytes"
    return cache_reference.index_rows(data)


def assert_rotation_rule(cache: Path, limit: int) -> None:
    """Shards follow "start a new shard if the current one is non-empty and would exceed limit"."""
    rows = index_rows(cache)
    expected_shard, fill = 0, 0
    for sample_id, (shard_id, offset, record_len) in enumerate(rows):
        if fill > 0 and fill + record_len > limit:
            expected_shard, fill = expected_shard + 1, 0
        assert (shard_id, offset) == (expected_shard, fill), (
            f"{cache.name}: sample {sample_id} ({record_len}-byte record) is at "
            f"shard {shard_id} offset {offset}, rotation rule with max_shard_bytes={limit} "
            f"puts it at shard {expected_shard} offset {fill}"
        )
        fill += record_len
    manifest = cache_reference.read_manifest(cache)
    shard_files = sorted(p.name for p in (cache / "shards").iterdir())
    assert len(manifest["shards"]) == expected_shard + 1, (
        f"{cache.name}: manifest lists {len(manifest['shards'])} shards, "
        f"rotation rule gives {expected_shard + 1}"
    )
    assert shard_files == [f"{i:06d}.bin" for i in range(expected_shard + 1)], (
        f"{cache.name}: shard files {shard_files}"
    )


def write_ok(
    runtime: DatasetRuntime, sources: Sequence[ListSource], base: Path, config: WriterConfig
) -> list[Path]:
    listed: list[CacheSource] = list(sources)
    results = runtime.write_cache(listed, base, writer_config=config)
    assert results == [CacheWriteSuccess(s.name, base / s.name) for s in sources], (
        f"write failed: {results}"
    )
    return [base / s.name for s in sources]


# ---- tests --------------------------------------------------------------------


@HYPOTHESIS
@given(samples=sources_samples(), compression=compressions, limit=max_shard_bytes)
def test_arbitrary_payloads_and_metadata_read_back_exactly(
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    samples: Samples,
    compression: ShardCompression,
    limit: int,
) -> None:
    base = tmp_path_factory.mktemp("round_trip")
    config = WriterConfig(show_progress=False, shard_compression=compression, max_shard_bytes=limit)
    (cache,) = write_ok(runtime, [ListSource("src", samples)], base, config)
    got = read_all(runtime, [cache])
    assert len(got) == len(samples), f"wrote {len(samples)} samples, read {len(got)}"
    for sample_id, (sample, (payload, metadata)) in enumerate(zip(got, samples, strict=True)):
        assert_sample_equals(sample, payload, metadata, 0, sample_id)
    assert_rotation_rule(cache, limit)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    groups=schemas.flatmap(
        lambda schema: st.lists(sources_samples(5, schema), min_size=1, max_size=4)
    ),
    compression=compressions,
)
def test_several_sources_in_one_call_give_results_in_order_and_reading_gives_cache_id_by_position(
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    groups: list[Samples],
    compression: ShardCompression,
) -> None:
    # Caches read together share one metadata table, hence one schema.
    base = tmp_path_factory.mktemp("multi")
    sources = [ListSource(f"source_{i}", samples) for i, samples in enumerate(groups)]
    paths = write_ok(
        runtime, sources, base, WriterConfig(show_progress=False, shard_compression=compression)
    )
    order = list(
        reversed(range(len(paths)))
    )  # read them in reverse to decouple cache_id from write order
    got = read_all(runtime, [paths[i] for i in order])
    expected = [
        (payload, metadata, cache_id, sample_id)
        for cache_id, source_index in enumerate(order)
        for sample_id, (payload, metadata) in enumerate(groups[source_index])
    ]
    assert len(got) == len(expected), (
        f"read {len(got)} samples from {len(paths)} caches, expected {len(expected)}"
    )
    for sample, (payload, metadata, cache_id, sample_id) in zip(got, expected, strict=True):
        assert_sample_equals(sample, payload, metadata, cache_id, sample_id)


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_multi_mebibyte_payloads_read_back_exactly(
    runtime: DatasetRuntime, tmp_path: Path, algo: Literal["none", "lz4"]
) -> None:
    samples = [
        (os.urandom(3 * MiB), {"i": 0, "kind": "random"}),
        ((b"0123456789abcdef" * (4 * MiB // 16)), {"i": 1, "kind": "repetitive"}),
        (os.urandom(5 * MiB - 7), {"i": 2, "kind": "random"}),
        (b"", {"i": 3, "kind": "empty"}),
        (bytes(5 * MiB), {"i": 4, "kind": "zeros"}),
    ]
    compression = ShardCompression(algo=algo, ratio=1.0 if algo == "none" else 3.0)
    for limit in (64 * MiB, 1 * MiB):
        base = tmp_path / f"limit_{limit}"
        config = WriterConfig(
            show_progress=False, shard_compression=compression, max_shard_bytes=limit
        )
        (cache,) = write_ok(runtime, [ListSource("big", samples)], base, config)
        got = read_all(runtime, [cache])
        assert len(got) == len(samples), (
            f"max_shard_bytes={limit}: read {len(got)} of {len(samples)} samples"
        )
        for sample_id, (sample, (payload, metadata)) in enumerate(zip(got, samples, strict=True)):
            assert_sample_equals(sample, payload, metadata, 0, sample_id)
        assert_rotation_rule(cache, limit)


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_max_shard_bytes_of_one_puts_every_record_in_its_own_shard(
    runtime: DatasetRuntime, tmp_path: Path, algo: Literal["none", "lz4"]
) -> None:
    samples = simple_samples(7)
    compression = ShardCompression(algo=algo, ratio=1.0)
    (cache,) = write_ok(
        runtime,
        [ListSource("tiny", samples)],
        tmp_path,
        WriterConfig(show_progress=False, max_shard_bytes=1, shard_compression=compression),
    )
    manifest = cache_reference.read_manifest(cache)
    assert len(manifest["shards"]) == 7, (
        f"7 records with max_shard_bytes=1 gave {len(manifest['shards'])} shards"
    )
    assert [(s, o) for s, o, _ in index_rows(cache)] == [(i, 0) for i in range(7)], (
        "records do not each start a shard"
    )
    for sample_id, (sample, (payload, metadata)) in enumerate(
        zip(read_all(runtime, [cache]), samples, strict=True)
    ):
        assert_sample_equals(sample, payload, metadata, 0, sample_id)


def test_a_record_exactly_filling_max_shard_bytes_stays_and_one_more_byte_rotates(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = [(b"x" * 10, {"k": i}) for i in range(6)]
    (probe,) = write_ok(runtime, [ListSource("probe", samples)], tmp_path / "probe", QUIET)
    record_len = index_rows(probe)[0][2]
    assert all(r[2] == record_len for r in index_rows(probe)), (
        "records of equal content have different lengths"
    )
    for limit, per_shard in (
        (2 * record_len, 2),
        (2 * record_len - 1, 1),
        (3 * record_len, 3),
        (3 * record_len + 1, 3),
    ):
        base = tmp_path / f"limit_{limit}"
        (cache,) = write_ok(
            runtime,
            [ListSource("c", samples)],
            base,
            WriterConfig(show_progress=False, max_shard_bytes=limit),
        )
        shards = [s for s, _, _ in index_rows(cache)]
        assert shards == [i // per_shard for i in range(6)], (
            f"{record_len}-byte records with max_shard_bytes={limit}: shard ids {shards}, "
            f"expected {per_shard} per shard"
        )
        assert_rotation_rule(cache, limit)


def test_bytearray_and_memoryview_payloads_read_back_as_bytes(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    raw = bytes(range(256)) * 4
    samples = [
        (bytearray(raw), {"k": "bytearray"}),
        (memoryview(raw), {"k": "memoryview"}),
        (memoryview(raw)[10:500], {"k": "memoryview slice"}),
        (raw, {"k": "bytes"}),
    ]
    (cache,) = write_ok(runtime, [ListSource("views", samples)], tmp_path, QUIET)
    for sample_id, (sample, (payload, metadata)) in enumerate(
        zip(read_all(runtime, [cache]), samples, strict=True)
    ):
        assert_sample_equals(sample, bytes(payload), metadata, 0, sample_id)


def test_batches_larger_than_the_writer_batch_keep_sample_ids_in_source_order(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = [(i.to_bytes(4, "little") * (i % 7), {"i": i, "half": i / 2}) for i in range(2000)]
    (cache,) = write_ok(
        runtime,
        [ListSource("many", samples)],
        tmp_path,
        WriterConfig(show_progress=False, prefetch_size=3, max_shard_bytes=5000),
    )
    got = read_all(runtime, [cache])
    assert [s.sample_id for s in got] == list(range(2000)), "sample ids are not 0..1999 in order"
    for sample_id, (sample, (payload, metadata)) in enumerate(zip(got, samples, strict=True)):
        assert_sample_equals(sample, payload, metadata, 0, sample_id)
    assert_rotation_rule(cache, 5000)


def test_float_metadata_keeps_sign_of_zero_extremes_and_float_type(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    values = [
        -0.0,
        0.0,
        1e300,
        5e-324,
        -5e-324,
        100.0,
        1e21,
        1e-7,
        2.0**63,
        1.7976931348623157e308,
        0.1 + 0.2,
    ]
    samples = [(b"", {"x": v, "n": i}) for i, v in enumerate(values)]
    (cache,) = write_ok(runtime, [ListSource("floats", samples)], tmp_path, QUIET)
    for sample_id, (sample, (payload, metadata)) in enumerate(
        zip(read_all(runtime, [cache]), samples, strict=True)
    ):
        assert_sample_equals(sample, payload, metadata, 0, sample_id)
        read = sample.metadata["x"]
        assert isinstance(read, float), f"{metadata['x']!r} read back as {read!r}"
        assert math.copysign(1.0, read) == math.copysign(1.0, metadata["x"]), (
            f"sign of {metadata['x']!r} lost"
        )


@HYPOTHESIS
@given(
    pool=st.lists(st.one_of(unicode_text, tricky_strings), min_size=1, max_size=6, unique=True),
    picks=st.lists(st.integers(0, 5), min_size=1, max_size=300),
    prefetch=st.sampled_from([1, 4, 64, 256]),
    shuffle=st.booleans(),
)
def test_string_columns_of_few_values_read_back_exactly_through_their_codes(
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    pool: list[str],
    picks: list[int],
    prefetch: int,
    shuffle: bool,
) -> None:
    # The core codes a batch's string column when few of its strings are
    # distinct; the binding then decodes each distinct string once per batch.
    labels = [pool[pick % len(pool)] for pick in picks]
    samples = [(b"x", {"label": label, "n": n}) for n, label in enumerate(labels)]
    base = tmp_path_factory.mktemp("coded")
    config = WriterConfig(show_progress=False)
    (cache,) = write_ok(runtime, [ListSource("src", samples)], base, config)
    coded = []
    column_values = packed_batch._column_values

    def recording(
        kind: int, distinct: int, values: memoryview, offsets: memoryview, strings: bytes
    ) -> list[Any]:
        if kind == 3:  # the string column "label"; its distinct strings when coded
            coded.append(distinct > 0)
        return column_values(kind, distinct, values, offsets, strings)

    packed_batch._column_values = recording
    try:
        reader = ReaderConfig(seed=1, shuffle=shuffle, prefetch_size=prefetch)
        for sample in runtime.cached_dataset([cache], reader_config=reader):
            assert sample.metadata["label"] == labels[sample.sample_id]
            assert sample.metadata["n"] == sample.sample_id
    finally:
        packed_batch._column_values = column_values
    # With prefetch >= len(labels), an iterator reads its first 16 samples as one
    # batch (read_pipeline.first_chunk_samples_max) and all the rest as another,
    # which is coded when its distinct labels are at most a quarter of its rows.
    rest = len(labels) - 16
    if prefetch >= len(labels) and rest >= 4 * len(pool):
        assert any(coded), "no batch of a column of few distinct strings was coded"


def test_samples_pickle_and_metadata_rows_rebuild_from_a_mapping(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # DataLoader workers pickle samples; torch's default_convert rebuilds a
    # mapping as type(m)(dict(m)). Both must give back equal rows, alone.
    samples = [(b"p%d" % n, {"n": n, "label": "ab"[n % 2], "x": n / 4}) for n in range(70)]
    (cache,) = write_ok(runtime, [ListSource("src", samples)], tmp_path, QUIET)
    for sample in runtime.cached_dataset([cache], reader_config=IN_ORDER):
        copy = pickle.loads(pickle.dumps(sample))
        assert copy == sample and dict(copy.metadata) == samples[sample.sample_id][1]
        assert isinstance(sample.metadata, MetadataRow), type(sample.metadata)
        rebuilt = type(sample.metadata)(dict(sample.metadata))
        assert type(rebuilt) is MetadataRow
        assert rebuilt == samples[sample.sample_id][1]
        assert rebuilt["label"] == "ab"[sample.sample_id % 2]
