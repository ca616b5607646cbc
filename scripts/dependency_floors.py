"""Prints the requirements of a test environment at the dependency floors: every runtime
dependency of pyproject.toml pinned to its floor (`polars>=1.4` -> `polars==1.4`), and so
is every requirement of the extras the package's own code imports (FLOORED_EXTRAS), then
the `dev` and `test` extras as declared, but for the packages pinned already and those
that cannot be installed beside the floors (EXCLUDED, each with its reason; the tests that
need them skip).

scripts/test.sh installs these into a venv of their own and runs pytest there, so a floor
that no longer works fails CI.

    python scripts/dependency_floors.py [pyproject.toml]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Test packages whose own floors are above ours: installing them would lift a floor.
EXCLUDED = {
    "datasets": "datasets 5.2 needs pyarrow>=24; the HFDatasetSource tests skip without it",
    "ray": "ray[data,train] 2.60 needs pyarrow>=17 and pydantic>=2.5; the Ray tests skip "
    "without it",
}

# Extras whose packages the package itself imports (dataset_rt._remote.s3 imports boto3):
# pinned to their floors like the runtime dependencies.
FLOORED_EXTRAS = ("s3",)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
_FLOOR = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*(?P<version>[0-9][0-9.]*)$")


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read the name of requirement {requirement!r}")
    return match.group(0).lower()


def pinned_floor(dependency: str) -> str:
    """`name==X` for a runtime dependency written `name>=X` (the only form allowed there)."""
    match = _FLOOR.match(dependency.strip())
    if match is None:
        raise ValueError(
            f"runtime dependency {dependency!r} must be written 'name>=floor' so that its "
            "floor can be tested"
        )
    return f"{match.group('name')}=={match.group('version')}"


def floor_requirements(project: dict[str, object]) -> list[str]:
    dependencies = project["dependencies"]
    extras = project["optional-dependencies"]
    assert isinstance(dependencies, list) and isinstance(extras, dict)
    floored = [*dependencies, *(r for extra in FLOORED_EXTRAS for r in extras[extra])]
    lines = [pinned_floor(dependency) for dependency in floored]
    pinned = {requirement_name(line) for line in lines}
    for extra in ("dev", "test"):
        for requirement in extras[extra]:
            name = requirement_name(requirement)
            if name not in EXCLUDED and name not in pinned:
                lines.append(requirement)
    return lines


def main(argv: list[str]) -> int:
    pyproject = Path(argv[1]) if len(argv) > 1 else ROOT / "pyproject.toml"
    with pyproject.open("rb") as file:
        project = tomllib.load(file)["project"]
    for line in floor_requirements(project):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
