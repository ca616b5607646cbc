"""Resume states, epochs by number, shares of ranks and workers, and datasets that
travel to other processes (SPEC 9, training): the core's stream is a function of
the position, and these tests hold every path to it against the plain stream."""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import QUIET, ListSource, as_format_3, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, DatasetRuntime, ReaderConfig
from dataset_rt._binding import native as _native

FIRST = simple_samples(13)
SECOND = simple_samples(8, payload_bytes=30)


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("stream_state")
    results = runtime.write_cache(
        [ListSource("first", FIRST), ListSource("second", SECOND)], base, writer_config=QUIET
    )
    return written_paths(results)


def load(
    runtime: DatasetRuntime,
    caches: list[Path],
    *,
    seed: int = 3,
    shuffle: bool = True,
    epoch_len: int | None = 9,
) -> CachedDataset:
    ds = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=seed, shuffle=shuffle))
    if epoch_len is not None:
        ds.set_epoch_len(epoch_len)
    return ds


def ids(samples: Iterable[CachedSample]) -> list[tuple[int, int]]:
    return [(s.cache_id, s.sample_id) for s in samples]


def epochs(ds: CachedDataset, count: int) -> list[list[tuple[int, int]]]:
    return [ids(ds) for _ in range(count)]


def reweight(ds: CachedDataset) -> None:
    """A table that filters, duplicates and reweights rows."""
    table = ds.get_metadata()
    table = pl.concat([table.filter(pl.col("sample_id") % 3 != 0), table.head(2)])
    ds.update_metadata(table.with_columns(weight=(pl.col("sample_id") + 1).cast(pl.Float64)))


def test_a_fresh_dataset_state_names_its_data(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    state = ds.state_dict()
    assert state["version"] == 1
    assert state["algorithm"] == "dataset_rt/sampler/v1"
    assert (state["seed"], state["shuffle"], state["epoch_len"]) == (3, True, 9)
    assert (state["epoch"], state["epoch_start"], state["position"]) == (0, 0, 0)
    assert len(state["caches"]) == 2
    for cache, digest in zip(caches, state["caches"], strict=True):
        assert digest == _native.sha256((cache / "manifest.json").read_bytes()).hex()
    assert len(state["table"]) == 64
    ordered = load(runtime, caches, shuffle=False).state_dict()
    assert ordered["algorithm"] == "dataset_rt/table-order/v1"
    list(ds)
    assert (ds.state_dict()["epoch"], ds.state_dict()["position"]) == (1, 9)


@settings(max_examples=40, deadline=None)
@given(
    stop=st.integers(0, 30),
    epoch_len=st.integers(1, 12),
    shuffle=st.booleans(),
    reweighted=st.booleans(),
)
def test_resuming_an_iterator_state_continues_the_uninterrupted_stream(
    runtime: DatasetRuntime,
    caches: list[Path],
    stop: int,
    epoch_len: int,
    shuffle: bool,
    reweighted: bool,
) -> None:
    # The run that is stopped after `stop` samples (anywhere, epoch ends included)
    # and resumed in a dataset opened again gives exactly the uninterrupted samples.
    def opened() -> CachedDataset:
        ds = load(runtime, caches, shuffle=shuffle, epoch_len=epoch_len)
        if reweighted:
            reweight(ds)
        return ds

    uninterrupted = [x for epoch in epochs(opened(), stop // epoch_len + 4) for x in epoch]
    ds = opened()
    taken: list[tuple[int, int]] = []
    iterator = iter(ds)
    while len(taken) < stop:
        for sample in iterator:
            taken.append((sample.cache_id, sample.sample_id))
            if len(taken) == stop:
                break
        else:
            iterator = iter(ds)
    state = iterator.state_dict()
    resumed = opened()
    resumed.load_state_dict(state)
    first = ids(resumed)
    assert len(first) == epoch_len - stop % epoch_len
    joined = taken + first + [x for epoch in epochs(resumed, 2) for x in epoch]
    assert joined == uninterrupted[: len(joined)]


def test_an_iterator_state_after_its_last_sample_is_the_next_epoch(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches, epoch_len=5)
    iterator = iter(ds)
    assert iterator.state_dict()["position"] == 0
    list(iterator)
    state = iterator.state_dict()
    assert (state["epoch"], state["epoch_start"], state["position"]) == (1, 5, 5)
    assert state == ds.state_dict()


def test_a_loaded_mid_epoch_state_shortens_only_the_next_epoch(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    twin = epochs(load(runtime, caches), 3)
    ds = load(runtime, caches)
    iterator = iter(ds)
    for _ in range(4):
        next(iterator)
    state = iterator.state_dict()
    fresh = load(runtime, caches)
    fresh.load_state_dict(state)
    assert len(fresh) == 5
    assert fresh.state_dict() == state
    assert ids(fresh) == twin[0][4:]
    assert len(fresh) == 9
    assert ids(fresh) == twin[1]


def test_set_epoch_reads_that_epoch_of_the_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    twin = epochs(load(runtime, caches), 4)
    ds = load(runtime, caches)
    ds.set_epoch(3)
    assert ds.state_dict()["epoch"] == 3
    assert ids(ds) == twin[3]
    ds.set_epoch(1)
    assert ids(ds) == twin[1]
    with pytest.raises(ValueError, match="epoch must be between 0 and 2\\*\\*64 - 1, got -1"):
        ds.set_epoch(-1)
    with pytest.raises(TypeError, match="epoch must be an int"):
        ds.set_epoch(1.0)  # type: ignore[arg-type]


def test_states_of_other_data_are_refused_naming_what_differs(
    runtime: DatasetRuntime, caches: list[Path], tmp_path: Path
) -> None:
    state = load(runtime, caches).state_dict()
    cases = [
        (load(runtime, caches[::-1]), "cache 0 .* has manifest SHA-256"),
        (load(runtime, caches[:1]), "the state belongs to 2 caches, this dataset has 1"),
        (load(runtime, caches, seed=4), "the state has seed 3, this dataset 4"),
        (
            load(runtime, caches, shuffle=False),
            "the state has shuffle=True, this dataset shuffle=False",
        ),
        (load(runtime, caches, epoch_len=10), "the state has epoch_len 9, this dataset 10"),
    ]
    reweighted = load(runtime, caches)
    reweight(reweighted)
    cases.append((reweighted, "another active table: its rows or weights differ"))
    only_weights = load(runtime, caches)
    only_weights.update_metadata(only_weights.get_metadata().with_columns(weight=pl.lit(2.0)))
    cases.append((only_weights, "another active table"))
    # Same content, another cache: its manifest names another source.
    [copy] = written_paths(
        runtime.write_cache(ListSource("copy", FIRST), tmp_path, writer_config=QUIET)
    )
    cases.append((load(runtime, [copy, caches[1]]), f"cache 0 \\({copy}\\)"))
    for other, message in cases:
        before = other.state_dict()
        with pytest.raises(ValueError, match=message):
            other.load_state_dict(state)
        assert other.state_dict() == before, "a refused state changed the dataset"


def test_malformed_states_are_refused_naming_the_key(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    state = ds.state_dict()
    with pytest.raises(ValueError, match="missing 'position'"):
        ds.load_state_dict({k: v for k, v in state.items() if k != "position"})
    with pytest.raises(TypeError, match="state\\['epoch'\\] must be an int"):
        ds.load_state_dict({**state, "epoch": "1"})
    with pytest.raises(ValueError, match="state\\['table'\\] must be a SHA-256"):
        ds.load_state_dict({**state, "table": "00"})
    with pytest.raises(ValueError, match="version 2 is not supported"):
        ds.load_state_dict({**state, "version": 2})
    with pytest.raises(
        ValueError, match="the state's position 10 is outside its epoch \\(0 .. 9\\)"
    ):
        ds.load_state_dict({**state, "position": 10})
    with pytest.raises(TypeError, match="must be a dict"):
        ds.load_state_dict([1, 2])  # type: ignore[arg-type]


def test_epoch_len_cannot_change_under_a_loaded_mid_epoch_state(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches)
    ds.load_state_dict({**ds.state_dict(), "position": 4})
    ds.set_epoch_len(9)  # the same length is fine
    with pytest.raises(RuntimeError, match="epoch_len cannot change while a loaded state stops"):
        ds.set_epoch_len(5)
    assert len(ds) == 5


@settings(max_examples=60, deadline=None)
@given(
    world_size=st.integers(1, 3),
    num_workers=st.integers(1, 3),
    batch_size=st.integers(1, 4),
    drop_last=st.booleans(),
    epoch_len=st.integers(1, 25),
    skip_epochs=st.integers(0, 2),
)
def test_shares_of_ranks_and_workers_interleave_back_to_the_stream(
    runtime: DatasetRuntime,
    caches: list[Path],
    world_size: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
    epoch_len: int,
    skip_epochs: int,
) -> None:
    # Without torch: every reader's share read through the core, interleaved rank
    # by rank per step and worker by worker per batch, is the stream's positions in
    # order, padded with the positions after the epoch when several ranks need it.
    step = world_size * batch_size
    if drop_last:
        total = epoch_len // step * step
    elif world_size == 1:
        total = epoch_len
    else:
        total = -(-epoch_len // step) * step
    long = load(runtime, caches, epoch_len=epoch_len)
    for _ in range(skip_epochs):
        list(long)
    long.set_epoch_len(max(total, 1) if total else 1)
    expected = ids(long)[:total]
    shares: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for rank in range(world_size):
        for worker in range(num_workers):
            ds = load(runtime, caches, epoch_len=epoch_len)
            ds.set_epoch(skip_epochs)
            reader_share = _native.Share(
                batch_size=batch_size,
                rank=rank,
                world_size=world_size,
                worker=worker,
                num_workers=num_workers,
                drop_last=int(drop_last),
            )
            shares[rank, worker] = ids(ds._iterate(reader_share, 0))
            # Every share moves the dataset on by the whole epoch.
            assert ds.state_dict()["epoch"] == skip_epochs + 1
    interleaved = []
    steps = -(-total // step) if total else 0
    for global_step in range(steps):
        for rank in range(world_size):
            share = shares[rank, global_step % num_workers]
            at = global_step // num_workers * batch_size
            interleaved += share[at : at + batch_size]
    assert interleaved == expected
    assert sum(map(len, shares.values())) == total


def test_a_share_out_of_range_is_refused(runtime: DatasetRuntime, caches: list[Path]) -> None:
    ds = load(runtime, caches)
    with pytest.raises(ValueError, match="rank must be below world_size \\(2\\), got 2"):
        ds._iterate(_native.Share(batch_size=1, rank=2, world_size=2, num_workers=1), 0)
    with pytest.raises(ValueError, match="cannot skip 10 samples: this reader's share"):
        ds._iterate(_native.Share(batch_size=1, world_size=1, num_workers=1), 10)
    assert ds.state_dict()["epoch"] == 0, "a refused share moved the stream"


def test_a_pickled_dataset_reopens_with_its_table_epoch_len_and_position(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    ds = load(runtime, caches, epoch_len=7)
    reweight(ds)
    ds.update_metadata(ds.get_metadata().with_columns(note=pl.lit("x")))
    list(ds)
    data = pickle.dumps(ds)
    # Arrow IPC of three columns, not a Python object per row.
    assert len(data) < 8_000
    twin = pickle.loads(data)
    assert twin.cache_paths == ds.cache_paths
    assert len(twin) == len(ds) == 7
    assert twin.state_dict() == ds.state_dict()
    assert twin.get_metadata().equals(ds.get_metadata())
    assert epochs(twin, 3) == epochs(ds, 3)


def test_a_pickled_dataset_refuses_caches_replaced_since(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    [path] = written_paths(
        runtime.write_cache(ListSource("c", FIRST), tmp_path, writer_config=QUIET)
    )
    data = pickle.dumps(load(runtime, [path]))
    shutil.rmtree(path)
    runtime.write_cache(ListSource("c", SECOND), tmp_path, writer_config=QUIET)
    twin = pickle.loads(data)
    with pytest.raises(
        ValueError, match="cannot reopen the dataset in process .* manifest SHA-256"
    ):
        len(twin)
    shutil.rmtree(path)
    with pytest.raises(ValueError, match="cannot open the cache directory"):
        len(pickle.loads(data))


def table_digest(rows: list[tuple[int, int, float]]) -> str:
    """docs/determinism.md, section 10, in pure Python."""
    import hashlib
    import struct

    message = b"dataset_rt/table/v1" + struct.pack("<Q", len(rows))
    message += b"".join(struct.pack("<QQd", *row) for row in rows)
    return hashlib.sha256(message).hexdigest()


def test_the_table_digest_is_the_documented_one(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    assert (
        table_digest([(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0)])
        == "20183bc04ac84448c2f1f6b279c9ed4463d3d8dce8d7069c2d492b4f95c1d063"
    )
    assert (
        table_digest([(0, 1, 2.0), (0, 0, 0.5)])
        == "324a0fd10e3357f2e9c2d969efcb19ed9152ab05a8927999846c3b535f50de10"
    )
    for edit in (False, True):
        ds = load(runtime, caches)
        if edit:
            reweight(ds)
        table = ds.get_metadata()
        rows = list(zip(table["cache_id"], table["sample_id"], table["weight"], strict=True))
        assert ds.state_dict()["table"] == table_digest(rows)


def test_the_table_digest_names_a_format_3_cache_by_its_cache_id(
    runtime: DatasetRuntime, caches: list[Path], tmp_path: Path
) -> None:
    shutil.copytree(caches[1], tmp_path / "second")
    as_format_3(tmp_path / "second", 77)
    for edit in (False, True):
        ds = load(runtime, [caches[0], tmp_path / "second"])
        if edit:
            reweight(ds)
        table = ds.get_metadata()
        assert 77 in set(table["cache_id"])
        rows = list(zip(table["cache_id"], table["sample_id"], table["weight"], strict=True))
        assert ds.state_dict()["table"] == table_digest(rows)
