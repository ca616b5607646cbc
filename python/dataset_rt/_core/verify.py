"""`verify`: scrub a whole cache and report every problem found."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._binding.reader import CachePath, NativeVerifier
from dataset_rt._config import RemoteConfig
from dataset_rt._remote import is_remote, parse_remote_url

_REFRESH_SECONDS = 0.5
_LOG_REFRESH_SECONDS = 10.0


class VerifyProblem(NamedTuple):
    """One problem `verify` found.

    Examples:
        >>> shard = next((cache_path / "shards").iterdir())
        >>> import shutil
        >>> _ = shutil.copytree(cache_path, "copy")
        >>> with open(f"copy/shards/{shard.name}", "r+b") as file:
        ...     _ = file.seek(40)
        ...     _ = file.write(b"X")
        >>> problem = dataset_rt.verify("copy", show_progress=False).problems[0]
        >>> problem.file == f"shards/{shard.name}"
        True
    """

    file: str
    """The file it is in, relative to the cache (``"shards/000003.bin"``); ``""``
    when it concerns the cache as a whole."""
    sample_id: int | None
    """The sample whose record is bad, where the problem is one record's."""
    offset: int | None
    """The record's byte offset in its shard, where the problem is one record's."""
    message: str


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` found in one cache.

    Examples:
        >>> report = dataset_rt.verify(cache_path, show_progress=False)
        >>> report.ok, report.problems, report.problems_total
        (True, [], 0)
    """

    path: CachePath
    """The cache checked: its folder, or the URL of a remote cache."""
    problems: list[VerifyProblem] = field(default_factory=list)
    """Every problem found (the first 10,000 of them; `problems_total` counts all)."""
    problems_total: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong with the cache.

        Examples:
            >>> dataset_rt.verify(cache_path, show_progress=False).ok
            True
        """
        return self.problems_total == 0


def verify(
    path: str | os.PathLike[str],
    *,
    num_workers: int | None = None,
    show_progress: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    remote: RemoteConfig | None = None,
) -> VerifyReport:
    """Check a whole cache and report every problem, not only the first.

    Checks every file the manifest lists (present, of its listed length, and
    of its listed SHA-256) and then, when the cache opens, every record as
    every read checks it: index bounds and placement, the record's CRC-32C,
    its embedded metadata against ``metadata.arrow``, LZ4 blocks decoding to
    their stated size, and each shard's payload total. Runs on `num_workers`
    native threads (default: the CPU count, at most 8) at disk speed, with a
    progress line on stderr when `show_progress`. `on_progress(checked, total)`,
    when given, is called with the bytes checked so far and the bytes to check,
    from another thread, every half second and once at the end (for a progress
    bar of one's own).

    `path` may be the URL of a cache in object storage (docs/remote.md): every
    file is first fetched into ``remote.local_dir`` (`RemoteConfig`; None: its
    defaults), each checked as it arrives, and the local copy is then scrubbed.

    Examples:
        >>> report = dataset_rt.verify(cache_path, num_workers=2, show_progress=False)
        >>> report.ok
        True
        >>> (cache_path / "records.crc32c").stat().st_size == 4 * 100  # one CRC per record
        True
    """
    if num_workers is None:
        num_workers = min(os.cpu_count() or 1, 8)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int):
        raise TypeError(f"num_workers must be an int, got {type(num_workers).__name__}")
    if not 0 <= num_workers <= _native.U32_MAX:
        raise errors.InvalidArgumentError(
            f"num_workers must be between 1 and 256, got {num_workers}"
        )
    if remote is not None and not isinstance(remote, RemoteConfig):
        raise TypeError(f"remote must be a RemoteConfig or None, got {type(remote).__name__}")
    cache: CachePath
    if is_remote(path):
        cache = str(path)
        parse_remote_url(cache)
    else:
        cache = Path(os.fspath(path))
    verifier = NativeVerifier(_native.RuntimeHandle(num_workers), cache, remote)
    try:
        done = threading.Event()
        reporter = None
        if show_progress or on_progress is not None:
            reporter = threading.Thread(
                target=_report_progress, args=(verifier, cache, done, show_progress, on_progress)
            )
            reporter.start()
        try:
            verifier.run()
        finally:
            done.set()
            if reporter is not None:
                reporter.join()
        problems, total = verifier.problems()
    finally:
        verifier.close()
    return VerifyReport(cache, [VerifyProblem(*problem) for problem in problems], total)


def _report_progress(
    verifier: NativeVerifier,
    cache: CachePath,
    done: threading.Event,
    show: bool,
    callback: Callable[[int, int], None] | None,
) -> None:
    # On a terminal one line rewritten in place; into a log (a file, a pipe) a plain
    # line every 10 seconds, with no carriage return or escape code.
    terminal = show and _stderr_is_terminal()
    log_every = 1 if terminal else round(_LOG_REFRESH_SECONDS / _REFRESH_SECONDS)
    started = time.perf_counter()
    shown = False
    ticks = 0
    while not done.wait(_REFRESH_SECONDS):
        read, total = verifier.progress()
        if callback is not None:
            callback(read, total)
        ticks += 1
        if show and ticks % log_every == 0:
            elapsed = time.perf_counter() - started
            percent = 100 * read / total if total else 0
            line = (
                f"dataset_rt: verifying {cache}: {percent:.0f}% of {total / 1e6:,.1f} MB, "
                f"{read / elapsed / 1e6:,.0f} MB/s"
            )
            _write(f"\r{line}\x1b[K" if terminal else f"{line}\n")
            shown = terminal
    if callback is not None:
        callback(*verifier.progress())
    if shown:
        _write("\n")


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass  # progress is best effort
