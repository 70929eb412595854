//! `history list` on a store of N records (default 10,000): the listing
//! reads the record summaries (`index/summary/`), never a body, so it must
//! stay far below the 100 ms target however big the bodies are.
//!
//! Usage: cargo build --release -p abcd-capture-bench &&
//!        target/release/list-scale [N] [RECORDS_PER_SESSION] [BODY_BYTES] [RUNS]
//! The store is populated through the real journal (batched `Captured`
//! appends) and the real projection rebuild (which writes the summaries),
//! then `overview::sessions` — the whole of `history list` but the
//! printing — `history::list_summaries` (`--json`) and `overview::stats`
//! (`history stats` but the printing) are timed.

use std::time::Instant;

use abcd::corpus::Corpus;
use abcd::lineage::{Lineage, LineageSource, SpawnAttribution};
use abcd_capture_bench::*;

fn body(session: &str, i: usize, bytes: usize) -> String {
    let mut s = format!(
        "{{\"type\":\"user\",\"timestamp\":\"2026-06-{:02}T10:00:00Z\",\"sessionId\":\"{session}\",\"cwd\":\"/work/app\",\"message\":{{\"role\":\"user\",\"content\":\"prompt number {i}: fix the flaky test\"}}}}\n",
        1 + i % 28
    );
    let mut n = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "{{\"type\":\"assistant\",\"timestamp\":\"2026-06-{:02}T10:{:02}:00Z\",\"message\":{{\"id\":\"msg_{i}_{n}\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}],\"usage\":{{\"input_tokens\":100,\"output_tokens\":20}}}}}}\n",
            1 + i % 28,
            n % 60,
            "lorem ipsum dolor sit amet ".repeat(20)
        ));
        n += 1;
    }
    s
}

fn populate(corpus: &Corpus, n: usize, per_session: usize, bytes: usize) {
    let p = abcd_capture_bench::populate(corpus, n, 500, |i| {
        let session = format!("list-{:08}", i / per_session);
        let lin = if i % per_session == 0 {
            Lineage::main_thread(&session, LineageSource::Hook)
        } else {
            Lineage {
                session_id: session.clone(),
                agent_id: Some(format!("ag{i:08}")),
                agent_type: Some("Explore".into()),
                lineage_source: Some(LineageSource::Hook),
                spawn_attribution: Some(SpawnAttribution::Unattributed),
                ..Lineage::default()
            }
        };
        let b = body(&session, i, bytes);
        (lin, b)
    });
    println!(
        "populated {n} records ({per_session} per session, ~{bytes} body bytes each): journal appends {:.1}s, projection rebuild of {} events {:.1}s",
        p.append_secs, p.applied, p.rebuild_secs
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |d: usize| args.next().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = next(10_000);
    let per_session = next(8).max(1);
    let bytes = next(16 << 10);
    let runs = next(15);
    let env = BenchEnv::new();
    let corpus = Corpus::open(&env.abcd_home, &"2".repeat(40)).unwrap();
    populate(&corpus, n, per_session, bytes);
    let (mut text, mut json, mut stats) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = 0;
    let mut recs = 0;
    let mut stat_sessions = 0;
    let mut stat_tokens = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let st = abcd::overview::stats(&corpus, &abcd::overview::Filter::default()).unwrap();
        stats.push(t.elapsed().as_secs_f64() * 1e3);
        stat_sessions = st.sessions;
        stat_tokens = st.tokens.total;
        let t = Instant::now();
        rows = abcd::overview::sessions(&corpus, &abcd::overview::Filter::default())
            .unwrap()
            .len();
        text.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        recs = abcd::history::list_summaries(&corpus, None).unwrap().len();
        json.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "history list over {n} records ({rows} sessions), median of {runs} warm runs: {:.1} ms (p90 {:.1} ms)",
        median(&mut text.clone()),
        percentile(&mut text, 0.9)
    );
    println!(
        "history list --json ({recs} records): {:.1} ms (p90 {:.1} ms)",
        median(&mut json.clone()),
        percentile(&mut json, 0.9)
    );
    println!(
        "history stats ({stat_sessions} sessions, {stat_tokens} tokens): {:.1} ms (p90 {:.1} ms)",
        median(&mut stats.clone()),
        percentile(&mut stats, 0.9)
    );
}
