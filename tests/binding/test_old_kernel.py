"""The library works on the oldest kernel its Linux wheels promise.

The wheels are tagged manylinux2014, whose systems (CentOS 7) run Linux 3.10.
`tests/c/old_kernel.c` runs a child interpreter under a seccomp filter that makes
every system call newer than 3.10 fail with ENOSYS, as that kernel would; the
child writes caches and reads them back through every path a user takes."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import compile_c, pythonpath_before_inherited
from dataset_rt._binding import native as _native

HERE = Path(__file__).resolve().parent.parent  # tests/
# x86_64 system call numbers grow with the kernel: 314 (sched_setattr) arrived
# in Linux 3.14, so it and every later one are missing on 3.10. statx is 332.
FIRST_AFTER_LINUX_3_10 = 314
STATX = 332

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64",
    reason="the filter imitates an x86_64 Linux kernel",
)

CHILD = textwrap.dedent(
    """
    import ctypes, errno, os, sys
    from pathlib import Path
    import dataset_rt, polars as pl

    # The filter is in place: statx does not exist here.
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(STATX, -100, b"/", 0, 0, None) == -1
    assert ctypes.get_errno() == errno.ENOSYS, os.strerror(ctypes.get_errno())

    base = Path(sys.argv[1])
    samples = [(bytes([i % 251]) * (i * 13 % 900 + 1), {"index": i, "label": "abc"[i % 3],
               "score": i / 8, "flag": i % 2 == 0}) for i in range(2500)]

    class Source:
        def __init__(self, name):
            self.name = name
        def __iter__(self):
            return (dataset_rt.CacheInput(data, metadata) for data, metadata in samples)

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    for algo in ("none", "lz4"):
        compression = dataset_rt.ShardCompression(algo=algo, ratio=1.0 if algo == "none" else 2.0)
        config = dataset_rt.WriterConfig(
            show_progress=False, max_shard_bytes=200_000, shard_compression=compression)
        [result] = runtime.write_cache([Source(algo)], base, writer_config=config)
        assert isinstance(result, dataset_rt.CacheWriteSuccess), result
        # A second write of the same name finds the cache and leaves it alone.
        [again] = runtime.write_cache([Source(algo)], base, writer_config=config)
        assert isinstance(again, dataset_rt.CacheWriteError), again
        assert "cache path already exists" in again.message, again.message

        checked = dataset_rt.ReaderConfig(seed=3, shuffle=False, validate_cache=True)
        ordered = runtime.cached_dataset([base / algo], reader_config=checked)
        got = [(sample.data, dict(sample.metadata)) for sample in ordered]
        assert got == samples, algo

        shuffled = runtime.cached_dataset(
            [base / algo], reader_config=dataset_rt.ReaderConfig(seed=3, shuffle=True))
        table = shuffled.get_metadata()
        assert table.height == len(samples)
        shuffled.update_metadata(table.with_columns(
            pl.when(pl.col("sample_id") == 7).then(1e9).otherwise(1.0).alias("weight")))
        drawn = [sample.sample_id for sample in shuffled]
        assert drawn.count(7) > len(drawn) // 2, drawn.count(7)
        assert all(shuffled_sample.data == samples[shuffled_sample.sample_id][0]
                   for shuffled_sample in shuffled)
    print("old kernel round trip: ok")
    """
).replace("STATX", str(STATX))


@pytest.fixture(scope="module")
def old_kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The filter program, compiled."""
    program = tmp_path_factory.mktemp("old_kernel") / "old_kernel"
    compile_c(HERE / "c" / "old_kernel.c", program)
    return program


def test_caches_are_written_and_read_where_the_kernel_predates_statx(
    old_kernel: Path, tmp_path: Path
) -> None:
    environment = dict(
        os.environ,
        DATASET_RT_LIBRARY=str(_native.library_path.resolve()),
        PYTHONPATH=pythonpath_before_inherited(Path(_native.__file__).parents[2]),
    )
    result = subprocess.run(
        [str(old_kernel), str(FIRST_AFTER_LINUX_3_10), sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert result.returncode == 0, f"old-kernel run failed:\n{result.stdout}\n{result.stderr}"
    assert "old kernel round trip: ok" in result.stdout
