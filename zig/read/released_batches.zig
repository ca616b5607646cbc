//! Batches a consumer has released, freed later by a pool thread.
//!
//! Freeing a batch is a dozen frees of memory a pool thread allocated. On the
//! consumer's thread, the bottleneck of small-sample reads, that costs a few
//! microseconds per batch. `release` instead pushes a small batch onto a
//! process-wide stack in one atomic step, and the pipeline frees what is there
//! (`freeAll`) where the time is spare: a pool thread as it starts a chunk
//! (the thread whose allocator cache the memory came from), or the consumer
//! as it is about to wait for a chunk. Destroying a pipeline frees them too.
//!
//! At most `held_max` batches of at most `bytes_max` bytes each wait: a larger
//! batch, or one beyond the count, is freed at once, so what waits for a pool
//! thread that never reads again (a loop that stopped, a forked child) stays a
//! few MiB at most.
const std = @import("std");
const assert = std.debug.assert;
const SampleBatch = @import("sample_batch.zig").SampleBatch;

/// Batches waiting at most; further ones are freed by `release` itself.
pub const held_max = 16;

/// Bytes (payloads, JSON and packed) of a batch that may wait; larger ones are
/// freed at once, so that waiting batches hold a few MiB at most (their frees
/// are few next to the copy of so many bytes out of them).
pub const bytes_max = 256 << 10;

/// One waiting batch. It lives in the batch's own allocation (`SampleBatch.released`),
/// so releasing allocates nothing.
pub const Node = struct {
    next: ?*Node = null,
    allocator: std.mem.Allocator = undefined,
};

var top: std.atomic.Value(?*Node) = .init(null);
var held: std.atomic.Value(u32) = .init(0);

/// Frees `batch` (allocated with `allocator`), now or in a pool thread later.
pub fn release(allocator: std.mem.Allocator, batch: *SampleBatch) void {
    // A batch is released once: it is on no list yet.
    assert(batch.released.next == null);
    if (batch.byteLen() > bytes_max) return batch.destroy(allocator);
    if (held.fetchAdd(1, .monotonic) >= held_max) {
        _ = held.fetchSub(1, .monotonic);
        return batch.destroy(allocator);
    }
    const node = &batch.released;
    node.* = .{ .allocator = allocator };
    var expected = top.load(.monotonic);
    while (true) {
        node.next = expected;
        expected = top.cmpxchgWeak(expected, node, .release, .monotonic) orelse return;
    }
}

/// Frees every batch waiting now.
pub fn freeAll() void {
    // Taking the whole stack at once: no node is popped while another thread
    // pushes, so a node reused meanwhile cannot corrupt the list.
    var next = top.swap(null, .acquire);
    var count: u32 = 0;
    while (next) |node| {
        next = node.next;
        const batch: *SampleBatch = @fieldParentPtr("released", node);
        batch.destroy(node.allocator);
        count += 1;
    }
    assert(count <= held_max);
    if (count > 0) _ = held.fetchSub(count, .monotonic);
}

/// Whether any batch waits (one atomic load).
pub fn anyWaiting() bool {
    return top.load(.monotonic) != null;
}

test "released batches wait to be freed, up to the count and size limits" {
    const allocator = std.testing.allocator;
    const schema = [_]@import("../format/metadata_types.zig").Field{.{ .name = "n", .kind = .int }};
    freeAll();
    try std.testing.expect(!anyWaiting());
    // A small batch waits; `freeAll` frees it (the testing allocator reports a leak otherwise).
    var batches: [held_max + 2]*SampleBatch = undefined;
    for (&batches) |*batch| {
        batch.* = try allocator.create(SampleBatch);
        batch.*.* = try SampleBatch.init(allocator, 4, &schema);
        try batch.*.payloads.appendSlice(allocator, "abc");
    }
    release(allocator, batches[0]);
    try std.testing.expect(anyWaiting());
    try std.testing.expectEqual(@as(u32, 1), held.load(.monotonic));
    freeAll();
    try std.testing.expect(!anyWaiting());
    try std.testing.expectEqual(@as(u32, 0), held.load(.monotonic));
    // Beyond held_max, release frees at once: the count never passes the limit.
    for (batches[1..]) |batch| release(allocator, batch);
    try std.testing.expectEqual(@as(u32, held_max), held.load(.monotonic));
    freeAll();
    try std.testing.expectEqual(@as(u32, 0), held.load(.monotonic));
    // A batch larger than bytes_max is freed at once.
    const large = try allocator.create(SampleBatch);
    large.* = try SampleBatch.init(allocator, 1, &schema);
    try large.payloads.appendNTimes(allocator, 0, bytes_max + 1);
    release(allocator, large);
    try std.testing.expect(!anyWaiting());
    try std.testing.expectEqual(@as(u32, 0), held.load(.monotonic));
}
