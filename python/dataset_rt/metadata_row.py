"""`MetadataRow`: a sample's metadata, decoded (batch by batch) on first use."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from functools import partial
from itertools import repeat
from typing import Any


class BatchMetadata:
    """The metadata of one batch of samples, by column, as copied from the core.

    Turned into one dict per sample on the first access to any of them, with
    C-level conversions (array, map, zip) rather than per-value Python code.
    """

    __slots__ = ("_names", "_columns", "_count", "_rows")

    def __init__(
        self, names: list[str], columns: list[tuple[int, bytes, bytes]], count: int
    ) -> None:
        self._names = names
        self._columns = columns
        self._count = count
        self._rows: list[dict[str, Any]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        rows = self._rows
        if rows is None:
            if not self._columns:
                rows = self._rows = [{} for _ in range(self._count)]
                return rows
            values = [_column_values(kind, raw, strings) for kind, raw, strings in self._columns]
            names = self._names
            rows = self._rows = list(map(dict, map(zip, repeat(names), zip(*values, strict=True))))
        return rows


def _column_values(kind: int, raw: bytes, strings: bytes) -> list[Any]:
    if kind == _KIND_INT:
        return array("q", raw).tolist()
    if kind == _KIND_FLOAT:
        return array("d", raw).tolist()
    if kind == _KIND_BOOL:
        return list(map(bool, raw))
    offsets = array("Q", raw).tolist()
    return list(map(_decode_utf8, map(strings.__getitem__, map(slice, offsets, offsets[1:]))))


_decode_utf8 = partial(str, encoding="utf-8")
_KIND_BOOL, _KIND_INT, _KIND_FLOAT, _KIND_STRING = 0, 1, 2, 3


class MetadataRow(Mapping[str, Any]):
    """A read-only mapping that indexes, iterates and compares like a dict.

    It points at its batch's metadata and is decoded (with the whole batch) only
    when first read, so loops that only read payloads pay nothing for it.
    """

    __slots__ = ("_source", "_index", "_values")

    def __init__(self, source: BatchMetadata | Mapping[str, Any], index: int = -1) -> None:
        # The binding passes (batch, index); libraries that rebuild mappings as
        # type(m)(dict) (torch's default_convert does) pass a mapping.
        self._source = source
        self._index = index

    def _decoded(self) -> dict[str, Any]:
        try:
            return self._values
        except AttributeError:
            source = self._source
            if isinstance(source, BatchMetadata):
                self._values = source.rows()[self._index]
            else:
                self._values = dict(source)
            return self._values

    def __getitem__(self, key: str) -> Any:
        return self._decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())

    def __contains__(self, key: object) -> bool:
        return key in self._decoded()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MetadataRow):
            return self._decoded() == other._decoded()
        if isinstance(other, Mapping):
            return self._decoded() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._decoded())

    def to_dict(self) -> dict[str, Any]:
        """A plain dict copy of the row."""
        return dict(self._decoded())
