//! Tests of the byte budget (shard_budget.zig) through a remote cache read by
//! the test hook of remote_test.zig: what is on disk after each read, which
//! shard goes, what stays, and what an open refuses.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const column_builder = @import("../format/column_builder.zig");
const record_read = @import("record_read.zig");
const Cache = @import("cache_reader.zig").Cache;
const test_cache = @import("test_cache.zig");
const TestCache = test_cache.TestCache;
const remote_module = @import("remote.zig");
const shard_budget = @import("shard_budget.zig");
const fetch_lock = @import("fetch_lock.zig");
const remote_test = @import("remote_test.zig");
const Hook = remote_test.Hook;
const Source = remote_test.Source;

/// Ten shards of four records each.
const spec: test_cache.Spec = .{ .sample_count = 40, .records_per_shard = 4, .payload_bytes = 600 };

/// What a watcher of `local_dir` sees: the bytes of shard files and of fetch
/// temporaries in every cache folder, and which shards are there.
const OnDisk = struct {
    bytes: u64 = 0,
    /// Bit `i`: shard `i` is under its final name.
    shards: u64 = 0,
    temporaries: u32 = 0,
    reservations: u32 = 0,

    fn of(local_dir: []const u8) !OnDisk {
        const io = system.io();
        var found: OnDisk = .{};
        var local = try std.Io.Dir.cwd().openDir(io, local_dir, .{ .iterate = true });
        defer local.close(io);
        var folders = local.iterate();
        while (try folders.next(io)) |folder| {
            if (folder.kind != .directory) continue;
            var cache_dir = try local.openDir(io, folder.name, .{});
            defer cache_dir.close(io);
            var shards = try cache_dir.openDir(io, "shards", .{ .iterate = true });
            defer shards.close(io);
            var entries = shards.iterate();
            while (try entries.next(io)) |entry| try found.add(shards, entry.name);
        }
        return found;
    }

    fn add(found: *OnDisk, shards: std.Io.Dir, name: []const u8) !void {
        const io = system.io();
        if (std.mem.indexOf(u8, name, shard_budget.reservation_infix) != null) {
            found.reservations += 1;
            return;
        }
        const temporary = std.mem.indexOf(u8, name, cache_layout.fetch_temp_infix) != null;
        const shard = std.mem.endsWith(u8, name, ".bin");
        if (!temporary and !shard) return;
        const stat = try shards.statFile(io, name, .{});
        found.bytes += stat.size;
        if (temporary) {
            found.temporaries += 1;
        } else {
            found.shards |= @as(u64, 1) << @intCast(try std.fmt.parseInt(u6, name[0..6], 10));
        }
    }
};

/// Reads samples one at a time, as a reader does.
const Reader = struct {
    cache: *Cache,
    scratch: record_read.Scratch = .{},
    payload: std.ArrayList(u8) = .empty,
    metadata_json: std.ArrayList(u8) = .empty,
    columns: []column_builder.ColumnBuilder,

    fn init(cache: *Cache) !Reader {
        const columns = try column_builder.initAll(testing.allocator, cache.schema());
        return .{ .cache = cache, .columns = columns };
    }

    fn deinit(reader: *Reader) void {
        reader.scratch.deinit(testing.allocator);
        column_builder.deinitAll(testing.allocator, reader.columns);
        testing.allocator.free(reader.columns);
        reader.payload.deinit(testing.allocator);
        reader.metadata_json.deinit(testing.allocator);
    }

    fn read(reader: *Reader, sample_id: u64) !void {
        var diagnostic: Diagnostic = .{};
        const output: record_read.Output = .{
            .allocator = testing.allocator,
            .payload = &reader.payload,
            .metadata_json = &reader.metadata_json,
            .columns = reader.columns,
        };
        const request: record_read.Request = .{ .sample_id = sample_id };
        _ = reader.cache.readSample(request, &reader.scratch, output, &diagnostic) catch |err| {
            std.debug.print("sample {d}: {s}\n", .{ sample_id, diagnostic.message() });
            return err;
        };
    }

    /// Reads a sample of shard `shard_id`, the first of its four.
    fn readShard(reader: *Reader, shard_id: u64) !void {
        try reader.read(shard_id * spec.records_per_shard);
    }
};

/// A reader's future with fixed next uses, by shard id, and the use after
/// that; null: never.
const FixedFuture = struct {
    next: [10]?u64 = @splat(null),
    again: [10]?u64 = @splat(null),
    future: remote_module.Future = undefined,

    fn register(fixed: *FixedFuture, remote: *remote_module.Remote) !void {
        fixed.future = .{ .context = fixed, .next_use = nextUse };
        try remote.addFuture(&fixed.future);
    }

    fn nextUse(context: *anyopaque, _: []const u8, shard_id: u64, from: u64) ?u64 {
        const fixed: *FixedFuture = @ptrCast(@alignCast(context));
        const next = fixed.next[@intCast(shard_id)] orelse return null;
        if (next >= from) return next;
        const again = fixed.again[@intCast(shard_id)] orelse return null;
        return if (again >= from) again else null;
    }
};

fn largestShard(written: *const TestCache) u64 {
    var largest: u64 = 0;
    for (written.shards) |shard| largest = @max(largest, shard.byte_len);
    return largest;
}

fn bit(shard_id: u6) u64 {
    return @as(u64, 1) << shard_id;
}

test "reads in order and shuffled never hold more shard bytes than the budget" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var expected = try remote_test.localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    const budget = 3 * largestShard(&written);
    hook.remote.budget_bytes = budget;
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var reader = try Reader.init(cache);
    defer reader.deinit();
    var max_seen: u64 = 0;
    for (0..2 * spec.sample_count) |at| {
        // In order, then shuffled (7 is prime to 40).
        const sample_id = if (at < spec.sample_count) at else (at * 7) % spec.sample_count;
        try reader.read(sample_id);
        const on_disk = try OnDisk.of(hook.local_dir);
        max_seen = @max(max_seen, on_disk.bytes);
        try testing.expectEqual(@as(u32, 0), on_disk.temporaries + on_disk.reservations);
    }
    try testing.expect(max_seen <= budget);
    try testing.expect(max_seen >= 2 * largestShard(&written) - 64);
    const stats = hook.remote.stats();
    try testing.expect(stats.evicted_shards > 0);
    try testing.expectEqual(stats.shards_fetched, stats.evicted_shards + 3);
    try testing.expect(stats.evicted_bytes > 0 and stats.evicted_bytes < stats.shard_bytes_fetched);
    // The samples are those of the cache, whatever was evicted on the way.
    var all = try remote_test.Read.all(cache, &diagnostic);
    defer all.deinit();
    try all.expectSame(&expected);
}

test "eviction takes a shard never used again, then the one used farthest ahead" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    hook.remote.budget_bytes = 3 * largestShard(&written);
    var fixed: FixedFuture = .{};
    try fixed.register(hook.remote);
    defer hook.remote.removeFuture(&fixed.future);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var reader = try Reader.init(cache);
    defer reader.deinit();
    for (0..3) |shard_id| try reader.readShard(shard_id);
    try testing.expectEqual(bit(0) | bit(1) | bit(2), (try OnDisk.of(hook.local_dir)).shards);
    fixed.next = .{ 7, null, 3, 1, 2, null, null, null, null, null };
    try reader.readShard(3);
    try testing.expectEqual(bit(0) | bit(2) | bit(3), (try OnDisk.of(hook.local_dir)).shards);
    try reader.readShard(4);
    try testing.expectEqual(bit(2) | bit(3) | bit(4), (try OnDisk.of(hook.local_dir)).shards);
    try testing.expectEqual(@as(u64, 2), hook.remote.stats().evicted_shards);
    // Shard 0 was evicted: reading it again fetches it again.
    try reader.readShard(0);
    try testing.expectEqual(@as(u64, 6), hook.remote.stats().shards_fetched);
}

test "a pinned shard is never evicted, even when it is never used again" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    hook.remote.budget_bytes = 3 * largestShard(&written);
    var fixed: FixedFuture = .{};
    try fixed.register(hook.remote);
    defer hook.remote.removeFuture(&fixed.future);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var reader = try Reader.init(cache);
    defer reader.deinit();
    for (0..3) |shard_id| try reader.readShard(shard_id);
    _ = try cache.shards.pin(1, &diagnostic);
    fixed.next = .{ 5, null, 9, null, null, null, null, null, null, null };
    try reader.readShard(3);
    try testing.expectEqual(bit(0) | bit(1) | bit(3), (try OnDisk.of(hook.local_dir)).shards);
    cache.shards.unpin(1);
    try reader.readShard(4);
    try testing.expectEqual(bit(0) | bit(3) | bit(4), (try OnDisk.of(hook.local_dir)).shards);
}

/// A fetch of shard `shard_id` of `cache` ahead of need, `ahead` positions before its use.
fn fetchAhead(cache: *Cache, shard_id: u64, ahead: u64) !remote_module.Outcome {
    const shards = cache.shards.remote.?;
    const io = system.io();
    var folder = try std.Io.Dir.cwd().openDir(io, shards.folder, .{});
    defer folder.close(io);
    var name_buffer: [32]u8 = undefined;
    const name = try std.fmt.bufPrint(&name_buffer, "shards/{s}", .{
        cache_layout.ShardName.of(shard_id).slice(),
    });
    var diagnostic: Diagnostic = .{};
    return shards.remote.fetchChecked(.{
        .url = shards.url,
        .name = name,
        .dir = folder,
        .dir_path = shards.folder,
        .byte_len = cache.shards.byteLen(shard_id),
        .sha256 = shards.sha256s[@intCast(shard_id)],
        .shard = true,
        .ahead = ahead,
    }, &diagnostic);
}

test "a fetch ahead of need gets no room rather than evict a shard needed sooner" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    hook.remote.budget_bytes = 3 * largestShard(&written);
    var fixed: FixedFuture = .{};
    try fixed.register(hook.remote);
    defer hook.remote.removeFuture(&fixed.future);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var reader = try Reader.init(cache);
    defer reader.deinit();
    for (0..3) |shard_id| try reader.readShard(shard_id);
    fixed.next = .{ 9, 4, 2, null, null, null, null, null, null, null };
    fixed.again = .{ null, 6, 7, null, null, null, null, null, null, null };
    const calls = source.shard_calls.load(.monotonic);
    // Shard 0 is needed at 9: not evicted for a shard first needed there.
    try testing.expectEqual(remote_module.Outcome.no_room, try fetchAhead(cache, 3, 9));
    // Shard 1 is read at 4, before the new shard's use at 5, and again at 12,
    // after shard 0's 9: at 5, Belady's policy evicts shard 1, not shard 0.
    fixed.again[1] = 12;
    try testing.expectEqual(remote_module.Outcome.no_room, try fetchAhead(cache, 3, 5));
    try testing.expectEqual(calls, source.shard_calls.load(.monotonic));
    try testing.expectEqual(bit(0) | bit(1) | bit(2), (try OnDisk.of(hook.local_dir)).shards);
    fixed.again[1] = 6;
    try testing.expectEqual(remote_module.Outcome.placed, try fetchAhead(cache, 3, 5));
    try testing.expectEqual(bit(1) | bit(2) | bit(3), (try OnDisk.of(hook.local_dir)).shards);
    try testing.expectEqual(@as(u64, 1), hook.remote.stats().evicted_shards);
}

test "a shard being fetched counts among those read before a fetch ahead" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    hook.remote.budget_bytes = 3 * largestShard(&written);
    var fixed: FixedFuture = .{};
    try fixed.register(hook.remote);
    defer hook.remote.removeFuture(&fixed.future);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var reader = try Reader.init(cache);
    defer reader.deinit();
    for (0..2) |shard_id| try reader.readShard(shard_id);
    // Shard 2 is being fetched (its fetcher holds its lock and reservation):
    // read at 1, before the new shard's use at 5, and again at 12.
    const io = system.io();
    const folder_path = cache.shards.remote.?.folder;
    var folder = try std.Io.Dir.cwd().openDir(io, folder_path, .{});
    defer folder.close(io);
    const fetching = "shards/000002.bin";
    var held = try fetch_lock.FetchLock.acquire(folder, folder_path, fetching, &diagnostic);
    defer held.release();
    var reservation_buffer: [64]u8 = undefined;
    const reservation = try std.fmt.bufPrint(&reservation_buffer, "{s}.reserved-{d}", .{
        fetching,
        largestShard(&written),
    });
    (try folder.createFile(io, reservation, .{})).close(io);
    fixed.next = .{ 9, 6, 1, null, null, null, null, null, null, null };
    fixed.again = .{ null, null, 12, null, null, null, null, null, null, null };
    // At 5, Belady's policy would evict shard 2 (next used at 12), not shard
    // 0 (at 9) or 1 (at 6): a fetch ahead now evicts neither.
    try testing.expectEqual(remote_module.Outcome.no_room, try fetchAhead(cache, 3, 5));
    try testing.expectEqual(bit(0) | bit(1), (try OnDisk.of(hook.local_dir)).shards);
    // Read again at 7, before shard 0's 9: at 5, shard 0 would go, and goes now.
    fixed.again[2] = 7;
    try testing.expectEqual(remote_module.Outcome.placed, try fetchAhead(cache, 3, 5));
    try testing.expectEqual(bit(1) | bit(3), (try OnDisk.of(hook.local_dir)).shards);
}

test "a budget below the two largest shards is refused at open, naming both" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var sorted: [10]u64 = undefined;
    for (&sorted, written.shards) |*len, shard| len.* = shard.byte_len;
    std.mem.sort(u64, &sorted, {}, std.sort.desc(u64));
    const needed = sorted[0] + sorted[1];
    hook.remote.budget_bytes = needed - 1;
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidArgument, hook.open(&diagnostic));
    var expected_buffer: [256]u8 = undefined;
    const expected = try std.fmt.bufPrint(
        &expected_buffer,
        "cache {s}: RemoteConfig.budget_bytes={d} is below the two largest shards of {s}: " ++
            "{d} + {d} = {d} bytes",
        .{ remote_test.url, needed - 1, remote_test.url, sorted[0], sorted[1], needed },
    );
    try testing.expectEqualStrings(expected, diagnostic.message());
    hook.remote.budget_bytes = needed;
    const cache = try hook.open(&diagnostic);
    cache.close();
}

test "a reservation of a fetcher that died is dropped with its temporary" {
    var written = try TestCache.write(spec);
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    hook.remote.budget_bytes = 3 * largestShard(&written);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    const io = system.io();
    var folder = try std.Io.Dir.cwd().openDir(io, cache.shards.remote.?.folder, .{});
    defer folder.close(io);
    // A live one: its fetcher holds the shard's lock, so its bytes count.
    const folder_path = cache.shards.remote.?.folder;
    const held_name = "shards/000008.bin";
    var held = try fetch_lock.FetchLock.acquire(folder, folder_path, held_name, &diagnostic);
    var live_buffer: [64]u8 = undefined;
    const live = try std.fmt.bufPrint(&live_buffer, "shards/000008.bin.reserved-{d}", .{
        largestShard(&written),
    });
    (try folder.createFile(io, live, .{})).close(io);
    // A dead one, as big as the budget, and the temporary of its download.
    (try folder.createFile(io, "shards/000009.bin.reserved-999999999", .{})).close(io);
    const temporary = try folder.createFile(io, "shards/000009.bin.tmp-4242-0", .{});
    try temporary.writePositionalAll(io, "partial", 0);
    temporary.close(io);
    var reader = try Reader.init(cache);
    defer reader.deinit();
    for (0..4) |shard_id| try reader.readShard(shard_id);
    const on_disk = try OnDisk.of(hook.local_dir);
    try testing.expectEqual(@as(u32, 0), on_disk.temporaries);
    try testing.expectEqual(@as(u32, 1), on_disk.reservations);
    // With the live reservation, only two shards fit beside it.
    try testing.expectEqual(bit(2) | bit(3), on_disk.shards);
    held.release();
}
