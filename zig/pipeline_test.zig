//! End-to-end tests of the core without the C ABI or Python: a cache written by
//! the writer, opened as a dataset, read in order, shuffled (with and without
//! replacement), by identity, with an edited active table, and resumed.
const std = @import("std");
const testing = std.testing;
const thread_pool = @import("base/thread_pool.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const cache_writer = @import("write/cache_writer.zig");
const dataset_module = @import("read/dataset.zig");
const Dataset = dataset_module.Dataset;
const Iterator = dataset_module.Iterator;
const ActiveTable = @import("stream/active_table.zig").ActiveTable;
const stream_share = @import("stream/stream_share.zig");
const sampler = @import("stream/sampler.zig");
const permutation = @import("stream/permutation.zig");
const read_pipeline = @import("read/read_pipeline.zig");
const dataset_mix = @import("read/dataset_mix.zig");

const sample_count = 300;

/// Payload of sample i: its index in 4 bytes, then i % 50 bytes of a pattern.
fn payloadOf(buffer: []u8, index: u32) []const u8 {
    std.mem.writeInt(u32, buffer[0..4], index, .little);
    const len = 4 + index % 50;
    for (buffer[4..len], 0..) |*byte, offset| byte.* = @truncate(index + offset);
    return buffer[0..len];
}

/// Writes `sample_count` samples with metadata {"i": index, "odd": bool} into
/// `<base>/<name>` in batches of 64, with lz4 when asked.
fn writeCache(pool: *thread_pool.ThreadPool, base: []const u8, name: []const u8, lz4: bool) !void {
    const allocator = testing.allocator;
    var diagnostic: Diagnostic = .{};
    const writer = try cache_writer.CacheWriter.create(allocator, pool, base, name, .{
        .max_shard_bytes = 4096, // several shards
        .batches_in_flight_max = 2,
        .compression = if (lz4) .lz4 else .none,
        .compression_ratio = if (lz4) 0.5 else 1.0,
    }, &diagnostic);
    defer writer.destroy();
    var first: u32 = 0;
    while (first < sample_count) : (first += 64) {
        const end = @min(sample_count, first + 64);
        var payloads: std.ArrayList(u8) = .empty;
        defer payloads.deinit(allocator);
        var lens: std.ArrayList(u64) = .empty;
        defer lens.deinit(allocator);
        var json: std.ArrayList(u8) = .empty;
        defer json.deinit(allocator);
        try json.append(allocator, '[');
        for (first..end) |index| {
            var buffer: [64]u8 = undefined;
            const payload = payloadOf(&buffer, @intCast(index));
            try payloads.appendSlice(allocator, payload);
            try lens.append(allocator, payload.len);
            if (index != first) try json.appendSlice(allocator, ", ");
            try json.print(
                allocator,
                "{{\"i\": {d}, \"odd\": {s}}}",
                .{ index, if (index % 2 == 1) "true" else "false" },
            );
        }
        try json.append(allocator, ']');
        try writer.push(payloads.items, lens.items, json.items, &diagnostic);
    }
    try writer.finish(&diagnostic);
}

/// Reads every batch of `iterator` and checks each sample's payload and embedded
/// metadata against what `writeCache` wrote; returns the global indexes
/// (cache_id * sample_count + sample_id) in the order read.
fn drain(iterator: *Iterator, out: *std.ArrayList(u64)) !void {
    var diagnostic: Diagnostic = .{};
    while (try iterator.next(&diagnostic)) |batch| {
        defer read_pipeline.Pipeline.releaseBatch(testing.allocator, batch);
        const count = batch.sample_ids.items.len;
        try testing.expectEqual(count + 1, batch.payload_offsets.items.len);
        for (0..count) |k| {
            const sample_id = batch.sample_ids.items[k];
            const payload_offsets = batch.payload_offsets.items;
            const payload = batch.payloads.items[payload_offsets[k]..payload_offsets[k + 1]];
            var buffer: [64]u8 = undefined;
            try testing.expectEqualSlices(u8, payloadOf(&buffer, @intCast(sample_id)), payload);
            const json_offsets = batch.metadata_offsets.items;
            const json = batch.metadata_json.items[json_offsets[k]..json_offsets[k + 1]];
            var expected: [64]u8 = undefined;
            const canonical = try std.fmt.bufPrint(
                &expected,
                "{{\"i\":{d},\"odd\":{s}}}",
                .{ sample_id, if (sample_id % 2 == 1) "true" else "false" },
            );
            try testing.expectEqualStrings(canonical, json);
            try out.append(
                testing.allocator,
                batch.cache_ids.items[k] * @as(u64, sample_count) + sample_id,
            );
        }
    }
}

fn readEpoch(dataset: *Dataset, share: stream_share.Share) ![]u64 {
    var diagnostic: Diagnostic = .{};
    const iterator = try Iterator.create(dataset, share, 0, 0, &diagnostic);
    defer iterator.destroy();
    var rows: std.ArrayList(u64) = .empty;
    errdefer rows.deinit(testing.allocator);
    try drain(iterator, &rows);
    return rows.toOwnedSlice(testing.allocator);
}

const Fixture = struct {
    tmp: testing.TmpDir,
    base: []u8,
    paths: [2][]u8,
    pool: *thread_pool.ThreadPool,

    fn init() !Fixture {
        var tmp = testing.tmpDir(.{});
        errdefer tmp.cleanup();
        var buffer: [std.fs.max_path_bytes]u8 = undefined;
        const len = try tmp.dir.realPath(@import("base/system.zig").io(), &buffer);
        const base = try testing.allocator.dupe(u8, buffer[0..len]);
        errdefer testing.allocator.free(base);
        const pool = try thread_pool.ThreadPool.create(testing.allocator, 2);
        errdefer pool.release();
        try writeCache(pool, base, "plain", false);
        try writeCache(pool, base, "packed", true);
        return .{
            .tmp = tmp,
            .base = base,
            .paths = .{
                try std.fs.path.join(testing.allocator, &.{ base, "plain" }),
                try std.fs.path.join(testing.allocator, &.{ base, "packed" }),
            },
            .pool = pool,
        };
    }

    fn open(fixture: *Fixture, shuffle: bool, replacement: bool) !*Dataset {
        return fixture.openChecked(shuffle, replacement, true);
    }

    fn openChecked(
        fixture: *Fixture,
        shuffle: bool,
        replacement: bool,
        validate_cache: bool,
    ) !*Dataset {
        var diagnostic: Diagnostic = .{};
        const paths = [_][]const u8{ fixture.paths[0], fixture.paths[1] };
        return Dataset.open(testing.allocator, fixture.pool, &paths, .{
            .seed = 7,
            .prefetch_size = 16,
            .shuffle = shuffle,
            .validate_cache = validate_cache,
            .replacement = replacement,
        }, &diagnostic);
    }

    fn deinit(fixture: *Fixture) void {
        for (fixture.paths) |path| testing.allocator.free(path);
        testing.allocator.free(fixture.base);
        fixture.pool.release();
        fixture.tmp.cleanup();
    }
};

test "a written cache reads back in order, shuffled, without replacement and by identity" {
    var fixture = try Fixture.init();
    defer fixture.deinit();

    // In order: every sample of both caches, cache by cache, twice round.
    const ordered = try fixture.open(false, true);
    defer ordered.release();
    try testing.expectEqual(@as(u64, 2 * sample_count), ordered.len());
    const first = try readEpoch(ordered, .whole);
    defer testing.allocator.free(first);
    for (first, 0..) |row, position| try testing.expectEqual(@as(u64, position), row);

    // Shuffled with replacement: the rows of the sampler's draws.
    const drawn = try fixture.open(true, true);
    defer drawn.release();
    const draws = try readEpoch(drawn, .whole);
    defer testing.allocator.free(draws);
    const table = sampler.AliasTable.uniform(2 * sample_count);
    for (draws, 0..) |row, position| try testing.expectEqual(
        table.draw(sampler.Key.fromSeed(7), position),
        row,
    );

    // Without replacement: each epoch a permutation, the permutation's rows.
    const permuted = try fixture.open(true, false);
    defer permuted.release();
    for (0..2) |epoch| {
        const rows = try readEpoch(permuted, .whole);
        defer testing.allocator.free(rows);
        var seen: [2 * sample_count]bool = @splat(false);
        for (rows, 0..) |row, index| {
            try testing.expect(!seen[row]);
            seen[row] = true;
            const key = sampler.Key.derive(permutation.key_domain, 7);
            try testing.expectEqual(
                permutation.rowAt(key, 2 * sample_count, epoch * 2 * sample_count + index),
                row,
            );
        }
    }

    // By identity, in the order asked, repeats included.
    var diagnostic: Diagnostic = .{};
    const cache_ids = [_]u64{ 1, 0, 1 };
    const sample_ids = [_]u64{ 299, 3, 299 };
    const reads = try Iterator.createReads(ordered, &cache_ids, &sample_ids, 0, &diagnostic);
    defer reads.destroy();
    var got: std.ArrayList(u64) = .empty;
    defer got.deinit(testing.allocator);
    try drain(reads, &got);
    try testing.expectEqualSlices(u64, &.{ 599, 3, 599 }, got.items);
    const unknown = [_]u64{sample_count};
    try testing.expectError(
        error.OutOfRange,
        Iterator.createReads(ordered, cache_ids[0..1], &unknown, 0, &diagnostic),
    );
}

/// Gives `dataset` a table of 7 rows (samples 5, 4, 3 of cache 1, then 0, 0, 10, 20 of
/// cache 0) read in table order, with epochs of 10 positions.
fn useEditedTable(dataset: *Dataset, diagnostic: *Diagnostic) !void {
    const rows = [_]u64{ sample_count + 5, sample_count + 4, sample_count + 3, 0, 0, 10, 20 };
    const global_rows = try testing.allocator.dupe(u64, &rows);
    const weights = try testing.allocator.alloc(f64, rows.len);
    @memset(weights, 1.0);
    const table = try ActiveTable.createExplicit(
        testing.allocator,
        dataset.cache_starts,
        global_rows,
        weights,
        .table_order,
    );
    dataset.replaceTable(table);
    try dataset.setEpochLen(10, diagnostic);
}

test "an edited table, shares of ranks and workers, and a resumed state" {
    var fixture = try Fixture.init();
    defer fixture.deinit();
    const dataset = try fixture.open(false, true);
    defer dataset.release();

    var diagnostic: Diagnostic = .{};
    try useEditedTable(dataset, &diagnostic);

    // Two ranks of batch 2, one worker each: interleaved step by step they give
    // the stream; with 10 positions and steps of 4 the last step is padded.
    const stream = [_]u64{ 305, 304, 303, 0, 0, 10, 20, 305, 304, 303, 0, 0 };
    var shares: [2][]u64 = undefined;
    for (&shares, 0..) |*share, rank| {
        dataset.setEpoch(0);
        share.* = try readEpoch(dataset, .{ .batch_size = 2, .rank = rank, .world_size = 2 });
    }
    defer for (shares) |share| testing.allocator.free(share);
    try testing.expectEqual(@as(usize, 6), shares[0].len);
    for (0..3) |step| {
        for (0..2) |rank| {
            try testing.expectEqualSlices(
                u64,
                stream[step * 4 + rank * 2 ..][0..2],
                shares[rank][step * 2 ..][0..2],
            );
        }
    }

    // A state after 3 samples of epoch 0, loaded into a fresh dataset with the
    // same table, continues with the rest of the epoch, then the next one.
    dataset.setEpoch(0);
    const iterator = try Iterator.create(dataset, .whole, 0, 0, &diagnostic);
    const at = try iterator.position(3, &diagnostic);
    iterator.destroy();
    const state = dataset.state();
    defer state.table.release();
    var digests: [2][32]u8 = undefined;
    const fingerprint = dataset.fingerprint(state.table, &digests);

    const resumed = try fixture.open(false, true);
    defer resumed.release();
    try useEditedTable(resumed, &diagnostic);
    try resumed.loadState(fingerprint, at, &diagnostic);
    const rest = try readEpoch(resumed, .whole);
    defer testing.allocator.free(rest);
    try testing.expectEqualSlices(u64, stream[3..10], rest);
    const next = try readEpoch(resumed, .whole);
    defer testing.allocator.free(next);
    try testing.expectEqualSlices(u64, &.{ 0, 0, 10, 20, 305, 304, 303, 0, 0, 10 }, next);

    // Another seed's state is refused, naming the difference.
    var other = fingerprint;
    other.seed = 8;
    try testing.expectError(error.InvalidArgument, resumed.loadState(other, at, &diagnostic));
    try testing.expectEqualStrings("the state has seed 8, this dataset 7", diagnostic.message());
}

/// Flips the last byte of sample `sample_id`'s record in `<cache>`.
fn corruptRecord(cache: []const u8, sample_id: u64) !void {
    const io = @import("base/system.zig").io();
    var dir = try std.Io.Dir.cwd().openDir(io, cache, .{});
    defer dir.close(io);
    const index = try dir.readFileAlloc(io, "index.bin", testing.allocator, .unlimited);
    defer testing.allocator.free(index);
    const row = index[@intCast(24 * sample_id)..][0..24];
    const shard_id = std.mem.readInt(u64, row[0..8], .little);
    const offset = std.mem.readInt(u64, row[8..16], .little);
    const end = offset + std.mem.readInt(u64, row[16..24], .little);
    var name: [32]u8 = undefined;
    const shard_path = try std.fmt.bufPrint(&name, "shards/{d:0>6}.bin", .{shard_id});
    const file = try dir.openFile(io, shard_path, .{ .mode = .read_write });
    defer file.close(io);
    var byte: [1]u8 = undefined;
    _ = try file.readPositionalAll(io, &byte, end - 1);
    byte[0] ^= 0x40;
    try file.writePositionalAll(io, &byte, end - 1);
}

test "a corrupt record fails the read, is skipped on request, and verify names it" {
    var fixture = try Fixture.init();
    defer fixture.deinit();
    for (fixture.paths) |path| try corruptRecord(path, 77);

    // Raise (the default): the epoch fails at sample 77 of the first cache.
    const raising = try fixture.openChecked(false, true, false);
    defer raising.release();
    var diagnostic: Diagnostic = .{};
    const failing = try Iterator.create(raising, .whole, 0, 0, &diagnostic);
    defer failing.destroy();
    var rows: std.ArrayList(u64) = .empty;
    defer rows.deinit(testing.allocator);
    try testing.expectError(error.InvalidCache, drain(failing, &rows));

    // Skip: every other sample, in order; both corrupt ones listed where they stood.
    const skipping = try fixture.openChecked(false, true, false);
    defer skipping.release();
    skipping.setOnCorrupt(.skip);
    const iterator = try Iterator.create(skipping, .whole, 0, 0, &diagnostic);
    defer iterator.destroy();
    var read: std.ArrayList(u64) = .empty;
    defer read.deinit(testing.allocator);
    var skipped: std.ArrayList(u64) = .empty;
    defer skipped.deinit(testing.allocator);
    while (try iterator.next(&diagnostic)) |batch| {
        defer read_pipeline.Pipeline.releaseBatch(testing.allocator, batch);
        for (batch.skipped.items) |entry| try skipped.append(
            testing.allocator,
            entry.cache_id * @as(u64, sample_count) + entry.sample_id,
        );
        try read.appendSlice(testing.allocator, batch.sample_ids.items);
    }
    try testing.expectEqualSlices(u64, &.{ 77, sample_count + 77 }, skipped.items);
    try testing.expectEqual(@as(usize, 2 * sample_count - 2), read.items.len);

    // The scrub reports the record (with its shard's SHA-256) in each cache.
    for (fixture.paths) |path| {
        const verifier = try @import("read/verify.zig").Verifier.create(
            testing.allocator,
            fixture.pool,
            path,
        );
        defer verifier.destroy();
        try verifier.run();
        var record_problems: usize = 0;
        for (verifier.found()) |problem| {
            if (problem.sample_id) |sample_id| {
                try testing.expectEqual(@as(u64, 77), sample_id);
                record_problems += 1;
            }
        }
        try testing.expectEqual(@as(usize, 1), record_problems);
        try testing.expectEqual(@as(u64, 2), verifier.problems_total);
    }
}

/// How often each global row of the two caches comes in `rows`.
fn rowCounts(rows: []const u64) [2 * sample_count]u64 {
    var counts: [2 * sample_count]u64 = @splat(0);
    for (rows) |row| counts[row] += 1;
    return counts;
}

test "a mix: exact counts each epoch, resolved again for a new table" {
    var fixture = try Fixture.init();
    defer fixture.deinit();
    const dataset = try fixture.open(true, false);
    defer dataset.release();
    var diagnostic: Diagnostic = .{};
    try dataset_mix.setMix(dataset, &.{
        .{ .cache = 0, .form = .repeat, .value = 0.5 }, // 150 distinct rows of 300
        .{ .cache = 1, .form = .choose, .count = 450 }, // every row once, 150 twice
    }, &diagnostic);
    try testing.expectEqual(@as(u64, 600), dataset.len());
    for (0..2) |_| {
        const rows = try readEpoch(dataset, .whole);
        defer testing.allocator.free(rows);
        const counts = rowCounts(rows);
        var first: u64 = 0;
        var twice: u64 = 0;
        for (counts[0..sample_count]) |times| {
            try testing.expect(times <= 1);
            first += times;
        }
        for (counts[sample_count..]) |times| {
            try testing.expect(times == 1 or times == 2);
            twice += @intFromBool(times == 2);
        }
        try testing.expectEqual(@as(u64, 150), first);
        try testing.expectEqual(@as(u64, 150), twice);
    }
    const refused = dataset_mix.setEpochLen(dataset, 9, &diagnostic);
    try testing.expectError(error.InvalidArgument, refused);

    // Samples 5, 4, 3 of cache 1 and 0, 0, 10, 20 of cache 0, interleaved: cache 0
    // has 4 rows (repeat 0.5: 2 samples), cache 1 three (choose 450: 150 each).
    const one = sample_count; // cache 1's first global row
    const global_rows = [_]u64{ one + 5, 0, one + 4, 0, 10, one + 3, 20 };
    const weights = try testing.allocator.alloc(f64, global_rows.len);
    @memset(weights, 1.0);
    const table = try ActiveTable.createExplicit(
        testing.allocator,
        dataset.cache_starts,
        try testing.allocator.dupe(u64, &global_rows),
        weights,
        .permutation,
    );
    try dataset_mix.replaceTable(dataset, table, &diagnostic);
    try testing.expectEqual(@as(u64, 452), dataset.len());
    const rows = try readEpoch(dataset, .whole);
    defer testing.allocator.free(rows);
    const counts = rowCounts(rows);
    try testing.expectEqual(@as(u64, 150), counts[sample_count + 3]);
    try testing.expectEqual(@as(u64, 150), counts[sample_count + 5]);
    try testing.expectEqual(@as(u64, 2), counts[0] + counts[10] + counts[20]);
}
