//! A body the journal names that is missing or damaged is reported by
//! `journal verify` (exit 4, naming its records), named by `journal repair`,
//! and never crashes a reader; a body no event names is a note that
//! `journal repair --yes` clears.

mod common;

use std::fs;

use common::*;

const S: &str = "b0d1e500-0000-4000-8000-000000000001";

fn store() -> (Env, String, std::path::PathBuf) {
    let env = Env::new();
    let m = env.main_transcript(S, &jsonl(&[&line(S, "a body to lose")]));
    env.hook("session-end", &env.end_payload(S, &m));
    env.drain();
    let record = env.records()[0]["file"].as_str().unwrap().to_owned();
    let bytes = fs::read(env.lane().join("records").join(&record)).unwrap();
    let sha = abcd::fsutil::sha256_hex(&bytes);
    let body = env.lane().join("bodies").join(&sha);
    assert!(body.exists(), "the record file is its body");
    (env, record, body)
}

#[test]
fn a_missing_or_damaged_body_is_reported_named_and_survived() {
    for damage in ["missing", "damaged"] {
        let (env, record, body) = store();
        if damage == "missing" {
            fs::remove_file(&body).unwrap();
        } else {
            let mut b = fs::read(&body).unwrap();
            b[10] ^= 1;
            fs::write(&body, b).unwrap();
        }
        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(4), "{damage}: {}", stdout(&v));
        assert!(stdout(&v).contains(&record), "{damage}: {}", stdout(&v));
        let j: serde_json::Value =
            serde_json::from_slice(&env.abcd(&["--json", "journal", "verify"]).stdout).unwrap();
        assert_eq!(j["status"], "corrupt", "{damage}: {j}");
        assert_eq!(
            j["bodies"]["problems"][0]["problem"],
            if damage == "missing" {
                "missing"
            } else {
                "mismatch"
            }
        );
        // Readers keep working on the projection.
        assert_eq!(env.records().len(), 1, "{damage}");
        assert!(env.abcd(&["history", "show", S]).status.success());
        // Repair names the record it cannot restore.
        let r = env.abcd(&["journal", "repair"]);
        assert!(
            stdout(&r).contains("cannot restore body"),
            "{damage}: {}",
            stdout(&r)
        );
        assert!(stdout(&r).contains(&record), "{damage}");
        // A rebuild does not crash: the event is a fault, the record file
        // is kept aside, never deleted.
        let out = env.abcd(&["journal", "replay", "--rebuild"]);
        assert!(out.status.success(), "{damage}: {}", stderr(&out));
        let st = env.json(&["journal", "stats"]);
        assert!(
            st["unjournaled_records"].to_string().contains(&record),
            "{damage}: {st}"
        );
        assert!(env.abcd(&["--json", "history", "list"]).status.success());
    }
}

#[test]
fn a_body_no_event_names_is_a_note_repair_clears() {
    let (env, _, _) = store();
    let stray = env.lane().join("bodies").join("e".repeat(64));
    fs::write(&stray, b"left by a capture whose append failed").unwrap();
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    assert!(stdout(&v).contains("named by no event"), "{}", stdout(&v));
    let r = env.abcd(&["journal", "repair", "--yes"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(!stray.exists());
    let v = env.abcd(&["journal", "verify"]);
    assert!(!stdout(&v).contains("named by no event"), "{}", stdout(&v));
}
