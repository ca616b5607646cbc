//! The Arrow IPC file writer for the sample metadata table (`writeFile`): the schema
//! message, record batches of non-nullable columns, and the footer that lists them.
//! The file layout and the constants the reader shares are in arrow_ipc.zig.
const std = @import("std");
const native_endian = @import("builtin").cpu.arch.endian();
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

const flatbuffers = @import("../codec/flatbuffers.zig");
const arrow_ipc = @import("arrow_ipc.zig");
const magic = arrow_ipc.magic;
const file_header = arrow_ipc.file_header;
const continuation_marker = arrow_ipc.continuation_marker;
const metadata_version_v5 = arrow_ipc.metadata_version_v5;
const header_schema = arrow_ipc.header_schema;
const header_record_batch = arrow_ipc.header_record_batch;
const type_int = arrow_ipc.type_int;
const type_floating_point = arrow_ipc.type_floating_point;
const type_utf8 = arrow_ipc.type_utf8;
const type_bool = arrow_ipc.type_bool;
const precision_double = arrow_ipc.precision_double;
const message_slots = arrow_ipc.message_slots;
const schema_slots = arrow_ipc.schema_slots;
const field_slots = arrow_ipc.field_slots;
const int_slots = arrow_ipc.int_slots;
const floating_point_slots = arrow_ipc.floating_point_slots;
const record_batch_slots = arrow_ipc.record_batch_slots;
const footer_slots = arrow_ipc.footer_slots;
const Block = arrow_ipc.Block;
const metadata_types = @import("metadata_types.zig");
const Column = metadata_types.Column;
const ColumnValues = metadata_types.ColumnValues;

/// Most string bytes one column may hold in one record batch: Utf8 offsets are int32.
const batch_string_bytes_max: u64 = std.math.maxInt(i32);

/// A half-open range of rows.
const Rows = struct {
    start: u64,
    end: u64,

    fn count(rows: Rows) u64 {
        return rows.end - rows.start;
    }
};

pub const WriteError = error{ OutOfMemory, TooLarge };

/// Serializes columns (all of equal row count, in the given order; metadata.arrow
/// passes them sorted by name) as a complete Arrow IPC file.
/// The caller owns the returned bytes. Columns are written non-nullable; a utf8 column
/// whose bytes exceed int32 offsets is split across several record batches, and
/// `error.TooLarge` means a single string (or the metadata) cannot be represented.
pub fn writeFile(allocator: Allocator, columns: []const Column, row_count: u64) WriteError![]u8 {
    return writeFileWithBatchLimit(allocator, columns, row_count, batch_string_bytes_max);
}

/// `writeFile` with a configurable string byte limit per column and batch, so tests
/// can exercise batch splitting without gigabytes of strings.
pub fn writeFileWithBatchLimit(
    allocator: Allocator,
    columns: []const Column,
    row_count: u64,
    string_bytes_max: u64,
) WriteError![]u8 {
    assertColumnsWritable(columns, row_count);
    assert(string_bytes_max > 0 and string_bytes_max <= batch_string_bytes_max);

    var output: std.ArrayList(u8) = .empty;
    errdefer output.deinit(allocator);
    var blocks: std.ArrayList(Block) = .empty;
    defer blocks.deinit(allocator);

    // One allocation for the whole file in the usual case (one record batch), so
    // a large table is not copied while the buffer grows.
    const metadata_bytes_estimate = 4096 + 256 * columns.len;
    try output.ensureTotalCapacityPrecise(
        allocator,
        bodyBytes(columns, .{ .start = 0, .end = row_count }) + metadata_bytes_estimate,
    );
    try output.appendSlice(allocator, file_header);
    try writeSchemaMessage(allocator, &output, columns);

    // Each pass advances by at least one row, or ends the loop when there are none.
    var row_start: u64 = 0;
    while (true) {
        const rows: Rows = .{
            .start = row_start,
            .end = try batchRowsEnd(columns, row_start, row_count, string_bytes_max),
        };
        try blocks.append(
            allocator,
            try writeRecordBatchMessage(allocator, &output, columns, rows),
        );
        row_start = rows.end;
        if (row_start == row_count) break;
    }

    try appendInt(allocator, &output, u32, continuation_marker);
    try appendInt(allocator, &output, u32, 0);
    const footer_start = output.items.len;
    try writeFooter(allocator, &output, columns, blocks.items);
    const footer_length = std.math.cast(i32, output.items.len - footer_start) orelse
        return error.TooLarge;
    try appendInt(allocator, &output, i32, footer_length);
    try output.appendSlice(allocator, magic);
    return output.toOwnedSlice(allocator);
}

fn assertColumnsWritable(columns: []const Column, row_count: u64) void {
    for (columns) |column| {
        assert(column.values.rowCount() == row_count);
        switch (column.values) {
            .string => |strings| {
                assert(strings.offsets.len == row_count + 1);
                assert(strings.offsets[strings.offsets.len - 1] <= strings.bytes.len);
            },
            else => {},
        }
    }
}

/// The end of the batch starting at `row_start`: as many rows as fit every
/// string column's byte limit.
fn batchRowsEnd(
    columns: []const Column,
    row_start: u64,
    row_count: u64,
    string_bytes_max: u64,
) WriteError!u64 {
    var row_end = row_count;
    for (columns) |column| switch (column.values) {
        .string => |strings| row_end = @min(
            row_end,
            stringRowsEnd(strings.offsets, row_start, string_bytes_max),
        ),
        else => {},
    };
    // A single string longer than int32 offsets allow cannot be written at all.
    if (row_end == row_start and row_start < row_count) return error.TooLarge;
    return row_end;
}

/// The largest `end` with offsets[end] - offsets[start] <= bytes_max; offsets ascend.
fn stringRowsEnd(offsets: []const u64, row_start: u64, bytes_max: u64) u64 {
    const start: usize = @intCast(row_start);
    const base = offsets[start];
    var low: usize = start;
    var high: usize = offsets.len - 1;
    while (low < high) {
        const middle = low + (high - low + 1) / 2;
        if (offsets[middle] - base <= bytes_max) low = middle else high = middle - 1;
    }
    return low;
}

pub fn appendInt(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    comptime T: type,
    value: T,
) Allocator.Error!void {
    std.mem.writeInt(T, try output.addManyAsArray(allocator, @sizeOf(T)), value, .little);
}

fn padOutput(allocator: Allocator, output: *std.ArrayList(u8)) Allocator.Error!void {
    try output.ensureUnusedCapacity(allocator, 7);
    padOutputAssumeCapacity(output);
}

/// Writes the continuation marker and a placeholder metadata length; returns the
/// message's offset for `finishMessage`.
pub fn beginMessage(allocator: Allocator, output: *std.ArrayList(u8)) Allocator.Error!u64 {
    assert(output.items.len % 8 == 0);
    const message_offset = output.items.len;
    try appendInt(allocator, output, u32, continuation_marker);
    try appendInt(allocator, output, i32, 0);
    return message_offset;
}

/// Pads the flatbuffer so the body starts 8-aligned, fills in the metadata length
/// and returns the metadata size the footer's Block records (prefix included).
pub fn finishMessage(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    message_offset: u64,
) WriteError!u32 {
    try padOutput(allocator, output);
    const metadata_bytes = output.items.len - message_offset;
    if (metadata_bytes > flatbuffers.buffer_bytes_max) return error.TooLarge;
    const length_field = output.items[@intCast(message_offset + 4)..][0..4];
    std.mem.writeInt(i32, length_field, @intCast(metadata_bytes - 8), .little);
    return @intCast(metadata_bytes);
}

/// Writes the root Message table; returns the slot of its header uoffset.
pub fn writeMessageTable(
    builder: *flatbuffers.Builder,
    header_type: u8,
    body_bytes: u64,
) WriteError!u32 {
    const message = try builder.table(&.{
        .{ .slot = message_slots.version, .value = .{ .short = metadata_version_v5 } },
        .{ .slot = message_slots.header_type, .value = .{ .byte = header_type } },
        .{ .slot = message_slots.header, .value = .offset },
        .{ .slot = message_slots.body_length, .value = .{ .long = @intCast(body_bytes) } },
    });
    builder.patch(0, message.position);
    return message.offsetSlot(message_slots.header);
}

fn writeSchemaMessage(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    columns: []const Column,
) WriteError!void {
    const message_offset = try beginMessage(allocator, output);
    var builder: flatbuffers.Builder = try .init(allocator, output);
    const header_slot = try writeMessageTable(&builder, header_schema, 0);
    builder.patch(header_slot, try writeSchema(&builder, columns));
    _ = try finishMessage(allocator, output, message_offset);
}

/// Writes a Schema table (shared by the schema message and the footer).
fn writeSchema(builder: *flatbuffers.Builder, columns: []const Column) WriteError!u32 {
    const field_count = std.math.cast(u32, columns.len) orelse return error.TooLarge;
    const schema = try builder.table(&.{
        .{ .slot = schema_slots.endianness, .value = .{ .short = 0 } },
        .{ .slot = schema_slots.fields, .value = .offset },
    });
    const fields = try builder.offsetVector(field_count);
    builder.patch(schema.offsetSlot(schema_slots.fields), fields);
    for (columns, 0..) |column, index| {
        const element_slot: u32 = @intCast(fields + 4 + 4 * index);
        builder.patch(element_slot, try writeField(builder, column));
    }
    return schema.position;
}

fn writeField(builder: *flatbuffers.Builder, column: Column) WriteError!u32 {
    const field = try builder.table(&.{
        .{ .slot = field_slots.name, .value = .offset },
        .{ .slot = field_slots.nullable, .value = .{ .byte = 0 } },
        .{ .slot = field_slots.type_type, .value = .{ .byte = typeTag(column.values) } },
        .{ .slot = field_slots.type_table, .value = .offset },
        .{ .slot = field_slots.children, .value = .offset },
    });
    builder.patch(field.offsetSlot(field_slots.name), try builder.string(column.name));
    builder.patch(field.offsetSlot(field_slots.type_table), try writeType(builder, column.values));
    // Arrow C++ rejects a Field without a children vector, even an empty one.
    builder.patch(field.offsetSlot(field_slots.children), try builder.offsetVector(0));
    return field.position;
}

fn typeTag(values: ColumnValues) u8 {
    return switch (values) {
        .bool => type_bool,
        .int => type_int,
        .float => type_floating_point,
        .string => type_utf8,
    };
}

fn writeType(builder: *flatbuffers.Builder, values: ColumnValues) WriteError!u32 {
    const placed = switch (values) {
        .bool, .string => try builder.table(&.{}),
        .int => try builder.table(&.{
            .{ .slot = int_slots.bit_width, .value = .{ .int = 64 } },
            .{ .slot = int_slots.is_signed, .value = .{ .byte = 1 } },
        }),
        .float => try builder.table(&.{
            .{ .slot = floating_point_slots.precision, .value = .{ .short = precision_double } },
        }),
    };
    return placed.position;
}

/// Lengths of a column's data buffers in one batch (the validity buffer is always empty).
const DataBuffers = struct {
    count: u8,
    lengths: [2]u64,

    fn of(values: ColumnValues, rows: Rows) DataBuffers {
        const row_count = rows.count();
        return switch (values) {
            .bool => .{ .count = 1, .lengths = .{ (row_count + 7) / 8, 0 } },
            .int, .float => .{ .count = 1, .lengths = .{ row_count * 8, 0 } },
            .string => |strings| .{ .count = 2, .lengths = .{
                (row_count + 1) * 4,
                strings.offsets[@intCast(rows.end)] - strings.offsets[@intCast(rows.start)],
            } },
        };
    }

    fn slice(buffers: *const DataBuffers) []const u64 {
        return buffers.lengths[0..buffers.count];
    }
};

fn bodyBytes(columns: []const Column, rows: Rows) u64 {
    var total: u64 = 0;
    for (columns) |column| {
        const buffers: DataBuffers = .of(column.values, rows);
        for (buffers.slice()) |length| total += std.mem.alignForward(u64, length, 8);
    }
    return total;
}

fn writeRecordBatchMessage(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    columns: []const Column,
    rows: Rows,
) WriteError!Block {
    const body_bytes = bodyBytes(columns, rows);
    const message_offset = try beginMessage(allocator, output);
    var builder: flatbuffers.Builder = try .init(allocator, output);
    const header_slot = try writeMessageTable(&builder, header_record_batch, body_bytes);
    builder.patch(header_slot, try writeRecordBatch(&builder, columns, rows));
    const metadata_bytes = try finishMessage(allocator, output, message_offset);

    const body_start = output.items.len;
    try output.ensureUnusedCapacity(allocator, @intCast(body_bytes));
    for (columns) |column| writeColumnBody(output, column.values, rows);
    assert(output.items.len - body_start == body_bytes);
    return .{
        .offset = message_offset,
        .metadata_bytes = metadata_bytes,
        .body_bytes = body_bytes,
    };
}

/// Writes the RecordBatch table: one FieldNode per column, then a zero-length
/// validity buffer and the data buffers of each column, in body order.
fn writeRecordBatch(
    builder: *flatbuffers.Builder,
    columns: []const Column,
    rows: Rows,
) WriteError!u32 {
    const node_count = std.math.cast(u32, columns.len) orelse return error.TooLarge;
    var buffer_count: u64 = 0;
    for (columns) |column| buffer_count += 1 + DataBuffers.of(column.values, rows).count;

    const batch = try builder.table(&.{
        .{ .slot = record_batch_slots.length, .value = .{ .long = @intCast(rows.count()) } },
        .{ .slot = record_batch_slots.nodes, .value = .offset },
        .{ .slot = record_batch_slots.buffers, .value = .offset },
    });
    const nodes = try builder.structVector(node_count);
    for (columns) |_| {
        try builder.int(i64, @intCast(rows.count()));
        try builder.int(i64, 0);
    }
    builder.patch(batch.offsetSlot(record_batch_slots.nodes), nodes);

    const buffers = try builder.structVector(
        std.math.cast(u32, buffer_count) orelse return error.TooLarge,
    );
    var body_offset: u64 = 0;
    for (columns) |column| {
        try builder.int(i64, @intCast(body_offset));
        try builder.int(i64, 0);
        const data_buffers: DataBuffers = .of(column.values, rows);
        for (data_buffers.slice()) |length| {
            try builder.int(i64, @intCast(body_offset));
            try builder.int(i64, @intCast(length));
            body_offset += std.mem.alignForward(u64, length, 8);
        }
    }
    builder.patch(batch.offsetSlot(record_batch_slots.buffers), buffers);
    return batch.position;
}

/// Appends a column's data buffers for `rows`, each padded with zeros to 8 bytes,
/// into capacity the caller reserved (`bodyBytes`).
fn writeColumnBody(output: *std.ArrayList(u8), values: ColumnValues, rows: Rows) void {
    const start: usize = @intCast(rows.start);
    const end: usize = @intCast(rows.end);
    switch (values) {
        .bool => |bytes| {
            // Arrow packs booleans eight to a byte, least significant bit first.
            const packed_bytes = output.addManyAsSliceAssumeCapacity((end - start + 7) / 8);
            @memset(packed_bytes, 0);
            for (bytes[start..end], 0..) |value, index| {
                assert(value <= 1);
                packed_bytes[index / 8] |= @as(u8, value) << @intCast(index % 8);
            }
        },
        .int => |integers| appendLittleEndian(output, i64, integers[start..end]),
        .float => |floats| appendLittleEndian(output, f64, floats[start..end]),
        .string => |strings| {
            const base = strings.offsets[start];
            const offsets = output.addManyAsSliceAssumeCapacity((end - start + 1) * 4);
            for (strings.offsets[start .. end + 1], 0..) |offset, index| {
                std.mem.writeInt(
                    i32,
                    offsets[index * 4 ..][0..4],
                    @intCast(offset - base),
                    .little,
                );
            }
            padOutputAssumeCapacity(output);
            output.appendSliceAssumeCapacity(
                strings.bytes[@intCast(base)..@intCast(strings.offsets[end])],
            );
        },
    }
    padOutputAssumeCapacity(output);
}

/// 8-byte numbers as Arrow stores them; a plain copy on little-endian hosts.
fn appendLittleEndian(output: *std.ArrayList(u8), comptime T: type, values: []const T) void {
    const bytes = output.addManyAsSliceAssumeCapacity(values.len * 8);
    if (native_endian == .little) {
        @memcpy(bytes, std.mem.sliceAsBytes(values));
    } else for (values, 0..) |value, index| {
        std.mem.writeInt(u64, bytes[index * 8 ..][0..8], @bitCast(value), .little);
    }
}

fn padOutputAssumeCapacity(output: *std.ArrayList(u8)) void {
    const padding = std.mem.alignForward(usize, output.items.len, 8) - output.items.len;
    output.appendNTimesAssumeCapacity(0, padding);
}

fn writeFooter(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    columns: []const Column,
    blocks: []const Block,
) WriteError!void {
    const block_count = std.math.cast(u32, blocks.len) orelse return error.TooLarge;
    var builder: flatbuffers.Builder = try .init(allocator, output);
    const footer = try builder.table(&.{
        .{ .slot = footer_slots.version, .value = .{ .short = metadata_version_v5 } },
        .{ .slot = footer_slots.schema, .value = .offset },
        .{ .slot = footer_slots.dictionaries, .value = .offset },
        .{ .slot = footer_slots.record_batches, .value = .offset },
    });
    builder.patch(0, footer.position);
    builder.patch(footer.offsetSlot(footer_slots.schema), try writeSchema(&builder, columns));
    builder.patch(footer.offsetSlot(footer_slots.dictionaries), try builder.structVector(0));
    const record_batches = try builder.structVector(block_count);
    for (blocks) |block| {
        try builder.int(i64, @intCast(block.offset));
        try builder.int(i32, @intCast(block.metadata_bytes));
        try builder.int(i32, 0);
        try builder.int(i64, @intCast(block.body_bytes));
    }
    builder.patch(footer.offsetSlot(footer_slots.record_batches), record_batches);
}

const testing = std.testing;

test "bools are bit-packed least significant bit first and padded with zeros" {
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    const bools = [_]u8{ 1, 0, 0, 0, 0, 0, 0, 0, 1, 1 };
    const values: ColumnValues = .{ .bool = &bools };
    const rows: Rows = .{ .start = 0, .end = bools.len };
    try output.ensureUnusedCapacity(
        testing.allocator,
        @intCast(bodyBytes(&.{.{ .name = "b", .values = values }}, rows)),
    );
    writeColumnBody(&output, values, rows);
    try testing.expectEqualSlices(u8, &.{ 0x01, 0x03, 0, 0, 0, 0, 0, 0 }, output.items);
}
