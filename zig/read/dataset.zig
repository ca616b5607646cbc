//! Caches loaded together for reading, their active table and stream state.
//!
//! Inside the core a cache is named by its position in the list given to `open`
//! (`Location.cache_id`); what users see is its cache_id (`cacheIds`: the id a
//! format 3 manifest persists, else the position), translated where samples and
//! tables cross out and identities come in. sample_id is the physical row inside
//! that cache. The dataset owns the stream position: each new iterator takes the next
//! epoch (`epoch_len` positions, or the rest of an epoch a loaded resume state stopped
//! in), or one rank's and worker's share of it (`stream_share`); installing a new table
//! (with its mix: dataset_mix.zig) resets the position to 0, keeping an explicit length.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const sampler = @import("../stream/sampler.zig");
const Cache = @import("cache_reader.zig").Cache;
const remote_cache = @import("remote_cache.zig");
const Remote = @import("remote.zig").Remote;
const cache_identity = @import("../format/cache_identity.zig");
const active_table = @import("../stream/active_table.zig");
const ActiveTable = active_table.ActiveTable;
const read_pipeline = @import("read_pipeline.zig");
const stream_share = @import("../stream/stream_share.zig");
const stream_state = @import("../stream/stream_state.zig");
const thread_pool = @import("../base/thread_pool.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;

pub const Error = error{
    InvalidArgument,
    InvalidInput,
    InvalidCache,
    Io,
    OutOfMemory,
    State,
    OutOfRange,
};

pub const Options = struct {
    seed: u64,
    prefetch_size: u32,
    shuffle: bool,
    validate_cache: bool,
    /// With `shuffle`: weighted draws (true) or each epoch a permutation (false).
    replacement: bool = true,
    /// The fetch hook of remote caches' paths (`remote_cache.zig`); needed if any.
    remote: ?*Remote = null,

    pub fn sampling(options: Options) stream_state.Sampling {
        return .of(options.shuffle, options.replacement);
    }
};

pub const caches_max = 1 << 20;

/// What a stream iterator does with a sample whose record fails its checks
/// (`error.InvalidCache`: checksum, placement, framing, embedded metadata, LZ4):
/// fail the read, or leave the sample out and list it in its batch.
pub const OnCorrupt = enum(u32) { raise = 0, skip = 1 };
/// How deferred payloads are handed out: read by the consumer into memory of
/// its own (`copy`), or checked in place in a mapping of their shard (`mapped`).
pub const Payloads = enum(u32) { copy = 0, mapped = 1 };

pub const Dataset = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    options: Options,
    key: sampler.Key,
    caches: []*Cache,
    /// Samples before cache i, so a global row maps to (cache_id, sample_id).
    cache_starts: []u64,
    sample_count: u64,
    /// Each cache's cache_id, and the position of each id.
    ids: cache_identity.CacheIds = .{ .by_position = &.{}, .sorted = &.{} },

    /// The binding's handle and every iterator hold one reference.
    references: std.atomic.Value(u32) = .init(1),

    // Stream state, guarded by `mutex`.
    mutex: std.Io.Mutex = .init,
    table: *ActiveTable,
    /// The next epoch: its number since the table was installed, its first
    /// stream position, and how much of it a loaded resume state had consumed.
    epoch: u64 = 0,
    epoch_start: u64 = 0,
    consumed: u64 = 0,
    /// Set by `setEpochLen`; otherwise the table's (its mix's total, or its row count).
    epoch_len: ?u64 = null,
    /// Set by `setOnCorrupt`: what stream iterators created afterwards do
    /// with a corrupt record. Reads by identity always fail on one.
    on_corrupt: OnCorrupt = .raise,
    /// Set by `setPayloads`: how later stream iterators and reads hand out deferred payloads.
    payloads: Payloads = .copy,

    pub fn open(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        paths: []const []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!*Dataset {
        try validateOptions(paths, options, diagnostic);
        assert(paths.len >= 1 and paths.len <= caches_max);
        const dataset = try allocator.create(Dataset);
        errdefer allocator.destroy(dataset);
        dataset.* = .{
            .allocator = allocator,
            .pool = pool,
            .options = options,
            .key = options.sampling().key(options.seed),
            .caches = try allocator.alloc(*Cache, paths.len),
            .cache_starts = &.{},
            .sample_count = 0,
            .table = undefined,
        };
        errdefer allocator.free(dataset.caches);
        dataset.cache_starts = try allocator.alloc(u64, paths.len);
        errdefer allocator.free(dataset.cache_starts);
        try openCaches(allocator, pool, paths, options, dataset.caches, diagnostic);
        errdefer for (dataset.caches) |cache| cache.close();
        dataset.ids = try buildIds(allocator, dataset.caches, diagnostic);
        errdefer dataset.ids.deinit(allocator);
        dataset.sample_count = try countSamples(dataset.caches, dataset.cache_starts, diagnostic);
        dataset.table = try ActiveTable.createDefault(
            allocator,
            dataset.cache_starts,
            dataset.sample_count,
        );
        assert(dataset.table.row_count == dataset.sample_count);
        _ = pool.acquire(); // released with the dataset's last reference
        return dataset;
    }

    /// The samples of all `caches`, with where each cache's start into
    /// `starts`, once their schemas are checked to agree.
    fn countSamples(caches: []const *Cache, starts: []u64, diagnostic: *Diagnostic) Error!u64 {
        assert(caches.len == starts.len and caches.len > 0);
        var total: u64 = 0;
        for (caches, starts) |cache, *start| {
            start.* = total;
            total = std.math.add(u64, total, cache.sampleCount()) catch {
                diagnostic.set("the caches hold more than 2^64 samples", .{});
                return error.InvalidCache;
            };
            try checkSameSchema(caches[0], cache, diagnostic);
        }
        if (total == 0) {
            diagnostic.set("the caches hold no samples", .{});
            return error.InvalidCache;
        }
        assert(starts[0] == 0 and starts[starts.len - 1] <= total);
        return total;
    }

    /// Opens every cache on the pool, at most `workerCount` at a time. On any
    /// failure every opened cache is closed and the first failure (in path
    /// order) is reported, so a dataset is never half-valid.
    fn openCaches(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        paths: []const []const u8,
        options: Options,
        caches_out: []*Cache,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(paths.len == caches_out.len and paths.len > 0);
        assert(pool.workerCount() > 0);
        const jobs = try allocator.alloc(OpenJob, paths.len);
        defer allocator.free(jobs);
        for (jobs, paths) |*job, path| job.* = .{
            .path = path,
            .validate_hashes = options.validate_cache,
            .remote = options.remote,
            .allocator = allocator,
        };
        var wave_start: usize = 0;
        while (wave_start < jobs.len) {
            const wave = jobs[wave_start..@min(jobs.len, wave_start + pool.workerCount())];
            assert(wave.len > 0);
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
        for (jobs, caches_out) |job, *cache| {
            assert(job.failure == null);
            cache.* = job.cache.?;
        }
    }

    const OpenJob = struct {
        job: thread_pool.Job = .{ .run = run },
        allocator: std.mem.Allocator,
        path: []const u8,
        validate_hashes: bool,
        remote: ?*Remote,
        group: *thread_pool.WaitGroup = undefined,
        cache: ?*Cache = null,
        failure: ?Error = null,
        diagnostic: Diagnostic = .{},

        fn run(job: *thread_pool.Job) void {
            const open_job: *OpenJob = @fieldParentPtr("job", job);
            open_job.cache = remote_cache.open(
                open_job.allocator,
                open_job.path,
                open_job.validate_hashes,
                open_job.remote,
                &open_job.diagnostic,
            ) catch |err| blk: {
                open_job.failure = err;
                break :blk null;
            };
            // Either a cache or the reason there is none.
            assert((open_job.cache == null) != (open_job.failure == null));
            open_job.group.finish();
        }
    };

    fn validateOptions(
        paths: []const []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!void {
        const path_count = paths.len;
        if (path_count == 0) {
            diagnostic.set("at least one cache path is required", .{});
            return error.InvalidArgument;
        }
        if (path_count > caches_max) {
            diagnostic.set(
                "{d} caches given; at most {d} are supported",
                .{ path_count, caches_max },
            );
            return error.InvalidArgument;
        }
        for (paths) |path| {
            if (path.len == 0 or std.mem.indexOfScalar(u8, path, 0) != null) {
                diagnostic.set(
                    "cache path '{s}' must be a non-empty path without NUL bytes",
                    .{path},
                );
                return error.InvalidArgument;
            }
        }
        if (options.prefetch_size == 0) {
            diagnostic.set("prefetch_size must be at least 1", .{});
            return error.InvalidArgument;
        }
        assert(path_count >= 1 and path_count <= caches_max);
    }

    /// Names the column where `other`'s schema parts from `first`'s, and how.
    fn checkSameSchema(
        first: *const Cache,
        other: *const Cache,
        diagnostic: *Diagnostic,
    ) Error!void {
        // Parsed manifests hold schemas sorted by name, names unique.
        assert(types.isSortedUnique(first.schema()) and types.isSortedUnique(other.schema()));
        const difference = types.schemaDifference(first.schema(), other.schema()) orelse return;
        assert(difference.first != null or difference.second != null);
        const phrase = "all caches must share the same metadata schema: column";
        const column = Excerpt.ofName(difference.name);
        if (difference.first) |first_kind| {
            if (difference.second) |other_kind| {
                diagnostic.set(
                    "{s} '{f}' is {s} in {s} but {s} in {s}",
                    .{
                        phrase,
                        column,
                        first_kind.name(),
                        first.path,
                        other_kind.name(),
                        other.path,
                    },
                );
            } else {
                diagnostic.set(
                    "{s} '{f}' is in {s} but not in {s}",
                    .{ phrase, column, first.path, other.path },
                );
            }
        } else {
            diagnostic.set(
                "{s} '{f}' is in {s} but not in {s}",
                .{ phrase, column, other.path, first.path },
            );
        }
        return error.InvalidCache;
    }

    /// The caches' ids by position, and refuses two caches with one id.
    fn buildIds(
        allocator: std.mem.Allocator,
        caches: []const *Cache,
        diagnostic: *Diagnostic,
    ) Error!cache_identity.CacheIds {
        const persisted = try allocator.alloc(?u64, caches.len);
        defer allocator.free(persisted);
        for (persisted, caches) |*id, cache| id.* = cache.parsed.manifest.cache_id;
        var duplicate: cache_identity.Duplicate = undefined;
        return cache_identity.CacheIds.build(allocator, persisted, &duplicate) catch |err| {
            switch (err) {
                error.OutOfMemory => return error.OutOfMemory,
                error.DuplicateCacheId => {
                    const first = caches[duplicate.first].path;
                    const second = caches[duplicate.second].path;
                    const phrase = "duplicate cache_id {d}: {s} (paths[{d}]) and {s} (paths[{d}])";
                    const at = .{ duplicate.first, duplicate.second };
                    diagnostic.set(phrase, .{ duplicate.id, first, at[0], second, at[1] });
                    return error.InvalidCache;
                },
            }
        };
    }

    /// The cache_id of each cache, by position.
    pub fn cacheIds(dataset: *const Dataset) []const u64 {
        assert(dataset.ids.by_position.len == dataset.caches.len);
        return dataset.ids.by_position;
    }

    /// The position of the cache whose cache_id is `cache_id`, if any.
    pub fn positionOf(dataset: *const Dataset, cache_id: u64) ?u32 {
        return dataset.ids.positionOf(cache_id);
    }

    /// Where the sample a request names by (cache_id, sample_id) is; refuses
    /// one that names no sample. `index` is its place in the request.
    fn locateIdentity(
        dataset: *const Dataset,
        cache_id: u64,
        sample_id: u64,
        index: usize,
        diagnostic: *Diagnostic,
    ) Error!active_table.Location {
        const phrase = "no sample (cache_id={d}, sample_id={d}) (request {d}): ";
        const position = dataset.positionOf(cache_id) orelse {
            if (dataset.ids.isPositional()) {
                const count = dataset.caches.len;
                const reason = "the dataset has {d} caches";
                diagnostic.set(phrase ++ reason, .{ cache_id, sample_id, index, count });
            } else {
                const reason = "no cache of the dataset has cache_id {d}";
                diagnostic.set(phrase ++ reason, .{ cache_id, sample_id, index, cache_id });
            }
            return error.OutOfRange;
        };
        const sample_count = dataset.caches[position].sampleCount();
        if (sample_id >= sample_count) {
            const reason = "cache {d} has {d} samples";
            const values = .{ cache_id, sample_id, index, cache_id, sample_count };
            diagnostic.set(phrase ++ reason, values);
            return error.OutOfRange;
        }
        assert(dataset.cacheIds()[position] == cache_id);
        return .{ .cache_id = position, .sample_id = sample_id };
    }

    pub fn acquire(dataset: *Dataset) *Dataset {
        // Only a holder of a reference takes another.
        const before = dataset.references.fetchAdd(1, .monotonic);
        assert(before > 0);
        return dataset;
    }

    /// Drops one reference; the last one closes the caches and frees the dataset.
    pub fn release(dataset: *Dataset) void {
        const before = dataset.references.fetchSub(1, .acq_rel);
        assert(before > 0);
        if (before != 1) return;
        const pool = dataset.pool;
        assert(dataset.caches.len == dataset.cache_starts.len);
        dataset.table.release();
        for (dataset.caches) |cache| cache.close();
        dataset.allocator.free(dataset.caches);
        dataset.allocator.free(dataset.cache_starts);
        dataset.ids.deinit(dataset.allocator);
        dataset.allocator.destroy(dataset);
        pool.release();
    }

    pub fn schema(dataset: *const Dataset) []const types.Field {
        return dataset.caches[0].schema();
    }

    /// Positions the next iterator reads (the rest of the next epoch).
    pub fn len(dataset: *Dataset) u64 {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return dataset.nextLocked().remaining();
    }

    pub fn setEpochLen(dataset: *Dataset, epoch_len: u64, diagnostic: *Diagnostic) Error!void {
        if (epoch_len < 1) {
            diagnostic.set("epoch_len must be at least 1", .{});
            return error.InvalidArgument;
        }
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        if (dataset.consumed > 0 and epoch_len != dataset.epochLenLocked()) {
            diagnostic.set(
                "epoch_len cannot change while a loaded state stops in the middle of epoch {d}; " ++
                    "set it before loading the state",
                .{dataset.epoch},
            );
            return error.State;
        }
        dataset.epoch_len = epoch_len;
        assert(dataset.epochLenLocked() == epoch_len);
    }

    pub fn setPayloads(dataset: *Dataset, payloads: Payloads) void {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        dataset.payloads = payloads;
    }

    /// A plan's payload deferral size: 0 (all read with their batch) when a sample
    /// may be skipped, or a budget may evict a shard before its deferred reads.
    fn deferBytes(dataset: *const Dataset, skip_corrupt: bool, requested: u64) u64 {
        if (skip_corrupt) return 0;
        for (dataset.caches) |cache| if (cache.shards.evictable()) return 0;
        return read_pipeline.deferThreshold(requested);
    }

    /// The payloads mode of reads by identity (stream iterators take theirs in `takeEpoch`).
    fn payloadsMapped(dataset: *Dataset) bool {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return dataset.payloads == .mapped;
    }

    pub fn setOnCorrupt(dataset: *Dataset, on_corrupt: OnCorrupt) void {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        dataset.on_corrupt = on_corrupt;
    }

    /// Installs `table` (already validated and built) and resets the stream.
    pub fn replaceTable(dataset: *Dataset, table: *ActiveTable) void {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        const old = dataset.table;
        // The caller's new reference: replacing the table with itself would drop it.
        assert(old != table);
        assert(table.cache_starts.len == dataset.caches.len);
        dataset.table = table;
        dataset.epoch = 0;
        dataset.epoch_start = 0;
        dataset.consumed = 0;
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

    fn epochLenLocked(dataset: *const Dataset) u64 {
        return dataset.epoch_len orelse dataset.table.epochLen();
    }

    /// Where the next iterator starts.
    fn nextLocked(dataset: *const Dataset) stream_state.Position {
        // A loaded state stops inside its epoch; otherwise the next epoch starts whole.
        assert(dataset.consumed == 0 or dataset.consumed < dataset.epochLenLocked());
        return .{
            .epoch = dataset.epoch,
            .epoch_start = dataset.epoch_start,
            .epoch_len = dataset.epochLenLocked(),
            .position = dataset.epoch_start +% dataset.consumed,
        };
    }

    fn setNextLocked(dataset: *Dataset, at: stream_state.Position) void {
        assert(at.offset() < at.epoch_len);
        dataset.epoch = at.epoch;
        dataset.epoch_start = at.epoch_start;
        dataset.consumed = at.offset();
    }

    /// Where the next iterator starts, without the fingerprint.
    pub fn nextPosition(dataset: *Dataset) stream_state.Position {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return dataset.nextLocked();
    }

    /// Makes epoch `epoch` the next one, from its start: the stream as if every
    /// epoch since the table was installed had the current epoch length.
    pub fn setEpoch(dataset: *Dataset, epoch: u64) void {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        dataset.epoch = epoch;
        // Positions wrap after 2^64, like the stream's.
        dataset.epoch_start = epoch *% dataset.epochLenLocked();
        dataset.consumed = 0;
        assert(dataset.nextLocked().offset() == 0);
    }

    /// The fingerprint of the data the stream is a function of, with `table`'s
    /// digest (O(rows) the first time a table is asked).
    pub fn fingerprint(
        dataset: *const Dataset,
        table: *ActiveTable,
        cache_sha256s: []stream_state.Digest,
    ) stream_state.Fingerprint {
        assert(cache_sha256s.len == dataset.caches.len);
        for (cache_sha256s, dataset.caches) |*digest, cache| digest.* = cache.manifest_sha256;
        return .{
            .seed = dataset.options.seed,
            .shuffle = dataset.options.shuffle,
            .algorithm = table.algorithm(dataset.options.sampling()),
            .table_sha256 = table.digest(dataset.cacheIds()),
            .cache_sha256s = cache_sha256s,
        };
    }

    pub const State = struct { at: stream_state.Position, table: *ActiveTable };

    /// Where the next iterator starts and the table it reads (release it).
    pub fn state(dataset: *Dataset) State {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        return .{ .at = dataset.nextLocked(), .table = dataset.table.acquire() };
    }

    /// Like `state`, and moves the stream past that epoch, as an iterator would:
    /// for a process that hands the epoch to others (DataLoader workers) to read.
    pub fn takeState(dataset: *Dataset) State {
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        const at = dataset.nextLocked();
        dataset.setNextLocked(at.nextEpoch());
        assert(dataset.consumed == 0 and dataset.epoch == at.epoch +% 1);
        return .{ .at = at, .table = dataset.table.acquire() };
    }

    /// Continues the stream from a saved state after checking that it belongs to
    /// this data (`stream_state.check`); on any mismatch nothing changes.
    pub fn loadState(
        dataset: *Dataset,
        found: stream_state.Fingerprint,
        at: stream_state.Position,
        diagnostic: *Diagnostic,
    ) Error!void {
        const allocator = dataset.allocator;
        const table = dataset.acquireTable();
        defer table.release();
        const cache_sha256s = try allocator.alloc(stream_state.Digest, dataset.caches.len);
        defer allocator.free(cache_sha256s);
        const paths = try allocator.alloc([]const u8, dataset.caches.len);
        defer allocator.free(paths);
        for (paths, dataset.caches) |*path, cache| path.* = cache.path;
        assert(paths.len == cache_sha256s.len);
        // The digest is computed outside the lock; the table is checked again under it.
        const expected = dataset.fingerprint(table, cache_sha256s);
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        if (dataset.table != table) {
            diagnostic.set("the active table was replaced while the state was being loaded", .{});
            return error.State;
        }
        try stream_state.check(expected, found, dataset.epochLenLocked(), at, paths, diagnostic);
        dataset.setNextLocked(if (at.offset() == at.epoch_len) at.nextEpoch() else at);
        assert(dataset.epochLenLocked() == at.epoch_len);
    }

    /// Takes the next epoch (or its rest) of the stream: the snapshot an
    /// iterator reads, cut to `share` without its first `skip` samples.
    pub fn takeEpoch(
        dataset: *Dataset,
        share: stream_share.Share,
        skip: u64,
        diagnostic: *Diagnostic,
    ) Error!read_pipeline.Plan {
        try share.validate(diagnostic);
        const io = system.io();
        dataset.mutex.lockUncancelable(io);
        defer dataset.mutex.unlock(io);
        const at = dataset.nextLocked();
        const worker_samples = stream_share.counts(at.remaining(), share).worker_samples;
        if (skip > worker_samples) {
            diagnostic.set(
                "cannot skip {d} samples: this reader's share of the epoch has {d}",
                .{ skip, worker_samples },
            );
            return error.InvalidArgument;
        }
        assert(skip <= worker_samples);
        dataset.setNextLocked(at.nextEpoch());
        assert(dataset.consumed == 0);
        return .{
            .caches = dataset.caches,
            .cache_ids = dataset.cacheIds(),
            .table = dataset.table.acquire(),
            .sampling = dataset.options.sampling(),
            .key = dataset.key,
            .walk = stream_share.walk(at.position, at.remaining(), share, skip),
            .span = at,
            .skip_corrupt = dataset.on_corrupt == .skip,
            .map_deferred = dataset.payloads == .mapped,
        };
    }
};

/// An iterator over one epoch, read by the pool.
pub const Iterator = struct {
    dataset: *Dataset,
    pipeline: *read_pipeline.Pipeline,

    /// `defer_payload_bytes`: see `read_pipeline.Plan` (0 reads every payload into
    /// the batches; `read_pipeline.defer_default` the core's threshold).
    /// `share` and `skip`: see `Dataset.takeEpoch`.
    pub fn create(
        dataset: *Dataset,
        share: stream_share.Share,
        skip: u64,
        defer_payload_bytes: u64,
        diagnostic: *Diagnostic,
    ) Error!*Iterator {
        const allocator = dataset.allocator;
        const iterator = try allocator.create(Iterator);
        errdefer allocator.destroy(iterator);
        var plan = try dataset.takeEpoch(share, skip, diagnostic);
        // A skipped sample leaves its batch before it is handed out (`deferBytes`).
        plan.defer_payload_bytes = dataset.deferBytes(plan.skip_corrupt, defer_payload_bytes);
        errdefer plan.table.release();
        assert(plan.identities == null);
        assert(!plan.skip_corrupt or plan.defer_payload_bytes == 0);
        iterator.* = .{
            .dataset = dataset,
            .pipeline = try read_pipeline.Pipeline.create(
                allocator,
                dataset.pool,
                plan,
                dataset.options.prefetch_size,
            ),
        };
        _ = dataset.acquire();
        return iterator;
    }

    /// An iterator over the samples `(cache_ids[i], sample_ids[i])` in order,
    /// read and checked like the stream's; the stream itself does not move.
    /// Any identity, in the active table or not; an unknown one is refused
    /// (error.OutOfRange) before anything is read.
    pub fn createReads(
        dataset: *Dataset,
        cache_ids: []const u64,
        sample_ids: []const u64,
        defer_payload_bytes: u64,
        diagnostic: *Diagnostic,
    ) Error!*Iterator {
        assert(cache_ids.len == sample_ids.len);
        const allocator = dataset.allocator;
        const identities = try allocator.alloc(active_table.Location, cache_ids.len);
        errdefer allocator.free(identities);
        for (identities, cache_ids, sample_ids, 0..) |*identity, cache_id, sample_id, index| {
            identity.* = try dataset.locateIdentity(cache_id, sample_id, index, diagnostic);
        }
        const iterator = try allocator.create(Iterator);
        errdefer allocator.destroy(iterator);
        const snapshot = dataset.acquireTable();
        errdefer snapshot.release();
        const plan: read_pipeline.Plan = .{
            .caches = dataset.caches,
            .cache_ids = dataset.cacheIds(),
            .table = snapshot,
            .sampling = dataset.options.sampling(),
            .key = dataset.key,
            .walk = .contiguous(0, identities.len),
            .span = .{ .epoch_len = identities.len },
            .identities = identities,
            .defer_payload_bytes = dataset.deferBytes(false, defer_payload_bytes),
            .map_deferred = dataset.payloadsMapped(),
        };
        assert(plan.walk.count == identities.len);
        iterator.* = .{
            .dataset = dataset,
            .pipeline = try read_pipeline.Pipeline.create(
                allocator,
                dataset.pool,
                plan,
                dataset.options.prefetch_size,
            ),
        };
        _ = dataset.acquire();
        assert(iterator.readsByIdentity());
        return iterator;
    }

    pub fn destroy(iterator: *Iterator) void {
        const dataset = iterator.dataset;
        assert(dataset.references.load(.monotonic) >= 1); // the iterator's own
        iterator.pipeline.destroy();
        dataset.allocator.destroy(iterator);
        dataset.release();
    }

    pub fn next(
        iterator: *Iterator,
        diagnostic: *Diagnostic,
    ) Error!?*@import("sample_batch.zig").SampleBatch {
        return iterator.pipeline.next(diagnostic);
    }

    pub fn bytesHeld(iterator: *const Iterator) u64 {
        return iterator.pipeline.bytes_held.load(.monotonic);
    }

    /// The stream position after this iterator's first `consumed` samples, for
    /// an iterator that reads its epoch's positions in order (one rank, one
    /// worker): the rest of the epoch, or the next epoch once it is all read.
    pub fn position(
        iterator: *const Iterator,
        consumed: u64,
        diagnostic: *Diagnostic,
    ) Error!stream_state.Position {
        const plan = &iterator.pipeline.plan;
        if (iterator.readsByIdentity()) {
            diagnostic.set(
                "this iterator reads samples by identity; it has no stream position",
                .{},
            );
            return error.State;
        }
        if (!plan.walk.isContiguous()) {
            diagnostic.set(
                "this iterator reads one rank's or worker's share of the epoch, which has no " ++
                    "single stream position; take the state from the loader that combines the " ++
                    "shares",
                .{},
            );
            return error.State;
        }
        if (consumed > plan.walk.count) {
            diagnostic.set(
                "consumed {d} samples of an iterator that yields {d}",
                .{ consumed, plan.walk.count },
            );
            return error.InvalidArgument;
        }
        // One rank, one worker: the walk is the rest of the epoch, in order.
        assert(plan.walk.isContiguous() and consumed < plan.walk.count + 1);
        if (consumed == plan.walk.count) return plan.span.nextEpoch();
        const after = plan.span.advanced(plan.walk.first + consumed);
        assert(after.epoch_len == plan.span.epoch_len);
        return after;
    }

    /// The rest of the epoch this iterator's share was cut from, as it stood
    /// when the iterator was created.
    pub fn span(iterator: *const Iterator) stream_state.Position {
        return iterator.pipeline.plan.span;
    }

    /// True for an iterator made by `createReads`.
    pub fn readsByIdentity(iterator: *const Iterator) bool {
        return iterator.pipeline.plan.identities != null;
    }

    pub fn table(iterator: *const Iterator) *ActiveTable {
        return iterator.pipeline.plan.table;
    }
};

test {
    _ = @import("dataset_test.zig");
}
