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
use crate::predecessor::{self, Imported};

/// A failed import of an older abcd's store (boxed: the error is rare).
#[derive(Debug, Error)]
#[error(transparent)]
pub struct PredecessorFailed(Box<predecessor::PredecessorError>);

impl From<predecessor::PredecessorError> for PredecessorFailed {
    fn from(e: predecessor::PredecessorError) -> Self {
        PredecessorFailed(Box::new(e))
    }
}
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
    #[error("importing the store an older abcd left: {0}")]
    Predecessor(#[from] PredecessorFailed),
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
    /// Set for a hook's open: a predecessor's store is imported in bounded
    /// slices (`predecessor::Slice`), one per process: once this process
    /// has imported its slice (`import_spent`), its later locks leave the
    /// rest to the next hook.
    import_slice: Option<predecessor::Slice>,
    import_spent: std::sync::atomic::AtomicBool,
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
            import_slice: None,
            import_spent: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// [`Corpus::open`] for a hook: an older abcd's store found on this
    /// lane is imported one bounded slice per lock (`predecessor::Slice`),
    /// so a hook keeps to its budget; the next open carries on.
    pub fn open_for_hook(home: &Path, root_sha: &str) -> Result<Corpus, CorpusError> {
        let mut c = Corpus::open(home, root_sha)?;
        c.import_slice = Some(predecessor::Slice::for_hook());
        Ok(c)
    }

    /// Opens an existing corpus without creating anything.
    pub fn open_existing(home: &Path, root_sha: &str) -> Result<Option<Corpus>, CorpusError> {
        if Lane::open_existing(home, root_sha)?.is_none() {
            // An older abcd's flat layout (`history/<sha>/`) and no lane
            // yet: opening creates the lane and imports it.
            if crate::store::validate_root_sha(root_sha).is_ok()
                && predecessor::flat_has_content(home, root_sha)
            {
                return Corpus::open(home, root_sha).map(Some);
            }
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
            import_slice: None,
            import_spent: std::sync::atomic::AtomicBool::new(false),
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
        let imported = self.adopt_legacy()?;
        let caught_up = projection::catch_up(&self.lane, &self.journal)?;
        Ok(Locked {
            corpus: self,
            _lock: lock,
            caught_up,
            adopted: Vec::new(),
            imported,
        })
    }

    /// Makes every projection written so far durable and records the
    /// synced checkpoint.
    pub fn sync_projections(&self) -> Result<(), CorpusError> {
        let _l = FileLock::acquire(&self.lane.lock_path(), STORE_LOCK_TIMEOUT)?;
        projection::sync(&self.lane)?;
        Ok(())
    }

    /// First open of a lane an older abcd wrote (records, staged and
    /// quarantined files, session notes, in its current layout here or its
    /// flat one under `history/<sha>/`, but no journal): journal what is
    /// there so the journal becomes the source of truth and nothing is lost
    /// by the first rebuild (`predecessor`). Records are journaled as they
    /// are (same file name, metadata and body); staged blobs keep the
    /// lineage their old sidecars carry. Restartable: a pending marker
    /// stays in the lane until the last event is appended, and the next
    /// open finishes the import without journaling anything twice. Caller
    /// holds the lock.
    fn adopt_legacy(&self) -> Result<Option<Imported>, CorpusError> {
        let pending = self.lane.dir.join(IMPORT_PENDING);
        let fresh = projection::read_checkpoint(&self.lane).is_none()
            && projection::read_synced_checkpoint(&self.lane).is_none()
            && self.journal.head()?.seq == 0;
        let resuming = !fresh && fs::symlink_metadata(&pending).is_ok();
        let report_path = self.lane.dir.join(predecessor::REPORT_FILE);
        // A lane already in use whose repository also has an older abcd's
        // flat store that was never imported (a few stats per lock): only
        // the flat layout is read (the lane's own files are journaled).
        let late = !fresh
            && !resuming
            && predecessor::flat_has_content(&self.home, &self.lane.root_sha)
            && fs::symlink_metadata(&report_path).is_err();
        if !fresh && !resuming && !late {
            return Ok(None);
        }
        let slice = self.import_slice;
        if slice.is_some() && self.import_spent.load(std::sync::atomic::Ordering::Relaxed) {
            // This process imported its slice already; the next one goes on.
            return Ok(None);
        }
        let done = if fresh {
            predecessor::Journaled::default()
        } else {
            predecessor::Journaled::read(&self.journal).map_err(PredecessorFailed::from)?
        };
        if fresh && slice.is_some() {
            // The records are imported over several locks: moved aside so
            // the projection holds only what is journaled meanwhile.
            predecessor::hold_records(&self.lane).map_err(PredecessorFailed::from)?;
        }
        let mut plan = predecessor::plan(&self.home, &self.lane, &done, !late, slice)
            .map_err(PredecessorFailed::from)?;
        // An import in slices: this slice's report adds to the earlier
        // ones' (their records have left the held directory).
        let earlier = if resuming {
            fsutil::read_private(&report_path, REPORT_CAP)
                .ok()
                .and_then(|b| serde_json::from_slice::<Imported>(&b).ok())
                .filter(|r| r.unfinished)
        } else {
            None
        };
        plan.report.slices = earlier.as_ref().map_or(0, |r| r.slices) + 1;
        if let Some(e) = earlier {
            plan.report.merge_earlier(e);
        }
        let write_report = |report: &Imported| -> Result<(), CorpusError> {
            let mut text = serde_json::to_vec_pretty(report).expect("report serialises");
            text.push(b'\n');
            fsutil::write_atomic(&report_path, &text, false)?;
            Ok(())
        };
        // The last slice of a sliced import: what the journal reproduced
        // leaves the held directory, anything else is kept aside.
        let release_held = || -> Result<(), CorpusError> {
            let held = predecessor::held_dir(&self.lane);
            if fs::symlink_metadata(&held).is_ok() {
                projection::catch_up(&self.lane, &self.journal)?;
                projection::reconcile_set_aside(&self.lane, &held)?;
            }
            Ok(())
        };
        if plan.events.is_empty() && !resuming {
            release_held()?;
            if late {
                // Nothing importable (every file left, and said why): not
                // tried again on every lock.
                write_report(&plan.report)?;
            }
            return Ok((!plan.report.is_empty()).then_some(plan.report));
        }
        // Every body the events name is on disk before the first of them.
        if fs::symlink_metadata(crate::body::dir(&self.lane)).is_ok() {
            crate::body::sync(&self.lane)?;
        }
        if !resuming {
            fsutil::write_atomic(&pending, b"", true)?;
        }
        let now = clock::now_unix_ns();
        let mut batch: Vec<(EventId, Vec<u8>)> = Vec::with_capacity(plan.events.len());
        for ev in &plan.events {
            batch.push((EventId::random(), event::encode(now, ev)?));
        }
        for chunk in batch.chunks(1024) {
            let refs: Vec<(EventId, &[u8])> =
                chunk.iter().map(|(id, p)| (*id, p.as_slice())).collect();
            self.journal.append_batch(&refs)?;
        }
        // The held copies of what a slice journaled go once it is
        // projected (after its report names them), so the last slice
        // reconciles only what is left.
        let drop_held = || -> Result<(), CorpusError> {
            projection::catch_up(&self.lane, &self.journal)?;
            predecessor::drop_reproduced(&self.lane, &plan.events)
                .map_err(PredecessorFailed::from)?;
            Ok(())
        };
        if slice.is_some() {
            self.import_spent
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if plan.more {
            // The pending marker stays: the next open carries on.
            write_report(&plan.report)?;
            drop_held()?;
            return Ok(Some(plan.report));
        }
        if slice.is_some() {
            drop_held()?;
        }
        release_held()?;
        write_report(&plan.report)?;
        fsutil::remove_file_if_exists(&pending)?;
        Ok(Some(plan.report))
    }

    /// Brings projections up to date and adopts orphan blobs (a crashed
    /// writer's blob renamed into place without its event), then releases
    /// the lock. Every drain and every user verb starts here.
    pub fn refresh(&self) -> Result<(CatchUp, Vec<String>), CorpusError> {
        self.refresh_reporting().map(|r| (r.caught_up, r.adopted))
    }

    /// [`Corpus::refresh`], also saying what a first open imported from an
    /// older abcd's store (the CLI prints it).
    pub fn refresh_reporting(&self) -> Result<Refreshed, CorpusError> {
        let l = self.lock()?.adopt_orphans()?;
        // A catch-up with work to do is the trace a dead projection writer
        // leaves (see `Sweep::Thorough`).
        let crashed = l.caught_up.applied > 0 || l.caught_up.rebuilt;
        self.sweep_temps(if crashed {
            Sweep::Thorough
        } else {
            Sweep::Small
        })?;
        Ok(Refreshed {
            caught_up: l.caught_up.clone(),
            adopted: l.adopted.clone(),
            imported: l.imported.clone(),
        })
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

/// What a refresh did besides catching up.
#[derive(Debug, Clone)]
pub struct Refreshed {
    pub caught_up: CatchUp,
    /// Orphan blobs adopted as staged.
    pub adopted: Vec<String>,
    /// A first open's import of an older abcd's store.
    pub imported: Option<Imported>,
}

/// Cap on reading back an unfinished import's report (a record name is
/// under 250 bytes: room for a million of them).
const REPORT_CAP: u64 = 256 << 20;

/// Marker kept in the lane while an import of an older abcd's store is
/// being journaled (see `Corpus::adopt_legacy`).
pub const IMPORT_PENDING: &str = "predecessor-import.pending";

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
    /// Blob file names adopted as orphans (reported to the user).
    pub adopted: Vec<String>,
    /// What the first open imported from an older abcd's store.
    pub imported: Option<Imported>,
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
        self.append_with_id(event, EventId::random())
    }

    /// [`Locked::append`] under a caller-chosen id (`sync` derives it from
    /// the published event's id): an id already in the journal is a no-op
    /// that returns the existing seq.
    pub fn append_with_id(&self, event: &Event, id: EventId) -> Result<u64, CorpusError> {
        let at = clock::now_unix_ns();
        let payload = event::encode(at, event)?;
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
        self.append_encoded(events.iter().map(|e| (e, EventId::random())))
    }

    /// Appends events under caller-chosen ids as one atomic batch (one
    /// write, one fdatasync), then applies them. Ids already in the journal
    /// (or repeated) are skipped. `sync` imports through it: each event was
    /// decided against the projections plus the batch before it. Returns
    /// the sequence number of each event, in order.
    pub fn append_batch_with_ids(
        &self,
        events: &[(Event, EventId)],
    ) -> Result<Vec<u64>, CorpusError> {
        self.append_encoded(events.iter().map(|(e, id)| (e, *id)))
    }

    /// The batch append both entry points share.
    fn append_encoded<'e>(
        &self,
        events: impl Iterator<Item = (&'e Event, EventId)>,
    ) -> Result<Vec<u64>, CorpusError> {
        let at = clock::now_unix_ns();
        let mut payloads = Vec::new();
        for (ev, id) in events {
            payloads.push((id, event::encode(at, ev)?));
        }
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        let refs: Vec<(EventId, &[u8])> =
            payloads.iter().map(|(i, p)| (*i, p.as_slice())).collect();
        let acks = match self.corpus.journal.append_batch(&refs) {
            Ok(a) => a,
            Err(e @ JournalError::LockTimeout { .. }) => {
                let spool_path = self.corpus.journal.spool(&refs)?;
                return Err(CorpusError::Spooled {
                    why: e.to_string(),
                    spool_path,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let seqs: Vec<u64> = acks.iter().map(Appended::seq).collect();
        match projection::catch_up(&self.corpus.lane, &self.corpus.journal) {
            Ok(c) => match c.faults.iter().find(|f| seqs.contains(&f.seq)) {
                None => Ok(seqs),
                Some(f) => Err(CorpusError::Unprojected {
                    seq: f.seq,
                    why: f.reason.clone(),
                }),
            },
            Err(e) => Err(CorpusError::Unprojected {
                seq: seqs.iter().copied().max().unwrap_or(0),
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
