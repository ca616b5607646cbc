//! Small caches for the read/ tests, laid out byte by byte with the format's
//! own encoders (read/ may not use the writer): a test says which records it
//! wants, may damage any byte of them, and reads what it wrote.
//!
//! Sample i has the metadata {"i": i, "label": "s<i>"} (with `Spec.label_pad`
//! bytes of padding in the label) and a payload of `Spec.payload_bytes + i % 4`
//! bytes, byte k of it `i * 7 + k`.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sha256 = @import("../codec/sha256.zig");
const lz4 = @import("../codec/lz4.zig");
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const types = @import("../format/metadata_types.zig");
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const record_checksums = @import("../format/record_checksums.zig");
const metadata_canonical = @import("../format/metadata_canonical.zig");
const arrow_ipc_write = @import("../format/arrow_ipc_write.zig");
const file_status = @import("../base/file_status.zig");

pub const Spec = struct {
    sample_count: u32 = 10,
    compression: shard_record.Compression = .none,
    /// Records per shard; the last shard may hold fewer.
    records_per_shard: u32 = 4,
    payload_bytes: u32 = 16,
    /// Bytes of padding in every label (a long JSON).
    label_pad: u32 = 0,
    record_checksums: bool = true,
    /// The kind of column "i": int, or float for a cache of another schema.
    i_kind: types.Kind = .int,
    /// Without the "label" column: another schema.
    with_label: bool = true,
    source_name: []const u8 = "test",
    /// Set: a format 3 cache with this cache_id; null: format 2.
    cache_id: ?u64 = null,
};

pub const TestCache = struct {
    arena: std.heap.ArenaAllocator,
    tmp: std.testing.TmpDir,
    spec: Spec,
    /// The cache directory, absolute.
    path: []const u8,
    schema: []const types.Field,
    /// metadata.arrow's columns, in schema order.
    columns: []const types.Column,
    index_bytes: []u8,
    checksum_bytes: ?[]u8,
    /// The manifest's shard entries; `writeManifest` writes them as they are.
    shards: []manifest.Shard,

    /// Writes a published cache as `spec` says into a new temporary directory.
    pub fn write(spec: Spec) !TestCache {
        assert(spec.sample_count > 0 and spec.records_per_shard > 0);
        var cache: TestCache = .{
            .arena = .init(std.testing.allocator),
            .tmp = std.testing.tmpDir(.{}),
            .spec = spec,
            .path = &.{},
            .schema = &.{},
            .columns = &.{},
            .index_bytes = &.{},
            .checksum_bytes = null,
            .shards = &.{},
        };
        errdefer cache.deinit();
        const allocator = cache.arena.allocator();
        const io = system.io();
        try cache.tmp.dir.createDirPath(io, "cache/" ++ cache_layout.shards_dir);
        var buffer: [std.fs.max_path_bytes]u8 = undefined;
        const base = buffer[0..try cache.tmp.dir.realPath(io, &buffer)];
        cache.path = try std.fs.path.join(allocator, &.{ base, "cache" });
        try cache.buildMetadata(allocator);
        try cache.writeShards(allocator);
        try cache.writeTables(allocator);
        return cache;
    }

    pub fn deinit(cache: *TestCache) void {
        cache.tmp.cleanup();
        cache.arena.deinit();
    }

    /// The payload of sample `sample_id`, in `buffer`.
    pub fn payloadOf(cache: *const TestCache, sample_id: u64, buffer: []u8) []const u8 {
        const len: usize = cache.spec.payload_bytes + @as(usize, @intCast(sample_id % 4));
        for (buffer[0..len], 0..) |*byte, k| byte.* = @truncate(sample_id *% 7 +% k);
        return buffer[0..len];
    }

    /// Sample `sample_id`'s metadata row, in schema order.
    pub fn rowOf(
        cache: *const TestCache,
        sample_id: u64,
        values: []types.Value,
    ) []const types.Value {
        for (cache.columns, values[0..cache.columns.len]) |column, *value| {
            value.* = column.values.get(@intCast(sample_id));
        }
        return values[0..cache.columns.len];
    }

    /// Sample `sample_id`'s embedded JSON, as every record holds it.
    pub fn jsonOf(
        cache: *const TestCache,
        allocator: std.mem.Allocator,
        sample_id: u64,
    ) ![]u8 {
        var values: [2]types.Value = undefined;
        var out: std.ArrayList(u8) = .empty;
        errdefer out.deinit(allocator);
        try metadata_canonical.writeCanonical(
            allocator,
            cache.schema,
            cache.rowOf(sample_id, &values),
            &out,
        );
        return out.toOwnedSlice(allocator);
    }

    /// Sample `sample_id`'s index row.
    pub fn row(cache: *const TestCache, sample_id: u64) index_file.Row {
        return index_file.decodeRow(cache.index_bytes, sample_id);
    }

    /// Replaces sample `sample_id`'s index row, in memory and in index.bin.
    pub fn setRow(cache: *TestCache, sample_id: u64, new_row: index_file.Row) !void {
        const at: usize = @intCast(sample_id * index_file.row_bytes);
        index_file.encodeRow(new_row, cache.index_bytes[at..][0..index_file.row_bytes]);
        try cache.overwrite(
            cache_layout.index_file,
            at,
            cache.index_bytes[at..][0..index_file.row_bytes],
        );
    }

    /// Writes `bytes` over the file `name` (relative to the cache) at `offset`.
    pub fn overwrite(cache: *TestCache, name: []const u8, offset: u64, bytes: []const u8) !void {
        const io = system.io();
        var dir = try cache.tmp.dir.openDir(io, "cache", .{});
        defer dir.close(io);
        const file = try dir.openFile(io, name, .{ .mode = .read_write });
        defer file.close(io);
        try file.writePositionalAll(io, bytes, offset);
    }

    /// Writes `bytes` over sample `sample_id`'s record from `offset` in it.
    pub fn damageRecord(cache: *TestCache, sample_id: u64, offset: u64, bytes: []const u8) !void {
        const at = cache.row(sample_id);
        assert(offset + bytes.len <= at.record_len);
        var name_buffer: [64]u8 = undefined;
        const name = try std.fmt.bufPrint(
            &name_buffer,
            "{s}/{s}",
            .{ cache_layout.shards_dir, cache.shards[@intCast(at.shard_id)].name },
        );
        try cache.overwrite(name, at.offset + offset, bytes);
    }

    /// The cache directory, open; the caller closes it.
    pub fn openDir(cache: *const TestCache) !std.Io.Dir {
        return cache.tmp.dir.openDir(system.io(), "cache", .{});
    }

    fn buildMetadata(cache: *TestCache, allocator: std.mem.Allocator) !void {
        const count = cache.spec.sample_count;
        const i_field: types.Field = .{ .name = "i", .kind = cache.spec.i_kind };
        const label_field: types.Field = .{ .name = "label", .kind = .string };
        cache.schema = if (cache.spec.with_label)
            try allocator.dupe(types.Field, &.{ i_field, label_field })
        else
            try allocator.dupe(types.Field, &.{i_field});
        const columns = try allocator.alloc(types.Column, cache.schema.len);
        columns[0] = .{ .name = "i", .values = switch (cache.spec.i_kind) {
            .int => .{ .int = try intColumn(allocator, count) },
            .float => .{ .float = try floatColumn(allocator, count) },
            else => unreachable,
        } };
        if (cache.spec.with_label) {
            var offsets = try allocator.alloc(u64, count + 1);
            var bytes: std.ArrayList(u8) = .empty;
            offsets[0] = 0;
            for (0..count) |index| {
                try bytes.print(allocator, "s{d}", .{index});
                try bytes.appendNTimes(allocator, '.', cache.spec.label_pad);
                offsets[index + 1] = bytes.items.len;
            }
            columns[1] = .{
                .name = "label",
                .values = .{ .string = .{ .offsets = offsets, .bytes = bytes.items } },
            };
        }
        cache.columns = columns;
    }

    fn intColumn(allocator: std.mem.Allocator, count: u32) ![]i64 {
        const values = try allocator.alloc(i64, count);
        for (values, 0..) |*value, index| value.* = @intCast(index);
        return values;
    }

    fn floatColumn(allocator: std.mem.Allocator, count: u32) ![]f64 {
        const values = try allocator.alloc(f64, count);
        for (values, 0..) |*value, index| value.* = @floatFromInt(index);
        return values;
    }

    /// Frames every record into its shard file; fills the index and the checksums.
    fn writeShards(cache: *TestCache, allocator: std.mem.Allocator) !void {
        const spec = cache.spec;
        const shard_count = std.math.divCeil(u32, spec.sample_count, spec.records_per_shard) catch
            unreachable;
        const shards = try allocator.alloc(manifest.Shard, shard_count);
        cache.index_bytes = try allocator.alloc(u8, spec.sample_count * index_file.row_bytes);
        var checksums: std.ArrayList(u8) = .empty;
        var table: lz4.Table = .{};
        const payload_buffer = try allocator.alloc(u8, spec.payload_bytes + 3);
        for (shards, 0..) |*shard, shard_index| {
            var bytes: std.ArrayList(u8) = .empty;
            var payload_total: u64 = 0;
            const first = shard_index * spec.records_per_shard;
            const end = @min(first + spec.records_per_shard, spec.sample_count);
            for (first..end) |sample_id| {
                const payload = cache.payloadOf(sample_id, payload_buffer);
                const json = try cache.jsonOf(allocator, sample_id);
                const max = shard_record.encodedBytesMax(json.len, payload.len, spec.compression);
                try bytes.ensureUnusedCapacity(allocator, max);
                const offset = bytes.items.len;
                const len = shard_record.appendAssumeCapacity(
                    &bytes,
                    json,
                    payload,
                    spec.compression,
                    &table,
                );
                const at: usize = sample_id * index_file.row_bytes;
                index_file.encodeRow(
                    .{ .shard_id = shard_index, .offset = offset, .record_len = len },
                    cache.index_bytes[at..][0..index_file.row_bytes],
                );
                const checksum = record_checksums.ofRecord(bytes.items[offset..]);
                try record_checksums.append(allocator, &checksums, checksum);
                payload_total += payload.len;
            }
            shard.* = .{
                .name = try allocator.dupe(u8, cache_layout.ShardName.of(shard_index).slice()),
                .uncompressed_byte_len = payload_total,
                .byte_len = bytes.items.len,
                .compression = .{ .algo = switch (spec.compression) {
                    .none => .none,
                    .lz4 => .lz4,
                }, .ratio = if (spec.compression == .lz4) 0.5 else 1.0 },
                .sha256 = undefined, // by writeManifest
            };
            var name_buffer: [64]u8 = undefined;
            const name = try std.fmt.bufPrint(&name_buffer, "shards/{s}", .{shard.name});
            try cache.writeFile(name, bytes.items);
        }
        cache.shards = shards;
        if (spec.record_checksums) cache.checksum_bytes = checksums.items;
    }

    /// index.bin, records.crc32c, metadata.arrow and, last, manifest.json.
    fn writeTables(cache: *TestCache, allocator: std.mem.Allocator) !void {
        try cache.writeFile(cache_layout.index_file, cache.index_bytes);
        if (cache.checksum_bytes) |bytes| try cache.writeFile(
            cache_layout.record_checksums_file,
            bytes,
        );
        const metadata = try arrow_ipc_write.writeFile(
            allocator,
            cache.columns,
            cache.spec.sample_count,
        );
        try cache.writeFile(cache_layout.metadata_file, metadata);
        try cache.writeManifest();
    }

    /// Writes manifest.json from `shards` and the files' SHA-256s as they are
    /// now: after damage, a cache whose hashes all match, that only the
    /// record checks can refuse.
    pub fn writeManifest(cache: *TestCache) !void {
        const allocator = cache.arena.allocator();
        for (cache.shards) |*shard| {
            var name_buffer: [64]u8 = undefined;
            const name = try std.fmt.bufPrint(&name_buffer, "shards/{s}", .{shard.name});
            shard.sha256 = try cache.hashFile(name);
        }
        var listed_checksums: ?manifest.RecordChecksums = null;
        if (cache.checksum_bytes) |bytes| listed_checksums = .{
            .byte_len = bytes.len,
            .sha256 = try cache.hashFile(cache_layout.record_checksums_file),
        };
        const text = try manifest.write(allocator, .{
            .format_version = if (cache.spec.cache_id == null)
                manifest.format_version_oldest
            else
                manifest.format_version_with_cache_id,
            .cache_id = cache.spec.cache_id,
            .source_name = cache.spec.source_name,
            .sample_count = cache.spec.sample_count,
            .metadata_schema = cache.schema,
            .metadata_sha256 = try cache.hashFile(cache_layout.metadata_file),
            .index_sha256 = try cache.hashFile(cache_layout.index_file),
            .shards = cache.shards,
            .record_checksums = listed_checksums,
        });
        try cache.writeFile(cache_layout.manifest_file, text);
    }

    fn hashFile(cache: *TestCache, name: []const u8) ![sha256.digest_length]u8 {
        var dir = try cache.openDir();
        defer dir.close(system.io());
        const bytes = try file_status.readAlloc(std.testing.allocator, dir, name, 1 << 30);
        defer std.testing.allocator.free(bytes);
        return sha256.hash(bytes);
    }

    /// Replaces the file `name` (relative to the cache) with `bytes`.
    pub fn replaceFile(cache: *TestCache, name: []const u8, bytes: []const u8) !void {
        try cache.writeFile(name, bytes);
    }

    /// The bytes of the file `name` (relative to the cache); the caller frees them.
    pub fn readFile(cache: *const TestCache, name: []const u8) ![]u8 {
        var dir = try cache.openDir();
        defer dir.close(system.io());
        return file_status.readAlloc(std.testing.allocator, dir, name, 1 << 30);
    }

    fn writeFile(cache: *TestCache, name: []const u8, bytes: []const u8) !void {
        const io = system.io();
        var dir = try cache.tmp.dir.openDir(io, "cache", .{});
        defer dir.close(io);
        const file = try dir.createFile(io, name, .{ .truncate = true });
        defer file.close(io);
        try file.writePositionalAll(io, bytes, 0);
    }
};

test "a test cache is laid out as its spec says" {
    var cache = try TestCache.write(.{ .sample_count = 6, .records_per_shard = 4 });
    defer cache.deinit();
    try std.testing.expectEqual(@as(usize, 2), cache.shards.len);
    try std.testing.expectEqual(@as(u64, 1), cache.row(5).shard_id);
    const json = try cache.jsonOf(std.testing.allocator, 3);
    defer std.testing.allocator.free(json);
    try std.testing.expectEqualStrings("{\"i\":3,\"label\":\"s3\"}", json);
    try std.testing.expect(cache_layout.isPublished(cache.path));
}
