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

    /// As [`Keywords::find_all`] for `v`, given the matches `prev` that
    /// `find_all` gave for `prev_bytes`, a text sharing a suffix with `v`
    /// (verify scans an output line that differs from the scanned input only
    /// where placeholders went in, usually near the start).
    ///
    /// Exact, whatever the texts: with `l` the length of their common suffix
    /// and `e = v.len() - l`, a match of `v` ending after `e + max_len`
    /// starts after `e`, inside the common suffix, and the automaton state at
    /// its end is decided by the last `max_len` bytes, also in the suffix; so
    /// those matches, in order, are `prev`'s matches ending after
    /// `prev_bytes.len() - l + max_len`, shifted. The rest are found by
    /// walking `v[..e + max_len]`, and every one of them ends before every
    /// shifted match, so the concatenation keeps the iterator's order. The
    /// shared prefix is reused the same way from the other end (see below),
    /// so only the stretch around the edits is walked.
    pub fn find_all_reusing(
        &self,
        prev_bytes: &[u8],
        prev: &[KwMatch],
        v: &[u8],
        bufs: &mut LaneBufs,
        out: &mut Vec<KwMatch>,
    ) {
        let l = common_suffix(prev_bytes, v);
        let (e_new, e_old) = (v.len() - l, prev_bytes.len() - l);
        let cut = (e_new + self.max_len).min(v.len());
        // The shared prefix too: a match ending within it lies in it, so
        // it is one of `prev`'s, in the same order. Matches ending after it
        // start at most `max_len` bytes before its end, so the walk starts
        // there (the state at each end it reports is decided by the last
        // `max_len` bytes, as above) and keeps only those.
        let p = common_prefix(prev_bytes, v).min(e_new).min(e_old);
        let w = (p + 1).saturating_sub(self.max_len);
        out.extend(prev.iter().take_while(|m| m.end <= p).copied());
        let from = out.len();
        self.find_all(&v[w..cut], bufs, out);
        let mut keep = from;
        for i in from..out.len() {
            let m = out[i];
            if m.end + w > p {
                out[keep] = KwMatch {
                    start: m.start + w,
                    end: m.end + w,
                    pattern: m.pattern,
                };
                keep += 1;
            }
        }
        out.truncate(keep);
        if cut < v.len() {
            let old_cut = e_old + self.max_len;
            out.extend(prev.iter().filter(|m| m.end > old_cut).map(|m| KwMatch {
                start: m.start - e_old + e_new,
                end: m.end - e_old + e_new,
                pattern: m.pattern,
            }));
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

/// Length of the longest common prefix of `a` and `b`, 16 bytes at a time.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut l = 0;
    for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        if x != y {
            break;
        }
        l += 16;
    }
    while l < n && a[l] == b[l] {
        l += 1;
    }
    l
}

/// Length of the longest common suffix of `a` and `b`, compared 16 bytes at
/// a time (it runs over most of every verified line).
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut l = 0;
    for (x, y) in a.rchunks_exact(16).zip(b.rchunks_exact(16)) {
        if x != y {
            break;
        }
        l += 16;
    }
    while l < n && a[n - 1 - l] == b[n - 1 - l] {
        l += 1;
    }
    l
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

    /// Reusing an earlier text's matches gives exactly the full walk's
    /// result, for edits anywhere (start, middle, end, none, everything),
    /// growing and shrinking the text, with keywords straddling the edit.
    #[test]
    fn reusing_matches_equals_full_walk() {
        let pats: Vec<String> = [
            "/home/zed",
            "zed",
            "home",
            "token",
            "ab",
            "abc",
            "b",
            "",
            "~/",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let kw = Keywords::new(&pats).unwrap();
        let mut bufs = LaneBufs::default();
        let unit = b"{\"cwd\":\"/home/zed/src\",\"t\":\"token abc zed\"} ";
        for len in [0usize, 10, 40, 255, 300, 1200] {
            let base: Vec<u8> = unit.iter().cycle().take(len).copied().collect();
            let mut prev = Vec::new();
            kw.find_all(&base, &mut bufs, &mut prev);
            for at in [0usize, 1, 7, len / 2, len.saturating_sub(3), len] {
                for (cut, put) in [
                    (0usize, &b"~"[..]),
                    (9, b"~"),
                    (3, b"[REDACTED:x]"),
                    (len, b""),
                ] {
                    let at = at.min(len);
                    let end = (at + cut).min(len);
                    let mut v = base[..at].to_vec();
                    v.extend_from_slice(put);
                    v.extend_from_slice(&base[end..]);
                    let mut want = Vec::new();
                    kw.find_all(&v, &mut bufs, &mut want);
                    let mut got = Vec::new();
                    kw.find_all_reusing(&base, &prev, &v, &mut bufs, &mut got);
                    assert_eq!(got, want, "len {len} at {at} cut {cut} put {put:?}");
                }
            }
        }
        // Random edits of random texts, including edits that complete or
        // break the longest keyword at either end of the shared stretches.
        let frags: &[&[u8]] = &[b"/home/ze", b"d", b"x", b"token", b"ab", b"c", b"~/", b" "];
        let mut rng = crate::testkit::XorShift(0x94D0_49BB_1331_11EBu64);
        let mut next = || rng.next();
        for _ in 0..5000 {
            let n = (next() % 80) as usize;
            let base: Vec<u8> = (0..n)
                .flat_map(|_| {
                    frags[(next() % frags.len() as u64) as usize]
                        .iter()
                        .copied()
                })
                .collect();
            let mut v = base.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % (v.len() + 1);
                let cut = ((next() % 3) as usize).min(v.len() - at);
                let put = frags[(next() % frags.len() as u64) as usize];
                v.splice(at..at + cut, put.iter().copied());
            }
            let mut prev = Vec::new();
            kw.find_all(&base, &mut bufs, &mut prev);
            let (mut want, mut got) = (Vec::new(), Vec::new());
            kw.find_all(&v, &mut bufs, &mut want);
            kw.find_all_reusing(&base, &prev, &v, &mut bufs, &mut got);
            assert_eq!(
                got,
                want,
                "{:?} -> {:?}",
                String::from_utf8_lossy(&base),
                String::from_utf8_lossy(&v)
            );
        }
        // Unrelated texts: still exact.
        let (a, b) = (b"token abc".repeat(40), b"zed /home/zed".repeat(30));
        let mut prev = Vec::new();
        kw.find_all(&a, &mut bufs, &mut prev);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        kw.find_all(&b, &mut bufs, &mut want);
        kw.find_all_reusing(&a, &prev, &b, &mut bufs, &mut got);
        assert_eq!(got, want);
        assert_eq!(common_suffix(b"xxabc", b"yabc"), 3);
        assert_eq!(common_suffix(&[7u8; 40], &[7u8; 33]), 33);
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
