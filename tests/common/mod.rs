//! Shared harness for integration tests: a temporary HOME, ABCD_HOME and git
//! repository, and helpers that run the real `abcd` binary.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_abcd");

/// Whether the binary under test honours the `ABCD_TEST_*` knobs (a
/// smaller streaming threshold and part size, import slices, ingest race
/// points), which only a debug build reads: a release build (`cargo test
/// --release`) runs at the real sizes, so a test built on a knob says so
/// and stops instead of failing.
pub fn test_knobs(test: &str) -> bool {
    if cfg!(debug_assertions) {
        return true;
    }
    eprintln!("{test}: skipped in a release build (it needs the debug build's ABCD_TEST_* knobs; run it with `cargo test`)");
    false
}

/// Root of the checked-in public fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/public")
}

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub abcd_home: PathBuf,
    pub repo: PathBuf,
    pub claude: PathBuf,
}

/// `git args…` in `dir` with a clean environment (`home` as HOME, no
/// system or global configuration); its trimmed stdout.
pub fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Test Author")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let abcd_home = tmp.path().join("abcd-home");
        let repo = tmp.path().join("repo");
        let claude = home.join(".claude/projects/-repo");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&claude).unwrap();
        Env::init_repo(&repo, &home, "first");
        Env {
            tmp,
            home,
            abcd_home,
            repo,
            claude,
        }
    }

    /// Makes `dir` a git repository with one commit whose content differs by
    /// `seed` (so two repos have different root commits).
    pub fn init_repo(dir: &Path, home: &Path, seed: &str) {
        fs::create_dir_all(dir).unwrap();
        git(dir, home, &["init", "-q"]);
        fs::write(dir.join("README"), format!("repo {seed}\n")).unwrap();
        git(dir, home, &["add", "README"]);
        git(dir, home, &["commit", "-q", "-m", "root"]);
    }

    pub fn root_sha_of(&self, dir: &Path) -> String {
        git(dir, &self.home, &["rev-list", "--max-parents=0", "HEAD"])
    }

    pub fn root_sha(&self) -> String {
        self.root_sha_of(&self.repo)
    }

    /// The lane of the repository at `dir`.
    pub fn lane_of(&self, dir: &Path) -> PathBuf {
        self.abcd_home
            .join("transcripts")
            .join(self.root_sha_of(dir))
    }

    pub fn lane(&self) -> PathBuf {
        self.abcd_home.join("transcripts").join(self.root_sha())
    }

    pub fn command(&self, cwd: &Path) -> Command {
        let mut c = Command::new(BIN);
        c.current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ABCD_HOME", &self.abcd_home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("USER", "tester")
            .stdin(Stdio::null());
        c
    }

    /// Runs `abcd args…` in the repository.
    pub fn abcd(&self, args: &[&str]) -> Output {
        self.command(&self.repo)
            .args(args)
            .output()
            .expect("abcd runs")
    }

    /// Runs `abcd args…` with extra environment.
    pub fn abcd_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.command(&self.repo);
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("abcd runs")
    }

    /// Runs `abcd hook <verb> --json` with `payload` on stdin.
    pub fn hook(&self, verb: &str, payload: &Value) -> Output {
        self.hook_raw(verb, payload.to_string().as_bytes(), &[])
    }

    pub fn hook_env(&self, verb: &str, payload: &Value, env: &[(&str, &str)]) -> Output {
        self.hook_raw(verb, payload.to_string().as_bytes(), env)
    }

    pub fn hook_raw(&self, verb: &str, stdin: &[u8], env: &[(&str, &str)]) -> Output {
        let mut c = self.command(&self.repo);
        for (k, v) in env {
            c.env(k, v);
        }
        spawn_with_stdin(c.args(["--json", "hook", verb]), stdin)
            .wait_with_output()
            .expect("hook finishes")
    }

    /// Runs `abcd --json hook <verb>` in `cwd` with `payload` on stdin.
    pub fn hook_in(&self, cwd: &Path, verb: &str, payload: &Value) -> Output {
        spawn_with_stdin(
            self.command(cwd).args(["--json", "hook", verb]),
            payload.to_string().as_bytes(),
        )
        .wait_with_output()
        .expect("hook finishes")
    }

    /// Starts `abcd --json hook <verb>` with `payload` on stdin and returns
    /// the running child (for concurrency and kill tests).
    pub fn spawn_hook(&self, verb: &str, payload: &Value) -> std::process::Child {
        spawn_with_stdin(
            self.command(&self.repo).args(["--json", "hook", verb]),
            payload.to_string().as_bytes(),
        )
    }

    /// Writes a main-thread transcript for `session` and returns its path.
    pub fn main_transcript(&self, session: &str, body: &str) -> PathBuf {
        let p = self.claude.join(format!("{session}.jsonl"));
        fs::write(&p, body).unwrap();
        p
    }

    /// Writes a sub-agent transcript (and optional harness sidecar).
    pub fn agent_transcript(
        &self,
        session: &str,
        agent: &str,
        body: &str,
        meta: Option<&str>,
    ) -> PathBuf {
        let dir = self.claude.join(session).join("subagents");
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("agent-{agent}.jsonl"));
        fs::write(&p, body).unwrap();
        if let Some(m) = meta {
            fs::write(dir.join(format!("agent-{agent}.meta.json")), m).unwrap();
        }
        p
    }

    pub fn subagent_payload(&self, session: &str, agent: &str, path: &Path) -> Value {
        serde_json::json!({
            "session_id": session,
            "cwd": self.repo,
            "agent_id": agent,
            "agent_type": "Explore",
            "agent_transcript_path": path,
            "hook_event_name": "SubagentStop",
            "transcript_path": self.claude.join(format!("{session}.jsonl")),
        })
    }

    pub fn end_payload(&self, session: &str, path: &Path) -> Value {
        serde_json::json!({
            "session_id": session,
            "cwd": self.repo,
            "transcript_path": path,
            "hook_event_name": "SessionEnd",
        })
    }

    pub fn start_payload(&self, session: &str) -> Value {
        serde_json::json!({
            "session_id": session,
            "cwd": self.repo,
            "hook_event_name": "SessionStart",
            "source": "startup",
        })
    }

    /// `abcd --json <args>` parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = self.abcd(&full);
        assert!(
            out.status.success(),
            "abcd {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "abcd {args:?}: bad JSON {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    pub fn records(&self) -> Vec<Value> {
        self.json(&["history", "list"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn staged(&self) -> Value {
        self.json(&["history", "staged"])
    }

    pub fn drain(&self) -> Value {
        self.json(&["history", "drain"])
    }

    /// Every file (relative path → bytes) under the lane except the journal
    /// directory and lock files.
    pub fn snapshot(&self, dirs: &[&str]) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        let lane = self.lane();
        for d in dirs {
            walk(&lane.join(d), &lane, &mut out, false);
        }
        out
    }
}

fn spawn_with_stdin(c: &mut Command, stdin: &[u8]) -> std::process::Child {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn abcd");
    feed_stdin(&mut child, stdin);
    child
}

/// Writes `bytes` to the child's stdin and closes it. A child may exit
/// without reading its stdin (an unknown hook verb, a usage error, a hook
/// wrapper that finds no binary): the closed pipe is its answer, which the
/// caller checks through the exit status and stderr, not a test failure.
pub fn feed_stdin(child: &mut std::process::Child, bytes: &[u8]) {
    let mut pipe = child.stdin.take().expect("stdin was piped");
    match pipe.write_all(bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => panic!("writing the child's stdin: {e}"),
    }
}

fn walk(
    dir: &Path,
    base: &Path,
    out: &mut std::collections::BTreeMap<String, Vec<u8>>,
    skip_hidden: bool,
) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if skip_hidden && e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, base, out, skip_hidden);
        } else {
            out.insert(
                p.strip_prefix(base).unwrap().display().to_string(),
                fs::read(&p).unwrap(),
            );
        }
    }
}

/// What two stores that have exchanged every event must hold byte for
/// byte (`abcd sync`): `records/`, the index tables derived from them and
/// the forgotten set, by path under `lane`. Names starting with '.' (an
/// atomic write's temporary) are left out.
pub fn converged(lane: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for d in [
        "records",
        "index/idem",
        "index/stream",
        "index/session",
        "index/agent",
        "index/summary",
        "index/tokens",
    ] {
        walk(&lane.join(d), lane, &mut out, true);
    }
    if let Ok(b) = fs::read(lane.join("index/forgotten.json")) {
        out.insert("index/forgotten.json".into(), b);
    }
    out
}

/// A small, valid sub-agent transcript line set.
pub fn jsonl(lines: &[&str]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

pub fn line(session: &str, text: &str) -> String {
    serde_json::json!({"type": "user", "sessionId": session, "message": {"role": "user", "content": text}}).to_string()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn hook_json(o: &Output) -> Value {
    let s = stdout(o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "hook --json prints exactly one line, got {s:?}; stderr {}",
        stderr(o)
    );
    serde_json::from_str(lines[0]).expect("hook result is JSON")
}

/// The names of the checks `abcd --json doctor` failed.
pub fn doctor_failed(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .expect("doctor --json has checks")
        .iter()
        .filter(|c| c["level"] == "fail")
        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// One check of `abcd --json doctor`, by name.
pub fn doctor_check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .expect("doctor --json has checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {v:#}"))
}

/// `cp -a from to`: a copy keeping modes and times (store snapshots).
pub fn copy_tree(from: &Path, to: &Path) {
    let _ = fs::remove_dir_all(to);
    if !from.exists() {
        return;
    }
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

/// The file names under a lane's `records/`, sorted (none when absent).
pub fn record_names(lane: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(lane.join("records"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
