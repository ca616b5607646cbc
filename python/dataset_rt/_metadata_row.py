"""`MetadataRow`: a sample's metadata, decoded (column by column, batch by batch) on first use."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any


class BatchMetadata(dict[str, list[Any]]):
    """The metadata of one batch of samples, by column, as copied from the core.

    As a dict it maps a column name to every sample's value of that column.
    A column is turned into a list of Python values, for the whole batch at
    once with C-level conversions, the first time any sample reads it
    (`__missing__`); a loop that reads one field never decodes the others.
    It keeps the batch's packed copy (``drt_batch.packed``: ids and metadata,
    no payloads) until then.
    """

    __slots__ = ("_names", "_packed", "_descriptors", "_columns_at")

    def __init__(
        self, names: list[str], packed: bytes, descriptors: Sequence[int], columns_at: int
    ) -> None:
        """`descriptors`: five words per column (kind, distinct, values_len,
        offsets_len, bytes_len); the columns' parts start at ``packed[columns_at:]``."""
        super().__init__()
        self._names = names
        self._packed = packed
        self._descriptors = descriptors
        self._columns_at = columns_at

    def names(self) -> list[str]:
        return self._names

    def __missing__(self, name: str) -> list[Any]:
        try:
            index = self._names.index(name)
        except ValueError:
            raise KeyError(name) from None
        at = self._columns_at
        descriptors = self._descriptors
        for earlier in range(index):
            at += sum(map(_padded8, descriptors[5 * earlier + 2 : 5 * earlier + 5]))
        kind, distinct, values_len, offsets_len, bytes_len = descriptors[5 * index : 5 * index + 5]
        view = memoryview(self._packed)
        values = view[at : at + values_len]
        at += _padded8(values_len)
        offsets = view[at : at + offsets_len]
        at += _padded8(offsets_len)
        strings = self._packed[at : at + bytes_len]
        column = self[name] = _column_values(kind, distinct, values, offsets, strings)
        return column


def _padded8(length: int) -> int:
    return (length + 7) & ~7


class _SingleRow(dict[str, list[Any]]):
    """A plain mapping in the role of a one-sample batch (see MetadataRow)."""

    __slots__ = ("_names",)

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__((name, [value]) for name, value in row.items())
        self._names = list(row)

    def names(self) -> list[str]:
        return self._names


def _column_values(
    kind: int, distinct: int, values: memoryview, offsets: memoryview, strings: bytes
) -> list[Any]:
    """A packed column's values as Python objects (layout in dataset_rt.h)."""
    if kind == _KIND_INT:
        return values.cast("q").tolist()
    if kind == _KIND_FLOAT:
        return values.cast("d").tolist()
    if kind == _KIND_BOOL:
        return list(map(bool, values))
    starts = offsets.cast("Q")
    if not distinct:
        return _decode_strings(strings, starts, starts[1:])
    # A coded column: decode each distinct string once (at its first row, codes
    # count up in order of first occurrence), then share the str objects.
    code_of = values.cast("I").tolist()
    firsts = list(map(code_of.index, range(distinct)))
    first_starts = list(map(starts.__getitem__, firsts))
    first_ends = list(map(starts.__getitem__, map((1).__add__, firsts)))
    return list(map(_decode_strings(strings, first_starts, first_ends).__getitem__, code_of))


def _decode_strings(strings: bytes, starts: Iterable[int], ends: Iterable[int]) -> list[str]:
    """The UTF-8 strings ``strings[start:end]``."""
    spans = map(slice, starts, ends)
    if strings.isascii():
        # Byte offsets are character offsets: one decode for the whole batch,
        # then one str slice per string.
        return list(map(strings.decode("ascii").__getitem__, spans))
    return list(map(bytes.decode, map(strings.__getitem__, spans)))


_KIND_BOOL, _KIND_INT, _KIND_FLOAT, _KIND_STRING = 0, 1, 2, 3


class MetadataRow(Mapping[str, Any]):
    """A read-only mapping that indexes, iterates and compares like a dict.

    It points at its batch's metadata; a field is decoded (for the whole batch)
    only when first read, so loops that only read payloads pay nothing for it.
    """

    __slots__ = ("_source", "_index")

    def __init__(self, source: BatchMetadata | Mapping[str, Any], index: int = -1) -> None:
        # The binding passes (batch, index >= 0); libraries that rebuild mappings
        # as type(m)(dict) (torch's default_convert does), and unpickling, pass a
        # mapping alone. (Comparing the index is cheaper than an isinstance check,
        # and this runs once per sample.)
        if index < 0:
            source, index = _SingleRow(dict(source)), 0
        if TYPE_CHECKING:  # a type narrowing only: no check on this per-sample path
            assert isinstance(source, (BatchMetadata, _SingleRow))
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
