//! The event model: every state change of a store, as it is written to the
//! journal.
//!
//! Owns: the versioned envelope, the event enum and its bincode encoding.
//! Never does I/O and never holds raw transcript bytes: a staged transcript is
//! named by its SHA-256 and lives as a 0600 blob under `staging/` (or
//! `quarantine/`). What an event may carry: identifiers, lineage scalars as
//! the harness delivered them (validated: id charset, no line breaks), the
//! source path, sizes, digests, times, and — only in `Captured` — the
//! *redacted* record body and its redacted lineage.
//!
//! Decisions (is this capture a no-op? which records does it supersede? does
//! it retire a staged entry?) are made by the writer under the store lock and
//! recorded in the event, so applying an event never decides anything and a
//! replay into an empty directory reproduces every projection byte for byte.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::lineage::Lineage;
use crate::record::RecordMeta;

/// Version of the envelope and event encoding. Bumped on any change to the
/// bincode layout; a reader refuses a newer version rather than misreading it.
pub const EVENT_SCHEMA: u16 = 1;

/// Upper bound on a decoded event, so a hostile or damaged payload cannot make
/// bincode allocate without limit. A record body is at most 64 MiB of
/// transcript; redaction placeholders can lengthen it a little.
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
    /// A record's lineage rewritten in place (the composite-id repair).
    /// Nothing produces it yet: the migrate verb that will is not built;
    /// replay already applies it.
    LineageMigrated(Box<LineageMigrated>),
    /// A hook saw this session run against this store.
    SessionNoted(SessionNoted),
    /// The harness fired SubagentStop without an agent_transcript_path.
    SubagentGapSighted(GapSighted),
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// File stem of the blob and its sidecar: `<stamp>-<session>[-agent-<agent>]`.
    pub stem: String,
    pub raw_sha256: String,
    pub bytes: u64,
    pub lineage: Lineage,
    /// The harness file the bytes came from (re-read at drain time).
    pub source_path: Option<String>,
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
    pub source_path: Option<String>,
    pub staged_at_ns: u64,
    pub adopted: bool,
}

/// The outcome a capture decided under the store lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaptureOutcome {
    /// A new record was written; `supersedes` lists the live records of the
    /// same (session, agent, kind) whose bodies are byte-prefixes of this one
    /// and are removed.
    Stored {
        record_name: String,
        meta: Box<RecordMeta>,
        body: String,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageMigrated {
    pub record_name: String,
    pub meta: RecordMeta,
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

#[derive(Debug, Error)]
pub enum EventError {
    #[error("event payload could not be decoded ({0}); the journal frame is intact but its content is not an abcd event")]
    Decode(String),
    #[error("event schema {found} is newer than this binary understands ({EVENT_SCHEMA}); upgrade abcd before touching this store")]
    NewerSchema { found: u16 },
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
