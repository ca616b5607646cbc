//! Scrubbing a cache: every check the format allows, and every problem found,
//! not only the first.
//!
//! Two passes, each spread over the pool and the calling thread:
//!  1. files: each file the manifest lists (index.bin, metadata.arrow,
//!     records.crc32c, every shard) exists, has its listed length, and hashes
//!     to its listed SHA-256;
//!  2. records: the cache opened as a reader opens it, every sample is read
//!     and checked as every read checks it (index bounds and placement,
//!     record checksum, embedded metadata against metadata.arrow, LZ4 blocks
//!     decoding to their stated size), and each shard's payloads add up to its
//!     `uncompressed_byte_len`.
//! A manifest that cannot be read stops the scrub; a cache the reader cannot
//! open skips the record pass. Progress is counted in bytes of both passes.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const thread_pool = @import("../base/thread_pool.zig");
const file_status = @import("../base/file_status.zig");
const error_words = @import("../base/error_words.zig");
const directory_entries = @import("../base/directory_entries.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const sha256 = @import("../codec/sha256.zig");
const cache_layout = @import("../format/cache_layout.zig");
const index_file = @import("../format/index_file.zig");
const manifest = @import("../format/manifest.zig");
const column_builder = @import("../format/column_builder.zig");
const cache_reader = @import("cache_reader.zig");
const Cache = cache_reader.Cache;
const record_read = @import("record_read.zig");
const remote_cache = @import("remote_cache.zig");
const Remote = @import("remote.zig").Remote;

pub const Error = error{ OutOfMemory, Io };

/// One problem: the file it is in (relative to the cache), and where it applies
/// the sample and the record's offset in its shard.
pub const Problem = struct {
    file: []const u8,
    sample_id: ?u64 = null,
    offset: ?u64 = null,
    message: []const u8,
};

/// Problems kept with their text; beyond this many only `problems_total` grows.
pub const problems_kept_max = 10_000;
/// Samples per record job.
const samples_per_job = 4096;
const hash_chunk_bytes = 4 << 20;

pub const Verifier = struct {
    allocator: std.mem.Allocator,
    pool: *thread_pool.ThreadPool,
    /// The cache's path, or a remote cache's URL.
    path: []u8,
    /// A remote cache's hook, and its local folder once `run` has made it.
    remote: ?*Remote = null,
    folder: ?[]u8 = null,
    mutex: std.Io.Mutex = .init,
    /// Guarded by `mutex`; their strings are owned by `arena`.
    problems: std.ArrayList(Problem) = .empty,
    problems_total: u64 = 0,
    arena: std.heap.ArenaAllocator,
    bytes_done: std.atomic.Value(u64) = .init(0),
    bytes_total: std.atomic.Value(u64) = .init(0),

    pub fn create(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        path: []const u8,
    ) error{OutOfMemory}!*Verifier {
        const verifier = try allocator.create(Verifier);
        errdefer allocator.destroy(verifier);
        verifier.* = .{
            .allocator = allocator,
            .pool = pool.acquire(),
            .path = undefined,
            .arena = .init(allocator),
        };
        verifier.path = allocator.dupe(u8, path) catch |err| {
            pool.release();
            return err;
        };
        assert(verifier.problems.items.len == 0 and verifier.problems_total == 0);
        return verifier;
    }

    /// A scrub of the remote cache at `url`, read through `remote`: `run`
    /// first brings every file into the cache's folder (`remote_cache.zig`),
    /// then scrubs the folder.
    pub fn createRemote(
        allocator: std.mem.Allocator,
        pool: *thread_pool.ThreadPool,
        url: []const u8,
        remote: *Remote,
    ) error{OutOfMemory}!*Verifier {
        const verifier = try create(allocator, pool, url);
        remote.acquire();
        verifier.remote = remote;
        return verifier;
    }

    pub fn destroy(verifier: *Verifier) void {
        const allocator = verifier.allocator;
        assert(verifier.problems.items.len <= problems_kept_max);
        assert(verifier.problems.items.len <= verifier.problems_total);
        verifier.problems.deinit(allocator);
        verifier.arena.deinit();
        allocator.free(verifier.path);
        if (verifier.folder) |folder| allocator.free(folder);
        if (verifier.remote) |remote| remote.release();
        verifier.pool.release();
        allocator.destroy(verifier);
    }

    /// Every problem found so far (all of them once `run` has returned), at most
    /// `problems_kept_max`. Only call once `run` has returned.
    pub fn found(verifier: *const Verifier) []const Problem {
        return verifier.problems.items;
    }

    /// Runs both passes; returns when done. Problems are in `found`.
    pub fn run(verifier: *Verifier) Error!void {
        const allocator = verifier.allocator;
        if (verifier.remote != null and !try verifier.fetchAll()) return;
        var parsed = verifier.readManifest() orelse return;
        defer parsed.deinit();
        const listed = parsed.manifest;
        const shard_names = try allocator.alloc(cache_layout.ShardName, listed.shards.len);
        defer allocator.free(shard_names);
        for (shard_names, 0..) |*name, index| name.* = .of(index);
        const files = try verifier.fileJobs(listed, shard_names);
        defer allocator.free(files);
        const checksums_listed: usize = @intFromBool(listed.record_checksums != null);
        assert(files.len == 2 + checksums_listed + listed.shards.len);
        // Pass 1, and what pass 2 will read (the shards again), counted up
        // front for progress.
        var total: u64 = 0;
        for (listed.shards) |shard| total +|= shard.byte_len;
        for (files) |job| total +|= job.expected_len orelse 0;
        verifier.bytes_total.store(total, .monotonic);
        var group: thread_pool.WaitGroup = .{};
        group.add(files.len);
        for (files) |*job| {
            job.group = &group;
            verifier.pool.submit(&job.job);
        }
        group.wait();
        assert(group.pendingCount() == 0);
        try verifier.checkRecords();
    }

    /// Pass 1's jobs: index.bin, metadata.arrow, records.crc32c when the
    /// manifest lists it, and every shard (named by `shard_names`).
    fn fileJobs(
        verifier: *Verifier,
        listed: manifest.Manifest,
        shard_names: []const cache_layout.ShardName,
    ) error{OutOfMemory}![]FileJob {
        assert(shard_names.len == listed.shards.len);
        const allocator = verifier.allocator;
        var files: std.ArrayList(FileJob) = .empty;
        errdefer files.deinit(allocator);
        const index_len = std.math.mul(u64, listed.sample_count, index_file.row_bytes) catch
            std.math.maxInt(u64);
        try files.append(allocator, .{
            .verifier = verifier,
            .name = cache_layout.index_file,
            .expected_len = index_len,
            .digest = listed.index_sha256,
        });
        try files.append(allocator, .{
            .verifier = verifier,
            .name = cache_layout.metadata_file,
            .expected_len = null,
            .digest = listed.metadata_sha256,
        });
        if (listed.record_checksums) |checksums| try files.append(allocator, .{
            .verifier = verifier,
            .name = cache_layout.record_checksums_file,
            .expected_len = checksums.byte_len,
            .digest = checksums.sha256,
        });
        for (listed.shards, shard_names) |shard, *name| try files.append(allocator, .{
            .verifier = verifier,
            .name = name.slice(),
            .in_shards = true,
            .expected_len = shard.byte_len,
            .digest = shard.sha256,
        });
        assert(files.items.len >= 2 + listed.shards.len);
        return files.toOwnedSlice(allocator);
    }

    /// Where the cache's files are: a remote cache's folder, else its path.
    fn local(verifier: *const Verifier) []const u8 {
        return verifier.folder orelse verifier.path;
    }

    /// A remote cache's files brought into its folder, each checked against
    /// the manifest as it is fetched; a file that cannot be is a problem.
    /// False (and a problem) when even the folder cannot be made.
    fn fetchAll(verifier: *Verifier) error{OutOfMemory}!bool {
        const remote = verifier.remote.?;
        var diagnostic: Diagnostic = .{};
        if (verifier.folder == null) {
            verifier.folder = remote_cache.prepareFolder(
                verifier.allocator,
                remote,
                verifier.path,
                &diagnostic,
            ) catch |err| {
                if (err == error.OutOfMemory) return error.OutOfMemory;
                verifier.report(.{ .file = "", .message = "" }, "{s}", .{diagnostic.message()});
                return false;
            };
        }
        const folder = verifier.folder.?;
        var parsed = verifier.readManifest() orelse return false;
        defer parsed.deinit();
        if (!verifier.fitsBudget(parsed.manifest.shards)) return false;
        const io = system.io();
        var dir = std.Io.Dir.cwd().openDir(io, folder, .{}) catch return true;
        defer dir.close(io);
        for (parsed.manifest.shards, 0..) |shard, index| {
            var buffer: [cache_layout.shard_name_bytes_max + 8]u8 = undefined;
            const name = std.fmt.bufPrint(&buffer, "{s}/{s}", .{
                cache_layout.shards_dir, cache_layout.ShardName.of(index).slice(),
            }) catch unreachable;
            const outcome = remote.fetchChecked(.{
                .url = verifier.path,
                .name = name,
                .dir = dir,
                .dir_path = folder,
                .byte_len = shard.byte_len,
                .sha256 = shard.sha256,
                .shard = true,
            }, &diagnostic) catch |err| {
                if (err == error.OutOfMemory) return error.OutOfMemory;
                verifier.report(.{ .file = name, .message = "" }, "{s}", .{diagnostic.message()});
                continue;
            };
            if (outcome == .not_found) {
                verifier.report(.{ .file = name, .message = "" }, "not found at the URL", .{});
            }
        }
        return true;
    }

    /// A scrub holds every shard in the folder at once: false (and a
    /// problem) when they do not fit in the remote's byte budget.
    fn fitsBudget(verifier: *Verifier, shards: []const manifest.Shard) bool {
        const budget_bytes = verifier.remote.?.budget_bytes orelse return true;
        var total: u64 = 0;
        for (shards) |shard| total +|= shard.byte_len;
        if (total <= budget_bytes) return true;
        verifier.report(
            .{ .file = "", .message = "" },
            "verify holds every shard in local_dir at once: {d} bytes, above " ++
                "RemoteConfig.budget_bytes={d}; verify with a larger budget or none",
            .{ total, budget_bytes },
        );
        return false;
    }

    fn readManifest(verifier: *Verifier) ?manifest.Parsed {
        const io = system.io();
        var diagnostic: Diagnostic = .{};
        var dir = std.Io.Dir.cwd().openDir(io, verifier.local(), .{}) catch |err| {
            verifier.report(
                .{ .file = "", .message = "" },
                "cannot open the cache directory: {f}",
                .{error_words.of(err)},
            );
            return null;
        };
        defer dir.close(io);
        var digest: [sha256.digest_length]u8 = undefined;
        const parsed = Cache.readManifest(verifier.allocator, dir, &digest, &diagnostic) catch {
            verifier.report(
                .{ .file = cache_layout.manifest_file, .message = "" },
                "{s}",
                .{diagnostic.message()},
            );
            return null;
        };
        assert(manifest.versionSupported(parsed.manifest.format_version));
        return parsed;
    }

    /// Records a problem; `where.message` is replaced by the formatted text.
    fn report(
        verifier: *Verifier,
        where: Problem,
        comptime format: []const u8,
        args: anytype,
    ) void {
        const io = system.io();
        verifier.mutex.lockUncancelable(io);
        defer verifier.mutex.unlock(io);
        verifier.problems_total += 1;
        assert(verifier.problems.items.len < verifier.problems_total);
        if (verifier.problems.items.len >= problems_kept_max) return;
        const arena = verifier.arena.allocator();
        var problem = where;
        problem.file = arena.dupe(u8, where.file) catch return;
        problem.message = std.fmt.allocPrint(arena, format, args) catch return;
        verifier.problems.append(verifier.allocator, problem) catch return;
    }

    /// A remote cache's local copy of a shard (`where.file`, in `dir`, the
    /// cache's folder) that does not match the manifest: deleted and fetched
    /// again, checked as every fetch is. A problem only if that fails.
    fn replaceCopy(verifier: *Verifier, job: *const FileJob, dir: std.Io.Dir, where: Problem) void {
        const io = system.io();
        const folder = verifier.folder.?;
        var path_buffer: [std.Io.Dir.max_path_bytes]u8 = undefined;
        const dir_path = std.fmt.bufPrint(&path_buffer, "{s}/", .{folder}) catch unreachable;
        directory_entries.deleteFile(io, dir, dir_path, where.file) catch |err| {
            const words = error_words.of(err);
            return verifier.report(where, "{s} is damaged and cannot be deleted: {f}", .{
                where.file, words,
            });
        };
        var diagnostic: Diagnostic = .{};
        const outcome = verifier.remote.?.fetchChecked(.{
            .url = verifier.path,
            .name = where.file,
            .dir = dir,
            .dir_path = folder,
            .byte_len = job.expected_len,
            .sha256 = job.digest,
            .shard = true,
        }, &diagnostic) catch {
            return verifier.report(where, "{s} was damaged; fetching it again failed: {s}", .{
                where.file, diagnostic.message(),
            });
        };
        if (outcome == .not_found) {
            verifier.report(where, "{s} was damaged and is no longer at the URL", .{where.file});
        }
    }

    /// Pass 2, on the cache as a reader opens it now (its manifest may
    /// differ from the one pass 1 read, if the cache changed meanwhile).
    fn checkRecords(verifier: *Verifier) Error!void {
        const allocator = verifier.allocator;
        var diagnostic: Diagnostic = .{};
        // A remote cache's folder as it is: a shard its fetch failed to bring
        // is not fetched once per record.
        const cache = Cache.open(allocator, verifier.local(), false, &diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            // Pass 1 has named the file in most cases; this says why records were not read.
            verifier.report(
                .{ .file = "", .message = "" },
                "records not checked: {s}",
                .{diagnostic.message()},
            );
            return;
        };
        defer cache.close();
        const listed = cache.parsed.manifest;
        const jobs_count: usize = @intCast(
            std.math.divCeil(u64, listed.sample_count, samples_per_job) catch unreachable,
        );
        const jobs = try allocator.alloc(RecordJob, jobs_count);
        defer allocator.free(jobs);
        const payload_totals = try allocator.alloc(std.atomic.Value(u64), listed.shards.len);
        defer allocator.free(payload_totals);
        @memset(payload_totals, .init(0));
        const shard_failed = try allocator.alloc(std.atomic.Value(bool), listed.shards.len);
        defer allocator.free(shard_failed);
        @memset(shard_failed, .init(false));
        var group: thread_pool.WaitGroup = .{};
        group.add(jobs.len);
        for (jobs, 0..) |*job, index| {
            const first: u64 = index * samples_per_job;
            job.* = .{
                .verifier = verifier,
                .cache = cache,
                .first = first,
                .end = @min(first + samples_per_job, listed.sample_count),
                .payload_totals = payload_totals,
                .shard_failed = shard_failed,
                .group = &group,
            };
            assert(job.first < job.end);
            verifier.pool.submit(&job.job);
        }
        group.wait();
        verifier.checkPayloadTotals(listed, payload_totals, shard_failed);
    }

    /// Reports each shard whose records, all read, hold other than its
    /// manifest's `uncompressed_byte_len` payload bytes.
    fn checkPayloadTotals(
        verifier: *Verifier,
        listed: manifest.Manifest,
        payload_totals: []const std.atomic.Value(u64),
        shard_failed: []const std.atomic.Value(bool),
    ) void {
        assert(payload_totals.len == listed.shards.len);
        assert(shard_failed.len == listed.shards.len);
        for (listed.shards, payload_totals, shard_failed) |shard, *total, *failed| {
            if (failed.load(.monotonic)) continue;
            const sum = total.load(.monotonic);
            if (sum == shard.uncompressed_byte_len) continue;
            var name: [64]u8 = undefined;
            const file = std.fmt.bufPrint(
                &name,
                "{s}/{s}",
                .{ cache_layout.shards_dir, shard.name },
            ) catch unreachable;
            verifier.report(
                .{ .file = file, .message = "" },
                "payloads add up to {d} bytes but the manifest says uncompressed_byte_len {d}",
                .{ sum, shard.uncompressed_byte_len },
            );
        }
    }
};

/// Pass 1 for one file: exists, has its listed length, hashes to its digest.
const FileJob = struct {
    job: thread_pool.Job = .{ .run = run },
    verifier: *Verifier,
    /// Relative to the cache, or to shards/ when `in_shards`.
    name: []const u8,
    in_shards: bool = false,
    expected_len: ?u64,
    digest: [32]u8,
    group: *thread_pool.WaitGroup = undefined,

    fn run(job: *thread_pool.Job) void {
        const file_job: *FileJob = @fieldParentPtr("job", job);
        defer file_job.group.finish();
        file_job.check();
    }

    fn check(job: *FileJob) void {
        assert(job.name.len > 0);
        const io = system.io();
        const verifier = job.verifier;
        var path_buffer: [64]u8 = undefined;
        const relative = if (job.in_shards)
            std.fmt.bufPrint(
                &path_buffer,
                "{s}/{s}",
                .{ cache_layout.shards_dir, job.name },
            ) catch unreachable
        else
            job.name;
        const where: Problem = .{ .file = relative, .message = "" };
        var dir = std.Io.Dir.cwd().openDir(io, verifier.local(), .{}) catch |err| {
            return verifier.report(
                where,
                "cannot open the cache directory: {f}",
                .{error_words.of(err)},
            );
        };
        defer dir.close(io);
        const file = dir.openFile(io, relative, .{}) catch |err| {
            return verifier.report(
                where,
                "cannot open {s}: {f}",
                .{ relative, error_words.of(err) },
            );
        };
        const matched = matched: {
            defer file.close(io);
            const actual_len = file_status.length(file) catch |err| {
                return verifier.report(
                    where,
                    "cannot stat {s}: {f}",
                    .{ relative, error_words.of(err) },
                );
            };
            const length_ok = job.checkLength(where, actual_len);
            break :matched job.checkHash(where, file) and length_ok;
        };
        if (!matched and job.repairable()) verifier.replaceCopy(job, dir, where);
    }

    /// A remote cache's shard: a local copy that does not match the manifest
    /// is replaced, not reported (`Verifier.replaceCopy`).
    fn repairable(job: *const FileJob) bool {
        return job.in_shards and job.verifier.remote != null;
    }

    /// Reports a length other than the listed one (unless `repairable`), and
    /// counts the file's bytes as they are for progress; true if it matches.
    fn checkLength(job: *const FileJob, where: Problem, actual_len: u64) bool {
        assert(where.file.len > 0);
        const verifier = job.verifier;
        const counted = job.expected_len orelse 0;
        const matched = if (job.expected_len) |expected| actual_len == expected else true;
        if (job.expected_len) |expected| {
            if (!matched and !job.repairable()) {
                const phrase = if (job.in_shards) "shard length mismatch: " else "";
                verifier.report(
                    where,
                    "{s}{s} has {d} bytes, the manifest says {d}",
                    .{ phrase, where.file, actual_len, expected },
                );
            }
        }
        if (actual_len > counted) {
            _ = verifier.bytes_total.fetchAdd(actual_len - counted, .monotonic);
        } else {
            const before = verifier.bytes_total.fetchSub(counted - actual_len, .monotonic);
            assert(before >= counted - actual_len); // `counted` is in the total
        }
        return matched;
    }

    /// Hashes the whole file and reports a digest other than the listed one
    /// (unless `repairable`); true if it matches.
    fn checkHash(job: *const FileJob, where: Problem, file: std.Io.File) bool {
        assert(where.file.len > 0);
        const io = system.io();
        const verifier = job.verifier;
        const buffer = std.heap.c_allocator.alloc(u8, hash_chunk_bytes) catch {
            verifier.report(where, "out of memory while hashing {s}", .{where.file});
            return false;
        };
        defer std.heap.c_allocator.free(buffer);
        var hasher = sha256.Hasher.init();
        var offset: u64 = 0;
        while (true) {
            const read = file.readPositionalAll(io, buffer, offset) catch |err| {
                verifier.report(
                    where,
                    "cannot read {s} at offset {d}: {f}",
                    .{ where.file, offset, error_words.of(err) },
                );
                return false;
            };
            assert(read <= buffer.len);
            hasher.update(buffer[0..read]);
            offset += read;
            _ = verifier.bytes_done.fetchAdd(read, .monotonic);
            if (read < buffer.len) break;
        }
        const matched = std.mem.eql(u8, &hasher.final(), &job.digest);
        if (!matched and !job.repairable()) {
            verifier.report(
                where,
                "checksum mismatch: {s}: SHA-256 does not match the manifest",
                .{where.file},
            );
        }
        return matched;
    }
};

/// Pass 2 for a range of samples: each read and checked as a read checks it.
const RecordJob = struct {
    job: thread_pool.Job = .{ .run = run },
    verifier: *Verifier,
    cache: *const Cache,
    first: u64,
    end: u64,
    payload_totals: []std.atomic.Value(u64),
    /// Set for a shard with a record that could not be read: its total is not compared.
    shard_failed: []std.atomic.Value(bool),
    group: *thread_pool.WaitGroup,

    fn run(job: *thread_pool.Job) void {
        const record_job: *RecordJob = @fieldParentPtr("job", job);
        defer record_job.group.finish();
        record_job.check() catch |err| {
            record_job.verifier.report(
                .{ .file = "", .message = "" },
                "records {d}..{d} not checked: {f}",
                .{ record_job.first, record_job.end - 1, error_words.of(err) },
            );
        };
    }

    fn check(job: *RecordJob) error{OutOfMemory}!void {
        assert(job.first < job.end);
        const allocator = job.verifier.allocator;
        var scratch: record_read.Scratch = .{};
        defer scratch.deinit(allocator);
        var payload: std.ArrayList(u8) = .empty;
        defer payload.deinit(allocator);
        var metadata: std.ArrayList(u8) = .empty;
        defer metadata.deinit(allocator);
        const columns = try column_builder.initAll(allocator, job.cache.schema());
        defer {
            column_builder.deinitAll(allocator, columns);
            allocator.free(columns);
        }
        const output: record_read.Output = .{
            .allocator = allocator,
            .payload = &payload,
            .metadata_json = &metadata,
            .columns = columns,
        };
        var sample_id = job.first;
        while (sample_id < job.end) : (sample_id += 1) {
            payload.clearRetainingCapacity();
            metadata.clearRetainingCapacity();
            for (columns) |*column| column.clear();
            try job.checkSample(sample_id, &scratch, output);
        }
    }

    /// Reads sample `sample_id` into the emptied `output`; reports it if it
    /// fails its checks, else adds its payload to its shard's total.
    fn checkSample(
        job: *RecordJob,
        sample_id: u64,
        scratch: *record_read.Scratch,
        output: record_read.Output,
    ) error{OutOfMemory}!void {
        assert(output.payload.items.len == 0);
        const cache = job.cache;
        const location = cache.locate(sample_id);
        const listed = location.shard_name != null;
        const shard_len = if (listed) cache.shards.byteLen(location.shard_id) else 0;
        _ = job.verifier.bytes_done.fetchAdd(@min(location.record_len, shard_len), .monotonic);
        const request: record_read.Request = .{
            .sample_id = sample_id,
            .run_samples = job.end - sample_id,
        };
        var diagnostic: Diagnostic = .{};
        const deferred = cache.readSample(request, scratch, output, &diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            var name: [64]u8 = undefined;
            const file = if (location.shard_name) |shard|
                std.fmt.bufPrint(&name, "{s}/{s}", .{ cache_layout.shards_dir, shard }) catch
                    unreachable
            else
                cache_layout.index_file;
            const where: Problem = .{
                .file = file,
                .sample_id = sample_id,
                .offset = location.offset,
                .message = "",
            };
            job.verifier.report(where, "{s}", .{diagnostic.message()});
            if (listed) job.shard_failed[@intCast(location.shard_id)].store(true, .monotonic);
            return;
        };
        // Read whole (nothing is deferred without a deferral size), from a listed shard.
        assert(deferred == null);
        assert(listed);
        const total = &job.payload_totals[@intCast(location.shard_id)];
        _ = total.fetchAdd(output.payload.items.len, .monotonic);
    }
};
