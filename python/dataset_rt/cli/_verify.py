"""`verify` and `migrate`: scrub caches, list their problems; make them format 3."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

from dataset_rt import (
    DatasetRuntime,
    ReaderConfig,
    RemoteConfig,
    verify,
)
from dataset_rt._binding.cache_info import CacheInfo
from dataset_rt._remote import is_remote
from dataset_rt.cli._common import (
    _EXIT_PROBLEM,
    _PROBLEMS,
    _WORKERS_DEFAULT,
    _CacheArguments,
    _described,
    _directory_bytes,
    _error_message,
    _fail,
    _format_of,
    _format_text,
    _JsonOption,
    _LocalDirOption,
    _location,
    _LocationArguments,
    _print_json,
    _ProgressOption,
    _remote_config,
    _stderr_console,
    _stderr_is_terminal,
    _WorkersOption,
    app,
)

# --- verify ---------------------------------------------------------------------------------


@app.command("verify")
def verify_command(
    caches: _LocationArguments,
    workers: _WorkersOption = _WORKERS_DEFAULT,
    progress: _ProgressOption = True,
    local_dir: _LocalDirOption = None,
    json_output: _JsonOption = False,
) -> None:
    """Scrub each cache completely (every SHA-256, every record's checksum, placement,
    metadata and LZ4 block) with dataset_rt.verify, and list every problem found. A
    URL's files are fetched into the local directory first, then its copy is scrubbed.

    Exits with 1 when any cache has a problem.
    """
    remote = _remote_config(local_dir)
    # Described once, before the scrub: a URL's manifest is fetched here and by verify.
    infos = [_readable_info(cache, remote) for cache in caches]
    sizes = [_size(cache, info) for cache, info in zip(caches, infos, strict=True)]
    reports = []
    columns = _progress_columns()
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
                    verify(
                        _location(cache),
                        num_workers=workers,
                        show_progress=False,
                        on_progress=advance,
                        remote=remote,
                    )
                )
            except _PROBLEMS as error:
                _fail(f"cannot verify {cache}: {_error_message(error)}")
            before += size
            bar.update(task, completed=before)
    results = [
        {
            "path": str(report.path),
            "ok": report.ok,
            **_format_of(info),
            "bytes": size,
            "problems_total": report.problems_total,
            "problems": [problem._asdict() for problem in report.problems],
        }
        for report, info, size in zip(reports, infos, sizes, strict=True)
    ]
    ok = all(report.ok for report in reports)
    if json_output:
        _print_json({"ok": ok, "caches": results})
    else:
        for result in results:
            _show_verify_result(result)
    if not ok:
        raise typer.Exit(_EXIT_PROBLEM)


def _progress_columns() -> tuple[ProgressColumn, ...]:
    return (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )


def _readable_info(cache: str | Path, remote: RemoteConfig) -> CacheInfo | None:
    """The core's description of a cache, or None when its manifest is unreadable
    (verify reports why)."""
    try:
        return _described(cache, remote)
    except _PROBLEMS:
        return None


def _size(cache: str, info: CacheInfo | None) -> int:
    """The bytes the progress bar counts for a cache: a folder's files, a URL's shards
    (`info`'s; 0 when its manifest cannot be read: verify reports why)."""
    if not is_remote(cache):
        return _directory_bytes(Path(cache))
    return 0 if info is None else info.shard_bytes


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
