//! The journal's file operations, all delegated to `abcd-fsio` (one
//! definition of the modes, of a descriptor-checked open that never follows a
//! symlink, of flock and of an atomic write — and its fault-injection shim in
//! front of every operation), plus random bytes and the clock. Must never
//! decide anything about journal contents.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

pub use abcd_fsio::{Access, DIR_MODE, FILE_MODE};

use crate::error::JournalError;

/// How long a writer waits for the journal lock before giving up. Hooks have
/// a budget of about 1.5 s and a healthy holder keeps the lock for well under
/// a millisecond, but slow-fsync windows of 0.1–0.4 s were measured on this
/// machine class, so wait a few of those before failing.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

type R<T> = Result<T, JournalError>;

/// Create `dir` (and missing parents) as private directories; an existing
/// `dir` is proven a real directory owned by this account (mode narrowed to
/// 0700). Existing parents are left as they are.
pub fn ensure_dir(dir: &Path) -> R<()> {
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() && std::fs::symlink_metadata(parent).is_err() {
            ensure_dir(parent)?;
        }
    }
    Ok(abcd_fsio::ensure_private_dir(dir)?)
}

/// Open a journal file through the checked open (no symlink, regular, ours,
/// 0600).
pub fn open(path: &Path, access: Access) -> R<File> {
    Ok(abcd_fsio::open(path, access)?)
}

pub fn fsync_dir(dir: &Path) -> R<()> {
    Ok(abcd_fsio::sync_dir(dir)?)
}

pub fn fdatasync(f: &File, path: &Path) -> R<()> {
    Ok(abcd_fsio::fdatasync(f, path)?)
}

pub fn truncate(f: &File, path: &Path, len: u64) -> R<()> {
    Ok(abcd_fsio::truncate(f, path, len)?)
}

pub fn remove_file_if_exists(path: &Path) -> R<bool> {
    Ok(abcd_fsio::remove_file_if_exists(path)?)
}

/// Write `bytes` to `path` atomically and durably: temporary file in the
/// same directory, fsync, rename over `path`, fsync the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> R<()> {
    Ok(abcd_fsio::write_atomic(path, bytes, true)?)
}

/// Exclusive flock on `f`, polling until `timeout`.
pub fn lock_exclusive(f: &File, path: &Path, timeout: Duration) -> R<()> {
    Ok(abcd_fsio::lock_exclusive(f, path, timeout)?)
}

pub fn unlock(f: &File) {
    abcd_fsio::unlock(f)
}

/// Reads a small journal side file (marker, spool file) through the checked
/// open; `Ok(None)` when it is absent.
pub fn read_small(path: &Path, cap: u64) -> R<Option<Vec<u8>>> {
    match abcd_fsio::read_private(path, cap) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Random bytes from /dev/urandom (getrandom would need another crate).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // SAFETY: getrandom writes at most N bytes into a buffer of N bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), N, 0) };
    if n == N as isize {
        return b;
    }
    if let Ok(mut f) = File::open("/dev/urandom") {
        if f.read_exact(&mut b).is_ok() {
            return b;
        }
    }
    // Last resort: time and pid mixed through SHA-256. Ids need uniqueness,
    // not secrecy.
    let seed = format!(
        "{:?}{}{:?}",
        std::time::SystemTime::now(),
        std::process::id(),
        Instant::now()
    );
    let h = crate::format::sha256(seed.as_bytes());
    for (i, x) in b.iter_mut().enumerate() {
        *x = h[i % 32];
    }
    b
}

pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Kernel boot id: the page cache survives process death but not reboot, so
/// the derived id index records the boot it was last written in.
/// Read once per process (it cannot change while the process lives).
pub fn boot_id() -> [u8; 16] {
    static BOOT: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *BOOT.get_or_init(read_boot_id)
}

fn read_boot_id() -> [u8; 16] {
    let s = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let hexs: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let mut out = [0u8; 16];
    if let Ok(v) = hex::decode(&hexs) {
        if v.len() == 16 {
            out.copy_from_slice(&v);
        }
    }
    out
}

/// pread exactly `buf.len()` bytes at `off`; Ok(false) on EOF before that.
pub fn pread_exact(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => return Ok(false),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

pub fn pwrite_all(f: &File, path: &Path, buf: &[u8], off: u64) -> R<()> {
    Ok(abcd_fsio::write_all_at(f, path, buf, off)?)
}
