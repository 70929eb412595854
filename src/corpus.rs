//! One repository's corpus: its lane on disk, its journal and its store lock.
//!
//! Owns: opening a lane's journal, the store lock that makes
//! "catch up, decide, append, apply" atomic across processes, and adopting
//! blobs a crash left without a journal entry.
//!
//! Invariants:
//! - Only `Locked::append` appends domain events, and it applies them to the
//!   projections before the lock is released, so every process that takes
//!   the lock sees projections that match the journal.
//! - The store lock is never held while redacting (that is the slow part);
//!   callers redact first, then lock, re-check and decide.

use std::fs;
use std::path::{Path, PathBuf};

use abcd_journal::{Appended, EventId, Journal, JournalError};
use thiserror::Error;

use crate::clock;
use crate::event::{self, Event, EventError, Staged};
use crate::fsutil::{self, FileLock, FsError};
use crate::lineage::{Lineage, SpawnAttribution};
use crate::projection::{self, CatchUp, Index, ProjectionError};
use crate::staging_view::{meta_path, parse_blob_stem, StageSidecar, StagedMeta, RAW_CAP};
use crate::store::{Lane, StoreError};

pub use crate::store::STORE_LOCK_TIMEOUT;

#[derive(Debug, Error)]
pub enum CorpusError {
    /// A batch of captures could not be journaled as a whole (the first
    /// error, once per capture in it); nothing of it was appended.
    #[error("the batch this capture was in could not be journaled: {why}")]
    Batch { why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    #[error(transparent)]
    Event(#[from] EventError),
    #[error(transparent)]
    Body(#[from] crate::body::BodyError),
    #[error(transparent)]
    Upgrade(Box<crate::upgrade::UpgradeError>),
    #[error("{why}; the event was spooled to {} and will be appended by the next writer", spool_path.display())]
    Spooled { why: String, spool_path: PathBuf },
    /// The append succeeded (the event is durable in the journal) but the
    /// projections could not take it in: the caller reports success with a
    /// warning, never "failed".
    #[error("the event is journaled (seq {seq}) but the projections could not apply it ({why}); nothing is lost — `abcd journal verify` reports it and `abcd journal replay --rebuild` retries it")]
    Unprojected { seq: u64, why: String },
}

impl CorpusError {
    /// The event was journaled but the projections did not catch up: it is
    /// acknowledged (a later catch-up applies it), so callers report success
    /// with this as a warning.
    pub fn is_unprojected(&self) -> bool {
        matches!(self, CorpusError::Unprojected { .. })
    }

    /// The journal refused the append and the event was written durably to
    /// the spool instead: nothing is lost; the next writer (or a repair)
    /// appends it.
    pub fn is_spooled(&self) -> bool {
        matches!(
            self,
            CorpusError::Spooled { .. } | CorpusError::Journal(JournalError::CorruptSpooled { .. })
        )
    }
}

pub struct Corpus {
    pub home: PathBuf,
    pub lane: Lane,
    pub journal: Journal,
}

impl Corpus {
    /// Opens (creating as needed) the corpus of the repository `root_sha`.
    pub fn open(home: &Path, root_sha: &str) -> Result<Corpus, CorpusError> {
        let lane = Lane::open(home, root_sha)?;
        let journal = open_journal(&lane)?;
        Ok(Corpus {
            home: home.to_path_buf(),
            lane,
            journal,
        })
    }

    /// Opens an existing corpus without creating anything.
    pub fn open_existing(home: &Path, root_sha: &str) -> Result<Option<Corpus>, CorpusError> {
        if Lane::open_existing(home, root_sha)?.is_none() {
            return Ok(None);
        }
        // The lane exists: make sure every leaf does too (an older abcd
        // created fewer of them).
        let lane = Lane::open(home, root_sha)?;
        let journal = open_journal(&lane)?;
        Ok(Some(Corpus {
            home: home.to_path_buf(),
            lane,
            journal,
        }))
    }

    pub fn index(&self) -> Index<'_> {
        Index::new(&self.lane)
    }

    /// Takes the store lock and brings the projections up to date. Does not
    /// scan `staging/` for orphan blobs: that scan grows with the staging
    /// backlog, and a staging hook must cost the same whatever the backlog.
    /// [`Corpus::refresh`] (every drain and every user verb) adopts them.
    pub fn lock(&self) -> Result<Locked<'_>, CorpusError> {
        let lock = FileLock::acquire(&self.lane.lock_path(), STORE_LOCK_TIMEOUT)?;
        let legacy = self.adopt_legacy()?;
        let caught_up = projection::catch_up(&self.lane, &self.journal)?;
        Ok(Locked {
            corpus: self,
            _lock: lock,
            caught_up,
            adopted: legacy,
        })
    }

    /// Makes every projection written so far durable and records the
    /// synced checkpoint.
    pub fn sync_projections(&self) -> Result<(), CorpusError> {
        let _l = FileLock::acquire(&self.lane.lock_path(), STORE_LOCK_TIMEOUT)?;
        projection::sync(&self.lane)?;
        Ok(())
    }

    /// First open of a lane an older abcd wrote (records and staged files
    /// but no journal): journal what is there so the journal becomes the
    /// source of truth and nothing is lost by the first rebuild. Records are
    /// journaled as they are (same file name, metadata and body); staged
    /// blobs keep the lineage their old sidecars carry. Caller holds the lock.
    fn adopt_legacy(&self) -> Result<Vec<String>, CorpusError> {
        if projection::read_checkpoint(&self.lane).is_some()
            || projection::read_synced_checkpoint(&self.lane).is_some()
            || self.journal.head()?.seq != 0
        {
            return Ok(Vec::new());
        }
        let mut adopted = Vec::new();
        let mut batch: Vec<(EventId, Vec<u8>)> = Vec::new();
        let now = clock::now_unix_ns();
        let records = self.lane.records_dir();
        let mut names: Vec<String> = fs::read_dir(&records)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        for name in names {
            let Ok(bytes) = fsutil::read_private(&records.join(&name), projection::RECORD_READ_CAP)
            else {
                continue;
            };
            if crate::record::parse(&bytes).is_err() {
                continue; // kept aside by the rebuild, never deleted
            }
            // The file as it is: the body is its exact bytes.
            let body = crate::body::put(&self.lane, &bytes)?;
            let ev = Event::Captured(Box::new(crate::event::Captured {
                outcome: crate::event::CaptureOutcome::Stored {
                    record_name: name.clone(),
                    body,
                    supersedes: Vec::new(),
                },
                retires: None,
                extended: false,
            }));
            batch.push((EventId::random(), event::encode(now, &ev)?));
            adopted.push(name);
        }
        let staging = self.lane.staging_dir();
        let mut stems: Vec<String> = fs::read_dir(&staging)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter_map(|n| n.strip_suffix(".raw").map(str::to_owned))
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        stems.sort();
        for stem in stems {
            let Ok(sc) = StageSidecar::read_any(&staging.join(format!("{stem}.stage.json"))) else {
                continue; // no sidecar: adopted as an orphan after catch-up
            };
            let Ok(bytes) = fsutil::read_private(&staging.join(format!("{stem}.raw")), RAW_CAP)
            else {
                continue;
            };
            let meta = StagedMeta {
                lineage: sc.lineage.clone(),
                source_path: sc.source_path.clone(),
            };
            let meta_sha256 = write_staged_meta(&staging, &stem, &meta)?;
            let ev = Event::Staged(Staged {
                stem: stem.clone(),
                raw_sha256: fsutil::sha256_hex(&bytes),
                bytes: bytes.len() as u64,
                session_id: sc.lineage.session_id.clone(),
                agent_id: sc.lineage.agent_id.clone(),
                meta_sha256,
                staged_at_ns: sc.staged_at_ns(),
                adopted: true,
            });
            batch.push((EventId::random(), event::encode(now, &ev)?));
            adopted.push(format!("{stem}.raw"));
        }
        for chunk in batch.chunks(1024) {
            let refs: Vec<(EventId, &[u8])> =
                chunk.iter().map(|(id, p)| (*id, p.as_slice())).collect();
            self.journal.append_batch(&refs)?;
        }
        Ok(adopted)
    }

    /// Brings projections up to date and adopts orphan blobs (a crashed
    /// writer's blob renamed into place without its event), then releases
    /// the lock. Every drain and every user verb starts here.
    pub fn refresh(&self) -> Result<(CatchUp, Vec<String>), CorpusError> {
        let l = self.lock()?.adopt_orphans()?;
        // A catch-up with work to do is the trace a dead projection writer
        // leaves (see `Sweep::Thorough`).
        let crashed = l.caught_up.applied > 0 || l.caught_up.rebuilt;
        self.sweep_temps(if crashed {
            Sweep::Thorough
        } else {
            Sweep::Small
        })?;
        Ok((l.caught_up.clone(), l.adopted.clone()))
    }

    /// Removes the temporary files of dead writers in the lane
    /// (`abcd_fsio::sweep_stale_temps`: a writer killed between creating a
    /// temporary and renaming it into place, or a failed write on a full
    /// disk). Such a file was never renamed into place, so nothing in it was
    /// acknowledged; a live writer's temporary is left alone. Every refresh
    /// (each drain and user verb) sweeps the small directories, and all of
    /// them when its catch-up found a dead writer's trace; repair and
    /// rebuild sweep everything (see [`Sweep`]). Returns what it removed.
    pub fn sweep_temps(&self, how: Sweep) -> Result<Vec<PathBuf>, CorpusError> {
        sweep_lane_temps(&self.lane, how)
    }
}

/// Rebuilds every projection of `lane` from `journal` under the store lock
/// (`journal replay --rebuild`, and after a `journal repair`), then sweeps
/// the temporaries of dead writers.
pub fn rebuild_projections(lane: &Lane, journal: &Journal) -> Result<CatchUp, CorpusError> {
    let lock = FileLock::acquire(&lane.lock_path(), STORE_LOCK_TIMEOUT)?;
    let r = projection::rebuild(lane, journal)?;
    drop(lock);
    sweep_lane_temps(lane, Sweep::Thorough)?;
    Ok(r)
}

/// How much of a lane a sweep lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// The directories that stay small whatever the store's size (staging,
    /// quarantine, the journal's own directories, the lane itself, the top
    /// of `index/`): a killed hook's blob temporary, a failed journal
    /// side-file or checkpoint write.
    Small,
    /// Also `records/`, `sessions/` and the tables under `index/`, which grow
    /// with the number of records. Their temporaries are only ever written
    /// by a projection writer holding the store lock after an append, so a
    /// dead one leaves the checkpoint behind the journal: a refresh whose
    /// catch-up had work to do (or rebuilt) sweeps them, as do repair and
    /// rebuild. Listing them on every refresh would make every user verb
    /// and every hook drain O(records).
    Thorough,
}

/// Removes the temporaries of dead writers in `lane` (see
/// [`Corpus::sweep_temps`] and [`Sweep`]).
pub fn sweep_lane_temps(lane: &Lane, how: Sweep) -> Result<Vec<PathBuf>, CorpusError> {
    let journal = lane.journal_dir();
    let mut dirs = vec![
        lane.dir.clone(),
        lane.staging_dir(),
        lane.quarantine_dir(),
        // Its top level only: the checkpoints, faults and gap state (the
        // checkpoints are written after the events they cover are applied,
        // so a writer killed there leaves no catch-up behind it).
        lane.index_dir(),
        journal.join("journal.torn"),
        journal.join("journal.quarantine"),
        journal.join("journal.spool"),
        journal,
    ];
    if how == Sweep::Thorough {
        dirs.extend([
            lane.records_dir(),
            lane.sessions_dir(),
            lane.dir.join("records.unjournaled"),
        ]);
        // The index's tables are one level below `index/`.
        if let Ok(rd) = fs::read_dir(lane.index_dir()) {
            for entry in rd.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(entry.path());
                }
            }
        }
    }
    let mut removed = Vec::new();
    for dir in dirs {
        removed.extend(abcd_fsio::sweep_stale_temps(&dir)?);
    }
    Ok(removed)
}

/// The store lock, held. Dropping it releases the lock.
pub struct Locked<'a> {
    pub corpus: &'a Corpus,
    _lock: FileLock,
    pub caught_up: CatchUp,
    /// Blob file names adopted while taking the lock (reported to the user).
    pub adopted: Vec<String>,
}

impl Locked<'_> {
    pub fn lane(&self) -> &Lane {
        &self.corpus.lane
    }

    pub fn index(&self) -> Index<'_> {
        Index::new(&self.corpus.lane)
    }

    /// Appends one event durably and applies it to the projections.
    /// Returns the journal sequence number. When the append succeeded but
    /// the projections could not take the event in (a transient error, or
    /// a fault recorded for it), returns [`CorpusError::Unprojected`].
    pub fn append(&self, event: &Event) -> Result<u64, CorpusError> {
        let at = clock::now_unix_ns();
        let payload = event::encode(at, event)?;
        let id = EventId::random();
        let seq = match self.corpus.journal.append(id, &payload) {
            Ok(Appended::New { seq }) | Ok(Appended::AlreadyPresent { seq }) => seq,
            // Something held the journal's own lock too long (a repair, a
            // stuck process): park the event durably in the spool, which
            // the next append drains, rather than lose it.
            Err(e @ JournalError::LockTimeout { .. }) => {
                let spool_path = self.corpus.journal.spool(&[(id, &payload)])?;
                return Err(CorpusError::Spooled {
                    why: e.to_string(),
                    spool_path,
                });
            }
            Err(e) => return Err(e.into()),
        };
        match projection::catch_up(&self.corpus.lane, &self.corpus.journal) {
            Ok(c) => match c.faults.iter().find(|f| f.seq == seq) {
                None => Ok(seq),
                Some(f) => Err(CorpusError::Unprojected {
                    seq,
                    why: f.reason.clone(),
                }),
            },
            Err(e) => Err(CorpusError::Unprojected {
                seq,
                why: e.to_string(),
            }),
        }
    }

    /// Appends events as one atomic batch (one write, one `fdatasync`) and
    /// then catches the projections up once: for bulk writers (ingest).
    /// Returns their sequence numbers in order; an event the projections
    /// could not take in is reported as for [`Self::append`].
    pub fn append_batch(&self, events: &[Event]) -> Result<Vec<u64>, CorpusError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let at = clock::now_unix_ns();
        let mut encoded = Vec::with_capacity(events.len());
        for e in events {
            encoded.push((EventId::random(), event::encode(at, e)?));
        }
        let batch: Vec<(EventId, &[u8])> =
            encoded.iter().map(|(i, p)| (*i, p.as_slice())).collect();
        let acks = match self.corpus.journal.append_batch(&batch) {
            Ok(a) => a,
            Err(e @ JournalError::LockTimeout { .. }) => {
                let spool_path = self.corpus.journal.spool(&batch)?;
                return Err(CorpusError::Spooled {
                    why: e.to_string(),
                    spool_path,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let seqs: Vec<u64> = acks
            .iter()
            .map(|a| match a {
                Appended::New { seq } | Appended::AlreadyPresent { seq } => *seq,
            })
            .collect();
        match projection::catch_up(&self.corpus.lane, &self.corpus.journal) {
            Ok(c) => match c.faults.iter().find(|f| seqs.contains(&f.seq)) {
                None => Ok(seqs),
                Some(f) => Err(CorpusError::Unprojected {
                    seq: f.seq,
                    why: f.reason.clone(),
                }),
            },
            Err(e) => Err(CorpusError::Unprojected {
                seq: seqs.last().copied().unwrap_or(0),
                why: e.to_string(),
            }),
        }
    }

    /// A blob in `staging/` with no sidecar was written by a writer that
    /// died before journaling it, or by an older binary: adopt it as staged
    /// (never delete raw text). Also removes temporary blobs whose writer is
    /// gone.
    fn adopt_orphans(mut self) -> Result<Self, CorpusError> {
        let dir = self.corpus.lane.staging_dir();
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(_) => return Ok(self),
        };
        let mut orphans = Vec::new();
        for entry in rd.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".raw") else {
                continue;
            };
            if dir.join(format!("{stem}.stage.json")).exists() {
                continue;
            }
            orphans.push(stem.to_owned());
        }
        orphans.sort();
        for stem in orphans {
            let path = dir.join(format!("{stem}.raw"));
            let Some((session_id, agent_id)) = parse_blob_stem(&stem) else {
                // A name we cannot attribute stays where it is; `history
                // staged` lists it as not drainable.
                continue;
            };
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_file() => m,
                _ => continue,
            };
            let bytes = match fsutil::read_private(&path, RAW_CAP) {
                Ok(b) => b,
                Err(_) => continue,
            };
            let staged_at_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as u64)
                .unwrap_or_else(clock::now_unix_ns);
            // The writer that died wrote the metadata blob before the raw
            // blob: use it when it names this key, else the ids alone.
            let meta = StagedMeta::read(&meta_path(&dir, &stem), "")
                .ok()
                .filter(|m| m.lineage.session_id == session_id && m.lineage.agent_id == agent_id)
                .unwrap_or_else(|| StagedMeta {
                    lineage: Lineage {
                        session_id: session_id.clone(),
                        spawn_attribution: agent_id
                            .as_ref()
                            .map(|_| SpawnAttribution::Unattributed),
                        agent_id: agent_id.clone(),
                        ..Lineage::default()
                    },
                    source_path: None,
                });
            let Ok(meta_sha256) = write_staged_meta(&dir, &stem, &meta) else {
                continue;
            };
            let ev = Event::Staged(Staged {
                stem: stem.clone(),
                raw_sha256: fsutil::sha256_hex(&bytes),
                bytes: bytes.len() as u64,
                session_id,
                agent_id,
                meta_sha256,
                staged_at_ns,
                adopted: true,
            });
            // Best effort: a journal that refuses appends (damage found by
            // verify) must not make the store unreadable; the blob stays and
            // is adopted by a later lock holder. An event journaled but not
            // applied stops adoption too (the next one would fail alike).
            match self.append(&ev) {
                Ok(_) => {}
                Err(CorpusError::Unprojected { .. }) => {
                    self.adopted.push(format!("{stem}.raw"));
                    break;
                }
                Err(_) => break,
            }
            self.adopted.push(format!("{stem}.raw"));
        }
        Ok(self)
    }
}

/// Opens the lane's journal, upgrading a version-1 one first. The version
/// comes from the header `Journal::open` reads anyway, so a hook pays one
/// `stat` (for an interrupted upgrade), not a second header read.
fn open_journal(lane: &Lane) -> Result<Journal, CorpusError> {
    // Before `Journal::open`, which would create an empty journal where an
    // interrupted upgrade left none.
    if crate::upgrade::interrupted(lane) {
        crate::upgrade::ensure(lane)?;
    }
    let journal = Journal::open(&lane.journal_dir())?;
    if journal.format_version() == 1 {
        drop(journal);
        crate::upgrade::ensure(lane)?;
        return Ok(Journal::open(&lane.journal_dir())?);
    }
    Ok(journal)
}

impl From<crate::upgrade::UpgradeError> for CorpusError {
    fn from(e: crate::upgrade::UpgradeError) -> Self {
        CorpusError::Upgrade(Box::new(e))
    }
}

/// Writes the staging metadata blob of `stem` in `dir` (0600, durable: the
/// event that names it follows) and returns its digest.
pub fn write_staged_meta(dir: &Path, stem: &str, meta: &StagedMeta) -> Result<String, CorpusError> {
    let bytes = meta.to_bytes();
    fsutil::write_atomic(&meta_path(dir, stem), &bytes, true)?;
    Ok(fsutil::sha256_hex(&bytes))
}

/// Reads back the sidecar of a stem, for callers that hold the lock.
pub fn sidecar(lane: &Lane, stem: &str) -> Result<StageSidecar, String> {
    StageSidecar::read(&lane.staging_dir().join(format!("{stem}.stage.json")))
}
