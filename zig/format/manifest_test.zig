//! Tests of manifest.zig: the peer's files byte for byte, round trips, and refusals.
const std = @import("std");
const manifest_module = @import("manifest.zig");
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
pub const peer_manifest_z =
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
    .{
        .name = "000000.bin",
        .uncompressed_byte_len = 0,
        .byte_len = 65,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("73640b580572f2a6d14ad14008a6e5cfcc47add7500d99b5bb07fb79883e764b"),
    },
    .{
        .name = "000001.bin",
        .uncompressed_byte_len = 10,
        .byte_len = 93,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("eb1e1108b30b014e5af2a6db5eb422274b611b56fee0635183acdb81c2cd2682"),
    },
    .{
        .name = "000002.bin",
        .uncompressed_byte_len = 20,
        .byte_len = 102,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("87323c133921c8bdd4b384c7a0a7e855759111ba4149c1097267855b50cfea62"),
    },
    .{
        .name = "000003.bin",
        .uncompressed_byte_len = 30,
        .byte_len = 98,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("30f036b573d3b11e14a1a7e1c44fb4762e659bb5f43a76dcfd95bb0768f4c1de"),
    },
    .{
        .name = "000004.bin",
        .uncompressed_byte_len = 40,
        .byte_len = 122,
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .sha256 = digestFromHex("cebf02dd473497c02779eae14b60f581b272885bd566c543a47a489a825dad36"),
    },
};

const peer_manifest_a_value: Manifest = .{
    .format_version = 2,
    .source_name = "a",
    .sample_count = 5,
    .metadata_schema = &peer_schema,
    .metadata_sha256 = digestFromHex(
        "f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80",
    ),
    .index_sha256 = digestFromHex(
        "c5d65d95e5d641c2205d435475a14e4806388c90c75b6017f84ebca48f6c9784",
    ),
    .shards = &peer_shards_a,
};

pub const peer_manifest_z_value: Manifest = .{
    .format_version = 2,
    .source_name = "z",
    .sample_count = 5,
    .metadata_schema = &peer_schema,
    .metadata_sha256 = digestFromHex(
        "f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80",
    ),
    .index_sha256 = digestFromHex(
        "71e01ebf2ab826c9f35ad5ce0fea572d84327f7d978bd0db49669447454f1b79",
    ),
    .shards = &.{.{
        .name = "000000.bin",
        .uncompressed_byte_len = 100,
        .byte_len = 447,
        .compression = .{ .algo = .lz4, .ratio = 2.0 },
        .sha256 = digestFromHex("cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2"),
    }},
};

pub fn expectManifestsEqual(expected: Manifest, actual: Manifest) !void {
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
            .metadata_schema = &.{
                .{ .name = "", .kind = .string },
                .{ .name = "tab\there", .kind = .bool },
            },
            .metadata_sha256 = @splat(0),
            .index_sha256 = @splat(0xff),
            .shards = &.{
                .{
                    .name = "000000.bin",
                    .uncompressed_byte_len = 1,
                    .byte_len = 2,
                    .compression = .{ .algo = .lz4, .ratio = 1.5 },
                    .sha256 = @splat(7),
                },
                .{
                    .name = "000001.bin",
                    .uncompressed_byte_len = 0,
                    .byte_len = 0,
                    .compression = .{ .algo = .lz4, .ratio = 1e-7 },
                    .sha256 = @splat(9),
                },
                .{
                    .name = "000002.bin",
                    .uncompressed_byte_len = 3,
                    .byte_len = 3,
                    .compression = .{ .algo = .none, .ratio = 1.0 },
                    .sha256 = @splat(0x5a),
                },
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
        \\{"future":{"nested":[1,2,{"x":null}]},"shards":[{"sha256":
        \\"cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2",
        \\"compression":{"ratio":2,"algo":"lz4","level":9},"byte_len":447,
        \\"uncompressed_byte_len":100,"name":"000000.bin","extra":true}],
        \\"index_sha256":"71e01ebf2ab826c9f35ad5ce0fea572d84327f7d978bd0db49669447454f1b79",
        \\"metadata_sha256":
        \\"f2da64bc9984a81b9dfd19346ef35a9b9e4b490784651cc9afeb645c7c55de80",
        \\"metadata_schema":[{"kind":"float","name":"big"},
        \\{"name":"flag","kind":"bool"},{"name":"index","kind":"int"},
        \\{"name":"label","kind":"string","nullable":false},
        \\{"name":"score","kind":"float"}],"sample_count":5,"source_name":"z","format_version":2}
    ;
    var parsed = try parse(testing.allocator, text, &diagnostic);
    defer parsed.deinit();
    try expectManifestsEqual(peer_manifest_z_value, parsed.manifest);
}

/// The peer's manifest "z" with one substring replaced; the replaced text must occur.
pub fn replaced(comptime needle: []const u8, comptime replacement: []const u8) []const u8 {
    return comptime blk: {
        @setEvalBranchQuota(100_000);
        const at = std.mem.find(u8, peer_manifest_z, needle).?;
        break :blk peer_manifest_z[0..at] ++ replacement ++ peer_manifest_z[at + needle.len ..];
    };
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
                const at = random.uintLessThan(usize, length);
                buffer[at] = alphabet[random.uintLessThan(usize, alphabet.len)];
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
pub fn withChecksums(comptime entry: []const u8) []const u8 {
    const end = "\n  ]\n}";
    comptime std.debug.assert(std.mem.endsWith(u8, peer_manifest_z, end));
    return peer_manifest_z[0 .. peer_manifest_z.len - 2] ++ ",\n  \"record_checksums\": " ++
        entry ++ "\n}";
}

pub const checksums_hash = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

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
    try testing.expectEqual(
        @as(?manifest_module.RecordChecksums, null),
        peer.manifest.record_checksums,
    );
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
pub fn replacedV3(comptime needle: []const u8, comptime replacement: []const u8) []const u8 {
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
