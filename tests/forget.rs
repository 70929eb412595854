//! `history forget`: a value in three records of two sessions (and in a
//! superseded body and the search index) is gone from every byte under
//! `ABCD_HOME`; the journal verifies clean; a rebuild reproduces every
//! projection byte for byte; a later capture stays forgotten; whole records
//! go with `--record`; bad input, a damaged store and a SIGKILL at every
//! write are handled.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

const S1: &str = "f0000001-0000-4000-8000-000000000001";
const S2: &str = "f0000002-0000-4000-8000-000000000002";
/// Prose a user typed: no redaction rule knows it.
const VALUE: &str = "correct-horse-battery-staple-42";

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// Files under ABCD_HOME holding `v` (raw staging and quarantine blobs
/// excluded when `except_raw`).
fn holding(env: &Env, v: &str) -> Vec<String> {
    files(&env.abcd_home)
        .into_iter()
        .filter(|f| {
            let b = fs::read(f).unwrap();
            b.windows(v.len()).any(|w| w == v.as_bytes())
        })
        .map(|f| f.display().to_string())
        .collect()
}

/// Two sessions, three live records holding VALUE, one superseded body
/// holding it too; the search index built.
fn store() -> Env {
    let env = Env::new();
    let said = |s: &str| line(s, &format!("the ticket label is {VALUE}, keep it"));
    // S1: a first, shorter capture of the main thread (superseded later).
    let m1 = env.main_transcript(S1, &jsonl(&[&said(S1)]));
    env.hook("session-end", &env.end_payload(S1, &m1));
    env.drain();
    fs::write(&m1, jsonl(&[&said(S1), &line(S1, "and more")])).unwrap();
    env.hook("session-end", &env.end_payload(S1, &m1));
    let a = env.agent_transcript(S1, "a1", &jsonl(&[&said(S1)]), None);
    env.hook("subagent-stop", &env.subagent_payload(S1, "a1", &a));
    let m2 = env.main_transcript(S2, &jsonl(&[&said(S2), &line(S2, "other")]));
    env.hook("session-end", &env.end_payload(S2, &m2));
    env.drain();
    assert_eq!(env.records().len(), 3);
    let hits = env.json(&["history", "search", "battery"]);
    assert!(hits.to_string().contains("battery"), "{hits}");
    env
}

/// The value is in no byte under ABCD_HOME and the journal verifies clean.
fn assert_gone_and_clean(env: &Env, ctx: &str) {
    let left = holding(env, VALUE);
    assert!(left.is_empty(), "{ctx}: {left:?}");
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{ctx}: {}", stdout(&v));
}

fn snap(env: &Env) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut m = env.snapshot(&[
        "records",
        "staging",
        "quarantine",
        "sessions",
        "index",
        "bodies",
    ]);
    m.retain(|k, _| !k.starts_with("index/checkpoint") && !k.starts_with("index/search"));
    m
}

#[test]
fn a_value_in_three_records_of_two_sessions_is_forgotten_everywhere() {
    let env = store();
    let before = holding(&env, VALUE);
    assert!(before.len() >= 4, "records, bodies, summaries: {before:?}");

    // Without --yes: a report, nothing changed, the value never printed.
    let out = env.abcd(&["history", "forget", "--value", VALUE]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("would remove"), "{text}");
    assert!(text.contains("3 record(s)"), "{text}");
    assert!(!text.contains(VALUE) && !stderr(&out).contains(VALUE));
    assert_eq!(holding(&env, VALUE), before);

    let r = env.json(&["history", "forget", "--value", VALUE, "--yes"]);
    let r = &r[0];
    assert_eq!(r["records_rewritten"].as_array().unwrap().len(), 3, "{r}");
    // Three live bodies and the superseded one.
    assert_eq!(r["bodies"], 4, "{r}");
    assert!(r.to_string().find(VALUE).is_none());
    assert_eq!(holding(&env, VALUE), Vec::<String>::new());
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    // The search index was rebuilt without it.
    let hits = env.json(&["history", "search", "battery"]);
    assert!(!hits.to_string().contains("battery-staple"), "{hits}");
    assert!(holding(&env, VALUE).is_empty());

    // Replay reproduces every projection byte for byte.
    let before = snap(&env);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(before, snap(&env));

    // A later capture of the same conversation stays forgotten.
    let m2 = env.claude.join(format!("{S2}.jsonl"));
    let mut t = fs::read_to_string(&m2).unwrap();
    t.push_str(&line(S2, &format!("again: {VALUE}")));
    t.push('\n');
    fs::write(&m2, t).unwrap();
    env.hook("session-end", &env.end_payload(S2, &m2));
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 1, "{d}");
    assert_gone_and_clean(&env, "after");
}

#[test]
fn a_record_is_forgotten_whole_with_what_it_superseded() {
    let env = store();
    let r = env.json(&["history", "forget", "--record", S1, "--yes"]);
    let removed = r[0]["records_removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{r}");
    let left: Vec<String> = env
        .records()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_owned())
        .collect();
    // S1's main thread is gone (and its superseded first capture); its
    // sub-agent and S2 stay.
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(!env
        .records()
        .iter()
        .any(|r| r["session_id"] == S1 && r["agent_id"].is_null()));
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    let before = snap(&env);
    assert!(env
        .abcd(&["journal", "replay", "--rebuild"])
        .status
        .success());
    assert_eq!(before, snap(&env));
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let env = store();
    for (args, says) in [
        (vec!["history", "forget", "--yes"], "--value or --record"),
        (vec!["history", "forget", "--value", "", "--yes"], "empty"),
        (
            vec!["history", "forget", "--value", "hunter2", "--yes"],
            "--force-short",
        ),
        (
            vec!["history", "forget", "--record", "no-such-record", "--yes"],
            "no-such-record",
        ),
    ] {
        let out = env.abcd(&args);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let out = env.abcd(&[
        "history",
        "forget",
        "--value",
        "keep",
        "--force-short",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A damaged journal: refused with the verdict, nothing changed.
    let journal = env.lane().join("journal/journal");
    let mut b = fs::read(&journal).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x40;
    fs::write(&journal, &b).unwrap();
    let out = env.abcd(&["history", "forget", "--value", VALUE, "--yes"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("journal repair"), "{}", stderr(&out));
    assert!(!holding(&env, VALUE).is_empty());
}

#[test]
fn forget_and_drains_running_together_are_serialised() {
    let env = store();
    // Stage more transcripts holding the value, then forget while a drain runs.
    for i in 0..6 {
        let s = format!("f00000aa-0000-4000-8000-00000000000{i}");
        let m = env.main_transcript(&s, &jsonl(&[&line(&s, &format!("x {VALUE} y"))]));
        env.hook("session-end", &env.end_payload(&s, &m));
    }
    let drain = env
        .command(&env.repo)
        .args(["history", "drain"])
        .spawn()
        .unwrap();
    let out = env.abcd(&["history", "forget", "--value", VALUE, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    drain.wait_with_output().unwrap();
    // Whatever the drain captured before or after the forget holds no value.
    env.drain();
    assert_gone_and_clean(&env, "after");
}

/// SIGKILL at every file operation of a forget: afterwards the value is
/// either gone, or forget can simply be re-run; never a journaled forget
/// that `journal verify` calls clean while the value survives.
#[test]
fn a_forget_killed_at_any_write_is_finished_by_running_it_again() {
    let probe = store();
    let trace = probe.tmp.path().join("trace");
    let out = probe.abcd_env(
        &["history", "forget", "--value", VALUE, "--yes"],
        &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
    );
    assert!(out.status.success());
    let ops = fs::read_to_string(&trace).unwrap().lines().count();
    assert!(ops > 10, "{ops}");
    // Each kill point runs on a fresh copy of the same store.
    let base = store();
    let pristine = base.tmp.path().join("pristine");
    copy_tree(&base.abcd_home, &pristine);
    for n in 1..=ops {
        let ctx = format!("KILL at op #{n}");
        copy_tree(&pristine, &base.abcd_home);
        let env = &base;
        let out = env.abcd_env(
            &["history", "forget", "--value", VALUE, "--yes"],
            &[("ABCD_FAULT_INJECT", &format!("#{n}:KILL"))],
        );
        let killed = out.status.code().is_none();
        if !killed {
            continue;
        }
        let journaled = stdout(&env.abcd(&["journal", "dump"])).contains("forgotten");
        let verify = env.abcd(&["journal", "verify"]).status.code();
        let left = holding(env, VALUE);
        if journaled {
            // Acknowledged: either gone, or verify says the store is not clean.
            assert!(left.is_empty() || verify != Some(0), "{ctx}: {left:?}");
        }
        let out = env.abcd(&["history", "forget", "--value", VALUE, "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
        assert_gone_and_clean(env, &ctx);
    }
}

#[test]
fn all_repos_forgets_in_every_repository() {
    let env = store();
    let other = env.tmp.path().join("other");
    Env::init_repo(&other, &env.home, "second");
    let s = "f0000003-0000-4000-8000-000000000003";
    let m = env.main_transcript(s, &jsonl(&[&line(s, &format!("there too: {VALUE}"))]));
    let payload = serde_json::json!({
        "session_id": s, "cwd": other, "transcript_path": m, "hook_event_name": "SessionEnd",
    });
    let out = env.hook_in(&other, "session-end", &payload);
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    let d = env
        .command(&other)
        .args(["history", "drain"])
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", stderr(&d));
    assert!(holding(&env, VALUE).len() >= 5);
    let out = env.abcd(&[
        "history",
        "forget",
        "--value",
        VALUE,
        "--all-repos",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_gone_and_clean(&env, "all repos");
    // --record names one repository's record: refused with --all-repos.
    let out = env.abcd(&["history", "forget", "--record", S1, "--all-repos", "--yes"]);
    assert_ne!(out.status.code(), Some(0));
}
