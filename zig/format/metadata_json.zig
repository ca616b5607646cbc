//! Sample metadata as JSON, ingest: the batch the Python binding sends,
//! `json.dumps(list_of_dicts)` output, parsed one flat object at a time (`Parser`), and
//! the schema its first object fixes and every object must match (`inferSchema`,
//! `matchSchema`).
//!
//! Metadata JSON appears in two more places, each in its own file:
//!
//! - canonical form (metadata_canonical.zig): the compact object with sorted keys that
//!   every shard record embeds (`writeCanonical`), with floats laid out exactly like
//!   Python's `repr`;
//! - verification (metadata_verify.zig): a reader's check that a record's object holds
//!   the same values as its metadata.arrow row (`verifyRecord`).
//!
//! Ingest and verification share the lexical scanner in json_scan.zig.
//!
//! These are purpose-built scanners rather than std.json: the writer parses millions of
//! small objects and the reader checks one per materialized sample, so neither may
//! allocate per value. Every loop moves forward through its input and nothing recurses,
//! so hostile input costs at most time linear in its length.
const std = @import("std");
const assert = std.debug.assert;
const metadata_types = @import("metadata_types.zig");
const json_scan = @import("json_scan.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const Field = metadata_types.Field;
const Value = metadata_types.Value;
const Cursor = json_scan.Cursor;
const Unescaper = json_scan.Unescaper;
const parseInt64 = json_scan.parseInt64;

/// The most fields one metadata object may have. It bounds the per-object field sets
/// kept on the stack; real schemas have a handful of fields.
pub const fields_max = 4096;

/// One `"key": value` pair of an ingested object, in the order the object lists them.
/// Slices point into the parser's text or into `Scratch.strings`.
pub const Entry = struct {
    key: []const u8,
    value: Value,
};

/// Storage that `Parser.nextObject` reuses from one object to the next, so the hot path
/// allocates only while a buffer still grows.
pub const Scratch = struct {
    entries: std.ArrayList(Entry),
    /// Unescaped keys and string values of the current object.
    strings: std.ArrayList(u8),
    /// Entries whose key or value holds escaped text until the object is complete.
    escaped: std.ArrayList(EscapedPart),

    pub const empty: Scratch = .{ .entries = .empty, .strings = .empty, .escaped = .empty };

    /// Frees the buffers; entries handed out from this scratch become invalid.
    pub fn deinit(scratch: *Scratch, allocator: std.mem.Allocator) void {
        scratch.entries.deinit(allocator);
        scratch.strings.deinit(allocator);
        scratch.escaped.deinit(allocator);
        scratch.* = undefined;
    }

    fn clear(scratch: *Scratch) void {
        scratch.entries.clearRetainingCapacity();
        scratch.strings.clearRetainingCapacity();
        scratch.escaped.clearRetainingCapacity();
    }
};

const EscapedPart = struct {
    entry_index: u32,
    part: enum { key, value },
};

/// Parses the ingest batch: a JSON array of flat objects, as written by Python's
/// `json.dumps(..., separators=(",", ":"), ensure_ascii=True, allow_nan=True)`, though any
/// valid JSON spacing and raw UTF-8 are accepted too.
///
/// Call `nextObject` until it returns null, then `finish`. After any error the parser is
/// spent. `nextObject` does not reject duplicate keys: `inferSchema` and `matchSchema` do,
/// as they look every key up anyway.
pub const Parser = struct {
    cursor: Cursor,
    state: State,
    /// Objects returned so far, which is the batch position of the next one; callers use it
    /// to prefix messages with the sample they concern.
    object_count: u64,

    const State = enum { before_array, in_array, done };

    /// InvalidMetadata always comes with a message in the diagnostic.
    pub const Error = error{ InvalidMetadata, OutOfMemory };

    /// A parser over the whole batch text, which must outlive every entry it returns.
    pub fn init(text: []const u8) Parser {
        return .{ .cursor = .{ .text = text }, .state = .before_array, .object_count = 0 };
    }

    /// Parses the next object into `scratch` and returns its entries in input order, or
    /// null after the closing ']'. The entries stay valid until the next call that uses
    /// `scratch`, and as long as the text does.
    pub fn nextObject(
        parser: *Parser,
        allocator: std.mem.Allocator,
        scratch: *Scratch,
        diagnostic: *Diagnostic,
    ) Error!?[]const Entry {
        if (!try parser.advanceToObject(diagnostic)) return null;
        const entries = try parser.parseObject(allocator, scratch, diagnostic);
        parser.object_count += 1;
        return entries;
    }

    /// Checks that only whitespace follows the array; call after `nextObject` returned null.
    pub fn finish(parser: *Parser, diagnostic: *Diagnostic) error{InvalidMetadata}!void {
        assert(parser.state == .done);
        parser.cursor.skipWhitespace();
        if (parser.cursor.position != parser.cursor.text.len) {
            return parser.malformed(diagnostic, "the end of the input after ']'");
        }
    }

    /// Moves past the '[' or ',' before the next object; false once ']' is consumed.
    fn advanceToObject(parser: *Parser, diagnostic: *Diagnostic) error{InvalidMetadata}!bool {
        const cursor = &parser.cursor;
        switch (parser.state) {
            .done => return false,
            .before_array => {
                if (!cursor.consume('[')) return parser.malformed(
                    diagnostic,
                    "'[' opening the batch",
                );
                parser.state = .in_array;
                if (!cursor.consume(']')) return true;
            },
            .in_array => {
                if (cursor.consume(',')) return true;
                if (!cursor.consume(']')) return parser.malformed(
                    diagnostic,
                    "',' or ']' after an object",
                );
            },
        }
        parser.state = .done;
        return false;
    }

    fn parseObject(
        parser: *Parser,
        allocator: std.mem.Allocator,
        scratch: *Scratch,
        diagnostic: *Diagnostic,
    ) Error![]const Entry {
        const cursor = &parser.cursor;
        scratch.clear();
        if (!cursor.consume('{')) return parser.malformed(diagnostic, "'{' opening an object");
        if (cursor.consume('}')) {
            diagnostic.set("metadata must have at least one field", .{});
            return error.InvalidMetadata;
        }
        while (true) {
            try parser.parseEntry(allocator, scratch, diagnostic);
            if (cursor.consume('}')) break;
            if (!cursor.consume(',')) return parser.malformed(
                diagnostic,
                "',' or '}' after a field",
            );
        }
        try unescapeStrings(allocator, scratch);
        return scratch.entries.items;
    }

    fn parseEntry(
        parser: *Parser,
        allocator: std.mem.Allocator,
        scratch: *Scratch,
        diagnostic: *Diagnostic,
    ) Error!void {
        const cursor = &parser.cursor;
        if (scratch.entries.items.len == fields_max) {
            diagnostic.set("metadata has more than {d} fields", .{fields_max});
            return error.InvalidMetadata;
        }
        if (cursor.peek() != '"') return parser.malformed(diagnostic, "'\"' opening a key");
        const key_position = cursor.position;
        const key = cursor.scanString() catch |err| switch (err) {
            error.Malformed => return parser.malformed(diagnostic, "a valid key string"),
            error.InvalidUnicode => {
                diagnostic.set("metadata key at byte {d} is not valid Unicode", .{key_position});
                return error.InvalidMetadata;
            },
        };
        if (!cursor.consume(':')) return parser.malformed(diagnostic, "':' after a key");
        // Until the object is complete, escaped keys and strings stay escaped: unescaping
        // into `scratch.strings` now could move slices handed out earlier when it grows.
        const value = try parser.parseValue(key.body, diagnostic);
        const entry_index: u32 = @intCast(scratch.entries.items.len);
        if (key.escaped) try scratch.escaped.append(
            allocator,
            .{ .entry_index = entry_index, .part = .key },
        );
        if (value.escaped) try scratch.escaped.append(
            allocator,
            .{ .entry_index = entry_index, .part = .value },
        );
        try scratch.entries.append(allocator, .{ .key = key.body, .value = value.value });
    }

    const ParsedValue = struct { value: Value, escaped: bool = false };

    /// `key` is the raw key text, used only to name the field in messages.
    fn parseValue(
        parser: *Parser,
        key: []const u8,
        diagnostic: *Diagnostic,
    ) error{InvalidMetadata}!ParsedValue {
        const cursor = &parser.cursor;
        const byte = cursor.peek() orelse return parser.malformed(diagnostic, "a value");
        switch (byte) {
            '"' => {
                const token = cursor.scanString() catch |err| switch (err) {
                    error.Malformed => return parser.malformed(diagnostic, "a valid string"),
                    error.InvalidUnicode => {
                        diagnostic.set(
                            "metadata field '{f}' is not valid Unicode (a lone surrogate or " ++
                                "bad UTF-8)",
                            .{Excerpt.ofName(key)},
                        );
                        return error.InvalidMetadata;
                    },
                };
                return .{ .value = .{ .string = token.body }, .escaped = token.escaped };
            },
            't', 'f' => {
                if (cursor.consumeLiteral("true")) return .{ .value = .{ .bool = true } };
                if (cursor.consumeLiteral("false")) return .{ .value = .{ .bool = false } };
            },
            'n' => if (cursor.consumeLiteral("null")) return nonPrimitive(key, "None", diagnostic),
            '[' => return nonPrimitive(key, "list", diagnostic),
            '{' => return nonPrimitive(key, "dict", diagnostic),
            'N', 'I', '-' => {
                inline for (.{ "NaN", "Infinity", "-Infinity" }) |literal| {
                    if (cursor.consumeLiteral(literal)) return nonFinite(key, literal, diagnostic);
                }
                if (byte == '-') return .{ .value = try parser.parseNumber(key, diagnostic) };
            },
            '0'...'9' => return .{ .value = try parser.parseNumber(key, diagnostic) },
            else => {},
        }
        return parser.malformed(diagnostic, "a value");
    }

    fn parseNumber(
        parser: *Parser,
        key: []const u8,
        diagnostic: *Diagnostic,
    ) error{InvalidMetadata}!Value {
        const token = parser.cursor.scanNumber() catch return parser.malformed(
            diagnostic,
            "a valid number",
        );
        if (!token.is_float) {
            const integer = parseInt64(token.text) orelse {
                diagnostic.set(
                    "metadata field '{f}' integer {f} is outside the signed 64-bit range",
                    .{ Excerpt.ofName(key), Excerpt.of(token.text) },
                );
                return error.InvalidMetadata;
            };
            return .{ .int = integer };
        }
        const float = std.fmt.parseFloat(f64, token.text) catch return parser.malformed(
            diagnostic,
            "a valid number",
        );
        if (!std.math.isFinite(float)) return nonFinite(key, token.text, diagnostic);
        return .{ .float = float };
    }

    fn malformed(
        parser: *const Parser,
        diagnostic: *Diagnostic,
        expected: []const u8,
    ) error{InvalidMetadata} {
        const cursor = parser.cursor;
        if (cursor.position >= cursor.text.len) {
            diagnostic.set("metadata JSON ends early: expected {s}", .{expected});
        } else {
            diagnostic.set(
                "metadata JSON is malformed at byte {d}: expected {s}",
                .{ cursor.position, expected },
            );
        }
        return error.InvalidMetadata;
    }
};

fn nonPrimitive(
    key: []const u8,
    python_type: []const u8,
    diagnostic: *Diagnostic,
) error{InvalidMetadata} {
    diagnostic.set(
        "metadata field '{f}' must be bool, int, float or str, got {s}",
        .{ Excerpt.ofName(key), python_type },
    );
    return error.InvalidMetadata;
}

fn nonFinite(key: []const u8, token: []const u8, diagnostic: *Diagnostic) error{InvalidMetadata} {
    diagnostic.set(
        "metadata field '{f}' is a non-finite float ({f})",
        .{ Excerpt.ofName(key), Excerpt.of(token) },
    );
    return error.InvalidMetadata;
}

/// Replaces the escaped text of the current object's entries with its unescaped bytes.
fn unescapeStrings(allocator: std.mem.Allocator, scratch: *Scratch) error{OutOfMemory}!void {
    if (scratch.escaped.items.len == 0) return;
    const entries = scratch.entries.items;
    // Unescaped text is never longer than escaped text, so reserving the escaped length
    // up front means `strings` never moves while slices into it are handed out.
    var bytes_max: usize = 0;
    for (scratch.escaped.items) |escaped| {
        const entry = entries[escaped.entry_index];
        bytes_max += switch (escaped.part) {
            .key => entry.key.len,
            .value => entry.value.string.len,
        };
    }
    try scratch.strings.ensureTotalCapacity(allocator, bytes_max);
    for (scratch.escaped.items) |escaped| {
        const entry = &entries[escaped.entry_index];
        switch (escaped.part) {
            .key => entry.key = unescapeInto(&scratch.strings, entry.key),
            .value => entry.value = .{
                .string = unescapeInto(&scratch.strings, entry.value.string),
            },
        }
    }
}

fn unescapeInto(strings: *std.ArrayList(u8), body: []const u8) []const u8 {
    const start = strings.items.len;
    var unescaper: Unescaper = .{ .body = body };
    while (unescaper.next()) |piece| strings.appendSliceAssumeCapacity(piece);
    return strings.items[start..];
}

/// Infers the schema from the first object: its keys sorted bytewise, each with the kind of
/// its value. Names are copied; release the result with `freeSchema`.
pub fn inferSchema(
    allocator: std.mem.Allocator,
    entries: []const Entry,
    diagnostic: *Diagnostic,
) error{ InvalidMetadata, OutOfMemory }![]Field {
    const fields = try allocator.alloc(Field, entries.len);
    defer allocator.free(fields);
    for (entries, fields) |entry, *field| field.* = .{
        .name = entry.key,
        .kind = std.meta.activeTag(entry.value),
    };
    return ownedSchema(allocator, fields, diagnostic);
}

/// The schema of these fields (names borrowed): at least one and at most
/// `fields_max`, names copied and sorted bytewise, none twice. Release with `freeSchema`.
pub fn ownedSchema(
    allocator: std.mem.Allocator,
    fields: []const Field,
    diagnostic: *Diagnostic,
) error{ InvalidMetadata, OutOfMemory }![]Field {
    if (fields.len == 0) {
        diagnostic.set("metadata must have at least one field", .{});
        return error.InvalidMetadata;
    }
    if (fields.len > fields_max) {
        diagnostic.set("metadata has more than {d} fields", .{fields_max});
        return error.InvalidMetadata;
    }
    const schema = try allocator.alloc(Field, fields.len);
    var names_copied: usize = 0;
    errdefer {
        for (schema[0..names_copied]) |field| allocator.free(field.name);
        allocator.free(schema);
    }
    for (fields, schema) |field, *owned| {
        owned.* = .{ .name = try allocator.dupe(u8, field.name), .kind = field.kind };
        names_copied += 1;
    }
    try sortSchema(schema, diagnostic);
    return schema;
}

/// Sorts a schema's fields bytewise by name; a name given twice is an error.
fn sortSchema(schema: []Field, diagnostic: *Diagnostic) error{InvalidMetadata}!void {
    std.mem.sort(Field, schema, {}, fieldLessThan);
    if (schema.len > 1) {
        for (schema[0 .. schema.len - 1], schema[1..]) |field, next| {
            if (std.mem.eql(u8, field.name, next.name)) {
                diagnostic.set("metadata field '{f}' appears twice", .{Excerpt.ofName(field.name)});
                return error.InvalidMetadata;
            }
        }
    }
    assert(metadata_types.isSortedUnique(schema));
}

/// Frees a schema returned by `inferSchema`.
pub fn freeSchema(allocator: std.mem.Allocator, schema: []const Field) void {
    for (schema) |field| allocator.free(field.name);
    allocator.free(schema);
}

fn fieldLessThan(_: void, a: Field, b: Field) bool {
    return std.mem.order(u8, a.name, b.name) == .lt;
}

/// Checks that `entries` has exactly the schema's keys, each with the schema's kind, and
/// writes the values into `values_out` in schema order. String values borrow from
/// `entries`.
pub fn matchSchema(
    schema: []const Field,
    entries: []const Entry,
    values_out: []Value,
    diagnostic: *Diagnostic,
) error{InvalidMetadata}!void {
    assert(values_out.len == schema.len);
    assert(schema.len <= fields_max);
    var seen: FieldSet = .init(schema.len);
    var unexpected: ?[]const u8 = null;
    for (entries) |entry| {
        const index = findField(schema, entry.key) orelse {
            if (unexpected == null) unexpected = entry.key;
            continue;
        };
        if (seen.testAndSet(index)) {
            diagnostic.set("metadata field '{f}' appears twice", .{Excerpt.ofName(entry.key)});
            return error.InvalidMetadata;
        }
        const kind = std.meta.activeTag(entry.value);
        if (kind != schema[index].kind) {
            diagnostic.set(
                "metadata field '{f}' changed type from {s} to {s}",
                .{ Excerpt.ofName(entry.key), schema[index].kind.name(), kind.name() },
            );
            return error.InvalidMetadata;
        }
        values_out[index] = entry.value;
    }
    const missing = seen.firstUnset();
    if (missing != null and unexpected != null) {
        diagnostic.set(
            "metadata is missing key '{f}' and has unexpected key '{f}'",
            .{ Excerpt.ofName(schema[missing.?].name), Excerpt.ofName(unexpected.?) },
        );
    } else if (missing) |index| {
        diagnostic.set("metadata is missing key '{f}'", .{Excerpt.ofName(schema[index].name)});
    } else if (unexpected) |key| {
        diagnostic.set("metadata has unexpected key '{f}'", .{Excerpt.ofName(key)});
    } else {
        return;
    }
    return error.InvalidMetadata;
}

/// Binary search of a schema sorted by name.
pub fn findField(schema: []const Field, name: []const u8) ?usize {
    var low: usize = 0;
    var high: usize = schema.len;
    while (low < high) {
        const middle = low + (high - low) / 2;
        switch (std.mem.order(u8, schema[middle].name, name)) {
            .eq => return middle,
            .lt => low = middle + 1,
            .gt => high = middle,
        }
    }
    return null;
}

/// Which schema fields an object has named so far.
pub const FieldSet = struct {
    words: [fields_max / 64]u64,
    count: usize,

    pub fn init(count: usize) FieldSet {
        assert(count <= fields_max);
        var set: FieldSet = .{ .words = undefined, .count = count };
        // Only the words the schema uses are cleared: most schemas need one.
        @memset(set.words[0 .. (count + 63) / 64], 0);
        return set;
    }

    /// Marks `index` and tells whether it was already marked.
    pub fn testAndSet(set: *FieldSet, index: usize) bool {
        assert(index < set.count);
        const bit = @as(u64, 1) << @intCast(index % 64);
        const word = &set.words[index / 64];
        const was_set = word.* & bit != 0;
        word.* |= bit;
        return was_set;
    }

    pub fn firstUnset(set: *const FieldSet) ?usize {
        for (0..set.count) |index| {
            const bit = @as(u64, 1) << @intCast(index % 64);
            if (set.words[index / 64] & bit == 0) return index;
        }
        return null;
    }
};
