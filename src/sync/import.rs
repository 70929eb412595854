//! Importing another machine's published events into this store.
//!
//! Owns: the decision, under the store lock, of what one published event
//! does here, journaled as an `Imported` event under a journal id derived
//! from the event id (so a re-pull, or a re-run after a crash, is a no-op).
//!
//! The determinism rule (what makes `records/` a function of the *set* of
//! events, whatever order they arrived in): within one stream (session,
//! agent, kind), a record is live unless another record's body strictly
//! extends it, or holds the identical body under a smaller record name; a
//! record name held by two different files keeps the file with the
//! smaller SHA-256. A local capture already obeys it (a longer capture
//! supersedes, a shorter or identical one is not stored), so deciding each
//! imported record against the live records here yields the same live set
//! on every machine once all have exchanged everything.
//!
//! Forgets first: a published forget is applied before any record event
//! of the same pull, every body held here that holds a forgotten value is
//! rewritten (by digest: the value never travels), and every imported body
//! is redacted by the forgotten set before it is stored.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::body;
use crate::corpus::{CorpusError, Locked};
use crate::event::{
    Applied, BodyRef, CaptureOutcome, Captured, Event, Forgotten, Imported, LineageMigrated,
    Rewrite, ValueDigest,
};
use crate::forgotten;
use crate::fsutil;
use crate::projection::{self, stream_key, RECORD_READ_CAP};
use crate::record;

use super::wire;
use super::SyncError;

/// Where the bytes of a published body come from (the publisher's tree).
pub trait BodySource {
    /// The body `sha256` as the publisher `origin` holds it, proven against
    /// its digest; `None` when its tree does not hold it.
    fn body(&mut self, origin: &str, sha256: &str) -> Result<Option<Vec<u8>>, SyncError>;
}

/// What one import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event was journaled now.
    New,
    /// Its id was already in the journal (a re-pull).
    Known,
}

/// Redacts every forgotten value (found by digest) from a record file.
pub fn redact_file(bytes: Vec<u8>, set: &[ValueDigest]) -> Vec<u8> {
    if set.is_empty() {
        return bytes;
    }
    match String::from_utf8(bytes) {
        Ok(text) => forgotten::redact_forgotten(&text, set).0.into_bytes(),
        Err(e) => e.into_bytes(),
    }
}

fn is_record_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= crate::naming::MAX_NAME_BYTES
        && name.ends_with(".md")
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~' | b':'))
}

fn append(
    locked: &Locked<'_>,
    origin: &str,
    event_id: &str,
    applied: Applied,
    forwards: Vec<Rewrite>,
) -> Result<Outcome, SyncError> {
    let ev = Event::Imported(Box::new(Imported {
        origin: origin.to_owned(),
        event_id: event_id.to_owned(),
        applied,
        forwards,
    }));
    match locked.append_with_id(&ev, wire::journal_id(event_id)) {
        Ok(_) => Ok(Outcome::New),
        Err(e) if e.is_unprojected() => Ok(Outcome::New),
        Err(e) => Err(e.into()),
    }
}

/// Whether the journal already holds this imported event.
pub fn known(locked: &Locked<'_>, event_id: &str) -> Result<bool, SyncError> {
    Ok(locked
        .corpus
        .journal
        .contains(&wire::journal_id(event_id))
        .map_err(CorpusError::from)?
        .is_some())
}

/// Every body rewrite this store knows: its own forgets' and the ones
/// imported forgets kept for bodies not held here.
pub fn forwards(locked: &Locked<'_>) -> Result<HashMap<String, Option<BodyRef>>, SyncError> {
    let journal = &locked.corpus.journal;
    let mut map = HashMap::new();
    for frame in journal
        .read_from(&journal.start())
        .map_err(CorpusError::from)?
    {
        let frame = frame.map_err(CorpusError::from)?;
        if frame.kind != abcd_journal::FrameKind::Event {
            continue;
        }
        let Ok(env) = crate::event::decode(&frame.payload) else {
            continue;
        };
        if let Event::Imported(i) = &env.event {
            for r in &i.forwards {
                map.insert(r.from.clone(), r.to.clone());
            }
        }
        if let Event::Forgotten(f) = env.event.effective().as_ref() {
            for r in &f.rewrites {
                map.insert(r.from.clone(), r.to.clone());
            }
        }
    }
    Ok(map)
}

/// Resolves a published body: from the publisher's tree, else through the
/// rewrites known here (a forget replaced or removed it). `None`: removed.
fn resolve_body(
    src: &mut dyn BodySource,
    locked: &Locked<'_>,
    fwd: &mut Option<HashMap<String, Option<BodyRef>>>,
    origin: &str,
    sha: &str,
) -> Result<Option<Vec<u8>>, SyncError> {
    if fwd.is_none() {
        *fwd = Some(forwards(locked)?);
    }
    let map = fwd.as_ref().expect("loaded above");
    let mut cur = sha.to_owned();
    // A rewrite known here wins over the publisher's copy: it may still
    // hold what was forgotten (it has not pulled the forget yet).
    for _ in 0..=map.len() {
        match map.get(&cur) {
            Some(Some(to)) => cur = to.sha256.clone(),
            Some(None) => return Ok(None),
            None => break,
        }
    }
    if !body::is_digest(&cur) {
        return Err(SyncError::Malformed {
            origin: origin.to_owned(),
            why: format!("a forget names {cur:?} as a body digest"),
        });
    }
    if let Ok(b) = body::read(locked.lane(), &cur) {
        return Ok(Some(b));
    }
    if let Some(b) = src.body(origin, &cur)? {
        return Ok(Some(b));
    }
    if cur != sha {
        if let Some(b) = src.body(origin, sha)? {
            return Ok(Some(b));
        }
    }
    Err(SyncError::MissingBody {
        origin: origin.to_owned(),
        sha256: sha.to_owned(),
    })
}

/// Record imports decided but not yet journaled: one batch, appended
/// atomically by [`Batch::flush`]. Each decision sees the live records as
/// the projections hold them *plus* the decisions before it in the batch,
/// so a batch decides exactly what one-by-one imports would.
#[derive(Default)]
pub struct Batch {
    live: HashMap<String, Vec<u8>>,
    streams: HashMap<String, Vec<String>>,
    dropped: HashSet<String>,
    ids: HashSet<String>,
    events: Vec<(Event, abcd_journal::EventId)>,
}

impl Batch {
    fn read_live(&self, lane: &crate::store::Lane, n: &str) -> Result<Option<Vec<u8>>, SyncError> {
        if self.dropped.contains(n) {
            return Ok(None);
        }
        if let Some(b) = self.live.get(n) {
            return Ok(Some(b.clone()));
        }
        match fsutil::read_private(&lane.records_dir().join(n), RECORD_READ_CAP) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(SyncError::from(CorpusError::from(e))),
        }
    }

    fn push(&mut self, origin: &str, event_id: &str, applied: Applied) -> Outcome {
        self.ids.insert(event_id.to_owned());
        self.events.push((
            Event::Imported(Box::new(Imported {
                origin: origin.to_owned(),
                event_id: event_id.to_owned(),
                applied,
                forwards: Vec::new(),
            })),
            wire::journal_id(event_id),
        ));
        Outcome::New
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Makes the batch's bodies durable, then appends its events as one
    /// atomic batch and applies them.
    pub fn flush(&mut self, locked: &Locked<'_>) -> Result<(), SyncError> {
        if self.events.is_empty() {
            return Ok(());
        }
        body::sync(locked.lane()).map_err(CorpusError::from)?;
        match locked.append_batch_with_ids(&self.events) {
            Ok(_) => {}
            Err(e) if e.is_unprojected() => {}
            Err(e) => return Err(e.into()),
        }
        *self = Batch::default();
        Ok(())
    }
}

/// Decides one published record event (a stored capture or a lineage
/// migration) into `batch`. Caller holds the lock and has imported every
/// forget of the pull first.
pub fn import_record(
    locked: &Locked<'_>,
    batch: &mut Batch,
    src: &mut dyn BodySource,
    fwd: &mut Option<HashMap<String, Option<BodyRef>>>,
    origin: &str,
    published: &wire::Published,
) -> Result<Outcome, SyncError> {
    if batch.ids.contains(&published.id) || known(locked, &published.id)? {
        return Ok(Outcome::Known);
    }
    let (name, body_ref, migration) = match &published.env.event {
        Event::Captured(c) => match &c.outcome {
            CaptureOutcome::Stored {
                record_name, body, ..
            } => (record_name, body, false),
            CaptureOutcome::AlreadyStored { .. } => return Ok(Outcome::Known),
        },
        Event::LineageMigrated(m) => (&m.record_name, &m.body, true),
        _ => return Ok(Outcome::Known),
    };
    if !is_record_name(name) || !body::is_digest(&body_ref.sha256) {
        return Err(SyncError::Malformed {
            origin: origin.to_owned(),
            why: format!("record name {name:?} or body digest is malformed"),
        });
    }
    let nothing = |n: &str| {
        Applied::Captured(Box::new(Captured {
            outcome: CaptureOutcome::AlreadyStored {
                record_name: n.to_owned(),
            },
            retires: None,
            extended: false,
        }))
    };
    let lane = locked.lane();
    let Some(bytes) = resolve_body(src, locked, fwd, origin, &body_ref.sha256)? else {
        // A forget removed it: nothing to store.
        return Ok(batch.push(origin, &published.id, nothing(name)));
    };
    let set = projection::read_forgotten(lane);
    let bytes = redact_file(bytes, &set);
    let (meta, text) = record::parse(&bytes).map_err(|e| SyncError::Malformed {
        origin: origin.to_owned(),
        why: format!("record {name} does not parse: {e}"),
    })?;
    if meta.root_commit != lane.root_sha {
        return Err(SyncError::Malformed {
            origin: origin.to_owned(),
            why: format!("record {name} belongs to another repository"),
        });
    }
    let agent = meta.lineage.agent_id.as_deref();
    let stream = stream_key(&meta.lineage.session_id, agent, &meta.source_kind);
    let sha = fsutil::sha256_hex(&bytes);
    if let Some(live) = batch.read_live(lane, name)? {
        // The same name is live here: the same file, or a collision that
        // keeps the smaller digest (a migration replaces it).
        let live_sha = fsutil::sha256_hex(&live);
        if live_sha == sha || (!migration && live_sha < sha) {
            return Ok(batch.push(origin, &published.id, nothing(name)));
        }
        let body = body::put_unsynced(lane, &bytes).map_err(CorpusError::from)?;
        batch.live.insert(name.clone(), bytes.clone());
        let applied = Applied::LineageMigrated(Box::new(LineageMigrated {
            record_name: name.clone(),
            body,
        }));
        return Ok(batch.push(origin, &published.id, applied));
    }
    if migration {
        // A migration of a record not live here changes nothing.
        return Ok(batch.push(origin, &published.id, nothing(name)));
    }
    let mut priors = locked.index().stream_records(&stream)?;
    for n in batch.streams.get(&stream).into_iter().flatten() {
        if !priors.contains(n) {
            priors.push(n.clone());
        }
    }
    let mut supersedes = Vec::new();
    for prior in priors {
        let Some(pb) = batch.read_live(lane, &prior)? else {
            continue;
        };
        let Ok((_, prior_text)) = record::parse(&pb) else {
            continue;
        };
        let dominated = if prior_text == text {
            prior.as_str() < name.as_str()
        } else {
            prior_text.starts_with(text)
        };
        if dominated {
            return Ok(batch.push(origin, &published.id, nothing(&prior)));
        }
        if text.starts_with(prior_text) {
            supersedes.push(prior);
        }
    }
    let body = body::put_unsynced(lane, &bytes).map_err(CorpusError::from)?;
    for s in &supersedes {
        batch.dropped.insert(s.clone());
        batch.live.remove(s);
    }
    batch.dropped.remove(name);
    batch.live.insert(name.clone(), bytes.clone());
    batch.streams.entry(stream).or_default().push(name.clone());
    let applied = Applied::Captured(Box::new(Captured {
        outcome: CaptureOutcome::Stored {
            record_name: name.clone(),
            body,
            supersedes,
        },
        retires: None,
        extended: false,
    }));
    Ok(batch.push(origin, &published.id, applied))
}

/// What importing a forget changed here.
#[derive(Debug, Clone, Default)]
pub struct ForgetApplied {
    pub outcome: Option<Outcome>,
    pub bodies: u64,
}

/// Imports one published forget: the values join the forgotten set, every
/// body held here that holds one (or that the forget removed) is rewritten
/// or removed, the old bodies are deleted. Caller holds the lock.
pub fn import_forget(
    locked: &Locked<'_>,
    src: &mut dyn BodySource,
    origin: &str,
    published: &wire::Published,
    f: &Forgotten,
) -> Result<ForgetApplied, SyncError> {
    if known(locked, &published.id)? {
        return Ok(ForgetApplied {
            outcome: Some(Outcome::Known),
            bodies: 0,
        });
    }
    let lane = locked.lane();
    let names = body::names(&locked.corpus.journal).map_err(CorpusError::from)?;
    let theirs: HashMap<&str, &Option<BodyRef>> = f
        .rewrites
        .iter()
        .map(|r| (r.from.as_str(), &r.to))
        .collect();
    let removed_names: BTreeSet<&str> = f.removed_records.iter().map(String::as_str).collect();
    let live: BTreeSet<String> = std::fs::read_dir(lane.records_dir())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut rewrites: Vec<Rewrite> = Vec::new();
    let mut new_bodies: Vec<Vec<u8>> = Vec::new();
    let mut rewritten: BTreeSet<String> = BTreeSet::new();
    let mut removed: BTreeSet<String> = BTreeSet::new();
    let shas: BTreeMap<&String, &BTreeSet<String>> = names.bodies.iter().collect();
    for (sha, recs) in shas {
        let gone = matches!(theirs.get(sha.as_str()), Some(None))
            || recs.iter().any(|n| removed_names.contains(n.as_str()));
        if gone {
            rewrites.push(Rewrite {
                from: sha.clone(),
                to: None,
            });
            removed.extend(recs.iter().filter(|n| live.contains(*n)).cloned());
            continue;
        }
        let new = match theirs.get(sha.as_str()) {
            // The publisher's rewrite, byte for byte, when its tree has it.
            Some(Some(to)) => match src.body(origin, &to.sha256)? {
                Some(b) => Some(b),
                None => body::read(lane, sha)
                    .ok()
                    .map(|b| redact_file(b, &f.values)),
            },
            _ => match body::read(lane, sha) {
                Ok(b) if !forgotten::find(&b, &f.values).is_empty() => {
                    Some(redact_file(b, &f.values))
                }
                _ => None,
            },
        };
        let Some(new) = new else { continue };
        let to = BodyRef {
            sha256: fsutil::sha256_hex(&new),
            bytes: new.len() as u64,
        };
        if to.sha256 == **sha {
            continue;
        }
        rewrites.push(Rewrite {
            from: sha.clone(),
            to: Some(to),
        });
        new_bodies.push(new);
        rewritten.extend(recs.iter().filter(|n| live.contains(*n)).cloned());
    }
    for n in &removed {
        rewritten.remove(n);
    }
    let held: BTreeSet<&str> = names.bodies.keys().map(String::as_str).collect();
    let forwards: Vec<Rewrite> = f
        .rewrites
        .iter()
        .filter(|r| !held.contains(r.from.as_str()))
        .cloned()
        .collect();
    for b in &new_bodies {
        body::put_unsynced(lane, b).map_err(CorpusError::from)?;
    }
    body::sync(lane).map_err(CorpusError::from)?;
    let marker = body::forget_marker(lane);
    if !rewrites.is_empty() {
        let pending: Vec<&str> = rewrites.iter().map(|r| r.from.as_str()).collect();
        fsutil::write_atomic(
            &marker,
            &serde_json::to_vec(&pending).expect("digests serialise"),
            true,
        )
        .map_err(CorpusError::from)?;
    }
    let bodies = rewrites.len() as u64;
    let applied = Applied::Forgotten(Box::new(Forgotten {
        values: f.values.clone(),
        rewrites: rewrites.clone(),
        rewritten_records: rewritten.into_iter().collect(),
        removed_records: removed.into_iter().collect(),
        forgotten_at_ns: f.forgotten_at_ns,
    }));
    let outcome = append(locked, origin, &published.id, applied, forwards)?;
    for r in &rewrites {
        body::remove(lane, &r.from).map_err(CorpusError::from)?;
    }
    if !rewrites.is_empty() {
        crate::forget::sweep_unreferenced(locked.corpus)?;
        fsutil::remove_file_if_exists(&marker).map_err(CorpusError::from)?;
    }
    Ok(ForgetApplied {
        outcome: Some(outcome),
        bodies,
    })
}
