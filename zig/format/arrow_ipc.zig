//! Arrow IPC *file* format ("ARROW1") for the sample metadata table: one row per
//! sample, non-nullable columns of bool, int64, float64 and utf8.
//!
//! File layout (Arrow columnar format, "IPC File Format"):
//!   "ARROW1" + 2 zero bytes
//!   schema message, record batch messages      (the IPC stream)
//!   0xFFFFFFFF 0x00000000                       (end of stream)
//!   Footer flatbuffer, int32 footer length, "ARROW1"
//! Each message is 0xFFFFFFFF, an int32 metadata length (padded so the body starts
//! 8-aligned), a Message flatbuffer, then the body holding the column buffers.
//!
//! This file holds what the writer and the reader share: the framing constants, the
//! union tags and vtable slots of the Arrow FlatBuffers tables, and the footer's
//! `Block`. The rest is split by job:
//!
//! - arrow_ipc_write.zig: the writer (`writeFile`);
//! - arrow_ipc_read.zig: the reader (`readFile`), which checks the untrusted file;
//! - arrow_ipc_test.zig: tests that write a file and read it back, intact or damaged.

pub const magic = "ARROW1";
/// The leading magic is padded to 8 bytes so the first message is 8-aligned.
pub const file_header = magic ++ "\x00\x00";
/// Footer length (int32) and magic after the footer.
pub const file_trailer_bytes = 4 + magic.len;
pub const continuation_marker: u32 = 0xFFFF_FFFF;

/// MetadataVersion (Schema.fbs): V4 is Arrow 0.8 to 0.17, V5 is Arrow 1.0 and later;
/// the two differ only in union layout, which this reader never sees.
pub const metadata_version_v4: i16 = 3;
pub const metadata_version_v5: i16 = 4;

/// MessageHeader union tags (Message.fbs).
pub const header_schema: u8 = 1;
pub const header_record_batch: u8 = 3;

/// Type union tags (Schema.fbs), indexes into `type_names`.
pub const type_int: u8 = 2;
pub const type_floating_point: u8 = 3;
pub const type_utf8: u8 = 5;
pub const type_bool: u8 = 6;
pub const type_large_utf8: u8 = 20;
pub const type_names = [_][]const u8{
    "NONE",     "Null",        "Int",           "FloatingPoint",   "Binary",        "Utf8",
    "Bool",     "Decimal",     "Date",          "Time",            "Timestamp",     "Interval",
    "List",     "Struct",      "Union",         "FixedSizeBinary", "FixedSizeList", "Map",
    "Duration", "LargeBinary", "LargeUtf8",     "LargeList",       "RunEndEncoded", "BinaryView",
    "Utf8View", "ListView",    "LargeListView",
};

/// Precision enum of FloatingPoint.
pub const precision_double: i16 = 2;

/// Vtable slots of the tables used, in declaration order of the .fbs files. A
/// union takes two slots: its type tag, then the uoffset of its value.
pub const message_slots = struct {
    pub const version: u16 = 0;
    pub const header_type: u16 = 1;
    pub const header: u16 = 2;
    pub const body_length: u16 = 3;
};
pub const schema_slots = struct {
    pub const endianness: u16 = 0;
    pub const fields: u16 = 1;
};
pub const field_slots = struct {
    pub const name: u16 = 0;
    pub const nullable: u16 = 1;
    pub const type_type: u16 = 2;
    pub const type_table: u16 = 3;
    pub const dictionary: u16 = 4;
    pub const children: u16 = 5;
};
pub const int_slots = struct {
    pub const bit_width: u16 = 0;
    pub const is_signed: u16 = 1;
};
pub const floating_point_slots = struct {
    pub const precision: u16 = 0;
};
pub const record_batch_slots = struct {
    pub const length: u16 = 0;
    pub const nodes: u16 = 1;
    pub const buffers: u16 = 2;
    pub const compression: u16 = 3;
};
pub const footer_slots = struct {
    pub const version: u16 = 0;
    pub const schema: u16 = 1;
    pub const dictionaries: u16 = 2;
    pub const record_batches: u16 = 3;
};

/// Struct sizes: FieldNode {int64 length, int64 null_count}, Buffer {int64 offset,
/// int64 length}, Block {int64 offset, int32 metaDataLength, 4 padding, int64 bodyLength}.
pub const field_node_bytes = 16;
pub const buffer_bytes = 16;
pub const block_bytes = 24;

/// One record batch's place in the file, as the footer lists it.
pub const Block = struct {
    offset: u64,
    /// Prefix, flatbuffer and padding: everything before the body.
    metadata_bytes: u32,
    body_bytes: u64,
};
