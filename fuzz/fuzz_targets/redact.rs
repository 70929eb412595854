//! Fuzz target: arbitrary bytes through the redaction engine. Never panics;
//! the output always passes the verify stage, is a fixed point, and keeps
//! valid JSON lines valid (all asserted inside `abcd_redact::fuzzing::check`,
//! which the seed-corpus test in crates/redact runs too). Work per byte is
//! bounded by construction (linear-time regexes, capped PEM and base64
//! windows); run with `-timeout=10` to catch any regression.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Inputs beyond this add time, not coverage.
const MAX_INPUT: usize = 256 * 1024;

fuzz_target!(|data: &[u8]| {
    if data.len() <= MAX_INPUT {
        abcd_redact::fuzzing::check(data);
    }
});
