//! `abcd sync` end to end: several `ABCD_HOME`s (machines) sharing one
//! repository, a bare git repository on the local file system as the
//! remote (`file://`), the real binary and the real `git`.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{line, stderr, stdout, Env};
use serde_json::Value;

/// A value the redaction rules leave alone, forgotten by hand.
const VALUE: &str = "correct-horse-battery-staple-42";

fn have_git() -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: `git` is not installed, and abcd sync drives it");
    }
    ok
}

struct Net {
    env: Env,
    remote: PathBuf,
    url: String,
}

fn git_in(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs")
}

impl Net {
    fn new() -> Net {
        let env = Env::new();
        let remote = env.tmp.path().join("remote.git");
        let out = git_in(env.tmp.path(), &["init", "-q", "--bare", "remote.git"]);
        assert!(out.status.success());
        let url = format!("file://{}", remote.display());
        Net { env, remote, url }
    }

    fn home(&self, m: &str) -> PathBuf {
        self.env.tmp.path().join(format!("machine-{m}"))
    }

    fn abcd(&self, m: &str, args: &[&str]) -> Output {
        self.abcd_path(m, args, None)
    }

    fn abcd_path(&self, m: &str, args: &[&str], path: Option<&Path>) -> Output {
        let mut c = self.env.command(&self.env.repo);
        c.env("ABCD_HOME", self.home(m)).args(args);
        if let Some(p) = path {
            let old = std::env::var_os("PATH").unwrap_or_default();
            let mut paths = vec![p.to_path_buf()];
            paths.extend(std::env::split_paths(&old));
            c.env("PATH", std::env::join_paths(paths).unwrap());
        }
        c.output().expect("abcd runs")
    }

    /// Captures a transcript of `lines` as `session` (and `agent`).
    fn capture(&self, m: &str, session: &str, agent: Option<&str>, lines: &[&str]) {
        let file = self
            .env
            .tmp
            .path()
            .join(format!("{m}-{session}-{}.jsonl", lines.len()));
        let text: String = lines.iter().map(|l| line(session, l) + "\n").collect();
        fs::write(&file, text).unwrap();
        let f = file.display().to_string();
        let mut args = vec!["history", "capture", f.as_str(), "--session", session];
        if let Some(a) = agent {
            args.extend(["--agent", a]);
        }
        let out = self.abcd(m, &args);
        assert!(out.status.success(), "capture: {}", stderr(&out));
    }

    fn sync(&self, m: &str) -> Value {
        let out = self.abcd(m, &["--json", "sync", "--remote", &self.url]);
        assert!(
            out.status.success(),
            "sync on {m}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        serde_json::from_str(stdout(&out).trim()).expect("sync --json")
    }

    fn lane(&self, m: &str) -> PathBuf {
        self.home(m).join("transcripts").join(self.env.root_sha())
    }

    /// `records/` and the index tables that derive from them, by path.
    fn corpus(&self, m: &str) -> BTreeMap<String, Vec<u8>> {
        common::converged(&self.lane(m))
    }

    fn records(&self, m: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.lane(m).join("records"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn verify_clean(&self, m: &str) {
        let out = self.abcd(m, &["journal", "verify"]);
        assert!(
            out.status.success(),
            "verify on {m}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }

    fn converged(&self, machines: &[&str]) {
        let first = self.corpus(machines[0]);
        assert!(!first.is_empty());
        for m in &machines[1..] {
            let other = self.corpus(m);
            let a: Vec<&String> = first.keys().collect();
            let b: Vec<&String> = other.keys().collect();
            assert_eq!(a, b, "{} and {m} hold different files", machines[0]);
            assert!(first == other, "{} and {m} differ in content", machines[0]);
        }
        for m in machines {
            self.verify_clean(m);
        }
    }
}

/// Every byte of every object a git repository holds, decompressed.
fn all_objects(git_dir: &Path) -> Vec<u8> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .expect("git cat-file");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every file under `dir`, git objects decompressed, that holds `needle`.
fn holders(dir: &Path, needle: &str) -> Vec<String> {
    let mut files = BTreeMap::new();
    walk_all(dir, dir, &mut files);
    let mut out: Vec<String> = files
        .into_iter()
        .filter(|(_, b)| contains(b, needle))
        .map(|(p, _)| p)
        .collect();
    // Git repositories below: their objects are compressed.
    for repo in find_git_dirs(dir) {
        if contains(&all_objects(&repo), needle) {
            out.push(format!("{} (git objects)", repo.display()));
        }
    }
    out
}

fn walk_all(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk_all(&p, base, out);
        } else if let Ok(b) = fs::read(&p) {
            out.insert(p.strip_prefix(base).unwrap().display().to_string(), b);
        }
    }
}

fn find_git_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.join("HEAD").is_file() && p.join("objects").is_dir() {
                out.push(p);
            } else {
                out.extend(find_git_dirs(&p));
            }
        }
    }
    out
}

#[test]
fn interleaved_captures_on_two_machines_converge_byte_for_byte() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-one", None, &["first on a"]);
    net.capture("b", "s-two", None, &["first on b"]);
    net.capture("a", "s-three", Some("agent-x"), &["sub-agent on a"]);
    net.sync("a");
    net.capture("b", "s-four", None, &["second on b"]);
    net.sync("b");
    net.capture("a", "s-five", None, &["after the first sync"]);
    net.sync("a");
    // A dry run counts and changes nothing.
    let before = net.corpus("b");
    let out = net.abcd("b", &["--json", "sync", "--dry-run", "--remote", &net.url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dry: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(dry["imported"], 1, "{dry}");
    assert_eq!(dry["pushed"], false, "{dry}");
    assert_eq!(net.corpus("b"), before);
    net.sync("b");
    assert_eq!(net.records("a").len(), 5);
    net.converged(&["a", "b"]);
    // A re-pull imports nothing and publishes nothing.
    for m in ["a", "b"] {
        let r = net.sync(m);
        assert_eq!(r["imported"], 0, "{m}: {r}");
        assert_eq!(r["published_events"], 0, "{m}: {r}");
        assert_eq!(r["pushed"], false, "{m}: {r}");
    }
    // Only the dedicated namespace on the remote; no branch.
    let refs = git_in(&net.remote, &["for-each-ref", "--format=%(refname)"]);
    let refs = String::from_utf8_lossy(&refs.stdout).into_owned();
    assert_eq!(refs.lines().count(), 2, "{refs}");
    assert!(
        refs.lines().all(|r| r.starts_with("refs/abcd/v1/")),
        "{refs}"
    );
    // What travelled is redacted material only: no staging, no notes.
    let objects = all_objects(&net.remote);
    assert!(!contains(&objects, "stage.json") && !contains(&objects, "meta.json"));
    // The home's sync state is private like the rest of the store.
    for m in ["a", "b"] {
        let mut files = BTreeMap::new();
        walk_all(&net.lane(m).join("sync"), &net.lane(m), &mut files);
        assert!(files.keys().any(|k| k.contains("repo.git/objects")));
        for k in files.keys() {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(net.lane(m).join(k))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{m}: {k} is {mode:o}");
        }
    }
    // Imported events replay like local ones: a rebuild reproduces them.
    let before = net.corpus("b");
    let out = net.abcd("b", &["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        net.corpus("b") == before,
        "a rebuild reproduces the synced store"
    );
    // Status reads local state.
    let st = net.abcd("a", &["--json", "sync", "status"]);
    let st: Value = serde_json::from_str(stdout(&st).trim()).unwrap();
    assert_eq!(st["own_pushed"], true, "{st}");
    assert_eq!(st["unpublished_events"], 0, "{st}");
    assert_eq!(st["machines"].as_array().unwrap().len(), 1, "{st}");
}

#[test]
fn the_same_session_on_both_machines_follows_the_one_machine_rules() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    // shorter on a, longer on b: the longer supersedes on both.
    net.capture("a", "s-grow", None, &["one"]);
    net.capture("b", "s-grow", None, &["one", "two"]);
    // identical on both: stored once.
    net.capture("a", "s-same", None, &["same text"]);
    net.capture("b", "s-same", None, &["same text"]);
    // divergent: both kept.
    net.capture("a", "s-fork", None, &["base", "left"]);
    net.capture("b", "s-fork", None, &["base", "right"]);
    // the longer first on a this time: b's shorter never lives there.
    net.capture("a", "s-grow2", None, &["x", "y", "z"]);
    net.capture("b", "s-grow2", None, &["x"]);
    // a captured the same session twice before syncing: b imports both
    // events in one batch and keeps only the longer.
    net.capture("a", "s-twice", None, &["p"]);
    net.capture("a", "s-twice", None, &["p", "q"]);
    net.sync("a");
    net.sync("b");
    net.sync("a");
    net.converged(&["a", "b"]);
    let recs = net.records("a");
    assert_eq!(
        recs.iter().filter(|r| r.ends_with("-s-twice.md")).count(),
        1,
        "{recs:?}"
    );
    let count = |s: &str| {
        recs.iter()
            .filter(|r| r.ends_with(&format!("-{s}.md")))
            .count()
    };
    assert_eq!(count("s-grow"), 1, "{recs:?}");
    assert_eq!(count("s-same"), 1, "{recs:?}");
    assert_eq!(count("s-fork"), 2, "{recs:?}");
    assert_eq!(count("s-grow2"), 1, "{recs:?}");
    let grow = recs.iter().find(|r| r.ends_with("-s-grow.md")).unwrap();
    let text = fs::read_to_string(net.lane("a").join("records").join(grow)).unwrap();
    assert!(text.contains("two"), "the longer one is live: {text}");
}

#[test]
fn three_machines_and_one_that_joins_late_converge() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-a", None, &["from a"]);
    net.capture("b", "s-b", None, &["from b"]);
    net.capture("c", "s-c", None, &["from c"]);
    net.capture("c", "s-a", None, &["from a", "and c went on"]);
    for m in ["a", "b", "c", "a", "b"] {
        net.sync(m);
    }
    net.converged(&["a", "b", "c"]);
    // d never captured anything: it joins and gets the same corpus.
    let r = net.sync("d");
    assert!(r["imported"].as_u64().unwrap() >= 4, "{r}");
    net.converged(&["a", "b", "c", "d"]);
}

#[test]
fn pushes_racing_from_two_machines_both_land_and_converge() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    for i in 0..5 {
        net.capture("a", &format!("s-a{i}"), None, &["a"]);
        net.capture("b", &format!("s-b{i}"), None, &["b"]);
    }
    std::thread::scope(|s| {
        let a = s.spawn(|| net.sync("a"));
        let b = s.spawn(|| net.sync("b"));
        a.join().unwrap();
        b.join().unwrap();
    });
    net.sync("a");
    net.sync("b");
    assert_eq!(net.records("a").len(), 10);
    net.converged(&["a", "b"]);
}

#[test]
fn a_forget_reaches_every_machine_and_no_byte_of_the_value_survives_a_gc() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    let secret = format!("the deploy word is {VALUE} today");
    net.capture("a", "s-leak", None, &["hello", &secret]);
    net.capture("a", "s-clean", None, &["nothing here"]);
    net.sync("a");
    net.sync("b");
    // b also captured the value on its own, and has not published it yet.
    net.capture("b", "s-b-leak", None, &[&secret]);
    assert!(!holders(&net.home("b"), VALUE).is_empty());
    let out = net.abcd("a", &["history", "forget", "--value", VALUE, "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("run `abcd sync` now"),
        "{}",
        stdout(&out)
    );
    // a's sync rewrites its ref and pushes it, and is killed just before
    // collecting its own old objects: the next sync collects them.
    let bin = killer_git(net.env.tmp.path(), "gc");
    let out = net.abcd_path("a", &["sync", "--remote", &net.url], Some(&bin));
    assert!(!out.status.success());
    assert!(
        !holders(&net.home("a"), VALUE).is_empty(),
        "not collected yet"
    );
    let r = net.sync("a");
    assert_eq!(r["rewritten"], false, "already rewritten: {r}");
    assert_eq!(holders(&net.home("a"), VALUE), Vec::<String>::new());
    let r = net.sync("b");
    assert_eq!(r["forgets_imported"], 1, "{r}");
    assert_eq!(r["rewritten"], true, "b rewrote what it published: {r}");
    net.sync("a");
    net.converged(&["a", "b"]);
    assert_eq!(net.records("a").len(), 3);
    for m in ["a", "b"] {
        assert_eq!(holders(&net.home(m), VALUE), Vec::<String>::new(), "{m}");
    }
    let out = git_in(&net.remote, &["gc", "--quiet", "--prune=now"]);
    assert!(out.status.success());
    let clone = net.env.tmp.path().join("fresh.git");
    let out = git_in(
        net.env.tmp.path(),
        &["clone", "-q", "--mirror", &net.url, "fresh.git"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !contains(&all_objects(&clone), VALUE),
        "the fresh clone holds the value"
    );
    assert!(
        !contains(&all_objects(&net.remote), VALUE),
        "the remote holds the value"
    );
    // A machine joining now never sees it, and converges.
    net.sync("c");
    net.converged(&["a", "b", "c"]);
    assert_eq!(holders(&net.home("c"), VALUE), Vec::<String>::new());
    // Later captures on b keep it out too (the forgotten set travelled).
    net.capture("b", "s-again", None, &[&secret]);
    let recs = net.records("b");
    let again = recs.iter().find(|r| r.ends_with("-s-again.md")).unwrap();
    let text = fs::read_to_string(net.lane("b").join("records").join(again)).unwrap();
    assert!(!text.contains(VALUE), "{text}");
}

#[test]
fn a_record_forgotten_whole_is_removed_everywhere() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-gone", None, &["remove me"]);
    net.capture("a", "s-kept", None, &["keep me"]);
    net.sync("a");
    net.sync("b");
    assert_eq!(net.records("b").len(), 2);
    let out = net.abcd("a", &["history", "forget", "--record", "s-gone", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    net.sync("a");
    net.sync("b");
    assert_eq!(net.records("b").len(), 1);
    net.converged(&["a", "b"]);
    net.sync("c");
    net.converged(&["a", "b", "c"]);
}

/// A `git` on PATH that SIGKILLs abcd (its parent) when abcd runs
/// `git <verb>`, then does nothing.
fn killer_git(dir: &Path, verb: &str) -> PathBuf {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let bin = dir.join(format!("kill-at-{verb}"));
    fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = \"{verb}\" ]; then kill -9 $PPID; sleep 1; exit 1; fi; done\nexec {} \"$@\"\n",
        real.trim()
    );
    let p = bin.join("git");
    fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn a_sync_killed_during_pull_or_push_is_finished_by_running_it_again() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    for i in 0..3 {
        net.capture("a", &format!("s-a{i}"), None, &["a", "more"]);
        net.capture("b", &format!("s-b{i}"), None, &["b"]);
    }
    net.sync("a");
    // Killed while pulling (reading the fetched objects), then while
    // pushing (after its commit was made).
    for verb in ["commit-tree", "cat-file", "push", "fetch"] {
        let bin = killer_git(net.env.tmp.path(), verb);
        let out = net.abcd_path("b", &["sync", "--remote", &net.url], Some(&bin));
        assert!(!out.status.success(), "killed at {verb}");
        net.verify_clean("b");
    }
    net.sync("b");
    net.sync("a");
    net.converged(&["a", "b"]);
    assert_eq!(net.records("a").len(), 6);
}

#[test]
fn a_sync_killed_at_each_store_write_of_an_import_converges_when_run_again() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-1", None, &["one"]);
    net.capture("a", "s-2", None, &["two"]);
    net.sync("a");
    // Count b's store operations during its first pull, then kill it at
    // several of them in turn on fresh copies.
    let trace = net.env.tmp.path().join("trace");
    let base = net.home("b");
    let out = net
        .env
        .command(&net.env.repo)
        .env("ABCD_HOME", &base)
        .env("ABCD_FAULT_TRACE", &trace)
        .args(["sync", "--pull-only", "--remote", &net.url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let ops = fs::read_to_string(&trace).unwrap().lines().count() as u64;
    assert!(ops > 10, "{ops}");
    fs::remove_dir_all(&base).unwrap();
    for n in (1..=ops).step_by((ops / 8).max(1) as usize) {
        let home = net.env.tmp.path().join(format!("kill-{n}"));
        let spec = format!("#{n}:KILL");
        let _ = net
            .env
            .command(&net.env.repo)
            .env("ABCD_HOME", &home)
            .env("ABCD_FAULT_INJECT", &spec)
            .args(["sync", "--pull-only", "--remote", &net.url])
            .output()
            .unwrap();
        let again = net
            .env
            .command(&net.env.repo)
            .env("ABCD_HOME", &home)
            .args(["sync", "--pull-only", "--remote", &net.url])
            .output()
            .unwrap();
        assert!(
            again.status.success(),
            "after kill at {n}: {}",
            stderr(&again)
        );
        let recs: Vec<_> = fs::read_dir(
            home.join("transcripts")
                .join(net.env.root_sha())
                .join("records"),
        )
        .unwrap()
        .flatten()
        .collect();
        assert_eq!(recs.len(), 2, "after kill at {n}");
        let v = net
            .env
            .command(&net.env.repo)
            .env("ABCD_HOME", &home)
            .args(["journal", "verify"])
            .output()
            .unwrap();
        assert!(
            v.status.success(),
            "verify after kill at {n}: {}",
            stdout(&v)
        );
    }
}

#[test]
fn an_unreachable_remote_a_newer_format_and_damaged_objects_are_clear_errors() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-1", None, &["one"]);
    let before = net.corpus("a");
    // Unreachable.
    let missing = format!("file://{}/nowhere.git", net.env.tmp.path().display());
    let out = net.abcd("a", &["sync", "--remote", &missing]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot reach the remote"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("nothing local changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(net.corpus("a"), before);
    // No git at all.
    let empty = net.env.tmp.path().join("no-git");
    fs::create_dir_all(&empty).unwrap();
    let out = net
        .env
        .command(&net.env.repo)
        .env("ABCD_HOME", net.home("a"))
        .env("PATH", &empty)
        .args(["sync", "--remote", &net.url])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("needs git"), "{}", stderr(&out));
    // No remote at all.
    let out = net.abcd("a", &["sync"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--remote"), "{}", stderr(&out));
    // A remote that refuses the push (a server-side hook): said as it is;
    // everything stays here and the next sync pushes it.
    let hook = net.remote.join("hooks/pre-receive");
    fs::write(
        &hook,
        "#!/bin/sh\necho 'pushes are closed today' >&2\nexit 1\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = net.abcd("a", &["sync", "--remote", &net.url]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("refused this machine's push"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("pushes are closed today"),
        "{}",
        stderr(&out)
    );
    net.verify_clean("a");
    assert_eq!(net.corpus("a"), before);
    fs::remove_file(&hook).unwrap();
    // A newer format's refs: refused with the version.
    let r = net.sync("a");
    assert_eq!(r["pushed"], true, "{r}");
    let head =
        String::from_utf8(git_in(&net.remote, &["for-each-ref", "--format=%(objectname)"]).stdout)
            .unwrap();
    let head = head.lines().next().unwrap().to_owned();
    let out = git_in(&net.remote, &["update-ref", "refs/abcd/v2/x/y", &head]);
    assert!(out.status.success());
    let out = net.abcd("b", &["sync", "--remote", &net.url]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("format v2"), "{}", stderr(&out));
    let out = git_in(&net.remote, &["update-ref", "-d", "refs/abcd/v2/x/y"]);
    assert!(out.status.success());
    // Damaged objects on the remote: b's fetch fails clearly, a's store is
    // untouched, and once the remote is mended the next sync resumes.
    let objects = net.remote.join("objects");
    let mut damaged = Vec::new();
    for d in fs::read_dir(&objects).unwrap().flatten() {
        let n = d.file_name().to_string_lossy().into_owned();
        if n.len() == 2 {
            for f in fs::read_dir(d.path()).unwrap().flatten() {
                let p = f.path();
                let orig = fs::read(&p).unwrap();
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
                fs::write(&p, b"garbage").unwrap();
                damaged.push((p, orig));
            }
        }
    }
    assert!(!damaged.is_empty(), "pushes of a few objects stay loose");
    let out = net.abcd("b", &["sync", "--remote", &net.url]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("abcd sync"), "{}", stderr(&out));
    net.verify_clean("b");
    for (p, orig) in damaged {
        fs::write(&p, orig).unwrap();
    }
    net.sync("b");
    net.converged(&["a", "b"]);
}

#[test]
fn auto_sync_starts_in_the_background_from_the_session_start_hook_only_when_on() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-auto", None, &["captured before the hook"]);
    let home = net.home("a").display().to_string();
    let env = [("ABCD_HOME", home.as_str())];
    let refs = || {
        let o = git_in(&net.remote, &["for-each-ref", "--format=%(refname)"]);
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    // Off (the default): the hook starts nothing.
    let out = net
        .env
        .hook_env("session-start", &net.env.start_payload("s-auto"), &env);
    assert!(out.status.success());
    assert!(!stderr(&out).contains("background"), "{}", stderr(&out));
    let out = net.abcd("a", &["sync", "--auto", "on", "--remote", &net.url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = net
        .env
        .hook_env("session-start", &net.env.start_payload("s-auto"), &env);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("background `abcd sync` started"),
        "{}",
        stderr(&out)
    );
    // The hook returned; the sync finishes on its own (polled, generously).
    let mut waited = 0;
    while refs() == 0 && waited < 600 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    assert_eq!(
        refs(),
        1,
        "the background sync published this machine's ref"
    );
    // Within the interval, a second session start does not start another.
    let out = net
        .env
        .hook_env("session-start", &net.env.start_payload("s-auto"), &env);
    assert!(!stderr(&out).contains("background"), "{}", stderr(&out));
    let out = net.abcd("a", &["sync", "--auto", "off"]);
    assert!(out.status.success());
    assert!(!net.lane("a").join("sync/auto").exists());
}

#[test]
fn a_copied_machine_id_is_refused_and_a_lost_sync_directory_is_recovered() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-a", None, &["from a"]);
    net.sync("a");
    // The private repository lost: the next sync adopts what this journal
    // published and goes on (nothing published twice as new).
    fs::remove_dir_all(net.lane("a").join("sync")).unwrap();
    net.capture("a", "s-a2", None, &["more from a"]);
    let r = net.sync("a");
    assert_eq!(r["published_events"], 1, "{r}");
    // A home that copied a's machine id publishes under it; a then refuses
    // to overwrite what it did not publish, and says what to do.
    net.capture("c", "s-c", None, &["from c"]);
    fs::create_dir_all(net.home("c")).unwrap();
    fs::copy(
        net.home("a").join("machine-id"),
        net.home("c").join("machine-id"),
    )
    .unwrap();
    let out = net.abcd("c", &["sync", "--remote", &net.url]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("same id"), "{}", stderr(&out));
    fs::remove_file(net.home("c").join("machine-id")).unwrap();
    net.sync("c");
    net.sync("a");
    net.sync("c");
    net.converged(&["a", "c"]);
}

/// Writes `bytes` as a blob of the bare repository; its id.
fn blob(repo: &Path, bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .args(["hash-object", "-w", "--stdin"])
        .current_dir(repo)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn an_event_of_a_newer_schema_from_another_machine_is_refused_with_its_version() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("b", "s-b", None, &["from b"]);
    // A machine running a newer abcd published an event of schema 3.
    let format = blob(&net.remote, b"abcd-sync 1\n");
    let mut seg = b"abcd-seg 1\n".to_vec();
    let ev = [3u8, 0, 1, 2, 3, 4];
    seg.extend_from_slice(&(ev.len() as u32).to_le_bytes());
    seg.extend_from_slice(&ev);
    let seg = blob(&net.remote, &seg);
    let events = {
        let mut c = Command::new("git")
            .args(["mktree"])
            .current_dir(&net.remote)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin
            .take()
            .unwrap()
            .write_all(format!("100644 blob {seg}\t0000000001\n").as_bytes())
            .unwrap();
        String::from_utf8(c.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_owned()
    };
    let tree = {
        let mut c = Command::new("git")
            .args(["mktree"])
            .current_dir(&net.remote)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin
            .take()
            .unwrap()
            .write_all(
                format!("100644 blob {format}\tFORMAT\n040000 tree {events}\tevents\n").as_bytes(),
            )
            .unwrap();
        String::from_utf8(c.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_owned()
    };
    let commit = Command::new("git")
        .args(["commit-tree", &tree, "-m", "newer"])
        .current_dir(&net.remote)
        .env("GIT_AUTHOR_NAME", "x")
        .env("GIT_AUTHOR_EMAIL", "x@x")
        .env("GIT_COMMITTER_NAME", "x")
        .env("GIT_COMMITTER_EMAIL", "x@x")
        .output()
        .unwrap();
    let commit = String::from_utf8(commit.stdout).unwrap().trim().to_owned();
    let refname = format!("refs/abcd/v1/{}/{}", net.env.root_sha(), "f".repeat(32));
    assert!(git_in(&net.remote, &["update-ref", &refname, &commit])
        .status
        .success());
    let before = net.corpus("b");
    let out = net.abcd("b", &["sync", "--remote", &net.url]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("schema 3") && err.contains("upgrade"), "{err}");
    assert!(err.contains(&"f".repeat(32)), "names the machine: {err}");
    assert_eq!(net.corpus("b"), before, "nothing local changed");
    net.verify_clean("b");
}

#[test]
fn a_forget_is_honoured_before_the_records_of_a_machine_that_has_not_heard_of_it() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    let secret = format!("token {VALUE} in c's session");
    net.capture("a", "s-a", None, &["a has it too", &secret]);
    net.sync("a");
    // c captures the value itself and publishes it before anyone forgets.
    net.capture("c", "s-c", None, &["c has it", &secret]);
    net.sync("c");
    let out = net.abcd("a", &["history", "forget", "--value", VALUE, "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    net.sync("a");
    // b joins while c's published record still holds the value: the forget
    // is applied first, so c's record arrives here already redacted.
    let r = net.sync("b");
    assert_eq!(r["forgets_imported"], 1, "{r}");
    for d in ["records", "bodies", "index", "journal"] {
        assert_eq!(
            holders(&net.lane("b").join(d), VALUE),
            Vec::<String>::new(),
            "{d}"
        );
    }
    // Its git cache mirrors the remote, where c's ref still holds it until
    // c rewrites it (collected below, once c has).
    assert_eq!(net.records("b").len(), 2);
    // c hears of it, rewrites its record and its ref; everyone converges.
    net.sync("c");
    net.sync("a");
    net.sync("b");
    net.converged(&["a", "b", "c"]);
    for m in ["a", "b", "c"] {
        assert_eq!(holders(&net.home(m), VALUE), Vec::<String>::new(), "{m}");
    }
    assert!(git_in(&net.remote, &["gc", "--quiet", "--prune=now"])
        .status
        .success());
    assert!(!contains(&all_objects(&net.remote), VALUE));
}

#[test]
fn a_pull_killed_at_each_store_write_of_a_forget_import_converges_when_run_again() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    let secret = format!("the value {VALUE} here");
    net.capture("a", "s-1", None, &["one", &secret]);
    net.capture("a", "s-2", None, &["two"]);
    net.sync("a");
    net.sync("b");
    let out = net.abcd("a", &["history", "forget", "--value", VALUE, "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    net.capture("a", "s-3", None, &["three"]);
    net.sync("a");
    // b's pull now imports a forget (rewriting a body it holds) and a
    // record: count its store operations, then kill it at each in turn on
    // a copy of b as it was.
    let base = net.env.tmp.path().join("b-before");
    common::copy_tree(&net.home("b"), &base);
    let trace = net.env.tmp.path().join("trace-forget");
    let run = |home: &Path, env: &[(&str, &str)]| {
        let mut c = net.env.command(&net.env.repo);
        c.env("ABCD_HOME", home)
            .args(["sync", "--pull-only", "--remote", &net.url]);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(
        &net.home("b"),
        &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ops = fs::read_to_string(&trace).unwrap().lines().count() as u64;
    assert!(ops > 10, "{ops}");
    let expect = net.corpus("b");
    for n in (1..=ops).step_by((ops / 10).max(1) as usize) {
        let home = net.env.tmp.path().join(format!("kf-{n}"));
        common::copy_tree(&base, &home);
        let spec = format!("#{n}:KILL");
        let _ = run(&home, &[("ABCD_FAULT_INJECT", &spec)]);
        let again = run(&home, &[]);
        assert!(
            again.status.success(),
            "after kill at {n}: {}",
            stderr(&again)
        );
        let lane = home.join("transcripts").join(net.env.root_sha());
        let got = common::converged(&lane);
        assert!(
            got == expect,
            "after kill at {n}: the store differs from an uninterrupted pull"
        );
        let v = net
            .env
            .command(&net.env.repo)
            .env("ABCD_HOME", &home)
            .args(["journal", "verify"])
            .output()
            .unwrap();
        assert!(
            v.status.success(),
            "verify after kill at {n}: {}",
            stdout(&v)
        );
        for d in ["records", "bodies", "index"] {
            assert_eq!(
                holders(&lane.join(d), VALUE),
                Vec::<String>::new(),
                "after kill at {n}: {d}"
            );
        }
    }
}

#[test]
fn a_push_whose_lease_went_stale_fetches_imports_and_retries() {
    if !have_git() {
        return;
    }
    let net = Net::new();
    net.capture("a", "s-1", None, &["one"]);
    net.sync("a");
    let refname =
        String::from_utf8(git_in(&net.remote, &["for-each-ref", "--format=%(refname)"]).stdout)
            .unwrap()
            .trim()
            .to_owned();
    let first = String::from_utf8(git_in(&net.remote, &["rev-parse", &refname]).stdout)
        .unwrap()
        .trim()
        .to_owned();
    net.capture("a", "s-2", None, &["two"]);
    net.sync("a");
    net.capture("b", "s-b", None, &["from b"]);
    net.sync("b");
    net.capture("a", "s-3", None, &["three"]);
    // Between a's fetch and its push, the remote's ref moves (back to an
    // older commit of a's, as a restored server would hold): the lease
    // fails, and a fetches, imports and pushes again.
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let bin = net.env.tmp.path().join("move-at-push");
    fs::create_dir_all(&bin).unwrap();
    let mark = bin.join("moved");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = push ]; then echo push >> {m}.log; fi; if [ \"$a\" = push ] && [ ! -e {m} ]; then touch {m}; {g} --git-dir={r} update-ref {rf} {c}; fi; done\nexec {g} \"$@\"\n",
        m = mark.display(),
        g = real.trim(),
        r = net.remote.display(),
        rf = refname,
        c = first
    );
    fs::write(bin.join("git"), script).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(bin.join("git"), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = net.abcd_path("a", &["--json", "sync", "--remote", &net.url], Some(&bin));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(mark.exists(), "the ref was moved during the push");
    let pushes = fs::read_to_string(bin.join("moved.log")).unwrap();
    assert_eq!(
        pushes.lines().count(),
        2,
        "refused once (stale lease), then pushed"
    );
    let r: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(r["pushed"], true, "{r}");
    net.sync("b");
    net.converged(&["a", "b"]);
    assert_eq!(net.records("b").len(), 4);
}
