//! Kill -9 during stage and during drain, at random moments: nothing
//! acknowledged is lost and no raw file is left untracked.
//!
//! The moments are random (seeded; the seed is printed and can be replayed
//! with ABCD_CRASH_SEED), but the assertions hold wherever a kill lands, so
//! the test never depends on timing to pass.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::process::Stdio;
use std::time::Duration;

use common::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn seed() -> u64 {
    let s = std::env::var("ABCD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash test seed: ABCD_CRASH_SEED={s}");
    s
}

const SID: &str = "dead0000-beef-4000-8000-000000000000";

/// Every raw file in staging has a journal entry (its sidecar) once the next
/// writer has opened the store; temporary files of killed writers are gone.
fn assert_nothing_untracked(env: &Env) {
    let staged = env.staged();
    for e in staged["staged"].as_array().unwrap() {
        assert!(
            e.get("error").is_none(),
            "untracked or broken staged entry: {e}"
        );
    }
    // Every hook may have been killed before the lane existed (a loaded
    // machine): then nothing can be untracked.
    let Ok(staging) = fs::read_dir(env.lane().join("staging")) else {
        assert!(
            !env.lane().exists(),
            "the lane exists without its staging leaf"
        );
        return;
    };
    for e in staging {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "temporary raw file left behind: {name}"
        );
    }
}

#[test]
fn kill_during_stage_loses_nothing_acknowledged() {
    let env = Env::new();
    let mut rng = Rng(seed());
    let body = "y".repeat(256 << 10);
    let mut acknowledged = BTreeSet::new();
    for round in 0..30 {
        let agent = format!("k{round:02}");
        let p = env.agent_transcript(
            SID,
            &agent,
            &jsonl(&[&line(SID, &format!("{agent} {body}"))]),
            None,
        );
        let mut child = env.spawn_hook("subagent-stop", &env.subagent_payload(SID, &agent, &p));
        std::thread::sleep(Duration::from_micros(rng.next() % 6000));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.code() == Some(0) {
            let r = hook_json(&out);
            if r["outcome"] == "staged" {
                acknowledged.insert(agent.clone());
            }
        }
    }
    // The next writer recovers (torn journal tails, orphan blobs).
    assert_nothing_untracked(&env);
    if !env.lane().join("journal").exists() {
        // On a loaded machine every hook can be killed before the lane
        // exists: then nothing was acknowledged and there is nothing to
        // verify.
        assert!(acknowledged.is_empty(), "{acknowledged:?}");
        return;
    }
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}{}", stdout(&v), stderr(&v));
    let staged: BTreeSet<String> = env.staged()["staged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["agent_id"].as_str().unwrap().to_owned())
        .collect();
    for a in &acknowledged {
        assert!(staged.contains(a), "acknowledged {a} lost");
    }
    let d = env.drain();
    assert!(d["failed"].as_array().unwrap().is_empty(), "{d}");
    let recs = env.records();
    let agents: Vec<String> = recs
        .iter()
        .map(|r| r["agent_id"].as_str().unwrap().to_owned())
        .collect();
    let set: BTreeSet<_> = agents.iter().cloned().collect();
    assert_eq!(set.len(), agents.len(), "no duplicates");
    assert!(acknowledged.is_subset(&set));
}

#[test]
fn kill_during_drain_loses_nothing() {
    let env = Env::new();
    let mut rng = Rng(seed());
    let body = "z".repeat(128 << 10);
    let n = 24;
    for i in 0..n {
        let agent = format!("d{i:02}");
        let p = env.agent_transcript(
            SID,
            &agent,
            &jsonl(&[&line(SID, &format!("{agent} {body}"))]),
            None,
        );
        assert_eq!(
            hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, &agent, &p)))
                ["outcome"],
            "staged"
        );
    }
    for _ in 0..12 {
        let mut child = env
            .command(&env.repo)
            .args(["history", "drain"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % 40_000));
        let _ = child.kill();
        let _ = child.wait();
        // Invariant after every kill: each agent is staged or stored, never
        // both, never neither, never twice.
        let staged: Vec<String> = env.staged()["staged"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["agent_id"].as_str().unwrap().to_owned())
            .collect();
        let stored: Vec<String> = env
            .records()
            .iter()
            .map(|r| r["agent_id"].as_str().unwrap().to_owned())
            .collect();
        let s1: BTreeSet<_> = staged.iter().cloned().collect();
        let s2: BTreeSet<_> = stored.iter().cloned().collect();
        assert_eq!(s2.len(), stored.len(), "a record stored twice");
        assert!(
            s1.is_disjoint(&s2),
            "both staged and stored: {:?}",
            s1.intersection(&s2).collect::<Vec<_>>()
        );
        assert_eq!(s1.len() + s2.len(), n, "an entry vanished");
        assert_nothing_untracked(&env);
    }
    let d = env.drain();
    assert!(d["failed"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(env.records().len(), n);
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
}
