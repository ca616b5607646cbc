//! Metadata pushed by column (`drt_writer_push_columns`) instead of as JSON:
//! each column is checked (pointers, offsets, UTF-8, finite floats, 0/1 bools)
//! and matched to the writer's schema, or fixes it for the first batch.
const std = @import("std");
const types = @import("metadata_types.zig");
const metadata_json = @import("metadata_json.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;

pub const Error = error{ InvalidArgument, InvalidInput, OutOfMemory };

/// Mirrors `drt_push_column` in dataset_rt.h.
pub const PushColumn = extern struct {
    name: ?[*]const u8,
    name_len: u64,
    /// 0 bool (u8 0/1 per row), 1 int (i64), 2 float (f64), 3 string.
    kind: u32,
    reserved: u32 = 0,
    values: ?*const anyopaque,
    /// string only: rows + 1 u64 offsets into `bytes`, starting at 0.
    offsets: ?*const anyopaque,
    bytes: ?[*]const u8,
};

/// The column's `rows` values as a view into the caller's memory, after
/// checking them; errors name the column and, for a bad value, the sample
/// (`first_sample` + row).
pub fn view(
    column: PushColumn,
    rows: usize,
    first_sample: u64,
    diagnostic: *Diagnostic,
) Error!types.Column {
    const name = try columnName(column, diagnostic);
    if (column.kind > 3) {
        diagnostic.set(
            "metadata column '{f}' has unknown kind {d}",
            .{ Excerpt.ofName(name), column.kind },
        );
        return error.InvalidArgument;
    }
    const kind: types.Kind = @fromBackingInt(@intCast(column.kind));
    const values: types.ColumnValues = switch (kind) {
        .string => .{ .string = try viewStrings(column, name, rows, first_sample, diagnostic) },
        else => try viewValues(column, kind, name, rows, first_sample, diagnostic),
    };
    return .{ .name = name, .values = values };
}

fn columnName(column: PushColumn, diagnostic: *Diagnostic) Error![]const u8 {
    const name_ptr = column.name orelse {
        diagnostic.set("metadata column name is NULL", .{});
        return error.InvalidArgument;
    };
    const name = name_ptr[0..@intCast(column.name_len)];
    if (!std.unicode.utf8ValidateSlice(name)) {
        diagnostic.set("metadata column name is not valid UTF-8", .{});
        return error.InvalidInput;
    }
    return name;
}

/// A string column's offsets (aligned, from 0, never decreasing) and its UTF-8 bytes.
fn viewStrings(
    column: PushColumn,
    name: []const u8,
    rows: usize,
    first_sample: u64,
    diagnostic: *Diagnostic,
) Error!types.StringValues {
    const offsets_ptr = column.offsets orelse return nullPointer(name, "offsets", diagnostic);
    if (@intFromPtr(offsets_ptr) % 8 != 0) {
        diagnostic.set(
            "metadata column '{f}': offsets must be 8-byte aligned",
            .{Excerpt.ofName(name)},
        );
        return error.InvalidArgument;
    }
    const offsets = @as([*]const u64, @ptrCast(@alignCast(offsets_ptr)))[0 .. rows + 1];
    if (offsets[0] != 0) {
        diagnostic.set("metadata column '{f}': offsets must start at 0", .{Excerpt.ofName(name)});
        return error.InvalidArgument;
    }
    for (offsets[0..rows], offsets[1..]) |start, end| {
        if (end < start) {
            diagnostic.set(
                "metadata column '{f}': offsets must not decrease",
                .{Excerpt.ofName(name)},
            );
            return error.InvalidArgument;
        }
    }
    const total: usize = @intCast(offsets[rows]);
    const bytes: []const u8 = if (total == 0) &.{} else blk: {
        const bytes_ptr = column.bytes orelse return nullPointer(name, "bytes", diagnostic);
        break :blk bytes_ptr[0..total];
    };
    for (0..rows) |row| {
        if (!std.unicode.utf8ValidateSlice(
            bytes[@intCast(offsets[row])..@intCast(offsets[row + 1])],
        )) {
            diagnostic.set(
                "sample {d}: metadata field '{f}' is not valid UTF-8",
                .{ first_sample + row, Excerpt.ofName(name) },
            );
            return error.InvalidInput;
        }
    }
    return .{ .offsets = offsets, .bytes = bytes };
}

/// A bool, int or float column's values: bools 0 or 1, floats finite.
fn viewValues(
    column: PushColumn,
    kind: types.Kind,
    name: []const u8,
    rows: usize,
    first_sample: u64,
    diagnostic: *Diagnostic,
) Error!types.ColumnValues {
    const values = column.values orelse return nullPointer(name, "values", diagnostic);
    if (kind != .bool and @intFromPtr(values) % 8 != 0) {
        diagnostic.set(
            "metadata column '{f}': values must be 8-byte aligned",
            .{Excerpt.ofName(name)},
        );
        return error.InvalidArgument;
    }
    switch (kind) {
        .bool => {
            const flags = @as([*]const u8, @ptrCast(values))[0..rows];
            for (flags, 0..) |flag, row| {
                if (flag > 1) {
                    diagnostic.set(
                        "sample {d}: metadata field '{f}' is a bool stored as {d}, not 0 or 1",
                        .{ first_sample + row, Excerpt.ofName(name), flag },
                    );
                    return error.InvalidInput;
                }
            }
            return .{ .bool = flags };
        },
        .int => return .{ .int = @as([*]const i64, @ptrCast(@alignCast(values)))[0..rows] },
        .float => {
            const floats = @as([*]const f64, @ptrCast(@alignCast(values)))[0..rows];
            for (floats, 0..) |value, row| {
                if (!std.math.isFinite(value)) {
                    diagnostic.set(
                        "sample {d}: metadata field '{f}' must be a finite float, got {d}",
                        .{ first_sample + row, Excerpt.ofName(name), value },
                    );
                    return error.InvalidInput;
                }
            }
            return .{ .float = floats };
        },
        .string => unreachable,
    }
}

fn nullPointer(name: []const u8, what: []const u8, diagnostic: *Diagnostic) Error {
    diagnostic.set("metadata column '{f}': {s} is NULL", .{ Excerpt.ofName(name), what });
    return error.InvalidArgument;
}

/// The schema the columns fix (names sorted bytewise, as `metadata_json.inferSchema`
/// does for the first JSON object). Release with `metadata_json.freeSchema`.
pub fn inferSchema(
    allocator: std.mem.Allocator,
    columns: []const types.Column,
    diagnostic: *Diagnostic,
) Error![]types.Field {
    const fields = try allocator.alloc(types.Field, columns.len);
    defer allocator.free(fields);
    for (columns, fields) |column, *field| field.* = .{
        .name = column.name,
        .kind = std.meta.activeTag(column.values),
    };
    return metadata_json.ownedSchema(allocator, fields, diagnostic) catch |err| switch (err) {
        error.InvalidMetadata => error.InvalidInput,
        error.OutOfMemory => error.OutOfMemory,
    };
}

/// Puts the columns in schema order into `ordered`; every field must come
/// exactly once with its kind.
pub fn orderBySchema(
    schema: []const types.Field,
    columns: []const types.Column,
    ordered: []types.ColumnValues,
    diagnostic: *Diagnostic,
) Error!void {
    std.debug.assert(ordered.len == schema.len);
    if (columns.len != schema.len) {
        diagnostic.set("metadata has {d} fields, the schema {d}", .{ columns.len, schema.len });
        return error.InvalidInput;
    }
    for (schema, ordered) |field, *out| {
        var found: ?types.ColumnValues = null;
        for (columns) |column| {
            if (!std.mem.eql(u8, column.name, field.name)) continue;
            if (found != null) {
                diagnostic.set("metadata field '{f}' appears twice", .{Excerpt.ofName(field.name)});
                return error.InvalidInput;
            }
            found = column.values;
        }
        const values = found orelse {
            diagnostic.set("metadata is missing key '{f}'", .{Excerpt.ofName(field.name)});
            return error.InvalidInput;
        };
        const kind = std.meta.activeTag(values);
        if (kind != field.kind) {
            diagnostic.set(
                "metadata field '{f}' changed type from {s} to {s}",
                .{ Excerpt.ofName(field.name), field.kind.name(), kind.name() },
            );
            return error.InvalidInput;
        }
        out.* = values;
    }
}

test "columns fix a sorted schema and are matched to it in schema order" {
    const allocator = std.testing.allocator;
    var diagnostic: Diagnostic = .{};
    const ints = [_]i64{ 1, 2 };
    const offsets = [_]u64{ 0, 1, 3 };
    const pushed = [_]PushColumn{
        .{ .name = "z", .name_len = 1, .kind = 1, .values = &ints, .offsets = null, .bytes = null },
        .{
            .name = "a",
            .name_len = 1,
            .kind = 3,
            .values = null,
            .offsets = &offsets,
            .bytes = "xyz",
        },
    };
    var columns: [2]types.Column = undefined;
    for (pushed, &columns) |column, *out| out.* = try view(column, 2, 0, &diagnostic);
    const schema = try inferSchema(allocator, &columns, &diagnostic);
    defer metadata_json.freeSchema(allocator, schema);
    try std.testing.expectEqualStrings("a", schema[0].name);
    try std.testing.expectEqual(types.Kind.int, schema[1].kind);
    var ordered: [2]types.ColumnValues = undefined;
    try orderBySchema(schema, &columns, &ordered, &diagnostic);
    try std.testing.expectEqualStrings("yz", ordered[0].get(1).string);
    try std.testing.expectEqual(@as(i64, 2), ordered[1].get(1).int);
}

test "bad values name the sample and the field" {
    var diagnostic: Diagnostic = .{};
    const floats = [_]f64{ 1.5, std.math.inf(f64) };
    const column: PushColumn = .{
        .name = "s",
        .name_len = 1,
        .kind = 2,
        .values = &floats,
        .offsets = null,
        .bytes = null,
    };
    try std.testing.expectError(error.InvalidInput, view(column, 2, 10, &diagnostic));
    try std.testing.expect(
        std.mem.indexOf(u8, diagnostic.message(), "sample 11: metadata field 's'") != null,
    );
    const bad_utf8_offsets = [_]u64{ 0, 1 };
    const text: PushColumn = .{
        .name = "t",
        .name_len = 1,
        .kind = 3,
        .values = null,
        .offsets = &bad_utf8_offsets,
        .bytes = "\xff",
    };
    try std.testing.expectError(error.InvalidInput, view(text, 1, 0, &diagnostic));
    const ints = [_]i64{ 1, 2, 3 };
    const misaligned: *const anyopaque = @as([*]const u8, @ptrCast(&ints)) + 1;
    const shifted: PushColumn = .{
        .name = "i",
        .name_len = 1,
        .kind = 1,
        .values = misaligned,
        .offsets = null,
        .bytes = null,
    };
    try std.testing.expectError(error.InvalidArgument, view(shifted, 2, 0, &diagnostic));
    const flags = [_]u8{2};
    const flag: PushColumn = .{
        .name = "b",
        .name_len = 1,
        .kind = 0,
        .values = &flags,
        .offsets = null,
        .bytes = null,
    };
    try std.testing.expectError(error.InvalidInput, view(flag, 1, 0, &diagnostic));
}
