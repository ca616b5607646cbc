//! Writes one source into one cache directory (format v2).
//!
//! The caller pushes batches of samples in source order. Each batch becomes a
//! pool job that validates the metadata against the schema, writes the canonical
//! record JSON, frames and compresses the records. Encoded batches are committed
//! strictly in push order by whichever worker finished the next one: sample ids,
//! shard rotation, shard writes and index rows. Each shard is hashed (SHA-256)
//! on the pool as it grows, beside the writes (`ShardHasher`). `finish` writes
//! index.bin, metadata.arrow and manifest.json into the staging directory, fsyncs
//! everything and publishes by one rename. Until then nothing is visible under
//! the target path; `destroy` on an unfinished writer removes the staging directory.
const std = @import("std");
const cache_layout = @import("../format/cache_layout.zig");
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const metadata_canonical = @import("../format/metadata_canonical.zig");
const metadata_json = @import("../format/metadata_json.zig");
const metadata_columns = @import("../format/metadata_columns.zig");
const manifest = @import("../format/manifest.zig");
const ShardName = cache_layout.ShardName;
const arrow_ipc_write = @import("../format/arrow_ipc_write.zig");
const sha256 = @import("../codec/sha256.zig");
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const lz4 = @import("../codec/lz4.zig");
const durable_files = @import("../base/durable_files.zig");
const file_status = @import("../base/file_status.zig");
const file_lock = @import("../base/file_lock.zig");
const directory_entries = @import("../base/directory_entries.zig");
const column_builder = @import("../format/column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const thread_pool = @import("../base/thread_pool.zig");
const ShardHasher = @import("shard_hasher.zig").ShardHasher;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidArgument, InvalidInput, Io, OutOfMemory, AlreadyExists, State };

pub const Options = struct {
    max_shard_bytes: u64,
    batches_in_flight_max: u32,
    compression: shard_record.Compression,
    compression_ratio: f64,
};

/// Seconds, calls and bytes of one stage; updated from several threads.
pub const StageCounter = struct {
    calls: std.atomic.Value(u64) = .init(0),
    nanoseconds: std.atomic.Value(u64) = .init(0),
    bytes: std.atomic.Value(u64) = .init(0),

    pub fn add(counter: *StageCounter, started_ns: u64, bytes: u64) void {
        counter.addMeasured(system.monotonicNanoseconds() -| started_ns, bytes);
    }

    /// One call of `nanoseconds` measured elsewhere.
    pub fn addMeasured(counter: *StageCounter, nanoseconds: u64, bytes: u64) void {
        _ = counter.calls.fetchAdd(1, .monotonic);
        _ = counter.nanoseconds.fetchAdd(nanoseconds, .monotonic);
        _ = counter.bytes.fetchAdd(bytes, .monotonic);
    }
};

pub const Stats = struct {
    samples_committed: std.atomic.Value(u64) = .init(0),
    payload_bytes_committed: std.atomic.Value(u64) = .init(0),
    shard_bytes_committed: std.atomic.Value(u64) = .init(0),
    ingress_wait: StageCounter = .{},
    encode: StageCounter = .{},
    compression: StageCounter = .{},
    hashing: StageCounter = .{},
    disk_write: StageCounter = .{},
    finish_manifest: StageCounter = .{},
    publish: StageCounter = .{},
};

/// A batch as pushed, then as encoded by its pool job.
const Batch = struct {
    job: thread_pool.Job = .{ .run = CacheWriter.runEncode },
    writer: *CacheWriter,
    sequence: u64,
    first_sample: u64,
    count: usize,
    /// The payloads back to back when copied at push (`push`), else empty.
    payloads: []u8,
    /// One pointer per sample: into `payloads`, or into the caller's memory
    /// when borrowed, valid until the batch is committed (`pushBorrowed`).
    payload_parts: []const [*]const u8 = &.{},
    payload_bytes: u64,
    payload_lens: []u64,
    /// The metadata as a JSON array, or empty when it came by column (then
    /// `columns` already holds it and `columnar` is set).
    metadata_text: []u8,
    columnar: bool = false,
    // Filled by the encode job (`columns` at push when columnar).
    encoded: std.ArrayList(u8) = .empty,
    record_lens: []u64 = &.{},
    columns: []ColumnBuilder = &.{},
    failed: bool = false,
    diagnostic: Diagnostic = .{},

    fn destroy(batch: *Batch, allocator: std.mem.Allocator) void {
        allocator.free(batch.payloads);
        allocator.free(batch.payload_parts);
        allocator.free(batch.payload_lens);
        allocator.free(batch.metadata_text);
        batch.encoded.deinit(allocator);
        allocator.free(batch.record_lens);
        column_builder.deinitAll(allocator, batch.columns);
        allocator.free(batch.columns);
        allocator.destroy(batch);
    }
};

/// The shard being appended to by the committer.
const OpenShard = struct {
    file: std.Io.File,
    byte_len: u64 = 0,
    uncompressed_byte_len: u64 = 0,
    /// Bytes before this offset have been handed to the disk (`startWriteback`).
    writeback_start: u64 = 0,
    /// Hashes the shard on the pool as it grows; one of `shard_hashers`.
    hasher: *ShardHasher,
};

pub const CacheWriter = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    options: Options,
    source_name: []u8,
    target_path: [:0]u8,
    base_dir: std.Io.Dir,
    staging_name: []u8,
    /// Open while the writer can still add files; closed before the rename.
    staging_dir: ?std.Io.Dir = null,
    shards_dir: ?std.Io.Dir = null,
    lock_file: std.Io.File,
    lock_name: []u8 = &.{},
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

    // Commit state, touched only by the single active committer.
    shard: ?OpenShard = null,
    shards: std.ArrayList(manifest.Shard) = .empty,
    shard_names: std.ArrayList(ShardName) = .empty,
    index_bytes: std.ArrayList(u8) = .empty,
    columns: []ColumnBuilder = &.{},
    sample_count: u64 = 0,

    stats: Stats = .{},
    /// fsyncs of written files not yet done (`syncInBackground`).
    file_syncs: thread_pool.WaitGroup = .{},
    /// Their pool jobs, which outlive an fsync that the pusher took over.
    sync_jobs: thread_pool.WaitGroup = .{},
    /// fsyncs queued on the pool that nobody has started, oldest first (guarded
    /// by `mutex`): a pusher waiting for room takes them over (`takeWaitingSync`).
    syncs_waiting: std.ArrayList(*FileSync) = .empty,
    /// One per shard, in shard order; appended by the committer, read by
    /// `finish` once `shard_hashing` (the running hash jobs) is done.
    shard_hashers: std.ArrayList(*ShardHasher) = .empty,
    shard_hashing: thread_pool.WaitGroup = .{},

    pub fn create(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        base_dir_path: []const u8,
        source_name: []const u8,
        options: Options,
        diagnostic: *Diagnostic,
    ) Error!*CacheWriter {
        try validateOptions(options, diagnostic);
        if (base_dir_path.len == 0 or std.mem.indexOfScalar(u8, base_dir_path, 0) != null) {
            diagnostic.set("base cache directory '{s}' must be a non-empty path without NUL bytes", .{base_dir_path});
            return error.InvalidArgument;
        }
        try checkSourceName(source_name, diagnostic);
        const io = system.io();
        const writer = try allocator.create(CacheWriter);
        errdefer allocator.destroy(writer);
        writer.* = .{
            .allocator = allocator,
            .pool = pool,
            .options = options,
            .source_name = try allocator.dupe(u8, source_name),
            .target_path = undefined,
            .base_dir = undefined,
            .staging_name = &.{},
            .lock_file = undefined,
        };
        errdefer allocator.free(writer.source_name);
        writer.target_path = try std.fs.path.joinZ(allocator, &.{ base_dir_path, source_name });
        errdefer allocator.free(writer.target_path);

        try durable_files.createDirectories(base_dir_path, diagnostic);
        writer.base_dir = std.Io.Dir.cwd().openDir(io, base_dir_path, .{}) catch |err| {
            diagnostic.set("cannot open cache directory {s}: {s}", .{ base_dir_path, @errorName(err) });
            return error.Io;
        };
        errdefer writer.base_dir.close(io);
        writer.base_dir.createDir(io, cache_layout.staging_dir, .default_dir) catch |err| switch (err) {
            error.PathAlreadyExists => {},
            else => {
                diagnostic.set("cannot create {s}/tmp: {s}", .{ base_dir_path, @errorName(err) });
                return error.Io;
            },
        };
        try writer.lockTarget(diagnostic);
        errdefer writer.releaseLock();
        if (writer.targetExists()) {
            diagnostic.set("cache path already exists: {s}", .{writer.target_path});
            return error.AlreadyExists;
        }
        try writer.createStaging(diagnostic);
        _ = pool.acquire(); // released by destroy
        return writer;
    }

    /// A source name must be one plain path segment other than the staging directory's.
    pub fn checkSourceName(source_name: []const u8, diagnostic: *Diagnostic) Error!void {
        if (durable_files.plainSegmentProblem(source_name)) |problem| {
            // Escaped: a NUL or control byte would cut or garble the C-string message.
            diagnostic.set("source name \"{f}\" {s}; it must be one plain path segment", .{ std.zig.fmtString(source_name), problem });
            return error.InvalidArgument;
        }
        if (!std.unicode.utf8ValidateSlice(source_name)) {
            // The manifest records the name as a JSON string: it must be text.
            diagnostic.set("source name \"{f}\" is not valid UTF-8", .{std.zig.fmtString(source_name)});
            return error.InvalidArgument;
        }
        if (std.mem.eql(u8, source_name, cache_layout.staging_dir)) {
            diagnostic.set("source name 'tmp' is reserved for the staging directory", .{});
            return error.InvalidArgument;
        }
    }

    fn validateOptions(options: Options, diagnostic: *Diagnostic) Error!void {
        if (options.max_shard_bytes == 0) {
            diagnostic.set("max_shard_bytes must be at least 1", .{});
            return error.InvalidArgument;
        }
        if (options.batches_in_flight_max == 0) {
            diagnostic.set("batches_in_flight_max must be at least 1", .{});
            return error.InvalidArgument;
        }
        try checkCompression(options.compression, options.compression_ratio, diagnostic);
    }

    /// Refuses a ratio that does not fit the codec (`manifest.compressionProblem`).
    pub fn checkCompression(compression: shard_record.Compression, ratio: f64, diagnostic: *Diagnostic) Error!void {
        const setting: manifest.Compression = .{ .algo = switch (compression) {
            .none => .none,
            .lz4 => .lz4,
        }, .ratio = ratio };
        if (manifest.compressionProblem(setting)) |problem| {
            diagnostic.set("shard compression ratio {d} {s}", .{ ratio, problem });
            return error.InvalidArgument;
        }
    }

    /// One writer per target across threads and processes: a second writer
    /// waits here until the first has published or given up. The holder deletes
    /// the lock file before unlocking, so a waiter that wakes up on a deleted
    /// file retries on the current one.
    fn lockTarget(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        writer.lock_name = try std.fmt.allocPrint(writer.allocator, "{s}/{s}{s}", .{ cache_layout.staging_dir, writer.source_name, cache_layout.lock_suffix });
        errdefer writer.allocator.free(writer.lock_name);
        for (0..lock_attempts_max) |_| {
            const file = writer.base_dir.createFile(io, writer.lock_name, .{ .truncate = false }) catch |err| {
                diagnostic.set("cannot create lock file {s}: {s}", .{ writer.lock_name, @errorName(err) });
                return error.Io;
            };
            file_lock.lockExclusive(io, file) catch |err| {
                file.close(io);
                diagnostic.set("cannot lock {s}: {s}", .{ writer.lock_name, @errorName(err) });
                return error.Io;
            };
            const current = writer.isCurrentLockFile(file) catch |err| {
                file.close(io);
                diagnostic.set("cannot check lock file {s}: {s}", .{ writer.lock_name, @errorName(err) });
                return error.Io;
            };
            if (current) {
                writer.lock_file = file;
                return;
            }
            file.close(io);
        }
        diagnostic.set("could not take the lock {s} after {d} attempts", .{ writer.lock_name, lock_attempts_max });
        return error.Io;
    }

    const lock_attempts_max = 1000;

    /// Whether `file` is still the lock file at its path: not deleted (and perhaps
    /// created again) by the holder it waited for.
    fn isCurrentLockFile(writer: *CacheWriter, file: std.Io.File) file_status.Error!bool {
        const held = try file_status.inode(file);
        const current = file_status.pathInode(writer.base_dir, writer.lock_name) catch |err| switch (err) {
            error.FileNotFound => return false,
            else => |other| return other,
        };
        return held == current;
    }

    fn releaseLock(writer: *CacheWriter) void {
        const io = system.io();
        directory_entries.deleteFile(io, writer.base_dir, writer.baseDirPath(), writer.lock_name) catch {};
        file_lock.unlock(io, writer.lock_file);
        writer.lock_file.close(io);
        writer.allocator.free(writer.lock_name);
    }

    fn targetExists(writer: *CacheWriter) bool {
        return directory_entries.exists(system.io(), writer.base_dir, writer.source_name, writer.target_path);
    }

    fn createStaging(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const Counter = struct {
            var next: std.atomic.Value(u64) = .init(0);
        };
        writer.staging_name = try std.fmt.allocPrint(writer.allocator, "{s}/{d}.{x}.{d}.staging", .{
            cache_layout.staging_dir,
            system.processId(),
            system.monotonicNanoseconds(),
            Counter.next.fetchAdd(1, .monotonic),
        });
        errdefer writer.allocator.free(writer.staging_name);
        writer.base_dir.createDir(io, writer.staging_name, .default_dir) catch |err| {
            diagnostic.set("cannot create staging directory {s}: {s}", .{ writer.staging_name, @errorName(err) });
            return error.Io;
        };
        errdefer directory_entries.deleteTree(io, writer.base_dir, writer.baseDirPath(), writer.staging_name);
        const staging_dir = writer.base_dir.openDir(io, writer.staging_name, .{}) catch |err| {
            diagnostic.set("cannot open staging directory {s}: {s}", .{ writer.staging_name, @errorName(err) });
            return error.Io;
        };
        writer.staging_dir = staging_dir;
        errdefer writer.closeStaging();
        staging_dir.createDir(io, cache_layout.shards_dir, .default_dir) catch |err| {
            diagnostic.set("cannot create shards directory: {s}", .{@errorName(err)});
            return error.Io;
        };
        writer.shards_dir = staging_dir.openDir(io, cache_layout.shards_dir, .{}) catch |err| {
            diagnostic.set("cannot open shards directory: {s}", .{@errorName(err)});
            return error.Io;
        };
    }

    fn closeStaging(writer: *CacheWriter) void {
        const io = system.io();
        if (writer.shards_dir) |dir| dir.close(io);
        if (writer.staging_dir) |dir| dir.close(io);
        writer.shards_dir = null;
        writer.staging_dir = null;
    }

    /// Releases everything; an unpublished cache's staging directory is removed.
    pub fn destroy(writer: *CacheWriter) void {
        const io = system.io();
        const allocator = writer.allocator;
        writer.waitForInFlight();
        writer.file_syncs.wait();
        writer.sync_jobs.wait();
        writer.shard_hashing.wait();
        std.debug.assert(writer.syncs_waiting.items.len == 0);
        writer.syncs_waiting.deinit(allocator);
        for (writer.shard_hashers.items) |hasher| hasher.destroy();
        writer.shard_hashers.deinit(allocator);
        for (writer.encoded_waiting.items) |batch| batch.destroy(allocator);
        writer.encoded_waiting.deinit(allocator);
        if (writer.shard) |*shard| shard.file.close(io);
        writer.closeStaging();
        if (writer.phase != .published) directory_entries.deleteTree(io, writer.base_dir, writer.baseDirPath(), writer.staging_name);
        writer.releaseLock();
        writer.base_dir.close(io);
        column_builder.deinitAll(allocator, writer.columns);
        allocator.free(writer.columns);
        writer.shards.deinit(allocator);
        writer.shard_names.deinit(allocator);
        writer.index_bytes.deinit(allocator);
        metadata_json.freeSchema(allocator, writer.schema);
        allocator.free(writer.staging_name);
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
        const batch = try writer.createBatch(payload_lens, metadata_text, payloads.len);
        errdefer batch.destroy(writer.allocator);
        batch.payloads = try writer.allocator.dupe(u8, payloads);
        batch.payload_parts = try joinedParts(writer.allocator, batch.payloads, payload_lens);
        writer.submitBatch(batch);
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
        const total = try borrowedBytes(payloads, payload_lens, writer.samples_pushed, diagnostic);
        try writer.checkPushable(total, payload_lens, metadata_text, diagnostic);
        if (payload_lens.len == 0) return;
        const batch = try writer.createBatch(payload_lens, metadata_text, total);
        errdefer batch.destroy(writer.allocator);
        batch.payload_parts = try borrowedParts(writer.allocator, payloads);
        writer.submitBatch(batch);
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
        const total = try borrowedBytes(payloads, payload_lens, writer.samples_pushed, diagnostic);
        try writer.pushColumnsOf(.{ .separate = payloads }, total, payload_lens, pushed, diagnostic);
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
        try writer.pushColumnsOf(.{ .joined = payloads }, payloads.len, payload_lens, pushed, diagnostic);
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
        const allocator = writer.allocator;
        const columns = try allocator.alloc(types.Column, pushed.len);
        defer allocator.free(columns);
        for (pushed, columns) |column, *out| out.* = metadata_columns.view(column, payload_lens.len, writer.samples_pushed, diagnostic) catch |err| return columnError(err);
        if (writer.schema.len == 0) {
            const schema = metadata_columns.inferSchema(allocator, columns, diagnostic) catch |err| {
                diagnostic.prefix("sample {d}: ", .{writer.samples_pushed});
                return columnError(err);
            };
            try writer.adoptSchema(schema);
        }
        const ordered = try allocator.alloc(types.ColumnValues, writer.schema.len);
        defer allocator.free(ordered);
        metadata_columns.orderBySchema(writer.schema, columns, ordered, diagnostic) catch |err| {
            diagnostic.prefix("samples {d}..{d}: ", .{ writer.samples_pushed, writer.samples_pushed + payload_lens.len - 1 });
            return columnError(err);
        };
        const batch = try writer.createBatch(payload_lens, "", total);
        errdefer batch.destroy(allocator);
        batch.columns = try column_builder.initAll(allocator, writer.schema);
        for (batch.columns, ordered) |*column, values| try column.appendValues(allocator, values);
        batch.columnar = true;
        batch.payload_parts = switch (payloads) {
            .separate => |separate| try borrowedParts(allocator, separate),
            .joined => |joined| try joinedParts(allocator, joined, payload_lens),
        };
        writer.submitBatch(batch);
    }

    fn columnError(err: metadata_columns.Error) Error {
        return switch (err) {
            error.InvalidArgument => error.InvalidArgument,
            error.InvalidInput => error.InvalidInput,
            error.OutOfMemory => error.OutOfMemory,
        };
    }

    /// The payloads' total length; a NULL payload must be empty.
    fn borrowedBytes(payloads: []const ?[*]const u8, payload_lens: []const u64, first_sample: u64, diagnostic: *Diagnostic) Error!u64 {
        var total: u64 = 0;
        for (payloads, payload_lens, 0..) |payload, len, i| {
            if (payload == null and len != 0) {
                diagnostic.set("sample {d}: payload pointer is NULL for {d} bytes", .{ first_sample + i, len });
                return error.InvalidArgument;
            }
            total +|= len;
        }
        return total;
    }

    fn borrowedParts(allocator: std.mem.Allocator, payloads: []const ?[*]const u8) Error![]const [*]const u8 {
        const parts = try allocator.alloc([*]const u8, payloads.len);
        for (parts, payloads) |*part, payload| part.* = payload orelse &no_bytes; // only for empty payloads
        return parts;
    }

    /// Where each payload starts in `payloads`, whose length the lengths add up
    /// to (checked by `checkPushable`).
    fn joinedParts(allocator: std.mem.Allocator, payloads: []const u8, payload_lens: []const u64) Error![]const [*]const u8 {
        const parts = try allocator.alloc([*]const u8, payload_lens.len);
        var offset: usize = 0;
        for (parts, payload_lens) |*part, len| {
            part.* = payloads.ptr + offset;
            offset += @intCast(len);
        }
        return parts;
    }

    /// `metadata_text`: the JSON array that fixes the schema if none is fixed yet (null: by column).
    fn checkPushable(writer: *CacheWriter, payload_bytes: u64, payload_lens: []const u64, metadata_text: ?[]const u8, diagnostic: *Diagnostic) Error!void {
        if (writer.phase != .open) {
            diagnostic.set("the writer has already finished", .{});
            return error.State;
        }
        try writer.checkFailure(diagnostic);
        try checkPayloadLens(payload_bytes, payload_lens, writer.options.compression, writer.samples_pushed, diagnostic);
        if (metadata_text) |text| {
            if (payload_lens.len != 0 and writer.schema.len == 0) try writer.inferSchema(text, diagnostic);
        }
    }

    /// A batch owning copies of the lengths and the metadata text; its payloads are set by the caller.
    fn createBatch(writer: *CacheWriter, payload_lens: []const u64, metadata_text: []const u8, payload_bytes: u64) Error!*Batch {
        const allocator = writer.allocator;
        const batch = try allocator.create(Batch);
        batch.* = .{
            .writer = writer,
            .sequence = undefined,
            .first_sample = undefined,
            .count = payload_lens.len,
            .payloads = &.{},
            .payload_bytes = payload_bytes,
            .payload_lens = &.{},
            .metadata_text = &.{},
        };
        errdefer batch.destroy(allocator);
        batch.payload_lens = try allocator.dupe(u64, payload_lens);
        batch.metadata_text = try allocator.dupe(u8, metadata_text);
        return batch;
    }

    /// Queues the batch's encoding; blocks while too many batches are in flight.
    fn submitBatch(writer: *CacheWriter, batch: *Batch) void {
        const io = system.io();
        const wait_started = system.monotonicNanoseconds();
        writer.mutex.lockUncancelable(io);
        writer.waitUntilInFlightBelow(writer.options.batches_in_flight_max);
        batch.sequence = writer.batches_pushed;
        batch.first_sample = writer.samples_pushed;
        writer.batches_pushed += 1;
        writer.samples_pushed += batch.count;
        writer.mutex.unlock(io);
        writer.stats.ingress_wait.add(wait_started, batch.payload_bytes);
        writer.pool.submit(&batch.job);
    }

    const no_bytes = [0]u8{};

    fn checkPayloadLens(
        payloads_len: u64,
        payload_lens: []const u64,
        compression: shard_record.Compression,
        first_sample: u64,
        diagnostic: *Diagnostic,
    ) Error!void {
        var total: u64 = 0;
        for (payload_lens, 0..) |len, i| {
            if (compression == .lz4 and len > shard_record.lz4_payload_bytes_max) {
                diagnostic.set("sample {d}: payload of {d} bytes is too large for lz4 records (at most {d})", .{ first_sample + i, len, shard_record.lz4_payload_bytes_max });
                return error.InvalidInput;
            }
            total = std.math.add(u64, total, len) catch {
                diagnostic.set("payload lengths overflow", .{});
                return error.InvalidArgument;
            };
        }
        if (total != payloads_len) {
            diagnostic.set("payload lengths add up to {d} bytes but {d} bytes were given", .{ total, payloads_len });
            return error.InvalidArgument;
        }
    }

    /// The first sample decides the schema; every later sample must match it.
    fn inferSchema(writer: *CacheWriter, metadata_text: []const u8, diagnostic: *Diagnostic) Error!void {
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
        writer.columns = try column_builder.initAll(writer.allocator, schema);
        writer.schema = schema;
    }

    fn checkFailure(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        if (writer.failed) {
            diagnostic.* = writer.failure;
            return writer.failure_error;
        }
    }

    fn fail(writer: *CacheWriter, err: Error, diagnostic: *const Diagnostic) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        if (writer.failed) return;
        writer.failed = true;
        writer.failure = diagnostic.*;
        writer.failure_error = err;
    }

    fn waitForInFlight(writer: *CacheWriter) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        writer.waitUntilInFlightBelow(1);
    }

    /// Waits until fewer than `limit` batches are in flight, doing waiting
    /// fsyncs meanwhile: the pool's threads are then left to encode, commit
    /// and hash instead of sleeping in an fsync. Mutex held (released while
    /// waiting or syncing).
    fn waitUntilInFlightBelow(writer: *CacheWriter, limit: u64) void {
        const io = system.io();
        while (writer.batches_pushed - writer.batches_committed >= limit) {
            if (writer.takeWaitingSyncLocked(null)) |work| {
                writer.mutex.unlock(io);
                work.perform(writer);
                writer.mutex.lockUncancelable(io);
            } else {
                writer.changed.waitUncancelable(io, &writer.mutex);
            }
        }
    }

    // ---- encode (pool, in parallel) -------------------------------------

    fn runEncode(job: *thread_pool.Job) void {
        const batch: *Batch = @fieldParentPtr("job", job);
        const writer = batch.writer;
        const started = system.monotonicNanoseconds();
        writer.encodeBatch(batch) catch |err| {
            batch.failed = true;
            if (err == error.OutOfMemory) batch.diagnostic.set("out of memory while encoding samples", .{});
        };
        writer.stats.encode.add(started, batch.payload_bytes);
        writer.enqueueEncoded(batch);
    }

    fn encodeBatch(writer: *CacheWriter, batch: *Batch) !void {
        // One compressor table for the batch's records (16 KiB of the worker's 4 MiB stack).
        var lz4_table: lz4.Table = .{};
        if (batch.columnar) return writer.encodeColumnar(batch, &lz4_table);
        const allocator = writer.allocator;
        const schema = writer.schema;
        batch.record_lens = try allocator.alloc(u64, batch.count);
        batch.columns = try column_builder.initAll(allocator, schema);

        var scratch: metadata_json.Scratch = .empty;
        defer scratch.deinit(allocator);
        var canonical: std.ArrayList(u8) = .empty;
        defer canonical.deinit(allocator);
        const values = try allocator.alloc(types.Value, schema.len);
        defer allocator.free(values);

        var parser = metadata_json.Parser.init(batch.metadata_text);
        var compression_ns: u64 = 0;
        for (0..batch.count) |i| {
            const sample = batch.first_sample + i;
            const entries = (parser.nextObject(allocator, &scratch, &batch.diagnostic) catch |err| {
                if (err == error.OutOfMemory) return error.OutOfMemory;
                batch.diagnostic.prefix("sample {d}: ", .{sample});
                return error.InvalidInput;
            }) orelse {
                batch.diagnostic.set("metadata array holds {d} objects but {d} payloads were given", .{ i, batch.count });
                return error.InvalidInput;
            };
            metadata_json.matchSchema(schema, entries, values, &batch.diagnostic) catch {
                batch.diagnostic.prefix("sample {d}: ", .{sample});
                return error.InvalidInput;
            };
            canonical.clearRetainingCapacity();
            try metadata_canonical.writeCanonical(allocator, schema, values, &canonical);
            for (batch.columns, values) |*column, value| try column.append(allocator, value);

            compression_ns += try writer.appendRecord(batch, i, canonical.items, &lz4_table);
        }
        const extra = parser.nextObject(allocator, &scratch, &batch.diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            batch.diagnostic.prefix("after sample {d}: ", .{batch.first_sample + batch.count - 1});
            return error.InvalidInput;
        };
        if (extra != null) {
            batch.diagnostic.set("metadata array holds more objects than the {d} payloads given", .{batch.count});
            return error.InvalidInput;
        }
        parser.finish(&batch.diagnostic) catch return error.InvalidInput;
        writer.countCompression(batch, compression_ns);
    }

    /// Encodes a batch whose metadata came by column (checked at push).
    fn encodeColumnar(writer: *CacheWriter, batch: *Batch, lz4_table: *lz4.Table) !void {
        const allocator = writer.allocator;
        batch.record_lens = try allocator.alloc(u64, batch.count);
        var canonical: std.ArrayList(u8) = .empty;
        defer canonical.deinit(allocator);
        const values = try allocator.alloc(types.Value, writer.schema.len);
        defer allocator.free(values);
        var compression_ns: u64 = 0;
        for (0..batch.count) |i| {
            for (batch.columns, values) |*column, *value| value.* = column.view().get(i);
            canonical.clearRetainingCapacity();
            try metadata_canonical.writeCanonical(allocator, writer.schema, values, &canonical);
            compression_ns += try writer.appendRecord(batch, i, canonical.items, lz4_table);
        }
        writer.countCompression(batch, compression_ns);
    }

    /// Frames sample `i` of the batch after its canonical metadata; returns
    /// the nanoseconds spent compressing.
    fn appendRecord(writer: *CacheWriter, batch: *Batch, i: usize, canonical: []const u8, lz4_table: *lz4.Table) !u64 {
        const payload_len: usize = @intCast(batch.payload_lens[i]);
        const payload = batch.payload_parts[i][0..payload_len];
        if (writer.isExternal(payload_len)) {
            // Only the head is framed; the committer writes the payload from where it is.
            try batch.encoded.ensureUnusedCapacity(writer.allocator, shard_record.header_bytes + canonical.len);
            const head_len = shard_record.appendAssumeCapacity(&batch.encoded, canonical, "", .none, lz4_table);
            batch.record_lens[i] = head_len + payload_len;
            return 0;
        }
        try batch.encoded.ensureUnusedCapacity(writer.allocator, shard_record.encodedBytesMax(canonical.len, payload_len, writer.options.compression));
        const compress_started = system.monotonicNanoseconds();
        batch.record_lens[i] = shard_record.appendAssumeCapacity(&batch.encoded, canonical, payload, writer.options.compression, lz4_table);
        return if (writer.options.compression == .lz4) system.monotonicNanoseconds() - compress_started else 0;
    }

    /// Uncompressed payloads this large are not copied into the batch's framed
    /// records: the committer hashes and writes them from the pushed memory
    /// (kept alive until the batch is committed), next to their framed heads.
    const external_payload_bytes_min = 64 << 10;

    fn isExternal(writer: *const CacheWriter, payload_len: u64) bool {
        return writer.options.compression == .none and payload_len >= external_payload_bytes_min;
    }

    fn countCompression(writer: *CacheWriter, batch: *const Batch, compression_ns: u64) void {
        if (writer.options.compression != .lz4) return;
        _ = writer.stats.compression.calls.fetchAdd(batch.count, .monotonic);
        _ = writer.stats.compression.nanoseconds.fetchAdd(compression_ns, .monotonic);
        _ = writer.stats.compression.bytes.fetchAdd(batch.payload_bytes, .monotonic);
    }

    // ---- commit (one committer at a time, in push order) ----------------

    fn enqueueEncoded(writer: *CacheWriter, batch: *Batch) void {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        writer.encoded_waiting.append(writer.allocator, batch) catch {
            // Cannot queue it: fail the write but still account for the batch.
            writer.mutex.unlock(io);
            var diagnostic: Diagnostic = .{};
            diagnostic.set("out of memory while queueing an encoded batch", .{});
            writer.fail(error.OutOfMemory, &diagnostic);
            writer.mutex.lockUncancelable(io);
            batch.destroy(writer.allocator);
            writer.batches_committed += 1;
            writer.changed.broadcast(io);
            writer.mutex.unlock(io);
            return;
        };
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
                writer.commitBatch(next, &diagnostic) catch |err| writer.fail(err, &diagnostic);
            }
            next.destroy(writer.allocator);
            writer.mutex.lockUncancelable(io);
            writer.batches_committed += 1;
            writer.changed.broadcast(io);
        }
        writer.committer_active = false;
        writer.mutex.unlock(io);
    }

    /// Removes and returns the batch whose turn it is, if it is encoded. Mutex held.
    fn takeNextEncoded(writer: *CacheWriter) ?*Batch {
        for (writer.encoded_waiting.items, 0..) |batch, i| {
            if (batch.sequence == writer.batches_committed) return writer.encoded_waiting.swapRemove(i);
        }
        return null;
    }

    fn commitBatch(writer: *CacheWriter, batch: *Batch, diagnostic: *Diagnostic) Error!void {
        const allocator = writer.allocator;
        try writer.index_bytes.ensureUnusedCapacity(allocator, batch.count * index_file.row_bytes);
        // The bytes going to the current shard, in order: runs of framed records
        // and, between them, external payloads.
        var run: Segments = .{ .allocator = allocator };
        defer run.list.deinit(allocator);
        var encoded_start: usize = 0;
        var payload_bytes: u64 = 0;
        for (batch.record_lens, batch.payload_lens, batch.payload_parts) |record_len, payload_len, payload| {
            if (writer.shard) |shard| {
                const would_be = shard.byte_len + run.bytes + record_len;
                if (shard.byte_len + run.bytes > 0 and would_be > writer.options.max_shard_bytes) {
                    try writer.appendToShard(&run, diagnostic);
                    run.clear();
                    try writer.closeShard();
                }
            }
            if (writer.shard == null) try writer.openShard(diagnostic);
            const shard = &writer.shard.?;
            var row: [index_file.row_bytes]u8 = undefined;
            index_file.encodeRow(.{
                .shard_id = writer.shards.items.len,
                .offset = shard.byte_len + run.bytes,
                .record_len = record_len,
            }, &row);
            writer.index_bytes.appendSliceAssumeCapacity(&row);
            const external = writer.isExternal(payload_len);
            const framed_len: usize = @intCast(if (external) record_len - payload_len else record_len);
            try run.append(batch.encoded.items[encoded_start..][0..framed_len]);
            if (external) try run.append(payload[0..@intCast(payload_len)]);
            encoded_start += framed_len;
            shard.uncompressed_byte_len += payload_len;
            payload_bytes += payload_len;
        }
        std.debug.assert(encoded_start == batch.encoded.items.len);
        try writer.appendToShard(&run, diagnostic);
        for (writer.columns, batch.columns) |*column, *chunk| try column.appendColumn(allocator, chunk);
        writer.sample_count += batch.count;
        _ = writer.stats.samples_committed.fetchAdd(batch.count, .monotonic);
        _ = writer.stats.payload_bytes_committed.fetchAdd(payload_bytes, .monotonic);
        _ = writer.stats.shard_bytes_committed.fetchAdd(run.total, .monotonic);
    }

    /// Consecutive pieces of one shard's bytes; a piece that continues the
    /// previous one in memory extends it, so framed records go as one run.
    const Segments = struct {
        allocator: std.mem.Allocator,
        list: std.ArrayList([]const u8) = .empty,
        bytes: u64 = 0,
        /// Across `clear`s: everything this batch wrote.
        total: u64 = 0,

        fn append(segments: *Segments, piece: []const u8) !void {
            if (piece.len == 0) return;
            segments.bytes += piece.len;
            segments.total += piece.len;
            const items = segments.list.items;
            if (items.len > 0 and items[items.len - 1].ptr + items[items.len - 1].len == piece.ptr) {
                items[items.len - 1].len += piece.len;
                return;
            }
            try segments.list.append(segments.allocator, piece);
        }

        fn clear(segments: *Segments) void {
            segments.list.clearRetainingCapacity();
            segments.bytes = 0;
        }
    };

    fn appendToShard(writer: *CacheWriter, run: *const Segments, diagnostic: *Diagnostic) Error!void {
        const bytes = run.bytes;
        if (bytes == 0) return;
        const pieces = run.list.items;
        const shard = &writer.shard.?;
        const write_started = system.monotonicNanoseconds();
        writeAllAt(shard.file, pieces, shard.byte_len) catch |err| {
            diagnostic.set("cannot write shard {d}: {s}", .{ writer.shards.items.len, @errorName(err) });
            return error.Io;
        };
        writer.stats.disk_write.add(write_started, bytes);
        shard.byte_len += bytes;
        if (shard.byte_len - shard.writeback_start >= writeback_bytes) {
            durable_files.startWriteback(shard.file, shard.writeback_start, shard.byte_len - shard.writeback_start);
            shard.writeback_start = shard.byte_len;
            shard.hasher.advance(shard.byte_len, false);
        }
    }

    /// Writes `pieces` back to back from `offset`, a few per system call and
    /// at most `write_call_bytes_max` bytes per call, resuming after short writes.
    fn writeAllAt(file: std.Io.File, pieces: []const []const u8, offset: u64) !void {
        const io = system.io();
        var position = offset;
        var next: usize = 0; // first piece not fully written
        var skip: usize = 0; // bytes of pieces[next] already written
        var vectors: [16][]const u8 = undefined;
        while (next < pieces.len) {
            const count = @min(vectors.len, pieces.len - next);
            @memcpy(vectors[0..count], pieces[next..][0..count]);
            vectors[0] = vectors[0][skip..];
            var used: usize = 0;
            var room: usize = write_call_bytes_max;
            while (used < count and room > 0) : (used += 1) {
                if (vectors[used].len > room) vectors[used] = vectors[used][0..room];
                room -= vectors[used].len;
            }
            var written = try file.writePositional(io, vectors[0..used], position);
            if (written == 0) return error.WriteZero;
            position += written;
            written += skip;
            while (next < pieces.len and written >= pieces[next].len) {
                written -= pieces[next].len;
                next += 1;
            }
            skip = written;
        }
    }

    /// The page cache sizes its folios from each write, and on the benchmark
    /// machine (a VM that hands free memory back to its host) large folios
    /// seem to come from memory the host took back, so the kernel's copy
    /// into them is slow: W2 writes of 4 MiB per call took 0.52-0.82 s in 12
    /// of 22 processes, against 0.29-0.32 s; at most 512 KiB per call,
    /// 0.29-0.32 s in all 20 (128 KiB: 0.32 s, for the extra system calls).
    /// See docs/runtime.md.
    const write_call_bytes_max = 512 << 10;

    /// Written shard bytes are handed to the disk in steps of this size as the
    /// cache grows, so the fsyncs of `finish` wait for the last step only.
    const writeback_bytes = 8 << 20;

    fn openShard(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const name = ShardName.of(writer.shards.items.len);
        const file = writer.shards_dir.?.createFile(io, name.slice(), .{ .truncate = true, .exclusive = true }) catch |err| {
            diagnostic.set("cannot create shard {s}: {s}", .{ name.slice(), @errorName(err) });
            return error.Io;
        };
        errdefer file.close(io);
        // A second, read-only handle for the hasher, which reads the shard back.
        const reading = writer.shards_dir.?.openFile(io, name.slice(), .{}) catch |err| {
            diagnostic.set("cannot open shard {s} to hash it: {s}", .{ name.slice(), @errorName(err) });
            return error.Io;
        };
        const hasher = ShardHasher.create(writer.allocator, writer.pool, &writer.shard_hashing, reading, name) catch {
            reading.close(io);
            return error.OutOfMemory;
        };
        writer.shard_hashers.append(writer.allocator, hasher) catch {
            hasher.destroy();
            return error.OutOfMemory;
        };
        writer.shard = .{ .file = file, .hasher = hasher };
    }

    fn closeShard(writer: *CacheWriter) Error!void {
        const shard = writer.shard.?;
        writer.shard = null;
        // Not fsynced on the committing thread, which would stall the ordered
        // commit for the whole flush: a pool job fsyncs and closes the file
        // while writing goes on, and finish() waits for it before anything
        // is published.
        // Each closed shard waiting for its fsync and its hash holds two open
        // files: past a few dozen, finish them here so small shards cannot
        // exhaust the descriptor limit (about a queue's worth, 1024, otherwise).
        const crowded = writer.file_syncs.pendingCount() >= closed_shards_pending_max;
        const what: SyncedFile = .{ .shard = .{ .index = writer.shards.items.len, .hasher = shard.hasher } };
        if (crowded) writer.syncAndClose(shard.file, what) else writer.syncInBackground(shard.file, what);
        try writer.shard_names.append(writer.allocator, shard.hasher.name);
        try writer.shards.append(writer.allocator, .{
            .name = &.{}, // pointed at shard_names once the list stops growing
            .uncompressed_byte_len = shard.uncompressed_byte_len,
            .byte_len = shard.byte_len,
            .compression = .{ .algo = switch (writer.options.compression) {
                .none => .none,
                .lz4 => .lz4,
            }, .ratio = writer.options.compression_ratio },
            .sha256 = undefined, // from its hasher in `finish`
        });
        shard.hasher.advanceAs(shard.byte_len, true, crowded);
    }

    const closed_shards_pending_max = 32;

    /// A written file's fsync, queued on the pool; it owns (and closes) the
    /// file. Whoever takes it from `syncs_waiting` first does the fsync: the
    /// pool job, or a pusher waiting for room (`waitUntilInFlightBelow`).
    const FileSync = struct {
        job: thread_pool.Job = .{ .run = run },
        writer: *CacheWriter,
        work: SyncWork,

        fn run(job: *thread_pool.Job) void {
            const sync: *FileSync = @fieldParentPtr("job", job);
            const writer = sync.writer;
            if (writer.takeWaitingSync(sync)) |work| work.perform(writer);
            writer.allocator.destroy(sync);
            writer.sync_jobs.finish();
        }
    };

    /// One fsync to do; copied out of its `FileSync` by whoever takes it.
    const SyncWork = struct {
        file: std.Io.File,
        what: SyncedFile,

        fn perform(work: SyncWork, writer: *CacheWriter) void {
            writer.syncAndClose(work.file, work.what);
            writer.file_syncs.finish();
        }
    };

    /// Takes `sync` (or, when null, the oldest) from `syncs_waiting` if it is still there.
    fn takeWaitingSync(writer: *CacheWriter, sync: ?*FileSync) ?SyncWork {
        const io = system.io();
        writer.mutex.lockUncancelable(io);
        defer writer.mutex.unlock(io);
        return writer.takeWaitingSyncLocked(sync);
    }

    fn takeWaitingSyncLocked(writer: *CacheWriter, sync: ?*FileSync) ?SyncWork {
        const waiting = &writer.syncs_waiting;
        const position = if (sync) |wanted|
            std.mem.indexOfScalar(*FileSync, waiting.items, wanted) orelse return null
        else if (waiting.items.len > 0) 0 else return null;
        return waiting.orderedRemove(position).work;
    }

    /// Which file a `FileSync` is for, for its error message.
    const SyncedFile = union(enum) {
        /// A closed shard, and its hasher (for `dropCachedPages`).
        shard: struct { index: u64, hasher: *ShardHasher },
        /// A file of the staging directory (a string literal).
        staging: []const u8,
    };

    fn syncAndClose(writer: *CacheWriter, file: std.Io.File, what: SyncedFile) void {
        const io = system.io();
        if (file.sync(io)) {
            // Hashed and on disk: its pages may go. If the hash is not final yet,
            // the hasher drops them when it is (they are all clean by then).
            switch (what) {
                .shard => |shard| if (shard.hasher.isFinal()) durable_files.dropCachedPages(file, 0, 0),
                .staging => {},
            }
        } else |err| {
            var diagnostic: Diagnostic = .{};
            switch (what) {
                .shard => |shard| diagnostic.set("cannot fsync shard {s}: {s}", .{ ShardName.of(shard.index).slice(), @errorName(err) }),
                .staging => |name| diagnostic.set("cannot fsync {s}: {s}", .{ name, @errorName(err) }),
            }
            writer.fail(error.Io, &diagnostic);
        }
        file.close(io);
    }

    /// fsyncs and closes `file` on the pool (or on a waiting pusher); `finish`
    /// waits for every such fsync (`file_syncs`) before publishing, and fails
    /// the write if one failed. A shard is fsynced once, when it is closed:
    /// fsyncs of the open shard every 16 MiB as well made W2 writes (512 x
    /// 1 MiB) take 0.296 s against 0.266 s, presumably because each one also
    /// flushes the disk's cache (W1 writes: 0.289 against 0.286 s).
    fn syncInBackground(writer: *CacheWriter, file: std.Io.File, what: SyncedFile) void {
        const io = system.io();
        const work: SyncWork = .{ .file = file, .what = what };
        writer.file_syncs.add(1);
        const sync = writer.allocator.create(FileSync) catch return work.perform(writer);
        sync.* = .{ .writer = writer, .work = work };
        writer.mutex.lockUncancelable(io);
        writer.syncs_waiting.append(writer.allocator, sync) catch {
            writer.mutex.unlock(io);
            writer.allocator.destroy(sync);
            return work.perform(writer);
        };
        writer.changed.broadcast(io); // a waiting pusher may take it
        writer.mutex.unlock(io);
        writer.sync_jobs.add(1);
        // The committer submits from a pool thread: it must not wait for room.
        writer.pool.submitOrRun(&sync.job);
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
            diagnostic.set("source '{s}' produced no samples; a cache needs at least one", .{writer.source_name});
            return error.InvalidInput;
        }
        writer.phase = .finished;
        const started = system.monotonicNanoseconds();
        try writer.closeShard();
        for (writer.shards.items, writer.shard_names.items) |*shard, *name| shard.name = name.slice();
        const index_digest = try writer.writeIndex(diagnostic);
        const metadata_digest = try writer.writeMetadata(diagnostic);
        // While the pool still hashes, this thread does the waiting fsyncs.
        while (writer.shard_hashing.pendingCount() > 0) {
            const work = writer.takeWaitingSync(null) orelse break;
            work.perform(writer);
        }
        writer.shard_hashing.wait();
        try writer.checkFailure(diagnostic);
        std.debug.assert(writer.shard_hashers.items.len == writer.shards.items.len);
        for (writer.shards.items, writer.shard_hashers.items) |*shard, hasher| {
            shard.sha256 = try hasher.result(diagnostic);
            writer.stats.hashing.addMeasured(hasher.nanoseconds, shard.byte_len);
        }
        try writer.writeManifest(index_digest, metadata_digest, diagnostic);
        const sync_started = system.monotonicNanoseconds();
        // The files' fsyncs run side by side, so the file system can serve
        // them with fewer journal commits than one after the other.
        // Every shard went through `syncInBackground` when it was closed.
        writer.file_syncs.wait();
        writer.stats.disk_write.add(sync_started, 0);
        try writer.checkFailure(diagnostic);
        try durable_files.syncDir(writer.shards_dir.?, cache_layout.shards_dir, diagnostic);
        try durable_files.syncDir(writer.staging_dir.?, writer.staging_name, diagnostic);
        writer.stats.finish_manifest.add(started, writer.index_bytes.items.len);
        try writer.publish(diagnostic);
    }

    fn writeIndex(writer: *CacheWriter, diagnostic: *Diagnostic) Error![32]u8 {
        writer.syncInBackground(try durable_files.writeFile(writer.staging_dir.?, cache_layout.index_file, writer.index_bytes.items, diagnostic), .{ .staging = cache_layout.index_file });
        return sha256.hash(writer.index_bytes.items);
    }

    fn writeMetadata(writer: *CacheWriter, diagnostic: *Diagnostic) Error![32]u8 {
        const allocator = writer.allocator;
        const columns = try allocator.alloc(types.Column, writer.schema.len);
        defer allocator.free(columns);
        for (columns, writer.schema, writer.columns) |*column, field, *builder| {
            std.debug.assert(builder.rowCount() == writer.sample_count);
            column.* = .{ .name = field.name, .values = builder.view() };
        }
        const bytes = arrow_ipc_write.writeFile(allocator, columns, writer.sample_count) catch |err| switch (err) {
            error.OutOfMemory => return error.OutOfMemory,
            error.TooLarge => {
                diagnostic.set("metadata table is too large for an Arrow IPC file", .{});
                return error.InvalidInput;
            },
        };
        defer allocator.free(bytes);
        writer.syncInBackground(try durable_files.writeFile(writer.staging_dir.?, cache_layout.metadata_file, bytes, diagnostic), .{ .staging = cache_layout.metadata_file });
        return sha256.hash(bytes);
    }

    fn writeManifest(writer: *CacheWriter, index_digest: [32]u8, metadata_digest: [32]u8, diagnostic: *Diagnostic) Error!void {
        const text = manifest.write(writer.allocator, .{
            .format_version = manifest.format_version_supported,
            .source_name = writer.source_name,
            .sample_count = writer.sample_count,
            .metadata_schema = writer.schema,
            .metadata_sha256 = metadata_digest,
            .index_sha256 = index_digest,
            .shards = writer.shards.items,
        }) catch return error.OutOfMemory;
        defer writer.allocator.free(text);
        writer.syncInBackground(try durable_files.writeFile(writer.staging_dir.?, cache_layout.manifest_file, text, diagnostic), .{ .staging = cache_layout.manifest_file });
    }

    /// The base directory's path as given, with a trailing separator.
    fn baseDirPath(writer: *const CacheWriter) []const u8 {
        return writer.target_path[0 .. writer.target_path.len - writer.source_name.len];
    }

    fn publish(writer: *CacheWriter, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const started = system.monotonicNanoseconds();
        writer.closeStaging();
        // The lock is held, so only a writer that ignores it could have created the target.
        if (writer.targetExists()) {
            diagnostic.set("cache path already exists: {s}", .{writer.target_path});
            return error.AlreadyExists;
        }
        directory_entries.rename(io, writer.base_dir, writer.baseDirPath(), writer.staging_name, writer.source_name) catch |err| {
            diagnostic.set("cannot publish {s}: {s}", .{ writer.target_path, @errorName(err) });
            return error.Io;
        };
        writer.phase = .published;
        try durable_files.syncDir(writer.base_dir, "the cache directory", diagnostic);
        writer.stats.publish.add(started, 0);
    }
};

test "pieces written at an offset land back to back, more of them than one call takes" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const file = try tmp.dir.createFile(io, "shard.bin", .{ .read = true });
    defer file.close(io);
    var storage: [40][3]u8 = undefined;
    var pieces: [40][]const u8 = undefined;
    var expected: [120]u8 = undefined;
    for (&storage, &pieces, 0..) |*bytes, *piece, i| {
        bytes.* = .{ @intCast(i), @intCast(i + 100), @intCast(i + 200) };
        piece.* = bytes[0 .. 1 + i % 3]; // lengths 1, 2, 3
    }
    var expected_len: usize = 0;
    for (pieces) |piece| {
        @memcpy(expected[expected_len..][0..piece.len], piece);
        expected_len += piece.len;
    }
    try file.writePositionalAll(io, "head", 0);
    try CacheWriter.writeAllAt(file, &pieces, 4);
    var buffer: [200]u8 = undefined;
    const read = try tmp.dir.readFile(io, "shard.bin", &buffer);
    try std.testing.expectEqualStrings("head", read[0..4]);
    try std.testing.expectEqualSlices(u8, expected[0..expected_len], read[4..]);
}

test "pieces longer than one call's bytes, and pieces across a call's end, land back to back" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const allocator = std.testing.allocator;
    const file = try tmp.dir.createFile(io, "shard.bin", .{ .read = true });
    defer file.close(io);
    const cap = CacheWriter.write_call_bytes_max;
    // Lengths chosen so calls end inside a piece, exactly at a piece's end, and after several pieces.
    const lens = [_]usize{ 7, cap - 7, 3 * cap + 5, 1, cap, 2, cap / 2, cap / 2 + 1 };
    var total: usize = 0;
    for (lens) |len| total += len;
    const expected = try allocator.alloc(u8, total);
    defer allocator.free(expected);
    for (expected, 0..) |*byte, i| byte.* = @truncate(i *% 2654435761 >> 13);
    var pieces: [lens.len][]const u8 = undefined;
    var start: usize = 0;
    for (lens, &pieces) |len, *piece| {
        piece.* = expected[start..][0..len];
        start += len;
    }
    try CacheWriter.writeAllAt(file, &pieces, 3);
    const read = try allocator.alloc(u8, total + 3);
    defer allocator.free(read);
    try std.testing.expectEqual(total + 3, try file.readPositionalAll(io, read, 0));
    try std.testing.expectEqualSlices(u8, expected, read[3..]);
}
