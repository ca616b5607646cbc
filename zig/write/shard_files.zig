//! The shard files of a cache being written, as the committer appends to them.
//!
//! Each record is placed after the open shard's bytes (`place`); a record that
//! would take the shard past `max_shard_bytes` closes it first. The committer's
//! bytes go out in runs (`Segments`): framed records and, between them, large
//! payloads written from where the caller pushed them, a few pieces per write
//! call and a bounded number of bytes per call (`writeAllAt`). Each shard is
//! hashed on the pool as it grows (`ShardHasher`, told how far it has been
//! written); a closed shard's fsync goes to the background (`FileSyncs`), and
//! `finish` collects the digests into the manifest's shard entries.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const thread_pool = @import("../base/thread_pool.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const manifest = @import("../format/manifest.zig");
const ShardName = @import("../format/cache_layout.zig").ShardName;
const ShardHasher = @import("shard_hasher.zig").ShardHasher;
const PageCachePolicy = @import("page_cache_policy.zig").PageCachePolicy;
const file_syncs = @import("file_syncs.zig");
const FileSyncs = file_syncs.FileSyncs;
const Stats = @import("writer_stats.zig").Stats;

pub const Error = error{ Io, OutOfMemory, InvalidInput };

/// Where a record goes: its shard and its offset in it.
pub const Place = struct { shard_id: u64, offset: u64 };

/// The shard being appended to by the committer.
const OpenShard = struct {
    file: std.Io.File,
    byte_len: u64 = 0,
    uncompressed_byte_len: u64 = 0,
    /// Bytes before this offset have been handed to the disk (`startWriteback`).
    writeback_start: u64 = 0,
    /// Hashes the shard on the pool as it grows; one of `hashers`.
    hasher: *ShardHasher,
    /// The lengths of the records placed in the shard: written (`byte_len`),
    /// or still in the committer's run.
    record_bytes: u64 = 0,
};

pub const ShardFiles = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    /// The writer's background fsyncs, which closed shards go to.
    syncs: *FileSyncs,
    stats: *Stats,
    max_shard_bytes: u64,
    /// Every shard's compression, as the manifest records it.
    compression: manifest.Compression,
    /// The most shards the cache may have; only a test sets another.
    shards_max: u64 = manifest.shards_max,
    /// Which closed shards keep their pages in the page cache.
    page_cache: PageCachePolicy,

    // Touched only by the single active committer, then by `finish`.
    shard: ?OpenShard = null,
    /// The closed shards' manifest entries, in order; their names point at
    /// `names` once the list stops growing (`closeLast`), and their digests
    /// come from their hashers (`collectDigests`).
    shards: std.ArrayList(manifest.Shard) = .empty,
    names: std.ArrayList(ShardName) = .empty,
    /// One per shard, in shard order; appended by the committer, read by
    /// `finish` once `hashing` (the running hash jobs) is done.
    hashers: std.ArrayList(*ShardHasher) = .empty,
    hashing: thread_pool.WaitGroup = .{},

    /// Once no fsync is pending: waits for the hash jobs and frees everything
    /// (an unfinished write's open shard is closed as it is).
    pub fn deinit(files: *ShardFiles) void {
        // The open shard, if any, has the last hasher; every closed one its own.
        const open_count: usize = @intFromBool(files.shard != null);
        assert(files.hashers.items.len == files.shards.items.len + open_count);
        files.hashing.wait();
        for (files.hashers.items) |hasher| hasher.destroy();
        files.hashers.deinit(files.allocator);
        if (files.shard) |*shard| shard.file.close(system.io());
        files.shards.deinit(files.allocator);
        files.names.deinit(files.allocator);
    }

    /// Places a record of `record_len` bytes (`payload_len` of them payload)
    /// after the open shard's bytes and those of `run`, the committer's bytes
    /// not written yet. When the record would take the shard past
    /// `max_shard_bytes`, `run` is written and the shard closed first (a shard
    /// holds at least one record); a shard is opened in `dir` if none is open.
    pub fn place(
        files: *ShardFiles,
        dir: std.Io.Dir,
        run: *Segments,
        record_len: u64,
        payload_len: u64,
        diagnostic: *Diagnostic,
    ) Error!Place {
        // (An lz4 record may be shorter than its payload.)
        assert(files.max_shard_bytes > 0 and record_len > 0);
        if (files.shard) |shard| {
            const would_be = shard.byte_len + run.bytes + record_len;
            if (shard.byte_len + run.bytes > 0 and would_be > files.max_shard_bytes) {
                try files.append(run, diagnostic);
                run.clear();
                try files.close();
            }
        }
        if (files.shard == null) try files.open(dir, diagnostic);
        const shard = &files.shard.?;
        const offset = shard.byte_len + run.bytes;
        // A shard's records lie back to back from its start.
        assert(offset == shard.record_bytes);
        shard.record_bytes += record_len;
        shard.uncompressed_byte_len += payload_len;
        // Within the bound, unless the record alone exceeds it (a shard of its own).
        assert(shard.record_bytes <= files.max_shard_bytes or offset == 0);
        return .{ .shard_id = files.shards.items.len, .offset = offset };
    }

    /// Writes `run` at the open shard's end.
    pub fn append(files: *ShardFiles, run: *const Segments, diagnostic: *Diagnostic) Error!void {
        const bytes = run.bytes;
        if (bytes == 0) return;
        const pieces = run.list.items;
        const shard = &files.shard.?;
        assert(pieces.len > 0 and shard.byte_len + bytes <= shard.record_bytes);
        const write_started = system.monotonicNanoseconds();
        writeAllAt(shard.file, pieces, shard.byte_len) catch |err| {
            diagnostic.set(
                "cannot write shard {d}: {f}",
                .{ files.shards.items.len, error_words.of(err) },
            );
            return error.Io;
        };
        files.stats.disk_write.add(write_started, bytes);
        shard.byte_len += bytes;
        // The run held every record placed since the last write, whole.
        assert(shard.byte_len == shard.record_bytes);
        if (shard.byte_len - shard.writeback_start >= writeback_bytes) {
            durable_files.startWriteback(
                shard.file,
                shard.writeback_start,
                shard.byte_len - shard.writeback_start,
            );
            shard.writeback_start = shard.byte_len;
            shard.hasher.advance(shard.byte_len, false);
        }
    }

    /// Closes the last shard once every record is written; the manifest's
    /// shard entries then name their files.
    pub fn closeLast(files: *ShardFiles) Error!void {
        assert(files.shard != null); // a finished write holds at least one sample
        try files.close();
        assert(files.names.items.len == files.shards.items.len);
        for (files.shards.items, files.names.items) |*shard, *name| shard.name = name.slice();
    }

    /// Waits until every shard is hashed.
    pub fn waitForHashes(files: *ShardFiles) void {
        // While the pool still hashes, this thread does the waiting fsyncs.
        while (files.hashing.pendingCount() > 0) {
            const work = files.syncs.take(null) orelse break;
            work.perform(files.syncs);
        }
        files.hashing.wait();
        assert(files.hashing.pendingCount() == 0);
    }

    /// Once every shard is closed and hashed: their digests into their
    /// manifest entries.
    pub fn collectDigests(files: *ShardFiles, diagnostic: *Diagnostic) Error!void {
        assert(files.shard == null);
        assert(files.hashers.items.len == files.shards.items.len);
        var bytes: u64 = 0;
        for (files.shards.items, files.hashers.items) |*shard, hasher| {
            shard.sha256 = try hasher.result(diagnostic);
            files.stats.hashing.addMeasured(hasher.nanoseconds, shard.byte_len);
            bytes += shard.byte_len;
        }
        // Every byte the committer wrote is in one of the closed shards.
        assert(bytes == files.stats.shard_bytes_committed.load(.monotonic));
    }

    fn open(files: *ShardFiles, dir: std.Io.Dir, diagnostic: *Diagnostic) Error!void {
        assert(files.shard == null);
        assert(files.hashers.items.len == files.shards.items.len);
        const io = system.io();
        try files.checkShardCount(diagnostic);
        const name = ShardName.of(files.shards.items.len);
        const file = dir.createFile(
            io,
            name.slice(),
            .{ .truncate = true, .exclusive = true },
        ) catch |err| {
            diagnostic.set("cannot create shard {s}: {f}", .{ name.slice(), error_words.of(err) });
            return error.Io;
        };
        errdefer file.close(io);
        // A second, read-only handle for the hasher, which reads the shard back.
        const reading = dir.openFile(io, name.slice(), .{}) catch |err| {
            diagnostic.set(
                "cannot open shard {s} to hash it: {f}",
                .{ name.slice(), error_words.of(err) },
            );
            return error.Io;
        };
        const hasher = ShardHasher.create(
            files.allocator,
            files.pool,
            &files.hashing,
            reading,
            name,
        ) catch {
            reading.close(io);
            return error.OutOfMemory;
        };
        files.hashers.append(files.allocator, hasher) catch {
            hasher.destroy();
            return error.OutOfMemory;
        };
        files.shard = .{ .file = file, .hasher = hasher };
    }

    /// Refuses a shard past `shards_max`, as soon as the cache needs it: its
    /// manifest would be larger than a reader accepts.
    fn checkShardCount(files: *const ShardFiles, diagnostic: *Diagnostic) Error!void {
        assert(files.shards_max <= manifest.shards_max);
        if (files.shards.items.len < files.shards_max) return;
        assert(files.shards.items.len == files.shards_max);
        diagnostic.set(
            "the cache needs more than {d} shards, the most one manifest.json can list " ++
                "(a reader refuses manifests over {d} MiB); " ++
                "use a larger max_shard_bytes than {d}",
            .{ files.shards_max, manifest.manifest_bytes_max >> 20, files.max_shard_bytes },
        );
        return error.InvalidInput;
    }

    fn close(files: *ShardFiles) Error!void {
        const shard = files.shard.?;
        files.shard = null;
        // Decided before the hasher and the fsync job can see the shard closed.
        shard.hasher.keep_pages = files.page_cache.keeps(shard.byte_len);
        // Every record placed in the shard has been written.
        assert(shard.byte_len == shard.record_bytes);
        // The closed shards have their hashers; the last hasher is this shard's.
        assert(files.hashers.items.len == files.shards.items.len + 1);
        assert(files.hashers.items[files.shards.items.len] == shard.hasher);
        // Not fsynced on the committing thread, which would stall the ordered
        // commit for the whole flush: a pool job fsyncs and closes the file
        // while writing goes on, and finish() waits for it before anything
        // is published.
        // Each closed shard waiting for its fsync and its hash holds two open
        // files: past a few dozen, finish them here so small shards cannot
        // exhaust the descriptor limit (about a queue's worth, 1024, otherwise).
        const crowded = files.syncs.pending.pendingCount() >= closed_shards_pending_max;
        const what: file_syncs.SyncedFile = .{
            .shard = .{ .index = files.shards.items.len, .hasher = shard.hasher },
        };
        if (crowded) {
            files.syncs.syncAndClose(shard.file, what);
        } else {
            files.syncs.inBackground(shard.file, what);
        }
        try files.names.append(files.allocator, shard.hasher.name);
        try files.shards.append(files.allocator, .{
            .name = &.{}, // pointed at `names` once the list stops growing
            .uncompressed_byte_len = shard.uncompressed_byte_len,
            .byte_len = shard.byte_len,
            .compression = files.compression,
            .sha256 = undefined, // from its hasher in `collectDigests`
        });
        shard.hasher.advanceAs(shard.byte_len, true, crowded);
    }

    const closed_shards_pending_max = 32;
};

/// Consecutive pieces of one shard's bytes; a piece that continues the
/// previous one in memory extends it, so framed records go as one run.
pub const Segments = struct {
    allocator: std.mem.Allocator,
    list: std.ArrayList([]const u8) = .empty,
    bytes: u64 = 0,
    /// Across `clear`s: everything this batch wrote.
    total: u64 = 0,

    pub fn deinit(segments: *Segments) void {
        segments.list.deinit(segments.allocator);
    }

    pub fn append(segments: *Segments, piece: []const u8) error{OutOfMemory}!void {
        assert(segments.bytes <= segments.total);
        if (piece.len == 0) return;
        segments.bytes += piece.len;
        segments.total += piece.len;
        const items = segments.list.items;
        if (items.len > 0 and items[items.len - 1].ptr + items[items.len - 1].len == piece.ptr) {
            items[items.len - 1].len += piece.len;
            return;
        }
        try segments.list.append(segments.allocator, piece);
        assert(segments.list.items.len > 0);
    }

    pub fn clear(segments: *Segments) void {
        segments.list.clearRetainingCapacity();
        segments.bytes = 0;
    }
};

/// Writes `pieces` back to back from `offset`, a few per system call and
/// at most `write_call_bytes_max` bytes per call, resuming after short writes.
fn writeAllAt(file: std.Io.File, pieces: []const []const u8, offset: u64) !void {
    const io = system.io();
    var position = offset;
    var next: usize = 0; // first piece not fully written
    var skip: usize = 0; // bytes of pieces[next] already written
    var vectors: [16][]const u8 = undefined;
    for (pieces) |piece| assert(piece.len > 0); // `Segments` keeps no empty piece
    while (next < pieces.len) {
        const count = @min(vectors.len, pieces.len - next);
        @memcpy(vectors[0..count], pieces[next..][0..count]);
        vectors[0] = vectors[0][skip..];
        var used: usize = 0;
        var room: usize = write_call_bytes_max;
        while (used < count and room > 0) : (used += 1) {
            if (vectors[used].len > room) vectors[used] = vectors[used][0..room];
            room -= vectors[used].len;
        }
        var written = try file.writePositional(io, vectors[0..used], position);
        if (written == 0) return error.WriteZero;
        position += written;
        written += skip;
        while (next < pieces.len and written >= pieces[next].len) {
            written -= pieces[next].len;
            next += 1;
        }
        skip = written;
        assert(next == pieces.len or skip < pieces[next].len);
    }
    assert(skip == 0);
}

/// At most this many bytes per write call: the page cache sizes its folios
/// from each write, and on a virtual machine that hands free memory back to
/// its host, copying into large folios can be slow, while much smaller calls
/// cost more system calls. See docs/runtime.md.
const write_call_bytes_max = 512 << 10;

/// Written shard bytes are handed to the disk in steps of this size as the
/// cache grows, so the fsyncs of `finish` wait for the last step only.
const writeback_bytes = 8 << 20;

test "pieces written at an offset land back to back, more of them than one call takes" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const file = try tmp.dir.createFile(io, "shard.bin", .{ .read = true });
    defer file.close(io);
    var storage: [40][3]u8 = undefined;
    var pieces: [40][]const u8 = undefined;
    var expected: [120]u8 = undefined;
    for (&storage, &pieces, 0..) |*bytes, *piece, i| {
        bytes.* = .{ @intCast(i), @intCast(i + 100), @intCast(i + 200) };
        piece.* = bytes[0 .. 1 + i % 3]; // lengths 1, 2, 3
    }
    var expected_len: usize = 0;
    for (pieces) |piece| {
        @memcpy(expected[expected_len..][0..piece.len], piece);
        expected_len += piece.len;
    }
    try file.writePositionalAll(io, "head", 0);
    try writeAllAt(file, &pieces, 4);
    var buffer: [200]u8 = undefined;
    const read = try tmp.dir.readFile(io, "shard.bin", &buffer);
    try std.testing.expectEqualStrings("head", read[0..4]);
    try std.testing.expectEqualSlices(u8, expected[0..expected_len], read[4..]);
}

test "pieces longer than one call's bytes, and pieces across a call's end, land back to back" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const allocator = std.testing.allocator;
    const file = try tmp.dir.createFile(io, "shard.bin", .{ .read = true });
    defer file.close(io);
    const cap = write_call_bytes_max;
    // Lengths chosen so calls end inside a piece, exactly at a piece's end,
    // and after several pieces.
    const lens = [_]usize{ 7, cap - 7, 3 * cap + 5, 1, cap, 2, cap / 2, cap / 2 + 1 };
    var total: usize = 0;
    for (lens) |len| total += len;
    const expected = try allocator.alloc(u8, total);
    defer allocator.free(expected);
    for (expected, 0..) |*byte, i| byte.* = @truncate(i *% 2654435761 >> 13);
    var pieces: [lens.len][]const u8 = undefined;
    var start: usize = 0;
    for (lens, &pieces) |len, *piece| {
        piece.* = expected[start..][0..len];
        start += len;
    }
    try writeAllAt(file, &pieces, 3);
    const read = try allocator.alloc(u8, total + 3);
    defer allocator.free(read);
    try std.testing.expectEqual(total + 3, try file.readPositionalAll(io, read, 0));
    try std.testing.expectEqualSlices(u8, expected, read[3..]);
}

/// For the tests: a background fsync that fails fails the test run.
fn syncFailed(_: *FileSyncs, diagnostic: *const Diagnostic) void {
    std.debug.panic("a shard's fsync failed: {s}", .{diagnostic.message()});
}

test "the shard after shards_max is refused before it is created, naming the limit" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const allocator = std.testing.allocator;
    const pool = try thread_pool.ThreadPool.create(allocator, 2);
    defer pool.release();
    var mutex: std.Io.Mutex = .init;
    var changed: std.Io.Condition = .init;
    var stats: Stats = .{};
    var syncs: FileSyncs = .{
        .allocator = allocator,
        .pool = pool,
        .mutex = &mutex,
        .changed = &changed,
        .failed = syncFailed,
    };
    var files: ShardFiles = .{
        .allocator = allocator,
        .pool = pool,
        .syncs = &syncs,
        .stats = &stats,
        .max_shard_bytes = 1,
        .page_cache = .init(.drop, null),
        .compression = .{ .algo = .none, .ratio = 1.0 },
        .shards_max = 3,
    };
    defer files.deinit();
    defer syncs.deinit(); // first: the fsyncs of closed shards use their hashers
    var run: Segments = .{ .allocator = allocator };
    defer run.deinit();
    var diagnostic: Diagnostic = .{};
    // A shard per record: every record but the first closes a shard and opens the next.
    for (0..3) |index| {
        const place = try files.place(tmp.dir, &run, 1, 1, &diagnostic);
        try std.testing.expectEqual(Place{ .shard_id = index, .offset = 0 }, place);
        try run.append("r");
    }
    try std.testing.expectError(error.InvalidInput, files.place(tmp.dir, &run, 1, 1, &diagnostic));
    try std.testing.expectEqualStrings(
        "the cache needs more than 3 shards, the most one manifest.json can list " ++
            "(a reader refuses manifests over 64 MiB); use a larger max_shard_bytes than 1",
        diagnostic.message(),
    );
    try std.testing.expectEqual(@as(usize, 3), files.shards.items.len);
    const io = system.io();
    try std.testing.expectError(
        error.FileNotFound,
        tmp.dir.access(io, ShardName.of(3).slice(), .{}),
    );
}

test "a manifest listing shards_max of the longest shard entries stays below the reader's cap" {
    const allocator = std.testing.allocator;
    const metadata_json = @import("../format/metadata_json.zig");
    const Field = @import("../format/metadata_types.zig").Field;
    // The rest of the manifest as large as it gets: a source name escaped six
    // times over, and a schema of the most fields with names of 3 KiB.
    const name_bytes = 3 << 10;
    const schema = try allocator.alloc(Field, metadata_json.fields_max);
    defer allocator.free(schema);
    const names = try allocator.alloc(u8, metadata_json.fields_max * name_bytes);
    defer allocator.free(names);
    @memset(names, 'x');
    for (schema, 0..) |*field, index| {
        const name = names[index * name_bytes ..][0..name_bytes];
        _ = std.fmt.bufPrint(name, "{d:0>4}", .{index}) catch unreachable;
        field.* = .{ .name = name, .kind = .string };
    }
    const shard_names = try allocator.alloc(ShardName, manifest.shards_max);
    defer allocator.free(shard_names);
    const shards = try allocator.alloc(manifest.Shard, manifest.shards_max);
    defer allocator.free(shards);
    for (shard_names, shards, 0..) |*name, *shard, index| {
        name.* = .of(index);
        shard.* = .{
            .name = name.slice(),
            .uncompressed_byte_len = std.math.maxInt(u64),
            .byte_len = std.math.maxInt(u64),
            // The longest ratio there is: 17 significant digits and a three-digit exponent.
            .compression = .{ .algo = .lz4, .ratio = 2.2250738585072014e-308 },
            .sha256 = @splat(0xab),
        };
    }
    var maximal: manifest.Manifest = .{
        .format_version = manifest.format_version_newest,
        .cache_id = std.math.maxInt(u63),
        .source_name = &@as([250]u8, @splat(0x01)),
        .sample_count = std.math.maxInt(u64),
        .metadata_schema = schema,
        .metadata_sha256 = @splat(0xcd),
        .index_sha256 = @splat(0xef),
        .shards = &.{},
        .record_checksums = .{ .byte_len = std.math.maxInt(u64), .sha256 = @splat(0x12) },
    };
    const rest = try manifest.write(allocator, maximal);
    defer allocator.free(rest);
    maximal.shards = shards;
    const text = try manifest.write(allocator, maximal);
    defer allocator.free(text);
    try std.testing.expect(text.len <= manifest.manifest_bytes_max);
    // Each entry is at most the bound `shards_max` is derived from.
    const entries_bytes_max = manifest.shards_max * manifest.shard_entry_bytes_max;
    try std.testing.expect(text.len - rest.len <= entries_bytes_max);
    try std.testing.expect(rest.len + entries_bytes_max <= manifest.manifest_bytes_max);
}
