//! How the exported functions report: status codes, the thread's last error
//! message, the one refusal of a NULL argument, the one mapping from core
//! errors to statuses, and the checks every entry point shares.
const std = @import("std");
const thread_pool = @import("base/thread_pool.zig");
const error_words = @import("base/error_words.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const Buffer = @import("c_types.zig").Buffer;

pub const status_ok: i32 = 0;
pub const status_invalid_argument: i32 = 1;
pub const status_invalid_input: i32 = 2;
pub const status_invalid_cache: i32 = 3;
pub const status_io: i32 = 4;
pub const status_out_of_memory: i32 = 5;
pub const status_already_exists: i32 = 6;
pub const status_wrong_process: i32 = 7;
pub const status_state: i32 = 8;
pub const status_out_of_range: i32 = 9;

pub const allocator = std.heap.c_allocator;

pub threadlocal var last_error: [Diagnostic.message_bytes_max + 1:0]u8 = @splat(0);

pub fn setLastError(message: []const u8) void {
    const len = @min(message.len, last_error.len - 1);
    @memcpy(last_error[0..len], message[0..len]);
    last_error[len] = 0;
}

pub fn failWith(status: i32, diagnostic: *const Diagnostic) i32 {
    setLastError(diagnostic.message());
    return status;
}

pub fn failMessage(status: i32, comptime format: []const u8, args: anytype) i32 {
    var diagnostic: Diagnostic = .{};
    diagnostic.set(format, args);
    return failWith(status, &diagnostic);
}

/// The one refusal of a NULL argument: `DRT_ERR_INVALID_ARGUMENT`, "<name> is NULL".
pub fn nullArgument(comptime name: []const u8) i32 {
    return failMessage(status_invalid_argument, name ++ " is NULL", .{});
}

pub fn statusOf(err: anyerror) i32 {
    return switch (err) {
        error.InvalidArgument => status_invalid_argument,
        error.InvalidInput => status_invalid_input,
        error.InvalidCache => status_invalid_cache,
        error.Io => status_io,
        error.OutOfMemory => status_out_of_memory,
        error.AlreadyExists => status_already_exists,
        error.State => status_state,
        error.OutOfRange => status_out_of_range,
        else => status_state,
    };
}

/// The status of `err` with the diagnostic's message; a failure that left no
/// message is described by the error's words ("out of memory").
pub fn failError(err: anyerror, diagnostic: *const Diagnostic) i32 {
    if (diagnostic.len == 0) return failMessage(statusOf(err), "{f}", .{error_words.of(err)});
    return failWith(statusOf(err), diagnostic);
}

pub const Runtime = thread_pool.ThreadPool;

pub fn checkProcess(pool: *const Runtime) bool {
    if (pool.ownedByThisProcess()) return true;
    setLastError(
        "this DatasetRT handle was created in another process (before fork()); create a new " ++
            "DatasetRuntime in this process",
    );
    return false;
}

pub fn byteString(pointer: ?[*]const u8, len: u64) ?[]const u8 {
    if (len == 0) return "";
    const bytes = pointer orelse return null;
    return bytes[0..@intCast(len)];
}

/// The `len` items a C array argument points to: empty for `len` 0 whatever the pointer,
/// null (refuse the call) when the pointer is NULL but `len` is not 0.
pub fn arrayArgument(pointer: anytype, len: u64) ?SliceOf(@TypeOf(pointer)) {
    if (len == 0) return &.{};
    const items = pointer orelse return null;
    return items[0..@intCast(len)];
}

/// `[]T` or `[]const T` for a `?[*]T` or `?[*]const T`.
fn SliceOf(comptime OptionalPointer: type) type {
    const pointer = @typeInfo(@typeInfo(OptionalPointer).optional.child).pointer;
    return if (pointer.attrs.@"const") []const pointer.child else []pointer.child;
}

/// Hands `bytes` (allocated with `allocator`) to the caller as a `drt_buffer`, which
/// `drt_buffer_release` frees; on failure frees them.
pub fn handOut(bytes: []u8, out: *?*Buffer) i32 {
    const buffer = allocator.create(Buffer) catch {
        allocator.free(bytes);
        return failMessage(status_out_of_memory, "out of memory", .{});
    };
    buffer.* = .{ .data = bytes.ptr, .len = bytes.len };
    out.* = buffer;
    return status_ok;
}
