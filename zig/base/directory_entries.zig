//! Renaming, deleting and finding the writer's directory entries. std renames
//! and deletes; on Windows it asks for POSIX semantics (FileRenameInformationEx,
//! FileDispositionInformationEx) and falls back to the classic calls only on
//! the statuses old Windows versions return. wine 8 answers those classes with
//! NOT_IMPLEMENTED, which std reports as `Unexpected`: then the same entry is
//! renamed or deleted through kernel32 (`MoveFileExW`, `DeleteFileW`,
//! `RemoveDirectoryW`), so the Windows build's writer also runs under wine,
//! where it is tested.
const std = @import("std");
const builtin = @import("builtin");

/// Renames `old_name` to `new_name` in `dir`, whose path (as the process
/// opened it, ending with a separator) is `dir_path`.
/// On the kernel32 path an existing `new_name` is never replaced.
pub fn rename(
    io: std.Io,
    dir: std.Io.Dir,
    dir_path: []const u8,
    old_name: []const u8,
    new_name: []const u8,
) !void {
    try renameWith(io, dir, dir_path, old_name, new_name, 0);
}

/// Renames the file `old_name` over the file `new_name` (both relative to
/// `dir`, see `rename` for `dir_path`), replacing it atomically.
pub fn replaceFile(
    io: std.Io,
    dir: std.Io.Dir,
    dir_path: []const u8,
    old_name: []const u8,
    new_name: []const u8,
) !void {
    const flags = move_replace_existing | move_write_through;
    try renameWith(io, dir, dir_path, old_name, new_name, flags);
}

fn renameWith(
    io: std.Io,
    dir: std.Io.Dir,
    dir_path: []const u8,
    old_name: []const u8,
    new_name: []const u8,
    move_flags: u32,
) !void {
    std.Io.Dir.rename(dir, old_name, dir, new_name, io) catch |err| {
        if (builtin.os.tag != .windows or err != error.Unexpected) return err;
        var paths: WidePaths = try .init(dir_path, old_name, new_name);
        defer paths.deinit();
        const moved = MoveFileExW(paths.first.ptr, paths.second.?.ptr, move_flags);
        if (moved == 0) return windowsError();
    };
}

const move_replace_existing: u32 = 0x1;
const move_write_through: u32 = 0x8;

/// Deletes the file `name` in `dir` (see `rename` for `dir_path`).
pub fn deleteFile(io: std.Io, dir: std.Io.Dir, dir_path: []const u8, name: []const u8) !void {
    dir.deleteFile(io, name) catch |err| {
        if (builtin.os.tag != .windows or err != error.Unexpected) return err;
        var paths: WidePaths = try .init(dir_path, name, null);
        defer paths.deinit();
        if (DeleteFileW(paths.first.ptr) == 0) return windowsError();
    };
}

/// Deletes the directory `name` in `dir` with everything in it, as far as it
/// can (see `rename` for `dir_path`): a failed write's cleanup, which has no
/// one to report a leftover to.
pub fn deleteTree(io: std.Io, dir: std.Io.Dir, dir_path: []const u8, name: []const u8) void {
    dir.deleteTree(io, name) catch |err| {
        if (builtin.os.tag != .windows or err != error.Unexpected) return;
        deleteTreeEntryByEntry(io, dir, dir_path, name, tree_depth_max) catch {};
    };
}

/// Deeper than the writer's staging directory (`<staging>/shards/<file>`) ever is.
const tree_depth_max = 8;

/// `deleteTree` through `deleteFile` and `RemoveDirectoryW`: each entry's name
/// is taken before it is deleted, since a listing may skip entries deleted
/// under it.
fn deleteTreeEntryByEntry(
    io: std.Io,
    dir: std.Io.Dir,
    dir_path: []const u8,
    name: []const u8,
    depth_left: u32,
) !void {
    if (depth_left == 0) return error.Unexpected;
    const allocator = WidePaths.allocator;
    const path = try std.mem.concat(allocator, u8, &.{ dir_path, name, std.fs.path.sep_str });
    defer allocator.free(path);
    {
        var tree = try dir.openDir(io, name, .{ .iterate = true });
        defer tree.close(io);
        var entries: std.ArrayList(struct { name: []u8, is_dir: bool }) = .empty;
        defer {
            for (entries.items) |entry| allocator.free(entry.name);
            entries.deinit(allocator);
        }
        var iterator = tree.iterate();
        while (try iterator.next(io)) |entry| {
            const copy = try allocator.dupe(u8, entry.name);
            errdefer allocator.free(copy);
            try entries.append(allocator, .{ .name = copy, .is_dir = entry.kind == .directory });
        }
        for (entries.items) |entry| {
            if (entry.is_dir) {
                try deleteTreeEntryByEntry(io, tree, path, entry.name, depth_left - 1);
            } else {
                try deleteFile(io, tree, path, entry.name);
            }
        }
    } // closed: a directory open here could not be removed
    var paths: WidePaths = try .init(dir_path, name, null);
    defer paths.deinit();
    if (RemoveDirectoryW(paths.first.ptr) == 0) return windowsError();
}

/// Whether `name` exists in `dir`; `path` is the same entry by path, as the
/// process opened the directory. Under wine a lookup relative to the
/// directory's handle misses an entry renamed by path (the fallback above), so
/// on Windows a miss is asked again by path.
pub fn exists(io: std.Io, dir: std.Io.Dir, name: []const u8, path: []const u8) bool {
    dir.access(io, name, .{}) catch {
        if (builtin.os.tag != .windows) return false;
        std.Io.Dir.cwd().access(io, path, .{}) catch return false;
    };
    return true;
}

/// `dir_path ++ name` as Win32 wide strings (kernel32 turns '/' into '\').
const WidePaths = struct {
    first: [:0]u16,
    second: ?[:0]u16 = null,

    const allocator = std.heap.c_allocator;

    fn init(dir_path: []const u8, first: []const u8, second: ?[]const u8) !WidePaths {
        var paths: WidePaths = .{ .first = try wide(dir_path, first) };
        errdefer allocator.free(paths.first);
        if (second) |name| paths.second = try wide(dir_path, name);
        return paths;
    }

    fn wide(dir_path: []const u8, name: []const u8) ![:0]u16 {
        const joined = try std.mem.concat(allocator, u8, &.{ dir_path, name });
        defer allocator.free(joined);
        return std.unicode.wtf8ToWtf16LeAllocZ(allocator, joined);
    }

    fn deinit(paths: *WidePaths) void {
        allocator.free(paths.first);
        if (paths.second) |second| allocator.free(second);
    }
};

fn windowsError() error{ PathAlreadyExists, FileNotFound, AccessDenied, Unexpected } {
    return switch (std.os.windows.GetLastError()) {
        .ALREADY_EXISTS, .FILE_EXISTS => error.PathAlreadyExists,
        .FILE_NOT_FOUND, .PATH_NOT_FOUND => error.FileNotFound,
        .ACCESS_DENIED, .SHARING_VIOLATION => error.AccessDenied,
        else => error.Unexpected,
    };
}

extern "kernel32" fn MoveFileExW(
    existing: [*:0]const u16,
    new: [*:0]const u16,
    flags: u32,
) callconv(.winapi) c_int;
extern "kernel32" fn DeleteFileW(name: [*:0]const u16) callconv(.winapi) c_int;
extern "kernel32" fn RemoveDirectoryW(name: [*:0]const u16) callconv(.winapi) c_int;

/// A test's temporary directory's path, ending with a separator (the `dir_path` of the functions
/// above).
fn testDirPath(io: std.Io, tmp: std.testing.TmpDir) ![]u8 {
    var buffer: [std.fs.max_path_bytes]u8 = undefined;
    const root_len = try tmp.dir.realPath(io, &buffer);
    return std.mem.concat(
        std.testing.allocator,
        u8,
        &.{ buffer[0..root_len], std.fs.path.sep_str },
    );
}

test "an entry is renamed, then a file deleted" {
    const system = @import("system.zig");
    const io = system.io();
    const allocator = std.testing.allocator;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const prefix = try testDirPath(io, tmp);
    defer allocator.free(prefix);
    const file = try tmp.dir.createFile(io, "a", .{});
    file.close(io);
    try tmp.dir.createDir(io, "staging", .default_dir);
    try rename(io, tmp.dir, prefix, "staging", "published");
    const published = try std.mem.concat(allocator, u8, &.{ prefix, "published" });
    defer allocator.free(published);
    try std.testing.expect(exists(io, tmp.dir, "published", published));
    try deleteFile(io, tmp.dir, prefix, "a");
    // Checked by absolute path: under wine, a lookup relative to `tmp.dir` does
    // not see entries renamed by absolute path (on Linux both work).
    inline for (.{ .{ "staging", false }, .{ "published", true }, .{ "a", false } }) |entry| {
        const path = try std.mem.concat(allocator, u8, &.{ prefix, entry[0] });
        defer allocator.free(path);
        if (entry[1]) {
            try std.Io.Dir.cwd().access(io, path, .{});
        } else {
            try std.testing.expectError(error.FileNotFound, std.Io.Dir.cwd().access(io, path, .{}));
        }
    }
}

test "a tree of directories and files is deleted" {
    const io = @import("system.zig").io();
    const allocator = std.testing.allocator;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const prefix = try testDirPath(io, tmp);
    defer allocator.free(prefix);
    try tmp.dir.createDir(io, "keep", .default_dir);
    try tmp.dir.createDir(io, "keep/staging", .default_dir);
    try tmp.dir.createDir(io, "keep/staging/shards", .default_dir);
    for ([_][]const u8{
        "keep/staging/manifest.json",
        "keep/staging/shards/000000.bin",
        "keep/staging/shards/000001.bin",
    }) |name| {
        const file = try tmp.dir.createFile(io, name, .{});
        try file.writeStreamingAll(io, "bytes");
        file.close(io);
    }
    deleteTree(io, tmp.dir, prefix, "keep/staging");
    const staging = try std.mem.concat(allocator, u8, &.{ prefix, "keep/staging" });
    defer allocator.free(staging);
    const keep = try std.mem.concat(allocator, u8, &.{ prefix, "keep" });
    defer allocator.free(keep);
    try std.testing.expectError(error.FileNotFound, std.Io.Dir.cwd().access(io, staging, .{}));
    try std.Io.Dir.cwd().access(io, keep, .{});
}
