//! Staging: where raw, unredacted transcripts wait for a drain.
//!
//! Owns: the stage operation (hooks), the session notes and gap sightings
//! the hooks journal beside it, the listing of staged and quarantined
//! entries and their drain order inputs. The `.stage.json` staging view is a
//! projection and lives in `staging_view`.
//!
//! Invariants:
//! - Staging never redacts (that is the drain's job) and never captures.
//! - A blob is written to a temporary file *outside* the store lock and
//!   never synced (see "Durability" in ARCHITECTURE.md: until the kernel
//!   writes it back, the harness's own transcript holds the same bytes and
//!   the drain recovers them by digest); under the lock it is renamed into
//!   place and journaled. A crash leaves a temporary file (removed once
//!   stale: never acknowledged) or a blob that the next `Corpus::refresh`
//!   adopts: never an untracked raw file.
//! - The digest journaled is the digest of exactly the bytes in the blob:
//!   one copy loop (`copy_source`, behind [`snapshot_file`] and [`stage`])
//!   reads each byte once, hashes it and writes that same buffer.
//! - Key = (session_id, agent_id): identical bytes are a no-op, different
//!   bytes replace the blob at the same stem (queue position kept).
//! - A present but corrupt sidecar is never drained or replaced.

use abcd_fsio::fault::Op;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::clock;
use crate::corpus::{Corpus, CorpusError};
use crate::event::{Event, GapSighted, Restaged, SessionNoted, Staged};
use crate::fsutil::SMALL_FILE_CAP;
use crate::fsutil::{self, FsError};
use crate::lineage::Lineage;
use crate::projection::idem_key;
pub use crate::staging_view::{blob_stem, parse_blob_stem, StageSidecar, RAW_CAP, STAGED_TTL_NS};
use crate::staging_view::{meta_path, StagedMeta};

#[derive(Debug, Error)]
pub enum StageError {
    #[error("refusing to stage an empty transcript ({path})")]
    Empty { path: String },
    #[error("{path} is not a Claude Code transcript: {why}; nothing was staged")]
    NotTranscript {
        path: String,
        why: crate::shape::NotTranscript,
    },
    #[error("transcript for session {session_id} is invalid: {why}")]
    Invalid { session_id: String, why: String },
    #[error("the staged entry {stem} has a corrupt sidecar ({why}); it is never replaced or drained — inspect it, then `abcd journal replay --rebuild` or `abcd history discard {stem}.raw --yes`")]
    CorruptSidecar { stem: String, why: String },
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The transcript itself could not be read (missing, a symlink, over
    /// the cap, …): nothing was staged.
    #[error(transparent)]
    Source(#[from] fsutil::GuardedReadError),
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error("write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StageError {
    /// Journaled, projections behind: see [`CorpusError::is_unprojected`].
    pub fn is_unprojected(&self) -> bool {
        matches!(self, StageError::Corpus(e) if e.is_unprojected())
    }
    /// Spooled, nothing lost: see [`CorpusError::is_spooled`].
    pub fn is_spooled(&self) -> bool {
        matches!(self, StageError::Corpus(e) if e.is_spooled())
    }
}

/// A session note younger than this is not rewritten (one stat and a tiny
/// read per hook); an older one is refreshed so a long session is never
/// pruned.
pub const NOTE_REFRESH_NS: u64 = 24 * 3600 * 1_000_000_000;

/// Notes that `session_id` ran in this repository (`SessionNoted`), unless a
/// note younger than [`NOTE_REFRESH_NS`] says so already. Returns whether an
/// event was journaled. The note lets a later hook whose working tree is
/// gone find this store.
pub fn note_session(corpus: &Corpus, session_id: &str, now_ns: u64) -> Result<bool, CorpusError> {
    let path = corpus
        .lane
        .sessions_dir()
        .join(&*crate::naming::session_note(session_id));
    let fresh = |p: &Path| {
        crate::projection::note_time(p).is_some_and(|t| now_ns.saturating_sub(t) < NOTE_REFRESH_NS)
    };
    if fresh(&path) {
        return Ok(false);
    }
    let l = corpus.lock()?;
    if fresh(&path) {
        return Ok(false);
    }
    l.append(&Event::SessionNoted(SessionNoted {
        session_id: session_id.to_owned(),
        noted_at_ns: now_ns,
    }))?;
    Ok(true)
}

/// Records that a SubagentStop payload carried no transcript path
/// (`SubagentGapSighted`; `history staged` reports the marker).
pub fn sight_gap(corpus: &Corpus, hook_event_name: String, now_ns: u64) -> Result<(), CorpusError> {
    corpus
        .lock()?
        .append(&Event::SubagentGapSighted(GapSighted {
            hook_event_name,
            seen_at_ns: now_ns,
        }))?;
    Ok(())
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

/// Stages bytes already in memory under (session, agent) with `lineage`:
/// the same copy (hashed as written) and the same decisions under the lock
/// as the hooks' [`snapshot_file`] + [`stage_snapshot`]. The blob is always
/// written: with nothing to re-read, there is no digest-only shortcut.
pub fn stage(
    corpus: &Corpus,
    lineage: &Lineage,
    raw: &[u8],
    source_path: Option<&str>,
) -> Result<StageOutcome, StageError> {
    check_input(lineage, source_path)?;
    let label = Path::new(source_path.unwrap_or("-"));
    let (sha, bytes, tmp) = copy_to_blob(raw, label, &corpus.lane.staging_dir(), raw.len() as u64)?;
    journal_snapshot(
        corpus,
        lineage,
        Snapshot {
            sha,
            bytes,
            copy: Copy::Written(tmp),
            source: source_path.map(str::to_owned),
        },
    )
}

fn check_input(lineage: &Lineage, source_path: Option<&str>) -> Result<(), StageError> {
    let invalid = |e: crate::lineage::LineageError| StageError::Invalid {
        session_id: lineage.session_id.clone(),
        why: e.to_string(),
    };
    lineage.validate().map_err(invalid)?;
    // Never echo an id that looks like a secret.
    let secret = |e: crate::lineage::LineageError| StageError::Invalid {
        session_id: "(withheld)".into(),
        why: e.to_string(),
    };
    crate::lineage::check_id_not_secret("session_id", Some(&lineage.session_id)).map_err(secret)?;
    crate::lineage::check_id_not_secret("agent_id", lineage.agent_id.as_deref()).map_err(secret)?;
    source_path.map_or(Ok(()), |p| check_source(&lineage.session_id, p))
}

/// The source path is journaled and written into a sidecar line by line.
fn check_source(session_id: &str, source: &str) -> Result<(), StageError> {
    if source.contains(['\n', '\r']) {
        return Err(StageError::Invalid {
            session_id: session_id.to_owned(),
            why: "the source path contains a line break".into(),
        });
    }
    Ok(())
}

/// Bytes per read when staging straight from a file: small enough that the
/// few buffers in flight stay resident (a whole-file buffer costs a page
/// fault per 4 KiB, a quarter of a millisecond per MiB), large enough that
/// a file at [`RAW_CAP`] is ~1000 reads.
const COPY_CHUNK: usize = 64 << 10;

/// Buffers in flight between the thread that reads and hashes and the one
/// that writes the blob: enough that neither waits for the other on a
/// steady stream.
const COPY_BUFFERS: usize = 4;

/// A transcript read once: the digest and size of exactly the bytes read,
/// and what became of them. Dropping it removes its temporary blob.
pub struct Snapshot {
    pub sha: String,
    pub bytes: u64,
    copy: Copy,
    source: Option<String>,
}

enum Copy {
    /// A temporary blob in `staging/` holding exactly those bytes.
    Written(TmpBlob),
    /// Only the digest was taken (the same size is already staged under
    /// this key); the file is read again if the bytes turn out to differ.
    DigestOnly(PathBuf),
}

/// A temporary blob, removed on drop unless renamed into place (the
/// removal then finds nothing).
struct TmpBlob(PathBuf);

impl Drop for TmpBlob {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Reads the transcript at `source` once (guarded: no symlink, FIFO or
/// device; refused whole over [`RAW_CAP`]), hashing it on this thread while
/// a second thread writes the same buffers to a temporary blob, so the
/// copy costs about the larger of read+hash and write, not their sum.
/// Every chunk is also given to `observe`, in order (the hooks' settle
/// check). Nothing is journaled until [`stage_snapshot`].
pub fn snapshot_file(
    corpus: &Corpus,
    session_id: &str,
    agent_id: Option<&str>,
    source: &str,
    observe: &mut dyn FnMut(&[u8]),
) -> Result<Snapshot, StageError> {
    snapshot(corpus, session_id, agent_id, source, observe, true)
}

/// [`snapshot_file`] of a spilled tool output (`<session>/tool-results/`):
/// text, not a transcript, so its shape is not checked (redaction still
/// refuses what is not UTF-8).
pub fn snapshot_spill(
    corpus: &Corpus,
    session_id: &str,
    agent_id: &str,
    source: &str,
) -> Result<Snapshot, StageError> {
    snapshot(
        corpus,
        session_id,
        Some(agent_id),
        source,
        &mut |_| {},
        false,
    )
}

fn snapshot(
    corpus: &Corpus,
    session_id: &str,
    agent_id: Option<&str>,
    source: &str,
    observe: &mut dyn FnMut(&[u8]),
    transcript: bool,
) -> Result<Snapshot, StageError> {
    check_source(session_id, source)?;
    let path = PathBuf::from(source);
    let (file, len) = fsutil::guarded_open(&path)?;
    if len > RAW_CAP {
        return Err(fsutil::GuardedReadError::OverCap {
            path,
            size: len,
            cap: RAW_CAP,
        }
        .into());
    }
    let write_to =
        (!likely_unchanged(corpus, session_id, agent_id, len)).then(|| corpus.lane.staging_dir());
    // The shape check reads the first chunk the copy reads anyway: no
    // extra system call on the hook path.
    let mut head: Option<Result<(), crate::shape::NotTranscript>> = None;
    let (sha, bytes, tmp) = copy_source(
        file,
        &path,
        write_to.as_deref(),
        writer_for(len),
        &mut |c: &[u8]| {
            if head.is_none() && transcript {
                head = Some(crate::shape::check_head(c, c.len() < COPY_CHUNK));
            }
            observe(c)
        },
    )?;
    // No chunk at all: an empty file, refused as such when staged.
    if let Some(Err(why)) = head {
        // Dropping the copy removes its temporary blob.
        return Err(StageError::NotTranscript {
            path: source.to_owned(),
            why,
        });
    }
    Ok(Snapshot {
        sha,
        bytes,
        copy: tmp.map_or(Copy::DigestOnly(path), Copy::Written),
        source: Some(source.to_owned()),
    })
}

/// Journals a snapshot under (session, agent) with `lineage`: the stage
/// decisions (no-op, already stored, stage, re-stage), made under the store
/// lock.
pub fn stage_snapshot(
    corpus: &Corpus,
    lineage: &Lineage,
    snap: Snapshot,
) -> Result<StageOutcome, StageError> {
    check_input(lineage, snap.source.as_deref())?;
    journal_snapshot(corpus, lineage, snap)
}

fn journal_snapshot(
    corpus: &Corpus,
    lineage: &Lineage,
    snap: Snapshot,
) -> Result<StageOutcome, StageError> {
    let src = snap.source.as_deref();
    let path = match &snap.copy {
        Copy::Written(tmp) => {
            return stage_locked(corpus, lineage, snap.bytes, &snap.sha, src, &tmp.0)
        }
        Copy::DigestOnly(path) => path,
    };
    {
        let locked = corpus.lock()?;
        if let Some(done) = already(&locked, lineage, &snap.sha, snap.bytes)? {
            return Ok(done);
        }
    }
    // Same size, other bytes: copy again (the file may have moved on since;
    // the new copy is what gets staged, with its own digest).
    let (file, _) = fsutil::guarded_open(path)?;
    let (sha, bytes, tmp) = copy_to_blob(file, path, &corpus.lane.staging_dir(), snap.bytes)?;
    stage_locked(corpus, lineage, bytes, &sha, src, &tmp.0)
}

/// Who writes the blob while this thread reads and hashes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Writer {
    /// A second thread takes the chunks this one has hashed, whenever it
    /// keeps up; a chunk it has no room for is written here instead (the
    /// writes are positioned, so their order does not matter). Idle cores
    /// overlap hashing with writing; on a busy machine the copy degrades
    /// to the inline one instead of waiting for the writer to be scheduled.
    Shared,
    /// This thread writes every chunk after hashing it (also the fallback
    /// when no thread can be started).
    Inline,
}

/// A second thread pays for itself (~50 µs to start) only past a few chunks.
fn writer_for(len: u64) -> Writer {
    if len > 2 * COPY_CHUNK as u64 {
        Writer::Shared
    } else {
        Writer::Inline
    }
}

/// [`copy_source`] into a temporary blob in `dir`, always written.
fn copy_to_blob(
    src: impl std::io::Read,
    path: &Path,
    dir: &Path,
    len: u64,
) -> Result<(String, u64, TmpBlob), StageError> {
    let (sha, bytes, tmp) = copy_source(src, path, Some(dir), writer_for(len), &mut |_| {})?;
    let tmp = tmp.ok_or_else(|| StageError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::other("no temporary blob was written"),
    })?;
    Ok((sha, bytes, tmp))
}

/// The copy loop behind [`snapshot_file`] and [`stage`]: hashes every byte
/// read from `src` (named `path` in errors) and, with `dest`, writes the
/// same buffers to a temporary blob there.
fn copy_source(
    mut src: impl std::io::Read,
    path: &Path,
    dest: Option<&Path>,
    writer: Writer,
    observe: &mut dyn FnMut(&[u8]),
) -> Result<(String, u64, Option<TmpBlob>), StageError> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::FileExt;
    use std::sync::mpsc::{sync_channel, TrySendError};
    use std::sync::Arc;
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut take = |buf: &[u8]| -> Result<(), StageError> {
        total += buf.len() as u64;
        if total > RAW_CAP {
            return Err(fsutil::GuardedReadError::GrewPastCap {
                path: path.to_path_buf(),
                cap: RAW_CAP,
            }
            .into());
        }
        hasher.update(buf);
        observe(buf);
        Ok(())
    };
    let mut read = |buf: &mut [u8]| {
        fsutil::read_full(&mut src, buf).map_err(|source| {
            StageError::Source(fsutil::GuardedReadError::Io {
                op: "read",
                path: path.to_path_buf(),
                source,
            })
        })
    };
    let tmp = match dest {
        None => {
            let mut buf = vec![0u8; COPY_CHUNK];
            loop {
                let n = read(&mut buf)?;
                if n == 0 {
                    break;
                }
                take(&buf[..n])?;
            }
            None
        }
        Some(dir) => {
            let tmp = TmpBlob(tmp_blob_path(dir));
            let io = |source| StageError::Io {
                path: tmp.0.clone(),
                source,
            };
            let (to_writer, chunks) = sync_channel::<(Vec<u8>, usize, u64)>(COPY_BUFFERS);
            let (give_back, spare) = sync_channel::<Vec<u8>>(COPY_BUFFERS);
            let (file_tx, file_rx) = sync_channel::<std::io::Result<Arc<fs::File>>>(1);
            let (done_tx, done_rx) = sync_channel::<std::io::Result<()>>(1);
            // The writer creates the file (off this thread's path), takes
            // chunks and reports; nothing waits for the thread to end.
            let shared = match writer {
                Writer::Inline => false,
                Writer::Shared => {
                    let path = tmp.0.clone();
                    std::thread::Builder::new()
                        .stack_size(WRITER_STACK)
                        .spawn(move || {
                            let file = match create_tmp_file(&path) {
                                Ok(f) => Arc::new(f),
                                Err(e) => {
                                    let _ = file_tx.send(Err(e));
                                    return;
                                }
                            };
                            let _ = file_tx.send(Ok(Arc::clone(&file)));
                            let mut result = Ok(());
                            for (buf, n, at) in chunks {
                                if result.is_ok() {
                                    result = abcd_fsio::fault::check(Op::Write, &path)
                                        .and_then(|()| file.write_all_at(&buf[..n], at));
                                }
                                // Never blocks: at most COPY_BUFFERS exist.
                                let _ = give_back.send(buf);
                            }
                            let _ = done_tx.send(result);
                        })
                        // No second thread to be had: everything is
                        // written here. Nothing joins it: its report
                        // comes through `done_rx`.
                        .is_ok()
                }
            };
            // This thread's handle on the file: created here when there is
            // no writer, else the writer's, fetched the first time this
            // thread has to write a chunk itself.
            let mut own: Option<Arc<fs::File>> = None;
            if !shared {
                own = Some(Arc::new(create_tmp_file(&tmp.0).map_err(io)?));
            }
            let mut made = 1;
            let mut stash: Vec<Vec<u8>> = Vec::new();
            let mut buf = vec![0u8; COPY_CHUNK];
            let mut at = 0u64;
            let copied = loop {
                let n = match read(&mut buf) {
                    Ok(0) => break Ok(()),
                    Ok(n) => n,
                    Err(e) => break Err(e),
                };
                if let Err(e) = take(&buf[..n]) {
                    break Err(e);
                }
                // Hand the chunk over if the writer has room and a fresh
                // buffer is at hand; otherwise write it here.
                let fresh = if shared {
                    stash.pop().or_else(|| spare.try_recv().ok()).or_else(|| {
                        (made < COPY_BUFFERS).then(|| {
                            made += 1;
                            vec![0u8; COPY_CHUNK]
                        })
                    })
                } else {
                    None
                };
                let mine = match fresh {
                    Some(next) => {
                        match to_writer.try_send((std::mem::replace(&mut buf, next), n, at)) {
                            Ok(()) => false,
                            Err(
                                TrySendError::Full((b, ..)) | TrySendError::Disconnected((b, ..)),
                            ) => {
                                stash.push(std::mem::replace(&mut buf, b));
                                true
                            }
                        }
                    }
                    None => true,
                };
                if mine {
                    if own.is_none() {
                        match file_rx.recv() {
                            Ok(Ok(f)) => own = Some(f),
                            Ok(Err(e)) => break Err(io(e)),
                            Err(_) => break Err(io(writer_gone())),
                        }
                    }
                    if let Some(f) = &own {
                        let w = abcd_fsio::fault::check(Op::Write, &tmp.0)
                            .and_then(|()| f.write_all_at(&buf[..n], at));
                        if let Err(e) = w {
                            break Err(io(e));
                        }
                    }
                }
                at += n as u64;
            };
            drop(to_writer);
            // The writer's report is awaited even when this side failed:
            // the temporary file is removed (on return) only once the
            // writer can no longer create or write it.
            let written = if !shared {
                Ok(())
            } else {
                match done_rx.recv() {
                    Ok(r) => r.map_err(io),
                    // The writer ended without a report: it could not
                    // create the file (it said why) or it panicked.
                    Err(_) => Err(io(match file_rx.try_recv() {
                        Ok(Err(e)) => e,
                        _ => writer_gone(),
                    })),
                }
            };
            copied?;
            written?;
            Some(tmp)
        }
    };
    if total == 0 {
        return Err(StageError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok((hex::encode(hasher.finalize()), total, tmp))
}

/// An unlocked peek: is an entry of the same size already staged under this
/// key? Only chooses the fast path; every decision is re-made under the lock.
fn likely_unchanged(corpus: &Corpus, session_id: &str, agent_id: Option<&str>, bytes: u64) -> bool {
    let Ok(Some(stem)) = corpus.index().staged_stem(session_id, agent_id) else {
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
    let idem = idem_key(sha, &lineage.session_id, agent, crate::record::KIND_NATIVE);
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
        let meta_sha256 = write_meta(&staging, &stem, lineage, source_path)?;
        let blob = staging.join(format!("{stem}.raw"));
        rename_into_place(tmp, &blob)?;
        locked.append(&Event::Restaged(Restaged {
            stem: stem.clone(),
            raw_sha256: sha.to_owned(),
            bytes,
            replaced_sha256: sc.raw_sha256.clone(),
            replaced_bytes: sc.bytes,
            meta_sha256,
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
    let idem = idem_key(sha, &lineage.session_id, agent, crate::record::KIND_NATIVE);
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
    // The metadata first: a blob orphaned by a crash finds it for adoption.
    let meta_sha256 = write_meta(&staging, &stem, lineage, source_path)?;
    rename_into_place(tmp, &staging.join(format!("{stem}.raw")))?;
    locked.append(&Event::Staged(Staged {
        stem: stem.clone(),
        raw_sha256: sha.to_owned(),
        bytes,
        session_id: lineage.session_id.clone(),
        agent_id: lineage.agent_id.clone(),
        meta_sha256,
        staged_at_ns: at,
        adopted: false,
    }))?;
    Ok(StageOutcome::Staged { stem, bytes })
}

/// Writes the staging metadata blob (`<stem>.meta.json`: everything the
/// harness supplied beside the bytes) and returns its digest. Not synced,
/// like the raw blob: after a power loss the drain still has the ids (in
/// the event) and re-reads the harness's own files.
fn write_meta(
    staging: &Path,
    stem: &str,
    lineage: &Lineage,
    source_path: Option<&str>,
) -> Result<String, StageError> {
    let meta = StagedMeta {
        lineage: lineage.clone(),
        source_path: source_path.map(str::to_owned),
    };
    let bytes = meta.to_bytes();
    fsutil::write_atomic(&meta_path(staging, stem), &bytes, false).map_err(CorpusError::from)?;
    Ok(fsutil::sha256_hex(&bytes))
}

/// A fresh temporary blob name in `dir` (`abcd_fsio::temp_path`: pid +
/// nonce, never reused; swept by the next drain once its writer is gone).
fn tmp_blob_path(dir: &Path) -> PathBuf {
    abcd_fsio::temp_path(dir, std::ffi::OsStr::new("stage"))
}

/// Creates `path` exclusively through the store's checked open (never
/// through a symlink, mode exactly 0600 whatever the umask).
fn create_tmp_file(path: &Path) -> std::io::Result<fs::File> {
    abcd_fsio::open(path, abcd_fsio::Access::CreateNew).map_err(|e| match e {
        fsutil::FsError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    })
}

fn writer_gone() -> std::io::Error {
    std::io::Error::other("the blob writer thread stopped without a report")
}

/// The writer thread's stack: it only loops over buffers it is handed.
const WRITER_STACK: usize = 64 << 10;

fn rename_into_place(tmp: &Path, dest: &Path) -> Result<(), StageError> {
    if fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(StageError::Io {
            path: dest.to_path_buf(),
            source: std::io::Error::other("refusing to replace a symlink in staging"),
        });
    }
    // Neither the blob nor this rename is synced: the journal append that
    // follows is the one durability point (fdatasync before the ack). If a
    // power loss drops the blob's data or the rename, the drain recovers the
    // bytes from the source path when they still hash to the journaled
    // digest (`drain::source_prefix`); see ARCHITECTURE.md, "Durability".
    fsutil::rename(tmp, dest)?;
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
            fsutil::read_private(&dir.join(format!("{stem}.quarantine.json")), SMALL_FILE_CAP)
                .ok()
                .and_then(|b| serde_json::from_slice::<crate::projection::QuarantineNote>(&b).ok());
        let bytes = fs::symlink_metadata(dir.join(format!("{stem}.raw")))
            .map(|m| m.len())
            .unwrap_or(0);
        let (session_id, agent_id) = match (&note, &sidecar, parse_blob_stem(&stem)) {
            (Some(n), _, _) if !n.session_id.is_empty() => {
                (n.session_id.clone(), n.agent_id.clone())
            }
            (_, Some(sc), _) => (sc.lineage.session_id.clone(), sc.lineage.agent_id.clone()),
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
                    session_id: sc.lineage.session_id.clone(),
                    agent_id: sc.lineage.agent_id.clone(),
                    agent_type: sc.lineage.agent_type.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage::{LineageSource, SpawnAttribution};

    fn agent(id: &str) -> Lineage {
        Lineage {
            session_id: "s1".into(),
            agent_id: Some(id.into()),
            lineage_source: Some(LineageSource::Hook),
            spawn_attribution: Some(SpawnAttribution::Unattributed),
            ..Lineage::default()
        }
    }

    fn staged_blob(corpus: &Corpus, stem: &str) -> Vec<u8> {
        fs::read(corpus.lane.staging_dir().join(format!("{stem}.raw"))).unwrap()
    }

    fn leftovers(corpus: &Corpus) -> Vec<String> {
        fs::read_dir(corpus.lane.staging_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    /// A body of several chunks whose size is not a multiple of the chunk.
    /// Transcript-shaped (its first line), then five chunks and a bit of
    /// text that differs by `seed`; the same length for every seed.
    fn body(seed: u8) -> Vec<u8> {
        let mut v = b"{\"type\":\"user\",\"sessionId\":\"s1\"}\n".to_vec();
        v.extend((0..COPY_CHUNK * 5 + 123).map(|i| {
            if i % 97 == 96 {
                b'\n'
            } else {
                b'a' + ((i as u8) ^ seed) % 26
            }
        }));
        v
    }

    #[test]
    fn both_writers_copy_exactly_the_bytes_they_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::open(tmp.path(), &"a".repeat(40)).unwrap();
        let src = tmp.path().join("agent.jsonl");
        let raw = body(3);
        fs::write(&src, &raw).unwrap();
        for writer in [Writer::Shared, Writer::Inline] {
            let mut seen = Vec::new();
            let (file, _) = fsutil::guarded_open(&src).unwrap();
            let (sha, bytes, blob) = copy_source(
                file,
                &src,
                Some(&corpus.lane.staging_dir()),
                writer,
                &mut |c| seen.extend_from_slice(c),
            )
            .unwrap();
            let blob = blob.expect("a blob was asked for");
            assert_eq!(fs::read(&blob.0).unwrap(), raw, "{writer:?}");
            assert_eq!(sha, fsutil::sha256_hex(&raw), "{writer:?}");
            assert_eq!(bytes, raw.len() as u64);
            assert_eq!(seen, raw, "the observer sees every byte in order");
            drop(blob);
        }
        assert!(leftovers(&corpus).is_empty(), "{:?}", leftovers(&corpus));
    }

    #[test]
    fn snapshots_stage_restage_and_no_op_like_stage() {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::open(tmp.path(), &"a".repeat(40)).unwrap();
        let src = tmp.path().join("agent-a1.jsonl");
        let src_s = src.to_str().unwrap();
        let v1 = body(1);
        fs::write(&src, &v1).unwrap();
        let snap = snapshot_file(&corpus, "s1", Some("a1"), src_s, &mut |_| {}).unwrap();
        assert!(matches!(snap.copy, Copy::Written(_)));
        let StageOutcome::Staged { stem, bytes } =
            stage_snapshot(&corpus, &agent("a1"), snap).unwrap()
        else {
            panic!("not staged")
        };
        assert_eq!(bytes, v1.len() as u64);
        assert_eq!(staged_blob(&corpus, &stem), v1);

        // The same bytes again: answered from the digest, no blob written.
        let snap = snapshot_file(&corpus, "s1", Some("a1"), src_s, &mut |_| {}).unwrap();
        assert!(
            matches!(snap.copy, Copy::DigestOnly(_)),
            "same size staged: digest only"
        );
        assert!(matches!(
            stage_snapshot(&corpus, &agent("a1"), snap).unwrap(),
            StageOutcome::Unchanged { .. }
        ));

        // Same size, other bytes: copied again and re-staged at the same stem.
        let v2 = body(2);
        assert_eq!(v1.len(), v2.len());
        fs::write(&src, &v2).unwrap();
        let snap = snapshot_file(&corpus, "s1", Some("a1"), src_s, &mut |_| {}).unwrap();
        assert!(matches!(snap.copy, Copy::DigestOnly(_)));
        let out = stage_snapshot(&corpus, &agent("a1"), snap).unwrap();
        assert_eq!(
            out,
            StageOutcome::Restaged {
                stem: stem.clone(),
                bytes: v2.len() as u64,
                replaced_bytes: v1.len() as u64
            }
        );
        assert_eq!(staged_blob(&corpus, &stem), v2);
        let sc = StageSidecar::read(&corpus.lane.staging_dir().join(format!("{stem}.stage.json")))
            .unwrap();
        assert_eq!(sc.raw_sha256, fsutil::sha256_hex(&v2));
        assert_eq!(sc.source_path.as_deref(), Some(src_s));
        assert!(leftovers(&corpus).is_empty(), "{:?}", leftovers(&corpus));
    }

    #[test]
    fn a_snapshot_dropped_unstaged_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::open(tmp.path(), &"a".repeat(40)).unwrap();
        let src = tmp.path().join("agent-a1.jsonl");
        fs::write(&src, body(4)).unwrap();
        let snap = snapshot_file(
            &corpus,
            "s1",
            Some("a1"),
            src.to_str().unwrap(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(leftovers(&corpus).len(), 1, "the temporary blob exists");
        drop(snap);
        assert!(leftovers(&corpus).is_empty());
    }

    #[test]
    fn snapshot_refusals_name_the_source_and_write_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::open(tmp.path(), &"a".repeat(40)).unwrap();
        let snap =
            |p: &Path| snapshot_file(&corpus, "s1", Some("a1"), p.to_str().unwrap(), &mut |_| {});
        let empty = tmp.path().join("empty.jsonl");
        fs::write(&empty, b"").unwrap();
        assert!(matches!(snap(&empty), Err(StageError::Empty { .. })));
        // Over the cap: refused from its size (sparse, so the test is cheap).
        let big = tmp.path().join("big.jsonl");
        fs::File::create(&big)
            .unwrap()
            .set_len(RAW_CAP + 1)
            .unwrap();
        assert!(matches!(
            snap(&big),
            Err(StageError::Source(fsutil::GuardedReadError::OverCap { .. }))
        ));
        let link = tmp.path().join("link.jsonl");
        std::os::unix::fs::symlink(&empty, &link).unwrap();
        assert!(matches!(
            snap(&link),
            Err(StageError::Source(fsutil::GuardedReadError::Symlink { .. }))
        ));
        assert!(matches!(
            snap(&tmp.path().join("missing.jsonl")),
            Err(StageError::Source(
                fsutil::GuardedReadError::NotFound { .. }
            ))
        ));
        assert!(matches!(
            snapshot_file(&corpus, "s1", Some("a1"), "/x\n/y", &mut |_| {}),
            Err(StageError::Invalid { .. })
        ));
        assert!(leftovers(&corpus).is_empty(), "{:?}", leftovers(&corpus));
        assert!(list_staged(&corpus, clock::now_unix_ns())
            .unwrap()
            .is_empty());
    }
}
