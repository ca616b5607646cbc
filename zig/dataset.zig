//! Caches loaded together for reading, their active table and stream state.
//!
//! cache_id is the position of a cache in the list given to `open`; sample_id
//! is the physical row inside that cache. The dataset owns the stream position:
//! each new iterator takes the next `epoch_len` positions; installing a new
//! table resets the position to 0 and keeps an explicit epoch length.
const std = @import("std");
const system = @import("system.zig");
const types = @import("metadata_types.zig");
const sampler = @import("sampler.zig");
const Cache = @import("cache_reader.zig").Cache;
const active_table = @import("active_table.zig");
const ActiveTable = active_table.ActiveTable;
const read_pipeline = @import("read_pipeline.zig");
const thread_pool = @import("thread_pool.zig");
const Diagnostic = @import("diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidArgument, InvalidInput, InvalidCache, Io, OutOfMemory };

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
    key: sampler.Key,
    caches: []*Cache,
    /// Samples before cache i, so a global row maps to (cache_id, sample_id).
    cache_starts: []u64,
    sample_count: u64,

    /// The binding's handle and every iterator hold one reference.
    references: std.atomic.Value(u32) = .init(1),

    // Stream state, guarded by `mutex`.
    mutex: std.Io.Mutex = .init,
    table: *ActiveTable,
    position: u64 = 0,
    /// Set by `setEpochLen`; otherwise an epoch is the active table's row count.
    epoch_len: ?u64 = null,

    pub fn open(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        paths: []const []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!*Dataset {
        try validateOptions(paths, options, diagnostic);
        const dataset = try allocator.create(Dataset);
        errdefer allocator.destroy(dataset);
        dataset.* = .{
            .allocator = allocator,
            .pool = pool,
            .options = options,
            .key = sampler.Key.fromSeed(options.seed),
            .caches = try allocator.alloc(*Cache, paths.len),
            .cache_starts = &.{},
            .sample_count = 0,
            .table = undefined,
        };
        errdefer allocator.free(dataset.caches);
        dataset.cache_starts = try allocator.alloc(u64, paths.len);
        errdefer allocator.free(dataset.cache_starts);
        try openCaches(allocator, pool, paths, options.validate_cache, dataset.caches, diagnostic);
        errdefer for (dataset.caches) |cache| cache.close();
        for (dataset.caches, dataset.cache_starts) |cache, *start| {
            start.* = dataset.sample_count;
            dataset.sample_count = std.math.add(u64, dataset.sample_count, cache.sampleCount()) catch {
                diagnostic.set("the caches hold more than 2^64 samples", .{});
                return error.InvalidCache;
            };
            try checkSameSchema(dataset.caches[0], cache, diagnostic);
        }
        if (dataset.sample_count == 0) {
            diagnostic.set("the caches hold no samples", .{});
            return error.InvalidCache;
        }
        dataset.table = try ActiveTable.createDefault(allocator, dataset.cache_starts, dataset.sample_count);
        _ = pool.acquire(); // released with the dataset's last reference
        return dataset;
    }

    /// Opens every cache on the pool, at most `workerCount` at a time. On any
    /// failure every opened cache is closed and the first failure (in path
    /// order) is reported, so a dataset is never half-valid.
    fn openCaches(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        paths: []const []const u8,
        validate_hashes: bool,
        caches_out: []*Cache,
        diagnostic: *Diagnostic,
    ) Error!void {
        const jobs = try allocator.alloc(OpenJob, paths.len);
        defer allocator.free(jobs);
        for (jobs, paths) |*job, path| job.* = .{ .path = path, .validate_hashes = validate_hashes, .allocator = allocator };
        var wave_start: usize = 0;
        while (wave_start < jobs.len) {
            const wave = jobs[wave_start..@min(jobs.len, wave_start + pool.workerCount())];
            var group: thread_pool.WaitGroup = .{};
            group.add(wave.len);
            for (wave) |*job| {
                job.group = &group;
                pool.submit(&job.job);
            }
            group.wait();
            wave_start += wave.len;
        }
        for (jobs) |*job| {
            if (job.failure) |failure| {
                for (jobs) |*other| if (other.cache) |cache| cache.close();
                diagnostic.* = job.diagnostic;
                return failure;
            }
        }
        for (jobs, caches_out) |job, *cache| cache.* = job.cache.?;
    }

    const OpenJob = struct {
        job: thread_pool.Job = .{ .run = run },
        allocator: std.mem.Allocator,
        path: []const u8,
        validate_hashes: bool,
        group: *thread_pool.WaitGroup = undefined,
        cache: ?*Cache = null,
        failure: ?Error = null,
        diagnostic: Diagnostic = .{},

        fn run(job: *thread_pool.Job) void {
            const open_job: *OpenJob = @fieldParentPtr("job", job);
            open_job.cache = Cache.open(open_job.allocator, open_job.path, open_job.validate_hashes, &open_job.diagnostic) catch |err| blk: {
                open_job.failure = err;
                break :blk null;
            };
            open_job.group.finish();
        }
    };

    fn validateOptions(paths: []const []const u8, options: Options, diagnostic: *Diagnostic) Error!void {
        const path_count = paths.len;
        if (path_count == 0) {
            diagnostic.set("at least one cache path is required", .{});
            return error.InvalidArgument;
        }
        if (path_count > caches_max) {
            diagnostic.set("{d} caches given; at most {d} are supported", .{ path_count, caches_max });
            return error.InvalidArgument;
        }
        for (paths) |path| {
            if (path.len == 0 or std.mem.indexOfScalar(u8, path, 0) != null) {
                diagnostic.set("cache path '{s}' must be a non-empty path without NUL bytes", .{path});
                return error.InvalidArgument;
            }
        }
        if (options.prefetch_size == 0) {
            diagnostic.set("prefetch_size must be at least 1", .{});
            return error.InvalidArgument;
        }
    }

    fn checkSameSchema(first: *const Cache, other: *const Cache, diagnostic: *Diagnostic) Error!void {
        const expected = first.schema();
        const actual = other.schema();
        const same = expected.len == actual.len and for (expected, actual) |a, b| {
            if (a.kind != b.kind or !std.mem.eql(u8, a.name, b.name)) break false;
        } else true;
        if (!same) {
            diagnostic.set("all caches must share the same metadata schema: {s} differs from {s}", .{ other.path, first.path });
            return error.InvalidCache;
        }
    }

    pub fn acquire(dataset: *Dataset) *Dataset {
        _ = dataset.references.fetchAdd(1, .monotonic);
        return dataset;
    }

    /// Drops one reference; the last one closes the caches and frees the dataset.
    pub fn release(dataset: *Dataset) void {
        if (dataset.references.fetchSub(1, .acq_rel) != 1) return;
        const pool = dataset.pool;
        dataset.table.release();
        for (dataset.caches) |cache| cache.close();
        dataset.allocator.free(dataset.caches);
        dataset.allocator.free(dataset.cache_starts);
        dataset.allocator.destroy(dataset);
        pool.release();
    }

    pub fn schema(dataset: *const Dataset) []const types.Field {
        return dataset.caches[0].schema();
    }

    /// Samples the next iterator will yield.
    pub fn len(dataset: *Dataset) u64 {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return dataset.epoch_len orelse dataset.table.row_count;
    }

    pub fn setEpochLen(dataset: *Dataset, epoch_len: u64, diagnostic: *Diagnostic) Error!void {
        if (epoch_len < 1) {
            diagnostic.set("epoch_len must be at least 1", .{});
            return error.InvalidArgument;
        }
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        dataset.epoch_len = epoch_len;
    }

    /// Installs `table` (already validated and built) and resets the stream.
    pub fn replaceTable(dataset: *Dataset, table: *ActiveTable) void {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        const old = dataset.table;
        dataset.table = table;
        dataset.position = 0;
        dataset.mutex.unlock(io);
        old.release();
    }

    /// A reference to the current table; release it when done.
    pub fn acquireTable(dataset: *Dataset) *ActiveTable {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return dataset.table.acquire();
    }

    /// Takes the next epoch of the stream: the snapshot an iterator reads.
    pub fn takeEpoch(dataset: *Dataset) read_pipeline.Plan {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        const count = dataset.epoch_len orelse dataset.table.row_count;
        const plan: read_pipeline.Plan = .{
            .caches = dataset.caches,
            .table = dataset.table.acquire(),
            .shuffle = dataset.options.shuffle,
            .key = dataset.key,
            .start = dataset.position,
            .count = count,
        };
        // The stream position wraps after 2^64 draws, far beyond any training run.
        dataset.position +%= count;
        return plan;
    }
};

/// An iterator over one epoch, read by the pool.
pub const Iterator = struct {
    dataset: *Dataset,
    pipeline: *read_pipeline.Pipeline,

    /// `defer_payload_bytes`: see `read_pipeline.Plan` (0 reads every payload into the batches).
    pub fn create(dataset: *Dataset, defer_payload_bytes: u64) Error!*Iterator {
        const allocator = dataset.allocator;
        const iterator = try allocator.create(Iterator);
        errdefer allocator.destroy(iterator);
        var plan = dataset.takeEpoch();
        plan.defer_payload_bytes = defer_payload_bytes;
        errdefer plan.table.release();
        iterator.* = .{
            .dataset = dataset,
            .pipeline = try read_pipeline.Pipeline.create(allocator, dataset.pool, plan, dataset.options.prefetch_size),
        };
        _ = dataset.acquire();
        return iterator;
    }

    pub fn destroy(iterator: *Iterator) void {
        const dataset = iterator.dataset;
        iterator.pipeline.destroy();
        dataset.allocator.destroy(iterator);
        dataset.release();
    }

    pub fn next(iterator: *Iterator, diagnostic: *Diagnostic) Error!?*@import("sample_batch.zig").SampleBatch {
        return iterator.pipeline.next(diagnostic);
    }

    pub fn bytesHeld(iterator: *const Iterator) u64 {
        return iterator.pipeline.bytes_held.load(.monotonic);
    }
};
