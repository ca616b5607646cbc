//! The cap on shard downloads of one fetch hook (`Remote.max_in_flight`):
//! a counting semaphore whose slots a read that needs a shard now takes
//! before a fetch ahead of need does.
//!
//! A read waiting for a slot holds none, and a slot is held only around one
//! shard's fetch, which never waits for a slot itself: every wait ends when a
//! running fetch does.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");

pub const Slots = struct {
    mutex: std.Io.Mutex = .init,
    freed: std.Io.Condition = .init,
    /// Slots taken; under `mutex`.
    taken: u32 = 0,
    /// Reads that need a shard now and wait for a slot; under `mutex`.
    needed_waiting: u32 = 0,

    /// Takes a slot for a read that needs its shard now: waits while `max`
    /// are taken.
    pub fn acquireNeeded(slots: *Slots, max: u32) void {
        assert(max >= 1);
        const io = system.io();
        slots.mutex.lockUncancelable(io);
        defer slots.mutex.unlock(io);
        slots.needed_waiting += 1;
        while (slots.taken >= max) slots.freed.waitUncancelable(io, &slots.mutex);
        slots.needed_waiting -= 1;
        slots.taken += 1;
        assert(slots.taken <= max);
    }

    /// Takes a slot for a fetch ahead of need: waits while `max` are taken or
    /// a read that needs its shard now waits. False, with no slot taken, once
    /// `stop` is set (`wakeAll` ends the wait).
    pub fn acquireAhead(slots: *Slots, max: u32, stop: *const std.atomic.Value(bool)) bool {
        assert(max >= 1);
        const io = system.io();
        slots.mutex.lockUncancelable(io);
        defer slots.mutex.unlock(io);
        while (slots.taken >= max or slots.needed_waiting > 0) {
            if (stop.load(.acquire)) return false;
            slots.freed.waitUncancelable(io, &slots.mutex);
        }
        if (stop.load(.acquire)) return false;
        slots.taken += 1;
        assert(slots.taken <= max);
        return true;
    }

    pub fn release(slots: *Slots) void {
        const io = system.io();
        slots.mutex.lockUncancelable(io);
        defer slots.mutex.unlock(io);
        assert(slots.taken > 0);
        slots.taken -= 1;
        slots.freed.broadcast(io);
    }

    /// Wakes every waiter, so that one whose `stop` is set returns.
    pub fn wakeAll(slots: *Slots) void {
        const io = system.io();
        slots.mutex.lockUncancelable(io);
        defer slots.mutex.unlock(io);
        slots.freed.broadcast(io);
    }
};

test "a read that needs its shard now takes the next free slot before a fetch ahead" {
    var slots: Slots = .{};
    var stop: std.atomic.Value(bool) = .init(false);
    try std.testing.expect(slots.acquireAhead(1, &stop));
    slots.needed_waiting = 1; // as a waiting read would
    stop.store(true, .release);
    try std.testing.expect(!slots.acquireAhead(2, &stop));
    slots.needed_waiting = 0;
    slots.acquireNeeded(2);
    try std.testing.expectEqual(@as(u32, 2), slots.taken);
    slots.release();
    slots.release();
    try std.testing.expectEqual(@as(u32, 0), slots.taken);
}
