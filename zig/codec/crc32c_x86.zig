//! CRC-32C for x86_64 CPUs with SSE4.2 (`crc32`) and PCLMULQDQ.
//!
//! build.zig compiles this file as its own static library with +crc32,+sse4_2,+pclmul,
//! while the rest of the core stays portable. crc32c.zig calls in here only after CPUID
//! has confirmed both instructions. The symbol is hidden: it links into the core but is
//! not exported from the library.
//!
//! One `crc32` folds eight bytes into the CRC, but each waits for the one before it, and
//! the instruction's latency is about three times its issue interval. So a chunk of three
//! equal blocks runs as three independent CRCs, one per block, each starting from zero,
//! and they are joined afterwards: by linearity the CRC of the chunk, starting from
//! `state`, is
//!
//!     state * x^(8 * 3B)  ^  first * x^(8 * 2B)  ^  second * x^(8 * B)  ^  third
//!
//! modulo the polynomial, where B is the block length in bytes. Each shift is one
//! carry-less multiply (PCLMULQDQ) by a constant computed at compile time, and the three
//! products are reduced together by one more `crc32` (see `shiftConstant`). The other
//! way to shift a CRC by a fixed length, per-length "zeros" tables, costs four loads
//! from a 4 KiB table per shift and a table per block length, tables that compete with
//! the data for the L1 cache; the multiply needs one 32-bit constant per shift and runs
//! in a few cycles. The previous state is shifted along with the blocks instead of
//! starting the first block, so no block waits for the join of the chunk before it.
//!
//! The chunk lengths form a ladder (`block_lengths`): long blocks while the buffer lasts,
//! then shorter ones, then single words, then one step each of four, two and one bytes
//! for what is left. The logic is the same as in crc32c_arm.zig, which has its own
//! instructions for each step.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

/// This file is the root of a compilation of its own, with std options of its own:
/// without this, its objects bring std's per-thread signal stack into the library's
/// thread-local block (see `std_options` in root.zig).
pub const std_options: std.Options = .{ .signal_stack_size = null };

comptime {
    // The instructions below exist only with these features.
    assert(builtin.cpu.hasAll(.x86, &.{ .crc32, .sse4_2, .pclmul }));
    @export(&update, .{ .name = "dataset_rt_internal_crc32c_x86", .visibility = .hidden });
}

/// CRC-32C arithmetic, reflected: bit 31 stands for x^0 and bit 0 for x^31 (x^32 implied).
const crc32c_polynomial = @import("crc32c_polynomial.zig");
const powerOfX = crc32c_polynomial.powerOfX;

/// Block lengths in bytes, longest first; a chunk is three blocks. Each is a multiple of
/// the eight bytes one `crc32` consumes.
const block_lengths = [_]usize{ 4096, 512, 64 };

comptime {
    for (block_lengths, 0..) |block_length, index| {
        assert(block_length % 8 == 0);
        if (index > 0) assert(block_length < block_lengths[index - 1]);
    }
}

/// Advances the CRC register `state` (not inverted: crc32c.zig inverts before and after)
/// over `length` bytes at `bytes`, which need no alignment.
fn update(state: u32, bytes: [*]const u8, length: usize) callconv(.c) u32 {
    var register = state;
    var rest = bytes[0..length];
    // A load that straddles two cache lines costs extra; starting the chunks on an
    // eight-byte boundary keeps all their loads within one.
    if (rest.len >= 3 * block_lengths[block_lengths.len - 1] + 7) {
        const head_length = (8 - @intFromPtr(rest.ptr) % 8) % 8;
        register = updateShort(register, rest[0..head_length]);
        rest = rest[head_length..];
        assert(@intFromPtr(rest.ptr) % 8 == 0);
    }
    inline for (block_lengths) |block_length| {
        while (rest.len >= 3 * block_length) {
            register = updateChunk(block_length, register, rest[0 .. 3 * block_length]);
            rest = rest[3 * block_length ..];
        }
    }
    var register_wide: u64 = register;
    while (rest.len >= 8) {
        register_wide = crc32Word(register_wide, std.mem.readInt(u64, rest[0..8], .little));
        rest = rest[8..];
    }
    return updateShort(@truncate(register_wide), rest);
}

/// The register after `bytes`, fewer than eight, in at most three steps: one, two, then
/// four bytes, so that a head of `8 - address % 8` bytes ends on an aligned address.
fn updateShort(state: u32, bytes: []const u8) u32 {
    assert(bytes.len < 8);
    var register = state;
    var rest = bytes;
    if (rest.len & 1 != 0) {
        register = crc32Byte(register, rest[0]);
        rest = rest[1..];
    }
    if (rest.len & 2 != 0) {
        register = crc32Half(register, std.mem.readInt(u16, rest[0..2], .little));
        rest = rest[2..];
    }
    if (rest.len & 4 != 0) {
        register = crc32Quarter(register, std.mem.readInt(u32, rest[0..4], .little));
        rest = rest[4..];
    }
    assert(rest.len == 0);
    return register;
}

/// The register after `chunk`, three blocks of `block_length` bytes, from `state`.
inline fn updateChunk(
    comptime block_length: usize,
    state: u32,
    chunk: *const [3 * block_length]u8,
) u32 {
    // 64-bit registers: `crc32q` writes all of one, which saves a zero extension per step.
    var first: u64 = 0;
    var second: u64 = 0;
    var third: u64 = 0;
    var offset: usize = 0;
    while (offset < block_length) : (offset += 8) {
        first = crc32Word(first, std.mem.readInt(u64, chunk[offset..][0..8], .little));
        second = crc32Word(
            second,
            std.mem.readInt(u64, chunk[block_length + offset ..][0..8], .little),
        );
        third = crc32Word(
            third,
            std.mem.readInt(u64, chunk[2 * block_length + offset ..][0..8], .little),
        );
    }
    const shifted = carrylessMultiply(state, comptime shiftConstant(3 * block_length)) ^
        carrylessMultiply(@truncate(first), comptime shiftConstant(2 * block_length)) ^
        carrylessMultiply(@truncate(second), comptime shiftConstant(block_length));
    return @truncate(crc32Word(0, shifted) ^ third);
}

/// The constant whose carry-less product with a register, reduced by `crc32Word(0, _)`,
/// is that register shifted over `byte_count` zero bytes: x^(8 * byte_count - 33).
///
/// In the reflected order a 32-bit value v stands for V(x) = sum of v_i x^(31 - i). The
/// 64-bit carry-less product of u and v, read the same way over 64 bits, is U V x (the
/// product's top term, bit 63, is always zero). `crc32` with register 0 over a 64-bit
/// word W gives W x^32 mod P. So `crc32Word(0, u * k)` is U K x^33 mod P, and with
/// K = x^(8n - 33) that is U x^(8n) mod P: U shifted over n bytes.
fn shiftConstant(comptime byte_count: usize) u32 {
    comptime assert(8 * byte_count >= 33);
    return comptime powerOfX(8 * byte_count - 33);
}

/// The register after eight more bytes, `word` read little-endian (the first byte lowest).
/// The CRC register is the low half of `register`; the instruction zeroes the high half.
inline fn crc32Word(register: u64, word: u64) u64 {
    return asm ("crc32q %[word], %[register]"
        : [register] "=r" (-> u64),
        : [_] "0" (register),
          [word] "r" (word),
    );
}

/// The register after four more bytes, read little-endian.
inline fn crc32Quarter(register: u32, quarter: u32) u32 {
    return asm ("crc32l %[quarter], %[register]"
        : [register] "=r" (-> u32),
        : [_] "0" (register),
          [quarter] "r" (quarter),
    );
}

/// The register after two more bytes, read little-endian.
inline fn crc32Half(register: u32, half: u16) u32 {
    return asm ("crc32w %[half], %[register]"
        : [register] "=r" (-> u32),
        : [_] "0" (register),
          [half] "r" (half),
    );
}

/// The register after one more byte.
inline fn crc32Byte(register: u32, byte: u8) u32 {
    return asm ("crc32b %[byte], %[register]"
        : [register] "=r" (-> u32),
        : [_] "0" (register),
          [byte] "r" (byte),
    );
}

/// The 64-bit carry-less product of two 32-bit values.
inline fn carrylessMultiply(a: u32, b: u32) u64 {
    const V2u64 = @Vector(2, u64);
    const product = asm ("pclmulqdq $0x00, %[b], %[a]"
        : [a] "=x" (-> V2u64),
        : [_] "0" (V2u64{ a, 0 }),
          [b] "x" (V2u64{ b, 0 }),
    );
    return product[0];
}
