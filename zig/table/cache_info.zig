//! A cache described from its manifest alone (`drt_cache_info`; `dataset-rt info`
//! and `ls`): what it holds and how it is stored. The manifest is read and checked
//! exactly as the reader reads it; the index, the metadata and the shards are not
//! opened, so describing a cache costs one small file read.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const error_words = @import("../base/error_words.zig");
const file_status = @import("../base/file_status.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const sha256 = @import("../codec/sha256.zig");
const manifest = @import("../format/manifest.zig");
const metadata_canonical = @import("../format/metadata_canonical.zig");
const metadata_types = @import("../format/metadata_types.zig");
const cache_reader = @import("../read/cache_reader.zig");

pub const Error = cache_reader.Error;

/// The description of the cache at `path`, a JSON object (docs/c-abi.md,
/// `drt_cache_info`). A missing or invalid manifest fails with the reader's
/// status and message, prefixed with `cache <path>: `. The caller owns the text.
pub fn describe(
    allocator: std.mem.Allocator,
    path: []const u8,
    diagnostic: *Diagnostic,
) Error![]u8 {
    var parsed = readManifest(allocator, path, diagnostic) catch |err| {
        if (err == error.OutOfMemory and diagnostic.len == 0) {
            diagnostic.set("out of memory while reading the manifest", .{});
        }
        diagnostic.prefix("cache {s}: ", .{path});
        return err;
    };
    defer parsed.deinit();
    return render(allocator, parsed.manifest);
}

fn readManifest(
    allocator: std.mem.Allocator,
    path: []const u8,
    diagnostic: *Diagnostic,
) Error!manifest.Parsed {
    const io = system.io();
    var dir = std.Io.Dir.cwd().openDir(io, path, .{}) catch |err| {
        // The reader's phrases for a cache directory that does not open.
        const missing = file_status.missing(err);
        const phrase = if (missing) "missing manifest" else "I/O error";
        const words = error_words.of(err);
        diagnostic.set("{s}: cannot open the cache directory: {f}", .{ phrase, words });
        return if (missing) error.InvalidCache else error.Io;
    };
    defer dir.close(io);
    var digest: [sha256.digest_length]u8 = undefined;
    return cache_reader.Cache.readManifest(allocator, dir, &digest, diagnostic);
}

/// The description of a cache whose manifest is `the_manifest`:
/// `{"format_version", "cache_id", "source_name", "sample_count", "shard_count",
/// "shard_bytes", "payload_bytes_uncompressed", "compression", "record_checksums",
/// "metadata_schema"}`; `cache_id` is null in format 2.
pub fn render(
    allocator: std.mem.Allocator,
    the_manifest: manifest.Manifest,
) error{OutOfMemory}![]u8 {
    // What `manifest.parse` promises of every manifest it returns.
    assert(manifest.versionSupported(the_manifest.format_version));
    assert(metadata_types.isSortedUnique(the_manifest.metadata_schema));
    // Wider than any one length: a manifest's lengths may add up past 2^64 - 1.
    var shard_bytes: u128 = 0;
    var payload_bytes: u128 = 0;
    for (the_manifest.shards) |shard| {
        shard_bytes += shard.byte_len;
        payload_bytes += shard.uncompressed_byte_len;
    }
    var out: std.ArrayList(u8) = .empty;
    errdefer out.deinit(allocator);
    try out.print(allocator, "{{\"format_version\":{d},\"cache_id\":", .{
        the_manifest.format_version,
    });
    if (the_manifest.cache_id) |cache_id| {
        try out.print(allocator, "{d}", .{cache_id});
    } else {
        try out.appendSlice(allocator, "null");
    }
    try out.appendSlice(allocator, ",\"source_name\":");
    try metadata_canonical.appendJsonString(allocator, &out, the_manifest.source_name);
    try out.print(allocator, ",\"sample_count\":{d},\"shard_count\":{d},\"shard_bytes\":{d}", .{
        the_manifest.sample_count, the_manifest.shards.len, shard_bytes,
    });
    try out.print(allocator, ",\"payload_bytes_uncompressed\":{d}", .{payload_bytes});
    try out.appendSlice(allocator, ",\"compression\":");
    try writeCompressions(allocator, &out, the_manifest.shards);
    const checksums = if (the_manifest.record_checksums == null) "false" else "true";
    try out.print(allocator, ",\"record_checksums\":{s},\"metadata_schema\":", .{checksums});
    const schema = try metadata_types.schemaJson(allocator, the_manifest.metadata_schema);
    defer allocator.free(schema);
    try out.appendSlice(allocator, schema);
    try out.append(allocator, '}');
    assert(out.items[0] == '{' and std.mem.endsWith(u8, out.items, "]}"));
    return out.toOwnedSlice(allocator);
}

/// The shards' distinct compression settings, `[{"algo": ..., "ratio": ...}, ...]`,
/// ordered by algo name, then by ratio.
fn writeCompressions(
    allocator: std.mem.Allocator,
    out: *std.ArrayList(u8),
    shards: []const manifest.Shard,
) error{OutOfMemory}!void {
    const settings = try allocator.alloc(manifest.Compression, shards.len);
    defer allocator.free(settings);
    for (settings, shards) |*setting, shard| setting.* = shard.compression;
    std.mem.sort(manifest.Compression, settings, {}, compressionLessThan);
    try out.append(allocator, '[');
    for (settings, 0..) |setting, index| {
        assert(manifest.compressionProblem(setting) == null);
        if (index > 0 and !compressionLessThan({}, settings[index - 1], setting)) continue;
        if (out.items[out.items.len - 1] != '[') try out.append(allocator, ',');
        var ratio_buffer: [metadata_canonical.float_bytes_max]u8 = undefined;
        try out.print(allocator, "{{\"algo\":\"{s}\",\"ratio\":{s}}}", .{
            @tagName(setting.algo),
            metadata_canonical.formatFloat(&ratio_buffer, setting.ratio),
        });
    }
    try out.append(allocator, ']');
}

fn compressionLessThan(_: void, a: manifest.Compression, b: manifest.Compression) bool {
    return switch (std.mem.order(u8, @tagName(a.algo), @tagName(b.algo))) {
        .lt => true,
        .gt => false,
        .eq => a.ratio < b.ratio,
    };
}

const testing = std.testing;

/// Shard `index` of a test manifest, of `byte_len` bytes holding twice as many
/// payload bytes unless that overflows.
fn testShard(index: u64, byte_len: u64, compression: manifest.Compression) manifest.Shard {
    const names = [_][]const u8{ "000000.bin", "000001.bin", "000002.bin" };
    return .{
        .name = names[@intCast(index)],
        .uncompressed_byte_len = std.math.mul(u64, 2, byte_len) catch byte_len,
        .byte_len = byte_len,
        .compression = compression,
        .sha256 = @splat(0),
    };
}

test "a description adds up the shards and lists each compression setting once, sorted" {
    const lz4_2: manifest.Compression = .{ .algo = .lz4, .ratio = 2.0 };
    const lz4_half: manifest.Compression = .{ .algo = .lz4, .ratio = 0.5 };
    const none: manifest.Compression = .{ .algo = .none, .ratio = 1.0 };
    const shards = [_]manifest.Shard{
        testShard(0, 10, none),
        testShard(1, 20, lz4_2),
        testShard(2, std.math.maxInt(u64), lz4_half),
    };
    const fields = [_]metadata_types.Field{
        .{ .name = "a", .kind = .int },
        .{ .name = "b", .kind = .string },
    };
    const text = try render(testing.allocator, .{
        .format_version = 2,
        .source_name = "q\"s",
        .sample_count = 7,
        .metadata_schema = &fields,
        .metadata_sha256 = @splat(0),
        .index_sha256 = @splat(0),
        .shards = &shards,
        .record_checksums = .{ .byte_len = 28, .sha256 = @splat(0) },
    });
    defer testing.allocator.free(text);
    // 10 + 20 + (2^64 - 1) and 20 + 40 + (2^64 - 1): past any u64.
    try testing.expectEqualStrings(
        \\{"format_version":2,"cache_id":null,"source_name":"q\"s","sample_count":7,"shard_count":3,
    ++
        \\"shard_bytes":18446744073709551645,"payload_bytes_uncompressed":18446744073709551675,
    ++
        \\"compression":[{"algo":"lz4","ratio":0.5},{"algo":"lz4","ratio":2.0},
    ++
        \\{"algo":"none","ratio":1.0}],"record_checksums":true,"metadata_schema":[
    ++
        \\{"name":"a","kind":"int","arrow_type":"int64"},
    ++
        \\{"name":"b","kind":"string","arrow_type":"utf8"}]}
    , text);
}

test "a cache of one setting and no checksums lists that setting once" {
    const lz4: manifest.Compression = .{ .algo = .lz4, .ratio = 1.5 };
    const shards = [_]manifest.Shard{ testShard(0, 3, lz4), testShard(1, 4, lz4) };
    const text = try render(testing.allocator, .{
        .format_version = 2,
        .source_name = "s",
        .sample_count = 2,
        .metadata_schema = &.{},
        .metadata_sha256 = @splat(0),
        .index_sha256 = @splat(0),
        .shards = &shards,
    });
    defer testing.allocator.free(text);
    const parsed = try std.json.parseFromSlice(std.json.Value, testing.allocator, text, .{});
    defer parsed.deinit();
    const object = parsed.value.object;
    try testing.expectEqual(@as(i64, 7), object.get("shard_bytes").?.integer);
    try testing.expectEqual(@as(usize, 1), object.get("compression").?.array.items.len);
    try testing.expectEqual(false, object.get("record_checksums").?.bool);
    try testing.expectEqual(@as(usize, 0), object.get("metadata_schema").?.array.items.len);
}

/// A temporary directory and its absolute path.
const TestDir = struct {
    tmp: testing.TmpDir,
    path_buffer: [std.fs.max_path_bytes]u8 = undefined,
    path_len: usize = 0,

    fn path(dir: *const TestDir) []const u8 {
        return dir.path_buffer[0..dir.path_len];
    }

    fn write(dir: *TestDir, name: []const u8, bytes: []const u8) !void {
        const io = system.io();
        const file = try dir.tmp.dir.createFile(io, name, .{});
        defer file.close(io);
        try file.writeStreamingAll(io, bytes);
    }
};

fn testDir() !TestDir {
    var dir: TestDir = .{ .tmp = testing.tmpDir(.{}) };
    errdefer dir.tmp.cleanup();
    dir.path_len = try dir.tmp.dir.realPath(system.io(), &dir.path_buffer);
    return dir;
}

test "a cache is described from its manifest.json alone, its cache_id included" {
    var dir = try testDir();
    defer dir.tmp.cleanup();
    const shards = [_]manifest.Shard{testShard(0, 5, .{ .algo = .none, .ratio = 1.0 })};
    const text = try manifest.write(testing.allocator, .{
        .format_version = 3,
        .cache_id = 42,
        .source_name = "c",
        .sample_count = 1,
        .metadata_schema = &.{.{ .name = "k", .kind = .bool }},
        .metadata_sha256 = @splat(0),
        .index_sha256 = @splat(0),
        .shards = &shards,
    });
    defer testing.allocator.free(text);
    try dir.write("manifest.json", text);
    var diagnostic: Diagnostic = .{};
    const description = try describe(testing.allocator, dir.path(), &diagnostic);
    defer testing.allocator.free(description);
    try testing.expectEqualStrings(
        \\{"format_version":3,"cache_id":42,"source_name":"c","sample_count":1,"shard_count":1,
    ++
        \\"shard_bytes":5,
    ++
        \\"payload_bytes_uncompressed":10,"compression":[{"algo":"none","ratio":1.0}],
    ++
        \\"record_checksums":false,
    ++
        \\"metadata_schema":[{"name":"k","kind":"bool","arrow_type":"bool"}]}
    , description);
}

/// Expects `diagnostic` to say `message` of the cache at `path`.
fn expectMessage(diagnostic: *const Diagnostic, path: []const u8, message: []const u8) !void {
    var buffer: [2 * std.fs.max_path_bytes]u8 = undefined;
    const expected = try std.fmt.bufPrint(&buffer, "cache {s}: {s}", .{ path, message });
    try testing.expectEqualStrings(expected, diagnostic.message());
}

test "a folder without a manifest, a bad manifest and a missing folder fail as the reader fails" {
    const allocator = testing.allocator;
    var dir = try testDir();
    defer dir.tmp.cleanup();
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidCache, describe(allocator, dir.path(), &diagnostic));
    try expectMessage(&diagnostic, dir.path(), "missing manifest: cannot read manifest.json: " ++
        "no such file or directory");

    try dir.write("manifest.json", "{\"format_version\": 4}");
    diagnostic = .{};
    try testing.expectError(error.InvalidCache, describe(allocator, dir.path(), &diagnostic));
    try expectMessage(&diagnostic, dir.path(), "manifest.json: unsupported cache format " ++
        "version 4 (this reader supports versions 2 and 3)");

    try dir.write("manifest.json", "{\"format_version\": 2}");
    diagnostic = .{};
    try testing.expectError(error.InvalidCache, describe(allocator, dir.path(), &diagnostic));
    try expectMessage(&diagnostic, dir.path(), "manifest.json: JSON error: " ++
        "manifest field 'metadata_schema' is missing");

    var missing_buffer: [std.fs.max_path_bytes + 8]u8 = undefined;
    const missing = try std.fmt.bufPrint(&missing_buffer, "{s}/absent", .{dir.path()});
    diagnostic = .{};
    try testing.expectError(error.InvalidCache, describe(allocator, missing, &diagnostic));
    try expectMessage(&diagnostic, missing, "missing manifest: cannot open the cache directory: " ++
        "no such file or directory");
}
