//! index.bin: one 24-byte row per sample, `shard_id: u64 LE, offset: u64 LE,
//! record_len: u64 LE`, where `record_len` covers the whole shard record.
const std = @import("std");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const row_bytes = 24;

pub const Row = struct {
    shard_id: u64,
    offset: u64,
    record_len: u64,
};

pub fn encodeRow(row: Row, out: *[row_bytes]u8) void {
    std.mem.writeInt(u64, out[0..8], row.shard_id, .little);
    std.mem.writeInt(u64, out[8..16], row.offset, .little);
    std.mem.writeInt(u64, out[16..24], row.record_len, .little);
}

/// Row `sample_id` of an index whose size was already checked to be
/// `sample_count * row_bytes`.
pub fn decodeRow(index_bytes: []const u8, sample_id: u64) Row {
    const start: usize = @intCast(sample_id * row_bytes);
    const bytes = index_bytes[start..][0..row_bytes];
    return .{
        .shard_id = std.mem.readInt(u64, bytes[0..8], .little),
        .offset = std.mem.readInt(u64, bytes[8..16], .little),
        .record_len = std.mem.readInt(u64, bytes[16..24], .little),
    };
}

/// The exact size an index of `sample_count` rows must have, or an error if it
/// cannot be represented (a hostile manifest).
pub fn expectedBytes(sample_count: u64, diagnostic: *Diagnostic) error{InvalidCache}!u64 {
    return std.math.mul(u64, sample_count, row_bytes) catch {
        diagnostic.set("sample_count {d} is too large", .{sample_count});
        return error.InvalidCache;
    };
}

/// Checks that a row points inside its shard: the reader calls this before
/// touching the shard so that a corrupt index can never read past a file.
pub fn checkRow(
    row: Row,
    sample_id: u64,
    shard_byte_lens: []const u64,
    diagnostic: *Diagnostic,
) error{InvalidCache}!void {
    if (row.shard_id >= shard_byte_lens.len) {
        diagnostic.set(
            "index.bin row {d} names shard {d}, but the manifest lists {d} shards",
            .{ sample_id, row.shard_id, shard_byte_lens.len },
        );
        return error.InvalidCache;
    }
    const end = std.math.add(u64, row.offset, row.record_len) catch std.math.maxInt(u64);
    if (end > shard_byte_lens[@intCast(row.shard_id)]) {
        diagnostic.set(
            "index.bin row {d} (offset {d}, length {d}) extends past the end of shard {d} " ++
                "({d} bytes)",
            .{
                sample_id,
                row.offset,
                row.record_len,
                row.shard_id,
                shard_byte_lens[@intCast(row.shard_id)],
            },
        );
        return error.InvalidCache;
    }
}

/// Records lie back to back in sample order within each shard (both writers of
/// format v2 lay them out so): a record ends where the next sample's record
/// starts when both are in the same shard, and otherwise at the end of its
/// shard. Checking this on every read catches a corrupted record length.
pub fn checkContiguous(
    index_bytes: []const u8,
    sample_count: u64,
    sample_id: u64,
    row: Row,
    shard_byte_lens: []const u64,
    diagnostic: *Diagnostic,
) error{InvalidCache}!void {
    const end = row.offset + row.record_len; // checkRow already ruled out overflow
    if (sample_id + 1 < sample_count) {
        const next = decodeRow(index_bytes, sample_id + 1);
        if (next.shard_id == row.shard_id) {
            if (next.offset != end) {
                diagnostic.set(
                    "index.bin row {d} ends at {d} but row {d} starts at {d} in the same shard",
                    .{ sample_id, end, sample_id + 1, next.offset },
                );
                return error.InvalidCache;
            }
            return;
        }
    }
    const shard_end = shard_byte_lens[@intCast(row.shard_id)];
    if (end != shard_end) {
        diagnostic.set(
            "index.bin row {d} is the last of shard {d} but ends at {d}, not at the shard's " ++
                "end {d}",
            .{ sample_id, row.shard_id, end, shard_end },
        );
        return error.InvalidCache;
    }
}

test "rows round trip through their 24-byte encoding" {
    var bytes: [2 * row_bytes]u8 = undefined;
    encodeRow(.{ .shard_id = 1, .offset = 2, .record_len = 3 }, bytes[0..row_bytes]);
    encodeRow(
        .{ .shard_id = 0xffff_ffff_ffff, .offset = 1 << 40, .record_len = 9 },
        bytes[row_bytes..][0..row_bytes],
    );
    try std.testing.expectEqual(
        Row{ .shard_id = 1, .offset = 2, .record_len = 3 },
        decodeRow(&bytes, 0),
    );
    try std.testing.expectEqual(
        Row{ .shard_id = 0xffff_ffff_ffff, .offset = 1 << 40, .record_len = 9 },
        decodeRow(&bytes, 1),
    );
}

test "records must lie back to back and end with their shard" {
    var diagnostic: Diagnostic = .{};
    var bytes: [3 * row_bytes]u8 = undefined;
    encodeRow(.{ .shard_id = 0, .offset = 0, .record_len = 10 }, bytes[0..row_bytes]);
    encodeRow(.{ .shard_id = 0, .offset = 10, .record_len = 5 }, bytes[row_bytes..][0..row_bytes]);
    encodeRow(
        .{ .shard_id = 1, .offset = 0, .record_len = 7 },
        bytes[2 * row_bytes ..][0..row_bytes],
    );
    const lens = [_]u64{ 15, 7 };
    for (0..3) |sample| try checkContiguous(
        &bytes,
        3,
        sample,
        decodeRow(&bytes, sample),
        &lens,
        &diagnostic,
    );
    try std.testing.expectError(
        error.InvalidCache,
        checkContiguous(
            &bytes,
            3,
            0,
            .{ .shard_id = 0, .offset = 0, .record_len = 9 },
            &lens,
            &diagnostic,
        ),
    );
    try std.testing.expectError(
        error.InvalidCache,
        checkContiguous(
            &bytes,
            3,
            1,
            .{ .shard_id = 0, .offset = 10, .record_len = 4 },
            &lens,
            &diagnostic,
        ),
    );
    try std.testing.expectError(
        error.InvalidCache,
        checkContiguous(
            &bytes,
            3,
            2,
            .{ .shard_id = 1, .offset = 0, .record_len = 6 },
            &lens,
            &diagnostic,
        ),
    );
}

test "rows outside their shard are rejected, also when offset + length overflows" {
    var diagnostic: Diagnostic = .{};
    const lens = [_]u64{ 100, 50 };
    try checkRow(.{ .shard_id = 1, .offset = 10, .record_len = 40 }, 0, &lens, &diagnostic);
    try std.testing.expectError(
        error.InvalidCache,
        checkRow(.{ .shard_id = 2, .offset = 0, .record_len = 1 }, 0, &lens, &diagnostic),
    );
    try std.testing.expectError(
        error.InvalidCache,
        checkRow(.{ .shard_id = 1, .offset = 10, .record_len = 41 }, 0, &lens, &diagnostic),
    );
    try std.testing.expectError(
        error.InvalidCache,
        checkRow(
            .{ .shard_id = 0, .offset = std.math.maxInt(u64), .record_len = 2 },
            5,
            &lens,
            &diagnostic,
        ),
    );
    try std.testing.expect(std.mem.indexOf(u8, diagnostic.message(), "row 5") != null);
}
