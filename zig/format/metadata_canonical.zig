//! The canonical form of a metadata row: the compact JSON object with sorted keys that
//! every shard record embeds (`writeCanonical`), strings escaped like serde_json and
//! floats laid out exactly like Python's `repr` (`formatFloat`). The manifest writes its
//! strings and ratios with the same helpers.
const std = @import("std");
const assert = std.debug.assert;
const metadata_types = @import("metadata_types.zig");
const plainRunEnd = @import("json_scan.zig").plainRunEnd;
const Field = metadata_types.Field;
const Value = metadata_types.Value;

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
        out.appendSliceAssumeCapacity(
            &.{ 'u', '0', '0', hex_digits[byte >> 4], hex_digits[byte & 0xf] },
        );
    }
}

/// Appends `string` as a JSON string literal escaped the canonical way (see `writeCanonical`).
pub fn appendJsonString(
    allocator: std.mem.Allocator,
    out: *std.ArrayList(u8),
    string: []const u8,
) error{OutOfMemory}!void {
    try out.ensureUnusedCapacity(allocator, stringBytesMax(string));
    appendString(out, string);
}

/// "-9223372036854775808" is the longest i64.
pub const int_bytes_max = 20;

pub fn formatInt(buffer: *[int_bytes_max]u8, value: i64) []const u8 {
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
        const scientific = std.fmt.float.render(
            &scientific_buffer,
            value,
            .{ .mode = .scientific },
        ) catch unreachable;
        var decimal: ShortestDecimal = .{
            .negative = false,
            .digits = undefined,
            .digit_count = 0,
            .point = 0,
        };
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

const testing = std.testing;

fn floatFromBits(bits: u64) f64 {
    return @bitCast(bits);
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

const example_schema = [_]Field{
    .{ .name = "big", .kind = .float },
    .{ .name = "flag", .kind = .bool },
    .{ .name = "index", .kind = .int },
    .{ .name = "label", .kind = .string },
    .{ .name = "score", .kind = .float },
};
