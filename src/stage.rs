//! Staging: where raw, unredacted transcripts wait for a drain.
//!
//! Owns: the stage operation (hooks), the staging sidecar format
//! (`<stem>.stage.json`, a projection of `Staged`/`Restaged` events), the
//! listing of staged and quarantined entries and their drain order inputs.
//!
//! Invariants:
//! - Staging never redacts (that is the drain's job) and never captures.
//! - A blob is written to a temporary file and fsynced *outside* the store
//!   lock; under the lock it is renamed into place and journaled. A crash
//!   leaves a temporary file (removed once stale: never acknowledged) or a
//!   blob that the next lock holder adopts: never an untracked raw file.
//! - Key = (session_id, agent_id): identical bytes are a no-op, different
//!   bytes replace the blob at the same stem (queue position kept).
//! - A present but corrupt sidecar is never drained or replaced.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::clock;
use crate::corpus::{Corpus, CorpusError};
use crate::event::{Event, Restaged, Staged};
use crate::fsutil::{self, FsError};
use crate::lineage::Lineage;
use crate::projection::{idem_key, SMALL_FILE_CAP};

/// Largest transcript staged or captured. Claude Code sessions of many hours
/// stay well below this; a bigger file is refused whole, never truncated.
pub const RAW_CAP: u64 = 64 << 20;

/// Entries staged longer than this are overdue: sorted first, named in every
/// notice, never deleted by age.
pub const STAGED_TTL_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;

#[derive(Debug, Error)]
pub enum StageError {
    #[error("refusing to stage an empty transcript ({path})")]
    Empty { path: String },
    #[error("transcript for session {session_id} is invalid: {why}")]
    Invalid { session_id: String, why: String },
    #[error("the staged entry {stem} has a corrupt sidecar ({why}); it is never replaced or drained — inspect it, then `abcd journal replay --rebuild` or `abcd history discard {stem}.raw --yes`")]
    CorruptSidecar { stem: String, why: String },
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error("write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The staging view of one entry (`staging/<stem>.stage.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSidecar {
    pub schema: u32,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_type: Option<String>,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub spawn_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lineage_source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_attribution: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source_path: Option<String>,
    pub staged_at: String,
    /// Absent in the predecessor's sidecars (adopted on first open).
    #[serde(default)]
    pub raw_sha256: String,
    #[serde(default)]
    pub bytes: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub adopted: bool,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl StageSidecar {
    pub fn from_staged(s: &Staged) -> StageSidecar {
        let l = &s.lineage;
        StageSidecar {
            schema: 1,
            session_id: l.session_id.clone(),
            agent_id: l.agent_id.clone(),
            parent_agent_id: l.parent_agent_id.clone(),
            agent_type: l.agent_type.clone(),
            spawn_depth: l.spawn_depth,
            spawn_tool_use_id: l.spawn_tool_use_id.clone(),
            lineage_source: l.lineage_source.map(|x| x.as_str().to_owned()),
            spawn_attribution: l.spawn_attribution.map(|x| x.as_str().to_owned()),
            source_path: s.source_path.clone(),
            staged_at: clock::rfc3339_nanos(s.staged_at_ns),
            raw_sha256: s.raw_sha256.clone(),
            bytes: s.bytes,
            adopted: s.adopted,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("sidecar serialises");
        v.push(b'\n');
        v
    }

    /// Reads and validates a sidecar; the error says why it is unusable.
    pub fn read(path: &Path) -> Result<StageSidecar, String> {
        let sc = Self::read_any(path)?;
        if sc.raw_sha256.is_empty() {
            return Err("a sidecar without a digest (written by an older abcd); it is adopted when the store is first opened by this version".into());
        }
        Ok(sc)
    }

    /// Reads a sidecar of this or the predecessor's format.
    pub fn read_any(path: &Path) -> Result<StageSidecar, String> {
        let bytes = fsutil::guarded_read(path, SMALL_FILE_CAP).map_err(|e| e.to_string())?;
        let sc: StageSidecar =
            serde_json::from_slice(&bytes).map_err(|e| format!("not a stage sidecar: {e}"))?;
        if sc.schema != 1 {
            return Err(format!("unknown sidecar schema {}", sc.schema));
        }
        sc.lineage().validate().map_err(|e| e.to_string())?;
        Ok(sc)
    }

    pub fn lineage(&self) -> Lineage {
        use crate::lineage::{LineageSource, SpawnAttribution};
        Lineage {
            session_id: self.session_id.clone(),
            agent_id: self.agent_id.clone(),
            parent_agent_id: self.parent_agent_id.clone(),
            agent_type: self.agent_type.clone(),
            spawn_depth: self.spawn_depth,
            spawn_tool_use_id: self.spawn_tool_use_id.clone(),
            lineage_source: self
                .lineage_source
                .as_deref()
                .and_then(LineageSource::parse),
            spawn_attribution: self
                .spawn_attribution
                .as_deref()
                .and_then(SpawnAttribution::parse),
        }
    }

    pub fn staged_at_ns(&self) -> u64 {
        clock::parse_rfc3339(&self.staged_at).unwrap_or(0)
    }
}

/// Parses a blob stem `<stamp>-<session>[-agent-<agent>]` (26-char stamp).
/// Used only to adopt a blob that has no journal entry; nothing else reads
/// identity from a file name.
pub fn parse_blob_stem(stem: &str) -> Option<(String, Option<String>)> {
    let rest = stem.get(27..)?;
    if stem.as_bytes().get(26) != Some(&b'-') {
        return None;
    }
    let (session, agent) = match rest.rfind("-agent-") {
        Some(i) => (&rest[..i], Some(rest[i + 7..].to_owned())),
        None => (rest, None),
    };
    if !crate::lineage::is_valid_id(session) {
        return None;
    }
    if let Some(a) = &agent {
        if !crate::lineage::is_valid_id(a) {
            return None;
        }
    }
    Some((session.to_owned(), agent))
}

/// The blob stem for a new entry.
pub fn blob_stem(staged_at_ns: u64, session_id: &str, agent_id: Option<&str>) -> String {
    match agent_id {
        Some(a) => format!("{}-{}-agent-{}", clock::stamp(staged_at_ns), session_id, a),
        None => format!("{}-{}", clock::stamp(staged_at_ns), session_id),
    }
}

/// What staging did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum StageOutcome {
    Staged {
        stem: String,
        bytes: u64,
    },
    Restaged {
        stem: String,
        bytes: u64,
        replaced_bytes: u64,
    },
    /// The same bytes are already staged under this key.
    Unchanged {
        stem: String,
        bytes: u64,
    },
    /// The same bytes are already captured into a record.
    AlreadyStored {
        record: String,
        bytes: u64,
    },
}

/// Stages `raw` under (session, agent) with `lineage`.
pub fn stage(
    corpus: &Corpus,
    lineage: &Lineage,
    raw: &[u8],
    source_path: Option<&str>,
) -> Result<StageOutcome, StageError> {
    if raw.is_empty() {
        return Err(StageError::Empty {
            path: source_path.unwrap_or("-").to_owned(),
        });
    }
    lineage.validate().map_err(|e| StageError::Invalid {
        session_id: lineage.session_id.clone(),
        why: e.to_string(),
    })?;
    if source_path.is_some_and(|p| p.contains(['\n', '\r'])) {
        return Err(StageError::Invalid {
            session_id: lineage.session_id.clone(),
            why: "the source path contains a line break".into(),
        });
    }
    let staging = corpus.lane.staging_dir();
    let (sha, tmp) = if likely_unchanged(corpus, lineage, raw.len() as u64) {
        // The common repeat (Stop fires every turn; SessionEnd after the
        // last Stop) carries bytes that are already staged: answer it
        // without writing and syncing a blob.
        let sha = fsutil::sha256_hex(raw);
        {
            let locked = corpus.lock()?;
            if let Some(done) = already(&locked, lineage, &sha, raw.len() as u64)? {
                return Ok(done);
            }
        }
        let tmp = write_tmp_blob(&staging, raw)?;
        (sha, tmp)
    } else {
        // New bytes: write and sync the blob (the slow part, before the
        // lock, so concurrent hooks only serialise on rename and append)
        // while this thread computes its digest.
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| write_tmp_blob(&staging, raw));
            let sha = fsutil::sha256_hex(raw);
            let tmp = writer.join().unwrap_or_else(|_| {
                Err(StageError::Io {
                    path: staging.clone(),
                    source: std::io::Error::other("the blob writer thread panicked"),
                })
            })?;
            Ok::<_, StageError>((sha, tmp))
        })?
    };
    let result = stage_locked(corpus, lineage, raw.len() as u64, &sha, source_path, &tmp);
    // On every path but a successful rename the temporary file is removed.
    let _ = fs::remove_file(&tmp);
    result
}

/// An unlocked peek: is an entry of the same size already staged under this
/// key? Only chooses the fast path; every decision is re-made under the lock.
fn likely_unchanged(corpus: &Corpus, lineage: &Lineage, bytes: u64) -> bool {
    let Ok(Some(stem)) = corpus
        .index()
        .staged_stem(&lineage.session_id, lineage.agent_id.as_deref())
    else {
        return false;
    };
    StageSidecar::read(&corpus.lane.staging_dir().join(format!("{stem}.stage.json")))
        .is_ok_and(|sc| sc.bytes == bytes)
}

/// The no-op answers: identical bytes already staged under this key, or
/// already captured. Caller holds the lock.
fn already(
    locked: &crate::corpus::Locked<'_>,
    lineage: &Lineage,
    sha: &str,
    bytes: u64,
) -> Result<Option<StageOutcome>, StageError> {
    let index = locked.index();
    let agent = lineage.agent_id.as_deref();
    if let Some(stem) = index
        .staged_stem(&lineage.session_id, agent)
        .map_err(CorpusError::from)?
    {
        let path = locked
            .lane()
            .staging_dir()
            .join(format!("{stem}.stage.json"));
        if StageSidecar::read(&path).is_ok_and(|sc| sc.raw_sha256 == sha) {
            return Ok(Some(StageOutcome::Unchanged { stem, bytes }));
        }
        return Ok(None);
    }
    let idem = idem_key(sha, &lineage.session_id, agent, "native");
    Ok(index
        .record_for_idem(&idem)
        .map_err(CorpusError::from)?
        .map(|record| StageOutcome::AlreadyStored { record, bytes }))
}

fn stage_locked(
    corpus: &Corpus,
    lineage: &Lineage,
    bytes: u64,
    sha: &str,
    source_path: Option<&str>,
    tmp: &Path,
) -> Result<StageOutcome, StageError> {
    let locked = corpus.lock()?;
    let index = locked.index();
    let agent = lineage.agent_id.as_deref();
    let staging = corpus.lane.staging_dir();
    let now = clock::now_unix_ns();
    let existing = index
        .staged_stem(&lineage.session_id, agent)
        .map_err(CorpusError::from)?;
    if let Some(stem) = existing {
        let sidecar_path = staging.join(format!("{stem}.stage.json"));
        let sc = StageSidecar::read(&sidecar_path).map_err(|why| StageError::CorruptSidecar {
            stem: stem.clone(),
            why,
        })?;
        if sc.raw_sha256 == sha {
            return Ok(StageOutcome::Unchanged { stem, bytes });
        }
        let blob = staging.join(format!("{stem}.raw"));
        rename_into_place(tmp, &blob)?;
        locked.append(&Event::Restaged(Restaged {
            stem: stem.clone(),
            raw_sha256: sha.to_owned(),
            bytes,
            replaced_sha256: sc.raw_sha256.clone(),
            replaced_bytes: sc.bytes,
            source_path: source_path.map(str::to_owned),
            staged_at_ns: now,
            adopted: false,
        }))?;
        return Ok(StageOutcome::Restaged {
            stem,
            bytes,
            replaced_bytes: sc.bytes,
        });
    }
    // Already captured with these exact bytes: nothing to stage.
    let idem = idem_key(sha, &lineage.session_id, agent, "native");
    if let Some(record) = index.record_for_idem(&idem).map_err(CorpusError::from)? {
        return Ok(StageOutcome::AlreadyStored { record, bytes });
    }
    let mut at = now;
    let mut stem = blob_stem(at, &lineage.session_id, agent);
    // Stems are unique: a clash (same key within one nanosecond tick) moves on.
    while staging.join(format!("{stem}.raw")).exists()
        || staging.join(format!("{stem}.stage.json")).exists()
    {
        at += 1;
        stem = blob_stem(at, &lineage.session_id, agent);
    }
    rename_into_place(tmp, &staging.join(format!("{stem}.raw")))?;
    locked.append(&Event::Staged(Staged {
        stem: stem.clone(),
        raw_sha256: sha.to_owned(),
        bytes,
        lineage: lineage.clone(),
        source_path: source_path.map(str::to_owned),
        staged_at_ns: at,
        adopted: false,
    }))?;
    Ok(StageOutcome::Staged { stem, bytes })
}

fn write_tmp_blob(dir: &Path, raw: &[u8]) -> Result<PathBuf, StageError> {
    let nonce = abcd_journal::EventId::random();
    let name = format!(
        ".stage-{}-{}.tmp",
        std::process::id(),
        hex::encode(&nonce.0[..8])
    );
    let path = dir.join(name);
    let io = |source| StageError::Io {
        path: path.clone(),
        source,
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io)?;
    // The mode is set exactly, whatever the umask.
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(io)?;
    f.write_all(raw).map_err(io)?;
    // Start writing the blob out now, but do not wait for it: the hook is
    // acknowledged once its `Staged` event is durable in the journal, and
    // until the kernel has written the blob back (milliseconds, at most the
    // dirty writeback interval) the harness's own transcript — kept for 30
    // days — holds the same bytes: after a power loss the drain recovers
    // them from `source_path`, verified against the journaled digest.
    // Waiting here would put a second 1 MiB-scale sync on every hook.
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; offset 0, length 0 = to end of file.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
    Ok(path)
}

fn rename_into_place(tmp: &Path, dest: &Path) -> Result<(), StageError> {
    if fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(StageError::Io {
            path: dest.to_path_buf(),
            source: std::io::Error::other("refusing to replace a symlink in staging"),
        });
    }
    // No directory fsync here: the blob's data is already synced, and the
    // journal append that follows commits the file system's log (ext4, xfs
    // and btrfs order metadata), which carries this rename with it. If a
    // file system did lose the rename, the drain recovers the bytes from the
    // source path when they still hash to the journaled digest.
    fs::rename(tmp, dest).map_err(|source| StageError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// One entry of the staging view.
#[derive(Debug, Clone, Serialize)]
pub struct StagedEntry {
    pub stem: String,
    pub path: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    pub bytes: u64,
    pub staged_at: String,
    #[serde(skip)]
    pub staged_at_ns: u64,
    pub overdue: bool,
    /// Why this entry cannot be drained (corrupt or missing sidecar).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip)]
    pub sidecar: Option<StageSidecar>,
}

impl StagedEntry {
    pub fn is_main_thread(&self) -> bool {
        self.agent_id.is_none()
    }
}

/// Lists staged entries, sorted by stem (first-arrival order).
pub fn list_staged(corpus: &Corpus, now_ns: u64) -> Result<Vec<StagedEntry>, StageError> {
    list_dir(&corpus.lane.staging_dir(), now_ns)
}

/// Lists quarantined entries, sorted by stem.
pub fn list_quarantined(corpus: &Corpus) -> Result<Vec<QuarantinedEntry>, StageError> {
    let dir = corpus.lane.quarantine_dir();
    let mut out = Vec::new();
    for stem in raw_stems(&dir)? {
        let sidecar = StageSidecar::read(&dir.join(format!("{stem}.stage.json"))).ok();
        let note =
            fsutil::guarded_read(&dir.join(format!("{stem}.quarantine.json")), SMALL_FILE_CAP)
                .ok()
                .and_then(|b| serde_json::from_slice::<crate::projection::QuarantineNote>(&b).ok());
        let bytes = fs::symlink_metadata(dir.join(format!("{stem}.raw")))
            .map(|m| m.len())
            .unwrap_or(0);
        let (session_id, agent_id) = match (&note, &sidecar, parse_blob_stem(&stem)) {
            (Some(n), _, _) if !n.session_id.is_empty() => {
                (n.session_id.clone(), n.agent_id.clone())
            }
            (_, Some(sc), _) => (sc.session_id.clone(), sc.agent_id.clone()),
            (_, _, Some((s, a))) => (s, a),
            _ => (String::new(), None),
        };
        out.push(QuarantinedEntry {
            path: dir.join(format!("{stem}.raw")).display().to_string(),
            stem,
            session_id,
            agent_id,
            bytes,
            reason: note.as_ref().map(|n| n.reason.clone()),
            quarantined_at: note.as_ref().map(|n| n.quarantined_at.clone()),
        });
    }
    Ok(out)
}

#[derive(Debug, Clone, Serialize)]
pub struct QuarantinedEntry {
    pub stem: String,
    pub path: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined_at: Option<String>,
}

fn raw_stems(dir: &Path) -> Result<Vec<String>, StageError> {
    stems(dir, &[".raw"])
}

/// Stems of the files in `dir` ending in any of `suffixes`, sorted, once each.
fn stems(dir: &Path, suffixes: &[&str]) -> Result<Vec<String>, StageError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StageError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut stems: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().is_ok_and(|t| t.is_file());
            (is_file && !name.starts_with('.'))
                .then(|| {
                    suffixes
                        .iter()
                        .find_map(|x| name.strip_suffix(x).map(str::to_owned))
                })
                .flatten()
        })
        .collect();
    stems.sort();
    stems.dedup();
    Ok(stems)
}

/// Lists the entries of a staging-shaped directory: every blob, and every
/// sidecar whose blob is missing (the drain recovers those from the source).
pub fn list_dir(dir: &Path, now_ns: u64) -> Result<Vec<StagedEntry>, StageError> {
    let mut out = Vec::new();
    for stem in stems(dir, &[".raw", ".stage.json"])? {
        let blob = dir.join(format!("{stem}.raw"));
        let bytes = fs::symlink_metadata(&blob).map(|m| m.len()).unwrap_or(0);
        let sidecar_path = dir.join(format!("{stem}.stage.json"));
        let entry = match StageSidecar::read(&sidecar_path) {
            Ok(sc) => {
                let at = sc.staged_at_ns();
                StagedEntry {
                    path: blob.display().to_string(),
                    session_id: sc.session_id.clone(),
                    agent_id: sc.agent_id.clone(),
                    agent_type: sc.agent_type.clone(),
                    bytes,
                    staged_at: sc.staged_at.clone(),
                    staged_at_ns: at,
                    overdue: at != 0 && now_ns.saturating_sub(at) > STAGED_TTL_NS,
                    error: None,
                    sidecar: Some(sc),
                    stem,
                }
            }
            Err(why) => {
                let (session_id, agent_id) = parse_blob_stem(&stem).unwrap_or_default();
                let why = if sidecar_path.exists() {
                    format!("corrupt sidecar: {why}")
                } else {
                    "not yet journaled (adopted by the next writer)".to_owned()
                };
                StagedEntry {
                    path: blob.display().to_string(),
                    session_id,
                    agent_id,
                    agent_type: None,
                    bytes,
                    staged_at: String::new(),
                    staged_at_ns: 0,
                    overdue: false,
                    error: Some(why),
                    sidecar: None,
                    stem,
                }
            }
        };
        out.push(entry);
    }
    Ok(out)
}
