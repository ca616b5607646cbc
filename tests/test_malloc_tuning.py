"""Reading large payloads fixes glibc's malloc thresholds, so that their memory,
freed by the training loop, is reused instead of faulted in again; reading
small payloads leaves them alone, and so do users' own settings."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import pythonpath_before_inherited
from dataset_rt import _malloc_tuning

HERE = Path(__file__).resolve().parent

# In a process of its own (the settings are process-wide): reads 64 payloads of
# 1 KiB, then 64 of 1 MiB five times after a first pass; prints whether the
# settings were made after the small payloads, and the minor page faults per
# page of large payload read.
_READ_PROGRAM = textwrap.dedent(
    """
    import json, os, resource, sys, tempfile
    import dataset_rt
    from dataset_rt import CacheInput, ReaderConfig, WriterConfig, _malloc_tuning

    class Source:
        def __init__(self, name, size):
            self.name = name
            self.block = os.urandom(size)

        def __iter__(self):
            for i in range(64):
                yield CacheInput(self.block, {"i": i})

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    config = ReaderConfig(seed=0, shuffle=False)
    with tempfile.TemporaryDirectory() as base:
        small, large = runtime.write_cache(
            [Source("small", 1024), Source("large", 1 << 20)],
            base,
            writer_config=WriterConfig(show_progress=False),
        )
        for sample in runtime.cached_dataset([small.path], reader_config=config):
            len(sample.data)
        tuned_after_small = _malloc_tuning._applied is not None
        dataset = runtime.cached_dataset([large.path], reader_config=config)
        for sample in dataset:
            pass
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(5):
            for sample in dataset:
                len(sample.data)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        print(json.dumps([tuned_after_small, faults / 5 / (64 * 256)]))
    """
)


def _read_in_a_process(tuning: str) -> tuple[bool, float]:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MALLOC_") and name != "GLIBC_TUNABLES"
    }
    environ[_malloc_tuning.OPT_OUT_VARIABLE] = tuning
    environ["PYTHONPATH"] = pythonpath_before_inherited(HERE.parent / "python", HERE)
    result = subprocess.run(
        [sys.executable, "-c", _READ_PROGRAM],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    tuned_after_small, faults_per_page = json.loads(result.stdout)
    return tuned_after_small, faults_per_page


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc settings")
def test_large_payloads_reuse_their_memory_from_pass_to_pass() -> None:
    if not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"):
        pytest.skip("not glibc")
    tuned_after_small, faults_per_page = _read_in_a_process("1")
    assert not tuned_after_small, "reading 1 KiB payloads changed malloc's settings"
    # Without the settings this measured 0.48 faults per page (every batch's
    # memory given back to the kernel and faulted in again); with them, 0.
    assert faults_per_page < 0.05


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({"DATASET_RT_MALLOC_TUNING": "0"}, "DATASET_RT_MALLOC_TUNING=0"),
        ({"MALLOC_TRIM_THRESHOLD_": "1000"}, "MALLOC_TRIM_THRESHOLD_ is set"),
        ({"MALLOC_MMAP_THRESHOLD_": "1000"}, "MALLOC_MMAP_THRESHOLD_ is set"),
        ({"MALLOC_TOP_PAD_": "0"}, "MALLOC_TOP_PAD_ is set"),
        (
            {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000"},
            "GLIBC_TUNABLES sets malloc parameters",
        ),
    ],
)
def test_settings_made_by_the_user_are_left_alone(environ: dict[str, str], reason: str) -> None:
    assert _malloc_tuning.skip_reason(environ) == reason


def test_an_ordinary_linux_environment_is_tuned() -> None:
    expected = None if sys.platform.startswith("linux") else "not Linux"
    assert _malloc_tuning.skip_reason({"GLIBC_TUNABLES": "glibc.cpu.x86_ibt=on"}) == expected
