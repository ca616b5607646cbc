"""The Zig core's layer rules (scripts/check_layers.py) hold, and the checker catches a breach."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts/check_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_zig_file_imports_a_higher_layer(checker: ModuleType) -> None:
    assert checker.violations(ROOT / "zig") == []


def test_the_checker_reports_an_upward_import_and_a_peer_import(
    checker: ModuleType,
    tmp_path: Path,
) -> None:
    zig = tmp_path / "zig"
    shutil.copytree(ROOT / "zig", zig)
    lz4 = zig / "codec" / "lz4.zig"
    lz4.write_text(lz4.read_text() + '\nconst up = @import("../read/dataset.zig");\n')
    writer = zig / "write" / "cache_writer.zig"
    writer.write_text(writer.read_text() + '\nconst peer = @import("../read/cache_reader.zig");\n')
    (zig / "loose.zig").write_text("")
    found = checker.violations(zig)
    assert any("codec/lz4.zig" in line and "read/dataset.zig" in line for line in found)
    assert any(
        "write/cache_writer.zig" in line and "read/cache_reader.zig" in line for line in found
    )
    assert any(line.startswith("loose.zig") for line in found)
    assert len(found) == 3
