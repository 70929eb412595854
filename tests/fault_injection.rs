//! Fault injection through the real binary: every file operation of the
//! hook, drain, repair and rebuild paths is failed in turn — with ENOSPC,
//! EIO and EACCES, and with a SIGKILL just before it — and after each run the
//! store must hold: no acknowledged event lost, no wedged store (the next
//! drain and `journal verify` succeed), no untracked raw file, no temporary
//! file left once the next drain has run, and every failure explained.
//!
//! The shim is `abcd_fsio::fault` (`ABCD_FAULT_INJECT`, `ABCD_FAULT_TRACE`):
//! a first, fault-free run of each path lists its operations; then each
//! operation index is failed in a fresh copy of the same starting store.
//! Deterministic: no sleeps, no timing.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const SID: &str = "fa000000-0000-4000-8000-000000000001";
const MODES: [&str; 4] = ["ENOSPC", "EIO", "EACCES", "KILL"];

/// A scenario: how to build its starting store, and the one command whose
/// file operations are failed.
struct Scenario {
    name: &'static str,
    /// Builds the starting store in `env` (fault-free).
    setup: fn(&Env),
    /// The faulted command: (args, stdin for a hook).
    run: fn(&Env) -> (Vec<String>, Option<Value>),
}

fn agent_body(agent: &str) -> String {
    jsonl(&[
        &line(SID, &format!("{agent} first line")),
        &line(SID, &format!("{agent} second line")),
    ])
}

fn stage_agent(env: &Env, agent: &str) {
    let p = env.agent_transcript(SID, agent, &agent_body(agent), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, agent, &p));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
}

fn setup_one_record_one_staged(env: &Env) {
    stage_agent(env, "a1");
    env.drain();
    stage_agent(env, "a2");
}

fn setup_two_staged(env: &Env) {
    stage_agent(env, "b1");
    stage_agent(env, "b2");
}

fn setup_mid_file_damage(env: &Env) {
    stage_agent(env, "c1");
    stage_agent(env, "c2");
    env.drain();
    stage_agent(env, "c3");
    // One flipped byte inside the first frame's payload: mid-file damage
    // (later frames follow), which repair quarantines and recovers around.
    let j = env.lane().join("journal/journal");
    let mut b = fs::read(&j).unwrap();
    b[64 + 80 + 8] ^= 0x40;
    fs::write(&j, b).unwrap();
}

fn hook_new_agent(env: &Env) -> (Vec<String>, Option<Value>) {
    let p = env.agent_transcript(SID, "h9", &agent_body("h9"), None);
    (
        vec!["--json".into(), "hook".into(), "subagent-stop".into()],
        Some(env.subagent_payload(SID, "h9", &p)),
    )
}

fn verb(args: &[&str]) -> (Vec<String>, Option<Value>) {
    (args.iter().map(|s| s.to_string()).collect(), None)
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "hook on a new store",
        setup: |_| {},
        run: hook_new_agent,
    },
    Scenario {
        name: "hook on an existing store",
        setup: setup_one_record_one_staged,
        run: hook_new_agent,
    },
    Scenario {
        name: "drain",
        setup: setup_two_staged,
        run: |_| verb(&["--json", "history", "drain"]),
    },
    Scenario {
        name: "rebuild",
        setup: setup_one_record_one_staged,
        run: |_| verb(&["--json", "journal", "replay", "--rebuild"]),
    },
    Scenario {
        name: "repair",
        setup: setup_mid_file_damage,
        run: |_| verb(&["--json", "journal", "repair", "--yes"]),
    },
];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_faulted(env: &Env, s: &Scenario, fault: Option<&str>, trace: Option<&Path>) -> Run {
    let (args, stdin) = (s.run)(env);
    let mut c = env.command(&env.repo);
    c.args(&args);
    if let Some(f) = fault {
        c.env("ABCD_FAULT_INJECT", f);
    }
    if let Some(t) = trace {
        c.env("ABCD_FAULT_TRACE", t);
    }
    let out = match stdin {
        Some(v) => {
            let mut child = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            feed_stdin(&mut child, v.to_string().as_bytes());
            child.wait_with_output().unwrap()
        }
        None => c.output().unwrap(),
    };
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every file under `dir` whose name marks a temporary.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            out.extend(temporaries(&p));
        } else if name.starts_with('.') && (name.ends_with(".tmp") || name.contains(".tmp-")) {
            out.push(p);
        }
    }
    out
}

/// (session, agent) of every record `history list` shows.
fn record_keys(env: &Env) -> BTreeSet<String> {
    env.records()
        .iter()
        .map(|r| r["agent_id"].as_str().unwrap_or("main").to_owned())
        .collect()
}

fn check_after(env: &Env, s: &Scenario, fault: &str, run: &Run, before: &BTreeSet<String>) {
    let ctx = format!("{} with {fault}", s.name);
    let is_hook = (s.run)(env).1.is_some();
    let killed = fault.ends_with("KILL");
    if is_hook && !killed {
        assert_eq!(
            run.code,
            Some(0),
            "{ctx}: hooks always exit 0\n{}",
            run.stderr
        );
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "{ctx}: one JSON line\n{}",
            run.stdout
        );
    }
    let failed_outcome = is_hook && !run.stdout.contains("\"outcome\":\"staged\"");
    if !killed && (run.code != Some(0) || failed_outcome) {
        assert!(
            !run.stderr.trim().is_empty(),
            "{ctx}: a failure must be explained on stderr"
        );
    }
    // The next drain brings the store back: it must succeed (no wedge).
    let d = env.abcd(&["--json", "history", "drain"]);
    assert_eq!(
        d.status.code(),
        Some(0),
        "{ctx}: the next drain must work\nfault run stderr: {}\ndrain stderr: {}\ndrain stdout: {}",
        run.stderr,
        stderr(&d),
        String::from_utf8_lossy(&d.stdout)
    );
    let v = env.abcd(&["journal", "verify"]);
    // A repair run killed or failed midway can leave the damage it was
    // repairing in place; a later repair finishes it.
    if s.name == "repair" && v.status.code() != Some(0) {
        let r = env.abcd(&["journal", "repair", "--yes"]);
        assert_eq!(
            r.status.code(),
            Some(0),
            "{ctx}: repair again\n{}",
            stderr(&r)
        );
        env.drain();
    }
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{ctx}: journal verify after recovery\n{}\n{}",
        stdout(&v),
        stderr(&v)
    );
    let temps = temporaries(&env.abcd_home);
    assert!(temps.is_empty(), "{ctx}: temporaries left: {temps:?}");
    let staged = env.staged();
    for e in staged["staged"].as_array().unwrap() {
        assert!(
            e.get("error").is_none(),
            "{ctx}: untracked staged entry {e}"
        );
    }
    let staging = env.lane().join("staging");
    if let Ok(rd) = fs::read_dir(&staging) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".raw") {
                assert!(
                    staging.join(format!("{stem}.stage.json")).exists(),
                    "{ctx}: raw file without a journal entry: {name}"
                );
            }
        }
    }
    // Nothing acknowledged is lost: every record there before is still
    // there, and a hook that said "staged" got its sub-agent stored.
    let after = record_keys(env);
    for k in before {
        assert!(after.contains(k), "{ctx}: record {k} lost; now {after:?}");
    }
    if is_hook && run.stdout.contains("\"outcome\":\"staged\"") {
        assert!(after.contains("h9"), "{ctx}: acknowledged stage lost");
    }
}

fn op_count(trace: &Path) -> usize {
    fs::read_to_string(trace)
        .unwrap_or_default()
        .lines()
        .count()
}

fn exercise(s: &Scenario, every: usize) {
    let env = Env::new();
    (s.setup)(&env);
    let template = env.tmp.path().join("template");
    copy_tree(&env.abcd_home, &template);
    // Expected end state, and the list of operations, from a clean run.
    let trace = env.tmp.path().join("trace");
    let clean = run_faulted(&env, s, None, Some(&trace));
    let n = op_count(&trace);
    assert!(n > 5, "{}: the trace saw {n} operations", s.name);
    assert!(
        clean.code == Some(0),
        "{}: the fault-free run failed: {}",
        s.name,
        clean.stderr
    );
    copy_tree(&template, &env.abcd_home);
    let before = if env.abcd_home.exists() && s.name != "repair" {
        record_keys(&env)
    } else {
        BTreeSet::new()
    };
    copy_tree(&template, &env.abcd_home);
    let mut runs = 0;
    for i in (1..=n).step_by(every) {
        for mode in MODES {
            copy_tree(&template, &env.abcd_home);
            let fault = format!("#{i}:{mode}");
            let run = run_faulted(&env, s, Some(&fault), None);
            check_after(&env, s, &fault, &run, &before);
            runs += 1;
        }
    }
    eprintln!("{}: {n} operations, {runs} faulted runs", s.name);
}

#[test]
fn hook_on_a_new_store_survives_every_fault() {
    exercise(&SCENARIOS[0], 1);
}

#[test]
fn hook_on_an_existing_store_survives_every_fault() {
    exercise(&SCENARIOS[1], 1);
}

#[test]
fn drain_survives_every_fault() {
    exercise(&SCENARIOS[2], 1);
}

#[test]
fn rebuild_survives_every_fault() {
    exercise(&SCENARIOS[3], 1);
}

#[test]
fn repair_survives_every_fault() {
    exercise(&SCENARIOS[4], 1);
}

/// A full disk stays full: every write from the first on fails. The hook
/// still exits 0 with its one line, explains itself, and leaves nothing
/// behind; the drain after the disk is freed recovers.
#[test]
fn a_disk_that_stays_full_leaves_nothing_behind() {
    for s in &SCENARIOS[..3] {
        let env = Env::new();
        (s.setup)(&env);
        let before = if env.abcd_home.exists() {
            record_keys(&env)
        } else {
            BTreeSet::new()
        };
        for spec in ["write#1+:ENOSPC", "sync#1+:EIO", "rename#1+:ENOSPC"] {
            let run = run_faulted(&env, s, Some(spec), None);
            check_after(&env, s, spec, &run, &before);
        }
    }
}
