//! The byte budget of a `local_dir` (`Remote.budget_bytes`): the bytes of
//! fetched shards in every cache folder of `local_dir` stay within it, among
//! all the processes that share the directory.
//!
//! What counts: every shard file under its final name (`<folder>/shards/
//! NNNNNN.bin`) and every reservation of a fetch under way; never the index,
//! metadata, checksum or manifest files, nor lock files.
//!
//! The protocol, in lock files only (no shared memory, safe against `kill -9`
//! at any point): before a shard is fetched, its fetcher, holding the shard's
//! fetch lock (`fetch_lock.zig`), takes `<local_dir>/budget.lock`, measures
//! the directory (`Usage.scan`), evicts shards until the new one fits, and
//! writes a reservation `<shard>.reserved-<bytes>` beside it, which covers
//! the temporary file the fetch writes. It deletes the reservation once the
//! shard is under its final name (or the fetch failed). A reservation whose
//! shard's fetch lock can be taken belongs to a fetcher that died: the scan
//! deletes it and the fetch's temporaries.
//!
//! Eviction never removes a shard in use: this process's readers pin their
//! files (`open_shards.zig`), and every process holds a shared lock on each
//! remote shard file it has open, which the evicter must break with an
//! exclusive lock before it deletes the file. It prefers shards no reader
//! will read again, then the one whose next use is farthest (`owner.nextUse`).
//! A fetch ahead of need evicts only what that policy would evict at the
//! shard's first use: never a shard needed at or before it, nor one needed
//! again sooner than a shard that is read before it and later again (at the
//! first use, that one would go; a shard being fetched counts among those);
//! it gets no room instead, and the read fetches it when it needs it. A
//! fetch a read waits for, when every shard is in use, waits for one to be
//! released.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const file_lock = @import("../base/file_lock.zig");
const file_status = @import("../base/file_status.zig");
const error_words = @import("../base/error_words.zig");
const durable_files = @import("../base/durable_files.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const fetch_lock = @import("fetch_lock.zig");

pub const Error = error{ Io, OutOfMemory };

/// `budget.lock` in `local_dir`: held while the directory is measured, shards
/// are evicted and a reservation is written.
pub const lock_base_name = "budget";

/// Between a shard's name and the bytes its reservation holds.
pub const reservation_infix = ".reserved-";

/// How long a fetch a read waits for waits for room, at most.
pub const wait_seconds_max = 600;
const wait_step_ms = 10;

/// One shard fetch asking for room.
pub const Request = struct {
    /// The directory the budget covers.
    local_dir: []const u8,
    budget_bytes: u64,
    /// The shard's cache folder, its path, and its name in it ("shards/000017.bin").
    dir: std.Io.Dir,
    dir_path: []const u8,
    name: []const u8,
    byte_len: u64,
    /// Stream positions until the shard's first use, for a fetch ahead of
    /// need; null when a read needs it now.
    ahead: ?u64,
};

pub const Granted = enum { reserved, no_room };

/// Shards this process deleted to make room, and their bytes.
pub const Evicted = struct { shards: u64 = 0, bytes: u64 = 0 };

/// Finds room for `request`'s shard and reserves it: `.reserved` (release it
/// with `unreserve`), or `.no_room` for a fetch ahead of need that would have
/// to evict a shard needed sooner. `owner` answers `nextUse(folder, shard_id,
/// from) ?u64` and `releaseResident(folder, shard_id) bool` (see `Remote`).
pub fn reserve(
    owner: anytype,
    request: Request,
    evicted: *Evicted,
    diagnostic: *Diagnostic,
) Error!Granted {
    assert(std.mem.startsWith(u8, request.name, cache_layout.shards_dir ++ "/"));
    if (request.byte_len > request.budget_bytes) {
        // Opening a cache refuses such a budget; set after the open, it fails here.
        diagnostic.set("{s}: {d} bytes do not fit in budget_bytes={d}", .{
            request.name, request.byte_len, request.budget_bytes,
        });
        return error.Io;
    }
    const io = system.io();
    var local = std.Io.Dir.cwd().openDir(io, request.local_dir, .{ .iterate = true }) catch |err| {
        const words = error_words.of(err);
        diagnostic.set("cannot open local_dir {s}: {f}", .{ request.local_dir, words });
        return error.Io;
    };
    defer local.close(io);
    const started = system.monotonicNanoseconds();
    while (true) {
        var lock = try fetch_lock.FetchLock.acquire(
            local,
            request.local_dir,
            lock_base_name,
            diagnostic,
        );
        const outcome = reserveLocked(owner, local, request, evicted, diagnostic);
        lock.release();
        switch (try outcome) {
            .reserved => return .reserved,
            .no_room => return .no_room,
            .wait => {},
        }
        const waited_s = (system.monotonicNanoseconds() - started) / std.time.ns_per_s;
        if (waited_s >= wait_seconds_max) {
            diagnostic.set(
                "{s}: no room within budget_bytes={d} after {d} s: the shards in " ++
                    "{s} are all in use or being fetched",
                .{ request.name, request.budget_bytes, waited_s, request.local_dir },
            );
            return error.Io;
        }
        io.sleep(.fromMilliseconds(wait_step_ms), .awake) catch {};
    }
}

/// Deletes the reservation `reserve` wrote for `request`.
pub fn unreserve(request: Request) void {
    var name_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const name = reservationName(&name_buffer, request.name, request.byte_len) orelse return;
    var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{request.dir_path}) catch return;
    directory_entries.deleteFile(system.io(), request.dir, dir_path, name) catch {};
}

const Attempt = enum { reserved, no_room, wait };

/// One pass under the budget's lock: measure, evict while needed, reserve.
fn reserveLocked(
    owner: anytype,
    local: std.Io.Dir,
    request: Request,
    evicted: *Evicted,
    diagnostic: *Diagnostic,
) Error!Attempt {
    var usage = try Usage.scan(local, request, diagnostic);
    defer usage.deinit();
    if (!usage.fits(request)) {
        for (usage.candidates.items) |*candidate| {
            candidate.next_use = owner.nextUse(candidate.folder, candidate.shard_id, 0);
        }
        std.mem.sort(Candidate, usage.candidates.items, {}, Candidate.evictFirst);
        for (usage.fetching.items) |*fetching| {
            fetching.next_use = owner.nextUse(fetching.folder, fetching.shard_id, 0);
        }
        var later: u64 = 0;
        if (request.ahead) |ahead| {
            later = @max(
                laterUse(owner, usage.candidates.items, ahead),
                laterUse(owner, usage.fetching.items, ahead),
            );
            if (!usage.fitsEvictingAhead(request, ahead, later)) return .no_room;
        }
        for (usage.candidates.items) |candidate| {
            if (request.ahead) |ahead| {
                if (!candidate.evictableAhead(ahead, later)) break;
            }
            switch (evict(owner, candidate)) {
                .in_use => continue,
                .gone => {},
                .evicted => {
                    evicted.shards += 1;
                    evicted.bytes += candidate.bytes;
                },
            }
            usage.bytes -= candidate.bytes;
            if (usage.fits(request)) break;
        }
        if (!usage.fits(request)) return if (request.ahead == null) .wait else .no_room;
    }
    try writeReservation(request, diagnostic);
    return .reserved;
}

fn writeReservation(request: Request, diagnostic: *Diagnostic) Error!void {
    var name_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const name = reservationName(&name_buffer, request.name, request.byte_len) orelse {
        diagnostic.set("{s}: the reservation's name is too long", .{request.name});
        return error.Io;
    };
    const io = system.io();
    const file = request.dir.createFile(io, name, .{}) catch |err| {
        const words = error_words.of(err);
        diagnostic.set("cannot create {s}/{s}: {f}", .{ request.dir_path, name, words });
        return error.Io;
    };
    file.close(io);
}

fn reservationName(buffer: []u8, name: []const u8, byte_len: u64) ?[]const u8 {
    return std.fmt.bufPrint(buffer, "{s}{s}{d}", .{ name, reservation_infix, byte_len }) catch
        null;
}

/// A shard under its final name that eviction may delete.
const Candidate = struct {
    /// The cache folder's path (`local_dir/<folder>`), as `Target.dir_path`.
    folder: []const u8,
    shard_id: u64,
    bytes: u64,
    /// The soonest any reader of this process reads it again; null: never.
    next_use: ?u64 = null,

    /// Whether a fetch ahead of need, first read `ahead` positions from now,
    /// may evict it: it is next read after that, and not sooner than `later`
    /// (`laterUse`).
    fn evictableAhead(candidate: Candidate, ahead: u64, later: u64) bool {
        const next = candidate.next_use orelse return true;
        return next > ahead and next >= later;
    }

    /// Never used again first, then the farthest next use, then the lowest
    /// shard id (in stream order, read longest ago).
    fn evictFirst(_: void, a: Candidate, b: Candidate) bool {
        if ((a.next_use == null) != (b.next_use == null)) return a.next_use == null;
        if (a.next_use != null and a.next_use.? != b.next_use.?) return a.next_use.? > b.next_use.?;
        if (a.shard_id != b.shard_id) return a.shard_id < b.shard_id;
        return std.mem.lessThan(u8, a.folder, b.folder);
    }
};

/// For a fetch ahead of need first read `ahead` positions from now: the
/// farthest next use after it of the shards read before it (max: never
/// again). At the first use, Belady's policy would evict such a shard rather
/// than any shard needed sooner; so may a fetch ahead now, no sooner one.
fn laterUse(owner: anytype, candidates: []const Candidate, ahead: u64) u64 {
    var later: u64 = 0;
    for (candidates) |candidate| {
        const next = candidate.next_use orelse continue;
        if (next > ahead) continue;
        const again = owner.nextUse(candidate.folder, candidate.shard_id, ahead + 1) orelse
            return std.math.maxInt(u64);
        later = @max(later, again);
    }
    return later;
}

/// What the budget covers in `local_dir` right now.
const Usage = struct {
    arena: std.heap.ArenaAllocator,
    /// Shards under their final names, and live reservations.
    bytes: u64 = 0,
    candidates: std.ArrayList(Candidate) = .empty,
    /// The shards of the live reservations: being fetched, never evicted,
    /// but read before a fetch ahead and kept for later, like candidates.
    fetching: std.ArrayList(Candidate) = .empty,

    fn deinit(usage: *Usage) void {
        usage.arena.deinit();
    }

    fn fits(usage: *const Usage, request: Request) bool {
        return usage.bytes +| request.byte_len <= request.budget_bytes;
    }

    /// Whether evicting every shard a fetch ahead may evict makes room.
    fn fitsEvictingAhead(usage: *const Usage, request: Request, ahead: u64, later: u64) bool {
        var freed: u64 = 0;
        for (usage.candidates.items) |candidate| {
            if (candidate.evictableAhead(ahead, later)) freed += candidate.bytes;
        }
        return usage.bytes -| freed +| request.byte_len <= request.budget_bytes;
    }

    /// Measures every cache folder of `local` (the request's `local_dir`):
    /// its shards, and its reservations; a stale reservation is deleted with
    /// its fetch's temporaries. `request`'s own reservation is not counted.
    fn scan(local: std.Io.Dir, request: Request, diagnostic: *Diagnostic) Error!Usage {
        var usage: Usage = .{ .arena = .init(std.heap.c_allocator) };
        errdefer usage.deinit();
        const io = system.io();
        var folders = local.iterate();
        const dir = request.local_dir;
        while (folders.next(io) catch |err| return listFailure(dir, err, diagnostic)) |entry| {
            if (entry.kind != .directory) continue;
            if (entry.name.len != cache_layout.remote_folder_bytes) continue;
            const folder = try std.fs.path.join(
                usage.arena.allocator(),
                &.{ request.local_dir, entry.name },
            );
            try usage.scanFolder(local, entry.name, folder, request, diagnostic);
        }
        return usage;
    }

    fn scanFolder(
        usage: *Usage,
        local: std.Io.Dir,
        name: []const u8,
        folder: []const u8,
        request: Request,
        diagnostic: *Diagnostic,
    ) Error!void {
        const io = system.io();
        var folder_dir = local.openDir(io, name, .{}) catch return;
        defer folder_dir.close(io);
        var shards = folder_dir.openDir(io, cache_layout.shards_dir, .{ .iterate = true }) catch
            return;
        defer shards.close(io);
        var reservations: std.ArrayList(Reservation) = .empty;
        const arena = usage.arena.allocator();
        var entries = shards.iterate();
        while (entries.next(io) catch |err| return listFailure(folder, err, diagnostic)) |entry| {
            if (entry.kind == .directory) continue;
            if (shardId(entry.name)) |shard_id| {
                const bytes = file_status.pathLength(shards, entry.name) catch continue;
                usage.bytes += bytes;
                try usage.candidates.append(arena, .{
                    .folder = folder,
                    .shard_id = shard_id,
                    .bytes = bytes,
                });
            } else if (Reservation.parse(entry.name)) |found| {
                const file_name = try arena.dupe(u8, entry.name);
                try reservations.append(arena, .{ .file_name = file_name, .bytes = found.bytes });
            }
        }
        // Judged after the listing: deleting while listing may hide entries.
        for (reservations.items) |reservation| {
            const shard = reservation.shardName();
            if (std.mem.eql(u8, folder, request.dir_path) and
                std.mem.eql(u8, request.name[cache_layout.shards_dir.len + 1 ..], shard)) continue;
            if (!reservation.live(folder_dir, folder)) continue;
            usage.bytes += reservation.bytes;
            const shard_id = shardId(shard) orelse continue;
            try usage.fetching.append(arena, .{
                .folder = folder,
                .shard_id = shard_id,
                .bytes = reservation.bytes,
            });
        }
    }
};

fn listFailure(path: []const u8, err: anyerror, diagnostic: *Diagnostic) Error {
    diagnostic.set("cannot list {s}: {f}", .{ path, error_words.of(err) });
    return error.Io;
}

/// The shard id of a shard's final name ("000017.bin"), else null.
fn shardId(name: []const u8) ?u64 {
    const suffix = ".bin";
    if (!std.mem.endsWith(u8, name, suffix)) return null;
    const stem = name[0 .. name.len - suffix.len];
    if (stem.len == 0) return null;
    for (stem) |char| if (!std.ascii.isDigit(char)) return null;
    return std.fmt.parseInt(u64, stem, 10) catch null;
}

/// A reservation file in a shards directory: `<shard>.reserved-<bytes>`.
const Reservation = struct {
    file_name: []const u8,
    bytes: u64,

    fn parse(name: []const u8) ?Reservation {
        const at = std.mem.indexOf(u8, name, reservation_infix) orelse return null;
        const digits = name[at + reservation_infix.len ..];
        const bytes = std.fmt.parseInt(u64, digits, 10) catch return null;
        return .{ .file_name = name, .bytes = bytes };
    }

    fn shardName(reservation: Reservation) []const u8 {
        const at = std.mem.indexOf(u8, reservation.file_name, reservation_infix).?;
        return reservation.file_name[0..at];
    }

    /// Whether its fetcher still holds the shard's fetch lock. One that does
    /// not died: its reservation and temporaries are deleted, under that lock.
    fn live(reservation: Reservation, folder_dir: std.Io.Dir, folder: []const u8) bool {
        const io = system.io();
        var name_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const shard = std.fmt.bufPrint(&name_buffer, "{s}/{s}", .{
            cache_layout.shards_dir,
            reservation.shardName(),
        }) catch return true;
        var lock_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const lock_name = std.fmt.bufPrint(&lock_buffer, "{s}{s}", .{
            shard,
            fetch_lock.lock_suffix,
        }) catch return true;
        const lock_file = folder_dir.createFile(io, lock_name, .{ .truncate = false }) catch
            return true;
        defer lock_file.close(io);
        const taken = file_lock.tryLockExclusive(io, lock_file) catch return true;
        if (!taken) return true;
        defer file_lock.unlock(io, lock_file);
        _ = fetch_lock.removeTemporaries(folder_dir, folder, shard);
        reservation.remove(folder_dir, folder);
        return false;
    }

    fn remove(reservation: Reservation, folder_dir: std.Io.Dir, folder: []const u8) void {
        var name_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const name = std.fmt.bufPrint(&name_buffer, "{s}/{s}", .{
            cache_layout.shards_dir,
            reservation.file_name,
        }) catch return;
        var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{folder}) catch return;
        directory_entries.deleteFile(system.io(), folder_dir, dir_path, name) catch {};
    }
};

const Eviction = enum { evicted, gone, in_use };

/// Deletes `candidate`'s file unless a reader of any process holds it.
fn evict(owner: anytype, candidate: Candidate) Eviction {
    if (!owner.releaseResident(candidate.folder, candidate.shard_id)) return .in_use;
    const io = system.io();
    var shards_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const shards_path = std.fmt.bufPrint(&shards_buffer, "{s}/{s}", .{
        candidate.folder,
        cache_layout.shards_dir,
    }) catch return .in_use;
    var shards = std.Io.Dir.cwd().openDir(io, shards_path, .{}) catch return .in_use;
    defer shards.close(io);
    const name = cache_layout.ShardName.of(candidate.shard_id);
    var prefix_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const prefix = std.fmt.bufPrint(&prefix_buffer, "{s}/", .{shards_path}) catch return .in_use;
    const file = shards.openFile(io, name.slice(), .{}) catch |err| {
        return if (file_status.missing(err)) .gone else .in_use;
    };
    defer file.close(io);
    const taken = file_lock.tryLockExclusive(io, file) catch return .in_use;
    if (!taken) return .in_use;
    defer file_lock.unlock(io, file);
    // A file the system refuses to delete (Windows, open without sharing) is in use.
    directory_entries.deleteFile(io, shards, prefix, name.slice()) catch |err| {
        return if (file_status.missing(err)) .gone else .in_use;
    };
    var ignored: Diagnostic = .{};
    durable_files.syncDir(shards, shards_path, &ignored) catch {};
    return .evicted;
}

test "shard names and reservations are told apart" {
    try std.testing.expectEqual(@as(?u64, 17), shardId("000017.bin"));
    try std.testing.expectEqual(@as(?u64, null), shardId("000017.bin.lock"));
    try std.testing.expectEqual(@as(?u64, null), shardId("000017.bin.tmp-1-2"));
    try std.testing.expectEqual(@as(?u64, null), shardId(".bin"));
    const found = Reservation.parse("000017.bin.reserved-4096").?;
    try std.testing.expectEqual(@as(u64, 4096), found.bytes);
    try std.testing.expectEqualStrings("000017.bin", found.shardName());
    try std.testing.expect(Reservation.parse("000017.bin.lock") == null);
}
