//! Cache identities (format 3): the `cache_id` a v3 manifest persists, and the
//! ids of the caches of one dataset.
//!
//! A writer derives a new cache's id from its source name (`fromSourceName`); a
//! migrated cache keeps the position it had in its dataset. In a dataset, a v3
//! cache's id is the one its manifest persists and a v2 cache's id is its
//! position in the dataset's list of caches; no two caches may share an id.
const std = @import("std");
const assert = std.debug.assert;
const sha256 = @import("../codec/sha256.zig");

/// Every cache_id is below 2^63, so it fits a signed 64-bit integer too.
pub const cache_id_limit: u64 = 1 << 63;

/// The cache_id of a new cache of source `name`: the first 8 bytes of the
/// SHA-256 of the name's bytes (UTF-8), read big-endian, with the top bit cleared.
pub fn fromSourceName(name: []const u8) u64 {
    const digest = sha256.hash(name);
    const id = std.mem.readInt(u64, digest[0..8], .big) & (cache_id_limit - 1);
    assert(id < cache_id_limit);
    return id;
}

/// Two caches of one dataset with the same id, by position (`first` < `second`).
pub const Duplicate = struct { id: u64, first: u32, second: u32 };

/// The ids of a dataset's caches, both ways.
pub const CacheIds = struct {
    /// The id of the cache at each position.
    by_position: []u64,
    /// Every (id, position), sorted by id; empty when each id is its position,
    /// as in a dataset of v2 caches only.
    sorted: []Entry,

    pub const Entry = struct { id: u64, position: u32 };

    /// The ids of caches whose manifests persist `persisted` (null: a v2 cache,
    /// whose id is its position). `error.DuplicateCacheId` fills `duplicate`
    /// with the pair whose second cache comes first in `persisted`.
    pub fn build(
        allocator: std.mem.Allocator,
        persisted: []const ?u64,
        duplicate: *Duplicate,
    ) error{ OutOfMemory, DuplicateCacheId }!CacheIds {
        assert(persisted.len <= std.math.maxInt(u32));
        const by_position = try allocator.alloc(u64, persisted.len);
        errdefer allocator.free(by_position);
        var positional = true;
        for (by_position, persisted, 0..) |*id, maybe_id, position| {
            id.* = maybe_id orelse position;
            assert(id.* < cache_id_limit);
            positional = positional and id.* == position;
        }
        if (positional) return .{ .by_position = by_position, .sorted = &.{} };
        const sorted = try allocator.alloc(Entry, persisted.len);
        errdefer allocator.free(sorted);
        for (sorted, by_position, 0..) |*entry, id, position| {
            entry.* = .{ .id = id, .position = @intCast(position) };
        }
        std.mem.sortUnstable(Entry, sorted, {}, entryLessThan);
        if (firstDuplicate(sorted)) |found| {
            duplicate.* = found;
            return error.DuplicateCacheId;
        }
        return .{ .by_position = by_position, .sorted = sorted };
    }

    pub fn deinit(ids: *CacheIds, allocator: std.mem.Allocator) void {
        allocator.free(ids.by_position);
        allocator.free(ids.sorted);
        ids.* = undefined;
    }

    /// Whether every cache's id is its position.
    pub fn isPositional(ids: CacheIds) bool {
        return ids.sorted.len == 0;
    }

    /// The position of the cache with id `id`, or null when no cache has it.
    pub fn positionOf(ids: CacheIds, id: u64) ?u32 {
        if (ids.isPositional()) {
            return if (id < ids.by_position.len) @intCast(id) else null;
        }
        const sorted = ids.sorted;
        const index = std.sort.lowerBound(Entry, sorted, id, entryOrder);
        if (index == sorted.len or sorted[index].id != id) return null;
        assert(ids.by_position[sorted[index].position] == id);
        return sorted[index].position;
    }

    fn entryLessThan(_: void, left: Entry, right: Entry) bool {
        if (left.id != right.id) return left.id < right.id;
        return left.position < right.position;
    }

    fn entryOrder(id: u64, entry: Entry) std.math.Order {
        return std.math.order(id, entry.id);
    }

    /// The duplicate pair whose second position is the smallest, if any.
    fn firstDuplicate(sorted: []const Entry) ?Duplicate {
        var found: ?Duplicate = null;
        if (sorted.len < 2) return null;
        for (sorted[0 .. sorted.len - 1], sorted[1..]) |left, right| {
            if (left.id != right.id) continue;
            if (found != null and found.?.second < right.position) continue;
            // Sorted by position within one id, so `left` is the earlier cache.
            assert(left.position < right.position);
            found = .{ .id = left.id, .first = left.position, .second = right.position };
        }
        return found;
    }
};

const testing = std.testing;

test "fromSourceName gives the ids dataset-rt 0.4.8 writes" {
    // Each written by dataset-rt 0.4.8; "a" and the non-ASCII name have the top bit set.
    const cases = [_]struct { name: []const u8, id: u64 }{
        .{ .name = "train-00", .id = 4883758774605530659 },
        .{ .name = "a", .id = 5374906597990186442 },
        .{ .name = "b", .id = 4477677635727087946 },
        .{ .name = "shard 7", .id = 8950630506278237002 },
        .{ .name = "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac", .id = 8027391870488211787 },
        .{ .name = &@as([250]u8, @splat('x')), .id = 607223009576214065 },
    };
    for (cases) |case| try testing.expectEqual(case.id, fromSourceName(case.name));
}

test "CacheIds: v2 caches keep their positions, v3 caches their persisted ids" {
    var duplicate: Duplicate = undefined;
    var positional = try CacheIds.build(testing.allocator, &.{ null, null, null }, &duplicate);
    defer positional.deinit(testing.allocator);
    try testing.expect(positional.isPositional());
    try testing.expectEqual(@as(?u32, 2), positional.positionOf(2));
    try testing.expectEqual(@as(?u32, null), positional.positionOf(3));

    const persisted = [_]?u64{ null, 4883758774605530659, null, 7 };
    var mixed = try CacheIds.build(testing.allocator, &persisted, &duplicate);
    defer mixed.deinit(testing.allocator);
    try testing.expect(!mixed.isPositional());
    try testing.expectEqualSlices(u64, &.{ 0, 4883758774605530659, 2, 7 }, mixed.by_position);
    try testing.expectEqual(@as(?u32, 1), mixed.positionOf(4883758774605530659));
    try testing.expectEqual(@as(?u32, 2), mixed.positionOf(2));
    try testing.expectEqual(@as(?u32, 3), mixed.positionOf(7));
    try testing.expectEqual(@as(?u32, null), mixed.positionOf(1));
    try testing.expectEqual(@as(?u32, null), mixed.positionOf(3));
    try testing.expectEqual(@as(?u32, null), mixed.positionOf(cache_id_limit - 1));

    // A v3 cache whose id equals its own position is no conflict.
    var own_position = try CacheIds.build(testing.allocator, &.{ 0, null }, &duplicate);
    defer own_position.deinit(testing.allocator);
    try testing.expect(own_position.isPositional());
}

test "CacheIds: a shared id is refused, naming the first pair in list order" {
    const cases = [_]struct { persisted: []const ?u64, duplicate: Duplicate }{
        // A v3 id that is the position of a v2 cache, before and after it.
        .{ .persisted = &.{ null, null, 1 }, .duplicate = .{ .id = 1, .first = 1, .second = 2 } },
        .{ .persisted = &.{ 1, null }, .duplicate = .{ .id = 1, .first = 0, .second = 1 } },
        // The same v3 cache twice.
        .{ .persisted = &.{ 9, 5, 9 }, .duplicate = .{ .id = 9, .first = 0, .second = 2 } },
        // Of two duplicate pairs, the one whose later cache comes first.
        .{ .persisted = &.{ 8, 9, 9, 8 }, .duplicate = .{ .id = 9, .first = 1, .second = 2 } },
    };
    for (cases) |case| {
        var duplicate: Duplicate = undefined;
        const built = CacheIds.build(testing.allocator, case.persisted, &duplicate);
        try testing.expectError(error.DuplicateCacheId, built);
        try testing.expectEqual(case.duplicate, duplicate);
    }
}
