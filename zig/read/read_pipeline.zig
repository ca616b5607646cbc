//! One iterator's read pipeline: planner -> bounded reads on the pool ->
//! reorder buffer -> batches for the caller.
//!
//! The planned samples are cut into chunks of up to `prefetch_size` samples
//! (fewer when their records are large); each is one pool job that reads its
//! samples into a batch of its own. Chunks are submitted while at most
//! `window` = min(num_workers, prefetch_size) are in flight and the samples
//! read ahead stay within `prefetch_size`: small samples go in one large chunk
//! at a time (the consumer's per-chunk cost is paid rarely), large ones in
//! several small chunks read in parallel. `next` hands out chunks strictly in
//! planned order, whatever order the workers finish in, and only then submits
//! more: a consumer that stops calling `next` stops all reading, so memory
//! stays bounded by `prefetch_size` samples. Under a remote byte budget that
//! does not hold every shard, a chunk reads one run of one shard and the
//! reads ahead stay within the shards the budget holds (`FetchAhead.runEnd`,
//! `withinShardWindow`).
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sampler = @import("../stream/sampler.zig");
const stream_share = @import("../stream/stream_share.zig");
const stream_state = @import("../stream/stream_state.zig");
const thread_pool = @import("../base/thread_pool.zig");
const active_table = @import("../stream/active_table.zig");
const ActiveTable = active_table.ActiveTable;
const Cache = @import("cache_reader.zig").Cache;
const open_shards = @import("open_shards.zig");
const record_read = @import("record_read.zig");
const sample_batch = @import("sample_batch.zig");
const SampleBatch = sample_batch.SampleBatch;
const deferred_reads = @import("deferred_reads.zig");
const released_batches = @import("released_batches.zig");
const fetch_ahead = @import("fetch_ahead.zig");
pub const DeferredRead = deferred_reads.DeferredRead;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// Chunks never exceed this many samples, so one chunk stays a modest allocation
/// that fits the consumer's caches.
pub const chunk_samples_max = 256;
/// Chunks hold about this many bytes of records at most, by their caches'
/// mean record length.
pub const chunk_bytes_max = 4 << 20;
/// An iterator's first chunk holds at most this many samples: the first sample
/// waits for its whole chunk to be read and unpacked, so a short first chunk
/// starts the consumer sooner while the next, full-sized chunks are read.
pub const first_chunk_samples_max = 1;

/// Samples per chunk for these caches: up to `chunk_samples_max`, and fewer
/// when the records are large (by the largest mean record length among the
/// caches, from their manifests), so large samples are read as several small
/// chunks in parallel rather than one huge chunk. Sized from the manifests, not
/// per record: looking up each planned sample's record on the consumer's
/// thread cost a random index access per sample in a shuffled pass.
fn chunkSamplesFor(caches: []const *Cache) u32 {
    var record_len: u64 = 1;
    for (caches) |cache| record_len = @max(record_len, cache.meanRecordLen());
    return chunkSamplesForRecordLen(record_len);
}

fn chunkSamplesForRecordLen(record_len: u64) u32 {
    assert(record_len >= 1);
    const chunk_records = std.math.divCeil(u64, chunk_bytes_max, record_len) catch unreachable;
    const samples: u32 = @intCast(@min(chunk_samples_max, chunk_records));
    assert(samples >= 1 and samples <= chunk_samples_max);
    return samples;
}

test "chunks hold about chunk_bytes_max of records, 1 to chunk_samples_max samples" {
    try std.testing.expectEqual(chunk_samples_max, chunkSamplesForRecordLen(1));
    try std.testing.expectEqual(
        chunk_samples_max,
        chunkSamplesForRecordLen(1100),
    ); // W1's 1 KiB samples
    try std.testing.expectEqual(
        @as(u32, 4),
        chunkSamplesForRecordLen((1 << 20) + 100),
    ); // W2's 1 MiB samples
    try std.testing.expectEqual(@as(u32, 4), chunkSamplesForRecordLen(1 << 20));
    try std.testing.expectEqual(@as(u32, 1), chunkSamplesForRecordLen(chunk_bytes_max));
    try std.testing.expectEqual(@as(u32, 1), chunkSamplesForRecordLen(std.math.maxInt(u64)));
}

/// What an iterator reads: fixed at creation (the snapshot).
pub const Plan = struct {
    caches: []const *Cache,
    /// The cache_id of each cache (`Dataset.cache_ids`): what a batch says of its samples.
    cache_ids: []const u64,
    table: *ActiveTable,
    sampling: stream_state.Sampling,
    key: sampler.Key,
    /// The stream positions read, in order.
    walk: stream_share.Walk,
    /// Where the span the walk was cut from starts (the epoch's unconsumed rest).
    span: stream_state.Position,
    /// Reads by identity: these samples in this order (owned by the plan),
    /// with the walk `contiguous(0, len)` indexing them, instead of the
    /// table's rows at the walk's stream positions.
    identities: ?[]active_table.Location = null,
    /// Raw payloads of at least this many bytes are left in their shards for
    /// the consumer to read into memory of its own (`readDeferred`); 0: never.
    defer_payload_bytes: u64 = 0,
    /// Check deferred payloads in place in their shards' mappings while the
    /// chunk is read, and hand them out there (`drt_batch_mapped`), instead of
    /// leaving them for the consumer to read.
    map_deferred: bool = false,
    /// Leave out a sample whose record fails its checks (listed in its batch's
    /// `skipped`) instead of failing the read; only with nothing deferred.
    skip_corrupt: bool = false,

    /// The sample read at planned index `index` (`planner` is the plan's own).
    pub fn locate(
        plan: *const Plan,
        planner: *active_table.RowPlanner,
        index: u64,
    ) active_table.Location {
        assert(index < plan.walk.count);
        const at = plan.walk.position(index);
        const location = if (plan.identities) |identities|
            identities[@intCast(at)]
        else
            plan.table.location(planner.row(at));
        assert(location.cache_id < plan.caches.len);
        return location;
    }
};

/// What a caller passes to defer at the core's own threshold (`DRT_DEFER_DEFAULT`).
pub const defer_default = std.math.maxInt(u64);
/// The core's threshold: from about this size, one copy from the file into the
/// consumer's memory costs less than a copy into a batch and another out of it.
pub const defer_default_bytes: u64 = 64 * 1024;

/// The threshold a caller's `defer_payload_bytes` stands for.
pub fn deferThreshold(defer_payload_bytes: u64) u64 {
    return if (defer_payload_bytes == defer_default) defer_default_bytes else defer_payload_bytes;
}

/// How long `next` spins for its chunk before it sleeps. On a virtual machine
/// a sleeping thread's vCPU goes idle, and waking it costs tens of
/// microseconds, paid once per chunk when the consumer is a little faster than
/// the worker; a shorter spin gave most of that cost back (see also
/// `thread_pool.job_wait_spin_ns`).
const chunk_wait_spin_ns = 100 * std.time.ns_per_us;

const ChunkState = enum(u8) { idle, running, done };

const Chunk = struct {
    job: thread_pool.Job = .{ .run = Pipeline.runChunk },
    pipeline: *Pipeline,
    /// Set to `.done` by the worker (atomically, for `next`'s spin);
    /// otherwise only by the consumer.
    state: ChunkState = .idle,
    /// Planned indexes first .. first + count (relative to the plan's start).
    first: u64 = 0,
    count: u32 = 0,
    batch: ?*SampleBatch = null,
    failure: ?Error = null,
    diagnostic: Diagnostic = .{},
};

pub const Pipeline = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    plan: Plan,
    /// The most samples read ahead (submitted, not yet handed out) at once.
    prefetch_size: u32,
    chunk_samples: u32,
    /// Payload bytes per sample a chunk's batch reserves before it is read
    /// (`payloadReserve`).
    payload_reserve: u64,
    chunks: []Chunk,
    /// Planned index of the next chunk to submit / to hand out.
    next_submit: u64 = 0,
    next_deliver: u64 = 0,
    /// Chunks submitted / handed out so far; chunk n uses slot n % window.
    chunks_submitted: u64 = 0,
    chunks_delivered: u64 = 0,
    mutex: std.Io.Mutex = .init,
    finished: std.Io.Condition = .init,
    cancelled: std.atomic.Value(bool) = .init(false),
    /// Payload and metadata bytes of batches the pipeline holds (in flight or
    /// read but not yet handed out): the memory a stalled consumer pins.
    bytes_held: std.atomic.Value(u64) = .init(0),
    /// Fetches the plan's remote shards ahead of need; null without remote caches.
    ahead: ?*fetch_ahead.FetchAhead = null,

    pub fn create(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        plan: Plan,
        prefetch_size: u32,
    ) Error!*Pipeline {
        assert(prefetch_size >= 1);
        // A skipped sample must leave its batch before the batch is handed out.
        assert(!plan.skip_corrupt or plan.defer_payload_bytes == 0);
        const window: u32 = @max(1, @min(pool.workerCount(), prefetch_size));
        const chunk_samples: u32 = @min(prefetch_size, chunkSamplesFor(plan.caches));
        const pipeline = try allocator.create(Pipeline);
        errdefer allocator.destroy(pipeline);
        pipeline.* = .{
            .allocator = allocator,
            .pool = pool,
            .plan = plan,
            .prefetch_size = prefetch_size,
            .chunk_samples = chunk_samples,
            .payload_reserve = payloadReserve(plan.caches, plan.defer_payload_bytes),
            .chunks = try allocator.alloc(Chunk, window),
        };
        errdefer allocator.free(pipeline.chunks);
        for (pipeline.chunks) |*chunk| chunk.* = .{ .pipeline = pipeline };
        const FetchAhead = fetch_ahead.FetchAhead;
        pipeline.ahead = try FetchAhead.create(allocator, &pipeline.plan, prefetch_size);
        pipeline.submitAvailable();
        return pipeline;
    }

    /// Cancels outstanding reads, waits for running jobs and frees everything.
    /// The plan's table reference is released too.
    pub fn destroy(pipeline: *Pipeline) void {
        const io = system.io();
        assert(pipeline.chunks.len > 0);
        pipeline.cancelled.store(true, .release);
        // First: a read waiting for a queued fetch ahead then fetches itself.
        if (pipeline.ahead) |ahead| ahead.destroy();
        pipeline.mutex.lockUncancelable(io);
        for (pipeline.chunks) |*chunk| {
            while (chunk.state == .running) pipeline.finished.waitUncancelable(io, &pipeline.mutex);
            assert(chunk.state != .running);
        }
        pipeline.mutex.unlock(io);
        for (pipeline.chunks) |*chunk| pipeline.dropBatch(chunk);
        released_batches.freeAll();
        pipeline.plan.table.release();
        if (pipeline.plan.identities) |identities| pipeline.allocator.free(identities);
        pipeline.allocator.free(pipeline.chunks);
        pipeline.allocator.destroy(pipeline);
    }

    /// The next batch in planned order, or null at the end of the plan.
    /// The caller owns the batch (free with `releaseBatch`).
    pub fn next(pipeline: *Pipeline, diagnostic: *Diagnostic) Error!?*SampleBatch {
        if (pipeline.next_deliver >= pipeline.plan.walk.count) return null;
        const io = system.io();
        const chunk = pipeline.slot(pipeline.chunks_delivered);
        // A chunk no worker has started yet (asleep, or busy elsewhere) is read
        // here: waking a worker and then being woken by it costs more than the
        // read of a short chunk, the first above all.
        if (isRunning(chunk) and pipeline.pool.takeBack(&chunk.job)) runChunk(&chunk.job);
        // About to wait for a worker: free released batches here, in time that
        // would go to waiting, instead of adding them to a busy worker's chunk.
        if (isRunning(chunk) and released_batches.anyWaiting()) released_batches.freeAll();
        thread_pool.spinWhile(@as(*const Chunk, chunk), isRunning, chunk_wait_spin_ns);
        pipeline.mutex.lockUncancelable(io);
        while (chunk.state == .running) pipeline.finished.waitUncancelable(io, &pipeline.mutex);
        pipeline.mutex.unlock(io);
        assert(chunk.state == .done and chunk.first == pipeline.next_deliver);
        if (chunk.failure) |failure| {
            diagnostic.* = chunk.diagnostic;
            return failure;
        }
        const batch = chunk.batch.?;
        // A chunk that did not fail holds every sample it was planned for,
        // read or (with skip_corrupt) listed as skipped.
        assert(batch.sample_ids.items.len + batch.skipped.items.len == chunk.count);
        assert(pipeline.plan.skip_corrupt or batch.skipped.items.len == 0);
        chunk.batch = null;
        chunk.state = .idle;
        _ = pipeline.bytes_held.fetchSub(batch.byteLen(), .monotonic);
        pipeline.next_deliver += chunk.count;
        pipeline.chunks_delivered += 1;
        if (pipeline.ahead) |ahead| ahead.advance(pipeline.next_deliver);
        pipeline.submitAvailable();
        return batch;
    }

    fn isRunning(chunk: *const Chunk) bool {
        return @atomicLoad(ChunkState, &chunk.state, .acquire) == .running;
    }

    /// Reads payloads this pipeline's batches deferred into the caller's
    /// memory, one copy from the file, shared between the calling thread and
    /// the pool (see `deferred_reads`).
    pub fn readDeferred(
        pipeline: *const Pipeline,
        reads: []const DeferredRead,
        diagnostic: *Diagnostic,
    ) Error!void {
        if (std.debug.runtime_safety) for (reads) |read| {
            assert(read.entry.cache_id < pipeline.plan.caches.len);
            assert(read.destination.len == read.entry.location.len);
        };
        return deferred_reads.readAll(
            pipeline.allocator,
            pipeline.pool,
            pipeline.plan.caches,
            reads,
            diagnostic,
        );
    }

    pub fn releaseBatch(allocator: std.mem.Allocator, batch: *SampleBatch) void {
        batch.destroy(allocator);
    }

    /// Frees a batch `next` handed out, like `releaseBatch`, but a small one
    /// only waits on a stack (`released_batches`): the frees happen later, on
    /// a pool thread starting a chunk or on a consumer about to wait for one.
    pub fn releaseBatchLater(allocator: std.mem.Allocator, batch: *SampleBatch) void {
        released_batches.release(allocator, batch);
    }

    fn slot(pipeline: *Pipeline, chunk_number: u64) *Chunk {
        return &pipeline.chunks[@intCast(chunk_number % pipeline.chunks.len)];
    }

    /// Submits the next chunks of the plan while a slot of the window is idle
    /// and the samples read ahead stay within `prefetch_size`.
    fn submitAvailable(pipeline: *Pipeline) void {
        if (pipeline.ahead) |ahead| {
            // What this call may submit: its shards are claimed in first-use order.
            const count = pipeline.plan.walk.count;
            ahead.cover(@min(pipeline.next_deliver + pipeline.prefetch_size, count));
        }
        // A slot is free once the chunk that used it before has been handed out;
        // decided from the consumer's own counters, never from a worker's state.
        while (pipeline.next_submit < pipeline.plan.walk.count and
            pipeline.chunks_submitted < pipeline.chunks_delivered + pipeline.chunks.len)
        {
            const ahead = pipeline.next_submit - pipeline.next_deliver;
            const size = chunkSize(
                pipeline.chunks_submitted,
                pipeline.chunk_samples,
                ahead,
                pipeline.prefetch_size,
            );
            var count: u32 = @intCast(
                @min(size, pipeline.plan.walk.count - pipeline.next_submit),
            );
            if (pipeline.ahead) |fetching| if (fetching.runEnd(pipeline.next_submit)) |end| {
                count = @intCast(@min(count, end - pipeline.next_submit));
            };
            if (ahead + count > pipeline.prefetch_size) break; // (never when nothing is ahead)
            if (ahead > 0) if (pipeline.ahead) |fetching| {
                if (!fetching.withinShardWindow(pipeline.next_submit + count)) break;
            };
            const chunk = pipeline.slot(pipeline.chunks_submitted);
            assert(chunk.state == .idle);
            chunk.first = pipeline.next_submit;
            chunk.count = count;
            pipeline.chunks_submitted += 1;
            chunk.failure = null;
            chunk.diagnostic = .{};
            chunk.state = .running;
            pipeline.next_submit += chunk.count;
            pipeline.pool.submit(&chunk.job);
        }
        // Read ahead: within the window of chunks and within prefetch_size samples.
        assert(
            pipeline.chunks_submitted - pipeline.chunks_delivered <= pipeline.chunks.len,
        );
        assert(pipeline.next_submit - pipeline.next_deliver <= pipeline.prefetch_size);
        assert(pipeline.next_submit <= pipeline.plan.walk.count);
    }

    fn runChunk(job: *thread_pool.Job) void {
        const chunk: *Chunk = @fieldParentPtr("job", job);
        const pipeline = chunk.pipeline;
        assert(isRunning(chunk) and chunk.batch == null);
        if (!pipeline.cancelled.load(.acquire)) {
            pipeline.readChunk(chunk) catch |err| {
                chunk.failure = err;
                if (err == error.OutOfMemory and chunk.diagnostic.len == 0) {
                    chunk.diagnostic.set("out of memory while reading samples", .{});
                }
            };
        }
        // A batch, a failure, or a chunk cancelled before it was read.
        assert(chunk.batch != null or chunk.failure != null or pipeline.cancelled.load(.acquire));
        const io = system.io();
        pipeline.mutex.lockUncancelable(io);
        @atomicStore(ChunkState, &chunk.state, .done, .release);
        pipeline.finished.broadcast(io);
        pipeline.mutex.unlock(io);
    }

    fn readChunk(pipeline: *Pipeline, chunk: *Chunk) Error!void {
        assert(chunk.count > 0 and chunk.batch == null);
        if (released_batches.anyWaiting()) released_batches.freeAll();
        const allocator = pipeline.allocator;
        const plan = &pipeline.plan;
        const batch = try allocator.create(SampleBatch);
        errdefer allocator.destroy(batch);
        batch.* = try SampleBatch.init(allocator, chunk.count, plan.caches[0].schema());
        errdefer batch.deinit(allocator);
        // Room for the payloads and the packed part after them: neither the
        // appends nor `pack` then move the payloads.
        const packed_reserve = 512 + chunk.count * 8 * (3 + 3 * batch.columns.len);
        const payload_reserve = chunk.count * pipeline.payload_reserve + packed_reserve;
        try batch.payloads.ensureTotalCapacity(allocator, @intCast(payload_reserve));
        const locations = try allocator.alloc(active_table.Location, chunk.count);
        defer allocator.free(locations);
        pipeline.locateChunk(chunk, locations);
        // Which shards the chunk reads matters only to a full set of open shards.
        const announced = open_shards.process.full.load(.monotonic);
        if (announced) pipeline.announceShards(locations, open_shards.process.ticket());
        defer if (announced) pipeline.announceShards(locations, null);
        try pipeline.readLocations(chunk, batch, locations);
        try batch.finishDeferred(allocator);
        try batch.codeStrings(allocator);
        try batch.pack(allocator);
        // Every sample planned for the chunk is in the batch or listed as
        // skipped, unless the pipeline was cancelled on the way.
        const accounted = batch.count() + batch.skipped.items.len;
        assert(accounted == chunk.count or pipeline.cancelled.load(.monotonic));
        batch.owner = pipeline;
        chunk.batch = batch;
        _ = pipeline.bytes_held.fetchAdd(batch.byteLen(), .monotonic);
    }

    /// The samples of `chunk`, in stream order, into `locations`; asks the CPU
    /// to load what reading each takes from memory.
    fn locateChunk(
        pipeline: *Pipeline,
        chunk: *const Chunk,
        locations: []active_table.Location,
    ) void {
        const plan = &pipeline.plan;
        assert(locations.len == chunk.count);
        var planner: active_table.RowPlanner = .init(plan.table, plan.sampling, plan.key);
        for (locations, 0..) |*location, offset| {
            location.* = plan.locate(&planner, chunk.first + offset);
            plan.caches[location.cache_id].prefetchSample(location.sample_id);
        }
        for (locations) |location| {
            assert(location.cache_id < plan.caches.len);
            plan.caches[location.cache_id].prefetchSampleStrings(location.sample_id);
        }
    }

    /// Announces to the set of open shards that the shards of `locations`
    /// will be read under `ticket` (`open_shards.Set.announce`), or with null
    /// that they have been (`retire`): each run of one shard once.
    fn announceShards(
        pipeline: *const Pipeline,
        locations: []const active_table.Location,
        ticket: ?u64,
    ) void {
        var previous_cache: u32 = std.math.maxInt(u32);
        var previous_shard: u64 = std.math.maxInt(u64);
        for (locations) |location| {
            const cache = pipeline.plan.caches[location.cache_id];
            const shard_id = cache.shardOf(location.sample_id) orelse continue;
            if (location.cache_id == previous_cache and shard_id == previous_shard) continue;
            previous_cache = location.cache_id;
            previous_shard = shard_id;
            if (ticket) |at| cache.shards.announce(shard_id, at) else cache.shards.retire(shard_id);
        }
    }

    /// Reads the samples at `locations` into `batch`, in order; with
    /// `skip_corrupt`, a corrupt one is listed as skipped instead.
    fn readLocations(
        pipeline: *Pipeline,
        chunk: *Chunk,
        batch: *SampleBatch,
        locations: []const active_table.Location,
    ) Error!void {
        const allocator = pipeline.allocator;
        const plan = &pipeline.plan;
        assert(batch.columns.len == plan.caches[0].schema().len);
        assert(batch.count() == 0 and batch.skipped.items.len == 0);
        var scratch: record_read.Scratch = .{};
        defer scratch.deinit(allocator);
        const output: record_read.Output = .{
            .allocator = allocator,
            .payload = &batch.payloads,
            .metadata_json = &batch.metadata_json,
            .columns = batch.columns,
        };
        for (locations, 0..) |location, offset| {
            if (pipeline.cancelled.load(.monotonic)) break;
            const cache = plan.caches[location.cache_id];
            const request: record_read.Request = .{
                .sample_id = location.sample_id,
                .run_samples = consecutiveRun(locations[offset..]),
                .defer_payload_bytes = plan.defer_payload_bytes,
            };
            const deferred = cache.readSample(
                request,
                &scratch,
                output,
                &chunk.diagnostic,
            ) catch |err| {
                if (err != error.InvalidCache or !plan.skip_corrupt) return err;
                // readSample left the batch as it was; the sample's position is
                // still consumed, so the stream and its states stay the same.
                chunk.diagnostic = .{};
                const cache_id = plan.cache_ids[location.cache_id];
                try batch.skipSample(allocator, cache_id, location.sample_id);
                continue;
            };
            if (deferred) |payload| {
                try pipeline.deferPayload(chunk, batch, location.cache_id, payload);
            }
            try batch.closeSample(allocator, plan.cache_ids[location.cache_id], location.sample_id);
        }
    }

    /// Lists a payload `readSample` left in its shard in `batch`: checked in
    /// its shard's mapping now (`map_deferred`), or for the consumer to read.
    fn deferPayload(
        pipeline: *Pipeline,
        chunk: *Chunk,
        batch: *SampleBatch,
        cache_id: u32,
        payload: record_read.PayloadLocation,
    ) Error!void {
        // Only payloads at the deferral size are left in their shards, and
        // never where a corrupt sample may leave its batch.
        assert(payload.len > 0 and payload.len >= pipeline.plan.defer_payload_bytes);
        assert(!pipeline.plan.skip_corrupt);
        const cache = pipeline.plan.caches[cache_id];
        if (pipeline.plan.map_deferred) {
            // Checked here, ahead of the consumer, and handed out in place.
            const mapped = try cache.mappedPayload(payload, &chunk.diagnostic);
            try batch.deferPayload(pipeline.allocator, cache_id, payload, mapped);
        } else {
            try batch.deferPayload(pipeline.allocator, cache_id, payload, null);
            // The copy happens later on the consumer's thread; the disk read
            // can start now, so the prefetch still hides storage latency.
            cache.prefetchPayload(payload);
        }
        // The sample about to be closed is the last deferred entry.
        assert(batch.deferred.items.len == batch.count() + 1);
    }

    /// Payload bytes to reserve per sample: the largest mean record length of
    /// `caches` (a record holds its payload and more), or nothing where the
    /// mean record is a payload left in its file (`defer_payload_bytes`).
    fn payloadReserve(caches: []const *Cache, defer_payload_bytes: u64) u64 {
        var largest: u64 = 0;
        for (caches) |cache| largest = @max(largest, cache.meanRecordLen());
        return if (defer_payload_bytes != 0 and largest >= defer_payload_bytes) 0 else largest;
    }

    /// How many locations from the first on are the same cache's consecutive samples.
    fn consecutiveRun(locations: []const active_table.Location) u64 {
        assert(locations.len > 0);
        const first = locations[0];
        var count: u64 = 1;
        while (count < locations.len) : (count += 1) {
            const location = locations[@intCast(count)];
            if (location.cache_id != first.cache_id) break;
            if (location.sample_id != first.sample_id + count) break;
        }
        assert(count >= 1 and count <= locations.len);
        return count;
    }

    fn dropBatch(pipeline: *Pipeline, chunk: *Chunk) void {
        const batch = chunk.batch orelse return;
        _ = pipeline.bytes_held.fetchSub(batch.byteLen(), .monotonic);
        releaseBatch(pipeline.allocator, batch);
        chunk.batch = null;
    }
};

/// Samples in an iterator's chunk number `number` (from 0), with `ahead` samples
/// already submitted and not yet handed out: the first chunk is short (the first
/// sample waits for its whole chunk); the second takes what `prefetch_size`
/// leaves, so it is read while the first is consumed; later ones are full.
fn chunkSize(number: u64, chunk_samples: u32, ahead: u64, prefetch_size: u64) u64 {
    if (number == 0) return @min(chunk_samples, first_chunk_samples_max);
    if (number == 1 and ahead < prefetch_size) return @min(chunk_samples, prefetch_size - ahead);
    return chunk_samples;
}

test "chunkSize: a short first chunk, a second that fills the window, then full chunks" {
    try std.testing.expectEqual(@as(u64, first_chunk_samples_max), chunkSize(0, 64, 0, 64));
    try std.testing.expectEqual(
        @as(u64, 64 - first_chunk_samples_max),
        chunkSize(1, 64, first_chunk_samples_max, 64),
    );
    try std.testing.expectEqual(
        @as(u64, 4),
        chunkSize(1, 4, first_chunk_samples_max, 64),
    ); // W2: 4 per chunk
    try std.testing.expectEqual(@as(u64, 64), chunkSize(2, 64, 0, 64));
    try std.testing.expectEqual(
        @as(u64, 64),
        chunkSize(1, 64, 64, 64),
    ); // no room: the caller waits
}

test "deferThreshold: the sentinel stands for the core's threshold, other values for themselves" {
    try std.testing.expectEqual(defer_default_bytes, deferThreshold(defer_default));
    try std.testing.expectEqual(@as(u64, 0), deferThreshold(0));
    try std.testing.expectEqual(@as(u64, 1), deferThreshold(1));
    try std.testing.expectEqual(@as(u64, defer_default - 1), deferThreshold(defer_default - 1));
}
