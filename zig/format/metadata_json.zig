//! Sample metadata as JSON, in three places:
//!
//! - ingest: the batch the Python binding sends, `json.dumps(list_of_dicts)` output,
//!   parsed one flat object at a time (`Parser`, `inferSchema`, `matchSchema`);
//! - canonical form: the compact object with sorted keys that every shard record
//!   embeds (`writeCanonical`), with floats laid out exactly like Python's `repr`;
//! - verification: a reader's check that a record's object holds the same values as
//!   its metadata.arrow row (`verifyRecord`).
//!
//! These are purpose-built scanners rather than std.json: the writer parses millions of
//! small objects and the reader checks one per materialized sample, so neither may
//! allocate per value. Every loop moves forward through its input and nothing recurses,
//! so hostile input costs at most time linear in its length.
const std = @import("std");
const assert = std.debug.assert;
const metadata_types = @import("metadata_types.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const Field = metadata_types.Field;
const Kind = metadata_types.Kind;
const Value = metadata_types.Value;

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
                if (!cursor.consume('[')) return parser.malformed(diagnostic, "'[' opening the batch");
                parser.state = .in_array;
                if (!cursor.consume(']')) return true;
            },
            .in_array => {
                if (cursor.consume(',')) return true;
                if (!cursor.consume(']')) return parser.malformed(diagnostic, "',' or ']' after an object");
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
            if (!cursor.consume(',')) return parser.malformed(diagnostic, "',' or '}' after a field");
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
        if (key.escaped) try scratch.escaped.append(allocator, .{ .entry_index = entry_index, .part = .key });
        if (value.escaped) try scratch.escaped.append(allocator, .{ .entry_index = entry_index, .part = .value });
        try scratch.entries.append(allocator, .{ .key = key.body, .value = value.value });
    }

    const ParsedValue = struct { value: Value, escaped: bool = false };

    /// `key` is the raw key text, used only to name the field in messages.
    fn parseValue(parser: *Parser, key: []const u8, diagnostic: *Diagnostic) error{InvalidMetadata}!ParsedValue {
        const cursor = &parser.cursor;
        const byte = cursor.peek() orelse return parser.malformed(diagnostic, "a value");
        switch (byte) {
            '"' => {
                const token = cursor.scanString() catch |err| switch (err) {
                    error.Malformed => return parser.malformed(diagnostic, "a valid string"),
                    error.InvalidUnicode => {
                        diagnostic.set("metadata field '{f}' is not valid Unicode (a lone surrogate or bad UTF-8)", .{Excerpt.ofName(key)});
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

    fn parseNumber(parser: *Parser, key: []const u8, diagnostic: *Diagnostic) error{InvalidMetadata}!Value {
        const token = parser.cursor.scanNumber() catch return parser.malformed(diagnostic, "a valid number");
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
        const float = std.fmt.parseFloat(f64, token.text) catch return parser.malformed(diagnostic, "a valid number");
        if (!std.math.isFinite(float)) return nonFinite(key, token.text, diagnostic);
        return .{ .float = float };
    }

    fn malformed(parser: *const Parser, diagnostic: *Diagnostic, expected: []const u8) error{InvalidMetadata} {
        const cursor = parser.cursor;
        if (cursor.position >= cursor.text.len) {
            diagnostic.set("metadata JSON ends early: expected {s}", .{expected});
        } else {
            diagnostic.set("metadata JSON is malformed at byte {d}: expected {s}", .{ cursor.position, expected });
        }
        return error.InvalidMetadata;
    }
};

fn nonPrimitive(key: []const u8, python_type: []const u8, diagnostic: *Diagnostic) error{InvalidMetadata} {
    diagnostic.set("metadata field '{f}' must be bool, int, float or str, got {s}", .{ Excerpt.ofName(key), python_type });
    return error.InvalidMetadata;
}

fn nonFinite(key: []const u8, token: []const u8, diagnostic: *Diagnostic) error{InvalidMetadata} {
    diagnostic.set("metadata field '{f}' is a non-finite float ({f})", .{ Excerpt.ofName(key), Excerpt.of(token) });
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
            .value => entry.value = .{ .string = unescapeInto(&scratch.strings, entry.value.string) },
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
    for (entries, fields) |entry, *field| field.* = .{ .name = entry.key, .kind = std.meta.activeTag(entry.value) };
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
fn findField(schema: []const Field, name: []const u8) ?usize {
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
const FieldSet = struct {
    words: [fields_max / 64]u64,
    count: usize,

    fn init(count: usize) FieldSet {
        assert(count <= fields_max);
        var set: FieldSet = .{ .words = undefined, .count = count };
        // Only the words the schema uses are cleared: most schemas need one.
        @memset(set.words[0 .. (count + 63) / 64], 0);
        return set;
    }

    /// Marks `index` and tells whether it was already marked.
    fn testAndSet(set: *FieldSet, index: usize) bool {
        assert(index < set.count);
        const bit = @as(u64, 1) << @intCast(index % 64);
        const word = &set.words[index / 64];
        const was_set = word.* & bit != 0;
        word.* |= bit;
        return was_set;
    }

    fn firstUnset(set: *const FieldSet) ?usize {
        for (0..set.count) |index| {
            const bit = @as(u64, 1) << @intCast(index % 64);
            if (set.words[index / 64] & bit == 0) return index;
        }
        return null;
    }
};

/// Appends the compact canonical JSON object for `values` (in schema order) to `out`: keys
/// in schema order, strings escaped like serde_json, floats exactly like Python's `repr`.
pub fn writeCanonical(
    allocator: std.mem.Allocator,
    schema: []const Field,
    values: []const Value,
    out: *std.ArrayList(u8),
) error{OutOfMemory}!void {
    assert(schema.len == values.len);
    assert(metadata_types.isSortedUnique(schema));
    // One reservation for the worst case lets every append below skip its capacity check.
    try out.ensureUnusedCapacity(allocator, canonicalBytesMax(schema, values));
    out.appendAssumeCapacity('{');
    for (schema, values, 0..) |field, value, index| {
        assert(std.meta.activeTag(value) == field.kind);
        if (index > 0) out.appendAssumeCapacity(',');
        appendString(out, field.name);
        out.appendAssumeCapacity(':');
        appendValue(out, value);
    }
    out.appendAssumeCapacity('}');
}

fn canonicalBytesMax(schema: []const Field, values: []const Value) usize {
    var bytes: usize = "{}".len;
    for (schema, values) |field, value| {
        bytes += ",".len + stringBytesMax(field.name) + ":".len + switch (value) {
            .bool => "false".len,
            .int => int_bytes_max,
            .float => float_bytes_max,
            .string => |string| stringBytesMax(string),
        };
    }
    return bytes;
}

fn stringBytesMax(string: []const u8) usize {
    return "\"\"".len + string.len * "\\u0000".len;
}

fn appendValue(out: *std.ArrayList(u8), value: Value) void {
    switch (value) {
        .bool => |flag| out.appendSliceAssumeCapacity(if (flag) "true" else "false"),
        .int => |integer| {
            var buffer: [int_bytes_max]u8 = undefined;
            out.appendSliceAssumeCapacity(formatInt(&buffer, integer));
        },
        .float => |float| {
            var buffer: [float_bytes_max]u8 = undefined;
            out.appendSliceAssumeCapacity(formatFloat(&buffer, float));
        },
        .string => |string| appendString(out, string),
    }
}

fn appendString(out: *std.ArrayList(u8), string: []const u8) void {
    out.appendAssumeCapacity('"');
    var start: usize = 0;
    while (true) {
        const end = plainRunEnd(.output, string, start);
        out.appendSliceAssumeCapacity(string[start..end]);
        if (end == string.len) break;
        appendEscape(out, string[end]);
        start = end + 1;
    }
    out.appendAssumeCapacity('"');
}

/// Escapes one byte the way serde_json does: short forms where JSON has them, else \u00xx.
fn appendEscape(out: *std.ArrayList(u8), byte: u8) void {
    const short: ?u8 = switch (byte) {
        '"' => '"',
        '\\' => '\\',
        0x08 => 'b',
        0x0c => 'f',
        '\n' => 'n',
        '\r' => 'r',
        '\t' => 't',
        else => null,
    };
    out.appendAssumeCapacity('\\');
    if (short) |letter| {
        out.appendAssumeCapacity(letter);
    } else {
        assert(byte < 0x20);
        const hex_digits = "0123456789abcdef";
        out.appendSliceAssumeCapacity(&.{ 'u', '0', '0', hex_digits[byte >> 4], hex_digits[byte & 0xf] });
    }
}

/// Appends `string` as a JSON string literal escaped the canonical way (see `writeCanonical`).
pub fn appendJsonString(allocator: std.mem.Allocator, out: *std.ArrayList(u8), string: []const u8) error{OutOfMemory}!void {
    try out.ensureUnusedCapacity(allocator, stringBytesMax(string));
    appendString(out, string);
}

/// "-9223372036854775808" is the longest i64.
const int_bytes_max = 20;

fn formatInt(buffer: *[int_bytes_max]u8, value: i64) []const u8 {
    var magnitude: u64 = @abs(value);
    var index: usize = buffer.len;
    while (true) {
        index -= 1;
        buffer[index] = '0' + @as(u8, @intCast(magnitude % 10));
        magnitude /= 10;
        if (magnitude == 0) break;
    }
    if (value < 0) {
        index -= 1;
        buffer[index] = '-';
    }
    return buffer[index..];
}

/// Room for any float `formatFloat` writes; the longest Python repr of a finite f64 is
/// 24 bytes ("-2.2250738585072014e-308").
pub const float_bytes_max = 32;

/// Formats a finite float exactly as Python's `repr` does: the shortest digits that round
/// trip, positional (`100.0`, `0.0001`) when the leading digit's decimal exponent is in
/// [-4, 16), else `d.ddde±XX` (`1e+16`, `1e-05`); so always with a '.' or an exponent.
pub fn formatFloat(buffer: *[float_bytes_max]u8, value: f64) []const u8 {
    assert(std.math.isFinite(value));
    const decimal = ShortestDecimal.of(value);
    var text: Text = .{ .buffer = buffer };
    if (decimal.negative) text.push('-');
    const digits = decimal.digits[0..decimal.digit_count];
    const point = decimal.point;
    if (point <= -4 or point > 16) {
        text.push(digits[0]);
        if (digits.len > 1) {
            text.push('.');
            text.pushSlice(digits[1..]);
        }
        const exponent = point - 1;
        text.pushSlice(if (exponent < 0) "e-" else "e+");
        // Python writes at least two exponent digits: 1e-05, 1e+16.
        if (@abs(exponent) < 10) text.push('0');
        var exponent_buffer: [int_bytes_max]u8 = undefined;
        text.pushSlice(formatInt(&exponent_buffer, @abs(exponent)));
    } else if (point <= 0) {
        text.pushSlice("0.");
        text.pushRepeated('0', @intCast(-point));
        text.pushSlice(digits);
    } else if (point < digits.len) {
        const whole: usize = @intCast(point);
        text.pushSlice(digits[0..whole]);
        text.push('.');
        text.pushSlice(digits[whole..]);
    } else {
        text.pushSlice(digits);
        text.pushRepeated('0', @as(usize, @intCast(point)) - digits.len);
        text.pushSlice(".0");
    }
    return text.written();
}

/// A float as its shortest round-trip decimal digits: value = 0.DIGITS × 10^point.
const ShortestDecimal = struct {
    negative: bool,
    digits: [17]u8,
    digit_count: u8,
    point: i32,

    fn of(value: f64) ShortestDecimal {
        // std's Ryu yields the shortest, closest digits but only as formatted text
        // ("-1.2345e-7"); the digits and exponent are read back from it.
        var scientific_buffer: [std.fmt.float.min_buffer_size]u8 = undefined;
        const scientific = std.fmt.float.render(&scientific_buffer, value, .{ .mode = .scientific }) catch unreachable;
        var decimal: ShortestDecimal = .{ .negative = false, .digits = undefined, .digit_count = 0, .point = 0 };
        var index: usize = 0;
        if (scientific[0] == '-') {
            decimal.negative = true;
            index = 1;
        }
        while (scientific[index] != 'e') : (index += 1) {
            if (scientific[index] == '.') continue;
            decimal.digits[decimal.digit_count] = scientific[index];
            decimal.digit_count += 1;
        }
        const exponent = std.fmt.parseInt(i32, scientific[index + 1 ..], 10) catch unreachable;
        while (decimal.digit_count > 1 and decimal.digits[decimal.digit_count - 1] == '0') {
            decimal.digit_count -= 1;
        }
        decimal.point = exponent + 1;
        assert(decimal.digit_count >= 1);
        return decimal;
    }
};

/// A bounded text builder over a caller's buffer; overflowing it is a programming error.
const Text = struct {
    buffer: []u8,
    length: usize = 0,

    fn push(text: *Text, byte: u8) void {
        text.buffer[text.length] = byte;
        text.length += 1;
    }

    fn pushSlice(text: *Text, bytes: []const u8) void {
        @memcpy(text.buffer[text.length..][0..bytes.len], bytes);
        text.length += bytes.len;
    }

    fn pushRepeated(text: *Text, byte: u8, count: usize) void {
        @memset(text.buffer[text.length..][0..count], byte);
        text.length += count;
    }

    fn written(text: *const Text) []const u8 {
        return text.buffer[0..text.length];
    }
};

/// Checks that `json`, a record's embedded metadata object, holds exactly the schema's fields
/// with values equal to `expected` (the metadata.arrow row, in schema order). Values are
/// compared, not text: keys in any order, any whitespace, any escapes, any float spelling
/// (`1e21`, `1E+21`, `1000000000000000000000.0`). The JSON is treated as hostile.
pub fn verifyRecord(
    schema: []const Field,
    expected: []const Value,
    json: []const u8,
    diagnostic: *Diagnostic,
) error{MetadataMismatch}!void {
    assert(schema.len == expected.len);
    if (isCanonicalOf(schema, expected, json)) return;
    return verifyInFull(schema, expected, json, diagnostic);
}

/// `verifyRecord` without the canonical fast path: the general scan, whose messages
/// name what differs.
fn verifyInFull(
    schema: []const Field,
    expected: []const Value,
    json: []const u8,
    diagnostic: *Diagnostic,
) error{MetadataMismatch}!void {
    var verifier: Verifier = .{
        .cursor = .{ .text = json },
        .schema = schema,
        .expected = expected,
        .seen = .init(schema.len),
        .field_count = 0,
        .diagnostic = diagnostic,
    };
    return verifier.verifyObject();
}

/// Whether `json` is, byte for byte, the canonical object (`writeCanonical`) of
/// `expected`, for the ASCII keys and strings that need no escape; the floats are
/// compared by value, since parsing one is cheaper than formatting it. Every text it
/// accepts is one `Verifier` accepts too; it exists because every record this
/// library writes is canonical, and matching that layout skips the general scan.
/// false means "not shown here", never "wrong": the caller then verifies in full.
fn isCanonicalOf(schema: []const Field, expected: []const Value, json: []const u8) bool {
    var position: usize = 0;
    if (!matchByte(json, &position, '{')) return false;
    for (schema, expected, 0..) |field, value, index| {
        if (index > 0 and !matchByte(json, &position, ',')) return false;
        if (!matchPlainString(json, &position, field.name)) return false;
        if (!matchByte(json, &position, ':')) return false;
        const matched = switch (value) {
            .bool => |flag| matchText(json, &position, if (flag) "true" else "false"),
            .int => |integer| blk: {
                var buffer: [int_bytes_max]u8 = undefined;
                break :blk matchText(json, &position, formatInt(&buffer, integer));
            },
            .float => |float| blk: {
                var cursor: Cursor = .{ .text = json, .position = position };
                const number = cursor.scanNumber() catch break :blk false;
                position = cursor.position;
                break :blk number.is_float and finiteFloatEquals(number.text, float);
            },
            .string => |string| matchPlainString(json, &position, string),
        };
        if (!matched) return false;
    }
    return matchByte(json, &position, '}') and position == json.len;
}

fn matchByte(json: []const u8, position: *usize, byte: u8) bool {
    if (position.* == json.len or json[position.*] != byte) return false;
    position.* += 1;
    return true;
}

fn matchText(json: []const u8, position: *usize, text: []const u8) bool {
    if (!std.mem.startsWith(u8, json[position.*..], text)) return false;
    position.* += text.len;
    return true;
}

/// `string` quoted, if it is ASCII without a quote, a backslash or a control character
/// (so its canonical literal is itself in quotes and holds no UTF-8 to check).
fn matchPlainString(json: []const u8, position: *usize, string: []const u8) bool {
    if (plainRunEnd(.input, string, 0) != string.len) return false;
    return matchByte(json, position, '"') and matchText(json, position, string) and matchByte(json, position, '"');
}

const Verifier = struct {
    cursor: Cursor,
    schema: []const Field,
    expected: []const Value,
    seen: FieldSet,
    field_count: usize,
    diagnostic: *Diagnostic,

    const Error = error{MetadataMismatch};

    fn verifyObject(verifier: *Verifier) Error!void {
        const cursor = &verifier.cursor;
        if (!cursor.consume('{')) return verifier.malformed("'{' opening the object");
        if (!cursor.consume('}')) {
            while (true) {
                try verifier.verifyField();
                if (cursor.consume('}')) break;
                if (!cursor.consume(',')) return verifier.malformed("',' or '}' after a field");
            }
        }
        cursor.skipWhitespace();
        if (cursor.position != cursor.text.len) return verifier.malformed("the end of the object");
        if (verifier.seen.firstUnset()) |index| {
            return verifier.fail("record metadata is missing field '{f}'", .{Excerpt.ofName(verifier.schema[index].name)});
        }
    }

    fn verifyField(verifier: *Verifier) Error!void {
        const cursor = &verifier.cursor;
        if (cursor.peek() != '"') return verifier.malformed("'\"' opening a key");
        const key_position = cursor.position;
        const key = cursor.scanString() catch |err| switch (err) {
            error.Malformed => return verifier.malformed("a valid key string"),
            error.InvalidUnicode => return verifier.fail("record metadata key at byte {d} is not valid Unicode", .{key_position}),
        };
        if (!cursor.consume(':')) return verifier.malformed("':' after a key");
        const index = verifier.findKey(key) orelse {
            return verifier.fail("record metadata has unexpected field '{f}'", .{Excerpt.of(key.body)});
        };
        const name = verifier.schema[index].name;
        if (verifier.seen.testAndSet(index)) return verifier.fail("record metadata field '{f}' appears twice", .{Excerpt.ofName(name)});
        verifier.field_count += 1;
        const token = try verifier.scanValue(name);
        if (!tokenEquals(token, verifier.expected[index])) return verifier.mismatch(name, token, verifier.expected[index]);
    }

    fn findKey(verifier: *const Verifier, key: StringToken) ?usize {
        const schema = verifier.schema;
        if (key.escaped) {
            for (schema, 0..) |field, index| {
                if (unescapedEquals(key.body, field.name)) return index;
            }
            return null;
        }
        // Canonical records list the fields in schema order, so try the next one first.
        const next = verifier.field_count;
        if (next < schema.len and std.mem.eql(u8, schema[next].name, key.body)) return next;
        return findField(schema, key.body);
    }

    fn scanValue(verifier: *Verifier, name: []const u8) Error!Token {
        const cursor = &verifier.cursor;
        const byte = cursor.peek() orelse return verifier.malformed("a value");
        switch (byte) {
            '"' => {
                const string = cursor.scanString() catch |err| switch (err) {
                    error.Malformed => return verifier.malformed("a valid string"),
                    error.InvalidUnicode => return verifier.fail("record metadata field '{f}' is not valid Unicode", .{Excerpt.ofName(name)}),
                };
                return .{ .string = string };
            },
            't' => if (cursor.consumeLiteral("true")) return .{ .bool = true },
            'f' => if (cursor.consumeLiteral("false")) return .{ .bool = false },
            'n' => if (cursor.consumeLiteral("null")) return .{ .other = "null" },
            '[' => return .{ .other = "an array" },
            '{' => return .{ .other = "an object" },
            '-', '0'...'9' => {
                const number = cursor.scanNumber() catch return verifier.malformed("a valid number");
                return .{ .number = number };
            },
            else => {},
        }
        return verifier.malformed("a value");
    }

    fn mismatch(verifier: *Verifier, name: []const u8, token: Token, expected: Value) Error {
        var token_buffer: [description_bytes_max]u8 = undefined;
        var value_buffer: [description_bytes_max]u8 = undefined;
        return verifier.fail(
            "record metadata field '{f}' does not match metadata.arrow: the record has {s}, the table has {s}",
            .{ Excerpt.ofName(name), describeToken(&token_buffer, token), describeValue(&value_buffer, expected) },
        );
    }

    fn malformed(verifier: *Verifier, expected: []const u8) Error {
        const cursor = verifier.cursor;
        if (cursor.position >= cursor.text.len) {
            return verifier.fail("record metadata JSON ends early: expected {s}", .{expected});
        }
        return verifier.fail("record metadata JSON is malformed at byte {d}: expected {s}", .{ cursor.position, expected });
    }

    fn fail(verifier: *Verifier, comptime format: []const u8, args: anytype) Error {
        verifier.diagnostic.set(format, args);
        return error.MetadataMismatch;
    }
};

/// One value of a record as scanned, before it is compared.
const Token = union(enum) {
    bool: bool,
    number: NumberToken,
    string: StringToken,
    /// A JSON value no metadata field can hold, described for the message.
    other: []const u8,
};

fn tokenEquals(token: Token, expected: Value) bool {
    return switch (expected) {
        .bool => |flag| token == .bool and token.bool == flag,
        .int => |integer| token == .number and !token.number.is_float and
            parseInt64(token.number.text) == integer,
        .float => |float| token == .number and token.number.is_float and
            finiteFloatEquals(token.number.text, float),
        .string => |string| token == .string and if (token.string.escaped)
            unescapedEquals(token.string.body, string)
        else
            std.mem.eql(u8, token.string.body, string),
    };
}

/// Whether the number `text` is finite and equal to `expected` bit for bit, as
/// `Value.eql` has it (-0.0 differs from 0.0). Metadata floats are finite, so `1e999`
/// matches nothing, not even an infinity in a damaged table.
fn finiteFloatEquals(text: []const u8, expected: f64) bool {
    const float = std.fmt.parseFloat(f64, text) catch return false;
    return std.math.isFinite(float) and @as(u64, @bitCast(float)) == @as(u64, @bitCast(expected));
}

/// Bytes of a value quoted in a message: an excerpt whose every byte may print
/// as `\xNN`, then the ellipsis and quotes.
const description_bytes_max = 4 * Excerpt.text_bytes_max + "\"...\"".len;

fn describeToken(buffer: *[description_bytes_max]u8, token: Token) []const u8 {
    const text = switch (token) {
        .bool => |flag| return if (flag) "true" else "false",
        .other => |description| return description,
        .number => |number| Excerpt.of(number.text),
        .string => |string| Excerpt.of(string.body),
    };
    const quote = if (token == .string) "\"" else "";
    return std.fmt.bufPrint(buffer, "{s}{f}{s}", .{ quote, text, quote }) catch unreachable;
}

fn describeValue(buffer: *[description_bytes_max]u8, value: Value) []const u8 {
    return switch (value) {
        .bool => |flag| if (flag) "true" else "false",
        .int => |integer| formatInt(buffer[0..int_bytes_max], integer),
        .float => |float| if (std.math.isFinite(float))
            formatFloat(buffer[0..float_bytes_max], float)
        else
            std.fmt.bufPrint(buffer, "{d}", .{float}) catch unreachable,
        .string => |string| std.fmt.bufPrint(buffer, "\"{f}\"", .{Excerpt.of(string)}) catch unreachable,
    };
}

/// The lexer both directions share: a position in a text and JSON's token rules.
const Cursor = struct {
    text: []const u8,
    position: usize = 0,

    const ScanError = error{ Malformed, InvalidUnicode };

    fn skipWhitespace(cursor: *Cursor) void {
        while (cursor.position < cursor.text.len) : (cursor.position += 1) {
            switch (cursor.text[cursor.position]) {
                ' ', '\t', '\n', '\r' => {},
                else => return,
            }
        }
    }

    /// The next byte after whitespace, not consumed; null at the end of the text.
    fn peek(cursor: *Cursor) ?u8 {
        cursor.skipWhitespace();
        if (cursor.position == cursor.text.len) return null;
        return cursor.text[cursor.position];
    }

    /// Consumes `byte` if it comes next after whitespace.
    fn consume(cursor: *Cursor, byte: u8) bool {
        if (cursor.peek() != byte) return false;
        cursor.position += 1;
        return true;
    }

    /// Consumes `literal` if the text continues with it here.
    fn consumeLiteral(cursor: *Cursor, literal: []const u8) bool {
        if (!std.mem.startsWith(u8, cursor.text[cursor.position..], literal)) return false;
        cursor.position += literal.len;
        return true;
    }

    /// Scans the string whose opening quote is at the cursor, checking its escapes and UTF-8,
    /// and leaves the cursor after the closing quote. On error the cursor is at the fault.
    fn scanString(cursor: *Cursor) ScanError!StringToken {
        const text = cursor.text;
        assert(text[cursor.position] == '"');
        const start = cursor.position + 1;
        var index = start;
        var escaped = false;
        while (true) {
            index = plainRunEnd(.input, text, index);
            if (index == text.len) break;
            const byte = text[index];
            const next = switch (byte) {
                '"' => {
                    cursor.position = index + 1;
                    return .{ .body = text[start..index], .escaped = escaped };
                },
                '\\' => scanEscape(text, index),
                0...0x1f => error.Malformed,
                else => scanUtf8(text, index),
            };
            index = next catch |err| {
                cursor.position = index;
                return err;
            };
            if (byte == '\\') escaped = true;
        }
        cursor.position = index;
        return error.Malformed;
    }

    /// Scans a JSON number at the cursor; on error the cursor is at the fault.
    fn scanNumber(cursor: *Cursor) error{Malformed}!NumberToken {
        const text = cursor.text;
        const start = cursor.position;
        var index = start;
        if (index < text.len and text[index] == '-') index += 1;
        if (index < text.len and text[index] == '0') {
            index += 1;
            // JSON numbers have no leading zeros: "01" is malformed, not 0 then junk.
            if (index < text.len and std.ascii.isDigit(text[index])) {
                cursor.position = index;
                return error.Malformed;
            }
        } else {
            index = try cursor.digits(index);
        }
        var is_float = false;
        if (index < text.len and text[index] == '.') {
            is_float = true;
            index = try cursor.digits(index + 1);
        }
        if (index < text.len and (text[index] == 'e' or text[index] == 'E')) {
            is_float = true;
            index += 1;
            if (index < text.len and (text[index] == '+' or text[index] == '-')) index += 1;
            index = try cursor.digits(index);
        }
        cursor.position = index;
        return .{ .text = text[start..index], .is_float = is_float };
    }

    /// The end of the run of one or more digits at `start`.
    fn digits(cursor: *Cursor, start: usize) error{Malformed}!usize {
        var index = start;
        while (index < cursor.text.len and std.ascii.isDigit(cursor.text[index])) index += 1;
        if (index == start) {
            cursor.position = start;
            return error.Malformed;
        }
        return index;
    }
};

/// A string as it appears between its quotes, still escaped.
const StringToken = struct {
    body: []const u8,
    escaped: bool,
};

/// A number token; a '.' or an exponent makes it a float, as in Python.
const NumberToken = struct {
    text: []const u8,
    is_float: bool,
};

/// Which bytes end a run that copies through unchanged: reading JSON stops at non-ASCII
/// too (to check its UTF-8); writing JSON passes it through raw.
const RunKind = enum { input, output };

/// The index of the first byte at or after `start` that is a quote, a backslash, a control
/// character, or (for `.input`) non-ASCII; `bytes.len` if there is none.
fn plainRunEnd(comptime kind: RunKind, bytes: []const u8, start: usize) usize {
    const lanes = 16;
    const Chunk = @Vector(lanes, u8);
    var index = start;
    while (index + lanes <= bytes.len) : (index += lanes) {
        const chunk: Chunk = bytes[index..][0..lanes].*;
        var special = (chunk == @as(Chunk, @splat('"'))) | (chunk == @as(Chunk, @splat('\\'))) |
            (chunk < @as(Chunk, @splat(0x20)));
        if (kind == .input) special |= chunk >= @as(Chunk, @splat(0x80));
        const mask: u16 = @bitCast(special);
        if (mask != 0) return index + @ctz(mask);
    }
    while (index < bytes.len and !isSpecial(kind, bytes[index])) index += 1;
    return index;
}

fn isSpecial(comptime kind: RunKind, byte: u8) bool {
    return byte == '"' or byte == '\\' or byte < 0x20 or (kind == .input and byte >= 0x80);
}

/// Checks the escape whose backslash is at `index` and returns the index after it. A
/// `\uXXXX` surrogate must come as a high-low pair; Python emits lone ones, which are not
/// Unicode text.
fn scanEscape(text: []const u8, index: usize) Cursor.ScanError!usize {
    assert(text[index] == '\\');
    if (index + 1 == text.len) return error.Malformed;
    switch (text[index + 1]) {
        '"', '\\', '/', 'b', 'f', 'n', 'r', 't' => return index + 2,
        'u' => {},
        else => return error.Malformed,
    }
    const unit = try hexUnit(text, index + 2);
    if (isLowSurrogate(unit)) return error.InvalidUnicode;
    if (!isHighSurrogate(unit)) return index + 6;
    if (!std.mem.startsWith(u8, text[index + 6 ..], "\\u")) return error.InvalidUnicode;
    const low = try hexUnit(text, index + 8);
    if (!isLowSurrogate(low)) return error.InvalidUnicode;
    return index + 12;
}

fn hexUnit(text: []const u8, start: usize) error{Malformed}!u16 {
    if (text.len < start + 4) return error.Malformed;
    var unit: u16 = 0;
    for (text[start..][0..4]) |byte| {
        unit = unit * 16 + (std.fmt.charToDigit(byte, 16) catch return error.Malformed);
    }
    return unit;
}

fn isHighSurrogate(unit: u21) bool {
    return unit >= 0xd800 and unit <= 0xdbff;
}

fn isLowSurrogate(unit: u21) bool {
    return unit >= 0xdc00 and unit <= 0xdfff;
}

/// Checks the UTF-8 sequence starting at `index` (a non-ASCII byte) and returns the index
/// after it. Overlong forms, surrogates and code points past U+10FFFF are refused.
fn scanUtf8(text: []const u8, index: usize) Cursor.ScanError!usize {
    const length = std.unicode.utf8ByteSequenceLength(text[index]) catch return error.InvalidUnicode;
    if (text.len - index < length) return error.InvalidUnicode;
    const sequence = text[index..][0..length];
    const valid = switch (length) {
        2 => if (std.unicode.utf8Decode2(sequence[0..2].*)) |_| true else |_| false,
        3 => if (std.unicode.utf8Decode3(sequence[0..3].*)) |_| true else |_| false,
        4 => if (std.unicode.utf8Decode4(sequence[0..4].*)) |_| true else |_| false,
        else => false,
    };
    if (!valid) return error.InvalidUnicode;
    return index + length;
}

/// Yields the unescaped bytes of a string body that `Cursor.scanString` accepted.
const Unescaper = struct {
    body: []const u8,
    position: usize = 0,
    character: [4]u8 = undefined,

    /// The next piece: a run of literal bytes, or the UTF-8 of one escape.
    fn next(unescaper: *Unescaper) ?[]const u8 {
        const body = unescaper.body;
        const start = unescaper.position;
        if (start == body.len) return null;
        if (body[start] != '\\') {
            const end = std.mem.findScalarPos(u8, body, start, '\\') orelse body.len;
            unescaper.position = end;
            return body[start..end];
        }
        const simple: u8 = switch (body[start + 1]) {
            'b' => 0x08,
            'f' => 0x0c,
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => return unescaper.nextCodePoint(),
            else => |byte| byte,
        };
        unescaper.position = start + 2;
        unescaper.character[0] = simple;
        return unescaper.character[0..1];
    }

    fn nextCodePoint(unescaper: *Unescaper) []const u8 {
        const body = unescaper.body;
        const start = unescaper.position;
        var code_point: u21 = hexUnit(body, start + 2) catch unreachable;
        unescaper.position = start + 6;
        if (isHighSurrogate(code_point)) {
            const low: u21 = hexUnit(body, start + 8) catch unreachable;
            code_point = 0x10000 + ((code_point - 0xd800) << 10) + (low - 0xdc00);
            unescaper.position = start + 12;
        }
        const length = std.unicode.utf8Encode(code_point, &unescaper.character) catch unreachable;
        return unescaper.character[0..length];
    }
};

fn unescapedEquals(body: []const u8, expected: []const u8) bool {
    var unescaper: Unescaper = .{ .body = body };
    var offset: usize = 0;
    while (unescaper.next()) |piece| {
        if (piece.len > expected.len - offset) return false;
        if (!std.mem.eql(u8, piece, expected[offset..][0..piece.len])) return false;
        offset += piece.len;
    }
    return offset == expected.len;
}

/// Parses a JSON integer token (`-?digits`), or null when it is outside i64.
fn parseInt64(token: []const u8) ?i64 {
    const negative = token[0] == '-';
    const digits = token[@intFromBool(negative)..];
    assert(digits.len > 0);
    var magnitude: u64 = 0;
    for (digits) |digit| {
        assert(std.ascii.isDigit(digit));
        const times_ten = @mulWithOverflow(magnitude, 10);
        if (times_ten[1] != 0) return null;
        const sum = @addWithOverflow(times_ten[0], digit - '0');
        if (sum[1] != 0) return null;
        magnitude = sum[0];
    }
    if (negative) {
        if (magnitude > @as(u64, 1) << 63) return null;
        return @intCast(-@as(i128, magnitude));
    }
    if (magnitude > std.math.maxInt(i64)) return null;
    return @intCast(magnitude);
}

const testing = std.testing;

/// Parses a one-object batch with the testing allocator's scratch; returns the message
/// on failure so tests can compare it.
fn expectBatchError(batch: []const u8, message: []const u8) !void {
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    var parser: Parser = .init(batch);
    const result = while (true) {
        const entries = (parser.nextObject(testing.allocator, &scratch, &diagnostic) catch |err| break err) orelse
            break parser.finish(&diagnostic);
        _ = entries;
    };
    try testing.expectError(error.InvalidMetadata, result);
    try testing.expectEqualStrings(message, diagnostic.message());
}

fn expectEntries(batch: []const u8, expected: []const Entry) !void {
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    var parser: Parser = .init(batch);
    const entries = (try parser.nextObject(testing.allocator, &scratch, &diagnostic)).?;
    try testing.expectEqual(expected.len, entries.len);
    for (expected, entries) |want, got| {
        try testing.expectEqualStrings(want.key, got.key);
        try testing.expect(want.value.eql(got.value));
    }
    try testing.expect(try parser.nextObject(testing.allocator, &scratch, &diagnostic) == null);
    try parser.finish(&diagnostic);
}

fn floatFromBits(bits: u64) f64 {
    return @bitCast(bits);
}

test "ingest parses a Python batch in key order, with every value form" {
    try expectEntries(
        \\[{"index":3,"label":"b","score":0.3333333333333333,"flag":true,"big":1e+21,"neg":-0.0,"off":false,"small":1e-07}]
    , &.{
        .{ .key = "index", .value = .{ .int = 3 } },
        .{ .key = "label", .value = .{ .string = "b" } },
        .{ .key = "score", .value = .{ .float = 0.3333333333333333 } },
        .{ .key = "flag", .value = .{ .bool = true } },
        .{ .key = "big", .value = .{ .float = 1e21 } },
        .{ .key = "neg", .value = .{ .float = -0.0 } },
        .{ .key = "off", .value = .{ .bool = false } },
        .{ .key = "small", .value = .{ .float = 1e-7 } },
    });
}

test "ingest accepts whitespace, raw UTF-8 and an empty key" {
    try expectEntries(" [ { \"\" : 1 ,\n\t\"caf\xc3\xa9\" : \"\xe2\x82\xac\xf0\x9f\x98\x80\" } ] \n", &.{
        .{ .key = "", .value = .{ .int = 1 } },
        .{ .key = "caf\xc3\xa9", .value = .{ .string = "\xe2\x82\xac\xf0\x9f\x98\x80" } },
    });
}

test "ingest unescapes every escape, surrogate pairs included" {
    try expectEntries(
        \\[{"k\u00e9y\"":"a\"b\\c\/d\b\f\n\r\t\u0000\u00e9\u20ac\ud83d\ude00","plain":"x","t\tab":"\ud83d\ude00"}]
    , &.{
        .{ .key = "k\xc3\xa9y\"", .value = .{ .string = "a\"b\\c/d\x08\x0c\n\r\t\x00\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" } },
        .{ .key = "plain", .value = .{ .string = "x" } },
        .{ .key = "t\tab", .value = .{ .string = "\xf0\x9f\x98\x80" } },
    });
}

test "ingest returns each object of a batch in turn" {
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    var parser: Parser = .init(
        \\[{"a":1,"s":"\u00e9"},{"s":"x\ty","a":2},{"a":3,"s":""}]
    );
    const expected_a = [_]i64{ 1, 2, 3 };
    const expected_s = [_][]const u8{ "\xc3\xa9", "x\ty", "" };
    var count: usize = 0;
    while (try parser.nextObject(testing.allocator, &scratch, &diagnostic)) |entries| : (count += 1) {
        try testing.expectEqual(count + 1, parser.object_count);
        for (entries) |entry| {
            if (std.mem.eql(u8, entry.key, "a")) try testing.expectEqual(expected_a[count], entry.value.int);
            if (std.mem.eql(u8, entry.key, "s")) try testing.expectEqualStrings(expected_s[count], entry.value.string);
        }
    }
    try parser.finish(&diagnostic);
    try testing.expectEqual(@as(usize, 3), count);
}

test "ingest accepts an empty batch" {
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    var parser: Parser = .init(" [ ] ");
    try testing.expect(try parser.nextObject(testing.allocator, &scratch, &diagnostic) == null);
    try parser.finish(&diagnostic);
}

test "ingest integers cover exactly the signed 64-bit range" {
    try expectEntries("[{\"a\":9223372036854775807,\"b\":-9223372036854775808,\"c\":-0,\"d\":0}]", &.{
        .{ .key = "a", .value = .{ .int = std.math.maxInt(i64) } },
        .{ .key = "b", .value = .{ .int = std.math.minInt(i64) } },
        .{ .key = "c", .value = .{ .int = 0 } },
        .{ .key = "d", .value = .{ .int = 0 } },
    });
    try expectBatchError("[{\"n\":9223372036854775808}]", "metadata field 'n' integer 9223372036854775808 is outside the signed 64-bit range");
    try expectBatchError("[{\"n\":-9223372036854775809}]", "metadata field 'n' integer -9223372036854775809 is outside the signed 64-bit range");
    const ones_60: [60]u8 = @splat('1');
    const ones_40: [40]u8 = @splat('1');
    try expectBatchError(
        "[{\"n\":" ++ ones_60 ++ "}]",
        "metadata field 'n' integer " ++ ones_40 ++ "... is outside the signed 64-bit range",
    );
}

test "ingest rejects values that are not bool, int, float or str" {
    try expectBatchError("[{\"x\":[1,2]}]", "metadata field 'x' must be bool, int, float or str, got list");
    try expectBatchError("[{\"x\":{\"y\":1}}]", "metadata field 'x' must be bool, int, float or str, got dict");
    try expectBatchError("[{\"a\":1,\"x\":null}]", "metadata field 'x' must be bool, int, float or str, got None");
}

test "ingest rejects non-finite floats" {
    try expectBatchError("[{\"score\":NaN}]", "metadata field 'score' is a non-finite float (NaN)");
    try expectBatchError("[{\"score\":Infinity}]", "metadata field 'score' is a non-finite float (Infinity)");
    try expectBatchError("[{\"score\":-Infinity}]", "metadata field 'score' is a non-finite float (-Infinity)");
    try expectBatchError("[{\"score\":1e400}]", "metadata field 'score' is a non-finite float (1e400)");
    try expectBatchError("[{\"score\":-1e99999999999999999999}]", "metadata field 'score' is a non-finite float (-1e99999999999999999999)");
}

test "ingest rejects strings that are not valid Unicode" {
    const message = "metadata field 'x' is not valid Unicode (a lone surrogate or bad UTF-8)";
    try expectBatchError("[{\"x\":\"\\ud800\"}]", message);
    try expectBatchError("[{\"x\":\"a\\ud800b\"}]", message);
    try expectBatchError("[{\"x\":\"\\ud800\\u0041\"}]", message);
    try expectBatchError("[{\"x\":\"\\ud800\\n\"}]", message);
    try expectBatchError("[{\"x\":\"\\udc00\\ud800\"}]", message);
    try expectBatchError("[{\"x\":\"\\ud800\\ud800\"}]", message);
    try expectBatchError("[{\"x\":\"\xff\"}]", message);
    try expectBatchError("[{\"x\":\"\xc3\"}]", message);
    try expectBatchError("[{\"x\":\"\xc0\xaf\"}]", message);
    try expectBatchError("[{\"x\":\"\xed\xa0\x80\"}]", message);
    try expectBatchError("[{\"x\":\"\xf4\x90\x80\x80\"}]", message);
    try expectBatchError("[{\"\\udfff\":1}]", "metadata key at byte 2 is not valid Unicode");
}

test "ingest rejects an empty object" {
    try expectBatchError("[{\"a\":1},{}]", "metadata must have at least one field");
}

test "ingest rejects malformed JSON with its position" {
    try expectBatchError("", "metadata JSON ends early: expected '[' opening the batch");
    try expectBatchError("{\"a\":1}", "metadata JSON is malformed at byte 0: expected '[' opening the batch");
    try expectBatchError("[{\"a\":1}", "metadata JSON ends early: expected ',' or ']' after an object");
    try expectBatchError("[{\"a\":1}] x", "metadata JSON is malformed at byte 10: expected the end of the input after ']'");
    try expectBatchError("[{\"a\":1},]", "metadata JSON is malformed at byte 9: expected '{' opening an object");
    try expectBatchError("[{\"a\":1,}]", "metadata JSON is malformed at byte 8: expected '\"' opening a key");
    try expectBatchError("[{\"a\" 1}]", "metadata JSON is malformed at byte 6: expected ':' after a key");
    try expectBatchError("[{\"a\":01}]", "metadata JSON is malformed at byte 7: expected a valid number");
    try expectBatchError("[{\"a\":-00}]", "metadata JSON is malformed at byte 8: expected a valid number");
    try expectBatchError("[{\"a\":1.}]", "metadata JSON is malformed at byte 8: expected a valid number");
    try expectBatchError("[{\"a\":.5}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":1e}]", "metadata JSON is malformed at byte 8: expected a valid number");
    try expectBatchError("[{\"a\":-}]", "metadata JSON is malformed at byte 7: expected a valid number");
    try expectBatchError("[{\"a\":+1}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":tru}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":nul}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":\"x}]", "metadata JSON ends early: expected a valid string");
    try expectBatchError("[{\"a\":\"\\x\"}]", "metadata JSON is malformed at byte 7: expected a valid string");
    try expectBatchError("[{\"a\":\"\\u12g4\"}]", "metadata JSON is malformed at byte 7: expected a valid string");
    try expectBatchError("[{\"a\":\"tab\there\"}]", "metadata JSON is malformed at byte 10: expected a valid string");
    try expectBatchError("[{\"a\":1}{\"b\":2}]", "metadata JSON is malformed at byte 8: expected ',' or ']' after an object");
}

test "ingest rejects more than fields_max fields" {
    var batch: std.ArrayList(u8) = .empty;
    defer batch.deinit(testing.allocator);
    try batch.appendSlice(testing.allocator, "[{");
    for (0..fields_max + 1) |index| {
        if (index > 0) try batch.append(testing.allocator, ',');
        try batch.print(testing.allocator, "\"f{d}\":1", .{index});
    }
    try batch.appendSlice(testing.allocator, "}]");
    try expectBatchError(batch.items, "metadata has more than 4096 fields");
}

test "parseFloat rounds hard cases correctly" {
    const cases = [_]struct { text: []const u8, bits: u64 }{
        .{ .text = "2.2250738585072011e-308", .bits = 0x000fffffffffffff },
        .{ .text = "2.2250738585072012e-308", .bits = 0x0010000000000000 },
        .{ .text = "9007199254740993.0", .bits = 0x4340000000000000 },
        .{ .text = "0.1", .bits = 0x3fb999999999999a },
        .{ .text = "1e23", .bits = 0x44b52d02c7e14af6 },
        .{ .text = "8.98846567431158e307", .bits = 0x7fe0000000000000 },
        .{ .text = "2.4703282292062327e-324", .bits = 0x0 },
        .{ .text = "2.4703282292062328e-324", .bits = 0x1 },
        .{ .text = "1.7976931348623158e308", .bits = 0x7fefffffffffffff },
        .{ .text = "0.30000000000000004", .bits = 0x3fd3333333333334 },
        .{ .text = "123456789012345678901234567890e-10", .bits = 0x43e56a95319d63e1 },
        .{ .text = "1e-400", .bits = 0x0 },
    };
    for (cases) |case| {
        const parsed = try std.fmt.parseFloat(f64, case.text);
        try testing.expectEqual(case.bits, @as(u64, @bitCast(parsed)));
    }
}

test "canonical floats match Python repr" {
    const cases = [_]struct { bits: u64, text: []const u8 }{
        .{ .bits = 0x0, .text = "0.0" },
        .{ .bits = 0x8000000000000000, .text = "-0.0" },
        .{ .bits = 0x3ff0000000000000, .text = "1.0" },
        .{ .bits = 0x4059000000000000, .text = "100.0" },
        .{ .bits = 0x3fb999999999999a, .text = "0.1" },
        .{ .bits = 0x4341c37937e08000, .text = "1e+16" },
        .{ .bits = 0x3ee4f8b588e368f1, .text = "1e-05" },
        .{ .bits = 0x3f1a36e2eb1c432d, .text = "0.0001" },
        .{ .bits = 0x7e41eb2d66005835, .text = "1.5e+300" },
        .{ .bits = 0x1, .text = "5e-324" },
        .{ .bits = 0x42dc12218377de40, .text = "123456789012345.0" },
        .{ .bits = 0x43118b54f22aeb00, .text = "1234567890123456.0" },
        .{ .bits = 0x444b1ae4d6e2ef50, .text = "1e+21" },
        .{ .bits = 0x3fd5555555555555, .text = "0.3333333333333333" },
        .{ .bits = 0xbff8000000000000, .text = "-1.5" },
        .{ .bits = 0x3e90c6f7a0b5ed8d, .text = "2.5e-07" },
        .{ .bits = 0x4341c37937e07fff, .text = "9999999999999998.0" },
        .{ .bits = 0x430c6bf526340000, .text = "1000000000000000.0" },
        .{ .bits = 0x3f50624dd2f1a9fc, .text = "0.001" },
        .{ .bits = 0x405edd2f1a9fbe77, .text = "123.456" },
        .{ .bits = 0x7fefffffffffffff, .text = "1.7976931348623157e+308" },
        .{ .bits = 0x8010000000000000, .text = "-2.2250738585072014e-308" },
        .{ .bits = 0x000fffffffffffff, .text = "2.225073858507201e-308" },
        .{ .bits = 0x43e56a95319d63e1, .text = "1.2345678901234567e+19" },
        .{ .bits = 0x54b249ad2594c37d, .text = "1e+100" },
        .{ .bits = 0x400921fb54442d18, .text = "3.141592653589793" },
    };
    for (cases) |case| {
        var buffer: [float_bytes_max]u8 = undefined;
        try testing.expectEqualStrings(case.text, formatFloat(&buffer, floatFromBits(case.bits)));
    }
}

test "canonical output sorts by schema, escapes like serde_json and marks floats" {
    const schema = [_]Field{
        .{ .name = "big", .kind = .float },
        .{ .name = "flag", .kind = .bool },
        .{ .name = "index", .kind = .int },
        .{ .name = "label", .kind = .string },
        .{ .name = "score", .kind = .float },
        .{ .name = "w\"eird\n", .kind = .int },
    };
    const values = [_]Value{
        .{ .float = 1e21 },
        .{ .bool = true },
        .{ .int = -3 },
        .{ .string = "q\"b\\s\x08\x0c\n\r\t\x00\x1f\x7f/\xc3\xa9" },
        .{ .float = 100.0 },
        .{ .int = std.math.minInt(i64) },
    };
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(testing.allocator);
    try out.appendSlice(testing.allocator, "prefix:");
    try writeCanonical(testing.allocator, &schema, &values, &out);
    try testing.expectEqualStrings(
        \\prefix:{"big":1e+21,"flag":true,"index":-3,"label":"q\"b\\s\b\f\n\r\t\u0000\u001f
    ++ "\x7f/\xc3\xa9" ++
        \\","score":100.0,"w\"eird\n":-9223372036854775808}
    , out.items);
}

test "canonical output of the peer's example record is byte-identical" {
    const schema = example_schema;
    const values = [_]Value{
        .{ .float = 1e21 },
        .{ .bool = false },
        .{ .int = 1 },
        .{ .string = "b" },
        .{ .float = 1.0 / 3.0 },
    };
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(testing.allocator);
    try writeCanonical(testing.allocator, &schema, &values, &out);
    try testing.expectEqualStrings(
        \\{"big":1e+21,"flag":false,"index":1,"label":"b","score":0.3333333333333333}
    , out.items);
}

test "inferSchema sorts the first object's keys and rejects duplicates" {
    var diagnostic: Diagnostic = .{};
    const entries = [_]Entry{
        .{ .key = "score", .value = .{ .float = 0.5 } },
        .{ .key = "index", .value = .{ .int = 1 } },
        .{ .key = "", .value = .{ .string = "x" } },
        .{ .key = "Z", .value = .{ .bool = true } },
    };
    const schema = try inferSchema(testing.allocator, &entries, &diagnostic);
    defer freeSchema(testing.allocator, schema);
    const expected = [_]Field{
        .{ .name = "", .kind = .string },
        .{ .name = "Z", .kind = .bool },
        .{ .name = "index", .kind = .int },
        .{ .name = "score", .kind = .float },
    };
    for (expected, schema) |want, got| {
        try testing.expectEqualStrings(want.name, got.name);
        try testing.expectEqual(want.kind, got.kind);
    }

    const duplicated = [_]Entry{
        .{ .key = "a", .value = .{ .int = 1 } },
        .{ .key = "b", .value = .{ .int = 1 } },
        .{ .key = "a", .value = .{ .float = 1 } },
    };
    try testing.expectError(error.InvalidMetadata, inferSchema(testing.allocator, &duplicated, &diagnostic));
    try testing.expectEqualStrings("metadata field 'a' appears twice", diagnostic.message());
    try testing.expectError(error.InvalidMetadata, inferSchema(testing.allocator, &.{}, &diagnostic));
    try testing.expectEqualStrings("metadata must have at least one field", diagnostic.message());
}

test "matchSchema orders values and names what differs" {
    const schema = [_]Field{
        .{ .name = "a", .kind = .int },
        .{ .name = "b", .kind = .float },
        .{ .name = "c", .kind = .string },
    };
    var values: [3]Value = undefined;
    var diagnostic: Diagnostic = .{};
    try matchSchema(&schema, &.{
        .{ .key = "c", .value = .{ .string = "x" } },
        .{ .key = "a", .value = .{ .int = 7 } },
        .{ .key = "b", .value = .{ .float = 0.5 } },
    }, &values, &diagnostic);
    try testing.expectEqual(@as(i64, 7), values[0].int);
    try testing.expectEqual(@as(f64, 0.5), values[1].float);
    try testing.expectEqualStrings("x", values[2].string);

    const Case = struct { entries: []const Entry, message: []const u8 };
    const cases = [_]Case{
        .{ .entries = &.{
            .{ .key = "a", .value = .{ .int = 1 } },
            .{ .key = "c", .value = .{ .string = "x" } },
        }, .message = "metadata is missing key 'b'" },
        .{ .entries = &.{
            .{ .key = "a", .value = .{ .int = 1 } },
            .{ .key = "b", .value = .{ .float = 1 } },
            .{ .key = "c", .value = .{ .string = "x" } },
            .{ .key = "d", .value = .{ .int = 1 } },
        }, .message = "metadata has unexpected key 'd'" },
        .{ .entries = &.{
            .{ .key = "a", .value = .{ .int = 1 } },
            .{ .key = "x", .value = .{ .float = 1 } },
            .{ .key = "c", .value = .{ .string = "x" } },
        }, .message = "metadata is missing key 'b' and has unexpected key 'x'" },
        .{ .entries = &.{
            .{ .key = "a", .value = .{ .float = 1 } },
            .{ .key = "b", .value = .{ .float = 1 } },
            .{ .key = "c", .value = .{ .string = "x" } },
        }, .message = "metadata field 'a' changed type from int to float" },
        .{ .entries = &.{
            .{ .key = "a", .value = .{ .int = 1 } },
            .{ .key = "b", .value = .{ .float = 1 } },
            .{ .key = "a", .value = .{ .int = 2 } },
        }, .message = "metadata field 'a' appears twice" },
    };
    for (cases) |case| {
        try testing.expectError(error.InvalidMetadata, matchSchema(&schema, case.entries, &values, &diagnostic));
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

const example_schema = [_]Field{
    .{ .name = "big", .kind = .float },
    .{ .name = "flag", .kind = .bool },
    .{ .name = "index", .kind = .int },
    .{ .name = "label", .kind = .string },
    .{ .name = "score", .kind = .float },
};
const example_values = [_]Value{
    .{ .float = 1e21 },
    .{ .bool = false },
    .{ .int = 1 },
    .{ .string = "b\xc3\xa9" },
    .{ .float = 1.0 / 3.0 },
};

test "verifyRecord accepts any key order, spacing, escapes and float spelling" {
    var diagnostic: Diagnostic = .{};
    const records = [_][]const u8{
        "{\"big\":1e+21,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\",\"score\":0.3333333333333333}",
        " { \"score\" : 3.333333333333333148e-1 ,\n\"label\":\"b\\u00e9\", \"index\":1,\"flag\":false,\"big\":1e21 } ",
        "{\"b\\u0069g\":1E+21,\"flag\":false,\"index\":1,\"label\":\"\\u0062\\u00E9\",\"score\":0.33333333333333331}",
        "{\"big\":1000000000000000000000.0,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\",\"score\":0.3333333333333333}",
    };
    for (records) |record| {
        verifyRecord(&example_schema, &example_values, record, &diagnostic) catch |err| {
            std.debug.print("record {s}: {s}\n", .{ record, diagnostic.message() });
            return err;
        };
    }
}

test "verifyRecord never matches a non-finite float" {
    const schema = [_]Field{.{ .name = "x", .kind = .float }};
    var diagnostic: Diagnostic = .{};
    try testing.expectError(
        error.MetadataMismatch,
        verifyRecord(&schema, &.{.{ .float = std.math.inf(f64) }}, "{\"x\":1e999}", &diagnostic),
    );
    try testing.expectEqualStrings(
        "record metadata field 'x' does not match metadata.arrow: the record has 1e999, the table has inf",
        diagnostic.message(),
    );
}

test "verifyRecord names the first field that differs" {
    const Case = struct { record: []const u8, message: []const u8 };
    const cases = [_]Case{
        .{
            .record = "{\"big\":1e+21,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\",\"score\":0.33333333333333337}",
            .message = "record metadata field 'score' does not match metadata.arrow: the record has 0.33333333333333337, the table has 0.3333333333333333",
        },
        .{
            .record = "{\"big\":1e+21,\"flag\":true,\"index\":1,\"label\":\"b\xc3\xa9\",\"score\":0.5}",
            .message = "record metadata field 'flag' does not match metadata.arrow: the record has true, the table has false",
        },
        .{
            .record = "{\"big\":1e+21,\"flag\":false,\"index\":1.0,\"label\":\"b\",\"score\":0.5}",
            .message = "record metadata field 'index' does not match metadata.arrow: the record has 1.0, the table has 1",
        },
        .{
            .record = "{\"big\":1e+21,\"flag\":false,\"index\":1,\"label\":\"b\\u00e8\",\"score\":0.5}",
            .message = "record metadata field 'label' does not match metadata.arrow: the record has \"b\\u00e8\", the table has \"b\xc3\xa9\"",
        },
        .{
            .record = "{\"big\":-0.0,\"flag\":false}",
            .message = "record metadata field 'big' does not match metadata.arrow: the record has -0.0, the table has 1e+21",
        },
        .{
            .record = "{\"big\":1e21,\"flag\":null}",
            .message = "record metadata field 'flag' does not match metadata.arrow: the record has null, the table has false",
        },
        .{
            .record = "{\"big\":1e21,\"flag\":[false]}",
            .message = "record metadata field 'flag' does not match metadata.arrow: the record has an array, the table has false",
        },
        .{
            .record = "{\"index\":99999999999999999999}",
            .message = "record metadata field 'index' does not match metadata.arrow: the record has 99999999999999999999, the table has 1",
        },
        .{
            .record = "{\"big\":1e21,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\"}",
            .message = "record metadata is missing field 'score'",
        },
        .{
            .record = "{\"big\":1e21,\"extra\":1}",
            .message = "record metadata has unexpected field 'extra'",
        },
        .{
            .record = "{\"big\":1e21,\"b\\u0069g\":1e21}",
            .message = "record metadata field 'big' appears twice",
        },
        .{ .record = "", .message = "record metadata JSON ends early: expected '{' opening the object" },
        .{ .record = "{}", .message = "record metadata is missing field 'big'" },
        .{ .record = "{\"big\":1e21", .message = "record metadata JSON ends early: expected ',' or '}' after a field" },
        .{ .record = "{\"big\":1e21}}", .message = "record metadata JSON is malformed at byte 12: expected the end of the object" },
        .{ .record = "{\"big\":NaN}", .message = "record metadata JSON is malformed at byte 7: expected a value" },
        .{ .record = "{\"big\":01e21,\"flag\":false}", .message = "record metadata JSON is malformed at byte 8: expected a valid number" },
        .{ .record = "{\"big\":1e21,\"label\":\"\\udc00\"}", .message = "record metadata field 'label' is not valid Unicode" },
    };
    var diagnostic: Diagnostic = .{};
    for (cases) |case| {
        try testing.expectError(
            error.MetadataMismatch,
            verifyRecord(&example_schema, &example_values, case.record, &diagnostic),
        );
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

/// A random value of `kind`: floats from raw bit patterns, strings over a small alphabet
/// rich in bytes that need escaping.
fn randomValue(random: std.Random, kind: Kind, string_buffer: []u8) Value {
    switch (kind) {
        .bool => return .{ .bool = random.boolean() },
        .int => return .{ .int = random.int(i64) >> random.int(u6) },
        .float => while (true) {
            const float: f64 = @bitCast(random.int(u64));
            if (std.math.isFinite(float)) return .{ .float = float };
        },
        .string => {
            const alphabet = [_][]const u8{ "a", "Z", "\"", "\\", "/", "\n", "\x00", "\x1f", "\x7f", "\xc3\xa9", "\xf0\x9f\x98\x80", " " };
            var length: usize = 0;
            for (0..random.uintLessThan(usize, 8)) |_| {
                const piece = alphabet[random.uintLessThan(usize, alphabet.len)];
                @memcpy(string_buffer[length..][0..piece.len], piece);
                length += piece.len;
            }
            return .{ .string = string_buffer[0..length] };
        },
    }
}

test "canonical output round trips through verifyRecord and the ingest parser" {
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const random = prng.random();
    const schema = [_]Field{
        .{ .name = "", .kind = .string },
        .{ .name = "a\"", .kind = .float },
        .{ .name = "b", .kind = .int },
        .{ .name = "c\xc3\xa9", .kind = .bool },
        .{ .name = "d", .kind = .float },
        .{ .name = "e\n", .kind = .string },
    };
    var string_buffers: [schema.len][64]u8 = undefined;
    var values: [schema.len]Value = undefined;
    var values_parsed: [schema.len]Value = undefined;
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(testing.allocator);
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    for (0..2000) |_| {
        for (schema, &values, &string_buffers) |field, *value, *buffer| value.* = randomValue(random, field.kind, buffer);
        out.clearRetainingCapacity();
        try out.append(testing.allocator, '[');
        try writeCanonical(testing.allocator, &schema, &values, &out);
        try out.append(testing.allocator, ']');
        const record = out.items[1 .. out.items.len - 1];
        try verifyRecord(&schema, &values, record, &diagnostic);

        var parser: Parser = .init(out.items);
        const entries = (try parser.nextObject(testing.allocator, &scratch, &diagnostic)).?;
        try matchSchema(&schema, entries, &values_parsed, &diagnostic);
        for (values, values_parsed) |want, got| try testing.expect(want.eql(got));
        try testing.expect(try parser.nextObject(testing.allocator, &scratch, &diagnostic) == null);
        try parser.finish(&diagnostic);
    }
}

test "the canonical fast path recognises canonical records of plain keys and strings" {
    var prng = std.Random.DefaultPrng.init(0xfa57);
    const random = prng.random();
    const schema = [_]Field{
        .{ .name = "flag", .kind = .bool },
        .{ .name = "index", .kind = .int },
        .{ .name = "label", .kind = .string },
        .{ .name = "score", .kind = .float },
    };
    var values: [schema.len]Value = undefined;
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(testing.allocator);
    const labels = [_][]const u8{ "", "cat", "dog bird", "a/b" };
    for (0..2000) |_| {
        for (schema, &values) |field, *value| value.* = switch (field.kind) {
            .string => .{ .string = labels[random.uintLessThan(usize, labels.len)] },
            else => randomValue(random, field.kind, &.{}),
        };
        out.clearRetainingCapacity();
        try writeCanonical(testing.allocator, &schema, &values, &out);
        try testing.expect(isCanonicalOf(&schema, &values, out.items));
        // Another value for any one field is not recognised.
        var other = values;
        const changed = random.uintLessThan(usize, schema.len);
        other[changed] = switch (other[changed]) {
            .bool => |flag| .{ .bool = !flag },
            .int => |integer| .{ .int = integer +% 1 },
            .float => |float| .{ .float = if (float == 0) 1 else -float },
            .string => |string| .{ .string = if (string.len == 3) "cow" else "cat" },
        };
        try testing.expect(!isCanonicalOf(&schema, &other, out.items));
    }
    const empty_schema = [_]Field{};
    try testing.expect(isCanonicalOf(&empty_schema, &.{}, "{}"));
    try testing.expect(!isCanonicalOf(&empty_schema, &.{}, "{} "));
    const one = [_]Value{.{ .int = 7 }};
    const int_schema = [_]Field{.{ .name = "n", .kind = .int }};
    try testing.expect(isCanonicalOf(&int_schema, &one, "{\"n\":7}"));
    // Other spellings of the same object are left to the full scan, which accepts them.
    var diagnostic: Diagnostic = .{};
    for ([_][]const u8{ "{ \"n\":7}", "{\"n\": 7}", "{\"\\u006e\":7}", "{\"n\":7}\n" }) |text| {
        try testing.expect(!isCanonicalOf(&int_schema, &one, text));
        try verifyRecord(&int_schema, &one, text, &diagnostic);
    }
    // A float must be spelled as one (as the full scan has it); any such spelling of
    // the same value is recognised.
    const float_schema = [_]Field{.{ .name = "x", .kind = .float }};
    const seven = [_]Value{.{ .float = 7 }};
    try testing.expect(isCanonicalOf(&float_schema, &seven, "{\"x\":7.0}"));
    try testing.expect(isCanonicalOf(&float_schema, &seven, "{\"x\":7e0}"));
    try testing.expect(!isCanonicalOf(&float_schema, &seven, "{\"x\":7}"));
    try testing.expectError(error.MetadataMismatch, verifyRecord(&float_schema, &seven, "{\"x\":7}", &diagnostic));
    for ([_][]const u8{ "{\"n\":70}", "{\"n\":7.0}", "{\"n\":7,\"n\":7}", "{\"n\":7", "{\"n\":7}}" }) |text| {
        try testing.expect(!isCanonicalOf(&int_schema, &one, text));
        try testing.expectError(error.MetadataMismatch, verifyRecord(&int_schema, &one, text, &diagnostic));
    }
}

test "whatever the canonical fast path accepts, the full scan accepts" {
    var prng = std.Random.DefaultPrng.init(0x5afe);
    const random = prng.random();
    const schema = [_]Field{
        .{ .name = "index", .kind = .int },
        .{ .name = "label", .kind = .string },
        .{ .name = "ok", .kind = .bool },
        .{ .name = "score", .kind = .float },
    };
    var values: [schema.len]Value = undefined;
    var string_buffer: [64]u8 = undefined;
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    const damage = "0123456789.eE+-\"{}:, \\\xc3";
    var accepted: usize = 0;
    for (0..20000) |_| {
        for (schema, &values) |field, *value| value.* = randomValue(random, field.kind, &string_buffer);
        if (random.boolean()) values[0] = .{ .int = random.intRangeAtMost(i64, -20, 20) };
        out.clearRetainingCapacity();
        try writeCanonical(testing.allocator, &schema, &values, &out);
        // Damage the text: a byte replaced, dropped or inserted, or nothing.
        switch (random.uintLessThan(u8, 4)) {
            0 => out.items[random.uintLessThan(usize, out.items.len)] = damage[random.uintLessThan(usize, damage.len)],
            1 => _ = out.orderedRemove(random.uintLessThan(usize, out.items.len)),
            2 => try out.insert(testing.allocator, random.uintAtMost(usize, out.items.len), damage[random.uintLessThan(usize, damage.len)]),
            else => {},
        }
        if (isCanonicalOf(&schema, &values, out.items)) {
            accepted += 1;
            try verifyInFull(&schema, &values, out.items, &diagnostic);
        }
    }
    try testing.expect(accepted > 1000);
}

test "random and damaged input never crashes the parsers" {
    var prng = std.Random.DefaultPrng.init(0xbad);
    const random = prng.random();
    const valid =
        \\[{"big":1e+21,"flag":true,"index":-3,"label":"b\u00e9\ud83d\ude00\n","score":0.25},{"x":[1,{"y":null}]}]
    ;
    const alphabet = "[]{}\",:\\/-+.0123456789eEtrufalsnNI \nbu\x00\x7f\xc3\xa9\xed\xff";
    var buffer: [160]u8 = undefined;
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    for (0..20_000) |iteration| {
        const input = switch (iteration % 3) {
            0 => blk: {
                const length = random.uintLessThan(usize, buffer.len);
                for (buffer[0..length]) |*byte| byte.* = alphabet[random.uintLessThan(usize, alphabet.len)];
                break :blk buffer[0..length];
            },
            1 => blk: {
                @memcpy(buffer[0..valid.len], valid);
                for (0..1 + random.uintLessThan(usize, 3)) |_| {
                    buffer[random.uintLessThan(usize, valid.len)] = alphabet[random.uintLessThan(usize, alphabet.len)];
                }
                break :blk buffer[0..valid.len];
            },
            else => valid[0..random.uintLessThan(usize, valid.len)],
        };
        var parser: Parser = .init(input);
        while (parser.nextObject(testing.allocator, &scratch, &diagnostic) catch null) |entries| {
            var values: [fields_max]Value = undefined;
            matchSchema(&example_schema, entries, values[0..example_schema.len], &diagnostic) catch {};
        } else if (parser.state == .done) {
            parser.finish(&diagnostic) catch {};
        }
        const record = if (input.len > 2) input[1 .. input.len - 1] else input;
        verifyRecord(&example_schema, &example_values, record, &diagnostic) catch {};
        verifyRecord(&example_schema, &example_values, input, &diagnostic) catch {};
    }
}

test "a quoted value escapes control bytes and fits its buffer whatever its bytes" {
    var buffer: [description_bytes_max]u8 = undefined;
    const nuls: [60]u8 = @splat(0); // each byte prints as 4
    const described = describeValue(&buffer, .{ .string = &nuls });
    try std.testing.expectEqual(@as(usize, 1 + 4 * Excerpt.text_bytes_max + 4), described.len);
    try std.testing.expect(std.mem.startsWith(u8, described, "\"\\x00\\x00"));
    try std.testing.expect(std.mem.endsWith(u8, described, "\\x00...\""));
}
