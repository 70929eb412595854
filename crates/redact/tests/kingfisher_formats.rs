//! Issue 10, session 8: credential formats from kingfisher's examples that
//! had no rule (hashes, webhook URLs, prefixed tokens, a provider's own
//! prefix under its name, names with words or a line between them and the
//! value). Each class is a table of several spellings, tried bare and
//! JSON-escaped, with controls that must come out untouched. Values are
//! built at run time (see `common`).

mod common;
use common::*;

/// `[./A-Za-z0-9]`, the crypt alphabet.
const CRYPT: &str = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

#[test]
fn password_hashes_and_kerberos_roasts() {
    let cisco = format!("$8${}${}", rs(1, CRYPT, 14), rs(2, CRYPT, 43));
    let asrep = format!(
        "$krb5asrep$23$user@corp.local:{}${}",
        rs(3, HEX, 32),
        rs(4, HEX, 200)
    );
    let asrep_bare = format!("$krb5asrep$23${}${}", rs(5, HEX, 32), rs(6, HEX, 180));
    let tgs = format!("$krb5tgs$23${}${}", rs(7, HEX, 32), rs(8, HEX, 120));
    let dirty = vec![
        (format!("enable secret 8 {cisco}"), cisco.clone()),
        (cisco.clone(), cisco),
        (format!("hash: {asrep}"), asrep.clone()),
        (asrep_bare.clone(), asrep_bare),
        (format!("{tgs}  # roasted"), tgs),
    ];
    let clean = vec![
        "the price is $8$ per seat".to_string(),
        "$krb5asrep$ is hashcat mode 18200".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn webhook_and_notification_urls() {
    let tines = format!("{}/{}", rs(11, HEX, 32), rs(12, HEX, 32));
    let zap = rs(13, ALNUM, 16);
    let tb = rs(14, ALNUM, 20);
    let tg = format!("{}:{}", rs(15, "0123456789", 10), rs(16, URLSAFE, 35));
    let dirty = vec![
        (
            format!("https://acme.tines.com/webhook/{tines}"),
            tines.clone(),
        ),
        (
            format!("curl -X POST https://x-y.tines.com/webhook/{tines} -d @a.json"),
            tines,
        ),
        (
            format!("https://hooks.zapier.com/hooks/catch/{zap}"),
            zap.clone(),
        ),
        (
            format!("url: https://hooks.zapier.com/hooks/catch/123456/{zap}/"),
            zap,
        ),
        (
            format!("http://thingsboard.cloud/api/v1/{tb}/telemetry"),
            tb.clone(),
        ),
        (
            format!("coap://coap.thingsboard.cloud/api/v1/{tb}/attributes"),
            tb,
        ),
        (format!("APPRISE_URL=tgram://{tg}"), tg.clone()),
        (format!("notify: tgram://{tg}/-100123"), tg),
    ];
    let clean = vec![
        "see https://www.tines.com/docs/webhooks for the format".to_string(),
        "https://thingsboard.cloud/api/v1/ is the device API root".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn prefixed_formats_with_no_rule_before() {
    let digits = "0123456789";
    let dropbox = format!("sl.{}", rs(21, URLSAFE, 140));
    let clickup = format!("pk_{}_{}", rs(22, digits, 8), rs(23, UPPER_NUM, 32));
    let fleet = format!("flb_live_{}", rs(24, ALNUM, 20));
    let runner = format!("GR1348941{}", rs(25, URLSAFE, 20));
    let grafana = format!("eyJrIjoi{}", rs(26, B64, 60));
    let sgp = format!("sgp_{}_local_{}", rs(27, HEX, 16), rs(28, HEX, 40));
    let sfdc = format!("00D{}!{}", rs(29, ALNUM, 12), rs(30, ALNUM, 96));
    let tt = format!(
        "sk_{}_{}_{}",
        rs(31, digits, 4),
        rs(32, digits, 6),
        rs(33, HEX, 32)
    );
    let dotted = format!(
        "eyA{}.{}.{}",
        rs(34, URLSAFE, 30),
        rs(35, URLSAFE, 60),
        rs(36, URLSAFE, 40)
    );
    let crates = format!("cio{}", rs(37, ALNUM, 32));
    let dfuse = format!("web_{}", rs(38, HEX, 32));
    let gclient = format!(
        "{}-{}.apps.googleusercontent.com",
        rs(39, digits, 12),
        rs(40, "abcdefghijklmnopqrstuvwxyz0123456789", 32)
    );
    let meta = format!("EAAC{}", rs(41, ALNUM, 60));
    let ant = format!("sk-ant-api668-{}", rs(42, URLSAFE, 90));
    let dirty = vec![
        (format!("DROPBOX_TOKEN={dropbox}"), dropbox.clone()),
        (format!("Authorization: Bearer {dropbox}"), dropbox),
        (clickup.clone(), clickup),
        (format!("FLEETBASE_KEY={fleet}"), fleet),
        (format!("--registration-token \"{runner}\""), runner),
        (format!("GrafanaClient(\"{grafana}=\", host=h)"), grafana),
        (sgp.clone(), sgp),
        (format!("Access Token      {sfdc}"), sfdc),
        (format!("tickettailor key {tt}"), tt),
        (dotted.clone(), dotted),
        (format!("Bearer: {crates}"), crates),
        (format!("key = {dfuse}"), dfuse),
        (format!("'clientID' : '{gclient}',"), gclient),
        (format!("fb_access_token: \"{meta}\""), meta),
        (ant.clone(), ant),
    ];
    let clean = vec![
        // Slot fillers and made-up numbers after a known prefix.
        format!("GR1348941{}", "1".repeat(20)),
        format!(
            "SALESFORCE_ACCESS_TOKEN=00D{}!{}",
            rs(43, ALNUM, 12),
            "x".repeat(90)
        ),
        "the file sl.txt and eyA.b.c are not tokens".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn a_providers_own_prefix_under_its_name() {
    let seq = "abcdefghijklmnopqrstuvwxyz1234567890";
    let dirty = vec![
        (
            format!("beamer = b_{}", rs(51, ALNUM, 44)),
            "b_".to_string() + &rs(51, ALNUM, 44),
        ),
        (
            format!("notion = secret_{}", rs(52, ALNUM, 43)),
            rs(52, ALNUM, 43),
        ),
        (format!("storecove_token=storecove_{seq}"), seq.to_string()),
        (
            format!("closecrm_api_key = api_{seq}ABCDEFG"),
            seq.to_string(),
        ),
        (format!("kickbox_key=test_{seq}ABCDEFG"), seq.to_string()),
        (format!("column_token = live_{seq}"), seq.to_string()),
        (
            format!("courier_key=pk_prod_{}", rs(53, UPPER_NUM, 28)),
            rs(53, UPPER_NUM, 28),
        ),
        (
            format!("GOCARDLESS_KEY = \"live_{}\"", rs(54, ALNUM, 40)),
            rs(54, ALNUM, 40),
        ),
        (
            format!("CC_TEST_REPORTER_ID: {}", rs(55, HEX, 64)),
            rs(55, HEX, 64),
        ),
        (
            format!(
                "ado_pat = \"{}\"",
                rs(56, "abcdefghijklmnopqrstuvwxyz234567", 52)
            ),
            rs(56, "abcdefghijklmnopqrstuvwxyz234567", 52),
        ),
        (
            format!(
                "X-Auth-User-Service-Key = v1.0-{}-{}",
                rs(57, HEX, 24),
                rs(58, HEX, 146)
            ),
            rs(58, HEX, 146),
        ),
    ];
    let clean = vec![
        // Slot fillers, and the prefix without the provider's name.
        format!("kickbox_key=test_{}", "x".repeat(40)),
        format!("notion = secret_{}", "example".repeat(7)),
        format!("value = b_{}", rs(59, ALNUM, 44)),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn names_with_words_spaces_or_a_line_before_the_value() {
    let v = rs(61, ALNUM, 32);
    let dirty = vec![
        // Spaces between the name and its secret words.
        (format!("blitapp   PRIVATE    KEY  :  {v}"), v.clone()),
        (format!("zentrafy  secret  token = {v}"), v.clone()),
        // Words between a distinctive provider's name and the value.
        (format!("paydirtapp ACCESS code {v}"), v.clone()),
        (format!("parseur x {v}"), v.clone()),
        (format!("the-odds-api:{v}"), v.clone()),
        (format!("netcore_api={v}"), v.clone()),
        // Letters only, in random case.
        (
            "databox SECRET=ABCdefGHIjklMNOpqrSTUv".to_string(),
            "ABCdefGHIjklMNOpqrSTUv".to_string(),
        ),
        // Datadog's names glued with dashes.
        (format!("dd-apikey-{}", rs(62, HEX, 32)), rs(62, HEX, 32)),
        (
            format!("dd_secret_key-{}", rs(63, HEX, 40)),
            rs(63, HEX, 40),
        ),
    ];
    let clean = vec![
        // A camel-case identifier and a word are not values.
        "zentrafy  secret  token = getAccessTokenFromStore".to_string(),
        "paydirtapp ACCESS code is documented".to_string(),
    ];
    check_table(&dirty, &clean);
}

#[test]
fn a_value_on_the_line_after_its_label() {
    let s = scanner();
    let v = rs(71, UPPER_NUM, 20);
    for text in [
        format!("eventbrite private access key\n{v}\n"),
        format!("API token:\n  {v}\n"),
        format!("my secret key\n{v}"),
    ] {
        let r = s.redact(&text).expect("redacts");
        assert!(!r.text.contains(&v), "missed: {text:?} -> {:?}", r.text);
    }
    // A label followed by prose, or by a word, keeps both.
    for text in [
        "API token:\nset it in the dashboard\n".to_string(),
        "the secret key\nrotation\n".to_string(),
    ] {
        let r = s.redact(&text).expect("redacts");
        assert!(
            !r.text.contains("[REDACTED:"),
            "flagged: {text:?} -> {:?}",
            r.text
        );
    }
}

#[test]
fn commands_and_calls_that_carry_a_secret() {
    let pw = rs(81, ALNUM, 40);
    let key = format!("8-{}", rs(82, ALNUM, 64));
    let dirty = vec![
        (
            format!("curl -X POST https://api.example.net/token \\\n-u oa2-client-id_{}:{pw}", rs(83, ALNUM, 20)),
            pw.clone(),
        ),
        (
            format!("$s = ConvertTo-SecureString \"{pw}\" -AsPlainText -Force"),
            pw.clone(),
        ),
        (
            format!("ConvertTo-SecureString -String '{pw}' -AsPlainText -Force"),
            pw.clone(),
        ),
        (
            format!("{{\"msg\":\"method\", \"method\":\"auth.login_with_api_key\", \"params\" : [ \"{key}\" ]}}"),
            key,
        ),
    ];
    let clean = vec![
        "-u origin main".to_string(),
        "ConvertTo-SecureString $plain -AsPlainText -Force".to_string(),
    ];
    check_table(&dirty, &clean);
    // A continued command's flag line on its own (plain text only: in a
    // JSON string the flag is not at a line's start).
    let s = scanner();
    let line = format!("  --user svc:{pw} \\");
    let r = s.redact(&line).expect("redacts");
    assert!(!r.text.contains(&pw), "missed: {line} -> {}", r.text);
}

#[test]
fn a_known_formats_prefix_is_left_to_that_format() {
    // Deferred: a known token head (`sk-`, `persona_`) of the wrong length.
    let clean = vec![
        format!("deepseek_key = sk-{}", rs(91, HEX, 22)),
        "elastic_token = ess_abc123def456ghi789jkl012mno345pqr678stu901vwx234yz1234567890"
            .to_string(),
    ];
    // Any other head is the provider's own value.
    let a = format!("pk_{}", rs(93, ALNUM, 44));
    let b = format!("abcd-{}", rs(94, HEX, 40));
    let dirty = vec![
        (format!("checio SECRET    {a}"), a),
        (format!("newrelic_key = {b}"), b),
    ];
    check_table(&dirty, &clean);
}
