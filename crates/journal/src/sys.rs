//! The single place that knows file modes, durability calls and locking.
//!
//! Owns: creating files 0600 and directories 0700 exactly (fchmod/chmod after
//! create, whatever the umask), fsync of files and directories, atomic
//! temp+fsync+rename+fsync-dir writes, flock with a timeout, random bytes and
//! the clock. Must never decide anything about journal contents.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::JournalError;

/// Mode of every file the engine creates: transcripts are private.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory the engine creates.
pub const DIR_MODE: u32 = 0o700;
/// How long a writer waits for the journal lock before giving up. Hooks have
/// a budget of about 1.5 s and a healthy holder keeps the lock for well under
/// a millisecond, but slow-fsync windows of 0.1–0.4 s were measured on this
/// machine class, so wait a few of those before failing.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

type R<T> = Result<T, JournalError>;

/// Create `dir` (and parents) if missing; directories created here get 0700
/// exactly.
pub fn ensure_dir(dir: &Path) -> R<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            ensure_dir(parent)?;
        }
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| JournalError::io("chmod", dir, e))?;
            if let Some(parent) = dir.parent() {
                let _ = fsync_dir(parent);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(JournalError::io("mkdir", dir, e)),
    }
}

/// Open (creating if missing) a file read-write with mode 0600 set exactly.
pub fn open_rw_create(path: &Path, append: bool) -> R<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .append(append)
        .mode(FILE_MODE)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| JournalError::io("open", path, e))?;
    set_mode(&f, path)?;
    Ok(f)
}

/// fchmod to 0600 (the umask may have removed bits or the file may predate us).
pub fn set_mode(f: &File, path: &Path) -> R<()> {
    f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| JournalError::io("fchmod", path, e))
}

pub fn fsync_dir(dir: &Path) -> R<()> {
    let d = File::open(dir).map_err(|e| JournalError::io("open dir", dir, e))?;
    d.sync_all()
        .map_err(|e| JournalError::io("fsync dir", dir, e))
}

pub fn fdatasync(f: &File, path: &Path) -> R<()> {
    f.sync_data()
        .map_err(|e| JournalError::io("fdatasync", path, e))
}

/// Write `bytes` to `path` atomically: temp file in the same directory,
/// fsync, rename over `path`, fsync the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> R<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        hex::encode(random_bytes::<4>())
    ));
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| JournalError::io("create", &tmp, e))?;
        set_mode(&f, &tmp)?;
        f.write_all(bytes)
            .map_err(|e| JournalError::io("write", &tmp, e))?;
        f.sync_all()
            .map_err(|e| JournalError::io("fsync", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| JournalError::io("rename", path, e))?;
        fsync_dir(dir)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Exclusive flock on `f`, polling with LOCK_NB until `timeout`. flock locks
/// belong to the open file description and vanish when the holder dies, so a
/// killed writer never leaves a stale lock.
pub fn lock_exclusive(f: &File, path: &Path, timeout: Duration) -> R<()> {
    let start = Instant::now();
    let mut backoff = Duration::from_micros(20);
    loop {
        // SAFETY: flock on a valid, open file descriptor.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
            _ => return Err(JournalError::io("flock", path, err)),
        }
        if start.elapsed() >= timeout {
            return Err(JournalError::LockTimeout {
                path: path.to_path_buf(),
                waited_ms: start.elapsed().as_millis() as u64,
            });
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(2));
    }
}

pub fn unlock(f: &File) {
    // SAFETY: flock on a valid, open file descriptor; failure to unlock is
    // harmless because closing the descriptor releases the lock anyway.
    unsafe {
        libc::flock(f.as_raw_fd(), libc::LOCK_UN);
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

pub fn pwrite_all(f: &File, buf: &[u8], off: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(buf, off)
}
