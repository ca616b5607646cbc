//! Tests of the bounded set of open shard files (`open_shards.zig`): which
//! file closes to make room, pins, fork, and a shard replaced or resized.
const std = @import("std");
const builtin = @import("builtin");
const testing = std.testing;
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const open_shards = @import("open_shards.zig");
const Set = open_shards.Set;
const Handle = open_shards.Handle;

const shard_count = 4;

/// A directory of `shard_count` shard files and a handle for each, as a cache
/// opened with them would have.
const Shards = struct {
    tmp: std.testing.TmpDir,
    dir: []u8,
    handles: [shard_count]Handle,

    fn create() !*Shards {
        const io = system.io();
        const shards = try testing.allocator.create(Shards);
        errdefer testing.allocator.destroy(shards);
        shards.tmp = testing.tmpDir(.{});
        errdefer shards.tmp.cleanup();
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const dir_len = try shards.tmp.dir.realPath(io, &buffer);
        shards.dir = try testing.allocator.dupe(u8, buffer[0..dir_len]);
        for (&shards.handles, 0..) |*handle, index| {
            const name = cache_layout.ShardName.of(index);
            const file = try shards.tmp.dir.createFile(io, name.slice(), .{});
            defer file.close(io);
            var bytes: [100]u8 = @splat(@intCast(index));
            try file.writePositionalAll(io, bytes[0 .. 10 + index], 0);
            handle.* = .init(try file_status.identity(file));
        }
        return shards;
    }

    fn destroy(shards: *Shards, set: *Set) void {
        for (&shards.handles) |*handle| set.forget(handle);
        testing.allocator.free(shards.dir);
        shards.tmp.cleanup();
        testing.allocator.destroy(shards);
    }

    fn location(shards: *const Shards, shard_id: u64) open_shards.Location {
        return .{ .dir = shards.dir, .shard_id = shard_id };
    }

    /// Pins shard `shard_id`, checks its first byte and unpins it.
    fn use(shards: *Shards, set: *Set, shard_id: u64) !void {
        var diagnostic: Diagnostic = .{};
        const handle = &shards.handles[shard_id];
        const file = try set.pin(handle, shards.location(shard_id), &diagnostic);
        defer Set.unpin(handle);
        var byte: [1]u8 = undefined;
        try testing.expectEqual(@as(usize, 1), try file.readPositionalAll(system.io(), &byte, 0));
        try testing.expectEqual(@as(u8, @intCast(shard_id)), byte[0]);
    }

    fn expectOpen(shards: *const Shards, expected: [shard_count]bool) !void {
        for (&shards.handles, expected) |*handle, open| {
            try testing.expectEqual(open, handle.isOpen());
        }
    }
};

test "a full set closes the least recently used file" {
    var set: Set = .{ .allocator = testing.allocator, .max = 2 };
    defer set.deinit();
    const shards = try Shards.create();
    defer shards.destroy(&set);
    try shards.use(&set, 0);
    try shards.use(&set, 1);
    try shards.expectOpen(.{ true, true, false, false });
    try shards.use(&set, 2); // closes 0, the least recently used
    try shards.expectOpen(.{ false, true, true, false });
    try shards.use(&set, 1); // now more recent than 2
    try shards.use(&set, 0); // closes 2, reopens 0
    try shards.expectOpen(.{ true, true, false, false });
    const stats = set.stats();
    try testing.expectEqual(@as(u64, 2), stats.open);
    try testing.expectEqual(@as(u64, 2), stats.max);
    try testing.expectEqual(@as(u64, 4), stats.opens);
    try testing.expectEqual(@as(u64, 2), stats.evictions);
}

test "a full set closes a file no planned read needs, then the one needed last" {
    var set: Set = .{ .allocator = testing.allocator, .max = 3 };
    defer set.deinit();
    const shards = try Shards.create();
    defer shards.destroy(&set);
    try shards.use(&set, 0);
    try shards.use(&set, 1);
    try shards.use(&set, 2);
    const first = set.ticket();
    const second = set.ticket();
    Set.announce(&shards.handles[0], second);
    Set.announce(&shards.handles[1], first);
    // 2 is the most recently used, but no planned read needs it.
    try shards.use(&set, 3);
    try shards.expectOpen(.{ true, true, false, true });
    Set.announce(&shards.handles[3], first);
    // Every open file is needed: 0's read comes last.
    try shards.use(&set, 2);
    try shards.expectOpen(.{ false, true, true, true });
    Set.retire(&shards.handles[0]);
    Set.retire(&shards.handles[1]);
    Set.retire(&shards.handles[3]);
    try testing.expectEqual(@as(u32, 0), shards.handles[1].pending.load(.monotonic));
}

test "a pinned file is never closed; the set holds more only while pins need it" {
    var set: Set = .{ .allocator = testing.allocator, .max = 1 };
    defer set.deinit();
    const shards = try Shards.create();
    defer shards.destroy(&set);
    var diagnostic: Diagnostic = .{};
    const pinned = try set.pin(&shards.handles[0], shards.location(0), &diagnostic);
    try shards.use(&set, 1); // no room, and 0 is pinned: both open
    try shards.expectOpen(.{ true, true, false, false });
    var byte: [1]u8 = undefined;
    _ = try pinned.readPositionalAll(system.io(), &byte, 0);
    try testing.expectEqual(@as(u8, 0), byte[0]);
    // A second pin of the same file, then both released.
    _ = try set.pin(&shards.handles[0], shards.location(0), &diagnostic);
    Set.unpin(&shards.handles[0]);
    Set.unpin(&shards.handles[0]);
    try shards.use(&set, 2); // closes both unpinned files
    try shards.expectOpen(.{ false, false, true, false });
    try testing.expectEqual(@as(u64, 1), set.stats().open);
    set.setMax(4);
    try shards.use(&set, 0);
    try shards.use(&set, 1);
    set.setMax(1); // closes all but one
    try testing.expectEqual(@as(u64, 1), set.stats().open);
}

test "a shard replaced or resized since the cache was opened fails its reopening" {
    // The case is set up with std's rename over a file and deleteFile: NT calls wine 8 lacks.
    if (builtin.os.tag == .windows) return error.SkipZigTest;
    const io = system.io();
    var set: Set = .{ .allocator = testing.allocator, .max = 4 };
    defer set.deinit();
    const shards = try Shards.create();
    defer shards.destroy(&set);
    var diagnostic: Diagnostic = .{};
    // Replaced by a file of the same length.
    {
        const file = try shards.tmp.dir.createFile(io, "fresh", .{});
        defer file.close(io);
        try file.writePositionalAll(io, &(@as([10]u8, @splat(0))), 0);
    }
    try std.Io.Dir.rename(shards.tmp.dir, "fresh", shards.tmp.dir, "000000.bin", io);
    try testing.expectError(
        error.InvalidCache,
        set.pin(&shards.handles[0], shards.location(0), &diagnostic),
    );
    try testing.expect(std.mem.startsWith(
        u8,
        diagnostic.message(),
        "shards/000000.bin was replaced since the cache was opened (inode ",
    ));
    // Grown in place.
    {
        const file = try shards.tmp.dir.openFile(io, "000001.bin", .{ .mode = .read_write });
        defer file.close(io);
        try file.writePositionalAll(io, "more", 11);
    }
    try testing.expectError(
        error.InvalidCache,
        set.pin(&shards.handles[1], shards.location(1), &diagnostic),
    );
    try testing.expectEqualStrings(
        "shard length mismatch: shards/000001.bin has 15 bytes but the manifest says 11",
        diagnostic.message(),
    );
    // Deleted.
    try shards.tmp.dir.deleteFile(io, "000002.bin");
    try testing.expectError(
        error.InvalidCache,
        set.pin(&shards.handles[2], shards.location(2), &diagnostic),
    );
    try testing.expect(std.mem.startsWith(
        u8,
        diagnostic.message(),
        "I/O error: cannot open shards/000002.bin: no such file or directory",
    ));
    try testing.expectEqual(@as(u64, 0), set.stats().open);
}

test "out of descriptors, the message says what the set holds" {
    var set: Set = .{ .allocator = testing.allocator, .max = 7 };
    defer set.deinit();
    const shards = try Shards.create();
    defer shards.destroy(&set);
    try shards.use(&set, 0);
    var buffer: [200]u8 = undefined;
    const quota = set.heldWords(error.ProcessFdQuotaExceeded);
    const words = try std.fmt.bufPrint(&buffer, "{f}", .{quota});
    try testing.expectEqualStrings(
        "; dataset_rt holds 1 shard file open (at most 7, its max_open_shards)",
        words,
    );
    const none = try std.fmt.bufPrint(&buffer, "{f}", .{set.heldWords(error.FileNotFound)});
    try testing.expectEqualStrings("", none);
}

test "a forked child closes its copies of the process's open shards" {
    if (builtin.os.tag != .linux) return error.SkipZigTest;
    const set = &open_shards.process;
    const shards = try Shards.create();
    defer shards.destroy(set);
    try shards.use(set, 0);
    const handle = &shards.handles[0];
    try testing.expect(handle.isOpen());
    const descriptor = handle.file.handle;
    const linux = std.os.linux;
    // libc's fork, which runs the pthread_atfork handlers (the raw system call does not).
    const pid = std.c.fork();
    try testing.expect(pid >= 0);
    if (pid == 0) {
        // The child: nothing open, and the descriptor closed in it.
        const closed = linux.errno(linux.fcntl(descriptor, linux.F.GETFD, 0)) == .BADF;
        const ok = closed and !handle.isOpen() and set.open.items.len == 0;
        linux.exit_group(if (ok) 0 else 1);
    }
    var status: i32 = 0;
    _ = linux.waitpid(pid, &status, 0);
    const word: u32 = @bitCast(status);
    try testing.expect(linux.W.IFEXITED(word));
    try testing.expectEqual(@as(u32, 0), linux.W.EXITSTATUS(word));
    // The parent's file is untouched.
    try testing.expect(handle.isOpen());
    try shards.use(set, 0);
}
