//! CRC-32C (Castagnoli, the iSCSI CRC): reflected polynomial 0x82F63B78, register
//! starting at all ones and inverted at the end. `checksum("123456789")` is 0xE3069283.
//!
//! The library is built for a baseline CPU, where only the table-driven loop here runs.
//! build.zig also links a kernel using the CPU's CRC-32C instructions: SSE4.2 `crc32`
//! with PCLMULQDQ on x86_64 (crc32c_x86.zig), the ARMv8 CRC32 instructions on aarch64
//! (crc32c_arm.zig). `update` picks it when the CPU says the instructions are usable.
//! Every kernel advances the same non-inverted register, so they give identical CRCs.
const std = @import("std");
const builtin = @import("builtin");
const build_options = @import("build_options");
const assert = std.debug.assert;

comptime {
    // Each kernel is code for one architecture; build.zig only provides it there.
    assert(!build_options.crc32c_x86_kernel or builtin.cpu.arch == .x86_64);
    assert(!build_options.crc32c_arm_kernel or builtin.cpu.arch == .aarch64);
}

/// CRC-32C, reflected: bit 31 stands for x^0 and bit 0 for x^31 (the x^32 term is implied).
const polynomial: u32 = 0x82F63B78;

/// The CRC of the bytes before `bytes` followed by `bytes`, given `crc`, the CRC of the
/// bytes before (0 for none): `update(update(0, a), b) == update(0, a ++ b)`. The same
/// convention as zlib's `crc32` and Python's `crc32c` packages.
pub fn update(crc: u32, bytes: []const u8) u32 {
    return updateWithKernel(kernelSupported(), crc, bytes);
}

/// The CRC-32C of `bytes`.
pub fn checksum(bytes: []const u8) u32 {
    return update(0, bytes);
}

/// `portable`: the table-driven loop here. `hardware`: the kernel build.zig linked in for
/// this architecture (`hardware_kernel`), once the CPU is known to have its instructions.
const Kernel = enum(u8) { portable, hardware };

const has_hardware_kernel = build_options.crc32c_x86_kernel or build_options.crc32c_arm_kernel;

fn updateWithKernel(kernel: Kernel, crc: u32, bytes: []const u8) u32 {
    // The finished CRC is the register inverted, and the register starts inverted from
    // zero, so inverting `crc` gives back the register of the bytes before.
    const register = ~crc;
    return ~switch (kernel) {
        .portable => updatePortable(register, bytes),
        .hardware => if (has_hardware_kernel)
            hardware_kernel.update(register, bytes.ptr, bytes.len)
        else
            unreachable,
    };
}

/// Bytes the portable loop folds in with one round of table lookups. Sixteen keeps more
/// lookups in flight than eight, and its 16 KiB of tables leave half of a common 32 KiB
/// L1 data cache to the data, where thirty-two would fill it for little more speed.
const slice_bytes = 16;

/// `tables[k][b]`: the register contribution of byte value b followed by k zero bytes,
/// from a zero register. Round by round, byte i of a slice is followed by
/// `slice_bytes - 1 - i` more bytes of the slice before the round ends.
const tables: [slice_bytes][256]u32 = tables: {
    @setEvalBranchQuota(slice_bytes * 256 * 16);
    var result: [slice_bytes][256]u32 = undefined;
    for (&result[0], 0..) |*entry, byte| {
        var register: u32 = byte;
        for (0..8) |_| register = (register >> 1) ^ (if (register & 1 != 0) polynomial else 0);
        entry.* = register;
    }
    for (1..slice_bytes) |k| {
        for (&result[k], result[k - 1]) |*entry, before| {
            entry.* = (before >> 8) ^ result[0][before & 0xFF];
        }
    }
    break :tables result;
};

/// Slicing-by-16: the register is folded into the first four bytes of each 16-byte
/// slice, and the slice's bytes are looked up independently of each other.
fn updatePortable(state: u32, bytes: []const u8) u32 {
    var register = state;
    var rest = bytes;
    while (rest.len >= slice_bytes) {
        var slice: [slice_bytes]u8 = rest[0..slice_bytes].*;
        const head = std.mem.readInt(u32, slice[0..4], .little) ^ register;
        std.mem.writeInt(u32, slice[0..4], head, .little);
        register = 0;
        inline for (slice, 0..) |byte, index| register ^= tables[slice_bytes - 1 - index][byte];
        rest = rest[slice_bytes..];
    }
    for (rest) |byte| register = (register >> 8) ^ tables[0][(register ^ byte) & 0xFF];
    return register;
}

/// The update function of crc32c_x86.zig (x86_64) or crc32c_arm.zig (aarch64), linked in
/// by build.zig; only the one of the target's architecture is referenced. It advances the
/// non-inverted register over `length` bytes.
const hardware_kernel = struct {
    const update = if (build_options.crc32c_x86_kernel)
        dataset_rt_internal_crc32c_x86
    else
        dataset_rt_internal_crc32c_arm;

    extern fn dataset_rt_internal_crc32c_x86(register: u32, bytes: [*]const u8, length: usize) callconv(.c) u32;
    extern fn dataset_rt_internal_crc32c_arm(register: u32, bytes: [*]const u8, length: usize) callconv(.c) u32;
};

/// `kernel_choice` before the first probe.
const kernel_unknown: u8 = std.math.maxInt(u8);

/// The probe (CPUID, getauxval) costs more than a short CRC, so its answer is kept. Threads
/// racing on the first call compute the same answer, so a relaxed store is enough.
var kernel_choice: std.atomic.Value(u8) = .init(kernel_unknown);

fn kernelSupported() Kernel {
    if (!has_hardware_kernel) return .portable;
    const known = kernel_choice.load(.monotonic);
    if (known != kernel_unknown) return @fromBackingInt(known);
    const kernel = kernelDetected();
    kernel_choice.store(@backingInt(kernel), .monotonic);
    return kernel;
}

fn kernelDetected() Kernel {
    const usable = if (build_options.crc32c_x86_kernel)
        cpuHasCrc32AndCarrylessMultiply()
    else if (build_options.crc32c_arm_kernel)
        cpuHasArmCrc32()
    else
        false;
    return if (usable) .hardware else .portable;
}

/// True when the CPU has the CRC32 instructions (FEAT_CRC32). Linux reports them in the
/// auxiliary vector (HWCAP_CRC32). Every Apple CPU has them and macOS runs only on Apple
/// CPUs, so there the answer is yes. Elsewhere there is no probe we trust, so only a
/// target that has them at compile time uses them.
fn cpuHasArmCrc32() bool {
    comptime assert(builtin.cpu.arch == .aarch64);
    if (comptime builtin.cpu.has(.aarch64, .crc)) return true;
    if (builtin.os.tag.isDarwin()) return true;
    if (builtin.os.tag != .linux) return false;
    // libc's getauxval: std's own reads the vector only in executables it starts.
    return std.c.getauxval(std.elf.AT.HWCAP) & std.os.linux.HWCAP.CRC32 != 0;
}

/// True when the CPU has SSE4.2 (`crc32`) and PCLMULQDQ. Both use only general and XMM
/// registers, which every x86_64 OS saves, so no XGETBV check is needed.
fn cpuHasCrc32AndCarrylessMultiply() bool {
    comptime assert(builtin.cpu.arch == .x86_64);
    const features = cpuid(1, 0);
    const sse4_2 = features.ecx & (1 << 20) != 0;
    const pclmulqdq = features.ecx & (1 << 1) != 0;
    return sse4_2 and pclmulqdq;
}

const CpuidResult = struct { eax: u32, ebx: u32, ecx: u32, edx: u32 };

fn cpuid(leaf: u32, subleaf: u32) CpuidResult {
    var eax: u32 = undefined;
    var ebx: u32 = undefined;
    var ecx: u32 = undefined;
    var edx: u32 = undefined;
    asm volatile ("cpuid"
        : [_] "={eax}" (eax),
          [_] "={ebx}" (ebx),
          [_] "={ecx}" (ecx),
          [_] "={edx}" (edx),
        : [_] "{eax}" (leaf),
          [_] "{ecx}" (subleaf),
    );
    return .{ .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx };
}

const testing = std.testing;

/// The definition, one bit at a time, as the reference every kernel is checked against.
fn referenceUpdate(crc: u32, bytes: []const u8) u32 {
    var register = ~crc;
    for (bytes) |byte| {
        register ^= byte;
        for (0..8) |_| register = (register >> 1) ^ (if (register & 1 != 0) polynomial else 0);
    }
    return ~register;
}

/// The kernels this CPU can run: the portable one, and the hardware one where usable.
fn kernelsToTest() []const Kernel {
    return if (kernelSupported() == .hardware) &.{ .portable, .hardware } else &.{.portable};
}

test "known answer vectors" {
    var zeros: [32]u8 = @splat(0);
    var ones: [32]u8 = @splat(0xFF);
    var ascending: [32]u8 = undefined;
    for (&ascending, 0..) |*byte, index| byte.* = @intCast(index);
    const vectors = [_]struct { input: []const u8, crc: u32 }{
        .{ .input = "", .crc = 0 },
        .{ .input = "a", .crc = 0xC1D04330 },
        .{ .input = "123456789", .crc = 0xE3069283 },
        .{ .input = &zeros, .crc = 0x8A9136AA },
        .{ .input = &ones, .crc = 0x62A8AB43 },
        .{ .input = &ascending, .crc = 0x46DD794E },
    };
    for (vectors) |vector| {
        try testing.expectEqual(vector.crc, referenceUpdate(0, vector.input));
        try testing.expectEqual(vector.crc, checksum(vector.input));
        for (kernelsToTest()) |kernel| {
            try testing.expectEqual(vector.crc, updateWithKernel(kernel, 0, vector.input));
        }
    }
}

test "every kernel matches the bit-at-a-time definition at any length and alignment" {
    var prng = std.Random.DefaultPrng.init(0x5EED_C3C3);
    const random = prng.random();
    // Past the longest chunk of crc32c_x86.zig and crc32c_arm.zig (3 * 4096 bytes).
    const length_max = 3 * 4096 + 64;
    const alignment_max = 16;
    const content = try testing.allocator.alloc(u8, length_max);
    defer testing.allocator.free(content);
    const buffer = try testing.allocator.alignedAlloc(u8, .@"64", length_max + alignment_max);
    defer testing.allocator.free(buffer);
    random.bytes(content);

    // Every length up to a few chunks of the shorter blocks, the lengths around the
    // longest chunk, then random lengths.
    var lengths: [1500]usize = undefined;
    for (lengths[0..1100], 0..) |*length, index| length.* = index;
    for (lengths[1100..1200], 0..) |*length, index| length.* = length_max - 100 + index;
    for (lengths[1200..]) |*length| length.* = random.uintAtMost(usize, 5000);
    for (lengths) |length| {
        const input = content[0..length];
        const expected = referenceUpdate(0, input);
        const start_crc = random.int(u32);
        const expected_continued = referenceUpdate(start_crc, input);
        for (0..alignment_max) |alignment| {
            const placed = buffer[alignment..][0..length];
            @memcpy(placed, input);
            for (kernelsToTest()) |kernel| {
                try testing.expectEqual(expected, updateWithKernel(kernel, 0, placed));
                try testing.expectEqual(expected_continued, updateWithKernel(kernel, start_crc, placed));
            }
        }
    }
}

test "an update split at any point gives the CRC of the whole" {
    var input: [300]u8 = undefined;
    for (&input, 0..) |*byte, index| byte.* = @truncate(index *% 29 + 7);
    const expected = referenceUpdate(0, &input);
    for (kernelsToTest()) |kernel| {
        for (0..input.len + 1) |split| {
            const head = updateWithKernel(kernel, 0, input[0..split]);
            try testing.expectEqual(expected, updateWithKernel(kernel, head, input[split..]));
        }
        var byte_by_byte: u32 = 0;
        for (&input) |*byte| byte_by_byte = updateWithKernel(kernel, byte_by_byte, byte[0..1]);
        try testing.expectEqual(expected, byte_by_byte);
    }
}

test "large buffers give the same CRC on every kernel and in pieces" {
    var prng = std.Random.DefaultPrng.init(0xC4C32C);
    const random = prng.random();
    const length = 5 * 1024 * 1024 + 13;
    const input = try testing.allocator.alloc(u8, length);
    defer testing.allocator.free(input);
    random.bytes(input);

    const expected = referenceUpdate(0, input);
    for (kernelsToTest()) |kernel| {
        try testing.expectEqual(expected, updateWithKernel(kernel, 0, input[0..]));
        // Odd offsets and piece lengths put every piece on another chunk boundary.
        var crc: u32 = 0;
        var offset: usize = 0;
        while (offset < length) {
            const step = @min(random.uintAtMost(usize, 200_000) + 1, length - offset);
            crc = updateWithKernel(kernel, crc, input[offset..][0..step]);
            offset += step;
        }
        try testing.expectEqual(expected, crc);
    }
}
