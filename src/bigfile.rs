//! Big transcripts: a transcript over the in-memory capture cap
//! ([`RAW_CAP`]) captured with bounded memory, as a run of part records.
//!
//! Owns: the threshold between the in-memory path (`capture::prepare` on
//! the whole file) and this one ([`streamed`]); the head read that gives a
//! big file's shape and ids without reading it ([`read_head`]); the cut
//! into parts; the streamed redaction; each part's decision and journaling
//! ([`capture_file`]).
//!
//! The representation: the transcript is read once, line by line, and cut
//! after the first line that brings a part to [`PART_BYTES`] raw bytes (the
//! last part is shorter). Each part is an ordinary record of the same
//! session, agent and kind, whose `source_sha256` is the digest of the
//! part's own raw bytes, captured (`Captured`, no new event variant) as
//! soon as it is complete. The cut depends only on the raw bytes, so the
//! same file always gives the same parts whatever the redaction
//! configuration, and a file that grew gives the same parts up to its old
//! last one: a re-run stores nothing new for the parts it already holds
//! (their idempotency keys) and the grown last part supersedes the old one
//! (a strict extension of the same stream, as for any record).
//!
//! Redaction runs once over the whole stream (`LineRedactor`): the values
//! found and the conversation state (a secret-reading command and the
//! output that answers it) carry from each line to every later line, in
//! every later part. What the whole-text path does and this one cannot: a
//! value first recognised on a later line is not swept from the earlier
//! lines where no rule recognises it on its own.
//!
//! Invariants:
//! - Memory is bounded by one part (redacted), one line (at most
//!   [`LINE_CAP`]) and the redactor's found values, whatever the file's
//!   size: nothing holds the file whole.
//! - Each part is decided under the store lock exactly as `capture::commit`
//!   decides a record (idempotency key, forgotten values, supersession of
//!   a prefix in the same stream); the lock is held for one part, never
//!   for the redaction.
//! - A run stopped midway (killed, a refused line) leaves whole parts, each
//!   verified; a re-run finds them by their keys and carries on. A refusal
//!   is reported with the number of parts already stored before it.
//!
//! Must never: store a line the redactor refused; hold the store lock while
//! reading or redacting.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::capture::{self, CaptureResult};
use crate::corpus::{Corpus, CorpusError, Locked};
use crate::event::{CaptureOutcome, Captured, Event};
use crate::fsutil::{self, GuardedReadError};
use crate::lineage::Lineage;
use crate::projection::idem_key;
use crate::record::{self, RecordMeta};
use crate::staging_view::RAW_CAP;

/// Raw bytes per part record: a part ends after the line that reaches it.
/// Small enough that a part, its rendered record and the projection's
/// copy of it stay far below the memory bound; large enough that a 2 GB
/// transcript is a few hundred records.
pub const PART_BYTES: u64 = 8 << 20;

/// The longest line a streamed transcript may hold: a longer one refuses
/// the file (a line is the unit of redaction and is held whole, with its
/// redacted copy). Claude Code spills large tool outputs to `tool-results/`
/// files, so its lines stay far below this.
pub const LINE_CAP: usize = 32 << 20;

/// What [`read_head`] reads first: enough for the ids (`shape` reads at
/// most `MAX_ID_LINES` lines).
pub const HEAD_BYTES: u64 = 1 << 20;

/// Test builds only: lower the threshold and the part size so the tests
/// exercise this path on small files (never read by a release build).
const TEST_OVER_ENV: &str = "ABCD_TEST_STREAM_OVER";
const TEST_PART_ENV: &str = "ABCD_TEST_PART_BYTES";

fn test_knob(name: &str) -> Option<u64> {
    if cfg!(debug_assertions) {
        std::env::var(name).ok()?.parse().ok()
    } else {
        None
    }
}

/// Files larger than this take the streamed path.
pub fn threshold() -> u64 {
    test_knob(TEST_OVER_ENV).unwrap_or(RAW_CAP)
}

/// Whether a file of `size` bytes is captured by [`capture_file`].
pub fn streamed(size: u64) -> bool {
    size > threshold()
}

fn part_bytes() -> u64 {
    test_knob(TEST_PART_ENV).unwrap_or(PART_BYTES).max(1)
}

#[derive(Debug, Error)]
pub enum BigError {
    #[error(transparent)]
    Open(#[from] GuardedReadError),
    #[error("reading {path} failed after {offset} bytes: {source}")]
    Read {
        path: String,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a Claude Code transcript: {why}; nothing was stored")]
    NotTranscript {
        path: String,
        why: crate::shape::NotTranscript,
    },
    #[error("{path}: the first line is longer than the {cap}-byte line cap; nothing was stored")]
    HeadTooLong { path: String, cap: usize },
    /// Retrying the same bytes can never succeed (but for a degraded
    /// scanner). `parts_stored` parts before the refused line stay.
    #[error("{path}: redaction refused line {line} ({reason}); {parts_stored} part(s) before it are stored")]
    Refused {
        path: String,
        line: u64,
        reason: String,
        deterministic: bool,
        parts_stored: usize,
    },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
}

impl BigError {
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            BigError::Refused { .. } | BigError::HeadTooLong { .. }
        )
    }
}

/// The first complete lines of a file (at least [`HEAD_BYTES`] when it is
/// that long, and always its whole first line up to [`LINE_CAP`]), for the
/// shape check and the ids, and the file's size when opened.
pub fn read_head(path: &Path) -> Result<(Vec<u8>, u64), BigError> {
    let (f, size) = fsutil::guarded_open(path)?;
    let name = || path.display().to_string();
    let mut r = BufReader::with_capacity(64 << 10, f.take(LINE_CAP as u64 + HEAD_BYTES));
    let mut head = Vec::new();
    // The opening first: what is not transcript-shaped (a binary, a sparse
    // file of zeros) is refused on its first bytes, never read further.
    let opening = r.fill_buf().map_err(|source| BigError::Read {
        path: name(),
        offset: 0,
        source,
    })?;
    crate::shape::check_head(opening, opening.len() as u64 >= size)
        .map_err(|why| BigError::NotTranscript { path: name(), why })?;
    loop {
        let mut line = Vec::new();
        let n = read_line(&mut r, &mut line, LINE_CAP).map_err(|e| match e {
            LineError::TooLong => BigError::HeadTooLong {
                path: name(),
                cap: LINE_CAP,
            },
            LineError::Io(source) => BigError::Read {
                path: name(),
                offset: head.len() as u64,
                source,
            },
        })?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&line);
        if head.len() as u64 >= HEAD_BYTES {
            break;
        }
    }
    Ok((head, size))
}

enum LineError {
    TooLong,
    Io(std::io::Error),
}

/// Reads one line (with its newline, if any) into `buf`; 0 at the end.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>, cap: usize) -> Result<usize, LineError> {
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineError::Io(e)),
        };
        if avail.is_empty() {
            return Ok(buf.len());
        }
        let (take, done) = match memchr::memchr(b'\n', avail) {
            Some(p) => (p + 1, true),
            None => (avail.len(), false),
        };
        if buf.len() + take > cap {
            return Err(LineError::TooLong);
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
        if done {
            return Ok(buf.len());
        }
    }
}

/// One part's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Part {
    pub record: String,
    pub wrote: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<String>,
    /// Raw bytes of the transcript in this part.
    pub bytes: u64,
    /// The part's idempotency key (what the ingest cache remembers).
    #[serde(skip)]
    pub idem: String,
}

/// What [`capture_file`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Raw bytes read (the whole file as it was while read).
    pub bytes: u64,
    /// SHA-256 of those bytes.
    pub source_sha256: String,
    pub parts: Vec<Part>,
    pub redacted_secrets: u64,
    pub redacted_home_paths: u64,
}

impl Outcome {
    /// Some part was newly stored.
    pub fn wrote(&self) -> bool {
        self.parts.iter().any(|p| p.wrote)
    }

    /// The record holding the file's last part (its newest bytes).
    pub fn last_record(&self) -> &str {
        self.parts.last().map(|p| p.record.as_str()).unwrap_or("")
    }
}

/// The part being filled.
struct Filling {
    raw: Sha256,
    raw_bytes: u64,
    body: Vec<u8>,
    secrets: u64,
    homes: u64,
    first_line: u64,
    /// Its number in the file, from 1 (the record's `part`).
    number: u32,
}

impl Filling {
    fn new(first_line: u64, number: u32) -> Filling {
        Filling {
            raw: Sha256::new(),
            raw_bytes: 0,
            body: Vec::new(),
            secrets: 0,
            homes: 0,
            first_line,
            number,
        }
    }
}

/// Captures the transcript at `path` part by part (see the module notes):
/// reads it once, redacts it line by line with `scanner` and commits each
/// part as it completes, as native records. `lineage` must be the file's own (the caller read
/// it from [`read_head`]); its scalars are redacted here as the in-memory
/// path redacts them. `progress(bytes)` is called after every part.
pub fn capture_file(
    corpus: &Corpus,
    scanner: &abcd_redact::Scanner,
    lineage: &Lineage,
    path: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, BigError> {
    let kind = record::KIND_NATIVE;
    let name = path.display().to_string();
    let refused =
        |line: u64, reason: String, deterministic: bool, parts: usize| BigError::Refused {
            path: name.clone(),
            line,
            reason,
            deterministic,
            parts_stored: parts,
        };
    let lineage = redacted_lineage(scanner, lineage).map_err(|e| match e {
        capture::CaptureError::Refused {
            reason,
            deterministic,
        } => refused(0, reason, deterministic, 0),
        capture::CaptureError::Corpus(c) => BigError::Corpus(c),
    })?;
    let (f, _) = fsutil::guarded_open(path)?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut redactor = scanner
        .line_redactor()
        .map_err(|e| refused(0, e.to_string(), e.is_deterministic(), 0))?;
    let mut whole = Sha256::new();
    let mut total = 0u64;
    let mut line_no = 0u64;
    let mut part = Filling::new(1, 1);
    let mut line = Vec::new();
    let mut out = Outcome {
        session_id: lineage.session_id.clone(),
        agent_id: lineage.agent_id.clone(),
        bytes: 0,
        source_sha256: String::new(),
        parts: Vec::new(),
        redacted_secrets: 0,
        redacted_home_paths: 0,
    };
    let cut = part_bytes();
    loop {
        line.clear();
        let n = read_line(&mut r, &mut line, LINE_CAP).map_err(|e| match e {
            LineError::TooLong => refused(
                line_no + 1,
                format!("the line is longer than the {LINE_CAP}-byte line cap"),
                true,
                out.parts.len(),
            ),
            LineError::Io(source) => BigError::Read {
                path: name.clone(),
                offset: total,
                source,
            },
        })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if let Err(e) = std::str::from_utf8(&line) {
            return Err(refused(
                line_no,
                format!(
                    "the transcript is not valid UTF-8 (first bad byte at offset {})",
                    total + e.valid_up_to() as u64
                ),
                true,
                out.parts.len(),
            ));
        }
        whole.update(&line);
        part.raw.update(&line);
        part.raw_bytes += n as u64;
        total += n as u64;
        let stored = out.parts.len();
        let red = redactor
            .line(&line)
            .map_err(|e| refused(line_no, e.to_string(), e.is_deterministic(), stored))?;
        part.body.extend_from_slice(red);
        for f in redactor.findings() {
            if f.kind.contains("home") {
                part.homes += 1;
            } else {
                part.secrets += 1;
            }
        }
        if part.raw_bytes >= cut {
            let next = Filling::new(line_no + 1, part.number + 1);
            let done = std::mem::replace(&mut part, next);
            out.redacted_secrets += done.secrets;
            out.redacted_home_paths += done.homes;
            let p = commit_part(corpus, &lineage, kind, &name, done)?;
            out.parts.push(p);
            progress(total);
        }
    }
    if part.raw_bytes > 0 {
        out.redacted_secrets += part.secrets;
        out.redacted_home_paths += part.homes;
        let p = commit_part(corpus, &lineage, kind, &name, part)?;
        out.parts.push(p);
        progress(total);
    }
    out.bytes = total;
    out.source_sha256 = hex::encode(whole.finalize());
    Ok(out)
}

/// The lineage scalars redacted as `capture::prepare` redacts them (an id a
/// rule matches is refused; `agent_type` and `spawn_tool_use_id` are
/// stored redacted). The body is redacted separately, as a stream.
fn redacted_lineage(
    scanner: &abcd_redact::Scanner,
    lineage: &Lineage,
) -> Result<Lineage, capture::CaptureError> {
    // `prepare` on an empty body does exactly the scalar part.
    let p = capture::prepare(scanner, lineage, b"", "", record::KIND_NATIVE)?;
    Ok(p.meta.lineage)
}

/// Decides and journals one part under the store lock.
fn commit_part(
    corpus: &Corpus,
    lineage: &Lineage,
    kind: &str,
    path: &str,
    part: Filling,
) -> Result<Part, BigError> {
    let sha = hex::encode(part.raw.finalize());
    let mut body = match String::from_utf8(part.body) {
        Ok(s) => s,
        // Redaction of valid UTF-8 gives valid UTF-8; a failure here is a
        // bug, refused rather than stored lossy.
        Err(_) => {
            return Err(BigError::Refused {
                path: path.to_owned(),
                line: part.first_line,
                reason: "the redacted part is not valid UTF-8".into(),
                deterministic: true,
                parts_stored: 0,
            })
        }
    };
    if !body.ends_with('\n') {
        body.push('\n');
    }
    let mut meta = RecordMeta::native(lineage, &corpus.lane.root_sha, 0, &sha);
    meta.schema = record::SCHEMA_LINEAGE;
    meta.source_kind = kind.to_owned();
    meta.redacted_secrets = part.secrets;
    meta.redacted_home_paths = part.homes;
    meta.part = Some(part.number);
    let locked = corpus.lock()?;
    let (event, r) = decide_part(&locked, meta, body)?;
    if let Some(event) = event {
        locked.append(&event)?;
    }
    let agent = lineage.agent_id.as_deref();
    Ok(Part {
        record: r.record,
        wrote: r.wrote,
        superseded: r.superseded,
        bytes: part.raw_bytes,
        idem: idem_key(&sha, &lineage.session_id, agent, kind),
    })
}

/// Capture's decision for one part ([`capture::decide_record`]): nothing
/// is journaled for a part already stored (there is no staged entry to
/// retire); a new part's body is stored durably before its event.
fn decide_part(
    locked: &Locked<'_>,
    mut meta: RecordMeta,
    mut body: String,
) -> Result<(Option<Event>, CaptureResult), BigError> {
    let decision = capture::decide_record(locked, &mut meta, &mut body)
        .map_err(|e| BigError::Corpus(e.into()))?;
    let (name, supersedes) = match decision {
        capture::Decision::Already(name) => {
            return Ok((None, CaptureResult::of(name, false, Vec::new(), &meta)))
        }
        capture::Decision::New { name, supersedes } => (name, supersedes),
    };
    let r = CaptureResult::of(name.clone(), true, supersedes.clone(), &meta);
    let file = record::render(&meta, body.as_bytes());
    drop(body);
    let body = crate::body::put_owned(locked.lane(), file, true).map_err(CorpusError::from)?;
    let event = Event::Captured(Box::new(Captured {
        outcome: CaptureOutcome::Stored {
            record_name: name,
            body,
            supersedes,
        },
        retires: None,
        extended: false,
    }));
    Ok((Some(event), r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_cap_is_refused_not_cut() {
        let mut r = std::io::BufReader::with_capacity(4, &b"abcdefgh\nij"[..]);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut r, &mut buf, 5),
            Err(LineError::TooLong)
        ));
        let mut r = std::io::BufReader::with_capacity(4, &b"abcdefgh\nij"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 9).ok(), Some(9));
        assert_eq!(buf, b"abcdefgh\n");
        buf.clear();
        assert_eq!(read_line(&mut r, &mut buf, 9).ok(), Some(2));
        buf.clear();
        assert_eq!(read_line(&mut r, &mut buf, 9).ok(), Some(0));
    }

    #[test]
    fn a_head_is_whole_lines_and_refuses_what_is_not_a_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let zeros = dir.path().join("zeros.jsonl");
        std::fs::File::create(&zeros)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        assert!(matches!(
            read_head(&zeros),
            Err(BigError::NotTranscript { .. })
        ));
        let t = dir.path().join("t.jsonl");
        let line = "{\"sessionId\":\"s\",\"type\":\"user\"}\n";
        std::fs::write(&t, line.repeat(100_000)).unwrap();
        let (head, size) = read_head(&t).unwrap();
        assert_eq!(size, (line.len() * 100_000) as u64);
        assert!(head.len() as u64 >= HEAD_BYTES && head.len() < HEAD_BYTES as usize + line.len());
        assert!(head.ends_with(b"\n"));
    }
}
