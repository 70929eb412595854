//! The smallest program using what `history search` would use of tantivy:
//! an index on disk, a phrase query, a snippet.
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{Schema, Value, STORED, STRING, TEXT};
use tantivy::snippet::SnippetGenerator;
use tantivy::{doc, Index, IndexWriter, TantivyDocument};

fn main() -> tantivy::Result<()> {
    let mut sb = Schema::builder();
    let text = sb.add_text_field("text", TEXT | STORED);
    let file = sb.add_text_field("file", STRING | STORED);
    let dir = std::env::temp_dir().join(format!("engine-min-tantivy-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let index = Index::create_in_dir(&dir, sb.build())?;
    let mut w: IndexWriter = index.writer_with_num_threads(1, 15 << 20)?;
    w.add_document(doc!(text => "cargo test passed", file => "a.md"))?;
    w.add_document(doc!(text => "nothing here", file => "b.md"))?;
    w.commit()?;
    let searcher = index.reader()?.searcher();
    let q = QueryParser::for_index(&index, vec![text]).parse_query("\"cargo test\"")?;
    let gen = SnippetGenerator::create(&searcher, &*q, text)?;
    for (_, a) in searcher.search(&q, &TopDocs::with_limit(20))? {
        let d: TantivyDocument = searcher.doc(a)?;
        let f = d.get_first(file).and_then(|v| v.as_str()).unwrap_or("");
        println!("{f} {}", gen.snippet_from_doc(&d).to_html());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
