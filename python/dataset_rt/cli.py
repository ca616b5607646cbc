"""The ``dataset-rt`` command: look inside caches, check them, export their metadata,
write them from folders and Parquet files, and run the demo and a quick benchmark.

    dataset-rt ls BASE                        the caches in a base folder, and what else is there
    dataset-rt info CACHE...                  what a cache holds (on a base: its caches)
    dataset-rt head CACHE [-n N]              its first samples, with the kind of each payload
    dataset-rt get CACHE SAMPLE_ID [--out FILE]   one payload, as raw bytes
    dataset-rt metadata CACHE... --out FILE   its metadata table (.parquet, .csv, .arrow)
    dataset-rt verify CACHE...                scrub every byte, list every problem
    dataset-rt write folder DIR --out BASE [--name NAME] [--overwrite] [--lz4]
    dataset-rt write parquet FILE... --data-column COL --out BASE [--name NAME] [--overwrite]
    dataset-rt demo                           the end-to-end demo
    dataset-rt bench                          a quick local benchmark

Also ``python -m dataset_rt``. Exit codes: 0 success, 1 a problem found (a bad or
corrupt cache, a failed write), 2 a usage error (a missing path, a bad option or
name), reported before any work. Every command takes ``--help``; those that report
take ``--json``. See docs/cli.md.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import inspect
import json
import os
import random
import shutil
import struct
import sys
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
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

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
from dataset_rt._binding import native as _native

# What the library raises for a bad cache or a failed operation (docs/api.md, "Errors"):
# each becomes one line on stderr and exit code 1, never a traceback.
_PROBLEMS = (ValueError, OSError, RuntimeError, IndexError, MemoryError)
_EXIT_PROBLEM = 1
_PREVIEW_HEX_BYTES = 16
_PREVIEW_TEXT_BYTES = 40
_WORKERS_DEFAULT = min(os.cpu_count() or 1, 8)
_WORKERS_MAX = 256
_EXPORT_SUFFIXES = (".parquet", ".csv", ".arrow")
_STAGING_AREA = "tmp"  # <base>/tmp: the writers' staging directories and lock files
_OVERWRITE_SUFFIX = ".overwrite"  # <base>/tmp/<pid>.<random>.overwrite: `write --overwrite`

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


class _Labels(enum.StrEnum):
    """What `write folder` stores as each file's label."""

    by_index = "index"
    by_name = "name"
    none = "none"


# Options shared by several commands.
_CacheArguments = Annotated[
    list[Path],
    typer.Argument(
        help="Cache directories (base/name, the folder holding manifest.json).",
        metavar="CACHE",
        exists=True,
        file_okay=False,
        show_default=False,
    ),
]
_CacheArgument = Annotated[
    Path,
    typer.Argument(
        help="A cache directory (base/name).",
        metavar="CACHE",
        exists=True,
        file_okay=False,
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
    bool,
    typer.Option(
        "--progress/--no-progress",
        help="Show progress on stderr (only ever when stderr is a terminal).",
    ),
]


def _fail(message: str) -> NoReturn:
    """Report a problem on one line of stderr and exit with code 1."""
    typer.echo(f"dataset-rt: {message}", err=True)
    raise typer.Exit(_EXIT_PROBLEM)


def _note(message: str) -> None:
    """Tell the user something on stderr that does not change the exit code."""
    typer.echo(f"dataset-rt: {message}", err=True)


def _usage_error(ctx: typer.Context, message: str, option: str) -> NoReturn:
    """A usage error (exit 2) about `option`, reported as typer reports its own."""
    raise typer.BadParameter(message, ctx=ctx, param_hint=f"'{option}'")


def _print_json(payload: object) -> None:
    typer.echo(json.dumps(payload, indent=2))


def _console() -> Console:
    # No markup: cache paths and metadata strings are printed as they are.
    return Console(markup=False, highlight=False)


def _stderr_is_terminal() -> bool:
    """Whether stderr is a terminal: progress is shown there only (a log or a pipe gets
    no carriage returns or escape codes, whatever FORCE_COLOR and the like say)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _stderr_console() -> Console:
    return Console(stderr=True, markup=False, highlight=False)


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


def _is_cache(path: Path) -> bool:
    """Whether `path` is a published cache (the core's rule: it holds its manifest)."""
    try:
        return _native.cache_published(path)
    except _PROBLEMS:
        return False


def _compression(info: _native.CacheInfo) -> list[dict[str, Any]]:
    """The shards' compression settings, each once, as the JSON output lists them."""
    return [{"algo": algo, "ratio": ratio} for algo, ratio in info.compression]


def _format_of(info: _native.CacheInfo | None) -> dict[str, Any]:
    """The cache's format version and the cache_id its manifest persists (None in
    format 2, where a cache's id is its position among the caches read)."""
    if info is None:
        return {"format_version": None, "cache_id": None}
    return {"format_version": info.format_version, "cache_id": info.cache_id}


def _format_text(entry: dict[str, Any]) -> str:
    """`2`, or `3, cache_id N`."""
    if entry["cache_id"] is None:
        return str(entry["format_version"])
    return f"{entry['format_version']}, cache_id {entry['cache_id']}"


def _cache_id_text(entry: dict[str, Any]) -> str:
    if entry["cache_id"] is None:
        return "none (format 2)"
    return str(entry["cache_id"])


def _codecs_text(compression: list[dict[str, Any]]) -> str:
    return ", ".join(
        c["algo"] if c["algo"] == "none" else f"{c['algo']} (ratio {c['ratio']})"
        for c in compression
    )


def _bytes_text(count: int) -> str:
    if count < 1_000_000:
        return f"{count:,} bytes"
    return f"{count:,} bytes ({count / 1e6:,.1f} MB)"


def _replace_file(out: Path, write: Callable[[Path], None]) -> None:
    """Write next to `out`, then rename: a failed write leaves no half-written file."""
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        write(staging)
        os.replace(staging, out)
    finally:
        staging.unlink(missing_ok=True)


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


# --- base folders: ls -----------------------------------------------------------------------


def _lock_held(base: Path, name: str) -> bool | None:
    """Whether a running writer holds the lock file of `name` in `base`/tmp, as the core
    tells (None where the lock file cannot be opened or locked)."""
    try:
        return _native.writer_active(base, name)
    except ValueError:  # a name no writer can take: no writer holds its lock
        return False
    except OSError:
        return None


def _staging_entry(entry: Path) -> dict[str, Any]:
    """What one entry of <base>/tmp is."""
    relative = f"{_STAGING_AREA}/{entry.name}"
    if entry.is_file() and entry.name.endswith(".lock"):
        name = entry.name.removesuffix(".lock")
        held = _lock_held(entry.parent.parent, name)
        note = {
            True: f"lock file of a running writer of {name!r}",
            False: f"lock file of {name!r}, not held: harmless, the next writer of "
            f"{name!r} reuses it",
            None: f"lock file of {name!r} (whether a writer holds it cannot be told here)",
        }[held]
        return {"path": relative, "kind": "lock", "bytes": 0, "held": held, "note": note}
    size = _directory_bytes(entry) if entry.is_dir() else entry.stat().st_size
    if entry.is_dir() and entry.name.endswith(".staging"):
        note = (
            "staging directory of a writer that is running or was killed (delete it when none runs)"
        )
        return {"path": relative, "kind": "staging", "bytes": size, "note": note}
    if entry.is_dir() and entry.name.endswith(_OVERWRITE_SUFFIX):
        note = (
            "work folder of a `write --overwrite` that is running or was killed "
            "(delete it when none runs)"
        )
        return {"path": relative, "kind": "overwrite", "bytes": size, "note": note}
    return {"path": relative, "kind": "other", "bytes": size, "note": "not made by a writer"}


def _base_listing(base: Path) -> dict[str, Any]:
    """The caches in `base`, from their manifests, and every other entry, said what it is."""
    caches: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for entry in sorted(base.iterdir(), key=lambda p: p.name):
        if entry.name == _STAGING_AREA and entry.is_dir() and not entry.is_symlink():
            other.extend(_staging_entry(e) for e in sorted(entry.iterdir(), key=lambda p: p.name))
            continue
        if not entry.is_dir():
            size = entry.stat().st_size if entry.exists() else 0
            other.append(
                {"path": entry.name, "kind": "file", "bytes": size, "note": "a file, not a cache"}
            )
            continue
        if not _is_cache(entry):
            other.append(
                {
                    "path": entry.name,
                    "kind": "folder",
                    "bytes": _directory_bytes(entry),
                    "note": "a folder without manifest.json, not a cache",
                }
            )
            continue
        try:
            summary = _native.cache_info(entry)
        except _PROBLEMS as error:
            other.append(
                {
                    "path": entry.name,
                    "kind": "unreadable",
                    "bytes": _directory_bytes(entry),
                    "note": f"its manifest.json cannot be read ({_error_message(error)})",
                }
            )
            continue
        caches.append(
            {
                "name": entry.name,
                "path": str(entry),
                "samples": summary.samples,
                **_format_of(summary),
                "bytes_on_disk": _directory_bytes(entry),
                "compression": _compression(summary),
                "record_checksums": summary.record_checksums,
            }
        )
    return {"path": str(base), "caches": caches, "other": other}


def _is_base(path: Path) -> bool:
    """A folder that is not a cache but holds one, or a writers' staging area."""
    if _is_cache(path):
        return False
    try:
        entries = list(path.iterdir())
    except OSError:
        return False
    return any(
        (entry.name == _STAGING_AREA and entry.is_dir()) or _is_cache(entry) for entry in entries
    )


def _show_listing(console: Console, listing: dict[str, Any], title: str) -> None:
    if listing["caches"]:
        table = Table(title=title, title_justify="left")
        columns = ("name", "format", "cache id", "samples", "bytes on disk", "compression")
        for column in (*columns, "record checksums"):
            table.add_column(
                column,
                justify="right" if column in ("samples", "bytes on disk") else "left",
                overflow="fold" if column == "cache id" else "ellipsis",
            )
        for cache in listing["caches"]:
            table.add_row(
                cache["name"],
                str(cache["format_version"]),
                "" if cache["cache_id"] is None else str(cache["cache_id"]),
                f"{cache['samples']:,}",
                f"{cache['bytes_on_disk']:,}",
                _codecs_text(cache["compression"]),
                "yes" if cache["record_checksums"] else "no",
            )
        console.print(table)
    else:
        typer.echo(f"{title}: no caches")
    if listing["other"]:
        typer.echo("not caches:")
        width = max(len(entry["path"]) for entry in listing["other"])
        for entry in listing["other"]:
            typer.echo(f"  {entry['path']:<{width}}  {entry['note']}")


@app.command("ls")
def ls_command(
    base: Annotated[
        Path,
        typer.Argument(
            help="A base folder: the --out of the writes, holding caches side by side.",
            metavar="BASE",
            exists=True,
            file_okay=False,
            show_default=False,
        ),
    ],
    json_output: _JsonOption = False,
) -> None:
    """List the caches in a base folder (name, samples, bytes on disk, compression,
    record checksums, from each manifest.json as the core reads it; no other file is
    opened or checked), then
    everything else there: writers' staging directories and lock files under tmp/,
    and files and folders that are not caches."""
    if _is_cache(base):
        _fail(
            f"{base} is a cache, not a base folder: `dataset-rt info {base}` shows it, "
            f"`dataset-rt ls {base.parent}` lists its base"
        )
    try:
        listing = _base_listing(base)
    except OSError as error:
        _fail(f"cannot list {base}: {_error_message(error)}")
    if json_output:
        _print_json(listing)
    else:
        _show_listing(_console(), listing, str(base))


# --- info -----------------------------------------------------------------------------------


def _cache_info(runtime: DatasetRuntime, cache: Path) -> dict[str, Any]:
    if not _is_cache(cache):
        if _is_base(cache):
            return {"path": str(cache), "base": True, **_base_listing(cache)}
        raise ValueError(f"{cache} is not a cache: it has no manifest.json, and holds no cache")
    _open(runtime, cache)
    summary = _native.cache_info(cache)
    return {
        "path": str(cache),
        "source_name": summary.source_name,
        **_format_of(summary),
        "samples": summary.samples,
        "shards": summary.shards,
        "bytes_on_disk": _directory_bytes(cache),
        "shard_bytes": summary.shard_bytes,
        "payload_bytes_uncompressed": summary.payload_bytes_uncompressed,
        "compression": _compression(summary),
        "schema": [{"name": name, "kind": kind} for name, kind in summary.schema],
        "record_checksums": summary.record_checksums,
    }


def _show_info(console: Console, info: dict[str, Any]) -> None:
    if info.get("base"):
        count = len(info["caches"])
        typer.echo(
            f"{info['path']} is a base folder, not a cache; "
            f"it holds {count} cache{'s' if count != 1 else ''}:"
        )
        _show_listing(console, info, info["path"])
        return
    table = Table(title=info["path"], show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("source name", info["source_name"])
    table.add_row("format version", str(info["format_version"]))
    table.add_row("cache id", _cache_id_text(info))
    table.add_row("samples", f"{info['samples']:,}")
    table.add_row("shards", f"{info['shards']:,}")
    table.add_row("bytes on disk", _bytes_text(info["bytes_on_disk"]))
    table.add_row("payload bytes (uncompressed)", _bytes_text(info["payload_bytes_uncompressed"]))
    table.add_row("compression", _codecs_text(info["compression"]))
    table.add_row("record checksums", "yes (records.crc32c)" if info["record_checksums"] else "no")
    table.add_row("schema", "\n".join(f"{f['name']}: {f['kind']}" for f in info["schema"]))
    console.print(table)


@app.command()
def info(caches: _CacheArguments, json_output: _JsonOption = False) -> None:
    """Show what each cache holds: source name, samples, shards, bytes on disk and
    uncompressed, compression, metadata schema, format version, record checksums.

    Each cache is opened (and so checked, in milliseconds) by the library first; a
    cache that does not open is reported and the command exits with 1. A base folder
    (one holding caches) is said to be one, and its caches are listed as `ls` does.
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

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOR_TYPES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
_NPY_MAGIC = b"\x93NUMPY"
_NPY_HEADER_MAX = 65_536
_NPY_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}


def _png(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(_PNG_SIGNATURE):
        return None
    if len(data) < 26 or data[12:16] != b"IHDR":
        return {"preview_kind": "png", "preview": "PNG image", "width": None, "height": None}
    width, height = struct.unpack(">II", data[16:24])
    color = _PNG_COLOR_TYPES.get(data[25], f"color type {data[25]}")
    return {
        "preview_kind": "png",
        "preview": f"PNG image, {width} x {height}, {color}",
        "width": width,
        "height": height,
    }


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's first start-of-frame marker, if one is found."""
    position = 2
    while position + 9 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[position + 5 : position + 7], "big")
            width = int.from_bytes(data[position + 7 : position + 9], "big")
            return width, height
        if marker == 0xDA or length < 2:  # image data: no frame header before it
            return None
        position += 2 + length
    return None


def _jpeg(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    size = _jpeg_size(data)
    width, height = size if size is not None else (None, None)
    preview = "JPEG image" if size is None else f"JPEG image, {width} x {height}"
    return {"preview_kind": "jpeg", "preview": preview, "width": width, "height": height}


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _webp(data: bytes) -> dict[str, Any] | None:
    if len(data) < 16 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    size = _webp_size(data)
    width, height = size if size is not None else (None, None)
    preview = "WebP image" if size is None else f"WebP image, {width} x {height}"
    return {"preview_kind": "webp", "preview": preview, "width": width, "height": height}


def _npy_dtype(descr: object) -> str:
    """A NumPy dtype description ('<f4') in words ('float32'); others as they are."""
    if not isinstance(descr, str):
        return "structured"
    order, code = (descr[0], descr[1:]) if descr[:1] in ("<", ">", "|", "=") else ("", descr)
    kind, size = code[:1], code[1:]
    if kind in _NPY_KINDS and size.isdigit():
        name = f"{_NPY_KINDS[kind]}{int(size) * 8}"
    elif code in ("b1", "?"):
        name = "bool"
    else:
        return descr
    return f"{name} big-endian" if order == ">" and size != "1" else name


def _npy(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(_NPY_MAGIC) or len(data) < 10:
        return None
    unknown = {"preview_kind": "npy", "preview": "NumPy array", "dtype": None, "shape": None}
    major = data[6]
    if major == 1:
        length, start = int.from_bytes(data[8:10], "little"), 10
    else:
        length, start = int.from_bytes(data[8:12], "little"), 12
    if length > _NPY_HEADER_MAX or start + length > len(data):
        return unknown
    try:
        header = ast.literal_eval(data[start : start + length].decode("latin-1"))
        dtype, shape = _npy_dtype(header["descr"]), tuple(int(n) for n in header["shape"])
    except (ValueError, TypeError, SyntaxError, KeyError, MemoryError, RecursionError):
        return unknown
    return {
        "preview_kind": "npy",
        "preview": f"NumPy array, {dtype}, shape {shape}",
        "dtype": dtype,
        "shape": list(shape),
    }


def _text_or_hex(payload: bytes) -> dict[str, Any]:
    """Its start as text when that is printable UTF-8, else its first bytes in hex."""
    data = payload[: max(_PREVIEW_HEX_BYTES, _PREVIEW_TEXT_BYTES)]
    hex_bytes = data[:_PREVIEW_HEX_BYTES]
    hex_preview = {
        "preview_kind": "hex",
        "preview": hex_bytes.hex(" "),
        "preview_bytes": len(hex_bytes),
    }
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
    return {"preview_kind": "text", "preview": text, "preview_bytes": len(text.encode())}


def _preview(payload: bytes | memoryview) -> dict[str, Any]:
    """A short look at a payload: what kind of file it is where that can be told (PNG,
    JPEG, WebP, NumPy .npy, with their size or shape), else its start as text or hex.

    The keys: preview_kind, preview, preview_bytes (the payload bytes a text or hex
    preview shows; None for a described kind) and, for images, width and height, for
    .npy, dtype and shape.
    """
    data = bytes(payload)
    for describe in (_png, _jpeg, _webp, _npy):
        described = describe(data)
        if described is not None:
            return {**described, "preview_bytes": None}
    return _text_or_hex(data)


@app.command()
def head(
    cache: _CacheArgument,
    count: Annotated[
        int, typer.Option("-n", "--samples", min=0, help="How many samples to show.")
    ] = 10,
    json_output: _JsonOption = False,
) -> None:
    """Show the first samples of a cache: identity, metadata, payload length and a look
    at the payload: the kind of file (PNG, JPEG, WebP with their size, NumPy .npy with
    its dtype and shape), else its start as text or hex. Each sample is read and
    checked as any read is."""
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = _open(runtime, cache)
            shown = min(count, len(dataset))
            samples = dataset.get_many([(0, sample_id) for sample_id in range(shown)])
    except _PROBLEMS as error:
        _fail(_error_message(error))
    rows: list[dict[str, Any]] = []
    for sample in samples:
        rows.append(
            {
                "cache_id": sample.cache_id,
                "sample_id": sample.sample_id,
                "metadata": dict(sample.metadata),
                "payload_bytes": len(sample.data),
                **_preview(sample.data),
            }
        )
    if json_output:
        _print_json({"path": str(cache), "samples": rows})
        return
    table = Table(title=f"{cache}: first {shown} of {len(dataset):,} samples", title_justify="left")
    for column in ("sample_id", "metadata", "bytes", "payload"):
        table.add_column(column, overflow="fold")
    for row in rows:
        metadata = json.dumps(row["metadata"], ensure_ascii=False, separators=(", ", ": "))
        preview = repr(row["preview"]) if row["preview_kind"] == "text" else row["preview"]
        if row["preview_bytes"] is not None and row["preview_bytes"] < row["payload_bytes"]:
            preview += " ..."
        table.add_row(str(row["sample_id"]), metadata, f"{row['payload_bytes']:,}", preview)
    _console().print(table)


# --- get ------------------------------------------------------------------------------------


def _out_file(out: Path | None) -> Path | None:
    if out is None or str(out) == "-":
        return out
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise typer.BadParameter(f"directory {parent} does not exist")
    if out.is_dir():
        raise typer.BadParameter(f"{out} is a directory")
    return out


def _is_text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\n\r" for c in text)


@app.command("get")
def get_command(
    cache: _CacheArgument,
    sample_id: Annotated[
        int,
        typer.Argument(
            help="The sample's id (0 for the first).",
            metavar="SAMPLE_ID",
            min=0,
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the payload to this file (replaced if it exists); - for stdout.",
            callback=_out_file,
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the sample's metadata as JSON on stdout (the payload only goes to --out).",
        ),
    ] = False,
) -> None:
    """Write one sample's payload, its raw bytes, to stdout or to --out FILE. The sample
    is read and checked as any read is. A binary payload is not written to a terminal:
    redirect stdout or pass --out."""
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = _open(runtime, cache)
            samples = len(dataset)
            sample = dataset.get(0, sample_id) if sample_id < samples else None
    except _PROBLEMS as error:
        _fail(_error_message(error))
    if sample is None:
        _fail(
            f"{cache} has {samples:,} samples (ids 0 to {samples - 1:,}); "
            f"there is no sample {sample_id:,}"
        )
    data = bytes(sample.data)
    to_file = out is not None and str(out) != "-"
    if to_file:
        assert out is not None

        def write_payload(staging: Path) -> None:
            staging.write_bytes(data)

        try:
            _replace_file(out, write_payload)
        except OSError as error:
            _fail(f"cannot write {out}: {_error_message(error)}")
    elif not json_output:
        stdout = typer.get_binary_stream("stdout")
        if out is None and sys.stdout.isatty() and not _is_text(data):
            _fail(
                f"sample {sample_id} is {len(data):,} bytes of binary data: not writing them "
                "to a terminal; redirect stdout (> FILE) or pass --out FILE (--out - forces it)"
            )
        stdout.write(data)
        stdout.flush()
    if json_output:
        _print_json(
            {
                "path": str(cache),
                "sample_id": sample.sample_id,
                "metadata": dict(sample.metadata),
                "payload_bytes": len(data),
                "out": str(out) if to_file else None,
            }
        )


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
    cache_id (a format 2 cache's position on the command line), sample_id, the stored
    metadata columns and weight, as DatasetRT's get_metadata() returns it.

    The caches must share one metadata schema. An existing file is replaced.
    """
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=0))
            frame = dataset.get_metadata()
        _replace_file(out, lambda staging: _write_frame(frame, staging, out.suffix.lower()))
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


def _write_frame(frame: Any, path: Path, suffix: str) -> None:
    """Write a Polars frame to `path` in the format an export's `suffix` names."""
    if suffix == ".parquet":
        frame.write_parquet(path)
    elif suffix == ".csv":
        frame.write_csv(path)
    else:
        frame.write_ipc(path)


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
        TaskProgressColumn(),
        DownloadColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    # A bar only on a terminal: in a pipe or a log it would be noise.
    shown = progress and _stderr_is_terminal()
    with Progress(*columns, console=_stderr_console(), disable=not shown, transient=True) as bar:
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
            **_format_of(_readable_info(report.path)),
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


def _readable_info(cache: Path) -> _native.CacheInfo | None:
    """The core's description of a cache, or None when its manifest is unreadable
    (verify reports why)."""
    try:
        return _native.cache_info(cache)
    except _PROBLEMS:
        return None


def _show_verify_result(result: dict[str, Any]) -> None:
    stated = "" if result["format_version"] is None else f"format {_format_text(result)}; "
    if result["ok"]:
        typer.echo(f"ok: {result['path']} ({stated}{result['bytes']:,} bytes checked)")
        return
    total = result["problems_total"]
    problems = f"{total:,} problem{'s' if total != 1 else ''}"
    where = f" ({stated[:-2]})" if stated else ""
    typer.echo(f"FAILED: {result['path']}{where}: {problems}")
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


# --- migrate --------------------------------------------------------------------------------


@app.command("migrate")
def migrate_command(
    caches: _CacheArguments,
    to: Annotated[
        int,
        typer.Option("--to", help="The format to migrate to: 3.", show_default=False),
    ],
    json_output: _JsonOption = False,
) -> None:
    """Make format 2 caches format 3 in place, each keeping the cache_id it has in a
    dataset opened from the CACHE arguments in this order (a format 2 cache's id is
    its position), as CachedDataset.update_manifests(version=3) does.

    Only manifest.json changes, atomically; format 3 caches are left unchanged, so
    running it again is safe. Nothing is written unless every cache can be
    migrated: a cache a writer is writing is refused. Exits with 1 on a problem.
    """
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = runtime.cached_dataset(caches, reader_config=ReaderConfig(seed=0))
            report = dataset.update_manifests(version=to)
    except (*_PROBLEMS, TypeError) as error:
        _fail(_error_message(error))
    results = [
        {
            "path": str(cache),
            "manifest": str(entry.path),
            "cache_id": entry.cache_id,
            "status": entry.status,
        }
        for cache, entry in zip(caches, report.entries, strict=True)
    ]
    if json_output:
        _print_json({"caches": results})
        return
    for result in results:
        typer.echo(f"{result['status']}: {result['path']} (cache_id {result['cache_id']})")


# --- write ----------------------------------------------------------------------------------

_OutOption = Annotated[
    Path,
    typer.Option(
        "--out",
        "-o",
        help="Base directory, created if missing; the cache goes to BASE/NAME.",
        file_okay=False,
        show_default=False,
    ),
]
_OverwriteOption = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help=(
            "Replace an existing cache BASE/NAME: the new cache is written first and "
            "swapped in, the old one removed only then; a failed write keeps the old one."
        ),
    ),
]
_Lz4Option = Annotated[bool, typer.Option("--lz4", help="Compress payloads with LZ4.")]
_MaxShardBytesOption = Annotated[
    int,
    typer.Option("--max-shard-bytes", min=1, help="Start a new shard past this many bytes."),
]
_MAX_SHARD_BYTES_DEFAULT = WriterConfig().max_shard_bytes
_PROGRESS_EVERY = 64  # samples between two progress updates

# The sources' words for their Python arguments, in the command's words.
_SOURCE_WORDS = (
    ("FolderSource: ", ""),
    ("ParquetSource file ", "file "),
    ("ParquetSource: ", ""),
    (
        "so label_from='parent' has no folder to label it with",
        "so it has no folder to be labelled by",
    ),
    ("label_from='parent'", "labels from folders"),
    ("label_from=None", "--labels none"),
    ("extensions=...", "-e/--extension"),
)


class _WriteFailed(Exception):
    """A write that failed; its message is for the user as it is."""


def _in_command_words(message: str) -> str:
    for python_words, command_words in _SOURCE_WORDS:
        message = message.replace(python_words, command_words)
    return message


def _cache_name(ctx: typer.Context, name: str | None, default: str, default_from: str) -> str:
    """The cache's name, checked with the core's rule before any work (a bad one is a
    usage error): `name` when given, else `default`, taken from `default_from`."""
    chosen = name if name is not None else default
    try:
        _native.check_source_name(chosen.encode("utf-8", "surrogatepass"))
    except ValueError as error:
        reason = _error_message(error).removeprefix("source name ")
        if name is not None:
            _usage_error(ctx, reason, "--name")
        _usage_error(
            ctx,
            f"the cache would be named after {default_from}, but {reason}; pass --name NAME",
            "--name",
        )
    return chosen


def _check_target(target: Path, overwrite: bool) -> None:
    """Refuse, before reading any input, a target that the write could not replace."""
    if not os.path.lexists(target):
        return
    if not _is_cache(target):
        _fail(f"{target} exists and is not a cache; not replacing it")
    if not overwrite:
        _fail(f"{target} already exists; pass --overwrite to replace it")


def _make_source(build: Callable[[], CacheSource]) -> CacheSource:
    """A source built from the command line; what it refuses while reading its input
    (a missing column, an unreadable file) is a problem found: exit 1."""
    try:
        return build()
    except (*_PROBLEMS, TypeError, KeyError) as error:
        _fail(f"cannot read the input: {_in_command_words(_error_message(error))}")


class _RateColumn(ProgressColumn):
    """Samples per second, once there is a measure."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} samples/s" if speed else "")


class _CountedSource:
    """A source that tells `advance` how many samples the writer has taken from it."""

    def __init__(self, source: CacheSource, advance: Callable[[int], None]) -> None:
        self.name = source.name
        self._source = source
        self._advance = advance

    def __iter__(self) -> Iterator[CacheInput]:
        taken = 0
        for item in self._source:
            yield item
            taken += 1
            if taken % _PROGRESS_EVERY == 0:
                self._advance(taken)
        self._advance(taken)


def _write_cache(source: CacheSource, base: Path, config: WriterConfig, workers: int) -> Path:
    """Write `source` to base/<its name> with the library; its failure as `_WriteFailed`."""
    with DatasetRuntime(num_workers=workers) as runtime:
        [result] = runtime.write_cache(source, base, writer_config=config)
    if isinstance(result, CacheWriteError):
        raise _WriteFailed(
            f"cannot write {result.source_name}: {_in_command_words(result.message)}"
        )
    return result.path


def _write_replacing(
    source: CacheSource, base: Path, config: WriterConfig, workers: int
) -> tuple[Path, bool]:
    """Write `source` as base/<its name>, replacing a cache there: the new cache is
    written whole in a work folder of <base>/tmp (same file system), then the core
    swaps it in under the name's writer lock and only then removes the old cache
    (`drt_cache_replace`). A failure at any step leaves the old cache where it was
    and removes the work folder. Returns the cache's path and whether an old cache
    was replaced."""
    staging_area = base / _STAGING_AREA
    staging_area.mkdir(parents=True, exist_ok=True)
    work = Path(
        tempfile.mkdtemp(prefix=f"{os.getpid()}.", suffix=_OVERWRITE_SUFFIX, dir=staging_area)
    )
    try:
        fresh = _write_cache(source, work, config, workers)
        fresh_name = f"{_STAGING_AREA}/{work.name}/{fresh.name}"
        try:
            replaced = _native.replace_cache(base, source.name, fresh_name)
        except _PROBLEMS as error:
            raise _WriteFailed(_error_message(error)) from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return base / source.name, replaced


def _left_out_columns(
    first_file: Path, source: Any, data_column: str, chosen: list[str] | None
) -> list[dict[str, str]]:
    """The columns of `first_file` that `source` does not store, and why."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    kept = {data_column, *source.metadata_schema}
    left_out: list[dict[str, str]] = []
    for field in pq.read_schema(first_file):
        if field.name in kept:
            continue
        if chosen is not None:
            reason = "not named with -m/--metadata-column"
        else:
            reason = f"type {field.type} is not bool/int/float/string"
        left_out.append({"column": field.name, "type": str(field.type), "reason": reason})
    return left_out


def _parquet_rows(files: Sequence[Path]) -> int | None:
    """The rows of the files, from their footers (None when one cannot be read)."""
    import pyarrow.parquet as pq

    try:
        return sum(int(pq.read_metadata(path).num_rows) for path in files)
    except Exception:  # noqa: BLE001 - only a count for the progress bar
        return None


def _write(
    source: CacheSource,
    out: Path,
    *,
    total: int | None,
    overwrite: bool,
    lz4: bool,
    max_shard_bytes: int,
    workers: int,
    progress: bool,
    json_output: bool,
    extra: dict[str, Any] | None = None,
) -> None:
    compression = ShardCompression(algo="lz4", ratio=1.0) if lz4 else ShardCompression()
    # The library's own progress line is not used: the command shows its own, with a
    # total, and only on a terminal.
    config = WriterConfig(
        shard_compression=compression, show_progress=False, max_shard_bytes=max_shard_bytes
    )
    shown = progress and _stderr_is_terminal()
    columns = (
        TextColumn("writing {task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    failure: str | None = None
    started = time.perf_counter()
    bar = Progress(*columns, console=_stderr_console(), disable=not shown)
    # Not started when not shown: rich before 14.3 writes a newline on stopping a disabled bar.
    with bar if shown else contextlib.nullcontext(bar):
        task = bar.add_task(source.name, total=total)
        if shown:
            source = _CountedSource(source, lambda taken: bar.update(task, completed=taken))
        try:
            if overwrite:
                path, replaced = _write_replacing(source, out, config, workers)
            else:
                path, replaced = _write_cache(source, out, config, workers), False
        except _WriteFailed as error:
            failure = str(error)
        except _PROBLEMS as error:
            failure = _error_message(error)
    if failure is not None:
        _fail(failure)
    seconds = time.perf_counter() - started
    try:
        samples = _native.cache_info(path).samples
    except _PROBLEMS as error:
        _fail(f"wrote {path}, but cannot read its manifest.json: {_error_message(error)}")
    written = {
        "source_name": source.name,
        "path": str(path),
        "samples": samples,
        "bytes_on_disk": _directory_bytes(path),
        "seconds": round(seconds, 6),
        "replaced": replaced,
        **(extra or {}),
    }
    if json_output:
        _print_json(written)
    else:
        typer.echo(
            f"wrote {written['path']}: {samples:,} samples, "
            f"{_bytes_text(written['bytes_on_disk'])} on disk, in {seconds:.3f}s"
            + (" (replaced the old cache)" if replaced else "")
        )


def _folder_source(
    directory: Path, name: str, labels: _Labels, extensions: list[str] | None
) -> CacheSource:
    from dataset_rt.sources import FolderSource

    if labels is _Labels.none:
        return FolderSource(directory, name=name, label_from=None, extensions=extensions)
    options: dict[str, Any] = {}
    # FolderSource's label_kind ("index" or "name"); a FolderSource without it stores
    # folder names, whichever was asked for.
    if "label_kind" in inspect.signature(FolderSource).parameters:
        options["label_kind"] = labels.value
    return FolderSource(directory, name=name, label_from="parent", extensions=extensions, **options)


@_write_app.command("folder")
def write_folder(
    ctx: typer.Context,
    directory: Annotated[
        Path,
        typer.Argument(
            help="The folder; every file under it becomes one sample (sorted by path).",
            metavar="DIR",
            exists=True,
            file_okay=False,
            show_default=False,
        ),
    ],
    out: _OutOption,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="The cache's name, one plain path segment (default: the folder's name).",
            show_default=False,
        ),
    ] = None,
    overwrite: _OverwriteOption = False,
    lz4: _Lz4Option = False,
    labels: Annotated[
        _Labels,
        typer.Option(
            "--labels",
            help=(
                "index: 'label', the class index of each file's folder (folder names "
                "sorted) and 'label_name', the folder's name; name: 'label', the folder's "
                "name; none: no label."
            ),
        ),
    ] = _Labels.by_index,
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
    cache_name = _cache_name(ctx, name, Path(os.path.abspath(directory)).name, "the folder")
    _check_target(out / cache_name, overwrite)
    source = _make_source(lambda: _folder_source(directory, cache_name, labels, extensions))
    total = len(getattr(source, "relative_paths", ())) or None
    _write(
        source,
        out,
        total=total,
        overwrite=overwrite,
        lz4=lz4,
        max_shard_bytes=max_shard_bytes,
        workers=workers,
        progress=progress,
        json_output=json_output,
    )


@_write_app.command("parquet")
def write_parquet(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Parquet files, read in the order given.",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ],
    data_column: Annotated[
        str,
        typer.Option(
            "--data-column", help="The binary column holding the payloads.", show_default=False
        ),
    ],
    out: _OutOption,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="The cache's name, one plain path segment (default: the first file's stem).",
            show_default=False,
        ),
    ] = None,
    overwrite: _OverwriteOption = False,
    metadata_columns: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata-column",
            "-m",
            help=(
                "A column to keep as metadata (repeat for several; default: every "
                "bool, integer, float or string column but the data column)."
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
    per row, the data column as payload, the metadata columns as metadata. Each column
    left out is named on stderr, with the reason."""
    from dataset_rt.sources import ParquetSource

    cache_name = _cache_name(ctx, name, files[0].stem, "the first file")
    _check_target(out / cache_name, overwrite)
    source = _make_source(
        lambda: ParquetSource(
            files, data_column=data_column, metadata_columns=metadata_columns, name=cache_name
        )
    )
    try:
        left_out = _left_out_columns(files[0], source, data_column, metadata_columns)
    except _PROBLEMS as error:
        _fail(f"cannot read the input: {_error_message(error)}")
    for column in left_out:
        _note(f"left out column {column['column']!r}: {column['reason']}")
    _write(
        source,
        out,
        total=_parquet_rows(files),
        overwrite=overwrite,
        lz4=lz4,
        max_shard_bytes=max_shard_bytes,
        workers=workers,
        progress=progress,
        json_output=json_output,
        extra={"left_out": left_out},
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
    # One name in usage lines, whether run as the console script or as python -m.
    app(args=list(argv) if argv is not None else None, prog_name="dataset-rt")
