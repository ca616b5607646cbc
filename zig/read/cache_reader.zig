//! Opens one published cache and reads its records.
//!
//! Opening validates everything that is O(manifest) — manifest fields, index
//! size, metadata table shape, shard existence and lengths — and, when asked,
//! every SHA-256. Reading a sample checks its index row against the shard, every
//! length inside the record, the embedded JSON against the metadata.arrow row,
//! and the LZ4 block; any mismatch is an error naming the cache and the sample.
const std = @import("std");
const assert = std.debug.assert;
const cache_layout = @import("../format/cache_layout.zig");
const builtin = @import("builtin");
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const metadata_verify = @import("../format/metadata_verify.zig");
const manifest = @import("../format/manifest.zig");
const arrow_ipc_read = @import("../format/arrow_ipc_read.zig");
const sha256 = @import("../codec/sha256.zig");
const file_status = @import("../base/file_status.zig");
const positional_read = @import("../base/positional_read.zig");
const FileView = @import("../base/file_view.zig").FileView;
const ShardMapping = @import("shard_mapping.zig").ShardMapping;
const index_file = @import("../format/index_file.zig");
const shard_record = @import("../format/shard_record.zig");
const record_checksums = @import("../format/record_checksums.zig");
const ColumnBuilder = @import("../format/column_builder.zig").ColumnBuilder;
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;

pub const Error = error{ InvalidCache, Io, OutOfMemory };

/// Files larger than this are not plausible for a manifest and are rejected before reading.
const manifest_bytes_max = manifest.manifest_bytes_max;
const hash_chunk_bytes = 4 << 20;

pub const Shard = struct {
    file: std.Io.File,
    byte_len: u64,
    compression: shard_record.Compression,
};

pub const Cache = struct {
    allocator: std.mem.Allocator,
    path: []u8,
    parsed: manifest.Parsed,
    index_map: ?FileView,
    /// records.crc32c, when the manifest lists it: every record read is checked against it.
    checksums_map: ?FileView,
    table: arrow_ipc_read.Table,
    /// metadata.arrow columns in schema (name) order.
    columns: []types.Column,
    shards: []Shard,
    shard_byte_lens: []u64,
    /// Per shard, its read-only mapping once `mappedPayload` needed it (one
    /// reference held by the cache); made under `mappings_mutex`.
    mappings: []?*ShardMapping,
    mappings_mutex: std.Io.Mutex = .init,
    /// SHA-256 of manifest.json's bytes: names this cache's content in resume states.
    manifest_sha256: [sha256.digest_length]u8,

    pub fn schema(cache: *const Cache) []const types.Field {
        return cache.parsed.manifest.metadata_schema;
    }

    pub fn sampleCount(cache: *const Cache) u64 {
        return cache.parsed.manifest.sample_count;
    }

    fn indexBytes(cache: *const Cache) []const u8 {
        const map = cache.index_map orelse return &.{};
        return map.bytes[0..@intCast(cache.sampleCount() * index_file.row_bytes)];
    }

    /// Whether the cache has records.crc32c (written by this writer, not by dataset-rt's).
    pub fn hasRecordChecksums(cache: *const Cache) bool {
        return cache.checksums_map != null;
    }

    /// The bytes of records.crc32c, if the cache has it.
    fn recordChecksumBytes(cache: *const Cache) ?[]const u8 {
        const map = cache.checksums_map orelse return null;
        return map.bytes[0..@intCast(record_checksums.entryOffset(cache.sampleCount()))];
    }

    /// The stored checksum of sample `sample_id`'s record, if the cache has them.
    fn recordChecksum(cache: *const Cache, sample_id: u64) ?u32 {
        const bytes = cache.recordChecksumBytes() orelse return null;
        return record_checksums.entry(bytes, sample_id);
    }

    /// Opens and validates `path`. Errors are prefixed with the cache path.
    pub fn open(allocator: std.mem.Allocator, path: []const u8, validate_hashes: bool, diagnostic: *Diagnostic) Error!*Cache {
        const cache = openUnprefixed(allocator, path, validate_hashes, diagnostic) catch |err| {
            if (err == error.OutOfMemory and diagnostic.len == 0) diagnostic.set("out of memory while opening the cache", .{});
            diagnostic.prefix("cache {s}: ", .{path});
            return err;
        };
        return cache;
    }

    fn openUnprefixed(allocator: std.mem.Allocator, path: []const u8, validate_hashes: bool, diagnostic: *Diagnostic) Error!*Cache {
        const io = system.io();
        var dir = std.Io.Dir.cwd().openDir(io, path, .{}) catch |err| {
            // The phrases dataset-rt's messages use for the same failures.
            const phrase = if (file_status.missing(err)) "missing manifest" else "I/O error";
            diagnostic.set("{s}: cannot open the cache directory: {f}", .{ phrase, error_words.of(err) });
            return fileFailure(err);
        };
        defer dir.close(io);

        const cache = try allocator.create(Cache);
        errdefer allocator.destroy(cache);
        cache.allocator = allocator;
        cache.path = try allocator.dupe(u8, path);
        errdefer allocator.free(cache.path);

        cache.parsed = try readManifest(allocator, dir, &cache.manifest_sha256, diagnostic);
        errdefer cache.parsed.deinit();
        const the_manifest = cache.parsed.manifest;

        const index_len = try index_file.expectedBytes(the_manifest.sample_count, diagnostic);
        cache.index_map = try mapListedFile(allocator, dir, cache_layout.index_file, "index row", index_len, index_file.row_bytes, the_manifest, the_manifest.index_sha256, validate_hashes, diagnostic);
        errdefer if (cache.index_map) |*map| map.close(allocator);
        cache.checksums_map = null;
        if (the_manifest.record_checksums) |listed| {
            cache.checksums_map = try mapListedFile(allocator, dir, cache_layout.record_checksums_file, "record checksum", listed.byte_len, record_checksums.checksum_bytes, the_manifest, listed.sha256, validate_hashes, diagnostic);
        }
        errdefer if (cache.checksums_map) |*map| map.close(allocator);

        cache.table = try readMetadataTable(allocator, dir, the_manifest, validate_hashes, diagnostic);
        errdefer cache.table.deinit();
        cache.columns = try orderColumns(allocator, &cache.table, the_manifest, diagnostic);
        errdefer allocator.free(cache.columns);

        try cache.openShards(dir, validate_hashes, diagnostic);
        errdefer cache.closeShards();
        if (validate_hashes) try cache.checkRecordLayout(diagnostic);
        return cache;
    }

    fn closeShards(cache: *Cache) void {
        const io = system.io();
        for (cache.shards) |shard| shard.file.close(io);
        for (cache.mappings) |mapping| if (mapping) |m| m.release();
        cache.allocator.free(cache.mappings);
        cache.allocator.free(cache.shards);
        cache.allocator.free(cache.shard_byte_lens);
    }

    /// Full validation beyond the hashes: every index row points inside its
    /// shard, records lie back to back, and each shard's decoded payload bytes
    /// add up to its manifest `uncompressed_byte_len`. Reads each record's
    /// header (O(samples) small reads), so only with validate_cache.
    fn checkRecordLayout(cache: *Cache, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const listed = cache.parsed.manifest.shards;
        const payload_totals = try cache.allocator.alloc(u64, listed.len);
        defer cache.allocator.free(payload_totals);
        @memset(payload_totals, 0);
        const index_bytes = cache.indexBytes();
        for (0..@intCast(cache.sampleCount())) |sample_index| {
            const sample_id: u64 = sample_index;
            const row = index_file.decodeRow(index_bytes, sample_id);
            try index_file.checkRow(row, sample_id, cache.shard_byte_lens, diagnostic);
            try index_file.checkContiguous(index_bytes, cache.sampleCount(), sample_id, row, cache.shard_byte_lens, diagnostic);
            const shard = cache.shards[@intCast(row.shard_id)];
            var header: [shard_record.header_bytes + shard_record.lz4_prefix_bytes]u8 = undefined;
            const head_len: usize = @intCast(@min(row.record_len, header.len));
            const read = shard.file.readPositionalAll(io, header[0..head_len], row.offset) catch |err| {
                diagnostic.set("I/O error: cannot read shard {d}: {f}", .{ row.shard_id, error_words.of(err) });
                return error.Io;
            };
            if (read != head_len or head_len < shard_record.header_bytes) {
                diagnostic.set("index.bin row {d}: record of {d} bytes is shorter than its header", .{ sample_id, row.record_len });
                return error.InvalidCache;
            }
            const payload_len = try payloadLen(shard, row, header[0..head_len], diagnostic);
            payload_totals[@intCast(row.shard_id)] += payload_len;
        }
        for (listed, payload_totals) |entry, total| {
            if (total != entry.uncompressed_byte_len) {
                diagnostic.set("shards/{s}: payloads add up to {d} bytes but the manifest says uncompressed_byte_len {d}", .{ entry.name, total, entry.uncompressed_byte_len });
                return error.InvalidCache;
            }
        }
    }

    fn payloadLen(shard: Shard, row: index_file.Row, head: []const u8, diagnostic: *Diagnostic) Error!u64 {
        const layout = try shard_record.layoutOf(head, row.record_len, diagnostic);
        switch (shard.compression) {
            .none => return layout.stored_len,
            .lz4 => {
                try shard_record.checkLz4Room(layout.stored_len, diagnostic);
                var prefix: [shard_record.lz4_prefix_bytes]u8 = undefined;
                try readExactly(shard, row.shard_id, &prefix, row.offset + layout.metadataEnd(), diagnostic);
                return try shard_record.lz4PayloadLen(&prefix, layout.stored_len, diagnostic);
            },
        }
    }

    pub fn close(cache: *Cache) void {
        const allocator = cache.allocator;
        cache.closeShards();
        allocator.free(cache.columns);
        cache.table.deinit();
        if (cache.index_map) |*map| map.close(allocator);
        if (cache.checksums_map) |*map| map.close(allocator);
        cache.parsed.deinit();
        allocator.free(cache.path);
        allocator.destroy(cache);
    }

    pub fn readManifest(allocator: std.mem.Allocator, dir: std.Io.Dir, digest_out: *[sha256.digest_length]u8, diagnostic: *Diagnostic) Error!manifest.Parsed {
        const text = file_status.readAlloc(allocator, dir, cache_layout.manifest_file, manifest_bytes_max) catch |err| {
            if (err == error.FileTooBig) {
                diagnostic.set("manifest.json is larger than the {d} MiB this reader accepts", .{manifest_bytes_max >> 20});
                return error.InvalidCache;
            }
            diagnostic.set("{s}: cannot read manifest.json: {f}", .{ if (err == error.FileNotFound) "missing manifest" else "I/O error", error_words.of(err) });
            return fileFailure(err);
        };
        defer allocator.free(text);
        digest_out.* = sha256.hash(text);
        return manifest.parse(allocator, text, diagnostic) catch |err| switch (err) {
            error.OutOfMemory => return error.OutOfMemory,
            error.UnsupportedFormatVersion => {
                diagnostic.prefix("manifest.json: ", .{});
                return error.InvalidCache;
            },
            // dataset-rt's phrase for a manifest that is not the JSON it expects.
            error.InvalidManifest => {
                diagnostic.prefix("manifest.json: JSON error: ", .{});
                return error.InvalidCache;
            },
        };
    }

    /// Maps a file of `bytes_per_sample` bytes per sample that the manifest
    /// lists (index.bin, records.crc32c) after checking its length (and with
    /// `validate_hashes` its SHA-256); null when it is empty. `rows` names its
    /// entries in the message for a wrong length ("index row").
    fn mapListedFile(
        allocator: std.mem.Allocator,
        dir: std.Io.Dir,
        name: []const u8,
        rows: []const u8,
        expected: u64,
        bytes_per_sample: u64,
        the_manifest: manifest.Manifest,
        digest: [32]u8,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!?FileView {
        const io = system.io();
        const file = dir.openFile(io, name, .{}) catch |err| {
            diagnostic.set("I/O error: cannot open {s}: {f}", .{ name, error_words.of(err) });
            return fileFailure(err);
        };
        defer file.close(io);
        const actual = file_status.length(file) catch |err| {
            diagnostic.set("I/O error: cannot stat {s}: {f}", .{ name, error_words.of(err) });
            return error.Io;
        };
        if (actual != expected) {
            diagnostic.set("{s} count does not match manifest: {s} has {d} bytes, expected {d} ({d} per sample for {d} samples)", .{ rows, name, actual, expected, bytes_per_sample, the_manifest.sample_count });
            return error.InvalidCache;
        }
        if (validate_hashes) try checkFileHash(file, name, digest, diagnostic);
        if (expected == 0) return null;
        return FileView.open(allocator, file, @intCast(expected), name, diagnostic) catch |err| switch (err) {
            error.OutOfMemory => error.OutOfMemory,
            error.Io => error.Io,
            error.ShortFile => error.InvalidCache, // shrank since its length was checked
        };
    }

    fn readMetadataTable(
        allocator: std.mem.Allocator,
        dir: std.Io.Dir,
        the_manifest: manifest.Manifest,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!arrow_ipc_read.Table {
        const bytes = file_status.readAlloc(allocator, dir, cache_layout.metadata_file, std.math.maxInt(u64)) catch |err| {
            diagnostic.set("I/O error: cannot read metadata.arrow: {f}", .{error_words.of(err)});
            return fileFailure(err);
        };
        defer allocator.free(bytes);
        if (validate_hashes) {
            if (!std.mem.eql(u8, &sha256.hash(bytes), &the_manifest.metadata_sha256)) {
                diagnostic.set("checksum mismatch: metadata.arrow: SHA-256 does not match the manifest", .{});
                return error.InvalidCache;
            }
        }
        const table = arrow_ipc_read.readFile(allocator, bytes, diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.prefix("metadata.arrow: ", .{});
            return error.InvalidCache;
        };
        if (table.row_count != the_manifest.sample_count) {
            var owned = table;
            owned.deinit();
            diagnostic.set("metadata row count does not match manifest: metadata.arrow has {d} rows but the manifest says {d} samples", .{ table.row_count, the_manifest.sample_count });
            return error.InvalidCache;
        }
        return table;
    }

    /// The table's columns arranged in the manifest schema's order, checking
    /// that names and kinds agree exactly.
    fn orderColumns(allocator: std.mem.Allocator, table: *const arrow_ipc_read.Table, the_manifest: manifest.Manifest, diagnostic: *Diagnostic) Error![]types.Column {
        const schema_fields = the_manifest.metadata_schema;
        const ordered = try allocator.alloc(types.Column, schema_fields.len);
        errdefer allocator.free(ordered);
        for (schema_fields, ordered) |field, *slot| {
            const column = findColumn(table.columns, field.name) orelse {
                diagnostic.set("metadata.arrow has no column '{f}' from the manifest schema", .{Excerpt.ofName(field.name)});
                return error.InvalidCache;
            };
            const kind = std.meta.activeTag(column.values);
            if (kind != field.kind) {
                diagnostic.set("metadata.arrow column '{f}' is {s} but the manifest says {s}", .{ Excerpt.ofName(field.name), kind.name(), field.kind.name() });
                return error.InvalidCache;
            }
            slot.* = column;
        }
        for (table.columns) |column| {
            if (!isInSchema(schema_fields, column.name)) {
                diagnostic.set("metadata.arrow has a column '{f}' that the manifest schema does not list", .{Excerpt.ofName(column.name)});
                return error.InvalidCache;
            }
        }
        if (table.columns.len != schema_fields.len) {
            diagnostic.set("metadata.arrow has {d} columns (a name repeats) but the manifest schema has {d}", .{ table.columns.len, schema_fields.len });
            return error.InvalidCache;
        }
        return ordered;
    }

    fn isInSchema(fields: []const types.Field, name: []const u8) bool {
        for (fields) |field| if (std.mem.eql(u8, field.name, name)) return true;
        return false;
    }

    fn findColumn(columns: []const types.Column, name: []const u8) ?types.Column {
        for (columns) |column| if (std.mem.eql(u8, column.name, name)) return column;
        return null;
    }

    fn openShards(cache: *Cache, dir: std.Io.Dir, validate_hashes: bool, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        const allocator = cache.allocator;
        const listed = cache.parsed.manifest.shards;
        cache.shards = try allocator.alloc(Shard, listed.len);
        errdefer allocator.free(cache.shards);
        cache.shard_byte_lens = try allocator.alloc(u64, listed.len);
        errdefer allocator.free(cache.shard_byte_lens);
        cache.mappings = try allocator.alloc(?*ShardMapping, listed.len);
        errdefer allocator.free(cache.mappings);
        @memset(cache.mappings, null);
        cache.mappings_mutex = .init;
        var opened: usize = 0;
        errdefer for (cache.shards[0..opened]) |shard| shard.file.close(io);
        var shards_dir = dir.openDir(io, cache_layout.shards_dir, .{}) catch |err| {
            diagnostic.set("I/O error: cannot open the shards directory: {f}", .{error_words.of(err)});
            return fileFailure(err);
        };
        defer shards_dir.close(io);
        for (listed, cache.shards, cache.shard_byte_lens) |entry, *shard, *byte_len| {
            const file = shards_dir.openFile(io, entry.name, .{}) catch |err| {
                diagnostic.set("I/O error: cannot open shards/{s}: {f}", .{ entry.name, error_words.of(err) });
                return fileFailure(err);
            };
            opened += 1;
            skipAccessTimes(file);
            shard.* = .{ .file = file, .byte_len = entry.byte_len, .compression = switch (entry.compression.algo) {
                .none => .none,
                .lz4 => .lz4,
            } };
            byte_len.* = entry.byte_len;
            const actual = file_status.length(file) catch |err| {
                diagnostic.set("I/O error: cannot stat shards/{s}: {f}", .{ entry.name, error_words.of(err) });
                return error.Io;
            };
            if (actual != entry.byte_len) {
                diagnostic.set("shard length mismatch: shards/{s} has {d} bytes but the manifest says {d}", .{ entry.name, actual, entry.byte_len });
                return error.InvalidCache;
            }
            if (validate_hashes) {
                var name_buffer: [64]u8 = undefined;
                const what = std.fmt.bufPrint(&name_buffer, "shards/{s}", .{entry.name}) catch "a shard";
                try checkFileHash(file, what, entry.sha256, diagnostic);
            }
        }
    }

    /// A missing cache file makes the cache invalid; any other failure is the system's.
    fn fileFailure(err: anyerror) Error {
        return if (err == error.OutOfMemory) error.OutOfMemory else if (file_status.missing(err)) error.InvalidCache else error.Io;
    }

    fn checkFileHash(file: std.Io.File, what: []const u8, expected: [32]u8, diagnostic: *Diagnostic) Error!void {
        const io = system.io();
        var hasher = sha256.Hasher.init();
        const buffer = std.heap.c_allocator.alloc(u8, hash_chunk_bytes) catch return error.OutOfMemory;
        defer std.heap.c_allocator.free(buffer);
        var offset: u64 = 0;
        while (true) {
            const read = file.readPositionalAll(io, buffer, offset) catch |err| {
                diagnostic.set("I/O error: cannot read {s}: {f}", .{ what, error_words.of(err) });
                return error.Io;
            };
            hasher.update(buffer[0..read]);
            offset += read;
            if (read < buffer.len) break;
        }
        if (!std.mem.eql(u8, &hasher.final(), &expected)) {
            diagnostic.set("checksum mismatch: {s}: SHA-256 does not match the manifest", .{what});
            return error.InvalidCache;
        }
    }

    /// The mean length of this cache's records (shard bytes per sample, from
    /// the manifest; at least 1): for sizing read-ahead only.
    pub fn meanRecordLen(cache: *const Cache) u64 {
        var total: u64 = 0;
        for (cache.shard_byte_lens) |len| total +|= len;
        return @max(1, total / @max(1, cache.sampleCount()));
    }

    /// Asks the CPU to start loading what `readSample` reads from memory for
    /// `sample_id`: its index row, the next (checked for back-to-back
    /// placement), its record checksum and its metadata values. Random samples
    /// miss the CPU caches on each; issued for a whole chunk first, the misses
    /// overlap instead of stalling one after the other. Only a hint: it reads
    /// nothing.
    pub fn prefetchSample(cache: *const Cache, sample_id: u64) void {
        const index_bytes = cache.indexBytes();
        const row: usize = @intCast(sample_id);
        const start = row * index_file.row_bytes;
        const end = @min(start + 2 * index_file.row_bytes, index_bytes.len);
        @prefetch(&index_bytes[start], .{});
        @prefetch(&index_bytes[end - 1], .{});
        if (cache.recordChecksumBytes()) |bytes| @prefetch(&bytes[@intCast(record_checksums.entryOffset(sample_id))], .{});
        for (cache.columns) |column| switch (column.values) {
            .bool => |v| @prefetch(&v[row], .{}),
            .int => |v| @prefetch(&v[row], .{}),
            .float => |v| @prefetch(&v[row], .{}),
            .string => |v| {
                @prefetch(&v.offsets[row], .{});
                @prefetch(&v.offsets[row + 1], .{});
            },
        };
    }

    /// The second step of `prefetchSample`, once its string offsets are loaded:
    /// the first bytes of each of the sample's strings.
    pub fn prefetchSampleStrings(cache: *const Cache, sample_id: u64) void {
        const row: usize = @intCast(sample_id);
        for (cache.columns) |column| switch (column.values) {
            .string => |v| {
                const start = v.offsets[row];
                if (start < v.bytes.len) @prefetch(&v.bytes[@intCast(start)], .{});
            },
            else => {},
        };
    }

    /// Reads sample `sample_id`: appends its decoded payload to `payload_out`
    /// and its canonical metadata JSON (from the metadata.arrow row, after
    /// checking the record's embedded copy equals it) to `metadata_out`.
    pub fn readSample(
        cache: *const Cache,
        sample_id: u64,
        run_samples: u64,
        scratch: *SampleScratch,
        payload_out: *std.ArrayList(u8),
        metadata_out: *std.ArrayList(u8),
        columns_out: []ColumnBuilder,
        defer_payload_bytes: u64,
        diagnostic: *Diagnostic,
    ) Error!?PayloadLocation {
        errdefer cache.prefixSampleDiagnostic(sample_id, diagnostic);
        const allocator = cache.allocator;
        assert(columns_out.len == cache.columns.len);
        assert(sample_id < cache.sampleCount());
        const row = index_file.decodeRow(cache.indexBytes(), sample_id);
        try index_file.checkRow(row, sample_id, cache.shard_byte_lens, diagnostic);
        try index_file.checkContiguous(cache.indexBytes(), cache.sampleCount(), sample_id, row, cache.shard_byte_lens, diagnostic);
        // The checks above keep the record inside its listed shard.
        assert(row.shard_id < cache.shards.len);
        assert(row.offset + row.record_len <= cache.shard_byte_lens[@intCast(row.shard_id)]);
        const shard = cache.shards[@intCast(row.shard_id)];
        const payload_len_before = payload_out.items.len;
        const metadata_len_before = metadata_out.items.len;
        const rows_before = if (columns_out.len > 0) columns_out[0].rowCount() else 0;
        // A failed read leaves the outputs as they were, so a caller can skip the sample.
        errdefer {
            payload_out.items.len = payload_len_before;
            metadata_out.items.len = metadata_len_before;
            for (columns_out) |*column| column.truncate(rows_before);
        }

        // A large raw payload is read straight into the batch: the record's head
        // (header and JSON) first, then the payload in place, one copy in all.
        // (A record is longer than its payload, so a payload to defer is in a
        // record longer than the deferral size.)
        const may_defer = defer_payload_bytes != 0 and row.record_len > defer_payload_bytes;
        var direct = shard.compression == .none and (row.record_len > direct_read_bytes_min or may_defer);
        var parts: shard_record.Parts = undefined;
        const expected_checksum = cache.recordChecksum(sample_id);
        // Of the record's head (header and JSON), when the payload is read on its own.
        var head_checksum: u32 = 0;
        if (direct) {
            const head = try cache.recordHead(row, scratch, diagnostic);
            // The head is the whole record when it is short; `layoutOf` refuses
            // one shorter than its header (possible with a small deferral size).
            const layout = try shard_record.layoutOf(head, row.record_len, diagnostic);
            if (layout.metadataEnd() <= head.len) {
                const metadata_end: usize = @intCast(layout.metadataEnd());
                parts = .{
                    .metadata_json = head[shard_record.header_bytes..metadata_end],
                    .stored_payload = &.{},
                    .payload_len = layout.stored_len,
                };
                if (expected_checksum != null) head_checksum = record_checksums.ofRecord(head[0..metadata_end]);
            } else direct = false; // unusually large metadata: read the record whole
        }
        if (!direct) {
            const record = try cache.recordBytes(sample_id, row, run_samples, scratch, diagnostic);
            assert(record.len == row.record_len);
            // Checked before anything parses or decodes the record.
            if (expected_checksum) |expected| {
                const actual = record_checksums.ofRecord(record);
                if (actual != expected) return record_checksums.mismatch(expected, actual, diagnostic);
            }
            parts = try shard_record.split(record, shard.compression, diagnostic);
        }
        // Header, JSON and stored payload fill the record exactly.
        assert(shard_record.header_bytes + parts.metadata_json.len <= row.record_len);

        try scratch.values.resize(allocator, cache.columns.len);
        const values = scratch.values.items;
        for (cache.columns, values) |column, *value| value.* = column.values.get(@intCast(sample_id));
        metadata_verify.verifyRecord(cache.schema(), values, parts.metadata_json, diagnostic) catch return error.InvalidCache;
        // Verified equal, value for value and kind for kind, to the metadata.arrow
        // row: the embedded text is what the binding decodes.
        try metadata_out.appendSlice(allocator, parts.metadata_json);
        assert(metadata_out.items.len == metadata_len_before + parts.metadata_json.len);
        for (columns_out, values) |*column, value| try column.append(allocator, value);

        if (direct) {
            const location: PayloadLocation = .{
                .sample_id = sample_id,
                .shard_id = row.shard_id,
                .offset = row.offset + shard_record.header_bytes + parts.metadata_json.len,
                .len = parts.payload_len,
                .checksum = if (expected_checksum) |expected|
                    record_checksums.expectedTail(expected, head_checksum, parts.payload_len)
                else
                    null,
            };
            // A raw payload ends its record.
            assert(location.offset + location.len == row.offset + row.record_len);
            if (defer_payload_bytes != 0 and location.len >= defer_payload_bytes) return location;
            const payload_len: usize = @intCast(parts.payload_len);
            try payload_out.ensureUnusedCapacity(allocator, payload_len);
            const destination = payload_out.unusedCapacitySlice()[0..payload_len];
            try readExactly(shard, row.shard_id, destination, location.offset, diagnostic);
            if (expected_checksum) |expected| {
                const actual = record_checksums.extend(head_checksum, destination);
                if (actual != expected) return record_checksums.mismatch(expected, actual, diagnostic);
            }
            payload_out.items.len += payload_len;
            assert(payload_out.items.len == payload_len_before + payload_len);
            return null;
        }
        const payload_len: usize = @intCast(parts.payload_len);
        try payload_out.ensureUnusedCapacity(allocator, payload_len);
        const destination = payload_out.unusedCapacitySlice()[0..payload_len];
        try shard_record.decodePayload(parts, shard.compression, destination, diagnostic);
        payload_out.items.len += payload_len;
        assert(payload_out.items.len == payload_len_before + payload_len);
        return null;
    }

    /// Where sample `sample_id`'s index row says its record is, for reports:
    /// the shard's file name, or null if the row names no listed shard.
    pub const Located = struct { shard_id: u64, shard_name: ?[]const u8, offset: u64, record_len: u64 };

    pub fn locate(cache: *const Cache, sample_id: u64) Located {
        assert(sample_id < cache.sampleCount());
        const row = index_file.decodeRow(cache.indexBytes(), sample_id);
        const listed = cache.parsed.manifest.shards;
        return .{
            .shard_id = row.shard_id,
            .shard_name = if (row.shard_id < listed.len) listed[@intCast(row.shard_id)].name else null,
            .offset = row.offset,
            .record_len = row.record_len,
        };
    }

    fn prefixSampleDiagnostic(cache: *const Cache, sample_id: u64, diagnostic: *Diagnostic) void {
        // Every failure but OutOfMemory has set its message.
        if (diagnostic.len == 0) diagnostic.set("out of memory while reading the sample", .{});
        const row = index_file.decodeRow(cache.indexBytes(), sample_id);
        if (row.shard_id < cache.shards.len) {
            const name = cache.parsed.manifest.shards[@intCast(row.shard_id)].name;
            diagnostic.prefix("cache {s}: shards/{s}: sample {d} at offset {d}: ", .{ cache.path, name, sample_id, row.offset });
        } else {
            diagnostic.prefix("cache {s}: index.bin: sample {d}: ", .{ cache.path, sample_id });
        }
    }

    /// Where a sample's raw payload lies in its shard, for a payload that
    /// `readSample` left unread (deferred) so its caller can read it later
    /// straight into memory of its own.
    pub const PayloadLocation = struct {
        sample_id: u64,
        shard_id: u64,
        offset: u64,
        len: u64,
        /// The CRC-32C the payload's bytes must have (`record_checksums.expectedTail`),
        /// if the cache has record checksums.
        checksum: ?u32 = null,
    };

    /// Reads the bytes of a deferred payload, or of a span of one (`location`
    /// narrowed), into `destination` (exactly `location.len` bytes); unchecked:
    /// the caller checks the whole payload with `checkPayload`.
    pub fn readPayload(cache: *const Cache, location: PayloadLocation, destination: []u8, diagnostic: *Diagnostic) Error!void {
        assert(destination.len == location.len and location.shard_id < cache.shards.len);
        assert(location.offset + location.len <= cache.shard_byte_lens[@intCast(location.shard_id)]);
        errdefer cache.prefixSampleDiagnostic(location.sample_id, diagnostic);
        try readExactly(cache.shards[@intCast(location.shard_id)], location.shard_id, destination, location.offset, diagnostic);
    }

    /// Like `readPayload`, and returns the CRC-32C of the bytes read, computed
    /// right after the read while they are still in this core's cache. Callers
    /// read a deferred payload in pieces (`deferred_reads.piece_bytes`, well
    /// inside a core's L2), each in one call: reading a piece in smaller calls
    /// to checksum it from L1 costs more in system calls and page-cache lookups
    /// than it saves (docs/integrity.md).
    pub fn readPayloadChecksummed(cache: *const Cache, location: PayloadLocation, destination: []u8, diagnostic: *Diagnostic) Error!u32 {
        try cache.readPayload(location, destination, diagnostic);
        return record_checksums.extend(0, destination);
    }

    /// Fails a deferred payload whose bytes, read in full, have the checksum `actual`
    /// where its record's checksum says otherwise.
    pub fn checkPayload(cache: *const Cache, location: PayloadLocation, actual: u32, diagnostic: *Diagnostic) Error!void {
        const expected = location.checksum orelse return;
        if (actual == expected) return;
        errdefer cache.prefixSampleDiagnostic(location.sample_id, diagnostic);
        return record_checksums.mismatch(expected, actual, diagnostic);
    }

    /// A deferred payload checked in place: its bytes in its shard's mapping,
    /// and the mapping (the cache's reference; a caller that keeps the bytes
    /// past the cache's life retains it).
    pub const MappedPayload = struct { bytes: []const u8, mapping: *ShardMapping };

    /// Checks a deferred payload where it lies, in a read-only mapping of its
    /// shard (made on first use and kept while the cache is open), against its
    /// record's checksum; no copy is made.
    pub fn mappedPayload(cache: *Cache, location: PayloadLocation, diagnostic: *Diagnostic) Error!MappedPayload {
        assert(location.shard_id < cache.shards.len);
        assert(location.offset + location.len <= cache.shard_byte_lens[@intCast(location.shard_id)]);
        errdefer cache.prefixSampleDiagnostic(location.sample_id, diagnostic);
        const mapping = try cache.shardMapping(location.shard_id, diagnostic);
        const bytes = mapping.bytes()[@intCast(location.offset)..][0..@intCast(location.len)];
        if (location.checksum != null) try cache.checkPayload(location, record_checksums.extend(0, bytes), diagnostic);
        return .{ .bytes = bytes, .mapping = mapping };
    }

    fn shardMapping(cache: *Cache, shard_id: u64, diagnostic: *Diagnostic) Error!*ShardMapping {
        const index: usize = @intCast(shard_id);
        if (@atomicLoad(?*ShardMapping, &cache.mappings[index], .acquire)) |mapping| return mapping;
        const io = system.io();
        cache.mappings_mutex.lockUncancelable(io);
        defer cache.mappings_mutex.unlock(io);
        if (cache.mappings[index]) |mapping| return mapping;
        const name = cache.parsed.manifest.shards[index].name;
        var name_buffer: [64]u8 = undefined;
        const what = std.fmt.bufPrint(&name_buffer, "shards/{s}", .{name}) catch "a shard";
        const mapping = ShardMapping.create(cache.allocator, cache.shards[index].file, cache.shard_byte_lens[index], what, diagnostic) catch |err| {
            if (err == error.OutOfMemory and diagnostic.len == 0) diagnostic.set("out of memory while mapping shards/{s}", .{name});
            return err;
        };
        @atomicStore(?*ShardMapping, &cache.mappings[index], mapping, .release);
        return mapping;
    }

    /// Asks the kernel to start reading a deferred payload into the page cache,
    /// so the later `readPayload` finds it there. Only a hint: failures are ignored.
    pub fn prefetchPayload(cache: *const Cache, location: PayloadLocation) void {
        if (builtin.os.tag != .linux) return;
        const linux = std.os.linux;
        const file = cache.shards[@intCast(location.shard_id)].file;
        _ = linux.fadvise(file.handle, @intCast(location.offset), @intCast(location.len), linux.POSIX_FADV.WILLNEED);
    }

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

    /// Records larger than this with raw payloads are read in two parts (see readSample).
    const direct_read_bytes_min = 64 << 10;
    /// Enough for the header and the metadata JSON of nearly every record; a
    /// record whose JSON is longer is read whole instead.
    const record_head_bytes = 8 << 10;

    /// The first bytes of a record (more than its 8-byte header, as every record
    /// also holds a JSON object): the header and, unless it is unusually large,
    /// the metadata JSON.
    fn recordHead(cache: *const Cache, row: index_file.Row, scratch: *SampleScratch, diagnostic: *Diagnostic) Error![]const u8 {
        const len: usize = @intCast(@min(row.record_len, record_head_bytes));
        scratch.run_cache = null; // the buffer no longer holds a run of whole records
        scratch.run.clearRetainingCapacity();
        try scratch.run.ensureTotalCapacity(cache.allocator, len);
        const buffer = scratch.run.allocatedSlice()[0..len];
        try readExactly(cache.shards[@intCast(row.shard_id)], row.shard_id, buffer, row.offset, diagnostic);
        return buffer;
    }

    fn readExactly(shard: Shard, shard_id: u64, buffer: []u8, offset: u64, diagnostic: *Diagnostic) Error!void {
        const read = positional_read.readAll(shard.file, buffer, offset) catch |err| {
            diagnostic.set("I/O error: cannot read shard {d}: {f}", .{ shard_id, error_words.of(err) });
            return error.Io;
        };
        if (read != buffer.len) {
            diagnostic.set("shard {d} ended after {d} of {d} bytes", .{ shard_id, read, buffer.len });
            return error.InvalidCache;
        }
    }

    /// The bytes of sample `sample_id`'s record. When the next `run_samples - 1`
    /// samples follow it in the same shard (an ordered pass), their records are
    /// read with it in one positional read of at most `run_bytes_max` bytes.
    fn recordBytes(cache: *const Cache, sample_id: u64, row: index_file.Row, run_samples: u64, scratch: *SampleScratch, diagnostic: *Diagnostic) Error![]const u8 {
        const record_end = row.offset + row.record_len;
        if (scratch.run_cache == cache and scratch.run_shard == row.shard_id and
            row.offset >= scratch.run_offset and record_end <= scratch.run_offset + scratch.run.items.len)
        {
            const start: usize = @intCast(row.offset - scratch.run_offset);
            return scratch.run.items[start..][0..@intCast(row.record_len)];
        }
        var end = record_end;
        var next = sample_id + 1;
        const index_bytes = cache.indexBytes();
        while (next < sample_id + run_samples and next < cache.sampleCount()) : (next += 1) {
            const following = index_file.decodeRow(index_bytes, next);
            if (following.shard_id != row.shard_id or following.offset != end) break;
            const following_end = std.math.add(u64, following.offset, following.record_len) catch break;
            if (following_end - row.offset > run_bytes_max or following_end > cache.shard_byte_lens[@intCast(row.shard_id)]) break;
            end = following_end;
        }
        const len: usize = @intCast(end - row.offset);
        // One record, or a run of them within the read-ahead bound and the shard.
        assert(len == row.record_len or len <= run_bytes_max);
        assert(end <= cache.shard_byte_lens[@intCast(row.shard_id)]);
        scratch.run_cache = null; // until the read below succeeds
        scratch.run.clearRetainingCapacity();
        try scratch.run.ensureTotalCapacity(cache.allocator, len);
        const buffer = scratch.run.allocatedSlice()[0..len];
        try readExactly(cache.shards[@intCast(row.shard_id)], row.shard_id, buffer, row.offset, diagnostic);
        scratch.run.items.len = len;
        scratch.run_cache = cache;
        scratch.run_shard = row.shard_id;
        scratch.run_offset = row.offset;
        return buffer[0..@intCast(row.record_len)];
    }

    /// Bound of one read-ahead for an ordered pass.
    pub const run_bytes_max = 1 << 20;

    /// Per-reader buffers reused from sample to sample.
    pub const SampleScratch = struct {
        /// Records read together: shard bytes from `run_offset` in `run_shard` of `run_cache`.
        run: std.ArrayList(u8) = .empty,
        run_cache: ?*const Cache = null,
        run_shard: u64 = 0,
        run_offset: u64 = 0,
        values: std.ArrayList(types.Value) = .empty,

        pub fn deinit(scratch: *SampleScratch, allocator: std.mem.Allocator) void {
            scratch.run.deinit(allocator);
            scratch.values.deinit(allocator);
        }
    };
};
