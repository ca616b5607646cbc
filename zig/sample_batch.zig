//! A batch of materialized samples handed across the C ABI in one call.
//! `view` is the `drt_batch` struct of the header; the lists own its memory.
const std = @import("std");

/// Mirrors `drt_batch` in dataset_rt.h field for field.
pub const View = extern struct {
    count: u64,
    payloads: [*]const u8,
    payload_offsets: [*]const u64,
    metadata_json: [*]const u8,
    metadata_offsets: [*]const u64,
    cache_ids: [*]const u32,
    sample_ids: [*]const u64,
};

pub const SampleBatch = struct {
    /// First field, so a `*View` handed out is also a `*SampleBatch`.
    view: View = undefined,
    payloads: std.ArrayList(u8) = .empty,
    payload_offsets: std.ArrayList(u64) = .empty,
    metadata_json: std.ArrayList(u8) = .empty,
    metadata_offsets: std.ArrayList(u64) = .empty,
    cache_ids: std.ArrayList(u32) = .empty,
    sample_ids: std.ArrayList(u64) = .empty,

    pub fn init(allocator: std.mem.Allocator, capacity: usize) !SampleBatch {
        var batch: SampleBatch = .{};
        errdefer batch.deinit(allocator);
        try batch.payload_offsets.ensureTotalCapacity(allocator, capacity + 1);
        try batch.metadata_offsets.ensureTotalCapacity(allocator, capacity + 1);
        try batch.cache_ids.ensureTotalCapacity(allocator, capacity);
        try batch.sample_ids.ensureTotalCapacity(allocator, capacity);
        batch.payload_offsets.appendAssumeCapacity(0);
        batch.metadata_offsets.appendAssumeCapacity(0);
        return batch;
    }

    pub fn deinit(batch: *SampleBatch, allocator: std.mem.Allocator) void {
        batch.payloads.deinit(allocator);
        batch.payload_offsets.deinit(allocator);
        batch.metadata_json.deinit(allocator);
        batch.metadata_offsets.deinit(allocator);
        batch.cache_ids.deinit(allocator);
        batch.sample_ids.deinit(allocator);
    }

    pub fn count(batch: *const SampleBatch) usize {
        return batch.sample_ids.items.len;
    }

    /// Records a sample whose payload and metadata were just appended to the lists.
    pub fn closeSample(batch: *SampleBatch, allocator: std.mem.Allocator, cache_id: u32, sample_id: u64) !void {
        try batch.payload_offsets.append(allocator, batch.payloads.items.len);
        try batch.metadata_offsets.append(allocator, batch.metadata_json.items.len);
        try batch.cache_ids.append(allocator, cache_id);
        try batch.sample_ids.append(allocator, sample_id);
    }

    /// Points `view` at the lists; call after the last sample is added.
    pub fn seal(batch: *SampleBatch) *View {
        batch.view = .{
            .count = batch.count(),
            .payloads = batch.payloads.items.ptr,
            .payload_offsets = batch.payload_offsets.items.ptr,
            .metadata_json = batch.metadata_json.items.ptr,
            .metadata_offsets = batch.metadata_offsets.items.ptr,
            .cache_ids = batch.cache_ids.items.ptr,
            .sample_ids = batch.sample_ids.items.ptr,
        };
        return &batch.view;
    }

    pub fn fromView(view: *View) *SampleBatch {
        return @fieldParentPtr("view", view);
    }
};
