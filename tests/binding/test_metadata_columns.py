"""Batches whose metadata is certainly valid go to the core by column
(`drt_writer_push_columns`) instead of as JSON; the cache must be the same,
byte for byte, and anything unusual must still go as JSON."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ListSource
from dataset_rt import (
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    WriterConfig,
)
from dataset_rt._binding import native as _native
from dataset_rt._binding.metadata_columns import to_columns
from dataset_rt._core import writing as writing_module

QUIET = WriterConfig(show_progress=False, prefetch_size=1)  # batches of 1,024 samples


class PushCounter:
    """Counts the native pushes of each kind while delegating to them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = {"json": 0, "columns": 0}
        for name, kind in (
            ("drt_writer_push", "json"),
            ("drt_writer_push_borrowed", "json"),
            ("drt_writer_push_columns", "columns"),
            ("drt_writer_push_columns_joined", "columns"),
        ):
            monkeypatch.setattr(_native.lib, name, self._counting(getattr(_native.lib, name), kind))

    def _counting(self, function: Callable[..., int], kind: str) -> Callable[..., int]:
        def call(*args: Any) -> int:
            self.calls[kind] += 1
            return function(*args)

        return call


def cache_files(path: Path) -> dict[str, bytes]:
    """Every published file except the manifest (which names the source)."""
    files = {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    assert any(name.startswith("shards/") for name in files)
    return files


def write_both(
    runtime: DatasetRuntime,
    base: Path,
    samples: list[tuple[bytes, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[dict[str, bytes], dict[str, bytes], PushCounter]:
    counter = PushCounter(monkeypatch)
    [by_columns] = runtime.write_cache(ListSource("c", samples), base / "c", writer_config=QUIET)
    with monkeypatch.context() as forced:
        forced.setattr(writing_module, "to_columns", lambda *_: None)
        [as_json] = runtime.write_cache(ListSource("c", samples), base / "j", writer_config=QUIET)
    assert isinstance(by_columns, CacheWriteSuccess), by_columns
    assert isinstance(as_json, CacheWriteSuccess), as_json
    return cache_files(by_columns.path), cache_files(as_json.path), counter


KINDS = {
    "bool": st.booleans(),
    "int": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12),
}


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[bytes, dict[str, Any]]]:
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4, unique=True))
    kinds = [draw(st.sampled_from(sorted(KINDS))) for _ in names]
    count = draw(st.integers(min_value=1, max_value=2500))  # up to three batches
    rows = draw(
        st.lists(st.tuples(*(KINDS[kind] for kind in kinds)), min_size=min(count, 20), max_size=20)
    )
    return [
        (i.to_bytes(4, "little") * (i % 5), dict(zip(names, rows[i % len(rows)], strict=True)))
        for i in range(count)
    ]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(samples=batches())
def test_a_cache_written_by_column_equals_the_one_written_as_json(
    runtime: DatasetRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    samples: list[tuple[bytes, dict[str, Any]]],
) -> None:
    by_columns, as_json, counter = write_both(
        runtime, tmp_path_factory.mktemp("eq"), samples, monkeypatch
    )
    assert counter.calls["columns"] >= 1  # the fast route was really taken
    assert by_columns == as_json


def test_edge_values_round_trip_by_column(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edge = [
        (2**63 - 1, -0.0, "", True),
        (-(2**63), 5e-324, 'q"\\\n\x00\u2028\U0001f600', False),
        (0, 1e300, "é", True),
    ]
    samples = [
        (bytes([i]), dict(zip(("i", "f", "s", "b"), edge[i % 3], strict=True))) for i in range(9)
    ]
    by_columns, as_json, counter = write_both(runtime, tmp_path, samples, monkeypatch)
    assert counter.calls == {"columns": 1, "json": 1}
    assert by_columns == as_json
    ds = runtime.cached_dataset(
        [tmp_path / "c" / "c"], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    got = [dict(s.metadata) for s in ds]
    assert got == [m for _, m in samples]
    zero = got[0]["f"]
    assert isinstance(zero, float) and math.copysign(1.0, zero) == -1.0


@pytest.mark.parametrize(
    ("unusual", "why"),
    [
        ({"i": 2**63, "s": "x"}, "int beyond int64"),
        ({"i": 1, "s": "\ud800"}, "lone surrogate"),
        ({"i": 1.5, "s": "x"}, "float in an int column"),
        ({"i": True, "s": "x"}, "bool in an int column"),
        ({"i": 1, "s": "x", "extra": 1}, "extra key"),
        ({"i": 1}, "missing key"),
    ],
)
def test_an_unusual_sample_sends_its_batch_as_json_and_fails_as_before(
    runtime: DatasetRuntime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    unusual: dict[str, Any],
    why: str,
) -> None:
    samples: list[tuple[bytes, dict[str, Any]]] = [(b"p", {"i": 1, "s": "x"})] * 1500
    samples[1200] = (b"p", unusual)  # in the second batch
    counter = PushCounter(monkeypatch)
    [by_columns] = runtime.write_cache(
        ListSource("c", samples), tmp_path / "c", writer_config=QUIET
    )
    with monkeypatch.context() as forced:
        forced.setattr(writing_module, "to_columns", lambda *_: None)
        [as_json] = runtime.write_cache(
            ListSource("c", samples), tmp_path / "j", writer_config=QUIET
        )
    assert counter.calls["columns"] == 1, why  # only the first batch
    assert type(by_columns) is type(as_json), why
    assert getattr(by_columns, "message", None) == getattr(as_json, "message", None), why
    assert isinstance(by_columns, CacheWriteError), (why, by_columns)
    assert "sample 1200" in by_columns.message, (why, by_columns.message)


def test_nan_goes_as_json_and_is_refused_as_before(runtime: DatasetRuntime, tmp_path: Path) -> None:
    samples = [(b"p", {"f": 0.5})] * 3 + [(b"p", {"f": math.nan})]
    [result] = runtime.write_cache(ListSource("c", samples), tmp_path, writer_config=QUIET)
    assert isinstance(result, CacheWriteError), result
    assert "sample 3" in result.message


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_sends_its_batch_as_json(bad: float) -> None:
    schema: dict[str, type] = {"f": float}
    assert to_columns([{"f": 0.5}, {"f": bad}, {"f": 1.5}], schema) is None
    assert to_columns([{"f": 0.5}, {"f": 1.5}], schema) is not None


def test_finite_floats_whose_sum_overflows_go_by_column(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The column route checks finiteness with a sum first: these finite values
    # overflow it, and must be found finite one by one, then read back exactly.
    values = [1.7e308, 1.7e308, -1.0, 5e-324]
    samples = [(bytes([i]), {"f": value}) for i, value in enumerate(values)]
    counter = PushCounter(monkeypatch)
    [result] = runtime.write_cache(ListSource("c", samples), tmp_path, writer_config=QUIET)
    assert counter.calls == {"json": 0, "columns": 1}
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset(
        [result.path], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    assert [sample.metadata["f"] for sample in dataset] == values


@pytest.mark.parametrize(
    "labels",
    [["cat", "dog", "", "bird"], ["cat", "dög", "", "🐦"], ["", ""]],
    ids=["ascii", "utf8", "empty"],
)
def test_string_columns_by_column_equal_json(
    runtime: DatasetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels: list[str]
) -> None:
    # An all-ASCII column is encoded in one piece, any other string by string:
    # both must give the JSON route's cache, byte for byte.
    samples = [(bytes([i]), {"label": labels[i % len(labels)], "i": i}) for i in range(50)]
    by_columns, as_json, counter = write_both(runtime, tmp_path, samples, monkeypatch)
    assert counter.calls == {"columns": 1, "json": 1}
    assert by_columns == as_json
    ds = runtime.cached_dataset(
        [tmp_path / "c" / "c"], reader_config=ReaderConfig(seed=0, shuffle=False)
    )
    assert [s.metadata["label"] for s in ds] == [m["label"] for _, m in samples]
