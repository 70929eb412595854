//! The rest of issue 11's bad-input list, through the real binary, each
//! forced deterministically: a file that vanishes, grows or changes its ids
//! between its
//! probe and its read (the debug-only race point `ABCD_TEST_INGEST_RACE`),
//! an unreadable file, thousands of session ids in one file, and a SIGKILL
//! in the middle of a streamed (big-file) ingest. The others on the list
//! are in `tests/ingest.rs` (symlinked source, long project names, a
//! sidecar claimed twice, non-UTF-8 bytes, a SIGKILL during ingest),
//! `tests/bigfile.rs` (a big transcript, non-UTF-8 in a streamed one) and
//! `tests/migrate.rs` (a SIGKILL during `migrate --apply`).

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const A: &str = "a1a1a1a1-0000-4000-8000-000000000001";
const B: &str = "b2b2b2b2-0000-4000-8000-000000000002";
/// Later than any file's change: the ingest cache trusts a settled file.
const LATER: (&str, &str) = ("ABCD_TEST_NOW", "2099-01-01T00:00:00Z");

fn transcript(session: &str, cwd: &Path, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(
            &serde_json::json!({
                "type": "user",
                "sessionId": session,
                "uuid": format!("u{i}"),
                "cwd": cwd.display().to_string(),
                "message": {"role": "user", "content": format!("message {i} of {session}")},
            })
            .to_string(),
        );
        s.push('\n');
    }
    s
}

fn run(env: &Env, vars: &[(&str, &str)]) -> (Option<i32>, Value) {
    let out = env.abcd_env(&["--json", "history", "ingest"], vars);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (out.status.code(), v)
}

fn verify_clean(env: &Env) {
    let out = env.abcd(&["journal", "verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

fn count(v: &Value, key: &str) -> usize {
    v[key].as_array().unwrap().len()
}

#[test]
fn a_file_that_vanishes_between_probe_and_read_is_reported_and_the_rest_stored() {
    if !test_knobs("a_file_that_vanishes_between_probe_and_read_is_reported_and_the_rest_stored") {
        return;
    }
    for big in [false, true] {
        let env = Env::new();
        env.main_transcript(A, &transcript(A, &env.repo, 40));
        env.main_transcript(B, &transcript(B, &env.repo, 40));
        let race = format!("vanish:{A}.jsonl");
        let mut vars = vec![("ABCD_TEST_INGEST_RACE", race.as_str()), LATER];
        if big {
            vars.push(("ABCD_TEST_STREAM_OVER", "1024"));
            vars.push(("ABCD_TEST_PART_BYTES", "1024"));
        }
        let (code, rep) = run(&env, &vars);
        assert_eq!(code, Some(1), "a failure is the exit status: {rep:#}");
        assert_eq!(count(&rep, "failed"), 1, "{rep:#}");
        let f = &rep["failed"][0];
        assert!(f["path"].as_str().unwrap().ends_with(&format!("{A}.jsonl")));
        let error = f["error"].as_str().unwrap();
        assert!(
            error.contains("between the probe and the capture") && error.contains("exist"),
            "big={big}: {error}"
        );
        assert_eq!(count(&rep, "stored"), 1, "{rep:#}");
        assert_eq!(rep["stored"][0]["session_id"], B);
        assert!(record_names(&env.lane()).iter().all(|r| !r.contains(A)));
        verify_clean(&env);
        // The next run sees only what is there: nothing fails.
        let (code, rep) = run(&env, &[LATER]);
        assert_eq!(code, Some(0), "{rep:#}");
        assert_eq!(rep["files"], 1);
    }
}

#[test]
fn a_file_whose_ids_change_between_probe_and_read_is_refused_settled_or_not() {
    if !test_knobs("a_file_whose_ids_change_between_probe_and_read_is_refused_settled_or_not") {
        return;
    }
    // Settled (`LATER`), the capture may take the probed ids on the
    // file's metadata alone: it must look at that metadata after its read,
    // or the appended line of another session would be stored under the
    // probed id. Unsettled, it reads the ids again.
    for settled in [true, false] {
        let env = Env::new();
        env.main_transcript(A, &transcript(A, &env.repo, 40));
        env.main_transcript(B, &transcript(B, &env.repo, 40));
        let race = format!("reid:{A}.jsonl");
        let mut vars = vec![("ABCD_TEST_INGEST_RACE", race.as_str())];
        if settled {
            vars.push(LATER);
        }
        let (code, rep) = run(&env, &vars);
        assert_eq!(code, Some(1), "settled={settled}: {rep:#}");
        assert_eq!(count(&rep, "failed"), 1, "{rep:#}");
        let f = &rep["failed"][0];
        assert!(f["path"].as_str().unwrap().ends_with(&format!("{A}.jsonl")));
        assert!(
            f["error"].as_str().unwrap().contains("changed its ids"),
            "{rep:#}"
        );
        assert_eq!(count(&rep, "stored"), 1, "{rep:#}");
        assert_eq!(rep["stored"][0]["session_id"], B);
        assert!(record_names(&env.lane()).iter().all(|r| !r.contains(A)));
        verify_clean(&env);
    }
}

#[test]
fn a_file_that_grows_between_probe_and_read_is_stored_as_read_and_read_again_next_time() {
    if !test_knobs(
        "a_file_that_grows_between_probe_and_read_is_stored_as_read_and_read_again_next_time",
    ) {
        return;
    }
    for big in [false, true] {
        let env = Env::new();
        let file = env.main_transcript(A, &transcript(A, &env.repo, 40));
        let probed_size = fs::metadata(&file).unwrap().len();
        let race = format!("grow:{A}.jsonl");
        let mut knobs = vec![];
        if big {
            knobs.push(("ABCD_TEST_STREAM_OVER", "1024"));
            knobs.push(("ABCD_TEST_PART_BYTES", "100000"));
        }
        let mut vars = knobs.clone();
        vars.push(("ABCD_TEST_INGEST_RACE", race.as_str()));
        vars.push(LATER);
        let (code, rep) = run(&env, &vars);
        assert_eq!(code, Some(0), "{rep:#}");
        assert_eq!(count(&rep, "stored"), 1, "{rep:#}");
        let grown = fs::metadata(&file).unwrap().len();
        assert!(grown > probed_size);
        // What was read is what is stored: the grown file, whole.
        assert_eq!(rep["stored"][0]["bytes"].as_u64(), Some(grown), "{rep:#}");
        let names = record_names(&env.lane());
        assert_eq!(names.len(), 1, "big={big}");
        let text = fs::read_to_string(env.lane().join("records").join(&names[0])).unwrap();
        assert_eq!(
            text.matches(&format!("message 0 of {A}")).count(),
            2,
            "the copied first line is in the record"
        );
        // The cache kept the metadata from before the growth, so the next
        // run reads the file again (and finds it stored), and the one after
        // trusts the new metadata.
        let mut vars = knobs.clone();
        vars.push(LATER);
        let (_, second) = run(&env, &vars);
        assert_eq!(count(&second, "stored"), 0, "{second:#}");
        assert_eq!(second["already_stored"][0]["via"], "session-cwd");
        let (_, third) = run(&env, &vars);
        assert_eq!(third["already_stored"][0]["via"], "unchanged", "{third:#}");
        assert_eq!(record_names(&env.lane()).len(), 1);
        verify_clean(&env);
    }
}

#[test]
fn thousands_of_session_ids_in_one_file_are_skipped_as_ambiguous_and_nothing_is_stored() {
    let env = Env::new();
    let mut text = String::new();
    for i in 0..5000 {
        let sid = format!("{i:08x}-0000-4000-8000-000000000000");
        text.push_str(&transcript(&sid, &env.repo, 1));
    }
    env.main_transcript("many", &text);
    env.main_transcript(B, &transcript(B, &env.repo, 3));
    let (code, rep) = run(&env, &[]);
    assert_eq!(code, Some(0), "{rep:#}");
    assert_eq!(count(&rep, "skipped"), 1, "{rep:#}");
    let s = &rep["skipped"][0];
    assert_eq!(s["reason"], "ambiguous-session-id");
    // The scan is bounded: the ids are counted within the first lines only.
    assert!(
        s["detail"].as_str().unwrap().starts_with("64 session ids"),
        "{s}"
    );
    assert_eq!(count(&rep, "stored"), 1);
    assert_eq!(record_names(&env.lane()).len(), 1);
}

/// Makes every path under `dir` belong to `uid` (so a process running as
/// that account owns the store, HOME and the repository).
fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid)).unwrap();
    if dir.is_dir() && !dir.is_symlink() {
        for e in fs::read_dir(dir).unwrap().flatten() {
            chown_tree(&e.path(), uid);
        }
    }
}

#[test]
fn an_unreadable_file_is_reported_failed_with_the_reason_and_the_rest_stored() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let env = Env::new();
    let secret = env.main_transcript(A, &transcript(A, &env.repo, 3));
    env.main_transcript(B, &transcript(B, &env.repo, 3));
    // Root reads whatever the mode says: as root, the binary runs as
    // another account, which owns everything but the unreadable file.
    let root = unsafe { libc::geteuid() } == 0;
    const NOBODY: u32 = 65534;
    if root {
        chown_tree(env.tmp.path(), NOBODY);
        std::os::unix::fs::lchown(&secret, Some(0), Some(0)).unwrap();
        fs::set_permissions(env.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.command(&env.repo);
    cmd.args(["--json", "history", "ingest"]);
    if root {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let out = cmd.output().unwrap();
    let rep: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    assert_eq!(out.status.code(), Some(1), "{rep:#}");
    assert_eq!(count(&rep, "failed"), 1, "{rep:#}");
    let f = &rep["failed"][0];
    assert!(f["path"].as_str().unwrap().ends_with(&format!("{A}.jsonl")));
    assert!(
        f["error"].as_str().unwrap().contains("Permission denied"),
        "{f}"
    );
    assert_eq!(count(&rep, "stored"), 1, "{rep:#}");
    assert_eq!(rep["stored"][0]["session_id"], B);
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    if root {
        // The test harness (root) cleans up what the other account wrote.
        chown_tree(env.tmp.path(), 0);
    }
}

#[test]
fn a_streamed_ingest_killed_midway_is_finished_by_running_it_again() {
    if !test_knobs("a_streamed_ingest_killed_midway_is_finished_by_running_it_again") {
        return;
    }
    let knobs = [
        ("ABCD_TEST_STREAM_OVER", "2048"),
        ("ABCD_TEST_PART_BYTES", "2048"),
        LATER,
    ];
    let setup = || {
        let env = Env::new();
        env.main_transcript(A, &transcript(A, &env.repo, 200));
        env
    };
    // How many syncs a whole run makes (a part is one body and one
    // journal append, each synced).
    let (syncs, parts) = {
        let env = setup();
        let trace = env.tmp.path().join("trace");
        let mut vars = knobs.to_vec();
        vars.push(("ABCD_FAULT_TRACE", trace.to_str().unwrap()));
        let (code, _) = run(&env, &vars);
        assert_eq!(code, Some(0));
        let t = fs::read_to_string(&trace).unwrap();
        let syncs = t
            .lines()
            .filter(|l| l.split(' ').nth(1) == Some("sync"))
            .count();
        (syncs, record_names(&env.lane()).len())
    };
    assert!(parts >= 8, "{parts} parts");
    assert!(syncs >= parts, "{syncs} syncs");
    for n in [1, syncs / 2, syncs - 1] {
        let env = setup();
        let spec = format!("sync#{n}:KILL");
        let mut vars = knobs.to_vec();
        vars.push(("ABCD_FAULT_INJECT", &spec));
        let out = env.abcd_env(&["--json", "history", "ingest"], &vars);
        assert_eq!(out.status.code(), None, "{spec}: killed, {}", stderr(&out));
        let before = record_names(&env.lane()).len();
        assert!(before < parts, "{spec}: {before} parts before the kill");
        let (code, rep) = run(&env, &knobs);
        assert_eq!(code, Some(0), "{spec}: {rep:#}");
        assert_eq!(
            count(&rep, "stored") + count(&rep, "already_stored"),
            1,
            "{spec}: {rep:#}"
        );
        assert_eq!(record_names(&env.lane()).len(), parts, "{spec}");
        verify_clean(&env);
        // And once more: nothing new.
        let (_, again) = run(&env, &knobs);
        assert_eq!(count(&again, "stored"), 0, "{spec}: {again:#}");
        assert_eq!(record_names(&env.lane()).len(), parts, "{spec}");
    }
}
