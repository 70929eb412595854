//! Spilled tool outputs (`<session>/tool-results/<name>`, where Claude
//! Code writes a tool output too large for the transcript line) are
//! captured by `history ingest` with their session, through the real
//! binary: one record each, in the session's repository, redacted by that
//! repository's configuration, under the agent id `tool-result-<stem>`
//! (agent type `tool-result`; a `toolu_…` stem is its spawn point);
//! idempotent; refused or skipped with the reason when they cannot be.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const S: &str = "c0ffee00-1111-4222-8333-444455556666";
const ORPHAN: &str = "0dd0dd00-1111-4222-8333-444455556666";
const SECRET: &str = "Hq7vN3kLw9XpR2tY7mBz";

fn main_line(session: &str, cwd: &Path) -> String {
    serde_json::json!({
        "type": "user",
        "sessionId": session,
        "cwd": cwd.display().to_string(),
        "message": {"role": "user", "content": "run the diff"},
    })
    .to_string()
        + "\n"
}

fn run(env: &Env) -> Value {
    // Files count as settled after 2 s: a clock ahead stands in for waiting.
    let out = env.abcd_env(
        &["--json", "history", "ingest"],
        &[("ABCD_TEST_NOW", "2099-01-01T00:00:00Z")],
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn record_named(lane: &Path, part: &str) -> String {
    let names: Vec<String> = fs::read_dir(lane.join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part))
        .collect();
    assert_eq!(names.len(), 1, "{part}: {names:?}");
    fs::read_to_string(lane.join("records").join(&names[0])).unwrap()
}

#[test]
fn spilled_tool_outputs_are_captured_with_their_session() {
    let env = Env::new();
    env.main_transcript(S, &main_line(S, &env.repo));
    let spills = env.claude.join(S).join("tool-results");
    fs::create_dir_all(&spills).unwrap();
    let diff = format!("diff --git a/x b/x\n+password={SECRET}\n+ok\n");
    fs::write(spills.join("toolu_01PjAbHr3SN2wyVY14uFwFju.txt"), &diff).unwrap();
    fs::write(spills.join("bx04dz8mt.txt"), "a long listing\nline two\n").unwrap();
    // Bytes that are not text: redaction refuses them, nothing stored.
    fs::write(spills.join("binary.txt"), b"\xff\xfe\x00\x01").unwrap();
    // A symlink in tool-results is never followed.
    std::os::unix::fs::symlink("/etc/passwd", spills.join("passwd.txt")).unwrap();
    // A tool-results directory that is not in a session's directory.
    let stray = env.claude.join("not-a-session/tool-results");
    fs::create_dir_all(&stray).unwrap();
    fs::write(stray.join("x.txt"), "stray\n").unwrap();
    // The spill of a session with no main thread anywhere: an orphan.
    let lonely = env.claude.join(ORPHAN).join("tool-results");
    fs::create_dir_all(&lonely).unwrap();
    fs::write(lonely.join("y.txt"), "lonely\n").unwrap();

    let rep = run(&env);
    let stored: Vec<String> = rep["stored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["agent_id"].as_str().unwrap_or("main").to_owned())
        .collect();
    assert_eq!(
        stored,
        [
            "main",
            "tool-result-bx04dz8mt",
            "tool-result-toolu_01PjAbHr3SN2wyVY14uFwFju"
        ],
        "{rep:#}"
    );
    let mut reasons: Vec<&str> = rep["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        ["refused-by-redaction", "symlink", "unplaced-spill"],
        "{rep:#}"
    );
    let orphans = rep["orphans"].as_array().unwrap();
    assert_eq!(orphans.len(), 1, "{rep:#}");
    assert_eq!(orphans[0]["session_id"], ORPHAN);
    assert_eq!(rep["failed"].as_array().unwrap().len(), 0, "{rep:#}");

    let lane = env.lane();
    let text = record_named(&lane, "toolu_01PjAbHr3SN2wyVY14uFwFju");
    assert!(text.contains(&format!("session_id: {S}")), "{text}");
    assert!(text.contains("agent_type: tool-result"), "{text}");
    assert!(
        text.contains("spawn_tool_use_id: toolu_01PjAbHr3SN2wyVY14uFwFju"),
        "{text}"
    );
    assert!(text.contains("+password=[REDACTED"), "{text}");
    assert!(
        text.ends_with("+ok\n"),
        "the text itself is the body: {text}"
    );
    let plain = record_named(&lane, "bx04dz8mt");
    assert!(plain.contains("spawn_attribution: unattributed"), "{plain}");
    assert!(
        plain.ends_with("---\na long listing\nline two\n"),
        "{plain}"
    );
    assert_secret_nowhere(&env);

    // Idempotent: nothing new on a second run.
    let again = run(&env);
    assert_eq!(again["stored"].as_array().unwrap().len(), 0, "{again:#}");
    assert_eq!(again["already_stored"].as_array().unwrap().len(), 3);
    let out = env.abcd(&["journal", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // A replay reproduces them.
    let before = converged(&lane);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(before, converged(&lane));
}

/// A spilled tool output is stored beside its session's threads: `stats`
/// does not count it as a sub-agent, `list` does not draw it in the agent
/// tree, and `reconstruct`/`export` name it without parsing it as a thread.
#[test]
fn spilled_tool_outputs_are_not_sub_agents() {
    let env = Env::new();
    env.main_transcript(S, &main_line(S, &env.repo));
    let agent_line = serde_json::json!({
        "type": "user",
        "sessionId": S,
        "agentId": "a1b2c3d4e5f6a7b8c",
        "isSidechain": true,
        "cwd": env.repo.display().to_string(),
        "message": {"role": "user", "content": "look around"},
    })
    .to_string()
        + "\n";
    env.agent_transcript(S, "a1b2c3d4e5f6a7b8c", &agent_line, None);
    let spills = env.claude.join(S).join("tool-results");
    fs::create_dir_all(&spills).unwrap();
    fs::write(spills.join("toolu_01PjAbHr3SN2wyVY14uFwFju.txt"), "diff\n").unwrap();
    fs::write(spills.join("bx04dz8mt.txt"), "a long listing\n").unwrap();
    let rep = run(&env);
    assert_eq!(rep["stored"].as_array().unwrap().len(), 4, "{rep:#}");

    let out = env.abcd(&["--json", "history", "stats"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["sessions"], 1, "{st:#}");
    assert_eq!(st["sub_agents"], 1, "{st:#}");
    assert_eq!(st["tool_outputs"], 2, "{st:#}");
    assert!(
        st["sub_agents_by_type"].get("tool-result").is_none(),
        "{st:#}"
    );
    let out = env.abcd(&["history", "stats"]);
    assert!(
        stdout(&out).contains("tool outputs: 2 spilled"),
        "{}",
        stdout(&out)
    );

    // The record list holds all four; the session's agent tree one.
    let out = env.abcd(&["--json", "history", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 4, "{records:#}");
    let out = env.abcd(&["history", "list"]);
    let text = stdout(&out);
    assert_eq!(text.matches("└─").count(), 1, "{text}");
    assert!(text.contains("+ 2 spilled tool output(s)"), "{text}");
    assert!(!text.contains("└─ tool-result-"), "{text}");

    let out = env.abcd(&["history", "reconstruct", S]);
    assert!(out.status.success(), "{}", stderr(&out));
    let md = stdout(&out);
    assert!(md.contains("- sub-agents: 1"), "{md}");
    assert_eq!(md.matches("spilled tool output `").count(), 2, "{md}");
    let out = env.abcd(&["history", "export", S, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["threads"].as_array().unwrap().len(), 2, "{j:#}");
    assert_eq!(j["tool_outputs"].as_array().unwrap().len(), 2, "{j:#}");
}

/// No file of the store holds [`SECRET`].
fn assert_secret_nowhere(env: &Env) {
    for e in walk_files(&env.abcd_home) {
        let bytes = fs::read(&e).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the secret",
            e.display()
        );
    }
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The Stop and SessionEnd hooks stage the session's spilled outputs too
/// (Claude Code deletes them with the transcript after 30 days): each
/// once, never a symlink, redacted and stored by the next drain like the
/// ones `history ingest` finds, which then finds them already stored.
#[test]
fn the_stop_hook_stages_a_sessions_spilled_outputs_once() {
    let env = Env::new();
    let main = env.main_transcript(S, &main_line(S, &env.repo));
    let spills = env.claude.join(S).join("tool-results");
    fs::create_dir_all(&spills).unwrap();
    fs::write(
        spills.join("toolu_01PjAbHr3SN2wyVY14uFwFju.txt"),
        format!("+password={SECRET}\n+ok\n"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", spills.join("passwd.txt")).unwrap();
    let mut stop = env.end_payload(S, &main);
    stop["hook_event_name"] = "Stop".into();

    let first = hook_json(&env.hook("stop", &stop));
    assert_eq!(first["tool_outputs_staged"], 1, "{first:#}");
    // The next turn's Stop, before any drain: already staged.
    let second = hook_json(&env.hook("stop", &stop));
    assert!(second.get("tool_outputs_staged").is_none(), "{second:#}");
    env.drain();
    // One written later is staged by the next hook; the stored one is not
    // read again (Claude Code never rewrites one: were it read, these new
    // bytes would be staged too).
    fs::write(spills.join("bx04dz8mt.txt"), "a long listing\n").unwrap();
    fs::write(
        spills.join("toolu_01PjAbHr3SN2wyVY14uFwFju.txt"),
        "rewritten\n",
    )
    .unwrap();
    let end = hook_json(&env.hook("session-end", &env.end_payload(S, &main)));
    assert_eq!(end["tool_outputs_staged"], 1, "{end:#}");
    fs::write(
        spills.join("toolu_01PjAbHr3SN2wyVY14uFwFju.txt"),
        format!("+password={SECRET}\n+ok\n"),
    )
    .unwrap();
    env.drain();

    let lane = env.lane();
    let text = record_named(&lane, "toolu_01PjAbHr3SN2wyVY14uFwFju");
    assert!(text.contains(&format!("session_id: {S}")), "{text}");
    assert!(text.contains("agent_type: tool-result"), "{text}");
    assert!(text.contains("lineage_source: hook"), "{text}");
    assert!(
        text.contains("spawn_tool_use_id: toolu_01PjAbHr3SN2wyVY14uFwFju"),
        "{text}"
    );
    assert!(text.contains("+password=[REDACTED"), "{text}");
    assert!(text.ends_with("+ok\n"), "{text}");
    let plain = record_named(&lane, "bx04dz8mt");
    assert!(plain.ends_with("---\na long listing\n"), "{plain}");
    let names: Vec<String> = fs::read_dir(lane.join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "the main thread and two outputs: {names:?}");
    assert!(!names.iter().any(|n| n.contains("passwd")), "{names:?}");
    assert_secret_nowhere(&env);
    // `history ingest` afterwards finds them stored.
    let rep = run(&env);
    assert_eq!(rep["stored"].as_array().unwrap().len(), 0, "{rep:#}");
    assert_eq!(
        rep["already_stored"].as_array().unwrap().len(),
        3,
        "{rep:#}"
    );
}
