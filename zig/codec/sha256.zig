//! SHA-256 for shard and manifest checksums.
//!
//! The library is built for a baseline CPU, where std's SHA-256 runs its portable
//! rounds, several times slower. build.zig also links a block function using the
//! CPU's SHA instructions: SHA-NI on x86_64 (sha256_ni.zig), the SHA2 instructions
//! on aarch64 (sha256_arm.zig). `Hasher.init` picks it when the CPU and the OS say
//! the instructions are usable. Padding and buffering live here, so every kernel
//! sees only whole blocks and produces identical digests.
const std = @import("std");
const builtin = @import("builtin");
const build_options = @import("build_options");
const cpu_probe = @import("../base/cpu_probe.zig");
const assert = std.debug.assert;

const Sha256Portable = std.crypto.hash.sha2.Sha256;

/// Bytes in a SHA-256 digest.
pub const digest_length = 32;
const block_length = 64;
/// The message length in bits closes the last block as a big-endian u64.
const length_field_bytes = 8;
const initial_state: [8]u32 = Sha256Portable.init(.{}).s;

comptime {
    assert(Sha256Portable.block_length == block_length);
    assert(Sha256Portable.digest_length == digest_length);
    // Each kernel is code for one architecture; build.zig only provides it there.
    assert(!build_options.sha_ni_kernel or builtin.cpu.arch == .x86_64);
    assert(!build_options.arm_sha2_kernel or builtin.cpu.arch == .aarch64);
}

/// `portable`: std's rounds. `hardware`: the block function build.zig linked in for
/// this architecture (`hardware_kernel`), once the CPU is known to have its instructions.
const Kernel = enum(u8) { portable, hardware };

const has_hardware_kernel = build_options.sha_ni_kernel or build_options.arm_sha2_kernel;

/// Incremental SHA-256: `init`, any number of `update`s, one `final`.
pub const Hasher = struct {
    state: [8]u32,
    buffer: [block_length]u8 = undefined,
    /// Bytes waiting in `buffer` for a whole block; always below `block_length`.
    buffer_length: usize = 0,
    message_length: u64 = 0,
    kernel: Kernel,

    /// A hasher using the fastest kernel this CPU supports.
    pub fn init() Hasher {
        return initWithKernel(kernelSupported());
    }

    fn initWithKernel(kernel: Kernel) Hasher {
        return .{ .state = initial_state, .kernel = kernel };
    }

    /// Appends `bytes` to the message.
    pub fn update(hasher: *Hasher, bytes: []const u8) void {
        assert(hasher.buffer_length < block_length);
        hasher.message_length += bytes.len;
        var rest = bytes;
        if (hasher.buffer_length > 0) {
            const taken = @min(block_length - hasher.buffer_length, rest.len);
            @memcpy(hasher.buffer[hasher.buffer_length..][0..taken], rest[0..taken]);
            hasher.buffer_length += taken;
            rest = rest[taken..];
            if (hasher.buffer_length < block_length) return;
            hasher.compressBlocks(&hasher.buffer);
            hasher.buffer_length = 0;
        }
        const whole_length = rest.len - rest.len % block_length;
        if (whole_length > 0) hasher.compressBlocks(rest[0..whole_length]);
        rest = rest[whole_length..];
        @memcpy(hasher.buffer[0..rest.len], rest);
        hasher.buffer_length = rest.len;
    }

    /// Pads the message and returns its digest. The hasher is spent afterwards.
    pub fn final(hasher: *Hasher) [digest_length]u8 {
        assert(hasher.buffer_length < block_length);
        // Padding is a 1 bit, zeros, then the bit length, ending on a block boundary;
        // a second block is needed when the length field does not fit after the 1 bit.
        var tail: [2 * block_length]u8 = @splat(0);
        const used = hasher.buffer_length;
        @memcpy(tail[0..used], hasher.buffer[0..used]);
        tail[used] = 0x80;
        const tail_length: usize = if (used + 1 + length_field_bytes <= block_length)
            block_length
        else
            2 * block_length;
        // FIPS 180-4 limits messages to below 2^64 bits; the field holds the length modulo that.
        const message_bits = hasher.message_length *% 8;
        std.mem.writeInt(u64, tail[tail_length - length_field_bytes ..][0..8], message_bits, .big);
        hasher.compressBlocks(tail[0..tail_length]);

        var digest: [digest_length]u8 = undefined;
        for (hasher.state, 0..) |word, index| {
            std.mem.writeInt(u32, digest[index * 4 ..][0..4], word, .big);
        }
        hasher.* = undefined;
        return digest;
    }

    fn compressBlocks(hasher: *Hasher, blocks: []const u8) void {
        assert(blocks.len > 0);
        assert(blocks.len % block_length == 0);
        switch (hasher.kernel) {
            .portable => compressBlocksPortable(&hasher.state, blocks),
            .hardware => if (has_hardware_kernel) {
                hardware_kernel.compressBlocks(
                    &hasher.state,
                    blocks.ptr,
                    blocks.len / block_length,
                );
            } else unreachable,
        }
    }
};

/// The SHA-256 digest of `bytes`.
pub fn hash(bytes: []const u8) [digest_length]u8 {
    var hasher: Hasher = .init();
    hasher.update(bytes);
    return hasher.final();
}

/// The digest as 64 lowercase hex characters, the form stored in manifests.
pub fn hexDigest(digest: [digest_length]u8) [2 * digest_length]u8 {
    return std.fmt.bytesToHex(digest, .lower);
}

/// Parses exactly 64 lowercase hex characters; anything else (wrong length, upper
/// case, other characters) returns null, so one digest has exactly one spelling.
pub fn parseHexDigest(text: []const u8) ?[digest_length]u8 {
    if (text.len != 2 * digest_length) return null;
    var digest: [digest_length]u8 = undefined;
    for (&digest, 0..) |*byte, index| {
        const high = lowercaseHexValue(text[2 * index]) orelse return null;
        const low = lowercaseHexValue(text[2 * index + 1]) orelse return null;
        byte.* = (high << 4) | low;
    }
    return digest;
}

fn lowercaseHexValue(character: u8) ?u8 {
    return switch (character) {
        '0'...'9' => character - '0',
        'a'...'f' => character - 'a' + 10,
        else => null,
    };
}

fn compressBlocksPortable(state: *[8]u32, blocks: []const u8) void {
    // std keeps its round function private; an update of whole blocks on an empty
    // buffer runs exactly the rounds, so borrowing a Sha256 for its state is enough.
    var hasher = Sha256Portable.init(.{});
    hasher.s = state.*;
    hasher.update(blocks);
    assert(hasher.buf_len == 0);
    state.* = hasher.s;
}

/// The block function of sha256_ni.zig (x86_64) or sha256_arm.zig (aarch64), linked
/// in by build.zig; only the one of the target's architecture is referenced.
const hardware_kernel = struct {
    const compressBlocks = if (build_options.sha_ni_kernel)
        dataset_rt_internal_sha256_ni_blocks
    else
        dataset_rt_internal_sha256_arm_blocks;

    extern fn dataset_rt_internal_sha256_ni_blocks(
        state: *[8]u32,
        blocks: [*]const u8,
        block_count: usize,
    ) callconv(.c) void;
    extern fn dataset_rt_internal_sha256_arm_blocks(
        state: *[8]u32,
        blocks: [*]const u8,
        block_count: usize,
    ) callconv(.c) void;
};

/// The kernel this CPU supports, probed once (`cpu_probe.Cached`).
fn kernelSupported() Kernel {
    if (!has_hardware_kernel) return .portable;
    return detected_kernel.get();
}

const detected_kernel = cpu_probe.Cached(Kernel, kernelDetected);

fn kernelDetected() Kernel {
    const usable = if (build_options.sha_ni_kernel)
        cpuHasShaNi()
    else if (build_options.arm_sha2_kernel)
        cpuHasArmSha2()
    else
        false;
    return if (usable) .hardware else .portable;
}

/// True when the CPU has the SHA2 instructions and the OS lets us use them. Linux
/// reports them in the auxiliary vector (HWCAP_SHA2); on other OSes only a target
/// that has them at compile time (aarch64-macos: apple_m1) uses them.
fn cpuHasArmSha2() bool {
    comptime assert(builtin.cpu.arch == .aarch64);
    if (comptime builtin.cpu.has(.aarch64, .sha2)) return true;
    if (builtin.os.tag != .linux) return false;
    return cpu_probe.linuxHwcap() & std.os.linux.HWCAP.SHA2 != 0;
}

/// True when the CPU has SHA and AVX2 and the OS saves the AVX (YMM) registers.
fn cpuHasShaNi() bool {
    comptime assert(builtin.cpu.arch == .x86_64);
    const leaf_max = cpu_probe.cpuid(0, 0).eax;
    if (leaf_max < 7) return false;

    const features = cpu_probe.cpuid(1, 0);
    const osxsave = features.ecx & (1 << 27) != 0;
    const avx = features.ecx & (1 << 28) != 0;
    // Only with OSXSAVE is XGETBV allowed; bits 1 and 2 of XCR0 mean SSE and AVX state are saved.
    if (!osxsave or !avx) return false;
    if (cpu_probe.xgetbv(0) & 0b110 != 0b110) return false;

    const extended = cpu_probe.cpuid(7, 0);
    const avx2 = extended.ebx & (1 << 5) != 0;
    const sha = extended.ebx & (1 << 29) != 0;
    return avx2 and sha;
}

const testing = std.testing;

fn expectHex(expected_hex: []const u8, digest: [digest_length]u8) !void {
    try testing.expectEqualStrings(expected_hex, &hexDigest(digest));
}

test "known answer vectors" {
    try expectHex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", hash(""));
    try expectHex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", hash("abc"));
    try expectHex(
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    );

    const million_a = try testing.allocator.alloc(u8, 1_000_000);
    defer testing.allocator.free(million_a);
    @memset(million_a, 'a');
    const expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    for ([_]Kernel{ .portable, kernelSupported() }) |kernel| {
        var hasher: Hasher = .initWithKernel(kernel);
        hasher.update(million_a);
        try expectHex(expected, hasher.final());
    }
}

test "every split point of an incremental update gives the one-shot digest" {
    var input: [200]u8 = undefined;
    for (&input, 0..) |*byte, index| byte.* = @truncate(index *% 7 + 3);
    const expected = hash(&input);
    for (0..input.len + 1) |split| {
        var hasher: Hasher = .init();
        hasher.update(input[0..split]);
        hasher.update(input[split..]);
        try testing.expectEqual(expected, hasher.final());
    }
    var byte_by_byte: Hasher = .init();
    for (input) |byte| byte_by_byte.update(&.{byte});
    try testing.expectEqual(expected, byte_by_byte.final());
}

test "digests match std for lengths around the padding boundaries" {
    var prng = std.Random.DefaultPrng.init(11);
    var input: [300]u8 = undefined;
    prng.random().bytes(&input);
    for (0..input.len + 1) |length| {
        var expected: [digest_length]u8 = undefined;
        Sha256Portable.hash(input[0..length], &expected, .{});
        try testing.expectEqual(expected, hash(input[0..length]));
    }
}

test "the hardware kernel agrees with the portable kernel" {
    if (kernelSupported() != .hardware) return error.SkipZigTest;
    var prng = std.Random.DefaultPrng.init(12);
    const random = prng.random();
    const input = try testing.allocator.alloc(u8, 70_000);
    defer testing.allocator.free(input);
    random.bytes(input);
    for (0..400) |round| {
        const length = if (round < 200) round else random.uintLessThan(usize, input.len + 1);
        var portable: Hasher = .initWithKernel(.portable);
        var hardware: Hasher = .initWithKernel(.hardware);
        // Uneven update sizes exercise the buffer on both paths.
        var offset: usize = 0;
        while (offset < length) {
            const step = @min(random.uintLessThan(usize, 300) + 1, length - offset);
            portable.update(input[offset..][0..step]);
            hardware.update(input[offset..][0..step]);
            offset += step;
        }
        try testing.expectEqual(portable.final(), hardware.final());
    }
}

test "hex digests round trip and only lowercase hex parses" {
    const digest = hash("abc");
    const text = hexDigest(digest);
    try testing.expectEqual(digest, parseHexDigest(&text).?);

    var upper = text;
    upper[0] = 'B';
    try testing.expectEqual(null, parseHexDigest(&upper));
    var not_hex = text;
    not_hex[63] = 'g';
    try testing.expectEqual(null, parseHexDigest(&not_hex));
    try testing.expectEqual(null, parseHexDigest(text[0..63]));
    var too_long: [text.len + 1]u8 = @splat('0');
    @memcpy(too_long[0..text.len], &text);
    try testing.expectEqual(null, parseHexDigest(&too_long));
    try testing.expectEqual(null, parseHexDigest(""));
}
