//! A dataset's mix (`mix.zig`): installing one, and keeping it resolved against
//! every table `update_metadata` installs and every epoch length a mix of
//! proportions is given. The mix lives in the active table it was resolved
//! against, so an iterator keeps the mix of its epoch like it keeps the table.
const std = @import("std");
const assert = std.debug.assert;
const dataset_module = @import("dataset.zig");
const Dataset = dataset_module.Dataset;
const Error = dataset_module.Error;
const ActiveTable = @import("../stream/active_table.zig").ActiveTable;
const mix = @import("../stream/mix.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const system = @import("../base/system.zig");

/// Installs `entries` as the dataset's mix (none: back to the plain table) and
/// resets the stream like a new table.
pub fn setMix(dataset: *Dataset, entries: []const mix.Entry, diagnostic: *Diagnostic) Error!void {
    const table = dataset.acquireTable();
    defer table.release();
    if (entries.len == 0) {
        if (table.mix == null) return;
        dataset.replaceTable(try table.withMix(null));
        return;
    }
    try checkSampling(dataset, diagnostic);
    const layout = try resolve(dataset, table, entries, explicitEpochLen(dataset), diagnostic);
    const mixed = try table.withMix(layout);
    assert(mixed.mix == layout);
    dataset.replaceTable(mixed);
}

/// Installs a new table (update_metadata), resolving the current mix against it
/// first; on failure the caller still owns `table` and nothing changes.
pub fn replaceTable(dataset: *Dataset, table: *ActiveTable, diagnostic: *Diagnostic) Error!void {
    assert(table.mix == null);
    const current = dataset.acquireTable();
    defer current.release();
    if (current.mix) |layout| {
        const epoch_len = explicitEpochLen(dataset);
        table.mix = try resolve(dataset, table, layout.entries, epoch_len, diagnostic);
    }
    dataset.replaceTable(table);
}

/// `set_epoch_len` under a mix: refused with repeat/choose (the mix fixes the
/// length); with proportions the counts are computed again for the new length
/// (which resets the stream when the length changes).
pub fn setEpochLen(dataset: *Dataset, epoch_len: u64, diagnostic: *Diagnostic) Error!void {
    const table = dataset.acquireTable();
    defer table.release();
    const layout = table.mix orelse return dataset.setEpochLen(epoch_len, diagnostic);
    if (!layout.proportions()) {
        diagnostic.set("set_epoch_len({d}) and set_mix with repeat/choose both fix the epoch " ++
            "length (the mix gives {d}): use proportions with set_epoch_len, or set_mix(None) " ++
            "first", .{ epoch_len, layout.epoch_len });
        return error.InvalidArgument;
    }
    if (epoch_len == layout.epoch_len) return dataset.setEpochLen(epoch_len, diagnostic);
    if (epoch_len < 1) return dataset.setEpochLen(epoch_len, diagnostic);
    const resolved = try resolve(dataset, table, layout.entries, epoch_len, diagnostic);
    const mixed = try table.withMix(resolved);
    dataset.setEpochLen(epoch_len, diagnostic) catch |err| {
        mixed.release();
        return err;
    };
    dataset.replaceTable(mixed);
}

/// The length `Dataset.setEpochLen` set, if any.
fn explicitEpochLen(dataset: *Dataset) ?u64 {
    const io = system.io();
    dataset.mutex.lockUncancelable(io);
    defer dataset.mutex.unlock(io);
    return dataset.epoch_len;
}

fn checkSampling(dataset: *const Dataset, diagnostic: *Diagnostic) Error!void {
    const options = dataset.options;
    if (options.sampling() == .permutation) return;
    diagnostic.set("mixing samples without replacement: it needs ReaderConfig(shuffle=True, " ++
        "replacement=False), this dataset has shuffle={s}, replacement={s}", .{
        pythonBool(options.shuffle),
        pythonBool(options.replacement),
    });
    return error.InvalidArgument;
}

fn resolve(
    dataset: *const Dataset,
    table: *const ActiveTable,
    entries: []const mix.Entry,
    epoch_len: ?u64,
    diagnostic: *Diagnostic,
) Error!*mix.Layout {
    // Tables read without replacement are refused unless their weights are equal
    // (metadata_table.zig), and a mix needs that sampling (`checkSampling`).
    assert(table.equalWeights());
    const grouping = try table.grouping();
    errdefer grouping.deinit(dataset.allocator);
    return mix.Layout.create(
        dataset.allocator,
        entries,
        epoch_len,
        dataset.options.seed,
        grouping,
        diagnostic,
    );
}

fn pythonBool(value: bool) []const u8 {
    return if (value) "True" else "False";
}
