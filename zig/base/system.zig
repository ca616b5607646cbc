//! Process-level services the core needs everywhere: the `Io` instance, a
//! monotonic clock and the process id (to notice a fork).
const std = @import("std");
const builtin = @import("builtin");

/// The library has no `main`, so it uses the static single-threaded Io. It installs
/// no signal handlers (unlike `Io.Threaded.init`), which matters inside CPython,
/// and its files, mutexes and conditions work from any OS thread.
pub fn io() std.Io {
    return std.Io.Threaded.global_single_threaded.io();
}

/// Nanoseconds on a monotonic clock; only differences are meaningful.
pub fn monotonicNanoseconds() u64 {
    const now = std.Io.Timestamp.now(io(), .awake);
    return @intCast(@max(0, now.toNanoseconds()));
}

pub fn processId() i64 {
    // getpid() is a HANDLE there
    if (builtin.os.tag == .windows) return std.os.windows.GetCurrentProcessId();
    return @intCast(std.c.getpid());
}
