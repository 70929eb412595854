//! Reconstruct: a session as one artefact — the main thread plus every
//! sub-agent placed at its spawn point — and the telemetry beside it.
//!
//! Owns: choosing one record per (session, agent), grouping lines into
//! turns, placing sub-agents (rung 1 `record`: the stored
//! `spawn_tool_use_id` matched to a tool_use in the host thread; rung 2
//! `transcript`: a tool result in the host that names the agent id), joins,
//! the agent timeline, completeness, and the Markdown artefact and telemetry
//! JSON. The [`Session`] model is also what `export` renders.
//!
//! Must never: write into the store, or put anything in the output that
//! changes between two runs over the same records (no generation time, no
//! absolute path, no map iteration order).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::clock::parse_rfc3339;
use crate::corpus::Corpus;
use crate::history::{self, HistoryError, Listed};
use crate::telemetry::{self, Report, ThreadInput};
use crate::transcript::{self, Block, Line};

/// Telemetry / artefact schema.
pub const SCHEMA: u32 = 1;
/// Default cap of one tool input or result in the artefact.
pub const DEFAULT_MAX_BLOCK_BYTES: usize = 8 << 10;
pub use crate::summary::label;

#[derive(Debug, Error)]
pub enum ReconstructError {
    #[error("reconstruct: no record of session {session:?} in this repository's corpus; `abcd history list` shows what is stored")]
    NoRecords { session: String },
    #[error("reconstruct: --out {path}: {why} (pass an existing directory, or - for stdout)")]
    BadOut { path: String, why: String },
    #[error("reconstruct: writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// `full` renders every turn; `spine` keeps each sub-agent's first and last turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Full,
    Spine,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Spine => "spine",
        }
    }
}

/// One turn: a user line, or the assistant lines of one API message.
#[derive(Debug, Clone)]
pub struct Turn {
    /// 1-based within its thread.
    pub n: usize,
    pub role: String,
    pub model: Option<String>,
    pub timestamp: Option<String>,
    pub blocks: Vec<Block>,
    /// Line indexes (0-based) this turn was made of.
    pub lines: Vec<usize>,
}

/// Where a sub-agent was spawned and joined.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// Host thread: `None` = the main thread, else the parent agent id.
    pub host: Option<String>,
    pub tool_use_id: String,
    pub spawned_at_turn: usize,
    pub joined_at_turn: Option<usize>,
    /// `record` (stored spawn_tool_use_id) or `transcript` (a tool result naming the agent).
    pub placed_by: &'static str,
    /// Host turns between the spawn and the join.
    pub concurrent_turns: usize,
}

/// One thread of the session.
#[derive(Debug, Clone)]
pub struct Thread {
    pub record: Listed,
    /// A transcript stored in parts (`bigfile`): `record` is its first
    /// part, these the later ones, in order; the lines are all of theirs.
    pub parts: Vec<String>,
    pub lines: Vec<Line>,
    pub unparseable: usize,
    pub turns: Vec<Turn>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub placement: Option<Placement>,
    /// Why this agent has no placement, when it has none.
    pub unplaced_reason: Option<String>,
}

impl Thread {
    pub fn agent_id(&self) -> Option<&str> {
        self.record.meta.lineage.agent_id.as_deref()
    }
    /// `main` or the agent id.
    pub fn key(&self) -> &str {
        self.agent_id().unwrap_or(telemetry::MAIN)
    }
    pub fn is_main(&self) -> bool {
        self.agent_id().is_none()
    }
    pub fn wall_clock_seconds(&self) -> f64 {
        span_seconds(self.started_at.as_deref(), self.ended_at.as_deref())
    }
    pub fn title(&self) -> Option<String> {
        transcript::first_prompt(&transcript::Parsed {
            lines: self.lines.clone(),
            unparseable: 0,
        })
        .map(|t| crate::summary::title(&t))
    }
}

/// A record not used, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    pub record: String,
    pub reason: String,
}

/// A whole session, ready to render.
#[derive(Debug, Clone)]
pub struct Session {
    pub session_id: String,
    pub root_commit: String,
    /// Main thread first when present, then sub-agents in timeline order.
    pub threads: Vec<Thread>,
    pub records_found: usize,
    pub dropped: Vec<Dropped>,
    /// Record names of the session's spilled tool outputs (stored beside
    /// the threads, not part of them).
    pub tool_outputs: Vec<String>,
    pub tokens: Report,
}

impl Session {
    pub fn main(&self) -> Option<&Thread> {
        self.threads.first().filter(|t| t.is_main())
    }
    pub fn thread(&self, agent: Option<&str>) -> Option<&Thread> {
        self.threads.iter().find(|t| t.agent_id() == agent)
    }
    /// Sub-agents placed in `host` (None = main), by spawn turn.
    pub fn children_of(&self, host: Option<&str>) -> Vec<&Thread> {
        let mut v: Vec<&Thread> = self
            .threads
            .iter()
            .filter(|t| {
                t.placement
                    .as_ref()
                    .is_some_and(|p| p.host.as_deref() == host)
            })
            .collect();
        v.sort_by_key(|t| t.placement.as_ref().map(|p| p.spawned_at_turn));
        v
    }
    pub fn started_at(&self) -> Option<String> {
        self.threads
            .iter()
            .filter_map(|t| t.started_at.clone())
            .min_by_key(|s| parse_rfc3339(s).unwrap_or(u64::MAX))
    }
    pub fn ended_at(&self) -> Option<String> {
        self.threads
            .iter()
            .filter_map(|t| t.ended_at.clone())
            .max_by_key(|s| parse_rfc3339(s).unwrap_or(0))
    }
}

fn span_seconds(a: Option<&str>, b: Option<&str>) -> f64 {
    match (a.and_then(parse_rfc3339), b.and_then(parse_rfc3339)) {
        (Some(a), Some(b)) if b >= a => ((b - a) / 1_000_000) as f64 / 1000.0,
        _ => 0.0,
    }
}

fn group_turns(lines: &[Line]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut seen_tools: HashSet<String> = HashSet::new();
    let mut last_msg: Option<String> = None;
    for l in lines.iter().filter(|l| l.is_turn()) {
        let same = l.kind == "assistant"
            && l.message_id.is_some()
            && l.message_id == last_msg
            && turns.last().is_some_and(|t| t.role == "assistant");
        let blocks: Vec<Block> = l
            .blocks
            .iter()
            .filter(|b| match b {
                Block::ToolUse { id, .. } if !id.is_empty() => seen_tools.insert(id.clone()),
                _ => true,
            })
            .cloned()
            .collect();
        if same {
            if let Some(t) = turns.last_mut() {
                t.blocks.extend(blocks);
                t.lines.push(l.index);
                if l.model.is_some() {
                    t.model = l.model.clone();
                }
            }
        } else {
            turns.push(Turn {
                n: turns.len() + 1,
                role: l.kind.clone(),
                model: l.model.clone(),
                timestamp: l.timestamp.clone(),
                blocks,
                lines: vec![l.index],
            });
        }
        last_msg = if l.kind == "assistant" {
            l.message_id.clone()
        } else {
            None
        };
    }
    turns
}

fn time_bounds(lines: &[Line]) -> (Option<String>, Option<String>) {
    let mut ts: Vec<(u64, &str)> = lines
        .iter()
        .filter_map(|l| l.timestamp.as_deref())
        .filter_map(|t| parse_rfc3339(t).map(|n| (n, t)))
        .collect();
    ts.sort();
    (
        ts.first().map(|t| t.1.to_owned()),
        ts.last().map(|t| t.1.to_owned()),
    )
}

fn turn_of_line(turns: &[Turn], line: usize) -> Option<usize> {
    turns.iter().find(|t| t.lines.contains(&line)).map(|t| t.n)
}

/// Places `agent` in `host`: rung 1 then rung 2; the join.
fn place(host: &Thread, agent_id: &str, spawn_id: Option<&str>) -> Option<Placement> {
    let tool_use_line = |id: &str| {
        host.lines.iter().find(|l| {
            l.blocks
                .iter()
                .any(|b| matches!(b, Block::ToolUse { id: t, .. } if t == id))
        })
    };
    let (tool_id, placed_by) = match spawn_id.filter(|id| tool_use_line(id).is_some()) {
        Some(id) => (id.to_owned(), "record"),
        None => {
            let id = host.lines.iter().find_map(|l| {
                if !(l.result_agent_id.as_deref() == Some(agent_id) || l.raw.contains(agent_id)) {
                    return None;
                }
                l.blocks.iter().find_map(|b| match b {
                    Block::ToolResult { tool_use_id, .. }
                        if tool_use_line(tool_use_id).is_some() =>
                    {
                        Some(tool_use_id.clone())
                    }
                    _ => None,
                })
            })?;
            (id, "transcript")
        }
    };
    let spawn_line = tool_use_line(&tool_id)?.index;
    let spawned_at_turn = turn_of_line(&host.turns, spawn_line)?;
    let result_line = host
        .lines
        .iter()
        .filter(|l| {
            l.blocks.iter().any(
                |b| matches!(b, Block::ToolResult { tool_use_id, .. } if *tool_use_id == tool_id),
            )
        })
        .map(|l| l.index)
        .next_back();
    let joined_line = result_line.or_else(|| {
        host.lines
            .iter()
            .filter(|l| l.index > spawn_line && l.is_turn() && l.raw.contains(agent_id))
            .map(|l| l.index)
            .next_back()
    });
    let joined_at_turn = joined_line.and_then(|i| turn_of_line(&host.turns, i));
    let concurrent_turns = joined_at_turn
        .map(|j| j.saturating_sub(spawned_at_turn).saturating_sub(1))
        .unwrap_or(0);
    Some(Placement {
        host: host.agent_id().map(str::to_owned),
        tool_use_id: tool_id,
        spawned_at_turn,
        joined_at_turn,
        placed_by,
        concurrent_turns,
    })
}

/// A thread's record, its body, and the later parts joined into it.
type Joined = (Listed, Vec<u8>, Vec<String>);

/// One stream's parts by number.
type Run = BTreeMap<u32, (Listed, Vec<u8>)>;

/// Joins each transcript stored in parts (records with a `part` number,
/// `bigfile`) into one body, its first part's record standing for it and
/// the later parts' names beside it; other records pass unchanged. Of two
/// live records with the same part number (a grown file's last part whose
/// shorter predecessor is still listed), the longer, then newer, is kept
/// and the other reported.
fn join_parts(bodies: Vec<(Listed, Vec<u8>)>) -> (Vec<Joined>, Vec<Dropped>) {
    let mut out = Vec::new();
    // Per agent (None: the main thread): its parts by number.
    let mut runs: BTreeMap<Option<String>, Run> = BTreeMap::new();
    let mut dropped = Vec::new();
    for (l, b) in bodies {
        let Some(n) = l.meta.part else {
            out.push((l, b, Vec::new()));
            continue;
        };
        let run = runs.entry(l.meta.lineage.agent_id.clone()).or_default();
        match run.get(&n) {
            Some(cur)
                if (cur.1.len(), cur.0.meta.captured_at_ns) >= (b.len(), l.meta.captured_at_ns) =>
            {
                dropped.push(Dropped {
                    record: l.file.clone(),
                    reason: format!(
                        "superseded by {} (the same part, longer or newer)",
                        cur.0.file
                    ),
                });
            }
            _ => {
                if let Some((old, _)) = run.insert(n, (l, b)) {
                    let by = &run[&n].0.file;
                    dropped.push(Dropped {
                        record: old.file,
                        reason: format!("superseded by {by} (the same part, longer or newer)"),
                    });
                }
            }
        }
    }
    for (_, run) in runs {
        let mut parts = run.into_values();
        let Some((first, mut body)) = parts.next() else {
            continue;
        };
        let mut names = Vec::new();
        for (l, b) in parts {
            body.extend_from_slice(&b);
            names.push(l.file);
        }
        out.push((first, body, names));
    }
    (out, dropped)
}

/// Builds the model of `session_id` from its records.
pub fn load(corpus: &Corpus, session_id: &str) -> Result<Session, ReconstructError> {
    let bodies = history::session_bodies(corpus, session_id)?;
    build(session_id, bodies)
}

/// Builds the model from records already read (used by `load` and tests).
pub fn build(
    session_id: &str,
    bodies: Vec<(Listed, Vec<u8>)>,
) -> Result<Session, ReconstructError> {
    if bodies.is_empty() {
        return Err(ReconstructError::NoRecords {
            session: session_id.to_owned(),
        });
    }
    let records_found = bodies.len();
    // Spilled tool outputs are stored beside the threads: named, never
    // parsed as a transcript or drawn as a sub-agent.
    let (outputs, bodies): (Vec<_>, Vec<_>) = bodies
        .into_iter()
        .partition(|(l, _)| l.meta.lineage.is_tool_output());
    let mut tool_outputs: Vec<String> = outputs.into_iter().map(|(l, _)| l.file).collect();
    tool_outputs.sort();
    let (bodies, mut dropped) = join_parts(bodies);
    // One record per (session, agent): longest body, then newest capture,
    // then file name.
    let mut best: BTreeMap<Option<String>, Joined> = BTreeMap::new();
    for (l, b, parts) in bodies {
        let key = l.meta.lineage.agent_id.clone();
        let better = |cur: &Joined| {
            (b.len(), l.meta.captured_at_ns, &l.file)
                > (cur.1.len(), cur.0.meta.captured_at_ns, &cur.0.file)
        };
        match best.get(&key) {
            Some(cur) if !better(cur) => {
                dropped.extend(std::iter::once(&l.file).chain(&parts).map(|f| Dropped {
                    record: f.clone(),
                    reason: format!("superseded by {} (longer or newer)", cur.0.file),
                }))
            }
            Some(cur) => {
                dropped.extend(std::iter::once(&cur.0.file).chain(&cur.2).map(|f| Dropped {
                    record: f.clone(),
                    reason: format!("superseded by {} (longer or newer)", l.file),
                }));
                best.insert(key, (l, b, parts));
            }
            None => {
                best.insert(key, (l, b, parts));
            }
        }
    }
    dropped.sort_by(|a, b| a.record.cmp(&b.record));
    let root_commit = best
        .values()
        .next()
        .map(|(l, _, _)| l.meta.root_commit.clone())
        .unwrap_or_default();
    let mut threads: Vec<Thread> = best
        .into_values()
        .map(|(record, body, parts)| {
            let p = transcript::parse(&body);
            let turns = group_turns(&p.lines);
            let (started_at, ended_at) = time_bounds(&p.lines);
            Thread {
                record,
                parts,
                lines: p.lines,
                unparseable: p.unparseable,
                turns,
                started_at,
                ended_at,
                placement: None,
                unplaced_reason: None,
            }
        })
        .collect();
    // Main first; sub-agents by known depth (0 = unknown, last), start, id.
    threads.sort_by(|a, b| {
        let k = |t: &Thread| {
            let d = t.record.meta.lineage.spawn_depth;
            (
                !t.is_main(),
                if d == 0 { u32::MAX } else { d },
                t.started_at
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .unwrap_or(u64::MAX),
                t.agent_id().unwrap_or("").to_owned(),
            )
        };
        k(a).cmp(&k(b))
    });
    let ids: BTreeSet<String> = threads
        .iter()
        .filter_map(|t| t.agent_id().map(str::to_owned))
        .collect();
    for i in 0..threads.len() {
        let Some(agent) = threads[i].agent_id().map(str::to_owned) else {
            continue;
        };
        let parent = threads[i].record.meta.lineage.parent_agent_id.clone();
        let host_idx = match &parent {
            Some(p) if ids.contains(p) => threads.iter().position(|t| t.agent_id() == Some(p)),
            Some(_) => None,
            None => threads.iter().position(|t| t.is_main()),
        };
        let Some(h) = host_idx else {
            threads[i].unplaced_reason = Some(match &parent {
                Some(p) => format!("its parent agent {p} is not in this set"),
                None => "the main thread is not stored".to_owned(),
            });
            continue;
        };
        let spawn = threads[i].record.meta.lineage.spawn_tool_use_id.clone();
        let placed = place(&threads[h], &agent, spawn.as_deref());
        if placed.is_none() {
            threads[i].unplaced_reason = Some(format!(
                "no spawning tool call found in {}",
                threads[h].key()
            ));
        }
        threads[i].placement = placed;
    }
    let inputs: Vec<ThreadInput<'_>> = threads
        .iter()
        .map(|t| ThreadInput {
            agent_id: t.agent_id(),
            agent_type: t.record.meta.lineage.agent_type.as_deref(),
            lines: &t.lines,
        })
        .collect();
    let tokens = telemetry::count(&inputs);
    Ok(Session {
        session_id: session_id.to_owned(),
        root_commit,
        threads,
        records_found,
        dropped,
        tool_outputs,
        tokens,
    })
}

/// Rendering options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub mode: Mode,
    pub max_block_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Full,
            max_block_bytes: DEFAULT_MAX_BLOCK_BYTES,
        }
    }
}

/// Counts what the renderer elided.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Elided {
    pub elided_blocks: u64,
    pub elided_bytes: u64,
    pub omitted_turns: u64,
}

/// `s` cut to at most `max` bytes on a char boundary, with the count.
pub fn cap(s: &str, max: usize, el: &mut Elided) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let cut = s.len() - end;
    el.elided_blocks += 1;
    el.elided_bytes += cut as u64;
    format!("{}\n[… {cut} more bytes elided]", &s[..end])
}

fn fence(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

fn fenced(out: &mut String, info: &str, body: &str) {
    let f = fence(body);
    out.push_str(&format!("{f}{info}\n{body}\n{f}\n\n"));
}

fn agent_label(t: &Thread) -> String {
    let m = &t.record.meta;
    format!(
        "`{}` ({}, depth {})",
        label(t.key()),
        label(m.lineage.agent_type.as_deref().unwrap_or("type unknown")),
        if m.lineage.spawn_depth == 0 {
            "unknown".to_owned()
        } else {
            m.lineage.spawn_depth.to_string()
        }
    )
}

/// Renders one turn's blocks as Markdown.
pub fn render_turn_md(out: &mut String, t: &Turn, opts: Options, el: &mut Elided) {
    out.push_str(&format!(
        "### Turn {} — {} · {} · {}\n\n",
        t.n,
        t.role,
        label(t.model.as_deref().unwrap_or("-")),
        label(t.timestamp.as_deref().unwrap_or("-"))
    ));
    for b in &t.blocks {
        match b {
            Block::Text(s) => fenced(out, "text", s),
            Block::Thinking(s) if s.is_empty() => out.push_str("_(thinking, text not stored)_\n\n"),
            Block::Thinking(s) => fenced(out, "thinking", s),
            Block::ToolUse { id, name, input } => {
                out.push_str(&format!(
                    "**tool call** `{}` (`{}`, input {} bytes)\n\n",
                    label(name),
                    label(id),
                    input.len()
                ));
                fenced(out, "json", &cap(input, opts.max_block_bytes, el));
            }
            Block::ToolResult {
                tool_use_id,
                text,
                is_error,
            } => {
                out.push_str(&format!(
                    "**tool result**{} for `{}` ({} bytes)\n\n",
                    if *is_error { " (error)" } else { "" },
                    label(tool_use_id),
                    text.len()
                ));
                fenced(out, "text", &cap(text, opts.max_block_bytes, el));
            }
            Block::Other(k) => out.push_str(&format!("_({} block)_\n\n", label(k))),
        }
    }
}

fn render_thread_md(out: &mut String, s: &Session, t: &Thread, opts: Options, el: &mut Elided) {
    let children = s.children_of(t.agent_id());
    let keep = |n: usize| opts.mode == Mode::Full || t.is_main() || n == 1 || n == t.turns.len();
    let mut omitted = 0usize;
    for turn in &t.turns {
        if !keep(turn.n) {
            omitted += 1;
            el.omitted_turns += 1;
        } else {
            if omitted > 0 {
                out.push_str(&format!("_[{omitted} turn(s) omitted in spine mode]_\n\n"));
                omitted = 0;
            }
            render_turn_md(out, turn, opts, el);
        }
        for c in &children {
            let Some(p) = &c.placement else { continue };
            if p.spawned_at_turn == turn.n {
                out.push_str(&format!(
                    "> **[SPAWNED {}** via tool call `{}`, placed by {} — see “Agent `{}`” below**]**\n\n",
                    agent_label(c),
                    label(&p.tool_use_id),
                    p.placed_by,
                    label(c.key())
                ));
            }
            if p.joined_at_turn == Some(turn.n) {
                out.push_str(&format!("> **[JOINED {}]**\n\n", agent_label(c)));
            }
        }
    }
    if omitted > 0 {
        out.push_str(&format!("_[{omitted} turn(s) omitted in spine mode]_\n\n"));
    }
}

/// The telemetry file name beside `<session>.md`.
pub fn telemetry_name(session: &str) -> String {
    format!("{session}.telemetry.json")
}

/// The Markdown artefact. Deterministic: the same records give the same bytes.
pub fn render_markdown(s: &Session, opts: Options) -> (String, Elided) {
    let mut el = Elided::default();
    let mut out = String::new();
    let main = s.main();
    out.push_str(&format!("# Session {}\n\n", label(&s.session_id)));
    let turns: usize = s.threads.iter().map(|t| t.turns.len()).sum();
    let agents = s.threads.iter().filter(|t| !t.is_main()).count();
    out.push_str(&format!("- reconstruction schema: {SCHEMA}\n"));
    out.push_str(&format!("- session: `{}`\n", label(&s.session_id)));
    out.push_str(&format!("- root commit: `{}`\n", s.root_commit));
    out.push_str(&format!("- mode: {}\n", opts.mode.as_str()));
    out.push_str(&format!(
        "- main thread: {}\n",
        if let Some(m) = main.filter(|m| !m.parts.is_empty()) {
            format!("present, stored in {} parts", m.parts.len() + 1)
        } else if main.is_some() {
            "present".to_owned()
        } else {
            "ABSENT (sub-agents only)".to_owned()
        }
    ));
    out.push_str(&format!("- sub-agents: {agents}\n"));
    out.push_str(&format!(
        "- records used: {} of {}\n",
        s.threads.iter().map(|t| 1 + t.parts.len()).sum::<usize>(),
        s.records_found
    ));
    out.push_str(&format!(
        "- span: {} → {} ({} s)\n",
        s.started_at().unwrap_or_else(|| "-".into()),
        s.ended_at().unwrap_or_else(|| "-".into()),
        span_seconds(s.started_at().as_deref(), s.ended_at().as_deref())
    ));
    out.push_str(&format!("- turns: {turns}\n"));
    out.push_str(&format!(
        "- tokens: {} (input {}, output {}, cache creation {}, cache read {}) over {} API responses, counted once per message id; sub-agents {}\n",
        s.tokens.tokens.total,
        s.tokens.tokens.input,
        s.tokens.tokens.output,
        s.tokens.tokens.cache_creation_input,
        s.tokens.tokens.cache_read_input,
        s.tokens.api_responses,
        s.tokens.subagent_tokens.total
    ));
    out.push_str(&format!(
        "- telemetry: {}\n\n",
        telemetry_name(&s.session_id)
    ));
    out.push_str("## How to read\n\nThe main thread is rendered whole; where it spawned a sub-agent a `[SPAWNED …]` marker names it, and `[JOINED …]` marks where its result came back. Each sub-agent follows in its own section. Every piece of transcript text is fenced; redaction placeholders stand where a secret or home path was removed.\n\n");
    // Completeness.
    out.push_str("## Completeness\n\n");
    let c = completeness(s, &el);
    out.push_str(&format!(
        "- main thread present: {}\n- records found: {}, used: {}\n- agents without a spawn point: {}\n- agents without a join point: {}\n- agents without an agent type: {}\n- agents whose parent is not in this set: {}\n- unparseable lines: {}\n- usages without a message id (counted, not deduplicated): {}\n",
        c.main_thread_present,
        c.records_found,
        c.records_used,
        c.agents_without_spawn_point,
        c.agents_without_join_point,
        c.agents_without_agent_type,
        c.agents_whose_parent_is_not_in_this_set,
        c.lines_unparseable,
        c.usage_without_message_id
    ));
    for d in &s.dropped {
        out.push_str(&format!("- dropped `{}`: {}\n", d.record, label(&d.reason)));
    }
    for t in &s.tool_outputs {
        out.push_str(&format!(
            "- spilled tool output `{}`: stored beside the session, not a thread\n",
            label(t)
        ));
    }
    out.push('\n');
    // Timeline.
    out.push_str("## Agent timeline\n\n| agent | type | depth | parent | spawned | started | ended | joined | turns | tokens |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for t in &s.threads {
        let m = &t.record.meta;
        let p = t.placement.as_ref();
        let cell = |s: &str| label(s).replace('|', "\\|");
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(t.key()),
            cell(
                m.lineage
                    .agent_type
                    .as_deref()
                    .unwrap_or(if t.is_main() { "main" } else { "-" })
            ),
            m.lineage.spawn_depth,
            cell(
                m.lineage
                    .parent_agent_id
                    .as_deref()
                    .unwrap_or(if t.is_main() { "-" } else { "main" })
            ),
            p.map(|p| format!("turn {}", p.spawned_at_turn))
                .unwrap_or_else(|| "-".into()),
            cell(t.started_at.as_deref().unwrap_or("-")),
            cell(t.ended_at.as_deref().unwrap_or("-")),
            p.and_then(|p| p.joined_at_turn)
                .map(|j| format!("turn {j}"))
                .unwrap_or_else(|| "-".into()),
            t.turns.len(),
            s.tokens
                .by_thread
                .get(t.key())
                .map(|x| x.tokens.total)
                .unwrap_or(0)
        ));
    }
    out.push('\n');
    if let Some(m) = main {
        out.push_str("## Main thread\n\n");
        render_thread_md(&mut out, s, m, opts, &mut el);
    }
    for t in s.threads.iter().filter(|t| !t.is_main()) {
        if t.placement.is_none() {
            continue;
        }
        agent_section(&mut out, s, t, opts, &mut el);
    }
    let unplaced: Vec<&Thread> = s
        .threads
        .iter()
        .filter(|t| !t.is_main() && t.placement.is_none())
        .collect();
    if !unplaced.is_empty() {
        out.push_str("## Unattributed sub-agents\n\n");
        for t in unplaced {
            agent_section(&mut out, s, t, opts, &mut el);
        }
    }
    (out, el)
}

fn agent_section(out: &mut String, s: &Session, t: &Thread, opts: Options, el: &mut Elided) {
    let m = &t.record.meta;
    out.push_str(&format!("## Agent `{}`\n\n", label(t.key())));
    out.push_str(&format!(
        "- type: {}\n- depth: {}\n- parent: {}\n- record: {}\n",
        label(m.lineage.agent_type.as_deref().unwrap_or("unknown")),
        m.lineage.spawn_depth,
        label(
            m.lineage
                .parent_agent_id
                .as_deref()
                .unwrap_or("main thread")
        ),
        t.record.file
    ));
    if !t.parts.is_empty() {
        out.push_str(&format!(
            "- stored in {} parts; the later ones: {}\n",
            t.parts.len() + 1,
            t.parts.join(", ")
        ));
    }
    match &t.placement {
        Some(p) => {
            out.push_str(&format!(
                "- spawned at turn {} of {} by tool call `{}` (placed by {})\n",
                p.spawned_at_turn,
                label(p.host.as_deref().unwrap_or("the main thread")),
                label(&p.tool_use_id),
                p.placed_by
            ));
            match p.joined_at_turn {
                Some(j) => out.push_str(&format!("- joined at turn {j}\n")),
                None => out.push_str("- join point not found\n"),
            }
            if p.concurrent_turns > 0 {
                out.push_str(&format!(
                    "- CONCURRENCY: {} turn(s) of {} ran between the spawn and the join\n",
                    p.concurrent_turns,
                    label(p.host.as_deref().unwrap_or("the main thread"))
                ));
            }
        }
        None => out.push_str(&format!(
            "- not placed: {}\n",
            label(t.unplaced_reason.as_deref().unwrap_or("unknown"))
        )),
    }
    out.push('\n');
    render_thread_md(out, s, t, opts, el);
    let _ = s;
}

/// The completeness section, as data.
#[derive(Debug, Clone, Serialize)]
pub struct Completeness {
    pub main_thread_present: bool,
    pub records_found: usize,
    pub records_used: usize,
    pub dropped_records: Vec<Dropped>,
    pub agents_total: usize,
    pub agents_unattributed: usize,
    pub agents_without_spawn_point: usize,
    pub agents_without_join_point: usize,
    pub agents_without_agent_type: usize,
    pub agents_whose_parent_is_not_in_this_set: usize,
    pub lines_unparseable: usize,
    pub usage_without_message_id: u64,
    pub elided_blocks: u64,
    pub elided_bytes: u64,
    pub omitted_turns: u64,
}

fn completeness(s: &Session, el: &Elided) -> Completeness {
    let subs: Vec<&Thread> = s.threads.iter().filter(|t| !t.is_main()).collect();
    let ids: BTreeSet<&str> = subs.iter().filter_map(|t| t.agent_id()).collect();
    Completeness {
        main_thread_present: s.main().is_some(),
        records_found: s.records_found,
        records_used: s.threads.len(),
        dropped_records: s.dropped.clone(),
        agents_total: subs.len(),
        agents_unattributed: subs.iter().filter(|t| t.placement.is_none()).count(),
        agents_without_spawn_point: subs.iter().filter(|t| t.placement.is_none()).count(),
        agents_without_join_point: subs
            .iter()
            .filter(|t| {
                t.placement
                    .as_ref()
                    .and_then(|p| p.joined_at_turn)
                    .is_none()
            })
            .count(),
        agents_without_agent_type: subs
            .iter()
            .filter(|t| t.record.meta.lineage.agent_type.is_none())
            .count(),
        agents_whose_parent_is_not_in_this_set: subs
            .iter()
            .filter(|t| {
                t.record
                    .meta
                    .lineage
                    .parent_agent_id
                    .as_deref()
                    .is_some_and(|p| !ids.contains(p))
            })
            .count(),
        lines_unparseable: s.threads.iter().map(|t| t.unparseable).sum(),
        usage_without_message_id: s.tokens.usage_without_message_id,
        elided_blocks: el.elided_blocks,
        elided_bytes: el.elided_bytes,
        omitted_turns: el.omitted_turns,
    }
}

#[derive(Serialize)]
struct TurnCounts {
    user: usize,
    assistant: usize,
    total: usize,
}

#[derive(Serialize)]
struct AgentJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    is_main_thread: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_type: Option<String>,
    spawn_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    spawn_attribution: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lineage_source: Option<String>,
    record: String,
    /// The later parts of a transcript stored in parts, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    wall_clock_seconds: f64,
    turns: usize,
    tokens: telemetry::Tokens,
    tool_calls: BTreeMap<String, u64>,
    models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spawned_in: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spawned_at_turn: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    joined_at_turn: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spawn_tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    placed_by: Option<&'static str>,
    lines: usize,
    lines_unparseable: usize,
}

#[derive(Serialize)]
struct TelemetryJson<'a> {
    schema_version: u32,
    session_id: &'a str,
    root_commit: &'a str,
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    wall_clock_seconds: f64,
    turns: TurnCounts,
    tokens: &'a Report,
    tool_calls: BTreeMap<String, u64>,
    models: Vec<String>,
    agent_types: Vec<String>,
    agents: Vec<AgentJson>,
    completeness: Completeness,
}

fn tool_calls(t: &Thread) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for turn in &t.turns {
        for b in &turn.blocks {
            if let Block::ToolUse { name, .. } = b {
                *m.entry(name.clone()).or_insert(0) += 1;
            }
        }
    }
    m
}

fn models(t: &Thread) -> Vec<String> {
    let set: BTreeSet<String> = t
        .turns
        .iter()
        .filter_map(|x| x.model.clone())
        .filter(|m| m != "<synthetic>")
        .collect();
    set.into_iter().collect()
}

/// The telemetry JSON (pretty, newline-terminated). No generation time, so
/// two runs over the same records give the same bytes.
pub fn telemetry_json(s: &Session, opts: Options, el: &Elided) -> String {
    let mut all_tools: BTreeMap<String, u64> = BTreeMap::new();
    let mut all_models = BTreeSet::new();
    let mut types = BTreeSet::new();
    let mut user = 0;
    let mut assistant = 0;
    let agents = s
        .threads
        .iter()
        .map(|t| {
            let m = &t.record.meta;
            let tc = tool_calls(t);
            for (k, v) in &tc {
                *all_tools.entry(k.clone()).or_insert(0) += v;
            }
            let ms = models(t);
            all_models.extend(ms.iter().cloned());
            if let Some(ty) = &m.lineage.agent_type {
                types.insert(ty.clone());
            }
            user += t.turns.iter().filter(|x| x.role == "user").count();
            assistant += t.turns.iter().filter(|x| x.role == "assistant").count();
            let p = t.placement.as_ref();
            AgentJson {
                agent_id: m.lineage.agent_id.clone(),
                is_main_thread: t.is_main(),
                parent_agent_id: m.lineage.parent_agent_id.clone(),
                agent_type: m.lineage.agent_type.clone(),
                spawn_depth: m.lineage.spawn_depth,
                spawn_attribution: m.lineage.spawn_attribution.map(|a| a.as_str().to_owned()),
                lineage_source: m.lineage.lineage_source.map(|a| a.as_str().to_owned()),
                record: t.record.file.clone(),
                parts: t.parts.clone(),
                started_at: t.started_at.clone(),
                ended_at: t.ended_at.clone(),
                wall_clock_seconds: t.wall_clock_seconds(),
                turns: t.turns.len(),
                tokens: s
                    .tokens
                    .by_thread
                    .get(t.key())
                    .map(|x| x.tokens)
                    .unwrap_or_default(),
                tool_calls: tc,
                models: ms,
                spawned_in: p.map(|p| p.host.clone().unwrap_or_else(|| telemetry::MAIN.into())),
                spawned_at_turn: p.map(|p| p.spawned_at_turn),
                joined_at_turn: p.and_then(|p| p.joined_at_turn),
                spawn_tool_use_id: m.lineage.spawn_tool_use_id.clone(),
                placed_by: p.map(|p| p.placed_by),
                lines: t.lines.len() + t.unparseable,
                lines_unparseable: t.unparseable,
            }
        })
        .collect();
    let j = TelemetryJson {
        schema_version: SCHEMA,
        session_id: &s.session_id,
        root_commit: &s.root_commit,
        mode: opts.mode.as_str(),
        started_at: s.started_at(),
        ended_at: s.ended_at(),
        wall_clock_seconds: span_seconds(s.started_at().as_deref(), s.ended_at().as_deref()),
        turns: TurnCounts {
            user,
            assistant,
            total: user + assistant,
        },
        tokens: &s.tokens,
        tool_calls: all_tools,
        models: all_models.into_iter().collect(),
        agent_types: types.into_iter().collect(),
        agents,
        completeness: completeness(s, el),
    };
    let mut out = serde_json::to_string_pretty(&j)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    out.push('\n');
    out
}

/// What `reconstruct` produced.
#[derive(Debug, Clone, Serialize)]
pub struct Written {
    pub artefact: String,
    pub telemetry: String,
}

/// Writes `<session>.md` and `<session>.telemetry.json` into `dir` (which
/// must exist), mode 0644 (they are redacted; the user chose where).
pub fn write_into(dir: &Path, s: &Session, opts: Options) -> Result<Written, ReconstructError> {
    if !dir.is_dir() {
        return Err(ReconstructError::BadOut {
            path: dir.display().to_string(),
            why: "not an existing directory".into(),
        });
    }
    let (md, el) = render_markdown(s, opts);
    let tj = telemetry_json(s, opts, &el);
    let a = dir.join(format!("{}.md", s.session_id));
    let t = dir.join(telemetry_name(&s.session_id));
    for (p, bytes) in [(&a, md.as_bytes()), (&t, tj.as_bytes())] {
        write_public(p, bytes)?;
    }
    Ok(Written {
        artefact: a.display().to_string(),
        telemetry: t.display().to_string(),
    })
}

/// Writes a user-facing output file (0644), replacing it atomically.
pub fn write_public(p: &Path, bytes: &[u8]) -> Result<(), ReconstructError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| ReconstructError::Write {
        path: p.display().to_string(),
        source,
    };
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = p.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).map_err(err)?;
    std::fs::rename(&tmp, p).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// `--out -`: the artefact, then an HTML comment naming the telemetry file
/// and the telemetry in a fenced json block.
pub fn to_stdout(s: &Session, opts: Options) -> String {
    let (mut md, el) = render_markdown(s, opts);
    let tj = telemetry_json(s, opts, &el);
    md.push_str(&format!(
        "<!-- telemetry: {} -->\n",
        telemetry_name(&s.session_id)
    ));
    fenced(&mut md, "json", tj.trim_end());
    md
}

/// One record's body as readable text (the Markdown export's turn renderer),
/// for `history show`. Tool inputs and results are capped at
/// [`DEFAULT_MAX_BLOCK_BYTES`].
pub fn render_body(body: &[u8]) -> String {
    let p = transcript::parse(body);
    let mut out = String::new();
    let mut el = Elided::default();
    let opts = Options::default();
    for t in group_turns(&p.lines) {
        render_turn_md(&mut out, &t, opts, &mut el);
    }
    if p.unparseable > 0 {
        out.push_str(&format!(
            "_[{} line(s) were not JSON and are not shown; --raw prints the stored JSONL]_\n",
            p.unparseable
        ));
    }
    out
}
