//! Arrow IPC *file* format ("ARROW1") for the sample metadata table: one row per
//! sample, non-nullable columns of bool, int64, float64 and utf8.
//!
//! File layout (Arrow columnar format, "IPC File Format"):
//!   "ARROW1" + 2 zero bytes
//!   schema message, record batch messages      (the IPC stream)
//!   0xFFFFFFFF 0x00000000                       (end of stream)
//!   Footer flatbuffer, int32 footer length, "ARROW1"
//! Each message is 0xFFFFFFFF, an int32 metadata length (padded so the body starts
//! 8-aligned), a Message flatbuffer, then the body holding the column buffers.
//!
//! The reader treats the file as hostile (it may come from any Arrow writer or
//! from a damaged disk): every offset, length and count is checked before use.
const std = @import("std");
const native_endian = @import("builtin").cpu.arch.endian();
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const flatbuffers = @import("../codec/flatbuffers.zig");
const metadata_types = @import("metadata_types.zig");
const Column = metadata_types.Column;
const ColumnValues = metadata_types.ColumnValues;
const Kind = metadata_types.Kind;

const magic = "ARROW1";
/// The leading magic is padded to 8 bytes so the first message is 8-aligned.
const file_header = magic ++ "\x00\x00";
/// Footer length (int32) and magic after the footer.
const file_trailer_bytes = 4 + magic.len;
const continuation_marker: u32 = 0xFFFF_FFFF;

/// MetadataVersion (Schema.fbs): V4 is Arrow 0.8 to 0.17, V5 is Arrow 1.0 and later;
/// the two differ only in union layout, which this reader never sees.
const metadata_version_v4: i16 = 3;
const metadata_version_v5: i16 = 4;

/// MessageHeader union tags (Message.fbs).
const header_schema: u8 = 1;
const header_record_batch: u8 = 3;

/// Type union tags (Schema.fbs), indexes into `type_names`.
const type_int: u8 = 2;
const type_floating_point: u8 = 3;
const type_utf8: u8 = 5;
const type_bool: u8 = 6;
const type_large_utf8: u8 = 20;
const type_names = [_][]const u8{
    "NONE",     "Null",        "Int",           "FloatingPoint",   "Binary",        "Utf8",
    "Bool",     "Decimal",     "Date",          "Time",            "Timestamp",     "Interval",
    "List",     "Struct",      "Union",         "FixedSizeBinary", "FixedSizeList", "Map",
    "Duration", "LargeBinary", "LargeUtf8",     "LargeList",       "RunEndEncoded", "BinaryView",
    "Utf8View", "ListView",    "LargeListView",
};

/// Precision enum of FloatingPoint.
const precision_double: i16 = 2;

/// Vtable slots of the tables used, in declaration order of the .fbs files. A
/// union takes two slots: its type tag, then the uoffset of its value.
const message_slots = struct {
    const version: u16 = 0;
    const header_type: u16 = 1;
    const header: u16 = 2;
    const body_length: u16 = 3;
};
const schema_slots = struct {
    const endianness: u16 = 0;
    const fields: u16 = 1;
};
const field_slots = struct {
    const name: u16 = 0;
    const nullable: u16 = 1;
    const type_type: u16 = 2;
    const type_table: u16 = 3;
    const dictionary: u16 = 4;
    const children: u16 = 5;
};
const int_slots = struct {
    const bit_width: u16 = 0;
    const is_signed: u16 = 1;
};
const floating_point_slots = struct {
    const precision: u16 = 0;
};
const record_batch_slots = struct {
    const length: u16 = 0;
    const nodes: u16 = 1;
    const buffers: u16 = 2;
    const compression: u16 = 3;
};
const footer_slots = struct {
    const version: u16 = 0;
    const schema: u16 = 1;
    const dictionaries: u16 = 2;
    const record_batches: u16 = 3;
};

/// Struct sizes: FieldNode {int64 length, int64 null_count}, Buffer {int64 offset,
/// int64 length}, Block {int64 offset, int32 metaDataLength, 4 padding, int64 bodyLength}.
const field_node_bytes = 16;
const buffer_bytes = 16;
const block_bytes = 24;

/// Most string bytes one column may hold in one record batch: Utf8 offsets are int32.
const batch_string_bytes_max: u64 = std.math.maxInt(i32);

/// One record batch's place in the file, as the footer lists it.
const Block = struct {
    offset: u64,
    /// Prefix, flatbuffer and padding: everything before the body.
    metadata_bytes: u32,
    body_bytes: u64,
};

/// A half-open range of rows.
const Rows = struct {
    start: u64,
    end: u64,

    fn count(rows: Rows) u64 {
        return rows.end - rows.start;
    }
};

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

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
fn writeFileWithBatchLimit(
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
    try output.ensureTotalCapacityPrecise(allocator, bodyBytes(columns, .{ .start = 0, .end = row_count }) + metadata_bytes_estimate);
    try output.appendSlice(allocator, file_header);
    try writeSchemaMessage(allocator, &output, columns);

    // Each pass advances by at least one row, or ends the loop when there are none.
    var row_start: u64 = 0;
    while (true) {
        const rows: Rows = .{
            .start = row_start,
            .end = try batchRowsEnd(columns, row_start, row_count, string_bytes_max),
        };
        try blocks.append(allocator, try writeRecordBatchMessage(allocator, &output, columns, rows));
        row_start = rows.end;
        if (row_start == row_count) break;
    }

    try appendInt(allocator, &output, u32, continuation_marker);
    try appendInt(allocator, &output, u32, 0);
    const footer_start = output.items.len;
    try writeFooter(allocator, &output, columns, blocks.items);
    const footer_length = std.math.cast(i32, output.items.len - footer_start) orelse return error.TooLarge;
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
fn batchRowsEnd(columns: []const Column, row_start: u64, row_count: u64, string_bytes_max: u64) WriteError!u64 {
    var row_end = row_count;
    for (columns) |column| switch (column.values) {
        .string => |strings| row_end = @min(row_end, stringRowsEnd(strings.offsets, row_start, string_bytes_max)),
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

fn appendInt(allocator: Allocator, output: *std.ArrayList(u8), comptime T: type, value: T) Allocator.Error!void {
    std.mem.writeInt(T, try output.addManyAsArray(allocator, @sizeOf(T)), value, .little);
}

fn padOutput(allocator: Allocator, output: *std.ArrayList(u8)) Allocator.Error!void {
    try output.ensureUnusedCapacity(allocator, 7);
    padOutputAssumeCapacity(output);
}

/// Writes the continuation marker and a placeholder metadata length; returns the
/// message's offset for `finishMessage`.
fn beginMessage(allocator: Allocator, output: *std.ArrayList(u8)) Allocator.Error!u64 {
    assert(output.items.len % 8 == 0);
    const message_offset = output.items.len;
    try appendInt(allocator, output, u32, continuation_marker);
    try appendInt(allocator, output, i32, 0);
    return message_offset;
}

/// Pads the flatbuffer so the body starts 8-aligned, fills in the metadata length
/// and returns the metadata size the footer's Block records (prefix included).
fn finishMessage(allocator: Allocator, output: *std.ArrayList(u8), message_offset: u64) WriteError!u32 {
    try padOutput(allocator, output);
    const metadata_bytes = output.items.len - message_offset;
    if (metadata_bytes > flatbuffers.buffer_bytes_max) return error.TooLarge;
    const length_field = output.items[@intCast(message_offset + 4)..][0..4];
    std.mem.writeInt(i32, length_field, @intCast(metadata_bytes - 8), .little);
    return @intCast(metadata_bytes);
}

/// Writes the root Message table; returns the slot of its header uoffset.
fn writeMessageTable(builder: *flatbuffers.Builder, header_type: u8, body_bytes: u64) WriteError!u32 {
    const message = try builder.table(&.{
        .{ .slot = message_slots.version, .value = .{ .short = metadata_version_v5 } },
        .{ .slot = message_slots.header_type, .value = .{ .byte = header_type } },
        .{ .slot = message_slots.header, .value = .offset },
        .{ .slot = message_slots.body_length, .value = .{ .long = @intCast(body_bytes) } },
    });
    builder.patch(0, message.position);
    return message.offsetSlot(message_slots.header);
}

fn writeSchemaMessage(allocator: Allocator, output: *std.ArrayList(u8), columns: []const Column) WriteError!void {
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
    return .{ .offset = message_offset, .metadata_bytes = metadata_bytes, .body_bytes = body_bytes };
}

/// Writes the RecordBatch table: one FieldNode per column, then a zero-length
/// validity buffer and the data buffers of each column, in body order.
fn writeRecordBatch(builder: *flatbuffers.Builder, columns: []const Column, rows: Rows) WriteError!u32 {
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

    const buffers = try builder.structVector(std.math.cast(u32, buffer_count) orelse return error.TooLarge);
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
                std.mem.writeInt(i32, offsets[index * 4 ..][0..4], @intCast(offset - base), .little);
            }
            padOutputAssumeCapacity(output);
            output.appendSliceAssumeCapacity(strings.bytes[@intCast(base)..@intCast(strings.offsets[end])]);
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

// ---------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------

/// A metadata table read from an Arrow IPC file.
pub const Table = struct {
    row_count: u64,
    /// In file order as written; the caller checks names and order against the manifest.
    columns: []Column,
    /// Owns all memory: the column array, names and values.
    arena: std.heap.ArenaAllocator,

    /// Frees everything the table holds.
    pub fn deinit(table: *Table) void {
        table.arena.deinit();
        table.* = undefined;
    }
};

pub const ReadError = error{ OutOfMemory, InvalidArrow, UnsupportedArrow };

/// Parses a complete Arrow IPC file. Concatenates several record batches into one column each.
/// `error.InvalidArrow` means the bytes are not a well-formed Arrow file,
/// `error.UnsupportedArrow` a well-formed one outside the metadata subset (other types,
/// nulls, dictionaries, compression, big-endian); `diagnostic` says which and where.
pub fn readFile(allocator: Allocator, bytes: []const u8, diagnostic: *Diagnostic) ReadError!Table {
    var arena: std.heap.ArenaAllocator = .init(allocator);
    errdefer arena.deinit();
    const contents = readContents(allocator, arena.allocator(), bytes, diagnostic) catch |err| return switch (err) {
        error.InvalidFlatbuffer => error.InvalidArrow,
        else => |other| other,
    };
    return .{ .row_count = contents.row_count, .columns = contents.columns, .arena = arena };
}

/// How a supported field's values are laid out in a record batch body.
const Layout = enum {
    bool,
    int64,
    float64,
    utf8,
    large_utf8,

    fn kind(layout: Layout) Kind {
        return switch (layout) {
            .bool => .bool,
            .int64 => .int,
            .float64 => .float,
            .utf8, .large_utf8 => .string,
        };
    }

    /// Validity buffer plus data buffers.
    fn bufferCount(layout: Layout) u64 {
        return switch (layout) {
            .bool, .int64, .float64 => 2,
            .utf8, .large_utf8 => 3,
        };
    }
};

const SchemaField = struct {
    /// Borrowed from the file bytes until the columns are assembled.
    name: []const u8,
    layout: Layout,
};

/// One column's validated buffers in one record batch.
const Chunk = struct {
    row_count: u64,
    /// Bit-packed bools, little-endian 8-byte numbers, or string bytes.
    values: []const u8,
    /// String offsets (int32 or int64 per the layout); empty for other layouts and
    /// for a string chunk of zero rows.
    offsets: []const u8,
    /// Bytes the strings span, offsets[last] - offsets[0].
    string_bytes: u64,
};

const Footer = struct {
    schema: flatbuffers.Table,
    record_batches: ?flatbuffers.Vector,
    /// Messages must end before the footer.
    data_end: u64,
};

const Contents = struct {
    row_count: u64,
    columns: []Column,
};

fn invalid(diagnostic: *Diagnostic, comptime format: []const u8, args: anytype) error{InvalidArrow} {
    diagnostic.set(format, args);
    return error.InvalidArrow;
}

fn unsupported(diagnostic: *Diagnostic, comptime format: []const u8, args: anytype) error{UnsupportedArrow} {
    diagnostic.set(format, args);
    return error.UnsupportedArrow;
}

/// Validates all metadata and buffers first (pass one), then copies the values
/// into exactly sized columns (pass two).
fn readContents(allocator: Allocator, arena: Allocator, bytes: []const u8, diagnostic: *Diagnostic) !Contents {
    const footer = try readFooter(bytes, diagnostic);
    const fields = try readSchema(allocator, footer.schema, diagnostic);
    defer allocator.free(fields);

    var chunks: std.ArrayList(Chunk) = .empty;
    defer chunks.deinit(allocator);
    const row_count = try readRecordBatches(allocator, bytes, footer, fields, &chunks, diagnostic);
    return .{
        .row_count = row_count,
        .columns = try assembleColumns(arena, fields, chunks.items, row_count),
    };
}

fn readFooter(bytes: []const u8, diagnostic: *Diagnostic) !Footer {
    if (bytes.len < file_header.len + file_trailer_bytes) {
        return invalid(diagnostic, "file of {d} bytes is too short for an Arrow IPC file (truncated?)", .{bytes.len});
    }
    if (!std.mem.eql(u8, bytes[0..magic.len], magic)) {
        return invalid(diagnostic, "missing 'ARROW1' magic at the start; not an Arrow IPC file", .{});
    }
    if (!std.mem.eql(u8, bytes[bytes.len - magic.len ..], magic)) {
        return invalid(diagnostic, "missing 'ARROW1' magic at the end; the file is truncated or not an Arrow IPC file", .{});
    }
    const footer_end = bytes.len - file_trailer_bytes;
    const footer_length = std.mem.readInt(i32, bytes[footer_end..][0..4], .little);
    if (footer_length <= 0 or footer_length > footer_end - file_header.len) {
        return invalid(diagnostic, "footer length {d} does not fit the {d}-byte file", .{ footer_length, bytes.len });
    }
    const footer_start = footer_end - @as(usize, @intCast(footer_length));
    const reader: flatbuffers.Reader = .{
        .bytes = bytes[footer_start..footer_end],
        .diagnostic = diagnostic,
        .context = "footer",
    };
    const root = try reader.root();
    try checkVersion(try root.scalar(i16, footer_slots.version, 0), "footer", diagnostic);
    return .{
        .schema = try root.child(footer_slots.schema) orelse return invalid(diagnostic, "footer has no schema", .{}),
        .record_batches = try root.vector(footer_slots.record_batches, block_bytes),
        .data_end = footer_start,
    };
}

fn checkVersion(version: i16, context: []const u8, diagnostic: *Diagnostic) !void {
    if (version == metadata_version_v4 or version == metadata_version_v5) return;
    return unsupported(diagnostic, "{s} has Arrow metadata version {d}; expected V4 or V5 (Arrow 0.8 or later)", .{
        context, @as(i32, version) + 1,
    });
}

fn readSchema(allocator: Allocator, schema: flatbuffers.Table, diagnostic: *Diagnostic) ![]SchemaField {
    if (try schema.scalar(i16, schema_slots.endianness, 0) != 0) {
        return unsupported(diagnostic, "big-endian Arrow files are not supported", .{});
    }
    const field_tables = try schema.vector(schema_slots.fields, 4) orelse return &.{};
    // A u32 vector length cannot exceed 2^32 - 1 columns, and each column needs a
    // 4-byte uoffset in the file, so the allocation is bounded by the file size.
    const fields = try allocator.alloc(SchemaField, field_tables.len);
    errdefer allocator.free(fields);
    for (fields, 0..) |*field, index| {
        field.* = try readField(try field_tables.table(@intCast(index)), index, diagnostic);
    }
    return fields;
}

fn readField(field: flatbuffers.Table, index: usize, diagnostic: *Diagnostic) !SchemaField {
    const name = try field.string(field_slots.name) orelse "";
    if (!std.unicode.utf8ValidateSlice(name)) {
        return invalid(diagnostic, "column {d} has a name that is not valid UTF-8", .{index});
    }
    if (try field.has(field_slots.dictionary)) {
        return unsupported(diagnostic, "column '{f}' is dictionary-encoded; expected plain bool, int64, float64 or utf8", .{Excerpt.ofName(name)});
    }
    const layout = try readLayout(field, name, diagnostic);
    if (try field.vector(field_slots.children, 4)) |children| {
        if (children.len != 0) {
            return invalid(diagnostic, "column '{f}' of a primitive type has {d} children", .{ Excerpt.ofName(name), children.len });
        }
    }
    return .{ .name = name, .layout = layout };
}

fn readLayout(field: flatbuffers.Table, name: []const u8, diagnostic: *Diagnostic) !Layout {
    const tag = try field.scalar(u8, field_slots.type_type, 0);
    switch (tag) {
        type_bool => return .bool,
        type_utf8 => return .utf8,
        type_large_utf8 => return .large_utf8,
        type_int => {
            const int = try field.child(field_slots.type_table) orelse {
                return invalid(diagnostic, "column '{f}' has type Int without its parameters", .{Excerpt.ofName(name)});
            };
            const bit_width = try int.scalar(i32, int_slots.bit_width, 0);
            const signed = try int.scalar(u8, int_slots.is_signed, 0) != 0;
            if (bit_width == 64 and signed) return .int64;
            return unsupportedType(diagnostic, name, "{s}{d}", .{ if (signed) "Int" else "UInt", bit_width });
        },
        type_floating_point => {
            const floating_point = try field.child(field_slots.type_table) orelse {
                return invalid(diagnostic, "column '{f}' has type FloatingPoint without its parameters", .{Excerpt.ofName(name)});
            };
            const precision = try floating_point.scalar(i16, floating_point_slots.precision, 0);
            if (precision == precision_double) return .float64;
            const bits: i32 = switch (precision) {
                0 => 16,
                1 => 32,
                else => return invalid(diagnostic, "column '{f}' has unknown float precision {d}", .{ Excerpt.ofName(name), precision }),
            };
            return unsupportedType(diagnostic, name, "Float{d}", .{bits});
        },
        0 => return invalid(diagnostic, "column '{f}' has no type", .{Excerpt.ofName(name)}),
        else => {
            if (tag < type_names.len) return unsupportedType(diagnostic, name, "{s}", .{type_names[tag]});
            return unsupportedType(diagnostic, name, "with type tag {d}", .{tag});
        },
    }
}

fn unsupportedType(
    diagnostic: *Diagnostic,
    name: []const u8,
    comptime type_format: []const u8,
    type_args: anytype,
) error{UnsupportedArrow} {
    return unsupported(
        diagnostic,
        "column '{f}' has unsupported Arrow type " ++ type_format ++ "; expected bool, int64, float64 or utf8",
        .{Excerpt.ofName(name)} ++ type_args,
    );
}

/// Validates every record batch the footer lists, appending one chunk per column
/// and batch to `chunks`; returns the total row count.
fn readRecordBatches(
    allocator: Allocator,
    bytes: []const u8,
    footer: Footer,
    fields: []const SchemaField,
    chunks: *std.ArrayList(Chunk),
    diagnostic: *Diagnostic,
) !u64 {
    const blocks = footer.record_batches orelse return 0;
    var row_count: u64 = 0;
    // Blocks must be in file order without overlap: this bounds the total work
    // by the file size even when a hostile footer lists many blocks.
    var previous_end: u64 = file_header.len;
    for (0..blocks.len) |batch_index| {
        const block = try readBlock(blocks.element(@intCast(batch_index)), batch_index, previous_end, footer.data_end, diagnostic);
        previous_end = block.offset + block.metadata_bytes + block.body_bytes;
        const batch_rows = try readRecordBatch(allocator, bytes, block, batch_index, fields, chunks, diagnostic);
        row_count = std.math.add(u64, row_count, batch_rows) catch {
            return invalid(diagnostic, "the record batches' row counts overflow 64 bits", .{});
        };
    }
    return row_count;
}

fn readBlock(element: []const u8, batch_index: usize, previous_end: u64, data_end: u64, diagnostic: *Diagnostic) !Block {
    const offset = flatbuffers.structField(i64, element, 0);
    const metadata_bytes = flatbuffers.structField(i32, element, 8);
    const body_bytes = flatbuffers.structField(i64, element, 16);
    if (offset < 0 or metadata_bytes <= 0 or body_bytes < 0) {
        return invalid(diagnostic, "footer block {d} is invalid (offset {d}, metadata {d} bytes, body {d} bytes)", .{
            batch_index, offset, metadata_bytes, body_bytes,
        });
    }
    const block: Block = .{
        .offset = @intCast(offset),
        .metadata_bytes = @intCast(metadata_bytes),
        .body_bytes = @intCast(body_bytes),
    };
    // offset and body_bytes are below 2^63 and metadata_bytes below 2^31: no u64 overflow.
    const end = block.offset + block.metadata_bytes + block.body_bytes;
    if (block.offset < previous_end) {
        return invalid(diagnostic, "footer block {d} at offset {d} overlaps the file header or the previous block", .{
            batch_index, block.offset,
        });
    }
    if (end > data_end) {
        return invalid(diagnostic, "footer block {d} (bytes {d}..{d}) extends past the data, which ends at {d}", .{
            batch_index, block.offset, end, data_end,
        });
    }
    return block;
}

/// The Message flatbuffer framed at the start of a block: 0xFFFFFFFF and an int32
/// length, or (before Arrow 0.15) just the int32 length.
fn messageFlatbuffer(bytes: []const u8, block: Block, batch_index: usize, diagnostic: *Diagnostic) ![]const u8 {
    const region = bytes[@intCast(block.offset)..][0..block.metadata_bytes];
    if (region.len < 4) {
        return invalid(diagnostic, "record batch {d}: {d}-byte metadata block is too short", .{ batch_index, region.len });
    }
    const prefix_bytes: usize = if (std.mem.readInt(u32, region[0..4], .little) == continuation_marker) 8 else 4;
    if (region.len < prefix_bytes) {
        return invalid(diagnostic, "record batch {d}: {d}-byte metadata block is too short", .{ batch_index, region.len });
    }
    const length = std.mem.readInt(i32, region[prefix_bytes - 4 ..][0..4], .little);
    if (length <= 0 or length > region.len - prefix_bytes) {
        return invalid(diagnostic, "record batch {d}: metadata length {d} does not fit its {d}-byte block", .{
            batch_index, length, region.len,
        });
    }
    return region[prefix_bytes..][0..@intCast(length)];
}

/// The parts of one record batch every column's reading needs.
const BatchContext = struct {
    batch_index: usize,
    row_count: u64,
    body: []const u8,
    nodes: flatbuffers.Vector,
    buffers: flatbuffers.Vector,
    diagnostic: *Diagnostic,
};

fn readRecordBatch(
    allocator: Allocator,
    bytes: []const u8,
    block: Block,
    batch_index: usize,
    fields: []const SchemaField,
    chunks: *std.ArrayList(Chunk),
    diagnostic: *Diagnostic,
) !u64 {
    var context_buffer: [64]u8 = undefined;
    const reader: flatbuffers.Reader = .{
        .bytes = try messageFlatbuffer(bytes, block, batch_index, diagnostic),
        .diagnostic = diagnostic,
        .context = std.fmt.bufPrint(&context_buffer, "record batch {d} metadata", .{batch_index}) catch unreachable,
    };
    const batch = try readBatchHeader(reader, block, batch_index);
    const length = try batch.scalar(i64, record_batch_slots.length, 0);
    if (length < 0) return invalid(diagnostic, "record batch {d} has negative length {d}", .{ batch_index, length });

    const body_start: usize = @intCast(block.offset + block.metadata_bytes);
    const context: BatchContext = .{
        .batch_index = batch_index,
        .row_count = @intCast(length),
        .body = bytes[body_start..][0..@intCast(block.body_bytes)],
        .nodes = try batch.vector(record_batch_slots.nodes, field_node_bytes) orelse emptyVector(reader),
        .buffers = try batch.vector(record_batch_slots.buffers, buffer_bytes) orelse emptyVector(reader),
        .diagnostic = diagnostic,
    };
    try checkBatchShape(context, fields);

    // The node count was checked against the field count, so this allocation is
    // bounded by the metadata bytes of this (non-overlapping) block.
    const batch_chunks = try chunks.addManyAsSlice(allocator, fields.len);
    var buffer_index: u32 = 0;
    for (fields, batch_chunks, 0..) |field, *chunk, column_index| {
        try checkFieldNode(context, field, @intCast(column_index));
        // Validity bitmaps are ignored: the node says there are no nulls.
        _ = try bodyBuffer(context, field, buffer_index);
        chunk.* = try readChunk(context, field, buffer_index + 1);
        buffer_index += @intCast(field.layout.bufferCount());
    }
    assert(buffer_index == context.buffers.len);
    return context.row_count;
}

/// The RecordBatch header of a block's Message, checked against the footer's Block.
fn readBatchHeader(reader: flatbuffers.Reader, block: Block, batch_index: usize) !flatbuffers.Table {
    const diagnostic = reader.diagnostic;
    const message = try reader.root();
    try checkVersion(try message.scalar(i16, message_slots.version, 0), reader.context, diagnostic);
    const header_type = try message.scalar(u8, message_slots.header_type, 0);
    if (header_type != header_record_batch) {
        return invalid(diagnostic, "footer block {d} points to a message of type {d}, not a RecordBatch", .{
            batch_index, header_type,
        });
    }
    const message_body_bytes = try message.scalar(i64, message_slots.body_length, 0);
    if (message_body_bytes != block.body_bytes) {
        return invalid(diagnostic, "record batch {d}: message body length {d} differs from the footer's {d}", .{
            batch_index, message_body_bytes, block.body_bytes,
        });
    }
    const batch = try message.child(message_slots.header) orelse {
        return invalid(diagnostic, "record batch {d}: message has no RecordBatch header", .{batch_index});
    };
    if (try batch.has(record_batch_slots.compression)) {
        return unsupported(diagnostic, "compressed record batches are not supported (record batch {d})", .{batch_index});
    }
    return batch;
}

fn emptyVector(reader: flatbuffers.Reader) flatbuffers.Vector {
    return .{ .reader = reader, .position = 0, .len = 0, .element_bytes = 0 };
}

fn checkBatchShape(context: BatchContext, fields: []const SchemaField) !void {
    if (context.nodes.len != fields.len) {
        return invalid(context.diagnostic, "record batch {d} has {d} field nodes but the schema has {d} columns", .{
            context.batch_index, context.nodes.len, fields.len,
        });
    }
    var buffer_count: u64 = 0;
    for (fields) |field| buffer_count += field.layout.bufferCount();
    if (context.buffers.len != buffer_count) {
        return invalid(context.diagnostic, "record batch {d} has {d} buffers but the schema needs {d}", .{
            context.batch_index, context.buffers.len, buffer_count,
        });
    }
}

fn checkFieldNode(context: BatchContext, field: SchemaField, column_index: u32) !void {
    const node = context.nodes.element(column_index);
    const length = flatbuffers.structField(i64, node, 0);
    const null_count = flatbuffers.structField(i64, node, 8);
    if (length < 0 or @as(u64, @intCast(length)) != context.row_count) {
        return invalid(context.diagnostic, "column '{f}' has {d} rows in record batch {d}, which has {d}", .{
            Excerpt.ofName(field.name), length, context.batch_index, context.row_count,
        });
    }
    if (null_count < 0 or null_count > length) {
        return invalid(context.diagnostic, "column '{f}' has an invalid null count {d} in record batch {d}", .{
            Excerpt.ofName(field.name), null_count, context.batch_index,
        });
    }
    if (null_count > 0) {
        return unsupported(context.diagnostic, "column '{f}' contains nulls ({d} in record batch {d}); metadata columns must not be null", .{
            Excerpt.ofName(field.name), null_count, context.batch_index,
        });
    }
}

/// The bytes of buffer `buffer_index`, checked to lie inside the body.
fn bodyBuffer(context: BatchContext, field: SchemaField, buffer_index: u32) ![]const u8 {
    const element = context.buffers.element(buffer_index);
    const offset = flatbuffers.structField(i64, element, 0);
    const length = flatbuffers.structField(i64, element, 8);
    if (offset < 0 or length < 0 or offset > context.body.len or length > context.body.len - @as(u64, @intCast(offset))) {
        return invalid(context.diagnostic, "column '{f}': buffer {d} (offset {d}, {d} bytes) lies outside the {d}-byte body of record batch {d}", .{
            Excerpt.ofName(field.name), buffer_index, offset, length, context.body.len, context.batch_index,
        });
    }
    return context.body[@intCast(offset)..][0..@intCast(length)];
}

fn readChunk(context: BatchContext, field: SchemaField, buffer_index: u32) !Chunk {
    const rows = context.row_count;
    const values = try bodyBuffer(context, field, buffer_index + @intFromBool(field.layout == .utf8 or field.layout == .large_utf8));
    switch (field.layout) {
        .bool => try checkBufferBytes(context, field, values, rows / 8 + @intFromBool(rows % 8 != 0)),
        // A hostile row count can overflow rows * 8; no buffer is that large.
        .int64, .float64 => try checkBufferBytes(context, field, values, std.math.mul(u64, rows, 8) catch std.math.maxInt(u64)),
        .utf8 => return readStringChunk(i32, context, field, try bodyBuffer(context, field, buffer_index), values),
        .large_utf8 => return readStringChunk(i64, context, field, try bodyBuffer(context, field, buffer_index), values),
    }
    return .{ .row_count = rows, .values = values, .offsets = &.{}, .string_bytes = 0 };
}

fn checkBufferBytes(context: BatchContext, field: SchemaField, buffer: []const u8, bytes_needed: u64) !void {
    if (buffer.len < bytes_needed) {
        return invalid(context.diagnostic, "column '{f}': {d}-byte buffer in record batch {d} is too small for {d} rows", .{
            Excerpt.ofName(field.name), buffer.len, context.batch_index, context.row_count,
        });
    }
}

fn readOffset(comptime Offset: type, offsets: []const u8, index: usize) i64 {
    return std.mem.readInt(Offset, offsets[index * @sizeOf(Offset) ..][0..@sizeOf(Offset)], .little);
}

/// Checks that offsets ascend within the data buffer and every string is UTF-8.
fn readStringChunk(
    comptime Offset: type,
    context: BatchContext,
    field: SchemaField,
    offsets: []const u8,
    data: []const u8,
) !Chunk {
    const rows = context.row_count;
    // Some writers omit the offsets of an empty array entirely.
    if (rows == 0 and offsets.len == 0) return .{ .row_count = 0, .values = data, .offsets = &.{}, .string_bytes = 0 };
    const offsets_needed = std.math.mul(u64, rows + 1, @sizeOf(Offset)) catch std.math.maxInt(u64);
    try checkBufferBytes(context, field, offsets, offsets_needed);

    const first = readOffset(Offset, offsets, 0);
    var previous = first;
    if (first < 0 or first > data.len) return badOffset(context, field, 0, first, data.len);
    for (1..@as(usize, @intCast(rows)) + 1) |index| {
        const current = readOffset(Offset, offsets, index);
        if (current < previous or current > data.len) return badOffset(context, field, index, current, data.len);
        if (!std.unicode.utf8ValidateSlice(data[@intCast(previous)..@intCast(current)])) {
            return invalid(context.diagnostic, "column '{f}' has invalid UTF-8 in row {d} of record batch {d}", .{
                Excerpt.ofName(field.name), index - 1, context.batch_index,
            });
        }
        previous = current;
    }
    return .{
        .row_count = rows,
        .values = data,
        .offsets = offsets[0..@intCast(offsets_needed)],
        .string_bytes = @intCast(previous - first),
    };
}

fn badOffset(context: BatchContext, field: SchemaField, index: usize, offset: i64, data_bytes: usize) error{InvalidArrow} {
    return invalid(context.diagnostic, "column '{f}' has string offset {d} at position {d} of record batch {d}, which is decreasing or outside its {d}-byte data buffer", .{
        Excerpt.ofName(field.name), offset, index, context.batch_index, data_bytes,
    });
}

/// Pass two: copies each column's chunks, batch after batch, into one array.
/// Chunk `column_index` of batch `b` is `chunks[b * fields.len + column_index]`.
fn assembleColumns(arena: Allocator, fields: []const SchemaField, chunks: []const Chunk, row_count: u64) ![]Column {
    const columns = try arena.alloc(Column, fields.len);
    if (fields.len == 0) return columns;
    assert(chunks.len % fields.len == 0);
    // Every row of every column came from a checked buffer of at least a bit per
    // row, so a row count that does not fit memory is only possible on 32-bit hosts.
    const rows = std.math.cast(usize, row_count) orelse return error.OutOfMemory;
    for (fields, columns, 0..) |field, *column, column_index| {
        var column_chunks: ChunkIterator = .{ .chunks = chunks, .stride = fields.len, .next_index = column_index };
        column.* = .{
            .name = try arena.dupe(u8, field.name),
            .values = switch (field.layout) {
                .bool => .{ .bool = try assembleBools(arena, &column_chunks, rows) },
                .int64 => .{ .int = try assembleNumbers(i64, arena, &column_chunks, rows) },
                .float64 => .{ .float = try assembleNumbers(f64, arena, &column_chunks, rows) },
                .utf8 => try assembleStrings(i32, arena, &column_chunks, rows),
                .large_utf8 => try assembleStrings(i64, arena, &column_chunks, rows),
            },
        };
        assert(column.values.rowCount() == rows);
    }
    return columns;
}

const ChunkIterator = struct {
    chunks: []const Chunk,
    stride: usize,
    next_index: usize,

    fn next(iterator: *ChunkIterator) ?Chunk {
        if (iterator.next_index >= iterator.chunks.len) return null;
        defer iterator.next_index += iterator.stride;
        return iterator.chunks[iterator.next_index];
    }
};

fn assembleBools(arena: Allocator, chunks: *ChunkIterator, rows: usize) ![]u8 {
    const bools = try arena.alloc(u8, rows);
    var cursor: usize = 0;
    while (chunks.next()) |chunk| {
        for (bools[cursor..][0..@intCast(chunk.row_count)], 0..) |*value, index| {
            value.* = (chunk.values[index / 8] >> @intCast(index % 8)) & 1;
        }
        cursor += @intCast(chunk.row_count);
    }
    assert(cursor == rows);
    return bools;
}

fn assembleNumbers(comptime T: type, arena: Allocator, chunks: *ChunkIterator, rows: usize) ![]T {
    const numbers = try arena.alloc(T, rows);
    var cursor: usize = 0;
    while (chunks.next()) |chunk| {
        for (numbers[cursor..][0..@intCast(chunk.row_count)], 0..) |*value, index| {
            value.* = @bitCast(std.mem.readInt(u64, chunk.values[index * 8 ..][0..8], .little));
        }
        cursor += @intCast(chunk.row_count);
    }
    assert(cursor == rows);
    return numbers;
}

fn assembleStrings(comptime Offset: type, arena: Allocator, chunks: *ChunkIterator, rows: usize) !ColumnValues {
    var total_bytes: u64 = 0;
    var counting = chunks.*;
    while (counting.next()) |chunk| total_bytes += chunk.string_bytes;

    const offsets = try arena.alloc(u64, rows + 1);
    const bytes = try arena.alloc(u8, @intCast(total_bytes));
    offsets[0] = 0;
    var row_cursor: usize = 0;
    var byte_cursor: u64 = 0;
    while (chunks.next()) |chunk| {
        if (chunk.row_count == 0) continue;
        const chunk_rows: usize = @intCast(chunk.row_count);
        const first = readOffset(Offset, chunk.offsets, 0);
        for (1..chunk_rows + 1) |index| {
            const relative: u64 = @intCast(readOffset(Offset, chunk.offsets, index) - first);
            offsets[row_cursor + index] = byte_cursor + relative;
        }
        const start: usize = @intCast(first);
        @memcpy(bytes[@intCast(byte_cursor)..][0..@intCast(chunk.string_bytes)], chunk.values[start..][0..@intCast(chunk.string_bytes)]);
        row_cursor += chunk_rows;
        byte_cursor += chunk.string_bytes;
    }
    assert(row_cursor == rows);
    assert(byte_cursor == total_bytes);
    return .{ .string = .{ .offsets = offsets, .bytes = bytes } };
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;

fn stringValues(arena: Allocator, strings: []const []const u8) !ColumnValues {
    const offsets = try arena.alloc(u64, strings.len + 1);
    var bytes: std.ArrayList(u8) = .empty;
    offsets[0] = 0;
    for (strings, 1..) |string, index| {
        try bytes.appendSlice(arena, string);
        offsets[index] = bytes.items.len;
    }
    return .{ .string = .{ .offsets = offsets, .bytes = bytes.items } };
}

/// One column of each kind, sorted by name, with values that cross byte
/// boundaries (bools), extremes (ints, floats), empty and non-ASCII strings.
fn sampleColumns(arena: Allocator, row_count: usize) ![4]Column {
    const bools = try arena.alloc(u8, row_count);
    const ints = try arena.alloc(i64, row_count);
    const floats = try arena.alloc(f64, row_count);
    const strings = try arena.alloc([]const u8, row_count);
    for (0..row_count) |row| {
        bools[row] = @intFromBool(row % 3 == 0 or row % 8 == 7);
        ints[row] = switch (row) {
            0 => std.math.minInt(i64),
            1 => std.math.maxInt(i64),
            else => @as(i64, @intCast(row)) * 7919 - 500_000,
        };
        floats[row] = switch (row) {
            0 => -0.0,
            1 => std.math.inf(f64),
            else => @as(f64, @floatFromInt(row)) * 0.25 - 3.0,
        };
        strings[row] = switch (row % 5) {
            0 => "",
            1 => "héllo ✓ 🦀",
            else => try std.fmt.allocPrint(arena, "row {d}", .{row}),
        };
    }
    return .{
        .{ .name = "active", .values = .{ .bool = bools } },
        .{ .name = "count", .values = .{ .int = ints } },
        .{ .name = "label", .values = try stringValues(arena, strings) },
        .{ .name = "score", .values = .{ .float = floats } },
    };
}

fn expectReadsBack(file: []const u8, columns: []const Column, row_count: u64) !void {
    var diagnostic: Diagnostic = .{};
    var table = readFile(testing.allocator, file, &diagnostic) catch |err| {
        std.debug.print("readFile failed: {s}\n", .{diagnostic.message()});
        return err;
    };
    defer table.deinit();
    try testing.expectEqual(row_count, table.row_count);
    try testing.expectEqual(columns.len, table.columns.len);
    for (columns, table.columns) |expected, actual| {
        try testing.expectEqualStrings(expected.name, actual.name);
        try testing.expectEqual(std.meta.activeTag(expected.values), std.meta.activeTag(actual.values));
        try testing.expectEqual(expected.values.rowCount(), actual.values.rowCount());
        for (0..@intCast(row_count)) |row| {
            try testing.expect(expected.values.get(row).eql(actual.values.get(row)));
        }
    }
}

fn recordBatchCount(file: []const u8) !u32 {
    var diagnostic: Diagnostic = .{};
    const footer = try readFooter(file, &diagnostic);
    return footer.record_batches.?.len;
}

test "all four kinds round trip at 0, 1, 9 and 1000 rows" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    for ([_]usize{ 0, 1, 9, 1000 }) |row_count| {
        const columns = try sampleColumns(arena.allocator(), row_count);
        const file = try writeFile(testing.allocator, &columns, row_count);
        defer testing.allocator.free(file);
        try testing.expect(std.mem.startsWith(u8, file, file_header));
        try testing.expect(std.mem.endsWith(u8, file, magic));
        try testing.expectEqual(@as(u32, 1), try recordBatchCount(file));
        try expectReadsBack(file, &columns, row_count);
    }
}

test "a table without columns keeps its row count" {
    const file = try writeFile(testing.allocator, &.{}, 5);
    defer testing.allocator.free(file);
    try expectReadsBack(file, &.{}, 5);
}

test "bools are bit-packed least significant bit first and padded with zeros" {
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    const bools = [_]u8{ 1, 0, 0, 0, 0, 0, 0, 0, 1, 1 };
    const values: ColumnValues = .{ .bool = &bools };
    const rows: Rows = .{ .start = 0, .end = bools.len };
    try output.ensureUnusedCapacity(testing.allocator, @intCast(bodyBytes(&.{.{ .name = "b", .values = values }}, rows)));
    writeColumnBody(&output, values, rows);
    try testing.expectEqualSlices(u8, &.{ 0x01, 0x03, 0, 0, 0, 0, 0, 0 }, output.items);
}

test "string columns are split into batches that fit the byte limit" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const strings = [_][]const u8{ "abcd", "", "ef", "ghij", "k", "lmnopqrs", "", "t" };
    const ints = [_]i64{ 0, 1, 2, 3, 4, 5, 6, 7 };
    const columns = [_]Column{
        .{ .name = "id", .values = .{ .int = &ints } },
        .{ .name = "text", .values = try stringValues(arena.allocator(), &strings) },
    };
    const file = try writeFileWithBatchLimit(testing.allocator, &columns, strings.len, 8);
    defer testing.allocator.free(file);
    // Rows {abcd, "", ef}, {ghij, k}, {lmnopqrs, "", t}: 6, 5 and 9 bytes would not fit.
    try testing.expectEqual(@as(u32, 4), try recordBatchCount(file));
    try expectReadsBack(file, &columns, strings.len);

    try testing.expectError(
        error.TooLarge,
        writeFileWithBatchLimit(testing.allocator, &columns, strings.len, 7),
    );
}

fn smallFile(arena: Allocator) ![]u8 {
    const columns = try sampleColumns(arena, 11);
    return writeFile(arena, &columns, 11);
}

test "a file truncated at any length is rejected" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const file = try smallFile(arena.allocator());
    for (0..file.len) |length| {
        var diagnostic: Diagnostic = .{};
        try testing.expectError(error.InvalidArrow, readFile(testing.allocator, file[0..length], &diagnostic));
        try testing.expect(diagnostic.message().len > 0);
    }
}

fn readCorrupted(file: []const u8) !void {
    var diagnostic: Diagnostic = .{};
    var table = readFile(testing.allocator, file, &diagnostic) catch |err| switch (err) {
        error.InvalidArrow, error.UnsupportedArrow => {
            try testing.expect(diagnostic.message().len > 0);
            return;
        },
        error.OutOfMemory => return err,
    };
    table.deinit();
}

test "corrupted bytes yield an error or a table, never a crash" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const file = try smallFile(arena.allocator());
    const corrupted = try arena.allocator().dupe(u8, file);

    // Every byte, each set to a few interesting values.
    for (0..file.len) |index| {
        for ([_]u8{ 0x00, 0xff, 0x80, 0x7f, file[index] ^ 0x01 }) |value| {
            corrupted[index] = value;
            try readCorrupted(corrupted);
        }
        corrupted[index] = file[index];
    }

    // Random flips of several bytes at once.
    var prng: std.Random.DefaultPrng = .init(0x5eed_a770);
    const random = prng.random();
    for (0..5000) |_| {
        @memcpy(corrupted, file);
        const flip_count = 1 + random.uintLessThan(usize, 8);
        for (0..flip_count) |_| {
            corrupted[random.uintLessThan(usize, file.len)] ^= @as(u8, 1) << random.int(u3);
        }
        try readCorrupted(corrupted);
    }
}

/// What a hand-built single-column file deviates in.
const TestFile = struct {
    type_tag: u8 = type_int,
    type_fields: []const flatbuffers.Field = &.{
        .{ .slot = int_slots.bit_width, .value = .{ .int = 64 } },
        .{ .slot = int_slots.is_signed, .value = .{ .byte = 1 } },
    },
    dictionary: bool = false,
    endianness: i16 = 0,
    null_count: i64 = 0,
    compressed: bool = false,
};

/// Builds a one-column, one-row file by hand (no schema message in the stream,
/// which the file reader does not need): one record batch with an 8-byte body.
fn buildTestFile(allocator: Allocator, spec: TestFile) ![]u8 {
    var output: std.ArrayList(u8) = .empty;
    errdefer output.deinit(allocator);
    try output.appendSlice(allocator, file_header);

    const message_offset = try beginMessage(allocator, &output);
    var message: flatbuffers.Builder = try .init(allocator, &output);
    const header_slot = try writeMessageTable(&message, header_record_batch, 8);
    var batch_fields: [4]flatbuffers.Field = .{
        .{ .slot = record_batch_slots.length, .value = .{ .long = 1 } },
        .{ .slot = record_batch_slots.nodes, .value = .offset },
        .{ .slot = record_batch_slots.buffers, .value = .offset },
        .{ .slot = record_batch_slots.compression, .value = .offset },
    };
    const batch = try message.table(batch_fields[0 .. @as(usize, 3) + @intFromBool(spec.compressed)]);
    message.patch(header_slot, batch.position);
    const nodes = try message.structVector(1);
    try message.int(i64, 1);
    try message.int(i64, spec.null_count);
    message.patch(batch.offsetSlot(record_batch_slots.nodes), nodes);
    const buffers = try message.structVector(2);
    for ([_]i64{ 0, 0, 0, 8 }) |value| try message.int(i64, value);
    message.patch(batch.offsetSlot(record_batch_slots.buffers), buffers);
    if (spec.compressed) {
        const compression = try message.table(&.{.{ .slot = 0, .value = .{ .byte = 1 } }});
        message.patch(batch.offsetSlot(record_batch_slots.compression), compression.position);
    }
    const metadata_bytes = try finishMessage(allocator, &output, message_offset);
    try appendInt(allocator, &output, i64, 42);

    try appendInt(allocator, &output, u32, continuation_marker);
    try appendInt(allocator, &output, u32, 0);
    const footer_start = output.items.len;
    var footer: flatbuffers.Builder = try .init(allocator, &output);
    const footer_table = try footer.table(&.{
        .{ .slot = footer_slots.version, .value = .{ .short = metadata_version_v5 } },
        .{ .slot = footer_slots.schema, .value = .offset },
        .{ .slot = footer_slots.record_batches, .value = .offset },
    });
    footer.patch(0, footer_table.position);
    const schema = try footer.table(&.{
        .{ .slot = schema_slots.endianness, .value = .{ .short = spec.endianness } },
        .{ .slot = schema_slots.fields, .value = .offset },
    });
    footer.patch(footer_table.offsetSlot(footer_slots.schema), schema.position);
    const fields = try footer.offsetVector(1);
    footer.patch(schema.offsetSlot(schema_slots.fields), fields);
    var field_fields: [4]flatbuffers.Field = .{
        .{ .slot = field_slots.name, .value = .offset },
        .{ .slot = field_slots.type_type, .value = .{ .byte = spec.type_tag } },
        .{ .slot = field_slots.type_table, .value = .offset },
        .{ .slot = field_slots.dictionary, .value = .offset },
    };
    const field = try footer.table(field_fields[0 .. @as(usize, 3) + @intFromBool(spec.dictionary)]);
    footer.patch(fields + 4, field.position);
    footer.patch(field.offsetSlot(field_slots.name), try footer.string("x"));
    footer.patch(field.offsetSlot(field_slots.type_table), (try footer.table(spec.type_fields)).position);
    if (spec.dictionary) {
        footer.patch(field.offsetSlot(field_slots.dictionary), (try footer.table(&.{})).position);
    }
    const blocks = try footer.structVector(1);
    try footer.int(i64, @intCast(message_offset));
    try footer.int(i32, @intCast(metadata_bytes));
    try footer.int(i32, 0);
    try footer.int(i64, 8);
    footer.patch(footer_table.offsetSlot(footer_slots.record_batches), blocks);
    try appendInt(allocator, &output, i32, @intCast(output.items.len - footer_start));
    try output.appendSlice(allocator, magic);
    return output.toOwnedSlice(allocator);
}

fn expectRejected(spec: TestFile, expected_error: ReadError, expected_message: []const u8) !void {
    const file = try buildTestFile(testing.allocator, spec);
    defer testing.allocator.free(file);
    var diagnostic: Diagnostic = .{};
    try testing.expectError(expected_error, readFile(testing.allocator, file, &diagnostic));
    try testing.expectEqualStrings(expected_message, diagnostic.message());
}

test "the hand-built file reads back when it deviates in nothing" {
    const file = try buildTestFile(testing.allocator, .{});
    defer testing.allocator.free(file);
    const ints = [_]i64{42};
    try expectReadsBack(file, &.{.{ .name = "x", .values = .{ .int = &ints } }}, 1);
}

test "unsupported types, nulls, dictionaries, compression and big-endian are rejected" {
    try expectRejected(.{ .type_fields = &.{
        .{ .slot = int_slots.bit_width, .value = .{ .int = 32 } },
        .{ .slot = int_slots.is_signed, .value = .{ .byte = 1 } },
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type Int32; expected bool, int64, float64 or utf8");
    try expectRejected(.{ .type_fields = &.{
        .{ .slot = int_slots.bit_width, .value = .{ .int = 64 } },
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type UInt64; expected bool, int64, float64 or utf8");
    try expectRejected(.{ .type_tag = type_floating_point, .type_fields = &.{
        .{ .slot = floating_point_slots.precision, .value = .{ .short = 1 } },
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type Float32; expected bool, int64, float64 or utf8");
    try expectRejected(.{ .type_tag = 4, .type_fields = &.{} }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type Binary; expected bool, int64, float64 or utf8");
    try expectRejected(.{ .type_tag = 200, .type_fields = &.{} }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type with type tag 200; expected bool, int64, float64 or utf8");
    try expectRejected(.{ .null_count = 1 }, error.UnsupportedArrow, "column 'x' contains nulls (1 in record batch 0); metadata columns must not be null");
    try expectRejected(.{ .dictionary = true }, error.UnsupportedArrow, "column 'x' is dictionary-encoded; expected plain bool, int64, float64 or utf8");
    try expectRejected(.{ .compressed = true }, error.UnsupportedArrow, "compressed record batches are not supported (record batch 0)");
    try expectRejected(.{ .endianness = 1 }, error.UnsupportedArrow, "big-endian Arrow files are not supported");
}

test "broken string offsets and UTF-8 are rejected with the column name" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const columns = [_]Column{.{ .name = "label", .values = try stringValues(arena.allocator(), &.{ "ab", "c" }) }};
    const file = try writeFile(arena.allocator(), &columns, 2);
    // The body is the last thing before the end-of-stream marker: offsets {0, 2, 3}
    // padded to 16 bytes, then "abc" padded to 8.
    const eos = std.mem.indexOf(u8, file, &.{ 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0 }).?;
    const data = eos - 8;
    const offsets = data - 16;
    try testing.expectEqualSlices(u8, "abc", file[data..][0..3]);

    const cases = [_]struct { position: usize, byte: u8, message: []const u8 }{
        .{ .position = offsets + 8, .byte = 1, .message = "column 'label' has string offset 1 at position 2 of record batch 0, which is decreasing or outside its 3-byte data buffer" },
        .{ .position = offsets + 4, .byte = 4, .message = "column 'label' has string offset 4 at position 1 of record batch 0, which is decreasing or outside its 3-byte data buffer" },
        .{ .position = data + 1, .byte = 0xc3, .message = "column 'label' has invalid UTF-8 in row 0 of record batch 0" },
    };
    for (cases) |case| {
        const corrupted = try arena.allocator().dupe(u8, file);
        corrupted[case.position] = case.byte;
        var diagnostic: Diagnostic = .{};
        try testing.expectError(error.InvalidArrow, readFile(testing.allocator, corrupted, &diagnostic));
        try testing.expectEqualStrings(case.message, diagnostic.message());
    }
}

test "missing magic and an inconsistent footer are rejected" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const file = try smallFile(arena.allocator());
    var diagnostic: Diagnostic = .{};

    const no_magic = try arena.allocator().dupe(u8, file);
    no_magic[0] = 'B';
    try testing.expectError(error.InvalidArrow, readFile(testing.allocator, no_magic, &diagnostic));
    try testing.expectEqualStrings("missing 'ARROW1' magic at the start; not an Arrow IPC file", diagnostic.message());

    const long_footer = try arena.allocator().dupe(u8, file);
    std.mem.writeInt(i32, long_footer[file.len - file_trailer_bytes ..][0..4], @intCast(file.len), .little);
    try testing.expectError(error.InvalidArrow, readFile(testing.allocator, long_footer, &diagnostic));
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), "footer length"));
}
