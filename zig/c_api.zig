//! The C ABI of dataset_rt.h. This file only translates: it checks pointers,
//! converts C types to Zig types, maps Zig errors to status codes and stores
//! messages in the calling thread's last-error buffer. No logic lives here.
const std = @import("std");
const lz4 = @import("codec/lz4.zig");
const sha256 = @import("codec/sha256.zig");
const shard_record = @import("format/shard_record.zig");
const thread_pool = @import("base/thread_pool.zig");
const cache_writer = @import("write/cache_writer.zig");
const cache_replace = @import("write/cache_replace.zig");
const metadata_columns = @import("format/metadata_columns.zig");
const dataset_module = @import("read/dataset.zig");
const ShardMapping = @import("read/shard_mapping.zig").ShardMapping;
const sample_batch = @import("read/sample_batch.zig");
const metadata_table = @import("table/metadata_table.zig");
const arrow_c_export = @import("table/arrow_c_export.zig");
const cache_info = @import("table/cache_info.zig");
const active_table = @import("stream/active_table.zig");
const read_pipeline = @import("read/read_pipeline.zig");
const cache_layout = @import("format/cache_layout.zig");
const sampler = @import("stream/sampler.zig");
const permutation = @import("stream/permutation.zig");
const stream_share = @import("stream/stream_share.zig");
const stream_state = @import("stream/stream_state.zig");
const error_words = @import("base/error_words.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const metadata_types = @import("format/metadata_types.zig");
const c_types = @import("c_types.zig");
const WriterOptions = c_types.WriterOptions;
const StageStats = c_types.StageStats;
const WriterStats = c_types.WriterStats;
const ReaderOptions = c_types.ReaderOptions;
const StreamPosition = c_types.StreamPosition;
const StreamState = c_types.StreamState;
const ShareSpec = c_types.ShareSpec;
const ShareCounts = c_types.ShareCounts;
const Buffer = c_types.Buffer;
const IntegerColumn = c_types.IntegerColumn;
const FloatColumn = c_types.FloatColumn;
const shareOf = c_types.shareOf;
const algorithm_bytes = c_types.algorithm_bytes;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_invalid_input = c_status.status_invalid_input;
const status_invalid_cache = c_status.status_invalid_cache;
const status_io = c_status.status_io;
const status_out_of_memory = c_status.status_out_of_memory;
const status_already_exists = c_status.status_already_exists;
const status_wrong_process = c_status.status_wrong_process;
const status_state = c_status.status_state;
const status_out_of_range = c_status.status_out_of_range;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const failWith = c_status.failWith;
const nullArgument = c_status.nullArgument;
const statusOf = c_status.statusOf;
const setLastError = c_status.setLastError;
const checkProcess = c_status.checkProcess;
const byteString = c_status.byteString;
const Runtime = c_status.Runtime;

const abi_version: u32 = 4;

export fn drt_abi_version() u32 {
    return abi_version;
}

export fn drt_last_error() [*:0]const u8 {
    return &c_status.last_error;
}

// ---- runtime ---------------------------------------------------------------

export fn drt_runtime_create(num_workers: u32, out: ?*?*Runtime) i32 {
    const out_ptr = out orelse return nullArgument("out pointer");
    if (num_workers < 1) return failMessage(
        status_invalid_argument,
        "num_workers must be greater than zero",
        .{},
    );
    if (num_workers > thread_pool.workers_max) return failMessage(
        status_invalid_argument,
        "num_workers must be at most {d}, got {d}",
        .{ thread_pool.workers_max, num_workers },
    );
    out_ptr.* = Runtime.create(allocator, num_workers) catch |err| return failMessage(
        status_state,
        "cannot start {d} worker threads: {f}",
        .{ num_workers, error_words.of(err) },
    );
    return status_ok;
}

export fn drt_runtime_destroy(runtime: ?*Runtime) void {
    const pool = runtime orelse return;
    pool.release();
}

export fn drt_runtime_num_workers(runtime: ?*const Runtime) u32 {
    const pool = runtime orelse return 0;
    return pool.workerCount();
}

// ---- writer ----------------------------------------------------------------

export fn drt_writer_create(
    runtime: ?*Runtime,
    base_dir: ?[*]const u8,
    base_dir_len: u64,
    source_name: ?[*]const u8,
    source_name_len: u64,
    options: ?*const WriterOptions,
    out: ?*?*cache_writer.CacheWriter,
) i32 {
    const pool = runtime orelse return nullArgument("runtime");
    if (!checkProcess(pool)) return status_wrong_process;
    const base = byteString(base_dir, base_dir_len) orelse return nullArgument("base_dir");
    const name = byteString(source_name, source_name_len) orelse return nullArgument("source_name");
    const opts = options orelse return nullArgument("options");
    const out_ptr = out orelse return nullArgument("out pointer");
    const compression = compressionOf(opts.compression) orelse return failMessage(
        status_invalid_argument,
        "unknown compression code {d}",
        .{opts.compression},
    );
    var diagnostic: Diagnostic = .{};
    out_ptr.* = cache_writer.CacheWriter.create(allocator, pool, base, name, .{
        .max_shard_bytes = opts.max_shard_bytes,
        .batches_in_flight_max = opts.batches_in_flight_max,
        .compression = compression,
        .compression_ratio = opts.compression_ratio,
        .format_version = if (opts.format_version == 0) 2 else opts.format_version,
    }, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

fn compressionOf(code: u32) ?shard_record.Compression {
    return switch (code) {
        0 => .none,
        1 => .lz4,
        else => null,
    };
}

export fn drt_check_compression(compression: u32, ratio: f64) i32 {
    const codec = compressionOf(compression) orelse return failMessage(
        status_invalid_argument,
        "unknown compression code {d}",
        .{compression},
    );
    var diagnostic: Diagnostic = .{};
    cache_writer.CacheWriter.checkCompression(codec, ratio, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_cache_published(path: ?[*]const u8, path_len: u64, out: ?*u32) i32 {
    const path_bytes = byteString(path, path_len) orelse return nullArgument("path");
    const out_ptr = out orelse return nullArgument("out pointer");
    out_ptr.* = @intFromBool(cache_layout.isPublished(path_bytes));
    return status_ok;
}

/// Core-owned JSON describing the cache at `path`, from its manifest alone.
export fn drt_cache_info(path: ?[*]const u8, path_len: u64, out: ?*?*Buffer) i32 {
    const path_bytes = byteString(path, path_len) orelse return nullArgument("path");
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const text = cache_info.describe(allocator, path_bytes, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return handOut(text, out_ptr);
}

export fn drt_check_source_name(source_name: ?[*]const u8, source_name_len: u64) i32 {
    const name = byteString(source_name, source_name_len) orelse return nullArgument("source_name");
    var diagnostic: Diagnostic = .{};
    cache_writer.CacheWriter.checkSourceName(name, &diagnostic) catch |err| return failError(
        err,
        &diagnostic,
    );
    return status_ok;
}

export fn drt_cache_replace(
    base_dir: ?[*]const u8,
    base_dir_len: u64,
    source_name: ?[*]const u8,
    source_name_len: u64,
    fresh_name: ?[*]const u8,
    fresh_name_len: u64,
    replaced: ?*u32,
) i32 {
    const base = byteString(base_dir, base_dir_len) orelse return nullArgument("base_dir");
    const name = byteString(source_name, source_name_len) orelse
        return nullArgument("source_name");
    const fresh = byteString(fresh_name, fresh_name_len) orelse
        return nullArgument("fresh_name");
    const replaced_ptr = replaced orelse return nullArgument("replaced pointer");
    var diagnostic: Diagnostic = .{};
    cache_writer.CacheWriter.checkSourceName(name, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    const outcome = cache_replace.replace(allocator, base, name, fresh, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    replaced_ptr.* = @backingInt(outcome);
    return status_ok;
}

export fn drt_writer_push(
    writer: ?*cache_writer.CacheWriter,
    payloads: ?[*]const u8,
    payloads_len: u64,
    payload_lens: ?[*]const u64,
    count: u64,
    metadata_json: ?[*]const u8,
    metadata_json_len: u64,
) i32 {
    const w = writer orelse return nullArgument("writer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    if (count == 0) return status_ok;
    const lens = payload_lens orelse return nullArgument("payload_lens");
    const text = metadata_json orelse return nullArgument("metadata_json");
    const payload_bytes: []const u8 = if (payloads_len == 0) &.{} else (payloads orelse return nullArgument("payloads"))[0..@intCast(payloads_len)];
    var diagnostic: Diagnostic = .{};
    w.push(
        payload_bytes,
        lens[0..@intCast(count)],
        text[0..@intCast(metadata_json_len)],
        &diagnostic,
    ) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_writer_push_borrowed(
    writer: ?*cache_writer.CacheWriter,
    payloads: ?[*]const ?[*]const u8,
    payload_lens: ?[*]const u64,
    count: u64,
    metadata_json: ?[*]const u8,
    metadata_json_len: u64,
) i32 {
    const text = metadata_json orelse return nullArgument("metadata_json");
    return pushBorrowed(
        writer,
        payloads,
        payload_lens,
        count,
        .{ .json = text[0..@intCast(metadata_json_len)] },
    );
}

export fn drt_writer_push_columns(
    writer: ?*cache_writer.CacheWriter,
    payloads: ?[*]const ?[*]const u8,
    payload_lens: ?[*]const u64,
    count: u64,
    columns: ?[*]const metadata_columns.PushColumn,
    column_count: u64,
) i32 {
    const pushed: []const metadata_columns.PushColumn = if (column_count == 0) &.{} else (columns orelse return nullArgument("columns"))[0..@intCast(column_count)];
    return pushBorrowed(writer, payloads, payload_lens, count, .{ .columns = pushed });
}

export fn drt_writer_push_columns_joined(
    writer: ?*cache_writer.CacheWriter,
    payloads: ?[*]const u8,
    payloads_len: u64,
    payload_lens: ?[*]const u64,
    count: u64,
    columns: ?[*]const metadata_columns.PushColumn,
    column_count: u64,
) i32 {
    const w = writer orelse return nullArgument("writer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    if (count == 0) return status_ok;
    const lens = payload_lens orelse return nullArgument("payload_lens");
    const payload_bytes: []const u8 = if (payloads_len == 0) &.{} else (payloads orelse return nullArgument("payloads"))[0..@intCast(payloads_len)];
    const pushed: []const metadata_columns.PushColumn = if (column_count == 0) &.{} else (columns orelse return nullArgument("columns"))[0..@intCast(column_count)];
    var diagnostic: Diagnostic = .{};
    w.pushColumnsJoined(payload_bytes, lens[0..@intCast(count)], pushed, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

/// The pushes whose payloads the core reads later from the caller's memory.
fn pushBorrowed(
    writer: ?*cache_writer.CacheWriter,
    payloads: ?[*]const ?[*]const u8,
    payload_lens: ?[*]const u64,
    count: u64,
    metadata: union(enum) { json: []const u8, columns: []const metadata_columns.PushColumn },
) i32 {
    const w = writer orelse return nullArgument("writer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    if (count == 0) return status_ok;
    const parts = (payloads orelse return nullArgument("payloads"))[0..@intCast(count)];
    const lens = (payload_lens orelse return nullArgument("payload_lens"))[0..@intCast(count)];
    var diagnostic: Diagnostic = .{};
    const pushed = switch (metadata) {
        .json => |text| w.pushBorrowed(parts, lens, text, &diagnostic),
        .columns => |columns| w.pushColumns(parts, lens, columns, &diagnostic),
    };
    pushed catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_writer_set_page_cache(writer: ?*cache_writer.CacheWriter, policy: u32) i32 {
    const w = writer orelse return nullArgument("writer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    const mode = std.enums.fromInt(cache_writer.PageCacheMode, policy) orelse
        return failMessage(status_invalid_argument, "unknown page cache policy {d}", .{policy});
    var diagnostic: Diagnostic = .{};
    w.setPageCache(mode, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_writer_finish(writer: ?*cache_writer.CacheWriter) i32 {
    const w = writer orelse return nullArgument("writer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    var diagnostic: Diagnostic = .{};
    w.finish(&diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_writer_path(writer: ?*const cache_writer.CacheWriter) ?[*:0]const u8 {
    const w = writer orelse return null;
    if (w.phase != .published) return null;
    return w.target_path.ptr;
}

fn stageStats(counter: *const cache_writer.StageCounter) StageStats {
    return .{
        .calls = counter.calls.load(.monotonic),
        .nanoseconds = counter.nanoseconds.load(.monotonic),
        .bytes = counter.bytes.load(.monotonic),
    };
}

export fn drt_writer_stats_get(writer: ?*const cache_writer.CacheWriter, out: ?*WriterStats) i32 {
    const w = writer orelse return nullArgument("writer");
    const out_ptr = out orelse return nullArgument("out pointer");
    if (!checkProcess(w.pool)) return status_wrong_process;
    const stats = &w.stats;
    out_ptr.* = .{
        // pairs with commitBatch's release
        .samples_committed = stats.samples_committed.load(.acquire),
        .payload_bytes_committed = stats.payload_bytes_committed.load(.monotonic),
        .shard_bytes_committed = stats.shard_bytes_committed.load(.monotonic),
        .ingress_wait = stageStats(&stats.ingress_wait),
        .encode = stageStats(&stats.encode),
        .compression = stageStats(&stats.compression),
        .hashing = stageStats(&stats.hashing),
        .disk_write = stageStats(&stats.disk_write),
        .finish_manifest = stageStats(&stats.finish_manifest),
        .publish = stageStats(&stats.publish),
    };
    return status_ok;
}

export fn drt_writer_destroy(writer: ?*cache_writer.CacheWriter) void {
    const w = writer orelse return;
    // A forked child must not wait on the parent's threads nor delete its staging files.
    if (!w.pool.ownedByThisProcess()) return;
    w.destroy();
}

// ---- dataset and iterators ---------------------------------------------------

export fn drt_dataset_open(
    runtime: ?*Runtime,
    paths: ?[*]const ?[*]const u8,
    path_lens: ?[*]const u64,
    path_count: u32,
    options: ?*const ReaderOptions,
    out: ?*?*dataset_module.Dataset,
) i32 {
    const pool = runtime orelse return nullArgument("runtime");
    if (!checkProcess(pool)) return status_wrong_process;
    const opts = options orelse return nullArgument("options");
    const out_ptr = out orelse return nullArgument("out pointer");
    const path_ptrs = paths orelse return nullArgument("paths");
    const lens = path_lens orelse return nullArgument("path_lens");
    const spans = allocator.alloc([]const u8, path_count) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    defer allocator.free(spans);
    for (spans, path_ptrs[0..path_count], lens[0..path_count], 0..) |*span, pointer, len, i| {
        span.* = byteString(pointer, len) orelse return failMessage(
            status_invalid_argument,
            "path {d} is NULL",
            .{i},
        );
    }
    if (opts.without_replacement > 1) return failMessage(
        status_invalid_argument,
        "options.without_replacement must be 0 or 1, got {d}",
        .{opts.without_replacement},
    );
    var diagnostic: Diagnostic = .{};
    out_ptr.* = dataset_module.Dataset.open(allocator, pool, spans, .{
        .seed = opts.seed,
        .prefetch_size = opts.prefetch_size,
        .shuffle = opts.shuffle != 0,
        .validate_cache = opts.validate_cache != 0,
        .replacement = opts.without_replacement == 0,
    }, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_destroy(dataset: ?*dataset_module.Dataset) void {
    const d = dataset orelse return;
    if (!d.pool.ownedByThisProcess()) return; // leaked in a forked child: see drt_writer_destroy
    d.release();
}

export fn drt_dataset_len(dataset: ?*dataset_module.Dataset, out: ?*u64) i32 {
    const d = dataset orelse return nullArgument("dataset");
    const out_ptr = out orelse return nullArgument("out pointer");
    if (!checkProcess(d.pool)) return status_wrong_process;
    out_ptr.* = d.len();
    return status_ok;
}

export fn drt_dataset_set_epoch_len(dataset: ?*dataset_module.Dataset, epoch_len: u64) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    var diagnostic: Diagnostic = .{};
    d.setEpochLen(epoch_len, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

// ---- stream state: resume, epochs, ranks and workers ------------------------

/// Fills `out` with `at` and the fingerprint of `dataset` reading `table`.
fn fillState(
    d: *const dataset_module.Dataset,
    table: *active_table.ActiveTable,
    at: stream_state.Position,
    out: *StreamState,
) i32 {
    const cache_sha256s = allocator.alloc(stream_state.Digest, d.caches.len) catch return failMessage(status_out_of_memory, "out of memory", .{});
    defer allocator.free(cache_sha256s);
    const fingerprint = d.fingerprint(table, cache_sha256s);
    var algorithm: [algorithm_bytes]u8 = @splat(0);
    @memcpy(algorithm[0..fingerprint.algorithm.len], fingerprint.algorithm);
    out.* = .{
        .at = .of(at),
        .seed = fingerprint.seed,
        .shuffle = @intFromBool(fingerprint.shuffle),
        .cache_count = @intCast(d.caches.len),
        .table_sha256 = fingerprint.table_sha256,
        .algorithm = algorithm,
    };
    return status_ok;
}

export fn drt_dataset_cache_sha256s(
    dataset: ?*dataset_module.Dataset,
    out: ?[*]u8,
    cache_count: u32,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    if (cache_count != d.caches.len) return failMessage(
        status_invalid_argument,
        "cache_count is {d}, the dataset has {d} caches",
        .{ cache_count, d.caches.len },
    );
    const out_ptr = out orelse return nullArgument("out pointer");
    for (d.caches, 0..) |cache, index| out_ptr[index * stream_state.digest_length ..][0..stream_state.digest_length].* = cache.manifest_sha256;
    return status_ok;
}

export fn drt_dataset_position(dataset: ?*dataset_module.Dataset, out: ?*StreamPosition) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    out_ptr.* = .of(d.nextPosition());
    return status_ok;
}

export fn drt_dataset_state(dataset: ?*dataset_module.Dataset, out: ?*StreamState) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const state = d.state();
    defer state.table.release();
    return fillState(d, state.table, state.at, out_ptr);
}

export fn drt_dataset_take_state(dataset: ?*dataset_module.Dataset, out: ?*StreamState) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const state = d.takeState();
    defer state.table.release();
    return fillState(d, state.table, state.at, out_ptr);
}

export fn drt_dataset_load_state(
    dataset: ?*dataset_module.Dataset,
    state: ?*const StreamState,
    cache_sha256s: ?[*]const [stream_state.digest_length]u8,
    cache_count: u32,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const found = state orelse return nullArgument("state");
    const digests: []const stream_state.Digest = if (cache_count == 0) &.{} else (cache_sha256s orelse return nullArgument("cache_sha256s"))[0..cache_count];
    const algorithm_len = std.mem.indexOfScalar(u8, &found.algorithm, 0) orelse return failMessage(
        status_invalid_argument,
        "state.algorithm is not NUL-terminated",
        .{},
    );
    if (found.shuffle > 1) return failMessage(
        status_invalid_argument,
        "state.shuffle must be 0 or 1, got {d}",
        .{found.shuffle},
    );
    if (found.cache_count != cache_count) return failMessage(
        status_invalid_argument,
        "state.cache_count ({d}) differs from the {d} digests given",
        .{ found.cache_count, cache_count },
    );
    var diagnostic: Diagnostic = .{};
    d.loadState(.{
        .seed = found.seed,
        .shuffle = found.shuffle != 0,
        .algorithm = found.algorithm[0..algorithm_len],
        .table_sha256 = found.table_sha256,
        .cache_sha256s = digests,
    }, found.at.toPosition(), &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_set_epoch(dataset: ?*dataset_module.Dataset, epoch: u64) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    d.setEpoch(epoch);
    return status_ok;
}

export fn drt_share_count(span_len: u64, share: ?*const ShareSpec, out: ?*ShareCounts) i32 {
    const spec = share orelse return nullArgument("share");
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const the_share = shareOf(spec);
    the_share.validate(&diagnostic) catch |err| return failError(err, &diagnostic);
    const counts = stream_share.counts(span_len, the_share);
    out_ptr.* = .{
        .steps = counts.steps,
        .rank_samples = counts.rank_samples,
        .worker_batches = counts.worker_batches,
        .worker_samples = counts.worker_samples,
    };
    return status_ok;
}

/// Deprecated alias of `drt_share_count`, kept until ABI 4.
export fn drt_shard_count(span_len: u64, share: ?*const ShareSpec, out: ?*ShareCounts) i32 {
    return drt_share_count(span_len, share, out);
}

export fn drt_stream_after_steps(
    span: ?*const StreamPosition,
    share: ?*const ShareSpec,
    steps: u64,
    out: ?*StreamPosition,
) i32 {
    const span_ptr = span orelse return nullArgument("span");
    const spec = share orelse return nullArgument("share");
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const at = span_ptr.toPosition();
    at.validate(false, &diagnostic) catch |err| return failError(err, &diagnostic);
    const after = stream_share.afterSteps(at, shareOf(spec), steps, &diagnostic) catch |err| return failError(err, &diagnostic);
    out_ptr.* = .of(after);
    return status_ok;
}

/// Core-owned bytes handed to the caller; mirrors `drt_buffer`.
export fn drt_dataset_metadata_arrow(dataset: ?*dataset_module.Dataset, out: ?*?*Buffer) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const table = d.acquireTable();
    defer table.release();
    var diagnostic: Diagnostic = .{};
    const bytes = metadata_table.exportArrow(allocator, d, table, &diagnostic) catch |err| return failError(err, &diagnostic);
    return handOut(bytes, out_ptr);
}

export fn drt_dataset_metadata_arrow_stream(
    dataset: ?*dataset_module.Dataset,
    out: ?*arrow_c_export.ArrowArrayStream,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const table = d.acquireTable();
    defer table.release();
    var diagnostic: Diagnostic = .{};
    metadata_table.exportStream(allocator, d, table, out_ptr, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_schema_json(dataset: ?*dataset_module.Dataset, out: ?*?*Buffer) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const text = metadata_types.schemaJson(allocator, d.schema()) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    return handOut(text, out_ptr);
}

fn handOut(bytes: []u8, out: *?*Buffer) i32 {
    const buffer = allocator.create(Buffer) catch {
        allocator.free(bytes);
        return failMessage(status_out_of_memory, "out of memory", .{});
    };
    buffer.* = .{ .data = bytes.ptr, .len = bytes.len };
    out.* = buffer;
    return status_ok;
}

export fn drt_buffer_release(buffer: ?*Buffer) void {
    const b = buffer orelse return;
    allocator.free(b.data[0..@intCast(b.len)]);
    allocator.destroy(b);
}

export fn drt_dataset_set_table(
    dataset: ?*dataset_module.Dataset,
    columns_json: ?[*:0]const u8,
    row_count: u64,
    cache_ids: ?*const IntegerColumn,
    sample_ids: ?*const IntegerColumn,
    weights: ?*const FloatColumn,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const text = columns_json orelse return nullArgument("columns_json");
    const cache_column = cache_ids orelse return nullArgument("cache_ids");
    const sample_column = sample_ids orelse return nullArgument("sample_ids");
    const weight_column = weights orelse return nullArgument("weights");
    var diagnostic: Diagnostic = .{};
    var columns = metadata_table.ColumnTypes.parse(allocator, std.mem.span(text), &diagnostic) catch |err| return failError(err, &diagnostic);
    defer columns.deinit();
    const table = metadata_table.buildTable(allocator, d, .{
        .columns = columns.list,
        .row_count = row_count,
        .cache_ids = integerColumn(cache_column),
        .sample_ids = integerColumn(sample_column),
        .weights = .{
            .values = weight_column.values,
            .validity = weight_column.validity,
            .validity_offset = weight_column.validity_offset,
        },
    }, &diagnostic) catch |err| return failError(err, &diagnostic);
    d.replaceTable(table);
    return status_ok;
}

fn integerColumn(column: *const IntegerColumn) metadata_table.IntegerColumn {
    return .{
        .values = column.values,
        .validity = column.validity,
        .validity_offset = column.validity_offset,
        .signed = column.is_signed != 0,
    };
}

export fn drt_iterator_create(
    dataset: ?*dataset_module.Dataset,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return drt_iterator_create_deferring(dataset, 0, out);
}

export fn drt_iterator_create_deferring(
    dataset: ?*dataset_module.Dataset,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return createIterator(dataset, .whole, 0, defer_payload_bytes, out);
}

export fn drt_iterator_create_share(
    dataset: ?*dataset_module.Dataset,
    share: ?*const ShareSpec,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const spec = share orelse return nullArgument("share");
    return createIterator(dataset, shareOf(spec), skip, defer_payload_bytes, out);
}

/// Deprecated alias of `drt_iterator_create_share`, kept until ABI 4.
export fn drt_iterator_create_shard(
    dataset: ?*dataset_module.Dataset,
    share: ?*const ShareSpec,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return drt_iterator_create_share(dataset, share, skip, defer_payload_bytes, out);
}

export fn drt_iterator_create_reads(
    dataset: ?*dataset_module.Dataset,
    cache_ids: ?[*]const u64,
    sample_ids: ?[*]const u64,
    count: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const caches: []const u64 = if (count == 0) &.{} else (cache_ids orelse
        return nullArgument("cache_ids"))[0..@intCast(count)];
    const samples: []const u64 = if (count == 0) &.{} else (sample_ids orelse return nullArgument(
        "sample_ids",
    ))[0..@intCast(count)];
    var diagnostic: Diagnostic = .{};
    out_ptr.* = dataset_module.Iterator.createReads(
        d,
        caches,
        samples,
        defer_payload_bytes,
        &diagnostic,
    ) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

fn createIterator(
    dataset: ?*dataset_module.Dataset,
    share: stream_share.Share,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    out_ptr.* = dataset_module.Iterator.create(d, share, skip, defer_payload_bytes, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_iterator_span(iterator: ?*const dataset_module.Iterator, out: ?*StreamState) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    if (it.readsByIdentity()) return failMessage(
        status_state,
        "this iterator reads samples by identity; it has no stream position",
        .{},
    );
    return fillState(it.dataset, it.table(), it.span(), out_ptr);
}

export fn drt_iterator_state(
    iterator: ?*const dataset_module.Iterator,
    consumed: u64,
    out: ?*StreamState,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const at = it.position(consumed, &diagnostic) catch |err| return failError(err, &diagnostic);
    return fillState(it.dataset, it.table(), at, out_ptr);
}

export fn drt_iterator_next(iterator: ?*dataset_module.Iterator, out: ?*?*sample_batch.View) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const batch = it.next(&diagnostic) catch |err| return failError(err, &diagnostic);
    out_ptr.* = if (batch) |b| b.seal() else null;
    return status_ok;
}

export fn drt_iterator_bytes_held(iterator: ?*const dataset_module.Iterator) u64 {
    const it = iterator orelse return 0;
    if (!checkProcess(it.dataset.pool)) return 0;
    return it.bytesHeld();
}

export fn drt_batch_deferred(view: ?*const sample_batch.View, lengths_out: ?*?[*]const u64) i32 {
    const v = view orelse return nullArgument("batch");
    const out_ptr = lengths_out orelse return nullArgument("lengths_out");
    const batch = sample_batch.SampleBatch.fromConstView(v);
    out_ptr.* = if (batch.deferred_lengths.len == 0) null else batch.deferred_lengths.ptr;
    return status_ok;
}

/// `view` as a batch `it` returned, or null (the error set) when it is not one.
fn batchOf(
    it: *const dataset_module.Iterator,
    view: ?*const sample_batch.View,
) ?*const sample_batch.SampleBatch {
    const v = view orelse {
        _ = nullArgument("batch");
        return null;
    };
    const batch = sample_batch.SampleBatch.fromConstView(v);
    if (batch.owner != @as(*const anyopaque, it.pipeline)) {
        _ = failMessage(
            status_invalid_argument,
            "the batch was not returned by this iterator",
            .{},
        );
        return null;
    }
    return batch;
}

export fn drt_iterator_read_deferred(
    iterator: ?*dataset_module.Iterator,
    view: ?*const sample_batch.View,
    sample: u64,
    destination: ?[*]u8,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const batch = batchOf(it, view) orelse return status_invalid_argument;
    const entry = batch.deferredPayload(sample) orelse return failMessage(
        status_invalid_argument,
        "sample {d} of the batch (of {d}) has no deferred payload",
        .{ sample, batch.count() },
    );
    const dst = destination orelse return nullArgument("destination");
    const reads = [1]read_pipeline.DeferredRead{
        .{ .entry = entry, .destination = dst[0..@intCast(entry.location.len)] },
    };
    var diagnostic: Diagnostic = .{};
    it.pipeline.readDeferred(&reads, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_iterator_read_deferred_batch(
    iterator: ?*dataset_module.Iterator,
    view: ?*const sample_batch.View,
    destinations: ?[*]const ?[*]u8,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const batch = batchOf(it, view) orelse return status_invalid_argument;
    const all = destinations orelse return nullArgument("destinations");
    var reads: std.ArrayList(read_pipeline.DeferredRead) = .empty;
    defer reads.deinit(allocator);
    for (0..batch.count()) |sample| {
        const entry = batch.deferredPayload(sample) orelse continue;
        const dst = all[sample] orelse return failMessage(
            status_invalid_argument,
            "destination {d} is NULL but sample {d} has a deferred payload",
            .{ sample, sample },
        );
        reads.append(
            allocator,
            .{ .entry = entry, .destination = dst[0..@intCast(entry.location.len)] },
        ) catch return failMessage(status_out_of_memory, "out of memory", .{});
    }
    var diagnostic: Diagnostic = .{};
    it.pipeline.readDeferred(reads.items, &diagnostic) catch |err| return failError(
        err,
        &diagnostic,
    );
    return status_ok;
}

export fn drt_dataset_set_payloads(dataset: ?*dataset_module.Dataset, mode: u32) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const payloads = std.enums.fromInt(dataset_module.Payloads, mode) orelse
        return failMessage(status_invalid_argument, "unknown payloads mode {d}", .{mode});
    d.setPayloads(payloads);
    return status_ok;
}

export fn drt_batch_mapped(
    view: ?*const sample_batch.View,
    addresses_out: ?*?[*]const ?[*]const u8,
    mappings_out: ?*?[*]const ?*ShardMapping,
) i32 {
    const v = view orelse return nullArgument("batch");
    const addresses_ptr = addresses_out orelse return nullArgument("addresses_out");
    const mappings_ptr = mappings_out orelse return nullArgument("mappings_out");
    const batch = sample_batch.SampleBatch.fromConstView(v);
    addresses_ptr.* = if (batch.mapped_addresses.len == 0) null else batch.mapped_addresses.ptr;
    mappings_ptr.* = if (batch.mapped_mappings.len == 0) null else batch.mapped_mappings.ptr;
    return status_ok;
}

export fn drt_mapping_retain(
    mapping: ?*ShardMapping,
    base_out: ?*?[*]const u8,
    len_out: ?*u64,
) i32 {
    const m = mapping orelse return nullArgument("mapping");
    const base_ptr = base_out orelse return nullArgument("base_out");
    const len_ptr = len_out orelse return nullArgument("len_out");
    m.retain();
    base_ptr.* = m.bytes().ptr;
    len_ptr.* = m.bytes().len;
    return status_ok;
}

export fn drt_mapping_release(mapping: ?*ShardMapping) void {
    const m = mapping orelse return;
    m.release();
}

export fn drt_batch_release(view: ?*sample_batch.View) void {
    const v = view orelse return;
    read_pipeline.Pipeline.releaseBatchLater(allocator, sample_batch.SampleBatch.fromView(v));
}

export fn drt_iterator_destroy(iterator: ?*dataset_module.Iterator) void {
    const it = iterator orelse return;
    // leaked in a forked child: see drt_writer_destroy
    if (!it.dataset.pool.ownedByThisProcess()) return;
    it.destroy();
}

// ---- codec utilities ---------------------------------------------------------

export fn drt_lz4_compress_bound(source_len: u64) u64 {
    // Like LZ4_compressBound: 0 for an input too large for one block (and the formula never
    // overflows).
    if (source_len > lz4.source_length_max) return 0;
    return lz4.compressBound(@intCast(source_len));
}

export fn drt_lz4_compress(
    source: ?[*]const u8,
    source_len: u64,
    destination: ?[*]u8,
    destination_len: u64,
    written: ?*u64,
) i32 {
    const out = written orelse return nullArgument("written");
    const src: []const u8 = if (source_len == 0) &.{} else (source orelse return nullArgument(
        "source",
    ))[0..@intCast(source_len)];
    const dst = (destination orelse return nullArgument("destination"))[0..@intCast(
        destination_len,
    )];
    if (src.len > lz4.source_length_max) return failMessage(
        status_invalid_argument,
        "cannot compress {d} bytes in one lz4 block (at most {d})",
        .{ src.len, lz4.source_length_max },
    );
    if (dst.len < lz4.compressBound(src.len)) return failMessage(
        status_invalid_argument,
        "destination holds {d} bytes; compressing {d} bytes needs {d}",
        .{ dst.len, src.len, lz4.compressBound(src.len) },
    );
    out.* = lz4.compress(src, dst);
    return status_ok;
}

export fn drt_lz4_decompress(
    source: ?[*]const u8,
    source_len: u64,
    destination: ?[*]u8,
    destination_len: u64,
) i32 {
    const src: []const u8 = if (source_len == 0) &.{} else (source orelse return nullArgument(
        "source",
    ))[0..@intCast(source_len)];
    const dst: []u8 = if (destination_len == 0) &.{} else (destination orelse return nullArgument(
        "destination",
    ))[0..@intCast(destination_len)];
    lz4.decompress(src, dst) catch return failMessage(
        status_invalid_input,
        "corrupt lz4 block ({d} bytes, expected to decode to {d} bytes)",
        .{ src.len, dst.len },
    );
    return status_ok;
}

export fn drt_sampler_draws(
    weights: ?[*]const f64,
    n: u64,
    seed: u64,
    start: u64,
    count: u64,
    rows_out: ?[*]u64,
) i32 {
    const weight_values = (weights orelse return nullArgument("weights"))[0..@intCast(n)];
    const rows: []u64 = if (count == 0) &.{} else (rows_out orelse return nullArgument("rows_out"))[0..@intCast(count)];
    if (!sampler.weightsValid(weight_values)) return failMessage(
        status_invalid_argument,
        "weights must be positive and finite (1 to 2^53 of them)",
        .{},
    );
    if (count != 0 and count - 1 > std.math.maxInt(u64) - start) return failMessage(
        status_invalid_argument,
        "positions pass 2^64 - 1",
        .{},
    );
    sampler.drawRows(allocator, weight_values, seed, start, rows) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    return status_ok;
}

export fn drt_permutation_rows(n: u64, seed: u64, start: u64, count: u64, rows_out: ?[*]u64) i32 {
    const rows: []u64 = if (count == 0) &.{} else (rows_out orelse return nullArgument("rows_out"))[0..@intCast(count)];
    if (n < 1 or n > sampler.row_count_max) return failMessage(
        status_invalid_argument,
        "n must be between 1 and 2^53, got {d}",
        .{n},
    );
    if (count != 0 and count - 1 > std.math.maxInt(u64) - start) return failMessage(
        status_invalid_argument,
        "positions pass 2^64 - 1",
        .{},
    );
    permutation.rowRange(sampler.Key.derive(permutation.key_domain, seed), n, start, rows);
    return status_ok;
}

export fn drt_sha256(data: ?[*]const u8, len: u64, out: ?*[32]u8) void {
    const digest_out = out orelse return;
    const bytes: []const u8 = if (len == 0) &.{} else (data orelse return)[0..@intCast(len)];
    digest_out.* = sha256.hash(bytes);
}
