//! Mixing caches without replacement: each epoch holds an exact count of samples
//! from every cache, in one keyed permutation, computed per position.
//!
//! Cache `c` with `n_c` active rows contributes `k_c` samples an epoch (its
//! count: from `repeat`, `choose` or `proportion`, `counts`). The epoch of
//! length `L = sum k_c` lays these out as consecutive blocks of slots, cache `c`
//! owning `[S_c, S_c + k_c)`. Position `p` lies in mix epoch `e = p / L`; its
//! slot is `s = order_e(p mod L)`, a permutation of `[0, L)` (permutation.zig
//! under this algorithm's key). Slot `s` of cache `c` is `j = s - S_c`: with
//! `q = k_c / n_c` whole passes, `j < q n_c` is the cache's row `j mod n_c`, and
//! the rest `r = j - q n_c < k_c mod n_c` is row `subset_{e,c}(r)`, a keyed
//! permutation of `[0, n_c)` of its own, so the partial pass takes distinct rows
//! afresh each epoch. The epoch is thus a uniform permutation of the multiset,
//! and nothing per row or per position is stored. docs/determinism.md
//! ("Mixing") specifies every step; tests/core/test_mix_reference.py
//! reproduces it in Python.
const std = @import("std");
const assert = std.debug.assert;
const sampler = @import("sampler.zig");
const permutation = @import("permutation.zig");
const sha256 = @import("../codec/sha256.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

/// Domain separation for the order key, and the start of the algorithm's name in
/// resume states.
pub const key_domain = "dataset_rt/mix/v1";
/// Domain of the key from which each cache's subset key is derived.
pub const subset_domain = "dataset_rt/mix/v1/subset";

/// How a cache's count is given.
pub const Form = enum(u32) { repeat = 1, choose = 2, proportion = 3 };

/// One cache's part of a mix, as the user gave it.
pub const Entry = struct {
    /// The cache's position in the dataset's list of caches.
    cache: u32,
    form: Form,
    /// `repeat`'s or `proportion`'s value.
    value: f64 = 0,
    /// `choose`'s count.
    count: u64 = 0,
};

/// Proportions must sum to 1 within this.
pub const proportion_sum_tolerance = 1e-9;
/// The algorithm name in resume states: the domain, '#' and 16 hex digits of the digest.
pub const algorithm_name_length = key_domain.len + 1 + 16;

/// Checks `entries` (each cache at most once, values in range, one family of
/// forms) against `row_counts` (active rows per cache) and computes each cache's
/// count into `counts`; returns the epoch length. `epoch_len` is the explicit
/// one (`set_epoch_len`), required by proportions and refused otherwise.
pub fn computeCounts(
    allocator: std.mem.Allocator,
    entries: []const Entry,
    row_counts: []const u64,
    epoch_len: ?u64,
    counts: []u64,
    diagnostic: *Diagnostic,
) error{ InvalidArgument, OutOfMemory }!u64 {
    assert(counts.len == row_counts.len and entries.len >= 1);
    try checkEntries(entries, row_counts.len, diagnostic);
    const proportions = entries[0].form == .proportion;
    if (proportions) {
        const total = epoch_len orelse {
            diagnostic.set("a mix of proportions needs an epoch length: call set_epoch_len(E) " ++
                "before set_mix", .{});
            return error.InvalidArgument;
        };
        try proportionCounts(allocator, entries, total, counts, diagnostic);
    } else {
        if (epoch_len) |explicit| {
            diagnostic.set("set_epoch_len({d}) and a mix of repeat/choose both fix the epoch " ++
                "length: use proportions with set_epoch_len, or drop set_epoch_len", .{explicit});
            return error.InvalidArgument;
        }
        try countedCounts(entries, row_counts, counts, diagnostic);
    }
    const total = try checkCounts(counts, row_counts, diagnostic);
    assert(!proportions or total == epoch_len.?);
    return total;
}

fn checkEntries(
    entries: []const Entry,
    cache_count: usize,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!void {
    for (entries, 0..) |entry, index| {
        if (entry.cache >= cache_count) {
            diagnostic.set("mix names the cache at paths[{d}], the dataset has {d} caches", .{
                entry.cache,
                cache_count,
            });
            return error.InvalidArgument;
        }
        for (entries[0..index]) |earlier| if (earlier.cache == entry.cache) {
            diagnostic.set("mix names the cache at paths[{d}] twice", .{entry.cache});
            return error.InvalidArgument;
        };
        if ((entry.form == .proportion) != (entries[0].form == .proportion)) {
            diagnostic.set("mix combines proportions with repeat/choose: give every cache a " ++
                "proportion, or none", .{});
            return error.InvalidArgument;
        }
        try checkValue(entry, diagnostic);
    }
}

fn checkValue(entry: Entry, diagnostic: *Diagnostic) error{InvalidArgument}!void {
    const valid = switch (entry.form) {
        .repeat => std.math.isFinite(entry.value) and entry.value > 0,
        .choose => entry.count >= 1,
        .proportion => entry.value > 0 and entry.value <= 1,
    };
    if (valid) return;
    switch (entry.form) {
        .repeat => diagnostic.set("paths[{d}]: repeat must be finite and > 0, got {d}", .{
            entry.cache,
            entry.value,
        }),
        .choose => diagnostic.set("paths[{d}]: choose must be at least 1, got 0", .{entry.cache}),
        .proportion => diagnostic.set("paths[{d}]: proportion must be in (0, 1], got {d}", .{
            entry.cache,
            entry.value,
        }),
    }
    return error.InvalidArgument;
}

/// `repeat=r`: k = floor(r * n + 1/2), each operation in binary64 (round to
/// nearest even); `choose=k`: k; a cache not listed: repeat 1, k = n.
fn countedCounts(
    entries: []const Entry,
    row_counts: []const u64,
    counts: []u64,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!void {
    @memcpy(counts, row_counts);
    for (entries) |entry| {
        const n = row_counts[entry.cache];
        counts[entry.cache] = switch (entry.form) {
            .choose => entry.count,
            .repeat => try repeatCount(entry, n, diagnostic),
            .proportion => unreachable,
        };
    }
}

pub fn repeatCount(entry: Entry, n: u64, diagnostic: *Diagnostic) error{InvalidArgument}!u64 {
    assert(entry.form == .repeat and n <= sampler.row_count_max);
    const count = @floor(entry.value * @as(f64, @floatFromInt(n)) + 0.5);
    if (!(count <= @as(f64, @floatFromInt(sampler.row_count_max)))) {
        diagnostic.set("paths[{d}]: repeat {d} of {d} rows passes 2^53 samples", .{
            entry.cache,
            entry.value,
            n,
        });
        return error.InvalidArgument;
    }
    return @intFromFloat(count);
}

/// floor(p_c * E) each (binary64 product), then the E - sum leftover units one
/// each to the caches with the largest fractional parts p_c * E - floor(p_c * E),
/// ties to the lower cache.
fn proportionCounts(
    allocator: std.mem.Allocator,
    entries: []const Entry,
    epoch_len: u64,
    counts: []u64,
    diagnostic: *Diagnostic,
) error{ InvalidArgument, OutOfMemory }!void {
    if (entries.len != counts.len) {
        diagnostic.set("a mix of proportions must give every cache one: {d} of {d} have one", .{
            entries.len,
            counts.len,
        });
        return error.InvalidArgument;
    }
    const fractions = try allocator.alloc(f64, counts.len);
    defer allocator.free(fractions);
    var sum: f64 = 0;
    var floor_sum: u64 = 0;
    const length: f64 = @floatFromInt(epoch_len);
    for (0..counts.len) |cache| {
        const value = proportionOf(entries, cache);
        sum += value;
        const exact = value * length;
        const whole = @floor(exact);
        counts[cache] = @intFromFloat(whole);
        fractions[cache] = exact - whole;
        floor_sum +|= counts[cache];
    }
    if (@abs(sum - 1) > proportion_sum_tolerance) {
        diagnostic.set("mix proportions sum to {d}, they must sum to 1", .{sum});
        return error.InvalidArgument;
    }
    if (floor_sum > epoch_len or epoch_len - floor_sum > counts.len) {
        diagnostic.set("mix proportions (sum {d}) are too far from 1 for epoch length {d}: " ++
            "their counts sum to {d}", .{ sum, epoch_len, floor_sum });
        return error.InvalidArgument;
    }
    try giveLeftover(allocator, fractions, epoch_len - floor_sum, counts);
}

fn proportionOf(entries: []const Entry, cache: usize) f64 {
    for (entries) |entry| if (entry.cache == cache) return entry.value;
    unreachable; // every cache has an entry (checked by count and uniqueness)
}

fn giveLeftover(
    allocator: std.mem.Allocator,
    fractions: []const f64,
    leftover: u64,
    counts: []u64,
) error{OutOfMemory}!void {
    assert(leftover <= counts.len);
    const order = try allocator.alloc(u32, counts.len);
    defer allocator.free(order);
    for (order, 0..) |*cache, index| cache.* = @intCast(index);
    const Context = struct {
        fractions: []const f64,
        fn before(context: @This(), a: u32, b: u32) bool {
            const fa = context.fractions[a];
            const fb = context.fractions[b];
            return fa > fb or (fa == fb and a < b);
        }
    };
    std.sort.pdq(u32, order, Context{ .fractions = fractions }, Context.before);
    for (order[0..@intCast(leftover)]) |cache| counts[cache] += 1;
}

/// Refuses a count on a cache without rows and an epoch outside 1 ..= 2^53.
fn checkCounts(
    counts: []const u64,
    row_counts: []const u64,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!u64 {
    var total: u64 = 0;
    for (counts, row_counts, 0..) |count, rows, cache| {
        if (count > 0 and rows == 0) {
            diagnostic.set("the cache at paths[{d}] has no active rows but its mix count is {d}", .{
                cache,
                count,
            });
            return error.InvalidArgument;
        }
        total +|= count;
    }
    if (total < 1 or total > sampler.row_count_max) {
        diagnostic.set("a mix epoch must hold 1 to 2^53 samples, this one {d}", .{total});
        return error.InvalidArgument;
    }
    return total;
}

/// A mix resolved against one table: what maps positions to the table's rows.
pub const Layout = struct {
    entries: []Entry,
    /// Per cache: its count k_c, its active rows n_c, and the end of its block
    /// of slots (S_c + k_c).
    counts: []u64,
    row_counts: []u64,
    slot_ends: []u64,
    /// Per cache: where its rows begin in the table's rows grouped by cache.
    first_rows: []u64,
    /// The table's rows grouped by cache, stable; null when the table already
    /// holds each cache's rows as one run (a grouped row is then a table row).
    grouped_rows: ?[]u64,
    order_key: sampler.Key,
    subset_keys: []sampler.Key,
    epoch_len: u64,
    algorithm_buffer: [algorithm_name_length]u8,

    /// Builds the layout of `entries` (copied) over a table grouped as `grouping`
    /// (whose slices it owns on success).
    pub fn create(
        allocator: std.mem.Allocator,
        entries: []const Entry,
        epoch_len: ?u64,
        seed: u64,
        grouping: Grouping,
        diagnostic: *Diagnostic,
    ) error{ InvalidArgument, OutOfMemory }!*Layout {
        const cache_count = grouping.row_counts.len;
        assert(grouping.first_rows.len == cache_count);
        const counts = try allocator.alloc(u64, cache_count);
        errdefer allocator.free(counts);
        const rows = grouping.row_counts;
        _ = try computeCounts(allocator, entries, rows, epoch_len, counts, diagnostic);
        return assemble(allocator, entries, counts, seed, grouping);
    }

    /// A layout of checked `counts` (owned, like the grouping's slices, on success).
    pub fn assemble(
        allocator: std.mem.Allocator,
        entries: []const Entry,
        counts: []u64,
        seed: u64,
        grouping: Grouping,
    ) error{OutOfMemory}!*Layout {
        assert(counts.len == grouping.row_counts.len and counts.len >= 1);
        const layout = try allocator.create(Layout);
        errdefer allocator.destroy(layout);
        const slot_ends = try allocator.alloc(u64, counts.len);
        errdefer allocator.free(slot_ends);
        var end: u64 = 0;
        for (slot_ends, counts, grouping.row_counts) |*slot_end, count, rows| {
            assert(count == 0 or rows >= 1);
            end += count;
            slot_end.* = end;
        }
        assert(end >= 1 and end <= sampler.row_count_max);
        const subset_keys = try allocator.alloc(sampler.Key, counts.len);
        errdefer allocator.free(subset_keys);
        const subset_root = sampler.Key.derive(subset_domain, seed);
        for (subset_keys, 0..) |*key, cache| key.* = subsetKey(subset_root, cache);
        layout.* = .{
            .entries = try allocator.dupe(Entry, entries),
            .counts = counts,
            .row_counts = grouping.row_counts,
            .slot_ends = slot_ends,
            .first_rows = grouping.first_rows,
            .grouped_rows = grouping.grouped_rows,
            .order_key = sampler.Key.derive(key_domain, seed),
            .subset_keys = subset_keys,
            .epoch_len = end,
            .algorithm_buffer = algorithmName(counts),
        };
        return layout;
    }

    pub fn destroy(layout: *Layout, allocator: std.mem.Allocator) void {
        allocator.free(layout.entries);
        allocator.free(layout.counts);
        allocator.free(layout.row_counts);
        allocator.free(layout.slot_ends);
        allocator.free(layout.first_rows);
        if (layout.grouped_rows) |rows| allocator.free(rows);
        allocator.free(layout.subset_keys);
        allocator.destroy(layout);
    }

    pub fn algorithm(layout: *const Layout) []const u8 {
        return &layout.algorithm_buffer;
    }

    pub fn proportions(layout: *const Layout) bool {
        return layout.entries.len > 0 and layout.entries[0].form == .proportion;
    }

    /// The cache owning slot `slot` (< epoch_len): the first whose block ends after it.
    fn cacheOf(layout: *const Layout, slot: u64) usize {
        assert(slot < layout.epoch_len);
        var low: usize = 0;
        var high: usize = layout.slot_ends.len - 1;
        while (low < high) {
            const middle = low + (high - low) / 2;
            if (layout.slot_ends[middle] > slot) high = middle else low = middle + 1;
        }
        return low;
    }

    fn tableRow(layout: *const Layout, cache: usize, row_in_cache: u64) u64 {
        assert(row_in_cache < layout.row_counts[cache]);
        const grouped = layout.first_rows[cache] + row_in_cache;
        const rows = layout.grouped_rows orelse return grouped;
        return rows[@intCast(grouped)];
    }
};

/// Each cache's active rows and where they lie in the table (see `Layout`); the
/// slices are owned by whoever holds the grouping.
pub const Grouping = struct {
    row_counts: []u64,
    first_rows: []u64,
    grouped_rows: ?[]u64,

    pub fn deinit(grouping: Grouping, allocator: std.mem.Allocator) void {
        allocator.free(grouping.row_counts);
        allocator.free(grouping.first_rows);
        if (grouping.grouped_rows) |rows| allocator.free(rows);
    }
};

/// The subset key of cache `cache`: SipHash-2-4-128 under the subset root key of
/// u64le(cache), its 16 output bytes.
fn subsetKey(root: sampler.Key, cache: usize) sampler.Key {
    var message: [8]u8 = undefined;
    std.mem.writeInt(u64, &message, cache, .little);
    const pair = sampler.uniformPairOf(root, &message);
    var key: sampler.Key = undefined;
    std.mem.writeInt(u64, key.bytes[0..8], pair.a, .little);
    std.mem.writeInt(u64, key.bytes[8..16], pair.b, .little);
    return key;
}

/// `dataset_rt/mix/v1#` and the first 8 bytes in hex of SHA-256(key_domain ++
/// u64le(cache count) ++ u64le(k_c) for each cache): states of equal counts match.
fn algorithmName(counts: []const u64) [algorithm_name_length]u8 {
    var hasher: sha256.Hasher = .init();
    hasher.update(key_domain);
    var word: [8]u8 = undefined;
    std.mem.writeInt(u64, &word, counts.len, .little);
    hasher.update(&word);
    for (counts) |count| {
        std.mem.writeInt(u64, &word, count, .little);
        hasher.update(&word);
    }
    const hex = sha256.hexDigest(hasher.final());
    var name: [algorithm_name_length]u8 = undefined;
    @memcpy(name[0..key_domain.len], key_domain);
    name[key_domain.len] = '#';
    @memcpy(name[key_domain.len + 1 ..], hex[0..16]);
    return name;
}

/// The grouped row (cache, row within the cache) of consecutive positions,
/// keeping the current epoch's order keys and a few subsets' keys.
pub const Cursor = struct {
    layout: *const Layout,
    order: ?permutation.Epoch = null,
    order_number: u64 = 0,
    subsets: [subset_slots]?Subset = @splat(null),

    const subset_slots = 8;
    const Subset = struct { cache: usize, number: u64, epoch: permutation.Epoch };

    pub fn init(layout: *const Layout) Cursor {
        return .{ .layout = layout };
    }

    pub const Sample = struct { cache: usize, row: u64 };

    /// The cache and row within it of stream position `position`.
    pub fn sample(cursor: *Cursor, position: u64) Sample {
        const layout = cursor.layout;
        const number = position / layout.epoch_len;
        if (cursor.order == null or cursor.order_number != number) {
            cursor.order = permutation.Epoch.init(layout.order_key, layout.epoch_len, number);
            cursor.order_number = number;
        }
        const slot = cursor.order.?.row(position % layout.epoch_len);
        const cache = layout.cacheOf(slot);
        const count = layout.counts[cache];
        const rows = layout.row_counts[cache];
        const index = slot - (layout.slot_ends[cache] - count);
        assert(index < count and rows >= 1);
        const whole = count / rows * rows;
        const row = if (index < whole)
            index % rows
        else
            cursor.subset(cache, number).row(index - whole);
        assert(row < rows);
        return .{ .cache = cache, .row = row };
    }

    /// The table row of stream position `position`.
    pub fn tableRow(cursor: *Cursor, position: u64) u64 {
        const at = cursor.sample(position);
        return cursor.layout.tableRow(at.cache, at.row);
    }

    fn subset(cursor: *Cursor, cache: usize, number: u64) *const permutation.Epoch {
        const slot = &cursor.subsets[cache % subset_slots];
        if (slot.*) |*held| {
            if (held.cache == cache and held.number == number) return &held.epoch;
        }
        const layout = cursor.layout;
        slot.* = .{
            .cache = cache,
            .number = number,
            .epoch = .init(layout.subset_keys[cache], layout.row_counts[cache], number),
        };
        return &slot.*.?.epoch;
    }
};

/// The grouping of a table holding each cache's rows as one run, in cache order
/// (the default table): first rows are the running sums of `row_counts` (copied).
pub fn contiguousGrouping(
    allocator: std.mem.Allocator,
    row_counts: []const u64,
) error{OutOfMemory}!Grouping {
    const counts = try allocator.dupe(u64, row_counts);
    errdefer allocator.free(counts);
    const first_rows = try allocator.alloc(u64, row_counts.len);
    var start: u64 = 0;
    for (first_rows, row_counts) |*first, count| {
        first.* = start;
        start += count;
    }
    return .{ .row_counts = counts, .first_rows = first_rows, .grouped_rows = null };
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn expectCounts(
    entries: []const Entry,
    row_counts: []const u64,
    epoch_len: ?u64,
    expected: []const u64,
) !void {
    var counts: [8]u64 = undefined;
    var diagnostic: Diagnostic = .{};
    const total = try computeCounts(
        testing.allocator,
        entries,
        row_counts,
        epoch_len,
        counts[0..row_counts.len],
        &diagnostic,
    );
    try testing.expectEqualSlices(u64, expected, counts[0..row_counts.len]);
    var sum: u64 = 0;
    for (expected) |count| sum += count;
    try testing.expectEqual(sum, total);
}

test "repeat rounds half up, choose is exact and an unlisted cache repeats once" {
    try expectCounts(&.{
        .{ .cache = 0, .form = .repeat, .value = 0.5 },
        .{ .cache = 1, .form = .repeat, .value = 2.0 },
        .{ .cache = 2, .form = .choose, .count = 75 },
    }, &.{ 3, 4, 10, 6 }, null, &.{ 2, 8, 75, 6 });
    // 0.25 * 6 + 0.5 = 2.0 exactly; 0.1 * 10 = 1.0; 1.0 + 0.5 = 1.5 -> 1.
    try expectCounts(&.{
        .{ .cache = 0, .form = .repeat, .value = 0.25 },
        .{ .cache = 1, .form = .repeat, .value = 0.1 },
    }, &.{ 6, 10 }, null, &.{ 2, 1 });
}

test "proportions floor each count and give the leftover to the largest fractions" {
    const thirds = [_]Entry{
        .{ .cache = 0, .form = .proportion, .value = 0.5 },
        .{ .cache = 1, .form = .proportion, .value = 0.25 },
        .{ .cache = 2, .form = .proportion, .value = 0.25 },
    };
    // 5, 2.5, 2.5: one unit left, the tie goes to the lower cache.
    try expectCounts(&thirds, &.{ 1, 1, 1 }, 10, &.{ 5, 3, 2 });
    const web = [_]Entry{
        .{ .cache = 2, .form = .proportion, .value = 0.1 },
        .{ .cache = 0, .form = .proportion, .value = 0.7 },
        .{ .cache = 1, .form = .proportion, .value = 0.2 },
    };
    // 7 * 0.7 = 4.9, 1.4, 0.7: floors 4 + 1 + 0 = 5, two left to 0.9 and 0.7.
    try expectCounts(&web, &.{ 9, 9, 9 }, 7, &.{ 5, 1, 1 });
    try expectCounts(&web, &.{ 9, 9, 9 }, 1000, &.{ 700, 200, 100 });
}

fn expectRefused(
    entries: []const Entry,
    row_counts: []const u64,
    epoch_len: ?u64,
    message: []const u8,
) !void {
    var counts: [8]u64 = undefined;
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidArgument, computeCounts(
        testing.allocator,
        entries,
        row_counts,
        epoch_len,
        counts[0..row_counts.len],
        &diagnostic,
    ));
    if (std.mem.indexOf(u8, diagnostic.message(), message) == null) {
        std.debug.print("expected '{s}' in '{s}'\n", .{ message, diagnostic.message() });
        return error.TestUnexpectedResult;
    }
}

test "a bad mix is refused naming what is wrong" {
    const rows = [_]u64{ 4, 4 };
    try expectRefused(&.{.{ .cache = 2, .form = .choose, .count = 1 }}, &rows, null, "paths[2]");
    try expectRefused(&.{
        .{ .cache = 1, .form = .choose, .count = 1 },
        .{ .cache = 1, .form = .repeat, .value = 1 },
    }, &rows, null, "names the cache at paths[1] twice");
    try expectRefused(&.{
        .{ .cache = 0, .form = .proportion, .value = 0.5 },
        .{ .cache = 1, .form = .repeat, .value = 1 },
    }, &rows, 4, "combines proportions");
    try expectRefused(
        &.{.{ .cache = 0, .form = .repeat, .value = std.math.inf(f64) }},
        &rows,
        null,
        "repeat must be finite and > 0",
    );
    try expectRefused(&.{.{ .cache = 0, .form = .choose, .count = 0 }}, &rows, null, "at least 1");
    try expectRefused(
        &.{.{ .cache = 0, .form = .proportion, .value = 1.5 }},
        &rows,
        4,
        "proportion must be in (0, 1]",
    );
    const whole = [_]Entry{.{ .cache = 0, .form = .proportion, .value = 1 }};
    try expectRefused(&whole, &rows, 4, "every cache");
    const halves = [_]Entry{
        .{ .cache = 0, .form = .proportion, .value = 0.5 },
        .{ .cache = 1, .form = .proportion, .value = 0.4 },
    };
    try expectRefused(&halves, &rows, 4, "sum to 0.9");
    const even = [_]Entry{
        .{ .cache = 0, .form = .proportion, .value = 0.5 },
        .{ .cache = 1, .form = .proportion, .value = 0.5 },
    };
    try expectRefused(&even, &rows, null, "call set_epoch_len(E)");
    const one = [_]Entry{.{ .cache = 0, .form = .choose, .count = 3 }};
    try expectRefused(&one, &rows, 9, "set_epoch_len(9) and a mix of repeat/choose");
    try expectRefused(&one, &.{ 0, 4 }, null, "paths[0] has no active rows");
    const none = [_]Entry{
        .{ .cache = 0, .form = .repeat, .value = 0.1 },
        .{ .cache = 1, .form = .repeat, .value = 0.1 },
    };
    try expectRefused(&none, &rows, null, "1 to 2^53 samples, this one 0");
}

fn testLayout(entries: []const Entry, row_counts: []const u64, seed: u64) !*Layout {
    var diagnostic: Diagnostic = .{};
    const grouping = try contiguousGrouping(testing.allocator, row_counts);
    errdefer grouping.deinit(testing.allocator);
    return Layout.create(testing.allocator, entries, null, seed, grouping, &diagnostic);
}

test "every epoch holds each cache's count: whole passes plus distinct rows" {
    const row_counts = [_]u64{ 3, 5, 2, 7 };
    const layout = try testLayout(&.{
        .{ .cache = 0, .form = .repeat, .value = 2.5 }, // k = 8: every row twice, 2 thrice
        .{ .cache = 1, .form = .choose, .count = 3 }, // 3 distinct rows
        .{ .cache = 3, .form = .choose, .count = 17 }, // every row twice, 3 thrice
    }, &row_counts, 11);
    defer layout.destroy(testing.allocator);
    try testing.expectEqual(@as(u64, 8 + 3 + 2 + 17), layout.epoch_len);
    var cursor: Cursor = .init(layout);
    var first_subset: [5]u64 = undefined;
    var subsets_differ = false;
    for (0..6) |epoch| {
        var seen: [4][7]u64 = @splat(@splat(0));
        const start = epoch * layout.epoch_len;
        for (start..start + layout.epoch_len) |position| {
            const at = cursor.sample(position);
            seen[at.cache][@intCast(at.row)] += 1;
            try testing.expectEqual(
                at.row + layout.first_rows[at.cache],
                cursor.tableRow(position),
            );
        }
        for (row_counts, 0..) |rows, cache| {
            const count = layout.counts[cache];
            var total: u64 = 0;
            var extra: u64 = 0;
            for (seen[cache][0..@intCast(rows)]) |times| {
                try testing.expect(times == count / rows or times == count / rows + 1);
                total += times;
                extra += times - count / rows;
            }
            try testing.expectEqual(count, total);
            try testing.expectEqual(count % rows, extra);
        }
        if (epoch == 0) first_subset = seen[1][0..5].* else {
            subsets_differ = subsets_differ or !std.mem.eql(u64, &first_subset, seen[1][0..5]);
        }
    }
    try testing.expect(subsets_differ);
}

test "the epoch order is a permutation keyed by seed and epoch" {
    const row_counts = [_]u64{ 40, 60 };
    const entries = [_]Entry{.{ .cache = 0, .form = .repeat, .value = 0.5 }};
    const a = try testLayout(&entries, &row_counts, 1);
    defer a.destroy(testing.allocator);
    const b = try testLayout(&entries, &row_counts, 2);
    defer b.destroy(testing.allocator);
    var cursor_a: Cursor = .init(a);
    var cursor_b: Cursor = .init(b);
    var same_seed_epochs: usize = 0;
    var same_seeds: usize = 0;
    for (0..a.epoch_len) |position| {
        const first = cursor_a.tableRow(position);
        same_seed_epochs += @intFromBool(first == cursor_a.tableRow(position + a.epoch_len));
        same_seeds += @intFromBool(first == cursor_b.tableRow(position));
    }
    // Independent orders of 80 slots agree at about one position.
    try testing.expect(same_seed_epochs < 10);
    try testing.expect(same_seeds < 10);
}

test "the algorithm name carries a digest of the counts" {
    const row_counts = [_]u64{ 4, 4 };
    const one = try testLayout(&.{.{ .cache = 0, .form = .choose, .count = 3 }}, &row_counts, 0);
    defer one.destroy(testing.allocator);
    const three = [_]Entry{.{ .cache = 0, .form = .repeat, .value = 0.75 }};
    const same = try testLayout(&three, &row_counts, 9);
    defer same.destroy(testing.allocator);
    const other = try testLayout(&.{.{ .cache = 0, .form = .choose, .count = 2 }}, &row_counts, 0);
    defer other.destroy(testing.allocator);
    try testing.expect(std.mem.startsWith(u8, one.algorithm(), "dataset_rt/mix/v1#"));
    try testing.expectEqualStrings(one.algorithm(), same.algorithm());
    try testing.expect(!std.mem.eql(u8, one.algorithm(), other.algorithm()));
}

test "the check values of docs/determinism.md" {
    const row_counts = [_]u64{ 2, 4, 3 };
    const layout = try testLayout(&.{
        .{ .cache = 0, .form = .choose, .count = 5 },
        .{ .cache = 1, .form = .choose, .count = 2 },
    }, &row_counts, 42);
    defer layout.destroy(testing.allocator);
    try testing.expectEqualStrings("dataset_rt/mix/v1#4d88eedb594a6fb5", layout.algorithm());
    const expected = [_][2]u64{
        .{ 0, 1 }, .{ 0, 1 }, .{ 2, 0 }, .{ 0, 1 }, .{ 1, 1 }, .{ 0, 0 }, .{ 1, 2 },
        .{ 2, 1 }, .{ 0, 0 }, .{ 2, 2 }, .{ 2, 2 }, .{ 1, 0 }, .{ 0, 1 }, .{ 1, 1 },
        .{ 0, 1 }, .{ 0, 1 }, .{ 0, 0 }, .{ 0, 0 }, .{ 2, 1 }, .{ 2, 0 },
    };
    var cursor: Cursor = .init(layout);
    for (expected, 0..) |pair, position| {
        const at = cursor.sample(position);
        try testing.expectEqual(pair, [2]u64{ at.cache, at.row });
    }
}
