//! What the CPU and the OS say about instructions the hardware kernels use:
//! CPUID and XGETBV on x86_64, the auxiliary vector's HWCAP on aarch64 Linux.
const std = @import("std");
const builtin = @import("builtin");
const assert = std.debug.assert;

pub const CpuidResult = struct { eax: u32, ebx: u32, ecx: u32, edx: u32 };

pub fn cpuid(leaf: u32, subleaf: u32) CpuidResult {
    comptime assert(builtin.cpu.arch == .x86_64);
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

/// Extended control register `register` (0: XCR0, the register state the OS
/// saves); only valid when CPUID leaf 1 reports OSXSAVE.
pub fn xgetbv(register: u32) u64 {
    comptime assert(builtin.cpu.arch == .x86_64);
    var low: u32 = undefined;
    var high: u32 = undefined;
    asm volatile ("xgetbv"
        : [_] "={eax}" (low),
          [_] "={edx}" (high),
        : [_] "{ecx}" (register),
    );
    return @as(u64, high) << 32 | low;
}

/// The aarch64 Linux HWCAP word: libc's getauxval, as std's own reads the
/// vector only in executables it starts.
pub fn linuxHwcap() u64 {
    comptime assert(builtin.cpu.arch == .aarch64 and builtin.os.tag == .linux);
    return std.c.getauxval(std.elf.AT.HWCAP);
}

/// The answer of `detect` (an enum of kernels, say), found on the first `get` and
/// kept: a probe (CPUID, getauxval) costs more than a short hash. Threads racing
/// on the first call compute the same answer, so a relaxed store is enough.
pub fn Cached(comptime Answer: type, comptime detect: fn () Answer) type {
    comptime assert(@typeInfo(Answer).@"enum".tag_type == u8);
    return struct {
        /// `choice` before the first probe.
        const unknown: u8 = std.math.maxInt(u8);
        var choice: std.atomic.Value(u8) = .init(unknown);

        pub fn get() Answer {
            const known = choice.load(.monotonic);
            if (known != unknown) return @fromBackingInt(@intCast(known));
            const answer = detect();
            assert(@backingInt(answer) != unknown);
            choice.store(@backingInt(answer), .monotonic);
            return answer;
        }
    };
}
