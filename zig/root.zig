//! The DatasetRT core. Every exported symbol lives in c_api.zig; this file only
//! pulls the modules into the build so their exports and unit tests are compiled.
comptime {
    _ = @import("c_api.zig");
}

test {
    _ = @import("diagnostic.zig");
    _ = @import("metadata_types.zig");
}
