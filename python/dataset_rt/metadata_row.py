"""`MetadataRow`: a sample's metadata, decoded (column by column, batch by batch) on first use."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class BatchMetadata(dict[str, list[Any]]):
    """The metadata of one batch of samples, by column, as copied from the core.

    As a dict it maps a column name to every sample's value of that column.
    A column is turned into a list of Python values, for the whole batch at
    once with C-level conversions (array, map), the first time any sample reads
    it (`__missing__`); a loop that reads one field never decodes the others.
    """

    __slots__ = ("_names", "_columns")

    def __init__(
        self, names: list[str], columns: list[tuple[int, bytes, bytes, bytes, int]]
    ) -> None:
        super().__init__()
        self._names = names
        self._columns = dict(zip(names, columns, strict=True))

    def names(self) -> list[str]:
        return self._names

    def __missing__(self, name: str) -> list[Any]:
        values = self[name] = _column_values(*self._columns[name])  # KeyError: no such column
        return values


class _SingleRow(dict[str, list[Any]]):
    """A plain mapping in the role of a one-sample batch (see MetadataRow)."""

    __slots__ = ("_names",)

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__((name, [value]) for name, value in row.items())
        self._names = list(row)

    def names(self) -> list[str]:
        return self._names


def _column_values(kind: int, raw: bytes, strings: bytes, codes: bytes, distinct: int) -> list[Any]:
    if kind == _KIND_INT:
        return array("q", raw).tolist()
    if kind == _KIND_FLOAT:
        return array("d", raw).tolist()
    if kind == _KIND_BOOL:
        return list(map(bool, raw))
    offsets = array("Q", raw)
    if not codes:
        return _decode_strings(strings, offsets, offsets[1:])
    # A coded column: decode each distinct string once (at its first row, codes
    # count up in order of first occurrence), then share the str objects.
    code_of = array("I", codes)
    firsts = list(map(code_of.index, range(distinct)))
    starts = list(map(offsets.__getitem__, firsts))
    ends = list(map(offsets.__getitem__, map((1).__add__, firsts)))
    return list(map(_decode_strings(strings, starts, ends).__getitem__, code_of))


def _decode_strings(strings: bytes, starts: Iterable[int], ends: Iterable[int]) -> list[str]:
    """The UTF-8 strings ``strings[start:end]``."""
    spans = map(slice, starts, ends)
    if strings.isascii():
        # Byte offsets are character offsets: one decode for the whole batch,
        # then one str slice per string.
        return list(map(strings.decode("ascii").__getitem__, spans))
    return list(map(bytes.decode, map(strings.__getitem__, spans)))


_KIND_BOOL, _KIND_INT, _KIND_FLOAT, _KIND_STRING = 0, 1, 2, 3
assert array("I").itemsize == 4  # string codes are uint32


class MetadataRow(Mapping[str, Any]):
    """A read-only mapping that indexes, iterates and compares like a dict.

    It points at its batch's metadata; a field is decoded (for the whole batch)
    only when first read, so loops that only read payloads pay nothing for it.
    """

    __slots__ = ("_source", "_index")

    def __init__(self, source: BatchMetadata | Mapping[str, Any], index: int = 0) -> None:
        # The binding passes (batch, index); libraries that rebuild mappings as
        # type(m)(dict) (torch's default_convert does) pass a mapping.
        if not isinstance(source, BatchMetadata):
            source = _SingleRow(dict(source))  # type: ignore[assignment]
            index = 0
        self._source = source
        self._index = index

    def __getitem__(self, key: str) -> Any:
        # The per-sample hot path: one dict lookup (decoding on the batch's first) and one index.
        return self._source[key][self._index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._source.names())

    def __len__(self) -> int:
        return len(self._source.names())

    def __contains__(self, key: object) -> bool:
        return key in self._source.names()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.to_dict())

    def __reduce__(self) -> tuple[type[MetadataRow], tuple[dict[str, Any]]]:
        # Pickles as its values alone, not the whole batch it points into.
        return (MetadataRow, (self.to_dict(),))

    def to_dict(self) -> dict[str, Any]:
        """A plain dict copy of the row."""
        source, index = self._source, self._index
        return {name: source[name][index] for name in source.names()}
