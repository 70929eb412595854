//! `Scanner::redact_stream` redacts the whole lines in its reader's buffer
//! as one block, taking each plain-text line's keyword matches from one
//! walk over the block (`LineRedactor::begin_block`). The result must be
//! the one a line-at-a-time redaction gives, text and findings, on plain
//! text (the corpora's decoded strings: code, config, prose, secrets) and
//! on JSONL, whatever the buffer size cuts.

use std::io::BufReader;

use abcd_redact::Scanner;
use abcd_redact_bench::{corpus_identity, generate, varied::generate_varied};

/// Every string value of every JSONL line, one per line: plain text with
/// the corpora's secrets, code, config files and non-ASCII prose.
fn plain_text(jsonl: &str) -> String {
    fn strings(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    for line in jsonl.lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            strings(&v, &mut out);
        }
    }
    out
}

fn line_at_a_time(scanner: &Scanner, text: &str) -> (Vec<u8>, Vec<String>) {
    let mut r = scanner.line_redactor().expect("scanner");
    let (mut out, mut findings) = (Vec::new(), Vec::new());
    for line in text.split_inclusive('\n') {
        // A copy: never a slice of a block.
        let copy = line.as_bytes().to_vec();
        out.extend_from_slice(r.line(&copy).expect("redacts"));
        findings.extend(r.findings().iter().map(|f| format!("{f:?}")));
    }
    (out, findings)
}

#[test]
fn block_redaction_equals_line_at_a_time() {
    let scanner = Scanner::new(corpus_identity(), None);
    let (corpus, _) = generate(9, 400 * 1024, 0.5);
    let varied = generate_varied(9, 400 * 1024);
    let texts = [plain_text(&corpus), plain_text(&varied), corpus, varied];
    let mut findings = 0;
    for text in &texts {
        let (want, want_findings) = line_at_a_time(&scanner, text);
        for cap in [64 * 1024, 1 << 20, 7919] {
            let mut got = Vec::new();
            let reader = BufReader::with_capacity(cap, text.as_bytes());
            let report = scanner.redact_stream(reader, &mut got).expect("redacts");
            assert!(got == want, "output differs at buffer {cap}");
            assert_eq!(report.finding_count, want_findings.len(), "buffer {cap}");
            let got_findings: Vec<String> =
                report.findings.iter().map(|f| format!("{f:?}")).collect();
            let n = got_findings.len();
            assert_eq!(got_findings, want_findings[..n], "buffer {cap}");
        }
        findings += want_findings.len();
    }
    assert!(findings > 3000, "only {findings} findings compared");
}
