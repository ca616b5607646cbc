//! The JSON lexer that metadata ingest (metadata_json.zig) and verification
//! (metadata_verify.zig) share: a cursor over a text with JSON's token rules, string
//! bodies checked for valid escapes and UTF-8 and unescaped without allocating, and
//! integer tokens read as i64. The canonical writer (metadata_canonical.zig) uses its
//! scan for the bytes a string must escape. Every loop moves forward through its input.
const std = @import("std");
const assert = std.debug.assert;

/// The lexer both directions share: a position in a text and JSON's token rules.
pub const Cursor = struct {
    text: []const u8,
    position: usize = 0,

    const ScanError = error{ Malformed, InvalidUnicode };

    pub fn skipWhitespace(cursor: *Cursor) void {
        while (cursor.position < cursor.text.len) : (cursor.position += 1) {
            switch (cursor.text[cursor.position]) {
                ' ', '\t', '\n', '\r' => {},
                else => return,
            }
        }
    }

    /// The next byte after whitespace, not consumed; null at the end of the text.
    pub fn peek(cursor: *Cursor) ?u8 {
        cursor.skipWhitespace();
        if (cursor.position == cursor.text.len) return null;
        return cursor.text[cursor.position];
    }

    /// Consumes `byte` if it comes next after whitespace.
    pub fn consume(cursor: *Cursor, byte: u8) bool {
        if (cursor.peek() != byte) return false;
        cursor.position += 1;
        return true;
    }

    /// Consumes `literal` if the text continues with it here.
    pub fn consumeLiteral(cursor: *Cursor, literal: []const u8) bool {
        if (!std.mem.startsWith(u8, cursor.text[cursor.position..], literal)) return false;
        cursor.position += literal.len;
        return true;
    }

    /// Scans the string whose opening quote is at the cursor, checking its escapes and UTF-8,
    /// and leaves the cursor after the closing quote. On error the cursor is at the fault.
    pub fn scanString(cursor: *Cursor) ScanError!StringToken {
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
    pub fn scanNumber(cursor: *Cursor) error{Malformed}!NumberToken {
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
pub const StringToken = struct {
    body: []const u8,
    escaped: bool,
};

/// A number token; a '.' or an exponent makes it a float, as in Python.
pub const NumberToken = struct {
    text: []const u8,
    is_float: bool,
};

/// Which bytes end a run that copies through unchanged: reading JSON stops at non-ASCII
/// too (to check its UTF-8); writing JSON passes it through raw.
const RunKind = enum { input, output };

/// The index of the first byte at or after `start` that is a quote, a backslash, a control
/// character, or (for `.input`) non-ASCII; `bytes.len` if there is none.
pub fn plainRunEnd(comptime kind: RunKind, bytes: []const u8, start: usize) usize {
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
    const length = std.unicode.utf8ByteSequenceLength(text[index]) catch
        return error.InvalidUnicode;
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
pub const Unescaper = struct {
    body: []const u8,
    position: usize = 0,
    character: [4]u8 = undefined,

    /// The next piece: a run of literal bytes, or the UTF-8 of one escape.
    pub fn next(unescaper: *Unescaper) ?[]const u8 {
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

pub fn unescapedEquals(body: []const u8, expected: []const u8) bool {
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
pub fn parseInt64(token: []const u8) ?i64 {
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
