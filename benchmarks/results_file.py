"""The results file of a benchmark harness: its `meta` and the file itself."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workload import Json, machine_info


def run_meta(
    script: str, started: str, args: argparse.Namespace, loads: list[float], workloads: Json
) -> Json:
    """The `meta` of a results file: when and where it ran, its repeats, scale, load
    range, command line (`python benchmarks/<script> ...`) and workloads."""
    return {
        "started": started,
        "machine": machine_info(),
        "repeats": args.repeats,
        "scale": args.scale,
        "load": {"min": min(loads), "max": max(loads)},
        "command": " ".join([f"python benchmarks/{script}", *sys.argv[1:]]),
        "workloads": workloads,
    }


def write_results(path: Path, results: Json) -> None:
    """`results` as indented JSON at `path` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
