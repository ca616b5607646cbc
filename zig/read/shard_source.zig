//! A cache's shard files as its readers reach them: by shard id.
//!
//! A record read touches a shard's bytes only through `readExactly` (an exact
//! positional read) and knows of a shard only its manifest entry's length and
//! compression; how a shard id becomes bytes is this file's alone. Every shard is
//! opened (and its length, and when asked its SHA-256, checked against the
//! manifest) when the cache is, and closed with it.
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

pub const Error = cache_files.Error;

pub const ShardSource = struct {
    allocator: std.mem.Allocator,
    /// Per shard, from its manifest entry: its length in bytes, which every
    /// index row is checked against before the shard is read.
    byte_lens: []u64,
    /// Per shard, from its manifest entry: how its payloads are stored.
    compressions: []shard_record.Compression,
    /// Per shard, its file, open for reading while the source is.
    files: []std.Io.File,

    /// Opens every shard `listed` in the manifest, in `cache_dir`'s shards
    /// directory, and checks its length (and with `validate_hashes` its
    /// SHA-256) against its entry. On failure nothing stays open.
    pub fn open(
        allocator: std.mem.Allocator,
        cache_dir: std.Io.Dir,
        listed: []const manifest.Shard,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!ShardSource {
        // A parsed manifest caps the shards and names each by its position.
        assert(listed.len <= manifest.shards_max);
        const io = system.io();
        const byte_lens = try allocator.alloc(u64, listed.len);
        errdefer allocator.free(byte_lens);
        const compressions = try allocator.alloc(shard_record.Compression, listed.len);
        errdefer allocator.free(compressions);
        const files = try allocator.alloc(std.Io.File, listed.len);
        errdefer allocator.free(files);
        var shards_dir = cache_dir.openDir(io, cache_layout.shards_dir, .{}) catch |err| {
            diagnostic.set(
                "I/O error: cannot open the shards directory: {f}",
                .{error_words.of(err)},
            );
            return cache_files.fileFailure(err);
        };
        defer shards_dir.close(io);
        var opened: usize = 0;
        errdefer for (files[0..opened]) |opened_file| opened_file.close(io);
        for (listed, byte_lens, compressions, files, 0..) |entry, *len, *stored_as, *file, index| {
            assert(std.mem.eql(u8, entry.name, cache_layout.ShardName.of(index).slice()));
            file.* = try openShard(shards_dir, entry, validate_hashes, diagnostic);
            opened += 1;
            len.* = entry.byte_len;
            stored_as.* = switch (entry.compression.algo) {
                .none => .none,
                .lz4 => .lz4,
            };
        }
        assert(opened == listed.len);
        return .{
            .allocator = allocator,
            .byte_lens = byte_lens,
            .compressions = compressions,
            .files = files,
        };
    }

    /// Opens one listed shard and checks it against its entry.
    fn openShard(
        shards_dir: std.Io.Dir,
        entry: manifest.Shard,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!std.Io.File {
        assert(entry.name.len > 0 and entry.name.len <= cache_layout.shard_name_bytes_max);
        const io = system.io();
        const shard_file = shards_dir.openFile(io, entry.name, .{}) catch |err| {
            diagnostic.set(
                "I/O error: cannot open shards/{s}: {f}",
                .{ entry.name, error_words.of(err) },
            );
            return cache_files.fileFailure(err);
        };
        errdefer shard_file.close(io);
        skipAccessTimes(shard_file);
        const actual = file_status.length(shard_file) catch |err| {
            diagnostic.set(
                "I/O error: cannot stat shards/{s}: {f}",
                .{ entry.name, error_words.of(err) },
            );
            return error.Io;
        };
        if (actual != entry.byte_len) {
            diagnostic.set(
                "shard length mismatch: shards/{s} has {d} bytes but the manifest says {d}",
                .{ entry.name, actual, entry.byte_len },
            );
            return error.InvalidCache;
        }
        assert(actual == entry.byte_len);
        if (validate_hashes) {
            var name_buffer: [64]u8 = undefined;
            const what = std.fmt.bufPrint(
                &name_buffer,
                "shards/{s}",
                .{entry.name},
            ) catch "a shard";
            try cache_files.checkFileHash(shard_file, what, entry.sha256, diagnostic);
        }
        return shard_file;
    }

    pub fn close(source: *ShardSource) void {
        assert(source.files.len == source.byte_lens.len);
        assert(source.compressions.len == source.byte_lens.len);
        const io = system.io();
        for (source.files) |shard_file| shard_file.close(io);
        source.allocator.free(source.files);
        source.allocator.free(source.compressions);
        source.allocator.free(source.byte_lens);
        source.* = undefined;
    }

    /// How many shards the manifest lists.
    pub fn count(source: *const ShardSource) u64 {
        assert(source.byte_lens.len == source.files.len);
        return source.byte_lens.len;
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
        const shard_file = source.files[@intCast(shard_id)];
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

    /// Shard `shard_id`'s open file, for a mapping of it.
    pub fn fileOf(source: *const ShardSource, shard_id: u64) std.Io.File {
        assert(shard_id < source.count());
        return source.files[@intCast(shard_id)];
    }

    /// Asks the kernel to start reading a range of shard `shard_id` into the
    /// page cache, so a later read finds it there. Only a hint: failures are
    /// ignored.
    pub fn prefetch(source: *const ShardSource, shard_id: u64, offset: u64, len: u64) void {
        assert(offset + len <= source.byteLen(shard_id));
        if (builtin.os.tag != .linux) return;
        const linux = std.os.linux;
        const handle = source.files[@intCast(shard_id)].handle;
        _ = linux.fadvise(handle, @intCast(offset), @intCast(len), linux.POSIX_FADV.WILLNEED);
    }
};

/// Asks that reads of a shard leave its access time alone: a shuffled pass
/// reads once per sample, and each read otherwise has the kernel consider
/// an access time update. Granted only to the file's owner; a hint, so a
/// refusal changes nothing.
fn skipAccessTimes(file: std.Io.File) void {
    if (builtin.os.tag != .linux) return;
    const linux = std.os.linux;
    const flags = linux.fcntl(file.handle, linux.F.GETFL, 0);
    if (linux.errno(flags) != .SUCCESS) return;
    const noatime: u32 = @bitCast(linux.O{ .NOATIME = true });
    _ = linux.fcntl(file.handle, linux.F.SETFL, flags | noatime);
}
