"""The peers' pinned versions and the virtual environments they run in.

Every peer the benchmarks compare against is pinned here, and nowhere else.
Each peer gets a virtual environment of its own, created from PyPI on first
use under ``~/.cache/dataset_rt_bench/`` and reused while it still imports
the pinned versions. torch is pinned too: an unpinned install pulls the
multi-GB CUDA build; 2.13.0 is a CPU build on this machine's package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

CACHE_DIR = Path.home() / ".cache" / "dataset_rt_bench"
TORCH = "torch==2.13.0"

# distribution -> pinned version, for every peer library.
PINS = {
    "dataset-rt": "0.2.4",  # run.py's peer (no torch: not made by `requirements`)
    "litdata": "0.2.76",
    "mosaicml-streaming": "0.13.0",
    "datasets": "5.2.0",
    "webdataset": "1.0.2",
}

# system (as training_peers.py names it) -> (label, distribution)
SYSTEMS = {
    "litdata": ("LitData", "litdata"),
    "mosaic": ("MosaicML Streaming", "mosaicml-streaming"),
    "hf": ("Hugging Face datasets", "datasets"),
    "wds": ("WebDataset", "webdataset"),
}


def requirements(*distributions: str) -> tuple[str, ...]:
    """pip requirements for `distributions` at their pins, with the pinned torch."""
    return (TORCH, *(f"{name}=={PINS[name]}" for name in distributions))


def system_venv(system: str) -> Path:
    """The venv of one peer: its distribution and version in the folder name."""
    distribution = SYSTEMS[system][1]
    return CACHE_DIR / f"{distribution}-{PINS[distribution]}"


def clean_environment() -> dict[str, str]:
    """The environment for a peer process: nothing of this project's imports."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "DATASET_RT_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def installed_versions(python: Path, distributions: tuple[str, ...]) -> dict[str, str] | None:
    """distribution -> version as `python` imports them, or None if any is missing."""
    if not python.exists():
        return None
    probe = (
        "import importlib.metadata as m, json; "
        f"print(json.dumps({{d: m.version(d) for d in {distributions!r}}}))"
    )
    done = subprocess.run(
        [str(python), "-c", probe],
        env=clean_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    return cast(dict[str, str], json.loads(done.stdout)) if done.returncode == 0 else None


def ensure_venv(
    venv: Path,
    wanted: tuple[str, ...],
    distributions: tuple[str, ...],
    log: Callable[[str], None],
) -> Path:
    """The interpreter of `venv`, created with the requirements `wanted` unless it
    already imports `distributions` at the versions `wanted` pins."""
    python = venv / "bin" / "python"
    pins = dict(requirement.split("==", 1) for requirement in wanted if "==" in requirement)
    found = installed_versions(python, distributions)
    if found is not None and all(
        found[name].split("+")[0] == pins.get(name, found[name]).split("+")[0] for name in found
    ):
        log(f"reusing {venv}")
        return python
    log(f"creating {venv} with {' '.join(wanted)}")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *wanted],
        env=clean_environment(),
        check=True,
    )
    if installed_versions(python, distributions) is None:
        raise RuntimeError(f"{venv} does not import {distributions} after the install")
    return python


def ensure_system(system: str, log: Callable[[str], None]) -> Path:
    """The interpreter of one peer's own venv (created on first use)."""
    distribution = SYSTEMS[system][1]
    return ensure_venv(
        system_venv(system), requirements(distribution), ("torch", distribution), log
    )


if __name__ == "__main__":
    for name in sys.argv[1:] or list(SYSTEMS):
        print(ensure_system(name, lambda message: print(message, file=sys.stderr)))
