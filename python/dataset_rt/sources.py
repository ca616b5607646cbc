"""Ready-made sources: write a cache from a folder of files, Parquet files, an
Arrow table or a Hugging Face dataset without writing a source class.

Each class is an ordinary `CacheSource` (a ``name`` attribute and ``__iter__``
yielding `CacheInput`), so `DatasetRuntime.write_cache` and
`DatasetRuntime.from_cache_sources` take it as they take any source. Each one
checks its arguments when it is made (missing folder or column, a data column
that is not binary, a metadata column that is not primitive) and streams its
samples when iterated: one file, or one record batch of rows, at a time.

Examples:
    >>> from dataset_rt import DatasetRuntime, ReaderConfig
    >>> from dataset_rt.sources import FolderSource
    >>> runtime = DatasetRuntime(num_workers=4)
    >>> [result] = runtime.write_cache(FolderSource("images/train"), "caches")
    >>> dataset = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0))
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from dataset_rt._records import CacheInput

__all__ = ["ArrowSource", "FolderSource", "HFDatasetSource", "ParquetSource"]

_BATCH_ROWS_DEFAULT = 256
"""Rows converted to Python objects at a time: a few MiB of typical images,
and large enough that the per-batch work is negligible per row."""

_PRIMITIVE_TYPES = "bool, integer, floating point or string"
_BINARY_TYPES = "binary, large_binary, binary_view or fixed_size_binary"

# The payload column's kind: an Arrow binary column, or a Hugging Face Image
# feature (a struct of the encoded bytes and the file they came from).
_PayloadKind = Literal["binary", "image"]


@dataclass(frozen=True)
class _ColumnPlan:
    """Which columns make a sample, checked against a schema."""

    data_column: str
    payload_kind: _PayloadKind
    metadata_schema: dict[str, type]

    def columns(self) -> list[str]:
        return [self.data_column, *self.metadata_schema]


# ---- FolderSource ---------------------------------------------------------------


class FolderSource:
    """Every file under a folder, one sample per file, in sorted order.

    The payload is the file's bytes, unchanged. The metadata is:

    - ``path`` (str): the file's path relative to ``root``, with ``/`` separators;
    - ``size_bytes`` (int): the payload's length;
    - with ``label_from="parent"`` (the default), the file's class: the name of
      the folder that holds it (``cat`` for ``root/cat/001.png``, ``b`` for
      ``root/a/b/001.png``), stored as set by ``label_kind``:

      - ``"index"`` (the default): ``label`` (int) is the class's position in
        `classes`, the class names sorted in code point order as torchvision's
        ``ImageFolder`` and Hugging Face's ``imagefolder`` number them, and
        ``label_name`` (str) is the class name;
      - ``"name"``: ``label`` (str) is the class name, and there is no
        ``label_name``.

    Files are listed when the source is made, recursively, and sorted by their
    relative path (code point order), so the same tree always gives the same
    cache. Symbolic links to files are read; folders reached through a symbolic
    link are not entered. A file is read only when the writer reaches it.

    The classes are the folders that hold at least one listed file, so each
    source numbers its own classes: pass ``classes=`` (for instance the training
    source's `classes`) so that a validation folder lacking a class gets the
    same numbers.

    Args:
        root: the folder to read.
        name: the cache's name; by default the folder's own name (``train`` for
            ``data/train``).
        label_from: ``"parent"`` to label each file with its folder's name,
            ``None`` for no label.
        label_kind: ``"index"`` for an int ``label`` and a str ``label_name``,
            ``"name"`` for a str ``label``; only with ``label_from="parent"``.
        classes: the class names in index order; by default the names of the
            folders holding the files, sorted. Every file's folder must be one
            of them; a class without files is allowed.
        extensions: keep only files whose name ends with one of these suffixes,
            compared without regard to case (``[".png", ".jpg"]``; the dot may be
            left out); by default every file is kept.

    Raises:
        FileNotFoundError: ``root`` does not exist.
        NotADirectoryError: ``root`` is not a folder.
        TypeError: ``classes`` is not a list of str (one str is refused).
        ValueError: no file matches; ``label_from`` is not ``"parent"`` or
            ``None``; ``label_kind`` is not ``"index"`` or ``"name"``;
            ``label_kind="name"`` or ``classes`` with ``label_from=None``;
            ``classes`` is empty, names a class twice, or lacks a file's folder;
            an extension is empty; with ``label_from="parent"`` a file lies
            directly in ``root`` (it has no folder to be labelled by).

    Examples:
        >>> from pathlib import Path
        >>> for path in ["pets/dog/2.png", "pets/cat/1.png", "pets/cat/notes.txt"]:
        ...     Path(path).parent.mkdir(parents=True, exist_ok=True)
        ...     _ = Path(path).write_bytes(b"bytes of " + path.encode())
        >>> source = FolderSource("pets", extensions=[".png"])
        >>> source.name, source.relative_paths, source.classes
        ('pets', ['cat/1.png', 'dog/2.png'], ['cat', 'dog'])
        >>> [result] = runtime.write_cache(source, "caches")
        >>> config = ReaderConfig(seed=0, shuffle=False)
        >>> [dict(s.metadata) for s in runtime.cached_dataset([result.path], reader_config=config)]
        [{'label': 0, 'label_name': 'cat', 'path': 'cat/1.png', 'size_bytes': 23},
         {'label': 1, 'label_name': 'dog', 'path': 'dog/2.png', 'size_bytes': 23}]

        The folder names as labels, and a fixed list of classes:

        >>> by_name = FolderSource("pets", label_kind="name", extensions="png")
        >>> [sample.metadata for sample in by_name]
        [{'path': 'cat/1.png', 'size_bytes': 23, 'label': 'cat'},
         {'path': 'dog/2.png', 'size_bytes': 23, 'label': 'dog'}]
        >>> FolderSource("pets", classes=["dog", "cat", "bird"], extensions="png").class_to_idx
        {'dog': 0, 'cat': 1, 'bird': 2}
    """

    name: str
    """The cache's name (the folder's name unless given)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        name: str | None = None,
        label_from: Literal["parent"] | None = "parent",
        label_kind: Literal["index", "name"] = "index",
        classes: Sequence[str] | None = None,
        extensions: str | Iterable[str] | None = None,
    ) -> None:
        if label_from not in ("parent", None):
            raise ValueError(
                f"FolderSource: label_from must be 'parent' or None, got {label_from!r}"
            )
        if label_kind not in ("index", "name"):
            raise ValueError(
                f"FolderSource: label_kind must be 'index' or 'name', got {label_kind!r}"
            )
        if label_from is None and label_kind != "index":
            raise ValueError(
                f"FolderSource: label_kind={label_kind!r} needs label_from='parent'; "
                "with label_from=None there is no label"
            )
        if label_from is None and classes is not None:
            raise ValueError(
                "FolderSource: classes needs label_from='parent'; with label_from=None "
                "there is no label"
            )
        given_classes = None if classes is None else _checked_classes(classes)
        self._root = Path(root)
        self._label_from = label_from
        self._label_kind = label_kind
        self._extensions = _normalized_extensions(extensions)
        self.name = name if name is not None else Path(os.path.abspath(root)).name
        self._relative_paths = _list_files(self._root, self._extensions)
        self._classes: list[str] = []
        schema: dict[str, type] = {"path": str, "size_bytes": int}
        if label_from == "parent":
            _check_every_file_has_a_parent(self._relative_paths)
            found = {_class_of(relative_path) for relative_path in self._relative_paths}
            if given_classes is None:
                self._classes = sorted(found)  # code point order, as ImageFolder's sorted()
            else:
                _check_classes_cover(given_classes, self._relative_paths)
                self._classes = given_classes
            if label_kind == "index":
                schema["label"] = int
                schema["label_name"] = str
            else:
                schema["label"] = str
        self._class_to_idx = {name: index for index, name in enumerate(self._classes)}
        self._metadata_schema = schema

    @property
    def classes(self) -> list[str]:
        """The class names in index order: ``label`` i is ``classes[i]``.

        The names of the folders that hold the files, sorted in code point order
        (``"Zebra"`` before ``"cat"`` before ``"é"``), unless ``classes`` was
        given; empty with ``label_from=None``.

        Examples:
            >>> from pathlib import Path
            >>> for animal in ["zebra", "Zebu", "émeu", "cat"]:  # created in this order
            ...     Path("zoo", animal).mkdir(parents=True)
            ...     _ = Path("zoo", animal, "1.jpg").write_bytes(b"jpg")
            >>> FolderSource("zoo").classes
            ['Zebu', 'cat', 'zebra', 'émeu']
        """
        return list(self._classes)

    @property
    def class_to_idx(self) -> dict[str, int]:
        """Each class name's index, the ``label`` of its files (as ``ImageFolder.class_to_idx``).

        Examples:
            >>> from pathlib import Path
            >>> for path in ["birds/wren/1.png", "birds/owl/1.png", "birds/owl/2.png"]:
            ...     Path(path).parent.mkdir(parents=True, exist_ok=True)
            ...     _ = Path(path).write_bytes(b"png")
            >>> FolderSource("birds").class_to_idx
            {'owl': 0, 'wren': 1}
        """
        return dict(self._class_to_idx)

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> from pathlib import Path
            >>> Path("scans/a").mkdir(parents=True)
            >>> _ = Path("scans/a/0001.tif").write_bytes(b"II*")
            >>> FolderSource("scans", label_from=None).metadata_schema
            {'path': <class 'str'>, 'size_bytes': <class 'int'>}
            >>> FolderSource("scans").metadata_schema
            {'path': <class 'str'>, 'size_bytes': <class 'int'>, 'label': <class 'int'>,
             'label_name': <class 'str'>}
        """
        return dict(self._metadata_schema)

    @property
    def relative_paths(self) -> list[str]:
        """The files' paths relative to ``root`` (``/`` separators), in sample order.

        Examples:
            >>> from pathlib import Path
            >>> for path in ["digits/7/b.png", "digits/10/a.png", "digits/7/a.png"]:
            ...     Path(path).parent.mkdir(parents=True, exist_ok=True)
            ...     _ = Path(path).write_bytes(b"png")
            >>> FolderSource("digits").relative_paths  # "1" sorts before "7"
            ['10/a.png', '7/a.png', '7/b.png']
        """
        return list(self._relative_paths)

    def __iter__(self) -> Iterator[CacheInput]:
        """Read the files one at a time, in `relative_paths` order."""
        labelled = self._label_from == "parent"
        by_index = self._label_kind == "index"
        for relative_path in self._relative_paths:
            data = (self._root / relative_path).read_bytes()
            metadata: dict[str, str | int] = {"path": relative_path, "size_bytes": len(data)}
            if labelled:
                class_name = _class_of(relative_path)
                if by_index:
                    metadata["label"] = self._class_to_idx[class_name]
                    metadata["label_name"] = class_name
                else:
                    metadata["label"] = class_name
            yield CacheInput(data, metadata)


def _normalized_extensions(extensions: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """Lower-case suffixes, each starting with a dot; a lone str is one suffix."""
    if extensions is None:
        return None
    given = [extensions] if isinstance(extensions, str) else list(extensions)
    normalized: list[str] = []
    for extension in given:
        if not isinstance(extension, str):
            raise TypeError(
                f"FolderSource: extensions must be str, got {type(extension).__name__} "
                f"{extension!r}"
            )
        if extension in ("", "."):
            raise ValueError(f"FolderSource: extension {extension!r} is empty")
        lowered = extension.lower()
        normalized.append(lowered if lowered.startswith(".") else "." + lowered)
    if not normalized:
        raise ValueError("FolderSource: extensions is empty; pass None to keep every file")
    return tuple(normalized)


def _raise(error: OSError) -> None:
    raise error


def _list_files(root: Path, extensions: tuple[str, ...] | None) -> list[str]:
    """The relative paths of the matching files under `root`, sorted."""
    if not root.exists():
        raise FileNotFoundError(f"FolderSource: no such folder: {root}")
    if not root.is_dir():
        raise NotADirectoryError(f"FolderSource: not a folder: {root}")
    found: list[str] = []
    # An unreadable folder raises instead of being skipped (os.walk's default).
    for folder, _, file_names in os.walk(root, onerror=_raise):
        relative_folder = Path(folder).relative_to(root)
        for file_name in file_names:
            if extensions is not None and not file_name.lower().endswith(extensions):
                continue
            if os.path.isfile(os.path.join(folder, file_name)):  # not a broken link or a FIFO
                found.append((relative_folder / file_name).as_posix())
    if not found:
        matching = "" if extensions is None else f" with extensions {list(extensions)}"
        raise ValueError(f"FolderSource: no files{matching} under {root}")
    found.sort()
    return found


def _class_of(relative_path: str) -> str:
    """The class of a file: the name of the folder that holds it."""
    return relative_path.split("/")[-2]


def _checked_classes(classes: Sequence[str]) -> list[str]:
    """`classes` as a list, refused when it is one str, empty, or names a class twice."""
    if isinstance(classes, str) or not isinstance(classes, Sequence):
        raise TypeError(
            "FolderSource: classes must be a list of class names, got "
            f"{type(classes).__name__} {classes!r}"
        )
    names = list(classes)
    for class_name in names:
        if not isinstance(class_name, str):
            raise TypeError(
                f"FolderSource: classes must hold str, got {type(class_name).__name__} "
                f"{class_name!r}"
            )
    if not names:
        raise ValueError("FolderSource: classes is empty; pass None to use the folders' names")
    seen: set[str] = set()
    for class_name in names:
        if class_name in seen:
            raise ValueError(f"FolderSource: classes names {class_name!r} more than once")
        seen.add(class_name)
    return names


def _check_classes_cover(classes: list[str], relative_paths: list[str]) -> None:
    """Every file's folder must be one of the given classes."""
    known = frozenset(classes)
    for relative_path in relative_paths:
        class_name = _class_of(relative_path)
        if class_name not in known:
            listed = ", ".join(map(repr, classes[:10])) + (", ..." if len(classes) > 10 else "")
            raise ValueError(
                f"FolderSource: {relative_path!r} is in folder {class_name!r}, which is not "
                f"in classes ({len(classes)}: {listed})"
            )


def _check_every_file_has_a_parent(relative_paths: list[str]) -> None:
    for relative_path in relative_paths:
        if "/" not in relative_path:
            raise ValueError(
                f"FolderSource: {relative_path!r} lies directly in the root folder, so "
                "label_from='parent' has no folder to label it with; move it into a "
                "class folder, leave it out with extensions=..., or pass label_from=None"
            )


# ---- Arrow columns ----------------------------------------------------------------


def _primitive_type(data_type: Any) -> type | None:
    """The Python type of a primitive Arrow type's values; None for any other type."""
    if pa.types.is_dictionary(data_type):
        return _primitive_type(data_type.value_type)
    if pa.types.is_boolean(data_type):
        return bool
    if pa.types.is_integer(data_type):
        return int
    if pa.types.is_floating(data_type):
        return float
    if (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
    ):
        return str
    return None


def _metadata_type(owner: str, column: str, data_type: Any) -> type:
    """The Python type of a metadata column's values; ValueError for a non-primitive column."""
    primitive = _primitive_type(data_type)
    if primitive is not None:
        return primitive
    if pa.types.is_nested(data_type):
        raise ValueError(
            f"{owner}: metadata column {column!r} has nested type {data_type}; metadata "
            f"columns must be {_PRIMITIVE_TYPES}"
        )
    raise ValueError(
        f"{owner}: metadata column {column!r} has type {data_type}; metadata columns "
        f"must be {_PRIMITIVE_TYPES} (cast it first, e.g. to int64 or string)"
    )


def _is_binary(data_type: Any) -> bool:
    return bool(
        pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_binary_view(data_type)
        or pa.types.is_fixed_size_binary(data_type)
    )


def _column_names(owner: str, metadata_columns: str | Iterable[str] | None) -> list[str] | None:
    """The requested metadata columns (a lone str is one column), without repeats."""
    if metadata_columns is None:
        return None
    names = [metadata_columns] if isinstance(metadata_columns, str) else list(metadata_columns)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(
                f"{owner}: metadata_columns must hold str, got {type(name).__name__} {name!r}"
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{owner}: metadata_columns names {repeated[0]!r} more than once")
    return names


def _missing_column(owner: str, column: str, role: str, schema: Any, where: str) -> ValueError:
    present = ", ".join(repr(name) for name in schema.names)
    return ValueError(
        f"{owner}: {role} column {column!r} is not in {where}; its columns are {present}"
    )


def _plan(
    owner: str,
    schema: Any,
    data_column: str,
    metadata_columns: list[str] | None,
    where: str,
    image_columns: frozenset[str] | None = None,
) -> _ColumnPlan:
    """Check `schema` (a pyarrow.Schema) for a data column and primitive metadata columns.

    `metadata_columns=None` means every primitive column but the data column;
    `image_columns` are the Hugging Face Image columns (None outside a Hugging Face
    dataset), accepted as the data column.
    """
    if not isinstance(data_column, str):
        raise TypeError(f"{owner}: data_column must be a str, got {type(data_column).__name__}")
    if data_column not in schema.names:
        raise _missing_column(owner, data_column, "data", schema, where)
    data_type = schema.field(data_column).type
    payload_kind: _PayloadKind
    if image_columns is not None and data_column in image_columns:
        payload_kind = "image"
    elif _is_binary(data_type):
        payload_kind = "binary"
    else:
        expected = _BINARY_TYPES + ("" if image_columns is None else " (or an Image feature)")
        raise ValueError(
            f"{owner}: data column {data_column!r} has type {data_type}; it must be {expected}"
        )
    if metadata_columns is None:
        metadata_columns = [
            name
            for name in schema.names
            if name != data_column and _primitive_type(schema.field(name).type) is not None
        ]
    elif data_column in metadata_columns:
        raise ValueError(f"{owner}: data column {data_column!r} cannot also be a metadata column")
    metadata_schema: dict[str, type] = {}
    for column in metadata_columns:
        if column not in schema.names:
            raise _missing_column(owner, column, "metadata", schema, where)
        metadata_schema[column] = _metadata_type(owner, column, schema.field(column).type)
    if not metadata_schema:
        raise ValueError(
            f"{owner}: no metadata column besides data column {data_column!r} in {where}; "
            "a cache needs at least one metadata field per sample"
        )
    return _ColumnPlan(data_column, payload_kind, metadata_schema)


def _first_null(array: Any) -> int:
    return int(array.is_null().to_pylist().index(True))


def _payloads(array: Any, plan: _ColumnPlan, origin: str, first_row: int) -> list[bytes]:
    """The payloads of one batch's data column, as bytes."""
    if array.null_count:
        row = first_row + _first_null(array)
        raise ValueError(f"{origin}: data column {plan.data_column!r} is null at row {row}")
    if plan.payload_kind == "binary":
        return list(array.to_pylist())
    payloads: list[bytes] = []
    for offset, image in enumerate(array.to_pylist()):
        payloads.append(_image_bytes(image, plan.data_column, origin, first_row + offset))
    return payloads


def _image_bytes(image: dict[str, Any], column: str, origin: str, row: int) -> bytes:
    """A Hugging Face Image value's encoded bytes: stored in the table, or in the file it names."""
    if image["bytes"] is not None:
        return bytes(image["bytes"])
    if image["path"] is not None:
        return Path(image["path"]).read_bytes()
    raise ValueError(f"{origin}: image column {column!r} has neither bytes nor a path at row {row}")


def _metadata_values(array: Any, column: str, origin: str, first_row: int) -> list[Any]:
    if array.null_count:
        row = first_row + _first_null(array)
        raise ValueError(f"{origin}: metadata column {column!r} contains null at row {row}")
    return list(array.to_pylist())


def _samples(
    batches: Iterable[Any], plan: _ColumnPlan, origin: str, batch_rows: int
) -> Iterator[CacheInput]:
    """The samples of record batches, `batch_rows` rows converted to Python at a time.

    `origin` names the input in errors (with the row, counted from its first batch).
    """
    names = list(plan.metadata_schema)
    first_row = 0
    for batch in batches:
        for start in range(0, batch.num_rows, batch_rows):
            part = batch.slice(start, batch_rows)  # zero-copy
            payloads = _payloads(part.column(plan.data_column), plan, origin, first_row)
            columns = [
                _metadata_values(part.column(name), name, origin, first_row) for name in names
            ]
            for payload, *values in zip(payloads, *columns, strict=True):
                yield CacheInput(payload, dict(zip(names, values, strict=True)))
            first_row += part.num_rows


def _check_batch_rows(owner: str, batch_rows: int) -> int:
    if type(batch_rows) is not int or batch_rows < 1:
        raise ValueError(f"{owner}: batch_rows must be a positive int, got {batch_rows!r}")
    return batch_rows


# ---- ParquetSource ------------------------------------------------------------------


class ParquetSource:
    """The rows of one or more Parquet files, one sample per row.

    The payload is the value of ``data_column``, a binary column; the metadata
    is the values of ``metadata_columns``, each a bool, integer, floating point
    or string column (dictionary-encoded ones included), stored under the
    column's name. Integers are stored as int64, floating point as float64.

    Samples come in file order (``paths`` as given), then row order. The files
    are read with pyarrow in record batches of ``batch_rows`` rows, so memory
    holds about one row group of the selected columns plus one batch, whatever
    the files' size. Every file's schema is checked when the source is made.

    Args:
        paths: a Parquet file, or a list of them.
        data_column: the binary column holding the payloads.
        metadata_columns: the columns to store as metadata (a list of names);
            by default every column but ``data_column`` whose type is primitive
            (the others are left out; `metadata_schema` shows what is kept).
        name: the cache's name; by default the file's name without its suffix
            (``train`` for ``train.parquet``). Required with several files.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: a file is not Parquet; a column is missing; the data column
            is not binary; a column named in ``metadata_columns`` is nested
            (list, struct, map) or of another non-primitive type (timestamp,
            decimal, binary...); no metadata column is left; the files'
            column types differ; several files and no ``name``.

    Null values cannot be stored: a null in a used column fails that source's
    write with ``... contains null at row N`` (a `CacheWriteError`).

    Examples:
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> for part in range(2):
        ...     table = pa.table({"jpeg": [b"\\xff\\xd8", b"\\xff\\xd9"], "label": [part, 7]})
        ...     pq.write_table(table, f"part-{part}.parquet")
        >>> source = ParquetSource(
        ...     ["part-0.parquet", "part-1.parquet"],
        ...     data_column="jpeg",
        ...     metadata_columns=["label"],
        ...     name="train",
        ... )
        >>> [result] = runtime.write_cache(source, "caches")
        >>> dataset = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0))
        >>> dataset.get_metadata()["label"].to_list()  # file order, then row order
        [0, 7, 1, 7]
    """

    name: str
    """The cache's name (the file's stem unless given)."""

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str | None = None,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "ParquetSource"
        if isinstance(paths, (str, os.PathLike)):
            self._paths = [Path(paths)]
        else:
            self._paths = [Path(path) for path in paths]
        if not self._paths:
            raise ValueError("ParquetSource: paths is empty; pass at least one Parquet file")
        if name is None and len(self._paths) > 1:
            raise ValueError("ParquetSource: pass name=... when reading several files")
        self.name = name if name is not None else self._paths[0].stem
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        requested = _column_names(owner, metadata_columns)
        plan: _ColumnPlan | None = None
        for path in self._paths:
            file_plan = _plan(owner, _parquet_schema(path), data_column, requested, str(path))
            if plan is not None:
                _check_same_columns(plan, file_plan, self._paths[0], path)
            plan = file_plan
        assert plan is not None
        self._plan = plan

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import pyarrow as pa, pyarrow.parquet as pq
            >>> table = pa.table({"jpeg": [b"..."], "label": [3], "split": ["a"], "box": [[1, 2]]})
            >>> pq.write_table(table, "train.parquet")
            >>> ParquetSource("train.parquet", data_column="jpeg").metadata_schema  # not "box"
            {'label': <class 'int'>, 'split': <class 'str'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Read the files in order, one record batch at a time."""
        columns = self._plan.columns()
        for path in self._paths:
            # pyarrow pre-buffers every row group by default: the whole file in memory.
            with pq.ParquetFile(path, pre_buffer=False) as parquet_file:
                batches = parquet_file.iter_batches(batch_size=self._batch_rows, columns=columns)
                yield from _samples(
                    batches, self._plan, f"ParquetSource file {path}", self._batch_rows
                )


def _parquet_schema(path: Path) -> Any:
    """The file's Arrow schema, read from its footer."""
    if not path.exists():
        raise FileNotFoundError(f"ParquetSource: no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"ParquetSource: {path} is a folder; pass the files in it")
    try:
        with pq.ParquetFile(path) as parquet_file:
            return parquet_file.schema_arrow
    except pa.ArrowInvalid as error:
        raise ValueError(f"ParquetSource: {path} is not a Parquet file ({error})") from None


def _check_same_columns(
    first: _ColumnPlan, other: _ColumnPlan, first_path: Path, path: Path
) -> None:
    """Every file must give the same kinds of values, or the write would fail midway."""
    if first.payload_kind != other.payload_kind:
        raise ValueError(
            f"ParquetSource: data column {first.data_column!r} differs between "
            f"{first_path} and {path}"
        )
    if first.metadata_schema.keys() != other.metadata_schema.keys():
        only = sorted(first.metadata_schema.keys() ^ other.metadata_schema.keys())
        raise ValueError(
            f"ParquetSource: {first_path} and {path} have different metadata columns "
            f"(only in one of them: {', '.join(map(repr, only))})"
        )
    for column, kind in first.metadata_schema.items():
        if other.metadata_schema[column] is not kind:
            raise ValueError(
                f"ParquetSource: metadata column {column!r} holds {kind.__name__} in "
                f"{first_path} but {other.metadata_schema[column].__name__} in {path}"
            )


# ---- ArrowSource -------------------------------------------------------------------


class ArrowSource:
    """The rows of an Arrow table or stream of record batches, one sample per row.

    Columns are used as in `ParquetSource`: the payload from the binary
    ``data_column``, the metadata from primitive columns. ``table_or_batches``
    is one of:

    - a ``pyarrow.Table`` or ``pyarrow.RecordBatch``;
    - a list or tuple of ``pyarrow.RecordBatch`` sharing one schema;
    - a ``pyarrow.RecordBatchReader``: batches are pulled one at a time as the
      writer needs them, so a stream larger than memory can be written. A
      reader can be read once: iterating the source a second time raises
      ``RuntimeError``.

    A Polars ``DataFrame`` becomes a table with ``df.to_arrow()``.

    Args:
        table_or_batches: the rows, as above.
        data_column: the binary column holding the payloads.
        metadata_columns: the columns to store as metadata; by default every
            primitive column but ``data_column``.
        name: the cache's name.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        TypeError: ``table_or_batches`` is none of the above.
        ValueError: as `ParquetSource` for columns; an empty list of batches;
            batches with different schemas.

    Examples:
        >>> import pyarrow as pa
        >>> table = pa.table({"data": [b"\\x00\\x01", b"\\x02"], "label": [0, 1]})
        >>> source = ArrowSource(table, data_column="data", name="tiny")
        >>> [result] = runtime.write_cache(source, "caches")
        >>> result.path.name
        'tiny'
        >>> [sample.metadata for sample in source]
        [{'label': 0}, {'label': 1}]
    """

    name: str
    """The cache's name."""

    def __init__(
        self,
        table_or_batches: Any,
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "ArrowSource"
        self.name = name
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        self._batches, schema = _arrow_input(table_or_batches)
        self._reader_used = False
        self._plan = _plan(
            owner, schema, data_column, _column_names(owner, metadata_columns), "the table"
        )

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import pyarrow as pa
            >>> table = pa.table({"data": [b"x"], "label": [0], "score": [0.5]})
            >>> ArrowSource(table, data_column="data", name="t").metadata_schema
            {'label': <class 'int'>, 'score': <class 'float'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Yield the rows in order, one record batch at a time."""
        batches: Iterable[Any] = self._batches
        if isinstance(batches, pa.RecordBatchReader):
            if self._reader_used:
                raise RuntimeError(
                    f"ArrowSource {self.name!r} reads a RecordBatchReader, which can be read "
                    "once; make a new source with a new reader"
                )
            self._reader_used = True
        return _samples(batches, self._plan, "ArrowSource", self._batch_rows)


def _arrow_input(table_or_batches: Any) -> tuple[Any, Any]:
    """(something iterable as record batches, its schema)."""
    if isinstance(table_or_batches, pa.Table):
        return table_or_batches.to_batches(), table_or_batches.schema
    if isinstance(table_or_batches, pa.RecordBatch):
        return [table_or_batches], table_or_batches.schema
    if isinstance(table_or_batches, pa.RecordBatchReader):
        return table_or_batches, table_or_batches.schema
    if isinstance(table_or_batches, (list, tuple)):
        batches = list(table_or_batches)
        if not batches:
            raise ValueError("ArrowSource: the list of record batches is empty")
        for position, batch in enumerate(batches):
            if not isinstance(batch, pa.RecordBatch):
                raise TypeError(
                    f"ArrowSource: item {position} of the list is a {type(batch).__name__}, "
                    "not a pyarrow.RecordBatch"
                )
            if not batch.schema.equals(batches[0].schema):
                raise ValueError(
                    f"ArrowSource: record batch {position} has schema {batch.schema}, "
                    f"batch 0 has {batches[0].schema}"
                )
        return batches, batches[0].schema
    raise TypeError(
        "ArrowSource: table_or_batches must be a pyarrow Table, RecordBatch, "
        f"RecordBatchReader or list of RecordBatch, got {type(table_or_batches).__name__}"
    )


# ---- HFDatasetSource ---------------------------------------------------------------

_DATASETS_MISSING = (
    "HFDatasetSource requires the Hugging Face datasets package: pip install datasets"
)


class HFDatasetSource:
    """The rows of a Hugging Face ``datasets.Dataset``, one sample per row.

    The payload comes from ``data_column``: a binary column (``Value("binary")``)
    as stored, or an ``Image`` feature as the image's encoded bytes (PNG,
    JPEG... exactly as the dataset holds them, or read from the file it points
    to); images are never decoded. Metadata columns are as in `ParquetSource`
    (a ``ClassLabel`` is stored as its int). Rows come in the dataset's order,
    after any ``shuffle``, ``select`` or ``filter`` applied to it, read through
    its Arrow format ``batch_rows`` rows at a time.

    Requires the ``datasets`` package (``pip install datasets``), which
    DatasetRT does not depend on.

    Args:
        dataset: a ``datasets.Dataset`` (one split: ``load_dataset(...)["train"]``).
        data_column: the binary or ``Image`` column holding the payloads.
        metadata_columns: the columns to store as metadata; by default every
            primitive column but ``data_column``.
        name: the cache's name; by default ``<dataset name>-<split>`` from the
            dataset's info (``mnist-train``); required when the dataset has no name.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        ImportError: ``datasets`` is not installed.
        TypeError: ``dataset`` is not a ``datasets.Dataset`` (a ``DatasetDict``:
            choose a split; an ``IterableDataset`` is not supported).
        ValueError: as `ParquetSource` for columns (an ``Image`` column is
            accepted only as the data column); no name given or known.

    Examples:
        >>> import datasets  # pip install datasets
        >>> digits = datasets.Dataset.from_dict(
        ...     {"image": [{"bytes": b"\\x89PNG...", "path": None}], "label": [7]},
        ...     features=datasets.Features(
        ...         {"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)}
        ...     ),
        ... )
        >>> source = HFDatasetSource(digits, data_column="image", name="digits")
        >>> [result] = runtime.write_cache(source, "caches")
        >>> [(s.data, s.metadata) for s in source]  # the encoded image, not decoded
        [(b'\\x89PNG...', {'label': 7})]

        With a dataset from the Hub (``load_dataset("ylecun/mnist", split="train")``)
        the name defaults to ``mnist-train``.
    """

    name: str
    """The cache's name."""

    def __init__(
        self,
        dataset: Any,
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str | None = None,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "HFDatasetSource"
        datasets = _import_datasets()
        if isinstance(dataset, datasets.DatasetDict):
            splits = ", ".join(repr(split) for split in dataset)
            raise TypeError(
                f"HFDatasetSource: got a DatasetDict; pass one of its splits ({splits}), "
                "e.g. dataset['train']"
            )
        if not isinstance(dataset, datasets.Dataset):
            raise TypeError(
                f"HFDatasetSource: dataset must be a datasets.Dataset, got {type(dataset).__name__}"
            )
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        features = dataset.features
        images = frozenset(
            column for column, feature in features.items() if isinstance(feature, datasets.Image)
        )
        schema = features.arrow_schema
        plan = _plan(
            owner,
            schema,
            data_column,
            _column_names(owner, metadata_columns),
            "the dataset",
            images,
        )
        self._plan = plan
        self._dataset = dataset.select_columns(plan.columns()).with_format("arrow")
        self.name = name if name is not None else _dataset_name(dataset)

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import datasets
            >>> clips = datasets.Dataset.from_dict(
            ...     {"audio": [b"RIFF"], "speaker": ["ana"], "seconds": [1.5]}
            ... )
            >>> source = HFDatasetSource(clips, data_column="audio", name="clips")
            >>> source.metadata_schema
            {'speaker': <class 'str'>, 'seconds': <class 'float'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Yield the rows in the dataset's order, ``batch_rows`` at a time."""
        tables = self._dataset.iter(batch_size=self._batch_rows)
        batches = (batch for table in tables for batch in table.to_batches())
        return _samples(batches, self._plan, f"HFDatasetSource {self.name!r}", self._batch_rows)


def _import_datasets() -> Any:
    try:
        return importlib.import_module("datasets")
    except ImportError:
        raise ImportError(_DATASETS_MISSING) from None


def _dataset_name(dataset: Any) -> str:
    """``<dataset name>-<split>`` from the dataset's info, or just the name without a split."""
    dataset_name = dataset.info.dataset_name
    if not dataset_name:
        raise ValueError("HFDatasetSource: the dataset has no name in its info; pass name=...")
    split = dataset.split
    return f"{dataset_name}-{split}" if split is not None else str(dataset_name)
