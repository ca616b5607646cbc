//! The exported functions of the process's bounded set of open shard files
//! (added within ABI 4; `read/open_shards.zig`). Same conventions as c_api.zig.
const open_shards = @import("read/open_shards.zig");
const c_status = @import("c_status.zig");
const status_ok = c_status.status_ok;
const status_invalid_argument = c_status.status_invalid_argument;
const failMessage = c_status.failMessage;
const nullArgument = c_status.nullArgument;

/// `drt_open_shards_stats` of the header.
pub const OpenShardsStats = extern struct {
    open: u64,
    max: u64,
    opens: u64,
    evictions: u64,
};

export fn drt_set_max_open_shards(max: u32) i32 {
    if (max == 0) {
        return failMessage(
            status_invalid_argument,
            "max_open_shards must be at least 1, got 0",
            .{},
        );
    }
    open_shards.process.setMax(max);
    return status_ok;
}

export fn drt_open_shards_stats_get(out: ?*OpenShardsStats) i32 {
    const out_ptr = out orelse return nullArgument("out pointer");
    const stats = open_shards.process.stats();
    out_ptr.* = .{
        .open = stats.open,
        .max = stats.max,
        .opens = stats.opens,
        .evictions = stats.evictions,
    };
    return status_ok;
}
