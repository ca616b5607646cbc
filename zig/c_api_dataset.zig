//! The exported functions of a dataset and its stream: opening, length, epochs, and the
//! state that resumes a stream (position, fingerprint, shares of ranks and workers). Same
//! conventions as c_api.zig.
const std = @import("std");
const dataset_module = @import("read/dataset.zig");
const Remote = @import("read/remote.zig").Remote;
const active_table = @import("stream/active_table.zig");
const dataset_mix = @import("read/dataset_mix.zig");
const stream_share = @import("stream/stream_share.zig");
const stream_state = @import("stream/stream_state.zig");
const cache_info = @import("table/cache_info.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const c_types = @import("c_types.zig");
const ReaderOptions = c_types.ReaderOptions;
const StreamPosition = c_types.StreamPosition;
const StreamState = c_types.StreamState;
const ShareSpec = c_types.ShareSpec;
const ShareCounts = c_types.ShareCounts;
const Buffer = c_types.Buffer;
const shareOf = c_types.shareOf;
const algorithm_bytes = c_types.algorithm_bytes;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const status_out_of_range = c_status.status_out_of_range;
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

export fn drt_dataset_open(
    runtime: ?*Runtime,
    paths: ?[*]const ?[*]const u8,
    path_lens: ?[*]const u64,
    path_count: u32,
    options: ?*const ReaderOptions,
    out: ?*?*dataset_module.Dataset,
) i32 {
    return openDataset(runtime, paths, path_lens, path_count, options, null, out);
}

/// `drt_dataset_open`, and `drt_dataset_open_remote` with `remote`.
pub fn openDataset(
    runtime: ?*Runtime,
    paths: ?[*]const ?[*]const u8,
    path_lens: ?[*]const u64,
    path_count: u32,
    options: ?*const ReaderOptions,
    remote: ?*Remote,
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
        .remote = remote,
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
    dataset_mix.setEpochLen(d, epoch_len, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

/// Fills `out` with `at` and the fingerprint of `dataset` reading `table`.
pub fn fillState(
    d: *const dataset_module.Dataset,
    table: *active_table.ActiveTable,
    at: stream_state.Position,
    out: *StreamState,
) i32 {
    const cache_sha256s = allocator.alloc(stream_state.Digest, d.caches.len) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
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
    const digest_length = stream_state.digest_length;
    for (d.caches, 0..) |cache, index| {
        out_ptr[index * digest_length ..][0..digest_length].* = cache.manifest_sha256;
    }
    return status_ok;
}

/// Core-owned JSON describing cache `cache_index` of the dataset from the manifest it
/// opened, as `drt_cache_info` describes a folder's (for a remote cache: the version
/// opened, with no request).
export fn drt_dataset_cache_info(
    dataset: ?*dataset_module.Dataset,
    cache_index: u32,
    out: ?*?*Buffer,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    if (cache_index >= d.caches.len) return failMessage(
        status_out_of_range,
        "cache_index is {d}, the dataset has {d} caches",
        .{ cache_index, d.caches.len },
    );
    const text = cache_info.render(allocator, d.caches[cache_index].parsed.manifest) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    return handOut(text, out_ptr);
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
    const digests: []const stream_state.Digest =
        arrayArgument(cache_sha256s, cache_count) orelse return nullArgument("cache_sha256s");
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
    const after = stream_share.afterSteps(at, shareOf(spec), steps, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    out_ptr.* = .of(after);
    return status_ok;
}
