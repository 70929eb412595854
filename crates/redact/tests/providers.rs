//! Providers and assignment syntaxes added for issue 10 (age, Alibaba,
//! Doppler, Dynatrace, Mapbox, Notion, Sourcegraph, Teams, Square, Postman,
//! Supabase, Tailscale, WireGuard, Azure AD, Facebook, NuGet, Harness,
//! Hugging Face orgs, Airtable, Authress, 1Password, Fly.io, Gemini,
//! PostHog, CockroachDB, base64 JWTs, provider-named values; `::=`,
//! `:::=`, `?=`, Go raw strings and typed declarations, PHP `.=`,
//! `setProperty("NAME", "…")`, XML elements). Values are random; each is tried bare and JSON-escaped.

mod common;
use common::*;

const BECH: &str = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";
const LOWER_NUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";

#[test]
fn provider_tokens_are_redacted() {
    let s = scanner();
    let cases: Vec<(String, String)> = vec![
        (
            format!("AGE-SECRET-KEY-1{}", rs(1, BECH, 58)),
            String::new(),
        ),
        (format!("LTAI{}", rs(2, ALNUM, 20)), String::new()),
        (format!("dp.pt.{}", rs(3, LOWER_NUM, 43)), String::new()),
        (
            format!("dt0c01.{}.{}", rs(4, UPPER_NUM, 24), rs(5, UPPER_NUM, 64)),
            String::new(),
        ),
        (
            format!("pk.{}.{}", rs(6, LOWER_NUM, 60), rs(7, LOWER_NUM, 22)),
            String::new(),
        ),
        (
            format!("ntn_{}{}", rs(8, "0123456789", 11), rs(9, ALNUM, 35)),
            String::new(),
        ),
        (
            format!("sgp_{}_{}", rs(10, HEX, 16), rs(11, HEX, 40)),
            String::new(),
        ),
        (format!("sq0atp-{}", rs(12, URLSAFE, 22)), String::new()),
        (
            format!("PMAK-{}-{}", rs(13, HEX, 24), rs(14, HEX, 34)),
            String::new(),
        ),
        (format!("sbp_{}", rs(15, HEX, 40)), String::new()),
        (
            format!("tskey-auth-{}-{}", rs(16, ALNUM, 12), rs(17, ALNUM, 30)),
            String::new(),
        ),
        (
            format!("{}8Q~{}", rs(18, ALNUM, 3), rs(19, ALNUM, 34)),
            String::new(),
        ),
        (format!("EAAC{}", rs(20, ALNUM, 120)), String::new()),
        (
            format!(
                "https://acme.webhook.office.com/webhookb2/{}@{}/IncomingWebhook/{}/{}",
                rs(21, HEX, 32),
                rs(22, HEX, 32),
                rs(23, HEX, 32),
                rs(24, HEX, 32)
            ),
            rs(23, HEX, 32),
        ),
        (
            format!("[Interface]\nPrivateKey = {}{}=", rs(25, B64, 42), "A"),
            format!("{}A=", rs(25, B64, 42)),
        ),
        (
            format!(
                "<add key=\"ClearTextPassword\" value=\"{}\" />",
                rs(26, ALNUM, 14)
            ),
            rs(26, ALNUM, 14),
        ),
        (
            format!(
                "pat.{}.{}.{}",
                rs(40, URLSAFE, 22),
                rs(41, ALNUM, 24),
                rs(42, ALNUM, 20)
            ),
            String::new(),
        ),
        (
            format!("api_org_{}", rs(43, &ALNUM[..52], 34)),
            String::new(),
        ),
        (
            format!("pat{}.{}", rs(44, ALNUM, 14), rs(45, HEX, 64)),
            String::new(),
        ),
        (
            format!(
                "sc_{}.{}.acc_{}.{}",
                rs(46, LOWER_NUM, 12),
                rs(47, LOWER_NUM, 5),
                rs(48, LOWER_NUM, 14),
                rs(49, URLSAFE, 40)
            ),
            String::new(),
        ),
        (
            format!(
                "A3-{}-{}-{}-{}-{}",
                rs(50, UPPER_NUM, 6),
                rs(51, UPPER_NUM, 11),
                rs(52, UPPER_NUM, 5),
                rs(53, UPPER_NUM, 5),
                rs(54, UPPER_NUM, 5)
            ),
            String::new(),
        ),
        (format!("fo1_{}", rs(55, URLSAFE, 43)), String::new()),
        (format!("AQ.Ab8RN6{}", rs(56, URLSAFE, 44)), String::new()),
        (format!("phx_{}", rs(57, ALNUM, 43)), String::new()),
        (
            format!("CCDB1_{}_{}", rs(58, ALNUM, 22), rs(59, ALNUM, 40)),
            String::new(),
        ),
        (format!("ZXlK{}", rs(60, B64, 96)), String::new()),
        (
            format!("asana_client_id = \"{}\"", rs(61, "0123456789", 16)),
            rs(61, "0123456789", 16),
        ),
        (
            format!("DISCORD_CLIENT_ID: {}", rs(62, "0123456789", 18)),
            rs(62, "0123456789", 18),
        ),
        (
            format!("<sonarToken>{}</sonarToken>", rs(63, LOWER_NUM, 40)),
            rs(63, LOWER_NUM, 40),
        ),
        (
            format!("sumo_access_id = \"su{}\"", rs(64, ALNUM, 12)),
            format!("su{}", rs(64, ALNUM, 12)),
        ),
        (
            format!(
                "BUNDLE_GEMS__CONTRIBSYS__COM: {}:{}",
                rs(65, HEX, 8),
                rs(66, HEX, 8)
            ),
            format!("{}:{}", rs(65, HEX, 8), rs(66, HEX, 8)),
        ),
        (
            format!("OLLAMA_KEY={}.{}", rs(67, HEX, 32), rs(68, URLSAFE, 24)),
            format!("{}.{}", rs(67, HEX, 32), rs(68, URLSAFE, 24)),
        ),
        (
            format!("glm_api_key := '{}.{}'", rs(69, HEX, 32), rs(70, ALNUM, 16)),
            format!("{}.{}", rs(69, HEX, 32), rs(70, ALNUM, 16)),
        ),
        // A repetitive body is still a well-formed age key.
        (format!("AGE-SECRET-KEY-1{}", "Q".repeat(58)), String::new()),
        (
            format!(
                "facebook {}|{}",
                rs(71, "0123456789", 16),
                rs(72, URLSAFE, 27)
            ),
            format!("{}|{}", rs(71, "0123456789", 16), rs(72, URLSAFE, 27)),
        ),
        (format!("EAAM{}", rs(73, ALNUM, 120)), String::new()),
        (format!("s-s4t2ud-{}", rs(74, HEX, 64)), String::new()),
        (
            format!("v1.0-{}-{}", rs(75, HEX, 24), rs(76, HEX, 146)),
            String::new(),
        ),
        (format!("EZAK{}", rs(77, ALNUM, 54)), String::new()),
        (format!("sha256~{}", rs(78, URLSAFE, 43)), String::new()),
        (format!("{}-us18", rs(79, HEX, 32)), String::new()),
        (format!("p8e-{}", rs(80, ALNUM, 32)), String::new()),
        (format!("glc_{}", rs(81, B64, 120)), String::new()),
        (format!("rk_prod_{}", rs(82, ALNUM, 60)), String::new()),
        (
            format!(
                "telegram bot: {}:A{}",
                rs(83, "0123456789", 9),
                rs(84, URLSAFE, 34)
            ),
            format!("{}:A{}", rs(83, "0123456789", 9), rs(84, URLSAFE, 34)),
        ),
        (format!("sourcegraph: {}", rs(85, HEX, 40)), rs(85, HEX, 40)),
        (
            format!("<add key=\"Password\" value=\"{}\" />", rs(86, ALNUM, 14)),
            rs(86, ALNUM, 14),
        ),
        (format!("STS.{}", rs(87, ALNUM, 25)), String::new()),
        (format!("$aact_prod_{}", rs(88, URLSAFE, 40)), String::new()),
        (format!("Mid-server-{}", rs(89, URLSAFE, 20)), String::new()),
        (format!("apk_user_{}", rs(90, B64, 80)), String::new()),
        (format!("cog_{}", rs(91, LOWER_NUM, 52)), String::new()),
        (format!("SWMKEY-1-{}", rs(92, B64, 43)), String::new()),
        (format!("figd_{}", rs(93, URLSAFE, 40)), String::new()),
        (
            format!("lsv2_sk_{}_{}", rs(94, HEX, 32), rs(95, HEX, 10)),
            String::new(),
        ),
        (format!("ramp_id_{}", rs(96, ALNUM, 40)), String::new()),
        (format!("endr+{}", rs(97, URLSAFE, 16)), String::new()),
        (format!("aivenv1 {}", rs(98, B64, 120)), String::new()),
        (format!("phc_{}", rs(99, URLSAFE, 43)), String::new()),
        (
            format!("ovh_consumer_key = \"{}\"", rs(100, URLSAFE, 32)),
            rs(100, URLSAFE, 32),
        ),
        (
            format!(
                "CONFIGCAT_SDK_KEY={}/{}",
                rs(101, URLSAFE, 22),
                rs(102, URLSAFE, 22)
            ),
            format!("{}/{}", rs(101, URLSAFE, 22), rs(102, URLSAFE, 22)),
        ),
        (
            format!(
                "const hubspotKey = \"{}-{}-{}-{}-{}\"",
                rs(103, HEX, 8),
                rs(104, HEX, 4),
                rs(105, HEX, 4),
                rs(106, HEX, 4),
                rs(107, HEX, 12)
            ),
            format!(
                "{}-{}-{}-{}-{}",
                rs(103, HEX, 8),
                rs(104, HEX, 4),
                rs(105, HEX, 4),
                rs(106, HEX, 4),
                rs(107, HEX, 12)
            ),
        ),
    ];
    let mut failures = Vec::new();
    for (text, secret) in cases {
        let secret = if secret.is_empty() {
            text.clone()
        } else {
            secret
        };
        for input in [
            format!("value: {text}"),
            format!("{{\"c\":{}}}", json_string(&format!("X={text}\n"))),
        ] {
            let r = s.redact(&input).expect("redacts");
            if r.text.contains(&secret) || r.text.contains(json_string(&secret).trim_matches('"')) {
                failures.push(format!("survived: {}", r.text));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn assignment_operators_of_other_languages() {
    let s = scanner();
    let v = rs(30, ALNUM, 32);
    let mut failures = Vec::new();
    for input in [
        format!("api_token ::= \"{v}\""),
        format!("API_TOKEN :::= \"{v}\""),
        format!("SERVICE_SECRET ?= {v}"),
        format!("client_secret := '{v}'"),
        format!("db_password ?= \"{v}\""),
        // Go: a raw string, a declaration with its type.
        format!("stripeToken := `{v}`"),
        format!("var stripeToken string = \"{v}\""),
        format!("var signingKey []byte = \"{v}\""),
        format!("dbPassword := `{v}`"),
        // PHP's `.=`.
        format!("$mailerSecret .= \"{v}\";"),
        // A name, then its value as the next argument.
        format!("System.setProperty(\"GEO_API_KEY\", \"{v}\");"),
        format!("os.environ.setdefault('DB_PASSWORD', '{v}')"),
        format!("req.headers.set(\"X-Auth-Token\", \"{v}\")"),
        // XML: the value inline and on its own line.
        format!("<apiToken>{v}</apiToken>"),
        format!("<settings>\n  <clientSecret>\n      {v}\n  </clientSecret>\n</settings>"),
        format!("<db>\n<password>\n{v}\n</password>\n</db>"),
    ] {
        for text in [input.clone(), json_line(&input)] {
            let r = s.redact(&text).expect("redacts");
            if r.text.contains(&v) {
                failures.push(r.text);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Azure DevOps personal access tokens in the 84-character format: `AZDO`
/// at offset 76, and a run of `A`s inside by construction (which the
/// placeholder tests reject elsewhere). An 84-character value without the
/// signature, and the signature in prose, are not tokens.
#[test]
fn azure_devops_pats_of_the_84_character_format() {
    let pat = format!(
        "{}JQQJ99BGAC{}AZDO{}",
        rs(50, ALNUM, 52),
        "A".repeat(14),
        rs(51, ALNUM, 4)
    );
    assert_eq!(pat.len(), 84);
    assert_eq!(&pat[76..80], "AZDO");
    let not_a_pat = format!(
        "{}JQQJ99BGAC{}AZDX{}",
        rs(50, ALNUM, 52),
        "A".repeat(14),
        rs(51, ALNUM, 4)
    );
    check_table(
        &[
            (format!("export AZURE_DEVOPS_EXT_PAT={pat}"), pat.clone()),
            (
                format!("git clone https://{pat}@dev.azure.com/org/proj/_git/repo"),
                pat.clone(),
            ),
            (
                format!("echo {pat} | az devops login --org https://dev.azure.com/org"),
                pat.clone(),
            ),
            (
                format!("the new PAT is {pat}, expires in 30 days"),
                pat.clone(),
            ),
        ],
        &[
            format!("checksum {not_a_pat}"),
            "the AZDO signature sits at offset 76 of an 84-character PAT".to_string(),
        ],
    );
}

/// A Terraform variable named like a secret gives up its `default`: on the
/// block's later lines (joined line by line in plain text, one text in a
/// JSON-escaped `tool_result`) or on one line. Variables about a secret
/// (its file, its name, its lifetime), empty or placeholder defaults, a
/// reference, and a `default` outside the block are kept.
#[test]
fn terraform_variable_defaults_named_like_secrets() {
    let tok = rs(40, URLSAFE, 42);
    let pw = format!("Zq8{}!", rs(41, ALNUM, 9));
    let key = rs(42, ALNUM, 32);
    let v = rs(43, ALNUM, 16);
    let block = |name: &str, body: &str| format!("variable \"{name}\" {{\n{body}\n}}");
    check_table(
        &[
            (
                block(
                    "corp_okta_api_token",
                    &format!("  description = \"Okta API token\"\n  type        = string\n  default     = \"{tok}\""),
                ),
                tok.clone(),
            ),
            (
                block(
                    "DB_PASSWORD",
                    &format!("  type      = string\n  sensitive = true\n  default   = \"{pw}\""),
                ),
                pw.clone(),
            ),
            (
                format!("variable \"stripe_secret_key\" {{ default = \"{key}\" }}"),
                key.clone(),
            ),
            (block("GITHUB_TOKEN", &format!("\tdefault\t=\t\"{tok}\"")), tok.clone()),
            (
                block(
                    "slack_bot_token",
                    &format!("  default = \"{key}\" # rotate yearly"),
                ),
                key.clone(),
            ),
        ],
        &[
            block("api_token_file", "  default = \"/run/secrets/api_token\""),
            block("secret_name", "  default = \"prod-db-creds-2024\""),
            block("token_ttl", "  default = \"3600s\""),
            block("db_password", "  default = \"\""),
            block("api_key", "  default = \"changeme\""),
            block("api_token", "  default = var.upstream_token"),
            format!("{}\nlocals {{\n  default = \"{v}9\"\n}}", block("api_token", "  type = string")),
            block("region", &format!("  default = \"{v}9\"")),
        ],
    );
    // A password's block reports as one, read whole or line by line.
    let s = scanner();
    let text = block("db_password", &format!("  default = \"{pw}\""));
    for input in [text.clone(), json_line(&text)] {
        let r = s.redact(&input).expect("redacts");
        assert!(r.text.contains("[REDACTED:password]"), "{}", r.text);
    }
}

/// The syntaxes above where they hold no secret.
#[test]
fn assignment_syntaxes_without_secrets_do_not_fire() {
    let s = scanner();
    assert_no_findings(
        &s,
        [
            "var tokenCount int = 42",
            "tokenizer := `(\\w+)`",
            "System.setProperty(\"TOKEN_TTL\", \"3600\");",
            "$secretLabel .= \"${prefix}\";",
            "<apiToken>\n  ${API_TOKEN}\n</apiToken>",
            "<passwordPolicy>\n  <minLength>12</minLength>\n</passwordPolicy>",
            "map.put(\"token\", token);",
        ],
    );
}

/// Values named as being *about* a secret (its id, name, URL, file) or
/// public by design, documentation runs, and a provider's name inside
/// another word: none is a secret.
#[test]
fn references_and_placeholders_are_not_secrets() {
    let s = scanner();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        rs(80, HEX, 8),
        rs(81, HEX, 4),
        rs(82, HEX, 4),
        rs(83, HEX, 4),
        rs(84, HEX, 12)
    );
    let tok = rs(85, ALNUM, 32);
    assert_no_findings(
        &s,
        [
            format!("credentialsId: '{uuid}'"),
            format!("<UserSecretsId>{uuid}</UserSecretsId>"),
            format!("GEO_SECRET_NAME = \"{tok}\""),
            format!("token_url={tok}"),
            format!("password-file: {tok}"),
            format!("publicToken = \"{tok}\""),
            format!("csrf-token={tok}"),
            "API_SECRET=abcdefghijklmnopqrstuvwxyz123456".to_string(),
            "api_key = \"sk-abc123xyz-456def-klmnopq\"".to_string(),
            "ZUPLO_API_KEY=zpka_00000000000000000000000000000000_00000000".to_string(),
            "discord=000000000000000000".to_string(),
            format!("sumOfExposures = {tok};"),
            "API_KEY=a1b2c3d4-e5f6-7890-abcd-ef1234567890".to_string(),
            format!("nonMatchingToken := \"{tok}\""),
            "curl -i -u 'test:test' https://localhost:9200".to_string(),
            "curl --user neo4j:[PASSWORD] http://[IP]:7474/db/data/".to_string(),
            "slack: xoxe.xoxp-1-SlackAppConfigurationAccessTokenHere".to_string(),
            "-----BEGIN OPENSSH PRIVATE KEY----------END OPENSSH PRIVATE KEY-----".to_string(),
            "- (id)hf_requiredCharacteristicTypesForDisplayMetadata;".to_string(),
            "https://indieweb.org/images/3/35/2018-250-xoxo-indieweb-1.jpg".to_string(),
            "notes = \"Maven - io.jsonwebtoken:jjwt-jackson-0.11.2\"".to_string(),
            "password combination.\n\nR5: Regulatory--21".to_string(),
        ],
    );
    // The same values under a name that holds them are still caught.
    for input in [
        format!("GEO_SECRET = \"{tok}\""),
        format!("client_secret: '{tok}'"),
        format!("SUMO_ACCESS_KEY={}", rs(86, ALNUM, 64)),
    ] {
        assert!(!s.scan(&input).is_empty(), "missed {input}");
    }
}

/// A Kubernetes `Secret`'s `data:` values: base64 of text, line by line in
/// plain text and inside one JSON string; other YAML is left alone.
#[test]
fn kubernetes_secret_data_values() {
    let s = scanner();
    let v1 = b64(&format!("admin:{}", rs(110, ALNUM, 12)));
    let v2 = b64(&format!("postgres://app:{}@db/app", rs(111, ALNUM, 12)));
    let manifest = format!(
        "apiVersion: v1\ndata:\n  username: {v1}\n  url: \"{v2}\"\nkind: Secret\nmetadata:\n  name: db\n"
    );
    for text in [manifest.clone(), json_line(&manifest)] {
        let r = s.redact(&text).expect("redacts");
        assert!(!r.text.contains(&v1) && !r.text.contains(&v2), "{}", r.text);
    }
    assert_no_findings(
        &s,
        [
            "data:\n  mode: production\n  replicas: 3\n",
            "metadata:\n  name: verylongservicename\n",
        ],
    );
}
