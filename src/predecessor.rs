//! The predecessor's stores (the Go `abcd`), read into journal events on a
//! lane's first open.
//!
//! Two layouts are read, never written to or deleted from:
//! - **current** (`$ABCD_HOME/transcripts/<sha>/`, the same place as our
//!   lane): `records/*.md`, `staging/<stamp>-<key>.raw` with its
//!   `.stage.json`, `quarantine/<stem>.{raw,stage.json,quarantine.json}`,
//!   `sessions/<id>`;
//! - **flat** (`$ABCD_HOME/history/<sha>/`, the older one): `transcripts/*.md`,
//!   `staging/` and `quarantine/` alike. When its tombstone
//!   `transcripts.moved` is there the predecessor moved everything to the
//!   current layout already — except the `.stage.json` sidecars its move
//!   forgot (its known bug): those are still read, as the lineage of the
//!   current layout's staged files that lack one.
//!
//! Owns: planning the import — bodies written to `bodies/`, staged and
//! quarantined raw files of the flat layout copied into the lane, staging
//! metadata blobs — and the events that journal it (`Captured` for a
//! record, `Staged` adopted for a staged file, `Staged` + `Quarantined` for
//! a quarantined one, `SessionNoted` for a session note), plus the report.
//! `corpus` appends the events; nothing here touches the journal.
//!
//! Invariants:
//! - Nothing of the predecessor's is deleted or changed: the flat layout is
//!   only read (a guarded read: no symlink followed); a file that cannot be
//!   imported (a name collision with other bytes, a file that is not a
//!   record) is left where it is and named in the report.
//! - A staged file without a sidecar is never misattributed: its key (the
//!   file name after the stamp) is a sub-agent's only when the transcript's
//!   own lines say `agentId` is that key (then the session is theirs),
//!   otherwise it is the main thread of that session (the predecessor's
//!   legacy rule).
//! - Restartable: planning is idempotent (content-addressed bodies, copies
//!   skipped when already there with the same bytes) and skips what the
//!   journal already holds, so an import killed midway is finished by the
//!   next open (`corpus` keeps a pending marker until the last event).
//! - The only free text from the old store that reaches the journal is a
//!   quarantine reason, and it passes the redaction scanner first (what it
//!   would change is replaced), on one line, at most [`REASON_MAX`] bytes.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use abcd_journal::{FrameKind, Journal, JournalError};
use serde::Serialize;
use thiserror::Error;

use crate::body::{self, BodyError};
use crate::clock;
use crate::event::{self, CaptureOutcome, Captured, Event, Quarantined, SessionNoted, Staged};
use crate::fsutil::{self, FsError};
use crate::lineage::{is_stored_id, Lineage, SpawnAttribution};
use crate::projection::RECORD_READ_CAP;
use crate::record;
use crate::staging_view::{meta_path, StageSidecar, StagedMeta, RAW_CAP};
use crate::store::Lane;

/// The predecessor's flat layout's tombstone: everything was moved out.
pub const TOMBSTONE: &str = "transcripts.moved";
/// Longest quarantine reason kept from the old store.
pub const REASON_MAX: usize = 512;
/// How many lines of a sidecar-less staged file are read for `agentId`.
const KEY_PROBE_LINES: usize = 64;
/// Most sightings a predecessor's gap marker is journaled as (each is one
/// small event; the count is a diagnostic).
pub const GAP_SIGHTINGS_MAX: u64 = 10_000;
/// The import's report, kept in the lane (a hook may be the first opener,
/// and nobody reads its stderr).
pub const REPORT_FILE: &str = "predecessor-import.json";

#[derive(Debug, Error)]
pub enum PredecessorError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// A file left where it is, and why.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Left {
    pub file: String,
    pub why: String,
}

/// What an import journaled.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Imported {
    /// `current` and/or `flat`.
    pub layouts: Vec<String>,
    pub records: Vec<String>,
    pub staged: Vec<String>,
    pub quarantined: Vec<String>,
    pub sessions: u64,
    /// Sightings of the sub-agent payload gap its marker counted.
    pub gap_sightings: u64,
    /// Staged files whose lineage came from a sidecar the predecessor's own
    /// move left behind in the flat layout.
    pub sidecars_recovered: u64,
    /// Records filed under a composite id (`history migrate` repairs them).
    pub composite: u64,
    pub left: Vec<Left>,
    /// How many locks the import took: 1 unless hooks imported it in
    /// bounded slices ([`Slice`]).
    #[serde(default)]
    pub slices: u64,
    /// More is left to import: the next open (a hook's, in its own slice,
    /// or any other, whole) carries on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
    /// Which of `records` are composite (what [`Imported::merge_earlier`]
    /// needs; not reported).
    #[serde(skip)]
    pub composite_names: Vec<String>,
}

impl Imported {
    pub fn is_empty(&self) -> bool {
        self.items() == 0
    }

    fn items(&self) -> usize {
        self.records.len()
            + self.staged.len()
            + self.quarantined.len()
            + self.sessions as usize
            + self.gap_sightings as usize
            + self.left.len()
    }

    /// Adds what earlier slices of the same import reported (their
    /// records leave the held directory once projected, so a later plan
    /// no longer lists them); the queue (staged, quarantined, sessions, gap)
    /// is planned whole by every slice and is this report's own.
    pub fn merge_earlier(&mut self, earlier: Imported) {
        let extra_composite = self
            .composite_names
            .iter()
            .filter(|n| !earlier.records.contains(n))
            .count() as u64;
        self.composite = earlier.composite + extra_composite;
        let mut seen: HashSet<String> = earlier.records.iter().cloned().collect();
        let mut records = earlier.records;
        for r in self.records.drain(..) {
            if seen.insert(r.clone()) {
                records.push(r);
            }
        }
        self.records = records;
        for l in earlier.left {
            if !self.left.contains(&l) {
                self.left.push(l);
            }
        }
        for l in earlier.layouts {
            if !self.layouts.contains(&l) {
                self.layouts.push(l);
            }
        }
    }

    /// One line per fact, for stderr.
    pub fn lines(&self) -> Vec<String> {
        if self.unfinished {
            return vec![format!(
                "importing the store an older abcd wrote, in slices: {} record(s) so far ({} slice(s)); the next open carries on",
                self.records.len(),
                self.slices
            )];
        }
        let mut v = vec![format!(
            "adopted the store an older abcd wrote ({} layout): {} record(s), {} staged and {} quarantined transcript(s), {} session note(s); nothing was deleted",
            self.layouts.join(" and "),
            self.records.len(),
            self.staged.len(),
            self.quarantined.len(),
            self.sessions
        )];
        // The queue by name (it is short; records are counted only).
        const NAMED: usize = 20;
        for (what, files) in [("staged", &self.staged), ("quarantined", &self.quarantined)] {
            for f in files.iter().take(NAMED) {
                v.push(format!("adopted the {what} file {f}"));
            }
            if files.len() > NAMED {
                v.push(format!("… and {} more {what} file(s)", files.len() - NAMED));
            }
        }
        if self.gap_sightings > 0 {
            v.push(format!(
                "its sub-agent payload gap marker ({} sighting(s)) was kept",
                self.gap_sightings
            ));
        }
        if self.sidecars_recovered > 0 {
            v.push(format!(
                "{} staged transcript(s) took their lineage from the sidecars the older abcd left in ~/.abcd/history",
                self.sidecars_recovered
            ));
        }
        for l in &self.left {
            v.push(format!("left in place: {} ({})", l.file, l.why));
        }
        if self.composite > 0 {
            v.push(format!(
                "{} record(s) are filed under a composite id (<prefix>--agent-<id>): `abcd history migrate` reports the repair, `--apply` writes it",
                self.composite
            ));
        }
        v
    }
}

/// What the journal already holds (an import killed midway is finished
/// without journaling anything twice).
#[derive(Debug, Default)]
pub struct Journaled {
    records: HashSet<String>,
    stems: HashSet<String>,
    quarantined: HashSet<String>,
    sessions: HashSet<String>,
    gap: bool,
}

impl Journaled {
    pub fn read(journal: &Journal) -> Result<Journaled, PredecessorError> {
        let mut j = Journaled::default();
        for frame in journal.read_from(&journal.start())? {
            let frame = frame?;
            if frame.kind != FrameKind::Event {
                continue;
            }
            let Ok(env) = event::decode(&frame.payload) else {
                continue;
            };
            match env.event {
                Event::Captured(c) => {
                    if let CaptureOutcome::Stored { record_name, .. } = c.outcome {
                        j.records.insert(record_name);
                    }
                }
                Event::Staged(s) => {
                    j.stems.insert(s.stem);
                }
                Event::Quarantined(q) => {
                    j.quarantined.insert(q.stem);
                }
                Event::SessionNoted(n) => {
                    j.sessions.insert(n.session_id);
                }
                Event::SubagentGapSighted(_) => j.gap = true,
                _ => {}
            }
        }
        Ok(j)
    }
}

/// `$ABCD_HOME/history/<sha>/`: the flat layout's lane.
pub fn flat_dir(home: &Path, root_sha: &str) -> PathBuf {
    home.join("history").join(root_sha)
}

fn real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// The flat layout holds something to import (records or raw files not
/// moved out by the predecessor).
pub fn flat_has_content(home: &Path, root_sha: &str) -> bool {
    let d = flat_dir(home, root_sha);
    // Asked on every lock of a lane in use: where there never was a flat
    // store (nearly everywhere) one stat answers.
    real_dir(&d)
        && !d.join(TOMBSTONE).exists()
        && ["transcripts", "staging", "quarantine"]
            .iter()
            .any(|l| real_dir(&d.join(l)))
}

/// The names in `dir` ending in `suffix` (regular files only, no dot
/// files), sorted, suffix removed.
fn stems(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .filter_map(|n| n.strip_suffix(suffix).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Reads a predecessor sidecar from the flat layout (guarded: never
/// through a symlink) or from the lane.
fn read_sidecar(path: &Path, flat: bool) -> Option<StageSidecar> {
    if !flat {
        return StageSidecar::read_any(path).ok();
    }
    let bytes = fsutil::guarded_read(path, fsutil::SMALL_FILE_CAP).ok()?;
    let sc: StageSidecar = serde_json::from_slice(&bytes).ok()?;
    (sc.schema == 1 && sc.lineage.validate_stored().is_ok()).then_some(sc)
}

/// The first bytes of a record (its frontmatter).
fn read_head(path: &Path, flat: bool) -> Option<Vec<u8>> {
    const HEAD: u64 = 8 << 10;
    if flat {
        fsutil::guarded_read_head(path, HEAD).ok()
    } else {
        fsutil::read_private_head(path, HEAD).ok()
    }
}

fn read_file(path: &Path, cap: u64, flat: bool) -> Option<Vec<u8>> {
    if flat {
        fsutil::guarded_read(path, cap).ok()
    } else {
        fsutil::read_private(path, cap).ok()
    }
}

/// The lineage of a staged file that has no sidecar: the key after the
/// 26-character stamp is a sub-agent's only when the transcript's own
/// lines name it as `agentId` (the session is then theirs); otherwise the
/// main thread of that session. `None`: no usable key.
pub fn lineage_without_sidecar(stem: &str, raw: &[u8]) -> Option<Lineage> {
    let key = stem
        .get(27..)
        .filter(|_| stem.as_bytes().get(26) == Some(&b'-'))?;
    if !is_stored_id(key) {
        return None;
    }
    for line in raw.split(|b| *b == b'\n').take(KEY_PROBE_LINES) {
        if line.first() != Some(&b'{') || memchr::memmem::find(line, b"\"agentId\"").is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let agent = v.get("agentId").and_then(|a| a.as_str());
        let session = v.get("sessionId").and_then(|s| s.as_str());
        if let (Some(a), Some(s)) = (agent, session) {
            if a == key && is_stored_id(s) {
                return Some(Lineage {
                    session_id: s.to_string(),
                    agent_id: Some(a.to_string()),
                    spawn_attribution: Some(SpawnAttribution::Unattributed),
                    ..Lineage::default()
                });
            }
        }
    }
    Some(Lineage {
        session_id: key.to_string(),
        ..Lineage::default()
    })
}

/// A quarantine reason from the old store, fit for the journal: one line,
/// passed through the scanner (what it finds is replaced), bounded.
pub fn scrub_reason(reason: &str) -> String {
    let one_line: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let scanner = abcd_redact::Scanner::new(abcd_redact::Identity::discover(None), None);
    let mut text = match scanner.redact(&one_line) {
        Ok(r) => r.text,
        Err(_) => return "quarantined by an older abcd (its reason could not be kept)".into(),
    };
    if text.len() > REASON_MAX {
        let mut cut = REASON_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    format!("quarantined by an older abcd: {text}")
}

#[derive(serde::Deserialize, Default)]
struct OldNote {
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    quarantined_at: String,
}

fn mtime_ns(path: &Path) -> u64 {
    fs::symlink_metadata(path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_else(clock::now_unix_ns)
}

/// A bound on what one open imports of a predecessor's records: a hook's
/// open (`Corpus::open_for_hook`) imports at most this much and leaves the
/// rest to the next open, so the first hook on a lane with a large old
/// store keeps to its budget (SessionEnd hooks share 1.5 s). The staged,
/// quarantined and session files are the queue, small: they are all
/// imported by the first slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub records: usize,
    pub bytes: u64,
}

impl Slice {
    /// A hook's slice: 32 records or 4 MiB of them. The cost is per record
    /// more than per byte (each record is a body, a projected copy, its
    /// summary, token and index files: ~23 opens, `strace -c`): measured
    /// on the release build with 64 KiB records on this shared 2-core VM
    /// (load 5), a 128-record slice took 0.5–1.5 s of a session-start
    /// hook (0.65 s of it in `openat`), too close to the 1.5 s a SessionEnd
    /// hook may take; a quarter of it leaves the margin
    /// (`docs/benchmarks.md`).
    pub const HOOK: Slice = Slice {
        records: 32,
        bytes: 4 << 20,
    };

    /// [`Slice::HOOK`], or in test builds `ABCD_TEST_IMPORT_SLICE` records.
    pub fn for_hook() -> Slice {
        let knob = if cfg!(debug_assertions) {
            std::env::var("ABCD_TEST_IMPORT_SLICE")
                .ok()
                .and_then(|v| v.parse().ok())
        } else {
            None
        };
        match knob {
            Some(records) => Slice {
                records: std::cmp::max(records, 1),
                bytes: u64::MAX,
            },
            None => Slice::HOOK,
        }
    }
}

/// Where a sliced import holds the predecessor's records of the current
/// layout (`records/`, moved aside whole by one rename before the first
/// slice): the projection directory then holds only what the journal
/// says, so no catch-up between slices mistakes the rest for damage. When
/// the last slice is projected, what the journal reproduced is dropped from
/// here and anything else moves to `records.unjournaled/`, as a rebuild
/// does (`projection::reconcile_set_aside`).
pub const HELD_DIR: &str = "predecessor-import.records";

pub fn held_dir(lane: &Lane) -> PathBuf {
    lane.dir.join(HELD_DIR)
}

/// Moves a fresh lane's `records/` aside (see [`HELD_DIR`]) when it holds
/// anything; idempotent.
pub fn hold_records(lane: &Lane) -> Result<(), PredecessorError> {
    let held = held_dir(lane);
    let records = lane.records_dir();
    if fs::symlink_metadata(&held).is_ok() {
        return Ok(());
    }
    let any = fs::read_dir(&records).is_ok_and(|mut rd| rd.next().is_some());
    if !any {
        return Ok(());
    }
    fsutil::rename(&records, &held)?;
    fsutil::ensure_private_dir(&records)?;
    Ok(())
}

/// Drops from the held records (see [`HELD_DIR`]) those `events` stored
/// that the projection now holds byte for byte; anything else stays for
/// the last slice's reconciliation.
pub fn drop_reproduced(lane: &Lane, events: &[Event]) -> Result<(), PredecessorError> {
    let held = held_dir(lane);
    if fs::symlink_metadata(&held).is_err() {
        return Ok(());
    }
    for ev in events {
        let Event::Captured(c) = ev else { continue };
        let CaptureOutcome::Stored { record_name, .. } = &c.outcome else {
            continue;
        };
        let old = held.join(record_name);
        let (Ok(a), Ok(b)) = (
            fsutil::read_private(&old, RECORD_READ_CAP),
            fsutil::read_private(&lane.records_dir().join(record_name), RECORD_READ_CAP),
        ) else {
            continue;
        };
        if a == b {
            fsutil::remove_file_if_exists(&old)?;
        }
    }
    Ok(())
}

/// The planned import: events to journal, in order, and the report.
pub struct Plan {
    pub events: Vec<Event>,
    pub report: Imported,
    /// The slice ran out: more records are left for the next open.
    pub more: bool,
}

struct Planner<'a> {
    lane: &'a Lane,
    flat: PathBuf,
    done: &'a Journaled,
    events: Vec<Event>,
    report: Imported,
    staged_stems: BTreeSet<String>,
    slice: Option<Slice>,
    taken: (usize, u64),
    more: bool,
}

/// Plans the import of whatever the predecessor left for this lane. Writes
/// bodies, raw copies and metadata blobs (all idempotent); appends nothing.
/// `current`: read the lane's own files too (a first open, or one
/// finishing an interrupted import); a lane already in use reads only the
/// flat layout.
pub fn plan(
    home: &Path,
    lane: &Lane,
    done: &Journaled,
    current: bool,
    slice: Option<Slice>,
) -> Result<Plan, PredecessorError> {
    let mut p = Planner {
        lane,
        flat: flat_dir(home, &lane.root_sha),
        done,
        events: Vec::new(),
        report: Imported::default(),
        staged_stems: BTreeSet::new(),
        slice,
        taken: (0, 0),
        more: false,
    };
    let flat_live = flat_has_content(home, &lane.root_sha);
    // The current layout first: it is where the predecessor's newest files are.
    if current {
        let held = held_dir(lane);
        let records = if fs::symlink_metadata(&held).is_ok() {
            held
        } else {
            lane.records_dir()
        };
        p.records(&records, false)?;
        p.staging(&lane.staging_dir(), false)?;
        p.quarantine(&lane.quarantine_dir(), false)?;
        p.sessions()?;
        p.gap_marker();
        if p.report.items() > 0 {
            p.report.layouts.push("current".into());
        }
    }
    if flat_live {
        let before = p.report.items();
        let flat = p.flat.clone();
        p.records(&flat.join("transcripts"), true)?;
        p.staging(&flat.join("staging"), true)?;
        p.quarantine(&flat.join("quarantine"), true)?;
        if p.report.items() > before {
            p.report.layouts.push("flat".into());
        }
    }
    p.report.unfinished = p.more;
    Ok(Plan {
        events: p.events,
        report: p.report,
        more: p.more,
    })
}

impl Planner<'_> {
    fn records(&mut self, dir: &Path, flat: bool) -> Result<(), PredecessorError> {
        let lane_records = self.lane.records_dir();
        let held = held_dir(self.lane);
        for stem in stems(dir, ".md") {
            let name = format!("{stem}.md");
            if let Some(slice) = self.slice {
                if self.done.records.contains(&name) {
                    // Journaled by an earlier slice: its header is enough
                    // for the report (a slice costs its own records, not
                    // every one before it).
                    if let Some(head) = read_head(&dir.join(&name), flat) {
                        if record::parse(&head).is_ok_and(|(m, _)| {
                            m.lineage.agent_id.is_none()
                                && m.lineage.session_id.contains("--agent-")
                        }) {
                            self.report.composite += 1;
                            self.report.composite_names.push(name.clone());
                        }
                    }
                    self.report.records.push(name);
                    continue;
                }
                if self.taken.0 >= slice.records || self.taken.1 >= slice.bytes {
                    self.more = true;
                    return Ok(());
                }
            }
            let Some(bytes) = read_file(&dir.join(&name), RECORD_READ_CAP, flat) else {
                if flat {
                    self.left(&name, "it could not be read (a symlink, not a regular file, or over the size cap)");
                }
                continue;
            };
            let Ok((meta, _)) = record::parse(&bytes) else {
                if flat {
                    self.left(&name, "it is not a record (no readable frontmatter)");
                }
                // In the lane: set aside by the first rebuild, never deleted.
                continue;
            };
            if flat {
                let mine = read_file(&lane_records.join(&name), RECORD_READ_CAP, false)
                    .or_else(|| read_file(&held.join(&name), RECORD_READ_CAP, false));
                if let Some(mine) = mine {
                    if mine != bytes {
                        self.left(
                            &name,
                            "a different record of the same name is in the current layout",
                        );
                    }
                    continue; // the same bytes: imported from there
                }
            }
            // Reported whether journaled now or by a run killed midway.
            if meta.lineage.agent_id.is_none() && meta.lineage.session_id.contains("--agent-") {
                self.report.composite += 1;
                self.report.composite_names.push(name.clone());
            }
            if self.done.records.contains(&name) {
                self.report.records.push(name);
                continue;
            }
            // Synced once, before the events (`corpus::adopt_legacy`).
            let body = body::put_unsynced(self.lane, &bytes)?;
            self.taken.0 += 1;
            self.taken.1 += bytes.len() as u64;
            self.events.push(Event::Captured(Box::new(Captured {
                outcome: CaptureOutcome::Stored {
                    record_name: name.clone(),
                    body,
                    supersedes: Vec::new(),
                },
                retires: None,
                extended: false,
            })));
            self.report.records.push(name);
        }
        Ok(())
    }

    /// The lineage of a staged (or quarantined) raw file: its sidecar, else
    /// the one the predecessor's move left in the flat layout, else the
    /// key rule. `None` when it is ours (a metadata blob beside it: the
    /// orphan adoption handles it) or unattributable.
    fn lineage_of(
        &mut self,
        dir: &Path,
        stem: &str,
        raw: &[u8],
        flat: bool,
    ) -> Option<(Lineage, Option<String>, u64)> {
        if let Some(sc) = read_sidecar(&dir.join(format!("{stem}.stage.json")), flat) {
            let at = sc.staged_at_ns();
            return Some((sc.lineage, sc.source_path, at));
        }
        if !flat && meta_path(dir, stem).exists() {
            return None;
        }
        let fallback = mtime_ns(&dir.join(format!("{stem}.raw")));
        for old in ["staging", "quarantine"] {
            let p = self.flat.join(old).join(format!("{stem}.stage.json"));
            if let Some(sc) = read_sidecar(&p, true) {
                self.report.sidecars_recovered += 1;
                let at = sc.staged_at_ns();
                return Some((
                    sc.lineage,
                    sc.source_path,
                    if at > 0 { at } else { fallback },
                ));
            }
        }
        // Ours: `<stamp>-<session>-agent-<agent>` (the orphan adoption
        // reads it); the predecessor never put `-agent-` in a staged name.
        if stem.contains("-agent-") {
            return None;
        }
        lineage_without_sidecar(stem, raw).map(|l| (l, None, fallback))
    }

    fn staging(&mut self, dir: &Path, flat: bool) -> Result<(), PredecessorError> {
        let staging = self.lane.staging_dir();
        for stem in stems(dir, ".raw") {
            let file = format!("{stem}.raw");
            if self.staged_stems.contains(&stem) {
                continue;
            }
            let Some(raw) = read_file(&dir.join(&file), RAW_CAP, flat) else {
                if flat {
                    self.left(&file, "it could not be read (a symlink, not a regular file, or over the size cap)");
                }
                continue;
            };
            let Some((lineage, source_path, staged_at_ns)) =
                self.lineage_of(dir, &stem, &raw, flat)
            else {
                continue;
            };
            if flat {
                match read_file(&staging.join(&file), RAW_CAP, false) {
                    Some(mine) if mine == raw => {}
                    Some(_) => {
                        self.left(
                            &file,
                            "a different staged file of the same name is in the current layout",
                        );
                        continue;
                    }
                    None => fsutil::write_atomic(&staging.join(&file), &raw, true)?,
                }
            }
            self.staged_stems.insert(stem.clone());
            if !self.done.stems.contains(&stem) {
                let ev =
                    self.staged_event(&staging, &stem, &raw, lineage, source_path, staged_at_ns)?;
                self.events.push(ev);
            }
            self.report.staged.push(file);
        }
        Ok(())
    }

    fn staged_event(
        &self,
        blob_dir: &Path,
        stem: &str,
        raw: &[u8],
        lineage: Lineage,
        source_path: Option<String>,
        staged_at_ns: u64,
    ) -> Result<Event, PredecessorError> {
        let meta = StagedMeta {
            lineage: lineage.clone(),
            source_path,
        };
        let bytes = meta.to_bytes();
        fsutil::write_atomic(&meta_path(blob_dir, stem), &bytes, true)?;
        Ok(Event::Staged(Staged {
            stem: stem.to_string(),
            raw_sha256: fsutil::sha256_hex(raw),
            bytes: raw.len() as u64,
            session_id: lineage.session_id,
            agent_id: lineage.agent_id,
            meta_sha256: fsutil::sha256_hex(&bytes),
            staged_at_ns,
            adopted: true,
        }))
    }

    fn quarantine(&mut self, dir: &Path, flat: bool) -> Result<(), PredecessorError> {
        let quarantine = self.lane.quarantine_dir();
        for stem in stems(dir, ".raw") {
            let file = format!("{stem}.raw");
            if self.staged_stems.contains(&stem) {
                continue;
            }
            if self.done.quarantined.contains(&stem) {
                self.staged_stems.insert(stem.clone());
                self.report.quarantined.push(file);
                continue;
            }
            let Some(raw) = read_file(&dir.join(&file), RAW_CAP, flat) else {
                if flat {
                    self.left(&file, "it could not be read (a symlink, not a regular file, or over the size cap)");
                }
                continue;
            };
            // The note beside it, else (a copy an interrupted import made)
            // the flat layout's.
            let note_name = format!("{stem}.quarantine.json");
            let note: OldNote = read_file(&dir.join(&note_name), fsutil::SMALL_FILE_CAP, flat)
                .or_else(|| {
                    let old = self.flat.join("quarantine").join(&note_name);
                    read_file(&old, fsutil::SMALL_FILE_CAP, true)
                })
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            let lineage = match self.lineage_of(dir, &stem, &raw, flat) {
                Some(l) => Some(l),
                None if is_stored_id(&note.session_id) => Some((
                    Lineage {
                        session_id: note.session_id.clone(),
                        spawn_attribution: note
                            .agent_id
                            .as_ref()
                            .map(|_| SpawnAttribution::Unattributed),
                        agent_id: note.agent_id.clone().filter(|a| is_stored_id(a)),
                        ..Lineage::default()
                    },
                    None,
                    mtime_ns(&dir.join(&file)),
                )),
                None => None,
            };
            let Some((lineage, source_path, staged_at_ns)) = lineage else {
                continue;
            };
            if flat {
                match read_file(&quarantine.join(&file), RAW_CAP, false) {
                    Some(mine) if mine == raw => {}
                    Some(_) => {
                        self.left(&file, "a different quarantined file of the same name is in the current layout");
                        continue;
                    }
                    None => fsutil::write_atomic(&quarantine.join(&file), &raw, true)?,
                }
            }
            self.staged_stems.insert(stem.clone());
            if !self.done.stems.contains(&stem) {
                let ev = self.staged_event(
                    &quarantine,
                    &stem,
                    &raw,
                    lineage,
                    source_path,
                    staged_at_ns,
                )?;
                self.events.push(ev);
            }
            let reason = if note.reason.is_empty() {
                "quarantined by an older abcd (no reason note)".to_string()
            } else {
                scrub_reason(&note.reason)
            };
            self.events.push(Event::Quarantined(Quarantined {
                stem: stem.clone(),
                raw_sha256: fsutil::sha256_hex(&raw),
                reason,
                quarantined_at_ns: clock::parse_rfc3339(&note.quarantined_at)
                    .unwrap_or_else(|| mtime_ns(&dir.join(&file))),
            }));
            self.report.quarantined.push(file);
        }
        Ok(())
    }

    /// The current layout's session notes (zero-byte files named by id).
    fn sessions(&mut self) -> Result<(), PredecessorError> {
        let dir = self.lane.sessions_dir();
        let Ok(rd) = fs::read_dir(&dir) else {
            return Ok(());
        };
        let mut notes: Vec<(String, u64)> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| crate::lineage::is_valid_id(n))
            .map(|n| {
                let t = mtime_ns(&dir.join(&n));
                (n, t)
            })
            .collect();
        // Oldest first, so each note's pruning (by its own time) keeps the
        // newer ones.
        notes.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        for (id, at) in notes {
            if !self.done.sessions.contains(&id) {
                self.events.push(Event::SessionNoted(SessionNoted {
                    session_id: id,
                    noted_at_ns: at,
                }));
            }
            self.report.sessions += 1;
        }
        Ok(())
    }

    /// The gap marker (`subagent-payload-gap.json`, the same format as
    /// ours) as `count` sightings: the first at `first_seen`, the rest at
    /// `last_seen`, so the projection writes the same marker. Skipped when
    /// the journal holds a sighting already.
    fn gap_marker(&mut self) {
        if self.done.gap {
            return;
        }
        let path = self.lane.gap_marker_path();
        // Looked at before it is opened: a fresh lane (every hook's first
        // lock) has none, and pays no open for it.
        if fs::symlink_metadata(&path).is_err() {
            return;
        }
        let Ok(bytes) = fsutil::read_private(&path, fsutil::SMALL_FILE_CAP) else {
            return;
        };
        let Ok(m) = serde_json::from_slice::<crate::projection::GapMarker>(&bytes) else {
            self.left("subagent-payload-gap.json", "it is not a gap marker");
            return;
        };
        let (Some(first), Some(last)) = (
            clock::parse_rfc3339(&m.first_seen),
            clock::parse_rfc3339(&m.last_seen),
        ) else {
            self.left("subagent-payload-gap.json", "its times do not parse");
            return;
        };
        let event = if crate::lineage::is_valid_id(&m.event) {
            m.event.clone()
        } else {
            "SubagentStop".to_string()
        };
        let count = m.count.clamp(1, GAP_SIGHTINGS_MAX);
        for i in 0..count {
            self.events
                .push(Event::SubagentGapSighted(crate::event::GapSighted {
                    hook_event_name: event.clone(),
                    seen_at_ns: if i == 0 { first } else { last },
                }));
        }
        self.report.gap_sightings = count;
    }

    fn left(&mut self, file: &str, why: &str) {
        self.report.left.push(Left {
            file: file.to_string(),
            why: why.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAMP: &str = "20260820T090000.000000000Z";

    #[test]
    fn a_sidecarless_key_is_an_agent_only_when_the_transcript_says_so() {
        let agent_line = br#"{"sessionId":"s-full","agentId":"a123","type":"user"}"#;
        let l = lineage_without_sidecar(&format!("{STAMP}-a123"), agent_line).unwrap();
        assert_eq!(l.session_id, "s-full");
        assert_eq!(l.agent_id.as_deref(), Some("a123"));
        assert_eq!(l.spawn_attribution, Some(SpawnAttribution::Unattributed));
        // Another agent's id in the lines does not make the key an agent.
        let l = lineage_without_sidecar(&format!("{STAMP}-sess"), agent_line).unwrap();
        assert_eq!((l.session_id.as_str(), l.agent_id), ("sess", None));
        assert!(lineage_without_sidecar("short-name", b"").is_none());
        assert!(lineage_without_sidecar(&format!("{STAMP}-bad key"), b"").is_none());
    }

    #[test]
    fn a_reason_is_one_bounded_line_without_secrets() {
        let token = format!("ghp_{}", "x7Kq2Lm9Pz4Rt8Wv1Yb6Nc3Hd5Jf0Gs2Ae7U");
        let r = scrub_reason(&format!("residual\n{token} left"));
        assert!(!r.contains('\n'));
        assert!(!r.contains(&token), "{r}");
        assert!(scrub_reason(&"é".repeat(2000)).len() <= REASON_MAX + 40);
    }
}
