"""Build the wheel of every platform from this one host (README, "Platforms").

The Zig of the ziglang package cross-compiles the core for each target and setup.py
tags each wheel py3-none-<its platform>; each wheel is then checked by
scripts/check_wheels.py (its tag, exactly its own library, glibc 2.17 on Linux, the
package files).

    python scripts/build_wheels.py [OUT_DIR]      (default: dist/)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import build_library
import check_wheels


def build_wheel(target: str, out: Path) -> Path:
    """Builds the wheel of `target` into `out` (replacing one built before); its path."""
    tag = build_library.wheel_platform_tag(target)
    for earlier in out.glob(f"*-{tag}.whl"):
        earlier.unlink()
    build_library.log(f"building the wheel for {target}")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), "."],
        cwd=build_library.ROOT,
        env={**os.environ, "DATASET_RT_ZIG_TARGET": target},
        check=True,
    )
    [wheel] = out.glob(f"*-{tag}.whl")
    return wheel


def check_wheel(wheel: Path, target: str) -> None:
    _summary, problems = check_wheels.check_wheel(wheel, target)
    if problems:
        sys.exit(f"error: {wheel}:\n  " + "\n  ".join(problems))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "dist").resolve()
    out.mkdir(parents=True, exist_ok=True)
    for target in build_library.WHEEL_TARGETS:
        started = time.monotonic()
        wheel = build_wheel(target, out)
        build_library.log(f"built {wheel.name} in {time.monotonic() - started:.0f} s")
        check_wheel(wheel, target)
        print(wheel)
    shutil.rmtree(build_library.ROOT / "build", ignore_errors=True)  # pip's in-tree build


if __name__ == "__main__":
    main()
