//! Migrating caches to format 3 in place (`dataset-rt migrate --to 3`,
//! `CachedDataset.update_manifests(version=3)`): only manifest.json changes, to
//! the format 3 manifest of the same cache with the cache_id the caller gives
//! (the id the cache has in its dataset now, so that ids do not change).
//!
//! Every cache is checked before any manifest is written: each listed once,
//! none being written (its name's writer lock, `staging.zig`, is taken without
//! waiting and held to the end), each manifest valid, a format 2 manifest laid
//! out as the writers lay it out (so that rewriting it loses nothing), a format
//! 3 one already with the requested id (left unchanged: running it again is
//! safe). Then each manifest is replaced atomically: the new text written to
//! the base folder's `tmp/` and fsynced, renamed over manifest.json, and the
//! cache directory fsynced. Only an I/O failure in that last phase can stop it
//! with the caches before the failing one migrated.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const file_status = @import("../base/file_status.zig");
const directory_entries = @import("../base/directory_entries.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const cache_identity = @import("../format/cache_identity.zig");
const manifest = @import("../format/manifest.zig");
const Staging = @import("staging.zig").Staging;

pub const Error = error{ InvalidArgument, InvalidCache, Io, OutOfMemory, State };

/// What happened to one cache: its manifest replaced, or already format 3
/// with the requested id; `not_reached` after a failure stopped the run.
pub const Outcome = enum(u32) { updated = 0, unchanged = 1, not_reached = 2 };

/// A cache to migrate and the cache_id its format 3 manifest is to have.
pub const Target = struct { path: []const u8, cache_id: u64 };

/// The most caches one call migrates (a dataset's limit).
pub const targets_max = 1 << 20;

/// Migrates every target (see the file's comment); `outcomes[i]` tells what
/// happened to `targets[i]`, also when an error stops the run.
pub fn migrate(
    allocator: std.mem.Allocator,
    targets: []const Target,
    outcomes: []Outcome,
    diagnostic: *Diagnostic,
) Error!void {
    assert(targets.len == outcomes.len);
    @memset(outcomes, .not_reached);
    if (targets.len > targets_max) {
        const phrase = "{d} caches given; at most {d} are supported";
        diagnostic.set(phrase, .{ targets.len, targets_max });
        return error.InvalidArgument;
    }
    const plans = try allocator.alloc(Plan, targets.len);
    defer allocator.free(plans);
    var opened: usize = 0;
    defer for (plans[0..opened]) |*plan| plan.deinit();
    for (targets, plans) |target, *plan| {
        plan.* = try Plan.open(allocator, target, diagnostic);
        opened += 1;
    }
    try checkDistinct(allocator, plans, diagnostic);
    for (targets, plans) |target, *plan| try plan.check(target, diagnostic);
    for (plans, outcomes) |*plan, *outcome| {
        if (plan.text) |text| try plan.replaceManifest(text, diagnostic);
        outcome.* = if (plan.text == null) .unchanged else .updated;
    }
}

/// One cache, checked and locked; `text` is its new manifest, null when it
/// already is format 3 with the requested id.
const Plan = struct {
    allocator: std.mem.Allocator,
    /// The cache directory's real path, its base folder's (with a trailing
    /// separator) a prefix of it.
    real_path: []u8,
    name: []const u8,
    cache_dir: std.Io.Dir,
    /// Set while the lock is held.
    staging: ?Staging = null,
    text: ?[]u8 = null,

    /// The cache directory opened and its real path resolved; nothing locked yet.
    fn open(allocator: std.mem.Allocator, target: Target, diagnostic: *Diagnostic) Error!Plan {
        if (target.cache_id >= cache_identity.cache_id_limit) {
            const phrase = "cache {s}: cache_id {d} is not below 2^63";
            diagnostic.set(phrase, .{ target.path, target.cache_id });
            return error.InvalidArgument;
        }
        const io = system.io();
        const cache_dir = std.Io.Dir.cwd().openDir(io, target.path, .{}) catch |err| {
            const missing = file_status.missing(err);
            const phrase = if (missing) "missing manifest" else "I/O error";
            diagnostic.set("cache {s}: {s}: cannot open the cache directory: {f}", .{
                target.path, phrase, error_words.of(err),
            });
            return if (missing) error.InvalidCache else error.Io;
        };
        errdefer cache_dir.close(io);
        const real_path = try realPath(allocator, cache_dir, target.path, diagnostic);
        return .{
            .allocator = allocator,
            .real_path = real_path,
            .name = std.fs.path.basename(real_path),
            .cache_dir = cache_dir,
        };
    }

    /// Locks the cache and plans its new manifest.
    fn check(plan: *Plan, target: Target, diagnostic: *Diagnostic) Error!void {
        assert(plan.staging == null and plan.text == null);
        try plan.lock(target.path, diagnostic);
        plan.text = try newManifest(plan.allocator, plan.cache_dir, target, diagnostic);
    }

    fn deinit(plan: *Plan) void {
        const io = system.io();
        if (plan.staging != null) plan.unlock();
        plan.cache_dir.close(io);
        if (plan.text) |text| plan.allocator.free(text);
        plan.allocator.free(plan.real_path);
        plan.* = undefined;
    }

    /// Takes the lock the writers of this cache's name take, or refuses the
    /// cache when a writer holds it.
    fn lock(plan: *Plan, path: []const u8, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const base_path = plan.real_path[0 .. plan.real_path.len - plan.name.len];
        assert(base_path.len > 0 and std.fs.path.isSep(base_path[base_path.len - 1]));
        const base_dir = std.Io.Dir.cwd().openDir(io, base_path, .{}) catch |err| {
            const words = error_words.of(err);
            const phrase = "cache {s}: cannot open its folder {s}: {f}";
            diagnostic.set(phrase, .{ path, base_path, words });
            return error.Io;
        };
        errdefer base_dir.close(io);
        base_dir.createDir(io, cache_layout.staging_dir, .default_dir) catch |err| switch (err) {
            error.PathAlreadyExists => {},
            else => {
                diagnostic.set("cannot create {s}tmp: {f}", .{ base_path, error_words.of(err) });
                return error.Io;
            },
        };
        var staging: Staging = .{
            .allocator = plan.allocator,
            .source_name = plan.name,
            .target_path = plan.real_path,
            .base_dir = base_dir,
        };
        if (!try staging.tryLockTarget(diagnostic)) {
            const phrase = "cache {s} is being written by another process ({s}{s}/{s}{s} " ++
                "is held); nothing was migrated";
            const lock_dir = cache_layout.staging_dir;
            const suffix = cache_layout.lock_suffix;
            diagnostic.set(phrase, .{ path, base_path, lock_dir, plan.name, suffix });
            return error.State;
        }
        plan.staging = staging;
    }

    fn unlock(plan: *Plan) void {
        var staging = plan.staging.?;
        staging.releaseLock();
        staging.base_dir.close(system.io());
        plan.staging = null;
    }

    /// Writes `text` to the base folder's tmp/, fsyncs it and renames it over
    /// manifest.json, then fsyncs the cache directory.
    fn replaceManifest(plan: *Plan, text: []const u8, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const staging = &plan.staging.?;
        const temporary = try std.fmt.allocPrint(plan.allocator, "{s}/{d}.{x}.manifest", .{
            cache_layout.staging_dir, system.processId(), system.monotonicNanoseconds(),
        });
        defer plan.allocator.free(temporary);
        const base_dir = staging.base_dir;
        const file = durable_files.writeFile(base_dir, temporary, text, diagnostic) catch |err| {
            directory_entries.deleteFile(io, base_dir, staging.baseDirPath(), temporary) catch {};
            return err;
        };
        const synced = file.sync(io);
        file.close(io);
        synced catch |err| return plan.failReplace(temporary, "fsync", err, diagnostic);
        // Both named from the base folder: on Windows the fallback renames by path.
        const into = try std.fmt.allocPrint(plan.allocator, "{s}/{s}", .{
            plan.name, cache_layout.manifest_file,
        });
        defer plan.allocator.free(into);
        const base_path = staging.baseDirPath();
        directory_entries.replaceFile(io, base_dir, base_path, temporary, into) catch |err| {
            return plan.failReplace(temporary, "rename", err, diagnostic);
        };
        try durable_files.syncDir(plan.cache_dir, plan.real_path, diagnostic);
    }

    fn failReplace(
        plan: *Plan,
        temporary: []const u8,
        what: []const u8,
        err: anyerror,
        diagnostic: *Diagnostic,
    ) Error {
        const staging = &plan.staging.?;
        const base_path = staging.baseDirPath();
        directory_entries.deleteFile(system.io(), staging.base_dir, base_path, temporary) catch {};
        diagnostic.set("cache {s}: cannot {s} its new manifest.json ({s}{s}): {f}", .{
            plan.real_path, what, base_path, temporary, error_words.of(err),
        });
        return error.Io;
    }
};

fn realPath(
    allocator: std.mem.Allocator,
    dir: std.Io.Dir,
    path: []const u8,
    diagnostic: *Diagnostic,
) Error![]u8 {
    var buffer: [std.fs.max_path_bytes]u8 = undefined;
    const len = dir.realPath(system.io(), &buffer) catch |err| {
        diagnostic.set("cache {s}: cannot resolve its path: {f}", .{ path, error_words.of(err) });
        return error.Io;
    };
    return allocator.dupe(u8, buffer[0..len]);
}

/// The format 3 manifest of the cache in `cache_dir` with `target.cache_id`, or
/// null when it already is that one; refuses what cannot be migrated losslessly.
fn newManifest(
    allocator: std.mem.Allocator,
    cache_dir: std.Io.Dir,
    target: Target,
    diagnostic: *Diagnostic,
) Error!?[]u8 {
    const name = cache_layout.manifest_file;
    const bytes_max = manifest.manifest_bytes_max;
    const text = file_status.readAlloc(allocator, cache_dir, name, bytes_max) catch |err| {
        const missing = file_status.missing(err);
        diagnostic.set("cache {s}: {s}: cannot read manifest.json: {f}", .{
            target.path, if (missing) "missing manifest" else "I/O error", error_words.of(err),
        });
        return if (missing) error.InvalidCache else error.Io;
    };
    defer allocator.free(text);
    var parsed = manifest.parse(allocator, text, diagnostic) catch |err| {
        diagnostic.prefix("cache {s}: manifest.json: ", .{target.path});
        return if (err == error.OutOfMemory) error.OutOfMemory else error.InvalidCache;
    };
    defer parsed.deinit();
    var the_manifest = parsed.manifest;
    if (the_manifest.cache_id) |cache_id| {
        if (cache_id == target.cache_id) return null;
        diagnostic.set("cache {s} is format 3 with cache_id {d}, not {d}: not migrated", .{
            target.path, cache_id, target.cache_id,
        });
        return error.InvalidArgument;
    }
    const rewritten = try manifest.write(allocator, the_manifest);
    defer allocator.free(rewritten);
    if (!std.mem.eql(u8, rewritten, text)) {
        diagnostic.set("cache {s}: manifest.json is not laid out as the writers lay it out " ++
            "(another spelling, or a field this version does not know): not migrated, so that " ++
            "nothing in it is lost", .{target.path});
        return error.InvalidCache;
    }
    the_manifest.format_version = manifest.format_version_with_cache_id;
    the_manifest.cache_id = target.cache_id;
    const migrated = try manifest.write(allocator, the_manifest);
    // Format 2 plus the cache_id line: everything after the version is as it was.
    const after_version = text[std.mem.indexOfScalar(u8, text, ',').?..];
    assert(migrated.len > text.len and std.mem.endsWith(u8, migrated, after_version));
    return migrated;
}

/// Refuses a cache listed twice: its two positions cannot both be its id.
fn checkDistinct(
    allocator: std.mem.Allocator,
    plans: []const Plan,
    diagnostic: *Diagnostic,
) Error!void {
    const order = try allocator.alloc(u32, plans.len);
    defer allocator.free(order);
    for (order, 0..) |*index, position| index.* = @intCast(position);
    std.mem.sort(u32, order, plans, pathLessThan);
    if (order.len < 2) return;
    for (order[0 .. order.len - 1], order[1..]) |left, right| {
        if (!std.mem.eql(u8, plans[left].real_path, plans[right].real_path)) continue;
        const phrase = "the cache {s} is listed twice (paths[{d}] and paths[{d}]): " ++
            "nothing was migrated";
        diagnostic.set(phrase, .{ plans[left].real_path, @min(left, right), @max(left, right) });
        return error.InvalidArgument;
    }
}

fn pathLessThan(plans: []const Plan, left: u32, right: u32) bool {
    return switch (std.mem.order(u8, plans[left].real_path, plans[right].real_path)) {
        .lt => true,
        .gt => false,
        .eq => left < right,
    };
}

const testing = std.testing;

/// A base folder with caches whose manifests are format 2 (`v2`) or 3, no other file.
const TestBase = struct {
    tmp: testing.TmpDir,
    path_buffer: [std.fs.max_path_bytes]u8 = undefined,
    path_len: usize = 0,

    fn init() !TestBase {
        var base: TestBase = .{ .tmp = testing.tmpDir(.{}) };
        base.path_len = try base.tmp.dir.realPath(system.io(), &base.path_buffer);
        return base;
    }

    fn cachePath(base: *const TestBase, buffer: []u8, name: []const u8) ![]const u8 {
        return std.fmt.bufPrint(buffer, "{s}/{s}", .{ base.path_buffer[0..base.path_len], name });
    }

    fn write(base: *TestBase, name: []const u8, cache_id: ?u64) !void {
        const io = system.io();
        const text = try manifest.write(testing.allocator, testManifest(name, cache_id));
        defer testing.allocator.free(text);
        try base.tmp.dir.createDirPath(io, name);
        var dir = try base.tmp.dir.openDir(io, name, .{});
        defer dir.close(io);
        try dir.writeFile(io, .{ .sub_path = cache_layout.manifest_file, .data = text });
    }

    fn read(base: *TestBase, name: []const u8, buffer: []u8) ![]const u8 {
        const io = system.io();
        var dir = try base.tmp.dir.openDir(io, name, .{});
        defer dir.close(io);
        return dir.readFile(io, cache_layout.manifest_file, buffer);
    }
};

fn testManifest(name: []const u8, cache_id: ?u64) manifest.Manifest {
    return .{
        .format_version = if (cache_id == null) 2 else 3,
        .cache_id = cache_id,
        .source_name = name,
        .sample_count = 1,
        .metadata_schema = &.{.{ .name = "k", .kind = .int }},
        .metadata_sha256 = @splat(1),
        .index_sha256 = @splat(2),
        .shards = &.{},
        .record_checksums = .{ .byte_len = 4, .sha256 = @splat(3) },
    };
}

test "migrate makes a format 2 manifest format 3 with the given id, and again changes nothing" {
    var base: TestBase = try .init();
    defer base.tmp.cleanup();
    try base.write("a", null);
    try base.write("b", 7);
    var buffers: [2][std.fs.max_path_bytes]u8 = undefined;
    const targets = [_]Target{
        .{ .path = try base.cachePath(&buffers[0], "a"), .cache_id = 0 },
        .{ .path = try base.cachePath(&buffers[1], "b"), .cache_id = 7 },
    };
    var outcomes: [2]Outcome = undefined;
    var diagnostic: Diagnostic = .{};
    try migrate(testing.allocator, &targets, &outcomes, &diagnostic);
    try testing.expectEqualSlices(Outcome, &.{ .updated, .unchanged }, &outcomes);
    const expected = try manifest.write(testing.allocator, testManifest("a", 0));
    defer testing.allocator.free(expected);
    var buffer: [4096]u8 = undefined;
    try testing.expectEqualStrings(expected, try base.read("a", &buffer));
    try migrate(testing.allocator, &targets, &outcomes, &diagnostic);
    try testing.expectEqualSlices(Outcome, &.{ .unchanged, .unchanged }, &outcomes);
    // Neither the lock files nor the temporary manifests are left behind.
    var staging_dir = try base.tmp.dir.openDir(system.io(), "tmp", .{ .iterate = true });
    defer staging_dir.close(system.io());
    var entries = staging_dir.iterate();
    try testing.expectEqual(null, try entries.next(system.io()));
}

test "migrate refuses, before writing anything, what it cannot migrate" {
    var base: TestBase = try .init();
    defer base.tmp.cleanup();
    try base.write("v2", null);
    try base.write("v3", 7);
    try base.tmp.dir.createDirPath(system.io(), "empty");
    const Case = struct { name: []const u8, cache_id: u64, failure: Error, message: []const u8 };
    const missing = "missing manifest";
    const cases = [_]Case{
        .{
            .name = "v3",
            .cache_id = 8,
            .failure = error.InvalidArgument,
            .message = "is format 3 with cache_id 7, not 8",
        },
        .{ .name = "empty", .cache_id = 1, .failure = error.InvalidCache, .message = missing },
        .{ .name = "gone", .cache_id = 1, .failure = error.InvalidCache, .message = missing },
        .{
            .name = "v2",
            .cache_id = 1 << 63,
            .failure = error.InvalidArgument,
            .message = "is not below 2^63",
        },
    };
    var buffers: [2][std.fs.max_path_bytes]u8 = undefined;
    var before: [4096]u8 = undefined;
    const original = try base.read("v2", &before);
    for (cases) |case| {
        // The format 2 cache comes first and would be migrated if nothing were checked first.
        const targets = [_]Target{
            .{ .path = try base.cachePath(&buffers[0], "v2"), .cache_id = 0 },
            .{ .path = try base.cachePath(&buffers[1], case.name), .cache_id = case.cache_id },
        };
        var outcomes: [2]Outcome = undefined;
        var diagnostic: Diagnostic = .{};
        const result = migrate(testing.allocator, &targets, &outcomes, &diagnostic);
        try testing.expectError(case.failure, result);
        try testing.expect(std.mem.indexOf(u8, diagnostic.message(), case.message) != null);
        try testing.expectEqualSlices(Outcome, &.{ .not_reached, .not_reached }, &outcomes);
        var after: [4096]u8 = undefined;
        try testing.expectEqualStrings(original, try base.read("v2", &after));
    }
}

test "migrate refuses a cache listed twice, a respelled manifest and a cache being written" {
    var base: TestBase = try .init();
    defer base.tmp.cleanup();
    try base.write("a", null);
    const io = system.io();
    var buffers: [2][std.fs.max_path_bytes]u8 = undefined;
    const path = try base.cachePath(&buffers[0], "a");
    const twice = [_]Target{ .{ .path = path, .cache_id = 0 }, .{ .path = path, .cache_id = 1 } };
    var outcomes: [2]Outcome = undefined;
    var diagnostic: Diagnostic = .{};
    const listed_twice = migrate(testing.allocator, &twice, &outcomes, &diagnostic);
    try testing.expectError(error.InvalidArgument, listed_twice);
    try expectMessage(&diagnostic, "is listed twice (paths[0] and paths[1])");
    // A writer of "a" holds tmp/a.lock.
    try base.tmp.dir.createDirPath(io, "tmp");
    const lock_file = try base.tmp.dir.createFile(io, "tmp/a.lock", .{ .truncate = false });
    try @import("../base/file_lock.zig").lockExclusive(io, lock_file);
    const one = [_]Target{.{ .path = path, .cache_id = 0 }};
    const held = migrate(testing.allocator, &one, outcomes[0..1], &diagnostic);
    try testing.expectError(error.State, held);
    try expectMessage(&diagnostic, "is being written by another process");
    lock_file.close(io);
    // Another spelling of the same manifest would lose its layout: refused.
    var dir = try base.tmp.dir.openDir(io, "a", .{});
    defer dir.close(io);
    var buffer: [4096]u8 = undefined;
    const text = try dir.readFile(io, cache_layout.manifest_file, &buffer);
    const spaced = try std.mem.concat(testing.allocator, u8, &.{ text, "\n" });
    defer testing.allocator.free(spaced);
    try dir.writeFile(io, .{ .sub_path = cache_layout.manifest_file, .data = spaced });
    const respelled = migrate(testing.allocator, &one, outcomes[0..1], &diagnostic);
    try testing.expectError(error.InvalidCache, respelled);
    try expectMessage(&diagnostic, "is not laid out as the writers");
}

fn expectMessage(diagnostic: *const Diagnostic, part: []const u8) !void {
    testing.expect(std.mem.indexOf(u8, diagnostic.message(), part) != null) catch |err| {
        std.debug.print("message: {s}\n", .{diagnostic.message()});
        return err;
    };
}
