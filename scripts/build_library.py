"""Build the Zig core and copy the shared library into the Python package.

The one implementation of "build the library", used by setup.py (pip install, pip wheel,
pip install -e) and by the justfile:

    python scripts/build_library.py                  # ReleaseFast into python/dataset_rt/_lib/
    python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe

Environment: DATASET_RT_OPTIMIZE (default build mode), DATASET_RT_ZIG_TARGET (Zig target,
for cross builds). Progress goes to stderr; stdout is only the path of each copied library,
so a shell can capture it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_LIBRARY_DIR = ROOT / "python" / "dataset_rt" / "_lib"
MODES = ("Debug", "ReleaseSafe", "ReleaseFast", "ReleaseSmall")
# Where `zig build --prefix OUT` puts the library, by target OS.
BUILT_LIBRARY_PATHS = {
    "linux": "lib/libdataset_rt.so",
    "macos": "lib/libdataset_rt.dylib",
    "windows": "bin/dataset_rt.dll",
}
LIBRARY_NAMES = tuple(Path(path).name for path in BUILT_LIBRARY_PATHS.values())
# The Zig targets a release ships a wheel for (scripts/build_wheels.py); scripts/test.sh
# cross-compiles the library for each of them but the host's.
WHEEL_TARGETS = (
    "x86_64-linux-gnu.2.17",
    "aarch64-linux-gnu.2.17",
    "x86_64-macos.11.0",
    "aarch64-macos.11.0",
    "x86_64-windows",
)


def log(message: str) -> None:
    print(f"[dataset_rt] {message}", file=sys.stderr, flush=True)


def build_mode() -> str:
    """The Zig optimize mode: $DATASET_RT_OPTIMIZE, else ReleaseFast."""
    mode = os.environ.get("DATASET_RT_OPTIMIZE") or "ReleaseFast"
    if mode not in MODES:
        raise ValueError(f"DATASET_RT_OPTIMIZE must be one of {', '.join(MODES)}; found {mode!r}")
    return mode


def zig_target() -> str | None:
    """The Zig target: $DATASET_RT_ZIG_TARGET, else glibc 2.17 on Linux, else native."""
    target = os.environ.get("DATASET_RT_ZIG_TARGET")
    if target:
        return target
    # Zig's native target links against the host's glibc (2.36 here), which older distros lack;
    # symbols from glibc 2.17 load on every manylinux2014 system.
    machine = platform.machine().lower()
    is_glibc = platform.libc_ver()[0] == "glibc"
    if sys.platform == "linux" and machine in ("x86_64", "aarch64") and is_glibc:
        return f"{machine}-linux-gnu.2.17"
    return None


def wheel_platform_tag(target: str | None) -> str | None:
    """The wheel platform tag for a Zig target, or None to use the host's tag."""
    if target is None:
        return None
    arch, _, rest = target.partition("-")
    os_name, _, version = rest.partition(".")
    version_tag = version.replace(".", "_")
    if os_name == "linux-gnu" and version:
        return f"manylinux_{version_tag}_{arch}"
    if os_name == "macos" and version:
        return f"macosx_{version_tag}_{'arm64' if arch == 'aarch64' else arch}"
    if os_name.startswith("windows") and arch in ("x86_64", "aarch64"):
        return "win_amd64" if arch == "x86_64" else "win_arm64"
    raise ValueError(
        f"no wheel platform tag for Zig target {target!r}; use a versioned target such as "
        "x86_64-linux-gnu.2.17, aarch64-macos.11.0 or x86_64-windows"
    )


def library_name(target: str) -> str:
    """The file name of the library `zig build` makes for a Zig target (arch-os[.version][-abi])."""
    os_name = target.split("-")[1].split(".")[0]
    return Path(BUILT_LIBRARY_PATHS[os_name]).name


def build_library(
    destinations: list[Path], mode: str, target: str | None, strip: bool = True
) -> list[Path]:
    """Run `zig build` into a temporary prefix and copy the library into each destination."""
    strip_flag = "true" if strip else "false"
    zig = [sys.executable, "-m", "ziglang"]
    command = [*zig, "build", f"-Doptimize={mode}", f"-Dstrip={strip_flag}"]
    if target:
        command.append(f"-Dtarget={target}")
    log(f"building the Zig library: mode={mode} target={target or 'native'} strip={strip}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dataset_rt-zig-") as prefix:
        # Zig's own stdout goes to stderr too: our stdout carries only the resulting paths.
        result = subprocess.run([*command, "--prefix", prefix], cwd=ROOT, stdout=2)
        if result.returncode != 0:
            status = result.returncode
            raise RuntimeError(f"zig build failed (exit {status}): {shlex.join(command)}")
        built = [
            Path(prefix, path)
            for path in BUILT_LIBRARY_PATHS.values()
            if Path(prefix, path).is_file()
        ]
        if len(built) != 1:
            raise RuntimeError(f"expected one library under {prefix}, found {built}")
        copies = [copy_library(built[0], Path(destination)) for destination in destinations]
    log(f"built {built[0].name} in {time.monotonic() - started:.1f} s")
    return copies


def copy_library(library: Path, destination: Path) -> Path:
    destination.mkdir(parents=True, exist_ok=True)
    for name in LIBRARY_NAMES:  # a library left by a build for another OS would ship too
        (destination / name).unlink(missing_ok=True)
    return Path(shutil.copy2(library, destination / library.name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode", choices=MODES, help="default: $DATASET_RT_OPTIMIZE, else ReleaseFast"
    )
    parser.add_argument("--dest", type=Path, default=PACKAGE_LIBRARY_DIR, help="output directory")
    parser.add_argument("--no-strip", action="store_true", help="keep debug info (stack traces)")
    arguments = parser.parse_args()
    try:
        mode = arguments.mode or build_mode()
        for path in build_library([arguments.dest], mode, zig_target(), not arguments.no_strip):
            print(path.resolve())
    except (ValueError, RuntimeError) as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
