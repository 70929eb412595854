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
pub const MIN_LANED_LEN: usize = 96;

/// One occurrence: half-open byte span and the keyword's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KwMatch {
    pub start: usize,
    pub end: usize,
    pub pattern: usize,
}

/// The keyword automaton as a flat table of our own, copied from the
/// library's DFA (same states, same transitions, same match lists in the
/// same order) so the walk is one class lookup and one table load per byte
/// with its state in a register: the library's `next_state` behind its
/// trait kept the lanes' states spilling to the stack.
pub struct Keywords {
    /// Transitions: the row of the state with index `i` starts at
    /// `i * stride`; an entry is the next state's row start, in units of
    /// `1 << shift` entries.
    table: Table,
    /// log2 of the unit a table entry counts rows in (see [`Table`]).
    shift: u32,
    /// Byte to column.
    classes: [u8; 256],
    /// The start state's entry.
    start: u32,
    /// Entries below this are match states (they are numbered first).
    match_limit: u32,
    /// Per match state (row / stride): its range in `matches`.
    match_ranges: Vec<(u32, u32)>,
    /// (keyword index, keyword length), in the library's order per state.
    matches: Vec<(u32, u32)>,
    /// Entries per row: the number of byte classes, rounded up to a
    /// multiple of [`NARROW_UNIT`] in a narrow table.
    stride: usize,
    /// Longest keyword; a lane warms up over `max_len - 1` bytes.
    max_len: usize,
    patterns_len: usize,
    /// No keyword is empty or holds a newline: no match crosses a line
    /// end, and the walk leaves every `\n` in the start state (a byte no
    /// keyword holds leads there from every state), so a walk over many
    /// lines finds on each exactly what a walk over that line alone finds.
    line_local: bool,
}

/// The transition table. Narrow when every row start, counted in units of
/// [`NARROW_UNIT`] entries, fits 16 bits (the catalogue with an identity:
/// ~5,400 states): half the bytes of the wide form, so the rows the walk
/// keeps visiting take half the cache lines (the walk is latency-bound:
/// each byte's load waits for the one before). Wide otherwise (a large
/// per-repo keyword file).
#[derive(PartialEq)]
enum Table {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

/// Rows of a narrow table start at multiples of this many entries, so an
/// entry is a row start divided by it (a shift the load's address folds
/// in: `lea` then the load, as the wide table's add then the load).
const NARROW_UNIT: usize = 8;
const NARROW_SHIFT: u32 = NARROW_UNIT.trailing_zeros();

/// Per-lane match buffers, reused across lines.
#[derive(Default)]
pub struct LaneBufs {
    lanes: [Vec<KwMatch>; LANES],
}

/// The unanchored automaton over byte classes, its states numbered
/// breadth first from the start state (node 0) over the classes in order:
/// `next[node * stride + class]` is the transition, and a node reports the
/// (keyword, length) pairs `items[ranges[node].0..ranges[node].1]`, in the
/// library's order.
struct Raw {
    next: Vec<u32>,
    ranges: Vec<(u32, u32)>,
    items: Vec<(u32, u32)>,
}

impl Raw {
    /// The textbook construction, straight into a dense table: a trie of
    /// the keywords (each byte by its class, so both ASCII cases share a
    /// path), then breadth first each node's failure link and transitions.
    /// It is the automaton the library builds for these settings
    /// (`MatchKind::Standard`, ASCII case-insensitive) — same transitions,
    /// and each node's list is its own keywords in index order followed by
    /// its failure node's list, as the library copies them — at a fraction
    /// of the cost: the library's DFA builder was 90 % of the scanner's
    /// start-up (`tests::own_construction_equals_the_library_s`). Only for
    /// keywords that are not empty (the library gives an empty keyword's
    /// match a bookkeeping of its own; [`Raw::from_library`] keeps it).
    fn from_trie(patterns: &[String], classes: &[u8; 256], stride: usize) -> Raw {
        const NONE: u32 = u32::MAX;
        // The trie, nodes numbered as they are made.
        let mut goto = vec![NONE; stride];
        let mut end_of = Vec::with_capacity(patterns.len());
        for p in patterns {
            let mut s = 0usize;
            for &b in p.as_bytes() {
                let at = s * stride + classes[b as usize] as usize;
                s = match goto[at] {
                    NONE => {
                        let n = goto.len() / stride;
                        goto[at] = n as u32;
                        goto.resize(goto.len() + stride, NONE);
                        n
                    }
                    n => n as usize,
                };
            }
            end_of.push(s);
        }
        let n = goto.len() / stride;
        // Breadth first over the classes in order: the order in which a
        // breadth-first walk of the finished automaton meets the nodes (a
        // transition that is not a trie edge leads to a shallower node, met
        // already), so numbering by it is the numbering `Keywords` keeps.
        let mut made = vec![0u32]; // made[bfs] = made-order id
        let mut bfs_of = vec![0u32; n];
        let mut head = 0;
        while head < made.len() {
            let u = made[head] as usize;
            head += 1;
            for &g in &goto[u * stride..(u + 1) * stride] {
                if g != NONE {
                    bfs_of[g as usize] = made.len() as u32;
                    made.push(g);
                }
            }
        }
        // Transitions and failure links, node by node in that order: a
        // node's failure node is shallower, so its row is complete.
        let mut next = vec![0u32; n * stride];
        let mut fail = vec![0u32; n];
        for u in 0..n {
            let row = made[u] as usize * stride;
            let f = fail[u] as usize * stride;
            for c in 0..stride {
                let g = goto[row + c];
                let via_fail = if u == 0 { 0 } else { next[f + c] };
                next[u * stride + c] = if g == NONE {
                    via_fail
                } else {
                    let g = bfs_of[g as usize];
                    fail[g as usize] = via_fail;
                    g
                };
            }
        }
        // Each node's own keywords in index order, then its failure node's
        // list (built already: it comes earlier).
        let mut own_count = vec![0u32; n + 1];
        for &e in &end_of {
            own_count[bfs_of[e] as usize + 1] += 1;
        }
        for i in 0..n {
            own_count[i + 1] += own_count[i];
        }
        let mut own = vec![0u32; patterns.len()];
        let mut fill = own_count.clone();
        for (pid, &e) in end_of.iter().enumerate() {
            let at = &mut fill[bfs_of[e] as usize];
            own[*at as usize] = pid as u32;
            *at += 1;
        }
        let mut ranges = Vec::with_capacity(n);
        let mut items: Vec<(u32, u32)> = Vec::new();
        for u in 0..n {
            let from = items.len() as u32;
            for &pid in &own[own_count[u] as usize..own_count[u + 1] as usize] {
                items.push((pid, patterns[pid as usize].len() as u32));
            }
            if u != 0 {
                let (a, b) = ranges[fail[u] as usize];
                items.extend_from_within(a as usize..b as usize);
            }
            ranges.push((from, items.len() as u32));
        }
        Raw {
            next,
            ranges,
            items,
        }
    }

    /// The library's own DFA, read out state by state (breadth first from
    /// its unanchored start over one byte of each class).
    fn from_library(patterns: &[String], reps: &[u8]) -> Result<Raw, aho_corasick::BuildError> {
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(patterns)?;
        let start = dfa
            .start_state(Anchored::No)
            .expect("an unanchored DFA always has an unanchored start state");
        // The library's ids are offsets into its own table, so a vector
        // maps them back.
        let mut order: Vec<StateID> = vec![start];
        let mut index: Vec<u32> = Vec::new();
        fn slot(index: &mut Vec<u32>, sid: StateID) -> &mut u32 {
            let i = sid.as_usize();
            if index.len() <= i {
                index.resize(i + 1, u32::MAX);
            }
            &mut index[i]
        }
        *slot(&mut index, start) = 0;
        let (mut next, mut ranges, mut items) = (Vec::new(), Vec::new(), Vec::new());
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            for &b in reps {
                let n = dfa.next_state(Anchored::No, s, b);
                let at = slot(&mut index, n);
                if *at == u32::MAX {
                    *at = order.len() as u32;
                    order.push(n);
                }
                next.push(*at);
            }
            let from = items.len() as u32;
            if dfa.is_match(s) {
                for k in 0..dfa.match_len(s) {
                    let pid = dfa.match_pattern(s, k);
                    items.push((pid.as_usize() as u32, dfa.pattern_len(pid) as u32));
                }
            }
            ranges.push((from, items.len() as u32));
            i += 1;
        }
        Ok(Raw {
            next,
            ranges,
            items,
        })
    }
}

impl Keywords {
    pub fn new(patterns: &[String]) -> Result<Keywords, aho_corasick::BuildError> {
        Keywords::build(patterns, patterns.iter().any(|p| p.is_empty()))
    }

    fn build(patterns: &[String], library: bool) -> Result<Keywords, aho_corasick::BuildError> {
        // Byte classes from the keywords themselves: a byte no keyword holds
        // (in either ASCII case) leads every state where the unanchored
        // automaton's failure links end, the start state, so all such bytes
        // share a column; every other byte gets a class of its own, shared
        // with its other ASCII case (the automaton is built
        // case-insensitively, so both have the same transitions).
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut held = [false; 256];
        for p in patterns {
            for b in p.bytes() {
                held[b.to_ascii_lowercase() as usize] = true;
            }
        }
        let mut class_of = [u8::MAX; 256];
        for b in 0..=255u8 {
            let key = if held[b.to_ascii_lowercase() as usize] {
                b.to_ascii_lowercase()
            } else {
                // Any unheld byte stands for all of them.
                held.iter().position(|&h| !h).unwrap_or(0) as u8
            };
            if class_of[key as usize] == u8::MAX {
                class_of[key as usize] = reps.len() as u8;
                reps.push(b);
            }
            classes[b as usize] = class_of[key as usize];
        }
        let classes_len = reps.len();
        let raw = if library {
            Raw::from_library(patterns, &reps)?
        } else {
            Raw::from_trie(patterns, &classes, classes_len)
        };
        // `Raw` numbers every state breadth first already (the shallow, hot
        // states end up next to each other). `walk4` tests `s < lim` as the
        // sign of `s - lim`: every entry must stay below 2^31.
        let states = raw.ranges.len();
        let padded = classes_len.next_multiple_of(NARROW_UNIT);
        let narrow = (states - 1) * padded / NARROW_UNIT <= usize::from(u16::MAX);
        let (stride, shift) = if narrow {
            (padded, NARROW_SHIFT)
        } else {
            (classes_len, 0)
        };
        assert!(states * stride < 1 << 31, "keyword automaton too large");
        let is_match = |s: usize| raw.ranges[s].0 < raw.ranges[s].1;
        // Match states first, so "is a match" is one compare.
        let mut renum: Vec<usize> = (0..states).collect();
        renum.sort_by_key(|&i| !is_match(i));
        let mut new_of = vec![0u32; states];
        for (n, &i) in renum.iter().enumerate() {
            new_of[i] = ((n * stride) >> shift) as u32;
        }
        let n_match = (0..states).filter(|&s| is_match(s)).count();
        let mut match_ranges = Vec::with_capacity(n_match);
        let mut matches = Vec::new();
        for &s in &renum[..n_match] {
            let (a, b) = raw.ranges[s];
            let from = matches.len() as u32;
            matches.extend_from_slice(&raw.items[a as usize..b as usize]);
            match_ranges.push((from, matches.len() as u32));
        }
        // Row `n` is state `renum[n]`'s; columns past the last class are
        // never read (they lead to the start state all the same).
        fn rows<T: Copy>(
            raw: &Raw,
            renum: &[usize],
            classes_len: usize,
            stride: usize,
            entry: impl Fn(u32) -> T,
        ) -> Vec<T> {
            let mut trans = vec![entry(0); renum.len() * stride];
            for (n, &s) in renum.iter().enumerate() {
                let row = &raw.next[s * classes_len..(s + 1) * classes_len];
                for (t, &next) in trans[n * stride..].iter_mut().zip(row) {
                    *t = entry(next);
                }
            }
            trans
        }
        let table = if narrow {
            // Every entry fits: checked above.
            Table::Narrow(rows(&raw, &renum, classes_len, stride, |r| {
                new_of[r as usize] as u16
            }))
        } else {
            Table::Wide(rows(&raw, &renum, classes_len, stride, |r| {
                new_of[r as usize]
            }))
        };
        Ok(Keywords {
            table,
            shift,
            classes,
            start: new_of[0],
            match_limit: ((n_match * stride) >> shift) as u32,
            match_ranges,
            matches,
            stride,
            max_len: patterns.iter().map(|p| p.len()).max().unwrap_or(0).max(1),
            patterns_len: patterns.len(),
            line_local: patterns.iter().all(|p| !p.is_empty() && !p.contains('\n')),
        })
    }

    /// Every overlapping occurrence in `v`, appended to `out` ordered by end
    /// offset (ties in the automaton's own order), exactly as
    /// `AhoCorasick::find_overlapping_iter` would yield them.
    pub fn find_all(&self, v: &[u8], bufs: &mut LaneBufs, out: &mut Vec<KwMatch>) {
        if self.patterns_len == 0 {
            return;
        }
        match &self.table {
            Table::Narrow(t) => self.find_all_in::<u16, NARROW_SHIFT>(t, v, bufs, out),
            Table::Wide(t) => self.find_all_in::<u32, 0>(t, v, bufs, out),
        }
    }

    /// [`Keywords::find_all`] over the table `trans`, whose entries count
    /// rows in units of `1 << SHIFT` entries.
    fn find_all_in<T: Copy + Into<u32>, const SHIFT: u32>(
        &self,
        trans: &[T],
        v: &[u8],
        bufs: &mut LaneBufs,
        out: &mut Vec<KwMatch>,
    ) {
        let (classes, lim) = (&self.classes, self.match_limit);
        // An empty keyword (a per-repo file can hold one) matches before the
        // first byte too, as the library's iterator reports.
        if self.start < lim {
            self.report(self.start, 0, out);
        }
        if v.len() < MIN_LANED_LEN {
            let (mut i, mut s) = (0, self.start);
            while i < v.len() {
                (i, s) = walk1::<T, SHIFT>(trans, classes, lim, v, i, s);
                if s < lim {
                    self.report(s, i, out);
                }
            }
            return;
        }
        let n = v.len();
        let warm = self.max_len - 1;
        // Lane j reports matches ending in (a[j], b[j]] and walks from w[j].
        // Lanes 1.. first warm up over `warm` bytes before their stretch;
        // lane 0 starts in the right state at 0, so its stretch is `warm`
        // bytes longer: every lane then walks as far, in lockstep (unequal
        // lanes leave their tails to a one-lane walk, at twice the cost per
        // byte; with the catalogue's 29-byte keywords that was a quarter of
        // a 350-byte line).
        let chunk = n.saturating_sub(warm).div_ceil(LANES);
        let a: [usize; LANES] =
            std::array::from_fn(|j| if j == 0 { 0 } else { (j * chunk + warm).min(n) });
        let b: [usize; LANES] = std::array::from_fn(|j| ((j + 1) * chunk + warm).min(n));
        let w: [usize; LANES] = std::array::from_fn(|j| a[j].saturating_sub(warm));
        for l in bufs.lanes.iter_mut() {
            l.clear();
        }
        let lane: [&[u8]; LANES] = std::array::from_fn(|j| &v[w[j]..b[j]]);
        // Lane j reports from this many bytes into its walk.
        let skip: [usize; LANES] = std::array::from_fn(|j| a[j] - w[j]);
        let common = lane.iter().map(|l| l.len()).min().unwrap_or(0);
        let (l0, l1, l2, l3) = (
            &lane[0][..common],
            &lane[1][..common],
            &lane[2][..common],
            &lane[3][..common],
        );
        let mut st = [self.start; LANES];
        // The four walks in lockstep, stopping whenever one lane reaches a
        // match state.
        let mut t = 0;
        while t < common {
            (t, st) = walk4::<T, SHIFT>(trans, classes, lim, [l0, l1, l2, l3], t, st);
            for (j, &s) in st.iter().enumerate() {
                // `t` bytes read: the last was `t - 1` into the lane.
                if s < lim && t > skip[j] {
                    self.report(s, w[j] + t, &mut bufs.lanes[j]);
                }
            }
        }
        for (j, &s) in st.iter().enumerate() {
            let (mut t, mut s) = (common, s);
            while t < lane[j].len() {
                (t, s) = walk1::<T, SHIFT>(trans, classes, lim, lane[j], t, s);
                if s < lim && t > skip[j] {
                    self.report(s, w[j] + t, &mut bufs.lanes[j]);
                }
            }
        }
        for l in &bufs.lanes {
            out.extend_from_slice(l);
        }
    }

    /// See the field: whether [`Keywords::find_all`] over a block of lines
    /// gives each line's matches (shifted).
    pub fn line_local(&self) -> bool {
        self.line_local
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

    /// Records every keyword that ends at `end` in match state `s` (an
    /// entry below `match_limit`).
    #[inline(always)]
    fn report(&self, s: u32, end: usize, out: &mut Vec<KwMatch>) {
        let (from, to) = self.match_ranges[((s as usize) << self.shift) / self.stride];
        for &(pid, len) in &self.matches[from as usize..to as usize] {
            out.push(KwMatch {
                start: end - len as usize,
                end,
                pattern: pid as usize,
            });
        }
    }
}

/// Walks `v[i..]` from state `s` until it enters a match state (a row
/// below `lim`) or runs out; returns how far it read and the state. A leaf
/// of its own so the state stays in a register (inside the caller, with
/// the reporting path around it, it was spilled to the stack on every
/// byte, which put a store-to-load round trip on the dependency chain).
#[inline(never)]
fn walk1<T: Copy + Into<u32>, const SHIFT: u32>(
    trans: &[T],
    classes: &[u8; 256],
    lim: u32,
    v: &[u8],
    mut i: usize,
    mut s: u32,
) -> (usize, u32) {
    while i < v.len() {
        s = step::<T, SHIFT>(trans, s, classes[v[i] as usize]);
        i += 1;
        if s < lim {
            break;
        }
    }
    (i, s)
}

/// One transition: the entry at row `s << SHIFT`, column `c`.
#[inline(always)]
fn step<T: Copy + Into<u32>, const SHIFT: u32>(trans: &[T], s: u32, c: u8) -> u32 {
    trans[((s as usize) << SHIFT) + usize::from(c)].into()
}

/// [`walk1`] for four lanes of equal length in lockstep, until any of them
/// enters a match state.
#[inline(never)]
fn walk4<T: Copy + Into<u32>, const SHIFT: u32>(
    trans: &[T],
    classes: &[u8; 256],
    lim: u32,
    l: [&[u8]; LANES],
    mut t: usize,
    st: [u32; LANES],
) -> (usize, [u32; LANES]) {
    let n = l[0].len();
    let (l0, l1, l2, l3) = (l[0], &l[1][..n], &l[2][..n], &l[3][..n]);
    let [mut s0, mut s1, mut s2, mut s3] = st;
    while t < n {
        s0 = step::<T, SHIFT>(trans, s0, classes[l0[t] as usize]);
        s1 = step::<T, SHIFT>(trans, s1, classes[l1[t] as usize]);
        s2 = step::<T, SHIFT>(trans, s2, classes[l2[t] as usize]);
        s3 = step::<T, SHIFT>(trans, s3, classes[l3[t] as usize]);
        t += 1;
        // `s < lim` is the sign of `s - lim` (both below 2^31): one test
        // for the four lanes.
        let any = s0.wrapping_sub(lim)
            | s1.wrapping_sub(lim)
            | s2.wrapping_sub(lim)
            | s3.wrapping_sub(lim);
        if (any as i32) < 0 {
            break;
        }
    }
    (t, [s0, s1, s2, s3])
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

    /// A walk over a block of lines gives each line exactly the matches a
    /// walk over that line alone gives (shifted), when no keyword is empty
    /// or holds a newline; and a keyword set that breaks that says so.
    #[test]
    fn a_block_walk_gives_each_line_its_own_matches() {
        let pats: Vec<String> = [
            "sk-",
            "token",
            "ken",
            "/home/zed",
            "pass",
            "password",
            "a",
            " / ",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let kw = Keywords::new(&pats).unwrap();
        assert!(kw.line_local());
        assert!(!Keywords::new(&["a\nb".to_string()]).unwrap().line_local());
        assert!(!Keywords::new(&[String::new(), "x".into()])
            .unwrap()
            .line_local());
        let parts: &[&str] = &[
            "sk-", "tok", "en", "token", "/home/", "zed", "pass", "word", " / ", "\n", "\n", "x",
            "ä", "a", "  ",
        ];
        let mut rng = crate::testkit::XorShift(0xD1B5_4A32_D192_ED03);
        let mut bufs = LaneBufs::default();
        for _ in 0..3000 {
            let n = 1 + (rng.next() % 200) as usize;
            let mut block: String = (0..n)
                .map(|_| parts[(rng.next() % parts.len() as u64) as usize])
                .collect();
            block.push('\n');
            let b = block.as_bytes();
            let mut all = Vec::new();
            kw.find_all(b, &mut bufs, &mut all);
            let mut off = 0;
            for line in block.split_inclusive('\n') {
                let body = &line.as_bytes()[..line.len() - 1];
                let mut own = Vec::new();
                kw.find_all(body, &mut bufs, &mut own);
                let lo = all.partition_point(|m| m.end <= off);
                let hi = all.partition_point(|m| m.end <= off + body.len());
                let shifted: Vec<KwMatch> = all[lo..hi]
                    .iter()
                    .map(|m| KwMatch {
                        start: m.start - off,
                        end: m.end - off,
                        pattern: m.pattern,
                    })
                    .collect();
                assert_eq!(shifted, own, "{line:?} in {block:?}");
                off += line.len();
            }
        }
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
        // A keyword longer than a laned line (a per-repo identity string
        // can be): the lanes' warm-up covers all of the shorter lines.
        let unit = "x sk-ant-token /home/zed abc secret_access_key ".repeat(4);
        let mut long = pats.clone();
        long.push(unit[3..140].to_string());
        check_against_reference(&long);
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
        for _ in 0..5000 {
            let n = (rng.next() % 80) as usize;
            let base: Vec<u8> = rng.concat(frags, n);
            let mut v = base.clone();
            for _ in 0..1 + rng.next() % 3 {
                let at = (rng.next() as usize) % (v.len() + 1);
                let cut = ((rng.next() % 3) as usize).min(v.len() - at);
                let put = frags[(rng.next() % frags.len() as u64) as usize];
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

    /// The catalogue's keywords, each once, and identity-like strings with
    /// non-ASCII bytes.
    fn catalogue_keywords() -> Vec<String> {
        let mut pats: Vec<String> = Vec::new();
        for d in crate::rules::builtin() {
            for k in d.keywords {
                let k = k.to_ascii_lowercase();
                if !pats.contains(&k) {
                    pats.push(k);
                }
            }
        }
        pats.extend(["/home/zed", "zed", "Zoë Quimby", "zoë@example.org"].map(String::from));
        pats
    }

    /// The real catalogue's keywords (and identity-like strings with
    /// non-ASCII bytes), on texts of keyword pieces and every byte value in
    /// both cases: our table walks exactly as the library's automaton.
    #[test]
    fn catalogue_table_agrees_with_library() {
        let pats = catalogue_keywords();
        let kw = Keywords::new(&pats).unwrap();
        let mut bufs = LaneBufs::default();
        let mut rng = crate::testkit::XorShift(0x1234_5678_9ABC_DEF1u64);
        for _ in 0..400 {
            let mut t: Vec<u8> = Vec::new();
            while t.len() < (rng.next() % 700) as usize {
                if rng.next() & 1 == 0 {
                    let p = &pats[(rng.next() % pats.len() as u64) as usize];
                    let cut = (rng.next() as usize) % (p.len() + 1);
                    if rng.next() & 1 == 0 {
                        t.extend(p.bytes().take(cut));
                    } else {
                        t.extend(p.bytes().map(|b| b.to_ascii_uppercase()));
                    }
                } else {
                    t.push(rng.next() as u8);
                }
            }
            let mut got = Vec::new();
            kw.find_all(&t, &mut bufs, &mut got);
            assert_eq!(got, reference(&pats, &t));
        }
    }

    /// Built from our own trie, the table is the one read out of the
    /// library's DFA, field for field: the catalogue's keywords with
    /// identity strings, and random sets of short keywords over a small
    /// alphabet (shared prefixes and suffixes, one a part of another,
    /// duplicates, both ASCII cases, bytes above 0x7F). Fails if a failure
    /// link, a transition or a match list's order differs.
    #[test]
    fn own_construction_equals_the_library_s() {
        let same = |pats: &[String]| {
            let a = Keywords::build(pats, false).unwrap();
            let b = Keywords::build(pats, true).unwrap();
            assert_eq!(a.classes, b.classes, "{pats:?}");
            assert_eq!(
                (
                    a.start,
                    a.match_limit,
                    a.stride,
                    a.shift,
                    a.max_len,
                    a.patterns_len
                ),
                (
                    b.start,
                    b.match_limit,
                    b.stride,
                    b.shift,
                    b.max_len,
                    b.patterns_len
                ),
                "{pats:?}"
            );
            assert!(a.table == b.table, "transitions differ: {pats:?}");
            assert_eq!(a.match_ranges, b.match_ranges, "{pats:?}");
            assert_eq!(a.matches, b.matches, "{pats:?}");
        };
        let pats = catalogue_keywords();
        same(&pats);
        let alphabet: &[&str] = &["a", "B", "b", "-", "ab", "é", "\u{7f}", " "];
        let mut rng = crate::testkit::XorShift(0x5DEE_CE66_D1CE_4E5Bu64);
        for _ in 0..300 {
            let n = 1 + (rng.next() % 12) as usize;
            let set: Vec<String> = (0..n)
                .map(|_| {
                    let len = 1 + (rng.next() % 5) as usize;
                    (0..len)
                        .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
                        .collect()
                })
                .collect();
            same(&set);
        }
    }

    /// The catalogue's table is narrow; a keyword set with too many states
    /// for 16-bit entries falls back to the wide table, and both walk as
    /// the library's iterator (the wide one over a text of its keywords
    /// with every lane boundary crossing some).
    #[test]
    fn narrow_and_wide_tables_walk_alike() {
        let kw = Keywords::new(&catalogue_keywords()).unwrap();
        assert!(matches!(kw.table, Table::Narrow(_)) && kw.shift == NARROW_SHIFT);
        let mut rng = crate::testkit::XorShift(0x2545_F491_4F6C_DD1Du64);
        let letters = b"abcdefghijklmnopqrstuvwxyz0123456789_-./";
        let pats: Vec<String> = (0..3000)
            .map(|_| {
                (0..8 + rng.next() % 16)
                    .map(|_| letters[(rng.next() % letters.len() as u64) as usize] as char)
                    .collect()
            })
            .collect();
        let kw = Keywords::new(&pats).unwrap();
        assert!(matches!(kw.table, Table::Wide(_)) && kw.shift == 0);
        let mut bufs = LaneBufs::default();
        for _ in 0..200 {
            let mut t: Vec<u8> = Vec::new();
            while t.len() < (rng.next() % 900) as usize {
                let p = pats[(rng.next() % pats.len() as u64) as usize].as_bytes();
                t.extend_from_slice(&p[(rng.next() as usize) % p.len()..]);
                t.push(letters[(rng.next() % letters.len() as u64) as usize]);
            }
            let mut got = Vec::new();
            kw.find_all(&t, &mut bufs, &mut got);
            assert_eq!(got, reference(&pats, &t));
        }
    }

    /// With an empty keyword the library's own automaton is used (it gives
    /// that match a bookkeeping of its own), and the walk still agrees with
    /// its iterator.
    #[test]
    fn an_empty_keyword_walks_as_the_library() {
        check_against_reference(&["".into(), "sk-".into(), "ken".into(), "token".into()]);
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
