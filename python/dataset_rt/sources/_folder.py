"""`FolderSource`: every file under a folder, one sample per file."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from dataset_rt._records import CacheInput


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
