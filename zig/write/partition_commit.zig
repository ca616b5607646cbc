//! Committing a cache built in partitions (`drt_partitions_commit`,
//! `dataset_rt.commit_partitions`): one cache made of the sealed partition
//! caches under `<base>/tmp/partitions/<name>/`, in ascending partition order.
//!
//! Each partition was written as a complete cache named `<name>` inside its
//! attempt directory `part-NNNNNN.<attempt>/` by the ordinary writer. The
//! commit holds the name's writer lock (`staging.zig`), refuses an existing
//! `<base>/<name>` (unless a commit of these partitions published it already:
//! `committed.json` names its manifest's SHA-256 and the partitions' digest,
//! committed_record.zig), verifies each partition's manifest against
//! the SHA-256 its pointer recorded and its index.bin, records.crc32c and
//! metadata.arrow against their manifest digests (shards are not hashed again:
//! the writer hashed them as it wrote them; their sizes are checked), requires
//! one format version and one metadata schema, then writes the joined
//! index.bin (shard ids renumbered), records.crc32c and metadata.arrow and the
//! manifest into its own staging directory, hard-links the partitions' shard
//! files into its `shards/` (renames them where hard links fail; no payload is
//! copied; a failure renames them back), fsyncs, records `committed.json` and
//! publishes by renaming the staging directory to `<base>/<name>`; then it
//! removes the partitions' attempt directories.
const std = @import("std");
const assert = std.debug.assert;
const system = @import("../base/system.zig");
const durable_files = @import("../base/durable_files.zig");
const file_status = @import("../base/file_status.zig");
const directory_entries = @import("../base/directory_entries.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const sha256 = @import("../codec/sha256.zig");
const cache_layout = @import("../format/cache_layout.zig");
const cache_identity = @import("../format/cache_identity.zig");
const committed_record = @import("committed_record.zig");
const manifest = @import("../format/manifest.zig");
const index_file = @import("../format/index_file.zig");
const record_checksums = @import("../format/record_checksums.zig");
const arrow_ipc_read = @import("../format/arrow_ipc_read.zig");
const arrow_ipc_write = @import("../format/arrow_ipc_write.zig");
const types = @import("../format/metadata_types.zig");
const column_builder = @import("../format/column_builder.zig");
const Staging = @import("staging.zig").Staging;

pub const Error = error{
    InvalidArgument,
    InvalidCache,
    InvalidInput,
    Io,
    OutOfMemory,
    AlreadyExists,
};

/// Where partitions are staged under the base folder: `<partitions_dir>/<name>/`.
pub const partitions_dir = cache_layout.staging_dir ++ "/partitions";
/// The record of a published commit in the partitions folder of its name.
pub const committed_file = "committed.json";

/// One partition as its pointer file sealed it.
pub const Part = struct {
    /// The attempt whose cache is `part-NNNNNN.<attempt>/<name>`; null for a
    /// partition of no samples, which has no cache and contributes nothing.
    attempt: ?[]const u8,
    sample_count: u64,
    /// The SHA-256 of the attempt's manifest.json when it was sealed.
    manifest_sha256: [32]u8,
};

/// What the commit did: published the cache, or found it published by an
/// earlier commit of the same partitions (its `committed.json` names the
/// published manifest and these partitions).
pub const Outcome = enum(u32) { published = 0, already_published = 1 };

/// The most partitions one commit joins.
pub const parts_max = 1 << 20;

/// Commits `parts` (partition i is `parts[i]`) as the cache `<base_path>/<name>`;
/// see the file's comment.
pub fn commit(
    allocator: std.mem.Allocator,
    base_path: []const u8,
    name: []const u8,
    parts: []const Part,
    diagnostic: *Diagnostic,
) Error!Outcome {
    try checkArguments(name, parts, diagnostic);
    const target_path = try std.fmt.allocPrint(allocator, "{s}/{s}", .{ base_path, name });
    defer allocator.free(target_path);
    var staging = Staging.open(allocator, base_path, name, target_path, diagnostic) catch |err| {
        if (err != error.AlreadyExists) return err;
        if (try publishedByCommit(allocator, base_path, name, parts)) return .already_published;
        return err;
    };
    var published = false;
    defer staging.deinit(published);
    var join: Join = .{ .allocator = allocator, .name = name, .staging = &staging };
    defer join.deinit();
    try join.load(parts, diagnostic);
    if (join.sample_count == 0) {
        const phrase = "cache source yielded no samples: all {d} partitions of '{s}' are " ++
            "empty, and a cache needs at least one";
        diagnostic.set(phrase, .{ parts.len, name });
        return error.InvalidInput;
    }
    const manifest_sha256 = try join.writeFiles(diagnostic);
    try join.moveShards(diagnostic);
    errdefer join.moveShardsBack();
    try staging.syncDirs(diagnostic);
    const parts_sha256 = committed_record.partsDigest(parts);
    try writeCommitted(&staging, name, manifest_sha256, parts_sha256, diagnostic);
    try staging.publish(diagnostic);
    published = true;
    durable_files.syncDir(staging.base_dir, "the cache directory", diagnostic) catch {};
    join.removeAttempts();
    return .published;
}

fn checkArguments(name: []const u8, parts: []const Part, diagnostic: *Diagnostic) Error!void {
    if (durable_files.plainSegmentProblem(name)) |problem| {
        diagnostic.set("source name '{s}' {s}", .{ name, problem });
        return error.InvalidArgument;
    }
    if (std.mem.eql(u8, name, cache_layout.staging_dir)) {
        diagnostic.set("source name 'tmp' is reserved for the writer's staging area", .{});
        return error.InvalidArgument;
    }
    if (parts.len == 0 or parts.len > parts_max) {
        diagnostic.set("{d} partitions given; 1 to {d} are supported", .{ parts.len, parts_max });
        return error.InvalidArgument;
    }
    for (parts, 0..) |part, number| {
        const attempt = part.attempt orelse {
            if (part.sample_count == 0) continue;
            const phrase = "partition {d} has {d} samples but no attempt";
            diagnostic.set(phrase, .{ number, part.sample_count });
            return error.InvalidArgument;
        };
        if (durable_files.plainSegmentProblem(attempt)) |problem| {
            diagnostic.set("partition {d}: attempt '{s}' {s}", .{ number, attempt, problem });
            return error.InvalidArgument;
        }
    }
}

/// The partitions' caches, loaded and checked, and the joined cache's shards.
const Join = struct {
    allocator: std.mem.Allocator,
    name: []const u8,
    staging: *Staging,
    loaded: std.ArrayList(Loaded) = .empty,
    sample_count: u64 = 0,
    shard_count: u64 = 0,
    /// Per shard placed into the staging directory so far, in order: true when
    /// it was renamed there (the partition lost it), false when hard-linked.
    renamed: std.ArrayList(bool) = .empty,

    fn deinit(join: *Join) void {
        join.renamed.deinit(join.allocator);
        for (join.loaded.items) |*loaded| loaded.deinit(join.allocator);
        join.loaded.deinit(join.allocator);
    }

    /// Loads every partition with samples and checks they form one cache.
    fn load(join: *Join, parts: []const Part, diagnostic: *Diagnostic) Error!void {
        for (parts, 0..) |part, number| {
            const attempt = part.attempt orelse continue;
            try join.loaded.ensureUnusedCapacity(join.allocator, 1);
            var loaded = try Loaded.open(join, number, attempt, part, diagnostic);
            errdefer loaded.deinit(join.allocator);
            if (join.loaded.items.len > 0) {
                try sameLayout(&join.loaded.items[0], &loaded, diagnostic);
            }
            join.sample_count += loaded.parsed.manifest.sample_count;
            join.shard_count += loaded.parsed.manifest.shards.len;
            join.loaded.appendAssumeCapacity(loaded);
        }
        if (join.shard_count > manifest.shards_max) {
            const phrase = "the partitions hold {d} shards together, more than the {d} one " ++
                "manifest.json can list; write them with a larger max_shard_bytes";
            diagnostic.set(phrase, .{ join.shard_count, manifest.shards_max });
            return error.InvalidInput;
        }
    }

    /// Writes the joined index.bin, records.crc32c, metadata.arrow and
    /// manifest.json into the staging directory, each fsynced; returns the
    /// manifest's SHA-256.
    fn writeFiles(join: *Join, diagnostic: *Diagnostic) Error![32]u8 {
        const allocator = join.allocator;
        const first = &join.loaded.items[0].parsed.manifest;
        const index = try join.joinedIndex(diagnostic);
        defer allocator.free(index);
        const index_sha256 = try join.writeSynced(cache_layout.index_file, index, diagnostic);
        var checksums: ?manifest.RecordChecksums = null;
        if (first.record_checksums != null) {
            var joined: std.ArrayList(u8) = .empty;
            defer joined.deinit(allocator);
            for (join.loaded.items) |*loaded| try joined.appendSlice(allocator, loaded.checksums);
            const file = cache_layout.record_checksums_file;
            const digest = try join.writeSynced(file, joined.items, diagnostic);
            checksums = .{ .byte_len = joined.items.len, .sha256 = digest };
        }
        const metadata = try join.joinedMetadata(diagnostic);
        defer allocator.free(metadata);
        const metadata_file = cache_layout.metadata_file;
        const metadata_sha256 = try join.writeSynced(metadata_file, metadata, diagnostic);
        const names = try allocator.alloc(cache_layout.ShardName, join.shard_count);
        defer allocator.free(names);
        const shards = try allocator.alloc(manifest.Shard, join.shard_count);
        defer allocator.free(shards);
        var position: u64 = 0;
        for (join.loaded.items) |*loaded| for (loaded.parsed.manifest.shards) |shard| {
            names[position] = .of(position);
            shards[position] = shard;
            shards[position].name = names[position].slice();
            position += 1;
        };
        const text = try manifest.write(allocator, .{
            .format_version = first.format_version,
            .cache_id = first.cache_id,
            .source_name = join.name,
            .sample_count = join.sample_count,
            .metadata_schema = first.metadata_schema,
            .metadata_sha256 = metadata_sha256,
            .index_sha256 = index_sha256,
            .shards = shards,
            .record_checksums = checksums,
        });
        defer allocator.free(text);
        if (text.len > manifest.manifest_bytes_max) {
            diagnostic.set("manifest.json would take {d} bytes, more than a reader accepts", .{
                text.len,
            });
            return error.InvalidInput;
        }
        return join.writeSynced(cache_layout.manifest_file, text, diagnostic);
    }

    fn writeSynced(
        join: *Join,
        name: []const u8,
        bytes: []const u8,
        diagnostic: *Diagnostic,
    ) Error![32]u8 {
        const file = try join.staging.writeFile(name, bytes, diagnostic);
        defer file.close(system.io());
        file.sync(system.io()) catch |err| {
            diagnostic.set("cannot fsync {s}: {f}", .{ name, error_words.of(err) });
            return error.Io;
        };
        return sha256.hash(bytes);
    }

    /// The partitions' index rows in order, each shard id moved past the
    /// shards of the partitions before it (offsets stay: the shards move whole).
    fn joinedIndex(join: *Join, diagnostic: *Diagnostic) Error![]u8 {
        const bytes = try join.allocator.alloc(u8, join.sample_count * index_file.row_bytes);
        errdefer join.allocator.free(bytes);
        var row_start: usize = 0;
        var shard_base: u64 = 0;
        for (join.loaded.items) |*loaded| {
            const shard_count = loaded.parsed.manifest.shards.len;
            for (0..loaded.parsed.manifest.sample_count) |sample_id| {
                var row = index_file.decodeRow(loaded.index, sample_id);
                if (row.shard_id >= shard_count) {
                    diagnostic.set("partition {d}: index.bin row {d} names shard {d} of {d}", .{
                        loaded.number, sample_id, row.shard_id, shard_count,
                    });
                    return error.InvalidCache;
                }
                row.shard_id += shard_base;
                index_file.encodeRow(row, bytes[row_start..][0..index_file.row_bytes]);
                row_start += index_file.row_bytes;
            }
            shard_base += shard_count;
        }
        assert(row_start == bytes.len);
        return bytes;
    }

    /// The partitions' metadata tables one after the other, as metadata.arrow.
    fn joinedMetadata(join: *Join, diagnostic: *Diagnostic) Error![]u8 {
        const allocator = join.allocator;
        const schema = join.loaded.items[0].parsed.manifest.metadata_schema;
        const builders = try column_builder.initAll(allocator, schema);
        defer {
            column_builder.deinitAll(allocator, builders);
            allocator.free(builders);
        }
        for (join.loaded.items) |*loaded| {
            for (schema, builders) |field, *builder| {
                const values = loaded.column(field.name).?;
                try builder.appendValues(allocator, values);
            }
        }
        const columns = try allocator.alloc(types.Column, schema.len);
        defer allocator.free(columns);
        for (columns, schema, builders) |*column, field, *builder| {
            column.* = .{ .name = field.name, .values = builder.view() };
        }
        return arrow_ipc_write.writeFile(allocator, columns, join.sample_count) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.set("the joined metadata table is too large for an Arrow IPC file", .{});
            return error.InvalidInput;
        };
    }

    /// Places every partition's shards, in order, into the staging directory's
    /// shards/ under their new names: hard-linked, so that the partition keeps
    /// its files until the cache is published (a commit that dies on the way
    /// can run again), or renamed where the system has no hard links. On
    /// failure the renamed ones are renamed back. No payload is copied.
    fn moveShards(join: *Join, diagnostic: *Diagnostic) Error!void {
        errdefer join.moveShardsBack();
        try join.renamed.ensureTotalCapacityPrecise(join.allocator, join.shard_count);
        const io = system.io();
        const base_dir = join.staging.base_dir;
        for (join.loaded.items) |*loaded| for (loaded.parsed.manifest.shards) |shard| {
            const into = try join.finalShardPath(join.renamed.items.len);
            defer join.allocator.free(into);
            const from = try loaded.shardPath(join.allocator, shard.name);
            defer join.allocator.free(from);
            const linked = link: {
                const link = std.Io.Dir.hardLink;
                link(base_dir, from, base_dir, into, io, .{}) catch break :link false;
                break :link true;
            };
            if (linked) {
                join.renamed.appendAssumeCapacity(false);
                continue;
            }
            join.rename(from, into) catch |err| {
                diagnostic.set("partition {d}: cannot link or move {s}{s} to {s}{s}: {f}", .{
                    loaded.number,              join.staging.baseDirPath(), from,
                    join.staging.baseDirPath(), into,                       error_words.of(err),
                });
                return error.Io;
            };
            join.renamed.appendAssumeCapacity(true);
        };
    }

    /// Undoes `moveShards` as far as it got: renames back what it renamed
    /// (best effort: a failure here leaves the shard in the staging directory,
    /// which is then removed); links go with the staging directory.
    fn moveShardsBack(join: *Join) void {
        var position: usize = 0;
        for (join.loaded.items) |*loaded| for (loaded.parsed.manifest.shards) |shard| {
            if (position >= join.renamed.items.len) break;
            defer position += 1;
            if (!join.renamed.items[position]) continue;
            const into = join.finalShardPath(position) catch break;
            defer join.allocator.free(into);
            const from = loaded.shardPath(join.allocator, shard.name) catch break;
            defer join.allocator.free(from);
            join.rename(into, from) catch {};
        };
        join.renamed.clearRetainingCapacity();
    }

    fn finalShardPath(join: *Join, position: u64) error{OutOfMemory}![]u8 {
        const shard_name = cache_layout.ShardName.of(position);
        return std.fmt.allocPrint(join.allocator, "{s}/{s}/{s}", .{
            join.staging.name, cache_layout.shards_dir, shard_name.slice(),
        });
    }

    fn rename(join: *Join, from: []const u8, into: []const u8) !void {
        const staging = join.staging;
        const io = system.io();
        try directory_entries.rename(io, staging.base_dir, staging.baseDirPath(), from, into);
    }

    /// Removes the committed attempts' directories (best effort: the cache is
    /// published, and a leftover is only disk space under tmp/).
    fn removeAttempts(join: *Join) void {
        const staging = join.staging;
        for (join.loaded.items) |*loaded| {
            const path = loaded.attemptPath(join.allocator) catch return;
            defer join.allocator.free(path);
            const base_path = staging.baseDirPath();
            directory_entries.deleteTree(system.io(), staging.base_dir, base_path, path);
        }
    }
};

/// One partition's cache, read and verified.
const Loaded = struct {
    number: u64,
    name: []const u8,
    attempt: []const u8,
    /// The partition's cache directory, relative to the base folder.
    cache_path: []u8,
    parsed: manifest.Parsed,
    index: []u8,
    checksums: []u8,
    table: arrow_ipc_read.Table,

    fn open(
        join: *Join,
        number: u64,
        attempt: []const u8,
        part: Part,
        diagnostic: *Diagnostic,
    ) Error!Loaded {
        const allocator = join.allocator;
        const base_dir = join.staging.base_dir;
        const cache_path = try std.fmt.allocPrint(allocator, "{s}/{s}/part-{d:0>6}.{s}/{s}", .{
            partitions_dir, join.name, number, attempt, join.name,
        });
        errdefer allocator.free(cache_path);
        const io = system.io();
        var dir = base_dir.openDir(io, cache_path, .{}) catch |err| {
            diagnostic.set("partition {d}: cannot open its cache {s}{s}: {f}", .{
                number, join.staging.baseDirPath(), cache_path, error_words.of(err),
            });
            return if (file_status.missing(err)) error.InvalidCache else error.Io;
        };
        defer dir.close(io);
        var reader: PartReader = .{ .allocator = allocator, .dir = dir, .number = number };
        const bytes_max = manifest.manifest_bytes_max;
        const text = try reader.read(cache_layout.manifest_file, bytes_max, diagnostic);
        defer allocator.free(text);
        if (!std.mem.eql(u8, &sha256.hash(text), &part.manifest_sha256)) {
            const phrase = "partition {d}: manifest.json of attempt {s} is not the one its " ++
                "pointer sealed (its SHA-256 differs)";
            diagnostic.set(phrase, .{ number, attempt });
            return error.InvalidCache;
        }
        var parsed = manifest.parse(allocator, text, diagnostic) catch |err| {
            diagnostic.prefix("partition {d}: manifest.json: ", .{number});
            return if (err == error.OutOfMemory) error.OutOfMemory else error.InvalidCache;
        };
        errdefer parsed.deinit();
        try checkManifest(&parsed.manifest, number, join.name, part.sample_count, diagnostic);
        var loaded: Loaded = .{
            .number = number,
            .name = join.name,
            .attempt = attempt,
            .cache_path = cache_path,
            .parsed = parsed,
            .index = &.{},
            .checksums = &.{},
            .table = undefined,
        };
        try loaded.readFiles(&reader, diagnostic);
        return loaded;
    }

    fn readFiles(loaded: *Loaded, reader: *PartReader, diagnostic: *Diagnostic) Error!void {
        const allocator = reader.allocator;
        const listed = &loaded.parsed.manifest;
        const index_bytes = listed.sample_count * index_file.row_bytes;
        const index_name = cache_layout.index_file;
        const index_digest = listed.index_sha256;
        loaded.index = try reader.verified(index_name, index_bytes, index_digest, diagnostic);
        errdefer allocator.free(loaded.index);
        if (listed.record_checksums) |checksums| {
            const file = cache_layout.record_checksums_file;
            const len = checksums.byte_len;
            loaded.checksums = try reader.verified(file, len, checksums.sha256, diagnostic);
        }
        errdefer allocator.free(loaded.checksums);
        const metadata_name = cache_layout.metadata_file;
        const digest = listed.metadata_sha256;
        const metadata = try reader.verified(metadata_name, null, digest, diagnostic);
        defer allocator.free(metadata);
        loaded.table = arrow_ipc_read.readFile(allocator, metadata, diagnostic) catch |err| {
            diagnostic.prefix("partition {d}: metadata.arrow: ", .{loaded.number});
            return if (err == error.OutOfMemory) error.OutOfMemory else error.InvalidCache;
        };
        errdefer loaded.table.deinit();
        try loaded.checkTable(diagnostic);
        for (listed.shards) |shard| try reader.checkShard(shard, diagnostic);
    }

    /// The table holds `sample_count` rows and exactly the schema's columns.
    fn checkTable(loaded: *const Loaded, diagnostic: *Diagnostic) Error!void {
        const listed = &loaded.parsed.manifest;
        if (loaded.table.row_count != listed.sample_count) {
            const phrase = "partition {d}: metadata.arrow has {d} rows, the manifest {d} samples";
            diagnostic.set(phrase, .{
                loaded.number, loaded.table.row_count, listed.sample_count,
            });
            return error.InvalidCache;
        }
        if (loaded.table.columns.len != listed.metadata_schema.len) {
            diagnostic.set("partition {d}: metadata.arrow has {d} columns, the manifest {d}", .{
                loaded.number, loaded.table.columns.len, listed.metadata_schema.len,
            });
            return error.InvalidCache;
        }
        for (listed.metadata_schema) |field| {
            const values = loaded.column(field.name) orelse {
                const phrase = "partition {d}: metadata.arrow has no column '{s}'";
                diagnostic.set(phrase, .{ loaded.number, field.name });
                return error.InvalidCache;
            };
            if (std.meta.activeTag(values) == field.kind) continue;
            const phrase = "partition {d}: metadata.arrow column '{s}' is not {s}";
            diagnostic.set(phrase, .{ loaded.number, field.name, field.kind.name() });
            return error.InvalidCache;
        }
    }

    fn column(loaded: *const Loaded, name: []const u8) ?types.ColumnValues {
        for (loaded.table.columns) |candidate| {
            if (std.mem.eql(u8, candidate.name, name)) return candidate.values;
        }
        return null;
    }

    fn attemptPath(loaded: *const Loaded, allocator: std.mem.Allocator) error{OutOfMemory}![]u8 {
        return std.fmt.allocPrint(allocator, "{s}/{s}/part-{d:0>6}.{s}", .{
            partitions_dir, loaded.name, loaded.number, loaded.attempt,
        });
    }

    fn shardPath(
        loaded: *const Loaded,
        allocator: std.mem.Allocator,
        shard_name: []const u8,
    ) error{OutOfMemory}![]u8 {
        return std.fmt.allocPrint(allocator, "{s}/{s}/{s}", .{
            loaded.cache_path, cache_layout.shards_dir, shard_name,
        });
    }

    fn deinit(loaded: *Loaded, allocator: std.mem.Allocator) void {
        allocator.free(loaded.cache_path);
        allocator.free(loaded.index);
        allocator.free(loaded.checksums);
        loaded.table.deinit();
        loaded.parsed.deinit();
        loaded.* = undefined;
    }
};

/// A partition's manifest is the one its pointer sealed for a cache of this name.
fn checkManifest(
    listed: *const manifest.Manifest,
    number: u64,
    name: []const u8,
    sample_count: u64,
    diagnostic: *Diagnostic,
) Error!void {
    if (!std.mem.eql(u8, listed.source_name, name)) {
        diagnostic.set("partition {d}: its cache is named '{s}', not '{s}'", .{
            number, listed.source_name, name,
        });
        return error.InvalidCache;
    }
    if (listed.sample_count != sample_count) {
        diagnostic.set("partition {d}: its cache holds {d} samples, its pointer says {d}", .{
            number, listed.sample_count, sample_count,
        });
        return error.InvalidCache;
    }
    if (listed.cache_id) |cache_id| if (cache_id != cache_identity.fromSourceName(name)) {
        diagnostic.set("partition {d}: cache_id {d} is not the one of the name '{s}'", .{
            number, cache_id, name,
        });
        return error.InvalidCache;
    };
}

/// Partitions of one cache share the format version, the metadata schema and
/// whether records are checksummed.
fn sameLayout(first: *const Loaded, other: *const Loaded, diagnostic: *Diagnostic) Error!void {
    const a = &first.parsed.manifest;
    const b = &other.parsed.manifest;
    if (a.format_version != b.format_version) {
        diagnostic.set("partitions {d} and {d} have different format versions: {d} and {d}", .{
            first.number, other.number, a.format_version, b.format_version,
        });
        return error.InvalidInput;
    }
    if (types.schemaDifference(a.metadata_schema, b.metadata_schema)) |difference| {
        const phrase = "partitions {d} and {d} have different metadata schemas: column '{s}' " ++
            "is {s} in partition {d} and {s} in partition {d}";
        diagnostic.set(phrase, .{
            first.number,    other.number,
            difference.name, kindWords(difference.first),
            first.number,    kindWords(difference.second),
            other.number,
        });
        return error.InvalidInput;
    }
    if ((a.record_checksums == null) != (b.record_checksums == null)) {
        diagnostic.set("partitions {d} and {d}: only one of them has records.crc32c", .{
            first.number, other.number,
        });
        return error.InvalidInput;
    }
}

fn kindWords(kind: ?types.Kind) []const u8 {
    return if (kind) |known| known.name() else "missing";
}

/// Reads a partition cache's files, each checked against its manifest entry.
const PartReader = struct {
    allocator: std.mem.Allocator,
    dir: std.Io.Dir,
    number: u64,

    fn read(
        reader: *PartReader,
        name: []const u8,
        bytes_max: u64,
        diagnostic: *Diagnostic,
    ) Error![]u8 {
        return file_status.readAlloc(reader.allocator, reader.dir, name, bytes_max) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.set("partition {d}: cannot read {s}: {f}", .{
                reader.number, name, error_words.of(err),
            });
            return if (file_status.missing(err) or err == error.FileTooBig)
                error.InvalidCache
            else
                error.Io;
        };
    }

    /// The file `name`, which must be `expected_len` bytes (when given) with `digest`.
    fn verified(
        reader: *PartReader,
        name: []const u8,
        expected_len: ?u64,
        digest: [32]u8,
        diagnostic: *Diagnostic,
    ) Error![]u8 {
        const bytes = try reader.read(name, expected_len orelse std.math.maxInt(u64), diagnostic);
        errdefer reader.allocator.free(bytes);
        if (expected_len) |len| if (bytes.len != len) {
            diagnostic.set("partition {d}: {s} has {d} bytes, its manifest says {d}", .{
                reader.number, name, bytes.len, len,
            });
            return error.InvalidCache;
        };
        if (!std.mem.eql(u8, &sha256.hash(bytes), &digest)) {
            diagnostic.set("partition {d}: {s} does not match its SHA-256 in manifest.json", .{
                reader.number, name,
            });
            return error.InvalidCache;
        }
        return bytes;
    }

    fn checkShard(reader: *PartReader, shard: manifest.Shard, diagnostic: *Diagnostic) Error!void {
        var path_buffer: [cache_layout.shard_name_bytes_max + 8]u8 = undefined;
        const folder = cache_layout.shards_dir;
        const path = std.fmt.bufPrint(&path_buffer, "{s}/{s}", .{ folder, shard.name }) catch
            unreachable;
        const len = file_status.pathLength(reader.dir, path) catch |err| {
            const words = error_words.of(err);
            diagnostic.set("partition {d}: cannot stat {s}: {f}", .{ reader.number, path, words });
            return if (file_status.missing(err)) error.InvalidCache else error.Io;
        };
        if (len != shard.byte_len) {
            diagnostic.set("partition {d}: {s} has {d} bytes, its manifest says {d}", .{
                reader.number, path, len, shard.byte_len,
            });
            return error.InvalidCache;
        }
    }
};

/// Records, before publishing, which manifest this commit publishes: written
/// to a temporary file, fsynced, renamed to `committed.json`.
fn writeCommitted(
    staging: *Staging,
    name: []const u8,
    manifest_sha256: [32]u8,
    parts_sha256: [32]u8,
    diagnostic: *Diagnostic,
) Error!void {
    const allocator = staging.allocator;
    const io = system.io();
    var buffer: committed_record.Buffer = undefined;
    const text = committed_record.text(&buffer, manifest_sha256, parts_sha256);
    const folder = try std.fmt.allocPrint(allocator, "{s}/{s}", .{ partitions_dir, name });
    defer allocator.free(folder);
    var dir = staging.base_dir.createDirPathOpen(io, folder, .{}) catch |err| {
        const words = error_words.of(err);
        diagnostic.set("cannot create {s}{s}: {f}", .{ staging.baseDirPath(), folder, words });
        return error.Io;
    };
    defer dir.close(io);
    var temporary_buffer: [64]u8 = undefined;
    const temporary = std.fmt.bufPrint(&temporary_buffer, "{d}.{x}.committed", .{
        system.processId(), system.monotonicNanoseconds(),
    }) catch unreachable;
    const file = try durable_files.writeFile(dir, temporary, text, diagnostic);
    const synced = file.sync(io);
    file.close(io);
    synced catch |err| {
        dir.deleteFile(io, temporary) catch {};
        diagnostic.set("cannot fsync {s}/{s}: {f}", .{ folder, temporary, error_words.of(err) });
        return error.Io;
    };
    // The folder's path as the process opened it, for the kernel32 fallback under wine.
    const folder_path = try std.fmt.allocPrint(allocator, "{s}{s}/", .{
        staging.baseDirPath(), folder,
    });
    defer allocator.free(folder_path);
    directory_entries.replaceFile(io, dir, folder_path, temporary, committed_file) catch |err| {
        dir.deleteFile(io, temporary) catch {};
        const words = error_words.of(err);
        const phrase = "cannot rename {s}/{s} to {s}: {f}";
        diagnostic.set(phrase, .{ folder, temporary, committed_file, words });
        return error.Io;
    };
    try durable_files.syncDir(dir, folder, diagnostic);
}

/// Whether `<base>/<name>` is the cache a commit of these partitions
/// published: `committed.json` names the SHA-256 of its manifest.json and
/// `parts`' digest (`committed_record.matches`). With `parts` unknown, and for a
/// `committed.json` of an earlier version (no digest), the manifest decides.
fn publishedByCommit(
    allocator: std.mem.Allocator,
    base_path: []const u8,
    name: []const u8,
    parts: []const Part,
) error{OutOfMemory}!bool {
    const io = system.io();
    var base_dir = std.Io.Dir.cwd().openDir(io, base_path, .{}) catch return false;
    defer base_dir.close(io);
    const manifest_file = cache_layout.manifest_file;
    const manifest_path = try std.fmt.allocPrint(allocator, "{s}/{s}", .{ name, manifest_file });
    defer allocator.free(manifest_path);
    const bytes_max = manifest.manifest_bytes_max;
    const text = file_status.readAlloc(allocator, base_dir, manifest_path, bytes_max) catch |err| {
        if (err == error.OutOfMemory) return error.OutOfMemory;
        return false;
    };
    defer allocator.free(text);
    const committed_path = try std.fmt.allocPrint(allocator, "{s}/{s}/{s}", .{
        partitions_dir, name, committed_file,
    });
    defer allocator.free(committed_path);
    var buffer: committed_record.Buffer = undefined;
    const recorded = base_dir.readFile(io, committed_path, &buffer) catch return false;
    return committed_record.matches(recorded, sha256.hash(text), parts);
}

test {
    _ = @import("partition_commit_test.zig");
    _ = @import("committed_record.zig");
}
