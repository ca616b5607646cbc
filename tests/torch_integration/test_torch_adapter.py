"""`CachedDataset.to_torch_iterable_dataset()` (SPEC 3); torch is optional.

The no-torch test simulates torch's absence, so it runs with or without torch
installed; the others skip without torch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from conftest import QUIET, ListSource, simple_samples, written_paths
from dataset_rt import CachedDataset, CachedSample, DatasetRuntime, MetadataValue, ReaderConfig

FIRST = simple_samples(12)
SECOND = simple_samples(7, payload_bytes=40)
SOURCES = [FIRST, SECOND]


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory, runtime: DatasetRuntime) -> list[Path]:
    base = tmp_path_factory.mktemp("torch")
    results = runtime.write_cache(
        [ListSource("first", FIRST), ListSource("second", SECOND)], base, writer_config=QUIET
    )
    return written_paths(results)


def load(runtime: DatasetRuntime, caches: list[Path], seed: int = 31) -> CachedDataset:
    ds = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=seed, prefetch_size=4))
    ds.set_epoch_len(25)
    return ds


def records(
    iterable: Iterable[CachedSample],
) -> list[tuple[int, int, bytes | memoryview, dict[str, MetadataValue]]]:
    return [(s.cache_id, s.sample_id, s.data, dict(s.metadata)) for s in iterable]


def test_without_torch_the_adapter_raises_import_error(
    runtime: DatasetRuntime, caches: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = load(runtime, caches)
    for name in ("torch", "torch.utils", "torch.utils.data"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match="requires PyTorch"):
        ds.to_torch_iterable_dataset()
    # The dataset itself is unaffected.
    assert len(records(ds)) == 25


def test_adapter_is_a_sized_iterable_dataset(runtime: DatasetRuntime, caches: list[Path]) -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    ds = load(runtime, caches)
    adapter = ds.to_torch_iterable_dataset()
    assert isinstance(adapter, torch_data.IterableDataset)
    assert len(adapter) == len(ds) == 25
    ds.set_epoch_len(9)
    assert len(adapter) == 9


def identities_and_data(
    iterable: Iterable[CachedSample],
) -> list[tuple[int, int, bytes | memoryview]]:
    return [(s.cache_id, s.sample_id, s.data) for s in iterable]


def test_dataloader_yields_the_datasets_stream(runtime: DatasetRuntime, caches: list[Path]) -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    twin = load(runtime, caches)
    expected = [identities_and_data(twin) for _ in range(2)]
    adapter = load(runtime, caches).to_torch_iterable_dataset()
    loader = torch_data.DataLoader(adapter, batch_size=None, num_workers=0)
    epochs = []
    for _ in range(2):
        samples = list(loader)
        assert all(isinstance(s, CachedSample) for s in samples)
        epochs.append(identities_and_data(samples))
    assert epochs == expected
    for cache_id, sample_id, data in epochs[0] + epochs[1]:
        assert data == SOURCES[cache_id][sample_id][0]


def test_dataloader_samples_keep_readable_metadata(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    # DataLoader(batch_size=None) passes every sample through default_convert, which
    # rebuilds Mapping fields as type(mapping)({...}): the metadata must survive that.
    torch_data = pytest.importorskip("torch.utils.data")
    twin = load(runtime, caches)
    expected = records(twin)
    loader = torch_data.DataLoader(
        load(runtime, caches).to_torch_iterable_dataset(), batch_size=None, num_workers=0
    )
    samples = list(loader)
    assert records(samples) == expected
    for sample in samples:
        assert sample.metadata == SOURCES[sample.cache_id][sample.sample_id][1]
        assert sample.metadata["index"] == sample.sample_id


def test_adapter_iterated_directly_continues_the_stream(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    pytest.importorskip("torch.utils.data")
    twin = load(runtime, caches)
    expected = records(twin) + records(twin)
    ds = load(runtime, caches)
    adapter = ds.to_torch_iterable_dataset()
    assert records(adapter) + records(ds) == expected


def test_the_adapter_can_be_copied_in_the_process(
    runtime: DatasetRuntime, caches: list[Path]
) -> None:
    pytest.importorskip("torch.utils.data")
    import copy

    adapter = load(runtime, caches).to_torch_iterable_dataset()
    for twin in (copy.copy(adapter), copy.deepcopy(adapter)):
        assert len(twin) == len(adapter)
        assert isinstance(next(iter(twin)), CachedSample)
