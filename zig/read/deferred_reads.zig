//! Reading deferred payloads (left in their shards by the read pipeline) into
//! the consumer's memory, shared out between the calling thread and the pool.
//!
//! The payloads are cut into pieces of `piece_bytes`. The calling thread starts
//! on them at once, and up to one helper job per pool worker joins in as the
//! workers wake: no thread waits for another to start, and the work stays
//! balanced to the last piece. The caller returns once every piece it or a
//! helper took is read. A helper that wakes after that finds nothing left;
//! the shared state is reference counted, so it may outlive the call.
//!
//! Each piece is checksummed by the thread that read it, while its bytes are
//! still in that core's cache; the pieces' CRCs are joined per payload
//! (`record_checksums.pieceContribution`), and a payload whose bytes do not
//! have its record's checksum fails the call: its memory is never handed out.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const thread_pool = @import("../base/thread_pool.zig");
const Cache = @import("cache_reader.zig").Cache;
const DeferredPayload = @import("sample_batch.zig").DeferredPayload;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const record_checksums = @import("../format/record_checksums.zig");

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// One payload to read, and the caller's memory to read it into (exactly its length).
pub const DeferredRead = struct {
    entry: DeferredPayload,
    destination: []u8,
};

/// Pieces are this large (the last of a payload smaller): large enough that a
/// piece's read dwarfs taking it, small enough to share a few MiB between threads
/// and to be still in L2 when it is checksummed right after its read.
pub const piece_bytes = 256 << 10;

/// At most this many helper jobs join one call.
const helpers_max = 16;

/// Reads every payload of `reads` into its destination; returns when all are
/// there, or with the first failure once no read is still running.
pub fn readAll(
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    caches: []const *Cache,
    reads: []const DeferredRead,
    diagnostic: *Diagnostic,
) Error!void {
    var pieces: u64 = 0;
    for (reads) |read| {
        assert(read.entry.cache_id < caches.len);
        assert(read.destination.len == read.entry.location.len);
        pieces += std.math.divCeil(u64, read.entry.location.len, piece_bytes) catch unreachable;
    }
    const helpers: usize = @intCast(@min(pool.workerCount(), helpers_max, pieces -| 1));
    assert(helpers <= helpers_max);
    if (helpers == 0) {
        for (reads) |read| {
            const cache = caches[read.entry.cache_id];
            if (read.entry.location.checksum != null) {
                const checksum = try cache.readPayloadChecksummed(
                    read.entry.location,
                    read.destination,
                    diagnostic,
                );
                try cache.checkPayload(read.entry.location, checksum, diagnostic);
            } else {
                try cache.readPayload(read.entry.location, read.destination, diagnostic);
            }
        }
        return;
    }
    const checksums = try allocator.alloc(std.atomic.Value(u32), reads.len);
    defer allocator.free(checksums);
    @memset(checksums, .init(0));
    const shared = try allocator.create(Shared);
    shared.* = .{
        .allocator = allocator,
        .caches = caches,
        .reads = reads,
        .checksums = checksums,
    };
    shared.references.store(@intCast(1 + helpers), .monotonic);
    for (shared.helpers[0..helpers]) |*helper| {
        helper.* = .{ .shared = shared };
        pool.submit(&helper.job);
    }
    shared.work();
    const outcome = shared.waitForPieces();
    if (outcome != null) diagnostic.* = shared.diagnostic;
    shared.release();
    if (outcome) |failure| return failure;
    // Every piece is in (the wait above synchronizes with each piece's thread).
    for (reads, checksums) |read, *checksum| {
        try caches[read.entry.cache_id].checkPayload(
            read.entry.location,
            checksum.load(.monotonic),
            diagnostic,
        );
    }
}

const Helper = struct {
    job: thread_pool.Job = .{ .run = run },
    shared: *Shared,

    fn run(job: *thread_pool.Job) void {
        const helper: *Helper = @fieldParentPtr("job", job);
        const shared = helper.shared;
        shared.work();
        shared.release(); // may free `helper`: touch nothing after it
    }
};

/// One piece: a span of one payload, and where it goes.
const Piece = struct {
    entry: DeferredPayload,
    destination: []u8,
    /// The payload's place in the caller's list, and its bytes after this piece.
    read_index: usize,
    bytes_after: u64,
};

const Shared = struct {
    allocator: std.mem.Allocator,
    caches: []const *Cache,
    /// The caller's list: only read under `mutex` while pieces remain, which
    /// they no longer do once the caller has returned.
    reads: []const DeferredRead,
    /// Per payload: the xor of its pieces' checksum contributions so far (the
    /// caller's memory, like `reads`; only touched while pieces remain).
    checksums: []std.atomic.Value(u32),
    helpers: [helpers_max]Helper = undefined,
    references: std.atomic.Value(u32) = .init(0),
    mutex: std.Io.Mutex = .init,
    /// Signalled when the last running piece ends.
    idle: std.Io.Condition = .init,
    /// The next piece: `next_offset` bytes into `reads[next_read]`.
    next_read: usize = 0,
    next_offset: u64 = 0,
    running: usize = 0,
    failure: ?Error = null,
    diagnostic: Diagnostic = .{},

    /// Takes the next piece (and counts it running), or null when none is left
    /// or a read failed.
    fn take(shared: *Shared) ?Piece {
        if (shared.failure != null or shared.next_read == shared.reads.len) return null;
        const read = shared.reads[shared.next_read];
        const offset = shared.next_offset;
        assert(offset < read.entry.location.len);
        const len = @min(piece_bytes, read.entry.location.len - offset);
        var entry = read.entry;
        entry.location.offset += offset;
        entry.location.len = len;
        const piece: Piece = .{
            .entry = entry,
            .destination = read.destination[@intCast(offset)..][0..@intCast(len)],
            .read_index = shared.next_read,
            .bytes_after = read.entry.location.len - offset - len,
        };
        shared.next_offset += len;
        if (shared.next_offset == read.entry.location.len) {
            shared.next_read += 1;
            shared.next_offset = 0;
        }
        shared.running += 1;
        assert(piece.destination.len == len and len > 0 and len <= piece_bytes);
        return piece;
    }

    /// Reads a piece and adds its checksum to its payload's.
    fn readPiece(shared: *Shared, piece: Piece, diagnostic: *Diagnostic) Error!void {
        assert(piece.destination.len == piece.entry.location.len);
        assert(piece.read_index < shared.reads.len);
        const cache = shared.caches[piece.entry.cache_id];
        if (piece.entry.location.checksum == null) {
            return cache.readPayload(piece.entry.location, piece.destination, diagnostic);
        }
        const checksum = try cache.readPayloadChecksummed(
            piece.entry.location,
            piece.destination,
            diagnostic,
        );
        const contribution = record_checksums.pieceContribution(checksum, piece.bytes_after);
        _ = shared.checksums[piece.read_index].fetchXor(contribution, .monotonic);
    }

    fn work(shared: *Shared) void {
        const io = system.io();
        var diagnostic: Diagnostic = .{};
        shared.mutex.lockUncancelable(io);
        defer shared.mutex.unlock(io);
        while (shared.take()) |piece| {
            shared.mutex.unlock(io);
            const result = shared.readPiece(piece, &diagnostic);
            shared.mutex.lockUncancelable(io);
            assert(shared.running > 0);
            shared.running -= 1;
            if (result) |_| {} else |err| if (shared.failure == null) {
                shared.failure = err;
                shared.diagnostic = diagnostic;
            }
            if (shared.running == 0) shared.idle.broadcast(io);
        }
    }

    /// Once the caller's own `work` found nothing left to take: waits for the
    /// pieces helpers are still reading, then gives the first failure.
    fn waitForPieces(shared: *Shared) ?Error {
        const io = system.io();
        shared.mutex.lockUncancelable(io);
        defer shared.mutex.unlock(io);
        while (shared.running > 0) shared.idle.waitUncancelable(io, &shared.mutex);
        assert(shared.running == 0);
        // Every piece taken, or a failure that stopped the taking.
        assert(shared.failure != null or shared.next_read == shared.reads.len);
        return shared.failure;
    }

    fn release(shared: *Shared) void {
        const before = shared.references.fetchSub(1, .acq_rel);
        assert(before > 0);
        if (before == 1) shared.allocator.destroy(shared);
    }
};

test "pieces cover each payload once, in order, none over piece_bytes" {
    const lens = [_]u64{ 1, piece_bytes, piece_bytes + 1, 3 * piece_bytes + 17 };
    var memory: [lens.len][]u8 = undefined;
    var reads: [lens.len]DeferredRead = undefined;
    for (&memory, &reads, lens, 0..) |*buffer, *read, len, i| {
        buffer.* = try std.testing.allocator.alloc(u8, @intCast(len));
        read.* = .{
            .entry = .{
                .cache_id = 0,
                .location = .{ .sample_id = i, .shard_id = 0, .offset = 1000 * i, .len = len },
            },
            .destination = buffer.*,
        };
    }
    defer for (memory) |buffer| std.testing.allocator.free(buffer);
    var shared: Shared = .{
        .allocator = std.testing.allocator,
        .caches = &.{},
        .reads = &reads,
        .checksums = &.{},
    };
    var covered: [lens.len]u64 = @splat(0);
    var pieces: usize = 0;
    while (shared.take()) |piece| : (pieces += 1) {
        const i: usize = @intCast(piece.entry.location.sample_id);
        try std.testing.expect(
            piece.entry.location.len <= piece_bytes and piece.entry.location.len > 0,
        );
        try std.testing.expectEqual(1000 * i + covered[i], piece.entry.location.offset);
        try std.testing.expectEqual(memory[i].ptr + covered[i], piece.destination.ptr);
        try std.testing.expectEqual(piece.entry.location.len, piece.destination.len);
        try std.testing.expectEqual(i, piece.read_index);
        covered[i] += piece.entry.location.len;
        try std.testing.expectEqual(lens[i] - covered[i], piece.bytes_after);
    }
    try std.testing.expectEqualSlices(u64, &lens, &covered);
    try std.testing.expectEqual(@as(usize, 1 + 1 + 2 + 4), pieces);
    try std.testing.expectEqual(pieces, shared.running);
}
