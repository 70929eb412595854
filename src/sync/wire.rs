//! What travels: the sync format (version 1) as bytes.
//!
//! Owns: the ref names (`refs/abcd/v1/<root-sha>/<machine-id>`), the tree
//! layout (`FORMAT`, `events/<segment>`, `bodies/<2 hex>/<sha256>`), the
//! segment encoding (a magic line, then length-prefixed canonical event
//! encodings), the event id (SHA-256 of that encoding), which local events
//! travel and in what normalised form, and the publisher's commit message.
//! No I/O.

use abcd_journal::EventId;
use sha2::{Digest, Sha256};

use crate::event::{self, Applied, CaptureOutcome, Captured, Envelope, Event};

/// The sync format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Contents of the `FORMAT` file at the top of every published tree.
pub const FORMAT_FILE: &str = "abcd-sync 1\n";
/// First bytes of a segment.
pub const SEGMENT_MAGIC: &[u8] = b"abcd-seg 1\n";
/// Cap on one segment blob (events are digests and names: ~300 bytes).
pub const SEGMENT_CAP: u64 = 256 << 20;
/// Cap on one published event.
pub const EVENT_CAP: u32 = 1 << 20;

/// The namespace of one repository on a remote.
pub fn ref_prefix(root_sha: &str) -> String {
    format!("refs/abcd/v{FORMAT_VERSION}/{root_sha}/")
}

/// Where this build keeps what it fetched, in the private repository.
pub fn tracking_prefix(root_sha: &str) -> String {
    format!("refs/abcd-remote/v{FORMAT_VERSION}/{root_sha}/")
}

/// A machine id: 32 lowercase hex digits.
pub fn is_machine_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The path of a body in a published tree.
pub fn body_path(sha256: &str) -> String {
    format!("bodies/{}/{sha256}", sha256.get(..2).unwrap_or("00"))
}

/// The name of segment `n` (fixed width, so names sort by number).
pub fn segment_name(n: u64) -> String {
    format!("{n:010}")
}

/// The sync format version a ref under `refs/abcd/` belongs to (`v<N>/…`).
pub fn ref_version(refname: &str) -> Option<u32> {
    refname
        .strip_prefix("refs/abcd/v")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The id every machine knows a published event by.
pub fn event_id(encoded: &[u8]) -> String {
    hex::encode(Sha256::digest(encoded))
}

/// The local journal id of an imported event: the first 16 bytes of its
/// event id (so the journal itself refuses it twice).
pub fn journal_id(event_id: &str) -> EventId {
    let mut id = [0u8; 16];
    if let Ok(b) = hex::decode(event_id) {
        for (d, s) in id.iter_mut().zip(b) {
            *d = s;
        }
    }
    EventId(id)
}

/// What a local event publishes, if anything: a stored record (without the
/// staged entry it retired: staging never travels), a lineage migration,
/// a forget, or an imported forget that rewrote bodies held here. Never
/// staging, quarantine, discards, session notes, gap sightings, already-
/// stored captures, or another machine's events.
pub fn publishable(ev: &Event) -> Option<Event> {
    match ev {
        Event::Captured(c) => match &c.outcome {
            CaptureOutcome::Stored { .. } => Some(Event::Captured(Box::new(Captured {
                outcome: c.outcome.clone(),
                retires: None,
                extended: c.extended,
            }))),
            CaptureOutcome::AlreadyStored { .. } => None,
        },
        Event::LineageMigrated(_) | Event::Forgotten(_) => Some(ev.clone()),
        Event::Imported(i) => match &i.applied {
            Applied::Forgotten(f) if !f.rewrites.is_empty() => Some(Event::Forgotten(f.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// Encodes events as one segment.
pub fn encode_segment(events: &[Vec<u8>]) -> Vec<u8> {
    let mut out = SEGMENT_MAGIC.to_vec();
    for e in events {
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// Why a segment could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("a published segment does not start with {:?} (a newer sync format, or damage)", String::from_utf8_lossy(SEGMENT_MAGIC).trim())]
    Magic,
    #[error("a published segment is cut short at byte {0}")]
    Truncated(usize),
    #[error("a published event is {0} bytes, over the cap")]
    TooBig(u32),
    #[error(transparent)]
    Event(#[from] event::EventError),
}

/// One event of a segment: its id, encoding and decoded envelope.
#[derive(Debug, Clone)]
pub struct Published {
    pub id: String,
    pub env: Envelope,
}

/// Decodes a segment. A newer event schema is refused with its version.
pub fn decode_segment(bytes: &[u8]) -> Result<Vec<Published>, WireError> {
    let rest = bytes.strip_prefix(SEGMENT_MAGIC).ok_or(WireError::Magic)?;
    let mut at = 0usize;
    let mut out = Vec::new();
    while at < rest.len() {
        let len_bytes = rest
            .get(at..at + 4)
            .ok_or(WireError::Truncated(at + SEGMENT_MAGIC.len()))?;
        let len = u32::from_le_bytes(len_bytes.try_into().expect("four bytes"));
        if len > EVENT_CAP {
            return Err(WireError::TooBig(len));
        }
        let payload = rest
            .get(at + 4..at + 4 + len as usize)
            .ok_or(WireError::Truncated(at + SEGMENT_MAGIC.len()))?;
        let env = event::decode(payload)?;
        out.push(Published {
            id: event_id(payload),
            env,
        });
        at += 4 + len as usize;
    }
    Ok(out)
}

/// The fuzz entry point: reading a segment never panics, and an event
/// that decodes re-encodes to the bytes its id was taken from.
pub fn fuzz_segment(data: &[u8]) {
    if let Ok(events) = decode_segment(data) {
        for p in events {
            let again =
                event::encode(p.env.at_ns, &p.env.event).expect("a decoded event re-encodes");
            assert_eq!(
                event_id(&again),
                p.id,
                "segment event encoding is not canonical"
            );
        }
    }
}

/// The publisher's commit message: the format, the machine, and how far
/// into its own journal it has published (`seq offset hash journal-id`),
/// so the ref itself says where the next publish starts.
pub fn commit_message(machine: &str, pos: Option<&PublishedUpTo>, segments: u64) -> String {
    let mut m = format!("abcd sync {FORMAT_VERSION}\n\nmachine: {machine}\nsegments: {segments}\n");
    if let Some(p) = pos {
        m.push_str(&format!(
            "published: {} {} {} {}\n",
            p.seq,
            p.offset,
            hex::encode(p.hash),
            hex::encode(p.journal_id)
        ));
    }
    m
}

/// Where a publisher stopped in its own journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedUpTo {
    pub seq: u64,
    pub offset: u64,
    pub hash: [u8; 32],
    pub journal_id: [u8; 16],
}

/// Reads [`commit_message`] back: (segments, published position).
pub fn parse_commit_message(msg: &str) -> (u64, Option<PublishedUpTo>) {
    let mut segments = 0;
    let mut pos = None;
    for line in msg.lines() {
        if let Some(v) = line.strip_prefix("segments: ") {
            segments = v.trim().parse().unwrap_or(0);
        }
        if let Some(v) = line.strip_prefix("published: ") {
            let parts: Vec<&str> = v.split_whitespace().collect();
            if let [seq, offset, hash, jid] = parts[..] {
                let hash = hex::decode(hash).ok().and_then(|h| h.try_into().ok());
                let jid = hex::decode(jid).ok().and_then(|h| h.try_into().ok());
                if let (Ok(seq), Ok(offset), Some(hash), Some(journal_id)) =
                    (seq.parse(), offset.parse(), hash, jid)
                {
                    pos = Some(PublishedUpTo {
                        seq,
                        offset,
                        hash,
                        journal_id,
                    });
                }
            }
        }
    }
    (segments, pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{BodyRef, Forgotten, SessionNoted};

    fn stored() -> Event {
        Event::Captured(Box::new(Captured {
            outcome: CaptureOutcome::Stored {
                record_name: "r.md".into(),
                body: BodyRef {
                    sha256: "a".repeat(64),
                    bytes: 3,
                },
                supersedes: vec![],
            },
            retires: Some(crate::event::StagedRef {
                stem: "stem".into(),
                raw_sha256: "b".repeat(64),
            }),
            extended: false,
        }))
    }

    #[test]
    fn segments_round_trip_and_ids_are_content_digests() {
        let a = event::encode(1, &publishable(&stored()).unwrap()).unwrap();
        let b = event::encode(
            2,
            &Event::Forgotten(Box::new(Forgotten {
                values: vec![],
                rewrites: vec![],
                rewritten_records: vec![],
                removed_records: vec![],
                forgotten_at_ns: 2,
            })),
        )
        .unwrap();
        let seg = encode_segment(&[a.clone(), b.clone()]);
        let back = decode_segment(&seg).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].id, event_id(&a));
        assert_eq!(back[1].id, event_id(&b));
        assert_ne!(back[0].id, back[1].id);
        assert!(decode_segment(&seg[..seg.len() - 1]).is_err());
        assert!(decode_segment(b"nope").is_err());
    }

    #[test]
    fn staging_never_travels() {
        let Some(Event::Captured(c)) = publishable(&stored()) else {
            panic!("a stored record travels");
        };
        assert!(
            c.retires.is_none(),
            "the staged entry it retired stays home"
        );
        assert!(publishable(&Event::SessionNoted(SessionNoted {
            session_id: "s".into(),
            noted_at_ns: 1
        }))
        .is_none());
    }

    proptest::proptest! {
        /// Whatever a remote holds, reading it never panics, and a commit
        /// message always parses to something.
        #[test]
        fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut seg = SEGMENT_MAGIC.to_vec();
            seg.extend_from_slice(&tail);
            let _ = decode_segment(&seg);
            let _ = decode_segment(&tail);
            let _ = parse_commit_message(&String::from_utf8_lossy(&tail));
            let _ = ref_version(&String::from_utf8_lossy(&tail));
        }
    }

    #[test]
    fn commit_message_round_trips() {
        let p = PublishedUpTo {
            seq: 7,
            offset: 900,
            hash: [3; 32],
            journal_id: [4; 16],
        };
        let m = commit_message(&"c".repeat(32), Some(&p), 5);
        assert_eq!(parse_commit_message(&m), (5, Some(p)));
        assert_eq!(ref_version("refs/abcd/v2/x/y"), Some(2));
    }
}
