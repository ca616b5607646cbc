"""`dataset_rt._core.cpus`: the CPUs this process may use (affinity, cgroup v1 and v2
quotas, ancestors included) and the DataLoader sizes "auto" derives from them,
on fake ``/proc/self`` and cgroup files."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest

from dataset_rt._core import cpus as _cpus


class FakeSystem:
    """A fake ``/proc/self`` (its ``cgroup`` and ``mountinfo``) and cgroup trees under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = root / "proc" / "self"
        self.proc.mkdir(parents=True)
        self.mounts: list[str] = []
        self.members: list[str] = []

    def mount(self, point: str, fs_type: str, options: str = "rw", root: str = "/") -> Path:
        where = self.root / point
        where.mkdir(parents=True, exist_ok=True)
        escaped = str(where).replace(" ", "\\040")
        number = 30 + len(self.mounts)
        self.mounts.append(
            f"{number} 23 0:{number} {root} {escaped} rw,relatime - {fs_type} {fs_type} {options}"
        )
        return where

    def member(self, line: str) -> None:
        self.members.append(line)

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def quota(self) -> Fraction | None:
        (self.proc / "mountinfo").write_text("\n".join(self.mounts) + "\n")
        (self.proc / "cgroup").write_text("\n".join(self.members) + "\n")
        return _cpus.cgroup_cpu_quota(self.proc)


@pytest.fixture
def system(tmp_path: Path) -> FakeSystem:
    fake = FakeSystem(tmp_path)
    fake.mount("sys/fs/cgroup", "tmpfs", "rw,mode=755")  # not a cgroup: ignored
    return fake


def test_cgroup_v2_quota_of_the_process_group(system: FakeSystem) -> None:
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("0::/job/step")
    system.write(unified / "job" / "step" / "cpu.max", "150000 100000\n")
    assert system.quota() == Fraction(3, 2)


def test_cgroup_v2_an_ancestor_can_hold_the_tighter_quota(system: FakeSystem) -> None:
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("0::/job/step")
    system.write(unified / "job" / "step" / "cpu.max", "max 100000\n")
    system.write(unified / "job" / "cpu.max", "250000 100000\n")
    system.write(unified / "cpu.max", "800000 100000\n")
    assert system.quota() == Fraction(5, 2)


def test_cgroup_v2_max_everywhere_is_no_quota(system: FakeSystem) -> None:
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("0::/job")
    system.write(unified / "job" / "cpu.max", "max 100000\n")
    assert system.quota() is None


def test_cgroup_v1_cfs_quota_and_period(system: FakeSystem) -> None:
    cpu = system.mount("sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")
    system.mount("sys/fs/cgroup/memory", "cgroup", "rw,memory")
    system.member("4:memory:/docker/abc")
    system.member("2:cpu,cpuacct:/docker/abc")
    system.write(cpu / "docker" / "abc" / "cpu.cfs_quota_us", "300000\n")
    system.write(cpu / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert system.quota() == Fraction(3)


def test_cgroup_v1_quota_minus_one_is_no_quota(system: FakeSystem) -> None:
    cpu = system.mount("sys/fs/cgroup/cpu", "cgroup", "rw,cpu")
    system.member("1:cpu:/")
    system.write(cpu / "cpu.cfs_quota_us", "-1\n")
    system.write(cpu / "cpu.cfs_period_us", "100000\n")
    assert system.quota() is None


def test_a_namespaced_cgroup_is_read_at_its_mount_root(system: FakeSystem) -> None:
    # In a container with its own cgroup namespace, the mount shows the process's
    # own group: its membership path is inside the mount's root.
    unified = system.mount("sys/fs/cgroup", "cgroup2", root="/kubepods/pod1")
    system.member("0::/kubepods/pod1")
    system.write(unified / "cpu.max", "200000 100000\n")
    assert system.quota() == Fraction(2)


def test_both_hierarchies_count_and_the_tightest_wins(system: FakeSystem) -> None:
    cpu = system.mount("sys/fs/cgroup/cpu", "cgroup", "rw,cpu")
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("1:cpu:/a")
    system.member("0::/a")
    system.write(cpu / "a" / "cpu.cfs_quota_us", "400000\n")
    system.write(cpu / "a" / "cpu.cfs_period_us", "100000\n")
    system.write(unified / "a" / "cpu.max", "150000 100000\n")
    assert system.quota() == Fraction(3, 2)


def test_a_mount_point_with_a_space(system: FakeSystem) -> None:
    unified = system.mount("cgroup root/unified", "cgroup2")
    system.member("0::/")
    system.write(unified / "cpu.max", "100000 100000\n")
    assert system.quota() == Fraction(1)


@pytest.mark.parametrize("text", ["lots 100000", "100000 0", "0 100000", "-5 100000", "1 2 3"])
def test_a_malformed_quota_is_warned_about_and_ignored(system: FakeSystem, text: str) -> None:
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("0::/job")
    system.write(unified / "job" / "cpu.max", text + "\n")
    with pytest.warns(RuntimeWarning, match="counting CPUs: .*cpu.max: unexpected quota"):
        assert system.quota() is None


def test_no_cgroup_files_is_no_quota(tmp_path: Path) -> None:
    assert _cpus.cgroup_cpu_quota(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("affinity", "quota", "expected"),
    [
        (8, "150000 100000", 1),
        (8, "50000 100000", 1),
        (8, "max 100000", 8),
        (2, "400000 100000", 2),
    ],
)
def test_usable_cpus_are_the_smaller_of_affinity_and_quota_rounded_down(
    system: FakeSystem,
    monkeypatch: pytest.MonkeyPatch,
    affinity: int,
    quota: str,
    expected: int,
) -> None:
    unified = system.mount("sys/fs/cgroup/unified", "cgroup2")
    system.member("0::/")
    system.write(unified / "cpu.max", quota + "\n")
    system.quota()  # writes the fake /proc/self files
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    assert _cpus.usable_cpu_count(system.proc) == expected


def test_this_process_has_at_least_one_cpu_and_at_most_the_machine() -> None:
    assert 1 <= _cpus.usable_cpu_count() <= (os.cpu_count() or 1)


@pytest.mark.parametrize(
    ("cpus", "ranks", "workers"),
    [(1, 1, 0), (2, 1, 1), (3, 1, 2), (8, 1, 4), (64, 1, 4), (8, 2, 3), (8, 8, 0), (4, 8, 0)],
)
def test_auto_loader_workers(cpus: int, ranks: int, workers: int) -> None:
    assert _cpus.loader_workers(cpus, ranks) == workers


@pytest.mark.parametrize(
    ("cpus", "workers", "ranks", "threads"),
    [(1, 0, 1, 1), (8, 0, 1, 4), (8, 3, 1, 2), (8, 3, 2, 1), (64, 4, 2, 4), (2, 4, 4, 1)],
)
def test_auto_native_threads(cpus: int, workers: int, ranks: int, threads: int) -> None:
    assert _cpus.native_threads(cpus, workers, ranks) == threads
