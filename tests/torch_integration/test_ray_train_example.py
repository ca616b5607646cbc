"""examples/ray_train.py (issue 43): Ray Train's TorchTrainer with 2 workers, stopped
after a few steps and resumed from the run's checkpoint by a second fit(). The example
checks the resume itself (it exits 1 when a rank's samples differ from an uninterrupted
run); these tests run it in a subprocess and check its output, what it leaves in the
run's storage, and that it leaves no Ray process or directory behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray.train", reason="examples/ray_train.py needs ray[train]")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ray_train.py"
# --quick: 1,024 samples, batch 16 per rank on 2 ranks, 64 steps over 2 epochs; the first
# fit() stops after step 16 (half the first epoch).
SAMPLES, BATCH, RANKS, TOTAL_STEPS, STOP_AT = 1024, 16, 2, 64, 16


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: the example puts Ray's directory in it
    (through TMPDIR), and Ray's socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_example(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def processes_naming(text: str) -> list[str]:
    """The command lines of the running processes that contain `text`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if text in args:
            found.append(args)
    return found


def test_the_example_stops_resumes_exactly_and_cleans_up(short_tmp: Path) -> None:
    work = short_tmp / "work"
    done = run_example("--quick", "--work-dir", str(work), tmp=short_tmp)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    out = done.stdout
    per_rank = SAMPLES // RANKS * 2  # two epochs
    before = STOP_AT * BATCH
    for rank in range(RANKS):
        assert (
            f"rank {rank}: {before} samples before the stop + {per_rank - before} after the "
            f"resume = {per_rank}; uninterrupted run: {per_rank} (identical sequence)"
        ) in out
    assert f"stopped after step {STOP_AT} " in out
    assert f"resumed at step {STOP_AT} from the run's latest checkpoint" in out
    assert f"ended at step {TOTAL_STEPS} " in out
    assert f"exact resume: all {RANKS * per_rank} samples seen" in out
    losses = re.findall(r"loss (\d+\.\d+) -> (\d+\.\d+)", out)
    assert len(losses) == 2 and float(losses[1][1]) < float(losses[0][0]), out

    # The run's storage (kept: --work-dir was given): a checkpoint per fit(), each with the
    # training state and every rank's samples; the first one's loader state is the global
    # stream position after step 16 of epoch 0, the same whichever rank saved it.
    run = work / "ray_results" / "dataset_rt_ray_train"
    checkpoints = [run / f"step_{STOP_AT:06d}", run / f"step_{TOTAL_STEPS:06d}"]
    assert {p.name for p in run.iterdir() if p.is_dir()} == {p.name for p in checkpoints}
    for checkpoint, count in zip(checkpoints, (before, per_rank - before), strict=True):
        assert {p.name for p in checkpoint.iterdir()} == {
            "state.pt",
            *(f"seen-rank{rank}.json" for rank in range(RANKS)),
        }
        for rank in range(RANKS):
            seen = json.loads((checkpoint / f"seen-rank{rank}.json").read_text())
            assert len(seen) == count
    state = torch.load(checkpoints[0] / "state.pt", weights_only=False)
    assert state["step"] == STOP_AT
    assert state["loader"]["epoch"] == 0
    assert state["loader"]["position"] == STOP_AT * RANKS * BATCH

    # Ray shut down: its directory (ray-*, under TMPDIR) removed, none of its processes
    # left. (torch may leave its own torchinductor_<user> cache directory there.)
    assert "work" in [p.name for p in short_tmp.iterdir()]
    assert list(short_tmp.glob("ray-*")) == []
    deadline = time.monotonic() + 15
    while processes_naming(str(short_tmp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_naming(str(short_tmp)) == []


def test_a_work_dir_that_is_not_empty_is_refused(short_tmp: Path) -> None:
    (short_tmp / "left-over").write_text("")
    done = run_example("--quick", "--work-dir", str(short_tmp), tmp=short_tmp)
    assert done.returncode == 2
    assert f"error: --work-dir {short_tmp} is not empty" in done.stderr
    assert [p.name for p in short_tmp.iterdir()] == ["left-over"]
