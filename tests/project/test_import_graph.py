"""The package's modules import each other in one direction: no cycle, counting
every import (type-only ones under TYPE_CHECKING and those inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "dataset_rt"


def module_name(path: Path) -> str:
    """`_core.dataset` for `_core/dataset.py`; `_binding` for `_binding/__init__.py`."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """The dataset_rt modules `path` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "dataset_rt":
                found.update(alias.name for alias in node.names if alias.name in MODULES)
            elif node.module.startswith("dataset_rt."):
                base = node.module.removeprefix("dataset_rt.")
                subs = {f"{base}.{alias.name}" for alias in node.names}
                found.update(subs & MODULES.keys() or {base})
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dataset_rt."):
                    found.add(alias.name.removeprefix("dataset_rt."))
    found.discard(module_name(path))
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: imports_of(path) for name, path in MODULES.items() if name != "__init__"}


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


# The native boundary: the library and its signatures, a cache's description, the
# functions over shard files, the partitions' commit, the read path's handle owners,
# the remote fetch hook, the write path's.
BOUNDARY = [
    "_binding.cache_info",
    "_binding.native",
    "_binding.open_shards",
    "_binding.partitions",
    "_binding.reader",
    "_binding.remote",
    "_binding.writer",
]


def test_only_the_native_boundary_calls_the_library() -> None:
    callers = sorted(name for name, path in MODULES.items() if "lib.drt_" in path.read_text())
    assert callers == BOUNDARY


def test_the_native_boundary_imports_no_public_module_above_it() -> None:
    graph = import_graph()
    above = {name for name in MODULES if name.startswith(("_core", "ray"))}
    above |= {"torch", "api", "demo", "cli", "sources"}
    for module in BOUNDARY:
        assert not graph[module] & above, (module, graph[module] & above)


def test_the_errors_module_imports_nothing_of_the_package() -> None:
    # Every module may raise its classes; it can import none of them back.
    assert import_graph()["errors"] == set()
