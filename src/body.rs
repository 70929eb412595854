//! Bodies: the content-addressed files behind the journal's record events.
//!
//! Owns: `bodies/<sha256>` in a lane — each the exact bytes of one record
//! file (frontmatter and redacted body), named by their SHA-256, mode 0600.
//! `Captured`, `LineageMigrated` and `Forgotten` events name bodies by
//! digest ([`BodyRef`]); the journal itself holds no free text.
//!
//! Invariants:
//! - A body is written durably (file and directory synced) before the event
//!   that names it is appended, so an acknowledged event never names a body
//!   that a power loss can take away.
//! - A body is immutable: same name, same bytes. Reading checks the digest,
//!   so a damaged or substituted file is reported, never projected.
//! - Bodies are deleted only by `history forget` (after its event is
//!   durable) and by the sweep of unreferenced bodies (`repair`, `forget`),
//!   never by a projection: `bodies/` is a source of truth, not a view.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use abcd_journal::{FrameKind, Journal, JournalError};
use serde::Serialize;
use thiserror::Error;

use crate::event::{self, BodyRef, CaptureOutcome, Event};
use crate::fsutil::{self, FsError};
use crate::store::Lane;

/// Cap on one body (a record is at most 64 MiB of transcript plus the
/// frontmatter and the placeholders redaction adds).
pub const BODY_CAP: u64 = 96 << 20;

#[derive(Debug, Error)]
pub enum BodyError {
    #[error("body {sha256} is missing from {dir}; `abcd journal verify` lists every missing body and `abcd journal repair` names the records it cannot restore")]
    Missing { sha256: String, dir: PathBuf },
    #[error("body {sha256} does not match its digest (the file was damaged or replaced); `abcd journal verify` reports it")]
    Mismatch { sha256: String },
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl BodyError {
    pub fn is_missing(&self) -> bool {
        matches!(self, BodyError::Missing { .. })
    }
}

pub fn dir(lane: &Lane) -> PathBuf {
    lane.dir.join("bodies")
}

pub fn path(lane: &Lane, sha256: &str) -> PathBuf {
    dir(lane).join(sha256)
}

/// A digest as a body name: 64 lowercase hex characters, nothing else.
pub fn is_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Stores `bytes` durably and returns their reference. A body already
/// present and proven against its digest is kept (same name, same bytes); a
/// damaged one is replaced.
pub fn put(lane: &Lane, bytes: &[u8]) -> Result<BodyRef, BodyError> {
    let (r, p) = store(lane, bytes, true)?;
    keep_just_stored(p, bytes.to_vec());
    Ok(r)
}

/// [`put`] (with `durable`) or [`put_unsynced`] (without) of bytes the
/// caller hands over: kept for the projection without a copy (a capture's
/// rendered record, 1 MiB and more, is otherwise copied once more here).
pub fn put_owned(lane: &Lane, bytes: Vec<u8>, durable: bool) -> Result<BodyRef, BodyError> {
    let (r, p) = store(lane, &bytes, durable)?;
    keep_just_stored(p, bytes);
    Ok(r)
}

/// [`put`] without the per-file sync, for writers that store many bodies
/// and then call [`sync`] once before the events that name them (the
/// upgrade, bulk loaders).
pub fn put_unsynced(lane: &Lane, bytes: &[u8]) -> Result<BodyRef, BodyError> {
    let (r, p) = store(lane, bytes, false)?;
    keep_just_stored(p, bytes.to_vec());
    Ok(r)
}

/// Makes every body written so far durable (one `syncfs`).
pub fn sync(lane: &Lane) -> Result<(), BodyError> {
    abcd_fsio::sync_fs(&dir(lane))?;
    Ok(())
}

/// Most bytes [`JUST_STORED`] holds: a batch of bodies larger than this is
/// read back from disk past it.
const JUST_STORED_CAP: usize = 64 << 20;

thread_local! {
    /// Bodies this thread just stored, by path: the projection applies the
    /// events that name them right after, under the same store lock, and
    /// their bytes are already known to hash to their names, so they are
    /// not read back and hashed again. An entry is taken by the first read,
    /// dropped by [`remove`], and the whole set by [`forget_just_stored`]
    /// (the capture paths call it once their events are applied).
    static JUST_STORED: std::cell::RefCell<(usize, HashMap<PathBuf, Vec<u8>>)> =
        std::cell::RefCell::new((0, HashMap::new()));
}

/// Drops what [`JUST_STORED`] holds.
pub fn forget_just_stored() {
    JUST_STORED.with(|c| *c.borrow_mut() = (0, HashMap::new()));
}

fn take_just_stored(p: &Path) -> Option<Vec<u8>> {
    JUST_STORED.with(|c| {
        let mut c = c.borrow_mut();
        let b = c.1.remove(p)?;
        c.0 -= b.len();
        Some(b)
    })
}

fn keep_just_stored(p: PathBuf, bytes: Vec<u8>) {
    JUST_STORED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 + bytes.len() <= JUST_STORED_CAP && !c.1.contains_key(&p) {
            c.0 += bytes.len();
            c.1.insert(p, bytes);
        }
    })
}

/// Writes `bytes` as a body (unless a proven copy is there) and returns
/// its reference and path; the caller keeps the bytes for the projection.
fn store(lane: &Lane, bytes: &[u8], durable: bool) -> Result<(BodyRef, PathBuf), BodyError> {
    let sha256 = fsutil::sha256_hex(bytes);
    let p = path(lane, &sha256);
    take_just_stored(&p);
    let present = std::fs::symlink_metadata(&p)
        .is_ok_and(|m| m.file_type().is_file() && m.len() == bytes.len() as u64)
        && read(lane, &sha256).is_ok();
    if !present {
        fsutil::ensure_private_dir(&dir(lane))?;
        // The temporary goes in the lane's top directory, which every
        // refresh sweeps (`bodies/` grows with the store and is only swept
        // by repair): a writer killed here leaves nothing for long.
        let tmp = abcd_fsio::temp_path(&lane.dir, std::ffi::OsStr::new("body"));
        let written = (|| {
            let mut f = abcd_fsio::open(&tmp, abcd_fsio::Access::CreateNew)?;
            abcd_fsio::write_all(&mut f, &tmp, bytes)?;
            if durable {
                abcd_fsio::fsync(&f, &tmp)?;
            }
            drop(f);
            abcd_fsio::rename(&tmp, &p)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        if durable {
            abcd_fsio::sync_dir(&dir(lane))?;
        }
    }
    Ok((
        BodyRef {
            sha256,
            bytes: bytes.len() as u64,
        },
        p,
    ))
}

/// Reads a body and proves it against its digest.
pub fn read(lane: &Lane, sha256: &str) -> Result<Vec<u8>, BodyError> {
    let p = path(lane, sha256);
    if let Some(b) = take_just_stored(&p) {
        return Ok(b);
    }
    let bytes = match fsutil::read_private(&p, BODY_CAP) {
        Ok(b) => b,
        Err(e) if e.is_not_found() || !is_digest(sha256) => {
            return Err(BodyError::Missing {
                sha256: sha256.to_owned(),
                dir: dir(lane),
            })
        }
        Err(e) => return Err(e.into()),
    };
    if fsutil::sha256_hex(&bytes) != sha256 {
        return Err(BodyError::Mismatch {
            sha256: sha256.to_owned(),
        });
    }
    Ok(bytes)
}

/// Deletes a body (forget, the unreferenced sweep). Absent is fine.
pub fn remove(lane: &Lane, sha256: &str) -> Result<bool, BodyError> {
    if !is_digest(sha256) {
        return Ok(false);
    }
    take_just_stored(&path(lane, sha256));
    Ok(fsutil::remove_file_if_exists(&path(lane, sha256))?)
}

/// Every body name present (temporaries and foreign names excluded).
pub fn list(lane: &Lane) -> BTreeSet<String> {
    std::fs::read_dir(dir(lane))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| is_digest(n))
                .collect()
        })
        .unwrap_or_default()
}

/// Every body the journal names, resolved through the forgets that replaced
/// it, with the record names stored with it; and what each record
/// superseded.
pub struct Names {
    /// body sha → the record names stored with it
    pub bodies: HashMap<String, BTreeSet<String>>,
    /// record name → the records it superseded
    pub supersedes: HashMap<String, Vec<String>>,
}

pub fn names(journal: &Journal) -> Result<Names, BodyError> {
    let mut forwards: HashMap<String, Option<BodyRef>> = HashMap::new();
    let mut stored: Vec<(String, String)> = Vec::new();
    let mut supersedes: HashMap<String, Vec<String>> = HashMap::new();
    for frame in journal.read_from(&journal.start())? {
        let frame = frame?;
        if frame.kind != FrameKind::Event {
            continue;
        }
        let Ok(env) = event::decode(&frame.payload) else {
            continue;
        };
        match env.event.effective().as_ref() {
            Event::Captured(c) => {
                if let CaptureOutcome::Stored {
                    record_name,
                    body,
                    supersedes: s,
                } = &c.outcome
                {
                    supersedes.insert(record_name.clone(), s.clone());
                    stored.push((body.sha256.clone(), record_name.clone()));
                }
            }
            Event::LineageMigrated(m) => {
                stored.push((m.body.sha256.clone(), m.record_name.clone()))
            }
            Event::Forgotten(f) => {
                for r in &f.rewrites {
                    forwards.insert(r.from.clone(), r.to.clone());
                }
            }
            _ => {}
        }
    }
    let mut bodies: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (sha, name) in stored {
        let mut cur = Some(sha);
        for _ in 0..=forwards.len() {
            match cur.as_ref().and_then(|c| forwards.get(c)) {
                Some(next) => cur = next.as_ref().map(|r| r.sha256.clone()),
                None => break,
            }
        }
        if let Some(c) = cur {
            bodies.entry(c).or_default().insert(name);
        }
    }
    Ok(Names { bodies, supersedes })
}

/// One body problem `journal verify` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    pub sha256: String,
    /// `missing` or `mismatch`.
    pub problem: &'static str,
    pub records: Vec<String>,
}

/// What `journal verify` says of `bodies/`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Check {
    pub bodies: u64,
    pub problems: Vec<Problem>,
    /// Bodies no event needs (a capture whose append failed, or a forget
    /// that stopped midway): `journal repair --yes` deletes them.
    pub unreferenced: Vec<String>,
    /// A forget stopped after its event and before deleting the bodies it
    /// replaced (they still hold the forgotten text): never "clean".
    pub forget_pending: bool,
}

/// The marker a forget writes (durably, digests only) before its event
/// and removes once the bodies it replaced are deleted.
pub fn forget_marker(lane: &Lane) -> PathBuf {
    lane.dir.join("forget.pending")
}

/// Proves every body the journal needs against its digest and lists the
/// ones it does not need. Never fails on a bad body: it reports it.
pub fn check(lane: &Lane, journal: &Journal) -> Result<Check, BodyError> {
    let names = names(journal)?;
    let mut out = Check {
        bodies: names.bodies.len() as u64,
        ..Check::default()
    };
    let mut shas: Vec<&String> = names.bodies.keys().collect();
    shas.sort();
    for sha in shas {
        let problem = match read(lane, sha) {
            Ok(_) => continue,
            Err(BodyError::Missing { .. }) => "missing",
            Err(BodyError::Mismatch { .. }) => "mismatch",
            Err(e) => return Err(e),
        };
        out.problems.push(Problem {
            sha256: sha.clone(),
            problem,
            records: names.bodies[sha].iter().cloned().collect(),
        });
    }
    out.unreferenced = list(lane)
        .into_iter()
        .filter(|s| !names.bodies.contains_key(s))
        .collect();
    out.forget_pending = std::fs::symlink_metadata(forget_marker(lane)).is_ok();
    Ok(out)
}
