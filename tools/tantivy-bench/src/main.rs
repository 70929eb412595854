//! The engine comparison `history search` was chosen by: tantivy over the
//! same documents abcd indexes with SQLite FTS5 (`abcd::search::documents`
//! of every live record, read through `abcd::history`), on the store that
//! `search-scale` keeps.
//!
//! Usage (its own workspace, so tantivy stays out of abcd's build):
//!   target/release/search-scale 10000 102400 21 /tmp/store   # FTS5, keeps the store
//!   cd tools/tantivy-bench && cargo build --release &&
//!   target/release/abcd-tantivy-bench /tmp/store [RUNS]
//!
//! Reports the index build (read + parse + index, one indexing thread as
//! FTS5 has one), the index size, and per query the median and p95 of a
//! top-20 by BM25 and of the 20 newest matches (a fast-field order), each
//! with the snippets and stored fields of the 20 hits.

use std::path::{Path, PathBuf};
use std::time::Instant;

use abcd::corpus::Corpus;
use tantivy::collector::TopDocs;
use tantivy::query::{Query, QueryParser, RegexQuery};
use tantivy::schema::{Schema, Value, FAST, INDEXED, STORED, STRING, TEXT};
use tantivy::snippet::SnippetGenerator;
use tantivy::{doc, Index, IndexWriter, Order, TantivyDocument};

/// The queries `search-scale` runs, in the same order.
const QUERIES: [(&str, &str); 10] = [
    ("rare", "zanzibar"),
    ("rare", "zanzibar needle"),
    ("common", "cargo"),
    ("common", "tests passed"),
    ("common", "module_42"),
    ("phrase", "\"cargo test\""),
    ("phrase", "\"all 7 tests passed\""),
    ("prefix", "nocaptu*"),
    ("prefix", "modu*"),
    ("prefix", "zanzi*"),
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn p95(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * 0.95).round() as usize]
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

fn main() -> tantivy::Result<()> {
    let mut args = std::env::args().skip(1);
    let store = PathBuf::from(args.next().expect("usage: abcd-tantivy-bench STORE [RUNS]"));
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(21);
    let sha = "3".repeat(40);
    let corpus = Corpus::open_existing(&store, &sha)
        .expect("open the store")
        .expect("a store written by search-scale");

    let mut sb = Schema::builder();
    let text = sb.add_text_field("text", TEXT | STORED);
    let file = sb.add_text_field("file", STRING | STORED);
    let session = sb.add_text_field("session", STRING | STORED);
    let agent = sb.add_text_field("agent", STRING | STORED);
    let agent_type = sb.add_text_field("agent_type", STRING | STORED);
    let role = sb.add_text_field("role", STRING | STORED);
    let tool = sb.add_text_field("tool", STRING | STORED);
    let turn = sb.add_u64_field("turn", STORED);
    let ts = sb.add_text_field("ts", STORED);
    let ts_ns = sb.add_i64_field("ts_ns", INDEXED | FAST);
    let seq = sb.add_u64_field("seq", FAST);
    let schema = sb.build();
    let dir = store.join("tantivy-index");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let index = Index::create_in_dir(&dir, schema)?;

    // Build: the same records in the same order as abcd's sync.
    let t = Instant::now();
    let mut summaries = abcd::history::summaries(&corpus, None).expect("summaries");
    summaries.sort_by_cached_key(|s| (s.started_at.clone(), s.meta.captured_at_ns, s.file.clone()));
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 256 << 20)?;
    let mut bytes = 0u64;
    let mut n = 0u64;
    let mut done = std::collections::BTreeSet::new();
    for s in &summaries {
        if !done.insert(s.session_id().to_owned()) {
            continue;
        }
        for (l, body) in abcd::history::session_bodies(&corpus, s.session_id()).expect("bodies") {
            bytes += body.len() as u64;
            let meta = summaries
                .iter()
                .find(|x| x.file == l.file)
                .expect("summary");
            for d in abcd::search::documents(&body) {
                let mut td = doc!(
                    text => d.text,
                    file => l.file.clone(),
                    session => meta.session_id(),
                    role => d.role,
                    turn => d.turn as u64,
                    seq => n,
                );
                if let Some(a) = meta.agent_id() {
                    td.add_text(agent, a);
                }
                if let Some(a) = &meta.meta.agent_type {
                    td.add_text(agent_type, a);
                }
                if let Some(x) = &d.tool {
                    td.add_text(tool, x);
                }
                if let Some(x) = &d.ts {
                    td.add_text(ts, x);
                    if let Some(ns) = abcd::clock::parse_rfc3339(x) {
                        td.add_i64(ts_ns, ns as i64);
                    }
                }
                writer.add_document(td)?;
                n += 1;
            }
        }
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let secs = t.elapsed().as_secs_f64();
    let size = dir_size(&dir);
    println!(
        "tantivy build: {} records, {n} documents, {:.0} MB in {secs:.1}s = {:.1} MB/s; index {:.0} MB ({:.0}% of the text)",
        summaries.len(),
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / secs,
        size as f64 / 1e6,
        100.0 * size as f64 / bytes as f64
    );

    // What a CLI query would pay first: opening the index and a searcher
    // (FTS5's figures include opening the database).
    let mut open = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let i = Index::open_in_dir(&dir)?;
        std::hint::black_box(i.reader()?.searcher());
        open.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "open the index and a searcher: median {:.2} ms, p95 {:.2} ms (not in the query figures below)",
        median(&mut open),
        p95(&mut open)
    );
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut parser = QueryParser::for_index(&index, vec![text]);
    parser.set_conjunction_by_default();
    let parse = |q: &str| -> tantivy::Result<Box<dyn Query>> {
        match q.strip_suffix('*') {
            Some(p) if !p.contains([' ', '"']) => Ok(Box::new(RegexQuery::from_pattern(
                &format!("{}.*", p.to_lowercase()),
                text,
            )?)),
            _ => Ok(parser.parse_query(q)?),
        }
    };
    // The hits as `history search` shows them: stored fields and a snippet.
    let show = |q: &dyn Query, addrs: &[tantivy::DocAddress]| -> tantivy::Result<usize> {
        let gen = SnippetGenerator::create(&searcher, q, text)?;
        let mut shown = 0;
        for a in addrs {
            let d: TantivyDocument = searcher.doc(*a)?;
            let s = gen.snippet_from_doc(&d);
            std::hint::black_box((d.get_first(file).and_then(|v| v.as_str()), s.fragment()));
            shown += 1;
        }
        Ok(shown)
    };
    println!(
        "{:<8} {:<24} {:>5} {:>11} {:>11} {:>11} {:>11}",
        "kind", "query", "hits", "bm25 med", "bm25 p95", "newest med", "newest p95"
    );
    let mut kinds: Vec<(&str, Vec<f64>, Vec<f64>)> = Vec::new();
    for (kind, q) in QUERIES {
        let query = parse(q)?;
        let mut ranked = Vec::new();
        let mut newest = Vec::new();
        let mut hits = 0;
        for i in 0..=runs {
            let t = Instant::now();
            let top = searcher.search(&query, &TopDocs::with_limit(20))?;
            let addrs: Vec<_> = top.iter().map(|(_, a)| *a).collect();
            hits = show(&*query, &addrs)?;
            let a = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let top = searcher.search(
                &query,
                &TopDocs::with_limit(20).order_by_fast_field::<u64>("seq", Order::Desc),
            )?;
            let addrs: Vec<_> = top.iter().map(|(_, a)| *a).collect();
            show(&*query, &addrs)?;
            let b = t.elapsed().as_secs_f64() * 1e3;
            if i > 0 {
                ranked.push(a);
                newest.push(b);
            }
        }
        println!(
            "{kind:<8} {q:<24} {hits:>5} {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>8.2} ms",
            median(&mut ranked),
            p95(&mut ranked),
            median(&mut newest),
            p95(&mut newest)
        );
        match kinds.iter_mut().find(|k| k.0 == kind) {
            Some(k) => {
                k.1.extend(ranked);
                k.2.extend(newest);
            }
            None => kinds.push((kind, ranked, newest)),
        }
    }
    for (kind, mut r, mut w) in kinds {
        println!(
            "{kind:<8} bm25 median {:.2} ms p95 {:.2} ms; newest median {:.2} ms p95 {:.2} ms",
            median(&mut r),
            p95(&mut r),
            median(&mut w),
            p95(&mut w)
        );
    }
    let _ = (agent, agent_type, role, tool, session, ts_ns);
    Ok(())
}
