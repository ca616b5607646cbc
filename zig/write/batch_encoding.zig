//! A pushed batch of samples, and the pool job that encodes it.
//!
//! Every push becomes one `Batch` and one job. The job checks the metadata
//! against the schema (metadata pushed by column was checked at push), writes
//! each sample's record JSON canonically and frames its record after it, the
//! payload LZ4-compressed if asked, all back to back in `Batch.encoded`. Jobs
//! run side by side; the writer commits their batches in push order.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const metadata_canonical = @import("../format/metadata_canonical.zig");
const metadata_json = @import("../format/metadata_json.zig");
const shard_record = @import("../format/shard_record.zig");
const record_checksums = @import("../format/record_checksums.zig");
const lz4 = @import("../codec/lz4.zig");
const column_builder = @import("../format/column_builder.zig");
const ColumnBuilder = column_builder.ColumnBuilder;
const thread_pool = @import("../base/thread_pool.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Stats = @import("writer_stats.zig").Stats;

/// What a writer's batches are encoded with, and where each goes once encoded.
pub const Encoder = struct {
    allocator: std.mem.Allocator,
    compression: shard_record.Compression,
    stats: *Stats,
    /// Takes each batch once its job is done, failed or not, on the job's thread.
    encoded: *const fn (encoder: *Encoder, batch: *Batch) void,

    /// Uncompressed payloads this large are not copied into the batch's framed
    /// records: the committer hashes and writes them from the pushed memory
    /// (kept alive until the batch is committed), next to their framed heads.
    const external_payload_bytes_min = 64 << 10;

    /// Whether a record's payload is left out of `Batch.encoded`, which then
    /// holds only the record's head (`external_payload_bytes_min`).
    pub fn isExternal(encoder: *const Encoder, payload_len: u64) bool {
        comptime assert(external_payload_bytes_min > 0);
        return encoder.compression == .none and payload_len >= external_payload_bytes_min;
    }

    fn encode(encoder: *const Encoder, batch: *Batch) !void {
        // One compressor table for the batch's records (16 KiB of the worker's 4 MiB stack).
        var lz4_table: lz4.Table = .{};
        if (batch.columnar) return encoder.encodeColumnar(batch, &lz4_table);
        const allocator = encoder.allocator;
        const schema = batch.schema;
        assert(batch.count > 0 and batch.columns.len == 0);
        assert(batch.encoded.items.len == 0);
        batch.record_lens = try allocator.alloc(u64, batch.count);
        batch.record_checksums = try allocator.alloc(u32, batch.count);
        batch.columns = try column_builder.initAll(allocator, schema);

        var scratch: metadata_json.Scratch = .empty;
        defer scratch.deinit(allocator);
        var canonical: std.ArrayList(u8) = .empty;
        defer canonical.deinit(allocator);
        const values = try allocator.alloc(types.Value, schema.len);
        defer allocator.free(values);

        var parser = metadata_json.Parser.init(batch.metadata_text);
        var compression_ns: u64 = 0;
        for (0..batch.count) |i| {
            const sample = batch.first_sample + i;
            const entries = (parser.nextObject(allocator, &scratch, &batch.diagnostic) catch |err| {
                if (err == error.OutOfMemory) return error.OutOfMemory;
                batch.diagnostic.prefix("sample {d}: ", .{sample});
                return error.InvalidInput;
            }) orelse {
                batch.diagnostic.set(
                    "metadata array holds {d} objects but {d} payloads were given",
                    .{ i, batch.count },
                );
                return error.InvalidInput;
            };
            metadata_json.matchSchema(schema, entries, values, &batch.diagnostic) catch {
                batch.diagnostic.prefix("sample {d}: ", .{sample});
                return error.InvalidInput;
            };
            canonical.clearRetainingCapacity();
            try metadata_canonical.writeCanonical(allocator, schema, values, &canonical);
            for (batch.columns, values) |*column, value| try column.append(allocator, value);

            compression_ns += try encoder.appendRecord(batch, i, canonical.items, &lz4_table);
        }
        const extra = parser.nextObject(allocator, &scratch, &batch.diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            batch.diagnostic.prefix("after sample {d}: ", .{batch.first_sample + batch.count - 1});
            return error.InvalidInput;
        };
        if (extra != null) {
            batch.diagnostic.set(
                "metadata array holds more objects than the {d} payloads given",
                .{batch.count},
            );
            return error.InvalidInput;
        }
        parser.finish(&batch.diagnostic) catch return error.InvalidInput;
        for (batch.columns) |*column| assert(column.rowCount() == batch.count);
        encoder.countCompression(batch, compression_ns);
    }

    /// Encodes a batch whose metadata came by column (checked at push).
    fn encodeColumnar(encoder: *const Encoder, batch: *Batch, lz4_table: *lz4.Table) !void {
        const allocator = encoder.allocator;
        assert(batch.columns.len == batch.schema.len);
        for (batch.columns) |*column| assert(column.rowCount() == batch.count);
        batch.record_lens = try allocator.alloc(u64, batch.count);
        batch.record_checksums = try allocator.alloc(u32, batch.count);
        var canonical: std.ArrayList(u8) = .empty;
        defer canonical.deinit(allocator);
        const values = try allocator.alloc(types.Value, batch.schema.len);
        defer allocator.free(values);
        var compression_ns: u64 = 0;
        for (0..batch.count) |i| {
            for (batch.columns, values) |*column, *value| value.* = column.view().get(i);
            canonical.clearRetainingCapacity();
            try metadata_canonical.writeCanonical(allocator, batch.schema, values, &canonical);
            compression_ns += try encoder.appendRecord(batch, i, canonical.items, lz4_table);
        }
        assert(batch.record_lens.len == batch.count);
        encoder.countCompression(batch, compression_ns);
    }

    /// Frames sample `i` of the batch after its canonical metadata and
    /// checksums the record; returns the nanoseconds spent compressing.
    fn appendRecord(
        encoder: *const Encoder,
        batch: *Batch,
        i: usize,
        canonical: []const u8,
        lz4_table: *lz4.Table,
    ) !u64 {
        assert(i < batch.count and batch.record_lens.len == batch.count);
        const payload_len: usize = @intCast(batch.payload_lens[i]);
        const payload = batch.payload_parts[i][0..payload_len];
        const start = batch.encoded.items.len;
        if (encoder.isExternal(payload_len)) {
            // Only the head is framed; the committer writes the payload from where it is.
            try batch.encoded.ensureUnusedCapacity(
                encoder.allocator,
                shard_record.header_bytes + canonical.len,
            );
            const head_len = shard_record.appendAssumeCapacity(
                &batch.encoded,
                canonical,
                "",
                .none,
                lz4_table,
            );
            batch.record_lens[i] = head_len + payload_len;
            assert(head_len == shard_record.header_bytes + canonical.len);
            batch.record_checksums[i] = record_checksums.ofParts(
                batch.encoded.items[start..],
                payload,
            );
            return 0;
        }
        try batch.encoded.ensureUnusedCapacity(
            encoder.allocator,
            shard_record.encodedBytesMax(canonical.len, payload_len, encoder.compression),
        );
        const compress_started = system.monotonicNanoseconds();
        batch.record_lens[i] = shard_record.appendAssumeCapacity(
            &batch.encoded,
            canonical,
            payload,
            encoder.compression,
            lz4_table,
        );
        const compression_ns = if (encoder.compression == .lz4)
            system.monotonicNanoseconds() - compress_started
        else
            0;
        assert(batch.encoded.items.len - start == batch.record_lens[i]);
        batch.record_checksums[i] = record_checksums.ofRecord(batch.encoded.items[start..]);
        return compression_ns;
    }

    fn countCompression(encoder: *const Encoder, batch: *const Batch, compression_ns: u64) void {
        if (encoder.compression != .lz4) return;
        const counter = &encoder.stats.compression;
        _ = counter.calls.fetchAdd(batch.count, .monotonic);
        _ = counter.nanoseconds.fetchAdd(compression_ns, .monotonic);
        _ = counter.bytes.fetchAdd(batch.payload_bytes, .monotonic);
    }
};

/// A batch as pushed, then as encoded by its pool job.
pub const Batch = struct {
    job: thread_pool.Job = .{ .run = run },
    encoder: *Encoder,
    /// The cache's schema, fixed before the first batch is created.
    schema: []const types.Field,
    /// The batch's place in push order, and its first sample's; set when it is submitted.
    sequence: u64 = undefined,
    first_sample: u64 = undefined,
    count: usize,
    /// The payloads back to back when copied at push (`push`), else empty.
    payloads: []u8 = &.{},
    /// One pointer per sample: into `payloads`, or into the caller's memory
    /// when borrowed, valid until the batch is committed (`pushBorrowed`).
    payload_parts: []const [*]const u8 = &.{},
    payload_bytes: u64,
    payload_lens: []u64 = &.{},
    /// The metadata as a JSON array, or empty when it came by column (then
    /// `columns` already holds it and `columnar` is set).
    metadata_text: []u8 = &.{},
    columnar: bool = false,
    // Filled by the encode job (`columns` at push when columnar).
    encoded: std.ArrayList(u8) = .empty,
    record_lens: []u64 = &.{},
    /// Each record's CRC-32C, as stored (format/record_checksums.zig).
    record_checksums: []u32 = &.{},
    columns: []ColumnBuilder = &.{},
    failed: bool = false,
    diagnostic: Diagnostic = .{},

    /// A batch owning copies of the lengths and the metadata text; its
    /// payloads are set by the caller.
    pub fn create(
        encoder: *Encoder,
        schema: []const types.Field,
        payload_lens: []const u64,
        metadata_text: []const u8,
        payload_bytes: u64,
    ) error{OutOfMemory}!*Batch {
        assert(payload_lens.len > 0);
        const allocator = encoder.allocator;
        const batch = try allocator.create(Batch);
        batch.* = .{
            .encoder = encoder,
            .schema = schema,
            .count = payload_lens.len,
            .payload_bytes = payload_bytes,
        };
        errdefer batch.destroy(allocator);
        batch.payload_lens = try allocator.dupe(u64, payload_lens);
        batch.metadata_text = try allocator.dupe(u8, metadata_text);
        assert(batch.count == batch.payload_lens.len and !batch.columnar);
        return batch;
    }

    pub fn destroy(batch: *Batch, allocator: std.mem.Allocator) void {
        assert(batch.payload_parts.len == 0 or batch.payload_parts.len == batch.count);
        assert(batch.record_lens.len == 0 or batch.record_lens.len == batch.count);
        allocator.free(batch.payloads);
        allocator.free(batch.payload_parts);
        allocator.free(batch.payload_lens);
        allocator.free(batch.metadata_text);
        batch.encoded.deinit(allocator);
        allocator.free(batch.record_lens);
        allocator.free(batch.record_checksums);
        column_builder.deinitAll(allocator, batch.columns);
        allocator.free(batch.columns);
        allocator.destroy(batch);
    }

    fn run(job: *thread_pool.Job) void {
        const batch: *Batch = @fieldParentPtr("job", job);
        const encoder = batch.encoder;
        assert(batch.payload_parts.len == batch.count);
        const started = system.monotonicNanoseconds();
        encoder.encode(batch) catch |err| {
            batch.failed = true;
            if (err == error.OutOfMemory) {
                batch.diagnostic.set("out of memory while encoding samples", .{});
            }
        };
        // An encoded batch has every record framed; a failed one says why.
        assert(batch.failed or batch.record_checksums.len == batch.count);
        assert(!batch.failed or batch.diagnostic.len > 0);
        encoder.stats.encode.add(started, batch.payload_bytes);
        encoder.encoded(encoder, batch);
    }
};

/// Where each payload starts in `payloads`, whose length the lengths add up
/// to (checked at push).
pub fn joinedParts(
    allocator: std.mem.Allocator,
    payloads: []const u8,
    payload_lens: []const u64,
) error{OutOfMemory}![]const [*]const u8 {
    assert(payload_lens.len > 0);
    const parts = try allocator.alloc([*]const u8, payload_lens.len);
    var offset: usize = 0;
    for (parts, payload_lens) |*part, len| {
        part.* = payloads.ptr + offset;
        offset += @intCast(len);
    }
    assert(offset == payloads.len);
    return parts;
}

/// The caller's payload pointers; a NULL one (allowed for an empty payload,
/// checked at push) points at no bytes.
pub fn borrowedParts(
    allocator: std.mem.Allocator,
    payloads: []const ?[*]const u8,
) error{OutOfMemory}![]const [*]const u8 {
    assert(payloads.len > 0);
    const parts = try allocator.alloc([*]const u8, payloads.len);
    // `no_bytes` only for empty payloads.
    for (parts, payloads) |*part, payload| part.* = payload orelse &no_bytes;
    assert(parts.len == payloads.len);
    return parts;
}

const no_bytes = [0]u8{};
