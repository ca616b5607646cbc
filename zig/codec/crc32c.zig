//! CRC-32C (Castagnoli, the iSCSI CRC): reflected polynomial 0x82F63B78, register
//! starting at all ones and inverted at the end. `checksum("123456789")` is 0xE3069283.
//!
//! The library is built for a baseline CPU, where only the table-driven loop here runs.
//! build.zig also links a kernel using the CPU's CRC-32C instructions: SSE4.2 `crc32`
//! with PCLMULQDQ on x86_64 (crc32c_x86.zig), the ARMv8 CRC32 instructions on aarch64
//! (crc32c_arm.zig). `update` picks it when the CPU says the instructions are usable.
//! On x86_64 a third kernel folds 64-byte vectors with VPCLMULQDQ (crc32c_avx512.zig);
//! where the CPU and the OS support AVX-512, it takes the bulk of long inputs and
//! crc32c_x86.zig the rest. Every kernel advances the same non-inverted register, so
//! they give identical CRCs.
const std = @import("std");
const builtin = @import("builtin");
const build_options = @import("build_options");
const cpu_probe = @import("../base/cpu_probe.zig");
const assert = std.debug.assert;

comptime {
    // Each kernel is code for one architecture; build.zig only provides it there.
    assert(!build_options.crc32c_x86_kernel or builtin.cpu.arch == .x86_64);
    // The vector kernel leaves short inputs and tails to the x86 kernel.
    assert(!build_options.crc32c_avx512_kernel or build_options.crc32c_x86_kernel);
    assert(!build_options.crc32c_arm_kernel or builtin.cpu.arch == .aarch64);
}

const polynomial = @import("crc32c_polynomial.zig").polynomial;

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
/// `hardware_vector` (x86_64 only): `vector_kernel` for the whole 64-byte vectors of
/// inputs of `vector_length_min` bytes or more, `hardware_kernel` for everything else.
const Kernel = enum(u8) { portable, hardware, hardware_vector };

const has_hardware_kernel = build_options.crc32c_x86_kernel or build_options.crc32c_arm_kernel;
const has_vector_kernel = build_options.crc32c_avx512_kernel;

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
        .hardware_vector => if (has_vector_kernel) updateVector(register, bytes) else unreachable,
    };
}

/// Inputs shorter than this go to the `crc32` kernel alone. The vector kernel's final
/// reduction and the loads of its constants cost about as much as `crc32` takes for a
/// few hundred bytes; from the vector kernel's own minimum on it was measured no slower.
const vector_length_min = vector_kernel.length_min;

fn updateVector(register: u32, bytes: []const u8) u32 {
    comptime assert(has_vector_kernel);
    if (bytes.len < vector_length_min) return hardware_kernel.update(
        register,
        bytes.ptr,
        bytes.len,
    );
    const vector_length = bytes.len - bytes.len % vector_kernel.vector_bytes;
    const folded = vector_kernel.update(register, bytes.ptr, vector_length);
    return hardware_kernel.update(folded, bytes.ptr + vector_length, bytes.len - vector_length);
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

    extern fn dataset_rt_internal_crc32c_x86(
        register: u32,
        bytes: [*]const u8,
        length: usize,
    ) callconv(.c) u32;
    extern fn dataset_rt_internal_crc32c_arm(
        register: u32,
        bytes: [*]const u8,
        length: usize,
    ) callconv(.c) u32;
};

/// The update function of crc32c_avx512.zig, linked in by build.zig on x86_64. It
/// advances the non-inverted register over a whole number of `vector_bytes`, at least
/// `length_min` bytes (the kernel asserts both; the constants are its own).
const vector_kernel = struct {
    const update = dataset_rt_internal_crc32c_avx512;
    const vector_bytes = 64;
    const length_min = 4 * vector_bytes;

    extern fn dataset_rt_internal_crc32c_avx512(
        register: u32,
        bytes: [*]const u8,
        length: usize,
    ) callconv(.c) u32;
};

/// The kernel this CPU supports, probed once (`cpu_probe.Cached`).
fn kernelSupported() Kernel {
    if (!has_hardware_kernel) return .portable;
    return detected_kernel.get();
}

const detected_kernel = cpu_probe.Cached(Kernel, kernelDetected);

fn kernelDetected() Kernel {
    if (build_options.crc32c_x86_kernel) return x86KernelFor(X86Features.probe());
    if (build_options.crc32c_arm_kernel) return if (cpuHasArmCrc32()) .hardware else .portable;
    return .portable;
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
    return cpu_probe.linuxHwcap() & std.os.linux.HWCAP.CRC32 != 0;
}

/// The x86_64 kernel for the CPU and OS `features` describe. `hardware` needs SSE4.2
/// (`crc32`) and PCLMULQDQ, which use only general and XMM registers, saved by every
/// x86_64 OS. `hardware_vector` also needs AVX-512 F and VL and VPCLMULQDQ, and an OS
/// that saves the opmask and all 512 bits of all 32 vector registers on a context
/// switch, which XCR0 tells. macOS enables that state only once a thread has used it, so
/// there XCR0 says no and the `crc32` kernel runs.
fn x86KernelFor(features: X86Features) Kernel {
    const sse4_2 = features.basic_ecx & (1 << 20) != 0;
    const pclmulqdq = features.basic_ecx & (1 << 1) != 0;
    if (!(sse4_2 and pclmulqdq)) return .portable;
    if (!has_vector_kernel) return .hardware;
    const avx512f = features.extended_ebx & (1 << 16) != 0;
    const avx512vl = features.extended_ebx & (1 << 31) != 0;
    const vpclmulqdq = features.extended_ecx & (1 << 10) != 0;
    const saves_zmm = features.xcr0 & X86Features.xcr0_zmm == X86Features.xcr0_zmm;
    return if (avx512f and avx512vl and vpclmulqdq and saves_zmm) .hardware_vector else .hardware;
}

/// What CPUID and XGETBV report, as far as the x86_64 kernels care.
const X86Features = struct {
    /// CPUID leaf 1, ECX: SSE4.2, PCLMULQDQ, OSXSAVE.
    basic_ecx: u32,
    /// CPUID leaf 7, subleaf 0, EBX and ECX: AVX-512 F and VL, VPCLMULQDQ. Zero when the
    /// CPU has no leaf 7.
    extended_ebx: u32,
    extended_ecx: u32,
    /// XCR0, the register state the OS saves; zero without OSXSAVE (no XGETBV then).
    xcr0: u64,

    /// XCR0 bits 1 (XMM), 2 (upper halves of YMM), 5 (opmask), 6 (upper halves of ZMM0-15)
    /// and 7 (ZMM16-31).
    const xcr0_zmm: u64 = 0b1110_0110;

    fn probe() X86Features {
        comptime assert(builtin.cpu.arch == .x86_64);
        const leaf_max = cpu_probe.cpuid(0, 0).eax;
        const basic = cpu_probe.cpuid(1, 0);
        const extended: cpu_probe.CpuidResult = if (leaf_max >= 7) cpu_probe.cpuid(7, 0) else .{
            .eax = 0,
            .ebx = 0,
            .ecx = 0,
            .edx = 0,
        };
        const osxsave = basic.ecx & (1 << 27) != 0;
        return .{
            .basic_ecx = basic.ecx,
            .extended_ebx = extended.ebx,
            .extended_ecx = extended.ecx,
            .xcr0 = if (osxsave) cpu_probe.xgetbv(0) else 0,
        };
    }
};

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

/// The kernels this CPU can run: the portable one, and the hardware ones where usable.
fn kernelsToTest() []const Kernel {
    return switch (kernelSupported()) {
        .portable => &.{.portable},
        .hardware => &.{ .portable, .hardware },
        .hardware_vector => &.{ .portable, .hardware, .hardware_vector },
    };
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
                try testing.expectEqual(
                    expected_continued,
                    updateWithKernel(kernel, start_crc, placed),
                );
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

test "the vector kernel matches the definition at lengths up to 70000, any alignment and start" {
    if (kernelSupported() != .hardware_vector) return error.SkipZigTest;
    var prng = std.Random.DefaultPrng.init(0xF01D_C3C3);
    const random = prng.random();
    const length_max = 70_000;
    const alignment_count = 64;
    const content = try testing.allocator.alloc(u8, length_max);
    defer testing.allocator.free(content);
    const buffer = try testing.allocator.alignedAlloc(u8, .@"64", length_max + alignment_count);
    defer testing.allocator.free(buffer);
    random.bytes(content);

    // One pass of the definition per start CRC gives the CRC of every prefix of `content`.
    const start_crcs = [_]u32{ 0, random.int(u32), random.int(u32), 0xFFFF_FFFF };
    const prefix_crcs = try testing.allocator.alloc([length_max + 1]u32, start_crcs.len);
    defer testing.allocator.free(prefix_crcs);
    for (prefix_crcs, start_crcs) |*crcs, start_crc| {
        crcs[0] = start_crc;
        for (content, 1..) |*byte, length| {
            crcs[length] = referenceUpdate(crcs[length - 1], byte[0..1]);
        }
    }

    // Every length through eight rounds of the vector loop (256 bytes each) at every
    // alignment; then each multiple of the vector (64 bytes) and its neighbours, at an
    // alignment that walks through all 64; random lengths; and a few long lengths at
    // every alignment again.
    const every_length_max = 2100;
    var lengths: std.ArrayList(usize) = .empty;
    defer lengths.deinit(testing.allocator);
    for (0..every_length_max) |length| try lengths.append(testing.allocator, length);
    var multiple: usize = every_length_max - every_length_max % 64 + 64;
    while (multiple < length_max) : (multiple += 64) {
        try lengths.appendSlice(testing.allocator, &.{ multiple - 1, multiple, multiple + 1 });
    }
    for (0..200) |_| try lengths.append(testing.allocator, random.uintAtMost(usize, length_max));
    const every_alignment_lengths = [_]usize{
        4095, 4096, 65535, 65536, 65537, 65599, 69_999, length_max,
    };

    for (lengths.items, 0..) |length, index| {
        const start = index % start_crcs.len;
        const expected = prefix_crcs[start][length];
        try testing.expectEqual(
            expected,
            updateWithKernel(.portable, start_crcs[start], content[0..length]),
        );
        const alignments: usize = if (length < every_length_max) alignment_count else 1;
        for (0..alignments) |alignment_index| {
            const alignment = if (alignments == 1) index % alignment_count else alignment_index;
            const placed = buffer[alignment..][0..length];
            @memcpy(placed, content[0..length]);
            try testing.expectEqual(
                expected,
                updateWithKernel(.hardware_vector, start_crcs[start], placed),
            );
        }
    }
    for (every_alignment_lengths) |length| {
        for (0..alignment_count) |alignment| {
            const start = alignment % start_crcs.len;
            const placed = buffer[alignment..][0..length];
            @memcpy(placed, content[0..length]);
            try testing.expectEqual(
                prefix_crcs[start][length],
                updateWithKernel(.hardware_vector, start_crcs[start], placed),
            );
        }
    }
}

test "the vector kernel matches the portable loop on buffers of several MiB" {
    if (kernelSupported() != .hardware_vector) return error.SkipZigTest;
    var prng = std.Random.DefaultPrng.init(0xB16_C3C3);
    const random = prng.random();
    const length_max = 9 * 1024 * 1024 + 64;
    const buffer = try testing.allocator.alignedAlloc(u8, .@"64", length_max);
    defer testing.allocator.free(buffer);
    random.bytes(buffer);
    const cases = [_]struct { offset: usize, length: usize }{
        .{ .offset = 0, .length = 2 * 1024 * 1024 },
        .{ .offset = 1, .length = 3 * 1024 * 1024 + 255 },
        .{ .offset = 33, .length = 4 * 1024 * 1024 + 256 },
        .{ .offset = 63, .length = 9 * 1024 * 1024 + 1 },
    };
    for (cases) |case| {
        const input = buffer[case.offset..][0..case.length];
        const start_crc = random.int(u32);
        try testing.expectEqual(
            updateWithKernel(.portable, start_crc, input),
            updateWithKernel(.hardware_vector, start_crc, input),
        );
    }
}

test "the x86_64 kernel follows CPUID and the register state the OS saves" {
    if (!build_options.crc32c_x86_kernel) return error.SkipZigTest;
    const sse4_2_pclmulqdq: u32 = 1 << 20 | 1 << 1;
    const avx512f_avx512vl: u32 = 1 << 16 | 1 << 31;
    const vpclmulqdq: u32 = 1 << 10;
    const everything: X86Features = .{
        .basic_ecx = sse4_2_pclmulqdq,
        .extended_ebx = avx512f_avx512vl,
        .extended_ecx = vpclmulqdq,
        .xcr0 = 0b1110_0111,
    };
    try testing.expectEqual(Kernel.hardware_vector, x86KernelFor(everything));
    var features = everything;
    features.basic_ecx = 1 << 20;
    try testing.expectEqual(Kernel.portable, x86KernelFor(features));
    // Without any one of the vector kernel's CPU features or saved states: the crc32 kernel.
    for ([_]u32{ 1 << 16, 1 << 31 }) |missing| {
        features = everything;
        features.extended_ebx &= ~missing;
        try testing.expectEqual(Kernel.hardware, x86KernelFor(features));
    }
    features = everything;
    features.extended_ecx = 0;
    try testing.expectEqual(Kernel.hardware, x86KernelFor(features));
    for ([_]u6{ 1, 2, 5, 6, 7 }) |missing| {
        features = everything;
        features.xcr0 &= ~(@as(u64, 1) << missing);
        try testing.expectEqual(Kernel.hardware, x86KernelFor(features));
    }
}

test "the vector kernel is chosen exactly where std's CPU detection finds its features" {
    // std counts AVX-512 as saved on macOS, which enables it on first use; XCR0 says no.
    if (!has_vector_kernel or builtin.os.tag.isDarwin()) return error.SkipZigTest;
    // Zig's own probe of CPUID and XCR0, the one behind `-mcpu=native`.
    const native = try std.zig.system.resolveTargetQuery(testing.io, .{});
    const usable = native.cpu.hasAll(
        .x86,
        &.{ .sse4_2, .pclmul, .avx512f, .avx512vl, .vpclmulqdq },
    );
    try testing.expectEqual(usable, kernelDetected() == .hardware_vector);
    try testing.expectEqual(kernelDetected(), kernelSupported());
}
