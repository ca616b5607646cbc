pub fn dummy() void {}
