"""Faults during a write (SPEC section 8, docs/storage-format.md "Publication
protocol"): a file that may not grow, a full disk, a kill at any moment.

Each writer runs in a child process (tests/helpers/fault_writer.py) so that the fault
hits it, not pytest. Whatever happens, the base directory holds only complete
caches and, under tmp/, what the protocol says may be left there; a failed
source is a `CacheWriteError` naming the cause, the other sources are written,
and the process (or the next one) writes the failed source afterwards.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if sys.platform == "win32":
    pytest.skip("file size limits, mounts and SIGKILL are POSIX", allow_module_level=True)

import dataset_rt
from conftest import published_entries, pythonpath_before_inherited
from dataset_rt import CacheWriteSuccess, DatasetRuntime, ReaderConfig
from fault_writer import Metadata, SourceSpec, SpecSource, source_samples, writer_config

ALGOS = ("none", "lz4")
HERE = Path(__file__).resolve().parent.parent / "helpers"
WRITER_SCRIPT = HERE / "fault_writer.py"
MiB = 1 << 20


def child_environment() -> dict[str, str]:
    """This environment, with the package pytest imported and tests/ first on the path."""
    package_parent = Path(dataset_rt.__file__).resolve().parent.parent
    return {
        **os.environ,
        "PYTHONPATH": pythonpath_before_inherited(package_parent, HERE),
        "PYTHONDONTWRITEBYTECODE": "1",  # no file writes of its own under a size limit
    }


def run_writer(mode: str, job: dict[str, Any]) -> dict[str, Any]:
    """Runs fault_writer.py to the end; its last line of output, parsed."""
    done = subprocess.run(
        [sys.executable, str(WRITER_SCRIPT), mode, json.dumps(job)],
        capture_output=True,
        text=True,
        env=child_environment(),
        timeout=120,
    )
    assert done.returncode == 0, f"{mode} writer failed ({done.returncode}):\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def read_back(runtime: DatasetRuntime, path: Path) -> list[tuple[bytes, Metadata]]:
    """Every sample of the cache at `path`, every checksum validated."""
    config = ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    dataset = runtime.cached_dataset([path], reader_config=config)
    samples: list[tuple[bytes, Metadata]] = []
    for sample in dataset:
        assert isinstance(sample.data, bytes), type(sample.data)  # payload="bytes", the default
        samples.append((sample.data, dict(sample.metadata)))
    return samples


def assert_reads_back(runtime: DatasetRuntime, path: Path, spec: SourceSpec) -> None:
    got = read_back(runtime, path)
    expected = source_samples(spec)
    assert len(got) == len(expected), f"{path} holds {len(got)} of {len(expected)} samples"
    assert got == expected, f"{path} holds other samples than source {spec['name']!r}"


def file_sizes(cache: Path) -> dict[str, int]:
    """Each file of a cache (relative path) and its size."""
    return {
        str(path.relative_to(cache)): path.stat().st_size
        for path in cache.rglob("*")
        if path.is_file()
    }


# ---- a file that may not grow, a full disk --------------------------------------------

BEFORE: SourceSpec = {"name": "before", "count": 8, "payload_bytes": 64}
AFTER: SourceSpec = {"name": "after", "count": 8, "payload_bytes": 64}

# For each file the limit should stop, a source whose largest file it is (and
# the max_shard_bytes that makes it so): the limit is then set between that
# file and every other file of the three sources.
BIG_SOURCES: dict[str, tuple[SourceSpec, int]] = {
    "shard": ({"name": "big", "count": 48, "payload_bytes": 8192}, MiB),
    "index.bin": ({"name": "big", "count": 4000, "payload_bytes": 1}, 16 << 10),
    "metadata.arrow": (
        {"name": "big", "count": 64, "payload_bytes": 1, "label_bytes": 2000},
        16 << 10,
    ),
    "manifest.json": ({"name": "big", "count": 300, "payload_bytes": 64}, 1),
}


def size_limit_between(
    runtime: DatasetRuntime, directory: Path, target: str, algo: str
) -> tuple[int, int, int]:
    """Writes the three sources without a limit and returns a file size limit
    that every file but the target fits: (limit, largest other file, target)."""
    big, max_shard_bytes = BIG_SOURCES[target]
    specs = [BEFORE, big, AFTER]
    config = writer_config(algo, max_shard_bytes)
    results = runtime.write_cache([SpecSource(s) for s in specs], directory, writer_config=config)
    assert all(isinstance(r, CacheWriteSuccess) for r in results), f"unlimited write: {results}"
    target_size, others = 0, [0]
    for spec in specs:
        for name, size in file_sizes(directory / spec["name"]).items():
            is_target = spec is big and (
                name.startswith("shards/") if target == "shard" else name == target
            )
            if is_target:
                target_size = max(target_size, size)
            else:
                others.append(size)
    assert max(others) < target_size, (
        f"{target} ({target_size} bytes) is not the largest file ({max(others)} bytes)"
    )
    return (max(others) + target_size) // 2, max(others), target_size


def check_failed_write(
    runtime: DatasetRuntime,
    base: Path,
    report: dict[str, Any],
    failing: SourceSpec,
    expected_message: str,
) -> None:
    """The failing source is an error matching `expected_message` and left
    nothing; the others are published; the same process wrote it afterwards."""
    before, failed, after = report["results"]
    assert before == {"kind": "CacheWriteSuccess", "name": "before", "detail": str(base / "before")}
    assert after == {"kind": "CacheWriteSuccess", "name": "after", "detail": str(base / "after")}
    assert failed["kind"] == "CacheWriteError", f"the write under the fault: {failed}"
    assert re.fullmatch(expected_message, failed["detail"]), (
        f"message {failed['detail']!r} does not match {expected_message!r}"
    )
    assert report["base_after_failure"] == ["after", "before", "tmp"], (
        f"after the failure the base holds {report['base_after_failure']}"
    )
    assert report["tmp_after_failure"] == [], (
        f"staging or lock left under tmp/: {report['tmp_after_failure']}"
    )
    assert report["files_left_open"] == 0, f"{report['files_left_open']} files left open"
    retry = {"kind": "CacheWriteSuccess", "name": "big", "detail": str(base / "big")}
    assert report["retry"] == retry, f"the write after the fault was lifted: {report['retry']}"
    assert report["retry_reads_back"], "the cache written after the fault reads back wrong"
    for spec in (BEFORE, AFTER, failing):
        assert_reads_back(runtime, base / spec["name"], spec)
    assert sorted(p.name for p in (base / "tmp").iterdir()) == [], "tmp/ is not empty at the end"


@pytest.mark.parametrize("target", list(BIG_SOURCES))
@pytest.mark.parametrize("algo", ALGOS)
def test_a_file_over_the_size_limit_fails_its_source_only_and_leaves_nothing(
    runtime: DatasetRuntime, tmp_path: Path, algo: str, target: str
) -> None:
    limit, fitting, target_size = size_limit_between(runtime, tmp_path / "unlimited", target, algo)
    big, max_shard_bytes = BIG_SOURCES[target]
    base = tmp_path / "caches"
    job = {
        "base": str(base),
        "sources": [BEFORE, big, AFTER],
        "failing": "big",
        "algo": algo,
        "max_shard_bytes": max_shard_bytes,
        "file_size_limit": limit,
    }
    report = run_writer("disk-full", job)
    file = r"shard \d+" if target == "shard" else re.escape(target)
    context = f"(limit {limit} bytes, other files up to {fitting}, {target} {target_size})"
    try:
        check_failed_write(
            runtime,
            base,
            report,
            big,
            rf"cannot write {file}: file too large: the limit is {limit} bytes \(ulimit -f\)",
        )
    except AssertionError as error:
        raise AssertionError(f"{error} {context}") from None


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Any:
    """A 2 MiB tmpfs mounted at a fresh directory; skips where mounting is not permitted."""
    mountpoint = tmp_path / "tmpfs"
    mountpoint.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mountpoint)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("no mount command here")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def test_a_full_disk_fails_its_source_only_and_leaves_nothing(
    runtime: DatasetRuntime, small_tmpfs: Path
) -> None:
    big: SourceSpec = {"name": "big", "count": 48, "payload_bytes": 64 << 10}  # 3 MiB
    base = small_tmpfs / "caches"
    job = {
        "base": str(base),
        "sources": [BEFORE, big, AFTER],
        "failing": "big",
        "algo": "none",
        "max_shard_bytes": MiB,
        "mountpoint": str(small_tmpfs),
        "remount_size": "16m",
    }
    report = run_writer("disk-full", job)
    check_failed_write(
        runtime, base, report, big, r"cannot write shard \d+: no space left on device"
    )


# ---- SIGKILL at any moment ----------------------------------------------------------

KILL_POINTS = 20
# 8 MiB in 64 shards (32 with lz4, which halves the payloads).
KILLED: SourceSpec = {"name": "kill", "count": 1024, "payload_bytes": 8192, "compressible": True}
KILLED_MAX_SHARD_BYTES = 128 << 10


def start_writer(base: Path, algo: str, log: Path) -> subprocess.Popen[str]:
    """A write-once writer that has built its source and is about to write it
    (its stderr goes to `log`)."""
    job = {
        "base": str(base),
        "source": KILLED,
        "algo": algo,
        "max_shard_bytes": KILLED_MAX_SHARD_BYTES,
    }
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(WRITER_SCRIPT), "write-once", json.dumps(job)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=child_environment(),
        )
    assert process.stdout is not None
    ready = process.stdout.readline()
    if ready != "ready\n":
        process.kill()
        process.communicate()
        pytest.fail(f"the writer did not start: {ready!r}\n{log.read_text()}")
    return process


def unkilled_write_seconds(base: Path, algo: str) -> float:
    log = base.parent / "measure.log"
    process = start_writer(base, algo, log)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, f"the unkilled writer failed:\n{log.read_text()}"
    report = json.loads(out.strip().splitlines()[-1])
    assert report["result"]["kind"] == "CacheWriteSuccess", f"unkilled write: {report}"
    return float(report["seconds"])


def staging_snapshot(base: Path) -> dict[str, int | None]:
    """Everything under base/tmp but the lock file: each file's size, None for a directory."""
    tmp = base / "tmp"
    if not tmp.exists():
        return {}
    return {
        str(path.relative_to(tmp)): None if path.is_dir() else path.stat().st_size
        for path in tmp.rglob("*")
        if path.name != "kill.lock"
    }


def check_after_kill(runtime: DatasetRuntime, base: Path, pid: int) -> bool:
    """Only a complete cache or nothing outside tmp/; under tmp/ only the lock
    file and the killed writer's staging directory. Whether it was published."""
    entries = published_entries(base)
    assert entries in ([], ["kill"]), f"the base holds {entries}"
    if entries:
        assert_reads_back(runtime, base / "kill", KILLED)
    tmp = base / "tmp"
    left = sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []
    staging = re.compile(rf"{pid}\.[0-9a-f]+\.\d+\.staging")
    unexpected = [n for n in left if n != "kill.lock" and not staging.fullmatch(n)]
    assert unexpected == [], f"tmp/ holds {unexpected}, not the lock or the writer's staging"
    return bool(entries)


@pytest.mark.parametrize("algo", ALGOS)
def test_a_writer_killed_at_any_moment_leaves_a_complete_cache_or_none(
    runtime: DatasetRuntime, tmp_path: Path, algo: str
) -> None:
    seconds = unkilled_write_seconds(tmp_path / "measure", algo)
    assert_reads_back(runtime, tmp_path / "measure" / "kill", KILLED)
    # Spread over the write and a little past its end (a kill after publication).
    spread = random.Random(f"kill points {algo}")
    delays = [seconds * 1.1 * (k + spread.random()) / KILL_POINTS for k in range(KILL_POINTS)]
    outcomes = []
    for point, delay in enumerate(delays):
        base = tmp_path / f"point{point:02}"
        process = start_writer(base, algo, tmp_path / f"point{point:02}.log")
        time.sleep(delay)
        process.kill()
        process.communicate(timeout=120)
        context = f"kill point {point} at {delay * 1000:.1f} ms of {seconds * 1000:.1f} ms"
        try:
            published = check_after_kill(runtime, base, process.pid)
        except AssertionError as error:
            raise AssertionError(f"{context}: {error}") from None
        outcomes.append((base, published, staging_snapshot(base), context))

    # A later writer of the same name, in a process of its own.
    job = {
        "bases": [str(base) for base, *_ in outcomes],
        "source": KILLED,
        "algo": algo,
        "max_shard_bytes": KILLED_MAX_SHARD_BYTES,
    }
    results = run_writer("rewrite", job)["results"]
    for base, published, stale, context in outcomes:
        target = base / "kill"
        if published:
            expected = {
                "kind": "CacheWriteError",
                "name": "kill",
                "detail": f"cache path already exists: {target}",
            }
        else:
            expected = {"kind": "CacheWriteSuccess", "name": "kill", "detail": str(target)}
        assert results[str(base)] == expected, (
            f"{context}: the later write gave {results[str(base)]}"
        )
        assert_reads_back(runtime, target, KILLED)
        # The protocol: the later writer takes the lock file over and deletes it,
        # and never touches another writer's staging directory.
        assert not (base / "tmp" / "kill.lock").exists(), f"{context}: the lock file is left"
        assert staging_snapshot(base) == stale, f"{context}: the stale staging changed"
    interrupted = sum(1 for _, published, stale, _ in outcomes if stale and not published)
    assert interrupted > 0, f"no kill landed inside the write ({seconds * 1000:.1f} ms)"


# ---- the manifest's size limit ------------------------------------------------------


def test_the_reader_refuses_a_manifest_over_64_mib_and_reads_one_of_64_mib(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    spec: SourceSpec = {"name": "m", "count": 3, "payload_bytes": 10}
    config = writer_config("none", MiB)
    (result,) = runtime.write_cache(SpecSource(spec), tmp_path, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    manifest = tmp_path / "m" / "manifest.json"
    text = manifest.read_bytes()
    # Trailing whitespace keeps the JSON valid: only the size is at stake.
    manifest.write_bytes(text + b" " * (64 * MiB - len(text)))
    assert_reads_back(runtime, tmp_path / "m", spec)
    manifest.write_bytes(text + b" " * (64 * MiB + 1 - len(text)))
    with pytest.raises(ValueError, match="manifest.json is larger than the 64 MiB this reader"):
        read_back(runtime, tmp_path / "m")
