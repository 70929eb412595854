//! Drain order, budget, source re-read, quarantine and the staged lifetime
//! (seed spec ac-4, ac-5 and the drain tests it names).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;

const SID: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

fn stage_agent(env: &Env, agent: &str, body: &str) -> std::path::PathBuf {
    let p = env.agent_transcript(SID, agent, body, None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, agent, &p));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    p
}

fn stage_main(env: &Env, session: &str, body: &str) -> std::path::PathBuf {
    let p = env.main_transcript(session, body);
    let out = env.hook("session-end", &env.end_payload(session, &p));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    p
}

#[test]
fn drain_takes_main_thread_first() {
    let env = Env::new();
    stage_agent(&env, "sub1", &jsonl(&[&line(SID, "a")]));
    stage_main(&env, SID, &jsonl(&[&line(SID, "main")]));
    let out = env.hook(
        "user-prompt-submit",
        &serde_json::json!({"session_id": SID, "cwd": env.repo}),
    );
    assert_eq!(hook_json(&out)["drain"]["captured"], 1);
    let recs = env.records();
    assert_eq!(recs.len(), 1);
    assert!(
        recs[0].get("agent_id").is_none(),
        "the spine first: {recs:?}"
    );
}

#[test]
fn drain_takes_overdue_entries_first_and_never_deletes_by_age() {
    let env = Env::new();
    // Staged "eight days ago".
    let p = env.agent_transcript(SID, "old", &jsonl(&[&line(SID, "old")]), None);
    let out = env.hook_env(
        "subagent-stop",
        &env.subagent_payload(SID, "old", &p),
        &[("ABCD_TEST_NOW", "2020-01-01T00:00:00Z")],
    );
    assert_eq!(hook_json(&out)["outcome"], "staged");
    stage_main(&env, SID, &jsonl(&[&line(SID, "fresh main")]));
    let staged = env.staged();
    let old = staged["staged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["agent_id"] == "old")
        .unwrap()
        .clone();
    assert_eq!(old["overdue"], true);
    let text = stdout(&env.abcd(&["history", "staged"]));
    assert!(text.contains("OVERDUE"), "{text}");
    // Age deletes nothing: it is still there after listing and opening.
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), 2);
    let out = env.hook(
        "user-prompt-submit",
        &serde_json::json!({"session_id": SID, "cwd": env.repo}),
    );
    assert_eq!(hook_json(&out)["drain"]["overdue"], 1);
    let recs = env.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["agent_id"], "old", "overdue before the main thread");
}

#[test]
fn drain_byte_budget_bounds_the_pass_and_always_makes_progress() {
    let env = Env::new();
    // One entry bigger than the prompt budget (512 KiB) still drains.
    let big = "x".repeat(600 << 10);
    stage_agent(&env, "big", &jsonl(&[&line(SID, &big)]));
    stage_agent(&env, "small", &jsonl(&[&line(SID, "s")]));
    let prompt = serde_json::json!({"session_id": SID, "cwd": env.repo});
    let r = hook_json(&env.hook("user-prompt-submit", &prompt));
    assert_eq!(r["drain"]["captured"], 1, "{r}");
    assert_eq!(r["drain"]["remaining"], 1);
    let r = hook_json(&env.hook("session-start", &env.start_payload("s2")));
    assert_eq!(
        r["drain"]["captured"], 1,
        "the next pass takes the rest: {r}"
    );
    assert_eq!(env.records().len(), 2);
}

#[test]
fn drain_budget_leaves_remainder_loudly() {
    let env = Env::new();
    for i in 0..40 {
        stage_agent(
            &env,
            &format!("m{i:02}"),
            &jsonl(&[&line(SID, &format!("{i}"))]),
        );
    }
    let out = env.hook("session-start", &env.start_payload("next"));
    let r = hook_json(&out);
    assert_eq!(r["drain"]["captured"], 32);
    assert_eq!(r["drain"]["remaining"], 8);
    assert!(
        stderr(&out).contains("8 earlier transcript(s) are still awaiting capture"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn drain_rereads_a_longer_source_and_ignores_a_divergent_one() {
    let env = Env::new();
    let first = jsonl(&[&line(SID, "one")]);
    let p = stage_agent(&env, "grow", &first);
    fs::write(&p, format!("{first}{}\n", line(SID, "two"))).unwrap();
    let p2 = stage_agent(&env, "div", &first);
    fs::write(&p2, jsonl(&[&line(SID, "something else entirely")])).unwrap();
    let d = env.drain();
    assert_eq!(d["extended"], 1, "{d}");
    let grow = env.json(&["history", "show", "grow"]);
    assert!(grow["body"].as_str().unwrap().contains("two"));
    let div = env.json(&["history", "show", "div"]);
    assert!(div["body"].as_str().unwrap().contains("one"));
    assert!(!div["body"].as_str().unwrap().contains("else entirely"));
}

#[test]
fn drain_carries_sidecar_lineage_into_the_record() {
    let env = Env::new();
    let meta =
        r#"{"agentType":"Plan","spawnDepth":2,"toolUseId":"toolu_9","parentAgentId":"parentA"}"#;
    let p = env.agent_transcript(SID, "kid", &jsonl(&[&line(SID, "nested")]), Some(meta));
    env.hook("subagent-stop", &env.subagent_payload(SID, "kid", &p));
    env.drain();
    let r = env.json(&["history", "show", "kid"]);
    assert_eq!(r["spawn_depth"], 2);
    assert_eq!(r["spawn_tool_use_id"], "toolu_9");
    assert_eq!(r["spawn_attribution"], "sidecar");
    assert_eq!(r["lineage_source"], "hook");
    // The record file itself carries the fields in its frontmatter.
    let text = fs::read_to_string(r["path"].as_str().unwrap()).unwrap();
    assert!(text.starts_with("---\nschema: 2\n"), "{text}");
    assert!(text.contains("\nagent_id: kid\n"));
    assert!(text.contains("\nspawn_depth: 2\n"));
    assert_eq!(
        fs::metadata(r["path"].as_str().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}

#[test]
fn a_degraded_scanner_refuses_and_the_entry_stays_staged_and_retryable() {
    let env = Env::new();
    stage_agent(&env, "deg", &jsonl(&[&line(SID, "text")]));
    let cfg = env.repo.join(".abcd");
    fs::create_dir_all(&cfg).unwrap();
    // Every plausible config file name, each invalid.
    for name in [
        "redact.toml",
        "redact.json",
        "redact.yaml",
        "redact.yml",
        "redact.conf",
    ] {
        fs::write(cfg.join(name), "this is [not valid {{{ in any format (((\n").unwrap();
    }
    let out = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed drain says so: {}",
        stdout(&out)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["failed"][0]["permanent"], false, "{d}");
    assert!(env.records().is_empty());
    assert_eq!(
        env.staged()["staged"].as_array().unwrap().len(),
        1,
        "still staged"
    );
    for name in [
        "redact.toml",
        "redact.json",
        "redact.yaml",
        "redact.yml",
        "redact.conf",
    ] {
        fs::remove_file(cfg.join(name)).unwrap();
    }
    let d = env.drain();
    assert_eq!(
        d["captured"].as_array().unwrap().len(),
        1,
        "retried and stored once the config is fixed"
    );
}

#[test]
fn a_deterministic_refusal_is_quarantined_not_retried_forever() {
    let env = Env::new();
    // Bytes that are not UTF-8 can never be redacted into a record.
    let p = env.agent_transcript(SID, "bad", "", None);
    fs::write(&p, b"{\"type\":\"user\",\"x\":\"\xff\xfe\"}\n").unwrap();
    env.hook("subagent-stop", &env.subagent_payload(SID, "bad", &p));
    let out = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(out.status.code(), Some(1));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["failed"][0]["permanent"], true);
    assert_eq!(d["failed"][0]["quarantined"], true);
    let s = env.staged();
    assert!(s["staged"].as_array().unwrap().is_empty());
    let q = &s["quarantined"][0];
    assert!(q["reason"].as_str().unwrap().contains("UTF-8"));
    // Owner-only modes on everything in quarantine.
    for e in fs::read_dir(env.lane().join("quarantine")).unwrap() {
        let m = e.unwrap().metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600);
    }
    let d = env.drain();
    assert!(
        d["failed"].as_array().unwrap().is_empty(),
        "never retried: {d}"
    );
    // Discard is the only remover.
    let name = format!("{}.raw", q["stem"].as_str().unwrap());
    let out = env.abcd(&["history", "discard", &name]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("--yes"));
    let out = env.abcd(&["history", "discard", &name, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fs::read_dir(env.lane().join("quarantine")).unwrap().count(),
        0
    );
}

#[test]
fn discard_refuses_anything_but_a_bare_staged_filename() {
    let env = Env::new();
    stage_agent(&env, "keep", &jsonl(&[&line(SID, "k")]));
    for bad in [
        "../x.raw",
        "x.md",
        ".hidden.raw",
        "",
        "a/b.raw",
        "missing.raw",
    ] {
        let out = env.abcd(&["history", "discard", bad, "--yes"]);
        assert_ne!(out.status.code(), Some(0), "{bad:?}");
    }
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), 1);
    let stem = env.staged()["staged"][0]["stem"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = env.json(&["history", "discard", &format!("{stem}.raw"), "--yes"]);
    assert_eq!(
        out["removed"].as_array().unwrap().len(),
        3,
        "blob, metadata blob and sidecar"
    );
    assert!(env.staged()["staged"].as_array().unwrap().is_empty());
}

#[test]
fn a_corrupt_sidecar_is_reported_never_drained_or_replaced() {
    let env = Env::new();
    let p = stage_agent(&env, "cs", &jsonl(&[&line(SID, "v1")]));
    let stem = env.staged()["staged"][0]["stem"]
        .as_str()
        .unwrap()
        .to_owned();
    let sc = env
        .lane()
        .join("staging")
        .join(format!("{stem}.stage.json"));
    fs::write(&sc, b"{broken").unwrap();
    let staged = env.staged();
    assert!(staged["staged"][0]["error"]
        .as_str()
        .unwrap()
        .contains("corrupt sidecar"));
    let d = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(d.status.code(), Some(1));
    assert!(env.records().is_empty());
    fs::write(&p, jsonl(&[&line(SID, "v1"), &line(SID, "v2")])).unwrap();
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "cs", &p));
    assert_eq!(hook_json(&out)["outcome"], "not-captured", "never replaced");
    assert!(stderr(&out).contains("corrupt sidecar"));
    assert_eq!(fs::read(&sc).unwrap(), b"{broken");
    // The journal still knows the truth: a rebuild restores the view.
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(env.staged()["staged"][0].get("error").is_none());
}

#[test]
fn legacy_staged_file_without_sidecar_still_drains() {
    let env = Env::new();
    env.abcd(&["history", "staged"]); // creates the store
    let staging = env.lane().join("staging");
    fs::create_dir_all(&staging).unwrap();
    let legacy = staging.join("20260101T000000.000000000Z-legacy-session.raw");
    fs::write(&legacy, jsonl(&[&line("legacy-session", "old binary")])).unwrap();
    let out = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("adopted the staged file 20260101T000000.000000000Z-legacy-session.raw"),
        "{}",
        stderr(&out)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["captured"].as_array().unwrap().len(), 1, "{d}");
    let r = env.json(&["history", "show", "legacy-session"]);
    assert!(r.get("agent_id").is_none(), "drains as the main thread");
}

#[test]
fn a_blob_lost_to_a_power_failure_is_recovered_from_the_source() {
    let env = Env::new();
    let body = jsonl(&[&line(SID, "first"), &line(SID, "second")]);
    let p = stage_agent(&env, "lost", &body);
    let stem = env.staged()["staged"][0]["stem"]
        .as_str()
        .unwrap()
        .to_owned();
    let blob = env.lane().join("staging").join(format!("{stem}.raw"));
    // What a power loss before writeback can leave: an empty blob.
    fs::write(&blob, b"").unwrap();
    // The harness has since appended to its transcript.
    fs::write(&p, format!("{body}{}\n", line(SID, "third"))).unwrap();
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 1, "{d}");
    let r = env.json(&["history", "show", "lost"]);
    let text = r["body"].as_str().unwrap();
    assert!(
        text.contains("first") && text.contains("second") && text.contains("third"),
        "{text}"
    );
    // A source that no longer starts with the journaled bytes is not used.
    let p2 = stage_agent(&env, "gone", &jsonl(&[&line(SID, "original")]));
    let stem2 = env.staged()["staged"][0]["stem"]
        .as_str()
        .unwrap()
        .to_owned();
    fs::remove_file(env.lane().join("staging").join(format!("{stem2}.raw"))).unwrap();
    fs::write(&p2, jsonl(&[&line(SID, "a different transcript")])).unwrap();
    let out = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("source no longer holds it"),
        "{}",
        stdout(&out)
    );
}
