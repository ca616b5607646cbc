//! A growable column of metadata values, appended row by row (or chunk by
//! chunk) and viewed as `ColumnValues` for the Arrow writer.
const std = @import("std");
const types = @import("metadata_types.zig");

pub const ColumnBuilder = union(types.Kind) {
    bool: std.ArrayList(u8),
    int: std.ArrayList(i64),
    float: std.ArrayList(f64),
    string: Strings,

    pub const Strings = struct {
        offsets: std.ArrayList(u64),
        bytes: std.ArrayList(u8),
    };

    pub fn init(allocator: std.mem.Allocator, kind: types.Kind) !ColumnBuilder {
        return switch (kind) {
            .bool => .{ .bool = .empty },
            .int => .{ .int = .empty },
            .float => .{ .float = .empty },
            .string => blk: {
                var offsets: std.ArrayList(u64) = .empty;
                try offsets.append(allocator, 0);
                break :blk .{ .string = .{ .offsets = offsets, .bytes = .empty } };
            },
        };
    }

    pub fn deinit(builder: *ColumnBuilder, allocator: std.mem.Allocator) void {
        switch (builder.*) {
            .bool => |*list| list.deinit(allocator),
            .int => |*list| list.deinit(allocator),
            .float => |*list| list.deinit(allocator),
            .string => |*strings| {
                strings.offsets.deinit(allocator);
                strings.bytes.deinit(allocator);
            },
        }
    }

    /// Keeps the first `rows` rows (at most `rowCount()`), dropping the rest.
    pub fn truncate(builder: *ColumnBuilder, rows: usize) void {
        std.debug.assert(rows <= builder.rowCount());
        switch (builder.*) {
            .bool => |*list| list.shrinkRetainingCapacity(rows),
            .int => |*list| list.shrinkRetainingCapacity(rows),
            .float => |*list| list.shrinkRetainingCapacity(rows),
            .string => |*strings| {
                strings.offsets.shrinkRetainingCapacity(rows + 1);
                strings.bytes.shrinkRetainingCapacity(@intCast(strings.offsets.items[rows]));
            },
        }
    }

    /// Removes every row, keeping the memory.
    pub fn clear(builder: *ColumnBuilder) void {
        switch (builder.*) {
            .bool => |*list| list.clearRetainingCapacity(),
            .int => |*list| list.clearRetainingCapacity(),
            .float => |*list| list.clearRetainingCapacity(),
            .string => |*strings| {
                strings.offsets.shrinkRetainingCapacity(1);
                strings.bytes.clearRetainingCapacity();
            },
        }
    }

    /// Appends one value; its kind must be the column's (checked by the caller's schema match).
    pub fn append(builder: *ColumnBuilder, allocator: std.mem.Allocator, value: types.Value) !void {
        std.debug.assert(std.meta.activeTag(builder.*) == std.meta.activeTag(value));
        switch (builder.*) {
            .bool => |*list| try list.append(allocator, @intFromBool(value.bool)),
            .int => |*list| try list.append(allocator, value.int),
            .float => |*list| try list.append(allocator, value.float),
            .string => |*strings| {
                try strings.bytes.appendSlice(allocator, value.string);
                try strings.offsets.append(allocator, strings.bytes.items.len);
            },
        }
    }

    /// Appends every row of `other`, a column of the same kind.
    pub fn appendColumn(
        builder: *ColumnBuilder,
        allocator: std.mem.Allocator,
        other: *const ColumnBuilder,
    ) !void {
        try builder.appendValues(allocator, other.view());
    }

    /// Makes room for `rows` rows in all (string bytes excepted), so appending
    /// them does not reallocate: a growing list briefly holds two copies.
    pub fn reserve(builder: *ColumnBuilder, allocator: std.mem.Allocator, rows: usize) !void {
        switch (builder.*) {
            .bool => |*list| try list.ensureTotalCapacityPrecise(allocator, rows),
            .int => |*list| try list.ensureTotalCapacityPrecise(allocator, rows),
            .float => |*list| try list.ensureTotalCapacityPrecise(allocator, rows),
            .string => |*strings| try strings.offsets.ensureTotalCapacityPrecise(
                allocator,
                rows + 1,
            ),
        }
    }

    /// Appends every row of `values`, a column of the same kind, in bulk.
    pub fn appendValues(
        builder: *ColumnBuilder,
        allocator: std.mem.Allocator,
        values: types.ColumnValues,
    ) !void {
        std.debug.assert(std.meta.activeTag(builder.*) == std.meta.activeTag(values));
        switch (builder.*) {
            .bool => |*list| try list.appendSlice(allocator, values.bool),
            .int => |*list| try list.appendSlice(allocator, values.int),
            .float => |*list| try list.appendSlice(allocator, values.float),
            .string => |*strings| {
                const source = values.string;
                const first: usize = @intCast(source.offsets[0]);
                const last: usize = @intCast(source.offsets[source.offsets.len - 1]);
                const base = strings.bytes.items.len;
                try strings.bytes.appendSlice(allocator, source.bytes[first..last]);
                try strings.offsets.ensureUnusedCapacity(allocator, source.offsets.len - 1);
                for (source.offsets[1..]) |offset| strings.offsets.appendAssumeCapacity(
                    base + (offset - first),
                );
            },
        }
    }

    pub fn rowCount(builder: *const ColumnBuilder) usize {
        return builder.view().rowCount();
    }

    pub fn view(builder: *const ColumnBuilder) types.ColumnValues {
        return switch (builder.*) {
            .bool => |list| .{ .bool = list.items },
            .int => |list| .{ .int = list.items },
            .float => |list| .{ .float = list.items },
            .string => |strings| .{
                .string = .{ .offsets = strings.offsets.items, .bytes = strings.bytes.items },
            },
        };
    }
};

/// One empty column per field; release with `deinitAll`.
pub fn initAll(allocator: std.mem.Allocator, fields: []const types.Field) ![]ColumnBuilder {
    const columns = try allocator.alloc(ColumnBuilder, fields.len);
    errdefer allocator.free(columns);
    var ready: usize = 0;
    errdefer deinitAll(allocator, columns[0..ready]);
    while (ready < fields.len) : (ready += 1) columns[ready] = try ColumnBuilder.init(
        allocator,
        fields[ready].kind,
    );
    return columns;
}

/// Releases columns from `initAll` (or a prefix of them while it fails).
pub fn deinitAll(allocator: std.mem.Allocator, columns: []ColumnBuilder) void {
    for (columns) |*column| column.deinit(allocator);
}

test "columns appended row by row and chunk by chunk hold the same values" {
    const allocator = std.testing.allocator;
    var whole = try ColumnBuilder.init(allocator, .string);
    defer whole.deinit(allocator);
    var chunk = try ColumnBuilder.init(allocator, .string);
    defer chunk.deinit(allocator);
    try whole.append(allocator, .{ .string = "ab" });
    try chunk.append(allocator, .{ .string = "" });
    try chunk.append(allocator, .{ .string = "cde" });
    try whole.appendColumn(allocator, &chunk);
    const values = whole.view();
    try std.testing.expectEqual(@as(usize, 3), values.rowCount());
    try std.testing.expectEqualStrings("ab", values.get(0).string);
    try std.testing.expectEqualStrings("", values.get(1).string);
    try std.testing.expectEqualStrings("cde", values.get(2).string);

    var ints = try ColumnBuilder.init(allocator, .int);
    defer ints.deinit(allocator);
    try ints.append(allocator, .{ .int = -5 });
    try std.testing.expectEqual(@as(i64, -5), ints.view().get(0).int);
}
