//! Behaviour beyond single rules: degraded configuration refuses every write,
//! configuration may add and raise but not weaken, the public transcripts
//! pass with their JSON structure intact, streaming is bounded, and the CLI
//! body's exit codes.

mod common;
use common::*;

use abcd_redact::{run_redact_command, RedactError, Scanner, EXIT_CLEAN, EXIT_FOUND, EXIT_REFUSED};
use std::path::{Path, PathBuf};

fn repo_with_config(body: &[u8]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".abcd")).unwrap();
    std::fs::write(d.path().join(".abcd/redact.json"), body).unwrap();
    d
}

#[test]
fn a_degraded_scanner_refuses_every_write() {
    let big = vec![b' '; 300 * 1024];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid json", b"{ not json".to_vec()),
        (
            "unknown field",
            br#"{"version":1,"disable":["github-pat"]}"#.to_vec(),
        ),
        (
            "bad pattern",
            br#"{"version":1,"rules":[{"id":"x","kind":"x","pattern":"(unclosed"}]}"#.to_vec(),
        ),
        (
            "lowering",
            br#"{"version":1,"severity":{"github-token":"warn"}}"#.to_vec(),
        ),
        ("oversized", big),
        ("bad version", br#"{"version":7}"#.to_vec()),
    ];
    for (name, body) in cases {
        let d = repo_with_config(&body);
        let s = Scanner::new(identity(), Some(d.path()));
        assert!(s.degraded().is_some(), "{name}: not degraded");
        let e = s.redact("nothing secret here").unwrap_err();
        assert!(matches!(e, RedactError::Degraded { .. }), "{name}: {e}");
        assert!(!e.is_deterministic(), "degraded must stay retryable");
        assert!(s.redact_parts(&["a", "b"]).is_err());
        assert!(s.redact_stream(&b"x\n"[..], Vec::new()).is_err());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_redact_command(None, false, Some(d.path()), &mut out, &mut err);
        assert_eq!(code, EXIT_REFUSED, "{name}");
        assert!(String::from_utf8_lossy(&err).contains("degraded"));
    }
    // A directory where the file should be is unreadable configuration.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".abcd/redact.json")).unwrap();
    assert!(Scanner::new(identity(), Some(d.path()))
        .degraded()
        .is_some());
}

#[test]
fn configuration_adds_rules_allowlists_and_raises_but_never_weakens() {
    let cfg = br#"{"version":1,
        "rules":[{"id":"acme","kind":"acme-token","pattern":"acme_[a-z0-9]{16}","keywords":["acme_"]}],
        "allow_values":["build-4f9a8c7d6e5b4a39", "10.9.8.7"],
        "allow_paths":["/home/ci-shared"],
        "severity":{"hostname":"block"}}"#;
    let d = repo_with_config(cfg);
    let s = Scanner::new(identity(), Some(d.path()));
    assert_eq!(s.degraded(), None);
    let r = s.redact("key acme_0123456789abcdef done").unwrap();
    assert_eq!(r.text, "key [REDACTED:acme-token] done");
    // Allowlisted values pass the generic and network rules...
    let r = s
        .redact("token=build-4f9a8c7d6e5b4a39 via 10.9.8.7 in /home/ci-shared/x")
        .unwrap();
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    // ...but never a provider-format rule.
    let tok = format!("ghp_{}", rs(5, ALNUM, 36));
    let d2 = repo_with_config(format!(r#"{{"version":1,"allow_values":["{tok}"]}}"#).as_bytes());
    let s2 = Scanner::new(identity(), Some(d2.path()));
    assert!(!s2.redact(&tok).unwrap().text.contains(&tok));
    // Raised severity shows in findings.
    let f = s.scan("laptop is zed-macbook-pro");
    assert!(
        f.iter()
            .any(|f| &*f.kind == "hostname" && f.severity == abcd_redact::Severity::Block),
        "{f:?}"
    );
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/public")
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            jsonl_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl" || x == "json") {
            out.push(p);
        }
    }
}

/// JSON structure with every string's content erased: keys, types, array
/// lengths and nesting must survive redaction unchanged.
fn shape(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(_) => Value::String(String::new()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        other => other.clone(),
    }
}

#[test]
fn public_transcripts_pass_without_refusal_and_keep_their_json_structure() {
    let mut files = Vec::new();
    jsonl_files(&fixtures_dir(), &mut files);
    assert!(files.len() >= 10, "fixtures missing: {}", files.len());
    let s = scanner();
    let mut changed = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let r = s
            .redact(&text)
            .unwrap_or_else(|e| panic!("{}: refused: {e}", f.display()));
        let before: Vec<&str> = text.split('\n').collect();
        let after: Vec<&str> = r.text.split('\n').collect();
        assert_eq!(
            before.len(),
            after.len(),
            "{}: line count changed",
            f.display()
        );
        for (i, (a, b)) in before.iter().zip(&after).enumerate() {
            if let Ok(va) = serde_json::from_str::<serde_json::Value>(a) {
                let vb: serde_json::Value = serde_json::from_str(b)
                    .unwrap_or_else(|e| panic!("{}:{}: output not JSON: {e}", f.display(), i + 1));
                assert_eq!(
                    shape(&va),
                    shape(&vb),
                    "{}:{}: structure changed",
                    f.display(),
                    i + 1
                );
            }
        }
        if r.text != text {
            changed += 1;
        }
        assert_eq!(
            s.redact(&r.text).unwrap().text,
            r.text,
            "{}: not idempotent",
            f.display()
        );
    }
    // The cchistory fixtures hold /Users/mock_user paths: other users' homes.
    assert!(changed > 0);
}

#[test]
fn other_users_home_paths_in_fixtures_are_redacted() {
    let p = fixtures_dir().join("cchistory");
    let mut files = Vec::new();
    jsonl_files(&p, &mut files);
    let s = scanner();
    let mut seen = false;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        if text.contains("/Users/mock_user") {
            seen = true;
            let r = s.redact(&text).unwrap();
            assert!(!r.text.contains("/Users/mock_user"));
            assert!(r.text.contains("/Users/[REDACTED:home-user]"));
        }
    }
    assert!(seen);
}

#[test]
fn stream_matches_whole_text_redaction_and_carries_values_forward() {
    let s = scanner();
    let tok = format!("ghp_{}", rs(11, ALNUM, 36));
    let text = format!("{{\"a\":\"{tok}\"}}\nplain line\nagain {}\n", &tok);
    let mut out = Vec::new();
    let rep = s.redact_stream(text.as_bytes(), &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        s.redact(&text).unwrap().text
    );
    assert_eq!(rep.lines, 3);
    assert_eq!(rep.finding_count, 2);
}

/// Plain text read in blocks (the reader's buffer walked for keywords once,
/// each line taking its share of the matches): the same output as the
/// whole text redacted at once, whatever the buffer's size cuts.
#[test]
fn stream_in_blocks_matches_whole_text_redaction() {
    let s = scanner();
    let mut text = String::new();
    for i in 0..120u64 {
        match i % 7 {
            0 => text.push_str(&format!("export API_TOKEN={}\n", rs(i, ALNUM, 32))),
            1 => text.push_str(&format!("    let password = \"{}\";\n", rs(i, ALNUM, 14))),
            2 => text.push_str("fn main() { println!(\"no secret here\"); }\n"),
            3 => text.push_str(&format!("aws_secret_access_key = {}\n", rs(i, B64, 40))),
            4 => text.push('\n'),
            5 => text.push_str(&format!("token: ghp_{} and more words\n", rs(i, ALNUM, 36))),
            _ => text.push_str("# a comment line with key and token words but nothing else\n"),
        }
    }
    let want = s.redact(&text).unwrap().text;
    assert_ne!(want, text);
    for cap in [64, 300, 1000, 1 << 16] {
        let mut out = Vec::new();
        s.redact_stream(
            std::io::BufReader::with_capacity(cap, text.as_bytes()),
            &mut out,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want, "buffer of {cap}");
    }
}

/// A value found on a line is redacted wherever else it stands on that same
/// line, before or after the occurrence its rule matched, raw and escaped —
/// streaming used to leave the other occurrence to verify, which refused
/// the whole text.
#[test]
fn stream_redacts_a_value_repeated_on_its_own_line() {
    let s = scanner();
    let pw = rs(5, ALNUM, 14);
    for text in [
        format!("{{\"a\":\"password={pw} then later {pw} alone\"}}\n"),
        format!("the value {pw} then password={pw}\n"),
        format!("{{\"a\":\"x {pw} y\",\"b\":\"{{\\\"password\\\":\\\"{pw}\\\"}}\"}}\n"),
    ] {
        let mut out = Vec::new();
        let rep = s
            .redact_stream(text.as_bytes(), &mut out)
            .unwrap_or_else(|e| panic!("{e} on {text:?}"));
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains(&pw), "{out}");
        assert_eq!(rep.finding_count, 2, "{out}");
        assert_eq!(out, s.redact(&text).unwrap().text);
    }
}

#[test]
fn a_newline_free_input_streams_in_bounded_time() {
    // 16 MiB under ABCD_REDACT_HEAVY=1 (release figures in tools/redact-bench);
    // 2 MiB by default so the debug suite stays fast.
    let mib = if std::env::var_os("ABCD_REDACT_HEAVY").is_some() {
        16
    } else {
        2
    };
    let tok = format!("sk-ant-api03-{}", rs(12, URLSAFE, 93));
    let mut big = Vec::with_capacity(mib << 20);
    let unit = format!("{{\\\"k\\\":\\\"v {tok} 10.1.2.3 \\\\u0041 %41\\\"}} lorem ipsum dolor ");
    while big.len() < mib << 20 {
        big.extend_from_slice(unit.as_bytes());
    }
    let mut out = Vec::new();
    let rep = s_stream(&big, &mut out);
    assert_eq!(rep.lines, 1);
    assert!(!out.windows(tok.len()).any(|w| w == tok.as_bytes()));
}

fn s_stream(input: &[u8], out: &mut Vec<u8>) -> abcd_redact::Report {
    scanner().redact_stream(input, out).unwrap()
}

#[test]
fn cli_exit_codes_and_report_never_print_the_secret() {
    let d = tempfile::tempdir().unwrap();
    let clean = d.path().join("clean.txt");
    std::fs::write(&clean, "hello world\n").unwrap();
    let dirty = d.path().join("dirty.jsonl");
    let tok = format!("glpat-{}", rs(13, URLSAFE, 20));
    std::fs::write(&dirty, format!("{{\"t\":\"{tok}\"}}\n")).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        run_redact_command(Some(&clean), false, Some(d.path()), &mut out, &mut err),
        EXIT_CLEAN
    );
    assert_eq!(out, b"hello world\n");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        run_redact_command(Some(&dirty), false, Some(d.path()), &mut out, &mut err),
        EXIT_FOUND
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"t\":\"[REDACTED:gitlab-token]\"}\n"
    );
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        run_redact_command(Some(&dirty), true, Some(d.path()), &mut out, &mut err),
        EXIT_FOUND
    );
    let rep: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(rep["findings"][0]["kind"], "gitlab-token");
    assert_eq!(rep["findings"][0]["column"], 7);
    assert!(!String::from_utf8_lossy(&out).contains(&tok[6..]));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let missing = d.path().join("missing");
    assert_eq!(
        run_redact_command(Some(&missing), false, Some(d.path()), &mut out, &mut err),
        abcd_redact::EXIT_USAGE
    );
}

#[test]
fn residual_errors_are_deterministic_and_name_kinds_only() {
    let e = RedactError::Residual {
        kinds: vec!["github-token".into()],
    };
    assert!(e.is_deterministic());
    assert!(e.to_string().contains("github-token"));
}

#[test]
fn verify_windows_never_scan_a_cut_allowlisted_value() {
    // A long image line whose base64 happens to hold the user's name, plus a
    // change (the home path) far from it: verify must not see a fragment.
    let s = scanner();
    let data = format!("{}/zed+{}", rs(80, B64, 1000), rs(81, B64, 5000)).replace('=', "A");
    let line = format!(
        "{{\"cwd\":\"{HOME}/src\",\"message\":{{\"content\":[{{\"type\":\"image\",\"source\":{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{data}\"}}}}]}}}}"
    );
    let r = s.redact(&line).expect("must not refuse");
    assert!(r.text.contains(&data));
    assert!(r.text.starts_with("{\"cwd\":\"~/src\""));
}

#[test]
fn explain_names_rule_and_range_but_never_the_secret() {
    let d = tempfile::tempdir().unwrap();
    let tok = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5");
    let pw = "Winter1998#zq";
    let f = d.path().join("in.txt");
    std::fs::write(
        &f,
        format!("export GITHUB_TOKEN={tok}\nlogin zed is admin / {pw}\n"),
    )
    .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = abcd_redact::run_redact_explain(Some(&f), Some(d.path()), &mut out, &mut err);
    assert_eq!(code, EXIT_FOUND);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("line 1 bytes 20..60 rule github-pat kind github-token"),
        "{text}"
    );
    assert!(text.contains("rule login-slash-password"), "{text}");
    assert!(
        !text.contains(&tok[4..12]) && !text.contains("Winter"),
        "{text}"
    );
    assert!(!text.contains("zed"), "context is a shape: {text}");
}
