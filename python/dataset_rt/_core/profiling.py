"""The writer profile: per-source, per-stage calls, seconds and bytes as JSON.

Python times the stages it runs (pulling the source, building batches); the
core reports its own (ingress wait, encode, compression, hashing, disk write,
finish, publish). The file is written after the write, also when interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from typing import Any

from dataset_rt._binding import native as _native
from dataset_rt._config import WriterProfilerConfig

FORMAT_VERSION = 1
PYTHON_STAGES = ("python_next", "python_extract")


class WriterProfile:
    """Accumulates stage figures for the sources of one `write_cache` call."""

    def __init__(self, config: WriterProfilerConfig) -> None:
        self.enabled = config.enabled
        self._path = config.path
        self._sources: list[dict[str, Any]] = []
        self._python: dict[str, list[float]] = {}

    def start_source(self, name: str) -> None:
        if not self.enabled:
            return
        self._python = {stage: [0, 0.0, 0] for stage in PYTHON_STAGES}
        self._sources.append({"source_name": name, "stages": []})

    def add(self, stage: str, seconds: float, byte_count: int = 0) -> None:
        figures = self._python[stage]
        figures[0] += 1
        figures[1] += seconds
        figures[2] += byte_count

    def finish_source(self, native_stats: _native.WriterStats) -> None:
        if not self.enabled or not self._sources:
            return
        stages = [
            {"name": stage, "calls": int(calls), "seconds": seconds, "bytes": int(byte_count)}
            for stage, (calls, seconds, byte_count) in self._python.items()
        ]
        for stage in _native.WRITER_STAGES:
            figures = getattr(native_stats, stage)
            stages.append(
                {
                    "name": stage,
                    "calls": figures.calls,
                    "seconds": figures.nanoseconds / 1e9,
                    "bytes": figures.bytes,
                }
            )
        self._sources[-1]["stages"] = stages

    def taken_sources(self) -> list[dict[str, Any]]:
        """The sources profiled so far, handed over (a writer process sends them
        to the process that writes the file); the profile holds none after."""
        sources, self._sources = self._sources, []
        return sources

    def add_sources(self, sources: list[dict[str, Any]]) -> None:
        """Add sources profiled elsewhere (`taken_sources`), after those here."""
        if self.enabled:
            self._sources.extend(sources)

    def write(self) -> None:
        """Write the JSON atomically (temp file + rename) if profiling is enabled.

        It runs after the caches are published: a profile that cannot be written
        (the path is a directory, the disk is full) is a `RuntimeWarning`, not an
        error that would lose the write's results.
        """
        if not self.enabled:
            return
        document = {"format_version": FORMAT_VERSION, "sources": self._sources}
        path = self._path
        # Unique per call: two threads writing the same profile must not share it.
        unique = f"{os.getpid()}.{threading.get_ident()}.{id(self)}"
        temporary = path.with_name(f".{path.name}.{unique}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(document, indent=2) + "\n")
            os.replace(temporary, path)
        except BaseException as error:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            if not isinstance(error, (OSError, ValueError)):
                raise  # an interrupt, say: never hidden
            warnings.warn(
                f"dataset_rt: cannot write the writer profile {path}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
