//! Weighted sampling with replacement as one deterministic draw stream.
//!
//! The row drawn at stream position `p` is a pure function of (weights in row order,
//! seed, p) and costs O(1) after an O(n) table build, so resume, DataLoader workers and
//! distributed ranks can each jump to their own positions and agree exactly.
//! docs/determinism.md specifies every step so another language can reproduce the
//! stream bit for bit; tests/test_sampler_reference.py is such a reproduction.
//!
//!   key      = SHA-256("dataset_rt/sampler/v1" ++ u64le(seed))[0..16]
//!   a, b     = SipHash-2-4-128(key, u64le(p)) as two little-endian u64
//!   column   = (a * n) >> 64                      (128-bit product)
//!   row      = column if (b >> 11) < threshold[column] else alias[column]
//!
//! `threshold` and `alias` form a Vose alias table built in binary64 with a fixed order
//! of operations (see `AliasTable.build`).
const std = @import("std");
const assert = std.debug.assert;

const Sha256 = std.crypto.hash.sha2.Sha256;
const SipHash128 = std.crypto.auth.siphash.SipHash128(2, 4);

/// Domain separation for the key: changing the algorithm means changing this string.
pub const key_domain = "dataset_rt/sampler/v1";

/// Largest row count the table supports: up to it, `n` converts to binary64 exactly and
/// n equal weights (each 1.0 once normalized) sum to exactly n.
pub const row_count_max: u64 = 1 << 53;

/// Bits of `b` compared against a threshold, and the threshold of a certain column.
const threshold_bits = 53;
const threshold_one: u64 = 1 << threshold_bits;

/// The SipHash key of one seed's stream.
pub const Key = struct {
    bytes: [SipHash128.key_length]u8,

    /// Hashes the seed so that no two seeds give related keys, even neighbours such as
    /// 0 and 1 that differ in one bit.
    pub fn fromSeed(seed: u64) Key {
        return derive(key_domain, seed);
    }

    /// The key of `seed` for the algorithm named `domain`:
    /// SHA-256(domain ++ u64le(seed))[0..16].
    pub fn derive(comptime domain: []const u8, seed: u64) Key {
        var message: [domain.len + 8]u8 = undefined;
        @memcpy(message[0..domain.len], domain);
        std.mem.writeInt(u64, message[domain.len..][0..8], seed, .little);
        var digest: [Sha256.digest_length]u8 = undefined;
        Sha256.hash(&message, &digest, .{});
        return .{ .bytes = digest[0..SipHash128.key_length].* };
    }
};

/// The two uniform 64-bit words of stream position `position`.
pub const UniformPair = struct { a: u64, b: u64 };

/// SipHash-2-4-128 of the position as 8 little-endian bytes; `a` is output bytes 0..8
/// and `b` bytes 8..16, each read as a little-endian u64.
pub fn uniformPair(key: Key, position: u64) UniformPair {
    var message: [8]u8 = undefined;
    std.mem.writeInt(u64, &message, position, .little);
    return uniformPairOf(key, &message);
}

/// SipHash-2-4-128 of `message`, as `uniformPair` reads it.
pub fn uniformPairOf(key: Key, message: []const u8) UniformPair {
    var output: [SipHash128.mac_length]u8 = undefined;
    SipHash128.create(&output, message, &key.bytes);
    return .{
        .a = std.mem.readInt(u64, output[0..8], .little),
        .b = std.mem.readInt(u64, output[8..16], .little),
    };
}

/// Maps a uniform u64 onto 0..n-1: floor(a * n / 2^64).
fn columnOf(a: u64, row_count: u64) u64 {
    assert(row_count >= 1);
    const product = @as(u128, a) * @as(u128, row_count);
    return @intCast(product >> 64);
}

/// Row of the unshuffled cyclic cursor (shuffle=false): position mod n.
pub fn cyclicRow(row_count: u64, position: u64) u64 {
    assert(row_count >= 1);
    return position % row_count;
}

/// True when `build` accepts these weights: 1..row_count_max of them, each finite and > 0.
pub fn weightsValid(weights: []const f64) bool {
    if (weights.len == 0 or weights.len > row_count_max) return false;
    for (weights) |weight| {
        if (!(std.math.isFinite(weight) and weight > 0.0)) return false;
    }
    return true;
}

/// One column of an alias table. Its two words sit side by side, so a draw makes one
/// memory access into the table.
pub const Entry = struct {
    /// floor(prob * 2^53): the column keeps its own row when (b >> 11) is below it.
    threshold: u64,
    /// The row drawn when the column does not keep its own.
    alias: u64,
};

/// A Vose alias table over rows 0..row_count-1.
///
/// A uniform table (every weight equal) stores nothing: `entries` is empty and `draw`
/// returns the column itself, which is exactly what the materialized table of equal
/// weights holds (threshold 2^53, alias = itself) — see `build`.
pub const AliasTable = struct {
    row_count: u64,
    /// `row_count` entries, or none for a uniform table.
    entries: []Entry,

    /// The table of `row_count` equally weighted rows, without allocating.
    pub fn uniform(row_count: u64) AliasTable {
        assert(row_count >= 1 and row_count <= row_count_max);
        return .{ .row_count = row_count, .entries = &.{} };
    }

    /// Builds the table of `weights` (row order); the caller validated them (`weightsValid`).
    /// When every weight is the same value the result is `uniform`: the general
    /// construction yields the identity table exactly in that case (every normalized
    /// weight is 1.0, the total is exactly n, every scaled value exactly 1.0), so skipping
    /// it changes no draw and saves 16 bytes per row.
    pub fn build(allocator: std.mem.Allocator, weights: []const f64) error{OutOfMemory}!AliasTable {
        assert(weights.len >= 1);
        if (allEqual(weights)) return uniform(weights.len);
        return buildMaterialized(allocator, weights);
    }

    fn buildMaterialized(
        allocator: std.mem.Allocator,
        weights: []const f64,
    ) error{OutOfMemory}!AliasTable {
        assert(weightsValid(weights));
        const entries = try allocator.alloc(Entry, weights.len);
        errdefer allocator.free(entries);
        const scaled = try allocator.alloc(f64, weights.len);
        defer allocator.free(scaled);

        scaleWeights(weights, scaled);
        pairColumns(scaled, entries);
        for (entries, scaled) |*entry, probability| {
            entry.threshold = thresholdOf(probability);
        }
        return .{ .row_count = weights.len, .entries = entries };
    }

    pub fn deinit(table: *AliasTable, allocator: std.mem.Allocator) void {
        allocator.free(table.entries);
        table.* = undefined;
    }

    /// The row at stream position `position` of the stream keyed by `key`.
    pub fn draw(table: *const AliasTable, key: Key, position: u64) u64 {
        const pair = uniformPair(key, position);
        const column = columnOf(pair.a, table.row_count);
        if (table.entries.len == 0) return column;
        assert(table.entries.len == table.row_count);
        const entry = table.entries[column];
        const keep = (pair.b >> (64 - threshold_bits)) < entry.threshold;
        const row = if (keep) column else entry.alias;
        assert(row < table.row_count);
        return row;
    }

    /// Writes the rows of positions `start_position ..` into `rows`, one per slot.
    /// The caller ensures the last position, start_position + rows.len - 1, fits a u64.
    pub fn drawRange(table: *const AliasTable, key: Key, start_position: u64, rows: []u64) void {
        assert(rows.len == 0 or rows.len - 1 <= std.math.maxInt(u64) - start_position);
        for (rows, 0..) |*row, offset| {
            row.* = table.draw(key, start_position + offset);
        }
    }
};

/// The rows of positions `start ..` (one per slot of `rows`) drawn from
/// `weights` (validated by the caller, `weightsValid`) with `seed`'s key.
pub fn drawRows(
    allocator: std.mem.Allocator,
    weights: []const f64,
    seed: u64,
    start: u64,
    rows: []u64,
) error{OutOfMemory}!void {
    var table = try AliasTable.build(allocator, weights);
    defer table.deinit(allocator);
    table.drawRange(Key.fromSeed(seed), start, rows);
}

fn allEqual(weights: []const f64) bool {
    for (weights[1..]) |weight| {
        if (weight != weights[0]) return false;
    }
    return true;
}

/// scaled[i] = ((w[i] / max) * n) / total with total = sum of (w[j] / max), j = 0..n-1
/// left to right. Dividing by the largest weight first keeps every intermediate finite
/// (each normalized weight is in (0, 1], the total in [1, n]) whatever the weights' range.
fn scaleWeights(weights: []const f64, scaled: []f64) void {
    assert(weights.len == scaled.len);
    var weight_max: f64 = weights[0];
    for (weights) |weight| weight_max = @max(weight_max, weight);

    var total: f64 = 0.0;
    for (weights, scaled) |weight, *normalized| {
        normalized.* = weight / weight_max;
        total += normalized.*;
    }
    assert(total >= 1.0 and std.math.isFinite(total));

    const row_count: f64 = @floatFromInt(weights.len);
    for (scaled) |*value| {
        value.* = (value.* * row_count) / total;
        assert(value.* >= 0.0 and value.* <= row_count);
    }
}

/// Vose's pairing. On return `scaled[i]` holds prob[i] in [0, 1] and `entries[i].alias`
/// the alias of column i.
fn pairColumns(scaled: []f64, entries: []Entry) void {
    assert(entries.len == scaled.len);
    var small: RowStack = .{};
    var large: RowStack = .{};
    for (scaled, 0..) |value, row| {
        if (value < 1.0) small.push(entries, row) else large.push(entries, row);
    }
    // Each pairing settles one column for good, so there are fewer than n of them.
    var pairings: u64 = 0;
    while (!small.isEmpty() and !large.isEmpty()) : (pairings += 1) {
        assert(pairings < scaled.len);
        const small_row = small.pop(entries);
        const large_row = large.pop(entries);
        entries[small_row].alias = large_row; // prob[small_row] = scaled[small_row], kept
        // scaled[large_row] >= 1.0, so the rounded sum is >= 1.0 and the difference >= 0.0.
        scaled[large_row] = (scaled[large_row] + scaled[small_row]) - 1.0;
        assert(scaled[large_row] >= 0.0);
        if (scaled[large_row] < 1.0) small.push(entries, large_row) else large.push(
            entries,
            large_row,
        );
    }
    // Rounding can leave rows in either stack; each one is its own certain column.
    while (!small.isEmpty()) finishColumn(scaled, entries, small.pop(entries));
    while (!large.isEmpty()) finishColumn(scaled, entries, large.pop(entries));
}

fn finishColumn(scaled: []f64, entries: []Entry, row: u64) void {
    scaled[row] = 1.0;
    entries[row].alias = row;
}

/// A LIFO stack of rows threaded through their `alias` fields: a row waiting in a stack
/// has no alias yet, so its field holds the row below it. It needs no memory of its own.
const RowStack = struct {
    top: u64 = bottom,

    /// Below the last row; never a row, since row counts are at most 2^53.
    const bottom: u64 = std.math.maxInt(u64);

    fn isEmpty(stack: RowStack) bool {
        return stack.top == bottom;
    }

    fn push(stack: *RowStack, entries: []Entry, row: u64) void {
        assert(row < entries.len);
        entries[row].alias = stack.top;
        stack.top = row;
    }

    fn pop(stack: *RowStack, entries: []Entry) u64 {
        assert(!stack.isEmpty());
        const row = stack.top;
        stack.top = entries[row].alias;
        return row;
    }
};

/// floor(probability * 2^53), clamped to [0, 2^53]. The product is exact (a power-of-two
/// scaling of a value in [0, 1]); only the conversion to an integer truncates.
fn thresholdOf(probability: f64) u64 {
    assert(probability >= 0.0 and probability <= 1.0);
    const scaled = probability * @as(f64, @floatFromInt(threshold_one));
    const clamped = std.math.clamp(scaled, 0.0, @as(f64, @floatFromInt(threshold_one)));
    return @intFromFloat(@floor(clamped));
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "SipHash-2-4-128 matches the reference vector for an 8-byte message" {
    // veorq/SipHash vectors.h, vectors_sip128[8]: key 00..0f, message 00..07.
    const key: Key = .{ .bytes = .{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 } };
    const expected = [16]u8{
        0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61,
        0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4,
    };
    const pair = uniformPair(key, 0x0706050403020100);
    try testing.expectEqual(std.mem.readInt(u64, expected[0..8], .little), pair.a);
    try testing.expectEqual(std.mem.readInt(u64, expected[8..16], .little), pair.b);
}

test "the key is the first half of SHA-256 of the domain string and the seed" {
    // Python: hashlib.sha256(b"dataset_rt/sampler/v1" + (42).to_bytes(8,
    // "little")).hexdigest()[:32]
    var expected: [16]u8 = undefined;
    _ = try std.fmt.hexToBytes(&expected, "3ca3de6316f8a2646ead162f5d2896c8");
    try testing.expectEqualSlices(u8, &expected, &Key.fromSeed(42).bytes);
}

test "columnOf maps the extremes of a onto the first and last column" {
    try testing.expectEqual(@as(u64, 0), columnOf(0, 7));
    try testing.expectEqual(@as(u64, 6), columnOf(std.math.maxInt(u64), 7));
    try testing.expectEqual(@as(u64, 0), columnOf(std.math.maxInt(u64), 1));
    try testing.expectEqual(@as(u64, 3), columnOf(1 << 63, 7));
}

test "cyclicRow walks the rows in table order" {
    const expected = [_]u64{ 0, 1, 2, 3, 4, 0, 1 };
    for (expected, 0..) |row, position| try testing.expectEqual(row, cyclicRow(5, position));
    try testing.expectEqual(@as(u64, 0), cyclicRow(1, std.math.maxInt(u64)));
}

test "weightsValid rejects empty, zero, negative and non-finite weights" {
    try testing.expect(weightsValid(&.{ 1.0, 1e-300, 1e300 }));
    try testing.expect(!weightsValid(&.{}));
    try testing.expect(!weightsValid(&.{ 1.0, 0.0 }));
    try testing.expect(!weightsValid(&.{ 1.0, -1.0 }));
    try testing.expect(!weightsValid(&.{ 1.0, std.math.inf(f64) }));
    try testing.expect(!weightsValid(&.{ 1.0, std.math.nan(f64) }));
}

test "the same inputs give the same draws, and windows of positions agree with one range" {
    const weights = [_]f64{ 1, 2, 3, 4, 0.5, 10 };
    var first = try AliasTable.build(testing.allocator, &weights);
    defer first.deinit(testing.allocator);
    var second = try AliasTable.build(testing.allocator, &weights);
    defer second.deinit(testing.allocator);
    try testing.expectEqualSlices(Entry, first.entries, second.entries);

    const key = Key.fromSeed(7);
    var whole: [100]u64 = undefined;
    first.drawRange(key, 1000, &whole);
    var windows: [100]u64 = undefined;
    var start: usize = 0;
    for ([_]usize{ 1, 9, 30, 0, 60 }) |length| {
        second.drawRange(key, 1000 + start, windows[start..][0..length]);
        start += length;
    }
    try testing.expectEqual(whole.len, start);
    try testing.expectEqualSlices(u64, &whole, &windows);
    for (whole, 0..) |row, offset| try testing.expectEqual(row, first.draw(key, 1000 + offset));

    // The last positions of the stream are reachable too.
    var last: [4]u64 = undefined;
    first.drawRange(key, std.math.maxInt(u64) - 3, &last);
    try testing.expectEqual(first.draw(key, std.math.maxInt(u64)), last[3]);
}

test "the draws of the worked example in docs/determinism.md" {
    var table = try AliasTable.build(testing.allocator, &.{ 1, 2, 3 });
    defer table.deinit(testing.allocator);
    try testing.expectEqualSlices(Entry, &.{
        .{ .threshold = 1 << 52, .alias = 2 },
        .{ .threshold = 1 << 53, .alias = 1 },
        .{ .threshold = 1 << 53, .alias = 2 },
    }, table.entries);
    var rows: [10]u64 = undefined;
    table.drawRange(Key.fromSeed(42), 0, &rows);
    try testing.expectEqualSlices(u64, &.{ 2, 1, 0, 1, 2, 1, 2, 2, 1, 2 }, &rows);
}

test "a row that rounding leaves in a stack becomes a certain column" {
    // Row 0 ends in `small` with scaled 0.9999999999999993 (0.3 + 0.1 + 0.1 is not 0.5).
    var small_left = try AliasTable.build(testing.allocator, &.{ 0.3, 0.1, 0.1 });
    defer small_left.deinit(testing.allocator);
    try testing.expectEqualSlices(Entry, &.{
        .{ .threshold = 1 << 53, .alias = 0 },
        .{ .threshold = 5404319552844594, .alias = 0 },
        .{ .threshold = 5404319552844594, .alias = 0 },
    }, small_left.entries);
    // Row 3 ends in `small` with scaled 0.9999999999999996.
    var large_drained = try AliasTable.build(testing.allocator, &.{ 1.1, 0.7, 0.9, 3.0 });
    defer large_drained.deinit(testing.allocator);
    try testing.expectEqualSlices(Entry, &.{
        .{ .threshold = 6952925740501819, .alias = 3 },
        .{ .threshold = 4424589107592066, .alias = 3 },
        .{ .threshold = 5688757424046942, .alias = 3 },
        .{ .threshold = 1 << 53, .alias = 3 },
    }, large_drained.entries);
}

test "different seeds give different streams" {
    const weights = [_]f64{ 1, 2, 3, 4, 0.5, 10, 7, 7, 1, 3 };
    var table = try AliasTable.build(testing.allocator, &weights);
    defer table.deinit(testing.allocator);
    for ([_][2]u64{ .{ 0, 1 }, .{ 1, 2 }, .{ 42, 43 }, .{ 0, 1 << 63 } }) |seeds| {
        try testing.expect(
            !std.mem.eql(u8, &Key.fromSeed(seeds[0]).bytes, &Key.fromSeed(seeds[1]).bytes),
        );
        var rows: [2][64]u64 = undefined;
        for (seeds, &rows) |seed, *stream| table.drawRange(Key.fromSeed(seed), 0, stream);
        var same: usize = 0;
        for (rows[0], rows[1]) |x, y| same += @intFromBool(x == y);
        // P(row equal) is about 0.17 per position; 40 of 64 would be a 1-in-10^17 event.
        try testing.expect(same < 40);
    }
}

/// Chi-square statistic of `draw_count` draws of `table` against `weights`.
fn chiSquare(
    table: *const AliasTable,
    weights: []const f64,
    seed: u64,
    draw_count: u64,
    counts: []u64,
) f64 {
    assert(counts.len == weights.len);
    @memset(counts, 0);
    const key = Key.fromSeed(seed);
    for (0..draw_count) |position| counts[table.draw(key, position)] += 1;
    // Normalized by the largest weight so that the total of huge weights stays finite.
    const weight_max = std.mem.max(f64, weights);
    var total: f64 = 0.0;
    for (weights) |weight| total += weight / weight_max;
    var statistic: f64 = 0.0;
    for (weights, counts) |weight, count| {
        const expected = @as(f64, @floatFromInt(draw_count)) * (weight / weight_max / total);
        // A row whose expected count is negligible must not be drawn at all.
        if (expected < 1e-6) {
            assert(count == 0);
            continue;
        }
        const difference = @as(f64, @floatFromInt(count)) - expected;
        statistic += difference * difference / expected;
    }
    return statistic;
}

test "200k draws follow the weights (chi-square, 5 degrees of freedom)" {
    const weights = [_]f64{ 1, 2, 3, 4, 0.5, 10 };
    var table = try AliasTable.build(testing.allocator, &weights);
    defer table.deinit(testing.allocator);
    var counts: [weights.len]u64 = undefined;
    for ([_]u64{ 0, 42, 12345 }) |seed| {
        const statistic = chiSquare(&table, &weights, seed, 200_000, &counts);
        // 0.999 quantile of chi-square with 5 degrees of freedom.
        try testing.expect(statistic < 20.515);
    }
}

test "extreme weights give valid rows and the right frequencies" {
    // A weight of 1e-300 next to 1e300 is never drawn; the huge ones split the draws.
    const weights = [_]f64{ 1e-300, 1e300, 1e-300, 3e300, 1e300, 1e-300 };
    var table = try AliasTable.build(testing.allocator, &weights);
    defer table.deinit(testing.allocator);
    var counts: [weights.len]u64 = undefined;
    const statistic = chiSquare(&table, &weights, 3, 100_000, &counts);
    try testing.expectEqual(@as(u64, 0), counts[0] + counts[2] + counts[5]);
    // 0.999 quantile of chi-square with 2 degrees of freedom (three rows can be drawn).
    try testing.expect(statistic < 13.816);

    // Weights whose plain sum overflows binary64.
    const huge = [_]f64{
        std.math.floatMax(f64),
        std.math.floatMax(f64) / 2.0,
        std.math.floatMax(f64),
    };
    var huge_table = try AliasTable.build(testing.allocator, &huge);
    defer huge_table.deinit(testing.allocator);
    var huge_counts: [huge.len]u64 = undefined;
    try testing.expect(chiSquare(&huge_table, &huge, 4, 50_000, &huge_counts) < 13.816);
    try testing.expect(huge_counts[1] > 0);

    // Subnormal weights only.
    const tiny = [_]f64{ 5e-324, 1e-323, 2.5e-310 };
    var tiny_table = try AliasTable.build(testing.allocator, &tiny);
    defer tiny_table.deinit(testing.allocator);
    var tiny_counts: [tiny.len]u64 = undefined;
    const tiny_key = Key.fromSeed(5);
    for (&tiny_counts) |*count| count.* = 0;
    for (0..10_000) |position| tiny_counts[tiny_table.draw(tiny_key, position)] += 1;
    try testing.expect(tiny_counts[2] > 9_990);
}

test "a single row is always drawn" {
    var table = try AliasTable.build(testing.allocator, &.{3.5});
    defer table.deinit(testing.allocator);
    const key = Key.fromSeed(9);
    for ([_]u64{ 0, 1, 1 << 63, std.math.maxInt(u64) }) |position| {
        try testing.expectEqual(@as(u64, 0), table.draw(key, position));
    }
}

test "100000 random weights: valid rows and matching frequencies" {
    const row_count = 100_000;
    const weights = try testing.allocator.alloc(f64, row_count);
    defer testing.allocator.free(weights);
    var prng: std.Random.DefaultPrng = .init(2024);
    const random = prng.random();
    // Ten groups of rows with weights spanning 1e-3..1e3; compare the groups' shares.
    var group_weights: [10]f64 = @splat(0.0);
    for (weights, 0..) |*weight, index| {
        weight.* = std.math.pow(f64, 10.0, random.float(f64) * 6.0 - 3.0);
        group_weights[index % 10] += weight.*;
    }
    var table = try AliasTable.build(testing.allocator, weights);
    defer table.deinit(testing.allocator);

    var group_counts: [10]u64 = @splat(0);
    const key = Key.fromSeed(11);
    const draw_count = 200_000;
    for (0..draw_count) |position| {
        const row = table.draw(key, position);
        try testing.expect(row < row_count);
        group_counts[row % 10] += 1;
    }
    var total: f64 = 0.0;
    for (group_weights) |weight| total += weight;
    var statistic: f64 = 0.0;
    for (group_weights, group_counts) |weight, count| {
        const expected = draw_count * weight / total;
        const difference = @as(f64, @floatFromInt(count)) - expected;
        statistic += difference * difference / expected;
    }
    // 0.999 quantile of chi-square with 9 degrees of freedom.
    try testing.expect(statistic < 27.877);

    // The table itself preserves every row's probability up to rounding:
    // P(row) = sum over columns of their share to it, each column worth 1/n.
    const mass = try testing.allocator.alloc(f64, row_count);
    defer testing.allocator.free(mass);
    @memset(mass, 0.0);
    for (table.entries, 0..) |entry, column| {
        const threshold: f64 = @floatFromInt(entry.threshold);
        const keep = threshold / @as(f64, @floatFromInt(threshold_one));
        mass[column] += keep;
        mass[entry.alias] += 1.0 - keep;
    }
    // Rows differ from their exact share by a few ulps, except the row left in a stack at
    // the end, which absorbs the rounding drift of all n pairings (about 1e-9 here).
    var weight_total: f64 = 0.0;
    for (weights) |weight| weight_total += weight;
    for (weights, mass) |weight, row_mass| {
        const expected = weight / weight_total * row_count;
        try testing.expectApproxEqRel(expected, row_mass, 1e-7);
    }
}

test "equal weights give the identity table, materialized or not" {
    const key = Key.fromSeed(1);
    for ([_]u64{ 1, 2, 3, 7, 10, 1000, 4097 }) |row_count| {
        for ([_]f64{ 1.0, 0.1, 1.0 / 3.0, 7e-300, 1e300 }) |value| {
            const weights = try testing.allocator.alloc(f64, row_count);
            defer testing.allocator.free(weights);
            @memset(weights, value);

            var table = try AliasTable.buildMaterialized(testing.allocator, weights);
            defer table.deinit(testing.allocator);
            for (table.entries, 0..) |entry, index| {
                try testing.expectEqual(Entry{ .threshold = threshold_one, .alias = index }, entry);
            }
            var built = try AliasTable.build(testing.allocator, weights);
            defer built.deinit(testing.allocator);
            try testing.expectEqual(@as(usize, 0), built.entries.len);

            const uniform_table = AliasTable.uniform(row_count);
            for (0..200) |position| {
                const row = uniform_table.draw(key, position);
                try testing.expectEqual(columnOf(uniformPair(key, position).a, row_count), row);
                try testing.expectEqual(row, table.draw(key, position));
            }
        }
    }
}

test "build cleans up when an allocation fails" {
    const weights = [_]f64{ 1, 2, 3, 4 };
    try testing.checkAllAllocationFailures(testing.allocator, buildAndFree, .{&weights});
}

fn buildAndFree(allocator: std.mem.Allocator, weights: []const f64) !void {
    var table = try AliasTable.build(allocator, weights);
    table.deinit(allocator);
}
