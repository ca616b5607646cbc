"""glibc malloc settings that keep the memory of large payloads in the process.

Each payload of 64 KiB or more is read into a ``bytes`` object of its own,
allocated by the consumer's thread and freed when the training loop drops the
sample. With glibc's default (adaptive) settings the heap's top is given back
to the kernel whenever more than about twice the largest freed block is free,
so in a plain loop over 1 MiB payloads every batch faults its memory in again,
page by page (see docs/runtime.md). Fixing the thresholds keeps that memory for
the next batch.

This changes the whole process's allocator, so it is done once, when an
iterator first hands out payloads of 64 KiB or more (processes that read only
small payloads keep glibc's defaults, since the fixed thresholds raise their
peak memory), and not at all when the user
already set glibc's malloc parameters through the environment or opts out with
``DATASET_RT_MALLOC_TUNING=0``.
"""

from __future__ import annotations

import ctypes
import os
import sys

MMAP_THRESHOLD_BYTES = 32 << 20
"""Blocks below this come from the heap (glibc's own upper bound for its adaptive threshold)."""

TRIM_THRESHOLD_BYTES = 64 << 20
"""Free memory at the heap's top is given back to the kernel only beyond this."""

OPT_OUT_VARIABLE = "DATASET_RT_MALLOC_TUNING"

# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

_applied: bool | None = None


def skip_reason(environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Why the settings are left alone in this environment, or None."""
    if environ.get(OPT_OUT_VARIABLE) == "0":
        return f"{OPT_OUT_VARIABLE}=0"
    for name in _USER_SETTINGS:
        if name in environ:
            return f"{name} is set"
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets malloc parameters"
    if not sys.platform.startswith("linux"):
        return "not Linux"
    return None


def tune_once() -> bool:
    """Apply the settings the first time it is called (later calls repeat the
    first answer); True when glibc accepted both."""
    global _applied
    if _applied is None:
        _applied = skip_reason() is None and _apply()
    return _applied


def _apply() -> bool:
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it; musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting either fixes both (no more adaptation).
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
