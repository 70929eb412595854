//! `abcd history ingest` end to end, through the real binary.
//!
//! Generates a synthetic `~/.claude/projects` in a temporary HOME from the
//! public fixtures (`tests/fixtures/public`): every session and agent id
//! re-labelled, the cwd set to one of three git repositories, and the text
//! of every message varied with words drawn from a seeded generator (so no
//! two files are alike and redaction does real work). Two thirds of the
//! files are main threads, one third sub-agents under
//! `<session>/subagents/`. Then runs `abcd --json history ingest` into an
//! empty store (timed), and again (the idempotent run, timed), and prints
//! throughput with the split the report gives (CPU time in redaction vs
//! the rest) and the machine's load. The ingest redacts on one thread per
//! core by default: run the tool under `taskset -c 0` for one core.
//!
//! Usage: ingest-bench [--bin target/release/abcd] [--baseline OTHER_ABCD]
//! [--runs N] [--mb 200] [--files 2100] [--generate-only] (keeps the
//! corpus and prints where, for a profiler). `--runs N` times N first runs
//! (each into an empty store of its own) and prints their median;
//! `--baseline` alternates another binary with `--bin`, run for run, for a
//! ratio measured in the same minutes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

const MAINS: &[&str] = &[
    "cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit/cc1df109-4282-4321-8248-8bbcd471da78.jsonl",
    "cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit/b98095d7-b7ee-4d23-9d4c-beb9725d1dc5.jsonl",
    "git-ai/tests/fixtures/example-claude-code.jsonl",
    "git-ai/tests/fixtures/claude-code-with-thinking.jsonl",
    "claude-code-log/test/test_data/representative_messages.jsonl",
];
const AGENTS: &[&str] = &[
    "cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit/cc1df109-4282-4321-8248-8bbcd471da78/subagents/agent-a0a2928875cb36a92.jsonl",
    "rekal-cli/cmd/rekal/cli/session/testdata/real/8d1a1f9e-b38c-41fa-952a-5288179b5626/subagents/agent-a490235204f1c154d.jsonl",
];
const WORDS: &[&str] = &[
    "parser",
    "refactor",
    "the",
    "module",
    "returns",
    "error",
    "when",
    "config",
    "missing",
    "test",
    "passes",
    "now",
    "index",
    "journal",
    "append",
    "replay",
    "byte",
    "offset",
    "render",
    "table",
    "commit",
    "branch",
    "cache",
    "lookup",
    "fails",
    "retry",
    "budget",
    "löschen",
    "ファイル",
    "função",
    "schema",
    "migrate",
    "field",
    "value",
    "path",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn words(&mut self, n: usize) -> String {
        let mut s = String::new();
        for _ in 0..n {
            s.push(' ');
            s.push_str(WORDS[(self.next() % WORDS.len() as u64) as usize]);
        }
        s
    }
}

fn lines_of(rel: &str) -> Vec<Value> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/public")
        .join(rel);
    let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.is_object())
        .collect()
}

/// Varies every text string in a message with a few generated words.
fn vary(v: &mut Value, rng: &mut Rng) {
    match v {
        Value::String(s) if s.len() > 16 => s.push_str(&rng.words(4)),
        Value::Array(a) => a.iter_mut().for_each(|x| vary(x, rng)),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                let text = k == "text" || k == "content" || k == "thinking";
                if text || x.is_object() || x.is_array() {
                    vary(x, rng);
                }
            }
        }
        _ => {}
    }
}

fn write_file(
    path: &Path,
    template: &[Value],
    session: &str,
    agent: Option<&str>,
    cwd: &Path,
    target: usize,
    rng: &mut Rng,
) -> usize {
    let mut out = String::with_capacity(target + 4096);
    let mut i = 0usize;
    while out.len() < target {
        let mut v = template[i % template.len()].clone();
        i += 1;
        let o = v.as_object_mut().expect("object");
        o.insert("sessionId".into(), Value::String(session.into()));
        o.insert("cwd".into(), Value::String(cwd.display().to_string()));
        match agent {
            Some(a) => {
                o.insert("agentId".into(), Value::String(a.into()));
                o.insert("isSidechain".into(), Value::Bool(true));
            }
            None => {
                o.remove("agentId");
            }
        }
        o.insert("uuid".into(), Value::String(format!("{:016x}", rng.next())));
        if let Some(m) = o.get_mut("message") {
            vary(m, rng);
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, &out).expect("write");
    out.len()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

/// CPU seconds (user + system) used by finished children so far.
fn children_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn run(bin: &Path, home: &Path, abcd: &Path, cwd: &Path) -> (f64, f64, Value) {
    let cpu0 = children_cpu();
    let t = Instant::now();
    let out = Command::new(bin)
        .args(["--json", "history", "ingest"])
        .current_dir(cwd)
        .env("HOME", home)
        .env("ABCD_HOME", abcd)
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .expect("abcd runs");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "ingest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        secs,
        children_cpu() - cpu0,
        serde_json::from_slice(&out.stdout).expect("json"),
    )
}

fn main() {
    let mut bin = PathBuf::from("target/release/abcd");
    let mut mb = 200usize;
    let mut files = 2100usize;
    let mut generate_only = false;
    let mut runs = 1usize;
    let mut baseline: Option<PathBuf> = None;
    const USAGE: &str = "usage: ingest-bench [--bin PATH] [--baseline PATH] [--runs N] [--mb N] [--files N] [--generate-only]";
    let usage = |why: &str| -> ! {
        eprintln!("ingest-bench: {why}\n{USAGE}");
        std::process::exit(2)
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        let mut num = |name: &str| {
            let v = val(name);
            v.parse::<usize>()
                .unwrap_or_else(|_| usage(&format!("{name} takes a number, not {v:?}")))
        };
        match a.as_str() {
            "--bin" => bin = PathBuf::from(val("--bin")),
            "--mb" => mb = num("--mb"),
            "--files" => files = num("--files"),
            "--runs" => runs = num("--runs").max(1),
            "--baseline" => baseline = Some(PathBuf::from(val("--baseline"))),
            "--generate-only" => generate_only = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let bin = fs::canonicalize(&bin).expect("the abcd binary (build it: cargo build --release)");
    let baseline = baseline.map(|b| fs::canonicalize(&b).expect("the --baseline binary"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let abcd = tmp.path().join("abcd");
    let projects = home.join(".claude/projects");
    let mut repos = Vec::new();
    for r in ["alpha", "beta", "gamma"] {
        let d = tmp.path().join(r);
        fs::create_dir_all(&d).expect("mkdir");
        git(&d, &["init", "-q"]);
        fs::write(d.join("README"), r).expect("write");
        git(&d, &["add", "README"]);
        git(&d, &["commit", "-q", "-m", "root"]);
        repos.push(d);
    }
    let mains: Vec<Vec<Value>> = MAINS.iter().map(|m| lines_of(m)).collect();
    let agents: Vec<Vec<Value>> = AGENTS.iter().map(|m| lines_of(m)).collect();
    let per_file = mb * 1_000_000 / files;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t = Instant::now();
    let mut total = 0usize;
    let n_main = files - files / 3;
    let mut sessions = Vec::new();
    for i in 0..n_main {
        let repo = &repos[i % repos.len()];
        let session = format!("{:08x}-0000-4000-8000-{:012x}", 0xbe4c_0000u32, i);
        let path = projects
            .join(format!("-bench-{}", i % repos.len()))
            .join(format!("{session}.jsonl"));
        // Main threads vary in size around the mean (0.5x to 1.5x).
        let size = per_file / 2 + (rng.next() as usize % per_file.max(1));
        total += write_file(
            &path,
            &mains[i % mains.len()],
            &session,
            None,
            repo,
            size,
            &mut rng,
        );
        sessions.push((session, path, repo.clone()));
    }
    for j in 0..files / 3 {
        let (session, main_path, repo) = &sessions[j % sessions.len()];
        let agent = format!("a{:016x}", j);
        let path = main_path
            .with_extension("")
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"));
        let size = per_file / 2 + (rng.next() as usize % per_file.max(1));
        total += write_file(
            &path,
            &agents[j % agents.len()],
            session,
            Some(&agent),
            repo,
            size,
            &mut rng,
        );
    }
    eprintln!(
        "generated {files} files ({} sub-agents), {:.1} MB in {:.1}s",
        files / 3,
        total as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    if generate_only {
        let kept = tmp.keep();
        println!(
            "kept {}: HOME={} ABCD_HOME={} (cwd {})",
            kept.display(),
            home.display(),
            abcd.display(),
            repos[0].display()
        );
        return;
    }
    // Transcripts on disk are old; a file changed in the 2 s before it is
    // read is not trusted by the ingest cache on the next run. They are
    // also on disk: the generator's gigabyte of dirty pages is written
    // back now, not by the kernel during the timed run.
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // Every first run gets an empty store of its own, and no store is
    // deleted before the last run: on ext4 without a journal, inodes freed
    // in the last minutes make every file creation look at them
    // (`recently_deleted`), which cost a run right after a deleted store up
    // to a third of its time.
    let mut bins = Vec::new();
    if let Some(b) = &baseline {
        bins.push(("baseline", b.clone()));
    }
    bins.push(("abcd", bin.clone()));
    let mut firsts: Vec<Vec<(f64, f64, Value)>> = vec![Vec::new(); bins.len()];
    let mut last_store = PathBuf::new();
    for r in 0..runs {
        for (i, (_, b)) in bins.iter().enumerate() {
            let store = tmp.path().join(format!("abcd-{i}-{r}"));
            firsts[i].push(run(b, &home, &store, &repos[0]));
            last_store = store;
        }
    }
    let (s2, c2, r2) = run(&bin, &home, &last_store, &repos[0]);
    let n = |v: &Value, k: &str| v[k].as_array().map_or(0, Vec::len);
    let mb_read = firsts[0][0].2["bytes_read"].as_u64().unwrap_or(0) as f64 / 1e6;
    let load = Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("ingest-bench: {files} files, {mb_read:.1} MB, {runs} run(s) each, alternating");
    for (i, (name, b)) in bins.iter().enumerate() {
        println!("  {name} ({}):", b.display());
        for (s1, c1, r1) in &firsts[i] {
            let redact = r1["redact_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
            // Both halves in CPU seconds: redaction runs on threads of its
            // own (`--jobs`), beside the thread that reads and stores.
            println!(
                "    first run (empty store): {s1:.2}s wall ({:.1} MB/s), {c1:.2}s CPU ({:.1} MB/s per core); split (CPU): redaction {redact:.2}s ({:.0}%, {:.1} MB/s), everything else {:.2}s; stored {} failed {} skipped {}",
                mb_read / s1,
                mb_read / c1.max(1e-9),
                100.0 * redact / c1.max(1e-9),
                mb_read / redact.max(1e-9),
                (c1 - redact).max(0.0),
                n(r1, "stored"),
                n(r1, "failed"),
                n(r1, "skipped")
            );
        }
        let mut walls: Vec<f64> = firsts[i].iter().map(|f| f.0).collect();
        walls.sort_by(f64::total_cmp);
        let (lo, med, hi) = (walls[0], walls[walls.len() / 2], walls[walls.len() - 1]);
        println!(
            "    median {med:.2}s = {:.1} MB/s (range {:.1}-{:.1} MB/s)",
            mb_read / med,
            mb_read / hi,
            mb_read / lo
        );
    }
    println!(
        "  second run (idempotent, abcd):  {s2:.2}s wall ({:.1} MB/s), {c2:.2}s CPU  stored {} already stored {}",
        mb_read / s2,
        n(&r2, "stored"),
        n(&r2, "already_stored")
    );
    println!("  load: {load}");
}
