"""The run of a fuzzer around the harness (`cache_files.py`): its work directory, the files
of its findings, its seeded inputs, and the coverage feedback it gives atheris.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

FEEDBACK_BUCKETS = 4096
FEEDBACK_GROUP = 64


WORK_PREFIX = "dataset_rt_fuzz_"


def work_directory() -> Path:
    """A fresh directory for the caches, on tmpfs when there is one. libFuzzer ends the
    process without unwinding Python, so directories of fuzzers that are gone go first."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    for stale in parent.glob(f"{WORK_PREFIX}*_*"):
        owner = stale.name[len(WORK_PREFIX) :].split("_")[0]
        if owner.isdigit() and not process_exists(int(owner)):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}_", dir=parent))


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def save_finding(findings: Path, data: bytes, message: str) -> Path:
    path = findings / f"finding-{hashlib.sha1(data).hexdigest()}"
    path.write_bytes(data)
    path.with_suffix(".txt").write_text(message + "\n")
    return path


def random_inputs(seed: int, count: int) -> Iterator[bytes]:
    """A fixed sequence of inputs: random bytes, mostly short, for the harness to decode."""
    rng = random.Random(seed)
    for _ in range(count):
        length = rng.choice((8, 16, 32, 64, 128, 512, 2048))
        yield rng.randbytes(rng.randrange(1, length + 1))


def feedback_function() -> Callable[[int], int]:
    """A function with one branch per bucket, instrumented by atheris: calling it with an
    outcome's bucket tells libFuzzer that the native core took a new path (the core's own
    code is not instrumented). Groups of 64 leaves, as atheris takes long over big functions."""
    import atheris

    lines = ["def feedback(bucket):"]

    def emit(low: int, high: int, indent: str) -> None:
        if high - low == 1:
            lines.append(f"{indent}return {low}")
            return
        middle = (low + high) // 2
        lines.append(f"{indent}if bucket < {middle}:")
        emit(low, middle, indent + "    ")
        lines.append(f"{indent}else:")
        emit(middle, high, indent + "    ")

    emit(0, FEEDBACK_GROUP, "    ")
    source = compile("\n".join(lines), "<feedback>", "exec")
    groups = []
    for _ in range(FEEDBACK_BUCKETS // FEEDBACK_GROUP):
        namespace: dict[str, Any] = {}
        exec(source, namespace)
        groups.append(atheris.instrument_func(namespace["feedback"]))

    def feedback(bucket: int) -> int:
        return groups[bucket // FEEDBACK_GROUP](bucket % FEEDBACK_GROUP)  # type: ignore[no-any-return]

    return feedback
