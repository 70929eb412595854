//! `abcd sync`: the repository's redacted corpus travels to and from a git
//! remote, and every machine that has exchanged everything holds the same
//! `records/`, byte for byte.
//!
//! Owns: the machine id (`$ABCD_HOME/machine-id`, made once), the remote a
//! repository syncs with, the private bare repository of a lane
//! (`<lane>/sync/repo.git`) and what it has imported (`sync/state.json`),
//! and the order of one sync: list the remote's refs (refusing a newer
//! format), fetch, import every forget then every record event of other
//! machines, publish this machine's new events, push its own ref with a
//! lease (fetch, import and retry when it moved), and collect garbage
//! locally after a forget. `sync status` reads only local state.
//!
//! Invariants:
//! - Only redacted material leaves: events `wire::publishable` selects
//!   and the bodies they name. Hooks never sync.
//! - Each machine writes only its own ref; pushes never conflict.
//! - A failure leaves the store as it was or with whole events imported:
//!   the next sync resumes (imports are idempotent by event id).

pub mod auto;
pub mod git;
pub mod import;
pub mod publish;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::corpus::{Corpus, CorpusError};
use crate::event::Event;
use crate::fsutil;

use self::git::{CatFile, Git, GitError};
use self::import::{BodySource, Outcome};

#[derive(Debug, Error)]
pub enum SyncError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("this repository has no remote named {name:?}; pass `abcd sync --remote <name|url>` or set one with `git config abcd.remote <name|url>`")]
    NoRemote { name: String },
    #[error("cannot reach the remote {remote}: {why}\n  nothing local changed; run `abcd sync` again when it is reachable")]
    Unreachable { remote: String, why: String },
    #[error("the remote {remote} holds abcd sync refs of format v{found} ({refname}); this abcd reads format v{}: upgrade abcd on this machine, nothing local changed", wire::FORMAT_VERSION)]
    NewerFormat {
        remote: String,
        found: u32,
        refname: String,
    },
    #[error("machine {origin} published something this abcd cannot read: {why}; nothing of it was imported — sync again after that machine (or this one) upgrades abcd")]
    Malformed { origin: String, why: String },
    #[error("machine {origin} published body {sha256} but its tree does not hold it (or it is damaged); nothing of it was imported — the next sync retries")]
    MissingBody { origin: String, sha256: String },
    #[error("the push of this machine's ref was refused {attempts} times (another sync of this machine id raced it): {why}; nothing local is lost, run `abcd sync` again")]
    PushRaced { attempts: u32, why: String },
    #[error(
        "another `abcd sync` of this repository is running (lock {0}); try again when it finishes"
    )]
    Busy(PathBuf),
    #[error("the remote {remote} refused this machine's push: {why}\n  everything is kept here (published locally); run `abcd sync` again once the remote accepts pushes")]
    PushFailed { remote: String, why: String },
    #[error("the remote's ref for this machine id ({machine}) holds commits this machine did not publish: another machine uses the same id (an ABCD_HOME copied from here?). Nothing was pushed and nothing local changed; on the copy, delete $ABCD_HOME/machine-id (a new id is made on its next sync) and sync there again")]
    DuplicateMachine { machine: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Forget(#[from] crate::forget::ForgetError),
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error("cannot write {path}: {why}")]
    State { path: PathBuf, why: String },
}

impl From<crate::projection::ProjectionError> for SyncError {
    fn from(e: crate::projection::ProjectionError) -> Self {
        SyncError::Corpus(e.into())
    }
}

/// How long a sync waits for another sync of the same lane.
pub const SYNC_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Record events imported under one hold of the store lock, so a long
/// first sync lets hooks in between batches.
pub const IMPORT_BATCH: usize = 256;

/// How many times a push refused because this machine's ref moved is
/// retried (fetch, import, publish, push).
pub const PUSH_ATTEMPTS: u32 = 3;

/// What `abcd sync` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub remote: Option<String>,
    pub push: bool,
    pub pull: bool,
    pub dry_run: bool,
}

/// What one sync did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub machine: String,
    pub remote: String,
    pub dry_run: bool,
    /// Other machines whose refs were read.
    pub machines: Vec<String>,
    /// Events imported now (records, migrations, forgets).
    pub imported: u64,
    /// Forgets among them.
    pub forgets_imported: u64,
    /// Events already here (a re-pull).
    pub already_known: u64,
    /// Events of this machine published now, and the bodies sent with them.
    pub published_events: u64,
    pub published_bodies: u64,
    /// This machine's ref was rewritten (a forget): the old commits are
    /// unreachable and go at the server's next garbage collection.
    pub rewritten: bool,
    pub pushed: bool,
}

/// Whether this repository has synced from this home (its private
/// repository exists): a forget then tells the user to sync.
pub fn is_set_up(home: &Path, root_sha: &str) -> bool {
    home.join("transcripts")
        .join(root_sha)
        .join("sync/repo.git/HEAD")
        .is_file()
}

/// The machine id of a home: 32 hex digits, made once.
pub fn machine_id(home: &Path) -> Result<String, SyncError> {
    let path = home.join("machine-id");
    if let Ok(b) = fsutil::read_private(&path, 256) {
        let id = String::from_utf8_lossy(&b).trim().to_owned();
        if wire::is_machine_id(&id) {
            return Ok(id);
        }
    }
    let mut raw = [0u8; 16];
    getrandom(&mut raw);
    let id = hex::encode(raw);
    fsutil::write_atomic(&path, format!("{id}\n").as_bytes(), true).map_err(|e| {
        SyncError::State {
            path: path.clone(),
            why: e.to_string(),
        }
    })?;
    Ok(id)
}

fn getrandom(buf: &mut [u8]) {
    // The journal's own source of randomness (getrandom / /dev/urandom).
    let id = abcd_journal::EventId::random();
    for (d, s) in buf.iter_mut().zip(id.0) {
        *d = s;
    }
}

/// The URL a repository syncs with: `--remote` (a remote name of the
/// repository, or a URL), else `git config abcd.remote`, else `origin`.
pub fn resolve_remote(repo_root: &Path, asked: Option<&str>) -> Result<String, SyncError> {
    let g = Git::bare();
    let root = repo_root.to_string_lossy().into_owned();
    let configured = g
        .text(&["-C", &root, "config", "--get", "abcd.remote"])
        .ok()
        .filter(|s| !s.is_empty());
    let name = asked
        .map(str::to_owned)
        .or(configured)
        .unwrap_or_else(|| "origin".into());
    if let Ok(url) = g.text(&["-C", &root, "remote", "get-url", &name]) {
        return Ok(url);
    }
    let looks_like_url = name.contains("://")
        || name.contains(':')
        || name.starts_with('/')
        || name.starts_with('.');
    if looks_like_url {
        Ok(name)
    } else {
        Err(SyncError::NoRemote { name })
    }
}

/// A URL as printed: any `user:password@` dropped.
pub fn display_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(a)) if a > s => format!("{}{}", &url[..s + 3], &url[a + 1..]),
        _ => url.to_owned(),
    }
}

fn sync_dir(corpus: &Corpus) -> PathBuf {
    corpus.lane.dir.join("sync")
}

fn private_repo(corpus: &Corpus) -> Result<Git, SyncError> {
    let dir = sync_dir(corpus);
    fsutil::ensure_private_dir(&dir).map_err(CorpusError::from)?;
    let repo = dir.join("repo.git");
    let git = Git::at(&repo);
    if !repo.join("HEAD").exists() {
        let path = repo.to_string_lossy().into_owned();
        Git::bare().run(&["init", "--quiet", "--bare", "--shared=0600", &path], None)?;
        for (k, v) in [
            ("gc.auto", "0"),
            ("core.logAllRefUpdates", "false"),
            ("receive.denyNonFastForwards", "false"),
        ] {
            git.run(&["config", k, v], None)?;
        }
    }
    Ok(git)
}

/// What the private repository has imported: per machine, per segment,
/// the blob id read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    origins: BTreeMap<String, BTreeMap<String, String>>,
}

fn state_path(corpus: &Corpus) -> PathBuf {
    sync_dir(corpus).join("state.json")
}

fn read_state(corpus: &Corpus) -> State {
    fsutil::read_private(&state_path(corpus), 64 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn write_state(corpus: &Corpus, s: &State) -> Result<(), SyncError> {
    let path = state_path(corpus);
    let bytes = serde_json::to_vec(s).expect("state serialises");
    fsutil::write_atomic(&path, &bytes, false).map_err(|e| SyncError::State {
        path,
        why: e.to_string(),
    })
}

/// A git command that talks to the remote failed: git's own words when
/// it said any.
fn unreachable(url: &str, e: GitError) -> SyncError {
    SyncError::Unreachable {
        remote: display_url(url),
        why: match e {
            GitError::Failed { stderr, .. } => stderr,
            other => other.to_string(),
        },
    }
}

/// Lists the remote's abcd refs; refuses a newer format.
fn list_remote(url: &str) -> Result<Vec<(String, String)>, SyncError> {
    let out = Git::bare()
        .run(&["ls-remote", url, "refs/abcd/*"], None)
        .map_err(|e| unreachable(url, e))?;
    let mut refs = Vec::new();
    for line in String::from_utf8_lossy(&out).lines() {
        let Some((oid, name)) = line.split_once('\t') else {
            continue;
        };
        match wire::ref_version(name) {
            Some(v) if v > wire::FORMAT_VERSION => {
                return Err(SyncError::NewerFormat {
                    remote: display_url(url),
                    found: v,
                    refname: name.to_owned(),
                })
            }
            _ => refs.push((name.to_owned(), oid.to_owned())),
        }
    }
    Ok(refs)
}

fn fetch(git: &Git, url: &str, root: &str) -> Result<(), SyncError> {
    let spec = format!(
        "+{}*:{}*",
        wire::ref_prefix(root),
        wire::tracking_prefix(root)
    );
    git.run(
        &["fetch", "--quiet", "--no-tags", "--prune", url, &spec],
        None,
    )
    .map_err(|e| unreachable(url, e))?;
    // It names the URL (which may carry credentials) and is written with
    // the umask's mode: nothing needs it.
    if let Some(dir) = git.dir() {
        let _ = std::fs::remove_file(dir.join("FETCH_HEAD"));
    }
    Ok(())
}

/// The other machines' refs as fetched: machine id → commit.
fn tracked(git: &Git, root: &str) -> Result<BTreeMap<String, String>, SyncError> {
    let prefix = wire::tracking_prefix(root);
    let out = git.text(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        prefix.trim_end_matches('/'),
    ])?;
    let mut map = BTreeMap::new();
    for line in out.lines() {
        if let Some((name, oid)) = line.split_once(' ') {
            if let Some(m) = name.strip_prefix(&prefix) {
                if wire::is_machine_id(m) {
                    map.insert(m.to_owned(), oid.to_owned());
                }
            }
        }
    }
    Ok(map)
}

/// Bodies read from the publishers' fetched commits.
struct Trees {
    cat: CatFile,
    commits: HashMap<String, String>,
}

impl BodySource for Trees {
    fn body(&mut self, origin: &str, sha256: &str) -> Result<Option<Vec<u8>>, SyncError> {
        let Some(commit) = self.commits.get(origin) else {
            return Ok(None);
        };
        // A digest read from another machine's event is checked before it
        // names a path.
        if !crate::body::is_digest(sha256) {
            return Ok(None);
        }
        let spec = format!("{commit}:{}", wire::body_path(sha256));
        let Some(b) = self.cat.get(&spec, crate::body::BODY_CAP)? else {
            return Ok(None);
        };
        if fsutil::sha256_hex(&b) != sha256 {
            return Err(SyncError::MissingBody {
                origin: origin.to_owned(),
                sha256: sha256.to_owned(),
            });
        }
        Ok(Some(b))
    }
}

/// Reads every segment not imported yet; imports forgets, then records.
fn pull(
    corpus: &Corpus,
    git: &Git,
    me: &str,
    dry_run: bool,
    report: &mut Report,
) -> Result<bool, SyncError> {
    let root = &corpus.lane.root_sha;
    let refs = tracked(git, root)?;
    let mut state = read_state(corpus);
    let mut cat = git.cat_file()?;
    let mut new_segments: Vec<(String, String, String)> = Vec::new();
    let mut events: Vec<(String, wire::Published)> = Vec::new();
    for (machine, commit) in &refs {
        if machine == me {
            continue;
        }
        report.machines.push(machine.clone());
        let format = cat.get(&format!("{commit}:FORMAT"), 4096)?;
        if format.as_deref() != Some(wire::FORMAT_FILE.as_bytes()) {
            let found = format
                .as_deref()
                .map(|f| String::from_utf8_lossy(f).trim().to_owned())
                .unwrap_or_else(|| "no FORMAT file".into());
            return Err(SyncError::Malformed {
                origin: machine.clone(),
                why: format!(
                    "its tree says {found:?}, this abcd reads {:?}",
                    wire::FORMAT_FILE.trim()
                ),
            });
        }
        let listing = git.run(&["ls-tree", commit, "events/"], None)?;
        let done = state.origins.get(machine);
        for line in String::from_utf8_lossy(&listing).lines() {
            // `<mode> blob <oid>\tevents/<name>`
            let Some((head, path)) = line.split_once('\t') else {
                continue;
            };
            let oid = head.split_whitespace().nth(2).unwrap_or("").to_owned();
            let name = path.trim_start_matches("events/").to_owned();
            if done.and_then(|d| d.get(&name)) == Some(&oid) {
                continue;
            }
            let bytes = cat
                .get(&oid, wire::SEGMENT_CAP)?
                .ok_or_else(|| SyncError::Malformed {
                    origin: machine.clone(),
                    why: format!("segment {name} is missing"),
                })?;
            for p in wire::decode_segment(&bytes).map_err(|e| SyncError::Malformed {
                origin: machine.clone(),
                why: e.to_string(),
            })? {
                events.push((machine.clone(), p));
            }
            new_segments.push((machine.clone(), name, oid));
        }
    }
    let mut trees = Trees {
        cat,
        commits: refs.clone().into_iter().collect(),
    };
    let mut forgot = false;
    if dry_run {
        let locked = corpus.lock()?;
        for (_, p) in &events {
            if import::known(&locked, &p.id)? {
                report.already_known += 1;
            } else {
                report.imported += 1;
                if matches!(p.env.event, Event::Forgotten(_)) {
                    report.forgets_imported += 1;
                }
            }
        }
        return Ok(false);
    }
    let count = |o: Outcome, report: &mut Report| match o {
        Outcome::New => report.imported += 1,
        Outcome::Known => report.already_known += 1,
    };
    // Forgets first, from every machine, before any record is applied.
    {
        let locked = corpus.lock()?;
        // A sync killed last time between writing bodies and journaling
        // them (or between a forget's event and its deletions) left bodies
        // no event needs: finish that first, so `journal verify` is clean.
        let interrupted = sync_dir(corpus).join("import.pending");
        let forget_marker = crate::body::forget_marker(&corpus.lane);
        if interrupted.exists() || forget_marker.exists() {
            crate::forget::sweep_unreferenced(corpus)?;
            fsutil::remove_file_if_exists(&forget_marker).map_err(CorpusError::from)?;
            fsutil::remove_file_if_exists(&interrupted).map_err(CorpusError::from)?;
        }
        for (origin, p) in &events {
            if let Event::Forgotten(f) = &p.env.event {
                let r = import::import_forget(&locked, &mut trees, origin, p, f)?;
                if let Some(o) = r.outcome {
                    if o == Outcome::New {
                        report.forgets_imported += 1;
                        forgot = true;
                    }
                    count(o, report);
                }
            }
        }
    }
    let records: Vec<&(String, wire::Published)> = events
        .iter()
        .filter(|(_, p)| !matches!(p.env.event, Event::Forgotten(_)))
        .collect();
    let tty = crate::render::progress_enabled();
    let interrupted = sync_dir(corpus).join("import.pending");
    if !records.is_empty() {
        fsutil::write_atomic(&interrupted, b"", true).map_err(CorpusError::from)?;
    }
    for (i, chunk) in records.chunks(IMPORT_BATCH).enumerate() {
        let locked = corpus.lock()?;
        let mut fwd = None;
        let mut batch = import::Batch::default();
        for (origin, p) in chunk {
            match import::import_record(&locked, &mut batch, &mut trees, &mut fwd, origin, p) {
                Ok(o) => count(o, report),
                Err(e) => {
                    // What was decided before it is journaled (its bodies
                    // are then referenced); the segments stay unread, so
                    // the next sync retries from this event.
                    batch.flush(&locked)?;
                    return Err(e);
                }
            }
        }
        batch.flush(&locked)?;
        drop(locked);
        if tty {
            let done = (i * IMPORT_BATCH + chunk.len()) as u64;
            eprint!("\rsync: {done}/{} events imported", records.len());
            if done as usize >= records.len() {
                eprintln!();
            }
        }
    }
    fsutil::remove_file_if_exists(&interrupted).map_err(CorpusError::from)?;
    // Everything read is journaled: remember the segments.
    for (machine, name, oid) in new_segments {
        state.origins.entry(machine).or_default().insert(name, oid);
    }
    write_state(corpus, &state)?;
    Ok(forgot)
}

/// Pushes this machine's ref with a lease on what the remote held.
fn push(git: &Git, url: &str, refname: &str, expect: Option<&str>) -> Result<bool, SyncError> {
    let Some(local) = git.resolve(refname)? else {
        return Ok(false);
    };
    if expect == Some(local.as_str()) {
        return Ok(false);
    }
    let lease = format!("--force-with-lease={refname}:{}", expect.unwrap_or(""));
    let spec = format!("{refname}:{refname}");
    let (ok, out, err) = git.run_status(&["push", "--porcelain", &lease, url, &spec])?;
    if ok {
        return Ok(true);
    }
    // A lease that no longer holds (the ref moved since the fetch) is a
    // race: fetch, import and try again. Anything else is the remote's
    // answer, said as it is.
    let text = format!("{out}\n{err}");
    if text.contains("stale info") || text.contains("[rejected]") || text.contains("fetch first") {
        Err(SyncError::PushRaced {
            attempts: 1,
            why: err.trim().to_owned(),
        })
    } else {
        Err(SyncError::PushFailed {
            remote: display_url(url),
            why: err.trim().to_owned(),
        })
    }
}

/// One `abcd sync`.
pub fn run(corpus: &Corpus, repo_root: &Path, opts: &Options) -> Result<Report, SyncError> {
    git::check_version()?;
    let me = machine_id(&corpus.home)?;
    let url = resolve_remote(repo_root, opts.remote.as_deref())?;
    let git = private_repo(corpus)?;
    let lock_path = sync_dir(corpus).join("sync.lock");
    let _lock = fsutil::FileLock::acquire(&lock_path, SYNC_LOCK_TIMEOUT)
        .map_err(|_| SyncError::Busy(lock_path.clone()))?;
    let root = corpus.lane.root_sha.clone();
    let own_ref = format!("{}{me}", wire::ref_prefix(&root));
    let own_tracking = format!("{}{me}", wire::tracking_prefix(&root));
    let index_file = sync_dir(corpus).join("own.index");
    let mut report = Report {
        machine: me.clone(),
        remote: display_url(&url),
        dry_run: opts.dry_run,
        ..Report::default()
    };
    let mut gc = false;
    let mut last_err = String::new();
    for attempt in 1..=PUSH_ATTEMPTS {
        list_remote(&url)?;
        let before = tracked(&git, &root)?;
        fetch(&git, &url, &root)?;
        let after = tracked(&git, &root)?;
        check_own(
            corpus,
            &git,
            &me,
            &own_ref,
            before.get(&me),
            after.get(&me),
            &index_file,
        )?;
        // A ref rewritten by its machine (a forget): what it dropped goes
        // from here too once imported.
        gc |= before.iter().any(|(m, c)| {
            after
                .get(m)
                .is_some_and(|n| n != c && !is_ancestor(&git, c, n))
        });
        if gc && !opts.dry_run {
            mark_gc(corpus)?;
        }
        if opts.pull {
            report.machines.clear();
            let forgot = pull(corpus, &git, &me, opts.dry_run, &mut report)?;
            if forgot {
                mark_gc(corpus)?;
            }
            gc |= forgot;
        }
        if !opts.push {
            break;
        }
        let p = publish::publish(corpus, &git, &index_file, &own_ref, &me, opts.dry_run)?;
        report.published_events += if attempt == 1 { p.events } else { 0 };
        report.published_bodies += if attempt == 1 { p.bodies } else { 0 };
        report.rewritten |= p.rewritten;
        if p.rewritten && !opts.dry_run {
            mark_gc(corpus)?;
            gc = true;
        }
        if opts.dry_run {
            break;
        }
        let expect = git.resolve(&own_tracking)?;
        match push(&git, &url, &own_ref, expect.as_deref()) {
            Ok(pushed) => {
                report.pushed = pushed;
                if pushed {
                    git.run(&["update-ref", &own_tracking, &own_ref], None)?;
                }
                last_err.clear();
                break;
            }
            Err(SyncError::PushRaced { why, .. }) => last_err = why,
            Err(e) => return Err(e),
        }
    }
    if !last_err.is_empty() {
        return Err(SyncError::PushRaced {
            attempts: PUSH_ATTEMPTS,
            why: last_err,
        });
    }
    let pending = sync_dir(corpus).join("gc.pending");
    if gc || pending.exists() {
        // Nothing a forget removed may stay in this home's objects. The
        // marker makes a sync killed before the collection collect next time.
        fsutil::write_atomic(&pending, b"", true).map_err(CorpusError::from)?;
        git.run(&["gc", "--quiet", "--prune=now"], None)?;
        fsutil::remove_file_if_exists(&pending).map_err(CorpusError::from)?;
    }
    Ok(report)
}

/// What the remote holds under this machine's id must be what this
/// machine published (or an ancestor of it). A private repository lost
/// (`sync/` deleted) adopts the remote's commit when it was published from
/// this very journal; anything else is another machine using this id.
fn check_own(
    corpus: &Corpus,
    git: &Git,
    me: &str,
    own_ref: &str,
    before: Option<&String>,
    after: Option<&String>,
    index_file: &Path,
) -> Result<(), SyncError> {
    let Some(remote) = after else {
        return Ok(());
    };
    if before == Some(remote) {
        return Ok(());
    }
    match git.resolve(own_ref)? {
        Some(local) if local == *remote || is_ancestor(git, remote, &local) => Ok(()),
        Some(_) => Err(SyncError::DuplicateMachine {
            machine: me.to_owned(),
        }),
        None => {
            let msg = git.text(&["log", "-1", "--format=%B", remote])?;
            let (_, pos) = wire::parse_commit_message(&msg);
            if pos.is_some_and(|p| p.journal_id == corpus.journal.journal_id()) {
                git.run(&["update-ref", own_ref, remote], None)?;
                let _ = std::fs::remove_file(index_file);
                Ok(())
            } else {
                Err(SyncError::DuplicateMachine {
                    machine: me.to_owned(),
                })
            }
        }
    }
}

/// Records that this home's objects must be collected (a forget came or
/// went out), so a sync killed before its collection does it next time.
fn mark_gc(corpus: &Corpus) -> Result<(), SyncError> {
    let p = sync_dir(corpus).join("gc.pending");
    fsutil::write_atomic(&p, b"", true).map_err(CorpusError::from)?;
    Ok(())
}

fn is_ancestor(git: &Git, old: &str, new: &str) -> bool {
    git.run(&["merge-base", "--is-ancestor", old, new], None)
        .is_ok()
}

/// `abcd sync status`: local state only (no network).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub machine: String,
    pub remote: Option<String>,
    /// This machine's published commit, and whether the remote (as last
    /// fetched) holds it.
    pub own_commit: Option<String>,
    pub own_pushed: bool,
    /// Events of this machine not published yet (records, forgets).
    pub unpublished_events: u64,
    /// Other machines as last fetched: id, segments, segments imported.
    pub machines: Vec<MachineStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MachineStatus {
    pub machine: String,
    pub segments: u64,
    pub imported_segments: u64,
}

pub fn status(corpus: &Corpus, repo_root: &Path) -> Result<Status, SyncError> {
    let me = machine_id(&corpus.home)?;
    let mut st = Status {
        machine: me.clone(),
        remote: resolve_remote(repo_root, None)
            .ok()
            .map(|u| display_url(&u)),
        ..Status::default()
    };
    let repo = sync_dir(corpus).join("repo.git");
    let root = &corpus.lane.root_sha;
    let own_ref = format!("{}{me}", wire::ref_prefix(root));
    // Publishable events after the published position (O(new)).
    let unpublished = |from: Option<&wire::PublishedUpTo>| -> Result<u64, SyncError> {
        let j = &corpus.journal;
        let start = match from {
            Some(p) if p.journal_id == j.journal_id() => abcd_journal::Position {
                seq: p.seq,
                offset: p.offset,
                hash: p.hash,
            },
            _ => j.start(),
        };
        let frames = j
            .read_from(&start)
            .or_else(|_| j.read_from(&j.start()))
            .map_err(CorpusError::from)?;
        let mut n = 0;
        for f in frames {
            let f = f.map_err(CorpusError::from)?;
            if f.kind != abcd_journal::FrameKind::Event {
                continue;
            }
            if let Ok(env) = crate::event::decode(&f.payload) {
                n += u64::from(wire::publishable(&env.event).is_some());
            }
        }
        Ok(n)
    };
    if !repo.join("HEAD").exists() {
        st.unpublished_events = unpublished(None)?;
        return Ok(st);
    }
    git::check_version()?;
    let git = Git::at(&repo);
    let own = publish::read_own(&git, &own_ref)?;
    st.unpublished_events = unpublished(own.pos.as_ref())?;
    let tracking = git.resolve(&format!("{}{me}", wire::tracking_prefix(root)))?;
    st.own_pushed = own.commit.is_some() && tracking == own.commit;
    st.own_commit = own.commit;
    let state = read_state(corpus);
    for (m, commit) in tracked(&git, root)? {
        if m == me {
            continue;
        }
        let listing = git.run(&["ls-tree", &commit, "events/"], None)?;
        let segments = String::from_utf8_lossy(&listing).lines().count() as u64;
        st.machines.push(MachineStatus {
            imported_segments: state.origins.get(&m).map_or(0, |d| d.len() as u64),
            machine: m,
            segments,
        });
    }
    Ok(st)
}
