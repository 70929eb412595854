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
//! role, tool, turn and time.
//!
//! Must never: index anything but a live record's redacted body, or write
//! outside `index/search/`. (SQLite opens its own files, not through
//! `abcd_fsio::open`: the directory is proven private first and the files
//! are narrowed to 0600.)

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::Serialize;
use thiserror::Error;

use crate::clock::parse_rfc3339;
use crate::corpus::{Corpus, CorpusError};
use crate::fsutil;
use crate::projection::{self, ProjectionError, RECORD_READ_CAP};
use crate::record;
use crate::summary::Summary;
use crate::transcript::{self, Block};

/// Index schema: a different one is dropped and rebuilt.
const SCHEMA: i64 = 2;

#[derive(Debug, Error)]
pub enum SearchError {
    #[error("search index {path}: {source}; delete that directory and search again to rebuild it")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("search: {query:?} is not a query FTS5 understands ({why}); quote phrases with \"…\", end a prefix with *, or pass plain words")]
    BadQuery { query: String, why: String },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
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
    /// BM25 (lower is better).
    pub score: f64,
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
    move |source| SearchError::Sqlite {
        path: path.to_path_buf(),
        source,
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
    db.execute_batch("PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF;")
        .map_err(&e)?;
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&e)?;
    if version != SCHEMA {
        db.execute_batch(
            "DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS docs;
             CREATE TABLE records(file TEXT PRIMARY KEY);
             CREATE TABLE IF NOT EXISTS synced(id INTEGER PRIMARY KEY CHECK (id = 0), position TEXT);
             CREATE VIRTUAL TABLE docs USING fts5(
               text, file UNINDEXED, session UNINDEXED, agent UNINDEXED,
               agent_type UNINDEXED, role UNINDEXED, tool UNINDEXED,
               turn UNINDEXED, ts UNINDEXED, ts_ns UNINDEXED,
               tokenize = 'unicode61');",
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
        tx.execute("DELETE FROM docs WHERE file = ?1", params![gone])
            .map_err(sql(&path))?;
        tx.execute("DELETE FROM records WHERE file = ?1", params![gone])
            .map_err(sql(&path))?;
        out.deleted_records += 1;
    }
    {
        let mut ins = tx
            .prepare(
                "INSERT INTO docs(text, file, session, agent, agent_type, role, tool, turn, ts, ts_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(sql(&path))?;
        for s in summaries.iter().filter(|s| !have.contains(&s.file)) {
            let rp = corpus.lane.records_dir().join(&s.file);
            let Ok(bytes) = fsutil::read_private(&rp, RECORD_READ_CAP) else {
                continue;
            };
            let Ok((_, body)) = record::parse(&bytes) else {
                continue;
            };
            for d in docs(s, body) {
                ins.execute(params![
                    d.text,
                    s.file,
                    s.session_id(),
                    s.agent_id(),
                    s.meta.lineage.agent_type,
                    d.role,
                    d.tool,
                    d.turn as i64,
                    d.ts,
                    d.ts.as_deref().and_then(parse_rfc3339).map(|n| n as i64),
                ])
                .map_err(sql(&path))?;
            }
            tx.execute("INSERT INTO records(file) VALUES (?1)", params![s.file])
                .map_err(sql(&path))?;
            out.indexed_records += 1;
            out.indexed_bytes += body.len() as u64;
        }
    }
    record_position(&tx, &path, position(&corpus.lane))?;
    tx.commit().map_err(sql(&path))?;
    drop(locked);
    Ok(out)
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

struct Doc {
    text: String,
    role: &'static str,
    tool: Option<String>,
    turn: usize,
    ts: Option<String>,
}

/// One document per content block of a turn line, numbered as the
/// summary (and `reconstruct`) number turns.
fn docs(_s: &Summary, body: &[u8]) -> Vec<Doc> {
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
            out.push(Doc {
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

/// Plain words, each quoted: what a query FTS5 refuses is retried as.
fn quoted_words(q: &str) -> String {
    q.split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `q` over one repository's index (brought up to date first).
pub fn search(corpus: &Corpus, q: &Query) -> Result<Vec<Hit>, SearchError> {
    sync(corpus)?;
    let (db, path) = open(corpus)?;
    let run = |text: &str| -> Result<Vec<Hit>, rusqlite::Error> {
        // The best rows first (FTS5's `rank`, BM25), then snippets for those
        // rows only: SQLite computes result columns before sorting, so a
        // snippet in the ranking query would be made for every match.
        let mut st = db.prepare(
            "SELECT file, session, agent, agent_type, role, tool, turn, ts,
                    snippet(docs, 0, '[', ']', '…', 16), rank
             FROM docs WHERE docs MATCH ?1 AND rowid IN (
               SELECT rowid FROM docs WHERE docs MATCH ?1
                 AND (?2 IS NULL OR session = ?2)
                 AND (?3 IS NULL OR agent_type = ?3)
                 AND (?4 IS NULL OR role = ?4)
                 AND (?5 IS NULL OR tool = ?5)
                 AND (?6 IS NULL OR ts_ns >= ?6)
                 AND (?7 IS NULL OR ts_ns < ?7)
               ORDER BY rank LIMIT ?8)
             ORDER BY rank, file, turn",
        )?;
        let rows = st.query_map(
            params![
                text,
                q.session,
                q.agent_type,
                q.role,
                q.tool,
                q.since_ns.map(|n| n as i64),
                q.until_ns.map(|n| n as i64),
                q.limit as i64
            ],
            |r| {
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
                })
            },
        )?;
        rows.collect()
    };
    match run(&q.text) {
        Ok(h) => Ok(h),
        Err(first) => {
            let retry = quoted_words(&q.text);
            if retry.is_empty() {
                return Err(SearchError::BadQuery {
                    query: q.text.clone(),
                    why: first.to_string(),
                });
            }
            run(&retry).map_err(|e| match e {
                rusqlite::Error::SqliteFailure(..) => SearchError::BadQuery {
                    query: q.text.clone(),
                    why: first.to_string(),
                },
                e => sql(&path)(e),
            })
        }
    }
}
