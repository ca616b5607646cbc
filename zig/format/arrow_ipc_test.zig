//! Tests of the Arrow IPC file format that write a file (arrow_ipc_write.zig) and
//! read it back (arrow_ipc_read.zig): round trips of every column kind, record batch
//! splitting, and truncated, corrupted or hand-built files the reader must reject.
const std = @import("std");
const testing = std.testing;
const Allocator = std.mem.Allocator;

const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const flatbuffers = @import("../codec/flatbuffers.zig");
const arrow_ipc = @import("arrow_ipc.zig");
const magic = arrow_ipc.magic;
const file_header = arrow_ipc.file_header;
const file_trailer_bytes = arrow_ipc.file_trailer_bytes;
const continuation_marker = arrow_ipc.continuation_marker;
const metadata_version_v5 = arrow_ipc.metadata_version_v5;
const header_record_batch = arrow_ipc.header_record_batch;
const type_int = arrow_ipc.type_int;
const type_floating_point = arrow_ipc.type_floating_point;
const schema_slots = arrow_ipc.schema_slots;
const field_slots = arrow_ipc.field_slots;
const int_slots = arrow_ipc.int_slots;
const floating_point_slots = arrow_ipc.floating_point_slots;
const record_batch_slots = arrow_ipc.record_batch_slots;
const footer_slots = arrow_ipc.footer_slots;
const arrow_ipc_write = @import("arrow_ipc_write.zig");
const writeFile = arrow_ipc_write.writeFile;
const writeFileWithBatchLimit = arrow_ipc_write.writeFileWithBatchLimit;
const appendInt = arrow_ipc_write.appendInt;
const beginMessage = arrow_ipc_write.beginMessage;
const finishMessage = arrow_ipc_write.finishMessage;
const writeMessageTable = arrow_ipc_write.writeMessageTable;
const arrow_ipc_read = @import("arrow_ipc_read.zig");
const readFile = arrow_ipc_read.readFile;
const readFooter = arrow_ipc_read.readFooter;
const ReadError = arrow_ipc_read.ReadError;
const metadata_types = @import("metadata_types.zig");
const Column = metadata_types.Column;
const ColumnValues = metadata_types.ColumnValues;

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
        try testing.expectEqual(
            std.meta.activeTag(expected.values),
            std.meta.activeTag(actual.values),
        );
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
        try testing.expectError(
            error.InvalidArrow,
            readFile(testing.allocator, file[0..length], &diagnostic),
        );
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
    const block = try appendTestBatch(allocator, &output, spec);
    const footer_start = output.items.len + 8;
    try appendTestFooter(allocator, &output, spec, block);
    try appendInt(allocator, &output, i32, @intCast(output.items.len - footer_start));
    try output.appendSlice(allocator, magic);
    return output.toOwnedSlice(allocator);
}

const TestBlock = struct { message_offset: u64, metadata_bytes: u64 };

/// The file's one record batch: one row of column `x`, 8 body bytes.
fn appendTestBatch(allocator: Allocator, output: *std.ArrayList(u8), spec: TestFile) !TestBlock {
    const message_offset = try beginMessage(allocator, output);
    var message: flatbuffers.Builder = try .init(allocator, output);
    const header_slot = try writeMessageTable(&message, header_record_batch, 8);
    var batch_fields: [4]flatbuffers.Field = .{
        .{ .slot = record_batch_slots.length, .value = .{ .long = 1 } },
        .{ .slot = record_batch_slots.nodes, .value = .offset },
        .{ .slot = record_batch_slots.buffers, .value = .offset },
        .{ .slot = record_batch_slots.compression, .value = .offset },
    };
    const batch = try message.table(
        batch_fields[0 .. @as(usize, 3) + @intFromBool(spec.compressed)],
    );
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
    const metadata_bytes = try finishMessage(allocator, output, message_offset);
    try appendInt(allocator, output, i64, 42);
    return .{ .message_offset = message_offset, .metadata_bytes = metadata_bytes };
}

/// The footer: schema of the one column `x` as `spec` describes it, and the batch's block.
fn appendTestFooter(
    allocator: Allocator,
    output: *std.ArrayList(u8),
    spec: TestFile,
    block: TestBlock,
) !void {
    try appendInt(allocator, output, u32, continuation_marker);
    try appendInt(allocator, output, u32, 0);
    var footer: flatbuffers.Builder = try .init(allocator, output);
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
    const field = try footer.table(
        field_fields[0 .. @as(usize, 3) + @intFromBool(spec.dictionary)],
    );
    footer.patch(fields + 4, field.position);
    footer.patch(field.offsetSlot(field_slots.name), try footer.string("x"));
    footer.patch(
        field.offsetSlot(field_slots.type_table),
        (try footer.table(spec.type_fields)).position,
    );
    if (spec.dictionary) {
        footer.patch(field.offsetSlot(field_slots.dictionary), (try footer.table(&.{})).position);
    }
    const blocks = try footer.structVector(1);
    try footer.int(i64, @intCast(block.message_offset));
    try footer.int(i32, @intCast(block.metadata_bytes));
    try footer.int(i32, 0);
    try footer.int(i64, 8);
    footer.patch(footer_table.offsetSlot(footer_slots.record_batches), blocks);
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
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type Int32; expected bool, " ++
        "int64, float64 or utf8");
    try expectRejected(.{ .type_fields = &.{
        .{ .slot = int_slots.bit_width, .value = .{ .int = 64 } },
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type UInt64; expected " ++
        "bool, int64, float64 or utf8");
    try expectRejected(.{ .type_tag = type_floating_point, .type_fields = &.{
        .{ .slot = floating_point_slots.precision, .value = .{ .short = 1 } },
    } }, error.UnsupportedArrow, "column 'x' has unsupported Arrow type Float32; expected " ++
        "bool, int64, float64 or utf8");
    try expectRejected(
        .{ .type_tag = 4, .type_fields = &.{} },
        error.UnsupportedArrow,
        "column 'x' has unsupported Arrow type Binary; expected bool, int64, float64 or utf8",
    );
    try expectRejected(
        .{ .type_tag = 200, .type_fields = &.{} },
        error.UnsupportedArrow,
        "column 'x' has unsupported Arrow type with type tag 200; expected bool, int64, " ++
            "float64 or utf8",
    );
    try expectRejected(
        .{ .null_count = 1 },
        error.UnsupportedArrow,
        "column 'x' contains nulls (1 in record batch 0); metadata columns must not be null",
    );
    try expectRejected(
        .{ .dictionary = true },
        error.UnsupportedArrow,
        "column 'x' is dictionary-encoded; expected plain bool, int64, float64 or utf8",
    );
    try expectRejected(
        .{ .compressed = true },
        error.UnsupportedArrow,
        "compressed record batches are not supported (record batch 0)",
    );
    try expectRejected(
        .{ .endianness = 1 },
        error.UnsupportedArrow,
        "big-endian Arrow files are not supported",
    );
}

test "broken string offsets and UTF-8 are rejected with the column name" {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    const columns = [_]Column{
        .{ .name = "label", .values = try stringValues(arena.allocator(), &.{ "ab", "c" }) },
    };
    const file = try writeFile(arena.allocator(), &columns, 2);
    // The body is the last thing before the end-of-stream marker: offsets {0, 2, 3}
    // padded to 16 bytes, then "abc" padded to 8.
    const eos = std.mem.indexOf(u8, file, &.{ 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0 }).?;
    const data = eos - 8;
    const offsets = data - 16;
    try testing.expectEqualSlices(u8, "abc", file[data..][0..3]);

    const cases = [_]struct { position: usize, byte: u8, message: []const u8 }{
        .{
            .position = offsets + 8,
            .byte = 1,
            .message = "column 'label' has string offset 1 at position 2 of record batch 0, " ++
                "which is decreasing or outside its 3-byte data buffer",
        },
        .{
            .position = offsets + 4,
            .byte = 4,
            .message = "column 'label' has string offset 4 at position 1 of record batch 0, " ++
                "which is decreasing or outside its 3-byte data buffer",
        },
        .{
            .position = data + 1,
            .byte = 0xc3,
            .message = "column 'label' has invalid UTF-8 in row 0 of record batch 0",
        },
    };
    for (cases) |case| {
        const corrupted = try arena.allocator().dupe(u8, file);
        corrupted[case.position] = case.byte;
        var diagnostic: Diagnostic = .{};
        try testing.expectError(
            error.InvalidArrow,
            readFile(testing.allocator, corrupted, &diagnostic),
        );
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
    try testing.expectEqualStrings(
        "missing 'ARROW1' magic at the start; not an Arrow IPC file",
        diagnostic.message(),
    );

    const long_footer = try arena.allocator().dupe(u8, file);
    std.mem.writeInt(
        i32,
        long_footer[file.len - file_trailer_bytes ..][0..4],
        @intCast(file.len),
        .little,
    );
    try testing.expectError(
        error.InvalidArrow,
        readFile(testing.allocator, long_footer, &diagnostic),
    );
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), "footer length"));
}
