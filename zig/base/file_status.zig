//! File sizes and identities, and whole small files read into memory, on every
//! kernel the Linux wheels promise.
//!
//! std's `File.length`, `File.stat`, `Dir.statFile` and `Dir.readFileAlloc` ask
//! Linux with `statx`, which exists only since Linux 4.11. The wheels are tagged
//! manylinux2014, whose systems (CentOS 7) run Linux 3.10: there `statx` fails
//! with ENOSYS and a cache could be neither opened nor written. `newfstatat`
//! answers the same questions on every Linux kernel, so on Linux the core calls
//! it itself; other systems go through std.
const std = @import("std");
const builtin = @import("builtin");
const system = @import("system.zig");
const positional_read = @import("positional_read.zig");

pub const Error = error{
    AccessDenied,
    FileNotFound,
    NotDir,
    NameTooLong,
    SymLinkLoop,
    SystemResources,
    Unexpected,
};

const use_fstat = builtin.os.tag == .linux and (builtin.cpu.arch == .x86_64 or
    builtin.cpu.arch == .aarch64);

/// The kernel's `struct stat` for the two architectures the wheels ship, as far
/// as the fields read here (x86_64: asm/stat.h, 144 bytes; aarch64: the generic
/// layout, 128 bytes). Device and inode come first and the size at byte 48 in both.
const KernelStat = extern struct {
    device: u64,
    inode: u64,
    middle: [4]u64,
    size: i64,
    rest: [if (builtin.cpu.arch == .x86_64) 11 else 9]u64,

    comptime {
        std.debug.assert(@offsetOf(KernelStat, "size") == 48);
        std.debug.assert(@sizeOf(KernelStat) == if (builtin.cpu.arch == .x86_64) 144 else 128);
    }
};

fn statResult(rc: usize) Error!void {
    return switch (std.os.linux.errno(rc)) {
        .SUCCESS => {},
        .ACCES, .PERM => error.AccessDenied,
        .NOENT => error.FileNotFound,
        .NOTDIR => error.NotDir,
        .NAMETOOLONG => error.NameTooLong,
        .LOOP => error.SymLinkLoop,
        .NOMEM => error.SystemResources,
        else => error.Unexpected,
    };
}

/// `newfstatat`: the file `path` in the directory `dir_handle`, or with
/// AT_EMPTY_PATH (Linux 2.6.39) and an empty path, the open file `dir_handle`.
fn statAt(dir_handle: std.posix.fd_t, path: [*:0]const u8, flags: usize) Error!KernelStat {
    var stat: KernelStat = undefined;
    while (true) {
        const rc = std.os.linux.syscall4(
            .newfstatat,
            @bitCast(@as(isize, dir_handle)),
            @intFromPtr(path),
            @intFromPtr(&stat),
            flags,
        );
        if (std.os.linux.errno(rc) == .INTR) continue;
        try statResult(rc);
        return stat;
    }
}

fn fstat(file: std.Io.File) Error!KernelStat {
    return statAt(file.handle, "", std.os.linux.AT.EMPTY_PATH);
}

/// The length in bytes of the open file `file`.
pub fn length(file: std.Io.File) Error!u64 {
    if (!use_fstat) return file.length(system.io()) catch |err| fromStd(err);
    const size = (try fstat(file)).size;
    return std.math.cast(u64, size) orelse error.Unexpected;
}

/// What names an open file's contents for a later check that it is still the
/// same file: its inode and its length.
pub const Identity = struct { inode: std.Io.File.INode, length: u64 };

/// The inode and length of the open file `file`, in one status call on Linux.
pub fn identity(file: std.Io.File) Error!Identity {
    if (!use_fstat) {
        const stat = file.stat(system.io()) catch |err| return fromStd(err);
        return .{ .inode = stat.inode, .length = stat.size };
    }
    const stat = try fstat(file);
    const size = std.math.cast(u64, stat.size) orelse return error.Unexpected;
    return .{ .inode = stat.inode, .length = size };
}

/// The inode of the open file `file`.
pub fn inode(file: std.Io.File) Error!std.Io.File.INode {
    if (!use_fstat) {
        const stat = file.stat(system.io()) catch |err| return fromStd(err);
        return stat.inode;
    }
    return (try fstat(file)).inode;
}

/// The inode of the file `name` in `dir`, following a symbolic link.
pub fn pathInode(dir: std.Io.Dir, name: []const u8) Error!std.Io.File.INode {
    if (!use_fstat) {
        const stat = dir.statFile(system.io(), name, .{}) catch |err| return fromStd(err);
        return stat.inode;
    }
    const path = try std.posix.toPosixPath(name);
    return (try statAt(dir.handle, &path, 0)).inode;
}

/// The length in bytes of the file `name` in `dir`, following a symbolic link.
pub fn pathLength(dir: std.Io.Dir, name: []const u8) Error!u64 {
    if (!use_fstat) {
        const stat = dir.statFile(system.io(), name, .{}) catch |err| return fromStd(err);
        return stat.size;
    }
    const path = try std.posix.toPosixPath(name);
    const size = (try statAt(dir.handle, &path, 0)).size;
    return std.math.cast(u64, size) orelse error.Unexpected;
}

/// std's errors, as this file's (the message shows the name).
fn fromStd(err: anyerror) Error {
    return switch (err) {
        error.AccessDenied, error.PermissionDenied => error.AccessDenied,
        error.FileNotFound => error.FileNotFound,
        error.NotDir => error.NotDir,
        error.NameTooLong => error.NameTooLong,
        error.SymLinkLoop => error.SymLinkLoop,
        error.SystemResources => error.SystemResources,
        else => error.Unexpected,
    };
}

/// Whether a failure to open or read a file says that the file is not there
/// (or is not a file), rather than that the system refused.
pub fn missing(err: anyerror) bool {
    return switch (err) {
        error.FileNotFound, error.NotDir, error.IsDir, error.FileShrank => true,
        else => false,
    };
}

pub const ReadError = Error || positional_read.Error || std.Io.File.OpenError || error{
    /// Longer than the caller's limit.
    FileTooBig,
    /// Shorter when read than its length said a moment before.
    FileShrank,
    OutOfMemory,
};

/// The whole file `name` in `dir`, in memory the caller owns; longer than
/// `bytes_max`: error.FileTooBig.
pub fn readAlloc(
    allocator: std.mem.Allocator,
    dir: std.Io.Dir,
    name: []const u8,
    bytes_max: u64,
) ReadError![]u8 {
    const io = system.io();
    const file = try dir.openFile(io, name, .{});
    defer file.close(io);
    const size = try length(file);
    if (size > bytes_max) return error.FileTooBig;
    const bytes = try allocator.alloc(
        u8,
        std.math.cast(usize, size) orelse return error.FileTooBig,
    );
    errdefer allocator.free(bytes);
    if (try positional_read.readAll(file, bytes, 0) != bytes.len) return error.FileShrank;
    return bytes;
}

test "length, inode and whole reads agree with what was written" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const text = "{\"format_version\": 2}";
    {
        const file = try tmp.dir.createFile(io, "manifest.json", .{});
        defer file.close(io);
        try file.writePositionalAll(io, text, 0);
    }
    const file = try tmp.dir.openFile(io, "manifest.json", .{});
    defer file.close(io);
    try std.testing.expectEqual(@as(u64, text.len), try length(file));
    try std.testing.expectEqual(try inode(file), try pathInode(tmp.dir, "manifest.json"));
    try std.testing.expectEqual((try file.stat(io)).inode, try inode(file));
    const both = try identity(file);
    try std.testing.expectEqual(try inode(file), both.inode);
    try std.testing.expectEqual(@as(u64, text.len), both.length);

    const bytes = try readAlloc(std.testing.allocator, tmp.dir, "manifest.json", 1 << 20);
    defer std.testing.allocator.free(bytes);
    try std.testing.expectEqualStrings(text, bytes);
    try std.testing.expectError(
        error.FileTooBig,
        readAlloc(std.testing.allocator, tmp.dir, "manifest.json", text.len - 1),
    );
    try std.testing.expectError(
        error.FileNotFound,
        readAlloc(std.testing.allocator, tmp.dir, "missing.json", 1 << 20),
    );
    try std.testing.expectError(error.FileNotFound, pathInode(tmp.dir, "missing.json"));
}

test "an empty file reads as no bytes" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    (try tmp.dir.createFile(io, "empty", .{})).close(io);
    const bytes = try readAlloc(std.testing.allocator, tmp.dir, "empty", 10);
    defer std.testing.allocator.free(bytes);
    try std.testing.expectEqual(@as(usize, 0), bytes.len);
}
