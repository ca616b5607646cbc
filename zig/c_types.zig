//! The extern structs of dataset_rt.h, field for field, and their conversions
//! to the core's own types. c_api.zig takes and fills them; nothing else does.
const std = @import("std");
const stream_state = @import("stream/stream_state.zig");
const stream_share = @import("stream/stream_share.zig");

// ---- writer

pub const WriterOptions = extern struct {
    max_shard_bytes: u64,
    batches_in_flight_max: u32,
    compression: u32,
    compression_ratio: f64,
    /// 2 or 3; 0 means 2 (ABI 4).
    format_version: u32,
    reserved: u32,
};

pub const StageStats = extern struct { calls: u64, nanoseconds: u64, bytes: u64 };

pub const WriterStats = extern struct {
    samples_committed: u64,
    payload_bytes_committed: u64,
    shard_bytes_committed: u64,
    ingress_wait: StageStats,
    encode: StageStats,
    compression: StageStats,
    hashing: StageStats,
    disk_write: StageStats,
    finish_manifest: StageStats,
    publish: StageStats,
};

// ---- dataset

pub const ReaderOptions = extern struct {
    seed: u64,
    prefetch_size: u32,
    shuffle: u32,
    validate_cache: u32,
    without_replacement: u32,
};

pub const Buffer = extern struct { data: [*]const u8, len: u64 };

pub const IntegerColumn = extern struct {
    values: ?[*]const u64,
    validity: ?[*]const u8,
    validity_offset: u64,
    is_signed: u32,
    reserved: u32,
};

pub const FloatColumn = extern struct {
    values: ?[*]const f64,
    validity: ?[*]const u8,
    validity_offset: u64,
};

// ---- stream state, ranks and workers

pub const StreamPosition = extern struct {
    epoch: u64,
    epoch_start: u64,
    epoch_len: u64,
    position: u64,

    pub fn of(at: stream_state.Position) StreamPosition {
        return .{
            .epoch = at.epoch,
            .epoch_start = at.epoch_start,
            .epoch_len = at.epoch_len,
            .position = at.position,
        };
    }

    pub fn toPosition(c_position: *const StreamPosition) stream_state.Position {
        return .{
            .epoch = c_position.epoch,
            .epoch_start = c_position.epoch_start,
            .epoch_len = c_position.epoch_len,
            .position = c_position.position,
        };
    }
};

pub const algorithm_bytes = 64;

pub const StreamState = extern struct {
    at: StreamPosition,
    seed: u64,
    shuffle: u32,
    cache_count: u32,
    table_sha256: [stream_state.digest_length]u8,
    algorithm: [algorithm_bytes]u8,
};

comptime {
    std.debug.assert(stream_state.algorithm_shuffled.len < algorithm_bytes);
    std.debug.assert(stream_state.algorithm_ordered.len < algorithm_bytes);
    std.debug.assert(stream_state.algorithm_permutation.len < algorithm_bytes);
    std.debug.assert(@import("stream/mix.zig").algorithm_name_length < algorithm_bytes);
}

/// `drt_share` (and its deprecated alias `drt_shard`).
pub const ShareSpec = extern struct {
    batch_size: u64,
    rank: u32,
    world_size: u32,
    worker: u32,
    num_workers: u32,
    drop_last: u32,
    reserved: u32,
};

pub fn shareOf(spec: *const ShareSpec) stream_share.Share {
    return .{
        .batch_size = spec.batch_size,
        .rank = spec.rank,
        .world_size = spec.world_size,
        .worker = spec.worker,
        .num_workers = spec.num_workers,
        .drop_last = spec.drop_last != 0,
    };
}

/// `drt_share_counts` (and its deprecated alias `drt_shard_counts`).
pub const ShareCounts = extern struct {
    steps: u64,
    rank_samples: u64,
    worker_batches: u64,
    worker_samples: u64,
};

/// `drt_problem`: one problem a scrub found (ABI 3). The strings belong
/// to the verifier and live until it is destroyed.
pub const VerifyProblem = extern struct {
    file: [*]const u8,
    file_len: u64,
    message: [*]const u8,
    message_len: u64,
    sample_id: u64,
    offset: u64,
    has_sample: u32,
    has_offset: u32,
};
