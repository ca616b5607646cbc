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
