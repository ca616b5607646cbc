//! Writes one source into one cache directory (format v2).
//!
//! The caller pushes batches of samples in source order. Each batch becomes a
//! pool job that validates the metadata against the schema, writes the canonical
//! record JSON, frames and compresses the records (`batch_encoding.zig`).
//! Encoded batches are committed strictly in push order by whichever worker
//! finished the next one: sample ids, shard rotation, shard writes and index
//! rows. Each shard is hashed (SHA-256) on the pool as it grows, beside the
//! writes, and fsynced in the background once closed (`shard_files.zig`,
//! `file_syncs.zig`). `finish` writes index.bin, metadata.arrow and
//! manifest.json into the staging directory, fsyncs everything and publishes by
//! one rename. Until then nothing is visible under the target path; `destroy`
//! on an unfinished writer removes the staging directory (`staging.zig`).
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const metadata_json = @import("../format/metadata_json.zig");
const metadata_columns = @import("../format/metadata_columns.zig");
const manifest = @import("../format/manifest.zig");
const cache_identity = @import("../format/cache_identity.zig");
const sha256 = @import("../codec/sha256.zig");
const index_file = @import("../format/index_file.zig");
const record_checksums = @import("../format/record_checksums.zig");
const shard_record = @import("../format/shard_record.zig");
const durable_files = @import("../base/durable_files.zig");
const column_builder = @import("../format/column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const thread_pool = @import("../base/thread_pool.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const writer_stats = @import("writer_stats.zig");
const Staging = @import("staging.zig").Staging;
const batch_encoding = @import("batch_encoding.zig");
const Batch = batch_encoding.Batch;
const Encoder = batch_encoding.Encoder;
const shard_files = @import("shard_files.zig");
const push_checks = @import("push_checks.zig");
const FinishFiles = @import("finish_files.zig").FinishFiles;
const page_cache_policy = @import("page_cache_policy.zig");
pub const PageCacheMode = page_cache_policy.Mode;
const ShardFiles = shard_files.ShardFiles;
const FileSyncs = @import("file_syncs.zig").FileSyncs;

pub const Error = error{ InvalidArgument, InvalidInput, Io, OutOfMemory, AlreadyExists, State };

pub const Options = struct {
    max_shard_bytes: u64,
    batches_in_flight_max: u32,
    compression: shard_record.Compression,
    compression_ratio: f64,
    /// The manifest's format: 2, or 3 with the cache_id of the source name
    /// (`cache_identity.fromSourceName`).
    format_version: u32 = manifest.format_version_oldest,
};

/// Batches in flight the writer keeps without a cap from its caller: enough that
/// the pool still has a few MiB to commit while a pusher, waiting for room, syncs
/// a file for it, and two per worker so every worker has one to encode.
pub const in_flight_floor: u32 = 8;

/// The most batches pushed and not yet committed: the caller's cap, and at most
/// `in_flight_floor` or two per worker, whichever is more.
pub fn inFlightLimit(cap: u32, worker_count: u32) u32 {
    assert(cap >= 1);
    assert(worker_count >= 1);
    return @min(cap, @max(in_flight_floor, 2 *| worker_count));
}

pub const StageCounter = writer_stats.StageCounter;
pub const Stats = writer_stats.Stats;

pub const CacheWriter = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    options: Options,
    /// `inFlightLimit` of the options' cap and the pool's workers.
    in_flight_limit: u32,
    source_name: []u8,
    target_path: [:0]u8,
    /// The lock, the staging directory, and publication.
    staging: Staging,
    /// Inferred from the first sample, then enforced for every sample.
    schema: []types.Field = &.{},

    // Pipeline state, guarded by `mutex`.
    mutex: std.Io.Mutex = .init,
    changed: std.Io.Condition = .init,
    batches_pushed: u64 = 0,
    batches_committed: u64 = 0,
    samples_pushed: u64 = 0,
    encoded_waiting: std.ArrayList(*Batch) = .empty,
    committer_active: bool = false,
    failed: bool = false,
    failure: Diagnostic = .{},
    failure_error: Error = error.InvalidInput,
    phase: enum { open, finished, published } = .open,

    /// What the batches' pool jobs encode with; hands them to `enqueueEncoded`.
    encoder: Encoder,

    // Commit state, touched only by the single active committer.
    shard_files: ShardFiles,
    index_bytes: std.ArrayList(u8) = .empty,
    /// records.crc32c as committed so far: one entry per sample.
    checksum_bytes: std.ArrayList(u8) = .empty,
    columns: []ColumnBuilder = &.{},
    sample_count: u64 = 0,

    stats: Stats = .{},
    /// fsyncs of written files, on the pool or on a pusher waiting for room.
    file_syncs: FileSyncs,

    pub fn create(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        base_dir_path: []const u8,
        source_name: []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!*CacheWriter {
        try validateOptions(options, diagnostic);
        try push_checks.checkBaseDir(base_dir_path, diagnostic);
        try push_checks.checkSourceName(source_name, diagnostic);
        const writer = try allocator.create(CacheWriter);
        errdefer allocator.destroy(writer);
        writer.* = .{
            .allocator = allocator,
            .pool = pool,
            .options = options,
            .in_flight_limit = inFlightLimit(options.batches_in_flight_max, pool.workerCount()),
            .source_name = try allocator.dupe(u8, source_name),
            .target_path = undefined,
            .staging = undefined,
            .encoder = .{
                .allocator = allocator,
                .compression = options.compression,
                .stats = &writer.stats,
                .encoded = batchEncoded,
            },
            .shard_files = .{
                .allocator = allocator,
                .pool = pool,
                .syncs = &writer.file_syncs,
                .stats = &writer.stats,
                .max_shard_bytes = options.max_shard_bytes,
                .compression = push_checks.manifestCompression(
                    options.compression,
                    options.compression_ratio,
                ),
                .page_cache = .init(.auto, page_cache_policy.availableMemoryBytes()),
            },
            .file_syncs = .{
                .allocator = allocator,
                .pool = pool,
                .mutex = &writer.mutex,
                .changed = &writer.changed,
                .failed = fileSyncFailed,
            },
        };
        errdefer allocator.free(writer.source_name);
        writer.target_path = try std.fs.path.joinZ(allocator, &.{ base_dir_path, source_name });
        errdefer allocator.free(writer.target_path);
        writer.staging = try Staging.open(
            allocator,
            base_dir_path,
            writer.source_name,
            writer.target_path,
            diagnostic,
        );
        _ = pool.acquire(); // released by destroy
        assert(writer.in_flight_limit >= 1);
        assert(writer.in_flight_limit <= options.batches_in_flight_max);
        assert(writer.phase == .open and writer.samples_pushed == 0);
        return writer;
    }

    /// For the C ABI: checks made before any writer exists.
    pub const checkSourceName = push_checks.checkSourceName;
    pub const checkCompression = push_checks.checkCompression;

    fn validateOptions(options: Options, diagnostic: *Diagnostic) Error!void {
        if (options.max_shard_bytes == 0) {
            diagnostic.set("max_shard_bytes must be at least 1", .{});
            return error.InvalidArgument;
        }
        if (options.batches_in_flight_max == 0) {
            diagnostic.set("batches_in_flight_max must be at least 1", .{});
            return error.InvalidArgument;
        }
        try push_checks.checkCompression(
            options.compression,
            options.compression_ratio,
            diagnostic,
        );
        if (!manifest.versionSupported(options.format_version)) {
            const phrase = "format_version must be {d} or {d}, got {d}";
            const oldest = manifest.format_version_oldest;
            const newest = manifest.format_version_newest;
            diagnostic.set(phrase, .{ oldest, newest, options.format_version });
            return error.InvalidArgument;
        }
        assert(options.max_shard_bytes >= 1 and options.batches_in_flight_max >= 1);
    }

    /// Releases everything; an unpublished cache's staging directory is removed.
    pub fn destroy(writer: *CacheWriter) void {
        const allocator = writer.allocator;
        writer.waitForInFlight();
        // Every batch pushed was committed (or dropped after a failure).
        assert(writer.encoded_waiting.items.len == 0);
        writer.file_syncs.deinit();
        writer.shard_files.deinit();
        for (writer.encoded_waiting.items) |batch| batch.destroy(allocator);
        writer.encoded_waiting.deinit(allocator);
        writer.staging.deinit(writer.phase == .published);
        column_builder.deinitAll(allocator, writer.columns);
        allocator.free(writer.columns);
        writer.index_bytes.deinit(allocator);
        writer.checksum_bytes.deinit(allocator);
        metadata_json.freeSchema(allocator, writer.schema);
        allocator.free(writer.target_path);
        allocator.free(writer.source_name);
        const pool = writer.pool;
        allocator.destroy(writer);
        pool.release();
    }

    /// Copies one batch and queues its encoding; blocks while too many batches are in flight.
    pub fn push(
        writer: *CacheWriter,
        payloads: []const u8,
        payload_lens: []const u64,
        metadata_text: []const u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        try writer.checkPushable(payloads.len, payload_lens, metadata_text, diagnostic);
        if (payload_lens.len == 0) return;
        const batch = try Batch.create(
            &writer.encoder,
            writer.schema,
            payload_lens,
            metadata_text,
            payloads.len,
        );
        errdefer batch.destroy(writer.allocator);
        batch.payloads = try writer.allocator.dupe(u8, payloads);
        batch.payload_parts = try batch_encoding.joinedParts(
            writer.allocator,
            batch.payloads,
            payload_lens,
        );
        assert(batch.count == payload_lens.len and batch.payload_parts.len == batch.count);
        try writer.submitBatch(batch);
    }

    /// Like `push`, but keeps pointers to the payloads instead of copying them:
    /// each must stay unchanged and alive until its sample is committed
    /// (`stats.samples_committed`) or the writer is destroyed.
    pub fn pushBorrowed(
        writer: *CacheWriter,
        payloads: []const ?[*]const u8,
        payload_lens: []const u64,
        metadata_text: []const u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(payloads.len == payload_lens.len);
        const first = writer.samples_pushed;
        const total = try push_checks.borrowedBytes(payloads, payload_lens, first, diagnostic);
        try writer.checkPushable(total, payload_lens, metadata_text, diagnostic);
        if (payload_lens.len == 0) return;
        const batch = try Batch.create(
            &writer.encoder,
            writer.schema,
            payload_lens,
            metadata_text,
            total,
        );
        errdefer batch.destroy(writer.allocator);
        batch.payload_parts = try batch_encoding.borrowedParts(writer.allocator, payloads);
        assert(batch.count == payload_lens.len and batch.payload_parts.len == batch.count);
        try writer.submitBatch(batch);
    }

    /// Like `pushBorrowed`, with the metadata given by column (copied): no
    /// JSON to encode in the caller or to parse here.
    pub fn pushColumns(
        writer: *CacheWriter,
        payloads: []const ?[*]const u8,
        payload_lens: []const u64,
        pushed: []const metadata_columns.PushColumn,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(payloads.len == payload_lens.len);
        const first = writer.samples_pushed;
        const total = try push_checks.borrowedBytes(payloads, payload_lens, first, diagnostic);
        try writer.pushColumnsOf(
            .{ .separate = payloads },
            total,
            payload_lens,
            pushed,
            diagnostic,
        );
    }

    /// Like `pushColumns`, with the payloads back to back in one borrowed
    /// buffer, as `push` takes them (the lengths must add up to its length).
    pub fn pushColumnsJoined(
        writer: *CacheWriter,
        payloads: []const u8,
        payload_lens: []const u64,
        pushed: []const metadata_columns.PushColumn,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(pushed.len <= std.math.maxInt(u32));
        try writer.pushColumnsOf(
            .{ .joined = payloads },
            payloads.len,
            payload_lens,
            pushed,
            diagnostic,
        );
    }

    fn pushColumnsOf(
        writer: *CacheWriter,
        payloads: union(enum) { separate: []const ?[*]const u8, joined: []const u8 },
        total: u64,
        payload_lens: []const u64,
        pushed: []const metadata_columns.PushColumn,
        diagnostic: *Diagnostic,
    ) Error!void {
        try writer.checkPushable(total, payload_lens, null, diagnostic);
        if (payload_lens.len == 0) return;
        assert(writer.phase == .open);
        const allocator = writer.allocator;
        const columns = try allocator.alloc(types.Column, pushed.len);
        defer allocator.free(columns);
        const first_sample = writer.samples_pushed;
        const rows = payload_lens.len;
        for (pushed, columns) |column, *out| {
            out.* = metadata_columns.view(column, rows, first_sample, diagnostic) catch |err| {
                return columnError(err);
            };
        }
        if (writer.schema.len == 0) {
            const inferred = metadata_columns.inferSchema(allocator, columns, diagnostic);
            const schema = inferred catch |err| {
                diagnostic.prefix("sample {d}: ", .{first_sample});
                return columnError(err);
            };
            try writer.adoptSchema(schema);
        }
        const ordered = try allocator.alloc(types.ColumnValues, writer.schema.len);
        defer allocator.free(ordered);
        metadata_columns.orderBySchema(writer.schema, columns, ordered, diagnostic) catch |err| {
            diagnostic.prefix(
                "samples {d}..{d}: ",
                .{ writer.samples_pushed, writer.samples_pushed + payload_lens.len - 1 },
            );
            return columnError(err);
        };
        const batch = try Batch.create(&writer.encoder, writer.schema, payload_lens, "", total);
        errdefer batch.destroy(allocator);
        batch.columns = try column_builder.initAll(allocator, writer.schema);
        for (batch.columns, ordered) |*column, values| try column.appendValues(allocator, values);
        for (batch.columns) |*column| assert(column.rowCount() == payload_lens.len);
        batch.columnar = true;
        batch.payload_parts = switch (payloads) {
            .separate => |separate| try batch_encoding.borrowedParts(allocator, separate),
            .joined => |joined| try batch_encoding.joinedParts(allocator, joined, payload_lens),
        };
        try writer.submitBatch(batch);
    }

    fn columnError(err: metadata_columns.Error) Error {
        return switch (err) {
            error.InvalidArgument => error.InvalidArgument,
            error.InvalidInput => error.InvalidInput,
            error.OutOfMemory => error.OutOfMemory,
        };
    }

    /// `metadata_text`: the JSON array that fixes the schema if none is fixed
    /// yet (null: by column).
    fn checkPushable(
        writer: *CacheWriter,
        payload_bytes: u64,
        payload_lens: []const u64,
        metadata_text: ?[]const u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        if (writer.phase != .open) {
            diagnostic.set("the writer has already finished", .{});
            return error.State;
        }
        try writer.checkFailure(diagnostic);
        try push_checks.checkPayloadLens(
            payload_bytes,
            payload_lens,
            writer.options.compression,
            writer.samples_pushed,
            diagnostic,
        );
        if (metadata_text) |text| {
            if (payload_lens.len != 0 and writer.schema.len == 0) {
                try writer.inferSchema(text, diagnostic);
            }
        }
        assert(writer.phase == .open);
        assert(writer.columns.len == writer.schema.len);
    }

    /// Queues the batch's encoding; blocks while too many batches are in flight.
    fn submitBatch(writer: *CacheWriter, batch: *Batch) error{OutOfMemory}!void {
        // Not encoded yet: its job encodes it once submitted.
        assert(batch.count > 0 and batch.payload_parts.len == batch.count);
        assert(batch.record_lens.len == 0 and !batch.failed);
        const io = system.io();
        const wait_started = system.monotonicNanoseconds();
        writer.mutex.lockUncancelable(io);
        writer.waitUntilInFlightBelow(writer.in_flight_limit);
        // Room for every batch in flight in the queue of encoded batches, reserved
        // here where a failure reaches the pusher: queueing an encoded batch on
        // the pool then cannot fail, and the commit order cannot lose a batch.
        const in_flight = writer.batches_pushed - writer.batches_committed + 1;
        writer.encoded_waiting.ensureTotalCapacity(writer.allocator, @intCast(in_flight)) catch {
            writer.mutex.unlock(io);
            return error.OutOfMemory;
        };
        batch.sequence = writer.batches_pushed;
        batch.first_sample = writer.samples_pushed;
        writer.batches_pushed += 1;
        writer.samples_pushed += batch.count;
        // Pushed batches not yet committed never exceed the bound.
        assert(writer.batches_pushed - writer.batches_committed <= writer.in_flight_limit);
        writer.mutex.unlock(io);
        writer.stats.ingress_wait.add(wait_started, batch.payload_bytes);
        writer.pool.submit(&batch.job);
    }

    /// The first sample decides the schema; every later sample must match it.
    fn inferSchema(
        writer: *CacheWriter,
        metadata_text: []const u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(writer.schema.len == 0 and writer.columns.len == 0);
        const allocator = writer.allocator;
        var scratch: metadata_json.Scratch = .empty;
        defer scratch.deinit(allocator);
        var parser = metadata_json.Parser.init(metadata_text);
        const entries = (parser.nextObject(allocator, &scratch, diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.prefix("sample {d}: ", .{writer.samples_pushed});
            return error.InvalidInput;
        }) orelse {
            diagnostic.set("metadata array is empty but samples were given", .{});
            return error.InvalidArgument;
        };
        const schema = metadata_json.inferSchema(allocator, entries, diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.prefix("sample {d}: ", .{writer.samples_pushed});
            return error.InvalidInput;
        };
        try writer.adoptSchema(schema);
    }

    /// Makes `schema` (owned, freed here on failure) the cache's schema.
    fn adoptSchema(writer: *CacheWriter, schema: []types.Field) Error!void {
        errdefer metadata_json.freeSchema(writer.allocator, schema);
        assert(writer.schema.len == 0 and writer.sample_count == 0);
        assert(types.isSortedUnique(schema));
        writer.columns = try column_builder.initAll(writer.allocator, schema);
        writer.schema = schema;
    }

    fn checkFailure(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        if (writer.failed) {
            assert(writer.failure.len > 0);
            diagnostic.* = writer.failure;
            return writer.failure_error;
        }
    }

    /// Records the write's first failure; every later push and `finish` return it.
    fn fail(writer: *CacheWriter, err: Error, diagnostic: *const Diagnostic) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        // Every failure says why.
        assert(diagnostic.len > 0);
        if (writer.failed) return;
        writer.failed = true;
        writer.failure = diagnostic.*;
        writer.failure_error = err;
    }

    /// A background fsync failed (`FileSyncs.failed`).
    fn fileSyncFailed(syncs: *FileSyncs, diagnostic: *const Diagnostic) void {
        const writer: *CacheWriter = @fieldParentPtr("file_syncs", syncs);
        writer.fail(error.Io, diagnostic);
    }

    fn waitForInFlight(writer: *CacheWriter) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        writer.waitUntilInFlightBelow(1);
        assert(writer.batches_pushed == writer.batches_committed);
    }

    /// Waits until fewer than `limit` batches are in flight, doing waiting
    /// fsyncs meanwhile: the pool's threads are then left to encode, commit
    /// and hash instead of sleeping in an fsync. Mutex held (released while
    /// waiting or syncing).
    fn waitUntilInFlightBelow(writer: *CacheWriter, limit: u64) void {
        assert(limit >= 1);
        const io = system.io();
        while (writer.batches_pushed - writer.batches_committed >= limit) {
            if (writer.file_syncs.takeLocked(null)) |work| {
                writer.mutex.unlock(io);
                work.perform(&writer.file_syncs);
                writer.mutex.lockUncancelable(io);
            } else {
                writer.changed.waitUncancelable(io, &writer.mutex);
            }
        }
        assert(writer.batches_pushed - writer.batches_committed < limit);
    }

    // ---- commit (one committer at a time, in push order) ----------------

    /// Takes a batch its pool job has encoded (`Encoder.encoded`); the first
    /// thread to find no committer active commits every batch whose turn has come.
    fn batchEncoded(encoder: *Encoder, batch: *Batch) void {
        const writer: *CacheWriter = @fieldParentPtr("encoder", encoder);
        writer.enqueueEncoded(batch);
    }

    fn enqueueEncoded(writer: *CacheWriter, batch: *Batch) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        // `submitBatch` reserved room for every batch in flight.
        writer.encoded_waiting.appendAssumeCapacity(batch);
        // Every waiting batch is in flight: pushed and not yet committed.
        assert(
            writer.encoded_waiting.items.len <= writer.batches_pushed - writer.batches_committed,
        );
        if (writer.committer_active) {
            writer.mutex.unlock(io);
            return;
        }
        writer.committer_active = true;
        while (writer.takeNextEncoded()) |next| {
            const already_failed = writer.failed;
            writer.mutex.unlock(io);
            if (next.failed) {
                writer.fail(error.InvalidInput, &next.diagnostic);
            } else if (!already_failed) {
                var diagnostic: Diagnostic = .{};
                writer.commitBatch(next, &diagnostic) catch |err| {
                    if (err == error.OutOfMemory and diagnostic.len == 0) {
                        diagnostic.set("out of memory while committing samples", .{});
                    }
                    writer.fail(err, &diagnostic);
                };
            }
            next.destroy(writer.allocator);
            writer.mutex.lockUncancelable(io);
            assert(writer.committer_active);
            writer.batches_committed += 1;
            assert(writer.batches_committed <= writer.batches_pushed);
            writer.changed.broadcast(io);
        }
        writer.committer_active = false;
        writer.mutex.unlock(io);
    }

    /// Removes and returns the batch whose turn it is, if it is encoded. Mutex held.
    fn takeNextEncoded(writer: *CacheWriter) ?*Batch {
        for (writer.encoded_waiting.items, 0..) |batch, i| {
            if (batch.sequence != writer.batches_committed) continue;
            return writer.encoded_waiting.swapRemove(i);
        }
        return null;
    }

    fn commitBatch(writer: *CacheWriter, batch: *Batch, diagnostic: *Diagnostic) Error!void {
        assert(!batch.failed);
        assert(batch.record_lens.len == batch.count);
        // Batches are committed strictly in push order: this one starts where
        // the committed ones end (a failed commit fails the write, and no
        // batch is committed after it).
        assert(batch.first_sample == writer.sample_count);
        const allocator = writer.allocator;
        try writer.index_bytes.ensureUnusedCapacity(allocator, batch.count * index_file.row_bytes);
        assert(batch.record_checksums.len == batch.count);
        for (batch.record_checksums) |checksum| {
            try record_checksums.append(allocator, &writer.checksum_bytes, checksum);
        }
        // The bytes going to the current shard, in order: runs of framed records
        // and, between them, external payloads.
        var run: shard_files.Segments = .{ .allocator = allocator };
        defer run.deinit();
        var encoded_start: usize = 0;
        var payload_bytes: u64 = 0;
        const parts = batch.payload_parts;
        for (batch.record_lens, batch.payload_lens, parts) |record_len, payload_len, payload| {
            const place = try writer.shard_files.place(
                writer.staging.shards_dir.?,
                &run,
                record_len,
                payload_len,
                diagnostic,
            );
            var row: [index_file.row_bytes]u8 = undefined;
            index_file.encodeRow(.{
                .shard_id = place.shard_id,
                .offset = place.offset,
                .record_len = record_len,
            }, &row);
            writer.index_bytes.appendSliceAssumeCapacity(&row);
            const external = writer.encoder.isExternal(payload_len);
            const framed_len: usize = @intCast(
                if (external) record_len - payload_len else record_len,
            );
            try run.append(batch.encoded.items[encoded_start..][0..framed_len]);
            if (external) try run.append(payload[0..@intCast(payload_len)]);
            encoded_start += framed_len;
            payload_bytes += payload_len;
        }
        assert(encoded_start == batch.encoded.items.len);
        try writer.shard_files.append(&run, diagnostic);
        for (writer.columns, batch.columns) |*column, *chunk| {
            try column.appendColumn(allocator, chunk);
        }
        writer.sample_count += batch.count;
        // One index row and one checksum per committed sample.
        assert(writer.index_bytes.items.len == writer.sample_count * index_file.row_bytes);
        const checksums_len = writer.sample_count * record_checksums.checksum_bytes;
        assert(writer.checksum_bytes.items.len == checksums_len);
        // Release: a borrowed payload's owner frees it once this count passes it
        // (drt_writer_stats_get loads it with acquire), so every read of it above
        // must happen before.
        _ = writer.stats.samples_committed.fetchAdd(batch.count, .release);
        _ = writer.stats.payload_bytes_committed.fetchAdd(payload_bytes, .monotonic);
        _ = writer.stats.shard_bytes_committed.fetchAdd(run.total, .monotonic);
    }

    /// Which of the shards it writes keep their pages in the page cache
    /// (`page_cache_policy`; `.auto` unless set, with the budget taken when the
    /// writer was created). Only before the first push.
    pub fn setPageCache(
        writer: *CacheWriter,
        mode: PageCacheMode,
        diagnostic: *Diagnostic,
    ) Error!void {
        if (writer.samples_pushed != 0 or writer.phase != .open) {
            diagnostic.set("the page cache policy is set before the first push", .{});
            return error.State;
        }
        assert(writer.shard_files.shards.items.len == 0 and writer.shard_files.shard == null);
        writer.shard_files.page_cache.mode = mode;
    }

    // ---- finish and publish ----------------------------------------------

    pub fn finish(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        if (writer.phase != .open) {
            diagnostic.set("the writer has already finished", .{});
            return error.State;
        }
        writer.waitForInFlight();
        try writer.checkFailure(diagnostic);
        if (writer.sample_count == 0) {
            diagnostic.set(
                "cache source yielded no samples: source '{s}' produced none, and a cache needs " ++
                    "at least one",
                .{writer.source_name},
            );
            return error.InvalidInput;
        }
        // One index row per committed sample.
        assert(writer.index_bytes.items.len == writer.sample_count * index_file.row_bytes);
        writer.phase = .finished;
        const started = system.monotonicNanoseconds();
        try writer.shard_files.closeLast();
        const files: FinishFiles = .{
            .allocator = writer.allocator,
            .staging = &writer.staging,
            .syncs = &writer.file_syncs,
        };
        const index_sha256 = try files.writeIndex(writer.index_bytes.items, diagnostic);
        const checksums_sha256 = try files.writeChecksums(writer.checksum_bytes.items, diagnostic);
        const metadata_sha256 = try files.writeMetadata(
            writer.schema,
            writer.columns,
            writer.sample_count,
            diagnostic,
        );
        writer.shard_files.waitForHashes();
        try writer.checkFailure(diagnostic);
        try writer.shard_files.collectDigests(diagnostic);
        const version = writer.options.format_version;
        try files.writeManifest(.{
            .format_version = version,
            .cache_id = if (version == manifest.format_version_with_cache_id)
                cache_identity.fromSourceName(writer.source_name)
            else
                null,
            .source_name = writer.source_name,
            .sample_count = writer.sample_count,
            .metadata_schema = writer.schema,
            .metadata_sha256 = metadata_sha256,
            .index_sha256 = index_sha256,
            .shards = writer.shard_files.shards.items,
            .record_checksums = .{
                .byte_len = writer.checksum_bytes.items.len,
                .sha256 = checksums_sha256,
            },
        }, diagnostic);
        const sync_started = system.monotonicNanoseconds();
        // The files' fsyncs run side by side, so the file system can serve
        // them with fewer journal commits than one after the other.
        // Every shard went to the background fsyncs when it was closed.
        writer.file_syncs.pending.wait();
        writer.stats.disk_write.add(sync_started, 0);
        try writer.checkFailure(diagnostic);
        try writer.staging.syncDirs(diagnostic);
        writer.stats.finish_manifest.add(started, writer.index_bytes.items.len);
        try writer.publish(diagnostic);
        assert(writer.phase == .published);
    }

    fn publish(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        assert(writer.phase == .finished);
        const started = system.monotonicNanoseconds();
        try writer.staging.publish(diagnostic);
        writer.phase = .published;
        try durable_files.syncDir(writer.staging.base_dir, "the cache directory", diagnostic);
        writer.stats.publish.add(started, 0);
    }
};

test {
    _ = @import("cache_writer_test.zig");
    _ = @import("finish_files.zig");
    _ = @import("push_checks.zig");
}

test "validateOptions: format_version 2 or 3, anything else refused by name" {
    const valid: Options = .{
        .max_shard_bytes = 1,
        .batches_in_flight_max = 1,
        .compression = .none,
        .compression_ratio = 1.0,
    };
    var diagnostic: Diagnostic = .{};
    for ([_]u32{ 2, 3 }) |version| {
        var options = valid;
        options.format_version = version;
        try CacheWriter.validateOptions(options, &diagnostic);
    }
    for ([_]u32{ 0, 1, 4, std.math.maxInt(u32) }) |version| {
        var options = valid;
        options.format_version = version;
        const refused = CacheWriter.validateOptions(options, &diagnostic);
        try std.testing.expectError(error.InvalidArgument, refused);
        const message = diagnostic.message();
        const phrase = "format_version must be 2 or 3, got ";
        try std.testing.expect(std.mem.startsWith(u8, message, phrase));
    }
}
