//! Verification of sample metadata: a reader's check that a record's embedded JSON
//! object holds the same values as its metadata.arrow row (`verifyRecord`). Records
//! this library wrote are canonical (metadata_canonical.zig) and take a fast path;
//! anything else goes through a general scan on the lexer in json_scan.zig. The JSON is
//! treated as hostile: every loop moves forward and nothing allocates or recurses.
const std = @import("std");
const assert = std.debug.assert;
const metadata_types = @import("metadata_types.zig");
const metadata_json = @import("metadata_json.zig");
const metadata_canonical = @import("metadata_canonical.zig");
const json_scan = @import("json_scan.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const Field = metadata_types.Field;
const Kind = metadata_types.Kind;
const Value = metadata_types.Value;
const FieldSet = metadata_json.FieldSet;
const findField = metadata_json.findField;
const Parser = metadata_json.Parser;
const Scratch = metadata_json.Scratch;
const matchSchema = metadata_json.matchSchema;
const fields_max = metadata_json.fields_max;
const int_bytes_max = metadata_canonical.int_bytes_max;
const float_bytes_max = metadata_canonical.float_bytes_max;
const formatInt = metadata_canonical.formatInt;
const formatFloat = metadata_canonical.formatFloat;
const writeCanonical = metadata_canonical.writeCanonical;
const Cursor = json_scan.Cursor;
const StringToken = json_scan.StringToken;
const NumberToken = json_scan.NumberToken;
const plainRunEnd = json_scan.plainRunEnd;
const unescapedEquals = json_scan.unescapedEquals;
const parseInt64 = json_scan.parseInt64;

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
    return matchByte(json, position, '"') and matchText(json, position, string) and matchByte(
        json,
        position,
        '"',
    );
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
            return verifier.fail(
                "record metadata is missing field '{f}'",
                .{Excerpt.ofName(verifier.schema[index].name)},
            );
        }
    }

    fn verifyField(verifier: *Verifier) Error!void {
        const cursor = &verifier.cursor;
        if (cursor.peek() != '"') return verifier.malformed("'\"' opening a key");
        const key_position = cursor.position;
        const key = cursor.scanString() catch |err| switch (err) {
            error.Malformed => return verifier.malformed("a valid key string"),
            error.InvalidUnicode => return verifier.fail(
                "record metadata key at byte {d} is not valid Unicode",
                .{key_position},
            ),
        };
        if (!cursor.consume(':')) return verifier.malformed("':' after a key");
        const index = verifier.findKey(key) orelse {
            return verifier.fail(
                "record metadata has unexpected field '{f}'",
                .{Excerpt.of(key.body)},
            );
        };
        const name = verifier.schema[index].name;
        if (verifier.seen.testAndSet(index)) return verifier.fail(
            "record metadata field '{f}' appears twice",
            .{Excerpt.ofName(name)},
        );
        verifier.field_count += 1;
        const token = try verifier.scanValue(name);
        if (!tokenEquals(token, verifier.expected[index])) return verifier.mismatch(
            name,
            token,
            verifier.expected[index],
        );
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
                    error.InvalidUnicode => return verifier.fail(
                        "record metadata field '{f}' is not valid Unicode",
                        .{Excerpt.ofName(name)},
                    ),
                };
                return .{ .string = string };
            },
            't' => if (cursor.consumeLiteral("true")) return .{ .bool = true },
            'f' => if (cursor.consumeLiteral("false")) return .{ .bool = false },
            'n' => if (cursor.consumeLiteral("null")) return .{ .other = "null" },
            '[' => return .{ .other = "an array" },
            '{' => return .{ .other = "an object" },
            '-', '0'...'9' => {
                const number = cursor.scanNumber() catch return verifier.malformed(
                    "a valid number",
                );
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
            "embedded metadata does not match metadata.arrow: field '{f}': the record has " ++
                "{s}, the table has {s}",
            .{
                Excerpt.ofName(name),
                describeToken(&token_buffer, token),
                describeValue(&value_buffer, expected),
            },
        );
    }

    fn malformed(verifier: *Verifier, expected: []const u8) Error {
        const cursor = verifier.cursor;
        if (cursor.position >= cursor.text.len) {
            return verifier.fail("record metadata JSON ends early: expected {s}", .{expected});
        }
        return verifier.fail(
            "record metadata JSON is malformed at byte {d}: expected {s}",
            .{ cursor.position, expected },
        );
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
        .string => |string| std.fmt.bufPrint(
            buffer,
            "\"{f}\"",
            .{Excerpt.of(string)},
        ) catch unreachable,
    };
}

const testing = std.testing;

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
        "{\"big\":1e+21,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\"," ++
            "\"score\":0.3333333333333333}",
        " { \"score\" : 3.333333333333333148e-1 ,\n\"label\":\"b\\u00e9\", " ++
            "\"index\":1,\"flag\":false,\"big\":1e21 } ",
        "{\"b\\u0069g\":1E+21,\"flag\":false,\"index\":1,\"label\":\"\\u0062\\u00E9\"," ++
            "\"score\":0.33333333333333331}",
        "{\"big\":1000000000000000000000.0,\"flag\":false,\"index\":1,\"label\":\"b\xc3\xa9\"," ++
            "\"score\":0.3333333333333333}",
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
        "embedded metadata does not match metadata.arrow: field 'x': the record has 1e999, " ++
            "the table has inf",
        diagnostic.message(),
    );
}

const RecordCase = struct { record: []const u8, message: []const u8 };

/// Each case's record fails `verifyRecord` against the example row with its message.
fn expectRecordErrors(cases: []const RecordCase) !void {
    var diagnostic: Diagnostic = .{};
    for (cases) |case| {
        try testing.expectError(
            error.MetadataMismatch,
            verifyRecord(&example_schema, &example_values, case.record, &diagnostic),
        );
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "verifyRecord names the first field that differs" {
    const differs = "embedded metadata does not match metadata.arrow: field ";
    const head = "{\"big\":1e+21,\"flag\":false,\"index\":1,";
    try expectRecordErrors(&.{
        .{
            .record = head ++ "\"label\":\"b\xc3\xa9\",\"score\":0.33333333333333337}",
            .message = differs ++
                "'score': the record has 0.33333333333333337, the table has 0.3333333333333333",
        },
        .{
            .record = "{\"big\":1e+21,\"flag\":true,\"index\":1," ++
                "\"label\":\"b\xc3\xa9\",\"score\":0.5}",
            .message = differs ++ "'flag': the record has true, the table has false",
        },
        .{
            .record = "{\"big\":1e+21,\"flag\":false,\"index\":1.0,\"label\":\"b\",\"score\":0.5}",
            .message = differs ++ "'index': the record has 1.0, the table has 1",
        },
        .{
            .record = head ++ "\"label\":\"b\\u00e8\",\"score\":0.5}",
            .message = differs ++
                "'label': the record has \"b\\u00e8\", the table has \"b\xc3\xa9\"",
        },
        .{
            .record = "{\"big\":-0.0,\"flag\":false}",
            .message = differs ++ "'big': the record has -0.0, the table has 1e+21",
        },
        .{
            .record = "{\"big\":1e21,\"flag\":null}",
            .message = differs ++ "'flag': the record has null, the table has false",
        },
        .{
            .record = "{\"big\":1e21,\"flag\":[false]}",
            .message = differs ++ "'flag': the record has an array, the table has false",
        },
        .{
            .record = "{\"index\":99999999999999999999}",
            .message = differs ++ "'index': the record has 99999999999999999999, the table has 1",
        },
    });
}

test "verifyRecord names a missing, extra, repeated or malformed field" {
    try expectRecordErrors(&.{
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
        .{
            .record = "",
            .message = "record metadata JSON ends early: expected '{' opening the object",
        },
        .{ .record = "{}", .message = "record metadata is missing field 'big'" },
        .{
            .record = "{\"big\":1e21",
            .message = "record metadata JSON ends early: expected ',' or '}' after a field",
        },
        .{
            .record = "{\"big\":1e21}}",
            .message = "record metadata JSON is malformed at byte 12: " ++
                "expected the end of the object",
        },
        .{
            .record = "{\"big\":NaN}",
            .message = "record metadata JSON is malformed at byte 7: expected a value",
        },
        .{
            .record = "{\"big\":01e21,\"flag\":false}",
            .message = "record metadata JSON is malformed at byte 8: expected a valid number",
        },
        .{
            .record = "{\"big\":1e21,\"label\":\"\\udc00\"}",
            .message = "record metadata field 'label' is not valid Unicode",
        },
    });
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
            const alphabet = [_][]const u8{
                "a",
                "Z",
                "\"",
                "\\",
                "/",
                "\n",
                "\x00",
                "\x1f",
                "\x7f",
                "\xc3\xa9",
                "\xf0\x9f\x98\x80",
                " ",
            };
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
        for (schema, &values, &string_buffers) |field, *value, *buffer| value.* = randomValue(
            random,
            field.kind,
            buffer,
        );
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
    try testing.expectError(
        error.MetadataMismatch,
        verifyRecord(&float_schema, &seven, "{\"x\":7}", &diagnostic),
    );
    for ([_][]const u8{
        "{\"n\":70}",
        "{\"n\":7.0}",
        "{\"n\":7,\"n\":7}",
        "{\"n\":7",
        "{\"n\":7}}",
    }) |text| {
        try testing.expect(!isCanonicalOf(&int_schema, &one, text));
        try testing.expectError(
            error.MetadataMismatch,
            verifyRecord(&int_schema, &one, text, &diagnostic),
        );
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
        for (schema, &values) |field, *value| value.* = randomValue(
            random,
            field.kind,
            &string_buffer,
        );
        if (random.boolean()) values[0] = .{ .int = random.intRangeAtMost(i64, -20, 20) };
        out.clearRetainingCapacity();
        try writeCanonical(testing.allocator, &schema, &values, &out);
        // Damage the text: a byte replaced, dropped or inserted, or nothing.
        switch (random.uintLessThan(u8, 4)) {
            0 => {
                const at = random.uintLessThan(usize, out.items.len);
                out.items[at] = damage[random.uintLessThan(usize, damage.len)];
            },
            1 => _ = out.orderedRemove(random.uintLessThan(usize, out.items.len)),
            2 => try out.insert(
                testing.allocator,
                random.uintAtMost(usize, out.items.len),
                damage[random.uintLessThan(usize, damage.len)],
            ),
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
        \\[{"big":1e+21,"flag":true,"index":-3,"label":"b\u00e9\ud83d\ude00\n","score":0.25},
    ++
        \\{"x":[1,{"y":null}]}]
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
                for (buffer[0..length]) |*byte| {
                    byte.* = alphabet[random.uintLessThan(usize, alphabet.len)];
                }
                break :blk buffer[0..length];
            },
            1 => blk: {
                @memcpy(buffer[0..valid.len], valid);
                for (0..1 + random.uintLessThan(usize, 3)) |_| {
                    const at = random.uintLessThan(usize, valid.len);
                    buffer[at] = alphabet[random.uintLessThan(usize, alphabet.len)];
                }
                break :blk buffer[0..valid.len];
            },
            else => valid[0..random.uintLessThan(usize, valid.len)],
        };
        var parser: Parser = .init(input);
        while (parser.nextObject(testing.allocator, &scratch, &diagnostic) catch null) |entries| {
            var values: [fields_max]Value = undefined;
            const row = values[0..example_schema.len];
            matchSchema(&example_schema, entries, row, &diagnostic) catch {};
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
