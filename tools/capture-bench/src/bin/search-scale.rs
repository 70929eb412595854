//! `history search` on a store of N records (default 10,000) of BYTES
//! transcript bytes each: index build rate, index size, warm query latency
//! (median over a query set), against `rg` (or `grep -r`) over `records/`.
//!
//! Usage: cargo build --release -p abcd-capture-bench &&
//!        target/release/search-scale [N] [BYTES] [RUNS]
//! The store is populated through the real journal and projection rebuild
//! (as capture-scale does); the index is built by the real lazy sync of
//! the first query.

use std::process::Command;
use std::time::Instant;

use abcd::corpus::Corpus;
use abcd::lineage::{Lineage, LineageSource};
use abcd::search::{self, Query};
use abcd_capture_bench::*;

fn populate(corpus: &Corpus, n: usize, bytes: usize) -> u64 {
    let mut total = 0u64;
    abcd_capture_bench::populate(corpus, n, 200, |i| {
        let session = format!("srch-{i:08}");
        let mut body = transcript(&session, bytes, i as u64);
        // One rare word per 1,000 records, for a selective query.
        if i % 1000 == 0 {
            body.push_str(&format!(
                "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"zanzibar needle {i}\"}}}}\n"
            ));
        }
        total += body.len() as u64;
        (Lineage::main_thread(&session, LineageSource::Hook), body)
    });
    total
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |d: usize| args.next().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = next(10_000);
    let bytes = next(100 << 10);
    let runs = next(9);
    let env = BenchEnv::new();
    let corpus = Corpus::open(&env.abcd_home, &"3".repeat(40)).unwrap();
    let t = Instant::now();
    let total = populate(&corpus, n, bytes);
    println!(
        "populated {n} records, {:.0} MB of transcript, in {:.1}s",
        total as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let s = search::sync(&corpus).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(search::index_path(&corpus))
        .unwrap()
        .len();
    println!(
        "index build: {} records, {:.0} MB in {secs:.1}s = {:.1} MB/s; index {:.0} MB ({:.0}% of the text)",
        s.indexed_records,
        s.indexed_bytes as f64 / 1e6,
        s.indexed_bytes as f64 / 1e6 / secs,
        size as f64 / 1e6,
        100.0 * size as f64 / s.indexed_bytes as f64
    );
    let queries = [
        "zanzibar",
        "\"cargo test\"",
        "nocaptu*",
        "module_42",
        "zanzibar needle",
    ];
    let mut lat = Vec::new();
    for q in queries {
        let query = Query {
            text: q.to_owned(),
            limit: 20,
            ..Query::default()
        };
        search::search(&corpus, &query).unwrap(); // warm
        let mut v = Vec::new();
        let mut hits = 0;
        for _ in 0..runs {
            let t = Instant::now();
            hits = search::search(&corpus, &query).unwrap().len();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let m = median(&mut v);
        println!("  query {q:<20} {hits:>3} hits  median {m:.2} ms");
        lat.push(m);
    }
    let med = median(&mut lat.clone());
    let records = corpus.lane.records_dir();
    let (tool, args): (&str, Vec<&str>) = if Command::new("rg").arg("--version").output().is_ok() {
        ("rg", vec!["-l", "zanzibar"])
    } else {
        ("grep", vec!["-rl", "zanzibar"])
    };
    let mut v = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let o = Command::new(tool)
            .args(&args)
            .arg(&records)
            .output()
            .unwrap();
        assert!(o.status.success());
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let g = median(&mut v);
    println!(
        "median query {med:.2} ms; {tool} over records/ for \"zanzibar\": {g:.0} ms (warm) — {:.0}x",
        g / med
    );
}
