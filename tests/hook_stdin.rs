//! How a hook reads its payload from stdin, through the real binary: it
//! stops at the first complete JSON object instead of waiting for EOF,
//! gives up after a deadline on a payload that never completes, and refuses
//! an over-cap payload whole (issue #8, failure 2).
//!
//! No assertion here depends on machine speed: a hook that should finish on
//! its own is polled for up to [`EXIT_WAIT`] (far longer than any deadline
//! in the binary), and what is checked is the outcome — the exit status,
//! stderr and what was staged — never how long it took.

mod common;

use std::io::Write;
use std::process::{Child, ChildStdin, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SID: &str = "11111111-2222-4333-8444-555555555555";

/// How long a test waits for a hook to exit on its own before calling it
/// hung. Generous on purpose: the binary's own stdin deadline is 1 s.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// `hook::payload::PAYLOAD_CAP`, as the binary enforces it.
const CAP: usize = 1 << 20;

/// Starts `abcd --json hook <verb>` with a piped stdin and hands back the
/// write end, which stays open for as long as the caller holds it.
fn spawn_open(env: &Env, verb: &str) -> (Child, ChildStdin) {
    let mut child = env
        .command(&env.repo)
        .args(["--json", "hook", verb])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn abcd");
    let pipe = child.stdin.take().expect("stdin was piped");
    (child, pipe)
}

/// Waits up to [`EXIT_WAIT`] for `child` to exit by itself (the caller
/// still holds its stdin open) and returns its output; a child still
/// running then is killed and the test fails.
fn exits_on_its_own(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => return child.wait_with_output().expect("collect output"),
            None if start.elapsed() > EXIT_WAIT => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what}: the hook was still running after {EXIT_WAIT:?} with its stdin open (it waits for EOF); stderr: {}",
                    stderr(&out)
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn nothing_staged(env: &Env) {
    let staged = env.staged();
    assert!(
        staged["staged"].as_array().is_none_or(|a| a.is_empty()),
        "nothing may be staged: {staged}"
    );
}

#[test]
fn a_payload_followed_by_an_open_stdin_is_captured_without_waiting_for_eof() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "the end")]));
    let (child, mut pipe) = spawn_open(&env, "session-end");
    // The harness's payload, a newline, and then nothing: the pipe stays
    // open (as `(echo "$PAYLOAD"; sleep 5) | abcd hook session-end` does).
    let payload = env.end_payload(SID, &path).to_string();
    pipe.write_all(payload.as_bytes()).unwrap();
    pipe.write_all(b"\n").unwrap();
    pipe.flush().unwrap();
    let out = exits_on_its_own(child, "session-end with a held-open stdin");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged", "{r}; stderr {}", stderr(&out));
    drop(pipe);
    let staged = env.staged();
    let entries = staged["staged"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{staged}");
    assert_eq!(entries[0]["session_id"], SID);
    assert_eq!(
        std::fs::read(entries[0]["path"].as_str().unwrap()).unwrap(),
        std::fs::read(&path).unwrap(),
        "the staged blob is the transcript, byte for byte"
    );
}

#[test]
fn bytes_after_the_first_object_are_ignored() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "stop")]));
    let mut stdin = env.end_payload(SID, &path).to_string().into_bytes();
    stdin.extend_from_slice(b"\n{\"session_id\":\"other\"} and then not JSON at all {{{");
    let out = env.hook_raw("stop", &stdin, &[]);
    assert_eq!(out.status.code(), Some(0));
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged", "{r}; stderr {}", stderr(&out));
    assert_eq!(r["session_id"], SID);
}

#[test]
fn a_partial_payload_on_an_open_stdin_gives_up_after_the_deadline() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "cut")]));
    let payload = env.end_payload(SID, &path).to_string();
    let (child, mut pipe) = spawn_open(&env, "session-end");
    // Half an object (the cut falls inside a string holding a brace).
    let half = format!("  {{\"note\":\"a }} in a string\",{}", &payload[1..20]);
    pipe.write_all(half.as_bytes()).unwrap();
    pipe.flush().unwrap();
    let out = exits_on_its_own(child, "session-end with half a payload");
    drop(pipe);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {err:?}");
    assert!(
        lines[0]
            .starts_with("abcd hook session-end: no complete JSON payload on stdin within 1000 ms"),
        "{err:?}"
    );
    assert!(lines[0].ends_with("nothing captured"), "{err:?}");
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "not-captured", "{r}");
    assert_eq!(r["warnings"].as_array().map(Vec::len), Some(1), "{r}");
    nothing_staged(&env);
}

#[test]
fn an_empty_stdin_captures_nothing_and_says_so() {
    let env = Env::new();
    // A pipe closed at once, and /dev/null.
    let piped = env.hook_raw("session-end", b"", &[]);
    let null = env
        .command(&env.repo)
        .args(["--json", "hook", "session-end"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    for out in [piped, null] {
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(hook_json(&out)["outcome"], "not-captured");
        assert!(
            stderr(&out).contains("the harness sent nothing on stdin"),
            "{}",
            stderr(&out)
        );
    }
    nothing_staged(&env);
}

#[test]
fn a_payload_in_a_file_is_read_like_a_pipe() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "from a file")]));
    let f = env.tmp.path().join("payload.json");
    std::fs::write(
        &f,
        format!("\n\t{}\ntrailing text", env.end_payload(SID, &path)),
    )
    .unwrap();
    let out = env
        .command(&env.repo)
        .args(["--json", "hook", "stop"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
}

#[test]
fn an_over_cap_payload_is_refused_whole_even_with_stdin_open() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "big")]));
    // A well-formed payload whose one string field pushes it past the cap.
    let mut payload = env.end_payload(SID, &path);
    payload["last_assistant_message"] = "x".repeat(CAP).into();
    let bytes = payload.to_string().into_bytes();
    assert!(bytes.len() > CAP);
    let (child, mut pipe) = spawn_open(&env, "session-end");
    // The writer blocks until the hook has read what it will read; it keeps
    // the pipe open afterwards, so the hook cannot be relying on EOF.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&bytes);
        pipe
    });
    let out = exits_on_its_own(child, "session-end with an over-cap payload");
    drop(writer.join().unwrap());
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains(&format!("over the {CAP}-byte cap")), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert_eq!(hook_json(&out)["outcome"], "not-captured");
    nothing_staged(&env);
}

#[test]
fn a_payload_at_exactly_the_cap_is_read() {
    let env = Env::new();
    let path = env.main_transcript(SID, &jsonl(&[&line(SID, "at the cap")]));
    let mut payload = env.end_payload(SID, &path);
    payload["pad"] = "".into();
    let short = payload.to_string().len();
    payload["pad"] = "y".repeat(CAP - short).into();
    let bytes = payload.to_string().into_bytes();
    assert_eq!(bytes.len(), CAP);
    let out = env.hook_raw("session-end", &bytes, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
}
