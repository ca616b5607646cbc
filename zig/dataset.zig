//! Caches loaded together for reading, and iterators over them.
//!
//! cache_id is the position of a cache in the list given to `open`; sample_id
//! is the physical row inside that cache.
const std = @import("std");
const Cache = @import("cache_reader.zig").Cache;
const SampleBatch = @import("sample_batch.zig").SampleBatch;
const thread_pool = @import("thread_pool.zig");
const Diagnostic = @import("diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidArgument, InvalidCache, Io, OutOfMemory };

pub const Options = struct {
    seed: u64,
    prefetch_size: u32,
    shuffle: bool,
    validate_cache: bool,
};

pub const caches_max = 1 << 20;

pub const Dataset = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    options: Options,
    caches: []*Cache,
    /// Samples before cache i, so a global row maps to (cache_id, sample_id).
    cache_starts: []u64,
    sample_count: u64,

    pub fn open(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        paths: []const []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!*Dataset {
        if (paths.len == 0) {
            diagnostic.set("at least one cache path is required", .{});
            return error.InvalidArgument;
        }
        if (paths.len > caches_max) {
            diagnostic.set("{d} caches given; at most {d} are supported", .{ paths.len, caches_max });
            return error.InvalidArgument;
        }
        if (options.prefetch_size == 0) {
            diagnostic.set("prefetch_size must be at least 1", .{});
            return error.InvalidArgument;
        }
        const dataset = try allocator.create(Dataset);
        errdefer allocator.destroy(dataset);
        dataset.* = .{
            .allocator = allocator,
            .pool = pool,
            .options = options,
            .caches = try allocator.alloc(*Cache, paths.len),
            .cache_starts = &.{},
            .sample_count = 0,
        };
        errdefer allocator.free(dataset.caches);
        dataset.cache_starts = try allocator.alloc(u64, paths.len);
        errdefer allocator.free(dataset.cache_starts);
        var opened: usize = 0;
        errdefer for (dataset.caches[0..opened]) |cache| cache.close();
        for (paths) |path| {
            const cache = try Cache.open(allocator, path, options.validate_cache, diagnostic);
            dataset.caches[opened] = cache;
            dataset.cache_starts[opened] = dataset.sample_count;
            opened += 1;
            dataset.sample_count += cache.sampleCount();
        }
        if (dataset.sample_count == 0) {
            diagnostic.set("the caches hold no samples", .{});
            return error.InvalidCache;
        }
        return dataset;
    }

    pub fn close(dataset: *Dataset) void {
        for (dataset.caches) |cache| cache.close();
        dataset.allocator.free(dataset.caches);
        dataset.allocator.free(dataset.cache_starts);
        dataset.allocator.destroy(dataset);
    }

    pub fn len(dataset: *const Dataset) u64 {
        return dataset.sample_count;
    }

    pub fn locate(dataset: *const Dataset, row: u64) Location {
        std.debug.assert(row < dataset.sample_count);
        return locateIn(dataset.cache_starts, row);
    }
};

/// Walks the dataset once in physical order (cache by cache, row by row).
pub const Iterator = struct {
    dataset: *Dataset,
    position: u64 = 0,
    end: u64,
    scratch: Cache.SampleScratch,

    pub fn create(dataset: *Dataset) Error!*Iterator {
        const iterator = try dataset.allocator.create(Iterator);
        iterator.* = .{
            .dataset = dataset,
            .end = dataset.len(),
            .scratch = .{},
        };
        return iterator;
    }

    pub fn destroy(iterator: *Iterator) void {
        const allocator = iterator.dataset.allocator;
        iterator.scratch.deinit(allocator);
        allocator.destroy(iterator);
    }

    /// The next batch of at most `samples_max` samples, or null at the end.
    pub fn next(iterator: *Iterator, samples_max: u32, diagnostic: *Diagnostic) Error!?*SampleBatch {
        if (iterator.position == iterator.end) return null;
        const allocator = iterator.dataset.allocator;
        const count: usize = @intCast(@min(@as(u64, @max(samples_max, 1)), iterator.end - iterator.position));
        const batch = try allocator.create(SampleBatch);
        errdefer allocator.destroy(batch);
        batch.* = try SampleBatch.init(allocator, count);
        errdefer batch.deinit(allocator);
        for (0..count) |_| {
            const location = iterator.dataset.locate(iterator.position);
            const cache = iterator.dataset.caches[location.cache_id];
            try cache.readSample(location.sample_id, &iterator.scratch, &batch.payloads, &batch.metadata_json, diagnostic);
            try batch.closeSample(allocator, location.cache_id, location.sample_id);
            iterator.position += 1;
        }
        return batch;
    }
};

pub const Location = struct { cache_id: u32, sample_id: u64 };

fn locateIn(cache_starts: []const u64, row: u64) Location {
    // The last cache whose start is <= row.
    var low: usize = 0;
    var high: usize = cache_starts.len;
    while (high - low > 1) {
        const middle = low + (high - low) / 2;
        if (cache_starts[middle] <= row) low = middle else high = middle;
    }
    return .{ .cache_id = @intCast(low), .sample_id = row - cache_starts[low] };
}

test "global rows map to the cache that holds them, skipping empty caches" {
    const starts = [_]u64{ 0, 3, 3, 10 };
    try std.testing.expectEqual(Location{ .cache_id = 0, .sample_id = 2 }, locateIn(&starts, 2));
    try std.testing.expectEqual(Location{ .cache_id = 2, .sample_id = 0 }, locateIn(&starts, 3));
    try std.testing.expectEqual(Location{ .cache_id = 3, .sample_id = 5 }, locateIn(&starts, 15));
}
