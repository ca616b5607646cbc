"""The one reader of ``drt_batch.packed`` (layout in dataset_rt.h): a batch's
counts, payload lengths, identities and metadata columns, copied from the core
in one call and decoded here."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from dataset_rt._binding.native import KIND_BOOL, KIND_FLOAT, KIND_INT

# The head: count, column_count, payload_bytes, deferred and skipped; then five
# words per column (kind, distinct, values_len, offsets_len, bytes_len); the
# skipped samples (drt_skipped: at, sample_id, cache_id) end it.
_HEAD_WORDS = 5
_SKIPPED = struct.Struct("=QQQ")
_HEAD = struct.Struct(f"={_HEAD_WORDS}Q")
_COLUMN_WORDS = 5


class PackedBatch(NamedTuple):
    """One batch's parts, as views into its packed copy."""

    sample_count: int
    payload_bytes: int
    """The batch's payloads' bytes in all (deferred ones excluded)."""
    deferred: bool
    """Whether some payloads were left in their files (`drt_batch_deferred`)."""
    lengths: memoryview
    """u64 payload lengths, one per sample."""
    sample_ids: memoryview
    cache_ids: Iterable[int]
    metadata: BatchMetadata
    skipped: list[tuple[int, int, int]]
    """Samples left out as corrupt (on_corrupt="skip"): (at, cache_id, sample_id),
    each standing before the batch's sample `at`, in stream order."""


def unpack(packed: bytes, names: list[str], single_cache_id: int | None) -> PackedBatch:
    """The parts of a packed batch whose schema has the fields `names`; with
    `single_cache_id` (a dataset of one cache) every cache id is that one and is
    not read."""
    count, column_count, payload_bytes, deferred, skipped_count = _HEAD.unpack_from(packed)
    skipped = []
    if skipped_count:
        first = len(packed) - skipped_count * _SKIPPED.size
        for at, sample_id, cache_id in _SKIPPED.iter_unpack(packed[first:]):
            skipped.append((at, cache_id, sample_id))
    words = memoryview(packed).cast("Q")
    lengths_at = _HEAD_WORDS + _COLUMN_WORDS * column_count
    ids_at = lengths_at + count
    # With one cache every id is the same: repeating it spares unpacking one per sample.
    cache_ids: Iterable[int] = (
        repeat(single_cache_id, count)
        if single_cache_id is not None
        else words[ids_at + count : ids_at + 2 * count]
    )
    metadata = BatchMetadata(
        names,
        packed,
        words[_HEAD_WORDS:lengths_at],
        8 * (ids_at + 2 * count),
    )
    return PackedBatch(
        count,
        payload_bytes,
        bool(deferred),
        words[lengths_at:ids_at],
        words[ids_at : ids_at + count],
        cache_ids,
        metadata,
        skipped,
    )


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
        """`descriptors`: `_COLUMN_WORDS` words per column (kind, distinct, values_len,
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
            at += sum(
                map(
                    _padded8,
                    descriptors[_COLUMN_WORDS * earlier + 2 : _COLUMN_WORDS * (earlier + 1)],
                )
            )
        kind, distinct, values_len, offsets_len, bytes_len = descriptors[
            _COLUMN_WORDS * index : _COLUMN_WORDS * (index + 1)
        ]
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


def _column_values(
    kind: int, distinct: int, values: memoryview, offsets: memoryview, strings: bytes
) -> list[Any]:
    """A packed column's values as Python objects (layout in dataset_rt.h)."""
    if kind == KIND_INT:
        return values.cast("q").tolist()
    if kind == KIND_FLOAT:
        return values.cast("d").tolist()
    if kind == KIND_BOOL:
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
