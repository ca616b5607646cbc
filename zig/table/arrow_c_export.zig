//! Columns handed to a consumer through the Arrow C stream interface: a stream
//! of one struct batch whose buffers the consumer (Polars, pyarrow, nanoarrow)
//! uses in place, instead of reading a serialized copy. The structs are the
//! Arrow C data interface's, not DatasetRT's.
//!
//! The stream, the batch's array, each of its children and each schema handed
//! out may be released separately, in any order and from any thread (the
//! interface lets a consumer move children out); the columns' owner is freed
//! when the last of them goes.
const std = @import("std");

pub const ArrowSchema = extern struct {
    format: [*:0]const u8,
    name: ?[*:0]const u8,
    metadata: ?[*]const u8,
    flags: i64,
    n_children: i64,
    children: ?[*]*ArrowSchema,
    dictionary: ?*ArrowSchema,
    release: ?*const fn (*ArrowSchema) callconv(.c) void,
    private_data: ?*anyopaque,
};

pub const ArrowArray = extern struct {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: ?[*]?*const anyopaque,
    children: ?[*]*ArrowArray,
    dictionary: ?*ArrowArray,
    release: ?*const fn (*ArrowArray) callconv(.c) void,
    private_data: ?*anyopaque,
};

pub const ArrowArrayStream = extern struct {
    get_schema: ?*const fn (*ArrowArrayStream, *ArrowSchema) callconv(.c) c_int,
    get_next: ?*const fn (*ArrowArrayStream, *ArrowArray) callconv(.c) c_int,
    get_last_error: ?*const fn (*ArrowArrayStream) callconv(.c) ?[*:0]const u8,
    release: ?*const fn (*ArrowArrayStream) callconv(.c) void,
    private_data: ?*anyopaque,
};

/// A column's rows, without nulls.
pub const Values = union(enum) {
    int64: []const i64,
    uint64: []const u64,
    float64: []const f64,
    /// One byte per row, 0 or 1; the export packs them into Arrow's bitmap.
    bool_bytes: []const u8,
    /// Row i is `bytes[offsets[i]..offsets[i+1]]`; every offset is below 2^63.
    large_utf8: struct { offsets: []const u64, bytes: []const u8 },

    fn rowCount(values: Values) usize {
        return switch (values) {
            .int64 => |v| v.len,
            .uint64 => |v| v.len,
            .float64 => |v| v.len,
            .bool_bytes => |v| v.len,
            .large_utf8 => |v| v.offsets.len - 1,
        };
    }

    /// The Arrow format string of the column's type.
    fn format(values: Values) [*:0]const u8 {
        return switch (values) {
            .int64 => "l",
            .uint64 => "L",
            .float64 => "g",
            .bool_bytes => "b",
            .large_utf8 => "U",
        };
    }
};

pub const Column = struct { name: []const u8, values: Values };

/// Whoever owns the columns' memory; `free` runs once, after the consumer has
/// released everything the stream handed out.
pub const Owner = struct { context: *anyopaque, free: *const fn (*anyopaque) void };

/// Errors reported by the stream's callbacks, as errno values (the interface's convention).
const errno_out_of_memory: c_int = 12;

/// Stands in for an empty buffer: some consumers refuse a null data pointer.
const empty_buffer: [1]u64 align(64) = .{0};

/// Everything the stream hands out, shared by reference count.
const Batch = struct {
    allocator: std.mem.Allocator,
    /// The stream, the struct array, each child array and each schema handed out.
    references: std.atomic.Value(usize),
    owner: Owner,
    names: [][:0]u8,
    formats: [][*:0]const u8,
    /// Packed bool columns (empty for the others).
    bitmaps: [][]u64,
    buffer_slots: [][3]?*const anyopaque,
    children: []ArrowArray,
    child_pointers: []*ArrowArray,
    parent_buffers: [1]?*const anyopaque = .{null},
    /// The struct array, until the first `get_next` moves it out.
    array: ArrowArray,
    array_taken: bool = false,
    last_error: ?[*:0]const u8 = null,

    fn acquire(batch: *Batch) void {
        _ = batch.references.fetchAdd(1, .monotonic);
    }

    fn release(batch: *Batch) void {
        if (batch.references.fetchSub(1, .acq_rel) != 1) return;
        batch.owner.free(batch.owner.context);
        batch.destroy(batch.names.len);
    }

    /// Frees the batch's own memory; `names_ready` names were copied.
    fn destroy(batch: *Batch, names_ready: usize) void {
        const allocator = batch.allocator;
        for (batch.names[0..names_ready]) |name| allocator.free(name);
        for (batch.bitmaps) |bitmap| allocator.free(bitmap);
        allocator.free(batch.names);
        allocator.free(batch.formats);
        allocator.free(batch.bitmaps);
        allocator.free(batch.buffer_slots);
        allocator.free(batch.children);
        allocator.free(batch.child_pointers);
        allocator.destroy(batch);
    }
};

/// Makes `out` a stream of one struct batch of `columns`, each with `row_count`
/// rows. Names are copied; the values stay where they are and are owned by
/// `owner` from now on. On error nothing is taken and `out` is untouched.
pub fn exportStream(
    allocator: std.mem.Allocator,
    columns: []const Column,
    row_count: u64,
    owner: Owner,
    out: *ArrowArrayStream,
) error{OutOfMemory}!void {
    for (columns) |column| std.debug.assert(column.values.rowCount() == row_count);
    const count = columns.len;
    const batch = try allocator.create(Batch);
    errdefer allocator.destroy(batch);
    const names = try allocator.alloc([:0]u8, count);
    errdefer allocator.free(names);
    const formats = try allocator.alloc([*:0]const u8, count);
    errdefer allocator.free(formats);
    const bitmaps = try allocator.alloc([]u64, count);
    errdefer allocator.free(bitmaps);
    for (bitmaps) |*bitmap| bitmap.* = &.{};
    const buffer_slots = try allocator.alloc([3]?*const anyopaque, count);
    errdefer allocator.free(buffer_slots);
    const children = try allocator.alloc(ArrowArray, count);
    errdefer allocator.free(children);
    const child_pointers = try allocator.alloc(*ArrowArray, count);
    errdefer allocator.free(child_pointers);
    batch.* = .{
        .allocator = allocator,
        .references = .init(2 + count),
        .owner = owner,
        .names = names,
        .formats = formats,
        .bitmaps = bitmaps,
        .buffer_slots = buffer_slots,
        .children = children,
        .child_pointers = child_pointers,
        .array = undefined,
    };
    var names_ready: usize = 0;
    errdefer for (names[0..names_ready]) |name| allocator.free(name);
    errdefer for (bitmaps) |bitmap| allocator.free(bitmap);
    for (columns, 0..) |column, i| {
        names[i] = try allocator.dupeSentinel(u8, column.name, 0);
        names_ready += 1;
        try exportChild(batch, i, column, row_count);
    }
    batch.array = .{
        .length = @intCast(row_count),
        .null_count = 0,
        .offset = 0,
        .n_buffers = 1,
        .n_children = @intCast(count),
        .buffers = &batch.parent_buffers,
        .children = child_pointers.ptr,
        .dictionary = null,
        .release = ArrayRelease.parent,
        .private_data = batch,
    };
    out.* = .{
        .get_schema = getSchema,
        .get_next = getNext,
        .get_last_error = getLastError,
        .release = releaseStream,
        .private_data = batch,
    };
}

/// Column `index`'s format, buffers and child array in `batch` (its name is already set).
fn exportChild(
    batch: *Batch,
    index: usize,
    column: Column,
    row_count: u64,
) error{OutOfMemory}!void {
    batch.formats[index] = column.values.format();
    var n_buffers: i64 = 2;
    const slots = &batch.buffer_slots[index];
    slots.* = .{ null, null, null };
    switch (column.values) {
        .int64 => |v| slots[1] = dataPointer(std.mem.sliceAsBytes(v)),
        .uint64 => |v| slots[1] = dataPointer(std.mem.sliceAsBytes(v)),
        .float64 => |v| slots[1] = dataPointer(std.mem.sliceAsBytes(v)),
        .bool_bytes => |v| {
            batch.bitmaps[index] = try packBits(batch.allocator, v);
            slots[1] = dataPointer(std.mem.sliceAsBytes(batch.bitmaps[index]));
        },
        .large_utf8 => |v| {
            n_buffers = 3;
            slots[1] = dataPointer(std.mem.sliceAsBytes(v.offsets));
            slots[2] = dataPointer(v.bytes);
        },
    }
    batch.children[index] = .{
        .length = @intCast(row_count),
        .null_count = 0,
        .offset = 0,
        .n_buffers = n_buffers,
        .n_children = 0,
        .buffers = slots,
        .children = null,
        .dictionary = null,
        .release = ArrayRelease.child,
        .private_data = batch,
    };
    batch.child_pointers[index] = &batch.children[index];
}

fn dataPointer(bytes: []const u8) *const anyopaque {
    return if (bytes.len == 0) &empty_buffer else bytes.ptr;
}

/// Arrow's validity-style bitmap of one-byte booleans: bit i (least significant first) is row i.
fn packBits(allocator: std.mem.Allocator, bytes: []const u8) error{OutOfMemory}![]u64 {
    const words = try allocator.alloc(u64, (bytes.len + 63) / 64);
    @memset(words, 0);
    for (bytes, 0..) |byte, row| {
        if (byte != 0) words[row / 64] |= @as(u64, 1) << @intCast(row % 64);
    }
    return words;
}

fn batchOf(private_data: ?*anyopaque) *Batch {
    return @ptrCast(@alignCast(private_data.?));
}

/// The release callbacks of a struct `Node` (ArrowArray or ArrowSchema) and of
/// its children, each holding a reference on the `Shared` in its private data
/// (the `Batch` or the `SchemaTree`, whose `child_pointers` are the children).
fn NodeRelease(comptime Node: type, comptime Shared: type) type {
    return struct {
        fn sharedOf(node: *Node) *Shared {
            return @ptrCast(@alignCast(node.private_data.?));
        }

        fn child(node: *Node) callconv(.c) void {
            const shared = sharedOf(node);
            node.release = null;
            shared.release();
        }

        /// Releases the children the consumer did not move out, then the struct's own reference.
        fn parent(node: *Node) callconv(.c) void {
            const shared = sharedOf(node);
            for (shared.child_pointers) |child_node| {
                if (child_node.release) |release| release(child_node);
            }
            node.release = null;
            shared.release();
        }
    };
}

const ArrayRelease = NodeRelease(ArrowArray, Batch);
const SchemaRelease = NodeRelease(ArrowSchema, SchemaTree);

fn releaseStream(stream: *ArrowArrayStream) callconv(.c) void {
    const batch = batchOf(stream.private_data);
    stream.release = null;
    if (!batch.array_taken) {
        batch.array_taken = true;
        ArrayRelease.parent(&batch.array);
    }
    batch.release();
}

/// The first call moves the batch out; later ones mark the end of the stream.
fn getNext(stream: *ArrowArrayStream, out: *ArrowArray) callconv(.c) c_int {
    const batch = batchOf(stream.private_data);
    if (batch.array_taken) {
        out.* = std.mem.zeroes(ArrowArray);
        return 0;
    }
    out.* = batch.array;
    batch.array_taken = true;
    return 0;
}

fn getLastError(stream: *ArrowArrayStream) callconv(.c) ?[*:0]const u8 {
    return batchOf(stream.private_data).last_error;
}

/// One `get_schema` answer: the struct's schema and its children's, whose
/// names point into the batch (it holds a reference on it).
const SchemaTree = struct {
    batch: *Batch,
    /// The struct schema and each child schema.
    references: std.atomic.Value(usize),
    children: []ArrowSchema,
    child_pointers: []*ArrowSchema,

    fn release(tree: *SchemaTree) void {
        if (tree.references.fetchSub(1, .acq_rel) != 1) return;
        const batch = tree.batch;
        const allocator = batch.allocator;
        allocator.free(tree.children);
        allocator.free(tree.child_pointers);
        allocator.destroy(tree);
        batch.release();
    }
};

fn getSchema(stream: *ArrowArrayStream, out: *ArrowSchema) callconv(.c) c_int {
    const batch = batchOf(stream.private_data);
    buildSchema(batch, out) catch {
        batch.last_error = "out of memory";
        return errno_out_of_memory;
    };
    return 0;
}

fn buildSchema(batch: *Batch, out: *ArrowSchema) error{OutOfMemory}!void {
    const allocator = batch.allocator;
    const count = batch.names.len;
    const tree = try allocator.create(SchemaTree);
    errdefer allocator.destroy(tree);
    const children = try allocator.alloc(ArrowSchema, count);
    errdefer allocator.free(children);
    const child_pointers = try allocator.alloc(*ArrowSchema, count);
    tree.* = .{
        .batch = batch,
        .references = .init(1 + count),
        .children = children,
        .child_pointers = child_pointers,
    };
    for (children, child_pointers, batch.names, batch.formats) |*child, *pointer, name, format| {
        child.* = .{
            .format = format,
            .name = name.ptr,
            .metadata = null,
            .flags = 0, // not nullable: no column has nulls
            .n_children = 0,
            .children = null,
            .dictionary = null,
            .release = SchemaRelease.child,
            .private_data = tree,
        };
        pointer.* = child;
    }
    batch.acquire();
    out.* = .{
        .format = "+s",
        .name = "",
        .metadata = null,
        .flags = 0,
        .n_children = @intCast(count),
        .children = child_pointers.ptr,
        .dictionary = null,
        .release = SchemaRelease.parent,
        .private_data = tree,
    };
}

// Tests: the export is read back through the interface as a consumer would.

const TestOwner = struct {
    freed: bool = false,

    fn free(context: *anyopaque) void {
        const owner: *TestOwner = @ptrCast(@alignCast(context));
        std.debug.assert(!owner.freed);
        owner.freed = true;
    }

    fn handle(owner: *TestOwner) Owner {
        return .{ .context = owner, .free = free };
    }
};

const test_ids = [_]u64{ 7, 8, 9 };
const test_scores = [_]f64{ 0.5, -1.0, 2.25 };
const test_flags = [_]u8{ 1, 0, 1 };
const test_offsets = [_]u64{ 0, 2, 2, 5 };
const test_columns = [_]Column{
    .{ .name = "id", .values = .{ .uint64 = &test_ids } },
    .{ .name = "score", .values = .{ .float64 = &test_scores } },
    .{ .name = "flag", .values = .{ .bool_bytes = &test_flags } },
    .{
        .name = "label",
        .values = .{ .large_utf8 = .{ .offsets = &test_offsets, .bytes = "abcde" } },
    },
};

test "the stream's schema and single batch describe the columns" {
    var owner: TestOwner = .{};
    var stream: ArrowArrayStream = undefined;
    try exportStream(std.testing.allocator, &test_columns, 3, owner.handle(), &stream);

    var schema: ArrowSchema = undefined;
    try std.testing.expectEqual(@as(c_int, 0), stream.get_schema.?(&stream, &schema));
    try std.testing.expectEqualStrings("+s", std.mem.span(schema.format));
    try std.testing.expectEqual(@as(i64, 4), schema.n_children);
    const expected_formats = [_][]const u8{ "L", "g", "b", "U" };
    for (schema.children.?[0..4], test_columns, expected_formats) |child, column, format| {
        try std.testing.expectEqualStrings(column.name, std.mem.span(child.name.?));
        try std.testing.expectEqualStrings(format, std.mem.span(child.format));
    }

    var array: ArrowArray = undefined;
    try std.testing.expectEqual(@as(c_int, 0), stream.get_next.?(&stream, &array));
    try std.testing.expectEqual(@as(i64, 3), array.length);
    const children = array.children.?[0..4];
    const ids: [*]const u64 = @ptrCast(@alignCast(children[0].buffers.?[1].?));
    try std.testing.expectEqualSlices(u64, &test_ids, ids[0..3]);
    const bits: [*]const u8 = @ptrCast(children[2].buffers.?[1].?);
    try std.testing.expectEqual(@as(u8, 0b101), bits[0]);
    try std.testing.expectEqual(@as(i64, 3), children[3].n_buffers);
    const bytes: [*]const u8 = @ptrCast(children[3].buffers.?[2].?);
    try std.testing.expectEqualStrings("abcde", bytes[0..5]);

    var end: ArrowArray = undefined;
    try std.testing.expectEqual(@as(c_int, 0), stream.get_next.?(&stream, &end));
    try std.testing.expect(end.release == null);

    // Released in an order a consumer may choose: the owner goes with the last.
    stream.release.?(&stream);
    schema.release.?(&schema);
    try std.testing.expect(!owner.freed);
    array.release.?(&array);
    try std.testing.expect(owner.freed);
}

test "a child moved out of the batch outlives its parent" {
    var owner: TestOwner = .{};
    var stream: ArrowArrayStream = undefined;
    try exportStream(std.testing.allocator, &test_columns, 3, owner.handle(), &stream);
    var array: ArrowArray = undefined;
    _ = stream.get_next.?(&stream, &array);
    stream.release.?(&stream);

    // Moving a child: copy it and mark the original released.
    var moved = array.children.?[1].*;
    array.children.?[1].release = null;
    array.release.?(&array);
    try std.testing.expect(!owner.freed);
    const scores: [*]const f64 = @ptrCast(@alignCast(moved.buffers.?[1].?));
    try std.testing.expectEqual(@as(f64, 2.25), scores[2]);
    moved.release.?(&moved);
    try std.testing.expect(owner.freed);
}

test "a stream released unread frees everything" {
    var owner: TestOwner = .{};
    var stream: ArrowArrayStream = undefined;
    try exportStream(std.testing.allocator, &test_columns, 3, owner.handle(), &stream);
    stream.release.?(&stream);
    try std.testing.expect(owner.freed);
}

test "an export that runs out of memory takes nothing" {
    var owner: TestOwner = .{};
    var stream: ArrowArrayStream = undefined;
    var fail_index: usize = 0;
    while (true) : (fail_index += 1) {
        var failing = std.testing.FailingAllocator.init(
            std.testing.allocator,
            .{ .fail_index = fail_index },
        );
        exportStream(failing.allocator(), &test_columns, 3, owner.handle(), &stream) catch {
            try std.testing.expect(!owner.freed);
            continue;
        };
        stream.release.?(&stream);
        try std.testing.expect(owner.freed);
        break;
    }
}
