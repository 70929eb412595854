//! Drain: staged transcripts become records, within a budget.
//!
//! Owns: the drain order (overdue first, then main threads, then sub-agents,
//! oldest first), the byte-and-count budget (a pass always attempts at least
//! one entry), the source re-read (`extended`), and the split between a
//! deterministic refusal (quarantine) and any other failure (stays staged,
//! retryable).
//!
//! Never deletes raw text by itself: a blob leaves staging only through an
//! event (captured, quarantined, discarded) applied by the projection.

use std::path::Path;

use abcd_redact::Scanner;
use serde::Serialize;

use crate::capture::{self, CaptureError, CaptureResult};
use crate::corpus::Corpus;
use crate::event::{Event, Quarantined, Restaged, StagedRef};
use crate::fsutil;
use crate::record::KIND_NATIVE;
use crate::stage::{self, StageError, StagedEntry, RAW_CAP};

/// A pass's bounds; 0 means unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_entries: usize,
    pub max_bytes: u64,
}

impl Budget {
    /// Session start: enough to clear a normal backlog in a few seconds.
    pub const SESSION_START: Budget = Budget {
        max_entries: 32,
        max_bytes: 4 << 20,
    };
    /// Every prompt: one small entry, so the first token is not delayed.
    pub const PROMPT: Budget = Budget {
        max_entries: 1,
        max_bytes: 512 << 10,
    };
    pub const UNBOUNDED: Budget = Budget {
        max_entries: 0,
        max_bytes: 0,
    };
}

#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub stem: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub path: String,
    pub error: String,
    pub permanent: bool,
    pub quarantined: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DrainReport {
    pub captured: Vec<CaptureResult>,
    pub already_stored: Vec<CaptureResult>,
    pub failed: Vec<Failure>,
    /// Entries not attempted because the budget ran out.
    pub remaining: usize,
    /// Captures that used a longer source than the staged copy.
    pub extended: usize,
    /// Overdue entries among everything listed, before the budget.
    pub overdue: usize,
    /// Orphan blobs adopted while opening the store.
    pub adopted: Vec<String>,
}

/// Orders entries for a pass: overdue, then main threads (and entries that
/// cannot be drained, so they are reported), then sub-agents; stable by stem.
pub fn order(entries: &mut [StagedEntry]) {
    entries.sort_by_key(|e| {
        (
            !e.overdue,
            !(e.is_main_thread() || e.error.is_some()),
            e.stem.clone(),
        )
    });
}

/// Drains within `budget`. `make_scanner` is called once, only when there is
/// something to redact.
pub fn drain(
    corpus: &Corpus,
    make_scanner: &dyn Fn() -> Scanner,
    budget: Budget,
    now_ns: u64,
) -> Result<DrainReport, StageError> {
    drain_with_progress(corpus, make_scanner, budget, now_ns, &|_, _| {})
}

/// `drain`, calling `progress(attempted, total)` after each entry (the CLI
/// draws it on a terminal).
pub fn drain_with_progress(
    corpus: &Corpus,
    make_scanner: &dyn Fn() -> Scanner,
    budget: Budget,
    now_ns: u64,
    progress: &dyn Fn(usize, usize),
) -> Result<DrainReport, StageError> {
    let (_, adopted) = corpus.refresh()?;
    let mut entries = stage::list_staged(corpus, now_ns)?;
    let mut report = DrainReport {
        overdue: entries.iter().filter(|e| e.overdue).count(),
        adopted,
        ..DrainReport::default()
    };
    if entries.is_empty() {
        return Ok(report);
    }
    order(&mut entries);
    let scanner = make_scanner();
    let mut attempted = 0usize;
    let mut consumed = 0u64;
    for (i, entry) in entries.iter().enumerate() {
        if attempted > 0 {
            let over_count = budget.max_entries != 0 && attempted >= budget.max_entries;
            let over_bytes = budget.max_bytes != 0 && consumed + entry.bytes > budget.max_bytes;
            if over_count || over_bytes {
                report.remaining = entries.len() - i;
                break;
            }
        }
        attempted += 1;
        consumed += entry.bytes;
        drain_one(corpus, &scanner, entry, &mut report);
        progress(attempted, entries.len());
    }
    // The records this pass wrote become durable together (one syncfs).
    corpus.sync_projections()?;
    Ok(report)
}

fn failure(entry: &StagedEntry, error: String, permanent: bool, quarantined: bool) -> Failure {
    Failure {
        stem: entry.stem.clone(),
        session_id: entry.session_id.clone(),
        agent_id: entry.agent_id.clone(),
        path: entry.path.clone(),
        error,
        permanent,
        quarantined,
    }
}

fn drain_one(corpus: &Corpus, scanner: &Scanner, entry: &StagedEntry, report: &mut DrainReport) {
    if let Some((staged, sha)) = load(corpus, entry, report) {
        finish(corpus, scanner, entry, staged, &sha, report);
    }
}

/// Reads an entry's staged bytes (or, when the blob was lost, the source
/// that still hashes to them), with their digest. `None` after recording a
/// failure.
fn load(
    corpus: &Corpus,
    entry: &StagedEntry,
    report: &mut DrainReport,
) -> Option<(Vec<u8>, String)> {
    let (Some(sidecar), None) = (&entry.sidecar, &entry.error) else {
        let why = entry.error.clone().unwrap_or_else(|| "no sidecar".into());
        report.failed.push(failure(entry, why, false, false));
        return None;
    };
    let blob = corpus
        .lane
        .staging_dir()
        .join(format!("{}.raw", entry.stem));
    let from_blob = fsutil::read_private(&blob, RAW_CAP);
    let blob_sha = from_blob.as_ref().ok().map(|b| fsutil::sha256_hex(b));
    if blob_sha.as_deref() == Some(sidecar.raw_sha256.as_str()) {
        return from_blob.ok().zip(blob_sha);
    }
    // The blob is missing or does not hold the journaled bytes (a power
    // loss before the kernel wrote it back; hooks do not fsync it): the
    // harness's own transcript still starts with exactly those bytes.
    if let Some(b) = source_prefix(sidecar) {
        return Some((b, sidecar.raw_sha256.clone()));
    }
    match from_blob {
        // Different bytes with no event for them: `finish` adopts them.
        Ok(b) => blob_sha.map(|sha| (b, sha)),
        Err(e) => {
            report.failed.push(failure(
                entry,
                format!("staged copy unreadable and the source no longer holds it: {e}"),
                false,
                false,
            ));
            None
        }
    }
}

/// Redacts (no lock), then under the lock re-checks that the entry still
/// holds the bytes read, and captures or quarantines it.
fn finish(
    corpus: &Corpus,
    scanner: &Scanner,
    entry: &StagedEntry,
    staged: Vec<u8>,
    staged_sha: &str,
    report: &mut DrainReport,
) {
    let Some(sidecar) = &entry.sidecar else {
        return;
    };
    let mut lineage = sidecar.lineage.clone();
    // A nested agent's sidecar names the spawning tool call but not the
    // agent that made it: find that call in a sibling transcript.
    if lineage.spawn_depth >= 2 && lineage.parent_agent_id.is_none() {
        if let (Some(src), Some(tool)) = (&sidecar.source_path, &lineage.spawn_tool_use_id) {
            lineage.parent_agent_id = crate::lineage::find_parent_by_tool_use(Path::new(src), tool);
        }
    }
    // Source refresh: the harness may have flushed more lines after the hook
    // read the file. Only a strict byte-prefix extension is taken, so a
    // recycled path can never substitute a different transcript.
    let mut raw = staged.clone();
    let mut extended = false;
    if let Some(src) = &sidecar.source_path {
        if let Ok(longer) = fsutil::guarded_read(Path::new(src), RAW_CAP) {
            if longer.len() > staged.len() && longer.starts_with(&staged) {
                raw = longer;
                extended = true;
            }
        }
    }
    let prepared = capture::prepare(scanner, &lineage, &raw, &corpus.lane.root_sha, KIND_NATIVE);
    let result = (|| -> Result<Option<CaptureResult>, CaptureError> {
        let locked = corpus.lock()?;
        // Re-check under the lock: a hook may have re-staged new bytes while
        // we were redacting; those wait for the next pass.
        let current = crate::corpus::sidecar(&corpus.lane, &entry.stem).ok();
        let Some(current) = current else {
            return Ok(None);
        };
        if current.raw_sha256 != staged_sha {
            if current.raw_sha256 == sidecar.raw_sha256 {
                // The blob changed on disk without an event (a crash between
                // rename and append): adopt the bytes that are there.
                locked.append(&Event::Restaged(Restaged {
                    stem: entry.stem.clone(),
                    raw_sha256: staged_sha.to_owned(),
                    bytes: staged.len() as u64,
                    replaced_sha256: current.raw_sha256.clone(),
                    replaced_bytes: current.bytes,
                    meta_sha256: String::new(),
                    staged_at_ns: current.staged_at_ns(),
                    adopted: true,
                }))?;
                report.adopted.push(format!("{}.raw", entry.stem));
            } else {
                return Ok(None);
            }
        }
        match prepared {
            Ok(p) => {
                let retires = Some(StagedRef {
                    stem: entry.stem.clone(),
                    raw_sha256: staged_sha.to_owned(),
                });
                capture::commit(&locked, p, retires, extended).map(Some)
            }
            Err(e) if e.is_deterministic() => {
                locked.append(&Event::Quarantined(Quarantined {
                    stem: entry.stem.clone(),
                    raw_sha256: staged_sha.to_owned(),
                    reason: e.to_string(),
                    quarantined_at_ns: crate::clock::now_unix_ns(),
                }))?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    })();
    match result {
        Ok(Some(r)) => {
            if extended {
                report.extended += 1;
            }
            if r.wrote {
                report.captured.push(r);
            } else {
                report.already_stored.push(r);
            }
        }
        Ok(None) => {}
        Err(e) => {
            let permanent = e.is_deterministic();
            let quarantined = permanent
                && corpus
                    .lane
                    .quarantine_dir()
                    .join(format!("{}.raw", entry.stem))
                    .exists();
            report
                .failed
                .push(failure(entry, e.to_string(), permanent, quarantined));
        }
    }
}

/// The journaled bytes of an entry, recovered from its source transcript:
/// the first `bytes` bytes of the source, when they hash to the digest the
/// `Staged` event recorded.
fn source_prefix(sc: &crate::stage::StageSidecar) -> Option<Vec<u8>> {
    let src = fsutil::guarded_read(Path::new(sc.source_path.as_deref()?), RAW_CAP).ok()?;
    let n = usize::try_from(sc.bytes).ok()?;
    let prefix = src.get(..n)?;
    (fsutil::sha256_hex(prefix) == sc.raw_sha256).then(|| prefix.to_vec())
}

/// What a hook's drain did, and what of the store's health a hook reports.
#[derive(Debug)]
pub struct HookDrain {
    pub report: DrainReport,
    /// Journal events the projections could not apply (first seq, count).
    pub faults: Option<(u64, usize)>,
}

/// The hooks' one drain entry point: drains `corpus` within `budget` under
/// the redaction of the repository at `root` (its own configuration), and
/// says whether the store holds projection faults. The hook neither builds a
/// scanner nor reads a projection itself.
pub fn for_hook(
    corpus: &Corpus,
    root: &Path,
    budget: Budget,
    now_ns: u64,
) -> Result<HookDrain, StageError> {
    let report = drain(corpus, &|| capture::scanner_for(root), budget, now_ns)?;
    let faults = crate::projection::read_faults(&corpus.lane);
    Ok(HookDrain {
        report,
        faults: faults.first().map(|f| (f.seq, faults.len())),
    })
}

/// Every repository's staged and quarantined backlog except `except` (the
/// one the hook just drained), for the session-start notice.
pub fn other_backlogs(
    home: &Path,
    except: Option<&str>,
    now_ns: u64,
) -> Vec<crate::history::Backlog> {
    crate::history::survey(home, now_ns)
        .map(|all| {
            all.into_iter()
                .filter(|b| Some(b.root_sha.as_str()) != except)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage::{Lineage, LineageSource, SpawnAttribution};

    fn agent() -> Lineage {
        Lineage {
            session_id: "s1".into(),
            agent_id: Some("a1".into()),
            lineage_source: Some(LineageSource::Hook),
            spawn_attribution: Some(SpawnAttribution::Unattributed),
            ..Lineage::default()
        }
    }

    /// TestDrainLeavesAReStagedCopyForTheNextPass: a hook re-stages new
    /// bytes while the drain is redacting the old ones; the drain must not
    /// store the old bytes as if they were current, nor retire the new ones.
    #[test]
    fn drain_leaves_a_restaged_copy_for_the_next_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::open(tmp.path(), &"a".repeat(40)).unwrap();
        let v1 = b"{\"v\":1}\n".to_vec();
        let v2 = b"{\"v\":1}\n{\"v\":2}\n".to_vec();
        stage::stage(&corpus, &agent(), &v1, None).unwrap();
        let now = crate::clock::now_unix_ns();
        let entries = stage::list_staged(&corpus, now).unwrap();
        let mut report = DrainReport::default();
        let (staged, sha) = load(&corpus, &entries[0], &mut report).unwrap();
        assert_eq!(staged, v1);
        // The re-stage lands between the read and the capture.
        stage::stage(&corpus, &agent(), &v2, None).unwrap();
        let scanner = Scanner::new(abcd_redact::Identity::default(), None);
        finish(&corpus, &scanner, &entries[0], staged, &sha, &mut report);
        assert!(
            report.captured.is_empty() && report.failed.is_empty(),
            "{report:?}"
        );
        let left = stage::list_staged(&corpus, now).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(
            left[0].sidecar.as_ref().unwrap().raw_sha256,
            fsutil::sha256_hex(&v2)
        );
        // The next pass stores the new bytes.
        let report = drain(
            &corpus,
            &|| Scanner::new(abcd_redact::Identity::default(), None),
            Budget::UNBOUNDED,
            now,
        )
        .unwrap();
        assert_eq!(report.captured.len(), 1);
        assert!(stage::list_staged(&corpus, now).unwrap().is_empty());
    }
}
