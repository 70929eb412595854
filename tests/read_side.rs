//! The read side through the real binary: a session captured by hooks
//! (main thread, a sub-agent placed by its stored spawn id, one placed by a
//! tool result naming it, and a depth-2 agent), then reconstructed.

mod common;

use std::fs;

use common::*;
use serde_json::{json, Value};

const SID: &str = "55550000-0000-4000-8000-000000000001";

fn showcase() -> String {
    fixtures()
        .join("claude-code-log/test/test_data/minimal_showcase")
        .display()
        .to_string()
}

/// Captures the showcase session through the hooks and a drain. Tokens,
/// hand-computed: main 5 responses × (120 + 40) = 800; showcol1 1 × 160
/// plus one spawn response repeated on two lines (10 + 5) = 175; showcol2
/// one response streamed as two lines, largest 50 + 30 = 80; deep01 one
/// usage without a message id, 7 + 3 = 10. Total 1065.
fn captured() -> Env {
    let env = Env::new();
    let src = showcase();
    let main_body = fs::read_to_string(format!("{src}/{SID}.jsonl")).unwrap();
    let main = env.main_transcript(SID, &main_body);
    let sub = format!("{src}/{SID}/subagents");
    let mut s1 = fs::read_to_string(format!("{sub}/agent-showcol1.jsonl")).unwrap();
    for (text_line, _) in [(0, ()), (1, ())] {
        let l = json!({"type":"assistant","timestamp":"2026-06-15T10:00:14.000Z","agentId":"showcol1","isSidechain":true,
            "message":{"id":"msg_deep_spawn","role":"assistant","model":"claude-haiku-4-5-20251001",
            "content":[if text_line == 0 {json!({"type":"text","text":"delegating deeper"})} else {json!({"type":"tool_use","id":"toolu_deep","name":"Agent","input":{"subagent_type":"Explore","prompt":"go deep"}})}],
            "usage":{"input_tokens":10,"output_tokens":5}}});
        s1.push_str(&format!("{l}\n"));
    }
    s1.push_str(&format!("{}\n", json!({"type":"user","timestamp":"2026-06-15T10:00:16.000Z","agentId":"showcol1","isSidechain":true,"toolUseResult":{"agentId":"deep01","usage":{"input_tokens":999}},"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_deep","content":"deep done"}]}})));
    let meta1 = fs::read_to_string(format!("{sub}/agent-showcol1.meta.json")).unwrap();
    let p1 = env.agent_transcript(SID, "showcol1", &s1, Some(&meta1));
    let s2 = [
        json!({"type":"user","timestamp":"2026-06-15T10:00:08.500Z","agentId":"showcol2","isSidechain":true,"message":{"role":"user","content":"Survey the jobs module"}}),
        json!({"type":"assistant","timestamp":"2026-06-15T10:00:09.000Z","agentId":"showcol2","isSidechain":true,"message":{"id":"msg_s2","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":"jobs "}],"usage":{"input_tokens":50,"output_tokens":10}}}),
        json!({"type":"assistant","timestamp":"2026-06-15T10:00:09.500Z","agentId":"showcol2","isSidechain":true,"message":{"id":"msg_s2","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":"module surveyed"}],"usage":{"input_tokens":50,"output_tokens":30}}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let p2 = env.agent_transcript(SID, "showcol2", &s2, None);
    let s3 = format!(
        "{}\n{}\n",
        json!({"type":"user","timestamp":"2026-06-15T10:00:14.500Z","agentId":"deep01","isSidechain":true,"message":{"role":"user","content":"go deep"}}),
        json!({"type":"assistant","timestamp":"2026-06-15T10:00:15.000Z","agentId":"deep01","isSidechain":true,"message":{"role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":"deep answer <script>alert(1)</script>"}],"usage":{"input_tokens":7,"output_tokens":3}}})
    );
    let p3 = env.agent_transcript(
        SID,
        "deep01",
        &s3,
        Some(r#"{"agentType":"Explore","spawnDepth":2,"toolUseId":"toolu_deep"}"#),
    );
    let ok = |o: std::process::Output| assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    ok(env.hook("session-start", &env.start_payload(SID)));
    for (a, p) in [("showcol1", &p1), ("showcol2", &p2), ("deep01", &p3)] {
        let mut pl = env.subagent_payload(SID, a, p);
        pl["agent_type"] = json!(if a == "deep01" {
            "Explore"
        } else {
            "general-purpose"
        });
        ok(env.hook("subagent-stop", &pl));
    }
    ok(env.hook("stop", &env.end_payload(SID, &main)));
    ok(env.hook("session-end", &env.end_payload(SID, &main)));
    env.drain();
    assert_eq!(env.records().len(), 4, "{:?}", env.records());
    env
}

fn telemetry(dir: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(dir.join(format!("{SID}.telemetry.json"))).unwrap()).unwrap()
}

#[test]
fn reconstruct_places_every_sub_agent_and_counts_tokens_once() {
    let env = captured();
    let out1 = env.tmp.path().join("out1");
    let out2 = env.tmp.path().join("out2");
    fs::create_dir_all(&out1).unwrap();
    fs::create_dir_all(&out2).unwrap();
    for d in [&out1, &out2] {
        let o = env.abcd(&["history", "reconstruct", SID, "--out", d.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let md = fs::read_to_string(out1.join(format!("{SID}.md"))).unwrap();
    // Deterministic: byte-identical across runs.
    assert_eq!(
        md,
        fs::read_to_string(out2.join(format!("{SID}.md"))).unwrap()
    );
    assert_eq!(
        fs::read(out1.join(format!("{SID}.telemetry.json"))).unwrap(),
        fs::read(out2.join(format!("{SID}.telemetry.json"))).unwrap()
    );
    let t = telemetry(&out1);
    assert_eq!(t["tokens"]["tokens"]["total"], 1065, "{}", t["tokens"]);
    assert_eq!(t["tokens"]["api_responses"], 9);
    assert_eq!(t["tokens"]["usage_without_message_id"], 1);
    assert_eq!(t["tokens"]["by_agent_type"]["main"]["total"], 800);
    assert_eq!(
        t["tokens"]["by_agent_type"]["general-purpose"]["total"],
        175 + 80
    );
    assert_eq!(t["tokens"]["by_agent_type"]["Explore"]["total"], 10);
    assert_eq!(t["tokens"]["subagent_tokens"]["total"], 265);
    assert!(t["tokens"]["naive_tokens"]["total"].as_u64().unwrap() > 1065);
    let agents = t["agents"].as_array().unwrap();
    let agent = |id: &str| {
        agents
            .iter()
            .find(|a| a["agent_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {agents:?}"))
            .clone()
    };
    assert_eq!(agents[0]["is_main_thread"], true);
    let a1 = agent("showcol1");
    assert_eq!(a1["placed_by"], "record");
    assert_eq!(a1["spawned_in"], "main");
    assert_eq!(a1["spawned_at_turn"], 8, "{a1}");
    assert_eq!(a1["joined_at_turn"], 9);
    let a2 = agent("showcol2");
    assert_eq!(a2["placed_by"], "transcript");
    assert_eq!(a2["spawned_at_turn"], 8);
    assert_eq!(a2["joined_at_turn"], 10);
    let a3 = agent("deep01");
    assert_eq!(a3["spawned_in"], "showcol1");
    assert_eq!(a3["placed_by"], "record");
    assert_eq!(a3["spawn_depth"], 2);
    assert_eq!(a3["spawned_at_turn"], 3);
    assert_eq!(t["completeness"]["agents_without_spawn_point"], 0);
    // The artefact: markers in the host, each agent's own section.
    let main_sec = &md[md.find("## Main thread").unwrap()..md.find("## Agent `").unwrap()];
    assert!(main_sec.contains("[SPAWNED `showcol1`"), "{main_sec}");
    assert!(main_sec.contains("[SPAWNED `showcol2`"));
    assert!(main_sec.contains("[JOINED `showcol1`"));
    let s1 = &md[md.find("## Agent `showcol1`").unwrap()..];
    assert!(s1.contains("[SPAWNED `deep01`"));
    assert!(md.contains("## Agent `deep01`"));
    assert!(md.contains(
        "| agent | type | depth | parent | spawned | started | ended | joined | turns | tokens |"
    ));
    assert!(!md.contains("Unattributed sub-agents"));
}

#[test]
fn reconstruct_to_stdout_spine_and_caps() {
    let env = captured();
    let o = env.abcd(&[
        "history",
        "reconstruct",
        SID,
        "--mode",
        "spine",
        "--max-block-bytes",
        "64",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains(&format!("<!-- telemetry: {SID}.telemetry.json -->")));
    assert!(s.contains("more bytes elided"));
    let json_start = s.rfind("```json\n").unwrap() + 8;
    let json_end = s.rfind("\n```").unwrap();
    let t: Value = serde_json::from_str(&s[json_start..json_end]).unwrap();
    assert_eq!(t["mode"], "spine");
    assert!(t["completeness"]["elided_blocks"].as_u64().unwrap() >= 1);
    assert!(
        t["completeness"]["omitted_turns"].as_u64().unwrap() >= 1,
        "{}",
        t["completeness"]
    );
    // Unknown session: a clear error, non-zero.
    let o = env.abcd(&["history", "reconstruct", "no-such-session"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("no record of session"),
        "{}",
        stderr(&o)
    );
    // --out must be an existing directory.
    let o = env.abcd(&["history", "reconstruct", SID, "--out", "/nonexistent/dir"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("existing directory"));
}

const HOSTILE: &str = "hostile-0001";

/// Captures `body` directly as the main thread of `session`.
fn capture_main(env: &Env, session: &str, body: &str) {
    let p = env.tmp.path().join(format!("{session}.jsonl"));
    fs::write(&p, body).unwrap();
    let o = env.abcd(&[
        "history",
        "capture",
        p.to_str().unwrap(),
        "--session",
        session,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A main thread full of markup and controls, captured directly.
fn hostile(env: &Env) {
    let lines = [
        json!({"type":"user","timestamp":"2026-07-01T09:00:00Z","message":{"role":"user","content":"<script>document.title='pwned'</script></textarea><img src=x onerror=\"document.body.dataset.pwned=1\"> \u{202E}txt.exe"}}),
        json!({"type":"assistant","timestamp":"2026-07-01T09:00:01Z","message":{"id":"msg_h1","role":"assistant","model":"m<b>x</b>","content":[{"type":"text","text":"<a href=\"javascript:alert(1)\">click</a> [REDACTED:demo-key]"},{"type":"tool_use","id":"t\"><script>","name":"Bash<script>","input":{"command":"echo </pre><script>x()</script>"}}],"usage":{"input_tokens":1,"output_tokens":1}}}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    capture_main(env, HOSTILE, &body);
}

/// `history export --all --format html` into `site/`, which it returns.
fn export_site(env: &Env) -> std::path::PathBuf {
    let site = env.tmp.path().join("site");
    let o = env.abcd(&[
        "history",
        "export",
        "--all",
        "--format",
        "html",
        "--out",
        site.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    site
}

fn assert_inert(html: &str) {
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "a script element");
    assert!(!lower.contains("<img"), "an img element");
    assert!(
        !lower.contains("<a href=\"javascript"),
        "a javascript: link"
    );
    assert!(!lower.contains("</textarea"));
    assert!(!html.contains('\u{202E}'), "a raw bidi override");
    assert!(html.contains("&lt;script&gt;"));
    assert!(html.contains("⟦U+202E⟧"));
    assert!(html.contains("<mark class=\"redacted\""));
    assert!(!lower.contains("src=\""), "no resource is referenced");
    assert!(!lower.contains("http://") && !lower.contains("https://"));
}

#[test]
fn export_formats_and_escaping() {
    let env = captured();
    hostile(&env);
    let o = env.abcd(&["history", "export", HOSTILE, "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.contains("default-src 'none'"));
    assert_inert(&page);
    // JSON: the text survives verbatim (JSON-escaped), threads and placement.
    let j = env.json(&["history", "export", SID, "--format", "json"]);
    assert_eq!(j["threads"].as_array().unwrap().len(), 4);
    assert_eq!(j["tokens"]["tokens"]["total"], 1065);
    // Markdown is the reconstruct renderer, uncapped.
    let o = env.abcd(&["history", "export", SID, "--format", "md"]);
    assert!(stdout(&o).contains("## Agent `deep01`"));
    assert!(!stdout(&o).contains("more bytes elided"));
    // A file, then the site.
    let f = env.tmp.path().join("one.html");
    let o = env.abcd(&[
        "history",
        "export",
        SID,
        "--format",
        "html",
        "--out",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let site = export_site(&env);
    let index = fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains(&format!("href=\"{SID}.html\"")));
    assert!(index.contains(&format!("href=\"{HOSTILE}.html\"")));
    assert_inert(&fs::read_to_string(site.join(format!("{HOSTILE}.html"))).unwrap());
    assert!(site.join(format!("{SID}.html")).is_file());
    let o = env.abcd(&[
        "history",
        "export",
        "--all",
        "--format",
        "md",
        "--out",
        site.to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
}

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// The DOM Chromium renders from `page`, and every request the page made
/// (from its network log: a request whose initiator is an origin — the
/// page's, `null` for `file://` — rather than the browser's own services).
fn dump_dom(browser: &str, page: &std::path::Path, profile: &std::path::Path) -> String {
    let (dom, requests) = dump_dom_and_requests(browser, page, profile);
    assert!(
        requests.is_empty(),
        "{} made requests: {requests:?}",
        page.display()
    );
    dom
}

fn dump_dom_and_requests(
    browser: &str,
    page: &std::path::Path,
    profile: &std::path::Path,
) -> (String, Vec<String>) {
    let net_log = profile.with_extension(format!(
        "{}.netlog.json",
        page.file_name().unwrap().to_string_lossy()
    ));
    let o = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        o.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let log: Value =
        serde_json::from_slice(&fs::read(&net_log).expect("chromium wrote its net log"))
            .expect("the net log is JSON");
    let requests = log["events"]
        .as_array()
        .expect("net log events")
        .iter()
        .filter_map(|e| {
            let p = &e["params"];
            let initiator = p["initiator"].as_str()?;
            (initiator != "not an origin").then(|| p["url"].as_str().unwrap_or("?").to_owned())
        })
        .collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), requests)
}

/// The parent agent of each `<details data-agent=…>` in a DOM dump.
fn nesting(dom: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack: Vec<String> = vec!["main".into()];
    let mut rest = dom;
    loop {
        let open = rest.find("<details");
        let close = rest.find("</details>");
        match (open, close) {
            (Some(o), c) if c.map(|c| o < c).unwrap_or(true) => {
                let tag_end = rest[o..].find('>').unwrap() + o;
                let tag = &rest[o..tag_end];
                let agent = tag
                    .split("data-agent=\"")
                    .nth(1)
                    .map(|s| s.split('"').next().unwrap().to_owned());
                let name = agent.clone().unwrap_or_default();
                if let Some(a) = agent {
                    let parent = stack.iter().rev().find(|s| !s.is_empty()).unwrap().clone();
                    out.insert(a, parent);
                }
                stack.push(name);
                rest = &rest[tag_end..];
            }
            (_, Some(c)) => {
                stack.pop();
                rest = &rest[c + 10..];
            }
            _ => break,
        }
    }
    out
}

#[test]
fn the_page_in_a_real_browser() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no chromium on PATH (apt-get install chromium); the browser test did not run"
        );
        return;
    };
    let env = captured();
    hostile(&env);
    let site = export_site(&env);
    let profile = env.tmp.path().join("chromium-profile");
    let dom = dump_dom(&browser, &site.join(format!("{SID}.html")), &profile);
    let tree = nesting(&dom);
    assert_eq!(
        tree.get("showcol1").map(String::as_str),
        Some("main"),
        "{tree:?}"
    );
    assert_eq!(
        tree.get("showcol2").map(String::as_str),
        Some("main"),
        "{tree:?}"
    );
    assert_eq!(
        tree.get("deep01").map(String::as_str),
        Some("showcol1"),
        "{tree:?}"
    );
    assert!(dom.contains("deep answer &lt;script&gt;alert(1)&lt;/script&gt;"));
    let dom = dump_dom(&browser, &site.join(format!("{HOSTILE}.html")), &profile);
    // Nothing from the transcript ran: the title is ours, no element was made.
    assert!(dom.contains("<title>"), "{dom}");
    assert!(!dom.contains("pwned\"") && !dom.contains("data-pwned"));
    assert!(!dom.contains("<title>pwned"));
    assert_inert(&dom);
    let index = dump_dom(&browser, &site.join("index.html"), &profile);
    assert!(index.contains(&format!("href=\"{SID}.html\"")));
    // The request check sees a request when a page makes one.
    let leaky = env.tmp.path().join("leaky.html");
    fs::write(&leaky, "<img src=\"http://127.0.0.1:9/x.png\">").unwrap();
    let (_, requests) = dump_dom_and_requests(&browser, &leaky, &profile);
    assert_eq!(requests, ["http://127.0.0.1:9/x.png"], "{requests:?}");
}

#[test]
fn list_reads_like_a_history_and_show_renders_text() {
    let env = captured();
    hostile(&env);
    let o = env.abcd(&["history", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("STARTED (UTC)") && lines[0].contains("TITLE"),
        "{text}"
    );
    // Newest first: the hostile session (July) above the showcase (June).
    let h = text.find(HOSTILE).unwrap();
    let s = text.find(SID).unwrap();
    assert!(h < s, "{text}");
    let row = lines.iter().find(|l| l.contains(SID)).unwrap();
    assert!(row.starts_with("2026-06-15 10:00:01"), "{row}");
    assert!(row.contains("Give me a tour of the repository"), "{row}");
    assert!(row.contains(" 1065 "), "{row}");
    // The tree: deep01 indented under showcol1.
    let i1 = lines
        .iter()
        .position(|l| l.contains("└─ showcol1"))
        .unwrap();
    let i3 = lines.iter().position(|l| l.contains("└─ deep01")).unwrap();
    assert_eq!(i3, i1 + 1, "{text}");
    let indent = |l: &str| l.find("└─").unwrap();
    assert!(indent(lines[i3]) > indent(lines[i1]));
    // Filters.
    let o = stdout(&env.abcd(&["history", "list", "--since", "2026-07-01"]));
    assert!(o.contains(HOSTILE) && !o.contains(SID), "{o}");
    let o = stdout(&env.abcd(&["history", "list", "--until", "2026-07-01"]));
    assert!(!o.contains(HOSTILE) && o.contains(SID), "{o}");
    let o = stdout(&env.abcd(&["history", "list", "--limit", "1"]));
    assert!(o.contains(HOSTILE) && !o.contains(SID), "{o}");
    let o = stdout(&env.abcd(&["history", "list", "--agent-type", "Explore"]));
    assert!(!o.contains(HOSTILE) && o.contains(SID), "{o}");
    let o = env.abcd(&["history", "list", "--since", "yesterday"]);
    assert_ne!(o.status.code(), Some(0));
    // show: readable by default, --raw for the JSONL.
    let o = stdout(&env.abcd(&["history", "show", SID]));
    assert!(o.contains("### Turn 1 — user"), "{o}");
    assert!(!o.contains("\"parentUuid\""));
    let o = stdout(&env.abcd(&["history", "show", SID, "--raw"]));
    assert!(o.contains("\"parentUuid\""));
}

#[test]
fn stats_sum_sessions_once_per_message_id() {
    let env = captured();
    hostile(&env);
    let st = env.json(&["history", "stats"]);
    assert_eq!(st["sessions"], 2);
    assert_eq!(st["sub_agents"], 3);
    assert_eq!(st["sub_agents_by_type"]["general-purpose"], 2);
    assert_eq!(st["sub_agents_by_depth"]["2"], 1);
    assert_eq!(st["tokens"]["total"], 1065 + 2);
    assert_eq!(st["subagent_tokens"]["total"], 265);
    assert_eq!(st["tokens_by_day"]["2026-06-15"]["total"], 1065);
    let st = env.json(&["history", "stats", "--since", "2026-07-01"]);
    assert_eq!(st["sessions"], 1);
    let o = stdout(&env.abcd(&["history", "stats"]));
    assert!(o.contains("counted once per message id"), "{o}");
}

/// `history stats` adds the record token tables the projection keeps
/// (`index/tokens/`): with every record file emptied its figures do not
/// move; without the table (a projection that lost it) it reads the bodies
/// and says the same; a rebuild writes the table back byte for byte.
#[test]
fn stats_read_the_token_table_not_bodies() {
    let env = captured();
    hostile(&env);
    let want = env.json(&["history", "stats"]);
    assert_eq!(want["tokens"]["total"], 1065 + 2, "{want}");
    let tokens_dir = env.lane().join("index/tokens");
    let table = env.snapshot(&["index/tokens"]);
    assert!(!table.is_empty());
    let lines: usize = table
        .values()
        .map(|b| String::from_utf8_lossy(b).lines().count())
        .sum();
    let records = fs::read_dir(env.lane().join("records")).unwrap().count();
    assert_eq!(lines, records, "one token line per live record");
    // Without the table: the bodies are read, the figures are the same.
    fs::rename(&tokens_dir, env.lane().join("tokens.aside")).unwrap();
    assert_eq!(env.json(&["history", "stats"]), want);
    fs::rename(env.lane().join("tokens.aside"), &tokens_dir).unwrap();
    // Every record file emptied: the table alone answers.
    let mut kept = Vec::new();
    for e in fs::read_dir(env.lane().join("records")).unwrap() {
        let p = e.unwrap().path();
        kept.push((p.clone(), fs::read(&p).unwrap()));
        fs::write(&p, b"").unwrap();
    }
    assert_eq!(env.json(&["history", "stats"]), want);
    for (p, b) in kept {
        fs::write(p, b).unwrap();
    }
    let o = env.abcd(&["--json", "journal", "replay", "--rebuild"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(env.snapshot(&["index/tokens"]), table);
    assert_eq!(env.json(&["history", "stats"]), want);
}

#[test]
fn list_reads_summaries_not_bodies() {
    let env = captured();
    hostile(&env);
    let before = stdout(&env.abcd(&["history", "list"]));
    let json_before = env.json(&["history", "list", "--json"]);
    // Every record body gone: the listing is unchanged, so it read none.
    for entry in fs::read_dir(env.lane().join("records")).unwrap() {
        let p = entry.unwrap().path();
        fs::write(&p, b"").unwrap();
    }
    assert_eq!(stdout(&env.abcd(&["history", "list"])), before);
    assert_eq!(env.json(&["history", "list", "--json"]), json_before);
    // --json: the record fields scripts read, plus each record's summary.
    let recs = json_before.as_array().unwrap();
    assert_eq!(recs.len(), 5, "{json_before}");
    let main = recs
        .iter()
        .find(|r| r["session_id"] == SID && r.get("agent_id").is_none())
        .unwrap();
    assert!(
        main["title"]
            .as_str()
            .unwrap()
            .starts_with("Give me a tour of the repository"),
        "{main}"
    );
    assert_eq!(main["started_at"], "2026-06-15T10:00:01.000Z", "{main}");
    assert!(main["source_sha256"].is_string() && main["file"].is_string());
    let session_tokens: u64 = recs
        .iter()
        .filter(|r| r["session_id"] == SID)
        .map(|r| r["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(session_tokens, 1065);
    let one = env.json(&["history", "list", "--json", "--session", SID]);
    assert_eq!(one.as_array().unwrap().len(), 4);
    assert!(one[0].get("agent_id").is_none(), "main thread first: {one}");
}

#[test]
fn list_and_stats_across_repositories() {
    let env = captured();
    let other = env.repo.parent().unwrap().join("other");
    Env::init_repo(&other, &env.home, "second");
    let body = format!(
        "{}\n",
        json!({"type":"user","timestamp":"2026-08-01T00:00:00Z","cwd":other.display().to_string(),"message":{"role":"user","content":"second repo prompt"}})
    );
    let mut child = env
        .command(&other)
        .args(["history", "capture", "-", "--session", "other-0001"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    feed_stdin(&mut child, body.as_bytes());
    assert!(child.wait_with_output().unwrap().status.success());
    // One repository by default; both with --all-repos.
    let o = stdout(&env.abcd(&["history", "list"]));
    assert!(o.contains(SID) && !o.contains("other-0001"), "{o}");
    let o = env.abcd(&["history", "list", "--all-repos"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = stdout(&o);
    assert!(o.contains(SID) && o.contains("other-0001"), "{o}");
    assert!(o.contains("second repo prompt"), "{o}");
    // The second repository is named by its work tree (the transcript's cwd,
    // redacted like the rest: the home directory may be replaced).
    let header = o
        .lines()
        .find(|l| l.starts_with("== ") && l.contains("other"))
        .unwrap_or_else(|| panic!("{o}"));
    assert!(header.contains(&env.root_sha_of(&other)[..12]), "{header}");
    let j = env.json(&["history", "list", "--all-repos", "--json"]);
    assert_eq!(j.as_array().unwrap().len(), 5, "{j}");
    assert!(j
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["repository"].is_string()));
    // Search across both: newest first over all of them, --limit in all.
    let hits = search(&env, &["prompt OR tour", "--all-repos", "--limit", "1"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["session_id"], "other-0001", "{hits:?}");
    let hits = search(&env, &["second OR tour", "--all-repos", "--limit", "100"]);
    let repos: std::collections::BTreeSet<&str> = hits
        .iter()
        .map(|h| h["repository"].as_str().unwrap())
        .collect();
    assert_eq!(repos.len(), 2, "{hits:?}");
    assert_eq!(hits[0]["session_id"], "other-0001", "{hits:?}");
    let st = env.json(&["history", "stats", "--all-repos"]);
    assert_eq!(st["sessions"], 2, "{st}");
    assert_eq!(st["tokens"]["total"], 1065);
    assert_eq!(
        st["sessions_by_repository"].as_object().unwrap().len(),
        2,
        "{st}"
    );
    let st = env.json(&["history", "stats"]);
    assert_eq!(st["sessions"], 1);
}

fn search(env: &Env, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["history", "search"];
    a.extend_from_slice(args);
    let v = env.json(&a);
    v.as_array().unwrap_or_else(|| panic!("{v}")).clone()
}

#[test]
fn search_finds_words_phrases_and_prefixes_with_filters() {
    let env = captured();
    hostile(&env);
    // A word: the main thread's first prompt, turn 1.
    let hits = search(&env, &["tour"]);
    let h = hits
        .iter()
        .find(|h| h["session_id"] == SID && h.get("agent_id").is_none())
        .unwrap_or_else(|| panic!("{hits:?}"));
    assert_eq!(h["turn"], 1);
    assert_eq!(h["role"], "user");
    assert!(h["snippet"].as_str().unwrap().contains("[tour]"), "{h}");
    assert!(h["record"].as_str().unwrap().ends_with(".md"));
    // A phrase, in one sub-agent's answer (streamed over two lines).
    let hits = search(&env, &["\"module surveyed\""]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["agent_id"], "showcol2");
    assert_eq!(hits[0]["role"], "assistant");
    assert_eq!(hits[0]["turn"], 2);
    // A prefix: the prompt ("Survey") and the answer ("surveyed").
    let hits = search(&env, &["survey*", "--session", SID]);
    assert!(hits.len() >= 2, "{hits:?}");
    assert!(hits.iter().all(|h| h["session_id"] == SID));
    // Filters: role, tool, agent type, time.
    let hits = search(&env, &["deep", "--role", "tool", "--tool", "Agent"]);
    assert!(!hits.is_empty(), "{hits:?}");
    assert!(hits
        .iter()
        .all(|h| h["tool"] == "Agent" && h["role"] == "tool" && h["agent_id"] == "showcol1"));
    let hits = search(&env, &["deep", "--agent-type", "Explore"]);
    assert!(
        !hits.is_empty() && hits.iter().all(|h| h["agent_id"] == "deep01"),
        "{hits:?}"
    );
    let hits = search(&env, &["click", "--since", "2026-07-01"]);
    assert!(hits.iter().all(|h| h["session_id"] == HOSTILE) && !hits.is_empty());
    assert!(search(&env, &["click", "--until", "2026-07-01"]).is_empty());
    // Nothing matches: an empty array, and a sentence in text.
    assert!(search(&env, &["xyzzyplugh"]).is_empty());
    let o = stdout(&env.abcd(&["history", "search", "xyzzyplugh"]));
    assert!(o.contains("no match"), "{o}");
    // A query FTS5 refuses is retried as plain words.
    let o = env.abcd(&["history", "search", "jobs-module\""]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Text output names the record, the turn and the snippet.
    let o = stdout(&env.abcd(&["history", "search", "\"module surveyed\""]));
    assert!(o.contains("agent showcol2") && o.contains("turn 2"), "{o}");
    assert!(
        o.contains("[module] [surveyed]") || o.contains("[module surveyed]"),
        "{o}"
    );
    // The index is a projection: a rebuild clears it, the next query
    // rebuilds it with the same hits.
    let before = search(&env, &["survey*"]);
    let r = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(!env.lane().join("index/search").exists());
    assert_eq!(search(&env, &["survey*"]), before);
    // Across repositories.
    let hits = search(&env, &["tour", "--all-repos"]);
    assert!(hits.iter().all(|h| h["repository"].is_string()) && !hits.is_empty());
}

#[test]
fn search_hits_come_newest_first_and_stop_at_the_limit() {
    let env = captured();
    hostile(&env);
    // The index is built by this first query: July above June.
    let hits = search(&env, &["click OR tour"]);
    assert_eq!(hits[0]["session_id"], HOSTILE, "{hits:?}");
    // An older session captured after the index was built sorts by when it
    // ran, not by when it was indexed.
    let older: String = (0..30)
        .map(|i| {
            format!(
                "{}\n",
                json!({"type":"user","timestamp":format!("2026-05-01T00:00:{i:02}Z"),"message":{"role":"user","content":format!("needle {i} of the tour")}})
            )
        })
        .collect();
    capture_main(&env, "older-0001", &older);
    let hits = search(&env, &["click OR tour", "--limit", "100"]);
    let order: Vec<&str> = hits
        .iter()
        .map(|h| h["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(order[0], HOSTILE, "{order:?}");
    let first_may = order.iter().position(|s| *s == "older-0001").unwrap();
    assert!(order[..first_may].contains(&SID), "{order:?}");
    assert!(
        order[first_may..].iter().all(|s| *s == "older-0001"),
        "{order:?}"
    );
    assert_eq!(order.len() - first_may, 30);
    // 20 hits unless told; --limit raises the cap.
    assert_eq!(search(&env, &["needle"]).len(), 20);
    assert_eq!(search(&env, &["needle", "--limit", "100"]).len(), 30);
    assert!(search(&env, &["needle"])[0].get("score").is_none());
    // --rank: BM25, best first, with the score.
    let hits = search(&env, &["needle", "--rank", "--limit", "5"]);
    assert_eq!(hits.len(), 5);
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");
    // One session's hits only, from the span of its records.
    let hits = search(&env, &["tour", "--session", "older-0001", "--limit", "100"]);
    assert_eq!(hits.len(), 30);
    assert!(search(&env, &["tour", "--session", "no-such-session"]).is_empty());
}

#[test]
fn list_json_applies_every_filter() {
    let env = captured();
    hostile(&env);
    let sessions = |args: &[&str]| -> (usize, std::collections::BTreeSet<String>) {
        let mut a = vec!["history", "list", "--json"];
        a.extend_from_slice(args);
        let v = env.json(&a);
        let recs = v.as_array().unwrap_or_else(|| panic!("{v}"));
        (
            recs.len(),
            recs.iter()
                .map(|r| r["session_id"].as_str().unwrap().to_owned())
                .collect(),
        )
    };
    let only = |s: &str| std::collections::BTreeSet::from([s.to_owned()]);
    assert_eq!(sessions(&[]).0, 5);
    assert_eq!(sessions(&["--since", "2026-07-01"]), (1, only(HOSTILE)));
    assert_eq!(sessions(&["--until", "2026-07-01"]), (4, only(SID)));
    assert_eq!(sessions(&["--limit", "1"]), (1, only(HOSTILE)));
    assert_eq!(sessions(&["--agent-type", "Explore"]), (4, only(SID)));
    assert_eq!(
        sessions(&["--all-repos", "--since", "2026-07-01"]),
        (1, only(HOSTILE))
    );
    // A session asked for and filtered out is a miss, as in text.
    let o = env.abcd(&[
        "history",
        "list",
        "--json",
        "--session",
        SID,
        "--since",
        "2026-07-01",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn stats_estimate_cost_from_the_shipped_table_or_the_users() {
    let env = captured();
    let st = env.json(&["history", "stats"]);
    let cost = &st["cost"];
    assert_eq!(cost["pricing"]["as_of"], "2026-11-30", "{st}");
    assert!(cost["pricing"]["source"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    // The sub-agents' Haiku 4.5 tokens are priced ($1 in, $5 out per MTok):
    // 175 + 80 + 10 tokens, of which 67 in and 198 out... summed by model.
    let haiku = &st["tokens_by_model"]["claude-haiku-4-5-20251001"];
    let expect = (haiku["input"].as_f64().unwrap() * 1.0
        + haiku["output"].as_f64().unwrap() * 5.0
        + haiku["cache_creation_input"].as_f64().unwrap() * 1.25
        + haiku["cache_read_input"].as_f64().unwrap() * 0.1)
        / 1e6;
    let got = cost["by_model_usd"]["claude-haiku-4-5-20251001"]
        .as_f64()
        .unwrap();
    assert!((got - expect).abs() < 1e-12, "{got} vs {expect}: {st}");
    assert!(
        st["journal_events"]["captured"].as_u64().unwrap() >= 4,
        "{st}"
    );
    assert!(
        st["journal_events"]["staged"].as_u64().unwrap() >= 4,
        "{st}"
    );
    assert!(st["extended"].is_u64());
    // A user file overrides the shipped rows.
    fs::create_dir_all(&env.abcd_home).unwrap();
    fs::write(
        env.abcd_home.join("pricing.json"),
        r#"{"as_of":"2030-01-01","source":"my contract","models":[{"prefix":"claude-haiku","input":1000000,"output":0,"cache_write":0,"cache_read":0}]}"#,
    )
    .unwrap();
    let st = env.json(&["history", "stats"]);
    let got = st["cost"]["by_model_usd"]["claude-haiku-4-5-20251001"]
        .as_f64()
        .unwrap();
    assert_eq!(got, haiku["input"].as_f64().unwrap(), "{st}");
    assert_eq!(st["cost"]["pricing"]["user_as_of"], "2030-01-01");
    let o = stdout(&env.abcd(&["history", "stats"]));
    assert!(
        o.contains("estimated cost: $") && o.contains("overridden by"),
        "{o}"
    );
    // A broken user file is an error that names it.
    fs::write(env.abcd_home.join("pricing.json"), "{").unwrap();
    let o = env.abcd(&["history", "stats"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("pricing.json"), "{}", stderr(&o));
}

/// Every public fixture transcript, each as the main thread of its own
/// session, captured through the hooks and a drain, then read by every
/// verb: each succeeds, the figures agree across verbs (a one-thread
/// session's tokens are its record's), the page is inert, and a word of
/// each title is found by search in that session.
#[test]
fn every_verb_reads_every_public_fixture() {
    let env = Env::new();
    let fx = fixtures();
    let mut files = Vec::new();
    let mut stack = vec![fx.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl")
                && !p.to_string_lossy().contains("/subagents/")
                && !p.ends_with("history.jsonl")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let ok = |o: std::process::Output| {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    let mut sessions = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let sid = format!("fixture-{i:02}");
        let body = fs::read_to_string(f).unwrap();
        let main = env.main_transcript(&sid, &body);
        ok(env.hook("session-start", &env.start_payload(&sid)));
        ok(env.hook("stop", &env.end_payload(&sid, &main)));
        ok(env.hook("session-end", &env.end_payload(&sid, &main)));
        sessions.push((sid, f.clone()));
    }
    env.drain();
    let list = env.json(&["history", "list", "--json"]);
    let records = list.as_array().unwrap();
    assert_eq!(records.len(), files.len(), "one record per fixture: {list}");
    ok(env.abcd(&["history", "list"]));
    let out = env.tmp.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let mut total = 0u64;
    let mut searched = 0;
    for (sid, f) in &sessions {
        let rec = records
            .iter()
            .find(|r| r["session_id"] == sid.as_str())
            .unwrap_or_else(|| panic!("{sid} ({}) stored", f.display()));
        ok(env.abcd(&["history", "show", sid]));
        ok(env.abcd(&[
            "history",
            "reconstruct",
            sid,
            "--out",
            out.to_str().unwrap(),
        ]));
        let t: Value =
            serde_json::from_slice(&fs::read(out.join(format!("{sid}.telemetry.json"))).unwrap())
                .unwrap();
        let tokens = t["tokens"]["tokens"]["total"].as_u64().unwrap();
        assert_eq!(rec["tokens"].as_u64(), Some(tokens), "{}", f.display());
        total += tokens;
        for format in ["md", "json"] {
            ok(env.abcd(&["history", "export", sid, "--format", format]));
        }
        let html = stdout(&ok(
            env.abcd(&["history", "export", sid, "--format", "html"])
        ));
        assert!(!html.to_lowercase().contains("<script"), "{}", f.display());
        // A word of the title (when the transcript has a prompt) is found.
        let word = rec["title"].as_str().and_then(|t| {
            t.split(|c: char| !c.is_ascii_alphanumeric())
                .find(|w| w.len() >= 5)
                .map(str::to_owned)
        });
        if let Some(w) = word {
            let hits = search(&env, &[w.as_str(), "--session", sid]);
            assert!(
                hits.iter().any(|h| h["turn"].as_i64() >= Some(1)),
                "{w} in {}: {hits:?}",
                f.display()
            );
            searched += 1;
        }
    }
    assert!(searched >= files.len() / 2, "{searched} titles searched");
    let st = env.json(&["history", "stats"]);
    assert_eq!(st["sessions"], files.len() as u64, "{st}");
    assert_eq!(st["tokens"]["total"], total, "{st}");
    ok(env.abcd(&["history", "stats"]));
    let site = export_site(&env);
    assert_eq!(
        fs::read_dir(&site).unwrap().count(),
        files.len() + 1,
        "a page per session and the index"
    );
}

#[test]
fn stats_count_extended_captures_and_hook_events() {
    let env = Env::new();
    let ok = |o: std::process::Output| assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line = |t: &str| {
        json!({"type":"user","timestamp":"2026-06-01T00:00:00Z","message":{"role":"user","content":t}})
            .to_string()
    };
    let sid = "grow-0001";
    let body = format!("{}\n", line("one"));
    let p = env.main_transcript(sid, &body);
    ok(env.hook("session-start", &env.start_payload(sid)));
    ok(env.hook("stop", &env.end_payload(sid, &p)));
    // The transcript grew after it was staged: the drain stores the longer
    // prefix, and stats counts that capture as extended.
    fs::write(&p, format!("{body}{}\n", line("two"))).unwrap();
    env.drain();
    // A sub-agent staged twice with growing bytes (staged, restaged), the
    // same bytes again (no event), and a SubagentStop without a path; a
    // UserPromptSubmit journals nothing.
    let ap = env.agent_transcript(sid, "ag1", &format!("{}\n", line("a")), None);
    ok(env.hook("subagent-stop", &env.subagent_payload(sid, "ag1", &ap)));
    fs::write(&ap, format!("{}\n{}\n", line("a"), line("b"))).unwrap();
    ok(env.hook("subagent-stop", &env.subagent_payload(sid, "ag1", &ap)));
    ok(env.hook("subagent-stop", &env.subagent_payload(sid, "ag1", &ap)));
    let mut gap = env.subagent_payload(sid, "ag2", &ap);
    gap.as_object_mut().unwrap().remove("agent_transcript_path");
    ok(env.hook("subagent-stop", &gap));
    ok(env.hook(
        "user-prompt-submit",
        &json!({"session_id": sid, "cwd": env.repo, "hook_event_name": "UserPromptSubmit", "prompt": "x"}),
    ));
    let st = env.json(&["history", "stats"]);
    assert_eq!(st["extended"], 1, "{st}");
    assert_eq!(st["journal_events"]["session-noted"], 1, "{st}");
    assert_eq!(st["journal_events"]["staged"], 2, "{st}");
    assert_eq!(st["journal_events"]["restaged"], 1, "{st}");
    // The prompt hook drained the staged sub-agent.
    assert_eq!(st["journal_events"]["captured"], 2, "{st}");
    let h = &st["hook_fires"];
    assert_eq!(h["main_thread_staged"], 1, "{st}");
    assert_eq!(h["subagent_staged"], 2, "{st}");
    assert_eq!(h["subagent_without_transcript"], 1, "{st}");
    assert_eq!(h["sessions_noted"], 1, "{st}");
    assert_eq!(h["adopted"], 0, "{st}");
    let o = stdout(&env.abcd(&["history", "stats"]));
    assert!(
        o.contains("captures that extended a staged transcript: 1"),
        "{o}"
    );
    assert!(
        o.contains("subagent-stop staged a sub-agent 2") && o.contains("user-prompt-submit fires"),
        "{o}"
    );
}
