"""`MetadataRow`: a sample's metadata, decoded from the core's JSON on first use."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


class MetadataRow(Mapping[str, Any]):
    """A read-only mapping that indexes, iterates and compares like a dict.

    It holds the canonical JSON text the core produced from the metadata.arrow
    row and parses it only when the sample's metadata is first read, so loops
    that only read payloads pay nothing for it.
    """

    __slots__ = ("_source", "_values")

    def __init__(self, source: bytes | Mapping[str, Any]) -> None:
        # The binding passes the core's JSON text; libraries that rebuild
        # mappings as type(m)(dict) (torch's default_convert does) pass a mapping.
        # Kept minimal: one of these is created per sample read.
        self._source = source

    def _decoded(self) -> dict[str, Any]:
        try:
            return self._values
        except AttributeError:
            source = self._source
            if isinstance(source, (bytes, bytearray, str)):
                self._values = json.loads(source)
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
