//! One shard record: `meta_len: u64 LE`, `meta_len` bytes of the sample's metadata
//! as compact JSON, then the stored payload. With lz4 the stored payload is
//! `uncompressed_len: u32 LE` followed by one LZ4 block; with none it is the raw bytes.
const std = @import("std");
const lz4 = @import("../codec/lz4.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Compression = enum { none, lz4 };

pub const header_bytes = 8;
pub const lz4_prefix_bytes = 4;

/// The largest payload an lz4 record can hold: the codec's input limit (below the u32 prefix's).
pub const lz4_payload_bytes_max: u64 = lz4.source_length_max;

/// Upper bound of the encoded size of a record, for sizing buffers before encoding.
pub fn encodedBytesMax(
    metadata_json_len: usize,
    payload_len: usize,
    compression: Compression,
) usize {
    return header_bytes + metadata_json_len + switch (compression) {
        .none => payload_len,
        .lz4 => lz4_prefix_bytes + lz4.compressBound(payload_len),
    };
}

/// Appends the framed record to `out` (capacity reserved by the caller from
/// `encodedBytesMax`); returns the record's length. `lz4_table` is the
/// compressor's table, kept by the caller from record to record.
pub fn appendAssumeCapacity(
    out: *std.ArrayList(u8),
    metadata_json: []const u8,
    payload: []const u8,
    compression: Compression,
    lz4_table: *lz4.Table,
) usize {
    const start = out.items.len;
    var header: [header_bytes]u8 = undefined;
    std.mem.writeInt(u64, &header, metadata_json.len, .little);
    out.appendSliceAssumeCapacity(&header);
    out.appendSliceAssumeCapacity(metadata_json);
    switch (compression) {
        .none => out.appendSliceAssumeCapacity(payload),
        .lz4 => {
            std.debug.assert(payload.len <= lz4_payload_bytes_max);
            var prefix: [lz4_prefix_bytes]u8 = undefined;
            std.mem.writeInt(u32, &prefix, @intCast(payload.len), .little);
            out.appendSliceAssumeCapacity(&prefix);
            const destination = out.unusedCapacitySlice();
            const written = lz4.compressWith(lz4_table, payload, destination);
            out.items.len += written;
        },
    }
    return out.items.len - start;
}

/// A record split into its parts; slices point into the record bytes.
pub const Parts = struct {
    metadata_json: []const u8,
    /// The payload as stored: raw bytes, or the LZ4 block without its prefix.
    stored_payload: []const u8,
    /// Length of the payload after decoding.
    payload_len: u64,
};

/// Where a record's parts lie, from its 8-byte header and its length (the index's
/// `record_len`). Every read path parses the header here.
pub const Layout = struct {
    metadata_len: u64,
    /// Bytes after the metadata: the raw payload, or the lz4 prefix and block.
    stored_len: u64,

    pub fn metadataEnd(layout: Layout) u64 {
        return header_bytes + layout.metadata_len;
    }
};

/// Checks the header's metadata length against the record's length. `head` is
/// the record's first bytes: at least the header, or the whole record when it
/// is shorter than that (which is refused).
pub fn layoutOf(
    head: []const u8,
    record_len: u64,
    diagnostic: *Diagnostic,
) error{InvalidCache}!Layout {
    if (record_len < header_bytes) {
        diagnostic.set("record of {d} bytes is shorter than its 8-byte header", .{record_len});
        return error.InvalidCache;
    }
    std.debug.assert(head.len >= header_bytes);
    const metadata_len = std.mem.readInt(u64, head[0..header_bytes], .little);
    if (metadata_len > record_len - header_bytes) {
        diagnostic.set(
            "record metadata length {d} exceeds the record ({d} bytes)",
            .{ metadata_len, record_len },
        );
        return error.InvalidCache;
    }
    return .{
        .metadata_len = metadata_len,
        .stored_len = record_len - header_bytes - metadata_len,
    };
}

/// The decoded length of an lz4 payload whose stored part (prefix and block) is
/// `stored_len` bytes and whose prefix is `prefix`. An LZ4 block expands at most
/// 255-fold (a match's length bytes add 255 each): a larger prefix is corrupt,
/// refused before any buffer for it is allocated.
pub fn lz4PayloadLen(
    prefix: *const [lz4_prefix_bytes]u8,
    stored_len: u64,
    diagnostic: *Diagnostic,
) error{InvalidCache}!u64 {
    std.debug.assert(stored_len >= lz4_prefix_bytes);
    const block_len = stored_len - lz4_prefix_bytes;
    const payload_len = std.mem.readInt(u32, prefix, .little);
    if (payload_len > lz4_payload_bytes_max or payload_len > 255 * block_len) {
        diagnostic.set(
            "lz4 record claims {d} decoded bytes, impossible for its {d}-byte block",
            .{ payload_len, block_len },
        );
        return error.InvalidCache;
    }
    return payload_len;
}

/// Checks that an lz4 record's stored part has room for its length prefix.
pub fn checkLz4Room(stored_len: u64, diagnostic: *Diagnostic) error{InvalidCache}!void {
    if (stored_len < lz4_prefix_bytes) {
        diagnostic.set("lz4 record has no room for its 4-byte length prefix", .{});
        return error.InvalidCache;
    }
}

/// Splits a record read from disk, checking every length against the record size.
pub fn split(
    record: []const u8,
    compression: Compression,
    diagnostic: *Diagnostic,
) error{InvalidCache}!Parts {
    const layout = try layoutOf(record, record.len, diagnostic);
    const metadata_end: usize = @intCast(layout.metadataEnd());
    const metadata = record[header_bytes..metadata_end];
    const rest = record[metadata_end..];
    switch (compression) {
        .none => return .{
            .metadata_json = metadata,
            .stored_payload = rest,
            .payload_len = rest.len,
        },
        .lz4 => {
            try checkLz4Room(rest.len, diagnostic);
            return .{
                .metadata_json = metadata,
                .stored_payload = rest[lz4_prefix_bytes..],
                .payload_len = try lz4PayloadLen(rest[0..lz4_prefix_bytes], rest.len, diagnostic),
            };
        },
    }
}

/// Writes the decoded payload into `destination` (exactly `parts.payload_len` bytes).
pub fn decodePayload(
    parts: Parts,
    compression: Compression,
    destination: []u8,
    diagnostic: *Diagnostic,
) error{InvalidCache}!void {
    std.debug.assert(destination.len == parts.payload_len);
    switch (compression) {
        .none => @memcpy(destination, parts.stored_payload),
        .lz4 => lz4.decompress(parts.stored_payload, destination) catch {
            diagnostic.set(
                "corrupt lz4 block ({d} bytes, expected to decode to {d} bytes)",
                .{ parts.stored_payload.len, parts.payload_len },
            );
            return error.InvalidCache;
        },
    }
}

fn roundTrip(compression: Compression, payload: []const u8) !void {
    const allocator = std.testing.allocator;
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(allocator);
    const json = "{\"a\":1}";
    try out.ensureTotalCapacity(allocator, encodedBytesMax(json.len, payload.len, compression));
    var table: lz4.Table = .{};
    const len = appendAssumeCapacity(&out, json, payload, compression, &table);
    try std.testing.expectEqual(out.items.len, len);
    var diagnostic: Diagnostic = .{};
    const parts = try split(out.items, compression, &diagnostic);
    try std.testing.expectEqualStrings(json, parts.metadata_json);
    const decoded = try allocator.alloc(u8, @intCast(parts.payload_len));
    defer allocator.free(decoded);
    try decodePayload(parts, compression, decoded, &diagnostic);
    try std.testing.expectEqualSlices(u8, payload, decoded);
}

test "records round trip with and without lz4" {
    const payload = "hello hello hello hello hello hello hello";
    try roundTrip(.none, payload);
    try roundTrip(.lz4, payload);
    try roundTrip(.none, "");
    try roundTrip(.lz4, "");
}

test "a record whose lengths point outside it is rejected" {
    var diagnostic: Diagnostic = .{};
    try std.testing.expectError(error.InvalidCache, split("short", .none, &diagnostic));
    var record: [12]u8 = @splat(0);
    std.mem.writeInt(u64, record[0..8], 5, .little);
    try std.testing.expectError(error.InvalidCache, split(&record, .none, &diagnostic));
    std.mem.writeInt(u64, record[0..8], 2, .little);
    try std.testing.expectError(error.InvalidCache, split(&record, .lz4, &diagnostic));
    std.mem.writeInt(u64, record[0..8], std.math.maxInt(u64), .little);
    try std.testing.expectError(error.InvalidCache, split(&record, .none, &diagnostic));
}

test "an lz4 length prefix beyond what its block can decode to is refused before any allocation" {
    var diagnostic: Diagnostic = .{};
    // Header, "{}", prefix, then a 6-byte block: at most 6 * 255 decoded bytes.
    var record: [8 + 2 + 4 + 6]u8 = @splat(0);
    std.mem.writeInt(u64, record[0..8], 2, .little);
    @memcpy(record[8..10], "{}");
    std.mem.writeInt(u32, record[10..14], 6 * 255, .little);
    const parts = try split(&record, .lz4, &diagnostic);
    try std.testing.expectEqual(@as(u64, 6 * 255), parts.payload_len);
    std.mem.writeInt(u32, record[10..14], 6 * 255 + 1, .little);
    try std.testing.expectError(error.InvalidCache, split(&record, .lz4, &diagnostic));
    try std.testing.expect(
        std.mem.indexOf(u8, diagnostic.message(), "claims 1531 decoded bytes") != null,
    );
    std.mem.writeInt(u32, record[10..14], std.math.maxInt(u32), .little);
    try std.testing.expectError(error.InvalidCache, split(&record, .lz4, &diagnostic));
}
