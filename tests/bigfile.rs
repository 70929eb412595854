//! Transcripts over the in-memory capture cap (issue 11, "a 2 GB
//! transcript"), through the real binary: streamed into part records with
//! bounded memory by `history capture` and `history ingest`.
//!
//! Most tests lower the threshold and the part size with the debug-only
//! knobs `ABCD_TEST_STREAM_OVER` / `ABCD_TEST_PART_BYTES`, so a few
//! kilobytes exercise the same path; one test streams a 300 MiB
//! transcript at the real sizes and bounds the peak RSS of the process.

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const SESSION: &str = "5d3c2a10-7b4e-4f0a-9c1d-2e8f6a7b9c01";
/// A value the password rule redacts where it stands after `password=`,
/// and that no rule recognises on its own.
const SECRET: &str = "Zq8vN3kLw9XpR2tY7mBc";

const KNOBS: [(&str, &str); 2] = [
    ("ABCD_TEST_STREAM_OVER", "4096"),
    ("ABCD_TEST_PART_BYTES", "4096"),
];

/// One transcript line of about `width` bytes.
fn line_of(i: usize, cwd: &Path, text: &str, width: usize) -> String {
    let mut t = String::from(text);
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let mut k = i;
    while t.len() < width {
        t.push(' ');
        t.push_str(words[k % words.len()]);
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    serde_json::json!({
        "type": if i.is_multiple_of(2) { "user" } else { "assistant" },
        "sessionId": SESSION,
        "uuid": format!("u{i:08}"),
        "cwd": cwd.display().to_string(),
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": if i.is_multiple_of(2) { "user" } else { "assistant" }, "content": [{"type": "text", "text": t}]},
    })
    .to_string()
}

/// Lines `from..to` (`password=SECRET` on line 3, the bare value on line
/// `bare`).
fn lines(from: usize, to: usize, cwd: &Path, bare: usize) -> String {
    let mut s = String::new();
    for i in from..to {
        let text = match i {
            3 => format!("the password={SECRET} is set"),
            _ if i == bare => format!("later it says {SECRET} again"),
            _ => format!("line {i}"),
        };
        s.push_str(&line_of(i, cwd, &text, 600));
        s.push('\n');
    }
    s
}

/// The raw sizes of the parts the stream cuts `text` into at `cut` bytes
/// (a part ends after the line that reaches the cut).
fn cut_sizes(text: &str, cut: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut cur = 0;
    for l in text.split_inclusive('\n') {
        cur += l.len();
        if cur >= cut {
            out.push(cur);
            cur = 0;
        }
    }
    if cur > 0 {
        out.push(cur);
    }
    out
}

fn capture(env: &Env, file: &Path) -> Value {
    let out = env.abcd_env(
        &["--json", "history", "capture", file.to_str().unwrap()],
        &KNOBS,
    );
    assert!(out.status.success(), "capture: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn parts(v: &Value) -> Vec<(String, bool)> {
    v["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["record"].as_str().unwrap().to_owned(),
                p["wrote"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// Every file under `dir` that holds `needle` (read in chunks: the lane of
/// the big test holds hundreds of MiB).
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = fs::read(&p).unwrap();
            if bytes.windows(needle.len()).any(|w| w == needle) {
                hits.push(p);
            }
        }
    }
    hits
}

fn verify_clean(env: &Env) {
    let out = env.abcd(&["journal", "verify"]);
    assert!(
        out.status.success(),
        "journal verify: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn a_big_transcript_is_stored_as_parts_idempotently_and_a_grown_one_supersedes_its_last_part() {
    if !test_knobs(
        "a_big_transcript_is_stored_as_parts_idempotently_and_a_grown_one_supersedes_its_last_part",
    ) {
        return;
    }
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    let text = lines(0, 38, &env.repo, 30);
    let sizes = cut_sizes(&text, 4096);
    let k = sizes.len();
    assert!(
        k >= 5 && sizes[k - 1] < 4096,
        "{sizes:?}: a short last part"
    );
    fs::write(&file, &text).unwrap();
    let first = capture(&env, &file);
    let p1 = parts(&first);
    assert_eq!(p1.len(), k, "{first}");
    let got: Vec<usize> = first["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got, sizes);
    assert!(p1.iter().all(|(_, w)| *w));
    assert_eq!(first["session_id"], SESSION);
    assert_eq!(
        first["bytes"].as_u64().unwrap(),
        fs::metadata(&file).unwrap().len()
    );
    let lane = env.lane();
    assert_eq!(record_names(&lane).len(), k);
    // Every part is an ordinary record of the session, in order.
    let listed = env.json(&["history", "list", "--session", SESSION]);
    assert!(listed.to_string().contains(SESSION), "{listed}");

    // The same bytes again: nothing new, nothing journaled.
    let journal = fs::metadata(lane.join("journal/journal")).unwrap().len();
    let again = capture(&env, &file);
    let p2 = parts(&again);
    assert_eq!(p2.len(), k);
    assert!(p2.iter().all(|(_, w)| !*w), "{again}");
    assert_eq!(
        p1.iter().map(|p| &p.0).collect::<Vec<_>>(),
        p2.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    assert_eq!(
        fs::metadata(lane.join("journal/journal")).unwrap().len(),
        journal
    );

    // The file grows: the full parts are already stored, the old short
    // last part is superseded by the grown one, and the rest is new.
    let more = lines(38, 52, &env.repo, 30);
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(more.as_bytes()).unwrap();
    drop(f);
    let grown = capture(&env, &file);
    let p3 = parts(&grown);
    let k3 = cut_sizes(&(text.clone() + &more), 4096).len();
    assert!(k3 > k);
    assert_eq!(p3.len(), k3, "{grown}");
    assert_eq!(
        p3[..k - 1].iter().map(|p| &p.0).collect::<Vec<_>>(),
        p1[..k - 1].iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    assert!(p3[..k - 1].iter().all(|(_, w)| !*w));
    assert!(p3[k - 1..].iter().all(|(_, w)| *w));
    let superseded: Vec<&str> = grown["parts"][k - 1]["superseded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(superseded, vec![p1[k - 1].0.as_str()]);
    let names = record_names(&lane);
    assert_eq!(names.len(), k3);
    assert!(!names.contains(&p1[k - 1].0));

    // The secret is nowhere: not in its own part (rule), not in the later
    // part where it stands bare (carried from the earlier line).
    assert!(files_holding(&env.abcd_home, SECRET.as_bytes()).is_empty());
    verify_clean(&env);

    // A replay reproduces the records and their index rows.
    let before = converged(&lane);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(before, converged(&lane));
}

#[test]
fn a_value_found_in_an_early_part_is_redacted_where_it_stands_bare_in_a_later_part() {
    if !test_knobs(
        "a_value_found_in_an_early_part_is_redacted_where_it_stands_bare_in_a_later_part",
    ) {
        return;
    }
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    // The password on line 3 (the first part), the bare value on line 35
    // (the last part).
    let text = lines(0, 36, &env.repo, 35);
    let k = cut_sizes(&text, 4096).len();
    assert!(k >= 5);
    fs::write(&file, &text).unwrap();
    let v = capture(&env, &file);
    let p = parts(&v);
    assert_eq!(p.len(), k);
    assert_eq!(v["redacted_secrets"].as_u64(), Some(2), "{v}");
    let lane = env.lane();
    let last = fs::read_to_string(lane.join("records").join(&p[k - 1].0)).unwrap();
    assert!(last.contains("later it says [REDACTED"), "{last}");
    let first = fs::read_to_string(lane.join("records").join(&p[0].0)).unwrap();
    assert!(first.contains("the password=[REDACTED"), "{first}");
    assert!(files_holding(&env.abcd_home, SECRET.as_bytes()).is_empty());
}

#[test]
fn a_refused_line_stops_the_stream_and_says_how_many_parts_are_stored() {
    if !test_knobs("a_refused_line_stops_the_stream_and_says_how_many_parts_are_stored") {
        return;
    }
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    let head = lines(0, 20, &env.repo, 99);
    let full = cut_sizes(&head, 4096)
        .iter()
        .filter(|n| **n >= 4096)
        .count();
    let mut bytes = head.into_bytes();
    // A byte that is not UTF-8 on line 21 (part 4).
    bytes.extend_from_slice(b"{\"type\":\"user\",\"sessionId\":\"");
    bytes.extend_from_slice(SESSION.as_bytes());
    bytes.extend_from_slice(b"\",\"message\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(lines(21, 30, &env.repo, 99).as_bytes());
    fs::write(&file, &bytes).unwrap();
    let out = env.abcd_env(&["history", "capture", file.to_str().unwrap()], &KNOBS);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("line 21"), "{err}");
    assert!(err.contains("not valid UTF-8"), "{err}");
    assert!(
        err.contains(&format!("{full} part(s) before it are stored")),
        "{err}"
    );
    assert_eq!(record_names(&env.lane()).len(), full);
    verify_clean(&env);
}

#[test]
fn ingest_streams_a_big_file_and_recognises_it_unchanged() {
    if !test_knobs("ingest_streams_a_big_file_and_recognises_it_unchanged") {
        return;
    }
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    let text = lines(0, 40, &env.repo, 30);
    let k = cut_sizes(&text, 4096).len();
    fs::write(&file, &text).unwrap();
    // The ingest cache trusts a file changed 2 s before it was read: a
    // clock ahead stands in for waiting.
    let run = |env: &Env| -> Value {
        let mut vars = KNOBS.to_vec();
        vars.push(("ABCD_TEST_NOW", "2099-01-01T00:00:00Z"));
        let out = env.abcd_env(&["--json", "history", "ingest"], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let first = run(&env);
    assert_eq!(first["stored"].as_array().unwrap().len(), 1, "{first}");
    assert!(
        first["notes"]
            .to_string()
            .contains(&format!("streamed as {k} part record(s) ({k} new)")),
        "{first}"
    );
    assert_eq!(record_names(&env.lane()).len(), k);
    assert!(files_holding(&env.abcd_home, SECRET.as_bytes()).is_empty());
    let second = run(&env);
    assert_eq!(second["stored"].as_array().unwrap().len(), 0, "{second}");
    let already = second["already_stored"].as_array().unwrap();
    assert_eq!(already.len(), 1);
    assert_eq!(already[0]["via"], "unchanged", "{second}");
    assert_eq!(record_names(&env.lane()).len(), k);
    verify_clean(&env);
}

/// Runs `cmd` and returns (success, peak resident set in KiB) from the
/// kernel's accounting of the child (`wait4`'s `ru_maxrss`).
// The child is reaped by `wait4` itself, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run_measured(mut cmd: std::process::Command) -> (bool, i64) {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn abcd");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet reaped; the pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    (
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        usage.ru_maxrss,
    )
}

#[test]
fn a_300_mib_transcript_is_captured_with_bounded_memory() {
    let env = Env::new();
    let file = env.tmp.path().join("big.jsonl");
    let mut w = std::io::BufWriter::new(fs::File::create(&file).unwrap());
    let mut written = 0u64;
    let mut i = 0usize;
    while written < 300 << 20 {
        let text = match i {
            3 => format!("the password={SECRET} is set"),
            100_000 => format!("later it says {SECRET} again"),
            _ => format!("line {i}"),
        };
        let l = line_of(i, &env.repo, &text, 2000);
        w.write_all(l.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        written += l.len() as u64 + 1;
        i += 1;
    }
    w.flush().unwrap();
    drop(w);
    let mut cmd = env.command(&env.repo);
    cmd.args(["history", "capture", file.to_str().unwrap()]);
    let (ok, peak_kib) = run_measured(cmd);
    assert!(ok, "history capture of the 300 MiB transcript failed");
    eprintln!("peak RSS of a 300 MiB capture: {} MiB", peak_kib / 1024);
    assert!(
        peak_kib < 200 * 1024,
        "peak RSS {peak_kib} KiB is over the 200 MiB bound"
    );
    fs::remove_file(&file).unwrap();
    let lane = env.lane();
    // 300 MiB cut every 8 MiB.
    let n = record_names(&lane).len();
    assert_eq!(n, 38, "{n} part records");
    assert!(files_holding(&lane.join("records"), SECRET.as_bytes()).is_empty());
    let listed = env.json(&["history", "list", "--session", SESSION]);
    assert!(listed.to_string().contains(SESSION));
}

#[test]
fn a_hook_given_a_transcript_over_the_cap_says_how_to_capture_it() {
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    fs::write(&file, lines(0, 2, &env.repo, 99)).unwrap();
    // Sparse: 65 MiB on paper, nothing on disk.
    fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let out = env.hook("session-end", &env.end_payload(SESSION, &file));
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("over the") && err.contains("abcd history capture"),
        "{err}"
    );
    assert!(record_names(&env.lane()).is_empty());
}

/// A transcript stored in parts reads back whole: `reconstruct` and
/// `export` join its live parts in order (each record carries its `part`
/// number), after the file grew too, and name the parts they used.
#[test]
fn reconstruct_and_export_join_a_transcript_stored_in_parts() {
    if !test_knobs("reconstruct_and_export_join_a_transcript_stored_in_parts") {
        return;
    }
    let env = Env::new();
    let file = env.claude.join(format!("{SESSION}.jsonl"));
    let text = lines(0, 38, &env.repo, 30);
    fs::write(&file, &text).unwrap();
    capture(&env, &file);
    let more = lines(38, 52, &env.repo, 30);
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(more.as_bytes()).unwrap();
    drop(f);
    let grown = capture(&env, &file);
    let k = parts(&grown).len();
    assert!(k >= 6, "{grown}");
    let names: Vec<String> = parts(&grown).into_iter().map(|p| p.0).collect();

    // Each record names its place in the run.
    for (i, n) in names.iter().enumerate() {
        let text = fs::read_to_string(env.lane().join("records").join(n)).unwrap();
        assert!(
            text.contains(&format!("\npart: {}\n", i + 1)),
            "{n}: {text}"
        );
    }
    let out = env.abcd(&["history", "reconstruct", SESSION, "--out", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let md = stdout(&out);
    assert!(
        md.contains(&format!("- main thread: present, stored in {k} parts")),
        "{md}"
    );
    assert!(md.contains(&format!("- records used: {k} of {k}")), "{md}");
    // Lines from the first part, a middle one and the grown tail, in order.
    let at = |needle: &str| {
        md.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing from the reconstruction"))
    };
    assert!(at("line 0 ") < at("line 20 "));
    assert!(at("line 20 ") < at("line 51 "));
    assert!(!md.contains("superseded by"), "no part is superseded: {md}");

    let out = env.abcd(&["history", "export", SESSION, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let main = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["agent_id"].is_null())
        .unwrap();
    assert_eq!(main["record"], names[0].as_str());
    let later: Vec<&str> = main["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        later,
        names[1..].iter().map(String::as_str).collect::<Vec<_>>()
    );
    let turns = main["turns"].as_array().unwrap().len();
    assert_eq!(turns, 52, "every line's turn, from every part");
}
