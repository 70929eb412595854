//! The smallest program using what `history search` uses of SQLite FTS5:
//! an index, a phrase query in rowid order, a snippet.
fn main() -> rusqlite::Result<()> {
    let db = rusqlite::Connection::open_in_memory()?;
    db.execute_batch(
        "CREATE VIRTUAL TABLE docs USING fts5(text, file UNINDEXED);
         INSERT INTO docs VALUES ('cargo test passed', 'a.md'), ('nothing here', 'b.md');",
    )?;
    let mut st = db.prepare(
        "SELECT file, snippet(docs, 0, '[', ']', '…', 16) FROM docs
         WHERE docs MATCH ?1 ORDER BY rowid DESC LIMIT 20",
    )?;
    for r in st.query_map(["\"cargo test\""], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })? {
        println!("{:?}", r?);
    }
    Ok(())
}
