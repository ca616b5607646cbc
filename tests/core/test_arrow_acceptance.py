"""Which metadata.arrow files the reader accepts: every valid Arrow IPC file of the four metadata
types that pyarrow writes, and nothing else.

Each case writes a cache with our writer, replaces its metadata.arrow with a
pyarrow-written file of the same values (fixing ``metadata_sha256`` in
manifest.json so that only the Arrow content is under test) and loads it with
``validate_cache=True``. Accepted variants (several record batches, empty
batches, ``large_utf8``, columns not sorted by name, nullable-flagged fields
without nulls, custom schema metadata, metadata version V4) must iterate
exactly like the original. Rejected variants (nulls, dictionaries, body
compression, int32, float32, binary, ... and tables that disagree with the
manifest) must raise ValueError naming metadata.arrow and the column or
feature, never be misread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cache_reference
import pytest

import dataset_rt
from conftest import pythonpath_before_inherited
from dataset_rt import CacheInput, DatasetRuntime, ReaderConfig, WriterConfig

pa = pytest.importorskip("pyarrow")
ipc = pytest.importorskip("pyarrow.ipc")

ROWS: list[dict[str, Any]] = [
    {"flag": True, "count": 0, "score": 0.1, "label": ""},
    {"flag": False, "count": -1, "score": -0.0, "label": "plain"},
    {"flag": True, "count": 2**63 - 1, "score": 5e-324, "label": 'quote " and \\ backslash'},
    {"flag": False, "count": -(2**63), "score": 1e21, "label": "é 😀 \u2028"},
    {"flag": True, "count": 2**53 + 1, "score": 1.7976931348623157e308, "label": "\x00\x01\n\t"},
    {"flag": True, "count": 42, "score": 0.30000000000000004, "label": "x" * 200},
    {"flag": False, "count": 7, "score": 2.2250738585072014e-308, "label": "last"},
]
NAMES = sorted(ROWS[0])  # count, flag, label, score
PAYLOADS = [bytes([i]) * (3 * i) for i in range(len(ROWS))]
TYPES = {"flag": pa.bool_(), "count": pa.int64(), "score": pa.float64(), "label": pa.utf8()}


def float16_ones(count: int) -> Any:  # a pyarrow Array: pyarrow has no type information
    """`count` ones as float16: from Python floats where pyarrow takes them, else (pyarrow
    before 17 wants NumPy's float16 values) from NumPy."""
    try:
        return pa.array([1.0] * count, pa.float16())
    except pa.ArrowTypeError:
        import numpy as np

        return pa.array(np.full(count, 1.0, np.float16), pa.float16())


class Source:
    name = "arrow_case"

    def __iter__(self) -> Iterator[CacheInput]:
        for data, metadata in zip(PAYLOADS, ROWS, strict=True):
            yield CacheInput(data, metadata)


@pytest.fixture(scope="module")
def runtime() -> DatasetRuntime:
    return DatasetRuntime(num_workers=2)


@pytest.fixture(scope="module")
def original(
    runtime: DatasetRuntime, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Any]]:
    """A cache written by our writer and what it yields."""
    base = tmp_path_factory.mktemp("arrow_original")
    (result,) = runtime.write_cache(Source(), base, writer_config=WriterConfig(show_progress=False))
    assert isinstance(result, dataset_rt.CacheWriteSuccess), result
    return result.path, read_all(runtime, result.path)


def read_all(runtime: DatasetRuntime, path: Path) -> list[Any]:
    dataset = runtime.cached_dataset(
        [path], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    samples = [
        (
            s.data,
            {
                k: (type(v).__name__, v.hex() if isinstance(v, float) else v)
                for k, v in s.metadata.items()
            },
            s.cache_id,
            s.sample_id,
        )
        for s in dataset
    ]
    table = dataset.samples_metadata()
    columns = [(name, str(dtype)) for name, dtype in table.schema.items()]
    values = {
        name: [v.hex() if isinstance(v, float) else v for v in table.get_column(name).to_list()]
        for name in table.columns
    }
    return [samples, columns, values]


def expected_samples() -> list[Any]:
    return [
        (
            data,
            {k: (type(v).__name__, v.hex() if isinstance(v, float) else v) for k, v in row.items()},
            0,
            i,
        )
        for i, (data, row) in enumerate(zip(PAYLOADS, ROWS, strict=True))
    ]


def column(name: str, rows: list[dict[str, Any]] = ROWS, arrow_type: Any = None) -> Any:
    return pa.array([row[name] for row in rows], type=arrow_type or TYPES[name])


def table_of(
    order: list[str] = NAMES,
    types: dict[str, Any] | None = None,
    nullable: bool = False,
    rows: list[dict[str, Any]] = ROWS,
    arrays: dict[str, Any] | None = None,
) -> Any:
    types = {**TYPES, **(types or {})}
    arrays = arrays or {}
    fields = [
        pa.field(name, arrays[name].type if name in arrays else types[name], nullable=nullable)
        for name in order
    ]
    columns = [arrays.get(name, column(name, rows, types[name])) for name in order]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def write_file(
    path: Path, table: Any, batch_sizes: list[int] | None = None, **options: Any
) -> None:
    """An Arrow IPC *file* of `table`, split into record batches of `batch_sizes` rows."""
    write_options = ipc.IpcWriteOptions(**options) if options else None
    with (
        pa.OSFile(str(path), "wb") as sink,
        ipc.new_file(sink, table.schema, options=write_options) as writer,
    ):
        if batch_sizes is None:
            writer.write_table(table)
            return
        assert sum(batch_sizes) == table.num_rows
        start = 0
        for size in batch_sizes:
            writer.write_batch(
                table.slice(start, size).combine_chunks().to_batches()[0]
                if size
                else pa.RecordBatch.from_pylist([], schema=table.schema)
            )
            start += size


def write_stream(path: Path, table: Any) -> None:
    with pa.OSFile(str(path), "wb") as sink, ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def replace_metadata(original: Path, target: Path, write: Callable[[Path], object]) -> Path:
    """A copy of the original cache whose metadata.arrow is written by `write`, with the
    manifest's hash fixed."""
    import shutil

    shutil.copytree(original, target)
    arrow_path = target / "metadata.arrow"
    arrow_path.unlink()
    write(arrow_path)
    manifest = cache_reference.read_manifest(target)
    manifest["metadata_sha256"] = hashlib.sha256(arrow_path.read_bytes()).hexdigest()
    cache_reference.write_manifest(target, manifest)
    return target


def with_nulls(name: str) -> dict[str, Any]:
    values: list[Any] = [row[name] for row in ROWS]
    values[3] = None
    return {name: pa.array(values, type=TYPES[name])}


def small_ints(arrow_type: Any) -> dict[str, Any]:
    """The int column as another integer type (values that fit it)."""
    return {"count": pa.array(list(range(len(ROWS))), type=arrow_type)}


ACCEPTED: dict[str, Callable[[Path], object]] = {
    "pyarrow, one batch": lambda p: write_file(p, table_of()),
    "several record batches": lambda p: write_file(p, table_of(), [3, 2, 1, 1]),
    "one row per batch": lambda p: write_file(p, table_of(), [1] * len(ROWS)),
    "empty record batches among others": lambda p: write_file(p, table_of(), [0, 4, 0, 3, 0]),
    "large_utf8 string column": lambda p: write_file(p, table_of(types={"label": pa.large_utf8()})),
    "large_utf8 in several batches": lambda p: write_file(
        p, table_of(types={"label": pa.large_utf8()}), [2, 5]
    ),
    "columns in reverse order": lambda p: write_file(p, table_of(order=NAMES[::-1])),
    "columns in another order": lambda p: write_file(
        p, table_of(order=["label", "count", "score", "flag"])
    ),
    "nullable-flagged fields without nulls": lambda p: write_file(p, table_of(nullable=True)),
    "everything at once": lambda p: write_file(
        p,
        table_of(order=NAMES[::-1], nullable=True, types={"label": pa.large_utf8()}),
        [2, 0, 3, 2],
    ),
    "custom schema and field metadata": lambda p: write_file(
        p,
        table_of()
        .replace_schema_metadata({"origin": "pyarrow", "pandas": "{}"})
        .cast(
            pa.schema(
                [pa.field(n, TYPES[n], nullable=False, metadata={"note": n}) for n in NAMES],
                metadata={"origin": "pyarrow"},
            )
        ),
    ),
    "metadata version V4": lambda p: write_file(
        p, table_of(), metadata_version=ipc.MetadataVersion.V4
    ),
    "chunked columns written as one table": lambda p: write_file(
        p, pa.concat_tables([table_of(rows=ROWS[:3]), table_of(rows=ROWS[3:])])
    ),
}

# name -> (writer, words the message must contain besides "metadata.arrow")
REJECTED: dict[str, tuple[Callable[[Path], object], list[str]]] = {
    "null in an int64 column": (
        lambda p: write_file(p, table_of(nullable=True, arrays=with_nulls("count"))),
        ["count", "null"],
    ),
    "null in a utf8 column": (
        lambda p: write_file(p, table_of(nullable=True, arrays=with_nulls("label"))),
        ["label", "null"],
    ),
    "null in a bool column": (
        lambda p: write_file(p, table_of(nullable=True, arrays=with_nulls("flag"))),
        ["flag", "null"],
    ),
    "null in a float64 column": (
        lambda p: write_file(p, table_of(nullable=True, arrays=with_nulls("score"))),
        ["score", "null"],
    ),
    "null in a later record batch": (
        lambda p: write_file(p, table_of(nullable=True, arrays=with_nulls("count")), [2, 5]),
        ["count", "null"],
    ),
    "dictionary-encoded utf8": (
        lambda p: write_file(p, table_of(arrays={"label": column("label").dictionary_encode()})),
        ["label", "dictionar"],
    ),
    "lz4_frame body compression": (
        lambda p: write_file(p, table_of(), compression="lz4"),
        ["compress"],
    ),
    "zstd body compression": (
        lambda p: write_file(p, table_of(), compression="zstd"),
        ["compress"],
    ),
    "int32 instead of int64": (
        lambda p: write_file(p, table_of(arrays=small_ints(pa.int32()))),
        ["count", "int32"],
    ),
    "int8 instead of int64": (
        lambda p: write_file(p, table_of(arrays=small_ints(pa.int8()))),
        ["count", "int8"],
    ),
    "uint64 instead of int64": (
        lambda p: write_file(p, table_of(arrays=small_ints(pa.uint64()))),
        ["count", "uint64"],
    ),
    "float32 instead of float64": (
        lambda p: write_file(p, table_of(types={"score": pa.float32()})),
        ["score", "float32"],
    ),
    "float16 instead of float64": (
        lambda p: write_file(
            p,
            table_of(arrays={"score": float16_ones(len(ROWS))}),
        ),
        ["score", "type"],
    ),
    "decimal instead of float64": (
        lambda p: write_file(
            p, table_of(arrays={"score": pa.array([1] * len(ROWS), pa.decimal128(10, 2))})
        ),
        ["score", "decimal"],
    ),
    "binary instead of utf8": (
        lambda p: write_file(p, table_of(types={"label": pa.binary()})),
        ["label", "binary"],
    ),
    "large_binary instead of utf8": (
        lambda p: write_file(p, table_of(types={"label": pa.large_binary()})),
        ["label", "binary"],
    ),
    "string_view instead of utf8": (
        lambda p: write_file(p, table_of(types={"label": pa.string_view()})),
        ["label", "type"],
    ),
    "int8 instead of bool": (
        lambda p: write_file(
            p, table_of(arrays={"flag": pa.array([int(r["flag"]) for r in ROWS], pa.int8())})
        ),
        ["flag", "int8"],
    ),
    "timestamp instead of int64": (
        lambda p: write_file(
            p, table_of(arrays={"count": pa.array(list(range(len(ROWS))), pa.timestamp("us"))})
        ),
        ["count", "timestamp"],
    ),
    "list<int64> instead of int64": (
        lambda p: write_file(p, table_of(arrays={"count": pa.array([[r["count"]] for r in ROWS])})),
        ["count", "list"],
    ),
    "struct instead of utf8": (
        lambda p: write_file(
            p, table_of(arrays={"label": pa.array([{"v": r["label"]} for r in ROWS])})
        ),
        ["label", "struct"],
    ),
    "null-type column": (
        lambda p: write_file(p, table_of(nullable=True, arrays={"label": pa.nulls(len(ROWS))})),
        ["label"],
    ),
    "a column missing": (
        lambda p: write_file(p, table_of(order=["count", "flag", "score"])),
        ["column"],
    ),
    "an extra column": (
        lambda p: write_file(
            p,
            table_of().append_column(
                pa.field("extra", pa.int64(), nullable=False), pa.array([1] * len(ROWS))
            ),
        ),
        ["column"],
    ),
    "a column renamed": (
        lambda p: write_file(p, table_of().rename_columns(["count", "flag", "label", "zcore"])),
        ["score"],
    ),
    "fewer rows than samples": (lambda p: write_file(p, table_of(rows=ROWS[:-1])), ["rows"]),
    "more rows than samples": (lambda p: write_file(p, table_of(rows=[*ROWS, ROWS[0]])), ["rows"]),
    "an IPC stream instead of a file": (lambda p: write_stream(p, table_of()), []),
    "an empty file": (lambda p: p.write_bytes(b""), []),
}


@pytest.mark.parametrize("variant", list(ACCEPTED))
def test_a_valid_pyarrow_file_of_the_metadata_types_is_accepted_and_reads_identically(
    runtime: DatasetRuntime, original: tuple[Path, list[Any]], tmp_path: Path, variant: str
) -> None:
    source, expected = original
    assert expected[0] == expected_samples()  # our own cache reads back its input exactly
    cache = replace_metadata(source, tmp_path / "cache", ACCEPTED[variant])
    assert (cache / "metadata.arrow").read_bytes() != (
        source / "metadata.arrow"
    ).read_bytes() or variant.startswith("pyarrow")
    try:
        got = read_all(runtime, cache)
    except ValueError as error:
        pytest.fail(f"{variant}: a valid Arrow IPC file was rejected: {error}")
    assert got[0] == expected[0], f"{variant}: samples differ"
    assert got[1] == expected[1], f"{variant}: samples_metadata columns differ: {got[1]}"
    assert got[2] == expected[2], f"{variant}: samples_metadata values differ"


@pytest.mark.parametrize("variant", list(REJECTED))
def test_any_other_arrow_content_is_rejected_with_a_clear_error(
    runtime: DatasetRuntime, original: tuple[Path, list[Any]], tmp_path: Path, variant: str
) -> None:
    source, _ = original
    write, words = REJECTED[variant]
    cache = replace_metadata(source, tmp_path / "cache", write)
    with pytest.raises(ValueError) as raised:
        runtime.cached_dataset(
            [cache], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
        )
    message = str(raised.value)
    assert "metadata.arrow" in message, (
        f"{variant}: the error does not name metadata.arrow: {message}"
    )
    for word in words:
        assert word.lower() in message.lower(), (
            f"{variant}: the error does not mention {word!r}: {message}"
        )


def test_the_rejection_does_not_depend_on_validate_cache(
    runtime: DatasetRuntime, original: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    """Without validate_cache the hash is not checked, but an unsupported file is still refused."""
    source, _ = original
    cache = replace_metadata(
        source, tmp_path / "cache", lambda p: write_file(p, table_of(arrays=small_ints(pa.int32())))
    )
    with pytest.raises(ValueError, match="metadata.arrow"):
        runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0, validate_cache=False))


def test_a_changed_value_in_an_accepted_file_is_caught_against_the_embedded_record(
    runtime: DatasetRuntime, original: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    """A well-typed table whose values disagree with the shard records never yields a sample."""
    source, _ = original
    rows = [dict(row) for row in ROWS]
    rows[4]["count"] += 1
    cache = replace_metadata(
        source, tmp_path / "cache", lambda p: write_file(p, table_of(rows=rows))
    )
    message = None
    try:
        dataset = runtime.cached_dataset(
            [cache], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
        )
        for _ in dataset:
            pass
    except ValueError as error:
        message = str(
            error
        )  # no traceback kept: see test_an_iterator_collected_with_its_dataset_does_not_crash
    assert message is not None, (
        "a table that disagrees with the shard records was read without error"
    )
    assert "count" in message and "metadata.arrow" in message, message


def test_a_wrong_metadata_hash_is_rejected_under_validate_cache(
    runtime: DatasetRuntime, original: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    """The harness fixes the hash; without the fix the swapped file must fail validation."""
    source, _ = original
    cache = replace_metadata(
        source, tmp_path / "cache", lambda p: write_file(p, table_of(), [3, 4])
    )
    manifest = cache_reference.read_manifest(cache)
    manifest["metadata_sha256"] = hashlib.sha256(
        (source / "metadata.arrow").read_bytes()
    ).hexdigest()
    cache_reference.write_manifest(cache, manifest, indent=None)
    with pytest.raises(ValueError, match="metadata.arrow"):
        runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0, validate_cache=True))


CYCLE_SCRIPT = """
import gc, sys
from dataset_rt import CacheInput, DatasetRuntime, ReaderConfig, WriterConfig

class Source:
    name = "s"
    def __iter__(self):
        for i in range(100):
            yield CacheInput(b"x" * 100, {"i": i})

runtime = DatasetRuntime(num_workers=2)
quiet = WriterConfig(show_progress=False)
(result,) = runtime.write_cache(Source(), sys.argv[1], writer_config=quiet)

def failed_read():
    config = ReaderConfig(seed=0, prefetch_size=4)
    dataset = runtime.cached_dataset([result.path], reader_config=config)
    iterator = iter(dataset)
    next(iterator)
    try:
        raise ValueError("a read failed")
    except ValueError as error:
        return error  # its traceback holds the frame, the frame holds the iterator and the dataset

error = failed_read()
error.__traceback__.tb_frame.f_locals  # noqa
error.keep = error  # a reference cycle, as pytest.raises and logging create
del error
gc.collect()
print("collected")
"""


def test_an_iterator_collected_with_its_dataset_does_not_crash(tmp_path: Path) -> None:
    """Cyclic garbage (an exception raised mid-iteration, kept with its traceback) holding a live
    iterator and its dataset is finalized in an arbitrary order; destroying the native dataset
    first must not leave the iterator's finalizer with a dangling handle."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    package_parent = Path(dataset_rt.__file__).resolve().parent.parent
    env["PYTHONPATH"] = pythonpath_before_inherited(package_parent)
    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CYCLE_SCRIPT, str(tmp_path / "base")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert completed.returncode == 0 and "collected" in completed.stdout, (
        f"collecting an iterator together with its dataset crashed (exit {completed.returncode}):\n"
        f"{completed.stderr[-3000:]}"
    )
