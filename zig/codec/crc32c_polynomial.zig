//! Arithmetic modulo the CRC-32C polynomial, in the reflected order of the CRC
//! itself (bit 31 holds the coefficient of x^0, bit 0 that of x^31): what the
//! kernels' folding constants and the joining of CRCs are computed with.
//! Imports nothing, so every kernel library (each its own compilation) can use it.

/// The Castagnoli polynomial, reflected (x^32 implied).
pub const polynomial: u32 = 0x82F63B78;
/// x^0, the multiplicative identity.
pub const one: u32 = 1 << 31;

/// a * b mod P: the sum of a x^k over the terms x^k of b.
pub fn multiply(a: u32, b: u32) u32 {
    var product: u32 = 0;
    var a_times_x_power = a;
    for (0..32) |k| {
        if ((b >> @intCast(31 - k)) & 1 != 0) product ^= a_times_x_power;
        // Times x: every term moves one bit down; the x^32 that leaves bit 0 is,
        // modulo P, the polynomial's lower terms.
        const overflow = a_times_x_power & 1 != 0;
        a_times_x_power = (a_times_x_power >> 1) ^ (if (overflow) polynomial else 0);
    }
    return product;
}

/// x^exponent mod P, by square and multiply (at compile time for the kernels'
/// constants).
pub fn powerOfX(exponent: u64) u32 {
    // Up to two 32-step products for each of the exponent's 64 bits.
    @setEvalBranchQuota(2 * 64 * 32 * 2 * 8);
    var result: u32 = one;
    var square: u32 = one >> 1; // x^1
    var rest = exponent;
    while (rest != 0) : (rest >>= 1) {
        if (rest & 1 != 0) result = multiply(result, square);
        square = multiply(square, square);
    }
    return result;
}
