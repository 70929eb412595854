//! Overview: `history list` as a history — one row per session with when
//! it ran, how long, its title (the first prompt, already redacted), size
//! and tokens, and its sub-agents as a tree.
//!
//! Owns: the filters (`--since`, `--until`, `--limit`, `--agent-type`, one
//! session) and the row shape. `list` reads the record summaries the
//! projection keeps (`index/summary/`), never a body; `stats` reads the
//! summaries and the record token tables (`index/tokens/`), never a body
//! (unless a token line is missing).
//!
//! Must never: write anything.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::clock::parse_rfc3339;
use crate::corpus::Corpus;
use crate::event::Event;
use crate::history;
use crate::reconstruct::{self, ReconstructError};
use crate::store;
use crate::summary::Summary;
use crate::telemetry::{self, TableInput, TokenTable};

/// Which sessions to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub session: Option<String>,
    /// Start time bounds, unix ns (inclusive since, exclusive until).
    pub since_ns: Option<u64>,
    pub until_ns: Option<u64>,
    pub limit: Option<usize>,
    pub agent_type: Option<String>,
}

/// `YYYY-MM-DD` (midnight UTC) or RFC 3339 → unix ns.
pub fn parse_when(s: &str) -> Option<u64> {
    parse_rfc3339(s).or_else(|| parse_rfc3339(&format!("{s}T00:00:00Z")))
}

/// A sub-agent under its parent.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    pub agent_id: String,
    pub agent_type: Option<String>,
    pub spawn_depth: u32,
    /// Nesting level in the tree (1 = spawned by the main thread).
    pub level: usize,
    pub turns: usize,
    pub tokens: u64,
    pub placed: bool,
}

/// One session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub session_id: String,
    pub started_at: Option<String>,
    pub duration_seconds: f64,
    pub title: Option<String>,
    pub records: usize,
    pub bytes: u64,
    pub tokens: u64,
    pub main_thread: bool,
    /// Where the session ran (the transcript's `cwd`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Depth-first: each agent follows its parent.
    pub agents: Vec<AgentRow>,
    /// Spilled tool outputs stored for the session (`tool-results/` files
    /// `history ingest` captured): counted in `records`, never agents.
    #[serde(skip_serializing_if = "is_zero")]
    pub tool_outputs: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One session's summaries, one per agent (the longest body, then the
/// newest capture, then the file name — as `reconstruct` chooses).
struct Group {
    session_id: String,
    records: usize,
    bytes: u64,
    chosen: Vec<Summary>,
    /// Spilled tool outputs stored for the session (in `records`, never
    /// in `chosen`).
    tool_outputs: usize,
}

impl Group {
    fn main(&self) -> Option<&Summary> {
        self.chosen.iter().find(|s| s.agent_id().is_none())
    }
    fn started_ns(&self) -> Option<u64> {
        self.chosen
            .iter()
            .filter_map(|s| s.started_at.as_deref().and_then(parse_rfc3339))
            .min()
    }
    fn ended_ns(&self) -> Option<u64> {
        self.chosen
            .iter()
            .filter_map(|s| s.ended_at.as_deref().and_then(parse_rfc3339))
            .max()
    }
    fn started_at(&self) -> Option<String> {
        self.chosen
            .iter()
            .filter_map(|s| s.started_at.clone())
            .min_by_key(|t| parse_rfc3339(t).unwrap_or(u64::MAX))
    }
    /// The turn at which `host` spawned `agent`, if its summary shows it.
    fn spawn_turn(host: &Summary, agent: &Summary) -> Option<usize> {
        let id = agent.agent_id()?;
        host.spawns
            .iter()
            .find(|sp| {
                agent.meta.lineage.spawn_tool_use_id.as_deref() == Some(sp.tool_use_id.as_str())
                    || sp.agent_id.as_deref() == Some(id)
            })
            .map(|sp| sp.turn)
    }
}

fn group(all: Vec<Summary>) -> Vec<Group> {
    let mut by_session: BTreeMap<String, Vec<Summary>> = BTreeMap::new();
    for s in all {
        by_session
            .entry(s.session_id().to_owned())
            .or_default()
            .push(s);
    }
    by_session
        .into_iter()
        .map(|(session_id, v)| {
            let records = v.len();
            let bytes = v.iter().map(|s| s.bytes).sum();
            // Spilled tool outputs sit beside the threads; they are not
            // threads (no turns, no tokens, never a sub-agent).
            let (outputs, v): (Vec<Summary>, Vec<Summary>) =
                v.into_iter().partition(|s| s.meta.lineage.is_tool_output());
            let mut best: BTreeMap<Option<String>, Summary> = BTreeMap::new();
            for s in v {
                let key = s.agent_id().map(str::to_owned);
                let better = |cur: &Summary| {
                    (s.bytes, s.meta.captured_at_ns, &s.file)
                        > (cur.bytes, cur.meta.captured_at_ns, &cur.file)
                };
                let replace = match best.get(&key) {
                    Some(cur) => better(cur),
                    None => true,
                };
                if replace {
                    best.insert(key, s);
                }
            }
            Group {
                session_id,
                records,
                bytes,
                chosen: best.into_values().collect(),
                tool_outputs: outputs.len(),
            }
        })
        .collect()
}

fn agent_row(s: &Summary, level: usize, placed: bool) -> AgentRow {
    AgentRow {
        agent_id: s.agent_id().unwrap_or("main").to_owned(),
        agent_type: s.meta.lineage.agent_type.clone(),
        spawn_depth: s.meta.lineage.spawn_depth,
        level,
        turns: s.turns,
        tokens: s.tokens,
        placed,
    }
}

/// The sub-agent tree: each agent under its host (its recorded parent, else
/// the main thread) when the host's summary shows the spawning call; the
/// others after the tree, level 1.
fn tree(g: &Group) -> Vec<AgentRow> {
    let agents: Vec<&Summary> = g.chosen.iter().filter(|s| s.agent_id().is_some()).collect();
    let host_of = |a: &Summary| -> Option<&Summary> {
        match a.meta.lineage.parent_agent_id.as_deref() {
            Some(p) => g.chosen.iter().find(|s| s.agent_id() == Some(p)),
            None => g.main(),
        }
    };
    // (host agent id or None for main) → [(turn, agent)]
    let mut children: BTreeMap<Option<String>, Vec<(usize, &Summary)>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for a in &agents {
        match host_of(a).and_then(|h| Group::spawn_turn(h, a).map(|t| (h, t))) {
            Some((h, t)) => children
                .entry(h.agent_id().map(str::to_owned))
                .or_default()
                .push((t, a)),
            None => unplaced.push(*a),
        }
    }
    for v in children.values_mut() {
        v.sort_by(|x, y| {
            (x.0, x.1.started_at.as_deref(), x.1.agent_id()).cmp(&(
                y.0,
                y.1.started_at.as_deref(),
                y.1.agent_id(),
            ))
        });
    }
    fn walk(
        children: &BTreeMap<Option<String>, Vec<(usize, &Summary)>>,
        host: Option<&str>,
        level: usize,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<AgentRow>,
    ) {
        let Some(kids) = children.get(&host.map(str::to_owned)) else {
            return;
        };
        for (_, k) in kids {
            let id = k.agent_id().unwrap_or_default().to_owned();
            if !seen.insert(id.clone()) {
                continue;
            }
            out.push(agent_row(k, level, true));
            walk(children, Some(&id), level + 1, seen, out);
        }
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    walk(&children, None, 1, &mut seen, &mut out);
    unplaced.sort_by(|x, y| {
        (
            x.meta.lineage.spawn_depth,
            x.started_at.as_deref(),
            x.agent_id(),
        )
            .cmp(&(
                y.meta.lineage.spawn_depth,
                y.started_at.as_deref(),
                y.agent_id(),
            ))
    });
    for a in unplaced {
        let id = a.agent_id().unwrap_or_default().to_owned();
        if seen.insert(id.clone()) {
            out.push(agent_row(a, 1, false));
            walk(&children, Some(&id), 2, &mut seen, &mut out);
        }
    }
    // Placed under a host that is itself in no tree (a cycle of parents).
    for a in agents {
        let id = a.agent_id().unwrap_or_default().to_owned();
        if seen.insert(id) {
            out.push(agent_row(a, 1, false));
        }
    }
    out
}

fn summarise(g: &Group) -> SessionRow {
    let duration_seconds = match (g.started_ns(), g.ended_ns()) {
        (Some(a), Some(b)) if b >= a => ((b - a) / 1_000_000_000) as f64,
        _ => 0.0,
    };
    let main = g.main();
    SessionRow {
        session_id: g.session_id.clone(),
        started_at: g.started_at(),
        duration_seconds,
        title: main.and_then(|m| m.title.clone()),
        records: g.records,
        bytes: g.bytes,
        tokens: g.chosen.iter().map(|s| s.tokens).sum(),
        main_thread: main.is_some(),
        cwd: g
            .chosen
            .iter()
            .filter(|s| s.cwd.is_some())
            .min_by_key(|s| s.agent_id().is_some())
            .and_then(|s| s.cwd.clone()),
        agents: tree(g),
        tool_outputs: g.tool_outputs,
    }
}

/// Sessions newest first (by start time), filtered. Reads the record
/// summaries only (`index/summary/`), never a record body.
pub fn sessions(corpus: &Corpus, f: &Filter) -> Result<Vec<SessionRow>, ReconstructError> {
    let all = history::summaries(corpus, f.session.as_deref())?;
    let mut rows = Vec::new();
    for g in group(all) {
        if let Some(ty) = &f.agent_type {
            if !g
                .chosen
                .iter()
                .any(|s| s.meta.lineage.agent_type.as_deref() == Some(ty.as_str()))
            {
                continue;
            }
        }
        let start = g.started_ns();
        if let Some(since) = f.since_ns {
            if start.is_none_or_lt(since) {
                continue;
            }
        }
        if let Some(until) = f.until_ns {
            if start.is_some_and(|t| t >= until) {
                continue;
            }
        }
        rows.push(summarise(&g));
    }
    rows.sort_by_cached_key(|r| {
        (
            std::cmp::Reverse(r.started_at.as_deref().and_then(parse_rfc3339).unwrap_or(0)),
            r.session_id.clone(),
        )
    });
    if let Some(n) = f.limit {
        rows.truncate(n);
    }
    Ok(rows)
}

/// `history list --json`: the records of the sessions [`sessions`] selects
/// (every filter, `--limit` counting sessions), each with its summary,
/// newest capture first (a session's main thread first when one session
/// is asked for). Reads the record summaries only.
pub fn records(
    corpus: &Corpus,
    f: &Filter,
) -> Result<Vec<history::ListedSummary>, ReconstructError> {
    let all = history::list_summaries(corpus, f.session.as_deref())?;
    let unfiltered =
        f.since_ns.is_none() && f.until_ns.is_none() && f.limit.is_none() && f.agent_type.is_none();
    if unfiltered {
        return Ok(all);
    }
    let keep: BTreeSet<String> = sessions(corpus, f)?
        .into_iter()
        .map(|r| r.session_id)
        .collect();
    Ok(all
        .into_iter()
        .filter(|l| keep.contains(&l.record.meta.lineage.session_id))
        .collect())
}

/// One repository of the store, for `--all-repos`.
pub struct Repo {
    pub root_sha: String,
    /// Its work-tree path when a transcript names it (the newest session's
    /// `cwd`), else the registry name, else the root commit.
    pub repository: String,
    pub kind: store::LaneKind,
    pub corpus: Corpus,
}

/// Every repository under `home` with a corpus, caught up, by name.
pub fn repos(home: &std::path::Path) -> Result<Vec<Repo>, ReconstructError> {
    let mut out = Vec::new();
    for sha in store::list_lanes(home).map_err(history::HistoryError::from)? {
        let Some(corpus) =
            Corpus::open_existing(home, &sha).map_err(history::HistoryError::from)?
        else {
            continue;
        };
        corpus.refresh().map_err(history::HistoryError::from)?;
        let cwd = history::summaries(&corpus, None)?
            .into_iter()
            .filter(|s| s.cwd.is_some())
            .max_by(|a, b| {
                (a.started_at.as_deref(), &a.file).cmp(&(b.started_at.as_deref(), &b.file))
            })
            .and_then(|s| s.cwd);
        // A directory lane is labelled with the directory it records.
        let kind = corpus.lane.kind();
        let directory = match kind {
            store::LaneKind::Directory => corpus.lane.directory().map(|d| d.directory),
            store::LaneKind::Repository => None,
        };
        let repository = directory
            .or(cwd)
            .or_else(|| store::repo_name(home, &sha))
            .unwrap_or_else(|| sha.clone());
        out.push(Repo {
            root_sha: sha,
            repository,
            kind,
            corpus,
        });
    }
    out.sort_by(|a, b| (&a.repository, &a.root_sha).cmp(&(&b.repository, &b.root_sha)));
    Ok(out)
}

trait Before {
    fn is_none_or_lt(&self, bound: u64) -> bool;
}

impl Before for Option<u64> {
    /// True when the start is unknown or before `bound`.
    fn is_none_or_lt(&self, bound: u64) -> bool {
        match self {
            Some(t) => *t < bound,
            None => true,
        }
    }
}

/// `history stats`: the repository's numbers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub sessions: usize,
    pub sessions_without_main_thread: usize,
    pub sub_agents: usize,
    /// Spilled tool outputs stored beside the sessions' threads (not
    /// sub-agents; no tokens of their own).
    #[serde(skip_serializing_if = "is_zero")]
    pub tool_outputs: usize,
    /// agent type → count (`unknown` when not recorded).
    pub sub_agents_by_type: BTreeMap<String, u64>,
    /// spawn depth → count (0 = unknown).
    pub sub_agents_by_depth: BTreeMap<u32, u64>,
    /// Once per API message id across every thread of a session.
    pub tokens: crate::telemetry::Tokens,
    pub naive_tokens: crate::telemetry::Tokens,
    pub api_responses: u64,
    pub usage_without_message_id: u64,
    pub tokens_by_model: BTreeMap<String, crate::telemetry::Tokens>,
    pub tokens_by_agent_type: BTreeMap<String, crate::telemetry::Tokens>,
    pub tokens_by_day: BTreeMap<String, crate::telemetry::Tokens>,
    pub subagent_tokens: crate::telemetry::Tokens,
    /// Sub-agent tokens / all tokens.
    pub subagent_share: f64,
    /// Journal events by kind (`staged` and `restaged` are hook fires that
    /// staged a transcript; `session_noted` a SessionStart).
    pub journal_events: BTreeMap<String, u64>,
    /// Captures whose drain extended a staged transcript (the source had
    /// grown past the staged bytes and the longer prefix was stored).
    pub extended: u64,
    /// Hook fires, as far as the journal's events show them.
    pub hook_fires: HookFires,
    /// Estimated cost of `tokens_by_model` (set with a pricing table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::pricing::Cost>,
    /// With `--all-repos`: each repository's name and session count.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions_by_repository: BTreeMap<String, usize>,
}

/// Hook fires the journal shows. A hook journals an event only when it
/// changes something, so these count the fires that did: a `Stop` or
/// `SessionEnd` that staged new main-thread bytes, a `SubagentStop` that
/// staged new sub-agent bytes or reported a missing transcript path, a
/// `SessionStart` (or the first staging hook) of a session not noted in
/// the last day. Not counted: fires that found the same bytes already
/// staged or stored, and every `UserPromptSubmit` — it journals nothing,
/// and a journal append there would more than double its latency (see
/// `commands/history.md`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HookFires {
    /// `Stop` / `SessionEnd` fires that staged new bytes of a main thread
    /// (`staged` and `restaged` events of a main-thread key).
    pub main_thread_staged: u64,
    /// `SubagentStop` fires that staged new bytes of a sub-agent.
    pub subagent_staged: u64,
    /// `SubagentStop` fires whose payload carried no transcript path
    /// (`subagent-gap-sighted`).
    pub subagent_without_transcript: u64,
    /// Sessions noted (`session-noted`: a `SessionStart`, or the first
    /// staging hook of a session; at most once a day per session).
    pub sessions_noted: u64,
    /// Of the staged fires above, blobs a hook killed mid-way left and a
    /// later verb adopted.
    pub adopted: u64,
}

/// Adds one repository's numbers to `into` (the share is recomputed).
pub fn merge(into: &mut Stats, s: &Stats) {
    into.sessions += s.sessions;
    into.sessions_without_main_thread += s.sessions_without_main_thread;
    into.sub_agents += s.sub_agents;
    into.tool_outputs += s.tool_outputs;
    for (k, v) in &s.sub_agents_by_type {
        *into.sub_agents_by_type.entry(k.clone()).or_insert(0) += v;
    }
    for (k, v) in &s.sub_agents_by_depth {
        *into.sub_agents_by_depth.entry(*k).or_insert(0) += v;
    }
    add(&mut into.tokens, &s.tokens);
    add(&mut into.naive_tokens, &s.naive_tokens);
    add(&mut into.subagent_tokens, &s.subagent_tokens);
    into.api_responses += s.api_responses;
    into.usage_without_message_id += s.usage_without_message_id;
    for (dst, src) in [
        (&mut into.tokens_by_model, &s.tokens_by_model),
        (&mut into.tokens_by_agent_type, &s.tokens_by_agent_type),
        (&mut into.tokens_by_day, &s.tokens_by_day),
    ] {
        for (k, v) in src {
            add(dst.entry(k.clone()).or_default(), v);
        }
    }
    into.extended += s.extended;
    let (h, o) = (&mut into.hook_fires, &s.hook_fires);
    h.main_thread_staged += o.main_thread_staged;
    h.subagent_staged += o.subagent_staged;
    h.subagent_without_transcript += o.subagent_without_transcript;
    h.sessions_noted += o.sessions_noted;
    h.adopted += o.adopted;
    for (k, v) in &s.journal_events {
        *into.journal_events.entry(k.clone()).or_insert(0) += v;
    }
    for (k, v) in &s.sessions_by_repository {
        *into.sessions_by_repository.entry(k.clone()).or_insert(0) += v;
    }
    into.subagent_share = if into.tokens.total == 0 {
        0.0
    } else {
        into.subagent_tokens.total as f64 / into.tokens.total as f64
    };
}

/// `history stats --all-repos`: every repository's numbers summed.
pub fn stats_all_repos(home: &std::path::Path, f: &Filter) -> Result<Stats, ReconstructError> {
    let mut st = Stats::default();
    for r in repos(home)? {
        let mut one = stats(&r.corpus, f)?;
        one.sessions_by_repository
            .insert(r.repository.clone(), one.sessions);
        merge(&mut st, &one);
    }
    Ok(st)
}

fn add(into: &mut crate::telemetry::Tokens, t: &crate::telemetry::Tokens) {
    into.input += t.input;
    into.output += t.output;
    into.cache_creation_input += t.cache_creation_input;
    into.cache_read_input += t.cache_read_input;
    into.total += t.total;
}

/// The order `reconstruct` gives a session's threads (and so the order
/// tokens are attributed in): main first; sub-agents by known depth (0 =
/// unknown, last), start, id.
fn thread_order(s: &Summary) -> (bool, u32, u64, String) {
    let d = s.meta.lineage.spawn_depth;
    (
        s.agent_id().is_some(),
        if d == 0 { u32::MAX } else { d },
        s.started_at
            .as_deref()
            .and_then(parse_rfc3339)
            .unwrap_or(u64::MAX),
        s.agent_id().unwrap_or("").to_owned(),
    )
}

/// Sums every session (start time within `f`'s bounds) of the repository,
/// from the projection alone: the record summaries choose each session's
/// threads (one record per agent, as `reconstruct` chooses) and the token
/// tables (`index/tokens/`) give their responses, added once per message
/// id across the session's threads. No body is read — unless a chosen
/// record has no token line (a projection fault skipped it), when that
/// session's bodies are read as `reconstruct` reads them.
pub fn stats(corpus: &Corpus, f: &Filter) -> Result<Stats, ReconstructError> {
    let mut tables: HashMap<String, TokenTable> = history::token_lines(corpus, None)?
        .into_iter()
        .map(|t| (t.file, t.table))
        .collect();
    let mut st = Stats::default();
    for g in group(history::summaries(corpus, None)?) {
        let start = g.started_ns();
        if f.since_ns.is_some_and(|b| start.is_none_or_lt(b))
            || f.until_ns.is_some_and(|b| start.is_some_and(|t| t >= b))
        {
            continue;
        }
        st.sessions += 1;
        st.tool_outputs += g.tool_outputs;
        if g.main().is_none() {
            st.sessions_without_main_thread += 1;
        }
        let mut threads: Vec<&Summary> = g.chosen.iter().collect();
        threads.sort_by_cached_key(|s| thread_order(s));
        for t in threads.iter().filter(|t| t.agent_id().is_some()) {
            st.sub_agents += 1;
            let ty = t
                .meta
                .lineage
                .agent_type
                .clone()
                .unwrap_or_else(|| "unknown".into());
            *st.sub_agents_by_type.entry(ty).or_insert(0) += 1;
            *st.sub_agents_by_depth
                .entry(t.meta.lineage.spawn_depth)
                .or_insert(0) += 1;
        }
        let report = if threads.iter().all(|t| tables.contains_key(&t.file)) {
            let inputs: Vec<TableInput<'_>> = threads
                .iter()
                .map(|t| TableInput {
                    agent_id: t.agent_id(),
                    agent_type: t.meta.lineage.agent_type.as_deref(),
                    table: &tables[&t.file],
                })
                .collect();
            telemetry::combine(&inputs)
        } else {
            reconstruct::load(corpus, &g.session_id)?.tokens
        };
        for t in &threads {
            tables.remove(&t.file);
        }
        add_report(&mut st, &report);
    }
    st.subagent_share = if st.tokens.total == 0 {
        0.0
    } else {
        st.subagent_tokens.total as f64 / st.tokens.total as f64
    };
    journal_counts(corpus, &mut st)?;
    Ok(st)
}

fn add_report(st: &mut Stats, r: &telemetry::Report) {
    add(&mut st.tokens, &r.tokens);
    add(&mut st.naive_tokens, &r.naive_tokens);
    add(&mut st.subagent_tokens, &r.subagent_tokens);
    st.api_responses += r.api_responses;
    st.usage_without_message_id += r.usage_without_message_id;
    for (k, v) in &r.by_model {
        add(st.tokens_by_model.entry(k.clone()).or_default(), v);
    }
    for (k, v) in &r.by_agent_type {
        add(st.tokens_by_agent_type.entry(k.clone()).or_default(), v);
    }
    for (k, v) in &r.by_day {
        add(st.tokens_by_day.entry(k.clone()).or_default(), v);
    }
}

/// Counts the repository's journal events by kind, the captures that
/// extended a staged transcript, and the hook fires the events show. Every event, whatever `--since` says (the
/// journal's times are capture times, not session times).
fn journal_counts(corpus: &Corpus, st: &mut Stats) -> Result<(), ReconstructError> {
    let frames = corpus
        .journal
        .read_from(&corpus.journal.start())
        .map_err(|e| history::HistoryError::from(crate::corpus::CorpusError::from(e)))?;
    // The stems staged for a sub-agent (a restage names only the stem).
    let mut agent_stems: std::collections::HashSet<String> = Default::default();
    for frame in frames {
        let frame =
            frame.map_err(|e| history::HistoryError::from(crate::corpus::CorpusError::from(e)))?;
        if frame.kind != abcd_journal::FrameKind::Event {
            continue;
        }
        let Ok(env) = crate::event::decode(&frame.payload) else {
            continue;
        };
        *st.journal_events
            .entry(env.event.name().to_owned())
            .or_insert(0) += 1;
        let h = &mut st.hook_fires;
        match &env.event {
            Event::Captured(c) if c.extended => st.extended += 1,
            Event::Staged(s) => {
                if s.agent_id.is_some() {
                    h.subagent_staged += 1;
                    agent_stems.insert(s.stem.clone());
                } else {
                    h.main_thread_staged += 1;
                }
                h.adopted += u64::from(s.adopted);
            }
            Event::Restaged(r) => {
                if agent_stems.contains(&r.stem) {
                    h.subagent_staged += 1;
                } else {
                    h.main_thread_staged += 1;
                }
                h.adopted += u64::from(r.adopted);
            }
            Event::SessionNoted(_) => h.sessions_noted += 1,
            Event::SubagentGapSighted(_) => h.subagent_without_transcript += 1,
            _ => {}
        }
    }
    Ok(())
}

/// Prices `st.tokens_by_model`.
pub fn price(st: &mut Stats, pricing: &crate::pricing::Pricing) {
    st.cost = Some(pricing.cost(&st.tokens_by_model));
}
