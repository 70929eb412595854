//! Helpers shared by the crate's randomised tests.

/// A xorshift64 stream: deterministic per seed, so a failing random case
/// replays exactly.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
