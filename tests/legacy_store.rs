//! A lane written by the predecessor (records and staged files, no journal)
//! is adopted on first open: nothing is lost, lineage is kept, and files the
//! journal cannot reproduce are set aside, never deleted.

mod common;

use std::fs;

use common::*;

#[test]
fn a_predecessor_lane_is_adopted_on_first_open() {
    let env = Env::new();
    let lane = env.lane();
    for d in ["records", "staging"] {
        fs::create_dir_all(lane.join(d)).unwrap();
    }
    let sha = env.root_sha();
    let old_record = format!(
        "---\nschema: 1\nsession_id: old-session\nroot_commit: {sha}\ncaptured_at: 2026-09-09T06:24:22.051Z\nsource_kind: native\nsource_sha256: {}\nredacted_secrets: 2\nredacted_home_paths: 1\n---\n{{\"type\":\"user\"}}\n",
        "e".repeat(64)
    );
    fs::write(
        lane.join("records/20260909T062422.051000000Z-old-session.md"),
        &old_record,
    )
    .unwrap();
    fs::write(lane.join("records/notes.md"), "not a record at all\n").unwrap();
    let stem = "20260910T000000.000000000Z-agentold";
    fs::write(
        lane.join(format!("staging/{stem}.raw")),
        jsonl(&[&line("sess-old", "staged by the old binary")]),
    )
    .unwrap();
    fs::write(
        lane.join(format!("staging/{stem}.stage.json")),
        r#"{"schema":1,"session_id":"sess-old","agent_id":"agentold","agent_type":"Plan","spawn_depth":1,"spawn_tool_use_id":"toolu_old","lineage_source":"hook","spawn_attribution":"sidecar","source_path":"/nowhere/agent-agentold.jsonl","staged_at":"2026-09-10T00:00:00Z"}"#,
    )
    .unwrap();

    let out = env.abcd(&["--json", "history", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["session_id"], "old-session");
    assert_eq!(list[0]["redacted_secrets"], 2);
    assert!(stderr(&out).contains("adopted"), "{}", stderr(&out));
    // The file that is not a record is kept aside, not deleted.
    let kept = lane.join("records.unjournaled/notes.md");
    assert_eq!(fs::read_to_string(kept).unwrap(), "not a record at all\n");

    let staged = env.staged();
    let e = &staged["staged"][0];
    assert_eq!(e["agent_id"], "agentold");
    assert!(e.get("error").is_none(), "{e}");
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 1, "{d}");
    let r = env.json(&["history", "show", "agentold"]);
    assert_eq!(r["spawn_tool_use_id"], "toolu_old");
    assert_eq!(r["spawn_depth"], 1);
    assert_eq!(r["agent_type"], "Plan");
    // The journal is now the source of truth: a rebuild keeps both records.
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(env.records().len(), 2);
}
