//! abcd-fsio: the one place that knows how abcd's store touches the file
//! system. The journal engine and the store core both go through it, so there
//! is one definition of the file modes, of a safe open, of a lock and of an
//! atomic write — and one fault-injection point ([`fault`]) in front of every
//! operation.
//!
//! Owns: the private modes (0700 / 0600, set exactly on an open descriptor so
//! umask never matters); opening a store file without following a symlink and
//! proving it on the descriptor (regular file, owned by this account, mode
//! narrowed to exactly 0600); private directories proven the same way;
//! atomic replace-by-rename; flock with a deadline; durability calls; the
//! temporary-file naming scheme and the sweep of dead writers' temporaries.
//!
//! Must never: follow a symlink at the leaf it opens; use a file another
//! account owns; widen a mode; leave its own temporary file behind on a failed
//! write; or know what the bytes mean.

pub mod fault;

use std::ffi::{OsStr, OsString};
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use fault::Op;
use thiserror::Error;

/// Every directory abcd creates or adopts: owner only, because staging and
/// quarantine hold unredacted transcript text.
pub const DIR_MODE: u32 = 0o700;
/// Every file abcd writes: owner read/write only, for the same reason.
pub const FILE_MODE: u32 = 0o600;

/// A temporary file whose writer may still be alive (its pid runs, perhaps
/// reused by another program) is removed once it is this old: no write abcd
/// makes takes minutes, so such a file was never renamed into place and was
/// never acknowledged.
pub const STALE_TMP_AGE: Duration = Duration::from_secs(600);

/// First pause between lock attempts; short because most holders (a stage
/// write) finish in well under a millisecond.
const LOCK_BACKOFF_START: Duration = Duration::from_micros(50);
/// Longest pause between lock attempts, so a waiter notices a released lock
/// within a few tens of milliseconds even after a long wait.
const LOCK_BACKOFF_MAX: Duration = Duration::from_millis(25);
/// How many times a lock acquire re-opens the path after finding it locked
/// an inode that was unlinked (retired) meanwhile; more than a handful in a
/// row means something is churning the path and waiting is pointless.
const LOCK_MAX_REOPENS: u32 = 64;

/// Failures of the store's file operations. Each names the path and the
/// operation so a user can act on it.
#[derive(Debug, Error)]
pub enum FsError {
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is a symlink; abcd refuses to follow a symlink inside its store — remove the link and retry (abcd recreates what it needs)", path.display())]
    Symlink { path: PathBuf },
    #[error("{} is not a real directory; move it aside so abcd can create the directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("{} is not a regular file; abcd refuses to use it — move it aside and retry", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is owned by another account (uid {uid}{}); abcd refuses to use it — run abcd as that account, or move it aside so abcd can create its own", path.display(), account.as_deref().map(|a| format!(", {a}")).unwrap_or_default())]
    ForeignOwner {
        path: PathBuf,
        uid: u32,
        account: Option<String>,
    },
    #[error("refusing to replace {}: it is a symlink — remove the link and retry", path.display())]
    TargetIsSymlink { path: PathBuf },
    #[error("{} has no file name or parent directory to write into", path.display())]
    BadTarget { path: PathBuf },
    #[error("timed out after {waited:?} waiting for the lock {}; another abcd process holds it — retry, or find the process holding it", path.display())]
    LockTimeout { path: PathBuf, waited: Duration },
    #[error("{} is {size} bytes, over the {cap}-byte cap for this file; refused whole, never truncated — move it aside", path.display())]
    OverCap { path: PathBuf, size: u64, cap: u64 },
}

impl FsError {
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        FsError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// True when the file simply is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The operating-system error behind an I/O failure, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            FsError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

type R<T> = Result<T, FsError>;

/// Runs the fault check for `op` on `path`, then `f`; either failure is
/// reported as `what path: error`.
fn guarded<T>(op: Op, what: &'static str, path: &Path, f: impl FnOnce() -> io::Result<T>) -> R<T> {
    fault::check(op, path)
        .and_then(|()| f())
        .map_err(|e| FsError::io(what, path, e))
}

/// This process's effective uid (read once; abcd never changes its ids).
pub fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    // SAFETY: geteuid has no preconditions and cannot fail.
    *EUID.get_or_init(|| unsafe { libc::geteuid() })
}

/// Best-effort account name of `uid`, for error messages only: the local
/// accounts in `/etc/passwd`, read directly. Not `getpwuid_r`: in a
/// statically linked build (the default install on x86_64 Linux) glibc's
/// NSS would `dlopen` modules of whatever glibc the system has now, which
/// can crash the process; a hook must never load code to word a message.
/// An account only a directory service knows is then named by uid alone.
pub fn account_name(uid: u32) -> Option<String> {
    // Bounded: a passwd file is small; a huge one is not read whole.
    let mut text = String::new();
    std::fs::File::open("/etc/passwd")
        .ok()?
        .take(4 << 20)
        .read_to_string(&mut text)
        .ok()?;
    account_in_passwd(&text, uid)
}

/// The name on the first `name:password:uid:…` line of `passwd` whose uid
/// field is `uid`.
fn account_in_passwd(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let id: u32 = fields.next()?.parse().ok()?;
        (id == uid && !name.is_empty() && !name.starts_with('#')).then(|| name.to_string())
    })
}

fn foreign(path: &Path, uid: u32) -> FsError {
    FsError::ForeignOwner {
        path: path.to_path_buf(),
        uid,
        account: account_name(uid),
    }
}

/// Maps an open error of a path opened with `O_NOFOLLOW` to what it means.
fn open_error(op: &'static str, path: &Path, e: io::Error, want_dir: bool) -> FsError {
    match e.raw_os_error() {
        Some(libc::ELOOP) => FsError::Symlink {
            path: path.to_path_buf(),
        },
        // Linux answers ENOTDIR for O_DIRECTORY | O_NOFOLLOW on a symlink.
        Some(libc::ENOTDIR)
            if want_dir
                && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            FsError::Symlink {
                path: path.to_path_buf(),
            }
        }
        Some(libc::ENOTDIR) if want_dir => FsError::NotADirectory {
            path: path.to_path_buf(),
        },
        // O_NONBLOCK on a FIFO with no reader, or a socket.
        Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) => FsError::NotRegular {
            path: path.to_path_buf(),
        },
        Some(libc::EISDIR) => FsError::NotRegular {
            path: path.to_path_buf(),
        },
        _ => FsError::io(op, path, e),
    }
}

/// Creates `path` (one level; the caller walks top-down) with mode 0700 if
/// it is missing, then proves it is a real directory owned by this account
/// and narrows its mode to exactly 0700 through a descriptor opened without
/// following symlinks.
pub fn ensure_private_dir(path: &Path) -> R<()> {
    // Open first (every hook opens a dozen levels that exist): O_NOFOLLOW
    // refuses a symlinked level and O_DIRECTORY anything but a directory,
    // so no separate mkdir and lstat are needed on that path.
    let dir = match open_dir(path) {
        Err(e) if e.is_not_found() => {
            match guarded(Op::Mkdir, "create directory", path, || {
                DirBuilder::new().mode(DIR_MODE).create(path)
            }) {
                Ok(()) => {}
                Err(FsError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            open_dir(path)
        }
        other => other,
    }?;
    let meta = dir
        .metadata()
        .map_err(|e| FsError::io("inspect directory", path, e))?;
    if meta.uid() != euid() {
        return Err(foreign(path, meta.uid()));
    }
    if meta.mode() & 0o7777 != DIR_MODE {
        dir.set_permissions(Permissions::from_mode(DIR_MODE))
            .map_err(|e| FsError::io("set directory mode on", path, e))?;
    }
    Ok(())
}

fn open_dir(path: &Path) -> R<File> {
    fault::check(Op::Open, path).map_err(|e| FsError::io("open directory", path, e))?;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error("open directory", path, e, true))
}

/// Proves an existing directory without creating or changing it: a real
/// directory (not a symlink), owned by this account.
pub fn prove_existing_dir(path: &Path) -> R<()> {
    let dir = open_dir(path)?;
    let meta = dir
        .metadata()
        .map_err(|e| FsError::io("inspect directory", path, e))?;
    if meta.uid() != euid() {
        return Err(foreign(path, meta.uid()));
    }
    Ok(())
}

/// How a store file is opened by [`open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write, created (0600) when missing.
    ReadWriteCreate,
    /// Read and append; the file must exist.
    Append,
    /// Write, created exclusively (fails if anything is at the path).
    CreateNew,
}

/// Opens a store file without following a symlink and proves it on the open
/// descriptor: a regular file, owned by this account, mode exactly 0600 (a
/// widened mode is narrowed back with fchmod; see ARCHITECTURE.md). A FIFO,
/// socket or device planted at the path is refused without blocking.
pub fn open(path: &Path, access: Access) -> R<File> {
    open_sized(path, access).map(|(f, _)| f)
}

/// [`open`], also returning the file's size from the same `fstat` that
/// proved it (callers that need the size make no second call).
fn open_sized(path: &Path, access: Access) -> R<(File, u64)> {
    fault::check(Op::Open, path).map_err(|e| FsError::io("open", path, e))?;
    let mut o = OpenOptions::new();
    match access {
        Access::Read => o.read(true),
        Access::ReadWrite => o.read(true).write(true),
        Access::ReadWriteCreate => o.read(true).write(true).create(true).truncate(false),
        Access::Append => o.read(true).append(true),
        Access::CreateNew => o.write(true).create_new(true),
    };
    let f = o
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| open_error("open", path, e, false))?;
    let len = prove_file(&f, path)?;
    Ok((f, len))
}

/// The descriptor checks of [`open`]: regular, ours, exactly 0600. Returns
/// the file's size.
pub fn prove_file(f: &File, path: &Path) -> R<u64> {
    let meta = f.metadata().map_err(|e| FsError::io("inspect", path, e))?;
    if !meta.file_type().is_file() {
        return Err(FsError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if meta.uid() != euid() {
        return Err(foreign(path, meta.uid()));
    }
    if meta.mode() & 0o7777 != FILE_MODE {
        f.set_permissions(Permissions::from_mode(FILE_MODE))
            .map_err(|e| FsError::io("narrow the mode of", path, e))?;
    }
    Ok(meta.len())
}

/// Reads a store file whole through [`open`], refusing anything over `cap`
/// bytes (never a truncated copy).
pub fn read_private(path: &Path, cap: u64) -> R<Vec<u8>> {
    let (f, len) = open_sized(path, Access::Read)?;
    read_whole(f, len, path, cap)
}

/// The first `max` bytes of a store file, through [`open`] (a record's
/// frontmatter without its body).
pub fn read_private_head(path: &Path, max: u64) -> R<Vec<u8>> {
    let f = open(path, Access::Read)?;
    let mut buf = Vec::new();
    f.take(max)
        .read_to_end(&mut buf)
        .map_err(|e| FsError::io("read", path, e))?;
    Ok(buf)
}

fn read_whole(f: File, len: u64, path: &Path, cap: u64) -> R<Vec<u8>> {
    if len > cap {
        return Err(FsError::OverCap {
            path: path.to_path_buf(),
            size: len,
            cap,
        });
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| FsError::io("read", path, e))?;
    if buf.len() as u64 > cap {
        return Err(FsError::OverCap {
            path: path.to_path_buf(),
            size: buf.len() as u64,
            cap,
        });
    }
    Ok(buf)
}

/// Distinguishes concurrent temporary names from one process; the pid
/// separates processes and the clock separates runs that reuse a pid.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temporary sibling name for `name` in `dir`:
/// `.<name>.<pid>.<nonce-hex>.tmp`. [`sweep_stale_temps`] recognises it.
pub fn temp_path(dir: &Path, name: &OsStr) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let rand = (u64::from(nanos) << 20) ^ n;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.{rand:x}.tmp", std::process::id()));
    dir.join(tmp)
}

/// Replaces `path` atomically with `bytes` at mode exactly 0600: writes a
/// temporary sibling (created exclusively, never through a symlink), then
/// renames it over the target. Refuses a target that is a symlink. With
/// `durable`, the file and then the directory are fsynced so the new content
/// survives power loss once this returns. A failure removes the temporary.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> R<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(FsError::BadTarget {
            path: path.to_path_buf(),
        });
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let tmp = temp_path(dir, name);
    let result = write_then_rename(&tmp, path, bytes, durable);
    if result.is_err() {
        // The write already failed; the temporary is hidden, and the next
        // sweep would remove it, but we never want to leave one.
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8], durable: bool) -> R<()> {
    let mut f = open(tmp, Access::CreateNew)?;
    write_all(&mut f, tmp, bytes)?;
    if durable {
        fsync(&f, tmp)?;
    }
    drop(f);
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(FsError::TargetIsSymlink {
            path: path.to_path_buf(),
        });
    }
    rename(tmp, path)
}

/// Overwrites an existing store file of exactly `bytes.len()` bytes with one
/// positioned write (no temporary file, no rename). Fails — and writes
/// nothing — when the file is missing, a symlink, not ours, not a regular
/// file or of another size; the caller then falls back to [`write_atomic`].
pub fn overwrite_in_place(path: &Path, bytes: &[u8]) -> R<()> {
    let (f, len) = open_sized(path, Access::ReadWrite)?;
    if len != bytes.len() as u64 {
        return Err(FsError::io(
            "overwrite",
            path,
            io::Error::other("not of the expected size"),
        ));
    }
    write_all_at(&f, path, bytes, 0)
}

/// `write_all` through the fault shim.
pub fn write_all(f: &mut File, path: &Path, bytes: &[u8]) -> R<()> {
    guarded(Op::Write, "write", path, || f.write_all(bytes))
}

/// `pwrite` of all of `bytes` at `offset`, through the fault shim.
pub fn write_all_at(f: &File, path: &Path, bytes: &[u8], offset: u64) -> R<()> {
    guarded(Op::Write, "write", path, || f.write_all_at(bytes, offset))
}

/// fsync (data and metadata).
pub fn fsync(f: &File, path: &Path) -> R<()> {
    guarded(Op::Sync, "fsync", path, || f.sync_all())
}

/// fdatasync.
pub fn fdatasync(f: &File, path: &Path) -> R<()> {
    guarded(Op::Sync, "fdatasync", path, || f.sync_data())
}

/// ftruncate to `len`.
pub fn truncate(f: &File, path: &Path, len: u64) -> R<()> {
    guarded(Op::Truncate, "truncate", path, || f.set_len(len))
}

/// Fsyncs a directory so a rename or unlink inside it is durable.
pub fn sync_dir(path: &Path) -> R<()> {
    let dir = open_dir(path)?;
    guarded(Op::Sync, "fsync directory", path, || dir.sync_all())
}

/// One `syncfs` for the file system holding `path` (flushes every file
/// written without a per-file sync in a single call).
pub fn sync_fs(path: &Path) -> R<()> {
    let dir = open_dir(path)?;
    guarded(Op::Sync, "syncfs", path, || {
        // SAFETY: syncfs takes a valid open descriptor and no pointers.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    })
}

/// Drops a file's clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`), for bulk writers whose output
/// will not be read again soon: `history ingest` after each batch is
/// synced. Dirty pages are not dropped (the kernel only starts their
/// write-back), and nothing about the file changes; advisory, so the
/// caller may ignore a failure. On a virtual machine whose free memory is
/// handed back to the host, pages freed this way are reused while still
/// backed, where writing into never-touched pages costs up to ten times
/// as much system time.
pub fn drop_cached(path: &Path) -> R<()> {
    let f = open(path, Access::Read)?;
    // SAFETY: posix_fadvise takes a valid open descriptor and no pointers.
    match unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } {
        0 => Ok(()),
        e => Err(FsError::io(
            "drop from the page cache",
            path,
            io::Error::from_raw_os_error(e),
        )),
    }
}

/// rename(2) through the fault shim.
pub fn rename(from: &Path, to: &Path) -> R<()> {
    guarded(Op::Rename, "rename", from, || std::fs::rename(from, to)).map_err(|e| match e {
        FsError::Io { source, .. } => FsError::io("rename into place", to, source),
        other => other,
    })
}

/// Removes a file; `Ok(false)` when it was already gone.
pub fn remove_file_if_exists(path: &Path) -> R<bool> {
    match guarded(Op::Unlink, "remove", path, || std::fs::remove_file(path)) {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes an empty directory; `Ok(false)` when it was already gone.
pub fn remove_dir_if_exists(path: &Path) -> R<bool> {
    match guarded(Op::Unlink, "remove directory", path, || {
        std::fs::remove_dir(path)
    }) {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes a directory tree (used only for projection directories a rebuild
/// regenerates); each removal passes through the fault shim.
pub fn remove_tree(path: &Path) -> R<()> {
    let rd = match std::fs::read_dir(path) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FsError::io("list", path, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| FsError::io("list", path, e))?;
        let p = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&p)?;
        } else {
            remove_file_if_exists(&p)?;
        }
    }
    remove_dir_if_exists(path)?;
    Ok(())
}

/// Takes an exclusive flock on an open descriptor, polling until `timeout`.
/// flock locks belong to the open file description and vanish when the
/// holder dies, so a killed writer never leaves a stale lock.
pub fn lock_exclusive(f: &File, path: &Path, timeout: Duration) -> R<()> {
    fault::check(Op::Lock, path).map_err(|e| FsError::io("lock", path, e))?;
    let start = Instant::now();
    let mut pause = LOCK_BACKOFF_START;
    loop {
        // SAFETY: flock on a valid, open file descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => {}
            _ => return Err(FsError::io("lock", path, err)),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(FsError::LockTimeout {
                path: path.to_path_buf(),
                waited,
            });
        }
        std::thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(LOCK_BACKOFF_MAX);
    }
}

/// Releases a flock taken by [`lock_exclusive`]. Failure is harmless:
/// closing the descriptor releases it anyway.
pub fn unlock(f: &File) {
    // SAFETY: flock on a valid, open file descriptor.
    unsafe {
        libc::flock(f.as_raw_fd(), libc::LOCK_UN);
    }
}

/// An exclusive advisory lock (flock) on a 0600 lock file; released when
/// dropped (closing the descriptor releases it, even on a crash).
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

impl FileLock {
    /// Opens (creating 0600 if needed, never through a symlink, never a file
    /// another account owns) and locks `path`, retrying with a growing pause
    /// until `timeout` has passed. If the path was unlinked or replaced while
    /// we waited (a retired lock file), the lock is taken again on the file
    /// now at the path, so two processes never both believe they hold it.
    pub fn acquire(path: &Path, timeout: Duration) -> R<FileLock> {
        let start = Instant::now();
        let mut reopens = 0;
        loop {
            let file = open(path, Access::ReadWriteCreate)?;
            let left = timeout.saturating_sub(start.elapsed());
            lock_exclusive(&file, path, left).map_err(|e| match e {
                FsError::LockTimeout { path, .. } => FsError::LockTimeout {
                    path,
                    waited: start.elapsed(),
                },
                other => other,
            })?;
            if still_at_path(&file, path) {
                return Ok(FileLock {
                    file,
                    path: path.to_path_buf(),
                });
            }
            reopens += 1;
            if reopens > LOCK_MAX_REOPENS || start.elapsed() >= timeout {
                return Err(FsError::LockTimeout {
                    path: path.to_path_buf(),
                    waited: start.elapsed(),
                });
            }
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The locked descriptor (to check it is still the file at the path).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        unlock(&self.file);
    }
}

/// True when `file` is still the inode at `path`.
pub fn still_at_path(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
        _ => false,
    }
}

/// The writer pid a temporary file's name carries, for every temporary
/// naming abcd uses or used: `.<name>.<pid>.<nonce>.tmp` ([`temp_path`]),
/// and the older `.stage-<pid>-<nonce>.tmp`, `.<name>.tmp-<pid>-<hex>` and
/// `.journal.ids.tmp-<pid>`. `None`: not a temporary of abcd's.
pub fn temp_writer_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?;
    if let Some(r) = rest.strip_suffix(".tmp") {
        if let Some(r) = r.strip_prefix("stage-") {
            return r.split('-').next()?.parse().ok();
        }
        let mut parts = r.rsplit('.');
        let _nonce = parts.next()?;
        return parts.next()?.parse().ok();
    }
    let (_, tail) = rest.rsplit_once(".tmp-")?;
    tail.split('-').next()?.parse().ok()
}

fn pid_is_gone(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Removes, in `dir` (not below), every temporary file of abcd's whose writer
/// is gone (its pid no longer runs) or that is older than [`STALE_TMP_AGE`]
/// (covers pid reuse). Such a file was never renamed into place, so it never
/// held anything acknowledged. Returns the paths removed. A missing
/// directory sweeps nothing.
pub fn sweep_stale_temps(dir: &Path) -> R<Vec<PathBuf>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FsError::io("list", dir, e)),
    };
    let mut removed = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| FsError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_writer_pid) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let old = || {
            entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP_AGE)
        };
        let stale = (pid != std::process::id() as i32 && pid_is_gone(pid)) || old();
        if stale && remove_file_if_exists(&path)? {
            removed.push(path);
        }
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    /// Pages of `p` in the page cache (`mincore` over a mapping).
    fn resident_pages(p: &Path) -> usize {
        let f = std::fs::File::open(p).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        let page = 4096;
        // SAFETY: a read-only shared mapping of a file we opened, unmapped
        // below; mincore writes one byte per page into `vec`.
        unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(m, len, vec.as_mut_ptr()), 0);
            libc::munmap(m, len);
            vec.iter().filter(|b| **b & 1 == 1).count()
        }
    }

    #[test]
    fn drop_cached_empties_the_page_cache_of_a_synced_file() {
        let d = tempfile::tempdir().unwrap();
        // SAFETY: statfs fills the struct it is given.
        let tmpfs = unsafe {
            let mut st: libc::statfs = std::mem::zeroed();
            let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
                d.path().as_os_str(),
            ))
            .unwrap();
            libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC
        };
        if tmpfs {
            eprintln!("skipped: the temporary directory is on tmpfs, whose pages are the file");
            return;
        }
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        std::fs::File::open(&p).unwrap().sync_all().unwrap();
        assert!(resident_pages(&p) > 0, "just written, so cached");
        drop_cached(&p).unwrap();
        assert_eq!(resident_pages(&p), 0);
        // Nothing about the file changed.
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 1 << 20]);
        assert!(matches!(
            drop_cached(&d.path().join("missing")),
            Err(e) if e.is_not_found()
        ));
    }

    #[test]
    fn account_names_come_from_passwd_lines() {
        let passwd = "# comment:x:7:7\nroot:x:0:0:root:/root:/bin/sh\nbob:x:1000:1000::/home/bob:/bin/sh\nbroken:x:notanumber:1\n::1001:1\n";
        assert_eq!(account_in_passwd(passwd, 0).as_deref(), Some("root"));
        assert_eq!(account_in_passwd(passwd, 1000).as_deref(), Some("bob"));
        assert_eq!(account_in_passwd(passwd, 7), None, "comment");
        assert_eq!(account_in_passwd(passwd, 1001), None, "empty name");
        assert_eq!(account_in_passwd(passwd, 4242), None);
        // This machine's own file names uid 0.
        assert_eq!(account_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn ensure_private_dir_creates_and_narrows() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a");
        ensure_private_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        std::fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
    }

    #[test]
    fn ensure_private_dir_refuses_symlink_and_file() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = t.path().join("link");
        symlink(&real, &link).unwrap();
        assert!(matches!(
            ensure_private_dir(&link),
            Err(FsError::Symlink { .. })
        ));
        assert!(matches!(
            prove_existing_dir(&link),
            Err(FsError::Symlink { .. })
        ));
        let file = t.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = ensure_private_dir(&file).unwrap_err();
        assert!(matches!(err, FsError::NotADirectory { .. }), "{err}");
    }

    #[test]
    fn foreign_owner_message_is_actionable() {
        let err = FsError::ForeignOwner {
            path: PathBuf::from("/x/records"),
            uid: 4242,
            account: Some("bob".into()),
        };
        let msg = err.to_string();
        assert!(msg.contains("owned by another account"), "{msg}");
        assert!(msg.contains("uid 4242, bob"), "{msg}");
    }

    /// Changing an owner needs root; elsewhere the message test above covers
    /// the wording and this one is skipped with a note.
    #[test]
    fn foreign_owned_file_and_directory_are_refused() {
        if euid() != 0 {
            eprintln!("skipped: chown to another uid needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("records");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(4242), Some(4242)).unwrap();
        std::fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            ensure_private_dir(&d),
            Err(FsError::ForeignOwner { uid: 4242, .. })
        ));
        assert_eq!(mode(&d), 0o755, "a foreign directory is never changed");
        let f = t.path().join("journal");
        std::fs::write(&f, b"x").unwrap();
        std::os::unix::fs::chown(&f, Some(4242), Some(4242)).unwrap();
        std::fs::set_permissions(&f, Permissions::from_mode(0o666)).unwrap();
        for access in [Access::Read, Access::ReadWrite, Access::Append] {
            assert!(matches!(
                open(&f, access),
                Err(FsError::ForeignOwner { uid: 4242, .. })
            ));
        }
        assert_eq!(mode(&f), 0o666, "a foreign file is never changed");
    }

    #[test]
    fn open_refuses_symlinks_and_irregular_files_and_narrows_modes() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("journal");
        std::fs::write(&f, b"abc").unwrap();
        std::fs::set_permissions(&f, Permissions::from_mode(0o666)).unwrap();
        open(&f, Access::Read).unwrap();
        assert_eq!(mode(&f), 0o600, "a widened mode is narrowed back");
        let link = t.path().join("link");
        symlink(&f, &link).unwrap();
        for access in [
            Access::Read,
            Access::ReadWrite,
            Access::ReadWriteCreate,
            Access::Append,
            Access::CreateNew,
        ] {
            let e = open(&link, access).unwrap_err();
            assert!(
                matches!(e, FsError::Symlink { .. })
                    || matches!(&e, FsError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
                "{access:?}: {e}"
            );
        }
        let fifo = t.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            open(&fifo, Access::Read),
            Err(FsError::NotRegular { .. })
        ));
        assert!(matches!(
            open(t.path(), Access::Read),
            Err(FsError::NotRegular { .. })
        ));
        assert!(open(&t.path().join("missing"), Access::Read)
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn read_private_refuses_over_cap_whole() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_private(&f, 5).unwrap(), b"12345");
        assert!(matches!(
            read_private(&f, 4),
            Err(FsError::OverCap {
                size: 5,
                cap: 4,
                ..
            })
        ));
    }

    #[test]
    fn write_atomic_sets_mode_replaces_and_refuses_symlink_target() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f.json");
        write_atomic(&f, b"one", true).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"one");
        assert_eq!(mode(&f), 0o600);
        std::fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        write_atomic(&f, b"two", false).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        assert_eq!(mode(&f), 0o600);
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = t.path().join("link");
        symlink(&victim, &link).unwrap();
        let err = write_atomic(&link, b"evil", true).unwrap_err();
        assert!(matches!(err, FsError::TargetIsSymlink { .. }), "{err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 3);
    }

    #[test]
    fn overwrite_in_place_needs_same_size_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("cp");
        std::fs::write(&f, b"aaaa").unwrap();
        overwrite_in_place(&f, b"bbbb").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"bbbb");
        assert!(overwrite_in_place(&f, b"ccc").is_err());
        let link = t.path().join("l");
        symlink(&f, &link).unwrap();
        assert!(overwrite_in_place(&link, b"dddd").is_err());
        assert_eq!(std::fs::read(&f).unwrap(), b"bbbb");
    }

    #[test]
    fn file_lock_excludes_times_out_and_refuses_symlink() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("store.lock");
        let held = FileLock::acquire(&p, Duration::from_secs(1)).unwrap();
        assert_eq!(mode(&p), 0o600);
        let err = FileLock::acquire(&p, Duration::from_millis(30)).unwrap_err();
        assert!(matches!(err, FsError::LockTimeout { .. }), "{err}");
        drop(held);
        FileLock::acquire(&p, Duration::from_millis(30)).unwrap();
        let link = t.path().join("l.lock");
        symlink(&p, &link).unwrap();
        assert!(matches!(
            FileLock::acquire(&link, Duration::from_millis(10)),
            Err(FsError::Symlink { .. })
        ));
    }

    #[test]
    fn file_lock_follows_a_retired_lock_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("k.lock");
        let held = FileLock::acquire(&p, Duration::from_secs(1)).unwrap();
        let p2 = p.clone();
        let waiter = std::thread::spawn(move || FileLock::acquire(&p2, Duration::from_secs(10)));
        std::fs::remove_file(&p).unwrap();
        drop(held);
        let got = waiter.join().unwrap().unwrap();
        assert!(still_at_path(got.file(), &p));
    }

    #[test]
    fn temp_names_carry_their_writer_pid() {
        let t = tempfile::tempdir().unwrap();
        let p = temp_path(t.path(), OsStr::new("rec.md"));
        let name = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(temp_writer_pid(name), Some(std::process::id() as i32));
        assert_eq!(temp_writer_pid(".stage-4242-ab12.tmp"), Some(4242));
        assert_eq!(temp_writer_pid(".journal.ids.tmp-77"), Some(77));
        assert_eq!(temp_writer_pid(".journal.tmp-78-00ff"), Some(78));
        for not in ["rec.md", ".hidden", "x.tmp", ".a.b.tmp"] {
            assert_eq!(temp_writer_pid(not), None, "{not}");
        }
    }

    #[test]
    fn sweep_removes_dead_writers_temporaries_only() {
        let t = tempfile::tempdir().unwrap();
        // A pid that cannot be running: above the kernel's pid_max ceiling (2^22).
        let dead = t.path().join(".rec.md.2147483647.abc.tmp");
        std::fs::write(&dead, b"x").unwrap();
        let mine = temp_path(t.path(), OsStr::new("rec.md"));
        std::fs::write(&mine, b"x").unwrap();
        let real = t.path().join("rec.md");
        std::fs::write(&real, b"x").unwrap();
        let removed = sweep_stale_temps(t.path()).unwrap();
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists() && mine.exists() && real.exists());
        assert!(sweep_stale_temps(&t.path().join("missing"))
            .unwrap()
            .is_empty());
    }
}
