//! The exported functions of the cache writer and of single caches: creating a writer,
//! pushing samples (JSON or columns, copied or borrowed), finishing, statistics, and the
//! checks, description and replacement of a cache. Same conventions as c_api.zig.
const std = @import("std");
const lz4 = @import("codec/lz4.zig");
const shard_record = @import("format/shard_record.zig");
const cache_writer = @import("write/cache_writer.zig");
const cache_replace = @import("write/cache_replace.zig");
const staging = @import("write/staging.zig");
const metadata_columns = @import("format/metadata_columns.zig");
const cache_info = @import("table/cache_info.zig");
const cache_layout = @import("format/cache_layout.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const c_types = @import("c_types.zig");
const WriterOptions = c_types.WriterOptions;
const StageStats = c_types.StageStats;
const WriterStats = c_types.WriterStats;
const Buffer = c_types.Buffer;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_wrong_process = c_status.status_wrong_process;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const nullArgument = c_status.nullArgument;
const checkProcess = c_status.checkProcess;
const byteString = c_status.byteString;
const arrayArgument = c_status.arrayArgument;
const handOut = c_status.handOut;
const Runtime = c_status.Runtime;

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
    cache_writer.CacheWriter.checkCompression(codec, ratio, &diagnostic) catch |err|
        return failError(err, &diagnostic);
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
    cache_writer.CacheWriter.checkSourceName(name, &diagnostic) catch |err|
        return failError(err, &diagnostic);
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
    const payload_bytes: []const u8 =
        arrayArgument(payloads, payloads_len) orelse return nullArgument("payloads");
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
    const pushed: []const metadata_columns.PushColumn =
        arrayArgument(columns, column_count) orelse return nullArgument("columns");
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
    const payload_bytes: []const u8 =
        arrayArgument(payloads, payloads_len) orelse return nullArgument("payloads");
    const pushed: []const metadata_columns.PushColumn =
        arrayArgument(columns, column_count) orelse return nullArgument("columns");
    var diagnostic: Diagnostic = .{};
    w.pushColumnsJoined(payload_bytes, lens[0..@intCast(count)], pushed, &diagnostic) catch |err|
        return failError(err, &diagnostic);
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

export fn drt_cache_writer_active(
    base_dir: ?[*]const u8,
    base_dir_len: u64,
    source_name: ?[*]const u8,
    source_name_len: u64,
    active: ?*u32,
) i32 {
    const base = byteString(base_dir, base_dir_len) orelse return nullArgument("base_dir");
    const name = byteString(source_name, source_name_len) orelse return nullArgument("source_name");
    const out_ptr = active orelse return nullArgument("active");
    var diagnostic: Diagnostic = .{};
    cache_writer.CacheWriter.checkSourceName(name, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    const held = staging.writerActive(base, name, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    out_ptr.* = @intFromBool(held);
    return status_ok;
}
