//! Every projection is a pure function of the journal: replaying into empty
//! directories reproduces it byte for byte.

mod common;

use std::fs;

use common::*;

#[test]
fn rebuild_reproduces_every_projection_byte_for_byte() {
    let env = Env::new();
    let sid = "77777777-8888-4999-8aaa-bbbbbbbbbbbb";
    // A bit of everything: stage, restage, capture, supersede, quarantine,
    // session notes, gap marker, discard.
    let m = env.main_transcript(sid, &jsonl(&[&line(sid, "one")]));
    env.hook("stop", &env.end_payload(sid, &m));
    env.drain();
    fs::write(&m, jsonl(&[&line(sid, "one"), &line(sid, "two")])).unwrap();
    env.hook("stop", &env.end_payload(sid, &m));
    for a in ["r1", "r2"] {
        let p = env.agent_transcript(
            sid,
            a,
            &jsonl(&[&line(sid, a)]),
            Some(r#"{"agentType":"Explore","spawnDepth":1,"toolUseId":"toolu_x"}"#),
        );
        env.hook("subagent-stop", &env.subagent_payload(sid, a, &p));
    }
    env.drain();
    let bad = env.agent_transcript(sid, "bad", "", None);
    // Transcript-shaped (its first line), then a byte that is not UTF-8:
    // staged, then quarantined by the drain.
    fs::write(&bad, b"{\"type\":\"user\"}\n\xff\n").unwrap();
    env.hook("subagent-stop", &env.subagent_payload(sid, "bad", &bad));
    env.abcd(&["history", "drain"]);
    let keep = env.agent_transcript(sid, "keep", &jsonl(&[&line(sid, "staged only")]), None);
    env.hook("subagent-stop", &env.subagent_payload(sid, "keep", &keep));
    env.hook(
        "subagent-stop",
        &serde_json::json!({"session_id": sid, "cwd": env.repo, "agent_id": "g"}),
    );

    let dirs = ["records", "staging", "quarantine", "sessions", "index"];
    // Checkpoints are positions, not projections: they legitimately differ.
    let snap = |env: &Env| {
        let mut m = env.snapshot(&dirs);
        m.retain(|k, _| !k.starts_with("index/checkpoint"));
        m
    };
    let before = snap(&env);
    let gap_before = fs::read(env.lane().join("subagent-payload-gap.json")).unwrap();
    assert!(before.keys().any(|k| k.starts_with("records/")));
    assert!(before.keys().any(|k| k.starts_with("quarantine/")));
    assert!(before.keys().any(|k| k.ends_with(".stage.json")));
    // One summary file for the session, one line per live record (the
    // superseded main thread's is gone with it).
    let summaries: Vec<_> = before
        .iter()
        .filter(|(k, _)| k.starts_with("index/summary/"))
        .collect();
    assert_eq!(summaries.len(), 1, "{:?}", before.keys());
    let records = before.keys().filter(|k| k.starts_with("records/")).count();
    assert_eq!(
        String::from_utf8_lossy(summaries[0].1).lines().count(),
        records
    );

    let out = env.abcd(&["--json", "journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = snap(&env);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (k, v) in &before {
        assert_eq!(v, &after[k], "{k} differs after rebuild");
    }
    assert_eq!(
        gap_before,
        fs::read(env.lane().join("subagent-payload-gap.json")).unwrap()
    );

    // Deleting the projections entirely and replaying also restores them.
    fs::remove_dir_all(env.lane().join("records")).unwrap();
    fs::create_dir(env.lane().join("records")).unwrap();
    fs::remove_dir_all(env.lane().join("index")).unwrap();
    fs::create_dir(env.lane().join("index")).unwrap();
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = snap(&env);
    for (k, v) in &before {
        assert_eq!(
            Some(v),
            again.get(k),
            "{k} differs after a rebuild from nothing"
        );
    }
}

#[test]
fn opening_catches_up_from_the_checkpoint() {
    let env = Env::new();
    let sid = "cafe0000-0000-4000-8000-000000000001";
    let m = env.main_transcript(sid, &jsonl(&[&line(sid, "x")]));
    env.hook("session-end", &env.end_payload(sid, &m));
    env.drain();
    // Losing the checkpoint is harmless: the next open re-applies.
    let cp = env.lane().join("index").join("checkpoint.json");
    assert!(cp.is_file());
    let before = env.snapshot(&["records"]);
    fs::remove_file(&cp).unwrap();
    assert_eq!(env.records().len(), 1);
    assert_eq!(before, env.snapshot(&["records"]));
    assert!(cp.is_file());
}

#[test]
fn after_a_power_loss_unsynced_projection_writes_are_reapplied() {
    let env = Env::new();
    let sid = "b0075000-0000-4000-8000-000000000002";
    let m = env.main_transcript(sid, &jsonl(&[&line(sid, "synced")]));
    env.hook("session-end", &env.end_payload(sid, &m));
    env.drain(); // a drain syncs its projections
    let synced = env.lane().join("index").join("checkpoint.synced.json");
    assert!(synced.is_file());
    // A manual capture writes its record without syncing.
    let p = env.tmp.path().join("later.jsonl");
    fs::write(&p, jsonl(&[&line(sid, "not yet synced")])).unwrap();
    let r = env.json(&["history", "capture", p.to_str().unwrap()]);
    let record = env
        .lane()
        .join("records")
        .join(r["record"].as_str().unwrap());
    let bytes = fs::read(&record).unwrap();
    // Simulate the power loss: the record write is gone and the latest
    // checkpoint belongs to a boot that ended.
    fs::remove_file(&record).unwrap();
    let cp = env.lane().join("index").join("checkpoint.json");
    let mut c: serde_json::Value = serde_json::from_slice(&fs::read(&cp).unwrap()).unwrap();
    c["boot_id"] = serde_json::json!("a-previous-boot");
    fs::write(&cp, c.to_string()).unwrap();
    assert_eq!(
        env.records().len(),
        2,
        "the lost record is re-applied from the journal"
    );
    assert_eq!(fs::read(&record).unwrap(), bytes);
}

#[test]
fn a_store_without_summaries_gets_them_on_its_next_open() {
    let env = Env::new();
    let sid = "cafe0000-0000-4000-8000-000000000002";
    let m = env.main_transcript(sid, &jsonl(&[&line(sid, "first prompt")]));
    env.hook("session-end", &env.end_payload(sid, &m));
    let p = env.agent_transcript(sid, "a1", &jsonl(&[&line(sid, "agent")]), None);
    env.hook("subagent-stop", &env.subagent_payload(sid, "a1", &p));
    env.drain();
    let before = env.snapshot(&["index/summary"]);
    assert_eq!(before.len(), 1, "{:?}", before.keys());
    // As the layout before summaries left it: no summary table, format 2.
    fs::remove_dir_all(env.lane().join("index/summary")).unwrap();
    for name in ["checkpoint.json", "checkpoint.synced.json"] {
        let p = env.lane().join("index").join(name);
        let Ok(b) = fs::read(&p) else { continue };
        let mut c: serde_json::Value = serde_json::from_slice(&b).unwrap();
        c["format"] = serde_json::json!(2);
        fs::write(&p, c.to_string()).unwrap();
    }
    let r = env.json(&["journal", "replay"]);
    assert_eq!(r["rebuilt"], false, "an upgrade, not a rebuild: {r}");
    assert_eq!(env.snapshot(&["index/summary"]), before);
    let o = stdout(&env.abcd(&["history", "list"]));
    assert!(o.contains("first prompt"), "{o}");
}

#[test]
fn a_store_without_token_tables_gets_them_on_its_next_open() {
    let env = Env::new();
    let sid = "cafe0000-0000-4000-8000-000000000003";
    let m = env.main_transcript(sid, &jsonl(&[&line(sid, "first prompt")]));
    env.hook("session-end", &env.end_payload(sid, &m));
    env.drain();
    let before = env.snapshot(&["index/summary", "index/tokens"]);
    assert_eq!(before.len(), 2, "{:?}", before.keys());
    let stats = env.json(&["history", "stats"]);
    // As the layout before token tables left it: no token table, format 3.
    fs::remove_dir_all(env.lane().join("index/tokens")).unwrap();
    for name in ["checkpoint.json", "checkpoint.synced.json"] {
        let p = env.lane().join("index").join(name);
        let Ok(b) = fs::read(&p) else { continue };
        let mut c: serde_json::Value = serde_json::from_slice(&b).unwrap();
        c["format"] = serde_json::json!(3);
        fs::write(&p, c.to_string()).unwrap();
    }
    let r = env.json(&["journal", "replay"]);
    assert_eq!(r["rebuilt"], false, "an upgrade, not a rebuild: {r}");
    assert_eq!(env.snapshot(&["index/summary", "index/tokens"]), before);
    assert_eq!(env.json(&["history", "stats"]), stats);
}
