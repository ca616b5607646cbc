//! The names of a cache's files and folders, and of the writer's staging area
//! beside the caches (docs/storage-format.md). The manifest is the publication
//! marker: the writer puts it in place last, so a directory that holds one is a
//! published cache (whether it is a valid one is for the reader to check).
const std = @import("std");
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");

pub const manifest_file = "manifest.json";
pub const index_file = "index.bin";
pub const metadata_file = "metadata.arrow";
pub const shards_dir = "shards";
/// Under the base directory: staging directories and writers' lock files.
pub const staging_dir = "tmp";
/// A writer's lock file for source `name` is `tmp/<name>.lock`.
pub const lock_suffix = ".lock";

/// True when `path` is a directory that holds a manifest.
pub fn isPublished(path: []const u8) bool {
    const io = system.io();
    var dir = std.Io.Dir.cwd().openDir(io, path, .{}) catch return false;
    defer dir.close(io);
    _ = file_status.pathInode(dir, manifest_file) catch return false;
    return true;
}

test "a directory is published once it holds a manifest" {
    const io = system.io();
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    var buffer: [std.fs.max_path_bytes]u8 = undefined;
    const path = buffer[0..try tmp.dir.realPath(io, &buffer)];
    var joined: [std.fs.max_path_bytes + 16]u8 = undefined;
    const missing = try std.fmt.bufPrint(&joined, "{s}/absent", .{path});
    try std.testing.expect(!isPublished(missing));
    try std.testing.expect(!isPublished(path));
    const file = try tmp.dir.createFile(io, manifest_file, .{});
    file.close(io);
    try std.testing.expect(isPublished(path));
}
