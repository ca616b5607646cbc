//! The exported functions of remote caches (added within ABI 4): the fetch hook
//! (`drt_remote_*`, `read/remote.zig`) and datasets whose paths may be URLs
//! (`drt_dataset_open_remote`, `read/remote_cache.zig`). Same conventions as c_api.zig.
const remote_module = @import("read/remote.zig");
const Remote = remote_module.Remote;
const dataset_module = @import("read/dataset.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const c_types = @import("c_types.zig");
const c_api_dataset = @import("c_api_dataset.zig");
const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const nullArgument = c_status.nullArgument;
const byteString = c_status.byteString;

/// `drt_remote_stats` of the header.
pub const RemoteStats = extern struct {
    fetched_files: u64,
    fetched_bytes: u64,
    shards_fetched: u64,
    shard_bytes_fetched: u64,
    refetches: u64,
    evicted_shards: u64,
    evicted_bytes: u64,
    reserved: [2]u64,
};

export fn drt_remote_create(
    fetch: ?remote_module.FetchFn,
    context: ?*anyopaque,
    local_dir: ?[*]const u8,
    local_dir_len: u64,
    out: ?*?*Remote,
) i32 {
    const fetch_fn = fetch orelse return nullArgument("fetch");
    const out_ptr = out orelse return nullArgument("out pointer");
    const dir = byteString(local_dir, local_dir_len) orelse return nullArgument("local_dir");
    if (dir.len == 0) {
        return failMessage(status_invalid_argument, "local_dir must not be empty", .{});
    }
    var diagnostic: Diagnostic = .{};
    out_ptr.* = Remote.create(allocator, fetch_fn, context, dir, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_remote_destroy(remote: ?*Remote) void {
    const r = remote orelse return;
    r.release();
}

export fn drt_remote_set_budget(remote: ?*Remote, budget_bytes: u64) i32 {
    const r = remote orelse return nullArgument("remote");
    r.budget_bytes = if (budget_bytes == 0) null else budget_bytes;
    return status_ok;
}

export fn drt_remote_set_max_in_flight(remote: ?*Remote, max_in_flight: u32) i32 {
    const r = remote orelse return nullArgument("remote");
    if (max_in_flight == 0) {
        return failMessage(status_invalid_argument, "max_in_flight must be at least 1", .{});
    }
    r.max_in_flight = max_in_flight;
    return status_ok;
}

export fn drt_remote_set_revalidate(remote: ?*Remote, revalidate: i32) i32 {
    const r = remote orelse return nullArgument("remote");
    if (revalidate != 0 and revalidate != 1) {
        return failMessage(status_invalid_argument, "revalidate must be 0 or 1, got {d}", .{
            revalidate,
        });
    }
    r.revalidate = revalidate == 1;
    return status_ok;
}

export fn drt_remote_pin_version(
    remote: ?*Remote,
    url: ?[*]const u8,
    url_len: u64,
    manifest_sha256: ?*const [32]u8,
) i32 {
    const r = remote orelse return nullArgument("remote");
    const url_text = byteString(url, url_len) orelse return nullArgument("url");
    const digest = manifest_sha256 orelse return nullArgument("manifest_sha256");
    if (url_text.len == 0) {
        return failMessage(status_invalid_argument, "url must not be empty", .{});
    }
    r.pinVersion(url_text, digest.*) catch |err| {
        const empty: Diagnostic = .{};
        return failError(err, &empty);
    };
    return status_ok;
}

export fn drt_remote_stats_get(remote: ?*Remote, out: ?*RemoteStats) i32 {
    const r = remote orelse return nullArgument("remote");
    const out_ptr = out orelse return nullArgument("out pointer");
    const stats = r.stats();
    out_ptr.* = .{
        .fetched_files = stats.fetched_files,
        .fetched_bytes = stats.fetched_bytes,
        .shards_fetched = stats.shards_fetched,
        .shard_bytes_fetched = stats.shard_bytes_fetched,
        .refetches = stats.refetches,
        .evicted_shards = stats.evicted_shards,
        .evicted_bytes = stats.evicted_bytes,
        .reserved = @splat(0),
    };
    return status_ok;
}

export fn drt_dataset_open_remote(
    runtime: ?*c_status.Runtime,
    paths: ?[*]const ?[*]const u8,
    path_lens: ?[*]const u64,
    path_count: u32,
    options: ?*const c_types.ReaderOptions,
    remote: ?*Remote,
    out: ?*?*dataset_module.Dataset,
) i32 {
    return c_api_dataset.openDataset(runtime, paths, path_lens, path_count, options, remote, out);
}
