"""Shared fixtures: a runtime, generated sources and helpers to inspect a cache directory."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dataset_rt import CacheInput, CacheWriteResult, CacheWriteSuccess, DatasetRuntime, WriterConfig

# The fuzz harness's reference decoder (fuzz/ is not a package): the tests read and
# write a cache's bytes through it, and check the core against the same independent
# CRC-32C and value comparison. `import cache_reference` works in every test module.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fuzz"))
import cache_reference
from cache_reference import crc32c as crc32c
from cache_reference import same_value as same_value

# The remote-cache fixtures (tests/helpers/remote_fixtures.py): moto's S3 server and the
# fault proxy in front of it; the engine tests' two-node Ray cluster (ray_fixtures.py).
pytest_plugins = ["remote_fixtures", "ray_fixtures"]


class ListSource:
    """A named source over a list of (payload, metadata) pairs; counts how often it is iterated."""

    def __init__(self, name: str, samples: Iterable[tuple[object, Mapping[str, object]]]) -> None:
        self.name = name
        self.samples = list(samples)
        self.iterations = 0

    def __iter__(self) -> Iterator[CacheInput]:
        self.iterations += 1
        for data, metadata in self.samples:
            yield CacheInput(data, metadata)  # type: ignore[arg-type]


def pythonpath_before_inherited(*first: str | Path) -> str:
    """A PYTHONPATH for a child interpreter: `first`, then the inherited PYTHONPATH (where
    the dependencies may live, as in the aarch64 run under qemu)."""
    return os.pathsep.join([*map(str, first), *filter(None, [os.environ.get("PYTHONPATH")])])


def load_script(path: Path) -> Any:
    """A script beside the tests (a file of tests/ that is not a package module) as a
    module, whatever pytest's import mode."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_c(source: Path, program: Path, *arguments: str) -> None:
    """Compiles a C test program (C11, warnings as errors) with the Zig of the ziglang package."""
    command = [sys.executable, "-m", "ziglang", "cc", "-std=c11", "-Wall", "-Werror", str(source)]
    subprocess.run(
        [*command, *arguments, "-o", str(program)], check=True, capture_output=True, text=True
    )


def simple_samples(count: int, payload_bytes: int = 16) -> list[tuple[bytes, dict[str, object]]]:
    """Distinct payloads with metadata of every kind."""
    return [
        (
            bytes((i + k) % 256 for k in range(payload_bytes)),
            {"index": i, "label": f"l{i % 3}", "score": i / 4, "flag": i % 2 == 0},
        )
        for i in range(count)
    ]


QUIET = WriterConfig(show_progress=False)


@pytest.fixture(scope="session")
def runtime() -> DatasetRuntime:
    return DatasetRuntime(num_workers=2)


def published_entries(base: Path) -> list[str]:
    """Names under `base` other than the staging area."""
    if not base.exists():
        return []
    return sorted(p.name for p in base.iterdir() if p.name != "tmp")


def staging_dirs(base: Path) -> list[str]:
    """Staging directories left under base/tmp (lock files are not directories)."""
    tmp = base / "tmp"
    if not tmp.exists():
        return []
    return sorted(p.name for p in tmp.iterdir() if p.is_dir())


def without_record_checksums(cache: Path) -> None:
    """Make `cache` look as dataset-rt 0.2.4 writes it: no records.crc32c and no
    manifest entry for it, so reads reach the checks behind the checksum."""
    manifest = cache_reference.read_manifest(cache)
    del manifest["record_checksums"]
    cache_reference.write_manifest(cache, manifest)
    (cache / "records.crc32c").unlink()


def as_format_3(cache: Path, cache_id: int) -> None:
    """Make `cache`'s manifest format 3 with `cache_id`, laid out as dataset-rt 0.4.8
    lays it out: the v2 text with ``"format_version": 3`` and the cache_id after it."""
    manifest_path = cache / "manifest.json"
    text = manifest_path.read_text()
    head = '{\n  "format_version": 2,\n'
    assert text.startswith(head), f"{manifest_path} is not a format 2 manifest"
    manifest_path.write_text(
        f'{{\n  "format_version": 3,\n  "cache_id": {cache_id},\n' + text[len(head) :]
    )


def name_cache_id(name: str) -> int:
    """The cache_id a writer gives a new format 3 cache of source `name`."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def record(cache: Path, sample_id: int) -> tuple[Path, int, int]:
    """(shard file, record offset, record length) of a sample, from index.bin."""
    shard_id, offset, record_len = cache_reference.index_row(
        (cache / "index.bin").read_bytes(), sample_id
    )
    return cache / cache_reference.shard_name(shard_id), offset, record_len


def flip_last_byte_of_record(cache: Path, sample_id: int) -> str:
    """Corrupt one payload byte of a sample; returns its shard, relative to the cache."""
    shard, offset, record_len = record(cache, sample_id)
    data = bytearray(shard.read_bytes())
    data[offset + record_len - 1] ^= 0x04
    shard.write_bytes(bytes(data))
    return shard.relative_to(cache).as_posix()


def written_paths(results: Iterable[CacheWriteResult]) -> list[Path]:
    """The published cache of each result of `write_cache`; fails naming the first source
    that was not written."""
    paths = []
    for result in results:
        assert isinstance(result, CacheWriteSuccess), result
        paths.append(result.path)
    return paths
