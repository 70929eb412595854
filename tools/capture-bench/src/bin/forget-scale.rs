//! `history forget` of one value held by every record of a store of N
//! records (default 10,000, about 4 KiB of transcript each): the dry run
//! (scan and report) and the real forget (new bodies, the event, the
//! projections rewritten, the old bodies deleted), through the real code
//! path (`abcd::forget::run`), on a store built through the real journal
//! and projection rebuild.
//!
//! Usage: cargo build --release -p abcd-capture-bench && target/release/forget-scale [N]

use std::time::Instant;

use abcd::corpus::Corpus;
use abcd::lineage::{Lineage, LineageSource};
use abcd_capture_bench::*;

const VALUE: &str = "an-unredacted-password-Xq93!";

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let env = BenchEnv::new();
    let corpus = Corpus::open(&env.abcd_home, &"2".repeat(40)).unwrap();
    let filler = transcript("forget-bench", 4 << 10, 11);
    let p = populate(&corpus, n, 2000, |i| {
        let session = format!("fg-{:08}", i / 4);
        let lineage = Lineage::main_thread(&session, LineageSource::Hook);
        let mut lineage = lineage;
        if i % 4 != 0 {
            lineage.agent_id = Some(format!("a{i:08x}"));
            lineage.spawn_attribution = Some(abcd::lineage::SpawnAttribution::Unattributed);
        }
        let body = format!(
            "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"login with {VALUE} please ({i})\"}}}}\n{filler}"
        );
        (lineage, body)
    });
    println!(
        "populated {n} records ({:.0} MiB of bodies): appends {:.1}s, rebuild {:.1}s",
        (n * filler.len()) as f64 / (1 << 20) as f64,
        p.append_secs,
        p.rebuild_secs
    );
    let progress = |done: u64, total: u64| {
        if done.is_multiple_of(1000) || done == total {
            eprint!("\rforget: {done}/{total} bodies scanned");
            if done == total {
                eprintln!();
            }
        }
    };
    let mut req = abcd::forget::Request {
        values: vec![VALUE.to_owned()],
        ..Default::default()
    };
    let t = Instant::now();
    let dry = abcd::forget::run(&corpus, None, &req, &progress).unwrap();
    let dry_secs = t.elapsed().as_secs_f64();
    assert_eq!(dry.records_rewritten.len(), n);
    req.yes = true;
    let t = Instant::now();
    let done = abcd::forget::run(&corpus, None, &req, &progress).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(done.records_rewritten.len(), n);
    assert_eq!(done.occurrences, vec![n as u64]);
    println!(
        "forget of one value in {n} records: dry run {dry_secs:.2}s, forget {secs:.2}s ({:.0} records/s)",
        n as f64 / secs
    );
}
