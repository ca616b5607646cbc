//! The exported functions of a dataset's metadata table: handed out as Arrow IPC bytes or
//! an Arrow C stream, its schema, and a new active table set from Arrow columns. Same
//! conventions as c_api.zig.
const std = @import("std");
const dataset_module = @import("read/dataset.zig");
const dataset_mix = @import("read/dataset_mix.zig");
const metadata_table = @import("table/metadata_table.zig");
const arrow_c_export = @import("table/arrow_c_export.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const metadata_types = @import("format/metadata_types.zig");
const c_types = @import("c_types.zig");
const Buffer = c_types.Buffer;
const IntegerColumn = c_types.IntegerColumn;
const FloatColumn = c_types.FloatColumn;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_out_of_memory = c_status.status_out_of_memory;
const status_wrong_process = c_status.status_wrong_process;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const nullArgument = c_status.nullArgument;
const checkProcess = c_status.checkProcess;
const handOut = c_status.handOut;

/// Core-owned bytes handed to the caller; mirrors `drt_buffer`.
export fn drt_dataset_metadata_arrow(dataset: ?*dataset_module.Dataset, out: ?*?*Buffer) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const table = d.acquireTable();
    defer table.release();
    var diagnostic: Diagnostic = .{};
    const bytes = metadata_table.exportArrow(allocator, d, table, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return handOut(bytes, out_ptr);
}

export fn drt_dataset_metadata_arrow_stream(
    dataset: ?*dataset_module.Dataset,
    out: ?*arrow_c_export.ArrowArrayStream,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const table = d.acquireTable();
    defer table.release();
    var diagnostic: Diagnostic = .{};
    metadata_table.exportStream(allocator, d, table, out_ptr, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_schema_json(dataset: ?*dataset_module.Dataset, out: ?*?*Buffer) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const text = metadata_types.schemaJson(allocator, d.schema()) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    return handOut(text, out_ptr);
}

export fn drt_dataset_set_table(
    dataset: ?*dataset_module.Dataset,
    columns_json: ?[*:0]const u8,
    row_count: u64,
    cache_ids: ?*const IntegerColumn,
    sample_ids: ?*const IntegerColumn,
    weights: ?*const FloatColumn,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const text = columns_json orelse return nullArgument("columns_json");
    const cache_column = cache_ids orelse return nullArgument("cache_ids");
    const sample_column = sample_ids orelse return nullArgument("sample_ids");
    const weight_column = weights orelse return nullArgument("weights");
    var diagnostic: Diagnostic = .{};
    const ColumnTypes = metadata_table.ColumnTypes;
    var columns = ColumnTypes.parse(allocator, std.mem.span(text), &diagnostic) catch |err|
        return failError(err, &diagnostic);
    defer columns.deinit();
    const table = metadata_table.buildTable(allocator, d, .{
        .columns = columns.list,
        .row_count = row_count,
        .cache_ids = integerColumn(cache_column),
        .sample_ids = integerColumn(sample_column),
        .weights = .{
            .values = weight_column.values,
            .validity = weight_column.validity,
            .validity_offset = weight_column.validity_offset,
        },
    }, &diagnostic) catch |err| return failError(err, &diagnostic);
    dataset_mix.replaceTable(d, table, &diagnostic) catch |err| {
        table.release();
        return failError(err, &diagnostic);
    };
    return status_ok;
}

fn integerColumn(column: *const IntegerColumn) metadata_table.IntegerColumn {
    return .{
        .values = column.values,
        .validity = column.validity,
        .validity_offset = column.validity_offset,
        .signed = column.is_signed != 0,
    };
}
