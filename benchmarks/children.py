"""A measurement process of the benchmark harnesses: run it, read its result.

Every measurement script prints one JSON object on its last stdout line; the
harnesses start it as a fresh process and take that object.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, cast

# A measurement's result: the JSON object a measurement process prints, as json.loads gives
# it. Its fields are the measuring script's (workload.py, training.py, training_peers.py).
Json = dict[str, Any]


class ChildFailed(RuntimeError):
    """A measurement process exited with a non-zero status."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(f"exited {returncode}")
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def tail(self, lines: int) -> str:
        """The last `lines` lines of its stderr (the traceback, usually)."""
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def run_json(command: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Json:
    """Run `command`; its last stdout line parsed as JSON, or ChildFailed."""
    done = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=str(cwd),
    )
    if done.returncode != 0:
        raise ChildFailed(done.returncode, done.stdout, done.stderr)
    return cast(Json, json.loads(done.stdout.strip().splitlines()[-1]))
