"""Every public name has a docstring with an example, and every example runs.

The public names: `dataset_rt.__all__`, `dataset_rt.errors.__all__`,
`dataset_rt.torch.__all__` and `dataset_rt.sources.__all__`, with each exported
class's own public methods and properties. Their examples are doctests (``>>>``),
run against the objects docs/reference/ names: ``runtime`` (a `DatasetRuntime`),
``cache_path`` (a cache of 100 `Squares` samples) and ``dataset`` (that cache
opened with ``ReaderConfig(seed=0)``, fresh for each docstring), with ``pa``
(pyarrow), ``pl`` (polars) and the modules' exported names imported, in a
scratch working directory.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars
import pyarrow  # type: ignore[import-untyped]
import pytest

import dataset_rt
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, ReaderConfig

MODULES = ["dataset_rt", "dataset_rt.errors", "dataset_rt.torch", "dataset_rt.sources"]


class Squares:
    """The examples' source: sample i has the payload str(i * i) and the label i % 10."""

    name = "squares"

    def __init__(self, count: int = 100) -> None:
        self.count = count

    def __iter__(self) -> Iterator[CacheInput]:
        for i in range(self.count):
            yield CacheInput(data=str(i * i).encode(), metadata={"i": i, "label": i % 10})


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as error:  # torch is optional
        pytest.skip(f"{name}: {error}")


def public_objects() -> list[tuple[str, str, object]]:
    """(module, qualified name, object) of every public name, classes' members included."""
    found: list[tuple[str, str, object]] = []
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # skipped as a whole by the test that imports it
        for name in module.__all__:
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue  # type aliases
            if getattr(value, "__module__", "").split(".")[0] != "dataset_rt":
                continue
            found.append((module_name, name, value))
            if inspect.isclass(value):
                for member, member_value in vars(value).items():
                    if member.startswith("_") or member in getattr(value, "_fields", ()):
                        continue
                    if isinstance(
                        member_value, (property, staticmethod, classmethod)
                    ) or inspect.isfunction(member_value):
                        found.append((module_name, f"{name}.{member}", member_value))
    return found


def _docstring(value: object) -> str:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return inspect.getdoc(value) or ""


def test_every_public_name_has_a_docstring_with_an_example() -> None:
    objects = public_objects()
    assert len(objects) > 40
    missing = [
        f"{module}.{name}" for module, name, value in objects if ">>>" not in _docstring(value)
    ]
    assert not missing, (
        "public names without an example (>>> lines) in their docstring:\n" + "\n".join(missing)
    )


@pytest.fixture(scope="module")
def example_cache(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DatasetRuntime, Path]]:
    runtime = DatasetRuntime(num_workers=2)
    [result] = runtime.write_cache(Squares(), tmp_path_factory.mktemp("examples") / "caches")
    assert isinstance(result, CacheWriteSuccess), result
    yield runtime, result.path
    runtime.close()


def _examples() -> list[Any]:
    return [
        pytest.param(module, name, value, id=f"{module}.{name}")
        for module, name, value in public_objects()
    ]


@pytest.mark.parametrize(("module_name", "name", "value"), _examples())
def test_the_example_runs(
    module_name: str,
    name: str,
    value: object,
    example_cache: tuple[DatasetRuntime, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = _module(module_name)
    if name.startswith("HFDatasetSource"):
        pytest.importorskip("datasets", reason="HFDatasetSource's examples need `datasets`")
    if "torch" in name:  # CachedDataset.to_torch_*: torch is not a dependency
        pytest.importorskip("torch", reason=f"{name}'s example needs torch")
    docstring = _docstring(value)
    if ">>>" not in docstring:
        pytest.fail(f"{module_name}.{name} has no example")
    runtime, cache_path = example_cache
    monkeypatch.chdir(tmp_path)
    globs = {
        "dataset_rt": dataset_rt,
        "pa": pyarrow,
        "pl": polars,
        "runtime": runtime,
        "cache_path": cache_path,
        "dataset": runtime.cached_dataset([cache_path], reader_config=ReaderConfig(seed=0)),
        "Squares": Squares,
        **{exported: getattr(dataset_rt, exported) for exported in dataset_rt.__all__},
        **{exported: getattr(module, exported) for exported in module.__all__},
    }
    parser = doctest.DocTestParser()
    test = parser.get_doctest(docstring, globs, f"{module_name}.{name}", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output: list[str] = []
    runner.run(test, out=output.append)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0
    assert results.failed == 0, "".join(output)
