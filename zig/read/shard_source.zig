//! A cache's shard files as its readers reach them: by shard id.
//!
//! A record read touches a shard's bytes only through `readExactly` (an exact
//! positional read) and knows of a shard only its manifest entry's length and
//! compression (`byteLen`, `byteLens`, `compression`); how a shard id becomes
//! bytes is this file's alone, so reading shards from remote storage changes
//! this file, not the record read. Every shard is opened when the cache is,
//! its length (and when asked its SHA-256) checked against the manifest, and
//! its inode noted; its file then stays open only while the process's bounded
//! set of open shards keeps it (`open_shards.zig`), and a read reopens it,
//! checked to be the same file, when it needs it again.
//!
//! A cache read from object storage (`Origin`, `remote_cache.zig`) may lack
//! shards at open: the first read that needs one fetches it through the fetch
//! hook (`remote.zig`: checked against its SHA-256, then renamed into place)
//! and then opens it as any other. A shard already in the folder is checked
//! as a local cache's is. Such a cache's shards may be evicted to keep the
//! byte budget (`shard_budget.zig`): its `Resident` lets the evicter close
//! a file no read pins, and a read that finds its shard gone fetches it again.
//! A reader that fetches shards ahead of need (`fetch_ahead.zig`) claims each
//! it has queued (`claimAhead`); a read that needs a claimed shard waits for
//! that fetch instead of starting its own, and fetches it itself only if the
//! claim is dropped without the shard.
const std = @import("std");
const assert = std.debug.assert;
const builtin = @import("builtin");
const system = @import("../base/system.zig");
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const shard_record = @import("../format/shard_record.zig");
const file_status = @import("../base/file_status.zig");
const positional_read = @import("../base/positional_read.zig");
const error_words = @import("../base/error_words.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_files = @import("cache_files.zig");
const open_shards = @import("open_shards.zig");
const remote_module = @import("remote.zig");
const sha256 = @import("../codec/sha256.zig");

pub const Error = cache_files.Error;

/// Where a remote cache's missing shards come from: its URL, through `remote`.
pub const Origin = struct { remote: *remote_module.Remote, url: []const u8 };

/// A remote cache's shards: which are in its folder, and what a fetch checks.
const RemoteShards = struct {
    remote: *remote_module.Remote,
    url: []u8,
    /// The cache's local folder (the shards directory's parent).
    folder: []u8,
    /// Per shard: its file is in the folder and its handle knows its identity.
    present: []std.atomic.Value(bool),
    /// Shards not present.
    missing: std.atomic.Value(u64) = .init(0),
    sha256s: [][sha256.digest_length]u8,
    /// Per shard: readers that have queued a fetch of it ahead of need.
    ahead: []std.atomic.Value(u32),
    /// The shard source's handles and set, which an eviction closes files of.
    handles: []open_shards.Handle,
    set: *open_shards.Set,
    /// Listed with `remote` while the cache is open (`ShardSource.open` to `close`).
    resident: remote_module.Resident = undefined,
    /// Orders marking a shard present or absent, and dropping claims.
    mutex: std.Io.Mutex = .init,
    /// Broadcast when a shard is marked present or a claim is dropped.
    changed: std.Io.Condition = .init,

    fn create(
        allocator: std.mem.Allocator,
        origin: Origin,
        cache_path: []const u8,
        listed: []const manifest.Shard,
        handles: []open_shards.Handle,
        set: *open_shards.Set,
    ) error{OutOfMemory}!*RemoteShards {
        const shards = try allocator.create(RemoteShards);
        errdefer allocator.destroy(shards);
        const url = try allocator.dupe(u8, origin.url);
        errdefer allocator.free(url);
        const folder = try allocator.dupe(u8, cache_path);
        errdefer allocator.free(folder);
        const present = try allocator.alloc(std.atomic.Value(bool), listed.len);
        errdefer allocator.free(present);
        const sha256s = try allocator.alloc([sha256.digest_length]u8, listed.len);
        errdefer allocator.free(sha256s);
        const ahead = try allocator.alloc(std.atomic.Value(u32), listed.len);
        for (present, sha256s, ahead, listed) |*flag, *digest, *claims, entry| {
            flag.* = .init(true);
            digest.* = entry.sha256;
            claims.* = .init(0);
        }
        origin.remote.acquire();
        shards.* = .{
            .remote = origin.remote,
            .url = url,
            .folder = folder,
            .present = present,
            .sha256s = sha256s,
            .handles = handles,
            .set = set,
            .ahead = ahead,
        };
        shards.resident = .{ .context = shards, .folder = shards.folder, .release = release };
        return shards;
    }

    /// `Resident.release`: lets go of shard `shard_id` unless a read pins it.
    fn release(context: *anyopaque, shard_id: u64) bool {
        const shards: *RemoteShards = @ptrCast(@alignCast(context));
        assert(shard_id < shards.present.len);
        const index: usize = @intCast(shard_id);
        const io = system.io();
        shards.mutex.lockUncancelable(io);
        defer shards.mutex.unlock(io);
        if (!shards.set.closeUnpinned(&shards.handles[index])) return false;
        shards.markAbsent(index);
        return true;
    }

    /// Notes that shard `index` is no longer in the folder (evicted, or gone
    /// before it could be opened); counted in `missing` once.
    fn markAbsent(shards: *RemoteShards, index: usize) void {
        if (shards.present[index].cmpxchgStrong(true, false, .acq_rel, .monotonic) == null) {
            _ = shards.missing.fetchAdd(1, .acq_rel);
        }
    }

    fn destroy(shards: *RemoteShards, allocator: std.mem.Allocator) void {
        shards.remote.release();
        for (shards.ahead) |claims| assert(claims.load(.monotonic) == 0);
        allocator.free(shards.ahead);
        allocator.free(shards.sha256s);
        allocator.free(shards.present);
        allocator.free(shards.folder);
        allocator.free(shards.url);
        allocator.destroy(shards);
    }
};

pub const ShardSource = struct {
    allocator: std.mem.Allocator,
    /// Per shard, from its manifest entry: its length in bytes, which every
    /// index row is checked against before the shard is read.
    byte_lens: []u64,
    /// Per shard, from its manifest entry: how its payloads are stored.
    compressions: []shard_record.Compression,
    /// Per shard, its place in `set`: its file while the set keeps it open.
    handles: []open_shards.Handle,
    /// The shards directory, absolute where it resolves: where files reopen.
    dir_path: []u8,
    set: *open_shards.Set,
    /// Set for a cache read from object storage.
    remote: ?*RemoteShards = null,

    /// Checks every shard `listed` in the manifest, in the shards directory
    /// of the cache at `cache_path` (open as `cache_dir`): opens it, checks its
    /// length (and with `validate_hashes` its SHA-256) against its entry and
    /// notes its inode; the file stays open if `set` has room. With `origin`
    /// (a remote cache's folder) a shard not yet in the folder is left to be
    /// fetched by the first read that needs it. On failure nothing stays open.
    pub fn open(
        allocator: std.mem.Allocator,
        set: *open_shards.Set,
        cache_dir: std.Io.Dir,
        cache_path: []const u8,
        listed: []const manifest.Shard,
        validate_hashes: bool,
        origin: ?Origin,
        diagnostic: *Diagnostic,
    ) Error!ShardSource {
        // A parsed manifest caps the shards and names each by its position.
        assert(listed.len <= manifest.shards_max);
        const byte_lens = try allocator.alloc(u64, listed.len);
        errdefer allocator.free(byte_lens);
        const compressions = try allocator.alloc(shard_record.Compression, listed.len);
        errdefer allocator.free(compressions);
        const handles = try allocator.alloc(open_shards.Handle, listed.len);
        errdefer allocator.free(handles);
        const dir_path = try shardsPath(allocator, cache_dir, cache_path, diagnostic);
        errdefer allocator.free(dir_path);
        const remote: ?*RemoteShards = if (origin) |from|
            try RemoteShards.create(allocator, from, cache_path, listed, handles, set)
        else
            null;
        errdefer if (remote) |shards| shards.destroy(allocator);
        var checked: usize = 0;
        errdefer for (handles[0..checked]) |*handle| set.forget(handle);
        for (listed, byte_lens, compressions, 0..) |entry, *len, *stored_as, index| {
            assert(std.mem.eql(u8, entry.name, cache_layout.ShardName.of(index).slice()));
            const handle = &handles[index];
            handle.* = .init(.{ .inode = 0, .length = entry.byte_len });
            if (remote != null and !present(dir_path, entry.name)) {
                remote.?.present[index] = .init(false);
                _ = remote.?.missing.fetchAdd(1, .monotonic);
            } else {
                const file = try checkShard(set, dir_path, remote != null, .{
                    .name = entry.name,
                    .byte_len = entry.byte_len,
                    .sha256 = if (validate_hashes) entry.sha256 else null,
                }, diagnostic);
                handle.expected.inode = file.inode;
                if (remote != null and remote.?.remote.budget_bytes != null) {
                    file.file.close(system.io());
                } else {
                    set.adopt(handle, file.file);
                }
            }
            checked += 1;
            len.* = entry.byte_len;
            stored_as.* = switch (entry.compression.algo) {
                .none => .none,
                .lz4 => .lz4,
            };
        }
        assert(checked == listed.len);
        if (remote) |shards| try shards.remote.addResident(&shards.resident);
        return .{
            .allocator = allocator,
            .byte_lens = byte_lens,
            .compressions = compressions,
            .handles = handles,
            .dir_path = dir_path,
            .set = set,
            .remote = remote,
        };
    }

    /// Whether `dir_path/name` exists.
    fn present(dir_path: []const u8, name: []const u8) bool {
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const path = std.fmt.bufPrint(&buffer, "{s}/{s}", .{ dir_path, name }) catch return true;
        std.Io.Dir.cwd().access(system.io(), path, .{}) catch |err| {
            return !file_status.missing(err);
        };
        return true;
    }

    /// The shards directory of the cache at `cache_path`: absolute, so that a
    /// file reopens from the same place after the process changes directory,
    /// where the path resolves; as given otherwise. Fails if the directory
    /// cannot be opened.
    fn shardsPath(
        allocator: std.mem.Allocator,
        cache_dir: std.Io.Dir,
        cache_path: []const u8,
        diagnostic: *Diagnostic,
    ) Error![]u8 {
        const io = system.io();
        var shards_dir = cache_dir.openDir(io, cache_layout.shards_dir, .{}) catch |err| {
            diagnostic.set(
                "I/O error: cannot open the shards directory: {f}{f}",
                .{ error_words.of(err), open_shards.process.heldWords(err) },
            );
            return cache_files.fileFailure(err);
        };
        defer shards_dir.close(io);
        const joined = try std.fs.path.join(allocator, &.{ cache_path, cache_layout.shards_dir });
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const resolved_len = std.Io.Dir.cwd().realPathFile(io, joined, &buffer) catch return joined;
        defer allocator.free(joined);
        return allocator.dupe(u8, buffer[0..resolved_len]);
    }

    const CheckedShard = struct { file: std.Io.File, inode: std.Io.File.INode };

    /// What a shard's check compares: its manifest entry's length, and its
    /// SHA-256 when the whole file is to be hashed.
    const Listed = struct {
        name: []const u8,
        byte_len: u64,
        sha256: ?[sha256.digest_length]u8 = null,
    };

    /// Opens one listed shard and checks it against its entry.
    /// A remote cache's shard (`shared`) is held with a shared lock while open.
    fn checkShard(
        set: *open_shards.Set,
        dir_path: []const u8,
        shared: bool,
        entry: Listed,
        diagnostic: *Diagnostic,
    ) Error!CheckedShard {
        assert(entry.name.len > 0 and entry.name.len <= cache_layout.shard_name_bytes_max);
        const io = system.io();
        const shard_file = try set.openFile(dir_path, entry.name, shared, diagnostic);
        errdefer shard_file.close(io);
        const actual = file_status.identity(shard_file) catch |err| {
            diagnostic.set(
                "I/O error: cannot stat shards/{s}: {f}",
                .{ entry.name, error_words.of(err) },
            );
            return error.Io;
        };
        if (actual.length != entry.byte_len) {
            diagnostic.set(
                "shard length mismatch: shards/{s} has {d} bytes but the manifest says {d}",
                .{ entry.name, actual.length, entry.byte_len },
            );
            return error.InvalidCache;
        }
        if (entry.sha256) |expected| {
            var name_buffer: [64]u8 = undefined;
            const what = std.fmt.bufPrint(
                &name_buffer,
                "shards/{s}",
                .{entry.name},
            ) catch "a shard";
            try cache_files.checkFileHash(shard_file, what, expected, diagnostic);
        }
        return .{ .file = shard_file, .inode = actual.inode };
    }

    pub fn close(source: *ShardSource) void {
        assert(source.handles.len == source.byte_lens.len);
        assert(source.compressions.len == source.byte_lens.len);
        if (source.remote) |shards| shards.remote.removeResident(&shards.resident);
        for (source.handles) |*handle| source.set.forget(handle);
        if (source.remote) |shards| shards.destroy(source.allocator);
        source.allocator.free(source.handles);
        source.allocator.free(source.dir_path);
        source.allocator.free(source.compressions);
        source.allocator.free(source.byte_lens);
        source.* = undefined;
    }

    /// How many shards the manifest lists.
    pub fn count(source: *const ShardSource) u64 {
        assert(source.byte_lens.len == source.handles.len);
        return source.byte_lens.len;
    }

    /// Every shard's listed length, by shard id: what index rows are checked against.
    pub fn byteLens(source: *const ShardSource) []const u64 {
        assert(source.byte_lens.len == source.handles.len);
        return source.byte_lens;
    }

    pub fn byteLen(source: *const ShardSource, shard_id: u64) u64 {
        assert(shard_id < source.count());
        return source.byte_lens[@intCast(shard_id)];
    }

    pub fn compression(source: *const ShardSource, shard_id: u64) shard_record.Compression {
        assert(shard_id < source.count());
        return source.compressions[@intCast(shard_id)];
    }

    /// Fills `buffer` with shard `shard_id`'s bytes from `offset`, a range the
    /// caller checked to lie inside the shard's listed length. A shard that ends
    /// sooner (shortened since it was opened) makes the cache invalid.
    pub fn readExactly(
        source: *const ShardSource,
        shard_id: u64,
        buffer: []u8,
        offset: u64,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(offset + buffer.len <= source.byteLen(shard_id));
        const shard_file = try source.pin(shard_id, diagnostic);
        defer source.unpin(shard_id);
        return source.readFrom(shard_file, shard_id, buffer, offset, diagnostic);
    }

    /// `readExactly` from `shard_file`, shard `shard_id`'s file, which the
    /// caller holds pinned (`pin`).
    pub fn readFrom(
        source: *const ShardSource,
        shard_file: std.Io.File,
        shard_id: u64,
        buffer: []u8,
        offset: u64,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(offset + buffer.len <= source.byteLen(shard_id));
        const read = positional_read.readAll(shard_file, buffer, offset) catch |err| {
            diagnostic.set(
                "I/O error: cannot read shard {d}: {f}",
                .{ shard_id, error_words.of(err) },
            );
            return error.Io;
        };
        assert(read <= buffer.len);
        if (read != buffer.len) {
            diagnostic.set(
                "shard {d} ended after {d} of {d} bytes",
                .{ shard_id, read, buffer.len },
            );
            return error.InvalidCache;
        }
    }

    /// Shard `shard_id`'s file, opened if the set does not hold it, kept open
    /// until `unpin` (for a mapping of it, or a read).
    pub fn pin(
        source: *const ShardSource,
        shard_id: u64,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        assert(shard_id < source.count());
        const handle = &source.handles[@intCast(shard_id)];
        const shards = source.remote orelse {
            const location: open_shards.Location = .{
                .dir = source.dir_path,
                .shard_id = shard_id,
            };
            return source.set.pin(handle, location, diagnostic);
        };
        return source.pinRemote(shards, shard_id, diagnostic);
    }

    /// Fetches and opens again a shard evicted between its fetch (or its
    /// last open) and this one, at most this many times.
    const remote_attempts_max = 8;

    /// `pin` for a remote cache's shard: fetched if absent, and fetched again
    /// if it was evicted (or replaced by a later fetch) before it could be opened.
    fn pinRemote(
        source: *const ShardSource,
        shards: *RemoteShards,
        shard_id: u64,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        const index: usize = @intCast(shard_id);
        const handle = &source.handles[index];
        const location: open_shards.Location = .{
            .dir = source.dir_path,
            .shard_id = shard_id,
            .shared = true,
        };
        for (0..remote_attempts_max) |attempt| {
            const last = attempt + 1 == remote_attempts_max;
            if (!shards.present[index].load(.acquire)) {
                const placed = try source.fetchNeeded(shards, shard_id, diagnostic);
                if (!placed and !last) continue;
                if (!placed) return error.InvalidCache;
            }
            if (source.set.pin(handle, location, diagnostic)) |file| {
                return file;
            } else |err| {
                if (err != error.InvalidCache or last) return err;
                shards.markAbsent(index);
            }
        }
        unreachable;
    }

    /// Brings remote shard `shard_id`, which a read needs now, into the
    /// folder: waits for a fetch of it queued ahead of need while one is
    /// claimed, else fetches it in a slot of the hook's `max_in_flight`:
    /// false when it was evicted again before it could be opened.
    fn fetchNeeded(
        source: *const ShardSource,
        shards: *RemoteShards,
        shard_id: u64,
        diagnostic: *Diagnostic,
    ) Error!bool {
        const index: usize = @intCast(shard_id);
        const io = system.io();
        if (shards.ahead[index].load(.acquire) > 0) {
            shards.mutex.lockUncancelable(io);
            defer shards.mutex.unlock(io);
            while (shards.ahead[index].load(.acquire) > 0 and
                !shards.present[index].load(.acquire))
            {
                shards.changed.waitUncancelable(io, &shards.mutex);
            }
        }
        if (shards.present[index].load(.acquire)) return true;
        const remote = shards.remote;
        remote.slots.acquireNeeded(@atomicLoad(u32, &remote.max_in_flight, .monotonic));
        defer remote.slots.release();
        const outcome = try source.fetch(shards, shard_id, null, null, diagnostic) orelse
            return false;
        assert(outcome != .no_room); // only a fetch ahead of need is refused room
        return true;
    }

    /// The hook of a remote cache; null for a local one.
    pub fn remoteHook(source: *const ShardSource) ?*remote_module.Remote {
        const shards = source.remote orelse return null;
        return shards.remote;
    }

    /// A remote cache's local folder (`Target.dir_path` of its files); null
    /// for a local cache.
    pub fn remoteFolder(source: *const ShardSource) ?[]const u8 {
        const shards = source.remote orelse return null;
        return shards.folder;
    }

    /// How many shards of a remote cache are not in its folder yet.
    pub fn missingCount(source: *const ShardSource) u64 {
        const shards = source.remote orelse return 0;
        return shards.missing.load(.acquire);
    }

    /// Whether shard `shard_id` of a remote cache is not in its folder yet.
    pub fn missing(source: *const ShardSource, shard_id: u64) bool {
        assert(shard_id < source.count());
        const shards = source.remote orelse return false;
        return !shards.present[@intCast(shard_id)].load(.acquire);
    }

    /// Says that a fetch of remote shard `shard_id` ahead of need is queued:
    /// until `dropAhead`, a read that needs it waits for that fetch.
    pub fn claimAhead(source: *const ShardSource, shard_id: u64) void {
        assert(shard_id < source.count());
        const shards = source.remote.?;
        _ = shards.ahead[@intCast(shard_id)].fetchAdd(1, .acq_rel);
    }

    /// Ends a claim of `claimAhead`, fetched or not, and wakes the reads waiting on it.
    pub fn dropAhead(source: *const ShardSource, shard_id: u64) void {
        assert(shard_id < source.count());
        const shards = source.remote.?;
        const io = system.io();
        shards.mutex.lockUncancelable(io);
        defer shards.mutex.unlock(io);
        const before = shards.ahead[@intCast(shard_id)].fetchSub(1, .acq_rel);
        assert(before > 0);
        shards.changed.broadcast(io);
    }

    /// Fetches remote shard `shard_id` ahead of need, `positions` stream
    /// positions before its first use, as a read would (`fetch`); the caller
    /// holds a slot (`Remote.slots`). `.no_room`: the budget refused it.
    /// `turn` (`Target.turn`) may not be passed when this returns without
    /// asking for room: the caller passes it then.
    pub fn fetchAhead(
        source: *const ShardSource,
        shard_id: u64,
        positions: u64,
        turn: ?remote_module.Turn,
        diagnostic: *Diagnostic,
    ) Error!remote_module.Outcome {
        assert(shard_id < source.count());
        const shards = source.remote.?;
        if (shards.present[@intCast(shard_id)].load(.acquire)) return .present;
        // Evicted again before it could be opened: the read will fetch it.
        return try source.fetch(shards, shard_id, positions, turn, diagnostic) orelse .present;
    }

    /// Brings remote shard `shard_id` into the folder (`Remote.fetchChecked`:
    /// one fetch of it at a time in the process, checked against its SHA-256
    /// before it takes its name), then notes its identity as `open` would.
    /// `ahead`: see `Target.ahead`. Null when it was evicted again before it
    /// could be opened.
    fn fetch(
        source: *const ShardSource,
        shards: *RemoteShards,
        shard_id: u64,
        ahead: ?u64,
        turn: ?remote_module.Turn,
        diagnostic: *Diagnostic,
    ) Error!?remote_module.Outcome {
        const index: usize = @intCast(shard_id);
        const io = system.io();
        const name = cache_layout.ShardName.of(shard_id);
        var relative_buffer: [cache_layout.shard_name_bytes_max + 8]u8 = undefined;
        const relative = std.fmt.bufPrint(
            &relative_buffer,
            "{s}/{s}",
            .{ cache_layout.shards_dir, name.slice() },
        ) catch unreachable;
        var folder = std.Io.Dir.cwd().openDir(io, shards.folder, .{}) catch |err| {
            const words = error_words.of(err);
            diagnostic.set("I/O error: cannot open {s}: {f}", .{ shards.folder, words });
            return cache_files.fileFailure(err);
        };
        defer folder.close(io);
        const outcome = try shards.remote.fetchChecked(.{
            .url = shards.url,
            .name = relative,
            .dir = folder,
            .dir_path = shards.folder,
            .byte_len = source.byte_lens[index],
            .sha256 = shards.sha256s[index],
            .shard = true,
            .ahead = ahead,
            .turn = turn,
        }, diagnostic);
        if (outcome == .not_found) {
            diagnostic.set("{s}: not found (the manifest lists it)", .{relative});
            return error.InvalidCache;
        }
        if (outcome == .no_room) return .no_room;
        const listed: Listed = .{ .name = name.slice(), .byte_len = source.byte_lens[index] };
        const file = checkShard(source.set, source.dir_path, true, listed, diagnostic) catch |err| {
            if (err == error.InvalidCache) return null;
            return err;
        };
        shards.mutex.lockUncancelable(io);
        defer shards.mutex.unlock(io);
        if (shards.present[index].load(.monotonic)) {
            file.file.close(io);
            return outcome;
        }
        const handle = &source.handles[index];
        handle.expected.inode = file.inode;
        if (source.evictable()) file.file.close(io) else source.set.adopt(handle, file.file);
        shards.present[index].store(true, .release);
        _ = shards.missing.fetchSub(1, .release);
        shards.changed.broadcast(io);
        return outcome;
    }

    /// Whether other processes may evict this cache's shards (a remote cache
    /// read within a byte budget). Its files then stay open only while pinned:
    /// an open file holds its shard's shared lock (`Set.openFile`), and a
    /// process that idles with files open would keep the others from evicting
    /// them. Readers then unpin after each read rather than hold a pin from
    /// one read to the next.
    pub fn evictable(source: *const ShardSource) bool {
        const shards = source.remote orelse return false;
        return shards.remote.budget_bytes != null;
    }

    pub fn unpin(source: *const ShardSource, shard_id: u64) void {
        assert(shard_id < source.count());
        const handle = &source.handles[@intCast(shard_id)];
        open_shards.Set.unpin(handle);
        // A read that pinned it meanwhile keeps it open; its unpin closes it.
        if (source.evictable()) _ = source.set.closeUnpinned(handle);
    }

    /// How long `replaceDamaged` waits for other reads to let go of a shard.
    const release_wait_ms_max = 1000;

    /// A remote cache's shard `shard_id` whose local copy no longer matches
    /// its SHA-256 (damaged on disk since it was fetched and checked): let go
    /// of and deleted, so that the next read fetches it again; true then, and
    /// when another read deleted it first. False for a local cache, a copy
    /// that matches (the record itself is bad) or cannot be checked, and a
    /// file another read of this process pins for longer than a second.
    pub fn replaceDamaged(source: *const ShardSource, shard_id: u64) bool {
        assert(shard_id < source.count());
        const shards = source.remote orelse return false;
        const index: usize = @intCast(shard_id);
        const name = cache_layout.ShardName.of(shard_id);
        const io = system.io();
        var dir = std.Io.Dir.cwd().openDir(io, source.dir_path, .{}) catch return false;
        defer dir.close(io);
        const matches = matches: {
            const file = dir.openFile(io, name.slice(), .{}) catch |err| {
                if (!file_status.missing(err)) return false;
                break :matches false; // deleted by another read's repair
            };
            defer file.close(io);
            var diagnostic: Diagnostic = .{};
            const digest = cache_files.fileHash(file, name.slice(), &diagnostic) catch
                return false;
            break :matches std.mem.eql(u8, &digest, &shards.sha256s[index]);
        };
        if (matches) return false;
        // Other reads of the shard let go of it within a chunk's read; a
        // payload handed out in place may hold it longer: then give up.
        var waited_ms: u32 = 0;
        while (!RemoteShards.release(shards, shard_id)) : (waited_ms += 1) {
            if (waited_ms >= release_wait_ms_max) return false;
            io.sleep(.fromMilliseconds(1), .awake) catch {};
        }
        var buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const dir_path = std.fmt.bufPrint(&buffer, "{s}/", .{source.dir_path}) catch return false;
        directory_entries.deleteFile(io, dir, dir_path, name.slice()) catch |err| {
            return file_status.missing(err);
        };
        return true;
    }

    /// Says that a read planned under `ticket` (`open_shards.Set.ticket`)
    /// will read shard `shard_id`; `retire` says it is done. Only orders which
    /// file the set closes first.
    pub fn announce(source: *const ShardSource, shard_id: u64, ticket: u64) void {
        assert(shard_id < source.count());
        open_shards.Set.announce(&source.handles[@intCast(shard_id)], ticket);
    }

    pub fn retire(source: *const ShardSource, shard_id: u64) void {
        assert(shard_id < source.count());
        open_shards.Set.retire(&source.handles[@intCast(shard_id)]);
    }

    /// Asks the kernel to start reading a range of shard `shard_id` into the
    /// page cache, so a later read finds it there. Only a hint: failures are
    /// ignored, and a shard the set does not hold open is left alone.
    pub fn prefetch(source: *const ShardSource, shard_id: u64, offset: u64, len: u64) void {
        assert(offset + len <= source.byteLen(shard_id));
        if (builtin.os.tag != .linux or source.evictable()) return;
        const handle = &source.handles[@intCast(shard_id)];
        const file = source.set.tryPin(handle) orelse return;
        defer open_shards.Set.unpin(handle);
        const linux = std.os.linux;
        _ = linux.fadvise(file.handle, @intCast(offset), @intCast(len), linux.POSIX_FADV.WILLNEED);
    }
};
