//! The dataset's metadata table as users see it: exported as Arrow
//! (`cache_id | sample_id | <stored columns> | weight`) and replaced from
//! identity and weight columns, after validating everything.
const std = @import("std");
const types = @import("../format/metadata_types.zig");
const arrow_ipc_write = @import("../format/arrow_ipc_write.zig");
const arrow_c_export = @import("arrow_c_export.zig");
const ColumnBuilder = @import("../format/column_builder.zig").ColumnBuilder;
const column_builder = @import("../format/column_builder.zig");
const active_table = @import("../stream/active_table.zig");
const ActiveTable = active_table.ActiveTable;
const Dataset = @import("../read/dataset.zig").Dataset;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;

pub const Error = error{ InvalidInput, OutOfMemory };

/// The table's own columns; a stored metadata column may not share their names.
const reserved_columns = [_][]const u8{ "cache_id", "sample_id", "weight" };

/// Stored columns named like the table's own columns would make the table
/// ambiguous (dataset-rt 0.2.4's quickstart stores a 'sample_id'): such datasets can
/// still be iterated, but have no metadata table.
fn checkNoReservedNames(dataset: *const Dataset, diagnostic: *Diagnostic) Error!void {
    for (dataset.schema()) |field| {
        if (isOneOf(field.name, &reserved_columns)) {
            diagnostic.set(
                "stored metadata column '{f}' has the name of a metadata table column " ++
                    "(cache_id, sample_id, weight); this dataset has no metadata table",
                .{Excerpt.ofName(field.name)},
            );
            return error.InvalidInput;
        }
    }
}

/// The table's columns in table order. The identity and weight columns are
/// always built here; the stored columns are built here too unless they could
/// be borrowed from the dataset's only cache.
const Gathered = struct {
    allocator: std.mem.Allocator,
    cache_ids: []u64,
    sample_ids: []u64,
    weights: []f64,
    /// Empty when the stored columns are borrowed.
    built: []ColumnBuilder,
    stored: []types.ColumnValues,

    fn destroy(gathered: *Gathered) void {
        const allocator = gathered.allocator;
        allocator.free(gathered.cache_ids);
        allocator.free(gathered.sample_ids);
        allocator.free(gathered.weights);
        column_builder.deinitAll(allocator, gathered.built);
        allocator.free(gathered.built);
        allocator.free(gathered.stored);
        allocator.destroy(gathered);
    }

    fn destroyOpaque(context: *anyopaque) void {
        destroy(@ptrCast(@alignCast(context)));
    }
};

const Ownership = enum { may_borrow, owned };

fn gather(
    allocator: std.mem.Allocator,
    dataset: *const Dataset,
    table: *const ActiveTable,
    ownership: Ownership,
) error{OutOfMemory}!*Gathered {
    const row_count: usize = @intCast(table.row_count);
    const schema = dataset.schema();
    const gathered = try allocator.create(Gathered);
    errdefer allocator.destroy(gathered);
    const cache_ids = try allocator.alloc(u64, row_count);
    errdefer allocator.free(cache_ids);
    const sample_ids = try allocator.alloc(u64, row_count);
    errdefer allocator.free(sample_ids);
    const weights = try allocator.alloc(f64, row_count);
    errdefer allocator.free(weights);
    const stored = try allocator.alloc(types.ColumnValues, schema.len);
    errdefer allocator.free(stored);
    for (0..row_count) |row| {
        const location = table.location(row);
        cache_ids[row] = location.cache_id;
        sample_ids[row] = location.sample_id;
        weights[row] = table.weight(row);
    }
    var built: []ColumnBuilder = &.{};
    if (ownership == .may_borrow and table.global_rows == null and dataset.caches.len == 1) {
        // The default table of one cache is that cache's columns as they are.
        for (stored, dataset.caches[0].columns) |*values, column| values.* = column.values;
    } else {
        built = try column_builder.initAll(allocator, schema);
        errdefer {
            column_builder.deinitAll(allocator, built);
            allocator.free(built);
        }
        for (built) |*column| try column.reserve(allocator, row_count);
        if (table.global_rows == null) {
            // The default table is every cache in physical order: copy whole columns.
            for (dataset.caches) |cache| {
                for (built, cache.columns) |*column, cache_column| try column.appendValues(
                    allocator,
                    cache_column.values,
                );
            }
        } else {
            // Each row's identity is located once, above.
            for (cache_ids, sample_ids) |cache_id, sample_id| {
                const cache = dataset.caches[@intCast(cache_id)];
                for (built, cache.columns) |*column, cache_column| {
                    try column.append(allocator, cache_column.values.get(@intCast(sample_id)));
                }
            }
        }
        for (stored, built) |*values, *column| values.* = column.view();
    }
    // Positions become what users see: each cache's cache_id.
    const ids = dataset.cacheIds();
    for (cache_ids) |*cache_id| cache_id.* = ids[@intCast(cache_id.*)];
    gathered.* = .{
        .allocator = allocator,
        .cache_ids = cache_ids,
        .sample_ids = sample_ids,
        .weights = weights,
        .built = built,
        .stored = stored,
    };
    return gathered;
}

/// Arrow IPC file bytes of `table`'s rows in table order. Caller frees.
pub fn exportArrow(
    allocator: std.mem.Allocator,
    dataset: *const Dataset,
    table: *const ActiveTable,
    diagnostic: *Diagnostic,
) Error![]u8 {
    try checkNoReservedNames(dataset, diagnostic);
    const gathered = try gather(allocator, dataset, table, .may_borrow);
    defer gathered.destroy();
    const schema = dataset.schema();
    const columns = try allocator.alloc(types.Column, schema.len + 3);
    defer allocator.free(columns);
    // The IPC file's identity columns are int64 (the ids are below 2^63, so the bits are the same).
    columns[0] = .{ .name = "cache_id", .values = .{ .int = @ptrCast(gathered.cache_ids) } };
    columns[1] = .{ .name = "sample_id", .values = .{ .int = @ptrCast(gathered.sample_ids) } };
    for (columns[2..][0..schema.len], schema, gathered.stored) |*column, field, values| {
        column.* = .{ .name = field.name, .values = values };
    }
    columns[schema.len + 2] = .{ .name = "weight", .values = .{ .float = gathered.weights } };
    return arrow_ipc_write.writeFile(allocator, columns, table.row_count) catch |err| switch (err) {
        error.OutOfMemory => error.OutOfMemory,
        error.TooLarge => error.OutOfMemory,
    };
}

/// `table`'s rows in table order as an Arrow C stream of one struct batch, with
/// the columns of `exportArrow` (the identities as uint64). The stream owns
/// copies of the columns, so it may outlive the dataset.
pub fn exportStream(
    allocator: std.mem.Allocator,
    dataset: *const Dataset,
    table: *const ActiveTable,
    out: *arrow_c_export.ArrowArrayStream,
    diagnostic: *Diagnostic,
) Error!void {
    try checkNoReservedNames(dataset, diagnostic);
    const gathered = try gather(allocator, dataset, table, .owned);
    errdefer gathered.destroy();
    const schema = dataset.schema();
    const columns = try allocator.alloc(arrow_c_export.Column, schema.len + 3);
    defer allocator.free(columns);
    columns[0] = .{ .name = "cache_id", .values = .{ .uint64 = gathered.cache_ids } };
    columns[1] = .{ .name = "sample_id", .values = .{ .uint64 = gathered.sample_ids } };
    for (columns[2..][0..schema.len], schema, gathered.stored) |*column, field, values| {
        column.* = .{ .name = field.name, .values = switch (values) {
            .bool => |v| .{ .bool_bytes = v },
            .int => |v| .{ .int64 = v },
            .float => |v| .{ .float64 = v },
            .string => |v| .{ .large_utf8 = .{ .offsets = v.offsets, .bytes = v.bytes } },
        } };
    }
    columns[schema.len + 2] = .{ .name = "weight", .values = .{ .float64 = gathered.weights } };
    const owner: arrow_c_export.Owner = .{ .context = gathered, .free = Gathered.destroyOpaque };
    try arrow_c_export.exportStream(allocator, columns, table.row_count, owner, out);
}

/// One integer column as Arrow buffers: values (64-bit) and an optional validity bitmap.
pub const IntegerColumn = struct {
    values: ?[*]const u64,
    validity: ?[*]const u8,
    validity_offset: u64,
    signed: bool,
};

pub const FloatColumn = struct {
    values: ?[*]const f64,
    validity: ?[*]const u8,
    validity_offset: u64,
};

/// What `update_metadata` hands to the core: the frame's column names and
/// Arrow types, and the buffers of the identity and weight columns.
pub const Update = struct {
    /// (name, Arrow type name) of every column of the frame.
    columns: []const ColumnType,
    row_count: u64,
    cache_ids: IntegerColumn,
    sample_ids: IntegerColumn,
    weights: FloatColumn,
};

pub const ColumnType = struct { name: []const u8, arrow_type: []const u8 };

/// The columns of an update as the binding describes them: a JSON array of
/// `[name, arrow_type]` pairs (`drt_dataset_set_table`).
pub const ColumnTypes = struct {
    parsed: std.json.Parsed([]const [2][]const u8),
    list: []ColumnType,

    pub fn parse(
        allocator: std.mem.Allocator,
        text: []const u8,
        diagnostic: *Diagnostic,
    ) error{ InvalidArgument, OutOfMemory }!ColumnTypes {
        const Pairs = []const [2][]const u8;
        const parsed = std.json.parseFromSlice(Pairs, allocator, text, .{}) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.set("columns_json must be a JSON array of [name, arrow_type] pairs", .{});
            return error.InvalidArgument;
        };
        errdefer parsed.deinit();
        const list = try allocator.alloc(ColumnType, parsed.value.len);
        for (list, parsed.value) |*column, pair| column.* = .{
            .name = pair[0],
            .arrow_type = pair[1],
        };
        return .{ .parsed = parsed, .list = list };
    }

    pub fn deinit(columns: *ColumnTypes) void {
        columns.parsed.arena.child_allocator.free(columns.list);
        columns.parsed.deinit();
    }
};

test "column types parse from JSON pairs and refuse anything else" {
    var diagnostic: Diagnostic = .{};
    var columns = try ColumnTypes.parse(
        std.testing.allocator,
        "[[\"cache_id\",\"uint64\"],[\"w\",\"float64\"]]",
        &diagnostic,
    );
    defer columns.deinit();
    try std.testing.expectEqual(@as(usize, 2), columns.list.len);
    try std.testing.expectEqualStrings("w", columns.list[1].name);
    try std.testing.expectEqualStrings("float64", columns.list[1].arrow_type);
    try std.testing.expectError(
        error.InvalidArgument,
        ColumnTypes.parse(std.testing.allocator, "[[\"a\"]]", &diagnostic),
    );
    try std.testing.expectEqualStrings(
        "columns_json must be a JSON array of [name, arrow_type] pairs",
        diagnostic.message(),
    );
}

const integer_types = [_][]const u8{
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
};
const numeric_types = integer_types ++ [_][]const u8{ "float32", "float64" };

fn findColumn(columns: []const ColumnType, name: []const u8) ?ColumnType {
    for (columns) |column| if (std.mem.eql(u8, column.name, name)) return column;
    return null;
}

fn isOneOf(name: []const u8, comptime names: []const []const u8) bool {
    inline for (names) |candidate| if (std.mem.eql(u8, name, candidate)) return true;
    return false;
}

fn isValid(validity: ?[*]const u8, offset: u64, row: u64) bool {
    const bitmap = validity orelse return true;
    const bit = offset + row;
    return (bitmap[@intCast(bit / 8)] >> @intCast(bit % 8)) & 1 == 1;
}

/// Checks the frame's shape: required columns present with acceptable types,
/// stored columns with their original types.
pub fn checkColumns(dataset: *const Dataset, update: Update, diagnostic: *Diagnostic) Error!void {
    try checkNoReservedNames(dataset, diagnostic);
    if (update.row_count == 0) {
        diagnostic.set("metadata table must include at least one sample", .{});
        return error.InvalidInput;
    }
    inline for (.{ "cache_id", "sample_id", "weight" }) |required| {
        const column = findColumn(update.columns, required) orelse {
            diagnostic.set("samples metadata missing '{s}' column", .{required});
            return error.InvalidInput;
        };
        const is_weight = comptime std.mem.eql(u8, required, "weight");
        const acceptable = comptime if (is_weight) &numeric_types else &integer_types;
        if (!isOneOf(column.arrow_type, acceptable)) {
            // "must be an integer" / "must be numeric": dataset-rt 0.2.4's phrases.
            const expected = if (is_weight)
                "numeric: expected a numeric"
            else
                "an integer: expected an integer";
            diagnostic.set(
                "samples metadata column '{s}' must be {s} Arrow type, got {s}",
                .{ required, expected, column.arrow_type },
            );
            return error.InvalidInput;
        }
    }
    for (dataset.schema()) |field| {
        const column = findColumn(update.columns, field.name) orelse {
            diagnostic.set("samples metadata missing '{f}' column", .{Excerpt.ofName(field.name)});
            return error.InvalidInput;
        };
        const expected = field.kind.arrowType();
        const same = std.mem.eql(u8, column.arrow_type, expected) or
            (field.kind == .string and std.mem.eql(u8, column.arrow_type, "large_utf8"));
        if (!same) {
            diagnostic.set(
                "samples metadata column '{f}' must have Arrow type {s}, got {s}",
                .{ Excerpt.ofName(field.name), expected, column.arrow_type },
            );
            return error.InvalidInput;
        }
    }
}

/// Validates every row and builds the new active table.
pub fn buildTable(
    allocator: std.mem.Allocator,
    dataset: *const Dataset,
    update: Update,
    diagnostic: *Diagnostic,
) Error!*ActiveTable {
    try checkColumns(dataset, update, diagnostic);
    const cache_ids = update.cache_ids.values orelse return missingBuffer("cache_id", diagnostic);
    const sample_ids =
        update.sample_ids.values orelse return missingBuffer("sample_id", diagnostic);
    const weight_values = update.weights.values orelse return missingBuffer("weight", diagnostic);
    const row_count: usize = @intCast(update.row_count);
    const global_rows = try allocator.alloc(u64, row_count);
    errdefer allocator.free(global_rows);
    const weights = try allocator.alloc(f64, row_count);
    errdefer allocator.free(weights);
    for (global_rows, weights, 0..) |*global_row, *weight, row| {
        const raw_ids: [2]u64 = .{ cache_ids[row], sample_ids[row] };
        global_row.* = try globalRowOf(dataset, update, raw_ids, row, diagnostic);
        weight.* = try weightOf(update, weight_values[row], row, diagnostic);
    }
    const sampling = dataset.options.sampling();
    if (!dataset.options.replacement) try checkUniformWeights(weights, diagnostic);
    return ActiveTable.createExplicit(
        allocator,
        dataset.cache_starts,
        global_rows,
        weights,
        sampling,
    ) catch return error.OutOfMemory;
}

/// Row `row`'s identity (`raw_ids`: its `cache_id` and `sample_id` values) as a
/// global row of the dataset; an identity the dataset does not hold names the row.
fn globalRowOf(
    dataset: *const Dataset,
    update: Update,
    raw_ids: [2]u64,
    row: usize,
    diagnostic: *Diagnostic,
) Error!u64 {
    const cache_id = try identityValue("cache_id", update.cache_ids, raw_ids[0], row, diagnostic);
    const sample_ids = update.sample_ids;
    const sample_id = try identityValue("sample_id", sample_ids, raw_ids[1], row, diagnostic);
    const position = dataset.positionOf(cache_id);
    if (position == null or sample_id >= dataset.caches[position.?].sampleCount()) {
        diagnostic.set(
            "unknown samples metadata row identity (cache_id={d}, sample_id={d}) in row {d}",
            .{ cache_id, sample_id, row },
        );
        return error.InvalidInput;
    }
    const location: active_table.Location = .{ .cache_id = position.?, .sample_id = sample_id };
    return active_table.globalRow(dataset.cache_starts, location);
}

/// Row `row`'s weight: non-null, positive and finite.
fn weightOf(update: Update, weight: f64, row: usize, diagnostic: *Diagnostic) Error!f64 {
    if (!isValid(update.weights.validity, update.weights.validity_offset, row)) {
        diagnostic.set(
            "samples metadata column 'weight' contains null in row {d}; it must be non-null",
            .{row},
        );
        return error.InvalidInput;
    }
    if (!(std.math.isFinite(weight) and weight > 0)) {
        diagnostic.set(
            "samples metadata weights must be positive and finite, got {d} in row {d}",
            .{ weight, row },
        );
        return error.InvalidInput;
    }
    return weight;
}

/// Without replacement every row is read once per epoch, so weights must all be equal.
fn checkUniformWeights(weights: []const f64, diagnostic: *Diagnostic) Error!void {
    for (weights, 0..) |weight, row| {
        if (weight == weights[0]) continue;
        diagnostic.set(
            "weights need replacement=True: this dataset reads without replacement (each " ++
                "row once per epoch), and row {d} has weight {d} where row 0 has {d}",
            .{ row, weight, weights[0] },
        );
        return error.InvalidInput;
    }
}

fn missingBuffer(name: []const u8, diagnostic: *Diagnostic) Error {
    diagnostic.set("samples metadata column '{s}' has no value buffer", .{name});
    return error.InvalidInput;
}

fn identityValue(
    name: []const u8,
    column: IntegerColumn,
    raw: u64,
    row: usize,
    diagnostic: *Diagnostic,
) Error!u64 {
    if (!isValid(column.validity, column.validity_offset, row)) {
        diagnostic.set(
            "samples metadata column '{s}' contains null in row {d}; it must be non-null",
            .{ name, row },
        );
        return error.InvalidInput;
    }
    if (column.signed and @as(i64, @bitCast(raw)) < 0) {
        diagnostic.set(
            "samples metadata column '{s}' must be non-negative, got {d} in row {d}",
            .{ name, @as(i64, @bitCast(raw)), row },
        );
        return error.InvalidInput;
    }
    return raw;
}
