//! Tests of remote.zig and remote_cache.zig: a cache read through a fetch hook
//! that copies from a local folder standing for object storage, in every way
//! the hook can answer (the file, not found, a failure, corrupt bytes). The
//! hook and the reads are shared with shard_budget_test.zig.
const std = @import("std");
const testing = std.testing;
const system = @import("../base/system.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_layout = @import("../format/cache_layout.zig");
const column_builder = @import("../format/column_builder.zig");
const record_read = @import("record_read.zig");
const Cache = @import("cache_reader.zig").Cache;
const TestCache = @import("test_cache.zig").TestCache;
const remote_module = @import("remote.zig");
const Remote = remote_module.Remote;
const remote_cache = @import("remote_cache.zig");
const verify = @import("verify.zig");
const thread_pool = @import("../base/thread_pool.zig");

pub const url = "s3://bucket/caches/train-00";

/// How the test hook answers for shards (other files are always copied).
pub const Mode = enum { copy, not_found, fail, corrupt_once, corrupt_always };

/// The test hook's context: the folder it copies from, and how it answers.
pub const Source = struct {
    dir: []const u8,
    mode: Mode = .copy,
    corrupted: std.atomic.Value(u32) = .init(0),
    /// Calls for shards.
    shard_calls: std.atomic.Value(u32) = .init(0),
    /// How long a shard's copy takes, so that fetchers of it overlap.
    shard_delay_ms: u32 = 0,
};

pub fn copyFetch(
    context: ?*anyopaque,
    url_ptr: [*]const u8,
    url_len: u64,
    name_ptr: [*]const u8,
    name_len: u64,
    dest_ptr: [*]const u8,
    dest_len: u64,
    message: [*]u8,
    message_cap: u64,
) callconv(.c) i32 {
    const source: *Source = @ptrCast(@alignCast(context.?));
    const name = name_ptr[0..@intCast(name_len)];
    const dest = dest_ptr[0..@intCast(dest_len)];
    if (!std.mem.eql(u8, url_ptr[0..@intCast(url_len)], url)) return remote_module.fetch_failed;
    const shard = std.mem.startsWith(u8, name, "shards/");
    if (shard) _ = source.shard_calls.fetchAdd(1, .monotonic);
    if (shard and source.shard_delay_ms > 0) {
        system.io().sleep(.fromMilliseconds(source.shard_delay_ms), .awake) catch {};
    }
    if (shard and source.mode == .not_found) return remote_module.fetch_not_found;
    if (shard and source.mode == .fail) {
        const text = "connection reset by the test";
        const len = @min(text.len, message_cap - 1);
        @memcpy(message[0..len], text[0..len]);
        message[len] = 0;
        return remote_module.fetch_failed;
    }
    const corrupt = shard and switch (source.mode) {
        .corrupt_always => true,
        .corrupt_once => source.corrupted.fetchAdd(1, .monotonic) == 0,
        else => false,
    };
    copy(source.dir, name, dest, corrupt) catch |err| {
        if (err == error.FileNotFound) return remote_module.fetch_not_found;
        return remote_module.fetch_failed;
    };
    return remote_module.fetch_ok;
}

/// Copies `dir/name` to `dest`, with its first byte flipped if `corrupt`.
fn copy(dir: []const u8, name: []const u8, dest: []const u8, corrupt: bool) !void {
    const io = system.io();
    var source_dir = try std.Io.Dir.cwd().openDir(io, dir, .{});
    defer source_dir.close(io);
    const bytes = try source_dir.readFileAlloc(io, name, testing.allocator, .unlimited);
    defer testing.allocator.free(bytes);
    if (corrupt and bytes.len > 0) bytes[0] ^= 0xff;
    const file = try std.Io.Dir.cwd().createFile(io, dest, .{});
    defer file.close(io);
    try file.writePositionalAll(io, bytes, 0);
}

/// A hook over `source` with a fresh local_dir.
pub const Hook = struct {
    tmp: std.testing.TmpDir,
    local_dir: []u8,
    remote: *Remote,

    pub fn init(source: *Source) !Hook {
        const io = system.io();
        var tmp = std.testing.tmpDir(.{});
        errdefer tmp.cleanup();
        var buffer: [std.fs.max_path_bytes]u8 = undefined;
        const base = buffer[0..try tmp.dir.realPath(io, &buffer)];
        const local_dir = try std.fs.path.join(testing.allocator, &.{ base, "local" });
        errdefer testing.allocator.free(local_dir);
        var diagnostic: Diagnostic = .{};
        const allocator = testing.allocator;
        const remote = try Remote.create(allocator, copyFetch, source, local_dir, &diagnostic);
        return .{ .tmp = tmp, .local_dir = local_dir, .remote = remote };
    }

    pub fn deinit(hook: *Hook) void {
        hook.remote.release();
        testing.allocator.free(hook.local_dir);
        hook.tmp.cleanup();
    }

    pub fn open(hook: *Hook, diagnostic: *Diagnostic) !*Cache {
        return remote_cache.open(testing.allocator, url, false, hook.remote, diagnostic);
    }

    /// The name of the one folder in `local` (a local_dir), beside which are
    /// only the lock file of the URL's manifest fetch and the file naming the
    /// folder (`cache_layout.remoteLatestName`).
    fn onlyFolder(local: std.Io.Dir) ![cache_layout.remote_folder_bytes]u8 {
        const io = system.io();
        var folder_buffer: [cache_layout.remote_folder_bytes]u8 = undefined;
        var folders: usize = 0;
        var others: usize = 0;
        const lock_name = cache_layout.remoteManifestName(url) ++ ".lock".*;
        const latest_name = cache_layout.remoteLatestName(url);
        var entries = local.iterate();
        while (try entries.next(io)) |entry| {
            if (entry.kind == .directory) {
                try testing.expectEqual(cache_layout.remote_folder_bytes, entry.name.len);
                @memcpy(&folder_buffer, entry.name);
                folders += 1;
            } else {
                const known = std.mem.eql(u8, entry.name, &lock_name) or
                    std.mem.eql(u8, entry.name, &latest_name);
                if (!known) std.debug.print("unexpected in local_dir: {s}\n", .{entry.name});
                try testing.expect(known);
                others += 1;
            }
        }
        try testing.expectEqual(@as(usize, 1), folders);
        try testing.expectEqual(@as(usize, 2), others);
        return folder_buffer;
    }

    /// The folder `local_dir`'s latest file names (`cache_layout.remoteLatestName`).
    fn latest(hook: *Hook, buffer: []u8) ![]const u8 {
        const io = system.io();
        var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{});
        defer local.close(io);
        const name = cache_layout.remoteLatestName(url);
        const len = try local.readFile(io, &name, buffer);
        return len;
    }

    /// The names in the cache's folder under `sub` ("" or "shards"), sorted, joined by spaces.
    fn list(hook: *Hook, sub: []const u8, buffer: []u8) ![]const u8 {
        const io = system.io();
        var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{ .iterate = true });
        defer local.close(io);
        const folder_name = try onlyFolder(local);
        var cache_dir = try local.openDir(io, &folder_name, .{});
        defer cache_dir.close(io);
        var dir = try cache_dir.openDir(io, if (sub.len == 0) "." else sub, .{ .iterate = true });
        defer dir.close(io);
        var names: [16][]const u8 = undefined;
        var arena: std.heap.ArenaAllocator = .init(testing.allocator);
        defer arena.deinit();
        var count: usize = 0;
        var entries = dir.iterate();
        while (try entries.next(io)) |entry| : (count += 1) {
            names[count] = try arena.allocator().dupe(u8, entry.name);
        }
        std.mem.sort([]const u8, names[0..count], {}, lessThan);
        var writer: std.Io.Writer = .fixed(buffer);
        for (names[0..count], 0..) |name, at| {
            try writer.print("{s}{s}", .{ if (at == 0) "" else " ", name });
        }
        return writer.buffered();
    }

    fn lessThan(_: void, a: []const u8, b: []const u8) bool {
        return std.mem.lessThan(u8, a, b);
    }
};

/// Every sample of `cache` read in order: the payloads and the metadata JSON, joined.
pub const Read = struct {
    allocator: std.mem.Allocator,
    payload: std.ArrayList(u8) = .empty,
    metadata_json: std.ArrayList(u8) = .empty,

    pub fn all(cache: *const Cache, diagnostic: *Diagnostic) !Read {
        return allWith(testing.allocator, cache, diagnostic);
    }

    /// `all`, with the buffers from `allocator`. Threads that read at once pass libc's
    /// allocator: the testing allocator grows large buffers with mremap, which ThreadSanitizer
    /// does not intercept, so an address one thread gave up and another got back is reported
    /// as a race between them.
    fn allWith(allocator: std.mem.Allocator, cache: *const Cache, diagnostic: *Diagnostic) !Read {
        var read: Read = .{ .allocator = allocator };
        errdefer read.deinit();
        var scratch: record_read.Scratch = .{};
        defer scratch.deinit(allocator);
        const columns = try column_builder.initAll(allocator, cache.schema());
        defer {
            column_builder.deinitAll(allocator, columns);
            allocator.free(columns);
        }
        const output: record_read.Output = .{
            .allocator = allocator,
            .payload = &read.payload,
            .metadata_json = &read.metadata_json,
            .columns = columns,
        };
        for (0..@intCast(cache.sampleCount())) |sample_id| {
            const request: record_read.Request = .{ .sample_id = sample_id };
            _ = try cache.readSample(request, &scratch, output, diagnostic);
        }
        return read;
    }

    pub fn deinit(read: *Read) void {
        read.payload.deinit(read.allocator);
        read.metadata_json.deinit(read.allocator);
    }

    pub fn expectSame(read: *const Read, other: *const Read) !void {
        try testing.expectEqualSlices(u8, other.payload.items, read.payload.items);
        try testing.expectEqualStrings(other.metadata_json.items, read.metadata_json.items);
    }
};

pub fn localRead(written: *const TestCache) !Read {
    var diagnostic: Diagnostic = .{};
    const cache = try Cache.open(testing.allocator, written.path, false, &diagnostic);
    defer cache.close();
    return Read.all(cache, &diagnostic);
}

pub fn expectContains(message: []const u8, phrase: []const u8) !void {
    if (std.mem.indexOf(u8, message, phrase) != null) return;
    std.debug.print("message: {s}\nexpected to contain: {s}\n", .{ message, phrase });
    return error.TestUnexpectedMessage;
}

test "a remote cache reads as the local one, its shards fetched on first read" {
    var written = try TestCache.write(.{ .compression = .lz4 });
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    try testing.expectEqualStrings(url, cache.path);
    var stats = hook.remote.stats();
    // manifest.json, index.bin, metadata.arrow, records.crc32c; no shard yet.
    try testing.expectEqual(@as(u64, 4), stats.fetched_files);
    try testing.expectEqual(@as(u64, 0), stats.shards_fetched);
    var buffer: [256]u8 = undefined;
    try testing.expectEqualStrings("", try hook.list("shards", &buffer));
    var read = try Read.all(cache, &diagnostic);
    defer read.deinit();
    try read.expectSame(&expected);
    stats = hook.remote.stats();
    var shard_bytes: u64 = 0;
    for (written.shards) |shard| shard_bytes += shard.byte_len;
    try testing.expectEqual(@as(u64, 3), stats.shards_fetched);
    try testing.expectEqual(shard_bytes, stats.shard_bytes_fetched);
    try testing.expectEqual(@as(u64, 7), stats.fetched_files);
    try testing.expectEqual(@as(u64, 0), stats.refetches);
    // Each fetched file's lock file stays beside it (fetch_lock.zig).
    try testing.expectEqualStrings(
        "index.bin index.bin.lock manifest.json manifest.json.lock metadata.arrow " ++
            "metadata.arrow.lock records.crc32c records.crc32c.lock shards",
        try hook.list("", &buffer),
    );
    try testing.expectEqualStrings(
        "000000.bin 000000.bin.lock 000001.bin 000001.bin.lock 000002.bin 000002.bin.lock",
        try hook.list("shards", &buffer),
    );
}

test "a folder that holds the cache is reused: only the manifest is fetched again" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    for (0..2) |_| {
        const cache = try hook.open(&diagnostic);
        defer cache.close();
        var read = try Read.all(cache, &diagnostic);
        defer read.deinit();
        try read.expectSame(&expected);
    }
    const stats = hook.remote.stats();
    try testing.expectEqual(@as(u64, 3), stats.shards_fetched);
    try testing.expectEqual(@as(u64, 4 + 3 + 1), stats.fetched_files);
    // Another version of the cache at the same URL gets a folder of its own.
    written.spec.source_name = "other";
    try written.writeManifest();
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var folders: usize = 0;
    const io = system.io();
    var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{ .iterate = true });
    defer local.close(io);
    var entries = local.iterate();
    while (try entries.next(io)) |entry| folders += @intFromBool(entry.kind == .directory);
    try testing.expectEqual(@as(usize, 2), folders);
}

test "with revalidate off, the version last fetched opens without a request" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    // Nothing held yet: the first open fetches as with revalidate on.
    hook.remote.revalidate = false;
    {
        const cache = try hook.open(&diagnostic);
        defer cache.close();
        var read = try Read.all(cache, &diagnostic);
        defer read.deinit();
        try read.expectSame(&expected);
    }
    try testing.expectEqual(@as(u64, 4 + 3), hook.remote.stats().fetched_files);
    var first_buffer: [64]u8 = undefined;
    const first = try hook.latest(&first_buffer);
    // Another version at the URL is not seen: the held one opens, no request.
    written.spec.source_name = "other";
    try written.writeManifest();
    {
        const cache = try hook.open(&diagnostic);
        defer cache.close();
        var read = try Read.all(cache, &diagnostic);
        defer read.deinit();
        try read.expectSame(&expected);
    }
    try testing.expectEqual(@as(u64, 4 + 3), hook.remote.stats().fetched_files);
    // An open with revalidate on fetches the manifest, finds the new version
    // and names its folder; later opens with it off open that one.
    hook.remote.revalidate = true;
    const newer = try hook.open(&diagnostic);
    newer.close();
    const after_check = hook.remote.stats().fetched_files;
    try testing.expectEqual(@as(u64, 4 + 3 + 4), after_check);
    var second_buffer: [64]u8 = undefined;
    const second = try hook.latest(&second_buffer);
    try testing.expect(!std.mem.eql(u8, first, second));
    hook.remote.revalidate = false;
    const again = try hook.open(&diagnostic);
    again.close();
    try testing.expectEqual(after_check, hook.remote.stats().fetched_files);
    // A folder whose manifest no longer gives its name is not trusted.
    const io = system.io();
    var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{});
    defer local.close(io);
    var folder = try local.openDir(io, second, .{});
    defer folder.close(io);
    try folder.writeFile(io, .{ .sub_path = cache_layout.manifest_file, .data = "{}" });
    const checked = try hook.open(&diagnostic);
    checked.close();
    try testing.expectEqual(after_check + 1, hook.remote.stats().fetched_files);
}

test "a pinned version opens from its folder without a request, whatever the URL holds" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const digest = digest: {
        const cache = try hook.open(&diagnostic);
        defer cache.close();
        var read = try Read.all(cache, &diagnostic);
        defer read.deinit();
        break :digest cache.manifest_sha256;
    };
    const fetched = hook.remote.stats().fetched_files;
    try testing.expectEqual(@as(u64, 4 + 3), fetched);
    // Another version at the URL; the pinned one opens, with revalidate on.
    written.spec.source_name = "other";
    try written.writeManifest();
    try hook.remote.pinVersion(url, digest);
    try testing.expect(hook.remote.revalidate);
    {
        const cache = try hook.open(&diagnostic);
        defer cache.close();
        try testing.expectEqualSlices(u8, &digest, &cache.manifest_sha256);
        var read = try Read.all(cache, &diagnostic);
        defer read.deinit();
        try read.expectSame(&expected);
    }
    try testing.expectEqual(fetched, hook.remote.stats().fetched_files);
    // A pin of a version `local_dir` does not hold: the open fetches the
    // manifest and finds what the URL holds now (its caller compares).
    var absent = digest;
    absent[0] ^= 1;
    try hook.remote.pinVersion(url, absent);
    const newer = try hook.open(&diagnostic);
    defer newer.close();
    try testing.expect(!std.mem.eql(u8, &digest, &newer.manifest_sha256));
    try testing.expectEqual(fetched + 4, hook.remote.stats().fetched_files);
}

test "an open deletes a manifest temporary left by a killed fetch of the URL's manifest" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    const io = system.io();
    var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{});
    defer local.close(io);
    const left = cache_layout.remoteManifestName(url) ++ ".tmp-4242-0".*;
    const other_url = cache_layout.remoteManifestName("s3://bucket/other") ++ ".tmp-4242-1".*;
    for ([_][]const u8{ &left, &other_url }) |name| (try local.createFile(io, name, .{})).close(io);
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    // Asked by path: under wine, a lookup relative to `local` may miss a
    // deletion made by path.
    const left_path = try std.fs.path.join(testing.allocator, &.{ hook.local_dir, &left });
    defer testing.allocator.free(left_path);
    try testing.expectError(error.FileNotFound, std.Io.Dir.cwd().access(io, left_path, .{}));
    // Another URL's is not this open's to judge.
    const other_path = try std.fs.path.join(testing.allocator, &.{ hook.local_dir, &other_url });
    defer testing.allocator.free(other_path);
    try std.Io.Dir.cwd().access(io, other_path, .{});
}

test "a shard corrupt once in transit is fetched again and reads correctly" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path, .mode = .corrupt_once };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var read = try Read.all(cache, &diagnostic);
    defer read.deinit();
    try read.expectSame(&expected);
    const stats = hook.remote.stats();
    try testing.expectEqual(@as(u64, 1), stats.refetches);
    try testing.expectEqual(@as(u64, 3), stats.shards_fetched);
    try testing.expectEqual(@as(u64, 4 + 3 + 1), stats.fetched_files);
}

test "a shard corrupt on every fetch fails the read with both digests, and leaves nothing" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path, .mode = .corrupt_always };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    try testing.expectError(error.Io, Read.all(cache, &diagnostic));
    const message = diagnostic.message();
    try testing.expect(std.mem.startsWith(u8, message, "cache " ++ url ++ ": shards/000000.bin"));
    try expectContains(message, "shards/000000.bin: fetched twice, and neither copy matches");
    try expectContains(message, &std.fmt.bytesToHex(written.shards[0].sha256, .lower));
    try testing.expectEqual(@as(u64, 1), hook.remote.stats().refetches);
    try testing.expectEqual(@as(u64, 0), hook.remote.stats().shards_fetched);
    var buffer: [256]u8 = undefined;
    // No copy under any name: only the shard's (empty) lock file.
    try testing.expectEqualStrings("000000.bin.lock", try hook.list("shards", &buffer));
}

test "a failed fetch fails the read with the hook's message; the next read tries again" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path, .mode = .fail };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    try testing.expectError(error.Io, Read.all(cache, &diagnostic));
    try expectContains(
        diagnostic.message(),
        "shards/000000.bin: cannot fetch it: connection reset by the test",
    );
    try testing.expect(std.mem.startsWith(u8, diagnostic.message(), "cache " ++ url ++ ": "));
    var buffer: [256]u8 = undefined;
    try testing.expectEqualStrings("000000.bin.lock", try hook.list("shards", &buffer));
    source.mode = .copy;
    var read = try Read.all(cache, &diagnostic);
    defer read.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    try read.expectSame(&expected);
}

test "objects that do not exist: the manifest fails the open, a shard its read" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path, .mode = .not_found };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    try testing.expectError(error.InvalidCache, Read.all(cache, &diagnostic));
    try expectContains(diagnostic.message(), "shards/000000.bin: not found");
    source.dir = "/nonexistent/dataset_rt/remote";
    try testing.expectError(error.InvalidCache, hook.open(&diagnostic));
    try testing.expectEqualStrings(
        "cache " ++ url ++ ": missing manifest: manifest.json: not found",
        diagnostic.message(),
    );
}

test "a remote path needs a hook; local paths open as before" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var diagnostic: Diagnostic = .{};
    const result = remote_cache.open(testing.allocator, url, false, null, &diagnostic);
    try testing.expectError(error.InvalidArgument, result);
    try expectContains(diagnostic.message(), "cache path '" ++ url ++ "' is in object storage");
    const cache = try remote_cache.open(testing.allocator, written.path, false, null, &diagnostic);
    defer cache.close();
    try testing.expectEqualStrings(written.path, cache.path);
}

test "readers of one shard at once wait for one fetch of it" {
    var written = try TestCache.write(.{ .sample_count = 4, .payload_bytes = 4096 });
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    const Reader = struct {
        fn run(shared: *const Cache, failed: *std.atomic.Value(bool)) void {
            var local: Diagnostic = .{};
            var read = Read.allWith(std.heap.c_allocator, shared, &local) catch {
                failed.store(true, .monotonic);
                return;
            };
            read.deinit();
        }
    };
    var failed: std.atomic.Value(bool) = .init(false);
    var threads: [4]std.Thread = undefined;
    for (&threads) |*thread| thread.* = try std.Thread.spawn(.{}, Reader.run, .{ cache, &failed });
    for (threads) |thread| thread.join();
    try testing.expect(!failed.load(.monotonic));
    try testing.expectEqual(@as(u32, 1), source.shard_calls.load(.monotonic));
    try testing.expectEqual(@as(u64, 1), hook.remote.stats().shards_fetched);
}

test "two hooks on one local_dir, as two processes, fetch each shard once between them" {
    var written = try TestCache.write(.{ .sample_count = 40, .payload_bytes = 512 });
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path, .shard_delay_ms = 30 };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    // No shared single flight: only the lock files stand between the two.
    const allocator = testing.allocator;
    const other = try Remote.create(allocator, copyFetch, &source, hook.local_dir, &diagnostic);
    defer other.release();
    const caches = [2]*Cache{
        try hook.open(&diagnostic),
        try remote_cache.open(testing.allocator, url, false, other, &diagnostic),
    };
    defer for (caches) |cache| cache.close();
    const Reader = struct {
        fn run(cache: *const Cache, same: *const Read, failed: *std.atomic.Value(bool)) void {
            var local: Diagnostic = .{};
            var read = Read.allWith(std.heap.c_allocator, cache, &local) catch {
                failed.store(true, .monotonic);
                return;
            };
            defer read.deinit();
            read.expectSame(same) catch failed.store(true, .monotonic);
        }
    };
    var failed: std.atomic.Value(bool) = .init(false);
    var threads: [2]std.Thread = undefined;
    for (&threads, caches) |*thread, cache| {
        thread.* = try std.Thread.spawn(.{}, Reader.run, .{ cache, &expected, &failed });
    }
    for (threads) |thread| thread.join();
    try testing.expect(!failed.load(.monotonic));
    const shard_count = written.shards.len;
    try testing.expectEqual(shard_count, source.shard_calls.load(.monotonic));
    const fetched = hook.remote.stats().shards_fetched + other.stats().shards_fetched;
    try testing.expectEqual(@as(u64, shard_count), fetched);
}

test "a remote scrub fetches every file, then finds what a local scrub finds" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path, .mode = .corrupt_always };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    const pool = try thread_pool.ThreadPool.create(testing.allocator, 1);
    defer pool.release();
    const verifier = try verify.Verifier.createRemote(testing.allocator, pool, url, hook.remote);
    defer verifier.destroy();
    try verifier.run();
    // Per shard, its failed fetch and its missing file; then the records not checked.
    const found = verifier.found();
    try testing.expectEqual(@as(usize, 2 * 3 + 1), found.len);
    try testing.expectEqualStrings("shards/000000.bin", found[0].file);
    try expectContains(found[0].message, "fetched twice, and neither copy matches");
    try expectContains(found[6].message, "records not checked");
    source.mode = .copy;
    const again = try verify.Verifier.createRemote(testing.allocator, pool, url, hook.remote);
    defer again.destroy();
    try again.run();
    try testing.expectEqual(@as(usize, 0), again.found().len);
    try testing.expectEqual(@as(u64, 3), hook.remote.stats().shards_fetched);
}

test "a remote scrub replaces a damaged local copy of a shard instead of reporting it" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    const pool = try thread_pool.ThreadPool.create(testing.allocator, 1);
    defer pool.release();
    const first = try verify.Verifier.createRemote(testing.allocator, pool, url, hook.remote);
    defer first.destroy();
    try first.run();
    try testing.expectEqual(@as(usize, 0), first.found().len);
    const shard_count: u64 = written.shards.len;
    try testing.expectEqual(shard_count, hook.remote.stats().shards_fetched);
    // A byte of the local copy of shard 1 flipped, as a failing disk would.
    const io = system.io();
    var local = try std.Io.Dir.cwd().openDir(io, hook.local_dir, .{ .iterate = true });
    defer local.close(io);
    const folder = try Hook.onlyFolder(local);
    const shard = try std.fs.path.join(testing.allocator, &.{
        hook.local_dir, &folder, cache_layout.shards_dir, "000001.bin",
    });
    defer testing.allocator.free(shard);
    const original = try std.Io.Dir.cwd().readFileAlloc(io, shard, testing.allocator, .unlimited);
    defer testing.allocator.free(original);
    {
        const file = try std.Io.Dir.cwd().openFile(io, shard, .{ .mode = .read_write });
        defer file.close(io);
        try file.writePositionalAll(io, &.{original[original.len / 2] ^ 0x40}, original.len / 2);
    }
    const again = try verify.Verifier.createRemote(testing.allocator, pool, url, hook.remote);
    defer again.destroy();
    try again.run();
    try testing.expectEqual(@as(usize, 0), again.found().len);
    try testing.expectEqual(shard_count + 1, hook.remote.stats().shards_fetched);
    const restored = try std.Io.Dir.cwd().readFileAlloc(io, shard, testing.allocator, .unlimited);
    defer testing.allocator.free(restored);
    try testing.expectEqualSlices(u8, original, restored);
}

test "a read that finds a shard's local copy damaged deletes it, fetches it again, reads on" {
    var written = try TestCache.write(.{});
    defer written.deinit();
    var expected = try localRead(&written);
    defer expected.deinit();
    var source: Source = .{ .dir = written.path };
    var hook = try Hook.init(&source);
    defer hook.deinit();
    var diagnostic: Diagnostic = .{};
    const cache = try hook.open(&diagnostic);
    defer cache.close();
    var first = try Read.all(cache, &diagnostic);
    defer first.deinit();
    const shard_count: u64 = written.shards.len;
    try testing.expectEqual(shard_count, hook.remote.stats().shards_fetched);
    // A byte in the middle of shard 1's local copy flipped, as a failing disk would.
    const io = system.io();
    const shard = try std.fs.path.join(testing.allocator, &.{
        cache.shards.dir_path, "000001.bin",
    });
    defer testing.allocator.free(shard);
    const original = try std.Io.Dir.cwd().readFileAlloc(io, shard, testing.allocator, .unlimited);
    defer testing.allocator.free(original);
    {
        const file = try std.Io.Dir.cwd().openFile(io, shard, .{ .mode = .read_write });
        defer file.close(io);
        try file.writePositionalAll(io, &.{original[original.len / 2] ^ 0x40}, original.len / 2);
    }
    var again = try Read.all(cache, &diagnostic);
    defer again.deinit();
    try again.expectSame(&expected);
    try testing.expectEqual(shard_count + 1, hook.remote.stats().shards_fetched);
    const restored = try std.Io.Dir.cwd().readFileAlloc(io, shard, testing.allocator, .unlimited);
    defer testing.allocator.free(restored);
    try testing.expectEqualSlices(u8, original, restored);
}
