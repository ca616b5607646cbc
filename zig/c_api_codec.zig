//! The exported codec utilities: LZ4, the sampler's draws, permutation rows and SHA-256,
//! for bindings and tests that check the core against their own reference. Same
//! conventions as c_api.zig.
const std = @import("std");
const lz4 = @import("codec/lz4.zig");
const sha256 = @import("codec/sha256.zig");
const sampler = @import("stream/sampler.zig");
const permutation = @import("stream/permutation.zig");

const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const status_invalid_input = c_status.status_invalid_input;
const status_out_of_memory = c_status.status_out_of_memory;
const allocator = c_status.allocator;
const failMessage = c_status.failMessage;
const nullArgument = c_status.nullArgument;
const arrayArgument = c_status.arrayArgument;

export fn drt_lz4_compress_bound(source_len: u64) u64 {
    // Like LZ4_compressBound: 0 for an input too large for one block (and the formula never
    // overflows).
    if (source_len > lz4.source_length_max) return 0;
    return lz4.compressBound(@intCast(source_len));
}

export fn drt_lz4_compress(
    source: ?[*]const u8,
    source_len: u64,
    destination: ?[*]u8,
    destination_len: u64,
    written: ?*u64,
) i32 {
    const out = written orelse return nullArgument("written");
    const src: []const u8 = if (source_len == 0) &.{} else (source orelse return nullArgument(
        "source",
    ))[0..@intCast(source_len)];
    const dst = (destination orelse return nullArgument("destination"))[0..@intCast(
        destination_len,
    )];
    if (src.len > lz4.source_length_max) return failMessage(
        status_invalid_argument,
        "cannot compress {d} bytes in one lz4 block (at most {d})",
        .{ src.len, lz4.source_length_max },
    );
    if (dst.len < lz4.compressBound(src.len)) return failMessage(
        status_invalid_argument,
        "destination holds {d} bytes; compressing {d} bytes needs {d}",
        .{ dst.len, src.len, lz4.compressBound(src.len) },
    );
    out.* = lz4.compress(src, dst);
    return status_ok;
}

export fn drt_lz4_decompress(
    source: ?[*]const u8,
    source_len: u64,
    destination: ?[*]u8,
    destination_len: u64,
) i32 {
    const src: []const u8 = if (source_len == 0) &.{} else (source orelse return nullArgument(
        "source",
    ))[0..@intCast(source_len)];
    const dst: []u8 = if (destination_len == 0) &.{} else (destination orelse return nullArgument(
        "destination",
    ))[0..@intCast(destination_len)];
    lz4.decompress(src, dst) catch return failMessage(
        status_invalid_input,
        "corrupt lz4 block ({d} bytes, expected to decode to {d} bytes)",
        .{ src.len, dst.len },
    );
    return status_ok;
}

export fn drt_sampler_draws(
    weights: ?[*]const f64,
    n: u64,
    seed: u64,
    start: u64,
    count: u64,
    rows_out: ?[*]u64,
) i32 {
    const weight_values = (weights orelse return nullArgument("weights"))[0..@intCast(n)];
    const rows: []u64 =
        arrayArgument(rows_out, count) orelse return nullArgument("rows_out");
    if (!sampler.weightsValid(weight_values)) return failMessage(
        status_invalid_argument,
        "weights must be positive and finite (1 to 2^53 of them)",
        .{},
    );
    if (count != 0 and count - 1 > std.math.maxInt(u64) - start) return failMessage(
        status_invalid_argument,
        "positions pass 2^64 - 1",
        .{},
    );
    sampler.drawRows(allocator, weight_values, seed, start, rows) catch return failMessage(
        status_out_of_memory,
        "out of memory",
        .{},
    );
    return status_ok;
}

export fn drt_permutation_rows(n: u64, seed: u64, start: u64, count: u64, rows_out: ?[*]u64) i32 {
    const rows: []u64 =
        arrayArgument(rows_out, count) orelse return nullArgument("rows_out");
    if (n < 1 or n > sampler.row_count_max) return failMessage(
        status_invalid_argument,
        "n must be between 1 and 2^53, got {d}",
        .{n},
    );
    if (count != 0 and count - 1 > std.math.maxInt(u64) - start) return failMessage(
        status_invalid_argument,
        "positions pass 2^64 - 1",
        .{},
    );
    permutation.rowRange(sampler.Key.derive(permutation.key_domain, seed), n, start, rows);
    return status_ok;
}

export fn drt_sha256(data: ?[*]const u8, len: u64, out: ?*[32]u8) void {
    const digest_out = out orelse return;
    const bytes: []const u8 = if (len == 0) &.{} else (data orelse return)[0..@intCast(len)];
    digest_out.* = sha256.hash(bytes);
}
