//! Tests of manifest.zig's refusals: every invalid field of a manifest is refused with a
//! message naming it. The peer's manifests they alter are in manifest_test.zig.
const std = @import("std");
const manifest_module = @import("manifest.zig");
const manifest_test = @import("manifest_test.zig");
const metadata_json = @import("metadata_json.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const parse = manifest_module.parse;
const checksums_hash = manifest_test.checksums_hash;
const peer_manifest_z = manifest_test.peer_manifest_z;
const replaced = manifest_test.replaced;
const replacedV3 = manifest_test.replacedV3;
const withChecksums = manifest_test.withChecksums;
const testing = std.testing;

const Refusal = struct { text: []const u8, message: []const u8 };

/// `parse` refuses each case's text as an invalid manifest, with the case's message.
fn expectRefusals(cases: []const Refusal) !void {
    for (cases) |case| {
        var diagnostic: Diagnostic = .{};
        try testing.expectError(
            error.InvalidManifest,
            parse(testing.allocator, case.text, &diagnostic),
        );
        testing.expectEqualStrings(case.message, diagnostic.message()) catch |err| {
            std.debug.print("for manifest text:\n{s}\n", .{case.text});
            return err;
        };
    }
}

test "parse refuses other format versions" {
    var diagnostic: Diagnostic = .{};
    const supported = "(this reader supports versions 2 and 3)";
    const texts = [_]struct { text: []const u8, message: []const u8 }{
        .{
            .text = replaced("\"format_version\": 2", "\"format_version\": 4"),
            .message = "unsupported cache format version 4 " ++ supported,
        },
        .{
            .text = replaced("\"format_version\": 2", "\"format_version\": 1"),
            .message = "unsupported cache format version 1 " ++ supported,
        },
        .{
            .text = "{\"format_version\": 4, \"whatever\": []}",
            .message = "unsupported cache format version 4 " ++ supported,
        },
        .{
            .text = replaced("\"format_version\": 2", "\"format_version\": 4294967298"),
            .message = "unsupported cache format version 4294967298 " ++ supported,
        },
    };
    for (texts) |case| {
        try testing.expectError(
            error.UnsupportedFormatVersion,
            parse(testing.allocator, case.text, &diagnostic),
        );
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "parse refuses text that is not one JSON object" {
    try expectRefusals(&.{
        .{
            .text = "",
            .message = "manifest.json is invalid JSON (unexpected end of input at line 1, " ++
                "column 1)",
        },
        .{ .text = "[]", .message = "manifest.json must hold a JSON object" },
        .{
            .text = peer_manifest_z[0 .. peer_manifest_z.len - 1],
            .message = "manifest.json is invalid JSON (unexpected end of input at line 41, " ++
                "column 1)",
        },
        .{
            .text = replaced("\"sample_count\"", "\"sample_count\": 1, \"sample_count\""),
            .message = "manifest.json repeats a field name in one object (line 4)",
        },
        .{
            .text = replaced("\"metadata_schema\": [", "\"metadata_schema\": {\"a\": ["),
            .message = "manifest.json is invalid JSON (unexpected end of input at line 41, " ++
                "column 2)",
        },
        .{
            .text = replaced("\"shards\": [", "\"shards\": {\"a\": [1"),
            .message = "manifest.json is invalid JSON (syntax error at line 30, column 5)",
        },
    });
}

test "parse refuses an invalid format_version, sample_count or source_name" {
    try expectRefusals(&.{
        .{
            .text = replaced("\"format_version\": 2", "\"format_version\": \"2\""),
            .message = "manifest field 'format_version' must be a non-negative integer",
        },
        .{
            .text = replaced("\"format_version\": 2", "\"format_version\": 2.0"),
            .message = "manifest field 'format_version' must be a non-negative integer",
        },
        .{
            .text = replaced("\"format_version\": 2,", ""),
            .message = "manifest field 'format_version' is missing",
        },
        .{
            .text = replaced("\"sample_count\": 5", "\"sample_count\": -5"),
            .message = "manifest field 'sample_count' must be a non-negative integer",
        },
        .{
            .text = replaced("\"sample_count\": 5", "\"sample_count\": 5e0"),
            .message = "manifest field 'sample_count' must be a non-negative integer",
        },
        .{
            .text = replaced("\"sample_count\": 5", "\"sample_count\": null"),
            .message = "manifest field 'sample_count' must be a non-negative integer",
        },
        .{
            .text = replaced("\"sample_count\": 5", "\"sample_count\": 18446744073709551616"),
            .message = "manifest field 'sample_count' is larger than 2^64 - 1",
        },
        .{
            .text = replaced("\"sample_count\": 5,", ""),
            .message = "manifest field 'sample_count' is missing",
        },
        .{
            .text = replaced("\"source_name\": \"z\"", "\"source_name\": 7"),
            .message = "manifest field 'source_name' must be a string",
        },
        .{
            .text = replaced("\"source_name\": \"z\"", "\"source_name\": \"../z\""),
            .message = "manifest field 'source_name' must be a plain directory name, not '../z'",
        },
        .{
            .text = replaced("\"source_name\": \"z\"", "\"source_name\": \"\""),
            .message = "manifest field 'source_name' must be a plain directory name, not ''",
        },
    });
}

test "parse refuses an invalid metadata_schema by field" {
    try expectRefusals(&.{
        .{
            .text = replaced("\"kind\": \"int\"", "\"kind\": \"double\""),
            .message = "manifest field 'metadata_schema[2].kind' must be bool, int, float or " ++
                "string, not 'double'",
        },
        .{
            .text = replaced("\"name\": \"flag\"", "\"name\": \"big\""),
            .message = "manifest field 'metadata_schema' lists 'big' twice",
        },
        .{
            .text = replaced("\"name\": \"flag\"", "\"name\": \"zeta\""),
            .message = "manifest field 'metadata_schema' is not sorted by name: 'index' comes " ++
                "after 'zeta'",
        },
        .{
            .text = replaced("\"name\": \"flag\",", ""),
            .message = "manifest field 'metadata_schema[1].name' is missing",
        },
        .{
            .text = replaced("\"metadata_schema\": [", "\"metadata_schema\": [7,"),
            .message = "manifest field 'metadata_schema[0]' must be an object",
        },
    });
}

test "parse refuses a digest that is not 64 lowercase hex digits" {
    try expectRefusals(&.{
        .{
            .text = replaced("\"metadata_sha256\": \"f2", "\"metadata_sha256\": \"F2"),
            .message = "manifest field 'metadata_sha256' must be a SHA-256 digest as 64 " ++
                "lowercase hex digits",
        },
        .{
            .text = replaced("\"index_sha256\": \"71", "\"index_sha256\": \"7"),
            .message = "manifest field 'index_sha256' must be a SHA-256 digest as 64 " ++
                "lowercase hex digits",
        },
        .{
            .text = replaced("\"index_sha256\": \"71", "\"index_sha256\": \"71aa"),
            .message = "manifest field 'index_sha256' must be a SHA-256 digest as 64 " ++
                "lowercase hex digits",
        },
    });
}

test "parse refuses an invalid shard by field" {
    const z_hash = "cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2";
    try expectRefusals(&.{
        .{
            .text = replaced("\"sha256\": \"" ++ z_hash, "\"sha256\": \"" ++ z_hash[0..63] ++ "g"),
            .message = "manifest field 'shards[0].sha256' must be a SHA-256 digest as 64 " ++
                "lowercase hex digits",
        },
        .{
            .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"000001.bin\""),
            .message = "manifest field 'shards[0].name' must be '000000.bin', not '000001.bin'",
        },
        .{
            .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"../000000.bin\""),
            .message = "manifest field 'shards[0].name' must be '000000.bin', not '../000000.bin'",
        },
        .{
            .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"0.bin\""),
            .message = "manifest field 'shards[0].name' must be '000000.bin', not '0.bin'",
        },
        .{
            .text = replaced("\"byte_len\": 447", "\"byte_len\": 447.5"),
            .message = "manifest field 'shards[0].byte_len' must be a non-negative integer",
        },
        .{
            .text = replaced("\"uncompressed_byte_len\": 100,", ""),
            .message = "manifest field 'shards[0].uncompressed_byte_len' is missing",
        },
        .{
            .text = replaced("\"algo\": \"lz4\"", "\"algo\": \"zstd\""),
            .message = "manifest field 'shards[0].compression.algo' must be none or lz4, not " ++
                "'zstd'",
        },
        .{
            .text = replaced("\"algo\": \"lz4\"", "\"algo\": \"none\""),
            .message = "manifest field 'shards[0].compression.ratio' must be 1.0 when algo is none",
        },
        .{
            .text = replaced("\"ratio\": 2.0", "\"ratio\": 0.0"),
            .message = "manifest field 'shards[0].compression.ratio' must be a positive " ++
                "finite number",
        },
        .{
            .text = replaced("\"ratio\": 2.0", "\"ratio\": -1.5"),
            .message = "manifest field 'shards[0].compression.ratio' must be a positive " ++
                "finite number",
        },
        .{
            .text = replaced("\"ratio\": 2.0", "\"ratio\": 1e999"),
            .message = "manifest field 'shards[0].compression.ratio' must be a positive " ++
                "finite number",
        },
        .{
            .text = replaced("\"ratio\": 2.0", "\"ratio\": \"2.0\""),
            .message = "manifest field 'shards[0].compression.ratio' must be a number",
        },
        .{
            .text = replaced(",\n        \"ratio\": 2.0", ""),
            .message = "manifest field 'shards[0].compression.ratio' is missing",
        },
        .{
            .text = replaced("\"compression\": {", "\"compression\": 1, \"x\": {"),
            .message = "manifest field 'shards[0].compression' must be an object",
        },
        .{
            .text = replaced("\"shards\": [", "\"shards\": 5, \"x\": ["),
            .message = "manifest field 'shards' must be an array",
        },
    });
}

test "parse refuses a schema with more than fields_max fields" {
    var text: std.ArrayList(u8) = .empty;
    defer text.deinit(testing.allocator);
    try text.appendSlice(testing.allocator, "{\"format_version\":2,\"metadata_schema\":[");
    for (0..metadata_json.fields_max + 1) |index| {
        if (index > 0) try text.append(testing.allocator, ',');
        try text.print(testing.allocator, "{{\"name\":\"f{d:0>5}\",\"kind\":\"int\"}}", .{index});
    }
    try text.appendSlice(testing.allocator, "]}");
    var diagnostic: Diagnostic = .{};
    try testing.expectError(
        error.InvalidManifest,
        parse(testing.allocator, text.items, &diagnostic),
    );
    try testing.expectEqualStrings(
        "manifest field 'metadata_schema' has 4097 fields; at most 4096 are supported",
        diagnostic.message(),
    );
}

test "record_checksums: each invalid field is refused by name" {
    const cases = [_]struct { text: []const u8, message: []const u8 }{
        .{
            .text = withChecksums("[]"),
            .message = "manifest field 'record_checksums' must be an object",
        },
        .{
            .text = withChecksums(
                "{\"file\": \"records.crc32c\", \"byte_len\": 20, \"sha256\": \"" ++
                    checksums_hash ++ "\"}",
            ),
            .message = "manifest field 'record_checksums.algo' is missing",
        },
        .{
            .text = withChecksums(
                "{\"algo\": \"xxh3\", \"file\": \"records.crc32c\", \"byte_len\": 20, " ++
                    "\"sha256\": \"" ++ checksums_hash ++ "\"}",
            ),
            .message = "manifest field 'record_checksums.algo' must be 'crc32c', not 'xxh3'",
        },
        .{
            .text = withChecksums(
                "{\"algo\": \"crc32c\", \"file\": \"../index.bin\", \"byte_len\": 20, " ++
                    "\"sha256\": \"" ++ checksums_hash ++ "\"}",
            ),
            .message = "manifest field 'record_checksums.file' must be 'records.crc32c', not " ++
                "'../index.bin'",
        },
        .{
            .text = withChecksums(
                "{\"algo\": \"crc32c\", \"file\": \"records.crc32c\", \"byte_len\": 24, " ++
                    "\"sha256\": \"" ++ checksums_hash ++ "\"}",
            ),
            .message = "manifest field 'record_checksums.byte_len' is 24, but 5 samples need " ++
                "20 bytes",
        },
        .{
            .text = withChecksums(
                "{\"algo\": \"crc32c\", \"file\": \"records.crc32c\", \"byte_len\": 20, " ++
                    "\"sha256\": \"00\"}",
            ),
            .message = "manifest field 'record_checksums.sha256' must be a SHA-256 digest as " ++
                "64 lowercase hex digits",
        },
    };
    for (cases) |case| {
        var diagnostic: Diagnostic = .{};
        try testing.expectError(
            error.InvalidManifest,
            parse(testing.allocator, case.text, &diagnostic),
        );
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "format 3 refuses a missing or invalid cache_id by name" {
    const id = "\"cache_id\": 4883758774605530659";
    const cases = [_]struct { text: []const u8, message: []const u8 }{
        .{ .text = replacedV3(id ++ ",", ""), .message = "manifest field 'cache_id' is missing" },
        .{
            .text = replacedV3(id, "\"cache_id\": 9223372036854775808"),
            .message = "manifest field 'cache_id' is 9223372036854775808; " ++
                "a cache_id must be below 2^63",
        },
        .{
            .text = replacedV3(id, "\"cache_id\": 18446744073709551616"),
            .message = "manifest field 'cache_id' is larger than 2^64 - 1",
        },
        .{ .text = replacedV3(id, "\"cache_id\": -1"), .message = non_negative },
        .{ .text = replacedV3(id, "\"cache_id\": 5.0"), .message = non_negative },
        .{ .text = replacedV3(id, "\"cache_id\": \"5\""), .message = non_negative },
        .{ .text = replacedV3(id, "\"cache_id\": null"), .message = non_negative },
    };
    for (cases) |case| {
        var diagnostic: Diagnostic = .{};
        const refused = parse(testing.allocator, case.text, &diagnostic);
        try testing.expectError(error.InvalidManifest, refused);
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
    // Any id below 2^63 is read as it is: a migrated cache keeps its position.
    var diagnostic: Diagnostic = .{};
    var parsed = try parse(testing.allocator, replacedV3(id, "\"cache_id\": 0"), &diagnostic);
    defer parsed.deinit();
    try testing.expectEqual(@as(?u64, 0), parsed.manifest.cache_id);
}

const non_negative = "manifest field 'cache_id' must be a non-negative integer";
