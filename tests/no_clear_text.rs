//! Nothing a harness supplied reaches `ABCD_HOME` unredacted outside
//! staging and quarantine, and after a discard not even there: secrets are
//! planted in every payload and sidecar field, in the transcript's path and
//! in the repository's path; hooks, drain and discard run; then every byte
//! of every file under `ABCD_HOME` (journal, spool, torn and quarantine
//! directories, index, cache, bodies) is searched for each planted value.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::json;

/// A GitHub token shape the engine redacts: `ghp_` and 36 alphanumerics,
/// distinct per field.
fn token(tag: char) -> String {
    let body: String = "Zq7Xw2Lm9Rt4Vb8Nc3Hd6Jk1Pf5Sg0Ty2UaE"
        .chars()
        .map(|c| if c == 'X' { tag } else { c })
        .collect();
    format!("ghp_{body}")
}

/// Every file under `dir`, recursively (symlinks are not followed).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            out.extend(files(&e.path()));
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
    out
}

/// Where each planted value occurs under `home` (file contents and names).
fn occurrences(home: &Path, planted: &[(&str, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files(home) {
        let bytes = fs::read(&f).unwrap();
        for (field, v) in planted {
            let hit = bytes.windows(v.len()).any(|w| w == v.as_bytes())
                || f.to_string_lossy().contains(v.as_str());
            if hit {
                found.push(format!("{field} in {}", f.display()));
            }
        }
    }
    found
}

#[test]
fn no_planted_value_survives_hooks_drain_and_discard() {
    let env = Env::new();
    let planted: Vec<(&str, String)> = vec![
        ("repository path", token('a')),
        ("payload agent_type", token('b')),
        ("sidecar agentType", token('c')),
        ("sidecar toolUseId", token('d')),
        ("sidecar parentAgentId", token('e')),
        ("sidecar description", token('f')),
        ("transcript path", token('g')),
        ("transcript body", token('h')),
        ("session id", token('i')),
        ("payload description", token('j')),
        ("payload hook_event_name", token('k')),
    ];
    let v = |field: &str| planted.iter().find(|(f, _)| *f == field).unwrap().1.clone();
    // A repository whose path holds a token.
    let repo = env.tmp.path().join(v("repository path")).join("work");
    Env::init_repo(&repo, &env.home, "planted");
    // Transcripts under a directory whose name holds a token.
    let src = env.tmp.path().join(v("transcript path"));
    let session = "5e551011-0000-4000-8000-000000000001";
    let line = |text: &str| {
        json!({"type": "user", "sessionId": session, "message": {"role": "user", "content": text}})
            .to_string()
    };
    let main = src.join(format!("{session}.jsonl"));
    fs::create_dir_all(src.join(session).join("subagents")).unwrap();
    fs::write(
        &main,
        format!(
            "{}\n",
            line(&format!("deploy with {}", v("transcript body")))
        ),
    )
    .unwrap();
    // Two sub-agents: one whose sidecar plants in the free-text fields, one
    // whose parent id is a token (refused as an identifier: quarantined).
    let agents = [("a1f00d", false), ("a2f00d", true)];
    let mut log = Vec::new();
    for (agent, bad_parent) in agents {
        let t = src
            .join(session)
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"));
        fs::write(&t, format!("{}\n", line("sub-agent work"))).unwrap();
        let mut sc = json!({
            "agentType": v("sidecar agentType"),
            "description": v("sidecar description"),
            "toolUseId": v("sidecar toolUseId"),
            "spawnDepth": 2,
        });
        if bad_parent {
            sc["parentAgentId"] = json!(v("sidecar parentAgentId"));
        }
        fs::write(
            t.with_file_name(format!("agent-{agent}.meta.json")),
            sc.to_string(),
        )
        .unwrap();
        let payload = json!({
            "session_id": session,
            "cwd": repo,
            "agent_id": agent,
            "agent_type": v("payload agent_type"),
            "description": v("payload description"),
            "agent_transcript_path": t,
            "transcript_path": main,
            "hook_event_name": "SubagentStop",
        });
        let out = env.hook_in(&repo, "subagent-stop", &payload);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        log.push(format!(
            "{agent}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // A SubagentStop without a transcript path is journaled as a gap
    // sighting: under the harness's event name, never the payload's text.
    let gap = json!({
        "session_id": session, "cwd": repo, "agent_id": "a3f00d",
        "hook_event_name": v("payload hook_event_name"),
    });
    let out = env.hook_in(&repo, "subagent-stop", &gap);
    assert!(out.status.success());
    assert!(env
        .lane_of(&repo)
        .join("subagent-payload-gap.json")
        .exists());
    let end = json!({
        "session_id": session, "cwd": repo, "transcript_path": main,
        "hook_event_name": "SessionEnd", "description": v("payload description"),
    });
    // A session id shaped like a token is refused before anything is written.
    let bad_session = json!({
        "session_id": v("session id"), "cwd": repo, "transcript_path": main,
        "hook_event_name": "SessionEnd",
    });
    for p in [end, bad_session] {
        let out = env.hook_in(&repo, "session-end", &p);
        assert!(out.status.success());
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains(&v("session id")),
            "a refused id is never echoed"
        );
    }
    let run = |args: &[&str]| {
        let out = env.command(&repo).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The drain stores two and quarantines one: it says so with exit 1.
    let d = env
        .command(&repo)
        .args(["history", "drain"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&d.stderr).contains("1 staged transcript(s) could not be stored"),
        "{}",
        String::from_utf8_lossy(&d.stderr)
    );
    // The main thread and the first sub-agent are stored; the second is
    // quarantined (its parent id is a token). Discard what is left raw.
    let staged: serde_json::Value =
        serde_json::from_str(&run(&["--json", "history", "staged"])).unwrap();
    let quarantined = staged["quarantined"].as_array().unwrap().clone();
    assert_eq!(
        quarantined.len(),
        1,
        "{staged}\n{}\n{}",
        log.join("\n"),
        run(&["history", "list"])
    );
    assert!(staged["staged"].as_array().unwrap().is_empty(), "{staged}");
    for q in &quarantined {
        let stem = q["stem"].as_str().unwrap();
        run(&["history", "discard", stem, "--yes"]);
    }
    let listed = run(&["--json", "history", "list"]);
    assert!(listed.contains(session), "{listed}");
    let found = occurrences(&env.abcd_home, &planted);
    assert!(
        found.is_empty(),
        "planted values found under ABCD_HOME:\n{}",
        found.join("\n")
    );
    // And the journal verifies clean.
    run(&["journal", "verify"]);
}
