//! The event model: every state change of a store, as it is written to the
//! journal.
//!
//! Owns: the versioned envelope, the event enum and its bincode encoding,
//! and the frozen schema-1 layouts ([`v1`]) the upgrade reads. Never does
//! I/O, and since schema 2 no event carries free text: a staged transcript
//! and the harness's metadata are named by SHA-256 (0600 blobs under
//! `staging/` or `quarantine/`), a record by the SHA-256 of its file in
//! `bodies/`, a forgotten value by its digests. What an event may carry:
//! identifiers (checked against the id rule and every redaction rule before
//! they are written), digests, sizes, times, record names and rule kinds.
//!
//! Decisions (is this capture a no-op? which records does it supersede? does
//! it retire a staged entry?) are made by the writer under the store lock and
//! recorded in the event, so applying an event never decides anything and a
//! replay into an empty directory reproduces every projection byte for byte.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Version of the envelope and event encoding. Bumped on any change to the
/// bincode layout; a reader refuses a newer version rather than misreading it.
/// 2: no free text in any event — record files live in `bodies/` named by
/// digest, the harness's metadata in a staging blob named by digest, and
/// `Forgotten` exists. Schema 1 is decoded only by the upgrade ([`v1`]).
pub const EVENT_SCHEMA: u16 = 2;

/// Upper bound on a decoded event, so a hostile or damaged payload cannot make
/// bincode allocate without limit. A schema-1 record body is at most 64 MiB of
/// transcript; redaction placeholders can lengthen it a little. Schema-2
/// events are small (digests and ids) but share the bound.
pub const MAX_EVENT_BYTES: u64 = 96 << 20;

/// What is written as one journal frame's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub schema: u16,
    /// When the writer decided this event (UTC, ns). Informational for most
    /// events; projections use the times carried inside the event body.
    pub at_ns: u64,
    pub event: Event,
}

/// Where a staged blob currently lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlobPlace {
    Staging,
    Quarantine,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A transcript was staged under a new key (session, agent).
    Staged(Staged),
    /// Different bytes arrived for a key that is already staged: the blob at
    /// the same stem was replaced (last writer wins, queue position kept).
    Restaged(Restaged),
    /// A staged entry (or a manual capture) was redacted and decided.
    Captured(Box<Captured>),
    /// A deterministic redaction refusal moved a staged entry to quarantine.
    Quarantined(Quarantined),
    /// The operator deleted a staged or quarantined blob (`history discard`).
    Discarded(Discarded),
    /// A record's lineage rewritten in place (the composite-id repair,
    /// `history migrate`): same record name, a new file in `bodies/` whose
    /// only changed bytes are the ones `record::relineage` documents.
    LineageMigrated(Box<LineageMigrated>),
    /// A hook saw this session run against this store.
    SessionNoted(SessionNoted),
    /// The harness fired SubagentStop without an agent_transcript_path.
    SubagentGapSighted(GapSighted),
    /// `history forget`: values removed from every body, or whole records
    /// removed. Names what it removed by digest only.
    Forgotten(Box<Forgotten>),
    /// `abcd sync`: an event another machine published, with what importing
    /// it decided here (under the store lock). Appended with a journal id
    /// derived from the published event's id, so a re-pull is a no-op.
    Imported(Box<Imported>),
    /// A directory lane (`dir-<hex>`: a session ran in no repository, or in
    /// one without a commit) records the directory it stands for, redacted.
    DirectoryNamed(DirectoryNamed),
    /// A directory lane's content moved into a repository lane once its
    /// directory had a root commit: the records, staged entries and session
    /// notes named here leave this lane (they were journaled into
    /// `to_root`'s lane first).
    LaneMoved(Box<LaneMoved>),
}

impl Event {
    /// Short stable name, used by `journal dump` and in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Staged(_) => "staged",
            Event::Restaged(_) => "restaged",
            Event::Captured(_) => "captured",
            Event::Quarantined(_) => "quarantined",
            Event::Discarded(_) => "discarded",
            Event::LineageMigrated(_) => "lineage-migrated",
            Event::SessionNoted(_) => "session-noted",
            Event::SubagentGapSighted(_) => "subagent-gap-sighted",
            Event::Forgotten(_) => "forgotten",
            Event::Imported(_) => "imported",
            Event::DirectoryNamed(_) => "directory-named",
            Event::LaneMoved(_) => "lane-moved",
        }
    }

    /// What applying this event does: an imported event's local decision,
    /// any other event itself.
    pub fn effective(&self) -> std::borrow::Cow<'_, Event> {
        use std::borrow::Cow;
        match self {
            Event::Imported(i) => Cow::Owned(i.applied.to_event()),
            e => Cow::Borrowed(e),
        }
    }
}

/// What importing a published event decided here. Its own enum (not an
/// [`Event`]), so an imported event cannot nest another: decoding stays
/// bounded in depth whatever the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    Captured(Box<Captured>),
    LineageMigrated(Box<LineageMigrated>),
    Forgotten(Box<Forgotten>),
}

impl Applied {
    /// The local event this decision applies as.
    pub fn to_event(&self) -> Event {
        match self {
            Applied::Captured(c) => Event::Captured(c.clone()),
            Applied::LineageMigrated(m) => Event::LineageMigrated(m.clone()),
            Applied::Forgotten(f) => Event::Forgotten(f.clone()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Applied::Captured(_) => "captured",
            Applied::LineageMigrated(_) => "lineage-migrated",
            Applied::Forgotten(_) => "forgotten",
        }
    }
}

/// An event another machine published (`abcd sync`), as imported here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imported {
    /// The publishing machine's id (`$ABCD_HOME/machine-id` over there).
    pub origin: String,
    /// SHA-256 (hex) of the published event's canonical encoding: the
    /// event id every machine knows it by.
    pub event_id: String,
    /// What importing decided here, applied like a local event: a
    /// `Captured` (stored under the publisher's record name with the
    /// supersession decided against the live records here, or
    /// `AlreadyStored` when a live record holds it), a `LineageMigrated`,
    /// or a `Forgotten` (the values, and the rewrites of the bodies held
    /// here).
    pub applied: Applied,
    /// For an imported forget: the publisher's rewrites of bodies not held
    /// here, kept so a later import that names one of them resolves it.
    pub forwards: Vec<Rewrite>,
}

/// A staged transcript. Everything the harness supplied beyond the two ids
/// (agent type, parent, tool-use id, depth, source path, cwd) is in the
/// metadata blob `staging/<stem>.meta.json`, named here by digest: it
/// enters the journal only after redaction, inside the record `Captured`
/// names. The ids passed the id rule and the secret check before staging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// File stem of the blob and its sidecar: `<stamp>-<session>[-agent-<agent>]`.
    pub stem: String,
    pub raw_sha256: String,
    pub bytes: u64,
    pub session_id: String,
    pub agent_id: Option<String>,
    /// SHA-256 of the metadata blob (empty: none was written, as for a blob
    /// adopted without one).
    pub meta_sha256: String,
    pub staged_at_ns: u64,
    /// True when the blob was found on disk without a journal entry (a crash
    /// between writing it and journaling it, or an older binary) and adopted.
    pub adopted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restaged {
    pub stem: String,
    pub raw_sha256: String,
    pub bytes: u64,
    pub replaced_sha256: String,
    pub replaced_bytes: u64,
    /// The metadata blob written with these bytes (empty: unchanged).
    pub meta_sha256: String,
    pub staged_at_ns: u64,
    pub adopted: bool,
}

/// A record file (frontmatter and body, exactly the bytes of
/// `records/<name>`) stored as `bodies/<sha256>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyRef {
    pub sha256: String,
    pub bytes: u64,
}

/// The outcome a capture decided under the store lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaptureOutcome {
    /// A new record was written; `supersedes` lists the live records of the
    /// same (session, agent, kind) whose bodies are byte-prefixes of this one
    /// and are removed.
    Stored {
        record_name: String,
        body: BodyRef,
        supersedes: Vec<String>,
    },
    /// The same source (or a longer re-arrival) is already stored: nothing
    /// written.
    AlreadyStored { record_name: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    pub outcome: CaptureOutcome,
    /// The staged entry this capture retires (its blob and sidecar are
    /// removed), with the digest of the staged bytes it read. `None` for a
    /// manual `history capture`.
    pub retires: Option<StagedRef>,
    /// The source file had grown by a byte-prefix extension and the longer
    /// bytes were captured.
    pub extended: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedRef {
    pub stem: String,
    pub raw_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantined {
    pub stem: String,
    pub raw_sha256: String,
    /// Why redaction refused; names kinds, never secret bytes.
    pub reason: String,
    pub quarantined_at_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discarded {
    pub stem: String,
    pub place: BlobPlace,
    pub bytes: u64,
}

/// A record rewritten with new lineage: its new file is `body`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageMigrated {
    pub record_name: String,
    pub body: BodyRef,
}

/// The directory a directory lane stands for. `directory` is the one
/// free-text field an event carries: the canonical path after the two-stage
/// redaction a record's lineage scalars get (home directory, user name and
/// every secret rule replaced by placeholders), never the path as typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryNamed {
    pub directory: String,
    pub named_at_ns: u64,
}

/// What left a directory lane for the repository lane `to_root`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneMoved {
    /// The repository lane's key (a root commit).
    pub to_root: String,
    /// Record names removed from this lane (each stored, or already
    /// stored, in `to_root`'s lane under the same idempotency key).
    pub records: Vec<String>,
    /// Staged stems retired here (each staged in `to_root`'s lane).
    pub staged: Vec<String>,
    /// Session notes removed here (each noted in `to_root`'s lane).
    pub sessions: Vec<String>,
    pub moved_at_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionNoted {
    pub session_id: String,
    pub noted_at_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapSighted {
    pub hook_event_name: String,
    pub seen_at_ns: u64,
}

/// A forgotten value, by digest: its length, SHA-256 and a 64-bit rolling
/// hash (the prefilter that lets a later capture find it again without the
/// value). Never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueDigest {
    pub len: u32,
    pub sha256: String,
    pub rolling: u64,
}

/// One body a forget replaced: every event that names `from` reads `to`
/// from then on (replay included); `to: None` when the record is removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewrite {
    pub from: String,
    pub to: Option<BodyRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forgotten {
    pub values: Vec<ValueDigest>,
    /// Every body that held a value (live and superseded) or belonged to a
    /// removed record.
    pub rewrites: Vec<Rewrite>,
    /// Live records rewritten in place (their new file is their body's `to`).
    pub rewritten_records: Vec<String>,
    /// Live records removed whole (`--record`).
    pub removed_records: Vec<String>,
    pub forgotten_at_ns: u64,
}

#[derive(Debug, Error)]
pub enum EventError {
    #[error("event payload could not be decoded ({0}); the journal frame is intact but its content is not an abcd event")]
    Decode(String),
    #[error("event schema {found} is newer than this binary understands ({EVENT_SCHEMA}); upgrade abcd before touching this store")]
    NewerSchema { found: u16 },
    #[error("event schema {found} is from an older abcd; run `abcd journal upgrade` (any verb that opens the store does it)")]
    OlderSchema { found: u16 },
    #[error("event could not be encoded: {0}")]
    Encode(String),
}

fn options() -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_EVENT_BYTES)
        .reject_trailing_bytes()
}

/// Encodes an event in the current schema.
pub fn encode(at_ns: u64, event: &Event) -> Result<Vec<u8>, EventError> {
    use bincode::Options;
    // Serialize a borrowed view so the caller keeps ownership of big bodies.
    #[derive(Serialize)]
    struct EnvelopeRef<'a> {
        schema: u16,
        at_ns: u64,
        event: &'a Event,
    }
    options()
        .serialize(&EnvelopeRef {
            schema: EVENT_SCHEMA,
            at_ns,
            event,
        })
        .map_err(|e| EventError::Encode(e.to_string()))
}

/// Decodes a journal payload. Never panics on arbitrary input (fuzzed).
pub fn decode(payload: &[u8]) -> Result<Envelope, EventError> {
    use bincode::Options;
    // The schema is the first two bytes; check it before trusting the layout.
    if payload.len() >= 2 {
        let found = u16::from_le_bytes([payload[0], payload[1]]);
        if found > EVENT_SCHEMA {
            return Err(EventError::NewerSchema { found });
        }
        if found == v1::SCHEMA {
            return Err(EventError::OlderSchema { found });
        }
        if found != EVENT_SCHEMA {
            return Err(EventError::Decode(format!("unknown event schema {found}")));
        }
    }
    options()
        .deserialize::<Envelope>(payload)
        .map_err(|e| EventError::Decode(e.to_string()))
}

/// The fuzz entry point: decoding arbitrary bytes must never panic, and an
/// event that decodes must re-encode to the same bytes.
pub fn fuzz_decode(data: &[u8]) {
    if let Ok(env) = decode(data) {
        let again = encode(env.at_ns, &env.event).expect("a decoded event re-encodes");
        // Canonical encoding: a decodable payload is its own encoding.
        assert_eq!(again, data, "event encoding is not canonical");
    }
}

/// Schema 1, frozen: what the journal held before `bodies/` existed (record
/// bodies and the harness's lineage scalars inside the events). Decoded only
/// by the upgrade (`crate::upgrade`); never written. The layouts below are
/// the wire format of every v1 journal: never reorder or retype a field.
pub mod v1 {
    use serde::{Deserialize, Serialize};

    use super::{options, BlobPlace, EventError, GapSighted, Quarantined, SessionNoted, StagedRef};
    use crate::lineage::{LineageSource, SpawnAttribution};

    pub const SCHEMA: u16 = 1;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Envelope {
        pub schema: u16,
        pub at_ns: u64,
        pub event: Event,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Event {
        Staged(Staged),
        Restaged(Restaged),
        Captured(Box<Captured>),
        Quarantined(Quarantined),
        Discarded(Discarded),
        LineageMigrated(Box<LineageMigrated>),
        SessionNoted(SessionNoted),
        SubagentGapSighted(GapSighted),
    }

    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Lineage {
        pub session_id: String,
        pub agent_id: Option<String>,
        pub parent_agent_id: Option<String>,
        pub agent_type: Option<String>,
        pub spawn_depth: u32,
        pub spawn_tool_use_id: Option<String>,
        pub lineage_source: Option<LineageSource>,
        pub spawn_attribution: Option<SpawnAttribution>,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Staged {
        pub stem: String,
        pub raw_sha256: String,
        pub bytes: u64,
        pub lineage: Lineage,
        pub source_path: Option<String>,
        pub staged_at_ns: u64,
        pub adopted: bool,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Restaged {
        pub stem: String,
        pub raw_sha256: String,
        pub bytes: u64,
        pub replaced_sha256: String,
        pub replaced_bytes: u64,
        pub source_path: Option<String>,
        pub staged_at_ns: u64,
        pub adopted: bool,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RecordMeta {
        pub schema: u32,
        pub session_id: String,
        pub root_commit: String,
        pub captured_at_ns: u64,
        pub source_kind: String,
        pub source_tool: Option<String>,
        pub source_sha256: String,
        pub redacted_secrets: u64,
        pub redacted_home_paths: u64,
        pub agent_id: Option<String>,
        pub parent_agent_id: Option<String>,
        pub agent_type: Option<String>,
        pub spawn_tool_use_id: Option<String>,
        pub lineage_source: Option<LineageSource>,
        pub spawn_attribution: Option<SpawnAttribution>,
        pub adopted_project: Option<String>,
        pub spawn_depth: u32,
        pub context_stamps: Vec<String>,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum CaptureOutcome {
        Stored {
            record_name: String,
            meta: Box<RecordMeta>,
            body: String,
            supersedes: Vec<String>,
        },
        AlreadyStored {
            record_name: String,
        },
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Captured {
        pub outcome: CaptureOutcome,
        pub retires: Option<StagedRef>,
        pub extended: bool,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Discarded {
        pub stem: String,
        pub place: BlobPlace,
        pub bytes: u64,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct LineageMigrated {
        pub record_name: String,
        pub meta: RecordMeta,
    }

    /// Decodes a schema-1 payload.
    pub fn decode(payload: &[u8]) -> Result<Envelope, EventError> {
        use bincode::Options;
        if payload.len() >= 2 && u16::from_le_bytes([payload[0], payload[1]]) != SCHEMA {
            return Err(EventError::Decode("not a schema-1 event".into()));
        }
        options()
            .deserialize::<Envelope>(payload)
            .map_err(|e| EventError::Decode(e.to_string()))
    }

    /// Encodes a schema-1 event: only the tests that build v1 journals use it.
    pub fn encode(at_ns: u64, event: &Event) -> Result<Vec<u8>, EventError> {
        use bincode::Options;
        options()
            .serialize(&Envelope {
                schema: SCHEMA,
                at_ns,
                event: event.clone(),
            })
            .map_err(|e| EventError::Encode(e.to_string()))
    }
}
