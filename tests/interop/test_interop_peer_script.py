"""A "user script" written against the API of the reference implementation,
`dataset-rt==0.2.4` from PyPI, runs on it and here and records the same observations.

tests/helpers/peer_driver.py holds the script (its ``user_script`` step); it runs in the peer's
virtual environment (tests/helpers/peer_venv.py) and under this interpreter, each in a
subprocess. Parts the peer lacks run only here and are checked on their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dataset_rt
from peer_venv import PEER_VERSION, peer_venv_python, run_ours_subprocess, run_peer


@pytest.fixture(scope="session")
def peer_python() -> Path:
    """The interpreter of a virtual environment with dataset-rt==0.2.4, created once, reused."""
    return peer_venv_python(PEER_VERSION)


@pytest.fixture(scope="module")
def user_script_runs(peer_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("user_script")
    (root / "peer").mkdir()
    (root / "ours").mkdir()
    peer_out = run_peer(
        peer_python,
        [{"op": "user_script", "workdir": str(root / "peer")}, {"op": "environment"}],
        root / "peer-driver",
    )
    ours_out = run_ours_subprocess(
        [{"op": "user_script", "workdir": str(root / "ours")}, {"op": "environment"}],
        root / "ours-driver",
    )
    assert peer_out[1]["distribution_version"] == PEER_VERSION, peer_out[1]
    assert Path(ours_out[1]["file"]).resolve() == Path(dataset_rt.__file__).resolve(), ours_out[1]
    return {"peer": peer_out[0], "ours": ours_out[0]}


SEPARATELY_COMPARED = {"extensions", "result_paths", "invalid_name_label"}


def test_a_user_script_written_for_the_peer_gives_the_same_results_here(
    user_script_runs: dict[str, Any],
) -> None:
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert set(peer) == set(ours)
    differences = {
        key: {"dataset-rt 0.2.4": peer[key], "DatasetRT": ours[key]}
        for key in sorted(peer)
        if key not in SEPARATELY_COMPARED and peer[key] != ours[key]
    }
    assert not differences, (
        "the user script observed differences:\n" + json.dumps(differences, indent=1)[:6000]
    )
    # and the script saw what a dataset-rt user expects, not just the same thing twice
    assert all(all(flags) for flags in ours["public_names"].values()), ours["public_names"]
    assert ours["api_same_objects"] is True
    assert ours["quickstart_iterations"] == 1 and ours["reuse"][1] == 1, (
        "a reused cache's source was iterated"
    )
    assert ours["write_cache"] == [
        "CacheWriteSuccess",
        "CacheWriteError",
        "CacheWriteError",
        "CacheWriteError",
    ]
    assert ours["write_cache_errors"] == [["broken", False, True], ["train_images", True, False]]
    assert ours["errors"]["num_workers"] == "num_workers must be greater than zero"
    assert ours["errors"]["no_sources"] == [[], "no cache sources were provided"]


def test_result_paths_are_the_base_dir_as_given_joined_with_the_source_name(
    user_script_runs: dict[str, Any],
) -> None:
    """dataset-rt returns ``CacheWriteSuccess.path == base_cache_dir / name`` as the caller spelled
    base_cache_dir (the quickstart passes the relative ``Path("cache")``)."""
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert peer["result_paths"] == ["cache/train_images", "cache/train_images", "cache/extra"]
    assert ours["result_paths"] == peer["result_paths"]


def test_the_error_for_a_source_name_that_is_not_a_plain_segment_is_labelled_like_the_peer(
    user_script_runs: dict[str, Any],
) -> None:
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert peer["invalid_name_label"][0] == "CacheWriteError"
    assert ours["invalid_name_label"] == peer["invalid_name_label"]


def test_the_extensions_run_only_here_and_behave_as_specified(
    user_script_runs: dict[str, Any],
) -> None:
    assert (
        user_script_runs["peer"]["extensions"] == {}
    )  # 0.2.4 has none of them: the script skipped them
    assert user_script_runs["ours"]["extensions"] == {
        "get_equals_samples_metadata": True,
        "after_update": [[0, 0], [0, 1], [1, 0], [1, 3]],
        "extra_column_kept": True,
        "epoch_len": [3, [[0, 0], [0, 1], [1, 0]]],
    }
