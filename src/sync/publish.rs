//! Publishing this machine's events under its own ref.
//!
//! Owns: finding the events this machine has not published yet (from the
//! journal position its last commit names), the new segment and the bodies
//! they need, and the commit: a child of the previous one, or — when a
//! forget is among them — a new root whose tree holds only the bodies
//! still current, so the old ones become unreachable (and go at the
//! server's next garbage collection).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use abcd_journal::{FrameKind, JournalError, Position};

use crate::body;
use crate::corpus::{Corpus, CorpusError};
use crate::event::{self, CaptureOutcome, Event};

use super::git::Git;
use super::wire::{self, PublishedUpTo};
use super::SyncError;

/// This machine's ref as the private repository holds it.
#[derive(Debug, Clone, Default)]
pub struct Own {
    pub commit: Option<String>,
    pub segments: u64,
    pub pos: Option<PublishedUpTo>,
}

pub fn read_own(git: &Git, refname: &str) -> Result<Own, SyncError> {
    let Some(commit) = git.resolve(&format!("{refname}^{{commit}}"))? else {
        return Ok(Own::default());
    };
    let msg = git.text(&["log", "-1", "--format=%B", &commit])?;
    let (segments, pos) = wire::parse_commit_message(&msg);
    Ok(Own {
        commit: Some(commit),
        segments,
        pos,
    })
}

/// What a publish did (or would do).
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub events: u64,
    pub bodies: u64,
    /// A forget was published: the ref was rewritten as a new root.
    pub rewritten: bool,
    pub commit: Option<String>,
}

/// The bodies an event names (before any forget).
fn named_bodies(ev: &Event) -> Vec<String> {
    match ev {
        Event::Captured(c) => match &c.outcome {
            CaptureOutcome::Stored { body, .. } => vec![body.sha256.clone()],
            CaptureOutcome::AlreadyStored { .. } => Vec::new(),
        },
        Event::LineageMigrated(m) => vec![m.body.sha256.clone()],
        Event::Forgotten(f) => f
            .rewrites
            .iter()
            .filter_map(|r| r.to.as_ref().map(|t| t.sha256.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every body this machine's published events need now: each named body
/// resolved through every forget, kept when this store holds it.
fn current_bodies(corpus: &Corpus) -> Result<BTreeSet<String>, SyncError> {
    let j = &corpus.journal;
    let mut named = Vec::new();
    let mut fwd: HashMap<String, Option<String>> = HashMap::new();
    for frame in j.read_from(&j.start()).map_err(CorpusError::from)? {
        let frame = frame.map_err(CorpusError::from)?;
        if frame.kind != FrameKind::Event {
            continue;
        }
        let Ok(env) = event::decode(&frame.payload) else {
            continue;
        };
        if let Event::Forgotten(f) = env.event.effective().as_ref() {
            for r in &f.rewrites {
                fwd.insert(r.from.clone(), r.to.as_ref().map(|t| t.sha256.clone()));
            }
        }
        if let Some(p) = wire::publishable(&env.event) {
            named.extend(named_bodies(&p));
        }
    }
    let mut out = BTreeSet::new();
    for sha in named {
        let mut cur = Some(sha);
        for _ in 0..=fwd.len() {
            match cur.as_ref().and_then(|c| fwd.get(c)) {
                Some(next) => cur = next.clone(),
                None => break,
            }
        }
        if let Some(c) = cur.filter(|c| body::read(&corpus.lane, c).is_ok()) {
            out.insert(c);
        }
    }
    Ok(out)
}

/// Publishes what is new under `refname` in the private repository.
pub fn publish(
    corpus: &Corpus,
    git: &Git,
    index_file: &Path,
    refname: &str,
    machine: &str,
    dry_run: bool,
) -> Result<Published, SyncError> {
    let own = read_own(git, refname)?;
    let j = &corpus.journal;
    let start = match &own.pos {
        Some(p) if p.journal_id == j.journal_id() => Position {
            seq: p.seq,
            offset: p.offset,
            hash: p.hash,
        },
        _ => j.start(),
    };
    let frames = match j.read_from(&start) {
        Ok(it) => it,
        // The journal was repaired or rewritten since: publish from the
        // start (events already published keep their ids; importers skip them).
        Err(JournalError::CheckpointMismatch { .. }) => {
            j.read_from(&j.start()).map_err(CorpusError::from)?
        }
        Err(e) => return Err(CorpusError::from(e).into()),
    };
    let mut encoded = Vec::new();
    let mut bodies: BTreeSet<String> = BTreeSet::new();
    let mut rewrite = false;
    let mut last: Option<Position> = None;
    for frame in frames {
        let frame = frame.map_err(CorpusError::from)?;
        last = Some(frame.end.clone());
        if frame.kind != FrameKind::Event {
            continue;
        }
        let env = event::decode(&frame.payload).map_err(CorpusError::from)?;
        let Some(p) = wire::publishable(&env.event) else {
            continue;
        };
        rewrite |= matches!(p, Event::Forgotten(_));
        bodies.extend(named_bodies(&p));
        encoded.push(event::encode(env.at_ns, &p).map_err(CorpusError::from)?);
    }
    let mut out = Published {
        events: encoded.len() as u64,
        rewritten: rewrite,
        commit: own.commit.clone(),
        ..Published::default()
    };
    let Some(last) = last else {
        return Ok(out);
    };
    if encoded.is_empty() && own.commit.is_some() {
        // Nothing to publish; the position moves with the next commit.
        return Ok(out);
    }
    let bodies: BTreeSet<String> = if rewrite {
        current_bodies(corpus)?
    } else {
        bodies
            .into_iter()
            .filter(|s| body::read(&corpus.lane, s).is_ok())
            .collect()
    };
    out.bodies = bodies.len() as u64;
    if dry_run {
        return Ok(out);
    }
    let ix = git.with_index(index_file);
    // The index mirrors the last commit; rebuilt from it when missing.
    if !index_file.exists() {
        match &own.commit {
            Some(c) => ix.run(&["read-tree", c], None)?,
            None => ix.run(&["read-tree", "--empty"], None)?,
        };
    }
    let mut info = String::new();
    let format_oid = git.hash_blob(wire::FORMAT_FILE.as_bytes())?;
    info.push_str(&format!("100644 blob {format_oid}\tFORMAT\n"));
    let mut segments = own.segments;
    if !encoded.is_empty() {
        segments += 1;
        let seg = git.hash_blob(&wire::encode_segment(&encoded))?;
        info.push_str(&format!(
            "100644 blob {seg}\tevents/{}\n",
            wire::segment_name(segments)
        ));
    }
    if rewrite {
        // Drop every body the published events no longer need.
        let listed = ix.run(&["ls-files", "bodies/"], None)?;
        for path in String::from_utf8_lossy(&listed).lines() {
            let sha = path.rsplit('/').next().unwrap_or("");
            if !bodies.contains(sha) {
                info.push_str(&format!(
                    "0 0000000000000000000000000000000000000000\t{path}\n"
                ));
            }
        }
    }
    let list: Vec<&String> = bodies.iter().collect();
    let paths: Vec<_> = list.iter().map(|s| body::path(&corpus.lane, s)).collect();
    let oids = git.hash_paths(&paths)?;
    for (sha, oid) in list.iter().zip(oids) {
        info.push_str(&format!("100644 blob {oid}\t{}\n", wire::body_path(sha)));
    }
    ix.run(
        &["update-index", "--add", "--index-info"],
        Some(info.as_bytes()),
    )?;
    let tree = ix.text(&["write-tree"])?;
    let pos = PublishedUpTo {
        seq: last.seq,
        offset: last.offset,
        hash: last.hash,
        journal_id: j.journal_id(),
    };
    let msg = wire::commit_message(machine, Some(&pos), segments);
    let mut args = vec!["commit-tree", tree.as_str(), "-m", msg.as_str()];
    let parent;
    if let (false, Some(c)) = (rewrite, &own.commit) {
        parent = c.clone();
        args.extend(["-p", parent.as_str()]);
    }
    let commit = git.text(&args)?;
    let old = own
        .commit
        .clone()
        .unwrap_or_else(|| "0".repeat(commit.len()));
    git.run(&["update-ref", refname, &commit, &old], None)?;
    out.commit = Some(commit);
    Ok(out)
}
