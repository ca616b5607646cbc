"""Processes that share one local_dir (the core's lock files, read/fetch_lock.zig and
read/shard_budget.zig): readers at once download each file once between them, share
one byte budget, and a reader killed in the middle of a download leaves only a
temporary file (and a stale reservation), which the next reader removes. Each reader
is a spawned process; the cache is served over HTTP on 127.0.0.1."""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from budget_watcher import Watcher
from conftest import ListSource
from dataset_rt import CachedDataset, DatasetRuntime, ReaderConfig, RemoteConfig, WriterConfig
from fault_proxy import FaultProxy, StaticServer, stall

CONFIG = ReaderConfig(seed=0, shuffle=False)
# Seconds a test waits for a child at most: spawned interpreters are slow under qemu.
CHILD_TIMEOUT_S = 120.0

Samples = list[tuple[int, bytes]]


def write_site(runtime: DatasetRuntime, site: Path, name: str, count: int = 80) -> Path:
    """A cache of several shards under `site`, the folder the server serves: 80
    samples make 3 shards, 150 make 6."""
    samples = [(bytes([i % 251]) * (100 + i), {"i": i}) for i in range(count)]
    config = WriterConfig(show_progress=False, max_shard_bytes=4096)
    runtime.write_cache([ListSource(name, samples)], site, writer_config=config)
    return site / name


def samples_of(dataset: CachedDataset) -> Samples:
    return [(s.sample_id, bytes(s.data)) for s in dataset]


def _read_in_child(
    url: str, local_dir: str, start: Any, queue: Any, budget: int | None, epochs: int
) -> None:
    """Reads every sample of the cache at `url` into `local_dir` `epochs` times once
    all readers have started (`start`, a barrier, or None), within `budget`; puts
    (began, ended, samples of the last epoch, shards evicted)."""
    if start is not None:
        start.wait(CHILD_TIMEOUT_S)
    began = time.time()
    remote = RemoteConfig(local_dir=local_dir, budget_bytes=budget, retries=2, timeout_s=30.0)
    dataset = DatasetRuntime(num_workers=2).cached_dataset(
        [url], reader_config=CONFIG, remote=remote
    )
    for _ in range(epochs):
        samples = samples_of(dataset)
    queue.put((began, time.time(), samples, dataset.remote_stats().shards_evicted))


@contextmanager
def children(
    count: int, url: str, local_dir: Path, budget: int | None = None, epochs: int = 1
) -> Iterator[tuple[list[Any], Any]]:
    """`count` spawned readers of `url` into `local_dir` within `budget`, started
    together, and the queue of their results; every one of them is gone on exit."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start = context.Barrier(count) if count > 1 else None
    arguments = (url, str(local_dir), start, queue, budget, epochs)
    processes = [context.Process(target=_read_in_child, args=arguments) for _ in range(count)]
    for process in processes:
        process.start()
    try:
        yield processes, queue
    finally:
        for process in processes:
            process.join(timeout=CHILD_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(timeout=30)


def wait_for(found: Callable[[], list[Path]], what: str) -> list[Path]:
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not (result := found()):
        assert time.monotonic() < deadline, f"waited {CHILD_TIMEOUT_S} s for {what}"
        time.sleep(0.01)
    return result


def temporaries(local_dir: Path) -> list[str]:
    return sorted(p.name for p in local_dir.rglob("*") if ".tmp-" in p.name)


def cache_files(cache: Path, name: str) -> list[str]:
    return sorted(
        f"/{name}/{p.relative_to(cache).as_posix()}" for p in cache.rglob("*") if p.is_file()
    )


def test_readers_at_once_in_two_processes_download_every_file_once(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write_site(runtime, tmp_path / "site", "shared")
    expected = samples_of(runtime.cached_dataset([cache], reader_config=CONFIG))
    local_dir = tmp_path / "copies"
    # Every answer late, so that each reader finds the other one's download under way.
    with StaticServer(tmp_path / "site") as server, FaultProxy(server.address, 0.1) as proxy:
        with children(2, f"{proxy.url}/shared", local_dir) as (_, queue):
            results = [queue.get(timeout=CHILD_TIMEOUT_S) for _ in range(2)]
        requests = Counter(request.removeprefix("GET ") for request in proxy.requests)
    (first_began, first_ended, first, _), (second_began, second_ended, second, _) = results
    assert first == expected and second == expected
    # The two readers ran at the same time.
    assert first_began < second_ended and second_began < first_ended
    # The manifest is fetched at every open; every other file once between the two.
    assert sorted(requests) == cache_files(cache, "shared")
    assert requests.pop("/shared/manifest.json") == 2
    assert set(requests.values()) == {1}, requests
    assert temporaries(local_dir) == []


def test_a_reader_killed_in_a_download_leaves_a_temporary_the_next_one_removes(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write_site(runtime, tmp_path / "site", "killed")
    expected = samples_of(runtime.cached_dataset([cache], reader_config=CONFIG))
    local_dir = tmp_path / "copies"
    with StaticServer(tmp_path / "site") as server, FaultProxy(server.address) as proxy:
        url = f"{proxy.url}/killed"
        # Half of the shard's body, then nothing for longer than the test runs.
        proxy.script_for("/shards/000000.bin", stall(10 * CHILD_TIMEOUT_S))
        with children(1, url, local_dir) as ([reader], _):
            left = wait_for(lambda: list(local_dir.rglob("000000.bin.tmp-*")), "the download")
            assert "GET /killed/shards/000000.bin" in proxy.requests
            reader.kill()  # SIGKILL; TerminateProcess on Windows
            reader.join(timeout=30)
        if sys.platform != "win32":
            assert reader.exitcode == -signal.SIGKILL
        assert [p.exists() for p in left] == [True] * len(left)
        with children(1, url, local_dir) as (_, queue):
            _, _, samples, _ = queue.get(timeout=CHILD_TIMEOUT_S)
    assert samples == expected
    assert temporaries(local_dir) == []
    assert proxy.requests.count("GET /killed/shards/000000.bin") == 2


def shard_sizes(cache: Path) -> list[int]:
    return sorted((p.stat().st_size for p in (cache / "shards").glob("*.bin")), reverse=True)


def reservations(local_dir: Path) -> list[str]:
    return sorted(p.name for p in local_dir.rglob("*") if ".reserved-" in p.name)


def test_two_processes_share_one_budget_and_never_exceed_it(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write_site(runtime, tmp_path / "site", "budget", 150)
    expected = samples_of(runtime.cached_dataset([cache], reader_config=CONFIG))
    sizes = shard_sizes(cache)
    # Three of the six shards fit: each reader holds one and fetches the next.
    budget = sizes[0] + sizes[1] + sizes[2]
    local_dir = tmp_path / "copies"
    with StaticServer(tmp_path / "site") as server, FaultProxy(server.address, 0.02) as proxy:
        url = f"{proxy.url}/budget"
        with Watcher(local_dir).running() as watcher:
            with children(2, url, local_dir, budget, epochs=2) as (_, queue):
                results = [queue.get(timeout=CHILD_TIMEOUT_S) for _ in range(2)]
    assert [samples for _, _, samples, _ in results] == [expected, expected]
    (first_began, first_ended, _, _), (second_began, second_ended, _, _) = results
    assert first_began < second_ended and second_began < first_ended
    assert watcher.samples > 10
    assert 0 < watcher.max_bytes <= budget, (watcher.max_bytes, budget)
    # Two epochs of six shards through room for three: shards were evicted.
    assert sum(evicted for _, _, _, evicted in results) > 0
    assert temporaries(local_dir) == [] and reservations(local_dir) == []


def test_a_reader_killed_in_a_download_under_a_budget_leaves_nothing_that_counts(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write_site(runtime, tmp_path / "site", "killed", 150)
    expected = samples_of(runtime.cached_dataset([cache], reader_config=CONFIG))
    sizes = shard_sizes(cache)
    budget = sizes[0] + sizes[1]
    local_dir = tmp_path / "copies"
    with StaticServer(tmp_path / "site") as server, FaultProxy(server.address) as proxy:
        url = f"{proxy.url}/killed"
        proxy.script_for("/shards/000001.bin", stall(10 * CHILD_TIMEOUT_S))
        with children(1, url, local_dir, budget) as ([reader], _):
            wait_for(lambda: list(local_dir.rglob("000001.bin.tmp-*")), "the download")
            reader.kill()
            reader.join(timeout=30)
        # The stalled download's temporary and reservation are left behind (and
        # those of shards still being fetched ahead when the kill came).
        assert len(temporaries(local_dir)) >= 1
        left = reservations(local_dir)
        sizes = sizes_of(cache)
        assert f"000001.bin.reserved-{sizes[1]}" in left
        assert set(left) <= {f"{i:06d}.bin.reserved-{size}" for i, size in enumerate(sizes)}
        with Watcher(local_dir).running() as watcher:
            with children(1, url, local_dir, budget) as (_, queue):
                _, _, samples, evicted = queue.get(timeout=CHILD_TIMEOUT_S)
    assert samples == expected
    assert watcher.max_bytes <= budget
    assert evicted > 0
    assert temporaries(local_dir) == [] and reservations(local_dir) == []


def sizes_of(cache: Path) -> list[int]:
    """Each shard's length, by shard id."""
    return [p.stat().st_size for p in sorted((cache / "shards").glob("*.bin"))]
