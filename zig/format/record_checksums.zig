//! records.crc32c: one CRC-32C per record, so every read checks the bytes it
//! returns.
//!
//! Entry `i` (4 bytes, little-endian) is the CRC-32C (Castagnoli, as iSCSI and
//! ext4 use it) of sample `i`'s whole record as stored in its shard: header,
//! metadata JSON and stored payload (the LZ4 block, for lz4 shards), so a
//! record is checked before anything decodes it. The manifest lists the file
//! under `record_checksums` with its length and SHA-256; dataset-rt 0.2.4
//! neither writes it nor looks at it.
const std = @import("std");
const assert = std.debug.assert;
const crc32c = @import("../codec/crc32c.zig");
const crc32c_combine = @import("../codec/crc32c_combine.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

/// Bytes per entry.
pub const checksum_bytes = 4;

/// The checksum of a record's stored bytes.
pub fn ofRecord(record: []const u8) u32 {
    return crc32c.checksum(record);
}

/// The checksum of a record whose stored bytes are `head` followed by `rest`.
pub fn ofParts(head: []const u8, rest: []const u8) u32 {
    return crc32c.update(crc32c.checksum(head), rest);
}

/// Appends a record's checksum to the file's bytes.
pub fn append(
    allocator: std.mem.Allocator,
    file_bytes: *std.ArrayList(u8),
    checksum: u32,
) error{OutOfMemory}!void {
    var bytes: [checksum_bytes]u8 = undefined;
    std.mem.writeInt(u32, &bytes, checksum, .little);
    try file_bytes.appendSlice(allocator, &bytes);
}

/// Sample `sample_id`'s entry in the file's bytes.
pub fn entry(file_bytes: []const u8, sample_id: u64) u32 {
    assert(file_bytes.len % checksum_bytes == 0);
    assert(sample_id < file_bytes.len / checksum_bytes);
    const at: usize = @intCast(entryOffset(sample_id));
    return std.mem.readInt(u32, file_bytes[at..][0..checksum_bytes], .little);
}

/// Where sample `sample_id`'s entry starts in the file.
pub fn entryOffset(sample_id: u64) u64 {
    return sample_id * checksum_bytes;
}

/// The checksum a record's tail (its payload, read on its own) must have, from
/// the record's entry and the checksum of the head before it.
pub fn expectedTail(record_checksum: u32, head_checksum: u32, tail_len: u64) u32 {
    return crc32c_combine.tail(record_checksum, head_checksum, tail_len);
}

/// Joins checksums of a payload's pieces read separately: xor each piece's
/// `pieceContribution` (its checksum and the payload bytes after it), in any order.
pub fn pieceContribution(piece_checksum: u32, bytes_after: u64) u32 {
    return crc32c_combine.contribution(piece_checksum, bytes_after);
}

/// The checksum of `bytes`, continuing `checksum` of the bytes before them.
pub fn extend(checksum: u32, bytes: []const u8) u32 {
    return crc32c.update(checksum, bytes);
}

/// Sets the message of a mismatch (the caller prefixes cache, shard, sample and offset).
pub fn mismatch(expected: u32, actual: u32, diagnostic: *Diagnostic) error{InvalidCache} {
    diagnostic.set(
        "record checksum mismatch: the stored bytes have CRC-32C {x:0>8}, records.crc32c says " ++
            "{x:0>8}",
        .{ actual, expected },
    );
    return error.InvalidCache;
}

test "entries are little-endian CRC-32Cs of whole records" {
    const allocator = std.testing.allocator;
    var file_bytes: std.ArrayList(u8) = .empty;
    defer file_bytes.deinit(allocator);
    try append(allocator, &file_bytes, ofRecord("123456789"));
    try append(allocator, &file_bytes, ofParts("1234", "56789"));
    try std.testing.expectEqualSlices(
        u8,
        &.{ 0x83, 0x92, 0x06, 0xe3, 0x83, 0x92, 0x06, 0xe3 },
        file_bytes.items,
    );
    try std.testing.expectEqual(@as(u32, 0xe3069283), entry(file_bytes.items, 1));
}

test "a tail is checked on its own, whole or in pieces" {
    const record = "header+json|the payload bytes, read later in pieces";
    const head_len = 12;
    const whole = ofRecord(record);
    const expected = expectedTail(whole, ofRecord(record[0..head_len]), record.len - head_len);
    const payload = record[head_len..];
    try std.testing.expectEqual(crc32c.checksum(payload), expected);
    const joined = pieceContribution(crc32c.checksum(payload[10..]), 0) ^
        pieceContribution(crc32c.checksum(payload[0..10]), payload.len - 10);
    try std.testing.expectEqual(expected, joined);
    try std.testing.expectEqual(expected, extend(crc32c.checksum(payload[0..5]), payload[5..]));
}
