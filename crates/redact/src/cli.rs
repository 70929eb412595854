//! The body of `abcd redact [FILE|-] [--report]`, so the root crate's clap
//! wiring stays a one-liner.
//!
//! Owns: choosing input, streaming it through the scanner, and the exit
//! status. Must never: print a secret (reports carry positions and kinds
//! only; errors name kinds, never bytes).
//!
//! Exit status: [`EXIT_CLEAN`] 0 nothing found; [`EXIT_FOUND`] 1 findings
//! redacted (or reported); [`EXIT_REFUSED`] 2 refused (residue, broken JSON,
//! over-long line) or the scanner is degraded; [`EXIT_USAGE`] 3 usage or
//! I/O error. In pre-commit use, non-zero means "look before committing".

use std::io::{BufReader, Write};
use std::path::Path;

use crate::{Identity, RedactError, Scanner};

pub const EXIT_CLEAN: i32 = 0;
pub const EXIT_FOUND: i32 = 1;
pub const EXIT_REFUSED: i32 = 2;
pub const EXIT_USAGE: i32 = 3;

/// Runs the verb. `input` of `None` or `-` reads stdin. Redacted text goes to
/// `out`; with `report`, a JSON findings report goes to `out` instead.
/// On refusal the redacted text already written (every line of it verified)
/// The repository's scanner, or `None` (said on `err`) when it is degraded:
/// both verbs refuse rather than redact with part of the rules.
fn usable_scanner(repo_root: Option<&Path>, err: &mut dyn Write) -> Option<Scanner> {
    let scanner = Scanner::new(Identity::discover(repo_root), repo_root);
    if let Some(reason) = scanner.degraded() {
        let _ = writeln!(err, "abcd redact: refusing: degraded scanner: {reason}");
        return None;
    }
    Some(scanner)
}

/// stops at the refused line; the exit status says so.
pub fn run_redact_command(
    input: Option<&Path>,
    report: bool,
    repo_root: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let Some(scanner) = usable_scanner(repo_root, err) else {
        return EXIT_REFUSED;
    };
    let stdin;
    // Lines are redacted where they lie in the reader's buffer (see
    // `redact_stream`): a large one keeps most lines whole in it.
    let reader: Box<dyn std::io::BufRead> = match input {
        None => {
            stdin = std::io::stdin();
            Box::new(BufReader::with_capacity(1 << 20, stdin.lock()))
        }
        Some(p) if p == Path::new("-") => {
            stdin = std::io::stdin();
            Box::new(BufReader::with_capacity(1 << 20, stdin.lock()))
        }
        Some(p) => match std::fs::File::open(p) {
            Ok(f) => Box::new(BufReader::with_capacity(1 << 20, f)),
            Err(e) => {
                let _ = writeln!(err, "abcd redact: cannot open {}: {e}", p.display());
                return EXIT_USAGE;
            }
        },
    };
    let result = if report {
        scanner.redact_stream(reader, std::io::sink())
    } else {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut *out);
        let r = scanner.redact_stream(reader, &mut w);
        let _ = w.flush();
        r
    };
    match result {
        Ok(rep) => {
            if report {
                match serde_json::to_writer_pretty(&mut *out, &rep) {
                    Ok(()) => {
                        let _ = writeln!(out);
                    }
                    Err(e) => {
                        let _ = writeln!(err, "abcd redact: writing report: {e}");
                        return EXIT_USAGE;
                    }
                }
            }
            if rep.finding_count > 0 {
                let _ = writeln!(
                    err,
                    "abcd redact: {} finding(s) redacted",
                    rep.finding_count
                );
                EXIT_FOUND
            } else {
                EXIT_CLEAN
            }
        }
        Err(e @ RedactError::Io { .. }) => {
            let _ = writeln!(err, "abcd redact: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            let _ = writeln!(err, "abcd redact: {e}");
            EXIT_REFUSED
        }
    }
}

/// `abcd redact --explain`: one line per finding — rule id, kind, line,
/// byte range and the shape of its context — so a user can report a false
/// positive or a miss precisely. Never prints a secret: the context is
/// shown as a shape (letters `a`/`A`, digits `9`, other ASCII
/// punctuation kept, non-ASCII `·`) and the finding itself only as its
/// length. Reads the whole input (a diagnostic, not a filter).
pub fn run_redact_explain(
    input: Option<&Path>,
    repo_root: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let Some(scanner) = usable_scanner(repo_root, err) else {
        return EXIT_REFUSED;
    };
    let mut bytes = Vec::new();
    let read = match input.filter(|p| *p != Path::new("-")) {
        None => std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes),
        Some(p) => {
            std::fs::File::open(p).and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut bytes))
        }
    };
    if let Err(e) = read {
        let _ = writeln!(err, "abcd redact: reading input: {e}");
        return EXIT_USAGE;
    }
    let rep = match scanner.redact_stream(&bytes[..], std::io::sink()) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(err, "abcd redact: {e}");
            return EXIT_REFUSED;
        }
    };
    let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    // Every finding's bytes become `*` first, so no context shows another
    // finding's shape.
    for f in &rep.findings {
        if let Some(line) = lines.get_mut(f.line.wrapping_sub(1)) {
            let s = f.column.saturating_sub(1).min(line.len());
            let e = (s + f.length).min(line.len());
            line[s..e].fill(b'*');
        }
    }
    for f in &rep.findings {
        let line: &[u8] = lines.get(f.line.wrapping_sub(1)).map_or(&[], |l| &l[..]);
        let s = (f.column.saturating_sub(1)).min(line.len());
        let e = (s + f.length).min(line.len());
        let before = &line[s.saturating_sub(24)..s];
        let after = &line[e..(e + 12).min(line.len())];
        let _ = writeln!(
            out,
            "line {} bytes {}..{} rule {} kind {} context {}«{} bytes»{}",
            f.line,
            s,
            e,
            f.rule,
            f.kind,
            shape(before),
            f.length,
            shape(after)
        );
    }
    let _ = writeln!(err, "abcd redact: {} finding(s)", rep.finding_count);
    if rep.finding_count > 0 {
        EXIT_FOUND
    } else {
        EXIT_CLEAN
    }
}

/// The shape of context bytes: no letter or digit survives.
pub fn shape(v: &[u8]) -> String {
    v.iter()
        .map(|&b| match b {
            b'a'..=b'z' => 'a',
            b'A'..=b'Z' => 'A',
            b'0'..=b'9' => '9',
            b'\t' => ' ',
            0x20..=0x7e => b as char,
            0x80..=0xff if b >= 0xc0 => '·',
            _ => '\u{0}',
        })
        .filter(|&c| c != '\u{0}')
        .collect()
}
