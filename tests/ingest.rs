//! `history ingest` through the real binary, over a synthetic
//! `~/.claude/projects` in a temporary HOME built from the public fixtures:
//! three repositories, a directory in no repository, an orphan without a
//! cwd, and files that must be refused. Also the transcript-shape
//! refusals of `history capture` and the hooks (issue 11, point 4).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Copies a public fixture to `to`, every line's `cwd` set to `cwd` (or
/// removed with `None`); lines that are not JSON objects are kept as is.
fn place(fixture: &str, to: &Path, cwd: Option<&Path>) {
    let text = fs::read_to_string(fixtures().join(fixture)).unwrap();
    let mut out = String::new();
    for l in text.lines() {
        match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(mut o)) => {
                if o.contains_key("cwd") {
                    match cwd {
                        Some(c) => {
                            o.insert("cwd".into(), Value::String(c.display().to_string()));
                        }
                        None => {
                            o.remove("cwd");
                        }
                    }
                }
                out.push_str(&Value::Object(o).to_string());
            }
            _ => out.push_str(l),
        }
        out.push('\n');
    }
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::write(to, out).unwrap();
}

struct World {
    env: Env,
    projects: PathBuf,
    repo_b: PathBuf,
    repo_c: PathBuf,
}

const CCH: &str = "cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit";
const CCL: &str = "claude-code-log/test/test_data";

fn world() -> World {
    let env = Env::new();
    let t = env.tmp.path();
    let repo_b = t.join("repo-b");
    let repo_c = t.join("repo-c");
    Env::init_repo(&repo_b, &env.home, "b");
    Env::init_repo(&repo_c, &env.home, "c");
    fs::create_dir_all(repo_c.join("src/deep")).unwrap();
    let scratch = t.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let projects = env.home.join(".claude/projects");
    let a = projects.join("-repo-a");
    let s1 = "cc1df109-4282-4321-8248-8bbcd471da78";
    place(
        &format!("{CCH}/{s1}.jsonl"),
        &a.join(format!("{s1}.jsonl")),
        Some(&env.repo),
    );
    place(
        &format!("{CCH}/{s1}/subagents/agent-a0a2928875cb36a92.jsonl"),
        &a.join(format!("{s1}/subagents/agent-a0a2928875cb36a92.jsonl")),
        Some(&env.repo),
    );
    let s2 = "b98095d7-b7ee-4d23-9d4c-beb9725d1dc5";
    place(
        &format!("{CCH}/{s2}.jsonl"),
        &a.join(format!("{s2}.jsonl")),
        Some(&env.repo),
    );
    // Refused: not a transcript, two sessions in one file, a symlink.
    fs::write(a.join("notes.jsonl"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    place(
        &format!("{CCL}/edge_cases.jsonl"),
        &a.join("edge_cases.jsonl"),
        Some(&env.repo),
    );
    std::os::unix::fs::symlink(a.join(format!("{s2}.jsonl")), a.join("link.jsonl")).unwrap();

    let b = projects.join("-repo-b");
    let s3 = "55550000-0000-4000-8000-000000000001";
    place(
        &format!("{CCL}/minimal_showcase/{s3}.jsonl"),
        &b.join(format!("{s3}.jsonl")),
        Some(&repo_b),
    );
    place(
        &format!("{CCL}/minimal_showcase/{s3}/subagents/agent-showcol1.jsonl"),
        &b.join(format!("{s3}/subagents/agent-showcol1.jsonl")),
        Some(&repo_b),
    );
    let s4 = "22220000-0000-4000-8000-000000000002";
    let wf = format!("{s4}/subagents/workflows/wf_sp01");
    place(
        &format!("{CCL}/workflow_scriptpath/{s4}.jsonl"),
        &b.join(format!("{s4}.jsonl")),
        Some(&repo_b),
    );
    place(
        &format!("{CCL}/workflow_scriptpath/{wf}/agent-agsp0001.jsonl"),
        &b.join(format!("{wf}/agent-agsp0001.jsonl")),
        Some(&repo_b),
    );
    // The workflow's own journal carries no sessionId.
    place(
        &format!("{CCL}/workflow_scriptpath/{wf}/journal.jsonl"),
        &b.join(format!("{wf}/journal.jsonl")),
        None,
    );

    let c = projects.join("-repo-c");
    place(
        "git-ai/tests/fixtures/example-claude-code.jsonl",
        &c.join("cb947e5b-246e-4253-a953-631f7e464c6b.jsonl"),
        Some(&repo_c.join("src/deep")),
    );
    // The older sibling layout, with no main thread: placed by its own cwd.
    place(
        "rekal-cli/cmd/rekal/cli/session/testdata/real/8d1a1f9e-b38c-41fa-952a-5288179b5626/subagents/agent-a490235204f1c154d.jsonl",
        &c.join("agent-a490235204f1c154d.jsonl"),
        Some(&repo_c),
    );

    // A session run in a directory that is in no repository.
    place(
        "git-ai/tests/fixtures/claude-code-with-thinking.jsonl",
        &projects.join("-scratch/dac34307-159f-4fcd-9c21-35210246ad38.jsonl"),
        Some(&scratch),
    );
    // An orphan: no cwd at all.
    place(
        &format!("{CCL}/session_b.jsonl"),
        &projects.join("-gone/session_b.jsonl"),
        None,
    );
    World {
        env,
        projects,
        repo_b,
        repo_c,
    }
}

fn ingest(env: &Env, args: &[&str]) -> Value {
    let mut full = vec!["--json", "history", "ingest"];
    full.extend_from_slice(args);
    let out = env.abcd(&full);
    assert!(
        out.status.success(),
        "ingest failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn reasons(rep: &Value) -> Vec<String> {
    let mut v: Vec<String> = rep["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn ingest_places_each_session_in_its_repository_and_is_idempotent() {
    let w = world();
    let env = &w.env;
    // The default source: ~/.claude/projects of the (temporary) HOME.
    let rep = ingest(env, &[]);
    assert_eq!(rep["stored"].as_array().unwrap().len(), 10, "{rep:#}");
    assert_eq!(
        reasons(&rep),
        [
            "ambiguous-session-id",
            "no-session-id",
            "not-a-transcript",
            "symlink"
        ],
        "{rep:#}"
    );
    assert_eq!(rep["failed"].as_array().unwrap().len(), 0, "{rep:#}");
    let orphans: Vec<&str> = rep["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["project"].as_str().unwrap())
        .collect();
    assert_eq!(orphans, ["-gone"], "{rep:#}");
    // The session run in no repository is kept in its directory's lane
    // (issue 11, point 5), labelled with the directory.
    let scratch = fs::canonicalize(env.tmp.path().join("scratch")).unwrap();
    let in_dir: Vec<&Value> = rep["stored"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["root_sha"].as_str().unwrap().starts_with("dir-"))
        .collect();
    assert_eq!(in_dir.len(), 1, "{rep:#}");
    assert_eq!(
        in_dir[0]["session_id"],
        "dac34307-159f-4fcd-9c21-35210246ad38"
    );
    let dir_lane = env
        .abcd_home
        .join("transcripts")
        .join(in_dir[0]["root_sha"].as_str().unwrap());
    assert_eq!(record_names(&dir_lane).len(), 1);
    let all = env.json(&["history", "list", "--all-repos"]);
    let listed = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == "dac34307-159f-4fcd-9c21-35210246ad38")
        .unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(listed["lane_kind"], "directory");
    assert_eq!(listed["repository"], scratch.display().to_string().as_str());
    // Each repository got its own sessions, sub-agents included.
    assert_eq!(record_names(&env.lane()).len(), 3);
    assert_eq!(record_names(&env.lane_of(&w.repo_b)).len(), 4);
    assert_eq!(record_names(&env.lane_of(&w.repo_c)).len(), 2);
    let stored = rep["stored"].as_array().unwrap();
    let by_agent = |a: &str| {
        stored
            .iter()
            .find(|s| s["agent_id"] == a)
            .unwrap_or_else(|| panic!("agent {a} stored: {rep:#}"))
    };
    // The workflow child's `<parent>#agent-<id>` session id is cut to the
    // parent; the older sibling layout is placed by its own cwd.
    assert_eq!(
        by_agent("agsp0001")["session_id"],
        "22220000-0000-4000-8000-000000000002"
    );
    assert_eq!(by_agent("agsp0001")["via"], "session-cwd");
    assert_eq!(by_agent("a490235204f1c154d")["via"], "file-cwd");
    // Main threads before sub-agents, in each repository's journal.
    for sha in [env.root_sha(), env.root_sha_of(&w.repo_b)] {
        let lane: Vec<&Value> = stored
            .iter()
            .filter(|s| s["root_sha"] == sha.as_str())
            .collect();
        let first_agent = lane
            .iter()
            .position(|s| s.get("agent_id").is_some())
            .unwrap();
        assert!(first_agent > 0);
        assert!(lane[first_agent..]
            .iter()
            .all(|s| s.get("agent_id").is_some()));
    }
    // Records carry the ingest lineage and are listed.
    let list = env.records();
    assert_eq!(list.len(), 3, "{list:#?}");

    // Second run: nothing new.
    let lanes_before = (
        record_names(&env.lane()),
        record_names(&env.lane_of(&w.repo_b)),
        record_names(&env.lane_of(&w.repo_c)),
    );
    let again = ingest(env, &[]);
    assert_eq!(again["stored"].as_array().unwrap().len(), 0, "{again:#}");
    assert_eq!(again["already_stored"].as_array().unwrap().len(), 10);
    assert_eq!(
        lanes_before,
        (
            record_names(&env.lane()),
            record_names(&env.lane_of(&w.repo_b)),
            record_names(&env.lane_of(&w.repo_c)),
        )
    );

    // A grown transcript is stored again (and supersedes the shorter one).
    let s2 = w
        .projects
        .join("-repo-a/b98095d7-b7ee-4d23-9d4c-beb9725d1dc5.jsonl");
    let mut text = fs::read_to_string(&s2).unwrap();
    text.push_str(&line(
        "b98095d7-b7ee-4d23-9d4c-beb9725d1dc5",
        "one more turn",
    ));
    text.push('\n');
    fs::write(&s2, text).unwrap();
    let grown = ingest(env, &[s2.to_str().unwrap()]);
    assert_eq!(grown["stored"].as_array().unwrap().len(), 1, "{grown:#}");
    assert_eq!(env.records().len(), 3, "the longer record supersedes");

    // --into with --adopt: the orphan of that project comes in; sessions
    // of the other repositories are owned elsewhere.
    let repo = env.repo.to_str().unwrap();
    let adopt = ingest(env, &["--into", repo, "--adopt", "-gone"]);
    let adopted: Vec<&Value> = adopt["stored"].as_array().unwrap().iter().collect();
    assert_eq!(adopted.len(), 1, "{adopt:#}");
    assert_eq!(adopted[0]["via"], "adopted");
    assert_eq!(adopted[0]["session_id"], "session_b");
    assert_eq!(
        adopt["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["reason"] == "owned-elsewhere")
            .count(),
        7,
        "{adopt:#}"
    );
    assert_eq!(
        adopt["orphans"].as_array().unwrap().len(),
        0,
        "-scratch is owned by its directory lane: {adopt:#}"
    );
}

#[test]
fn ingest_dry_run_writes_nothing_and_text_report_names_the_counts() {
    let w = world();
    let env = &w.env;
    let out = env.abcd(&["history", "ingest", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("would store 10"), "{text}");
    assert!(text.contains("orphan"), "{text}");
    assert!(!env.lane().exists(), "a dry run creates no lane");
    assert!(!env.lane_of(&w.repo_b).exists());
    // After a real run, a dry run finds everything already stored.
    ingest(env, &[]);
    let dry = ingest(env, &["--dry-run"]);
    assert_eq!(dry["stored"].as_array().unwrap().len(), 0, "{dry:#}");
    assert_eq!(dry["already_stored"].as_array().unwrap().len(), 10);
}

#[test]
fn ingest_of_a_symlinked_projects_directory_walks_its_target_only() {
    let w = world();
    let env = &w.env;
    let real = env.tmp.path().join("dotfiles-projects");
    fs::rename(&w.projects, &real).unwrap();
    std::os::unix::fs::symlink(&real, &w.projects).unwrap();
    let rep = ingest(env, &[]);
    assert_eq!(rep["stored"].as_array().unwrap().len(), 10, "{rep:#}");
    assert!(rep["notes"][0].as_str().unwrap().contains("is a symlink"));
    // CLAUDE_CONFIG_DIR moves the default source.
    let cfg = env.tmp.path().join("cfg");
    fs::create_dir_all(cfg.join("projects")).unwrap();
    let out = env.abcd_env(
        &["--json", "history", "ingest"],
        &[("CLAUDE_CONFIG_DIR", cfg.to_str().unwrap())],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"], 0);
}

#[test]
fn ingest_of_a_missing_source_says_what_to_pass() {
    let env = Env::new();
    let out = env.abcd(&["history", "ingest", "/nonexistent/projects"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn capture_refuses_what_is_not_a_transcript_and_takes_ids_from_content() {
    let env = Env::new();
    let passwd = env.tmp.path().join("passwd");
    fs::write(&passwd, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let out = env.abcd(&[
        "history",
        "capture",
        passwd.to_str().unwrap(),
        "--session",
        "s1",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("is not a Claude Code transcript") && err.contains("passwd"),
        "{err}"
    );
    assert!(!env.lane().exists(), "nothing stored, not even a lane");

    // The file name says one thing, the content another: the content wins.
    let f = env.tmp.path().join("misnamed.jsonl");
    fs::write(&f, jsonl(&[&line("real-session", "hi")])).unwrap();
    let v: Value = serde_json::from_slice(
        &env.abcd(&["--json", "history", "capture", f.to_str().unwrap()])
            .stdout,
    )
    .unwrap();
    assert_eq!(v["session_id"], "real-session");
    // A contradicting --session is refused.
    let out = env.abcd(&[
        "history",
        "capture",
        f.to_str().unwrap(),
        "--session",
        "other",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--session says"), "{}", stderr(&out));
    // An older shape with no sessionId needs --session.
    let old = env.tmp.path().join("old.jsonl");
    fs::write(
        &old,
        "{\"type\":\"summary\",\"summary\":\"s\",\"leafUuid\":\"u\"}\n",
    )
    .unwrap();
    let out = env.abcd(&["history", "capture", old.to_str().unwrap()]);
    assert!(stderr(&out).contains("pass --session"), "{}", stderr(&out));
    let out = env.abcd(&[
        "history",
        "capture",
        old.to_str().unwrap(),
        "--session",
        "older-1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn hooks_refuse_a_transcript_path_that_is_not_a_transcript() {
    let env = Env::new();
    let sid = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
    let bogus = env.tmp.path().join("environ");
    fs::write(&bogus, b"PATH=/usr/bin\0HOME=/root\0SECRET=hunter2\0").unwrap();
    let out = env.hook("session-end", &env.end_payload(sid, &bogus));
    let err = stderr(&out);
    assert!(err.contains("not a Claude Code transcript"), "{err}");
    assert_ne!(hook_json(&out)["outcome"], "staged");
    let staging = env.lane().join("staging");
    let blobs = fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
    assert_eq!(blobs, 0, "no blob left behind");
    // A sub-agent payload naming it: same.
    let out = env.hook("subagent-stop", &env.subagent_payload(sid, "a1", &bogus));
    assert!(
        stderr(&out).contains("not a Claude Code transcript"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ingest_bad_input_is_skipped_or_failed_with_the_reason() {
    let env = Env::new();
    let projects = env.home.join(".claude/projects");
    let sid = "bad00000-0000-4000-8000-000000000001";
    let repo = env.repo.display().to_string();
    let body = |text: &str| {
        serde_json::json!({"type": "user", "sessionId": sid, "cwd": repo, "message": {"role": "user", "content": text}})
            .to_string()
            + "\n"
    };
    // A project directory name over 200 characters with its hash suffix:
    // a label, never decoded.
    let long = format!("-{}-3f9a1c2b", "x".repeat(200));
    let p = projects.join(&long);
    fs::create_dir_all(&p).unwrap();
    fs::write(p.join(format!("{sid}.jsonl")), body("main")).unwrap();
    // Non-UTF-8 bytes after a transcript-shaped first line: redaction
    // refuses it, nothing stored.
    let s2 = "bad00000-0000-4000-8000-000000000002";
    let mut bytes = body("ok").replace(sid, s2).into_bytes();
    bytes.extend_from_slice(b"\xff\xfe\n");
    fs::write(p.join(format!("{s2}.jsonl")), bytes).unwrap();
    // A FIFO named like a transcript: never opened for a blocking read.
    let fifo = p.join("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A 2 GB file of zeros (sparse): over the in-memory cap, so probed by
    // its head, and refused there (not a transcript), never read whole.
    let huge = fs::File::create(p.join("huge.jsonl")).unwrap();
    huge.set_len(2 << 30).unwrap();
    // An agent id claimed by two files (both layouts): their sidecars are
    // dropped.
    let agent_line = |text: &str| {
        serde_json::json!({"type": "user", "sessionId": sid, "agentId": "dup1", "isSidechain": true, "cwd": repo, "message": {"role": "user", "content": text}})
            .to_string()
            + "\n"
    };
    let sc = r#"{"agentType":"Explore","spawnDepth":1,"toolUseId":"toolu_x"}"#;
    let nested = p.join(format!("{sid}/subagents"));
    fs::create_dir_all(&nested).unwrap();
    fs::write(nested.join("agent-dup1.jsonl"), agent_line("one")).unwrap();
    fs::write(nested.join("agent-dup1.meta.json"), sc).unwrap();
    fs::write(p.join("agent-dup1.jsonl"), agent_line("two")).unwrap();
    fs::write(p.join("agent-dup1.meta.json"), sc).unwrap();
    // A sidecar whose agent is claimed once gives the lineage.
    fs::write(
        nested.join("agent-solo1.jsonl"),
        agent_line("solo").replace("dup1", "solo1"),
    )
    .unwrap();
    fs::write(
        nested.join("agent-solo1.meta.json"),
        r#"{"agentType":"Plan","spawnDepth":1,"toolUseId":"toolu_y"}"#,
    )
    .unwrap();
    // Deeper than 8 levels: not walked.
    let mut deep = projects.join("-deep");
    for i in 0..9 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("deep.jsonl"), body("deep")).unwrap();

    let rep = ingest(&env, &[]);
    assert_eq!(
        reasons(&rep),
        [
            "not-a-regular-file",
            "not-a-transcript",
            "refused-by-redaction",
            "too-deep"
        ],
        "{rep:#}"
    );
    assert_eq!(rep["failed"].as_array().unwrap().len(), 0, "{rep:#}");
    let stored = rep["stored"].as_array().unwrap();
    assert_eq!(stored.len(), 4, "{rep:#}");
    let notes = rep["notes"].to_string();
    assert_eq!(notes.matches("sidecar was dropped").count(), 2, "{rep:#}");
    let mut dup = 0;
    for name in record_names(&env.lane()) {
        if name.contains("dup1") {
            dup += 1;
            let text = fs::read_to_string(env.lane().join("records").join(&name)).unwrap();
            assert!(
                !text.contains("toolu_x"),
                "a dropped sidecar's lineage: {text}"
            );
            assert!(text.contains("unattributed"), "{text}");
        }
    }
    assert_eq!(dup, 2);
    let solo = record_names(&env.lane())
        .into_iter()
        .find(|n| n.contains("solo1"))
        .unwrap();
    let text = fs::read_to_string(env.lane().join("records").join(solo)).unwrap();
    assert!(text.contains("toolu_y") && text.contains("Plan"), "{text}");
}

#[test]
fn an_ingest_killed_midway_is_finished_by_running_it_again() {
    // Learn how many syncs a whole ingest makes, then kill at the first,
    // one in the middle and the last.
    let syncs = {
        let w = world();
        let trace = w.env.tmp.path().join("trace");
        let out = w.env.abcd_env(
            &["--json", "history", "ingest"],
            &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
        );
        assert!(out.status.success());
        let t = fs::read_to_string(&trace).unwrap();
        t.lines()
            .filter(|l| l.split(' ').nth(1) == Some("sync"))
            .count()
    };
    assert!(syncs >= 3, "{syncs}");
    for n in [1, syncs / 2, syncs] {
        let w = world();
        let env = &w.env;
        let spec = format!("sync#{n}:KILL");
        let out = env.abcd_env(
            &["--json", "history", "ingest"],
            &[("ABCD_FAULT_INJECT", &spec)],
        );
        assert_eq!(out.status.code(), None, "{spec}: killed, {}", stderr(&out));
        let rep = ingest(env, &[]);
        assert_eq!(
            rep["failed"].as_array().unwrap().len(),
            0,
            "{spec}: {rep:#}"
        );
        assert_eq!(
            rep["stored"].as_array().unwrap().len()
                + rep["already_stored"].as_array().unwrap().len(),
            10,
            "{spec}: {rep:#}"
        );
        assert_eq!(record_names(&env.lane()).len(), 3, "{spec}");
        assert_eq!(record_names(&env.lane_of(&w.repo_b)).len(), 4, "{spec}");
        assert_eq!(record_names(&env.lane_of(&w.repo_c)).len(), 2, "{spec}");
        for dir in [&env.repo, &w.repo_b, &w.repo_c] {
            let out = env.abcd(&["journal", "verify", "--repo", dir.to_str().unwrap()]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{spec}: {}{}",
                stdout(&out),
                stderr(&out)
            );
        }
    }
}

#[test]
fn what_ingest_wrote_is_reproduced_by_a_replay() {
    let w = world();
    let env = &w.env;
    ingest(env, &[]);
    let dirs = ["records", "sessions", "index/summary"];
    let before = env.snapshot(&dirs);
    assert_eq!(
        before.keys().filter(|k| k.starts_with("records/")).count(),
        3
    );
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(before, env.snapshot(&dirs));
}

#[test]
fn a_second_run_skips_unchanged_files_by_metadata_but_never_a_changed_one() {
    let w = world();
    let env = &w.env;
    // Files count as settled when their last change is 2 s before they are
    // looked at: a clock an hour ahead stands in for waiting.
    let later = [("ABCD_TEST_NOW", "2099-01-01T00:00:00Z")];
    let run = |env_vars: &[(&str, &str)]| -> Value {
        let out = env.abcd_env(&["--json", "history", "ingest"], env_vars);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let first = run(&later);
    assert_eq!(first["stored"].as_array().unwrap().len(), 10);
    let cache = fs::read_to_string(env.abcd_home.join("cache/ingest")).unwrap();
    assert!(
        !cache.contains(".claude") && !cache.contains(env.tmp.path().to_str().unwrap()),
        "the cache names files by digest only: {cache}"
    );
    let second = run(&[]);
    let unchanged = |rep: &Value| {
        rep["already_stored"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["via"] == "unchanged")
            .count()
    };
    assert_eq!(unchanged(&second), 10, "{second:#}");
    // Only the files that were never stored (refused, orphans) are read.
    assert!(
        second["bytes_read"].as_u64().unwrap() * 10 < first["bytes_read"].as_u64().unwrap(),
        "{second:#}"
    );
    assert!(second["already_stored"][0]["record"]
        .as_str()
        .unwrap()
        .ends_with(".md"));

    // Same size, same mtime, other bytes: the ctime gives it away.
    let f = w
        .projects
        .join("-repo-a/b98095d7-b7ee-4d23-9d4c-beb9725d1dc5.jsonl");
    let mtime = fs::metadata(&f).unwrap().modified().unwrap();
    let text = fs::read_to_string(&f).unwrap();
    let changed = text.replacen("\"user\"", "\"User\"", 1);
    assert_eq!(changed.len(), text.len());
    assert_ne!(changed, text);
    fs::write(&f, &changed).unwrap();
    fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let third = run(&later);
    assert_eq!(unchanged(&third), 9, "{third:#}");
    let stored = third["stored"].as_array().unwrap();
    assert_eq!(
        stored.len(),
        1,
        "the changed file is read and stored: {third:#}"
    );
    assert_eq!(
        stored[0]["session_id"],
        "b98095d7-b7ee-4d23-9d4c-beb9725d1dc5"
    );

    // A record the store no longer has is not taken on the cache's word.
    fs::remove_dir_all(env.lane()).unwrap();
    let fourth = run(&[]);
    assert_eq!(fourth["stored"].as_array().unwrap().len(), 3, "{fourth:#}");
}

/// Redaction runs on `--jobs` threads, yet the captures reach the journal
/// in file order: many files of very different sizes (a slow one, then
/// quick ones that finish first on other threads) give the same report
/// and the same record order with one thread as with four.
#[test]
fn ingest_on_many_threads_journals_in_file_order() {
    let env = Env::new();
    let fixture =
        fs::read_to_string(fixtures().join("git-ai/tests/fixtures/example-claude-code.jsonl"))
            .unwrap();
    let project = env.home.join(".claude/projects/-repo");
    fs::create_dir_all(&project).unwrap();
    let cwd = env.repo.display().to_string();
    let mut sessions = Vec::new();
    for i in 0..40 {
        let sid = format!("77770000-0000-4000-8000-{i:012}");
        let one = fixture
            .replace("cb947e5b-246e-4253-a953-631f7e464c6b", &sid)
            .replace("/Users/aidancunniffe/Desktop/ghq", &cwd);
        // Every fifth file is 30 times the others.
        let copies = if i % 5 == 0 { 30 } else { 1 };
        fs::write(project.join(format!("{sid}.jsonl")), one.repeat(copies)).unwrap();
        sessions.push(sid);
    }
    let order = |rep: &Value, home: &Path| -> (Vec<String>, Vec<String>) {
        let stored = rep["stored"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session_id"].as_str().unwrap().to_owned())
            .collect();
        // Record names start with their capture time: journal order.
        let lane = home.join("transcripts").join(env.root_sha());
        let mut names: Vec<String> = fs::read_dir(lane.join("records"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let by_time = names
            .iter()
            .map(|n| n.trim_end_matches(".md")[n.len() - 3 - 36..].to_owned())
            .collect();
        (stored, by_time)
    };
    let one = ingest(&env, &["--jobs", "1"]);
    let (stored1, time1) = order(&one, &env.abcd_home);
    let other_home = env.tmp.path().join("abcd-four");
    let out = env.abcd_env(
        &["--json", "history", "ingest", "--jobs", "4"],
        &[("ABCD_HOME", other_home.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let four: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (stored4, time4) = order(&four, &other_home);
    assert_eq!(stored1, sessions, "one thread stores in file order");
    assert_eq!(time1, sessions, "one thread journals in file order");
    assert_eq!(stored4, sessions, "four threads store in file order");
    assert_eq!(time4, sessions, "four threads journal in file order");
    assert_eq!(one["failed"], four["failed"]);
    assert_eq!(four["failed"].as_array().unwrap().len(), 0);
}
