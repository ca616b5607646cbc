//! The exported function of caches built in partitions (ABI 4): the commit
//! that joins sealed partition caches into one published cache
//! (`write/partition_commit.zig`). Same conventions as c_api.zig.
const c_status = @import("c_status.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const partition_commit = @import("write/partition_commit.zig");
const allocator = c_status.allocator;
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const nullArgument = c_status.nullArgument;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const byteString = c_status.byteString;

export fn drt_partitions_commit(
    base_dir: ?[*]const u8,
    base_dir_len: u64,
    source_name: ?[*]const u8,
    source_name_len: u64,
    attempts: ?[*]const ?[*]const u8,
    attempt_lens: ?[*]const u64,
    sample_counts: ?[*]const u64,
    manifest_sha256s: ?[*]const [32]u8,
    count: u32,
    outcome: ?*u32,
) i32 {
    const outcome_ptr = outcome orelse return nullArgument("outcome");
    const base = byteString(base_dir, base_dir_len) orelse return nullArgument("base_dir");
    if (base.len == 0) return failMessage(status_invalid_argument, "base_dir is empty", .{});
    const name = byteString(source_name, source_name_len) orelse
        return nullArgument("source_name");
    if (count == 0) {
        return failMessage(status_invalid_argument, "no partitions given (count is 0)", .{});
    }
    const attempt_ptrs = attempts orelse return nullArgument("attempts");
    const lens = attempt_lens orelse return nullArgument("attempt_lens");
    const counts = sample_counts orelse return nullArgument("sample_counts");
    const digests = manifest_sha256s orelse return nullArgument("manifest_sha256s");
    const parts = allocator.alloc(partition_commit.Part, count) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    defer allocator.free(parts);
    for (parts, 0..) |*part, i| {
        const attempt: ?[]const u8 = if (attempt_ptrs[i]) |pointer|
            pointer[0..@intCast(lens[i])]
        else
            null;
        part.* = .{ .attempt = attempt, .sample_count = counts[i], .manifest_sha256 = digests[i] };
    }
    var diagnostic: Diagnostic = .{};
    const done = partition_commit.commit(allocator, base, name, parts, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    outcome_ptr.* = @backingInt(done);
    return status_ok;
}
