//! A read-only mapping of one whole shard, for readers that hand out payloads
//! in place (`drt_dataset_set_payloads` with `DRT_PAYLOADS_MAPPED`).
//!
//! The cache that made a mapping holds one reference; a binding that hands out
//! views of its bytes takes one more for as long as any view lives
//! (`drt_mapping_retain` / `drt_mapping_release`), so the bytes stay readable
//! after the dataset is closed. The last release unmaps.
//!
//! Where the system will not map the file, `FileView` reads it into memory
//! instead: the views stay valid, at the cost of one copy of the shard.
const std = @import("std");
const assert = std.debug.assert;
const FileView = @import("../base/file_view.zig").FileView;
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");

pub const Error = error{ OutOfMemory, Io, InvalidCache };

pub const ShardMapping = struct {
    allocator: std.mem.Allocator,
    view: FileView,
    references: std.atomic.Value(u32),

    /// Maps the first `len` bytes of `file` (the shard's length from its
    /// manifest); the caller holds the one reference. `name` for messages.
    pub fn create(
        allocator: std.mem.Allocator,
        file: std.Io.File,
        len: u64,
        name: []const u8,
        diagnostic: *Diagnostic,
    ) Error!*ShardMapping {
        assert(len > 0);
        // Reading a mapping past the end of its file ends the process (SIGBUS),
        // so a shard shortened since the cache was opened is refused here. One
        // shortened after this still ends the process when the missing bytes
        // are read: the price of reading in place (docs/runtime.md).
        const actual = file_status.length(file) catch |err| {
            diagnostic.set("I/O error: cannot stat {s}: {f}", .{ name, error_words.of(err) });
            return error.Io;
        };
        if (actual < len) {
            diagnostic.set(
                "shard length mismatch: {s} has {d} bytes but the manifest says {d}",
                .{ name, actual, len },
            );
            return error.InvalidCache;
        }
        const mapping = try allocator.create(ShardMapping);
        errdefer allocator.destroy(mapping);
        const view = FileView.open(
            allocator,
            file,
            @intCast(len),
            name,
            diagnostic,
        ) catch |err| switch (err) {
            error.OutOfMemory => return error.OutOfMemory,
            error.Io => return error.Io,
            error.ShortFile => return error.InvalidCache,
        };
        mapping.* = .{ .allocator = allocator, .view = view, .references = .init(1) };
        assert(mapping.bytes().len == len);
        return mapping;
    }

    pub fn bytes(mapping: *const ShardMapping) []const u8 {
        return mapping.view.bytes;
    }

    pub fn retain(mapping: *ShardMapping) void {
        // Only a holder of a reference takes another.
        const before = mapping.references.fetchAdd(1, .monotonic);
        assert(before > 0);
    }

    /// Drops one reference; the last unmaps and frees the mapping.
    pub fn release(mapping: *ShardMapping) void {
        const before = mapping.references.fetchSub(1, .acq_rel);
        assert(before > 0);
        if (before != 1) return;
        const allocator = mapping.allocator;
        mapping.view.close(allocator);
        allocator.destroy(mapping);
    }
};

test "a mapping holds the shard's bytes until its last reference is released" {
    const io = system.io();
    const allocator = std.testing.allocator;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var bytes: [20000]u8 = undefined;
    for (&bytes, 0..) |*byte, i| byte.* = @truncate(i *% 13);
    const writing = try tmp.dir.createFile(io, "000000.bin", .{});
    try writing.writePositionalAll(io, &bytes, 0);
    writing.close(io);
    const file = try tmp.dir.openFile(io, "000000.bin", .{});
    var diagnostic: Diagnostic = .{};
    const mapping = try ShardMapping.create(allocator, file, bytes.len, "000000.bin", &diagnostic);
    file.close(io); // the mapping outlives the file handle
    mapping.retain();
    mapping.release();
    try std.testing.expectEqualSlices(u8, &bytes, mapping.bytes());
    mapping.release(); // the last: the testing allocator reports a leak otherwise

    const again = try tmp.dir.openFile(io, "000000.bin", .{});
    defer again.close(io);
    try std.testing.expectError(
        error.InvalidCache,
        ShardMapping.create(allocator, again, bytes.len + 1, "000000.bin", &diagnostic),
    );
}
