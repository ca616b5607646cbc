//! A share: the stream positions one DataLoader worker of one rank reads.
//!
//! A span of the stream (the rest of an epoch: positions `start .. start + len`)
//! is cut into global steps of `ranks * batch` positions. Global step g gives
//! rank r the positions `start + g*ranks*batch + r*batch ..` (+ batch), and a
//! rank's k-th batch belongs to worker `k % workers`, which is the order in which
//! a DataLoader collects batches from its workers. Interleaving the ranks step
//! by step and each rank's workers batch by batch gives the span in order.
//!
//! The number of global steps:
//!   - `drop_last`: only full steps, floor(len / (ranks*batch));
//!   - one rank: ceil(len / batch), the last batch possibly short;
//!   - several ranks: ceil(len / (ranks*batch)), the last step filled to full
//!     batches with the positions after the span (padding), so every rank yields
//!     the same number of batches.
//!
//! Everything here is arithmetic on u64 with limits that keep every product
//! below 2^63; positions themselves wrap at 2^64 like the stream's.
const std = @import("std");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Position = @import("stream_state.zig").Position;

pub const batch_size_max: u64 = 1 << 31;
pub const world_size_max: u64 = 1 << 20;
pub const num_workers_max: u64 = 1 << 12;

comptime {
    // worker stride = workers * ranks * batch must not overflow.
    std.debug.assert(@as(u128, batch_size_max) * world_size_max * num_workers_max < 1 << 64);
}

/// A share: one reader's place among ranks and workers.
pub const Share = struct {
    batch_size: u64 = 1,
    rank: u64 = 0,
    world_size: u64 = 1,
    worker: u64 = 0,
    num_workers: u64 = 1,
    drop_last: bool = false,

    pub const whole: Share = .{};

    /// Checks the ranges; the message names the bad value.
    pub fn validate(share: Share, diagnostic: *Diagnostic) error{InvalidArgument}!void {
        if (share.batch_size < 1 or share.batch_size > batch_size_max) {
            diagnostic.set(
                "batch_size must be between 1 and {d}, got {d}",
                .{ batch_size_max, share.batch_size },
            );
            return error.InvalidArgument;
        }
        if (share.world_size < 1 or share.world_size > world_size_max) {
            diagnostic.set(
                "world_size must be between 1 and {d}, got {d}",
                .{ world_size_max, share.world_size },
            );
            return error.InvalidArgument;
        }
        if (share.rank >= share.world_size) {
            diagnostic.set(
                "rank must be below world_size ({d}), got {d}",
                .{ share.world_size, share.rank },
            );
            return error.InvalidArgument;
        }
        if (share.num_workers < 1 or share.num_workers > num_workers_max) {
            diagnostic.set(
                "num_workers must be between 1 and {d}, got {d}",
                .{ num_workers_max, share.num_workers },
            );
            return error.InvalidArgument;
        }
        if (share.worker >= share.num_workers) {
            diagnostic.set(
                "worker must be below num_workers ({d}), got {d}",
                .{ share.num_workers, share.worker },
            );
            return error.InvalidArgument;
        }
    }

    fn stepPositions(share: Share) u64 {
        return share.world_size * share.batch_size;
    }
};

/// How a span divides among ranks and workers.
pub const Counts = struct {
    /// Global steps: batches every rank yields.
    steps: u64,
    /// Samples this rank yields (all its workers).
    rank_samples: u64,
    /// Batches this worker yields.
    worker_batches: u64,
    /// Samples this worker yields.
    worker_samples: u64,
};

pub fn counts(span_len: u64, share: Share) Counts {
    assertValid(share);
    const step_positions = share.stepPositions();
    const steps = if (share.drop_last)
        span_len / step_positions
    else
        std.math.divCeil(u64, span_len, step_positions) catch unreachable;
    // Only one rank can have a short last batch: with several, the step is padded.
    // Wrapping products: the true values fit in u64 (at most span_len, or a
    // step beyond it when padded), even where an intermediate product does not.
    const short_by: u64 = if (share.world_size == 1 and !share.drop_last and steps > 0)
        steps *% share.batch_size -% span_len
    else
        0;
    const worker_batches =
        if (steps > share.worker) (steps - share.worker - 1) / share.num_workers + 1 else 0;
    const last_is_ours = steps > 0 and (steps - 1) % share.num_workers == share.worker;
    return .{
        .steps = steps,
        .rank_samples = steps *% share.batch_size -% short_by,
        .worker_batches = worker_batches,
        .worker_samples = worker_batches *% share.batch_size -% if (last_is_ours) short_by else 0,
    };
}

/// The positions one worker reads, in order: sample i (0 <= i < count) is at
/// `position(i)`. Runs of `run_len` consecutive positions, `stride` apart.
pub const Walk = struct {
    base: u64,
    run_len: u64,
    stride: u64,
    /// Samples of the walk skipped at its start (already consumed).
    first: u64,
    count: u64,

    /// The walk over `start .. start + count` in order.
    pub fn contiguous(start: u64, count: u64) Walk {
        return .{ .base = start, .run_len = 1, .stride = 1, .first = 0, .count = count };
    }

    pub fn position(positions: Walk, index: u64) u64 {
        std.debug.assert(index < positions.count);
        const at = positions.first + index;
        if (positions.isContiguous()) return positions.base +% at;
        return positions.base +% (at / positions.run_len) *% positions.stride +%
            at % positions.run_len;
    }

    /// True when the walk reads consecutive positions (one rank, one worker).
    pub fn isContiguous(positions: Walk) bool {
        return positions.run_len == positions.stride;
    }
};

/// The walk of `share` over the span `start .. start + span_len`, without its
/// first `skip` samples (at most the worker's samples).
pub fn walk(start: u64, span_len: u64, share: Share, skip: u64) Walk {
    const share_counts = counts(span_len, share);
    std.debug.assert(skip <= share_counts.worker_samples);
    const step_positions = share.stepPositions();
    return .{
        .base = start +% share.worker * step_positions +% share.rank * share.batch_size,
        .run_len = share.batch_size,
        .stride = share.num_workers * step_positions,
        .first = skip,
        .count = share_counts.worker_samples - skip,
    };
}

/// The stream position after `steps` global steps of `share`'s layout over the
/// rest of the epoch `span` starts: every rank has handed out `steps` batches.
/// After the last step the epoch is over (a tail dropped by `drop_last`, or
/// padding past the epoch, does not move the next epoch's start).
pub fn afterSteps(
    span: Position,
    share: Share,
    steps: u64,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!Position {
    try share.validate(diagnostic);
    const total = counts(span.remaining(), share).steps;
    if (steps > total) {
        diagnostic.set("{d} steps taken of an epoch that has {d}", .{ steps, total });
        return error.InvalidArgument;
    }
    if (steps == total) return span.nextEpoch();
    // Below the last step, so steps * ranks * batch < remaining.
    return span.advanced(steps * share.stepPositions());
}

fn assertValid(share: Share) void {
    var diagnostic: Diagnostic = .{};
    share.validate(&diagnostic) catch unreachable;
}

const testing = std.testing;

fn collect(allocator: std.mem.Allocator, the_walk: Walk) ![]u64 {
    const positions = try allocator.alloc(u64, @intCast(the_walk.count));
    for (positions, 0..) |*position, index| position.* = the_walk.position(index);
    return positions;
}

/// Interleaves every rank's workers as DataLoaders and DDP do: step by step, and
/// within a rank batch by batch from worker k % workers.
fn interleave(allocator: std.mem.Allocator, start: u64, span_len: u64, template: Share) ![]u64 {
    var out: std.ArrayList(u64) = .empty;
    errdefer out.deinit(allocator);
    const steps = counts(span_len, template).steps;
    for (0..@intCast(steps)) |step| {
        for (0..@intCast(template.world_size)) |rank| {
            var share = template;
            share.rank = rank;
            share.worker = step % template.num_workers;
            const the_walk = walk(start, span_len, share, 0);
            const batch_index = step / template.num_workers; // within the worker
            const first = batch_index * share.batch_size;
            const last = @min(first + share.batch_size, the_walk.count);
            for (first..last) |index| try out.append(allocator, the_walk.position(index));
        }
    }
    return out.toOwnedSlice(allocator);
}

test "every rank and worker count interleaves back to the span, padded only with several ranks" {
    const allocator = testing.allocator;
    for ([_]u64{ 0, 1, 5, 12, 13, 64, 101 }) |span_len| {
        for ([_]u64{ 1, 2, 3, 8 }) |batch_size| {
            for ([_]u64{ 1, 2, 3 }) |world_size| {
                for ([_]u64{ 1, 2, 3, 5 }) |num_workers| {
                    for ([_]bool{ false, true }) |drop_last| {
                        const template: Share = .{
                            .batch_size = batch_size,
                            .world_size = world_size,
                            .num_workers = num_workers,
                            .drop_last = drop_last,
                        };
                        const positions = try interleave(allocator, 1000, span_len, template);
                        defer allocator.free(positions);
                        // Consecutive positions from the span's start, with no gap.
                        for (positions, 0..) |position, index| try testing.expectEqual(
                            1000 + index,
                            position,
                        );
                        const step_positions = batch_size * world_size;
                        const expected: u64 = if (drop_last)
                            span_len / step_positions * step_positions
                        else if (world_size == 1)
                            span_len
                        else
                            (span_len + step_positions - 1) / step_positions * step_positions;
                        try testing.expectEqual(expected, positions.len);
                    }
                }
            }
        }
    }
}

test "every rank yields the same number of batches and samples" {
    for ([_]u64{ 1, 7, 30 }) |span_len| {
        const template: Share = .{ .batch_size = 4, .world_size = 3, .num_workers = 2 };
        const expected = counts(span_len, template);
        for (0..3) |rank| {
            var share = template;
            share.rank = rank;
            var samples: u64 = 0;
            for (0..2) |worker| {
                share.worker = worker;
                samples += counts(span_len, share).worker_samples;
            }
            try testing.expectEqual(expected.rank_samples, samples);
            try testing.expectEqual(expected.steps * 4, samples);
        }
    }
}

test "a worker's walk: runs of a batch, a global step of every worker apart" {
    // 2 ranks, batch 3, 2 workers: rank 1 worker 1 reads local batches 1, 3, ...
    const share: Share = .{
        .batch_size = 3,
        .rank = 1,
        .world_size = 2,
        .worker = 1,
        .num_workers = 2,
    };
    const the_walk = walk(100, 20, share, 0);
    const positions = try collect(testing.allocator, the_walk);
    defer testing.allocator.free(positions);
    // steps = ceil(20 / 6) = 4: this worker has steps 1 and 3, padded past 120.
    try testing.expectEqualSlices(u64, &.{ 109, 110, 111, 121, 122, 123 }, positions);
    const resumed = walk(100, 20, share, 4);
    try testing.expectEqual(@as(u64, 2), resumed.count);
    try testing.expectEqual(@as(u64, 122), resumed.position(0));
}

test "one rank's short last batch belongs to the worker that reads it" {
    const share: Share = .{ .batch_size = 4, .num_workers = 2 };
    // 10 positions: batches of 4, 4, 2; the short one is worker 0's second.
    try testing.expectEqual(@as(u64, 6), counts(10, share).worker_samples);
    var other = share;
    other.worker = 1;
    try testing.expectEqual(@as(u64, 4), counts(10, other).worker_samples);
    try testing.expectEqual(@as(u64, 10), counts(10, other).rank_samples);
}

test "the position after some steps: whole steps of every rank, then the next epoch" {
    var diagnostic: Diagnostic = .{};
    const span: Position = .{ .epoch = 1, .epoch_start = 10, .epoch_len = 10, .position = 13 };
    const share: Share = .{ .batch_size = 2, .world_size = 2, .drop_last = true };
    // 7 positions left: one full step of 4, the rest dropped.
    try testing.expectEqual(@as(u64, 13), (try afterSteps(span, share, 0, &diagnostic)).position);
    try testing.expectEqual(
        Position{ .epoch = 2, .epoch_start = 20, .epoch_len = 10, .position = 20 },
        try afterSteps(span, share, 1, &diagnostic),
    );
    try testing.expectError(error.InvalidArgument, afterSteps(span, share, 2, &diagnostic));
    const padded: Share = .{ .batch_size = 2, .world_size = 2 };
    try testing.expectEqual(@as(u64, 17), (try afterSteps(span, padded, 1, &diagnostic)).position);
    try testing.expectEqual(@as(u64, 2), (try afterSteps(span, padded, 2, &diagnostic)).epoch);
}

test "counts of a span near 2^64 positions stay exact" {
    const span_len = std.math.maxInt(u64);
    const one_rank = counts(span_len, .{ .batch_size = 2 });
    try testing.expectEqual(span_len, one_rank.rank_samples);
    try testing.expectEqual(@as(u64, 1 << 63), one_rank.steps);
    const two_workers = counts(span_len, .{ .batch_size = 2, .num_workers = 2, .worker = 1 });
    try testing.expectEqual(@as(u64, 1 << 62), two_workers.worker_batches);
    // The last step, 2^63 - 1, is worker 1's, and one sample short.
    try testing.expectEqual(@as(u64, (1 << 63) - 1), two_workers.worker_samples);
    const first_worker = counts(span_len, .{ .batch_size = 2, .num_workers = 2 });
    try testing.expectEqual(@as(u64, 1 << 63), first_worker.worker_samples);
}

test "shares out of range are refused with the value named" {
    var diagnostic: Diagnostic = .{};
    try testing.expectError(
        error.InvalidArgument,
        (Share{ .rank = 2, .world_size = 2 }).validate(&diagnostic),
    );
    try testing.expectEqualStrings(
        "rank must be below world_size (2), got 2",
        diagnostic.message(),
    );
    try testing.expectError(
        error.InvalidArgument,
        (Share{ .batch_size = 0 }).validate(&diagnostic),
    );
    try testing.expectError(error.InvalidArgument, (Share{ .worker = 1 }).validate(&diagnostic));
    try testing.expectError(
        error.InvalidArgument,
        (Share{ .num_workers = num_workers_max + 1 }).validate(&diagnostic),
    );
    try (Share{
        .batch_size = batch_size_max,
        .world_size = world_size_max,
        .rank = 3,
        .num_workers = num_workers_max,
    }).validate(&diagnostic);
}
