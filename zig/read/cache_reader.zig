//! Opens one published cache and reads its records.
//!
//! Opening validates everything that is O(manifest) — manifest fields, index
//! size, metadata table shape, shard existence and lengths — and, when asked,
//! every SHA-256 and every record's placement and framing. Reading a sample
//! (`record_read.zig`) checks its index row against the shard, every length
//! inside the record, the embedded JSON against the metadata.arrow row, and the
//! LZ4 block; any mismatch is an error naming the cache and the sample.
const std = @import("std");
const assert = std.debug.assert;
const cache_layout = @import("../format/cache_layout.zig");
const system = @import("../base/system.zig");
const types = @import("../format/metadata_types.zig");
const manifest = @import("../format/manifest.zig");
const arrow_ipc_read = @import("../format/arrow_ipc_read.zig");
const sha256 = @import("../codec/sha256.zig");
const file_status = @import("../base/file_status.zig");
const FileView = @import("../base/file_view.zig").FileView;
const ShardMapping = @import("shard_mapping.zig").ShardMapping;
const shard_source = @import("shard_source.zig");
const ShardSource = shard_source.ShardSource;
const open_shards = @import("open_shards.zig");
const record_read = @import("record_read.zig");
const cache_files = @import("cache_files.zig");
const index_file = @import("../format/index_file.zig");
const record_checksums = @import("../format/record_checksums.zig");
const error_words = @import("../base/error_words.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Excerpt = @import("../base/diagnostic.zig").Excerpt;

pub const Error = error{ InvalidCache, Io, OutOfMemory };

const PayloadLocation = record_read.PayloadLocation;

/// Files larger than this are not plausible for a manifest and are rejected before reading.
const manifest_bytes_max = manifest.manifest_bytes_max;

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
    shards: ShardSource,
    /// What a record read needs of this cache (`readSample`).
    records: record_read.Records,
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

    /// Opens and validates `path`. Errors are prefixed with the cache path.
    pub fn open(
        allocator: std.mem.Allocator,
        path: []const u8,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!*Cache {
        return openWith(allocator, path, validate_hashes, null, diagnostic);
    }

    /// `open`; with `origin`, `path` is the local folder of the remote cache
    /// `origin.url` (`remote_cache.zig`), which then names the cache (`path`
    /// field, messages) and fetches the shards the folder lacks when read.
    pub fn openWith(
        allocator: std.mem.Allocator,
        path: []const u8,
        validate_hashes: bool,
        origin: ?shard_source.Origin,
        diagnostic: *Diagnostic,
    ) Error!*Cache {
        assert(path.len > 0);
        const name = if (origin) |from| from.url else path;
        const cache = openUnprefixed(
            allocator,
            path,
            validate_hashes,
            origin,
            diagnostic,
        ) catch |err| {
            if (err == error.OutOfMemory and diagnostic.len == 0) {
                diagnostic.set("out of memory while opening the cache", .{});
            }
            diagnostic.prefix("cache {s}: ", .{name});
            return err;
        };
        assert(cache.records.sample_count == cache.sampleCount());
        assert(cache.columns.len == cache.schema().len);
        return cache;
    }

    fn openUnprefixed(
        allocator: std.mem.Allocator,
        path: []const u8,
        validate_hashes: bool,
        origin: ?shard_source.Origin,
        diagnostic: *Diagnostic,
    ) Error!*Cache {
        const io = system.io();
        var dir = std.Io.Dir.cwd().openDir(io, path, .{}) catch |err| {
            // The phrases dataset-rt's messages use for the same failures.
            const phrase = if (file_status.missing(err)) "missing manifest" else "I/O error";
            diagnostic.set(
                "{s}: cannot open the cache directory: {f}{f}",
                .{ phrase, error_words.of(err), open_shards.process.heldWords(err) },
            );
            return cache_files.fileFailure(err);
        };
        defer dir.close(io);

        const cache = try allocator.create(Cache);
        errdefer allocator.destroy(cache);
        cache.allocator = allocator;
        cache.path = try allocator.dupe(u8, if (origin) |from| from.url else path);
        errdefer allocator.free(cache.path);

        cache.parsed = try readManifest(allocator, dir, &cache.manifest_sha256, diagnostic);
        errdefer cache.parsed.deinit();
        const the_manifest = cache.parsed.manifest;
        try cache.mapListedFiles(dir, validate_hashes, diagnostic);
        errdefer cache.unmapListedFiles();

        cache.table = try readMetadataTable(
            allocator,
            dir,
            the_manifest,
            validate_hashes,
            diagnostic,
        );
        errdefer cache.table.deinit();
        cache.columns = try orderColumns(allocator, &cache.table, the_manifest, diagnostic);
        errdefer allocator.free(cache.columns);

        cache.shards = try .open(
            allocator,
            &open_shards.process,
            dir,
            path,
            the_manifest.shards,
            validate_hashes,
            origin,
            diagnostic,
        );
        errdefer cache.shards.close();
        cache.mappings = try allocator.alloc(?*ShardMapping, the_manifest.shards.len);
        errdefer allocator.free(cache.mappings);
        @memset(cache.mappings, null);
        cache.mappings_mutex = .init;
        cache.records = .{
            .index_bytes = cache.indexBytes(),
            .sample_count = the_manifest.sample_count,
            .checksum_bytes = cache.recordChecksumBytes(),
            .schema = the_manifest.metadata_schema,
            .columns = cache.columns,
            .shards = &cache.shards,
        };
        assert(cache.records.index_bytes.len == the_manifest.sample_count * index_file.row_bytes);
        assert(cache.shards.count() == the_manifest.shards.len);
        if (validate_hashes) try cache.checkRecordLayout(diagnostic);
        return cache;
    }

    /// Maps index.bin and, when the manifest lists it, records.crc32c.
    fn mapListedFiles(
        cache: *Cache,
        dir: std.Io.Dir,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!void {
        const the_manifest = cache.parsed.manifest;
        const index_len = try index_file.expectedBytes(the_manifest.sample_count, diagnostic);
        cache.index_map = try mapListedFile(cache.allocator, dir, .{
            .name = cache_layout.index_file,
            .rows = "index row",
            .byte_len = index_len,
            .bytes_per_sample = index_file.row_bytes,
            .sha256 = the_manifest.index_sha256,
        }, the_manifest.sample_count, validate_hashes, diagnostic);
        errdefer if (cache.index_map) |*map| map.close(cache.allocator);
        // Mapped whenever it has bytes: every sample has an index row.
        assert((cache.index_map == null) == (the_manifest.sample_count == 0));
        cache.checksums_map = null;
        const listed = the_manifest.record_checksums orelse return;
        cache.checksums_map = try mapListedFile(cache.allocator, dir, .{
            .name = cache_layout.record_checksums_file,
            .rows = "record checksum",
            .byte_len = listed.byte_len,
            .bytes_per_sample = record_checksums.checksum_bytes,
            .sha256 = listed.sha256,
        }, the_manifest.sample_count, validate_hashes, diagnostic);
        assert((cache.checksums_map == null) == (the_manifest.sample_count == 0));
    }

    fn unmapListedFiles(cache: *Cache) void {
        if (cache.index_map) |*map| map.close(cache.allocator);
        if (cache.checksums_map) |*map| map.close(cache.allocator);
    }

    /// Full validation beyond the hashes: every index row points inside its
    /// shard, records lie back to back, and each shard's decoded payload bytes
    /// add up to its manifest `uncompressed_byte_len`. Reads each record's
    /// header (O(samples) small reads), so only with validate_cache.
    fn checkRecordLayout(cache: *Cache, diagnostic: *Diagnostic) Error!void {
        const listed = cache.parsed.manifest.shards;
        assert(cache.records.sample_count == cache.sampleCount());
        assert(cache.shards.count() == listed.len);
        const payload_totals = try cache.allocator.alloc(u64, listed.len);
        defer cache.allocator.free(payload_totals);
        @memset(payload_totals, 0);
        for (0..@intCast(cache.sampleCount())) |sample_index| {
            const sample_id: u64 = sample_index;
            const row = try cache.records.checkedRow(sample_id, diagnostic);
            const payload_len = cache.records.payloadLen(row, diagnostic) catch |err| {
                const name = listed[@intCast(row.shard_id)].name;
                diagnostic.prefix(
                    "shards/{s}: sample {d} at offset {d}: ",
                    .{ name, sample_id, row.offset },
                );
                return err;
            };
            // Saturating: lz4 prefixes of a hostile cache may claim more than 2^64 bytes.
            payload_totals[@intCast(row.shard_id)] +|= payload_len;
        }
        for (listed, payload_totals) |entry, total| {
            if (total != entry.uncompressed_byte_len) {
                diagnostic.set(
                    "shards/{s}: payloads add up to {d} bytes " ++
                        "but the manifest says uncompressed_byte_len {d}",
                    .{ entry.name, total, entry.uncompressed_byte_len },
                );
                return error.InvalidCache;
            }
        }
    }

    pub fn close(cache: *Cache) void {
        const allocator = cache.allocator;
        assert(cache.mappings.len == cache.shards.count());
        assert(cache.records.shards == &cache.shards);
        for (cache.mappings) |mapping| if (mapping) |m| m.release();
        allocator.free(cache.mappings);
        cache.shards.close();
        allocator.free(cache.columns);
        cache.table.deinit();
        cache.unmapListedFiles();
        cache.parsed.deinit();
        allocator.free(cache.path);
        allocator.destroy(cache);
    }

    pub fn readManifest(
        allocator: std.mem.Allocator,
        dir: std.Io.Dir,
        digest_out: *[sha256.digest_length]u8,
        diagnostic: *Diagnostic,
    ) Error!manifest.Parsed {
        const name = cache_layout.manifest_file;
        const text = file_status.readAlloc(allocator, dir, name, manifest_bytes_max) catch |err| {
            if (err == error.FileTooBig) {
                diagnostic.set(
                    "manifest.json is larger than the {d} MiB this reader accepts",
                    .{manifest_bytes_max >> 20},
                );
                return error.InvalidCache;
            }
            const phrase = if (err == error.FileNotFound) "missing manifest" else "I/O error";
            diagnostic.set(
                "{s}: cannot read manifest.json: {f}{f}",
                .{ phrase, error_words.of(err), open_shards.process.heldWords(err) },
            );
            return cache_files.fileFailure(err);
        };
        defer allocator.free(text);
        digest_out.* = sha256.hash(text);
        const parsed = manifest.parse(allocator, text, diagnostic) catch |err| switch (err) {
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
        assert(manifest.versionSupported(parsed.manifest.format_version));
        assert(types.isSortedUnique(parsed.manifest.metadata_schema));
        return parsed;
    }

    /// A file of `bytes_per_sample` bytes per sample that the manifest lists,
    /// as its entry describes it. `rows` names its entries in the message for
    /// a wrong length ("index row").
    const ListedFile = struct {
        name: []const u8,
        rows: []const u8,
        byte_len: u64,
        bytes_per_sample: u64,
        sha256: [sha256.digest_length]u8,
    };

    /// Maps `listed` after checking its length (and with `validate_hashes` its
    /// SHA-256); null when it is empty.
    fn mapListedFile(
        allocator: std.mem.Allocator,
        dir: std.Io.Dir,
        listed: ListedFile,
        sample_count: u64,
        validate_hashes: bool,
        diagnostic: *Diagnostic,
    ) Error!?FileView {
        // Both lengths come from a parsed manifest, whose sample count they fit.
        assert(listed.byte_len == sample_count * listed.bytes_per_sample);
        assert(listed.bytes_per_sample > 0);
        const io = system.io();
        const file = dir.openFile(io, listed.name, .{}) catch |err| {
            diagnostic.set(
                "I/O error: cannot open {s}: {f}{f}",
                .{ listed.name, error_words.of(err), open_shards.process.heldWords(err) },
            );
            return cache_files.fileFailure(err);
        };
        defer file.close(io);
        const actual = file_status.length(file) catch |err| {
            diagnostic.set(
                "I/O error: cannot stat {s}: {f}",
                .{ listed.name, error_words.of(err) },
            );
            return error.Io;
        };
        if (actual != listed.byte_len) {
            diagnostic.set(
                "{s} count does not match manifest: {s} has {d} bytes, " ++
                    "expected {d} ({d} per sample for {d} samples)",
                .{
                    listed.rows,     listed.name,             actual,
                    listed.byte_len, listed.bytes_per_sample, sample_count,
                },
            );
            return error.InvalidCache;
        }
        if (validate_hashes) {
            try cache_files.checkFileHash(file, listed.name, listed.sha256, diagnostic);
        }
        if (listed.byte_len == 0) return null;
        const len: usize = @intCast(listed.byte_len);
        return FileView.open(
            allocator,
            file,
            len,
            listed.name,
            diagnostic,
        ) catch |err| switch (err) {
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
        const name = cache_layout.metadata_file;
        const bytes = file_status.readAlloc(
            allocator,
            dir,
            name,
            std.math.maxInt(u64),
        ) catch |err| {
            diagnostic.set(
                "I/O error: cannot read metadata.arrow: {f}{f}",
                .{ error_words.of(err), open_shards.process.heldWords(err) },
            );
            return cache_files.fileFailure(err);
        };
        defer allocator.free(bytes);
        if (validate_hashes and !std.mem.eql(
            u8,
            &sha256.hash(bytes),
            &the_manifest.metadata_sha256,
        )) {
            diagnostic.set(
                "checksum mismatch: metadata.arrow: SHA-256 does not match the manifest",
                .{},
            );
            return error.InvalidCache;
        }
        var table = arrow_ipc_read.readFile(allocator, bytes, diagnostic) catch |err| {
            if (err == error.OutOfMemory) return error.OutOfMemory;
            diagnostic.prefix("metadata.arrow: ", .{});
            return error.InvalidCache;
        };
        if (table.row_count != the_manifest.sample_count) {
            diagnostic.set(
                "metadata row count does not match manifest: " ++
                    "metadata.arrow has {d} rows but the manifest says {d} samples",
                .{ table.row_count, the_manifest.sample_count },
            );
            table.deinit();
            return error.InvalidCache;
        }
        assert(table.row_count == the_manifest.sample_count);
        return table;
    }

    /// The table's columns arranged in the manifest schema's order, checking
    /// that names and kinds agree exactly.
    fn orderColumns(
        allocator: std.mem.Allocator,
        table: *const arrow_ipc_read.Table,
        the_manifest: manifest.Manifest,
        diagnostic: *Diagnostic,
    ) Error![]types.Column {
        const schema_fields = the_manifest.metadata_schema;
        assert(types.isSortedUnique(schema_fields));
        const ordered = try allocator.alloc(types.Column, schema_fields.len);
        errdefer allocator.free(ordered);
        for (schema_fields, ordered) |field, *slot| {
            const column = findColumn(table.columns, field.name) orelse {
                diagnostic.set(
                    "metadata.arrow has no column '{f}' from the manifest schema",
                    .{Excerpt.ofName(field.name)},
                );
                return error.InvalidCache;
            };
            const kind = std.meta.activeTag(column.values);
            if (kind != field.kind) {
                diagnostic.set(
                    "metadata.arrow column '{f}' is {s} but the manifest says {s}",
                    .{ Excerpt.ofName(field.name), kind.name(), field.kind.name() },
                );
                return error.InvalidCache;
            }
            slot.* = column;
        }
        for (table.columns) |column| {
            if (!isInSchema(schema_fields, column.name)) {
                diagnostic.set(
                    "metadata.arrow has a column '{f}' that the manifest schema does not list",
                    .{Excerpt.ofName(column.name)},
                );
                return error.InvalidCache;
            }
        }
        if (table.columns.len != schema_fields.len) {
            diagnostic.set(
                "metadata.arrow has {d} columns (a name repeats) but the manifest schema has {d}",
                .{ table.columns.len, schema_fields.len },
            );
            return error.InvalidCache;
        }
        for (ordered, schema_fields) |column, field| {
            assert(std.mem.eql(u8, column.name, field.name));
            assert(column.values.rowCount() == table.row_count);
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

    /// The mean length of this cache's records (shard bytes per sample, from
    /// the manifest; at least 1): for sizing read-ahead only.
    pub fn meanRecordLen(cache: *const Cache) u64 {
        var total: u64 = 0;
        for (cache.shards.byteLens()) |len| total +|= len;
        return @max(1, total / @max(1, cache.sampleCount()));
    }

    /// Asks the CPU to start loading what `readSample` reads from memory for
    /// `sample_id` (`Records.prefetch`).
    pub fn prefetchSample(cache: *const Cache, sample_id: u64) void {
        cache.records.prefetch(sample_id);
    }

    /// The second step of `prefetchSample` (`Records.prefetchStrings`).
    pub fn prefetchSampleStrings(cache: *const Cache, sample_id: u64) void {
        cache.records.prefetchStrings(sample_id);
    }

    /// Reads sample `request.sample_id` (`record_read.read`): appends its
    /// decoded payload, its embedded metadata JSON (checked equal to its
    /// metadata.arrow row) and that row to `output`, or returns where a payload
    /// to defer lies. A failure leaves `output` as it was and names the cache,
    /// the shard, the sample and its offset.
    pub fn readSample(
        cache: *const Cache,
        request: record_read.Request,
        scratch: *record_read.Scratch,
        output: record_read.Output,
        diagnostic: *Diagnostic,
    ) Error!?PayloadLocation {
        assert(request.sample_id < cache.sampleCount());
        errdefer cache.prefixSampleDiagnostic(request.sample_id, diagnostic);
        const records = &cache.records;
        const deferred = record_read.read(records, request, scratch, output, diagnostic) catch |err|
            again: {
                // A remote cache's local copy damaged since its fetch: fetched again, read again.
                if (err != error.InvalidCache) return err;
                const shard_id = cache.shardOf(request.sample_id) orelse return err;
                scratch.forgetShard();
                if (!cache.shards.replaceDamaged(shard_id)) return err;
                diagnostic.* = .{};
                break :again try record_read.read(records, request, scratch, output, diagnostic);
            };
        if (deferred) |location| {
            assert(location.offset + location.len <= cache.shards.byteLen(location.shard_id));
        }
        return deferred;
    }

    /// Where sample `sample_id`'s index row says its record is, for reports:
    /// the shard's file name, or null if the row names no listed shard.
    pub const Located = struct {
        shard_id: u64,
        shard_name: ?[]const u8,
        offset: u64,
        record_len: u64,
    };

    pub fn locate(cache: *const Cache, sample_id: u64) Located {
        assert(sample_id < cache.sampleCount());
        const row = index_file.decodeRow(cache.indexBytes(), sample_id);
        const listed = cache.parsed.manifest.shards;
        const listed_shard = row.shard_id < listed.len;
        return .{
            .shard_id = row.shard_id,
            .shard_name = if (listed_shard) listed[@intCast(row.shard_id)].name else null,
            .offset = row.offset,
            .record_len = row.record_len,
        };
    }

    /// The shard that sample `sample_id`'s index row names, or null if the
    /// manifest lists no such shard (the read will say so).
    pub fn shardOf(cache: *const Cache, sample_id: u64) ?u64 {
        assert(sample_id < cache.sampleCount());
        const row = index_file.decodeRow(cache.indexBytes(), sample_id);
        return if (row.shard_id < cache.shards.count()) row.shard_id else null;
    }

    fn prefixSampleDiagnostic(cache: *const Cache, sample_id: u64, diagnostic: *Diagnostic) void {
        assert(sample_id < cache.sampleCount());
        // Every failure but OutOfMemory has set its message.
        if (diagnostic.len == 0) diagnostic.set("out of memory while reading the sample", .{});
        const located = cache.locate(sample_id);
        if (located.shard_name) |name| {
            diagnostic.prefix(
                "cache {s}: shards/{s}: sample {d} at offset {d}: ",
                .{ cache.path, name, sample_id, located.offset },
            );
        } else {
            diagnostic.prefix("cache {s}: index.bin: sample {d}: ", .{ cache.path, sample_id });
        }
        assert(diagnostic.len > 0);
    }

    /// Reads the bytes of a deferred payload, or of a span of one (`location`
    /// narrowed), into `destination` (exactly `location.len` bytes); unchecked:
    /// the caller checks the whole payload with `checkPayload`.
    pub fn readPayload(
        cache: *const Cache,
        location: PayloadLocation,
        destination: []u8,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(destination.len == location.len);
        assert(location.offset + location.len <= cache.shards.byteLen(location.shard_id));
        errdefer cache.prefixSampleDiagnostic(location.sample_id, diagnostic);
        try cache.shards.readExactly(location.shard_id, destination, location.offset, diagnostic);
    }

    /// Like `readPayload`, and returns the CRC-32C of the bytes read, computed
    /// right after the read while they are still in this core's cache. Callers
    /// read a deferred payload in pieces (`deferred_reads.piece_bytes`, well
    /// inside a core's L2), each in one call: reading a piece in smaller calls
    /// to checksum it from L1 costs more in system calls and page-cache lookups
    /// than it saves (docs/integrity.md).
    pub fn readPayloadChecksummed(
        cache: *const Cache,
        location: PayloadLocation,
        destination: []u8,
        diagnostic: *Diagnostic,
    ) Error!u32 {
        assert(destination.len == location.len);
        try cache.readPayload(location, destination, diagnostic);
        return record_checksums.extend(0, destination);
    }

    /// Fails a deferred payload whose bytes, read in full, have the checksum `actual`
    /// where its record's checksum says otherwise.
    pub fn checkPayload(
        cache: *const Cache,
        location: PayloadLocation,
        actual: u32,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(location.sample_id < cache.sampleCount());
        assert(location.offset + location.len <= cache.shards.byteLen(location.shard_id));
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
    pub fn mappedPayload(
        cache: *Cache,
        location: PayloadLocation,
        diagnostic: *Diagnostic,
    ) Error!MappedPayload {
        assert(location.offset + location.len <= cache.shards.byteLen(location.shard_id));
        errdefer cache.prefixSampleDiagnostic(location.sample_id, diagnostic);
        const mapping = try cache.shardMapping(location.shard_id, diagnostic);
        const bytes = mapping.bytes()[@intCast(location.offset)..][0..@intCast(location.len)];
        if (location.checksum != null) {
            try cache.checkPayload(location, record_checksums.extend(0, bytes), diagnostic);
        }
        assert(bytes.len == location.len);
        return .{ .bytes = bytes, .mapping = mapping };
    }

    fn shardMapping(cache: *Cache, shard_id: u64, diagnostic: *Diagnostic) Error!*ShardMapping {
        assert(shard_id < cache.shards.count());
        const index: usize = @intCast(shard_id);
        if (@atomicLoad(?*ShardMapping, &cache.mappings[index], .acquire)) |mapping| return mapping;
        const io = system.io();
        cache.mappings_mutex.lockUncancelable(io);
        defer cache.mappings_mutex.unlock(io);
        if (cache.mappings[index]) |mapping| return mapping;
        const name = cache.parsed.manifest.shards[index].name;
        var name_buffer: [64]u8 = undefined;
        const what = std.fmt.bufPrint(&name_buffer, "shards/{s}", .{name}) catch "a shard";
        // The mapping outlives the file, which only has to stay open while it is made.
        const file = try cache.shards.pin(shard_id, diagnostic);
        defer cache.shards.unpin(shard_id);
        const len = cache.shards.byteLen(shard_id);
        const mapping = ShardMapping.create(
            cache.allocator,
            file,
            len,
            what,
            diagnostic,
        ) catch |err| {
            if (err == error.OutOfMemory and diagnostic.len == 0) {
                diagnostic.set("out of memory while mapping shards/{s}", .{name});
            }
            return err;
        };
        assert(mapping.bytes().len == cache.shards.byteLen(shard_id));
        @atomicStore(?*ShardMapping, &cache.mappings[index], mapping, .release);
        return mapping;
    }

    /// Asks the kernel to start reading a deferred payload into the page cache,
    /// so the later `readPayload` finds it there. Only a hint: failures are ignored.
    pub fn prefetchPayload(cache: *const Cache, location: PayloadLocation) void {
        cache.shards.prefetch(location.shard_id, location.offset, location.len);
    }
};

test {
    _ = @import("cache_reader_test.zig");
    // The modules the cache is made of (root.zig lists this file only).
    _ = @import("cache_files.zig");
    _ = @import("record_read.zig");
    _ = @import("shard_source.zig");
    _ = @import("open_shards.zig");
    _ = @import("test_cache.zig");
}
