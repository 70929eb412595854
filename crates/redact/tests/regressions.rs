//! Regressions from issue 10: a percent-encoded password inside a
//! JSON-escaped credential URL, and npm's `"integrity": "sha512-…"`.

mod common;
use common::*;

fn json_line(content: &str) -> String {
    format!(
        "{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01\",\"content\":{}}}]}}}}",
        json_string(content)
    )
}

/// The password of a credential URL is redacted whole (every spelling of
/// it gone) and the scheme and host stay, in every context.
#[test]
fn percent_encoded_url_password_is_redacted_on_the_right_bytes() {
    let s = scanner();
    let cases = [
        // (text, password fragments that must disappear, bytes that must stay)
        (
            "psql \"postgresql://blog:Dragon2023%40@db1.example.com/blog\"",
            vec!["Dragon2023"],
            vec!["postgresql://", "db1.example.com/blog"],
        ),
        (
            "DATABASE_URL=\"mysql+pymysql://postgres:Winter2021%40@db.example.com:3306/app\"",
            vec!["Winter2021"],
            vec!["mysql+pymysql://", "db.example.com:3306/app"],
        ),
        (
            "psql \"postgresql://blog:Dragon%402023@db1.example.com/blog\"",
            vec!["Dragon", "402023"],
            vec!["postgresql://", "db1.example.com/blog"],
        ),
        (
            "redis://:s3cr%23t%21Pw@cache.example.com:6379/0",
            vec!["s3cr", "t%21Pw"],
            vec!["redis://", "cache.example.com:6379/0"],
        ),
        (
            "amqp://svc:p%40ss%2Fw0rd%3A9@mq.example.com/vhost",
            vec!["p%40ss", "w0rd"],
            vec!["amqp://", "mq.example.com/vhost"],
        ),
    ];
    let mut failures = Vec::new();
    for (text, gone, kept) in &cases {
        for (ctx, input) in [
            ("plain", text.to_string()),
            ("json", json_line(text)),
            ("json-in-json", json_line(&json_string(text))),
        ] {
            let r = s.redact(&input).expect("redacts");
            for g in gone {
                if r.text.contains(g) {
                    failures.push(format!("{ctx}: {g:?} survived: {}", r.text));
                }
            }
            for k in kept {
                if !r.text.contains(k) {
                    failures.push(format!("{ctx}: {k:?} was cut: {}", r.text));
                }
            }
            if ctx != "plain" && serde_json::from_str::<serde_json::Value>(&r.text).is_err() {
                failures.push(format!("{ctx}: not JSON: {}", r.text));
            }
            assert_eq!(s.redact(&r.text).unwrap().text, r.text, "idempotent");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Subresource-integrity hashes (npm, yarn, pnpm lockfiles, `<script
/// integrity>`) are public digests, never secrets or host names.
#[test]
fn integrity_hashes_are_not_findings() {
    let s = scanner();
    let mut failures = Vec::new();
    for seed in 0..400u64 {
        let body = rs(1000 + seed, B64, 86);
        // Bodies that start like a machine name (`PC/…`, `mbp+…`) are the
        // ones that used to be cut.
        let forced = ["PC/", "pc+", "MBP/", "laptop/", "imac+"][seed as usize % 5];
        for digest in [
            format!("sha512-{body}=="),
            format!("sha512-{forced}{body}=="),
        ] {
            for input in [
                format!("    \"integrity\": \"{digest}\","),
                json_line(&format!("  \"integrity\": \"{digest}\",\n")),
                format!("<script src=\"x.js\" integrity=\"{digest}\"></script>"),
                format!("  integrity {digest}"),
            ] {
                let f = s.scan(&input);
                if !f.is_empty() {
                    failures.push(format!("{f:?} on {input}"));
                }
            }
        }
        let sha1 = rs(2000 + seed, B64, 27);
        let f = s.scan(&format!("\"integrity\": \"sha1-{sha1}=\""));
        if !f.is_empty() {
            failures.push(format!("{f:?} on sha1-{sha1}"));
        }
    }
    failures.truncate(20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The password class now runs to the last `@`: a port followed by a path
/// holding `@` is still not a credential.
#[test]
fn a_port_and_a_path_with_at_are_not_a_password() {
    let s = scanner();
    assert_no_findings(
        &s,
        [
            "GET http://localhost:5173/@vite/client 200",
            "open http://127.0.0.1:3000/@fs/src/main.ts",
            "https://registry.example.com:443/@scope/pkg/-/pkg-1.0.0.tgz",
            "http://[::1]:8080/users/@me",
        ],
    );
}
