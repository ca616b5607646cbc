//! What opening any of a cache's files shares: the error a failed open maps
//! to, and a whole file's SHA-256 checked against the manifest.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sha256 = @import("../codec/sha256.zig");
const file_status = @import("../base/file_status.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// Bytes hashed per read.
const hash_chunk_bytes = 4 << 20;

/// A missing cache file makes the cache invalid; any other failure is the system's.
pub fn fileFailure(err: anyerror) Error {
    if (err == error.OutOfMemory) return error.OutOfMemory;
    return if (file_status.missing(err)) error.InvalidCache else error.Io;
}

/// Hashes `file` from its start to its end and compares the digest with
/// `expected`; `what` names the file in messages ("shards/000001.bin").
pub fn checkFileHash(
    file: std.Io.File,
    what: []const u8,
    expected: [sha256.digest_length]u8,
    diagnostic: *Diagnostic,
) Error!void {
    const actual = try fileHash(file, what, diagnostic);
    if (!std.mem.eql(u8, &actual, &expected)) {
        diagnostic.set("checksum mismatch: {s}: SHA-256 does not match the manifest", .{what});
        return error.InvalidCache;
    }
}

/// The SHA-256 of `file` from its start to its end; `what` names it in messages.
pub fn fileHash(
    file: std.Io.File,
    what: []const u8,
    diagnostic: *Diagnostic,
) Error![sha256.digest_length]u8 {
    assert(what.len > 0);
    const io = system.io();
    var hasher = sha256.Hasher.init();
    const buffer = std.heap.c_allocator.alloc(u8, hash_chunk_bytes) catch return error.OutOfMemory;
    defer std.heap.c_allocator.free(buffer);
    var offset: u64 = 0;
    while (true) {
        const read = file.readPositionalAll(io, buffer, offset) catch |err| {
            diagnostic.set("I/O error: cannot read {s}: {f}", .{ what, error_words.of(err) });
            return error.Io;
        };
        assert(read <= buffer.len);
        hasher.update(buffer[0..read]);
        offset += read;
        if (read < buffer.len) break;
    }
    return hasher.final();
}

test "a file's hash is checked whole, and a mismatch names the file" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const bytes = "the bytes of a shard";
    const file = try tmp.dir.createFile(io, "data", .{ .read = true });
    defer file.close(io);
    try file.writePositionalAll(io, bytes, 0);
    var diagnostic: Diagnostic = .{};
    try checkFileHash(file, "shards/000000.bin", sha256.hash(bytes), &diagnostic);
    const other = sha256.hash("other bytes");
    const result = checkFileHash(file, "shards/000000.bin", other, &diagnostic);
    try std.testing.expectError(error.InvalidCache, result);
    const expected = "checksum mismatch: shards/000000.bin: SHA-256 does not match the manifest";
    try std.testing.expectEqualStrings(expected, diagnostic.message());
}

test "a file that cannot be read is an I/O error" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    // Opened for writing only: every read of it fails.
    const file = try tmp.dir.createFile(io, "data", .{});
    defer file.close(io);
    try file.writePositionalAll(io, "bytes", 0);
    var diagnostic: Diagnostic = .{};
    const result = checkFileHash(file, "index.bin", sha256.hash("bytes"), &diagnostic);
    try std.testing.expectError(error.Io, result);
    try std.testing.expect(
        std.mem.startsWith(u8, diagnostic.message(), "I/O error: cannot read index.bin"),
    );
}

test "a missing file makes the cache invalid, other failures are I/O errors" {
    try std.testing.expectEqual(error.InvalidCache, fileFailure(error.FileNotFound));
    try std.testing.expectEqual(error.Io, fileFailure(error.AccessDenied));
    try std.testing.expectEqual(error.OutOfMemory, fileFailure(error.OutOfMemory));
}
