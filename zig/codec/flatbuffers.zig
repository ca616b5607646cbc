//! Just enough FlatBuffers for Arrow IPC metadata: a forward builder and a
//! bounds-checked reader.
//!
//! The builder writes front to back: a parent first, with zeroed uoffset slots
//! that are patched once each child has been placed after it. Every uoffset
//! therefore points forward, as the format requires (uoffsets are unsigned), and
//! each vtable sits just before its table (a positive soffset).
//!
//! The reader treats the buffer as hostile: every table, vtable, field, vector and
//! string is checked to lie inside the buffer before a byte of it is read, so a
//! corrupt buffer yields `error.InvalidFlatbuffer` plus a Diagnostic, never an
//! out-of-bounds access. Scalars are read with explicit little-endian loads, so
//! neither side depends on the alignment of the host memory.
const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

/// Largest flatbuffer either side handles: Arrow frames every flatbuffer with an
/// int32 length.
pub const buffer_bytes_max: u32 = std.math.maxInt(i32);

/// Most vtable slots a table written by `Builder.table` may use; Arrow's largest
/// table (Field) has 7.
pub const slots_max = 8;

/// One inline field of a table under construction.
pub const FieldValue = union(enum) {
    byte: u8,
    short: i16,
    int: i32,
    long: i64,
    /// A uoffset to a child object, zero until `Builder.patch` fills it.
    offset,

    fn size(value: FieldValue) u16 {
        return switch (value) {
            .byte => 1,
            .short => 2,
            .int, .offset => 4,
            .long => 8,
        };
    }
};

pub const Field = struct {
    slot: u16,
    value: FieldValue,
};

/// Where `Builder.table` put a table and the uoffset slots the caller must patch.
pub const PlacedTable = struct {
    position: u32,
    slot_positions: [slots_max]u32,

    /// The buffer position of the uoffset stored in `slot`.
    pub fn offsetSlot(placed: PlacedTable, slot: u16) u32 {
        assert(slot < slots_max);
        assert(placed.slot_positions[slot] != 0);
        return placed.slot_positions[slot];
    }
};

/// Appends one flatbuffer to the end of `output`. Positions are relative to the
/// start of the flatbuffer, which must be 8-aligned in the output so that
/// alignment within the flatbuffer is alignment within the file.
pub const Builder = struct {
    allocator: Allocator,
    output: *std.ArrayList(u8),
    start: usize,

    pub const Error = error{ OutOfMemory, TooLarge };

    /// Starts a flatbuffer at the current end of `output` and reserves its root
    /// uoffset (position 0); point it at the root table with `patch(0, ...)`.
    pub fn init(allocator: Allocator, output: *std.ArrayList(u8)) Error!Builder {
        assert(output.items.len % 8 == 0);
        var builder: Builder = .{
            .allocator = allocator,
            .output = output,
            .start = output.items.len,
        };
        try builder.int(u32, 0);
        return builder;
    }

    /// The flatbuffer bytes written so far.
    pub fn bytes(builder: *const Builder) []u8 {
        return builder.output.items[builder.start..];
    }

    /// The position the next byte will be written at.
    pub fn position(builder: *const Builder) Error!u32 {
        const written = builder.output.items.len - builder.start;
        if (written > buffer_bytes_max) return error.TooLarge;
        return @intCast(written);
    }

    /// Appends one little-endian scalar (also used for the fields of structs).
    pub fn int(builder: *Builder, comptime T: type, value: T) Error!void {
        const target = try builder.output.addManyAsArray(builder.allocator, @sizeOf(T));
        std.mem.writeInt(T, target, value, .little);
    }

    /// Appends zero bytes until position % alignment == remainder.
    fn padTo(builder: *Builder, alignment: u32, remainder: u32) Error!void {
        assert(remainder < alignment);
        const current = try builder.position();
        const padding = (alignment + remainder - current % alignment) % alignment;
        try builder.output.appendNTimes(builder.allocator, 0, padding);
    }

    /// Points the uoffset at `slot_position` at the object at `target`, which
    /// must come after it.
    pub fn patch(builder: *Builder, slot_position: u32, target: u32) void {
        assert(target > slot_position);
        const slot = builder.bytes()[slot_position..][0..4];
        assert(std.mem.readInt(u32, slot, .little) == 0);
        std.mem.writeInt(u32, slot, target - slot_position, .little);
    }

    /// Writes a vtable and the table after it. Inline fields are laid out from the
    /// widest to the narrowest after the soffset, and the table starts at 4 mod 8,
    /// so every field is naturally aligned without padding between fields.
    pub fn table(builder: *Builder, fields: []const Field) Error!PlacedTable {
        assert(fields.len <= slots_max);
        var field_offsets: [slots_max]u16 = @splat(0);
        var slot_count: u16 = 0;
        var inline_bytes: u16 = 4;
        for ([_]u16{ 8, 4, 2, 1 }) |size| {
            for (fields) |field| {
                if (field.value.size() != size) continue;
                assert(field.slot < slots_max);
                assert(field_offsets[field.slot] == 0);
                field_offsets[field.slot] = inline_bytes;
                inline_bytes += size;
                slot_count = @max(slot_count, field.slot + 1);
            }
        }

        try builder.padTo(2, 0);
        const vtable_position = try builder.position();
        try builder.int(u16, 4 + 2 * slot_count);
        try builder.int(u16, inline_bytes);
        for (field_offsets[0..slot_count]) |field_offset| try builder.int(u16, field_offset);

        try builder.padTo(8, 4);
        const table_position = try builder.position();
        try builder.int(i32, @intCast(table_position - vtable_position));
        var placed: PlacedTable = .{ .position = table_position, .slot_positions = @splat(0) };
        for ([_]u16{ 8, 4, 2, 1 }) |size| {
            for (fields) |field| {
                if (field.value.size() != size) continue;
                assert(try builder.position() == table_position + field_offsets[field.slot]);
                switch (field.value) {
                    .byte => |value| try builder.int(u8, value),
                    .short => |value| try builder.int(i16, value),
                    .int => |value| try builder.int(i32, value),
                    .long => |value| try builder.int(i64, value),
                    .offset => {
                        placed.slot_positions[field.slot] = try builder.position();
                        try builder.int(u32, 0);
                    },
                }
            }
        }
        assert(try builder.position() == table_position + inline_bytes);
        return placed;
    }

    /// Writes a NUL-terminated string and returns its position.
    pub fn string(builder: *Builder, text: []const u8) Error!u32 {
        if (text.len > buffer_bytes_max) return error.TooLarge;
        try builder.padTo(4, 0);
        const string_position = try builder.position();
        try builder.int(u32, @intCast(text.len));
        try builder.output.appendSlice(builder.allocator, text);
        try builder.output.append(builder.allocator, 0);
        return string_position;
    }

    /// Writes the length of a vector of 8-aligned structs and returns its position;
    /// the caller appends the `count` structs right after with `int`.
    pub fn structVector(builder: *Builder, count: u32) Error!u32 {
        try builder.padTo(8, 4);
        const vector_position = try builder.position();
        try builder.int(u32, count);
        return vector_position;
    }

    /// Writes a vector of `count` zeroed uoffsets and returns its position; element
    /// `i`'s slot is at `vector_position + 4 + 4 * i`.
    pub fn offsetVector(builder: *Builder, count: u32) Error!u32 {
        try builder.padTo(4, 0);
        const vector_position = try builder.position();
        try builder.int(u32, count);
        for (0..count) |_| try builder.int(u32, 0);
        return vector_position;
    }
};

pub const ReadError = error{InvalidFlatbuffer};

/// A flatbuffer from an untrusted source. `context` names it in messages
/// ("footer", "record batch 3 metadata").
pub const Reader = struct {
    bytes: []const u8,
    diagnostic: *Diagnostic,
    context: []const u8,

    fn fail(reader: Reader, comptime format: []const u8, args: anytype) ReadError {
        reader.diagnostic.set("{s} flatbuffer is malformed: " ++ format, .{reader.context} ++ args);
        return error.InvalidFlatbuffer;
    }

    /// The root table, named by the uoffset at position 0.
    pub fn root(reader: Reader) ReadError!Table {
        if (reader.bytes.len > buffer_bytes_max) {
            return reader.fail(
                "{d} bytes exceed the {d}-byte limit",
                .{ reader.bytes.len, buffer_bytes_max },
            );
        }
        return reader.tableAt(try reader.follow(0));
    }

    /// The position a uoffset stored at `position` points to.
    fn follow(reader: Reader, position: u64) ReadError!u64 {
        const uoffset = try reader.readAt(u32, position);
        return position + uoffset;
    }

    fn readAt(reader: Reader, comptime T: type, position: u64) ReadError!T {
        if (position > reader.bytes.len or reader.bytes.len - position < @sizeOf(T)) {
            return reader.fail(
                "{d}-byte read at {d} runs past the end ({d} bytes)",
                .{ @sizeOf(T), position, reader.bytes.len },
            );
        }
        const start: usize = @intCast(position);
        return std.mem.readInt(T, reader.bytes[start..][0..@sizeOf(T)], .little);
    }

    fn tableAt(reader: Reader, position: u64) ReadError!Table {
        const soffset = try reader.readAt(i32, position);
        const vtable_position = @as(i64, @intCast(position)) - soffset;
        if (vtable_position < 0 or vtable_position > reader.bytes.len) {
            return reader.fail("table at {d} has its vtable outside the buffer", .{position});
        }
        const vtable_bytes = try reader.readAt(u16, @intCast(vtable_position));
        const inline_bytes = try reader.readAt(u16, @as(u64, @intCast(vtable_position)) + 2);
        if (vtable_bytes < 4 or vtable_bytes % 2 != 0 or
            reader.bytes.len - @as(u64, @intCast(vtable_position)) < vtable_bytes)
        {
            return reader.fail(
                "table at {d} has a vtable of {d} bytes",
                .{ position, vtable_bytes },
            );
        }
        if (inline_bytes < 4 or reader.bytes.len - position < inline_bytes) {
            return reader.fail("table at {d} claims {d} inline bytes", .{ position, inline_bytes });
        }
        return .{
            .reader = reader,
            .position = @intCast(position),
            .vtable_position = @intCast(vtable_position),
            .vtable_bytes = vtable_bytes,
            .inline_bytes = inline_bytes,
        };
    }

    fn vectorAt(reader: Reader, position: u64, element_bytes: u32) ReadError!Vector {
        const count = try reader.readAt(u32, position);
        const elements_position = position + 4;
        if (reader.bytes.len - elements_position < @as(u64, count) * element_bytes) {
            return reader.fail("vector at {d} of {d} x {d} bytes runs past the end ({d} bytes)", .{
                position, count, element_bytes, reader.bytes.len,
            });
        }
        return .{
            .reader = reader,
            .position = @intCast(elements_position),
            .len = count,
            .element_bytes = element_bytes,
        };
    }
};

/// A table whose vtable and inline part were checked to lie inside the buffer.
pub const Table = struct {
    reader: Reader,
    position: u32,
    vtable_position: u32,
    vtable_bytes: u16,
    inline_bytes: u16,

    /// The buffer position of the field in `slot`, null if absent. A present
    /// field of `size` bytes must lie inside the table's inline part.
    fn fieldPosition(table: Table, slot: u16, size: u16) ReadError!?u32 {
        const entry = 4 + 2 * @as(u32, slot);
        if (entry + 2 > table.vtable_bytes) return null;
        const field_offset = try table.reader.readAt(u16, table.vtable_position + entry);
        if (field_offset == 0) return null;
        if (field_offset < 4 or @as(u32, field_offset) + size > table.inline_bytes) {
            return table.reader.fail(
                "table at {d} has field {d} at offset {d} outside its {d} inline bytes",
                .{ table.position, slot, field_offset, table.inline_bytes },
            );
        }
        return table.position + field_offset;
    }

    /// True when the field in `slot` is present, whatever its type.
    pub fn has(table: Table, slot: u16) ReadError!bool {
        return try table.fieldPosition(slot, 1) != null;
    }

    /// A scalar field, or `default` when absent.
    pub fn scalar(table: Table, comptime T: type, slot: u16, default: T) ReadError!T {
        const position = try table.fieldPosition(slot, @sizeOf(T)) orelse return default;
        return table.reader.readAt(T, position);
    }

    /// The table a uoffset field points to, or null when absent.
    pub fn child(table: Table, slot: u16) ReadError!?Table {
        const position = try table.fieldPosition(slot, 4) orelse return null;
        return try table.reader.tableAt(try table.reader.follow(position));
    }

    /// The vector of `element_bytes`-sized elements a uoffset field points to.
    pub fn vector(table: Table, slot: u16, element_bytes: u32) ReadError!?Vector {
        const position = try table.fieldPosition(slot, 4) orelse return null;
        return try table.reader.vectorAt(try table.reader.follow(position), element_bytes);
    }

    /// The string a uoffset field points to (without its NUL), or null when absent.
    pub fn string(table: Table, slot: u16) ReadError!?[]const u8 {
        const bytes_vector = try table.vector(slot, 1) orelse return null;
        return bytes_vector.reader.bytes[bytes_vector.position..][0..bytes_vector.len];
    }
};

/// A vector whose elements were checked to lie inside the buffer.
pub const Vector = struct {
    reader: Reader,
    position: u32,
    len: u32,
    element_bytes: u32,

    /// The bytes of struct element `index`.
    pub fn element(vector: Vector, index: u32) []const u8 {
        assert(index < vector.len);
        const start = vector.position + @as(usize, index) * vector.element_bytes;
        return vector.reader.bytes[start..][0..vector.element_bytes];
    }

    /// The table uoffset element `index` points to.
    pub fn table(vector: Vector, index: u32) ReadError!Table {
        assert(vector.element_bytes == 4);
        assert(index < vector.len);
        const slot_position = @as(u64, vector.position) + @as(u64, index) * 4;
        return vector.reader.tableAt(try vector.reader.follow(slot_position));
    }
};

/// Reads field `T` at byte `offset` of a struct element.
pub fn structField(comptime T: type, element: []const u8, offset: usize) T {
    return std.mem.readInt(T, element[offset..][0..@sizeOf(T)], .little);
}

const testing = std.testing;

test "a built table reads back field by field" {
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var builder: Builder = try .init(testing.allocator, &output);
    const placed = try builder.table(&.{
        .{ .slot = 0, .value = .{ .short = 4 } },
        .{ .slot = 1, .value = .{ .byte = 3 } },
        .{ .slot = 2, .value = .offset },
        .{ .slot = 3, .value = .{ .long = -5 } },
        .{ .slot = 5, .value = .offset },
    });
    builder.patch(0, placed.position);
    builder.patch(placed.offsetSlot(2), try builder.string("name"));
    const vector_position = try builder.structVector(1);
    try builder.int(i64, 7);
    try builder.int(i64, 9);
    builder.patch(placed.offsetSlot(5), vector_position);

    var diagnostic: Diagnostic = .{};
    const reader: Reader = .{
        .bytes = builder.bytes(),
        .diagnostic = &diagnostic,
        .context = "test",
    };
    const root = try reader.root();
    try testing.expectEqual(@as(i16, 4), try root.scalar(i16, 0, 0));
    try testing.expectEqual(@as(u8, 3), try root.scalar(u8, 1, 0));
    try testing.expectEqualStrings("name", (try root.string(2)).?);
    try testing.expectEqual(@as(i64, -5), try root.scalar(i64, 3, 0));
    try testing.expectEqual(@as(i32, 11), try root.scalar(i32, 4, 11));
    try testing.expect(!try root.has(4));
    try testing.expect(!try root.has(40));
    const vector = (try root.vector(5, 16)).?;
    try testing.expectEqual(@as(u32, 1), vector.len);
    try testing.expectEqual(@as(i64, 9), structField(i64, vector.element(0), 8));
    try testing.expectEqual(@as(usize, 0), (vector.position) % 8);
}

test "a uoffset pointing outside the buffer is an error, not a crash" {
    var diagnostic: Diagnostic = .{};
    const bytes = [_]u8{ 0xf0, 0xff, 0xff, 0x7f, 0, 0, 0, 0 };
    const reader: Reader = .{ .bytes = &bytes, .diagnostic = &diagnostic, .context = "test" };
    try testing.expectError(error.InvalidFlatbuffer, reader.root());
    try testing.expect(
        std.mem.indexOf(u8, diagnostic.message(), "test flatbuffer is malformed") != null,
    );
}
