//! The process's open shard files: one bounded set for every cache of every
//! dataset, iterator and reader in the process.
//!
//! A cache does not hold its shards open. A shard's file is opened when a read
//! first needs it (or kept from the check that opening the cache makes, while
//! the set has room) and stays in the set until it is closed to make room. The
//! set holds at most `max` files (`default_max`; `drt_set_max_open_shards`).
//!
//! A read pins the file while it uses it: a count in the handle's state word,
//! changed with compare-and-swap, so a read of an open file takes no lock. A
//! pinned file is never closed. When the set is full, opening one more closes
//! an unpinned one: first a file that no planned read needs, the least
//! recently used; when planned reads need every one, the one whose announced
//! use comes last (`announce`: the read pipeline announces the shards of each
//! chunk of positions it plans, in stream order). Only while more reads than
//! `max` hold a pin at once does the set hold more than `max` files.
//!
//! A file reopened must be the file the cache was opened with: its inode and
//! length are compared with those seen then, and a replaced or resized shard
//! fails the read, naming it. An open that fails because the process is out of
//! descriptors closes an unpinned file of the set and tries again; when none
//! is left to close, the message says the limit and what the set holds.
//!
//! After fork() the child closes its copies of the set's descriptors and
//! starts with an empty set (pthread_atfork): the parent's handles belong to
//! the parent, and the child never acts on their state.
const std = @import("std");
const assert = std.debug.assert;
const builtin = @import("builtin");
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");
const file_lock = @import("../base/file_lock.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// Files the process's set holds at most unless told otherwise.
pub const default_max: u32 = 64;

/// The state word's flag of an open file; the bits below it count the pins.
const open_bit: u32 = 1 << 31;
const pins_mask: u32 = open_bit - 1;

/// One shard's place in the set. Owned by the cache's shard source; the set
/// lists it while its file is open.
pub const Handle = struct {
    /// `open_bit` while `file` is open, and the number of reads pinning it.
    state: std.atomic.Value(u32) = .init(0),
    /// Valid while `open_bit` is set.
    file: std.Io.File = undefined,
    /// The set's clock when the file was last used (`Set.clock`).
    last_use: std.atomic.Value(u64) = .init(0),
    /// Announced reads not yet done, and the ticket of the first of them.
    pending: std.atomic.Value(u32) = .init(0),
    next_use: std.atomic.Value(u64) = .init(0),
    /// Its index in `Set.open` while open; changed under the set's mutex.
    position: u32 = 0,
    /// The file as the cache was opened with it: a reopened file must match.
    expected: file_status.Identity,

    pub fn init(expected: file_status.Identity) Handle {
        return .{ .expected = expected };
    }

    pub fn isOpen(handle: *const Handle) bool {
        return handle.state.load(.acquire) & open_bit != 0;
    }
};

/// Where a handle's file is: `dir/name`, with the name from the shard index.
pub const Location = struct {
    /// The shards directory (absolute where it could be resolved).
    dir: []const u8,
    shard_id: u64,
    /// Take a shared lock on the file while it is open (`Set.openFile`).
    shared: bool = false,
};

/// What the set holds and has done, for `drt_open_shards_stats_get`.
pub const Stats = struct {
    open: u64,
    max: u64,
    opens: u64,
    evictions: u64,
};

pub const Set = struct {
    allocator: std.mem.Allocator,
    mutex: std.Io.Mutex = .init,
    max: u32 = default_max,
    /// The open handles, in no order; under `mutex`.
    open: std.ArrayList(*Handle) = .empty,
    /// Set while the set is full: reads then record when they use a file.
    full: std.atomic.Value(bool) = .init(false),
    /// Advances when a file opens and when a read of a full set uses a file.
    clock: std.atomic.Value(u64) = .init(0),
    /// Hands out the tickets that order announced reads.
    tickets: std.atomic.Value(u64) = .init(1),
    /// Files opened and files closed to make room; under `mutex`.
    opens: u64 = 0,
    evictions: u64 = 0,
    /// Whether this set's fork handlers are registered; under `mutex`.
    fork_handlers: bool = false,

    /// For sets other than `process` (tests): nothing may be open.
    pub fn deinit(set: *Set) void {
        assert(set.open.items.len == 0);
        set.open.deinit(set.allocator);
        set.* = undefined;
    }

    /// `handle`'s file, opened if it is not, pinned until `unpin`.
    pub fn pin(
        set: *Set,
        handle: *Handle,
        location: Location,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        if (tryPin(set, handle)) |file| return file;
        return set.pinSlow(handle, location, diagnostic);
    }

    /// `handle`'s file pinned if it is open, else null (nothing is opened).
    pub fn tryPin(set: *Set, handle: *Handle) ?std.Io.File {
        var state = handle.state.load(.acquire);
        while (state & open_bit != 0) {
            assert(state & pins_mask < pins_mask);
            state = handle.state.cmpxchgWeak(state, state + 1, .acquire, .acquire) orelse {
                if (set.full.load(.monotonic)) set.touch(handle);
                return handle.file;
            };
        }
        return null;
    }

    pub fn unpin(handle: *Handle) void {
        const before = handle.state.fetchSub(1, .release);
        assert(before & open_bit != 0 and before & pins_mask > 0);
    }

    fn touch(set: *Set, handle: *Handle) void {
        const now = set.clock.load(.monotonic);
        if (handle.last_use.load(.monotonic) == now) return;
        handle.last_use.store(set.clock.fetchAdd(1, .monotonic) + 1, .monotonic);
    }

    fn pinSlow(
        set: *Set,
        handle: *Handle,
        location: Location,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        const io = system.io();
        set.lock();
        defer set.mutex.unlock(io);
        // No file closes while the lock is held: one opened meanwhile stays open.
        if (handle.state.load(.acquire) & open_bit != 0) {
            _ = handle.state.fetchAdd(1, .acquire);
            set.touch(handle);
            return handle.file;
        }
        while (set.open.items.len >= set.max and set.evictOne()) {}
        set.open.ensureUnusedCapacity(set.allocator, 1) catch {
            diagnostic.set("out of memory while opening a shard", .{});
            return error.OutOfMemory;
        };
        const name = cache_layout.ShardName.of(location.shard_id);
        const file = try set.openLocked(location.dir, name.slice(), location.shared, diagnostic);
        errdefer file.close(io);
        try checkSame(handle.expected, file, name.slice(), diagnostic);
        set.add(handle, file, 1);
        return file;
    }

    /// Lists `handle` as open with `file` and `pins` pins; under the lock,
    /// with room in `open`'s capacity.
    fn add(set: *Set, handle: *Handle, file: std.Io.File, pins: u32) void {
        assert(handle.state.load(.monotonic) == 0);
        assert(set.open.items.len < set.open.capacity);
        handle.file = file;
        handle.position = @intCast(set.open.items.len);
        set.open.appendAssumeCapacity(handle);
        set.opens += 1;
        handle.last_use.store(set.clock.fetchAdd(1, .monotonic) + 1, .monotonic);
        handle.state.store(open_bit | pins, .release);
        set.full.store(set.open.items.len >= set.max, .monotonic);
    }

    /// Opens `dir/name` for a check outside the set; the caller closes it or
    /// hands it to `adopt`. Out of descriptors, the set closes an unpinned
    /// file and tries again. With `shared`, for a shard of a remote cache's
    /// folder that other processes sharing the folder may evict
    /// (`shard_budget.zig`): the file is held with a shared lock while it is
    /// open, which an evicter must break to delete it; a file an evicter
    /// holds, or deleted since its name was looked up, fails with
    /// error.InvalidCache: fetch it again.
    pub fn openFile(
        set: *Set,
        dir: []const u8,
        name: []const u8,
        shared: bool,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        set.lock();
        defer set.mutex.unlock(system.io());
        return set.openLocked(dir, name, shared, diagnostic);
    }

    fn openLocked(
        set: *Set,
        dir: []const u8,
        name: []const u8,
        shared: bool,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const path = std.fmt.bufPrint(&buffer, "{s}/{s}", .{ dir, name }) catch {
            diagnostic.set("I/O error: cannot open shards/{s}: file name too long", .{name});
            return error.Io;
        };
        while (true) {
            const file = std.Io.Dir.cwd().openFile(system.io(), path, .{}) catch |err| {
                if (outOfDescriptors(err) and set.evictOne()) continue;
                diagnostic.set("I/O error: cannot open {s}/{s}: {f}{f}", .{
                    cache_layout.shards_dir, name, error_words.of(err), set.heldWordsLocked(err),
                });
                return if (file_status.missing(err)) error.InvalidCache else error.Io;
            };
            skipAccessTimes(file);
            if (shared and !lockStillNamed(file, path)) {
                file.close(system.io());
                diagnostic.set("shards/{s} was evicted from the local folder", .{name});
                return error.InvalidCache;
            }
            return file;
        }
    }

    /// Keeps `file`, just opened and checked for `handle`, in the set if it
    /// has room; closes it otherwise.
    pub fn adopt(set: *Set, handle: *Handle, file: std.Io.File) void {
        const io = system.io();
        set.lock();
        defer set.mutex.unlock(io);
        // A read opened it meanwhile: that file is the same one.
        if (handle.state.load(.acquire) & open_bit != 0) return file.close(io);
        const room = set.open.items.len < set.max and
            (set.open.ensureUnusedCapacity(set.allocator, 1) catch null) != null;
        if (!room) return file.close(io);
        set.add(handle, file, 0);
    }

    /// Closes `handle`'s file if it is open and drops it from the set; no
    /// read may pin it any more (its cache is closing).
    pub fn forget(set: *Set, handle: *Handle) void {
        const io = system.io();
        set.lock();
        defer set.mutex.unlock(io);
        const state = handle.state.load(.acquire);
        if (state & open_bit == 0) return;
        assert(state & pins_mask == 0);
        handle.state.store(0, .monotonic);
        set.remove(handle);
    }

    /// Drops `handle`, whose state the caller has cleared, from `open`, and
    /// closes its file. Under the lock.
    fn remove(set: *Set, handle: *Handle) void {
        assert(set.open.items[handle.position] == handle);
        const moved = set.open.items[set.open.items.len - 1];
        set.open.items[handle.position] = moved;
        moved.position = handle.position;
        set.open.items.len -= 1;
        handle.file.close(system.io());
        set.full.store(set.open.items.len >= set.max, .monotonic);
    }

    /// Closes `handle`'s file unless a read pins it, and drops it from the set:
    /// true when its file is closed (or was not open), false when pinned.
    pub fn closeUnpinned(set: *Set, handle: *Handle) bool {
        set.lock();
        defer set.mutex.unlock(system.io());
        const state = handle.state.load(.acquire);
        if (state & open_bit == 0) return true;
        if (handle.state.cmpxchgStrong(open_bit, 0, .acquire, .monotonic) != null) return false;
        set.remove(handle);
        return true;
    }

    /// Closes the best unpinned file to close (`worseToKeep`); false when
    /// every open file is pinned. Under the lock.
    fn evictOne(set: *Set) bool {
        while (true) {
            var best: ?*Handle = null;
            for (set.open.items) |handle| {
                if (handle.state.load(.monotonic) & pins_mask != 0) continue;
                if (best == null or worseToKeep(handle, best.?)) best = handle;
            }
            const victim = best orelse return false;
            // A read may pin it between the scan and here: then look again.
            if (victim.state.cmpxchgStrong(open_bit, 0, .acquire, .monotonic) != null) continue;
            set.remove(victim);
            set.evictions += 1;
            return true;
        }
    }

    /// Sets the most files the set holds; closes unpinned files until it
    /// holds no more (pinned ones close when a later open needs room).
    pub fn setMax(set: *Set, max: u32) void {
        assert(max >= 1);
        set.lock();
        defer set.mutex.unlock(system.io());
        set.max = max;
        while (set.open.items.len > max and set.evictOne()) {}
        set.full.store(set.open.items.len >= set.max, .monotonic);
    }

    pub fn stats(set: *Set) Stats {
        set.lock();
        defer set.mutex.unlock(system.io());
        return .{
            .open = set.open.items.len,
            .max = set.max,
            .opens = set.opens,
            .evictions = set.evictions,
        };
    }

    /// A ticket for reads about to be planned: later tickets, later reads.
    pub fn ticket(set: *Set) u64 {
        return set.tickets.fetchAdd(1, .monotonic);
    }

    /// Says that a read planned under `at` (a `ticket`) will use `handle`'s
    /// file; `retire` says it is done.
    pub fn announce(handle: *Handle, at: u64) void {
        if (handle.pending.fetchAdd(1, .monotonic) == 0) handle.next_use.store(at, .monotonic);
    }

    pub fn retire(handle: *Handle) void {
        const before = handle.pending.fetchSub(1, .monotonic);
        assert(before > 0);
    }

    /// What the set holds, for the message of an open of another of a cache's
    /// files that failed with `err`: printed with `{f}`, it adds words only
    /// when the process ran out of descriptors.
    pub fn heldWords(set: *Set, err: anyerror) HeldWords {
        set.lock();
        defer set.mutex.unlock(system.io());
        return set.heldWordsLocked(err);
    }

    fn heldWordsLocked(set: *const Set, err: anyerror) HeldWords {
        return .{ .held = set.open.items.len, .max = set.max, .shown = outOfDescriptors(err) };
    }

    fn lock(set: *Set) void {
        set.mutex.lockUncancelable(system.io());
        if (set == &process and !set.fork_handlers) {
            set.fork_handlers = true;
            registerForkHandlers();
        }
    }

    /// In a forked child: closes the child's copies of the files and empties
    /// the set; the handles stay the parent's.
    fn forgetAfterFork(set: *Set) void {
        const io = system.io();
        for (set.open.items) |handle| {
            handle.file.close(io);
            handle.state.store(0, .monotonic);
        }
        set.open.items.len = 0;
        set.full.store(false, .monotonic);
        set.opens = 0;
        set.evictions = 0;
    }
};

pub const HeldWords = struct {
    held: usize,
    max: u32,
    shown: bool,

    pub fn format(words: HeldWords, writer: *std.Io.Writer) std.Io.Writer.Error!void {
        if (!words.shown) return;
        try writer.print(
            "; dataset_rt holds {d} shard file{s} open (at most {d}, its max_open_shards)",
            .{ words.held, if (words.held == 1) "" else "s", words.max },
        );
    }
};

/// Takes a shared lock on `file`, just opened at `path`, and checks that
/// `path` still names it: false when an evicter holds it, or deleted it
/// before this lock (then the path is gone or names a later copy).
fn lockStillNamed(file: std.Io.File, path: []const u8) bool {
    const io = system.io();
    const locked = file_lock.tryLockShared(io, file) catch return false;
    if (!locked) return false;
    const held = file_status.inode(file) catch return false;
    const named = file_status.pathInode(std.Io.Dir.cwd(), path) catch return false;
    return held == named;
}

fn outOfDescriptors(err: anyerror) bool {
    return err == error.ProcessFdQuotaExceeded or err == error.SystemFdQuotaExceeded;
}

/// Whether `a` is a better file to close than `b`: one no planned read needs
/// before one that is needed, then the one needed last, then the least
/// recently used.
fn worseToKeep(a: *const Handle, b: *const Handle) bool {
    const a_needed = a.pending.load(.monotonic) > 0;
    const b_needed = b.pending.load(.monotonic) > 0;
    if (a_needed != b_needed) return !a_needed;
    if (a_needed) {
        const a_next = a.next_use.load(.monotonic);
        const b_next = b.next_use.load(.monotonic);
        if (a_next != b_next) return a_next > b_next;
    }
    return a.last_use.load(.monotonic) < b.last_use.load(.monotonic);
}

/// Fails unless `file` is the file `expected` describes: the same inode and
/// the same length. `name` is the shard's file name, for the message.
pub fn checkSame(
    expected: file_status.Identity,
    file: std.Io.File,
    name: []const u8,
    diagnostic: *Diagnostic,
) Error!void {
    const actual = file_status.identity(file) catch |err| {
        diagnostic.set("I/O error: cannot stat shards/{s}: {f}", .{ name, error_words.of(err) });
        return error.Io;
    };
    if (actual.length != expected.length) {
        diagnostic.set(
            "shard length mismatch: shards/{s} has {d} bytes but the manifest says {d}",
            .{ name, actual.length, expected.length },
        );
        return error.InvalidCache;
    }
    if (actual.inode != expected.inode) {
        diagnostic.set(
            "shards/{s} was replaced since the cache was opened (inode {d}, was {d})",
            .{ name, actual.inode, expected.inode },
        );
        return error.InvalidCache;
    }
}

/// Asks that reads of a shard leave its access time alone: a shuffled pass
/// reads once per sample, and each read otherwise has the kernel consider
/// an access time update. Granted only to the file's owner; a hint, so a
/// refusal changes nothing.
fn skipAccessTimes(file: std.Io.File) void {
    if (builtin.os.tag != .linux) return;
    const linux = std.os.linux;
    const flags = linux.fcntl(file.handle, linux.F.GETFL, 0);
    if (linux.errno(flags) != .SUCCESS) return;
    const noatime: u32 = @bitCast(linux.O{ .NOATIME = true });
    _ = linux.fcntl(file.handle, linux.F.SETFL, flags | noatime);
}

/// The process's set: every cache's shards.
pub var process: Set = .{ .allocator = std.heap.c_allocator };

const has_fork = builtin.os.tag != .windows and builtin.os.tag != .wasi;

fn registerForkHandlers() void {
    // A failure (out of memory) leaves a child to inherit the parent's set;
    // it is not fatal, the copies only count against the child's limit.
    if (has_fork) _ = std.c.pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
}

/// No thread is inside the set's lock while the process forks.
fn beforeFork() callconv(.c) void {
    process.mutex.lockUncancelable(system.io());
}

fn afterForkInParent() callconv(.c) void {
    process.mutex.unlock(system.io());
}

fn afterForkInChild() callconv(.c) void {
    process.mutex = .init;
    process.forgetAfterFork();
}

test {
    _ = @import("open_shards_test.zig");
}
