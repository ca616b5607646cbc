//! Pass two of reading an Arrow IPC file (arrow_ipc_read.zig): the shapes pass one hands
//! over (a field's layout, a column's checked buffers in one record batch) and the copy of
//! each column's chunks, batch after batch, into one array.
const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const metadata_types = @import("metadata_types.zig");
const Column = metadata_types.Column;
const ColumnValues = metadata_types.ColumnValues;

/// How a supported field's values are laid out in a record batch body.
pub const Layout = enum {
    bool,
    int64,
    float64,
    utf8,
    large_utf8,

    /// Validity buffer plus data buffers.
    pub fn bufferCount(layout: Layout) u64 {
        return switch (layout) {
            .bool, .int64, .float64 => 2,
            .utf8, .large_utf8 => 3,
        };
    }
};

pub const SchemaField = struct {
    /// Borrowed from the file bytes until the columns are assembled.
    name: []const u8,
    layout: Layout,
};

/// One column's validated buffers in one record batch.
pub const Chunk = struct {
    row_count: u64,
    /// Bit-packed bools, little-endian 8-byte numbers, or string bytes.
    values: []const u8,
    /// String offsets (int32 or int64 per the layout); empty for other layouts and
    /// for a string chunk of zero rows.
    offsets: []const u8,
    /// Bytes the strings span, offsets[last] - offsets[0].
    string_bytes: u64,
};

/// Offset `index` of a string chunk (Offset is i32 for utf8, i64 for large_utf8).
pub fn readOffset(comptime Offset: type, offsets: []const u8, index: usize) i64 {
    return std.mem.readInt(
        Offset,
        offsets[index * @sizeOf(Offset) ..][0..@sizeOf(Offset)],
        .little,
    );
}

/// Pass two: copies each column's chunks, batch after batch, into one array.
/// Chunk `column_index` of batch `b` is `chunks[b * fields.len + column_index]`.
pub fn assembleColumns(
    arena: Allocator,
    fields: []const SchemaField,
    chunks: []const Chunk,
    row_count: u64,
) ![]Column {
    const columns = try arena.alloc(Column, fields.len);
    if (fields.len == 0) return columns;
    assert(chunks.len % fields.len == 0);
    // Every row of every column came from a checked buffer of at least a bit per
    // row, so a row count that does not fit memory is only possible on 32-bit hosts.
    const rows = std.math.cast(usize, row_count) orelse return error.OutOfMemory;
    for (fields, columns, 0..) |field, *column, column_index| {
        var column_chunks: ChunkIterator = .{
            .chunks = chunks,
            .stride = fields.len,
            .next_index = column_index,
        };
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

fn assembleStrings(
    comptime Offset: type,
    arena: Allocator,
    chunks: *ChunkIterator,
    rows: usize,
) !ColumnValues {
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
        @memcpy(
            bytes[@intCast(byte_cursor)..][0..@intCast(chunk.string_bytes)],
            chunk.values[start..][0..@intCast(chunk.string_bytes)],
        );
        row_cursor += chunk_rows;
        byte_cursor += chunk.string_bytes;
    }
    assert(row_cursor == rows);
    assert(byte_cursor == total_bytes);
    return .{ .string = .{ .offsets = offsets, .bytes = bytes } };
}
