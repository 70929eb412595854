//! Table tests per rule: every true positive is tried plain, inside a JSON
//! transcript line, inside JSON nested in JSON, percent-encoded, at line
//! start and end, and next to quotes (and `_` for prefixed tokens); near
//! misses must produce no finding at all.

mod common;
use common::*;

struct Case {
    kind: &'static str,
    /// Text containing the secret.
    ctx: String,
    secret: String,
    /// Prefixed token: also try it glued after `_`.
    token: bool,
}

fn c(kind: &'static str, ctx: String, secret: String) -> Case {
    Case {
        kind,
        ctx,
        secret,
        token: false,
    }
}
fn t(kind: &'static str, secret: String) -> Case {
    Case {
        kind,
        ctx: secret.clone(),
        secret,
        token: true,
    }
}

fn positives() -> Vec<Case> {
    let pem_body: String = (0..6)
        .map(|i| rs(40 + i, B64, 64))
        .collect::<Vec<_>>()
        .join("\n");
    let aws_secret = rs(7, B64, 40);
    let heroku_uuid = format!(
        "{}-{}-4{}-a{}-{}",
        rs(1, HEX, 8),
        rs(2, HEX, 4),
        rs(3, HEX, 3),
        rs(4, HEX, 3),
        rs(5, HEX, 12)
    );
    let basic = {
        // base64("deploy:" + password) computed by hand-rolled encoder.
        b64(&format!("deploy:{}", rs(9, ALNUM, 14)))
    };
    vec![
        t("github-token", format!("ghp_{}", rs(1, ALNUM, 36))),
        t("github-token", format!("gho_{}", rs(2, ALNUM, 36))),
        t("github-token", format!("ghu_{}", rs(3, ALNUM, 36))),
        t("github-token", format!("ghs_{}", rs(4, ALNUM, 36))),
        t("github-token", format!("ghr_{}", rs(5, ALNUM, 36))),
        t("github-token", format!("github_pat_{}_{}", rs(6, ALNUM, 22), rs(7, ALNUM, 59))),
        t("gitlab-token", format!("glpat-{}", rs(8, URLSAFE, 20))),
        t("slack-token", format!("xoxb-{}-{}-{}", rs(9, "0123456789", 12), rs(10, "0123456789", 13), rs(11, ALNUM, 24))),
        c("slack-webhook", format!("https://hooks.slack.com/services/T{}/B{}/{}", rs(12, UPPER_NUM, 8), rs(13, UPPER_NUM, 10), rs(14, ALNUM, 24)), format!("T{}", rs(12, UPPER_NUM, 8))),
        t("stripe-key", format!("sk_live_{}", rs(15, ALNUM, 24))),
        t("stripe-key", format!("rk_live_{}", rs(16, ALNUM, 24))),
        t("openai-key", format!("sk-{}T3BlbkFJ{}", rs(17, ALNUM, 20), rs(18, ALNUM, 20))),
        t("openai-key", format!("sk-proj-{}", rs(19, URLSAFE, 80))),
        t("openai-key", format!("sk-svcacct-{}", rs(20, URLSAFE, 60))),
        t("openai-key", format!("sk-admin-{}", rs(21, URLSAFE, 60))),
        t("anthropic-key", format!("sk-ant-api03-{}", rs(22, URLSAFE, 93))),
        t("anthropic-key", format!("sk-ant-oat01-{}", rs(23, URLSAFE, 93))),
        t("openrouter-key", format!("sk-or-v1-{}", rs(24, HEX, 64))),
        t("google-api-key", format!("AIza{}", rs(25, URLSAFE, 35))),
        t("google-oauth-token", format!("ya29.{}", rs(26, URLSAFE, 120))),
        c("gcp-service-account", format!("\"private_key_id\": \"{}\",", rs(27, HEX, 40)), rs(27, HEX, 40)),
        t("aws-access-key-id", format!("AKIA{}", rs(28, UPPER_NUM, 16))),
        c("aws-secret-key", format!("AWS_SECRET_ACCESS_KEY={aws_secret}"), aws_secret.clone()),
        c("aws-secret-key", format!("aws_secret_access_key = {aws_secret}"), aws_secret),
        c("azure-storage-key", format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={}==;EndpointSuffix=core.windows.net", rs(29, B64, 86)), format!("{}==", rs(29, B64, 86))),
        t("npm-token", format!("npm_{}", rs(30, ALNUM, 36))),
        t("pypi-token", format!("pypi-AgEIcHlwaS5vcmc{}", rs(31, URLSAFE, 70))),
        t("dockerhub-token", format!("dckr_pat_{}", rs(32, URLSAFE, 27))),
        t("huggingface-token", format!("hf_{}", rs(33, ALNUM, 34))),
        t("twilio-key", format!("SK{}", rs(34, HEX, 32))),
        t("sendgrid-key", format!("SG.{}.{}", rs(35, URLSAFE, 22), rs(36, URLSAFE, 43))),
        t("mailgun-key", format!("key-{}", rs(37, HEX, 32))),
        c("heroku-key", format!("HEROKU_API_KEY={heroku_uuid}"), heroku_uuid),
        t("digitalocean-token", format!("dop_v1_{}", rs(38, HEX, 64))),
        t("shopify-token", format!("shpat_{}", rs(39, HEX, 32))),
        c("discord-token", format!("DISCORD_TOKEN={}", discord()), discord()),
        t("telegram-bot-token", format!("{}:AA{}", rs(41, "123456789", 10), rs(42, URLSAFE, 33))),
        t("databricks-token", format!("dapi{}", rs(43, HEX, 32))),
        c("datadog-key", format!("DD_API_KEY={}", rs(44, HEX, 32)), rs(44, HEX, 32)),
        t("sentry-token", format!("sntryu_{}", rs(45, HEX, 64))),
        t("vault-token", format!("hvs.{}", rs(46, URLSAFE, 90))),
        t("jwt", format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", rs(47, URLSAFE, 40), rs(48, URLSAFE, 43))),
        c("private-key", format!("-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"), rs(41, B64, 64)),
        c("private-key", format!("-----BEGIN OPENSSH PRIVATE KEY----- {} -----END OPENSSH PRIVATE KEY-----", rs(49, B64, 70)), rs(49, B64, 70)),
        c("credential-url", format!("postgres://app:{}@db.example.com:5432/prod", rs(50, ALNUM, 16)), rs(50, ALNUM, 16)),
        c("basic-auth", format!("Authorization: Basic {basic}"), basic.clone()),
        c("bearer-token", format!("curl -H 'Authorization: Bearer {}'", rs(51, ALNUM, 40)), rs(51, ALNUM, 40)),
        c("session-cookie", format!("Cookie: sessionid={}; theme=dark", rs(52, ALNUM, 32)), rs(52, ALNUM, 32)),
        c("password", "DB_PASSWORD=hunter2hunter".to_string(), "hunter2hunter".to_string()),
        c("password", "password: correct-horse-battery-staple".to_string(), "correct-horse-battery-staple".to_string()),
        c("password", "mysql -u root --password=Sup3rS3cret!".to_string(), "Sup3rS3cret!".to_string()),
        c("generic-secret", format!("export API_KEY={}", rs(53, HEX, 40)), rs(53, HEX, 40)),
        c("generic-secret", format!("SECRET_KEY = 'django-insecure-{}'", rs(54, ALNUM, 40)), format!("django-insecure-{}", rs(54, ALNUM, 40))),
        c("generic-secret", format!("client_secret: {}", rs(55, ALNUM, 32)), rs(55, ALNUM, 32)),
        c("ip-address", "ssh 192.168.1.23 -p 22".into(), "192.168.1.23".into()),
        c("ip-address", "peer at 10.20.30.40".into(), "10.20.30.40".into()),
        c("ip-address", "link fe80::1c2b:3aff:fe4d:5e6f%en0 up".into(), "fe80::1c2b:3aff:fe4d:5e6f".into()),
        c("mac-address", "ether 3c:22:fb:12:ab:cd".into(), "3c:22:fb:12:ab:cd".into()),
        c("hostname", "ping nas-01.local".into(), "nas-01.local".into()),
        c("hostname", "open http://router.fritz.box/".into(), "router.fritz.box".into()),
        c("hostname", "build on api.corp.internal now".into(), "api.corp.internal".into()),
        c("home-path", format!("cat {HOME}/.ssh/config"), "/home/zed/".into()),
        c("home-user", "ls /Users/alice.smith/Documents".into(), "alice.smith".into()),
        c("git-email", "Author: zed.quimby@example.org".into(), "zed.quimby@example.org".into()),
        c("git-name", "Signed-off-by: Zed Quimby".into(), "Zed Quimby".into()),
        c("github-owner", "git clone git@github.com:zquimby/tool.git".into(), "zquimby".into()),
        c("github-token", {
            let inner = b64(&format!("GITHUB_TOKEN=ghp_{}\n", rs(90, ALNUM, 36)));
            format!("src=\"data:text/plain;base64,{inner}\"")
        }, b64(&format!("GITHUB_TOKEN=ghp_{}\n", rs(90, ALNUM, 36)))),
    ]
}

fn discord() -> String {
    format!(
        "M{}.{}.{}",
        rs(60, URLSAFE, 23),
        rs(61, URLSAFE, 6),
        rs(62, URLSAFE, 27)
    )
}

fn variants(case: &Case) -> Vec<(String, String)> {
    let ctx = &case.ctx;
    let mut v = vec![
        ("plain".into(), ctx.clone()),
        ("line-end".into(), format!("see this: {ctx}")),
        ("single-quotes".into(), format!("'{ctx}'")),
        ("double-quotes".into(), format!("\"{ctx}\"")),
        (
            "json".into(),
            format!(
                "{{\"type\":\"user\",\"uuid\":\"3f1c2b1a-0000-4000-8000-000000000001\",\"message\":{{\"role\":\"user\",\"content\":{}}}}}",
                json_string(ctx)
            ),
        ),
        (
            "json-in-json".into(),
            format!(
                "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"Bash\",\"input\":{{\"command\":{}}}}}]}}}}",
                json_string(&format!("{{\"env\":{}}}", json_string(ctx)))
            ),
        ),
    ];
    if !ctx.contains('\n') {
        v.push((
            "percent".into(),
            format!("GET /cb?next={} HTTP/1.1", percent(ctx)),
        ));
    }
    if case.token {
        v.push(("after-underscore".into(), format!("MY_TOKEN_{ctx}")));
        v.push((
            "json-after-newline-escape".into(),
            format!("{{\"c\":\"line one\\n{ctx}\\nline three\"}}"),
        ));
    }
    v
}

#[test]
fn every_positive_is_redacted_in_every_encoding() {
    let s = scanner();
    let mut failures = Vec::new();
    for case in positives() {
        for (name, input) in variants(&case) {
            let r = match s.redact(&input) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{} / {name}: refused: {e}", case.kind));
                    continue;
                }
            };
            let leaked = r.text.contains(&case.secret)
                || r.text.contains(&percent(&case.secret))
                || r.text.contains(json_string(&case.secret).trim_matches('"'));
            if leaked {
                failures.push(format!(
                    "{} / {name}: secret survived: {}",
                    case.kind, r.text
                ));
            }
            if !r.findings.iter().any(|f| &*f.kind == case.kind) {
                let kinds: Vec<_> = r.findings.iter().map(|f| &*f.kind).collect();
                failures.push(format!(
                    "{} / {name}: no finding of that kind (got {kinds:?})",
                    case.kind
                ));
            }
            if input.starts_with('{') {
                assert!(
                    serde_json::from_str::<serde_json::Value>(&input).is_ok(),
                    "test input must be JSON"
                );
                if serde_json::from_str::<serde_json::Value>(&r.text).is_err() {
                    failures.push(format!(
                        "{} / {name}: output is not JSON: {}",
                        case.kind, r.text
                    ));
                }
            }
            let again = s.redact(&r.text).expect("re-redaction");
            if again.text != r.text {
                failures.push(format!("{} / {name}: not idempotent", case.kind));
            }
        }
    }
    failures.truncate(60);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn placeholders_name_the_kind_and_contain_no_quote_or_backslash() {
    let s = scanner();
    for case in positives() {
        let r = s.redact(&case.ctx).unwrap();
        if case.kind != "home-path" {
            assert!(
                r.text.contains(&format!("[REDACTED:{}]", case.kind)),
                "{}: {}",
                case.kind,
                r.text
            );
        }
        for f in &r.findings {
            assert!(!f.kind.contains(['"', '\\']));
        }
        assert!(
            s.scan(&r.text).is_empty(),
            "placeholder flagged: {}",
            r.text
        );
    }
}

fn near_misses() -> Vec<String> {
    let sha1 = rs(70, HEX, 40);
    let sha256 = rs(71, HEX, 64);
    let sha512 = rs(72, HEX, 128);
    let img = rs(73, B64, 4000);
    vec![
        format!("commit {sha1}"),
        format!("sha256:{sha256}"),
        format!("sha512sum: {sha512}"),
        "session 6f1c2b1a-9d3e-4f00-8a1b-2c3d4e5f6a7b started".into(),
        format!("{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"image\",\"source\":{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{img}\"}}}}]}}}}"),
        format!("{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"{}\"}}]}}}}", rs(74, B64, 600)),
        "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".into(),
        "OPENAI_API_KEY=sk-...your-key-here".into(),
        "password: <your-password>".into(),
        "API_KEY=${API_KEY}".into(),
        "token = get_token()".into(),
        "secret_key = settings.SECRET_KEY".into(),
        "password = os.environ[\"DB_PASSWORD\"]".into(),
        "\"usage\":{\"input_tokens\":1523,\"output_tokens\":88,\"cache_read_input_tokens\":20480}".into(),
        "max_tokens: 4096".into(),
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.".into(),
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE".into(),
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        "stripe.api_key = 'sk_test_4eC39HqLyjWDarjtT1zdp7dc'".into(),
        "docs use 192.0.2.10, 198.51.100.7, 203.0.113.99 and 2001:db8::1".into(),
        "loopback 127.0.0.1 and ::1 and 0.0.0.0; public 8.8.8.8".into(),
        "version 10.4.2 released; see https://example.com/docs".into(),
        "time 12:34:56 and ratio 3:2".into(),
        "http://localhost:8080/api".into(),
        "the token is expired; rotate the secret".into(),
        "host.docker.internal and metadata.google.internal".into(),
        "edit .claude/settings.local.json and .env.local; chrome.storage.local.get()".into(),
        "state in `browser.storage.local` so that".into(),
        "postgres://user:${DB_PASSWORD}@localhost/db".into(),
        "Authorization: Bearer <token>".into(),
        "/var/root and /rootfs".into(),
        "/Users/Shared/Library".into(),
        "password=[REDACTED:password] token [REDACTED:github-token] ~/x".into(),
    ]
}

#[test]
fn near_misses_do_not_fire() {
    let s = scanner();
    let mut failures = Vec::new();
    for input in near_misses() {
        let f = s.scan(&input);
        if !f.is_empty() {
            failures.push(format!("{f:?} on {}", &input[..input.len().min(120)]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn home_path_boundaries_follow_the_predecessor() {
    let s = scanner();
    let r = s
        .redact("/home/zed.zip /home/zed-old /home/zed_2 /home/zed/x /home/zedd")
        .unwrap();
    assert_eq!(r.text, "~.zip ~-old ~_2 ~/x /home/[REDACTED:home-user]");
    let root = abcd_redact::Scanner::new(
        abcd_redact::Identity {
            home: Some("/root".into()),
            ..Default::default()
        },
        None,
    );
    let r = root.redact("/root/x /rootfs /var/root").unwrap();
    assert_eq!(r.text, "~/x /rootfs /var/root");
}

#[test]
fn a_value_found_once_is_redacted_everywhere_including_earlier_lines() {
    let s = scanner();
    let pw = "Zq9-tiger-lamp-44";
    let text = format!("echo {pw}\nDB_PASSWORD={pw}\nlater: {pw}\n");
    let r = s.redact(&text).unwrap();
    assert!(!r.text.contains(pw), "{}", r.text);
    let parts = s
        .redact_parts(&[&format!("agent note {pw}"), &format!("password={pw}")])
        .unwrap();
    assert!(!parts[0].text.contains(pw));
}

#[test]
fn findings_never_carry_the_secret() {
    let s = scanner();
    let tok = format!("ghp_{}", rs(99, ALNUM, 36));
    let f = s.scan(&format!("x {tok}"));
    let json = serde_json::to_string(&f).unwrap();
    assert!(!json.contains(&tok[4..]));
    assert_eq!((f[0].line, f[0].column, f[0].length), (1, 3, 40));
}
