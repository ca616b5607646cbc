//! A shard's SHA-256, computed on the pool while the shard is being written.
//!
//! The committer only writes; every few MiB it tells the shard's hasher how far
//! the shard has grown (`advance`), and a pool job hashes the new bytes from
//! the page cache, where they were just written: through a short-lived mapping
//! on Linux (`hashMappedPiece`), else by reading them back. A
//! shard's hash is sequential, so at most one job per shard runs at a time;
//! shards are hashed beside the writes and beside each other, and when the
//! shard is closed only its last few MiB are left to hash. `group` counts the
//! running jobs: once it is done, every closed shard's digest is final.
const std = @import("std");
const assert = std.debug.assert;
const builtin = @import("builtin");
const system = @import("../base/system.zig");
const file_status = @import("../base/file_status.zig");
const sha256 = @import("../codec/sha256.zig");
const thread_pool = @import("../base/thread_pool.zig");
const durable_files = @import("../base/durable_files.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const ShardName = @import("../format/cache_layout.zig").ShardName;

pub const Error = error{ Io, OutOfMemory };

/// Bytes mapped or read back per piece: larger mappings are no faster, and a
/// smaller mapping is a shorter window for a truncation to fault in.
const piece_bytes = 1 << 20;

pub const ShardHasher = struct {
    job: thread_pool.Job = .{ .run = run },
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    group: *thread_pool.WaitGroup,
    /// The shard, opened read-only; closed once the digest is final.
    file: ?std.Io.File,
    /// For messages: the shard's file name.
    name: ShardName,

    // Touched only by the running job (one at a time), read after `group` is done.
    hasher: sha256.Hasher, // (its kernel is picked at run time: no default)
    hashed: u64 = 0,
    nanoseconds: u64 = 0,
    /// Pieces are hashed from a mapping until one cannot be mapped (Linux only).
    map_pieces: bool = builtin.os.tag == .linux,
    /// Whether the shard's pages stay in the page cache once it is hashed and on
    /// disk (`page_cache_policy`); set before the shard is closed.
    keep_pages: bool = false,
    digest: ?[32]u8 = null,

    // Guarded by `mutex`.
    mutex: std.Io.Mutex = .init,
    written: u64 = 0,
    closed: bool = false,
    running: bool = false,
    failure: ?Error = null,
    diagnostic: Diagnostic = .{},

    /// `file` is the shard `name` opened for reading; the hasher owns it.
    pub fn create(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        group: *thread_pool.WaitGroup,
        file: std.Io.File,
        name: ShardName,
    ) error{OutOfMemory}!*ShardHasher {
        assert(name.len > 0);
        const hasher = try allocator.create(ShardHasher);
        errdefer allocator.destroy(hasher);
        hasher.* = .{
            .allocator = allocator,
            .pool = pool,
            .group = group,
            .file = file,
            .name = name,
            .hasher = sha256.Hasher.init(),
        };
        assert(hasher.hashed == 0 and hasher.written == 0 and !hasher.closed);
        return hasher;
    }

    /// The committer has written the shard's first `written` bytes; `closed`:
    /// and nothing more. Starts a job unless one is running (it will see this).
    pub fn advance(hasher: *ShardHasher, written: u64, closed: bool) void {
        hasher.advanceAs(written, closed, false);
    }

    /// `advance`, hashing on this thread when `here` (bounds the queued jobs holding shard files).
    pub fn advanceAs(hasher: *ShardHasher, written: u64, closed: bool, here: bool) void {
        const io = system.io();
        hasher.mutex.lockUncancelable(io);
        assert(written >= hasher.written and !hasher.closed);
        hasher.written = written;
        hasher.closed = closed;
        const start = !hasher.running and hasher.failure == null;
        if (start) hasher.running = true;
        hasher.mutex.unlock(io);
        if (!start) return;
        hasher.group.add(1);
        if (here) return run(&hasher.job);
        // Called on a pool thread (the committer): never wait for room in the queue.
        hasher.pool.submitOrRun(&hasher.job);
    }

    /// Whether the digest is final (the shard was closed and hashed to its end).
    pub fn isFinal(hasher: *ShardHasher) bool {
        const io = system.io();
        hasher.mutex.lockUncancelable(io);
        defer hasher.mutex.unlock(io);
        return hasher.digest != null;
    }

    /// The shard's digest, once it was closed and `group` is done.
    pub fn result(hasher: *const ShardHasher, diagnostic: *Diagnostic) Error![32]u8 {
        assert(!hasher.running and hasher.closed);
        if (hasher.failure) |failure| {
            diagnostic.* = hasher.diagnostic;
            return failure;
        }
        // Hashed to the end of what was written.
        assert(hasher.hashed == hasher.written);
        return hasher.digest.?;
    }

    /// Once `group` is done: closes the file if the digest never became final
    /// (an unfinished write) and frees the hasher.
    pub fn destroy(hasher: *ShardHasher) void {
        assert(!hasher.running);
        if (hasher.file) |file| file.close(system.io());
        hasher.allocator.destroy(hasher);
    }

    fn run(job: *thread_pool.Job) void {
        const hasher: *ShardHasher = @fieldParentPtr("job", job);
        // Copied out: `group.finish()` may let the hasher be destroyed, and the
        // buffer is freed after it.
        const allocator = hasher.allocator;
        const group = hasher.group;
        assert(hasher.running and group.pendingCount() > 0);
        var buffer: []u8 = &.{};
        hasher.hashWhatIsWritten(&buffer);
        allocator.free(buffer);
        group.finish(); // touch nothing of `hasher` after this
    }

    /// Hashes until the written bytes are all hashed, then makes the digest
    /// final if the shard is closed, or records a failure.
    fn hashWhatIsWritten(hasher: *ShardHasher, buffer: *[]u8) void {
        const io = system.io();
        while (true) {
            hasher.mutex.lockUncancelable(io);
            const target = hasher.written;
            assert(hasher.running and hasher.hashed <= target);
            if (hasher.hashed == target) {
                const final = hasher.closed;
                if (final) hasher.digest = hasher.hasher.final();
                hasher.running = false;
                hasher.mutex.unlock(io);
                if (final) {
                    hasher.dropPages();
                    hasher.closeFile();
                }
                return;
            }
            hasher.mutex.unlock(io);
            const started = system.monotonicNanoseconds();
            var diagnostic: Diagnostic = .{};
            hasher.hashUpTo(target, buffer, &diagnostic) catch |err| {
                hasher.mutex.lockUncancelable(io);
                hasher.failure = err;
                hasher.diagnostic = diagnostic;
                hasher.running = false;
                hasher.mutex.unlock(io);
                hasher.closeFile();
                return;
            };
            hasher.nanoseconds += system.monotonicNanoseconds() -| started;
            assert(hasher.hashed == target);
        }
    }

    fn hashUpTo(
        hasher: *ShardHasher,
        target: u64,
        buffer: *[]u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(hasher.hashed < target and hasher.file != null);
        // Mapped only when the file holds every byte up to `target`: a mapping
        // reads zeros past the file's end up to the page's, where reading back
        // names the shortfall. One length check covers every piece of the call.
        const mappable = builtin.os.tag == .linux and hasher.map_pieces and hasher.holds(target);
        while (hasher.hashed < target) {
            if (mappable and hasher.map_pieces and hasher.hashMappedPiece(target)) continue;
            if (buffer.len == 0) {
                buffer.* = hasher.allocator.alloc(
                    u8,
                    @intCast(@min(piece_bytes, target - hasher.hashed)),
                ) catch {
                    diagnostic.set("out of memory while hashing shard {s}", .{hasher.name.slice()});
                    return error.OutOfMemory;
                };
            }
            const piece = buffer.*[0..@intCast(@min(buffer.len, target - hasher.hashed))];
            const read = hasher.file.?.readPositionalAll(
                system.io(),
                piece,
                hasher.hashed,
            ) catch |err| {
                diagnostic.set(
                    "cannot read shard {s} back to hash it: {f}",
                    .{ hasher.name.slice(), error_words.of(err) },
                );
                return error.Io;
            };
            if (read != piece.len) {
                diagnostic.set(
                    "shard {s} holds {d} bytes, {d} were written",
                    .{ hasher.name.slice(), hasher.hashed + read, target },
                );
                return error.Io;
            }
            hasher.hasher.update(piece);
            hasher.hashed += read;
        }
        assert(hasher.hashed == target);
    }

    /// Hashes the next piece below `target` from a read-only mapping of the
    /// shard, made present in one call (MADV_POPULATE_READ, Linux 5.14) and
    /// unmapped right after, so its pages can still be dropped. This spares
    /// the copy of reading back, in time and CPU. It pays only because the
    /// SHA-NI kernel prefetches (sha256_ni.zig): without, hashing from memory
    /// is slower than reading back into a buffer in L2.
    ///
    /// The caller has checked that the file holds `target` bytes (`holds`).
    /// False leaves the piece to be read back when it cannot be mapped
    /// (kernels before 5.14, file systems without mmap); then no later piece
    /// tries. Only a truncation by another process while a piece is hashed
    /// could fault (SIGBUS): the shard sits in the writer's own locked staging
    /// directory, as the reader's mapped index files sit in a published cache.
    fn hashMappedPiece(hasher: *ShardHasher, target: u64) bool {
        assert(hasher.hashed < target and hasher.map_pieces);
        const linux = std.os.linux;
        const file = hasher.file.?;
        const page_bytes = std.heap.pageSize();
        const start = hasher.hashed / page_bytes * page_bytes;
        const end = @min(target, hasher.hashed + piece_bytes);
        const len: usize = @intCast(end - start);
        const mapped = std.c.mmap(
            null,
            len,
            .{ .READ = true },
            .{ .TYPE = .SHARED },
            file.handle,
            @intCast(start),
        );
        if (mapped == std.c.MAP_FAILED) {
            hasher.map_pieces = false;
            return false;
        }
        const memory = @as(
            [*]align(std.heap.page_size_min) u8,
            @ptrCast(@alignCast(mapped)),
        )[0..len];
        defer _ = std.c.munmap(memory.ptr, memory.len);
        const populate_read = 22; // MADV_POPULATE_READ: fails instead of faulting past the end
        if (linux.errno(linux.madvise(memory.ptr, memory.len, populate_read)) != .SUCCESS) {
            hasher.map_pieces = false;
            return false;
        }
        hasher.hasher.update(memory[@intCast(hasher.hashed - start)..]);
        assert(end > hasher.hashed and end <= target);
        hasher.hashed = end;
        return true;
    }

    /// Whether the shard's file is at least `target` bytes long.
    fn holds(hasher: *ShardHasher, target: u64) bool {
        const file_len = file_status.length(hasher.file.?) catch return false;
        return file_len >= target;
    }

    fn closeFile(hasher: *ShardHasher) void {
        if (hasher.file) |file| file.close(system.io());
        hasher.file = null;
    }

    /// Once the digest is final: the shard's pages that are on disk leave the
    /// page cache (the rest when its fsync has written them, see syncAndClose),
    /// unless the writer's policy keeps them.
    fn dropPages(hasher: *ShardHasher) void {
        if (hasher.keep_pages) return;
        if (hasher.file) |file| durable_files.dropCachedPages(file, 0, 0);
    }
};

test "a shard written in steps hashes to the SHA-256 of all its bytes, mapped and read back" {
    try expectStepsHashed(true);
    try expectStepsHashed(false);
}

fn expectStepsHashed(map_pieces: bool) !void {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const pool = try thread_pool.ThreadPool.create(std.testing.allocator, 2);
    defer pool.release();
    var group: thread_pool.WaitGroup = .{};
    const writing = try tmp.dir.createFile(io, "000000.bin", .{});
    defer writing.close(io);
    const reading = try tmp.dir.openFile(io, "000000.bin", .{});
    const hasher = try ShardHasher.create(std.testing.allocator, pool, &group, reading, .of(0));
    hasher.map_pieces = map_pieces and builtin.os.tag == .linux;
    var expected = sha256.Hasher.init();
    var random = std.Random.DefaultPrng.init(7);
    var chunk: [3 << 20]u8 = undefined;
    var written: u64 = 0;
    for (0..5) |step| {
        const len = random.random().uintLessThan(usize, chunk.len);
        random.random().bytes(chunk[0..len]);
        try writing.writePositionalAll(io, chunk[0..len], written);
        expected.update(chunk[0..len]);
        written += len;
        hasher.advance(written, step == 4);
    }
    group.wait();
    var diagnostic: Diagnostic = .{};
    try std.testing.expectEqual(expected.final(), try hasher.result(&diagnostic));
    try std.testing.expect(hasher.file == null);
    // Still set: every piece could be mapped (a failed mapping clears it).
    try std.testing.expectEqual(map_pieces and builtin.os.tag == .linux, hasher.map_pieces);
    hasher.destroy();
}

test "a shard shorter than was written fails its hash, naming it" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = system.io();
    const pool = try thread_pool.ThreadPool.create(std.testing.allocator, 1);
    defer pool.release();
    var group: thread_pool.WaitGroup = .{};
    const writing = try tmp.dir.createFile(io, "000003.bin", .{});
    defer writing.close(io);
    try writing.writePositionalAll(io, "only ten b", 0);
    const hasher = try ShardHasher.create(
        std.testing.allocator,
        pool,
        &group,
        try tmp.dir.openFile(io, "000003.bin", .{}),
        .of(3),
    );
    defer hasher.destroy();
    hasher.advance(25, true);
    group.wait();
    var diagnostic: Diagnostic = .{};
    try std.testing.expectError(error.Io, hasher.result(&diagnostic));
    try std.testing.expectEqualStrings(
        "shard 000003.bin holds 10 bytes, 25 were written",
        diagnostic.message(),
    );
}
