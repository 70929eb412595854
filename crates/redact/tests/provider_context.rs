//! Issue 10, kingfisher's examples: a value next to a provider's name is
//! that provider's credential even when it looks sequential (`abcdef…`,
//! `a1b2c3…`), and a provider's prefixed token format is one whatever its
//! body. Each table is tried bare and JSON-escaped; each has controls that
//! must come out untouched (a generic name, a slot filler, a name that says
//! the value is public or made up). Values are built at run time.

mod common;
use common::*;

/// Keyboard-run values a generic name does not make secrets (`abcdefg`,
/// `a1b2c3` runs), built from pieces.
fn runs() -> Vec<String> {
    let letters = "abcdefghijklmnopqrstuvwxyz";
    vec![
        format!("{}{}{}", &letters[..10], "1234567890", &letters[10..20]),
        (0..16)
            .map(|i| format!("{}{}", (b'a' + i as u8) as char, i % 10))
            .collect(),
        format!("{}{}", letters.to_uppercase(), "012345"),
    ]
}

#[test]
fn provider_named_values_are_secrets_even_when_sequential() {
    let mut dirty = Vec::new();
    for v in runs().into_iter().chain([rs(1, ALNUM, 32)]) {
        let spellings = [
            format!("zentrafy_token: {v}"),
            format!("zentrafy SECRET {v}"),
            format!("zentrafyKEY {v}"),
            format!("zentrafy-access-token-{v}"),
            format!("ZENTRAFY_API_KEY=\"{v}\""),
            format!("quorvexPrivateAccess={v}"),
            format!("quorvex secret TOKEN {v}"),
            format!("quorvexSECRET-{v}"),
            format!("const quorvexToken = '{v}';"),
        ];
        for t in spellings {
            dirty.push((t, v.clone()));
        }
        let letters: String = v.chars().filter(char::is_ascii_alphabetic).collect();
        let lower = letters.to_ascii_lowercase();
        if lower.len() >= 20 {
            dirty.push((format!("zentrafy SECRET KEY {lower}"), lower.clone()));
        }
    }
    let r = &runs()[0];
    let clean = vec![
        // Generic names: the placeholder filter still applies.
        format!("api_key = {r}"),
        format!("my_token: {r}"),
        format!("publicToken = \"{r}\""),
        format!("nonMatchingToken := \"{r}\""),
        // Slot fillers next to a provider's name.
        format!("zentrafy_token = {}", "x".repeat(32)),
        "zentrafy_secret = \"placeholder-secret-value\"".to_string(),
        format!("zentrafy_key = {}", "0".repeat(32)),
        format!("zentrafy_key = example{}", rs(2, ALNUM, 20)),
        // A known format's prefix is left to that format's rule (a short
        // `sk-` key is not one), and a sandbox key is a test key.
        format!("zentrafy_key = zz_sandbox_{}", rs(3, ALNUM, 24)),
        format!("zentrafy_key = sk-{}", rs(6, ALNUM, 22)),
        // A name and a version; a JWT with a word for a signature.
        "\"bucket_key\": \"SalesResults-1.2\"".to_string(),
        format!(
            "ZENTRAFY_API_TOKEN=eyJ{}.eyJ{}.signature",
            rs(4, ALNUM, 20),
            rs(5, ALNUM, 20)
        ),
        // A lowercase phrase is not a value.
        "zentrafy_secret = \"invalid-secret-format\"".to_string(),
        // Letters only: a word or an identifier unless long and of one case.
        "zentrafy_token = getAccessTokenFromStore".to_string(),
        "zentrafy_token = abcdefghijklmnopqrs".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn provider_names_label_a_bare_value() {
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        rs(10, HEX, 8),
        rs(11, HEX, 4),
        rs(12, HEX, 4),
        rs(13, HEX, 4),
        rs(14, HEX, 12)
    );
    let hex = format!("{}{}", "1234567890abcdef", rs(15, HEX, 24));
    let dirty = vec![
        (format!("chartmogul {hex}"), hex.clone()),
        (format!("wandb {hex}"), hex.clone()),
        (format!("findl={uuid}"), uuid.clone()),
        (format!("fastforex-{}", runs()[0]), runs()[0].clone()),
        (format!("Cloudsmith: '{hex}'"), hex.clone()),
    ];
    let clean = vec![
        // The name alone before a word, a slot filler, or a short value.
        "chartmogul dashboard settings page".to_string(),
        format!("wandb {}", "x".repeat(40)),
        "findl=12345".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn provider_prefixed_tokens_are_redacted() {
    let lower_num = "abcdefghijklmnopqrstuvwxyz0123456789";
    let uuid = |s: u64| {
        format!(
            "{}-{}-{}-{}-{}",
            rs(s, HEX, 8),
            rs(s + 1, HEX, 4),
            rs(s + 2, HEX, 4),
            rs(s + 3, HEX, 4),
            rs(s + 4, HEX, 12)
        )
    };
    let tokens = vec![
        format!("aio_{}", rs(20, ALNUM, 28)),
        format!("bkua_{}", rs(21, ALNUM, 40)),
        format!("odt_{}", rs(22, ALNUM, 32)),
        format!("gsk_{}", rs(23, ALNUM, 52)),
        format!("ion_{}", rs(24, ALNUM, 42)),
        format!("CCIPAT_{}_{}", rs(25, ALNUM, 22), rs(26, ALNUM, 40)),
        format!("CFPAT-{}", rs(27, URLSAFE, 43)),
        format!("shltm_{}", rs(28, URLSAFE, 40)),
        format!("fio-u-{}", rs(29, URLSAFE, 64)),
        format!("pat-na1-{}", uuid(30)),
        format!("pscale_tkn_{}", rs(35, ALNUM, 43)),
        format!("pnu_{}", rs(36, ALNUM, 36)),
        format!("rdme_{}", rs(37, lower_num, 70)),
        format!("r8_{}", rs(38, ALNUM, 37)),
        format!("tfp_{}", rs(39, ALNUM, 44)),
        format!("xai-{}", rs(40, ALNUM, 80)),
        format!("sq0idp-{}", rs(41, URLSAFE, 22)),
        format!("nvapi-{}", rs(42, URLSAFE, 64)),
        format!("pul-{}", rs(43, HEX, 40)),
        format!("sgp_{}", rs(44, ALNUM, 64)),
        format!("slk_{}", rs(45, HEX, 64)),
        format!("xkeysib-{}-{}", rs(46, HEX, 64), rs(47, ALNUM, 16)),
        format!("VF.DM.{}.{}", rs(48, ALNUM, 24), rs(49, ALNUM, 16)),
        format!("BBFF-{}", rs(50, ALNUM, 30)),
        format!("mdb_sa_sk_{}", rs(51, URLSAFE, 40)),
        format!("tkn.v1_{}=", rs(52, ALNUM, 72)),
        format!("rubygems_{}", rs(53, HEX, 48)),
        format!("ak_live_{}", rs(54, ALNUM, 30)),
        format!("sub-c-{}", uuid(55)),
        format!("oy2{}", rs(60, lower_num, 43)),
        format!("1000.{}.{}", rs(61, HEX, 32), rs(62, HEX, 32)),
        format!("{}.atlasv1.{}", rs(63, ALNUM, 14), rs(64, URLSAFE, 64)),
        format!("{}_{}_mmk", rs(65, ALNUM, 6), rs(66, ALNUM, 29)),
        format!("NF-{}", rs(67, ALNUM, 32)),
        format!("SSWS 00{}", rs(68, URLSAFE, 40)),
        format!("na1.{}", rs(69, B64, 100)),
        // A sequential body is still the provider's format.
        format!("tfp_{}{}", "abcdefghijklmnopqrstuvwxyz", rs(70, ALNUM, 20)),
        format!("bkua_{}{}", "a1b2c3d4e5", rs(71, HEX, 30)),
    ];
    let mut dirty = Vec::new();
    for t in &tokens {
        // Alone, assigned, and quoted inside code.
        dirty.push((t.clone(), t.clone()));
        dirty.push((format!("TOKEN_VALUE={t}"), t.clone()));
        dirty.push((format!("client.auth(\"{t}\")"), t.clone()));
    }
    let clean = vec![
        format!("pnu_{}", "X".repeat(36)),
        format!("rdme_{}", "x".repeat(70)),
        format!("tfp_example{}", rs(72, ALNUM, 40)),
        // Glued to a longer word: not the token.
        format!("xbkua_{}", rs(73, ALNUM, 40)),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn psexec_passwords_are_redacted() {
    let pw = format!("Kx{}!", rs(80, ALNUM, 8));
    let dirty = vec![
        (
            format!("psexec \\\\10.0.0.5 -u Administrator -p {pw} cmd /c dir"),
            pw.clone(),
        ),
        (
            format!("PsExec.exe \\\\build01 -u CORP\\svc -p \"{pw}\" -i -d calc.exe"),
            pw.clone(),
        ),
        (
            format!("system(\"psexec \\\\\\\\192.0.2.7 -u admin -p {pw} shutdown -r\");"),
            pw.clone(),
        ),
    ];
    let clean = vec![
        "psexec \\\\host -u User -p $Password -i calc.exe".to_string(),
        "PsExec.exe \\\\host -u DOM\\me -p %PW% -c tool.bat".to_string(),
    ];
    check_table(&dirty, &clean);
}
