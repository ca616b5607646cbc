"""Large payloads handed out without a copy: DatasetRT's two payload modes against LitData.

    python benchmarks/zero_copy.py [--count 512] [--repeats 4] [--passes 5]

W2's data (``--count`` samples of 1 MiB random payloads, the bytes
`benchmarks/workload.py` makes) is written once per system: DatasetRT's cache
by this interpreter, LitData's chunks (`optimize`, 64 MB chunks, no
compression) under the LitData virtual environment that
`benchmarks/peer_venvs.py` creates. Each measurement is a fresh process that
warms the page cache (every file read once), opens the dataset, and times
``--passes`` ordered passes; the first pass is reported apart (for DatasetRT's
views it maps the shards and enters their pages into the page tables), the
later ones as their median.

Systems: ``bytes`` (DatasetRT's default: each payload copied into a new
`bytes`), ``memoryview`` (``ReaderConfig(payload="memoryview")``: views of the
mapped shards, checked in place by the read-ahead workers), ``litdata``
(`litdata.StreamingDataset`, which hands out its payloads as it stores them).

Consumers, one per measurement:
  page  reads one byte of every 4 KiB of each payload by indexing (LitData's
        own harness does this; a slice such as ``p[::4096]`` of a memoryview
        would read nothing)
  crc   ``zlib.crc32`` of each payload: every byte read

Results: ``benchmarks/results/zero_copy-latest.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import children  # this directory's runner of measurement processes
import workload  # this directory's helpers: payloads, page-cache warming, RSS
from children import Json

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SYSTEMS = ("bytes", "memoryview", "litdata")
CONSUMERS = ("page", "crc")
PAGE = 4096
MB = 1e6


def consume_pages(payload: bytes | memoryview) -> int:
    """Touch one byte per page of the payload."""
    total = 0
    for at in range(0, len(payload), PAGE):
        total += payload[at]
    return total


def consume_crc(payload: bytes | memoryview) -> int:
    """Read every byte of the payload (its CRC-32)."""
    return zlib.crc32(payload)


CONSUME = {"page": consume_pages, "crc": consume_crc}


def open_system(system: str, path: Path) -> Iterable[Any]:
    """The dataset `system` reads: CachedSamples, or LitData's dicts (untyped)."""
    if system == "litdata":
        from litdata import StreamingDataset

        dataset: Iterable[Any] = StreamingDataset(input_dir=str(path), shuffle=False)
        return dataset
    import dataset_rt

    runtime = dataset_rt.DatasetRuntime(num_workers=2)
    payload: Literal["bytes", "memoryview"] = "memoryview" if system == "memoryview" else "bytes"
    config = dataset_rt.ReaderConfig(seed=0, shuffle=False, payload=payload)
    return runtime.cached_dataset([path], reader_config=config)


def payload_of(system: str, sample: Any) -> bytes | memoryview:
    """The payload of a sample of `open_system(system, ...)`."""
    payload: bytes | memoryview = sample["data"] if system == "litdata" else sample.data
    return payload


def child_read(args: argparse.Namespace) -> Json:
    """The read phase: --passes ordered passes of --system, each payload consumed."""
    path = Path(args.dir)
    workload.warm_page_cache(path)
    dataset = open_system(args.system, path)
    consume = CONSUME[args.consumer]
    passes = []
    kind = None
    for _ in range(args.passes):
        start = time.perf_counter()
        count = 0
        payload_bytes = 0
        # A generator: LitData's dataset is its own iterator (see training_peers.read_pass).
        for sample in (s for s in dataset):
            payload = payload_of(args.system, sample)
            consume(payload)
            payload_bytes += len(payload)
            count += 1
            kind = type(payload).__name__
        passes.append(time.perf_counter() - start)
        if count != args.count:
            raise SystemExit(f"read {count} samples, expected {args.count}")
    return {
        "pass_seconds": passes,
        "payload_bytes": payload_bytes,
        "payload_type": kind,
        "peak_rss_kib": workload.peak_rss_kib(),
    }


def run_child(python: str, *arguments: str) -> Json:
    """One read process under `python`; its result."""
    command = [python, str(Path(__file__)), *arguments]
    try:
        return children.run_json(command, dict(os.environ), HERE, timeout=1800)
    except children.ChildFailed as failed:
        raise SystemExit(
            f"{' '.join(arguments)} failed:\n{failed.stdout}\n{failed.stderr}"
        ) from None


def litdata_python() -> str:
    """The interpreter of LitData's venv (made on first use)."""
    import peer_venvs  # this directory's per-peer virtual environments

    return str(peer_venvs.ensure_system("litdata", lambda message: print(message, file=sys.stderr)))


def write_data(work: Path, count: int, litdata: str) -> dict[str, Path]:
    """W2's data for DatasetRT and LitData under `work` (reused when present)."""
    ours = work / "ours" / "w2"
    if not (ours / "manifest.json").exists():
        subprocess.run(
            [sys.executable, str(HERE / "workload.py"), "write", "--expect", "ours",
             "--count", str(count), "--size", str(1 << 20), "--payload-kind", "random",
             "--base-dir", str(ours.parent), "--name", "w2"],
            check=True, capture_output=True,
        )  # fmt: skip
    peer = work / "litdata"
    if not (peer / "index.json").exists():
        subprocess.run(
            [litdata, str(HERE / "training_peers.py"), "write", "--system", "litdata",
             "--dir", str(peer), "--count", str(count), "--size", str(1 << 20),
             "--payload-kind", "random"],
            check=True, capture_output=True,
        )  # fmt: skip
    return {"ours": ours, "litdata": peer}


def markdown(report: Json) -> str:
    """The table of a report."""
    lines = [
        f"W2 zero-copy reads: {report['count']} x 1 MiB, ordered, {report['repeats']} "
        f"processes per cell, {report['passes']} passes each; MB/s, median [min-max] of "
        "the processes' figures.",
        "",
        "| consumer | system | payload type | first pass | later passes | later / LitData |",
        "|---|---|---|---|---|---|",
    ]
    for consumer in CONSUMERS:
        peer = report["cells"][consumer]["litdata"]["later_mbps"]
        for system in SYSTEMS:
            cell = report["cells"][consumer][system]
            later = cell["later_mbps"]
            lines.append(
                f"| {consumer} | {system} | {cell['payload_type']} | "
                f"{cell['first_mbps']:,.0f} [{cell['first_range']}] | "
                f"{later:,.0f} [{cell['later_range']}] | {later / peer:.2f}x |"
            )
    return "\n".join(lines) + "\n"


def span(values: list[float]) -> str:
    """The range of `values`: "min-max"."""
    return f"{min(values):,.0f}-{max(values):,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("phase", nargs="?", default="run", choices=["run", "read"])
    parser.add_argument("--system", choices=SYSTEMS)
    parser.add_argument("--consumer", choices=CONSUMERS)
    parser.add_argument("--dir")
    parser.add_argument("--count", type=int, default=512)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument(
        "--work", default=str(Path.home() / ".cache" / "dataset_rt_bench" / "zero-copy-data")
    )
    args = parser.parse_args()
    if args.phase == "read":
        print(json.dumps(child_read(args)))
        return
    litdata = litdata_python()
    data = write_data(Path(args.work) / f"w2-{args.count}", args.count, litdata)
    figures: dict[str, dict[str, list[Json]]] = {c: {s: [] for s in SYSTEMS} for c in CONSUMERS}
    for repeat in range(args.repeats):
        for consumer in CONSUMERS:
            order = SYSTEMS if repeat % 2 == 0 else tuple(reversed(SYSTEMS))
            for system in order:
                python = litdata if system == "litdata" else sys.executable
                path = data["litdata" if system == "litdata" else "ours"]
                result = run_child(
                    python, "read", "--system", system, "--consumer", consumer,
                    "--dir", str(path), "--count", str(args.count), "--passes", str(args.passes),
                )  # fmt: skip
                figures[consumer][system].append(result)
                later = statistics.median(result["pass_seconds"][1:] or result["pass_seconds"])
                print(
                    f"[zero_copy] {repeat + 1}/{args.repeats} {consumer:4} {system:10} "
                    f"first {result['payload_bytes'] / result['pass_seconds'][0] / MB:8,.0f} "
                    f"later {result['payload_bytes'] / later / MB:8,.0f} MB/s",
                    file=sys.stderr,
                )
    cells: dict[str, dict[str, Json]] = {}
    for consumer in CONSUMERS:
        cells[consumer] = {}
        for system in SYSTEMS:
            runs = figures[consumer][system]
            first = [r["payload_bytes"] / r["pass_seconds"][0] / MB for r in runs]
            later = [
                r["payload_bytes"]
                / statistics.median(r["pass_seconds"][1:] or r["pass_seconds"])
                / MB
                for r in runs
            ]
            cells[consumer][system] = {
                "first_mbps": statistics.median(first),
                "first_range": span(first),
                "later_mbps": statistics.median(later),
                "later_range": span(later),
                "payload_type": runs[0]["payload_type"],
                "peak_rss_mib": statistics.median(r["peak_rss_kib"] / 1024 for r in runs),
            }
    report = {
        "count": args.count,
        "repeats": args.repeats,
        "passes": args.passes,
        "machine": workload.machine_info(),
        "cells": cells,
        "raw": figures,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "zero_copy-latest.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (RESULTS / "zero_copy-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
