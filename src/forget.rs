//! Forget: remove a value (or whole records) from every byte a repository's
//! store holds, as one journaled event.
//!
//! Owns: `history forget` — the scan of every body, the rewritten bodies,
//! the `Forgotten` event, the deletion of the old bodies — and the
//! forgotten-value set a later capture redacts (`redact_forgotten`).
//!
//! Invariants:
//! - The event names what it removed by digest only: the value's length,
//!   SHA-256 and rolling hash (the prefilter a later capture uses to find it
//!   again), and every replaced body `from` → `to`. Never the value.
//! - Order: new bodies written durably, then the event appended (and
//!   applied: records rewritten, the search index cleared), then the old
//!   bodies deleted. A crash before the append changes nothing a reader
//!   sees (the new bodies are unreferenced and swept); a crash after it
//!   leaves old bodies that `journal verify` reports as unreferenced (never
//!   "clean") and that a re-run of forget, or `journal repair --yes`,
//!   deletes.
//! - Replay reads a forgotten body's replacement through the journal's
//!   `Forgotten` events (`projection::Projector`), so a rebuild reproduces
//!   the forgotten state byte for byte.
//! - A damaged journal is refused with its verdict; the store lock
//!   serialises forget with drains and hooks.

use std::collections::BTreeSet;

use abcd_journal::{VerifyOptions, VerifyStatus};
use serde::Serialize;
use thiserror::Error;

use crate::body::{self, BodyError};
use crate::clock;
use crate::corpus::{Corpus, CorpusError};
use crate::event::{BodyRef, Event, Forgotten, Rewrite, ValueDigest};
use crate::history::{self, HistoryError};
use crate::projection;

/// Shorter values need `--force-short`: a common word would shred every
/// record.
pub const MIN_VALUE_LEN: usize = 8;

pub use crate::forgotten::{digests, spellings, PLACEHOLDER};

#[derive(Debug, Error)]
pub enum ForgetError {
    #[error("history forget: give at least one --value or --record")]
    NothingAsked,
    #[error("history forget: an empty value would match everywhere; give the text to forget")]
    EmptyValue,
    #[error("history forget: a value of {len} characters is shorter than {MIN_VALUE_LEN} and would match inside ordinary words of every record; pass --force-short if you mean it")]
    ShortValue { len: usize },
    #[error("history forget: a value spans lines; forget each line on its own")]
    MultilineValue,
    #[error(transparent)]
    NoRecord(#[from] HistoryError),
    #[error("history forget refuses to write to a damaged store: the journal is {status} ({detail}). Run `abcd journal verify`, then `abcd journal repair --yes`, and forget again")]
    Damaged { status: String, detail: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(transparent)]
    Journal(#[from] abcd_journal::JournalError),
}

/// What to forget in one repository.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub values: Vec<String>,
    pub records: Vec<String>,
    pub force_short: bool,
    pub yes: bool,
}

/// What forget did (or, without `--yes`, would do). Never holds a value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub repository: String,
    pub applied: bool,
    /// Occurrences found, per value in the order given.
    pub occurrences: Vec<u64>,
    /// Live records whose text changes.
    pub records_rewritten: Vec<String>,
    /// Live records removed whole (`--record`).
    pub records_removed: Vec<String>,
    /// Bodies replaced or removed (live and superseded records).
    pub bodies: u64,
    /// Staged entries drained first so no raw copy keeps the value.
    pub staged_drained: u64,
    /// Quarantined raw transcripts that hold a value (only `history
    /// discard` removes those: they are unredacted by definition).
    pub quarantined_holding: Vec<String>,
}

/// Checks a request before anything is read.
pub fn check(req: &Request) -> Result<(), ForgetError> {
    if req.values.is_empty() && req.records.is_empty() {
        return Err(ForgetError::NothingAsked);
    }
    for v in &req.values {
        if v.is_empty() {
            return Err(ForgetError::EmptyValue);
        }
        if v.contains(['\n', '\r']) {
            return Err(ForgetError::MultilineValue);
        }
        let len = v.chars().count();
        if len < MIN_VALUE_LEN && !req.force_short {
            return Err(ForgetError::ShortValue { len });
        }
    }
    Ok(())
}

/// Replaces the literal spellings of the values; counts per value.
fn replace_values(bytes: &[u8], values: &[Vec<String>], counts: &mut [u64]) -> Option<Vec<u8>> {
    let mut cur = bytes.to_vec();
    let mut changed = false;
    for (i, spellings) in values.iter().enumerate() {
        for s in spellings {
            let finder = memchr::memmem::Finder::new(s.as_bytes());
            let n = finder.find_iter(&cur).count();
            if n == 0 {
                continue;
            }
            counts[i] += n as u64;
            changed = true;
            let mut next = Vec::with_capacity(cur.len());
            let mut at = 0;
            for p in finder.find_iter(&cur) {
                if p < at {
                    continue;
                }
                next.extend_from_slice(&cur[at..p]);
                next.extend_from_slice(PLACEHOLDER.as_bytes());
                at = p + s.len();
            }
            next.extend_from_slice(&cur[at..]);
            cur = next;
        }
    }
    changed.then_some(cur)
}

/// Forgets in one repository. Without `req.yes`, reports and changes
/// nothing. `progress(done, total)` is called as bodies are scanned.
pub fn run(
    corpus: &Corpus,
    root: Option<&std::path::Path>,
    req: &Request,
    progress: &dyn Fn(u64, u64),
) -> Result<Report, ForgetError> {
    check(req)?;
    let mut report = Report {
        repository: corpus.lane.root_sha.clone(),
        applied: req.yes,
        occurrences: vec![0; req.values.len()],
        ..Report::default()
    };
    // Records named by key, resolved as `history show` does.
    let mut removed: BTreeSet<String> = BTreeSet::new();
    for key in &req.records {
        removed.insert(history::show(corpus, key)?.record.file);
    }
    refuse_damage(corpus)?;
    // Staged raw copies may hold the value: drain them first, with the
    // value already in the forgotten set (below), so their records are
    // written without it. Only when applying.
    let spellings: Vec<Vec<String>> = req.values.iter().map(|v| spellings(v)).collect();
    let locked = corpus.lock()?;
    let names = body::names(&corpus.journal)?;
    // Removing a record removes what it superseded too (their text is a
    // prefix of its own).
    let mut gone_names = removed.clone();
    let mut todo: Vec<String> = removed.iter().cloned().collect();
    while let Some(n) = todo.pop() {
        for s in names.supersedes.get(&n).into_iter().flatten() {
            if gone_names.insert(s.clone()) {
                todo.push(s.clone());
            }
        }
    }
    let live: BTreeSet<String> = history::list(corpus)
        .map_err(ForgetError::from)?
        .into_iter()
        .map(|l| l.file)
        .collect();
    let total = names.bodies.len() as u64;
    let mut rewrites: Vec<Rewrite> = Vec::new();
    let mut new_bodies: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rewritten_records: BTreeSet<String> = BTreeSet::new();
    let mut shas: Vec<&String> = names.bodies.keys().collect();
    shas.sort();
    for (i, sha) in shas.into_iter().enumerate() {
        progress(i as u64, total);
        let recs = &names.bodies[sha];
        if recs.iter().any(|n| gone_names.contains(n)) {
            rewrites.push(Rewrite {
                from: sha.clone(),
                to: None,
            });
            continue;
        }
        if spellings.is_empty() {
            continue;
        }
        let bytes = match body::read(&corpus.lane, sha) {
            Ok(b) => b,
            Err(e) if e.is_missing() => continue,
            Err(e) => return Err(e.into()),
        };
        if let Some(new) = replace_values(&bytes, &spellings, &mut report.occurrences) {
            let to = BodyRef {
                sha256: crate::fsutil::sha256_hex(&new),
                bytes: new.len() as u64,
            };
            rewrites.push(Rewrite {
                from: sha.clone(),
                to: Some(to),
            });
            new_bodies.push((sha.clone(), new));
            for n in recs {
                if live.contains(n) {
                    rewritten_records.insert(n.clone());
                }
            }
        }
    }
    progress(total, total);
    report.records_removed = removed
        .iter()
        .filter(|n| live.contains(*n))
        .cloned()
        .collect();
    report.records_rewritten = rewritten_records.iter().cloned().collect();
    report.bodies = rewrites.len() as u64;
    // Quarantined blobs are raw: say which hold a value.
    for q in crate::stage::list_quarantined(corpus).unwrap_or_default() {
        let path = corpus.lane.quarantine_dir().join(format!("{}.raw", q.stem));
        if let Ok(b) = crate::fsutil::read_private(&path, crate::staging_view::RAW_CAP) {
            let mut scratch = vec![0; spellings.len()];
            if replace_values(&b, &spellings, &mut scratch).is_some() {
                report.quarantined_holding.push(format!("{}.raw", q.stem));
            }
        }
    }
    if !req.yes {
        return Ok(report);
    }
    // Written unsynced, then one syncfs: thousands of bodies cost one
    // flush, and all of them are durable before the event names them.
    for (_, bytes) in &new_bodies {
        body::put_unsynced(&corpus.lane, bytes)?;
    }
    body::sync(&corpus.lane)?;
    // Until the old bodies are gone, `journal verify` is not clean.
    let marker = body::forget_marker(&corpus.lane);
    let pending: Vec<&str> = rewrites.iter().map(|r| r.from.as_str()).collect();
    crate::fsutil::write_atomic(
        &marker,
        &serde_json::to_vec(&pending).expect("digests serialise"),
        true,
    )
    .map_err(CorpusError::from)?;
    let mut values: Vec<ValueDigest> = req.values.iter().flat_map(|v| digests(v)).collect();
    values.dedup();
    let ev = Forgotten {
        values,
        rewrites: rewrites.clone(),
        rewritten_records: report.records_rewritten.clone(),
        removed_records: report.records_removed.clone(),
        forgotten_at_ns: clock::now_unix_ns(),
    };
    match locked.append(&Event::Forgotten(Box::new(ev))) {
        Ok(_) => {}
        Err(e) if e.is_unprojected() => {}
        Err(e) => return Err(e.into()),
    }
    // The event is durable: the old bodies go, then anything else no
    // event needs (a crashed earlier forget or capture).
    for r in &rewrites {
        body::remove(&corpus.lane, &r.from)?;
    }
    sweep_unreferenced(corpus)?;
    crate::fsutil::remove_file_if_exists(&marker).map_err(CorpusError::from)?;
    drop(locked);
    // Staged entries: captured now, with the value in the forgotten set.
    if let (false, Some(root)) = (spellings.is_empty(), root) {
        let staged = crate::stage::list_staged(corpus, clock::now_unix_ns()).unwrap_or_default();
        if !staged.is_empty() {
            let r = crate::drain::drain(
                corpus,
                &|| crate::capture::scanner_for(root),
                crate::drain::Budget::UNBOUNDED,
                clock::now_unix_ns(),
            );
            if let Ok(r) = r {
                report.staged_drained = r.captured.len() as u64;
            }
        }
    }
    Ok(report)
}

fn refuse_damage(corpus: &Corpus) -> Result<(), ForgetError> {
    let r = abcd_journal::verify(
        &corpus.lane.journal_dir(),
        &VerifyOptions {
            chain: true,
            progress: None,
        },
    )?;
    // A torn tail is what an interrupted append leaves; the append below
    // cuts it as every writer does. Damage is refused.
    if r.status == VerifyStatus::Corrupt {
        let status = "corrupt";
        return Err(ForgetError::Damaged {
            status: status.into(),
            detail: r
                .damage
                .map(|d| format!("at offset {}: {}", d.offset, d.reason))
                .unwrap_or_default(),
        });
    }
    Ok(())
}

/// Deletes every body no event needs. Caller holds the store lock.
pub fn sweep_unreferenced(corpus: &Corpus) -> Result<Vec<String>, ForgetError> {
    let keep: BTreeSet<String> = body::names(&corpus.journal)?.bodies.into_keys().collect();
    let mut removed = Vec::new();
    for sha in body::list(&corpus.lane) {
        if !keep.contains(&sha) {
            body::remove(&corpus.lane, &sha)?;
            removed.push(sha);
        }
    }
    Ok(removed)
}

/// The forgotten set of a repository, for capture.
pub fn set(corpus: &Corpus) -> Vec<ValueDigest> {
    projection::read_forgotten(&corpus.lane)
}
