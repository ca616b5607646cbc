//! A fetch hook (`drt_remote`): the transport a caller hands the core, and
//! what the core does around every call of it.
//!
//! The hook copies one file of a cache in object storage into a new local
//! file whose name the core chose; the core checks it and only then renames
//! it to its final name. A file the manifest describes is checked against its
//! length and SHA-256: a mismatch deletes the copy and fetches it once more,
//! then fails naming both digests, so bad bytes never stay under a final
//! name. One thread of a process at a time fetches a given file; others
//! wanting it wait for that fetch and use its result. That thread then takes
//! the file's lock file (`fetch_lock.zig`), so that one process at a time
//! fetches it. Counts of what was fetched are kept here (`Stats`).
//!
//! Readers that know their coming reads register a `Future`; a fetch ahead of
//! need says so in its `Target` (`ahead`); `fetch_ahead.zig` starts those,
//! and `slots` caps the shard downloads at `max_in_flight`. With a byte budget
//! (`budget_bytes`), a shard's fetch first gets room for it in `local_dir`
//! (`shard_budget.zig`), evicting the shards whose next use is farthest; the
//! caches open through the hook list their shards as `Resident`s, so that an
//! eviction closes this process's file of a shard no read holds.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sha256 = @import("../codec/sha256.zig");
const file_status = @import("../base/file_status.zig");
const error_words = @import("../base/error_words.zig");
const durable_files = @import("../base/durable_files.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const cache_files = @import("cache_files.zig");
const fetch_lock = @import("fetch_lock.zig");
const shard_budget = @import("shard_budget.zig");
const fetch_slots = @import("fetch_slots.zig");

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// The fetch function's results (`DRT_FETCH_*`).
pub const fetch_ok: i32 = 0;
pub const fetch_not_found: i32 = 1;
pub const fetch_failed: i32 = 2;

/// `drt_fetch_fn`: every string is also NUL-terminated.
pub const FetchFn = *const fn (
    context: ?*anyopaque,
    url: [*]const u8,
    url_len: u64,
    name: [*]const u8,
    name_len: u64,
    dest_path: [*]const u8,
    dest_path_len: u64,
    message: [*]u8,
    message_cap: u64,
) callconv(.c) i32;

/// Bytes of the buffer the fetch function writes a failure's message into.
const message_bytes = 512;

pub const Stats = struct {
    /// Files the fetch function delivered (every attempt, every kind), and their bytes.
    fetched_files: u64 = 0,
    fetched_bytes: u64 = 0,
    /// Shards placed under their final name after their check, and their bytes.
    shards_fetched: u64 = 0,
    shard_bytes_fetched: u64 = 0,
    /// Deliveries that failed their check and were fetched again.
    refetches: u64 = 0,
    /// Shards deleted from the local folders to stay within the budget, and their bytes.
    evicted_shards: u64 = 0,
    evicted_bytes: u64 = 0,
};

/// Fetches of shards at once unless told otherwise (`drt_remote_set_max_in_flight`).
pub const default_max_in_flight: u32 = 4;

/// What one reader (a read pipeline of remote caches) knows of its coming
/// reads, registered with `Remote.addFuture` while it reads.
pub const Future = struct {
    context: *anyopaque,
    /// Stream positions from the reader's current one until it next reads
    /// shard `shard_id` of the cache whose local folder is `folder` (as in
    /// `Target.dir_path`), `from` positions from now or later; null when it
    /// does not within what it looks at.
    next_use: *const fn (context: *anyopaque, folder: []const u8, shard_id: u64, from: u64) ?u64,
};

/// A remote cache's shards as one cache open through the hook holds them,
/// listed with `Remote.addResident` while it is open.
pub const Resident = struct {
    context: *anyopaque,
    /// The cache's local folder (as `Target.dir_path`).
    folder: []const u8,
    /// Closes the process's file of shard `shard_id` and marks it absent (a
    /// later read fetches it again), unless a read pins it: then false.
    /// Called with the Remote's lock held.
    release: *const fn (context: *anyopaque, shard_id: u64) bool,
};

/// One file of a remote cache to fetch into its local folder.
pub const Target = struct {
    /// The cache's URL, as given.
    url: []const u8,
    /// Relative to the cache ("index.bin", "shards/000017.bin").
    name: []const u8,
    /// The cache's local folder, and its path.
    dir: std.Io.Dir,
    dir_path: []const u8,
    /// What the manifest says of the file: its length where it lists one, and its SHA-256.
    byte_len: ?u64,
    sha256: [sha256.digest_length]u8,
    shard: bool,
    /// For a fetch ahead of need: stream positions until the shard's first
    /// use. Null for a read that needs the file now.
    ahead: ?u64 = null,
    /// For a fetch ahead of need within a budget: told once the fetch has
    /// room, or was refused it, or needs none (see `Turn`).
    turn: ?Turn = null,
};

/// Lets a reader's fetches ahead take room in the budget in the order of
/// their first uses while they download at once: the next one asks for room
/// only after `passed` of this one. Otherwise a fetch for a later use that
/// got room first would be evicted again by the one for an earlier use.
pub const Turn = struct {
    context: *anyopaque,
    ticket: u64,
    passed: *const fn (context: *anyopaque, ticket: u64) void,

    fn pass(turn: Turn) void {
        turn.passed(turn.context, turn.ticket);
    }
};

pub const Outcome = enum {
    /// Fetched, checked and renamed to its final name.
    placed,
    /// Already under its final name (fetched earlier, or by a thread waited on).
    present,
    /// The fetch function says the object does not exist.
    not_found,
    /// Not fetched: a fetch `ahead` of need for which the budget has no room
    /// without evicting a shard that is needed sooner.
    no_room,
};

/// A version of a cache an open reads (`Remote.pinVersion`).
pub const Pin = struct {
    url: []u8,
    manifest_sha256: [sha256.digest_length]u8,
};

pub const Remote = struct {
    allocator: std.mem.Allocator,
    fetch_fn: FetchFn,
    context: ?*anyopaque,
    /// Where caches' folders are made: absolute where it resolves.
    local_dir: []u8,
    /// The caller's handle and every cache opened through it hold one.
    references: std.atomic.Value(u32) = .init(1),
    /// Numbers temporary names (with the process id).
    temp_counter: std.atomic.Value(u64) = .init(0),
    /// Under `mutex`: the counts, and the paths of the files being fetched.
    mutex: std.Io.Mutex = .init,
    done: std.Io.Condition = .init,
    counts: Stats = .{},
    in_flight: std.ArrayList([]u8) = .empty,
    /// The readers that said what they read next (`addFuture`); under `mutex`.
    /// Their `next_use` is called with `mutex` held, while a fetch holds the
    /// budget's lock (`shard_budget.zig`): it must neither call into the Remote
    /// nor wait for a thread that does.
    futures: std.ArrayList(*const Future) = .empty,
    /// The caches open through this hook (`addResident`); under `mutex`.
    residents: std.ArrayList(*const Resident) = .empty,
    /// Bytes of shards the local folders may hold at most; null: no limit.
    budget_bytes: ?u64 = null,
    /// Shard downloads at once, ahead of need or not (`slots`).
    max_in_flight: u32 = default_max_in_flight,
    /// Whether each open fetches the cache's manifest.json to learn which
    /// version the URL holds; false: a folder of `local_dir` that holds the
    /// version last fetched opens without a request (`remote_cache.zig`).
    revalidate: bool = true,
    /// Versions an open reads by URL (`pinVersion`), whatever `revalidate`
    /// says; under `mutex`.
    pins: std.ArrayList(Pin) = .empty,
    /// Taken around each shard's fetch (`shard_source.zig`, `fetch_ahead.zig`).
    slots: fetch_slots.Slots = .{},

    /// A hook calling `fetch_fn` with `context`, keeping caches' folders in
    /// `local_dir` (created if missing).
    pub fn create(
        allocator: std.mem.Allocator,
        fetch_fn: FetchFn,
        context: ?*anyopaque,
        local_dir: []const u8,
        diagnostic: *Diagnostic,
    ) Error!*Remote {
        assert(local_dir.len > 0);
        durable_files.createDirectories(local_dir, diagnostic) catch {
            diagnostic.prefix("local_dir {s}: ", .{local_dir});
            return error.Io;
        };
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const resolved = if (std.Io.Dir.cwd().realPathFile(system.io(), local_dir, &buffer)) |len|
            buffer[0..len]
        else |_|
            local_dir;
        const remote = try allocator.create(Remote);
        errdefer allocator.destroy(remote);
        remote.* = .{
            .allocator = allocator,
            .fetch_fn = fetch_fn,
            .context = context,
            .local_dir = try allocator.dupe(u8, resolved),
        };
        return remote;
    }

    pub fn acquire(remote: *Remote) void {
        const before = remote.references.fetchAdd(1, .monotonic);
        assert(before > 0);
    }

    pub fn release(remote: *Remote) void {
        const before = remote.references.fetchSub(1, .acq_rel);
        assert(before > 0);
        if (before > 1) return;
        assert(remote.in_flight.items.len == 0);
        assert(remote.futures.items.len == 0);
        assert(remote.residents.items.len == 0);
        remote.in_flight.deinit(remote.allocator);
        remote.futures.deinit(remote.allocator);
        remote.residents.deinit(remote.allocator);
        for (remote.pins.items) |pin| remote.allocator.free(pin.url);
        remote.pins.deinit(remote.allocator);
        remote.allocator.free(remote.local_dir);
        remote.allocator.destroy(remote);
    }

    /// Has every later open of the cache at `url` read the version whose
    /// manifest.json has SHA-256 `manifest_sha256`: from its folder in
    /// `local_dir`, without a request, while the folder holds it; else the
    /// open fetches the manifest as it would unpinned (`remote_cache.zig`).
    /// A dataset reopened in another process reads the version it read first.
    /// A later pin of the same URL replaces this one.
    pub fn pinVersion(
        remote: *Remote,
        url: []const u8,
        manifest_sha256: [sha256.digest_length]u8,
    ) error{OutOfMemory}!void {
        assert(url.len > 0);
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        for (remote.pins.items) |*pin| {
            if (std.mem.eql(u8, pin.url, url)) {
                pin.manifest_sha256 = manifest_sha256;
                return;
            }
        }
        const owned = try remote.allocator.dupe(u8, url);
        errdefer remote.allocator.free(owned);
        const pin: Pin = .{ .url = owned, .manifest_sha256 = manifest_sha256 };
        try remote.pins.append(remote.allocator, pin);
    }

    /// The version `pinVersion` pinned for `url`; null if none.
    pub fn pinnedVersion(remote: *Remote, url: []const u8) ?[sha256.digest_length]u8 {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        for (remote.pins.items) |pin| {
            if (std.mem.eql(u8, pin.url, url)) return pin.manifest_sha256;
        }
        return null;
    }

    pub fn stats(remote: *Remote) Stats {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        return remote.counts;
    }

    /// Lists `future` until `removeFuture`; the caller keeps it alive until then.
    pub fn addFuture(remote: *Remote, future: *const Future) error{OutOfMemory}!void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        try remote.futures.append(remote.allocator, future);
    }

    pub fn removeFuture(remote: *Remote, future: *const Future) void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        for (remote.futures.items, 0..) |listed, at| {
            if (listed == future) {
                _ = remote.futures.swapRemove(at);
                return;
            }
        }
        unreachable; // only a listed future is removed
    }

    /// Lists `resident` until `removeResident`; the caller keeps it alive until then.
    pub fn addResident(remote: *Remote, resident: *const Resident) error{OutOfMemory}!void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        try remote.residents.append(remote.allocator, resident);
    }

    /// Unlists `resident` (listed by `addResident`); its cache is closing.
    pub fn removeResident(remote: *Remote, resident: *const Resident) void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        for (remote.residents.items, 0..) |listed, at| {
            if (listed == resident) {
                _ = remote.residents.swapRemove(at);
                return;
            }
        }
        unreachable; // only a listed resident is removed
    }

    /// The soonest any registered reader reads shard `shard_id` of the cache
    /// in `folder` again; null: none does within what it looks at.
    pub fn nextUse(remote: *Remote, folder: []const u8, shard_id: u64, from: u64) ?u64 {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        var soonest: ?u64 = null;
        for (remote.futures.items) |future| {
            const next = future.next_use(future.context, folder, shard_id, from) orelse continue;
            if (soonest == null or next < soonest.?) soonest = next;
        }
        return soonest;
    }

    /// Before shard `shard_id` of the cache in `folder` is evicted: every
    /// cache open through this hook on that folder lets go of it; false when
    /// a read of one of them pins it.
    pub fn releaseResident(remote: *Remote, folder: []const u8, shard_id: u64) bool {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        for (remote.residents.items) |resident| {
            if (!std.mem.eql(u8, resident.folder, folder)) continue;
            if (!resident.release(resident.context, shard_id)) return false;
        }
        return true;
    }

    fn count(remote: *Remote, comptime field: []const u8, amount: u64) void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        @field(remote.counts, field) += amount;
    }

    /// Fetches `target` unless it is under its final name already, checks
    /// it and renames it into place; fetched again once if the check fails.
    /// Waits while another thread of the process fetches the same file, and
    /// then while another process does (`fetch_lock.zig`).
    pub fn fetchChecked(remote: *Remote, target: Target, diagnostic: *Diagnostic) Error!Outcome {
        assert(target.name.len > 0 and target.url.len > 0);
        const key = try std.fs.path.join(remote.allocator, &.{ target.dir_path, target.name });
        defer remote.allocator.free(key);
        // Passed on every return; a fetch that gets room passes it before it downloads.
        var turn = target.turn;
        defer if (turn) |pending| pending.pass();
        try remote.begin(key);
        defer remote.end(key);
        const io = system.io();
        if (directory_entries.exists(io, target.dir, target.name, key)) return .present;
        // Other processes on this folder: one of them at a time fetches the file.
        var claimed = try fetch_lock.claim(target.dir, target.dir_path, target.name, diagnostic);
        switch (claimed) {
            .present => return .present,
            .fetch => |*lock| {
                defer lock.release();
                const request = remote.budgetRequest(target) orelse
                    return remote.fetchPlaced(target, diagnostic);
                var evicted: shard_budget.Evicted = .{};
                const granted = shard_budget.reserve(remote, request, &evicted, diagnostic);
                remote.count("evicted_shards", evicted.shards);
                remote.count("evicted_bytes", evicted.bytes);
                if (turn) |pending| pending.pass();
                turn = null;
                if (try granted == .no_room) return .no_room;
                defer shard_budget.unreserve(request);
                return remote.fetchPlaced(target, diagnostic);
            },
        }
    }

    /// What a shard's fetch asks of the budget; null without a budget, and
    /// for the other files of a cache, which it does not cover.
    fn budgetRequest(remote: *const Remote, target: Target) ?shard_budget.Request {
        const budget_bytes = remote.budget_bytes orelse return null;
        if (!target.shard) return null;
        const byte_len = target.byte_len.?;
        return .{
            .local_dir = remote.local_dir,
            .budget_bytes = budget_bytes,
            .dir = target.dir,
            .dir_path = target.dir_path,
            .name = target.name,
            .byte_len = byte_len,
            .ahead = target.ahead,
        };
    }

    /// Fetches `target` (whose lock the caller holds), checks it and renames it
    /// into place; fetched again once if the check fails.
    fn fetchPlaced(remote: *Remote, target: Target, diagnostic: *Diagnostic) Error!Outcome {
        var first: Checked = undefined;
        for (0..2) |attempt| {
            var temp_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
            const temp = try remote.tempName(&temp_buffer, target.name, diagnostic);
            const delivered = try remote.fetchOnce(target, temp, diagnostic) orelse
                return .not_found;
            const checked = try placeIfMatching(target, temp, delivered, diagnostic);
            if (checked.matched) {
                if (target.shard) {
                    remote.count("shards_fetched", 1);
                    remote.count("shard_bytes_fetched", delivered);
                }
                return .placed;
            }
            if (attempt == 0) {
                remote.count("refetches", 1);
                first = checked;
                continue;
            }
            diagnostic.set(
                "{s}: fetched twice, and neither copy matches the manifest: SHA-256 {s} " ++
                    "({d} bytes), then {s} ({d} bytes), where the manifest says {s}{f}",
                .{
                    target.name,
                    &std.fmt.bytesToHex(first.digest, .lower),
                    first.len,
                    &std.fmt.bytesToHex(checked.digest, .lower),
                    checked.len,
                    &std.fmt.bytesToHex(target.sha256, .lower),
                    ListedLen{ .len = target.byte_len },
                },
            );
            return error.Io;
        }
        unreachable;
    }

    /// Waits until no thread fetches `key`, then marks it fetched by this one.
    fn begin(remote: *Remote, key: []const u8) Error!void {
        const io = system.io();
        const owned = try remote.allocator.dupe(u8, key);
        errdefer remote.allocator.free(owned);
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        while (remote.fetching(key) != null) remote.done.waitUncancelable(io, &remote.mutex);
        try remote.in_flight.append(remote.allocator, owned);
    }

    fn end(remote: *Remote, key: []const u8) void {
        const io = system.io();
        remote.mutex.lockUncancelable(io);
        defer remote.mutex.unlock(io);
        const at = remote.fetching(key).?;
        remote.allocator.free(remote.in_flight.swapRemove(at));
        remote.done.broadcast(io);
    }

    fn fetching(remote: *const Remote, key: []const u8) ?usize {
        for (remote.in_flight.items, 0..) |item, at| {
            if (std.mem.eql(u8, item, key)) return at;
        }
        return null;
    }

    /// `name` ++ ".tmp-<pid>-<counter>", unique in the process and among processes.
    pub fn tempName(
        remote: *Remote,
        buffer: []u8,
        name: []const u8,
        diagnostic: *Diagnostic,
    ) Error![]const u8 {
        const number = remote.temp_counter.fetchAdd(1, .monotonic);
        const infix = cache_layout.fetch_temp_infix;
        const pid = system.processId();
        return std.fmt.bufPrint(buffer, "{s}{s}{d}-{d}", .{ name, infix, pid, number }) catch {
            diagnostic.set("{s}: file name too long", .{name});
            return error.Io;
        };
    }

    /// Calls the fetch function for `target` into `temp` (in its folder): the
    /// bytes it delivered, or null when the object does not exist. A failure
    /// leaves no file at `temp`.
    pub fn fetchOnce(
        remote: *Remote,
        target: Target,
        temp: []const u8,
        diagnostic: *Diagnostic,
    ) Error!?u64 {
        var path_buffer: [std.Io.Dir.max_path_bytes + 1]u8 = undefined;
        const parts = .{ target.dir_path, temp };
        const dest = std.fmt.bufPrintSentinel(&path_buffer, "{s}/{s}", parts, 0) catch {
            diagnostic.set("{s}: the local path is too long", .{target.name});
            return error.Io;
        };
        const url = try remote.allocator.dupeSentinel(u8, target.url, 0);
        defer remote.allocator.free(url);
        const name = try remote.allocator.dupeSentinel(u8, target.name, 0);
        defer remote.allocator.free(name);
        var message: [message_bytes]u8 = @splat(0);
        const result = remote.fetch_fn(
            remote.context,
            url.ptr,
            url.len,
            name.ptr,
            name.len,
            dest.ptr,
            dest.len,
            &message,
            message.len,
        );
        if (result == fetch_ok) {
            const delivered = deliveredLen(target.dir, temp) catch |err| {
                diagnostic.set(
                    "{s}: the fetch function said it fetched the file, but {s}: {f}",
                    .{ target.name, dest, error_words.of(err) },
                );
                removeTemp(target, temp);
                return error.Io;
            };
            remote.count("fetched_files", 1);
            remote.count("fetched_bytes", delivered);
            return delivered;
        }
        removeTemp(target, temp);
        if (result == fetch_not_found) return null;
        const text = std.mem.sliceTo(message[0 .. message.len - 1], 0);
        if (result == fetch_failed) {
            diagnostic.set("{s}: cannot fetch it: {s}", .{ target.name, text });
        } else {
            diagnostic.set(
                "{s}: the fetch function returned {d}, not one of DRT_FETCH_OK, " ++
                    "DRT_FETCH_NOT_FOUND or DRT_FETCH_FAILED",
                .{ target.name, result },
            );
        }
        return error.Io;
    }
};

/// Prints ", and N bytes" after a digest when the manifest lists the length.
const ListedLen = struct {
    len: ?u64,

    pub fn format(listed: ListedLen, writer: *std.Io.Writer) std.Io.Writer.Error!void {
        const len = listed.len orelse return;
        try writer.print(" ({d} bytes)", .{len});
    }
};

fn deliveredLen(dir: std.Io.Dir, temp: []const u8) !u64 {
    const io = system.io();
    const file = try dir.openFile(io, temp, .{});
    defer file.close(io);
    return file_status.length(file);
}

/// Deletes a fetched copy that is not kept; a copy that cannot be deleted
/// stays under its temporary name, never its final one.
fn removeTemp(target: Target, temp: []const u8) void {
    var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const dir_path = std.fmt.bufPrint(&buffer, "{s}/", .{target.dir_path}) catch return;
    directory_entries.deleteFile(system.io(), target.dir, dir_path, temp) catch {};
}

const Checked = struct {
    matched: bool,
    digest: [sha256.digest_length]u8,
    len: u64,
};

/// Checks the copy at `temp` (`delivered` bytes) against `target`'s length
/// and SHA-256. A match is fsynced and renamed to the final name; a copy
/// that does not match is deleted.
fn placeIfMatching(
    target: Target,
    temp: []const u8,
    delivered: u64,
    diagnostic: *Diagnostic,
) Error!Checked {
    const io = system.io();
    const file = target.dir.openFile(io, temp, .{ .mode = .read_write }) catch |err| {
        const words = error_words.of(err);
        diagnostic.set("{s}: cannot open the fetched copy: {f}", .{ target.name, words });
        removeTemp(target, temp);
        return error.Io;
    };
    var closed = false;
    defer if (!closed) file.close(io);
    errdefer removeTemp(target, temp);
    const digest = try cache_files.fileHash(file, target.name, diagnostic);
    const length_ok = if (target.byte_len) |len| len == delivered else true;
    if (!length_ok or !std.mem.eql(u8, &digest, &target.sha256)) {
        file.close(io);
        closed = true;
        removeTemp(target, temp);
        return .{ .matched = false, .digest = digest, .len = delivered };
    }
    file.sync(io) catch |err| {
        const words = error_words.of(err);
        diagnostic.set("{s}: cannot fsync the fetched copy: {f}", .{ target.name, words });
        return error.Io;
    };
    file.close(io);
    closed = true;
    var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const dir_path = std.fmt.bufPrint(&buffer, "{s}/", .{target.dir_path}) catch unreachable;
    directory_entries.rename(io, target.dir, dir_path, temp, target.name) catch |err| {
        diagnostic.set("{s}: cannot rename the fetched copy into place: {f}", .{
            target.name, error_words.of(err),
        });
        return error.Io;
    };
    try syncParent(target, diagnostic);
    return .{ .matched = true, .digest = digest, .len = delivered };
}

/// Makes the rename of `target` durable: fsyncs the folder it is in.
fn syncParent(target: Target, diagnostic: *Diagnostic) Error!void {
    const parent = std.fs.path.dirname(target.name) orelse
        return durable_files.syncDir(target.dir, target.dir_path, diagnostic);
    const io = system.io();
    var dir = target.dir.openDir(io, parent, .{}) catch |err| {
        diagnostic.set("cannot open {s}: {f}", .{ parent, error_words.of(err) });
        return error.Io;
    };
    defer dir.close(io);
    return durable_files.syncDir(dir, parent, diagnostic);
}

fn noFetch(
    _: ?*anyopaque,
    _: [*]const u8,
    _: u64,
    _: [*]const u8,
    _: u64,
    _: [*]const u8,
    _: u64,
    _: [*]u8,
    _: u64,
) callconv(.c) i32 {
    return fetch_failed;
}

fn neverUsed(_: *anyopaque, _: []const u8, _: u64, _: u64) ?u64 {
    return null;
}

test "futures are listed until removed, in any order" {
    var diagnostic: Diagnostic = .{};
    const remote = try Remote.create(std.testing.allocator, noFetch, null, ".", &diagnostic);
    defer remote.release();
    var context: u8 = 0;
    const first: Future = .{ .context = &context, .next_use = neverUsed };
    const second: Future = .{ .context = &context, .next_use = neverUsed };
    try remote.addFuture(&first);
    try remote.addFuture(&second);
    remote.removeFuture(&first);
    try std.testing.expectEqual(@as(usize, 1), remote.futures.items.len);
    try std.testing.expectEqual(&second, remote.futures.items[0]);
    remote.removeFuture(&second);
    try std.testing.expectEqual(@as(usize, 0), remote.futures.items.len);
}

test {
    _ = @import("remote_test.zig");
    _ = @import("shard_budget.zig");
    _ = @import("shard_budget_test.zig");
}
