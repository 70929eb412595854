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
/// stops at the refused line; the exit status says so.
pub fn run_redact_command(
    input: Option<&Path>,
    report: bool,
    repo_root: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let scanner = Scanner::new(Identity::discover(repo_root), repo_root);
    if let Some(reason) = scanner.degraded() {
        let _ = writeln!(err, "abcd redact: refusing: degraded scanner: {reason}");
        return EXIT_REFUSED;
    }
    let stdin;
    let reader: Box<dyn std::io::BufRead> = match input {
        None => {
            stdin = std::io::stdin();
            Box::new(stdin.lock())
        }
        Some(p) if p == Path::new("-") => {
            stdin = std::io::stdin();
            Box::new(stdin.lock())
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
