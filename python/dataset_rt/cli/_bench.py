"""`demo` and `bench`: the end-to-end demo and a quick local benchmark."""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from dataset_rt import (
    CachedDataset,
    CacheInput,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    MetadataValue,
    ShardCompression,
    WriterConfig,
)
from dataset_rt.cli._common import (
    _PROBLEMS,
    _WORKERS_DEFAULT,
    _WORKERS_MAX,
    _Compression,
    _console,
    _error_message,
    _fail,
    _JsonOption,
    _open,
    _print_json,
    _WorkersOption,
    app,
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
        assert isinstance(result, CacheWriteSuccess), "a local folder yields no upload"
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
