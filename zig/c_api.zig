const std = @import("std");
export fn drt_abi_version() u32 {
    return 1;
}
