//! The Arrow IPC file reader for the sample metadata table (`readFile`): the footer,
//! the schema and every record batch it lists, concatenated into one column per field.
//! The file layout and the constants the writer shares are in arrow_ipc.zig.
//!
//! The reader treats the file as hostile (it may come from any Arrow writer or
//! from a damaged disk): every offset, length and count is checked before use.
const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;

const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;
const flatbuffers = @import("../codec/flatbuffers.zig");
const arrow_ipc = @import("arrow_ipc.zig");
const magic = arrow_ipc.magic;
const file_header = arrow_ipc.file_header;
const file_trailer_bytes = arrow_ipc.file_trailer_bytes;
const continuation_marker = arrow_ipc.continuation_marker;
const metadata_version_v4 = arrow_ipc.metadata_version_v4;
const metadata_version_v5 = arrow_ipc.metadata_version_v5;
const header_record_batch = arrow_ipc.header_record_batch;
const type_int = arrow_ipc.type_int;
const type_floating_point = arrow_ipc.type_floating_point;
const type_utf8 = arrow_ipc.type_utf8;
const type_bool = arrow_ipc.type_bool;
const type_large_utf8 = arrow_ipc.type_large_utf8;
const type_names = arrow_ipc.type_names;
const precision_double = arrow_ipc.precision_double;
const message_slots = arrow_ipc.message_slots;
const schema_slots = arrow_ipc.schema_slots;
const field_slots = arrow_ipc.field_slots;
const int_slots = arrow_ipc.int_slots;
const floating_point_slots = arrow_ipc.floating_point_slots;
const record_batch_slots = arrow_ipc.record_batch_slots;
const footer_slots = arrow_ipc.footer_slots;
const field_node_bytes = arrow_ipc.field_node_bytes;
const buffer_bytes = arrow_ipc.buffer_bytes;
const block_bytes = arrow_ipc.block_bytes;
const Block = arrow_ipc.Block;
const arrow_ipc_columns = @import("arrow_ipc_columns.zig");
const Layout = arrow_ipc_columns.Layout;
const SchemaField = arrow_ipc_columns.SchemaField;
const Chunk = arrow_ipc_columns.Chunk;
const readOffset = arrow_ipc_columns.readOffset;
const assembleColumns = arrow_ipc_columns.assembleColumns;
const metadata_types = @import("metadata_types.zig");
const Column = metadata_types.Column;

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
    const contents = readContents(allocator, arena.allocator(), bytes, diagnostic) catch |err|
        return switch (err) {
            error.InvalidFlatbuffer => error.InvalidArrow,
            else => |other| other,
        };
    return .{ .row_count = contents.row_count, .columns = contents.columns, .arena = arena };
}

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

fn invalid(
    diagnostic: *Diagnostic,
    comptime format: []const u8,
    args: anytype,
) error{InvalidArrow} {
    diagnostic.set(format, args);
    return error.InvalidArrow;
}

fn unsupported(
    diagnostic: *Diagnostic,
    comptime format: []const u8,
    args: anytype,
) error{UnsupportedArrow} {
    diagnostic.set(format, args);
    return error.UnsupportedArrow;
}

/// Validates all metadata and buffers first (pass one), then copies the values
/// into exactly sized columns (pass two).
fn readContents(
    allocator: Allocator,
    arena: Allocator,
    bytes: []const u8,
    diagnostic: *Diagnostic,
) !Contents {
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

pub fn readFooter(bytes: []const u8, diagnostic: *Diagnostic) !Footer {
    if (bytes.len < file_header.len + file_trailer_bytes) {
        return invalid(
            diagnostic,
            "file of {d} bytes is too short for an Arrow IPC file (truncated?)",
            .{bytes.len},
        );
    }
    if (!std.mem.eql(u8, bytes[0..magic.len], magic)) {
        return invalid(
            diagnostic,
            "missing 'ARROW1' magic at the start; not an Arrow IPC file",
            .{},
        );
    }
    if (!std.mem.eql(u8, bytes[bytes.len - magic.len ..], magic)) {
        return invalid(
            diagnostic,
            "missing 'ARROW1' magic at the end; the file is truncated or not an Arrow IPC file",
            .{},
        );
    }
    const footer_end = bytes.len - file_trailer_bytes;
    const footer_length = std.mem.readInt(i32, bytes[footer_end..][0..4], .little);
    if (footer_length <= 0 or footer_length > footer_end - file_header.len) {
        return invalid(
            diagnostic,
            "footer length {d} does not fit the {d}-byte file",
            .{ footer_length, bytes.len },
        );
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
        .schema = try root.child(footer_slots.schema) orelse return invalid(
            diagnostic,
            "footer has no schema",
            .{},
        ),
        .record_batches = try root.vector(footer_slots.record_batches, block_bytes),
        .data_end = footer_start,
    };
}

fn checkVersion(version: i16, context: []const u8, diagnostic: *Diagnostic) !void {
    if (version == metadata_version_v4 or version == metadata_version_v5) return;
    return unsupported(
        diagnostic,
        "{s} has Arrow metadata version {d}; expected V4 or V5 (Arrow 0.8 or later)",
        .{ context, @as(i32, version) + 1 },
    );
}

fn readSchema(
    allocator: Allocator,
    schema: flatbuffers.Table,
    diagnostic: *Diagnostic,
) ![]SchemaField {
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
        return unsupported(
            diagnostic,
            "column '{f}' is dictionary-encoded; expected plain bool, int64, float64 or utf8",
            .{Excerpt.ofName(name)},
        );
    }
    const layout = try readLayout(field, name, diagnostic);
    if (try field.vector(field_slots.children, 4)) |children| {
        if (children.len != 0) {
            return invalid(
                diagnostic,
                "column '{f}' of a primitive type has {d} children",
                .{ Excerpt.ofName(name), children.len },
            );
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
                return invalid(
                    diagnostic,
                    "column '{f}' has type Int without its parameters",
                    .{Excerpt.ofName(name)},
                );
            };
            const bit_width = try int.scalar(i32, int_slots.bit_width, 0);
            const signed = try int.scalar(u8, int_slots.is_signed, 0) != 0;
            if (bit_width == 64 and signed) return .int64;
            return unsupportedType(
                diagnostic,
                name,
                "{s}{d}",
                .{ if (signed) "Int" else "UInt", bit_width },
            );
        },
        type_floating_point => {
            const floating_point = try field.child(field_slots.type_table) orelse {
                return invalid(
                    diagnostic,
                    "column '{f}' has type FloatingPoint without its parameters",
                    .{Excerpt.ofName(name)},
                );
            };
            const precision = try floating_point.scalar(i16, floating_point_slots.precision, 0);
            if (precision == precision_double) return .float64;
            const bits: i32 = switch (precision) {
                0 => 16,
                1 => 32,
                else => return invalid(
                    diagnostic,
                    "column '{f}' has unknown float precision {d}",
                    .{ Excerpt.ofName(name), precision },
                ),
            };
            return unsupportedType(diagnostic, name, "Float{d}", .{bits});
        },
        0 => return invalid(diagnostic, "column '{f}' has no type", .{Excerpt.ofName(name)}),
        else => {
            if (tag < type_names.len) return unsupportedType(
                diagnostic,
                name,
                "{s}",
                .{type_names[tag]},
            );
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
        "column '{f}' has unsupported Arrow type " ++ type_format ++ "; expected bool, int64, " ++
            "float64 or utf8",
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
        const block = try readBlock(
            blocks.element(@intCast(batch_index)),
            batch_index,
            previous_end,
            footer.data_end,
            diagnostic,
        );
        previous_end = block.offset + block.metadata_bytes + block.body_bytes;
        const batch_rows = try readRecordBatch(
            allocator,
            bytes,
            block,
            batch_index,
            fields,
            chunks,
            diagnostic,
        );
        row_count = std.math.add(u64, row_count, batch_rows) catch {
            return invalid(diagnostic, "the record batches' row counts overflow 64 bits", .{});
        };
    }
    return row_count;
}

fn readBlock(
    element: []const u8,
    batch_index: usize,
    previous_end: u64,
    data_end: u64,
    diagnostic: *Diagnostic,
) !Block {
    const offset = flatbuffers.structField(i64, element, 0);
    const metadata_bytes = flatbuffers.structField(i32, element, 8);
    const body_bytes = flatbuffers.structField(i64, element, 16);
    if (offset < 0 or metadata_bytes <= 0 or body_bytes < 0) {
        return invalid(
            diagnostic,
            "footer block {d} is invalid (offset {d}, metadata {d} bytes, body {d} bytes)",
            .{ batch_index, offset, metadata_bytes, body_bytes },
        );
    }
    const block: Block = .{
        .offset = @intCast(offset),
        .metadata_bytes = @intCast(metadata_bytes),
        .body_bytes = @intCast(body_bytes),
    };
    // offset and body_bytes are below 2^63 and metadata_bytes below 2^31: no u64 overflow.
    const end = block.offset + block.metadata_bytes + block.body_bytes;
    if (block.offset < previous_end) {
        return invalid(
            diagnostic,
            "footer block {d} at offset {d} overlaps the file header or the previous block",
            .{ batch_index, block.offset },
        );
    }
    if (end > data_end) {
        return invalid(
            diagnostic,
            "footer block {d} (bytes {d}..{d}) extends past the data, which ends at {d}",
            .{ batch_index, block.offset, end, data_end },
        );
    }
    return block;
}

/// The Message flatbuffer framed at the start of a block: 0xFFFFFFFF and an int32
/// length, or (before Arrow 0.15) just the int32 length.
fn messageFlatbuffer(
    bytes: []const u8,
    block: Block,
    batch_index: usize,
    diagnostic: *Diagnostic,
) ![]const u8 {
    const region = bytes[@intCast(block.offset)..][0..block.metadata_bytes];
    if (region.len < 4) {
        return invalid(
            diagnostic,
            "record batch {d}: {d}-byte metadata block is too short",
            .{ batch_index, region.len },
        );
    }
    const prefix_bytes: usize =
        if (std.mem.readInt(u32, region[0..4], .little) == continuation_marker) 8 else 4;
    if (region.len < prefix_bytes) {
        return invalid(
            diagnostic,
            "record batch {d}: {d}-byte metadata block is too short",
            .{ batch_index, region.len },
        );
    }
    const length = std.mem.readInt(i32, region[prefix_bytes - 4 ..][0..4], .little);
    if (length <= 0 or length > region.len - prefix_bytes) {
        return invalid(
            diagnostic,
            "record batch {d}: metadata length {d} does not fit its {d}-byte block",
            .{ batch_index, length, region.len },
        );
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
        .context = std.fmt.bufPrint(
            &context_buffer,
            "record batch {d} metadata",
            .{batch_index},
        ) catch unreachable,
    };
    const batch = try readBatchHeader(reader, block, batch_index);
    const length = try batch.scalar(i64, record_batch_slots.length, 0);
    if (length < 0) return invalid(
        diagnostic,
        "record batch {d} has negative length {d}",
        .{ batch_index, length },
    );

    const body_start: usize = @intCast(block.offset + block.metadata_bytes);
    const context: BatchContext = .{
        .batch_index = batch_index,
        .row_count = @intCast(length),
        .body = bytes[body_start..][0..@intCast(block.body_bytes)],
        .nodes = try batch.vector(record_batch_slots.nodes, field_node_bytes) orelse emptyVector(
            reader,
        ),
        .buffers = try batch.vector(record_batch_slots.buffers, buffer_bytes) orelse emptyVector(
            reader,
        ),
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
fn readBatchHeader(
    reader: flatbuffers.Reader,
    block: Block,
    batch_index: usize,
) !flatbuffers.Table {
    const diagnostic = reader.diagnostic;
    const message = try reader.root();
    try checkVersion(try message.scalar(i16, message_slots.version, 0), reader.context, diagnostic);
    const header_type = try message.scalar(u8, message_slots.header_type, 0);
    if (header_type != header_record_batch) {
        return invalid(
            diagnostic,
            "footer block {d} points to a message of type {d}, not a RecordBatch",
            .{ batch_index, header_type },
        );
    }
    const message_body_bytes = try message.scalar(i64, message_slots.body_length, 0);
    if (message_body_bytes != block.body_bytes) {
        return invalid(
            diagnostic,
            "record batch {d}: message body length {d} differs from the footer's {d}",
            .{ batch_index, message_body_bytes, block.body_bytes },
        );
    }
    const batch = try message.child(message_slots.header) orelse {
        return invalid(
            diagnostic,
            "record batch {d}: message has no RecordBatch header",
            .{batch_index},
        );
    };
    if (try batch.has(record_batch_slots.compression)) {
        return unsupported(
            diagnostic,
            "compressed record batches are not supported (record batch {d})",
            .{batch_index},
        );
    }
    return batch;
}

fn emptyVector(reader: flatbuffers.Reader) flatbuffers.Vector {
    return .{ .reader = reader, .position = 0, .len = 0, .element_bytes = 0 };
}

fn checkBatchShape(context: BatchContext, fields: []const SchemaField) !void {
    if (context.nodes.len != fields.len) {
        return invalid(
            context.diagnostic,
            "record batch {d} has {d} field nodes but the schema has {d} columns",
            .{ context.batch_index, context.nodes.len, fields.len },
        );
    }
    var buffer_count: u64 = 0;
    for (fields) |field| buffer_count += field.layout.bufferCount();
    if (context.buffers.len != buffer_count) {
        return invalid(
            context.diagnostic,
            "record batch {d} has {d} buffers but the schema needs {d}",
            .{ context.batch_index, context.buffers.len, buffer_count },
        );
    }
}

fn checkFieldNode(context: BatchContext, field: SchemaField, column_index: u32) !void {
    const node = context.nodes.element(column_index);
    const length = flatbuffers.structField(i64, node, 0);
    const null_count = flatbuffers.structField(i64, node, 8);
    if (length < 0 or @as(u64, @intCast(length)) != context.row_count) {
        return invalid(
            context.diagnostic,
            "column '{f}' has {d} rows in record batch {d}, which has {d}",
            .{ Excerpt.ofName(field.name), length, context.batch_index, context.row_count },
        );
    }
    if (null_count < 0 or null_count > length) {
        return invalid(
            context.diagnostic,
            "column '{f}' has an invalid null count {d} in record batch {d}",
            .{ Excerpt.ofName(field.name), null_count, context.batch_index },
        );
    }
    if (null_count > 0) {
        return unsupported(
            context.diagnostic,
            "column '{f}' contains nulls ({d} in record batch {d}); metadata columns must not " ++
                "be null",
            .{ Excerpt.ofName(field.name), null_count, context.batch_index },
        );
    }
}

/// The bytes of buffer `buffer_index`, checked to lie inside the body.
fn bodyBuffer(context: BatchContext, field: SchemaField, buffer_index: u32) ![]const u8 {
    const element = context.buffers.element(buffer_index);
    const offset = flatbuffers.structField(i64, element, 0);
    const length = flatbuffers.structField(i64, element, 8);
    const body_bytes: u64 = context.body.len;
    const outside = offset < 0 or length < 0 or offset > body_bytes or
        length > body_bytes - @as(u64, @intCast(offset));
    if (outside) {
        return invalid(
            context.diagnostic,
            "column '{f}': buffer {d} (offset {d}, {d} bytes) lies outside the {d}-byte body " ++
                "of record batch {d}",
            .{
                Excerpt.ofName(field.name), buffer_index,     offset,
                length,                     context.body.len, context.batch_index,
            },
        );
    }
    return context.body[@intCast(offset)..][0..@intCast(length)];
}

fn readChunk(context: BatchContext, field: SchemaField, buffer_index: u32) !Chunk {
    const rows = context.row_count;
    const values = try bodyBuffer(
        context,
        field,
        buffer_index + @intFromBool(field.layout == .utf8 or field.layout == .large_utf8),
    );
    switch (field.layout) {
        .bool => try checkBufferBytes(
            context,
            field,
            values,
            rows / 8 + @intFromBool(rows % 8 != 0),
        ),
        // A hostile row count can overflow rows * 8; no buffer is that large.
        .int64, .float64 => try checkBufferBytes(
            context,
            field,
            values,
            std.math.mul(u64, rows, 8) catch std.math.maxInt(u64),
        ),
        .utf8 => return readStringChunk(
            i32,
            context,
            field,
            try bodyBuffer(context, field, buffer_index),
            values,
        ),
        .large_utf8 => return readStringChunk(
            i64,
            context,
            field,
            try bodyBuffer(context, field, buffer_index),
            values,
        ),
    }
    return .{ .row_count = rows, .values = values, .offsets = &.{}, .string_bytes = 0 };
}

fn checkBufferBytes(
    context: BatchContext,
    field: SchemaField,
    buffer: []const u8,
    bytes_needed: u64,
) !void {
    if (buffer.len < bytes_needed) {
        return invalid(
            context.diagnostic,
            "column '{f}': {d}-byte buffer in record batch {d} is too small for {d} rows",
            .{ Excerpt.ofName(field.name), buffer.len, context.batch_index, context.row_count },
        );
    }
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
    if (rows == 0 and offsets.len == 0) return .{
        .row_count = 0,
        .values = data,
        .offsets = &.{},
        .string_bytes = 0,
    };
    const offsets_needed = std.math.mul(u64, rows + 1, @sizeOf(Offset)) catch std.math.maxInt(u64);
    try checkBufferBytes(context, field, offsets, offsets_needed);

    const first = readOffset(Offset, offsets, 0);
    var previous = first;
    if (first < 0 or first > data.len) return badOffset(context, field, 0, first, data.len);
    for (1..@as(usize, @intCast(rows)) + 1) |index| {
        const current = readOffset(Offset, offsets, index);
        if (current < previous or current > data.len) return badOffset(
            context,
            field,
            index,
            current,
            data.len,
        );
        if (!std.unicode.utf8ValidateSlice(data[@intCast(previous)..@intCast(current)])) {
            return invalid(
                context.diagnostic,
                "column '{f}' has invalid UTF-8 in row {d} of record batch {d}",
                .{ Excerpt.ofName(field.name), index - 1, context.batch_index },
            );
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

fn badOffset(
    context: BatchContext,
    field: SchemaField,
    index: usize,
    offset: i64,
    data_bytes: usize,
) error{InvalidArrow} {
    return invalid(
        context.diagnostic,
        "column '{f}' has string offset {d} at position {d} of record batch {d}, which is " ++
            "decreasing or outside its {d}-byte data buffer",
        .{ Excerpt.ofName(field.name), offset, index, context.batch_index, data_bytes },
    );
}
