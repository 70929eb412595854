//! Export: a session as Markdown, JSON or one self-contained HTML page, and
//! a whole repository as a static site (an index page linking each
//! session's page).
//!
//! Owns: the HTML page (inline style only; a Content-Security-Policy of
//! `default-src 'none'` so the page can load nothing and run nothing even
//! if an escaping bug let markup through), the escaping of every string
//! (transcripts are untrusted input: `<`, `>`, `&`, quotes, and bidi and
//! other control characters are shown as visible marks, never obeyed),
//! styled redaction placeholders, the JSON shape.
//!
//! Must never: emit a byte of transcript text unescaped, reference a
//! network or file resource, or write into the store.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::corpus::Corpus;
use crate::history::{self, HistoryError};
use crate::reconstruct::{self, Mode, Options, ReconstructError, Session, Thread, Turn};
use crate::telemetry::Tokens;
use crate::transcript::Block;

#[derive(Debug, Error)]
pub enum ExportError {
    #[error("export: --out {path}: {why}")]
    BadOut { path: String, why: String },
    #[error("export: nothing is stored for this repository yet; `abcd history list` shows what is stored")]
    Empty,
    #[error(transparent)]
    Reconstruct(#[from] ReconstructError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Md,
    Html,
    Json,
}

/// Escapes text for HTML element content and quoted attribute values.
/// Bidi overrides and isolates, zero-width marks and other control
/// characters (except newline and tab) become a visible `⟦U+XXXX⟧` mark.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_hidden_control(c) => {
                let _ = write!(out, "<span class=\"ctl\">⟦U+{:04X}⟧</span>", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn is_hidden_control(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{061C}')
}

/// Escapes `s` and wraps each `[REDACTED:kind]` placeholder in a styled mark.
pub fn escape_text(s: &str) -> String {
    let e = escape(s);
    let mut out = String::with_capacity(e.len());
    let mut rest = e.as_str();
    while let Some(i) = rest.find("[REDACTED:") {
        let Some(j) = rest[i..].find(']') else { break };
        out.push_str(&rest[..i]);
        let _ = write!(
            out,
            "<mark class=\"redacted\" title=\"removed by abcd redaction\">{}</mark>",
            &rest[i..i + j + 1]
        );
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    out
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header,main,nav,section.summary{max-width:1000px;margin:0 auto;padding:8px 20px}
h1{font-size:20px;margin:16px 0 4px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d5d9e0;padding:2px 8px;text-align:left;font-size:13px}
.turn{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:8px 0;padding:6px 10px}
.turn.user{border-left:4px solid #3a7bd5}.turn.assistant{border-left:4px solid #2a9d63}
.meta{font-size:12px;color:#5b6474;margin-bottom:4px}
.text{white-space:pre-wrap;word-break:break-word}
pre{white-space:pre-wrap;word-break:break-word;background:#f2f4f7;padding:6px;border-radius:4px;margin:4px 0;font-size:12px}
details{margin:4px 0}summary{cursor:pointer;color:#39414f}
details.tool>summary{color:#7a4b00}details.result>summary{color:#5a3d8a}details.thinking>summary{color:#666;font-style:italic}
details.agent{border:2px solid #b58b00;border-radius:6px;background:#fffbea;padding:4px 10px;margin:10px 0 10px 16px}
details.agent>summary{font-weight:600;color:#6b5200}
mark.redacted{background:#222;color:#ffd75e;border-radius:3px;padding:0 3px;font-family:monospace}
.ctl{background:#ffd1d1;color:#900;font-family:monospace;font-size:11px}
nav ul{margin:2px 0 2px 18px;padding:0}
.muted{color:#777}
"#;

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style></head>\n<body>\n",
        escape(title)
    );
}

fn tokens_row(out: &mut String, name: &str, t: &Tokens) {
    let _ = writeln!(
        out,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(name),
        t.input,
        t.output,
        t.cache_creation_input,
        t.cache_read_input,
        t.total
    );
}

fn agent_summary(t: &Thread) -> String {
    let m = &t.record.meta;
    format!(
        "sub-agent {} · {} · depth {} · parent {}",
        t.key(),
        m.lineage.agent_type.as_deref().unwrap_or("type unknown"),
        if m.lineage.spawn_depth == 0 {
            "unknown".to_owned()
        } else {
            m.lineage.spawn_depth.to_string()
        },
        m.lineage.parent_agent_id.as_deref().unwrap_or("main")
    )
}

fn tree(out: &mut String, s: &Session, host: Option<&str>) {
    let kids = s.children_of(host);
    if kids.is_empty() {
        return;
    }
    out.push_str("<ul>");
    for k in kids {
        let _ = write!(
            out,
            "<li data-agent=\"{}\">{}",
            escape(k.key()),
            escape(&agent_summary(k))
        );
        tree(out, s, k.agent_id());
        out.push_str("</li>");
    }
    out.push_str("</ul>");
}

fn block_html(out: &mut String, b: &Block, opts: Options, el: &mut reconstruct::Elided) {
    match b {
        Block::Text(t) => {
            let _ = writeln!(out, "<div class=\"text\">{}</div>", escape_text(t));
        }
        Block::Thinking(t) if t.is_empty() => {
            out.push_str("<div class=\"muted\">(thinking; text not stored)</div>\n");
        }
        Block::Thinking(t) => {
            let _ = writeln!(
                out,
                "<details class=\"thinking\"><summary>thinking ({} bytes)</summary><pre>{}</pre></details>",
                t.len(),
                escape_text(&reconstruct::cap(t, opts.max_block_bytes, el))
            );
        }
        Block::ToolUse { id, name, input } => {
            let _ = writeln!(
                out,
                "<details class=\"tool\" data-tool-use=\"{}\"><summary>tool call <b>{}</b> ({} bytes)</summary><pre>{}</pre></details>",
                escape(id),
                escape(name),
                input.len(),
                escape_text(&reconstruct::cap(input, opts.max_block_bytes, el))
            );
        }
        Block::ToolResult {
            tool_use_id,
            text,
            is_error,
        } => {
            let _ = writeln!(
                out,
                "<details class=\"result\" data-tool-result=\"{}\"><summary>tool result{} ({} bytes)</summary><pre>{}</pre></details>",
                escape(tool_use_id),
                if *is_error { " — error" } else { "" },
                text.len(),
                escape_text(&reconstruct::cap(text, opts.max_block_bytes, el))
            );
        }
        Block::Other(k) => {
            let _ = writeln!(out, "<div class=\"muted\">({} block)</div>", escape(k));
        }
    }
}

fn turn_html(out: &mut String, t: &Turn, opts: Options, el: &mut reconstruct::Elided) {
    let _ = writeln!(
        out,
        "<section class=\"turn {}\"><div class=\"meta\">#{} · {} · {} · {}</div>",
        if t.role == "user" {
            "user"
        } else {
            "assistant"
        },
        t.n,
        escape(&t.role),
        escape(t.model.as_deref().unwrap_or("")),
        escape(t.timestamp.as_deref().unwrap_or(""))
    );
    for b in &t.blocks {
        block_html(out, b, opts, el);
    }
    out.push_str("</section>\n");
}

fn thread_html(
    out: &mut String,
    s: &Session,
    th: &Thread,
    opts: Options,
    el: &mut reconstruct::Elided,
) {
    let kids = s.children_of(th.agent_id());
    for turn in &th.turns {
        turn_html(out, turn, opts, el);
        for k in kids.iter().filter(|k| {
            k.placement
                .as_ref()
                .is_some_and(|p| p.spawned_at_turn == turn.n)
        }) {
            agent_html(out, s, k, opts, el);
        }
    }
}

fn agent_html(
    out: &mut String,
    s: &Session,
    k: &Thread,
    opts: Options,
    el: &mut reconstruct::Elided,
) {
    let p = k.placement.as_ref();
    let _ = writeln!(
        out,
        "<details class=\"agent\" id=\"agent-{}\" data-agent=\"{}\" data-parent=\"{}\"><summary>{} — {} turn(s), {} tokens{}</summary>",
        escape(k.key()),
        escape(k.key()),
        escape(p.and_then(|p| p.host.as_deref()).unwrap_or("main")),
        escape(&agent_summary(k)),
        k.turns.len(),
        s.tokens.by_thread.get(k.key()).map(|x| x.tokens.total).unwrap_or(0),
        match p {
            Some(p) => format!(
                ", placed by {}{}",
                p.placed_by,
                p.joined_at_turn
                    .map(|j| format!(", joined at turn {j}"))
                    .unwrap_or_default()
            ),
            None => String::new(),
        }
    );
    thread_html(out, s, k, opts, el);
    out.push_str("</details>\n");
}

/// One self-contained HTML page for a session.
pub fn html(s: &Session, opts: Options) -> String {
    let mut el = reconstruct::Elided::default();
    let mut out = String::new();
    let title = s
        .main()
        .and_then(Thread::title)
        .unwrap_or_else(|| format!("Session {}", s.session_id));
    head(&mut out, &format!("{title} — abcd"));
    let _ = writeln!(
        out,
        "<header><h1>{}</h1><div class=\"meta\">session <code>{}</code> · {} → {} · {} sub-agent(s) · {} tokens (once per API message id; naive sum {})</div></header>",
        escape(&title),
        escape(&s.session_id),
        escape(&s.started_at().unwrap_or_default()),
        escape(&s.ended_at().unwrap_or_default()),
        s.threads.iter().filter(|t| !t.is_main()).count(),
        s.tokens.tokens.total,
        s.tokens.naive_tokens.total
    );
    out.push_str("<section class=\"summary\"><table><tr><th>tokens</th><th>input</th><th>output</th><th>cache write</th><th>cache read</th><th>total</th></tr>\n");
    tokens_row(&mut out, "all", &s.tokens.tokens);
    for (m, t) in &s.tokens.by_model {
        tokens_row(&mut out, &format!("model {m}"), t);
    }
    for (a, t) in &s.tokens.by_agent_type {
        tokens_row(&mut out, &format!("agent type {a}"), t);
    }
    out.push_str("</table>\n<p class=\"muted\">Cost is not estimated yet (no pricing table shipped).</p></section>\n");
    out.push_str("<nav class=\"tree\"><b>Agents</b>");
    out.push_str("<ul><li data-agent=\"main\">main thread");
    if s.main().is_none() {
        out.push_str(" <span class=\"muted\">(not stored)</span>");
    }
    tree(&mut out, s, None);
    out.push_str("</li></ul></nav>\n<main id=\"thread-main\">\n");
    if let Some(m) = s.main() {
        thread_html(&mut out, s, m, opts, &mut el);
    }
    // Agents whose host thread is absent or who could not be placed.
    let unplaced: Vec<&Thread> = s
        .threads
        .iter()
        .filter(|t| !t.is_main() && t.placement.is_none())
        .collect();
    if !unplaced.is_empty() {
        out.push_str("<h2>Unattributed sub-agents</h2>\n");
        for t in unplaced {
            let _ = writeln!(
                out,
                "<p class=\"muted\">{}: {}</p>",
                escape(t.key()),
                escape(t.unplaced_reason.as_deref().unwrap_or(""))
            );
            agent_html(&mut out, s, t, opts, &mut el);
        }
    }
    out.push_str("</main>\n</body></html>\n");
    out
}

#[derive(Serialize)]
struct JsonBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
}

#[derive(Serialize)]
struct JsonTurn<'a> {
    n: usize,
    role: &'a str,
    model: Option<&'a str>,
    timestamp: Option<&'a str>,
    blocks: Vec<JsonBlock<'a>>,
}

#[derive(Serialize)]
struct JsonThread<'a> {
    agent_id: Option<&'a str>,
    agent_type: Option<&'a str>,
    parent_agent_id: Option<&'a str>,
    spawn_depth: u32,
    record: &'a str,
    /// The later parts of a transcript stored in parts, in order.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    parts: &'a [String],
    placement: Option<&'a reconstruct::Placement>,
    turns: Vec<JsonTurn<'a>>,
}

#[derive(Serialize)]
struct JsonSession<'a> {
    schema_version: u32,
    session_id: &'a str,
    root_commit: &'a str,
    tokens: &'a crate::telemetry::Report,
    threads: Vec<JsonThread<'a>>,
    /// Record names of the session's spilled tool outputs (not threads).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    tool_outputs: &'a [String],
}

/// The session as JSON (full text, every thread, placements, tokens).
pub fn json(s: &Session) -> String {
    let threads = s
        .threads
        .iter()
        .map(|t| JsonThread {
            agent_id: t.agent_id(),
            agent_type: t.record.meta.lineage.agent_type.as_deref(),
            parent_agent_id: t.record.meta.lineage.parent_agent_id.as_deref(),
            spawn_depth: t.record.meta.lineage.spawn_depth,
            record: &t.record.file,
            parts: &t.parts,
            placement: t.placement.as_ref(),
            turns: t
                .turns
                .iter()
                .map(|x| JsonTurn {
                    n: x.n,
                    role: &x.role,
                    model: x.model.as_deref(),
                    timestamp: x.timestamp.as_deref(),
                    blocks: x
                        .blocks
                        .iter()
                        .map(|b| match b {
                            Block::Text(t) => JsonBlock {
                                kind: "text",
                                text: Some(t),
                                id: None,
                                name: None,
                                is_error: None,
                            },
                            Block::Thinking(t) => JsonBlock {
                                kind: "thinking",
                                text: Some(t),
                                id: None,
                                name: None,
                                is_error: None,
                            },
                            Block::ToolUse { id, name, input } => JsonBlock {
                                kind: "tool_use",
                                text: Some(input),
                                id: Some(id),
                                name: Some(name),
                                is_error: None,
                            },
                            Block::ToolResult {
                                tool_use_id,
                                text,
                                is_error,
                            } => JsonBlock {
                                kind: "tool_result",
                                text: Some(text),
                                id: Some(tool_use_id),
                                name: None,
                                is_error: Some(*is_error),
                            },
                            Block::Other(k) => JsonBlock {
                                kind: "other",
                                text: Some(k),
                                id: None,
                                name: None,
                                is_error: None,
                            },
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let j = JsonSession {
        schema_version: reconstruct::SCHEMA,
        session_id: &s.session_id,
        root_commit: &s.root_commit,
        tokens: &s.tokens,
        threads,
        tool_outputs: &s.tool_outputs,
    };
    let mut out = serde_json::to_string_pretty(&j).unwrap_or_default();
    out.push('\n');
    out
}

/// Renders one session in `format` (every block whole: export is for reading).
pub fn render(s: &Session, format: Format) -> String {
    let opts = Options {
        mode: Mode::Full,
        max_block_bytes: usize::MAX,
    };
    match format {
        Format::Md => reconstruct::render_markdown(s, opts).0,
        Format::Html => html(s, opts),
        Format::Json => json(s),
    }
}

/// Exports one session; `out` = None prints (returned), else writes the file.
pub fn export_session(
    corpus: &Corpus,
    session: &str,
    format: Format,
    out: Option<&Path>,
) -> Result<Option<String>, ExportError> {
    let s = reconstruct::load(corpus, session)?;
    let text = render(&s, format);
    match out {
        None => Ok(Some(text)),
        Some(p) => {
            reconstruct::write_public(p, text.as_bytes())?;
            Ok(None)
        }
    }
}

/// One line of the site's index.
#[derive(Debug, Clone, Serialize)]
pub struct SiteEntry {
    pub session_id: String,
    pub page: String,
    pub title: String,
    pub started_at: Option<String>,
    pub sub_agents: usize,
    pub tokens: u64,
}

/// Writes every session of the repository as `<session>.html` into `dir`
/// (created when missing) and an `index.html` linking each, newest first.
pub fn export_site(corpus: &Corpus, dir: &Path) -> Result<Vec<SiteEntry>, ExportError> {
    std::fs::create_dir_all(dir).map_err(|e| ExportError::BadOut {
        path: dir.display().to_string(),
        why: e.to_string(),
    })?;
    let listed = history::list(corpus)?;
    if listed.is_empty() {
        return Err(ExportError::Empty);
    }
    let sessions: BTreeSet<String> = listed
        .iter()
        .map(|l| l.meta.lineage.session_id.clone())
        .collect();
    let mut entries = Vec::new();
    for sid in sessions {
        let s = reconstruct::load(corpus, &sid)?;
        let page = format!("{sid}.html");
        reconstruct::write_public(&dir.join(&page), render(&s, Format::Html).as_bytes())?;
        entries.push(SiteEntry {
            title: s
                .main()
                .and_then(Thread::title)
                .unwrap_or_else(|| "(main thread not stored)".into()),
            started_at: s.started_at(),
            sub_agents: s.threads.iter().filter(|t| !t.is_main()).count(),
            tokens: s.tokens.tokens.total,
            session_id: sid,
            page,
        });
    }
    entries.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    let mut out = String::new();
    head(&mut out, "Sessions — abcd");
    let _ = writeln!(
        out,
        "<header><h1>Sessions</h1><div class=\"meta\">{} session(s), root commit <code>{}</code></div></header><main><table><tr><th>started</th><th>title</th><th>sub-agents</th><th>tokens</th></tr>",
        entries.len(),
        escape(&corpus.lane.root_sha)
    );
    for e in &entries {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            escape(e.started_at.as_deref().unwrap_or("")),
            escape(&e.page),
            escape(&reconstruct::label(&e.title)),
            e.sub_agents,
            e.tokens
        );
    }
    out.push_str("</table></main></body></html>\n");
    reconstruct::write_public(&dir.join("index.html"), out.as_bytes())?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_defuses_markup_and_shows_controls() {
        let e = escape_text("<script>alert(1)</script></textarea><a href=\"javascript:x\">'\u{202E}gnp.exe [REDACTED:aws-key] & done");
        assert!(!e.contains("<script"));
        assert!(!e.contains("</textarea"));
        assert!(!e.contains("href=\""));
        assert!(e.contains("&lt;script&gt;"));
        assert!(e.contains("⟦U+202E⟧"));
        assert!(!e.contains('\u{202E}'));
        assert!(e.contains("<mark class=\"redacted\" title=\"removed by abcd redaction\">[REDACTED:aws-key]</mark>"));
        assert!(e.contains("&amp; done"));
        assert!(e.contains("&#39;"));
    }
}
