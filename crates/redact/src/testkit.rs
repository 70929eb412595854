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

    /// `n` of `parts`, each picked at random, one after another: the
    /// random texts the tests build from the fragments that decide a case.
    pub fn concat(&mut self, parts: &[&[u8]], n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                parts[(self.next() % parts.len() as u64) as usize]
                    .iter()
                    .copied()
            })
            .collect()
    }
}
