"""`verify`: scrub a whole cache and report every problem found."""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from dataset_rt import _native
from dataset_rt._reader import NativeVerifier

_REFRESH_SECONDS = 0.5


class VerifyProblem(NamedTuple):
    """One problem `verify` found."""

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

    >>> report = dataset_rt.verify("caches/train")  # doctest: +SKIP
    >>> report.ok, len(report.problems)  # doctest: +SKIP
    (True, 0)
    """

    path: Path
    problems: list[VerifyProblem] = field(default_factory=list)
    """Every problem found (the first 10,000 of them; `problems_total` counts all)."""
    problems_total: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong with the cache."""
        return self.problems_total == 0


def verify(
    path: str | os.PathLike[str], *, num_workers: int | None = None, show_progress: bool = True
) -> VerifyReport:
    """Check a whole cache and report every problem, not only the first.

    Checks every file the manifest lists (present, of its listed length, and
    of its listed SHA-256) and then, when the cache opens, every record as
    every read checks it: index bounds and placement, the record's CRC-32C,
    its embedded metadata against ``metadata.arrow``, LZ4 blocks decoding to
    their stated size, and each shard's payload total. Runs on `num_workers`
    native threads (default: the CPU count, at most 8) at disk speed, with a
    progress line on stderr when `show_progress`.

    >>> report = dataset_rt.verify("caches/train", show_progress=False)  # doctest: +SKIP
    >>> [p.message for p in report.problems]  # doctest: +SKIP
    []
    """
    if num_workers is None:
        num_workers = min(os.cpu_count() or 1, 8)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int):
        raise TypeError(f"num_workers must be an int, got {type(num_workers).__name__}")
    if not 0 <= num_workers <= _native.U32_MAX:
        raise ValueError(f"num_workers must be between 1 and 256, got {num_workers}")
    cache = Path(os.fspath(path))
    verifier = NativeVerifier(_native.RuntimeHandle(num_workers), cache)
    try:
        done = threading.Event()
        reporter = None
        if show_progress:
            reporter = threading.Thread(target=_show_progress, args=(verifier, cache, done))
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


def _show_progress(verifier: NativeVerifier, cache: Path, done: threading.Event) -> None:
    started = time.perf_counter()
    shown = False
    while not done.wait(_REFRESH_SECONDS):
        read, total = verifier.progress()
        elapsed = time.perf_counter() - started
        percent = 100 * read / total if total else 0
        _write(
            f"\rdataset_rt: verifying {cache}: {percent:.0f}% of {total / 1e6:,.1f} MB, "
            f"{read / elapsed / 1e6:,.0f} MB/s\x1b[K"
        )
        shown = True
    if shown:
        _write("\n")


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass  # progress is best effort
