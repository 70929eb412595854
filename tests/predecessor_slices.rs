//! The first hooks on a lane with a large store an older abcd left import
//! it in bounded slices (issue 11: a hook keeps to its budget), through the
//! real binary: each hook's lock imports at most one slice
//! (`ABCD_TEST_IMPORT_SLICE` records here, to need several with a small
//! store), the report counts the slices, the next hook (or any verb, whole)
//! carries on, and the result is the store a one-go import makes.

mod common;
#[path = "common/predecessor.rs"]
mod predecessor;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::*;
use predecessor::session_uuid;

const TOTAL: usize = 40;
const SLICE: &str = "7";

/// `records/` and `records.unjournaled/`, the repository's root commit
/// written as `ROOT` (two test repositories have different ones).
fn records(env: &Env) -> BTreeMap<String, String> {
    let lane = env.lane();
    let root = env.root_sha();
    let mut m = BTreeMap::new();
    for dir in ["records", "records.unjournaled"] {
        if let Ok(rd) = fs::read_dir(lane.join(dir)) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if !n.starts_with('.') {
                    let text = String::from_utf8(fs::read(e.path()).unwrap()).unwrap();
                    m.insert(format!("{dir}/{n}"), text.replace(&root, "ROOT"));
                }
            }
        }
    }
    m
}

fn report(lane: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(lane.join("predecessor-import.json")).unwrap()).unwrap()
}

/// A lane in the predecessor's current layout: `TOTAL` composite records,
/// the main threads, and a file that is not a record.
fn old_store(env: &Env) {
    let lane = env.lane();
    let sha = env.root_sha();
    predecessor::write_composites_n(&lane.join("records"), &sha, None, TOTAL, 10);
    predecessor::write_main_threads(&lane.join("records"), &sha);
    fs::write(lane.join("records/README.md"), "not a record\n").unwrap();
}

fn hook(env: &Env) {
    let out = env.hook_env(
        "session-start",
        &env.start_payload(&session_uuid(0)),
        &[("ABCD_TEST_IMPORT_SLICE", SLICE)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

fn verify_clean(env: &Env) {
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}{}", stdout(&v), stderr(&v));
}

#[test]
fn hooks_import_a_large_old_store_in_slices_and_end_where_one_go_ends() {
    if !test_knobs("hooks_import_a_large_old_store_in_slices_and_end_where_one_go_ends") {
        return;
    }
    // The reference: a user verb imports it in one go.
    let whole = Env::new();
    old_store(&whole);
    let out = whole.abcd(&["history", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = records(&whole);
    assert_eq!(report(&whole.lane())["slices"], 1);
    let n_records = report(&whole.lane())["records"].as_array().unwrap().len();
    assert!(n_records > TOTAL);
    assert!(expected.contains_key("records.unjournaled/README.md"));

    let env = Env::new();
    old_store(&env);
    let lane = env.lane();
    hook(&env);
    // One hook imported a bounded part: the rest waits, held aside.
    let first = report(&lane);
    assert_eq!(first["unfinished"], true, "{first}");
    let after_one = first["records"].as_array().unwrap().len();
    let slices_one = first["slices"].as_u64().unwrap();
    assert!(slices_one >= 1);
    assert!(
        after_one <= slices_one as usize * 7 && after_one < n_records,
        "{after_one} records after one hook ({slices_one} slice(s))"
    );
    assert!(lane.join("predecessor-import.pending").exists());
    assert!(lane.join("predecessor-import.records").is_dir());
    assert_eq!(
        fs::read_dir(lane.join("records")).unwrap().count(),
        after_one,
        "records/ holds what is journaled, nothing more"
    );
    verify_clean(&env);

    let mut hooks = 1;
    while lane.join("predecessor-import.pending").exists() {
        hook(&env);
        hooks += 1;
        assert!(hooks < 100, "the import never finished");
    }
    let last = report(&lane);
    assert!(hooks >= 2, "{hooks} hook(s)");
    assert!(last.get("unfinished").is_none(), "{last}");
    let slices = last["slices"].as_u64().unwrap();
    assert!(
        slices as usize >= n_records.div_ceil(7),
        "{slices} slices for {n_records} records"
    );
    assert_eq!(last["records"].as_array().unwrap().len(), n_records);
    assert_eq!(last["composite"], TOTAL as u64);
    assert!(!lane.join("predecessor-import.records").exists());
    assert_eq!(records(&env), expected);
    verify_clean(&env);
    // A rebuild reproduces it.
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records(&env), expected);
}

#[test]
fn a_user_verb_finishes_an_import_hooks_began() {
    let env = Env::new();
    old_store(&env);
    let lane = env.lane();
    hook(&env);
    let began = report(&lane)["slices"].as_u64().unwrap();
    assert_eq!(report(&lane)["unfinished"], true);
    let out = env.abcd(&["history", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = report(&lane);
    assert!(done.get("unfinished").is_none(), "{done}");
    assert_eq!(done["slices"].as_u64().unwrap(), began + 1);
    assert!(!lane.join("predecessor-import.pending").exists());
    assert!(!lane.join("predecessor-import.records").exists());
    assert!(stderr(&out).contains("adopted the store an older abcd wrote"));
    verify_clean(&env);
}

/// A step run with extra environment.
type Step<'a> = &'a dyn Fn(&Env, &[(&str, &str)]);

/// The operations of one run of `run` (via `ABCD_FAULT_TRACE`).
fn ops_of(env: &Env, run: Step<'_>) -> usize {
    let trace = env.tmp.path().join("trace");
    let _ = fs::remove_file(&trace);
    run(env, &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())]);
    fs::read_to_string(&trace).unwrap().lines().count()
}

fn hook_with(env: &Env, extra: &[(&str, &str)]) -> std::process::Output {
    let mut vars = vec![("ABCD_TEST_IMPORT_SLICE", SLICE)];
    vars.extend_from_slice(extra);
    env.hook_env("session-start", &env.start_payload(&session_uuid(0)), &vars)
}

fn list_with(env: &Env, extra: &[(&str, &str)]) -> std::process::Output {
    env.abcd_env(&["history", "list"], extra)
}

/// SIGKILL at spread file operations of a hook's first slice (the records
/// moved aside, bodies, the journal batch, the catch-up) and of the verb
/// that finishes the import (its slice, the reconciliation of the held
/// records): hooks and verbs after it finish the import, and the store is
/// the one a one-go import makes.
#[test]
fn a_sliced_import_killed_anywhere_is_finished_by_the_next_opens() {
    let env = Env::new();
    old_store(&env);
    let pristine = env.tmp.path().join("pristine");
    copy_tree(&env.abcd_home, &pristine);
    let reset = || {
        fs::remove_dir_all(&env.abcd_home).unwrap();
        copy_tree(&pristine, &env.abcd_home);
    };
    // The reference, and how many operations each step makes.
    let out = env.abcd(&["history", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = records(&env);
    reset();
    let hook_ops = ops_of(&env, &|e, v| {
        assert!(hook_with(e, v).status.success());
    });
    let list_ops = ops_of(&env, &|e, v| {
        assert!(list_with(e, v).status.success());
    });
    let lane = env.lane();
    for (step, ops) in [("hook", hook_ops), ("list", list_ops)] {
        for k in (1..=6).map(|i| i * ops / 7) {
            reset();
            let kill = format!("#{k}:KILL");
            let vars = [("ABCD_FAULT_INJECT", kill.as_str())];
            let out = if step == "hook" {
                hook_with(&env, &vars)
            } else {
                assert!(hook_with(&env, &[]).status.success());
                list_with(&env, &vars)
            };
            // A hook reports and exits 0 whatever happens; the kill shows
            // as a signal.
            assert_eq!(out.status.code(), None, "{step} op {k}/{ops} did not kill");
            // Two more hooks, then a verb, finish it.
            for _ in 0..2 {
                assert!(hook_with(&env, &[]).status.success());
            }
            let out = env.abcd(&["history", "list"]);
            assert!(out.status.success(), "{step} op {k}: {}", stderr(&out));
            assert!(
                !lane.join("predecessor-import.pending").exists(),
                "{step} op {k}"
            );
            assert!(
                !lane.join("predecessor-import.records").exists(),
                "{step} op {k}"
            );
            assert_eq!(records(&env), expected, "{step} op {k}");
            verify_clean(&env);
        }
    }
}
