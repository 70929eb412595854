//! Shared helpers for the capture benchmarks: a temporary home with a git
//! repository, transcript generation and simple statistics.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary HOME + ABCD_HOME + git repository.
pub struct BenchEnv {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub abcd_home: PathBuf,
    pub repo: PathBuf,
}

impl Default for BenchEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl BenchEnv {
    pub fn new() -> BenchEnv {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let abcd_home = tmp.path().join("abcd");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("HOME", &home)
                .env("GIT_AUTHOR_NAME", "Bench")
                .env("GIT_AUTHOR_EMAIL", "bench@example.com")
                .env("GIT_COMMITTER_NAME", "Bench")
                .env("GIT_COMMITTER_EMAIL", "bench@example.com")
                .status()
                .expect("git")
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(repo.join("README"), "bench\n").unwrap();
        git(&["add", "README"]);
        git(&["commit", "-q", "-m", "root"]);
        BenchEnv {
            tmp,
            home,
            abcd_home,
            repo,
        }
    }
}

/// A transcript-shaped JSONL body of about `bytes` bytes (user/assistant
/// turns with tool results), deterministic for a given `seed`.
pub fn transcript(session: &str, bytes: usize, seed: u64) -> String {
    let mut out = String::with_capacity(bytes + 1024);
    let mut i = 0u64;
    while out.len() < bytes {
        let text = format!(
            "step {i} of run {seed}: reading src/module_{m}.rs and running cargo test -p crate_{m} -- --nocapture; all {n} tests passed in {t}ms",
            m = (i * 7 + seed) % 97,
            n = (i * 13) % 211,
            t = (i * 31) % 997
        );
        let line = if i.is_multiple_of(2) {
            serde_json::json!({"type":"user","sessionId":session,"uuid":format!("00000000-0000-4000-8000-{:012x}", i),"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":format!("toolu_{i:016}"),"content":text.repeat(3)}]}})
        } else {
            serde_json::json!({"type":"assistant","sessionId":session,"uuid":format!("00000000-0000-4000-8000-{:012x}", i),"message":{"id":format!("msg_{i:020}"),"role":"assistant","model":"claude-opus-4","content":[{"type":"text","text":text}],"usage":{"input_tokens":i,"output_tokens":i*2}}})
        };
        out.push_str(&line.to_string());
        out.push('\n');
        i += 1;
    }
    out
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The release binary next to this tool (`target/release/abcd`) unless told.
pub fn abcd_bin(arg: Option<String>) -> PathBuf {
    arg.map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("current exe");
        exe.parent().unwrap_or(Path::new(".")).join("abcd")
    })
}

/// What [`populate`] did.
pub struct Populated {
    pub append_secs: f64,
    pub rebuild_secs: f64,
    pub applied: u64,
}

/// Builds a store of `n` records the way the real journal holds them:
/// `record(i)` gives each record's lineage and (already redacted) body, the
/// `Captured` events are appended in batches of `batch`, then every
/// projection is rebuilt from the journal.
pub fn populate(
    corpus: &abcd::corpus::Corpus,
    n: usize,
    batch: usize,
    mut record: impl FnMut(usize) -> (abcd::lineage::Lineage, String),
) -> Populated {
    use abcd::event::{self, CaptureOutcome, Captured, Event};
    use abcd_journal::EventId;
    let t = std::time::Instant::now();
    let mut pending: Vec<(EventId, Vec<u8>)> = Vec::new();
    for i in 0..n {
        let (lineage, body) = record(i);
        let meta = abcd::record::RecordMeta::native(
            &lineage,
            &corpus.lane.root_sha,
            1_700_000_000_000_000_000 + i as u64,
            &format!("{i:064x}"),
        );
        let file = abcd::record::render(&meta, body.as_bytes());
        let body = abcd::body::put_unsynced(&corpus.lane, &file).expect("body");
        let ev = Event::Captured(Box::new(Captured {
            outcome: CaptureOutcome::Stored {
                record_name: abcd::record::record_filename(
                    meta.captured_at_ns,
                    &lineage.session_id,
                    lineage.agent_id.as_deref(),
                ),
                body,
                supersedes: vec![],
            },
            retires: None,
            extended: false,
        }));
        pending.push((EventId::random(), event::encode(0, &ev).expect("encode")));
        if pending.len() == batch || i + 1 == n {
            abcd::body::sync(&corpus.lane).expect("sync bodies");
            let refs: Vec<(EventId, &[u8])> =
                pending.iter().map(|(id, p)| (*id, p.as_slice())).collect();
            corpus.journal.append_batch(&refs).expect("append");
            pending.clear();
        }
    }
    let append_secs = t.elapsed().as_secs_f64();
    let r = abcd::projection::rebuild(&corpus.lane, &corpus.journal).expect("rebuild");
    Populated {
        append_secs,
        rebuild_secs: t.elapsed().as_secs_f64() - append_secs,
        applied: r.applied,
    }
}

/// CPU seconds (user + system) this process has used so far, every thread
/// included: a rate over CPU time does not move with the machine's load
/// the way wall time does.
pub fn cpu_secs() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}
