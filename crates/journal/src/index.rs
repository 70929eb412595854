//! The event-id index `journal.ids`: a derived, rebuildable open-addressing
//! hash file mapping event id -> seq, so idempotent append is complete (not a
//! window) and O(1) in journal size for a fresh process.
//!
//! Owns: the index file's layout and its catch-up from a high-water
//! Position. Only a writer holding the journal lock modifies it. It is never
//! the source of truth: when it is missing, damaged, from another journal,
//! from an earlier boot, or its high-water position no longer matches the
//! journal (after a repair), it is rebuilt from the journal.
//!
//! Durability argument: the index is never fsynced. Within one boot the page
//! cache is shared by all processes, so a completed pwrite survives the death
//! of its writer; slots are written before the header, so a writer killed in
//! between leaves a header whose high-water mark is behind, and catch-up
//! re-inserts (idempotently). Across a reboot (power loss) nothing is known
//! about which pages reached the disk, so the index records the boot id and
//! is rebuilt once per boot on first use.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::{self, masked_crc};
use crate::scan::{Expect, Scanner, Step};
use crate::sys;
use crate::Position;

const INDEX_MAGIC: [u8; 8] = *b"ABCDIDX1";
const INDEX_HEADER_LEN: u64 = 128;
/// id (16) + seq (8) + frame offset (8); 128 slots per 4 KiB page, none
/// straddling a page.
const SLOT_LEN: u64 = 32;
/// Initial slot count: 32 KiB, enough for 512 events before the first grow.
const MIN_CAPACITY: u64 = 1024;
/// Grow when more than half the slots are used: linear probing stays at
/// ~1.5 probes per successful lookup and ~2.5 per miss at load 0.5.
const MAX_LOAD_NUM: u64 = 1;
const MAX_LOAD_DEN: u64 = 2;

pub(crate) struct IdIndex {
    file: File,
    path: PathBuf,
    pub capacity: u64,
    pub count: u64,
    pub hwm: Position,
}

struct Header {
    journal_id: [u8; 16],
    boot_id: [u8; 16],
    capacity: u64,
    count: u64,
    hwm: Position,
}

fn encode_header(h: &Header) -> [u8; INDEX_HEADER_LEN as usize] {
    let mut b = [0u8; INDEX_HEADER_LEN as usize];
    b[0..8].copy_from_slice(&INDEX_MAGIC);
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[16..32].copy_from_slice(&h.journal_id);
    b[32..48].copy_from_slice(&h.boot_id);
    b[48..56].copy_from_slice(&h.capacity.to_le_bytes());
    b[56..64].copy_from_slice(&h.count.to_le_bytes());
    b[64..72].copy_from_slice(&h.hwm.seq.to_le_bytes());
    b[72..80].copy_from_slice(&h.hwm.offset.to_le_bytes());
    b[80..112].copy_from_slice(&h.hwm.hash);
    let crc = masked_crc(&b[0..120]);
    b[120..124].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_header(b: &[u8]) -> Option<Header> {
    if b.len() < INDEX_HEADER_LEN as usize || b[0..8] != INDEX_MAGIC {
        return None;
    }
    if format::u32_at(b, 8) != 1 || format::u32_at(b, 120) != masked_crc(&b[0..120]) {
        return None;
    }
    Some(Header {
        journal_id: format::arr16(&b[16..32]),
        boot_id: format::arr16(&b[32..48]),
        capacity: format::u64_at(b, 48),
        count: format::u64_at(b, 56),
        hwm: Position {
            seq: format::u64_at(b, 64),
            offset: format::u64_at(b, 72),
            hash: format::arr32(&b[80..112]),
        },
    })
}

/// Slot of an id: ids are producer-chosen and usually random, but mix both
/// halves anyway so structured ids do not cluster.
fn slot_of(id: &[u8; 16], capacity: u64) -> u64 {
    let a = format::u64_at(id, 0);
    let b = format::u64_at(id, 8);
    let mut z = a ^ b.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z & (capacity - 1)
}

impl IdIndex {
    /// Open the index if it is usable for this journal in this boot.
    pub fn open(path: &Path, journal_id: &[u8; 16]) -> Result<Option<IdIndex>, JournalError> {
        let file = match abcd_fsio::open(path, sys::Access::ReadWrite) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut b = [0u8; INDEX_HEADER_LEN as usize];
        let ok =
            sys::pread_exact(&file, &mut b, 0).map_err(|e| JournalError::io("read", path, e))?;
        let h = match decode_header(&b) {
            Some(h) if ok => h,
            _ => return Ok(None),
        };
        let len = file
            .metadata()
            .map_err(|e| JournalError::io("stat", path, e))?
            .len();
        let sane = h.journal_id == *journal_id
            && h.boot_id == sys::boot_id()
            && h.capacity >= MIN_CAPACITY
            && h.capacity.is_power_of_two()
            && h.count <= h.capacity
            && h.capacity
                .checked_mul(SLOT_LEN)
                .and_then(|b| b.checked_add(INDEX_HEADER_LEN))
                == Some(len);
        if !sane {
            return Ok(None);
        }
        Ok(Some(IdIndex {
            file,
            path: path.to_path_buf(),
            capacity: h.capacity,
            count: h.count,
            hwm: h.hwm,
        }))
    }

    /// Create an empty index (high-water = `start`) atomically, replacing
    /// whatever is at `path`.
    pub fn create(
        path: &Path,
        journal_id: &[u8; 16],
        capacity: u64,
        start: Position,
    ) -> Result<IdIndex, JournalError> {
        let slots = vec![0u8; (capacity * SLOT_LEN) as usize];
        Self::write_new(path, journal_id, capacity, 0, start, &slots)
    }

    fn write_new(
        path: &Path,
        journal_id: &[u8; 16],
        capacity: u64,
        count: u64,
        hwm: Position,
        slots: &[u8],
    ) -> Result<IdIndex, JournalError> {
        let hdr = Header {
            journal_id: *journal_id,
            boot_id: sys::boot_id(),
            capacity,
            count,
            hwm: hwm.clone(),
        };
        let mut bytes = Vec::with_capacity(INDEX_HEADER_LEN as usize + slots.len());
        bytes.extend_from_slice(&encode_header(&hdr));
        bytes.extend_from_slice(slots);
        // Replaced by rename so a reader holding the old file sees a
        // consistent snapshot. No fsync: see the module doc.
        // A failed write removes its temporary (a full disk must not leave
        // one per hook); a killed writer's is swept by the next drain,
        // repair or rebuild (`abcd_fsio::sweep_stale_temps`).
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = abcd_fsio::temp_path(dir, std::ffi::OsStr::new("journal.ids"));
        let written = (|| {
            let f = sys::open(&tmp, sys::Access::CreateNew)?;
            sys::pwrite_all(&f, &tmp, &bytes, 0)?;
            abcd_fsio::rename(&tmp, path)?;
            // Reopened read-write: CreateNew opened it write-only.
            sys::open(path, sys::Access::ReadWrite)
        })();
        let f = match written {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        Ok(IdIndex {
            file: f,
            path: path.to_path_buf(),
            capacity,
            count,
            hwm,
        })
    }

    fn read_slot(&self, i: u64) -> Result<([u8; 16], u64, u64), JournalError> {
        let mut b = [0u8; SLOT_LEN as usize];
        sys::pread_exact(&self.file, &mut b, INDEX_HEADER_LEN + i * SLOT_LEN)
            .map_err(|e| JournalError::io("read", &self.path, e))?;
        Ok((
            format::arr16(&b[0..16]),
            format::u64_at(&b, 16),
            format::u64_at(&b, 24),
        ))
    }

    /// (seq, frame offset) of `id` if indexed. Callers confirm a hit
    /// against the journal before trusting it (see `Journal::lookup_confirmed`).
    pub fn lookup(&self, id: &[u8; 16]) -> Result<Option<(u64, u64)>, JournalError> {
        let mut i = slot_of(id, self.capacity);
        for _ in 0..self.capacity {
            let (sid, seq, off) = self.read_slot(i)?;
            if seq == 0 {
                return Ok(None);
            }
            if &sid == id {
                return Ok(Some((seq, off)));
            }
            i = (i + 1) & (self.capacity - 1);
        }
        Ok(None)
    }

    /// Insert `id -> seq` unless the id is already present (the first
    /// occurrence wins, as in the journal). Caller holds the journal lock.
    pub fn insert(
        &mut self,
        id: &[u8; 16],
        seq: u64,
        offset: u64,
        journal_id: &[u8; 16],
    ) -> Result<(), JournalError> {
        if (self.count + 1) * MAX_LOAD_DEN > self.capacity * MAX_LOAD_NUM {
            self.grow(journal_id)?;
        }
        let mut i = slot_of(id, self.capacity);
        loop {
            let (sid, s, _) = self.read_slot(i)?;
            if s == 0 {
                let mut b = [0u8; SLOT_LEN as usize];
                b[0..16].copy_from_slice(id);
                b[16..24].copy_from_slice(&seq.to_le_bytes());
                b[24..32].copy_from_slice(&offset.to_le_bytes());
                sys::pwrite_all(&self.file, &self.path, &b, INDEX_HEADER_LEN + i * SLOT_LEN)?;
                self.count += 1;
                return Ok(());
            }
            if &sid == id {
                return Ok(());
            }
            i = (i + 1) & (self.capacity - 1);
        }
    }

    fn grow(&mut self, journal_id: &[u8; 16]) -> Result<(), JournalError> {
        let old_len = (self.capacity * SLOT_LEN) as usize;
        let mut old = vec![0u8; old_len];
        sys::pread_exact(&self.file, &mut old, INDEX_HEADER_LEN)
            .map_err(|e| JournalError::io("read", &self.path, e))?;
        let cap = self.capacity * 2;
        let mut slots = vec![0u8; (cap * SLOT_LEN) as usize];
        let mut count = 0;
        for s in old.chunks_exact(SLOT_LEN as usize) {
            let seq = format::u64_at(s, 16);
            if seq == 0 {
                continue;
            }
            let id = format::arr16(&s[0..16]);
            let mut i = slot_of(&id, cap);
            while format::u64_at(&slots, (i * SLOT_LEN) as usize + 16) != 0 {
                i = (i + 1) & (cap - 1);
            }
            let at = (i * SLOT_LEN) as usize;
            slots[at..at + SLOT_LEN as usize].copy_from_slice(s);
            count += 1;
        }
        *self = Self::write_new(&self.path, journal_id, cap, count, self.hwm.clone(), &slots)?;
        Ok(())
    }

    /// Persist count and high-water mark (after the slots they cover).
    pub fn set_hwm(&mut self, hwm: Position, journal_id: &[u8; 16]) -> Result<(), JournalError> {
        self.hwm = hwm;
        let hdr = Header {
            journal_id: *journal_id,
            boot_id: sys::boot_id(),
            capacity: self.capacity,
            count: self.count,
            hwm: self.hwm.clone(),
        };
        sys::pwrite_all(&self.file, &self.path, &encode_header(&hdr), 0)
    }
}

/// Bring the index at `path` up to `head` (the validated journal tail),
/// rebuilding it if it cannot be trusted. Caller holds the journal lock.
/// Returns the index and whether it was rebuilt from scratch.
pub(crate) fn catch_up(
    path: &Path,
    journal_path: &Path,
    journal_id: &[u8; 16],
    tag: [u8; 4],
    start: &Position,
    head: &Position,
    force_rebuild: bool,
) -> Result<IdIndex, JournalError> {
    let mut idx = match IdIndex::open(path, journal_id)? {
        Some(i) if !force_rebuild => i,
        _ => IdIndex::create(path, journal_id, MIN_CAPACITY, start.clone())?,
    };
    if idx.hwm == *head {
        return Ok(idx);
    }
    let mut sc = Scanner::open(journal_path)?;
    let hwm_ok = idx.hwm.offset <= head.offset
        && (idx.hwm == *start
            || matches!(sc.frame_ending_at(idx.hwm.offset, tag)?, Some((h, hash)) if h.seq == idx.hwm.seq && hash == idx.hwm.hash));
    if !hwm_ok {
        idx = IdIndex::create(path, journal_id, MIN_CAPACITY, start.clone())?;
    }
    // Walk from the high-water mark to the head, inserting event ids. The
    // head was validated by the caller, so frames in between are expected
    // to be valid; if they are not, the caller's damage handling applies.
    let mut pos = idx.hwm.clone();
    while pos.offset < head.offset {
        let step = sc.next(
            pos.offset,
            &Expect {
                seq: pos.seq + 1,
                tag,
                prev_hash: Some(&pos.hash),
                hash: true,
            },
        )?;
        match step {
            Step::Frame { h, off, hash } => {
                if h.kind == format::FrameKind::Event {
                    idx.insert(&h.event_id, h.seq, off, journal_id)?;
                }
                pos = Position {
                    seq: h.seq,
                    offset: off + h.frame_len as u64,
                    hash: hash.unwrap_or([0; 32]),
                };
            }
            Step::End => break,
            Step::Invalid(reason) => {
                idx.set_hwm(pos.clone(), journal_id)?;
                return Err(JournalError::Damaged {
                    offset: pos.offset,
                    reason,
                });
            }
        }
    }
    idx.set_hwm(pos, journal_id)?;
    Ok(idx)
}
