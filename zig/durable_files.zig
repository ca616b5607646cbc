//! File-system steps whose order and durability make publication atomic:
//! write + fsync a file, fsync a directory, check a path segment.
const std = @import("std");
const system = @import("system.zig");
const Diagnostic = @import("diagnostic.zig").Diagnostic;

pub const Error = error{Io};

/// Creates (or truncates) `name` in `dir`, writes `bytes` and fsyncs the file.
pub fn writeFileSynced(dir: std.Io.Dir, name: []const u8, bytes: []const u8, diagnostic: *Diagnostic) Error!void {
    const io = system.io();
    const file = dir.createFile(io, name, .{ .truncate = true }) catch |err| {
        diagnostic.set("cannot create {s}: {s}", .{ name, @errorName(err) });
        return error.Io;
    };
    defer file.close(io);
    file.writePositionalAll(io, bytes, 0) catch |err| {
        diagnostic.set("cannot write {s}: {s}", .{ name, @errorName(err) });
        return error.Io;
    };
    file.sync(io) catch |err| {
        diagnostic.set("cannot fsync {s}: {s}", .{ name, @errorName(err) });
        return error.Io;
    };
}

/// Makes a directory's entries (new files, renames) durable.
pub fn syncDir(dir: std.Io.Dir, what: []const u8, diagnostic: *Diagnostic) Error!void {
    const io = system.io();
    const handle = dir.openFile(io, ".", .{}) catch |err| {
        diagnostic.set("cannot open directory {s} to fsync it: {s}", .{ what, @errorName(err) });
        return error.Io;
    };
    defer handle.close(io);
    handle.sync(io) catch |err| {
        diagnostic.set("cannot fsync directory {s}: {s}", .{ what, @errorName(err) });
        return error.Io;
    };
}

/// Why `name` is not one plain path segment, or null when it is.
pub fn plainSegmentProblem(name: []const u8) ?[]const u8 {
    if (name.len == 0) return "is empty";
    if (std.mem.eql(u8, name, ".") or std.mem.eql(u8, name, "..")) return "is a relative directory reference";
    if (std.mem.indexOfAny(u8, name, "/\\") != null) return "contains a path separator";
    if (std.mem.indexOfScalar(u8, name, 0) != null) return "contains a NUL byte";
    if (name.len > 255) return "is longer than 255 bytes";
    return null;
}

test "only plain path segments are accepted as names" {
    try std.testing.expect(plainSegmentProblem("train-00") == null);
    try std.testing.expect(plainSegmentProblem("..hidden") == null);
    for ([_][]const u8{ "", ".", "..", "a/b", "a\\b", "/abs", "a\x00b" }) |bad| {
        try std.testing.expect(plainSegmentProblem(bad) != null);
    }
}

test "a synced file holds what was written" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var diagnostic: Diagnostic = .{};
    try writeFileSynced(tmp.dir, "a.bin", "hello", &diagnostic);
    try syncDir(tmp.dir, "tmp", &diagnostic);
    var buffer: [16]u8 = undefined;
    const read = try tmp.dir.readFile(system.io(), "a.bin", &buffer);
    try std.testing.expectEqualStrings("hello", read);
}
