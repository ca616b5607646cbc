//! Which written shards stay in the page cache.
//!
//! A shard is written, hashed and fsynced; then its pages may be dropped
//! (`durable_files.dropCachedPages`). Dropping keeps a huge write from
//! filling the machine's memory with a cache nobody reads yet, and lets the
//! writer reuse the same memory; keeping makes the first read of a freshly
//! written cache, the usual next step of a training job, a read from memory
//! instead of from disk. `auto` keeps the shards while the writer's total
//! stays within half the memory the system reported available when the
//! writer started, and drops every shard after that: a cache that fits
//! comfortably stays, most of a much larger one goes.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

pub const Mode = enum(u32) {
    auto = 0,
    keep = 1,
    drop = 2,
};

pub const PageCachePolicy = struct {
    mode: Mode,
    /// `auto`: the most shard bytes kept.
    budget_bytes: u64,
    /// Bytes of the shards kept so far (only `close`'s thread, the committer, decides).
    kept_bytes: u64 = 0,

    /// The policy of a writer starting now: `auto`'s budget is half of
    /// `available_bytes` (what the system says it can give without swapping;
    /// null where it cannot say, as before Linux 3.14: nothing is kept, as a
    /// write did before there was a policy).
    pub fn init(mode: Mode, available_bytes: ?u64) PageCachePolicy {
        return .{ .mode = mode, .budget_bytes = if (available_bytes) |bytes| bytes / 2 else 0 };
    }

    /// Whether a just-closed shard of `shard_bytes` keeps its pages.
    pub fn keeps(policy: *PageCachePolicy, shard_bytes: u64) bool {
        assert(shard_bytes > 0);
        switch (policy.mode) {
            .keep => return true,
            .drop => return false,
            .auto => {
                // Once one shard is dropped, every later one is: the cache did not fit.
                if (policy.kept_bytes > policy.budget_bytes) return false;
                const total = policy.kept_bytes +| shard_bytes;
                if (total > policy.budget_bytes) {
                    policy.kept_bytes = std.math.maxInt(u64);
                    return false;
                }
                policy.kept_bytes = total;
                assert(policy.kept_bytes <= policy.budget_bytes);
                return true;
            },
        }
    }
};

/// The memory the system can give without swapping: Linux's `MemAvailable`
/// (/proc/meminfo, Linux 3.14 and later), else null.
pub fn availableMemoryBytes() ?u64 {
    if (builtin.os.tag != .linux) return null;
    var buffer: [4096]u8 = undefined;
    const text = readProcFile("/proc/meminfo", &buffer) orelse return null;
    return parseMemAvailable(text);
}

fn readProcFile(path: [*:0]const u8, buffer: []u8) ?[]const u8 {
    assert(buffer.len > 0);
    const linux = std.os.linux;
    const opened = linux.open(path, .{ .ACCMODE = .RDONLY, .CLOEXEC = true }, 0);
    if (linux.errno(opened) != .SUCCESS) return null;
    const fd: i32 = @intCast(opened);
    defer _ = linux.close(fd);
    var len: usize = 0;
    while (len < buffer.len) {
        const read = linux.read(fd, buffer[len..].ptr, buffer.len - len);
        if (linux.errno(read) != .SUCCESS) return null;
        if (read == 0) break;
        len += read;
    }
    assert(len <= buffer.len);
    return buffer[0..len];
}

/// The bytes of the `MemAvailable:` line (given in kB) of /proc/meminfo's text.
fn parseMemAvailable(text: []const u8) ?u64 {
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |line| {
        const key = "MemAvailable:";
        if (!std.mem.startsWith(u8, line, key)) continue;
        var fields = std.mem.tokenizeScalar(u8, line[key.len..], ' ');
        const number = fields.next() orelse return null;
        const kilobytes = std.fmt.parseInt(u64, number, 10) catch return null;
        const unit = fields.next() orelse return null;
        if (!std.mem.eql(u8, unit, "kB")) return null;
        const bytes = std.math.mul(u64, kilobytes, 1024) catch return null;
        assert(bytes % 1024 == 0);
        return bytes;
    }
    return null;
}

test "auto keeps shards up to half the available memory, then drops every later one" {
    var policy = PageCachePolicy.init(.auto, 1000);
    try std.testing.expect(policy.keeps(300));
    try std.testing.expect(policy.keeps(200)); // 500: exactly half
    try std.testing.expect(!policy.keeps(1)); // past the budget
    try std.testing.expect(!policy.keeps(1)); // and every shard after it, however small
    var unknown = PageCachePolicy.init(.auto, null);
    try std.testing.expect(!unknown.keeps(1));
    var large = PageCachePolicy.init(.auto, std.math.maxInt(u64));
    try std.testing.expect(large.keeps(std.math.maxInt(u64) / 2));
    try std.testing.expect(!large.keeps(std.math.maxInt(u64) / 2)); // saturates, never wraps
}

test "keep and drop ignore the budget" {
    var keep = PageCachePolicy.init(.keep, 0);
    var drop = PageCachePolicy.init(.drop, 1 << 40);
    try std.testing.expect(keep.keeps(1 << 30));
    try std.testing.expect(!drop.keeps(1));
}

test "MemAvailable is read from /proc/meminfo's text" {
    const text =
        \\MemTotal:       24567644 kB
        \\MemFree:         1234567 kB
        \\MemAvailable:   20000000 kB
        \\Buffers:            2048 kB
    ;
    try std.testing.expectEqual(@as(?u64, 20000000 * 1024), parseMemAvailable(text));
    try std.testing.expectEqual(@as(?u64, null), parseMemAvailable("MemTotal: 5 kB\n"));
    try std.testing.expectEqual(@as(?u64, null), parseMemAvailable("MemAvailable: x kB\n"));
    if (builtin.os.tag == .linux) try std.testing.expect(availableMemoryBytes().? > 0);
}
