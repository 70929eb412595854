//! `history search` on a store of N records (default 10,000) of BYTES
//! transcript bytes each: index build rate, index size, warm query latency
//! (median and p95 per kind of query: rare, common, phrase, prefix), and
//! `rg -l` (or `grep -rl`) over the same `records/` in the same run.
//!
//! Usage: cargo build --release -p abcd-capture-bench &&
//!        target/release/search-scale [N] [BYTES] [RUNS] [STORE]
//! The store is populated through the real journal and projection rebuild
//! (as capture-scale does); the index is built by the real lazy sync of
//! the first query. With STORE (a directory), the store is kept there and
//! reused by the next run (its search index is always rebuilt, so the
//! build is always measured).

use std::path::PathBuf;
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

/// (kind, abcd query, the `rg` pattern a user would type for it).
const QUERIES: [(&str, &str, &str); 12] = [
    ("rare", "zanzibar", "zanzibar"),
    ("rare", "zanzibar needle", "zanzibar needle"),
    ("common", "cargo", "cargo"),
    ("common", "tests passed", "tests passed"),
    ("common", "module_42", "module_42"),
    ("phrase", "\"cargo test\"", "cargo test"),
    ("phrase", "\"all 7 tests passed\"", "all 7 tests passed"),
    ("prefix", "nocaptu*", "nocaptu"),
    ("prefix", "modu*", "modu"),
    ("prefix", "zanzi*", "zanzi"),
    // One letter of words in every block (reading, run, running, rs),
    // and one of more words than are expanded (1, 10, 100, 1000, 1ms, …:
    // the first 64 searched, with a note) — a `th*` of this corpus.
    ("prefix", "r*", "r"),
    ("prefix", "1*", "1"),
];

fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |d: usize| args.next().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = next(10_000);
    let bytes = next(100 << 10);
    let runs = next(21);
    let keep: Option<PathBuf> = std::env::args().nth(4).map(PathBuf::from);
    let env = BenchEnv::new();
    let home = keep.clone().unwrap_or_else(|| env.abcd_home.clone());
    let sha = "3".repeat(40);
    let reuse = home.join("transcripts").join(&sha).join("records").is_dir();
    let corpus = Corpus::open(&home, &sha).unwrap();
    if reuse {
        println!("reusing the store in {}", home.display());
    } else {
        let t = Instant::now();
        let total = populate(&corpus, n, bytes);
        println!(
            "populated {n} records, {:.0} MB of transcript, in {:.1}s",
            total as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
    }
    let index = search::index_path(&corpus);
    let _ = std::fs::remove_file(&index);
    let t = Instant::now();
    let cpu = cpu_secs();
    let s = search::sync(&corpus).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu;
    let size = std::fs::metadata(&index).unwrap().len();
    println!(
        "index build: {} records, {:.0} MB in {secs:.1}s = {:.1} MB/s ({cpu:.1} CPU s = {:.1} MB/CPU s); index {:.0} MB ({:.0}% of the text)",
        s.indexed_records,
        s.indexed_bytes as f64 / 1e6,
        s.indexed_bytes as f64 / 1e6 / secs,
        s.indexed_bytes as f64 / 1e6 / cpu,
        size as f64 / 1e6,
        100.0 * size as f64 / s.indexed_bytes as f64
    );
    // The share of the build that is reading and splitting the records
    // (what the sync's second thread does), alone.
    let t = Instant::now();
    let cpu = cpu_secs();
    let mut docs = 0usize;
    let mut seen = std::collections::BTreeSet::new();
    for s in abcd::history::summaries(&corpus, None).unwrap() {
        if seen.insert(s.session_id().to_owned()) {
            for (_, body) in abcd::history::session_bodies(&corpus, s.session_id()).unwrap() {
                docs += search::documents(&body).len();
            }
        }
    }
    println!(
        "  of which reading and splitting into {docs} documents alone: {:.1}s ({:.1} CPU s)",
        t.elapsed().as_secs_f64(),
        cpu_secs() - cpu
    );
    let records = corpus.lane.records_dir();
    let rg = Command::new("rg").arg("--version").output().is_ok();
    let grep = |pattern: &str| -> f64 {
        let mut v = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let mut c = if rg {
                Command::new("rg")
            } else {
                Command::new("grep")
            };
            c.arg(if rg { "-lF" } else { "-rlF" })
                .arg(pattern)
                .arg(&records);
            let o = c.output().unwrap();
            assert!(o.status.success(), "{pattern} not found by rg");
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        median(&mut v)
    };
    let mut by_kind: Vec<(&str, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut all_medians = Vec::new();
    let mut rg_medians = Vec::new();
    println!(
        "{:<8} {:<24} {:>5} {:>9} {:>9} {:>9} {:>7}",
        "kind", "query", "hits", "median", "p95", "rg -l", "ratio"
    );
    for (kind, q, pattern) in QUERIES {
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
        let p95 = percentile(&mut v, 0.95);
        let g = grep(pattern);
        println!(
            "{kind:<8} {q:<24} {hits:>5} {m:>6.2} ms {p95:>6.2} ms {g:>6.0} ms {:>6.0}x",
            g / m
        );
        all_medians.push(m);
        rg_medians.push(g);
        match by_kind.iter_mut().find(|k| k.0 == kind) {
            Some(k) => {
                k.1.extend(&v);
                k.2.push(g);
            }
            None => by_kind.push((kind, v, vec![g])),
        }
    }
    for (kind, mut v, mut g) in by_kind {
        let m = median(&mut v);
        println!(
            "{kind:<8} median {m:.2} ms, p95 {:.2} ms; rg median {:.0} ms ({:.0}x)",
            percentile(&mut v, 0.95),
            median(&mut g),
            median(&mut g) / m
        );
    }
    // `--rank` (BM25 over every match) on a rare word and on a phrase in
    // ~1 % of the blocks, for the cost of what is not the default.
    for q in ["zanzibar", "\"all 7 tests passed\""] {
        let query = Query {
            text: q.to_owned(),
            limit: 20,
            rank: true,
            ..Query::default()
        };
        let mut v = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            search::search(&corpus, &query).unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!("--rank   {q:<24} median {:.2} ms (3 runs)", median(&mut v));
    }
    let med = median(&mut all_medians);
    let g = median(&mut rg_medians);
    println!(
        "median query {med:.2} ms; {} over records/ median {g:.0} ms (warm) — {:.0}x",
        if rg { "rg -lF" } else { "grep -rlF" },
        g / med
    );
}
