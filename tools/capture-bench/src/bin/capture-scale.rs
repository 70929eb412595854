//! Capture of a 1 MB transcript into an empty store and into a store
//! holding N records (default 100,000): the cost must not grow with N.
//!
//! Usage: cargo build --release && target/release/capture-scale [N] [RUNS]
//! The big store is populated through the real journal (batched appends of
//! `Captured` events) and the real projection rebuild, then each measured
//! capture runs the real path: redaction (`capture::prepare`), the store
//! lock with catch-up, the idempotency/supersession decision, the durable
//! append and the projection writes (`capture::commit`).

use std::time::Instant;

use abcd::capture;
use abcd::corpus::Corpus;
use abcd::lineage::{Lineage, LineageSource, SpawnAttribution};
use abcd::record::KIND_NATIVE;
use abcd_capture_bench::*;

fn lineage(session: &str, agent: &str) -> Lineage {
    Lineage {
        session_id: session.to_owned(),
        agent_id: Some(agent.to_owned()),
        agent_type: Some("Explore".into()),
        lineage_source: Some(LineageSource::Hook),
        spawn_attribution: Some(SpawnAttribution::Unattributed),
        ..Lineage::default()
    }
}

fn populate(corpus: &Corpus, n: usize) {
    let p = abcd_capture_bench::populate(corpus, n, 2000, |i| {
        let session = format!("pop-{:08}", i / 8);
        let agent = format!("ag{i:08}");
        (
            lineage(&session, &agent),
            format!("{{\"type\":\"user\",\"n\":{i}}}\n"),
        )
    });
    println!(
        "populated {n} records: journal appends {:.1}s, projection rebuild of {} events {:.1}s",
        p.append_secs, p.applied, p.rebuild_secs
    );
}

/// Lets the file system settle after the bulk populate, as a real store
/// of N records (built over months) has: everything written back, then
/// out of the window in which ext4 without a journal skips a freed inode
/// when it allocates one (60 s once its inode-table block is clean; the
/// populate's freed inodes would otherwise be scanned past by every new
/// file of the measured captures). `ABCD_BENCH_NO_SETTLE=1` skips it.
fn settle() {
    if std::env::var_os("ABCD_BENCH_NO_SETTLE").is_some() {
        return;
    }
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::thread::sleep(std::time::Duration::from_secs(65));
    unsafe { libc::sync() };
}

/// One capture (redaction, then lock, decide, append, apply); returns
/// (total ms, ms under the lock).
fn capture_once(
    corpus: &Corpus,
    scanner: &abcd_redact::Scanner,
    i: usize,
    body: &[u8],
) -> (f64, f64) {
    let lin = lineage("measured-session", &format!("m{i:05}"));
    let mut raw = body.to_vec();
    raw.extend_from_slice(format!("{{\"run\":{i}}}\n").as_bytes());
    let t = Instant::now();
    let prepared =
        capture::prepare(scanner, &lin, &raw, &corpus.lane.root_sha, KIND_NATIVE).unwrap();
    let t2 = Instant::now();
    let locked = corpus.lock().unwrap();
    let r = capture::commit(&locked, prepared, None, false).unwrap();
    drop(locked);
    assert!(r.wrote);
    (
        t.elapsed().as_secs_f64() * 1e3,
        t2.elapsed().as_secs_f64() * 1e3,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(15);
    let body = transcript("measured-session", 1 << 20, 7);
    let scanner = abcd_redact::Scanner::new(abcd_redact::Identity::default(), None);

    let empty = BenchEnv::new();
    let c0 = Corpus::open(&empty.abcd_home, &"0".repeat(40)).unwrap();
    let big = BenchEnv::new();
    let c1 = Corpus::open(&big.abcd_home, &"1".repeat(40)).unwrap();
    populate(&c1, n);
    settle();
    // Interleaved, so a change in machine load hits both sides alike.
    let (mut e, mut el, mut b, mut bl) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let (t, l) = capture_once(&c0, &scanner, i, body.as_bytes());
        e.push(t);
        el.push(l);
        let (t, l) = capture_once(&c1, &scanner, i, body.as_bytes());
        b.push(t);
        bl.push(l);
    }
    let (e_total, e_locked, b_total, b_locked) = (
        median(&mut e),
        median(&mut el),
        median(&mut b),
        median(&mut bl),
    );
    println!("capture of a 1 MiB transcript, median of {runs}:");
    println!("  empty store:        {e_total:.2} ms total ({e_locked:.2} ms under the lock)");
    println!("  {n} records: {b_total:.2} ms total ({b_locked:.2} ms under the lock)");
    println!("  ratio: {:.2}x", b_total / e_total);
}
