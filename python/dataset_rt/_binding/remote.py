"""The core's fetch hook for caches in object storage, served by `_remote`'s transports.

The core decides which file of a remote cache is needed when, checks every byte
fetched and keeps the local copies; it asks for a file through the fetch function
given to ``drt_remote_create``. `RemoteHandle` owns one such remote: its fetch
function finds the transport of the cache's URL and writes the file where the core
asks. It must outlive every native dataset opened through it (a `DatasetHandle`
holds it, and every iterator holds its `DatasetHandle`).
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from dataset_rt._binding import native as _native
from dataset_rt._config import RemoteConfig
from dataset_rt._remote import RetryPolicy, Transport, transport_for


@dataclass(frozen=True)
class RemoteStats:
    """What the remote caches of a dataset have fetched in this process
    (`CachedDataset.remote_stats`).

    Attributes:
        files_fetched: files downloaded, shards and the files a cache opens with.
        bytes_fetched: their bytes.
        shards_fetched: shards downloaded (each verified against its SHA-256).
        shard_bytes_fetched: their bytes.
        refetches: shards downloaded again because the first copy did not match
            its SHA-256.
        shards_evicted: shards this process deleted from ``local_dir`` to stay within
            ``RemoteConfig.budget_bytes``. Close to ``shards_fetched`` on a long read
            means the budget thrashes: most shards are fetched again each time they
            are read.
        shard_bytes_evicted: their bytes.

    Examples:
        >>> stats = dataset.remote_stats()
        >>> (stats.files_fetched, stats.refetches, stats.shards_evicted)
        (0, 0, 0)
    """

    files_fetched: int
    bytes_fetched: int
    shards_fetched: int
    shard_bytes_fetched: int
    refetches: int
    shards_evicted: int = 0
    shard_bytes_evicted: int = 0


class RemoteHandle:
    """Owns a native remote (``drt_remote``) and the fetch function it calls."""

    def __init__(self, config: RemoteConfig) -> None:
        self.config = config
        self._policy = RetryPolicy.from_config(config)
        self._transports: dict[str, Transport] = {}
        self._lock = threading.Lock()
        self.local_dir = config.resolved_local_dir()
        self.local_dir.mkdir(parents=True, exist_ok=True)
        # Kept here: the core calls it for as long as the native remote lives.
        self._callback = _native.FETCH_FN(self._fetch)
        encoded = os.fsencode(self.local_dir)
        handle = ctypes.c_void_p()
        _native.check(
            _native.lib.drt_remote_create(
                self._callback, None, encoded, len(encoded), ctypes.byref(handle)
            )
        )
        self.value = handle
        if config.budget_bytes is not None:
            _native.check(_native.lib.drt_remote_set_budget(handle, config.budget_bytes))
        _native.check(_native.lib.drt_remote_set_max_in_flight(handle, config.max_in_flight))
        _native.check(_native.lib.drt_remote_set_revalidate(handle, int(config.revalidate)))

    def pin_version(self, url: str, manifest_sha256: bytes) -> None:
        """Has the opens of the cache at `url` read the version whose manifest.json
        has this SHA-256: from its folder in ``local_dir`` without a request while
        the folder holds it (a dataset reopened in a DataLoader worker or another
        process reads the version its first open read)."""
        if len(manifest_sha256) != 32:
            raise ValueError(f"a manifest SHA-256 has 32 bytes, got {len(manifest_sha256)}")
        encoded = os.fsencode(url)
        _native.check(
            _native.lib.drt_remote_pin_version(self.value, encoded, len(encoded), manifest_sha256)
        )

    def transport(self, url: str) -> Transport:
        """The transport of the cache at `url`, made on first use."""
        with self._lock:
            found = self._transports.get(url)
            if found is None:
                found = self._transports[url] = transport_for(url, self._policy)
            return found

    def _fetch(
        self,
        _context: int | None,
        url: int,
        url_len: int,
        name: int,
        name_len: int,
        dest: int,
        dest_len: int,
        message: int,
        message_cap: int,
    ) -> int:
        """The fetch function the core calls, on its own threads."""
        try:
            url_text = ctypes.string_at(url, url_len).decode("utf-8")
            name_text = ctypes.string_at(name, name_len).decode("utf-8")
            dest_path = Path(os.fsdecode(ctypes.string_at(dest, dest_len)))
            found = self.transport(url_text).fetch(name_text, dest_path)
        except BaseException as error:  # noqa: BLE001 - nothing may unwind into the core
            text = (str(error) or type(error).__name__).encode("utf-8", "replace")
            if message_cap > 0:
                text = text[: message_cap - 1] + b"\0"
                ctypes.memmove(message, text, len(text))
            return _native.FETCH_FAILED
        return _native.FETCH_OK if found else _native.FETCH_NOT_FOUND

    def stats(self) -> RemoteStats:
        out = _native.RemoteStatsStruct()
        _native.check(_native.lib.drt_remote_stats_get(self.value, ctypes.byref(out)))
        return RemoteStats(
            files_fetched=out.fetched_files,
            bytes_fetched=out.fetched_bytes,
            shards_fetched=out.shards_fetched,
            shard_bytes_fetched=out.shard_bytes_fetched,
            refetches=out.refetches,
            shards_evicted=out.evicted_shards,
            shard_bytes_evicted=out.evicted_bytes,
        )

    def __del__(self) -> None:
        if getattr(self, "value", None) and not _native.shutting_down():
            _native.lib.drt_remote_destroy(self.value)
            self.value = ctypes.c_void_p()
