"""A writer process for tests/core/test_faults.py, which runs it as a child so that
faults (a file size limit, a full disk, SIGKILL) hit this process, not pytest.

    python fault_writer.py <mode> <job as JSON>

Every mode prints one JSON object as its last line of output. The sources are
built here and in the test by `source_samples`, so both sides know the bytes.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataset_rt import (
    CacheInput,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)

# What a source is: {"name", "count", "payload_bytes", "label_bytes", "compressible"}.
SourceSpec = dict[str, Any]
Metadata = dict[str, bool | int | float | str]


def source_samples(spec: SourceSpec) -> list[tuple[bytes, Metadata]]:
    """The samples of `spec`, the same in every process: random payloads (half
    of each zeros when compressible, so lz4 shrinks them) and metadata with an
    optional long label."""
    rng = random.Random(spec["name"])
    size = spec["payload_bytes"]
    label = "x" * spec.get("label_bytes", 0)
    samples = []
    for i in range(spec["count"]):
        if spec.get("compressible", False):
            payload = rng.randbytes(size // 2) + bytes(size - size // 2)
        else:
            payload = rng.randbytes(size)
        samples.append((payload, {"i": i, "label": label}))
    return samples


class SpecSource:
    """The source `spec` describes."""

    def __init__(self, spec: SourceSpec) -> None:
        self.name = spec["name"]
        self.samples = source_samples(spec)

    def __iter__(self) -> Iterator[CacheInput]:
        for data, metadata in self.samples:
            yield CacheInput(data, metadata)


def writer_config(algo: str, max_shard_bytes: int) -> WriterConfig:
    compression = ShardCompression() if algo == "none" else ShardCompression(algo="lz4", ratio=2.0)
    return WriterConfig(
        show_progress=False, max_shard_bytes=max_shard_bytes, shard_compression=compression
    )


def described(result: object) -> dict[str, str]:
    """A write result as JSON: its type, source name and path or message."""
    kind = type(result).__name__
    return {"kind": kind, "name": result[0], "detail": str(result[1])}  # type: ignore[index]


def reads_back(runtime: DatasetRuntime, path: Path, spec: SourceSpec) -> bool:
    """Whether the cache at `path` validates and holds exactly `spec`'s samples."""
    config = ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    dataset = runtime.cached_dataset([path], reader_config=config)
    got = [(sample.data, dict(sample.metadata)) for sample in dataset]
    return got == source_samples(spec)


def limit_file_size(bytes_max: int) -> None:
    """Writes past `bytes_max` in any file fail with EFBIG instead of raising SIGXFSZ."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_max, hard))


def lift_file_size_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def open_files() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))


def disk_full(job: dict[str, Any]) -> dict[str, Any]:
    """Writes every source under a fault, then lifts it and writes the failing
    source again with the same runtime."""
    base = Path(job["base"])
    specs = job["sources"]
    failing = next(spec for spec in specs if spec["name"] == job["failing"])
    config = writer_config(job["algo"], job["max_shard_bytes"])
    if "file_size_limit" in job:
        limit_file_size(job["file_size_limit"])
    runtime = DatasetRuntime(num_workers=2)
    files_before = open_files()
    results = runtime.write_cache([SpecSource(spec) for spec in specs], base, writer_config=config)
    report: dict[str, Any] = {
        "results": [described(result) for result in results],
        "base_after_failure": listing(base),
        "tmp_after_failure": listing(base / "tmp"),
        "files_left_open": open_files() - files_before,
    }
    if "file_size_limit" in job:
        lift_file_size_limit()
    else:
        remount = ["mount", "-o", f"remount,size={job['remount_size']}", job["mountpoint"]]
        subprocess.run(remount, check=True, capture_output=True)
    (retry,) = runtime.write_cache(SpecSource(failing), base, writer_config=config)
    report["retry"] = described(retry)
    report["retry_reads_back"] = isinstance(retry, CacheWriteSuccess) and reads_back(
        runtime, retry.path, failing
    )
    return report


def write_once(job: dict[str, Any]) -> dict[str, Any]:
    """Builds the source, says "ready", then writes it: the test kills this
    process at some moment after "ready"."""
    source = SpecSource(job["source"])
    config = writer_config(job["algo"], job["max_shard_bytes"])
    runtime = DatasetRuntime(num_workers=2)
    print("ready", flush=True)
    started = time.perf_counter()
    (result,) = runtime.write_cache(source, job["base"], writer_config=config)
    return {"seconds": time.perf_counter() - started, "result": described(result)}


def rewrite(job: dict[str, Any]) -> dict[str, Any]:
    """Writes the source again into each base (after a writer there was killed)."""
    config = writer_config(job["algo"], job["max_shard_bytes"])
    runtime = DatasetRuntime(num_workers=2)
    results = {}
    for base in job["bases"]:
        (result,) = runtime.write_cache(SpecSource(job["source"]), base, writer_config=config)
        results[base] = described(result)
    return {"results": results}


MODES = {"disk-full": disk_full, "write-once": write_once, "rewrite": rewrite}

if __name__ == "__main__":
    mode, job = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(MODES[mode](job)), flush=True)
