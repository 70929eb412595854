//! `verify`, `stats` and `repair`: the operator's view of a journal.
//!
//! Owns: classifying damage (clean / torn tail / corrupt), recording
//! corruption in `journal.corrupt` so writers refuse, and the explicit repair
//! procedure. `verify` and `stats` never modify journal bytes; `repair`
//! without `apply` changes nothing at all.

use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::{self, FrameHeader, FrameKind, Reason};
use crate::journal::{self, walk_mode, Journal, Paths, Tail};
use crate::scan::{self, Scanner};
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
    /// Damage followed by valid frames (or a valid frame that fails its
    /// context): bit rot, tampering or a bug. Never truncated automatically.
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
    pub damage: Option<Damage>,
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

fn open_scanner(p: &Paths) -> Result<(Scanner, format::FileHeader, [u8; 32]), JournalError> {
    let file = match sys::open(&p.journal, sys::Access::Read) {
        Err(JournalError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(JournalError::NotFound(p.journal.clone()))
        }
        other => other?,
    };
    let (h, hh) = scan::read_header(&file, &p.journal)?;
    Ok((Scanner::from_file(file, &p.journal)?, h, hh))
}

pub(crate) fn verify_paths(
    p: &Paths,
    opts: &VerifyOptions<'_>,
) -> Result<VerifyReport, JournalError> {
    let (mut sc, hdr, hh) = open_scanner(p)?;
    let tag = hdr.tag();
    let start = Position {
        seq: 0,
        offset: format::HEADER_LEN as u64,
        hash: hh,
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
    };
    if let Some(f) = opts.progress {
        f(size, size);
    }
    let (status, offset, reason) = match w.classify(&mut sc, tag)? {
        Tail::Ok(_) => return Ok(report),
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
    let after = collect_standalone(&mut sc, w.last.offset.max(offset) + 8, tag)?;
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
    Ok(report)
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
    let (mut sc, hdr, hh) = open_scanner(&p)?;
    let start = Position {
        seq: 0,
        offset: format::HEADER_LEN as u64,
        hash: hh,
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
}

/// Repair the journal in `dir`. Without `apply` it only reports the plan.
/// With `apply`, under the journal lock: a torn tail is copied to
/// `journal.torn/` and cut; mid-file damage `[B, EOF)` (B = start of the
/// batch holding the first bad frame) is copied to `journal.quarantine/`, the
/// intact events in it are spooled, the file is truncated to B, a REPAIR
/// frame is appended, and the spool is drained (recovered events first).
pub fn repair(dir: &Path, apply: bool) -> Result<RepairReport, JournalError> {
    let j = Journal::open_existing(dir)?;
    j.repair(apply)
}

/// Drain `journal.spool/` into the journal in `dir` (idempotent by id).
pub fn drain_spool(dir: &Path) -> Result<usize, JournalError> {
    Journal::open_existing(dir)?.drain_spool()
}

/// Group frames into complete atomic units: contiguous frames (each at the
/// previous end with seq+1) ending with a batch-final frame.
fn complete_units(frames: &[(u64, FrameHeader)]) -> (Vec<Vec<(u64, FrameHeader)>>, usize) {
    let mut units = Vec::new();
    let mut run: Vec<(u64, FrameHeader)> = Vec::new();
    let mut lost = 0;
    for (off, h) in frames {
        if let Some((poff, ph)) = run.last() {
            let joins = *off == poff + ph.frame_len as u64 && h.seq == ph.seq.wrapping_add(1);
            if !joins {
                lost += run.len();
                run.clear();
            }
        }
        run.push((*off, h.clone()));
        if !h.batch_cont() {
            units.push(std::mem::take(&mut run));
        }
    }
    lost += run.len();
    (units, lost)
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
        let v = verify_paths(
            &self.p,
            &VerifyOptions {
                chain: true,
                progress: None,
            },
        )?;
        let spool_files = spool::list(&self.p.spool)?.len();
        let mut rep = RepairReport {
            status_before: v.status,
            applied: apply,
            plan: Vec::new(),
            cut_offset: None,
            cut_bytes: 0,
            recoverable_events: 0,
            unrecoverable_frames: 0,
            spool_files,
            moved_to: None,
            recovered_appended: 0,
            spool_drained: 0,
            head_after: None,
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
                let (u, lost) = complete_units(&frames);
                let mut lost = lost;
                for unit in u {
                    let mut evs = Vec::new();
                    for (off, h) in unit {
                        if h.kind != FrameKind::Event {
                            lost += 1;
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
                    rep.recoverable_events, rep.unrecoverable_frames
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
