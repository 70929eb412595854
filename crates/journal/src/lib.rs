//! abcd-journal: an append-only, checksummed, hash-chained journal of opaque
//! payloads, safe for many short-lived writer processes.
//!
//! The byte-level format and protocol are specified in `journal-format/`
//! (README.md); this crate is its reference implementation.
//!
//! What this crate owns: the `journal` file and its side files in one
//! directory (`journal.lock`, `journal.ids`, `journal.spool/`,
//! `journal.torn/`, `journal.quarantine/`, `journal.corrupt`); framing,
//! appending, recovery, reading, verifying and repairing.
//!
//! What it must never do: know what a payload means (the domain layer encodes
//! events; here they are bytes with an id), truncate anything but a proven
//! torn tail without an explicit `repair` (a torn tail is only what has the
//! shape of an interrupted append, journal-format §8: a complete last frame
//! that fails its CRC is damage), proceed with a header it has not proven
//! (§4.1), or acknowledge an append before fdatasync returned.

mod check;
mod error;
pub mod format;
mod index;
mod journal;
mod scan;
mod spool;
mod sys;

pub use check::{
    drain_spool, repair, stats, verify, Damage, LostFrame, RepairRecord, RepairReport, Stats,
    VerifyOptions, VerifyReport, VerifyStatus,
};
pub use error::{FrameError, JournalError};
pub use format::{
    decode_frame, FrameHeader, FrameKind, HeaderProof, Reason, FORMAT_VERSION, MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS, MAX_PAYLOAD,
};
pub use journal::{Appended, EventId, Frame, FrameIter, Journal, Options, Position, SyncMode};
pub use scan::HeaderDamage;
pub use sys::{DIR_MODE, FILE_MODE, LOCK_TIMEOUT};

/// Fuzzing entry point (also run over the seed corpus by an ordinary test):
/// decode `data` as a frame, then treat it as a whole journal file in a
/// temporary directory and verify, read and stat it. Must never panic.
pub fn fuzz_journal_bytes(data: &[u8]) {
    let _ = decode_frame(data);
    let _ = format::FileHeader::decode(data);
    let base = std::env::temp_dir().join(format!(
        "abcd-journal-fuzz-{}-{}",
        std::process::id(),
        hex::encode(sys::random_bytes::<8>())
    ));
    if std::fs::create_dir(&base).is_err() {
        return;
    }
    if std::fs::write(base.join("journal"), data).is_ok() {
        let _ = verify(
            &base,
            &VerifyOptions {
                chain: true,
                progress: None,
            },
        );
        let _ = verify(&base, &VerifyOptions::default());
        let _ = stats(&base);
        if let Ok(j) = Journal::open_existing(&base) {
            if let Ok(it) = j.read_from(&j.start()) {
                for f in it.take(10_000) {
                    if f.is_err() {
                        break;
                    }
                }
            }
            let _ = j.head();
            // Exercise the writer's tail check, recovery and refusal paths.
            let _ = j.append(EventId([7; 16]), b"fuzz");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
