//! fsyncs of the files a cache writer has written, done off the committing thread.
//!
//! A closed shard, or a file of the staging directory, is handed over with
//! `inBackground`: a pool job fsyncs and closes it while writing goes on,
//! unless a pusher waiting for room takes the fsync over first (`take`), which
//! leaves the pool's threads to encode, commit and hash instead of sleeping in
//! an fsync. `finish` waits for every fsync (`pending`) before anything is
//! published; a failed fsync fails the write.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const thread_pool = @import("../base/thread_pool.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const ShardName = @import("../format/cache_layout.zig").ShardName;
const ShardHasher = @import("shard_hasher.zig").ShardHasher;

/// Which file a `FileSync` is for, for its error message.
pub const SyncedFile = union(enum) {
    /// A closed shard, and its hasher (for `dropCachedPages`).
    shard: struct { index: u64, hasher: *ShardHasher },
    /// A file of the staging directory (a string literal).
    staging: []const u8,
};

pub const FileSyncs = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    /// The writer's mutex, which guards `waiting`, and its condition, on which
    /// a newly waiting fsync is announced: a pusher waiting for room takes it.
    mutex: *std.Io.Mutex,
    changed: *std.Io.Condition,
    /// Makes a failed fsync (an `error.Io`) the write's failure.
    failed: *const fn (syncs: *FileSyncs, diagnostic: *const Diagnostic) void,
    /// fsyncs of written files not yet done (`inBackground`).
    pending: thread_pool.WaitGroup = .{},
    /// Their pool jobs, which outlive an fsync that a pusher took over.
    jobs: thread_pool.WaitGroup = .{},
    /// fsyncs queued on the pool that nobody has started, oldest first (guarded
    /// by `mutex`): a pusher waiting for room takes them over (`takeLocked`).
    waiting: std.ArrayList(*FileSync) = .empty,

    /// Waits for every fsync and its job, then frees the queue.
    pub fn deinit(syncs: *FileSyncs) void {
        syncs.pending.wait();
        syncs.jobs.wait();
        assert(syncs.waiting.items.len == 0);
        syncs.waiting.deinit(syncs.allocator);
    }

    /// fsyncs and closes `file` on the pool (or on a waiting pusher); `finish`
    /// waits for every such fsync (`pending`) before publishing, and fails the
    /// write if one failed. A shard is fsynced once, when it is closed: fsyncs
    /// of the open shard as it grew as well made writing slower, presumably
    /// because each one also flushes the disk's cache.
    pub fn inBackground(syncs: *FileSyncs, file: std.Io.File, what: SyncedFile) void {
        const io = system.io();
        const work: Work = .{ .file = file, .what = what };
        syncs.pending.add(1);
        const sync = syncs.allocator.create(FileSync) catch return work.perform(syncs);
        sync.* = .{ .syncs = syncs, .work = work };
        syncs.mutex.lockUncancelable(io);
        syncs.waiting.append(syncs.allocator, sync) catch {
            syncs.mutex.unlock(io);
            syncs.allocator.destroy(sync);
            return work.perform(syncs);
        };
        // Each waiting fsync is one of the pending ones until it is performed.
        assert(syncs.waiting.items.len <= syncs.pending.pendingCount());
        syncs.changed.broadcast(io); // a waiting pusher may take it
        syncs.mutex.unlock(io);
        syncs.jobs.add(1);
        // The committer submits from a pool thread: it must not wait for room.
        syncs.pool.submitOrRun(&sync.job);
    }

    /// fsyncs and closes `file` on this thread.
    pub fn syncAndClose(syncs: *FileSyncs, file: std.Io.File, what: SyncedFile) void {
        // Counted pending until done (`Work.perform`), or done here by `close`.
        assert(syncs.pending.pendingCount() > 0 or what == .shard);
        switch (what) {
            .shard => |shard| assert(shard.hasher.name.slice().len > 0),
            .staging => |name| assert(name.len > 0),
        }
        const io = system.io();
        if (file.sync(io)) {
            // Hashed and on disk: its pages may go, unless the policy keeps them. If
            // the hash is not final yet, the hasher drops them when it is (they are
            // all clean by then).
            switch (what) {
                .shard => |shard| if (!shard.hasher.keep_pages and shard.hasher.isFinal()) {
                    durable_files.dropCachedPages(file, 0, 0);
                },
                .staging => {},
            }
        } else |err| {
            var diagnostic: Diagnostic = .{};
            switch (what) {
                .shard => |shard| diagnostic.set(
                    "cannot fsync shard {s}: {f}",
                    .{ ShardName.of(shard.index).slice(), error_words.of(err) },
                ),
                .staging => |name| diagnostic.set(
                    "cannot fsync {s}: {f}",
                    .{ name, error_words.of(err) },
                ),
            }
            syncs.failed(syncs, &diagnostic);
        }
        file.close(io);
    }

    /// Takes `sync` (or, when null, the oldest) from `waiting` if it is still there.
    pub fn take(syncs: *FileSyncs, sync: ?*FileSync) ?Work {
        const io = system.io();
        syncs.mutex.lockUncancelable(io);
        defer syncs.mutex.unlock(io);
        return syncs.takeLocked(sync);
    }

    /// `take` with `mutex` held.
    pub fn takeLocked(syncs: *FileSyncs, sync: ?*FileSync) ?Work {
        const waiting = &syncs.waiting;
        const position = if (sync) |wanted|
            std.mem.indexOfScalar(*FileSync, waiting.items, wanted) orelse return null
        else if (waiting.items.len > 0) 0 else return null;
        return waiting.orderedRemove(position).work;
    }
};

/// A written file's fsync, queued on the pool; it owns (and closes) the
/// file. Whoever takes it from `waiting` first does the fsync: the pool job,
/// or a pusher waiting for room.
pub const FileSync = struct {
    job: thread_pool.Job = .{ .run = run },
    syncs: *FileSyncs,
    work: Work,

    fn run(job: *thread_pool.Job) void {
        const sync: *FileSync = @fieldParentPtr("job", job);
        const syncs = sync.syncs;
        if (syncs.take(sync)) |work| work.perform(syncs);
        syncs.allocator.destroy(sync);
        syncs.jobs.finish();
    }
};

/// One fsync to do; copied out of its `FileSync` by whoever takes it.
pub const Work = struct {
    file: std.Io.File,
    what: SyncedFile,

    pub fn perform(work: Work, syncs: *FileSyncs) void {
        syncs.syncAndClose(work.file, work.what);
        syncs.pending.finish();
    }
};
