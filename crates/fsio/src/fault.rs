//! Fault injection: every store file operation passes through [`check`]
//! first, so a test can make any one of them fail with a chosen errno.
//!
//! Off — one relaxed load of a process-wide `OnceLock` per operation — unless
//! one of two environment variables is set when the process starts:
//!
//! - `ABCD_FAULT_INJECT=<spec>` where `<spec>` is `[<op>]#<n>[+]:<errno>`:
//!   the `n`-th operation (1-based; of kind `<op>` when given, else of any
//!   kind) fails with `<errno>` (`ENOSPC`, `EIO`, `EACCES`, `EROFS`,
//!   `EDQUOT`, `EPERM` or a number); with `+`, that one and every later one
//!   of the same kind fail too (a full disk stays full). `KILL` instead of
//!   an errno sends the process SIGKILL just before that operation: a crash
//!   at an exact write site, deterministic. Examples: `#7:EIO`,
//!   `write#2+:ENOSPC`, `rename#1:EACCES`, `sync#1:KILL`.
//! - `ABCD_FAULT_TRACE=<file>`: every operation appends one line
//!   `<n> <op> <path>` to `<file>` (n counts operations of any kind), so a
//!   test first learns how many operations a path performs, then fails each
//!   in turn.
//!
//! The shim only ever turns an operation into an error before it starts; it
//! never changes what a successful operation does. It is compiled into every
//! build (tests drive the real binary), and an unset variable costs nothing
//! measurable. The model is SQLite's and TigerBeetle's fault testing: the
//! caller's error paths are what is under test.

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Environment variable that arms one fault (see the module doc).
pub const INJECT_ENV: &str = "ABCD_FAULT_INJECT";
/// Environment variable naming a file that receives one line per operation.
pub const TRACE_ENV: &str = "ABCD_FAULT_TRACE";

/// The kinds of store file operation the shim can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Opening or creating a file or directory descriptor.
    Open,
    /// Writing bytes (write, pwrite).
    Write,
    /// fsync, fdatasync, syncfs.
    Sync,
    /// rename.
    Rename,
    /// unlink of a file, rmdir of a directory.
    Unlink,
    /// flock.
    Lock,
    /// mkdir.
    Mkdir,
    /// ftruncate.
    Truncate,
}

const OPS: [Op; 8] = [
    Op::Open,
    Op::Write,
    Op::Sync,
    Op::Rename,
    Op::Unlink,
    Op::Lock,
    Op::Mkdir,
    Op::Truncate,
];

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Write => "write",
            Op::Sync => "sync",
            Op::Rename => "rename",
            Op::Unlink => "unlink",
            Op::Lock => "lock",
            Op::Mkdir => "mkdir",
            Op::Truncate => "truncate",
        }
    }

    pub fn parse(s: &str) -> Option<Op> {
        OPS.into_iter().find(|o| o.as_str() == s)
    }

    fn slot(self) -> usize {
        OPS.iter().position(|o| *o == self).unwrap_or(0)
    }
}

/// One armed fault, parsed from `ABCD_FAULT_INJECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Only operations of this kind count; `None`: every operation counts.
    pub op: Option<Op>,
    /// 1-based index of the operation that fails.
    pub nth: u64,
    /// The `nth` and every later counted operation fail.
    pub sticky: bool,
    /// The errno to fail with, or [`KILL`].
    pub errno: i32,
}

/// `Plan::errno` value meaning "SIGKILL this process instead of failing".
pub const KILL: i32 = -9;

impl Plan {
    /// Parses `[<op>]#<n>[+]:<errno>`.
    pub fn parse(spec: &str) -> Result<Plan, String> {
        let bad = || {
            format!("{INJECT_ENV}={spec:?}: expected [<op>]#<n>[+]:<errno>, e.g. write#2+:ENOSPC")
        };
        let (target, errno) = spec.trim().split_once(':').ok_or_else(bad)?;
        let (op, n) = target.split_once('#').ok_or_else(bad)?;
        let op = if op.is_empty() {
            None
        } else {
            Some(Op::parse(op).ok_or_else(bad)?)
        };
        let (n, sticky) = match n.strip_suffix('+') {
            Some(n) => (n, true),
            None => (n, false),
        };
        let nth: u64 = n.parse().map_err(|_| bad())?;
        if nth == 0 {
            return Err(bad());
        }
        let errno = match errno {
            "ENOSPC" => libc::ENOSPC,
            "EIO" => libc::EIO,
            "EACCES" => libc::EACCES,
            "EROFS" => libc::EROFS,
            "EDQUOT" => libc::EDQUOT,
            "EPERM" => libc::EPERM,
            "KILL" => KILL,
            other => other.parse().map_err(|_| bad())?,
        };
        Ok(Plan {
            op,
            nth,
            sticky,
            errno,
        })
    }
}

struct State {
    plan: Option<Plan>,
    trace: Option<Mutex<std::fs::File>>,
    any: AtomicU64,
    per_op: [AtomicU64; 8],
}

fn state() -> Option<&'static State> {
    static STATE: OnceLock<Option<State>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            let plan = std::env::var(INJECT_ENV)
                .ok()
                .filter(|s| !s.is_empty())
                .map(|s| match Plan::parse(&s) {
                    Ok(p) => p,
                    Err(e) => {
                        // A test harness typo must not silently test nothing.
                        eprintln!("abcd: {e}; every store operation will fail");
                        Plan {
                            op: None,
                            nth: 1,
                            sticky: true,
                            errno: libc::EINVAL,
                        }
                    }
                });
            let trace = std::env::var_os(TRACE_ENV)
                .filter(|s| !s.is_empty())
                .and_then(|p| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .ok()
                })
                .map(Mutex::new);
            if plan.is_none() && trace.is_none() {
                return None;
            }
            Some(State {
                plan,
                trace,
                any: AtomicU64::new(0),
                per_op: Default::default(),
            })
        })
        .as_ref()
}

/// Called before every store file operation: `Err` when the armed fault
/// says this one fails (the caller reports it as it would the real error).
#[inline]
pub fn check(op: Op, path: &Path) -> io::Result<()> {
    match state() {
        None => Ok(()),
        Some(s) => check_slow(s, op, path),
    }
}

#[cold]
fn check_slow(s: &State, op: Op, path: &Path) -> io::Result<()> {
    let n_any = s.any.fetch_add(1, Ordering::SeqCst) + 1;
    let n_op = s.per_op[op.slot()].fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(t) = &s.trace {
        if let Ok(mut f) = t.lock() {
            let _ = writeln!(f, "{n_any} {} {}", op.as_str(), path.display());
        }
    }
    let Some(p) = s.plan else { return Ok(()) };
    let n = match p.op {
        Some(o) if o != op => return Ok(()),
        Some(_) => n_op,
        None => n_any,
    };
    if n == p.nth || (p.sticky && n > p.nth) {
        if p.errno == KILL {
            // SAFETY: raising a signal at ourselves has no preconditions.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
        return Err(io::Error::from_raw_os_error(p.errno));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse() {
        assert_eq!(
            Plan::parse("write#2+:ENOSPC").unwrap(),
            Plan {
                op: Some(Op::Write),
                nth: 2,
                sticky: true,
                errno: libc::ENOSPC
            }
        );
        assert_eq!(
            Plan::parse("#7:EIO").unwrap(),
            Plan {
                op: None,
                nth: 7,
                sticky: false,
                errno: libc::EIO
            }
        );
        assert_eq!(Plan::parse("rename#1:13").unwrap().errno, 13);
        assert_eq!(Plan::parse("sync#1:KILL").unwrap().errno, KILL);
        for bad in [
            "",
            "#0:EIO",
            "write#x:EIO",
            "nope#1:EIO",
            "#1",
            "#1:EWHAT",
            "write:EIO",
        ] {
            assert!(Plan::parse(bad).is_err(), "{bad}");
        }
        for op in OPS {
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
    }
}
