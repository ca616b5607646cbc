"""How many CPUs this process may use, and the DataLoader sizes derived from it.

The count is the smallest of: the CPUs of the machine, the CPUs this process's
affinity allows (``os.sched_getaffinity``, which a cgroup's cpuset restricts),
and the CPU quota of each cgroup the process is in, ancestors included (cgroup v2
``cpu.max``, cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), rounded
down, and at least 1. A missing file is no limit; a file that cannot be read or
parsed is warned about and ignored.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path, PurePosixPath

PROC_SELF = Path("/proc/self")
# The most DataLoader worker processes and native threads "auto" chooses per rank
# (dataset-rt 0.4.8's caps: more rarely helps a loader and costs memory).
AUTO_WORKERS_MAX = 4
AUTO_THREADS_MAX = 4


@dataclass(frozen=True)
class _Mount:
    """A mounted cgroup hierarchy that can hold CPU quotas."""

    root: PurePosixPath  # the hierarchy's directory shown at `point`
    point: Path
    version: int  # 1 or 2


def usable_cpu_count(proc_self: Path | None = None) -> int:
    """The whole CPUs this process may use (at least 1); `proc_self` is where
    ``/proc/self`` is (tests point it at fake files)."""
    count = os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        count = min(count, len(os.sched_getaffinity(0)) or count)
    quota = cgroup_cpu_quota(proc_self)
    if quota is not None:
        count = min(count, math.floor(quota))
    return max(1, count)


def cgroup_cpu_quota(proc_self: Path | None = None) -> Fraction | None:
    """The tightest CPU quota, in CPUs, of the cgroups the process is in (their
    ancestors included); None when there is none (or no cgroup file system)."""
    proc_self = PROC_SELF if proc_self is None else proc_self
    cgroups = _read(proc_self / "cgroup")
    mountinfo = _read(proc_self / "mountinfo")
    if cgroups is None or mountinfo is None:
        return None
    quotas = [quota for mount in _cpu_mounts(mountinfo) for quota in _quotas(mount, cgroups)]
    return min(quotas, default=None)


def loader_workers(cpus: int, local_ranks: int) -> int:
    """``num_workers="auto"``: the CPUs of one rank less one for training, at most 4."""
    assert cpus >= 1 and local_ranks >= 1
    return min(AUTO_WORKERS_MAX, max(0, cpus // local_ranks - 1))


def native_threads(cpus: int, workers: int, local_ranks: int) -> int:
    """``native_num_workers="auto"``: the CPUs of one rank shared by its loader
    processes (the main process when there are none), 1 to 4 threads each."""
    assert cpus >= 1 and workers >= 0 and local_ranks >= 1
    return max(1, min(AUTO_THREADS_MAX, cpus // (max(1, workers) * local_ranks)))


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        _warn(f"cannot read {path}: {error}")
        return None


def _warn(message: str) -> None:
    warnings.warn(f"dataset_rt: counting CPUs: {message}; ignored", RuntimeWarning, stacklevel=4)


def _cpu_mounts(mountinfo: str) -> Iterator[_Mount]:
    """The cgroup2 mounts and the cgroup v1 mounts of the ``cpu`` controller
    (``/proc/self/mountinfo``: ``id parent dev root point options ... - type source
    super-options``, with spaces in paths written ``\\040``)."""
    for line in mountinfo.splitlines():
        fields, separator, rest = line.partition(" - ")
        before, after = fields.split(), rest.split()
        if not separator or len(before) < 5 or len(after) < 3:
            continue
        version = {"cgroup2": 2, "cgroup": 1}.get(after[0])
        if version is None or (version == 1 and "cpu" not in after[2].split(",")):
            continue
        root, point = (_unescape(field) for field in before[3:5])
        yield _Mount(PurePosixPath(root), Path(point), version)


def _unescape(field: str) -> str:
    for escaped, character in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, character)
    return field


def _quotas(mount: _Mount, cgroups: str) -> Iterator[Fraction]:
    """The quotas on the way from the process's cgroup in `mount` up to its root."""
    for line in cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if mount.version == 2 and controllers != "":
            continue
        if mount.version == 1 and "cpu" not in controllers.split(","):
            continue
        member = PurePosixPath(path)
        relative = member.relative_to(mount.root) if member.is_relative_to(mount.root) else None
        directory = mount.point / relative if relative is not None else mount.point
        while True:
            quota = _quota_in(directory, mount.version)
            if quota is not None:
                yield quota
            if directory == mount.point or directory == directory.parent:
                break
            directory = directory.parent


def _quota_in(directory: Path, version: int) -> Fraction | None:
    if version == 2:
        text = _read(directory / "cpu.max")
        if text is None:
            return None
        fields = text.split()
        if len(fields) == 2 and fields[0] == "max":
            return None
        quota, period = fields if len(fields) == 2 else (text.strip(), "")
        return _ratio(quota, period, directory / "cpu.max")
    quota_text = _read(directory / "cpu.cfs_quota_us")
    period_text = _read(directory / "cpu.cfs_period_us")
    if quota_text is None or period_text is None or quota_text.strip() == "-1":
        return None
    return _ratio(quota_text.strip(), period_text.strip(), directory / "cpu.cfs_quota_us")


def _ratio(quota: str, period: str, path: Path) -> Fraction | None:
    try:
        value = Fraction(int(quota), int(period))
    except (ValueError, ZeroDivisionError):
        _warn(f"{path}: unexpected quota {quota!r} over period {period!r}")
        return None
    if value <= 0:
        _warn(f"{path}: unexpected quota {quota!r} over period {period!r}")
        return None
    return value
