//! The active table: which samples a dataset draws from, in which order, with
//! which weights. It is immutable once built and shared by reference count, so
//! an iterator keeps the table it was created with while `update_metadata`
//! installs a new one.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sampler = @import("sampler.zig");
const permutation = @import("permutation.zig");
const mix = @import("mix.zig");
const Sampling = @import("stream_state.zig").Sampling;
const sha256 = @import("../codec/sha256.zig");

pub const Location = struct { cache_id: u32, sample_id: u64 };

pub const ActiveTable = struct {
    allocator: std.mem.Allocator,
    references: std.atomic.Value(u32) = .init(1),
    row_count: u64,
    /// Row i's sample as a global row (its cache's start in `cache_starts` plus
    /// its sample id: 8 bytes a row where a `Location` takes 16); null means the
    /// default table: every sample of every cache in physical order.
    global_rows: ?[]u64 = null,
    /// Null means every weight is 1.0 (the default, not materialized).
    weights: ?[]f64 = null,
    /// Built only for weighted sampling with materialized weights.
    alias: ?sampler.AliasTable = null,
    cache_starts: []const u64,
    /// The mix resolved against this table (`withMix`); owned. Null: no mix.
    mix: ?*mix.Layout = null,
    /// The table's digest (`digest`), computed on first use; guarded by `digest_mutex`.
    digest_cached: ?[sha256.digest_length]u8 = null,
    digest_mutex: std.Io.Mutex = .init,

    /// The default table over all samples; `cache_starts` must outlive it.
    pub fn createDefault(
        allocator: std.mem.Allocator,
        cache_starts: []const u64,
        sample_count: u64,
    ) !*ActiveTable {
        std.debug.assert(sample_count >= 1);
        const table = try allocator.create(ActiveTable);
        table.* = .{
            .allocator = allocator,
            .row_count = sample_count,
            .cache_starts = cache_starts,
        };
        return table;
    }

    /// A table from validated global rows (`globalRow`) and weights; takes
    /// ownership of both slices.
    pub fn createExplicit(
        allocator: std.mem.Allocator,
        cache_starts: []const u64,
        global_rows: []u64,
        weights: []f64,
        sampling: Sampling,
    ) !*ActiveTable {
        std.debug.assert(global_rows.len == weights.len and global_rows.len >= 1);
        const table = try allocator.create(ActiveTable);
        errdefer allocator.destroy(table);
        table.* = .{
            .allocator = allocator,
            .row_count = global_rows.len,
            .global_rows = global_rows,
            .weights = weights,
            .cache_starts = cache_starts,
        };
        if (sampling == .weighted) table.alias = try sampler.AliasTable.build(allocator, weights);
        return table;
    }

    pub fn acquire(table: *ActiveTable) *ActiveTable {
        _ = table.references.fetchAdd(1, .monotonic);
        return table;
    }

    pub fn release(table: *ActiveTable) void {
        if (table.references.fetchSub(1, .acq_rel) != 1) return;
        const allocator = table.allocator;
        if (table.alias) |*alias| alias.deinit(allocator);
        if (table.mix) |layout| layout.destroy(allocator);
        if (table.global_rows) |global_rows| allocator.free(global_rows);
        if (table.weights) |weights| allocator.free(weights);
        allocator.destroy(table);
    }

    pub fn location(table: *const ActiveTable, row: u64) Location {
        std.debug.assert(row < table.row_count);
        const global_row = if (table.global_rows) |global_rows| global_rows[@intCast(row)] else row;
        return locateDefault(table.cache_starts, global_row);
    }

    /// Positions in an epoch when no explicit epoch length is set.
    pub fn epochLen(table: *const ActiveTable) u64 {
        const layout = table.mix orelse return table.row_count;
        return layout.epoch_len;
    }

    /// The algorithm name in resume states: the mix's, or `sampling`'s.
    pub fn algorithm(table: *const ActiveTable, sampling: Sampling) []const u8 {
        const layout = table.mix orelse return sampling.algorithm();
        return layout.algorithm();
    }

    /// True when every row has the same weight (the condition for mixing).
    pub fn equalWeights(table: *const ActiveTable) bool {
        const weights = table.weights orelse return true;
        for (weights) |value| if (value != weights[0]) return false;
        return true;
    }

    /// A table with this one's rows and weights (copied) and `layout` (owned,
    /// destroyed on failure) as its mix; the digest stays that of the rows.
    pub fn withMix(table: *const ActiveTable, layout: ?*mix.Layout) !*ActiveTable {
        const allocator = table.allocator;
        errdefer if (layout) |owned| owned.destroy(allocator);
        const copy = try allocator.create(ActiveTable);
        errdefer allocator.destroy(copy);
        copy.* = .{
            .allocator = allocator,
            .row_count = table.row_count,
            .cache_starts = table.cache_starts,
            .digest_cached = null,
        };
        if (table.global_rows) |rows| copy.global_rows = try allocator.dupe(u64, rows);
        errdefer if (copy.global_rows) |rows| allocator.free(rows);
        if (table.weights) |weights| copy.weights = try allocator.dupe(f64, weights);
        assert(table.alias == null); // mixing samples without replacement
        copy.mix = layout;
        return copy;
    }

    /// Each cache's active rows in table order, for a mix (`mix.Grouping`):
    /// O(caches) beyond the counts when each cache's rows form one run (always
    /// for the default table), else one u64 per row.
    pub fn grouping(table: *const ActiveTable) error{OutOfMemory}!mix.Grouping {
        const allocator = table.allocator;
        const cache_count = table.cache_starts.len;
        const row_counts = try allocator.alloc(u64, cache_count);
        defer allocator.free(row_counts);
        @memset(row_counts, 0);
        var runs: u64 = 0;
        var previous: ?u32 = null;
        for (0..table.row_count) |row| {
            const cache = table.location(row).cache_id;
            row_counts[cache] += 1;
            if (previous != cache) runs += 1;
            previous = cache;
        }
        var result = try mix.contiguousGrouping(allocator, row_counts);
        errdefer result.deinit(allocator);
        if (runs == nonEmpty(row_counts)) {
            if (table.global_rows != null) firstRowsOfRuns(table, result.first_rows);
            return result;
        }
        const grouped = try allocator.alloc(u64, @intCast(table.row_count));
        errdefer allocator.free(grouped);
        var next = try allocator.dupe(u64, result.first_rows);
        defer allocator.free(next);
        for (0..table.row_count) |row| {
            const cache = table.location(row).cache_id;
            grouped[@intCast(next[cache])] = row;
            next[cache] += 1;
        }
        result.grouped_rows = grouped;
        return result;
    }

    pub fn weight(table: *const ActiveTable, row: u64) f64 {
        const weights = table.weights orelse return 1.0;
        return weights[@intCast(row)];
    }

    /// SHA-256 of the table's identities and weights, row by row (docs/determinism.md,
    /// "Resume states"): equal tables have equal digests however they were built.
    /// `cache_ids` is the id of the cache at each position, the same on every call.
    /// O(rows) the first time, then cached.
    pub fn digest(table: *ActiveTable, cache_ids: []const u64) [sha256.digest_length]u8 {
        std.debug.assert(cache_ids.len == table.cache_starts.len);
        const io = system.io();
        table.digest_mutex.lockUncancelable(io);
        defer table.digest_mutex.unlock(io);
        if (table.digest_cached) |cached| return cached;
        const computed = table.computeDigest(cache_ids);
        table.digest_cached = computed;
        return computed;
    }

    fn computeDigest(table: *const ActiveTable, cache_ids: []const u64) [sha256.digest_length]u8 {
        var hasher: sha256.Hasher = .init();
        hasher.update(digest_domain);
        var count: [8]u8 = undefined;
        std.mem.writeInt(u64, &count, table.row_count, .little);
        hasher.update(&count);
        var buffer: [digest_rows_per_update * digest_row_bytes]u8 = undefined;
        var filled: usize = 0;
        var row: u64 = 0;
        while (row < table.row_count) : (row += 1) {
            const at = table.location(row);
            const bytes = buffer[filled..][0..digest_row_bytes];
            std.mem.writeInt(u64, bytes[0..8], cache_ids[at.cache_id], .little);
            std.mem.writeInt(u64, bytes[8..16], at.sample_id, .little);
            std.mem.writeInt(u64, bytes[16..24], @bitCast(table.weight(row)), .little);
            filled += digest_row_bytes;
            if (filled == buffer.len) {
                hasher.update(&buffer);
                filled = 0;
            }
        }
        hasher.update(buffer[0..filled]);
        return hasher.final();
    }
};

/// The rows of stream positions for one table and sampling (docs/determinism.md).
/// Keeps the permutation's epoch keys between calls, so plan runs of positions
/// with one planner.
pub const RowPlanner = struct {
    table: *const ActiveTable,
    sampling: Sampling,
    key: sampler.Key,
    cursor: permutation.Cursor,
    mix_cursor: ?mix.Cursor,

    pub fn init(table: *const ActiveTable, sampling: Sampling, key: sampler.Key) RowPlanner {
        assert(table.mix == null or sampling == .permutation);
        return .{
            .table = table,
            .sampling = sampling,
            .key = key,
            .cursor = .init(key, table.row_count),
            .mix_cursor = if (table.mix) |layout| .init(layout) else null,
        };
    }

    pub fn row(planner: *RowPlanner, position: u64) u64 {
        const table = planner.table;
        return switch (planner.sampling) {
            .table_order => sampler.cyclicRow(table.row_count, position),
            .weighted => if (table.alias) |*alias|
                alias.draw(planner.key, position)
            else
                sampler.AliasTable.uniform(table.row_count).draw(planner.key, position),
            .permutation => if (planner.mix_cursor) |*mixed|
                mixed.tableRow(position)
            else
                planner.cursor.row(position),
        };
    }
};

fn nonEmpty(row_counts: []const u64) u64 {
    var count: u64 = 0;
    for (row_counts) |rows| count += @intFromBool(rows > 0);
    return count;
}

/// The table row where each cache's single run begins (empty caches keep theirs).
fn firstRowsOfRuns(table: *const ActiveTable, first_rows: []u64) void {
    var previous: ?u32 = null;
    for (0..table.row_count) |row| {
        const cache = table.location(row).cache_id;
        if (previous != cache) first_rows[cache] = row;
        previous = cache;
    }
}

const digest_domain = "dataset_rt/table/v1";
const digest_row_bytes = 24;
const digest_rows_per_update = 2048;

/// The global row of a sample that exists (`sample_id` below its cache's count).
pub fn globalRow(cache_starts: []const u64, location: Location) u64 {
    return cache_starts[location.cache_id] + location.sample_id;
}

/// The cache holding global row `row`: the last cache whose first row is <= row
/// (empty caches share their start with the next cache, and hold no row).
pub fn locateDefault(cache_starts: []const u64, row: u64) Location {
    var low: usize = 0;
    var high: usize = cache_starts.len;
    while (high - low > 1) {
        const middle = low + (high - low) / 2;
        if (cache_starts[middle] <= row) low = middle else high = middle;
    }
    return .{ .cache_id = @intCast(low), .sample_id = row - cache_starts[low] };
}

test {
    _ = mix;
}

test "global rows map to the cache that holds them, skipping empty caches" {
    const starts = [_]u64{ 0, 3, 3, 10 };
    try std.testing.expectEqual(
        Location{ .cache_id = 0, .sample_id = 2 },
        locateDefault(&starts, 2),
    );
    try std.testing.expectEqual(
        Location{ .cache_id = 2, .sample_id = 0 },
        locateDefault(&starts, 3),
    );
    try std.testing.expectEqual(
        Location{ .cache_id = 3, .sample_id = 5 },
        locateDefault(&starts, 15),
    );
}

test "an explicit table's rows locate the samples they were built from, around empty caches" {
    const starts = [_]u64{ 0, 3, 3, 10 }; // cache 1 is empty
    const samples = [_]Location{
        .{ .cache_id = 3, .sample_id = 5 },
        .{ .cache_id = 0, .sample_id = 0 },
        .{ .cache_id = 2, .sample_id = 0 },
        .{ .cache_id = 0, .sample_id = 2 },
        .{ .cache_id = 2, .sample_id = 6 },
    };
    const global_rows = try std.testing.allocator.alloc(u64, samples.len);
    for (global_rows, samples) |*global_row, sample| global_row.* = globalRow(&starts, sample);
    const weights = try std.testing.allocator.alloc(f64, samples.len);
    @memset(weights, 1.0);
    const table = try ActiveTable.createExplicit(
        std.testing.allocator,
        &starts,
        global_rows,
        weights,
        .weighted,
    );
    defer table.release();
    for (samples, 0..) |sample, row| try std.testing.expectEqual(sample, table.location(row));
}

test "an unshuffled default table walks rows cyclically in physical order" {
    const starts = [_]u64{ 0, 2 };
    const table = try ActiveTable.createDefault(std.testing.allocator, &starts, 5);
    defer table.release();
    const key = sampler.Key.fromSeed(1);
    var rows: [7]u64 = undefined;
    var planner: RowPlanner = .init(table, .table_order, key);
    for (&rows, 0..) |*row, position| row.* = planner.row(position);
    try std.testing.expectEqualSlices(u64, &.{ 0, 1, 2, 3, 4, 0, 1 }, &rows);
    try std.testing.expectEqual(Location{ .cache_id = 1, .sample_id = 1 }, table.location(3));
}

test "the digest depends on rows and weights, not on how the table was built" {
    const allocator = std.testing.allocator;
    const starts = [_]u64{ 0, 2 };
    const ids = [_]u64{ 0, 1 };
    const default_table = try ActiveTable.createDefault(allocator, &starts, 3);
    defer default_table.release();
    const explicit = try explicitTable(allocator, &starts, &.{ 0, 1, 2 }, &.{ 1.0, 1.0, 1.0 });
    defer explicit.release();
    try std.testing.expectEqual(default_table.digest(&ids), explicit.digest(&ids));
    // The documented bytes: domain, u64 row count, then per row u64 cache_id,
    // u64 sample_id and the weight's binary64 bits, all little-endian.
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(allocator);
    try expected.appendSlice(allocator, "dataset_rt/table/v1");
    const one: u64 = 0x3ff0000000000000; // 1.0 as binary64 bits
    for ([_]u64{ 3, 0, 0, one, 0, 1, one, 1, 0, one }) |word| {
        var bytes: [8]u8 = undefined;
        std.mem.writeInt(u64, &bytes, word, .little);
        try expected.appendSlice(allocator, &bytes);
    }
    try std.testing.expectEqual(sha256.hash(expected.items), default_table.digest(&ids));

    const reweighted = try explicitTable(allocator, &starts, &.{ 0, 1, 2 }, &.{ 1.0, 2.0, 1.0 });
    defer reweighted.release();
    const reordered = try explicitTable(allocator, &starts, &.{ 1, 0, 2 }, &.{ 1.0, 1.0, 1.0 });
    defer reordered.release();
    const shorter = try explicitTable(allocator, &starts, &.{ 0, 1 }, &.{ 1.0, 1.0 });
    defer shorter.release();
    const digest = default_table.digest(&ids);
    try std.testing.expect(!std.mem.eql(u8, &digest, &reweighted.digest(&ids)));
    try std.testing.expect(!std.mem.eql(u8, &digest, &reordered.digest(&ids)));
    try std.testing.expect(!std.mem.eql(u8, &digest, &shorter.digest(&ids)));
}

test "the digest names each row's cache by its cache_id, not its position" {
    const allocator = std.testing.allocator;
    const starts = [_]u64{ 0, 1 };
    const table = try ActiveTable.createDefault(allocator, &starts, 2);
    defer table.release();
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(allocator);
    try expected.appendSlice(allocator, "dataset_rt/table/v1");
    const id: u64 = 4883758774605530659;
    const words = [_]u64{ 2, 0, 0, 0x3ff0000000000000, id, 0, 0x3ff0000000000000 };
    for (words) |word| {
        var bytes: [8]u8 = undefined;
        std.mem.writeInt(u64, &bytes, word, .little);
        try expected.appendSlice(allocator, &bytes);
    }
    try std.testing.expectEqual(sha256.hash(expected.items), table.digest(&.{ 0, id }));
}

test "the digest of a table larger than one hashing buffer covers every row" {
    const allocator = std.testing.allocator;
    const starts = [_]u64{0};
    const row_count = digest_rows_per_update * 2 + 5;
    const rows = try allocator.alloc(u64, row_count);
    defer allocator.free(rows);
    const weights = try allocator.alloc(f64, row_count);
    defer allocator.free(weights);
    for (rows, weights, 0..) |*row, *weight, index| {
        row.* = index;
        weight.* = 1.0;
    }
    const default_table = try ActiveTable.createDefault(allocator, &starts, row_count);
    defer default_table.release();
    const same = try explicitTable(allocator, &starts, rows, weights);
    defer same.release();
    weights[row_count - 1] = 0.5;
    const last_differs = try explicitTable(allocator, &starts, rows, weights);
    defer last_differs.release();
    const ids = [_]u64{0};
    try std.testing.expectEqual(default_table.digest(&ids), same.digest(&ids));
    try std.testing.expect(!std.mem.eql(u8, &same.digest(&ids), &last_differs.digest(&ids)));
}

fn explicitTable(
    allocator: std.mem.Allocator,
    starts: []const u64,
    rows: []const u64,
    weights: []const f64,
) !*ActiveTable {
    const owned_rows = try allocator.dupe(u64, rows);
    errdefer allocator.free(owned_rows);
    const owned_weights = try allocator.dupe(f64, weights);
    errdefer allocator.free(owned_weights);
    return ActiveTable.createExplicit(allocator, starts, owned_rows, owned_weights, .table_order);
}
