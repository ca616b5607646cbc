//! Reading one sample's record from an open cache, checked from index row to
//! payload.
//!
//! A read checks the sample's index row against its shard (inside it, and back
//! to back with the next row), the record's CRC-32C against records.crc32c
//! when the cache has it, every length inside the record, the embedded JSON
//! against the metadata.arrow row, and the LZ4 block; any mismatch is
//! `error.InvalidCache` with a message saying what differs. A record is read
//! one of two ways:
//! - whole (`readWhole`): its bytes in one positional read, or with the records
//!   after it when the caller reads them next (an ordered pass), then checked,
//!   split and decoded;
//! - direct (`readDirect`), for a large raw payload: the record's head (header
//!   and JSON) first, then the payload straight into the caller's list, one copy
//!   in all, or left in the shard for the caller to read later (deferred).
//!
//! The shard's bytes come only through `ShardSource.readExactly` and
//! `ShardSource.readFrom` (a file the reader's scratch holds pinned).
const std = @import("std");
const assert = std.debug.assert;
const types = @import("../format/metadata_types.zig");
const metadata_verify = @import("../format/metadata_verify.zig");
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const record_checksums = @import("../format/record_checksums.zig");
const ColumnBuilder = @import("../format/column_builder.zig").ColumnBuilder;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const ShardSource = @import("shard_source.zig").ShardSource;

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// Records larger than this with raw payloads are read direct.
const direct_read_bytes_min = 64 << 10;
/// Enough for the header and the metadata JSON of nearly every record; a
/// record whose JSON is longer is read whole instead.
const record_head_bytes = 8 << 10;
/// Bound of one read of back-to-back records for an ordered pass.
pub const run_bytes_max = 1 << 20;

/// What a record read needs of an open cache, all borrowed from it.
pub const Records = struct {
    /// index.bin: `sample_count` rows.
    index_bytes: []const u8,
    sample_count: u64,
    /// records.crc32c: one entry per sample, when the cache has the file.
    checksum_bytes: ?[]const u8,
    schema: []const types.Field,
    /// metadata.arrow's columns in schema order, `sample_count` rows each.
    columns: []const types.Column,
    shards: *const ShardSource,

    /// The stored checksum of sample `sample_id`'s record, if the cache has them.
    pub fn recordChecksum(records: *const Records, sample_id: u64) ?u32 {
        assert(sample_id < records.sample_count);
        const bytes = records.checksum_bytes orelse return null;
        return record_checksums.entry(bytes, sample_id);
    }

    /// Sample `sample_id`'s index row, checked to lie inside its shard and to
    /// end where the next record starts (or where its shard ends).
    pub fn checkedRow(
        records: *const Records,
        sample_id: u64,
        diagnostic: *Diagnostic,
    ) Error!index_file.Row {
        assert(sample_id < records.sample_count);
        assert(records.index_bytes.len == records.sample_count * index_file.row_bytes);
        const row = index_file.decodeRow(records.index_bytes, sample_id);
        const byte_lens = records.shards.byteLens();
        try index_file.checkRow(row, sample_id, byte_lens, diagnostic);
        try index_file.checkContiguous(
            records.index_bytes,
            records.sample_count,
            sample_id,
            row,
            byte_lens,
            diagnostic,
        );
        // The checks above keep the record inside its listed shard.
        assert(row.shard_id < records.shards.count());
        assert(row.offset + row.record_len <= records.shards.byteLen(row.shard_id));
        return row;
    }

    /// The decoded length of the payload of `row`'s record (a `checkedRow`),
    /// from the record's header (and with lz4 its length prefix) alone: a
    /// cache's full validation reads this much of every record.
    pub fn payloadLen(
        records: *const Records,
        row: index_file.Row,
        diagnostic: *Diagnostic,
    ) Error!u64 {
        assert(row.offset + row.record_len <= records.shards.byteLen(row.shard_id));
        var head: [shard_record.header_bytes]u8 = undefined;
        if (row.record_len < head.len) {
            diagnostic.set(
                "record of {d} bytes is shorter than its 8-byte header",
                .{row.record_len},
            );
            return error.InvalidCache;
        }
        try records.shards.readExactly(row.shard_id, &head, row.offset, diagnostic);
        const layout = try shard_record.layoutOf(&head, row.record_len, diagnostic);
        assert(layout.metadataEnd() + layout.stored_len == row.record_len);
        const payload_len = switch (records.shards.compression(row.shard_id)) {
            .none => layout.stored_len,
            .lz4 => lz4: {
                try shard_record.checkLz4Room(layout.stored_len, diagnostic);
                var prefix: [shard_record.lz4_prefix_bytes]u8 = undefined;
                const prefix_offset = row.offset + layout.metadataEnd();
                try records.shards.readExactly(row.shard_id, &prefix, prefix_offset, diagnostic);
                const len = try shard_record.lz4PayloadLen(&prefix, layout.stored_len, diagnostic);
                assert(len <= shard_record.lz4_payload_bytes_max);
                break :lz4 len;
            },
        };
        return payload_len;
    }

    /// Asks the CPU to start loading what `read` reads from memory for
    /// `sample_id`: its index row, the next (checked for back-to-back
    /// placement), its record checksum and its metadata values. Random samples
    /// miss the CPU caches on each; issued for a whole chunk first, the misses
    /// overlap instead of stalling one after the other. Only a hint: it reads
    /// nothing.
    pub fn prefetch(records: *const Records, sample_id: u64) void {
        assert(sample_id < records.sample_count);
        const index_bytes = records.index_bytes;
        const row: usize = @intCast(sample_id);
        const start = row * index_file.row_bytes;
        const end = @min(start + 2 * index_file.row_bytes, index_bytes.len);
        @prefetch(&index_bytes[start], .{});
        @prefetch(&index_bytes[end - 1], .{});
        if (records.checksum_bytes) |bytes| {
            @prefetch(&bytes[@intCast(record_checksums.entryOffset(sample_id))], .{});
        }
        for (records.columns) |column| switch (column.values) {
            .bool => |v| @prefetch(&v[row], .{}),
            .int => |v| @prefetch(&v[row], .{}),
            .float => |v| @prefetch(&v[row], .{}),
            .string => |v| {
                @prefetch(&v.offsets[row], .{});
                @prefetch(&v.offsets[row + 1], .{});
            },
        };
    }

    /// The second step of `prefetch`, once its string offsets are loaded:
    /// the first bytes of each of the sample's strings.
    pub fn prefetchStrings(records: *const Records, sample_id: u64) void {
        assert(sample_id < records.sample_count);
        const row: usize = @intCast(sample_id);
        for (records.columns) |column| switch (column.values) {
            .string => |v| {
                const start = v.offsets[row];
                if (start < v.bytes.len) @prefetch(&v.bytes[@intCast(start)], .{});
            },
            else => {},
        };
    }
};

/// One sample to read.
pub const Request = struct {
    sample_id: u64,
    /// How many samples from `sample_id` on the caller reads next, in order
    /// (1: just this one). Records of them that follow this one in its shard
    /// are read with it, in one read of at most `run_bytes_max` bytes.
    run_samples: u64 = 1,
    /// A raw payload of at least this many bytes is left in its shard and its
    /// place returned instead (0: every payload is read).
    defer_payload_bytes: u64 = 0,
};

/// Where a read puts the sample: appended to the caller's lists, grown with
/// `allocator`.
pub const Output = struct {
    allocator: std.mem.Allocator,
    /// The decoded payload.
    payload: *std.ArrayList(u8),
    /// The embedded metadata JSON, once checked equal to the metadata.arrow row.
    metadata_json: *std.ArrayList(u8),
    /// One row more in each, the metadata.arrow row in schema order.
    columns: []ColumnBuilder,
};

/// Where a sample's raw payload lies in its shard, for a payload that `read`
/// left unread (deferred) so its caller can read it later straight into memory
/// of its own.
pub const PayloadLocation = struct {
    sample_id: u64,
    shard_id: u64,
    offset: u64,
    len: u64,
    /// The CRC-32C the payload's bytes must have (`record_checksums.expectedTail`),
    /// if the cache has record checksums.
    checksum: ?u32 = null,
};

/// Per-reader buffers reused from sample to sample.
pub const Scratch = struct {
    /// Records read together: shard bytes from `run_offset` in `run_shard` of
    /// `run_records`; or a record's head, with `run_records` null.
    run: std.ArrayList(u8) = .empty,
    run_records: ?*const Records = null,
    run_shard: u64 = 0,
    run_offset: u64 = 0,
    values: std.ArrayList(types.Value) = .empty,
    /// The shard file the reader holds pinned (`ShardSource.pin`) from one
    /// read to the next while they read the same shard: a pass reads many
    /// records of one shard, and pins it once for all of them. Released when
    /// a read needs another shard, and by `deinit`, which the reader calls
    /// before the cache closes; at once for a shard another process may
    /// evict (`ShardSource.evictable`).
    pinned_shards: ?*const ShardSource = null,
    pinned_shard: u64 = 0,
    pinned_file: std.Io.File = undefined,

    pub fn deinit(scratch: *Scratch, allocator: std.mem.Allocator) void {
        scratch.unpinShard();
        scratch.run.deinit(allocator);
        scratch.values.deinit(allocator);
    }

    /// Lets go of the shard file the scratch holds pinned between reads and of
    /// the records it read ahead: the next read reads its shard anew.
    pub fn forgetShard(scratch: *Scratch) void {
        scratch.unpinShard();
        scratch.run_records = null;
        scratch.run.clearRetainingCapacity();
    }

    fn unpinShard(scratch: *Scratch) void {
        const shards = scratch.pinned_shards orelse return;
        shards.unpin(scratch.pinned_shard);
        scratch.pinned_shards = null;
    }

    /// Fills `buffer` with shard `shard_id`'s bytes from `offset`
    /// (`ShardSource.readFrom`), through the file the scratch holds pinned,
    /// pinned first if the scratch holds another.
    fn readShard(
        scratch: *Scratch,
        shards: *const ShardSource,
        shard_id: u64,
        buffer: []u8,
        offset: u64,
        diagnostic: *Diagnostic,
    ) Error!void {
        if (scratch.pinned_shards != shards or scratch.pinned_shard != shard_id) {
            scratch.unpinShard();
            scratch.pinned_file = try shards.pin(shard_id, diagnostic);
            scratch.pinned_shards = shards;
            scratch.pinned_shard = shard_id;
        }
        // A shard another process may evict is pinned only while it is read.
        defer if (shards.evictable()) scratch.unpinShard();
        return shards.readFrom(scratch.pinned_file, shard_id, buffer, offset, diagnostic);
    }

    /// Record `row`'s bytes if the last run read holds them whole.
    fn recordInRun(
        scratch: *const Scratch,
        records: *const Records,
        row: index_file.Row,
    ) ?[]const u8 {
        if (scratch.run_records != records or scratch.run_shard != row.shard_id) return null;
        if (row.offset < scratch.run_offset) return null;
        const start: usize = @intCast(row.offset - scratch.run_offset);
        if (start + row.record_len > scratch.run.items.len) return null;
        // A run is one read from its shard: it lies inside it.
        assert(scratch.run_offset + scratch.run.items.len <= records.shards.byteLen(row.shard_id));
        return scratch.run.items[start..][0..@intCast(row.record_len)];
    }
};

/// Reads sample `request.sample_id` of `records`: appends its decoded payload,
/// its embedded metadata JSON and its metadata.arrow row to `output`, or, for a
/// payload to defer, everything but the payload and returns where that is.
/// On failure `output` is left as it was and `diagnostic` says why (without
/// naming the cache or the sample: the caller prefixes them).
pub fn read(
    records: *const Records,
    request: Request,
    scratch: *Scratch,
    output: Output,
    diagnostic: *Diagnostic,
) Error!?PayloadLocation {
    assert(request.run_samples >= 1);
    assert(output.columns.len == records.columns.len);
    const row = try records.checkedRow(request.sample_id, diagnostic);
    const before: OutputLens = .of(output);
    // A failed read leaves the outputs as they were, so a caller can skip the sample.
    errdefer before.restore(output);
    if (readsDirect(records, row, request)) {
        if (try readHead(records, row, scratch, output.allocator, diagnostic)) |head| {
            const deferred = try readDirect(
                records,
                request,
                row,
                head,
                scratch,
                output,
                diagnostic,
            );
            before.assertAppended(output, if (deferred) |location| location.len else 0);
            return deferred;
        }
        // Unusually large metadata: the record is read whole.
    }
    try readWhole(records, request, row, scratch, output, diagnostic);
    before.assertAppended(output, 0);
    return null;
}

/// Whether `row`'s record is read direct: a raw payload large enough that one
/// copy fewer pays for a second read, or one that may be deferred. (A record is
/// longer than its payload, so a payload to defer is in a record longer than
/// the deferral size.)
fn readsDirect(records: *const Records, row: index_file.Row, request: Request) bool {
    assert(row.shard_id < records.shards.count());
    if (records.shards.compression(row.shard_id) != .none) return false;
    const defer_bytes = request.defer_payload_bytes;
    const may_defer = defer_bytes != 0 and row.record_len > defer_bytes;
    return row.record_len > direct_read_bytes_min or may_defer;
}

/// A record's head as `readHead` read it.
const Head = struct {
    /// In the scratch's buffer.
    metadata_json: []const u8,
    /// Where the raw payload lies in the shard: right after the JSON, to the
    /// record's end.
    payload_offset: u64,
    payload_len: u64,
    /// The CRC-32C of the header and the JSON, when the cache has record checksums.
    checksum: u32,
};

/// Reads the first bytes of `row`'s record: its header and, unless it is
/// unusually large (then null), its metadata JSON.
fn readHead(
    records: *const Records,
    row: index_file.Row,
    scratch: *Scratch,
    allocator: std.mem.Allocator,
    diagnostic: *Diagnostic,
) Error!?Head {
    assert(records.shards.compression(row.shard_id) == .none);
    assert(row.offset + row.record_len <= records.shards.byteLen(row.shard_id));
    const len: usize = @intCast(@min(row.record_len, record_head_bytes));
    scratch.run_records = null; // the buffer no longer holds a run of whole records
    scratch.run.clearRetainingCapacity();
    try scratch.run.ensureTotalCapacity(allocator, len);
    const head = scratch.run.allocatedSlice()[0..len];
    try scratch.readShard(records.shards, row.shard_id, head, row.offset, diagnostic);
    // The head is the whole record when it is short; `layoutOf` refuses one
    // shorter than its header (possible with a small deferral size).
    const layout = try shard_record.layoutOf(head, row.record_len, diagnostic);
    if (layout.metadataEnd() > head.len) return null;
    const metadata_end: usize = @intCast(layout.metadataEnd());
    const has_checksums = records.checksum_bytes != null;
    const result: Head = .{
        .metadata_json = head[shard_record.header_bytes..metadata_end],
        .payload_offset = row.offset + metadata_end,
        .payload_len = layout.stored_len,
        .checksum = if (has_checksums) record_checksums.ofRecord(head[0..metadata_end]) else 0,
    };
    assert(result.payload_offset + result.payload_len == row.offset + row.record_len);
    assert(result.metadata_json.len == layout.metadata_len);
    assert(scratch.run_records == null);
    return result;
}

/// The direct path, after `readHead`: checks and appends the metadata, then
/// reads the raw payload into `output`, or returns its place to defer it.
fn readDirect(
    records: *const Records,
    request: Request,
    row: index_file.Row,
    head: Head,
    scratch: *Scratch,
    output: Output,
    diagnostic: *Diagnostic,
) Error!?PayloadLocation {
    assert(records.shards.compression(row.shard_id) == .none);
    assert(head.payload_offset + head.payload_len == row.offset + row.record_len);
    try appendMetadata(records, request.sample_id, head.metadata_json, scratch, output, diagnostic);
    const expected = records.recordChecksum(request.sample_id);
    const location: PayloadLocation = .{
        .sample_id = request.sample_id,
        .shard_id = row.shard_id,
        .offset = head.payload_offset,
        .len = head.payload_len,
        .checksum = if (expected) |checksum|
            record_checksums.expectedTail(checksum, head.checksum, head.payload_len)
        else
            null,
    };
    const defer_bytes = request.defer_payload_bytes;
    if (defer_bytes != 0 and location.len >= defer_bytes) {
        assert(location.len > 0);
        return location;
    }
    const payload_len: usize = @intCast(location.len);
    try output.payload.ensureUnusedCapacity(output.allocator, payload_len);
    const destination = output.payload.unusedCapacitySlice()[0..payload_len];
    try scratch.readShard(records.shards, row.shard_id, destination, location.offset, diagnostic);
    if (expected) |checksum| {
        const actual = record_checksums.extend(head.checksum, destination);
        if (actual != checksum) return record_checksums.mismatch(checksum, actual, diagnostic);
    }
    output.payload.items.len += payload_len;
    return null;
}

/// The whole-record path: the record's bytes (`recordBytes`), checked against
/// its checksum before anything parses them, split, its metadata checked and
/// appended, its payload decoded into `output`.
fn readWhole(
    records: *const Records,
    request: Request,
    row: index_file.Row,
    scratch: *Scratch,
    output: Output,
    diagnostic: *Diagnostic,
) Error!void {
    const record = try recordBytes(records, request, row, scratch, output.allocator, diagnostic);
    assert(record.len == row.record_len);
    if (records.recordChecksum(request.sample_id)) |expected| {
        const actual = record_checksums.ofRecord(record);
        if (actual != expected) return record_checksums.mismatch(expected, actual, diagnostic);
    }
    const compression = records.shards.compression(row.shard_id);
    const parts = try shard_record.split(record, compression, diagnostic);
    // Header, JSON and stored payload lie inside the record.
    assert(shard_record.header_bytes + parts.metadata_json.len + parts.stored_payload.len <=
        record.len);
    try appendMetadata(
        records,
        request.sample_id,
        parts.metadata_json,
        scratch,
        output,
        diagnostic,
    );
    const payload_len: usize = @intCast(parts.payload_len);
    try output.payload.ensureUnusedCapacity(output.allocator, payload_len);
    const destination = output.payload.unusedCapacitySlice()[0..payload_len];
    try shard_record.decodePayload(parts, compression, destination, diagnostic);
    output.payload.items.len += payload_len;
    const items = output.payload.items;
    assert(destination.ptr + destination.len == items.ptr + items.len);
}

/// Checks a record's embedded JSON against the sample's metadata.arrow row,
/// then appends both to `output`. Inline: a call per record costs a few
/// percent of an ordered pass of small records.
inline fn appendMetadata(
    records: *const Records,
    sample_id: u64,
    metadata_json: []const u8,
    scratch: *Scratch,
    output: Output,
    diagnostic: *Diagnostic,
) Error!void {
    assert(sample_id < records.sample_count);
    assert(output.columns.len == records.columns.len);
    try scratch.values.resize(output.allocator, records.columns.len);
    const values = scratch.values.items;
    for (records.columns, values) |column, *value| value.* = column.values.get(@intCast(sample_id));
    metadata_verify.verifyRecord(records.schema, values, metadata_json, diagnostic) catch
        return error.InvalidCache;
    // Verified equal, value for value and kind for kind, to the metadata.arrow
    // row: the embedded text is what the binding decodes.
    const allocator = output.allocator;
    const metadata_len_before = output.metadata_json.items.len;
    try output.metadata_json.appendSlice(allocator, metadata_json);
    assert(output.metadata_json.items.len == metadata_len_before + metadata_json.len);
    for (output.columns, values) |*column, value| try column.append(allocator, value);
}

/// The bytes of `row`'s record. When the next `request.run_samples - 1`
/// samples follow it in the same shard (an ordered pass), their records are
/// read with it in one positional read of at most `run_bytes_max` bytes, and
/// later reads of them find them in `scratch`.
fn recordBytes(
    records: *const Records,
    request: Request,
    row: index_file.Row,
    scratch: *Scratch,
    allocator: std.mem.Allocator,
    diagnostic: *Diagnostic,
) Error![]const u8 {
    if (scratch.recordInRun(records, row)) |record| return record;
    const end = runEnd(records, request, row);
    const len: usize = @intCast(end - row.offset);
    // One record, or a run of them within the read-ahead bound and the shard.
    assert(len == row.record_len or len <= run_bytes_max);
    assert(end <= records.shards.byteLen(row.shard_id));
    scratch.run_records = null; // until the read below succeeds
    scratch.run.clearRetainingCapacity();
    try scratch.run.ensureTotalCapacity(allocator, len);
    const buffer = scratch.run.allocatedSlice()[0..len];
    try scratch.readShard(records.shards, row.shard_id, buffer, row.offset, diagnostic);
    scratch.run.items.len = len;
    scratch.run_records = records;
    scratch.run_shard = row.shard_id;
    scratch.run_offset = row.offset;
    return buffer[0..@intCast(row.record_len)];
}

/// Where the run of records read with `row`'s ends: after the records of the
/// samples the caller reads next that lie back to back with it in its shard,
/// within `run_bytes_max`.
fn runEnd(records: *const Records, request: Request, row: index_file.Row) u64 {
    assert(request.run_samples >= 1);
    const shard_len = records.shards.byteLen(row.shard_id);
    var end = row.offset + row.record_len;
    var next = request.sample_id + 1;
    const last = @min(request.sample_id + request.run_samples, records.sample_count);
    while (next < last) : (next += 1) {
        const following = index_file.decodeRow(records.index_bytes, next);
        if (following.shard_id != row.shard_id or following.offset != end) break;
        const following_end = std.math.add(u64, following.offset, following.record_len) catch break;
        if (following_end - row.offset > run_bytes_max or following_end > shard_len) break;
        end = following_end;
    }
    assert(end >= row.offset + row.record_len and end <= shard_len);
    assert(end - row.offset == row.record_len or end - row.offset <= run_bytes_max);
    return end;
}

/// The lengths of a read's outputs before it: what a failed read restores.
const OutputLens = struct {
    payload: usize,
    metadata_json: usize,
    rows: usize,

    fn of(output: Output) OutputLens {
        return .{
            .payload = output.payload.items.len,
            .metadata_json = output.metadata_json.items.len,
            .rows = if (output.columns.len > 0) output.columns[0].rowCount() else 0,
        };
    }

    fn restore(before: OutputLens, output: Output) void {
        assert(output.payload.items.len >= before.payload);
        assert(output.metadata_json.items.len >= before.metadata_json);
        output.payload.items.len = before.payload;
        output.metadata_json.items.len = before.metadata_json;
        for (output.columns) |*column| column.truncate(before.rows);
    }

    /// After a read: the metadata JSON (an object, so at least "{}") and one
    /// row were appended, and the payload unless `deferred_len` bytes of it
    /// were left in the shard.
    fn assertAppended(before: OutputLens, output: Output, deferred_len: u64) void {
        assert(output.metadata_json.items.len >= before.metadata_json + 2);
        assert(output.payload.items.len >= before.payload);
        if (deferred_len > 0) assert(output.payload.items.len == before.payload);
        // A loop of assertions is compiled out only where they are (ReleaseFast keeps loops).
        if (std.debug.runtime_safety) {
            for (output.columns) |*column| assert(column.rowCount() == before.rows + 1);
        }
    }
};

test {
    _ = @import("record_read_test.zig");
}
