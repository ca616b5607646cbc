"""The `dataset-rt` command (`dataset_rt.cli`) as a whole: its help, its entry points,
and what every command shares (exit codes 0 success, 1 a problem found, 2 a usage error;
messages in the command's own words). Each command's tests are in test_cli_<command>.py,
their shared helpers in cli_helpers.py."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cli_helpers import PACKAGE_ROOT, invoke, make_folder, no_internal_words, write
from conftest import pythonpath_before_inherited
from dataset_rt import DatasetRuntime
from dataset_rt.cli import main

COMMANDS = [
    [],
    ["ls"],
    ["info"],
    ["get"],
    ["head"],
    ["metadata"],
    ["verify"],
    ["migrate"],
    ["write"],
    ["write", "folder"],
    ["write", "parquet"],
    ["demo"],
    ["bench"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "dataset-rt")
def test_every_command_has_help(command: list[str]) -> None:
    result = invoke(*command, "--help", code=0)
    assert "Usage:" in result.stdout and "--help" in result.stdout


def test_no_command_or_an_unknown_one_is_a_usage_error() -> None:
    assert "Usage:" in invoke(code=2).output
    assert "No such command" in invoke("frobnicate", code=2).stderr
    assert "No such option" in invoke("info", "--frobnicate", code=2).stderr


def test_python_m_dataset_rt_runs_the_command() -> None:
    environment = {**os.environ, "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT)}
    completed = subprocess.run(
        [sys.executable, "-m", "dataset_rt", "--help"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    for command in ("ls", "info", "head", "get", "metadata", "verify", "write", "demo", "bench"):
        assert command in completed.stdout
    version = subprocess.run(
        [sys.executable, "-m", "dataset_rt", "--version"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert version.returncode == 0 and version.stdout.startswith("dataset-rt "), version


def test_the_console_script_names_the_entry_point() -> None:
    pyproject = tomllib.loads((PACKAGE_ROOT.parent / "pyproject.toml").read_text())
    target = pyproject["project"]["scripts"]["dataset-rt"]
    module, function = target.split(":")
    assert getattr(importlib.import_module(module), function) is main


def test_a_missing_path_or_a_file_is_a_usage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_bytes(b"")
    for command in ("ls", "info", "head", "verify"):
        result = invoke(command, tmp_path / "nope", code=2)
        assert "does not exist" in result.stderr
        assert "is a file" in invoke(command, a_file, code=2).stderr
    assert "does not exist" in invoke("get", tmp_path / "nope", "0", code=2).stderr
    assert (
        "does not exist"
        in invoke("metadata", tmp_path / "nope", "-o", tmp_path / "m.csv", code=2).stderr
    )


def test_the_commands_own_messages_use_no_internal_words(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path / "base")
    empty = tmp_path / "empty"
    empty.mkdir()
    make_folder(tmp_path / "images")
    failures: list[tuple[list[str | Path], int]] = [
        (["info", empty], 1),
        (["ls", cache], 1),
        (["get", cache, "99"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "--name", "c"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "--name", "tmp"], 2),
        (["write", "folder", empty, "-o", tmp_path / "base"], 1),
        (["write", "folder", tmp_path / "images", "-o", tmp_path / "base", "-e", ".jpg"], 1),
        (["head", tmp_path / "nope"], 2),
    ]
    for args, code in failures:
        result = invoke(*args, code=code)
        assert result.stderr.strip(), args
        no_internal_words(result.stderr)
