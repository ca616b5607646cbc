//! Where a dataset's stream stands, and the fingerprint of the data it belongs to.
//!
//! A resume state is one global position in the stream plus what the stream is
//! a function of: the caches (each manifest's SHA-256), the active table (a
//! digest of its identities and weights), the seed, `shuffle`, the sampling
//! algorithm and the epoch length. Loading a state into a dataset whose
//! fingerprint differs is refused with a message naming what differs, so a job
//! never continues silently on other data.
const std = @import("std");
const sha256 = @import("../codec/sha256.zig");
const sampler = @import("sampler.zig");
const permutation = @import("permutation.zig");
const mix = @import("mix.zig");
const Diagnostic = @import("../base/diagnostic.zig").Diagnostic;

pub const digest_length = sha256.digest_length;
pub const Digest = [digest_length]u8;

/// The names of the sampling algorithms, as they appear in resume states and in
/// docs/determinism.md. Changing how positions map to rows means a new name.
pub const algorithm_shuffled = sampler.key_domain;
pub const algorithm_permutation = permutation.key_domain;
pub const algorithm_ordered = "dataset_rt/table-order/v1";

/// How stream positions map to rows of the active table.
pub const Sampling = enum {
    /// `shuffle=False`: the table in order, cyclically (row = p mod n).
    table_order,
    /// `shuffle=True`, `replacement=True`: weighted draws (sampler.zig).
    weighted,
    /// `shuffle=True`, `replacement=False`: each epoch of n positions a
    /// permutation of the rows (permutation.zig).
    permutation,

    pub fn of(shuffle: bool, replacement: bool) Sampling {
        if (!shuffle) return .table_order;
        return if (replacement) .weighted else .permutation;
    }

    pub fn algorithm(sampling: Sampling) []const u8 {
        return switch (sampling) {
            .table_order => algorithm_ordered,
            .weighted => algorithm_shuffled,
            .permutation => algorithm_permutation,
        };
    }

    /// The stream's key for `seed` (unused in table order).
    pub fn key(sampling: Sampling, seed: u64) sampler.Key {
        return switch (sampling) {
            .table_order, .weighted => sampler.Key.fromSeed(seed),
            .permutation => sampler.Key.derive(permutation.key_domain, seed),
        };
    }
};

/// A place in the stream: the next unconsumed position and the epoch it belongs to.
pub const Position = struct {
    /// Epochs begun before this one since the table was installed.
    epoch: u64 = 0,
    /// Stream position of this epoch's first sample.
    epoch_start: u64 = 0,
    epoch_len: u64,
    /// The next unconsumed position: `epoch_start + offset`, offset < epoch_len.
    position: u64 = 0,

    pub fn offset(at: Position) u64 {
        return at.position -% at.epoch_start;
    }

    /// Positions of the epoch not yet consumed.
    pub fn remaining(at: Position) u64 {
        std.debug.assert(at.offset() < at.epoch_len);
        return at.epoch_len - at.offset();
    }

    /// The start of the epoch after this one.
    pub fn nextEpoch(at: Position) Position {
        return .{
            .epoch = at.epoch +% 1,
            .epoch_start = at.epoch_start +% at.epoch_len,
            .epoch_len = at.epoch_len,
            .position = at.epoch_start +% at.epoch_len,
        };
    }

    /// Refuses a position outside its epoch (`allow_end`: or at its very end).
    pub fn validate(
        at: Position,
        allow_end: bool,
        diagnostic: *Diagnostic,
    ) error{InvalidArgument}!void {
        if (at.epoch_len < 1) {
            diagnostic.set("epoch_len must be at least 1", .{});
            return error.InvalidArgument;
        }
        const inside = if (allow_end) at.offset() <= at.epoch_len else at.offset() < at.epoch_len;
        if (!inside) {
            diagnostic.set(
                "position {d} is outside its epoch ({d} .. {d})",
                .{ at.position, at.epoch_start, at.epoch_start +% at.epoch_len },
            );
            return error.InvalidArgument;
        }
    }

    /// `consumed` positions further on; an epoch consumed to its end becomes
    /// the start of the next one.
    pub fn advanced(at: Position, consumed: u64) Position {
        std.debug.assert(consumed <= at.remaining());
        if (consumed == at.remaining()) return at.nextEpoch();
        var next = at;
        next.position = at.position +% consumed;
        return next;
    }
};

/// What the stream is a function of.
pub const Fingerprint = struct {
    seed: u64,
    shuffle: bool,
    algorithm: []const u8,
    table_sha256: Digest,
    /// One per cache, in cache_id order.
    cache_sha256s: []const Digest,
};

/// Refuses `found` (a saved state's) unless it matches `expected` (the
/// dataset's) and its position lies inside an epoch of `epoch_len`.
/// `cache_paths` name the caches in the message.
pub fn check(
    expected: Fingerprint,
    found: Fingerprint,
    epoch_len: u64,
    at: Position,
    cache_paths: []const []const u8,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!void {
    try checkData(expected, found, cache_paths, diagnostic);
    if (expected.seed != found.seed) {
        diagnostic.set("the state has seed {d}, this dataset {d}", .{ found.seed, expected.seed });
        return error.InvalidArgument;
    }
    if (expected.shuffle != found.shuffle) {
        diagnostic.set(
            "the state has shuffle={s}, this dataset shuffle={s}",
            .{ pythonBool(found.shuffle), pythonBool(expected.shuffle) },
        );
        return error.InvalidArgument;
    }
    if (!std.mem.eql(u8, expected.algorithm, found.algorithm)) {
        if (isMix(expected.algorithm) or isMix(found.algorithm)) {
            diagnostic.set("the state was taken under {s} '{s}', this dataset reads under {s} " ++
                "'{s}': set_mix as when the state was taken before loading it", .{
                mixOrNot(found.algorithm),
                found.algorithm,
                mixOrNot(expected.algorithm),
                expected.algorithm,
            });
            return error.InvalidArgument;
        }
        diagnostic.set(
            "the state was made by sampling algorithm '{s}', this dataset uses '{s}'",
            .{ found.algorithm, expected.algorithm },
        );
        return error.InvalidArgument;
    }
    if (at.epoch_len != epoch_len) {
        diagnostic.set(
            "the state has epoch_len {d}, this dataset {d}",
            .{ at.epoch_len, epoch_len },
        );
        return error.InvalidArgument;
    }
    at.validate(true, diagnostic) catch |err| {
        diagnostic.prefix("the state's ", .{});
        return err;
    };
}

/// Refuses `found` unless it was saved over the same caches (manifest digests) and the
/// same active table (table digest) as `expected`.
fn checkData(
    expected: Fingerprint,
    found: Fingerprint,
    cache_paths: []const []const u8,
    diagnostic: *Diagnostic,
) error{InvalidArgument}!void {
    std.debug.assert(cache_paths.len == expected.cache_sha256s.len);
    if (found.cache_sha256s.len != expected.cache_sha256s.len) {
        diagnostic.set(
            "the state belongs to {d} caches, this dataset has {d}",
            .{ found.cache_sha256s.len, expected.cache_sha256s.len },
        );
        return error.InvalidArgument;
    }
    for (cache_paths, 0..) |path, cache_id| {
        const expected_digest = expected.cache_sha256s[cache_id];
        const found_digest = found.cache_sha256s[cache_id];
        if (!std.mem.eql(u8, &expected_digest, &found_digest)) {
            diagnostic.set(
                "the state belongs to other data: cache {d} ({s}) has manifest SHA-256 {s}, " ++
                    "the state's is {s}",
                .{
                    cache_id,
                    path,
                    &sha256.hexDigest(expected_digest),
                    &sha256.hexDigest(found_digest),
                },
            );
            return error.InvalidArgument;
        }
    }
    if (!std.mem.eql(u8, &expected.table_sha256, &found.table_sha256)) {
        diagnostic.set(
            "the state belongs to another active table: its rows or weights differ (table " ++
                "SHA-256 {s}, the state's is {s})",
            .{
                &sha256.hexDigest(expected.table_sha256),
                &sha256.hexDigest(found.table_sha256),
            },
        );
        return error.InvalidArgument;
    }
}

fn isMix(algorithm: []const u8) bool {
    return std.mem.startsWith(u8, algorithm, mix.key_domain);
}

fn mixOrNot(algorithm: []const u8) []const u8 {
    return if (isMix(algorithm)) "mix" else "no mix, sampling";
}

fn pythonBool(value: bool) []const u8 {
    return if (value) "True" else "False";
}

const testing = std.testing;

test "positions advance within an epoch and roll over at its end" {
    const at: Position = .{ .epoch = 2, .epoch_start = 20, .epoch_len = 10, .position = 23 };
    try testing.expectEqual(@as(u64, 7), at.remaining());
    try testing.expectEqual(
        Position{ .epoch = 2, .epoch_start = 20, .epoch_len = 10, .position = 25 },
        at.advanced(2),
    );
    try testing.expectEqual(
        Position{ .epoch = 3, .epoch_start = 30, .epoch_len = 10, .position = 30 },
        at.advanced(7),
    );
}

const example_digests = [_]Digest{ @splat(1), @splat(2) };
const example_paths = [_][]const u8{ "a", "b" };
const example_fingerprint: Fingerprint = .{
    .seed = 7,
    .shuffle = true,
    .algorithm = algorithm_shuffled,
    .table_sha256 = @splat(9),
    .cache_sha256s = &example_digests,
};

/// `check` refuses `found` against the example fingerprint with `message`, or with a
/// message starting with it where only its start is fixed here (`.prefix`).
fn expectRefused(
    found: Fingerprint,
    epoch_len: u64,
    at: Position,
    match: enum { exact, prefix },
    message: []const u8,
) !void {
    var diagnostic: Diagnostic = .{};
    try testing.expectError(
        error.InvalidArgument,
        check(example_fingerprint, found, epoch_len, at, &example_paths, &diagnostic),
    );
    if (match == .exact) return testing.expectEqualStrings(message, diagnostic.message());
    if (!std.mem.startsWith(u8, diagnostic.message(), message)) {
        std.debug.print("expected '{s}...', got '{s}'\n", .{ message, diagnostic.message() });
        return error.TestUnexpectedResult;
    }
}

test "a state of other data is refused naming what differs" {
    const expected = example_fingerprint;
    const at: Position = .{ .epoch_len = 10, .position = 4 };
    var diagnostic: Diagnostic = .{};
    try check(expected, expected, 10, at, &example_paths, &diagnostic);

    const other_digests = [_]Digest{ @splat(1), @splat(3) };
    var found = expected;
    found.cache_sha256s = &other_digests;
    try expectRefused(found, 10, at, .prefix, "the state belongs to other data: cache 1 (b)");
    found = expected;
    found.cache_sha256s = example_digests[0..1];
    try expectRefused(found, 10, at, .exact, "the state belongs to 1 caches, this dataset has 2");
    found = expected;
    found.table_sha256 = @splat(8);
    try expectRefused(found, 10, at, .prefix, "the state belongs to another active table");
    found = expected;
    found.seed = 8;
    try expectRefused(found, 10, at, .exact, "the state has seed 8, this dataset 7");
    found = expected;
    found.shuffle = false;
    const shuffle_differs = "the state has shuffle=False, this dataset shuffle=True";
    try expectRefused(found, 10, at, .exact, shuffle_differs);
    found = expected;
    found.algorithm = "dataset_rt/sampler/v0";
    try expectRefused(found, 10, at, .prefix, "the state was made by sampling algorithm");
    found.algorithm = "dataset_rt/mix/v1#0123456789abcdef";
    try expectRefused(found, 10, at, .exact, "the state was taken under mix " ++
        "'dataset_rt/mix/v1#0123456789abcdef', this dataset reads under no mix, sampling " ++
        "'dataset_rt/sampler/v1': set_mix as when the state was taken before loading it");
    try expectRefused(expected, 11, at, .exact, "the state has epoch_len 10, this dataset 11");
    const outside: Position = .{ .epoch_start = 10, .epoch_len = 10, .position = 21 };
    try expectRefused(expected, 10, outside, .prefix, "the state's ");
}
