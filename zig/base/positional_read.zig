//! Positional reads of the read path, made straight to the kernel on Linux.
//!
//! A shuffled pass makes one `pread` per record. Through `std.Io` each one
//! also passes Io's cancellation check and libc's `preadv64`, a cancellation
//! point that brackets the system call with `__pthread_enable_asynccancel`
//! and `__pthread_disable_asynccancel`: together 6 % of a shuffled pass's
//! worker time on 1 KiB records in `perf`. The core never cancels a read, so on
//! Linux it calls the kernel itself; other systems go through `std.Io`.
const std = @import("std");
const builtin = @import("builtin");
const system = @import("system.zig");

pub const Error = std.Io.File.ReadPositionalError;

/// Reads `buffer.len` bytes from `offset`, or fewer only where the file ends;
/// returns how many were read.
pub fn readAll(file: std.Io.File, buffer: []u8, offset: u64) Error!usize {
    if (builtin.os.tag != .linux) return file.readPositionalAll(system.io(), buffer, offset);
    const linux = std.os.linux;
    var done: usize = 0;
    while (done < buffer.len) {
        const position = std.math.cast(i64, offset + done) orelse return error.Unseekable;
        const rc = linux.pread(file.handle, buffer.ptr + done, buffer.len - done, position);
        switch (linux.errno(rc)) {
            .SUCCESS => {
                if (rc == 0) break; // the end of the file
                done += rc;
            },
            // The errors `std.Io` reports for the same failures.
            .INTR => continue,
            .AGAIN => return error.WouldBlock,
            .IO => return error.InputOutput,
            .NOMEM, .NOBUFS => return error.SystemResources,
            .ISDIR => return error.IsDir,
            .NXIO, .SPIPE, .OVERFLOW => return error.Unseekable,
            .BADF => return error.NotOpenForReading,
            else => return error.Unexpected,
        }
    }
    return done;
}

test "readAll reads a whole range, stops at the end of the file and names a failure" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var bytes: [10000]u8 = undefined;
    for (&bytes, 0..) |*byte, i| byte.* = @truncate(i *% 131);
    const writing = try tmp.dir.createFile(io, "data", .{});
    defer writing.close(io);
    try writing.writePositionalAll(io, &bytes, 0);
    const file = try tmp.dir.openFile(io, "data", .{});
    defer file.close(io);

    var buffer: [4000]u8 = undefined;
    try std.testing.expectEqual(@as(usize, 4000), try readAll(file, &buffer, 5000));
    try std.testing.expectEqualSlices(u8, bytes[5000..9000], &buffer);
    // Only 1000 bytes remain after 9000.
    try std.testing.expectEqual(@as(usize, 1000), try readAll(file, &buffer, 9000));
    try std.testing.expectEqualSlices(u8, bytes[9000..], buffer[0..1000]);
    try std.testing.expectEqual(@as(usize, 0), try readAll(file, &buffer, 20000));
    // `writing` was opened write-only (elsewhere std.Io names the error).
    if (builtin.os.tag == .linux) try std.testing.expectError(
        error.NotOpenForReading,
        readAll(writing, &buffer, 0),
    );
}
