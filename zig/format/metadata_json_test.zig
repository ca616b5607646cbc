//! Tests of metadata_json.zig: ingest of every value form, the refusals with their
//! messages, and the schema an object fixes.
const std = @import("std");
const metadata_json = @import("metadata_json.zig");
const metadata_types = @import("metadata_types.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Entry = metadata_json.Entry;
const Parser = metadata_json.Parser;
const Scratch = metadata_json.Scratch;
const fields_max = metadata_json.fields_max;
const freeSchema = metadata_json.freeSchema;
const inferSchema = metadata_json.inferSchema;
const matchSchema = metadata_json.matchSchema;
const Field = metadata_types.Field;
const Value = metadata_types.Value;
const testing = std.testing;

/// Parses a one-object batch with the testing allocator's scratch; returns the message
/// on failure so tests can compare it.
fn expectBatchError(batch: []const u8, message: []const u8) !void {
    var scratch: Scratch = .empty;
    defer scratch.deinit(testing.allocator);
    var diagnostic: Diagnostic = .{};
    var parser: Parser = .init(batch);
    const result = while (true) {
        const entries = parser.nextObject(testing.allocator, &scratch, &diagnostic) catch |err|
            break err;
        if (entries == null) break parser.finish(&diagnostic);
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

test "ingest parses a Python batch in key order, with every value form" {
    try expectEntries(
        \\[{"index":3,"label":"b","score":0.3333333333333333,"flag":true,
    ++
        \\"big":1e+21,"neg":-0.0,"off":false,"small":1e-07}]
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
    try expectEntries(
        " [ { \"\" : 1 ,\n\t\"caf\xc3\xa9\" : \"\xe2\x82\xac\xf0\x9f\x98\x80\" } ] \n",
        &.{
            .{ .key = "", .value = .{ .int = 1 } },
            .{ .key = "caf\xc3\xa9", .value = .{ .string = "\xe2\x82\xac\xf0\x9f\x98\x80" } },
        },
    );
}

test "ingest unescapes every escape, surrogate pairs included" {
    try expectEntries(
        \\[{"k\u00e9y\"":"a\"b\\c\/d\b\f\n\r\t\u0000\u00e9\u20ac\ud83d\ude00",
    ++
        \\"plain":"x","t\tab":"\ud83d\ude00"}]
    , &.{
        .{
            .key = "k\xc3\xa9y\"",
            .value = .{
                .string = "a\"b\\c/d\x08\x0c\n\r\t\x00\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
            },
        },
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
    const allocator = testing.allocator;
    while (try parser.nextObject(allocator, &scratch, &diagnostic)) |entries| : (count += 1) {
        try testing.expectEqual(count + 1, parser.object_count);
        for (entries) |entry| {
            if (std.mem.eql(u8, entry.key, "a")) try testing.expectEqual(
                expected_a[count],
                entry.value.int,
            );
            if (std.mem.eql(u8, entry.key, "s")) try testing.expectEqualStrings(
                expected_s[count],
                entry.value.string,
            );
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
    try expectEntries(
        "[{\"a\":9223372036854775807,\"b\":-9223372036854775808,\"c\":-0,\"d\":0}]",
        &.{
            .{ .key = "a", .value = .{ .int = std.math.maxInt(i64) } },
            .{ .key = "b", .value = .{ .int = std.math.minInt(i64) } },
            .{ .key = "c", .value = .{ .int = 0 } },
            .{ .key = "d", .value = .{ .int = 0 } },
        },
    );
    try expectBatchError(
        "[{\"n\":9223372036854775808}]",
        "metadata field 'n' integer 9223372036854775808 is outside the signed 64-bit range",
    );
    try expectBatchError(
        "[{\"n\":-9223372036854775809}]",
        "metadata field 'n' integer -9223372036854775809 is outside the signed 64-bit range",
    );
    const ones_60: [60]u8 = @splat('1');
    const ones_40: [40]u8 = @splat('1');
    try expectBatchError(
        "[{\"n\":" ++ ones_60 ++ "}]",
        "metadata field 'n' integer " ++ ones_40 ++ "... is outside the signed 64-bit range",
    );
}

test "ingest rejects values that are not bool, int, float or str" {
    try expectBatchError(
        "[{\"x\":[1,2]}]",
        "metadata field 'x' must be bool, int, float or str, got list",
    );
    try expectBatchError(
        "[{\"x\":{\"y\":1}}]",
        "metadata field 'x' must be bool, int, float or str, got dict",
    );
    try expectBatchError(
        "[{\"a\":1,\"x\":null}]",
        "metadata field 'x' must be bool, int, float or str, got None",
    );
}

test "ingest rejects non-finite floats" {
    try expectBatchError("[{\"score\":NaN}]", "metadata field 'score' is a non-finite float (NaN)");
    try expectBatchError(
        "[{\"score\":Infinity}]",
        "metadata field 'score' is a non-finite float (Infinity)",
    );
    try expectBatchError(
        "[{\"score\":-Infinity}]",
        "metadata field 'score' is a non-finite float (-Infinity)",
    );
    try expectBatchError(
        "[{\"score\":1e400}]",
        "metadata field 'score' is a non-finite float (1e400)",
    );
    try expectBatchError(
        "[{\"score\":-1e99999999999999999999}]",
        "metadata field 'score' is a non-finite float (-1e99999999999999999999)",
    );
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
    try expectBatchError(
        "{\"a\":1}",
        "metadata JSON is malformed at byte 0: expected '[' opening the batch",
    );
    try expectBatchError(
        "[{\"a\":1}",
        "metadata JSON ends early: expected ',' or ']' after an object",
    );
    try expectBatchError(
        "[{\"a\":1}] x",
        "metadata JSON is malformed at byte 10: expected the end of the input after ']'",
    );
    try expectBatchError(
        "[{\"a\":1},]",
        "metadata JSON is malformed at byte 9: expected '{' opening an object",
    );
    try expectBatchError(
        "[{\"a\":1,}]",
        "metadata JSON is malformed at byte 8: expected '\"' opening a key",
    );
    try expectBatchError(
        "[{\"a\" 1}]",
        "metadata JSON is malformed at byte 6: expected ':' after a key",
    );
    try expectBatchError(
        "[{\"a\":01}]",
        "metadata JSON is malformed at byte 7: expected a valid number",
    );
    try expectBatchError(
        "[{\"a\":-00}]",
        "metadata JSON is malformed at byte 8: expected a valid number",
    );
    try expectBatchError(
        "[{\"a\":1.}]",
        "metadata JSON is malformed at byte 8: expected a valid number",
    );
    try expectBatchError("[{\"a\":.5}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError(
        "[{\"a\":1e}]",
        "metadata JSON is malformed at byte 8: expected a valid number",
    );
    try expectBatchError(
        "[{\"a\":-}]",
        "metadata JSON is malformed at byte 7: expected a valid number",
    );
    try expectBatchError("[{\"a\":+1}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":tru}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":nul}]", "metadata JSON is malformed at byte 6: expected a value");
    try expectBatchError("[{\"a\":\"x}]", "metadata JSON ends early: expected a valid string");
    try expectBatchError(
        "[{\"a\":\"\\x\"}]",
        "metadata JSON is malformed at byte 7: expected a valid string",
    );
    try expectBatchError(
        "[{\"a\":\"\\u12g4\"}]",
        "metadata JSON is malformed at byte 7: expected a valid string",
    );
    try expectBatchError(
        "[{\"a\":\"tab\there\"}]",
        "metadata JSON is malformed at byte 10: expected a valid string",
    );
    try expectBatchError(
        "[{\"a\":1}{\"b\":2}]",
        "metadata JSON is malformed at byte 8: expected ',' or ']' after an object",
    );
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
    try testing.expectError(
        error.InvalidMetadata,
        inferSchema(testing.allocator, &duplicated, &diagnostic),
    );
    try testing.expectEqualStrings("metadata field 'a' appears twice", diagnostic.message());
    try testing.expectError(
        error.InvalidMetadata,
        inferSchema(testing.allocator, &.{}, &diagnostic),
    );
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
        try testing.expectError(
            error.InvalidMetadata,
            matchSchema(&schema, case.entries, &values, &diagnostic),
        );
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}
