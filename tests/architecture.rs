//! ARCHITECTURE.md's call table ("What may call what") is the law: this test
//! reads it, reads every `crate::…`, `super::…` and `abcd_*` reference in
//! `src/` (test modules excluded), and fails on any edge the table does not
//! allow, on any module the table does not list, and on any cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const EXTERNAL: [&str; 3] = ["abcd_journal", "abcd_redact", "abcd_fsio"];

/// module → modules it may use, from the table between the call-table
/// markers in ARCHITECTURE.md.
fn table() -> BTreeMap<String, BTreeSet<String>> {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md");
    let start = doc
        .find("<!-- call-table -->")
        .expect("ARCHITECTURE.md has a <!-- call-table --> block");
    let end = doc[start..]
        .find("<!-- /call-table -->")
        .expect("the call table is closed")
        + start;
    let mut out = BTreeMap::new();
    for line in doc[start..end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || cells[1].starts_with("module") || cells[1].starts_with("---") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_owned();
        let uses = cells[2]
            .split([',', ' '])
            .map(|s| s.trim().trim_matches('`'))
            .filter(|s| !s.is_empty() && *s != "—")
            .map(str::to_owned)
            .collect();
        out.insert(name, uses);
    }
    assert!(out.len() > 10, "the call table parsed to {out:?}");
    out
}

fn module_of(rel: &str) -> String {
    rel.trim_end_matches(".rs")
        .trim_end_matches("/mod")
        .replace('/', "::")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Modules named by a `crate::` path starting at `rest` (after `crate::`).
fn targets(rest: &str, out: &mut BTreeSet<String>) {
    if let Some(group) = rest.strip_prefix('{') {
        // crate::{a, b::c, d::{e, f}}
        let mut depth = 0;
        let mut item = String::new();
        for ch in group.chars() {
            match ch {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    targets(item.trim(), out);
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(ch);
        }
        targets(item.trim(), out);
        return;
    }
    let first = ident_at(rest);
    if first == "hook" {
        if let Some(sub) = rest.strip_prefix("hook::") {
            let sub = ident_at(sub);
            if !sub.is_empty() {
                out.insert(format!("hook::{sub}"));
                return;
            }
        }
    }
    if !first.is_empty() {
        out.insert(first.to_owned());
    }
}

fn uses_of(module: &str, source: &str) -> BTreeSet<String> {
    let code = match source.find("#[cfg(test)]") {
        Some(i) => &source[..i],
        None => source,
    };
    let code: String = code
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        targets(&code[i + "crate::".len()..], &mut out);
    }
    if let Some(parent) = module.rsplit_once("::").map(|(p, _)| p) {
        for (i, _) in code.match_indices("super::") {
            let name = ident_at(&code[i + "super::".len()..]);
            if !name.is_empty() {
                out.insert(format!("{parent}::{name}"));
            }
        }
    }
    for ext in EXTERNAL {
        if code.contains(ext) {
            out.insert(ext.to_owned());
        }
    }
    out.remove(module);
    out
}

fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if rel != "lib.rs" && rel != "main.rs" {
                out.insert(module_of(&rel), fs::read_to_string(&p).unwrap());
            }
        }
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    walk(&src, &src, &mut files);
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(m, s)| {
            let uses = uses_of(m, s)
                .into_iter()
                .filter(|u| names.contains(u) || EXTERNAL.contains(&u.as_str()))
                .collect();
            (m.clone(), uses)
        })
        .collect()
}

#[test]
fn every_module_uses_only_what_the_call_table_allows() {
    let table = table();
    let graph = graph();
    let mut wrong = Vec::new();
    for (m, uses) in &graph {
        let Some(allowed) = table.get(m) else {
            wrong.push(format!(
                "module `{m}` is missing from ARCHITECTURE.md's call table"
            ));
            continue;
        };
        for u in uses {
            if !allowed.contains(u) {
                wrong.push(format!(
                    "`{m}` uses `{u}`, which the call table does not allow"
                ));
            }
        }
    }
    for m in table.keys() {
        if !graph.contains_key(m) {
            wrong.push(format!(
                "the call table lists `{m}`, which is not a module in src/"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = graph();
    // Depth-first search with colours: grey on the stack, black done.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => {
                let i = stack.iter().position(|s| s == m).unwrap();
                let mut cycle = stack[i..].to_vec();
                cycle.push(m.to_owned());
                return Some(cycle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(m.to_owned(), 1);
        stack.push(m.to_owned());
        for n in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, g, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if let Some(c) = visit(m, &graph, &mut state, &mut Vec::new()) {
            panic!("module cycle: {}", c.join(" → "));
        }
    }
}

/// The checker itself: a grouped import, a nested path and a comment.
#[test]
fn the_reader_sees_grouped_imports_and_skips_comments() {
    let src = "use crate::{corpus::Corpus, stage::{self, X}, clock};\n// crate::cli\nfn f() { crate::hook::run::x(); super::payload::y(); abcd_journal::Z }\n#[cfg(test)]\nmod tests { use crate::history; }";
    let got = uses_of("hook::run", src);
    let want: BTreeSet<String> = ["corpus", "stage", "clock", "hook::payload", "abcd_journal"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(got, want);
}
