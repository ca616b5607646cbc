"""What the commands share: the typer app, the options several commands take, and
the helpers that print, fail and describe caches."""

from __future__ import annotations

import enum
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from dataset_rt import (
    CachedDataset,
    DatasetRuntime,
    ReaderConfig,
    RemoteConfig,
)
from dataset_rt._binding import native as _native
from dataset_rt._binding.cache_info import CacheInfo, cache_info
from dataset_rt._remote import RetryPolicy, is_remote, parse_remote_url, transport_for

# What the library raises for a bad cache or a failed operation (docs/api.md, "Errors"):
# each becomes one line on stderr and exit code 1, never a traceback (ImportError: an s3://
# URL without boto3).
_PROBLEMS = (ValueError, OSError, RuntimeError, IndexError, MemoryError, ImportError)
_EXIT_PROBLEM = 1
_WORKERS_DEFAULT = min(os.cpu_count() or 1, 8)
_WORKERS_MAX = 256
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


def _check_locations(values: list[str]) -> list[str]:
    """Each value a URL of a supported scheme, or an existing directory (a usage error,
    exit 2, otherwise: typer's own words for a path)."""
    for value in values:
        if is_remote(value):
            try:
                parse_remote_url(value)
            except ValueError as error:
                raise typer.BadParameter(str(error)) from None
        elif not Path(value).exists():
            raise typer.BadParameter(f"Directory '{value}' does not exist.")
        elif not Path(value).is_dir():
            raise typer.BadParameter(f"Directory '{value}' is a file.")
    return values


def _check_location(value: str) -> str:
    return _check_locations([value])[0]


_LOCATION_HELP = (
    "a cache directory (base/name, the folder holding manifest.json), or the URL of a "
    "cache: s3://bucket/prefix/name, http(s)://host/path/name"
)
_LocationArguments = Annotated[
    list[str],
    typer.Argument(
        help=f"Caches: each {_LOCATION_HELP}.",
        metavar="CACHE",
        callback=_check_locations,
        show_default=False,
    ),
]
_LocationArgument = Annotated[
    str,
    typer.Argument(
        help=f"A cache: {_LOCATION_HELP}.",
        metavar="CACHE",
        callback=_check_location,
        show_default=False,
    ),
]
_LocalDirOption = Annotated[
    Path | None,
    typer.Option(
        "--local-dir",
        help=(
            "Where files of s3:// and http(s):// caches are fetched to (default: "
            "$DATASET_RT_CACHE_DIR, else the user cache directory + dataset-rt)."
        ),
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


def _location(value: str) -> str | Path:
    """A checked CACHE argument as the library takes it: a URL as given, else a Path."""
    return value if is_remote(value) else Path(value)


def _remote_config(local_dir: Path | None) -> RemoteConfig:
    """The `RemoteConfig` of --local-dir (None: the default rule)."""
    return RemoteConfig(local_dir=local_dir)


def _open(
    runtime: DatasetRuntime,
    cache: str | Path,
    *,
    shuffle: bool = False,
    remote: RemoteConfig | None = None,
) -> CachedDataset:
    """One cache, opened (and so checked: manifest, index, metadata, shard lengths) by
    the core; a URL's files fetched into `remote`'s local directory."""
    return runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=shuffle), remote=remote
    )


def _described(cache: str | Path, remote: RemoteConfig) -> CacheInfo:
    """The core's description of a cache from its manifest alone; a URL's manifest is
    fetched (into a scratch folder of `remote`'s local directory) for it."""
    if not is_remote(cache):
        return cache_info(Path(cache))
    local_dir = remote.resolved_local_dir()
    local_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="manifest-", dir=local_dir) as scratch:
        manifest = Path(scratch) / "manifest.json"
        transport = transport_for(str(cache), RetryPolicy.from_config(remote))
        if not transport.fetch("manifest.json", manifest):
            raise ValueError(f"{cache} is not a cache: it has no manifest.json")
        return cache_info(Path(scratch))


def _is_cache(path: Path) -> bool:
    """Whether `path` is a published cache (the core's rule: it holds its manifest)."""
    try:
        return _native.cache_published(path)
    except _PROBLEMS:
        return False


def _compression(info: CacheInfo) -> list[dict[str, Any]]:
    """The shards' compression settings, each once, as the JSON output lists them."""
    return [{"algo": algo, "ratio": ratio} for algo, ratio in info.compression]


def _format_of(info: CacheInfo | None) -> dict[str, Any]:
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
