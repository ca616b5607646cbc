"""What the tests of the `dataset-rt` command (tests/test_cli*.py) share: running it
in-process, the caches and inputs they run it on, and the rows it shows of a cache."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from typer.testing import CliRunner, Result

from conftest import ListSource, simple_samples
from dataset_rt import (
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)
from dataset_rt.cli import app

SAMPLES = simple_samples(40, payload_bytes=100)
TEXT_SAMPLES = [(f"line {i}: hello".encode(), {"i": i}) for i in range(5)]
PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python"

Algo = Literal["none", "lz4"]
"""A shard codec, as `ShardCompression(algo=...)` takes it."""

# Words of the core and of the library's internals that no message of the command may show.
INTERNAL_WORDS = ("source[", "FileNotFound", "NotDir", "IsDir", "AccessDenied", "PathAlreadyExists")


def invoke(*args: str | Path, code: int) -> Result:
    """Run the command in-process; `code` is the exit code it must end with. A Python
    exception other than SystemExit (a traceback for the user) fails the test."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"dataset-rt {args} raised") from result.exception
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def invoke_json(*args: str | Path, code: int = 0) -> Any:
    """The command's --json output, parsed (its shape is each command's own)."""
    return json.loads(invoke(*args, "--json", code=code).stdout)


def no_internal_words(text: str) -> None:
    for word in INTERNAL_WORDS:
        assert word not in text, text


def write(
    runtime: DatasetRuntime,
    base: Path,
    name: str = "c",
    samples: Sequence[tuple[bytes, Mapping[str, object]]] = SAMPLES,
    algo: Algo = "none",
) -> Path:
    """A cache of `samples` in several shards (of at most 1,500 bytes)."""
    config = WriterConfig(
        show_progress=False,
        max_shard_bytes=1_500,
        shard_compression=ShardCompression(algo=algo, ratio=1.0),
    )
    [result] = runtime.write_cache(ListSource(name, samples), base, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    return result.path


def read_back(runtime: DatasetRuntime, cache: Path) -> list[tuple[bytes, dict[str, object]]]:
    """Every sample of `cache` in order, as (payload, metadata)."""
    dataset = runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0, shuffle=False))
    samples: list[tuple[bytes, dict[str, object]]] = []
    for sample in dataset:
        assert isinstance(sample.data, bytes), type(sample.data)  # payload="bytes", the default
        samples.append((sample.data, dict(sample.metadata)))
    return samples


def make_folder(root: Path) -> dict[str, bytes]:
    """A folder of images in class folders, and a file that is not an image."""
    files = {
        "cat/001.png": b"\x89PNG cat one",
        "cat/002.png": b"\x89PNG cat two",
        "dog/001.png": b"\x89PNG dog",
        "dog/notes.txt": b"not an image",
    }
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    return files


def make_parquet(path: Path, first: int, rows: int) -> list[tuple[bytes, dict[str, object]]]:
    """A Parquet file of rows `first` on; returns the samples `write parquet --data-column
    image -m label -m split` makes of them."""
    table = pa.table(
        {
            "image": [f"payload {i}".encode() * 3 for i in range(first, first + rows)],
            "label": [i % 4 for i in range(first, first + rows)],
            "split": ["train" if i % 5 else "val" for i in range(first, first + rows)],
            "extra": [float(i) for i in range(first, first + rows)],
        }
    )
    pq.write_table(table, path, row_group_size=16)
    return [
        (row["image"], {"label": row["label"], "split": row["split"]}) for row in table.to_pylist()
    ]


def cache_row(cache: Path, samples: int, algo: str = "none") -> dict[str, object]:
    """The row `ls` (and `info` of a base folder) shows of a format 2 cache."""
    return {
        "name": cache.name,
        "path": str(cache),
        "samples": samples,
        "format_version": 2,
        "cache_id": None,
        "bytes_on_disk": sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()),
        "compression": [{"algo": algo, "ratio": 1.0}],
        "record_checksums": True,
    }
