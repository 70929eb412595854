//! Who spawned what: the lineage a record carries, its validation, the
//! harness sidecar that supplies the spawn point, and the old composite id.
//!
//! Owns: the identifier charset, the two closed vocabularies
//! (`lineage_source`, `spawn_attribution`), the rules a lineage must satisfy
//! before it is staged or captured, reading `agent-<id>.meta.json` beside a
//! sub-agent transcript, and splitting a pre-lineage composite session id.
//!
//! Must never: guess a spawn point (a sidecar that does not state one leaves
//! the agent `unattributed`), walk a directory to find a sidecar (the path
//! is derived from the transcript path only), or treat an unreadable sidecar
//! as an error that stops staging — it is reported and staging goes on.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::fsutil::{guarded_read, GuardedReadError};

/// Longest identifier accepted from outside (a hook payload, `history
/// capture`, a harness sidecar): session, agent and parent agent ids. Real
/// ids are 36-byte UUIDs and 17-byte agent ids; 128 leaves room for any id
/// format a harness may adopt while keeping every file name derived from an
/// id short: a record or blob name holds a 26-byte stamp and up to two ids,
/// and any name over [`crate::naming::MAX_NAME_BYTES`] is shortened to a
/// readable prefix plus a digest (see `naming`), so none comes near the
/// 255-byte file-name limit of ext4, xfs, btrfs or tmpfs.
pub const MAX_ID_BYTES: usize = 128;

/// Longest identifier read back from the store (journaled events, stage
/// sidecars, records): what an older abcd accepted before [`MAX_ID_BYTES`]
/// was lowered. Such ids stay readable and drainable; their file names are
/// bounded by `naming`, so they never wedge a store.
pub const STORED_MAX_ID_BYTES: usize = 256;

/// Longest free-text lineage scalar (agent type, spawn tool-use id, adopted
/// project). Each becomes one frontmatter line; real values are under 100
/// bytes, and a bound keeps a payload from bloating every record header.
pub const MAX_SCALAR_BYTES: usize = 1024;

/// Read cap for the harness sidecar: real ones are a few hundred bytes, and
/// 64 KiB is the cap every small JSON file in the store is read under.
pub const SIDECAR_CAP: u64 = 64 * 1024;

/// The identifier rule for new input: `[A-Za-z0-9._-]+`, not `.` or
/// `..`, at most [`MAX_ID_BYTES`] bytes. Ids become parts of file names, so
/// the charset is what keeps a payload from naming a path, and the length
/// keeps names short.
pub fn is_valid_id(s: &str) -> bool {
    id_shape(s, MAX_ID_BYTES)
}

/// The identifier rule for ids already in the store: the same charset, up
/// to [`STORED_MAX_ID_BYTES`] (what an older abcd journaled).
pub fn is_stored_id(s: &str) -> bool {
    id_shape(s, STORED_MAX_ID_BYTES)
}

fn id_shape(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A value as an error message shows it: at most 48 characters, escaped,
/// with its full length when cut (a 300-byte id must not flood a hook's
/// one line of stderr).
fn shown(value: &str) -> String {
    let cut: String = value.chars().take(48).collect();
    if cut.len() == value.len() {
        format!("{value:?}")
    } else {
        format!("{cut:?}… ({} bytes)", value.len())
    }
}

/// Which rung of the attribution ladder placed a sub-agent's spawn point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpawnAttribution {
    /// The harness's `agent-<id>.meta.json` sidecar.
    Sidecar,
    /// The spawning transcript's own tool result (placed at reconstruction).
    Transcript,
    /// No rung answered; the spawn point is unknown, not "the main thread".
    Unattributed,
}

impl SpawnAttribution {
    pub fn as_str(self) -> &'static str {
        match self {
            SpawnAttribution::Sidecar => "sidecar",
            SpawnAttribution::Transcript => "transcript",
            SpawnAttribution::Unattributed => "unattributed",
        }
    }

    const ALL: [Self; 3] = [
        SpawnAttribution::Sidecar,
        SpawnAttribution::Transcript,
        SpawnAttribution::Unattributed,
    ];

    /// The inverse of [`Self::as_str`] (the names are written once, there).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for SpawnAttribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the lineage reached the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineageSource {
    /// A live harness hook staged it.
    Hook,
    /// Recovered from transcripts already on disk.
    Ingest,
    /// Repaired from a pre-lineage composite session id.
    Migrated,
}

impl LineageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            LineageSource::Hook => "hook",
            LineageSource::Ingest => "ingest",
            LineageSource::Migrated => "migrated",
        }
    }

    const ALL: [Self; 3] = [
        LineageSource::Hook,
        LineageSource::Ingest,
        LineageSource::Migrated,
    ];

    /// The inverse of [`Self::as_str`] (the names are written once, there).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for LineageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a lineage was refused. Messages name the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LineageError {
    #[error("{field} {} is not a valid identifier (only letters, digits, '.', '_' and '-'; not '.' or '..'; at most {max} bytes)", shown(value))]
    BadId {
        field: &'static str,
        value: String,
        max: usize,
    },
    #[error("{field} is present but empty; omit it instead")]
    Empty { field: &'static str },
    /// The value is never echoed: it may be a live credential.
    #[error("{field} has the shape of a secret (redaction rule {kind} matches it); an identifier names files and journal entries, so it is refused and nothing is written")]
    SecretId { field: &'static str, kind: String },
    #[error("{field} contains a line break, which would forge a frontmatter field; refused")]
    LineBreak { field: &'static str },
    #[error("{field} is {len} bytes, over the {MAX_SCALAR_BYTES}-byte cap")]
    TooLong { field: &'static str, len: usize },
    #[error("spawn_attribution is set on a main-thread lineage (no agent_id); it belongs only on a sub-agent")]
    AttributionOnMainThread,
    #[error(
        "{field} is set on a main-thread lineage (no agent_id); only a sub-agent has a spawn point"
    )]
    SpawnFieldOnMainThread { field: &'static str },
    #[error("sub-agent {agent_id} has no spawn_attribution; a sub-agent must say which rung placed it (sidecar, transcript or unattributed)")]
    MissingAttribution { agent_id: String },
    #[error("sub-agent {agent_id} is unattributed but carries {field}; an unattributed spawn has no parent, depth or tool-use id")]
    UnattributedWithSpawnField {
        agent_id: String,
        field: &'static str,
    },
}

/// The lineage of one transcript: which session, which agent (none on the
/// main thread), who spawned it and how it was placed.
///
/// The one definition of the lineage fields: a record's metadata, the
/// staging view and the staging metadata blob all embed it (flattened in
/// their JSON). Its serde form is JSON only (absent fields are skipped);
/// the frozen schema-1 event layout is `event::v1::Lineage`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_type: Option<String>,
    /// 0 on the main thread. On a sub-agent, 0 means the harness did not
    /// state a depth (see [`read_harness_sidecar`]).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub spawn_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lineage_source: Option<LineageSource>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawn_attribution: Option<SpawnAttribution>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The agent id a spilled tool output (`<session>/tool-results/<name>`,
/// captured by `history ingest`) is stored under is this prefix and the
/// file's stem; its `agent_type` is [`TOOL_OUTPUT_AGENT_TYPE`].
pub const TOOL_OUTPUT_AGENT_PREFIX: &str = "tool-result-";
pub const TOOL_OUTPUT_AGENT_TYPE: &str = "tool-result";

/// A spilled tool output's ids (see [`spill_ids`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillIds {
    pub session_id: String,
    pub agent_id: String,
    pub spawn_tool_use_id: Option<String>,
}

/// A spilled file's ids from its place: the session is the name of the
/// directory holding `tool-results/` (a UUID, as Claude Code names session
/// directories); the record's agent id is `tool-result-<stem>`, and a stem
/// that is a tool-use id (`toolu_…`, the harness names some spills after
/// the call that produced them) is its spawn point.
pub fn spill_ids(path: &Path) -> Result<SpillIds, String> {
    let session = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let uuid_shape = session.len() == 36
        && session.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    if !uuid_shape {
        return Err("its directory is not named after a session id".into());
    }
    let stem = path
        .file_stem()
        .and_then(|n| n.to_str())
        .ok_or("its file name is not UTF-8")?;
    let agent = format!("{}{stem}", TOOL_OUTPUT_AGENT_PREFIX);
    check_id("agent_id", Some(&agent)).map_err(|e| e.to_string())?;
    let spawn = stem.starts_with("toolu_").then(|| stem.to_owned());
    Ok(SpillIds {
        session_id: session.to_owned(),
        agent_id: agent,
        spawn_tool_use_id: spawn,
    })
}

/// The lineage of a spilled tool output: its ids from its place, agent
/// type [`TOOL_OUTPUT_AGENT_TYPE`], and its tool call as its spawn point
/// when its name gives one (attributed by the transcript's own id).
pub fn spill_lineage(ids: SpillIds, source: LineageSource) -> Lineage {
    let attribution = if ids.spawn_tool_use_id.is_some() {
        SpawnAttribution::Transcript
    } else {
        SpawnAttribution::Unattributed
    };
    Lineage {
        session_id: ids.session_id,
        agent_id: Some(ids.agent_id),
        agent_type: Some(TOOL_OUTPUT_AGENT_TYPE.into()),
        spawn_tool_use_id: ids.spawn_tool_use_id,
        spawn_attribution: Some(attribution),
        lineage_source: Some(source),
        ..Default::default()
    }
}

impl Lineage {
    /// A main-thread lineage for `session_id`.
    pub fn main_thread(session_id: &str, source: LineageSource) -> Self {
        Lineage {
            session_id: session_id.to_string(),
            lineage_source: Some(source),
            ..Lineage::default()
        }
    }

    pub fn is_main_thread(&self) -> bool {
        self.agent_id.is_none()
    }

    /// A spilled tool output: text one of the session's tool calls
    /// produced, stored beside its threads — not a thread, never counted
    /// or drawn as a sub-agent.
    pub fn is_tool_output(&self) -> bool {
        self.agent_type.as_deref() == Some(TOOL_OUTPUT_AGENT_TYPE)
            && self
                .agent_id
                .as_deref()
                .is_some_and(|a| a.starts_with(TOOL_OUTPUT_AGENT_PREFIX))
    }

    /// Checks the record rules: the new-input id rule ([`is_valid_id`]) on
    /// every id; no line break and a length bound on free-text scalars; no
    /// empty `Some("")` (the record cannot tell it from absent); attribution empty on the main thread and
    /// required on a sub-agent; `unattributed` forbids parent, depth and
    /// tool-use id; the main thread has no spawn point at all.
    pub fn validate(&self) -> Result<(), LineageError> {
        self.validate_with(MAX_ID_BYTES)
    }

    /// [`Self::validate`] for a lineage read back from the store (a stage
    /// sidecar, a staged entry being drained): ids may be as long as an
    /// older abcd accepted ([`STORED_MAX_ID_BYTES`]). New input is checked
    /// with [`Self::validate`] before anything is journaled.
    pub fn validate_stored(&self) -> Result<(), LineageError> {
        self.validate_with(STORED_MAX_ID_BYTES)
    }

    fn validate_with(&self, max: usize) -> Result<(), LineageError> {
        check_id_within("session_id", Some(&self.session_id), max)?;
        check_id_within("agent_id", self.agent_id.as_deref(), max)?;
        check_id_within("parent_agent_id", self.parent_agent_id.as_deref(), max)?;
        check_scalar("agent_type", self.agent_type.as_deref())?;
        check_scalar("spawn_tool_use_id", self.spawn_tool_use_id.as_deref())?;
        let Some(agent_id) = &self.agent_id else {
            if self.spawn_attribution.is_some() {
                return Err(LineageError::AttributionOnMainThread);
            }
            let field = if self.parent_agent_id.is_some() {
                "parent_agent_id"
            } else if self.spawn_depth > 0 {
                "spawn_depth"
            } else if self.spawn_tool_use_id.is_some() {
                "spawn_tool_use_id"
            } else {
                return Ok(());
            };
            return Err(LineageError::SpawnFieldOnMainThread { field });
        };
        match self.spawn_attribution {
            None => Err(LineageError::MissingAttribution {
                agent_id: agent_id.clone(),
            }),
            Some(SpawnAttribution::Unattributed) => {
                let field = if self.parent_agent_id.is_some() {
                    "parent_agent_id"
                } else if self.spawn_depth > 0 {
                    "spawn_depth"
                } else if self.spawn_tool_use_id.is_some() {
                    "spawn_tool_use_id"
                } else {
                    return Ok(());
                };
                Err(LineageError::UnattributedWithSpawnField {
                    agent_id: agent_id.clone(),
                    field,
                })
            }
            Some(_) => Ok(()),
        }
    }
}

/// Identifiers the harness issues in its own shapes, which no redaction
/// rule can take for a secret: a UUID (session ids), or `a` followed by hex
/// (Claude Code's agent ids). Anything else is checked by the scanner.
fn harness_id_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |c: &u8| c.is_ascii_digit() || (b'a'..=b'f').contains(c);
    let uuid = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                hex(c)
            }
        });
    let agent = b.len() > 1 && b[0] == b'a' && b[1..].iter().all(hex);
    uuid || agent || b.len() < 12
}

/// Refuses an identifier that redaction would change: ids are written to
/// the journal and into file names unredacted (they key the corpus), so one
/// that looks like a token (`ghp_…` as a session id) must never get there.
/// The scanner is only built for ids outside the harness's own shapes.
pub fn check_id_not_secret(field: &'static str, v: Option<&str>) -> Result<(), LineageError> {
    let Some(v) = v.filter(|v| !harness_id_shape(v)) else {
        return Ok(());
    };
    let scanner = abcd_redact::Scanner::new(abcd_redact::Identity::default(), None);
    let findings = scanner.scan(v);
    match findings.first() {
        None => Ok(()),
        Some(f) => Err(LineageError::SecretId {
            field,
            kind: f.kind.to_string(),
        }),
    }
}

/// The new-input identifier rule for one field, as an error that names the
/// field and the rule (hooks print it as their one line of stderr).
pub fn check_id(field: &'static str, v: Option<&str>) -> Result<(), LineageError> {
    check_id_within(field, v, MAX_ID_BYTES)
}

fn check_id_within(field: &'static str, v: Option<&str>, max: usize) -> Result<(), LineageError> {
    match v {
        None => Ok(()),
        Some("") => Err(LineageError::Empty { field }),
        Some(s) if id_shape(s, max) => Ok(()),
        Some(s) => Err(LineageError::BadId {
            field,
            value: s.to_string(),
            max,
        }),
    }
}

/// Rules for a free-text frontmatter scalar (no CR/LF, bounded, not empty).
pub fn check_scalar(field: &'static str, v: Option<&str>) -> Result<(), LineageError> {
    match v {
        None => Ok(()),
        Some("") => Err(LineageError::Empty { field }),
        Some(s) if s.contains(['\r', '\n']) => Err(LineageError::LineBreak { field }),
        Some(s) if s.len() > MAX_SCALAR_BYTES => Err(LineageError::TooLong {
            field,
            len: s.len(),
        }),
        Some(_) => Ok(()),
    }
}

/// True when `s` may be stored as a free-text scalar; hooks use it to drop a
/// bad decorative field rather than lose the transcript.
pub fn is_valid_scalar(s: &str) -> bool {
    check_scalar("value", Some(s)).is_ok()
}

/// The spawn facts a harness sidecar stated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SidecarLineage {
    pub agent_type: Option<String>,
    /// Only kept when it is a valid identifier.
    pub parent_agent_id: Option<String>,
    /// `None` when the sidecar names the spawning tool call but no depth.
    pub spawn_depth: Option<u32>,
    /// Only kept when it is a valid scalar (no line break).
    pub spawn_tool_use_id: Option<String>,
}

/// What reading the harness sidecar found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SidecarOutcome {
    /// No sidecar beside the transcript (or the path does not end `.jsonl`).
    Absent,
    /// A sidecar exists but could not be used; the reason is for stderr.
    /// The agent stays unattributed — never misattributed.
    Unreadable(String),
    /// A readable sidecar that states no spawn point (legacy
    /// `{"agentType": …}` only, or `spawnDepth: 0`). Its agent type may
    /// still fill an empty one; the agent stays unattributed.
    Unplaced { agent_type: Option<String> },
    /// A sidecar that places the spawn point.
    Accepted(SidecarLineage),
}

/// `…/agent-<id>.jsonl` → `…/agent-<id>.meta.json`; `None` for any other
/// extension (the harness only writes sidecars beside `.jsonl` files).
pub fn sidecar_path(transcript_path: &Path) -> Option<PathBuf> {
    let name = transcript_path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl").filter(|s| !s.is_empty())?;
    Some(transcript_path.with_file_name(format!("{stem}.meta.json")))
}

/// Reads the harness sidecar beside a sub-agent transcript, guarded and
/// capped at [`SIDECAR_CAP`].
///
/// Accepted when `spawnDepth` is a positive integer, or when `spawnDepth`
/// is absent but a usable `toolUseId` is present: real sidecars from some
/// harness builds name the spawning tool call without a depth, and the tool
/// call id alone places the spawn point exactly (reconstruction finds the
/// parent from it), so dropping it would lose real lineage. The depth is
/// then left unstated (`None`), never guessed. A present `spawnDepth` that
/// is not a non-negative integer makes the sidecar `Unreadable`.
pub fn read_harness_sidecar(transcript_path: &Path) -> SidecarOutcome {
    let Some(path) = sidecar_path(transcript_path) else {
        return SidecarOutcome::Absent;
    };
    let bytes = match guarded_read(&path, SIDECAR_CAP) {
        Ok(b) => b,
        Err(GuardedReadError::NotFound { .. }) => return SidecarOutcome::Absent,
        Err(e) => return SidecarOutcome::Unreadable(e.to_string()),
    };
    parse_harness_sidecar(&bytes, &path)
}

/// The parsing half of [`read_harness_sidecar`]; `path` is for messages.
pub fn parse_harness_sidecar(bytes: &[u8], path: &Path) -> SidecarOutcome {
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return SidecarOutcome::Unreadable(format!(
                "{} is not valid JSON ({e})",
                path.display()
            ))
        }
    };
    let Some(obj) = value.as_object() else {
        return SidecarOutcome::Unreadable(format!("{} is not a JSON object", path.display()));
    };
    let string = |key: &str| obj.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let agent_type = string("agentType").filter(|s| is_valid_scalar(s));
    let parent_agent_id = string("parentAgentId").filter(|s| is_valid_id(s));
    let spawn_tool_use_id = string("toolUseId").filter(|s| is_valid_scalar(s));
    let spawn_depth = match obj.get("spawnDepth") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|d| u32::try_from(d).ok()) {
            Some(d) => Some(d),
            None => {
                return SidecarOutcome::Unreadable(format!(
                    "{} has a spawnDepth that is not a non-negative integer ({v})",
                    path.display()
                ))
            }
        },
    };
    let placed = match spawn_depth {
        Some(d) => d > 0,
        None => spawn_tool_use_id.is_some(),
    };
    if !placed {
        return SidecarOutcome::Unplaced { agent_type };
    }
    SidecarOutcome::Accepted(SidecarLineage {
        agent_type,
        parent_agent_id,
        spawn_depth,
        spawn_tool_use_id,
    })
}

/// Applies an accepted sidecar: attribution `sidecar`, its depth, tool-use
/// id and parent; its agent type only when the payload gave none (the
/// payload is the harness speaking about this very stop).
pub fn apply_sidecar(lineage: &mut Lineage, sidecar: SidecarLineage) {
    lineage.spawn_attribution = Some(SpawnAttribution::Sidecar);
    lineage.spawn_depth = sidecar.spawn_depth.unwrap_or(0);
    lineage.spawn_tool_use_id = sidecar.spawn_tool_use_id;
    lineage.parent_agent_id = sidecar.parent_agent_id;
    if lineage.agent_type.is_none() {
        lineage.agent_type = sidecar.agent_type;
    }
}

/// A pre-lineage composite session id, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composite {
    /// The truncated spawning-session prefix.
    pub prefix: String,
    /// A middle segment such as `wf_<run>` (reported, then dropped).
    pub extra_segment: Option<String>,
    pub agent_id: String,
}

/// Splits `<prefix>--agent-<id>` or `<prefix>--<extra>--agent-<id>` at the
/// LAST `--agent-`. `None` when `s` is not composite or a part is unusable.
pub fn parse_composite_session_id(s: &str) -> Option<Composite> {
    const MARK: &str = "--agent-";
    let at = s.rfind(MARK)?;
    let (left, agent_id) = (&s[..at], &s[at + MARK.len()..]);
    if !is_valid_id(agent_id) {
        return None;
    }
    let (prefix, extra) = match left.split_once("--") {
        Some((p, rest)) => (p, Some(rest)),
        None => (left, None),
    };
    if !is_valid_id(prefix) {
        return None;
    }
    let extra_segment = extra.filter(|e| !e.is_empty()).map(str::to_string);
    Some(Composite {
        prefix: prefix.to_string(),
        extra_segment,
        agent_id: agent_id.to_string(),
    })
}

/// Most sibling transcripts searched for a spawning tool call (a session
/// with more sub-agents than this is rare; the search is at drain time).
pub const PARENT_SEARCH_MAX_FILES: usize = 512;

/// Finds which sibling sub-agent transcript issued the tool call
/// `tool_use_id` (the harness sidecar of a depth-2 agent names the call but
/// not its parent). Looks only at `agent-<id>.jsonl` files beside
/// `transcript_path`, for a `tool_use` block whose `id` is exactly the tool
/// call id; returns that sibling's agent id. `None` when no sibling (or more
/// than one) matches — never a guess.
pub fn find_parent_by_tool_use(transcript_path: &Path, tool_use_id: &str) -> Option<String> {
    if !is_valid_id(tool_use_id) {
        return None;
    }
    let dir = transcript_path.parent()?;
    let own = transcript_path.file_name()?.to_str()?.to_owned();
    let needle = format!("\"id\":\"{tool_use_id}\"");
    let mut found: Option<String> = None;
    let rd = std::fs::read_dir(dir).ok()?;
    for entry in rd.flatten().take(PARENT_SEARCH_MAX_FILES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == own {
            continue;
        }
        let Some(agent) = name
            .strip_prefix("agent-")
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        if !is_valid_id(agent) {
            continue;
        }
        let Ok(bytes) = guarded_read(&entry.path(), 64 << 20) else {
            continue;
        };
        let hit = bytes.split(|b| *b == b'\n').any(|line| {
            memfind(line, needle.as_bytes()) && memfind(line, b"\"type\":\"tool_use\"")
        });
        if hit {
            if found.is_some() {
                return None;
            }
            found = Some(agent.to_owned());
        }
    }
    found
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/public")
            .join(rel)
    }

    fn subagent(attr: Option<SpawnAttribution>) -> Lineage {
        Lineage {
            session_id: "8d1a1f9e-b38c-41fa-952a-5288179b5626".into(),
            agent_id: Some("a490235204f1c154d".into()),
            agent_type: Some("Explore".into()),
            lineage_source: Some(LineageSource::Hook),
            spawn_attribution: attr,
            ..Lineage::default()
        }
    }

    #[test]
    fn valid_ids() {
        for ok in [
            "a",
            "8d1a1f9e-b38c-41fa-952a-5288179b5626",
            "a.b_c-d",
            "...",
        ] {
            assert!(is_valid_id(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a\n",
            &"x".repeat(MAX_ID_BYTES + 1),
        ] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
        assert!(is_valid_id(&"x".repeat(MAX_ID_BYTES)));
        // Ids an older abcd journaled stay readable up to its old limit.
        let old = "x".repeat(STORED_MAX_ID_BYTES);
        assert!(!is_valid_id(&old) && is_stored_id(&old));
        assert!(!is_stored_id(&"x".repeat(STORED_MAX_ID_BYTES + 1)));
        assert!(!is_stored_id("a/b") && !is_stored_id(".."));
        let l = Lineage::main_thread(&old, LineageSource::Hook);
        assert!(matches!(
            l.validate(),
            Err(LineageError::BadId {
                field: "session_id",
                max: MAX_ID_BYTES,
                ..
            })
        ));
        l.validate_stored().unwrap();
        // The message names the field and the rule, on one short line.
        let msg = l.validate().unwrap_err().to_string();
        assert!(msg.starts_with("session_id \"xxx"), "{msg}");
        assert!(
            msg.contains("(256 bytes)") && msg.contains("at most 128 bytes"),
            "{msg}"
        );
        assert!(msg.len() < 200 && !msg.contains('\n'), "{msg}");
    }

    #[test]
    fn vocabularies_round_trip() {
        for a in [
            SpawnAttribution::Sidecar,
            SpawnAttribution::Transcript,
            SpawnAttribution::Unattributed,
        ] {
            assert_eq!(SpawnAttribution::parse(a.as_str()), Some(a));
        }
        for s in [
            LineageSource::Hook,
            LineageSource::Ingest,
            LineageSource::Migrated,
        ] {
            assert_eq!(LineageSource::parse(s.as_str()), Some(s));
        }
        assert_eq!(SpawnAttribution::parse("Sidecar"), None);
        assert_eq!(LineageSource::parse(""), None);
    }

    // Seed: TestCaptureRejectsAMalformedLineageScalar (the validation half).
    #[test]
    fn capture_rejects_a_malformed_lineage_scalar() {
        let mut l = subagent(Some(SpawnAttribution::Unattributed));
        l.agent_type = Some("Explore\nsession_id: forged".into());
        assert_eq!(
            l.validate(),
            Err(LineageError::LineBreak {
                field: "agent_type"
            })
        );
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.spawn_tool_use_id = Some("toolu_1\r".into());
        assert_eq!(
            l.validate(),
            Err(LineageError::LineBreak {
                field: "spawn_tool_use_id"
            })
        );
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.parent_agent_id = Some("../etc".into());
        assert!(matches!(
            l.validate(),
            Err(LineageError::BadId {
                field: "parent_agent_id",
                ..
            })
        ));
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.agent_id = Some("a/b".into());
        assert!(matches!(
            l.validate(),
            Err(LineageError::BadId {
                field: "agent_id",
                ..
            })
        ));
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.agent_type = Some(String::new());
        assert_eq!(
            l.validate(),
            Err(LineageError::Empty {
                field: "agent_type"
            })
        );
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.agent_type = Some("x".repeat(MAX_SCALAR_BYTES + 1));
        assert!(matches!(l.validate(), Err(LineageError::TooLong { .. })));
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.session_id = String::new();
        assert_eq!(
            l.validate(),
            Err(LineageError::Empty {
                field: "session_id"
            })
        );
    }

    #[test]
    fn attribution_rules() {
        let main = Lineage::main_thread("s1", LineageSource::Hook);
        assert!(main.is_main_thread());
        main.validate().unwrap();
        let mut m = main.clone();
        m.spawn_attribution = Some(SpawnAttribution::Unattributed);
        assert_eq!(m.validate(), Err(LineageError::AttributionOnMainThread));
        let mut m = main.clone();
        m.spawn_depth = 1;
        assert_eq!(
            m.validate(),
            Err(LineageError::SpawnFieldOnMainThread {
                field: "spawn_depth"
            })
        );

        assert!(matches!(
            subagent(None).validate(),
            Err(LineageError::MissingAttribution { .. })
        ));
        subagent(Some(SpawnAttribution::Unattributed))
            .validate()
            .unwrap();
        for (field, f) in [
            (
                "parent_agent_id",
                (|l: &mut Lineage| l.parent_agent_id = Some("p".into())) as fn(&mut Lineage),
            ),
            ("spawn_depth", |l: &mut Lineage| l.spawn_depth = 2),
            ("spawn_tool_use_id", |l: &mut Lineage| {
                l.spawn_tool_use_id = Some("t".into())
            }),
        ] {
            let mut l = subagent(Some(SpawnAttribution::Unattributed));
            f(&mut l);
            assert!(
                matches!(l.validate(), Err(LineageError::UnattributedWithSpawnField { field: got, .. }) if got == field),
                "{field}"
            );
            let mut l = subagent(Some(SpawnAttribution::Sidecar));
            f(&mut l);
            l.validate().unwrap();
        }
    }

    #[test]
    fn lineage_json_round_trips_and_skips_absent_fields() {
        let mut l = subagent(Some(SpawnAttribution::Sidecar));
        l.spawn_depth = 2;
        l.parent_agent_id = Some("parent1".into());
        let bytes = serde_json::to_vec(&l).unwrap();
        assert_eq!(serde_json::from_slice::<Lineage>(&bytes).unwrap(), l);
        let main = serde_json::to_string(&Lineage::main_thread("s1", LineageSource::Hook)).unwrap();
        assert_eq!(main, r#"{"session_id":"s1","lineage_source":"hook"}"#);
    }

    #[test]
    fn real_sidecar_with_depth_is_accepted() {
        let t = fixture("rekal-cli/cmd/rekal/cli/session/testdata/real/8d1a1f9e-b38c-41fa-952a-5288179b5626/subagents/agent-a490235204f1c154d.jsonl");
        let SidecarOutcome::Accepted(s) = read_harness_sidecar(&t) else {
            panic!("expected accepted");
        };
        assert_eq!(s.spawn_depth, Some(1));
        assert_eq!(
            s.spawn_tool_use_id.as_deref(),
            Some("toolu_017eBSEutdVBmDn3sGEVdECP")
        );
        assert_eq!(s.agent_type.as_deref(), Some("Explore"));
        assert_eq!(s.parent_agent_id, None);
        let mut l = subagent(Some(SpawnAttribution::Unattributed));
        l.agent_type = None;
        apply_sidecar(&mut l, s);
        assert_eq!(l.spawn_attribution, Some(SpawnAttribution::Sidecar));
        assert_eq!(l.spawn_depth, 1);
        assert_eq!(l.agent_type.as_deref(), Some("Explore"));
        l.validate().unwrap();
    }

    #[test]
    fn real_sidecar_without_depth_places_by_tool_use_id() {
        let t = fixture("claude-code-log/test/test_data/minimal_showcase/55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl");
        let out = read_harness_sidecar(&t);
        let SidecarOutcome::Accepted(s) = out else {
            panic!("expected accepted, got {out:?}");
        };
        assert_eq!(s.spawn_depth, None);
        assert_eq!(s.spawn_tool_use_id.as_deref(), Some("toolu_sc_showcol1"));
        let mut l = subagent(Some(SpawnAttribution::Unattributed));
        apply_sidecar(&mut l, s);
        assert_eq!(l.spawn_depth, 0);
        assert_eq!(
            l.agent_type.as_deref(),
            Some("Explore"),
            "payload type wins"
        );
        l.validate().unwrap();
    }

    #[test]
    fn real_bare_agent_type_sidecar_is_unplaced() {
        let t = fixture("claude-code-log/test/test_data/workflow_scriptpath/22220000-0000-4000-8000-000000000002/subagents/workflows/wf_sp01/agent-agsp0001.jsonl");
        assert_eq!(
            read_harness_sidecar(&t),
            SidecarOutcome::Unplaced {
                agent_type: Some("workflow-subagent".into())
            }
        );
    }

    // Seed: TestUnreadableSidecarIsReportedNotMisattributed (sidecar half).
    #[test]
    fn unreadable_sidecar_is_reported_not_misattributed() {
        let t = tempfile::tempdir().unwrap();
        let tr = t.path().join("agent-x1.jsonl");
        std::fs::write(&tr, b"{}\n").unwrap();
        let side = t.path().join("agent-x1.meta.json");
        assert_eq!(read_harness_sidecar(&tr), SidecarOutcome::Absent);

        std::fs::write(&side, b"{\"spawnDepth\": 1, \"toolUse").unwrap();
        let SidecarOutcome::Unreadable(why) = read_harness_sidecar(&tr) else {
            panic!("truncated JSON must be unreadable");
        };
        assert!(why.contains("agent-x1.meta.json"), "{why}");

        std::fs::write(&side, b"{\"spawnDepth\": \"deep\"}").unwrap();
        assert!(matches!(
            read_harness_sidecar(&tr),
            SidecarOutcome::Unreadable(_)
        ));
        std::fs::write(&side, b"[1]").unwrap();
        assert!(matches!(
            read_harness_sidecar(&tr),
            SidecarOutcome::Unreadable(_)
        ));

        std::fs::remove_file(&side).unwrap();
        std::os::unix::fs::symlink(t.path().join("elsewhere"), &side).unwrap();
        let SidecarOutcome::Unreadable(why) = read_harness_sidecar(&tr) else {
            panic!("symlinked sidecar must be unreadable");
        };
        assert!(why.contains("symlink"), "{why}");

        std::fs::remove_file(&side).unwrap();
        std::fs::write(&side, vec![b' '; SIDECAR_CAP as usize + 1]).unwrap();
        assert!(matches!(
            read_harness_sidecar(&tr),
            SidecarOutcome::Unreadable(_)
        ));

        // Depth 0 states no spawn point; a bad parent id and a tool id with a
        // line break are dropped, not trusted.
        std::fs::write(&side, br#"{"spawnDepth":0,"toolUseId":"t1"}"#).unwrap();
        assert_eq!(
            read_harness_sidecar(&tr),
            SidecarOutcome::Unplaced { agent_type: None }
        );
        std::fs::write(
            &side,
            br#"{"spawnDepth":2,"parentAgentId":"../x","toolUseId":"a\nb"}"#,
        )
        .unwrap();
        assert_eq!(
            read_harness_sidecar(&tr),
            SidecarOutcome::Accepted(SidecarLineage {
                spawn_depth: Some(2),
                ..SidecarLineage::default()
            })
        );
        // Only a `.jsonl` transcript has a sidecar.
        assert_eq!(
            read_harness_sidecar(&t.path().join("agent-x1.json")),
            SidecarOutcome::Absent
        );
    }

    #[test]
    fn composite_ids_split_at_the_last_agent_mark() {
        assert_eq!(
            parse_composite_session_id("5a9221e2--agent-acf07c33"),
            Some(Composite {
                prefix: "5a9221e2".into(),
                extra_segment: None,
                agent_id: "acf07c33".into()
            })
        );
        assert_eq!(
            parse_composite_session_id("5a9221e2--wf_run1--agent-acf07c33"),
            Some(Composite {
                prefix: "5a9221e2".into(),
                extra_segment: Some("wf_run1".into()),
                agent_id: "acf07c33".into()
            })
        );
        assert_eq!(
            parse_composite_session_id("p--agent-x--agent-y").map(|c| c.agent_id),
            Some("y".into())
        );
        for bad in [
            "5a9221e2",
            "--agent-x",
            "p--agent-",
            "p--agent-a/b",
            "8d1a1f9e-b38c",
        ] {
            assert_eq!(parse_composite_session_id(bad), None, "{bad}");
        }
    }
}
