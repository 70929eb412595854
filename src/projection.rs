//! Projections: the directories a user reads, derived from the journal.
//!
//! Owns: applying one event to the record directory (`records/*.md`), the
//! staging view (`staging/*.stage.json` beside each blob), quarantine notes,
//! session notes (`sessions/<id>`), the gap marker and the lookup index
//! (`index/`), plus the checkpoint that says how far they are caught up.
//!
//! Invariants:
//! - Applying never decides: everything it writes comes from the event (and,
//!   for a lineage migration, from the record an earlier event wrote), so a
//!   replay into empty directories reproduces every file byte for byte.
//! - Applying is idempotent: re-applying an event after a crash between the
//!   projection write and the checkpoint write changes nothing.
//! - Only this module writes the projection files; only `corpus` calls it,
//!   under the store lock.
//! - Raw blobs are not projections: applying moves or removes them as the
//!   event says, never creates them.
//! - No single event can stop the projections: one that cannot be applied
//!   for a reason of its own (see `ProjectionError::is_per_event`) is
//!   recorded in `index/faults.json` and skipped; any other failure stops
//!   the pass before the checkpoint moves, so the next run retries it.
//! - File names derived from ids go through `naming`, whatever the id.
//!
//! The index makes every lookup O(1) in store size: it is a directory of
//! small files named by a digest of their key (idempotency key → record,
//! (session, agent, kind) → live records, session → records, agent →
//! records, (session, agent) → staged stem). The file system is the hash
//! table.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use abcd_journal::{Journal, JournalError, Position};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::body;
use crate::clock;
use crate::event::{
    self, BlobPlace, BodyRef, CaptureOutcome, Envelope, Event, EventError, Forgotten, ValueDigest,
};
use crate::fsutil::{self, FsError};
use crate::naming;
use crate::record::{self, RecordMeta};
use crate::staging_view::{meta_path, StageSidecar, StagedMeta};
use crate::store::Lane;
use crate::summary::{self, Summary, TokenLine};

/// Version of the projection layout. A checkpoint written by another layout
/// version forces a rebuild instead of a catch-up. 2: every file name
/// derived from an id is bounded by `naming` (see [`UNBOUNDED_NAMES_FORMAT`]).
/// 3: every live record has a line in `index/summary/` (see
/// [`SUMMARYLESS_FORMAT`]). 4: and a line in `index/tokens/` (see
/// [`TOKENLESS_FORMAT`]).
pub const PROJECTION_FORMAT: u32 = 4;

/// The layout before record token tables. Its checkpoints are still read:
/// the first catch-up writes the summary and token table of every record
/// in `records/` (each read once; the same bytes a replay writes) and
/// carries on.
pub const TOKENLESS_FORMAT: u32 = 3;

/// The layout before record summaries. Its checkpoints are still read: the
/// first catch-up writes the summary of every record in `records/` (each
/// read once; the same bytes a replay writes) and carries on.
pub const SUMMARYLESS_FORMAT: u32 = 2;

/// The layout before names were bounded. Its checkpoints are still read:
/// projections of ordinary ids are identical in both layouts, so the first
/// catch-up only looks for names over the bound (one listing of four
/// directories) and rebuilds when it finds one, else carries on and
/// rewrites the checkpoint in the current format.
pub const UNBOUNDED_NAMES_FORMAT: u32 = 1;

/// Cap on reading one record back (bodies are at most 64 MiB of transcript).
pub const RECORD_READ_CAP: u64 = 96 << 20;
use crate::fsutil::SMALL_FILE_CAP;

#[derive(Debug, Error)]
pub enum ProjectionError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("journal frame {seq}: {source}")]
    Event {
        seq: u64,
        #[source]
        source: EventError,
    },
    #[error("record {path} could not be read back ({why}); run `abcd journal replay --rebuild`")]
    Record { path: PathBuf, why: String },
    #[error("projection checkpoint {path} is unreadable ({why}); it will be rebuilt")]
    Checkpoint { path: PathBuf, why: String },
    #[error(transparent)]
    Body(#[from] crate::body::BodyError),
}

impl ProjectionError {
    /// True when applying this one event fails the same way on every try:
    /// a name the file system refuses (`ENAMETOOLONG`, `EILSEQ`), or a
    /// payload that is not an abcd event. Such an event is recorded as a
    /// fault and skipped, so it cannot stop every later verb. Anything else
    /// (no space, I/O error, permission, a journal read error, an event of
    /// a newer schema) is not: the caller fails and the next run retries.
    fn is_per_event(&self) -> bool {
        let deterministic_io =
            |e: &io::Error| matches!(e.raw_os_error(), Some(libc::ENAMETOOLONG | libc::EILSEQ));
        match self {
            ProjectionError::Event {
                source: EventError::Decode(_) | EventError::OlderSchema { .. },
                ..
            } => true,
            ProjectionError::Io { source, .. } => deterministic_io(source),
            // A body missing or not matching its digest: reported by
            // `journal verify`, named by `journal repair`.
            ProjectionError::Body(
                crate::body::BodyError::Missing { .. } | crate::body::BodyError::Mismatch { .. },
            ) => true,
            ProjectionError::Fs(FsError::Io { source, .. }) => deterministic_io(source),
            _ => false,
        }
    }
}

/// One journal event the projections could not apply
/// (`index/faults.json`). Recorded by the catch-up that met it, reported
/// by `journal verify`, `journal stats` and `history staged`, retried by
/// `journal replay --rebuild` (and `journal repair --yes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub seq: u64,
    /// The event's name, when its payload decoded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub event: Option<String>,
    /// Why it could not be applied (paths relative to the lane).
    pub reason: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FaultFile {
    schema: u32,
    faults: Vec<Fault>,
}

fn faults_path(lane: &Lane) -> PathBuf {
    lane.index_dir().join("faults.json")
}

/// The projection faults recorded so far, by sequence. An unreadable file
/// reads as one fault saying so (a rebuild rewrites it).
pub fn read_faults(lane: &Lane) -> Vec<Fault> {
    let path = faults_path(lane);
    match fsutil::read_private(&path, SMALL_FILE_CAP) {
        Ok(b) => match serde_json::from_slice::<FaultFile>(&b) {
            Ok(f) => f.faults,
            Err(e) => vec![Fault {
                seq: 0,
                event: None,
                reason: format!("index/faults.json is unreadable ({e})"),
            }],
        },
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => vec![Fault {
            seq: 0,
            event: None,
            reason: format!("index/faults.json cannot be read ({e})"),
        }],
    }
}

/// Adds a fault (once per sequence number: re-applying after a crash
/// records nothing new).
fn record_fault(lane: &Lane, fault: &Fault) -> Result<bool, ProjectionError> {
    let mut faults = read_faults(lane);
    if faults.iter().any(|f| f.seq == fault.seq) {
        return Ok(false);
    }
    faults.push(fault.clone());
    faults.sort_by_key(|f| f.seq);
    let mut text =
        serde_json::to_vec_pretty(&FaultFile { schema: 1, faults }).expect("faults serialise");
    text.push(b'\n');
    fsutil::write_atomic(&faults_path(lane), &text, false)?;
    Ok(true)
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ProjectionError + 'a {
    move |source| ProjectionError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// How far the projections are caught up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub format: u32,
    pub seq: u64,
    pub offset: u64,
    pub hash: String,
    /// The kernel boot the projection files it covers were written in. They
    /// are written without fsync, so a checkpoint from another boot proves
    /// nothing about them (a power loss may have dropped them) and the
    /// catch-up restarts from the last *synced* checkpoint instead.
    #[serde(default)]
    pub boot_id: String,
}

impl Checkpoint {
    fn from_position(p: &Position) -> Checkpoint {
        Checkpoint {
            format: PROJECTION_FORMAT,
            seq: p.seq,
            offset: p.offset,
            hash: hex::encode(p.hash),
            boot_id: boot_id().to_owned(),
        }
    }
    fn position(&self) -> Option<Position> {
        let bytes = hex::decode(&self.hash).ok()?;
        let hash: [u8; 32] = bytes.try_into().ok()?;
        Some(Position {
            seq: self.seq,
            offset: self.offset,
            hash,
        })
    }
}

/// What a catch-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CatchUp {
    pub applied: u64,
    pub rebuilt: bool,
    pub head_seq: u64,
    /// Record files a rebuild did not reproduce, kept in `records.unjournaled/`.
    pub set_aside: Vec<String>,
    /// Events this pass could not apply and skipped (see [`Fault`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
}

/// Session notes older than this are pruned (the session is long over;
/// its transcripts are stored or staged with their own lineage).
pub const SESSION_NOTE_TTL_NS: u64 = 30 * 24 * 3600 * 1_000_000_000;

/// When a session note was written (its content); `None` for a zero-byte
/// note of an older abcd, which is kept.
pub fn note_time(path: &Path) -> Option<u64> {
    let b = fsutil::read_private(path, 256).ok()?;
    clock::parse_rfc3339(String::from_utf8_lossy(&b).trim())
}

/// Digest key for index file names: 32 hex chars of SHA-256 over the parts.
pub fn key_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

/// The lookup index of one lane. Every operation is O(1) in store size.
pub struct Index<'a> {
    lane: &'a Lane,
    /// While a pass applies events: where its writes wait (see [`Pending`]).
    pending: Option<&'a Pending>,
}

/// The non-empty lines of a projection file of at most `cap` bytes
/// (absent: none; invalid UTF-8 replaced).
fn read_lines(p: &Path, cap: u64) -> Result<Vec<String>, ProjectionError> {
    match fsutil::read_private(p, cap) {
        Ok(b) => Ok(text_lossy(b)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// An index list as it is on disk (absent: empty).
fn read_list_file(p: &Path) -> Result<Vec<String>, ProjectionError> {
    read_lines(p, SMALL_FILE_CAP)
}

/// An index list as a pass loads it: its items, and those same items again
/// when the file is exactly what [`write_list_file`] writes for them (each
/// item, then a newline) — only then may new items be appended in place.
/// A last line without its newline is a torn append (the only writer that
/// leaves one): it is dropped, and the file is rewritten whole.
fn load_list_file(p: &Path) -> Result<(Vec<String>, Option<Vec<String>>), ProjectionError> {
    let bytes = match fsutil::read_private(p, SMALL_FILE_CAP) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok((Vec::new(), None)),
        Err(e) => return Err(e.into()),
    };
    let whole = bytes.last() == Some(&b'\n') && std::str::from_utf8(&bytes).is_ok();
    let text = text_lossy(bytes);
    let body = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let items: Vec<String> = body
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let canonical = whole
        && !items.is_empty()
        && items.iter().map(|i| i.len() + 1).sum::<usize>() == text.len();
    let disk = canonical.then(|| items.clone());
    Ok((items, disk))
}

/// Writes an index list (none removes it).
fn write_list_file(p: &Path, items: &[String]) -> Result<(), ProjectionError> {
    if items.is_empty() {
        fsutil::remove_file_if_exists(p)?;
        return Ok(());
    }
    ensure_dir(p.parent().expect("index path has a parent"))?;
    let mut text = items.join("\n");
    text.push('\n');
    fsutil::write_atomic(p, text.as_bytes(), false)?;
    Ok(())
}

impl<'a> Index<'a> {
    pub fn new(lane: &'a Lane) -> Index<'a> {
        Index {
            lane,
            pending: None,
        }
    }
    fn buffered(lane: &'a Lane, pending: &'a Pending) -> Index<'a> {
        Index {
            lane,
            pending: Some(pending),
        }
    }
    fn path(&self, table: &str, key: &str) -> PathBuf {
        self.lane.index_dir().join(table).join(key)
    }
    fn read_list(&self, table: &str, key: &str) -> Result<Vec<String>, ProjectionError> {
        let p = self.path(table, key);
        if let Some(pd) = self.pending {
            return pd.with_list(&p, |items| (items.clone(), false));
        }
        read_list_file(&p)
    }
    fn write_list(&self, table: &str, key: &str, items: &[String]) -> Result<(), ProjectionError> {
        let p = self.path(table, key);
        match self.pending {
            Some(pd) => pd.with_list(&p, |old| {
                let changed = old.as_slice() != items;
                *old = items.to_vec();
                ((), changed)
            }),
            None => write_list_file(&p, items),
        }
    }
    fn list_insert(&self, table: &str, key: &str, item: &str) -> Result<(), ProjectionError> {
        let mut items = self.read_list(table, key)?;
        if items.iter().any(|i| i == item) {
            return Ok(());
        }
        // Kept sorted (record names start with their capture stamp, so this
        // is oldest first): a list is then a function of the set of live
        // records, whatever order their events arrived in (`sync`).
        let at = items.partition_point(|i| i.as_str() < item);
        items.insert(at, item.to_owned());
        self.write_list(table, key, &items)
    }
    fn list_remove(&self, table: &str, key: &str, item: &str) -> Result<(), ProjectionError> {
        let mut items = self.read_list(table, key)?;
        let before = items.len();
        items.retain(|i| i != item);
        if items.len() == before {
            return Ok(());
        }
        self.write_list(table, key, &items)
    }

    /// Record named by an idempotency key, if it is still live.
    pub fn record_for_idem(&self, idem: &str) -> Result<Option<String>, ProjectionError> {
        let names = self.read_list("idem", idem)?;
        Ok(names
            .into_iter()
            .find(|n| self.lane.records_dir().join(n).is_file()))
    }
    /// Live records of one (session, agent, kind) stream, oldest first.
    pub fn stream_records(&self, stream: &str) -> Result<Vec<String>, ProjectionError> {
        self.read_list("stream", stream)
    }
    /// Every live record of a session (unordered; callers sort by metadata).
    pub fn session_records(&self, session_id: &str) -> Result<Vec<String>, ProjectionError> {
        self.read_list("session", &key_hash(&[session_id]))
    }
    /// Every live record of an agent id.
    pub fn agent_records(&self, agent_id: &str) -> Result<Vec<String>, ProjectionError> {
        self.read_list("agent", &key_hash(&[agent_id]))
    }
    /// The staged stem for a (session, agent) key.
    pub fn staged_stem(
        &self,
        session_id: &str,
        agent_id: Option<&str>,
    ) -> Result<Option<String>, ProjectionError> {
        Ok(self
            .read_list("staged", &staged_key(session_id, agent_id))?
            .into_iter()
            .next())
    }
}

/// Every index entry a record has: (table, key).
fn record_keys(meta: &RecordMeta) -> Vec<(&'static str, String)> {
    let agent = meta.lineage.agent_id.as_deref();
    let kind = meta.source_kind.as_str();
    let mut keys = vec![
        (
            "idem",
            idem_key(&meta.source_sha256, &meta.lineage.session_id, agent, kind),
        ),
        ("stream", stream_key(&meta.lineage.session_id, agent, kind)),
        ("session", key_hash(&[&meta.lineage.session_id])),
    ];
    if let Some(a) = agent {
        keys.push(("agent", key_hash(&[a])));
    }
    keys
}

/// The summary table: [`SUMMARY_SHARDS`] files, each holding one JSON line
/// per live record of the sessions whose key falls in it, sorted by record
/// name. Listing a store reads 256 small files however many records and
/// sessions it holds; a capture rewrites one shard (1/256 of the lines).
const SUMMARY_TABLE: &str = "summary";

/// The token table: the same shards as [`SUMMARY_TABLE`] (a session's
/// summaries and token lines sit in shards of the same name), one
/// [`TokenLine`] per live record. Written, replaced and removed with the
/// summary; kept apart so `history list` never reads message ids.
const TOKENS_TABLE: &str = "tokens";

/// Number of shard files (the first two hex digits of the session key).
pub const SUMMARY_SHARDS: usize = 256;

/// Cap on one shard file (a line is under a kilobyte plus the spawn calls:
/// 256 MiB over 256 shards is millions of records).
const SUMMARY_READ_CAP: u64 = 256 << 20;

fn shard_path(lane: &Lane, table: &str, session_id: &str) -> PathBuf {
    let key = key_hash(&["summary", session_id]);
    lane.index_dir().join(table).join(&key[..2])
}

fn summary_path(lane: &Lane, session_id: &str) -> PathBuf {
    shard_path(lane, SUMMARY_TABLE, session_id)
}

/// The record name of a summary line, without parsing the rest of it.
fn line_file(line: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct FileOnly {
        file: String,
    }
    // Both line kinds serialise `file` first, and a record name never
    // holds a quote or a backslash: read it without parsing the line. A
    // line that does not start so (written by hand, or damaged) is parsed.
    if let Some(rest) = line.strip_prefix("{\"file\":\"") {
        if let Some(end) = rest.find(['"', '\\']) {
            if rest.as_bytes()[end] == b'"' {
                return Some(rest[..end].to_owned());
            }
        }
    }
    serde_json::from_str::<FileOnly>(line).ok().map(|f| f.file)
}

fn read_shard(path: &Path) -> Result<Vec<String>, ProjectionError> {
    read_lines(path, SUMMARY_READ_CAP)
}

/// `bytes` as text, invalid UTF-8 replaced (checked first: the common,
/// valid case is not copied).
fn text_lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Rewrites one shard of `table` without the line of record `file`, and
/// with `add` (that record's new line).
fn update_shard(
    lane: &Lane,
    pending: &Pending,
    table: &str,
    session_id: &str,
    file: &str,
    add: Option<String>,
) -> Result<(), ProjectionError> {
    let p = shard_path(lane, table, session_id);
    if let Some(line) = &add {
        if pending.append_shard_line(&p, file, line)? {
            return Ok(());
        }
    }
    pending.with_shard(&p, |items| {
        let before = items.len();
        items.retain(|(f, _)| f != file);
        let changed = add.is_some() || items.len() != before;
        if let Some(l) = add {
            items.push((file.to_owned(), l));
        }
        ((), changed)
    })
}

/// Writes a shard's (record name, line) items sorted by name; none removes it.
fn write_shard(p: &Path, mut items: Vec<(String, String)>) -> Result<(), ProjectionError> {
    if items.is_empty() {
        fsutil::remove_file_if_exists(p)?;
        return Ok(());
    }
    items.sort();
    ensure_dir(p.parent().expect("summary path has a parent"))?;
    let mut text = String::new();
    for (_, l) in &items {
        text.push_str(l);
        text.push('\n');
    }
    fsutil::write_atomic(p, text.as_bytes(), false)?;
    Ok(())
}

/// Replaces the summaries and token lines of many records whose session
/// (hence shard) does not change, each shard read and written once.
fn replace_summaries(
    lane: &Lane,
    pending: &Pending,
    facts: Vec<(Summary, TokenLine)>,
) -> Result<(), ProjectionError> {
    type Lines = Vec<(String, String)>;
    let mut by_shard: std::collections::BTreeMap<PathBuf, Lines> = Default::default();
    for (s, t) in facts {
        by_shard
            .entry(shard_path(lane, SUMMARY_TABLE, s.session_id()))
            .or_default()
            .push((s.file.clone(), s.to_line()));
        by_shard
            .entry(shard_path(lane, TOKENS_TABLE, s.session_id()))
            .or_default()
            .push((t.file.clone(), t.to_line()));
    }
    for (p, new) in by_shard {
        let fresh: std::collections::HashMap<String, String> = new.into_iter().collect();
        pending.with_shard(&p, |items| {
            items.retain(|(f, _)| !fresh.contains_key(f));
            items.extend(fresh);
            ((), true)
        })?;
    }
    Ok(())
}

/// Inserts or replaces the summary and token line of one record.
fn write_summary(
    lane: &Lane,
    pending: &Pending,
    (summary, tokens): &(Summary, TokenLine),
) -> Result<(), ProjectionError> {
    let (sid, file) = (summary.session_id(), &summary.file);
    update_shard(
        lane,
        pending,
        SUMMARY_TABLE,
        sid,
        file,
        Some(summary.to_line()),
    )?;
    update_shard(
        lane,
        pending,
        TOKENS_TABLE,
        sid,
        file,
        Some(tokens.to_line()),
    )
}

fn remove_summary(
    lane: &Lane,
    pending: &Pending,
    session_id: &str,
    file: &str,
) -> Result<(), ProjectionError> {
    update_shard(lane, pending, SUMMARY_TABLE, session_id, file, None)?;
    update_shard(lane, pending, TOKENS_TABLE, session_id, file, None)
}

/// Index lists and summary shards a pass writes, kept in memory and written
/// once each at the end of the pass (or when they outgrow
/// [`PENDING_CAP`]) instead of once per event: a batch of captures (ingest,
/// a sync import) or a replay rewrites a summary shard once, not once per
/// record. The files written are the ones writing through would leave (a
/// list's last state; a shard sorted as [`write_shard`] sorts it). Before
/// any file an event removes or moves goes, what is pending is written, so
/// the order a crash can observe stays the one writing through gives (an
/// index entry is never behind a removal); the checkpoint moves only after
/// the final write, so a crash re-applies the whole pass, idempotently.
#[derive(Default)]
pub(crate) struct Pending {
    lists: std::cell::RefCell<std::collections::BTreeMap<PathBuf, List>>,
    shards: std::cell::RefCell<std::collections::BTreeMap<PathBuf, Shard>>,
    bytes: std::cell::Cell<usize>,
}

/// An index list as a pass holds it.
struct List {
    changed: bool,
    items: Vec<String>,
    /// The items the file held when loaded, when it held exactly their
    /// canonical form (see [`load_list_file`]): a list that only grew past
    /// them is appended to in place, not replaced. Replacing frees the old
    /// file's inode, and on ext4 without a journal every file created in
    /// the next seconds scans past each recently freed inode (a batch that
    /// replaced hundreds of lists spent a third of its time there).
    disk: Option<Vec<String>>,
}

/// A shard as a pass holds it.
enum Shard {
    /// Read whole: (changed, its (record name, line) items).
    Loaded(bool, Vec<(String, String)>),
    /// Only lines of records named after every record in the file were
    /// added: `last` is the record name of the file's last line (`None`:
    /// no file), `added` the lines to append, in order. A shard is sorted
    /// by record name, and a new record's name starts with its capture
    /// stamp, so a capture's line almost always goes last: appended, the
    /// file is byte for byte the sorted rewrite, without reading or
    /// rewriting the hundreds of lines before it.
    Tail {
        last: Option<String>,
        added: Vec<(String, String)>,
    },
}

/// Most bytes read from a shard's end to find its last line.
const SHARD_TAIL_READ: u64 = 256 << 10;

/// The record name of the last line of the shard at `p` (`Some(None)`: no
/// file); `None` when that cannot be read cheaply (a line longer than
/// [`SHARD_TAIL_READ`], no final newline, a line that names no record):
/// the caller then reads the shard whole.
fn shard_last_file(p: &Path) -> Result<Option<Option<String>>, ProjectionError> {
    use std::os::unix::fs::FileExt;
    let f = match abcd_fsio::open(p, abcd_fsio::Access::Read) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(Some(None)),
        Err(e) => return Err(e.into()),
    };
    let len = f.metadata().map_err(io_err("stat", p))?.len();
    if len == 0 {
        return Ok(None);
    }
    let n = len.min(SHARD_TAIL_READ);
    let mut buf = vec![0u8; n as usize];
    f.read_exact_at(&mut buf, len - n)
        .map_err(io_err("read", p))?;
    if buf.last() != Some(&b'\n') {
        return Ok(None);
    }
    let body = &buf[..buf.len() - 1];
    let start = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if n == len => 0,
        None => return Ok(None),
    };
    let Ok(line) = std::str::from_utf8(&body[start..]) else {
        return Ok(None);
    };
    Ok(line_file(line).map(Some))
}

/// Bytes of pending lists and shards past which a pass writes them early.
const PENDING_CAP: usize = 32 << 20;

impl Pending {
    /// Runs `f` on the list at `p` (loaded from disk the first time); `f`
    /// says whether it changed it.
    fn with_list<T>(
        &self,
        p: &Path,
        f: impl FnOnce(&mut Vec<String>) -> (T, bool),
    ) -> Result<T, ProjectionError> {
        let mut lists = self.lists.borrow_mut();
        if !lists.contains_key(p) {
            let (items, disk) = load_list_file(p)?;
            let held = items.iter().map(|i| i.len() + 24).sum::<usize>();
            self.grow(p.as_os_str().len() + held * if disk.is_some() { 2 } else { 1 });
            lists.insert(
                p.to_path_buf(),
                List {
                    changed: false,
                    items,
                    disk,
                },
            );
        }
        let e = lists.get_mut(p).expect("inserted above");
        let (out, changed) = f(&mut e.items);
        e.changed |= changed;
        if changed {
            self.grow(e.items.last().map_or(0, |i| i.len() + 24));
        }
        Ok(out)
    }

    /// Runs `f` on the (record name, line) items of the shard at `p`.
    fn with_shard<T>(
        &self,
        p: &Path,
        f: impl FnOnce(&mut Vec<(String, String)>) -> (T, bool),
    ) -> Result<T, ProjectionError> {
        let mut shards = self.shards.borrow_mut();
        let added = match shards.remove(p) {
            Some(Shard::Loaded(dirty, items)) => {
                shards.insert(p.to_path_buf(), Shard::Loaded(dirty, items));
                None
            }
            Some(Shard::Tail { added, .. }) => Some(added),
            None => Some(Vec::new()),
        };
        if let Some(added) = added {
            let mut items: Vec<(String, String)> = read_shard(p)?
                .into_iter()
                .filter_map(|l| line_file(&l).map(|f| (f, l)))
                .collect();
            self.grow(items.iter().map(|(f, l)| f.len() + l.len() + 48).sum());
            let dirty = !added.is_empty();
            items.extend(added);
            shards.insert(p.to_path_buf(), Shard::Loaded(dirty, items));
        }
        let Some(Shard::Loaded(dirty, items)) = shards.get_mut(p) else {
            unreachable!("loaded above");
        };
        let (out, changed) = f(items);
        *dirty |= changed;
        if changed {
            self.grow(items.last().map_or(0, |(f, l)| f.len() + l.len() + 48));
        }
        Ok(out)
    }

    /// Adds the line of record `file` to the shard at `p` when it goes after
    /// every line there (see [`Shard::Tail`]); false when it does not (or
    /// the shard was read whole already), and nothing changed.
    fn append_shard_line(&self, p: &Path, file: &str, line: &str) -> Result<bool, ProjectionError> {
        let mut shards = self.shards.borrow_mut();
        if !shards.contains_key(p) {
            let Some(last) = shard_last_file(p)? else {
                return Ok(false);
            };
            shards.insert(
                p.to_path_buf(),
                Shard::Tail {
                    last,
                    added: Vec::new(),
                },
            );
        }
        let Some(Shard::Tail { last, added }) = shards.get_mut(p) else {
            return Ok(false);
        };
        let max = added.last().map(|(f, _)| f.as_str()).or(last.as_deref());
        if max.is_some_and(|m| file <= m) {
            return Ok(false);
        }
        added.push((file.to_owned(), line.to_owned()));
        self.grow(file.len() + line.len() + 48);
        Ok(true)
    }

    fn grow(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_add(n));
    }

    fn over_cap(&self) -> bool {
        self.bytes.get() > PENDING_CAP
    }

    /// Writes every changed list and shard, then forgets them all.
    fn flush(&self) -> Result<(), ProjectionError> {
        let lists = std::mem::take(&mut *self.lists.borrow_mut());
        let shards = std::mem::take(&mut *self.shards.borrow_mut());
        self.bytes.set(0);
        for (p, l) in lists {
            if !l.changed {
                continue;
            }
            match &l.disk {
                Some(d) if l.items.len() > d.len() && l.items[..d.len()] == d[..] => {
                    let mut text = l.items[d.len()..].join("\n");
                    text.push('\n');
                    let mut f = abcd_fsio::open(&p, abcd_fsio::Access::Append)?;
                    abcd_fsio::write_all(&mut f, &p, text.as_bytes())?;
                }
                _ => write_list_file(&p, &l.items)?,
            }
        }
        for (p, shard) in shards {
            match shard {
                Shard::Loaded(true, items) => write_shard(&p, items)?,
                Shard::Tail { last: None, added } if !added.is_empty() => write_shard(&p, added)?,
                Shard::Tail {
                    last: Some(_),
                    added,
                } if !added.is_empty() => {
                    let mut text = String::new();
                    for (_, l) in &added {
                        text.push_str(l);
                        text.push('\n');
                    }
                    let mut f = abcd_fsio::open(&p, abcd_fsio::Access::Append)?;
                    abcd_fsio::write_all(&mut f, &p, text.as_bytes())?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The summaries of one session's live records, by record name.
pub fn session_summaries(lane: &Lane, session_id: &str) -> Result<Vec<Summary>, ProjectionError> {
    Ok(read_shard(&summary_path(lane, session_id))?
        .iter()
        .filter_map(|l| Summary::from_line(l))
        .filter(|s| s.session_id() == session_id)
        .collect())
}

/// The summaries of every live record (at most [`SUMMARY_SHARDS`] small
/// files read; no record is opened).
pub fn all_summaries(lane: &Lane) -> Result<Vec<Summary>, ProjectionError> {
    all_lines(lane, SUMMARY_TABLE, Summary::from_line)
}

/// The token lines of one session's live records, by record name (the
/// caller matches them to the session's summaries by file).
pub fn session_tokens(lane: &Lane, session_id: &str) -> Result<Vec<TokenLine>, ProjectionError> {
    Ok(read_shard(&shard_path(lane, TOKENS_TABLE, session_id))?
        .iter()
        .filter_map(|l| TokenLine::from_line(l))
        .collect())
}

/// The token lines of every live record ([`SUMMARY_SHARDS`] files at most;
/// no record is opened).
pub fn all_tokens(lane: &Lane) -> Result<Vec<TokenLine>, ProjectionError> {
    all_lines(lane, TOKENS_TABLE, TokenLine::from_line)
}

fn all_lines<T>(
    lane: &Lane,
    table: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, ProjectionError> {
    let dir = lane.index_dir().join(table);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("list", &dir)(e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(io_err("list", &dir))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        out.extend(read_shard(&entry.path())?.iter().filter_map(|l| parse(l)));
    }
    Ok(out)
}

/// Writes the summary and token line of every record in `records/` (the
/// upgrade from [`SUMMARYLESS_FORMAT`] or [`TOKENLESS_FORMAT`]): what
/// applying their events would have written.
fn backfill_summaries(lane: &Lane) -> Result<(), ProjectionError> {
    let pending = Pending::default();
    let dir = lane.records_dir();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("list", &dir)(e)),
    };
    for entry in rd {
        let entry = entry.map_err(io_err("list", &dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".md") || name.starts_with('.') {
            continue;
        }
        let Ok(bytes) = fsutil::read_private(&entry.path(), RECORD_READ_CAP) else {
            continue;
        };
        if let Ok((meta, body)) = record::parse(&bytes) {
            write_summary(lane, &pending, &summary::facts(&name, &meta, body))?;
        }
    }
    pending.flush()
}

/// Index key of a staged entry.
pub fn staged_key(session_id: &str, agent_id: Option<&str>) -> String {
    key_hash(&["staged", session_id, agent_id.unwrap_or("")])
}

/// Idempotency key of a capture: (source_sha256, session, agent, kind).
pub fn idem_key(
    source_sha256: &str,
    session_id: &str,
    agent_id: Option<&str>,
    kind: &str,
) -> String {
    key_hash(&[
        "idem",
        source_sha256,
        session_id,
        agent_id.unwrap_or(""),
        kind,
    ])
}

/// Stream key for supersession: (session, agent, kind).
pub fn stream_key(session_id: &str, agent_id: Option<&str>, kind: &str) -> String {
    key_hash(&["stream", session_id, agent_id.unwrap_or(""), kind])
}

fn ensure_dir(path: &Path) -> Result<(), ProjectionError> {
    // Index sub-tables are created lazily, one level below the lane's
    // `index/` leaf, which `Lane::open` already made private. Proven on
    // every use (one open without following a symlink and one fstat): a
    // table replaced by a symlink to a directory elsewhere is refused.
    fsutil::ensure_private_dir(path)?;
    Ok(())
}

/// Applies events to the projections of one lane.
///
/// Projection files are written without fsync: their durability comes from
/// the journal (see `Checkpoint::boot_id` and `sync`).
struct Projector<'a> {
    lane: &'a Lane,
    journal: &'a Journal,
    /// Every body a forget replaced (`from` → `to`, `None` when removed),
    /// read from the journal the first time an event names a body that is
    /// no longer there.
    forwards: std::cell::RefCell<Option<std::collections::HashMap<String, Option<BodyRef>>>>,
    /// Index lists and summary shards written at the end of the pass.
    pending: Pending,
}

/// Gap state kept in the index so re-applying a sighting is idempotent.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct GapState {
    first_seen_ns: u64,
    last_seen_ns: u64,
    count: u64,
    event: String,
    last_seq: u64,
}

/// The user-visible gap marker (`subagent-payload-gap.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GapMarker {
    pub schema: u32,
    pub first_seen: String,
    pub last_seen: String,
    pub count: u64,
    pub event: String,
}

/// The quarantine reason note (`quarantine/<stem>.quarantine.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuarantineNote {
    pub schema: u32,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_id: Option<String>,
    pub reason: String,
    pub staged_at: String,
    pub quarantined_at: String,
}

impl<'a> Projector<'a> {
    fn new(lane: &'a Lane, journal: &'a Journal) -> Projector<'a> {
        Projector {
            lane,
            journal,
            forwards: std::cell::RefCell::new(None),
            pending: Pending::default(),
        }
    }

    /// The bytes of the record file `r` names, or of the body a forget put
    /// in its place; `None` when a forget removed the record.
    fn body_bytes(&self, r: &BodyRef) -> Result<Option<Vec<u8>>, ProjectionError> {
        let first = match body::read(self.lane, &r.sha256) {
            Ok(b) => return Ok(Some(b)),
            Err(e) if e.is_missing() => e,
            Err(e) => return Err(e.into()),
        };
        if self.forwards.borrow().is_none() {
            *self.forwards.borrow_mut() = Some(forwards(self.journal)?);
        }
        let map = self.forwards.borrow();
        let map = map.as_ref().expect("loaded above");
        let mut cur = r.sha256.clone();
        // A chain is at most as long as the map (each forget names new bodies).
        for _ in 0..=map.len() {
            match map.get(&cur) {
                Some(Some(to)) => match body::read(self.lane, &to.sha256) {
                    Ok(b) => return Ok(Some(b)),
                    Err(e) if e.is_missing() => cur = to.sha256.clone(),
                    Err(e) => return Err(e.into()),
                },
                Some(None) => return Ok(None),
                None => break,
            }
        }
        Err(first.into())
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), ProjectionError> {
        fsutil::write_atomic(path, bytes, false)?;
        Ok(())
    }

    /// Removes a projection file, after writing what is pending (see
    /// [`Pending`]: an index entry is never behind a removal).
    fn remove(&self, path: &Path) -> Result<bool, ProjectionError> {
        self.pending.flush()?;
        Ok(fsutil::remove_file_if_exists(path)?)
    }

    /// Moves a file an event moves, after writing what is pending.
    fn rename(&self, from: &Path, to: &Path) -> Result<(), ProjectionError> {
        self.pending.flush()?;
        fsutil::rename(from, to)?;
        Ok(())
    }

    /// Writes what the pass has pending (its end, or a cap).
    fn flush(&self) -> Result<(), ProjectionError> {
        self.pending.flush()
    }

    /// The on-disk stem of a journaled blob stem ([`naming::stem`]). An
    /// older abcd journaled stems over the bound and renamed the blob into
    /// place under the long name when the file system allowed it: that
    /// blob is moved to the bounded name (an event says where the blob is,
    /// so moving it is applying the event, as a quarantine is).
    fn disk_stem(&self, journaled: &str) -> Result<String, ProjectionError> {
        let stem = naming::stem(journaled);
        if stem != journaled {
            let dir = self.lane.staging_dir();
            let long = dir.join(format!("{journaled}.raw"));
            if fs::symlink_metadata(&long).is_ok_and(|m| m.file_type().is_file()) {
                let short = dir.join(format!("{stem}.raw"));
                self.rename(&long, &short)?;
            }
        }
        Ok(stem.into_owned())
    }

    /// Applies one decoded event at journal sequence `seq`.
    fn apply(&self, seq: u64, env: &Envelope) -> Result<(), ProjectionError> {
        let index = Index::buffered(self.lane, &self.pending);
        // An imported event applies as its local decision (`sync`).
        match env.event.effective().as_ref() {
            Event::Staged(s) => {
                let stem = self.disk_stem(&s.stem)?;
                // The metadata blob is gone once the entry was captured or
                // discarded (a replay): the view then holds the ids alone,
                // and a later event of the same replay removes it.
                // In a replay, a quarantined entry's blob is already in
                // quarantine/ (the Quarantined event moved it there).
                let meta = if s.meta_sha256.is_empty() {
                    None
                } else {
                    [self.lane.staging_dir(), self.lane.quarantine_dir()]
                        .iter()
                        .find_map(|d| StagedMeta::read(&meta_path(d, &stem), &s.meta_sha256).ok())
                };
                let sidecar = StageSidecar::from_staged(s, meta);
                self.write(
                    &self.lane.staging_dir().join(format!("{stem}.stage.json")),
                    &sidecar.to_bytes(),
                )?;
                let key = staged_key(&s.session_id, s.agent_id.as_deref());
                index.write_list("staged", &key, &[stem])?;
            }
            Event::Restaged(r) => {
                let stem = self.disk_stem(&r.stem)?;
                let path = self.lane.staging_dir().join(format!("{stem}.stage.json"));
                // The sidecar written by the Staged event carries the lineage;
                // a restage changes the bytes, digest and time, and the
                // lineage and source when it wrote a new metadata blob.
                let mut sidecar =
                    StageSidecar::read(&path).map_err(|why| ProjectionError::Record {
                        path: path.clone(),
                        why,
                    })?;
                sidecar.raw_sha256 = r.raw_sha256.clone();
                sidecar.bytes = r.bytes;
                sidecar.staged_at = clock::rfc3339_nanos(r.staged_at_ns);
                if !r.meta_sha256.is_empty() {
                    let dir = self.lane.staging_dir();
                    if let Ok(m) = StagedMeta::read(&meta_path(&dir, &stem), &r.meta_sha256) {
                        // The key (session, agent) is the stem's; it never changes.
                        let (session, agent) = (
                            sidecar.lineage.session_id.clone(),
                            sidecar.lineage.agent_id.clone(),
                        );
                        sidecar.lineage = m.lineage;
                        sidecar.lineage.session_id = session;
                        sidecar.lineage.agent_id = agent;
                        if m.source_path.is_some() {
                            sidecar.source_path = m.source_path;
                        }
                    }
                }
                self.write(&path, &sidecar.to_bytes())?;
            }
            Event::Captured(c) => {
                if let CaptureOutcome::Stored {
                    record_name,
                    body,
                    supersedes,
                } = &c.outcome
                {
                    // None: a later forget removed this record.
                    if let Some(file) = self.body_bytes(body)? {
                        self.store_record(&index, &naming::record_name(record_name), &file)?;
                    }
                    for old in supersedes {
                        self.drop_record(&index, &naming::record_name(old))?;
                    }
                }
                if let Some(r) = &c.retires {
                    self.retire_staged(&index, &naming::stem(&r.stem))?;
                }
            }
            Event::Quarantined(q) => self.quarantine(&index, q)?,
            Event::Discarded(d) => {
                let dir = match d.place {
                    BlobPlace::Staging => self.lane.staging_dir(),
                    BlobPlace::Quarantine => self.lane.quarantine_dir(),
                };
                let stem = naming::stem(&d.stem);
                if d.place == BlobPlace::Staging {
                    self.retire_staged(&index, &stem)?;
                } else {
                    for ext in ["raw", "meta.json", "stage.json", "quarantine.json"] {
                        self.remove(&dir.join(format!("{stem}.{ext}")))?;
                    }
                }
            }
            Event::LineageMigrated(m) => {
                let name = naming::record_name(&m.record_name);
                if let Some(file) = self.body_bytes(&m.body)? {
                    self.drop_record(&index, &name)?;
                    self.store_record(&index, &name, &file)?;
                }
                // The search index keys a record by its name, which a
                // migration keeps: its session and agent columns would be
                // stale. Cleared; the next query reindexes.
                self.clear_search()?;
            }
            Event::Forgotten(f) => self.forget(&index, f)?,
            // `effective` never returns an imported event.
            Event::Imported(_) => {}
            Event::SessionNoted(n) => {
                let dir = self.lane.sessions_dir();
                let text = format!("{}\n", clock::rfc3339_nanos(n.noted_at_ns));
                self.write(
                    &dir.join(&*naming::session_note(&n.session_id)),
                    text.as_bytes(),
                )?;
                // Prune by the event's own time, so a replay prunes the same
                // notes: a session unseen for 30 days no longer claims a store.
                let cutoff = n.noted_at_ns.saturating_sub(SESSION_NOTE_TTL_NS);
                if let Ok(rd) = fs::read_dir(&dir) {
                    for entry in rd.flatten() {
                        let p = entry.path();
                        if note_time(&p).is_some_and(|t| t < cutoff) {
                            self.remove(&p)?;
                        }
                    }
                }
            }
            Event::DirectoryNamed(d) => {
                let mut state = self.lane.directory().unwrap_or_default();
                state.directory = d.directory.clone();
                state.named_at = clock::rfc3339_nanos(d.named_at_ns);
                self.write_directory(&state)?;
            }
            Event::LaneMoved(m) => {
                for name in &m.records {
                    self.drop_record(&index, &naming::record_name(name))?;
                }
                for stem in &m.staged {
                    self.retire_staged(&index, &naming::stem(stem))?;
                }
                let dir = self.lane.sessions_dir();
                for s in &m.sessions {
                    self.remove(&dir.join(&*naming::session_note(s)))?;
                }
                let mut state = self.lane.directory().unwrap_or_default();
                state.moved_to = Some(m.to_root.clone());
                state.moved_at = Some(clock::rfc3339_nanos(m.moved_at_ns));
                self.write_directory(&state)?;
                self.clear_search()?;
            }
            Event::SubagentGapSighted(g) => {
                let state_path = self.lane.index_dir().join("gap.json");
                let mut state = match fsutil::read_private(&state_path, SMALL_FILE_CAP) {
                    Ok(b) => serde_json::from_slice::<GapState>(&b).ok(),
                    Err(_) => None,
                };
                match &mut state {
                    Some(s) if s.last_seq >= seq => return Ok(()),
                    Some(s) => {
                        s.last_seen_ns = g.seen_at_ns;
                        s.count += 1;
                        s.event = g.hook_event_name.clone();
                        s.last_seq = seq;
                    }
                    None => {
                        state = Some(GapState {
                            first_seen_ns: g.seen_at_ns,
                            last_seen_ns: g.seen_at_ns,
                            count: 1,
                            event: g.hook_event_name.clone(),
                            last_seq: seq,
                        })
                    }
                }
                let s = state.expect("set above");
                let marker = GapMarker {
                    schema: 1,
                    first_seen: clock::rfc3339_nanos(s.first_seen_ns),
                    last_seen: clock::rfc3339_nanos(s.last_seen_ns),
                    count: s.count,
                    event: s.event.clone(),
                };
                let mut text = serde_json::to_vec(&marker).expect("marker serialises");
                text.push(b'\n');
                self.write(&self.lane.gap_marker_path(), &text)?;
                let mut st = serde_json::to_vec(&s).expect("gap state serialises");
                st.push(b'\n');
                self.write(&state_path, &st)?;
            }
        }
        Ok(())
    }

    /// Writes a directory lane's `index/directory.json`.
    fn write_directory(&self, state: &crate::store::LaneDirectory) -> Result<(), ProjectionError> {
        let mut text = serde_json::to_vec(state).expect("lane directory serialises");
        text.push(b'\n');
        self.write(&self.lane.directory_path(), &text)
    }

    /// Writes a record file (exactly `file`, as its body holds it) and its
    /// index entries and summary.
    fn store_record(
        &self,
        index: &Index<'_>,
        name: &str,
        file: &[u8],
    ) -> Result<(), ProjectionError> {
        let path = self.lane.records_dir().join(name);
        let (meta, body) = record::parse(file).map_err(|e| ProjectionError::Record {
            path: path.clone(),
            why: format!("its body does not parse as a record: {e}"),
        })?;
        self.write(&path, file)?;
        self.index_record(index, name, &meta)?;
        write_summary(self.lane, &self.pending, &summary::facts(name, &meta, body))
    }

    /// Applies a forget: live records rewritten from their new bodies or
    /// removed, the forgotten values added to the repository's set, and the
    /// search index (which may hold the values) cleared for a rebuild.
    fn forget(&self, index: &Index<'_>, f: &Forgotten) -> Result<(), ProjectionError> {
        let to: std::collections::HashMap<&str, &Option<BodyRef>> = f
            .rewrites
            .iter()
            .map(|r| (r.from.as_str(), &r.to))
            .collect();
        let done: std::collections::HashSet<&str> = f
            .rewrites
            .iter()
            .filter_map(|r| r.to.as_ref().map(|t| t.sha256.as_str()))
            .collect();
        let mut summaries = Vec::new();
        for name in &f.rewritten_records {
            let name = naming::record_name(name);
            let path = self.lane.records_dir().join(&*name);
            let current = match fsutil::read_private(&path, RECORD_READ_CAP) {
                Ok(b) => b,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    return Err(ProjectionError::Record {
                        path,
                        why: e.to_string(),
                    })
                }
            };
            let sha = fsutil::sha256_hex(&current);
            let Some(Some(new)) = to.get(sha.as_str()) else {
                // Already the new body (a replay resolved it through the
                // forwards, or a re-application after a crash): its summary
                // may still be the old one.
                if let (true, Ok((meta, body))) =
                    (done.contains(sha.as_str()), record::parse(&current))
                {
                    summaries.push(summary::facts(&name, &meta, body));
                }
                continue;
            };
            let file = body::read(self.lane, &new.sha256)?;
            let keys = |b: &[u8]| record::parse(b).ok().map(|(m, _)| record_keys(&m));
            if keys(&current).is_some() && keys(&current) == keys(&file) {
                // The common case: the value was in the text, not in an id.
                // The index stays; the summaries are replaced in one pass.
                let (meta, body) = record::parse(&file).map_err(|e| ProjectionError::Record {
                    path: path.clone(),
                    why: format!("its body does not parse as a record: {e}"),
                })?;
                self.write(&path, &file)?;
                summaries.push(summary::facts(&name, &meta, body));
            } else {
                self.drop_record(index, &name)?;
                self.store_record(index, &name, &file)?;
            }
        }
        replace_summaries(self.lane, &self.pending, summaries)?;
        for name in &f.removed_records {
            self.drop_record(index, &naming::record_name(name))?;
        }
        let mut set = read_forgotten(self.lane);
        for v in &f.values {
            if !set.contains(v) {
                set.push(v.clone());
            }
        }
        // Sorted, so the set's bytes do not depend on the order forgets
        // arrived in (`sync`).
        set.sort_by(|a, b| (&a.sha256, a.len, a.rolling).cmp(&(&b.sha256, b.len, b.rolling)));
        let mut text = serde_json::to_vec(&set).expect("forgotten set serialises");
        text.push(b'\n');
        self.write(&forgotten_path(self.lane), &text)?;
        self.clear_search()
    }

    /// Removes the search index (a lazily rebuilt projection).
    fn clear_search(&self) -> Result<(), ProjectionError> {
        let search = self.lane.index_dir().join("search");
        if fs::symlink_metadata(&search).is_ok() {
            abcd_fsio::remove_tree(&search)?;
        }
        Ok(())
    }

    fn index_record(
        &self,
        index: &Index<'_>,
        name: &str,
        meta: &RecordMeta,
    ) -> Result<(), ProjectionError> {
        for (table, key) in record_keys(meta) {
            index.list_insert(table, &key, name)?;
        }
        Ok(())
    }

    fn unindex_record(
        &self,
        index: &Index<'_>,
        name: &str,
        meta: &RecordMeta,
    ) -> Result<(), ProjectionError> {
        for (table, key) in record_keys(meta) {
            index.list_remove(table, &key, name)?;
        }
        Ok(())
    }

    fn drop_record(&self, index: &Index<'_>, name: &str) -> Result<(), ProjectionError> {
        let path = self.lane.records_dir().join(name);
        let bytes = match fsutil::read_private(&path, RECORD_READ_CAP) {
            Ok(b) => b,
            // Already gone: this is a re-application after a crash.
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => {
                return Err(ProjectionError::Record {
                    path,
                    why: e.to_string(),
                })
            }
        };
        if let Ok((meta, _)) = record::parse(&bytes) {
            self.unindex_record(index, name, &meta)?;
            remove_summary(self.lane, &self.pending, &meta.lineage.session_id, name)?;
        }
        self.remove(&path)?;
        Ok(())
    }

    /// Removes a staged entry: blob, sidecar and index entry.
    fn retire_staged(&self, index: &Index<'_>, stem: &str) -> Result<(), ProjectionError> {
        let dir = self.lane.staging_dir();
        let sidecar_path = dir.join(format!("{stem}.stage.json"));
        if let Some((session, agent, _)) = StageSidecar::read_key(&sidecar_path) {
            let key = staged_key(&session, agent.as_deref());
            index.list_remove("staged", &key, stem)?;
        }
        self.remove(&dir.join(format!("{stem}.raw")))?;
        self.remove(&meta_path(&dir, stem))?;
        self.remove(&sidecar_path)?;
        Ok(())
    }

    fn quarantine(&self, index: &Index<'_>, q: &event::Quarantined) -> Result<(), ProjectionError> {
        let staging = self.lane.staging_dir();
        let quarantine = self.lane.quarantine_dir();
        let stem = self.disk_stem(&q.stem)?;
        let sidecar_from = staging.join(format!("{stem}.stage.json"));
        let sidecar_to = quarantine.join(format!("{stem}.stage.json"));
        let from = if sidecar_from.exists() {
            &sidecar_from
        } else {
            &sidecar_to
        };
        let sidecar = fsutil::read_private(from, SMALL_FILE_CAP);
        let (session_id, agent_id, staged_at) =
            StageSidecar::read_key(from).unwrap_or((String::new(), None, String::new()));
        let note = QuarantineNote {
            schema: 1,
            session_id: session_id.clone(),
            agent_id: agent_id.clone(),
            reason: q.reason.clone(),
            staged_at,
            quarantined_at: clock::rfc3339_nanos(q.quarantined_at_ns),
        };
        let mut text = serde_json::to_vec(&note).expect("note serialises");
        text.push(b'\n');
        // Note first, so a blob in quarantine always has its reason.
        self.write(&quarantine.join(format!("{stem}.quarantine.json")), &text)?;
        let blob_from = staging.join(format!("{stem}.raw"));
        let blob_to = quarantine.join(format!("{stem}.raw"));
        // A blob an older abcd quarantined under an over-long stem.
        let long = quarantine.join(format!("{}.raw", q.stem));
        if stem != q.stem && fs::symlink_metadata(&long).is_ok_and(|m| m.file_type().is_file()) {
            self.rename(&long, &blob_to)?;
        }
        if blob_from.exists() {
            self.rename(&blob_from, &blob_to)?;
        }
        let meta_from = meta_path(&staging, &stem);
        if meta_from.exists() {
            self.rename(&meta_from, &meta_path(&quarantine, &stem))?;
        }
        // The view moves as it is (its bytes, not a re-rendering).
        if let Ok(bytes) = &sidecar {
            self.write(&sidecar_to, bytes)?;
        }
        self.remove(&sidecar_from)?;
        if !session_id.is_empty() {
            index.list_remove(
                "staged",
                &staged_key(&session_id, agent_id.as_deref()),
                &stem,
            )?;
        }
        Ok(())
    }
}

/// Every body a forget replaced, from the journal's `Forgotten` events.
fn forwards(
    journal: &Journal,
) -> Result<std::collections::HashMap<String, Option<BodyRef>>, ProjectionError> {
    let mut map = std::collections::HashMap::new();
    for frame in journal.read_from(&journal.start())? {
        let frame = frame?;
        if frame.kind != abcd_journal::FrameKind::Event {
            continue;
        }
        if let Ok(env) = event::decode(&frame.payload) {
            if let Event::Forgotten(f) = env.event.effective().as_ref() {
                for r in &f.rewrites {
                    map.insert(r.from.clone(), r.to.clone());
                }
            }
        }
    }
    Ok(map)
}

fn forgotten_path(lane: &Lane) -> PathBuf {
    lane.index_dir().join("forgotten.json")
}

/// The repository's forgotten values, by digest (`index/forgotten.json`, a
/// projection of the `Forgotten` events): every later capture redacts them.
pub fn read_forgotten(lane: &Lane) -> Vec<ValueDigest> {
    fsutil::read_private(&forgotten_path(lane), SMALL_FILE_CAP)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// After this many events past the last synced checkpoint, a catch-up syncs
/// the file system and advances it, bounding the re-application work after a
/// power loss (re-applying is idempotent, so this is only about time).
pub const SYNC_EVERY_EVENTS: u64 = 1024;

fn checkpoint_path(lane: &Lane) -> PathBuf {
    lane.index_dir().join("checkpoint.json")
}

fn synced_checkpoint_path(lane: &Lane) -> PathBuf {
    lane.index_dir().join("checkpoint.synced.json")
}

/// The current kernel boot (Linux `boot_id`); empty where unavailable, in
/// which case every checkpoint is trusted as on a system without the file.
pub fn boot_id() -> &'static str {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
}

fn read_cp(path: &Path) -> Option<Checkpoint> {
    try_read_cp(path).ok().flatten()
}

/// The checkpoint at `path`: `Ok(None)` when absent, unparsable or of
/// another layout (the catch-up then restarts or rebuilds); `Err` when a
/// file is there that the store may not use (a symlink, another account's
/// file): that is refused, never silently replaced by a rebuild.
fn try_read_cp(path: &Path) -> Result<Option<Checkpoint>, FsError> {
    let b = match fsutil::read_private(path, SMALL_FILE_CAP) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(c) = serde_json::from_slice::<Checkpoint>(&b) else {
        return Ok(None);
    };
    Ok((c.format == PROJECTION_FORMAT
        || c.format == TOKENLESS_FORMAT
        || c.format == SUMMARYLESS_FORMAT
        || c.format == UNBOUNDED_NAMES_FORMAT)
        .then_some(c))
}
/// True when a projection directory holds a name an older abcd derived
/// from an over-long id: a record or session note over
/// [`naming::MAX_NAME_BYTES`], or a staging or quarantine file whose stem is
/// over [`naming::MAX_STEM_BYTES`]. The current layout would name it
/// differently, so the projections are rebuilt (the rebuild keeps nothing
/// it does not reproduce, and moves such blobs to their bounded names).
fn names_over_the_bound(lane: &Lane) -> Result<bool, ProjectionError> {
    let over = |dir: PathBuf, stem_of: &dyn Fn(&str) -> Option<usize>, max: usize| {
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("list", &dir)(e)),
        };
        for entry in rd {
            let entry = entry.map_err(io_err("list", &dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with('.') && stem_of(&name).is_some_and(|n| n > max) {
                return Ok(true);
            }
        }
        Ok(false)
    };
    let whole = |n: &str| Some(n.len());
    let stem = |n: &str| {
        [".raw", ".stage.json", ".quarantine.json"]
            .iter()
            .find_map(|x| n.strip_suffix(x))
            .map(str::len)
    };
    Ok(over(lane.records_dir(), &whole, naming::MAX_NAME_BYTES)?
        || over(lane.sessions_dir(), &whole, naming::MAX_NAME_BYTES)?
        || over(lane.staging_dir(), &stem, naming::MAX_STEM_BYTES)?
        || over(lane.quarantine_dir(), &stem, naming::MAX_STEM_BYTES)?)
}

/// The last synced checkpoint: every projection file it covers was on disk
/// when it was written.
pub fn read_synced_checkpoint(lane: &Lane) -> Option<Checkpoint> {
    read_cp(&synced_checkpoint_path(lane))
}

/// Makes every projection file written so far durable (one `syncfs`), then
/// records the latest checkpoint as synced. Caller holds the store lock.
pub fn sync(lane: &Lane) -> Result<(), ProjectionError> {
    let Some(latest) = read_checkpoint(lane) else {
        return Ok(());
    };
    if read_synced_checkpoint(lane).is_some_and(|s| s.seq == latest.seq && s.hash == latest.hash) {
        return Ok(());
    }
    sync_tree(lane)?;
    let mut text = serde_json::to_vec(&latest).expect("checkpoint serialises");
    text.push(b'\n');
    fsutil::write_atomic(&synced_checkpoint_path(lane), &text, true)?;
    Ok(())
}

/// Reads the checkpoint; `None` when absent or written by another layout.
pub fn read_checkpoint(lane: &Lane) -> Option<Checkpoint> {
    read_cp(&checkpoint_path(lane))
}

/// The checkpoint file's size: its JSON (~200 bytes with a Linux boot id)
/// padded with spaces, so every update is one write over the same bytes.
pub const CHECKPOINT_BYTES: usize = 256;

fn write_checkpoint(lane: &Lane, p: &Position) -> Result<(), ProjectionError> {
    let mut text =
        serde_json::to_vec(&Checkpoint::from_position(p)).expect("checkpoint serialises");
    // Never cut: a longer checkpoint (not one Linux writes) is written
    // whole, through the fallback below.
    if text.len() < CHECKPOINT_BYTES {
        text.resize(CHECKPOINT_BYTES - 1, b' ');
    }
    text.push(b'\n');
    // Not fsynced, like the projection files it covers: it is trusted only
    // within the boot that wrote it (see `Checkpoint::boot_id`), and a lost
    // checkpoint only makes the next open re-apply (idempotently) what it
    // already applied. Rewritten in place (one write within one page, under
    // the store lock, which every reader that acts on it holds): a temporary
    // file and rename per event would create and free an inode per hook.
    // A power loss that tears it leaves a checkpoint of another boot or one
    // that does not parse — either way the synced checkpoint is used.
    let path = checkpoint_path(lane);
    if fsutil::overwrite_in_place(&path, &text).is_err() {
        fsutil::write_atomic(&path, &text, false)?;
    }
    Ok(())
}

/// Applies every journal event after the checkpoint. Caller holds the store
/// lock. Falls back to a full rebuild when the checkpoint does not match the
/// journal (a repair rewrote it) or is missing while projections exist.
pub fn catch_up(lane: &Lane, journal: &Journal) -> Result<CatchUp, ProjectionError> {
    // A rebuild that stopped midway (a crash, a full disk) left the old
    // record directory set aside: the projections are partial whatever the
    // checkpoint says, so the rebuild is finished before anything else.
    if fs::symlink_metadata(set_aside_dir(lane)).is_ok() {
        return rebuild(lane, journal);
    }
    // A checkpoint written in another boot may cover projection writes that
    // a power loss dropped: resume from the last synced one instead.
    let (trusted, from_latest) = match try_read_cp(&checkpoint_path(lane))? {
        Some(c) if c.boot_id == boot_id() => (Some(c), true),
        _ => (try_read_cp(&synced_checkpoint_path(lane))?, false),
    };
    // A checkpoint of the layout before names were bounded: rebuild only
    // if an over-long name is actually there, else carry on in this layout.
    let mut upgraded = false;
    if trusted
        .as_ref()
        .is_some_and(|c| c.format == UNBOUNDED_NAMES_FORMAT)
    {
        if names_over_the_bound(lane)? {
            return rebuild(lane, journal);
        }
        upgraded = true;
    }
    if trusted
        .as_ref()
        .is_some_and(|c| c.format != PROJECTION_FORMAT)
    {
        backfill_summaries(lane)?;
        upgraded = true;
    }
    let start = match trusted.and_then(|c| c.position()) {
        Some(p) => p,
        None => {
            if projections_present(lane)? {
                return rebuild(lane, journal);
            }
            journal.start()
        }
    };
    let iter = match journal.read_from(&start) {
        Ok(it) => it,
        Err(JournalError::CheckpointMismatch { .. }) => return rebuild(lane, journal),
        Err(e) => return Err(e.into()),
    };
    let mut out = CatchUp {
        head_seq: start.seq,
        ..CatchUp::default()
    };
    let applied = apply_frames(lane, journal, iter, &mut out, Pass::CatchUp);
    // Bodies stored for these events were read (or will be read from disk).
    body::forget_just_stored();
    let mut last = match applied {
        Ok(last) => last,
        // A projection file an event builds on is damaged or was removed by
        // hand: the journal still knows the truth.
        Err(ProjectionError::Record { .. }) => return rebuild(lane, journal),
        Err(e) => return Err(e),
    };
    if last.is_none() && (!from_latest || upgraded) {
        last = Some(start);
    }
    if let Some(p) = last {
        write_checkpoint(lane, &p)?;
        let synced = read_synced_checkpoint(lane).map(|c| c.seq).unwrap_or(0);
        if p.seq.saturating_sub(synced) >= SYNC_EVERY_EVENTS {
            sync(lane)?;
        }
    }
    Ok(out)
}

/// Which pass applies frames: it decides what a missing or damaged
/// projection file an event builds on means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Incremental: the file was damaged or removed by hand, so the caller
    /// rebuilds everything from the journal.
    CatchUp,
    /// From the start into empty directories: the journal itself does not
    /// produce that file (an earlier event was a fault), so it is a fault
    /// of this event too.
    Rebuild,
}

/// Applies every event frame of `frames` in order (repair frames carry no
/// event); returns the position after the last frame read. An event that
/// cannot be applied for a reason of its own (see
/// `ProjectionError::is_per_event`) is recorded in `index/faults.json` and
/// skipped; any other failure stops the pass with its error, before the
/// checkpoint moves, so the next run retries it.
fn apply_frames(
    lane: &Lane,
    journal: &Journal,
    frames: abcd_journal::FrameIter,
    out: &mut CatchUp,
    pass: Pass,
) -> Result<Option<Position>, ProjectionError> {
    let projector = Projector::new(lane, journal);
    let mut last = None;
    for frame in frames {
        let frame = frame?;
        if frame.kind == abcd_journal::FrameKind::Event {
            let mut name = None;
            let applied = event::decode(&frame.payload)
                .map_err(|source| ProjectionError::Event {
                    seq: frame.seq,
                    source,
                })
                .and_then(|env| {
                    name = Some(env.event.name().to_owned());
                    projector.apply(frame.seq, &env)
                });
            match applied {
                Ok(()) => out.applied += 1,
                Err(e)
                    if e.is_per_event()
                        || (pass == Pass::Rebuild
                            && matches!(e, ProjectionError::Record { .. })) =>
                {
                    let lane_prefix = format!("{}/", lane.dir.display());
                    let fault = Fault {
                        seq: frame.seq,
                        event: name,
                        reason: e.to_string().replace(&lane_prefix, ""),
                    };
                    if record_fault(lane, &fault)? {
                        out.faults.push(fault);
                    }
                }
                Err(e) => return Err(e),
            }
            if projector.pending.over_cap() {
                projector.flush()?;
            }
        }
        out.head_seq = frame.seq;
        last = Some(frame.end);
    }
    projector.flush()?;
    Ok(last)
}

fn projections_present(lane: &Lane) -> Result<bool, ProjectionError> {
    let dir = lane.records_dir();
    let mut it = fs::read_dir(&dir).map_err(io_err("list", &dir))?;
    Ok(it.next().is_some())
}

/// Rebuilds every projection from the whole journal. Caller holds the store
/// lock. Old projection files are removed first (blobs are kept: they are not
/// projections; record files are set aside and compared, never deleted
/// unseen), and the result is made durable with one `syncfs` at the end.
pub fn rebuild(lane: &Lane, journal: &Journal) -> Result<CatchUp, ProjectionError> {
    // Record files are what users read: the old directory is set aside and
    // compared after the replay, so a file the journal does not reproduce is
    // kept (in `records.unjournaled/`), never deleted.
    let before = set_aside_dir(lane);
    if !before.exists() {
        fsutil::rename(&lane.records_dir(), &before)?;
    } else {
        // An interrupted rebuild: what is in records/ now is its partial
        // output, and the set-aside copy still holds the originals.
        let records = lane.records_dir();
        abcd_fsio::remove_tree(&records)?;
    }
    fsutil::ensure_private_dir(&lane.records_dir())?;
    clear_projections(lane)?;
    let mut out = CatchUp {
        rebuilt: true,
        ..CatchUp::default()
    };
    let start = journal.start();
    let last = apply_frames(
        lane,
        journal,
        journal.read_from(&start)?,
        &mut out,
        Pass::Rebuild,
    )?;
    body::forget_just_stored();
    out.set_aside = reconcile_set_aside(lane, &before)?;
    write_checkpoint(lane, &last.unwrap_or(start))?;
    sync(lane)?;
    Ok(out)
}

/// Where a rebuild keeps the old record directory while it runs; its
/// presence means a rebuild is in progress or was interrupted.
fn set_aside_dir(lane: &Lane) -> PathBuf {
    lane.dir.join("records.before-rebuild")
}

/// Directory where a rebuild keeps the record files the journal does not
/// reproduce (never deleted by abcd).
pub const UNJOURNALED_DIR: &str = "records.unjournaled";

/// Names of the record files a rebuild has set aside in
/// `records.unjournaled/` (sorted; empty when there is none). Every verb
/// that reports on the store's health lists them: they are records the
/// journal no longer holds.
pub fn unjournaled_records(lane: &Lane) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(lane.dir.join(UNJOURNALED_DIR))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The one-line notice for [`unjournaled_records`] (None when there is none).
pub fn unjournaled_notice(lane: &Lane, names: &[String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    Some(format!(
        "{} record file(s) in {} are not reproduced by the journal: {}; inspect them, then keep what you need outside the store and delete the rest (abcd never reads or deletes them)",
        names.len(),
        lane.dir.join(UNJOURNALED_DIR).display(),
        names.join(", ")
    ))
}

/// Compares the set-aside record directory with the rebuilt one: files the
/// replay reproduced (same metadata and body) are dropped, every other file
/// moves to `records.unjournaled/`. Returns the names kept.
pub fn reconcile_set_aside(lane: &Lane, before: &Path) -> Result<Vec<String>, ProjectionError> {
    let mut kept = Vec::new();
    let rd = match fs::read_dir(before) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(kept),
        Err(e) => return Err(io_err("list", before)(e)),
    };
    let same = |a: &[u8], b: &[u8]| -> bool {
        a == b
            || matches!((record::parse(a), record::parse(b)), (Ok((ma, ba)), Ok((mb, bb))) if ma == mb && ba == bb)
    };
    for entry in rd {
        let entry = entry.map_err(io_err("list", before))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = entry.path();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let reproduced = is_file
            // An older abcd's over-long name is reproduced under its
            // bounded name (`naming::record_name`).
            && match (
                fsutil::read_private(&old, RECORD_READ_CAP),
                fsutil::read_private(
                    &lane.records_dir().join(&*naming::record_name(&name)),
                    RECORD_READ_CAP,
                ),
            ) {
                (Ok(a), Ok(b)) => same(&a, &b),
                _ => false,
            };
        if reproduced || abcd_fsio::temp_writer_pid(&name).is_some() {
            fsutil::remove_file_if_exists(&old)?;
            continue;
        }
        let dir = lane.dir.join(UNJOURNALED_DIR);
        fsutil::ensure_private_dir(&dir)?;
        let mut dest = dir.join(&name);
        let mut n = 1;
        while dest.exists() {
            dest = dir.join(format!("{name}.{n}"));
            n += 1;
        }
        fsutil::rename(&old, &dest)?;
        kept.push(name);
    }
    abcd_fsio::remove_dir_if_exists(before)?;
    Ok(kept)
}

fn clear_projections(lane: &Lane) -> Result<(), ProjectionError> {
    let remove_matching =
        |dir: PathBuf, keep: &dyn Fn(&str) -> bool| -> Result<(), ProjectionError> {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_err("list", &dir)(e)),
            };
            for entry in rd {
                let entry = entry.map_err(io_err("list", &dir))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if keep(&name) {
                    continue;
                }
                let path = entry.path();
                let ft = entry.file_type().map_err(io_err("stat", &path))?;
                if ft.is_dir() {
                    abcd_fsio::remove_tree(&path)?;
                } else {
                    fsutil::remove_file_if_exists(&path)?;
                }
            }
            Ok(())
        };
    remove_matching(lane.index_dir(), &|_| false)?;
    remove_matching(lane.sessions_dir(), &|_| false)?;
    // Blobs stay; the staging view and quarantine notes are projections.
    remove_matching(lane.staging_dir(), &|n| !n.ends_with(".stage.json"))?;
    remove_matching(lane.quarantine_dir(), &|n| {
        !(n.ends_with(".stage.json") || n.ends_with(".quarantine.json"))
    })?;
    fsutil::remove_file_if_exists(&lane.gap_marker_path())?;
    Ok(())
}

fn sync_tree(lane: &Lane) -> Result<(), ProjectionError> {
    // One syncfs flushes every projection file written without a per-file
    // sync (thousands of them after a big rebuild) in a single call.
    abcd_fsio::sync_fs(&lane.dir)?;
    Ok(())
}

#[cfg(test)]
mod list_tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn write(p: &Path, bytes: &[u8]) {
        abcd_fsio::write_atomic(p, bytes, false).unwrap();
    }

    /// Adds `item` to the list at `p` the way `Index::list_insert` does
    /// (sorted, no duplicates), through a pass, and flushes it.
    fn insert(p: &Path, item: &str) {
        let pd = Pending::default();
        pd.with_list(p, |items| {
            match items.binary_search_by(|i| i.as_str().cmp(item)) {
                Ok(_) => ((), false),
                Err(at) => {
                    items.insert(at, item.to_owned());
                    ((), true)
                }
            }
        })
        .unwrap();
        pd.flush().unwrap();
    }

    #[test]
    fn a_list_that_only_grows_is_appended_in_place_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l");
        write(&p, b"20260101-a\n20260102-b\n");
        let ino = fs::metadata(&p).unwrap().ino();
        insert(&p, "20260103-c");
        assert_eq!(
            fs::read(&p).unwrap(),
            b"20260101-a\n20260102-b\n20260103-c\n"
        );
        assert_eq!(
            fs::metadata(&p).unwrap().ino(),
            ino,
            "appended, not replaced"
        );
        // An item that sorts before the last one: the file is rewritten,
        // to exactly what a rewrite from scratch gives.
        insert(&p, "20260101-z");
        assert_eq!(
            fs::read(&p).unwrap(),
            b"20260101-a\n20260101-z\n20260102-b\n20260103-c\n"
        );
        assert_ne!(fs::metadata(&p).unwrap().ino(), ino);
        // A new list is created whole.
        let q = dir.path().join("m");
        insert(&q, "x");
        assert_eq!(fs::read(&q).unwrap(), b"x\n");
    }

    #[test]
    fn a_list_not_in_its_canonical_form_is_rewritten_never_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l");
        for (on_disk, want) in [
            // A torn append: the fragment without its newline is dropped.
            (&b"a\nb\nc-tor"[..], &b"a\nb\nd\n"[..]),
            // A blank line, a CR: rewritten in the canonical form.
            (b"a\n\nb\n", b"a\nb\nd\n"),
            (b"a\r\nb\n", b"a\nb\nd\n"),
            // Bytes that are not UTF-8 are never kept by an append.
            (b"a\nb\xff\n", "a\nb\u{fffd}\nd\n".as_bytes()),
        ] {
            write(&p, on_disk);
            let ino = fs::metadata(&p).unwrap().ino();
            insert(&p, "d");
            assert_eq!(
                fs::read(&p).unwrap(),
                want,
                "{:?}",
                String::from_utf8_lossy(on_disk)
            );
            assert_ne!(fs::metadata(&p).unwrap().ino(), ino);
        }
    }
}
