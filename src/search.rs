//! Search: full text over the redacted corpus (`history search`), with
//! SQLite FTS5 (rusqlite, bundled).
//!
//! Owns: the search index `index/search/fts.sqlite` — a projection of the
//! records, kept current **lazily, before each query**: the live records
//! (the summary table) are compared with the records the index holds; new
//! ones are indexed and gone ones deleted, under the store lock, in one
//! transaction. Lazily because a capture runs in a hook's drain, whose
//! budget is milliseconds, and nothing but a query reads the index; a
//! rebuild (`journal replay --rebuild`) clears `index/`, so the next query
//! reindexes everything. The index holds only what the records hold: one
//! row per content block (text, thinking, tool input, tool result) of each
//! live record, with the record's name, session, agent, type, the block's
//! role, tool, turn and time. A document's rowid carries its record's start
//! time ([`ROWIDS_PER_SECOND`]), so the newest hits are a walk down the
//! rowids that stops at the limit: a query costs about the same whether a
//! word is in ten blocks or in every one (ranking every match by BM25, as
//! `--rank` does, took seconds for a common word over 1 GB).
//!
//! Must never: index anything but a live record's redacted body, or write
//! outside `index/search/`. (SQLite opens its own files, not through
//! `abcd_fsio::open`: the directory is proven private first and the files
//! are narrowed to 0600.)

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use thiserror::Error;

use crate::clock::parse_rfc3339;
use crate::corpus::{Corpus, CorpusError};
use crate::fsutil;
use crate::history::{self, HistoryError};
use crate::projection::{self, ProjectionError};
use crate::summary::Summary;
use crate::transcript::{self, Block};

/// How long a query waits for another process that is updating the index
/// (SQLite's lock): a first build of 1 GB takes ~20 s; past this the query
/// fails with the index's path and what to do.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Index schema: a different one is dropped and rebuilt.
const SCHEMA: i64 = 5;

#[derive(Debug, Error)]
pub enum SearchError {
    #[error("search index {path}: {source}; delete that directory and search again to rebuild it")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("search index {path} is being written by another abcd process (waited {}s); search again once it is done", BUSY_TIMEOUT.as_secs())]
    Busy { path: PathBuf },
    #[error("search: {query:?} is not a query FTS5 understands ({why}); quote phrases with \"…\", end a prefix with *, or pass plain words")]
    BadQuery { query: String, why: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
}

/// What to look for.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// FTS5 syntax: words (all must match), "a phrase", prefix*, OR, NOT.
    pub text: String,
    pub session: Option<String>,
    pub agent_type: Option<String>,
    /// `user`, `assistant` or `tool`.
    pub role: Option<String>,
    pub tool: Option<String>,
    /// Block time bounds, unix ns (inclusive since, exclusive until).
    pub since_ns: Option<u64>,
    pub until_ns: Option<u64>,
    pub limit: usize,
    /// Order by BM25 (best first) instead of newest first.
    pub rank: bool,
}

/// One hit.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    pub record: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    pub turn: i64,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// A short excerpt, matches between `[` and `]`.
    pub snippet: String,
    /// BM25 (lower is better), with `rank` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Newest first is higher first, across repositories too (the rowid
    /// carries the record's start: see [`ROWIDS_PER_SECOND`]).
    #[serde(skip)]
    pub order: i64,
}

/// What bringing the index up to date did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Synced {
    pub indexed_records: usize,
    pub indexed_bytes: u64,
    pub deleted_records: usize,
}

/// Where the index lives.
pub fn index_path(corpus: &Corpus) -> PathBuf {
    corpus.lane.index_dir().join("search").join("fts.sqlite")
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> SearchError + '_ {
    move |source| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            SearchError::Busy {
                path: path.to_path_buf(),
            }
        }
        _ => SearchError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

fn open(corpus: &Corpus) -> Result<(Connection, PathBuf), SearchError> {
    let path = index_path(corpus);
    let dir = path.parent().expect("index path has a parent");
    fsutil::ensure_private_dir(dir)?;
    // SQLite opens the file itself, so it is proven first the way every
    // store file is (`abcd_fsio::open`: created 0600 when missing; a
    // symlink, another account's file or a non-regular file is refused; a
    // widened mode narrowed), and then opened with SQLITE_OPEN_NOFOLLOW. The
    // directory is ours and 0700, so nothing else can swap the file between
    // the two opens. Its rollback journal is checked the same way when one
    // is there (SQLite creates and deletes it around each write).
    drop(fsutil::open(&path, fsutil::Access::ReadWriteCreate)?);
    let journal = dir.join("fts.sqlite-journal");
    if std::fs::symlink_metadata(&journal).is_ok() {
        drop(fsutil::open(&journal, fsutil::Access::ReadWrite)?);
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
        | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(&path, flags).map_err(sql(&path))?;
    let e = sql(&path);
    // A query waits for another process's index update to commit rather
    // than failing at once (an update of 1 GB takes ~20 s).
    db.busy_timeout(BUSY_TIMEOUT).map_err(&e)?;
    db.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;",
    )
    .map_err(&e)?;
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&e)?;
    if version != SCHEMA {
        // A record's fields once, in `records`; each document points to it
        // (`rec`). `columnsize = 0`: no per-row size table (835 instead of
        // 882 MB on 1 GB, 15 % less build CPU); only BM25 (`--rank`) wants
        // sizes, and then FTS5 tokenizes the rows it scores.
        db.execute_batch(
            "DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS docs;
             CREATE TABLE records(id INTEGER PRIMARY KEY, file TEXT UNIQUE NOT NULL,
               session TEXT NOT NULL, agent TEXT, agent_type TEXT,
               lo INTEGER NOT NULL, hi INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS records_session ON records(session);
             CREATE INDEX IF NOT EXISTS records_hi ON records(hi);
             CREATE TABLE IF NOT EXISTS synced(id INTEGER PRIMARY KEY CHECK (id = 0), position TEXT);
             CREATE VIRTUAL TABLE docs USING fts5(
               text, rec UNINDEXED, role UNINDEXED, tool UNINDEXED,
               turn UNINDEXED, ts UNINDEXED, ts_ns UNINDEXED,
               tokenize = 'unicode61', columnsize = 0);",
        )
        .map_err(&e)?;
        db.execute_batch(&format!("PRAGMA user_version = {SCHEMA}"))
            .map_err(&e)?;
    }
    drop(e);
    Ok((db, path))
}

fn indexed(db: &Connection, path: &Path) -> Result<BTreeSet<String>, SearchError> {
    let mut st = db.prepare("SELECT file FROM records").map_err(sql(path))?;
    let rows = st
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(sql(path))?;
    let mut out = BTreeSet::new();
    for r in rows {
        out.insert(r.map_err(sql(path))?);
    }
    Ok(out)
}

/// Brings the index up to date with the live records (see the module
/// doc): nothing is written when nothing changed.
pub fn sync(corpus: &Corpus) -> Result<Synced, SearchError> {
    let (mut db, path) = open(corpus)?;
    // The projections' position: when the index was synced at the same
    // one, no record came or went since (one small file read).
    let position =
        |lane| projection::read_checkpoint(lane).map(|c| format!("{}:{}", c.seq, c.hash));
    let synced_at: Option<String> = db
        .query_row("SELECT position FROM synced WHERE id = 0", [], |r| r.get(0))
        .ok();
    if synced_at.is_some() && synced_at == position(&corpus.lane) {
        return Ok(Synced::default());
    }
    let live: BTreeSet<String> = projection::all_summaries(&corpus.lane)?
        .into_iter()
        .map(|s| s.file)
        .collect();
    if indexed(&db, &path)? == live {
        record_position(&db, &path, position(&corpus.lane))?;
        return Ok(Synced::default());
    }
    // Something changed: decide again under the lock, with the
    // projections caught up.
    let locked = corpus.lock()?;
    let summaries = projection::all_summaries(&locked.corpus.lane)?;
    let have = indexed(&db, &path)?;
    let live: BTreeSet<&str> = summaries.iter().map(|s| s.file.as_str()).collect();
    let mut out = Synced::default();
    let tx = db.transaction().map_err(sql(&path))?;
    for gone in have.iter().filter(|f| !live.contains(f.as_str())) {
        let span: Option<(i64, i64, i64)> = tx
            .query_row(
                "SELECT id, lo, hi FROM records WHERE file = ?1",
                params![gone],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .ok();
        if let Some((id, lo, hi)) = span {
            tx.execute(
                "DELETE FROM docs WHERE rowid BETWEEN ?1 AND ?2 AND rec = ?3",
                params![lo, hi, id],
            )
            .map_err(sql(&path))?;
        }
        tx.execute("DELETE FROM records WHERE file = ?1", params![gone])
            .map_err(sql(&path))?;
        out.deleted_records += 1;
    }
    let new: Vec<&Summary> = summaries
        .iter()
        .filter(|s| !have.contains(&s.file))
        .collect();
    {
        let mut ins = tx
            .prepare(
                "INSERT INTO docs(rowid, text, rec, role, tool, turn, ts, ts_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(sql(&path))?;
        // Bodies are read a session at a time, through `history` (the one
        // reader of record files), and split into documents by a second
        // thread while this one inserts: on two cores the build goes at
        // the pace of the slower half, not of both in turn.
        let reader: &Corpus = locked.corpus;
        let new = &new;
        std::thread::scope(|scope| -> Result<(), SearchError> {
            let (send, parsed) = std::sync::mpsc::sync_channel(4);
            scope.spawn(move || {
                let mut wanted: HashMap<&str, BTreeSet<&str>> = HashMap::new();
                for s in new {
                    wanted
                        .entry(s.session_id())
                        .or_default()
                        .insert(s.file.as_str());
                }
                let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
                for s in new {
                    if let Some(files) = wanted.remove(s.session_id()) {
                        match history::session_bodies(reader, s.session_id()) {
                            Ok(v) => {
                                for (l, body) in v {
                                    if files.contains(l.file.as_str()) {
                                        bodies.insert(l.file, body);
                                    }
                                }
                            }
                            Err(e) => {
                                let _ = send.send(Err(e));
                                return;
                            }
                        }
                    }
                    let Some(body) = bodies.remove(&s.file) else {
                        continue;
                    };
                    if send.send(Ok((*s, body.len(), documents(&body)))).is_err() {
                        return;
                    }
                }
            });
            for item in parsed {
                let (s, len, docs): (&Summary, usize, Vec<Document>) = item?;
                // Rowids carry the record's start (see [`rowid_base`]):
                // the next free one in its second.
                let base = rowid_base(s);
                let next: i64 = tx
                    .query_row(
                        "SELECT max(hi) FROM records WHERE hi BETWEEN ?1 AND ?2",
                        params![base, base + ROWIDS_PER_SECOND - 1],
                        |r| r.get::<_, Option<i64>>(0),
                    )
                    .map_err(sql(&path))?
                    .map_or(base, |h| h + 1);
                // The record's row first (its id is on every document),
                // with the span its documents will take: [lo, hi], empty
                // when hi < lo.
                let (lo, hi) = (next, next + docs.len() as i64 - 1);
                tx.execute(
                    "INSERT INTO records(file, session, agent, agent_type, lo, hi)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        s.file,
                        s.session_id(),
                        s.agent_id(),
                        s.meta.lineage.agent_type,
                        lo,
                        hi
                    ],
                )
                .map_err(sql(&path))?;
                let rec = tx.last_insert_rowid();
                for (rowid, d) in (lo..).zip(docs) {
                    ins.execute(params![
                        rowid,
                        d.text,
                        rec,
                        d.role,
                        d.tool,
                        d.turn as i64,
                        d.ts,
                        d.ts.as_deref().and_then(parse_rfc3339).map(|n| n as i64),
                    ])
                    .map_err(sql(&path))?;
                }
                out.indexed_records += 1;
                out.indexed_bytes += len as u64;
            }
            Ok(())
        })?;
    }
    record_position(&tx, &path, position(&corpus.lane))?;
    tx.commit().map_err(sql(&path))?;
    drop(locked);
    Ok(out)
}

/// Rowids of one second of record start times: a record's documents get
/// consecutive rowids from `start second × ROWIDS_PER_SECOND` on (after
/// those of records that started in the same second), so rowid order is
/// the order of the records' start times whatever order they were indexed
/// in, and "newest first" is a walk down the rowids that stops after
/// `limit` matches.
const ROWIDS_PER_SECOND: i64 = 1 << 32;

/// The first rowid of `s`'s second: its transcript's start, else its
/// capture time (seconds, clamped to 2^31 so the rowid fits an i64).
fn rowid_base(s: &Summary) -> i64 {
    let ns = s
        .started_at
        .as_deref()
        .and_then(parse_rfc3339)
        .unwrap_or(s.meta.captured_at_ns);
    let secs = (ns / 1_000_000_000).min((1 << 31) - 1) as i64;
    secs * ROWIDS_PER_SECOND
}

fn record_position(
    db: &Connection,
    path: &Path,
    position: Option<String>,
) -> Result<(), SearchError> {
    db.execute(
        "INSERT INTO synced(id, position) VALUES (0, ?1)
         ON CONFLICT(id) DO UPDATE SET position = excluded.position",
        params![position],
    )
    .map_err(sql(path))?;
    Ok(())
}

/// One indexed document: a content block of a turn.
#[derive(Debug, Clone)]
pub struct Document {
    pub text: String,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    pub tool: Option<String>,
    pub turn: usize,
    pub ts: Option<String>,
}

/// One document per content block of a turn line, numbered as the
/// summary (and `reconstruct`) number turns. Public for the engine
/// comparison in `tools/tantivy-bench`, which indexes the same documents.
pub fn documents(body: &[u8]) -> Vec<Document> {
    let p = transcript::parse(body);
    let mut out = Vec::new();
    let mut tools: HashMap<String, String> = HashMap::new();
    let mut turn = 0usize;
    let mut last_msg: Option<String> = None;
    let mut last_assistant = false;
    for l in p.lines.iter().filter(|l| l.is_turn()) {
        let same = l.kind == "assistant"
            && l.message_id.is_some()
            && l.message_id == last_msg
            && last_assistant;
        if !same {
            turn += 1;
        }
        last_assistant = l.kind == "assistant";
        last_msg = if last_assistant {
            l.message_id.clone()
        } else {
            None
        };
        let speaker = if l.kind == "assistant" {
            "assistant"
        } else {
            "user"
        };
        for b in &l.blocks {
            let (text, role, tool) = match b {
                Block::Text(t) | Block::Thinking(t) => (t.clone(), speaker, None),
                Block::ToolUse { id, name, input } => {
                    tools.insert(id.clone(), name.clone());
                    (format!("{name} {input}"), "tool", Some(name.clone()))
                }
                Block::ToolResult {
                    tool_use_id, text, ..
                } => (text.clone(), "tool", tools.get(tool_use_id).cloned()),
                Block::Other(_) => continue,
            };
            if text.trim().is_empty() {
                continue;
            }
            out.push(Document {
                text,
                role,
                tool,
                turn,
                ts: l.timestamp.clone(),
            });
        }
    }
    out
}

/// Hits of several repositories as one list: newest first (best first with
/// `rank`), at most `limit`.
pub fn merge(mut hits: Vec<Hit>, rank: bool, limit: usize) -> Vec<Hit> {
    if rank {
        hits.sort_by(|a, b| {
            a.score
                .unwrap_or(f64::MAX)
                .total_cmp(&b.score.unwrap_or(f64::MAX))
        });
    } else {
        hits.sort_by_key(|h| std::cmp::Reverse(h.order));
    }
    hits.truncate(limit);
    hits
}

/// Plain words, each quoted: what a query FTS5 refuses is retried as.
fn quoted_words(q: &str) -> String {
    q.split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Most indexed terms a `prefix*` is expanded to (see [`expand_prefixes`]):
/// each costs one seek to list and one lazy posting iterator to read, so
/// 64 stay within a few milliseconds on a 1 GB index.
pub const PREFIX_TERMS: usize = 64;

/// Each `word*` outside quotes (an ASCII alphanumeric prefix standing
/// alone) rewritten as `("term1" OR "term2" …)`, the indexed terms that
/// start with it — the first [`PREFIX_TERMS`] in term order when there are
/// more, with a note saying so (the others are not searched; a longer
/// prefix reaches them). Why: FTS5 merges every posting of every matching
/// term before it yields the first row of a prefix query (2 s for a prefix
/// of words found in every record of 1 GB), while an OR of terms is read
/// lazily, newest first, and stops at the limit. The terms are listed one
/// seek each (see [`prefix_terms`]), never by reading their postings.
fn expand_prefixes(db: &Connection, q: &str, notes: &mut Vec<String>) -> String {
    if q.contains("NEAR") {
        return q.to_owned();
    }
    let chars: Vec<char> = q.chars().collect();
    let mut out = String::with_capacity(q.len());
    let mut quoted = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts_word = i == 0 || chars[i - 1].is_whitespace() || chars[i - 1] == '(';
        if quoted || !c.is_ascii_alphanumeric() || !starts_word {
            quoted ^= c == '"';
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let ends = |j: usize| j >= chars.len() || chars[j].is_whitespace() || chars[j] == ')';
        if chars.get(i) == Some(&'*') && ends(i + 1) {
            if let Some(terms) = prefix_terms(db, &word.to_ascii_lowercase(), notes) {
                // FTS5 allows an implicit AND between phrases only, not
                // next to a group: say it.
                if operand_before(&out) {
                    out.push_str("AND ");
                }
                out.push_str(&terms);
                i += 1;
                let rest: String = chars[i..].iter().collect();
                if operand_after(&rest) {
                    out.push_str(" AND");
                }
                continue;
            }
        }
        out.push_str(&word);
    }
    out
}

const OPERATORS: [&str; 3] = ["AND", "OR", "NOT"];

/// Whether the query written so far ends with an operand (so an implicit
/// AND would join what comes next).
fn operand_before(out: &str) -> bool {
    let t = out.trim_end();
    !(t.is_empty()
        || t.ends_with('(')
        || OPERATORS.contains(&t.rsplit(char::is_whitespace).next().unwrap_or("")))
}

/// Whether the rest of the query starts with an operand.
fn operand_after(rest: &str) -> bool {
    let t = rest.trim_start();
    let word = t
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    !(t.is_empty() || t.starts_with(')') || OPERATORS.contains(&word))
}

/// The indexed terms starting with `prefix` (ASCII alphanumeric), at most
/// [`PREFIX_TERMS`] (a note says when there are more), as an FTS5 OR
/// group; `None` when there are none (FTS5 then answers the prefix itself:
/// no hit).
///
/// Listed through the `instance` view of `fts5vocab` (one row per
/// occurrence, produced lazily): one `LIMIT 1` lookup per term, each
/// starting just past the previous term, so listing reads one posting per
/// term. The `row` view counts every posting of every term it lists (55 ms
/// for a word in every block of 1 GB).
fn prefix_terms(db: &Connection, prefix: &str, notes: &mut Vec<String>) -> Option<String> {
    let last = *prefix.as_bytes().last()?;
    let upper = format!("{}{}", &prefix[..prefix.len() - 1], (last + 1) as char);
    let mut st = db
        .prepare_cached("SELECT term FROM temp.vocab_i WHERE term >= ?1 AND term < ?2 LIMIT 1")
        .ok()?;
    let mut terms: Vec<String> = Vec::new();
    let mut from = prefix.to_owned();
    while terms.len() <= PREFIX_TERMS {
        let next: Option<String> = st
            .query_row(params![from, upper], |r| r.get(0))
            .optional()
            .ok()?;
        let Some(t) = next else { break };
        // The smallest string after `t` a tokenizer can emit (terms hold
        // no control characters).
        from = format!("{t}\u{1}");
        terms.push(t);
    }
    if terms.is_empty() {
        return None;
    }
    if terms.len() > PREFIX_TERMS {
        terms.truncate(PREFIX_TERMS);
        notes.push(format!(
            "{prefix}* matches more than {PREFIX_TERMS} indexed words; searched the first {PREFIX_TERMS} ({} … {}) — type more of the word to reach the others",
            terms[0],
            terms[PREFIX_TERMS - 1]
        ));
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    Some(format!("({})", quoted.join(" OR ")))
}

/// Most hits a query returns unless told otherwise (`--limit`).
pub const DEFAULT_LIMIT: usize = 20;

/// Runs `q` over one repository's index (brought up to date first).
///
/// Hits come newest first (by their record's start: rowid order, see
/// [`ROWIDS_PER_SECOND`]), so a query stops after `limit` matching blocks
/// however many blocks match: a word in every record costs what a rare one does.
/// With `rank`, hits are ordered by BM25 instead, which scores every match
/// first (seconds for a word in most of a large corpus). Snippets are made
/// for the hits returned only.
pub fn search(corpus: &Corpus, q: &Query) -> Result<Vec<Hit>, SearchError> {
    search_noted(corpus, q).map(|(hits, _)| hits)
}

/// [`search`], with the notes a user should read beside the hits (a
/// prefix that matched more words than were searched).
pub fn search_noted(corpus: &Corpus, q: &Query) -> Result<(Vec<Hit>, Vec<String>), SearchError> {
    sync(corpus)?;
    let (db, path) = open(corpus)?;
    // One session: the rowid span of its records bounds the scan (its
    // records are usually indexed together).
    let (lo, hi) = match &q.session {
        None => (i64::MIN, i64::MAX),
        Some(s) => {
            let span: (Option<i64>, Option<i64>) = db
                .query_row(
                    "SELECT min(lo), max(hi) FROM records WHERE session = ?1 AND hi >= lo",
                    params![s],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql(&path))?;
            match span {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => return Ok((Vec::new(), Vec::new())),
            }
        }
    };
    let row = |r: &rusqlite::Row| -> Result<Hit, rusqlite::Error> {
        Ok(Hit {
            repository: None,
            record: r.get(0)?,
            session_id: r.get(1)?,
            agent_id: r.get(2)?,
            agent_type: r.get(3)?,
            role: r.get(4)?,
            tool: r.get(5)?,
            turn: r.get(6)?,
            timestamp: r.get(7)?,
            snippet: crate::summary::label(&r.get::<_, String>(8)?),
            score: r.get(9)?,
            order: r.get(10)?,
        })
    };
    const COLUMNS: &str = "r.file, r.session, r.agent, r.agent_type, role, tool, turn, ts,
        snippet(docs, 0, '[', ']', '…', 16)";
    // The record's columns come from `records`, one row lookup per
    // document looked at.
    const FILTERS: &str = "docs MATCH ?1 AND docs.rowid BETWEEN ?2 AND ?3
        AND (?4 IS NULL OR r.session = ?4)
        AND (?5 IS NULL OR r.agent_type = ?5)
        AND (?6 IS NULL OR role = ?6)
        AND (?7 IS NULL OR tool = ?7)
        AND (?8 IS NULL OR ts_ns >= ?8)
        AND (?9 IS NULL OR ts_ns < ?9)";
    const FROM: &str = "docs JOIN records r ON r.id = docs.rec";
    let run = |text: &str| -> Result<Vec<Hit>, rusqlite::Error> {
        let args = params![
            text,
            lo,
            hi,
            q.session,
            q.agent_type,
            q.role,
            q.tool,
            q.since_ns.map(|n| n as i64),
            q.until_ns.map(|n| n as i64),
            q.limit as i64
        ];
        if !q.rank {
            // FTS5 yields rows in rowid order itself (no sort), so the
            // snippet is made for the rows returned only.
            let mut st = db.prepare(&format!(
                "SELECT {COLUMNS}, NULL, docs.rowid FROM {FROM} WHERE {FILTERS} ORDER BY docs.rowid DESC LIMIT ?10"
            ))?;
            return st.query_map(args, row)?.collect();
        }
        // Ranked: SQLite computes result columns before it sorts, so the
        // best rowids first, then the snippets of those rows only.
        let mut st = db.prepare(&format!(
            "SELECT {COLUMNS}, bm25(docs), docs.rowid FROM {FROM} WHERE docs MATCH ?1 AND docs.rowid IN (
               SELECT docs.rowid FROM {FROM} WHERE {FILTERS} ORDER BY rank LIMIT ?10)
             ORDER BY rank"
        ))?;
        let hits = st.query_map(args, row)?.collect();
        hits
    };
    db.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab_i USING fts5vocab(main, docs, instance)",
    )
    .map_err(sql(&path))?;
    // The query with its prefixes expanded, else as typed, else (FTS5
    // refused it) as plain quoted words.
    let mut notes = Vec::new();
    let expanded = expand_prefixes(&db, &q.text, &mut notes);
    let mut first = None;
    for (i, text) in [expanded, q.text.clone(), quoted_words(&q.text)]
        .into_iter()
        .enumerate()
    {
        if text.trim().is_empty() {
            continue;
        }
        match run(&text) {
            Ok(h) => return Ok((h, if i == 0 { notes } else { Vec::new() })),
            // SQLITE_ERROR is what FTS5 says of a query it cannot parse;
            // anything else (busy, I/O, corruption) is about the index.
            Err(
                e @ rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error {
                        code: rusqlite::ErrorCode::Unknown,
                        ..
                    },
                    _,
                ),
            ) => {
                first.get_or_insert(e);
            }
            Err(e) => return Err(sql(&path)(e)),
        }
    }
    Err(SearchError::BadQuery {
        query: q.text.clone(),
        why: first.map_or_else(|| "an empty query".to_owned(), |e| e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5(text);
             INSERT INTO docs(text) VALUES ('nocapture nocaptured module modules'), ('zebra');
             CREATE VIRTUAL TABLE temp.vocab_i USING fts5vocab(main, docs, instance);",
        )
        .unwrap();
        db
    }

    fn xp(db: &Connection, q: &str) -> String {
        let mut notes = Vec::new();
        let out = expand_prefixes(db, q, &mut notes);
        assert!(notes.is_empty(), "{notes:?}");
        out
    }

    /// More words than are searched under one prefix: the first
    /// [`PREFIX_TERMS`] in term order, and a note naming the range.
    #[test]
    fn a_prefix_of_many_words_is_capped_with_a_note() {
        let db = db();
        for i in 0..PREFIX_TERMS + 6 {
            db.execute(
                "INSERT INTO docs(text) VALUES (?1)",
                params![format!("pfx{i:03} pfx{i:03} other")],
            )
            .unwrap();
        }
        let mut notes = Vec::new();
        let q = expand_prefixes(&db, "pfx* other", &mut notes);
        assert_eq!(q.matches(" OR ").count(), PREFIX_TERMS - 1, "{q}");
        assert!(q.starts_with("(\"pfx000\" OR \"pfx001\""), "{q}");
        assert!(
            q.ends_with(&format!("\"pfx{:03}\") AND other", PREFIX_TERMS - 1)),
            "{q}"
        );
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("more than 64") && notes[0].contains("pfx000 … pfx063"),
            "{notes:?}"
        );
        let n: i64 = db
            .query_row(
                "SELECT count(*) FROM docs WHERE docs MATCH ?1",
                params![q],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, PREFIX_TERMS as i64);
        // Under the cap: every word, no note.
        let mut notes = Vec::new();
        let q = expand_prefixes(&db, "pfx00*", &mut notes);
        assert_eq!(q.matches(" OR ").count(), 9, "{q}");
        assert!(notes.is_empty());
    }

    #[test]
    fn a_prefix_is_expanded_to_the_indexed_terms_outside_quotes_only() {
        let db = db();
        assert_eq!(
            xp(&db, "nocapt* zeb*"),
            "(\"nocapture\" OR \"nocaptured\") AND (\"zebra\")"
        );
        assert_eq!(
            xp(&db, "(Modul* OR x)"),
            "((\"module\" OR \"modules\") OR x)"
        );
        // Quoted, part of a larger bareword, a phrase prefix, NEAR, or no
        // such term: left to FTS5.
        for q in [
            "\"nocapt*\"",
            "\"module nocapt\"*",
            "x_nocapt*",
            "NEAR(nocapt* zebra)",
            "qqq*",
            "nocapt*x",
        ] {
            assert_eq!(xp(&db, q), q);
        }
        // Every rewrite is a query FTS5 accepts, with the same rows.
        for (q, n) in [
            ("nocapt*", 1),
            ("modul* zeb*", 0),
            ("modul* OR zeb*", 2),
            ("nocapture modul*", 1),
            ("modul* nocapture", 1),
            ("\"module modules\" zeb*", 0),
            ("zeb* NOT modul*", 1),
            ("modul* NOT zebra", 1),
            ("x OR modul* nocaptured OR zebra", 2),
        ] {
            let count = |text: &str| -> i64 {
                db.query_row(
                    "SELECT count(*) FROM docs WHERE docs MATCH ?1",
                    params![text],
                    |r| r.get(0),
                )
                .unwrap()
            };
            assert_eq!(count(&xp(&db, q)), n, "{q}");
            assert_eq!(count(q), n, "{q}");
        }
    }

    #[test]
    fn a_locked_index_is_reported_as_busy_not_as_a_bad_query() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fts.sqlite");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE t(x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        reader.busy_timeout(std::time::Duration::ZERO).unwrap();
        let e = reader
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        let e = sql(&path)(e);
        assert!(matches!(e, SearchError::Busy { .. }), "{e:?}");
        assert!(e.to_string().contains("search again"), "{e}");
    }

    #[test]
    fn a_record_s_rowids_start_at_its_start_second() {
        use crate::lineage::{Lineage, LineageSource};
        let meta = crate::record::RecordMeta::native(
            &Lineage::main_thread("s", LineageSource::Hook),
            "root",
            5_000_000_000,
            &"a".repeat(64),
        );
        let mut s = Summary::of("r.md", &meta, b"");
        assert_eq!(rowid_base(&s), 5 * ROWIDS_PER_SECOND, "capture time");
        s.started_at = Some("1970-01-01T00:00:07Z".into());
        assert_eq!(rowid_base(&s), 7 * ROWIDS_PER_SECOND, "transcript start");
    }
}
