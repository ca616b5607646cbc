"""The retry policy: full-jitter backoff bounds, the attempts it makes, and the
destination file removed after every failed attempt."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_rt import RemoteConfig
from dataset_rt._remote import BACKOFF_BASE_S, BACKOFF_CAP_S, RetryPolicy
from dataset_rt._remote.retry import NotFound, Refused, Transient, copy_body, fetch_with_retries
from dataset_rt.errors import RemoteError


@given(retry=st.integers(0, 200), draw=st.floats(0.0, 1.0, exclude_max=True))
def test_the_backoff_is_full_jitter_under_an_exponential_ceiling(retry: int, draw: float) -> None:
    policy = RetryPolicy()
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0**retry)
    assert policy.backoff_s(retry, lambda: draw) == pytest.approx(draw * ceiling)
    assert 0.0 <= policy.backoff_s(retry) <= ceiling


def test_the_policy_of_a_config_takes_its_retries_and_timeout() -> None:
    policy = RetryPolicy.from_config(RemoteConfig(retries=7, timeout_s=2.5))
    assert policy == RetryPolicy(7, 2.5, BACKOFF_BASE_S, BACKOFF_CAP_S)


class Script:
    """An attempt that writes part of a file, then fails as scripted (None: succeeds)."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self, dest: Path) -> None:
        self.calls += 1
        dest.write_bytes(b"partial")
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


def run(script: Script, dest: Path, retries: int = 3) -> tuple[bool, list[float]]:
    sleeps: list[float] = []
    policy = RetryPolicy(retries=retries, timeout_s=1.0, backoff_base_s=1.0, backoff_cap_s=4.0)
    found = fetch_with_retries("m", "s3://b/m", dest, policy, script, sleep=sleeps.append)
    return found, sleeps


def test_transient_failures_sleep_between_attempts_then_recover(tmp_path: Path) -> None:
    script = Script(Transient("a"), Transient("b"), None)
    found, sleeps = run(script, tmp_path / "m")
    assert found and script.calls == 3 and len(sleeps) == 2
    assert 0 <= sleeps[0] <= 1.0 and 0 <= sleeps[1] <= 2.0
    assert (tmp_path / "m").read_bytes() == b"partial"  # the successful attempt's file


def test_the_last_transient_failure_is_named_and_the_partial_file_removed(tmp_path: Path) -> None:
    script = Script(*[Transient(f"cause {i}") for i in range(4)])
    with pytest.raises(
        RemoteError,
        match=r"^cannot fetch m from s3://b/m: 4 attempt\(s\) failed, the last with: cause 3$",
    ):
        run(script, tmp_path / "m")
    assert script.calls == 4 and not (tmp_path / "m").exists()


@pytest.mark.parametrize("retries", [0, 1, 5])
def test_not_found_and_refused_end_at_once(tmp_path: Path, retries: int) -> None:
    script = Script(NotFound())
    assert run(script, tmp_path / "m", retries) == (False, [])
    assert not (tmp_path / "m").exists()
    refused = Script(Refused("access denied"))
    with pytest.raises(RemoteError, match=r"access denied \(attempt 1\)"):
        run(refused, tmp_path / "m", retries)
    assert refused.calls == 1 and not (tmp_path / "m").exists()


def test_an_interruption_removes_the_partial_file_and_propagates(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run(Script(KeyboardInterrupt()), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_a_body_shorter_than_its_length_is_truncated(tmp_path: Path) -> None:
    chunks = [b"abc", b"de", b""]
    with pytest.raises(Transient, match="truncated body: 5 of 8 bytes"):
        copy_body(lambda _: chunks.pop(0), tmp_path / "m", 8)
    chunks = [b"abc", b"de", b""]
    assert copy_body(lambda _: chunks.pop(0), tmp_path / "m", 5) == 5
    assert (tmp_path / "m").read_bytes() == b"abcde"
