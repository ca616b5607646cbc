"""How the package finds and checks its core library (`DATASET_RT_LIBRARY` or the
packaged copy): every way of getting it wrong is an ImportError that names the
path and says what to do, and the file named is the file loaded."""

from __future__ import annotations

import _ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import pythonpath_before_inherited
from dataset_rt._binding import native as _native

IMPORT = "import dataset_rt, dataset_rt._binding.native as n; print('loaded', n.library_path)"


def import_with(library: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Imports the package under test in a child with DATASET_RT_LIBRARY=`library`."""
    package_parent = Path(_native.__file__).parents[2]
    env = {
        **os.environ,
        "DATASET_RT_LIBRARY": library,
        "PYTHONPATH": pythonpath_before_inherited(package_parent),
    }
    command = [sys.executable, "-c", IMPORT]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_a_missing_library_says_where_it_looked_and_what_to_do(tmp_path: Path) -> None:
    done = import_with(str(tmp_path / "nowhere.so"), tmp_path)
    assert done.returncode != 0
    assert "ImportError: the DatasetRT core library is missing" in done.stderr, done.stderr
    assert "nowhere.so" in done.stderr and "unset it" in done.stderr, done.stderr


@pytest.mark.parametrize("kind", ["another-library", "not-a-library"])
def test_a_file_that_is_not_a_datasetrt_library_is_an_import_error(
    tmp_path: Path, kind: str
) -> None:
    if kind == "another-library":
        if getattr(_ctypes, "__file__", None) is None:
            pytest.skip("_ctypes is built into this Python")
        path = Path(_ctypes.__file__)  # a shared object without drt_abi_version
    else:
        path = tmp_path / "libdataset_rt.so"
        path.write_text("not a library\n")
    if path.suffix not in (".so", ".dylib", ".dll", ".pyd"):
        pytest.skip(f"{path.name} is not a shared library here")
    done = import_with(str(path), tmp_path)
    assert done.returncode != 0
    assert "ImportError: cannot load the DatasetRT core library" in done.stderr, done.stderr
    assert str(path) in done.stderr and "unset it" in done.stderr, done.stderr


def test_a_bare_file_name_loads_that_file_from_the_working_directory() -> None:
    # dlopen alone would search the system's library path for a name without a slash.
    library = _native.library_path.resolve()
    done = import_with(library.name, library.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loaded {library}", done.stdout
