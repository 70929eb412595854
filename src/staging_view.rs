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

/// The staging view of one entry (`staging/<stem>.stage.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSidecar {
    pub schema: u32,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_type: Option<String>,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub spawn_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lineage_source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_attribution: Option<String>,
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

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl StageSidecar {
    pub fn from_staged(s: &Staged) -> StageSidecar {
        let l = &s.lineage;
        StageSidecar {
            schema: 1,
            session_id: l.session_id.clone(),
            agent_id: l.agent_id.clone(),
            parent_agent_id: l.parent_agent_id.clone(),
            agent_type: l.agent_type.clone(),
            spawn_depth: l.spawn_depth,
            spawn_tool_use_id: l.spawn_tool_use_id.clone(),
            lineage_source: l.lineage_source.map(|x| x.as_str().to_owned()),
            spawn_attribution: l.spawn_attribution.map(|x| x.as_str().to_owned()),
            source_path: s.source_path.clone(),
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
        sc.lineage().validate_stored().map_err(|e| e.to_string())?;
        Ok(sc)
    }

    pub fn lineage(&self) -> Lineage {
        use crate::lineage::{LineageSource, SpawnAttribution};
        Lineage {
            session_id: self.session_id.clone(),
            agent_id: self.agent_id.clone(),
            parent_agent_id: self.parent_agent_id.clone(),
            agent_type: self.agent_type.clone(),
            spawn_depth: self.spawn_depth,
            spawn_tool_use_id: self.spawn_tool_use_id.clone(),
            lineage_source: self
                .lineage_source
                .as_deref()
                .and_then(LineageSource::parse),
            spawn_attribution: self
                .spawn_attribution
                .as_deref()
                .and_then(SpawnAttribution::parse),
        }
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
