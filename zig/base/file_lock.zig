//! The writer's exclusive lock on its target's lock file, and the shared lock
//! that asks whether a writer holds it. Elsewhere this is
//! std's `File.lock`; on Windows it is kernel32's `LockFileEx`, the call
//! Windows programs make, because std calls `NtLockFile` with an I/O status
//! block, which wine answers with NOT_IMPLEMENTED: through `LockFileEx` the
//! Windows build's writer also runs under wine, where it is tested.
const std = @import("std");
const builtin = @import("builtin");

pub const Error = error{ AccessDenied, SystemResources, Unexpected } || std.Io.File.LockError;

/// Blocks until this process holds the exclusive lock on `file`.
pub fn lockExclusive(io: std.Io, file: std.Io.File) Error!void {
    if (builtin.os.tag != .windows) return file.lock(io, .exclusive);
    var overlapped: Overlapped = .{};
    if (LockFileEx(file.handle, lockfile_exclusive_lock, 0, 1, 0, &overlapped) != 0) return;
    return windowsError();
}

/// Takes the exclusive lock on `file` if no one holds it: true when taken,
/// false when another holder has it (this process's other handles included).
pub fn tryLockExclusive(io: std.Io, file: std.Io.File) Error!bool {
    if (builtin.os.tag != .windows) return file.tryLock(io, .exclusive);
    var overlapped: Overlapped = .{};
    const flags = lockfile_exclusive_lock | lockfile_fail_immediately;
    if (LockFileEx(file.handle, flags, 0, 1, 0, &overlapped) != 0) return true;
    if (std.os.windows.GetLastError() == .LOCK_VIOLATION) return false;
    return windowsError();
}

/// Takes a shared lock on `file` if no one holds an exclusive one: true when
/// taken (release it with `unlock`), false when an exclusive holder has it.
pub fn tryLockShared(io: std.Io, file: std.Io.File) Error!bool {
    if (builtin.os.tag != .windows) return file.tryLock(io, .shared);
    var overlapped: Overlapped = .{};
    if (LockFileEx(file.handle, lockfile_fail_immediately, 0, 1, 0, &overlapped) != 0) return true;
    if (std.os.windows.GetLastError() == .LOCK_VIOLATION) return false;
    return windowsError();
}

pub fn unlock(io: std.Io, file: std.Io.File) void {
    if (builtin.os.tag != .windows) return file.unlock(io);
    var overlapped: Overlapped = .{};
    // Failing to unlock leaves the lock to the handle's close, which releases it.
    _ = UnlockFileEx(file.handle, 0, 1, 0, &overlapped);
}

fn windowsError() Error {
    return switch (std.os.windows.GetLastError()) {
        .ACCESS_DENIED => error.AccessDenied,
        .NOT_ENOUGH_MEMORY, .NO_SYSTEM_RESOURCES => error.SystemResources,
        else => error.Unexpected,
    };
}

const lockfile_exclusive_lock: u32 = 0x2;
const lockfile_fail_immediately: u32 = 0x1;

/// Win32's OVERLAPPED: the locked range starts at offset 0 (one byte, as std locks).
const Overlapped = extern struct {
    internal: usize = 0,
    internal_high: usize = 0,
    offset: u32 = 0,
    offset_high: u32 = 0,
    event: ?*anyopaque = null,
};

extern "kernel32" fn LockFileEx(
    file: *anyopaque,
    flags: u32,
    reserved: u32,
    bytes_low: u32,
    bytes_high: u32,
    overlapped: *Overlapped,
) callconv(.winapi) c_int;
extern "kernel32" fn UnlockFileEx(
    file: *anyopaque,
    reserved: u32,
    bytes_low: u32,
    bytes_high: u32,
    overlapped: *Overlapped,
) callconv(.winapi) c_int;

test "a lock is taken, released and taken again" {
    const io = @import("system.zig").io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const file = try tmp.dir.createFile(io, "target.lock", .{ .truncate = false });
    defer file.close(io);
    try lockExclusive(io, file);
    unlock(io, file);
    try lockExclusive(io, file);
    unlock(io, file);
}

test "tryLockExclusive takes a free lock and reports a held one" {
    const io = @import("system.zig").io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const holder = try tmp.dir.createFile(io, "target.lock", .{ .truncate = false });
    defer holder.close(io);
    const other = try tmp.dir.openFile(io, "target.lock", .{ .mode = .read_write });
    defer other.close(io);
    try std.testing.expect(try tryLockExclusive(io, holder));
    try std.testing.expect(!try tryLockExclusive(io, other));
    unlock(io, holder);
    try std.testing.expect(try tryLockExclusive(io, other));
    unlock(io, other);
}

test "tryLockShared is refused while an exclusive lock is held, and shared with others" {
    const io = @import("system.zig").io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const holder = try tmp.dir.createFile(io, "target.lock", .{ .truncate = false });
    defer holder.close(io);
    const prober = try tmp.dir.openFile(io, "target.lock", .{});
    defer prober.close(io);
    try lockExclusive(io, holder);
    try std.testing.expect(!try tryLockShared(io, prober));
    unlock(io, holder);
    try std.testing.expect(try tryLockShared(io, prober));
    // A writer that tries while a prober holds its shared lock is refused, not blocked.
    try std.testing.expect(!try tryLockExclusive(io, holder));
    unlock(io, prober);
    try std.testing.expect(try tryLockExclusive(io, holder));
    unlock(io, holder);
}
