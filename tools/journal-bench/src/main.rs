//! journal-bench: measures abcd-journal on the real code path.
//!
//! Build and run (release):
//!   cargo build --release -p abcd-journal --bin journal-stress
//!   cargo run --release -p journal-bench -- [all|latency|concurrent|verify|replay]
//!
//! - latency: a fresh `journal-stress append-one` process per durable append,
//!   N times (default 200); median/p90/p99 wall time, next to `/bin/true`.
//! - concurrent: 8 `journal-stress append` processes at once, fdatasync
//!   inside vs outside the lock, aggregate events/s (3 interleaved rounds).
//! - verify: a 1 GiB journal under /tmp (deleted afterwards), verify in CRC
//!   mode and chain mode vs plain SHA-256 over the same bytes (warm cache).
//! - replay: read_from(start) over journals of 3 sizes, and read_from a
//!   recent Position on the largest.
//!
//! Scratch lives under $TMPDIR (default /tmp) and is removed at the end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abcd_journal::{verify, EventId, Journal, VerifyOptions};
use sha2::{Digest, Sha256};

fn stress_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let p = exe.parent().expect("exe dir").join("journal-stress");
    if !p.exists() {
        eprintln!(
            "missing {}: run `cargo build --release -p abcd-journal --bin journal-stress` first",
            p.display()
        );
        std::process::exit(2);
    }
    p
}

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("journal-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i]
}

fn time_spawns(n: usize, mut cmd: impl FnMut() -> Command) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            let st = cmd().stdout(Stdio::null()).status().expect("spawn");
            assert!(st.success(), "child failed");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn latency(n: usize) {
    let stress = stress_bin();
    let dir = scratch("latency");
    // Create the journal first so every measured process is a steady-state hook.
    Journal::open(&dir).expect("open");
    let mut floor = time_spawns(n, || Command::new("/bin/true"));
    let mut ms = time_spawns(n, || {
        let mut c = Command::new(&stress);
        c.arg("append-one").arg(&dir);
        c
    });
    let st = abcd_journal::stats(&dir).expect("stats");
    assert_eq!(st.events as usize, n);
    println!(
        "latency: fresh process, one durable 256 B append, n={n}: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms (/bin/true spawn: median {:.2} ms)",
        pct(&mut ms, 0.5),
        pct(&mut ms, 0.9),
        pct(&mut ms, 0.99),
        pct(&mut floor, 0.5)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn concurrent(writers: usize, per: u64) {
    let stress = stress_bin();
    for round in 0..3 {
        for mode in ["inside", "outside"] {
            let dir = scratch(&format!("conc-{mode}"));
            Journal::open(&dir).expect("open");
            let t = Instant::now();
            let kids: Vec<_> = (0..writers)
                .map(|w| {
                    Command::new(&stress)
                        .args([
                            "append",
                            dir.to_str().expect("utf8"),
                            &(w as u64 + 1).to_string(),
                            &per.to_string(),
                            "1",
                            mode,
                        ])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn")
                })
                .collect();
            for mut k in kids {
                assert!(k.wait().expect("wait").success());
            }
            let secs = t.elapsed().as_secs_f64();
            let total = writers as u64 * per;
            let st = abcd_journal::stats(&dir).expect("stats");
            assert_eq!(st.events, total);
            println!(
                "concurrent: round {round} {writers} writers x {per} appends, fdatasync {mode:7} the lock: {:.0} events/s ({secs:.2} s)",
                total as f64 / secs
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Fill a journal to about `bytes` with events of 200..1200-byte payloads in
/// batches (one write + one fdatasync per batch).
fn generate(dir: &Path, bytes: u64) -> u64 {
    let j = Journal::open(dir).expect("open");
    let mut n: u64 = 0;
    let mut size = 64u64;
    let payload: Vec<u8> = (0..1200u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    while size < bytes {
        let mut evs = Vec::with_capacity(4096);
        for _ in 0..4096 {
            let len = 200 + (n.wrapping_mul(7919) % 1000) as usize;
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&n.to_le_bytes());
            id[8] = 0xB3;
            evs.push((EventId(id), &payload[..len]));
            n += 1;
        }
        j.append_batch(&evs).expect("append");
        size = std::fs::metadata(dir.join("journal")).expect("stat").len();
    }
    size
}

fn verify_bench(mib: u64) {
    let dir = scratch("verify");
    let t = Instant::now();
    let size = generate(&dir, mib << 20);
    println!(
        "verify: generated {:.0} MiB in {:.1} s",
        size as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let path = dir.join("journal");
    let sha_file = || {
        use std::io::Read;
        let mut f = std::fs::File::open(&path).expect("open");
        let mut buf = vec![0u8; 4 << 20];
        let mut h = Sha256::new();
        loop {
            let k = f.read(&mut buf).expect("read");
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
        }
        h.finalize()
    };
    let run = |chain: bool| {
        let t = Instant::now();
        let r = verify(
            &dir,
            &VerifyOptions {
                chain,
                progress: None,
            },
        )
        .expect("verify");
        assert_eq!(r.exit_code(), 0);
        t.elapsed()
    };
    // Warm the page cache once, then take the best of 3 for each.
    let _ = run(false);
    let mut crc = Vec::new();
    let mut chain = Vec::new();
    let mut sha = Vec::new();
    for _ in 0..3 {
        crc.push(run(false));
        chain.push(run(true));
        let t = Instant::now();
        std::hint::black_box(sha_file());
        sha.push(t.elapsed());
    }
    let best = |v: &Vec<Duration>| v.iter().min().copied().expect("runs").as_secs_f64();
    let gbs = |s: f64| size as f64 / s / 1e9;
    let (c, ch, s) = (best(&crc), best(&chain), best(&sha));
    println!(
        "verify: {:.0} MiB warm, best of 3: CRC-only {c:.3} s = {:.2} GB/s; chain {ch:.3} s = {:.2} GB/s; plain SHA-256 of the file {s:.3} s = {:.2} GB/s; chain/SHA = {:.2}x",
        size as f64 / 1048576.0,
        gbs(c),
        gbs(ch),
        gbs(s),
        ch / s
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn replay_bench(sizes_mib: &[u64]) {
    for &mib in sizes_mib {
        let dir = scratch(&format!("replay-{mib}"));
        let size = generate(&dir, mib << 20);
        let j = Journal::open_existing(&dir).expect("open");
        let replay = || {
            let t = Instant::now();
            let mut n = 0u64;
            let mut last = None;
            for f in j.read_from(&j.start()).expect("read") {
                let f = f.expect("frame");
                n += 1;
                last = Some(f.end);
            }
            (t.elapsed().as_secs_f64(), n, last)
        };
        let _ = replay();
        let (secs, n, _) = (0..3)
            .map(|_| replay())
            .min_by(|a, b| a.0.partial_cmp(&b.0).expect("no NaN"))
            .expect("runs");
        println!(
            "replay: {:.0} MiB, {n} frames: {secs:.3} s = {:.2} GB/s, {:.0} ns/frame",
            size as f64 / 1048576.0,
            size as f64 / secs / 1e9,
            secs * 1e9 / n as f64
        );
        if mib == *sizes_mib.last().expect("sizes") {
            // Resume from the Position 100 frames before the end.
            let frames: Vec<_> = j
                .read_from(&j.start())
                .expect("read")
                .map(|f| f.expect("frame").end)
                .collect();
            let pos = frames[frames.len() - 101].clone();
            let t = Instant::now();
            let k = j.read_from(&pos).expect("read").count();
            println!(
                "replay: read_from a Position 100 frames before the head of the {:.0} MiB journal: {k} frames in {:.3} ms",
                size as f64 / 1048576.0,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let all = what == "all";
    if all || what == "latency" {
        latency(200);
    }
    if all || what == "concurrent" {
        concurrent(8, 500);
    }
    if all || what == "verify" {
        verify_bench(1024);
    }
    if all || what == "replay" {
        replay_bench(&[128, 256, 512]);
    }
}
