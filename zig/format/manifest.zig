//! manifest.json, format v2: the publication marker of a cache, written last.
//!
//! `write` lays the manifest out exactly like the peer implementation (serde_json's pretty
//! printer: two-space indent, `"key": value`, no trailing newline). `parse` accepts any
//! valid JSON with these fields, ignores fields it does not know (later minor additions
//! stay readable), and refuses everything else with a message naming the field.
const std = @import("std");
const assert = std.debug.assert;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const cache_layout = @import("cache_layout.zig");
const metadata_canonical = @import("metadata_canonical.zig");
const metadata_json = @import("metadata_json.zig");
const metadata_types = @import("metadata_types.zig");
const Field = metadata_types.Field;
const Kind = metadata_types.Kind;

/// The only format version this implementation reads and writes.
pub const format_version_supported: u32 = 2;

/// The shard payload codec; the manifest spells it by tag name.
pub const Algo = enum { none, lz4 };

/// How a shard's payloads are stored. `ratio` is the writer's configured compression
/// ratio threshold, recorded as given: exactly 1.0 with `none`.
pub const Compression = struct {
    algo: Algo,
    ratio: f64,
};

/// One shard file's entry.
pub const Shard = struct {
    /// "NNNNNN.bin": the shard's position in `shards`, zero-padded to six digits.
    name: []const u8,
    uncompressed_byte_len: u64,
    byte_len: u64,
    compression: Compression,
    sha256: [32]u8,
};

/// Everything manifest.json records, in its key order.
pub const Manifest = struct {
    format_version: u32,
    source_name: []const u8,
    sample_count: u64,
    /// Sorted by name, names unique.
    metadata_schema: []const Field,
    metadata_sha256: [32]u8,
    index_sha256: [32]u8,
    shards: []const Shard,
};

/// Renders `manifest` as the pretty JSON the peer writes. The caller owns the result.
pub fn write(allocator: std.mem.Allocator, manifest: Manifest) error{OutOfMemory}![]u8 {
    assert(manifest.format_version == format_version_supported);
    assert(metadata_types.isSortedUnique(manifest.metadata_schema));
    var out: std.ArrayList(u8) = .empty;
    errdefer out.deinit(allocator);
    try out.print(allocator, "{{\n  \"format_version\": {d},\n  \"source_name\": ", .{manifest.format_version});
    try metadata_canonical.appendJsonString(allocator, &out, manifest.source_name);
    try out.print(allocator, ",\n  \"sample_count\": {d},\n  \"metadata_schema\": ", .{manifest.sample_count});
    try writeSchema(allocator, &out, manifest.metadata_schema);
    try out.print(allocator, ",\n  \"metadata_sha256\": \"{s}\",\n  \"index_sha256\": \"{s}\",\n  \"shards\": ", .{
        &hexDigest(manifest.metadata_sha256),
        &hexDigest(manifest.index_sha256),
    });
    try writeShards(allocator, &out, manifest.shards);
    try out.appendSlice(allocator, "\n}");
    return out.toOwnedSlice(allocator);
}

fn writeSchema(allocator: std.mem.Allocator, out: *std.ArrayList(u8), schema: []const Field) error{OutOfMemory}!void {
    if (schema.len == 0) return out.appendSlice(allocator, "[]");
    try out.append(allocator, '[');
    for (schema, 0..) |field, index| {
        try out.appendSlice(allocator, if (index == 0) "\n    {\n      \"name\": " else ",\n    {\n      \"name\": ");
        try metadata_canonical.appendJsonString(allocator, out, field.name);
        try out.print(allocator, ",\n      \"kind\": \"{s}\"\n    }}", .{field.kind.name()});
    }
    try out.appendSlice(allocator, "\n  ]");
}

fn writeShards(allocator: std.mem.Allocator, out: *std.ArrayList(u8), shards: []const Shard) error{OutOfMemory}!void {
    if (shards.len == 0) return out.appendSlice(allocator, "[]");
    try out.append(allocator, '[');
    for (shards, 0..) |shard, index| {
        var name_buffer: [cache_layout.shard_name_bytes_max]u8 = undefined;
        assert(std.mem.eql(u8, shard.name, cache_layout.shardName(&name_buffer, index)));
        assert(compressionProblem(shard.compression) == null);
        var ratio_buffer: [metadata_canonical.float_bytes_max]u8 = undefined;
        try out.print(allocator,
            \\{s}
            \\    {{
            \\      "name": "{s}",
            \\      "uncompressed_byte_len": {d},
            \\      "byte_len": {d},
            \\      "compression": {{
            \\        "algo": "{s}",
            \\        "ratio": {s}
            \\      }},
            \\      "sha256": "{s}"
            \\    }}
        , .{
            if (index == 0) "" else ",",
            shard.name,
            shard.uncompressed_byte_len,
            shard.byte_len,
            @tagName(shard.compression.algo),
            metadata_canonical.formatFloat(&ratio_buffer, shard.compression.ratio),
            &hexDigest(shard.sha256),
        });
    }
    try out.appendSlice(allocator, "\n  ]");
}

/// A parsed manifest and the arena that holds its strings and slices.
pub const Parsed = struct {
    manifest: Manifest,
    arena: std.heap.ArenaAllocator,

    /// Frees everything `manifest` points into.
    pub fn deinit(parsed: *Parsed) void {
        parsed.arena.deinit();
        parsed.* = undefined;
    }
};

/// How `parse` fails; every error but OutOfMemory comes with a message.
pub const ParseError = error{ UnsupportedFormatVersion, InvalidManifest, OutOfMemory };

/// Parses and validates manifest.json. Returns `error.UnsupportedFormatVersion` for any
/// `format_version` but 2, and `error.InvalidManifest` with a message naming the field
/// for anything else wrong.
pub fn parse(allocator: std.mem.Allocator, text: []const u8, diagnostic: *Diagnostic) ParseError!Parsed {
    // The JSON tree lives only while it is walked; the manifest keeps copies in its own arena.
    var tree_arena: std.heap.ArenaAllocator = .init(allocator);
    defer tree_arena.deinit();
    const root = try parseTree(tree_arena.allocator(), text, diagnostic);

    var parsed: Parsed = .{ .manifest = undefined, .arena = .init(allocator) };
    errdefer parsed.arena.deinit();
    var reader: TreeReader = .{ .arena = parsed.arena.allocator(), .diagnostic = diagnostic };
    parsed.manifest = try reader.readManifest(root);
    return parsed;
}

fn parseTree(arena: std.mem.Allocator, text: []const u8, diagnostic: *Diagnostic) ParseError!std.json.Value {
    var scanner: std.json.Scanner = .initCompleteInput(arena, text);
    var json_diagnostics: std.json.Diagnostics = .{};
    scanner.enableDiagnostics(&json_diagnostics);
    // Numbers stay text so that every u64 and every float spelling is read exactly below.
    return std.json.parseFromTokenSourceLeaky(std.json.Value, arena, &scanner, .{
        .parse_numbers = false,
        .duplicate_field_behavior = .@"error",
    }) catch |err| switch (err) {
        error.OutOfMemory => return error.OutOfMemory,
        error.DuplicateField => {
            diagnostic.set("manifest.json repeats a field name in one object (line {d})", .{json_diagnostics.getLine()});
            return error.InvalidManifest;
        },
        else => {
            diagnostic.set("manifest.json is not valid JSON: {s} at line {d}, column {d}", .{
                @errorName(err), json_diagnostics.getLine(), json_diagnostics.getColumn(),
            });
            return error.InvalidManifest;
        },
    };
}

/// Bytes of the longest field path in a message, e.g. "shards[123456789].compression.ratio".
const path_bytes_max = 64;

/// Reads the manifest out of the generic JSON tree, checking every field on the way.
const TreeReader = struct {
    /// Where the manifest's strings and slices go.
    arena: std.mem.Allocator,
    diagnostic: *Diagnostic,

    fn readManifest(reader: *TreeReader, root: std.json.Value) ParseError!Manifest {
        if (root != .object) return reader.fail("manifest.json must hold a JSON object", .{});
        const object = root.object;
        // The version comes first: a newer format may have changed any other field.
        const version = try reader.readVersion(object);
        const schema = try reader.readSchema(try reader.member(object, "", "metadata_schema"));
        const shards = try reader.readShards(try reader.member(object, "", "shards"));
        return .{
            .format_version = version,
            .source_name = try reader.readSourceName(try reader.member(object, "", "source_name")),
            .sample_count = try reader.readUnsigned(try reader.member(object, "", "sample_count"), "sample_count"),
            .metadata_schema = schema,
            .metadata_sha256 = try reader.readDigest(try reader.member(object, "", "metadata_sha256"), "metadata_sha256"),
            .index_sha256 = try reader.readDigest(try reader.member(object, "", "index_sha256"), "index_sha256"),
            .shards = shards,
        };
    }

    fn readVersion(reader: *TreeReader, object: std.json.ObjectMap) ParseError!u32 {
        const value = try reader.member(object, "", "format_version");
        const version = try reader.readUnsigned(value, "format_version");
        if (version != format_version_supported) {
            reader.diagnostic.set("unsupported cache format version {d} (this reader supports version {d})", .{
                version, format_version_supported,
            });
            return error.UnsupportedFormatVersion;
        }
        return format_version_supported;
    }

    fn readSourceName(reader: *TreeReader, value: std.json.Value) ParseError![]const u8 {
        const name = try reader.readString(value, "source_name");
        const plain = name.len > 0 and !std.mem.eql(u8, name, ".") and !std.mem.eql(u8, name, "..") and
            std.mem.findAny(u8, name, "/\\\x00") == null;
        if (!plain) {
            return reader.fail("manifest field 'source_name' must be a plain directory name, not '{f}'", .{Excerpt.ofName(name)});
        }
        return name;
    }

    fn readSchema(reader: *TreeReader, value: std.json.Value) ParseError![]const Field {
        if (value != .array) return reader.fail("manifest field 'metadata_schema' must be an array", .{});
        const items = value.array.items;
        if (items.len > metadata_json.fields_max) {
            return reader.fail("manifest field 'metadata_schema' has {d} fields; at most {d} are supported", .{
                items.len, metadata_json.fields_max,
            });
        }
        const schema = try reader.arena.alloc(Field, items.len);
        for (items, schema, 0..) |item, *field, index| {
            var path_buffer: [path_bytes_max]u8 = undefined;
            const path = bufferedPath(&path_buffer, "metadata_schema[{d}]", .{index});
            field.* = try reader.readField(item, path);
        }
        if (schema.len > 1) {
            for (schema[0 .. schema.len - 1], schema[1..]) |previous, field| {
                switch (std.mem.order(u8, previous.name, field.name)) {
                    .lt => {},
                    .eq => return reader.fail("manifest field 'metadata_schema' lists '{f}' twice", .{Excerpt.ofName(field.name)}),
                    .gt => return reader.fail("manifest field 'metadata_schema' is not sorted by name: '{f}' comes after '{f}'", .{
                        Excerpt.ofName(field.name), Excerpt.ofName(previous.name),
                    }),
                }
            }
        }
        assert(metadata_types.isSortedUnique(schema));
        return schema;
    }

    fn readField(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError!Field {
        if (value != .object) return reader.fail("manifest field '{s}' must be an object", .{path});
        var name_path_buffer: [path_bytes_max]u8 = undefined;
        var kind_path_buffer: [path_bytes_max]u8 = undefined;
        const name_path = bufferedPath(&name_path_buffer, "{s}.name", .{path});
        const kind_path = bufferedPath(&kind_path_buffer, "{s}.kind", .{path});
        const name = try reader.readString(try reader.member(value.object, path, "name"), name_path);
        const kind_name = try reader.readString(try reader.member(value.object, path, "kind"), kind_path);
        const kind = Kind.fromName(kind_name) orelse {
            return reader.fail("manifest field '{s}' must be bool, int, float or string, not '{s}'", .{ kind_path, kind_name });
        };
        return .{ .name = name, .kind = kind };
    }

    fn readShards(reader: *TreeReader, value: std.json.Value) ParseError![]const Shard {
        if (value != .array) return reader.fail("manifest field 'shards' must be an array", .{});
        const items = value.array.items;
        const shards = try reader.arena.alloc(Shard, items.len);
        for (items, shards, 0..) |item, *shard, index| {
            shard.* = try reader.readShard(item, index);
        }
        return shards;
    }

    fn readShard(reader: *TreeReader, value: std.json.Value, index: usize) ParseError!Shard {
        var path_buffer: [path_bytes_max]u8 = undefined;
        const path = bufferedPath(&path_buffer, "shards[{d}]", .{index});
        if (value != .object) return reader.fail("manifest field '{s}' must be an object", .{path});
        const object = value.object;
        var field_path_buffer: [path_bytes_max]u8 = undefined;

        const name = try reader.readString(try reader.member(object, path, "name"), bufferedPath(&field_path_buffer, "{s}.name", .{path}));
        var name_buffer: [cache_layout.shard_name_bytes_max]u8 = undefined;
        const name_expected = cache_layout.shardName(&name_buffer, index);
        if (!std.mem.eql(u8, name, name_expected)) {
            return reader.fail("manifest field '{s}.name' must be '{s}', not '{s}'", .{ path, name_expected, name });
        }
        return .{
            .name = name,
            .uncompressed_byte_len = try reader.readUnsigned(
                try reader.member(object, path, "uncompressed_byte_len"),
                bufferedPath(&field_path_buffer, "{s}.uncompressed_byte_len", .{path}),
            ),
            .byte_len = try reader.readUnsigned(
                try reader.member(object, path, "byte_len"),
                bufferedPath(&field_path_buffer, "{s}.byte_len", .{path}),
            ),
            .compression = try reader.readCompression(try reader.member(object, path, "compression"), path),
            .sha256 = try reader.readDigest(
                try reader.member(object, path, "sha256"),
                bufferedPath(&field_path_buffer, "{s}.sha256", .{path}),
            ),
        };
    }

    fn readCompression(reader: *TreeReader, value: std.json.Value, shard_path: []const u8) ParseError!Compression {
        var path_buffer: [path_bytes_max]u8 = undefined;
        const path = bufferedPath(&path_buffer, "{s}.compression", .{shard_path});
        if (value != .object) return reader.fail("manifest field '{s}' must be an object", .{path});
        var field_path_buffer: [path_bytes_max]u8 = undefined;
        const algo_path = bufferedPath(&field_path_buffer, "{s}.algo", .{path});
        const algo_name = try reader.readString(try reader.member(value.object, path, "algo"), algo_path);
        const algo = std.meta.stringToEnum(Algo, algo_name) orelse {
            return reader.fail("manifest field '{s}' must be none or lz4, not '{s}'", .{ algo_path, algo_name });
        };
        const ratio_path = bufferedPath(&field_path_buffer, "{s}.ratio", .{path});
        const ratio = try reader.readFloat(try reader.member(value.object, path, "ratio"), ratio_path);
        const compression: Compression = .{ .algo = algo, .ratio = ratio };
        if (compressionProblem(compression)) |problem| {
            return reader.fail("manifest field '{s}' {s}", .{ ratio_path, problem });
        }
        return compression;
    }

    /// The member `name` of `object`, whose own path is `path` ("" at the top).
    fn member(reader: *TreeReader, object: std.json.ObjectMap, path: []const u8, name: []const u8) ParseError!std.json.Value {
        return object.get(name) orelse {
            const dot = if (path.len == 0) "" else ".";
            return reader.fail("manifest field '{s}{s}{s}' is missing", .{ path, dot, name });
        };
    }

    fn readString(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError![]const u8 {
        if (value != .string) return reader.fail("manifest field '{s}' must be a string", .{path});
        return reader.arena.dupe(u8, value.string);
    }

    fn readUnsigned(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError!u64 {
        const text = if (value == .number_string) value.number_string else "";
        // The tree holds numbers as valid JSON number text, so digits only means an
        // integer without sign, fraction or exponent.
        const digits_only = text.len > 0 and for (text) |byte| {
            if (!std.ascii.isDigit(byte)) break false;
        } else true;
        if (!digits_only) return reader.fail("manifest field '{s}' must be a non-negative integer", .{path});
        return std.fmt.parseInt(u64, text, 10) catch {
            return reader.fail("manifest field '{s}' is larger than 2^64 - 1", .{path});
        };
    }

    fn readFloat(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError!f64 {
        if (value != .number_string) return reader.fail("manifest field '{s}' must be a number", .{path});
        return std.fmt.parseFloat(f64, value.number_string) catch {
            return reader.fail("manifest field '{s}' must be a number", .{path});
        };
    }

    fn readDigest(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError![32]u8 {
        if (value == .string) {
            if (parseHexDigest(value.string)) |digest| return digest;
        }
        return reader.fail("manifest field '{s}' must be a SHA-256 digest as 64 lowercase hex digits", .{path});
    }

    fn fail(reader: *TreeReader, comptime format: []const u8, args: anytype) error{InvalidManifest} {
        reader.diagnostic.set(format, args);
        return error.InvalidManifest;
    }
};

/// Why a compression setting is invalid, as the end of a sentence about its ratio
/// ("ratio 2 must be 1.0 when algo is none"); null if valid. The one home of the
/// rule: the writer's options and the manifest reader both ask it.
pub fn compressionProblem(compression: Compression) ?[]const u8 {
    return switch (compression.algo) {
        .none => if (compression.ratio == 1.0) null else "must be 1.0 when algo is none",
        .lz4 => if (std.math.isFinite(compression.ratio) and compression.ratio > 0) null else "must be a positive finite number",
    };
}

/// Formats a field path for a message; the longest possible path fits `path_bytes_max`.
fn bufferedPath(buffer: *[path_bytes_max]u8, comptime format: []const u8, args: anytype) []const u8 {
    return std.fmt.bufPrint(buffer, format, args) catch unreachable;
}

fn hexDigest(digest: [32]u8) [64]u8 {
    return std.fmt.bytesToHex(digest, .lower);
}

/// The digest spelled by exactly 64 lowercase hex digits, else null.
fn parseHexDigest(text: []const u8) ?[32]u8 {
    if (text.len != 64) return null;
    var digest: [32]u8 = undefined;
    for (&digest, 0..) |*byte, index| {
        const high = lowerHexValue(text[2 * index]) orelse return null;
        const low = lowerHexValue(text[2 * index + 1]) orelse return null;
        byte.* = high << 4 | low;
    }
    return digest;
}

fn lowerHexValue(character: u8) ?u8 {
    return switch (character) {
        '0'...'9' => character - '0',
        'a'...'f' => character - 'a' + 10,
        else => null,
    };
}

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
    return parseHexDigest(text).?;
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
    const texts = [_]struct { text: []const u8, message: []const u8 }{
        .{ .text = replaced("\"format_version\": 2", "\"format_version\": 3"), .message = "unsupported cache format version 3 (this reader supports version 2)" },
        .{ .text = replaced("\"format_version\": 2", "\"format_version\": 1"), .message = "unsupported cache format version 1 (this reader supports version 2)" },
        .{ .text = "{\"format_version\": 3, \"whatever\": []}", .message = "unsupported cache format version 3 (this reader supports version 2)" },
    };
    for (texts) |case| {
        try testing.expectError(error.UnsupportedFormatVersion, parse(testing.allocator, case.text, &diagnostic));
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "parse refuses each invalid field with a message naming it" {
    const z_hash = "cb488d7f28c0249a84aa5a1ea100e866a3daac3f18f674c4893cd2c03d6091b2";
    const cases = [_]struct { text: []const u8, message: []const u8 }{
        .{ .text = "", .message = "manifest.json is not valid JSON: UnexpectedEndOfInput at line 1, column 1" },
        .{ .text = "[]", .message = "manifest.json must hold a JSON object" },
        .{ .text = peer_manifest_z[0 .. peer_manifest_z.len - 1], .message = "manifest.json is not valid JSON: UnexpectedEndOfInput at line 41, column 1" },
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
        .{ .text = replaced("\"metadata_schema\": [", "\"metadata_schema\": {\"a\": ["), .message = "manifest.json is not valid JSON: UnexpectedEndOfInput at line 41, column 2" },
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
        .{ .text = replaced("\"shards\": [", "\"shards\": {\"a\": [1"), .message = "manifest.json is not valid JSON: SyntaxError at line 30, column 5" },
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
