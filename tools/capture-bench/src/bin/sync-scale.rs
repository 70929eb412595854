//! `abcd sync` at scale, through the real code path (`abcd::sync::run`,
//! the real `git`, a bare repository on the local file system): machine A
//! holds N records (about 2 KiB of transcript each, built through the real
//! journal and projection rebuild); its first sync publishes them, machine
//! B's first sync imports them; then A captures 10 more records and both
//! sync again (the incremental case, which must cost O(new), not
//! O(corpus)); finally a re-sync with nothing new.
//!
//! Usage: cargo build --release -p abcd-capture-bench && target/release/sync-scale [N]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use abcd::corpus::Corpus;
use abcd::event::{CaptureOutcome, Captured, Event};
use abcd::lineage::{Lineage, LineageSource};
use abcd::sync::{Options, Report};
use abcd_capture_bench::*;

fn sync(c: &Corpus, repo: &Path, url: &str) -> (f64, Report) {
    let opts = Options {
        remote: Some(url.to_owned()),
        push: true,
        pull: true,
        dry_run: false,
    };
    let t = Instant::now();
    let r = abcd::sync::run(c, repo, &opts).expect("sync");
    (t.elapsed().as_secs_f64(), r)
}

fn add_records(c: &Corpus, from: usize, n: usize, filler: &str) {
    let locked = c.lock().expect("lock");
    for i in from..from + n {
        let lineage = Lineage::main_thread(&format!("sy-{i:08}"), LineageSource::Hook);
        let meta = abcd::record::RecordMeta::native(
            &lineage,
            &c.lane.root_sha,
            1_800_000_000_000_000_000 + i as u64,
            &format!("{i:064x}"),
        );
        let file = abcd::record::render(&meta, format!("{i}\n{filler}").as_bytes());
        let body = abcd::body::put(&c.lane, &file).expect("body");
        locked
            .append(&Event::Captured(Box::new(Captured {
                outcome: CaptureOutcome::Stored {
                    record_name: abcd::record::record_filename(
                        meta.captured_at_ns,
                        &lineage.session_id,
                        None,
                    ),
                    body,
                    supersedes: vec![],
                },
                retires: None,
                extended: false,
            })))
            .expect("append");
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let env = BenchEnv::new();
    // git reads the bench HOME's (empty) configuration, not the user's.
    std::env::set_var("HOME", &env.home);
    let root = String::from_utf8(
        Command::new("git")
            .args(["rev-list", "--max-parents=0", "HEAD"])
            .current_dir(&env.repo)
            .output()
            .expect("git")
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let remote = env.tmp.path().join("remote.git");
    assert!(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&remote)
        .status()
        .unwrap()
        .success());
    let url = format!("file://{}", remote.display());
    let a = Corpus::open(&env.abcd_home, &root).unwrap();
    let b = Corpus::open(&env.tmp.path().join("abcd-b"), &root).unwrap();
    let filler = transcript("sync-bench", 2 << 10, 7);
    let p = populate(&a, n, 2000, |i| {
        let lineage = Lineage::main_thread(&format!("sx-{i:08}"), LineageSource::Hook);
        (lineage, format!("{i}\n{filler}"))
    });
    println!(
        "populated {n} records: appends {:.1}s, rebuild {:.1}s",
        p.append_secs, p.rebuild_secs
    );
    let (t_pub, r) = sync(&a, &env.repo, &url);
    assert_eq!(r.published_events, n as u64);
    let (t_imp, r) = sync(&b, &env.repo, &url);
    assert_eq!(r.imported, n as u64);
    println!(
        "first sync of {n} records: publish+push {t_pub:.2}s, fetch+import {t_imp:.2}s ({:.0} records/s)",
        n as f64 / t_imp
    );
    // Five rounds of 10 new records on A, then A and B sync; medians.
    let (mut pubs, mut imps, mut nones) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..5 {
        add_records(&a, n + round * 10, 10, &filler);
        let (t, r) = sync(&a, &env.repo, &url);
        assert_eq!(r.published_events, 10);
        pubs.push(t);
        let (t, r) = sync(&b, &env.repo, &url);
        assert_eq!(r.imported, 10);
        imps.push(t);
        let (t, r) = sync(&b, &env.repo, &url);
        assert_eq!(r.imported, 0);
        nones.push(t);
    }
    println!(
        "incremental after 10 new records at {n} (median of 5): publish+push {:.3}s, fetch+import {:.3}s; nothing new {:.3}s",
        median(&mut pubs),
        median(&mut imps),
        median(&mut nones)
    );
    let same = |c: &Corpus| {
        let mut v: Vec<_> = std::fs::read_dir(c.lane.records_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(same(&a), same(&b));
}
