//! The hook verbs, driven through the real binary (seed spec ac-1, ac-2,
//! ac-6 and the hook tests it names).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;
use serde_json::json;

const SID: &str = "11111111-2222-4333-8444-555555555555";

#[test]
fn subagent_stop_stages_lineage_from_the_harness_sidecar() {
    let env = Env::new();
    let body = jsonl(&[&line(SID, "explore the parser")]);
    let meta =
        r#"{"agentType":"Explore","description":"look","spawnDepth":1,"toolUseId":"toolu_01ABC"}"#;
    let path = env.agent_transcript(SID, "a1b2c3", &body, Some(meta));
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "a1b2c3", &path));
    assert_eq!(out.status.code(), Some(0));
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged", "{r}");
    assert_eq!(r["spawn_attribution"], "sidecar");
    assert_eq!(r["resolved_via"], "cwd");
    let staged = env.staged();
    let entries = staged["staged"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["agent_id"], "a1b2c3");
    assert_eq!(entries[0]["session_id"], SID);
    // The sidecar (staging view) carries the lineage.
    let stem = entries[0]["stem"].as_str().unwrap();
    let sc: serde_json::Value = serde_json::from_slice(
        &fs::read(
            env.lane()
                .join("staging")
                .join(format!("{stem}.stage.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(sc["spawn_depth"], 1);
    assert_eq!(sc["spawn_tool_use_id"], "toolu_01ABC");
    assert_eq!(sc["spawn_attribution"], "sidecar");
    assert_eq!(sc["lineage_source"], "hook");
}

#[test]
fn subagent_stop_stages_rather_than_captures() {
    let env = Env::new();
    let path = env.agent_transcript(SID, "agx", &jsonl(&[&line(SID, "hi")]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "agx", &path));
    assert_eq!(hook_json(&out)["outcome"], "staged");
    assert!(env.records().is_empty(), "a hook never captures");
    // The raw blob is kept byte for byte, at 0600.
    let staged = env.staged();
    let p = staged["staged"][0]["path"].as_str().unwrap().to_owned();
    assert_eq!(fs::read(&p).unwrap(), fs::read(&path).unwrap());
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        stdout(&env.hook_raw("subagent-stop", b"{}", &[]))
            .lines()
            .count()
            == 1
    );
}

#[test]
fn subagent_stop_then_session_start_stores_the_record() {
    let env = Env::new();
    let path = env.agent_transcript(SID, "agent7", &jsonl(&[&line(SID, "work")]), None);
    env.hook("subagent-stop", &env.subagent_payload(SID, "agent7", &path));
    let out = env.hook("session-start", &env.start_payload("next-session"));
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).lines().count() == 1);
    let recs = env.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["agent_id"], "agent7");
    assert_eq!(recs[0]["agent_type"], "Explore");
    assert_eq!(recs[0]["spawn_attribution"], "unattributed");
    assert!(env.staged()["staged"].as_array().unwrap().is_empty());
}

#[test]
fn hooks_print_nothing_on_stdout_without_json() {
    let env = Env::new();
    let path = env.agent_transcript(SID, "quiet", &jsonl(&[&line(SID, "x")]), None);
    for verb in [
        "subagent-stop",
        "session-start",
        "user-prompt-submit",
        "stop",
        "session-end",
    ] {
        let mut c = env.command(&env.repo);
        c.args(["hook", verb])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(
                env.subagent_payload(SID, "quiet", &path)
                    .to_string()
                    .as_bytes(),
            )
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{verb}");
        assert!(
            out.stdout.is_empty(),
            "{verb} printed on stdout: {:?}",
            stdout(&out)
        );
    }
}

#[test]
fn subagent_stop_always_exits_zero() {
    let env = Env::new();
    let dir = env.tmp.path().join("odd");
    fs::create_dir_all(&dir).unwrap();
    // An irregular file: a FIFO.
    let fifo = dir.join("agent-fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // An over-cap file (sparse, so the test stays fast).
    let big = dir.join("agent-big.jsonl");
    fs::File::create(&big)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    // A symlink to a real transcript.
    let real = env.agent_transcript(SID, "real", &jsonl(&[&line(SID, "x")]), None);
    let link = dir.join("agent-link.jsonl");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("absent path", env.subagent_payload(SID, "a1", &dir.join("missing.jsonl")).to_string().into_bytes()),
        ("fifo", env.subagent_payload(SID, "a2", &fifo).to_string().into_bytes()),
        ("over cap", env.subagent_payload(SID, "a3", &big).to_string().into_bytes()),
        ("symlink", env.subagent_payload(SID, "a4", &link).to_string().into_bytes()),
        ("malformed payload", b"{not json".to_vec()),
        ("no transcript path", json!({"session_id": SID, "cwd": env.repo, "agent_id": "a5", "hook_event_name": "SubagentStop"}).to_string().into_bytes()),
        ("no agent id", json!({"session_id": SID, "cwd": env.repo, "agent_transcript_path": real}).to_string().into_bytes()),
        ("empty stdin", Vec::new()),
    ];
    for (name, stdin) in cases {
        let out = env.hook_raw("subagent-stop", &stdin, &[]);
        assert_eq!(out.status.code(), Some(0), "{name}");
        assert!(
            !stderr(&out).trim().is_empty(),
            "{name}: a reason on stderr"
        );
        assert_eq!(hook_json(&out)["outcome"], "not-captured", "{name}");
    }
    assert!(env.records().is_empty());
    // Usage errors fail open too.
    let out = env.abcd(&["hook", "subagent-stop", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(0));
    let out = env.abcd(&["hook", "no-such-hook"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn subagent_stop_marks_a_missing_payload_field() {
    let env = Env::new();
    let p = json!({"session_id": SID, "cwd": env.repo, "agent_id": "gap1", "hook_event_name": "SubagentStop"});
    for _ in 0..2 {
        let out = env.hook("subagent-stop", &p);
        assert_eq!(out.status.code(), Some(0));
        assert!(stderr(&out).contains("agent_transcript_path"));
    }
    let marker: serde_json::Value =
        serde_json::from_slice(&fs::read(env.lane().join("subagent-payload-gap.json")).unwrap())
            .unwrap();
    assert_eq!(marker["count"], 2);
    assert_eq!(marker["event"], "SubagentStop");
    assert!(marker["first_seen"].as_str().unwrap() <= marker["last_seen"].as_str().unwrap());
    let text = stdout(&env.abcd(&["history", "staged"]));
    assert!(text.contains("without an agent_transcript_path"), "{text}");
    assert_eq!(env.staged()["subagent_gap"]["count"], 2);
}

#[test]
fn subagent_stop_resolves_the_repo_through_the_session() {
    let env = Env::new();
    // The session is noted by a hook that ran in the repository…
    let main = env.main_transcript(SID, &jsonl(&[&line(SID, "main")]));
    env.hook("stop", &env.end_payload(SID, &main));
    // …then a sub-agent stops in a worktree that no longer exists.
    let path = env.agent_transcript(SID, "wt1", &jsonl(&[&line(SID, "isolated")]), None);
    let mut p = env.subagent_payload(SID, "wt1", &path);
    p["cwd"] = json!(env.tmp.path().join("deleted-worktree"));
    let out = env.hook("subagent-stop", &p);
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged", "{}", stderr(&out));
    assert_eq!(r["resolved_via"], "session");
    assert_eq!(r["root_sha"], env.root_sha());
}

#[test]
fn subagent_stop_refuses_a_session_two_stores_claim() {
    let env = Env::new();
    let other = env.tmp.path().join("other");
    Env::init_repo(&other, &env.home, "second");
    let main = env.main_transcript(SID, &jsonl(&[&line(SID, "main")]));
    env.hook("stop", &env.end_payload(SID, &main));
    let mut p = env.end_payload(SID, &main);
    p["cwd"] = json!(other);
    env.hook("stop", &p);
    let path = env.agent_transcript(SID, "amb", &jsonl(&[&line(SID, "x")]), None);
    let mut p = env.subagent_payload(SID, "amb", &path);
    p["cwd"] = json!(env.tmp.path().join("gone"));
    let out = env.hook("subagent-stop", &p);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(hook_json(&out)["outcome"], "not-captured");
    assert!(
        stderr(&out).contains("refusing to guess") || stderr(&out).contains("claimed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn subagent_stop_stages_an_unsettled_transcript_with_a_warning() {
    let env = Env::new();
    let body = format!("{}\n{{\"type\":\"assistant\",\"partial", line(SID, "first"));
    let path = env.agent_transcript(SID, "uns", &body, None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "uns", &path));
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged");
    assert_eq!(r["settled"], false);
    assert!(stderr(&out).contains("may be short"), "{}", stderr(&out));
}

#[test]
fn stage_idempotency_is_per_session_and_agent() {
    let env = Env::new();
    let body = jsonl(&[&line(SID, "same")]);
    let p1 = env.agent_transcript(SID, "one", &body, None);
    let p2 = env.agent_transcript(SID, "two", &body, None);
    assert_eq!(
        hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, "one", &p1)))["outcome"],
        "staged"
    );
    assert_eq!(
        hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, "one", &p1)))["outcome"],
        "unchanged"
    );
    assert_eq!(
        hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, "two", &p2)))["outcome"],
        "staged"
    );
    fs::write(&p1, jsonl(&[&line(SID, "same"), &line(SID, "more")])).unwrap();
    assert_eq!(
        hook_json(&env.hook("subagent-stop", &env.subagent_payload(SID, "one", &p1)))["outcome"],
        "restaged"
    );
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), 2);
}

#[test]
fn session_end_and_stop_stage_the_main_thread() {
    let env = Env::new();
    let main = env.main_transcript(SID, &jsonl(&[&line(SID, "turn 1")]));
    assert_eq!(
        hook_json(&env.hook("stop", &env.end_payload(SID, &main)))["outcome"],
        "staged"
    );
    fs::write(&main, jsonl(&[&line(SID, "turn 1"), &line(SID, "turn 2")])).unwrap();
    assert_eq!(
        hook_json(&env.hook("stop", &env.end_payload(SID, &main)))["outcome"],
        "restaged"
    );
    assert_eq!(
        hook_json(&env.hook("session-end", &env.end_payload(SID, &main)))["outcome"],
        "unchanged"
    );
    let staged = env.staged();
    assert_eq!(staged["staged"].as_array().unwrap().len(), 1);
    assert!(staged["staged"][0].get("agent_id").is_none());
    // Session notes were written.
    assert!(env.lane().join("sessions").join(SID).is_file());
}

#[test]
fn prompt_router_drains_while_the_session_is_live() {
    let env = Env::new();
    for i in 0..3 {
        let p = env.agent_transcript(
            SID,
            &format!("live{i}"),
            &jsonl(&[&line(SID, &format!("n{i}"))]),
            None,
        );
        env.hook(
            "subagent-stop",
            &env.subagent_payload(SID, &format!("live{i}"), &p),
        );
    }
    let prompt = json!({"session_id": SID, "cwd": env.repo, "prompt": "go on", "hook_event_name": "UserPromptSubmit"});
    let out = env.hook("user-prompt-submit", &prompt);
    assert_eq!(out.status.code(), Some(0));
    let r = hook_json(&out);
    assert_eq!(r["drain"]["captured"], 1, "one entry per prompt: {r}");
    assert_eq!(r["drain"]["remaining"], 2);
    let out = env.hook("prompt-router", &prompt);
    assert_eq!(hook_json(&out)["drain"]["captured"], 1);
    assert_eq!(env.records().len(), 2);
}

#[test]
fn session_start_reports_another_repositorys_backlog() {
    let env = Env::new();
    let other = env.tmp.path().join("other");
    Env::init_repo(&other, &env.home, "second");
    let path = env.agent_transcript("s-other", "o1", &jsonl(&[&line("s-other", "x")]), None);
    let mut p = env.subagent_payload("s-other", "o1", &path);
    p["cwd"] = json!(other);
    assert_eq!(
        hook_json(&env.hook("subagent-stop", &p))["outcome"],
        "staged"
    );
    let out = env.hook("session-start", &env.start_payload(SID));
    let err = stderr(&out);
    assert!(err.contains("1 other repository"), "{err}");
    assert!(
        !err.contains("s-other"),
        "never another repository's session ids: {err}"
    );
    let survey = env.json(&["history", "staged", "--all-repos"]);
    let arr = survey.as_array().unwrap();
    assert_eq!(arr.len(), 1);
    assert_eq!(arr[0]["root_sha"], env.root_sha_of(&other));
    assert_eq!(arr[0]["staged"], 1);
}

#[test]
fn concurrent_subagent_completions_all_stage() {
    let env = Env::new();
    let n = 200;
    let mut children = Vec::new();
    for i in 0..n {
        let agent = format!("par{i:03}");
        let p = env.agent_transcript(SID, &agent, &jsonl(&[&line(SID, &agent)]), None);
        children.push(env.spawn_hook("subagent-stop", &env.subagent_payload(SID, &agent, &p)));
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    }
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), n);
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), n);
    let recs = env.records();
    assert_eq!(recs.len(), n);
    let mut agents: Vec<String> = recs
        .iter()
        .map(|r| r["agent_id"].as_str().unwrap().to_owned())
        .collect();
    agents.sort();
    agents.dedup();
    assert_eq!(agents.len(), n, "each exactly once");
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
}

#[test]
fn session_notes_are_pruned_after_thirty_days() {
    let env = Env::new();
    let old = env.main_transcript("old-sess", &jsonl(&[&line("old-sess", "x")]));
    let out = env.hook_env(
        "stop",
        &env.end_payload("old-sess", &old),
        &[("ABCD_TEST_NOW", "2026-01-01T00:00:00Z")],
    );
    assert_eq!(hook_json(&out)["outcome"], "staged");
    assert!(env.lane().join("sessions/old-sess").is_file());
    let new = env.main_transcript("new-sess", &jsonl(&[&line("new-sess", "y")]));
    let out = env.hook_env(
        "stop",
        &env.end_payload("new-sess", &new),
        &[("ABCD_TEST_NOW", "2026-03-01T00:00:00Z")],
    );
    assert_eq!(hook_json(&out)["outcome"], "staged");
    assert!(
        !env.lane().join("sessions/old-sess").exists(),
        "pruned past 30 days"
    );
    assert!(env.lane().join("sessions/new-sess").is_file());
}

#[test]
fn concurrent_stages_of_one_key_yield_one_copy() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "same", &jsonl(&[&line(SID, "one copy")]), None);
    let mut children = Vec::new();
    for _ in 0..24 {
        children.push(env.spawn_hook("subagent-stop", &env.subagent_payload(SID, "same", &p)));
    }
    let mut staged = 0;
    for c in children {
        let r = hook_json(&c.wait_with_output().unwrap());
        match r["outcome"].as_str().unwrap() {
            "staged" => staged += 1,
            "unchanged" => {}
            other => panic!("unexpected outcome {other}: {r}"),
        }
    }
    assert_eq!(staged, 1, "exactly one process stages, the rest are no-ops");
    assert_eq!(env.staged()["staged"].as_array().unwrap().len(), 1);
    let blobs = fs::read_dir(env.lane().join("staging"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".raw")
        })
        .count();
    assert_eq!(blobs, 1);
}

#[test]
fn survey_skips_repositories_holding_nothing() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "sv", &jsonl(&[&line(SID, "x")]), None);
    env.hook("subagent-stop", &env.subagent_payload(SID, "sv", &p));
    assert_eq!(
        env.json(&["history", "staged", "--all-repos"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    env.drain();
    // Records only: nothing unredacted, so the survey does not list it.
    assert_eq!(
        env.json(&["history", "staged", "--all-repos"])
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let text = stdout(&env.abcd(&["history", "staged", "--all-repos"]));
    assert!(
        text.contains("no repository in this store is holding unredacted transcript text"),
        "{text}"
    );
}

#[test]
fn a_symlinked_store_is_refused_with_a_clear_error_and_hooks_still_exit_zero() {
    let env = Env::new();
    let elsewhere = env.tmp.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(&env.abcd_home).unwrap();
    std::os::unix::fs::symlink(&elsewhere, env.abcd_home.join("transcripts")).unwrap();
    let out = env.abcd(&["history", "list"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    let p = env.agent_transcript(SID, "sl", &jsonl(&[&line(SID, "x")]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(SID, "sl", &p));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(hook_json(&out)["outcome"], "not-captured");
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through the link"
    );
}

#[test]
fn store_modes_are_exact_whatever_the_umask() {
    let env = Env::new();
    let p = env.agent_transcript(SID, "um", &jsonl(&[&line(SID, "x")]), None);
    let mut c = env.command(&env.repo);
    // A permissive umask must not widen anything abcd creates.
    c.args(["--json", "hook", "subagent-stop"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    unsafe {
        use std::os::unix::process::CommandExt;
        c.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(env.subagent_payload(SID, "um", &p).to_string().as_bytes())
        .unwrap();
    assert_eq!(
        hook_json(&child.wait_with_output().unwrap())["outcome"],
        "staged"
    );
    fn check(dir: &std::path::Path) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                assert_eq!(mode, 0o700, "{}", e.path().display());
                check(&e.path());
            } else {
                assert_eq!(mode, 0o600, "{}", e.path().display());
            }
        }
    }
    check(&env.abcd_home);
}
