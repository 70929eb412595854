//! Typed errors at the crate boundary. Every variant carries enough context
//! (path, operation, offset) for a user to act on it.

use std::path::PathBuf;

use crate::format::Reason;

/// Errors returned by the journal engine.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// An I/O operation failed; `op` names what was being done.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A journal file is not what the store may use: a symlink, not a
    /// regular file, owned by another account, over its size cap.
    #[error(transparent)]
    Fs(abcd_fsio::FsError),
    /// The journal (or its directory) does not exist.
    #[error("no journal at {0} (run the tool once in this repository to create it)")]
    NotFound(PathBuf),
    /// The journal holds mid-file damage: the append was refused and the
    /// event(s) were written durably to the spool instead. Nothing is lost;
    /// run `verify` and then `repair`.
    #[error("journal {journal} is corrupt at offset {bad_offset} ({reason}); append refused, event spooled to {spool_path}; run `abcd journal verify` then `abcd journal repair`")]
    CorruptSpooled {
        journal: PathBuf,
        bad_offset: u64,
        reason: String,
        spool_path: PathBuf,
    },
    /// Another process held the journal lock for longer than the timeout.
    #[error("timed out after {waited_ms} ms waiting for the journal lock {path}")]
    LockTimeout { path: PathBuf, waited_ms: u64 },
    /// A payload (or a batch) exceeds its cap.
    #[error("{what} of {len} bytes exceeds the cap of {cap} bytes")]
    PayloadTooLarge {
        what: &'static str,
        len: u64,
        cap: u64,
    },
    /// `read_from` was given a position whose frame hash does not match the
    /// journal: the journal was repaired or rewritten; the consumer must
    /// rebuild from `Journal::start()`.
    #[error("checkpoint mismatch at seq {seq} offset {offset}: {detail}; rebuild from the start")]
    CheckpointMismatch {
        seq: u64,
        offset: u64,
        detail: String,
    },
    /// The file header is invalid: this file is not a journal, or its first
    /// 64 bytes are damaged.
    #[error("bad journal header in {path}: {detail}")]
    BadHeader { path: PathBuf, detail: String },
    /// A spool file could not be decoded.
    #[error("bad spool file {path}: {detail}")]
    BadSpool { path: PathBuf, detail: String },
    /// The operation needs an undamaged journal (draining the spool, or
    /// repair found damage it could not clear).
    #[error("journal {journal} is damaged at offset {bad_offset} ({reason}); run `abcd journal verify` then `abcd journal repair`")]
    Refused {
        journal: PathBuf,
        bad_offset: u64,
        reason: String,
    },
    /// A frame could not be decoded where a valid one was required (for
    /// example, damage found by a writer during a locked scan).
    #[error("journal damaged at offset {offset}: {reason}")]
    Damaged { offset: u64, reason: Reason },
}

impl From<abcd_fsio::FsError> for JournalError {
    fn from(e: abcd_fsio::FsError) -> Self {
        match e {
            abcd_fsio::FsError::Io { op, path, source } => JournalError::Io { op, path, source },
            abcd_fsio::FsError::LockTimeout { path, waited } => JournalError::LockTimeout {
                path,
                waited_ms: waited.as_millis() as u64,
            },
            other => JournalError::Fs(other),
        }
    }
}

impl JournalError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JournalError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Error from [`crate::decode_frame`]: why a byte slice is not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct FrameError {
    pub reason: Reason,
}
