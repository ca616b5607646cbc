"""The Python package's layer rules (scripts/check_python_layers.py) hold, and the
checker catches each kind of breach."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "dataset_rt"


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    path = ROOT / "scripts" / "check_python_layers.py"
    spec = importlib.util.spec_from_file_location("check_python_layers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def _texts(checker: ModuleType, package: Path) -> list[str]:
    return [violation.text for violation in checker.check(package)]


def test_the_package_keeps_its_layers(checker: ModuleType) -> None:
    assert _texts(checker, PACKAGE) == []


def test_only_the_binding_imports_ctypes(checker: ModuleType) -> None:
    binding = [path for path in (PACKAGE / "_binding").glob("*.py") if "ctypes" in path.read_text()]
    assert binding, "the binding uses ctypes"
    others = [
        path
        for path in PACKAGE.rglob("*.py")
        if "_binding" not in path.parts and "import ctypes" in path.read_text()
    ]
    assert others == []


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_checker_reports_each_breach(checker: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "dataset_rt"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("_lib", "__pycache__"))
    # Upward at import time: the binding importing the core.
    _append(package / "_binding" / "stream_state.py", "\nfrom dataset_rt._core import dataset\n")
    # Upward inside a function, not listed.
    _append(package / "_core" / "verify.py", "\ndef _up():\n    from dataset_rt import cli\n")
    # ctypes and the library handle outside the binding.
    _append(package / "_core" / "progress.py", "\nimport ctypes\n")
    _append(
        package / "_core" / "migration.py",
        "\ndef _raw():\n    return _native.lib.drt_abi_version()\n",
    )
    (package / "_loose.py").write_text("")
    found = _texts(checker, package)
    assert "_binding.stream_state imports higher layer _core.dataset (at import time)" in found
    assert "_core.verify imports higher layer cli (inside a function, not listed)" in found
    assert "_core.progress imports ctypes: only _binding/ may" in found
    assert "_core.migration reaches the library handle (_native.lib)" in found
    assert "_loose belongs to no layer (LAYERS)" in found
    assert len(found) == 5


def test_a_listed_deferred_import_is_allowed_only_inside_a_function(
    checker: ModuleType, tmp_path: Path
) -> None:
    package = tmp_path / "dataset_rt"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("_lib", "__pycache__"))
    _append(package / "_core" / "dataset.py", "\nimport dataset_rt.torch\n")
    found = _texts(checker, package)
    assert found == ["_core.dataset imports higher layer torch (at import time)"]
