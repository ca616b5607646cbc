//! Where a cache writer builds its cache until it is published, and the lock
//! that makes it the only writer of its target.
//!
//! Under the base directory's `tmp/`, the writer holds `<name>.lock` locked
//! and writes into its own staging directory (with `shards/` inside). The
//! cache is published by renaming the staging directory to the target; a
//! writer that never publishes removes it, so nothing half-written is ever
//! visible under the target path.
const std = @import("std");
const assert = std.debug.assert;
const cache_layout = @import("../format/cache_layout.zig");
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const file_status = @import("../base/file_status.zig");
const file_lock = @import("../base/file_lock.zig");
const directory_entries = @import("../base/directory_entries.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Error = error{ Io, OutOfMemory, AlreadyExists };

pub const Staging = struct {
    allocator: std.mem.Allocator,
    /// The cache's name and path under the base directory; borrowed from the
    /// writer, which outlives its staging.
    source_name: []const u8,
    target_path: []const u8,
    base_dir: std.Io.Dir,
    /// The staging directory's path under `base_dir`.
    name: []u8 = &.{},
    /// Open while the writer can still add files; closed before the rename.
    dir: ?std.Io.Dir = null,
    shards_dir: ?std.Io.Dir = null,
    lock_file: std.Io.File = undefined,
    lock_name: []u8 = &.{},

    /// Takes the target's lock (waiting for another writer to publish or give
    /// up), checks that the target does not exist yet and creates the staging
    /// directory. `source_name` and `target_path` must outlive the staging.
    pub fn open(
        allocator: std.mem.Allocator,
        base_dir_path: []const u8,
        source_name: []const u8,
        target_path: []const u8,
        diagnostic: *Diagnostic,
    ) Error!Staging {
        // The target is the source name under the base directory (`baseDirPath`).
        assert(std.mem.endsWith(u8, target_path, source_name));
        assert(source_name.len > 0 and base_dir_path.len > 0);
        const io = system.io();
        try durable_files.createDirectories(base_dir_path, diagnostic);
        var staging: Staging = .{
            .allocator = allocator,
            .source_name = source_name,
            .target_path = target_path,
            .base_dir = std.Io.Dir.cwd().openDir(io, base_dir_path, .{}) catch |err| {
                diagnostic.set(
                    "cannot open cache directory {s}: {f}",
                    .{ base_dir_path, error_words.of(err) },
                );
                return error.Io;
            },
        };
        errdefer staging.base_dir.close(io);
        staging.base_dir.createDir(
            io,
            cache_layout.staging_dir,
            .default_dir,
        ) catch |err| switch (err) {
            error.PathAlreadyExists => {},
            else => {
                diagnostic.set(
                    "cannot create {s}/tmp: {f}",
                    .{ base_dir_path, error_words.of(err) },
                );
                return error.Io;
            },
        };
        try staging.lockTarget(diagnostic);
        errdefer staging.releaseLock();
        if (staging.targetExists()) {
            diagnostic.set("cache path already exists: {s}", .{target_path});
            return error.AlreadyExists;
        }
        try staging.createStaging(diagnostic);
        assert(staging.dir != null and staging.shards_dir != null);
        return staging;
    }

    /// Releases the lock and the directories; an unpublished staging
    /// directory is removed with everything in it.
    pub fn deinit(staging: *Staging, published: bool) void {
        assert(staging.name.len > 0 and staging.lock_name.len > 0);
        const io = system.io();
        staging.closeDirs();
        if (!published) {
            directory_entries.deleteTree(io, staging.base_dir, staging.baseDirPath(), staging.name);
        }
        staging.releaseLock();
        staging.base_dir.close(io);
        staging.allocator.free(staging.name);
    }

    /// Writes the file `name` of the staging directory; the caller fsyncs and closes it.
    pub fn writeFile(
        staging: *const Staging,
        name: []const u8,
        bytes: []const u8,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        assert(name.len > 0 and std.mem.indexOfScalar(u8, name, '/') == null);
        return durable_files.writeFile(staging.dir.?, name, bytes, diagnostic);
    }

    /// fsyncs the shards directory and the staging directory (their entries).
    pub fn syncDirs(staging: *const Staging, diagnostic: *Diagnostic) Error!void {
        assert(staging.dir != null and staging.shards_dir != null);
        try durable_files.syncDir(staging.shards_dir.?, cache_layout.shards_dir, diagnostic);
        try durable_files.syncDir(staging.dir.?, staging.name, diagnostic);
    }

    /// Renames the staging directory to the target; the caller then fsyncs
    /// the base directory (`base_dir`).
    pub fn publish(staging: *Staging, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        assert(staging.dir != null);
        staging.closeDirs();
        // The lock is held, so only a writer that ignores it could have created the target.
        if (staging.targetExists()) {
            diagnostic.set("cache path already exists: {s}", .{staging.target_path});
            return error.AlreadyExists;
        }
        directory_entries.rename(
            io,
            staging.base_dir,
            staging.baseDirPath(),
            staging.name,
            staging.source_name,
        ) catch |err| {
            diagnostic.set(
                "cannot publish {s}: {f}",
                .{ staging.target_path, error_words.of(err) },
            );
            return error.Io;
        };
        assert(staging.dir == null and staging.shards_dir == null);
    }

    /// One writer per target across threads and processes: a second writer
    /// waits here until the first has published or given up. The holder deletes
    /// the lock file before unlocking, so a waiter that wakes up on a deleted
    /// file retries on the current one.
    pub fn lockTarget(staging: *Staging, diagnostic: *Diagnostic) Error!void {
        const taken = try staging.takeLock(.wait, diagnostic);
        assert(taken);
    }

    /// Like `lockTarget` without waiting: false (and no lock) when another
    /// writer holds the lock.
    pub fn tryLockTarget(staging: *Staging, diagnostic: *Diagnostic) LockError!bool {
        return staging.takeLock(.try_once, diagnostic);
    }

    pub const LockError = error{ Io, OutOfMemory };

    fn takeLock(
        staging: *Staging,
        mode: enum { wait, try_once },
        diagnostic: *Diagnostic,
    ) LockError!bool {
        assert(staging.lock_name.len == 0);
        const io = system.io();
        staging.lock_name = try std.fmt.allocPrint(
            staging.allocator,
            "{s}/{s}{s}",
            .{ cache_layout.staging_dir, staging.source_name, cache_layout.lock_suffix },
        );
        errdefer staging.allocator.free(staging.lock_name);
        for (0..lock_attempts_max) |_| {
            const file = staging.base_dir.createFile(
                io,
                staging.lock_name,
                .{ .truncate = false },
            ) catch |err| {
                diagnostic.set(
                    "cannot create lock file {s}{s}: {f}",
                    .{ staging.baseDirPath(), staging.lock_name, error_words.of(err) },
                );
                return error.Io;
            };
            const locked = switch (mode) {
                .wait => file_lock.lockExclusive(io, file),
                .try_once => if (file_lock.tryLockExclusive(io, file)) |taken| {
                    if (!taken) {
                        file.close(io);
                        staging.allocator.free(staging.lock_name);
                        staging.lock_name = &.{};
                        return false;
                    }
                } else |err| err,
            };
            locked catch |err| {
                file.close(io);
                diagnostic.set(
                    "cannot lock {s}{s}: {f}",
                    .{ staging.baseDirPath(), staging.lock_name, error_words.of(err) },
                );
                return error.Io;
            };
            const current = staging.isCurrentLockFile(file) catch |err| {
                file.close(io);
                diagnostic.set(
                    "cannot check lock file {s}{s}: {f}",
                    .{ staging.baseDirPath(), staging.lock_name, error_words.of(err) },
                );
                return error.Io;
            };
            if (current) {
                staging.lock_file = file;
                assert(staging.lock_name.len > 0);
                return true;
            }
            file.close(io);
        }
        diagnostic.set(
            "could not take the lock {s} after {d} attempts",
            .{ staging.lock_name, lock_attempts_max },
        );
        return error.Io;
    }

    const lock_attempts_max = 1000;

    /// Whether `file` is still the lock file at its path: not deleted (and perhaps
    /// created again) by the holder it waited for.
    fn isCurrentLockFile(staging: *const Staging, file: std.Io.File) file_status.Error!bool {
        assert(staging.lock_name.len > 0);
        const held = try file_status.inode(file);
        const current = file_status.pathInode(
            staging.base_dir,
            staging.lock_name,
        ) catch |err| switch (err) {
            error.FileNotFound => return false,
            else => |other| return other,
        };
        return held == current;
    }

    pub fn releaseLock(staging: *Staging) void {
        // Only once the staging directory is closed: nothing is written after.
        assert(staging.dir == null and staging.shards_dir == null);
        const io = system.io();
        directory_entries.deleteFile(
            io,
            staging.base_dir,
            staging.baseDirPath(),
            staging.lock_name,
        ) catch {};
        file_lock.unlock(io, staging.lock_file);
        staging.lock_file.close(io);
        staging.allocator.free(staging.lock_name);
    }

    fn targetExists(staging: *const Staging) bool {
        return directory_entries.exists(
            system.io(),
            staging.base_dir,
            staging.source_name,
            staging.target_path,
        );
    }

    fn createStaging(staging: *Staging, diagnostic: *Diagnostic) Error!void {
        assert(staging.name.len == 0 and staging.dir == null);
        const io = system.io();
        const Counter = struct {
            var next: std.atomic.Value(u64) = .init(0);
        };
        staging.name = try std.fmt.allocPrint(staging.allocator, "{s}/{d}.{x}.{d}.staging", .{
            cache_layout.staging_dir,
            system.processId(),
            system.monotonicNanoseconds(),
            Counter.next.fetchAdd(1, .monotonic),
        });
        errdefer staging.allocator.free(staging.name);
        staging.base_dir.createDir(io, staging.name, .default_dir) catch |err| {
            diagnostic.set(
                "cannot create staging directory {s}{s}: {f}",
                .{ staging.baseDirPath(), staging.name, error_words.of(err) },
            );
            return error.Io;
        };
        errdefer directory_entries.deleteTree(
            io,
            staging.base_dir,
            staging.baseDirPath(),
            staging.name,
        );
        const dir = staging.base_dir.openDir(io, staging.name, .{}) catch |err| {
            diagnostic.set(
                "cannot open staging directory {s}{s}: {f}",
                .{ staging.baseDirPath(), staging.name, error_words.of(err) },
            );
            return error.Io;
        };
        staging.dir = dir;
        errdefer staging.closeDirs();
        dir.createDir(io, cache_layout.shards_dir, .default_dir) catch |err| {
            diagnostic.set(
                "cannot create {s}{s}/shards: {f}",
                .{ staging.baseDirPath(), staging.name, error_words.of(err) },
            );
            return error.Io;
        };
        staging.shards_dir = dir.openDir(io, cache_layout.shards_dir, .{}) catch |err| {
            diagnostic.set(
                "cannot open {s}{s}/shards: {f}",
                .{ staging.baseDirPath(), staging.name, error_words.of(err) },
            );
            return error.Io;
        };
        assert(staging.dir != null and staging.shards_dir != null);
    }

    fn closeDirs(staging: *Staging) void {
        const io = system.io();
        if (staging.shards_dir) |dir| dir.close(io);
        if (staging.dir) |dir| dir.close(io);
        staging.shards_dir = null;
        staging.dir = null;
    }

    /// The base directory's path as given, with a trailing separator.
    pub fn baseDirPath(staging: *const Staging) []const u8 {
        assert(staging.target_path.len > staging.source_name.len);
        return staging.target_path[0 .. staging.target_path.len - staging.source_name.len];
    }
};

/// Whether a writer of `source_name` under `base_dir_path` holds its lock right now. A
/// shared lock is tried on the lock file and dropped at once: it cannot be had while a
/// writer holds its exclusive one, and it keeps a writer from the lock for no longer
/// than these calls. No lock file (or no base directory) means no writer.
/// `source_name` must be a valid cache name (`CacheWriter.checkSourceName`).
pub fn writerActive(
    base_dir_path: []const u8,
    source_name: []const u8,
    diagnostic: *Diagnostic,
) error{Io}!bool {
    assert(source_name.len > 0 and source_name.len <= name_bytes_max);
    assert(std.mem.indexOfScalar(u8, source_name, '/') == null);
    const io = system.io();
    const lock_bytes_max = cache_layout.staging_dir.len + 1 + name_bytes_max +
        cache_layout.lock_suffix.len;
    var lock_buffer: [lock_bytes_max]u8 = undefined;
    const lock_name = std.fmt.bufPrint(
        &lock_buffer,
        "{s}/{s}{s}",
        .{ cache_layout.staging_dir, source_name, cache_layout.lock_suffix },
    ) catch unreachable;
    var base_dir = std.Io.Dir.cwd().openDir(io, base_dir_path, .{}) catch |err| switch (err) {
        error.FileNotFound => return false,
        else => {
            const what = "cannot open cache directory {s}";
            return probeFailed(what, base_dir_path, err, diagnostic);
        },
    };
    defer base_dir.close(io);
    const file = base_dir.openFile(io, lock_name, .{}) catch |err| switch (err) {
        error.FileNotFound => return false,
        else => return probeFailed("cannot open lock file {s}", lock_name, err, diagnostic),
    };
    defer file.close(io);
    const taken = file_lock.tryLockShared(io, file) catch |err|
        return probeFailed("cannot lock {s}", lock_name, err, diagnostic);
    if (taken) file_lock.unlock(io, file);
    return !taken;
}

/// Cache names are plain path segments (`push_checks.checkSourceName`).
const name_bytes_max = durable_files.segment_bytes_max;

fn probeFailed(
    comptime what: []const u8,
    path: []const u8,
    err: anyerror,
    diagnostic: *Diagnostic,
) error{Io} {
    diagnostic.set(what ++ ": {f}", .{ path, error_words.of(err) });
    return error.Io;
}

test "writerActive: true while a writer holds the name's lock, false before and after" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var path_buffer: [256]u8 = undefined;
    const base = path_buffer[0..try tmp.dir.realPath(std.testing.io, &path_buffer)];
    var target_buffer: [300]u8 = undefined;
    const target = try std.fmt.bufPrint(&target_buffer, "{s}/c", .{base});
    var diagnostic: Diagnostic = .{};
    try std.testing.expect(!try writerActive(base, "c", &diagnostic)); // no tmp/ yet
    var staging = try Staging.open(std.testing.allocator, base, "c", target, &diagnostic);
    try std.testing.expect(try writerActive(base, "c", &diagnostic));
    try std.testing.expect(!try writerActive(base, "d", &diagnostic)); // another name
    staging.deinit(false);
    try std.testing.expect(!try writerActive(base, "c", &diagnostic)); // lock file deleted
    // A lock file left by a killed writer is not held.
    const left = try tmp.dir.createFile(std.testing.io, "tmp/c.lock", .{});
    left.close(std.testing.io);
    try std.testing.expect(!try writerActive(base, "c", &diagnostic));
    try std.testing.expect(!try writerActive("/nonexistent/base/folder", "c", &diagnostic));
}
