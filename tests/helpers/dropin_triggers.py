"""Failures a dataset-rt 0.2.4 user may match by exception class and message, one trigger each.

Used by tests/interop/test_dropin_messages.py against BOTH implementations: imported, a trigger
runs on this project's `dataset_rt`; run as a script with the peer's interpreter
(dataset-rt==0.2.4, the Rust/PyO3 package), it runs on the peer:

    python dropin_triggers.py TRIGGER WORKDIR

and prints one JSON line: what `run(TRIGGER, WORKDIR)` returns. Only the public API
the two share is used, so each trigger does the same thing on both.

A trigger returns ``{"raised": [class names of the exception's MRO], "message": str}``
when an exception escaped, ``{"result": class name, "message": str}`` when the failure
came back as a result (`CacheWriteError`), or ``{"ok": description}`` when nothing failed.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

QUIET: dict[str, Any] = {"show_progress": False}


class ListSource:
    """A named source over ``(data, metadata)`` pairs, yielded as `CacheInput`."""

    def __init__(self, name: str, samples: list[tuple[Any, dict[str, Any]]]) -> None:
        self.name = name
        self.samples = samples

    def __iter__(self) -> Iterator[Any]:
        from dataset_rt import CacheInput

        for data, metadata in self.samples:
            yield CacheInput(data, metadata)


def runtime() -> Any:
    from dataset_rt import DatasetRuntime

    return DatasetRuntime(num_workers=2)


def write(work: Path, samples: list[tuple[Any, dict[str, Any]]], **config: Any) -> list[Any]:
    from dataset_rt import WriterConfig

    # Either implementation's results: the peer's classes are not this package's.
    results: list[Any] = runtime().write_cache(
        ListSource("c", samples), work / "caches", writer_config=WriterConfig(**QUIET, **config)
    )
    return results


def cache(work: Path) -> Path:
    """A published cache of three samples (payload i*20 bytes of i, metadata i and s)."""
    [result] = write(work, [(bytes([i]) * 20, {"i": i, "s": f"x{i}"}) for i in range(3)])
    assert type(result).__name__ == "CacheWriteSuccess", result
    return Path(result.path)


def load(path: Path, validate: bool = False) -> Any:
    from dataset_rt import ReaderConfig

    config = ReaderConfig(seed=0, shuffle=False, validate_cache=validate)
    return runtime().cached_dataset([path], reader_config=config)


def read_all(path: Path, validate: bool = False) -> str:
    return f"read {sum(1 for _ in load(path, validate))} samples"


def edit_manifest(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def flip_last_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[-1] ^= 1
    file.write_bytes(bytes(data))


# --- triggers: each does to a fresh cache (or source) what the name says -------------------------


def missing_manifest(work: Path) -> str:
    path = cache(work)
    (path / "manifest.json").unlink()
    return read_all(path)


def missing_cache_directory(work: Path) -> str:
    return read_all(work / "never-written")


def manifest_not_json(work: Path) -> str:
    path = cache(work)
    (path / "manifest.json").write_text("{not json", encoding="utf-8")
    return read_all(path)


def manifest_missing_field(work: Path) -> str:
    path = cache(work)
    edit_manifest(path, lambda manifest: manifest.pop("sample_count"))
    return read_all(path)


def missing_shard(work: Path) -> str:
    path = cache(work)
    (path / "shards" / "000000.bin").unlink()
    return read_all(path)


def missing_index(work: Path) -> str:
    path = cache(work)
    (path / "index.bin").unlink()
    return read_all(path)


def missing_metadata(work: Path) -> str:
    path = cache(work)
    (path / "metadata.arrow").unlink()
    return read_all(path)


def shard_changed(work: Path) -> str:
    path = cache(work)
    flip_last_byte(path / "shards" / "000000.bin")
    return read_all(path, validate=True)


def index_changed(work: Path) -> str:
    path = cache(work)
    flip_last_byte(path / "index.bin")
    return read_all(path, validate=True)


def shard_truncated(work: Path) -> str:
    path = cache(work)
    shard = path / "shards" / "000000.bin"
    shard.write_bytes(shard.read_bytes()[:-1])
    return read_all(path)


def index_truncated(work: Path) -> str:
    path = cache(work)
    index = path / "index.bin"
    index.write_bytes(index.read_bytes()[:-24])
    return read_all(path)


def embedded_metadata_changed(work: Path) -> str:
    """Sample 1's embedded "i" changed behind metadata.arrow's back, the shard's SHA-256
    updated to match, and (for this project's caches) the per-record checksums dropped,
    as a cache written by dataset-rt 0.2.4 has none: only the embedded copy tells."""
    path = cache(work)
    shard = path / "shards" / "000000.bin"
    changed = shard.read_bytes().replace(b'"i":1', b'"i":7', 1)
    shard.write_bytes(changed)

    def change(manifest: dict[str, Any]) -> None:
        manifest["shards"][0]["sha256"] = hashlib.sha256(changed).hexdigest()
        manifest.pop("record_checksums", None)

    edit_manifest(path, change)
    return read_all(path, validate=True)


def set_table(work: Path, change: Callable[[Any], Any]) -> str:
    dataset = load(cache(work))
    dataset.set_samples_metadata(change(dataset.samples_metadata()))
    return "table accepted"


def null_weight(work: Path) -> str:
    import polars as pl

    return set_table(
        work,
        lambda frame: frame.with_columns(
            pl.when(pl.col("sample_id") == 1).then(None).otherwise(pl.col("weight")).alias("weight")
        ),
    )


def null_cache_id(work: Path) -> str:
    import polars as pl

    return set_table(
        work,
        lambda frame: frame.with_columns(
            pl.when(pl.col("sample_id") == 1)
            .then(None)
            .otherwise(pl.col("cache_id"))
            .alias("cache_id")
        ),
    )


def float_cache_id(work: Path) -> str:
    import polars as pl

    return set_table(work, lambda frame: frame.with_columns(pl.col("cache_id").cast(pl.Float64)))


def string_sample_id(work: Path) -> str:
    import polars as pl

    return set_table(work, lambda frame: frame.with_columns(pl.col("sample_id").cast(pl.Utf8)))


def string_weight(work: Path) -> str:
    import polars as pl

    return set_table(work, lambda frame: frame.with_columns(pl.col("weight").cast(pl.Utf8)))


def empty_source(work: Path) -> list[Any]:
    return write(work, [])


def str_payload(work: Path) -> list[Any]:
    return write(work, [("text", {"i": 1})])


def ratio_with_none(work: Path) -> list[Any]:
    from dataset_rt import ShardCompression

    return write(
        work, [(b"x", {"i": 1})], shard_compression=ShardCompression(algo="none", ratio=2.0)
    )


TRIGGERS: dict[str, Callable[[Path], object]] = {
    trigger.__name__: trigger
    for trigger in (
        missing_manifest,
        missing_cache_directory,
        manifest_not_json,
        manifest_missing_field,
        missing_shard,
        missing_index,
        missing_metadata,
        shard_changed,
        index_changed,
        shard_truncated,
        index_truncated,
        embedded_metadata_changed,
        null_weight,
        null_cache_id,
        float_cache_id,
        string_sample_id,
        string_weight,
        empty_source,
        str_payload,
        ratio_with_none,
    )
}


def run(name: str, work: Path) -> dict[str, Any]:
    """What trigger `name` did in the empty directory `work`."""
    try:
        outcome = TRIGGERS[name](work)
    except Exception as error:  # noqa: BLE001 - the class and message are the result
        return {"raised": [cls.__name__ for cls in type(error).__mro__], "message": str(error)}
    if isinstance(outcome, list) and len(outcome) == 1:
        [result] = outcome
        if type(result).__name__ == "CacheWriteError":
            return {"result": "CacheWriteError", "message": result.message}
    return {"ok": repr(outcome)}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: dropin_triggers.py TRIGGER WORKDIR", file=sys.stderr)
        return 2
    print(json.dumps(run(argv[1], Path(argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
