//! The SHA-256 block function for CPUs with the SHA extensions.
//!
//! build.zig compiles this file as its own static library with +sha,+avx2, while the
//! rest of the core stays portable. sha256.zig calls in here only after CPUID has
//! confirmed the features. The symbol is hidden: it links into the core but is not
//! exported from the library.
//!
//! std's SHA-NI path works one block per call: it byte-swaps the words one by one
//! through memory and rearranges the eight state words in and out of the register
//! layout for every block. Here the state stays in that layout across all the blocks
//! of a call and the words are loaded and swapped sixteen bytes at a time, so the
//! loop is the chain of `sha256rnds2` itself, close to OpenSSL's speed and well
//! above std's.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

const block_words = @import("sha256_block_words.zig");
const V4u32 = block_words.V4u32;

/// This file is the root of a compilation of its own, with std options of its own:
/// without this, its objects bring std's 256 KiB per-thread signal stack into the
/// library's thread-local block all the same (see `std_options` in root.zig).
pub const std_options: std.Options = .{ .signal_stack_size = null };

comptime {
    // The instructions below exist only with these features.
    assert(builtin.cpu.hasAll(.x86, &.{ .sha, .avx2 }));
    @export(
        &compressBlocks,
        .{ .name = "dataset_rt_internal_sha256_ni_blocks", .visibility = .hidden },
    );
}

/// Advances the eight state words over `block_count` whole 64-byte blocks (no padding).
fn compressBlocks(state: *[8]u32, blocks: [*]const u8, block_count: usize) callconv(.c) void {
    // `sha256rnds2` keeps the state as two vectors, lowest lane first: (f, e, b, a)
    // and (h, g, d, c).
    var abef: V4u32 = .{ state[5], state[4], state[1], state[0] };
    var cdgh: V4u32 = .{ state[7], state[6], state[3], state[2] };
    for (0..block_count) |block_index| {
        const block = blocks + block_index * 64;
        // Sixteen blocks ahead: a buffer larger than the caches then hashes nearly
        // as fast as one in L2, which the hardware prefetcher alone does not reach.
        @prefetch(block + 1024, .{ .rw = .read, .locality = 3, .cache = .data });
        const abef_before = abef;
        const cdgh_before = cdgh;
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
            cdgh = twoRounds(cdgh, abef, summed);
            abef = twoRounds(abef, cdgh, @shuffle(u32, summed, undefined, [4]i32{ 2, 3, 2, 3 }));
        }
        abef +%= abef_before;
        cdgh +%= cdgh_before;
    }
    state.* = .{ abef[3], abef[2], cdgh[3], cdgh[2], abef[1], abef[0], cdgh[1], cdgh[0] };
}

/// Two rounds on `state` (the half they update), reading `other` (the other half)
/// and the two lowest lanes of `words` (message word plus round constant).
inline fn twoRounds(state: V4u32, other: V4u32, words: V4u32) V4u32 {
    return asm ("sha256rnds2 %[other], %[state]"
        : [state] "=x" (-> V4u32),
        : [_] "0" (state),
          [other] "x" (other),
          [_] "{xmm0}" (words),
    );
}

/// Words t .. t+3 of the schedule from words t-16 .. t-1 (four vectors, oldest first).
inline fn nextWords(oldest: V4u32, older: V4u32, newer: V4u32, newest: V4u32) V4u32 {
    const sigma0_summed = asm ("sha256msg1 %[older], %[oldest]"
        : [oldest] "=x" (-> V4u32),
        : [_] "0" (oldest),
          [older] "x" (older),
    );
    // Words t-7 .. t-4: the upper three of `newer` and the lowest of `newest`.
    const seventh_back: V4u32 = @shuffle(u32, newer, newest, [4]i32{ 1, 2, 3, -1 });
    return asm ("sha256msg2 %[newest], %[partial]"
        : [partial] "=x" (-> V4u32),
        : [_] "0" (sigma0_summed +% seventh_back),
          [newest] "x" (newest),
    );
}
