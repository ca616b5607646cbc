"""A watcher of a local_dir's byte budget, as a user sees it from outside the core:
the bytes of shard files and download temporaries in every cache folder."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def shard_bytes(local_dir: Path) -> int:
    """What the budget covers as a user sees it: shard files and download
    temporaries in every cache folder's shards directory."""
    total = 0
    try:
        folders = list(os.scandir(local_dir))
    except FileNotFoundError:
        return 0
    for folder in folders:
        if not folder.is_dir():
            continue
        try:
            entries = list(os.scandir(os.path.join(folder.path, "shards")))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.name.endswith(".bin") or ".tmp-" in entry.name:
                try:
                    total += entry.stat().st_size
                except FileNotFoundError:
                    continue  # deleted between the listing and the stat
    return total


class Watcher:
    """Polls `shard_bytes(local_dir)` on a thread until stopped; keeps the largest."""

    def __init__(self, local_dir: Path) -> None:
        self.local_dir = local_dir
        self.max_bytes = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max_bytes = max(self.max_bytes, shard_bytes(self.local_dir))
            self.samples += 1
            time.sleep(0.001)

    @contextmanager
    def running(self) -> Iterator[Watcher]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
        self.max_bytes = max(self.max_bytes, shard_bytes(self.local_dir))
