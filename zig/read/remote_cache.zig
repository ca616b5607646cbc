//! Opening a cache by path, local or in object storage.
//!
//! A remote cache (`cache_layout.isRemote`) is read from a folder of its own
//! in the hook's `local_dir`: its manifest.json is fetched first (unless the
//! folder of a version pinned, or trusted without a request, is held), and its
//! SHA-256 with the URL's names the folder (`cache_layout.remoteFolderName`),
//! so two versions of one cache never mix and a folder that already holds the
//! manifest is reused. The files the manifest lists besides the shards
//! (index.bin, metadata.arrow, records.crc32c when listed) are fetched when the
//! folder lacks them, each checked against the manifest before it takes its
//! name; manifest.json is put in place last. The folder then opens as a local
//! cache (`Cache.openWith`), whose shards are fetched when first read.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const sha256 = @import("../codec/sha256.zig");
const file_status = @import("../base/file_status.zig");
const error_words = @import("../base/error_words.zig");
const durable_files = @import("../base/durable_files.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const index_file = @import("../format/index_file.zig");
const Cache = @import("cache_reader.zig").Cache;
const shard_source = @import("shard_source.zig");
const remote_module = @import("remote.zig");
const fetch_lock = @import("fetch_lock.zig");
const Remote = remote_module.Remote;

pub const Error = error{ InvalidArgument, InvalidCache, Io, OutOfMemory };

/// Opens the cache at `path`: a local one as `Cache.open` does, a remote one
/// through `remote`, which must then be given. Errors name the path or URL.
pub fn open(
    allocator: std.mem.Allocator,
    path: []const u8,
    validate_hashes: bool,
    remote: ?*Remote,
    diagnostic: *Diagnostic,
) Error!*Cache {
    assert(path.len > 0);
    if (!cache_layout.isRemote(path)) {
        return Cache.open(allocator, path, validate_hashes, diagnostic);
    }
    const hook = remote orelse {
        diagnostic.set(
            "cache path '{s}' is in object storage (s3://, http://, https://) and " ++
                "needs a fetch hook: open it with drt_dataset_open_remote",
            .{path},
        );
        return error.InvalidArgument;
    };
    const folder = prepareFolder(allocator, hook, path, diagnostic) catch |err| {
        diagnostic.prefix("cache {s}: ", .{path});
        return err;
    };
    defer allocator.free(folder);
    const origin: shard_source.Origin = .{ .remote = hook, .url = path };
    return Cache.openWith(allocator, folder, validate_hashes, origin, diagnostic);
}

/// Fetches the manifest of the cache at `url` (unless `local_dir` holds the
/// version pinned for the URL, or with `remote.revalidate` off the version
/// last fetched) and makes its folder hold every file the manifest lists but
/// the shards; returns the folder's path.
pub fn prepareFolder(
    allocator: std.mem.Allocator,
    remote: *Remote,
    url: []const u8,
    diagnostic: *Diagnostic,
) Error![]u8 {
    const held = try heldVersion(allocator, remote, url);
    const text = held orelse try fetchManifest(allocator, remote, url, diagnostic);
    defer allocator.free(text);
    const digest = sha256.hash(text);
    var parsed = manifest.parse(allocator, text, diagnostic) catch |err| switch (err) {
        error.OutOfMemory => return error.OutOfMemory,
        error.UnsupportedFormatVersion => {
            diagnostic.prefix("manifest.json: ", .{});
            return error.InvalidCache;
        },
        error.InvalidManifest => {
            diagnostic.prefix("manifest.json: JSON error: ", .{});
            return error.InvalidCache;
        },
    };
    defer parsed.deinit();
    if (remote.budget_bytes) |budget_bytes| {
        try checkBudget(budget_bytes, url, parsed.manifest.shards, diagnostic);
    }
    const folder_name = cache_layout.remoteFolderName(url, digest);
    const folder = try std.fs.path.join(allocator, &.{ remote.local_dir, &folder_name });
    errdefer allocator.free(folder);
    const shards = try std.fs.path.join(allocator, &.{ folder, cache_layout.shards_dir });
    defer allocator.free(shards);
    try durable_files.createDirectories(shards, diagnostic);
    const io = system.io();
    var dir = std.Io.Dir.cwd().openDir(io, folder, .{}) catch |err| {
        diagnostic.set("I/O error: cannot open {s}: {f}", .{ folder, error_words.of(err) });
        return error.Io;
    };
    defer dir.close(io);
    try fetchListedFiles(remote, url, dir, folder, parsed.manifest, diagnostic);
    try placeManifest(remote, dir, folder, text, diagnostic);
    if (held == null) noteLatest(remote, url, &folder_name);
    return folder;
}

/// The manifest of the version an open of `url` reads without a request:
/// the version pinned for the URL (`Remote.pinVersion`), else, with
/// `revalidate` off, the one `local_dir`'s `remoteLatestName(url)` names;
/// null when there is none, or `local_dir` does not hold its folder.
fn heldVersion(
    allocator: std.mem.Allocator,
    remote: *Remote,
    url: []const u8,
) error{OutOfMemory}!?[]u8 {
    const io = system.io();
    const pinned = remote.pinnedVersion(url);
    if (pinned == null and remote.revalidate) return null;
    var local = std.Io.Dir.cwd().openDir(io, remote.local_dir, .{}) catch return null;
    defer local.close(io);
    if (pinned) |digest| {
        const name = cache_layout.remoteFolderName(url, digest);
        const text = try folderManifest(allocator, local, &name) orelse return null;
        if (std.mem.eql(u8, &sha256.hash(text), &digest)) return text;
        allocator.free(text);
        return null;
    }
    const latest_name = cache_layout.remoteLatestName(url);
    const folder_bytes = cache_layout.remote_folder_bytes;
    const named = file_status.readAlloc(allocator, local, &latest_name, folder_bytes) catch |err|
        return if (err == error.OutOfMemory) error.OutOfMemory else null;
    defer allocator.free(named);
    if (named.len != folder_bytes) return null;
    const text = try folderManifest(allocator, local, named) orelse return null;
    const expected = cache_layout.remoteFolderName(url, sha256.hash(text));
    if (std.mem.eql(u8, &expected, named)) return text;
    allocator.free(text);
    return null;
}

/// The manifest.json of folder `name` of `local`; null if either is missing
/// or cannot be read.
fn folderManifest(
    allocator: std.mem.Allocator,
    local: std.Io.Dir,
    name: []const u8,
) error{OutOfMemory}!?[]u8 {
    const io = system.io();
    var folder = local.openDir(io, name, .{}) catch return null;
    defer folder.close(io);
    return file_status.readAlloc(
        allocator,
        folder,
        cache_layout.manifest_file,
        manifest.manifest_bytes_max,
    ) catch |err| return if (err == error.OutOfMemory) error.OutOfMemory else null;
}

/// Names `folder_name` in `local_dir`'s `remoteLatestName(url)`, unless it
/// does already: written under a temporary name and renamed, under the lock
/// of the URL's manifest fetch. A failure is ignored: the file only spares a
/// later open with `revalidate` off its request, and is checked when read.
fn noteLatest(
    remote: *Remote,
    url: []const u8,
    folder_name: *const [cache_layout.remote_folder_bytes]u8,
) void {
    const io = system.io();
    const allocator = std.heap.c_allocator;
    var local = std.Io.Dir.cwd().openDir(io, remote.local_dir, .{}) catch return;
    defer local.close(io);
    const latest_name = cache_layout.remoteLatestName(url);
    const folder_bytes = cache_layout.remote_folder_bytes;
    if (file_status.readAlloc(allocator, local, &latest_name, folder_bytes)) |named| {
        defer allocator.free(named);
        if (std.mem.eql(u8, named, folder_name)) return;
    } else |_| {}
    var ignored: Diagnostic = .{};
    const lock_name = cache_layout.remoteManifestName(url);
    var lock = fetch_lock.FetchLock.acquire(local, remote.local_dir, &lock_name, &ignored) catch
        return;
    defer lock.release();
    _ = fetch_lock.removeTemporaries(local, remote.local_dir, &latest_name);
    var temp_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const temp = remote.tempName(&temp_buffer, &latest_name, &ignored) catch return;
    const file = durable_files.writeFile(local, temp, folder_name, &ignored) catch return;
    file.close(io);
    var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{remote.local_dir}) catch return;
    directory_entries.replaceFile(io, local, dir_path, temp, &latest_name) catch {
        directory_entries.deleteFile(io, local, dir_path, temp) catch {};
    };
}

/// Refuses a budget below the cache's two largest shards (its one shard's
/// length for a cache of one): two shards must fit, the one a read holds and
/// the one it fetches next, or reads could wait for each other for ever.
fn checkBudget(
    budget_bytes: u64,
    url: []const u8,
    shards: []const manifest.Shard,
    diagnostic: *Diagnostic,
) Error!void {
    const byte_lens = twoLargest(shards);
    const needed = byte_lens[0] +| byte_lens[1];
    if (budget_bytes >= needed) return;
    diagnostic.set(
        "RemoteConfig.budget_bytes={d} is below the two largest shards of {s}: " ++
            "{d} + {d} = {d} bytes",
        .{ budget_bytes, url, byte_lens[0], byte_lens[1], needed },
    );
    return error.InvalidArgument;
}

/// The byte lengths of the two largest of `shards`, largest first (0 for a missing second).
fn twoLargest(shards: []const manifest.Shard) [2]u64 {
    var byte_lens: [2]u64 = .{ 0, 0 };
    for (shards) |shard| {
        if (shard.byte_len > byte_lens[0]) {
            // Not an array literal: its elements would be stored one by one, over their source.
            byte_lens[1] = byte_lens[0];
            byte_lens[0] = shard.byte_len;
        } else if (shard.byte_len > byte_lens[1]) {
            byte_lens[1] = shard.byte_len;
        }
    }
    assert(byte_lens[0] >= byte_lens[1]);
    return byte_lens;
}

/// The bytes of the manifest of the cache at `url`, fetched into a temporary
/// file of `local_dir` (`cache_layout.remoteManifestName`) and deleted there.
fn fetchManifest(
    allocator: std.mem.Allocator,
    remote: *Remote,
    url: []const u8,
    diagnostic: *Diagnostic,
) Error![]u8 {
    const io = system.io();
    var dir = std.Io.Dir.cwd().openDir(io, remote.local_dir, .{}) catch |err| {
        diagnostic.set(
            "I/O error: cannot open local_dir {s}: {f}",
            .{ remote.local_dir, error_words.of(err) },
        );
        return error.Io;
    };
    defer dir.close(io);
    const target: remote_module.Target = .{
        .url = url,
        .name = cache_layout.manifest_file,
        .dir = dir,
        .dir_path = remote.local_dir,
        .byte_len = null,
        .sha256 = undefined,
        .shard = false,
    };
    // One fetch of this URL's manifest at a time among processes, so that a
    // temporary found under the lock is known to be a killed fetch's.
    const local_name = cache_layout.remoteManifestName(url);
    var lock = try fetch_lock.FetchLock.acquire(dir, remote.local_dir, &local_name, diagnostic);
    defer lock.release();
    _ = fetch_lock.removeTemporaries(dir, remote.local_dir, &local_name);
    var temp_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const temp = try remote.tempName(&temp_buffer, &local_name, diagnostic);
    _ = try remote.fetchOnce(target, temp, diagnostic) orelse {
        diagnostic.set("missing manifest: manifest.json: not found", .{});
        return error.InvalidCache;
    };
    defer {
        var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{remote.local_dir}) catch "";
        directory_entries.deleteFile(io, dir, dir_path, temp) catch {};
    }
    return file_status.readAlloc(allocator, dir, temp, manifest.manifest_bytes_max) catch |err| {
        if (err == error.FileTooBig) {
            diagnostic.set(
                "manifest.json is larger than the {d} MiB this reader accepts",
                .{manifest.manifest_bytes_max >> 20},
            );
            return error.InvalidCache;
        }
        if (err == error.OutOfMemory) return error.OutOfMemory;
        diagnostic.set("I/O error: cannot read the fetched manifest.json: {f}", .{
            error_words.of(err),
        });
        return error.Io;
    };
}

/// Fetches index.bin, metadata.arrow and (when listed) records.crc32c unless
/// the folder holds them, each checked against the manifest.
fn fetchListedFiles(
    remote: *Remote,
    url: []const u8,
    dir: std.Io.Dir,
    folder: []const u8,
    the_manifest: manifest.Manifest,
    diagnostic: *Diagnostic,
) Error!void {
    const Listed = struct { name: []const u8, byte_len: ?u64, sha256: [32]u8 };
    var listed: [3]Listed = undefined;
    var count: usize = 0;
    listed[count] = .{
        .name = cache_layout.index_file,
        .byte_len = the_manifest.sample_count *| index_file.row_bytes,
        .sha256 = the_manifest.index_sha256,
    };
    count += 1;
    listed[count] = .{
        .name = cache_layout.metadata_file,
        .byte_len = null,
        .sha256 = the_manifest.metadata_sha256,
    };
    count += 1;
    if (the_manifest.record_checksums) |checksums| {
        listed[count] = .{
            .name = cache_layout.record_checksums_file,
            .byte_len = checksums.byte_len,
            .sha256 = checksums.sha256,
        };
        count += 1;
    }
    for (listed[0..count]) |file| {
        const outcome = try remote.fetchChecked(.{
            .url = url,
            .name = file.name,
            .dir = dir,
            .dir_path = folder,
            .byte_len = file.byte_len,
            .sha256 = file.sha256,
            .shard = false,
        }, diagnostic);
        if (outcome == .not_found) {
            diagnostic.set("{s}: not found (the manifest lists it)", .{file.name});
            return error.InvalidCache;
        }
    }
}

/// Puts `text` in the folder as manifest.json, last, unless the folder holds
/// it already: written under a temporary name, fsynced and renamed, under
/// its lock file (`fetch_lock.zig`).
fn placeManifest(
    remote: *Remote,
    dir: std.Io.Dir,
    folder: []const u8,
    text: []const u8,
    diagnostic: *Diagnostic,
) Error!void {
    const io = system.io();
    const name = cache_layout.manifest_file;
    var lock = try fetch_lock.FetchLock.acquire(dir, folder, name, diagnostic);
    defer lock.release();
    _ = fetch_lock.removeTemporaries(dir, folder, name);
    const allocator = std.heap.c_allocator;
    if (file_status.readAlloc(allocator, dir, name, manifest.manifest_bytes_max)) |held| {
        defer allocator.free(held);
        if (std.mem.eql(u8, held, text)) return;
    } else |_| {}
    var temp_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const temp = try remote.tempName(&temp_buffer, name, diagnostic);
    const file = try durable_files.writeFile(dir, temp, text, diagnostic);
    const synced = file.sync(io);
    file.close(io);
    var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
    const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{folder}) catch unreachable;
    synced catch |err| {
        diagnostic.set("cannot fsync {s}: {f}", .{ temp, error_words.of(err) });
        directory_entries.deleteFile(io, dir, dir_path, temp) catch {};
        return error.Io;
    };
    directory_entries.replaceFile(io, dir, dir_path, temp, name) catch |err| {
        diagnostic.set("cannot put {s} in place: {f}", .{ name, error_words.of(err) });
        directory_entries.deleteFile(io, dir, dir_path, temp) catch {};
        return error.Io;
    };
    try durable_files.syncDir(dir, folder, diagnostic);
}

test "the two largest shards, in any order" {
    var shards: [4]manifest.Shard = undefined;
    for (&shards, [_]u64{ 3, 9, 7, 1 }) |*shard, len| shard.byte_len = len;
    try std.testing.expectEqual([2]u64{ 9, 7 }, twoLargest(&shards));
    try std.testing.expectEqual([2]u64{ 9, 0 }, twoLargest(shards[1..2]));
    shards[0].byte_len = 9;
    try std.testing.expectEqual([2]u64{ 9, 9 }, twoLargest(&shards));
}

test {
    _ = @import("remote_test.zig");
}
