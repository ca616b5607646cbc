//! A read-only view of a whole file (the index): mapped where the system
//! allows it, else read into memory.
//!
//! Not `std.Io.File.MemoryMap` on POSIX systems. On Linux it maps with
//! MAP_SHARED_VALIDATE, which kernels before 4.15 (Amazon Linux 2's 4.14, for
//! one; Zig assumes 5.10 by default) and qemu-user 7.2 refuse with EINVAL, and
//! where mapping fails, for that or any other reason (a file system without
//! mmap answers ENODEV), it reads the file into memory from the
//! single-threaded `Io`'s allocator, which always fails: the cache open
//! failed with OutOfMemory. Here a plain MAP_SHARED mapping is made, and when
//! the system refuses it, the file is read with the caller's allocator.
//! Windows keeps `std.Io.File.MemoryMap` (a section view).
const std = @import("std");
const builtin = @import("builtin");
const system = @import("system.zig");
const positional_read = @import("positional_read.zig");
const error_words = @import("error_words.zig");
const Diagnostic = @import("diagnostic.zig").Diagnostic;

pub const Error = error{ OutOfMemory, Io, ShortFile };

pub const FileView = struct {
    bytes: []const u8,
    backing: union(enum) {
        mapped: []align(std.heap.page_size_min) const u8,
        section: std.Io.File.MemoryMap,
        read: []u8,
    },

    /// The first `len` bytes of `file` (at least 1; the file may be longer),
    /// `name` for messages. `error.ShortFile` when it holds fewer; `error.Io`
    /// when neither mapping nor reading works.
    pub fn open(
        allocator: std.mem.Allocator,
        file: std.Io.File,
        len: usize,
        name: []const u8,
        diagnostic: *Diagnostic,
    ) Error!FileView {
        std.debug.assert(len > 0);
        if (builtin.os.tag == .windows) {
            const map = std.Io.File.MemoryMap.create(system.io(), file, .{
                .len = len,
                .protection = .{ .read = true, .write = false },
                .populate = false,
            }) catch |err| {
                diagnostic.set("cannot map {s}: {f}", .{ name, error_words.of(err) });
                return error.Io;
            };
            return .{ .bytes = map.memory[0..len], .backing = .{ .section = map } };
        }
        const mapped = std.c.mmap(
            null,
            len,
            .{ .READ = true },
            .{ .TYPE = .SHARED },
            file.handle,
            0,
        );
        if (mapped != std.c.MAP_FAILED) {
            const memory = @as(
                [*]align(std.heap.page_size_min) const u8,
                @ptrCast(@alignCast(mapped)),
            )[0..len];
            return .{ .bytes = memory, .backing = .{ .mapped = memory } };
        }
        return readWhole(allocator, file, len, name, diagnostic);
    }

    /// Reads the file instead of mapping it (also how `open` falls back).
    fn readWhole(
        allocator: std.mem.Allocator,
        file: std.Io.File,
        len: usize,
        name: []const u8,
        diagnostic: *Diagnostic,
    ) Error!FileView {
        const buffer = try allocator.alloc(u8, len);
        errdefer allocator.free(buffer);
        const read = positional_read.readAll(file, buffer, 0) catch |err| {
            diagnostic.set("cannot map or read {s}: {f}", .{ name, error_words.of(err) });
            return error.Io;
        };
        if (read != len) {
            diagnostic.set("{s} ended after {d} of {d} bytes", .{ name, read, len });
            return error.ShortFile;
        }
        return .{ .bytes = buffer, .backing = .{ .read = buffer } };
    }

    pub fn close(view: *FileView, allocator: std.mem.Allocator) void {
        switch (view.backing) {
            .mapped => |memory| if (builtin.os.tag != .windows) {
                _ = std.c.munmap(memory.ptr, memory.len);
            },
            .section => |*map| map.destroy(system.io()),
            .read => |buffer| allocator.free(buffer),
        }
        view.* = undefined;
    }
};

test "a file's view holds its bytes, mapped or read, and a short file is refused" {
    const io = system.io();
    const allocator = std.testing.allocator;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var bytes: [10000]u8 = undefined;
    for (&bytes, 0..) |*byte, i| byte.* = @truncate(i *% 7);
    const writing = try tmp.dir.createFile(io, "index.bin", .{});
    try writing.writePositionalAll(io, &bytes, 0);
    writing.close(io);
    const file = try tmp.dir.openFile(io, "index.bin", .{});
    defer file.close(io);
    var diagnostic: Diagnostic = .{};

    var view = try FileView.open(allocator, file, bytes.len, "index.bin", &diagnostic);
    try std.testing.expectEqualSlices(u8, &bytes, view.bytes);
    view.close(allocator);

    var read = try FileView.readWhole(allocator, file, bytes.len, "index.bin", &diagnostic);
    try std.testing.expectEqualSlices(u8, &bytes, read.bytes);
    read.close(allocator);

    try std.testing.expectError(
        error.ShortFile,
        FileView.readWhole(allocator, file, bytes.len + 1, "index.bin", &diagnostic),
    );
    try std.testing.expectEqualStrings(
        "index.bin ended after 10000 of 10001 bytes",
        diagnostic.message(),
    );
}

test "a file the system will not map is read instead" {
    if (builtin.os.tag != .linux) return error.SkipZigTest;
    const io = system.io();
    const allocator = std.testing.allocator;
    // procfs files cannot be mapped (ENODEV) but can be read positionally (not
    // /proc/self/*, which qemu-user imitates with ordinary files).
    const file = try std.Io.Dir.cwd().openFile(io, "/proc/version", .{});
    defer file.close(io);
    var expected: [4096]u8 = undefined;
    const len = try positional_read.readAll(file, &expected, 0);
    try std.testing.expect(len > 0);
    var diagnostic: Diagnostic = .{};
    var view = try FileView.open(allocator, file, len, "version", &diagnostic);
    defer view.close(allocator);
    try std.testing.expect(view.backing == .read);
    try std.testing.expectEqualSlices(u8, expected[0..len], view.bytes);
}
