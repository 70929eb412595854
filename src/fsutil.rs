//! Reading files from outside the store, and the store's file operations.
//!
//! Owns: the guarded read every file from outside the process goes through
//! (transcripts, harness sidecars, git files: no symlink, FIFO, device,
//! socket or directory; never a truncated copy of an over-cap file) and
//! SHA-256 hex digests. The store's own file
//! operations — exact modes, descriptor-checked opens, atomic writes, locks,
//! the fault-injection shim — live in `abcd-fsio` and are re-exported here,
//! so there is one definition of each.
//!
//! Must never: follow a symlink at the leaf it reads; truncate an over-cap
//! file into a short read; or know anything about records, staging or
//! journals (callers decide *what* to read, this decides *how*).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use thiserror::Error;

pub use abcd_fsio::{
    account_name, drop_cached, ensure_private_dir, euid, open, overwrite_in_place,
    prove_existing_dir, read_private, read_private_head, remove_file_if_exists, rename, sync_dir,
    write_atomic, Access, FileLock, FsError, DIR_MODE, FILE_MODE,
};

/// Cap on reading one small store file back (staging sidecars, index
/// lists, session notes, checkpoints, markers): each is a few lines; 4 MiB
/// leaves room for an index list of tens of thousands of names.
pub const SMALL_FILE_CAP: u64 = 4 << 20;

/// Why a guarded read refused or failed. Each refusal is a distinct variant
/// so a hook can say precisely what it found instead of a transcript.
#[derive(Debug, Error)]
pub enum GuardedReadError {
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is a symlink; refusing to follow it", path.display())]
    Symlink { path: PathBuf },
    #[error("{} is a FIFO; refusing to read it", path.display())]
    Fifo { path: PathBuf },
    #[error("{} is a device node; refusing to read it", path.display())]
    Device { path: PathBuf },
    #[error("{} is a socket; refusing to read it", path.display())]
    Socket { path: PathBuf },
    #[error("{} is a directory, not a file", path.display())]
    Directory { path: PathBuf },
    #[error("{} is not a regular file; refusing to read it", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is {size} bytes, over the {cap}-byte cap; refused whole, never truncated", path.display())]
    OverCap { path: PathBuf, size: u64, cap: u64 },
    #[error("{} grew past the {cap}-byte cap while being read; refused whole, never truncated", path.display())]
    GrewPastCap { path: PathBuf, cap: u64 },
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl GuardedReadError {
    /// True when the file simply is not there (a caller may treat that as
    /// "absent" rather than as a failure).
    pub fn is_not_found(&self) -> bool {
        matches!(self, GuardedReadError::NotFound { .. })
    }
}

/// Reads a regular file whole, refusing symlinks, FIFOs, devices, sockets,
/// directories and anything over `cap` bytes. Never returns a truncated
/// copy: a file that grows past `cap` while being read is refused too.
pub fn guarded_read(path: &Path, cap: u64) -> Result<Vec<u8>, GuardedReadError> {
    let (f, len) = guarded_open(path)?;
    let p = || path.to_path_buf();
    if len > cap {
        return Err(GuardedReadError::OverCap {
            path: p(),
            size: len,
            cap,
        });
    }
    // One byte more than the size, so the read that finds EOF needs no
    // reallocation (which would copy the whole file once more).
    let mut buf = Vec::with_capacity((len as usize).saturating_add(1));
    f.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| GuardedReadError::Io {
            op: "read",
            path: p(),
            source: e,
        })?;
    if buf.len() as u64 > cap {
        return Err(GuardedReadError::GrewPastCap { path: p(), cap });
    }
    Ok(buf)
}

/// The first `max` bytes of a file, with the same refusals as
/// [`guarded_read`] except the size cap (a head read never holds more than
/// `max`). Used to read a record's frontmatter without its body.
pub fn guarded_read_head(path: &Path, max: u64) -> Result<Vec<u8>, GuardedReadError> {
    let (f, len) = guarded_open(path)?;
    let mut buf = Vec::with_capacity(len.min(max) as usize);
    f.take(max)
        .read_to_end(&mut buf)
        .map_err(|e| GuardedReadError::Io {
            op: "read",
            path: path.to_path_buf(),
            source: e,
        })?;
    Ok(buf)
}

/// Opens `path` for a guarded read: no symlink, no FIFO, device, socket or
/// directory; returns the file and its size.
pub fn guarded_open(path: &Path) -> Result<(File, u64), GuardedReadError> {
    let p = || path.to_path_buf();
    // O_NONBLOCK keeps an open of a FIFO from waiting for a writer; it has
    // no effect on regular-file reads.
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => GuardedReadError::NotFound { path: p() },
            Some(libc::ELOOP) => GuardedReadError::Symlink { path: p() },
            // Linux answers ENXIO for an open of a Unix socket.
            Some(libc::ENXIO) => GuardedReadError::Socket { path: p() },
            _ => GuardedReadError::Io {
                op: "open",
                path: p(),
                source: e,
            },
        })?;
    let meta = f.metadata().map_err(|e| GuardedReadError::Io {
        op: "inspect",
        path: p(),
        source: e,
    })?;
    let ft = meta.file_type();
    if ft.is_fifo() {
        return Err(GuardedReadError::Fifo { path: p() });
    }
    if ft.is_char_device() || ft.is_block_device() {
        return Err(GuardedReadError::Device { path: p() });
    }
    if ft.is_socket() {
        return Err(GuardedReadError::Socket { path: p() });
    }
    if ft.is_dir() {
        return Err(GuardedReadError::Directory { path: p() });
    }
    if !ft.is_file() {
        return Err(GuardedReadError::NotRegular { path: p() });
    }
    let len = meta.len();
    Ok((f, len))
}

/// Fills `buf` from `r` as far as the data goes: returns fewer bytes than
/// `buf.len()` only at end of file (retrying interrupted reads).
pub fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn guarded_read_reads_regular_files_up_to_cap() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("t.jsonl");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(guarded_read(&f, 5).unwrap(), b"12345");
        let err = guarded_read(&f, 4).unwrap_err();
        assert!(
            matches!(
                err,
                GuardedReadError::OverCap {
                    size: 5,
                    cap: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(guarded_read(&t.path().join("missing"), 9)
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn guarded_read_refuses_every_irregular_kind() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let link = t.path().join("link");
        symlink(&f, &link).unwrap();
        assert!(matches!(
            guarded_read(&link, 10),
            Err(GuardedReadError::Symlink { .. })
        ));
        assert!(matches!(
            guarded_read(t.path(), 10),
            Err(GuardedReadError::Directory { .. })
        ));
        assert!(matches!(
            guarded_read(Path::new("/dev/null"), 10),
            Err(GuardedReadError::Device { .. })
        ));
        let fifo = t.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            guarded_read(&fifo, 10),
            Err(GuardedReadError::Fifo { .. })
        ));
        let sock = t.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(matches!(
            guarded_read(&sock, 10),
            Err(GuardedReadError::Socket { .. })
        ));
    }

    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
