"""Copies the Windows unit tests' output from stdin to stdout without the stack
traces of errors the code handles (scripts/test_windows.sh pipes `zig build test`
through it).

wine 8 answers NOT_IMPLEMENTED to the POSIX-semantics rename and delete that std
asks Windows for. std returns `error.Unexpected`, and in a Debug build (the unit
tests') first prints the status and a stack trace, from the test runner, whose
`std_options` a test cannot change. zig/base/directory_entries.zig takes that error
as its cue to redo the rename or delete through kernel32, and std.testing's
temporary directories ignore their cleanup's errors: about 1,800 traces, 90,000
lines, each of an error that did no harm.

A trace is left out when it starts with that status line and one of its frames is
in directory_entries.zig or in std.testing's cleanup; any other trace is copied
whole, and the last line counts what was left out. A test that fails still prints
its own error and error-return trace, which are not of that form.

    ... 2>&1 | python scripts/handled_wine_traces.py
"""

from __future__ import annotations

import re
import sys

HEADER = "error.Unexpected NTSTATUS=0xc0000002 (NOT_IMPLEMENTED)"
# `<file>:<line>[:<column>]: 0x<address> in <function> (<object>)`; the frames of
# code without debug information read `???:?:?: 0x... in ??? (<dll>)`. A frame
# with a source file is followed by its source line and a caret line.
FRAME = re.compile(
    r"^(?P<file>\S.*?):(?:\d+|\?)(?::(?:\d+|\?))?: 0x[0-9a-f]+ in .* \((?P<object>.+)\)$"
)
# Every trace ends with the thread's first frame, in ntdll.
LAST_OBJECT = "ntdll.dll"
HANDLED_FRAMES = (
    re.compile(r"zig/base/directory_entries\.zig$"),
    re.compile(r"lib/std/testing\.zig$"),
)


class TraceFilter:
    """Takes lines one by one and gives back those to print.

    Threads print their status lines at once and their traces one after another
    ("header, header, trace, trace"), so the status lines are held and counted, and
    each trace that follows takes one of them: left out together when the trace is
    of a handled error, printed together otherwise."""

    def __init__(self) -> None:
        self.headers = 0  # status lines held, waiting for their traces
        self.trace: list[str] = []  # the lines of the trace being read
        self.source_lines = 0  # lines of the current frame still to come
        self.left_out = 0

    def take(self, line: str) -> list[str]:
        if self.source_lines:
            self.source_lines -= 1
            self.trace.append(line)
            return self.end_trace() if self.trace_ended() else []
        frame = FRAME.match(line)
        if frame and (self.trace or self.headers):
            self.trace.append(line)
            if frame["file"] != "???":
                self.source_lines = 2
                return []
            return self.end_trace() if self.trace_ended() else []
        shown = self.end_trace() if self.trace else []
        if line == HEADER:
            self.headers += 1
            return shown
        return shown + self.flush_headers() + [line]

    def finish(self) -> list[str]:
        shown = self.end_trace() if self.trace else []
        shown += self.flush_headers()
        if self.left_out:
            shown.append(
                f"({self.left_out} stack traces of NOT_IMPLEMENTED, handled by "
                "directory_entries.zig's kernel32 fallback or std.testing's cleanup, left out)"
            )
        return shown

    def trace_ended(self) -> bool:
        match = FRAME.match(self.trace[-1])
        return self.source_lines == 0 and match is not None and match["object"] == LAST_OBJECT

    def end_trace(self) -> list[str]:
        trace, self.trace, self.source_lines = self.trace, [], 0
        header = []
        if self.headers:
            self.headers -= 1
            header = [HEADER]
        if header and is_handled(trace):
            self.left_out += 1
            return []
        return header + trace

    def flush_headers(self) -> list[str]:
        shown, self.headers = [HEADER] * self.headers, 0
        return shown


def is_handled(trace: list[str]) -> bool:
    """Whether a trace passed through code that handles the error."""
    for line in trace:
        match = FRAME.match(line)
        if match and any(pattern.search(match["file"]) for pattern in HANDLED_FRAMES):
            return True
    return False


def main() -> None:
    kept = TraceFilter()
    for line in sys.stdin:
        for shown in kept.take(line.rstrip("\n")):
            print(shown, flush=True)
    for shown in kept.finish():
        print(shown, flush=True)


if __name__ == "__main__":
    main()
