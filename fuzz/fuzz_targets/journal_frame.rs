//! Fuzz the journal frame decoder and the whole read/verify/recover path:
//! the bytes are decoded as one frame, then used as a complete journal file
//! in a temp dir that is verified, stat'ed, read and appended to. Must never
//! panic. Seeds: fuzz/corpus/journal_frame/ (also run by
//! crates/journal/tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    abcd_journal::fuzz_journal_bytes(data);
});
