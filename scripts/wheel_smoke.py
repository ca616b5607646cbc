"""Smoke test of an installed dataset_rt (scripts/test_wheels.sh runs it from a fresh venv).

Checks that `dataset_rt` and its library come from the installed package, not a source
tree, then writes two small caches (raw and LZ4, several shards) with a tiny source, reads
them back in order and shuffled, compares every payload and metadata row with what was
written, and checks both caches with `dataset_rt.verify`.

    python -I scripts/wheel_smoke.py [--samples N] [--not-under SOURCE_TREE]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import dataset_rt
from dataset_rt import (
    CacheInput,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
    verify,
)
from dataset_rt._binding import native as _native

Metadata = dict[str, bool | int | float | str]


class TinySource:
    """`samples` deterministic samples: payloads of 1 to 1,500 bytes, four metadata columns."""

    def __init__(self, name: str, samples: int) -> None:
        self.name = name
        self.samples = samples

    def payload(self, index: int) -> bytes:
        digest = hashlib.sha256(f"{self.name}/{index}".encode()).digest()
        length = 1 + (index * 37) % 1500
        return (digest * (length // len(digest) + 1))[:length]

    def metadata(self, index: int) -> Metadata:
        label = f"{self.name}-{index % 5}"
        return {"index": index, "label": label, "score": index / 3, "even": index % 2 == 0}

    def __iter__(self) -> Iterator[CacheInput]:
        for index in range(self.samples):
            yield CacheInput(self.payload(index), self.metadata(index))


def fail(message: str) -> NoReturn:
    sys.exit(f"wheel smoke test failed: {message}")


def check_installed(source_tree: Path | None) -> None:
    """The package and its library must come from this interpreter's environment."""
    prefix = Path(sys.prefix).resolve()
    package = Path(dataset_rt.__file__).resolve()
    library = Path(_native.library_path).resolve()
    for what, path in (("dataset_rt", package), ("its library", library)):
        if not path.is_relative_to(prefix):
            fail(f"{what} was imported from {path}, outside this environment ({prefix})")
        if source_tree is not None and path.is_relative_to(source_tree.resolve()):
            fail(f"{what} was imported from {path}, inside the source tree {source_tree}")
    print(f"dataset_rt {dataset_rt.__version__} from {package.parent}")
    print(f"  library {library.name} ({library.stat().st_size:,} bytes)")


def check_samples(sources: list[TinySource], samples: list[dataset_rt.CachedSample]) -> None:
    for sample in samples:
        source = sources[sample.cache_id]
        if sample.data != source.payload(sample.sample_id):
            fail(f"sample {sample.cache_id}/{sample.sample_id}: payload differs")
        if dict(sample.metadata) != source.metadata(sample.sample_id):
            got = dict(sample.metadata)
            fail(f"sample {sample.cache_id}/{sample.sample_id}: metadata {got} differs")


def run(samples: int, base: Path) -> None:
    sources = [TinySource("raw", samples), TinySource("lz4", samples)]
    configs = [
        WriterConfig(show_progress=False, max_shard_bytes=64 * 1024),
        WriterConfig(
            show_progress=False,
            max_shard_bytes=64 * 1024,
            shard_compression=ShardCompression(algo="lz4", ratio=2.0),
        ),
    ]
    with DatasetRuntime(num_workers=2) as runtime:
        paths = []
        for source, config in zip(sources, configs, strict=True):
            [result] = runtime.write_cache(source, base, writer_config=config)
            if not isinstance(result, CacheWriteSuccess):
                fail(f"writing {source.name}: {result}")
            files = [f for f in result.path.rglob("*") if f.is_file()]
            print(f"wrote {samples} samples to {result.path} ({len(files)} files)")
            paths.append(result.path)

        expected = [(cache, index) for cache in range(len(sources)) for index in range(samples)]
        ordered = runtime.cached_dataset(paths, reader_config=ReaderConfig(seed=0, shuffle=False))
        if len(ordered) != len(expected):
            fail(f"the dataset has {len(ordered)} samples, expected {len(expected)}")
        read = list(ordered)
        if [(s.cache_id, s.sample_id) for s in read] != expected:
            fail("the ordered read did not return every sample once, in table order")
        check_samples(sources, read)
        print(f"read back {len(read)} samples in order: payloads and metadata match")

        # Without replacement: each epoch a permutation of the rows.
        shuffled_config = ReaderConfig(seed=7, shuffle=True, replacement=False)
        read = list(runtime.cached_dataset(paths, reader_config=shuffled_config))
        order = [(s.cache_id, s.sample_id) for s in read]
        if sorted(order) != expected:
            fail("the shuffled read did not return every sample exactly once")
        if order == expected:
            fail("the shuffled read returned the samples in table order")
        check_samples(sources, read)
        again = runtime.cached_dataset(paths, reader_config=shuffled_config)
        if [(s.cache_id, s.sample_id) for s in again] != order:
            fail("two shuffled reads with one seed differ")
        print(f"read back {len(read)} samples shuffled (a permutation, repeatable): all match")

        # With replacement (the default): weighted draws, each one a written sample.
        drawn = list(runtime.cached_dataset(paths, reader_config=ReaderConfig(seed=7)))
        if len(drawn) != len(expected):
            fail(f"the draws with replacement gave {len(drawn)} samples, expected {len(expected)}")
        check_samples(sources, drawn)
        print(f"read back {len(drawn)} samples drawn with replacement: all match")

        metadata = ordered.get_metadata()  # polars, through the Arrow C stream
        if metadata.height != len(expected):
            fail(f"get_metadata() has {metadata.height} rows, expected {len(expected)}")
        for column in ("index", "label", "score", "even"):
            if column not in metadata.columns:
                fail(f"get_metadata() lacks the column {column!r}: {metadata.columns}")
        print(f"get_metadata(): {metadata.height} rows, columns {metadata.columns}")

    for path in paths:
        report = verify(path, num_workers=2, show_progress=False)
        if not report.ok:
            fail(f"verify({path}) found {report.problems_total} problems: {report.problems[:3]}")
    print(f"verify found no problem in {len(paths)} caches")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="samples per cache")
    parser.add_argument(
        "--not-under", type=Path, metavar="SOURCE_TREE", help="fail if dataset_rt is from here"
    )
    arguments = parser.parse_args()
    started = time.perf_counter()
    check_installed(arguments.not_under)
    with tempfile.TemporaryDirectory(prefix="dataset_rt-wheel-smoke-") as base:
        run(arguments.samples, Path(base))
    print(f"wheel smoke test passed in {time.perf_counter() - started:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
