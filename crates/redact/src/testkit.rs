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

/// One to four `name sep value` assignments, each between two pieces of
/// `glue`, every piece picked at random: the texts the scanner-level
/// equivalence tests feed two scanners.
pub fn assignments(
    rng: &mut XorShift,
    names: &[&str],
    seps: &[&str],
    vals: &[&str],
    glue: &[&str],
) -> String {
    let mut text = String::new();
    for _ in 0..1 + rng.next() % 4 {
        for from in [glue, names, seps, vals, glue] {
            text.push_str(from[(rng.next() % from.len() as u64) as usize]);
        }
    }
    text
}

/// `text` bare, and as a transcript line holding it (JSON-escaped).
pub fn bare_and_in_transcript(text: &str) -> [String; 2] {
    [
        text.to_string(),
        serde_json::json!({ "cwd": "/home/zed", "t": text }).to_string(),
    ]
}

/// `a` and `b` find the same in `t` and redact it the same way (or both
/// refuse it); `a`'s findings. For tests comparing a fast path with the
/// search it replaces.
pub fn same_scan_and_redaction(
    a: &crate::Scanner,
    b: &crate::Scanner,
    t: &str,
) -> Vec<crate::Finding> {
    let found = a.scan(t);
    assert_eq!(found, b.scan(t), "{t:?}");
    let (ra, rb) = (a.redact(t), b.redact(t));
    assert_eq!(
        ra.as_ref().map(|r| &r.text).ok(),
        rb.as_ref().map(|r| &r.text).ok(),
        "{t:?}"
    );
    assert_eq!(ra.is_err(), rb.is_err(), "{t:?}");
    found
}
