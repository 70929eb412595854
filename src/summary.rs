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
    let p = transcript::parse(body);
    let table = TokenTable::of(&p.lines);
    let summary = Summary::from_parsed(file, meta, body, &p, table.total());
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
        let cwd = p.lines.iter().take(32).find_map(|l| {
            serde_json::from_str::<serde_json::Value>(&l.raw)
                .ok()?
                .get("cwd")?
                .as_str()
                .map(str::to_owned)
        });
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
