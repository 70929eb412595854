//! History: the user's read-side questions over a corpus, and the one
//! deleting door (`discard`).
//!
//! Owns: listing records (frontmatter, never file names), resolving a `show`
//! key (exact file name, then agent id, then session id preferring the main
//! thread, newest first), the cross-repository backlog survey, and discard.
//! Reads projections only; writes only through journal events.

use std::fs;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::corpus::{Corpus, CorpusError};
use crate::event::{BlobPlace, Discarded, Event};
use crate::fsutil;
use crate::lineage::Lineage;
use crate::projection::{ProjectionError, RECORD_READ_CAP};
use crate::record::{self, RecordMeta};
use crate::stage::{self, StageError, StagedEntry};
use crate::store;

#[derive(Debug, Error)]
pub enum HistoryError {
    #[error("history: no record for {key:?} in this repository's corpus ({root_sha}); `abcd history list` shows what is stored")]
    NotFound { key: String, root_sha: String },
    #[error("history discard: {name:?} is not a bare staged file name ending in .raw (see `abcd history staged`)")]
    BadDiscardName { name: String },
    #[error("history discard: {name} is neither staged nor quarantined for this repository")]
    NothingToDiscard { name: String },
    #[error("history discard: deleting {name} is irreversible (it is the only copy of that transcript); pass --yes to confirm")]
    NeedsConfirmation { name: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// A record as listed: its metadata and file name.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub file: String,
    pub path: String,
    #[serde(flatten)]
    pub meta: RecordView,
}

/// The JSON shape of a record's metadata.
#[derive(Debug, Clone, Serialize)]
pub struct RecordView {
    pub schema: u32,
    pub root_commit: String,
    pub captured_at: String,
    pub source_kind: String,
    pub source_sha256: String,
    pub redacted_secrets: u64,
    pub redacted_home_paths: u64,
    #[serde(flatten)]
    pub lineage: Lineage,
    /// Its number in a transcript stored in parts (`bigfile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<u32>,
    #[serde(skip)]
    pub captured_at_ns: u64,
}

impl From<&RecordMeta> for RecordView {
    fn from(m: &RecordMeta) -> Self {
        RecordView {
            schema: m.schema,
            root_commit: m.root_commit.clone(),
            captured_at: crate::clock::rfc3339_nanos(m.captured_at_ns),
            source_kind: m.source_kind.clone(),
            source_sha256: m.source_sha256.clone(),
            redacted_secrets: m.redacted_secrets,
            redacted_home_paths: m.redacted_home_paths,
            lineage: m.lineage.clone(),
            part: m.part,
            captured_at_ns: m.captured_at_ns,
        }
    }
}

fn read_record(dir: &Path, name: &str) -> Option<(Listed, Vec<u8>)> {
    let path = dir.join(name);
    let bytes = fsutil::read_private(&path, RECORD_READ_CAP).ok()?;
    let (meta, body) = record::parse(&bytes).ok()?;
    let body = body.to_vec();
    Some((
        Listed {
            file: name.to_owned(),
            path: path.display().to_string(),
            meta: RecordView::from(&meta),
        },
        body,
    ))
}

/// Frontmatter is a few hundred bytes; listing reads only this much of each
/// record (a store of 100,000 records is listed without reading bodies).
const HEAD_READ: u64 = 64 << 10;

fn read_meta(dir: &Path, name: &str) -> Option<Listed> {
    let path = dir.join(name);
    let head = fsutil::read_private_head(&path, HEAD_READ).ok()?;
    let meta = match record::parse(&head) {
        Ok((meta, _)) => meta,
        // A header longer than the head read: read the whole record.
        Err(_) => return read_record(dir, name).map(|(l, _)| l),
    };
    Some(Listed {
        file: name.to_owned(),
        path: path.display().to_string(),
        meta: RecordView::from(&meta),
    })
}

fn newest_first(v: &mut [Listed]) {
    v.sort_by(|a, b| {
        b.meta
            .captured_at_ns
            .cmp(&a.meta.captured_at_ns)
            .then_with(|| b.file.cmp(&a.file))
    });
}

/// Every record, newest first. Unreadable files (symlinks, FIFOs, damaged
/// frontmatter) are skipped, never followed.
pub fn list(corpus: &Corpus) -> Result<Vec<Listed>, HistoryError> {
    let dir = corpus.lane.records_dir();
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(&dir) {
        for entry in rd.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".md") || name.starts_with('.') {
                continue;
            }
            if let Some(l) = read_meta(&dir, &name) {
                out.push(l);
            }
        }
    }
    newest_first(&mut out);
    Ok(out)
}

/// A session's records: the main thread first, then every sub-agent, each
/// newest first. O(records of the session) through the index.
pub fn list_session(corpus: &Corpus, session_id: &str) -> Result<Vec<Listed>, HistoryError> {
    let dir = corpus.lane.records_dir();
    let mut out: Vec<Listed> = corpus
        .index()
        .session_records(session_id)?
        .iter()
        .filter_map(|n| read_meta(&dir, n))
        .filter(|l| l.meta.lineage.session_id == session_id)
        .collect();
    newest_first(&mut out);
    out.sort_by_key(|l| l.meta.lineage.agent_id.is_some());
    Ok(out)
}

/// Every readable record of a session with its body (the main thread
/// first, then sub-agents, newest first within each), for the renderers.
pub fn session_bodies(
    corpus: &Corpus,
    session_id: &str,
) -> Result<Vec<(Listed, Vec<u8>)>, HistoryError> {
    let dir = corpus.lane.records_dir();
    Ok(list_session(corpus, session_id)?
        .iter()
        .filter_map(|l| read_record(&dir, &l.file))
        .collect())
}

/// Record summaries (`index/summary/`): every live record's, or one
/// session's. Reads no record.
pub fn summaries(
    corpus: &Corpus,
    session_id: Option<&str>,
) -> Result<Vec<crate::summary::Summary>, HistoryError> {
    Ok(match session_id {
        Some(s) => crate::projection::session_summaries(&corpus.lane, s)?,
        None => crate::projection::all_summaries(&corpus.lane)?,
    })
}

/// Record token tables (`index/tokens/`): every live record's, or one
/// session's (with other sessions' of the same shard: match by file).
/// Reads no record.
pub fn token_lines(
    corpus: &Corpus,
    session_id: Option<&str>,
) -> Result<Vec<crate::summary::TokenLine>, HistoryError> {
    Ok(match session_id {
        Some(s) => crate::projection::session_tokens(&corpus.lane, s)?,
        None => crate::projection::all_tokens(&corpus.lane)?,
    })
}

/// A record as `history list --json` prints it: the record's metadata and
/// its summary's facts.
#[derive(Debug, Clone, Serialize)]
pub struct ListedSummary {
    #[serde(flatten)]
    pub record: Listed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub bytes: u64,
    pub tokens: u64,
    pub turns: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// With `--all-repos`: the repository's name (a directory lane's
    /// directory, redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// With `--all-repos`: `repository` or `directory` (a lane keyed by
    /// its directory: no repository with a commit there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane_kind: Option<store::LaneKind>,
}

impl ListedSummary {
    pub fn new(corpus: &Corpus, s: crate::summary::Summary) -> ListedSummary {
        let path = corpus.lane.records_dir().join(&s.file);
        ListedSummary {
            record: Listed {
                file: s.file,
                path: path.display().to_string(),
                meta: RecordView::from(&s.meta),
            },
            started_at: s.started_at,
            ended_at: s.ended_at,
            title: s.title,
            bytes: s.bytes,
            tokens: s.tokens,
            turns: s.turns,
            cwd: s.cwd,
            repository: None,
            lane_kind: None,
        }
    }
}

/// `history list --json`: every record (or one session's), newest capture
/// first (a session's main thread first), from the summaries alone.
pub fn list_summaries(
    corpus: &Corpus,
    session_id: Option<&str>,
) -> Result<Vec<ListedSummary>, HistoryError> {
    let mut v: Vec<ListedSummary> = summaries(corpus, session_id)?
        .into_iter()
        .map(|s| ListedSummary::new(corpus, s))
        .collect();
    v.sort_by(|a, b| {
        b.record
            .meta
            .captured_at_ns
            .cmp(&a.record.meta.captured_at_ns)
            .then_with(|| b.record.file.cmp(&a.record.file))
    });
    if session_id.is_some() {
        v.sort_by_key(|l| l.record.meta.lineage.agent_id.is_some());
    }
    Ok(v)
}

/// A record with its body.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub record: Listed,
    pub body: String,
    /// Other records of the same session (main thread first).
    pub session_records: Vec<Listed>,
}

/// Resolves `key`: exact file name, then agent id, then session id (main
/// thread first), newest first at each step.
pub fn show(corpus: &Corpus, key: &str) -> Result<Shown, HistoryError> {
    let dir = corpus.lane.records_dir();
    let not_found = || HistoryError::NotFound {
        key: key.to_owned(),
        root_sha: corpus.lane.root_sha.clone(),
    };
    let plain = !key.contains('/') && !key.starts_with('.') && !key.is_empty();
    let mut found = None;
    if plain && key.ends_with(".md") {
        found = read_record(&dir, key);
    }
    if found.is_none() && plain {
        let mut by_agent: Vec<(Listed, Vec<u8>)> = corpus
            .index()
            .agent_records(key)?
            .iter()
            .filter_map(|n| read_record(&dir, n))
            .filter(|(l, _)| l.meta.lineage.agent_id.as_deref() == Some(key))
            .collect();
        by_agent.sort_by_key(|b| std::cmp::Reverse(b.0.meta.captured_at_ns));
        found = by_agent.into_iter().next();
    }
    if found.is_none() && plain {
        if let Some(first) = list_session(corpus, key)?.into_iter().next() {
            found = read_record(&dir, &first.file);
        }
    }
    let (record, body) = found.ok_or_else(not_found)?;
    let session_records = list_session(corpus, &record.meta.lineage.session_id)?
        .into_iter()
        .filter(|l| l.file != record.file)
        .collect();
    Ok(Shown {
        record,
        body: String::from_utf8_lossy(&body).into_owned(),
        session_records,
    })
}

/// Everything `history staged` reports for one repository.
#[derive(Debug, Clone, Serialize)]
pub struct StagedReport {
    pub staged: Vec<StagedEntry>,
    pub quarantined: Vec<stage::QuarantinedEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_gap: Option<crate::projection::GapMarker>,
    /// Journal events the projections could not apply (`index/faults.json`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projection_faults: Vec<crate::projection::Fault>,
    /// Record files a journal rebuild set aside in `records.unjournaled/`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unjournaled_records: Vec<String>,
}

pub fn staged(corpus: &Corpus, now_ns: u64) -> Result<StagedReport, HistoryError> {
    let gap = fsutil::read_private(
        &corpus.lane.gap_marker_path(),
        crate::fsutil::SMALL_FILE_CAP,
    )
    .ok()
    .and_then(|b| serde_json::from_slice(&b).ok());
    Ok(StagedReport {
        staged: stage::list_staged(corpus, now_ns)?,
        quarantined: stage::list_quarantined(corpus)?,
        subagent_gap: gap,
        projection_faults: crate::projection::read_faults(&corpus.lane),
        unjournaled_records: crate::projection::unjournaled_records(&corpus.lane),
    })
}

/// One repository's backlog, as the cross-repository survey reports it:
/// counts, sizes and a name, never session ids or paths.
#[derive(Debug, Clone, Serialize)]
pub struct Backlog {
    pub root_sha: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `repository` or `directory` (a lane keyed by its directory).
    pub lane_kind: store::LaneKind,
    /// A directory lane's directory, redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    pub staged: usize,
    pub staged_bytes: u64,
    pub overdue: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_staged_at: Option<String>,
    pub quarantined: usize,
    pub quarantined_bytes: u64,
}

/// Surveys every repository under the home; repositories holding nothing
/// are skipped. Read-only: opens no lock and creates nothing.
pub fn survey(home: &Path, now_ns: u64) -> Result<Vec<Backlog>, HistoryError> {
    let mut out = Vec::new();
    for sha in store::list_lanes(home)? {
        let Ok(Some(lane)) = store::Lane::open_existing(home, &sha) else {
            continue;
        };
        let staging = stage_dir_entries(&lane.staging_dir(), now_ns);
        let quarantine = stage_dir_entries(&lane.quarantine_dir(), now_ns);
        if staging.is_empty() && quarantine.is_empty() {
            continue;
        }
        let oldest = staging
            .iter()
            .filter(|e| e.staged_at_ns != 0)
            .min_by_key(|e| e.staged_at_ns)
            .map(|e| e.staged_at.clone());
        out.push(Backlog {
            name: store::repo_name(home, &sha),
            lane_kind: lane.kind(),
            directory: lane.directory().map(|d| d.directory),
            root_sha: sha,
            staged: staging.len(),
            staged_bytes: staging.iter().map(|e| e.bytes).sum(),
            overdue: staging.iter().filter(|e| e.overdue).count(),
            oldest_staged_at: oldest,
            quarantined: quarantine.len(),
            quarantined_bytes: quarantine.iter().map(|e| e.bytes).sum(),
        });
    }
    Ok(out)
}

fn stage_dir_entries(dir: &Path, now_ns: u64) -> Vec<StagedEntry> {
    stage::list_dir(dir, now_ns).unwrap_or_default()
}

/// What discard removed.
#[derive(Debug, Clone, Serialize)]
pub struct DiscardReport {
    pub path: String,
    pub bytes: u64,
    pub removed: Vec<String>,
}

/// Deletes one staged or quarantined transcript and its metadata. The only
/// remover of raw text; never called by hooks or drains.
pub fn discard(corpus: &Corpus, name: &str, yes: bool) -> Result<DiscardReport, HistoryError> {
    let bare = !name.is_empty()
        && !name.contains('/')
        && !name.starts_with('.')
        && name != ".."
        && name.ends_with(".raw");
    if !bare {
        return Err(HistoryError::BadDiscardName {
            name: name.to_owned(),
        });
    }
    let stem = name.trim_end_matches(".raw").to_owned();
    let locked = corpus.lock()?;
    let staging = corpus.lane.staging_dir().join(name);
    let quarantine = corpus.lane.quarantine_dir().join(name);
    let (place, path) = if fs::symlink_metadata(&staging).is_ok_and(|m| m.is_file()) {
        (BlobPlace::Staging, staging)
    } else if fs::symlink_metadata(&quarantine).is_ok_and(|m| m.is_file()) {
        (BlobPlace::Quarantine, quarantine)
    } else {
        return Err(HistoryError::NothingToDiscard {
            name: name.to_owned(),
        });
    };
    if !yes {
        return Err(HistoryError::NeedsConfirmation {
            name: name.to_owned(),
        });
    }
    let bytes = fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
    let dir = path.parent().expect("has parent").to_path_buf();
    let removed: Vec<String> = ["raw", "meta.json", "stage.json", "quarantine.json"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    locked.append(&Event::Discarded(Discarded { stem, place, bytes }))?;
    Ok(DiscardReport {
        path: path.display().to_string(),
        bytes,
        removed,
    })
}
