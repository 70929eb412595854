//! Capture: the only path that turns raw transcript bytes into a record.
//!
//! Owns: redacting a transcript body together with its lineage scalars
//! (through the redaction engine's two stages: sanitise, then verify), and
//! deciding — under the store lock, from journal state — whether the result
//! is new, a no-op, or supersedes shorter records of the same stream.
//!
//! Invariants:
//! - Nothing reaches a record without passing `prepare`; a refusal writes
//!   nothing. A degraded scanner refuses every capture.
//! - Idempotency key (source_sha256, session_id, agent_id, kind): two agents
//!   with identical bytes both store; the same source twice is a no-op.
//! - Supersession compares redacted bodies of the same (session, agent,
//!   kind): a longer re-arrival supersedes, a shorter one is a no-op,
//!   divergent bodies both stay.

use abcd_redact::{RedactError, Scanner};
use serde::Serialize;
use thiserror::Error;

use crate::clock;
use crate::corpus::{CorpusError, Locked};
use crate::event::{CaptureOutcome, Captured, Event, StagedRef};
use crate::fsutil;
use crate::lineage::Lineage;
use crate::projection::{idem_key, stream_key, ProjectionError, RECORD_READ_CAP};
use crate::record::{self, RecordMeta};

#[derive(Debug, Error)]
pub enum CaptureError {
    /// Retrying the same bytes with the same configuration can never
    /// succeed: the drain quarantines the entry.
    #[error("redaction refused the transcript: {reason}")]
    Refused { reason: String, deterministic: bool },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
}

/// Why `history capture` (or ingest) will not take a file as a transcript.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("{path} is not a Claude Code transcript: {why}; nothing was stored")]
    NotTranscript {
        path: String,
        why: crate::shape::NotTranscript,
    },
    #[error(
        "{path} carries no sessionId on its lines (an older transcript shape); pass --session <id>"
    )]
    NoSession { path: String },
    #[error("{path} says its {field} is {found:?} but --{flag} says {given:?}; refusing (drop the flag: the transcript's own id is used)")]
    Mismatch {
        path: String,
        field: &'static str,
        flag: &'static str,
        found: String,
        given: String,
    },
    #[error("{path}: {source}")]
    Id {
        path: String,
        #[source]
        source: crate::lineage::LineageError,
    },
}

/// The lineage of a transcript handed over by a user: the session (and
/// sub-agent) id from its own lines; `session`/`agent` only where the
/// content has none, and a flag that contradicts the content is refused.
/// The ids then meet the new-input rule. `path` names the input in errors.
pub fn lineage_from_content(
    path: &str,
    raw: &[u8],
    session: Option<String>,
    agent: Option<String>,
    agent_type: Option<String>,
) -> Result<Lineage, InputError> {
    // The flags meet the new-input rule first, whatever the content says.
    for (field, v) in [("session_id", &session), ("agent_id", &agent)] {
        crate::lineage::check_id(field, v.as_deref()).map_err(|source| InputError::Id {
            path: path.to_owned(),
            source,
        })?;
    }
    let ids = crate::shape::read_ids(raw).map_err(|why| InputError::NotTranscript {
        path: path.to_owned(),
        why,
    })?;
    let pick = |field, flag, found: Option<String>, given: Option<String>| match (found, given) {
        (Some(f), Some(g)) if f != g => Err(InputError::Mismatch {
            path: path.to_owned(),
            field,
            flag,
            found: f,
            given: g,
        }),
        (Some(f), _) => Ok(Some(f)),
        (None, g) => Ok(g),
    };
    let session_id = pick("sessionId", "session", ids.session_id, session)?.ok_or_else(|| {
        InputError::NoSession {
            path: path.to_owned(),
        }
    })?;
    let agent_id = pick("agentId", "agent", ids.agent_id, agent)?;
    let lineage = Lineage {
        session_id,
        spawn_attribution: agent_id
            .as_ref()
            .map(|_| crate::lineage::SpawnAttribution::Unattributed),
        agent_id,
        agent_type,
        ..Default::default()
    };
    lineage.validate().map_err(|source| InputError::Id {
        path: path.to_owned(),
        source,
    })?;
    Ok(lineage)
}

impl CaptureError {
    pub fn is_deterministic(&self) -> bool {
        matches!(
            self,
            CaptureError::Refused {
                deterministic: true,
                ..
            }
        )
    }
}

impl From<ProjectionError> for CaptureError {
    fn from(e: ProjectionError) -> Self {
        CaptureError::Corpus(e.into())
    }
}

/// The scanner for a repository: built-in rules, the caller's identity and
/// the repository's own `.abcd/redact.json`. The one place that builds it.
/// A directory lane's directory that holds no `.git` (a session run in no
/// repository) has no repository configuration: the built-in rules and the
/// caller's global identity only.
pub fn scanner_for(repo_root: &std::path::Path) -> Scanner {
    if std::fs::symlink_metadata(repo_root.join(".git")).is_err() && repo_root.is_dir() {
        return Scanner::new(abcd_redact::Identity::discover(None), None);
    }
    Scanner::new(
        abcd_redact::Identity::discover(Some(repo_root)),
        Some(repo_root),
    )
}

/// A redacted transcript, ready to be decided under the lock.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub meta: RecordMeta,
    pub body: String,
}

/// Redacts `raw` and the lineage scalars as one unit. No lock is held.
pub fn prepare(
    scanner: &Scanner,
    lineage: &Lineage,
    raw: &[u8],
    root_sha: &str,
    kind: &str,
) -> Result<Prepared, CaptureError> {
    prepare_digested(
        scanner,
        lineage,
        raw,
        &fsutil::sha256_hex(raw),
        root_sha,
        kind,
    )
}

/// [`prepare`] for a caller that already holds `raw`'s SHA-256 (ingest
/// computes it for its idempotency skip before any redaction).
pub fn prepare_digested(
    scanner: &Scanner,
    lineage: &Lineage,
    raw: &[u8],
    source_sha256: &str,
    root_sha: &str,
    kind: &str,
) -> Result<Prepared, CaptureError> {
    let text = std::str::from_utf8(raw).map_err(|e| CaptureError::Refused {
        reason: format!(
            "the transcript is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ),
        deterministic: true,
    })?;
    // The stored-id rule: a staged entry an older abcd journaled may carry
    // a longer id than new input may (`history capture` and the hooks check
    // the strict rule before anything is journaled).
    lineage
        .validate_stored()
        .map_err(|e| CaptureError::Refused {
            reason: format!("malformed lineage: {e}"),
            deterministic: true,
        })?;
    // Scalars go through the same two-stage pass as the body, in one unit, so
    // a value found in either is redacted in both.
    let scalars: [&str; 5] = [
        lineage.session_id.as_str(),
        lineage.agent_id.as_deref().unwrap_or(""),
        lineage.parent_agent_id.as_deref().unwrap_or(""),
        lineage.agent_type.as_deref().unwrap_or(""),
        lineage.spawn_tool_use_id.as_deref().unwrap_or(""),
    ];
    let mut parts: Vec<&str> = vec![text];
    parts.extend_from_slice(&scalars);
    let mut out = scanner.redact_parts(&parts).map_err(refusal)?;
    let mut secrets = 0u64;
    let mut homes = 0u64;
    for r in &out {
        for f in &r.findings {
            if is_home_kind(&f.kind) {
                homes += 1;
            } else {
                secrets += 1;
            }
        }
    }
    // Identifiers key the corpus; one that redaction would change cannot be
    // stored changed (it would no longer find its session) nor unchanged.
    for (i, name) in ["session_id", "agent_id", "parent_agent_id"]
        .iter()
        .enumerate()
    {
        if out[i + 1].text != scalars[i] {
            return Err(CaptureError::Refused {
                reason: format!("the lineage identifier {name} matches a redaction rule"),
                deterministic: true,
            });
        }
    }
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    // Taken, not cloned: a body is the size of its transcript.
    let mut body = std::mem::take(&mut out[0].text);
    if !body.ends_with('\n') {
        body.push('\n');
    }
    // Its spare room (a redacted text that outgrew its input doubled its
    // buffer) is given back: prepared bodies wait in ingest's queue. The
    // allocator shrinks in place, no copy.
    body.shrink_to_fit();
    let mut meta = RecordMeta::native(lineage, root_sha, 0, source_sha256);
    meta.schema = record::SCHEMA_LINEAGE;
    meta.source_kind = kind.to_owned();
    meta.redacted_secrets = secrets;
    meta.redacted_home_paths = homes;
    // The stored scalars are the redacted ones.
    meta.lineage.agent_type = non_empty(&out[4].text);
    meta.lineage.spawn_tool_use_id = non_empty(&out[5].text);
    Ok(Prepared { meta, body })
}

fn is_home_kind(kind: &str) -> bool {
    kind.contains("home")
}

fn refusal(e: RedactError) -> CaptureError {
    CaptureError::Refused {
        deterministic: e.is_deterministic(),
        reason: e.to_string(),
    }
}

/// What a capture decided.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureResult {
    pub record: String,
    pub wrote: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<String>,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub redacted_secrets: u64,
    pub redacted_home_paths: u64,
    /// The digest of the body this capture wrote (`wrote` only).
    #[serde(skip)]
    pub body: Option<String>,
}

/// Decides and journals a prepared capture. Caller holds the store lock and
/// has re-checked that any staged entry it retires is unchanged.
pub fn commit(
    locked: &Locked<'_>,
    prepared: Prepared,
    retires: Option<StagedRef>,
    extended: bool,
) -> Result<CaptureResult, CaptureError> {
    let (event, result) = decide(locked, prepared, retires, extended, true)?;
    locked.append(&event)?;
    Ok(result)
}

/// Commits many prepared captures (no staged entry retired) in batches:
/// bodies written without a sync each, one sync of them all, then their
/// events appended as one atomic batch and projected once. A capture whose
/// (session, agent, kind) stream or idempotency key is already pending in
/// the batch flushes it first, so every decision sees the ones before it
/// exactly as [`commit`] one by one would. Results come back in order.
pub fn commit_batch(
    locked: &Locked<'_>,
    prepared: Vec<Prepared>,
) -> Vec<Result<CaptureResult, CaptureError>> {
    let mut out: Vec<Result<CaptureResult, CaptureError>> = Vec::with_capacity(prepared.len());
    let mut pending: Vec<(Event, CaptureResult)> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let flush = |pending: &mut Vec<(Event, CaptureResult)>,
                 out: &mut Vec<Result<CaptureResult, CaptureError>>| {
        if pending.is_empty() {
            return;
        }
        let events: Vec<Event> = pending.iter().map(|(e, _)| e.clone()).collect();
        let done = crate::body::sync(locked.lane())
            .map_err(|e| CaptureError::Corpus(CorpusError::from(e)))
            .and_then(|()| locked.append_batch(&events).map_err(CaptureError::from));
        match done {
            Ok(_) => out.extend(pending.drain(..).map(|(_, r)| Ok(r))),
            Err(e) => {
                let why = e.to_string();
                out.extend(pending.drain(..).map(|_| {
                    Err(CaptureError::Corpus(CorpusError::Batch {
                        why: why.clone(),
                    }))
                }));
            }
        }
    };
    for p in prepared {
        let agent = p.meta.lineage.agent_id.as_deref();
        let stream = stream_key(&p.meta.lineage.session_id, agent, &p.meta.source_kind);
        if keys.contains(&stream) {
            flush(&mut pending, &mut out);
            keys.clear();
        }
        keys.push(stream);
        match decide(locked, p, None, false, false) {
            Ok(d) => pending.push(d),
            Err(e) => {
                // Keep the order: what is pending goes first.
                flush(&mut pending, &mut out);
                keys.clear();
                out.push(Err(e));
            }
        }
    }
    flush(&mut pending, &mut out);
    out
}

impl CaptureResult {
    pub(crate) fn of(
        record: String,
        wrote: bool,
        superseded: Vec<String>,
        meta: &RecordMeta,
    ) -> Self {
        CaptureResult {
            record,
            wrote,
            superseded,
            session_id: meta.lineage.session_id.clone(),
            agent_id: meta.lineage.agent_id.clone(),
            redacted_secrets: meta.redacted_secrets,
            redacted_home_paths: meta.redacted_home_paths,
            body: None,
        }
    }
}

/// How much of a prior record of the stream is read first to rule it out
/// as a prefix (or an extension) of the new body: records of one stream
/// that are not prefixes of each other (the parts of a streamed transcript,
/// for one) differ early, so most priors cost one small read.
const PRIOR_HEAD: u64 = 64 << 10;

/// What capture decides under the lock for one redacted record.
pub(crate) enum Decision {
    /// Already stored: the same source (idempotency key), or a prior of the
    /// stream whose body starts with this one.
    Already(String),
    /// A new record under `name`, superseding the stream's priors it extends.
    New {
        name: String,
        supersedes: Vec<String>,
    },
}

/// Capture's decision, from journal state only: the values forgotten in
/// this repository applied to the body and the stored scalars (read under
/// the lock, so a forget that just finished is seen), the idempotency key,
/// then each prior of the (session, agent, kind) stream, then a fresh name
/// (`meta.captured_at_ns` set to its stamp). Unreadable priors are skipped.
pub(crate) fn decide_record(
    locked: &Locked<'_>,
    meta: &mut RecordMeta,
    body: &mut String,
) -> Result<Decision, crate::projection::ProjectionError> {
    let forgotten = crate::projection::read_forgotten(locked.lane());
    if !forgotten.is_empty() {
        let (b, n) = crate::forgotten::redact_forgotten(body, &forgotten);
        *body = b;
        meta.redacted_secrets += n;
        for v in [
            &mut meta.lineage.agent_type,
            &mut meta.lineage.spawn_tool_use_id,
        ]
        .into_iter()
        .flatten()
        {
            let (t, n) = crate::forgotten::redact_forgotten(v, &forgotten);
            *v = t;
            meta.redacted_secrets += n;
        }
    }
    let index = locked.index();
    let agent = meta.lineage.agent_id.as_deref();
    let idem = idem_key(
        &meta.source_sha256,
        &meta.lineage.session_id,
        agent,
        &meta.source_kind,
    );
    if let Some(name) = index.record_for_idem(&idem)? {
        return Ok(Decision::Already(name));
    }
    let records = locked.lane().records_dir();
    let stream = stream_key(&meta.lineage.session_id, agent, &meta.source_kind);
    let mut supersedes = Vec::new();
    for name in index.stream_records(&stream)? {
        let path = records.join(&name);
        let Ok(head) = fsutil::read_private_head(&path, PRIOR_HEAD) else {
            continue; // unreadable priors are skipped
        };
        let whole = (head.len() as u64) < PRIOR_HEAD;
        if let Ok((_, prior_head)) = record::parse(&head) {
            let n = prior_head.len().min(body.len());
            if prior_head[..n] != body.as_bytes()[..n] {
                continue;
            }
        }
        let bytes = if whole {
            head
        } else {
            let Ok(bytes) = fsutil::read_private(&path, RECORD_READ_CAP) else {
                continue;
            };
            bytes
        };
        let Ok((_, prior)) = record::parse(&bytes) else {
            continue;
        };
        if prior.starts_with(body.as_bytes()) {
            return Ok(Decision::Already(name));
        }
        if body.as_bytes().starts_with(prior) {
            supersedes.push(name);
        }
    }
    let mut at = clock::now_unix_ns();
    let mut name = record::record_filename(at, &meta.lineage.session_id, agent);
    while records.join(&name).exists() {
        at += 1;
        name = record::record_filename(at, &meta.lineage.session_id, agent);
    }
    meta.captured_at_ns = at;
    Ok(Decision::New { name, supersedes })
}

/// The decision of [`commit`]: the event to append and what it means. With
/// `durable`, a new body is synced before this returns; without, the
/// caller syncs the bodies before appending.
fn decide(
    locked: &Locked<'_>,
    prepared: Prepared,
    retires: Option<StagedRef>,
    extended: bool,
    durable: bool,
) -> Result<(Event, CaptureResult), CaptureError> {
    let Prepared { mut meta, mut body } = prepared;
    let (outcome, r) = match decide_record(locked, &mut meta, &mut body)? {
        Decision::Already(record_name) => {
            let r = CaptureResult::of(record_name.clone(), false, Vec::new(), &meta);
            (CaptureOutcome::AlreadyStored { record_name }, r)
        }
        Decision::New { name, supersedes } => {
            let r = CaptureResult::of(name.clone(), true, supersedes.clone(), &meta);
            // The record file goes to `bodies/` (durably) before the event
            // that names it is appended.
            let file = record::render(&meta, body.as_bytes());
            drop(body);
            let body =
                crate::body::put_owned(locked.lane(), file, durable).map_err(CorpusError::from)?;
            let r = CaptureResult {
                body: Some(body.sha256.clone()),
                ..r
            };
            let outcome = CaptureOutcome::Stored {
                record_name: name,
                body,
                supersedes,
            };
            (outcome, r)
        }
    };
    let event = Event::Captured(Box::new(Captured {
        outcome,
        retires,
        extended,
    }));
    Ok((event, r))
}

/// Captures transcript bytes the user handed over (`history capture`):
/// redact body and lineage with the repository's own scanner (no lock
/// held), then take the store lock and commit. Nothing is staged: the
/// bytes are already in the user's hands, and a refusal writes nothing.
pub fn capture_bytes(
    corpus: &crate::corpus::Corpus,
    root: &std::path::Path,
    lineage: &Lineage,
    raw: &[u8],
) -> Result<CaptureResult, CaptureError> {
    let scanner = scanner_for(root);
    let prepared = prepare(
        &scanner,
        lineage,
        raw,
        &corpus.lane.root_sha,
        record::KIND_NATIVE,
    )?;
    let locked = corpus.lock()?;
    commit(&locked, prepared, None, false)
}
