"""The fuzz harness (fuzz/cache_files.py) in CI: its regression inputs, a short seeded run,
and checks that its property catches what it claims to.

Every file under tests/fuzz_regressions/ is an input of the harness (a finding, or an input
that reaches a deep path worth keeping) and replays through the same property as in a fuzz
run. The seeded run feeds a fixed sequence of inputs to the harness in a child process, so
that a crash or a hang of the core fails this test instead of killing pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dataset_rt import DatasetRuntime
from dataset_rt._binding import native as _native
from dataset_rt.errors import InvalidCacheError, StateError

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
REGRESSIONS_DIR = Path(__file__).resolve().parents[1] / "fuzz_regressions"
sys.path.insert(0, str(FUZZ_DIR))

import cache_files  # noqa: E402  (fuzz/ is not a package)

# Inputs that still find a bug in the core, each with why (xfail, strict: fixing the bug
# makes the test fail until the input moves out of this table).
KNOWN_BUGS: dict[str, str] = {}

# The seeded run: a fixed number of inputs from a fixed seed (a few seconds natively).
# scripts/test.sh lowers the count where the core runs emulated.
SEEDED_ITERATIONS = int(os.environ.get("DATASET_RT_FUZZ_ITERATIONS", "800"))
SEEDED_TIMEOUT_SECONDS = 600


def regression_inputs() -> list[object]:
    inputs = sorted(REGRESSIONS_DIR.iterdir())
    return [
        pytest.param(
            path,
            id=path.name,
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[path.name])]
            if path.name in KNOWN_BUGS
            else [],
        )
        for path in inputs
    ]


@pytest.fixture(scope="module")
def harness(
    runtime: DatasetRuntime, tmp_path_factory: pytest.TempPathFactory
) -> cache_files.Harness:
    return cache_files.Harness(runtime, tmp_path_factory.mktemp("fuzz"))


@pytest.mark.parametrize("path", regression_inputs())
def test_regression_input_keeps_the_property(harness: cache_files.Harness, path: Path) -> None:
    harness.run_one(path.read_bytes())


def test_every_known_bug_has_its_input() -> None:
    assert set(KNOWN_BUGS) <= {path.name for path in REGRESSIONS_DIR.iterdir()}


def test_a_seeded_fuzz_run_finds_nothing(tmp_path: Path) -> None:
    findings = tmp_path / "findings"
    command = [
        sys.executable,
        str(FUZZ_DIR / "cache_files.py"),
        f"--iterations={SEEDED_ITERATIONS}",
        "--seed=1",
        f"--findings={findings}",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SEEDED_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(
            f"the seeded fuzz run hung; its last input: {findings / 'last-input'}\n{timeout}"
        )
    assert done.returncode == 0, (
        f"the seeded fuzz run failed (exit {done.returncode}); its last input, to copy into "
        f"tests/fuzz_regressions/: {findings / 'last-input'}\n{done.stderr[-4000:]}"
    )


# ---- the property is not vacuous ------------------------------------------------------------


def seed_files(harness: cache_files.Harness) -> dict[str, bytes | None]:
    return dict(harness.variants[0].files)


def test_a_seed_cache_reads_back_whole(harness: cache_files.Harness) -> None:
    for variant in harness.variants:
        assert harness.check_cache(dict(variant.files), two_caches=True) == "ok / ok / verify: 0"


def tamper_sample(
    harness: cache_files.Harness,
    monkeypatch: pytest.MonkeyPatch,
    index: int,
    change: Callable[[bytes, dict[str, Any]], tuple[bytes, dict[str, Any]]],
) -> None:
    """Make the harness's reads return sample `index` with `change(payload, metadata)` applied."""
    real_read = harness.read

    def tampered(paths: list[Path], validate: bool) -> object:
        result = real_read(paths, validate)
        assert isinstance(result, cache_files.Read)
        cache_id, sample_id, payload, metadata = result.samples[index]
        result.samples[index] = (cache_id, sample_id, *change(payload, metadata))
        return result

    monkeypatch.setattr(harness, "read", tampered)


def test_the_property_catches_a_silently_changed_payload(
    harness: cache_files.Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    tamper_sample(
        harness, monkeypatch, 2, lambda payload, metadata: (payload[:-1] + b"?", metadata)
    )
    with pytest.raises(cache_files.Violation, match="payload differs"):
        harness.check_cache(seed_files(harness), two_caches=False)


def test_the_property_catches_changed_metadata(
    harness: cache_files.Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "f" was -0.0: only the sign bit differs.
    tamper_sample(
        harness, monkeypatch, 1, lambda payload, metadata: (payload, metadata | {"f": 0.0})
    )
    with pytest.raises(cache_files.Violation, match="metadata"):
        harness.check_cache(seed_files(harness), two_caches=False)


@pytest.mark.parametrize(
    ("error", "message", "status", "violation"),
    [
        # An exception the ABI does not document for a cache's bytes.
        (StateError, "wrong state", _native.ERR_STATE, "status 8"),
        (InvalidCacheError, "no", _native.ERR_INVALID_CACHE, "a valid cache was refused"),
    ],
    ids=["undocumented exception", "refused valid cache"],
)
def test_the_property_catches_a_wrong_refusal(
    harness: cache_files.Harness,
    monkeypatch: pytest.MonkeyPatch,
    error: type[Exception],
    message: str,
    status: int,
    violation: str,
) -> None:
    class Refusing:
        def cached_dataset(self, paths: list[Path], **kwargs: object) -> None:
            raise error(f"cache {paths[-1]}: {message}", status)

    monkeypatch.setattr(harness, "runtime", Refusing())
    with pytest.raises(cache_files.Violation, match=violation):
        harness.check_cache(seed_files(harness), two_caches=False)


def test_the_property_catches_an_accepted_corrupt_record(
    harness: cache_files.Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record changed behind records.crc32c's back must be refused, not returned."""
    files = seed_files(harness)
    shard = files["shards/000000.bin"]
    assert shard is not None
    files["shards/000000.bin"] = shard[:-1] + bytes([shard[-1] ^ 1])
    real_read = harness.read

    def unchecked(paths: list[Path], validate: bool) -> object:
        # What the library would return if it skipped the checksum: the changed bytes.
        result = real_read([harness.other] * len(paths), validate)
        assert isinstance(result, cache_files.Read)
        cache_id, sample_id, payload, metadata = result.samples[2]
        result.samples[2] = (cache_id, sample_id, payload[:-1] + bytes([payload[-1] ^ 1]), metadata)
        result.again = list(reversed(result.samples))
        return result

    monkeypatch.setattr(harness, "read", unchecked)
    with pytest.raises(cache_files.Violation, match="CRC-32C"):
        harness.check_cache(files, two_caches=False)
