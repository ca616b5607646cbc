//! A batch of materialized samples handed across the C ABI in one call.
//! `view` is the `drt_batch` struct of the header; the lists own its memory.
const std = @import("std");
const types = @import("metadata_types.zig");
const column_builder = @import("column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const PayloadLocation = @import("cache_reader.zig").Cache.PayloadLocation;

/// A sample whose raw payload was left in its shard (see `drt_batch_deferred`).
pub const DeferredPayload = struct {
    cache_id: u32,
    location: PayloadLocation,
};

const not_deferred: DeferredPayload = .{ .cache_id = 0, .location = .{ .sample_id = 0, .shard_id = 0, .offset = 0, .len = 0 } };

/// Mirrors `drt_batch_column`: one metadata column of the batch's samples.
pub const ColumnView = extern struct {
    kind: u32,
    /// string only: the number of distinct strings when `values` holds their
    /// codes (see `SampleBatch.codeStrings`), else 0.
    distinct: u32 = 0,
    /// bool: u8 0/1 per sample; int: i64; float: f64; string: null, or one
    /// u32 code per sample (equal strings share one, numbered from 0 in order
    /// of first occurrence).
    values: ?*const anyopaque,
    /// string only: count + 1 offsets into `bytes`.
    offsets: ?[*]const u64,
    bytes: ?[*]const u8,
};

/// Mirrors `drt_batch` in dataset_rt.h field for field.
pub const View = extern struct {
    count: u64,
    payloads: [*]const u8,
    payload_offsets: [*]const u64,
    metadata_json: [*]const u8,
    metadata_offsets: [*]const u64,
    cache_ids: [*]const u32,
    sample_ids: [*]const u64,
    column_count: u64,
    columns: [*]const ColumnView,
};

/// A string column's codes (see `ColumnView.distinct`); none when `distinct` is 0.
const StringCodes = struct {
    codes: []u32 = &.{},
    distinct: u32 = 0,
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
    /// The samples' metadata rows by column, in schema order.
    columns: []ColumnBuilder = &.{},
    column_views: []ColumnView = &.{},
    /// Per sample, when any payload was deferred (else empty): where it is,
    /// with length 0 for samples whose payload is in `payloads`.
    deferred: std.ArrayList(DeferredPayload) = .empty,
    /// `deferred`'s lengths, for `drt_batch_deferred`; filled by `finishDeferred`.
    deferred_lengths: []u64 = &.{},
    /// The pipeline that read the batch: only it can read the deferred payloads.
    owner: ?*const anyopaque = null,
    /// Per column, filled by `codeStrings`: a string column's codes, or none.
    string_codes: []StringCodes = &.{},

    pub fn init(allocator: std.mem.Allocator, capacity: usize, schema: []const types.Field) !SampleBatch {
        var batch: SampleBatch = .{};
        errdefer batch.deinit(allocator);
        batch.columns = try column_builder.initAll(allocator, schema);
        batch.column_views = try allocator.alloc(ColumnView, schema.len);
        try batch.payload_offsets.ensureTotalCapacity(allocator, capacity + 1);
        try batch.metadata_offsets.ensureTotalCapacity(allocator, capacity + 1);
        try batch.cache_ids.ensureTotalCapacity(allocator, capacity);
        try batch.sample_ids.ensureTotalCapacity(allocator, capacity);
        batch.payload_offsets.appendAssumeCapacity(0);
        batch.metadata_offsets.appendAssumeCapacity(0);
        return batch;
    }

    pub fn deinit(batch: *SampleBatch, allocator: std.mem.Allocator) void {
        column_builder.deinitAll(allocator, batch.columns);
        allocator.free(batch.columns);
        allocator.free(batch.column_views);
        batch.payloads.deinit(allocator);
        batch.payload_offsets.deinit(allocator);
        batch.metadata_json.deinit(allocator);
        batch.metadata_offsets.deinit(allocator);
        batch.cache_ids.deinit(allocator);
        batch.sample_ids.deinit(allocator);
        batch.deferred.deinit(allocator);
        allocator.free(batch.deferred_lengths);
        for (batch.string_codes) |coded| allocator.free(coded.codes);
        allocator.free(batch.string_codes);
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

    /// Records that the sample about to be closed left its payload in the file.
    pub fn deferPayload(batch: *SampleBatch, allocator: std.mem.Allocator, cache_id: u32, location: PayloadLocation) !void {
        std.debug.assert(location.len > 0);
        try batch.padDeferred(allocator);
        try batch.deferred.append(allocator, .{ .cache_id = cache_id, .location = location });
    }

    /// Marks the samples added since the last deferred one as not deferred.
    fn padDeferred(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        try batch.deferred.appendNTimes(allocator, not_deferred, batch.count() - batch.deferred.items.len);
    }

    /// The deferred payload of sample `sample`, if it has one.
    pub fn deferredPayload(batch: *const SampleBatch, sample: u64) ?DeferredPayload {
        if (sample >= batch.deferred.items.len) return null;
        const entry = batch.deferred.items[@intCast(sample)];
        return if (entry.location.len == 0) null else entry;
    }

    /// Completes the deferral list and its lengths once every sample is added.
    pub fn finishDeferred(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        if (batch.deferred.items.len == 0) return;
        try batch.padDeferred(allocator);
        batch.deferred_lengths = try allocator.alloc(u64, batch.deferred.items.len);
        for (batch.deferred.items, batch.deferred_lengths) |entry, *len| len.* = entry.location.len;
    }

    /// Codes each string column whose samples hold at most a quarter as many
    /// distinct strings as samples (labels, splits, sources), so that a reader
    /// decodes each distinct string once per batch. Call after the last sample.
    pub fn codeStrings(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        batch.string_codes = try allocator.alloc(StringCodes, batch.columns.len);
        @memset(batch.string_codes, .{});
        for (batch.columns, batch.string_codes) |*column, *codes| switch (column.*) {
            .string => |strings| codes.* = try dictionaryCodes(allocator, strings.offsets.items, strings.bytes.items),
            else => {},
        };
    }

    /// One code per string (numbered by first occurrence), or none when more
    /// than a quarter of them are distinct.
    fn dictionaryCodes(allocator: std.mem.Allocator, offsets: []const u64, bytes: []const u8) !StringCodes {
        const rows = offsets.len - 1;
        const distinct_max: u32 = @intCast(@min(rows / 4, std.math.maxInt(u32)));
        if (distinct_max == 0) return .{};
        var seen: std.StringHashMapUnmanaged(u32) = .empty;
        defer seen.deinit(allocator);
        try seen.ensureTotalCapacity(allocator, distinct_max + 1);
        const codes = try allocator.alloc(u32, rows);
        for (codes, offsets[0..rows], offsets[1..]) |*code, start, end| {
            const entry = seen.getOrPutAssumeCapacity(bytes[@intCast(start)..@intCast(end)]);
            if (!entry.found_existing) {
                if (seen.count() > distinct_max) {
                    allocator.free(codes);
                    return .{};
                }
                entry.value_ptr.* = seen.count() - 1;
            }
            code.* = entry.value_ptr.*;
        }
        return .{ .codes = codes, .distinct = seen.count() };
    }

    /// Points `view` at the lists; call after the last sample is added.
    pub fn seal(batch: *SampleBatch) *View {
        for (batch.columns, batch.column_views, 0..) |*column, *view, index| {
            view.* = columnView(column);
            if (index < batch.string_codes.len and batch.string_codes[index].distinct > 0) {
                const coded = batch.string_codes[index];
                view.values = coded.codes.ptr;
                view.distinct = coded.distinct;
            }
        }
        batch.view = .{
            .count = batch.count(),
            .payloads = batch.payloads.items.ptr,
            .payload_offsets = batch.payload_offsets.items.ptr,
            .metadata_json = batch.metadata_json.items.ptr,
            .metadata_offsets = batch.metadata_offsets.items.ptr,
            .cache_ids = batch.cache_ids.items.ptr,
            .sample_ids = batch.sample_ids.items.ptr,
            .column_count = batch.columns.len,
            .columns = batch.column_views.ptr,
        };
        return &batch.view;
    }

    fn columnView(column: *const ColumnBuilder) ColumnView {
        return switch (column.*) {
            .bool => |list| .{ .kind = @backingInt(types.Kind.bool), .values = list.items.ptr, .offsets = null, .bytes = null },
            .int => |list| .{ .kind = @backingInt(types.Kind.int), .values = list.items.ptr, .offsets = null, .bytes = null },
            .float => |list| .{ .kind = @backingInt(types.Kind.float), .values = list.items.ptr, .offsets = null, .bytes = null },
            .string => |strings| .{ .kind = @backingInt(types.Kind.string), .values = null, .offsets = strings.offsets.items.ptr, .bytes = strings.bytes.items.ptr },
        };
    }

    pub fn fromView(view: *View) *SampleBatch {
        return @fieldParentPtr("view", view);
    }

    pub fn fromConstView(view: *const View) *const SampleBatch {
        return @fieldParentPtr("view", view);
    }
};

test "string columns with few distinct values are coded by first occurrence" {
    const allocator = std.testing.allocator;
    const schema = [_]types.Field{ .{ .name = "label", .kind = .string }, .{ .name = "n", .kind = .int } };
    var batch = try SampleBatch.init(allocator, 12, &schema);
    defer batch.deinit(allocator);
    // 3 distinct strings among 12 samples: at most a quarter.
    const labels = [_][]const u8{ "dog", "cat", "dog", "dog", "", "cat", "cat", "dog", "", "", "cat", "dog" };
    for (labels, 0..) |label, i| {
        try batch.columns[0].append(allocator, .{ .string = label });
        try batch.columns[1].append(allocator, .{ .int = @intCast(i) });
        try batch.closeSample(allocator, 0, i);
    }
    try batch.codeStrings(allocator);
    const view = batch.seal();
    const label_column = view.columns[0];
    try std.testing.expectEqual(@as(u32, 3), label_column.distinct);
    const codes: [*]const u32 = @ptrCast(@alignCast(label_column.values.?));
    try std.testing.expectEqualSlices(u32, &.{ 0, 1, 0, 0, 2, 1, 1, 0, 2, 2, 1, 0 }, codes[0..12]);
    try std.testing.expectEqual(@as(u32, 0), view.columns[1].distinct);
}

test "string columns with many distinct values are not coded" {
    const allocator = std.testing.allocator;
    const schema = [_]types.Field{.{ .name = "path", .kind = .string }};
    var batch = try SampleBatch.init(allocator, 8, &schema);
    defer batch.deinit(allocator);
    // 3 distinct strings among 8 samples: more than a quarter.
    for ([_][]const u8{ "a", "b", "c", "a", "a", "a", "a", "a" }, 0..) |path, i| {
        try batch.columns[0].append(allocator, .{ .string = path });
        try batch.closeSample(allocator, 0, i);
    }
    try batch.codeStrings(allocator);
    const view = batch.seal();
    try std.testing.expectEqual(@as(u32, 0), view.columns[0].distinct);
    try std.testing.expect(view.columns[0].values == null);
}
