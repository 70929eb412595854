//! Journal damage that is not a torn write, through the real binary
//! (issue #8, failures 4 and 5):
//!
//! - one flipped bit in the complete last frame (an acknowledged Captured
//!   event) is corruption: verify exits 4, the next hook spools instead of
//!   cutting it to `journal.torn/`, repair names the event it cannot
//!   recover, and the record the rebuild set aside is reported by verify,
//!   stats and `history staged`; true torn tails stay torn (exit 3) and are
//!   cut by the next writer;
//! - one flipped bit in the 64-byte header: verify reports it, hooks spool,
//!   `journal repair --yes` restores the exact header and every event.

mod common;

use std::fs;
use std::path::PathBuf;

use common::*;
use serde_json::Value;

const SID: &str = "f00d0000-0000-4000-8000-0000000000d8";

struct Store {
    env: Env,
    journal: PathBuf,
    bytes: Vec<u8>,
    /// The last frame: offset, seq, event id, and the record it stored.
    last: (usize, u64, String, String),
}

/// A store whose last journal frame is the acknowledged Captured event of
/// one sub-agent transcript (staged by a hook, stored by a drain).
fn store() -> Store {
    let env = Env::new();
    let p = env.agent_transcript(
        SID,
        "a1",
        &jsonl(&[&line(SID, &format!("first {}", "w".repeat(2500)))]),
        None,
    );
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "a1", &p));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    env.drain();
    let frames = dump(&env);
    let last = frames.last().unwrap().clone();
    assert_eq!(last["event"], "captured", "{last}");
    let record = last["fields"]["record"].as_str().unwrap().to_owned();
    assert!(env.lane().join("records").join(&record).exists());
    let journal = env.lane().join("journal/journal");
    let bytes = fs::read(&journal).unwrap();
    Store {
        last: (
            last["offset"].as_u64().unwrap() as usize,
            last["seq"].as_u64().unwrap(),
            last["event_id"].as_str().unwrap().to_owned(),
            record,
        ),
        env,
        journal,
        bytes,
    }
}

fn dump(env: &Env) -> Vec<Value> {
    stdout(&env.abcd(&["--json", "journal", "dump"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn files_in(dir: PathBuf) -> usize {
    fs::read_dir(dir).map(|rd| rd.count()).unwrap_or(0)
}

/// A hook staging a new sub-agent transcript; returns its outcome.
fn late_hook(env: &Env, agent: &str) -> String {
    let p = env.agent_transcript(SID, agent, &jsonl(&[&line(SID, agent)]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, agent, &p));
    assert_eq!(out.status.code(), Some(0), "hooks always exit 0");
    hook_json(&out)["outcome"].as_str().unwrap().to_owned()
}

#[test]
fn a_flipped_bit_in_the_last_frame_is_corrupt_spooled_and_reported() {
    let s0 = store();
    let (off, _, _, _) = s0.last;
    let len = s0.bytes.len() - off;
    drop(s0);
    // Every bit of a payload byte, of frame_len and of the CRC.
    for rel in [len / 2, len - 8, len - 7, len - 2] {
        for bit in 0..8 {
            let s = store();
            let (off, seq, ref event_id, ref record) = s.last;
            let env = &s.env;
            let ctx = format!("frame byte +{rel} bit {bit}");
            let mut b = s.bytes.clone();
            b[off + rel] ^= 1 << bit;
            fs::write(&s.journal, &b).unwrap();

            let v = env.abcd(&["--json", "journal", "verify"]);
            assert_eq!(v.status.code(), Some(4), "{ctx}: {}", stdout(&v));
            let v: Value = serde_json::from_slice(&v.stdout).unwrap();
            assert_eq!(v["status"], "corrupt", "{ctx}");
            assert_eq!(v["damage"]["offset"], off as u64, "{ctx}");
            let text = stdout(&env.abcd(&["journal", "verify"]));
            assert!(
                text.contains(&format!("CORRUPT at offset {off}")),
                "{ctx}: {text}"
            );

            // The next hook spools; nothing goes to journal.torn/.
            assert_eq!(late_hook(env, "late"), "spooled", "{ctx}");
            assert_eq!(
                files_in(env.lane().join("journal/journal.torn")),
                0,
                "{ctx}"
            );
            assert_eq!(
                fs::read(&s.journal).unwrap(),
                b,
                "{ctx}: the journal was changed"
            );

            // A rebuild set the record aside; every report says so.
            let notice = "record file(s) in";
            let st = env.json(&["journal", "stats"]);
            assert_eq!(st["unjournaled_records"][0], record.as_str(), "{ctx}: {st}");
            let st = stdout(&env.abcd(&["journal", "stats"]));
            assert!(
                st.contains(notice) && st.contains(record.as_str()),
                "{ctx}: {st}"
            );
            let v = env.abcd(&["--json", "journal", "verify"]);
            let v: Value = serde_json::from_slice(&v.stdout).unwrap();
            assert_eq!(v["unjournaled_records"][0], record.as_str(), "{ctx}");
            let text = stdout(&env.abcd(&["journal", "verify"]));
            assert!(
                text.contains(notice) && text.contains(record.as_str()),
                "{ctx}: {text}"
            );
            let staged = env.staged();
            assert_eq!(
                staged["unjournaled_records"][0],
                record.as_str(),
                "{ctx}: {staged}"
            );
            let text = stdout(&env.abcd(&["history", "staged"]));
            assert!(
                text.contains(notice) && text.contains(record.as_str()),
                "{ctx}: {text}"
            );

            // Repair names the event it cannot recover: seq, id, offset.
            let plan = stdout(&env.abcd(&["journal", "repair"]));
            let want = format!("cannot recover: seq {seq} at offset {off}, event {event_id}");
            assert!(plan.contains(&want), "{ctx}: {plan}");
            let out = env.abcd(&["--json", "journal", "repair", "--yes"]);
            assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
            let r: Value = serde_json::from_slice(&out.stdout).unwrap();
            let lost = r["lost"].as_array().unwrap();
            assert_eq!(lost.len(), 1, "{ctx}: {r}");
            assert_eq!(lost[0]["seq"], seq, "{ctx}");
            assert_eq!(lost[0]["offset"], off as u64, "{ctx}");
            assert_eq!(lost[0]["event_id"], event_id.as_str(), "{ctx}");
            assert_eq!(r["unjournaled_records"][0], record.as_str(), "{ctx}");
            let v = env.abcd(&["journal", "verify"]);
            assert_eq!(v.status.code(), Some(0), "{ctx}: {}", stdout(&v));
            // The spooled event is in.
            let staged = env.staged();
            assert!(
                staged["staged"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["agent_id"] == "late"),
                "{ctx}: {staged}"
            );
        }
    }
}

#[test]
fn true_torn_tails_stay_torn_and_the_next_hook_cuts_them() {
    for case in ["cut mid-frame", "zero sector", "zero trailer"] {
        let s = store();
        let env = &s.env;
        // Events carry digests, not bodies: a forget of many values makes a
        // last frame that spans whole sectors.
        let mut args = vec!["history", "forget", "--yes"];
        let values: Vec<String> = (0..40)
            .map(|i| format!("never-seen-value-{i:04}"))
            .collect();
        for v in &values {
            args.extend(["--value", v.as_str()]);
        }
        let out = env.abcd(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let last = dump(env).last().unwrap().clone();
        assert_eq!(last["event"], "forgotten", "{last}");
        let off = last["offset"].as_u64().unwrap() as usize;
        let bytes = fs::read(&s.journal).unwrap();
        let mut b = bytes.clone();
        let sector = off.div_ceil(512) * 512;
        assert!(
            sector + 512 < b.len() - 8,
            "the last frame spans a whole sector"
        );
        match case {
            "cut mid-frame" => b.truncate(off + 300),
            "zero sector" => b[sector..sector + 512].fill(0),
            _ => {
                let n = b.len();
                b[n - 8..].fill(0)
            }
        }
        fs::write(&s.journal, &b).unwrap();
        let v = env.abcd(&["--json", "journal", "verify"]);
        assert_eq!(v.status.code(), Some(3), "{case}: {}", stdout(&v));
        assert_eq!(late_hook(env, "late"), "staged", "{case}");
        assert_eq!(
            files_in(env.lane().join("journal/journal.torn")),
            1,
            "{case}"
        );
        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(0), "{case}: {}", stdout(&v));
    }
}

#[test]
fn a_flipped_bit_in_the_header_is_reported_spooled_and_restored() {
    for pos in [0usize, 9, 10, 13, 17, 25, 33, 44, 52, 62] {
        let s = store();
        let env = &s.env;
        let ctx = format!("header byte {pos}");
        let mut b = s.bytes.clone();
        b[pos] ^= 1 << (pos % 8);
        fs::write(&s.journal, &b).unwrap();

        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(4), "{ctx}: {}", stdout(&v));
        // Hooks keep working: the event is spooled, nothing is lost.
        assert_eq!(late_hook(env, "late"), "spooled", "{ctx}");
        assert_eq!(fs::read(&s.journal).unwrap(), b, "{ctx}");
        let text = stdout(&v);
        assert!(text.contains("offset 0..64"), "{ctx}: {text}");
        assert!(text.contains("abcd journal repair --yes"), "{ctx}: {text}");
        let v: Value =
            serde_json::from_slice(&env.abcd(&["--json", "journal", "verify"]).stdout).unwrap();
        assert_eq!(v["damage"]["offset"], 0, "{ctx}");
        assert_eq!(v["damage"]["reason"], "header", "{ctx}");

        let out = env.abcd(&["journal", "repair", "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
        assert!(stdout(&out).contains("restore the 64-byte header"), "{ctx}");
        let after = fs::read(&s.journal).unwrap();
        assert_eq!(
            &after[..64],
            &s.bytes[..64],
            "{ctx}: the exact header is back"
        );
        assert_eq!(&after[..s.bytes.len()], &s.bytes[..], "{ctx}");
        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(0), "{ctx}: {}", stdout(&v));

        // A hook appends afterwards; every event is there.
        assert_eq!(late_hook(env, "later"), "staged", "{ctx}");
        let d = dump(env);
        assert_eq!(d.len(), s.last.1 as usize + 2, "{ctx}");
        assert!(env.lane().join("records").join(&s.last.3).exists(), "{ctx}");
        let st = env.json(&["journal", "stats"]);
        assert!(
            st["unjournaled_records"].as_array().unwrap().is_empty(),
            "{ctx}: {st}"
        );
    }
}
