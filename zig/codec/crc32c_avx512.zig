//! CRC-32C for x86_64 CPUs with AVX-512 and VPCLMULQDQ: carry-less-multiply folding of
//! 64-byte vectors, for long inputs.
//!
//! build.zig compiles this file as its own static library with AVX-512 and VPCLMULQDQ
//! (and the features of crc32c_x86.zig), while the rest of the core stays portable.
//! crc32c.zig calls in here only after CPUID has confirmed the instructions and XGETBV
//! that the OS saves the ZMM and opmask registers, and only for the whole 64-byte
//! vectors of a long input: crc32c_x86.zig does short inputs and the tail. The symbol is
//! hidden: it links into the core but is not exported from the library.
//!
//! `crc32` consumes eight bytes per cycle at best. A carry-less multiply consumes a whole
//! vector: the CRC is linear, so a 16-byte piece of the message can be replaced by any
//! 16-byte value that leaves the same remainder modulo the polynomial P once moved to a
//! later position. The loop keeps `accumulator_count` vectors of four such pieces each and
//! moves every piece forward over `stride_bytes` at once ("folding"), xoring it into the
//! bytes found there; the accumulators are then folded into one vector, that vector's
//! four pieces into one, and `crc32` reduces the last 16 bytes to the register.
//!
//! Notation (the reflected order of the CRC itself): an n-bit value v stands for the
//! polynomial sum of v_i x^(n-1-i), so the first byte of the message holds its highest
//! terms. A 16-byte piece A loaded little-endian, followed by `after` more bytes of the
//! message, adds A x^(8 after) to it. Moving A forward over d bytes means finding A'
//! congruent to A x^(8d) modulo P. Split A into its 64-bit words: A = L x^64 + H. The
//! 128-bit carry-less product of 64-bit u and v, read the same way, is U V x. A 32-bit
//! constant c in the low half of a 64-bit word stands there for C x^32. So
//!
//!     clmul(L, c_low) ^ clmul(H, c_high)  =  x^33 (L C_low + H C_high)
//!
//! is A' for C_low = x^(8d + 31) mod P and C_high = x^(8d - 33) mod P (`foldConstants`),
//! and has degree at most 33 + 63 + 31 = 127: it fits in the 16 bytes it replaces.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

/// This file is the root of a compilation of its own, with std options of its own:
/// without this, its objects bring std's per-thread signal stack into the library's
/// thread-local block (see `std_options` in root.zig).
pub const std_options: std.Options = .{ .signal_stack_size = null };

comptime {
    // The instructions below exist only with these features.
    assert(
        builtin.cpu.hasAll(.x86, &.{ .avx512f, .avx512vl, .vpclmulqdq, .pclmul, .crc32, .sse4_2 }),
    );
    @export(&update, .{ .name = "dataset_rt_internal_crc32c_avx512", .visibility = .hidden });
}

/// CRC-32C arithmetic, reflected: bit 31 stands for x^0 and bit 0 for x^31 (x^32 implied).
const crc32c_polynomial = @import("crc32c_polynomial.zig");
const polynomial = crc32c_polynomial.polynomial;
const powerOfX = crc32c_polynomial.powerOfX;

/// One ZMM register: four 16-byte pieces, each folded by its own 128-bit lane.
const vector_bytes = 64;
const piece_bytes = 16;
const pieces = vector_bytes / piece_bytes;
const Vector = @Vector(vector_bytes / 8, u64);

/// Vectors folded side by side. A fold waits for the multiply before it (several cycles),
/// so one accumulator would leave the multiplier idle most of the time; four keep it busy.
const accumulator_count = 4;
/// The bytes one round of the loop consumes, and how far each piece moves per round.
const stride_bytes = accumulator_count * vector_bytes;

/// The shortest input `update` takes: one vector per accumulator. crc32c.zig keeps a copy.
const length_min = stride_bytes;

/// Advances the CRC register `state` (not inverted: crc32c.zig inverts before and after)
/// over `length` bytes at `bytes`, which need no alignment. `length` is a multiple of 64
/// bytes and at least `length_min`.
fn update(state: u32, bytes: [*]const u8, length: usize) callconv(.c) u32 {
    assert(length % vector_bytes == 0);
    assert(length >= length_min);
    var accumulators: [accumulator_count]Vector = undefined;
    inline for (&accumulators, 0..) |*accumulator, index| {
        accumulator.* = load(bytes + index * vector_bytes);
    }
    // The register xored into the first four bytes: from there on, the register is zero.
    var register: Vector = @splat(0);
    register[0] = state;
    accumulators[0] ^= register;

    var offset: usize = stride_bytes;
    while (length - offset >= stride_bytes) : (offset += stride_bytes) {
        inline for (&accumulators, 0..) |*accumulator, index| {
            accumulator.* = fold(accumulator.*, comptime foldConstants(stride_bytes)) ^
                load(bytes + offset + index * vector_bytes);
        }
    }

    // Each accumulator moves to the position of the last one.
    var joined = accumulators[accumulator_count - 1];
    inline for (accumulators[0 .. accumulator_count - 1], 0..) |accumulator, index| {
        const distance = (accumulator_count - 1 - index) * vector_bytes;
        joined ^= fold(accumulator, comptime foldConstants(distance));
    }
    while (offset < length) : (offset += vector_bytes) {
        joined = fold(joined, comptime foldConstants(vector_bytes)) ^ load(bytes + offset);
    }
    return reduce(joined);
}

/// The register after the 64 bytes `vector` from a zero register. Its first three pieces
/// move to the position of the last one; from a zero register, `crc32` over the 16 bytes
/// of their sum S gives S x^32 mod P, the register after them.
inline fn reduce(vector: Vector) u32 {
    const constants = comptime constants: {
        var result: Vector = @splat(0);
        for (0..pieces - 1) |piece| {
            const pair = foldPair((pieces - 1 - piece) * piece_bytes);
            result[2 * piece] = pair[0];
            result[2 * piece + 1] = pair[1];
        }
        break :constants result; // The last piece stays: its constants are zero.
    };
    const last_piece = comptime last_piece: {
        var mask: Vector = @splat(0);
        mask[2 * pieces - 2] = std.math.maxInt(u64);
        mask[2 * pieces - 1] = std.math.maxInt(u64);
        break :last_piece mask;
    };
    const moved = fold(vector, constants) ^ (vector & last_piece);
    var sum: @Vector(2, u64) = @splat(0);
    inline for (0..pieces) |piece| {
        sum ^= @shuffle(u64, moved, undefined, [2]i32{ 2 * piece, 2 * piece + 1 });
    }
    return @truncate(crc32Word(crc32Word(0, sum[0]), sum[1]));
}

/// Each 16-byte piece of `vector` moved forward over the distance of `constants`.
inline fn fold(vector: Vector, constants: Vector) Vector {
    return carrylessMultiply("0x00", vector, constants) ^ carrylessMultiply(
        "0x11",
        vector,
        constants,
    );
}

/// The 64 bytes at `bytes`, read little-endian: one unaligned vector load.
inline fn load(bytes: [*]const u8) Vector {
    const vector: *align(1) const Vector = @ptrCast(bytes);
    return vector.*;
}

/// The constants that move every piece forward over `distance_bytes`, one pair per
/// 128-bit lane: x^(8d + 31) mod P for the low word, x^(8d - 33) mod P for the high.
fn foldConstants(comptime distance_bytes: usize) Vector {
    comptime {
        const pair = foldPair(distance_bytes);
        var result: Vector = undefined;
        for (0..pieces) |piece| {
            result[2 * piece] = pair[0];
            result[2 * piece + 1] = pair[1];
        }
        return result;
    }
}

/// The constants for the low and the high word of a piece moving over `distance_bytes`.
fn foldPair(comptime distance_bytes: usize) [2]u64 {
    comptime assert(8 * distance_bytes >= 33);
    return comptime .{ powerOfX(8 * distance_bytes + 31), powerOfX(8 * distance_bytes - 33) };
}

comptime {
    // Every fold distance used above (the loop's stride, the joins of the accumulators,
    // the pieces of the last vector), checked on a model of the instructions against the
    // definition: a piece followed by d zero bytes has the CRC of the piece it folds to.
    @setEvalBranchQuota(4_000_000);
    const samples = [_]u128{
        1,
        1 << 127,
        std.math.maxInt(u128),
        0x0123456789ABCDEF_FEDCBA9876543210,
    };
    var distances: [accumulator_count + pieces - 1]usize = undefined;
    for (0..accumulator_count) |index| distances[index] = (index + 1) * vector_bytes;
    for (1..pieces) |piece| distances[accumulator_count - 1 + piece] = piece * piece_bytes;
    for (distances) |distance| {
        const pair = foldPair(distance);
        for (samples) |sample| {
            const moved = modelMultiply(@truncate(sample), pair[0]) ^ modelMultiply(
                @truncate(sample >> 64),
                pair[1],
            );
            var message: [piece_bytes + stride_bytes]u8 = @splat(0);
            std.mem.writeInt(u128, message[0..piece_bytes], sample, .little);
            var moved_bytes: [piece_bytes]u8 = undefined;
            std.mem.writeInt(u128, &moved_bytes, moved, .little);
            assert(modelCrc(message[0 .. piece_bytes + distance]) == modelCrc(&moved_bytes));
        }
    }
}

/// The register after `bytes` from a zero register, one bit at a time.
fn modelCrc(bytes: []const u8) u32 {
    var register: u32 = 0;
    for (bytes) |byte| {
        register ^= byte;
        for (0..8) |_| register = (register >> 1) ^ (if (register & 1 != 0) polynomial else 0);
    }
    return register;
}

/// What PCLMULQDQ computes: the carry-less product of two 64-bit words.
fn modelMultiply(a: u64, b: u64) u128 {
    var product: u128 = 0;
    for (0..64) |bit| {
        if ((b >> @intCast(bit)) & 1 != 0) product ^= @as(u128, a) << @intCast(bit);
    }
    return product;
}

/// In each 128-bit lane, the carry-less product of one 64-bit word of `a` and one of `b`:
/// `selector` 0x00 takes both low words, 0x11 both high words.
inline fn carrylessMultiply(comptime selector: []const u8, a: Vector, b: Vector) Vector {
    return asm ("vpclmulqdq $" ++ selector ++ ", %[b], %[a], %[product]"
        : [product] "=x" (-> Vector),
        : [a] "x" (a),
          [b] "x" (b),
    );
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
