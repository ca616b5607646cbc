//! Tests of cache_reader.zig: what opening a cache checks (with and without
//! validation), how a failed read is named, and the deferred payload calls.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const crc32c = @import("../codec/crc32c.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const shard_record = @import("../format/shard_record.zig");
const column_builder = @import("../format/column_builder.zig");
const record_read = @import("record_read.zig");
const Cache = @import("cache_reader.zig").Cache;
const test_cache = @import("test_cache.zig");
const TestCache = test_cache.TestCache;

/// Opens `cache` and expects `err` with a message starting "cache <path>: "
/// and containing `phrase`.
fn expectOpenFailure(path: []const u8, validate: bool, err: anyerror, phrase: []const u8) !void {
    var diagnostic: Diagnostic = .{};
    try testing.expectError(err, Cache.open(testing.allocator, path, validate, &diagnostic));
    try expectMessage(&diagnostic, path, phrase);
}

fn expectMessage(diagnostic: *const Diagnostic, path: []const u8, phrase: []const u8) !void {
    const message = diagnostic.message();
    var prefix_buffer: [std.fs.max_path_bytes + 16]u8 = undefined;
    const prefix = try std.fmt.bufPrint(&prefix_buffer, "cache {s}: ", .{path});
    if (!std.mem.startsWith(u8, message, prefix) or std.mem.indexOf(u8, message, phrase) == null) {
        std.debug.print("message: {s}\nexpected: {s}...{s}\n", .{ message, prefix, phrase });
        return error.TestUnexpectedMessage;
    }
}

/// The lists one sample is read into.
const Sample = struct {
    scratch: record_read.Scratch = .{},
    payload: std.ArrayList(u8) = .empty,
    metadata_json: std.ArrayList(u8) = .empty,
    columns: []column_builder.ColumnBuilder = &.{},

    fn deinit(sample: *Sample) void {
        sample.scratch.deinit(testing.allocator);
        sample.payload.deinit(testing.allocator);
        sample.metadata_json.deinit(testing.allocator);
        column_builder.deinitAll(testing.allocator, sample.columns);
        testing.allocator.free(sample.columns);
    }

    fn read(
        sample: *Sample,
        cache: *const Cache,
        request: record_read.Request,
        diagnostic: *Diagnostic,
    ) !?record_read.PayloadLocation {
        if (sample.columns.len == 0) {
            sample.columns = try column_builder.initAll(testing.allocator, cache.schema());
        }
        const output: record_read.Output = .{
            .allocator = testing.allocator,
            .payload = &sample.payload,
            .metadata_json = &sample.metadata_json,
            .columns = sample.columns,
        };
        return cache.readSample(request, &sample.scratch, output, diagnostic);
    }
};

test "a valid cache opens, with and without validation, and reads every sample" {
    var written = try TestCache.write(.{ .compression = .lz4 });
    defer written.deinit();
    for ([_]bool{ false, true }) |validate| {
        var diagnostic: Diagnostic = .{};
        const cache = try Cache.open(testing.allocator, written.path, validate, &diagnostic);
        defer cache.close();
        try testing.expectEqual(@as(u64, 10), cache.sampleCount());
        try testing.expectEqual(@as(usize, 2), cache.schema().len);
        try testing.expect(cache.hasRecordChecksums());
        try testing.expectEqual(@as(u64, 3), cache.shards.count());
        var sample: Sample = .{};
        defer sample.deinit();
        for (0..10) |sample_id| {
            cache.prefetchSample(sample_id);
            cache.prefetchSampleStrings(sample_id);
            _ = try sample.read(cache, .{ .sample_id = sample_id }, &diagnostic);
        }
        var buffer: [64]u8 = undefined;
        const last = written.payloadOf(9, &buffer);
        try testing.expectEqualSlices(
            u8,
            last,
            sample.payload.items[sample.payload.items.len - last.len ..],
        );
        const located = cache.locate(9);
        try testing.expectEqualStrings("000002.bin", located.shard_name.?);
        try testing.expectEqual(written.row(9).offset, located.offset);
    }
}

test "the mean record length is the shards' bytes per sample" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    var total: u64 = 0;
    for (written.shards) |shard| total += shard.byte_len;
    try testing.expectEqual(total / 10, cache.meanRecordLen());
}

test "a failed read names the cache, the shard, the sample and its offset" {
    var written = try TestCache.write(.{ .record_checksums = false });
    defer written.deinit();
    try written.damageRecord(5, shard_record.header_bytes + 5, "6");
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    var sample: Sample = .{};
    defer sample.deinit();
    try testing.expectError(
        error.InvalidCache,
        sample.read(cache, .{ .sample_id = 5 }, &diagnostic),
    );
    var phrase_buffer: [64]u8 = undefined;
    const phrase = try std.fmt.bufPrint(
        &phrase_buffer,
        "shards/000001.bin: sample 5 at offset {d}: ",
        .{written.row(5).offset},
    );
    try expectMessage(&diagnostic, written.path, phrase);
}

test "a read of a row naming no shard names index.bin and the sample" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    try written.setRow(2, .{ .shard_id = 9, .offset = 0, .record_len = 1 });
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    try testing.expectEqual(@as(?[]const u8, null), cache.locate(2).shard_name);
    var sample: Sample = .{};
    defer sample.deinit();
    try testing.expectError(
        error.InvalidCache,
        sample.read(cache, .{ .sample_id = 2 }, &diagnostic),
    );
    try expectMessage(
        &diagnostic,
        written.path,
        "index.bin: sample 2: index.bin row 2 names shard 9",
    );
}

test "opening refuses a missing directory, manifest or shards directory" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var dir = try written.openDir();
    defer dir.close(system.io());
    try dir.deleteTree(system.io(), "shards");
    try expectOpenFailure(
        written.path,
        false,
        error.InvalidCache,
        "cannot open the shards directory",
    );
    try dir.deleteFile(system.io(), cache_layout.manifest_file);
    try expectOpenFailure(
        written.path,
        false,
        error.InvalidCache,
        "missing manifest: cannot read manifest.json",
    );
    const missing = "/nonexistent/dataset_rt/cache";
    const phrase = "missing manifest: cannot open the cache directory";
    try expectOpenFailure(missing, false, error.InvalidCache, phrase);
}

test "opening refuses a manifest that is not a manifest" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    try written.replaceFile(cache_layout.manifest_file, "{\"format_version\": 2,");
    try expectOpenFailure(written.path, false, error.InvalidCache, "manifest.json: JSON error: ");
}

test "opening refuses index.bin or records.crc32c of the wrong length" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    try written.replaceFile(cache_layout.record_checksums_file, "abc");
    try expectOpenFailure(
        written.path,
        false,
        error.InvalidCache,
        "record checksum count does not match manifest: records.crc32c has 3 bytes, " ++
            "expected 40 (4 per sample for 10 samples)",
    );
    try written.replaceFile(cache_layout.index_file, written.index_bytes[0..24]);
    try expectOpenFailure(
        written.path,
        false,
        error.InvalidCache,
        "index row count does not match manifest: index.bin has 24 bytes, expected 240",
    );
}

test "opening refuses a metadata.arrow whose rows, columns or kinds differ from the manifest" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    const cases = [_]struct { spec: test_cache.Spec, phrase: []const u8 }{
        .{
            .spec = .{ .sample_count = 9 },
            .phrase = "metadata.arrow has 9 rows but the manifest says 10",
        },
        .{ .spec = .{ .with_label = false }, .phrase = "metadata.arrow has no column 'label'" },
        .{
            .spec = .{ .i_kind = .float },
            .phrase = "column 'i' is float but the manifest says int",
        },
    };
    for (cases) |case| {
        var other = try TestCache.write(case.spec);
        defer other.deinit();
        const bytes = try other.readFile(cache_layout.metadata_file);
        defer testing.allocator.free(bytes);
        try written.replaceFile(cache_layout.metadata_file, bytes);
        try expectOpenFailure(written.path, false, error.InvalidCache, case.phrase);
    }
    var narrow = try TestCache.write(.{ .with_label = false });
    defer narrow.deinit();
    var full = try TestCache.write(.{});
    defer full.deinit();
    const bytes = try full.readFile(cache_layout.metadata_file);
    defer testing.allocator.free(bytes);
    try narrow.replaceFile(cache_layout.metadata_file, bytes);
    try expectOpenFailure(
        narrow.path,
        false,
        error.InvalidCache,
        "a column 'label' that the manifest schema does not list",
    );
}

test "opening refuses a missing shard or one of another length" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    const listed_len = written.shards[2].byte_len;
    try written.overwrite("shards/000002.bin", listed_len, "x");
    var phrase_buffer: [128]u8 = undefined;
    const phrase = try std.fmt.bufPrint(
        &phrase_buffer,
        "shard length mismatch: shards/000002.bin has {d} bytes but the manifest says {d}",
        .{ listed_len + 1, listed_len },
    );
    try expectOpenFailure(written.path, false, error.InvalidCache, phrase);
    var dir = try written.openDir();
    defer dir.close(system.io());
    try dir.deleteFile(system.io(), "shards/000001.bin");
    try expectOpenFailure(written.path, false, error.InvalidCache, "cannot open shards/000001.bin");
}

test "validation checks every file's SHA-256" {
    const names = [_][]const u8{
        "shards/000001.bin",
        "records.crc32c",
        "index.bin",
        "metadata.arrow",
    };
    for (names, 0..) |name, index| {
        var written = try TestCache.write(.{});
        defer written.deinit();
        const bytes = try written.readFile(name);
        defer testing.allocator.free(bytes);
        bytes[bytes.len - 1] ^= 1;
        try written.overwrite(name, 0, bytes);
        var diagnostic: Diagnostic = .{};
        // Damage to a shard or to records.crc32c is found by reads, not by opening.
        if (index < 2) {
            const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
            cache.close();
        }
        var phrase_buffer: [128]u8 = undefined;
        const phrase = try std.fmt.bufPrint(
            &phrase_buffer,
            "checksum mismatch: {s}: SHA-256",
            .{name},
        );
        try expectOpenFailure(written.path, true, error.InvalidCache, phrase);
    }
}

test "validation checks each record's framing and the shards' payload totals" {
    var written = try TestCache.write(.{ .record_checksums = false });
    defer written.deinit();
    written.shards[1].uncompressed_byte_len += 1;
    try written.writeManifest();
    try expectOpenFailure(
        written.path,
        true,
        error.InvalidCache,
        "shards/000001.bin: payloads add up to 70 bytes " ++
            "but the manifest says uncompressed_byte_len 71",
    );
    written.shards[1].uncompressed_byte_len -= 1;
    var header: [8]u8 = undefined;
    std.mem.writeInt(u64, &header, 500, .little);
    try written.damageRecord(6, 0, &header);
    try written.writeManifest();
    var phrase_buffer: [128]u8 = undefined;
    const phrase = try std.fmt.bufPrint(
        &phrase_buffer,
        "shards/000001.bin: sample 6 at offset {d}: record metadata length 500",
        .{written.row(6).offset},
    );
    try expectOpenFailure(written.path, true, error.InvalidCache, phrase);
    var row = written.row(3);
    row.record_len -= 1;
    try written.setRow(3, row);
    try written.writeManifest();
    try expectOpenFailure(
        written.path,
        true,
        error.InvalidCache,
        "index.bin row 3 is the last of shard 0",
    );
}

test "a deferred payload is read, checked and mapped where it lies" {
    var written = try TestCache.write(.{ .payload_bytes = 300 });
    defer written.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    var sample: Sample = .{};
    defer sample.deinit();
    const request: record_read.Request = .{ .sample_id = 7, .defer_payload_bytes = 256 };
    const location = (try sample.read(cache, request, &diagnostic)).?;
    cache.prefetchPayload(location);
    var expected_buffer: [512]u8 = undefined;
    const expected = written.payloadOf(7, &expected_buffer);
    var bytes: [512]u8 = undefined;
    const destination = bytes[0..@intCast(location.len)];
    try cache.readPayload(location, destination, &diagnostic);
    try testing.expectEqualSlices(u8, expected, destination);
    const checksum = try cache.readPayloadChecksummed(location, destination, &diagnostic);
    try testing.expectEqual(crc32c.checksum(expected), checksum);
    try cache.checkPayload(location, checksum, &diagnostic);
    const mapped = try cache.mappedPayload(location, &diagnostic);
    try testing.expectEqualSlices(u8, expected, mapped.bytes);
    // A span of it, as the consumer reads it in pieces.
    var span = location;
    span.offset += 10;
    span.len = 20;
    try cache.readPayload(span, bytes[0..20], &diagnostic);
    try testing.expectEqualSlices(u8, expected[10..30], bytes[0..20]);
}

test "a damaged deferred payload fails its check, read or mapped, naming the sample" {
    var written = try TestCache.write(.{ .payload_bytes = 300 });
    defer written.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    var sample: Sample = .{};
    defer sample.deinit();
    const request: record_read.Request = .{ .sample_id = 6, .defer_payload_bytes = 256 };
    const location = (try sample.read(cache, request, &diagnostic)).?;
    try written.damageRecord(6, written.row(6).record_len - 3, "\x00\x01\x02");
    var bytes: [512]u8 = undefined;
    const destination = bytes[0..@intCast(location.len)];
    const checksum = try cache.readPayloadChecksummed(location, destination, &diagnostic);
    try testing.expectError(
        error.InvalidCache,
        cache.checkPayload(location, checksum, &diagnostic),
    );
    try expectMessage(&diagnostic, written.path, "sample 6 at offset");
    diagnostic = .{};
    try testing.expectError(error.InvalidCache, cache.mappedPayload(location, &diagnostic));
    try expectMessage(&diagnostic, written.path, "record checksum mismatch");
}
