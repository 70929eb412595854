//! Where things live: the abcd home, the per-repository lane and its
//! leaves, and which lane a session belongs to.
//!
//! Owns: resolving `ABCD_HOME`/`~/.abcd`, the lane key format (a root
//! commit, or `dir-<hex>` for a directory lane), the directory-lane index
//! (`dir-lanes/`), creating
//! a lane top-down with every level proven private and ours, listing lanes,
//! and looking a session up by its zero-byte note under `sessions/`.
//!
//! Must never: create a level with `mkdir -p` (each level is proven before
//! the next is made), follow a symlinked level, write session notes or any
//! other projection (the capture code does that), or guess a lane when two
//! claim one session.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::fsutil::{ensure_private_dir, prove_existing_dir, FsError};
use crate::lineage::is_valid_id;

/// Environment variable that moves the abcd home (tests always set it).
pub const HOME_ENV: &str = "ABCD_HOME";

/// Read cap for the registry's per-repo `meta.json`; it holds a name and a
/// few fields, and 64 KiB is the cap for every small JSON file in the store.
const META_JSON_CAP: u64 = 64 * 1024;

/// Failures locating or opening the store.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot locate the abcd home: neither ABCD_HOME nor HOME is set; set ABCD_HOME to a private directory")]
    NoHome,
    #[error("the abcd home {value:?} (from ABCD_HOME, else HOME) is a relative path; set ABCD_HOME to an absolute path (a relative one would put the store wherever abcd happens to run)")]
    RelativeHome { value: PathBuf },
    #[error("{value:?} is not a lane key: expected a root-commit SHA of exactly 40 (SHA-1) or 64 (SHA-256) lowercase hex characters, or a directory key `dir-` and 64 lowercase hex")]
    BadRootSha { value: String },
    #[error(
        "{value:?} is not a valid session id (letters, digits, '.', '_', '-'; not '.' or '..')"
    )]
    BadSessionId { value: String },
    #[error("no store has seen session {session_id}")]
    UnknownSession { session_id: String },
    #[error("session {session_id} is claimed by {count} stores; refusing to guess which repository it belongs to")]
    AmbiguousSession { session_id: String, count: usize },
    #[error("the transcript store could not be opened: {0}")]
    Fs(#[from] FsError),
    #[error("cannot list {}: {source}", path.display())]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `$ABCD_HOME` when set and non-empty, else `$HOME/.abcd`.
pub fn abcd_home() -> Result<PathBuf, StoreError> {
    abcd_home_from(std::env::var_os(HOME_ENV), std::env::var_os("HOME"))
}

/// The rule behind [`abcd_home`], given the two variables' values.
pub fn abcd_home_from(
    abcd_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf, StoreError> {
    let h = match abcd_home.filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => home
            .filter(|v| !v.is_empty())
            .map(|h| PathBuf::from(h).join(".abcd"))
            .ok_or(StoreError::NoHome)?,
    };
    if h.is_relative() {
        return Err(StoreError::RelativeHome { value: h });
    }
    Ok(h)
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A repository lane's key: the root commit, 40 or 64 lowercase hex.
fn is_commit_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && is_hex(s)
}

/// Prefix of a directory lane's key (`dir-<64 lowercase hex>`).
pub const DIRECTORY_KEY_PREFIX: &str = "dir-";

/// Domain tag hashed before a directory's path in its lane key and in the
/// directory-lane index, so neither digest can be confused with another
/// SHA-256 the store keeps (bodies, cache names).
const DIRECTORY_KEY_TAG: &[u8] = b"abcd directory lane v1\0";

/// A directory lane's key: `dir-` and 64 lowercase hex.
fn is_directory_key(s: &str) -> bool {
    s.strip_prefix(DIRECTORY_KEY_PREFIX)
        .is_some_and(|h| h.len() == 64 && is_hex(h))
}

/// Any lane key: a root commit or a directory key.
fn is_root_sha(s: &str) -> bool {
    is_commit_sha(s) || is_directory_key(s)
}

/// What a lane stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LaneKind {
    /// Keyed by a repository's root commit.
    Repository,
    /// Keyed by a directory that is in no repository with a commit
    /// (`dir-<hex>`): see [`directory_key`].
    Directory,
}

/// The kind of a lane key (a key that is neither reads as a repository:
/// callers validate keys before they get here).
pub fn lane_kind(key: &str) -> LaneKind {
    if is_directory_key(key) {
        LaneKind::Directory
    } else {
        LaneKind::Repository
    }
}

/// The SHA-256 (hex) of the domain tag and `dir`'s path bytes: a directory
/// lane's key without its prefix, and the digest the directory-lane index
/// keeps for each ancestor. `dir` must be canonical and absolute (the
/// caller canonicalises), so one directory has one key.
pub fn directory_digest(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(DIRECTORY_KEY_TAG);
    h.update(dir.as_os_str().as_encoded_bytes());
    hex::encode(h.finalize())
}

/// The lane key of a directory in no repository with a commit:
/// `dir-<SHA-256 over the domain tag and the canonical absolute path>`.
pub fn directory_key(dir: &Path) -> String {
    format!("{DIRECTORY_KEY_PREFIX}{}", directory_digest(dir))
}

/// A root commit (40 or 64 lowercase hex) or a directory key
/// (`dir-` and 64 lowercase hex): every lane key.
pub fn validate_root_sha(s: &str) -> Result<(), StoreError> {
    if is_root_sha(s) {
        Ok(())
    } else {
        Err(StoreError::BadRootSha {
            value: s.to_string(),
        })
    }
}

/// Leaves created inside every lane, in creation order.
const LANE_LEAVES: [&str; 7] = [
    "bodies",
    "records",
    "staging",
    "quarantine",
    "sessions",
    "journal",
    "index",
];

/// How long a writer waits for the store lock. Hooks hold it for about a
/// millisecond (one append and one small projection write), so even 200
/// sub-agents stopping at once clear in well under a second; the margin
/// covers slow-disk windows (fdatasync stalls of 0.1–0.4 s were measured
/// here) and a drain applying a 64 MiB record.
pub const STORE_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// One repository's part of the store: `<home>/transcripts/<root-sha>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub root_sha: String,
    pub dir: PathBuf,
}

fn lane_dir(home: &Path, root_sha: &str) -> PathBuf {
    home.join("transcripts").join(root_sha)
}

impl Lane {
    /// Opens the lane for `root_sha`, creating `home`, `transcripts`, the
    /// lane and its leaves top-down, each proven a private directory owned
    /// by this account (0700 set exactly).
    pub fn open(home: &Path, root_sha: &str) -> Result<Lane, StoreError> {
        validate_root_sha(root_sha)?;
        let dir = lane_dir(home, root_sha);
        for level in [home.to_path_buf(), home.join("transcripts"), dir.clone()] {
            ensure_private_dir(&level)?;
        }
        for leaf in LANE_LEAVES {
            ensure_private_dir(&dir.join(leaf))?;
        }
        Ok(Lane {
            root_sha: root_sha.to_string(),
            dir,
        })
    }

    /// The lane when it already exists as a real directory, without creating
    /// or changing anything (for read-only verbs and surveys). A level or
    /// leaf that exists but is a symlink, not a directory or foreign-owned is
    /// an error, not `None`.
    pub fn open_existing(home: &Path, root_sha: &str) -> Result<Option<Lane>, StoreError> {
        validate_root_sha(root_sha)?;
        let dir = lane_dir(home, root_sha);
        for level in [home.to_path_buf(), home.join("transcripts"), dir.clone()] {
            match std::fs::symlink_metadata(&level) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => {
                    return Err(StoreError::Fs(FsError::Io {
                        op: "inspect",
                        path: level,
                        source: e,
                    }))
                }
                Ok(_) => prove_existing_dir(&level).map_err(StoreError::Fs)?,
            }
        }
        // Leaves are proven too (a foreign-owned records leaf refuses reads
        // as well as writes); a missing leaf is fine — it reads as empty.
        for leaf in LANE_LEAVES {
            let path = dir.join(leaf);
            if std::fs::symlink_metadata(&path).is_ok() {
                prove_existing_dir(&path).map_err(StoreError::Fs)?;
            }
        }
        Ok(Some(Lane {
            root_sha: root_sha.to_string(),
            dir,
        }))
    }

    pub fn records_dir(&self) -> PathBuf {
        self.dir.join("records")
    }
    pub fn staging_dir(&self) -> PathBuf {
        self.dir.join("staging")
    }
    pub fn quarantine_dir(&self) -> PathBuf {
        self.dir.join("quarantine")
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }
    pub fn journal_dir(&self) -> PathBuf {
        self.dir.join("journal")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.dir.join("index")
    }
    /// Marker recording SubagentStop payloads that carried no transcript
    /// path; a sibling of `staging/`, not inside it.
    pub fn gap_marker_path(&self) -> PathBuf {
        self.dir.join("subagent-payload-gap.json")
    }
    /// The lane-wide advisory lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("store.lock")
    }
}

/// Root SHAs of every lane under `<home>/transcripts` (real directories with
/// a valid SHA name only), sorted. An absent store lists nothing.
pub fn list_lanes(home: &Path) -> Result<Vec<String>, StoreError> {
    let base = home.join("transcripts");
    let entries = match std::fs::read_dir(&base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::List { path: base, source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::List {
            path: base.clone(),
            source,
        })?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // file_type() does not follow symlinks: a symlinked lane is skipped.
        if is_root_sha(&name) && entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// The one lane whose `sessions/<session_id>` note is a regular file.
/// One stat per lane; no transcript is read. A note that is a directory,
/// symlink or anything but a regular file is not a claim.
pub fn session_store(home: &Path, session_id: &str) -> Result<String, StoreError> {
    if !is_valid_id(session_id) {
        return Err(StoreError::BadSessionId {
            value: session_id.to_string(),
        });
    }
    let mut hits = Vec::new();
    for sha in list_lanes(home)? {
        let note = lane_dir(home, &sha).join("sessions").join(session_id);
        if let Ok(m) = std::fs::symlink_metadata(&note) {
            if m.file_type().is_file() {
                hits.push(sha);
            }
        }
    }
    match hits.len() {
        0 => Err(StoreError::UnknownSession {
            session_id: session_id.to_string(),
        }),
        1 => Ok(hits.remove(0)),
        count => Err(StoreError::AmbiguousSession {
            session_id: session_id.to_string(),
            count,
        }),
    }
}

/// The directory-lane index: `<home>/dir-lanes/<dir-key>`, one file per
/// directory lane, listing (one per line) the [`directory_digest`] of the
/// lane's directory and of each of its ancestors. Digests only: a path may
/// hold a secret. It lets a hook whose repository has a commit learn, with
/// one `readdir` of a directory that usually does not exist, whether a
/// directory lane waits to be moved into it; a lane whose index file was
/// lost stays listed and usable, it is simply not moved automatically.
pub fn dir_lane_index(home: &Path) -> PathBuf {
    home.join("dir-lanes")
}

/// Bound on the ancestors an index file lists (deeper than any real path).
const MAX_INDEXED_ANCESTORS: usize = 256;

/// Adds the index file of the directory lane `key` standing for `dir`
/// (canonical) unless it is there. One stat when it is.
pub fn register_directory_lane(home: &Path, key: &str, dir: &Path) -> Result<(), StoreError> {
    validate_root_sha(key)?;
    let base = dir_lane_index(home);
    let file = base.join(key);
    if std::fs::symlink_metadata(&file).is_ok() {
        return Ok(());
    }
    for level in [home.to_path_buf(), base.clone()] {
        ensure_private_dir(&level)?;
    }
    let mut text = String::new();
    for a in dir.ancestors().take(MAX_INDEXED_ANCESTORS) {
        text.push_str(&directory_digest(a));
        text.push('\n');
    }
    crate::fsutil::write_atomic(&file, text.as_bytes(), false)?;
    Ok(())
}

/// Removes the index file of a directory lane (after its move).
pub fn unregister_directory_lane(home: &Path, key: &str) -> Result<(), StoreError> {
    validate_root_sha(key)?;
    crate::fsutil::remove_file_if_exists(&dir_lane_index(home).join(key))?;
    Ok(())
}

/// The directory lanes whose directory is `work_tree` (canonical) or lies
/// inside it, sorted. No index directory (the common case) costs one
/// failed `open`; an unreadable index file is skipped.
pub fn directory_lanes_within(home: &Path, work_tree: &Path) -> Vec<String> {
    let base = dir_lane_index(home);
    let Ok(rd) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let want = directory_digest(work_tree);
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !is_directory_key(&name) {
            continue;
        }
        let Ok(bytes) = crate::fsutil::read_private(&entry.path(), META_JSON_CAP) else {
            continue;
        };
        if bytes.split(|b| *b == b'\n').any(|l| l == want.as_bytes()) {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// What a directory lane records about itself (`index/directory.json`, the
/// projection of its `DirectoryNamed` and `LaneMoved` events).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaneDirectory {
    /// The directory, redacted (the home directory and user name replaced).
    pub directory: String,
    /// RFC 3339 time the lane was named.
    pub named_at: String,
    /// The repository lane its content last moved into, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_at: Option<String>,
}

impl Lane {
    /// `index/directory.json`: see [`LaneDirectory`].
    pub fn directory_path(&self) -> PathBuf {
        self.index_dir().join("directory.json")
    }

    /// What this directory lane records about itself; `None` for a
    /// repository lane or one not named yet.
    pub fn directory(&self) -> Option<LaneDirectory> {
        let bytes = crate::fsutil::read_private(&self.directory_path(), META_JSON_CAP).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn kind(&self) -> LaneKind {
        lane_kind(&self.root_sha)
    }
}

/// Best-effort display name of a repository from the registry's
/// `<home>/history/<sha>/meta.json` `"name"`. Any problem (absent,
/// unreadable, not JSON, a name with control characters) yields `None`.
pub fn repo_name(home: &Path, sha: &str) -> Option<String> {
    if !is_root_sha(sha) {
        return None;
    }
    let path = home.join("history").join(sha).join("meta.json");
    let bytes = crate::fsutil::read_private(&path, META_JSON_CAP).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let name = v.get("name")?.as_str()?.trim();
    if name.is_empty() || name.chars().any(char::is_control) {
        return None;
    }
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    const SHA1: &str = "0123456789abcdef0123456789abcdef01234567";
    const SHA2: &str = "89abcdef0123456789abcdef0123456789abcdef";

    fn note(home: &Path, sha: &str, sid: &str) {
        let lane = Lane::open(home, sha).unwrap();
        std::fs::write(lane.sessions_dir().join(sid), b"").unwrap();
    }

    #[test]
    fn root_sha_widths() {
        validate_root_sha(SHA1).unwrap();
        validate_root_sha(&"a".repeat(64)).unwrap();
        for bad in [
            "",
            &SHA1[..39],
            &SHA1.to_uppercase(),
            &"g".repeat(40),
            &"a".repeat(41),
        ] {
            let e = validate_root_sha(bad).unwrap_err().to_string();
            assert!(e.contains("40") && e.contains("64"), "{e}");
        }
    }

    #[test]
    fn lane_open_creates_private_tree() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("abcd");
        assert_eq!(Lane::open_existing(&home, SHA1).unwrap(), None);
        let lane = Lane::open(&home, SHA1).unwrap();
        assert_eq!(lane.dir, home.join("transcripts").join(SHA1));
        for d in [
            home.clone(),
            home.join("transcripts"),
            lane.dir.clone(),
            lane.records_dir(),
            lane.staging_dir(),
            lane.quarantine_dir(),
            lane.sessions_dir(),
            lane.journal_dir(),
            lane.index_dir(),
        ] {
            let m = std::fs::symlink_metadata(&d).unwrap();
            assert!(m.is_dir(), "{}", d.display());
            assert_eq!(m.mode() & 0o7777, 0o700, "{}", d.display());
        }
        assert_eq!(
            lane.gap_marker_path(),
            lane.dir.join("subagent-payload-gap.json")
        );
        assert_eq!(lane.lock_path(), lane.dir.join("store.lock"));
        assert_eq!(
            Lane::open_existing(&home, SHA1).unwrap(),
            Some(lane.clone())
        );
        // A widened leaf is narrowed on the next open.
        std::fs::set_permissions(lane.records_dir(), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        Lane::open(&home, SHA1).unwrap();
        let m = std::fs::metadata(lane.records_dir()).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700);
        assert!(matches!(
            Lane::open(&home, "nope"),
            Err(StoreError::BadRootSha { .. })
        ));
    }

    #[test]
    fn lane_open_refuses_a_symlinked_level() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("abcd");
        std::fs::create_dir(&home).unwrap();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, home.join("transcripts")).unwrap();
        let err = Lane::open(&home, SHA1).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("transcripts") && msg.contains("symlink"),
            "{msg}"
        );
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
        assert!(Lane::open_existing(&home, SHA1).is_err());
    }

    #[test]
    fn lane_open_refuses_a_foreign_owned_leaf() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: chown to another uid needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let lane = Lane::open(t.path(), SHA1).unwrap();
        std::os::unix::fs::chown(lane.records_dir(), Some(4242), None).unwrap();
        let msg = Lane::open(t.path(), SHA1).unwrap_err().to_string();
        assert!(
            msg.contains("owned by another account") && msg.contains("uid 4242"),
            "{msg}"
        );
        assert!(msg.contains("records"), "{msg}");
        let msg = Lane::open_existing(t.path(), SHA1)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("owned by another account"), "{msg}");
    }

    #[test]
    fn directory_keys_are_lane_keys_and_the_index_finds_them_by_ancestor() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("abcd");
        let dir = Path::new("/work/projects/scratch");
        let key = directory_key(dir);
        assert_eq!(key.len(), 68);
        assert_eq!(lane_kind(&key), LaneKind::Directory);
        assert_eq!(lane_kind(SHA1), LaneKind::Repository);
        validate_root_sha(&key).unwrap();
        for bad in [
            "dir-",
            &format!("dir-{}", &SHA1[..40]),
            &key.to_uppercase(),
            &format!("dor-{}", &key[4..]),
        ] {
            assert!(validate_root_sha(bad).is_err(), "{bad}");
        }
        // Different directories, different keys; the tag is part of it.
        assert_ne!(key, directory_key(Path::new("/work/projects")));
        assert_ne!(
            &key[4..],
            crate::fsutil::sha256_hex(dir.as_os_str().as_encoded_bytes())
        );
        let lane = Lane::open(&home, &key).unwrap();
        assert_eq!(lane.kind(), LaneKind::Directory);
        assert_eq!(list_lanes(&home).unwrap(), vec![key.clone()]);
        assert_eq!(lane.directory(), None);

        assert!(directory_lanes_within(&home, dir).is_empty());
        register_directory_lane(&home, &key, dir).unwrap();
        let text = std::fs::read_to_string(dir_lane_index(&home).join(&key)).unwrap();
        assert!(!text.contains("scratch"), "digests only: {text}");
        for within in ["/work/projects/scratch", "/work/projects", "/work", "/"] {
            assert_eq!(
                directory_lanes_within(&home, Path::new(within)),
                vec![key.clone()],
                "{within}"
            );
        }
        for outside in [
            "/work/projects/scratch/sub",
            "/work/other",
            "/work/projects/scratc",
        ] {
            assert!(
                directory_lanes_within(&home, Path::new(outside)).is_empty(),
                "{outside}"
            );
        }
        unregister_directory_lane(&home, &key).unwrap();
        assert!(directory_lanes_within(&home, dir).is_empty());
    }

    #[test]
    fn list_lanes_skips_non_sha_and_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        assert!(list_lanes(home).unwrap().is_empty());
        Lane::open(home, SHA2).unwrap();
        Lane::open(home, SHA1).unwrap();
        std::fs::create_dir(home.join("transcripts/not-a-sha")).unwrap();
        symlink(
            home.join("transcripts").join(SHA1),
            home.join("transcripts").join("a".repeat(40)),
        )
        .unwrap();
        assert_eq!(
            list_lanes(home).unwrap(),
            vec![SHA1.to_string(), SHA2.to_string()]
        );
    }

    // Seed: TestSessionRepoRoundTrip.
    #[test]
    fn session_repo_round_trip() {
        let t = tempfile::tempdir().unwrap();
        note(t.path(), SHA1, "sess-1");
        Lane::open(t.path(), SHA2).unwrap();
        assert_eq!(session_store(t.path(), "sess-1").unwrap(), SHA1);
    }

    // Seed: TestSessionRepoRefusesAnAmbiguousSession.
    #[test]
    fn session_repo_refuses_an_ambiguous_session() {
        let t = tempfile::tempdir().unwrap();
        note(t.path(), SHA1, "sess-1");
        note(t.path(), SHA2, "sess-1");
        let err = session_store(t.path(), "sess-1").unwrap_err();
        assert!(matches!(err, StoreError::AmbiguousSession { count: 2, .. }));
        assert!(err
            .to_string()
            .contains("claimed by 2 stores; refusing to guess"));
    }

    // Seed: TestSessionRepoUnknownSessionIsAnError.
    #[test]
    fn session_repo_unknown_session_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        assert!(matches!(
            session_store(t.path(), "nobody"),
            Err(StoreError::UnknownSession { .. })
        ));
        note(t.path(), SHA1, "other");
        let err = session_store(t.path(), "nobody").unwrap_err();
        assert_eq!(err.to_string(), "no store has seen session nobody");
        assert!(matches!(
            session_store(t.path(), "../other"),
            Err(StoreError::BadSessionId { .. })
        ));
    }

    // Seed: TestSessionRepoRefusesADirectoryReference.
    #[test]
    fn session_repo_refuses_a_directory_reference() {
        let t = tempfile::tempdir().unwrap();
        let lane = Lane::open(t.path(), SHA1).unwrap();
        std::fs::create_dir(lane.sessions_dir().join("sess-d")).unwrap();
        assert!(matches!(
            session_store(t.path(), "sess-d"),
            Err(StoreError::UnknownSession { .. })
        ));
        // A directory in one lane never makes a real note elsewhere ambiguous.
        note(t.path(), SHA2, "sess-d");
        assert_eq!(session_store(t.path(), "sess-d").unwrap(), SHA2);
    }

    #[test]
    fn repo_name_is_best_effort() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(repo_name(t.path(), SHA1), None);
        let dir = t.path().join("history").join(SHA1);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("meta.json"), br#"{"name":"abcd"}"#).unwrap();
        assert_eq!(repo_name(t.path(), SHA1).as_deref(), Some("abcd"));
        std::fs::write(dir.join("meta.json"), br#"{"name":"a\u001bb"}"#).unwrap();
        assert_eq!(repo_name(t.path(), SHA1), None);
        std::fs::write(dir.join("meta.json"), b"not json").unwrap();
        assert_eq!(repo_name(t.path(), SHA1), None);
    }

    #[test]
    fn home_prefers_abcd_home() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            abcd_home_from(os("/a"), os("/h")).unwrap(),
            PathBuf::from("/a")
        );
        assert_eq!(
            abcd_home_from(os(""), os("/h")).unwrap(),
            PathBuf::from("/h/.abcd")
        );
        assert_eq!(
            abcd_home_from(None, os("/h")).unwrap(),
            PathBuf::from("/h/.abcd")
        );
        assert!(matches!(
            abcd_home_from(os(""), os("")),
            Err(StoreError::NoHome)
        ));
        assert!(matches!(
            abcd_home_from(None, None),
            Err(StoreError::NoHome)
        ));
        assert!(matches!(
            abcd_home_from(os("rel"), os("/h")),
            Err(StoreError::RelativeHome { .. })
        ));
        assert!(matches!(
            abcd_home_from(None, os("rel")),
            Err(StoreError::RelativeHome { .. })
        ));
    }
}
