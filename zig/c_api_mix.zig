//! The exported functions of mixing (stream/mix.zig): a dataset's mix, its counts,
//! and the pure count and row functions bindings check against their own reference.
//! Same conventions as c_api.zig.
const std = @import("std");
const dataset_module = @import("read/dataset.zig");
const dataset_mix = @import("read/dataset_mix.zig");
const mix = @import("stream/mix.zig");
const sampler = @import("stream/sampler.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const status_wrong_process = c_status.status_wrong_process;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const nullArgument = c_status.nullArgument;
const checkProcess = c_status.checkProcess;
const arrayArgument = c_status.arrayArgument;

/// `drt_mix_entry`: one cache's part of a mix.
pub const MixEntry = extern struct {
    /// The cache's position in the paths the dataset was opened with.
    cache: u32,
    /// DRT_MIX_REPEAT (1), DRT_MIX_CHOOSE (2) or DRT_MIX_PROPORTION (3).
    form: u32,
    /// repeat's or proportion's value.
    value: f64,
    /// choose's count.
    count: u64,
};

const entries_max = 1 << 20;

/// The core's entries of `c_entries`, in `buffer` (freed by the caller).
fn entriesOf(c_entries: []const MixEntry, buffer: *[]mix.Entry) i32 {
    if (c_entries.len > entries_max) return failMessage(
        status_invalid_argument,
        "a mix has at most {d} entries, got {d}",
        .{ entries_max, c_entries.len },
    );
    buffer.* = allocator.alloc(mix.Entry, c_entries.len) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    for (buffer.*, c_entries) |*entry, c_entry| {
        const form = std.enums.fromInt(mix.Form, c_entry.form) orelse {
            allocator.free(buffer.*);
            return failMessage(status_invalid_argument, "paths[{d}]: mix form must be 1 " ++
                "(repeat), 2 (choose) or 3 (proportion), got {d}", .{
                c_entry.cache,
                c_entry.form,
            });
        };
        entry.* = .{
            .cache = c_entry.cache,
            .form = form,
            .value = c_entry.value,
            .count = c_entry.count,
        };
    }
    return status_ok;
}

export fn drt_dataset_set_mix(
    dataset: ?*dataset_module.Dataset,
    entries: ?[*]const MixEntry,
    entry_count: u64,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const c_entries = arrayArgument(entries, entry_count) orelse return nullArgument("entries");
    var core_entries: []mix.Entry = &.{};
    const status = entriesOf(c_entries, &core_entries);
    if (status != status_ok) return status;
    defer allocator.free(core_entries);
    var diagnostic: Diagnostic = .{};
    dataset_mix.setMix(d, core_entries, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_mix_counts(
    dataset: ?*dataset_module.Dataset,
    counts_out: ?[*]u64,
    cache_count: u32,
    mixed_out: ?*u32,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const mixed = mixed_out orelse return nullArgument("mixed_out");
    if (cache_count != d.caches.len) return failMessage(
        status_invalid_argument,
        "cache_count is {d}, the dataset has {d} caches",
        .{ cache_count, d.caches.len },
    );
    const counts = arrayArgument(counts_out, cache_count) orelse return nullArgument("counts_out");
    const table = d.acquireTable();
    defer table.release();
    const layout = table.mix orelse {
        mixed.* = 0;
        @memset(counts, 0);
        return status_ok;
    };
    mixed.* = 1;
    @memcpy(counts, layout.counts);
    return status_ok;
}

export fn drt_mix_counts(
    entries: ?[*]const MixEntry,
    entry_count: u64,
    row_counts: ?[*]const u64,
    cache_count: u32,
    epoch_len: u64,
    counts_out: ?[*]u64,
) i32 {
    const c_entries = arrayArgument(entries, entry_count) orelse return nullArgument("entries");
    const rows = arrayArgument(row_counts, cache_count) orelse return nullArgument("row_counts");
    const counts = arrayArgument(counts_out, cache_count) orelse return nullArgument("counts_out");
    if (c_entries.len == 0 or cache_count == 0) return failMessage(
        status_invalid_argument,
        "a mix needs at least one entry and one cache",
        .{},
    );
    for (rows) |row_count| if (row_count > sampler.row_count_max) return failMessage(
        status_invalid_argument,
        "row counts must be at most 2^53, got {d}",
        .{row_count},
    );
    var core_entries: []mix.Entry = &.{};
    const status = entriesOf(c_entries, &core_entries);
    if (status != status_ok) return status;
    defer allocator.free(core_entries);
    var diagnostic: Diagnostic = .{};
    const explicit: ?u64 = if (epoch_len == 0) null else epoch_len;
    _ = mix.computeCounts(allocator, core_entries, rows, explicit, counts, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_mix_rows(
    seed: u64,
    counts: ?[*]const u64,
    row_counts: ?[*]const u64,
    cache_count: u32,
    start: u64,
    count: u64,
    caches_out: ?[*]u32,
    rows_out: ?[*]u64,
) i32 {
    const mix_counts = arrayArgument(counts, cache_count) orelse return nullArgument("counts");
    const rows = arrayArgument(row_counts, cache_count) orelse return nullArgument("row_counts");
    const caches = arrayArgument(caches_out, count) orelse return nullArgument("caches_out");
    const out = arrayArgument(rows_out, count) orelse return nullArgument("rows_out");
    var total: u64 = 0;
    for (mix_counts, rows) |k, n| {
        if (n > sampler.row_count_max or k > sampler.row_count_max or (k > 0 and n == 0)) {
            return failMessage(status_invalid_argument, "each count needs rows, and counts " ++
                "and rows are at most 2^53 (count {d}, rows {d})", .{ k, n });
        }
        total += k;
    }
    if (total < 1 or total > sampler.row_count_max) return failMessage(
        status_invalid_argument,
        "the counts must sum to 1 .. 2^53, got {d}",
        .{total},
    );
    if (count != 0 and count - 1 > std.math.maxInt(u64) - start) return failMessage(
        status_invalid_argument,
        "positions pass 2^64 - 1",
        .{},
    );
    const layout = buildLayout(seed, mix_counts, rows) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    defer layout.destroy(allocator);
    var cursor: mix.Cursor = .init(layout);
    for (caches, out, 0..) |*cache, *row, offset| {
        const at = cursor.sample(start + offset);
        cache.* = @intCast(at.cache);
        row.* = at.row;
    }
    return status_ok;
}

fn buildLayout(seed: u64, counts: []const u64, row_counts: []const u64) !*mix.Layout {
    const grouping = try mix.contiguousGrouping(allocator, row_counts);
    errdefer grouping.deinit(allocator);
    const owned_counts = try allocator.dupe(u64, counts);
    errdefer allocator.free(owned_counts);
    return mix.Layout.assemble(allocator, &.{}, owned_counts, seed, grouping);
}
