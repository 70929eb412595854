//! `abcd sync --auto on|off`: the session-start hook starts a sync in the
//! background, when the user turned it on for a repository.
//!
//! Owns: the per-repository switch (`<lane>/sync/auto`, holding the remote
//! asked for, if any), the spacing of background syncs
//! (`AUTO_MIN_INTERVAL`, `<lane>/sync/auto.last`), and starting one: a
//! detached process in its own session (`abcd sync --deadline-secs N`), its
//! output discarded, never waited for, so the hook never blocks on it. The
//! deadline kills the sync's process group: a sync killed at any point is
//! finished by the next one (`tests/sync.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::corpus::{Corpus, CorpusError};
use crate::fsutil;

use super::SyncError;

/// A background sync's time budget; it is killed (safely) past it.
pub const AUTO_BUDGET: Duration = Duration::from_secs(120);

/// At most one background sync per repository this often.
pub const AUTO_MIN_INTERVAL: Duration = Duration::from_secs(600);

fn switch(lane: &crate::store::Lane) -> PathBuf {
    lane.dir.join("sync").join("auto")
}

fn last(lane: &crate::store::Lane) -> PathBuf {
    lane.dir.join("sync").join("auto.last")
}

/// Turns background sync on (with the remote to use, if one was named) or
/// off for this repository.
pub fn set(corpus: &Corpus, on: bool, remote: Option<&str>) -> Result<(), SyncError> {
    let path = switch(&corpus.lane);
    if on {
        fsutil::ensure_private_dir(path.parent().expect("under the lane"))
            .map_err(CorpusError::from)?;
        let text = format!("{}\n", remote.unwrap_or(""));
        fsutil::write_atomic(&path, text.as_bytes(), true).map_err(CorpusError::from)?;
    } else {
        fsutil::remove_file_if_exists(&path).map_err(CorpusError::from)?;
    }
    Ok(())
}

/// Whether background sync is on, and the remote it uses (`None`: the
/// default remote).
pub fn setting(lane: &crate::store::Lane) -> Option<Option<String>> {
    let b = fsutil::read_private(&switch(lane), 4096).ok()?;
    let remote = String::from_utf8_lossy(&b).trim().to_owned();
    Some((!remote.is_empty()).then_some(remote))
}

/// From the session-start hook: starts a background sync when it is on and
/// none started within [`AUTO_MIN_INTERVAL`]. Returns whether one started.
/// Costs one `stat` when it is off.
pub fn start_if_on(corpus: &Corpus, repo_root: &Path) -> Result<bool, SyncError> {
    let Some(remote) = setting(&corpus.lane) else {
        return Ok(false);
    };
    let stamp = last(&corpus.lane);
    let recent = std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < AUTO_MIN_INTERVAL);
    if recent {
        return Ok(false);
    }
    fsutil::write_atomic(&stamp, b"", false).map_err(CorpusError::from)?;
    let exe = std::env::current_exe().map_err(|e| SyncError::State {
        path: PathBuf::from("(the abcd executable)"),
        why: e.to_string(),
    })?;
    let mut c = std::process::Command::new(exe);
    c.arg("sync")
        .arg("--repo")
        .arg(repo_root)
        .arg("--deadline-secs")
        .arg(AUTO_BUDGET.as_secs().to_string());
    if let Some(r) = remote {
        c.arg("--remote").arg(r);
    }
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Its own session: the harness's signals and waits never reach it, and
    // its deadline kills its git children with it.
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork
    // and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().map_err(|e| SyncError::State {
        path: PathBuf::from("(background sync)"),
        why: e.to_string(),
    })?;
    Ok(true)
}

/// Kills this process's group after `secs` (the background sync's
/// deadline; safe: an interrupted sync is finished by the next).
pub fn arm_deadline(secs: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        // SAFETY: signals our own process group.
        unsafe {
            libc::kill(0, libc::SIGKILL);
        }
    });
}
