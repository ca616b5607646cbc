"""The process's bounded set of open shard files (issue 42, point 1).

Under ``RLIMIT_NOFILE`` 128, a cache of 5,000 shards and a dataset of 500 caches
open and read completely, every way a training job reads them, with the results
of a process without the limit; an open that finds no descriptor left says so,
with the limit and what the set holds; the statistics and the maximum.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dataset_rt
from dataset_rt import CacheInput, CacheSource, DatasetRuntime, ReaderConfig, WriterConfig, errors

HERE = Path(__file__).resolve().parent.parent  # tests/
BIG_SHARDS = 5000
CACHES = 500
SAMPLES_PER_CACHE = 3
LIMIT = 128


class Tiny:
    """`count` samples of 1 to 7 bytes; with `max_shard_bytes=1` each gets a shard."""

    def __init__(self, name: str, count: int, salt: int) -> None:
        self.name = name
        self.count = count
        self.salt = salt

    def __iter__(self) -> Iterator[CacheInput]:
        for i in range(self.count):
            byte = (i * 31 + self.salt) % 256
            yield CacheInput(data=bytes([byte]) * (i % 7 + 1), metadata={"i": i, "s": self.salt})


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The 5,000-shard cache and the 500 caches (3 shards each), written by five
    threads at once: a small cache's time is mostly its fsyncs."""
    base = tmp_path_factory.mktemp("open_files")
    one_per_shard = WriterConfig(max_shard_bytes=1, show_progress=False)
    parts = [[Tiny("big", BIG_SHARDS, 0)]] + [
        [Tiny(f"c{k:03d}", SAMPLES_PER_CACHE, k + 1) for k in range(part, CACHES, 4)]
        for part in range(4)
    ]
    results: list[list[dataset_rt.CacheWriteResult]] = [[] for _ in parts]

    def write(part: int) -> None:
        runtime = DatasetRuntime(num_workers=1)
        sources: list[CacheSource] = [*parts[part]]
        results[part] = runtime.write_cache(sources, base, writer_config=one_per_shard)
        runtime.close()

    threads = [threading.Thread(target=write, args=(part,)) for part in range(len(parts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    paths = {}
    for result in (result for part in results for result in part):
        assert isinstance(result, dataset_rt.CacheWriteSuccess), result
        paths[result.source_name] = result.path
    assert len(os.listdir(paths["big"] / "shards")) == BIG_SHARDS
    return paths.pop("big"), [paths[name] for name in sorted(paths)]


def _digest(samples: Iterable[Any]) -> str:
    """One digest of every sample's identity, payload and metadata, in order."""
    digest = hashlib.sha256()
    count = 0
    for sample in samples:
        metadata = sorted((key, int(value)) for key, value in sample.metadata.items())
        row = (int(sample.cache_id), int(sample.sample_id), bytes(sample.data), metadata)
        digest.update(repr(row).encode())
        count += 1
    return f"{count}:{digest.hexdigest()}"


def _loader_digest(dataset: dataset_rt.CachedDataset) -> str:
    """The digest of the stream as a torch DataLoader with 2 forked workers gives it."""
    import dataset_rt.torch as dataset_rt_torch

    # Each sample is dropped once digested: torch shares what it sends from a
    # worker through descriptors, held while the object lives.
    return _digest(dataset_rt_torch.DataLoader(dataset, batch_size=None, num_workers=2))


def read_everything(big: Path, many: list[Path], with_torch: bool) -> dict[str, str]:
    """Digests of every way of reading both datasets, and of `verify`."""
    found: dict[str, str] = {}
    runtime = DatasetRuntime(num_workers=2)
    configs = {
        "ordered": ReaderConfig(seed=0, shuffle=False),
        "shuffled": ReaderConfig(seed=1),
        "without-replacement": ReaderConfig(seed=2, replacement=False),
    }
    for name, paths in (("big", [big]), ("many", many)):
        for mode, config in configs.items():
            dataset = runtime.cached_dataset(paths, reader_config=config)
            found[f"{name}/{mode}"] = _digest(dataset)
        dataset = runtime.cached_dataset(paths, reader_config=configs["ordered"])
        pairs = dataset.get_metadata().select("cache_id", "sample_id").rows()
        random.Random(3).shuffle(pairs)
        found[f"{name}/get_many"] = _digest(dataset.get_many(pairs))
        if with_torch:
            shuffled = runtime.cached_dataset(paths, reader_config=configs["without-replacement"])
            found[f"{name}/dataloader"] = _loader_digest(shuffled)
    report = dataset_rt.verify(big, num_workers=2, show_progress=False)
    found["verify"] = f"{report.ok} {report.problems_total}"
    stats = dataset_rt.open_shards_stats()
    found["bounded"] = str(stats.open <= stats.max_open_shards)
    runtime.close()
    return found


def _run_limited(code: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a Python process whose RLIMIT_NOFILE is `LIMIT`."""
    prelude = (
        "import resource, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, hard))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_5000_shard_cache_and_500_caches_read_under_a_limit_of_128(
    caches: tuple[Path, list[Path]],
) -> None:
    big, many = caches
    with_torch = _torch_available()
    expected = read_everything(big, many, with_torch=False)
    # Every dataset has every sample.
    assert expected["big/ordered"].startswith(f"{BIG_SHARDS}:")
    assert expected["many/get_many"].startswith(f"{CACHES * SAMPLES_PER_CACHE}:")
    assert expected["verify"] == "True 0"
    if with_torch:
        # dataset_rt.torch.DataLoader gives the dataset's stream, in order, with any
        # number of workers: the child's loaders must give the unlimited stream.
        for name in ("big", "many"):
            expected[f"{name}/dataloader"] = expected[f"{name}/without-replacement"]
    arguments = json.dumps([str(big), [str(path) for path in many], with_torch])
    child = _run_limited(
        "import json, resource, test_open_files\n"
        f"big, many, with_torch = json.loads({arguments!r})\n"
        "assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 128\n"
        "from pathlib import Path\n"
        "found = test_open_files.read_everything(Path(big), [Path(p) for p in many], with_torch)\n"
        "print(json.dumps(found))\n"
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.splitlines()[-1]) == expected
    if not with_torch:
        pytest.skip("torch is not installed: the DataLoader reads were not run")


def test_out_of_descriptors_the_message_names_the_limit_and_the_shards_held(
    caches: tuple[Path, list[Path]],
) -> None:
    big, many = caches
    child = _run_limited(
        "import os, dataset_rt\n"
        "from dataset_rt import DatasetRuntime, ReaderConfig, errors\n"
        "runtime = DatasetRuntime(num_workers=1)\n"
        f"held = runtime.cached_dataset([{str(big)!r}], reader_config=ReaderConfig(seed=0))\n"
        "files = []\n"
        "try:\n"
        "    while True:\n"
        "        files.append(os.open(os.devnull, os.O_RDONLY))\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    runtime.cached_dataset([{str(many[0])!r}], reader_config=ReaderConfig(seed=0))\n"
        "except errors.CacheIOError as error:\n"
        "    print(error)\n"
        "for fd in files:\n"
        "    os.close(fd)\n"
        f"runtime.cached_dataset([{str(many[0])!r}], reader_config=ReaderConfig(seed=0))\n"
        "print('opened')\n"
    )
    assert child.returncode == 0, child.stderr
    message, opened = child.stdout.splitlines()[-2:]
    assert message == (
        f"cache {many[0]}: I/O error: cannot open the cache directory: too many open files: "
        f"the limit is {LIMIT} (ulimit -n); dataset_rt holds 64 shard files open "
        "(at most 64, its max_open_shards)"
    )
    assert opened == "opened"


def test_the_maximum_bounds_the_open_files_and_the_stats_count_them(
    caches: tuple[Path, list[Path]],
) -> None:
    big, _ = caches
    runtime = DatasetRuntime(num_workers=2)
    before = dataset_rt.open_shards_stats()
    try:
        dataset_rt.set_max_open_shards(8)
        dataset = runtime.cached_dataset([big], reader_config=ReaderConfig(seed=0, shuffle=False))
        assert dataset_rt.open_shards_stats().open <= 8
        assert _digest(dataset).startswith(f"{BIG_SHARDS}:")
        after = dataset_rt.open_shards_stats()
        assert after.open <= 8 and after.max_open_shards == 8
        # Each shard's file was opened for its read (up to 8 were kept from the
        # check at open, and as many may have been closed before their read),
        # each closing another to make room.
        opened = after.opens - before.opens
        assert BIG_SHARDS - 8 <= opened <= BIG_SHARDS + 8
        assert after.evictions - before.evictions >= opened - 8
        del dataset
    finally:
        dataset_rt.set_max_open_shards(before.max_open_shards)
        runtime.close()
    assert dataset_rt.open_shards_stats().max_open_shards == before.max_open_shards


def test_a_maximum_out_of_range_is_refused_with_its_value() -> None:
    before = dataset_rt.open_shards_stats().max_open_shards
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^max_open_shards must be at least 1, got 0$"
    ):
        dataset_rt.set_max_open_shards(0)
    with pytest.raises(errors.InvalidArgumentError, match=r"between 1 and 4294967295, got -1$"):
        dataset_rt.set_max_open_shards(-1)
    with pytest.raises(errors.InvalidArgumentError, match=r"got 4294967296$"):
        dataset_rt.set_max_open_shards(2**32)
    with pytest.raises(TypeError, match=r"^max_open_shards must be an int, got bool$"):
        dataset_rt.set_max_open_shards(True)
    assert dataset_rt.open_shards_stats().max_open_shards == before
