//! CRC-32C for aarch64 CPUs with the CRC32 instructions (FEAT_CRC32).
//!
//! build.zig compiles this file as its own static library with +crc, while the rest of
//! the core stays portable: the aarch64-linux-gnu.2.17 library targets a baseline CPU
//! without the feature (it is optional before Armv8.1). crc32c.zig calls in here only
//! once it knows the CPU has the instructions (HWCAP_CRC32 on Linux; every Apple CPU has
//! them). The symbol is hidden: it links into the core but is not exported.
//!
//! The logic is that of crc32c_x86.zig, whose doc comment explains it: chunks of three
//! equal blocks run as three independent CRCs, and the register before the chunk and
//! the CRCs of the first two blocks are shifted over the rest of the chunk by a
//! carry-less multiply with a constant, reduced by one more CRC instruction. Here the
//! multiply is done with shifts and xors of the comptime-known constant's bits rather
//! than PMULL: PMULL comes with the optional cryptographic extension, which some CPUs
//! with CRC32 lack (the Cortex-A72 of the Raspberry Pi 4), and it would add a second
//! probe. The shifts cost a few dozen cycles per chunk, spread over three blocks.
//!
//! Checked against the portable loop under qemu-user; its speed on real aarch64
//! hardware is not measured (there is none on the machines we build on).
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

/// This file is the root of a compilation of its own, with std options of its own:
/// without this, its objects bring std's per-thread signal stack into the library's
/// thread-local block (see `std_options` in root.zig).
pub const std_options: std.Options = .{ .signal_stack_size = null };

comptime {
    // The instructions below exist only with this feature.
    assert(builtin.cpu.has(.aarch64, .crc));
    @export(&update, .{ .name = "dataset_rt_internal_crc32c_arm", .visibility = .hidden });
}

/// CRC-32C arithmetic, reflected: bit 31 stands for x^0 and bit 0 for x^31 (x^32 implied).
const crc32c_polynomial = @import("crc32c_polynomial.zig");
const powerOfX = crc32c_polynomial.powerOfX;

/// Block lengths in bytes, longest first; a chunk is three blocks. Each is a multiple of
/// the eight bytes one `crc32cx` consumes.
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
    while (rest.len >= 8) {
        register = crc32Word(register, std.mem.readInt(u64, rest[0..8], .little));
        rest = rest[8..];
    }
    return updateShort(register, rest);
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
    var first: u32 = 0;
    var second: u32 = 0;
    var third: u32 = 0;
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
        carrylessMultiply(first, comptime shiftConstant(2 * block_length)) ^
        carrylessMultiply(second, comptime shiftConstant(block_length));
    return crc32Word(0, shifted) ^ third;
}

/// The constant whose carry-less product with a register, reduced by `crc32Word(0, _)`,
/// is that register shifted over `byte_count` zero bytes: x^(8 * byte_count - 33). See
/// `shiftConstant` in crc32c_x86.zig for why; `crc32cx` reduces exactly as `crc32q` does.
fn shiftConstant(comptime byte_count: usize) u32 {
    comptime assert(8 * byte_count >= 33);
    return comptime powerOfX(8 * byte_count - 33);
}

/// The register after eight more bytes, `word` read little-endian (the first byte lowest).
inline fn crc32Word(register: u32, word: u64) u32 {
    return asm ("crc32cx %[result:w], %[register:w], %[word:x]"
        : [result] "=r" (-> u32),
        : [register] "r" (register),
          [word] "r" (word),
    );
}

/// The register after four more bytes, read little-endian.
inline fn crc32Quarter(register: u32, quarter: u32) u32 {
    return asm ("crc32cw %[result:w], %[register:w], %[quarter:w]"
        : [result] "=r" (-> u32),
        : [register] "r" (register),
          [quarter] "r" (quarter),
    );
}

/// The register after two more bytes, read little-endian.
inline fn crc32Half(register: u32, half: u16) u32 {
    return asm ("crc32ch %[result:w], %[register:w], %[half:w]"
        : [result] "=r" (-> u32),
        : [register] "r" (register),
          [half] "r" (half),
    );
}

/// The register after one more byte.
inline fn crc32Byte(register: u32, byte: u8) u32 {
    return asm ("crc32cb %[result:w], %[register:w], %[byte:w]"
        : [result] "=r" (-> u32),
        : [register] "r" (register),
          [byte] "r" (byte),
    );
}

/// The 64-bit carry-less product of `value` and a constant: `value` shifted to each set
/// bit of the constant, xored together (what PMULL computes in one instruction).
inline fn carrylessMultiply(value: u32, comptime constant: u32) u64 {
    var product: u64 = 0;
    inline for (0..32) |bit| {
        if ((constant >> bit) & 1 != 0) product ^= @as(u64, value) << bit;
    }
    return product;
}
