//! The DatasetRT core. Every exported symbol lives in c_api.zig; this file only
//! pulls the modules into the build so their exports and unit tests are compiled.
comptime {
    _ = @import("c_api.zig");
}

/// No per-thread alternate signal stack: std's default (256 KiB) is a
/// threadlocal array, and in a shared library every thread that touches the
/// library's TLS (each pool worker, each caller thread) gets a zeroed copy of
/// the whole TLS block from malloc; a worker also replaced the alternate stack
/// that a sanitizer runtime installed for it.
pub const std_options: @import("std").Options = .{ .signal_stack_size = null };

test {
    _ = @import("active_table.zig");
    _ = @import("arrow_c_export.zig");
    _ = @import("arrow_ipc.zig");
    _ = @import("cache_reader.zig");
    _ = @import("cache_writer.zig");
    _ = @import("column_builder.zig");
    _ = @import("dataset.zig");
    _ = @import("deferred_reads.zig");
    _ = @import("diagnostic.zig");
    _ = @import("directory_entries.zig");
    _ = @import("durable_files.zig");
    _ = @import("file_lock.zig");
    _ = @import("file_status.zig");
    _ = @import("file_view.zig");
    _ = @import("flatbuffers.zig");
    _ = @import("index_file.zig");
    _ = @import("lz4.zig");
    _ = @import("manifest.zig");
    _ = @import("metadata_columns.zig");
    _ = @import("metadata_json.zig");
    _ = @import("metadata_table.zig");
    _ = @import("metadata_types.zig");
    _ = @import("permutation.zig");
    _ = @import("positional_read.zig");
    _ = @import("read_pipeline.zig");
    _ = @import("sample_batch.zig");
    _ = @import("sampler.zig");
    _ = @import("sha256.zig");
    _ = @import("shard_hasher.zig");
    _ = @import("shard_record.zig");
    _ = @import("stream_shard.zig");
    _ = @import("stream_state.zig");
    _ = @import("thread_pool.zig");
}
