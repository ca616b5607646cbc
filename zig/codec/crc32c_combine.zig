//! Joining CRC-32Cs of consecutive pieces without reading the bytes again.
//!
//! A CRC is linear over GF(2): for finalized CRCs (init and final xor ~0, as
//! crc32c.zig computes them), CRC(A ++ B) = CRC(A) * x^(8 * len(B)) mod P xor
//! CRC(B). So pieces of one payload read on different threads can each be
//! checksummed where they were read, and their CRCs joined afterwards; and the
//! CRC of a record's tail follows from the record's CRC and its head's.
//!
//! Polynomials are in the reflected form of the CRC itself: bit 31 holds the
//! coefficient of x^0, bit 0 that of x^31.
const std = @import("std");
const assert = std.debug.assert;

const crc32c_polynomial = @import("crc32c_polynomial.zig");
const multiply = crc32c_polynomial.multiply;
const one = crc32c_polynomial.one;

/// x^(2^k) mod P for k = 0 .. 66: enough for x^(8n) with any u64 n.
const powers: [67]u32 = table: {
    @setEvalBranchQuota(100_000);
    var table: [67]u32 = undefined;
    table[0] = one >> 1; // x^1
    for (1..table.len) |k| table[k] = multiply(table[k - 1], table[k - 1]);
    break :table table;
};

/// x^(8 * byte_count) mod P: the factor that moves a CRC past `byte_count` bytes.
fn bytesFactor(byte_count: u64) u32 {
    var factor = one;
    var rest = byte_count;
    var k: usize = 3; // 8 = 2^3
    while (rest != 0) : ({
        rest >>= 1;
        k += 1;
    }) {
        if (rest & 1 != 0) factor = multiply(powers[k], factor);
    }
    return factor;
}

/// CRC(A ++ B) from CRC(A), CRC(B) and len(B).
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) u32 {
    return multiply(bytesFactor(len_b), crc_a) ^ crc_b;
}

/// CRC(B) from CRC(A ++ B), CRC(A) and len(B): the tail's CRC, for checking a
/// tail read on its own.
pub fn tail(crc_whole: u32, crc_head: u32, len_tail: u64) u32 {
    return crc_whole ^ multiply(bytesFactor(len_tail), crc_head);
}

/// The contribution of a piece to the CRC of the whole it belongs to, given
/// the bytes that follow it there: the pieces' contributions xor to the CRC
/// of the whole, in any order (so threads can add theirs as they finish).
pub fn contribution(crc_piece: u32, bytes_after: u64) u32 {
    return multiply(bytesFactor(bytes_after), crc_piece);
}

const crc32c = @import("crc32c.zig");

test "combine joins the CRCs of two pieces at every split" {
    var bytes: [300]u8 = undefined;
    var random: std.Random.DefaultPrng = .init(0x5eed);
    random.random().bytes(&bytes);
    for (0..bytes.len + 1) |split| {
        const whole = crc32c.checksum(&bytes);
        const head = crc32c.checksum(bytes[0..split]);
        const rest = crc32c.checksum(bytes[split..]);
        try std.testing.expectEqual(whole, combine(head, rest, bytes.len - split));
        try std.testing.expectEqual(rest, tail(whole, head, bytes.len - split));
    }
}

test "contributions of pieces xor to the whole's CRC" {
    var bytes: [5000]u8 = undefined;
    var random: std.Random.DefaultPrng = .init(7);
    random.random().bytes(&bytes);
    const cuts = [_]usize{ 0, 1, 100, 1024, 1025, 4096, 5000 };
    var joined: u32 = 0;
    for (cuts[0 .. cuts.len - 1], cuts[1..]) |start, end| {
        joined ^= contribution(crc32c.checksum(bytes[start..end]), bytes.len - end);
    }
    try std.testing.expectEqual(crc32c.checksum(&bytes), joined);
}

test "an empty piece changes nothing; lengths beyond u32 are handled" {
    const crc = crc32c.checksum("123456789");
    try std.testing.expectEqual(crc, combine(crc, 0, 0));
    try std.testing.expectEqual(crc, contribution(crc, 0));
    // Moving past 2^40 zero bytes equals moving past 2^39 twice.
    const half = contribution(crc, 1 << 39);
    try std.testing.expectEqual(contribution(crc, 1 << 40), contribution(half, 1 << 39));
    assert(multiply(one, crc) == crc);
}
