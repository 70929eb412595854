//! Rendering helpers shared by every verb that prints: text safe for a
//! terminal, and whether to draw progress. No domain logic, no I/O beyond
//! asking whether stderr is a terminal.

use std::io::{self, IsTerminal};

/// Replaces control characters (other than newline and tab) so repository-
/// or transcript-derived text cannot drive the terminal.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// True when progress should be drawn (stderr is a terminal).
pub fn progress_enabled() -> bool {
    io::stderr().is_terminal()
}
