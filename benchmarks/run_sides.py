"""The two sides of `run.py`: their interpreters and environments, and the runner of
their measurement processes.

"Ours" is the interpreter running the harness with this project's `dataset_rt`
importable; "peer" is dataset-rt 0.2.4 from PyPI in a virtual environment of its own
(`ensure_peer`). Every measurement is one fresh process of ``benchmarks/workload.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import children  # this directory's runner of measurement processes
import peer_venvs  # this directory's peer pins and their venvs
import workload  # this directory's measurement script, run as a child per figure
from children import Json
from run_plan import Spec

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
PEER_VERSION = peer_venvs.PINS["dataset-rt"]
PEER_REQUIREMENT = f"dataset-rt=={PEER_VERSION}"
DEFAULT_PEER_VENV = Path.home() / ".cache" / "dataset_rt_bench" / f"peer-{PEER_VERSION}"
SIDES = ("ours", "peer")
CHILD_TIMEOUT = 3600


def log(message: str) -> None:
    """A progress line of the run, on stderr."""
    stamp = time.strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- environments


def side_environment(side: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if side == "peer":
        # The peer must import its own dataset_rt, never this project's.
        for name in ("PYTHONPATH", "DATASET_RT_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME"):
            env.pop(name, None)
        env["PYTHONNOUSERSITE"] = "1"
    else:
        # Children run in benchmarks/: relative paths given to the harness
        # (PYTHONPATH=python, DATASET_RT_LIBRARY=zig-out/...) must keep their meaning.
        if env.get("PYTHONPATH"):
            entries = env["PYTHONPATH"].split(os.pathsep)
            env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e) if e else e for e in entries)
        if env.get("DATASET_RT_LIBRARY"):
            env["DATASET_RT_LIBRARY"] = os.path.abspath(env["DATASET_RT_LIBRARY"])
    return env


def peer_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = (
        "import importlib.metadata as m, dataset_rt, dataset_rt._dataset_rt; "
        "print(m.version('dataset-rt'))"
    )
    done = subprocess.run(
        [str(python), "-c", probe],
        env=side_environment("peer"),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_peer(explicit: str | None) -> Path:
    """The peer interpreter: given, or a reused/created venv with dataset-rt==0.2.4."""
    if explicit:
        python = Path(explicit)
        version = peer_version(python)
        if version is None:
            raise SystemExit(f"--peer-python {python} cannot import dataset_rt")
        if version != PEER_VERSION:
            log(f"warning: peer interpreter has dataset-rt {version}, not {PEER_VERSION}")
        return python
    venv = Path(os.environ.get("DATASET_RT_PEER_VENV", DEFAULT_PEER_VENV))
    python = venv / "bin" / "python"
    if peer_version(python) == PEER_VERSION:
        log(f"peer: reusing {venv}")
        return python
    peer_venvs.ensure_venv(
        venv, (PEER_REQUIREMENT,), ("dataset-rt",), lambda message: log(f"peer: {message}")
    )
    if peer_version(python) != PEER_VERSION:
        raise SystemExit(f"could not install {PEER_REQUIREMENT} into {venv}")
    return python


def check_ours() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import dataset_rt, dataset_rt._binding.native; print(dataset_rt.__file__)",
        ],
        env=side_environment("ours"),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            "this project's dataset_rt is not importable by the current interpreter "
            "(use the project venv or PYTHONPATH=python):\n" + done.stderr
        )


# --------------------------------------------------------------------------- running


class Runner:
    """Starts one side's measurement processes and keeps what the report says of them: the
    load at each start, the steal of each timed pass, each side's implementation."""

    def __init__(self, pythons: dict[str, Path], workers: int, write_settle: float) -> None:
        self.pythons = pythons
        self.workers = workers
        self.write_settle = write_settle
        self.loads: list[float] = []
        self.steals: list[float] = []
        self.implementations: dict[str, Json] = {}

    def child(self, side: str, phase: str, *arguments: str) -> Json:
        """One `workload.py` process of `side`: its result, with the load at its start."""
        load = os.getloadavg()[0]
        self.loads.append(load)
        command = [
            str(self.pythons[side]),
            str(WORKLOAD),
            phase,
            "--workers",
            str(self.workers),
            *arguments,
        ]
        if phase not in workload.MACHINE_PHASES:
            command += ["--expect", side]
        try:
            result = children.run_json(command, side_environment(side), HERE, CHILD_TIMEOUT)
        except children.ChildFailed as failed:
            raise SystemExit(
                f"{side} {phase} failed ({failed.returncode}):\n{failed.stderr}\n{failed.stdout}"
            ) from None
        result["load_at_start"] = load
        self.steals += [f for f in result.get("pass_steal_fractions", []) if f is not None]
        if result.get("implementation"):
            self.implementations.setdefault(side, result["implementation"])
        return result


def steal_note(result: Json) -> str:
    """ ", steal N %": the most CPU time the hypervisor took from this machine
    during one of a child's timed passes, where it reports it (old results and
    the peer-only phases do not)."""
    fractions = [f for f in result.get("pass_steal_fractions", []) if f is not None]
    return f", steal {max(fractions):.0%}" if fractions else ""


def write_child(runner: Runner, side: str, spec: Spec, base_dir: Path) -> Json:
    """One write process of workload `spec` into `base_dir`, after a rest."""
    count, size, compression, kind, _ = spec
    time.sleep(runner.write_settle)
    return runner.child(
        side,
        "write",
        "--count", str(count),
        "--size", str(size),
        "--compression", compression,
        "--payload-kind", kind,
        "--base-dir", str(base_dir),
    )  # fmt: skip
