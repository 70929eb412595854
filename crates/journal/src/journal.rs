//! The journal handle: creation, the locked append protocol, recovery of a
//! torn tail, refusal + spooling on damage (mid-file, a complete last frame
//! that fails its CRC, a damaged header), the event-id index and reading
//! from a Position.
//!
//! Owns: every write to `journal`, `journal.ids`, `journal.torn/`,
//! `journal.corrupt` and spool draining. Must never interpret payloads, never
//! truncate anything but a proven torn tail (or, in `repair`, a range it has
//! first copied to quarantine), and never acknowledge an append before
//! fdatasync returned.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::error::JournalError;
use crate::format::{
    self, FileHeader, FrameKind, FrameSpec, Reason, HEADER_LEN, MAX_BATCH_BYTES, MAX_BATCH_EVENTS,
    MAX_PAYLOAD,
};
use crate::index::{self, IdIndex};
use crate::scan::{self, Expect, Scanner, Step, TailShape};
use crate::spool;
use crate::sys;

/// Event id chosen by the producer and reused on retry; the journal
/// guarantees at most one frame per id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub [u8; 16]);

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl EventId {
    /// A fresh random id (getrandom / /dev/urandom).
    pub fn random() -> EventId {
        EventId(sys::random_bytes::<16>())
    }
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// A point in the journal: just after the frame with `seq` (seq 0 = before
/// the first frame), at byte `offset`, where `hash` is the SHA-256 of that
/// frame (of the file header for seq 0). A consumer checkpoints a Position
/// and resumes with [`Journal::read_from`], which checks the hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Position {
    pub seq: u64,
    pub offset: u64,
    pub hash: [u8; 32],
}

/// One frame as yielded by a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub seq: u64,
    pub id: EventId,
    pub ts_unix_ns: u64,
    pub kind: FrameKind,
    pub payload: Vec<u8>,
    /// Byte offset of the frame in the file.
    pub offset: u64,
    /// Frame length in bytes (header + padded payload + trailer).
    pub len: u64,
    /// Position just after this frame.
    pub end: Position,
}

/// Outcome of appending one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Written now with this seq.
    New { seq: u64 },
    /// The id was already in the journal at this seq; nothing was written.
    AlreadyPresent { seq: u64 },
}

impl Appended {
    pub fn seq(&self) -> u64 {
        match self {
            Appended::New { seq } | Appended::AlreadyPresent { seq } => *seq,
        }
    }
}

/// Where the appender calls fdatasync relative to the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Unlock after write(), then fdatasync: concurrent writers' syncs are
    /// merged by the filesystem. Default, chosen by measurement (see
    /// journal-format/README.md, figures).
    OutsideLock,
    /// fdatasync while holding the lock.
    InsideLock,
}

/// Tuning and deterministic test hooks.
#[derive(Debug, Clone)]
pub struct Options {
    pub sync: SyncMode,
    pub lock_timeout: Duration,
    /// Test hook: journal_id for a newly created journal (golden vectors).
    pub fixed_journal_id: Option<[u8; 16]>,
    /// Test hook: when set, frame timestamps are `base + seq * 1000` and the
    /// header's created time is `base / 1_000_000`, making output bytes
    /// reproducible.
    pub fixed_clock_ns: Option<u64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            sync: SyncMode::OutsideLock,
            lock_timeout: sys::LOCK_TIMEOUT,
            fixed_journal_id: None,
            fixed_clock_ns: None,
        }
    }
}

/// Names of the files in a journal directory.
pub(crate) struct Paths {
    pub dir: PathBuf,
    pub journal: PathBuf,
    pub lock: PathBuf,
    pub ids: PathBuf,
    pub spool: PathBuf,
    pub torn: PathBuf,
    pub quarantine: PathBuf,
    pub corrupt: PathBuf,
}

impl Paths {
    pub fn new(dir: &Path) -> Paths {
        Paths {
            dir: dir.to_path_buf(),
            journal: dir.join("journal"),
            lock: dir.join("journal.lock"),
            ids: dir.join("journal.ids"),
            spool: dir.join("journal.spool"),
            torn: dir.join("journal.torn"),
            quarantine: dir.join("journal.quarantine"),
            corrupt: dir.join("journal.corrupt"),
        }
    }
}

/// An open journal directory. Cheap to open; safe to share between threads
/// (an in-process mutex complements the cross-process flock, which does not
/// exclude threads sharing one descriptor).
pub struct Journal {
    pub(crate) p: Paths,
    pub(crate) header: FileHeader,
    pub(crate) header_hash: [u8; 32],
    /// The header's 64 bytes as they must be on disk (the recovered
    /// original when the stored ones are damaged).
    pub(crate) header_bytes: [u8; HEADER_LEN],
    /// Set when the stored header was damaged at open and recovered in
    /// memory (journal-format §4.1): readers use the proven original,
    /// writers refuse and spool until `repair` rewrites it.
    pub(crate) header_damage: Option<scan::HeaderDamage>,
    pub(crate) file: File,
    lock_file: File,
    pub(crate) opts: Options,
    mutex: Mutex<()>,
}

/// Held while the cross-process lock is held.
pub(crate) struct Locked<'a> {
    j: &'a Journal,
    _g: MutexGuard<'a, ()>,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        sys::unlock(&self.j.lock_file);
    }
}

/// Result of the writer's tail check.
pub(crate) enum Tail {
    Ok(Position),
    /// Nothing valid after `valid`; bytes `[valid.offset, size)` are torn.
    Torn {
        valid: Position,
        size: u64,
    },
    /// Mid-file damage at `offset`.
    Corrupt {
        offset: u64,
        reason: Reason,
    },
}

/// State established under the lock before writing.
pub(crate) struct Ready {
    pub head: Position,
    pub idx: IdIndex,
}

/// Why a writer refuses to append.
pub(crate) struct Refusal {
    offset: u64,
    reason: String,
}

impl Journal {
    /// Open the journal in `dir`, creating the directory (0700) and an empty
    /// journal if missing.
    pub fn open(dir: &Path) -> Result<Journal, JournalError> {
        Self::open_with(dir, Options::default())
    }

    /// Open an existing journal; `NotFound` if there is none.
    pub fn open_existing(dir: &Path) -> Result<Journal, JournalError> {
        let p = Paths::new(dir);
        if std::fs::symlink_metadata(&p.journal).is_err() {
            return Err(JournalError::NotFound(p.journal));
        }
        Self::open_with(dir, Options::default())
    }

    /// `open` with explicit options.
    pub fn open_with(dir: &Path, opts: Options) -> Result<Journal, JournalError> {
        let p = Paths::new(dir);
        sys::ensure_dir(dir)?;
        // Every journal file is opened without following a symlink and
        // proven on its descriptor (regular, ours, 0600): a `journal` or
        // `journal.lock` replaced by a link to a file outside the store, or
        // another account's file, is refused with its path named.
        let lock_file = sys::open(&p.lock, sys::Access::ReadWriteCreate)?;
        if std::fs::symlink_metadata(&p.journal).is_err() {
            // Create under the lock so two first writers cannot both rename
            // a fresh header over each other (the second would erase frames).
            sys::lock_exclusive(&lock_file, &p.lock, opts.lock_timeout)?;
            let res = if std::fs::symlink_metadata(&p.journal).is_ok() {
                Ok(())
            } else {
                let id = opts
                    .fixed_journal_id
                    .unwrap_or_else(sys::random_bytes::<16>);
                let ms = opts.fixed_clock_ns.unwrap_or_else(sys::now_unix_ns) / 1_000_000;
                sys::atomic_write(&p.journal, &FileHeader::new(id, ms).encode())
            };
            sys::unlock(&lock_file);
            res?;
        }
        let file = sys::open(&p.journal, sys::Access::Append)?;
        let h = scan::load_header(&file, &p.journal)?;
        Ok(Journal {
            p,
            header: h.header,
            header_hash: h.hash,
            header_bytes: h.bytes,
            header_damage: h.damage,
            file,
            lock_file,
            opts,
            mutex: Mutex::new(()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.p.dir
    }

    pub fn journal_id(&self) -> [u8; 16] {
        self.header.journal_id
    }

    /// Position before the first frame.
    pub fn start(&self) -> Position {
        Position {
            seq: 0,
            offset: HEADER_LEN as u64,
            hash: self.header_hash,
        }
    }

    pub(crate) fn tag(&self) -> [u8; 4] {
        self.header.tag()
    }

    /// The header version of this file (`format::READ_VERSIONS`): 1 for a
    /// journal an older release wrote, [`crate::format::FORMAT_VERSION`]
    /// for one this release created.
    pub fn format_version(&self) -> u16 {
        self.header.version
    }

    /// The damage found in the stored header when this handle was opened
    /// (the handle works with the recovered original; writers refuse).
    pub fn header_damage(&self) -> Option<&scan::HeaderDamage> {
        self.header_damage.as_ref()
    }

    /// Under the lock: the stored header must be the bytes this handle
    /// reads with (one 64-byte pread). A damaged header makes writers
    /// refuse: appending would extend a journal no reader can open. The
    /// bool says the stored header is damaged (record it in the marker);
    /// a valid header other than ours (a repair gave an empty journal a
    /// fresh one) only makes this handle refuse: reopen.
    fn check_header(&self) -> Result<Option<(Refusal, bool)>, JournalError> {
        let mut b = [0u8; HEADER_LEN];
        let complete = sys::pread_exact(&self.file, &mut b, 0)
            .map_err(|e| JournalError::io("read header", &self.p.journal, e))?;
        if complete && b == self.header_bytes {
            return Ok(None);
        }
        let (detail, damaged) = match FileHeader::decode(&b) {
            Err(d) if complete => (d, true),
            Err(_) => ("file shorter than the 64-byte header".into(), true),
            Ok(_) => (
                "the header changed since this process opened the journal; reopen it".into(),
                false,
            ),
        };
        Ok(Some((
            Refusal {
                offset: 0,
                reason: Reason::Header(detail).to_string(),
            },
            damaged,
        )))
    }

    pub(crate) fn lock(&self) -> Result<Locked<'_>, JournalError> {
        let g = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        sys::lock_exclusive(&self.lock_file, &self.p.lock, self.opts.lock_timeout)?;
        Ok(Locked { j: self, _g: g })
    }

    fn now_ns(&self, seq: u64) -> u64 {
        match self.opts.fixed_clock_ns {
            Some(base) => base.wrapping_add(seq.wrapping_mul(1000)),
            None => sys::now_unix_ns(),
        }
    }

    /// Append one event durably. Re-sending an id already present is a
    /// no-op that returns `AlreadyPresent` with the existing seq.
    pub fn append(&self, id: EventId, payload: &[u8]) -> Result<Appended, JournalError> {
        let v = self.append_batch(&[(id, payload)])?;
        Ok(v[0])
    }

    /// Append events atomically (one write, all-or-nothing visibility to
    /// readers, one fdatasync). Ids already present (or repeated within the
    /// batch) are skipped and reported as `AlreadyPresent`.
    pub fn append_batch(&self, events: &[(EventId, &[u8])]) -> Result<Vec<Appended>, JournalError> {
        check_caps(events)?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let lk = self.lock()?;
        let mut ready = match self.prepare(&lk)? {
            Ok(r) => r,
            Err(refusal) => {
                drop(lk);
                return Err(self.spool_refused(events, refusal));
            }
        };
        let (acks, wrote) = self.write_locked(&lk, &mut ready, events, FrameKind::Event)?;
        if wrote {
            match self.opts.sync {
                SyncMode::InsideLock => {
                    sys::fdatasync(&self.file, &self.p.journal)?;
                    drop(lk);
                }
                SyncMode::OutsideLock => {
                    drop(lk);
                    sys::fdatasync(&self.file, &self.p.journal)?;
                }
            }
        } else {
            drop(lk);
            // The frame we found may have been written by a writer that has
            // not yet synced; make sure it is durable before saying so.
            sys::fdatasync(&self.file, &self.p.journal)?;
        }
        Ok(acks)
    }

    /// Park events durably in the spool without touching the journal, for
    /// a caller that cannot append now (lock timeout, I/O error) and must
    /// not lose them. The next successful append (or `drain_spool`, or
    /// `repair`) appends them, idempotently by id, as one atomic batch.
    pub fn spool(&self, events: &[(EventId, &[u8])]) -> Result<PathBuf, JournalError> {
        check_caps(events)?;
        spool::write(
            &self.p.spool,
            &format!("s{:020}", sys::now_unix_ns()),
            events,
        )
    }

    fn spool_refused(&self, events: &[(EventId, &[u8])], r: Refusal) -> JournalError {
        let prefix = format!("s{:020}", sys::now_unix_ns());
        match spool::write(&self.p.spool, &prefix, events) {
            Ok(spool_path) => JournalError::CorruptSpooled {
                journal: self.p.journal.clone(),
                bad_offset: r.offset,
                reason: r.reason,
                spool_path,
            },
            Err(e) => e,
        }
    }

    /// Seq of `id` if it is in the journal.
    pub fn contains(&self, id: &EventId) -> Result<Option<u64>, JournalError> {
        let _lk = self.lock()?;
        let head = self.head()?;
        match index::catch_up(
            &self.p.ids,
            &self.p.journal,
            &self.header.journal_id,
            self.tag(),
            &self.start(),
            &head,
            false,
        ) {
            Ok(mut idx) => Ok(self
                .lookup_confirmed(&mut idx, &head, id)?
                .map(|(seq, _)| seq)),
            Err(JournalError::Damaged { .. }) => {
                // Damage between the index and the head: answer from a scan.
                for f in self.read_from(&self.start())? {
                    let f = f?;
                    if f.kind == FrameKind::Event && f.id == *id {
                        return Ok(Some(f.seq));
                    }
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Position after the last complete (batch-final) valid frame.
    pub fn head(&self) -> Result<Position, JournalError> {
        match self.check_tail()? {
            Tail::Ok(p) => Ok(p),
            Tail::Torn { valid, .. } => Ok(valid),
            Tail::Corrupt { .. } => {
                let mut sc = Scanner::open(&self.p.journal)?;
                Ok(walk(&mut sc, self.start(), self.tag(), None)?.committed)
            }
        }
    }

    /// Iterate frames after `pos`. Errors with `CheckpointMismatch` if no
    /// frame with `pos.seq` and `pos.hash` ends at `pos.offset` (the journal
    /// was repaired or rewritten: rebuild from `start()`).
    pub fn read_from(&self, pos: &Position) -> Result<FrameIter, JournalError> {
        let mut sc = Scanner::open(&self.p.journal)?;
        let mismatch = |detail: &str| JournalError::CheckpointMismatch {
            seq: pos.seq,
            offset: pos.offset,
            detail: detail.to_string(),
        };
        if pos.seq == 0 {
            if *pos != self.start() {
                return Err(mismatch("not this journal's start position"));
            }
        } else {
            match sc.frame_ending_at(pos.offset, self.tag())? {
                Some((h, hash)) if h.seq == pos.seq && hash == pos.hash => {}
                Some(_) => return Err(mismatch("a different frame ends at this offset")),
                None => return Err(mismatch("no valid frame ends at this offset")),
            }
        }
        Ok(FrameIter {
            sc,
            tag: self.tag(),
            cursor: pos.clone(),
            pending: Vec::new(),
            ready: VecDeque::new(),
            restated: false,
            done: false,
        })
    }

    /// Append every spooled event (idempotently) and remove the spool files.
    /// Returns the number of spooled events now in the journal.
    pub fn drain_spool(&self) -> Result<usize, JournalError> {
        let lk = self.lock()?;
        match self.prepare(&lk)? {
            Ok(mut ready) => self.drain_locked(&lk, &mut ready),
            Err(r) => Err(JournalError::Refused {
                journal: self.p.journal.clone(),
                bad_offset: r.offset,
                reason: r.reason,
            }),
        }
    }

    // ---- locked protocol -------------------------------------------------

    /// Under the lock: refuse if known corrupt, recover a torn tail, catch
    /// the index up, and drain the spool if it holds anything.
    pub(crate) fn prepare(&self, lk: &Locked<'_>) -> Result<Result<Ready, Refusal>, JournalError> {
        if let Some(r) = self.read_marker() {
            return Ok(Err(r));
        }
        let mut ready = match self.prepare_no_drain_inner(lk)? {
            Ok(r) => r,
            Err(r) => return Ok(Err(r)),
        };
        if !spool::list(&self.p.spool)?.is_empty() {
            self.drain_locked(lk, &mut ready)?;
        }
        Ok(Ok(ready))
    }

    /// Tail recovery and index catch-up only (used by `repair`, which has
    /// just removed the corruption marker itself). None if still damaged.
    pub(crate) fn prepare_no_drain(&self, lk: &Locked<'_>) -> Result<Option<Ready>, JournalError> {
        Ok(self.prepare_no_drain_inner(lk)?.ok())
    }

    fn prepare_no_drain_inner(
        &self,
        lk: &Locked<'_>,
    ) -> Result<Result<Ready, Refusal>, JournalError> {
        if let Some((r, damaged)) = self.check_header()? {
            if damaged {
                write_marker(&self.p, r.offset, &r.reason)?;
            }
            return Ok(Err(r));
        }
        let head = match self.check_tail()? {
            Tail::Ok(p) => p,
            Tail::Torn { valid, size } => self.cut_torn(lk, valid, size)?,
            Tail::Corrupt { offset, reason } => {
                self.write_marker(offset, &reason)?;
                return Ok(Err(Refusal {
                    offset,
                    reason: reason.to_string(),
                }));
            }
        };
        let idx = match index::catch_up(
            &self.p.ids,
            &self.p.journal,
            &self.header.journal_id,
            self.tag(),
            &self.start(),
            &head,
            false,
        ) {
            Ok(i) => i,
            Err(JournalError::Damaged { offset, reason }) => {
                self.write_marker(offset, &reason)?;
                return Ok(Err(Refusal {
                    offset,
                    reason: reason.to_string(),
                }));
            }
            Err(e) => return Err(e),
        };
        Ok(Ok(Ready { head, idx }))
    }

    pub(crate) fn drain_locked(
        &self,
        lk: &Locked<'_>,
        ready: &mut Ready,
    ) -> Result<usize, JournalError> {
        let files = spool::list(&self.p.spool)?;
        let mut drained = Vec::new();
        let mut n = 0;
        for path in files {
            let Some(bytes) = sys::read_small(&path, spool::SPOOL_FILE_CAP)? else {
                continue;
            };
            // An undecodable spool file is left in place for an operator.
            let Ok(events) = spool::decode(&bytes, &path) else {
                continue;
            };
            let refs: Vec<(EventId, &[u8])> =
                events.iter().map(|(i, p)| (*i, p.as_slice())).collect();
            self.write_locked(lk, ready, &refs, FrameKind::Event)?;
            n += events.len();
            drained.push(path);
        }
        if drained.is_empty() {
            return Ok(0);
        }
        sys::fdatasync(&self.file, &self.p.journal)?;
        for path in &drained {
            sys::remove_file_if_exists(path)?;
        }
        sys::fsync_dir(&self.p.spool)?;
        Ok(n)
    }

    /// Encode and write the new events as one write(); update the index.
    /// Returns the acks and whether anything was written. Not yet synced.
    pub(crate) fn write_locked(
        &self,
        _lk: &Locked<'_>,
        ready: &mut Ready,
        events: &[(EventId, &[u8])],
        kind: FrameKind,
    ) -> Result<(Vec<Appended>, bool), JournalError> {
        let mut acks = Vec::with_capacity(events.len());
        let mut fresh: Vec<usize> = Vec::new();
        let mut in_batch: HashMap<[u8; 16], u64> = HashMap::new();
        for (i, (id, _)) in events.iter().enumerate() {
            if kind == FrameKind::Event {
                if let Some((seq, _)) = self.lookup_confirmed(&mut ready.idx, &ready.head, id)? {
                    acks.push(Appended::AlreadyPresent { seq });
                    continue;
                }
                if let Some(&seq) = in_batch.get(&id.0) {
                    acks.push(Appended::AlreadyPresent { seq });
                    continue;
                }
            }
            let seq = ready.head.seq + 1 + fresh.len() as u64;
            in_batch.insert(id.0, seq);
            fresh.push(i);
            acks.push(Appended::New { seq });
        }
        if fresh.is_empty() {
            return Ok((acks, false));
        }
        let total: usize = fresh
            .iter()
            .map(|&i| format::frame_len_for(events[i].1.len()))
            .sum();
        let mut buf = Vec::with_capacity(total);
        let mut prev = ready.head.hash;
        let mut seq = ready.head.seq;
        let start = ready.head.offset;
        let mut offsets = Vec::with_capacity(fresh.len());
        for (k, &i) in fresh.iter().enumerate() {
            seq += 1;
            offsets.push(start + buf.len() as u64);
            prev = format::encode_frame(
                &FrameSpec {
                    kind,
                    batch_cont: k + 1 < fresh.len(),
                    tag: self.tag(),
                    seq,
                    ts_unix_ns: self.now_ns(seq),
                    event_id: events[i].0 .0,
                    prev_hash: prev,
                    payload: events[i].1,
                },
                &mut buf,
            );
        }
        // One write() for the whole frame or batch (write_all only loops on
        // a short write, which on a regular file means ENOSPC or a signal).
        let written = abcd_fsio::fault::check(abcd_fsio::fault::Op::Write, &self.p.journal)
            .and_then(|()| (&self.file).write_all(&buf));
        if let Err(e) = written {
            // Leave no partial frame behind while we still hold the lock.
            let _ = self.file.set_len(start);
            return Err(JournalError::io("append", &self.p.journal, e));
        }
        let new_head = Position {
            seq,
            offset: start + buf.len() as u64,
            hash: prev,
        };
        if kind == FrameKind::Event {
            for (k, &i) in fresh.iter().enumerate() {
                if let Appended::New { seq } = acks[i] {
                    let id = &events[i].0 .0;
                    ready
                        .idx
                        .insert(id, seq, offsets[k], &self.header.journal_id)?;
                }
            }
        }
        ready
            .idx
            .set_hwm(new_head.clone(), &self.header.journal_id)?;
        ready.head = new_head;
        Ok((acks, true))
    }

    /// Index lookup whose hit is confirmed against the journal (one pread of
    /// the frame head: magic, seq and event id must match). A hit that does
    /// not match means the index is damaged: it is rebuilt from the journal
    /// and the lookup repeated, so a damaged index can never make a new
    /// event look like a duplicate and be dropped.
    pub(crate) fn lookup_confirmed(
        &self,
        idx: &mut IdIndex,
        head: &Position,
        id: &EventId,
    ) -> Result<Option<(u64, u64)>, JournalError> {
        let hit = match idx.lookup(&id.0)? {
            None => return Ok(None),
            Some(hit) => hit,
        };
        if self.frame_has(hit.1, hit.0, id)? && hit.1 < head.offset {
            return Ok(Some(hit));
        }
        *idx = index::catch_up(
            &self.p.ids,
            &self.p.journal,
            &self.header.journal_id,
            self.tag(),
            &self.start(),
            head,
            true,
        )?;
        idx.lookup(&id.0)
    }

    fn frame_has(&self, offset: u64, seq: u64, id: &EventId) -> Result<bool, JournalError> {
        let mut b = [0u8; 48];
        let complete = sys::pread_exact(&self.file, &mut b, offset)
            .map_err(|e| JournalError::io("read", &self.p.journal, e))?;
        Ok(complete
            && b[0..4] == format::FRAME_MAGIC
            && format::u64_at(&b, 16) == seq
            && b[32..48] == id.0)
    }

    /// O(1) tail check: the frame ending at EOF (found through its
    /// `frame_len` suffix) must be valid and batch-final. Otherwise a scan
    /// from the index high-water mark decides between torn and corrupt.
    pub(crate) fn check_tail(&self) -> Result<Tail, JournalError> {
        let size = self
            .file
            .metadata()
            .map_err(|e| JournalError::io("stat", &self.p.journal, e))?
            .len();
        if size == HEADER_LEN as u64 {
            return Ok(Tail::Ok(self.start()));
        }
        let mut sc = Scanner::from_file(
            self.file
                .try_clone()
                .map_err(|e| JournalError::io("dup", &self.p.journal, e))?,
            &self.p.journal,
        )?;
        if let Some((h, hash)) = sc.frame_ending_at(size, self.tag())? {
            if !h.batch_cont() {
                return Ok(Tail::Ok(Position {
                    seq: h.seq,
                    offset: size,
                    hash,
                }));
            }
        }
        let from = self.scan_start(&mut sc)?;
        let w = walk(&mut sc, from, self.tag(), None)?;
        w.classify(&mut sc, self.tag())
    }

    /// Best known valid position to scan from: the index high-water mark if
    /// it still matches the journal, else the start.
    fn scan_start(&self, sc: &mut Scanner) -> Result<Position, JournalError> {
        if let Some(idx) = IdIndex::open(&self.p.ids, &self.header.journal_id)? {
            if idx.hwm.seq > 0 {
                if let Some((h, hash)) = sc.frame_ending_at(idx.hwm.offset, self.tag())? {
                    if h.seq == idx.hwm.seq && hash == idx.hwm.hash {
                        return Ok(idx.hwm);
                    }
                }
            }
        }
        Ok(self.start())
    }

    /// Copy the torn bytes aside, then truncate to the last valid frame.
    fn cut_torn(
        &self,
        _lk: &Locked<'_>,
        valid: Position,
        size: u64,
    ) -> Result<Position, JournalError> {
        let len = (size - valid.offset) as usize;
        let mut bytes = vec![0u8; len];
        sys::pread_exact(&self.file, &mut bytes, valid.offset)
            .map_err(|e| JournalError::io("read", &self.p.journal, e))?;
        sys::ensure_dir(&self.p.torn)?;
        let name = format!(
            "{}-{}-{}.bin",
            valid.offset,
            sys::now_unix_ns(),
            std::process::id()
        );
        sys::atomic_write(&self.p.torn.join(name), &bytes)?;
        sys::truncate(&self.file, &self.p.journal, valid.offset)?;
        sys::fdatasync(&self.file, &self.p.journal)?;
        Ok(valid)
    }

    fn read_marker(&self) -> Option<Refusal> {
        let b = sys::read_small(&self.p.corrupt, MARKER_CAP).ok()??;
        let s = String::from_utf8_lossy(&b);
        let mut offset = 0;
        let mut reason = String::from("journal marked corrupt");
        for line in s.lines() {
            if let Some(v) = line.strip_prefix("offset ") {
                offset = v.trim().parse().unwrap_or(0);
            } else if let Some(v) = line.strip_prefix("reason ") {
                reason = v.trim().to_string();
            }
        }
        Some(Refusal { offset, reason })
    }

    pub(crate) fn write_marker(
        &self,
        offset: u64,
        reason: &dyn std::fmt::Display,
    ) -> Result<(), JournalError> {
        write_marker(&self.p, offset, reason)
    }

    pub(crate) fn remove_marker(&self) -> Result<(), JournalError> {
        if sys::remove_file_if_exists(&self.p.corrupt)? {
            sys::fsync_dir(&self.p.dir)?;
        }
        Ok(())
    }
}

/// Cap on reading the `journal.corrupt` marker (two short lines).
pub(crate) const MARKER_CAP: u64 = 64 * 1024;

/// Record mid-file damage so that writers refuse (they cannot afford a full
/// scan on every append).
pub(crate) fn write_marker(
    p: &Paths,
    offset: u64,
    reason: &dyn std::fmt::Display,
) -> Result<(), JournalError> {
    let text = format!("offset {offset}\nreason {reason}\n");
    if sys::read_small(&p.corrupt, MARKER_CAP)
        .ok()
        .flatten()
        .as_deref()
        == Some(text.as_bytes())
    {
        return Ok(());
    }
    sys::atomic_write(&p.corrupt, text.as_bytes())
}

fn check_caps(events: &[(EventId, &[u8])]) -> Result<(), JournalError> {
    if events.len() > MAX_BATCH_EVENTS {
        return Err(JournalError::PayloadTooLarge {
            what: "batch event count",
            len: events.len() as u64,
            cap: MAX_BATCH_EVENTS as u64,
        });
    }
    let mut total = 0usize;
    for (_, p) in events {
        if p.len() > MAX_PAYLOAD {
            return Err(JournalError::PayloadTooLarge {
                what: "payload",
                len: p.len() as u64,
                cap: MAX_PAYLOAD as u64,
            });
        }
        total += format::frame_len_for(p.len());
    }
    if total > MAX_BATCH_BYTES {
        return Err(JournalError::PayloadTooLarge {
            what: "batch",
            len: total as u64,
            cap: MAX_BATCH_BYTES as u64,
        });
    }
    Ok(())
}

/// Result of walking valid frames from a position.
pub(crate) struct Walk {
    /// After the last batch-final valid frame.
    pub committed: Position,
    /// After the last valid frame (inside an incomplete batch if != committed).
    pub last: Position,
    /// Where the walk stopped and why (None: clean EOF).
    pub stop: Option<Reason>,
    pub frames: u64,
    pub events: u64,
    pub repairs: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub first_seq: Option<u64>,
}

/// Damage classification after a walk.
impl Walk {
    pub fn classify(&self, sc: &mut Scanner, tag: [u8; 4]) -> Result<Tail, JournalError> {
        let x = self.last.offset;
        match &self.stop {
            None if self.committed == self.last => Ok(Tail::Ok(self.committed.clone())),
            None => Ok(Tail::Torn {
                valid: self.committed.clone(),
                size: sc.file_len,
            }),
            Some(reason) => {
                // A frame that is valid on its own but fails its context
                // (seq, chain) is never a torn write; nor is damage followed
                // by any valid frame (journal-format §9).
                if sc.standalone(x, tag)?.is_some() || sc.resync(x + 8, tag)?.is_some() {
                    return Ok(Tail::Corrupt {
                        offset: x,
                        reason: reason.clone(),
                    });
                }
                // The last frame: torn only if it has the shape of an
                // interrupted append (§8); a complete frame that fails its
                // CRC was written whole and damaged later.
                match sc.tail_shape(x)? {
                    TailShape::Torn => Ok(Tail::Torn {
                        valid: self.committed.clone(),
                        size: sc.file_len,
                    }),
                    TailShape::Damaged { len, head_len } => Ok(Tail::Corrupt {
                        offset: x,
                        reason: match (reason, head_len) {
                            // The head's length disagrees with the trailer
                            // that spans the frame: report the lengths.
                            (Reason::Truncated, Some(h)) => Reason::LengthMismatch {
                                expected: h as u32,
                                found: len as u32,
                            },
                            (r, _) => r.clone(),
                        },
                    }),
                }
            }
        }
    }
}

/// Walk valid frames (chain checked) from `from`. `progress` gets the
/// offset reached every READ_CHUNK bytes.
pub(crate) fn walk(
    sc: &mut Scanner,
    from: Position,
    tag: [u8; 4],
    progress: Option<&dyn Fn(u64)>,
) -> Result<Walk, JournalError> {
    walk_mode(sc, from, tag, true, progress)
}

pub(crate) fn walk_mode(
    sc: &mut Scanner,
    from: Position,
    tag: [u8; 4],
    chain: bool,
    progress: Option<&dyn Fn(u64)>,
) -> Result<Walk, JournalError> {
    let mut w = Walk {
        committed: from.clone(),
        last: from,
        stop: None,
        frames: 0,
        events: 0,
        repairs: 0,
        first_ts: None,
        last_ts: None,
        first_seq: None,
    };
    let mut next_report = scan::READ_CHUNK as u64;
    loop {
        let step = sc.next(
            w.last.offset,
            &Expect {
                seq: w.last.seq + 1,
                tag,
                prev_hash: if chain { Some(&w.last.hash) } else { None },
                hash: chain,
            },
        )?;
        match step {
            Step::Frame { h, off, hash } => {
                w.frames += 1;
                match h.kind {
                    FrameKind::Event => w.events += 1,
                    FrameKind::Repair => w.repairs += 1,
                }
                w.first_seq.get_or_insert(h.seq);
                w.first_ts.get_or_insert(h.ts_unix_ns);
                w.last_ts = Some(h.ts_unix_ns);
                w.last = Position {
                    seq: h.seq,
                    offset: off + h.frame_len as u64,
                    hash: hash.unwrap_or([0; 32]),
                };
                if !h.batch_cont() {
                    w.committed = w.last.clone();
                }
                if let Some(p) = progress {
                    if w.last.offset >= next_report {
                        p(w.last.offset);
                        next_report = w.last.offset + scan::READ_CHUNK as u64;
                    }
                }
            }
            Step::End => return Ok(w),
            Step::Invalid(r) => {
                w.stop = Some(r);
                return Ok(w);
            }
        }
    }
}

/// Iterator over frames after a Position. Validates every frame (CRC, seq,
/// chain, tag); stops at the first invalid or short frame ("end for now":
/// a writer may be mid-write; only `verify` classifies damage). Frames of an
/// atomic batch are yielded only once the batch's final frame is valid.
pub struct FrameIter {
    sc: Scanner,
    tag: [u8; 4],
    cursor: Position,
    pending: Vec<Frame>,
    ready: VecDeque<Frame>,
    restated: bool,
    done: bool,
}

impl Iterator for FrameIter {
    type Item = Result<Frame, JournalError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(f) = self.ready.pop_front() {
                return Some(Ok(f));
            }
            if self.done {
                return None;
            }
            let step = self.sc.next(
                self.cursor.offset,
                &Expect {
                    seq: self.cursor.seq + 1,
                    tag: self.tag,
                    prev_hash: Some(&self.cursor.hash),
                    hash: true,
                },
            );
            match step {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(Step::Frame { h, off, hash }) => {
                    let payload = match self.sc.payload(off, &h) {
                        Ok(p) => p,
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    };
                    let end = Position {
                        seq: h.seq,
                        offset: off + h.frame_len as u64,
                        hash: hash.unwrap_or([0; 32]),
                    };
                    self.cursor = end.clone();
                    self.pending.push(Frame {
                        seq: h.seq,
                        id: EventId(h.event_id),
                        ts_unix_ns: h.ts_unix_ns,
                        kind: h.kind,
                        payload,
                        offset: off,
                        len: h.frame_len as u64,
                        end,
                    });
                    if !h.batch_cont() {
                        self.ready.extend(self.pending.drain(..));
                    }
                }
                Ok(Step::End) | Ok(Step::Invalid(_)) => {
                    if !self.restated {
                        self.restated = true;
                        match self.sc.refresh_len() {
                            Ok(true) => continue,
                            Ok(false) => {}
                            Err(e) => {
                                self.done = true;
                                return Some(Err(e));
                            }
                        }
                    }
                    self.done = true;
                    self.pending.clear();
                }
            }
        }
    }
}
