//! The names of a cache's files and folders, and of the writer's staging area
//! beside the caches (docs/storage-format.md). The manifest is the publication
//! marker: the writer puts it in place last, so a directory that holds one is a
//! published cache (whether it is a valid one is for the reader to check).
const std = @import("std");
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");
const sha256 = @import("../codec/sha256.zig");

pub const manifest_file = "manifest.json";
pub const index_file = "index.bin";
pub const metadata_file = "metadata.arrow";
/// One CRC-32C per record (format/record_checksums.zig); absent in dataset-rt 0.2.4's caches.
pub const record_checksums_file = "records.crc32c";
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

/// The URL schemes of caches in object storage; any other path is a local one.
pub const remote_schemes = [_][]const u8{ "s3://", "http://", "https://" };

/// Whether `path` names a cache in object storage (`remote_schemes`), read
/// through a fetch hook into a local folder (`remoteFolderName`).
pub fn isRemote(path: []const u8) bool {
    for (remote_schemes) |scheme| {
        if (std.ascii.startsWithIgnoreCase(path, scheme)) return true;
    }
    return false;
}

/// A remote cache's local folder: `<16 hex of SHA-256(url)>-<16 hex of the
/// manifest's SHA-256>`, so two versions of one cache never share a folder.
pub const remote_folder_bytes = 33;

pub fn remoteFolderName(
    url: []const u8,
    manifest_sha256: [sha256.digest_length]u8,
) [remote_folder_bytes]u8 {
    return urlHex(url) ++ "-".* ++ std.fmt.bytesToHex(manifest_sha256[0..8], .lower);
}

/// A remote cache's manifest before its folder is known: fetched to a
/// temporary of this name in `local_dir`, `<16 hex of SHA-256(url)>-manifest.json`
/// (the folder name's first half), and its lock file is this name's.
pub const remote_manifest_bytes = 16 + "-".len + manifest_file.len;

pub fn remoteManifestName(url: []const u8) [remote_manifest_bytes]u8 {
    return urlHex(url) ++ "-".* ++ manifest_file[0..manifest_file.len].*;
}

/// The file in `local_dir` naming the folder of the last version of the
/// cache at a URL whose manifest was fetched: `<16 hex of SHA-256(url)>.latest`,
/// holding the folder's name (`remoteFolderName`).
pub const remote_latest_bytes = 16 + latest_suffix.len;
const latest_suffix = ".latest";

pub fn remoteLatestName(url: []const u8) [remote_latest_bytes]u8 {
    return urlHex(url) ++ latest_suffix[0..latest_suffix.len].*;
}

/// The first 16 hex digits of SHA-256(url): the part of a remote cache's local
/// names that says which URL they belong to.
fn urlHex(url: []const u8) [16]u8 {
    const url_sha256 = sha256.hash(url);
    return std.fmt.bytesToHex(url_sha256[0..8], .lower);
}

/// A file being fetched is written as `<name>` ++ this ++ `<pid>-<counter>`
/// beside its final name, and renamed only once it is checked.
pub const fetch_temp_infix = ".tmp-";

/// Shard files are `shards/NNNNNN.bin`, numbered by position in the manifest.
/// Room for any name `shardName` writes ("18446744073709551615.bin" is 24 bytes).
pub const shard_name_bytes_max = 32;

/// The name of the shard at `index`: its index zero-padded to six digits, then ".bin".
pub fn shardName(buffer: *[shard_name_bytes_max]u8, index: u64) []const u8 {
    return std.fmt.bufPrint(buffer, "{d:0>6}.bin", .{index}) catch unreachable;
}

/// A shard's file name held by value: "NNNNNN.bin" with as many digits as its index needs.
pub const ShardName = struct {
    buffer: [shard_name_bytes_max]u8 = undefined,
    len: usize = 0,

    pub fn of(index: u64) ShardName {
        var name: ShardName = .{};
        name.len = shardName(&name.buffer, index).len;
        return name;
    }

    pub fn slice(name: *const ShardName) []const u8 {
        return name.buffer[0..name.len];
    }
};

test "shard names keep six digits and grow past 999999" {
    try std.testing.expectEqualStrings("000000.bin", ShardName.of(0).slice());
    try std.testing.expectEqualStrings("999999.bin", ShardName.of(999_999).slice());
    try std.testing.expectEqualStrings("1000000.bin", ShardName.of(1_000_000).slice());
}

test "shard names are the zero-padded position" {
    var buffer: [shard_name_bytes_max]u8 = undefined;
    try std.testing.expectEqualStrings("000000.bin", shardName(&buffer, 0));
    try std.testing.expectEqualStrings("000042.bin", shardName(&buffer, 42));
    try std.testing.expectEqualStrings("1234567.bin", shardName(&buffer, 1234567));
    try std.testing.expectEqualStrings(
        "18446744073709551615.bin",
        shardName(&buffer, std.math.maxInt(u64)),
    );
}

test "remote paths are the URL schemes, and a folder names URL and manifest" {
    try std.testing.expect(isRemote("s3://bucket/caches/train"));
    try std.testing.expect(isRemote("HTTPS://host/c"));
    try std.testing.expect(isRemote("http://127.0.0.1:9000/c"));
    try std.testing.expect(!isRemote("/data/caches/train"));
    try std.testing.expect(!isRemote("s3:/bucket"));
    try std.testing.expect(!isRemote("caches/https://x"));
    const a = remoteFolderName("s3://b/c", sha256.hash("one"));
    const b = remoteFolderName("s3://b/c", sha256.hash("two"));
    const c = remoteFolderName("s3://b/d", sha256.hash("one"));
    try std.testing.expectEqual(@as(u8, '-'), a[16]);
    try std.testing.expect(!std.mem.eql(u8, &a, &b));
    try std.testing.expect(!std.mem.eql(u8, &a, &c));
    try std.testing.expectEqualSlices(u8, a[0..16], b[0..16]);
    const manifest_name = remoteManifestName("s3://b/c");
    try std.testing.expectEqualSlices(u8, a[0..17], manifest_name[0..17]);
    try std.testing.expectEqualStrings("-manifest.json", manifest_name[16..]);
    const latest_name = remoteLatestName("s3://b/c");
    try std.testing.expectEqualSlices(u8, a[0..16], latest_name[0..16]);
    try std.testing.expectEqualStrings(".latest", latest_name[16..]);
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
