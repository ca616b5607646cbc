//! A batch of materialized samples handed across the C ABI in one call.
//! `view` is the `drt_batch` struct of the header; the lists own its memory.
const std = @import("std");
const assert = std.debug.assert;
const types = @import("../format/metadata_types.zig");
const column_builder = @import("../format/column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const Cache = @import("cache_reader.zig").Cache;
const PayloadLocation = @import("record_read.zig").PayloadLocation;
const ShardMapping = @import("shard_mapping.zig").ShardMapping;
const released_batches = @import("released_batches.zig");
const native_endian = @import("builtin").cpu.arch.endian();

/// A sample whose raw payload was left in its shard (see `drt_batch_deferred`).
pub const DeferredPayload = struct {
    cache_id: u32,
    location: PayloadLocation,
    /// When the pipeline maps payloads (`Plan.map_deferred`): its bytes, checked
    /// in place, and the mapping that holds them (see `drt_batch_mapped`).
    mapped: ?Cache.MappedPayload = null,
};

const not_deferred: DeferredPayload = .{
    .cache_id = 0,
    .location = .{ .sample_id = 0, .shard_id = 0, .offset = 0, .len = 0 },
};

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
    cache_ids: [*]const u64,
    sample_ids: [*]const u64,
    column_count: u64,
    columns: [*]const ColumnView,
    /// Everything above but the payloads and JSON, in one buffer (`SampleBatch.pack`).
    /// `packed` in dataset_rt.h (a keyword here).
    packed_ptr: [*]const u8,
    packed_len: u64,
};

/// 8-byte words before the packed columns' descriptors: count, column_count,
/// payload_bytes, deferred, skipped.
pub const packed_head_words = 5;

/// A sample left out of a batch because its record is corrupt (`drt_skipped`):
/// it stood before the batch's sample `at` (`at` = count: after the last).
pub const Skipped = extern struct {
    at: u64,
    sample_id: u64,
    cache_id: u64,
};
/// 8-byte words of one packed column descriptor: kind, distinct, values_len,
/// offsets_len, bytes_len.
pub const packed_column_words = 5;

/// One metadata column's buffers as bytes: `values` (bool u8, int i64, float
/// f64, coded string u32 codes, else empty), string `offsets` and `bytes`.
const ColumnParts = struct {
    kind: types.Kind,
    distinct: u32,
    values: []const u8,
    offsets: []const u8,
    bytes: []const u8,
};

fn padded8(len: usize) usize {
    return std.mem.alignForward(usize, len, 8);
}

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
    /// Each sample's cache_id (`Dataset.cache_ids`), not its cache's position.
    cache_ids: std.ArrayList(u64) = .empty,
    sample_ids: std.ArrayList(u64) = .empty,
    /// The samples' metadata rows by column, in schema order.
    columns: []ColumnBuilder = &.{},
    column_views: []ColumnView = &.{},
    /// Per sample, when any payload was deferred (else empty): where it is,
    /// with length 0 for samples whose payload is in `payloads`.
    deferred: std.ArrayList(DeferredPayload) = .empty,
    /// `deferred`'s lengths, for `drt_batch_deferred`; filled by `finishDeferred`.
    deferred_lengths: []u64 = &.{},
    /// When the payloads were mapped, per sample: the address of its deferred
    /// payload and the mapping holding it (null for the others); filled by
    /// `finishDeferred`, for `drt_batch_mapped`.
    mapped_addresses: []?[*]const u8 = &.{},
    mapped_mappings: []?*ShardMapping = &.{},
    /// The pipeline that read the batch: only it can read the deferred payloads.
    owner: ?*const anyopaque = null,
    /// Per column, filled by `codeStrings`: a string column's codes, or none.
    string_codes: []StringCodes = &.{},
    /// Samples left out (`skipSample`), in stream order.
    skipped: std.ArrayList(Skipped) = .empty,
    /// Where the batch waits once released (`released_batches`).
    released: released_batches.Node = .{},
    /// Filled by `pack`: in `payloads`' buffer, from the first multiple of 8 at
    /// or after the payloads' end (so the two are taken in one copy).
    packed_bytes: []u8 = &.{},

    pub fn init(
        allocator: std.mem.Allocator,
        capacity: usize,
        schema: []const types.Field,
    ) !SampleBatch {
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
        assert(batch.count() == 0 and batch.columns.len == schema.len);
        return batch;
    }

    pub fn deinit(batch: *SampleBatch, allocator: std.mem.Allocator) void {
        assert(batch.column_views.len == batch.columns.len);
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
        batch.skipped.deinit(allocator);
        allocator.free(batch.deferred_lengths);
        allocator.free(batch.mapped_addresses);
        allocator.free(batch.mapped_mappings);
        for (batch.string_codes) |coded| allocator.free(coded.codes);
        allocator.free(batch.string_codes);
        // (`packed_bytes` lies in the payloads' buffer.)
    }

    /// Frees a batch made with `allocator.create` and `init`, and the batch itself.
    pub fn destroy(batch: *SampleBatch, allocator: std.mem.Allocator) void {
        batch.deinit(allocator);
        allocator.destroy(batch);
    }

    /// Bytes of payloads, metadata JSON and packed copy the batch holds.
    pub fn byteLen(batch: *const SampleBatch) u64 {
        return batch.payloads.items.len + batch.metadata_json.items.len + batch.packed_bytes.len;
    }

    pub fn count(batch: *const SampleBatch) usize {
        return batch.sample_ids.items.len;
    }

    /// Records a sample whose payload and metadata were just appended to the lists.
    pub fn closeSample(
        batch: *SampleBatch,
        allocator: std.mem.Allocator,
        cache_id: u64,
        sample_id: u64,
    ) !void {
        // One more row in each column than samples closed before it.
        if (std.debug.runtime_safety) {
            for (batch.columns) |*column| assert(column.rowCount() == batch.count() + 1);
        }
        assert(batch.payload_offsets.items.len == batch.count() + 1);
        try batch.payload_offsets.append(allocator, batch.payloads.items.len);
        try batch.metadata_offsets.append(allocator, batch.metadata_json.items.len);
        try batch.cache_ids.append(allocator, cache_id);
        try batch.sample_ids.append(allocator, sample_id);
        assert(batch.cache_ids.items.len == batch.count());
    }

    /// Records that a sample of the stream is left out here: its record is corrupt.
    pub fn skipSample(
        batch: *SampleBatch,
        allocator: std.mem.Allocator,
        cache_id: u64,
        sample_id: u64,
    ) !void {
        // Left out before it was closed: no row of it in the columns.
        if (std.debug.runtime_safety) {
            for (batch.columns) |*column| assert(column.rowCount() == batch.count());
        }
        const skipped = batch.skipped.items;
        assert(skipped.len == 0 or skipped[skipped.len - 1].at <= batch.count());
        try batch.skipped.append(
            allocator,
            .{ .at = batch.count(), .sample_id = sample_id, .cache_id = cache_id },
        );
    }

    /// Records that the sample about to be closed left its payload in the file.
    /// `mapped`: its bytes, checked in place in its shard's mapping, or null
    /// when the consumer reads them (`drt_iterator_read_deferred`).
    pub fn deferPayload(
        batch: *SampleBatch,
        allocator: std.mem.Allocator,
        cache_id: u32,
        location: PayloadLocation,
        mapped: ?Cache.MappedPayload,
    ) !void {
        assert(location.len > 0);
        if (mapped) |in_place| assert(in_place.bytes.len == location.len);
        try batch.padDeferred(allocator);
        try batch.deferred.append(
            allocator,
            .{ .cache_id = cache_id, .location = location, .mapped = mapped },
        );
        assert(batch.deferred.items.len == batch.count() + 1);
    }

    /// Marks the samples added since the last deferred one as not deferred.
    fn padDeferred(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        assert(batch.deferred.items.len <= batch.count());
        try batch.deferred.appendNTimes(
            allocator,
            not_deferred,
            batch.count() - batch.deferred.items.len,
        );
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
        assert(batch.deferred.items.len == batch.count());
        batch.deferred_lengths = try allocator.alloc(u64, batch.deferred.items.len);
        for (batch.deferred.items, batch.deferred_lengths) |entry, *len| len.* = entry.location.len;
        for (batch.deferred.items) |entry| {
            if (entry.mapped != null) break;
        } else return;
        batch.mapped_addresses = try allocator.alloc(?[*]const u8, batch.deferred.items.len);
        batch.mapped_mappings = try allocator.alloc(?*ShardMapping, batch.deferred.items.len);
        const deferred = batch.deferred.items;
        for (deferred, batch.mapped_addresses, batch.mapped_mappings) |entry, *address, *mapping| {
            address.* = if (entry.mapped) |m| m.bytes.ptr else null;
            mapping.* = if (entry.mapped) |m| m.mapping else null;
        }
        assert(batch.mapped_addresses.len == batch.deferred_lengths.len);
    }

    /// Codes each string column whose samples hold at most a quarter as many
    /// distinct strings as samples (labels, splits, sources), so that a reader
    /// decodes each distinct string once per batch. Call after the last sample.
    pub fn codeStrings(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        assert(batch.string_codes.len == 0);
        batch.string_codes = try allocator.alloc(StringCodes, batch.columns.len);
        @memset(batch.string_codes, .{});
        for (batch.columns, batch.string_codes) |*column, *codes| switch (column.*) {
            .string => |strings| codes.* = try dictionaryCodes(
                allocator,
                strings.offsets.items,
                strings.bytes.items,
            ),
            else => {},
        };
        for (batch.string_codes) |coded| {
            assert(coded.codes.len == 0 or coded.codes.len == batch.count());
        }
    }

    /// One code per string (numbered by first occurrence), or none when more
    /// than a quarter of them are distinct.
    fn dictionaryCodes(
        allocator: std.mem.Allocator,
        offsets: []const u64,
        bytes: []const u8,
    ) !StringCodes {
        assert(offsets.len >= 1 and offsets[offsets.len - 1] == bytes.len);
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
        assert(seen.count() >= 1 and seen.count() <= distinct_max);
        return .{ .codes = codes, .distinct = seen.count() };
    }

    /// Copies the batch but its payloads and JSON into `packed_bytes`, so that a
    /// binding takes it in one copy instead of a call per array. Call after
    /// `finishDeferred` and `codeStrings`. Layout (native-endian, each part
    /// zero-padded to a multiple of 8 bytes): the head words, a descriptor per
    /// column, payload lengths (u64), sample ids (u64), cache ids (u64), then
    /// per column its values, offsets and bytes, then the skipped samples.
    /// The buffer is the payloads' own, from the first multiple of 8 bytes at
    /// or after their end: nothing may be added to `payloads` afterwards.
    pub fn pack(batch: *SampleBatch, allocator: std.mem.Allocator) !void {
        const n = batch.count();
        // After `finishDeferred` and `codeStrings`.
        assert(batch.deferred_lengths.len == 0 or batch.deferred_lengths.len == n);
        assert(batch.string_codes.len == batch.columns.len);
        const head_words = packed_head_words + packed_column_words * batch.columns.len + 3 * n;
        var len = head_words * 8;
        len += batch.skipped.items.len * @sizeOf(Skipped);
        for (0..batch.columns.len) |index| {
            const parts = batch.columnParts(index);
            len += padded8(parts.values.len) + padded8(parts.offsets.len);
            len += padded8(parts.bytes.len);
        }
        // In the payloads' buffer, after them: a binding takes both in one copy.
        const payload_len = batch.payloads.items.len;
        const packed_at = padded8(payload_len);
        batch.packed_bytes = &.{};
        try batch.payloads.ensureTotalCapacity(allocator, packed_at + len);
        const after_payloads = batch.payloads.allocatedSlice()[payload_len .. packed_at + len];
        @memset(after_payloads, 0);
        const out = after_payloads[packed_at - payload_len ..];
        batch.packed_bytes = out;
        var at: usize = 0;
        const head = [packed_head_words]u64{
            n,
            batch.columns.len,
            batch.payloads.items.len,
            @intFromBool(batch.deferred_lengths.len > 0),
            batch.skipped.items.len,
        };
        at = putPadded(out, at, std.mem.sliceAsBytes(&head));
        for (0..batch.columns.len) |index| {
            const parts = batch.columnParts(index);
            const words = [packed_column_words]u64{
                @backingInt(parts.kind),
                parts.distinct,
                parts.values.len,
                parts.offsets.len,
                parts.bytes.len,
            };
            at = putPadded(out, at, std.mem.sliceAsBytes(&words));
        }
        for (batch.payload_offsets.items[0..n], batch.payload_offsets.items[1..]) |start, end| {
            std.mem.writeInt(u64, out[at..][0..8], end - start, native_endian);
            at += 8;
        }
        at = putPadded(out, at, std.mem.sliceAsBytes(batch.sample_ids.items));
        at = putPadded(out, at, std.mem.sliceAsBytes(batch.cache_ids.items));
        for (0..batch.columns.len) |index| {
            const parts = batch.columnParts(index);
            at = putPadded(out, at, parts.values);
            at = putPadded(out, at, parts.offsets);
            at = putPadded(out, at, parts.bytes);
        }
        at = putPadded(out, at, std.mem.sliceAsBytes(batch.skipped.items));
        assert(at == len);
        assert(batch.packed_bytes.ptr == batch.payloads.items.ptr + packed_at);
    }

    /// Copies `bytes` to `out[at..]`; returns the offset after it, padded to 8.
    fn putPadded(out: []u8, at: usize, bytes: []const u8) usize {
        assert(at % 8 == 0 and at + padded8(bytes.len) <= out.len);
        @memcpy(out[at..][0..bytes.len], bytes);
        return at + padded8(bytes.len);
    }

    fn columnParts(batch: *const SampleBatch, index: usize) ColumnParts {
        assert(index < batch.columns.len);
        return switch (batch.columns[index]) {
            .bool => |list| .{
                .kind = .bool,
                .distinct = 0,
                .values = list.items,
                .offsets = &.{},
                .bytes = &.{},
            },
            .int => |list| .{
                .kind = .int,
                .distinct = 0,
                .values = std.mem.sliceAsBytes(list.items),
                .offsets = &.{},
                .bytes = &.{},
            },
            .float => |list| .{
                .kind = .float,
                .distinct = 0,
                .values = std.mem.sliceAsBytes(list.items),
                .offsets = &.{},
                .bytes = &.{},
            },
            .string => |strings| blk: {
                const codes = batch.string_codes;
                const coded: StringCodes = if (index < codes.len) codes[index] else .{};
                break :blk .{
                    .kind = .string,
                    .distinct = coded.distinct,
                    .values = std.mem.sliceAsBytes(coded.codes),
                    .offsets = std.mem.sliceAsBytes(strings.offsets.items),
                    .bytes = strings.bytes.items,
                };
            },
        };
    }

    /// Points `view` at the lists; call after the last sample is added.
    pub fn seal(batch: *SampleBatch) *View {
        assert(batch.payload_offsets.items.len == batch.count() + 1);
        assert(batch.metadata_offsets.items.len == batch.count() + 1);
        for (batch.column_views, 0..) |*view, index| {
            const parts = batch.columnParts(index);
            const string = parts.kind == .string;
            view.* = .{
                .kind = @backingInt(parts.kind),
                .distinct = parts.distinct,
                .values = if (string and parts.distinct == 0) null else parts.values.ptr,
                .offsets = if (string) @ptrCast(@alignCast(parts.offsets.ptr)) else null,
                .bytes = if (string) parts.bytes.ptr else null,
            };
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
            .packed_ptr = batch.packed_bytes.ptr,
            .packed_len = batch.packed_bytes.len,
        };
        return &batch.view;
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
    const schema = [_]types.Field{ .{
        .name = "label",
        .kind = .string,
    }, .{ .name = "n", .kind = .int } };
    var batch = try SampleBatch.init(allocator, 12, &schema);
    defer batch.deinit(allocator);
    // 3 distinct strings among 12 samples: at most a quarter.
    const labels = [_][]const u8{
        "dog", "cat", "dog", "dog", "",    "cat",
        "cat", "dog", "",    "",    "cat", "dog",
    };
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

test "pack lays out the batch's arrays and columns in one buffer" {
    const allocator = std.testing.allocator;
    const schema = [_]types.Field{ .{
        .name = "ok",
        .kind = .bool,
    }, .{ .name = "label", .kind = .string }, .{ .name = "n", .kind = .int } };
    var batch = try SampleBatch.init(allocator, 5, &schema);
    defer batch.deinit(allocator);
    const payloads = [_][]const u8{ "a", "bcd", "", "ef", "g" };
    for (payloads, 0..) |payload, i| {
        if (i == 2) try batch.skipSample(allocator, 1, 999); // left out before sample 2
        try batch.payloads.appendSlice(allocator, payload);
        try batch.columns[0].append(allocator, .{ .bool = i % 2 == 0 });
        try batch.columns[1].append(allocator, .{ .string = if (i == 1) "dog" else "cat" });
        try batch.columns[2].append(allocator, .{ .int = -@as(i64, @intCast(i)) });
        try batch.closeSample(allocator, @intCast(i % 2), 100 + i);
    }
    try batch.codeStrings(allocator); // 2 distinct labels among 5: not coded
    try batch.pack(allocator);
    const view = batch.seal();
    const bytes = view.packed_ptr[0..@intCast(view.packed_len)];
    try std.testing.expectEqual(@as(usize, 0), bytes.len % 8);
    // In the payloads' buffer, after the 7 payload bytes and 1 of padding.
    try std.testing.expectEqual(view.payloads + 8, view.packed_ptr);
    try std.testing.expectEqualStrings("abcdefg\x00", view.payloads[0..8]);
    var words: [256]u64 = @splat(0);
    @memcpy(std.mem.sliceAsBytes(words[0 .. bytes.len / 8]), bytes);
    // Head and descriptors.
    try std.testing.expectEqualSlices(u64, &.{ 5, 3, 7, 0, 1 }, words[0..5]);
    try std.testing.expectEqualSlices(u64, &.{ 0, 0, 5, 0, 0 }, words[5..10]);
    try std.testing.expectEqualSlices(u64, &.{ 3, 0, 0, 6 * 8, 15 }, words[10..15]);
    try std.testing.expectEqualSlices(u64, &.{ 1, 0, 5 * 8, 0, 0 }, words[15..20]);
    // Payload lengths, sample ids, cache ids.
    try std.testing.expectEqualSlices(u64, &.{ 1, 3, 0, 2, 1 }, words[20..25]);
    try std.testing.expectEqualSlices(u64, &.{ 100, 101, 102, 103, 104 }, words[25..30]);
    try std.testing.expectEqualSlices(u64, &.{ 0, 1, 0, 1, 0 }, words[30..35]);
    // Columns: bools padded to a word, string offsets and bytes, ints.
    const bools = std.mem.sliceAsBytes(words[35..36]);
    try std.testing.expectEqualSlices(u8, &.{ 1, 0, 1, 0, 1, 0, 0, 0 }, bools);
    try std.testing.expectEqualSlices(u64, &.{ 0, 3, 6, 9, 12, 15 }, words[36..42]);
    try std.testing.expectEqualStrings("catdogcatcatcat\x00", std.mem.sliceAsBytes(words[42..44]));
    const ints = std.mem.bytesAsSlice(i64, std.mem.sliceAsBytes(words[44..49]));
    try std.testing.expectEqualSlices(i64, &.{ 0, -1, -2, -3, -4 }, ints);
    // The skipped sample: at, sample id, cache id.
    try std.testing.expectEqualSlices(u64, &.{ 2, 999, 1 }, words[49..52]);
    try std.testing.expectEqual(@as(usize, 52 * 8), bytes.len);
}
