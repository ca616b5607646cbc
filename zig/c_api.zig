//! The C ABI of dataset_rt.h. The exported functions only translate: they check pointers,
//! convert C types to Zig types, map Zig errors to status codes and store messages in the
//! calling thread's last-error buffer. No logic lives in them. This file holds the ABI
//! version, the last error, runtimes and core-owned buffers; the other areas are in
//! c_api_writer.zig, c_api_dataset.zig, c_api_table.zig, c_api_iterator.zig,
//! c_api_codec.zig, c_api_integrity.zig, c_api_formats.zig and c_api_partitions.zig.
const thread_pool = @import("base/thread_pool.zig");
const error_words = @import("base/error_words.zig");
const c_types = @import("c_types.zig");
const Buffer = c_types.Buffer;

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_state = c_status.status_state;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const nullArgument = c_status.nullArgument;
const Runtime = c_status.Runtime;

const abi_version: u32 = 4;

export fn drt_abi_version() u32 {
    return abi_version;
}

export fn drt_last_error() [*:0]const u8 {
    return &c_status.last_error;
}

// ---- runtime ---------------------------------------------------------------

export fn drt_runtime_create(num_workers: u32, out: ?*?*Runtime) i32 {
    const out_ptr = out orelse return nullArgument("out pointer");
    if (num_workers < 1) return failMessage(
        status_invalid_argument,
        "num_workers must be greater than zero",
        .{},
    );
    if (num_workers > thread_pool.workers_max) return failMessage(
        status_invalid_argument,
        "num_workers must be at most {d}, got {d}",
        .{ thread_pool.workers_max, num_workers },
    );
    out_ptr.* = Runtime.create(allocator, num_workers) catch |err| return failMessage(
        status_state,
        "cannot start {d} worker threads: {f}",
        .{ num_workers, error_words.of(err) },
    );
    return status_ok;
}

export fn drt_runtime_destroy(runtime: ?*Runtime) void {
    const pool = runtime orelse return;
    pool.release();
}

export fn drt_runtime_num_workers(runtime: ?*const Runtime) u32 {
    const pool = runtime orelse return 0;
    return pool.workerCount();
}

// ---- core-owned buffers ------------------------------------------------------

export fn drt_buffer_release(buffer: ?*Buffer) void {
    const b = buffer orelse return;
    allocator.free(b.data[0..@intCast(b.len)]);
    allocator.destroy(b);
}
