//! Tests of partition_commit.zig: partition caches written by the ordinary
//! writer into their attempt directories, committed, and compared with one
//! cache of the same samples written in one go.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const thread_pool = @import("../base/thread_pool.zig");
const file_status = @import("../base/file_status.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const sha256 = @import("../codec/sha256.zig");
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const cache_writer = @import("cache_writer.zig");
const CacheWriter = cache_writer.CacheWriter;
const partition_commit = @import("partition_commit.zig");
const Part = partition_commit.Part;
const zero: [32]u8 = @splat(0);

/// Commits `parts` as the cache "c" under `base_path`.
fn commit(
    base_path: []const u8,
    parts: []const Part,
    diagnostic: *Diagnostic,
) partition_commit.Error!partition_commit.Outcome {
    return partition_commit.commit(testing.allocator, base_path, "c", parts, diagnostic);
}

const Base = struct {
    tmp: testing.TmpDir,
    path: []const u8,
    path_buffer: [std.fs.max_path_bytes]u8 = undefined,
    pool: *thread_pool.ThreadPool,

    fn init(base: *Base) !void {
        base.tmp = testing.tmpDir(.{});
        errdefer base.tmp.cleanup();
        const len = try base.tmp.dir.realPath(system.io(), &base.path_buffer);
        base.path = base.path_buffer[0..len];
        base.pool = try .create(testing.allocator, 2);
    }

    fn deinit(base: *Base) void {
        base.pool.release();
        base.tmp.cleanup();
    }

    /// Writes samples `first..end` (metadata `{key: i}`) as cache `name` under
    /// `folder` (relative to the base), 40-byte shards so that each has several.
    fn write(
        base: *Base,
        folder: []const u8,
        name: []const u8,
        first: u64,
        end: u64,
        key: []const u8,
    ) !void {
        var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
        const path = try std.fmt.bufPrint(&path_buffer, "{s}/{s}", .{ base.path, folder });
        const options: cache_writer.Options = .{
            .max_shard_bytes = 40,
            .batches_in_flight_max = 2,
            .compression = .none,
            .compression_ratio = 1.0,
        };
        var diagnostic: Diagnostic = .{};
        const allocator = testing.allocator;
        const pool = base.pool;
        const writer = try CacheWriter.create(allocator, pool, path, name, options, &diagnostic);
        defer writer.destroy();
        var payloads: std.ArrayList(u8) = .empty;
        defer payloads.deinit(testing.allocator);
        var lens: std.ArrayList(u64) = .empty;
        defer lens.deinit(testing.allocator);
        var json: std.ArrayList(u8) = .empty;
        defer json.deinit(testing.allocator);
        try json.append(testing.allocator, '[');
        for (first..end) |sample_id| {
            try payloads.print(testing.allocator, "payload-{d}", .{sample_id});
            try lens.append(testing.allocator, std.fmt.count("payload-{d}", .{sample_id}));
            if (sample_id != first) try json.append(testing.allocator, ',');
            try json.print(testing.allocator, "{{\"{s}\": {d}}}", .{ key, sample_id });
        }
        try json.append(testing.allocator, ']');
        try writer.push(payloads.items, lens.items, json.items, &diagnostic);
        try writer.finish(&diagnostic);
    }

    /// Writes partition `number` of cache "c" as attempt `attempt`; its Part.
    fn writePart(
        base: *Base,
        number: u64,
        attempt: []const u8,
        first: u64,
        end: u64,
        key: []const u8,
    ) !Part {
        var folder_buffer: [256]u8 = undefined;
        const folder = try std.fmt.bufPrint(&folder_buffer, "tmp/partitions/c/part-{d:0>6}.{s}", .{
            number, attempt,
        });
        try base.write(folder, "c", first, end, key);
        var manifest_buffer: [256]u8 = undefined;
        const manifest_path = try std.fmt.bufPrint(&manifest_buffer, "{s}/c/manifest.json", .{
            folder,
        });
        const text = try base.read(manifest_path);
        defer testing.allocator.free(text);
        const digest = sha256.hash(text);
        return .{ .attempt = attempt, .sample_count = end - first, .manifest_sha256 = digest };
    }

    fn read(base: *Base, path: []const u8) ![]u8 {
        return file_status.readAlloc(testing.allocator, base.tmp.dir, path, 1 << 30);
    }

    fn exists(base: *Base, path: []const u8) bool {
        _ = file_status.pathInode(base.tmp.dir, path) catch return false;
        return true;
    }

    /// Every shard of cache `name`, concatenated in order.
    fn shardBytes(base: *Base, name: []const u8) ![]u8 {
        var out: std.ArrayList(u8) = .empty;
        errdefer out.deinit(testing.allocator);
        var position: u64 = 0;
        while (true) : (position += 1) {
            var path_buffer: [256]u8 = undefined;
            const shard = cache_layout.ShardName.of(position);
            const path = try std.fmt.bufPrint(&path_buffer, "{s}/shards/{s}", .{
                name, shard.slice(),
            });
            if (!base.exists(path)) break;
            const bytes = try base.read(path);
            defer testing.allocator.free(bytes);
            try out.appendSlice(testing.allocator, bytes);
        }
        return out.toOwnedSlice(testing.allocator);
    }

    fn expectSameFile(base: *Base, first: []const u8, second: []const u8) !void {
        const a = try base.read(first);
        defer testing.allocator.free(a);
        const b = try base.read(second);
        defer testing.allocator.free(b);
        try testing.expectEqualSlices(u8, a, b);
    }
};

test "commit joins partitions (one empty) into the cache one write of the same samples makes" {
    var base: Base = undefined;
    try base.init();
    defer base.deinit();
    const parts = [_]Part{
        try base.writePart(0, "a0", 0, 5, "i"),
        .{ .attempt = null, .sample_count = 0, .manifest_sha256 = zero },
        try base.writePart(2, "a0", 5, 6, "i"),
        try base.writePart(3, "a1", 6, 13, "i"),
    };
    try base.write(".", "whole", 0, 13, "i");
    var diagnostic: Diagnostic = .{};
    const outcome = try commit(base.path, &parts, &diagnostic);
    try testing.expectEqual(partition_commit.Outcome.published, outcome);
    try base.expectSameFile("c/metadata.arrow", "whole/metadata.arrow");
    try base.expectSameFile("c/records.crc32c", "whole/records.crc32c");
    const joined = try base.shardBytes("c");
    defer testing.allocator.free(joined);
    const whole = try base.shardBytes("whole");
    defer testing.allocator.free(whole);
    try testing.expectEqualSlices(u8, whole, joined);
    const text = try base.read("c/manifest.json");
    defer testing.allocator.free(text);
    var parsed = try manifest.parse(testing.allocator, text, &diagnostic);
    defer parsed.deinit();
    try testing.expectEqual(@as(u64, 13), parsed.manifest.sample_count);
    try testing.expectEqualStrings("c", parsed.manifest.source_name);
    // The attempts are gone; a second commit finds the cache it published.
    try testing.expect(!base.exists("tmp/partitions/c/part-000000.a0"));
    const again = try commit(base.path, &parts, &diagnostic);
    try testing.expectEqual(partition_commit.Outcome.already_published, again);
}

test "commit refuses different schemas, a foreign cache and a changed attempt, publishing nothing" {
    var base: Base = undefined;
    try base.init();
    defer base.deinit();
    const parts = [_]Part{
        try base.writePart(0, "a0", 0, 3, "i"),
        try base.writePart(1, "a0", 3, 6, "j"),
    };
    var diagnostic: Diagnostic = .{};
    const mixed = commit(base.path, &parts, &diagnostic);
    try testing.expectError(error.InvalidInput, mixed);
    const expected = "partitions 0 and 1 have different metadata schemas: column 'i' is int in " ++
        "partition 0 and missing in partition 1";
    try testing.expectEqualStrings(expected, diagnostic.message());
    try testing.expect(!base.exists("c"));
    // Nothing was moved: partition 0's shards are where its writer put them.
    try testing.expect(base.exists("tmp/partitions/c/part-000000.a0/c/shards/000000.bin"));
    var changed = parts;
    changed[1] = try base.writePart(1, "a1", 3, 6, "i");
    changed[1].manifest_sha256[0] ^= 1;
    const unsealed = commit(base.path, &changed, &diagnostic);
    try testing.expectError(error.InvalidCache, unsealed);
    const sealed_phrase = "not the one its pointer sealed";
    try testing.expect(std.mem.indexOf(u8, diagnostic.message(), sealed_phrase) != null);
    try testing.expect(!base.exists("c"));
    try base.write(".", "c", 0, 1, "i");
    changed[1].manifest_sha256[0] ^= 1;
    const foreign = commit(base.path, &changed, &diagnostic);
    try testing.expectError(error.AlreadyExists, foreign);
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), "cache path already exists: "));
}

test "a published name is this commit's only for the partitions it joined" {
    var base: Base = undefined;
    try base.init();
    defer base.deinit();
    const parts = [_]Part{
        try base.writePart(0, "a0", 0, 4, "i"),
        try base.writePart(1, "a0", 4, 7, "i"),
    };
    const Outcome = partition_commit.Outcome;
    var diagnostic: Diagnostic = .{};
    try testing.expectEqual(Outcome.published, try commit(base.path, &parts, &diagnostic));
    // Another build of the name (partition 1 written again) is refused.
    const rebuilt = [_]Part{ parts[0], try base.writePart(1, "b0", 4, 9, "i") };
    try testing.expectError(error.AlreadyExists, commit(base.path, &rebuilt, &diagnostic));
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), "cache path already exists: "));
    try testing.expect(base.exists("tmp/partitions/c/part-000001.b0/c/manifest.json"));
    // The same partitions, and partitions not known (the pointers removed after
    // the commit): published by this commit.
    try testing.expectEqual(Outcome.already_published, try commit(base.path, &parts, &diagnostic));
    const empty: Part = .{ .attempt = null, .sample_count = 0, .manifest_sha256 = zero };
    const unknown: [2]Part = @splat(empty);
    const again = try commit(base.path, &unknown, &diagnostic);
    try testing.expectEqual(Outcome.already_published, again);
}

test "commit refuses bad arguments by name" {
    var base: Base = undefined;
    try base.init();
    defer base.deinit();
    var diagnostic: Diagnostic = .{};
    const no_attempt = [_]Part{.{ .attempt = null, .sample_count = 2, .manifest_sha256 = zero }};
    const missing = commit(base.path, &no_attempt, &diagnostic);
    try testing.expectError(error.InvalidArgument, missing);
    const no_attempt_phrase = "partition 0 has 2 samples but no attempt";
    try testing.expectEqualStrings(no_attempt_phrase, diagnostic.message());
    const slash = [_]Part{.{ .attempt = "a/b", .sample_count = 2, .manifest_sha256 = zero }};
    const bad = commit(base.path, &slash, &diagnostic);
    try testing.expectError(error.InvalidArgument, bad);
    const separator_phrase = "partition 0: attempt 'a/b' contains a path separator";
    try testing.expectEqualStrings(separator_phrase, diagnostic.message());
    const empty = [_]Part{.{ .attempt = null, .sample_count = 0, .manifest_sha256 = zero }};
    const nothing = commit(base.path, &empty, &diagnostic);
    try testing.expectError(error.InvalidInput, nothing);
    try testing.expect(!base.exists("c"));
}
