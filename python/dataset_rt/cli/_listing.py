"""`ls` and `info`: the caches of a base folder, and what a cache holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dataset_rt import (
    DatasetRuntime,
    RemoteConfig,
)
from dataset_rt._binding import native as _native
from dataset_rt._binding.cache_info import CacheInfo, cache_info
from dataset_rt._remote import RetryPolicy, is_remote, parse_remote_url
from dataset_rt._remote.upload import S3Publisher, Transfer
from dataset_rt.cli._common import (
    _EXIT_PROBLEM,
    _OVERWRITE_SUFFIX,
    _PROBLEMS,
    _STAGING_AREA,
    _bytes_text,
    _cache_id_text,
    _check_location,
    _codecs_text,
    _compression,
    _console,
    _described,
    _directory_bytes,
    _error_message,
    _fail,
    _format_of,
    _is_cache,
    _JsonOption,
    _LocalDirOption,
    _LocationArguments,
    _open,
    _print_json,
    _remote_config,
    app,
)

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
            summary = cache_info(entry)
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


def _on_disk_text(cache: dict[str, Any]) -> str:
    """A cache's bytes on disk; for a remote cache, its shards' bytes at the URL."""
    if cache["bytes_on_disk"] is None:
        return f"{cache['shard_bytes']:,}"
    return f"{cache['bytes_on_disk']:,}"


def _show_listing(console: Console, listing: dict[str, Any], title: str) -> None:
    if listing["caches"]:
        table = Table(title=title, title_justify="left")
        remote = any(cache["bytes_on_disk"] is None for cache in listing["caches"])
        size = "shard bytes" if remote else "bytes on disk"  # at a URL: nothing on disk
        columns = ("name", "format", "cache id", "samples", size, "compression")
        for column in (*columns, "record checksums"):
            table.add_column(
                column,
                justify="right" if column in ("samples", size) else "left",
                overflow="fold" if column == "cache id" else "ellipsis",
            )
        for cache in listing["caches"]:
            table.add_row(
                cache["name"],
                str(cache["format_version"]),
                "" if cache["cache_id"] is None else str(cache["cache_id"]),
                f"{cache['samples']:,}",
                _on_disk_text(cache),
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


def _remote_listing(base: str, remote: RemoteConfig) -> dict[str, Any]:
    """The caches under an ``s3://`` prefix, from their manifests (ListObjectsV2 for
    ``*/manifest.json``); an ``http(s)://`` URL is a usage error: it cannot be listed."""
    url = parse_remote_url(base)
    if url.scheme != "s3":
        raise typer.BadParameter(
            f"cannot list {url.shown()}: a web server has no listing; name a cache "
            f"instead (`dataset-rt info {url.shown()}/NAME`)",
            param_hint="'BASE'",
        )
    lister = S3Publisher(url, RetryPolicy.from_config(remote), Transfer())
    if lister.base_is_cache():
        _fail(f"{url.shown()} is a cache, not a base: `dataset-rt info {url.shown()}` shows it")
    caches: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for name in lister.list_caches():
        cache = lister.cache_url(name).shown()
        try:
            summary = _described(cache, remote)
        except _PROBLEMS as error:
            note = f"its manifest.json cannot be read ({_error_message(error)})"
            other.append({"path": name, "kind": "unreadable", "bytes": None, "note": note})
            continue
        caches.append(
            {
                "name": name,
                "path": cache,
                "samples": summary.samples,
                **_format_of(summary),
                "bytes_on_disk": None,
                "shard_bytes": summary.shard_bytes,
                "compression": _compression(summary),
                "record_checksums": summary.record_checksums,
            }
        )
    return {"path": url.shown(), "caches": caches, "other": other}


@app.command("ls")
def ls_command(
    base: Annotated[
        str,
        typer.Argument(
            help=(
                "A base folder (the --out of the writes, holding caches side by side), "
                "or an s3://bucket/prefix holding caches."
            ),
            metavar="BASE",
            callback=_check_location,
            show_default=False,
        ),
    ],
    local_dir: _LocalDirOption = None,
    json_output: _JsonOption = False,
) -> None:
    """List the caches in a base folder (name, samples, bytes on disk, compression,
    record checksums, from each manifest.json as the core reads it; no other file is
    opened or checked), then
    everything else there: writers' staging directories and lock files under tmp/,
    and files and folders that are not caches. An s3:// prefix lists the caches whose
    manifest.json is under it; an http(s):// URL cannot be listed (exit 2)."""
    if is_remote(base):
        try:
            listing = _remote_listing(base, _remote_config(local_dir))
        except _PROBLEMS as error:
            _fail(f"cannot list {base}: {_error_message(error)}")
        _print_listing(listing, json_output)
        return
    _ls_local(Path(base), json_output)


def _print_listing(listing: dict[str, Any], json_output: bool) -> None:
    if json_output:
        _print_json(listing)
    else:
        _show_listing(_console(), listing, listing["path"])


def _ls_local(base: Path, json_output: bool) -> None:
    if _is_cache(base):
        _fail(
            f"{base} is a cache, not a base folder: `dataset-rt info {base}` shows it, "
            f"`dataset-rt ls {base.parent}` lists its base"
        )
    try:
        listing = _base_listing(base)
    except OSError as error:
        _fail(f"cannot list {base}: {_error_message(error)}")
    _print_listing(listing, json_output)


# --- info -----------------------------------------------------------------------------------


def _cache_info(runtime: DatasetRuntime, location: str, remote: RemoteConfig) -> dict[str, Any]:
    """What `info` reports of the cache (or base) at `location`: the cache opened (and
    so checked), then described from the manifest it opened (a URL: the version read)."""
    if is_remote(location):
        opened = _open(runtime, location, remote=remote)
        return _described_info(location, opened._handle.cache_info(0), None)
    cache = Path(location)
    if not _is_cache(cache):
        if _is_base(cache):
            return {"path": str(cache), "base": True, **_base_listing(cache)}
        raise ValueError(f"{cache} is not a cache: it has no manifest.json, and holds no cache")
    opened = _open(runtime, cache)
    return _described_info(str(cache), opened._handle.cache_info(0), _directory_bytes(cache))


def _described_info(path: str, summary: CacheInfo, bytes_on_disk: int | None) -> dict[str, Any]:
    """What `info` reports of a cache (`bytes_on_disk` None: a remote cache)."""
    return {
        "path": path,
        "source_name": summary.source_name,
        **_format_of(summary),
        "samples": summary.samples,
        "shards": summary.shards,
        "bytes_on_disk": bytes_on_disk,
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
    if info["bytes_on_disk"] is None:
        table.add_row("shard bytes (remote)", _bytes_text(info["shard_bytes"]))
    else:
        table.add_row("bytes on disk", _bytes_text(info["bytes_on_disk"]))
    table.add_row("payload bytes (uncompressed)", _bytes_text(info["payload_bytes_uncompressed"]))
    table.add_row("compression", _codecs_text(info["compression"]))
    table.add_row("record checksums", "yes (records.crc32c)" if info["record_checksums"] else "no")
    table.add_row("schema", "\n".join(f"{f['name']}: {f['kind']}" for f in info["schema"]))
    console.print(table)


@app.command()
def info(
    caches: _LocationArguments, local_dir: _LocalDirOption = None, json_output: _JsonOption = False
) -> None:
    """Show what each cache holds: source name, samples, shards, bytes on disk and
    uncompressed, compression, metadata schema, format version, record checksums.

    Each cache is opened (and so checked, in milliseconds) by the library first; a
    cache that does not open is reported and the command exits with 1. A base folder
    (one holding caches) is said to be one, and its caches are listed as `ls` does.
    A URL's manifest and the files a cache opens with are fetched into the local
    directory (its shards are not).
    """
    results: list[dict[str, Any]] = []
    remote = _remote_config(local_dir)
    with DatasetRuntime(num_workers=1) as runtime:
        for cache in caches:
            try:
                results.append(_cache_info(runtime, cache, remote))
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
