//! Runs every seed of the `redact` fuzz target through the same invariant
//! check the fuzzer uses, so CI exercises the target without libFuzzer.

use std::path::Path;

#[test]
fn fuzz_seed_corpus_holds_the_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/redact");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        abcd_redact::fuzzing::check(&data);
        n += 1;
    }
    assert!(n >= 10, "seed corpus missing at {}", dir.display());
}

#[test]
fn arbitrary_byte_soup_holds_the_invariants() {
    // A cheap deterministic stand-in for the fuzzer: mutate the seeds.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/redact");
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for e in std::fs::read_dir(&dir).unwrap() {
        let base = std::fs::read(e.unwrap().path()).unwrap();
        for _ in 0..20 {
            let mut d = base.clone();
            for _ in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if d.is_empty() {
                    d.push(x as u8);
                    continue;
                }
                let i = (x as usize >> 8) % d.len();
                match x % 4 {
                    0 => d[i] = x as u8,
                    1 => d.insert(i, b"\\\"%:-/\n"[(x >> 20) as usize % 7]),
                    2 => {
                        d.remove(i);
                    }
                    _ => d.extend_from_within(i..d.len().min(i + 16)),
                }
            }
            abcd_redact::fuzzing::check(&d);
        }
    }
}
