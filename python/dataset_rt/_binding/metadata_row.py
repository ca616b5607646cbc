"""`MetadataRow`: a sample's metadata, decoded (column by column, batch by batch) on first use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dataset_rt._binding.packed_batch import BatchMetadata


class _SingleRow(dict[str, list[Any]]):
    """A plain mapping in the role of a one-sample batch (see MetadataRow)."""

    __slots__ = ("_names",)

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__((name, [value]) for name, value in row.items())
        self._names = list(row)

    def names(self) -> list[str]:
        return self._names


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
