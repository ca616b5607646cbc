"""Helpers of the tests of dataset_rt.sources (tests/test_sources_*.py): write a source and
read it back, small PNGs, and folder trees."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from conftest import QUIET
from dataset_rt import (
    CacheSource,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    MetadataValue,
    ReaderConfig,
)

IN_ORDER = ReaderConfig(seed=0, shuffle=False)

PROPERTY = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def read_back(
    runtime: DatasetRuntime, source: CacheSource, base: Path
) -> list[tuple[bytes, dict[str, MetadataValue]]]:
    """Write `source` to a cache under `base` and read it back in stored order."""
    [result] = runtime.write_cache(source, base, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    samples = []
    for sample in runtime.cached_dataset([result.path], reader_config=IN_ORDER):
        assert isinstance(sample.data, bytes), type(sample.data)  # IN_ORDER reads bytes
        samples.append((sample.data, dict(sample.metadata)))
    return samples


def write_error(runtime: DatasetRuntime, source: CacheSource, base: Path) -> str:
    [result] = runtime.write_cache(source, base, writer_config=QUIET)
    assert isinstance(result, CacheWriteError), result
    return result.message


def png_bytes(seed: int, size: int = 6) -> bytes:
    """A small PNG, different for each seed, encoded by Pillow."""
    Image = pytest.importorskip("PIL.Image")
    image = Image.new("RGB", (size, size))
    image.putdata([((seed * 7 + i) % 256, (seed + 3 * i) % 256, i % 256) for i in range(size**2)])
    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    return encoded.getvalue()


def pixels(encoded: bytes) -> tuple[str, tuple[int, int], bytes]:
    """The decoded image: mode, size and raw pixels."""
    Image = pytest.importorskip("PIL.Image")
    with Image.open(io.BytesIO(encoded)) as image:
        return image.mode, image.size, image.tobytes()


def make_tree(root: Path, relative_paths: list[str]) -> None:
    """Files created in the order given (payload: the path), so creation order is not sort order."""
    for relative_path in relative_paths:
        (root / relative_path).parent.mkdir(parents=True, exist_ok=True)
        (root / relative_path).write_bytes(relative_path.encode())
