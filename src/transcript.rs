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

/// Parses a whole body for the facts a record's summary and token table
/// need, and the first `cwd` among the first [`CWD_LINES`] parsed lines.
///
/// The lines it returns are the ones [`parse`] returns, with the same
/// `index`, `kind`, `timestamp`, `message_id`, `role`, `model`, `usage`,
/// `result_agent_id` and block kinds and ids, except that the bulky parts
/// nothing but the read side shows are left empty: `raw`, a `tool_use`'s
/// `input`, a `tool_result`'s `text`, `thinking` text, and the text blocks
/// of any line that is not a `user` line. No `serde_json::Value` is built:
/// keys it does not read are skipped without allocating, which is what
/// makes the projection of a megabyte transcript cheap (a capture applies
/// it under the store lock). A line this parse cannot read (a duplicated
/// key, which serde's typed path refuses) falls back to [`parse_line`], so
/// every line is read exactly as [`parse`] reads it (tested against it).
pub fn parse_facts(body: &[u8]) -> (Parsed, Option<String>) {
    // `from_utf8_lossy` walks the bytes chunk by chunk even when they are
    // valid; checking first is several times faster on the common case.
    let text = match std::str::from_utf8(body) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(body),
    };
    let mut out = Parsed::default();
    let mut cwd: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let parsed = match serde_json::from_str::<lite::Top>(raw) {
            Ok(t) => t.line.map(|(l, c)| (l.into_line(i), c)),
            Err(_) => parse_line(i, raw).map(|mut l| {
                let c = serde_json::from_str::<Value>(raw)
                    .ok()
                    .and_then(|v| v.get("cwd").and_then(Value::as_str).map(str::to_owned));
                slim(&mut l);
                (l, c)
            }),
        };
        match parsed {
            Some((l, c)) => {
                if cwd.is_none() && out.lines.len() < CWD_LINES {
                    cwd = c;
                }
                out.lines.push(l);
            }
            None => out.unparseable += 1,
        }
    }
    (out, cwd)
}

/// How many parsed lines [`parse_facts`] looks at for a `cwd`.
pub const CWD_LINES: usize = 32;

/// Empties what [`parse_facts`] does not keep.
fn slim(l: &mut Line) {
    l.raw = String::new();
    let user = l.kind == "user";
    for b in &mut l.blocks {
        match b {
            Block::Text(t) if !user => t.clear(),
            Block::Thinking(t) => t.clear(),
            Block::ToolUse { input, .. } => input.clear(),
            Block::ToolResult { text, .. } => text.clear(),
            _ => {}
        }
    }
}

/// The typed, allocation-light reading of one line for [`parse_facts`].
/// Every key is lenient exactly as the `Value` path is: a value of the wrong
/// JSON type reads as absent, never as a failed line; a repeated key keeps
/// its last value, as a `Value` map does.
mod lite {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
    use serde::Deserialize;

    use super::{Block, Line, Usage};

    /// Any JSON value, read and dropped through `deserialize_any` — not
    /// `IgnoredAny`, which skips without checking what a `Value` parse
    /// refuses (a lone surrogate escape, a number out of range, nesting over
    /// the recursion limit): a line fails here exactly when it fails there.
    struct Skip;

    impl<'de> Deserialize<'de> for Skip {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Skip;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_unit<E>(self) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                    while a.next_element::<Skip>()?.is_some() {}
                    Ok(Skip)
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                    while a.next_entry::<Skip, Skip>()?.is_some() {}
                    Ok(Skip)
                }
            }
            d.deserialize_any(V)
        }
    }

    /// Any JSON value, containers skipped.
    pub enum Scalar<'a> {
        Str(Cow<'a, str>),
        U64(u64),
        Bool(bool),
        Other,
    }

    impl<'a> Scalar<'a> {
        fn str(self) -> Option<Cow<'a, str>> {
            match self {
                Scalar::Str(s) => Some(s),
                _ => None,
            }
        }
        /// As `Value::as_u64`, else 0.
        fn count(&self) -> u64 {
            match self {
                Scalar::U64(n) => *n,
                _ => 0,
            }
        }
    }

    /// Deserializes `Self` from any JSON value: `on_map` reads an object,
    /// anything else is skipped and reads as `none`.
    macro_rules! any_value {
        ($ty:ident<$l:lifetime>, $none:expr, |$a:ident| $on_map:block) => {
            impl<$l> Deserialize<$l> for $ty<$l> {
                fn deserialize<D: Deserializer<$l>>(d: D) -> Result<Self, D::Error> {
                    struct V;
                    impl<$l> Visitor<$l> for V {
                        type Value = $ty<$l>;
                        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                            f.write_str("any JSON value")
                        }
                        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_unit<E>(self) -> Result<Self::Value, E> {
                            Ok($none)
                        }
                        fn visit_seq<A: SeqAccess<$l>>(
                            self,
                            mut a: A,
                        ) -> Result<Self::Value, A::Error> {
                            while a.next_element::<Skip>()?.is_some() {}
                            Ok($none)
                        }
                        fn visit_map<A: MapAccess<$l>>(
                            self,
                            mut $a: A,
                        ) -> Result<Self::Value, A::Error> {
                            $on_map
                        }
                    }
                    d.deserialize_any(V)
                }
            }
        };
    }

    impl<'de> Deserialize<'de> for Scalar<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Scalar<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                    Ok(Scalar::Str(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                    Ok(Scalar::Str(Cow::Owned(v.to_owned())))
                }
                fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                    Ok(Scalar::Str(Cow::Owned(v)))
                }
                fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                    Ok(Scalar::Bool(v))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                    Ok(Scalar::Other)
                }
                fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                    Ok(Scalar::U64(v))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                    Ok(Scalar::Other)
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(Scalar::Other)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    while a.next_element::<Skip>()?.is_some() {}
                    Ok(Scalar::Other)
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    while a.next_entry::<Skip, Skip>()?.is_some() {}
                    Ok(Scalar::Other)
                }
            }
            d.deserialize_any(V)
        }
    }

    /// A whole line: `None` when it is not a JSON object; else its line
    /// facts and its `cwd`.
    pub struct Top<'a> {
        pub line: Option<(Fields<'a>, Option<String>)>,
    }

    #[derive(Default)]
    pub struct Fields<'a> {
        kind: Option<Cow<'a, str>>,
        timestamp: Option<Cow<'a, str>>,
        message: Option<Msg<'a>>,
        result_agent_id: Option<Cow<'a, str>>,
    }

    any_value!(Top<'de>, Top { line: None }, |a| {
        let mut f = Fields::default();
        let mut cwd = None;
        while let Some(k) = a.next_key::<Cow<'de, str>>()? {
            match k.as_ref() {
                "type" => f.kind = a.next_value::<Scalar>()?.str(),
                "timestamp" => f.timestamp = a.next_value::<Scalar>()?.str(),
                "cwd" => cwd = a.next_value::<Scalar>()?.str().map(Cow::into_owned),
                "message" => f.message = a.next_value::<MaybeMsg>()?.0,
                "toolUseResult" => f.result_agent_id = a.next_value::<AgentOf>()?.0,
                _ => {
                    a.next_value::<Skip>()?;
                }
            }
        }
        Ok(Top {
            line: Some((f, cwd)),
        })
    });

    #[derive(Default)]
    struct Msg<'a> {
        id: Option<Cow<'a, str>>,
        role: Option<Cow<'a, str>>,
        model: Option<Cow<'a, str>>,
        usage: Option<Usage>,
        content: Option<Content<'a>>,
    }

    struct MaybeMsg<'a>(Option<Msg<'a>>);

    any_value!(MaybeMsg<'de>, MaybeMsg(None), |a| {
        let mut m = Msg::default();
        while let Some(k) = a.next_key::<Cow<'de, str>>()? {
            match k.as_ref() {
                "id" => m.id = a.next_value::<Scalar>()?.str(),
                "role" => m.role = a.next_value::<Scalar>()?.str(),
                "model" => m.model = a.next_value::<Scalar>()?.str(),
                "usage" => m.usage = a.next_value::<MaybeUsage>()?.0,
                "content" => m.content = a.next_value::<MaybeContent>()?.0,
                _ => {
                    a.next_value::<Skip>()?;
                }
            }
        }
        Ok(MaybeMsg(Some(m)))
    });

    struct MaybeUsage<'a>(Option<Usage>, std::marker::PhantomData<&'a ()>);

    any_value!(MaybeUsage<'de>, MaybeUsage(None, Default::default()), |a| {
        let mut u = Usage::default();
        while let Some(k) = a.next_key::<Cow<'de, str>>()? {
            let slot = match k.as_ref() {
                "input_tokens" => &mut u.input,
                "output_tokens" => &mut u.output,
                "cache_creation_input_tokens" => &mut u.cache_creation_input,
                "cache_read_input_tokens" => &mut u.cache_read_input,
                _ => {
                    a.next_value::<Skip>()?;
                    continue;
                }
            };
            *slot = a.next_value::<Scalar>()?.count();
        }
        Ok(MaybeUsage(Some(u), Default::default()))
    });

    struct AgentOf<'a>(Option<Cow<'a, str>>);

    any_value!(AgentOf<'de>, AgentOf(None), |a| {
        let mut id = None;
        while let Some(k) = a.next_key::<Cow<'de, str>>()? {
            if k == "agentId" {
                id = a.next_value::<Scalar>()?.str();
            } else {
                a.next_value::<Skip>()?;
            }
        }
        Ok(AgentOf(id))
    });

    enum Content<'a> {
        Text(Cow<'a, str>),
        Blocks(Vec<Item<'a>>),
    }

    struct MaybeContent<'a>(Option<Content<'a>>);

    impl<'de> Deserialize<'de> for MaybeContent<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = MaybeContent<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                    Ok(MaybeContent(Some(Content::Text(Cow::Borrowed(v)))))
                }
                fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                    Ok(MaybeContent(Some(Content::Text(Cow::Owned(v.to_owned())))))
                }
                fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                    Ok(MaybeContent(Some(Content::Text(Cow::Owned(v)))))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                    Ok(MaybeContent(None))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                    Ok(MaybeContent(None))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                    Ok(MaybeContent(None))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                    Ok(MaybeContent(None))
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(MaybeContent(None))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut items = Vec::new();
                    while let Some(it) = a.next_element::<Item>()? {
                        items.push(it);
                    }
                    Ok(MaybeContent(Some(Content::Blocks(items))))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    while a.next_entry::<Skip, Skip>()?.is_some() {}
                    Ok(MaybeContent(None))
                }
            }
            d.deserialize_any(V)
        }
    }

    /// One content block's keys; `None` for an item that is not an object.
    #[derive(Default)]
    struct Block0<'a> {
        kind: Option<Cow<'a, str>>,
        text: Option<Cow<'a, str>>,
        id: Option<Cow<'a, str>>,
        name: Option<Cow<'a, str>>,
        tool_use_id: Option<Cow<'a, str>>,
        is_error: bool,
    }

    struct Item<'a>(Option<Block0<'a>>);

    any_value!(Item<'de>, Item(None), |a| {
        let mut b = Block0::default();
        while let Some(k) = a.next_key::<Cow<'de, str>>()? {
            match k.as_ref() {
                "type" => b.kind = a.next_value::<Scalar>()?.str(),
                "text" => b.text = a.next_value::<Scalar>()?.str(),
                "id" => b.id = a.next_value::<Scalar>()?.str(),
                "name" => b.name = a.next_value::<Scalar>()?.str(),
                "tool_use_id" => b.tool_use_id = a.next_value::<Scalar>()?.str(),
                "is_error" => b.is_error = matches!(a.next_value::<Scalar>()?, Scalar::Bool(true)),
                _ => {
                    a.next_value::<Skip>()?;
                }
            }
        }
        Ok(Item(Some(b)))
    });

    fn owned(s: Option<Cow<'_, str>>) -> String {
        s.map(Cow::into_owned).unwrap_or_default()
    }

    impl Fields<'_> {
        /// The [`Line`] [`super::parse_facts`] keeps (see there).
        pub fn into_line(self, index: usize) -> Line {
            let kind = owned(self.kind);
            let user = kind == "user";
            let m = self.message.unwrap_or_default();
            let blocks = match m.content {
                Some(Content::Text(t)) => vec![Block::Text(if user {
                    t.into_owned()
                } else {
                    String::new()
                })],
                Some(Content::Blocks(items)) => items
                    .into_iter()
                    .map(|it| {
                        let Some(b) = it.0 else {
                            return Block::Other(String::new());
                        };
                        match b.kind.as_deref().unwrap_or("") {
                            "text" if user => Block::Text(owned(b.text)),
                            "text" => Block::Text(String::new()),
                            "thinking" | "redacted_thinking" => Block::Thinking(String::new()),
                            "tool_use" => Block::ToolUse {
                                id: owned(b.id),
                                name: owned(b.name),
                                input: String::new(),
                            },
                            "tool_result" => Block::ToolResult {
                                tool_use_id: owned(b.tool_use_id),
                                text: String::new(),
                                is_error: b.is_error,
                            },
                            other => Block::Other(other.to_owned()),
                        }
                    })
                    .collect(),
                None => Vec::new(),
            };
            let some = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned);
            Line {
                index,
                kind,
                timestamp: some(self.timestamp),
                message_id: some(m.id).filter(|s| !s.is_empty()),
                role: some(m.role),
                model: some(m.model).filter(|s| !s.is_empty()),
                usage: m.usage,
                blocks,
                result_agent_id: some(self.result_agent_id),
                raw: String::new(),
            }
        }
    }
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
