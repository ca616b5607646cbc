"""tests/helpers/peer_venv.py's own decisions: which pip failures skip the peer tests, and where
a peer's virtual environment lives."""

from __future__ import annotations

from pathlib import Path

import pytest

from peer_venv import VENV_ENV_VAR, default_venv_dir, pip_could_not_reach_index


@pytest.mark.parametrize(
    ("output", "network"),
    [
        (
            "WARNING: Retrying (Retry(total=0)) after connection broken by "
            "'NewConnectionError(': Failed to "
            "establish a new connection: [Errno 111] Connection refused')': /simple/dataset-rt/\n"
            "ERROR: Could not find a version that satisfies the requirement dataset-rt==0.2.4 "
            "(from versions: none)",
            True,
        ),
        (
            "ERROR: Could not fetch URL https://pypi.org/simple/dataset-rt/: "
            "There was a problem confirming",
            True,
        ),
        ("[Errno -3] Temporary failure in name resolution", True),
        (
            "ERROR: Could not find a version that satisfies the requirement dataset-rt==0.2.4 "
            "(from versions: none)",
            False,
        ),
        (
            "ERROR: Could not install packages due to an OSError: "
            "[Errno 28] No space left on device",
            False,
        ),
        ("error: subprocess-exited-with-error", False),
    ],
)
def test_only_an_unreachable_index_makes_the_peer_tests_skip(output: str, network: bool) -> None:
    assert pip_could_not_reach_index(output) is network


def test_the_peer_environment_location_follows_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VENV_ENV_VAR, "/some/where/peer")
    assert default_venv_dir() == Path("/some/where/peer")
    monkeypatch.delenv(VENV_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert default_venv_dir() == Path("/xdg/dataset_rt_tests/peer-0.2.4")
