//! The bugs a first run met (issue 13), each through the real binary in a
//! temporary HOME and ABCD_HOME.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{Env, BIN};
use serde_json::{json, Value};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn hook_help_is_help_and_a_real_hook_still_exits_0() {
    let env = Env::new();
    for args in [
        &["hook", "--help"][..],
        &["hook", "-h"],
        &["hook", "stop", "--help"],
    ] {
        let out = env.abcd(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let so = text(&out.stdout);
        assert!(so.contains("Usage:"), "{args:?} printed help: {so:?}");
        assert!(!text(&out.stderr).contains("nothing done"), "{args:?}");
    }
    // A usage error on `abcd hook …` still fails open, and says what was wrong.
    let out = env.abcd(&["hook", "stop", "extra"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let e = text(&out.stderr);
    assert!(e.contains("extra") && e.contains("nothing done"), "{e}");
    // A real hook invocation: exit 0, empty stdout.
    let out = env
        .command(&env.repo)
        .args(["hook", "stop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_relative_abcd_home_is_refused_and_creates_nothing() {
    let env = Env::new();
    let before: Vec<_> = fs::read_dir(&env.repo)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let out = env.abcd_env(&["history", "list"], &[("ABCD_HOME", "rel")]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("relative") && e.contains("absolute"), "{e}");
    let after: Vec<_> = fs::read_dir(&env.repo)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "nothing created in the work tree");
    // A hook refuses it too, exits 0 and writes nothing.
    let path = env.main_transcript("s1", "{\"type\":\"user\"}\n");
    let out = env.hook_env(
        "stop",
        &env.end_payload("s1", &path),
        &[("ABCD_HOME", "rel")],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(!env.repo.join("rel").exists());
}

#[test]
fn repair_on_a_clean_journal_says_one_thing() {
    let env = Env::new();
    stage_one(&env);
    let out = env.abcd(&["journal", "repair"]);
    assert_eq!(out.status.code(), Some(0));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("nothing to"), "{all}");
    assert!(!all.contains("--yes"), "no plan to apply: {all}");
}

#[test]
fn discard_accepts_the_stem_staged_json_prints() {
    let env = Env::new();
    stage_one(&env);
    let out = env.abcd(&["--json", "history", "staged"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stem = v["staged"][0]["stem"].as_str().unwrap().to_owned();
    let out = env.abcd(&["history", "discard", &stem, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // …and the `<stem>.raw` the text view prints, as before.
    let path = env.main_transcript("s2", "{\"type\":\"user\"}\n");
    assert!(env
        .hook("stop", &env.end_payload("s2", &path))
        .status
        .success());
    let v: Value =
        serde_json::from_slice(&env.abcd(&["--json", "history", "staged"]).stdout).unwrap();
    let stem = v["staged"][0]["stem"].as_str().unwrap().to_owned();
    let out = env.abcd(&["history", "discard", &format!("{stem}.raw"), "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_miss_exits_1_for_show_and_list_session_alike() {
    let env = Env::new();
    stage_one(&env);
    assert!(env.abcd(&["history", "drain"]).status.success());
    let show = env.abcd(&["history", "show", "nope"]);
    let list = env.abcd(&["history", "list", "--session", "nope"]);
    assert_eq!(show.status.code(), Some(1));
    assert_eq!(list.status.code(), Some(1), "{}", text(&list.stdout));
    let list_json = env.abcd(&["--json", "history", "list", "--session", "nope"]);
    assert_eq!(list_json.status.code(), Some(1));
    assert_eq!(text(&list_json.stdout).trim(), "[]");
    let show_json = env.abcd(&["--json", "history", "show", "nope"]);
    assert_eq!(show_json.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&show_json.stdout).expect("JSON on a miss");
    assert_eq!(v["key"], "nope");
    assert!(v["error"].as_str().unwrap().contains("no record"));
    // A hit still exits 0.
    assert_eq!(
        env.abcd(&["history", "list", "--session", "s1"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(env.abcd(&["history", "show", "s1"]).status.code(), Some(0));
}

#[test]
fn show_documents_its_key() {
    let env = Env::new();
    let out = env.abcd(&["history", "show", "--help"]);
    let h = text(&out.stdout);
    let line = h
        .lines()
        .find(|l| l.trim_start().starts_with("<KEY>"))
        .expect("KEY listed");
    assert!(line.trim() != "<KEY>", "KEY has help text: {h}");
}

#[test]
fn a_missing_repo_argument_is_named_as_such() {
    let env = Env::new();
    for args in [&["history", "list"][..], &["journal", "verify"]] {
        let mut a = vec!["--repo", "/nonexistent/abcd-test"];
        a.extend_from_slice(args);
        let out = env.abcd(&a);
        assert_eq!(out.status.code(), Some(1), "{a:?}");
        let e = text(&out.stderr);
        assert!(
            e.contains("--repo /nonexistent/abcd-test: no such directory"),
            "{e}"
        );
        assert!(!e.contains("sub-agent"), "{e}");
    }
}

#[test]
fn junk_payloads_journal_nothing() {
    let env = Env::new();
    let repo = env.repo.display().to_string();
    for (verb, payload) in [
        (
            "stop",
            json!({"session_id": "j1", "cwd": repo, "transcript_path": "/nonexistent/t.jsonl"}),
        ),
        (
            "session-end",
            json!({"session_id": "j2", "cwd": repo, "transcript_path": "/nonexistent/t.jsonl"}),
        ),
        (
            "subagent-stop",
            json!({"session_id": "j3", "cwd": repo, "agent_id": "a1", "agent_transcript_path": "/nonexistent/a.jsonl"}),
        ),
        ("stop", json!({"session_id": "j4", "cwd": repo})),
    ] {
        let out = env.hook(verb, &payload);
        assert_eq!(out.status.code(), Some(0));
    }
    let dump = env.abcd(&["journal", "dump"]);
    let d = text(&dump.stdout);
    assert!(!d.contains("session-noted"), "junk journaled: {d}");
    // A real one still notes its session.
    stage_one(&env);
    let d = text(&env.abcd(&["journal", "dump"]).stdout);
    assert!(d.contains("session-noted"), "{d}");
}

/// `tools/demo.sh` with `CARGO_TARGET_DIR` elsewhere: a stand-in `cargo`
/// puts this test's binary where a release build would land (under the
/// host's target directory, as this checkout's cargo config makes it) and
/// prints cargo's JSON messages naming it, so the test checks the script's
/// own logic without a seven-minute build.
#[test]
fn the_demo_finds_its_binary_under_cargo_target_dir() {
    let env = Env::new();
    let bin_dir = env.tmp.path().join("fake-bin");
    fs::create_dir_all(&bin_dir).unwrap();
    let fake = bin_dir.join("cargo");
    // What real cargo prints with --message-format=json: one line per
    // artifact, the binary's carrying its path in "executable".
    let script = r#"#!/bin/sh
[ "$1" = build ] || exit 3
d="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
mkdir -p "$d" && cp 'BIN' "$d/abcd" || exit 4
echo '{"reason":"compiler-artifact","target":{"name":"build-script-build"},"executable":null}'
echo "{\"reason\":\"compiler-artifact\",\"target\":{\"name\":\"abcd\"},\"executable\":\"$d/abcd\",\"fresh\":false}"
echo '{"reason":"build-finished","success":true}'
"#;
    fs::write(&fake, script.replace("BIN", BIN)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(root.join("tools/demo.sh"))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", env.tmp.path().join("elsewhere"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("the journal behind it"));
}

/// Stages one small main-thread transcript (session `s1`) through the Stop hook.
fn stage_one(env: &Env) {
    let path = env.main_transcript("s1", "{\"type\":\"user\"}\n");
    assert!(env
        .hook("stop", &env.end_payload("s1", &path))
        .status
        .success());
}
