//! `abcd hook subagent-stop` on a 1 MB transcript, as a whole process.
//!
//! Usage: cargo build --release && target/release/hook-latency [--burst] [RUNS] [ABCD_BIN...]
//!
//! Each run stages a new sub-agent (a distinct agent id), so every run does
//! the full work: payload parse, repo resolution (cached), one read of the
//! 1 MB transcript (hashed, written to a temporary blob, settle-checked),
//! sidecar read, store lock, rename, journal append + fdatasync, projection
//! writes. Each run's `--json` line must name the outcome it is timed for.
//!
//! Each run's transcript is written and the file system synced before its
//! clock starts: the harness wrote the transcript long before the hook
//! fired, and hooks fire seconds apart, after the kernel has written back
//! what earlier hooks left. `--burst` skips the sync: 200 hooks back to
//! back, each one's fdatasync queued behind the write-back of the others.
//!
//! With several binaries, runs alternate between them (A, B, A, B, …) into
//! the same store, so a noisy machine weighs on each build alike: the way to
//! compare two builds on a VM whose speed drifts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use abcd_capture_bench::*;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // --burst: no settling between runs (200 hooks back to back, each
    // writing 1 MiB: the disk's write-back of the earlier ones is then
    // part of every later one's fdatasync).
    let burst = args.iter().any(|a| a == "--burst");
    args.retain(|a| a != "--burst");
    let mut args = args.into_iter();
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    // Absolute: each hook runs with the test repository as its cwd.
    let mut bins: Vec<PathBuf> = args
        .map(|a| std::fs::canonicalize(&a).unwrap_or_else(|e| panic!("binary {a}: {e}")))
        .collect();
    if bins.is_empty() {
        bins.push(abcd_bin(None));
    }
    let env = BenchEnv::new();
    // Claude Code's own shapes: a UUID session id, `a` + hex agent ids (an
    // id outside the harness's shapes is also checked against every
    // redaction rule, which costs building the scanner, ~20 ms).
    let session = "b0000000-0000-4000-8000-000000000000";
    let dir = env
        .home
        .join(".claude/projects/-repo")
        .join(session)
        .join("subagents");
    std::fs::create_dir_all(&dir).unwrap();
    let body = transcript(session, 1 << 20, 1);
    // Each binary gets its own store: two builds sharing one would measure
    // each other's on-disk layout (a projection-format change makes the
    // older build rebuild on every run), not their own hook.
    for b in 0..bins.len() {
        std::fs::create_dir_all(env.abcd_home.join(format!("build{b}"))).unwrap();
    }
    let store_of = |bin: &Path| {
        let b = bins.iter().position(|x| x == bin).unwrap_or(0);
        env.abcd_home.join(format!("build{b}"))
    };
    let run = |bin: &Path, agent: &str, path: &Path, expect: &str| -> f64 {
        let payload = serde_json::json!({
            "session_id": session, "cwd": env.repo, "agent_id": agent, "agent_type": "Explore",
            "agent_transcript_path": path, "transcript_path": path, "hook_event_name": "SubagentStop",
        })
        .to_string();
        let t = Instant::now();
        let mut child = Command::new(bin)
            .args(["hook", "subagent-stop", "--json"])
            .current_dir(&env.repo)
            .env("HOME", &env.home)
            .env("ABCD_HOME", store_of(bin))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn abcd");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(out.status.success());
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json line");
        assert_eq!(result["outcome"], expect, "{result}");
        ms
    };
    // Warm the root-commit cache and the page cache once per binary.
    for (b, bin) in bins.iter().enumerate() {
        let warm = dir.join(format!("agent-warm{b}.jsonl"));
        std::fs::write(&warm, &body).unwrap();
        run(bin, &format!("warm{b}"), &warm, "staged");
    }
    // The harness wrote its transcript long before the hook fires, and
    // hooks fire seconds apart, by which time the kernel has written back
    // the blobs earlier hooks left dirty: before each run's clock starts,
    // its transcript is written and the file system synced (untimed), so
    // each run is one hook as it happens — not the tail of a 200 MB/s
    // write burst (`--burst` measures that too).
    let write_transcript = |p: &Path| {
        let mut f = std::fs::File::create(p).unwrap();
        f.write_all(body.as_bytes()).unwrap();
        f.sync_all().unwrap();
        if !burst {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open descriptor.
            unsafe { libc::syncfs(f.as_raw_fd()) };
        }
    };
    let mut times = vec![Vec::new(); bins.len()];
    for i in 0..runs {
        for (b, bin) in bins.iter().enumerate() {
            let agent = format!("a{i:05}b{b:x}");
            let p = dir.join(format!("agent-{agent}.jsonl"));
            write_transcript(&p);
            times[b].push(run(bin, &agent, &p, "staged"));
        }
    }
    for (b, bin) in bins.iter().enumerate() {
        let label = if bins.len() > 1 {
            format!("[{}] ", bin.display())
        } else {
            String::new()
        };
        let t = &mut times[b];
        let quarter = (runs / 4).max(1);
        let mut first: Vec<f64> = t[..quarter].to_vec();
        let mut last: Vec<f64> = t[runs - quarter..].to_vec();
        println!(
            "{label}first {quarter} runs median {:.2} ms, last {quarter} runs median {:.2} ms",
            median(&mut first),
            median(&mut last)
        );
        let med = median(t);
        let p90 = percentile(t, 0.9);
        println!(
            "{label}subagent-stop, 1 MiB transcript, {runs} runs{}: median {med:.2} ms, p90 {p90:.2} ms",
            if burst { " back to back (--burst)" } else { "" }
        );
        // Restaging the same key with identical bytes (the no-op path).
        let mut noop = Vec::new();
        let agent = format!("a00000b{b:x}");
        let p = dir.join(format!("agent-{agent}.jsonl"));
        for _ in 0..runs.min(50) {
            noop.push(run(bin, &agent, &p, "unchanged"));
        }
        println!(
            "{label}subagent-stop, identical re-stage (no-op): median {:.2} ms",
            median(&mut noop)
        );
        // A process that does nothing but start: the floor.
        let mut floor = Vec::new();
        for _ in 0..runs.min(50) {
            let t = Instant::now();
            Command::new(bin)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .unwrap();
            floor.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{label}floor (abcd --version): median {:.2} ms",
            median(&mut floor)
        );
    }
}
