//! The keyword automaton and its search: every (overlapping) occurrence of
//! every rule keyword and identity string, ASCII case-insensitively.
//!
//! Owns: walking the Aho-Corasick DFA over a line fast. Must never: miss an
//! occurrence, or report them in a different order from the library's own
//! overlapping iterator (rule order, and so which rule names a merged span,
//! follows from it).
//!
//! Why not the library's iterator: a DFA walk is one dependent load chain
//! per byte (byte class, then transition), so it runs at memory latency, not
//! throughput. Walking [`LANES`] independent stretches of the line in
//! lockstep keeps that many chains in flight. Each lane starts
//! `max_pattern_len - 1` bytes before the stretch it reports on, so a match
//! ending in its stretch is seen whole; it reports only matches ending in
//! its own stretch, so none is reported twice.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind};

/// Interleaved walks. Four hides most of the load latency on current x86
/// cores without spilling the lane state out of registers.
pub const LANES: usize = 4;
// The lockstep loop below is written out for exactly four lanes.
const _: () = assert!(LANES == 4);

/// Lines shorter than this are walked in one lane: the warm-up overlap of
/// the extra lanes would cost more than the latency they hide.
pub const MIN_LANED_LEN: usize = 256;

/// One occurrence: half-open byte span and the keyword's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KwMatch {
    pub start: usize,
    pub end: usize,
    pub pattern: usize,
}

pub struct Keywords {
    dfa: DFA,
    start: StateID,
    /// Longest keyword; a lane warms up over `max_len - 1` bytes.
    max_len: usize,
}

/// Per-lane match buffers, reused across lines.
#[derive(Default)]
pub struct LaneBufs {
    lanes: [Vec<KwMatch>; LANES],
}

impl Keywords {
    pub fn new(patterns: &[String]) -> Result<Keywords, aho_corasick::BuildError> {
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            // The lane walk never consults a prefilter; without one the start
            // state is not "special", so prose stays on the fast path.
            .prefilter(false)
            .build(patterns)?;
        let start = dfa
            .start_state(Anchored::No)
            .expect("an unanchored DFA always has an unanchored start state");
        let max_len = dfa.max_pattern_len().max(1);
        Ok(Keywords {
            dfa,
            start,
            max_len,
        })
    }

    /// Every overlapping occurrence in `v`, appended to `out` ordered by end
    /// offset (ties in the automaton's own order), exactly as
    /// `AhoCorasick::find_overlapping_iter` would yield them.
    pub fn find_all(&self, v: &[u8], bufs: &mut LaneBufs, out: &mut Vec<KwMatch>) {
        if self.dfa.patterns_len() == 0 {
            return;
        }
        // An empty keyword (a per-repo file can hold one) matches before the
        // first byte too, as the library's iterator reports.
        if self.dfa.is_match(self.start) {
            for i in 0..self.dfa.match_len(self.start) {
                let pid = self.dfa.match_pattern(self.start, i);
                out.push(KwMatch {
                    start: 0,
                    end: 0,
                    pattern: pid.as_usize(),
                });
            }
        }
        if v.len() < MIN_LANED_LEN {
            let mut sid = self.start;
            for (p, &b) in v.iter().enumerate() {
                sid = self.dfa.next_state(Anchored::No, sid, b);
                if self.dfa.is_special(sid) {
                    self.report(sid, p, out);
                }
            }
            return;
        }
        let n = v.len();
        let chunk = n.div_ceil(LANES);
        let warm = self.max_len - 1;
        // Lane j reports matches ending in (a[j], b[j]] and walks from w[j].
        let a: [usize; LANES] = std::array::from_fn(|j| (j * chunk).min(n));
        let b: [usize; LANES] = std::array::from_fn(|j| ((j + 1) * chunk).min(n));
        let w: [usize; LANES] = std::array::from_fn(|j| a[j].saturating_sub(warm));
        for l in bufs.lanes.iter_mut() {
            l.clear();
        }
        let d = &self.dfa;
        let lane: [&[u8]; LANES] = std::array::from_fn(|j| &v[w[j]..b[j]]);
        // Lane j reports from this many bytes into its walk.
        let skip: [usize; LANES] = std::array::from_fn(|j| a[j] - w[j]);
        let common = lane.iter().map(|l| l.len()).min().unwrap_or(0);
        let mut sid = [self.start; LANES];
        // The four walks in lockstep; zipped slices keep bounds checks out of
        // the loop.
        let bytes = lane[0][..common]
            .iter()
            .zip(&lane[1][..common])
            .zip(&lane[2][..common])
            .zip(&lane[3][..common]);
        for (t, (((&b0, &b1), &b2), &b3)) in bytes.enumerate() {
            sid[0] = d.next_state(Anchored::No, sid[0], b0);
            sid[1] = d.next_state(Anchored::No, sid[1], b1);
            sid[2] = d.next_state(Anchored::No, sid[2], b2);
            sid[3] = d.next_state(Anchored::No, sid[3], b3);
            if d.is_special(sid[0])
                | d.is_special(sid[1])
                | d.is_special(sid[2])
                | d.is_special(sid[3])
            {
                for j in 0..LANES {
                    if d.is_special(sid[j]) && t >= skip[j] {
                        self.report(sid[j], w[j] + t, &mut bufs.lanes[j]);
                    }
                }
            }
        }
        for j in 0..LANES {
            let mut s = sid[j];
            for (t, &byte) in lane[j].iter().enumerate().skip(common) {
                s = d.next_state(Anchored::No, s, byte);
                if d.is_special(s) && t >= skip[j] {
                    self.report(s, w[j] + t, &mut bufs.lanes[j]);
                }
            }
        }
        for l in &bufs.lanes {
            out.extend_from_slice(l);
        }
    }

    /// Records every keyword that ends at byte `p` in match state `sid`.
    #[inline(always)]
    fn report(&self, sid: StateID, p: usize, out: &mut Vec<KwMatch>) {
        // An unanchored Standard automaton has no reachable dead state, so a
        // special state is a match state.
        if !self.dfa.is_match(sid) {
            return;
        }
        for i in 0..self.dfa.match_len(sid) {
            let pid = self.dfa.match_pattern(sid, i);
            let len = self.dfa.pattern_len(pid);
            out.push(KwMatch {
                start: p + 1 - len,
                end: p + 1,
                pattern: pid.as_usize(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::AhoCorasickBuilder;

    fn reference(pats: &[String], v: &[u8]) -> Vec<KwMatch> {
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(pats)
            .unwrap();
        ac.find_overlapping_iter(v)
            .map(|m| KwMatch {
                start: m.start(),
                end: m.end(),
                pattern: m.pattern().as_usize(),
            })
            .collect()
    }

    /// The lane walk must agree with the library's overlapping iterator,
    /// order included, on texts short and long, with keywords straddling
    /// every lane boundary.
    #[test]
    fn lanes_agree_with_overlapping_iterator() {
        let pats: Vec<String> = [
            "sk-",
            "sk-ant-",
            "token",
            "ken",
            "/home/",
            "/home/zed",
            "zed",
            "a",
            "ab",
            "abc",
            "secret_access_key",
            "access_key",
            "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        check_against_reference(&pats);
        // An empty keyword (a per-repo file can hold one) matches everywhere.
        let mut with_empty = pats.clone();
        with_empty.push(String::new());
        check_against_reference(&with_empty);
        check_against_reference(&[]);
    }

    fn check_against_reference(pats: &[String]) {
        let kw = Keywords::new(pats).unwrap();
        let mut bufs = LaneBufs::default();
        let unit = b"x sk-ant-Token /HOME/zed abc SECRET_ACCESS_KEY zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz ";
        for len in [0usize, 1, 5, 100, 255, 256, 257, 300, 1000, 4099] {
            for shift in 0..7 {
                let v: Vec<u8> = unit.iter().cycle().skip(shift).take(len).copied().collect();
                let mut got = Vec::new();
                kw.find_all(&v, &mut bufs, &mut got);
                assert_eq!(got, reference(pats, &v), "len {len} shift {shift}");
            }
        }
    }
}
