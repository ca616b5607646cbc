//! A human-readable explanation that travels with an error.
//!
//! Zig errors carry no payload, so every function that can fail on user input or
//! on-disk bytes takes a `*Diagnostic` and fills it before returning the error.
//! Work on pool threads writes into the job's own Diagnostic; the C ABI copies the
//! message into the calling thread's last-error buffer.
const std = @import("std");

pub const Diagnostic = struct {
    buffer: [message_bytes_max]u8 = undefined,
    len: usize = 0,

    pub const message_bytes_max = 1024;

    /// Record the message; a message longer than the buffer is cut with "...".
    pub fn set(diagnostic: *Diagnostic, comptime format: []const u8, args: anytype) void {
        const written = std.fmt.bufPrint(&diagnostic.buffer, format, args) catch {
            const ellipsis = "...";
            const keep = diagnostic.buffer.len - ellipsis.len;
            _ = std.fmt.bufPrint(diagnostic.buffer[0..keep], format, args) catch {};
            @memcpy(diagnostic.buffer[keep..], ellipsis);
            diagnostic.len = diagnostic.buffer.len;
            return;
        };
        diagnostic.len = written.len;
    }

    /// Prefix the existing message with context, e.g. the cache path or sample index.
    pub fn prefix(diagnostic: *Diagnostic, comptime format: []const u8, args: anytype) void {
        var old: [message_bytes_max]u8 = undefined;
        const old_len = diagnostic.len;
        @memcpy(old[0..old_len], diagnostic.buffer[0..old_len]);
        diagnostic.set(format ++ "{s}", args ++ .{old[0..old_len]});
    }

    pub fn message(diagnostic: *const Diagnostic) []const u8 {
        return diagnostic.buffer[0..diagnostic.len];
    }
};

/// The start of a possibly long text for a message, cut on a UTF-8 character
/// boundary and marked with "..."; prints with `{f}`, control bytes escaped as
/// `\xNN` (a NUL would end the C string that carries the message).
pub const Excerpt = struct {
    head: []const u8,
    ellipsis: []const u8,

    pub const text_bytes_max = 40;
    /// Long enough to tell names apart, short enough that a message naming two
    /// of them, behind a path, keeps its reason.
    pub const name_bytes_max = 200;

    /// A value's text.
    pub fn of(text: []const u8) Excerpt {
        return cut(text, text_bytes_max);
    }

    /// A field's or column's name.
    pub fn ofName(name: []const u8) Excerpt {
        return cut(name, name_bytes_max);
    }

    fn cut(text: []const u8, bytes_max: usize) Excerpt {
        if (text.len <= bytes_max) return .{ .head = text, .ellipsis = "" };
        var end: usize = bytes_max;
        while (end > 0 and text[end] & 0xc0 == 0x80) end -= 1;
        return .{ .head = text[0..end], .ellipsis = "..." };
    }

    pub fn format(excerpt: Excerpt, writer: *std.Io.Writer) std.Io.Writer.Error!void {
        var plain_from: usize = 0;
        for (excerpt.head, 0..) |byte, index| {
            if (byte >= 0x20 and byte != 0x7f) continue;
            try writer.writeAll(excerpt.head[plain_from..index]);
            try writer.print("\\x{x:0>2}", .{byte});
            plain_from = index + 1;
        }
        try writer.writeAll(excerpt.head[plain_from..]);
        try writer.writeAll(excerpt.ellipsis);
    }
};

test "an excerpt keeps short texts whole and cuts long ones on a character boundary" {
    try std.testing.expectFmt("'label'", "'{f}'", .{Excerpt.ofName("label")});
    try std.testing.expectFmt("'ab...'", "'{f}'", .{Excerpt.cut("abc", 2)});
    try std.testing.expectFmt(
        "'a\\x00b\\x1f\u{e9}'",
        "'{f}'",
        .{Excerpt.ofName("a\x00b\x1f\u{e9}")},
    );
    // "a" then 150 two-byte characters: byte 200 is the second byte of one.
    var name: [301]u8 = undefined;
    name[0] = 'a';
    for (0..150) |i| @memcpy(name[1 + 2 * i ..][0..2], "\u{e9}");
    const excerpt = Excerpt.ofName(&name);
    try std.testing.expectEqualSlices(u8, name[0..199], excerpt.head);
    try std.testing.expectEqualStrings("...", excerpt.ellipsis);
    try std.testing.expectEqualStrings("", Excerpt.of(name[0..40]).ellipsis);
}

test "a long message is cut with an ellipsis" {
    var diagnostic: Diagnostic = .{};
    diagnostic.set("{s}", .{@as([2000]u8, @splat('x'))});
    try std.testing.expectEqual(@as(usize, Diagnostic.message_bytes_max), diagnostic.message().len);
    try std.testing.expect(std.mem.endsWith(u8, diagnostic.message(), "..."));
}

test "prefix keeps the original message" {
    var diagnostic: Diagnostic = .{};
    diagnostic.set("bad field '{s}'", .{"label"});
    diagnostic.prefix("sample {d}: ", .{@as(u64, 7)});
    try std.testing.expectEqualStrings("sample 7: bad field 'label'", diagnostic.message());
}
