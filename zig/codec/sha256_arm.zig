//! The SHA-256 block function for aarch64 CPUs with the SHA2 instructions (FEAT_SHA256).
//!
//! build.zig compiles this file as its own static library with +sha2, while the rest
//! of the core stays portable: the aarch64-linux-gnu.2.17 library targets a baseline
//! CPU without the feature, where std's SHA-256 runs its portable rounds. sha256.zig
//! calls in here only after the OS has confirmed the instructions (HWCAP_SHA2 on
//! Linux). The symbol is hidden: it links into the core but is not exported.
//!
//! As in sha256_ni.zig, the state stays in two registers across all the blocks of a
//! call and the words are loaded and swapped sixteen bytes at a time. Checked against
//! the portable rounds under qemu-user; its speed on real aarch64 hardware is not
//! measured (there is none on the machines we build on), so unlike the SHA-NI kernel
//! it has no prefetch that a measurement asked for.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

const block_words = @import("sha256_block_words.zig");
const V4u32 = block_words.V4u32;

/// This file is the root of a compilation of its own, with std options of its own:
/// without this, its objects bring std's per-thread signal stack into the library's
/// thread-local block (see `std_options` in root.zig).
pub const std_options: std.Options = .{ .signal_stack_size = null };

comptime {
    // The instructions below exist only with this feature.
    assert(builtin.cpu.has(.aarch64, .sha2));
    @export(
        &compressBlocks,
        .{ .name = "dataset_rt_internal_sha256_arm_blocks", .visibility = .hidden },
    );
}

/// Advances the eight state words over `block_count` whole 64-byte blocks (no padding).
fn compressBlocks(state: *[8]u32, blocks: [*]const u8, block_count: usize) callconv(.c) void {
    // The instructions keep the state as (a, b, c, d) and (e, f, g, h), lowest lane first.
    var abcd: V4u32 = state[0..4].*;
    var efgh: V4u32 = state[4..8].*;
    for (0..block_count) |block_index| {
        const block = blocks + block_index * 64;
        const abcd_before = abcd;
        const efgh_before = efgh;
        // The message schedule, four words per vector; words[k % 4] holds words
        // 4k .. 4k+3 when rounds 4k .. 4k+3 run.
        var words = block_words.messageWords(block);
        inline for (0..16) |k| {
            if (k >= 4) words[k % 4] = nextWords(
                words[k % 4],
                words[(k + 1) % 4],
                words[(k + 2) % 4],
                words[(k + 3) % 4],
            );
            const summed = words[k % 4] +% block_words.roundConstants(k);
            // Both halves advance from the state before these four rounds.
            const abcd_previous = abcd;
            abcd = fourRoundsFirstHalf(abcd, efgh, summed);
            efgh = fourRoundsSecondHalf(efgh, abcd_previous, summed);
        }
        abcd +%= abcd_before;
        efgh +%= efgh_before;
    }
    state[0..4].* = abcd;
    state[4..8].* = efgh;
}

/// (a, b, c, d) after four rounds, from the state before them and message word plus
/// round constant for each.
inline fn fourRoundsFirstHalf(abcd: V4u32, efgh: V4u32, words: V4u32) V4u32 {
    return asm ("sha256h.4s %[abcd], %[efgh], %[words]"
        : [abcd] "=w" (-> V4u32),
        : [_] "0" (abcd),
          [efgh] "w" (efgh),
          [words] "w" (words),
    );
}

/// (e, f, g, h) after the same four rounds, from the state before them.
inline fn fourRoundsSecondHalf(efgh: V4u32, abcd: V4u32, words: V4u32) V4u32 {
    return asm ("sha256h2.4s %[efgh], %[abcd], %[words]"
        : [efgh] "=w" (-> V4u32),
        : [_] "0" (efgh),
          [abcd] "w" (abcd),
          [words] "w" (words),
    );
}

/// Words t .. t+3 of the schedule from words t-16 .. t-1 (four vectors, oldest first).
inline fn nextWords(oldest: V4u32, older: V4u32, newer: V4u32, newest: V4u32) V4u32 {
    const sigma0_summed = asm ("sha256su0.4s %[oldest], %[older]"
        : [oldest] "=w" (-> V4u32),
        : [_] "0" (oldest),
          [older] "w" (older),
    );
    return asm ("sha256su1.4s %[partial], %[newer], %[newest]"
        : [partial] "=w" (-> V4u32),
        : [_] "0" (sigma0_summed),
          [newer] "w" (newer),
          [newest] "w" (newest),
    );
}
