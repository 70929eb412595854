//! Shared helpers for the redaction tests: a fixed identity, deterministic
//! fake-secret bodies (secrets are built at run time so no token-shaped
//! literal sits in the source tree), and the encodings every positive is
//! tried through.
#![allow(dead_code)]

use abcd_redact::{Identity, Scanner};

pub const HOME: &str = "/home/zed";

pub fn identity() -> Identity {
    Identity {
        home: Some(HOME.into()),
        user: Some("zed".into()),
        git_names: vec!["Zed Quimby".into()],
        git_emails: vec!["zed.quimby@example.org".into()],
        github_owner: Some("zquimby".into()),
    }
}

pub fn scanner() -> Scanner {
    Scanner::new(identity(), None)
}

pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const HEX: &str = "0123456789abcdef";
pub const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const UPPER_NUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// Deterministic pseudo-random string (xorshift), so failures reproduce.
pub fn rs(seed: u64, alphabet: &str, len: usize) -> String {
    let a = alphabet.as_bytes();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a[(x % a.len() as u64) as usize] as char
        })
        .collect()
}

/// A UUID-shaped value (8-4-4-4-12 lower-case hex) from [`rs`].
pub fn uuid(seed: u64) -> String {
    let h = rs(seed, HEX, 32);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Standard base64 with padding (the tests build encoded secrets with it).
pub fn b64(s: &str) -> String {
    abcd_redact::b64_encode(s.as_bytes())
}

/// `content` as the JSON-escaped text of a `tool_result` transcript line.
pub fn json_line(content: &str) -> String {
    format!(
        "{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01\",\"content\":{}}}]}}}}",
        json_string(content)
    )
}

/// Every input scans clean (the near-miss tables).
pub fn assert_no_findings<S: AsRef<str>>(s: &Scanner, inputs: impl IntoIterator<Item = S>) {
    for input in inputs {
        let input = input.as_ref();
        let f = s.scan(input);
        assert!(f.is_empty(), "{f:?} on {input}");
    }
}

/// Every `(text, secret)` in `dirty` loses its secret and every text in
/// `clean` comes out unchanged, bare and as a JSON-escaped `tool_result`.
pub fn check_table(dirty: &[(String, String)], clean: &[String]) {
    let s = scanner();
    let mut failures = Vec::new();
    for (text, secret) in dirty {
        for input in [text.clone(), json_line(text)] {
            let r = s.redact(&input).expect("redacts");
            if r.text.contains(secret.as_str()) || r.text.contains(&json_string(secret)) {
                failures.push(format!("missed: {input}\n  -> {}", r.text));
            }
        }
    }
    for text in clean {
        for input in [text.clone(), json_line(text)] {
            let r = s.redact(&input).expect("redacts");
            if r.text.contains("[REDACTED:") {
                failures.push(format!("flagged: {input}\n  -> {}", r.text));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
