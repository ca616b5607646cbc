//! Fetching a read pipeline's remote shards ahead of need, in the order its
//! stream reads them.
//!
//! A pipeline whose plan has a remote cache gets a `FetchAhead`. Its scan
//! walks the plan forward from the consumer's position (the next sample to
//! hand out), maps each position to its cache and shard as the chunk reads do
//! (`Plan.locate`, `Cache.shardOf`), and notes the runs of positions that
//! read one shard. The scan is incremental (a cursor that only moves
//! forward, or jumps to the consumer when the consumer passes it) and
//! bounded: it stops `horizon_positions` positions past the consumer, or
//! when `runs_max` runs are noted; it moves on when the consumer does.
//! From the noted runs, in stream order, the first `lookaheadShards` remote
//! shards not yet in their folder are queued at their first use (`fill`);
//! a queued shard is claimed (`ShardSource.claimAhead`), so that a read
//! that needs it waits for this fetch instead of starting another. The
//! scan goes on past a full queue: the farther it has looked, the more
//! shards `next_use` can rank for eviction. Before the pipeline submits
//! reads, it scans and queues at least as far as they reach (`cover`, on
//! the consumer's thread, while a shard is missing): the pool reads chunks
//! ahead of the consumer in parallel, and a chunk that needs a later shard
//! then waits for its turn rather than fetching it first.
//!
//! Threads of the pipeline's own (never the pool's: a fetch blocks on the
//! network and may call into the caller's language) take queued shards in
//! queue order, each in a slot of the hook's `max_in_flight`
//! (`Remote.slots`, shared with reads that need a shard now, which take the
//! next free slot first). The first thread starts with the pipeline and
//! scans, or with the first shard `cover` queues when `cover` reaches the
//! whole plan or the scan is of no use (nothing missing, no budget asking
//! for `next_use`); more start, up to `max_in_flight` (at most
//! `threads_max`), when shards wait.
//! A fetch ahead that fails is dropped silently: the read that needs the
//! shard fetches it again and reports the error. When the budget has no
//! room (`Outcome.no_room`), the queue is dropped and nothing is fetched
//! ahead until the consumer moves on; the noted runs stay.
//!
//! Under a budget, the noted runs also bound the pipeline's own reads ahead
//! (`runEnd`, `withinShardWindow`): reads of more shards than the budget
//! holds would evict shards before the reads that need them.
//!
//! The noted runs answer `Future.next_use` for every shard of the window,
//! present or not; for a shard not in them, `next_use` scans on (within
//! the same bounds) until they hold it: an eviction must rank every shard,
//! and the threads fetch before they scan. A shard the bounded scan does
//! not reach is read past the window, if at all (or never, once the window
//! reaches the plan's end). `destroy` stops the
//! threads (a running fetch finishes, queued ones are dropped) and removes
//! the future.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const active_table = @import("../stream/active_table.zig");
const remote_module = @import("remote.zig");
const Remote = remote_module.Remote;
const Plan = @import("read_pipeline.zig").Plan;

/// Positions past the consumer's that the scan looks at, at most.
pub const horizon_positions: u64 = 1 << 20;
/// Runs (consecutive positions of one remote shard) the scan notes at most.
pub const runs_max: usize = 4096;
/// Threads of one pipeline at most, whatever `max_in_flight` is.
pub const threads_max: u32 = 16;
/// Positions scanned per hold of the lock, so `next_use` never waits long.
const scan_step_positions = 256;

/// Shards queued or being fetched ahead at most, for `max_in_flight`.
pub fn lookaheadShards(max_in_flight: u32) usize {
    assert(max_in_flight >= 1);
    return 2 * @as(usize, @min(max_in_flight, threads_max));
}

/// Positions `first` .. `end` (planned indexes) read shard `shard_id` of cache
/// `cache_index`; `failed`: a fetch ahead of it failed, so it is not queued again.
const Run = struct { cache_index: u32, shard_id: u64, first: u64, end: u64, failed: bool = false };

/// A shard to fetch ahead, first read at planned index `first_use`.
const Queued = struct {
    cache_index: u32,
    shard_id: u64,
    first_use: u64,
    running: bool,
    /// Its place among the fetches taken, for `remote_module.Turn`.
    ticket: u64 = 0,
};

pub const FetchAhead = struct {
    allocator: std.mem.Allocator,
    plan: *const Plan,
    remote: *Remote,
    /// The plan's rows, for the scan; under `mutex`.
    planner: active_table.RowPlanner,
    future: remote_module.Future,
    mutex: std.Io.Mutex = .init,
    /// Broadcast when the consumer moves, a fetch ends, or `destroy` begins.
    wake: std.Io.Condition = .init,
    stopping: std.atomic.Value(bool) = .init(false),
    /// The consumer's planned index: set without `mutex` (`advance`), read
    /// under it into `consumer`.
    handed_out: std.atomic.Value(u64) = .init(0),
    /// The consumer's position from which a waiting thread has work again
    /// (`wakeAtLocked`); `advance` wakes the threads only then.
    wake_at: std.atomic.Value(u64) = .init(std.math.maxInt(u64)),
    /// Under `mutex`: the consumer's planned index, and the next one to scan.
    consumer: u64 = 0,
    cursor: u64 = 0,
    /// How far the queue reaches: the missing shards of the planned indexes
    /// before it were queued (as far as the queue's capacity allowed);
    /// readable without `mutex` (`cover`).
    covered: std.atomic.Value(u64) = .init(0),
    /// Under `mutex`: set while the budget has no room, to the consumer's
    /// position then; cleared when the consumer moves past it.
    paused_at: ?u64 = null,
    /// Under `mutex`: tickets given to the fetches taken so far, and the
    /// first ticket whose fetch has not passed its turn (`remote_module.Turn`):
    /// within a budget, a fetch asks for room only once every fetch taken
    /// before it has.
    tickets: u64 = 0,
    turn: u64 = 0,
    /// Under `mutex`: the queue may have room for shards of the noted runs
    /// (a fetch ended, a pause ended, the scan noted more).
    refill: bool = false,
    /// Under `mutex`: the noted runs from `runs_head` on, in stream order.
    runs: std.ArrayList(Run),
    runs_head: usize = 0,
    /// Live runs at most: `runs_max`, or fewer for a short plan.
    runs_live_max: usize,
    /// Under `mutex`: the shards to fetch, by first use.
    queue: std.ArrayList(Queued),
    lookahead: usize,
    /// With a budget, the most distinct remote shards the samples read ahead
    /// of the consumer may need (`withinShardWindow`); null without one.
    window_shards: ?usize,
    /// With a budget, whether the window holds every remote shard of the plan:
    /// chunks then read across shards as without a budget (`runEnd`).
    holds_every_shard: bool = false,
    threads: [threads_max]std.Thread = undefined,
    /// Under `mutex`.
    thread_count: u32 = 0,

    /// A fetch ahead for `plan` (which outlives it), whose pipeline reads up
    /// to `prefetch_size` samples ahead of the consumer, with its first
    /// thread started if the plan is longer; null when the plan has no
    /// remote cache.
    pub fn create(
        allocator: std.mem.Allocator,
        plan: *const Plan,
        prefetch_size: u32,
    ) error{OutOfMemory}!?*FetchAhead {
        const remote = remoteOf(plan) orelse return null;
        const lookahead = lookaheadShards(@atomicLoad(u32, &remote.max_in_flight, .monotonic));
        var missing: u64 = 0;
        for (plan.caches) |cache| missing += cache.shards.missingCount();
        const queue_capacity = lookahead + @min(prefetch_size, missing);
        const ahead = try allocator.create(FetchAhead);
        errdefer allocator.destroy(ahead);
        // Allocated here, once: the threads never allocate.
        const runs_live_max: usize = @intCast(@max(1, @min(runs_max, plan.walk.count)));
        var runs = try std.ArrayList(Run).initCapacity(allocator, 2 * runs_live_max);
        errdefer runs.deinit(allocator);
        var queue = try std.ArrayList(Queued).initCapacity(allocator, queue_capacity);
        errdefer queue.deinit(allocator);
        ahead.* = .{
            .allocator = allocator,
            .plan = plan,
            .remote = remote,
            .planner = .init(plan.table, plan.sampling, plan.key),
            .future = .{ .context = ahead, .next_use = nextUse },
            .runs = runs,
            .runs_live_max = runs_live_max,
            .queue = queue,
            .lookahead = lookahead,
            .window_shards = windowShards(plan, remote),
        };
        ahead.holds_every_shard = if (ahead.window_shards) |window|
            window >= remoteShardCount(plan)
        else
            false;
        try remote.addFuture(&ahead.future);
        // A plan within one window is scanned whole by `cover`, which starts
        // a thread when it queues a shard; so is every plan when nothing is
        // missing and no budget asks for `next_use`.
        if (plan.walk.count <= prefetch_size or !ahead.scanWanted()) return ahead;
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        ahead.spawnLocked();
        return ahead;
    }

    /// With a budget, the shards of the plan's largest remote shard's size
    /// that fit in it, less one: the one fetched for a read, while the
    /// others wait for theirs to be read. At least one (an open refuses a
    /// budget below two of a cache's largest shards).
    fn windowShards(plan: *const Plan, remote: *const Remote) ?usize {
        const budget_bytes = remote.budget_bytes orelse return null;
        var largest: u64 = 1;
        for (plan.caches) |cache| {
            if (cache.shards.remoteHook() == null) continue;
            for (cache.shards.byteLens()) |byte_len| largest = @max(largest, byte_len);
        }
        return @intCast(@max(1, budget_bytes / largest -| 1));
    }

    /// The remote shards of the plan's caches.
    fn remoteShardCount(plan: *const Plan) u64 {
        var count: u64 = 0;
        for (plan.caches) |cache| {
            if (cache.shards.remoteHook() != null) count += cache.shards.count();
        }
        return count;
    }

    /// Whether the planned indexes from the consumer's up to `end` read at
    /// most `window_shards` (and at most 64) distinct remote shards, as far
    /// as the noted runs tell; always true without a budget. The pipeline
    /// reads ahead only that far: reads of more shards than the budget
    /// holds would evict shards before their reads, which then fetch them
    /// again.
    pub fn withinShardWindow(ahead: *FetchAhead, end: u64) bool {
        const limit = ahead.window_shards orelse return true;
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        const from = ahead.handed_out.load(.acquire);
        const Key = struct { cache_index: u32, shard_id: u64 };
        var seen_buffer: [64]Key = undefined;
        const seen_max = @min(limit, seen_buffer.len);
        var seen: usize = 0;
        runs: for (ahead.runs.items[ahead.runs_head..]) |noted| {
            if (noted.first >= end) break;
            if (noted.end <= from) continue;
            for (seen_buffer[0..seen]) |key| {
                if (key.cache_index == noted.cache_index and key.shard_id == noted.shard_id) {
                    continue :runs;
                }
            }
            if (seen == seen_max) return false;
            seen_buffer[seen] = .{ .cache_index = noted.cache_index, .shard_id = noted.shard_id };
            seen += 1;
        }
        return true;
    }

    /// With a budget, the end of the noted run of one shard that planned
    /// index `index` starts or is in: a chunk read under a budget reads one
    /// shard, so that the shards it read first are not kept (as needed by
    /// the positions it has read) while it fetches the next. Null without a
    /// budget, with one that holds every shard of the plan (its reads never
    /// delete one another's shards to make room: a shuffled chunk reads many
    /// shards, not one sample), or where no run is noted.
    pub fn runEnd(ahead: *FetchAhead, index: u64) ?u64 {
        if (ahead.window_shards == null or ahead.holds_every_shard) return null;
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        for (ahead.runs.items[ahead.runs_head..]) |noted| {
            if (noted.first > index) return null;
            if (noted.end > index) return noted.end;
        }
        return null;
    }

    /// The hook of the plan's remote caches (one for all); null if none is remote.
    fn remoteOf(plan: *const Plan) ?*Remote {
        var found: ?*Remote = null;
        for (plan.caches) |cache| {
            const hook = cache.shards.remoteHook() orelse continue;
            assert(found == null or found == hook); // a dataset opens with one hook
            found = hook;
        }
        return found;
    }

    /// Stops the threads (a running fetch finishes; queued ones are dropped),
    /// removes the future and frees everything.
    pub fn destroy(ahead: *FetchAhead) void {
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        ahead.stopping.store(true, .release);
        ahead.wake.broadcast(io);
        const count = ahead.thread_count;
        ahead.mutex.unlock(io);
        ahead.remote.slots.wakeAll();
        for (ahead.threads[0..count]) |thread| thread.join();
        for (ahead.queue.items) |queued| {
            assert(!queued.running);
            ahead.plan.caches[queued.cache_index].shards.dropAhead(queued.shard_id);
        }
        ahead.remote.removeFuture(&ahead.future);
        ahead.queue.deinit(ahead.allocator);
        ahead.runs.deinit(ahead.allocator);
        ahead.allocator.destroy(ahead);
    }

    /// Says that the consumer has handed out every planned index before
    /// `consumer`. Takes the lock only to wake a waiting thread.
    pub fn advance(ahead: *FetchAhead, consumer: u64) void {
        assert(consumer <= ahead.plan.walk.count);
        const before = ahead.handed_out.swap(consumer, .seq_cst);
        assert(consumer >= before);
        // Pairs with `run`: a thread that set `wake_at` before this store
        // either sees the new position or is woken here.
        if (consumer < ahead.wake_at.load(.seq_cst)) return;
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        ahead.wake.broadcast(io);
    }

    /// `Future.next_use`: from the noted runs, scanning on (within the
    /// scan's bounds) until they hold the shard's next use; a shard not in
    /// them is read past the window (null once the window reaches the
    /// plan's end). An eviction ranks every shard it may delete: shards the
    /// scan has not reached yet (while the threads fetch, the scan waits)
    /// would all rank alike, and the lowest id would go, needed or not.
    fn nextUse(context: *anyopaque, folder: []const u8, shard_id: u64, from: u64) ?u64 {
        const ahead: *FetchAhead = @ptrCast(@alignCast(context));
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        const consumer = ahead.handed_out.load(.acquire);
        const start = consumer +| from;
        while (true) {
            ahead.catchUpLocked();
            if (ahead.notedUseLocked(folder, shard_id, start)) |first| return first - consumer;
            if (!ahead.canScanLocked()) break;
            ahead.scanLocked();
            // Between steps, so that `cover` and the fetch threads never wait long.
            ahead.mutex.unlock(io);
            ahead.mutex.lockUncancelable(io);
        }
        // Not within the window: past it, unless the window reaches the end.
        if (ahead.cursor >= ahead.plan.walk.count) return null;
        return @max(ahead.cursor, start) - consumer;
    }

    /// The first planned index at or after `start` at which the noted runs
    /// read shard `shard_id` of the remote cache in `folder`.
    fn notedUseLocked(
        ahead: *const FetchAhead,
        folder: []const u8,
        shard_id: u64,
        start: u64,
    ) ?u64 {
        for (ahead.runs.items[ahead.runs_head..]) |noted| {
            if (noted.shard_id != shard_id or noted.end <= start) continue;
            const cache = ahead.plan.caches[noted.cache_index];
            const cache_folder = cache.shards.remoteFolder() orelse continue;
            if (!std.mem.eql(u8, cache_folder, folder)) continue;
            return @max(noted.first, start);
        }
        return null;
    }

    /// A thread's loop: fetch the next queued shard, else scan, else wait.
    fn run(ahead: *FetchAhead) void {
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        while (!ahead.stopping.load(.acquire)) {
            ahead.catchUpLocked();
            if (ahead.refill) ahead.fillLocked(ahead.lookahead);
            if (ahead.takeLocked()) |queued| {
                ahead.spawnLocked();
                const positions = queued.first_use -| ahead.consumer;
                ahead.mutex.unlock(io);
                const outcome = ahead.fetchOne(queued, positions);
                ahead.mutex.lockUncancelable(io);
                ahead.finishLocked(queued, outcome);
            } else if (ahead.canScanLocked() and ahead.scanWanted()) {
                ahead.scanLocked();
            } else {
                const wake_at = ahead.wakeAtLocked();
                ahead.wake_at.store(wake_at, .seq_cst);
                if (ahead.handed_out.load(.seq_cst) < wake_at) {
                    ahead.wake.waitUncancelable(io, &ahead.mutex);
                }
            }
        }
    }

    /// For a thread with nothing to do: the consumer's position at which
    /// the scan may go on, or never (a fetch's end or `cover` wakes it).
    fn wakeAtLocked(ahead: *const FetchAhead) u64 {
        const never = std.math.maxInt(u64);
        if (ahead.canScanLocked()) {
            assert(!ahead.scanWanted());
            return never;
        }
        if (ahead.paused_at) |paused_at| return paused_at + 1;
        if (ahead.cursor >= ahead.plan.walk.count) return never;
        if (ahead.runs.items.len - ahead.runs_head >= ahead.runs_live_max) {
            return ahead.runs.items[ahead.runs_head].end;
        }
        assert(ahead.cursor - ahead.consumer >= horizon_positions);
        return ahead.cursor - horizon_positions + 1;
    }

    /// Starts another thread when a queued shard waits for one and the
    /// pipeline has fewer than `max_in_flight` (the first: when it has none).
    fn spawnLocked(ahead: *FetchAhead) void {
        assert(!ahead.stopping.load(.acquire));
        const max = @min(threads_max, @atomicLoad(u32, &ahead.remote.max_in_flight, .monotonic));
        if (ahead.thread_count >= max) return;
        if (ahead.thread_count > 0 and ahead.waitingCountLocked() == 0) return;
        const options: std.Thread.SpawnConfig = .{ .stack_size = 4 << 20 };
        const thread = std.Thread.spawn(options, run, .{ahead}) catch return; // fewer at once
        ahead.threads[ahead.thread_count] = thread;
        ahead.thread_count += 1;
        assert(ahead.thread_count <= threads_max);
    }

    fn waitingCountLocked(ahead: *const FetchAhead) usize {
        var waiting: usize = 0;
        for (ahead.queue.items) |queued| waiting += @intFromBool(!queued.running);
        return waiting;
    }

    /// Follows the consumer: takes its position (`consumer`), forgets the
    /// runs it has passed, scans on from it if it passed the cursor, and
    /// once it moves past a pause, scans again from it.
    fn catchUpLocked(ahead: *FetchAhead) void {
        ahead.consumer = ahead.handed_out.load(.seq_cst);
        const consumer = ahead.consumer;
        if (ahead.paused_at) |paused_at| {
            if (consumer > paused_at) {
                ahead.paused_at = null;
                ahead.refill = true;
            }
        }
        while (ahead.runs_head < ahead.runs.items.len and
            ahead.runs.items[ahead.runs_head].end <= consumer) ahead.runs_head += 1;
        if (ahead.cursor < consumer) {
            assert(ahead.runs_head == ahead.runs.items.len);
            ahead.cursor = consumer;
        }
        assert(ahead.cursor >= consumer);
    }

    /// The first queued shard no thread fetches yet, now marked as fetched.
    fn takeLocked(ahead: *FetchAhead) ?Queued {
        if (ahead.paused_at != null) return null;
        for (ahead.queue.items) |*queued| {
            if (queued.running) continue;
            queued.running = true;
            queued.ticket = ahead.tickets;
            ahead.tickets += 1;
            return queued.*;
        }
        return null;
    }

    /// Fetches `queued` in a slot; null when it failed or was dropped.
    fn fetchOne(ahead: *FetchAhead, queued: Queued, positions: u64) ?remote_module.Outcome {
        const remote = ahead.remote;
        var turn: ?remote_module.Turn = null;
        if (remote.budget_bytes != null) {
            // Waited for before the slot, which the fetches before it may need.
            if (!ahead.awaitTurn(queued.ticket)) return null;
            turn = .{ .context = ahead, .ticket = queued.ticket, .passed = passed };
        }
        const max = @atomicLoad(u32, &remote.max_in_flight, .monotonic);
        if (!remote.slots.acquireAhead(max, &ahead.stopping)) return null;
        defer remote.slots.release();
        var diagnostic: Diagnostic = .{};
        const shards = &ahead.plan.caches[queued.cache_index].shards;
        // A failure is the read's to report, when it fetches the shard again.
        return shards.fetchAhead(queued.shard_id, positions, turn, &diagnostic) catch null;
    }

    /// Waits until the fetches taken before ticket `ticket` have passed their
    /// turn; false when the pipeline stops meanwhile.
    fn awaitTurn(ahead: *FetchAhead, ticket: u64) bool {
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        while (ahead.turn < ticket and !ahead.stopping.load(.acquire)) {
            ahead.wake.waitUncancelable(io, &ahead.mutex);
        }
        return !ahead.stopping.load(.acquire);
    }

    /// `remote_module.Turn.passed`.
    fn passed(context: *anyopaque, ticket: u64) void {
        const ahead: *FetchAhead = @ptrCast(@alignCast(context));
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        ahead.passLocked(ticket);
    }

    fn passLocked(ahead: *FetchAhead, ticket: u64) void {
        if (ahead.turn > ticket) return;
        ahead.turn = ticket + 1;
        ahead.wake.broadcast(system.io());
    }

    /// Ends `queued`'s fetch: takes it off the queue and drops its claim; on
    /// `no_room`, drops the whole queue and pauses until the consumer moves.
    fn finishLocked(ahead: *FetchAhead, queued: Queued, outcome: ?remote_module.Outcome) void {
        const at = ahead.queuedAt(queued.cache_index, queued.shard_id).?;
        assert(ahead.queue.items[at].running);
        _ = ahead.queue.orderedRemove(at);
        ahead.plan.caches[queued.cache_index].shards.dropAhead(queued.shard_id);
        ahead.passLocked(queued.ticket);
        ahead.refill = true;
        if (outcome == null) {
            // Left to the read, which fetches it again and reports a failure.
            for (ahead.runs.items[ahead.runs_head..]) |*noted| {
                if (noted.cache_index == queued.cache_index and noted.shard_id == queued.shard_id) {
                    noted.failed = true;
                }
            }
        }
        if (outcome == .no_room) {
            ahead.paused_at = ahead.consumer;
            var kept: usize = 0;
            for (ahead.queue.items) |item| {
                if (item.running) {
                    ahead.queue.items[kept] = item;
                    kept += 1;
                } else {
                    ahead.plan.caches[item.cache_index].shards.dropAhead(item.shard_id);
                }
            }
            ahead.queue.shrinkRetainingCapacity(kept);
        }
        ahead.wake.broadcast(system.io());
    }

    fn queuedAt(ahead: *const FetchAhead, cache_index: u32, shard_id: u64) ?usize {
        for (ahead.queue.items, 0..) |queued, at| {
            if (queued.cache_index == cache_index and queued.shard_id == shard_id) return at;
        }
        return null;
    }

    fn canScanLocked(ahead: *const FetchAhead) bool {
        if (ahead.cursor >= ahead.plan.walk.count) return false;
        if (ahead.cursor - ahead.consumer >= horizon_positions) return false;
        return ahead.runs.items.len - ahead.runs_head < ahead.runs_live_max;
    }

    /// Scans up to `scan_step_positions` positions from the cursor.
    fn scanLocked(ahead: *FetchAhead) void {
        assert(ahead.canScanLocked());
        var steps: u32 = 0;
        while (steps < scan_step_positions and ahead.canScanLocked()) : (steps += 1) {
            ahead.scanOneLocked(0);
        }
        ahead.refill = true;
    }

    /// Scans the position at the cursor: notes its run, and, while the queue
    /// holds fewer than `queue_limit` shards, queues its shard if missing.
    fn scanOneLocked(ahead: *FetchAhead, queue_limit: usize) void {
        const plan = ahead.plan;
        const index = ahead.cursor;
        ahead.cursor += 1;
        const location = plan.locate(&ahead.planner, index);
        const cache = plan.caches[location.cache_id];
        if (cache.shards.remoteHook() == null) return;
        const shard_id = cache.shardOf(location.sample_id) orelse return;
        ahead.noteLocked(location.cache_id, shard_id, index);
        if (ahead.queue.items.len < queue_limit) {
            ahead.queueLocked(location.cache_id, shard_id, index);
        }
    }

    /// Queues (and claims) shard `shard_id` of cache `cache_index`, first
    /// read at planned index `first_use`, unless it is in its folder or
    /// queued already.
    fn queueLocked(ahead: *FetchAhead, cache_index: u32, shard_id: u64, first_use: u64) void {
        if (!ahead.wantedLocked(cache_index, shard_id)) return;
        const cache = ahead.plan.caches[cache_index];
        // Full only past what the pool reads ahead: the read then fetches it.
        if (ahead.queue.items.len == ahead.queue.capacity) return;
        cache.shards.claimAhead(shard_id);
        ahead.queue.appendAssumeCapacity(.{
            .cache_index = cache_index,
            .shard_id = shard_id,
            .first_use = first_use,
            .running = false,
        });
        ahead.wake.broadcast(system.io());
        ahead.spawnLocked();
    }

    /// Whether shard `shard_id` of cache `cache_index` is missing and not queued.
    fn wantedLocked(ahead: *const FetchAhead, cache_index: u32, shard_id: u64) bool {
        if (!ahead.plan.caches[cache_index].shards.missing(shard_id)) return false;
        return ahead.queuedAt(cache_index, shard_id) == null;
    }

    /// Queues the shards of the noted runs not in their folder, in stream
    /// order, while the queue holds fewer than `queue_limit` (nothing while
    /// the budget has no room); `covered` then says how far the queue reaches.
    fn fillLocked(ahead: *FetchAhead, queue_limit: usize) void {
        ahead.refill = false;
        if (ahead.paused_at != null) return;
        for (ahead.runs.items[ahead.runs_head..]) |noted| {
            if (noted.end <= ahead.consumer or noted.failed) continue;
            if (!ahead.wantedLocked(noted.cache_index, noted.shard_id)) continue;
            const first_use = @max(noted.first, ahead.consumer);
            if (ahead.queue.items.len >= queue_limit) {
                ahead.covered.store(first_use, .release);
                return;
            }
            ahead.queueLocked(noted.cache_index, noted.shard_id, first_use);
        }
        ahead.covered.store(ahead.cursor, .release);
    }

    /// Scans and queues every planned index before `through` now, on the
    /// caller's thread, whatever the scan's bounds: the pipeline is about to
    /// read up to there, and a read ahead of the consumer then finds its
    /// shard claimed and waits for its turn instead of fetching out of order.
    /// Does nothing once the plan's remote caches hold every shard.
    pub fn cover(ahead: *FetchAhead, through: u64) void {
        assert(through <= ahead.plan.walk.count);
        if (ahead.covered.load(.acquire) >= through) return;
        if (!ahead.anyMissing()) return;
        const io = system.io();
        ahead.mutex.lockUncancelable(io);
        defer ahead.mutex.unlock(io);
        ahead.catchUpLocked();
        if (ahead.paused_at != null) return;
        // The noted runs first, so that the queue stays in stream order.
        ahead.fillLocked(ahead.queue.capacity);
        while (ahead.cursor < through) ahead.scanOneLocked(ahead.queue.capacity);
        ahead.covered.store(ahead.cursor, .release);
        assert(ahead.cursor >= through);
    }

    /// Whether the scan past `cover`'s reach is of use: while a shard is
    /// missing, and with a budget, whose eviction asks for `next_use`
    /// (without one, a shard stays once it is in).
    fn scanWanted(ahead: *const FetchAhead) bool {
        return ahead.remote.budget_bytes != null or ahead.anyMissing();
    }

    fn anyMissing(ahead: *const FetchAhead) bool {
        for (ahead.plan.caches) |cache| {
            if (cache.shards.missingCount() > 0) return true;
        }
        return false;
    }

    /// Notes that planned index `index` reads shard `shard_id` of cache `cache_index`.
    fn noteLocked(ahead: *FetchAhead, cache_index: u32, shard_id: u64, index: u64) void {
        const runs = &ahead.runs;
        if (runs.items.len > ahead.runs_head) {
            const last = &runs.items[runs.items.len - 1];
            if (last.cache_index == cache_index and last.shard_id == shard_id and
                last.end == index)
            {
                last.end = index + 1;
                return;
            }
        }
        // Past the bound only when `cover` scans far ahead: not noted.
        if (runs.items.len - ahead.runs_head >= ahead.runs_live_max) return;
        if (runs.items.len == runs.capacity) {
            // Move the live runs to the front; fewer than half are live.
            const live = runs.items.len - ahead.runs_head;
            std.mem.copyForwards(Run, runs.items[0..live], runs.items[ahead.runs_head..]);
            runs.shrinkRetainingCapacity(live);
            ahead.runs_head = 0;
        }
        runs.appendAssumeCapacity(.{
            .cache_index = cache_index,
            .shard_id = shard_id,
            .first = index,
            .end = index + 1,
        });
        assert(runs.items.len - ahead.runs_head <= ahead.runs_live_max);
    }
};

test {
    _ = @import("fetch_ahead_test.zig");
}
