//! Tests of dataset.zig: several caches opened as one dataset, their schemas
//! compared, their samples named by cache id, and what opening refuses.
const std = @import("std");
const builtin = @import("builtin");
const testing = std.testing;
const system = @import("../base/system.zig");
const thread_pool = @import("../base/thread_pool.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const dataset_module = @import("dataset.zig");
const Dataset = dataset_module.Dataset;
const Iterator = dataset_module.Iterator;
const read_pipeline = @import("read_pipeline.zig");
const test_cache = @import("test_cache.zig");
const TestCache = test_cache.TestCache;

/// Test caches and a pool to open them with.
const Caches = struct {
    written: []TestCache,
    paths: [][]const u8,
    pool: *thread_pool.ThreadPool,

    fn write(specs: []const test_cache.Spec) !Caches {
        const allocator = testing.allocator;
        const written = try allocator.alloc(TestCache, specs.len);
        errdefer allocator.free(written);
        const paths = try allocator.alloc([]const u8, specs.len);
        errdefer allocator.free(paths);
        var done: usize = 0;
        errdefer for (written[0..done]) |*cache| cache.deinit();
        for (specs, written, paths) |spec, *cache, *path| {
            cache.* = try TestCache.write(spec);
            done += 1;
            path.* = cache.path;
        }
        return .{ .written = written, .paths = paths, .pool = try .create(allocator, 2) };
    }

    fn deinit(caches: *Caches) void {
        for (caches.written) |*cache| cache.deinit();
        testing.allocator.free(caches.written);
        testing.allocator.free(caches.paths);
        caches.pool.release();
    }

    fn open(caches: *const Caches, diagnostic: *Diagnostic) !*Dataset {
        return openPaths(caches.pool, caches.paths, diagnostic);
    }
};

fn openPaths(
    pool: *thread_pool.ThreadPool,
    paths: []const []const u8,
    diagnostic: *Diagnostic,
) !*Dataset {
    return Dataset.open(testing.allocator, pool, paths, .{
        .seed = 3,
        .prefetch_size = 8,
        .shuffle = false,
        .validate_cache = true,
    }, diagnostic);
}

/// One sample as an iterator handed it out.
const Got = struct { cache_id: u64, sample_id: u64 };

/// Every sample of `iterator`, in order, each payload checked against the
/// cache it names.
fn drain(caches: *const Caches, iterator: *Iterator) ![]Got {
    var got: std.ArrayList(Got) = .empty;
    errdefer got.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    while (try iterator.next(&diagnostic)) |batch| {
        defer read_pipeline.Pipeline.releaseBatch(testing.allocator, batch);
        const offsets = batch.payload_offsets.items;
        for (batch.cache_ids.items, batch.sample_ids.items, 0..) |cache_id, sample_id, k| {
            var buffer: [64]u8 = undefined;
            const expected = caches.written[@intCast(cache_id)].payloadOf(sample_id, &buffer);
            try testing.expectEqualSlices(
                u8,
                expected,
                batch.payloads.items[offsets[k]..offsets[k + 1]],
            );
            try got.append(testing.allocator, .{ .cache_id = cache_id, .sample_id = sample_id });
        }
    }
    return got.toOwnedSlice(testing.allocator);
}

test "several caches open as one dataset, their samples in cache order" {
    var caches = try Caches.write(&.{
        .{ .sample_count = 10, .payload_bytes = 16 },
        .{ .sample_count = 6, .payload_bytes = 20, .compression = .lz4 },
        .{ .sample_count = 3, .payload_bytes = 24, .record_checksums = false },
    });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    try testing.expectEqual(@as(u64, 19), dataset.sample_count);
    try testing.expectEqualSlices(u64, &.{ 0, 10, 16 }, dataset.cache_starts);
    try testing.expectEqual(@as(usize, 2), dataset.schema().len);
    try testing.expectEqual(@as(u64, 19), dataset.len());
    const iterator = try Iterator.create(dataset, .whole, 0, 0, &diagnostic);
    defer iterator.destroy();
    const got = try drain(&caches, iterator);
    defer testing.allocator.free(got);
    try testing.expectEqual(@as(usize, 19), got.len);
    for (got, 0..) |sample, position| {
        const cache_id: u64 = if (position < 10) 0 else if (position < 16) 1 else 2;
        try testing.expectEqual(cache_id, sample.cache_id);
        const start = dataset.cache_starts[@intCast(cache_id)];
        try testing.expectEqual(position - start, sample.sample_id);
    }
}

test "reads by identity come from the cache each names" {
    var caches = try Caches.write(&.{
        .{ .sample_count = 10, .payload_bytes = 16 },
        .{ .sample_count = 6, .payload_bytes = 20 },
        .{ .sample_count = 3, .payload_bytes = 24 },
    });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    const cache_ids = [_]u64{ 2, 0, 1, 2 };
    const sample_ids = [_]u64{ 1, 9, 5, 1 };
    const iterator = try Iterator.createReads(dataset, &cache_ids, &sample_ids, 0, &diagnostic);
    defer iterator.destroy();
    try testing.expect(iterator.readsByIdentity());
    const got = try drain(&caches, iterator);
    defer testing.allocator.free(got);
    try testing.expectEqual(cache_ids.len, got.len);
    for (got, cache_ids, sample_ids) |sample, cache_id, sample_id| {
        try testing.expectEqual(Got{ .cache_id = cache_id, .sample_id = sample_id }, sample);
    }
    try testing.expectError(error.State, iterator.position(0, &diagnostic));
}

test "format 3 caches are named by their persisted ids, format 2 ones by position" {
    var caches = try Caches.write(&.{
        .{ .sample_count = 3 },
        .{ .sample_count = 4, .cache_id = 4883758774605530659 },
        .{ .sample_count = 2 },
    });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    try testing.expectEqualSlices(u64, &.{ 0, 4883758774605530659, 2 }, dataset.cacheIds());
    try testing.expectEqual(@as(?u32, 1), dataset.positionOf(4883758774605530659));
    try testing.expectEqual(@as(?u32, null), dataset.positionOf(1));
    const cache_ids = [_]u64{ 4883758774605530659, 2 };
    const sample_ids = [_]u64{ 3, 1 };
    const reads = try Iterator.createReads(dataset, &cache_ids, &sample_ids, 0, &diagnostic);
    defer reads.destroy();
    var got: std.ArrayList(u64) = .empty;
    defer got.deinit(testing.allocator);
    while (try reads.next(&diagnostic)) |batch| {
        defer read_pipeline.Pipeline.releaseBatch(testing.allocator, batch);
        for (batch.cache_ids.items, batch.sample_ids.items) |cache_id, sample_id| {
            try got.appendSlice(testing.allocator, &.{ cache_id, sample_id });
        }
    }
    const expected = [_]u64{ 4883758774605530659, 3, 2, 1 };
    try testing.expectEqualSlices(u64, &expected, got.items);
    const position_of_format_3 = [_]u64{1};
    const refused = Iterator.createReads(dataset, &position_of_format_3, &.{0}, 0, &diagnostic);
    try testing.expectError(error.OutOfRange, refused);
    const phrase = "(request 0): no cache of the dataset has cache_id 1";
    try testing.expect(std.mem.endsWith(u8, diagnostic.message(), phrase));
}

test "two caches with one cache_id are refused, naming both" {
    var caches = try Caches.write(&.{ .{}, .{ .cache_id = 0 } });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidCache, caches.open(&diagnostic));
    var expected: [1024]u8 = undefined;
    const message = try std.fmt.bufPrint(&expected, "duplicate cache_id 0: {s} (paths[0]) " ++
        "and {s} (paths[1])", .{ caches.paths[0], caches.paths[1] });
    try testing.expectEqualStrings(message, diagnostic.message());
}

test "an identity outside the dataset is refused before anything is read" {
    var caches = try Caches.write(&.{ .{ .sample_count = 4 }, .{ .sample_count = 6 } });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    const cases = [_]struct { cache_id: u64, sample_id: u64, message: []const u8 }{
        .{
            .cache_id = 2,
            .sample_id = 0,
            .message = "no sample (cache_id=2, sample_id=0) (request 1): the dataset has 2 caches",
        },
        .{
            .cache_id = 1,
            .sample_id = 6,
            .message = "no sample (cache_id=1, sample_id=6) (request 1): cache 1 has 6 samples",
        },
    };
    for (cases) |case| {
        const cache_ids = [_]u64{ 0, case.cache_id };
        const sample_ids = [_]u64{ 3, case.sample_id };
        const created = Iterator.createReads(dataset, &cache_ids, &sample_ids, 0, &diagnostic);
        try testing.expectError(error.OutOfRange, created);
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "caches of different schemas are refused, naming the column and both caches" {
    const phrase = "all caches must share the same metadata schema: column ";
    const cases = [_]struct { specs: [2]test_cache.Spec, format: []const u8, swap: bool }{
        .{
            .specs = .{ .{}, .{ .i_kind = .float } },
            .format = phrase ++ "'i' is int in {s} but float in {s}",
            .swap = false,
        },
        .{
            .specs = .{ .{}, .{ .with_label = false } },
            .format = phrase ++ "'label' is in {s} but not in {s}",
            .swap = false,
        },
        .{
            .specs = .{ .{ .with_label = false }, .{} },
            .format = phrase ++ "'label' is in {s} but not in {s}",
            .swap = true,
        },
    };
    inline for (cases) |case| {
        var caches = try Caches.write(&case.specs);
        defer caches.deinit();
        var diagnostic: Diagnostic = .{};
        try testing.expectError(error.InvalidCache, caches.open(&diagnostic));
        const first = caches.paths[if (case.swap) 1 else 0];
        const second = caches.paths[if (case.swap) 0 else 1];
        var expected_buffer: [Diagnostic.message_bytes_max]u8 = undefined;
        const expected = try std.fmt.bufPrint(&expected_buffer, case.format, .{ first, second });
        try testing.expectEqualStrings(expected, diagnostic.message());
    }
}

test "a cache that fails to open fails the dataset, named, and the others are closed" {
    // The case is set up with std's file calls that wine 8 lacks (NOT_IMPLEMENTED).
    if (builtin.os.tag == .windows) return error.SkipZigTest;
    var caches = try Caches.write(&.{ .{}, .{}, .{} });
    defer caches.deinit();
    const io = system.io();
    var dir = try caches.written[1].openDir();
    defer dir.close(io);
    try dir.deleteFile(io, "manifest.json");
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidCache, caches.open(&diagnostic));
    var prefix_buffer: [1024]u8 = undefined;
    const prefix = try std.fmt.bufPrint(
        &prefix_buffer,
        "cache {s}: missing manifest",
        .{caches.paths[1]},
    );
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), prefix));
}

test "with validate_cache, a damaged shard fails the open" {
    var caches = try Caches.write(&.{ .{}, .{} });
    defer caches.deinit();
    try caches.written[1].damageRecord(2, 0, "\x07");
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidCache, caches.open(&diagnostic));
    try testing.expect(
        std.mem.indexOf(u8, diagnostic.message(), "checksum mismatch: shards/000000.bin") != null,
    );
}

test "options and paths are checked before anything is opened" {
    const pool = try thread_pool.ThreadPool.create(testing.allocator, 1);
    defer pool.release();
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidArgument, openPaths(pool, &.{}, &diagnostic));
    try testing.expectEqualStrings("at least one cache path is required", diagnostic.message());
    try testing.expectError(error.InvalidArgument, openPaths(pool, &.{ "/a", "" }, &diagnostic));
    try testing.expectEqualStrings(
        "cache path '' must be a non-empty path without NUL bytes",
        diagnostic.message(),
    );
    const zero_prefetch = Dataset.open(testing.allocator, pool, &.{"/a"}, .{
        .seed = 0,
        .prefetch_size = 0,
        .shuffle = false,
        .validate_cache = false,
    }, &diagnostic);
    try testing.expectError(error.InvalidArgument, zero_prefetch);
    try testing.expectEqualStrings("prefetch_size must be at least 1", diagnostic.message());
}

test "a corrupt record is left out of its batch with skip, and fails the read with raise" {
    var caches = try Caches.write(&.{ .{ .sample_count = 4 }, .{ .sample_count = 5 } });
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    try caches.written[1].damageRecord(3, 8, "#");
    const raising = try Iterator.create(dataset, .whole, 0, 0, &diagnostic);
    defer raising.destroy();
    try testing.expectError(error.InvalidCache, drain(&caches, raising));
    dataset.setOnCorrupt(.skip);
    dataset.setEpoch(0);
    const skipping = try Iterator.create(dataset, .whole, 0, 0, &diagnostic);
    defer skipping.destroy();
    var skipped: usize = 0;
    while (try skipping.next(&diagnostic)) |batch| {
        defer read_pipeline.Pipeline.releaseBatch(testing.allocator, batch);
        for (batch.skipped.items) |entry| {
            try testing.expectEqual(@as(u64, 1), entry.cache_id);
            try testing.expectEqual(@as(u64, 3), entry.sample_id);
            skipped += 1;
        }
    }
    try testing.expectEqual(@as(usize, 1), skipped);
}

test "an epoch length is at least 1" {
    var caches = try Caches.write(&.{.{}});
    defer caches.deinit();
    var diagnostic: Diagnostic = .{};
    const dataset = try caches.open(&diagnostic);
    defer dataset.release();
    try testing.expectError(error.InvalidArgument, dataset.setEpochLen(0, &diagnostic));
    try dataset.setEpochLen(25, &diagnostic);
    try testing.expectEqual(@as(u64, 25), dataset.len());
}
