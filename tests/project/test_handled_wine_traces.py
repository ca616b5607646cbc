"""scripts/handled_wine_traces.py leaves out only the traces of handled errors.

The lines below have the shapes the Windows unit tests print under wine (copied from
a run's output, paths shortened): std's status line, then frames with their source
and caret lines, ending in ntdll; two threads print both status lines first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "handled_wine_traces.py"
HEADER = "error.Unexpected NTSTATUS=0xc0000002 (NOT_IMPLEMENTED)"
STD = "/v/ziglang/lib/std"


def frame(path: str, function: str, source: str = "    call();") -> list[str]:
    return [f"{path}:10:5: 0x140001000 in {function} (test_zcu.obj)", source, "    ^"]


BOTTOM = [
    "???:?:?: 0x7b627e48 in ??? (kernel32.dll)",
    "???:?:?: 0x17005dca7 in ??? (ntdll.dll)",
]
HANDLED_RENAME = [
    *frame(f"{STD}/Io/Threaded.zig", "dirRenameWindowsInner"),
    *frame("/w/zig/base/directory_entries.zig", "renameWith"),
    *frame("/w/zig/read/remote.zig", "placeIfMatching"),
    *BOTTOM,
]
HANDLED_CLEANUP = [
    *frame(f"{STD}/Io/Threaded.zig", "dirDeleteWindows"),
    *frame(f"{STD}/testing.zig", "cleanup", "        self.parent_dir.deleteTree(io) catch {};"),
    *BOTTOM,
]
UNHANDLED = [
    *frame(f"{STD}/Io/Threaded.zig", "dirOpenFileWindows"),
    *frame("/w/zig/read/cache_files.zig", "openShard"),
    *BOTTOM,
]


def run(lines: list[str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.splitlines()


def test_handled_traces_are_left_out_and_counted() -> None:
    shown = run(["test", HEADER, *HANDLED_RENAME, HEADER, *HANDLED_CLEANUP, "Build Summary: ok"])
    assert shown[:2] == ["test", "Build Summary: ok"]
    assert "2 stack traces" in shown[2]
    assert len(shown) == 3


def test_a_trace_through_no_handler_is_kept_whole_with_its_status_line() -> None:
    lines = ["before", HEADER, *UNHANDLED, "after"]
    assert run(lines) == lines


def test_status_lines_printed_together_go_with_the_traces_that_follow() -> None:
    # Two threads: both status lines, then the handled trace, then the other.
    shown = run([HEADER, HEADER, *HANDLED_RENAME, *UNHANDLED, "after"])
    assert shown[:-1] == [HEADER, *UNHANDLED, "after"]
    assert "1 stack traces" in shown[-1]


def test_a_failing_tests_own_error_trace_is_kept() -> None:
    # The test runner's report of a failed test: no status line before its frames,
    # even when they pass through directory_entries.zig.
    failure = [
        "error: 'base.directory_entries.test.rename' failed: AccessDenied",
        *frame("/w/zig/base/directory_entries.zig", "renameWith"),
        "after",
    ]
    lines = [HEADER, *HANDLED_RENAME, *failure]
    shown = run(lines)
    assert shown[:-1] == failure
    assert "1 stack traces" in shown[-1]


def test_a_status_line_without_a_trace_is_kept() -> None:
    lines = [HEADER, "a line of the build runner", HEADER]
    assert run(lines) == lines
