//! The one place where an error becomes words in a message. Zig errors are
//! identifiers (`ProcessFdQuotaExceeded`); a user reads
//! `cannot open shards/000003.bin: too many open files: the limit is 1024 (ulimit -n)`.
//!
//! Every message that names an error prints `of(err)` with `{f}`, never
//! `@errorName(err)`. A known error prints its phrase (the operating system's
//! usual wording where there is one); an error of a process limit adds the
//! limit as it is when the message is made (POSIX only: Windows has no such
//! limits to name). An error without a phrase prints its name split into
//! lower-case words, so that no identifier reaches a user.
const std = @import("std");
const builtin = @import("builtin");

/// The words for `err`; print them with `{f}`.
pub fn of(err: anyerror) Words {
    return .{ .err = err };
}

pub const Words = struct {
    err: anyerror,

    pub fn format(words: Words, writer: *std.Io.Writer) std.Io.Writer.Error!void {
        if (phrase(words.err)) |text| {
            try writer.writeAll(text);
        } else {
            try writeSplit(writer, @errorName(words.err));
        }
        const limit = limitOf(words.err) orelse return;
        const value = softLimit(limit.resource) orelse return;
        try writer.print(": the limit is {d}{s} ({s})", .{ value, limit.unit, limit.command });
    }
};

/// The phrase for an error this module knows, or null.
pub fn phrase(err: anyerror) ?[]const u8 {
    return filePhrase(err) orelse limitPhrase(err) orelse jsonPhrase(err) orelse statusPhrase(err);
}

/// Files and directories.
fn filePhrase(err: anyerror) ?[]const u8 {
    return switch (err) {
        error.FileNotFound => "no such file or directory",
        error.NotDir => "not a directory",
        error.IsDir => "is a directory",
        error.AccessDenied => "permission denied",
        error.PermissionDenied => "operation not permitted",
        error.PathAlreadyExists => "file exists",
        error.DirNotEmpty => "directory not empty",
        error.NameTooLong => "file name too long",
        error.BadPathName => "the file name is not valid on this system",
        error.SymLinkLoop => "too many levels of symbolic links",
        error.LinkQuotaExceeded => "too many links",
        error.CrossDevice => "cannot move between file systems",
        error.ReadOnlyFileSystem => "read-only file system",
        error.NoSpaceLeft => "no space left on device",
        error.DiskQuota => "disk quota exceeded",
        error.FileTooBig => "file too large",
        error.InputOutput => "input/output error",
        error.FileSystem => "file system error",
        error.HardwareFailure => "hardware failure",
        error.NoDevice => "no such device",
        error.DeviceBusy => "device or resource busy",
        error.FileBusy => "file busy (in use by the system)",
        error.PipeBusy => "all pipe instances are busy",
        error.NetworkNotFound => "network path not found",
        error.AntivirusInterference => "blocked by antivirus software",
        error.FileLocksUnsupported => "the file system does not support file locks",
        error.LockViolation => "part of the file is locked by another process",
        error.WouldBlock => "resource temporarily unavailable",
        error.Unseekable => "the file does not support reading or writing at an offset",
        error.Streaming => "not a regular file",
        error.NotOpenForReading => "the file is not open for reading",
        error.NotOpenForWriting => "the file is not open for writing",
        error.BrokenPipe => "broken pipe",
        error.FileShrank => "the file shrank while it was read",
        error.ShortFile => "the file is shorter than expected",
        else => null,
    };
}

/// Limits of the process and of the system.
fn limitPhrase(err: anyerror) ?[]const u8 {
    return switch (err) {
        error.ProcessFdQuotaExceeded => "too many open files",
        error.SystemFdQuotaExceeded => "too many open files in the system",
        error.ThreadQuotaExceeded => "too many threads",
        error.LockedMemoryLimitExceeded => "locked memory limit exceeded",
        error.SystemResources => "not enough system resources",
        error.OutOfMemory => "out of memory",
        error.Canceled => "canceled",
        error.Unexpected => "unexpected error from the operating system",
        else => null,
    };
}

/// Parsing JSON (std.json) and numbers (std.fmt).
fn jsonPhrase(err: anyerror) ?[]const u8 {
    return switch (err) {
        error.SyntaxError => "syntax error",
        error.UnexpectedEndOfInput, error.BufferUnderrun => "unexpected end of input",
        error.UnexpectedToken => "unexpected token",
        error.ValueTooLong => "value too long",
        error.InvalidNumber => "invalid number",
        error.InvalidCharacter => "invalid character",
        error.Overflow => "number out of range",
        error.InvalidEnumTag => "unknown value",
        error.DuplicateField => "duplicate field",
        error.UnknownField => "unknown field",
        error.MissingField => "missing field",
        error.LengthMismatch => "wrong number of elements",
        else => null,
    };
}

/// The core's own kinds of failure (its status codes).
fn statusPhrase(err: anyerror) ?[]const u8 {
    return switch (err) {
        error.InvalidArgument => "invalid argument",
        error.InvalidInput => "invalid input",
        error.InvalidCache => "invalid cache",
        error.Io => "input/output error",
        error.State => "wrong state",
        error.OutOfRange => "out of range",
        error.AlreadyExists => "already exists",
        else => null,
    };
}

const Resource = enum { open_files, file_bytes, threads, locked_memory_bytes };

const Limit = struct {
    resource: Resource,
    /// After the number: " bytes" or nothing.
    unit: []const u8,
    /// The shell command that shows and sets it.
    command: []const u8,
};

fn limitOf(err: anyerror) ?Limit {
    return switch (err) {
        error.ProcessFdQuotaExceeded => .{
            .resource = .open_files,
            .unit = "",
            .command = "ulimit -n",
        },
        error.FileTooBig => .{ .resource = .file_bytes, .unit = " bytes", .command = "ulimit -f" },
        error.ThreadQuotaExceeded => .{ .resource = .threads, .unit = "", .command = "ulimit -u" },
        error.LockedMemoryLimitExceeded => .{
            .resource = .locked_memory_bytes,
            .unit = " bytes",
            .command = "ulimit -l",
        },
        else => null,
    };
}

/// The process's soft limit now, or null where there is none (unlimited, or
/// a system without resource limits).
fn softLimit(resource: Resource) ?u64 {
    switch (builtin.os.tag) {
        .linux, .macos, .freebsd, .netbsd, .openbsd, .dragonfly, .illumos => {
            const found = std.posix.getrlimit(switch (resource) {
                .open_files => .NOFILE,
                .file_bytes => .FSIZE,
                .threads => .NPROC,
                .locked_memory_bytes => .MEMLOCK,
            }) catch return null;
            if (found.cur == std.posix.RLIM.INFINITY) return null;
            return std.math.cast(u64, found.cur);
        },
        else => return null,
    }
}

/// `ProcessFdQuotaExceeded` as "process fd quota exceeded": a word starts at
/// an upper-case letter after a lower-case letter or digit, or at the last
/// capital of a run followed by a lower-case letter ("ABCError": "abc error").
fn writeSplit(writer: *std.Io.Writer, name: []const u8) std.Io.Writer.Error!void {
    for (name, 0..) |byte, index| {
        if (index > 0 and std.ascii.isUpper(byte)) {
            const after_capital = std.ascii.isUpper(name[index - 1]);
            const before_lower = index + 1 < name.len and std.ascii.isLower(name[index + 1]);
            if (!after_capital or before_lower) try writer.writeByte(' ');
        }
        try writer.writeByte(std.ascii.toLower(byte));
    }
}

/// Fails when `E` holds an error that has no phrase of its own.
fn expectPhrases(comptime E: type) !void {
    inline for (@typeInfo(E).error_set.error_names.?) |name| {
        const err = @field(anyerror, name);
        if (phrase(err) == null) {
            std.debug.print("no phrase for error.{s}\n", .{name});
            return error.TestExpectedPhrase;
        }
    }
}

test "every error of the calls whose failures a message names has a phrase" {
    const File = std.Io.File;
    const Dir = std.Io.Dir;
    try expectPhrases(Dir.OpenError);
    try expectPhrases(Dir.CreateDirError);
    try expectPhrases(Dir.RenameError);
    try expectPhrases(Dir.DeleteFileError);
    try expectPhrases(Dir.DeleteDirError);
    try expectPhrases(File.OpenError);
    try expectPhrases(File.StatError);
    try expectPhrases(File.SyncError);
    try expectPhrases(File.LockError);
    try expectPhrases(File.ReadPositionalError);
    try expectPhrases(File.WritePositionalError);
    try expectPhrases(File.MemoryMap.CreateError);
    try expectPhrases(std.Thread.SpawnError);
    try expectPhrases(std.json.Scanner.AllocError);
    try expectPhrases(std.json.Scanner.NextError);
    try expectPhrases(std.json.ParseFromValueError);
    try expectPhrases(@import("file_status.zig").ReadError);
    try expectPhrases(@import("file_lock.zig").Error);
    try expectPhrases(@import("file_view.zig").Error);
    try expectPhrases(
        error{ InvalidArgument, InvalidInput, InvalidCache, Io, State, OutOfRange, AlreadyExists },
    );
}

test "known errors print their phrase" {
    try std.testing.expectFmt("not a directory", "{f}", .{of(error.NotDir)});
    try std.testing.expectFmt("no such file or directory", "{f}", .{of(error.FileNotFound)});
    try std.testing.expectFmt("permission denied", "{f}", .{of(error.AccessDenied)});
    try std.testing.expectFmt("no space left on device", "{f}", .{of(error.NoSpaceLeft)});
    try std.testing.expectFmt("invalid cache", "{f}", .{of(error.InvalidCache)});
}

test "an unknown error prints its name as lower-case words" {
    try std.testing.expectFmt("some new failure", "{f}", .{of(error.SomeNewFailure)});
    try std.testing.expectFmt("abc error", "{f}", .{of(error.ABCError)});
    try std.testing.expectFmt("invalid utf8 name", "{f}", .{of(error.InvalidUtf8Name)});
    try std.testing.expectFmt("x", "{f}", .{of(error.X)});
}

test "a process limit is named with its value and its ulimit option" {
    const expected_open_files = switch (builtin.os.tag) {
        .linux, .macos => try std.fmt.allocPrint(
            std.testing.allocator,
            "too many open files: the limit is {d} (ulimit -n)",
            .{(try std.posix.getrlimit(.NOFILE)).cur},
        ),
        else => try std.testing.allocator.dupe(u8, "too many open files"),
    };
    defer std.testing.allocator.free(expected_open_files);
    try std.testing.expectFmt(expected_open_files, "{f}", .{of(error.ProcessFdQuotaExceeded)});
    // No limit to name for the system-wide table.
    try std.testing.expectFmt(
        "too many open files in the system",
        "{f}",
        .{of(error.SystemFdQuotaExceeded)},
    );
}

test "a file size limit is named only when there is one" {
    if (builtin.os.tag != .linux) return error.SkipZigTest;
    const words = try std.fmt.allocPrint(std.testing.allocator, "{f}", .{of(error.FileTooBig)});
    defer std.testing.allocator.free(words);
    const current = try std.posix.getrlimit(.FSIZE);
    if (current.cur == std.posix.RLIM.INFINITY) {
        try std.testing.expectEqualStrings("file too large", words);
    } else {
        const expected = try std.fmt.allocPrint(
            std.testing.allocator,
            "file too large: the limit is {d} bytes (ulimit -f)",
            .{current.cur},
        );
        defer std.testing.allocator.free(expected);
        try std.testing.expectEqualStrings(expected, words);
    }
}
