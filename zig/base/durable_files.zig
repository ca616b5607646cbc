//! File-system steps whose order and durability make publication atomic:
//! write a file, fsync a file or a directory, check a path segment.
const std = @import("std");
const builtin = @import("builtin");
const system = @import("system.zig");
const error_words = @import("error_words.zig");
const Diagnostic = @import("diagnostic.zig").Diagnostic;

pub const Error = error{Io};

pub const segment_bytes_max = 250;

/// Creates (or truncates) `name` in `dir` and writes `bytes`; returns the open
/// file, not yet fsynced (the caller syncs and closes it).
pub fn writeFile(
    dir: std.Io.Dir,
    name: []const u8,
    bytes: []const u8,
    diagnostic: *Diagnostic,
) Error!std.Io.File {
    const io = system.io();
    const file = dir.createFile(io, name, .{ .truncate = true }) catch |err| {
        diagnostic.set("cannot create {s}: {f}", .{ name, error_words.of(err) });
        return error.Io;
    };
    errdefer file.close(io);
    file.writePositionalAll(io, bytes, 0) catch |err| {
        diagnostic.set("cannot write {s}: {f}", .{ name, error_words.of(err) });
        return error.Io;
    };
    return file;
}

/// Asks the kernel to start writing `len` bytes of `file` from `offset` to disk
/// now, without waiting, so that the fsync before publication finds little
/// left to flush. Only a hint (Linux on x86_64 and aarch64); failures are ignored.
pub fn startWriteback(file: std.Io.File, offset: u64, len: u64) void {
    if (builtin.os.tag != .linux) return;
    // others order the arguments differently
    if (builtin.cpu.arch != .x86_64 and builtin.cpu.arch != .aarch64) return;
    const linux = std.os.linux;
    const write_flag = 2; // SYNC_FILE_RANGE_WRITE: start writeback of dirty pages, do not wait
    _ = linux.syscall4(
        .sync_file_range,
        @bitCast(@as(isize, file.handle)),
        offset,
        len,
        write_flag,
    );
}

/// Asks the kernel to drop `file`'s cached pages that are already on disk
/// (from `offset`, `len` bytes; 0: to the end). Pages still dirty or being
/// written stay cached. Only a hint (Linux); failures are ignored.
///
/// A writer that drops what it has written and hashed reuses the same few
/// hundred MiB of memory for the rest of the cache, instead of taking fresh
/// memory for every byte: on a virtual machine fresh page-cache memory can be
/// slow to fill after other large writes, several times slower than reused
/// memory. It also leaves the rest of the page cache to the training job.
pub fn dropCachedPages(file: std.Io.File, offset: u64, len: u64) void {
    if (builtin.os.tag != .linux) return;
    const linux = std.os.linux;
    _ = linux.fadvise(file.handle, @intCast(offset), @intCast(len), linux.POSIX_FADV.DONTNEED);
}

/// Makes a directory's entries (new files, renames) durable.
///
/// Not on Windows: flushing a handle needs write access to it, which a
/// directory opened as a file does not have, so the flush fails with
/// AccessDenied (under wine too), and every write failed with it. NTFS
/// journals metadata, so a crash leaves a rename done or not done, never
/// half done; the files' data is flushed through their own handles.
pub fn syncDir(dir: std.Io.Dir, what: []const u8, diagnostic: *Diagnostic) Error!void {
    if (builtin.os.tag == .windows) return;
    const io = system.io();
    const handle = dir.openFile(io, ".", .{}) catch |err| {
        diagnostic.set(
            "cannot open directory {s} to fsync it: {f}",
            .{ what, error_words.of(err) },
        );
        return error.Io;
    };
    defer handle.close(io);
    handle.sync(io) catch |err| {
        diagnostic.set("cannot fsync directory {s}: {f}", .{ what, error_words.of(err) });
        return error.Io;
    };
}

/// `mkdir -p`, walking forward from the first component so that it always
/// terminates (std's createDirPath retries parents and can spin on paths like
/// /proc/x where mkdir keeps failing with FileNotFound).
pub fn createDirectories(path: []const u8, diagnostic: *Diagnostic) Error!void {
    const io = system.io();
    var components = std.fs.path.componentIterator(path);
    var component = components.first();
    while (component) |current| : (component = components.next()) {
        std.Io.Dir.cwd().createDir(io, current.path, .default_dir) catch |err| switch (err) {
            error.PathAlreadyExists => {},
            else => {
                diagnostic.set(
                    "cannot create directory {s}: {f}",
                    .{ current.path, error_words.of(err) },
                );
                return error.Io;
            },
        };
    }
}

/// Why `name` is not one plain path segment, or null when it is.
pub fn plainSegmentProblem(name: []const u8) ?[]const u8 {
    if (name.len == 0) return "is empty";
    if (std.mem.eql(u8, name, ".") or std.mem.eql(u8, name, "..")) return "is a relative " ++
        "directory reference";
    if (std.mem.indexOfAny(u8, name, "/\\") != null) return "contains a path separator";
    if (std.mem.indexOfScalar(u8, name, 0) != null) return "contains a NUL byte";
    // The lock file tmp/<name>.lock must fit the usual 255-byte file name limit.
    if (name.len > segment_bytes_max) return "is longer than 250 bytes";
    return null;
}

test "only plain path segments are accepted as names" {
    try std.testing.expect(plainSegmentProblem("train-00") == null);
    try std.testing.expect(plainSegmentProblem("..hidden") == null);
    for ([_][]const u8{ "", ".", "..", "a/b", "a\\b", "/abs", "a\x00b" }) |bad| {
        try std.testing.expect(plainSegmentProblem(bad) != null);
    }
}

test "creating directories terminates and reports a path that cannot be created" {
    var diagnostic: Diagnostic = .{};
    if (builtin.os.tag == .linux) {
        // Where std's createDirPath spun: mkdir keeps failing with FileNotFound.
        try std.testing.expectError(
            error.Io,
            createDirectories("/proc/dataset_rt_cannot_exist/x", &diagnostic),
        );
    }
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var buffer: [std.fs.max_path_bytes]u8 = undefined;
    const root_len = try tmp.dir.realPath(system.io(), &buffer);
    // Below a regular file, on every system.
    const file = try tmp.dir.createFile(system.io(), "file", .{});
    file.close(system.io());
    const below_file = try std.fmt.allocPrint(
        std.testing.allocator,
        "{s}/file/x",
        .{buffer[0..root_len]},
    );
    defer std.testing.allocator.free(below_file);
    try std.testing.expectError(error.Io, createDirectories(below_file, &diagnostic));
    const nested = try std.fmt.allocPrint(
        std.testing.allocator,
        "{s}/a/b/c",
        .{buffer[0..root_len]},
    );
    defer std.testing.allocator.free(nested);
    try createDirectories(nested, &diagnostic);
    try createDirectories(nested, &diagnostic);
    // By the absolute path: under wine, a lookup relative to `tmp.dir` does not see
    // directories created by absolute path (on Linux both work).
    try std.Io.Dir.cwd().access(system.io(), nested, .{});
}

test "a synced file's dropped pages leave the page cache" {
    if (builtin.os.tag != .linux) return error.SkipZigTest;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    var diagnostic: Diagnostic = .{};
    const page_count = 64;
    const bytes = try std.testing.allocator.alloc(u8, page_count * std.heap.pageSize());
    defer std.testing.allocator.free(bytes);
    @memset(bytes, 0x5a);
    const file = try writeFile(tmp.dir, "dropped.bin", bytes, &diagnostic);
    defer file.close(io);
    try file.sync(io);
    const reading = try tmp.dir.openFile(io, "dropped.bin", .{}); // to map it
    defer reading.close(io);
    try std.testing.expectEqual(page_count, cachedPages(reading, bytes.len));
    dropCachedPages(file, 0, 0);
    try std.testing.expectEqual(0, cachedPages(reading, bytes.len));
    // Dropped from memory, not from the file.
    var back: [16]u8 = undefined;
    try std.testing.expectEqualStrings(
        bytes[0..16],
        try tmp.dir.readFile(io, "dropped.bin", &back),
    );
}

/// How many of the first `len` bytes' pages of `file` are in the page cache (`mincore`).
fn cachedPages(file: std.Io.File, len: usize) !usize {
    const linux = std.os.linux;
    const mapped = std.c.mmap(null, len, .{ .READ = true }, .{ .TYPE = .SHARED }, file.handle, 0);
    if (mapped == std.c.MAP_FAILED) return error.MapFailed;
    defer _ = std.c.munmap(@alignCast(mapped), len);
    var resident: [64]u8 = undefined;
    const pages = len / std.heap.pageSize();
    std.debug.assert(pages <= resident.len);
    const status = linux.errno(linux.mincore(@ptrCast(mapped), len, &resident));
    if (status != .SUCCESS) return error.MincoreFailed;
    var count: usize = 0;
    for (resident[0..pages]) |flags| count += flags & 1;
    return count;
}

test "a synced file holds what was written" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var diagnostic: Diagnostic = .{};
    const file = try writeFile(tmp.dir, "a.bin", "hello", &diagnostic);
    defer file.close(system.io());
    try file.sync(system.io());
    try syncDir(tmp.dir, "tmp", &diagnostic);
    var buffer: [16]u8 = undefined;
    const read = try tmp.dir.readFile(system.io(), "a.bin", &buffer);
    try std.testing.expectEqualStrings("hello", read);
}
