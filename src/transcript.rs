//! Transcript lines: a lenient parse of a stored (redacted) Claude Code JSONL
//! body into the facts the read side needs.
//!
//! Owns: which envelope keys are read (`type`, `timestamp`, `message{id,
//! role, model, content, usage}`, `toolUseResult.agentId`), the content
//! block shapes (text, thinking, tool_use, tool_result, anything else), and
//! the token buckets of one `usage` object.
//!
//! Must never: touch the file system, decide what counts (telemetry does),
//! or fail on a line it does not understand (it is counted as unparseable
//! and kept out of every figure). The format is declared internal and
//! version-unstable by its author, so every key is optional.

use serde::Serialize;
use serde_json::Value;

/// The four token buckets of one API response's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_creation_input: u64,
    pub cache_read_input: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_creation_input)
            .saturating_add(self.cache_read_input)
    }

    pub fn add(&mut self, o: &Usage) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_creation_input = self
            .cache_creation_input
            .saturating_add(o.cache_creation_input);
        self.cache_read_input = self.cache_read_input.saturating_add(o.cache_read_input);
    }

    /// Bucket-wise maximum: streamed partials of one response repeat the
    /// input figures and grow the output count.
    pub fn max_with(&mut self, o: &Usage) {
        self.input = self.input.max(o.input);
        self.output = self.output.max(o.output);
        self.cache_creation_input = self.cache_creation_input.max(o.cache_creation_input);
        self.cache_read_input = self.cache_read_input.max(o.cache_read_input);
    }

    fn from_json(v: &Value) -> Option<Usage> {
        let o = v.as_object()?;
        let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(Usage {
            input: n("input_tokens"),
            output: n("output_tokens"),
            cache_creation_input: n("cache_creation_input_tokens"),
            cache_read_input: n("cache_read_input_tokens"),
        })
    }
}

/// One content block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Text(String),
    Thinking(String),
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    ToolResult {
        tool_use_id: String,
        text: String,
        is_error: bool,
    },
    /// An image, a server tool block or a shape this build does not know:
    /// its `type`.
    Other(String),
}

/// The facts of one JSONL line.
#[derive(Debug, Clone)]
pub struct Line {
    /// 0-based position in the body.
    pub index: usize,
    /// The envelope `type` (`user`, `assistant`, `progress`, …).
    pub kind: String,
    pub timestamp: Option<String>,
    pub message_id: Option<String>,
    pub role: Option<String>,
    pub model: Option<String>,
    /// `message.usage` (never `toolUseResult.usage` or a nested progress
    /// message: those echo a response already counted).
    pub usage: Option<Usage>,
    pub blocks: Vec<Block>,
    /// `toolUseResult.agentId`: the sub-agent a tool result reports on.
    pub result_agent_id: Option<String>,
    /// The raw line (already redacted), for "mentions the agent id" checks.
    pub raw: String,
}

impl Line {
    /// A conversational turn line (user or assistant).
    pub fn is_turn(&self) -> bool {
        self.kind == "user" || self.kind == "assistant"
    }
}

/// A parsed body.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub lines: Vec<Line>,
    /// Non-empty lines that are not a JSON object.
    pub unparseable: usize,
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let mut out = String::new();
            for it in items {
                let t = match it.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => match it.get("type").and_then(Value::as_str) {
                        Some(k) => format!("[{k}]"),
                        None => it.to_string(),
                    },
                };
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&t);
            }
            out
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn blocks_of(content: Option<&Value>) -> Vec<Block> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match content {
        Some(Value::String(t)) => vec![Block::Text(t.clone())],
        Some(Value::Array(items)) => items
            .iter()
            .map(
                |b| match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => Block::Text(s(b, "text")),
                    "thinking" => Block::Thinking(s(b, "thinking")),
                    "redacted_thinking" => Block::Thinking(String::new()),
                    "tool_use" => Block::ToolUse {
                        id: s(b, "id"),
                        name: s(b, "name"),
                        input: b
                            .get("input")
                            .map(|i| serde_json::to_string_pretty(i).unwrap_or_default())
                            .unwrap_or_default(),
                    },
                    "tool_result" => Block::ToolResult {
                        tool_use_id: s(b, "tool_use_id"),
                        text: text_of(b.get("content").unwrap_or(&Value::Null)),
                        is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    },
                    other => Block::Other(other.to_owned()),
                },
            )
            .collect(),
        _ => Vec::new(),
    }
}

/// Parses one line; `None` when it is not a JSON object.
pub fn parse_line(index: usize, raw: &str) -> Option<Line> {
    let v: Value = serde_json::from_str(raw).ok()?;
    let o = v.as_object()?;
    let st = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let msg = o.get("message").filter(|m| m.is_object());
    let mget = |k: &str| msg.and_then(|m| m.get(k));
    Some(Line {
        index,
        kind: st(o.get("type")).unwrap_or_default(),
        timestamp: st(o.get("timestamp")),
        message_id: st(mget("id")).filter(|s| !s.is_empty()),
        role: st(mget("role")),
        model: st(mget("model")).filter(|s| !s.is_empty()),
        usage: mget("usage").and_then(Usage::from_json),
        blocks: blocks_of(mget("content")),
        result_agent_id: o
            .get("toolUseResult")
            .and_then(|t| t.get("agentId"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        raw: raw.to_owned(),
    })
}

/// Parses a whole body (invalid UTF-8 is replaced, never refused).
pub fn parse(body: &[u8]) -> Parsed {
    let text = String::from_utf8_lossy(body);
    let mut out = Parsed::default();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        match parse_line(i, raw) {
            Some(l) => out.lines.push(l),
            None => out.unparseable += 1,
        }
    }
    out
}

/// The first user prompt (text, not a tool result), one line, for titles.
pub fn first_prompt(parsed: &Parsed) -> Option<String> {
    parsed
        .lines
        .iter()
        .filter(|l| l.kind == "user")
        .find_map(|l| {
            l.blocks.iter().find_map(|b| match b {
                Block::Text(t) if !t.trim().is_empty() => Some(t.clone()),
                _ => None,
            })
        })
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_yields_its_facts_and_garbage_is_counted() {
        let body = concat!(
            r#"{"type":"assistant","timestamp":"2026-01-01T00:00:00Z","message":{"id":"m1","role":"assistant","model":"x","content":[{"type":"tool_use","id":"t1","name":"Agent","input":{"a":1}}],"usage":{"input_tokens":3,"output_tokens":4}}}"#,
            "\nnot json\n\n",
            r#"{"type":"user","toolUseResult":{"agentId":"ag1","usage":{"input_tokens":99}},"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}]}]}}"#,
            "\n"
        );
        let p = parse(body.as_bytes());
        assert_eq!(p.unparseable, 1);
        assert_eq!(p.lines.len(), 2);
        let a = &p.lines[0];
        assert_eq!(a.message_id.as_deref(), Some("m1"));
        assert_eq!(a.usage.map(|u| u.total()), Some(7));
        assert!(matches!(&a.blocks[0], Block::ToolUse { name, .. } if name == "Agent"));
        let u = &p.lines[1];
        assert_eq!(u.usage, None, "toolUseResult usage is not message usage");
        assert_eq!(u.result_agent_id.as_deref(), Some("ag1"));
        assert!(matches!(&u.blocks[0], Block::ToolResult { text, .. } if text == "done"));
    }
}
