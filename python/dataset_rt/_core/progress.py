"""Writer progress on stderr: committed samples/s and MB/s, sources done and ETA."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_REFRESH_SECONDS = 0.5
# Where stderr is a file or a pipe (a log, CI), whole lines this far apart instead.
_LOG_REFRESH_SECONDS = 10.0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


class WriteProgress:
    """On a terminal, one status line rewritten in place; elsewhere (a log), a plain line
    every 10 seconds and one per finished source, with no carriage return or escape code;
    silent when disabled."""

    def __init__(self, enabled: bool, source_total: int, stream: TextIO | None = None) -> None:
        self._enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._source_total = source_total
        self._sources_done = 0
        self._started = time.perf_counter()
        self._source_started = self._started
        self._source_name = ""
        self._last_shown = 0.0
        self._line_open = False
        self._terminal = _is_terminal(self._stream)
        self._refresh_seconds = _REFRESH_SECONDS if self._terminal else _LOG_REFRESH_SECONDS

    def start_source(self, name: str) -> None:
        self._source_name = name
        self._source_started = time.perf_counter()
        self._last_shown = 0.0

    def update(self, samples: int, payload_bytes: int, *, force: bool = False) -> None:
        if not self._enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last_shown < self._refresh_seconds:
            return
        self._last_shown = now
        elapsed = max(now - self._source_started, 1e-9)
        line = (
            f"dataset_rt: writing {self._source_name}: {samples:,} samples, "
            f"{samples / elapsed:,.0f} samples/s, {payload_bytes / elapsed / 1e6:,.1f} MB/s"
        )
        if self._source_total > 1:
            line += f" | sources {self._sources_done}/{self._source_total}{self._eta(now)}"
        if self._terminal:
            self._write("\r" + line + "\x1b[K")
            self._line_open = True
        else:
            self._write(line + "\n")

    def _write(self, text: str) -> None:
        # Progress is best effort: a closed, full or broken stderr (or none,
        # as with `2>&-`) must not fail or misreport the write itself.
        try:
            self._stream.write(text)
            self._stream.flush()
        except (BlockingIOError, InterruptedError):
            pass  # a full non-blocking pipe or terminal: this update only is lost
        except (OSError, ValueError, AttributeError):
            self._enabled = False  # closed, broken or missing: for the rest of the write

    @property
    def sources_done(self) -> int:
        """Sources finished so far, written or not."""
        return self._sources_done

    def skip_source(self) -> None:
        """Count a source that was reused or failed; it prints no figures."""
        self.end_line()
        self._sources_done += 1

    def finish_source(self, samples: int, payload_bytes: int) -> None:
        self._sources_done += 1
        if self._enabled:
            self.update(samples, payload_bytes, force=True)
        self.end_line()

    def end_line(self) -> None:
        """End a line left open (a source done, failed or interrupted)."""
        if self._enabled and self._line_open:
            self._write("\n")
        self._line_open = False

    def _eta(self, now: float) -> str:
        if self._sources_done == 0:
            return ""
        per_source = (now - self._started) / self._sources_done
        remaining = per_source * (self._source_total - self._sources_done)
        return f", ETA {remaining:,.0f}s"
