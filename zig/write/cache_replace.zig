//! Replacing a published cache with a complete one written beside it (the
//! command line's `write --overwrite`). Under the name's writer lock, the one
//! every writer of that name takes (`staging.zig`), the old cache is renamed
//! aside into `tmp/`, the new one is renamed in, the base directory is
//! fsynced, and only then is the old one removed. A failure before the new
//! cache is in puts the old one back, so the name never loses its cache.
const std = @import("std");
const cache_layout = @import("../format/cache_layout.zig");
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const directory_entries = @import("../base/directory_entries.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Staging = @import("staging.zig").Staging;

pub const Error = error{ Io, OutOfMemory, InvalidArgument, InvalidCache, AlreadyExists };

pub const Outcome = enum(u32) { published = 0, replaced = 1 };

/// Publishes the cache at `fresh_name` (relative to `base_dir_path`, inside its
/// `tmp/`, so that a rename moves it) as `source_name`, replacing the cache
/// published there if there is one. `source_name` must be a valid cache name.
pub fn replace(
    allocator: std.mem.Allocator,
    base_dir_path: []const u8,
    source_name: []const u8,
    fresh_name: []const u8,
    diagnostic: *Diagnostic,
) Error!Outcome {
    std.debug.assert(durable_files.plainSegmentProblem(source_name) == null);
    try checkFreshName(fresh_name, diagnostic);
    const io = system.io();
    const target_path = try std.fs.path.join(allocator, &.{ base_dir_path, source_name });
    defer allocator.free(target_path);
    var staging: Staging = .{
        .allocator = allocator,
        .source_name = source_name,
        .target_path = target_path,
        .base_dir = std.Io.Dir.cwd().openDir(io, base_dir_path, .{}) catch |err| {
            diagnostic.set("cannot open cache directory {s}: {f}", .{
                base_dir_path, error_words.of(err),
            });
            return error.Io;
        },
    };
    defer staging.base_dir.close(io);
    try staging.lockTarget(diagnostic);
    defer staging.releaseLock();
    const outcome = try swapIn(allocator, &staging, fresh_name, diagnostic);
    std.debug.assert(cache_layout.isPublished(target_path));
    return outcome;
}

/// The lock is held: moves the old cache aside, the fresh one in, and removes
/// the old one once the base directory's entries are durable.
fn swapIn(
    allocator: std.mem.Allocator,
    staging: *Staging,
    fresh_name: []const u8,
    diagnostic: *Diagnostic,
) Error!Outcome {
    const io = system.io();
    const base_path = staging.baseDirPath();
    const fresh_path = try std.mem.concat(allocator, u8, &.{ base_path, fresh_name });
    defer allocator.free(fresh_path);
    if (!cache_layout.isPublished(fresh_path)) {
        diagnostic.set("{s} is not a complete cache (it has no manifest.json)", .{fresh_path});
        return error.InvalidCache;
    }
    const target = staging.target_path;
    const old_exists = directory_entries.exists(io, staging.base_dir, staging.source_name, target);
    if (old_exists and !cache_layout.isPublished(target)) {
        diagnostic.set("{s} is not a cache (it has no manifest.json): not replaced", .{target});
        return error.InvalidCache;
    }
    const aside = try std.fmt.allocPrint(allocator, "{s}/{d}.{x}.replaced", .{
        cache_layout.staging_dir, system.processId(), system.monotonicNanoseconds(),
    });
    defer allocator.free(aside);
    if (old_exists) try renameEntry(staging, staging.source_name, aside, diagnostic);
    renameEntry(staging, fresh_name, staging.source_name, diagnostic) catch |err| {
        if (old_exists) putBack(staging, aside, diagnostic);
        return err;
    };
    try durable_files.syncDir(staging.base_dir, base_path, diagnostic);
    if (!old_exists) return .published;
    directory_entries.deleteTree(io, staging.base_dir, base_path, aside);
    return .replaced;
}

/// After a failed swap: the old cache back under its name, or, when even that
/// fails, a message that says where it is.
fn putBack(staging: *Staging, aside: []const u8, diagnostic: *Diagnostic) void {
    const base_path = staging.baseDirPath();
    const io = system.io();
    const name = staging.source_name;
    directory_entries.rename(io, staging.base_dir, base_path, aside, name) catch |err| {
        diagnostic.prefix("the old cache could not be put back ({f}): it is at {s}{s}; ", .{
            error_words.of(err), base_path, aside,
        });
    };
}

fn renameEntry(
    staging: *Staging,
    from: []const u8,
    to: []const u8,
    diagnostic: *Diagnostic,
) Error!void {
    const base_path = staging.baseDirPath();
    directory_entries.rename(system.io(), staging.base_dir, base_path, from, to) catch |err| {
        diagnostic.set("cannot rename {s}{s} to {s}{s}: {f}", .{
            base_path, from, base_path, to, error_words.of(err),
        });
        return error.Io;
    };
}

/// The fresh cache must lie under the base's `tmp/`: on the same file system
/// (a rename moves it), out of readers' sight, and nowhere else.
fn checkFreshName(fresh_name: []const u8, diagnostic: *Diagnostic) Error!void {
    var segments = std.mem.tokenizeAny(u8, fresh_name, "/\\");
    const first = segments.next() orelse "";
    var depth: usize = 0;
    while (segments.next()) |segment| : (depth += 1) {
        if (std.mem.eql(u8, segment, "..") or std.mem.eql(u8, segment, ".")) break;
    } else if (std.mem.eql(u8, first, cache_layout.staging_dir) and depth >= 1 and
        !std.fs.path.isAbsolute(fresh_name)) return;
    diagnostic.set("the new cache must lie inside the base folder's {s}/ (got {s})", .{
        cache_layout.staging_dir, fresh_name,
    });
    return error.InvalidArgument;
}

fn writeCache(dir: std.Io.Dir, name: []const u8, marker: []const u8) !void {
    const io = std.testing.io;
    try dir.createDirPath(io, name);
    var cache = try dir.openDir(io, name, .{});
    defer cache.close(io);
    try cache.writeFile(io, .{ .sub_path = cache_layout.manifest_file, .data = marker });
}

fn readMarker(dir: std.Io.Dir, name: []const u8, buffer: []u8) ![]const u8 {
    const io = std.testing.io;
    var cache = try dir.openDir(io, name, .{});
    defer cache.close(io);
    return cache.readFile(io, cache_layout.manifest_file, buffer);
}

fn tmpBasePath(tmp: *std.testing.TmpDir, buffer: []u8) ![]const u8 {
    return buffer[0..try tmp.dir.realPath(std.testing.io, buffer)];
}

test "replace puts the new cache under the name and removes the old one" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    try writeCache(tmp.dir, "c", "old");
    try writeCache(tmp.dir, "tmp/work/c", "new");
    var path_buffer: [256]u8 = undefined;
    const base = try tmpBasePath(&tmp, &path_buffer);
    var diagnostic: Diagnostic = .{};
    const outcome = try replace(std.testing.allocator, base, "c", "tmp/work/c", &diagnostic);
    try std.testing.expectEqual(Outcome.replaced, outcome);
    var buffer: [16]u8 = undefined;
    try std.testing.expectEqualStrings("new", try readMarker(tmp.dir, "c", &buffer));
    // Nothing but the (now empty) work folder is left in tmp/.
    var staging_dir = try tmp.dir.openDir(std.testing.io, "tmp", .{ .iterate = true });
    defer staging_dir.close(std.testing.io);
    var entries = staging_dir.iterate();
    while (try entries.next(std.testing.io)) |entry| {
        try std.testing.expectEqualStrings("work", entry.name);
    }
}

test "replace publishes where no cache was" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    try writeCache(tmp.dir, "tmp/work/c", "new");
    var path_buffer: [256]u8 = undefined;
    const base = try tmpBasePath(&tmp, &path_buffer);
    var diagnostic: Diagnostic = .{};
    const outcome = try replace(std.testing.allocator, base, "c", "tmp/work/c", &diagnostic);
    try std.testing.expectEqual(Outcome.published, outcome);
}

test "replace refuses a target that is not a cache and a fresh one that is not complete" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    try tmp.dir.createDirPath(std.testing.io, "c/photos");
    try writeCache(tmp.dir, "tmp/work/c", "new");
    try tmp.dir.createDirPath(std.testing.io, "tmp/half/d");
    var path_buffer: [256]u8 = undefined;
    const base = try tmpBasePath(&tmp, &path_buffer);
    var diagnostic: Diagnostic = .{};
    const allocator = std.testing.allocator;
    const not_a_cache = replace(allocator, base, "c", "tmp/work/c", &diagnostic);
    try std.testing.expectError(error.InvalidCache, not_a_cache);
    try std.testing.expect(std.mem.indexOf(u8, diagnostic.message(), "is not a cache") != null);
    const not_complete = replace(allocator, base, "d", "tmp/half/d", &diagnostic);
    try std.testing.expectError(error.InvalidCache, not_complete);
    try std.testing.expect(std.mem.indexOf(u8, diagnostic.message(), "not a complete") != null);
    // The old folder and the fresh cache are where they were.
    var buffer: [16]u8 = undefined;
    try std.testing.expectEqualStrings("new", try readMarker(tmp.dir, "tmp/work/c", &buffer));
    try tmp.dir.access(std.testing.io, "c/photos", .{});
}

test "the fresh cache must lie in the base folder's tmp/" {
    var diagnostic: Diagnostic = .{};
    for ([_][]const u8{ "work/c", "tmp", "tmp/../c", "/tmp/work/c", "tmp/./c", "" }) |name| {
        try std.testing.expectError(error.InvalidArgument, checkFreshName(name, &diagnostic));
    }
    try checkFreshName("tmp/work/c", &diagnostic);
    try checkFreshName("tmp/c", &diagnostic);
}
