//! `committed.json`: what a partition commit records beside the partitions
//! (`<base>/tmp/partitions/<name>/committed.json`, docs/storage-format.md,
//! "Partitions") before it publishes, so that the commit run again knows the
//! cache at the name as its own: the published manifest's SHA-256, and the
//! digest of the partitions it joined (`partsDigest`), so that another build
//! of the name is not taken for it.
//!
//!     {"manifest_sha256": "<64 hex>", "parts_sha256": "<64 hex>"}
//!
//! Commits before the partitions' digest recorded the manifest only; such a
//! record still names its cache, whatever the partitions.
const std = @import("std");
const sha256 = @import("../codec/sha256.zig");
const Part = @import("partition_commit.zig").Part;

const prefix_format = "{{\"manifest_sha256\": \"{s}\", \"parts_sha256\": \"";
const record_bytes = "{\"manifest_sha256\": \"\", \"parts_sha256\": \"\"}".len +
    4 * sha256.digest_length;

/// Room for a record (and for reading one: a longer file does not match).
pub const Buffer = [record_bytes]u8;

/// The record of a published manifest's SHA-256 and the partitions' digest.
pub fn text(buffer: *Buffer, manifest_sha256: [32]u8, parts_sha256: [32]u8) []const u8 {
    return std.fmt.bufPrint(buffer, prefix_format ++ "{s}\"}}", .{
        &sha256.hexDigest(manifest_sha256), &sha256.hexDigest(parts_sha256),
    }) catch unreachable;
}

/// The record as commits before the partitions' digest wrote it.
fn legacyText(buffer: *Buffer, manifest_sha256: [32]u8) []const u8 {
    return std.fmt.bufPrint(buffer, "{{\"manifest_sha256\": \"{s}\"}}", .{
        &sha256.hexDigest(manifest_sha256),
    }) catch unreachable;
}

/// The SHA-256 naming the partitions a commit joins: over each partition in
/// order, `<attempt>\n<sample_count>\n<manifest_sha256, hex>\n` (the attempt
/// empty for a partition of no samples). Attempts are unique, so another build
/// of the name (any partition written again) has another digest.
pub fn partsDigest(parts: []const Part) [32]u8 {
    var hasher = sha256.Hasher.init();
    for (parts) |part| {
        var count_buffer: [24]u8 = undefined;
        const count = std.fmt.bufPrint(&count_buffer, "{d}", .{part.sample_count}) catch
            unreachable;
        hasher.update(part.attempt orelse "");
        hasher.update("\n");
        hasher.update(count);
        hasher.update("\n");
        hasher.update(&sha256.hexDigest(part.manifest_sha256));
        hasher.update("\n");
    }
    return hasher.final();
}

/// Whether `parts` says nothing of the partitions: all of no samples, what
/// `dataset_rt.commit_partitions` passes when a commit's clean-up removed the
/// pointers (a commit of only empty partitions is refused before this matters).
fn partsUnknown(parts: []const Part) bool {
    for (parts) |part| {
        if (part.attempt != null or part.sample_count != 0) return false;
    }
    return true;
}

/// Whether `recorded` says a commit of `parts` published the manifest of
/// SHA-256 `manifest_sha256`. With `parts` unknown (`partsUnknown`), and for a
/// record of an earlier version, the manifest decides.
pub fn matches(recorded: []const u8, manifest_sha256: [32]u8, parts: []const Part) bool {
    var expected_buffer: Buffer = undefined;
    if (std.mem.eql(u8, recorded, legacyText(&expected_buffer, manifest_sha256))) return true;
    const expected = text(&expected_buffer, manifest_sha256, partsDigest(parts));
    if (!partsUnknown(parts)) return std.mem.eql(u8, recorded, expected);
    // Any partitions: the record up to the digest, and its length.
    const digest_at = expected.len - 2 - 2 * sha256.digest_length;
    if (recorded.len != expected.len) return false;
    return std.mem.eql(u8, recorded[0..digest_at], expected[0..digest_at]);
}

const testing = std.testing;

test "partsDigest follows every field of every partition, in order" {
    const zero: [32]u8 = @splat(0);
    const a: Part = .{ .attempt = "a0", .sample_count = 4, .manifest_sha256 = @splat(7) };
    const b: Part = .{ .attempt = "a1", .sample_count = 3, .manifest_sha256 = @splat(9) };
    const empty: Part = .{ .attempt = null, .sample_count = 0, .manifest_sha256 = zero };
    const digest = partsDigest(&.{ a, b, empty });
    // The documented text (docs/storage-format.md, "Partitions").
    var text_buffer: [256]u8 = undefined;
    const hashed = try std.fmt.bufPrint(&text_buffer, "a0\n4\n{s}\na1\n3\n{s}\n\n0\n{s}\n", .{
        &sha256.hexDigest(a.manifest_sha256),
        &sha256.hexDigest(b.manifest_sha256),
        &sha256.hexDigest(zero),
    });
    try testing.expectEqualStrings("0707", sha256.hexDigest(a.manifest_sha256)[0..4]);
    try testing.expectEqual(sha256.hash(hashed), digest);
    var changed = a;
    changed.sample_count = 5;
    try testing.expect(!std.mem.eql(u8, &digest, &partsDigest(&.{ changed, b, empty })));
    try testing.expect(!std.mem.eql(u8, &digest, &partsDigest(&.{ b, a, empty })));
}

test "a record matches its manifest and partitions, any partitions when unknown" {
    const manifest_sha256: [32]u8 = @splat(3);
    const ours = [_]Part{.{ .attempt = "a0", .sample_count = 4, .manifest_sha256 = @splat(7) }};
    const theirs = [_]Part{.{ .attempt = "b0", .sample_count = 4, .manifest_sha256 = @splat(7) }};
    const unknown = [_]Part{.{ .attempt = null, .sample_count = 0, .manifest_sha256 = @splat(0) }};
    var buffer: Buffer = undefined;
    const recorded = text(&buffer, manifest_sha256, partsDigest(&ours));
    try testing.expect(matches(recorded, manifest_sha256, &ours));
    try testing.expect(!matches(recorded, manifest_sha256, &theirs));
    try testing.expect(matches(recorded, manifest_sha256, &unknown));
    try testing.expect(!matches(recorded, @splat(4), &ours));
    try testing.expect(!matches(recorded, @splat(4), &unknown));
    try testing.expect(!matches(recorded[0 .. recorded.len - 1], manifest_sha256, &unknown));
    var legacy_buffer: Buffer = undefined;
    const legacy = legacyText(&legacy_buffer, manifest_sha256);
    try testing.expect(matches(legacy, manifest_sha256, &theirs));
    try testing.expect(!matches(legacy, @splat(4), &theirs));
}
