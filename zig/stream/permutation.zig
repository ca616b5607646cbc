//! Epochs without replacement: every epoch is a keyed pseudo-random permutation
//! of the table's rows, computed per position.
//!
//! Position `p` of a table of `n` rows lies in permutation epoch `e = p / n` at
//! index `i = p % n`; its row is `permute(e, i)`. The permutation is a Feistel
//! network over the `t` bits of `n - 1` (the next power of two at or above `n`,
//! at most `2n` values), with cycle walking: an index that leaves `[0, n)` is
//! permuted again until it lands back inside, which keeps the map a bijection on
//! `[0, n)`. The round keys of epoch `e` come from SipHash-2-4-128 keyed like the
//! sampler's stream, so each epoch has its own order, any position costs O(1)
//! and nothing per row is stored. docs/determinism.md ("Permutation") specifies
//! every step; tests/test_sampler_reference.py reproduces it in Python.
const std = @import("std");
const assert = std.debug.assert;
const sampler = @import("sampler.zig");

/// Domain separation for the key, and the algorithm's name in resume states.
pub const key_domain = "dataset_rt/permutation/v1";

/// Rounds of the Feistel network. Small domains (halves of at most 2 bits)
/// mix slowly, so they get more rounds: with 8, tables of 5 and of 9 rows
/// showed measurable bias in pair orders over many seeds.
pub fn roundCount(bits: u6) u32 {
    return if (bits <= small_domain_bits) 24 else 8;
}

const small_domain_bits = 4;
const rounds_max = 24;

/// The round function: MurmurHash3's 64-bit finalizer of `half ^ round_key`,
/// whose top `width` bits are xored into the other half.
fn mix(value: u64) u64 {
    var z = value;
    z ^= z >> 33;
    z *%= 0xff51afd7ed558ccd;
    z ^= z >> 33;
    z *%= 0xc4ceb9fe1a85ec53;
    z ^= z >> 33;
    return z;
}

/// One epoch's permutation of `[0, row_count)`.
pub const Epoch = struct {
    row_count: u64,
    /// Bits of the Feistel domain: the bit length of `row_count - 1`.
    bits: u6,
    rounds: u32,
    round_keys: [rounds_max]u64,

    /// The permutation of epoch `epoch` under `key` (`sampler.Key.derive(key_domain, seed)`).
    pub fn init(key: sampler.Key, row_count: u64, epoch: u64) Epoch {
        assert(row_count >= 1 and row_count <= sampler.row_count_max);
        const bits: u6 = @intCast(64 - @clz(row_count - 1));
        var result: Epoch = .{
            .row_count = row_count,
            .bits = bits,
            .rounds = roundCount(bits),
            .round_keys = @splat(0),
        };
        // Round keys 2j and 2j+1 are the two words of SipHash(key, u64le(epoch) ++ u64le(j)).
        var message: [16]u8 = undefined;
        std.mem.writeInt(u64, message[0..8], epoch, .little);
        var pair: u64 = 0;
        while (pair * 2 < result.rounds) : (pair += 1) {
            std.mem.writeInt(u64, message[8..16], pair, .little);
            const words = sampler.uniformPairOf(key, &message);
            result.round_keys[@intCast(pair * 2)] = words.a;
            result.round_keys[@intCast(pair * 2 + 1)] = words.b;
        }
        return result;
    }

    /// The row at index `index` (< row_count) of this epoch's order.
    pub fn row(epoch: *const Epoch, index: u64) u64 {
        assert(index < epoch.row_count);
        var value = index;
        // Each pass is a bijection on [0, 2^bits) and 2^bits < 2 * row_count,
        // so fewer than two passes are expected; the walk ends at the latest
        // when it comes back round the cycle to `index` itself.
        while (true) {
            value = epoch.feistel(value);
            if (value < epoch.row_count) return value;
        }
    }

    /// The alternating Feistel network on `bits`-bit values: each round splits
    /// the value into a high part of `high` bits and a low part of `low` bits,
    /// xors the high part with the round function of the low part, and rotates
    /// the low part to the top, so the two widths swap every round.
    fn feistel(epoch: *const Epoch, input: u64) u64 {
        var value = input;
        var high: u6 = epoch.bits - epoch.bits / 2; // ceil(bits / 2)
        var low: u6 = epoch.bits / 2;
        for (epoch.round_keys[0..epoch.rounds]) |round_key| {
            const low_part = value & lowMask(low);
            const high_part = value >> low;
            const mixed = mix(low_part ^ round_key);
            const f = if (high == 0) 0 else mixed >> @intCast(@as(u7, 64) - high);
            value = (low_part << high) | (high_part ^ f);
            std.mem.swap(u6, &high, &low);
        }
        assert(value >> epoch.bits == 0);
        return value;
    }
};

fn lowMask(width: u6) u64 {
    return (@as(u64, 1) << width) - 1;
}

/// Rows of consecutive positions, keeping the current epoch's round keys so a
/// run of positions pays for them once.
pub const Cursor = struct {
    key: sampler.Key,
    row_count: u64,
    current: ?Epoch = null,
    current_number: u64 = 0,

    pub fn init(key: sampler.Key, row_count: u64) Cursor {
        assert(row_count >= 1);
        return .{ .key = key, .row_count = row_count };
    }

    /// The row at stream position `position`.
    pub fn row(cursor: *Cursor, position: u64) u64 {
        const number = position / cursor.row_count;
        const index = position % cursor.row_count;
        if (cursor.current == null or cursor.current_number != number) {
            cursor.current = Epoch.init(cursor.key, cursor.row_count, number);
            cursor.current_number = number;
        }
        return cursor.current.?.row(index);
    }
};

/// The row at `position` without a cursor (O(1), with the epoch's key setup).
pub fn rowAt(key: sampler.Key, row_count: u64, position: u64) u64 {
    var cursor: Cursor = .init(key, row_count);
    return cursor.row(position);
}

/// Writes the rows of positions `start ..` into `rows`.
pub fn rowRange(key: sampler.Key, row_count: u64, start: u64, rows: []u64) void {
    assert(rows.len == 0 or rows.len - 1 <= std.math.maxInt(u64) - start);
    var cursor: Cursor = .init(key, row_count);
    for (rows, 0..) |*row, offset| row.* = cursor.row(start + offset);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn testKey(seed: u64) sampler.Key {
    return sampler.Key.derive(key_domain, seed);
}

test "every epoch is a permutation of the rows" {
    const counts = [_]u64{
        1,  2,  3,  4,  5,    7,    8,    9,    16,
        17, 31, 32, 33, 1000, 1023, 1024, 1025, 65_537,
    };
    for (counts) |row_count| {
        const seen = try testing.allocator.alloc(bool, row_count);
        defer testing.allocator.free(seen);
        for ([_]u64{ 0, 1, 1 << 40 }) |epoch_number| {
            @memset(seen, false);
            const epoch = Epoch.init(testKey(3), row_count, epoch_number);
            for (0..row_count) |index| {
                const row = epoch.row(index);
                try testing.expect(row < row_count);
                try testing.expect(!seen[row]);
                seen[row] = true;
            }
        }
    }
}

test "the domain has the bits of n - 1 and small domains more rounds" {
    try testing.expectEqual(@as(u6, 0), Epoch.init(testKey(0), 1, 0).bits);
    try testing.expectEqual(@as(u6, 1), Epoch.init(testKey(0), 2, 0).bits);
    try testing.expectEqual(@as(u6, 2), Epoch.init(testKey(0), 3, 0).bits);
    try testing.expectEqual(@as(u6, 2), Epoch.init(testKey(0), 4, 0).bits);
    try testing.expectEqual(@as(u6, 3), Epoch.init(testKey(0), 5, 0).bits);
    try testing.expectEqual(@as(u6, 53), Epoch.init(testKey(0), sampler.row_count_max, 0).bits);
    try testing.expectEqual(@as(u32, 24), Epoch.init(testKey(0), 16, 0).rounds);
    try testing.expectEqual(@as(u32, 8), Epoch.init(testKey(0), 17, 0).rounds);
    // A single row is always row 0, whatever the keys.
    try testing.expectEqual(@as(u64, 0), rowAt(testKey(9), 1, std.math.maxInt(u64)));
}

test "positions map to (epoch, index) and epochs differ" {
    const row_count = 1000;
    var rows: [2 * row_count]u64 = undefined;
    rowRange(testKey(5), row_count, 0, &rows);
    var same: usize = 0;
    for (rows[0..row_count], rows[row_count..]) |a, b| same += @intFromBool(a == b);
    // Two independent permutations of 1000 agree at about one index.
    try testing.expect(same < 20);
    for ([_]u64{ 0, 999, 1000, 1999 }) |position| {
        try testing.expectEqual(
            rows[position],
            Epoch.init(testKey(5), row_count, position / row_count).row(position % row_count),
        );
        try testing.expectEqual(rows[position], rowAt(testKey(5), row_count, position));
    }
    // The last positions of the stream are reachable.
    var last: [3]u64 = undefined;
    rowRange(testKey(5), 7, std.math.maxInt(u64) - 2, &last);
    try testing.expectEqual(rowAt(testKey(5), 7, std.math.maxInt(u64)), last[2]);
}

test "a large domain: a permutation far from the identity" {
    const row_count = 1 << 20;
    const seen = try testing.allocator.alloc(bool, row_count);
    defer testing.allocator.free(seen);
    @memset(seen, false);
    const epoch = Epoch.init(testKey(1), row_count, 0);
    var fixed: usize = 0;
    for (0..row_count) |index| {
        const row = epoch.row(index);
        try testing.expect(!seen[row]);
        seen[row] = true;
        fixed += @intFromBool(row == index);
    }
    // A uniform permutation has one fixed point on average (Poisson(1)).
    try testing.expect(fixed < 12);
}

test "the check values of docs/determinism.md" {
    var expected_key: [16]u8 = undefined;
    _ = try std.fmt.hexToBytes(&expected_key, "1cf4a759c06712b20b99550b7883286e");
    try testing.expectEqualSlices(u8, &expected_key, &testKey(42).bytes);
    const cases = [_]struct { n: u64, seed: u64, start: u64, rows: []const u64 }{
        .{ .n = 5, .seed = 42, .start = 0, .rows = &.{ 4, 1, 3, 0, 2, 3, 4, 1, 0, 2 } },
        .{
            .n = 10,
            .seed = 7,
            .start = 0,
            .rows = &.{ 3, 5, 1, 9, 8, 7, 0, 4, 2, 6, 4, 9, 3, 6, 5, 0, 7, 1, 8, 2 },
        },
        .{
            .n = 1000,
            .seed = 0,
            .start = 995,
            .rows = &.{ 703, 0, 600, 862, 296, 260, 68, 894, 205, 771 },
        },
        .{
            .n = (1 << 20) + 1,
            .seed = std.math.maxInt(u64),
            .start = 1 << 63,
            .rows = &.{ 304639, 250474, 878957, 965723, 946662, 1017725, 311956, 812489 },
        },
        .{ .n = 3, .seed = 1, .start = std.math.maxInt(u64) - 5, .rows = &.{ 2, 1, 2, 1, 0, 0 } },
    };
    for (cases) |case| {
        var rows: [20]u64 = undefined;
        rowRange(testKey(case.seed), case.n, case.start, rows[0..case.rows.len]);
        try testing.expectEqualSlices(u64, case.rows, rows[0..case.rows.len]);
    }
}
