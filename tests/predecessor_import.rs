//! Import of a store the predecessor (the Go `abcd`) left, in each of its
//! two layouts, on the first open, through the real binary: records,
//! staged entries (with their lineage — including the sidecars its own
//! move left behind), quarantined entries with their notes, session notes;
//! nothing of the old store deleted or changed; `history migrate` offered
//! for the composite ids; a replay reproduces the records; a SIGKILL in the
//! middle of the import is finished by the next open.

mod common;
#[path = "common/predecessor.rs"]
mod predecessor;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::*;
use predecessor::{session_uuid, COMPOSITES, SESSIONS};

const STAMP_A: &str = "20260820T090000.000000000Z";
const STAMP_B: &str = "20260820T090001.000000000Z";
const STAMP_C: &str = "20260820T090002.000000000Z";
const STAMP_D: &str = "20260820T090003.000000000Z";
const STAMP_Q: &str = "20260819T080000.000000000Z";

/// Every file under `dir` (relative path → bytes).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(d: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(&p, base, out);
            } else {
                out.insert(
                    p.strip_prefix(base).unwrap().display().to_string(),
                    fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn records(lane: &Path) -> BTreeMap<String, Vec<u8>> {
    tree(&lane.join("records"))
        .into_iter()
        .filter(|(n, _)| n.ends_with(".md") && !n.starts_with('.'))
        .collect()
}

/// The staged and quarantined files every layout gets: a sub-agent with
/// its sidecar, a main thread without one (the oldest binaries), a
/// sub-agent without one whose transcript names it, and a quarantined
/// main thread with its note.
fn write_queue(staging: &Path, quarantine: &Path) {
    let s = session_uuid(0);
    predecessor::write_staged(
        staging,
        STAMP_A,
        &s,
        Some("aside"),
        &jsonl(&[&line(&s, "agent with a sidecar")]),
        true,
    );
    predecessor::write_staged(
        staging,
        STAMP_B,
        &s,
        None,
        &jsonl(&[&line(&s, "main thread, no sidecar")]),
        false,
    );
    let agent_line = serde_json::json!({"type": "user", "sessionId": s, "agentId": "anoside",
        "message": {"role": "user", "content": "agent, no sidecar"}})
    .to_string();
    predecessor::write_staged(
        staging,
        STAMP_C,
        &s,
        Some("anoside"),
        &jsonl(&[&agent_line]),
        false,
    );
    predecessor::write_quarantined(
        quarantine,
        STAMP_Q,
        &session_uuid(1),
        &jsonl(&[&line(&session_uuid(1), "quarantined text")]),
    );
}

fn staged_by_stem(env: &Env) -> BTreeMap<String, serde_json::Value> {
    env.staged()["staged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["stem"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

/// What both layouts must show after the first open.
fn assert_imported(env: &Env, first_stderr: &str, queued: usize) {
    let lane = env.lane();
    assert!(
        first_stderr.contains("adopted the store an older abcd wrote"),
        "{first_stderr}"
    );
    assert!(
        first_stderr.contains(&format!(
            "{COMPOSITES} record(s) are filed under a composite id"
        )),
        "{first_stderr}"
    );
    assert!(
        first_stderr.contains("abcd history migrate"),
        "{first_stderr}"
    );
    assert_eq!(records(&lane).len(), COMPOSITES + SESSIONS);
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(lane.join("predecessor-import.json")).unwrap()).unwrap();
    assert_eq!(report["composite"], COMPOSITES as u64);

    let staged = staged_by_stem(env);
    let s0 = session_uuid(0);
    let a = &staged[&format!("{STAMP_A}-aside")];
    assert_eq!(
        (a["session_id"].as_str(), a["agent_id"].as_str()),
        (Some(s0.as_str()), Some("aside"))
    );
    assert_eq!(a["agent_type"], "Explore");
    let b = &staged[&format!("{STAMP_B}-{s0}")];
    assert_eq!(b["session_id"], s0.as_str());
    assert!(b.get("agent_id").is_none(), "{b}");
    let c = &staged[&format!("{STAMP_C}-anoside")];
    assert_eq!(
        c["session_id"],
        s0.as_str(),
        "the key was taken for a session: {c}"
    );
    assert_eq!(c["agent_id"], "anoside");
    for e in staged.values() {
        assert!(e.get("error").is_none(), "{e}");
    }
    let q = &env.staged()["quarantined"];
    assert_eq!(q.as_array().unwrap().len(), 1, "{q}");
    assert_eq!(q[0]["session_id"], session_uuid(1).as_str());
    let reason = q[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("residual secret of kind aws-access-key"),
        "{reason}"
    );

    // The queue drains into records with the lineage it had.
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), queued, "{d}");
    let shown = env.json(&["history", "show", "anoside"]);
    assert_eq!(shown["session_id"], s0.as_str());
    let shown = env.json(&["history", "show", "aside"]);
    assert_eq!(shown["spawn_tool_use_id"], "toolu_staged");

    // migrate repairs the composites; a rebuild reproduces records/.
    let out = env.abcd(&["--json", "history", "migrate", "--apply"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["migrated"].as_array().unwrap().len(), COMPOSITES, "{r}");
    let after = records(&lane);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records(&lane), after);
    assert!(!lane.join("records.unjournaled").exists());
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    assert!(!stdout(&v).contains("named by no event"), "{}", stdout(&v));
    // The quarantined entry is still there after the rebuild.
    assert_eq!(env.staged()["quarantined"].as_array().unwrap().len(), 1);
}

#[test]
fn a_store_in_the_current_layout_is_imported_with_its_orphaned_sidecars() {
    let env = Env::new();
    let lane = env.lane();
    let sha = env.root_sha();
    predecessor::write_composites(&lane.join("records"), &sha, None);
    predecessor::write_main_threads(&lane.join("records"), &sha);
    write_queue(&lane.join("staging"), &lane.join("quarantine"));
    // The predecessor's own move (flat → current) left this sub-agent's
    // sidecar behind: without it the key would read as a session id.
    let s0 = session_uuid(0);
    let flat = env.abcd_home.join(format!("history/{sha}"));
    fs::create_dir_all(flat.join("staging")).unwrap();
    fs::write(
        flat.join("transcripts.moved"),
        "The transcript corpus for this repo lives at:\n~/.abcd/transcripts\n",
    )
    .unwrap();
    predecessor::write_staged(
        &flat.join("staging"),
        STAMP_D,
        &s0,
        Some("amoved"),
        "",
        true,
    );
    fs::remove_file(flat.join(format!("staging/{STAMP_D}-amoved.raw"))).unwrap();
    fs::write(
        lane.join(format!("staging/{STAMP_D}-amoved.raw")),
        jsonl(&[&line(&s0, "moved without its sidecar")]),
    )
    .unwrap();
    fs::create_dir_all(lane.join("sessions")).unwrap();
    fs::write(lane.join(format!("sessions/{s0}")), "").unwrap();
    fs::write(
        lane.join("subagent-payload-gap.json"),
        "{\"schema\":1,\"first_seen\":\"2026-08-01T10:00:00Z\",\"last_seen\":\"2026-08-03T11:00:00.5Z\",\"count\":3,\"event\":\"SubagentStop\"}\n",
    )
    .unwrap();
    let old_flat = tree(&flat);

    let out = env.abcd(&["history", "staged"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("1 staged transcript(s) took their lineage from the sidecars"),
        "{err}"
    );
    assert!(err.contains("gap marker (3 sighting(s))"), "{err}");
    let gap = env.staged()["subagent_gap"].clone();
    assert_eq!(gap["count"], 3, "{gap}");
    assert!(
        gap["first_seen"]
            .as_str()
            .unwrap()
            .starts_with("2026-08-01T10:00:00"),
        "{gap}"
    );
    assert!(
        gap["last_seen"]
            .as_str()
            .unwrap()
            .starts_with("2026-08-03T11:00:00.5"),
        "{gap}"
    );
    assert!(err.contains("1 session note(s)"), "{err}");
    let moved = &staged_by_stem(&env)[&format!("{STAMP_D}-amoved")];
    assert_eq!(moved["session_id"], s0.as_str(), "{moved}");
    assert_eq!(moved["agent_id"], "amoved");
    assert_eq!(tree(&flat), old_flat, "the old store was changed");
    // A second open imports nothing more.
    let again = env.abcd(&["history", "staged"]);
    assert!(
        !stderr(&again).contains("adopted the store"),
        "{}",
        stderr(&again)
    );
    assert_imported(&env, &err, 4);
}

#[test]
fn a_store_in_the_flat_layout_is_imported_and_left_as_it_was() {
    let env = Env::new();
    let sha = env.root_sha();
    let flat = env.abcd_home.join(format!("history/{sha}"));
    predecessor::write_composites(&flat.join("transcripts"), &sha, None);
    predecessor::write_main_threads(&flat.join("transcripts"), &sha);
    write_queue(&flat.join("staging"), &flat.join("quarantine"));
    fs::write(flat.join("transcripts/README.md"), "not a record\n").unwrap();
    let old_flat = tree(&flat);
    assert!(!env.lane().exists());

    // A read-only verb finds it (no lane yet) and imports it.
    let out = env.abcd(&["history", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("(flat layout)"), "{err}");
    assert!(
        err.contains("left in place: README.md (it is not a record"),
        "{err}"
    );
    assert_eq!(tree(&flat), old_flat, "the old store was changed");
    assert_imported(&env, &err, 3);
    assert_eq!(tree(&flat), old_flat, "the old store was changed");
}

/// SIGKILL at spread file operations of the first open: the next open
/// finishes the import; every record is journaled exactly once.
#[test]
fn a_killed_import_is_finished_by_the_next_open() {
    let env = Env::new();
    let sha = env.root_sha();
    let flat = env.abcd_home.join(format!("history/{sha}"));
    predecessor::write_composites_n(&flat.join("transcripts"), &sha, None, 30, 12);
    write_queue(&flat.join("staging"), &flat.join("quarantine"));
    let pristine = env.tmp.path().join("pristine");
    copy_tree(&env.abcd_home, &pristine);
    let trace = env.tmp.path().join("trace");
    let out = env.abcd_env(
        &["history", "staged"],
        &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ops = fs::read_to_string(&trace).unwrap().lines().count();
    let expected_records = records(&env.lane());
    let expected_events = env.json(&["journal", "stats"])["events"].clone();
    assert_eq!(expected_records.len(), 30);

    for k in (1..=8).map(|i| i * ops / 9) {
        fs::remove_dir_all(&env.abcd_home).unwrap();
        copy_tree(&pristine, &env.abcd_home);
        let out = env.abcd_env(
            &["history", "staged"],
            &[("ABCD_FAULT_INJECT", &format!("#{k}:KILL"))],
        );
        assert_eq!(out.status.code(), None, "op {k}/{ops} did not kill");
        let out = env.abcd(&["history", "staged"]);
        assert!(out.status.success(), "op {k}: {}", stderr(&out));
        assert_eq!(records(&env.lane()), expected_records, "op {k}");
        assert_eq!(
            env.json(&["journal", "stats"])["events"],
            expected_events,
            "op {k}: an event journaled twice or lost"
        );
        let st = env.staged();
        assert_eq!(st["staged"].as_array().unwrap().len(), 3, "op {k}: {st}");
        assert_eq!(
            st["quarantined"].as_array().unwrap().len(),
            1,
            "op {k}: {st}"
        );
        assert!(!env.lane().join("predecessor-import.pending").exists());
        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(0), "op {k}: {}", stdout(&v));
    }
}

/// A repository already captured by this abcd whose older abcd's flat
/// store was never imported: the next open imports that store (only it),
/// once.
#[test]
fn a_flat_store_found_beside_a_lane_in_use_is_imported_once() {
    let env = Env::new();
    let sha = env.root_sha();
    let sid = "11111111-2222-4333-8444-555555555555";
    let t = env.main_transcript(sid, &jsonl(&[&line(sid, "new abcd")]));
    let out = env.abcd(&["history", "capture", t.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let flat = env.abcd_home.join(format!("history/{sha}"));
    let fixtures = predecessor::write_composites_n(&flat.join("transcripts"), &sha, None, 5, 2);
    write_queue(&flat.join("staging"), &flat.join("quarantine"));
    let old_flat = tree(&flat);

    let out = env.abcd(&["history", "staged"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("(flat layout): 5 record(s), 3 staged"),
        "{err}"
    );
    let recs = records(&env.lane());
    assert_eq!(recs.len(), 6);
    for c in &fixtures {
        assert_eq!(recs[&c.file], c.bytes);
    }
    assert_eq!(tree(&flat), old_flat);
    let again = env.abcd(&["history", "staged"]);
    assert!(
        !stderr(&again).contains("adopted the store"),
        "{}",
        stderr(&again)
    );
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), 3);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records(&env.lane()), recs);
}
