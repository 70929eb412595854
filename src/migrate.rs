//! Migrate: the composite-id repair (`history migrate`), as journaled
//! `LineageMigrated` events.
//!
//! A pre-lineage abcd filed every sub-agent record under a composite
//! session id, `<prefix>--agent-<id>` (or `<prefix>--wf_<run>--agent-<id>`
//! for a workflow-launched agent), with no `agent_id`. This verb gives such
//! a record explicit lineage: the full session id recovered from its own
//! body, the agent id from the composite, and the spawn point from the
//! harness's `agent-<id>.meta.json` sidecar when one is found.
//!
//! Owns: finding composite records, recovering the session id (exactly one
//! candidate, else refused with the reason), the sidecar index (sidecar
//! roots walked to depth [`SIDECAR_WALK_DEPTH`] without following
//! symlinks; an agent id claimed by two sidecars is dropped), redacting the
//! lineage scalars, the rewritten record file and its event.
//!
//! Invariants:
//! - Only the lineage changes: the record's file name, `source_sha256`,
//!   `captured_at` (value and spelling) and body bytes are those it had
//!   (`record::relineage` says exactly which bytes change and proves it).
//! - Each repair is one `LineageMigrated` event naming the rewritten file in
//!   `bodies/`, so `journal replay --rebuild` reproduces `records/`.
//! - Report by default; `--apply` writes. A degraded scanner refuses both.
//! - Re-running is a no-op: a repaired record has an `agent_id`.
//! - Crash-safe and restartable: bodies are written and synced before the
//!   events that name them; a run killed midway leaves some records
//!   repaired (journaled) and the rest composite, and a re-run finishes;
//!   a body written but never named is deleted by the next `--apply`
//!   (or `journal repair --yes`), so `journal verify` is clean after it.
//! - Redaction (of the lineage scalars) is never under the store lock: the
//!   plan is made first, then under the lock each record is re-read and
//!   only repaired when it still has the bytes the plan was made from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use abcd_redact::Scanner;
use serde::Serialize;
use thiserror::Error;

use crate::body::{self, BodyError};
use crate::corpus::{Corpus, CorpusError};
use crate::event::{Event, LineageMigrated};
use crate::fsutil;
use crate::history::{self, HistoryError};
use crate::lineage::{
    self, parse_composite_session_id, Lineage, LineageSource, SidecarOutcome, SpawnAttribution,
};
use crate::projection::RECORD_READ_CAP;
use crate::record;

/// How deep the sidecar index walks below each root (the harness nests
/// workflow agents at `<project>/<session>/subagents/workflows/wf_<run>/`).
pub const SIDECAR_WALK_DEPTH: usize = 8;

#[derive(Debug, Error)]
pub enum MigrateError {
    #[error("refusing to migrate with a degraded scanner: {reason}; fix or remove the repository's .abcd/redact.json, then run `abcd history migrate` again")]
    Degraded { reason: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Forget(#[from] crate::forget::ForgetError),
}

/// What to do.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Write (without it: report only).
    pub apply: bool,
    /// Where to look for the harness's `agent-<id>.meta.json` sidecars.
    pub sidecar_roots: Vec<PathBuf>,
}

/// One composite record: what it becomes, or why it is refused.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Entry {
    /// The record file name (unchanged by the repair).
    pub path: String,
    pub stored_session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// A middle segment such as `wf_<run>`: reported, then dropped (no
    /// field holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_segment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_attribution: Option<String>,
    /// Why the sidecar found for this agent was not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidecar_note: Option<String>,
    pub wrote: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub repository: String,
    pub applied: bool,
    /// Records read.
    pub scanned: u64,
    /// Records filed under a composite id (repairable or refused).
    pub composite: u64,
    pub migrated: Vec<Entry>,
    pub refused: Vec<Entry>,
    /// The sidecar roots walked (empty: no lineage can be recovered).
    pub sidecar_roots: Vec<String>,
    /// Sidecars indexed by agent id.
    pub sidecars_indexed: u64,
    /// Agent ids claimed by two or more sidecars: dropped, never guessed.
    pub sidecars_ambiguous: Vec<String>,
}

impl Report {
    /// Repairable records whose spawn point a sidecar gave.
    pub fn with_lineage(&self) -> usize {
        self.migrated
            .iter()
            .filter(|e| e.spawn_attribution.as_deref() == Some("sidecar"))
            .count()
    }
}

/// The harness sidecars under some roots, by agent id.
#[derive(Debug, Default)]
pub struct SidecarIndex {
    by_agent: BTreeMap<String, PathBuf>,
    ambiguous: BTreeSet<String>,
}

impl SidecarIndex {
    /// Walks each root (depth ≤ [`SIDECAR_WALK_DEPTH`], symlinks never
    /// followed below the root) for `agent-<id>.meta.json`. An id claimed by
    /// two files is dropped, as is every file of it.
    pub fn build(roots: &[PathBuf]) -> SidecarIndex {
        let mut seen: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for root in roots {
            walk(root, 0, &mut seen);
        }
        let mut ix = SidecarIndex::default();
        for (id, mut paths) in seen {
            paths.sort();
            paths.dedup();
            if paths.len() == 1 {
                ix.by_agent.insert(id, paths.remove(0));
            } else {
                ix.ambiguous.insert(id);
            }
        }
        ix
    }

    pub fn get(&self, agent_id: &str) -> Option<&Path> {
        self.by_agent.get(agent_id).map(PathBuf::as_path)
    }

    pub fn len(&self) -> usize {
        self.by_agent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_agent.is_empty()
    }
}

fn walk(dir: &Path, depth: usize, seen: &mut BTreeMap<String, Vec<PathBuf>>) {
    if depth > SIDECAR_WALK_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        // `DirEntry::file_type` does not follow symlinks.
        let Ok(t) = entry.file_type() else { continue };
        let path = entry.path();
        if t.is_dir() {
            walk(&path, depth + 1, seen);
        } else if t.is_file() {
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("agent-"))
                .and_then(|n| n.strip_suffix(".meta.json"))
            else {
                continue;
            };
            if lineage::is_valid_id(id) {
                seen.entry(id.to_string()).or_default().push(path);
            }
        }
    }
}

/// The default sidecar root: the harness's projects directory
/// (`$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`), when it
/// exists.
pub fn default_sidecar_roots() -> Vec<PathBuf> {
    let base = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".claude"),
            None => return Vec::new(),
        },
    };
    let p = base.join("projects");
    if p.is_dir() {
        vec![p]
    } else {
        Vec::new()
    }
}

/// The full session id a composite record's body names: every JSON line's
/// `sessionId` and `parentSessionId` that starts with `prefix` and is a
/// valid id. Exactly one distinct candidate, else the reason it is refused.
pub fn recover_session_id(body: &[u8], prefix: &str) -> Result<String, String> {
    let mut found: BTreeSet<String> = BTreeSet::new();
    for line in body.split(|b| *b == b'\n') {
        if line.first() != Some(&b'{') {
            continue;
        }
        // Only lines that name a session are parsed.
        if memchr::memmem::find(line, b"essionId\"").is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        for key in ["sessionId", "parentSessionId"] {
            if let Some(s) = v.get(key).and_then(|s| s.as_str()) {
                if s.starts_with(prefix) && lineage::is_valid_id(s) {
                    found.insert(s.to_string());
                }
            }
        }
    }
    match found.len() {
        1 => Ok(found.into_iter().next().expect("one candidate")),
        0 => Err(format!(
            "no session identifier in the body begins with the stored prefix {prefix:?}; the record is left untouched"
        )),
        n => Err(format!(
            "the body carries {n} session identifiers beginning with the stored prefix {prefix:?}; refusing to guess which one spawned this agent"
        )),
    }
}

/// A planned repair: the record as read, and its rewritten file.
struct Plan {
    entry: Entry,
    old_sha: String,
    new_file: Vec<u8>,
}

/// Plans the repair of one record (no lock held). `None`: not composite,
/// or already repaired.
fn plan_one(
    name: &str,
    bytes: &[u8],
    scanner: &Scanner,
    sidecars: &SidecarIndex,
) -> Option<Result<Plan, Entry>> {
    let (meta, body) = record::parse(bytes).ok()?;
    if meta.lineage.agent_id.is_some() || !meta.lineage.session_id.contains("--agent-") {
        return None;
    }
    let stored = meta.lineage.session_id.clone();
    let mut entry = Entry {
        path: name.to_string(),
        stored_session_id: stored.clone(),
        ..Entry::default()
    };
    let refuse = |mut e: Entry, why: String| {
        e.refused = Some(why);
        Some(Err(e))
    };
    let Some(c) = parse_composite_session_id(&stored) else {
        return refuse(
            entry,
            "the composite id does not split into a prefix and an agent id that are valid identifiers".into(),
        );
    };
    entry.agent_id = Some(c.agent_id.clone());
    entry.extra_segment = c.extra_segment.clone();
    let session = match recover_session_id(body, &c.prefix) {
        Ok(s) => s,
        Err(why) => return refuse(entry, why),
    };
    entry.session_id = Some(session.clone());
    let mut lin = Lineage {
        session_id: session,
        agent_id: Some(c.agent_id.clone()),
        lineage_source: Some(LineageSource::Migrated),
        spawn_attribution: Some(SpawnAttribution::Unattributed),
        ..Lineage::default()
    };
    if let Some(path) = sidecars.get(&c.agent_id) {
        match fsutil::guarded_read(path, lineage::SIDECAR_CAP) {
            Err(e) => entry.sidecar_note = Some(e.to_string()),
            Ok(b) => match lineage::parse_harness_sidecar(&b, path) {
                SidecarOutcome::Accepted(s) => lineage::apply_sidecar(&mut lin, s),
                SidecarOutcome::Unplaced { agent_type } => lin.agent_type = agent_type,
                SidecarOutcome::Unreadable(why) => entry.sidecar_note = Some(why),
                SidecarOutcome::Absent => {}
            },
        }
    }
    // The scalars pass the same two-stage redaction as a capture's; an
    // identifier that redaction would change is refused.
    let scalars = [
        lin.session_id.clone(),
        lin.agent_id.clone().unwrap_or_default(),
        lin.parent_agent_id.clone().unwrap_or_default(),
        lin.agent_type.clone().unwrap_or_default(),
        lin.spawn_tool_use_id.clone().unwrap_or_default(),
    ];
    let parts: Vec<&str> = scalars.iter().map(String::as_str).collect();
    let out = match scanner.redact_parts(&parts) {
        Ok(o) => o,
        Err(e) => return refuse(entry, format!("redaction refused the lineage: {e}")),
    };
    for (i, field) in ["session_id", "agent_id", "parent_agent_id"]
        .iter()
        .enumerate()
    {
        if out[i].text != scalars[i] {
            return refuse(
                entry,
                format!(
                    "the recovered {field} matches a redaction rule; the record is left untouched"
                ),
            );
        }
    }
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    lin.agent_type = non_empty(&out[3].text);
    lin.spawn_tool_use_id = non_empty(&out[4].text);
    if let Err(e) = lin.validate_stored() {
        return refuse(entry, format!("the repaired lineage is invalid: {e}"));
    }
    let new_file = match record::relineage(bytes, &lin) {
        Ok(f) => f,
        Err(e) => return refuse(entry, e.to_string()),
    };
    entry.agent_type = lin.agent_type.clone();
    entry.parent_agent_id = lin.parent_agent_id.clone();
    entry.spawn_depth = (lin.spawn_depth > 0).then_some(lin.spawn_depth);
    entry.spawn_tool_use_id = lin.spawn_tool_use_id.clone();
    entry.spawn_attribution = lin.spawn_attribution.map(|a| a.as_str().to_string());
    Some(Ok(Plan {
        entry,
        old_sha: fsutil::sha256_hex(bytes),
        new_file,
    }))
}

/// Migrates one repository. `progress(done, total)` is called as records
/// are read. The caller refreshed the corpus.
pub fn run(
    corpus: &Corpus,
    scanner: &Scanner,
    req: &Request,
    progress: &dyn Fn(u64, u64),
) -> Result<Report, MigrateError> {
    if let Some(reason) = scanner.degraded() {
        return Err(MigrateError::Degraded {
            reason: reason.to_string(),
        });
    }
    let sidecars = SidecarIndex::build(&req.sidecar_roots);
    let mut report = Report {
        repository: corpus.lane.root_sha.clone(),
        applied: req.apply,
        sidecar_roots: req
            .sidecar_roots
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        sidecars_indexed: sidecars.len() as u64,
        sidecars_ambiguous: sidecars.ambiguous.iter().cloned().collect(),
        ..Report::default()
    };
    // The plan, without the lock (redaction is never under it).
    let listed = history::list(corpus)?;
    let total = listed.len() as u64;
    let dir = corpus.lane.records_dir();
    let mut plans = Vec::new();
    for (i, l) in listed.iter().enumerate() {
        progress(i as u64, total);
        report.scanned += 1;
        // Cheap filter on the listed metadata before reading the body.
        if l.meta.lineage.agent_id.is_some() || !l.meta.lineage.session_id.contains("--agent-") {
            continue;
        }
        let Ok(bytes) = fsutil::read_private(&dir.join(&l.file), RECORD_READ_CAP) else {
            continue;
        };
        match plan_one(&l.file, &bytes, scanner, &sidecars) {
            None => {}
            Some(Ok(p)) => plans.push(p),
            Some(Err(e)) => report.refused.push(e),
        }
    }
    progress(total, total);
    report.composite = (plans.len() + report.refused.len()) as u64;
    if !req.apply {
        report.migrated = plans.into_iter().map(|p| p.entry).collect();
        sort(&mut report);
        return Ok(report);
    }
    // Under the lock (bodies are only ever written under it, so the sweep
    // below cannot take another writer's body before its event): bodies
    // first, one flush for all of them, then each record that still has
    // the planned-from bytes gets its event.
    let locked = corpus.lock()?;
    for p in &plans {
        body::put_unsynced(&corpus.lane, &p.new_file)?;
    }
    if !plans.is_empty() {
        body::sync(&corpus.lane)?;
    }
    for mut p in plans {
        let current = fsutil::read_private(&dir.join(&p.entry.path), RECORD_READ_CAP)
            .map(|b| fsutil::sha256_hex(&b))
            .ok();
        if current.as_deref() != Some(p.old_sha.as_str()) {
            p.entry.refused = Some(
                "the record changed (or went) while migrate ran; run `abcd history migrate` again"
                    .into(),
            );
            report.refused.push(p.entry);
            continue;
        }
        let ev = Event::LineageMigrated(Box::new(LineageMigrated {
            record_name: p.entry.path.clone(),
            body: crate::event::BodyRef {
                sha256: fsutil::sha256_hex(&p.new_file),
                bytes: p.new_file.len() as u64,
            },
        }));
        match locked.append(&ev) {
            Ok(_) => {}
            // Journaled; the next catch-up applies it.
            Err(e) if e.is_unprojected() => {}
            Err(e) => return Err(e.into()),
        }
        p.entry.wrote = true;
        report.migrated.push(p.entry);
    }
    // A body written by a run killed before its event (or planned from a
    // record that changed) is named by no event: delete it, so a finished
    // migrate leaves `journal verify` clean.
    crate::forget::sweep_unreferenced(corpus)?;
    drop(locked);
    sort(&mut report);
    Ok(report)
}

fn sort(r: &mut Report) {
    r.migrated.sort_by(|a, b| a.path.cmp(&b.path));
    r.refused.sort_by(|a, b| a.path.cmp(&b.path));
}

/// How many records of a lane are filed under a composite id (what a
/// first open reports after adopting a predecessor's store, with the verb
/// that repairs them).
pub fn count_composite(corpus: &Corpus) -> Result<usize, MigrateError> {
    Ok(history::list(corpus)?
        .iter()
        .filter(|l| {
            l.meta.lineage.agent_id.is_none() && l.meta.lineage.session_id.contains("--agent-")
        })
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(ids: &[(&str, &str)]) -> Vec<u8> {
        let mut s = String::new();
        for (k, v) in ids {
            s.push_str(&serde_json::json!({"type": "user", *k: v}).to_string());
            s.push('\n');
        }
        s.push_str("not json {\"sessionId\":\"5a9221e2-0000\"}\n");
        s.into_bytes()
    }

    #[test]
    fn exactly_one_candidate_is_recovered() {
        let b = body(&[
            ("sessionId", "5a9221e2-1111-4000-8000-000000000001"),
            ("parentSessionId", "5a9221e2-1111-4000-8000-000000000001"),
            ("sessionId", "99999999-1111-4000-8000-000000000001"),
        ]);
        assert_eq!(
            recover_session_id(&b, "5a9221e2").unwrap(),
            "5a9221e2-1111-4000-8000-000000000001"
        );
    }

    #[test]
    fn none_or_two_candidates_are_refused_with_the_reason() {
        let none = recover_session_id(&body(&[("sessionId", "0000")]), "5a9221e2").unwrap_err();
        assert!(none.contains("no session identifier"), "{none}");
        let two = recover_session_id(
            &body(&[
                ("sessionId", "5a9221e2-a"),
                ("parentSessionId", "5a9221e2-b"),
            ]),
            "5a9221e2",
        )
        .unwrap_err();
        assert!(two.contains("2 session identifiers"), "{two}");
        // A line that is not JSON is never a candidate.
        let t = recover_session_id(b"not json \"sessionId\":\"5a9221e2-x\"\n", "5a9221e2");
        assert!(t.is_err());
    }

    #[test]
    fn an_agent_id_claimed_by_two_sidecars_is_dropped() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("p1/s1/subagents");
        let b = t.path().join("p2/s2/subagents/workflows/wf_1");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("agent-adup.meta.json"), "{}").unwrap();
        std::fs::write(b.join("agent-adup.meta.json"), "{}").unwrap();
        std::fs::write(b.join("agent-aone.meta.json"), "{}").unwrap();
        std::fs::write(b.join("agent-bad id.meta.json"), "{}").unwrap();
        let ix = SidecarIndex::build(&[t.path().to_path_buf()]);
        assert!(ix.get("adup").is_none());
        assert!(ix.ambiguous.contains("adup"));
        assert_eq!(
            ix.get("aone"),
            Some(b.join("agent-aone.meta.json").as_path())
        );
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn the_walk_stops_at_its_depth_and_never_follows_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let mut deep = t.path().to_path_buf();
        for i in 0..=SIDECAR_WALK_DEPTH {
            deep = deep.join(format!("d{i}"));
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("agent-adeep.meta.json"), "{}").unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("agent-alink.meta.json"), "{}").unwrap();
        std::os::unix::fs::symlink(other.path(), t.path().join("link")).unwrap();
        let ix = SidecarIndex::build(&[t.path().to_path_buf()]);
        assert!(ix.get("adeep").is_none());
        assert!(ix.get("alink").is_none());
        // One level shallower is found.
        let mut ok = t.path().to_path_buf();
        for i in 0..SIDECAR_WALK_DEPTH {
            ok = ok.join(format!("d{i}"));
        }
        std::fs::write(ok.join("agent-aok.meta.json"), "{}").unwrap();
        assert!(SidecarIndex::build(&[t.path().to_path_buf()])
            .get("aok")
            .is_some());
    }
}
