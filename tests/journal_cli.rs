//! The journal verbs on a real store: verify finds damage at the right
//! offset, writers refuse and spool, repair is explicit and recovers every
//! intact event, and dump/stats describe what is there.

mod common;

use std::fs;

use common::*;

const SID: &str = "f00d0000-0000-4000-8000-00000000000a";

fn populate(env: &Env, n: usize) {
    for i in 0..n {
        let a = format!("j{i:02}");
        let p = env.agent_transcript(
            SID,
            &a,
            &jsonl(&[&line(SID, &format!("{a} {}", "w".repeat(2000)))]),
            None,
        );
        assert_eq!(
            hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, &a, &p)))["outcome"],
            "staged"
        );
    }
}

#[test]
fn verify_dump_and_stats_describe_a_clean_journal() {
    let env = Env::new();
    populate(&env, 3);
    env.drain();
    let v = env.json(&["journal", "verify"]);
    assert_eq!(v["status"], "clean");
    assert_eq!(v["events"], 7, "{v}"); // session note, 3 staged, 3 captured
    let out = env.abcd(&["--json", "journal", "dump"]);
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0]["event"], "session-noted");
    assert_eq!(lines.iter().filter(|l| l["event"] == "captured").count(), 3);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"], i as u64 + 1, "gapless");
    }
    let text = stdout(&env.abcd(&["journal", "dump"]));
    assert_eq!(text.lines().count(), 7);
    let s = env.json(&["journal", "stats"]);
    assert_eq!(s["events"], 7);
    assert_eq!(s["projection_seq"], 7);
    let r = env.json(&["journal", "replay"]);
    assert_eq!(r["applied"], 0);
}

#[test]
fn a_flipped_byte_is_found_refused_spooled_and_repaired() {
    let env = Env::new();
    populate(&env, 6);
    let journal = env.lane().join("journal/journal");
    let mut bytes = fs::read(&journal).unwrap();
    // Flip a byte inside the second frame's payload.
    let out = env.abcd(&["--json", "journal", "dump"]);
    let frames: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let second = frames[1]["offset"].as_u64().unwrap() as usize;
    bytes[second + 120] ^= 0x5a;
    fs::write(&journal, &bytes).unwrap();

    let v = env.abcd(&["--json", "journal", "verify"]);
    assert_eq!(v.status.code(), Some(4), "{}", stdout(&v));
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["status"], "corrupt");
    assert_eq!(v["damage"]["offset"], second as u64);
    assert!(v["damage"]["frames_after"].as_u64().unwrap() >= 5);
    let text = stdout(&env.abcd(&["journal", "verify"]));
    assert!(
        text.contains(&format!("CORRUPT at offset {second}")),
        "{text}"
    );

    // A hook now refuses to append, spools the event and keeps the bytes.
    let p = env.agent_transcript(SID, "late", &jsonl(&[&line(SID, "after the damage")]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "late", &p));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(hook_json(&out)["outcome"], "spooled", "{}", stderr(&out));
    // Reading still works.
    let out = env.abcd(&["history", "staged"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Repair without --yes changes nothing.
    let before = fs::read(&journal).unwrap();
    let plan = env.abcd(&["journal", "repair"]);
    assert_eq!(plan.status.code(), Some(0));
    assert!(stdout(&plan).contains("would"), "{}", stdout(&plan));
    assert_eq!(fs::read(&journal).unwrap(), before);

    let out = env.abcd(&["--json", "journal", "repair", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["applied"], true);
    assert!(r["recovered_appended"].as_u64().unwrap() >= 5, "{r}");
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    // Every intact staged entry and the spooled one are there; the damaged
    // frame's blob is adopted again, so nothing raw is untracked.
    let staged = env.staged();
    let mut agents: Vec<String> = staged["staged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["agent_id"].as_str().unwrap_or("").to_owned())
        .collect();
    agents.sort();
    agents.dedup();
    assert!(agents.contains(&"late".to_owned()), "{agents:?}");
    assert_eq!(agents.len(), 7, "{agents:?}");
    for e in staged["staged"].as_array().unwrap() {
        assert!(e.get("error").is_none(), "{e}");
    }
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 7, "{d}");
}
