"""Drop-in details: failures raise dataset-rt 0.2.4's exception class and contain its phrase.

A user moving from dataset-rt 0.2.4 may match exceptions and messages. Our messages say
more, but each also contains the phrase dataset-rt 0.2.4 uses for the same failure and
raises (a subclass of) the class it raises. Every trigger (tests/helpers/dropin_triggers.py)
runs here on this project and, when a dataset-rt 0.2.4 virtual environment exists,
on dataset-rt 0.2.4 too, so the expectations below are measured, not remembered.

The writer profile counts like dataset-rt 0.2.4's too: `python_next` includes the call
that ends the source, and a source interrupted by KeyboardInterrupt keeps the bytes
it handed over in `python_extract`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import load_script
from dataset_rt import (
    CacheInput,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    WriterConfig,
    WriterProfilerConfig,
)
from peer_venv import default_venv_dir, peer_env, probe_peer, venv_python

TRIGGERS_PATH = Path(__file__).resolve().parent.parent / "helpers" / "dropin_triggers.py"
PEER_TIMEOUT = 120
# The virtual environment tests/interop/test_interop_peer.py creates, then the benchmarks'.
BENCH_VENV = Path.home() / ".cache" / "dataset_rt_bench" / "peer-0.2.4"

triggers = load_script(TRIGGERS_PATH)

# (trigger, the class dataset-rt 0.2.4 raises, its phrase); "CacheWriteError" for a failure
# that comes back as a write result.
CASES = [
    ("missing_manifest", "ValueError", "missing manifest"),
    ("missing_cache_directory", "ValueError", "missing manifest"),
    ("manifest_not_json", "RuntimeError", "JSON error"),
    ("manifest_missing_field", "RuntimeError", "JSON error"),
    ("missing_shard", "RuntimeError", "I/O error"),
    ("missing_index", "RuntimeError", "I/O error"),
    ("missing_metadata", "RuntimeError", "I/O error"),
    ("shard_changed", "ValueError", "checksum mismatch"),
    ("index_changed", "ValueError", "checksum mismatch"),
    ("shard_truncated", "ValueError", "shard length mismatch"),
    ("index_truncated", "ValueError", "row count does not match manifest"),
    ("embedded_metadata_changed", "ValueError", "embedded metadata does not match"),
    ("null_weight", "ValueError", "contains null"),
    ("null_cache_id", "ValueError", "contains null"),
    ("float_cache_id", "ValueError", "must be an integer"),
    ("string_sample_id", "ValueError", "must be an integer"),
    ("string_weight", "ValueError", "must be numeric"),
    ("empty_source", "CacheWriteError", "cache source yielded no samples"),
    ("str_payload", "CacheWriteError", "data must be bytes-like"),
    ("ratio_with_none", "ValueError", "ratio must be 1.0"),
]
CASE_IDS = [trigger for trigger, _, _ in CASES]


def assert_fails_like(outcome: dict[str, Any], expected_class: str, phrase: str) -> None:
    if expected_class == "CacheWriteError":
        assert outcome.get("result") == "CacheWriteError", outcome
    else:
        assert "raised" in outcome, f"nothing was raised: {outcome}"
        assert expected_class in outcome["raised"], (
            f"expected a {expected_class}, got {outcome['raised'][0]} "
            f"(MRO {outcome['raised']}): {outcome['message']}"
        )
    assert phrase in outcome["message"], f"{phrase!r} is not in: {outcome['message']}"


@pytest.mark.parametrize(("trigger", "expected_class", "phrase"), CASES, ids=CASE_IDS)
def test_ours_raises_the_peer_class_with_the_peer_phrase(
    trigger: str, expected_class: str, phrase: str, tmp_path: Path
) -> None:
    outcome = triggers.run(trigger, tmp_path)
    assert_fails_like(outcome, expected_class, phrase)
    if "raised" in outcome:
        # Our own contract still holds: every one of these is a ValueError.
        assert "ValueError" in outcome["raised"], outcome


@pytest.fixture(scope="session")
def peer_python() -> Path:
    """The interpreter of an existing dataset-rt 0.2.4 virtual environment; skip without one."""
    problems = []
    for venv in (default_venv_dir(), BENCH_VENV):
        problem = probe_peer(venv)
        if problem is None:
            return venv_python(venv)
        problems.append(f"{venv}: {problem}")
    pytest.skip(
        "no dataset-rt 0.2.4 virtual environment, so the failures were NOT checked against "
        "it (tests/interop/test_interop_peer.py creates one): " + "; ".join(problems)
    )


@pytest.mark.parametrize(("trigger", "expected_class", "phrase"), CASES, ids=CASE_IDS)
def test_the_peer_raises_that_class_with_that_phrase(
    trigger: str, expected_class: str, phrase: str, tmp_path: Path, peer_python: Path
) -> None:
    completed = subprocess.run(
        [str(peer_python), str(TRIGGERS_PATH), trigger, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=PEER_TIMEOUT,
        env=peer_env(),
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    outcome = json.loads(completed.stdout.strip().splitlines()[-1])
    assert_fails_like(outcome, expected_class, phrase)


# --- the writer profile ----------------------------------------------------------------------


class CountedSource:
    """Yields `count` samples of 10, 11, 12... bytes, then ends, or raises `error` instead of
    the sample at `fail_at`."""

    def __init__(self, count: int, fail_at: int | None = None, error: BaseException | None = None):
        self.name = "counted"
        self.count = count
        self.fail_at = fail_at
        self.error = error

    def __iter__(self) -> Iterator[CacheInput]:
        for index in range(self.count):
            if index == self.fail_at:
                assert self.error is not None
                raise self.error
            yield CacheInput(b"x" * (10 + index), {"index": index})


def write_profiled(source: CountedSource, tmp_path: Path) -> tuple[list[Any], dict[str, Any]]:
    """The results and the profile's stages by name, of writing `source` with the profiler."""
    profile = tmp_path / "profile.json"
    config = WriterConfig(
        show_progress=False, profiler=WriterProfilerConfig(enabled=True, path=profile)
    )
    results: list[Any] = []
    try:
        results = DatasetRuntime(num_workers=2).write_cache(
            source, tmp_path / "caches", writer_config=config
        )
    except KeyboardInterrupt:
        results = ["KeyboardInterrupt"]
    [entry] = json.loads(profile.read_text(encoding="utf-8"))["sources"]
    return results, {stage["name"]: stage for stage in entry["stages"]}


def test_python_next_counts_the_call_that_ends_the_source(tmp_path: Path) -> None:
    results, stages = write_profiled(CountedSource(5), tmp_path)
    assert isinstance(results[0], CacheWriteSuccess), results
    assert stages["python_next"]["calls"] == 6, stages["python_next"]  # 5 samples + StopIteration
    assert stages["python_extract"]["calls"] == 5, stages["python_extract"]
    assert stages["python_extract"]["bytes"] == sum(range(10, 15)), stages["python_extract"]


def test_python_next_counts_the_one_call_of_an_empty_source(tmp_path: Path) -> None:
    results, stages = write_profiled(CountedSource(0), tmp_path)
    assert isinstance(results[0], CacheWriteError), results
    assert stages["python_next"]["calls"] == 1, stages["python_next"]
    assert stages["python_extract"]["calls"] == 0, stages["python_extract"]


@pytest.mark.parametrize(
    "error", [KeyboardInterrupt(), RuntimeError("the source broke")], ids=["interrupt", "raise"]
)
def test_a_source_stopped_by_an_exception_keeps_its_extracted_bytes(
    error: BaseException, tmp_path: Path
) -> None:
    # Three samples pulled (10 + 11 + 12 bytes, still in the unpushed batch), then the
    # fourth call raises: it counts as a `next()` call, and the bytes stay in the profile.
    results, stages = write_profiled(CountedSource(5, fail_at=3, error=error), tmp_path)
    if isinstance(error, KeyboardInterrupt):
        assert results == ["KeyboardInterrupt"], results
    else:
        assert isinstance(results[0], CacheWriteError), results
    assert stages["python_next"]["calls"] == 4, stages["python_next"]
    assert stages["python_extract"]["calls"] == 3, stages["python_extract"]
    assert stages["python_extract"]["bytes"] == 10 + 11 + 12, stages["python_extract"]
