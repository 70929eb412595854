//! End to end over the real public transcripts: a simulated Claude Code run
//! (SessionStart, prompts, several SubagentStop payloads including a nested
//! depth-2 agent and one whose worktree no longer exists, Stop, SessionEnd,
//! the next SessionStart).

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::json;

fn copy(src: &Path, dst: &Path) {
    fs::create_dir_all(dst.parent().unwrap()).unwrap();
    fs::copy(src, dst).unwrap();
}

#[test]
fn a_simulated_session_stores_every_thread_once_with_lineage() {
    let env = Env::new();
    let fx = fixtures();
    let cch =
        fx.join("cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit");
    let sid = "cc1df109-4282-4321-8248-8bbcd471da78";
    let main_src = cch.join(format!("{sid}.jsonl"));
    let main = env.claude.join(format!("{sid}.jsonl"));
    copy(&main_src, &main);
    let sub_dir = env.claude.join(sid).join("subagents");
    // Depth 1: the real cchistory sub-agent (no sidecar: unattributed).
    let a1 = sub_dir.join("agent-a0a2928875cb36a92.jsonl");
    copy(
        &cch.join(sid)
            .join("subagents/agent-a0a2928875cb36a92.jsonl"),
        &a1,
    );
    // Depth 1 with a real harness sidecar (rekal 2.1.197).
    let rk = fx.join("rekal-cli/cmd/rekal/cli/session/testdata/real/8d1a1f9e-b38c-41fa-952a-5288179b5626/subagents");
    let a2 = sub_dir.join("agent-a490235204f1c154d.jsonl");
    copy(&rk.join("agent-a490235204f1c154d.jsonl"), &a2);
    copy(
        &rk.join("agent-a490235204f1c154d.meta.json"),
        &sub_dir.join("agent-a490235204f1c154d.meta.json"),
    );
    // Depth 2 (nested), with a planted secret that must not survive.
    let secret = "sk-ant-api03-Zq8XbN4mW2vK7pR1tY6uE3oI9aS5dF0gH2jK4lL6zX8cV1bN3mQ5wE7rT9yU1iO3pA5sD7fG9hJ1kL3zX5cV7bN9mQ1wE3rTAA";
    let a3 = sub_dir.join("agent-nested02.jsonl");
    fs::write(&a3, jsonl(&[&json!({"type":"user","sessionId":sid,"agentId":"nested02","isSidechain":true,"message":{"role":"user","content":format!("use key {secret}")}}).to_string()])).unwrap();
    // Real sidecars name the spawning tool call, not the parent agent: the
    // drain finds the call in the parent's own transcript.
    fs::write(
        sub_dir.join("agent-nested02.meta.json"),
        r#"{"agentType":"general-purpose","spawnDepth":2,"toolUseId":"toolu_nested"}"#,
    )
    .unwrap();
    let spawn = json!({"type":"assistant","agentId":"a490235204f1c154d","isSidechain":true,"message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_nested","name":"Agent","input":{"subagent_type":"general-purpose","prompt":"nested"}}]}});
    let mut parent = fs::read_to_string(&a2).unwrap();
    parent.push_str(&format!("{spawn}\n"));
    fs::write(&a2, parent).unwrap();
    // A worktree agent whose cwd is gone by the time its hook runs.
    let a4 = sub_dir.join("agent-showcol1.jsonl");
    let sc = fx.join("claude-code-log/test/test_data/minimal_showcase/55550000-0000-4000-8000-000000000001/subagents");
    copy(&sc.join("agent-showcol1.jsonl"), &a4);
    copy(
        &sc.join("agent-showcol1.meta.json"),
        &sub_dir.join("agent-showcol1.meta.json"),
    );

    let ok = |o: std::process::Output| {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        hook_json(&o)
    };
    ok(env.hook("session-start", &env.start_payload(sid)));
    ok(env.hook(
        "user-prompt-submit",
        &json!({"session_id": sid, "cwd": env.repo, "prompt": "explore"}),
    ));
    for (agent, path) in [
        ("a0a2928875cb36a92", &a1),
        ("a490235204f1c154d", &a2),
        ("nested02", &a3),
    ] {
        let r = ok(env.hook("subagent-stop", &env.subagent_payload(sid, agent, path)));
        assert_eq!(r["outcome"], "staged", "{agent}: {r}");
    }
    let mut p = env.subagent_payload(sid, "showcol1", &a4);
    p["cwd"] = json!(env.tmp.path().join("worktrees/gone"));
    let r = ok(env.hook("subagent-stop", &p));
    assert_eq!(r["resolved_via"], "session");
    ok(env.hook(
        "user-prompt-submit",
        &json!({"session_id": sid, "cwd": env.repo, "prompt": "more"}),
    ));
    ok(env.hook("stop", &env.end_payload(sid, &main)));
    ok(env.hook("session-end", &env.end_payload(sid, &main)));
    ok(env.hook("session-start", &env.start_payload("next-session-id")));

    let list = env.json(&["history", "list", "--session", sid]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 5, "{list:?}");
    assert!(list[0].get("agent_id").is_none());
    let by_agent = |a: &str| {
        list.iter()
            .find(|r| r["agent_id"] == a)
            .unwrap_or_else(|| panic!("{a} stored"))
            .clone()
    };
    assert_eq!(
        by_agent("a0a2928875cb36a92")["spawn_attribution"],
        "unattributed"
    );
    let rk = by_agent("a490235204f1c154d");
    assert_eq!(rk["spawn_attribution"], "sidecar");
    assert_eq!(rk["spawn_depth"], 1);
    let nested = by_agent("nested02");
    assert_eq!(nested["spawn_depth"], 2);
    assert_eq!(nested["parent_agent_id"], "a490235204f1c154d");
    by_agent("showcol1");
    // Stored once each.
    assert_eq!(env.records().len(), 5);
    assert!(env.staged()["staged"].as_array().unwrap().is_empty());
    // No planted secret on disk outside staging (which is now empty anyway).
    let snap = env.snapshot(&["records", "index", "sessions", "journal", "quarantine"]);
    for (path, bytes) in &snap {
        assert!(
            !bytes.windows(40).any(|w| w == &secret.as_bytes()[..40]),
            "secret in {path}"
        );
    }
    let v = env.abcd(&["--json", "journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    // Every real fixture record keeps valid JSON lines.
    let shown = env.json(&["history", "show", sid]);
    for l in shown["body"].as_str().unwrap().lines() {
        serde_json::from_str::<serde_json::Value>(l)
            .unwrap_or_else(|e| panic!("invalid JSON line after redaction: {e}: {l}"));
    }
}
