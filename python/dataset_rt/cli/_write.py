"""`write folder` and `write parquet`: a cache from a folder or from Parquet files."""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from dataset_rt import (
    CacheInput,
    CacheSource,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ShardCompression,
    WriterConfig,
)
from dataset_rt._binding import native as _native
from dataset_rt._binding.cache_info import cache_info
from dataset_rt.cli._common import (
    _OVERWRITE_SUFFIX,
    _PROBLEMS,
    _STAGING_AREA,
    _WORKERS_DEFAULT,
    _bytes_text,
    _directory_bytes,
    _error_message,
    _fail,
    _is_cache,
    _JsonOption,
    _Labels,
    _note,
    _print_json,
    _ProgressOption,
    _stderr_console,
    _stderr_is_terminal,
    _usage_error,
    _WorkersOption,
    app,
)

_write_app = typer.Typer(
    help="Write a cache from a folder of files or from Parquet files.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(_write_app, name="write")


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
    assert isinstance(result, CacheWriteSuccess), "a local folder yields no upload"
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
        samples = cache_info(path).samples
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


_ParquetFilesArgument = Annotated[
    list[Path],
    typer.Argument(
        help="Parquet files, read in the order given.",
        metavar="FILE",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
]
_DataColumnOption = Annotated[
    str,
    typer.Option(
        "--data-column", help="The binary column holding the payloads.", show_default=False
    ),
]
_ParquetNameOption = Annotated[
    str | None,
    typer.Option(
        "--name",
        help="The cache's name, one plain path segment (default: the first file's stem).",
        show_default=False,
    ),
]
_MetadataColumnsOption = Annotated[
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
]


def _parquet_source(
    files: list[Path], data_column: str, metadata_columns: list[str] | None, name: str
) -> tuple[CacheSource, list[dict[str, str]]]:
    """The ParquetSource of the files, and the columns of the first file it leaves
    out, each named on stderr with the reason; exit 1 when the input cannot be read."""
    from dataset_rt.sources import ParquetSource

    source = _make_source(
        lambda: ParquetSource(
            files, data_column=data_column, metadata_columns=metadata_columns, name=name
        )
    )
    try:
        left_out = _left_out_columns(files[0], source, data_column, metadata_columns)
    except _PROBLEMS as error:
        _fail(f"cannot read the input: {_error_message(error)}")
    for column in left_out:
        _note(f"left out column {column['column']!r}: {column['reason']}")
    return source, left_out


@_write_app.command("parquet")
def write_parquet(
    ctx: typer.Context,
    files: _ParquetFilesArgument,
    data_column: _DataColumnOption,
    out: _OutOption,
    name: _ParquetNameOption = None,
    overwrite: _OverwriteOption = False,
    metadata_columns: _MetadataColumnsOption = None,
    lz4: _Lz4Option = False,
    max_shard_bytes: _MaxShardBytesOption = _MAX_SHARD_BYTES_DEFAULT,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    progress: _ProgressOption = True,
    json_output: _JsonOption = False,
) -> None:
    """Write a cache from Parquet files with dataset_rt.sources.ParquetSource: one sample
    per row, the data column as payload, the metadata columns as metadata. Each column
    left out is named on stderr, with the reason."""
    cache_name = _cache_name(ctx, name, files[0].stem, "the first file")
    _check_target(out / cache_name, overwrite)
    source, left_out = _parquet_source(files, data_column, metadata_columns, cache_name)
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
