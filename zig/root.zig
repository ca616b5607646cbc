//! The DatasetRT core. Every exported symbol lives in a c_api*.zig file, one per area
//! (reporting through c_status.zig); this file only pulls the modules into the build so
//! their exports and unit tests are compiled.
comptime {
    _ = @import("c_api.zig");
    _ = @import("c_api_writer.zig");
    _ = @import("c_api_dataset.zig");
    _ = @import("c_api_table.zig");
    _ = @import("c_api_iterator.zig");
    _ = @import("c_api_codec.zig");
    _ = @import("c_api_mix.zig");
    _ = @import("c_api_integrity.zig");
    _ = @import("c_api_formats.zig");
    _ = @import("c_api_open_files.zig");
    _ = @import("c_api_remote.zig");
    _ = @import("c_api_partitions.zig");
}

/// No per-thread alternate signal stack: std's default (256 KiB) is a
/// threadlocal array, and in a shared library every thread that touches the
/// library's TLS (each pool worker, each caller thread) gets a zeroed copy of
/// the whole TLS block from malloc; a worker also replaced the alternate stack
/// that a sanitizer runtime installed for it.
pub const std_options: @import("std").Options = .{ .signal_stack_size = null };

test {
    _ = @import("base/diagnostic.zig");
    _ = @import("base/directory_entries.zig");
    _ = @import("base/durable_files.zig");
    _ = @import("base/error_words.zig");
    _ = @import("base/file_lock.zig");
    _ = @import("base/file_status.zig");
    _ = @import("base/file_view.zig");
    _ = @import("base/positional_read.zig");
    _ = @import("base/thread_pool.zig");
    _ = @import("codec/crc32c.zig");
    _ = @import("codec/crc32c_combine.zig");
    _ = @import("codec/flatbuffers.zig");
    _ = @import("codec/lz4.zig");
    _ = @import("codec/sha256.zig");
    _ = @import("format/arrow_ipc.zig");
    _ = @import("format/arrow_ipc_read.zig");
    _ = @import("format/arrow_ipc_test.zig");
    _ = @import("format/arrow_ipc_write.zig");
    _ = @import("format/cache_identity.zig");
    _ = @import("format/cache_layout.zig");
    _ = @import("format/column_builder.zig");
    _ = @import("format/index_file.zig");
    _ = @import("format/json_scan.zig");
    _ = @import("format/manifest.zig");
    _ = @import("format/manifest_refusal_test.zig");
    _ = @import("format/manifest_test.zig");
    _ = @import("format/metadata_canonical.zig");
    _ = @import("format/metadata_columns.zig");
    _ = @import("format/metadata_json.zig");
    _ = @import("format/metadata_json_test.zig");
    _ = @import("format/metadata_types.zig");
    _ = @import("format/metadata_verify.zig");
    _ = @import("format/record_checksums.zig");
    _ = @import("format/shard_record.zig");
    _ = @import("pipeline_test.zig");
    _ = @import("read/cache_reader.zig");
    _ = @import("read/shard_mapping.zig");
    _ = @import("read/open_shards.zig");
    _ = @import("read/dataset.zig");
    _ = @import("read/deferred_reads.zig");
    _ = @import("read/read_pipeline.zig");
    _ = @import("read/fetch_ahead.zig");
    _ = @import("read/fetch_lock.zig");
    _ = @import("read/fetch_slots.zig");
    _ = @import("read/remote.zig");
    _ = @import("read/remote_cache.zig");
    _ = @import("read/released_batches.zig");
    _ = @import("read/sample_batch.zig");
    _ = @import("read/verify.zig");
    _ = @import("stream/active_table.zig");
    _ = @import("stream/permutation.zig");
    _ = @import("stream/sampler.zig");
    _ = @import("stream/stream_share.zig");
    _ = @import("stream/stream_state.zig");
    _ = @import("table/arrow_c_export.zig");
    _ = @import("table/cache_info.zig");
    _ = @import("table/metadata_table.zig");
    _ = @import("write/batch_encoding.zig");
    _ = @import("write/cache_migration.zig");
    _ = @import("write/partition_commit.zig");
    _ = @import("write/cache_writer.zig");
    _ = @import("write/file_syncs.zig");
    _ = @import("write/page_cache_policy.zig");
    _ = @import("write/shard_files.zig");
    _ = @import("write/shard_hasher.zig");
    _ = @import("write/staging.zig");
    _ = @import("write/cache_replace.zig");
    _ = @import("write/writer_stats.zig");
}
