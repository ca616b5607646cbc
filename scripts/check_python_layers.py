"""Checks the import directions of the Python package (docs/architecture.md, "Python layers").

Every module of `dataset_rt` belongs to one layer. A module may import modules of
its own layer and of lower ones; an import of a higher layer is allowed only
inside a function (deferred, so nothing upward runs at import time) and only when
`DEFERRED_UPWARD` lists it with its reason. Imports under `if TYPE_CHECKING:` are
types only and not checked. Only the binding (`_binding/`) imports ctypes or
reaches the library handle (`native.lib`). Prints each violation and exits 1 if
there is any.

    python scripts/check_python_layers.py [PACKAGE_DIR]
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "dataset_rt"
# Lowest first. Layers are matched by module name: a key names a module or a
# sub-package (every module under it).
LAYERS: dict[str, int] = {
    "errors": 0,  # the exception types
    "_records": 0,  # samples, sources and results as plain Python values
    "_config": 0,  # ReaderConfig, WriterConfig, RemoteConfig: validated settings
    "_binding": 1,  # ctypes: the only modules that call the library
    # Transports of remote caches (s3, http): no ctypes; the binding's fetch callback
    # will call them, so they sit beside it, below the machinery that opens datasets.
    "_remote": 1,
    "_core": 2,  # datasets, runtimes, writing, verify: the API's machinery
    "api": 3,  # the public names, re-exported by __init__
    "torch": 4,  # integrations: PyTorch, sources, the command line, the demo
    "_torch_loader": 4,  # to_torch_dataloader, beside the torch integration
    "ray": 4,  # Ray Data: CacheSink and read_cache, on the public API
    "sources": 4,
    "cli": 4,
    "demo": 4,
    "__init__": 5,
    "__main__": 5,
}
# (importer, imported): an upward import made inside a function, with its reason.
DEFERRED_UPWARD: dict[tuple[str, str], str] = {
    ("_config", "_binding.native"): "a compression setting is checked by the core's rule",
    ("_core.dataset", "torch"): "CachedDataset.to_torch_* build the torch adapters on demand",
    ("_core.dataset", "_torch_loader"): "CachedDataset.to_torch_dataloader, on demand",
}
BINDING = "_binding"


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def module_name(package_dir: Path, path: Path) -> str:
    """`_core.dataset` for `<package>/_core/dataset.py`, `_binding` for its `__init__.py`."""
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The layer of a module of the package, by its longest listed prefix."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        rank = LAYERS.get(".".join(parts[:end]))
        if rank is not None:
            return rank
    return None


def _imported_modules(node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The package's modules an import statement loads (relative to the package)."""
    prefix = PACKAGE + "."
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
        return [name[len(prefix) :] for name in names if name.startswith(prefix)]
    if node.level != 0 or node.module is None:
        return []
    if node.module == PACKAGE:
        # `from dataset_rt import x`: x is a module when the package has one of that name,
        # else one of the public names `__init__` re-exports from `api`.
        return [alias.name if alias.name in known else "api" for alias in node.names]
    if not node.module.startswith(prefix):
        return []
    base = node.module[len(prefix) :]
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    return submodules or [base]


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, known: set[str]) -> None:
        self.module = module
        self.path = path
        self.known = known
        self.depth = 0  # functions entered
        self.native_names: set[str] = set()
        self.violations: list[Violation] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_Import(self, node: ast.Import) -> None:
        self._check_ctypes([alias.name for alias in node.names], node.lineno)
        self._check(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is not None:
            self._check_ctypes([node.module], node.lineno)
        for alias in node.names:
            native = node.module == f"{PACKAGE}.{BINDING}" and alias.name == "native"
            if native or node.module == f"{PACKAGE}.{BINDING}.native" and alias.name == "lib":
                self.native_names.add(alias.asname or alias.name)
        self._check(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        value = node.value
        if (
            node.attr == "lib"
            and isinstance(value, ast.Name)
            and value.id in self.native_names
            and not self._in_binding()
        ):
            self._add(node.lineno, f"{self.module} reaches the library handle ({value.id}.lib)")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "lib" and "lib" in self.native_names and not self._in_binding():
            self._add(node.lineno, f"{self.module} reaches the library handle (lib)")

    def _in_binding(self) -> bool:
        return self.module == BINDING or self.module.startswith(BINDING + ".")

    def _check_ctypes(self, names: list[str], line: int) -> None:
        if self._in_binding():
            return
        for name in names:
            if name == "ctypes" or name.startswith("ctypes."):
                self._add(line, f"{self.module} imports {name}: only {BINDING}/ may")

    def _check(self, node: ast.Import | ast.ImportFrom) -> None:
        own = layer_of(self.module)
        for imported in _imported_modules(node, self.known):
            rank = layer_of(imported)
            if own is None or rank is None or rank <= own:
                continue
            if self.depth > 0 and (self.module, imported) in DEFERRED_UPWARD:
                continue
            where = "inside a function, not listed" if self.depth else "at import time"
            self._add(node.lineno, f"{self.module} imports higher layer {imported} ({where})")

    def _add(self, line: int, text: str) -> None:
        self.violations.append(Violation(self.path, line, text))


def check(package_dir: Path) -> list[Violation]:
    """Every violation in the package at `package_dir`."""
    paths = sorted(package_dir.rglob("*.py"))
    known = {module_name(package_dir, path) for path in paths}
    violations: list[Violation] = []
    for path in paths:
        module = module_name(package_dir, path)
        if layer_of(module) is None:
            violations.append(Violation(path, 1, f"{module} belongs to no layer (LAYERS)"))
            continue
        visitor = _Visitor(module, path, known)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        violations.extend(visitor.violations)
    return violations


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    package_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "python" / PACKAGE
    violations = check(package_dir)
    for violation in violations:
        print(violation)
    if violations:
        print(f"{len(violations)} layer violation(s) in {package_dir}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
