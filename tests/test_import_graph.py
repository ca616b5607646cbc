"""The package's modules import each other in one direction: no cycle, counting
every import (type-only ones under TYPE_CHECKING and those inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "dataset_rt"


def imports_of(path: Path) -> set[str]:
    """The dataset_rt modules `path` imports, anywhere in the file."""
    found: set[str] = set()
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "dataset_rt":
                found.update(alias.name for alias in node.names if alias.name in modules)
            elif node.module.startswith("dataset_rt."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dataset_rt."):
                    found.add(alias.name.split(".")[1])
    found.discard(path.stem)
    return found


def import_graph() -> dict[str, set[str]]:
    return {path.stem: imports_of(path) for path in PACKAGE.glob("*.py") if path.stem != "__init__"}


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = cycle_in(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None


# The native boundary: the library and its signatures, the read path's handle
# owners, the write path's.
BOUNDARY = ["_native.py", "_reader.py", "_writer.py"]


def test_only_the_native_boundary_calls_the_library() -> None:
    callers = sorted(path.name for path in PACKAGE.glob("*.py") if "lib.drt_" in path.read_text())
    assert callers == BOUNDARY


def test_the_native_boundary_imports_no_public_module_above_it() -> None:
    graph = import_graph()
    above = {"_dataset", "_runtime", "_writing", "_metadata_frame", "torch", "api", "demo"}
    for module in (name.removesuffix(".py") for name in BOUNDARY):
        assert not graph[module] & above, (module, graph[module] & above)


def test_the_errors_module_imports_nothing_of_the_package() -> None:
    # Every module may raise its classes; it can import none of them back.
    assert import_graph()["errors"] == set()
