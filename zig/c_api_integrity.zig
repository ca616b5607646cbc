//! The exported functions of integrity (ABI 3): scrubbing a cache, and what
//! stream iterators do with corrupt records. Same conventions as c_api.zig.
const std = @import("std");
const c_status = @import("c_status.zig");
const c_types = @import("c_types.zig");
const error_words = @import("base/error_words.zig");
const dataset_module = @import("read/dataset.zig");
const sample_batch = @import("read/sample_batch.zig");
const verify = @import("read/verify.zig");
const Remote = @import("read/remote.zig").Remote;
const cache_layout = @import("format/cache_layout.zig");
const Runtime = c_status.Runtime;
const VerifyProblem = c_types.VerifyProblem;
const allocator = c_status.allocator;
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_out_of_memory = c_status.status_out_of_memory;
const status_out_of_range = c_status.status_out_of_range;
const status_wrong_process = c_status.status_wrong_process;
const nullArgument = c_status.nullArgument;
const failMessage = c_status.failMessage;
const statusOf = c_status.statusOf;
const checkProcess = c_status.checkProcess;
const byteString = c_status.byteString;

// ---- verify (ABI 3) --------------------------------------------------------

export fn drt_verify_create(
    runtime: ?*Runtime,
    path: ?[*]const u8,
    path_len: u64,
    out: ?*?*verify.Verifier,
) i32 {
    const pool = runtime orelse return nullArgument("runtime");
    if (!checkProcess(pool)) return status_wrong_process;
    const path_bytes = byteString(path, path_len) orelse return nullArgument("path");
    const out_ptr = out orelse return nullArgument("out pointer");
    out_ptr.* = verify.Verifier.create(allocator, pool, path_bytes) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    return status_ok;
}

export fn drt_verify_create_remote(
    runtime: ?*Runtime,
    url: ?[*]const u8,
    url_len: u64,
    remote: ?*Remote,
    out: ?*?*verify.Verifier,
) i32 {
    const pool = runtime orelse return nullArgument("runtime");
    if (!checkProcess(pool)) return status_wrong_process;
    const url_bytes = byteString(url, url_len) orelse return nullArgument("url");
    const hook = remote orelse return nullArgument("remote");
    const out_ptr = out orelse return nullArgument("out pointer");
    if (!cache_layout.isRemote(url_bytes)) return failMessage(
        status_invalid_argument,
        "'{s}' is not a URL of a remote cache (s3://, http://, https://)",
        .{url_bytes},
    );
    out_ptr.* = verify.Verifier.createRemote(allocator, pool, url_bytes, hook) catch
        return failMessage(status_out_of_memory, "out of memory", .{});
    return status_ok;
}

export fn drt_verify_run(verifier: ?*verify.Verifier) i32 {
    const v = verifier orelse return nullArgument("verifier");
    if (!checkProcess(v.pool)) return status_wrong_process;
    v.run() catch |err| return failMessage(
        statusOf(err),
        "verify of {s} stopped: {f}",
        .{ v.path, error_words.of(err) },
    );
    return status_ok;
}

export fn drt_verify_progress(
    verifier: ?*const verify.Verifier,
    bytes_done: ?*u64,
    bytes_total: ?*u64,
) i32 {
    const v = verifier orelse return nullArgument("verifier");
    const done_ptr = bytes_done orelse return nullArgument("bytes_done");
    const total_ptr = bytes_total orelse return nullArgument("bytes_total");
    done_ptr.* = v.bytes_done.load(.monotonic);
    total_ptr.* = v.bytes_total.load(.monotonic);
    return status_ok;
}

export fn drt_verify_problem_count(
    verifier: ?*const verify.Verifier,
    kept: ?*u64,
    total: ?*u64,
) i32 {
    const v = verifier orelse return nullArgument("verifier");
    const kept_ptr = kept orelse return nullArgument("kept");
    const total_ptr = total orelse return nullArgument("total");
    kept_ptr.* = v.found().len;
    total_ptr.* = v.problems_total;
    return status_ok;
}

export fn drt_verify_problem(
    verifier: ?*const verify.Verifier,
    index: u64,
    out: ?*VerifyProblem,
) i32 {
    const v = verifier orelse return nullArgument("verifier");
    const out_ptr = out orelse return nullArgument("out pointer");
    const problems = v.found();
    if (index >= problems.len) return failMessage(
        status_out_of_range,
        "problem {d} of {d}",
        .{ index, problems.len },
    );
    const problem = problems[@intCast(index)];
    out_ptr.* = .{
        .file = problem.file.ptr,
        .file_len = problem.file.len,
        .message = problem.message.ptr,
        .message_len = problem.message.len,
        .sample_id = problem.sample_id orelse 0,
        .offset = problem.offset orelse 0,
        .has_sample = @intFromBool(problem.sample_id != null),
        .has_offset = @intFromBool(problem.offset != null),
    };
    return status_ok;
}

export fn drt_verify_destroy(verifier: ?*verify.Verifier) void {
    const v = verifier orelse return;
    v.destroy();
}

// ---- corrupt records (ABI 3) -------------------------------------------------

export fn drt_dataset_set_on_corrupt(dataset: ?*dataset_module.Dataset, policy: u32) i32 {
    const d = dataset orelse return nullArgument("dataset");
    if (!checkProcess(d.pool)) return status_wrong_process;
    const on_corrupt = std.enums.fromInt(dataset_module.OnCorrupt, policy) orelse
        return failMessage(status_invalid_argument, "unknown on_corrupt policy {d}", .{policy});
    d.setOnCorrupt(on_corrupt);
    return status_ok;
}

export fn drt_batch_skipped(
    batch: ?*const sample_batch.View,
    count_out: ?*u64,
    skipped_out: ?*?[*]const sample_batch.Skipped,
) i32 {
    const view = batch orelse return nullArgument("batch");
    const count_ptr = count_out orelse return nullArgument("count_out");
    const skipped_ptr = skipped_out orelse return nullArgument("skipped_out");
    const skipped = sample_batch.SampleBatch.fromConstView(view).skipped.items;
    count_ptr.* = skipped.len;
    skipped_ptr.* = if (skipped.len == 0) null else skipped.ptr;
    return status_ok;
}
