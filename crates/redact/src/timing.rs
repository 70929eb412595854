//! Where a redaction's time goes: wall time per phase of a line's
//! redaction and per rule, for `redact-bench speed --phases`. Built in only
//! with the feature `phase-timing` (off by default); without it a
//! [`Span`] is a zero-sized value whose drop does nothing and
//! [`rule_ran`] is empty, so the release build is the same program.
//!
//! Owns: the counters and their report. Must never: change what the
//! engine does (it only reads the clock around existing calls).
//!
//! Phases nest: `line` holds `home_first`, `stage_one`, `observe`,
//! `apply` and `verify`; `stage_one` and `verify` each hold scans, whose
//! `views`, `allowed`, `shape_gates`, `keywords`, `rules` (or
//! `rules_verify`) and `sweep` are their parts; `compile` (a rule's regex
//! built on its first use) lies inside `rules`. Reading the clock around
//! every span and rule run makes a timed run slower than a plain one
//! (on the varied corpus ~13 % on an AMD EPYC VM, ~27 % on an Intel Xeon
//! one); the shares are what the report is for.

/// A part of a line's redaction (see the module's notes for nesting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Line,
    HomeFirst,
    StageOne,
    Observe,
    Apply,
    Verify,
    Views,
    Allowed,
    ShapeGates,
    Keywords,
    Rules,
    RulesVerify,
    Compile,
    Sweep,
}

impl Phase {
    pub const ALL: [Phase; 14] = [
        Phase::Line,
        Phase::HomeFirst,
        Phase::StageOne,
        Phase::Observe,
        Phase::Apply,
        Phase::Verify,
        Phase::Views,
        Phase::Allowed,
        Phase::ShapeGates,
        Phase::Keywords,
        Phase::Rules,
        Phase::RulesVerify,
        Phase::Compile,
        Phase::Sweep,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Line => "line",
            Phase::HomeFirst => "home_first",
            Phase::StageOne => "stage_one",
            Phase::Observe => "observe",
            Phase::Apply => "apply",
            Phase::Verify => "verify",
            Phase::Views => "views",
            Phase::Allowed => "allowed",
            Phase::ShapeGates => "shape_gates",
            Phase::Keywords => "keywords",
            Phase::Rules => "rules",
            Phase::RulesVerify => "rules_verify",
            Phase::Compile => "compile",
            Phase::Sweep => "sweep",
        }
    }
}

/// What the counters held when [`take`] drained them.
#[derive(Debug, Default)]
pub struct Report {
    /// Per phase: its name, nanoseconds, and how many spans were timed.
    pub phases: Vec<(&'static str, u64, u64)>,
    /// Per rule that ran: its id, stage one or verify, nanoseconds, runs,
    /// and hits (findings before merging). Costliest first.
    pub rules: Vec<RuleTime>,
}

#[derive(Debug)]
pub struct RuleTime {
    pub rule: String,
    pub verify: bool,
    pub nanos: u64,
    pub runs: u64,
    pub hits: u64,
}

/// Whether this build has the counters.
pub const ENABLED: bool = cfg!(feature = "phase-timing");

#[cfg(feature = "phase-timing")]
mod counters {
    use super::Phase;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    pub static PHASES: [(AtomicU64, AtomicU64); Phase::ALL.len()] =
        [const { (AtomicU64::new(0), AtomicU64::new(0)) }; Phase::ALL.len()];
    /// Per (rule index, verify): nanoseconds, runs, hits.
    pub static RULES: Mutex<Vec<[u64; 3]>> = Mutex::new(Vec::new());

    thread_local! {
        /// Inside a `verify` span: rules run there count as verify's.
        pub static IN_VERIFY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    pub fn add_phase(p: Phase, nanos: u64) {
        let (t, n) = &PHASES[p as usize];
        t.fetch_add(nanos, Ordering::Relaxed);
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// Times one phase from its creation to its drop.
#[must_use]
pub struct Span {
    #[cfg(feature = "phase-timing")]
    phase: Phase,
    #[cfg(feature = "phase-timing")]
    start: std::time::Instant,
}

/// Starts timing `phase`.
#[inline(always)]
pub fn span(phase: Phase) -> Span {
    let _ = phase;
    #[cfg(feature = "phase-timing")]
    if phase == Phase::Verify {
        counters::IN_VERIFY.with(|v| v.set(true));
    }
    Span {
        #[cfg(feature = "phase-timing")]
        phase,
        #[cfg(feature = "phase-timing")]
        start: std::time::Instant::now(),
    }
}

#[cfg(feature = "phase-timing")]
impl Drop for Span {
    fn drop(&mut self) {
        counters::add_phase(self.phase, self.start.elapsed().as_nanos() as u64);
        if self.phase == Phase::Verify {
            counters::IN_VERIFY.with(|v| v.set(false));
        }
    }
}

/// Whether the current thread is inside a `verify` span (false without
/// the feature).
#[inline(always)]
pub fn in_verify() -> bool {
    #[cfg(feature = "phase-timing")]
    let v = counters::IN_VERIFY.with(|v| v.get());
    #[cfg(not(feature = "phase-timing"))]
    let v = false;
    v
}

/// The clock for a rule's run, read only when the counters are built in.
#[inline(always)]
pub fn rule_clock() -> Option<std::time::Instant> {
    ENABLED.then(std::time::Instant::now)
}

/// Counts one run of rule `rule` (an index into the engine's rules),
/// started at `clock`, that gave `hits` hits; stage one's or verify's by
/// [`in_verify`].
#[inline(always)]
pub fn rule_ran(rule: usize, clock: Option<std::time::Instant>, hits: usize) {
    let _ = (rule, clock, hits);
    #[cfg(feature = "phase-timing")]
    if let Some(c) = clock {
        let verify = in_verify();
        let nanos = c.elapsed().as_nanos() as u64;
        let mut r = counters::RULES.lock().unwrap_or_else(|e| e.into_inner());
        let i = 2 * rule + usize::from(verify);
        if r.len() <= i {
            r.resize(i + 1, [0; 3]);
        }
        r[i][0] += nanos;
        r[i][1] += 1;
        r[i][2] += hits as u64;
    }
}

/// Drains the counters (all threads') into a report; `rule_id` names a
/// rule by its index.
#[cfg(feature = "phase-timing")]
pub fn take(rule_id: impl Fn(usize) -> String) -> Report {
    use std::sync::atomic::Ordering;
    let phases = Phase::ALL
        .iter()
        .map(|&p| {
            let (t, n) = &counters::PHASES[p as usize];
            (
                p.name(),
                t.swap(0, Ordering::Relaxed),
                n.swap(0, Ordering::Relaxed),
            )
        })
        .collect();
    let drained = std::mem::take(&mut *counters::RULES.lock().unwrap_or_else(|e| e.into_inner()));
    let mut rules: Vec<RuleTime> = drained
        .iter()
        .enumerate()
        .filter(|(_, c)| c[1] > 0)
        .map(|(i, c)| RuleTime {
            rule: rule_id(i / 2),
            verify: i % 2 == 1,
            nanos: c[0],
            runs: c[1],
            hits: c[2],
        })
        .collect();
    rules.sort_by_key(|t| std::cmp::Reverse(t.nanos));
    Report { phases, rules }
}

/// Without the feature: an empty report.
#[cfg(not(feature = "phase-timing"))]
pub fn take(rule_id: impl Fn(usize) -> String) -> Report {
    let _ = rule_id;
    Report::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the feature a span costs nothing to hold and the report
    /// is empty; with it, a redaction fills every phase a transcript line
    /// passes through and names the rules that found something.
    #[test]
    fn spans_cost_nothing_unless_built_in() {
        if !ENABLED {
            assert_eq!(std::mem::size_of::<Span>(), 0);
            assert!(rule_clock().is_none());
            assert!(take(|i| i.to_string()).phases.is_empty());
            return;
        }
        let id = crate::Identity {
            home: Some("/home/zed".into()),
            user: Some("zed".into()),
            ..Default::default()
        };
        let s = crate::Scanner::new(id, None);
        let _ = s.timing_report();
        let line =
            r#"{"cwd":"/home/zed/app","message":{"content":"export password=Zq8vR2mK7pL4xN9w"}}"#;
        let text = format!("{line}\n").repeat(3);
        s.redact_stream(text.as_bytes(), &mut Vec::new())
            .expect("redacts");
        let r = s.timing_report();
        let count = |name: &str| r.phases.iter().find(|p| p.0 == name).map_or(0, |p| p.2);
        for name in [
            "line",
            "stage_one",
            "keywords",
            "rules",
            "sweep",
            "verify",
            "apply",
        ] {
            assert!(count(name) > 0, "no {name} span: {:?}", r.phases);
        }
        assert!(
            r.rules
                .iter()
                .any(|t| t.rule == "prose-password" && !t.verify && t.hits > 0),
            "no stage-one hit of the rule that finds the password: {:?}",
            r.rules
        );
    }
}
