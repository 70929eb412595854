//! Directory lanes: naming them, and moving them into their repository's
//! lane once its directory has a root commit.
//!
//! Owns: the `DirectoryNamed` event of a directory lane (its directory,
//! redacted, journaled once; the lane registered in the directory-lane
//! index `store::dir_lane_index`), and the move: every live record, staged
//! entry and session note of a directory lane whose directory is a work
//! tree with a commit now (or lies inside one) journaled into that
//! repository's lane — records re-redacted with the repository's scanner
//! under their original idempotency key, staged blobs staged again, notes
//! noted again — and then one `LaneMoved` event in the directory lane that
//! removes them there.
//!
//! Crash-safe by order and idempotency: everything reaches the repository
//! lane before the directory lane journals that it moved; a move killed at
//! any step is finished by the next one (a record already moved is
//! `AlreadyStored` under the same key, a staged blob with the same bytes is
//! `Unchanged`, a note is noted again), and the index entry goes last.
//!
//! Must never: run `git` (callers resolve first; the common path — a
//! repository with a commit and no directory lane — costs one failed
//! `open` of the index directory), move a quarantined entry (it stays,
//! unredacted, where the user was told it is), or remove anything from the
//! directory lane that the repository lane has not journaled.

use std::path::Path;

use thiserror::Error;

use crate::capture::{self, CaptureError};
use crate::clock;
use crate::corpus::{Corpus, CorpusError};
use crate::event::{DirectoryNamed, Event, LaneMoved};
use crate::fsutil;
use crate::projection::RECORD_READ_CAP;
use crate::record;
use crate::repo::RepoInfo;
use crate::stage::{self, StageError};
use crate::staging_view::RAW_CAP;
use crate::store::{self, LaneKind, StoreError};

#[derive(Debug, Error)]
pub enum LaneMoveError {
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the directory lane's path cannot be recorded: {0}")]
    Label(String),
    #[error("listing the directory lane {lane} for its move: {why}")]
    List { lane: String, why: String },
}

/// What one move did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Moved {
    /// The directory lane's key.
    pub from: String,
    /// The repository lane's key.
    pub to: String,
    pub records: usize,
    pub staged: usize,
    pub sessions: usize,
    /// Quarantined entries left in the directory lane.
    pub quarantined_left: usize,
    /// Records or staged entries that could not move (each with why);
    /// they stay in the directory lane and the next move retries them.
    pub failed: Vec<String>,
}

/// After a caller resolved `info` and opened its `corpus`: a directory lane
/// is named (once); a repository lane takes in every directory lane
/// waiting inside its work tree. The one entry point of hooks and verbs.
pub fn settle(home: &Path, info: &RepoInfo, corpus: &Corpus) -> Result<Vec<Moved>, LaneMoveError> {
    match info.kind {
        // A lane named by its key (`--repo dir-<hex>`) has no directory
        // at hand: it was named when it was made.
        LaneKind::Directory if !info.root.is_absolute() => Ok(Vec::new()),
        LaneKind::Directory => {
            name_directory(home, &info.root_sha, &info.root, corpus)?;
            Ok(Vec::new())
        }
        LaneKind::Repository => move_pending(home, info, corpus),
    }
}

/// Journals `DirectoryNamed` in a directory lane that has none, and
/// registers the lane in the index. Cheap when done: one read of
/// `index/directory.json` and one stat of the index file.
pub fn name_directory(
    home: &Path,
    key: &str,
    dir: &Path,
    corpus: &Corpus,
) -> Result<(), LaneMoveError> {
    // Registered first: a lane whose directory cannot be recorded (the
    // redaction refused the path) is still moved when its time comes.
    store::register_directory_lane(home, key, dir)?;
    if corpus
        .lane
        .directory()
        .is_none_or(|d| d.directory.is_empty())
    {
        let label = redacted_label(dir)?;
        let locked = corpus.lock()?;
        if locked
            .corpus
            .lane
            .directory()
            .is_none_or(|d| d.directory.is_empty())
        {
            locked.append(&Event::DirectoryNamed(DirectoryNamed {
                directory: label,
                named_at_ns: clock::now_unix_ns(),
            }))?;
        }
    }
    Ok(())
}

/// The directory as a lane records it: its path through the same two-stage
/// redaction as a record's scalars (the home directory and user name become
/// placeholders), with the directory's own scanner.
fn redacted_label(dir: &Path) -> Result<String, LaneMoveError> {
    let text = dir.to_string_lossy();
    let scanner = capture::scanner_for(dir);
    let out = scanner
        .redact_parts(&[text.as_ref()])
        .map_err(|e| LaneMoveError::Label(e.to_string()))?;
    let label = out.into_iter().next().map(|r| r.text).unwrap_or_default();
    if label.is_empty() || label.chars().any(char::is_control) {
        return Err(LaneMoveError::Label(
            "it is empty or holds control characters".into(),
        ));
    }
    Ok(label)
}

/// Moves every directory lane registered inside `info`'s work tree into
/// `corpus` (the repository lane). Nothing registered: no work.
pub fn move_pending(
    home: &Path,
    info: &RepoInfo,
    corpus: &Corpus,
) -> Result<Vec<Moved>, LaneMoveError> {
    let mut out = Vec::new();
    for key in store::directory_lanes_within(home, &info.root) {
        out.push(move_lane(home, &key, info, corpus)?);
    }
    Ok(out)
}

/// Moves the directory lane `key` into `to` (the lane of `info`).
fn move_lane(home: &Path, key: &str, info: &RepoInfo, to: &Corpus) -> Result<Moved, LaneMoveError> {
    let mut moved = Moved {
        from: key.to_string(),
        to: info.root_sha.clone(),
        ..Moved::default()
    };
    let Some(from) = Corpus::open_existing(home, key)? else {
        store::unregister_directory_lane(home, key)?;
        return Ok(moved);
    };
    let list_err = |why: String| LaneMoveError::List {
        lane: key.to_string(),
        why,
    };
    // Held for the whole move: nothing is staged into or drained from the
    // directory lane meanwhile.
    let locked = from.lock()?;
    let now = clock::now_unix_ns();

    // Records: re-redacted with the repository's scanner, their original
    // source digest kept (the idempotency key), oldest first.
    let mut records = Vec::new();
    for name in file_names(&from.lane.records_dir()).map_err(list_err)? {
        let path = from.lane.records_dir().join(&name);
        let bytes = match fsutil::read_private(&path, RECORD_READ_CAP) {
            Ok(b) => b,
            Err(e) => {
                moved.failed.push(format!("record {name}: {e}"));
                continue;
            }
        };
        match record::parse(&bytes) {
            Ok((meta, body)) => records.push((name, meta, body.to_vec())),
            Err(e) => moved.failed.push(format!("record {name}: {e}")),
        }
    }
    records.sort_by(|a, b| (a.1.captured_at_ns, &a.0).cmp(&(b.1.captured_at_ns, &b.0)));
    let scanner = capture::scanner_for(&info.root);
    let mut names = Vec::new();
    let mut prepared = Vec::new();
    for (name, meta, body) in records {
        match capture::prepare(
            &scanner,
            &meta.lineage,
            &body,
            &info.root_sha,
            &meta.source_kind,
        ) {
            Ok(mut p) => {
                p.meta.source_sha256 = meta.source_sha256.clone();
                p.meta.source_tool = meta.source_tool.clone();
                p.meta.adopted_project = meta.adopted_project.clone();
                p.meta.context_stamps = meta.context_stamps.clone();
                p.meta.redacted_secrets += meta.redacted_secrets;
                p.meta.redacted_home_paths += meta.redacted_home_paths;
                names.push(name);
                prepared.push(p);
            }
            Err(e) => moved.failed.push(format!("record {name}: {e}")),
        }
    }
    let mut moved_records = Vec::new();
    if !prepared.is_empty() {
        let repo_locked = to.lock()?;
        let results = capture::commit_batch(&repo_locked, prepared);
        drop(repo_locked);
        for (name, r) in names.into_iter().zip(results) {
            match r {
                Ok(_) => moved_records.push(name),
                Err(e @ CaptureError::Corpus(CorpusError::Unprojected { .. })) => {
                    // Journaled: it moved; the warning stays in the report.
                    moved
                        .failed
                        .push(format!("record {name}: moved; warning: {e}"));
                    moved_records.push(name);
                }
                Err(e) => moved.failed.push(format!("record {name}: {e}")),
            }
        }
    }

    // Staged entries: the raw blob staged again under the same lineage.
    let mut moved_staged = Vec::new();
    let staged = stage::list_staged(&from, now).map_err(|e| list_err(e.to_string()))?;
    for e in staged {
        let Some(sc) = e.sidecar.as_ref().filter(|_| e.error.is_none()) else {
            moved.failed.push(format!(
                "staged {}: {}",
                e.stem,
                e.error.as_deref().unwrap_or("no sidecar")
            ));
            continue;
        };
        let raw_path = from.lane.staging_dir().join(format!("{}.raw", e.stem));
        let raw = match fsutil::read_private(&raw_path, RAW_CAP) {
            Ok(b) => b,
            Err(err) => {
                moved.failed.push(format!("staged {}: {err}", e.stem));
                continue;
            }
        };
        match stage::stage(to, &sc.lineage, &raw, sc.source_path.as_deref()) {
            Ok(_) => moved_staged.push(e.stem.clone()),
            Err(err @ StageError::Corpus(CorpusError::Unprojected { .. })) => {
                moved
                    .failed
                    .push(format!("staged {}: moved; warning: {err}", e.stem));
                moved_staged.push(e.stem.clone());
            }
            Err(err) => moved.failed.push(format!("staged {}: {err}", e.stem)),
        }
    }

    // Session notes: so the repository lane answers for these sessions
    // (a sub-agent whose worktree is gone resolves through them).
    let mut sessions = Vec::new();
    for s in file_names(&from.lane.sessions_dir()).map_err(list_err)? {
        if !crate::lineage::is_valid_id(&s) {
            continue;
        }
        match stage::note_session(to, &s, now) {
            Ok(_) => sessions.push(s),
            Err(e) if e.is_unprojected() => sessions.push(s),
            Err(e) => moved.failed.push(format!("session note {s}: {e}")),
        }
    }

    moved.quarantined_left = stage::list_quarantined(&from).map(|q| q.len()).unwrap_or(0);
    moved.records = moved_records.len();
    moved.staged = moved_staged.len();
    moved.sessions = sessions.len();
    if !(moved_records.is_empty() && moved_staged.is_empty() && sessions.is_empty()) {
        let ev = Event::LaneMoved(Box::new(LaneMoved {
            to_root: info.root_sha.clone(),
            records: moved_records,
            staged: moved_staged,
            sessions,
            moved_at_ns: now,
        }));
        match locked.append(&ev) {
            Ok(_) => {}
            Err(e) if e.is_unprojected() => {
                moved
                    .failed
                    .push(format!("the move is journaled; warning: {e}"));
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Unregistered under the lane's lock: a hook that resolved here before
    // the commit and stages after this move re-registers the lane when it
    // is done (`settle` after staging), so its entry is moved next time.
    if moved.failed.iter().all(|f| f.contains("moved; warning")) {
        store::unregister_directory_lane(home, key)?;
    }
    drop(locked);
    Ok(moved)
}

/// The regular files of a projection directory (no temporaries), sorted.
fn file_names(dir: &Path) -> Result<Vec<String>, String> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        out.push(name);
    }
    out.sort();
    Ok(out)
}
