//! Records: idempotency, supersession, lineage in frontmatter, read
//! resolution (seed spec ac-3, ac-5 and the record tests it names).

mod common;

use std::fs;

use common::*;

const SID: &str = "cccccccc-dddd-4eee-8fff-000000000000";

fn capture(env: &Env, file: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["history", "capture", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.json(&args)
}

#[test]
fn subagent_capture_is_idempotent_on_source_sha() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "idem", &jsonl(&[&line(SID, "same")]), None);
    let a = capture(&env, &p, &["--session", SID, "--agent", "idem"]);
    let b = capture(&env, &p, &["--session", SID, "--agent", "idem"]);
    assert_eq!(a["wrote"], true);
    assert_eq!(b["wrote"], false);
    assert_eq!(a["record"], b["record"]);
    assert_eq!(env.records().len(), 1);
}

#[test]
fn two_subagents_with_identical_bytes_both_store() {
    let env = Env::new();
    let body = jsonl(&[&line(SID, "identical")]);
    let p1 = env.agent_transcript(SID, "twin1", &body, None);
    let p2 = env.agent_transcript(SID, "twin2", &body, None);
    env.hook("subagent-stop", &env.subagent_payload(SID, "twin1", &p1));
    env.hook("subagent-stop", &env.subagent_payload(SID, "twin2", &p2));
    env.drain();
    assert_eq!(env.records().len(), 2);
}

#[test]
fn a_second_stop_supersedes_the_first_record() {
    let env = Env::new();
    let p = env.main_transcript(SID, &jsonl(&[&line(SID, "first")]));
    env.hook("stop", &env.end_payload(SID, &p));
    env.drain();
    let first = env.records()[0]["file"].as_str().unwrap().to_owned();
    fs::write(&p, jsonl(&[&line(SID, "first"), &line(SID, "follow-up")])).unwrap();
    env.hook("stop", &env.end_payload(SID, &p));
    let d = env.drain();
    assert_eq!(d["captured"][0]["superseded"][0], first.as_str(), "{d}");
    let recs = env.records();
    assert_eq!(recs.len(), 1, "one live record");
    assert_ne!(recs[0]["file"], first.as_str());
    assert!(
        !env.lane().join("records").join(&first).exists(),
        "old file gone"
    );
}

#[test]
fn a_shorter_rearrival_does_not_write_a_second_record() {
    let env = Env::new();
    let long = env.tmp.path().join("long.jsonl");
    let short = env.tmp.path().join("short.jsonl");
    fs::write(&long, jsonl(&[&line(SID, "a"), &line(SID, "b")])).unwrap();
    fs::write(&short, jsonl(&[&line(SID, "a")])).unwrap();
    assert_eq!(capture(&env, &long, &["--session", SID])["wrote"], true);
    let r = capture(&env, &short, &["--session", SID]);
    assert_eq!(r["wrote"], false);
    assert_eq!(env.records().len(), 1);
}

#[test]
fn divergent_transcripts_for_one_agent_both_store() {
    let env = Env::new();
    let a = env.tmp.path().join("a.jsonl");
    let b = env.tmp.path().join("b.jsonl");
    fs::write(&a, jsonl(&[&line(SID, "left")])).unwrap();
    fs::write(&b, jsonl(&[&line(SID, "right")])).unwrap();
    capture(&env, &a, &["--session", SID, "--agent", "dv"]);
    capture(&env, &b, &["--session", SID, "--agent", "dv"]);
    assert_eq!(env.records().len(), 2);
}

#[test]
fn list_for_session_returns_main_thread_and_every_subagent() {
    let env = Env::new();
    for a in ["s1", "s2", "s3"] {
        let p = env.agent_transcript(SID, a, &jsonl(&[&line(SID, a)]), None);
        env.hook("subagent-stop", &env.subagent_payload(SID, a, &p));
    }
    let m = env.main_transcript(SID, &jsonl(&[&line(SID, "main")]));
    env.hook("session-end", &env.end_payload(SID, &m));
    // A record of another session must not appear.
    let o = env.main_transcript("other-session", &jsonl(&[&line("other-session", "o")]));
    env.hook("session-end", &env.end_payload("other-session", &o));
    env.drain();
    let list = env.json(&["history", "list", "--session", SID]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 4);
    assert!(list[0].get("agent_id").is_none(), "main thread first");
    for r in &list[1..] {
        assert_eq!(r["agent_type"], "Explore");
        assert_eq!(r["session_id"], SID);
    }
    let text = stdout(&env.abcd(&["history", "list", "--session", SID]));
    assert!(text.contains("4 record(s) for session"));
    // show lists the siblings under the rendered record.
    let shown = env.json(&["history", "show", SID]);
    assert_eq!(shown["session_records"].as_array().unwrap().len(), 3);
}

#[test]
fn read_resolves_filename_then_agent_then_session() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "ag1", &jsonl(&[&line(SID, "agent body")]), None);
    env.hook("subagent-stop", &env.subagent_payload(SID, "ag1", &p));
    let m = env.main_transcript(SID, &jsonl(&[&line(SID, "main body")]));
    env.hook("session-end", &env.end_payload(SID, &m));
    env.drain();
    let by_session = env.json(&["history", "show", SID]);
    assert!(
        by_session.get("agent_id").is_none(),
        "session id prefers the main thread"
    );
    let by_agent = env.json(&["history", "show", "ag1"]);
    assert_eq!(by_agent["agent_id"], "ag1");
    let file = by_agent["file"].as_str().unwrap().to_owned();
    let by_file = env.json(&["history", "show", &file]);
    assert_eq!(by_file["file"], file.as_str());
    let out = env.abcd(&["history", "show", "nope"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no record for"));
}

#[test]
fn subagent_record_filename_names_the_agent() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "named", &jsonl(&[&line(SID, "x")]), None);
    let r = capture(&env, &p, &["--session", SID, "--agent", "named"]);
    let name = r["record"].as_str().unwrap();
    assert!(name.ends_with(&format!("-{SID}-agent-named.md")), "{name}");
    assert_eq!(name.len(), 26 + 1 + SID.len() + "-agent-named.md".len());
}

#[test]
fn lineage_fields_are_redacted_with_the_body() {
    let env = Env::new();
    let secret = "ghp_R8m2kQ4vX9tLw3ZpN7cB1yH6sD0fJ5aE2gU4";
    let p = env.agent_transcript(
        SID,
        "red",
        &jsonl(&[&line(SID, &format!("token {secret}"))]),
        None,
    );
    let r = capture(
        &env,
        &p,
        &[
            "--session",
            SID,
            "--agent",
            "red",
            "--agent-type",
            &format!("Explore {secret}"),
        ],
    );
    assert_eq!(r["wrote"], true);
    let shown = env.json(&["history", "show", "red"]);
    let text = fs::read_to_string(shown["path"].as_str().unwrap()).unwrap();
    assert!(!text.contains(secret), "secret left in the record: {text}");
    assert!(shown["redacted_secrets"].as_u64().unwrap() >= 2, "{shown}");
    assert!(!shown["agent_type"].as_str().unwrap().contains(secret));
}

#[test]
fn capture_rejects_a_malformed_lineage_scalar() {
    let env = Env::new();
    let p = env.tmp.path().join("x.jsonl");
    fs::write(&p, jsonl(&[&line(SID, "x")])).unwrap();
    let out = env.abcd(&[
        "history",
        "capture",
        p.to_str().unwrap(),
        "--session",
        SID,
        "--agent",
        "ok",
        "--agent-type",
        "two\nlines",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(env.records().is_empty());
    let out = env.abcd(&[
        "history",
        "capture",
        p.to_str().unwrap(),
        "--session",
        "bad/session",
    ]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn nothing_secret_reaches_the_journal_or_records() {
    let env = Env::new();
    let secret = "AKIAQ3EGRTYB7NZXMP4K";
    let p = env.agent_transcript(
        SID,
        "j",
        &jsonl(&[&line(SID, &format!("aws {secret}"))]),
        None,
    );
    env.hook("subagent-stop", &env.subagent_payload(SID, "j", &p));
    env.drain();
    let journal = fs::read(env.lane().join("journal").join("journal")).unwrap();
    assert!(
        !journal
            .windows(secret.len())
            .any(|w| w == secret.as_bytes()),
        "raw text in the journal"
    );
    for (path, bytes) in env.snapshot(&["records", "index", "sessions", "staging"]) {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{path}"
        );
    }
}
