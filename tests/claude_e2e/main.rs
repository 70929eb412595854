//! The real thing, end to end: Claude Code itself, installed from the npm
//! registry (`@anthropic-ai/claude-code`, pinned), validates this
//! repository as a plugin, `abcd setup` wires the binary into it, and a real
//! Claude Code session — a main thread, a sub-agent and a depth-2
//! sub-agent, driven offline by `fake_api` on loopback — is captured with
//! its lineage, while a secret planted in the conversation ends up nowhere
//! under `ABCD_HOME`. Then `abcd doctor` names each broken link of the real
//! installation.
//!
//! Everything lives in a temporary HOME and ABCD_HOME. Claude Code is
//! installed once into `$CARGO_TARGET_TMPDIR/claude-code-<version>` (or
//! taken from `ABCD_E2E_CLAUDE`, a path to a `claude` binary). Without npm,
//! or when the registry cannot be reached, the test prints why and skips.

#[path = "../common/mod.rs"]
mod common;
mod fake_api;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{doctor_check, doctor_failed as failed, Env, BIN};
use fake_api::{FakeApi, Script};
use serde_json::Value;

/// The Claude Code version this test drives (`ABCD_E2E_CLAUDE_VERSION`
/// overrides it).
const CLAUDE_CODE_VERSION: &str = "2.1.332";
/// No single `claude` or `npm` command may take longer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `cmd` to completion or kills it at `COMMAND_TIMEOUT`; stdout and
/// stderr go through files, so a chatty child never blocks on a pipe.
fn run(mut cmd: Command, scratch: &Path) -> Output {
    let (out_path, err_path) = (scratch.join("cmd.out"), scratch.join("cmd.err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("scratch file"))
        .stderr(fs::File::create(&err_path).expect("scratch file"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {COMMAND_TIMEOUT:?}; stderr: {}",
                fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: fs::read(&out_path).unwrap_or_default(),
        stderr: fs::read(&err_path).unwrap_or_default(),
    }
}

/// The `claude` binary to drive, or why there is none (the test skips).
fn claude_code(scratch: &Path) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ABCD_E2E_CLAUDE") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("ABCD_E2E_CLAUDE={} is not a file", p.display()))
        };
    }
    let version =
        std::env::var("ABCD_E2E_CLAUDE_VERSION").unwrap_or_else(|_| CLAUDE_CODE_VERSION.into());
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("claude-code-{version}"));
    let bin = prefix.join("node_modules/.bin/claude");
    if bin.is_file() {
        return Ok(bin);
    }
    // Installed beside the cache, then renamed into place: a concurrent or
    // interrupted run never leaves a half-installed prefix behind.
    if let Err(e) = Command::new("npm").arg("--version").output() {
        return Err(format!("npm cannot run ({e}); install Node.js and npm"));
    }
    let partial = prefix.with_file_name(format!(
        "claude-code-{version}.partial-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let mut npm = Command::new("npm");
    npm.args([
        "install",
        "--loglevel=error",
        "--no-audit",
        "--no-fund",
        "--prefix",
    ])
    .arg(&partial)
    .arg(format!("@anthropic-ai/claude-code@{version}"));
    let out = run(npm, scratch);
    if !out.status.success() {
        let _ = fs::remove_dir_all(&partial);
        return Err(format!(
            "`npm install @anthropic-ai/claude-code@{version}` failed (is the npm registry reachable?): {}",
            text(&out.stderr).trim()
        ));
    }
    match fs::rename(&partial, &prefix) {
        Ok(()) => {}
        Err(_) if bin.is_file() => {
            let _ = fs::remove_dir_all(&partial);
        }
        Err(e) => {
            return Err(format!(
                "cannot move the install into {}: {e}",
                prefix.display()
            ))
        }
    }
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("npm installed no {}", bin.display()))
    }
}

/// A `ghp_` token of the right shape, different on every run.
fn fresh_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::from("ghp_");
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        let mut v = h.finish();
        for _ in 0..6 {
            out.push(ALNUM[(v % ALNUM.len() as u64) as usize] as char);
            v /= ALNUM.len() as u64;
        }
    }
    out.truncate(40);
    out
}

/// The test's world: a temporary HOME (Claude Code writes `~/.claude`
/// there), ABCD_HOME, a repository, and a PATH holding only `abcd` (linked,
/// as `~/.local/bin/abcd` often is), `claude` and the system directories.
struct World {
    env: Env,
    claude: PathBuf,
    bin: PathBuf,
    scratch: PathBuf,
}

impl World {
    fn path_with_abcd(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin.display())
    }

    /// `program args…` in the repository, in the test's environment only.
    fn command(&self, program: &Path, path: &str) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.env.repo)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.env.home)
            .env("ABCD_HOME", &self.env.abcd_home)
            .env("USER", "tester")
            .env("LANG", "C.UTF-8")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        c
    }

    fn claude(&self, args: &[&str]) -> Output {
        let mut c = self.command(&self.claude, &self.path_with_abcd());
        c.args(args);
        run(c, &self.scratch)
    }

    fn abcd_path(&self, args: &[&str], path: &str) -> Output {
        let mut c = self.command(Path::new(BIN), path);
        c.args(args);
        run(c, &self.scratch)
    }

    fn abcd(&self, args: &[&str]) -> Output {
        self.abcd_path(args, &self.path_with_abcd())
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.abcd(args);
        assert!(out.status.success(), "abcd {args:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("abcd {args:?}: {e}: {}", text(&out.stdout)))
    }

    fn doctor(&self, path: &str) -> (Option<i32>, Value) {
        let out = self.abcd_path(&["--json", "doctor"], path);
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", text(&out.stdout)));
        (out.status.code(), v)
    }

    /// One print-mode session against the scripted API; returns its output.
    fn session(&self, script: Script, secret: &str, prompt: &str) -> Output {
        let api = FakeApi::start(script, secret).expect("a loopback port");
        let mut c = self.command(&self.claude, &self.path_with_abcd());
        c.args(["-p", prompt, "--allowedTools", "Agent Task"])
            .env("ANTHROPIC_BASE_URL", &api.base_url)
            .env("ANTHROPIC_API_KEY", "sk-offline-test");
        let out = run(c, &self.scratch);
        assert!(
            out.status.success(),
            "claude -p ({script:?}) exited {:?}\nstdout: {}\nstderr: {}\nrequests: {:#?}",
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr),
            api.requests()
        );
        // A hook that failed, or said capture is off, shows on Claude
        // Code's stderr; abcd's hooks print nothing when all is well.
        let err = text(&out.stderr);
        assert!(
            !err.contains("hook") && !err.contains("abcd"),
            "claude -p ({script:?}) reported a hook problem:\n{err}"
        );
        out
    }
}

fn detail<'a>(v: &'a Value, name: &str) -> &'a str {
    doctor_check(v, name)["detail"].as_str().unwrap_or_default()
}

/// Every file under `dir` that holds `needle`, whatever the file.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("readable store").flatten() {
            let p = e.path();
            let t = e.file_type().expect("file type");
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let bytes = fs::read(&p).expect("readable store file");
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(p);
                }
            }
        }
    }
    hits
}

fn any_file_holding(dir: &Path, needle: &[u8]) -> bool {
    !files_holding(dir, needle).is_empty()
}

#[test]
fn claude_code_installs_the_plugin_and_a_real_nested_session_is_captured_redacted() {
    let started = Instant::now();
    let env = Env::new();
    let scratch = env.tmp.path().join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let claude = match claude_code(&scratch) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIPPED claude_e2e: {why}");
            return;
        }
    };
    let bin = env.tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("abcd")).unwrap();
    std::os::unix::fs::symlink(&claude, bin.join("claude")).unwrap();
    let w = World {
        env,
        claude,
        bin,
        scratch,
    };
    let repo_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root_s = repo_root.to_str().expect("a UTF-8 checkout path");
    let out = w.claude(&["--version"]);
    eprintln!("claude_e2e: Claude Code {}", text(&out.stdout).trim());

    // 1. The repository is a valid plugin (and marketplace), strictly, and
    //    by the plugin directory's checks too (icon, README install line).
    for args in [
        &["plugin", "validate", "--strict", root_s][..],
        &[
            "plugin",
            "validate",
            "--strict",
            "--profile",
            "directory",
            root_s,
        ][..],
    ] {
        let out = w.claude(args);
        assert!(
            out.status.success() && text(&out.stdout).contains("Validation passed"),
            "claude {args:?}:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    // 2. `abcd setup` wires it through the real CLI; Claude Code lists it.
    let out = w.abcd(&["setup"]);
    assert!(
        out.status.success(),
        "abcd setup:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = w.claude(&["plugin", "list"]);
    let listed = text(&out.stdout);
    let ours = listed
        .split("❯ ")
        .find(|s| s.starts_with("abcd@abcd"))
        .unwrap_or_else(|| panic!("claude plugin list has no abcd@abcd:\n{listed}"));
    assert!(ours.contains("enabled"), "{listed}");
    assert!(ours.contains(env!("CARGO_PKG_VERSION")), "{listed}");
    let list: Value = serde_json::from_slice(&w.claude(&["plugin", "list", "--json"]).stdout)
        .expect("plugin list --json");
    let record = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["id"] == "abcd@abcd")
        .expect("abcd@abcd in plugin list --json")
        .clone();
    assert_eq!(record["enabled"], true, "{record:#}");
    // The folder Claude Code runs the hooks from.
    let plugin_root = PathBuf::from(
        record["readFromFolder"]
            .as_str()
            .or(record["installPath"].as_str())
            .expect("a plugin folder"),
    );
    // What setup wrote validates strictly too: the marketplace and the
    // plugin Claude Code runs.
    let written = plugin_root.to_str().expect("a UTF-8 plugin path");
    let marketplace = w.env.home.join(".local/share/abcd/claude-marketplace");
    let marketplace = marketplace.to_str().expect("a UTF-8 home");
    for dir in [marketplace, written] {
        let out = w.claude(&["plugin", "validate", "--strict", dir]);
        assert!(
            out.status.success(),
            "claude plugin validate --strict {dir}:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let (code, v) = w.doctor(&w.path_with_abcd());
    assert_eq!(code, Some(0), "doctor after setup: {v:#}");
    assert!(
        detail(&v, "plugin").contains(&*plugin_root.to_string_lossy()),
        "doctor reads the folder Claude Code runs ({}): {v:#}",
        plugin_root.display()
    );

    // An older abcd's install record (what an upgrade leaves): doctor warns,
    // and `abcd setup` again brings the record to this version.
    let records = w.env.home.join(".claude/plugins/installed_plugins.json");
    let mut r: Value = serde_json::from_slice(&fs::read(&records).unwrap()).unwrap();
    let entry = &mut r["plugins"]["abcd@abcd"][0];
    let older = entry["installPath"]
        .as_str()
        .expect("installPath")
        .replace(env!("CARGO_PKG_VERSION"), "0.0.1");
    entry["version"] = "0.0.1".into();
    entry["installPath"] = older.into();
    fs::write(&records, r.to_string()).unwrap();
    let (code, v) = w.doctor(&w.path_with_abcd());
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(doctor_check(&v, "plugin")["level"], "warn", "{v:#}");
    assert!(detail(&v, "plugin").contains("0.0.1"), "{v:#}");
    assert!(w.abcd(&["setup"]).status.success());
    let (_, v) = w.doctor(&w.path_with_abcd());
    assert_eq!(doctor_check(&v, "plugin")["level"], "ok", "{v:#}");

    // 3. A real session: main thread → L1 → L2, which "finds" the token.
    let token = fresh_token();
    let s1 = Instant::now();
    w.session(Script::Nested, &token, "please look around");
    let s1 = s1.elapsed();
    let projects = w.env.home.join(".claude/projects");
    assert!(
        any_file_holding(&projects, token.as_bytes()),
        "the token is in Claude Code's own transcripts (the plant worked)"
    );
    let sessions: Vec<String> = fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .flat_map(|d| fs::read_dir(d.path()).into_iter().flatten().flatten())
        .filter_map(|f| {
            let name = f.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect();
    assert_eq!(sessions.len(), 1, "one main transcript: {sessions:?}");
    let session = &sessions[0];

    // Until a drain, the token may be only in staged raw blobs (0600, by
    // design): never in the journal, a record or an index.
    for f in files_holding(&w.env.abcd_home, token.as_bytes()) {
        let staged_blob = f.extension().is_some_and(|e| e == "raw")
            && f.parent().is_some_and(|d| d.ends_with("staging"));
        assert!(
            staged_blob,
            "before a drain the token is in {}",
            f.display()
        );
    }

    // 4. The next session starts by draining what the first one staged.
    w.session(Script::Plain, &token, "anything new?");
    let records = w.json(&["--json", "history", "list", "--session", session]);
    let records = records.as_array().expect("records");
    assert_eq!(records.len(), 3, "main + two sub-agents: {records:#?}");
    let main = records
        .iter()
        .find(|r| r["agent_id"].is_null())
        .expect("the main thread");
    assert_eq!(main["title"], "please look around");
    let l1 = records
        .iter()
        .find(|r| r["spawn_depth"] == 1)
        .expect("a depth-1 sub-agent");
    let l2 = records
        .iter()
        .find(|r| r["spawn_depth"] == 2)
        .expect("a depth-2 sub-agent");
    assert_eq!(l1["title"], "SUBAGENT-L1 list files");
    assert_eq!(l2["title"], "SUBAGENT-L2 read the env");
    assert!(
        l1["parent_agent_id"].is_null(),
        "L1 hangs off the main thread"
    );
    assert_eq!(l2["parent_agent_id"], l1["agent_id"], "L2's parent is L1");
    for r in [l1, l2] {
        assert_eq!(r["spawn_attribution"], "sidecar", "{r:#}");
        assert!(r["spawn_tool_use_id"].is_string(), "{r:#}");
        let sidecar = fs::read_dir(&projects)
            .unwrap()
            .flatten()
            .map(|d| {
                d.path().join(session).join(format!(
                    "subagents/agent-{}.meta.json",
                    r["agent_id"].as_str().unwrap_or_default()
                ))
            })
            .find(|p| p.is_file());
        assert!(sidecar.is_some(), "Claude Code wrote a sidecar for {r:#}");
    }
    assert!(l2["redacted_secrets"].as_u64() >= Some(1), "{l2:#}");
    let staged = w.json(&["--json", "history", "staged"]);
    assert!(
        !staged.to_string().contains(session.as_str()),
        "nothing of the first session is left staged: {staged:#}"
    );
    let leaks = files_holding(&w.env.abcd_home, token.as_bytes());
    assert!(leaks.is_empty(), "the planted token is in {leaks:#?}");

    // 5. Doctor passes, then names each broken link of the real install.
    let (code, v) = w.doctor(&w.path_with_abcd());
    assert_eq!(code, Some(0), "doctor after capture: {v:#}");

    // The binary removed from PATH.
    let (code, v) = w.doctor("/usr/bin:/bin");
    assert_eq!(code, Some(1));
    assert!(failed(&v).contains(&"binary".into()), "{v:#}");

    // The hooks file Claude Code reads, edited away.
    let hooks = plugin_root.join("hooks/hooks.json");
    let saved = fs::read(&hooks).expect("the installed hooks file");
    let mut h: Value = serde_json::from_slice(&saved).unwrap();
    h["hooks"]
        .as_object_mut()
        .expect("hooks")
        .remove("SubagentStop");
    fs::write(&hooks, h.to_string()).unwrap();
    let (code, v) = w.doctor(&w.path_with_abcd());
    fs::write(&hooks, &saved).unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(failed(&v), ["hooks"], "{v:#}");
    assert!(detail(&v, "hooks").contains("SubagentStop"), "{v:#}");

    // The marketplace folder setup wrote, deleted: Claude Code no longer
    // loads the plugin (its cache copy notwithstanding).
    let mkt = w.env.home.join(".local/share/abcd/claude-marketplace");
    let aside = w.env.tmp.path().join("marketplace-aside");
    fs::rename(&mkt, &aside).unwrap();
    let (code, v) = w.doctor(&w.path_with_abcd());
    let list = text(&w.claude(&["plugin", "list", "--json"]).stdout);
    fs::rename(&aside, &mkt).unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(failed(&v), ["plugin"], "{v:#}");
    assert!(detail(&v, "plugin").contains("failed to load"), "{v:#}");
    assert!(
        list.contains("failed to load"),
        "Claude Code agrees: {list}"
    );

    // The plugin disabled in Claude Code.
    assert!(w
        .claude(&["plugin", "disable", "abcd@abcd"])
        .status
        .success());
    let (code, v) = w.doctor(&w.path_with_abcd());
    assert!(w
        .claude(&["plugin", "enable", "abcd@abcd"])
        .status
        .success());
    assert_eq!(code, Some(1));
    assert_eq!(failed(&v), ["plugin"], "{v:#}");
    assert!(detail(&v, "plugin").contains("disabled"), "{v:#}");

    // ABCD_HOME read-only.
    let home = &w.env.abcd_home;
    fs::set_permissions(home, fs::Permissions::from_mode(0o500)).unwrap();
    let (code, v) = w.doctor(&w.path_with_abcd());
    fs::set_permissions(home, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(failed(&v), ["home"], "{v:#}");

    // The redaction config broken.
    let cfg = w.env.repo.join(".abcd");
    fs::create_dir_all(&cfg).unwrap();
    fs::write(cfg.join("redact.json"), "{ not json").unwrap();
    let (code, v) = w.doctor(&w.path_with_abcd());
    fs::remove_dir_all(&cfg).unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(failed(&v), ["redaction"], "{v:#}");

    let (code, v) = w.doctor(&w.path_with_abcd());
    assert_eq!(code, Some(0), "all repaired: {v:#}");

    // 6. Uninstall through the real CLI; the store stays.
    let out = w.abcd(&["setup", "--uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&w.claude(&["plugin", "list"]).stdout);
    assert!(!listed.contains("abcd@abcd"), "{listed}");
    assert!(w.env.lane().join("journal/journal").is_file());

    eprintln!(
        "claude_e2e: nested session {:.1} s; whole test {:.1} s",
        s1.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The scripted API on its own (no Claude Code needed): a chunked request
/// body is read whole, and the nested script spawns through `Agent`.
#[test]
fn the_scripted_api_reads_chunked_bodies_and_follows_its_script() {
    use std::io::{Read, Write};
    let api = FakeApi::start(Script::Nested, "ghp_x").expect("a loopback port");
    let addr = api.base_url.trim_start_matches("http://").to_owned();
    let body =
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Agent"}]}"#;
    let (a, b) = body.split_at(20);
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        conn,
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"tool_use\"") && answer.contains("SUBAGENT-L1"),
        "{answer}"
    );
    assert_eq!(api.requests(), ["POST /v1/messages messages=1"]);
}
