//! The lock-file protocol that keeps processes sharing a `local_dir` from
//! fetching the same file at once.
//!
//! Before a file is fetched, its fetcher takes an exclusive OS lock on
//! `<final name>.lock` beside it (`file_lock.zig`: `flock` on POSIX,
//! `LockFileEx` on Windows). The kernel drops that lock when its holder's
//! handle closes, and so when the holder dies, `kill -9` included: a lock
//! is never stale, and no lock file needs cleaning. Lock files stay in the
//! folder (deleting one while another process waits on it would let a
//! third lock a new file of the same name).
//!
//! Under the lock (`claim`): the final name is looked up again, since the
//! holder the claim waited for may have placed it; a file under its final
//! name was checked before its rename, so it is used as it is. Otherwise
//! every temporary of that file (`<final name>.tmp-<pid>-<counter>`) is left
//! over from a fetcher that died, since no one else may fetch it now, and is
//! deleted before the fetch starts.
//!
//! Waiting for the lock blocks: the holder's fetch is bounded by the fetch
//! function's own retries and timeouts, so the wait is bounded by them too.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const file_lock = @import("../base/file_lock.zig");
const error_words = @import("../base/error_words.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");

pub const Error = error{Io};

/// What a claim on a file found once it held the file's lock.
pub const Claim = union(enum) {
    /// The file is under its final name: nothing to fetch, no lock held.
    present,
    /// The caller fetches the file, then releases the lock.
    fetch: FetchLock,
};

/// An exclusive lock on one file's lock file, held through its open handle.
pub const FetchLock = struct {
    file: std.Io.File,

    /// Blocks until this handle holds the exclusive lock of `name` (relative
    /// to `dir`, whose path is `dir_path`), creating the lock file if missing.
    pub fn acquire(
        dir: std.Io.Dir,
        dir_path: []const u8,
        name: []const u8,
        diagnostic: *Diagnostic,
    ) Error!FetchLock {
        assert(name.len > 0);
        const io = system.io();
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const lock_name = std.fmt.bufPrint(&buffer, "{s}{s}", .{ name, lock_suffix }) catch {
            diagnostic.set("{s}/{s}: the lock file's name is too long", .{ dir_path, name });
            return error.Io;
        };
        const file = dir.createFile(io, lock_name, .{ .truncate = false }) catch |err| {
            diagnostic.set(
                "cannot create the lock file {s}/{s}: {f}",
                .{ dir_path, lock_name, error_words.of(err) },
            );
            return error.Io;
        };
        errdefer file.close(io);
        file_lock.lockExclusive(io, file) catch |err| {
            diagnostic.set(
                "cannot lock {s}/{s}: {f}",
                .{ dir_path, lock_name, error_words.of(err) },
            );
            return error.Io;
        };
        return .{ .file = file };
    }

    pub fn release(lock: *FetchLock) void {
        const io = system.io();
        file_lock.unlock(io, lock.file);
        lock.file.close(io);
        lock.* = undefined;
    }
};

/// Appended to a file's final name to name its lock file.
pub const lock_suffix = ".lock";

/// Takes the lock of `name` (see `FetchLock.acquire`), then: `.present` (the
/// lock released) when the file is under its final name, else the held lock,
/// with the file's leftover temporaries deleted.
pub fn claim(
    dir: std.Io.Dir,
    dir_path: []const u8,
    name: []const u8,
    diagnostic: *Diagnostic,
) Error!Claim {
    assert(name.len > 0 and dir_path.len > 0);
    var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const path = std.fmt.bufPrint(&path_buffer, "{s}/{s}", .{ dir_path, name }) catch {
        diagnostic.set("{s}/{s}: the path is too long", .{ dir_path, name });
        return error.Io;
    };
    var lock = try FetchLock.acquire(dir, dir_path, name, diagnostic);
    if (directory_entries.exists(system.io(), dir, name, path)) {
        lock.release();
        return .present;
    }
    _ = removeTemporaries(dir, dir_path, name);
    return .{ .fetch = lock };
}

/// Deletes every temporary of `name` (`<name>.tmp-...`) in its folder, which
/// the caller holds the lock of; returns how many it deleted. One that cannot
/// be deleted is left: it never takes a final name, and the next claim tries again.
pub fn removeTemporaries(dir: std.Io.Dir, dir_path: []const u8, name: []const u8) u32 {
    assert(name.len > 0);
    const io = system.io();
    const parent = std.fs.path.dirname(name);
    const base = std.fs.path.basename(name);
    var folder = dir.openDir(io, parent orelse ".", .{ .iterate = true }) catch return 0;
    defer folder.close(io);
    var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const folder_path = std.fmt.bufPrint(&path_buffer, "{s}/{s}/", .{
        dir_path,
        parent orelse ".",
    }) catch return 0;
    var prefix_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const prefix = std.fmt.bufPrint(&prefix_buffer, "{s}{s}", .{
        base,
        cache_layout.fetch_temp_infix,
    }) catch return 0;
    var removed: u32 = 0;
    // Bounded: a pass over the folder, then once more for entries a deletion hid.
    for (0..2) |_| {
        var entries = folder.iterate();
        while (entries.next(io) catch null) |entry| {
            if (entry.kind == .directory or !std.mem.startsWith(u8, entry.name, prefix)) continue;
            directory_entries.deleteFile(io, folder, folder_path, entry.name) catch continue;
            removed += 1;
        }
    }
    return removed;
}

/// A test's temporary directory and its real path (`dir_path` above): under
/// wine, entries deleted by path are looked up again by path.
const TestDir = struct {
    tmp: std.testing.TmpDir,
    buffer: [std.Io.Dir.max_path_bytes]u8 = undefined,
    len: usize = 0,

    fn init(test_dir: *TestDir) !void {
        test_dir.* = .{ .tmp = std.testing.tmpDir(.{}) };
        test_dir.len = try test_dir.tmp.dir.realPath(system.io(), &test_dir.buffer);
    }

    fn path(test_dir: *const TestDir) []const u8 {
        return test_dir.buffer[0..test_dir.len];
    }

    /// Whether `name` exists, asked by its absolute path.
    fn has(test_dir: *const TestDir, name: []const u8) bool {
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const full = std.fmt.bufPrint(&buffer, "{s}/{s}", .{ test_dir.path(), name }) catch
            return false;
        std.Io.Dir.cwd().access(system.io(), full, .{}) catch return false;
        return true;
    }
};

test "a second holder waits until the first releases the lock" {
    var test_dir: TestDir = undefined;
    try test_dir.init();
    defer test_dir.tmp.cleanup();
    const tmp = test_dir.tmp;
    const tmp_path = test_dir.path();
    var diagnostic: Diagnostic = .{};
    var first = try FetchLock.acquire(tmp.dir, tmp_path, "index.bin", &diagnostic);
    const Waiter = struct {
        fn run(dir: std.Io.Dir, dir_path: []const u8, taken: *std.atomic.Value(bool)) void {
            var local: Diagnostic = .{};
            // A handle of its own: to flock, another process.
            var second = FetchLock.acquire(dir, dir_path, "index.bin", &local) catch return;
            taken.store(true, .release);
            second.release();
        }
    };
    var taken: std.atomic.Value(bool) = .init(false);
    const thread = try std.Thread.spawn(.{}, Waiter.run, .{ tmp.dir, tmp_path, &taken });
    try system.io().sleep(.fromMilliseconds(100), .awake);
    const taken_while_held = taken.load(.acquire);
    first.release();
    thread.join();
    try std.testing.expect(!taken_while_held);
    try std.testing.expect(taken.load(.acquire));
}

test "a claim waited for finds the file its holder placed, and fetches nothing" {
    var test_dir: TestDir = undefined;
    try test_dir.init();
    defer test_dir.tmp.cleanup();
    const tmp = test_dir.tmp;
    const tmp_path = test_dir.path();
    const io = system.io();
    try tmp.dir.createDir(io, "shards", .default_dir);
    var diagnostic: Diagnostic = .{};
    var holder = try FetchLock.acquire(tmp.dir, tmp_path, "shards/000003.bin", &diagnostic);
    const Claimer = struct {
        fn run(dir: std.Io.Dir, dir_path: []const u8, found: *std.atomic.Value(u8)) void {
            var local: Diagnostic = .{};
            var result = claim(dir, dir_path, "shards/000003.bin", &local) catch return;
            switch (result) {
                .present => found.store(1, .release),
                .fetch => |*lock| {
                    found.store(2, .release);
                    lock.release();
                },
            }
        }
    };
    var found: std.atomic.Value(u8) = .init(0);
    const thread = try std.Thread.spawn(.{}, Claimer.run, .{ tmp.dir, tmp_path, &found });
    try io.sleep(.fromMilliseconds(50), .awake);
    const placed = try tmp.dir.createFile(io, "shards/000003.bin", .{});
    placed.close(io);
    holder.release();
    thread.join();
    try std.testing.expectEqual(@as(u8, 1), found.load(.acquire));
    // With the file gone, a claim is the caller's to fetch.
    var sep_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const with_sep = try std.fmt.bufPrint(&sep_buffer, "{s}/", .{tmp_path});
    try directory_entries.deleteFile(io, tmp.dir, with_sep, "shards/000003.bin");
    var result = try claim(tmp.dir, tmp_path, "shards/000003.bin", &diagnostic);
    try std.testing.expect(result == .fetch);
    result.fetch.release();
}

test "a claim deletes the file's leftover temporaries and nothing else" {
    var test_dir: TestDir = undefined;
    try test_dir.init();
    defer test_dir.tmp.cleanup();
    const tmp = test_dir.tmp;
    const tmp_path = test_dir.path();
    const io = system.io();
    try tmp.dir.createDir(io, "shards", .default_dir);
    const names = [_][]const u8{
        "shards/000001.bin.tmp-4242-0",
        "shards/000001.bin.tmp-17-3",
        "shards/000011.bin.tmp-17-4",
        "shards/000002.bin.tmp-17-5",
        "shards/000002.bin",
        "index.bin.tmp-17-6",
    };
    for (names) |name| (try tmp.dir.createFile(io, name, .{})).close(io);
    var diagnostic: Diagnostic = .{};
    var result = try claim(tmp.dir, tmp_path, "shards/000001.bin", &diagnostic);
    try std.testing.expect(result == .fetch);
    result.fetch.release();
    for (names, 0..) |name, at| {
        try std.testing.expectEqual(at >= 2, test_dir.has(name));
    }
    try std.testing.expect(test_dir.has("shards/000001.bin.lock"));
    try std.testing.expectEqual(@as(u32, 1), removeTemporaries(tmp.dir, tmp_path, "index.bin"));
}
