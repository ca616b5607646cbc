//! The exported functions of format 3 (ABI 4): the cache ids of a dataset, and
//! migrating caches to format 3 in place. Same conventions as c_api.zig.
const c_status = @import("c_status.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const dataset_module = @import("read/dataset.zig");
const cache_migration = @import("write/cache_migration.zig");
const allocator = c_status.allocator;
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const status_wrong_process = c_status.status_wrong_process;
const nullArgument = c_status.nullArgument;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const checkProcess = c_status.checkProcess;
const byteString = c_status.byteString;

export fn drt_dataset_cache_ids(
    dataset: ?*dataset_module.Dataset,
    out: ?[*]u64,
    cache_count: u32,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const ids = d.cacheIds();
    if (cache_count != ids.len) {
        const phrase = "cache_count is {d}, the dataset has {d} caches";
        return failMessage(status_invalid_argument, phrase, .{ cache_count, ids.len });
    }
    const out_ptr = out orelse return nullArgument("out pointer");
    @memcpy(out_ptr[0..ids.len], ids);
    return status_ok;
}

export fn drt_caches_migrate(
    paths: ?[*]const ?[*]const u8,
    path_lens: ?[*]const u64,
    cache_ids: ?[*]const u64,
    count: u32,
    outcomes: ?[*]u32,
) i32 {
    const outcomes_ptr = outcomes orelse return nullArgument("outcomes");
    if (count == 0) return status_ok;
    const path_ptrs = paths orelse return nullArgument("paths");
    const lens = path_lens orelse return nullArgument("path_lens");
    const ids = cache_ids orelse return nullArgument("cache_ids");
    const targets = allocator.alloc(cache_migration.Target, count) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    defer allocator.free(targets);
    for (targets, 0..) |*target, i| {
        const path = byteString(path_ptrs[i], lens[i]) orelse
            return failMessage(status_invalid_argument, "path {d} is NULL", .{i});
        target.* = .{ .path = path, .cache_id = ids[i] };
    }
    const done = allocator.alloc(cache_migration.Outcome, count) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    defer allocator.free(done);
    var diagnostic: Diagnostic = .{};
    const migrated = cache_migration.migrate(allocator, targets, done, &diagnostic);
    for (outcomes_ptr[0..count], done) |*out, outcome| out.* = @backingInt(outcome);
    migrated catch |err| return failError(err, &diagnostic);
    return status_ok;
}
