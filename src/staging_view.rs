//! The staging view: the `staging/<stem>.stage.json` sidecar beside each
//! raw blob (a projection of `Staged`/`Restaged` events), the blob stem
//! format, and the staging caps. Read by the projection, the corpus, the
//! stage operation and the drain; it performs no I/O beyond reading and
//! rendering one sidecar.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::clock;
use crate::event::Staged;
use crate::fsutil;
use crate::fsutil::SMALL_FILE_CAP;
use crate::lineage::Lineage;

/// Largest transcript staged or captured. Claude Code sessions of many hours
/// stay well below this; a bigger file is refused whole, never truncated.
pub const RAW_CAP: u64 = 64 << 20;

/// Entries staged longer than this are overdue: sorted first, named in every
/// notice, never deleted by age.
pub const STAGED_TTL_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;

/// What the harness supplied beside the transcript bytes, kept as the 0600
/// staging blob `staging/<stem>.meta.json` and named in `Staged` by its
/// digest: the lineage scalars and the transcript's path. It reaches the journal only through redaction (the record a
/// `Captured` event names); `history discard` deletes it with the blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedMeta {
    #[serde(flatten)]
    pub lineage: Lineage,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source_path: Option<String>,
}

impl StagedMeta {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("staged metadata serialises");
        v.push(b'\n');
        v
    }

    /// Reads `path` and proves it against `sha256` (empty: not checked).
    pub fn read(path: &Path, sha256: &str) -> Result<StagedMeta, String> {
        let bytes = fsutil::read_private(path, SMALL_FILE_CAP).map_err(|e| e.to_string())?;
        if !sha256.is_empty() && fsutil::sha256_hex(&bytes) != sha256 {
            return Err("the staging metadata does not match the digest its event names".into());
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("not staging metadata: {e}"))
    }
}

/// The metadata blob of a stem.
pub fn meta_path(dir: &Path, stem: &str) -> std::path::PathBuf {
    dir.join(format!("{stem}.meta.json"))
}

/// The staging view of one entry (`staging/<stem>.stage.json`): the staged
/// event and its metadata blob in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSidecar {
    pub schema: u32,
    #[serde(flatten)]
    pub lineage: Lineage,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source_path: Option<String>,
    pub staged_at: String,
    /// Absent in the predecessor's sidecars (adopted on first open).
    #[serde(default)]
    pub raw_sha256: String,
    #[serde(default)]
    pub bytes: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub adopted: bool,
}

impl StageSidecar {
    /// The view of a `Staged` event and the metadata blob it names (`None`
    /// when the blob is gone: the ids alone).
    pub fn from_staged(s: &Staged, meta: Option<StagedMeta>) -> StageSidecar {
        // Without its metadata (discarded, retired, or lost to a power
        // loss before it reached the disk) the entry is what its ids say:
        // a sub-agent whose spawn point nobody stated.
        let (mut lineage, source_path) = match meta {
            Some(m) => (m.lineage, m.source_path),
            None => (
                Lineage {
                    spawn_attribution: s
                        .agent_id
                        .as_ref()
                        .map(|_| crate::lineage::SpawnAttribution::Unattributed),
                    ..Lineage::default()
                },
                None,
            ),
        };
        lineage.session_id = s.session_id.clone();
        lineage.agent_id = s.agent_id.clone();
        StageSidecar {
            schema: 1,
            lineage,
            source_path,
            staged_at: clock::rfc3339_nanos(s.staged_at_ns),
            raw_sha256: s.raw_sha256.clone(),
            bytes: s.bytes,
            adopted: s.adopted,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("sidecar serialises");
        v.push(b'\n');
        v
    }

    /// Reads and validates a sidecar; the error says why it is unusable.
    pub fn read(path: &Path) -> Result<StageSidecar, String> {
        let sc = Self::read_any(path)?;
        if sc.raw_sha256.is_empty() {
            return Err("a sidecar without a digest (written by an older abcd); it is adopted when the store is first opened by this version".into());
        }
        Ok(sc)
    }

    /// Reads a sidecar of this or the predecessor's format.
    pub fn read_any(path: &Path) -> Result<StageSidecar, String> {
        let bytes = fsutil::read_private(path, SMALL_FILE_CAP).map_err(|e| e.to_string())?;
        let sc: StageSidecar =
            serde_json::from_slice(&bytes).map_err(|e| format!("not a stage sidecar: {e}"))?;
        if sc.schema != 1 {
            return Err(format!("unknown sidecar schema {}", sc.schema));
        }
        // A sidecar is a projection of a journaled event: ids as long as an
        // older abcd accepted are read back (new input was checked strictly).
        sc.lineage.validate_stored().map_err(|e| e.to_string())?;
        Ok(sc)
    }

    /// The key (session, agent) and staging time of a sidecar, read without
    /// the lineage rules: what the projection needs to retire or move it.
    pub fn read_key(path: &Path) -> Option<(String, Option<String>, String)> {
        #[derive(Deserialize)]
        struct Key {
            session_id: String,
            #[serde(default)]
            agent_id: Option<String>,
            #[serde(default)]
            staged_at: String,
        }
        let bytes = fsutil::read_private(path, SMALL_FILE_CAP).ok()?;
        let k: Key = serde_json::from_slice(&bytes).ok()?;
        Some((k.session_id, k.agent_id, k.staged_at))
    }

    pub fn staged_at_ns(&self) -> u64 {
        clock::parse_rfc3339(&self.staged_at).unwrap_or(0)
    }
}

/// Parses a blob stem `<stamp>-<session>[-agent-<agent>]` (26-char stamp).
/// Used only to adopt a blob that has no journal entry; nothing else reads
/// identity from a file name.
pub fn parse_blob_stem(stem: &str) -> Option<(String, Option<String>)> {
    let rest = stem.get(27..)?;
    if stem.as_bytes().get(26) != Some(&b'-') {
        return None;
    }
    let (session, agent) = match rest.rfind("-agent-") {
        Some(i) => (&rest[..i], Some(rest[i + 7..].to_owned())),
        None => (rest, None),
    };
    if !crate::lineage::is_stored_id(session) {
        return None;
    }
    if let Some(a) = &agent {
        if !crate::lineage::is_stored_id(a) {
            return None;
        }
    }
    Some((session.to_owned(), agent))
}

/// The blob stem for a new entry, shortened by [`crate::naming::stem`] when
/// the ids make it longer than its bound (a shortened stem is not parsed
/// back by [`parse_blob_stem`]: such a blob is always journaled with it).
pub fn blob_stem(staged_at_ns: u64, session_id: &str, agent_id: Option<&str>) -> String {
    let full = match agent_id {
        Some(a) => format!("{}-{}-agent-{}", clock::stamp(staged_at_ns), session_id, a),
        None => format!("{}-{}", clock::stamp(staged_at_ns), session_id),
    };
    crate::naming::stem(&full).into_owned()
}
