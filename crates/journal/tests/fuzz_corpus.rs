//! Runs every seed of the `journal_frame` fuzz target through the same
//! function the fuzzer calls, so CI exercises it without cargo-fuzz.

use std::path::Path;

#[test]
fn journal_frame_seed_corpus_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal_frame");
    let mut n = 0;
    for ent in std::fs::read_dir(&dir).unwrap() {
        let p = ent.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        abcd_journal::fuzz_journal_bytes(&bytes);
        // Also every prefix of small seeds: each is a possible torn file.
        if bytes.len() <= 1024 {
            for cut in (0..bytes.len()).step_by(7) {
                abcd_journal::fuzz_journal_bytes(&bytes[..cut]);
            }
        }
        n += 1;
    }
    assert!(n >= 10, "expected the seed corpus in {}", dir.display());
}

mod flips {
    use abcd_journal::*;
    use proptest::prelude::*;

    fn golden() -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../journal-format/vectors/batch.journal");
        std::fs::read(p).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// Every byte of a journal is covered by a CRC: any single flipped
        /// byte is reported (bad header, torn or corrupt), never "clean".
        #[test]
        fn any_flipped_byte_is_detected(pos in 0usize..544, mask in 1u8..=255) {
            let mut b = golden();
            prop_assume!(pos < b.len());
            b[pos] ^= mask;
            let t = tempfile::tempdir().unwrap();
            std::fs::write(t.path().join("journal"), &b).unwrap();
            match verify(t.path(), &VerifyOptions { chain: true, progress: None }) {
                Ok(v) => {
                    prop_assert_ne!(v.status, VerifyStatus::Clean);
                    let d = v.damage.unwrap();
                    prop_assert!(d.offset <= pos as u64);
                }
                Err(JournalError::BadHeader { .. }) => prop_assert!(pos < 64),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
            abcd_journal::fuzz_journal_bytes(&b);
        }
    }
}
