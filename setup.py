"""setuptools glue: build the Zig library during build_py; tag the wheel py3-none-<platform>.

Metadata lives in pyproject.toml; the build itself is scripts/build_library.py.
"""

import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
import build_library


class BuildPyWithLibrary(build_py):
    """Builds the library into dataset_rt/_lib/ of the build dir and of the source tree.

    The source-tree copy is what an editable install (`pip install -e`) imports.
    """

    def run(self) -> None:
        build_dir = Path(self.build_lib, "dataset_rt", "_lib")
        destinations = [build_dir]
        if self.editable_mode:  # `pip install -e` imports the source tree's copy
            destinations.append(build_library.PACKAGE_LIBRARY_DIR)
        mode, target = build_library.build_mode(), build_library.zig_target()
        build_library.build_library(destinations, mode, target)
        super().run()


class BinaryDistribution(Distribution):
    """Platform-specific (the bundled library): root_is_pure=False, files go to platlib."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """ctypes loads the library, so one wheel serves every CPython 3 on its platform."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, host_platform = super().get_tag()
        target_platform = build_library.wheel_platform_tag(build_library.zig_target())
        return "py3", "none", target_platform or host_platform


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel},
)
