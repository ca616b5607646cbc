"""The peers' virtual environments, and tests/helpers/peer_driver.py run in them or here.

A peer (`dataset-rt==0.2.4` or `==0.4.8` from PyPI, Rust/PyO3 packages with this
project's import name) lives in a virtual environment of its own, created once and
reused while it works: ``$DATASET_RT_PEER_VENV`` (0.2.4) or ``$DATASET_RT_PEER_048_VENV``
(0.4.8), else ``~/.cache/dataset_rt_tests/peer-<version>``. When PyPI cannot be reached
to create one, the test asking for it is skipped with a message saying so.
tests/test_interop_peer*.py and tests/interop/test_dropin_messages.py use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dataset_rt
from conftest import pythonpath_before_inherited

PEER_VERSION = "0.2.4"
VENV_ENV_VAR = "DATASET_RT_PEER_VENV"
# The environment variable naming each peer version's virtual environment.
VENV_ENV_VARS = {PEER_VERSION: VENV_ENV_VAR, "0.4.8": "DATASET_RT_PEER_048_VENV"}
VENV_CREATE_TIMEOUT = 300
PIP_INSTALL_TIMEOUT = 900
DRIVER_TIMEOUT = 300
DRIVER = Path(__file__).with_name("peer_driver.py")

# Substrings of pip's output that mean the package index could not be reached.
NETWORK_FAILURE_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Max retries exceeded",
    "connection broken by",
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "Connection reset",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Read timed out",
    "ProxyError",
    "SSLError",
    "Could not fetch URL",
    "HTTP error",
)


def pip_could_not_reach_index(output: str) -> bool:
    """Whether a failed ``pip install`` failed only for want of the package index."""
    return any(marker in output for marker in NETWORK_FAILURE_MARKERS)


def default_venv_dir(version: str = PEER_VERSION) -> Path:
    configured = os.environ.get(VENV_ENV_VARS[version])
    if configured:
        return Path(configured).expanduser().absolute()
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "dataset_rt_tests" / f"peer-{version}"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def peer_env() -> dict[str, str]:
    """The environment for the peer's interpreter: nothing that makes it import this project."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "DATASET_RT_LIBRARY"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


PROBE = (
    "import json, importlib.metadata as m, dataset_rt\n"
    "print(json.dumps({'file': dataset_rt.__file__, 'version': m.version('dataset-rt')}))\n"
)


def probe_peer(venv: Path, version: str = PEER_VERSION) -> str | None:
    """None when `venv` holds a working dataset-rt of `version`, else why not."""
    python = venv_python(venv)
    if not python.exists():
        return f"{python} does not exist"
    try:
        completed = subprocess.run(
            [str(python), "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            env=peer_env(),
            cwd=venv,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"probe failed: {error}"
    if completed.returncode != 0:
        return f"import dataset_rt failed: {completed.stderr.strip()[-2000:]}"
    try:
        found = json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"unexpected probe output: {completed.stdout!r}"
    if found["version"] != version:
        return f"installed dataset-rt is {found['version']}, not {version}"
    if not Path(found["file"]).resolve().is_relative_to(venv.resolve()):
        return f"dataset_rt imported from {found['file']}, outside {venv}"
    return None


@contextlib.contextmanager
def venv_lock(venv: Path) -> Iterator[None]:
    """Serialize creation between concurrent test runs (e.g. pytest-xdist workers)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.parent / f"{venv.name}.lock"
    with open(lock_path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock, creation is still checked by the probe
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def as_text(output: str | bytes | None) -> str:
    """What a timed-out process wrote (bytes when it was not yet decoded)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def run_step(command: list[str], timeout: int, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=peer_env()
        )
    except subprocess.TimeoutExpired as error:
        output = as_text(error.stdout) + as_text(error.stderr)
        pytest.fail(
            f"{what} did not finish within {timeout} s: {' '.join(command)}\n{output[-3000:]}"
        )


def create_peer_venv(venv: Path, version: str = PEER_VERSION) -> None:
    requirement = f"dataset-rt=={version}"
    if venv.exists():
        shutil.rmtree(venv)
    created = run_step(
        [sys.executable, "-m", "venv", str(venv)],
        VENV_CREATE_TIMEOUT,
        "creating the peer's virtual environment",
    )
    if created.returncode != 0:
        pytest.fail(
            f"could not create a virtual environment for {requirement} at {venv} "
            f"with {sys.executable}:\n"
            f"{created.stdout}{created.stderr}"
        )
    command = [
        str(venv_python(venv)),
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--timeout",
        "30",
        "--retries",
        "2",
        requirement,
    ]
    installed = run_step(command, PIP_INSTALL_TIMEOUT, f"pip install {requirement}")
    if installed.returncode != 0:
        output = f"{installed.stdout}\n{installed.stderr}"
        shutil.rmtree(venv, ignore_errors=True)
        if pip_could_not_reach_index(output):
            said = [
                line.strip()[:300]
                for line in output.splitlines()
                if "ERROR" in line or pip_could_not_reach_index(line)
            ]
            pytest.skip(
                f"PyPI could not be reached to install {requirement}, so the "
                "interoperability tests against it were NOT run. pip said: " + " | ".join(said[-3:])
            )
        pytest.fail(f"pip install {requirement} failed (not a network failure):\n{output[-4000:]}")


def peer_venv_python(version: str) -> Path:
    """The interpreter of a virtual environment with dataset-rt==`version`, created once
    (skipping the test when PyPI cannot be reached), then reused."""
    venv = default_venv_dir(version)
    with venv_lock(venv):
        if probe_peer(venv, version) is not None:
            create_peer_venv(venv, version)
            problem = probe_peer(venv, version)
            if problem is not None:
                pytest.fail(
                    f"dataset-rt=={version} was installed into {venv} but does not work: {problem}"
                )
    return venv_python(venv)


def run_driver(
    python: Path | str, plan: list[dict[str, Any]], work: Path, env: dict[str, str]
) -> list[Any]:
    """Run peer_driver.py on `plan` (a JSON list of steps, see its doc) under `python`, in
    `work`; the driver's results, one per step."""
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    out_path = work / "out.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    out_path.unlink(missing_ok=True)
    try:
        completed = subprocess.run(
            [str(python), str(DRIVER), str(plan_path), str(out_path)],
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT,
            env=env,
            cwd=work,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"peer_driver.py under {python} did not finish within {DRIVER_TIMEOUT} s")
    assert completed.returncode == 0, (
        f"peer_driver.py under {python} failed (exit {completed.returncode}):\n"
        f"{completed.stderr[-6000:]}"
    )
    results: list[Any] = json.loads(out_path.read_text(encoding="utf-8"))  # one per step
    return results


def run_peer(peer_python: Path, plan: list[dict[str, Any]], work: Path) -> list[Any]:
    """The driver's results under a peer's interpreter, which must not import this project."""
    return run_driver(peer_python, plan, work, peer_env())


def run_ours_subprocess(plan: list[dict[str, Any]], work: Path) -> list[Any]:
    """The same driver under this interpreter, importing the dataset_rt this test imports."""
    env = dict(os.environ)
    package_parent = Path(dataset_rt.__file__).resolve().parent.parent
    env["PYTHONPATH"] = pythonpath_before_inherited(package_parent)
    return run_driver(sys.executable, plan, work, env)
