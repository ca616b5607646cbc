//! The vocabulary shared by every module that touches sample metadata: the four
//! primitive kinds, one schema field, one value, and a column of values.
const std = @import("std");

/// The kinds a metadata value may have. The names are the manifest's spelling.
pub const Kind = enum(u8) {
    bool = 0,
    int = 1,
    float = 2,
    string = 3,

    pub fn name(kind: Kind) []const u8 {
        return @tagName(kind);
    }

    pub fn fromName(text: []const u8) ?Kind {
        return std.meta.stringToEnum(Kind, text);
    }

    /// The Arrow type of a column of this kind in metadata.arrow and in the
    /// metadata table, by the name `drt_dataset_set_table` uses. The one home
    /// of the rule: the table's checks and the binding both read it here.
    pub fn arrowType(kind: Kind) []const u8 {
        return switch (kind) {
            .bool => "bool",
            .int => "int64",
            .float => "float64",
            .string => "utf8",
        };
    }
};

/// One column of the metadata schema. Schemas are always sorted by name (bytewise)
/// with unique names, the order of manifest.json, metadata.arrow and the record JSON.
pub const Field = struct {
    name: []const u8,
    kind: Kind,
};

/// One metadata value. Strings are UTF-8 and borrowed from whoever owns the row.
pub const Value = union(Kind) {
    bool: bool,
    int: i64,
    float: f64,
    string: []const u8,

    /// Values compare by value: floats bit for bit after normalizing -0.0 == 0.0
    /// is *not* done, so a stored -0.0 only matches -0.0.
    pub fn eql(a: Value, b: Value) bool {
        if (std.meta.activeTag(a) != std.meta.activeTag(b)) return false;
        return switch (a) {
            .bool => |x| x == b.bool,
            .int => |x| x == b.int,
            .float => |x| @as(u64, @bitCast(x)) == @as(u64, @bitCast(b.float)),
            .string => |x| std.mem.eql(u8, x, b.string),
        };
    }
};

/// A string column: `offsets` (rows + 1, from 0) into the concatenated UTF-8 `bytes`.
pub const StringValues = struct { offsets: []const u64, bytes: []const u8 };

/// A column of `row_count` values of one kind, laid out like Arrow's buffers.
pub const ColumnValues = union(Kind) {
    /// One byte per row, 0 or 1 (not bit-packed; the Arrow codec packs and unpacks).
    bool: []const u8,
    int: []const i64,
    float: []const f64,
    /// Row i is `bytes[offsets[i]..offsets[i+1]]`; `offsets.len == row_count + 1`.
    string: StringValues,

    pub fn rowCount(values: ColumnValues) usize {
        return switch (values) {
            .bool => |v| v.len,
            .int => |v| v.len,
            .float => |v| v.len,
            .string => |v| v.offsets.len - 1,
        };
    }

    pub fn get(values: ColumnValues, row: usize) Value {
        return switch (values) {
            .bool => |v| .{ .bool = v[row] != 0 },
            .int => |v| .{ .int = v[row] },
            .float => |v| .{ .float = v[row] },
            .string => |v| .{
                .string = v.bytes[@intCast(v.offsets[row])..@intCast(v.offsets[row + 1])],
            },
        };
    }
};

pub const Column = struct {
    name: []const u8,
    values: ColumnValues,
};

/// True when `fields` is sorted bytewise by name with no duplicates.
pub fn isSortedUnique(fields: []const Field) bool {
    if (fields.len < 2) return true;
    for (fields[0 .. fields.len - 1], fields[1..]) |a, b| {
        if (std.mem.order(u8, a.name, b.name) != .lt) return false;
    }
    return true;
}

/// Where two schemas part: the first column, by name, that one of them lacks
/// (its kind is null there) or that has a different kind in each.
pub const SchemaDifference = struct {
    name: []const u8,
    first: ?Kind,
    second: ?Kind,
};

/// How `first` and `second` (each sorted by name, unique) differ, or null when
/// they are the same schema.
pub fn schemaDifference(first: []const Field, second: []const Field) ?SchemaDifference {
    std.debug.assert(isSortedUnique(first) and isSortedUnique(second));
    var first_index: usize = 0;
    var second_index: usize = 0;
    while (first_index < first.len or second_index < second.len) {
        const order: std.math.Order = if (first_index == first.len)
            .gt
        else if (second_index == second.len)
            .lt
        else
            std.mem.order(u8, first[first_index].name, second[second_index].name);
        switch (order) {
            .lt => return .{
                .name = first[first_index].name,
                .first = first[first_index].kind,
                .second = null,
            },
            .gt => return .{
                .name = second[second_index].name,
                .first = null,
                .second = second[second_index].kind,
            },
            .eq => {
                const a = first[first_index];
                const b = second[second_index];
                if (a.kind != b.kind) return .{ .name = a.name, .first = a.kind, .second = b.kind };
                first_index += 1;
                second_index += 1;
            },
        }
    }
    return null;
}

/// The schema as `drt_dataset_schema_json` and `drt_cache_info` hand it out:
/// `[{"name":"k","kind":"int","arrow_type":"int64"}, ...]` in schema order.
/// The caller owns the text.
pub fn schemaJson(allocator: std.mem.Allocator, schema: []const Field) error{OutOfMemory}![]u8 {
    const Entry = struct { name: []const u8, kind: []const u8, arrow_type: []const u8 };
    const entries = try allocator.alloc(Entry, schema.len);
    defer allocator.free(entries);
    for (entries, schema) |*entry, field| {
        entry.* = .{
            .name = field.name,
            .kind = field.kind.name(),
            .arrow_type = field.kind.arrowType(),
        };
    }
    return std.json.Stringify.valueAlloc(allocator, entries, .{});
}

test "the schema JSON lists names, kinds and Arrow types in order" {
    const schema = [_]Field{ .{ .name = "b\"x", .kind = .string }, .{ .name = "a", .kind = .int } };
    const text = try schemaJson(std.testing.allocator, &schema);
    defer std.testing.allocator.free(text);
    try std.testing.expectEqualStrings(
        "[{\"name\":\"b\\\"x\",\"kind\":\"string\",\"arrow_type\":\"utf8\"}," ++
            "{\"name\":\"a\",\"kind\":\"int\",\"arrow_type\":\"int64\"}]",
        text,
    );
}

test "each kind has the Arrow type metadata.arrow stores it as" {
    try std.testing.expectEqualStrings("bool", Kind.bool.arrowType());
    try std.testing.expectEqualStrings("int64", Kind.int.arrowType());
    try std.testing.expectEqualStrings("float64", Kind.float.arrowType());
    try std.testing.expectEqualStrings("utf8", Kind.string.arrowType());
}

test "kinds round trip through their manifest names" {
    inline for (.{ Kind.bool, Kind.int, Kind.float, Kind.string }) |kind| {
        try std.testing.expectEqual(kind, Kind.fromName(kind.name()).?);
    }
    try std.testing.expect(Kind.fromName("double") == null);
}

test "values compare by kind and value" {
    try std.testing.expect((Value{ .int = 3 }).eql(.{ .int = 3 }));
    try std.testing.expect(!(Value{ .int = 3 }).eql(.{ .float = 3.0 }));
    try std.testing.expect((Value{ .string = "a" }).eql(.{ .string = "a" }));
}

test "string column rows are slices of the byte buffer" {
    const offsets = [_]u64{ 0, 1, 1, 4 };
    const values: ColumnValues = .{ .string = .{ .offsets = &offsets, .bytes = "abcd" } };
    try std.testing.expectEqual(@as(usize, 3), values.rowCount());
    try std.testing.expectEqualStrings("", values.get(1).string);
    try std.testing.expectEqualStrings("bcd", values.get(2).string);
}

test "a schema difference names the first column that differs in kind or presence" {
    const base = [_]Field{ .{ .name = "i", .kind = .int }, .{ .name = "label", .kind = .int } };
    try std.testing.expectEqual(@as(?SchemaDifference, null), schemaDifference(&base, &base));
    try std.testing.expectEqual(@as(?SchemaDifference, null), schemaDifference(&.{}, &.{}));

    const relabeled = [_]Field{
        .{ .name = "i", .kind = .int },
        .{ .name = "label", .kind = .string },
    };
    const kinds = schemaDifference(&base, &relabeled).?;
    try std.testing.expectEqualStrings("label", kinds.name);
    try std.testing.expectEqual(@as(?Kind, .int), kinds.first);
    try std.testing.expectEqual(@as(?Kind, .string), kinds.second);

    // "h" sorts before "i": the second schema has a column the first lacks.
    const extra = [_]Field{
        .{ .name = "h", .kind = .bool },
        .{ .name = "i", .kind = .int },
        .{ .name = "label", .kind = .int },
    };
    const added = schemaDifference(&base, &extra).?;
    try std.testing.expectEqualStrings("h", added.name);
    try std.testing.expectEqual(@as(?Kind, null), added.first);
    try std.testing.expectEqual(@as(?Kind, .bool), added.second);

    // A column missing at the end, on either side.
    const shorter = base[0..1];
    const dropped = schemaDifference(&base, shorter).?;
    try std.testing.expectEqualStrings("label", dropped.name);
    try std.testing.expectEqual(@as(?Kind, .int), dropped.first);
    try std.testing.expectEqual(@as(?Kind, null), dropped.second);
    const gained = schemaDifference(shorter, &base).?;
    try std.testing.expectEqual(@as(?Kind, null), gained.first);
    try std.testing.expectEqual(@as(?Kind, .int), gained.second);
}
