//! `verify`, `stats` and `repair`: the operator's view of a journal.
//!
//! Owns: classifying damage (clean / torn tail / corrupt, header included),
//! recording corruption in `journal.corrupt` so writers refuse, and the
//! explicit repair procedure (header restoration, quarantine, naming every
//! event it cannot recover). `verify` and `stats` never modify journal
//! bytes; `repair` without `apply` changes nothing at all.

use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::{self, FileHeader, FrameHeader, FrameKind, Reason, HEADER_LEN};
use crate::journal::{self, walk_mode, Journal, Paths, Tail};
use crate::scan::{self, HeaderDamage, Scanner};
use crate::spool;
use crate::sys;
use crate::{EventId, Position};

/// How `verify` checks.
#[derive(Default)]
pub struct VerifyOptions<'a> {
    /// Also check the SHA-256 chain (tamper evidence). Without it only the
    /// CRC, seq, tag and lengths are checked (faster: no hashing).
    pub chain: bool,
    /// Called with (bytes checked, file size) about every 4 MiB.
    pub progress: Option<&'a dyn Fn(u64, u64)>,
}

/// Overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyStatus {
    Clean,
    /// Invalid bytes at the end with nothing valid after them: a killed
    /// writer or lost power before fdatasync; nothing there was acknowledged.
    TornTail,
    /// Damage followed by valid frames, a valid frame that fails its
    /// context, a complete last frame that fails its CRC (journal-format
    /// §8: never what a torn append leaves), or a damaged header: bit rot,
    /// tampering or a bug. Never truncated automatically.
    Corrupt,
}

/// The first damage found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Offset of the first invalid frame (for a torn incomplete batch, of the
    /// batch's first frame).
    pub offset: u64,
    pub reason: Reason,
    /// The damaged bytes are all zero or hold an all-zero 512-byte sector
    /// (what a torn write on the medium looks like).
    pub looks_torn: bool,
    /// Valid frames found after the damage (each valid on its own).
    pub frames_after: u64,
    /// Seq range of those frames.
    pub seq_after: Option<(u64, u64)>,
    /// Bytes from `offset` to EOF.
    pub bytes_after: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub status: VerifyStatus,
    pub chain_checked: bool,
    pub file_bytes: u64,
    /// Valid frames before the damage (or in total).
    pub frames: u64,
    pub events: u64,
    pub repairs: u64,
    /// Position after the last complete valid frame. Its hash is the frame's
    /// SHA-256 (computed even in CRC-only mode), so it can be anchored.
    pub head: Position,
    /// The first damage: the header's (offset 0) when it is damaged, else
    /// the frames'.
    pub damage: Option<Damage>,
    /// The stored header is damaged; the frames were checked with the
    /// recovered original (journal-format §4.1).
    pub header: Option<HeaderDamage>,
    /// Verdict on the frames alone (what remains once the header is
    /// restored); equals `status` when the header is intact.
    pub frames_status: VerifyStatus,
    /// First damage among the frames alone.
    pub frame_damage: Option<Damage>,
}

impl VerifyReport {
    /// Process exit code for the CLI: 0 clean, 3 torn tail, 4 corrupt.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            VerifyStatus::Clean => 0,
            VerifyStatus::TornTail => 3,
            VerifyStatus::Corrupt => 4,
        }
    }
}

/// Check the journal in `dir` front to back. Takes no lock: a writer
/// mid-append may show up as a torn tail, never as corruption. A corrupt
/// verdict is recorded in `journal.corrupt` so writers refuse and spool.
pub fn verify(dir: &Path, opts: &VerifyOptions<'_>) -> Result<VerifyReport, JournalError> {
    let p = Paths::new(dir);
    let r = verify_paths(&p, opts)?;
    if let Some(d) = &r.damage {
        if r.status == VerifyStatus::Corrupt {
            // Best effort: the report matters more than the marker (verify
            // may run on a read-only copy); writers that meet the damage
            // themselves write the marker too.
            let _ = journal::write_marker(&p, d.offset, &d.reason);
        }
    }
    Ok(r)
}

fn open_scanner(p: &Paths) -> Result<(Scanner, scan::LoadedHeader), JournalError> {
    let file = match sys::open(&p.journal, sys::Access::Read) {
        Err(JournalError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(JournalError::NotFound(p.journal.clone()))
        }
        other => other?,
    };
    let h = scan::load_header(&file, &p.journal)?;
    Ok((Scanner::from_file(file, &p.journal)?, h))
}

pub(crate) fn verify_paths(
    p: &Paths,
    opts: &VerifyOptions<'_>,
) -> Result<VerifyReport, JournalError> {
    let (mut sc, loaded) = open_scanner(p)?;
    let tag = loaded.header.tag();
    let start = Position {
        seq: 0,
        offset: format::HEADER_LEN as u64,
        hash: loaded.hash,
    };
    let size = sc.file_len;
    let cb = opts.progress.map(|f| move |off: u64| f(off, size));
    let w = walk_mode(
        &mut sc,
        start.clone(),
        tag,
        opts.chain,
        cb.as_ref().map(|c| c as &dyn Fn(u64)),
    )?;
    let mut head = w.committed.clone();
    if !opts.chain && head.seq > 0 {
        if let Some((_, hash)) = sc.frame_ending_at(head.offset, tag)? {
            head.hash = hash;
        }
    }
    let mut report = VerifyReport {
        status: VerifyStatus::Clean,
        chain_checked: opts.chain,
        file_bytes: size,
        frames: w.frames,
        events: w.events,
        repairs: w.repairs,
        head,
        damage: None,
        header: None,
        frames_status: VerifyStatus::Clean,
        frame_damage: None,
    };
    if let Some(f) = opts.progress {
        f(size, size);
    }
    frame_verdict(&mut sc, &w, tag, size, &mut report)?;
    report.frames_status = report.status;
    report.frame_damage = report.damage.clone();
    if let Some(hd) = loaded.damage {
        report.status = VerifyStatus::Corrupt;
        report.damage = Some(Damage {
            offset: 0,
            reason: Reason::Header(hd.detail.clone()),
            looks_torn: false,
            frames_after: report.frames,
            seq_after: (report.frames > 0).then_some((1, w.last.seq)),
            bytes_after: size,
        });
        report.header = Some(hd);
    }
    Ok(report)
}

/// Classify the end of a walk over the frames (clean, torn, corrupt).
fn frame_verdict(
    sc: &mut Scanner,
    w: &journal::Walk,
    tag: [u8; 4],
    size: u64,
    report: &mut VerifyReport,
) -> Result<(), JournalError> {
    let (status, offset, reason) = match w.classify(sc, tag)? {
        Tail::Ok(_) => return Ok(()),
        Tail::Torn { valid, .. } => {
            let reason = w.stop.clone().unwrap_or(Reason::IncompleteBatch);
            let reason = if w.committed != w.last {
                Reason::IncompleteBatch
            } else {
                reason
            };
            (VerifyStatus::TornTail, valid.offset, reason)
        }
        Tail::Corrupt { offset, reason } => (VerifyStatus::Corrupt, offset, reason),
    };
    // Count from the first invalid byte (inside an incomplete batch, its
    // valid leading frames are part of the torn tail, not "after" it).
    let after = collect_standalone(sc, w.last.offset.max(offset) + 8, tag)?;
    let region_end = after.first().map(|f| f.0).unwrap_or(size);
    report.status = status;
    report.damage = Some(Damage {
        offset,
        reason,
        looks_torn: sc.looks_torn(offset, region_end)?,
        frames_after: after.len() as u64,
        seq_after: match (after.first(), after.last()) {
            (Some(a), Some(b)) => Some((a.1.seq, b.1.seq)),
            _ => None,
        },
        bytes_after: size - offset,
    });
    Ok(())
}

/// Every frame valid on its own (magic, lengths, CRC, tag) from `from` to
/// EOF: after one, continue at its end; after damage, resync.
fn collect_standalone(
    sc: &mut Scanner,
    from: u64,
    tag: [u8; 4],
) -> Result<Vec<(u64, FrameHeader)>, JournalError> {
    let mut out = Vec::new();
    let mut at = from;
    loop {
        let hit = match sc.standalone(at, tag)? {
            Some(h) => Some((at, h)),
            None => sc.resync(at + 8, tag)?,
        };
        match hit {
            Some((off, h)) => {
                at = off + h.frame_len as u64;
                out.push((off, h));
            }
            None => return Ok(out),
        }
    }
}

/// Summary figures of a journal directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub file_bytes: u64,
    /// Valid frames (up to the first invalid one).
    pub frames: u64,
    pub events: u64,
    pub repairs: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub first_ts_unix_ns: Option<u64>,
    pub last_ts_unix_ns: Option<u64>,
    /// Bytes after the last complete valid frame (torn tail or damage).
    pub trailing_bytes: u64,
    pub spool_files: usize,
    pub spool_events: usize,
    pub torn_files: usize,
    pub quarantine_files: usize,
    /// Contents of `journal.corrupt` if writers are refusing.
    pub corrupt_marker: Option<String>,
    pub journal_id: [u8; 16],
    /// The stored header is damaged (the figures come from the recovered
    /// original); `repair` rewrites it.
    pub header_damage: Option<String>,
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

/// Count frames, events, bytes and side files (CRC mode, no lock).
pub fn stats(dir: &Path) -> Result<Stats, JournalError> {
    let p = Paths::new(dir);
    let (mut sc, loaded) = open_scanner(&p)?;
    let hdr = loaded.header;
    let start = Position {
        seq: 0,
        offset: format::HEADER_LEN as u64,
        hash: loaded.hash,
    };
    let w = walk_mode(&mut sc, start, hdr.tag(), false, None)?;
    let spool_paths = spool::list(&p.spool)?;
    let mut spool_events = 0;
    for sp in &spool_paths {
        if let Ok(Some(b)) = sys::read_small(sp, spool::SPOOL_FILE_CAP) {
            if let Ok(ev) = spool::decode(&b, sp) {
                spool_events += ev.len();
            }
        }
    }
    Ok(Stats {
        file_bytes: sc.file_len,
        frames: w.frames,
        events: w.events,
        repairs: w.repairs,
        first_seq: w.first_seq,
        last_seq: (w.committed.seq > 0).then_some(w.committed.seq),
        first_ts_unix_ns: w.first_ts,
        last_ts_unix_ns: w.last_ts,
        trailing_bytes: sc.file_len - w.committed.offset,
        spool_files: spool_paths.len(),
        spool_events,
        torn_files: count_files(&p.torn),
        quarantine_files: count_files(&p.quarantine),
        corrupt_marker: sys::read_small(&p.corrupt, journal::MARKER_CAP)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        journal_id: hdr.journal_id,
        header_damage: loaded.damage.map(|d| d.detail),
    })
}

/// What `repair` found, planned and (with apply) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    pub status_before: VerifyStatus,
    pub applied: bool,
    /// Human-readable steps, in order (what would be / was done).
    pub plan: Vec<String>,
    /// Start of the range moved aside (torn tail or damaged range).
    pub cut_offset: Option<u64>,
    pub cut_bytes: u64,
    /// Intact events found in the damaged range (complete batches only).
    pub recoverable_events: usize,
    /// Valid frames that cannot be re-appended: parts of a batch whose other
    /// frames are damaged or missing (atomicity wins), or REPAIR frames.
    pub unrecoverable_frames: usize,
    pub spool_files: usize,
    /// Where the cut bytes went (with apply).
    pub moved_to: Option<PathBuf>,
    /// Recovered events re-appended (new or already present).
    pub recovered_appended: usize,
    /// Spooled events drained into the journal (recovered ones included).
    pub spool_drained: usize,
    pub head_after: Option<Position>,
    /// The stored header was damaged (with apply: it was rewritten with
    /// the recovered original, or a fresh one for a journal with no frame).
    pub header: Option<HeaderDamage>,
    /// Every event of the damaged range that cannot be re-appended, with
    /// its offset, seq and event id (journal-format §9).
    pub lost: Vec<LostFrame>,
}

/// A frame of a damaged range that `repair` cannot re-append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostFrame {
    /// Where the frame starts.
    pub offset: u64,
    /// Its seq: read from the frame when `verified`, else the seq the
    /// frame before it implies.
    pub seq: u64,
    /// Its event id: when not `verified`, as stored in damaged bytes (no
    /// CRC vouches for it); None when not even the frame magic is there.
    pub event_id: Option<EventId>,
    pub kind: Option<FrameKind>,
    /// The frame passed its own CRC (and is lost because its batch is
    /// incomplete, or it is a REPAIR frame).
    pub verified: bool,
    pub why: String,
}

impl std::fmt::Display for LostFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seq {} at offset {}", self.seq, self.offset)?;
        match (&self.event_id, self.verified) {
            (Some(id), true) => write!(f, ", event {id}")?,
            (Some(id), false) => write!(f, ", event {id} (as stored; unverified)")?,
            (None, _) => write!(f, ", event id unreadable")?,
        }
        if self.kind == Some(FrameKind::Repair) {
            write!(f, ", REPAIR frame")?;
        }
        write!(f, ": {}", self.why)
    }
}

/// Repair the journal in `dir`. Without `apply` it only reports the plan.
/// With `apply`, under the journal lock: a torn tail is copied to
/// `journal.torn/` and cut; mid-file damage `[B, EOF)` (B = start of the
/// batch holding the first bad frame) is copied to `journal.quarantine/`, the
/// intact events in it are spooled, the file is truncated to B, a REPAIR
/// frame is appended, and the spool is drained (recovered events first).
///
/// A damaged header is rewritten first (journal-format §4.1) with the
/// original recovered from the frames; a journal with no frame whose header
/// cannot be recovered gets a fresh header (no event can depend on it).
pub fn repair(dir: &Path, apply: bool) -> Result<RepairReport, JournalError> {
    match Journal::open_existing(dir) {
        Ok(j) => j.repair(apply),
        Err(e @ JournalError::BadHeader { .. }) => {
            let p = Paths::new(dir);
            let len = std::fs::metadata(&p.journal)
                .map_err(|e| JournalError::io("stat", &p.journal, e))?
                .len();
            // Fewer bytes after the header than one frame head: no frame.
            if !(HEADER_LEN as u64..(HEADER_LEN + format::FRAME_HEAD_LEN) as u64).contains(&len) {
                return Err(e);
            }
            fresh_header(&p, apply, e)
        }
        Err(e) => Err(e),
    }
}

/// `repair` of a journal with no frame whose header cannot be recovered:
/// write a fresh header (new journal_id), then repair as usual.
fn fresh_header(p: &Paths, apply: bool, why: JournalError) -> Result<RepairReport, JournalError> {
    let detail = match &why {
        JournalError::BadHeader { detail, .. } => detail.clone(),
        other => other.to_string(),
    };
    let step = format!(
        "write a fresh header (new journal_id) over the damaged one ({detail}): the journal holds no frame, so no event depends on it; the damaged bytes go to {}",
        p.quarantine.display()
    );
    let mut damaged = [0u8; HEADER_LEN];
    {
        let lock = sys::open(&p.lock, sys::Access::ReadWriteCreate)?;
        sys::lock_exclusive(&lock, &p.lock, sys::LOCK_TIMEOUT)?;
        let res = (|| {
            let f = sys::open(&p.journal, sys::Access::Read)?;
            sys::pread_exact(&f, &mut damaged, 0)
                .map_err(|e| JournalError::io("read header", &p.journal, e))?;
            if !apply {
                return Ok(());
            }
            let fresh =
                FileHeader::new(sys::random_bytes::<16>(), sys::now_unix_ns() / 1_000_000).encode();
            rewrite_header(p, &damaged, &fresh)
        })();
        sys::unlock(&lock);
        res?;
    }
    let header = HeaderDamage {
        detail,
        damaged,
        restored: None,
        proof: None,
    };
    if !apply {
        return Ok(RepairReport {
            status_before: VerifyStatus::Corrupt,
            applied: false,
            plan: vec![step],
            cut_offset: None,
            cut_bytes: 0,
            recoverable_events: 0,
            unrecoverable_frames: 0,
            spool_files: spool::list(&p.spool)?.len(),
            moved_to: None,
            recovered_appended: 0,
            spool_drained: 0,
            head_after: None,
            header: Some(header),
            lost: Vec::new(),
        });
    }
    let mut rep = Journal::open_existing(&p.dir)?.repair(true)?;
    rep.status_before = VerifyStatus::Corrupt;
    rep.plan.insert(0, step);
    rep.plan.retain(|s| !s.starts_with("nothing to do"));
    rep.header = Some(header);
    Ok(rep)
}

/// Copy the damaged header to `journal.quarantine/header-<ns>.bin`, then
/// write `good` over bytes 0..64 in place (a descriptor without O_APPEND:
/// pwrite on an O_APPEND descriptor appends on Linux), fdatasync, and read
/// it back. Idempotent: interrupted, it is simply run again (the frames
/// still prove the original).
fn rewrite_header(
    p: &Paths,
    damaged: &[u8; HEADER_LEN],
    good: &[u8; HEADER_LEN],
) -> Result<(), JournalError> {
    sys::ensure_dir(&p.quarantine)?;
    let to = p.quarantine.join(format!(
        "header-{}-{}.bin",
        sys::now_unix_ns(),
        std::process::id()
    ));
    sys::atomic_write(&to, damaged)?;
    let f = sys::open(&p.journal, sys::Access::ReadWrite)?;
    sys::pwrite_all(&f, &p.journal, good, 0)?;
    sys::fdatasync(&f, &p.journal)?;
    let mut back = [0u8; HEADER_LEN];
    let complete = sys::pread_exact(&f, &mut back, 0)
        .map_err(|e| JournalError::io("read header", &p.journal, e))?;
    if !complete || back != *good {
        return Err(JournalError::BadHeader {
            path: p.journal.clone(),
            detail: "the rewritten header does not read back".into(),
        });
    }
    Ok(())
}

/// Drain `journal.spool/` into the journal in `dir` (idempotent by id).
pub fn drain_spool(dir: &Path) -> Result<usize, JournalError> {
    Journal::open_existing(dir)?.drain_spool()
}

/// Group frames into complete atomic units: contiguous frames (each at the
/// previous end with seq+1) ending with a batch-final frame. Also returns
/// the frames left over (parts of incomplete batches).
#[allow(clippy::type_complexity)]
fn complete_units(
    frames: &[(u64, FrameHeader)],
) -> (Vec<Vec<(u64, FrameHeader)>>, Vec<(u64, FrameHeader)>) {
    let mut units = Vec::new();
    let mut run: Vec<(u64, FrameHeader)> = Vec::new();
    let mut lost = Vec::new();
    for (off, h) in frames {
        if let Some((poff, ph)) = run.last() {
            let joins = *off == poff + ph.frame_len as u64 && h.seq == ph.seq.wrapping_add(1);
            if !joins {
                lost.append(&mut run);
            }
        }
        run.push((*off, h.clone()));
        if !h.batch_cont() {
            units.push(std::mem::take(&mut run));
        }
    }
    lost.append(&mut run);
    (units, lost)
}

/// Describe what is lost in the damaged range `[b, size)`: every damaged
/// stretch between the frames valid on their own (`frames`, in offset
/// order), frame by frame as far as their heads can be read, and every
/// valid frame in `unrecovered` (offset → why).
fn describe_lost(
    sc: &mut Scanner,
    b: u64,
    size: u64,
    last_good_seq: u64,
    frames: &[(u64, FrameHeader)],
    unrecovered: &std::collections::HashMap<u64, String>,
    first: &Damage,
) -> Result<Vec<LostFrame>, JournalError> {
    let mut out = Vec::new();
    let mut cursor = b;
    let mut next_seq = last_good_seq + 1;
    for (off, h) in frames {
        if *off > cursor {
            damaged_stretch(sc, cursor, *off, next_seq, Some(h.seq), first, &mut out)?;
        }
        if let Some(why) = unrecovered.get(off) {
            out.push(LostFrame {
                offset: *off,
                seq: h.seq,
                event_id: Some(EventId(h.event_id)),
                kind: Some(h.kind),
                verified: true,
                why: why.clone(),
            });
        }
        cursor = cursor.max(off + h.frame_len as u64);
        next_seq = h.seq + 1;
    }
    if cursor < size {
        damaged_stretch(sc, cursor, size, next_seq, None, first, &mut out)?;
    }
    Ok(out)
}

/// The frames in the damaged stretch `[from, to)`, whose first frame should
/// carry `seq` (and the next valid frame `next_valid`).
fn damaged_stretch(
    sc: &mut Scanner,
    from: u64,
    to: u64,
    mut seq: u64,
    next_valid: Option<u64>,
    first: &Damage,
    out: &mut Vec<LostFrame>,
) -> Result<(), JournalError> {
    let mut at = from;
    while at < to && !matches!(next_valid, Some(n) if seq >= n) {
        let n = (to - at).min(format::FRAME_HEAD_LEN as u64) as usize;
        let head = sc.get(at, n)?.map(|h| h.to_vec()).unwrap_or_default();
        let magic = head.len() >= 48 && head[0..4] == format::FRAME_MAGIC;
        let decoded = format::decode_head(&head).ok();
        let why = if at == first.offset {
            format!("{} (the frame fails its checks)", first.reason)
        } else {
            "damaged (not valid on its own)".to_string()
        };
        out.push(LostFrame {
            offset: at,
            seq,
            event_id: magic.then(|| EventId(format::arr16(&head[32..48]))),
            kind: decoded.as_ref().map(|h| h.kind),
            verified: false,
            why,
        });
        seq += 1;
        match decoded {
            Some(h) if at + h.frame_len as u64 <= to => at += h.frame_len as u64,
            _ => break,
        }
    }
    if let Some(n) = next_valid {
        if seq < n {
            out.push(LostFrame {
                offset: at,
                seq,
                event_id: None,
                kind: None,
                verified: false,
                why: format!(
                    "seq {seq}..{} are missing too: no readable frame head in [{at}, {to})",
                    n - 1
                ),
            });
        }
    }
    Ok(())
}

/// Payload of a REPAIR frame (64 bytes, little-endian; journal-format §5.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairRecord {
    /// Offset where the moved range started (where the REPAIR frame sits).
    pub cut_offset: u64,
    pub cut_len: u64,
    /// SHA-256 of the moved bytes (the quarantine file's content).
    pub cut_sha256: [u8; 32],
    pub last_good_seq: u64,
    pub recovered_events: u32,
    pub unrecoverable_frames: u32,
}

impl RepairRecord {
    pub const LEN: usize = 64;

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::LEN);
        b.extend_from_slice(&self.cut_offset.to_le_bytes());
        b.extend_from_slice(&self.cut_len.to_le_bytes());
        b.extend_from_slice(&self.cut_sha256);
        b.extend_from_slice(&self.last_good_seq.to_le_bytes());
        b.extend_from_slice(&self.recovered_events.to_le_bytes());
        b.extend_from_slice(&self.unrecoverable_frames.to_le_bytes());
        b
    }

    /// Decode a REPAIR frame's payload; None if it is not 64 bytes.
    pub fn decode(b: &[u8]) -> Option<RepairRecord> {
        if b.len() != Self::LEN {
            return None;
        }
        Some(RepairRecord {
            cut_offset: format::u64_at(b, 0),
            cut_len: format::u64_at(b, 8),
            cut_sha256: format::arr32(&b[16..48]),
            last_good_seq: format::u64_at(b, 48),
            recovered_events: format::u32_at(b, 56),
            unrecoverable_frames: format::u32_at(b, 60),
        })
    }
}

impl Journal {
    fn still_damaged(&self, offset: u64) -> JournalError {
        JournalError::Refused {
            journal: self.p.journal.clone(),
            bad_offset: offset,
            reason: "damage remains after repair (concurrent damage?)".into(),
        }
    }

    /// See [`repair`].
    pub fn repair(&self, apply: bool) -> Result<RepairReport, JournalError> {
        let lk = self.lock()?;
        let chain = VerifyOptions {
            chain: true,
            progress: None,
        };
        let mut v = verify_paths(&self.p, &chain)?;
        let status_before = v.status;
        let mut header_step = None;
        let header = v.header.clone();
        if let Some(hd) = &header {
            let (Some(good), Some(proof)) = (hd.restored, hd.proof) else {
                return Err(JournalError::BadHeader {
                    path: self.p.journal.clone(),
                    detail: hd.detail.clone(),
                });
            };
            if good != self.header_bytes {
                return Err(JournalError::Refused {
                    journal: self.p.journal.clone(),
                    bad_offset: 0,
                    reason:
                        "the header changed since this process opened the journal; run repair again"
                            .into(),
                });
            }
            header_step = Some(format!(
                "restore the 64-byte header (bytes 0..64: {}) — {}; the damaged bytes go to {}",
                hd.detail,
                proof.describe(),
                self.p.quarantine.display()
            ));
            if apply {
                rewrite_header(&self.p, &hd.damaged, &good)?;
                v = verify_paths(&self.p, &chain)?;
            } else {
                // Plan the rest as it will be once the header is restored.
                v.status = v.frames_status;
                v.damage = v.frame_damage.clone();
            }
        }
        let spool_files = spool::list(&self.p.spool)?.len();
        let mut rep = RepairReport {
            status_before,
            applied: apply,
            plan: header_step.into_iter().collect(),
            cut_offset: None,
            cut_bytes: 0,
            recoverable_events: 0,
            unrecoverable_frames: 0,
            spool_files,
            moved_to: None,
            recovered_appended: 0,
            spool_drained: 0,
            head_after: None,
            header,
            lost: Vec::new(),
        };
        let size = v.file_bytes;
        let mut units = Vec::new();
        let mut quarantine_bytes = Vec::new();
        let cut = match (&v.status, &v.damage) {
            (VerifyStatus::Clean, _) | (_, None) => None,
            (VerifyStatus::TornTail, Some(d)) => {
                rep.plan.push(format!(
                    "copy the torn tail [{}, {size}) ({} bytes, {}) to {} and truncate to {}",
                    v.head.offset,
                    size - v.head.offset,
                    d.reason,
                    self.p.torn.display(),
                    v.head.offset
                ));
                Some(v.head.offset)
            }
            (VerifyStatus::Corrupt, Some(d)) => {
                let b = v.head.offset;
                let mut sc = Scanner::open(&self.p.journal)?;
                let mut frames = vec![];
                // Frames of the batch prefix before the damage, then every
                // frame valid on its own after it.
                let mut at = b;
                while at < d.offset {
                    match sc.standalone(at, self.tag())? {
                        Some(h) => {
                            let n = h.frame_len as u64;
                            frames.push((at, h));
                            at += n;
                        }
                        None => break,
                    }
                }
                frames.extend(collect_standalone(&mut sc, d.offset + 8, self.tag())?);
                let (u, leftover) = complete_units(&frames);
                let mut lost = leftover.len();
                let mut unrecovered: std::collections::HashMap<u64, String> = leftover
                    .iter()
                    .map(|(off, _)| {
                        (
                            *off,
                            "valid, but its batch has a damaged or missing frame (a batch is re-appended whole or not at all)".to_string(),
                        )
                    })
                    .collect();
                for unit in u {
                    let mut evs = Vec::new();
                    for (off, h) in unit {
                        if h.kind != FrameKind::Event {
                            lost += 1;
                            unrecovered.insert(
                                off,
                                "a REPAIR frame of an earlier repair (not an event; kept in quarantine)".into(),
                            );
                            continue;
                        }
                        let payload = sc.payload(off, &h)?;
                        evs.push((h.seq, EventId(h.event_id), payload));
                    }
                    if !evs.is_empty() {
                        units.push(evs);
                    }
                }
                rep.recoverable_events = units.iter().map(|u| u.len()).sum();
                rep.unrecoverable_frames = lost;
                rep.lost = describe_lost(&mut sc, b, size, v.head.seq, &frames, &unrecovered, d)?;
                quarantine_bytes = sc
                    .get(b, (size - b) as usize)?
                    .map(|s| s.to_vec())
                    .unwrap_or_default();
                rep.plan.push(format!(
                    "move the damaged range [{b}, {size}) ({} bytes; first bad frame at {}: {}) to {}",
                    size - b,
                    d.offset,
                    d.reason,
                    self.p.quarantine.display()
                ));
                rep.plan.push(format!(
                    "re-append {} intact event(s) from it with their original ids ({} frame(s) cannot be recovered)",
                    rep.recoverable_events, rep.lost.len()
                ));
                rep.plan.push(format!(
                    "truncate the journal to {b} and append a REPAIR frame"
                ));
                Some(b)
            }
        };
        if let Some(c) = cut {
            rep.cut_offset = Some(c);
            rep.cut_bytes = size - c;
        }
        if spool_files > 0 {
            rep.plan.push(format!(
                "append the {spool_files} spooled file(s) from {}",
                self.p.spool.display()
            ));
        }
        if self.p.corrupt.exists() {
            rep.plan
                .push(format!("remove {}", self.p.corrupt.display()));
        }
        if rep.plan.is_empty() {
            rep.plan
                .push("nothing to do: the journal is clean and the spool is empty".into());
        }
        if !apply {
            return Ok(rep);
        }
        // ---- apply ----
        match v.status {
            VerifyStatus::Clean => {}
            VerifyStatus::TornTail => {
                let b = v.head.offset;
                let mut bytes = vec![0u8; (size - b) as usize];
                sys::pread_exact(&self.file, &mut bytes, b)
                    .map_err(|e| JournalError::io("read", &self.p.journal, e))?;
                sys::ensure_dir(&self.p.torn)?;
                let to = self.p.torn.join(format!(
                    "{b}-{}-{}.bin",
                    sys::now_unix_ns(),
                    std::process::id()
                ));
                sys::atomic_write(&to, &bytes)?;
                self.file
                    .set_len(b)
                    .map_err(|e| JournalError::io("truncate", &self.p.journal, e))?;
                sys::fdatasync(&self.file, &self.p.journal)?;
                rep.moved_to = Some(to);
            }
            VerifyStatus::Corrupt => {
                let b = v.head.offset;
                let sha = format::sha256(&quarantine_bytes);
                sys::ensure_dir(&self.p.quarantine)?;
                let to = self.p.quarantine.join(format!(
                    "{b}-{}-{}.bin",
                    sys::now_unix_ns(),
                    hex::encode(&sha[..8])
                ));
                sys::atomic_write(&to, &quarantine_bytes)?;
                // Park the recovered events durably before truncating, so a
                // crash from here on loses nothing: the spool drains them.
                for u in &units {
                    let refs: Vec<(EventId, &[u8])> =
                        u.iter().map(|(_, id, p)| (*id, p.as_slice())).collect();
                    spool::write(&self.p.spool, &format!("r{:020}", u[0].0), &refs)?;
                }
                self.file
                    .set_len(b)
                    .map_err(|e| JournalError::io("truncate", &self.p.journal, e))?;
                sys::fdatasync(&self.file, &self.p.journal)?;
                self.remove_marker()?;
                let mut ready = match self.prepare_no_drain(&lk)? {
                    Some(r) => r,
                    None => return Err(self.still_damaged(b)),
                };
                let payload = RepairRecord {
                    cut_offset: b,
                    cut_len: size - b,
                    cut_sha256: sha,
                    last_good_seq: v.head.seq,
                    recovered_events: rep.recoverable_events as u32,
                    unrecoverable_frames: rep.unrecoverable_frames as u32,
                }
                .encode();
                let mut idb = Vec::from(&b"repair"[..]);
                idb.extend_from_slice(&sha);
                idb.extend_from_slice(&b.to_le_bytes());
                let rid = EventId(format::arr16(&format::sha256(&idb)));
                self.write_locked(&lk, &mut ready, &[(rid, &payload)], FrameKind::Repair)?;
                sys::fdatasync(&self.file, &self.p.journal)?;
                rep.recovered_appended = rep.recoverable_events;
                rep.moved_to = Some(to);
            }
        }
        self.remove_marker()?;
        let mut ready = match self.prepare_no_drain(&lk)? {
            Some(r) => r,
            None => return Err(self.still_damaged(v.head.offset)),
        };
        rep.spool_drained = self.drain_locked(&lk, &mut ready)?;
        rep.head_after = Some(ready.head.clone());
        Ok(rep)
    }
}
