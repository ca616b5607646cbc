//! The SHA-256 block function for CPUs with the SHA extensions.
//!
//! build.zig compiles this file as its own static library with +sha,+avx2, so the
//! std SHA-256 below takes its SHA-NI code path, while the rest of the core stays
//! portable. sha256.zig calls in here only after CPUID has confirmed the features.
//! The symbol is hidden: it links into the core but is not exported from the library.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

const Sha256 = std.crypto.hash.sha2.Sha256;

comptime {
    // Without these features std would silently fall back to the portable rounds.
    assert(builtin.cpu.hasAll(.x86, &.{ .sha, .avx2 }));
    @export(&compressBlocks, .{ .name = "dataset_rt_internal_sha256_ni_blocks", .visibility = .hidden });
}

/// Advances the eight state words over `block_count` whole 64-byte blocks (no padding).
fn compressBlocks(state: *[8]u32, blocks: [*]const u8, block_count: usize) callconv(.c) void {
    // std keeps its round function private; an update of whole blocks on an empty
    // buffer runs exactly the rounds, so borrowing a Sha256 for its state is enough.
    var hasher = Sha256.init(.{});
    hasher.s = state.*;
    hasher.update(blocks[0 .. block_count * Sha256.block_length]);
    assert(hasher.buf_len == 0);
    state.* = hasher.s;
}
