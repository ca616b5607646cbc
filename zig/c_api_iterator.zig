//! The exported functions of iterators and their batches: creating an iterator over a
//! share or over explicit reads, its span and state, the next batch, deferred payloads and
//! mapped shards. Same conventions as c_api.zig.
const std = @import("std");
const dataset_module = @import("read/dataset.zig");
const ShardMapping = @import("read/shard_mapping.zig").ShardMapping;
const sample_batch = @import("read/sample_batch.zig");
const read_pipeline = @import("read/read_pipeline.zig");
const stream_share = @import("stream/stream_share.zig");
const Diagnostic = @import("base/diagnostic.zig").Diagnostic;
const c_types = @import("c_types.zig");
const StreamState = c_types.StreamState;
const ShareSpec = c_types.ShareSpec;
const shareOf = c_types.shareOf;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const status_wrong_process = c_status.status_wrong_process;
const status_state = c_status.status_state;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const failError = c_status.failError;
const nullArgument = c_status.nullArgument;
const checkProcess = c_status.checkProcess;
const fillState = @import("c_api_dataset.zig").fillState;

export fn drt_iterator_create(
    dataset: ?*dataset_module.Dataset,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return drt_iterator_create_deferring(dataset, 0, out);
}

export fn drt_iterator_create_deferring(
    dataset: ?*dataset_module.Dataset,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return createIterator(dataset, .whole, 0, defer_payload_bytes, out);
}

export fn drt_iterator_create_share(
    dataset: ?*dataset_module.Dataset,
    share: ?*const ShareSpec,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const spec = share orelse return nullArgument("share");
    return createIterator(dataset, shareOf(spec), skip, defer_payload_bytes, out);
}

/// Deprecated alias of `drt_iterator_create_share`, kept until ABI 4.
export fn drt_iterator_create_shard(
    dataset: ?*dataset_module.Dataset,
    share: ?*const ShareSpec,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    return drt_iterator_create_share(dataset, share, skip, defer_payload_bytes, out);
}

export fn drt_iterator_create_reads(
    dataset: ?*dataset_module.Dataset,
    cache_ids: ?[*]const u64,
    sample_ids: ?[*]const u64,
    count: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    const caches: []const u64 = if (count == 0) &.{} else (cache_ids orelse
        return nullArgument("cache_ids"))[0..@intCast(count)];
    const samples: []const u64 = if (count == 0) &.{} else (sample_ids orelse return nullArgument(
        "sample_ids",
    ))[0..@intCast(count)];
    var diagnostic: Diagnostic = .{};
    out_ptr.* = dataset_module.Iterator.createReads(
        d,
        caches,
        samples,
        defer_payload_bytes,
        &diagnostic,
    ) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

fn createIterator(
    dataset: ?*dataset_module.Dataset,
    share: stream_share.Share,
    skip: u64,
    defer_payload_bytes: u64,
    out: ?*?*dataset_module.Iterator,
) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const Iterator = dataset_module.Iterator;
    out_ptr.* = Iterator.create(d, share, skip, defer_payload_bytes, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_iterator_span(iterator: ?*const dataset_module.Iterator, out: ?*StreamState) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    if (it.readsByIdentity()) return failMessage(
        status_state,
        "this iterator reads samples by identity; it has no stream position",
        .{},
    );
    return fillState(it.dataset, it.table(), it.span(), out_ptr);
}

export fn drt_iterator_state(
    iterator: ?*const dataset_module.Iterator,
    consumed: u64,
    out: ?*StreamState,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const at = it.position(consumed, &diagnostic) catch |err| return failError(err, &diagnostic);
    return fillState(it.dataset, it.table(), at, out_ptr);
}

export fn drt_iterator_next(iterator: ?*dataset_module.Iterator, out: ?*?*sample_batch.View) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const out_ptr = out orelse return nullArgument("out pointer");
    var diagnostic: Diagnostic = .{};
    const batch = it.next(&diagnostic) catch |err| return failError(err, &diagnostic);
    out_ptr.* = if (batch) |b| b.seal() else null;
    return status_ok;
}

export fn drt_iterator_bytes_held(iterator: ?*const dataset_module.Iterator) u64 {
    const it = iterator orelse return 0;
    if (!checkProcess(it.dataset.pool)) return 0;
    return it.bytesHeld();
}

export fn drt_batch_deferred(view: ?*const sample_batch.View, lengths_out: ?*?[*]const u64) i32 {
    const v = view orelse return nullArgument("batch");
    const out_ptr = lengths_out orelse return nullArgument("lengths_out");
    const batch = sample_batch.SampleBatch.fromConstView(v);
    out_ptr.* = if (batch.deferred_lengths.len == 0) null else batch.deferred_lengths.ptr;
    return status_ok;
}

/// `view` as a batch `it` returned, or null (the error set) when it is not one.
fn batchOf(
    it: *const dataset_module.Iterator,
    view: ?*const sample_batch.View,
) ?*const sample_batch.SampleBatch {
    const v = view orelse {
        _ = nullArgument("batch");
        return null;
    };
    const batch = sample_batch.SampleBatch.fromConstView(v);
    if (batch.owner != @as(*const anyopaque, it.pipeline)) {
        _ = failMessage(
            status_invalid_argument,
            "the batch was not returned by this iterator",
            .{},
        );
        return null;
    }
    return batch;
}

export fn drt_iterator_read_deferred(
    iterator: ?*dataset_module.Iterator,
    view: ?*const sample_batch.View,
    sample: u64,
    destination: ?[*]u8,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const batch = batchOf(it, view) orelse return status_invalid_argument;
    const entry = batch.deferredPayload(sample) orelse return failMessage(
        status_invalid_argument,
        "sample {d} of the batch (of {d}) has no deferred payload",
        .{ sample, batch.count() },
    );
    const dst = destination orelse return nullArgument("destination");
    const reads = [1]read_pipeline.DeferredRead{
        .{ .entry = entry, .destination = dst[0..@intCast(entry.location.len)] },
    };
    var diagnostic: Diagnostic = .{};
    it.pipeline.readDeferred(&reads, &diagnostic) catch |err| return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_iterator_read_deferred_batch(
    iterator: ?*dataset_module.Iterator,
    view: ?*const sample_batch.View,
    destinations: ?[*]const ?[*]u8,
) i32 {
    const it = iterator orelse return nullArgument("iterator");
    if (!checkProcess(it.dataset.pool)) return status_wrong_process;
    const batch = batchOf(it, view) orelse return status_invalid_argument;
    const all = destinations orelse return nullArgument("destinations");
    var reads: std.ArrayList(read_pipeline.DeferredRead) = .empty;
    defer reads.deinit(allocator);
    for (0..batch.count()) |sample| {
        const entry = batch.deferredPayload(sample) orelse continue;
        const dst = all[sample] orelse return failMessage(
            status_invalid_argument,
            "destination {d} is NULL but sample {d} has a deferred payload",
            .{ sample, sample },
        );
        reads.append(
            allocator,
            .{ .entry = entry, .destination = dst[0..@intCast(entry.location.len)] },
        ) catch return failMessage(status_out_of_memory, "out of memory", .{});
    }
    var diagnostic: Diagnostic = .{};
    it.pipeline.readDeferred(reads.items, &diagnostic) catch |err|
        return failError(err, &diagnostic);
    return status_ok;
}

export fn drt_dataset_set_payloads(dataset: ?*dataset_module.Dataset, mode: u32) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const payloads = std.enums.fromInt(dataset_module.Payloads, mode) orelse
        return failMessage(status_invalid_argument, "unknown payloads mode {d}", .{mode});
    d.setPayloads(payloads);
    return status_ok;
}

export fn drt_batch_mapped(
    view: ?*const sample_batch.View,
    addresses_out: ?*?[*]const ?[*]const u8,
    mappings_out: ?*?[*]const ?*ShardMapping,
) i32 {
    const v = view orelse return nullArgument("batch");
    const addresses_ptr = addresses_out orelse return nullArgument("addresses_out");
    const mappings_ptr = mappings_out orelse return nullArgument("mappings_out");
    const batch = sample_batch.SampleBatch.fromConstView(v);
    addresses_ptr.* = if (batch.mapped_addresses.len == 0) null else batch.mapped_addresses.ptr;
    mappings_ptr.* = if (batch.mapped_mappings.len == 0) null else batch.mapped_mappings.ptr;
    return status_ok;
}

export fn drt_mapping_retain(
    mapping: ?*ShardMapping,
    base_out: ?*?[*]const u8,
    len_out: ?*u64,
) i32 {
    const m = mapping orelse return nullArgument("mapping");
    const base_ptr = base_out orelse return nullArgument("base_out");
    const len_ptr = len_out orelse return nullArgument("len_out");
    m.retain();
    base_ptr.* = m.bytes().ptr;
    len_ptr.* = m.bytes().len;
    return status_ok;
}

export fn drt_mapping_release(mapping: ?*ShardMapping) void {
    const m = mapping orelse return;
    m.release();
}

export fn drt_batch_release(view: ?*sample_batch.View) void {
    const v = view orelse return;
    read_pipeline.Pipeline.releaseBatchLater(allocator, sample_batch.SampleBatch.fromView(v));
}

export fn drt_iterator_destroy(iterator: ?*dataset_module.Iterator) void {
    const it = iterator orelse return;
    // leaked in a forked child: see drt_writer_destroy
    if (!it.dataset.pool.ownedByThisProcess()) return;
    it.destroy();
}
