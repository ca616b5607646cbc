//! Tests of record_read.zig: both read paths, the run read-ahead, and every way
//! a record can fail its checks, on caches laid out by `test_cache.zig` and read
//! through a `ShardSource` and `Records` made here, without a `Cache`.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const crc32c = @import("../codec/crc32c.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const column_builder = @import("../format/column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const record_read = @import("record_read.zig");
const ShardSource = @import("shard_source.zig").ShardSource;
const open_shards = @import("open_shards.zig");
const test_cache = @import("test_cache.zig");
const TestCache = test_cache.TestCache;

/// A test cache, its shards open, and the lists a read appends to.
const Reader = struct {
    cache: TestCache,
    shards: ShardSource,
    records: record_read.Records,
    scratch: record_read.Scratch = .{},
    payload: std.ArrayList(u8) = .empty,
    metadata_json: std.ArrayList(u8) = .empty,
    columns: []ColumnBuilder,
    diagnostic: Diagnostic = .{},

    fn create(spec: test_cache.Spec) !*Reader {
        const allocator = testing.allocator;
        const reader = try allocator.create(Reader);
        errdefer allocator.destroy(reader);
        reader.* = .{
            .cache = try TestCache.write(spec),
            .shards = undefined,
            .records = undefined,
            .columns = &.{},
        };
        errdefer reader.cache.deinit();
        try reader.openShards();
        errdefer reader.shards.close();
        reader.records = reader.recordsOf();
        reader.columns = try column_builder.initAll(allocator, reader.cache.schema);
        return reader;
    }

    fn openShards(reader: *Reader) !void {
        var dir = try reader.cache.openDir();
        defer dir.close(system.io());
        var diagnostic: Diagnostic = .{};
        reader.shards = try .open(
            testing.allocator,
            &open_shards.process,
            dir,
            reader.cache.path,
            reader.cache.shards,
            false,
            null,
            &diagnostic,
        );
    }

    fn recordsOf(reader: *Reader) record_read.Records {
        const cache = &reader.cache;
        return .{
            .index_bytes = cache.index_bytes,
            .sample_count = cache.spec.sample_count,
            .checksum_bytes = cache.checksum_bytes,
            .schema = cache.schema,
            .columns = cache.columns,
            .shards = &reader.shards,
        };
    }

    fn destroy(reader: *Reader) void {
        const allocator = testing.allocator;
        reader.scratch.deinit(allocator);
        reader.payload.deinit(allocator);
        reader.metadata_json.deinit(allocator);
        column_builder.deinitAll(allocator, reader.columns);
        allocator.free(reader.columns);
        reader.shards.close();
        reader.cache.deinit();
        allocator.destroy(reader);
    }

    /// Damages sample `sample_id`'s record (`TestCache.damageRecord`); the
    /// next read reads it again, not a run read before.
    fn damage(reader: *Reader, sample_id: u64, offset: u64, bytes: []const u8) !void {
        try reader.cache.damageRecord(sample_id, offset, bytes);
        reader.scratch.run_records = null;
    }

    fn output(reader: *Reader) record_read.Output {
        return .{
            .allocator = testing.allocator,
            .payload = &reader.payload,
            .metadata_json = &reader.metadata_json,
            .columns = reader.columns,
        };
    }

    fn read(reader: *Reader, request: record_read.Request) !?record_read.PayloadLocation {
        reader.diagnostic = .{};
        return record_read.read(
            &reader.records,
            request,
            &reader.scratch,
            reader.output(),
            &reader.diagnostic,
        );
    }

    /// Reads `request` and expects `err` with a message containing `phrase`;
    /// the outputs stay as they were.
    fn expectFailure(
        reader: *Reader,
        request: record_read.Request,
        err: anyerror,
        phrase: []const u8,
    ) !void {
        const payload_len = reader.payload.items.len;
        const metadata_len = reader.metadata_json.items.len;
        const rows = reader.columns[0].rowCount();
        try testing.expectError(err, reader.read(request));
        if (std.mem.indexOf(u8, reader.diagnostic.message(), phrase) == null) {
            std.debug.print(
                "message: {s}\nexpected: {s}\n",
                .{ reader.diagnostic.message(), phrase },
            );
            return error.TestUnexpectedMessage;
        }
        try testing.expectEqual(payload_len, reader.payload.items.len);
        try testing.expectEqual(metadata_len, reader.metadata_json.items.len);
        for (reader.columns) |*column| try testing.expectEqual(rows, column.rowCount());
    }

    /// Checks that the last sample appended is `sample_id`: its payload (unless
    /// deferred), its JSON and its row.
    fn expectLast(reader: *Reader, sample_id: u64, payload_start: usize, json_start: usize) !void {
        var buffer: [1 << 17]u8 = undefined;
        const expected_payload = reader.cache.payloadOf(sample_id, &buffer);
        try testing.expectEqualSlices(u8, expected_payload, reader.payload.items[payload_start..]);
        try reader.expectLastMetadata(sample_id, json_start);
    }

    fn expectLastMetadata(reader: *Reader, sample_id: u64, json_start: usize) !void {
        const json = try reader.cache.jsonOf(testing.allocator, sample_id);
        defer testing.allocator.free(json);
        try testing.expectEqualStrings(json, reader.metadata_json.items[json_start..]);
        const ints = reader.columns[0].int.items;
        try testing.expectEqual(@as(i64, @intCast(sample_id)), ints[ints.len - 1]);
    }

    /// Reads every sample in `order`, each with the samples after it as its
    /// run when `ordered`, and checks what each appends.
    fn readAll(reader: *Reader, order: []const u64, ordered: bool) !void {
        for (order, 0..) |sample_id, position| {
            const payload_start = reader.payload.items.len;
            const json_start = reader.metadata_json.items.len;
            const run: u64 = if (ordered) order.len - position else 1;
            const request: record_read.Request = .{ .sample_id = sample_id, .run_samples = run };
            try testing.expectEqual(
                @as(?record_read.PayloadLocation, null),
                try reader.read(request),
            );
            try reader.expectLast(sample_id, payload_start, json_start);
        }
        try testing.expectEqual(order.len, reader.columns[0].rowCount());
    }
};

const shuffled = [_]u64{ 7, 2, 9, 0, 5, 3, 8, 1, 6, 4 };
const in_order = [_]u64{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };

test "whole records read back in order and shuffled, raw and lz4" {
    for ([_]shard_record.Compression{ .none, .lz4 }) |compression| {
        for ([_]bool{ true, false }) |ordered| {
            const reader = try Reader.create(.{ .compression = compression });
            defer reader.destroy();
            try reader.readAll(if (ordered) &in_order else &shuffled, ordered);
        }
    }
}

test "caches without record checksums read the same" {
    const reader = try Reader.create(.{ .record_checksums = false });
    defer reader.destroy();
    try reader.readAll(&shuffled, false);
}

test "an ordered pass reads the records after a sample with it, up to its shard's end" {
    const reader = try Reader.create(.{ .sample_count = 10, .records_per_shard = 4 });
    defer reader.destroy();
    _ = try reader.read(.{ .sample_id = 1, .run_samples = 9 });
    // Samples 1, 2 and 3: the rest of shard 0, not sample 4 in shard 1.
    const first = reader.cache.row(1);
    const last = reader.cache.row(3);
    try testing.expectEqual(&reader.records, reader.scratch.run_records.?);
    try testing.expectEqual(first.offset, reader.scratch.run_offset);
    try testing.expectEqual(
        last.offset + last.record_len - first.offset,
        reader.scratch.run.items.len,
    );
    // The next two come from the run: no read, so a damaged shard goes unseen.
    try reader.cache.damageRecord(2, 0, "\xff");
    const json_start = reader.metadata_json.items.len;
    _ = try reader.read(.{ .sample_id = 2, .run_samples = 8 });
    try reader.expectLastMetadata(2, json_start);
    _ = try reader.read(.{ .sample_id = 4, .run_samples = 6 });
    try testing.expectEqual(@as(u64, 1), reader.scratch.run_shard);
}

test "a run stops at run_bytes_max" {
    // Records of 60 KiB: whole-record reads, 17 of them in 1 MiB.
    const reader = try Reader.create(.{
        .sample_count = 20,
        .records_per_shard = 20,
        .payload_bytes = 60 << 10,
    });
    defer reader.destroy();
    _ = try reader.read(.{ .sample_id = 0, .run_samples = 20 });
    const run_len = reader.scratch.run.items.len;
    try testing.expect(run_len <= record_read.run_bytes_max);
    try testing.expect(run_len + reader.cache.row(17).record_len > record_read.run_bytes_max);
    try testing.expectEqual(reader.cache.row(17).offset, run_len);
}

test "a large raw payload is read direct, straight into the output" {
    const reader = try Reader.create(.{ .sample_count = 3, .payload_bytes = 70 << 10 });
    defer reader.destroy();
    try reader.readAll(&.{ 2, 0, 1 }, false);
    // The scratch held the head only, never a run of records.
    try testing.expectEqual(@as(?*const record_read.Records, null), reader.scratch.run_records);
    try testing.expect(reader.scratch.run.capacity < 70 << 10);
}

test "a payload at the deferral size stays in its shard, and its place is returned" {
    const reader = try Reader.create(.{ .payload_bytes = 100 });
    defer reader.destroy();
    const location = (try reader.read(.{ .sample_id = 5, .defer_payload_bytes = 64 })).?;
    try testing.expectEqual(@as(usize, 0), reader.payload.items.len);
    try reader.expectLastMetadata(5, 0);
    const row = reader.cache.row(5);
    try testing.expectEqual(@as(u64, 101), location.len);
    try testing.expectEqual(row.offset + row.record_len, location.offset + location.len);
    // Its bytes in the shard are the payload, with the checksum the location says.
    const bytes = try testing.allocator.alloc(u8, @intCast(location.len));
    defer testing.allocator.free(bytes);
    var diagnostic: Diagnostic = .{};
    try reader.shards.readExactly(location.shard_id, bytes, location.offset, &diagnostic);
    var buffer: [256]u8 = undefined;
    try testing.expectEqualSlices(u8, reader.cache.payloadOf(5, &buffer), bytes);
    try testing.expectEqual(crc32c.checksum(bytes), location.checksum.?);
}

test "a payload under the deferral size in a record over it is read direct" {
    const reader = try Reader.create(.{ .payload_bytes = 16 });
    defer reader.destroy();
    // Records of about 45 bytes: over 30, so read direct; payloads of 16 to 19 bytes.
    for (shuffled) |sample_id| {
        const payload_start = reader.payload.items.len;
        const json_start = reader.metadata_json.items.len;
        const request: record_read.Request = .{ .sample_id = sample_id, .defer_payload_bytes = 30 };
        try testing.expectEqual(@as(?record_read.PayloadLocation, null), try reader.read(request));
        try reader.expectLast(sample_id, payload_start, json_start);
    }
}

test "metadata longer than a record's head is read with the whole record" {
    const reader = try Reader.create(.{ .sample_count = 3, .label_pad = 9000 });
    defer reader.destroy();
    const location = try reader.read(.{ .sample_id = 1, .defer_payload_bytes = 8 });
    try testing.expectEqual(@as(?record_read.PayloadLocation, null), location);
    try reader.expectLast(1, 0, 0);
}

test "an index row that names no listed shard is refused" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    var row = reader.cache.row(3);
    row.shard_id = 7;
    try reader.cache.setRow(3, row);
    try reader.expectFailure(.{ .sample_id = 3 }, error.InvalidCache, "names shard 7");
}

test "an index row past its shard's end is refused before any read" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    var row = reader.cache.row(3);
    row.record_len += 1;
    try reader.cache.setRow(3, row);
    try reader.expectFailure(.{ .sample_id = 3 }, error.InvalidCache, "extends past the end");
    row = reader.cache.row(1);
    row.offset = std.math.maxInt(u64) - 2;
    try reader.cache.setRow(1, row);
    try reader.expectFailure(.{ .sample_id = 1 }, error.InvalidCache, "extends past the end");
}

test "an index row that leaves a gap before the next record is refused" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    var row = reader.cache.row(1);
    row.record_len -= 1;
    try reader.cache.setRow(1, row);
    try reader.expectFailure(.{ .sample_id = 1 }, error.InvalidCache, "but row 2 starts at");
}

test "a record past the end of a shard shortened since it was opened is refused" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    const io = system.io();
    var dir = try reader.cache.openDir();
    defer dir.close(io);
    const file = try dir.openFile(io, "shards/000000.bin", .{ .mode = .read_write });
    defer file.close(io);
    try file.setLength(io, reader.cache.row(2).offset + 3);
    for ([_]u64{ 8, 0 }) |defer_bytes| {
        const request: record_read.Request = .{
            .sample_id = 3,
            .defer_payload_bytes = defer_bytes,
        };
        try reader.expectFailure(request, error.InvalidCache, "shard 0 ended after 0 of");
    }
}

test "a metadata length past the record is refused on both paths" {
    const reader = try Reader.create(.{ .record_checksums = false });
    defer reader.destroy();
    var header: [8]u8 = undefined;
    std.mem.writeInt(u64, &header, 1000, .little);
    try reader.damage(4, 0, &header);
    const phrase = "record metadata length 1000 exceeds the record";
    try reader.expectFailure(.{ .sample_id = 4 }, error.InvalidCache, phrase);
    try reader.expectFailure(
        .{ .sample_id = 4, .defer_payload_bytes = 8 },
        error.InvalidCache,
        phrase,
    );
}

test "a record shorter than its header is refused on both paths" {
    const reader = try Reader.create(.{ .record_checksums = false });
    defer reader.destroy();
    const first = reader.cache.row(0);
    const second = reader.cache.row(1);
    try reader.cache.setRow(0, .{ .shard_id = 0, .offset = 0, .record_len = 5 });
    try reader.cache.setRow(1, .{
        .shard_id = 0,
        .offset = 5,
        .record_len = first.record_len + second.record_len - 5,
    });
    const phrase = "record of 5 bytes is shorter than its 8-byte header";
    try reader.expectFailure(.{ .sample_id = 0 }, error.InvalidCache, phrase);
    try reader.expectFailure(
        .{ .sample_id = 0, .defer_payload_bytes = 1 },
        error.InvalidCache,
        phrase,
    );
}

test "a damaged record fails its checksum on every path" {
    const reader = try Reader.create(.{ .payload_bytes = 100 });
    defer reader.destroy();
    _ = try reader.read(.{ .sample_id = 0 });
    const row = reader.cache.row(6);
    try reader.damage(6, row.record_len - 1, "\x00");
    const phrase = "record checksum mismatch";
    try reader.expectFailure(.{ .sample_id = 6 }, error.InvalidCache, phrase);
    // Direct: the payload read into the output, then checked.
    try reader.expectFailure(
        .{ .sample_id = 6, .defer_payload_bytes = 110 },
        error.InvalidCache,
        phrase,
    );
    // Deferred: the location carries the checksum the caller checks the bytes against.
    const location = (try reader.read(.{ .sample_id = 6, .defer_payload_bytes = 64 })).?;
    const bytes = try testing.allocator.alloc(u8, @intCast(location.len));
    defer testing.allocator.free(bytes);
    var diagnostic: Diagnostic = .{};
    try reader.shards.readExactly(location.shard_id, bytes, location.offset, &diagnostic);
    try testing.expect(crc32c.checksum(bytes) != location.checksum.?);
}

test "a damaged lz4 record is refused: a block that does not decode, a prefix it cannot reach" {
    const reader = try Reader.create(.{ .compression = .lz4, .record_checksums = false });
    defer reader.destroy();
    const json = try reader.cache.jsonOf(testing.allocator, 2);
    defer testing.allocator.free(json);
    const prefix_at = shard_record.header_bytes + json.len;
    var prefix: [4]u8 = undefined;
    std.mem.writeInt(u32, &prefix, 16 + 2 + 1, .little);
    try reader.damage(2, prefix_at, &prefix);
    try reader.expectFailure(.{ .sample_id = 2 }, error.InvalidCache, "corrupt lz4 block");
    std.mem.writeInt(u32, &prefix, std.math.maxInt(u32), .little);
    try reader.damage(2, prefix_at, &prefix);
    try reader.expectFailure(
        .{ .sample_id = 2 },
        error.InvalidCache,
        "claims 4294967295 decoded bytes",
    );
    // An lz4 record with no room for its prefix.
    const row = reader.cache.row(2);
    var header: [8]u8 = undefined;
    std.mem.writeInt(u64, &header, row.record_len - 8 - 2, .little);
    try reader.damage(2, 0, &header);
    try reader.expectFailure(
        .{ .sample_id = 2 },
        error.InvalidCache,
        "no room for its 4-byte length prefix",
    );
}

test "embedded JSON that differs from the metadata.arrow row is refused on both paths" {
    const reader = try Reader.create(.{ .record_checksums = false });
    defer reader.destroy();
    // {"i":3,... becomes {"i":4,...
    try reader.damage(3, shard_record.header_bytes + 5, "4");
    try reader.expectFailure(.{ .sample_id = 3 }, error.InvalidCache, "'i'");
    try reader.expectFailure(
        .{ .sample_id = 3, .defer_payload_bytes = 8 },
        error.InvalidCache,
        "'i'",
    );
}

test "a shard that cannot be read is an I/O error" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    const io = system.io();
    var dir = try reader.cache.openDir();
    defer dir.close(io);
    // Its open file swapped for one open for writing only: every read of it fails.
    const handle = &reader.shards.handles[1];
    _ = try reader.shards.pin(1, &reader.diagnostic);
    handle.file.close(io);
    handle.file = try dir.openFile(io, "shards/000001.bin", .{ .mode = .write_only });
    reader.shards.unpin(1);
    try reader.expectFailure(.{ .sample_id = 5 }, error.Io, "I/O error: cannot read shard 1");
    try reader.expectFailure(
        .{ .sample_id = 5, .defer_payload_bytes = 8 },
        error.Io,
        "cannot read shard 1",
    );
    _ = try reader.read(.{ .sample_id = 0 });
}

test "a failed read leaves the outputs as they were, after samples read before it" {
    const reader = try Reader.create(.{ .record_checksums = false });
    defer reader.destroy();
    try reader.readAll(&.{ 1, 2 }, false);
    try reader.damage(3, shard_record.header_bytes + 5, "4");
    // Fails in the metadata check, after the record was read and split.
    try reader.expectFailure(.{ .sample_id = 3 }, error.InvalidCache, "'i'");
    try testing.expectEqual(@as(usize, 2), reader.columns[1].rowCount());
}

test "payloadLen reads a record's decoded length from its header, raw and lz4" {
    for ([_]shard_record.Compression{ .none, .lz4 }) |compression| {
        const reader = try Reader.create(.{ .compression = compression });
        defer reader.destroy();
        for (0..10) |sample_id| {
            var diagnostic: Diagnostic = .{};
            const row = try reader.records.checkedRow(sample_id, &diagnostic);
            const len = try reader.records.payloadLen(row, &diagnostic);
            try testing.expectEqual(16 + sample_id % 4, len);
        }
    }
}

test "payloadLen refuses a header or prefix that does not fit the record" {
    const reader = try Reader.create(.{ .compression = .lz4, .record_checksums = false });
    defer reader.destroy();
    var diagnostic: Diagnostic = .{};
    const row = reader.cache.row(1);
    var header: [8]u8 = undefined;
    std.mem.writeInt(u64, &header, row.record_len, .little);
    try reader.damage(1, 0, &header);
    try testing.expectError(error.InvalidCache, reader.records.payloadLen(row, &diagnostic));
    std.mem.writeInt(u64, &header, row.record_len - 8 - 3, .little);
    try reader.damage(1, 0, &header);
    try testing.expectError(error.InvalidCache, reader.records.payloadLen(row, &diagnostic));
    try testing.expect(std.mem.indexOf(u8, diagnostic.message(), "no room") != null);
    const short: index_file.Row = .{ .shard_id = 0, .offset = 0, .record_len = 7 };
    try testing.expectError(error.InvalidCache, reader.records.payloadLen(short, &diagnostic));
}

test "prefetching every sample reads nothing and changes nothing" {
    const reader = try Reader.create(.{});
    defer reader.destroy();
    for (0..10) |sample_id| {
        reader.records.prefetch(sample_id);
        reader.records.prefetchStrings(sample_id);
    }
    try reader.readAll(&shuffled, false);
}

test "recordChecksum is the records.crc32c entry, or null without the file" {
    const with = try Reader.create(.{});
    defer with.destroy();
    const row = with.cache.row(4);
    var bytes: [256]u8 = undefined;
    var diagnostic: Diagnostic = .{};
    const record = bytes[0..@intCast(row.record_len)];
    try with.shards.readExactly(row.shard_id, record, row.offset, &diagnostic);
    try testing.expectEqual(crc32c.checksum(record), with.records.recordChecksum(4).?);
    const without = try Reader.create(.{ .record_checksums = false });
    defer without.destroy();
    try testing.expectEqual(@as(?u32, null), without.records.recordChecksum(4));
}
