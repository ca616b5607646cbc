"""Bad input (SPEC section 8): every bad sample or name becomes a
`CacheWriteError(source_name, message)` naming what is wrong, nothing is
published and no staging directory is left; call-level mistakes raise."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import MappingProxyType

import pydantic
import pytest

from conftest import QUIET, ListSource, published_entries, simple_samples, staging_dirs
from dataset_rt import (
    CacheInput,
    CacheSource,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    MetadataValue,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
    WriterProfilerConfig,
)

GOOD: dict[str, MetadataValue] = {"a": 1, "s": "x"}

# Values Python's own JSON encoder cannot take: the message must still say what is wrong.
LIST_HOLDING_ITSELF: list[object] = []
LIST_HOLDING_ITSELF.append(LIST_HOLDING_ITSELF)
DEEPLY_NESTED: list[object] = []
for _ in range(100_000):
    DEEPLY_NESTED = [DEEPLY_NESTED]


def good_rows(count: int) -> list[tuple[bytes, dict[str, MetadataValue]]]:
    return [(bytes([i % 256]) * 3, {"a": i, "s": f"s{i}"}) for i in range(count)]


def assert_clean(base: Path) -> None:
    assert published_entries(base) == [], (
        f"something was published under {base}: {published_entries(base)}"
    )
    assert staging_dirs(base) == [], (
        f"staging directories left in {base / 'tmp'}: {staging_dirs(base)}"
    )


class RawSource:
    """Yields its items as given (a 2-tuple is a valid CacheInput shape): feeds malformed items."""

    def __init__(self, name: str, items: Sequence[object]) -> None:
        self.name = name
        self.items = items

    def __iter__(self) -> Iterator[object]:
        yield from self.items


def write_one_bad(
    runtime: DatasetRuntime, base: Path, samples: Sequence[object], name: str = "bad"
) -> str:
    results = runtime.write_cache(RawSource(name, samples), base, writer_config=QUIET)  # type: ignore[arg-type]
    assert len(results) == 1, f"one source gave {len(results)} results"
    (result,) = results
    assert isinstance(result, CacheWriteError), f"bad input was accepted: {result}"
    assert result.source_name == name, f"error names source {result.source_name!r}, not {name!r}"
    assert isinstance(result.message, str) and result.message, "error message is empty"
    assert_clean(base)
    return result.message


def assert_mentions(message: str, *fragments: str) -> None:
    for fragment in fragments:
        assert fragment in message, f"message {message!r} does not mention {fragment!r}"


# ---- bad samples -------------------------------------------------------------------

# (id, bad sample, fragments the message must contain besides "sample <index>")
BAD_SAMPLES = [
    ("str payload", ("text", GOOD), ["payload", "str"]),
    ("int payload", (5, GOOD), ["payload", "int"]),
    ("list payload", ([1, 2], GOOD), ["payload", "list"]),
    ("None payload", (None, GOOD), ["payload", "NoneType"]),
    ("list metadata", (b"x", [("a", 1), ("s", "x")]), ["metadata", "list"]),
    ("None metadata", (b"x", None), ["metadata", "NoneType"]),
    ("str metadata", (b"x", "a=1"), ["metadata", "str"]),
    ("int key", (b"x", {"a": 1, "s": "x", 3: 4}), ["key", "3"]),
    ("bytes key", (b"x", {"a": 1, "s": "x", b"k": 4}), ["key", "b'k'"]),
    # As many keys as the schema, one of them not a str: still named, never
    # turned into the string "3" as JSON would.
    ("int key instead of a field", (b"x", {"a": 1, 3: "x"}), ["key", "3"]),
    ("None key instead of a field", (b"x", {None: 1, "s": "x"}), ["key", "None"]),
    ("int key, not a dict", (b"x", MappingProxyType({"a": 1, "s": "x", 3: 4})), ["key", "3"]),
    ("list value", (b"x", {"a": [1], "s": "x"}), ["'a'", "list"]),
    ("dict value", (b"x", {"a": {"b": 1}, "s": "x"}), ["'a'", "dict"]),
    ("None value", (b"x", {"a": None, "s": "x"}), ["'a'", "None"]),
    ("object value", (b"x", {"a": object(), "s": "x"}), ["'a'", "object"]),
    ("bytes value", (b"x", {"a": b"1", "s": "x"}), ["'a'", "bytes"]),
    ("int then float", (b"x", {"a": 1.5, "s": "x"}), ["'a'", "int", "float"]),
    ("str then int", (b"x", {"a": 1, "s": 7}), ["'s'", "int"]),
    ("int then bool", (b"x", {"a": True, "s": "x"}), ["'a'", "int", "bool"]),
    ("missing key", (b"x", {"a": 1}), ["'s'", "missing"]),
    ("extra key", (b"x", {"a": 1, "s": "x", "extra": 2}), ["'extra'"]),
    ("empty mapping", (b"x", {}), ["metadata"]),
    ("int 2**63", (b"x", {"a": 2**63, "s": "x"}), ["'a'", str(2**63)]),
    ("int -2**63-1", (b"x", {"a": -(2**63) - 1, "s": "x"}), ["'a'", str(-(2**63) - 1)]),
    ("int 10**30", (b"x", {"a": 10**30, "s": "x"}), ["'a'"]),
    (
        "int of 5001 digits",
        (b"x", {"a": 10**5000, "s": "x"}),
        ["'a'", "outside the signed 64-bit range"],
    ),
    ("list holding itself", (b"x", {"a": LIST_HOLDING_ITSELF, "s": "x"}), ["'a'", "got list"]),
    ("deeply nested list", (b"x", {"a": DEEPLY_NESTED, "s": "x"}), ["'a'", "got list"]),
    ("not a pair", b"just bytes", ["bytes"]),
    ("triple", (b"x", GOOD, 3), ["tuple"]),
]


# These break the schema fixed by an earlier sample, so they cannot come first.
NEEDS_EARLIER_SAMPLE = {
    "int then float",
    "str then int",
    "int then bool",
    "missing key",
    "extra key",
}
BAD_SAMPLE_CASES = [
    pytest.param(bad, fragments, position, id=f"{ident}-at-{position}")
    for ident, bad, fragments in BAD_SAMPLES
    for position in ((1, 5, 300) if ident in NEEDS_EARLIER_SAMPLE else (0, 5, 300))
]


@pytest.mark.parametrize(("bad", "fragments", "position"), BAD_SAMPLE_CASES)
def test_a_bad_sample_is_a_cache_write_error_naming_the_sample_and_problem(
    runtime: DatasetRuntime, tmp_path: Path, bad: object, fragments: list[str], position: int
) -> None:
    samples = [*good_rows(position), bad, *good_rows(3)]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, f"sample {position}", *fragments)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(math.nan, "NaN"), (math.inf, "nf"), (-math.inf, "nf"), (float("-nan"), "NaN")],
    ids=["nan", "inf", "-inf", "-nan"],
)
@pytest.mark.parametrize("position", [0, 300])
def test_non_finite_float_metadata_is_rejected_naming_field_and_sample(
    runtime: DatasetRuntime, tmp_path: Path, value: float, fragment: str, position: int
) -> None:
    samples = [(b"p", {"f": float(i)}) for i in range(position)] + [(b"p", {"f": value})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, f"sample {position}", "'f'", fragment)


def test_a_schema_change_in_a_later_batch_names_the_sample(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = [(b"p", {"a": i, "s": "x"}) for i in range(1000)] + [(b"p", {"a": 0.5, "s": "x"})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, "sample 1000", "'a'", "int", "float")


def test_the_field_named_is_the_bad_one_not_an_earlier_good_one(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    samples = [(b"p", {"b": True, "f": 0.5, "i": 2, "s": "x", "z": LIST_HOLDING_ITSELF})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, "sample 0", "'z'", "got list")


def test_a_key_with_a_nul_byte_is_shown_escaped_and_the_reason_kept(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # Unescaped, the NUL would end the C string that carries the message.
    samples = [(b"p", {"a\x00b": 1}), (b"p", {"a\x00b": 1.5})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, "sample 1", "'a\\x00b' changed type from int to float")


def test_an_int_of_thousands_of_digits_is_shown_cut(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # The JSON fallback describes it (another sample cannot be encoded): cut as the core cuts.
    samples = [(b"p", {"a": 10**4000, "z": 1}), (b"p", {"a": 1, "z": object()})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, "sample 0", "'a' integer 1" + "0" * 39 + "... is outside")
    assert len(message) < 200, message


def test_an_int_outside_int64_is_shown_whole_when_python_can_print_it(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # Here the JSON fallback fails on the list, then describes the first bad field.
    samples = [(b"p", {"a": 2**63, "z": LIST_HOLDING_ITSELF})]
    message = write_one_bad(runtime, tmp_path / "caches", samples)
    assert_mentions(message, "sample 0", "'a' integer 9223372036854775808 is outside")


def test_messages_about_very_long_keys_keep_their_reason(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    # A message holds about 1 KiB: a long key is cut, never the reason after it.
    key, other = "k" * 3000, "o" * 3000
    changed = [(b"p", {key: 1}), (b"p", {key: 1.5})]
    message = write_one_bad(runtime, tmp_path / "changed", changed)
    assert_mentions(message, "sample 1", "k" * 200 + "...'", "changed type from int to float")
    renamed = [(b"p", {key: 1}), (b"p", {other: 1})]
    message = write_one_bad(runtime, tmp_path / "renamed", renamed)
    assert_mentions(message, "sample 1", "missing key 'kkk", "and has unexpected key 'ooo")


def test_empty_metadata_mapping_as_the_first_sample_is_rejected(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    message = write_one_bad(runtime, tmp_path / "caches", [(b"x", {}), (b"y", {})])
    assert_mentions(message, "sample 0", "metadata")


def test_an_empty_source_is_a_cache_write_error(runtime: DatasetRuntime, tmp_path: Path) -> None:
    message = write_one_bad(runtime, tmp_path / "caches", [], name="empty")
    assert_mentions(message, "empty", "no samples")


# ---- bad names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a/b", "/abs", "a\\b", "..", ".", "", "tmp", "../escape", "x" * 300, "nul\x00byte"],
    ids=[
        "slash",
        "absolute",
        "backslash",
        "dotdot",
        "dot",
        "empty",
        "tmp",
        "dotdot-slash",
        "too-long",
        "nul",
    ],
)
def test_a_source_name_that_is_not_one_plain_segment_is_a_cache_write_error(
    runtime: DatasetRuntime, tmp_path: Path, name: str
) -> None:
    base = tmp_path / "caches"
    good = ListSource("good", good_rows(2))
    source = ListSource(name, good_rows(2))
    results = runtime.write_cache([good, source], base, writer_config=QUIET)
    assert results[0] == CacheWriteSuccess("good", base / "good"), (
        f"the valid source next to it failed: {results[0]}"
    )
    assert len(results) == 2 and isinstance(results[1], CacheWriteError), (
        f"name {name!r} was accepted: {results}"
    )
    # Labelled by its name or, as dataset-rt 0.2.4 does for unusable names, by its position.
    assert results[1].source_name in (name, "source[1]"), (
        f"error is labelled {results[1].source_name!r}"
    )
    message = results[1].message
    assert "source name" in message, f"message {message!r} does not say the name is the problem"
    assert "segment" in message or "reserved" in message, (
        f"message {message!r} does not say what is wrong with the name"
    )
    assert published_entries(base) == ["good"], f"published {published_entries(base)}"
    assert staging_dirs(base) == [], f"staging directories left: {staging_dirs(base)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caches"], (
        f"wrote outside base: {list(tmp_path.iterdir())}"
    )
    assert source.iterations == 0, f"the source with invalid name {name!r} was iterated"


@pytest.mark.parametrize(
    "name",
    ["bad\udcff", "\ud800", "a\udc80b"],
    ids=["undecodable-byte", "lone-surrogate", "escaped-byte-inside"],
)
def test_a_source_name_that_is_not_valid_utf8_is_a_cache_write_error(
    runtime: DatasetRuntime, tmp_path: Path, name: str
) -> None:
    # The manifest records the name as JSON text; os.fsdecode gives such names for
    # undecodable bytes. The other sources still run.
    base = tmp_path / "caches"
    source = ListSource(name, good_rows(2))
    results = runtime.write_cache(
        [source, ListSource("good", good_rows(2))], base, writer_config=QUIET
    )
    assert isinstance(results[0], CacheWriteError), f"name {name!r} was accepted: {results}"
    assert "is not valid UTF-8" in results[0].message, results[0].message
    assert results[1] == CacheWriteSuccess("good", base / "good"), results[1]
    assert published_entries(base) == ["good"], f"published {published_entries(base)}"
    assert staging_dirs(base) == [], f"staging directories left: {staging_dirs(base)}"
    assert source.iterations == 0, f"the source with name {name!r} was iterated"


def test_a_source_without_a_str_name_is_a_cache_write_error(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    class NoName:
        def __iter__(self) -> Iterator[CacheInput]:
            yield CacheInput(b"x", GOOD)

    source = ListSource("placeholder", good_rows(1))
    source.name = 42  # type: ignore[assignment]
    results = runtime.write_cache(
        [NoName(), source, ListSource("ok", good_rows(1))],  # type: ignore[list-item]
        tmp_path,
        writer_config=QUIET,
    )
    assert isinstance(results[0], CacheWriteError) and "name" in results[0].message, (
        f"no-name source: {results[0]}"
    )
    assert isinstance(results[1], CacheWriteError) and "name" in results[1].message, (
        f"int-name source: {results[1]}"
    )
    assert results[2] == CacheWriteSuccess("ok", tmp_path / "ok"), (
        f"the valid source did not succeed: {results[2]}"
    )


# ---- failing sources, isolation ---------------------------------------------------------


class RaisingSource:
    def __init__(self, name: str, good: int, error: BaseException) -> None:
        self.name = name
        self.good = good
        self.error = error
        self.iterations = 0

    def __iter__(self) -> Iterator[CacheInput]:
        self.iterations += 1
        for payload, metadata in good_rows(self.good):
            yield CacheInput(payload, metadata)
        raise self.error


@pytest.mark.parametrize("good", [0, 10, 700])
def test_a_source_raising_midway_is_an_error_and_the_other_sources_still_succeed(
    runtime: DatasetRuntime, tmp_path: Path, good: int
) -> None:
    sources: list[CacheSource] = [
        ListSource("first", good_rows(5)),
        RaisingSource("broken", good, ValueError("the source broke here")),
        ListSource("last", good_rows(6)),
    ]
    results = runtime.write_cache(sources, tmp_path, writer_config=QUIET)
    assert [r.source_name for r in results] == ["first", "broken", "last"], (
        f"results out of order: {results}"
    )
    assert results[0] == CacheWriteSuccess("first", tmp_path / "first"), f"first: {results[0]}"
    assert isinstance(results[1], CacheWriteError), f"broken source succeeded: {results[1]}"
    assert_mentions(results[1].message, "ValueError", "the source broke here")
    assert results[2] == CacheWriteSuccess("last", tmp_path / "last"), f"last: {results[2]}"
    assert published_entries(tmp_path) == ["first", "last"], (
        f"published {published_entries(tmp_path)}"
    )
    assert staging_dirs(tmp_path) == [], f"staging left: {staging_dirs(tmp_path)}"
    for name, count in (("first", 5), ("last", 6)):
        got = list(
            runtime.cached_dataset(
                [tmp_path / name], reader_config=ReaderConfig(seed=0, shuffle=False)
            )
        )
        assert len(got) == count, f"{name} reads back {len(got)} samples, wrote {count}"


def test_a_bad_sample_in_one_source_does_not_affect_the_next(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sources: list[CacheSource] = [
        ListSource("bad", [*good_rows(3), ("str", GOOD)]),
        ListSource("good", good_rows(3)),
    ]
    results = runtime.write_cache(sources, tmp_path, writer_config=QUIET)
    assert isinstance(results[0], CacheWriteError) and results[0].source_name == "bad", (
        f"bad: {results[0]}"
    )
    assert results[1] == CacheWriteSuccess("good", tmp_path / "good"), f"good: {results[1]}"


def test_duplicate_names_raise_value_error_before_anything_is_written(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sources = [
        ListSource("a", good_rows(2)),
        ListSource("b", good_rows(2)),
        ListSource("a", good_rows(2)),
    ]
    with pytest.raises(ValueError, match="duplicate generated cache path") as raised:
        runtime.write_cache([*sources], tmp_path / "caches", writer_config=QUIET)
    assert "a" in str(raised.value), f"message {raised.value} does not name the duplicate"
    assert_clean(tmp_path / "caches")
    assert [s.iterations for s in sources] == [0, 0, 0], (
        f"sources were iterated: {[s.iterations for s in sources]}"
    )


def tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "dir"
        for p in sorted(path.rglob("*"))
    }


def test_an_existing_cache_is_never_overwritten_nor_its_source_iterated(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    first = runtime.write_cache(ListSource("a", simple_samples(20)), tmp_path, writer_config=QUIET)
    assert first == [CacheWriteSuccess("a", tmp_path / "a")], f"first write failed: {first}"
    before = tree_digest(tmp_path / "a")
    again = ListSource("a", simple_samples(5, payload_bytes=3))
    other = ListSource("other", simple_samples(2))
    results = runtime.write_cache([again, other], tmp_path, writer_config=QUIET)
    assert results[0] == CacheWriteError("a", f"cache path already exists: {tmp_path / 'a'}"), (
        f"got {results[0]}"
    )
    assert results[1] == CacheWriteSuccess("other", tmp_path / "other"), (
        f"the other source: {results[1]}"
    )
    assert again.iterations == 0, "the source of an existing cache was iterated"
    assert tree_digest(tmp_path / "a") == before, "the existing cache changed"
    assert staging_dirs(tmp_path) == [], f"staging left: {staging_dirs(tmp_path)}"


def test_an_existing_non_cache_directory_at_the_target_is_left_alone(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "precious.txt").write_text("keep me")
    source = ListSource("a", good_rows(3))
    results = runtime.write_cache(source, tmp_path, writer_config=QUIET)
    assert isinstance(results[0], CacheWriteError), (
        f"a non-cache directory was written over: {results}"
    )
    assert_mentions(results[0].message, "already exists")
    assert (tmp_path / "a" / "precious.txt").read_text() == "keep me", "the user's file was touched"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["precious.txt"], (
        "files were added to the directory"
    )


@pytest.mark.parametrize(
    "error", [KeyboardInterrupt, SystemExit], ids=["KeyboardInterrupt", "SystemExit"]
)
@pytest.mark.parametrize("good", [0, 300])
def test_keyboard_interrupt_and_system_exit_propagate_and_leave_nothing(
    runtime: DatasetRuntime, tmp_path: Path, error: type[BaseException], good: int
) -> None:
    base = tmp_path / "caches"
    interrupted = RaisingSource("interrupted", good, error())
    never = ListSource("never", good_rows(2))
    with pytest.raises(error):
        runtime.write_cache([interrupted, never], base, writer_config=QUIET)
    assert_clean(base)
    assert never.iterations == 0, "a source after the interrupted one was still written"
    # The target's lock was released: the same name can be written now.
    retry = runtime.write_cache(ListSource("interrupted", good_rows(2)), base, writer_config=QUIET)
    assert retry == [CacheWriteSuccess("interrupted", base / "interrupted")], (
        f"rewrite after interrupt: {retry}"
    )


def test_an_interrupt_after_a_published_source_keeps_that_cache(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    sources: list[CacheSource] = [
        ListSource("done", good_rows(4)),
        RaisingSource("cut", 50, KeyboardInterrupt()),
    ]
    with pytest.raises(KeyboardInterrupt):
        runtime.write_cache(sources, tmp_path, writer_config=QUIET)
    assert published_entries(tmp_path) == ["done"], f"published {published_entries(tmp_path)}"
    assert staging_dirs(tmp_path) == [], f"staging left: {staging_dirs(tmp_path)}"
    got = list(
        runtime.cached_dataset(
            [tmp_path / "done"], reader_config=ReaderConfig(seed=0, shuffle=False)
        )
    )
    assert len(got) == 4, f"the published cache reads back {len(got)} of 4 samples"


# ---- call-level mistakes -----------------------------------------------------------------


def test_writer_config_rejects_unknown_fields() -> None:
    with pytest.raises(pydantic.ValidationError):
        WriterConfig(extra_field=1)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        ReaderConfig(seed=0, nonsense=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "kwargs", [{"max_shard_bytes": 0}, {"prefetch_size": 0}, {"max_shard_bytes": -1}]
)
def test_writer_config_rejects_non_positive_sizes(kwargs: dict[str, int]) -> None:
    with pytest.raises(pydantic.ValidationError):
        WriterConfig.model_validate(kwargs)


def test_configs_are_frozen() -> None:
    config = WriterConfig()
    with pytest.raises(pydantic.ValidationError):
        config.max_shard_bytes = 5


def test_no_compression_requires_ratio_one() -> None:
    with pytest.raises(
        pydantic.ValidationError, match="ratio must be 1.0 when algo is none, got 2"
    ):
        ShardCompression(algo="none", ratio=2.0)
    assert ShardCompression(algo="none", ratio=1.0).ratio == 1.0


@pytest.mark.parametrize("ratio", [0.0, -1.0, math.inf, math.nan])
def test_lz4_requires_a_positive_finite_ratio(ratio: float) -> None:
    with pytest.raises(pydantic.ValidationError, match="must be a positive finite number"):
        ShardCompression(algo="lz4", ratio=ratio)


def test_unknown_compression_algorithm_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError):
        ShardCompression(algo="zstd")  # type: ignore[arg-type]


def test_profiler_config_rejects_unknown_fields() -> None:
    with pytest.raises(pydantic.ValidationError):
        WriterProfilerConfig(enabled=True, where="x")  # type: ignore[call-arg]


@pytest.mark.parametrize("workers", [0, -1])
def test_runtime_with_no_workers_raises_value_error(workers: int) -> None:
    with pytest.raises(ValueError, match="^num_workers must be greater than zero$"):
        DatasetRuntime(num_workers=workers)
