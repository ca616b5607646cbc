//! manifest.json, formats 2 and 3: the publication marker of a cache, written last.
//!
//! `write` lays the manifest out exactly like the peer implementations (serde_json's pretty
//! printer: two-space indent, `"key": value`, no trailing newline). `parse` accepts any
//! valid JSON with these fields, ignores fields it does not know (later minor additions
//! stay readable), and refuses everything else with a message naming the field.
//!
//! Format 3 (dataset-rt 0.4.8) is format 2 plus one field, `cache_id`, right after
//! `format_version`: the cache's persisted identity (`cache_identity.zig`). A v2
//! manifest has no `cache_id`; one found there is ignored like any unknown field.
const std = @import("std");
const assert = std.debug.assert;
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const cache_layout = @import("cache_layout.zig");
const cache_identity = @import("cache_identity.zig");
const sha256 = @import("../codec/sha256.zig");
const record_checksums = @import("record_checksums.zig");
const hexDigest = sha256.hexDigest;
const parseHexDigest = sha256.parseHexDigest;
const metadata_canonical = @import("metadata_canonical.zig");
const metadata_json = @import("metadata_json.zig");
const metadata_types = @import("metadata_types.zig");
const Field = metadata_types.Field;
const Kind = metadata_types.Kind;

/// The format versions this implementation reads and writes: 2, and 3 with a `cache_id`.
pub const format_version_oldest: u32 = 2;
pub const format_version_newest: u32 = 3;

/// The version that persists `cache_id`.
pub const format_version_with_cache_id: u32 = 3;

pub fn versionSupported(version: u64) bool {
    return version >= format_version_oldest and version <= format_version_newest;
}

/// The largest manifest.json a reader reads: a larger file is refused unread.
/// The writer stays below it by giving a cache at most `shards_max` shards.
pub const manifest_bytes_max: u64 = 64 << 20;

/// The most shards one cache may have: that many entries as long as `write`
/// can lay one out, and the rest of the manifest, fit in `manifest_bytes_max`.
pub const shards_max: u64 = (manifest_bytes_max - rest_bytes_reserved) / shard_entry_bytes_max;

/// Room kept in a manifest for everything but its shard entries: the fixed
/// text, a source name (at most 250 bytes, six times that once escaped), the
/// record checksums entry, and a schema of up to `metadata_json.fields_max`
/// fields whose names take up to 3 KiB of JSON each.
const rest_bytes_reserved: u64 = 16 << 20;

/// The most bytes `write` spends on one `shards` entry: the longest shard name,
/// both lengths at 2^64 - 1, the longest codec name and ratio, and the
/// separator before it.
pub const shard_entry_bytes_max: u64 = std.fmt.comptimePrint(shard_entry_format, .{
    ",",
    &@as([cache_layout.shard_name_bytes_max]u8, @splat('n')),
    std.math.maxInt(u64),
    std.math.maxInt(u64),
    &@as([algo_name_bytes_max]u8, @splat('a')),
    &@as([metadata_canonical.float_bytes_max]u8, @splat('r')),
    &@as([2 * sha256.digest_length]u8, @splat('h')),
}).len;

comptime {
    assert(shards_max * shard_entry_bytes_max + rest_bytes_reserved <= manifest_bytes_max);
    // A limit no real cache meets: 64 MiB shards fill several terabytes first.
    assert(shards_max >= 100_000);
}

/// The shard payload codec; the manifest spells it by tag name.
pub const Algo = enum { none, lz4 };

/// The longest tag name of `Algo`.
const algo_name_bytes_max = blk: {
    var longest: usize = 0;
    for (std.meta.tags(Algo)) |algo| longest = @max(longest, @tagName(algo).len);
    break :blk longest;
};

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

/// The optional `record_checksums` entry: the file holding one CRC-32C per
/// record (`record_checksums.zig`). Its algorithm and file name are fixed.
pub const RecordChecksums = struct {
    byte_len: u64,
    sha256: [32]u8,

    pub const algo = "crc32c";
    pub const file = cache_layout.record_checksums_file;
};

/// Everything manifest.json records, in its key order.
pub const Manifest = struct {
    format_version: u32,
    /// Exactly with format 3: the cache's identity, below `cache_identity.cache_id_limit`.
    cache_id: ?u64 = null,
    source_name: []const u8,
    sample_count: u64,
    /// Sorted by name, names unique.
    metadata_schema: []const Field,
    metadata_sha256: [32]u8,
    index_sha256: [32]u8,
    shards: []const Shard,
    /// Absent in caches written by dataset-rt (their records are unchecked).
    record_checksums: ?RecordChecksums = null,
};

/// Renders `manifest` as the pretty JSON the peer writes. The caller owns the result.
pub fn write(allocator: std.mem.Allocator, manifest: Manifest) error{OutOfMemory}![]u8 {
    assert(versionSupported(manifest.format_version));
    const with_cache_id = manifest.format_version == format_version_with_cache_id;
    assert(with_cache_id == (manifest.cache_id != null));
    assert(metadata_types.isSortedUnique(manifest.metadata_schema));
    var out: std.ArrayList(u8) = .empty;
    errdefer out.deinit(allocator);
    try out.print(allocator, "{{\n  \"format_version\": {d},\n", .{manifest.format_version});
    if (manifest.cache_id) |cache_id| {
        assert(cache_id < cache_identity.cache_id_limit);
        try out.print(allocator, "  \"cache_id\": {d},\n", .{cache_id});
    }
    try out.appendSlice(allocator, "  \"source_name\": ");
    try metadata_canonical.appendJsonString(allocator, &out, manifest.source_name);
    try out.print(
        allocator,
        ",\n  \"sample_count\": {d},\n  \"metadata_schema\": ",
        .{manifest.sample_count},
    );
    try writeSchema(allocator, &out, manifest.metadata_schema);
    try out.print(
        allocator,
        ",\n  \"metadata_sha256\": \"{s}\",\n  \"index_sha256\": \"{s}\",\n  \"shards\": ",
        .{
            &hexDigest(manifest.metadata_sha256),
            &hexDigest(manifest.index_sha256),
        },
    );
    try writeShards(allocator, &out, manifest.shards);
    // Last, so everything before it is laid out as the peer lays it out.
    if (manifest.record_checksums) |checksums| {
        try out.print(allocator,
            \\,
            \\  "record_checksums": {{
            \\    "algo": "{s}",
            \\    "file": "{s}",
            \\    "byte_len": {d},
            \\    "sha256": "{s}"
            \\  }}
        , .{
            RecordChecksums.algo,
            RecordChecksums.file,
            checksums.byte_len,
            &hexDigest(checksums.sha256),
        });
    }
    try out.appendSlice(allocator, "\n}");
    return out.toOwnedSlice(allocator);
}

fn writeSchema(
    allocator: std.mem.Allocator,
    out: *std.ArrayList(u8),
    schema: []const Field,
) error{OutOfMemory}!void {
    if (schema.len == 0) return out.appendSlice(allocator, "[]");
    try out.append(allocator, '[');
    for (schema, 0..) |field, index| {
        try out.appendSlice(
            allocator,
            if (index == 0) "\n    {\n      \"name\": " else ",\n    {\n      \"name\": ",
        );
        try metadata_canonical.appendJsonString(allocator, out, field.name);
        try out.print(allocator, ",\n      \"kind\": \"{s}\"\n    }}", .{field.kind.name()});
    }
    try out.appendSlice(allocator, "\n  ]");
}

/// One `shards` entry: the separator before it, name, uncompressed_byte_len,
/// byte_len, algo, ratio, sha256.
const shard_entry_format =
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
;

fn writeShards(
    allocator: std.mem.Allocator,
    out: *std.ArrayList(u8),
    shards: []const Shard,
) error{OutOfMemory}!void {
    if (shards.len == 0) return out.appendSlice(allocator, "[]");
    try out.append(allocator, '[');
    for (shards, 0..) |shard, index| {
        var name_buffer: [cache_layout.shard_name_bytes_max]u8 = undefined;
        assert(std.mem.eql(u8, shard.name, cache_layout.shardName(&name_buffer, index)));
        assert(compressionProblem(shard.compression) == null);
        var ratio_buffer: [metadata_canonical.float_bytes_max]u8 = undefined;
        try out.print(allocator, shard_entry_format, .{
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
/// `format_version` but 2 and 3, and `error.InvalidManifest` with a message naming the field
/// for anything else wrong.
pub fn parse(
    allocator: std.mem.Allocator,
    text: []const u8,
    diagnostic: *Diagnostic,
) ParseError!Parsed {
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

fn parseTree(
    arena: std.mem.Allocator,
    text: []const u8,
    diagnostic: *Diagnostic,
) ParseError!std.json.Value {
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
            diagnostic.set(
                "manifest.json repeats a field name in one object (line {d})",
                .{json_diagnostics.getLine()},
            );
            return error.InvalidManifest;
        },
        else => {
            diagnostic.set("manifest.json is invalid JSON ({f} at line {d}, column {d})", .{
                error_words.of(err), json_diagnostics.getLine(), json_diagnostics.getColumn(),
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
        const cache_id: ?u64 = if (version == format_version_with_cache_id)
            try reader.readCacheId(object)
        else
            null;
        const schema = try reader.readSchema(try reader.member(object, "", "metadata_schema"));
        const shards = try reader.readShards(try reader.member(object, "", "shards"));
        const sample_count = try reader.readUnsigned(
            try reader.member(object, "", "sample_count"),
            "sample_count",
        );
        const checksums = if (object.get("record_checksums")) |value|
            try reader.readRecordChecksums(value, sample_count)
        else
            null;
        return .{
            .format_version = version,
            .cache_id = cache_id,
            .source_name = try reader.readSourceName(try reader.member(object, "", "source_name")),
            .sample_count = sample_count,
            .metadata_schema = schema,
            .metadata_sha256 = try reader.readDigest(
                try reader.member(object, "", "metadata_sha256"),
                "metadata_sha256",
            ),
            .index_sha256 = try reader.readDigest(
                try reader.member(object, "", "index_sha256"),
                "index_sha256",
            ),
            .shards = shards,
            .record_checksums = checksums,
        };
    }

    fn readRecordChecksums(
        reader: *TreeReader,
        value: std.json.Value,
        sample_count: u64,
    ) ParseError!RecordChecksums {
        const path = "record_checksums";
        if (value != .object) return reader.fail("manifest field '{s}' must be an object", .{path});
        const object = value.object;
        const algo = try reader.readString(
            try reader.member(object, path, "algo"),
            path ++ ".algo",
        );
        if (!std.mem.eql(u8, algo, RecordChecksums.algo)) {
            return reader.fail(
                "manifest field '{s}.algo' must be '{s}', not '{f}'",
                .{ path, RecordChecksums.algo, Excerpt.ofName(algo) },
            );
        }
        const file = try reader.readString(
            try reader.member(object, path, "file"),
            path ++ ".file",
        );
        if (!std.mem.eql(u8, file, RecordChecksums.file)) {
            return reader.fail(
                "manifest field '{s}.file' must be '{s}', not '{f}'",
                .{ path, RecordChecksums.file, Excerpt.ofName(file) },
            );
        }
        const byte_len = try reader.readUnsigned(
            try reader.member(object, path, "byte_len"),
            path ++ ".byte_len",
        );
        const checksum_bytes = record_checksums.checksum_bytes;
        const expected_len = std.math.mul(u64, sample_count, checksum_bytes) catch
            std.math.maxInt(u64);
        if (byte_len != expected_len) {
            return reader.fail(
                "manifest field '{s}.byte_len' is {d}, but {d} samples need {d} bytes",
                .{ path, byte_len, sample_count, expected_len },
            );
        }
        return .{
            .byte_len = byte_len,
            .sha256 = try reader.readDigest(
                try reader.member(object, path, "sha256"),
                path ++ ".sha256",
            ),
        };
    }

    fn readVersion(reader: *TreeReader, object: std.json.ObjectMap) ParseError!u32 {
        const value = try reader.member(object, "", "format_version");
        const version = try reader.readUnsigned(value, "format_version");
        if (!versionSupported(version)) {
            const phrase = "unsupported cache format version {d} " ++
                "(this reader supports versions {d} and {d})";
            const supported = .{ format_version_oldest, format_version_newest };
            reader.diagnostic.set(phrase, .{ version, supported[0], supported[1] });
            return error.UnsupportedFormatVersion;
        }
        return @intCast(version);
    }

    fn readCacheId(reader: *TreeReader, object: std.json.ObjectMap) ParseError!u64 {
        const value = try reader.member(object, "", "cache_id");
        const cache_id = try reader.readUnsigned(value, "cache_id");
        if (cache_id >= cache_identity.cache_id_limit) {
            const phrase = "manifest field 'cache_id' is {d}; a cache_id must be below 2^63";
            return reader.fail(phrase, .{cache_id});
        }
        return cache_id;
    }

    fn readSourceName(reader: *TreeReader, value: std.json.Value) ParseError![]const u8 {
        const name = try reader.readString(value, "source_name");
        const plain = name.len > 0 and !std.mem.eql(u8, name, ".") and !std.mem.eql(
            u8,
            name,
            "..",
        ) and
            std.mem.findAny(u8, name, "/\\\x00") == null;
        if (!plain) {
            return reader.fail(
                "manifest field 'source_name' must be a plain directory name, not '{f}'",
                .{Excerpt.ofName(name)},
            );
        }
        return name;
    }

    fn readSchema(reader: *TreeReader, value: std.json.Value) ParseError![]const Field {
        if (value != .array) return reader.fail(
            "manifest field 'metadata_schema' must be an array",
            .{},
        );
        const items = value.array.items;
        if (items.len > metadata_json.fields_max) {
            return reader.fail(
                "manifest field 'metadata_schema' has {d} fields; at most {d} are supported",
                .{ items.len, metadata_json.fields_max },
            );
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
                    .eq => return reader.fail(
                        "manifest field 'metadata_schema' lists '{f}' twice",
                        .{Excerpt.ofName(field.name)},
                    ),
                    .gt => return reader.fail(
                        "manifest field 'metadata_schema' is not sorted by name: '{f}' comes " ++
                            "after '{f}'",
                        .{ Excerpt.ofName(field.name), Excerpt.ofName(previous.name) },
                    ),
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
        const name = try reader.readString(
            try reader.member(value.object, path, "name"),
            name_path,
        );
        const kind_name = try reader.readString(
            try reader.member(value.object, path, "kind"),
            kind_path,
        );
        const kind = Kind.fromName(kind_name) orelse {
            return reader.fail(
                "manifest field '{s}' must be bool, int, float or string, not '{s}'",
                .{ kind_path, kind_name },
            );
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

        const name = try reader.readString(
            try reader.member(object, path, "name"),
            bufferedPath(&field_path_buffer, "{s}.name", .{path}),
        );
        var name_buffer: [cache_layout.shard_name_bytes_max]u8 = undefined;
        const name_expected = cache_layout.shardName(&name_buffer, index);
        if (!std.mem.eql(u8, name, name_expected)) {
            return reader.fail(
                "manifest field '{s}.name' must be '{s}', not '{s}'",
                .{ path, name_expected, name },
            );
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
            .compression = try reader.readCompression(
                try reader.member(object, path, "compression"),
                path,
            ),
            .sha256 = try reader.readDigest(
                try reader.member(object, path, "sha256"),
                bufferedPath(&field_path_buffer, "{s}.sha256", .{path}),
            ),
        };
    }

    fn readCompression(
        reader: *TreeReader,
        value: std.json.Value,
        shard_path: []const u8,
    ) ParseError!Compression {
        var path_buffer: [path_bytes_max]u8 = undefined;
        const path = bufferedPath(&path_buffer, "{s}.compression", .{shard_path});
        if (value != .object) return reader.fail("manifest field '{s}' must be an object", .{path});
        var field_path_buffer: [path_bytes_max]u8 = undefined;
        const algo_path = bufferedPath(&field_path_buffer, "{s}.algo", .{path});
        const algo_name = try reader.readString(
            try reader.member(value.object, path, "algo"),
            algo_path,
        );
        const algo = std.meta.stringToEnum(Algo, algo_name) orelse {
            return reader.fail(
                "manifest field '{s}' must be none or lz4, not '{s}'",
                .{ algo_path, algo_name },
            );
        };
        const ratio_path = bufferedPath(&field_path_buffer, "{s}.ratio", .{path});
        const ratio = try reader.readFloat(
            try reader.member(value.object, path, "ratio"),
            ratio_path,
        );
        const compression: Compression = .{ .algo = algo, .ratio = ratio };
        if (compressionProblem(compression)) |problem| {
            return reader.fail("manifest field '{s}' {s}", .{ ratio_path, problem });
        }
        return compression;
    }

    /// The member `name` of `object`, whose own path is `path` ("" at the top).
    fn member(
        reader: *TreeReader,
        object: std.json.ObjectMap,
        path: []const u8,
        name: []const u8,
    ) ParseError!std.json.Value {
        return object.get(name) orelse {
            const dot = if (path.len == 0) "" else ".";
            return reader.fail("manifest field '{s}{s}{s}' is missing", .{ path, dot, name });
        };
    }

    fn readString(
        reader: *TreeReader,
        value: std.json.Value,
        path: []const u8,
    ) ParseError![]const u8 {
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
        if (!digits_only) return reader.fail(
            "manifest field '{s}' must be a non-negative integer",
            .{path},
        );
        return std.fmt.parseInt(u64, text, 10) catch {
            return reader.fail("manifest field '{s}' is larger than 2^64 - 1", .{path});
        };
    }

    fn readFloat(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError!f64 {
        if (value != .number_string) return reader.fail(
            "manifest field '{s}' must be a number",
            .{path},
        );
        return std.fmt.parseFloat(f64, value.number_string) catch {
            return reader.fail("manifest field '{s}' must be a number", .{path});
        };
    }

    fn readDigest(reader: *TreeReader, value: std.json.Value, path: []const u8) ParseError![32]u8 {
        if (value == .string) {
            if (parseHexDigest(value.string)) |digest| return digest;
        }
        return reader.fail(
            "manifest field '{s}' must be a SHA-256 digest as 64 lowercase hex digits",
            .{path},
        );
    }

    fn fail(
        reader: *TreeReader,
        comptime format: []const u8,
        args: anytype,
    ) error{InvalidManifest} {
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
        .lz4 => if (std.math.isFinite(compression.ratio) and compression.ratio > 0)
            null
        else
            "must be a positive finite number",
    };
}

/// Formats a field path for a message; the longest possible path fits `path_bytes_max`.
fn bufferedPath(
    buffer: *[path_bytes_max]u8,
    comptime format: []const u8,
    args: anytype,
) []const u8 {
    return std.fmt.bufPrint(buffer, format, args) catch unreachable;
}
