//! What a writer checks before it takes anything: its source name and
//! compression setting, and each push's payload lengths and pointers.
const std = @import("std");
const assert = std.debug.assert;
const cache_layout = @import("../format/cache_layout.zig");
const manifest = @import("../format/manifest.zig");
const shard_record = @import("../format/shard_record.zig");
const durable_files = @import("../base/durable_files.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const Error = error{ InvalidArgument, InvalidInput };

/// The directory caches are written under: any non-empty path without NUL bytes.
pub fn checkBaseDir(base_dir_path: []const u8, diagnostic: *Diagnostic) Error!void {
    if (base_dir_path.len == 0 or std.mem.indexOfScalar(u8, base_dir_path, 0) != null) {
        diagnostic.set(
            "base cache directory '{s}' must be a non-empty path without NUL bytes",
            .{base_dir_path},
        );
        return error.InvalidArgument;
    }
    assert(base_dir_path.len > 0);
}

/// A source name must be one plain path segment other than the staging directory's.
pub fn checkSourceName(source_name: []const u8, diagnostic: *Diagnostic) Error!void {
    // The name is copied into messages, which hold up to their buffer's length.
    comptime assert(Diagnostic.message_bytes_max >= 256);
    if (durable_files.plainSegmentProblem(source_name)) |problem| {
        // Escaped: a NUL or control byte would cut or garble the C-string message.
        diagnostic.set(
            "source name \"{f}\" {s}; it must be one plain path segment",
            .{ std.zig.fmtString(source_name), problem },
        );
        return error.InvalidArgument;
    }
    if (!std.unicode.utf8ValidateSlice(source_name)) {
        // The manifest records the name as a JSON string: it must be text.
        diagnostic.set(
            "source name \"{f}\" is not valid UTF-8",
            .{std.zig.fmtString(source_name)},
        );
        return error.InvalidArgument;
    }
    if (std.mem.eql(u8, source_name, cache_layout.staging_dir)) {
        diagnostic.set("source name 'tmp' is reserved for the staging directory", .{});
        return error.InvalidArgument;
    }
    assert(source_name.len > 0 and std.mem.indexOfScalar(u8, source_name, '/') == null);
}

/// Refuses a ratio that does not fit the codec (`manifest.compressionProblem`).
pub fn checkCompression(
    compression: shard_record.Compression,
    ratio: f64,
    diagnostic: *Diagnostic,
) Error!void {
    if (manifest.compressionProblem(manifestCompression(compression, ratio))) |problem| {
        diagnostic.set("shard_compression.ratio {s}, got {d}", .{ problem, ratio });
        return error.InvalidArgument;
    }
    assert(compression == .lz4 or ratio == 1.0);
}

/// The compression setting as the manifest records it for every shard.
pub fn manifestCompression(compression: shard_record.Compression, ratio: f64) manifest.Compression {
    return .{ .algo = switch (compression) {
        .none => .none,
        .lz4 => .lz4,
    }, .ratio = ratio };
}

/// The payloads' total length; a NULL payload must be empty.
pub fn borrowedBytes(
    payloads: []const ?[*]const u8,
    payload_lens: []const u64,
    first_sample: u64,
    diagnostic: *Diagnostic,
) Error!u64 {
    assert(payloads.len == payload_lens.len);
    var total: u64 = 0;
    for (payloads, payload_lens, 0..) |payload, len, i| {
        if (payload == null and len != 0) {
            diagnostic.set(
                "sample {d}: payload pointer is NULL for {d} bytes",
                .{ first_sample + i, len },
            );
            return error.InvalidArgument;
        }
        total +|= len;
    }
    for (payload_lens) |len| assert(total >= len); // saturated, never wrapped
    return total;
}

/// The payloads' lengths add up to `payloads_len`, and each fits the codec.
pub fn checkPayloadLens(
    payloads_len: u64,
    payload_lens: []const u64,
    compression: shard_record.Compression,
    first_sample: u64,
    diagnostic: *Diagnostic,
) Error!void {
    // An lz4 record's payload length fits its u32 prefix.
    comptime assert(shard_record.lz4_payload_bytes_max <= std.math.maxInt(u32));
    var total: u64 = 0;
    for (payload_lens, 0..) |len, i| {
        if (compression == .lz4 and len > shard_record.lz4_payload_bytes_max) {
            diagnostic.set(
                "sample {d}: payload of {d} bytes is too large for lz4 records (at most {d})",
                .{ first_sample + i, len, shard_record.lz4_payload_bytes_max },
            );
            return error.InvalidInput;
        }
        total = std.math.add(u64, total, len) catch {
            diagnostic.set("payload lengths overflow", .{});
            return error.InvalidArgument;
        };
    }
    if (total != payloads_len) {
        diagnostic.set(
            "payload lengths add up to {d} bytes but {d} bytes were given",
            .{ total, payloads_len },
        );
        return error.InvalidArgument;
    }
    assert(total == payloads_len);
}

test "a NULL payload pointer is refused unless its payload is empty" {
    var diagnostic: Diagnostic = .{};
    const bytes = "abc";
    const payloads = [_]?[*]const u8{ bytes, null, null };
    try std.testing.expectEqual(
        @as(u64, 3),
        try borrowedBytes(&payloads, &.{ 3, 0, 0 }, 7, &diagnostic),
    );
    const refused = borrowedBytes(&payloads, &.{ 3, 0, 2 }, 7, &diagnostic);
    try std.testing.expectError(error.InvalidArgument, refused);
    try std.testing.expectEqualStrings(
        "sample 9: payload pointer is NULL for 2 bytes",
        diagnostic.message(),
    );
}

test "payload lengths must add up to the bytes given and fit the codec" {
    var diagnostic: Diagnostic = .{};
    try checkPayloadLens(5, &.{ 2, 3 }, .none, 0, &diagnostic);
    try std.testing.expectError(
        error.InvalidArgument,
        checkPayloadLens(6, &.{ 2, 3 }, .none, 0, &diagnostic),
    );
    try std.testing.expectEqualStrings(
        "payload lengths add up to 5 bytes but 6 bytes were given",
        diagnostic.message(),
    );
    const overflow = checkPayloadLens(0, &.{ std.math.maxInt(u64), 1 }, .none, 0, &diagnostic);
    try std.testing.expectError(error.InvalidArgument, overflow);
    const too_large = shard_record.lz4_payload_bytes_max + 1;
    try std.testing.expectError(
        error.InvalidInput,
        checkPayloadLens(too_large, &.{too_large}, .lz4, 4, &diagnostic),
    );
    try std.testing.expect(std.mem.startsWith(u8, diagnostic.message(), "sample 4: payload of "));
}

test "a source name is one plain segment of UTF-8 text, not the staging directory's" {
    var diagnostic: Diagnostic = .{};
    try checkSourceName("images-2024", &diagnostic);
    for ([_][]const u8{ "", ".", "..", "a/b", "tmp", "bad\xff" }) |name| {
        try std.testing.expectError(error.InvalidArgument, checkSourceName(name, &diagnostic));
    }
    try std.testing.expectEqualStrings(
        "source name \"bad\\xff\" is not valid UTF-8",
        diagnostic.message(),
    );
}

test "the compression ratio must fit the codec" {
    var diagnostic: Diagnostic = .{};
    try checkCompression(.none, 1.0, &diagnostic);
    try checkCompression(.lz4, 0.5, &diagnostic);
    try std.testing.expectError(error.InvalidArgument, checkCompression(.none, 0.5, &diagnostic));
    try std.testing.expect(
        std.mem.startsWith(u8, diagnostic.message(), "shard_compression.ratio "),
    );
    const listed = manifestCompression(.lz4, 0.25);
    try std.testing.expectEqual(manifest.Algo.lz4, listed.algo);
    try std.testing.expectEqual(@as(f64, 0.25), listed.ratio);
}
