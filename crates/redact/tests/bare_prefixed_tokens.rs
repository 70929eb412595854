//! Issue 10, session 18: prefixed credential formats pasted bare — in a
//! prompt, a chat message, a command's output — with no name before them
//! (`here it is: lin_api_…`). The prefix and the body's length and
//! alphabet name the format; each is tried in prose, in an assignment and
//! JSON-escaped, with near-misses (cut short, wrong alphabet, a slot
//! filler) that must come out untouched. Values are built at run time.

mod common;
use common::*;

const LOWER_NUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";

/// (format, token): each token is checked bare, in prose and assigned.
fn tokens() -> Vec<(&'static str, String)> {
    vec![
        ("linear", format!("lin_api_{}", rs(1, ALNUM, 40))),
        ("linear oauth", format!("lin_oauth_{}", rs(2, HEX, 64))),
        (
            "atlassian",
            format!(
                "ATATT3xFfGF0{}={}",
                rs(3, URLSAFE, 170),
                rs(4, "0123456789ABCDEF", 8)
            ),
        ),
        ("perplexity", format!("pplx-{}", rs(5, ALNUM, 48))),
        ("netlify", format!("nfp_{}", rs(6, ALNUM, 36))),
        ("vercel", format!("vcp_{}", rs(7, URLSAFE, 56))),
        ("vercel gateway", format!("vck_{}", rs(8, URLSAFE, 56))),
        (
            "grafana service account",
            format!("glsa_{}_{}", rs(9, ALNUM, 32), rs(10, HEX, 8)),
        ),
        ("shippo", format!("shippo_live_{}", rs(11, HEX, 40))),
        ("mailersend", format!("mlsn.{}", rs(12, HEX, 64))),
        (
            "resend",
            format!("re_{}_{}", rs(13, ALNUM, 8), rs(14, ALNUM, 24)),
        ),
        ("jfrog", format!("AKCp{}", rs(15, ALNUM, 69))),
        ("jfrog reference", format!("cmVmdGtu{}", rs(16, ALNUM, 56))),
        ("tavily", format!("tvly-dev-{}", rs(17, ALNUM, 32))),
        ("jina", format!("jina_{}", rs(18, URLSAFE, 60))),
        ("langfuse", format!("sk-lf-{}", uuid(19))),
        ("e2b", format!("e2b_{}", rs(20, HEX, 40))),
        (
            "pinecone",
            format!("pcsk_{}_{}", rs(21, ALNUM, 5), rs(22, ALNUM, 60)),
        ),
        ("elevenlabs", format!("sk_{}", rs(23, HEX, 48))),
        (
            "astra",
            format!("AstraCS:{}:{}", rs(24, ALNUM, 24), rs(25, HEX, 64)),
        ),
        ("neon", format!("napi_{}", rs(26, LOWER_NUM, 64))),
        ("render", format!("rnd_{}", rs(27, ALNUM, 32))),
        ("ory", format!("ory_pat_{}", rs(28, ALNUM, 32))),
        ("bitbucket data center", format!("BBDC-{}", rs(29, B64, 44))),
        ("hugging face org", format!("api_org_{}", rs(30, ALNUM, 34))),
        ("deno deploy", format!("ddp_{}", rs(31, ALNUM, 36))),
        ("twitch", format!("oauth:{}", rs(32, LOWER_NUM, 30))),
        (
            "octopus",
            format!("API-{}", rs(33, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 26)),
        ),
        (
            "gitlab feature flags",
            format!("glffct-{}", rs(34, URLSAFE, 20)),
        ),
        (
            "firebase cloud messaging",
            format!("AAAA{}:APA91b{}", rs(35, URLSAFE, 7), rs(36, URLSAFE, 134)),
        ),
        ("plaid", format!("access-production-{}", uuid(37))),
        (
            "braintree",
            format!(
                "access_token$production${}${}",
                rs(38, LOWER_NUM, 16),
                rs(39, HEX, 32)
            ),
        ),
        ("flutterwave", format!("FLWSECK_TEST-{}-X", rs(40, HEX, 32))),
        (
            "new relic user key",
            format!(
                "NRAK-{}",
                rs(41, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 27)
            ),
        ),
        (
            "new relic insert key",
            format!("NRII-{}", rs(42, URLSAFE, 32)),
        ),
        ("honeycomb", format!("hcaik_{}", rs(43, LOWER_NUM, 58))),
        ("sonarqube", format!("squ_{}", rs(44, HEX, 40))),
        ("intercom", format!("dG9rOj{}", rs(45, B64, 54))),
        ("together", format!("tgp_v1_{}", rs(46, URLSAFE, 43))),
        ("launchdarkly", format!("sdk-{}", uuid(47))),
        ("yandex", format!("AQVN{}", rs(48, URLSAFE, 36))),
    ]
}

#[test]
fn prefixed_tokens_pasted_bare() {
    let mut dirty = Vec::new();
    for (name, t) in tokens() {
        dirty.push((t.clone(), t.clone()));
        dirty.push((
            format!("here's the {name} token: {t} (expires soon)"),
            t.clone(),
        ));
        dirty.push((format!("const key = \"{t}\";"), t.clone()));
    }
    let clean: Vec<String> = vec![
        // Cut short, or the body in the wrong alphabet.
        format!("lin_api_{}", rs(50, ALNUM, 20)),
        format!("vcp_{}", rs(51, URLSAFE, 44)),
        format!("glsa_{}", rs(52, ALNUM, 32)),
        format!("sk_{}", rs(53, HEX, 40)),
        format!("napi_{}", rs(54, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 64)),
        format!("FLWSECK-{}", rs(55, HEX, 32)),
        // Slot fillers after a real prefix.
        format!("pplx-{}", "x".repeat(48)),
        format!("e2b_{}", "0".repeat(40)),
        // Code and prose that share a prefix.
        "re_compile_pattern_cache_for_unicode_tables".to_string(),
        "napi_create_function(env, NULL, 0, cb, NULL, &fn);".to_string(),
        "rnd_state = rnd_init(seed)".to_string(),
        "let disk_usage = task_sk_total(disk_sk_bytes);".to_string(),
        "oauth: enabled".to_string(),
        "the api-gateway-for-the-billing-service".to_string(),
        "access-production-database-replica".to_string(),
    ];
    check_table(&dirty, &clean);
}
