//! Sessions run in no git repository, or in one without a commit, are kept
//! in a lane keyed by their directory, and move into the repository's own
//! lane, as journaled events, once it has a root commit (issue 11, point
//! 5). Through the real binary, with real `git` in temporary directories.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The documented key: `dir-` and the SHA-256 of the domain tag and the
/// canonical path bytes.
fn dir_key(dir: &Path) -> String {
    let canon = fs::canonicalize(dir).unwrap();
    let mut h = Sha256::new();
    h.update(b"abcd directory lane v1\0");
    h.update(canon.as_os_str().as_encoded_bytes());
    format!("dir-{}", hex::encode(h.finalize()))
}

fn git(env: &Env, dir: &Path, args: &[&str]) {
    common::git(dir, &env.home, args);
}

/// `abcd args…` run in `cwd`, with extra environment.
fn abcd_in(env: &Env, cwd: &Path, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut c = env.command(cwd);
    c.args(args);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json_in(env: &Env, cwd: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = abcd_in(env, cwd, &full, &[]);
    assert!(
        out.status.success(),
        "abcd {args:?}: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("abcd {args:?}: {e}: {}", stdout(&out)))
}

/// `abcd hook <verb>` for a payload whose cwd is `cwd`.
fn hook_at(env: &Env, cwd: &Path, verb: &str, payload: &Value, extra: &[(&str, &str)]) -> Output {
    let mut c = env.command(cwd);
    c.args(["--json", "hook", verb])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    feed_stdin(&mut child, payload.to_string().as_bytes());
    child.wait_with_output().unwrap()
}

fn end(env: &Env, cwd: &Path, session: &str) -> Output {
    let path = env.main_transcript(
        session,
        &jsonl(&[&line(session, &format!("hello from {session}"))]),
    );
    let out = hook_at(
        env,
        cwd,
        "session-end",
        &json!({"session_id": session, "cwd": cwd, "transcript_path": path, "hook_event_name": "SessionEnd"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn sessions_of(lane: &Path) -> Vec<String> {
    let mut v: Vec<String> = files(&lane.join("records"))
        .iter()
        .map(|n| {
            let b = fs::read_to_string(lane.join("records").join(n)).unwrap();
            b.lines()
                .find_map(|l| l.strip_prefix("session_id: "))
                .unwrap_or("?")
                .trim_matches('"')
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// Every projection file of a lane (checkpoints left out: positions).
fn projections(lane: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for d in ["records", "staging", "quarantine", "sessions", "index"] {
        walk_into(&lane.join(d), lane, &mut out);
    }
    out.retain(|k, _| !k.starts_with("index/checkpoint") && !k.starts_with("index/search"));
    out
}

fn walk_into(dir: &Path, base: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk_into(&p, base, out);
        } else {
            out.insert(
                p.strip_prefix(base).unwrap().display().to_string(),
                fs::read(&p).unwrap(),
            );
        }
    }
}

/// `journal verify` is clean and `journal replay --rebuild` reproduces
/// every projection byte for byte, for the lane `--repo` names.
fn verify_and_replay(env: &Env, lane: &Path, repo: &str) {
    let v = json_in(env, &env.repo, &["--repo", repo, "journal", "verify"]);
    assert_eq!(v["status"], "clean", "{v:#}");
    let before = projections(lane);
    let out = abcd_in(
        env,
        &env.repo,
        &["--repo", repo, "journal", "replay", "--rebuild"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = projections(lane);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{repo}"
    );
    for (k, v) in &before {
        assert_eq!(v, &after[k], "{repo}: {k} differs after a rebuild");
    }
}

#[test]
fn a_session_in_a_plain_directory_is_kept_in_its_directory_lane_and_listed() {
    let env = Env::new();
    let plain = env.tmp.path().join("plain");
    fs::create_dir_all(plain.join("sub")).unwrap();
    let out = end(&env, &plain, "s-plain");
    let hj = hook_json(&out);
    assert_eq!(hj["outcome"], "staged", "{hj:#}\n{}", stderr(&out));
    let key = dir_key(&plain);
    assert_eq!(hj["root_sha"], key.as_str(), "{hj:#}");
    let lane = env.abcd_home.join("transcripts").join(&key);
    assert!(lane.join("journal").is_dir());
    // The directory it stands for is journaled state.
    let d: Value =
        serde_json::from_slice(&fs::read(lane.join("index/directory.json")).unwrap()).unwrap();
    let canon = fs::canonicalize(&plain).unwrap();
    assert_eq!(
        d["directory"],
        canon.display().to_string().as_str(),
        "{d:#}"
    );

    // Staged, listed with --all-repos as a directory.
    let st = json_in(&env, &env.repo, &["history", "staged", "--all-repos"]);
    let b = st
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["root_sha"] == key.as_str())
        .unwrap_or_else(|| panic!("{st:#}"));
    assert_eq!(b["lane_kind"], "directory");
    assert_eq!(b["staged"], 1);
    assert_eq!(b["directory"], canon.display().to_string().as_str());
    let text = stdout(&abcd_in(
        &env,
        &env.repo,
        &["history", "staged", "--all-repos"],
        &[],
    ));
    assert!(
        text.contains(&format!("directory {}", canon.display())),
        "{text}"
    );

    // Drained from inside the directory (a subdirectory of it is another
    // directory: the drain runs where the session ran).
    let dr = json_in(&env, &plain, &["history", "drain"]);
    assert_eq!(dr["captured"].as_array().unwrap().len(), 1, "{dr:#}");
    let list = json_in(&env, &plain, &["history", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list[0]["root_commit"], key.as_str());
    let all = json_in(&env, &env.repo, &["history", "list", "--all-repos"]);
    let rec = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == "s-plain")
        .unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(rec["lane_kind"], "directory");
    assert_eq!(rec["repository"], canon.display().to_string().as_str());
    let text = stdout(&abcd_in(
        &env,
        &env.repo,
        &["history", "list", "--all-repos"],
        &[],
    ));
    assert!(
        text.contains(&format!("== directory {}", canon.display())),
        "{text}"
    );
    // Other verbs work inside the directory.
    let shown = abcd_in(&env, &plain, &["history", "show", "s-plain"], &[]);
    assert!(
        stdout(&shown).contains("hello from s-plain"),
        "{}",
        stderr(&shown)
    );
    let stats = json_in(&env, &plain, &["history", "stats"]);
    assert_eq!(stats["sessions"], 1, "{stats:#}");
    // `history capture` of a transcript from the directory keeps it too.
    let t = env.main_transcript("s-cap", &jsonl(&[&line("s-cap", "captured by hand")]));
    let out = abcd_in(
        &env,
        &plain,
        &["history", "capture", t.to_str().unwrap()],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sessions_of(&lane), ["s-cap", "s-plain"]);
    // No repository to sync through: refused with the reason.
    let out = abcd_in(&env, &plain, &["sync", "status"], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("directory lane"), "{}", stderr(&out));
    verify_and_replay(&env, &lane, &key);
}

/// A repository without a commit whose sessions wait in a directory lane:
/// one record (drained), one staged transcript and their session notes.
struct Fresh {
    env: Env,
    fresh: PathBuf,
    key: String,
    lane: PathBuf,
}

fn fresh_repo_with_waiting_sessions() -> Fresh {
    let env = Env::new();
    let fresh = env.tmp.path().join("fresh");
    fs::create_dir_all(fresh.join("src")).unwrap();
    git(&env, &fresh, &["init", "-q"]);
    // A session run in a subdirectory is keyed by the work tree's top.
    let out = end(&env, &fresh.join("src"), "s-one");
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    let key = dir_key(&fresh);
    assert_eq!(hook_json(&out)["root_sha"], key.as_str());
    let dr = json_in(&env, &fresh, &["history", "drain"]);
    assert_eq!(dr["captured"].as_array().unwrap().len(), 1, "{dr:#}");
    let out = end(&env, &fresh, "s-two");
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    let lane = env.abcd_home.join("transcripts").join(&key);
    assert_eq!(sessions_of(&lane), ["s-one"]);
    assert_eq!(files(&lane.join("sessions")), ["s-one", "s-two"]);
    assert!(env.abcd_home.join("dir-lanes").join(&key).is_file());
    fs::write(fresh.join("README"), "fresh\n").unwrap();
    git(&env, &fresh, &["add", "README"]);
    git(&env, &fresh, &["commit", "-q", "-m", "root"]);
    Fresh {
        env,
        fresh,
        key,
        lane,
    }
}

/// What a finished move leaves: everything in the repository's lane once,
/// nothing in the directory lane but the journal's account of it. (A hook
/// that moved the lane may also have drained `s-two` already.)
fn assert_moved(f: &Fresh) {
    let env = &f.env;
    let repo_lane = env.lane_of(&f.fresh);
    let recorded = sessions_of(&repo_lane);
    assert_eq!(
        recorded.iter().filter(|s| *s == "s-one").count(),
        1,
        "exactly one record, not duplicated: {recorded:?}"
    );
    assert_eq!(sessions_of(&f.lane), Vec::<String>::new());
    assert!(
        files(&f.lane.join("staging")).is_empty(),
        "{:?}",
        files(&f.lane.join("staging"))
    );
    assert!(files(&f.lane.join("sessions")).is_empty());
    let notes = files(&repo_lane.join("sessions"));
    assert!(
        notes.contains(&"s-one".to_string()) && notes.contains(&"s-two".to_string()),
        "{notes:?}"
    );
    let staged = json_in(env, &f.fresh, &["history", "staged"]);
    let st = staged["staged"].as_array().unwrap();
    let two_staged = st.iter().filter(|e| e["session_id"] == "s-two").count();
    let two_recorded = recorded.iter().filter(|s| *s == "s-two").count();
    assert_eq!(two_staged + two_recorded, 1, "{staged:#} {recorded:?}");
    assert_eq!(st.len(), two_staged, "{staged:#}");
    let d: Value =
        serde_json::from_slice(&fs::read(f.lane.join("index/directory.json")).unwrap()).unwrap();
    assert_eq!(d["moved_to"], env.root_sha_of(&f.fresh).as_str(), "{d:#}");
    assert!(!env.abcd_home.join("dir-lanes").join(&f.key).exists());
    let dr = json_in(env, &f.fresh, &["history", "drain"]);
    assert_eq!(
        dr["captured"].as_array().unwrap().len(),
        two_staged,
        "s-two: {dr:#}"
    );
    // The moved record is the one the session's idempotency key names: a
    // later re-arrival of the same transcript stores nothing new.
    let again = end(env, &f.fresh, "s-one");
    assert_eq!(
        hook_json(&again)["root_sha"],
        env.root_sha_of(&f.fresh).as_str()
    );
    let dr = json_in(env, &f.fresh, &["history", "drain"]);
    assert_eq!(dr["captured"].as_array().unwrap().len(), 0, "{dr:#}");
    assert_eq!(sessions_of(&repo_lane), ["s-one", "s-two"]);
    verify_and_replay(env, &repo_lane, f.fresh.to_str().unwrap());
    verify_and_replay(env, &f.lane, &f.key);
}

#[test]
fn a_repository_without_a_commit_is_a_directory_lane_until_its_first_commit_then_moves() {
    let f = fresh_repo_with_waiting_sessions();
    let env = &f.env;
    // Listed as a directory before the next hook runs.
    let all = json_in(env, &env.repo, &["history", "list", "--all-repos"]);
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|r| r["session_id"] == "s-one" && r["lane_kind"] == "directory"),
        "{all:#}"
    );
    // The next hook in the repository moves the lane.
    let out = hook_at(
        env,
        &f.fresh,
        "session-start",
        &json!({"session_id": "s-three", "cwd": f.fresh, "hook_event_name": "SessionStart", "source": "startup"}),
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("moved 1 record(s), 1 staged transcript(s)"),
        "{}",
        stderr(&out)
    );
    let dump = abcd_in(
        env,
        &env.repo,
        &["--json", "--repo", &f.key, "journal", "dump"],
        &[],
    );
    assert!(dump.status.success(), "{}", stderr(&dump));
    let kinds: Vec<String> = stdout(&dump)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["event"].as_str().map(str::to_owned))
        .collect();
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    assert!(kinds.contains(&"directory-named"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"lane-moved"), "{kinds:?}");
    assert_moved(&f);
    // The directory lane is empty, so no listing shows it any more.
    let all = json_in(env, &env.repo, &["history", "list", "--all-repos"]);
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|r| r["lane_kind"] != "directory"),
        "{all:#}"
    );
}

#[test]
fn a_move_killed_at_any_write_is_finished_by_the_next_verb() {
    // Learn how many syncs and renames the move makes (a traced run), then
    // kill a fresh world at each of them and let the next verb finish.
    let f = fresh_repo_with_waiting_sessions();
    let trace = f.env.tmp.path().join("trace");
    let out = abcd_in(
        &f.env,
        &f.fresh,
        &["history", "list"],
        &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ops = fs::read_to_string(&trace).unwrap();
    let count = |op: &str| {
        ops.lines()
            .filter(|l| l.split(' ').nth(1) == Some(op))
            .count()
    };
    let (syncs, renames) = (count("sync"), count("rename"));
    assert!(syncs > 2 && renames > 2, "{ops}");
    assert_moved(&f);
    let mut kills = 0;
    for (op, n) in [("sync", syncs), ("rename", renames)] {
        for k in 1..=n {
            let f = fresh_repo_with_waiting_sessions();
            let spec = format!("{op}#{k}:KILL");
            let out = abcd_in(
                &f.env,
                &f.fresh,
                &["history", "list"],
                &[("ABCD_FAULT_INJECT", &spec)],
            );
            if out.status.code().is_none() {
                kills += 1;
            }
            let out = abcd_in(&f.env, &f.fresh, &["history", "list"], &[]);
            assert!(out.status.success(), "{spec}: {}", stderr(&out));
            assert_moved(&f);
        }
    }
    eprintln!("killed {kills} of {} syncs and renames", syncs + renames);
    assert!(
        kills >= syncs + renames - 2,
        "{kills} of {}",
        syncs + renames
    );
}

#[test]
fn a_session_end_hook_stages_its_own_transcript_then_moves_the_lane() {
    let f = fresh_repo_with_waiting_sessions();
    let env = &f.env;
    let out = end(env, &f.fresh, "s-four");
    let hj = hook_json(&out);
    assert_eq!(hj["outcome"], "staged", "{hj:#}");
    assert_eq!(hj["root_sha"], env.root_sha_of(&f.fresh).as_str());
    assert!(
        stderr(&out).contains("moved 1 record(s), 1 staged transcript(s)"),
        "{}",
        stderr(&out)
    );
    let staged = json_in(env, &f.fresh, &["history", "staged"]);
    let mut who: Vec<&str> = staged["staged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    who.sort();
    assert_eq!(who, ["s-four", "s-two"], "{staged:#}");
    assert_eq!(sessions_of(&env.lane_of(&f.fresh)), ["s-one"]);
    assert_eq!(sessions_of(&f.lane), Vec::<String>::new());
}

#[test]
fn a_directory_lane_records_its_directory_redacted_never_the_home_path() {
    let env = Env::new();
    let dir = env.home.join("work/scratch");
    fs::create_dir_all(&dir).unwrap();
    let out = end(&env, &dir, "s-home");
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    let lane = env.abcd_home.join("transcripts").join(dir_key(&dir));
    let d: Value =
        serde_json::from_slice(&fs::read(lane.join("index/directory.json")).unwrap()).unwrap();
    let label = d["directory"].as_str().unwrap();
    let home = fs::canonicalize(&env.home).unwrap().display().to_string();
    assert!(
        label.starts_with("~") && label.ends_with("/scratch"),
        "{label}"
    );
    assert!(!label.contains(&home), "{label}");
    // Nor anywhere in the journal, the index of directory lanes or the
    // listing's JSON.
    let journal = fs::read(lane.join("journal/journal")).unwrap();
    assert!(!journal.windows(home.len()).any(|w| w == home.as_bytes()));
    let index = fs::read(env.abcd_home.join("dir-lanes").join(dir_key(&dir))).unwrap();
    assert!(!index.windows(6).any(|w| w == b"scratc"));
    let st = json_in(&env, &env.repo, &["history", "staged", "--all-repos"]);
    assert!(!st.to_string().contains(&home), "{st:#}");
}
