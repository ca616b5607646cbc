//! Tests of cache_writer.zig: shard rotation, the files and the manifest it
//! publishes (read back with format/'s decoders, as write/ may not use the
//! reader), and that a failed or abandoned write publishes nothing.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const thread_pool = @import("../base/thread_pool.zig");
const file_status = @import("../base/file_status.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const sha256 = @import("../codec/sha256.zig");
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const record_checksums = @import("../format/record_checksums.zig");
const arrow_ipc_read = @import("../format/arrow_ipc_read.zig");
const cache_writer = @import("cache_writer.zig");
const CacheWriter = cache_writer.CacheWriter;

/// A temporary base directory and a pool to write caches with.
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

    fn create(base: *Base, name: []const u8, with: cache_writer.Options) !*CacheWriter {
        var diagnostic: Diagnostic = .{};
        return CacheWriter.create(testing.allocator, base.pool, base.path, name, with, &diagnostic);
    }

    /// The bytes of `name` under cache `cache`; the caller frees them.
    fn readFile(base: *Base, cache: []const u8, name: []const u8) ![]u8 {
        var dir = try base.tmp.dir.openDir(system.io(), cache, .{});
        defer dir.close(system.io());
        return file_status.readAlloc(testing.allocator, dir, name, 1 << 30);
    }

    fn exists(base: *Base, name: []const u8) bool {
        _ = file_status.pathInode(base.tmp.dir, name) catch return false;
        return true;
    }

    /// Whether the staging area holds anything but lock files.
    fn stagingLeft(base: *Base) !bool {
        const io = system.io();
        const flags: std.Io.Dir.OpenOptions = .{ .iterate = true };
        var dir = base.tmp.dir.openDir(io, cache_layout.staging_dir, flags) catch |err| {
            return if (err == error.FileNotFound) false else err;
        };
        defer dir.close(io);
        var iterator = dir.iterate();
        while (try iterator.next(io)) |entry| {
            if (!std.mem.endsWith(u8, entry.name, cache_layout.lock_suffix)) return true;
        }
        return false;
    }
};

fn options(max_shard_bytes: u64, compression: shard_record.Compression) cache_writer.Options {
    return .{
        .max_shard_bytes = max_shard_bytes,
        .batches_in_flight_max = 2,
        .compression = compression,
        .compression_ratio = if (compression == .lz4) 0.5 else 1.0,
    };
}

/// The payload of sample i: `payload_bytes` bytes, byte k of it `i + 3 * k`.
fn payloadOf(buffer: []u8, sample_id: u64, payload_bytes: usize) []const u8 {
    for (buffer[0..payload_bytes], 0..) |*byte, k| byte.* = @truncate(sample_id +% 3 * k);
    return buffer[0..payload_bytes];
}

/// Pushes samples `first..end` with metadata {"i": i} in one batch.
fn push(writer: *CacheWriter, first: u64, end: u64, payload_bytes: usize) !void {
    const allocator = testing.allocator;
    var payloads: std.ArrayList(u8) = .empty;
    defer payloads.deinit(allocator);
    var lens: std.ArrayList(u64) = .empty;
    defer lens.deinit(allocator);
    var json: std.ArrayList(u8) = .empty;
    defer json.deinit(allocator);
    try json.append(allocator, '[');
    for (first..end) |sample_id| {
        var buffer: [4096]u8 = undefined;
        try payloads.appendSlice(allocator, payloadOf(&buffer, sample_id, payload_bytes));
        try lens.append(allocator, payload_bytes);
        if (sample_id != first) try json.append(allocator, ',');
        try json.print(allocator, "{{\"i\": {d}}}", .{sample_id});
    }
    try json.append(allocator, ']');
    var diagnostic: Diagnostic = .{};
    try writer.push(payloads.items, lens.items, json.items, &diagnostic);
}

/// Writes and publishes `count` samples as cache `name`, in batches of 7.
fn writeCache(
    base: *Base,
    name: []const u8,
    count: u64,
    payload_bytes: usize,
    with: cache_writer.Options,
) !void {
    const writer = try base.create(name, with);
    defer writer.destroy();
    var first: u64 = 0;
    while (first < count) : (first += 7) {
        try push(writer, first, @min(first + 7, count), payload_bytes);
    }
    var diagnostic: Diagnostic = .{};
    try writer.finish(&diagnostic);
}

/// A published cache as its files say, decoded with format/.
const Published = struct {
    parsed: manifest.Parsed,
    index: []u8,
    checksums: []u8,

    fn read(base: *Base, name: []const u8) !Published {
        const text = try base.readFile(name, cache_layout.manifest_file);
        defer testing.allocator.free(text);
        var diagnostic: Diagnostic = .{};
        var parsed = try manifest.parse(testing.allocator, text, &diagnostic);
        errdefer parsed.deinit();
        const index = try base.readFile(name, cache_layout.index_file);
        errdefer testing.allocator.free(index);
        return .{
            .parsed = parsed,
            .index = index,
            .checksums = try base.readFile(name, cache_layout.record_checksums_file),
        };
    }

    fn deinit(published: *Published) void {
        published.parsed.deinit();
        testing.allocator.free(published.index);
        testing.allocator.free(published.checksums);
    }

    fn row(published: *const Published, sample_id: u64) index_file.Row {
        return index_file.decodeRow(published.index, sample_id);
    }
};

test "a shard is closed before a record would take it past max_shard_bytes" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    // Records of 8 + 8 or 9 + 100 bytes: three fit in 400 bytes, four do not.
    try writeCache(&base, "rotated", 20, 100, options(400, .none));
    var published = try Published.read(&base, "rotated");
    defer published.deinit();
    const shards = published.parsed.manifest.shards;
    try testing.expectEqual(@as(usize, 7), shards.len);
    var sample_id: u64 = 0;
    for (shards, 0..) |shard, shard_id| {
        try testing.expect(shard.byte_len <= 400);
        var offset: u64 = 0;
        while (sample_id < 20 and published.row(sample_id).shard_id == shard_id) {
            defer sample_id += 1;
            try testing.expectEqual(offset, published.row(sample_id).offset);
            offset += published.row(sample_id).record_len;
        }
        try testing.expectEqual(shard.byte_len, offset);
        // The next record would not have fit.
        if (sample_id < 20) try testing.expect(offset + published.row(sample_id).record_len > 400);
    }
    try testing.expectEqual(@as(u64, 20), sample_id);
}

test "a record larger than max_shard_bytes gets a shard of its own" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    try writeCache(&base, "one_each", 9, 100, options(50, .none));
    var published = try Published.read(&base, "one_each");
    defer published.deinit();
    const shards = published.parsed.manifest.shards;
    try testing.expectEqual(@as(usize, 9), shards.len);
    for (shards, 0..) |shard, shard_id| {
        const at = published.row(shard_id);
        try testing.expectEqual(@as(u64, shard_id), at.shard_id);
        try testing.expectEqual(@as(u64, 0), at.offset);
        try testing.expectEqual(shard.byte_len, at.record_len);
        try testing.expectEqual(@as(u64, 100), shard.uncompressed_byte_len);
    }
}

test "the manifest lists every file as written, and the records hold what was pushed" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    for ([_]shard_record.Compression{ .none, .lz4 }) |compression| {
        const name = if (compression == .lz4) "packed" else "plain";
        try writeCache(&base, name, 30, 64, options(1000, compression));
        var published = try Published.read(&base, name);
        defer published.deinit();
        const listed = published.parsed.manifest;
        try testing.expectEqual(manifest.format_version_oldest, listed.format_version);
        try testing.expectEqualStrings(name, listed.source_name);
        try testing.expectEqual(@as(u64, 30), listed.sample_count);
        try testing.expectEqual(@as(usize, 1), listed.metadata_schema.len);
        try testing.expectEqualStrings("i", listed.metadata_schema[0].name);
        try testing.expectEqualSlices(u8, &sha256.hash(published.index), &listed.index_sha256);
        try testing.expectEqual(@as(usize, 30 * index_file.row_bytes), published.index.len);
        const checksums = listed.record_checksums.?;
        try testing.expectEqual(@as(u64, 30 * record_checksums.checksum_bytes), checksums.byte_len);
        try testing.expectEqualSlices(u8, &sha256.hash(published.checksums), &checksums.sha256);
        try expectMetadata(&base, name, listed);
        try expectShards(&base, name, &published, compression);
    }
}

/// metadata.arrow hashes to the manifest's digest and holds i = 0, 1, ...
fn expectMetadata(base: *Base, name: []const u8, listed: manifest.Manifest) !void {
    const bytes = try base.readFile(name, cache_layout.metadata_file);
    defer testing.allocator.free(bytes);
    try testing.expectEqualSlices(u8, &sha256.hash(bytes), &listed.metadata_sha256);
    var diagnostic: Diagnostic = .{};
    var table = try arrow_ipc_read.readFile(testing.allocator, bytes, &diagnostic);
    defer table.deinit();
    try testing.expectEqual(listed.sample_count, table.row_count);
    for (table.columns[0].values.int, 0..) |value, index| {
        try testing.expectEqual(@as(i64, @intCast(index)), value);
    }
}

/// Each shard: named by its position, of its listed length and SHA-256, its
/// records with their checksums, JSON and payloads as pushed.
fn expectShards(
    base: *Base,
    name: []const u8,
    published: *const Published,
    compression: shard_record.Compression,
) !void {
    const listed = published.parsed.manifest;
    for (listed.shards, 0..) |shard, shard_id| {
        try testing.expectEqualStrings(cache_layout.ShardName.of(shard_id).slice(), shard.name);
        try testing.expectEqual(compression == .lz4, shard.compression.algo == .lz4);
        var path_buffer: [64]u8 = undefined;
        const path = try std.fmt.bufPrint(&path_buffer, "shards/{s}", .{shard.name});
        const bytes = try base.readFile(name, path);
        defer testing.allocator.free(bytes);
        try testing.expectEqual(shard.byte_len, bytes.len);
        try testing.expectEqualSlices(u8, &sha256.hash(bytes), &shard.sha256);
        var payload_total: u64 = 0;
        for (0..listed.sample_count) |sample_id| {
            const at = published.row(sample_id);
            if (at.shard_id != shard_id) continue;
            const record = bytes[@intCast(at.offset)..][0..@intCast(at.record_len)];
            const checksum = record_checksums.entry(published.checksums, sample_id);
            try testing.expectEqual(record_checksums.ofRecord(record), checksum);
            var diagnostic: Diagnostic = .{};
            const parts = try shard_record.split(record, compression, &diagnostic);
            var json_buffer: [32]u8 = undefined;
            const json = try std.fmt.bufPrint(&json_buffer, "{{\"i\":{d}}}", .{sample_id});
            try testing.expectEqualStrings(json, parts.metadata_json);
            var decoded: [64]u8 = undefined;
            try shard_record.decodePayload(
                parts,
                compression,
                decoded[0..@intCast(parts.payload_len)],
                &diagnostic,
            );
            var expected: [64]u8 = undefined;
            try testing.expectEqualSlices(
                u8,
                payloadOf(&expected, sample_id, 64),
                decoded[0..@intCast(parts.payload_len)],
            );
            payload_total += parts.payload_len;
        }
        try testing.expectEqual(shard.uncompressed_byte_len, payload_total);
    }
}

test "a failed write publishes nothing and leaves no staging directory" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    {
        const writer = try base.create("failed", options(300, .none));
        defer writer.destroy();
        try push(writer, 0, 5, 50);
        // The second batch's metadata does not match the schema the first fixed.
        var diagnostic: Diagnostic = .{};
        const pushed = writer.push("ab", &.{2}, "[{\"j\": 1}]", &diagnostic);
        const finished = if (pushed) |_| writer.finish(&diagnostic) else |err| err;
        try testing.expectError(error.InvalidInput, finished);
        try testing.expect(std.mem.indexOf(u8, diagnostic.message(), "sample 5") != null);
        try testing.expect(!base.exists("failed"));
    }
    try testing.expect(!base.exists("failed"));
    try testing.expect(!try base.stagingLeft());
}

test "an abandoned write publishes nothing" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    {
        const writer = try base.create("abandoned", options(300, .none));
        defer writer.destroy();
        try push(writer, 0, 20, 50);
        try testing.expect(try base.stagingLeft());
    }
    try testing.expect(!base.exists("abandoned"));
    try testing.expect(!try base.stagingLeft());
}

test "a write of no samples fails and publishes nothing; a finished writer finishes once" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    var diagnostic: Diagnostic = .{};
    {
        const writer = try base.create("empty", options(300, .none));
        defer writer.destroy();
        try testing.expectError(error.InvalidInput, writer.finish(&diagnostic));
        try testing.expect(
            std.mem.startsWith(u8, diagnostic.message(), "cache source yielded no samples"),
        );
    }
    try testing.expect(!base.exists("empty"));
    {
        const writer = try base.create("twice", options(300, .none));
        defer writer.destroy();
        try push(writer, 0, 3, 10);
        try writer.finish(&diagnostic);
        try testing.expectError(error.State, writer.finish(&diagnostic));
        try testing.expectError(error.State, writer.push("", &.{}, "[]", &diagnostic));
        try testing.expect(base.exists("twice"));
    }
    // A writer of a published cache is refused (once the first has let go of
    // the target's lock: until then a second writer waits for it).
    try testing.expectError(error.AlreadyExists, base.create("twice", options(300, .none)));
}

test "options and source names are refused before anything is created" {
    var base: Base = .{ .tmp = undefined, .path = &.{}, .pool = undefined };
    try base.init();
    defer base.deinit();
    var diagnostic: Diagnostic = .{};
    var bad = options(0, .none);
    try testing.expectError(
        error.InvalidArgument,
        CacheWriter.create(testing.allocator, base.pool, base.path, "a", bad, &diagnostic),
    );
    try testing.expectEqualStrings("max_shard_bytes must be at least 1", diagnostic.message());
    bad = options(10, .none);
    bad.batches_in_flight_max = 0;
    try testing.expectError(
        error.InvalidArgument,
        CacheWriter.create(testing.allocator, base.pool, base.path, "a", bad, &diagnostic),
    );
    try testing.expectEqualStrings(
        "batches_in_flight_max must be at least 1",
        diagnostic.message(),
    );
    for ([_][]const u8{ "tmp", "a/b", "", ".." }) |name| {
        try testing.expectError(error.InvalidArgument, base.create(name, options(10, .none)));
    }
    try testing.expect(!try base.stagingLeft());
}

test "inFlightLimit: the caller's cap, else enough for the floor or two per worker" {
    try std.testing.expectEqual(@as(u32, 8), cache_writer.inFlightLimit(64, 1));
    try std.testing.expectEqual(@as(u32, 8), cache_writer.inFlightLimit(64, 4));
    try std.testing.expectEqual(@as(u32, 12), cache_writer.inFlightLimit(64, 6));
    try std.testing.expectEqual(@as(u32, 3), cache_writer.inFlightLimit(3, 6));
    try std.testing.expectEqual(@as(u32, 1), cache_writer.inFlightLimit(1, 1));
    try std.testing.expectEqual(
        @as(u32, std.math.maxInt(u32)),
        cache_writer.inFlightLimit(std.math.maxInt(u32), std.math.maxInt(u32)),
    );
}
