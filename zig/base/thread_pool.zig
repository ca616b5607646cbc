//! A fixed set of worker threads fed from one bounded job queue.
//!
//! The threads start once when the runtime is created and are reused by every
//! operation; `submit` blocks while the queue is full, so a producer can never
//! queue unbounded work. Jobs are intrusive: the caller embeds a `Job` in its own
//! struct and recovers it with `@fieldParentPtr`.
const std = @import("std");
const system = @import("system.zig");

pub const Job = struct {
    run: *const fn (job: *Job) void,
};

pub const workers_max = 256;
pub const queue_capacity = 1024;

/// How long a worker that has just finished a job spins for the next one
/// before it sleeps. On a virtual machine waking a sleeping thread's idle vCPU
/// costs tens of microseconds, and a reader's chunks come one after another:
/// the consumer submits the next chunk as soon as it takes the last one, so
/// without the spin every chunk would wait for a wake-up.
const job_wait_spin_ns = 50 * std.time.ns_per_us;

/// Only a worker whose job took at most this long spins: after long jobs (a
/// chunk of several MiB of large payloads) a wake-up costs little in
/// proportion, and a spinning worker would take a core from the threads still
/// copying.
const spin_after_job_ns_max = 250 * std.time.ns_per_us;

pub const ThreadPool = struct {
    mutex: std.Io.Mutex = .init,
    not_empty: std.Io.Condition = .init,
    not_full: std.Io.Condition = .init,
    queue: [queue_capacity]*Job = undefined,
    queue_head: usize = 0,
    /// Changed only with `mutex` held (read there as `.raw`); atomic so that a
    /// spinning worker can read it without the mutex.
    queue_len: std.atomic.Value(usize) = .init(0),
    /// Whether a worker is spinning for the next job (`spinForJob`; one at a time).
    spinning: std.atomic.Value(bool) = .init(false),
    stopping: bool = false,
    threads: []std.Thread = &.{},
    allocator: std.mem.Allocator,
    /// The process that started the threads; a forked child has none of them.
    owner_process_id: i64,
    /// The runtime handle and every writer and dataset using the pool hold one
    /// reference; the threads stop when the last is released, whatever order
    /// the binding's finalizers run in.
    references: std.atomic.Value(u32) = .init(1),

    pub fn create(allocator: std.mem.Allocator, worker_count: u32) !*ThreadPool {
        std.debug.assert(worker_count >= 1 and worker_count <= workers_max);
        const pool = try allocator.create(ThreadPool);
        errdefer allocator.destroy(pool);
        pool.* = .{ .allocator = allocator, .owner_process_id = system.processId() };
        const threads = try allocator.alloc(std.Thread, worker_count);
        errdefer allocator.free(threads);
        var started: usize = 0;
        errdefer {
            pool.stopAndJoin(threads[0..started]);
        }
        while (started < worker_count) : (started += 1) {
            threads[started] = try std.Thread.spawn(
                .{ .stack_size = 4 << 20 },
                workerLoop,
                .{pool},
            );
        }
        pool.threads = threads;
        return pool;
    }

    pub fn acquire(pool: *ThreadPool) *ThreadPool {
        _ = pool.references.fetchAdd(1, .monotonic);
        return pool;
    }

    /// Drops one reference; the last one stops the threads and frees the pool.
    pub fn release(pool: *ThreadPool) void {
        if (pool.references.fetchSub(1, .acq_rel) == 1) pool.destroy();
    }

    fn destroy(pool: *ThreadPool) void {
        // A forked child must not join threads that only exist in the parent.
        if (pool.ownedByThisProcess()) pool.stopAndJoin(pool.threads);
        pool.allocator.free(pool.threads);
        pool.allocator.destroy(pool);
    }

    pub fn workerCount(pool: *const ThreadPool) u32 {
        return @intCast(pool.threads.len);
    }

    pub fn ownedByThisProcess(pool: *const ThreadPool) bool {
        return pool.owner_process_id == system.processId();
    }

    /// Queues `job`; blocks while the queue is full.
    pub fn submit(pool: *ThreadPool, job: *Job) void {
        const io = system.io();
        pool.mutex.lockUncancelable(io);
        defer pool.mutex.unlock(io);
        std.debug.assert(!pool.stopping);
        while (pool.queue_len.raw == queue_capacity) pool.not_full.waitUncancelable(
            io,
            &pool.mutex,
        );
        pool.enqueueLocked(job);
    }

    /// Queues `job`, or runs it on the calling thread when the queue is full.
    /// For jobs submitted by a job: a pool thread must never wait for room in
    /// the queue, since only the pool's threads (with one worker, itself alone)
    /// make room.
    pub fn submitOrRun(pool: *ThreadPool, job: *Job) void {
        const io = system.io();
        pool.mutex.lockUncancelable(io);
        std.debug.assert(!pool.stopping);
        if (pool.queue_len.raw == queue_capacity) {
            pool.mutex.unlock(io);
            job.run(job);
            return;
        }
        pool.enqueueLocked(job);
        pool.mutex.unlock(io);
    }

    /// Removes `job` from the queue if no worker has taken it yet, keeping the
    /// order of the others; true when it was removed (the caller then owns
    /// running it), false when a worker has it (or it was never queued).
    pub fn takeBack(pool: *ThreadPool, job: *Job) bool {
        const io = system.io();
        pool.mutex.lockUncancelable(io);
        defer pool.mutex.unlock(io);
        const len = pool.queue_len.raw;
        var at: usize = 0;
        while (at < len) : (at += 1) {
            if (pool.queue[(pool.queue_head + at) % queue_capacity] == job) break;
        } else return false;
        // Close the gap: every later job moves one place toward the head.
        while (at + 1 < len) : (at += 1) {
            pool.queue[(pool.queue_head + at) % queue_capacity] =
                pool.queue[(pool.queue_head + at + 1) % queue_capacity];
        }
        _ = pool.queue_len.fetchSub(1, .release);
        pool.not_full.signal(io);
        return true;
    }

    /// Appends `job` to the queue, which has room; the caller holds `mutex`.
    fn enqueueLocked(pool: *ThreadPool, job: *Job) void {
        pool.queue[(pool.queue_head + pool.queue_len.raw) % queue_capacity] = job;
        const queue_len = pool.queue_len.fetchAdd(1, .release) + 1;
        // A spinning worker takes a lone job; waking a sleeping one as well
        // would only take a core from the threads doing work. (A spinner that
        // gives up clears `spinning` before it takes the mutex to sleep, so
        // it either sees this job or is woken for it.)
        if (queue_len > 1 or !pool.spinning.load(.acquire)) pool.not_empty.signal(system.io());
    }

    /// Spins up to `job_wait_spin_ns` for a job to be queued, unless another
    /// worker already spins.
    fn spinForJob(pool: *ThreadPool) void {
        if (pool.spinning.swap(true, .acquire)) return;
        defer pool.spinning.store(false, .release);
        spinWhile(pool, queueEmpty, job_wait_spin_ns);
    }

    fn queueEmpty(pool: *const ThreadPool) bool {
        return pool.queue_len.load(.acquire) == 0;
    }

    fn stopAndJoin(pool: *ThreadPool, threads: []std.Thread) void {
        const io = system.io();
        pool.mutex.lockUncancelable(io);
        pool.stopping = true;
        pool.not_empty.broadcast(io);
        pool.mutex.unlock(io);
        for (threads) |thread| thread.join();
    }

    fn workerLoop(pool: *ThreadPool) void {
        const io = system.io();
        var last_job_ns: u64 = std.math.maxInt(u64);
        while (true) {
            if (last_job_ns <= spin_after_job_ns_max and pool.queueEmpty()) pool.spinForJob();
            pool.mutex.lockUncancelable(io);
            while (pool.queue_len.raw == 0 and !pool.stopping) pool.not_empty.waitUncancelable(
                io,
                &pool.mutex,
            );
            if (pool.queue_len.raw == 0) {
                pool.mutex.unlock(io);
                return;
            }
            const job = pool.queue[pool.queue_head];
            pool.queue_head = (pool.queue_head + 1) % queue_capacity;
            _ = pool.queue_len.fetchSub(1, .release);
            pool.not_full.signal(io);
            pool.mutex.unlock(io);
            const started = system.monotonicNanoseconds();
            job.run(job);
            last_job_ns = system.monotonicNanoseconds() -| started;
        }
    }
};

/// Spins, without sleeping, while `still(context)` holds, for up to `limit_ns`.
pub fn spinWhile(context: anytype, comptime still: fn (@TypeOf(context)) bool, limit_ns: u64) void {
    const started = system.monotonicNanoseconds();
    var round: u32 = 0;
    while (still(context)) : (round +%= 1) {
        std.atomic.spinLoopHint();
        if (round % 64 == 63 and system.monotonicNanoseconds() -| started > limit_ns) return;
    }
}

/// Counts outstanding jobs so a caller can wait for all of its own work.
pub const WaitGroup = struct {
    mutex: std.Io.Mutex = .init,
    done: std.Io.Condition = .init,
    pending: usize = 0,

    pub fn add(group: *WaitGroup, count: usize) void {
        const io = system.io();
        group.mutex.lockUncancelable(io);
        defer group.mutex.unlock(io);
        group.pending += count;
    }

    pub fn finish(group: *WaitGroup) void {
        const io = system.io();
        group.mutex.lockUncancelable(io);
        defer group.mutex.unlock(io);
        std.debug.assert(group.pending > 0);
        group.pending -= 1;
        if (group.pending == 0) group.done.broadcast(io);
    }

    pub fn pendingCount(group: *WaitGroup) usize {
        const io = system.io();
        group.mutex.lockUncancelable(io);
        defer group.mutex.unlock(io);
        return group.pending;
    }

    pub fn wait(group: *WaitGroup) void {
        const io = system.io();
        group.mutex.lockUncancelable(io);
        defer group.mutex.unlock(io);
        while (group.pending > 0) group.done.waitUncancelable(io, &group.mutex);
    }
};

const TestJob = struct {
    job: Job = .{ .run = run },
    counter: *std.atomic.Value(u64),
    group: *WaitGroup,
    /// How long the job takes.
    pause_ns: u64 = 0,

    fn run(job: *Job) void {
        const self: *TestJob = @fieldParentPtr("job", job);
        pauseNanoseconds(self.pause_ns);
        _ = self.counter.fetchAdd(1, .monotonic);
        self.group.finish();
    }
};

test "every submitted job runs exactly once, also past the queue capacity" {
    const pool = try ThreadPool.create(std.testing.allocator, 3);
    defer pool.release();
    var counter: std.atomic.Value(u64) = .init(0);
    var group: WaitGroup = .{};
    const jobs = try std.testing.allocator.alloc(TestJob, queue_capacity * 4);
    defer std.testing.allocator.free(jobs);
    group.add(jobs.len);
    for (jobs) |*job| {
        job.* = .{ .counter = &counter, .group = &group };
        pool.submit(&job.job);
    }
    group.wait();
    try std.testing.expectEqual(@as(u64, jobs.len), counter.load(.monotonic));
    try std.testing.expectEqual(@as(u32, 3), pool.workerCount());
}

fn pauseNanoseconds(nanoseconds: u64) void {
    const started = system.monotonicNanoseconds();
    while (system.monotonicNanoseconds() -| started < nanoseconds) std.atomic.spinLoopHint();
}

test "a lone job runs whether a worker spins for it, gives up spinning as it comes, or sleeps" {
    // Every other job is long, so that its worker sleeps at once afterwards instead of spinning.
    for ([_]u32{ 1, 2 }) |workers| {
        const pool = try ThreadPool.create(std.testing.allocator, workers);
        defer pool.release();
        var counter: std.atomic.Value(u64) = .init(0);
        var group: WaitGroup = .{};
        var job: TestJob = .{ .counter = &counter, .group = &group };
        // Gaps before each submission: none (a worker still spins), around the
        // spin's end, and long after it (every worker asleep).
        const gaps = [_]u64{
            0,
            5_000,
            job_wait_spin_ns - 2_000,
            job_wait_spin_ns,
            job_wait_spin_ns + 2_000,
            4 * job_wait_spin_ns,
        };
        var round: u64 = 0;
        while (round < 300) : (round += 1) {
            pauseNanoseconds(gaps[round % gaps.len]);
            job.pause_ns = if (round % 2 == 0) 0 else spin_after_job_ns_max + 20_000;
            group.add(1);
            pool.submit(&job.job);
            // A lost wake-up would leave the job queued: fail instead of hanging.
            const started = system.monotonicNanoseconds();
            while (counter.load(.acquire) != round + 1) {
                const waited = system.monotonicNanoseconds() -| started;
                if (waited > 5 * std.time.ns_per_s) return error.JobNeverRan;
                std.atomic.spinLoopHint();
            }
            group.wait();
        }
    }
}

test "takeBack removes a queued job, keeps the others in order, and misses a taken one" {
    // One worker, kept busy by a blocker, so the jobs after it stay queued.
    const pool = try ThreadPool.create(std.testing.allocator, 1);
    defer pool.release();
    var counter: std.atomic.Value(u64) = .init(0);
    var group: WaitGroup = .{};
    var blocker: TestJob = .{
        .counter = &counter,
        .group = &group,
        .pause_ns = 20 * std.time.ns_per_ms,
    };
    var jobs: [3]TestJob = undefined;
    for (&jobs) |*job| job.* = .{ .counter = &counter, .group = &group };
    group.add(1 + jobs.len);
    pool.submit(&blocker.job);
    // the worker has the blocker
    while (pool.queue_len.load(.acquire) != 0) std.atomic.spinLoopHint();
    for (&jobs) |*job| pool.submit(&job.job);
    try std.testing.expect(!pool.takeBack(&blocker.job));
    try std.testing.expect(pool.takeBack(&jobs[1].job));
    try std.testing.expect(!pool.takeBack(&jobs[1].job));
    jobs[1].job.run(&jobs[1].job); // the caller runs what it took back
    group.wait();
    try std.testing.expectEqual(@as(u64, 4), counter.load(.monotonic));
}

/// Submits more jobs than the queue holds from inside a job, as the writer's
/// committer does (one fsync job per closed shard).
const FanOutJob = struct {
    job: Job = .{ .run = run },
    pool: *ThreadPool,
    children: []TestJob,

    fn run(job: *Job) void {
        const self: *FanOutJob = @fieldParentPtr("job", job);
        for (self.children) |*child| self.pool.submitOrRun(&child.job);
    }
};

test "a job submitting past the queue capacity on a one-thread pool does not wait for itself" {
    const pool = try ThreadPool.create(std.testing.allocator, 1);
    defer pool.release();
    var counter: std.atomic.Value(u64) = .init(0);
    var group: WaitGroup = .{};
    const children = try std.testing.allocator.alloc(TestJob, queue_capacity * 3);
    defer std.testing.allocator.free(children);
    for (children) |*child| child.* = .{ .counter = &counter, .group = &group };
    group.add(children.len);
    var fan_out: FanOutJob = .{ .pool = pool, .children = children };
    pool.submit(&fan_out.job);
    group.wait(); // with `submit` in the job, the only worker would block forever
    try std.testing.expectEqual(@as(u64, children.len), counter.load(.monotonic));
}
