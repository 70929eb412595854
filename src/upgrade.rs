//! Upgrade: a lane written by the previous release (journal header version
//! 1, events of schema 1 carrying record bodies and the harness's lineage
//! in clear) becomes a version-2 lane with nothing lost.
//!
//! When: on the first open by any verb or hook (`Corpus::open`), under the
//! store lock, or explicitly with `abcd journal upgrade`. A store is small
//! next to a hook's budget only once, and a hook that loses the race waits
//! on the lock and then opens the upgraded journal; a hook killed midway
//! leaves a state the next open finishes (below).
//!
//! How, each step restartable:
//! 1. every schema-1 event is converted: record files go to `bodies/` (the
//!    exact bytes the v1 projection wrote), each live staged entry gets its
//!    metadata blob, and the events name both by digest; event ids and
//!    order are kept;
//! 2. the converted events are appended to a fresh version-2 journal in
//!    `journal.upgrade/` (durable);
//! 3. `journal/` is renamed to `journal.v1/`, then `journal.upgrade/` to
//!    `journal/` (each rename synced);
//! 4. every projection is rebuilt from the new journal and compared with
//!    the files the v1 projections had written (records, staging views,
//!    quarantine notes): any difference stops the upgrade with the old
//!    journal kept;
//! 5. `journal.v1/` — the last place the clear text lived — is removed.
//!
//! A `journal.v1/` found on open means a step after 3 did not finish: the
//! open completes it (restoring `journal/` first when step 3 was cut in
//! half). A `journal.upgrade/` beside a version-1 `journal/` is a step 2
//! that did not finish: it is removed and the upgrade starts over.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use abcd_journal::{EventId, FrameKind, Journal, JournalError};
use serde::Serialize;
use thiserror::Error;

use crate::body::{self, BodyError};
use crate::event::{self, v1, BodyRef, CaptureOutcome, Event, EventError};
use crate::fsutil::{self, FileLock, FsError};
use crate::lineage::Lineage;
use crate::projection::{self, ProjectionError};
use crate::record::{self, RecordMeta};
use crate::staging_view::{meta_path, StagedMeta};
use crate::store::Lane;

#[derive(Debug, Error)]
pub enum UpgradeError {
    #[error("the store at {lane} was written by an older abcd and cannot be upgraded until its journal is whole: {why}. Run `abcd journal verify`, then `abcd journal repair --yes`; the upgrade runs on the next open")]
    Damaged { lane: PathBuf, why: String },
    #[error("upgrade of {lane} did not reproduce every file byte for byte: {why}; nothing was deleted — the version-1 journal is kept in {kept} and unreproduced records in records.unjournaled/; please report this")]
    Mismatch {
        lane: PathBuf,
        why: String,
        kept: PathBuf,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(transparent)]
    Event(#[from] EventError),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
}

/// What an upgrade did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpgradeReport {
    pub lane: PathBuf,
    pub events: u64,
    pub bodies: u64,
    pub staged_metadata: u64,
    /// Projection files compared byte for byte before and after.
    pub files_compared: u64,
    /// Frames the v1 journal held that were not events (repair records) or
    /// did not decode (already reported as projection faults): not carried.
    pub frames_dropped: u64,
}

fn v1_dir(lane: &Lane) -> PathBuf {
    lane.dir.join("journal.v1")
}

fn next_dir(lane: &Lane) -> PathBuf {
    lane.dir.join("journal.upgrade")
}

fn journal_file(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// The header version of the journal file in `dir` (None: no file yet).
fn header_version(dir: &Path) -> Option<u16> {
    let bytes = fsutil::read_private_head(&journal_file(dir), 10).ok()?;
    (bytes.len() == 10).then(|| u16::from_le_bytes([bytes[8], bytes[9]]))
}

/// Whether an upgrade stopped after moving the old journal aside (its
/// `journal.v1/` is still there): the next open must finish it before
/// anything opens — or creates — `journal/journal`.
pub fn interrupted(lane: &Lane) -> bool {
    fs::symlink_metadata(v1_dir(lane)).is_ok()
}

/// Upgrades the lane if it needs it (one header read and one `stat` when it
/// does not). `Corpus::open` calls it only when the journal it opened is
/// version 1 or an upgrade was [`interrupted`]; `journal` verbs and
/// `abcd journal upgrade` call it before opening the journal.
pub fn ensure(lane: &Lane) -> Result<Option<UpgradeReport>, UpgradeError> {
    let journal = lane.journal_dir();
    let old = header_version(&journal) == Some(1);
    if !old && !interrupted(lane) {
        return Ok(None);
    }
    let _lock = FileLock::acquire(&lane.lock_path(), crate::store::STORE_LOCK_TIMEOUT)?;
    run_locked(lane).map(Some)
}

fn run_locked(lane: &Lane) -> Result<UpgradeReport, UpgradeError> {
    let journal_dir = lane.journal_dir();
    let v1 = v1_dir(lane);
    let next = next_dir(lane);
    // A step 3 cut in half: journal/ renamed away, the new one not yet in.
    if fs::symlink_metadata(&v1).is_ok() && header_version(&journal_dir).is_none() {
        if fs::symlink_metadata(&journal_dir).is_ok() {
            // The empty leaf a later open created.
            abcd_fsio::remove_tree(&journal_dir)?;
        }
        let from = if header_version(&next) == Some(abcd_journal::FORMAT_VERSION) {
            &next
        } else {
            &v1
        };
        fsutil::rename(from, &journal_dir)?;
        abcd_fsio::sync_dir(&lane.dir)?;
    }
    match header_version(&journal_dir) {
        Some(1) => convert(lane),
        // Steps 4-5 of an upgrade that was interrupted after step 3.
        _ if fs::symlink_metadata(&v1).is_ok() => finish(lane, UpgradeReport::default()),
        _ => Ok(UpgradeReport {
            lane: lane.dir.clone(),
            ..UpgradeReport::default()
        }),
    }
}

/// The projection files an upgrade must leave byte-identical.
fn snapshot(lane: &Lane) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for dir in [
        lane.records_dir(),
        lane.staging_dir(),
        lane.quarantine_dir(),
    ] {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // Blobs are not projections, and the metadata blobs are new.
            if name.starts_with('.') || name.ends_with(".raw") || name.ends_with(".meta.json") {
                continue;
            }
            if let Ok(b) = fsutil::read_private(&e.path(), projection::RECORD_READ_CAP) {
                out.insert(e.path(), b);
            }
        }
    }
    out
}

fn meta_of(l: &v1::Lineage) -> Lineage {
    Lineage {
        session_id: l.session_id.clone(),
        agent_id: l.agent_id.clone(),
        parent_agent_id: l.parent_agent_id.clone(),
        agent_type: l.agent_type.clone(),
        spawn_depth: l.spawn_depth,
        spawn_tool_use_id: l.spawn_tool_use_id.clone(),
        lineage_source: l.lineage_source,
        spawn_attribution: l.spawn_attribution,
    }
}

fn record_meta(m: &v1::RecordMeta) -> RecordMeta {
    RecordMeta {
        schema: m.schema,
        root_commit: m.root_commit.clone(),
        captured_at_ns: m.captured_at_ns,
        source_kind: m.source_kind.clone(),
        source_tool: m.source_tool.clone(),
        source_sha256: m.source_sha256.clone(),
        redacted_secrets: m.redacted_secrets,
        redacted_home_paths: m.redacted_home_paths,
        lineage: Lineage {
            session_id: m.session_id.clone(),
            agent_id: m.agent_id.clone(),
            parent_agent_id: m.parent_agent_id.clone(),
            agent_type: m.agent_type.clone(),
            spawn_depth: m.spawn_depth,
            spawn_tool_use_id: m.spawn_tool_use_id.clone(),
            lineage_source: m.lineage_source,
            spawn_attribution: m.spawn_attribution,
        },
        adopted_project: m.adopted_project.clone(),
        context_stamps: m.context_stamps.clone(),
        part: None,
    }
}

fn convert(lane: &Lane) -> Result<UpgradeReport, UpgradeError> {
    let damaged = |why: String| UpgradeError::Damaged {
        lane: lane.dir.clone(),
        why,
    };
    let old = Journal::open_existing(&lane.journal_dir())?;
    if let Some(d) = old.header_damage() {
        return Err(damaged(format!("its header is damaged ({d:?})")));
    }
    // Events an older writer parked in the spool are acknowledged: append
    // them to the old journal first, so the conversion carries them.
    old.drain_spool().map_err(|e| damaged(e.to_string()))?;
    let before = snapshot(lane);
    let mut report = UpgradeReport {
        lane: lane.dir.clone(),
        ..UpgradeReport::default()
    };
    let mut out: Vec<(EventId, Vec<u8>)> = Vec::new();
    // The current record file of each name (for a lineage migration) and
    // the current metadata of each staged stem.
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    let mut metas: HashMap<String, StagedMeta> = HashMap::new();
    let iter = old
        .read_from(&old.start())
        .map_err(|e| damaged(e.to_string()))?;
    for frame in iter {
        let frame = frame.map_err(|e| damaged(e.to_string()))?;
        if frame.kind != FrameKind::Event {
            report.frames_dropped += 1;
            continue;
        }
        let Ok(env) = v1::decode(&frame.payload) else {
            report.frames_dropped += 1;
            continue;
        };
        let ev = match env.event {
            v1::Event::Staged(s) => {
                let meta = StagedMeta {
                    lineage: meta_of(&s.lineage),
                    source_path: s.source_path.clone(),
                };
                let sha = fsutil::sha256_hex(&meta.to_bytes());
                metas.insert(s.stem.clone(), meta);
                Event::Staged(event::Staged {
                    stem: s.stem,
                    raw_sha256: s.raw_sha256,
                    bytes: s.bytes,
                    session_id: s.lineage.session_id,
                    agent_id: s.lineage.agent_id,
                    meta_sha256: sha,
                    staged_at_ns: s.staged_at_ns,
                    adopted: s.adopted,
                })
            }
            v1::Event::Restaged(r) => {
                let mut meta_sha256 = String::new();
                if let (Some(src), Some(m)) = (&r.source_path, metas.get_mut(&r.stem)) {
                    m.source_path = Some(src.clone());
                    meta_sha256 = fsutil::sha256_hex(&m.to_bytes());
                }
                Event::Restaged(event::Restaged {
                    stem: r.stem,
                    raw_sha256: r.raw_sha256,
                    bytes: r.bytes,
                    replaced_sha256: r.replaced_sha256,
                    replaced_bytes: r.replaced_bytes,
                    meta_sha256,
                    staged_at_ns: r.staged_at_ns,
                    adopted: r.adopted,
                })
            }
            v1::Event::Captured(c) => {
                let outcome = match c.outcome {
                    v1::CaptureOutcome::Stored {
                        record_name,
                        meta,
                        body,
                        supersedes,
                    } => {
                        let file = record::render(&record_meta(&meta), body.as_bytes());
                        let r = put(lane, &file, &mut report)?;
                        files.insert(record_name.clone(), file);
                        CaptureOutcome::Stored {
                            record_name,
                            body: r,
                            supersedes,
                        }
                    }
                    v1::CaptureOutcome::AlreadyStored { record_name } => {
                        CaptureOutcome::AlreadyStored { record_name }
                    }
                };
                Event::Captured(Box::new(event::Captured {
                    outcome,
                    retires: c.retires,
                    extended: c.extended,
                }))
            }
            v1::Event::Quarantined(q) => Event::Quarantined(q),
            v1::Event::Discarded(d) => Event::Discarded(event::Discarded {
                stem: d.stem,
                place: d.place,
                bytes: d.bytes,
            }),
            v1::Event::LineageMigrated(m) => {
                // The v1 projection rewrote the record's frontmatter and
                // kept its body: the same here, from the record's last file.
                let Some(prior) = files.get(&m.record_name) else {
                    report.frames_dropped += 1;
                    continue;
                };
                let Ok((_, body)) = record::parse(prior) else {
                    report.frames_dropped += 1;
                    continue;
                };
                let file = record::render(&record_meta(&m.meta), body);
                let r = put(lane, &file, &mut report)?;
                files.insert(m.record_name.clone(), file);
                Event::LineageMigrated(Box::new(event::LineageMigrated {
                    record_name: m.record_name,
                    body: r,
                }))
            }
            v1::Event::SessionNoted(n) => Event::SessionNoted(n),
            v1::Event::SubagentGapSighted(g) => Event::SubagentGapSighted(g),
        };
        out.push((frame.id, event::encode(env.at_ns, &ev)?));
    }
    drop(old);
    body::sync(lane)?;
    // Metadata blobs of the entries still staged or quarantined.
    for (stem, meta) in &metas {
        for dir in [lane.staging_dir(), lane.quarantine_dir()] {
            if dir.join(format!("{stem}.raw")).exists() {
                fsutil::write_atomic(&meta_path(&dir, stem), &meta.to_bytes(), true)?;
                report.staged_metadata += 1;
            }
        }
    }
    // Step 2: the new journal, durable, beside the old one.
    let next = next_dir(lane);
    if fs::symlink_metadata(&next).is_ok() {
        abcd_fsio::remove_tree(&next)?;
    }
    fsutil::ensure_private_dir(&next)?;
    {
        let j = Journal::open(&next)?;
        for chunk in out.chunks(1024) {
            let refs: Vec<(EventId, &[u8])> =
                chunk.iter().map(|(id, p)| (*id, p.as_slice())).collect();
            j.append_batch(&refs)?;
        }
    }
    report.events = out.len() as u64;
    // What a repair or a torn append set aside in the old journal's
    // directory is evidence for an operator: it goes with the journal
    // (format-1 bytes, as the old journal had them).
    {
        let from = lane.journal_dir();
        for name in ["journal.torn", "journal.quarantine"] {
            if fs::symlink_metadata(from.join(name)).is_ok() {
                fsutil::rename(&from.join(name), &next.join(name))?;
            }
        }
    }
    // Step 3.
    let v1 = v1_dir(lane);
    if fs::symlink_metadata(&v1).is_ok() {
        abcd_fsio::remove_tree(&v1)?;
    }
    fsutil::rename(&lane.journal_dir(), &v1)?;
    abcd_fsio::sync_dir(&lane.dir)?;
    fsutil::rename(&next, &lane.journal_dir())?;
    abcd_fsio::sync_dir(&lane.dir)?;
    report.files_compared = before.len() as u64;
    compare_after_rebuild(lane, &before)?;
    finish(lane, report)
}

fn put(lane: &Lane, file: &[u8], report: &mut UpgradeReport) -> Result<BodyRef, UpgradeError> {
    let r = body::put_unsynced(lane, file)?;
    report.bodies += 1;
    Ok(r)
}

/// Step 4: rebuild from the new journal and prove the files unchanged.
fn compare_after_rebuild(
    lane: &Lane,
    before: &BTreeMap<PathBuf, Vec<u8>>,
) -> Result<(), UpgradeError> {
    let journal = Journal::open_existing(&lane.journal_dir())?;
    let r = projection::rebuild(lane, &journal)?;
    let after = snapshot(lane);
    let mut why = Vec::new();
    if !r.set_aside.is_empty() {
        why.push(format!(
            "{} record(s) not reproduced (kept in records.unjournaled/)",
            r.set_aside.len()
        ));
    }
    for (path, bytes) in before {
        match after.get(path) {
            Some(b) if b == bytes => {}
            Some(_) => why.push(format!("{} differs", path.display())),
            None => why.push(format!("{} is missing", path.display())),
        }
    }
    if why.is_empty() {
        return Ok(());
    }
    // Keep the v1 journal aside (not where an open would finish the
    // upgrade again): the store runs on the new journal, every record the
    // new one does not reproduce is in records.unjournaled/, and the old
    // events are there to inspect.
    let kept = lane.dir.join("journal.v1-kept");
    if fs::symlink_metadata(&kept).is_ok() {
        abcd_fsio::remove_tree(&kept)?;
    }
    fsutil::rename(&v1_dir(lane), &kept)?;
    abcd_fsio::sync_dir(&lane.dir)?;
    Err(UpgradeError::Mismatch {
        lane: lane.dir.clone(),
        why: why.join("; "),
        kept,
    })
}

/// Step 5 (and the end of an interrupted upgrade): the projections match
/// the new journal; the old journal goes.
fn finish(lane: &Lane, mut report: UpgradeReport) -> Result<UpgradeReport, UpgradeError> {
    if report.events == 0 {
        // Resumed after step 3: rebuild once more (idempotent).
        let journal = Journal::open_existing(&lane.journal_dir())?;
        projection::rebuild(lane, &journal)?;
    }
    let v1 = v1_dir(lane);
    if fs::symlink_metadata(&v1).is_ok() {
        abcd_fsio::remove_tree(&v1)?;
        abcd_fsio::sync_dir(&lane.dir)?;
    }
    report.lane = lane.dir.clone();
    Ok(report)
}
