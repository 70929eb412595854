//! The spool `journal.spool/`: where events go durably when the journal
//! refuses appends (mid-file damage) and where `repair` parks recovered
//! events before it truncates.
//!
//! Owns: spool file layout, naming and durable writes (temp + fsync +
//! rename + fsync dir). Must never append to the journal itself; draining is
//! done by the appender under the journal lock.

use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::{self, masked_crc, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, MAX_PAYLOAD};
use crate::sys;
use crate::EventId;

const SPOOL_MAGIC: [u8; 8] = *b"ABCDSPL1";
/// File suffix of complete spool files; temp files start with '.'.
pub const SPOOL_SUFFIX: &str = ".spool";
/// Cap on reading one spool file back: one atomic group of at most
/// `MAX_BATCH_BYTES` of payload plus its per-event framing.
pub(crate) const SPOOL_FILE_CAP: u64 = MAX_BATCH_BYTES as u64 + MAX_BATCH_EVENTS as u64 * 64 + 64;

/// One spool file holds one atomic group (a single event or a batch).
pub(crate) fn encode(events: &[(EventId, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&SPOOL_MAGIC);
    b.extend_from_slice(&(events.len() as u32).to_le_bytes());
    for (id, p) in events {
        b.extend_from_slice(&id.0);
        b.extend_from_slice(&(p.len() as u32).to_le_bytes());
        b.extend_from_slice(p);
    }
    let crc = masked_crc(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

pub(crate) fn decode(b: &[u8], path: &Path) -> Result<Vec<(EventId, Vec<u8>)>, JournalError> {
    let bad = |d: &str| JournalError::BadSpool {
        path: path.to_path_buf(),
        detail: d.to_string(),
    };
    if b.len() < 16 || b[0..8] != SPOOL_MAGIC {
        return Err(bad("bad magic"));
    }
    let body = &b[..b.len() - 4];
    if format::u32_at(b, b.len() - 4) != masked_crc(body) {
        return Err(bad("crc mismatch"));
    }
    let n = format::u32_at(b, 8) as usize;
    if n > MAX_BATCH_EVENTS {
        return Err(bad("too many events"));
    }
    let mut at = 12;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if body.len() < at + 20 {
            return Err(bad("truncated entry"));
        }
        let id = EventId(format::arr16(&body[at..at + 16]));
        let len = format::u32_at(body, at + 16) as usize;
        at += 20;
        if len > MAX_PAYLOAD || body.len() < at + len {
            return Err(bad("bad payload length"));
        }
        out.push((id, body[at..at + len].to_vec()));
        at += len;
    }
    if at != body.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

/// Write a spool file durably and return its path. `prefix` orders drains:
/// "r<seq>" (recovered by repair, original order) sorts before "s<ts>"
/// (refused appends, arrival order).
pub(crate) fn write(
    spool_dir: &Path,
    prefix: &str,
    events: &[(EventId, &[u8])],
) -> Result<PathBuf, JournalError> {
    sys::ensure_dir(spool_dir)?;
    let first = events
        .first()
        .map(|e| hex::encode(e.0 .0))
        .unwrap_or_default();
    let path = spool_dir.join(format!(
        "{prefix}-{}-{first}{SPOOL_SUFFIX}",
        std::process::id()
    ));
    let total: usize = events.iter().map(|e| e.1.len() + 20).sum();
    if total > MAX_BATCH_BYTES {
        return Err(JournalError::PayloadTooLarge {
            what: "spooled batch",
            len: total as u64,
            cap: MAX_BATCH_BYTES as u64,
        });
    }
    sys::atomic_write(&path, &encode(events))?;
    Ok(path)
}

/// Complete spool files in drain order. Cheap when the directory is empty.
pub(crate) fn list(spool_dir: &Path) -> Result<Vec<PathBuf>, JournalError> {
    let rd = match std::fs::read_dir(spool_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(JournalError::io("readdir", spool_dir, e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| JournalError::io("readdir", spool_dir, e))?;
        let name = ent.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && name.ends_with(SPOOL_SUFFIX) {
            out.push(ent.path());
        }
    }
    out.sort();
    Ok(out)
}
