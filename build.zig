//! Builds the DatasetRT core: the shared library behind the C ABI and its unit tests.
//!
//!   python -m ziglang build -Doptimize=ReleaseFast --prefix OUT   # OUT/lib/libdataset_rt.so
//!   python -m ziglang build test                                  # Zig unit tests
const std = @import("std");

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const strip = b.option(bool, "strip", "Strip debug info from the library");

    // The SHA-NI kernel is compiled for a CPU with SHA + AVX2 and chosen at run time
    // (CPUID), so the portable library still hashes at hardware speed where it can.
    const sha_ni_available = target.result.cpu.arch == .x86_64;
    const options = b.addOptions();
    options.addOption(bool, "sha_ni_kernel", sha_ni_available);

    const core = b.createModule(.{
        .root_source_file = b.path("zig/root.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true, // c_allocator and pthreads; required for a library loaded by CPython
        .strip = strip,
        .pic = true,
    });
    core.addOptions("build_options", options);
    if (sha_ni_available) {
        var query = target.query;
        query.cpu_features_add.addFeatureSet(std.Target.x86.featureSet(&.{ .sha, .avx2 }));
        const sha_ni = b.addLibrary(.{
            .name = "dataset_rt_sha_ni",
            .linkage = .static,
            .root_module = b.createModule(.{
                .root_source_file = b.path("zig/sha256_ni.zig"),
                .target = b.resolveTargetQuery(query),
                .optimize = optimize,
                .link_libc = true,
                .pic = true,
                .strip = strip,
            }),
        });
        core.linkLibrary(sha_ni);
    }

    const library = b.addLibrary(.{ .name = "dataset_rt", .linkage = .dynamic, .root_module = core });
    b.installArtifact(library);
    b.installFile("zig/include/dataset_rt.h", "include/dataset_rt.h");

    const unit_tests = b.addTest(.{ .root_module = core });
    const test_step = b.step("test", "Run the Zig unit tests");
    test_step.dependOn(&b.addRunArtifact(unit_tests).step);
}
