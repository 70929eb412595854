//! The forgotten-value set: what `history forget` keeps of a value — its
//! length, SHA-256 and a rolling hash per spelling, never the value — and
//! how a capture finds and redacts it again from those digests alone.
//!
//! Owns: the digests of a value, the search by digest (a rolling-hash pass
//! per distinct length, each candidate proven by SHA-256) and the
//! replacement. No I/O: the set itself is a projection
//! (`index/forgotten.json`, `projection::read_forgotten`).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::event::ValueDigest;

/// What replaces a forgotten value (the redaction placeholder form).
pub const PLACEHOLDER: &str = "[REDACTED:forgotten]";

/// The spellings a value takes in a stored record: as typed, and inside a
/// JSON string (a transcript is JSONL). Deduplicated.
pub fn spellings(value: &str) -> Vec<String> {
    let mut out = vec![value.to_owned()];
    let json = serde_json::to_string(value).unwrap_or_default();
    let inner = json
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(value);
    if inner != value {
        out.push(inner.to_owned());
    }
    out
}

const BASE: u64 = 1_000_003;

/// A 64-bit polynomial rolling hash (mod 2^64) of `bytes`.
pub fn rolling(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |h, &b| {
        h.wrapping_mul(BASE).wrapping_add(u64::from(b) + 1)
    })
}

/// The digests kept of a value (one per spelling).
pub fn digests(value: &str) -> Vec<ValueDigest> {
    spellings(value)
        .into_iter()
        .map(|s| ValueDigest {
            len: s.len() as u32,
            sha256: hex::encode(Sha256::digest(s.as_bytes())),
            rolling: rolling(s.as_bytes()),
        })
        .collect()
}

/// Every non-overlapping occurrence of a forgotten value in `text`, found by
/// digest: a rolling-hash pass per distinct length, each candidate proven
/// by SHA-256. Returns sorted (start, end) byte ranges.
pub fn find(text: &[u8], set: &[ValueDigest]) -> Vec<(usize, usize)> {
    let mut by_len: BTreeMap<usize, Vec<&ValueDigest>> = BTreeMap::new();
    for d in set {
        if d.len > 0 {
            by_len.entry(d.len as usize).or_default().push(d);
        }
    }
    let mut hits = Vec::new();
    for (&len, ds) in &by_len {
        if text.len() < len {
            continue;
        }
        let top = (0..len - 1).fold(1u64, |p, _| p.wrapping_mul(BASE));
        let mut h = rolling(&text[..len]);
        let mut i = 0;
        loop {
            if ds.iter().any(|d| d.rolling == h) {
                let w = &text[i..i + len];
                let sha = hex::encode(Sha256::digest(w));
                if ds.iter().any(|d| d.rolling == h && d.sha256 == sha) {
                    hits.push((i, i + len));
                }
            }
            if i + len >= text.len() {
                break;
            }
            let out = u64::from(text[i]) + 1;
            let inc = u64::from(text[i + len]) + 1;
            h = h
                .wrapping_sub(out.wrapping_mul(top))
                .wrapping_mul(BASE)
                .wrapping_add(inc);
            i += 1;
        }
    }
    // Longest first at each start, then drop overlaps left to right.
    hits.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out: Vec<(usize, usize)> = Vec::new();
    for h in hits {
        if out.last().is_none_or(|l| h.0 >= l.1) {
            out.push(h);
        }
    }
    out
}

/// Replaces every occurrence of a forgotten value in `text` with
/// [`PLACEHOLDER`]; returns the count. Used by capture after redaction, so
/// a transcript captured again after a forget stays forgotten.
pub fn redact_forgotten(text: &str, set: &[ValueDigest]) -> (String, u64) {
    if set.is_empty() {
        return (text.to_owned(), 0);
    }
    let hits = find(text.as_bytes(), set);
    if hits.is_empty() {
        return (text.to_owned(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(s, e) in &hits {
        // Values are whole strings: their ranges fall on char boundaries.
        out.push_str(&text[at..s]);
        out.push_str(PLACEHOLDER);
        at = e;
    }
    out.push_str(&text[at..]);
    (out, hits.len() as u64)
}
