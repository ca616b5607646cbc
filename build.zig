//! Builds the DatasetRT core: the shared library behind the C ABI and its unit tests.
//!
//!   python -m ziglang build -Doptimize=ReleaseFast --prefix OUT   # OUT/lib/libdataset_rt.so
//!   python -m ziglang build test                                  # Zig unit tests
const std = @import("std");

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const strip = b.option(bool, "strip", "Strip debug info from the library");

    // The hardware SHA-256 and CRC-32C kernels are compiled for a CPU with the
    // instructions and chosen at run time (CPUID, and XGETBV for AVX-512, on x86_64;
    // HWCAP on aarch64 Linux), so the portable library still hashes at hardware speed
    // where it can.
    const arch = target.result.cpu.arch;
    const options = b.addOptions();
    options.addOption(bool, "sha_ni_kernel", arch == .x86_64);
    options.addOption(bool, "arm_sha2_kernel", arch == .aarch64);
    options.addOption(bool, "crc32c_x86_kernel", arch == .x86_64);
    options.addOption(bool, "crc32c_avx512_kernel", arch == .x86_64);
    options.addOption(bool, "crc32c_arm_kernel", arch == .aarch64);

    const core = b.createModule(.{
        .root_source_file = b.path("zig/root.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true, // c_allocator and pthreads; required for a library loaded by CPython
        .strip = strip,
        .pic = true,
    });
    core.addOptions("build_options", options);
    addHardwareKernels(b, core, target, optimize, strip);

    const library = b.addLibrary(
        .{ .name = "dataset_rt", .linkage = .dynamic, .root_module = core },
    );
    b.installArtifact(library);
    b.installFile("zig/include/dataset_rt.h", "include/dataset_rt.h");

    const unit_tests = b.addTest(.{ .root_module = core });
    const test_step = b.step("test", "Run the Zig unit tests");
    test_step.dependOn(&b.addRunArtifact(unit_tests).step);

    addThreadSanitizerSteps(b, core);
}

/// The hardware kernels for `target`'s CPU, each linked into `core` as a static library of
/// its own.
fn addHardwareKernels(
    b: *std.Build,
    core: *std.Build.Module,
    target: std.Build.ResolvedTarget,
    optimize: std.builtin.OptimizeMode,
    strip: ?bool,
) void {
    for (hardwareKernels(target.result.cpu.arch)) |kernel| {
        var kernel_query = target.query;
        kernel_query.cpu_features_add.addFeatureSet(kernel.features);
        const kernel_library = b.addLibrary(.{
            .name = kernel.name,
            .linkage = .static,
            .root_module = b.createModule(.{
                .root_source_file = b.path(kernel.source),
                .target = b.resolveTargetQuery(kernel_query),
                .optimize = optimize,
                .link_libc = true,
                .pic = true,
                .strip = strip,
            }),
            .use_llvm = if (kernel.needs_llvm) true else null,
        });
        core.linkLibrary(kernel_library);
    }
}

fn hardwareKernels(arch: std.Target.Cpu.Arch) []const HardwareKernel {
    return switch (arch) {
        .x86_64 => &x86_64_kernels,
        .aarch64 => &aarch64_kernels,
        else => &.{},
    };
}

const x86_64_kernels = [_]HardwareKernel{
    .{
        .name = "dataset_rt_sha_ni",
        .source = "zig/codec/sha256_ni.zig",
        .features = std.Target.x86.featureSet(&.{ .sha, .avx2 }),
    },
    .{
        .name = "dataset_rt_crc32c_x86",
        .source = "zig/codec/crc32c_x86.zig",
        .features = std.Target.x86.featureSet(&.{ .crc32, .sse4_2, .pclmul }),
    },
    .{
        .name = "dataset_rt_crc32c_avx512",
        .source = "zig/codec/crc32c_avx512.zig",
        .features = std.Target.x86.featureSet(
            &.{ .crc32, .sse4_2, .pclmul, .avx512f, .avx512vl, .vpclmulqdq },
        ),
        .needs_llvm = true,
    },
};

const aarch64_kernels = [_]HardwareKernel{
    .{
        .name = "dataset_rt_sha_arm",
        .source = "zig/codec/sha256_arm.zig",
        .features = std.Target.aarch64.featureSet(&.{.sha2}),
    },
    .{
        .name = "dataset_rt_crc32c_arm",
        .source = "zig/codec/crc32c_arm.zig",
        .features = std.Target.aarch64.featureSet(&.{.crc}),
    },
};

/// A file of code for CPUs with `features` beyond the target's, built as a static library
/// of its own so that only it may use them; the core calls it after probing the CPU.
const HardwareKernel = struct {
    name: []const u8,
    source: []const u8,
    features: std.Target.Cpu.Feature.Set,
    /// Zig's own x86_64 code generator (Debug builds) cannot pass 512-bit vectors to
    /// inline assembly, so such a kernel is always compiled by LLVM.
    needs_llvm: bool = false,
};

/// The core built with ThreadSanitizer, from `core`'s root source, options and libraries (the
/// hardware kernels stay uninstrumented: they only compute on the buffers they are given).
/// scripts/test_tsan.sh runs both with the options and suppressions CI uses (TSAN_OPTIONS).
///   zig build test-tsan                   # the unit tests; a report fails the step
///   zig build tsan-library                # zig-out/tsan/libdataset_rt.so, with the TSan runtime
///                                         # in it: a process must load it first (LD_PRELOAD)
fn addThreadSanitizerSteps(b: *std.Build, core: *std.Build.Module) void {
    const instrumented = b.createModule(.{
        .root_source_file = core.root_source_file,
        .target = core.resolved_target,
        .optimize = core.optimize,
        .link_libc = core.link_libc,
        .pic = core.pic,
        .sanitize_thread = true,
    });
    var imports = core.import_table.iterator();
    while (imports.next()) |import| instrumented.addImport(import.key_ptr.*, import.value_ptr.*);
    for (core.link_objects.items) |link_object| switch (link_object) {
        .other_step => |library| instrumented.linkLibrary(library),
        else => @panic("addThreadSanitizerSteps: link the core's new kind of input here too"),
    };

    const tests = b.addTest(.{ .name = "test-tsan", .root_module = instrumented });
    b.step("test-tsan", "Run the Zig unit tests under ThreadSanitizer").dependOn(
        &b.addRunArtifact(tests).step,
    );

    const library = b.addLibrary(
        .{ .name = "dataset_rt", .linkage = .dynamic, .root_module = instrumented },
    );
    const install = b.addInstallArtifact(
        library,
        .{ .dest_dir = .{ .override = .{ .custom = "tsan" } } },
    );
    b.step("tsan-library", "Build the library with ThreadSanitizer").dependOn(&install.step);
}
