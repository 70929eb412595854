//! Overview: `history list` as a history — one row per session with when
//! it ran, how long, its title (the first prompt, already redacted), size
//! and tokens, and its sub-agents as a tree.
//!
//! Owns: the filters (`--since`, `--until`, `--limit`, `--agent-type`, one
//! session) and the row shape. Reads every record of each session it shows
//! (titles and tokens are in the bodies), through `reconstruct::load`.
//!
//! Must never: write anything.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock::parse_rfc3339;
use crate::corpus::Corpus;
use crate::history;
use crate::reconstruct::{self, ReconstructError, Session};

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
    /// Depth-first: each agent follows its parent.
    pub agents: Vec<AgentRow>,
}

fn walk(
    s: &Session,
    host: Option<&str>,
    level: usize,
    seen: &mut BTreeSet<String>,
    out: &mut Vec<AgentRow>,
) {
    for k in s.children_of(host) {
        let id = k.key().to_owned();
        if !seen.insert(id.clone()) {
            continue;
        }
        out.push(row(s, k, level, true));
        walk(s, k.agent_id(), level + 1, seen, out);
    }
}

fn row(s: &Session, t: &reconstruct::Thread, level: usize, placed: bool) -> AgentRow {
    AgentRow {
        agent_id: t.key().to_owned(),
        agent_type: t.record.meta.agent_type.clone(),
        spawn_depth: t.record.meta.spawn_depth,
        level,
        turns: t.turns.len(),
        tokens: s
            .tokens
            .by_thread
            .get(t.key())
            .map(|x| x.tokens.total)
            .unwrap_or(0),
        placed,
    }
}

fn summarise(s: &Session, bytes: u64) -> SessionRow {
    let mut agents = Vec::new();
    let mut seen = BTreeSet::new();
    walk(s, None, 1, &mut seen, &mut agents);
    // Sub-agents not placed in the tree: listed after it, level 1.
    for t in s.threads.iter().filter(|t| !t.is_main()) {
        if !seen.contains(t.key()) {
            seen.insert(t.key().to_owned());
            agents.push(row(s, t, 1, false));
            walk(s, t.agent_id(), 2, &mut seen, &mut agents);
        }
    }
    let started = s.started_at();
    let ended = s.ended_at();
    let duration_seconds = match (
        started.as_deref().and_then(parse_rfc3339),
        ended.as_deref().and_then(parse_rfc3339),
    ) {
        (Some(a), Some(b)) if b >= a => ((b - a) / 1_000_000_000) as f64,
        _ => 0.0,
    };
    SessionRow {
        session_id: s.session_id.clone(),
        started_at: started,
        duration_seconds,
        title: s.main().and_then(reconstruct::Thread::title),
        records: s.records_found,
        bytes,
        tokens: s.tokens.tokens.total,
        main_thread: s.main().is_some(),
        agents,
    }
}

/// Sessions newest first (by start time), filtered.
pub fn sessions(corpus: &Corpus, f: &Filter) -> Result<Vec<SessionRow>, ReconstructError> {
    let listed = match &f.session {
        Some(s) => history::list_session(corpus, s)?,
        None => history::list(corpus)?,
    };
    let mut ids: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for l in &listed {
        if seen.insert(l.meta.session_id.clone()) {
            ids.push(l.meta.session_id.clone());
        }
    }
    let mut rows = Vec::new();
    for id in ids {
        let bodies = history::session_bodies(corpus, &id)?;
        let bytes = bodies.iter().map(|(_, b)| b.len() as u64).sum();
        let s = reconstruct::build(&id, bodies)?;
        if let Some(ty) = &f.agent_type {
            if !s
                .threads
                .iter()
                .any(|t| t.record.meta.agent_type.as_deref() == Some(ty.as_str()))
            {
                continue;
            }
        }
        let start = s.started_at().as_deref().and_then(parse_rfc3339);
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
        rows.push(summarise(&s, bytes));
    }
    rows.sort_by(|a, b| {
        let k = |r: &SessionRow| r.started_at.as_deref().and_then(parse_rfc3339).unwrap_or(0);
        k(b).cmp(&k(a))
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    if let Some(n) = f.limit {
        rows.truncate(n);
    }
    Ok(rows)
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
    /// agent type → count (`unknown` when not recorded).
    pub sub_agents_by_type: std::collections::BTreeMap<String, u64>,
    /// spawn depth → count (0 = unknown).
    pub sub_agents_by_depth: std::collections::BTreeMap<u32, u64>,
    /// Once per API message id across every thread of a session.
    pub tokens: crate::telemetry::Tokens,
    pub naive_tokens: crate::telemetry::Tokens,
    pub api_responses: u64,
    pub usage_without_message_id: u64,
    pub tokens_by_model: std::collections::BTreeMap<String, crate::telemetry::Tokens>,
    pub tokens_by_agent_type: std::collections::BTreeMap<String, crate::telemetry::Tokens>,
    pub tokens_by_day: std::collections::BTreeMap<String, crate::telemetry::Tokens>,
    pub subagent_tokens: crate::telemetry::Tokens,
    /// Sub-agent tokens / all tokens.
    pub subagent_share: f64,
}

fn add(into: &mut crate::telemetry::Tokens, t: &crate::telemetry::Tokens) {
    into.input += t.input;
    into.output += t.output;
    into.cache_creation_input += t.cache_creation_input;
    into.cache_read_input += t.cache_read_input;
    into.total += t.total;
}

/// Sums every session (start time within `f`'s bounds) of the repository.
pub fn stats(corpus: &Corpus, f: &Filter) -> Result<Stats, ReconstructError> {
    let mut ids = BTreeSet::new();
    for l in history::list(corpus)? {
        ids.insert(l.meta.session_id);
    }
    let mut st = Stats::default();
    for id in ids {
        let s = reconstruct::load(corpus, &id)?;
        let start = s.started_at().as_deref().and_then(parse_rfc3339);
        if f.since_ns.is_some_and(|b| start.is_none_or_lt(b))
            || f.until_ns.is_some_and(|b| start.is_some_and(|t| t >= b))
        {
            continue;
        }
        st.sessions += 1;
        if s.main().is_none() {
            st.sessions_without_main_thread += 1;
        }
        for t in s.threads.iter().filter(|t| !t.is_main()) {
            st.sub_agents += 1;
            let ty = t
                .record
                .meta
                .agent_type
                .clone()
                .unwrap_or_else(|| "unknown".into());
            *st.sub_agents_by_type.entry(ty).or_insert(0) += 1;
            *st.sub_agents_by_depth
                .entry(t.record.meta.spawn_depth)
                .or_insert(0) += 1;
        }
        let r = &s.tokens;
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
    st.subagent_share = if st.tokens.total == 0 {
        0.0
    } else {
        st.subagent_tokens.total as f64 / st.tokens.total as f64
    };
    Ok(st)
}
