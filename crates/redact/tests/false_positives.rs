//! False positives cut in issue 10's last round, one table per class. Each
//! class has a control: the same value without the mark that makes it
//! harmless is still redacted, so a test can only pass by telling the two
//! apart. Every value is built at run time (see `common`).

mod common;
use common::*;

fn json_line(content: &str) -> String {
    format!(
        "{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01\",\"content\":{}}}]}}}}",
        json_string(content)
    )
}

/// Every text in `clean` comes out unchanged and every text in `dirty` loses
/// its `secret`, bare and as a JSON-escaped `tool_result`.
fn check(clean: &[String], dirty: &[(String, String)]) {
    let s = scanner();
    let mut failures = Vec::new();
    for text in clean {
        for input in [text.clone(), json_line(text)] {
            let r = s.redact(&input).expect("redacts");
            if r.text.contains("[REDACTED:") {
                failures.push(format!("flagged: {input}\n  -> {}", r.text));
            }
        }
    }
    for (text, secret) in dirty {
        for input in [text.clone(), json_line(text)] {
            let r = s.redact(&input).expect("redacts");
            if r.text.contains(secret.as_str()) {
                failures.push(format!("missed: {input}\n  -> {}", r.text));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A token quoted with an ellipsis (`ops_eyJ…...`, `tok_…..[masked]`,
/// `…` U+2026) is the head of a value shown elsewhere, not a credential.
#[test]
fn elided_values_are_not_secrets() {
    let a = format!("ops_{}", rs(1, URLSAFE, 30));
    let b = format!("tok_{}", rs(2, ALNUM, 20));
    let c = rs(3, ALNUM, 24);
    check(
        &[
            format!("export OP_SERVICE_ACCOUNT_TOKEN={a}..."),
            format!("service_token: {b}..[masked]"),
            format!("api_key = \"{c}\u{2026}\""),
            format!("    fn::secret: {a}.."),
        ],
        &[
            (format!("export OP_SERVICE_ACCOUNT_TOKEN={a}"), a.clone()),
            (format!("service_token: {b}"), b.clone()),
            (format!("api_key = \"{c}\""), c.clone()),
            // A sentence's full stop is not an ellipsis.
            (format!("the api key is {c}."), c.clone()),
            // A password may end in dots: still redacted.
            (
                format!("password = \"Zq8{}..\"", rs(4, ALNUM, 10)),
                rs(4, ALNUM, 10),
            ),
        ],
    );
}

/// `ENC[AES256_GCM,data:…,iv:…,tag:…,type:str]`: SOPS ciphertext, under a
/// password or token name, through the assignment and the prose rules.
#[test]
fn sops_ciphertext_is_not_a_secret() {
    let enc = |seed: u64| {
        format!(
            "ENC[AES256_GCM,data:{}==,iv:c/{}=,tag:{}==,type:str]",
            rs(seed, B64, 10),
            rs(seed + 1, B64, 40),
            rs(seed + 2, B64, 22)
        )
    };
    let pw = format!("c/{}", rs(9, ALNUM, 18));
    check(
        &[
            format!("db-password: {}", enc(5)),
            format!("            db_password: {}", enc(6)),
            format!("api_token: {}", enc(7)),
            format!("\"client_secret\": \"{}\"", enc(8)),
        ],
        &[(format!("db-password: {pw}"), pw.clone())],
    );
}

/// `master-keying`, `tokenizer`: names that only begin like a secret's.
#[test]
fn words_that_extend_a_secret_name_are_not_secret_names() {
    let v = format!("{}_base-v2", rs(10, ALNUM, 6));
    let w = format!("arm64-{}=pass", rs(11, ALNUM, 6));
    check(
        &[
            format!("\"tokenizer\": \"{v}\""),
            format!("model-tokenizer: {v}"),
            format!("openssl-master-keying:{w}"),
            format!("SECRETARY = \"{v}\""),
        ],
        &[
            (format!("\"token\": \"{v}\""), v.clone()),
            (format!("openssl-master-key: {w}"), w.clone()),
        ],
    );
}

/// A prefixed token holding a run of ten copies of one letter is typed in
/// to fill a slot (a random token holds one about once in 10^10).
#[test]
fn prefixed_tokens_with_a_long_run_are_placeholders() {
    let real = rs(12, HEX, 40);
    let filled = format!("{}{}{}", &real[..12], "a".repeat(12), &real[24..]);
    check(
        &[
            format!("sgp_{filled}"),
            format!("see sgp_{filled} in the docs"),
        ],
        &[
            (format!("sgp_{real}"), real.clone()),
            // Nine letters in a row is still a token.
            (
                format!("sgp_{}{}{}", &real[..12], "c".repeat(9), &real[21..]),
                real[21..].to_string(),
            ),
            // So is a long run of one digit (numeric groups repeat).
            (
                format!(
                    "xoxa-2-{}-{}-{}",
                    rs(19, "0123456789", 9),
                    "1".repeat(12),
                    &real[..18]
                ),
                real[..18].to_string(),
            ),
        ],
    );
}

/// A value whose tail is masked with `#####` was shown for display, not
/// leaked (`****` and `xxxx` already were).
#[test]
fn values_masked_with_hashes_are_not_secrets() {
    let head = format!(
        "xoxp-{}-{}",
        rs(13, "0123456789", 12),
        rs(14, "0123456789", 12)
    );
    let tail = rs(15, HEX, 32);
    check(
        &[
            format!("\"token4\": \"{head}-{}\"", "#".repeat(20)),
            format!("SERVICE_TOKEN={}#####", rs(16, ALNUM, 12)),
        ],
        &[
            (format!("\"token4\": \"{head}-{tail}\""), tail.clone()),
            // Four is not yet a mask: `Pa##word` style passwords stay secret.
            (format!("password = \"Zq8##{tail}\""), tail.clone()),
        ],
    );
}

/// A JWT signed with a word (`….signature`) is an example written by hand;
/// a real signature, or none at all, keeps it a token.
#[test]
fn jwts_signed_with_a_word_are_examples() {
    let head = "eyJhbGciOiJIUzI1NiJ9";
    let body = format!("eyJ{}", rs(17, URLSAFE, 30));
    let sig = rs(18, URLSAFE, 43);
    check(
        &[
            format!("{head}.{body}.signature"),
            format!("WORKFLOW_TOKEN={head}.{body}.sig"),
        ],
        &[
            (format!("{head}.{body}.{sig}"), sig.clone()),
            (format!("bearer {head}.{body}."), body.clone()),
        ],
    );
}

/// An assignment with nothing after its operator does not take the next
/// line as its value: in a decoded view (a JSON-escaped `tool_result`) the
/// lines are one text, as they are not when read bare.
#[test]
fn an_empty_assignment_does_not_take_the_next_line() {
    let pw = format!("Zq8{}", rs(20, ALNUM, 12));
    let tok = format!("{}9", rs(21, ALNUM, 20));
    check(
        &[
            "warehouse.password=\njdbc.warehouse.url=".to_string(),
            "db_pass =\nreplica.host.name=db2".to_string(),
        ],
        &[
            (
                format!("warehouse.password={pw}\njdbc.warehouse.url="),
                pw.clone(),
            ),
            (
                format!("api_token: {tok}\nservice.endpoint.name=billing2"),
                tok.clone(),
            ),
        ],
    );
}

/// Session 8: Slack placeholders (bot and user tokens shorter than any
/// Slack issues, a repeated type, a word phrase), an anonymous-FTP password,
/// an XML Schema type name under a token's name, a value whose tail says it
/// was cut short, and a name that counts secrets rather than holding one.
/// Controls: real-shaped Slack tokens, a human password ending in `@`, a
/// token-shaped value under the same names.
#[test]
fn placeholders_and_public_values_of_session_8() {
    let clean = vec![
        "xoxb-12345-abcd234".to_string(),
        "xoxb-xoxb-my-bot-token".to_string(),
        "\"token1\": \"xoxp-1234567890\"".to_string(),
        "xoxb-abcdef-abcdef".to_string(),
        "server->user = \"anonymous\";\nserver->password = \"busybox@\";".to_string(),
        "ftp_password = \"anonymous@\"".to_string(),
        "telegram_api_token = \"token:\"clm52649:AgencyIdentificationCodeContentType\"\""
            .to_string(),
        "LANGSMITH_API_KEY=lsv2_pt_short".to_string(),
        "ONESIGNAL_API_KEY=os_v2_app_short".to_string(),
        "  keyVaultToStoreSecrets: cmp2-qat-1208358310".to_string(),
    ];
    let bot = format!(
        "xoxb-{}-{}-{}",
        rs(1, "0123456789", 12),
        rs(2, "0123456789", 13),
        rs(3, ALNUM, 24)
    );
    let human = "Winter2021@".to_string();
    let tok = rs(4, ALNUM, 32);
    let dirty = vec![
        (bot.clone(), bot.clone()),
        (format!("\"token1\": \"{bot}\""), bot),
        (format!("server->password = \"{human}\";"), human),
        (format!("telegram_api_token = \"{tok}\""), tok.clone()),
        (format!("LANGSMITH_API_KEY=lsv2_pt_{tok}"), tok.clone()),
        (format!("  vaultSecret: {tok}"), tok),
    ];
    check(&clean, &dirty);
}

/// `xoxp-1234-1234-1234-<hex>`: a Slack token whose id groups repeat one
/// number is a slot filled for an example (the peers list it as a
/// negative). Controls: the same shape with distinct ids, and a
/// UUID-shaped key of another kind whose groups repeat, both redacted.
#[test]
fn slack_tokens_whose_ids_repeat_one_number_are_placeholders() {
    let hex = rs(5, "0123456789abcdef", 32);
    let clean = vec![
        format!("\"token3\": \"xoxp-1234-1234-1234-{hex}\""),
        format!("xoxb-5555555555-5555555555-{}", rs(6, ALNUM, 24)),
    ];
    let real = format!(
        "xoxp-{}-{}-{}-{hex}",
        rs(7, "0123456789", 10),
        rs(8, "0123456789", 10),
        rs(9, "0123456789", 11)
    );
    let uuidish = format!("12345678-1234-1234-1234-{}", rs(10, "0123456789abcdef", 12));
    let dirty = vec![
        (format!("\"token3\": \"{real}\""), real.clone()),
        (real.clone(), real),
        (format!("api_secret = \"{uuidish}\""), uuidish),
    ];
    check(&clean, &dirty);
}

/// Values their owners publish (Firebase SDKs' test keys, the NuGet.Config
/// reference's example passwords, the public `npm-search` Algolia key) are
/// kept wherever they appear; the control changes one byte of each, which
/// makes it an unknown value of the same shape, and is redacted in the same
/// context.
#[test]
fn published_example_values_are_kept() {
    let google: Vec<&str> = abcd_redact::rules::builtin()
        .iter()
        .filter(|d| d.id == "google-api-key")
        .flat_map(|d| d.allow.iter().copied())
        .collect();
    assert!(google.len() > 10, "the Firebase SDK keys are listed");
    let published = abcd_redact::rules::PUBLISHED_VALUES;
    assert!(published.len() >= 3);
    let context = |v: &str| -> String {
        if v.starts_with("AIza") {
            format!("const firebaseConfig = {{ apiKey: \"{v}\" }};")
        } else if v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
            format!(
                "const algolia = {{appId:\"OFCNCOG2CU\",apiKey:\"{v}\",indexName:\"npm-search\"}}"
            )
        } else {
            format!("<add key=\"ClearTextPassword\" value=\"{v}\" />")
        }
    };
    // One byte changed, from the same alphabet, so the value keeps its
    // shape and its entropy.
    let changed = |v: &str| -> String {
        let mut b = v.as_bytes().to_vec();
        let i = b.len() - 3;
        b[i] = match b[i] {
            b'0'..=b'8' | b'a'..=b'y' | b'A'..=b'Y' => b[i] + 1,
            b'9' => b'0',
            b'z' => b'a',
            b'Z' => b'A',
            _ => b'k',
        };
        String::from_utf8(b).expect("ascii")
    };
    let values: Vec<&str> = google.iter().chain(published).copied().collect();
    let clean: Vec<String> = values.iter().map(|v| context(v)).collect();
    let dirty: Vec<(String, String)> = values
        .iter()
        .map(|v| {
            let c = changed(v);
            (context(&c), c)
        })
        .collect();
    check(&clean, &dirty);
}
