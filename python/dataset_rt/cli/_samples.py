"""`head`, `get` and `metadata`: a cache's first samples, one payload, its metadata
table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dataset_rt import (
    CachedSample,
    DatasetRuntime,
    ReaderConfig,
)
from dataset_rt.cli._common import (
    _PROBLEMS,
    _console,
    _error_message,
    _fail,
    _JsonOption,
    _LocalDirOption,
    _location,
    _LocationArgument,
    _LocationArguments,
    _open,
    _print_json,
    _remote_config,
    _replace_file,
    app,
)
from dataset_rt.cli._preview import _preview


@app.command()
def head(
    cache: _LocationArgument,
    count: Annotated[
        int, typer.Option("-n", "--samples", min=0, help="How many samples to show.")
    ] = 10,
    local_dir: _LocalDirOption = None,
    json_output: _JsonOption = False,
) -> None:
    """Show the first samples of a cache: identity, metadata, payload length and a look
    at the payload: the kind of file (PNG, JPEG, WebP with their size, NumPy .npy with
    its dtype and shape), else its start as text or hex. Each sample is read and
    checked as any read is."""
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = _open(runtime, _location(cache), remote=_remote_config(local_dir))
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


_SampleIdArgument = Annotated[
    int,
    typer.Argument(
        help="The sample's id (0 for the first).",
        metavar="SAMPLE_ID",
        min=0,
        show_default=False,
    ),
]
_PayloadOutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write the payload to this file (replaced if it exists); - for stdout.",
        callback=_out_file,
        show_default=False,
    ),
]
_SampleJsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the sample's metadata as JSON on stdout (the payload only goes to --out).",
    ),
]


def _read_sample(cache: str, sample_id: int, local_dir: Path | None) -> CachedSample:
    """Sample `sample_id` of `cache`, read and checked; exit 1 when it cannot be, or
    when the cache has no such sample."""
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = _open(runtime, _location(cache), remote=_remote_config(local_dir))
            samples = len(dataset)
            sample = dataset.get(0, sample_id) if sample_id < samples else None
    except _PROBLEMS as error:
        _fail(_error_message(error))
    if sample is None:
        _fail(
            f"{cache} has {samples:,} samples (ids 0 to {samples - 1:,}); "
            f"there is no sample {sample_id:,}"
        )
    return sample


def _save_payload(data: bytes, out: Path) -> None:
    """Write the payload to the file `out`, replacing it; exit 1 when that fails."""

    def write_payload(staging: Path) -> None:
        staging.write_bytes(data)

    try:
        _replace_file(out, write_payload)
    except OSError as error:
        _fail(f"cannot write {out}: {_error_message(error)}")


def _print_payload(data: bytes, sample_id: int, forced: bool) -> None:
    """Write the payload to stdout, unless it is binary and stdout a terminal (`forced`:
    --out - was given)."""
    stdout = typer.get_binary_stream("stdout")
    if not forced and sys.stdout.isatty() and not _is_text(data):
        _fail(
            f"sample {sample_id} is {len(data):,} bytes of binary data: not writing them "
            "to a terminal; redirect stdout (> FILE) or pass --out FILE (--out - forces it)"
        )
    stdout.write(data)
    stdout.flush()


@app.command("get")
def get_command(
    cache: _LocationArgument,
    sample_id: _SampleIdArgument,
    out: _PayloadOutOption = None,
    local_dir: _LocalDirOption = None,
    json_output: _SampleJsonOption = False,
) -> None:
    """Write one sample's payload, its raw bytes, to stdout or to --out FILE. The sample
    is read and checked as any read is. A binary payload is not written to a terminal:
    redirect stdout or pass --out."""
    sample = _read_sample(cache, sample_id, local_dir)
    data = bytes(sample.data)
    to_file = out is not None and str(out) != "-"
    if out is not None and to_file:
        _save_payload(data, out)
    elif not json_output:
        _print_payload(data, sample_id, forced=out is not None)
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


_EXPORT_SUFFIXES = (".parquet", ".csv", ".arrow")


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
    caches: _LocationArguments,
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
    local_dir: _LocalDirOption = None,
    json_output: _JsonOption = False,
) -> None:
    """Export the metadata table of the caches, loaded together, to one file:
    cache_id (a format 2 cache's position on the command line), sample_id, the stored
    metadata columns and weight, as DatasetRT's get_metadata() returns it.

    The caches must share one metadata schema. An existing file is replaced.
    """
    try:
        with DatasetRuntime(num_workers=1) as runtime:
            dataset = runtime.cached_dataset(
                [_location(cache) for cache in caches],
                reader_config=ReaderConfig(seed=0),
                remote=_remote_config(local_dir),
            )
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
