//! The hook verbs Claude Code runs: `abcd hook session-start|session-end|
//! stop|subagent-stop|user-prompt-submit`.
//!
//! Owns: turning one harness payload into stage / note / drain calls and
//! explaining the result on stderr.
//!
//! Invariants (each is a test):
//! - Every path exits 0: SubagentStop's exit 2 would block the agent, and no
//!   capture failure is worth that. Failures are explained on stderr.
//! - Nothing on stdout (SessionStart and UserPromptSubmit stdout is injected
//!   into the model's context); `--json` prints exactly one result line.
//! - Staging hooks never redact; only session-start and user-prompt-submit
//!   drain, within their budgets.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::clock;
use crate::corpus::Corpus;
use crate::drain::{self, Budget, DrainReport};
use crate::hook::payload::{self, HookPayload};
use crate::lane_move;
use crate::lineage::{self, Lineage, LineageSource, SidecarOutcome, SpawnAttribution};
use crate::repo;
use crate::stage::{self, StageOutcome};
use crate::store;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookVerb {
    SessionStart,
    SessionEnd,
    Stop,
    SubagentStop,
    UserPromptSubmit,
}

impl HookVerb {
    pub fn name(self) -> &'static str {
        match self {
            HookVerb::SessionStart => "session-start",
            HookVerb::SessionEnd => "session-end",
            HookVerb::Stop => "stop",
            HookVerb::SubagentStop => "subagent-stop",
            HookVerb::UserPromptSubmit => "user-prompt-submit",
        }
    }
}

/// The one line `--json` prints.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HookResult {
    pub hook: String,
    /// staged | restaged | unchanged | already-stored | not-captured |
    /// noted | drained | nothing-to-do
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_sha: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_via: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_attribution: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainSummary>,
    /// Spilled tool outputs of the session staged by this hook (Stop,
    /// SessionEnd); absent when there were none new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_outputs_staged: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl HookResult {
    /// What a hook that captured nothing reports.
    pub fn not_captured(verb: HookVerb) -> HookResult {
        HookResult {
            hook: verb.name().to_owned(),
            outcome: "not-captured".into(),
            ..HookResult::default()
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DrainSummary {
    pub captured: usize,
    pub already_stored: usize,
    pub failed: usize,
    pub quarantined: usize,
    pub remaining: usize,
    pub overdue: usize,
    pub extended: usize,
}

impl From<&DrainReport> for DrainSummary {
    fn from(r: &DrainReport) -> Self {
        DrainSummary {
            captured: r.captured.len(),
            already_stored: r.already_stored.len(),
            failed: r.failed.len(),
            quarantined: r.failed.iter().filter(|f| f.quarantined).count(),
            remaining: r.remaining,
            overdue: r.overdue,
            extended: r.extended,
        }
    }
}

struct Ctx<'a> {
    err: &'a mut dyn Write,
    result: HookResult,
}

impl Ctx<'_> {
    fn say(&mut self, msg: impl AsRef<str>) {
        let msg = crate::render::sanitize(msg.as_ref());
        let _ = writeln!(self.err, "abcd {}: {}", self.result.hook, msg);
    }
    fn warn(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        self.say(&msg);
        self.result.warnings.push(crate::render::sanitize(&msg));
    }
}

/// Runs a hook verb over a payload. Never fails: the result says what
/// happened and stderr explains it.
pub fn run(verb: HookVerb, stdin: &[u8], err: &mut dyn Write) -> HookResult {
    let mut ctx = Ctx {
        err,
        result: HookResult::not_captured(verb),
    };
    let payload = match HookPayload::parse(stdin) {
        Ok(p) => p,
        Err(e) => {
            ctx.warn(format!("unreadable hook payload ({e}); capturing nothing"));
            return ctx.result;
        }
    };
    // Every id the payload carries is checked before anything is opened,
    // written or journaled: one line naming the field and the rule, then
    // nothing at all (no lane, blob, event, note or gap marker).
    if let Err(e) = check_ids(&payload) {
        ctx.warn(format!("{e}; capturing nothing"));
        return ctx.result;
    }
    ctx.result.session_id = payload.session_id.clone();
    let home = match store::abcd_home() {
        Ok(h) => h,
        Err(e) => {
            ctx.warn(format!("{e}; capturing nothing"));
            return ctx.result;
        }
    };
    match verb {
        HookVerb::SubagentStop => subagent_stop(&mut ctx, &home, &payload),
        HookVerb::SessionEnd | HookVerb::Stop => main_thread_stop(&mut ctx, &home, &payload),
        HookVerb::SessionStart => session_start(&mut ctx, &home, &payload),
        HookVerb::UserPromptSubmit => prompt_drain(&mut ctx, &home, &payload),
    }
    ctx.result
}

/// The identifier rule ([`lineage::check_id`]: `[A-Za-z0-9._-]`, not `.`
/// or `..`, at most [`lineage::MAX_ID_BYTES`] bytes) on every id a payload
/// may carry, whatever the verb: `session_id` and `agent_id` name files and
/// index keys, so a bad one refuses the whole payload (a sub-agent without
/// its id would collide with the main thread; a session without its id
/// has nowhere to go). The harness sidecar's `parentAgentId` and
/// `toolUseId` are decorative lineage and are dropped instead when bad
/// (`lineage::parse_harness_sidecar`), so they never cost the transcript.
fn check_ids(p: &HookPayload) -> Result<(), lineage::LineageError> {
    lineage::check_id("session_id", p.session_id.as_deref())?;
    lineage::check_id("agent_id", p.agent_id.as_deref())?;
    lineage::check_id_not_secret("session_id", p.session_id.as_deref())?;
    lineage::check_id_not_secret("agent_id", p.agent_id.as_deref())
}

fn cwd_of(p: &HookPayload) -> Option<PathBuf> {
    match p.cwd.as_deref() {
        Some(c) if !c.is_empty() => Some(PathBuf::from(c)),
        _ => std::env::current_dir().ok(),
    }
}

/// A store resolved for a payload: via its cwd (with the repo root, which
/// the drain needs for configuration), or via the session notes.
struct Resolved {
    corpus: Corpus,
    via: &'static str,
    /// Resolved through the cwd: what it resolved to.
    info: Option<repo::RepoInfo>,
}

impl Resolved {
    /// Notes the session in a store found through the cwd, once the payload
    /// has proven itself (its transcript was read, or it reported a
    /// harness gap): a junk payload journals nothing.
    fn note(&self, ctx: &mut Ctx<'_>, session_id: &str) {
        if self.via == "cwd" {
            note_session(ctx, &self.corpus, session_id);
        }
    }

    /// After this hook's own transcript is staged: a repository lane takes
    /// in the directory lanes waiting inside it (a move of many records
    /// must never cost the hook its capture); a directory lane is
    /// registered again if a move ran meanwhile (one stat otherwise).
    fn move_waiting(&self, ctx: &mut Ctx<'_>, home: &Path) {
        if let Some(info) = &self.info {
            settle(ctx, home, info, &self.corpus);
        }
    }
}

fn resolve(ctx: &mut Ctx<'_>, home: &Path, p: &HookPayload, session_id: &str) -> Option<Resolved> {
    let mut cwd_why = String::from("no cwd");
    if let Some(cwd) = cwd_of(p) {
        match repo::resolve_lane(&cwd, home) {
            Ok(info) => match Corpus::open_for_hook(home, &info.root_sha) {
                Ok(corpus) => {
                    ctx.result.root_sha = Some(info.root_sha.clone());
                    ctx.result.resolved_via = Some("cwd".into());
                    // A directory lane is named before anything enters it
                    // (cheap once done: one small read and one stat).
                    if info.kind == store::LaneKind::Directory {
                        settle(ctx, home, &info, &corpus);
                    }
                    return Some(Resolved {
                        corpus,
                        via: "cwd",
                        info: Some(info),
                    });
                }
                Err(e) => {
                    ctx.warn(format!("the transcript store could not be opened ({e})"));
                    return None;
                }
            },
            Err(e) => cwd_why = e.to_string(),
        }
    }
    match store::session_store(home, session_id) {
        Ok(sha) => match Corpus::open_for_hook(home, &sha) {
            Ok(corpus) => {
                ctx.result.root_sha = Some(sha);
                ctx.result.resolved_via = Some("session".into());
                Some(Resolved {
                    corpus,
                    via: "session",
                    info: None,
                })
            }
            Err(e) => {
                ctx.warn(format!("the transcript store could not be opened ({e})"));
                None
            }
        },
        Err(e) => {
            ctx.warn(format!(
                "cannot resolve the repository: the payload's cwd did not resolve ({cwd_why}) and the session notes did not answer ({e}); staging nothing"
            ));
            None
        }
    }
}

/// Names a directory lane, or moves the directory lanes waiting inside a
/// repository that has a commit now ([`lane_move::settle`]). A failure is
/// reported and costs nothing else: the capture goes on, and the next hook
/// or verb retries the move.
fn settle(ctx: &mut Ctx<'_>, home: &Path, info: &repo::RepoInfo, corpus: &Corpus) {
    match lane_move::settle(home, info, corpus) {
        Ok(moves) => {
            for m in moves {
                ctx.say(format!(
                    "moved {} record(s), {} staged transcript(s) and {} session note(s) from the directory lane {} into this repository's lane",
                    m.records, m.staged, m.sessions, m.from
                ));
                for f in &m.failed {
                    ctx.warn(format!("directory lane {}: {f}", m.from));
                }
            }
        }
        Err(e) => ctx.warn(format!(
            "the directory lane could not be settled ({e}); the next hook or `abcd history list` retries"
        )),
    }
}

/// Notes the session in this store (see [`stage::note_session`]).
fn note_session(ctx: &mut Ctx<'_>, corpus: &Corpus, session_id: &str) {
    if !lineage::is_valid_id(session_id) {
        return;
    }
    match stage::note_session(corpus, session_id, clock::now_unix_ns()) {
        Ok(_) => {}
        Err(e) if e.is_unprojected() => ctx.warn(format!("noted the session; warning: {e}")),
        Err(e) => ctx.warn(format!("could not note the session ({e})")),
    }
}

fn valid_session(ctx: &mut Ctx<'_>, p: &HookPayload) -> Option<String> {
    match p.session_id.as_deref() {
        Some(s) if lineage::is_valid_id(s) => Some(s.to_owned()),
        Some(_) => {
            ctx.warn("the payload's session_id is not a valid identifier; capturing nothing");
            None
        }
        None => {
            ctx.warn("the payload carries no session_id; capturing nothing");
            None
        }
    }
}

fn report_stage(ctx: &mut Ctx<'_>, what: &str, outcome: Result<StageOutcome, stage::StageError>) {
    match outcome {
        Ok(StageOutcome::Staged { bytes, .. }) => {
            ctx.result.outcome = "staged".into();
            ctx.result.bytes = Some(bytes);
            ctx.say(format!(
                "staged {what} ({bytes} bytes); the next drain redacts and stores it"
            ));
        }
        Ok(StageOutcome::Restaged {
            bytes,
            replaced_bytes,
            ..
        }) => {
            ctx.result.outcome = "restaged".into();
            ctx.result.bytes = Some(bytes);
            ctx.say(format!(
                "re-staged {what} ({bytes} bytes), replacing {replaced_bytes} stale bytes; the next drain redacts and stores it"
            ));
        }
        Ok(StageOutcome::Unchanged { bytes, .. }) => {
            ctx.result.outcome = "unchanged".into();
            ctx.result.bytes = Some(bytes);
            ctx.say(format!(
                "{what} already staged with identical bytes (no-op)"
            ));
        }
        Ok(StageOutcome::AlreadyStored { bytes, record }) => {
            ctx.result.outcome = "already-stored".into();
            ctx.result.bytes = Some(bytes);
            ctx.say(format!("{what} is already stored as {record} (no-op)"));
        }
        // Journaled, so staged: the projections catch up later.
        Err(e) if e.is_unprojected() => {
            ctx.result.outcome = "staged".into();
            ctx.warn(format!(
                "staged {what}; the next drain redacts and stores it. Warning: {e}"
            ));
        }
        Err(e) if e.is_spooled() => {
            ctx.result.outcome = "spooled".into();
            ctx.warn(format!(
                "{what}: the journal is damaged, so the event was spooled and the bytes kept in staging; nothing is lost ({e})"
            ));
        }
        Err(e) => ctx.warn(format!("staging failed ({e}); {what} was not captured")),
    }
}

fn subagent_stop(ctx: &mut Ctx<'_>, home: &Path, p: &HookPayload) {
    let Some(session_id) = valid_session(ctx, p) else {
        return;
    };
    let agent_id = match p.agent_id.as_deref() {
        Some(a) if lineage::is_valid_id(a) => a.to_owned(),
        Some(_) => {
            ctx.warn("the payload's agent_id is not a valid identifier; staging nothing (it would collide with the session's own transcript)");
            return;
        }
        None => {
            ctx.warn("the payload carries no agent_id; staging nothing (it would collide with the session's own transcript)");
            return;
        }
    };
    ctx.result.agent_id = Some(agent_id.clone());
    let Some(resolved) = resolve(ctx, home, p, &session_id) else {
        return;
    };
    let Some(path) = p.agent_transcript_path.as_deref().filter(|s| !s.is_empty()) else {
        // Journaled as one of the harness's own event names, never as
        // payload text (no externally supplied byte enters the journal).
        const KNOWN: [&str; 5] = [
            "SubagentStop",
            "Stop",
            "SessionEnd",
            "SessionStart",
            "UserPromptSubmit",
        ];
        let event = p
            .hook_event_name
            .as_deref()
            .and_then(|e| KNOWN.into_iter().find(|k| *k == e))
            .unwrap_or("SubagentStop")
            .to_owned();
        resolved.note(ctx, &session_id);
        match stage::sight_gap(&resolved.corpus, event, clock::now_unix_ns()) {
            Ok(()) => {}
            Err(e) if e.is_unprojected() => ctx.warn(format!(
                "recorded the missing-transcript marker; warning: {e}"
            )),
            Err(e) => ctx.warn(format!(
                "could not record the missing-transcript marker ({e})"
            )),
        }
        ctx.warn("this harness fired SubagentStop with no agent_transcript_path, so no sub-agent transcript can be captured; `abcd history staged` reports this");
        return;
    };
    // The settle loop (payload::SETTLE_ATTEMPTS × SETTLE_PAUSE) runs here,
    // outside any lock. Each attempt copies the transcript into a temporary
    // blob while its last line is checked; an unsettled copy is replaced
    // by the next attempt's (its blob removed).
    let copy = payload::settle(
        payload::SETTLE_ATTEMPTS,
        payload::SETTLE_PAUSE,
        &mut std::thread::sleep,
        |tail| {
            stage::snapshot_file(
                &resolved.corpus,
                &session_id,
                Some(&agent_id),
                path,
                &mut |c| tail.feed(c),
            )
        },
    );
    let (snap, settled) = match copy {
        Ok(x) => x,
        Err(e) => {
            ctx.warn(format!(
                "the sub-agent transcript could not be staged ({e}); nothing was staged{}",
                over_cap_hint(&e)
            ));
            return;
        }
    };
    resolved.note(ctx, &session_id);
    ctx.result.settled = Some(settled);
    if !settled {
        ctx.warn("the transcript's last line never became complete JSON; staging it anyway (the copy may be short; the drain re-reads the source)");
    }
    let agent_type = p
        .agent_type
        .clone()
        .filter(|t| !t.contains(['\r', '\n']) && !t.is_empty());
    let mut lin = Lineage {
        session_id: session_id.clone(),
        agent_id: Some(agent_id.clone()),
        agent_type,
        lineage_source: Some(LineageSource::Hook),
        spawn_attribution: Some(SpawnAttribution::Unattributed),
        ..Lineage::default()
    };
    match lineage::read_harness_sidecar(Path::new(path)) {
        SidecarOutcome::Accepted(sc) => lineage::apply_sidecar(&mut lin, sc),
        SidecarOutcome::Absent => {}
        SidecarOutcome::Unplaced { agent_type } => {
            if lin.agent_type.is_none() {
                lin.agent_type = agent_type;
            }
        }
        SidecarOutcome::Unreadable(why) => {
            ctx.warn(format!("the harness sidecar beside the transcript is unusable ({why}); the spawn point stays unattributed"));
        }
    }
    ctx.result.spawn_attribution = lin.spawn_attribution.map(|a| a.as_str().to_owned());
    let what = format!(
        "sub-agent {agent_id} of session {session_id} (repo resolved via {}, spawn {})",
        resolved.via,
        lin.spawn_attribution
            .map(|a| a.as_str())
            .unwrap_or("unattributed")
    );
    let outcome = stage::stage_snapshot(&resolved.corpus, &lin, snap);
    report_stage(ctx, &what, outcome);
    resolved.move_waiting(ctx, home);
}

fn main_thread_stop(ctx: &mut Ctx<'_>, home: &Path, p: &HookPayload) {
    let Some(session_id) = valid_session(ctx, p) else {
        return;
    };
    let Some(path) = p.transcript_path.as_deref().filter(|s| !s.is_empty()) else {
        ctx.warn("the payload carries no transcript_path; capturing nothing");
        return;
    };
    let Some(resolved) = resolve(ctx, home, p, &session_id) else {
        return;
    };
    let lin = Lineage {
        session_id: session_id.clone(),
        lineage_source: Some(LineageSource::Hook),
        ..Lineage::default()
    };
    let snap = match stage::snapshot_file(&resolved.corpus, &session_id, None, path, &mut |_| {}) {
        Ok(s) => s,
        Err(e) => {
            ctx.warn(format!(
                "the session transcript could not be staged ({e}); this session was not captured{}",
                over_cap_hint(&e)
            ));
            return;
        }
    };
    resolved.note(ctx, &session_id);
    let outcome = stage::stage_snapshot(&resolved.corpus, &lin, snap);
    report_stage(ctx, &format!("session {session_id}"), outcome);
    stage_spills(ctx, &resolved.corpus, &session_id, Path::new(path));
    resolved.move_waiting(ctx, home);
}

/// Stages the session's spilled tool outputs (`<session>/tool-results/`
/// beside its transcript, the large outputs Claude Code keeps out of the
/// JSONL and deletes with it after 30 days) that are neither stored nor
/// staged yet, one entry each, as `history ingest` stores them (see
/// `lineage::spill_ids`). Claude Code writes each once and never again,
/// so one already known is not read: a Stop after every turn lists one
/// directory. Symlinks and other non-regular files are never followed.
fn stage_spills(ctx: &mut Ctx<'_>, corpus: &Corpus, session_id: &str, transcript: &Path) {
    let Some(dir) = transcript
        .parent()
        .map(|d| d.join(session_id).join("tool-results"))
    else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        // `DirEntry::file_type` does not follow a symlink.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    files.sort();
    let index = corpus.index();
    // One read for every output already stored (record names end in
    // `-agent-<id>.md`), not one per file.
    let stored = index.session_records(session_id).unwrap_or_default();
    let mut staged = 0usize;
    for f in files {
        let ids = match lineage::spill_ids(&f) {
            Ok(ids) if ids.session_id == session_id => ids,
            Ok(_) => continue,
            Err(why) => {
                ctx.warn(format!("{}: not staged ({why})", f.display()));
                continue;
            }
        };
        let suffix = format!("-agent-{}.md", ids.agent_id);
        let known = stored.iter().any(|n| n.ends_with(&suffix))
            || index
                .staged_stem(session_id, Some(&ids.agent_id))
                .is_ok_and(|s| s.is_some());
        if known {
            continue;
        }
        let Some(source) = f.to_str() else {
            ctx.warn(format!(
                "{}: not staged (its path is not UTF-8)",
                f.display()
            ));
            continue;
        };
        let what = format!("spilled tool output {}", ids.agent_id);
        let snap = match stage::snapshot_spill(corpus, session_id, &ids.agent_id, source) {
            Ok(s) => s,
            Err(e) => {
                ctx.warn(format!(
                    "the {what} could not be staged ({e}); `abcd history ingest` retries it{}",
                    over_cap_hint(&e)
                ));
                continue;
            }
        };
        let lin = lineage::spill_lineage(ids, LineageSource::Hook);
        match stage::stage_snapshot(corpus, &lin, snap) {
            Ok(StageOutcome::Staged { .. } | StageOutcome::Restaged { .. }) => staged += 1,
            Ok(_) => {}
            Err(e) if e.is_unprojected() => staged += 1,
            Err(e) => ctx.warn(format!("the {what} could not be staged ({e})")),
        }
    }
    if staged > 0 {
        ctx.result.tool_outputs_staged = Some(staged);
        ctx.say(format!(
            "staged {staged} spilled tool output(s) of session {session_id}; the next drain redacts and stores them"
        ));
    }
}

fn session_start(ctx: &mut Ctx<'_>, home: &Path, p: &HookPayload) {
    ctx.result.outcome = "nothing-to-do".into();
    let session_id = p.session_id.clone().filter(|s| lineage::is_valid_id(s));
    let now = clock::now_unix_ns();
    if let Some(cwd) = cwd_of(p) {
        match repo::resolve_lane(&cwd, home) {
            Ok(info) => match Corpus::open_for_hook(home, &info.root_sha) {
                Ok(corpus) => {
                    ctx.result.root_sha = Some(info.root_sha.clone());
                    settle(ctx, home, &info, &corpus);
                    if let Some(s) = &session_id {
                        note_session(ctx, &corpus, s);
                        ctx.result.outcome = "noted".into();
                    }
                    let root = info.root.clone();
                    match drain::for_hook(&corpus, &root, Budget::SESSION_START, now) {
                        Ok(d) => {
                            report_drain(ctx, &d.report);
                            if let Some((first, n)) = d.faults {
                                ctx.warn(format!(
                                    "{n} journal event(s) of this repository could not be applied to its projections (first: seq {first}); nothing is lost — run `abcd journal verify`"
                                ));
                            }
                        }
                        Err(e) => ctx.warn(format!("the drain could not run ({e}); staged transcripts stay staged")),
                    }
                    // Only when the user turned it on: a detached process,
                    // never waited for.
                    // A directory lane has no repository to sync through.
                    match crate::sync::auto::start_if_on(&corpus, &root) {
                        _ if info.kind == store::LaneKind::Directory => {}
                        Ok(true) => ctx.say("a background `abcd sync` started (abcd sync --auto on)"),
                        Ok(false) => {}
                        Err(e) => ctx.warn(format!("the background sync could not start ({e}); run `abcd sync`")),
                    }
                }
                Err(e) => ctx.warn(format!(
                    "the transcript store could not be opened ({e}); this session will not be captured"
                )),
            },
            Err(e) => ctx.warn(format!("this directory's lane could not be resolved ({e}); nothing to capture here")),
        }
    }
    // Every other repository's backlog: counts, sizes and names only.
    {
        let others = drain::other_backlogs(home, ctx.result.root_sha.as_deref(), now);
        if !others.is_empty() {
            let staged: usize = others.iter().map(|b| b.staged).sum();
            let bytes: u64 = others
                .iter()
                .map(|b| b.staged_bytes + b.quarantined_bytes)
                .sum();
            let overdue: usize = others.iter().map(|b| b.overdue).sum();
            let quarantined: usize = others.iter().map(|b| b.quarantined).sum();
            let names: Vec<String> = others
                .iter()
                .take(5)
                .map(|b| {
                    b.name
                        .clone()
                        .or_else(|| b.directory.clone())
                        .unwrap_or_else(|| b.root_sha[..12].to_owned())
                })
                .collect();
            let more = others.len().saturating_sub(5);
            ctx.warn(format!(
                "{} other repositor{} hold {staged} staged and {quarantined} quarantined transcript(s) ({bytes} bytes of UNREDACTED text, {overdue} overdue): {}{}; run `abcd history staged --all-repos`",
                others.len(),
                if others.len() == 1 { "y" } else { "ies" },
                names.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ));
        }
    }
}

fn prompt_drain(ctx: &mut Ctx<'_>, home: &Path, p: &HookPayload) {
    ctx.result.outcome = "nothing-to-do".into();
    let Some(cwd) = cwd_of(p) else {
        return;
    };
    let Ok(info) = repo::resolve_lane(&cwd, home) else {
        return;
    };
    // A directory lane waiting inside this repository (one `readdir` of
    // an index directory that usually does not exist): move it now.
    if info.kind == store::LaneKind::Repository
        && !store::directory_lanes_within(home, &info.root).is_empty()
    {
        if let Ok(corpus) = Corpus::open_for_hook(home, &info.root_sha) {
            settle(ctx, home, &info, &corpus);
        }
    }
    // A cheap look first: no store or nothing staged means no work at all.
    let Ok(Some(lane)) = store::Lane::open_existing(home, &info.root_sha) else {
        return;
    };
    let anything = std::fs::read_dir(lane.staging_dir())
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".raw"))
        })
        .unwrap_or(false);
    if !anything {
        return;
    }
    ctx.result.root_sha = Some(info.root_sha.clone());
    let corpus = match Corpus::open_for_hook(home, &info.root_sha) {
        Ok(c) => c,
        Err(e) => {
            ctx.warn(format!("the transcript store could not be opened ({e})"));
            return;
        }
    };
    let root = info.root.clone();
    match drain::for_hook(&corpus, &root, Budget::PROMPT, clock::now_unix_ns()) {
        Ok(d) => report_drain(ctx, &d.report),
        Err(e) => ctx.warn(format!(
            "the drain could not run ({e}); staged transcripts stay staged"
        )),
    }
}

fn report_drain(ctx: &mut Ctx<'_>, r: &DrainReport) {
    let summary = DrainSummary::from(r);
    if summary.captured + summary.already_stored > 0 {
        ctx.result.outcome = "drained".into();
        ctx.say(format!(
            "stored {} transcript(s) ({} already stored)",
            summary.captured, summary.already_stored
        ));
    }
    for f in &r.failed {
        let who = match &f.agent_id {
            Some(a) => format!("sub-agent {a} of session {}", f.session_id),
            None => format!("session {}", f.session_id),
        };
        if f.quarantined {
            ctx.warn(format!(
                "{who} can never be redacted ({}); it was QUARANTINED with its UNREDACTED text at {} — read it, then `abcd history discard <file> --yes`",
                f.error, f.path
            ));
        } else if f.permanent {
            ctx.warn(format!(
                "{who} can never be redacted ({}) and could not be quarantined, so it stays staged UNREDACTED at {}",
                f.error, f.path
            ));
        } else {
            ctx.warn(format!(
                "{who} could not be stored ({}); it stays staged UNREDACTED at {} and will be retried",
                f.error, f.path
            ));
        }
    }
    if r.overdue > 0 {
        ctx.warn(format!(
            "{} staged transcript(s) in this repository are older than 7 days and still hold UNREDACTED text; run `abcd history drain`",
            r.overdue
        ));
    }
    if r.remaining > 0 {
        ctx.warn(format!(
            "{} earlier transcript(s) are still awaiting capture; run `abcd history drain` to store them now",
            r.remaining
        ));
    }
    for a in &r.adopted {
        ctx.warn(format!(
            "adopted the staged file {a}, which a crashed writer left without a journal entry"
        ));
    }
    ctx.result.drain = Some(summary);
}

/// What to do with a transcript too large to stage: the hooks copy a
/// transcript whole (`RAW_CAP`); `history capture` and `history ingest`
/// stream one of any size.
fn over_cap_hint(e: &stage::StageError) -> &'static str {
    use crate::fsutil::GuardedReadError as G;
    match e {
        stage::StageError::Source(G::OverCap { .. } | G::GrewPastCap { .. }) => {
            " (a transcript this large is captured by `abcd history capture <its path>` or `abcd history ingest`, which stream it)"
        }
        _ => "",
    }
}
