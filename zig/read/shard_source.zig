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
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const cache_files = @import("cache_files.zig");
const open_shards = @import("open_shards.zig");

pub const Error = cache_files.Error;

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

    /// Checks every shard `listed` in the manifest, in the shards directory
    /// of the cache at `cache_path` (open as `cache_dir`): opens it, checks its
    /// length (and with `validate_hashes` its SHA-256) against its entry and
    /// notes its inode; the file stays open if `set` has room. On failure
    /// nothing stays open.
    pub fn open(
        allocator: std.mem.Allocator,
        set: *open_shards.Set,
        cache_dir: std.Io.Dir,
        cache_path: []const u8,
        listed: []const manifest.Shard,
        validate_hashes: bool,
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
        var checked: usize = 0;
        errdefer for (handles[0..checked]) |*handle| set.forget(handle);
        for (
            listed,
            byte_lens,
            compressions,
            handles,
            0..,
        ) |entry, *len, *stored_as, *handle, index| {
            assert(std.mem.eql(u8, entry.name, cache_layout.ShardName.of(index).slice()));
            const file = try checkShard(set, dir_path, entry, validate_hashes, diagnostic);
            handle.* = .init(.{ .inode = file.inode, .length = entry.byte_len });
            set.adopt(handle, file.file);
            checked += 1;
            len.* = entry.byte_len;
            stored_as.* = switch (entry.compression.algo) {
                .none => .none,
                .lz4 => .lz4,
            };
        }
        assert(checked == listed.len);
        return .{
            .allocator = allocator,
            .byte_lens = byte_lens,
            .compressions = compressions,
            .handles = handles,
            .dir_path = dir_path,
            .set = set,
        };
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

    /// Opens one listed shard and checks it against its entry.
    fn checkShard(
        set: *open_shards.Set,
        dir_path: []const u8,
        entry: manifest.Shard,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!CheckedShard {
        assert(entry.name.len > 0 and entry.name.len <= cache_layout.shard_name_bytes_max);
        const io = system.io();
        const shard_file = try set.openFile(dir_path, entry.name, diagnostic);
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
        if (validate_hashes) {
            var name_buffer: [64]u8 = undefined;
            const what = std.fmt.bufPrint(
                &name_buffer,
                "shards/{s}",
                .{entry.name},
            ) catch "a shard";
            try cache_files.checkFileHash(shard_file, what, entry.sha256, diagnostic);
        }
        return .{ .file = shard_file, .inode = actual.inode };
    }

    pub fn close(source: *ShardSource) void {
        assert(source.handles.len == source.byte_lens.len);
        assert(source.compressions.len == source.byte_lens.len);
        for (source.handles) |*handle| source.set.forget(handle);
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
        const location: open_shards.Location = .{ .dir = source.dir_path, .shard_id = shard_id };
        return source.set.pin(handle, location, diagnostic);
    }

    pub fn unpin(source: *const ShardSource, shard_id: u64) void {
        assert(shard_id < source.count());
        open_shards.Set.unpin(&source.handles[@intCast(shard_id)]);
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
        if (builtin.os.tag != .linux) return;
        const handle = &source.handles[@intCast(shard_id)];
        const file = source.set.tryPin(handle) orelse return;
        defer open_shards.Set.unpin(handle);
        const linux = std.os.linux;
        _ = linux.fadvise(file.handle, @intCast(offset), @intCast(len), linux.POSIX_FADV.WILLNEED);
    }
};
