//! The cache writer's counters: samples and bytes committed, and the time,
//! calls and bytes of each stage, read at any time by `drt_writer_stats_get`.
const std = @import("std");
const system = @import("../base/system.zig");

/// Seconds, calls and bytes of one stage; updated from several threads.
pub const StageCounter = struct {
    calls: std.atomic.Value(u64) = .init(0),
    nanoseconds: std.atomic.Value(u64) = .init(0),
    bytes: std.atomic.Value(u64) = .init(0),

    pub fn add(counter: *StageCounter, started_ns: u64, bytes: u64) void {
        counter.addMeasured(system.monotonicNanoseconds() -| started_ns, bytes);
    }

    /// One call of `nanoseconds` measured elsewhere.
    pub fn addMeasured(counter: *StageCounter, nanoseconds: u64, bytes: u64) void {
        _ = counter.calls.fetchAdd(1, .monotonic);
        _ = counter.nanoseconds.fetchAdd(nanoseconds, .monotonic);
        _ = counter.bytes.fetchAdd(bytes, .monotonic);
    }
};

pub const Stats = struct {
    samples_committed: std.atomic.Value(u64) = .init(0),
    payload_bytes_committed: std.atomic.Value(u64) = .init(0),
    shard_bytes_committed: std.atomic.Value(u64) = .init(0),
    ingress_wait: StageCounter = .{},
    encode: StageCounter = .{},
    compression: StageCounter = .{},
    hashing: StageCounter = .{},
    disk_write: StageCounter = .{},
    finish_manifest: StageCounter = .{},
    publish: StageCounter = .{},
};
