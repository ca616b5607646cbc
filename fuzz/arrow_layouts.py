"""The metadata.arrow files the fuzz harness (`cache_files.py`) writes with pyarrow: every
layout the reader must accept, and features it documents as refused (`ArrowLayout`), and
where a file's structure is (the places worth mutating).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from cache_model import SCHEMA
from cache_mutations import Choices


@dataclass(frozen=True)
class ArrowLayout:
    """How pyarrow writes a metadata.arrow: what the reader must accept (several batches,
    large_utf8, any column order, nullable fields without nulls, V4, the pre-0.15 layout)
    and, in `invalid`, a feature it documents as refused."""

    rows_per_batch: int
    empty_batches: bool
    large_strings: bool
    column_order: tuple[str, ...]
    nullable: bool
    version_4: bool
    legacy: bool
    invalid: str

    INVALID = (
        "",
        "",
        "",
        "",
        "an int32 column",
        "a float32 column",
        "a null",
        "a dictionary column",
        "zstd body compression",
        "an extra column",
        "a missing column",
        "a uint64 column",
        "a binary column",
        "one row too many",
    )

    @property
    def valid(self) -> bool:
        return not self.invalid

    @classmethod
    def chosen(cls, choices: Choices) -> ArrowLayout:
        names = list(SCHEMA)
        order = choices.below(24)
        permuted = []
        for position in range(len(names), 0, -1):
            permuted.append(names.pop(order % position))
            order //= position
        return cls(
            rows_per_batch=(1, 2, 3, 100)[choices.byte() % 4],
            empty_batches=choices.flag(),
            large_strings=choices.flag(),
            column_order=tuple(permuted),
            nullable=choices.flag(),
            version_4=choices.flag(),
            legacy=choices.flag(),
            invalid=cls.INVALID[choices.below(len(cls.INVALID))],
        )

    def summary(self) -> str:
        return f"arrow[{self.invalid or 'valid'}]"

    def write(self, rows: list[dict[str, object]]) -> bytes:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.ipc as ipc  # type: ignore[import-untyped]

        types = {
            "b": pa.bool_(),
            "f": pa.float32() if self.invalid == "a float32 column" else pa.float64(),
            "i": {"an int32 column": pa.int32(), "a uint64 column": pa.uint64()}.get(
                self.invalid, pa.int64()
            ),
            "s": {"a binary column": pa.binary()}.get(
                self.invalid, pa.large_utf8() if self.large_strings else pa.utf8()
            ),
        }
        values = {name: [row[name] for row in rows] for name in SCHEMA}
        if self.invalid == "a null":
            values["s"][0] = None
        if self.invalid == "one row too many":
            values = {name: [*column, column[0]] for name, column in values.items()}
        columns = {
            name: pa.array(values[name]).cast(types[name], safe=False) for name in self.column_order
        }
        if self.invalid == "a dictionary column":
            columns["s"] = columns["s"].dictionary_encode()
        if self.invalid == "an extra column":
            columns["x"] = pa.array(values["i"], pa.int64())
        if self.invalid == "a missing column":
            del columns["b"]
        nullable = self.nullable or self.invalid == "a null"
        fields = [pa.field(name, array.type, nullable=nullable) for name, array in columns.items()]
        table = pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))
        options = ipc.IpcWriteOptions(
            metadata_version=ipc.MetadataVersion.V4 if self.version_4 else ipc.MetadataVersion.V5,
            use_legacy_format=self.legacy,
            compression="zstd" if self.invalid == "zstd body compression" else None,
        )
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema, options=options) as writer:
            for batch in table.to_batches(max_chunksize=self.rows_per_batch):
                if self.empty_batches:
                    writer.write_batch(batch.slice(0, 0))
                writer.write_batch(batch)
        return bytes(sink.getvalue().to_pybytes())


def arrow_hot_points(data: bytes) -> list[int]:
    """The footer, its length and every message's length prefix (not the magic: a broken
    magic only ever reaches the first check)."""
    if len(data) < 10:
        return [0]
    footer = len(data) - 10 - struct.unpack_from("<i", data, len(data) - 10)[0]
    markers = [m.start() for m in re.finditer(b"\xff\xff\xff\xff", data)]
    return [8, footer, len(data) - 10, *markers]
