//! Secret-reading commands (issue 10): the output of `pass show`, `op read`,
//! `vault kv get`, `cat ~/.pgpass`, … is a bare string no rule knows by
//! shape. A `tool_result` whose `tool_use` (matched by `tool_use_id`, in the
//! same transcript) ran one has its secret-shaped words redacted; the same
//! output answering another command is left alone.

mod common;
use common::*;

fn tool_use(id: &str, command: &str) -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash",
             "input": {"command": command, "description": "read it"}}
        ]}
    })
    .to_string()
}

fn read_use(id: &str, path: &str) -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": path}}
        ]}
    })
    .to_string()
}

/// Claude Code writes the output twice: in the `tool_result` and in
/// `toolUseResult.stdout`.
fn tool_result(id: &str, output: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"tool_use_id": id, "type": "tool_result", "content": output, "is_error": false}
        ]},
        "toolUseResult": {"stdout": output, "stderr": "", "interrupted": false}
    })
    .to_string()
}

fn tool_result_parts(id: &str, output: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"tool_use_id": id, "type": "tool_result",
             "content": [{"type": "text", "text": output}]}
        ]}
    })
    .to_string()
}

fn transcript(lines: &[String]) -> String {
    let mut t = lines.join("\n");
    t.push('\n');
    t
}

/// Both entry points: the whole-text one capture uses, and the stream.
fn redacted(text: &str) -> Vec<String> {
    let s = scanner();
    let whole = s.redact(text).expect("not refused").text;
    let mut out = Vec::new();
    s.redact_stream(text.as_bytes(), &mut out)
        .expect("stream not refused");
    let stream = String::from_utf8(out).unwrap();
    for t in [&whole, &stream] {
        for l in t.lines() {
            serde_json::from_str::<serde_json::Value>(l).expect("still JSON");
        }
    }
    vec![whole, stream]
}

fn pwd(seed: u64) -> String {
    format!("{}{}", rs(seed, ALNUM, 14), seed % 89)
}

#[test]
fn outputs_of_secret_reading_commands_are_redacted() {
    let cases: Vec<(String, String, Vec<String>)> = vec![
        (
            "pass show infra/db".into(),
            format!("{}\n", pwd(1)),
            vec![pwd(1)],
        ),
        (
            "gopass show -o web/admin".into(),
            format!("{}\n", pwd(2)),
            vec![pwd(2)],
        ),
        (
            "pass show email/work".into(),
            format!("{}\nlogin: zed\nrecovery: {}\n", pwd(3), pwd(4)),
            vec![pwd(3), pwd(4)],
        ),
        (
            "op read 'op://Private/Geocoder/credential'".into(),
            pwd(5),
            vec![pwd(5)],
        ),
        (
            "vault kv get secret/app".into(),
            format!(
                "====== Data ======\nKey         Value\n---         -----\npassword    {}\nuser        app\n",
                pwd(6)
            ),
            vec![pwd(6)],
        ),
        (
            "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text"
                .into(),
            format!("{{\"username\":\"app\",\"password\":\"{}\"}}", pwd(7)),
            vec![pwd(7)],
        ),
        (
            "gcloud secrets versions access latest --secret=geo-key".into(),
            pwd(8),
            vec![pwd(8)],
        ),
        (
            "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d".into(),
            pwd(9),
            vec![pwd(9)],
        ),
        (
            "security find-generic-password -s github -a zed -w".into(),
            format!("{}\n", pwd(10)),
            vec![pwd(10)],
        ),
        (
            "cat ~/.pgpass".into(),
            format!("db.example.com:5432:app:app:{}\n", pwd(11)),
            vec![pwd(11)],
        ),
        (
            format!("echo -n '{}' | base64", pwd(13)),
            "UmVkYWN0ZWRPbmNlQWdhaW4xMjM0NQ==\n".into(),
            vec![pwd(13), "UmVkYWN0ZWRPbmNlQWdhaW4xMjM0NQ==".into()],
        ),
        (
            format!("printf %s {} | base64 -w0", pwd(14)),
            "QW5vdGhlckVuY29kZWRWYWx1ZTk4Nw==".into(),
            vec![pwd(14), "QW5vdGhlckVuY29kZWRWYWx1ZTk4Nw==".into()],
        ),
        (
            "kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath=\"{.data.password}\" | base64 -d".into(),
            pwd(15),
            vec![pwd(15)],
        ),
        (
            "argocd admin initial-password -n argocd".into(),
            format!("{}\n\n This password must be only used for first time login.\n", pwd(16)),
            vec![pwd(16)],
        ),
        (
            "kubectl --context prod get secret db -o yaml".into(),
            format!("apiVersion: v1\ndata:\n  password: {}\nkind: Secret\n", pwd(17)),
            vec![pwd(17)],
        ),
        (
            "bin/elasticsearch-reset-password -u elastic".into(),
            format!("Password for the [elastic] user successfully reset.\nNew value: {}\n", pwd(18)),
            vec![pwd(18)],
        ),
        (
            "cat config/master.key".into(),
            format!("{}\n", rs(19, HEX, 32)),
            vec![rs(19, HEX, 32)],
        ),
        (
            "docker exec db cat /run/secrets/db_password".into(),
            format!("{}\n", pwd(21)),
            vec![pwd(21)],
        ),
        (
            "cat ~/.vault-token".into(),
            format!("hvs.{}", rs(22, ALNUM, 24)),
            vec![rs(22, ALNUM, 24)],
        ),
        (
            "bw get password github.com".into(),
            format!("{}\n", pwd(23)),
            vec![pwd(23)],
        ),
        (
            "lpass show --password work/db".into(),
            format!("{}\n", pwd(24)),
            vec![pwd(24)],
        ),
        (
            "/opt/homebrew/bin/op read op://Private/db/password".into(),
            pwd(26),
            vec![pwd(26)],
        ),
        (
            "op signin --account my --raw".into(),
            format!("{}\n", pwd(25)),
            vec![pwd(25)],
        ),
        (
            "cd api && cat .env".into(),
            format!("PORT=8080\nGEOCODER={}\nDEBUG=true\n", pwd(12)),
            vec![pwd(12)],
        ),
    ];
    for (i, (cmd, output, secrets)) in cases.iter().enumerate() {
        let id = format!("toolu_01Case{i}");
        let text = transcript(&[tool_use(&id, cmd), tool_result(&id, output)]);
        for out in redacted(&text) {
            for s in secrets {
                assert!(!out.contains(s.as_str()), "{cmd}: {s} survived:\n{out}");
            }
        }
        // The array form of `content`.
        let text = transcript(&[tool_use(&id, cmd), tool_result_parts(&id, output)]);
        for out in redacted(&text) {
            for s in secrets {
                assert!(!out.contains(s.as_str()), "{cmd} (parts): {s} survived");
            }
        }
    }
}

#[test]
fn a_read_of_a_secret_file_is_a_secret_reading_command() {
    let id = "toolu_01ReadEnv";
    let text = transcript(&[
        read_use(id, "/home/zed/app/.env.production"),
        tool_result(
            id,
            &format!("     1\u{2192}STRIPE={}\n     2\u{2192}PORT=80\n", pwd(20)),
        ),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains(&pwd(20)), "{out}");
    }
}

#[test]
fn the_link_is_the_tool_use_id() {
    let out_text = format!("{}\n", pwd(30));
    // The same output answering an ordinary command, or answering no
    // marked id, is kept: nothing about it alone says secret.
    for text in [
        transcript(&[
            tool_use("toolu_01A", "git rev-parse --short HEAD"),
            tool_result("toolu_01A", &out_text),
        ]),
        transcript(&[
            tool_use("toolu_01A", "pass show infra/db"),
            tool_result("toolu_01B", &out_text),
        ]),
        transcript(&[tool_result("toolu_01A", &out_text)]),
    ] {
        for out in redacted(&text) {
            assert!(out.contains(&pwd(30)), "redacted without a link:\n{out}");
        }
    }
    // A later mention of the secret, anywhere, is redacted too.
    let text = transcript(&[
        tool_use("toolu_01C", "pass show infra/db"),
        tool_result("toolu_01C", &out_text),
        tool_use("toolu_01D", &format!("psql -W {}", pwd(30))),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains(&pwd(30)), "{out}");
    }
}

#[test]
fn messages_and_ordinary_words_are_kept() {
    let text = transcript(&[
        tool_use("toolu_01E", "pass show -c web/login"),
        tool_result(
            "toolu_01E",
            "Copied web/login to clipboard. Will clear in 45 seconds.",
        ),
        tool_use("toolu_01F", "pass show missing/entry"),
        tool_result(
            "toolu_01F",
            "Error: missing/entry is not in the password store.",
        ),
        // Encoding a word that is not a credential.
        tool_use("toolu_01H", "echo -n hello | base64"),
        tool_result("toolu_01H", "aGVsbG8gd29ybGQgYWdhaW4=\n"),
        tool_use("toolu_01G", "cat .env"),
        tool_result("toolu_01G", "PORT=8080\nDEBUG=true\nLOG_LEVEL=info\n"),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains("[REDACTED"), "{out}");
    }
}
