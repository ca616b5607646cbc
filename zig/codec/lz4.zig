//! LZ4 block codec (the block format only, no frame format).
//!
//! A block is a chain of sequences. Each sequence is a token byte (high nibble: literal
//! count, low nibble: match length minus 4; 15 means "more length bytes follow"), the
//! extra literal length bytes, the literals, a little-endian u16 offset, and the extra
//! match length bytes. The last sequence stops after its literals. Blocks produced here
//! decode with the reference `LZ4_decompress_safe`; the decoder trusts nothing in its input.
const std = @import("std");
const assert = std.debug.assert;

pub const DecompressError = error{CorruptBlock};

/// The largest input `compress` accepts: liblz4's LZ4_MAX_INPUT_SIZE. The matcher's
/// u32 positions and every reference decoder rely on blocks staying below it.
pub const source_length_max = 0x7E00_0000;

/// The shortest match the format can express.
const match_length_min = 4;
/// The reference decoder needs the last 5 bytes of a block to be literals.
const last_literals_length = 5;
/// The last match must start at least 12 bytes before the end of the block.
const match_start_margin = 12;
/// Inputs shorter than this cannot hold a match that respects both end-of-block rules.
const input_length_for_match_min = match_start_margin + 1;
/// Offsets are stored in 16 bits.
const offset_max = 65535;
/// A length nibble of 15 says that extension bytes follow.
const nibble_max = 15;

/// 4096 u32 entries keep the table at 16 KiB, within L1 cache.
const hash_log = 12;
const hash_table_length = 1 << hash_log;
/// After 2^skip_trigger misses in a row the matcher starts skipping ahead faster,
/// so incompressible input is crossed quickly.
const skip_trigger = 6;

/// Wide copies move this many bytes at a time and may write up to this many bytes
/// past the end of a copy (never past the destination).
const copy_width = 16;

/// Worst-case compressed size for `source_len` input bytes (same formula as LZ4_compressBound: n +
/// n/255 + 16).
pub fn compressBound(source_len: usize) usize {
    return source_len + source_len / 255 + 16;
}

/// The matcher's hash table of positions, reusable from block to block without
/// clearing: clearing 16 KiB for every 1 KiB record cost as much as a tenth of
/// a write's compression. Each block stores its positions plus a base above
/// every entry of the blocks before it, and reads an entry below its base as
/// position 0, which is what a cleared table holds: the output is exactly that
/// of a fresh table.
pub const Table = struct {
    entries: [hash_table_length]u32 = @splat(0),
    /// The next block's base; entries below it belong to earlier blocks.
    next_base: u32 = 1,

    /// The base for a block of `source_len` bytes, clearing the table when the
    /// bases would run past u32.
    fn begin(table: *Table, source_len: usize) u32 {
        assert(source_len <= source_length_max);
        if (std.math.maxInt(u32) - table.next_base <= source_len) {
            @memset(&table.entries, 0);
            table.next_base = 1;
        }
        const base = table.next_base;
        table.next_base = base + @as(u32, @intCast(source_len)) + 1;
        return base;
    }

    fn position(table: *const Table, slot: usize, base: u32) usize {
        const entry = table.entries[slot];
        return if (entry < base) 0 else entry - base;
    }

    fn store(table: *Table, slot: usize, base: u32, at: usize) void {
        table.entries[slot] = base + @as(u32, @intCast(at));
    }
};

/// Compresses `source` into `destination` (destination.len >= compressBound(source.len),
/// source.len <= source_length_max); returns bytes written.
/// Output is a standard LZ4 block decodable by the reference liblz4 `LZ4_decompress_safe`:
/// the last 5 bytes are literals and the last match starts at least 12 bytes before the end.
/// An empty source compresses to the single byte 0x00 (token with 0 literals), like lz4_flex /
/// liblz4.
pub fn compress(source: []const u8, destination: []u8) usize {
    var table: Table = .{};
    return compressWith(&table, source, destination);
}

/// `compress` with a table kept by the caller across blocks (same output).
pub fn compressWith(table: *Table, source: []const u8, destination: []u8) usize {
    assert(source.len <= source_length_max);
    assert(destination.len >= compressBound(source.len));

    var output: usize = 0;
    var anchor: usize = 0;
    if (source.len >= input_length_for_match_min) {
        anchor = compressSequences(table, source, destination, &output);
    }
    output = writeLastLiterals(destination, output, source[anchor..]);
    assert(output <= compressBound(source.len));
    return output;
}

/// Greedy matcher: emits every sequence that ends in a match and returns the index of
/// the first source byte not yet emitted (the start of the last literals).
fn compressSequences(table: *Table, source: []const u8, destination: []u8, output: *usize) usize {
    assert(source.len >= input_length_for_match_min);
    // A match may extend up to here, so the last bytes stay literals.
    const match_end_max = source.len - last_literals_length;
    // A match may start at most here.
    const match_start_max = source.len - match_start_margin;

    const base = table.begin(source.len);
    var anchor: usize = 0;
    var position: usize = 1;
    table.store(hashOf(source, 0), base, 0);

    while (true) {
        var candidate: usize = undefined;
        var attempts: usize = 1 << skip_trigger;
        while (true) {
            if (position > match_start_max) return anchor;
            const sequence = read32(source, position);
            const slot = hashOf(source, position);
            candidate = table.position(slot, base);
            table.store(slot, base, position);
            assert(candidate < position);
            if (position - candidate <= offset_max and read32(source, candidate) == sequence) break;
            position += attempts >> skip_trigger;
            attempts += 1;
        }

        // The bytes just before both positions often match too: longer match, fewer literals.
        while (position > anchor and candidate > 0 and
            source[position - 1] == source[candidate - 1])
        {
            position -= 1;
            candidate -= 1;
        }

        const match_length = match_length_min + countEqual(
            source,
            candidate + match_length_min,
            position + match_length_min,
            match_end_max,
        );
        output.* = writeSequence(
            destination,
            output.*,
            source,
            anchor,
            position,
            @intCast(position - candidate),
            match_length,
        );
        position += match_length;
        anchor = position;
        assert(anchor <= match_end_max);
        if (position > match_start_max) return anchor;

        // Index a position inside the match so that the next repetition of it is found.
        table.store(hashOf(source, position - 2), base, position - 2);
    }
}

/// Hashes the 5 bytes at `index`. Five bytes rather than the 4 a match needs give
/// fewer collisions between short repeats, which measured ~3% smaller output.
/// Multiplicative hash: the top bits of the product depend on every input byte.
fn hashOf(source: []const u8, index: usize) usize {
    // Matches start at least 12 bytes before the end, so the 8-byte read stays inside.
    assert(index + 8 <= source.len);
    const sequence = read64(source, index) << 24;
    return @intCast((sequence *% 889523592379) >> (64 - hash_log));
}

fn read32(bytes: []const u8, index: usize) u32 {
    return std.mem.readInt(u32, bytes[index..][0..4], .little);
}

fn read64(bytes: []const u8, index: usize) u64 {
    return std.mem.readInt(u64, bytes[index..][0..8], .little);
}

/// Number of equal bytes at `earlier` and `later`, stopping before `later` reaches `limit`.
fn countEqual(source: []const u8, earlier: usize, later: usize, limit: usize) usize {
    assert(earlier < later);
    assert(later <= limit);
    assert(limit <= source.len);
    var count: usize = 0;
    while (later + count + 8 <= limit) {
        const difference = read64(source, earlier + count) ^ read64(source, later + count);
        if (difference != 0) return count + @ctz(difference) / 8;
        count += 8;
    }
    while (later + count < limit and source[earlier + count] == source[later + count]) {
        count += 1;
    }
    return count;
}

fn writeSequence(
    destination: []u8,
    output_start: usize,
    source: []const u8,
    literals_start: usize,
    literals_end: usize,
    offset: u16,
    match_length: usize,
) usize {
    assert(literals_start <= literals_end);
    assert(offset > 0);
    assert(match_length >= match_length_min);
    const literals_length = literals_end - literals_start;
    const match_length_code = match_length - match_length_min;

    const token_index = output_start;
    var output = output_start + 1;
    const literals_nibble: u8 = @intCast(@min(literals_length, nibble_max));
    const match_nibble: u8 = @intCast(@min(match_length_code, nibble_max));
    destination[token_index] = (literals_nibble << 4) | match_nibble;

    if (literals_length >= nibble_max) {
        output = writeLengthExtension(destination, output, literals_length - nibble_max);
    }
    output = copyLiterals(destination, output, source, literals_start, literals_length);
    std.mem.writeInt(u16, destination[output..][0..2], offset, .little);
    output += 2;
    if (match_length_code >= nibble_max) {
        output = writeLengthExtension(destination, output, match_length_code - nibble_max);
    }
    return output;
}

fn writeLastLiterals(destination: []u8, output_start: usize, literals: []const u8) usize {
    var output = output_start;
    const literals_nibble: u8 = @intCast(@min(literals.len, nibble_max));
    destination[output] = literals_nibble << 4;
    output += 1;
    if (literals.len >= nibble_max) {
        output = writeLengthExtension(destination, output, literals.len - nibble_max);
    }
    @memcpy(destination[output..][0..literals.len], literals);
    return output + literals.len;
}

/// Writes `remainder` as a run of 255 bytes and a final byte below 255.
fn writeLengthExtension(destination: []u8, output: usize, remainder: usize) usize {
    const full_bytes = remainder / 255;
    @memset(destination[output..][0..full_bytes], 255);
    destination[output + full_bytes] = @intCast(remainder % 255);
    return output + full_bytes + 1;
}

/// Copies literals; short runs use one fixed-width copy when both buffers have room,
/// because a call to memcpy costs more than the copy itself.
fn copyLiterals(
    destination: []u8,
    output: usize,
    source: []const u8,
    input: usize,
    length: usize,
) usize {
    if (length <= copy_width and
        source.len - input >= copy_width and
        destination.len - output >= copy_width)
    {
        destination[output..][0..copy_width].* = source[input..][0..copy_width].*;
    } else {
        @memcpy(destination[output..][0..length], source[input..][0..length]);
    }
    return output + length;
}

/// Decompresses one block into `destination`, which must be filled EXACTLY (the caller knows the
/// uncompressed length from a u32 prefix). Every length, offset and bound is checked and any
/// violation returns error.CorruptBlock: an offset of 0 or one pointing before the start of the
/// output, a length running past the input or the output, input left over after the last
/// sequence, and output not exactly filled are all corrupt. The loop consumes at least one
/// input byte per step, so it ends after at most `source.len` steps.
pub fn decompress(source: []const u8, destination: []u8) DecompressError!void {
    var input: usize = 0;
    var output: usize = 0;
    while (true) {
        if (input >= source.len) return error.CorruptBlock;
        const token = source[input];
        input += 1;

        var literals_length: usize = token >> 4;
        if (literals_length == nibble_max) {
            literals_length += try readLengthExtension(source, &input, destination.len - output);
        }
        if (literals_length > source.len - input) return error.CorruptBlock;
        if (literals_length > destination.len - output) return error.CorruptBlock;
        output = copyLiterals(destination, output, source, input, literals_length);
        input += literals_length;

        // Only the last sequence ends exactly at the end of the input.
        if (input == source.len) break;

        if (source.len - input < 2) return error.CorruptBlock;
        const offset = std.mem.readInt(u16, source[input..][0..2], .little);
        input += 2;
        if (offset == 0 or offset > output) return error.CorruptBlock;

        var match_length: usize = (token & nibble_max) + match_length_min;
        if (token & nibble_max == nibble_max) {
            match_length += try readLengthExtension(source, &input, destination.len - output);
        }
        if (match_length > destination.len - output) return error.CorruptBlock;
        copyMatch(destination, output, offset, match_length);
        output += match_length;
    }
    if (output != destination.len) return error.CorruptBlock;
}

/// Sums extension bytes up to and including the first byte below 255. A sum above
/// `length_max` cannot fit the output, so it is rejected before it can grow further.
fn readLengthExtension(source: []const u8, input: *usize, length_max: usize) DecompressError!usize {
    var sum: usize = 0;
    while (true) {
        if (input.* >= source.len) return error.CorruptBlock;
        const byte = source[input.*];
        input.* += 1;
        sum += byte;
        if (sum > length_max) return error.CorruptBlock;
        if (byte != 255) return sum;
    }
}

/// Copies `length` bytes from `offset` bytes back. Source and target overlap when
/// offset < length; the copy must then repeat the pattern, as the format defines.
fn copyMatch(destination: []u8, output: usize, offset: usize, length: usize) void {
    assert(offset > 0 and offset <= output);
    assert(length <= destination.len - output);
    const match = output - offset;
    const has_slack = destination.len - output >= length + copy_width;
    if (offset >= 16 and has_slack) {
        copyChunks(16, destination, match, output, length);
    } else if (offset >= 8 and has_slack) {
        copyChunks(8, destination, match, output, length);
    } else if (offset == 1) {
        @memset(destination[output..][0..length], destination[match]);
    } else {
        copyRepeating(destination, match, output, length);
    }
}

/// Chunked forward copy, rounded up to whole chunks. Each chunk reads only bytes
/// already written because `output - match >= width`.
fn copyChunks(
    comptime width: usize,
    destination: []u8,
    match: usize,
    output: usize,
    length: usize,
) void {
    assert(output - match >= width);
    assert(destination.len - output >= length + width);
    var copied: usize = 0;
    while (copied < length) : (copied += width) {
        destination[output + copied ..][0..width].* = destination[match + copied ..][0..width].*;
    }
}

/// Copies a short repeating pattern with non-overlapping copies whose size doubles:
/// the distance from `match` to the write position stays a multiple of the offset.
fn copyRepeating(destination: []u8, match: usize, output: usize, length: usize) void {
    var written: usize = 0;
    while (written < length) {
        const chunk = @min(output + written - match, length - written);
        @memcpy(destination[output + written ..][0..chunk], destination[match..][0..chunk]);
        written += chunk;
    }
}

const testing = std.testing;

fn expectRoundTrip(source: []const u8) !void {
    const compressed = try testing.allocator.alloc(u8, compressBound(source.len));
    defer testing.allocator.free(compressed);
    const compressed_length = compress(source, compressed);
    try testing.expect(compressed_length <= compressBound(source.len));

    const restored = try testing.allocator.alloc(u8, source.len);
    defer testing.allocator.free(restored);
    try decompress(compressed[0..compressed_length], restored);
    try testing.expectEqualSlices(u8, source, restored);

    // One byte more or less than the real length must not decode.
    const longer = try testing.allocator.alloc(u8, source.len + 1);
    defer testing.allocator.free(longer);
    try testing.expectError(
        error.CorruptBlock,
        decompress(compressed[0..compressed_length], longer),
    );
    if (source.len > 0) {
        try testing.expectError(
            error.CorruptBlock,
            decompress(compressed[0..compressed_length], restored[0 .. source.len - 1]),
        );
    }
}

/// Text-like words, runs, short repeats and noise, like a real dataset shard.
fn fillMixed(random: std.Random, bytes: []u8) void {
    const words = [_][]const u8{
        "label",
        "image",
        "\"id\": ",
        "tensor",
        "sample ",
        "0.25, ",
        "\n",
    };
    var index: usize = 0;
    while (index < bytes.len) {
        const rest = bytes[index..];
        const length = switch (random.uintLessThan(u8, 4)) {
            0 => copy: {
                const word = words[random.uintLessThan(usize, words.len)];
                const length = @min(word.len, rest.len);
                @memcpy(rest[0..length], word[0..length]);
                break :copy length;
            },
            1 => run: {
                const length = @min(random.uintLessThan(usize, 64) + 1, rest.len);
                @memset(rest[0..length], random.int(u8));
                break :run length;
            },
            2 => noise: {
                const length = @min(random.uintLessThan(usize, 16) + 1, rest.len);
                random.bytes(rest[0..length]);
                break :noise length;
            },
            else => digits: {
                const length = @min(random.uintLessThan(usize, 8) + 1, rest.len);
                for (rest[0..length]) |*byte| byte.* = '0' + random.uintLessThan(u8, 10);
                break :digits length;
            },
        };
        index += length;
    }
}

test "empty input compresses to a single zero token" {
    var compressed: [16]u8 = undefined;
    try testing.expectEqual(@as(usize, 1), compress(&.{}, &compressed));
    try testing.expectEqual(@as(u8, 0), compressed[0]);
    try decompress(compressed[0..1], &.{});
    try expectRoundTrip(&.{});
}

test "round trip of one byte and of every length up to 300" {
    try expectRoundTrip("x");
    var prng = std.Random.DefaultPrng.init(1);
    var buffer: [300]u8 = undefined;
    for (0..buffer.len + 1) |length| {
        fillMixed(prng.random(), buffer[0..length]);
        try expectRoundTrip(buffer[0..length]);
        @memset(buffer[0..length], 'a');
        try expectRoundTrip(buffer[0..length]);
        prng.random().bytes(buffer[0..length]);
        try expectRoundTrip(buffer[0..length]);
    }
}

test "repetitive data compresses well" {
    var source: [10_000]u8 = undefined;
    for (&source, 0..) |*byte, index| byte.* = "abcdefghij"[index % 10];
    var compressed: [compressBound(source.len)]u8 = undefined;
    const compressed_length = compress(&source, &compressed);
    try testing.expect(compressed_length < 100);
    try expectRoundTrip(&source);
}

test "random data round trips within the bound" {
    var prng = std.Random.DefaultPrng.init(2);
    const source = try testing.allocator.alloc(u8, 200_000);
    defer testing.allocator.free(source);
    prng.random().bytes(source);
    try expectRoundTrip(source);
}

test "one MiB of mixed data round trips and shrinks" {
    var prng = std.Random.DefaultPrng.init(3);
    const source = try testing.allocator.alloc(u8, 1 << 20);
    defer testing.allocator.free(source);
    fillMixed(prng.random(), source);
    try expectRoundTrip(source);

    const compressed = try testing.allocator.alloc(u8, compressBound(source.len));
    defer testing.allocator.free(compressed);
    try testing.expect(compress(source, compressed) < source.len * 3 / 4);
}

test "long runs use overlapping matches with small offsets" {
    const source = try testing.allocator.alloc(u8, 100_000);
    defer testing.allocator.free(source);
    @memset(source, 0);
    try expectRoundTrip(source);
    for (2..9) |period| {
        for (source, 0..) |*byte, index| byte.* = @intCast(index % period);
        try expectRoundTrip(source);
    }
}

test "hand-made block with extended literal and match lengths decodes" {
    // 15 + 255 + 0 = 270 literals, then a match of offset 1 and length 4 + 15 + 255 + 2 = 276,
    // then 5 final literals.
    var block: [1 + 2 + 270 + 2 + 2 + 1 + 5]u8 = undefined;
    block[0] = 0xFF;
    block[1] = 255;
    block[2] = 0;
    @memset(block[3..][0..270], 'q');
    block[273] = 1;
    block[274] = 0;
    block[275] = 255;
    block[276] = 2;
    block[277] = 0x50;
    @memcpy(block[278..][0..5], "tail!");

    var output: [270 + 276 + 5]u8 = undefined;
    try decompress(&block, &output);
    for (output[0 .. 270 + 276]) |byte| try testing.expectEqual(@as(u8, 'q'), byte);
    try testing.expectEqualStrings("tail!", output[270 + 276 ..]);
}

test "literal and match lengths of 15 and 270 round trip" {
    var prng = std.Random.DefaultPrng.init(4);
    const lengths = [_]usize{ 14, 15, 16, 18, 19, 20, 269, 270, 271, 274, 275, 1000 };
    var buffer: [3 * 1000 + 64]u8 = undefined;
    for (lengths) |literal_length| {
        for (lengths) |match_length| {
            // noise, then a copy of the noise's head as the match, then noise again.
            const total = literal_length + match_length + 32;
            const source = buffer[0..total];
            prng.random().bytes(source);
            const head = @min(match_length, literal_length);
            var index: usize = 0;
            while (index < match_length) : (index += head) {
                const length = @min(head, match_length - index);
                @memcpy(source[literal_length + index ..][0..length], source[0..length]);
            }
            try expectRoundTrip(source);

            // The first token must carry the long lengths as nibble 15 plus extension bytes.
            var compressed: [compressBound(buffer.len)]u8 = undefined;
            _ = compress(source, &compressed);
            try testing.expectEqual(literal_length >= nibble_max, compressed[0] >> 4 == nibble_max);
            const match_nibble_full = match_length - match_length_min >= nibble_max;
            try testing.expectEqual(match_nibble_full, compressed[0] & nibble_max == nibble_max);
        }
    }
}

test "corrupt blocks are rejected" {
    var output: [64]u8 = undefined;
    const corrupt = [_]struct { block: []const u8, length: usize }{
        // No token at all.
        .{ .block = &.{}, .length = 0 },
        // Token promises 3 literals, only 2 present.
        .{ .block = &.{ 0x30, 'a', 'b' }, .length = 3 },
        // Literal length extension cut off.
        .{ .block = &.{ 0xF0, 255 }, .length = 64 },
        // Offset cut off after the literals.
        .{ .block = &.{ 0x10, 'a', 1 }, .length = 5 },
        // Offset 0.
        .{ .block = &.{ 0x10, 'a', 0, 0, 0x00 }, .length = 5 },
        // Offset 2 with only 1 byte of output so far.
        .{ .block = &.{ 0x10, 'a', 2, 0, 0x00 }, .length = 5 },
        // Literals overflow the output.
        .{ .block = &.{ 0x50, 'a', 'b', 'c', 'd', 'e' }, .length = 4 },
        // Match overflows the output.
        .{ .block = &.{ 0x14, 'a', 1, 0, 0x00 }, .length = 5 },
        // Match length extension cut off.
        .{ .block = &.{ 0x1F, 'a', 1, 0 }, .length = 64 },
        // A block may not end with a match: the last sequence holds only literals.
        .{ .block = &.{ 0x10, 'a', 1, 0 }, .length = 5 },
        // Output not filled.
        .{ .block = &.{ 0x20, 'a', 'b' }, .length = 3 },
        // Literals fill the output, then a match has no room left.
        .{ .block = &.{ 0x20, 'a', 'b', 1, 0, 0x00 }, .length = 2 },
    };
    for (corrupt) |case| {
        try testing.expectError(error.CorruptBlock, decompress(case.block, output[0..case.length]));
    }
}

test "trailing garbage after a valid block is rejected" {
    const source = "hello hello hello hello hello!";
    var compressed: [compressBound(source.len) + 1]u8 = undefined;
    const compressed_length = compress(source, &compressed);
    var output: [source.len]u8 = undefined;
    try decompress(compressed[0..compressed_length], &output);
    compressed[compressed_length] = 0;
    try testing.expectError(
        error.CorruptBlock,
        decompress(compressed[0 .. compressed_length + 1], &output),
    );
}

test "every truncation of a valid block is rejected" {
    var prng = std.Random.DefaultPrng.init(5);
    var source: [2000]u8 = undefined;
    fillMixed(prng.random(), &source);
    var compressed: [compressBound(source.len)]u8 = undefined;
    const compressed_length = compress(&source, &compressed);
    var output: [source.len]u8 = undefined;
    for (0..compressed_length) |length| {
        try testing.expectError(error.CorruptBlock, decompress(compressed[0..length], &output));
    }
}

test "decompressing random bytes never crashes" {
    var prng = std.Random.DefaultPrng.init(6);
    const random = prng.random();
    var block: [256]u8 = undefined;
    var output: [4096]u8 = undefined;
    for (0..20_000) |_| {
        const block_length = random.uintLessThan(usize, block.len + 1);
        random.bytes(block[0..block_length]);
        // Bias towards plausible blocks: small literal counts make matches reachable.
        if (block_length > 0 and random.boolean()) block[0] &= 0x3F;
        const output_length = random.uintLessThan(usize, output.len + 1);
        decompress(block[0..block_length], output[0..output_length]) catch |err| {
            try testing.expectEqual(error.CorruptBlock, err);
        };
    }
}

test "mutated valid blocks never crash" {
    var prng = std.Random.DefaultPrng.init(7);
    const random = prng.random();
    var source: [3000]u8 = undefined;
    fillMixed(random, &source);
    var compressed: [compressBound(source.len)]u8 = undefined;
    const compressed_length = compress(&source, &compressed);
    var mutated: [compressBound(source.len)]u8 = undefined;
    var output: [source.len + 100]u8 = undefined;
    for (0..5_000) |_| {
        @memcpy(mutated[0..compressed_length], compressed[0..compressed_length]);
        for (0..random.uintLessThan(usize, 4) + 1) |_| {
            mutated[random.uintLessThan(usize, compressed_length)] = random.int(u8);
        }
        const output_length = source.len - 50 + random.uintLessThan(usize, 150);
        decompress(mutated[0..compressed_length], output[0..output_length]) catch |err| {
            try testing.expectEqual(error.CorruptBlock, err);
        };
    }
}

test "a table reused across blocks gives the output of a fresh table" {
    const allocator = std.testing.allocator;
    var prng = std.Random.DefaultPrng.init(0x1f2e3d);
    const random = prng.random();
    var table: Table = .{};
    const source = try allocator.alloc(u8, 5000);
    defer allocator.free(source);
    const reused = try allocator.alloc(u8, compressBound(source.len));
    defer allocator.free(reused);
    const fresh = try allocator.alloc(u8, compressBound(source.len));
    defer allocator.free(fresh);
    for (0..300) |round| {
        // Blocks of every kind of length and content, some near the u32 end of the bases.
        if (round == 150) table.next_base = std.math.maxInt(u32) - 3000;
        const len = random.uintLessThan(usize, source.len + 1);
        for (source[0..len]) |*byte| byte.* =
            if (random.boolean()) random.int(u8) else 'a' + random.uintLessThan(u8, 3);
        const reused_len = compressWith(&table, source[0..len], reused);
        const fresh_len = compress(source[0..len], fresh);
        try std.testing.expectEqualSlices(u8, fresh[0..fresh_len], reused[0..reused_len]);
    }
}
