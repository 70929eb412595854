//! Corpus generator and scorer for abcd-redact.
//!
//! Owns: writing realistic Claude Code JSONL transcripts (user prompts,
//! assistant text with usage, tool_use inputs, tool_result outputs holding
//! file contents, env dumps, shell history, stack traces, thinking
//! signatures, images) with planted secrets of every kind plus decoys, and a
//! ground-truth list; scoring a redacted output (or another scanner's report)
//! against it. Must never: use real secrets — every value is generated from
//! a seeded PRNG, so a run is reproducible from its seed.

use serde::{Deserialize, Serialize};

pub mod varied;
pub use varied::{generate_varied, generate_varied_with_truth, non_ascii_line_share};

/// Identity the corpus is written for; the quality and speed commands build
/// their scanner with it.
pub fn corpus_identity() -> abcd_redact::Identity {
    abcd_redact::Identity {
        home: Some("/home/zed".into()),
        user: Some("zed".into()),
        git_names: vec!["Zed Quimby".into()],
        git_emails: vec!["zed.quimby@example.org".into()],
        github_owner: Some("zquimby".into()),
    }
}

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn s(&mut self, alphabet: &str, len: usize) -> String {
        let a = alphabet.as_bytes();
        (0..len).map(|_| a[self.below(a.len())] as char).collect()
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const HEX: &str = "0123456789abcdef";
pub const UPPER_NUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

pub fn b64(s: &[u8]) -> String {
    abcd_redact::b64_encode(s)
}

fn uuid(r: &mut Rng) -> String {
    format!(
        "{}-{}-4{}-a{}-{}",
        r.s(HEX, 8),
        r.s(HEX, 4),
        r.s(HEX, 3),
        r.s(HEX, 3),
        r.s(HEX, 12)
    )
}

/// One planted value in the corpus.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Truth {
    /// abcd kind this value must be redacted as (decoys: what they imitate).
    pub kind: String,
    /// Secrets are what a secret scanner should find; identity and network
    /// values are abcd-only (the side-by-side scores secrets).
    pub class: String,
    pub value: String,
    pub decoy: bool,
    pub line: usize,
}

/// (kind, class, context, value) for every planted kind.
fn secret(r: &mut Rng, which: usize) -> (&'static str, &'static str, String, String) {
    let sec = "secret";
    match which {
        0 => {
            let v = format!("ghp_{}", r.s(ALNUM, 36));
            ("github-token", sec, format!("export GITHUB_TOKEN={v}"), v)
        }
        1 => {
            let v = format!("github_pat_{}_{}", r.s(ALNUM, 22), r.s(ALNUM, 59));
            ("github-token", sec, format!("\"token\": \"{v}\""), v)
        }
        2 => {
            let v = format!("gho_{}", r.s(ALNUM, 36));
            ("github-token", sec, format!("oauth_token: {v}"), v)
        }
        3 => {
            let v = format!("glpat-{}", r.s(URLSAFE, 20));
            (
                "gitlab-token",
                sec,
                format!("git remote set-url origin https://oauth2:{v}@gitlab.com/g/p.git"),
                v,
            )
        }
        4 => {
            let v = format!(
                "xoxb-{}-{}-{}",
                r.s("0123456789", 12),
                r.s("0123456789", 13),
                r.s(ALNUM, 24)
            );
            ("slack-token", sec, format!("SLACK_BOT_TOKEN={v}"), v)
        }
        5 => {
            let v = format!(
                "T{}/B{}/{}",
                r.s(UPPER_NUM, 8),
                r.s(UPPER_NUM, 10),
                r.s(ALNUM, 24)
            );
            (
                "slack-webhook",
                sec,
                format!("curl -X POST https://hooks.slack.com/services/{v} -d '{{}}'"),
                v,
            )
        }
        6 => {
            let v = format!("sk_live_{}", r.s(ALNUM, 24));
            ("stripe-key", sec, format!("Stripe.api_key = \"{v}\""), v)
        }
        7 => {
            let v = format!("sk-proj-{}", r.s(URLSAFE, 120));
            ("openai-key", sec, format!("OPENAI_API_KEY={v}"), v)
        }
        8 => {
            let v = format!("sk-{}T3BlbkFJ{}", r.s(ALNUM, 20), r.s(ALNUM, 20));
            ("openai-key", sec, format!("openai.api_key = '{v}'"), v)
        }
        9 => {
            let v = format!("sk-svcacct-{}", r.s(URLSAFE, 80));
            (
                "openai-key",
                sec,
                format!("{{\"openai\":{{\"key\":\"{v}\"}}}}"),
                v,
            )
        }
        10 => {
            let v = format!("sk-ant-api03-{}AA", r.s(URLSAFE, 93));
            ("anthropic-key", sec, format!("ANTHROPIC_API_KEY={v}"), v)
        }
        11 => {
            let v = format!("sk-ant-oat01-{}AA", r.s(URLSAFE, 93));
            (
                "anthropic-key",
                sec,
                format!("CLAUDE_CODE_OAUTH_TOKEN={v}"),
                v,
            )
        }
        12 => {
            let v = format!("sk-or-v1-{}", r.s(HEX, 64));
            ("openrouter-key", sec, format!("\"apiKey\":\"{v}\","), v)
        }
        13 => {
            let v = format!("AIza{}", r.s(URLSAFE, 35));
            ("google-api-key", sec, format!("const key = \"{v}\";"), v)
        }
        14 => {
            let v = format!("ya29.{}", r.s(URLSAFE, 150));
            (
                "google-oauth-token",
                sec,
                format!("access_token={v}&expires_in=3599"),
                v,
            )
        }
        15 => {
            let v = r.s(HEX, 40);
            ("gcp-service-account", sec, format!("{{\"type\": \"service_account\", \"project_id\": \"p\", \"private_key_id\": \"{v}\"}}"), v)
        }
        16 => {
            let v = format!("AKIA{}", r.s(UPPER_NUM, 16));
            (
                "aws-access-key-id",
                sec,
                format!("aws_access_key_id = {v}"),
                v,
            )
        }
        17 => {
            let v = r.s(B64, 40);
            (
                "aws-secret-key",
                sec,
                format!("aws_secret_access_key = {v}"),
                v,
            )
        }
        18 => {
            let v = format!("{}==", r.s(B64, 86));
            ("azure-storage-key", sec, format!("DefaultEndpointsProtocol=https;AccountName=acct{};AccountKey={v};EndpointSuffix=core.windows.net", r.s(HEX, 4)), v)
        }
        19 => {
            let v = format!("npm_{}", r.s(ALNUM, 36));
            (
                "npm-token",
                sec,
                format!("//registry.npmjs.org/:_authToken={v}"),
                v,
            )
        }
        20 => {
            let v = format!("pypi-AgEIcHlwaS5vcmc{}", r.s(URLSAFE, 70));
            ("pypi-token", sec, format!("password = {v}"), v)
        }
        21 => {
            let v = format!("dckr_pat_{}", r.s(URLSAFE, 27));
            (
                "dockerhub-token",
                sec,
                format!("echo {v} | docker login -u zq --password-stdin"),
                v,
            )
        }
        22 => {
            let v = format!("hf_{}", r.s(ALNUM, 34));
            ("huggingface-token", sec, format!("HF_TOKEN={v}"), v)
        }
        23 => {
            let v = format!("SK{}", r.s(HEX, 32));
            ("twilio-key", sec, format!("TWILIO_API_KEY={v}"), v)
        }
        24 => {
            let v = format!("SG.{}.{}", r.s(URLSAFE, 22), r.s(URLSAFE, 43));
            ("sendgrid-key", sec, format!("SENDGRID_API_KEY='{v}'"), v)
        }
        25 => {
            let v = format!("key-{}", r.s(HEX, 32));
            ("mailgun-key", sec, format!("MAILGUN_API_KEY={v}"), v)
        }
        26 => {
            let v = uuid(r);
            ("heroku-key", sec, format!("HEROKU_API_KEY={v}"), v)
        }
        27 => {
            let v = format!("dop_v1_{}", r.s(HEX, 64));
            (
                "digitalocean-token",
                sec,
                format!("doctl auth init -t {v}"),
                v,
            )
        }
        28 => {
            let v = format!("shpat_{}", r.s(HEX, 32));
            (
                "shopify-token",
                sec,
                format!("X-Shopify-Access-Token: {v}"),
                v,
            )
        }
        29 => {
            let v = format!(
                "M{}.{}.{}",
                r.s(URLSAFE, 23),
                r.s(URLSAFE, 6),
                r.s(URLSAFE, 27)
            );
            ("discord-token", sec, format!("DISCORD_TOKEN={v}"), v)
        }
        30 => {
            let v = format!("{}:AA{}", r.s("123456789", 10), r.s(URLSAFE, 33));
            (
                "telegram-bot-token",
                sec,
                format!("https://api.telegram.org/bot{v}/getMe"),
                v,
            )
        }
        31 => {
            let v = format!("dapi{}", r.s(HEX, 32));
            ("databricks-token", sec, format!("DATABRICKS_TOKEN={v}"), v)
        }
        32 => {
            let v = r.s(HEX, 32);
            ("datadog-key", sec, format!("DD_API_KEY={v}"), v)
        }
        33 => {
            let v = format!("sntryu_{}", r.s(HEX, 64));
            ("sentry-token", sec, format!("SENTRY_AUTH_TOKEN={v}"), v)
        }
        34 => {
            let v = format!("hvs.{}", r.s(URLSAFE, 90));
            ("vault-token", sec, format!("VAULT_TOKEN={v}"), v)
        }
        35 => {
            let v = format!(
                "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.{}",
                r.s(URLSAFE, 60),
                r.s(URLSAFE, 86)
            );
            ("jwt", sec, format!("id_token: {v}"), v)
        }
        36 => {
            let body: Vec<String> = (0..8).map(|_| r.s(B64, 64)).collect();
            let v = body[3].clone();
            (
                "private-key",
                sec,
                format!(
                    "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                    body.join("\n")
                ),
                v,
            )
        }
        37 => {
            let body: Vec<String> = (0..5).map(|_| r.s(B64, 70)).collect();
            let v = body[2].clone();
            (
                "private-key",
                sec,
                format!(
                    "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
                    body.join("\n")
                ),
                v,
            )
        }
        38 => {
            let v = r.s(ALNUM, 18);
            (
                "credential-url",
                sec,
                format!("DATABASE_URL=postgres://app:{v}@db.prod.example.com:5432/app"),
                v,
            )
        }
        39 => {
            let v = r.s(ALNUM, 16);
            (
                "credential-url",
                sec,
                format!("redis-cli -u redis://default:{v}@cache.example.net:6379"),
                v,
            )
        }
        40 => {
            let v = b64(format!("deploy:{}", r.s(ALNUM, 14)).as_bytes());
            (
                "basic-auth",
                sec,
                format!("curl -H \"Authorization: Basic {v}\" https://ci.example.com/api"),
                v,
            )
        }
        41 => {
            let v = r.s(ALNUM, 48);
            (
                "bearer-token",
                sec,
                format!("curl -H 'Authorization: Bearer {v}' https://api.example.com/v1/me"),
                v,
            )
        }
        42 => {
            let v = r.s(ALNUM, 40);
            (
                "session-cookie",
                sec,
                format!("Cookie: sessionid={v}; csrftoken=abc"),
                v,
            )
        }
        43 => {
            let w = ["tiger", "lamp", "river", "stone", "maple", "cloud"];
            let v = format!(
                "{}-{}-{}{}",
                r.pick(&w),
                r.pick(&w),
                r.pick(&w),
                r.below(100)
            );
            ("password", sec, format!("DB_PASSWORD={v}"), v)
        }
        44 => {
            let v = format!("{}{}!", r.s(ALNUM, 10), r.below(1000));
            (
                "password",
                sec,
                format!("mysql -u app --password={v} prod"),
                v,
            )
        }
        45 => {
            let v = format!("{}{}", r.s(ALNUM, 12), r.below(99));
            ("password", sec, format!("  password: \"{v}\""), v)
        }
        46 => {
            let v = format!(
                "django-insecure-{}",
                r.s("abcdefghijklmnopqrstuvwxyz0123456789!@#%^&*(-_=+)", 50)
                    .replace(['(', ')'], "x")
            );
            ("generic-secret", sec, format!("SECRET_KEY = '{v}'"), v)
        }
        47 => {
            let v = r.s(HEX, 40);
            ("generic-secret", sec, format!("api_key = \"{v}\""), v)
        }
        48 => {
            let v = r.s(ALNUM, 32);
            ("generic-secret", sec, format!("client_secret: {v}"), v)
        }
        49 => {
            let v = b64(format!("ci-bot:{}", r.s(ALNUM, 20)).as_bytes());
            (
                "basic-auth",
                sec,
                format!("{{\"auths\":{{\"registry.example.com\":{{\"auth\":\"{v}\"}}}}}}"),
                v,
            )
        }
        50 => {
            let v = r.s(ALNUM, 40);
            ("bearer-token", sec, format!("Bearer {v}"), v)
        }
        // identity / network (abcd-only)
        51 => {
            let v = format!("192.168.{}.{}", r.below(255), 1 + r.below(250));
            ("ip-address", "network", format!("ssh zed@{v}"), v)
        }
        52 => {
            let v = format!("10.{}.{}.{}", r.below(255), r.below(255), 1 + r.below(250));
            (
                "ip-address",
                "network",
                format!("inet {v} netmask 0xff000000"),
                v,
            )
        }
        53 => {
            let v = format!(
                "fe80::{}:{}ff:fe{}:{}",
                r.s(HEX, 4),
                r.s(HEX, 2),
                r.s(HEX, 2),
                r.s(HEX, 4)
            );
            (
                "ip-address",
                "network",
                format!("inet6 {v}%en0 prefixlen 64"),
                v,
            )
        }
        54 => {
            let v = (0..6).map(|_| r.s(HEX, 2)).collect::<Vec<_>>().join(":");
            ("mac-address", "network", format!("ether {v}"), v)
        }
        55 => {
            let v = format!("nas-{}.local", r.s("abcdefghij", 3));
            ("hostname", "network", format!("mount //{v}/share"), v)
        }
        56 => {
            let v = format!("build{}.corp.internal", r.below(99));
            ("hostname", "network", format!("ssh {v}"), v)
        }
        57 => {
            let v = "/home/zed".to_string();
            (
                "home-path",
                "identity",
                format!("cd {v}/src/app && make"),
                v,
            )
        }
        58 => {
            let v = format!("u{}", r.s("abcdefghijklmnop", 6));
            ("home-user", "identity", format!("ls /Users/{v}/Library"), v)
        }
        59 => {
            let v = "zed.quimby@example.org".to_string();
            (
                "git-email",
                "identity",
                format!("Author: Zed Quimby <{v}>"),
                v,
            )
        }
        60 => {
            let v = "zquimby".to_string();
            (
                "github-owner",
                "identity",
                format!("git clone https://github.com/{v}/tool.git"),
                v,
            )
        }
        _ => unreachable!(),
    }
}

pub const KINDS: usize = 61;

/// Decoys: look like secrets to a careless rule, must never be redacted.
fn decoy(r: &mut Rng, which: usize) -> (&'static str, String, String) {
    match which {
        0 => {
            let v = r.s(HEX, 40);
            ("git-sha", format!("commit {v}"), v)
        }
        1 => {
            let v = r.s(HEX, 64);
            ("sha256", format!("sha256:{v}"), v)
        }
        2 => {
            let v = uuid(r);
            ("uuid", format!("request id {v}"), v)
        }
        3 => (
            "placeholder",
            "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".into(),
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".into(),
        ),
        4 => (
            "placeholder",
            "password: <your-password>".into(),
            "<your-password>".into(),
        ),
        5 => (
            "placeholder",
            "API_KEY=${API_KEY}".into(),
            "${API_KEY}".into(),
        ),
        6 => ("code-ref", "token = get_token()".into(), "get_token".into()),
        7 => (
            "code-ref",
            "secret_key = settings.SECRET_KEY".into(),
            "settings.SECRET_KEY".into(),
        ),
        8 => (
            "example-key",
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE".into(),
            "AKIAIOSFODNN7EXAMPLE".into(),
        ),
        9 => (
            "example-key",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        ),
        10 => (
            "example-key",
            "stripe.api_key = \"sk_test_4eC39HqLyjWDarjtT1zdp7dc\"".into(),
            "sk_test_4eC39HqLyjWDarjtT1zdp7dc".into(),
        ),
        11 => {
            let v = format!("{}", 1000 + r.below(90000));
            ("number", format!("max_tokens: {v}"), v)
        }
        12 => (
            "doc-ip",
            "curl http://192.0.2.44/health".into(),
            "192.0.2.44".into(),
        ),
        13 => ("doc-ip", "ping 2001:db8::17".into(), "2001:db8::17".into()),
        14 => (
            "public-ip",
            "dig @8.8.8.8 example.com".into(),
            "8.8.8.8".into(),
        ),
        15 => (
            "public-host",
            "curl https://api.github.com/repos".into(),
            "api.github.com".into(),
        ),
        16 => (
            "version",
            format!("node v{}.{}.{}", 10 + r.below(12), r.below(20), r.below(30)),
            "node v".into(),
        ),
        17 => (
            "placeholder",
            "Authorization: Bearer <token>".into(),
            "<token>".into(),
        ),
        18 => (
            "lorem",
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit".into(),
            "consectetur adipiscing".into(),
        ),
        19 => {
            let v = r.s(HEX, 128);
            ("sha512", format!("sha512-{v}"), v)
        }
        20 => (
            "loopback",
            "listening on 127.0.0.1:3000 and [::1]:3000".into(),
            "127.0.0.1".into(),
        ),
        21 => (
            "timestamp",
            "2025-03-04T12:34:56.789Z".into(),
            "12:34:56".into(),
        ),
        _ => unreachable!(),
    }
}

pub const DECOYS: usize = 22;

const FILLER: &[&str] = &[
    "Let me look at the failing test first and then fix the parser.",
    "I'll run the build to see what breaks.",
    "The function `parse_header` returns early when the buffer is empty, so the caller never sees the error.",
    "error[E0382]: borrow of moved value: `buf`\n  --> src/lib.rs:42:17\n   |\n40 |     let v = buf;\n   |             --- value moved here",
    "Traceback (most recent call last):\n  File \"app/main.py\", line 12, in <module>\n    main()\n  File \"app/main.py\", line 8, in main\n    raise ValueError(\"bad input\")\nValueError: bad input",
    "fn main() {\n    let args: Vec<String> = std::env::args().collect();\n    println!(\"{:?}\", args);\n}\n",
    "diff --git a/src/lib.rs b/src/lib.rs\nindex 3b18e51..a2c4f0d 100644\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,4 +1,5 @@\n+use std::io;\n",
    "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.\nadded 1312 packages in 14s",
    "   Compiling serde v1.0.210\n   Compiling regex v1.11.0\n    Finished `release` profile [optimized] target(s) in 41.20s",
    "All 128 tests passed. The change is ready; I updated the README accordingly.",
];

/// Writes a transcript of about `target` bytes. `density` is the share of
/// tool results that carry a planted value (0.0 – 1.0).
pub fn generate(seed: u64, target: usize, density: f64) -> (String, Vec<Truth>) {
    let mut r = Rng::new(seed);
    let session = uuid(&mut r);
    let mut out = String::with_capacity(target + 4096);
    let mut truth = Vec::new();
    let mut parent = String::from("null");
    let mut line = 0usize;
    let mut k = 0usize;
    let mut d = 0usize;
    while out.len() < target {
        let u = uuid(&mut r);
        let env = format!(
            r#""parentUuid":{parent},"isSidechain":false,"userType":"external","cwd":"/home/zed/src/app","sessionId":"{session}","version":"2.1.74","gitBranch":"main","uuid":"{u}","timestamp":"2026-01-0{}T10:{:02}:{:02}.000Z""#,
            1 + r.below(9),
            r.below(60),
            r.below(60)
        );
        parent = format!("\"{u}\"");
        let plant = (r.below(1000) as f64) < density * 1000.0;
        let mut body = String::new();
        let mut planted: Vec<Truth> = Vec::new();
        for _ in 0..1 + r.below(4) {
            body.push_str(r.pick(FILLER));
            body.push('\n');
        }
        if plant {
            // Every kind and decoy in turn, so a small corpus covers all.
            if r.below(4) == 0 {
                let (kind, ctx, v) = decoy(&mut r, d % DECOYS);
                d += 1;
                body.push_str(&ctx);
                planted.push(Truth {
                    kind: kind.into(),
                    class: "decoy".into(),
                    value: v,
                    decoy: true,
                    line: 0,
                });
            } else {
                let (kind, class, ctx, v) = secret(&mut r, k % KINDS);
                k += 1;
                body.push_str(&ctx);
                planted.push(Truth {
                    kind: kind.into(),
                    class: class.into(),
                    value: v,
                    decoy: false,
                    line: 0,
                });
            }
            body.push('\n');
            for _ in 0..r.below(3) {
                body.push_str(r.pick(FILLER));
                body.push('\n');
            }
        }
        let shape = r.below(10);
        let sig_len = 400 + r.below(800);
        let img_len = 2000 + r.below(6000);
        let text = serde_json::to_string(&body).expect("string");
        let l = match shape {
            0 | 1 => {
                format!(r#"{{{env},"type":"user","message":{{"role":"user","content":{text}}}}}"#)
            }
            2 | 3 => {
                let inner = serde_json::to_string(
                    &serde_json::json!({"command": body, "description": "Run it"}),
                )
                .expect("json");
                let tool = format!("toolu_01{}", r.s(ALNUM, 22));
                // tool_use input as a JSON object, the model's own escaping.
                format!(
                    r#"{{{env},"type":"assistant","message":{{"id":"msg_01{}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"{tool}","name":"Bash","input":{inner}}}],"usage":{{"input_tokens":{},"output_tokens":{},"cache_read_input_tokens":{}}}}},"requestId":"req_011{}"}}"#,
                    r.s(ALNUM, 22),
                    r.below(5000),
                    r.below(900),
                    r.below(90000),
                    r.s(ALNUM, 21)
                )
            }
            4 => {
                // Nested: a tool result holding JSON that itself holds the text.
                let inner = serde_json::to_string(&serde_json::json!({"stdout": body, "exit": 0}))
                    .expect("json");
                let text2 = serde_json::to_string(&inner).expect("json");
                format!(
                    r#"{{{env},"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_01{}","type":"tool_result","content":{text2}}}]}}}}"#,
                    r.s(ALNUM, 22)
                )
            }
            5 if planted.iter().all(|p| !p.value.contains('\n')) && !body.contains("BEGIN") => {
                // Percent-encoded in a fetched URL.
                let enc: String = body
                    .bytes()
                    .map(|b| {
                        if b.is_ascii_alphanumeric() {
                            (b as char).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    })
                    .collect();
                format!(
                    r#"{{{env},"type":"assistant","message":{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_01{}","name":"WebFetch","input":{{"url":"https://example.com/cb?state={enc}"}}}}]}}}}"#,
                    r.s(ALNUM, 22)
                )
            }
            6 => format!(
                r#"{{{env},"type":"assistant","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":{text},"signature":"{}"}}]}}}}"#,
                r.s(B64, sig_len)
            ),
            7 if !plant => format!(
                r#"{{{env},"type":"user","message":{{"role":"user","content":[{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo{}"}}}}]}}}}"#,
                r.s(B64, img_len)
            ),
            _ => format!(
                r#"{{{env},"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_01{}","type":"tool_result","content":{text},"is_error":false}}]}}}}"#,
                r.s(ALNUM, 22)
            ),
        };
        line += 1;
        for mut p in planted {
            p.line = line;
            truth.push(p);
        }
        out.push_str(&l);
        out.push('\n');
    }
    (out, truth)
}

/// Per-kind tallies.
#[derive(Default, Debug, Clone, Serialize)]
pub struct Tally {
    pub planted: usize,
    pub caught: usize,
}

#[derive(Default, Debug, Serialize)]
pub struct Score {
    pub per_kind: std::collections::BTreeMap<String, Tally>,
    pub decoys: usize,
    pub decoy_hits: Vec<String>,
    pub planted: usize,
    pub caught: usize,
}

impl Score {
    pub fn recall(&self) -> f64 {
        if self.planted == 0 {
            1.0
        } else {
            self.caught as f64 / self.planted as f64
        }
    }
}

/// Scores a redacted corpus: a planted value is caught when it no longer
/// appears on its line (in any spelling the line held it); a decoy is a false
/// positive when it no longer appears. `classes` restricts which planted
/// values count (e.g. only "secret" for the side-by-side).
pub fn score_redacted(original: &str, redacted: &str, truth: &[Truth], classes: &[&str]) -> Score {
    let orig: Vec<&str> = original.lines().collect();
    let red: Vec<&str> = redacted.lines().collect();
    let mut s = Score::default();
    for t in truth {
        let (Some(o), Some(x)) = (orig.get(t.line - 1), red.get(t.line - 1)) else {
            continue;
        };
        let present_before = spellings(&t.value)
            .iter()
            .filter(|v| o.contains(v.as_str()))
            .count();
        let present_after = spellings(&t.value)
            .iter()
            .filter(|v| x.contains(v.as_str()))
            .count();
        if t.decoy {
            s.decoys += 1;
            if present_after < present_before {
                s.decoy_hits.push(format!("{} (line {})", t.kind, t.line));
            }
            continue;
        }
        if !classes.contains(&t.class.as_str()) {
            continue;
        }
        let e = s.per_kind.entry(t.kind.clone()).or_default();
        e.planted += 1;
        s.planted += 1;
        if present_after == 0 {
            e.caught += 1;
            s.caught += 1;
        }
    }
    s
}

/// Scores another scanner's JSON report: a planted value counts as caught
/// when some string in the report contains it (or a 12+ byte part of it, for
/// scanners that report a piece of a composite); a decoy is a false positive
/// when some reported string contains it.
pub fn score_report(report: &serde_json::Value, truth: &[Truth], classes: &[&str]) -> Score {
    let mut strings = Vec::new();
    collect_strings(report, &mut strings);
    let mut s = Score::default();
    for t in truth {
        let hit = strings
            .iter()
            .any(|r| r.contains(&t.value) || (r.len() >= 12 && t.value.contains(r.as_str())));
        if t.decoy {
            s.decoys += 1;
            if strings.iter().any(|r| {
                r.len() >= 6 && (r == &t.value || (t.value.len() >= 8 && r.contains(&t.value)))
            }) {
                s.decoy_hits.push(format!("{} (line {})", t.kind, t.line));
            }
            continue;
        }
        if !classes.contains(&t.class.as_str()) {
            continue;
        }
        let e = s.per_kind.entry(t.kind.clone()).or_default();
        e.planted += 1;
        s.planted += 1;
        if hit {
            e.caught += 1;
            s.caught += 1;
        }
    }
    s
}

fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) if s.len() >= 6 => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// The spellings a value can take on a transcript line.
fn spellings(v: &str) -> Vec<String> {
    let j = serde_json::to_string(v).expect("string");
    let j = j[1..j.len() - 1].to_string();
    let jj = serde_json::to_string(&j).expect("string");
    let jj = jj[1..jj.len() - 1].to_string();
    let pct: String = v
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let mut out = vec![v.to_string(), j, jj, pct];
    out.sort();
    out.dedup();
    out
}

/// Prints a per-kind table.
pub fn print_score(name: &str, s: &Score, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{name}: recall {:.2}% ({}/{}), false positives on decoys: {}/{}",
        100.0 * s.recall(),
        s.caught,
        s.planted,
        s.decoy_hits.len(),
        s.decoys
    )?;
    for (k, t) in &s.per_kind {
        let mark = if t.caught < t.planted {
            "  <-- missed"
        } else {
            ""
        };
        writeln!(out, "  {k:<22} {:>5}/{:<5}{mark}", t.caught, t.planted)?;
    }
    for h in s.decoy_hits.iter().take(20) {
        writeln!(out, "  FP decoy: {h}")?;
    }
    Ok(())
}
