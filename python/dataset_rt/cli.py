"""The ``dataset-rt`` command: look inside caches, check them, export their metadata,
write them from folders and Parquet files, and run the demo and a quick benchmark.

    dataset-rt info CACHE...                  what a cache holds
    dataset-rt head CACHE [-n N]              its first samples
    dataset-rt metadata CACHE... --out FILE   its metadata table (.parquet, .csv, .arrow)
    dataset-rt verify CACHE...                scrub every byte, list every problem
    dataset-rt write folder DIR --out BASE --name NAME [--lz4]
    dataset-rt write parquet FILE... --data-column COL --out BASE --name NAME [--lz4]
    dataset-rt demo                           the end-to-end demo
    dataset-rt bench                          a quick local benchmark

Also ``python -m dataset_rt``. Exit codes: 0 success, 1 a problem found (a bad or
corrupt cache, a failed write), 2 a usage error (a missing path, a bad option).
Every command takes ``--help``; those that report take ``--json``. See docs/cli.md.
"""

from __future__ import annotations

import enum
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from dataset_rt import (
    CachedDataset,
    CacheInput,
    CacheSource,
    CacheWriteError,
    DatasetRuntime,
    MetadataValue,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
    verify,
)

# What the library raises for a bad cache or a failed operation (docs/api.md, "Errors"):
# each becomes one line on stderr and exit code 1, never a traceback.
_PROBLEMS = (ValueError, OSError, RuntimeError, IndexError, MemoryError)
_EXIT_PROBLEM = 1
_PREVIEW_HEX_BYTES = 16
_PREVIEW_TEXT_BYTES = 40
_WORKERS_DEFAULT = min(os.cpu_count() or 1, 8)
_WORKERS_MAX = 256
_EXPORT_SUFFIXES = (".parquet", ".csv", ".arrow")

app = typer.Typer(
    name="dataset-rt",
    help=(
        "Look inside DatasetRT caches, check them, export their metadata, write them, "
        "and benchmark them. Exit codes: 0 success, 1 a problem found, 2 a usage error."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
_write_app = typer.Typer(
    help="Write a cache from a folder of files or from Parquet files.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(_write_app, name="write")


class _Compression(enum.StrEnum):
    """The payload codec of a generated cache (demo, bench)."""

    none = "none"
    lz4 = "lz4"


class _LabelFrom(enum.StrEnum):
    """Where `write folder` takes each file's label from."""

    parent = "parent"
    none = "none"


# Options shared by several commands.
_CacheArguments = Annotated[
    list[Path],
    typer.Argument(
        help="Cache directories (base/name, the folder holding manifest.json).",
        metavar="CACHE",
        exists=True,
        show_default=False,
    ),
]
_JsonOption = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of text.")
]
_WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        max=_WORKERS_MAX,
        help="Native worker threads (default: the CPU count, at most 8).",
        show_default=False,
    ),
]
_ProgressOption = Annotated[
    bool, typer.Option("--progress/--no-progress", help="Show progress on stderr.")
]


def _fail(message: str) -> NoReturn:
    """Report a problem on one line of stderr and exit with code 1."""
    typer.echo(f"dataset-rt: {message}", err=True)
    raise typer.Exit(_EXIT_PROBLEM)


def _print_json(payload: object) -> None:
    typer.echo(json.dumps(payload, indent=2))


def _console() -> Console:
    # No markup: cache paths and metadata strings are printed as they are.
    return Console(markup=False, highlight=False)


def _error_message(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _directory_bytes(path: Path) -> int:
    """Sizes of the regular files under `path`, added up (0 when it cannot be listed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                continue
    return total


def _open(runtime: DatasetRuntime, cache: Path, *, shuffle: bool = False) -> CachedDataset:
    """One cache, opened (and so checked: manifest, index, metadata, shard lengths) by the core."""
    return runtime.cached_dataset([cache], reader_config=ReaderConfig(seed=0, shuffle=shuffle))


def _manifest(cache: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((cache / "manifest.json").read_text(encoding="utf-8"))
    return manifest


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print the package version and exit.")
    ] = False,
) -> None:
    if version:
        from dataset_rt import __version__

        typer.echo(f"dataset-rt {__version__}")
        raise typer.Exit(0)


# --- info -----------------------------------------------------------------------------------


def _cache_info(runtime: DatasetRuntime, cache: Path) -> dict[str, Any]:
    _open(runtime, cache)
    manifest = _manifest(cache)
    shards: list[dict[str, Any]] = manifest["shards"]
    codecs = {(s["compression"]["algo"], s["compression"]["ratio"]) for s in shards}
    return {
        "path": str(cache),
        "source_name": manifest["source_name"],
        "format_version": manifest["format_version"],
        "samples": manifest["sample_count"],
        "shards": len(shards),
        "bytes_on_disk": _directory_bytes(cache),
        "shard_bytes": sum(s["byte_len"] for s in shards),
        "payload_bytes_uncompressed": sum(s["uncompressed_byte_len"] for s in shards),
        "compression": [{"algo": algo, "ratio": ratio} for algo, ratio in sorted(codecs)],
        "schema": [{"name": f["name"], "kind": f["kind"]} for f in manifest["metadata_schema"]],
        "record_checksums": "record_checksums" in manifest,
    }


def _show_info(console: Console, info: dict[str, Any]) -> None:
    codecs = ", ".join(
        c["algo"] if c["algo"] == "none" else f"{c['algo']} (ratio {c['ratio']})"
        for c in info["compression"]
    )
    table = Table(title=info["path"], show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("source name", info["source_name"])
    table.add_row("format version", str(info["format_version"]))
    table.add_row("samples", f"{info['samples']:,}")
    table.add_row("shards", f"{info['shards']:,}")
    table.add_row("bytes on disk", _bytes_text(info["bytes_on_disk"]))
    table.add_row("payload bytes (uncompressed)", _bytes_text(info["payload_bytes_uncompressed"]))
    table.add_row("compression", codecs)
    table.add_row("record checksums", "yes (records.crc32c)" if info["record_checksums"] else "no")
    table.add_row("schema", "\n".join(f"{f['name']}: {f['kind']}" for f in info["schema"]))
    console.print(table)


def _bytes_text(count: int) -> str:
    if count < 1_000_000:
        return f"{count:,} bytes"
    return f"{count:,} bytes ({count / 1e6:,.1f} MB)"


@app.command()
def info(caches: _CacheArguments, json_output: _JsonOption = False) -> None:
    """Show what each cache holds: source name, samples, shards, bytes on disk and
    uncompressed, compression, metadata schema, format version, record checksums.

    Each cache is opened (and so checked, in milliseconds) by the library first; a
    cache that does not open is reported and the command exits with 1.
    """
    results: list[dict[str, Any]] = []
    with DatasetRuntime(num_workers=1) as runtime:
        for cache in caches:
            try:
                results.append(_cache_info(runtime, cache))
            except (*_PROBLEMS, KeyError, TypeError) as error:
                results.append({"path": str(cache), "error": _error_message(error)})
    failed = [r for r in results if "error" in r]
    if json_output:
        _print_json(results)
    else:
        console = _console()
        for result in results:
            if "error" not in result:
                _show_info(console, result)
        for result in failed:
            typer.echo(f"dataset-rt: {result['error']}", err=True)
    if failed:
        raise typer.Exit(_EXIT_PROBLEM)


# --- head -----------------------------------------------------------------------------------


def _preview(payload: bytes | memoryview) -> tuple[str, str]:
    """A short look at a payload: ("text", its start as text) when that is printable
    UTF-8, else ("hex", its first bytes in hex)."""
    data = bytes(payload[: max(_PREVIEW_HEX_BYTES, _PREVIEW_TEXT_BYTES)])
    hex_preview = ("hex", data[:_PREVIEW_HEX_BYTES].hex(" "))
    start = data[:_PREVIEW_TEXT_BYTES]
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as error:
        # A character cut by the preview's end is not a reason to call it binary.
        if error.reason != "unexpected end of data" or error.start < len(start) - 3:
            return hex_preview
        text = start[: error.start].decode("utf-8")
    if not all(c.isprintable() or c in "\t\n\r" for c in text):
        return hex_preview
    return "text", text


@app.command()
def head(
    cache: Annotated[
        Path,
        typer.Argument(
            help="A cache directory (base/name).", metavar="CACHE", exists=True, show_default=False
        ),
    ],
    count: Annotated[
        int, typer.Option("-n", "--samples", min=0, help="How many samples to show.")
    ] = 10,
    json_output: _JsonOption = False,
) -> None:
    """Show the first samples of a cache: identity, metadata, payload length and a short
    text or hex preview of the payload. Each sample is read and checked as any read is."""
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = _open(runtime, cache)
            shown = min(count, len(dataset))
            samples = dataset.get_many([(0, sample_id) for sample_id in range(shown)])
    except _PROBLEMS as error:
        _fail(_error_message(error))
    rows: list[dict[str, Any]] = []
    for sample in samples:
        kind, preview = _preview(sample.data)
        shown_bytes = len(preview.encode()) if kind == "text" else len(preview.split())
        rows.append(
            {
                "cache_id": sample.cache_id,
                "sample_id": sample.sample_id,
                "metadata": dict(sample.metadata),
                "payload_bytes": len(sample.data),
                "preview_kind": kind,
                "preview": preview,
                "preview_bytes": shown_bytes,
            }
        )
    if json_output:
        _print_json({"path": str(cache), "samples": rows})
        return
    table = Table(title=f"{cache}: first {shown} of {len(dataset):,} samples", title_justify="left")
    for column in ("sample_id", "metadata", "bytes", "preview"):
        table.add_column(column, overflow="fold")
    for row in rows:
        metadata = json.dumps(row["metadata"], ensure_ascii=False, separators=(", ", ": "))
        preview = repr(row["preview"]) if row["preview_kind"] == "text" else row["preview"]
        if row["preview_bytes"] < row["payload_bytes"]:
            preview += " ..."
        table.add_row(str(row["sample_id"]), metadata, f"{row['payload_bytes']:,}", preview)
    _console().print(table)


# --- metadata -------------------------------------------------------------------------------


def _export_path(out: Path) -> Path:
    if out.suffix.lower() not in _EXPORT_SUFFIXES:
        raise typer.BadParameter(
            f"the format comes from the suffix, which must be one of "
            f"{', '.join(_EXPORT_SUFFIXES)}; got {out.suffix or 'none'}"
        )
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise typer.BadParameter(f"directory {parent} does not exist")
    return out


@app.command()
def metadata(
    caches: _CacheArguments,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Where to write the table; .parquet, .csv or .arrow (Arrow IPC file).",
            callback=_export_path,
            show_default=False,
        ),
    ],
    json_output: _JsonOption = False,
) -> None:
    """Export the metadata table of the caches, loaded together, to one file:
    cache_id (the cache's position on the command line), sample_id, the stored
    metadata columns and weight, as DatasetRT's get_metadata() returns it.

    The caches must share one metadata schema. An existing file is replaced.
    """
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=0))
            frame = dataset.get_metadata()
        _write_frame_replacing(frame, out)
    except _PROBLEMS as error:
        _fail(_error_message(error))
    if json_output:
        _print_json(
            {
                "out": str(out),
                "format": out.suffix.lower().removeprefix("."),
                "rows": frame.height,
                "columns": frame.columns,
                "caches": [{"cache_id": i, "path": str(c)} for i, c in enumerate(caches)],
            }
        )
    else:
        typer.echo(f"wrote {frame.height:,} rows x {frame.width} columns to {out}")


def _write_frame_replacing(frame: Any, out: Path) -> None:
    """Write next to `out`, then rename: a failed export leaves no half-written file."""
    suffix = out.suffix.lower()
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if suffix == ".parquet":
            frame.write_parquet(staging)
        elif suffix == ".csv":
            frame.write_csv(staging)
        else:
            frame.write_ipc(staging)
        os.replace(staging, out)
    finally:
        staging.unlink(missing_ok=True)


# --- verify ---------------------------------------------------------------------------------


@app.command("verify")
def verify_command(
    caches: _CacheArguments,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    progress: _ProgressOption = True,
    json_output: _JsonOption = False,
) -> None:
    """Scrub each cache completely (every SHA-256, every record's checksum, placement,
    metadata and LZ4 block) with dataset_rt.verify, and list every problem found.

    Exits with 1 when any cache has a problem.
    """
    sizes = [_directory_bytes(cache) for cache in caches]
    reports = []
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
    )
    stderr = Console(stderr=True, markup=False, highlight=False)
    # A bar only on a terminal: in a pipe or a log it would be noise.
    shown = progress and stderr.is_terminal
    with Progress(*columns, console=stderr, disable=not shown, transient=True) as bar:
        task = bar.add_task("verifying", total=sum(sizes))
        before = 0
        for cache, size in zip(caches, sizes, strict=True):
            bar.update(task, description=f"verifying {cache}", completed=before)

            # The core's count covers every byte it reads (shards twice: hash, then
            # records): the bar shows this cache's share of it.
            def advance(checked: int, total: int, before: int = before, size: int = size) -> None:
                share = size * min(checked, total) // total if total else 0
                bar.update(task, completed=before + share)

            try:
                reports.append(
                    verify(cache, num_workers=workers, show_progress=False, on_progress=advance)
                )
            except _PROBLEMS as error:
                _fail(f"cannot verify {cache}: {_error_message(error)}")
            before += size
            bar.update(task, completed=before)
    results = [
        {
            "path": str(report.path),
            "ok": report.ok,
            "bytes": size,
            "problems_total": report.problems_total,
            "problems": [problem._asdict() for problem in report.problems],
        }
        for report, size in zip(reports, sizes, strict=True)
    ]
    ok = all(report.ok for report in reports)
    if json_output:
        _print_json({"ok": ok, "caches": results})
    else:
        for result in results:
            _show_verify_result(result)
    if not ok:
        raise typer.Exit(_EXIT_PROBLEM)


def _show_verify_result(result: dict[str, Any]) -> None:
    if result["ok"]:
        typer.echo(f"ok: {result['path']} ({result['bytes']:,} bytes checked)")
        return
    total = result["problems_total"]
    typer.echo(f"FAILED: {result['path']}: {total:,} problem{'s' if total != 1 else ''}")
    for problem in result["problems"]:
        typer.echo(f"  {_problem_line(problem)}")
    if total > len(result["problems"]):
        typer.echo(f"  ... and {total - len(result['problems']):,} more")


def _problem_line(problem: dict[str, Any]) -> str:
    """The problem's message, after where it is unless the message already says so."""
    message: str = problem["message"]
    where = []
    if problem["file"] and problem["file"] not in message:
        where.append(problem["file"])
    if problem["sample_id"] is not None and f"sample {problem['sample_id']}" not in message:
        where.append(f"sample {problem['sample_id']}")
        if problem["offset"] is not None:
            where.append(f"offset {problem['offset']}")
    return f"{', '.join(where)}: {message}" if where else message


# --- write ----------------------------------------------------------------------------------

_OutOption = Annotated[
    Path,
    typer.Option(
        "--out", "-o", help="Base directory; the cache goes to BASE/NAME.", show_default=False
    ),
]
_NameOption = Annotated[
    str,
    typer.Option(
        "--name", help="The cache's (source's) name: one plain path segment.", show_default=False
    ),
]
_Lz4Option = Annotated[bool, typer.Option("--lz4", help="Compress payloads with LZ4.")]
_MaxShardBytesOption = Annotated[
    int,
    typer.Option("--max-shard-bytes", min=1, help="Start a new shard past this many bytes."),
]
_MAX_SHARD_BYTES_DEFAULT = WriterConfig().max_shard_bytes


def _make_source(build: Callable[[], CacheSource]) -> CacheSource:
    """A source built from the command line; what it refuses while reading its input
    (a missing column, an unreadable file) is a problem found: exit 1."""
    try:
        return build()
    except (*_PROBLEMS, TypeError, KeyError) as error:
        _fail(f"cannot read the input: {_error_message(error)}")


def _write(
    source: CacheSource,
    out: Path,
    *,
    lz4: bool,
    max_shard_bytes: int,
    workers: int,
    progress: bool,
    json_output: bool,
) -> None:
    compression = ShardCompression(algo="lz4", ratio=1.0) if lz4 else ShardCompression()
    config = WriterConfig(
        shard_compression=compression, show_progress=progress, max_shard_bytes=max_shard_bytes
    )
    started = time.perf_counter()
    try:
        with DatasetRuntime(num_workers=workers) as runtime:
            [result] = runtime.write_cache(source, out, writer_config=config)
    except _PROBLEMS as error:
        _fail(_error_message(error))
    seconds = time.perf_counter() - started
    if isinstance(result, CacheWriteError):
        _fail(f"cannot write {result.source_name}: {result.message}")
    samples = _manifest(result.path)["sample_count"]
    written = {
        "source_name": result.source_name,
        "path": str(result.path),
        "samples": samples,
        "bytes_on_disk": _directory_bytes(result.path),
        "seconds": round(seconds, 6),
    }
    if json_output:
        _print_json(written)
    else:
        typer.echo(
            f"wrote {written['path']}: {samples:,} samples, "
            f"{_bytes_text(written['bytes_on_disk'])} on disk, in {seconds:.3f}s"
        )


@_write_app.command("folder")
def write_folder(
    directory: Annotated[
        Path,
        typer.Argument(
            help="The folder; every file under it becomes one sample (sorted by path).",
            exists=True,
            file_okay=False,
            show_default=False,
        ),
    ],
    out: _OutOption,
    name: _NameOption,
    lz4: _Lz4Option = False,
    label_from: Annotated[
        _LabelFrom,
        typer.Option(
            "--label-from",
            help="parent: a 'label' field with each file's folder name; none: no label.",
        ),
    ] = _LabelFrom.parent,
    extensions: Annotated[
        list[str] | None,
        typer.Option(
            "--extension",
            "-e",
            help="Only files with this extension (repeat for several, e.g. -e .png -e .jpg).",
            show_default=False,
        ),
    ] = None,
    max_shard_bytes: _MaxShardBytesOption = _MAX_SHARD_BYTES_DEFAULT,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    progress: _ProgressOption = True,
    json_output: _JsonOption = False,
) -> None:
    """Write a cache from a folder with dataset_rt.sources.FolderSource: one sample per
    file, the file's bytes as payload, its relative path, size and (by default) label as
    metadata."""
    from dataset_rt.sources import FolderSource

    label: Literal["parent"] | None = None if label_from is _LabelFrom.none else "parent"
    source = _make_source(
        lambda: FolderSource(directory, name=name, label_from=label, extensions=extensions)
    )
    _write(
        source,
        out,
        lz4=lz4,
        max_shard_bytes=max_shard_bytes,
        workers=workers,
        progress=progress,
        json_output=json_output,
    )


@_write_app.command("parquet")
def write_parquet(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Parquet files, read in the order given.", exists=True, show_default=False
        ),
    ],
    data_column: Annotated[
        str,
        typer.Option(
            "--data-column", help="The binary column holding the payloads.", show_default=False
        ),
    ],
    out: _OutOption,
    name: _NameOption,
    metadata_columns: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata-column",
            "-m",
            help=(
                "A column to keep as metadata (repeat for several; "
                "default: every column but the data column)."
            ),
            show_default=False,
        ),
    ] = None,
    lz4: _Lz4Option = False,
    max_shard_bytes: _MaxShardBytesOption = _MAX_SHARD_BYTES_DEFAULT,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    progress: _ProgressOption = True,
    json_output: _JsonOption = False,
) -> None:
    """Write a cache from Parquet files with dataset_rt.sources.ParquetSource: one sample
    per row, the data column as payload, the metadata columns as metadata."""
    from dataset_rt.sources import ParquetSource

    source = _make_source(
        lambda: ParquetSource(
            files, data_column=data_column, metadata_columns=metadata_columns, name=name
        )
    )
    _write(
        source,
        out,
        lz4=lz4,
        max_shard_bytes=max_shard_bytes,
        workers=workers,
        progress=progress,
        json_output=json_output,
    )


# --- demo -----------------------------------------------------------------------------------


@app.command()
def demo(
    samples: Annotated[
        int | None, typer.Option(min=1, help="Samples to write (demo default 200,000).")
    ] = None,
    payload_bytes: Annotated[
        int | None, typer.Option(min=0, help="Bytes per payload (demo default 1,024).")
    ] = None,
    compression: Annotated[
        _Compression | None, typer.Option(help="Payload codec (demo default lz4).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, max=_WORKERS_MAX, help="Worker threads (demo default 2).")
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Base cache directory (default: a temporary one, removed)."),
    ] = None,
) -> None:
    """Run the end-to-end demo (python -m dataset_rt.demo): write a generated cache, read
    every sample back and compare it, and verify the cache, printing how fast each step is."""
    from dataset_rt import demo as demo_script

    argv: list[str] = []
    for option, value in (
        ("--samples", samples),
        ("--payload-bytes", payload_bytes),
        ("--compression", compression.value if compression is not None else None),
        ("--workers", workers),
        ("--dir", directory),
    ):
        if value is not None:
            argv += [option, str(value)]
    raise typer.Exit(demo_script.main(argv))


# --- bench ----------------------------------------------------------------------------------

_BENCH_PAYLOADS = 256


class _BenchSource:
    """Generated samples: payloads drawn from a fixed pool (half random bytes, half
    zeros, so LZ4 has something to do), metadata of every kind."""

    name = "bench"

    def __init__(self, samples: int, payload_bytes: int) -> None:
        generator = random.Random(0)
        random_bytes = payload_bytes // 2
        self._samples = samples
        self._pool = [
            generator.randbytes(random_bytes) + bytes(payload_bytes - random_bytes)
            for _ in range(_BENCH_PAYLOADS)
        ]

    def __iter__(self) -> Iterator[CacheInput]:
        pool = self._pool
        for index in range(self._samples):
            metadata: dict[str, MetadataValue] = {
                "index": index,
                "label": f"l{index % 10}",
                "score": index / 7,
            }
            yield CacheInput(pool[index % _BENCH_PAYLOADS], metadata)


def _timed_read(dataset: CachedDataset) -> tuple[float, int, int]:
    """(seconds, samples, payload bytes) of one full pass over the next epoch."""
    started = time.perf_counter()
    samples = 0
    payload_bytes = 0
    for sample in dataset:
        samples += 1
        payload_bytes += len(sample.data)
    return time.perf_counter() - started, samples, payload_bytes


def _bench_row(name: str, seconds: float, samples: int, payload_bytes: int) -> dict[str, Any]:
    seconds = max(seconds, 1e-9)
    return {
        "pass": name,
        "samples": samples,
        "seconds": round(seconds, 6),
        "samples_per_second": round(samples / seconds, 1),
        "megabytes_per_second": round(payload_bytes / seconds / 1e6, 2),
    }


def _run_bench(
    samples: int, payload_bytes: int, compression: _Compression, workers: int, base: Path
) -> list[dict[str, Any]]:
    algo: Literal["none", "lz4"] = "lz4" if compression is _Compression.lz4 else "none"
    config = WriterConfig(
        shard_compression=ShardCompression(algo=algo, ratio=1.0), show_progress=False
    )
    source = _BenchSource(samples, payload_bytes)
    with DatasetRuntime(num_workers=workers) as runtime:
        started = time.perf_counter()
        [result] = runtime.write_cache(source, base, writer_config=config)
        write_seconds = time.perf_counter() - started
        if isinstance(result, CacheWriteError):
            _fail(f"cannot write the benchmark cache: {result.message}")
        rows = [_bench_row("write", write_seconds, samples, samples * payload_bytes)]
        ordered = _open(runtime, result.path, shuffle=False)
        rows.append(_bench_row("read, ordered", *_timed_read(ordered)))
        shuffled = _open(runtime, result.path, shuffle=True)
        rows.append(_bench_row("read, shuffled", *_timed_read(shuffled)))
    return rows


@app.command()
def bench(
    samples: Annotated[int, typer.Option(min=1, help="Samples in the generated cache.")] = 100_000,
    payload_bytes: Annotated[int, typer.Option(min=0, help="Bytes per payload.")] = 1024,
    compression: Annotated[_Compression, typer.Option(help="Payload codec.")] = _Compression.none,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            exists=True,
            file_okay=False,
            help="Where to make the temporary cache (default: the system's temporary directory).",
        ),
    ] = None,
    json_output: _JsonOption = False,
) -> None:
    """A quick local benchmark: write a generated cache in a temporary directory, read it
    once in order and once shuffled, and print samples/s and MB/s of each pass. The
    cache is removed afterwards. A few seconds with the defaults; --samples and
    --payload-bytes set the size."""
    try:
        with tempfile.TemporaryDirectory(prefix="dataset_rt_bench_", dir=directory) as base:
            rows = _run_bench(samples, payload_bytes, compression, workers, Path(base))
    except _PROBLEMS as error:
        _fail(_error_message(error))
    setup = {
        "samples": samples,
        "payload_bytes": payload_bytes,
        "compression": compression.value,
        "workers": workers,
    }
    if json_output:
        _print_json({**setup, "passes": rows})
        return
    title = (
        f"{samples:,} samples x {payload_bytes:,} bytes, {compression.value}, "
        f"{workers} worker{'s' if workers != 1 else ''}"
    )
    table = Table(title=title, title_justify="left")
    for column in ("pass", "seconds", "samples/s", "MB/s"):
        table.add_column(column, justify="left" if column == "pass" else "right")
    for row in rows:
        table.add_row(
            row["pass"],
            f"{row['seconds']:.3f}",
            f"{row['samples_per_second']:,.0f}",
            f"{row['megabytes_per_second']:,.1f}",
        )
    _console().print(table)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``dataset-rt`` command with `argv` (default: the process's arguments).

    The entry point of the console script and of ``python -m dataset_rt``; it exits
    the process with the command's exit code (0, 1 or 2).

    >>> main(["info", "caches/train"])  # doctest: +SKIP
    """
    app(args=list(argv) if argv is not None else None)
