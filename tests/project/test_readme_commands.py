"""The README's two commands are the whole setup, and CI runs exactly them.

.ci/run takes the commands from the README (scripts/readme_commands.py); these tests pin
what a newcomer relies on: two commands, every extra they name exists, the test command
brings everything the tests import, and CI installs nothing with pip of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import dependency_floors  # noqa: E402
import readme_commands  # noqa: E402

README = (ROOT / "README.md").read_text(encoding="utf-8")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
_EXTRAS = re.compile(r"-e '\.\[([a-z,-]+)\]'")


def extras_of(command: str) -> set[str]:
    match = _EXTRAS.search(command)
    assert match, f"no editable install with extras in {command!r}"
    return set(match.group(1).split(","))


def test_the_readme_has_exactly_two_commands_the_main_job_then_the_tests() -> None:
    main_job, tests = readme_commands.readme_commands(README)
    assert main_job.endswith("-m dataset_rt.demo"), main_job
    assert tests.endswith("bash scripts/test.sh"), tests
    for command in (main_job, tests):
        assert command.startswith("python3 -m venv .venv && "), command


def test_the_commands_name_only_extras_that_pyproject_declares() -> None:
    main_job, tests = readme_commands.readme_commands(README)
    declared = set(PROJECT["optional-dependencies"])
    assert extras_of(main_job) <= declared
    assert extras_of(tests) == {"dev", "test"} <= declared


# The modules the suite and its examples import beyond the runtime dependencies, and the
# requirement of the dev or test extra that provides each.
TEST_MODULES = {
    "torch": "torch",
    "torchdata": "torchdata",
    "sklearn": "scikit-learn",
    "datasets": "datasets",
    "PIL": "pillow",
    "lz4": "lz4",
    "hypothesis": "hypothesis",
    "boto3": "boto3",
    "moto": "moto",
    "ray": "ray",
    "dask": "dask",
}


@pytest.mark.parametrize("module", list(TEST_MODULES))
def test_what_the_tests_import_comes_with_the_test_command(module: str) -> None:
    """Each module the suite or its examples import is provided by the dev or test extra,
    so the test command installs it, and it is installed (this test runs after that
    command). The dependency-floors run (scripts/test.sh phase 3) installs the extras but
    for the packages that cannot sit beside the floors (dependency_floors.EXCLUDED)."""
    extras = PROJECT["optional-dependencies"]
    provided = {
        dependency_floors.requirement_name(requirement)
        for extra in ("dev", "test")
        for requirement in extras[extra]
    }
    requirement = TEST_MODULES[module]
    assert requirement in provided, f"{requirement} is in neither the dev nor the test extra"
    floors_run = os.environ.get("DATASET_RT_DEPENDENCY_FLOORS") == "1"
    if floors_run and requirement in dependency_floors.EXCLUDED:
        pytest.skip(f"{requirement}: {dependency_floors.EXCLUDED[requirement]}")
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{module} is not installed: {result.stderr[-300:]}"


def test_ci_installs_nothing_with_pip_of_its_own_and_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    code = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "pip install" in line or "pip3 install" in line]
    assert "scripts/readme_commands.py README.md" in ci
    assert 'bash -euo pipefail -c "${readme_commands[0]}"' in ci
    assert 'bash -euo pipefail -c "${readme_commands[1]}"' in ci


def test_every_runtime_dependency_has_a_floor_that_ci_pins() -> None:
    pins = [dependency_floors.pinned_floor(d) for d in PROJECT["dependencies"]]
    assert len(pins) == len(PROJECT["dependencies"]) and all("==" in pin for pin in pins)
    with pytest.raises(ValueError, match="must be written 'name>=floor'"):
        dependency_floors.pinned_floor("polars")
    requirements = dependency_floors.floor_requirements(PROJECT)
    assert not [r for r in requirements if dependency_floors.requirement_name(r) == "datasets"]
    assert [r for r in requirements if r.startswith("torch==")]
    # The s3 extra's boto3 at its floor, and not a second, unpinned boto3 from `test`.
    [s3_floor] = PROJECT["optional-dependencies"]["s3"]
    assert [r for r in requirements if r.startswith("boto3")] == [
        dependency_floors.pinned_floor(s3_floor)
    ]


def test_the_distribution_has_a_name_of_its_own_and_the_readme_says_why() -> None:
    # `dataset-rt` on PyPI is dataset-rt 0.2.4's Rust package: the same import name, so
    # this project can never be published under it, and the two cannot coexist.
    assert PROJECT["name"] == "dataset-rt-zig"
    assert PROJECT["scripts"]["dataset-rt"] == "dataset_rt.cli:main"
    assert "pip install dataset-rt-zig" in README
    assert "cannot be installed side by side" in README
