//! The files a writer's `finish` writes beside the shards, into the staging
//! directory: index.bin, records.crc32c, metadata.arrow and, last,
//! manifest.json. Each is handed to the background fsyncs once written, and
//! each but the manifest returns its SHA-256 for the manifest.
const std = @import("std");
const assert = std.debug.assert;
const sha256 = @import("../codec/sha256.zig");
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const types = @import("../format/metadata_types.zig");
const index_file = @import("../format/index_file.zig");
const record_checksums = @import("../format/record_checksums.zig");
const arrow_ipc_write = @import("../format/arrow_ipc_write.zig");
const ColumnBuilder = @import("../format/column_builder.zig").ColumnBuilder;
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;
const Staging = @import("staging.zig").Staging;
const FileSyncs = @import("file_syncs.zig").FileSyncs;

pub const Error = error{ Io, OutOfMemory, InvalidInput, AlreadyExists };

pub const FinishFiles = struct {
    allocator: std.mem.Allocator,
    staging: *const Staging,
    syncs: *FileSyncs,

    /// index.bin: one row per sample.
    pub fn writeIndex(
        files: *const FinishFiles,
        index_bytes: []const u8,
        diagnostic: *Diagnostic,
    ) Error![sha256.digest_length]u8 {
        assert(index_bytes.len > 0 and index_bytes.len % index_file.row_bytes == 0);
        return files.write(cache_layout.index_file, index_bytes, diagnostic);
    }

    /// records.crc32c: one checksum per sample.
    pub fn writeChecksums(
        files: *const FinishFiles,
        checksum_bytes: []const u8,
        diagnostic: *Diagnostic,
    ) Error![sha256.digest_length]u8 {
        assert(checksum_bytes.len > 0);
        assert(checksum_bytes.len % record_checksums.checksum_bytes == 0);
        return files.write(cache_layout.record_checksums_file, checksum_bytes, diagnostic);
    }

    /// metadata.arrow: `row_count` rows of the columns, one per field of
    /// `schema` (none for an empty schema), as an Arrow IPC file.
    pub fn writeMetadata(
        files: *const FinishFiles,
        schema: []const types.Field,
        builders: []const ColumnBuilder,
        row_count: u64,
        diagnostic: *Diagnostic,
    ) Error![sha256.digest_length]u8 {
        assert(builders.len == schema.len and row_count > 0);
        const allocator = files.allocator;
        const columns = try allocator.alloc(types.Column, schema.len);
        defer allocator.free(columns);
        for (columns, schema, builders) |*column, field, *builder| {
            assert(builder.rowCount() == row_count);
            column.* = .{ .name = field.name, .values = builder.view() };
        }
        const bytes = arrow_ipc_write.writeFile(allocator, columns, row_count) catch |err| {
            switch (err) {
                error.OutOfMemory => return error.OutOfMemory,
                error.TooLarge => {
                    diagnostic.set("metadata table is too large for an Arrow IPC file", .{});
                    return error.InvalidInput;
                },
            }
        };
        defer allocator.free(bytes);
        return files.write(cache_layout.metadata_file, bytes, diagnostic);
    }

    /// manifest.json, refused when a reader would not read it.
    pub fn writeManifest(
        files: *const FinishFiles,
        listed: manifest.Manifest,
        diagnostic: *Diagnostic,
    ) Error!void {
        assert(listed.sample_count > 0 and listed.shards.len > 0);
        assert(manifest.versionSupported(listed.format_version));
        const text = manifest.write(files.allocator, listed) catch return error.OutOfMemory;
        defer files.allocator.free(text);
        // Shards are capped (`manifest.shards_max`); only a schema of huge field
        // names can still make a manifest no reader would open.
        if (text.len > manifest.manifest_bytes_max) {
            diagnostic.set(
                "manifest.json would take {d} bytes, more than the {d} MiB a reader accepts; " ++
                    "the metadata field names take too much of it",
                .{ text.len, manifest.manifest_bytes_max >> 20 },
            );
            return error.InvalidInput;
        }
        _ = try files.write(cache_layout.manifest_file, text, diagnostic);
    }

    /// Writes `name` in the staging directory, queues its fsync, and hashes its bytes.
    fn write(
        files: *const FinishFiles,
        name: []const u8,
        bytes: []const u8,
        diagnostic: *Diagnostic,
    ) Error![sha256.digest_length]u8 {
        assert(name.len > 0);
        const file = try files.staging.writeFile(name, bytes, diagnostic);
        files.syncs.inBackground(file, .{ .staging = name });
        return sha256.hash(bytes);
    }
};
