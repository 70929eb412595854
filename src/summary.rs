//! Record summaries: the few facts `history list` shows about a record
//! (when its transcript ran, its title, size, tokens, turns, the sub-agent
//! calls it made), derived from the record's metadata and redacted body.
//!
//! Owns: the summary shape and how it is computed. The projection stores
//! one line per live record in `index/summary/<session key>` when it
//! applies a `Captured` event, so listing a store reads summaries, never
//! record bodies.
//!
//! Must never: do I/O, or depend on anything but the record (a replay must
//! reproduce every summary byte for byte).

use serde::{Deserialize, Serialize};

use crate::record::RecordMeta;
use crate::telemetry::TokenTable;
use crate::transcript::{self, Block, Line};

/// Longest label (title, agent type) put on one line.
pub const LABEL_CAP: usize = 120;

/// Tool names whose calls spawn a sub-agent.
const SPAWN_TOOLS: [&str; 2] = ["Task", "Agent"];

/// One line, control characters removed, at most [`LABEL_CAP`] characters.
pub fn label(s: &str) -> String {
    let one: String = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if one.chars().count() > LABEL_CAP {
        let mut t: String = one.chars().take(LABEL_CAP - 1).collect();
        t.push('…');
        t
    } else {
        one
    }
}

/// The text between `<tag>` and `</tag>` in `s`, trimmed.
fn tagged<'a>(s: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = s.find(&open)? + open.len();
    let end = s[start..].find(&format!("</{tag}>"))? + start;
    Some(s[start..end].trim())
}

/// A session's title from its first prompt, one line: a slash command
/// (Claude Code writes `<command-message>…</command-message>
/// <command-name>/x</command-name> <command-args>…</command-args>`) as
/// `/x args`; any other prompt as it is.
pub fn title(prompt: &str) -> String {
    let name = tagged(prompt, "command-name").filter(|n| !n.is_empty());
    let Some(name) = name.or_else(|| tagged(prompt, "command-message")) else {
        return label(prompt);
    };
    let slash = if name.starts_with('/') { "" } else { "/" };
    match tagged(prompt, "command-args").filter(|a| !a.is_empty()) {
        Some(args) => label(&format!("{slash}{name} {args}")),
        None => label(&format!("{slash}{name}")),
    }
}

/// A sub-agent spawning call in a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    pub tool_use_id: String,
    /// The turn (1-based) of the call.
    pub turn: usize,
    /// The agent a tool result of this call names (`toolUseResult.agentId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// What `history list` knows about one record without reading it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub file: String,
    /// The record's frontmatter.
    pub meta: RecordMeta,
    /// Earliest and latest line timestamps of the transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The first user prompt, one line (the body is already redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Body bytes.
    pub bytes: u64,
    /// Tokens of this record, once per API message id.
    pub tokens: u64,
    pub turns: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spawns: Vec<Spawn>,
    /// The working directory the transcript names first (`cwd`, redacted
    /// like the rest of the body): where the session ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

fn time_bounds(lines: &[Line]) -> (Option<String>, Option<String>) {
    let mut ts: Vec<(u64, &str)> = lines
        .iter()
        .filter_map(|l| l.timestamp.as_deref())
        .filter_map(|t| crate::clock::parse_rfc3339(t).map(|n| (n, t)))
        .collect();
    ts.sort();
    (
        ts.first().map(|t| t.1.to_owned()),
        ts.last().map(|t| t.1.to_owned()),
    )
}

/// A record's token table as the projection keeps it
/// (`index/tokens/<session key>`, one JSON line per live record): each
/// API message id once with its final usage, by model and day
/// ([`TokenTable`]). `history stats` adds these instead of reading bodies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenLine {
    pub file: String,
    pub table: TokenTable,
}

impl TokenLine {
    /// One JSON line (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("token line serialises")
    }

    /// Parses one line; `None` for a line that is not a token line.
    pub fn from_line(line: &str) -> Option<TokenLine> {
        serde_json::from_str(line).ok()
    }
}

/// What the projection keeps about one record, from one parse of its body.
pub fn facts(file: &str, meta: &RecordMeta, body: &[u8]) -> (Summary, TokenLine) {
    let (p, cwd) = transcript::parse_facts(body);
    facts_of(file, meta, body, &p, cwd)
}

/// [`facts`] from a parse of the body and the `cwd` it names first.
fn facts_of(
    file: &str,
    meta: &RecordMeta,
    body: &[u8],
    p: &transcript::Parsed,
    cwd: Option<String>,
) -> (Summary, TokenLine) {
    let table = TokenTable::of(&p.lines);
    let summary = Summary::from_parsed(file, meta, body, p, table.total(), cwd);
    (
        summary,
        TokenLine {
            file: file.to_owned(),
            table,
        },
    )
}

impl Summary {
    /// The summary of record `file` (metadata and redacted body).
    pub fn of(file: &str, meta: &RecordMeta, body: &[u8]) -> Summary {
        facts(file, meta, body).0
    }

    fn from_parsed(
        file: &str,
        meta: &RecordMeta,
        body: &[u8],
        p: &transcript::Parsed,
        tokens: u64,
        cwd: Option<String>,
    ) -> Summary {
        let (started_at, ended_at) = time_bounds(&p.lines);
        // Turns as `reconstruct` groups them: a user line, or the
        // consecutive assistant lines of one API message.
        let mut turns = 0usize;
        let mut last_msg: Option<&str> = None;
        let mut last_assistant = false;
        let mut spawns: Vec<Spawn> = Vec::new();
        for l in p.lines.iter().filter(|l| l.is_turn()) {
            let same = l.kind == "assistant"
                && l.message_id.is_some()
                && l.message_id.as_deref() == last_msg
                && last_assistant;
            if !same {
                turns += 1;
            }
            last_assistant = l.kind == "assistant";
            last_msg = if last_assistant {
                l.message_id.as_deref()
            } else {
                None
            };
            for b in &l.blocks {
                match b {
                    Block::ToolUse { id, name, .. }
                        if !id.is_empty()
                            && SPAWN_TOOLS.contains(&name.as_str())
                            && !spawns.iter().any(|s| &s.tool_use_id == id) =>
                    {
                        spawns.push(Spawn {
                            tool_use_id: id.clone(),
                            turn: turns,
                            agent_id: None,
                        })
                    }
                    Block::ToolResult { tool_use_id, .. } => {
                        if let (Some(a), Some(s)) = (
                            &l.result_agent_id,
                            spawns.iter_mut().find(|s| &s.tool_use_id == tool_use_id),
                        ) {
                            s.agent_id = Some(a.clone());
                        }
                    }
                    _ => {}
                }
            }
        }
        Summary {
            file: file.to_owned(),
            meta: meta.clone(),
            started_at,
            ended_at,
            title: transcript::first_prompt(p).map(|t| title(&t)),
            bytes: body.len() as u64,
            tokens,
            turns,
            spawns,
            cwd,
        }
    }

    pub fn session_id(&self) -> &str {
        &self.meta.lineage.session_id
    }
    pub fn agent_id(&self) -> Option<&str> {
        self.meta.lineage.agent_id.as_deref()
    }

    /// One JSON line (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("summary serialises")
    }

    /// Parses one line; `None` for a line that is not a summary.
    pub fn from_line(line: &str) -> Option<Summary> {
        serde_json::from_str(line).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage::{Lineage, LineageSource};

    #[test]
    fn a_summary_counts_turns_tokens_and_spawns() {
        let body = concat!(
            r#"{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"fix   the\nbug"}}"#,
            "\n",
            r#"{"type":"assistant","timestamp":"2026-01-01T00:00:05Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Task","input":{}}],"usage":{"input_tokens":3,"output_tokens":4}}}"#,
            "\n",
            r#"{"type":"assistant","timestamp":"2026-01-01T00:00:06Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":3,"output_tokens":4}}}"#,
            "\n",
            r#"{"type":"user","timestamp":"2026-01-01T00:01:00Z","toolUseResult":{"agentId":"ag1"},"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done"}]}}"#,
            "\n"
        );
        let meta = RecordMeta::native(
            &Lineage::main_thread("s1", LineageSource::Hook),
            "root",
            7,
            &"a".repeat(64),
        );
        let s = Summary::of("r.md", &meta, body.as_bytes());
        assert_eq!(s.title.as_deref(), Some("fix the bug"));
        assert_eq!(s.turns, 3);
        assert_eq!(s.tokens, 7, "once per message id");
        assert_eq!(s.started_at.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(s.ended_at.as_deref(), Some("2026-01-01T00:01:00Z"));
        assert_eq!(s.spawns.len(), 1);
        assert_eq!(s.spawns[0].agent_id.as_deref(), Some("ag1"));
        assert_eq!(s.spawns[0].turn, 2);
        assert_eq!(Summary::from_line(&s.to_line()), Some(s));
    }

    /// The summary and token line as the full parse gives them (the
    /// reference [`transcript::parse_facts`] must match).
    fn reference_facts(body: &[u8]) -> (Summary, TokenLine) {
        let p = transcript::parse(body);
        let cwd = p.lines.iter().take(transcript::CWD_LINES).find_map(|l| {
            serde_json::from_str::<serde_json::Value>(&l.raw)
                .ok()?
                .get("cwd")?
                .as_str()
                .map(str::to_owned)
        });
        facts_of("r.md", &meta(), body, &p, cwd)
    }

    fn meta() -> RecordMeta {
        RecordMeta::native(
            &Lineage::main_thread("s1", LineageSource::Hook),
            "root",
            7,
            &"a".repeat(64),
        )
    }

    fn assert_same_facts(body: &[u8]) {
        let (fast, cwd) = transcript::parse_facts(body);
        let full = transcript::parse(body);
        assert_eq!(fast.unparseable, full.unparseable);
        assert_eq!(fast.lines.len(), full.lines.len());
        let got = facts_of("r.md", &meta(), body, &fast, cwd);
        let want = reference_facts(body);
        assert_eq!(got.0.to_line(), want.0.to_line());
        assert_eq!(got.1.to_line(), want.1.to_line());
    }

    #[test]
    fn the_light_parse_gives_the_full_parse_facts_on_every_fixture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut stack = vec![root];
        let mut seen = 0;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    assert_same_facts(&std::fs::read(&p).unwrap());
                    seen += 1;
                }
            }
        }
        assert!(seen >= 10, "only {seen} fixture transcripts found");
    }

    #[test]
    fn the_light_parse_reads_odd_lines_as_the_full_parse_does() {
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"first"},"cwd":"/a"}"#,
            r#"{"type":1,"timestamp":["x"],"message":"not an object","cwd":2}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"","usage":{"input_tokens":-1,"output_tokens":2.0,"cache_read_input_tokens":"3","cache_creation_input_tokens":18446744073709551615}}}"#,
            r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":1,"input_tokens":5}}}"#,
            r#"{"type":"assistant","type":"user","message":{"content":[1,null,{"type":7},{"type":"tool_use","id":"t","name":"Agent","input":{"a":[{}]}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes","content":[{"type":"image"}]}]},"toolUseResult":{"agentId":"a1","agentId":"a2"}}"#,
            r#"{"type":"user","toolUseResult":["agentId"],"message":{"content":[{"type":"text","text":{"no":1}},{"type":"text","text":"  "},{"type":"text","text":"sec\u006fnd"}]}}"#,
            r#"{"type":"user","message":{"content":"lone \ud800 surrogate"}}"#,
            r#"{"type":"user","x":"\udc00","message":{"content":"in a skipped key"}}"#,
            r#"{"type":"assistant","n":1e400,"message":{"id":"big","usage":{"output_tokens":9}}}"#,
            r#"{"type":"assistant","message":{"id":"esc\"aped","model":"m\u00e9","usage":{"output_tokens":4}},"timestamp":"2026-01-01T00:00:00Z"}"#,
            r#"[1,2,3]"#,
            r#""a string""#,
            r#"{"type":"user"} trailing"#,
            r#"{"type":"user","message":{"content":"unterminated"#,
            r#"{"\u0074ype":"user","message":{"content":"escaped key"},"cwd":"/b"}"#,
            "   ",
            r#"{"type":"thinking","message":{"content":[{"type":"thinking","thinking":"t"},{"type":"redacted_thinking"}]}}"#,
        ];
        let mut body = lines.join("\n");
        body.push('\n');
        assert_same_facts(body.as_bytes());
        // One line at a time too: which line names the first cwd and the
        // first prompt moves.
        for l in lines {
            assert_same_facts(l.as_bytes());
        }
        // Nesting past serde_json's recursion limit, inside a skipped key.
        let deep = format!(
            "{{\"type\":\"user\",\"x\":{}1{},\"message\":{{\"content\":\"deep\"}}}}\n",
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_same_facts(deep.as_bytes());
        // Invalid UTF-8 is replaced, as the full parse does.
        assert_same_facts(b"{\"type\":\"user\",\"message\":{\"content\":\"\xff bad\"}}\n");
    }

    proptest::proptest! {
        /// Lines built from the keys the parse reads, with values of every
        /// JSON type in every place.
        #[test]
        fn the_light_parse_matches_on_generated_lines(lines in proptest::collection::vec(gen::line(), 1..12)) {
            let mut body = lines.join("\n");
            body.push('\n');
            assert_same_facts(body.as_bytes());
        }
    }

    mod gen {
        use proptest::prelude::*;
        use serde_json::{json, Value};

        fn scalar() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                (-1e6f64..1e6).prop_map(Value::from),
                prop_oneof![
                    Just("user"),
                    Just("assistant"),
                    Just("text"),
                    Just("tool_use"),
                    Just("tool_result"),
                    Just("Task"),
                    Just("Agent"),
                    Just(""),
                    Just("  "),
                    Just("2026-01-02T03:04:05Z"),
                    Just("2026-01-01T00:00:00.5+01:00"),
                    Just("m1"),
                    Just("m2"),
                    Just("t1"),
                    Just("<synthetic>"),
                    Just("<command-name>/x</command-name>"),
                    Just("é\"\\\n"),
                ]
                .prop_map(Value::from),
            ]
        }

        fn value() -> impl Strategy<Value = Value> {
            scalar().prop_recursive(3, 12, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                    proptest::collection::vec((key(), inner), 0..4)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        fn key() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("type"),
                Just("timestamp"),
                Just("message"),
                Just("toolUseResult"),
                Just("agentId"),
                Just("cwd"),
                Just("id"),
                Just("role"),
                Just("model"),
                Just("usage"),
                Just("content"),
                Just("text"),
                Just("name"),
                Just("tool_use_id"),
                Just("is_error"),
                Just("input_tokens"),
                Just("output_tokens"),
                Just("cache_read_input_tokens"),
                Just("cache_creation_input_tokens"),
                Just("other"),
            ]
            .prop_map(str::to_owned)
        }

        fn block() -> impl Strategy<Value = Value> {
            (scalar(), value(), value(), value(), any::<bool>()).prop_map(|(k, a, b, c, e)| {
                json!({"type": k, "text": a, "id": b, "name": c, "tool_use_id": b, "is_error": e})
            })
        }

        pub fn line() -> impl Strategy<Value = String> {
            let usage = (any::<u32>(), any::<u32>(), value()).prop_map(|(i, o, x)| {
                json!({"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": x})
            });
            let content = prop_oneof![
                value(),
                proptest::collection::vec(block(), 0..4).prop_map(Value::from),
            ];
            let message = prop_oneof![
                value(),
                (scalar(), scalar(), scalar(), usage, content).prop_map(|(id, r, m, u, c)| {
                    json!({"id": id, "role": r, "model": m, "usage": u, "content": c})
                }),
            ];
            (scalar(), scalar(), message, value(), value(), value()).prop_map(
                |(t, ts, m, tur, cwd, extra)| {
                    json!({"type": t, "timestamp": ts, "message": m, "toolUseResult": tur,
                           "cwd": cwd, "extra": extra})
                    .to_string()
                },
            )
        }
    }

    #[test]
    fn a_slash_command_is_titled_as_typed() {
        assert_eq!(
            title("<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>check the\n API</command-args>"),
            "/review check the API"
        );
        assert_eq!(
            title("<command-message>clear</command-message>\n <command-args></command-args>"),
            "/clear"
        );
        assert_eq!(title("fix <b>this</b>  bug"), "fix <b>this</b> bug");
        assert_eq!(
            title("<command-name>/x</command-name"),
            "<command-name>/x</command-name"
        );
    }
}
