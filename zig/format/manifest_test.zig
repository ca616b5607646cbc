//! Tests of manifest.zig: the peer's files byte for byte, round trips, and refusals.
const std = @import("std");
const manifest_module = @import("manifest.zig");
const metadata_json = @import("metadata_json.zig");
const metadata_types = @import("metadata_types.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Field = metadata_types.Field;
const Manifest = manifest_module.Manifest;
const Shard = manifest_module.Shard;
const parse = manifest_module.parse;
const write = manifest_module.write;
const testing = std.testing;

/// manifest.json of cache "a" written by the peer implementation (five uncompressed shards).
const peer_manifest_a =
    \\{
    \\  "format_version": 2,
    \\  "source_name": "a",
    \\  "sample_count": 5,
    \\  "metadata_schema": [
    \\    {
    \\      "name": "big",
    \\      "kind": "float"
    \\    },
    \\    {
    \\      "name": "flag",
    \\      "kind": "bool"
    \\    },
    \\    {
    \\      "name": "index",
    \\      "kind": "int"
    \\    },
    \\    {
    \\      "name": "label",
    \\      "kind": "string"
    \\    },
    \\    {
    \\      "name": "score",
    \\      "kind": "float"
    \\    }
    \\  ],
    \\  "metadata_sha256": "f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80",
    \\  "index_sha256": "c5d65d95e5d641c2205d435475a14e4806388c90c75b6017f84ebca48f6c9784",
    \\  "shards": [
    \\    {
    \\      "name": "000000.bin",
    \\      "uncompressed_byte_len": 0,
    \\      "byte_len": 65,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "73640b580572f2a6d14ad14008a6e5cfcc47add7500d99b5bb07fb79883e764b"
    \\    },
    \\    {
    \\      "name": "000001.bin",
    \\      "uncompressed_byte_len": 10,
    \\      "byte_len": 93,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "eb1e1108b30b014e5af2a6db5eb422274b611b56fee0635183acdb81c2cd2682"
    \\    },
    \\    {
    \\      "name": "000002.bin",
    \\      "uncompressed_byte_len": 20,
    \\      "byte_len": 102,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "87323c133921c8bdd4b384c7a0a7e855759111ba4149c1097267855b50cfea62"
    \\    },
    \\    {
    \\      "name": "000003.bin",
    \\      "uncompressed_byte_len": 30,
    \\      "byte_len": 98,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "30f036b573d3b11e14a1a7e1c44fb4762e659bb5f43a76dcfd95bb0768f4c1de"
    \\    },
    \\    {
    \\      "name": "000004.bin",
    \\      "uncompressed_byte_len": 40,
    \\      "byte_len": 122,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "cebf02dd473497c02779eae14b60f581b272885bd566c543a47a489a825dad36"
    \\    }
    \\  ]
    \\}
;

/// manifest.json of cache "z" written by the peer implementation (one lz4 shard).
const peer_manifest_z =
    \\{
    \\  "format_version": 2,
    \\  "source_name": "z",
    \\  "sample_count": 5,
    \\  "metadata_schema": [
    \\    {
    \\      "name": "big",
    \\      "kind": "float"
    \\    },
    \\    {
    \\      "name": "flag",
    \\      "kind": "bool"
    \\    },
    \\    {
    \\      "name": "index",
    \\      "kind": "int"
    \\    },
    \\    {
    \\      "name": "label",
    \\      "kind": "string"
    \\    },
    \\    {
    \\      "name": "score",
    \\      "kind": "float"
    \\    }
    \\  ],
    \\  "metadata_sha256": "f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80",
    \\  "index_sha256": "71e01ebf2ab826c9f35ad5ce0fea572d84327f7d978bd0db49669447454f1b79",
    \\  "shards": [
    \\    {
    \\      "name": "000000.bin",
    \\      "uncompressed_byte_len": 100,
    \\      "byte_len": 447,
    \\      "compression": {
    \\        "algo": "lz4",
    \\        "ratio": 2.0
    \\      },
    \\      "sha256": "cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2"
    \\    }
    \\  ]
    \\}
;

fn digestFromHex(comptime text: []const u8) [32]u8 {
    return @import("../codec/sha256.zig").parseHexDigest(text).?;
}

const peer_schema = [_]Field{
    .{ .name = "big", .kind = .float },
    .{ .name = "flag", .kind = .bool },
    .{ .name = "index", .kind = .int },
    .{ .name = "label", .kind = .string },
    .{ .name = "score", .kind = .float },
};

const peer_shards_a = [_]Shard{
    .{ .name = "000000.bin", .uncompressed_byte_len = 0, .byte_len = 65, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = digestFromHex("73640b580572f2a6d14ad14008a6e5cfcc47add7500d99b5bb07fb79883e764b") },
    .{ .name = "000001.bin", .uncompressed_byte_len = 10, .byte_len = 93, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = digestFromHex("eb1e1108b30b014e5af2a6db5eb422274b611b56fee0635183acdb81c2cd2682") },
    .{ .name = "000002.bin", .uncompressed_byte_len = 20, .byte_len = 102, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = digestFromHex("87323c133921c8bdd4b384c7a0a7e855759111ba4149c1097267855b50cfea62") },
    .{ .name = "000003.bin", .uncompressed_byte_len = 30, .byte_len = 98, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = digestFromHex("30f036b573d3b11e14a1a7e1c44fb4762e659bb5f43a76dcfd95bb0768f4c1de") },
    .{ .name = "000004.bin", .uncompressed_byte_len = 40, .byte_len = 122, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = digestFromHex("cebf02dd473497c02779eae14b60f581b272885bd566c543a47a489a825dad36") },
};

const peer_manifest_a_value: Manifest = .{
    .format_version = 2,
    .source_name = "a",
    .sample_count = 5,
    .metadata_schema = &peer_schema,
    .metadata_sha256 = digestFromHex("f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80"),
    .index_sha256 = digestFromHex("c5d65d95e5d641c2205d435475a14e4806388c90c75b6017f84ebca48f6c9784"),
    .shards = &peer_shards_a,
};

const peer_manifest_z_value: Manifest = .{
    .format_version = 2,
    .source_name = "z",
    .sample_count = 5,
    .metadata_schema = &peer_schema,
    .metadata_sha256 = digestFromHex("f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80"),
    .index_sha256 = digestFromHex("71e01ebf2ab826c9f35ad5ce0fea572d84327f7d978bd0db49669447454f1b79"),
    .shards = &.{.{
        .name = "000000.bin",
        .uncompressed_byte_len = 100,
        .byte_len = 447,
        .compression = .{ .algo = .lz4, .ratio = 2.0 },
        .sha256 = digestFromHex("cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2"),
    }},
};

fn expectManifestsEqual(expected: Manifest, actual: Manifest) !void {
    try testing.expectEqual(expected.format_version, actual.format_version);
    try testing.expectEqual(expected.cache_id, actual.cache_id);
    try testing.expectEqualStrings(expected.source_name, actual.source_name);
    try testing.expectEqual(expected.sample_count, actual.sample_count);
    try testing.expectEqual(expected.metadata_schema.len, actual.metadata_schema.len);
    for (expected.metadata_schema, actual.metadata_schema) |want, got| {
        try testing.expectEqualStrings(want.name, got.name);
        try testing.expectEqual(want.kind, got.kind);
    }
    try testing.expectEqualSlices(u8, &expected.metadata_sha256, &actual.metadata_sha256);
    try testing.expectEqualSlices(u8, &expected.index_sha256, &actual.index_sha256);
    try testing.expectEqual(expected.shards.len, actual.shards.len);
    for (expected.shards, actual.shards) |want, got| {
        try testing.expectEqualStrings(want.name, got.name);
        try testing.expectEqual(want.uncompressed_byte_len, got.uncompressed_byte_len);
        try testing.expectEqual(want.byte_len, got.byte_len);
        try testing.expectEqual(want.compression.algo, got.compression.algo);
        try testing.expectEqual(want.compression.ratio, got.compression.ratio);
        try testing.expectEqualSlices(u8, &want.sha256, &got.sha256);
    }
}

test "write reproduces the peer's manifest files byte for byte" {
    const cases = [_]struct { manifest: Manifest, text: []const u8 }{
        .{ .manifest = peer_manifest_a_value, .text = peer_manifest_a },
        .{ .manifest = peer_manifest_z_value, .text = peer_manifest_z },
    };
    for (cases) |case| {
        const text = try write(testing.allocator, case.manifest);
        defer testing.allocator.free(text);
        try testing.expectEqualStrings(case.text, text);
    }
}

test "parse reads the peer's manifest files" {
    var diagnostic: Diagnostic = .{};
    const cases = [_]struct { manifest: Manifest, text: []const u8 }{
        .{ .manifest = peer_manifest_a_value, .text = peer_manifest_a },
        .{ .manifest = peer_manifest_z_value, .text = peer_manifest_z },
    };
    for (cases) |case| {
        var parsed = try parse(testing.allocator, case.text, &diagnostic);
        defer parsed.deinit();
        try expectManifestsEqual(case.manifest, parsed.manifest);
    }
}

test "write then parse round trips, empty lists and escaped names included" {
    var diagnostic: Diagnostic = .{};
    const manifests = [_]Manifest{
        .{
            .format_version = 2,
            .source_name = "caf\xc3\xa9 \"quoted\"",
            .sample_count = std.math.maxInt(u64),
            .metadata_schema = &.{},
            .metadata_sha256 = @splat(0xab),
            .index_sha256 = @splat(0x01),
            .shards = &.{},
        },
        .{
            .format_version = 2,
            .source_name = "s",
            .sample_count = 0,
            .metadata_schema = &.{ .{ .name = "", .kind = .string }, .{ .name = "tab\there", .kind = .bool } },
            .metadata_sha256 = @splat(0),
            .index_sha256 = @splat(0xff),
            .shards = &.{
                .{ .name = "000000.bin", .uncompressed_byte_len = 1, .byte_len = 2, .compression = .{ .algo = .lz4, .ratio = 1.5 }, .sha256 = @splat(7) },
                .{ .name = "000001.bin", .uncompressed_byte_len = 0, .byte_len = 0, .compression = .{ .algo = .lz4, .ratio = 1e-7 }, .sha256 = @splat(9) },
                .{ .name = "000002.bin", .uncompressed_byte_len = 3, .byte_len = 3, .compression = .{ .algo = .none, .ratio = 1.0 }, .sha256 = @splat(0x5a) },
            },
        },
    };
    for (manifests) |manifest| {
        const text = try write(testing.allocator, manifest);
        defer testing.allocator.free(text);
        var parsed = try parse(testing.allocator, text, &diagnostic);
        defer parsed.deinit();
        try expectManifestsEqual(manifest, parsed.manifest);
    }
}

test "parse ignores fields it does not know and accepts any JSON layout" {
    var diagnostic: Diagnostic = .{};
    const text =
        \\{"future":{"nested":[1,2,{"x":null}]},"shards":[{"sha256":"cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2",
        \\"compression":{"ratio":2,"algo":"lz4","level":9},"byte_len":447,"uncompressed_byte_len":100,"name":"000000.bin","extra":true}],
        \\"index_sha256":"71e01ebf2ab826c9f35ad5ce0fea572d84327f7d978bd0db49669447454f1b79","metadata_sha256":
        \\"f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80","metadata_schema":[{"kind":"float","name":"big"},
        \\{"name":"flag","kind":"bool"},{"name":"index","kind":"int"},{"name":"label","kind":"string","nullable":false},
        \\{"name":"score","kind":"float"}],"sample_count":5,"source_name":"z","format_version":2}
    ;
    var parsed = try parse(testing.allocator, text, &diagnostic);
    defer parsed.deinit();
    try expectManifestsEqual(peer_manifest_z_value, parsed.manifest);
}

/// The peer's manifest "z" with one substring replaced; the replaced text must occur.
fn replaced(comptime needle: []const u8, comptime replacement: []const u8) []const u8 {
    return comptime blk: {
        @setEvalBranchQuota(100_000);
        const at = std.mem.find(u8, peer_manifest_z, needle).?;
        break :blk peer_manifest_z[0..at] ++ replacement ++ peer_manifest_z[at + needle.len ..];
    };
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
        try testing.expectError(error.UnsupportedFormatVersion, parse(testing.allocator, case.text, &diagnostic));
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "parse refuses each invalid field with a message naming it" {
    const z_hash = "cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2";
    const cases = [_]struct { text: []const u8, message: []const u8 }{
        .{ .text = "", .message = "manifest.json is invalid JSON (unexpected end of input at line 1, column 1)" },
        .{ .text = "[]", .message = "manifest.json must hold a JSON object" },
        .{ .text = peer_manifest_z[0 .. peer_manifest_z.len - 1], .message = "manifest.json is invalid JSON (unexpected end of input at line 41, column 1)" },
        .{ .text = replaced("\"sample_count\"", "\"sample_count\": 1, \"sample_count\""), .message = "manifest.json repeats a field name in one object (line 4)" },
        .{ .text = replaced("\"format_version\": 2", "\"format_version\": \"2\""), .message = "manifest field 'format_version' must be a non-negative integer" },
        .{ .text = replaced("\"format_version\": 2", "\"format_version\": 2.0"), .message = "manifest field 'format_version' must be a non-negative integer" },
        .{ .text = replaced("\"format_version\": 2,", ""), .message = "manifest field 'format_version' is missing" },
        .{ .text = replaced("\"sample_count\": 5", "\"sample_count\": -5"), .message = "manifest field 'sample_count' must be a non-negative integer" },
        .{ .text = replaced("\"sample_count\": 5", "\"sample_count\": 5e0"), .message = "manifest field 'sample_count' must be a non-negative integer" },
        .{ .text = replaced("\"sample_count\": 5", "\"sample_count\": null"), .message = "manifest field 'sample_count' must be a non-negative integer" },
        .{ .text = replaced("\"sample_count\": 5", "\"sample_count\": 18446744073709551616"), .message = "manifest field 'sample_count' is larger than 2^64 - 1" },
        .{ .text = replaced("\"sample_count\": 5,", ""), .message = "manifest field 'sample_count' is missing" },
        .{ .text = replaced("\"source_name\": \"z\"", "\"source_name\": 7"), .message = "manifest field 'source_name' must be a string" },
        .{ .text = replaced("\"source_name\": \"z\"", "\"source_name\": \"../z\""), .message = "manifest field 'source_name' must be a plain directory name, not '../z'" },
        .{ .text = replaced("\"source_name\": \"z\"", "\"source_name\": \"\""), .message = "manifest field 'source_name' must be a plain directory name, not ''" },
        .{ .text = replaced("\"kind\": \"int\"", "\"kind\": \"double\""), .message = "manifest field 'metadata_schema[2].kind' must be bool, int, float or string, not 'double'" },
        .{ .text = replaced("\"name\": \"flag\"", "\"name\": \"big\""), .message = "manifest field 'metadata_schema' lists 'big' twice" },
        .{ .text = replaced("\"name\": \"flag\"", "\"name\": \"zeta\""), .message = "manifest field 'metadata_schema' is not sorted by name: 'index' comes after 'zeta'" },
        .{ .text = replaced("\"name\": \"flag\",", ""), .message = "manifest field 'metadata_schema[1].name' is missing" },
        .{ .text = replaced("\"metadata_schema\": [", "\"metadata_schema\": [7,"), .message = "manifest field 'metadata_schema[0]' must be an object" },
        .{ .text = replaced("\"metadata_schema\": [", "\"metadata_schema\": {\"a\": ["), .message = "manifest.json is invalid JSON (unexpected end of input at line 41, column 2)" },
        .{ .text = replaced("\"metadata_sha256\": \"f2", "\"metadata_sha256\": \"F2"), .message = "manifest field 'metadata_sha256' must be a SHA-256 digest as 64 lowercase hex digits" },
        .{ .text = replaced("\"index_sha256\": \"71", "\"index_sha256\": \"7"), .message = "manifest field 'index_sha256' must be a SHA-256 digest as 64 lowercase hex digits" },
        .{ .text = replaced("\"index_sha256\": \"71", "\"index_sha256\": \"71aa"), .message = "manifest field 'index_sha256' must be a SHA-256 digest as 64 lowercase hex digits" },
        .{ .text = replaced("\"sha256\": \"" ++ z_hash, "\"sha256\": \"" ++ z_hash[0..63] ++ "g"), .message = "manifest field 'shards[0].sha256' must be a SHA-256 digest as 64 lowercase hex digits" },
        .{ .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"000001.bin\""), .message = "manifest field 'shards[0].name' must be '000000.bin', not '000001.bin'" },
        .{ .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"../000000.bin\""), .message = "manifest field 'shards[0].name' must be '000000.bin', not '../000000.bin'" },
        .{ .text = replaced("\"name\": \"000000.bin\"", "\"name\": \"0.bin\""), .message = "manifest field 'shards[0].name' must be '000000.bin', not '0.bin'" },
        .{ .text = replaced("\"byte_len\": 447", "\"byte_len\": 447.5"), .message = "manifest field 'shards[0].byte_len' must be a non-negative integer" },
        .{ .text = replaced("\"uncompressed_byte_len\": 100,", ""), .message = "manifest field 'shards[0].uncompressed_byte_len' is missing" },
        .{ .text = replaced("\"algo\": \"lz4\"", "\"algo\": \"zstd\""), .message = "manifest field 'shards[0].compression.algo' must be none or lz4, not 'zstd'" },
        .{ .text = replaced("\"algo\": \"lz4\"", "\"algo\": \"none\""), .message = "manifest field 'shards[0].compression.ratio' must be 1.0 when algo is none" },
        .{ .text = replaced("\"ratio\": 2.0", "\"ratio\": 0.0"), .message = "manifest field 'shards[0].compression.ratio' must be a positive finite number" },
        .{ .text = replaced("\"ratio\": 2.0", "\"ratio\": -1.5"), .message = "manifest field 'shards[0].compression.ratio' must be a positive finite number" },
        .{ .text = replaced("\"ratio\": 2.0", "\"ratio\": 1e999"), .message = "manifest field 'shards[0].compression.ratio' must be a positive finite number" },
        .{ .text = replaced("\"ratio\": 2.0", "\"ratio\": \"2.0\""), .message = "manifest field 'shards[0].compression.ratio' must be a number" },
        .{ .text = replaced(",\n        \"ratio\": 2.0", ""), .message = "manifest field 'shards[0].compression.ratio' is missing" },
        .{ .text = replaced("\"compression\": {", "\"compression\": 1, \"x\": {"), .message = "manifest field 'shards[0].compression' must be an object" },
        .{ .text = replaced("\"shards\": [", "\"shards\": {\"a\": [1"), .message = "manifest.json is invalid JSON (syntax error at line 30, column 5)" },
        .{ .text = replaced("\"shards\": [", "\"shards\": 5, \"x\": ["), .message = "manifest field 'shards' must be an array" },
    };
    var diagnostic: Diagnostic = .{};
    for (cases) |case| {
        try testing.expectError(error.InvalidManifest, parse(testing.allocator, case.text, &diagnostic));
        testing.expectEqualStrings(case.message, diagnostic.message()) catch |err| {
            std.debug.print("for manifest text:\n{s}\n", .{case.text});
            return err;
        };
    }
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
    try testing.expectError(error.InvalidManifest, parse(testing.allocator, text.items, &diagnostic));
    try testing.expectEqualStrings("manifest field 'metadata_schema' has 4097 fields; at most 4096 are supported", diagnostic.message());
}

test "random and damaged manifests never crash or leak" {
    var prng = std.Random.DefaultPrng.init(0x3a1f);
    const random = prng.random();
    const alphabet = "{}[]\":,0123456789.e-abcdefz \n\\u\x00\xff";
    var buffer: [peer_manifest_z.len + 8]u8 = undefined;
    var diagnostic: Diagnostic = .{};
    for (0..3000) |iteration| {
        var length: usize = peer_manifest_z.len;
        @memcpy(buffer[0..length], peer_manifest_z);
        if (iteration % 2 == 0) {
            for (0..1 + random.uintLessThan(usize, 3)) |_| {
                buffer[random.uintLessThan(usize, length)] = alphabet[random.uintLessThan(usize, alphabet.len)];
            }
        } else {
            length = random.uintLessThan(usize, length);
        }
        var parsed = parse(testing.allocator, buffer[0..length], &diagnostic) catch |err| {
            try testing.expect(err != error.OutOfMemory);
            try testing.expect(diagnostic.message().len > 0);
            continue;
        };
        parsed.deinit();
    }
}

/// peer_manifest_z with a record_checksums entry (`entry`) after its shards.
fn withChecksums(comptime entry: []const u8) []const u8 {
    const end = "\n  ]\n}";
    comptime std.debug.assert(std.mem.endsWith(u8, peer_manifest_z, end));
    return peer_manifest_z[0 .. peer_manifest_z.len - 2] ++ ",\n  \"record_checksums\": " ++ entry ++ "\n}";
}

const checksums_hash = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

test "record_checksums: written last, after the peer's layout, and read back" {
    var value = peer_manifest_z_value;
    value.record_checksums = .{ .byte_len = 20, .sha256 = digestFromHex(checksums_hash) };
    const text = try write(testing.allocator, value);
    defer testing.allocator.free(text);
    const expected = withChecksums(
        \\{
        \\    "algo": "crc32c",
        \\    "file": "records.crc32c",
        \\    "byte_len": 20,
        \\    "sha256": "
    ++ checksums_hash ++
        \\"
        \\  }
    );
    try testing.expectEqualStrings(expected, text);
    // Up to the new key, the bytes are the peer's.
    try testing.expect(std.mem.startsWith(u8, text, peer_manifest_z[0 .. peer_manifest_z.len - 2]));
    var diagnostic: Diagnostic = .{};
    var parsed = try parse(testing.allocator, text, &diagnostic);
    defer parsed.deinit();
    const checksums = parsed.manifest.record_checksums.?;
    try testing.expectEqual(@as(u64, 20), checksums.byte_len);
    try testing.expectEqualSlices(u8, &digestFromHex(checksums_hash), &checksums.sha256);
    // Without the key (dataset-rt 0.2.4's manifests) there are none.
    var peer = try parse(testing.allocator, peer_manifest_z, &diagnostic);
    defer peer.deinit();
    try testing.expectEqual(@as(?manifest_module.RecordChecksums, null), peer.manifest.record_checksums);
}

test "record_checksums: each invalid field is refused by name" {
    const cases = [_]struct { text: []const u8, message: []const u8 }{
        .{ .text = withChecksums("[]"), .message = "manifest field 'record_checksums' must be an object" },
        .{ .text = withChecksums("{\"file\": \"records.crc32c\", \"byte_len\": 20, \"sha256\": \"" ++ checksums_hash ++ "\"}"), .message = "manifest field 'record_checksums.algo' is missing" },
        .{ .text = withChecksums("{\"algo\": \"xxh3\", \"file\": \"records.crc32c\", \"byte_len\": 20, \"sha256\": \"" ++ checksums_hash ++ "\"}"), .message = "manifest field 'record_checksums.algo' must be 'crc32c', not 'xxh3'" },
        .{ .text = withChecksums("{\"algo\": \"crc32c\", \"file\": \"../index.bin\", \"byte_len\": 20, \"sha256\": \"" ++ checksums_hash ++ "\"}"), .message = "manifest field 'record_checksums.file' must be 'records.crc32c', not '../index.bin'" },
        .{ .text = withChecksums("{\"algo\": \"crc32c\", \"file\": \"records.crc32c\", \"byte_len\": 24, \"sha256\": \"" ++ checksums_hash ++ "\"}"), .message = "manifest field 'record_checksums.byte_len' is 24, but 5 samples need 20 bytes" },
        .{ .text = withChecksums("{\"algo\": \"crc32c\", \"file\": \"records.crc32c\", \"byte_len\": 20, \"sha256\": \"00\"}"), .message = "manifest field 'record_checksums.sha256' must be a SHA-256 digest as 64 lowercase hex digits" },
    };
    for (cases) |case| {
        var diagnostic: Diagnostic = .{};
        try testing.expectError(error.InvalidManifest, parse(testing.allocator, case.text, &diagnostic));
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

/// manifest.json of cache "train-00" written by dataset-rt 0.4.8 (format 3).
const peer_manifest_v3 =
    \\{
    \\  "format_version": 3,
    \\  "cache_id": 4883758774605530659,
    \\  "source_name": "train-00",
    \\  "sample_count": 3,
    \\  "metadata_schema": [
    \\    {
    \\      "name": "b",
    \\      "kind": "bool"
    \\    },
    \\    {
    \\      "name": "f",
    \\      "kind": "float"
    \\    },
    \\    {
    \\      "name": "i",
    \\      "kind": "int"
    \\    },
    \\    {
    \\      "name": "s",
    \\      "kind": "string"
    \\    }
    \\  ],
    \\  "metadata_sha256": "43c741cb4bad41b435491f092b382a7c5c0c506683cc981ea00a97e03fa1e853",
    \\  "index_sha256": "c5d4f5815d293bc0cbf9f318c1121197391c22b1b2f9cd6a3360421b55f7bd8a",
    \\  "shards": [
    \\    {
    \\      "name": "000000.bin",
    \\      "uncompressed_byte_len": 30,
    \\      "byte_len": 150,
    \\      "compression": {
    \\        "algo": "none",
    \\        "ratio": 1.0
    \\      },
    \\      "sha256": "ee195bd011cb8cabe041b5d3ddc0cb68376479e4c2fc6e267782b448e9bd7bef"
    \\    }
    \\  ]
    \\}
;

const peer_manifest_v3_value: Manifest = .{
    .format_version = 3,
    .cache_id = 4883758774605530659,
    .source_name = "train-00",
    .sample_count = 3,
    .metadata_schema = &.{
        .{ .name = "b", .kind = .bool },
        .{ .name = "f", .kind = .float },
        .{ .name = "i", .kind = .int },
        .{ .name = "s", .kind = .string },
    },
    .metadata_sha256 = digestFromHex("43c741cb4bad41b435491f092b382a7c5c0c506683cc981e" ++
        "a00a97e03fa1e853"),
    .index_sha256 = digestFromHex("c5d4f5815d293bc0cbf9f318c1121197391c22b1b2f9cd6a" ++
        "3360421b55f7bd8a"),
    .shards = &.{.{
        .name = "000000.bin",
        .uncompressed_byte_len = 30,
        .byte_len = 150,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("ee195bd011cb8cabe041b5d3ddc0cb68376479e4c2fc6e267782b448e9bd7bef"),
    }},
};

/// peer_manifest_v3 with one substring replaced; the replaced text must occur.
fn replacedV3(comptime needle: []const u8, comptime replacement: []const u8) []const u8 {
    return comptime blk: {
        @setEvalBranchQuota(100_000);
        const at = std.mem.find(u8, peer_manifest_v3, needle).?;
        break :blk peer_manifest_v3[0..at] ++ replacement ++ peer_manifest_v3[at + needle.len ..];
    };
}

test "format 3: write reproduces dataset-rt 0.4.8's manifest byte for byte, parse reads it" {
    const text = try write(testing.allocator, peer_manifest_v3_value);
    defer testing.allocator.free(text);
    try testing.expectEqualStrings(peer_manifest_v3, text);
    var diagnostic: Diagnostic = .{};
    var parsed = try parse(testing.allocator, peer_manifest_v3, &diagnostic);
    defer parsed.deinit();
    try expectManifestsEqual(peer_manifest_v3_value, parsed.manifest);
}

test "format 3 is format 2 plus the cache_id line, record_checksums included" {
    var v2 = peer_manifest_v3_value;
    v2.format_version = 2;
    v2.cache_id = null;
    v2.record_checksums = .{ .byte_len = 12, .sha256 = digestFromHex(checksums_hash) };
    var v3 = v2;
    v3.format_version = 3;
    v3.cache_id = std.math.maxInt(u63);
    const v2_text = try write(testing.allocator, v2);
    defer testing.allocator.free(v2_text);
    const v3_text = try write(testing.allocator, v3);
    defer testing.allocator.free(v3_text);
    const head_v2 = "{\n  \"format_version\": 2,\n";
    const head_v3 = "{\n  \"format_version\": 3,\n  \"cache_id\": 9223372036854775807,\n";
    try testing.expect(std.mem.startsWith(u8, v2_text, head_v2));
    try testing.expect(std.mem.startsWith(u8, v3_text, head_v3));
    try testing.expectEqualStrings(v2_text[head_v2.len..], v3_text[head_v3.len..]);
    var diagnostic: Diagnostic = .{};
    var parsed = try parse(testing.allocator, v3_text, &diagnostic);
    defer parsed.deinit();
    try expectManifestsEqual(v3, parsed.manifest);
    try testing.expect(parsed.manifest.record_checksums != null);
}

test "format 2 ignores a cache_id field, as dataset-rt 0.4.8 does" {
    var diagnostic: Diagnostic = .{};
    const texts = [_][]const u8{
        replaced("\"format_version\": 2,", "\"format_version\": 2, \"cache_id\": 5,"),
        replaced("\"format_version\": 2,", "\"format_version\": 2, \"cache_id\": \"x\","),
    };
    for (texts) |text| {
        var parsed = try parse(testing.allocator, text, &diagnostic);
        defer parsed.deinit();
        try expectManifestsEqual(peer_manifest_z_value, parsed.manifest);
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
