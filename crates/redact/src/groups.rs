//! Where a rule's capture group lies in a match, found with lazy DFAs
//! instead of a capture engine.
//!
//! A rule's regex finds a match's span with its lazy DFA alone (forward,
//! and backward for the start); resolving the groups then took the bounded
//! backtracker over the match, which on the varied corpus cost 4–9 times
//! the search itself (every hit of `provider-named`, the assignment rules,
//! `aws configure set`, …: a tenth of the whole redaction's time).
//!
//! The capture engine's answer is a property of the match's winning path:
//! the highest-priority path of the pattern (paths ordered by their choices,
//! in order) among those spelling exactly `[s, e)` — the leftmost-first
//! winner ends at `e`, so no path spelling `[s, e)` outranks it. That
//! property splits along the pattern's syntax tree, with only lazy DFAs
//! that report every match:
//!
//! - an alternation's winning path lies in the first branch that spells
//!   `[a, b)` at all (each earlier branch is tested with a forward DFA);
//! - a concatenation `H·M·T` (`H` and `T` without groups, `M` the first
//!   element with one) passes `M` over `[g, h)`, where `g` is an end of `H`
//!   from `a` and a start of `M·T` ending at `b`, and `h` an end of `M` from
//!   `g` and a start of `T` ending at `b`. When each of those is one offset
//!   only, it is the winning path's, and `M`'s part of that path is the
//!   highest-priority path of `M` spelling `[g, h)` (a higher one would
//!   give the whole a higher path): the same question, one level down;
//! - a group spans `[a, b)` itself.
//!
//! Anything else — two candidate offsets, a group inside a repetition, a
//! DFA that gives up — answers [`Resolved::Unknown`] and the caller runs the
//! capture engine as before. Look-arounds see the whole haystack in every
//! walk, as in the original search.
//! `groups::tests::resolved_groups_equal_capture_engine` holds every
//! built-in pattern to the capture engine on random texts made of its
//! own pieces.

use regex_automata::{
    hybrid::dfa::{Cache, DFA},
    nfa::thompson,
    Anchored, Input, MatchKind,
};
use regex_syntax::hir::{Hir, HirKind};

/// Where the first group that took part in a match lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    Group(usize, usize),
    /// The winning path passes no group.
    NoGroup,
    /// Not decided here: run the capture engine.
    Unknown,
}

/// A pattern's syntax tree, cut for [`Groups::resolve`]. The DFAs live in
/// `Groups::dfas`; nodes name them by index.
enum Node {
    NoGroup,
    Group,
    Unknown,
    /// Every branch but the last has a forward DFA to test it.
    Alt {
        tests: Vec<usize>,
        branches: Vec<Node>,
    },
    /// `head·mid·tail`; see the module's notes.
    Concat {
        /// `head` forward and `mid·tail` reverse (`None` when `head` is
        /// empty: `g` is the span's start).
        head: Option<(usize, usize)>,
        /// `mid` forward and `tail` reverse (`None` when `tail` is empty:
        /// `h` is the span's end).
        tail: Option<(usize, usize)>,
        /// Whether `tail` holds groups too: they count only when `mid`'s
        /// part of the path passes none.
        tail_groups: bool,
        mid: Box<Node>,
    },
}

/// A built-in pattern cut for finding a match's first group without the
/// capture engine.
pub struct Groups {
    root: Node,
    dfas: Vec<DFA>,
}

/// One thread's caches for a [`Groups`]' DFAs, and a buffer.
pub struct GroupCache {
    caches: Vec<Cache>,
    ends: Vec<usize>,
    starts: Vec<usize>,
}

/// How many matches a rule resolves with the capture engine before its
/// [`Groups`] are built. The DFAs here start empty and build their states
/// as they walk (about a millisecond's work per rule before they run
/// warm): a file with a few dozen secrets would pay more than it saves
/// (a 300 KB slice of the varied corpus: +29 % instructions with no
/// threshold), while a secret-dense stream passes this early.
pub const GROUPS_AFTER_MATCHES: u32 = 256;

/// [`Groups`] for a built-in pattern, built once the rule has had
/// [`GROUPS_AFTER_MATCHES`] matches in this process.
pub struct LazyGroups {
    pattern: &'static str,
    matches: std::sync::atomic::AtomicU32,
    cell: std::sync::OnceLock<Option<Groups>>,
}

impl LazyGroups {
    pub fn new(pattern: &'static str) -> LazyGroups {
        LazyGroups {
            pattern,
            matches: std::sync::atomic::AtomicU32::new(0),
            cell: std::sync::OnceLock::new(),
        }
    }

    /// The cut pattern once the rule has had its matches (see
    /// [`LazyGroups::saw_match`]); `None` before that, or when the pattern
    /// does not parse or a DFA would not build (the capture engine
    /// resolves the rule's matches then).
    pub fn ready(&self) -> Option<&Groups> {
        if let Some(g) = self.cell.get() {
            return g.as_ref();
        }
        if self.matches.load(std::sync::atomic::Ordering::Relaxed) < GROUPS_AFTER_MATCHES {
            return None;
        }
        self.build()
    }

    /// Counts a match the capture engine resolved.
    pub fn saw_match(&self) {
        self.matches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The cut pattern now, whatever the count.
    pub fn build(&self) -> Option<&Groups> {
        self.cell.get_or_init(|| Groups::new(self.pattern)).as_ref()
    }
}

fn captures(h: &Hir) -> usize {
    h.properties().explicit_captures_len()
}

impl Groups {
    /// `None` when the pattern does not parse or a DFA would not build.
    pub fn new(pattern: &str) -> Option<Groups> {
        let hir = crate::engine::parse_builtin(pattern)?;
        let mut g = Groups {
            root: Node::Unknown,
            dfas: Vec::new(),
        };
        g.root = g.node(&hir)?;
        Some(g)
    }

    fn dfa(&mut self, h: &Hir, reverse: bool) -> Option<usize> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .reverse(reverse)
                    .nfa_size_limit(Some(crate::engine::BUILTIN_PATTERN_BYTES))
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(h)
            .ok()?;
        let d = DFA::builder()
            .configure(DFA::config().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .ok()?;
        self.dfas.push(d);
        Some(self.dfas.len() - 1)
    }

    fn node(&mut self, h: &Hir) -> Option<Node> {
        if captures(h) == 0 {
            return Some(Node::NoGroup);
        }
        Some(match h.kind() {
            HirKind::Capture(_) => Node::Group,
            HirKind::Alternation(bs) => {
                let mut tests = Vec::new();
                for b in &bs[..bs.len() - 1] {
                    tests.push(self.dfa(b, false)?);
                }
                let mut branches = Vec::new();
                for b in bs {
                    branches.push(self.node(b)?);
                }
                Node::Alt { tests, branches }
            }
            HirKind::Concat(xs) => {
                let k = xs.iter().position(|x| captures(x) > 0)?;
                let head = if k == 0 {
                    None
                } else {
                    let rest = Hir::concat(xs[k..].to_vec());
                    Some((
                        self.dfa(&Hir::concat(xs[..k].to_vec()), false)?,
                        self.dfa(&rest, true)?,
                    ))
                };
                let tail = if k + 1 == xs.len() {
                    None
                } else {
                    Some((
                        self.dfa(&xs[k], false)?,
                        self.dfa(&Hir::concat(xs[k + 1..].to_vec()), true)?,
                    ))
                };
                Node::Concat {
                    head,
                    tail,
                    tail_groups: xs[k + 1..].iter().any(|x| captures(x) > 0),
                    mid: Box::new(self.node(&xs[k])?),
                }
            }
            _ => Node::Unknown,
        })
    }

    pub fn create_cache(&self) -> GroupCache {
        GroupCache {
            caches: self.dfas.iter().map(DFA::create_cache).collect(),
            ends: Vec::new(),
            starts: Vec::new(),
        }
    }

    /// The first group taking part in the pattern's match `hay[s..e]`
    /// (found by a leftmost-first search of `hay`, anchored or not).
    pub fn resolve(&self, cache: &mut GroupCache, hay: &[u8], s: usize, e: usize) -> Resolved {
        self.resolve_node(&self.root, cache, hay, s, e)
    }

    fn resolve_node(
        &self,
        n: &Node,
        cache: &mut GroupCache,
        hay: &[u8],
        a: usize,
        b: usize,
    ) -> Resolved {
        match n {
            Node::NoGroup => Resolved::NoGroup,
            Node::Group => Resolved::Group(a, b),
            Node::Unknown => Resolved::Unknown,
            Node::Alt { tests, branches } => {
                for (i, br) in branches.iter().enumerate() {
                    if let Some(&t) = tests.get(i) {
                        match self.spells(t, cache, hay, a, b) {
                            None => return Resolved::Unknown,
                            Some(false) => continue,
                            Some(true) => {}
                        }
                    }
                    return self.resolve_node(br, cache, hay, a, b);
                }
                Resolved::Unknown
            }
            Node::Concat {
                head,
                tail,
                tail_groups,
                mid,
            } => {
                let g = match *head {
                    None => Some(a),
                    Some((fwd, rev)) => self.split(fwd, rev, cache, hay, a, b),
                };
                let Some(g) = g else {
                    return Resolved::Unknown;
                };
                let h = match *tail {
                    None => Some(b),
                    Some((fwd, rev)) => self.split(fwd, rev, cache, hay, g, b),
                };
                let Some(h) = h else {
                    return Resolved::Unknown;
                };
                match self.resolve_node(mid, cache, hay, g, h) {
                    Resolved::NoGroup if *tail_groups => Resolved::Unknown,
                    r => r,
                }
            }
        }
    }

    /// The one offset in `[a, b]` that is both an end of DFA `fwd`'s
    /// matches from `a` and a start of DFA `rev`'s (reverse) matches
    /// ending at `b`. The reverse walk goes first: it usually stops within
    /// the value, and the forward walk then needs to go no further than the
    /// last start it found.
    fn split(
        &self,
        fwd: usize,
        rev: usize,
        cache: &mut GroupCache,
        hay: &[u8],
        a: usize,
        b: usize,
    ) -> Option<usize> {
        let mut starts = std::mem::take(&mut cache.starts);
        let mut ends = std::mem::take(&mut cache.ends);
        starts.clear();
        ends.clear();
        let got = self
            .walk_span(rev, cache, hay, a, b, true, &mut starts)
            .and_then(|()| {
                let last = *starts.first()?;
                self.walk_span(fwd, cache, hay, a, last, false, &mut ends)
            })
            .and_then(|()| sole_common(&ends, &starts));
        cache.starts = starts;
        cache.ends = ends;
        got
    }

    /// Whether DFA `d` has a match spelling exactly `[a, b)`.
    fn spells(
        &self,
        d: usize,
        cache: &mut GroupCache,
        hay: &[u8],
        a: usize,
        b: usize,
    ) -> Option<bool> {
        let mut ends = std::mem::take(&mut cache.ends);
        ends.clear();
        let got = self.walk_span(d, cache, hay, a, b, false, &mut ends);
        let exact = ends.last() == Some(&b);
        cache.ends = ends;
        got.map(|()| exact)
    }

    /// [`walk`] over `hay[a..b]`: forward from `a`, every end of an
    /// anchored match of DFA `d` in `[a, b]`, ascending (entering a match
    /// state on `hay[at]`: a match ending at `at`); with `reverse`, backward
    /// from `b`, every start of one ending at `b`, descending (a start at
    /// `at + 1`).
    #[allow(clippy::too_many_arguments)]
    fn walk_span(
        &self,
        d: usize,
        cache: &mut GroupCache,
        hay: &[u8],
        a: usize,
        b: usize,
        reverse: bool,
        out: &mut Vec<usize>,
    ) -> Option<()> {
        let (dfa, c) = (&self.dfas[d], &mut cache.caches[d]);
        let input = Input::new(hay).range(a..b).anchored(Anchored::Yes);
        if reverse {
            let sid = dfa.start_state_reverse(c, &input).ok()?;
            let steps = (a..b).rev().map(|i| (i + 1, hay[i]));
            walk(
                dfa,
                c,
                sid,
                steps,
                (a, a.checked_sub(1).map(|p| hay[p])),
                out,
            )
        } else {
            let sid = dfa.start_state_forward(c, &input).ok()?;
            let steps = hay[a..b].iter().enumerate().map(|(i, &x)| (a + i, x));
            walk(dfa, c, sid, steps, (b, hay.get(b).copied()), out)
        }
    }
}

/// Walks DFA `dfa` from `sid` over `steps` (each the offset a match state
/// entered on that byte stands for, and the byte), then over `last` (the
/// offset for the final step, and the byte beyond the span, `None` at the
/// haystack's edge), pushing each match's offset. A DFA reports a match
/// one byte late, so the final step reads the byte after the span (for
/// look-arounds) without taking it into a match. `None` when the DFA
/// gives up.
fn walk(
    dfa: &DFA,
    c: &mut Cache,
    mut sid: regex_automata::hybrid::LazyStateID,
    steps: impl Iterator<Item = (usize, u8)>,
    last: (usize, Option<u8>),
    out: &mut Vec<usize>,
) -> Option<()> {
    for (at, byte) in steps {
        sid = dfa.next_state(c, sid, byte).ok()?;
        if sid.is_tagged() {
            if sid.is_match() {
                out.push(at);
            } else if sid.is_dead() {
                return Some(());
            } else if sid.is_quit() {
                return None;
            }
        }
    }
    sid = match last.1 {
        Some(byte) => dfa.next_state(c, sid, byte).ok()?,
        None => dfa.next_eoi_state(c, sid).ok()?,
    };
    if sid.is_quit() {
        return None;
    }
    if sid.is_match() {
        out.push(last.0);
    }
    Some(())
}

/// The one offset both in `ends` (ascending) and in `starts`
/// (descending); `None` when there are none or several.
fn sole_common(ends: &[usize], starts: &[usize]) -> Option<usize> {
    let (mut i, mut j) = (0, starts.len());
    let mut found = None;
    while i < ends.len() && j > 0 {
        let (x, y) = (ends[i], starts[j - 1]);
        if x < y {
            i += 1;
        } else if y < x {
            j -= 1;
        } else {
            if found.is_some() {
                return None;
            }
            found = Some(x);
            i += 1;
            j -= 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in pattern with a group: on random texts made of its
    /// keywords and the bytes around values, each match's first group as
    /// `Groups::resolve` finds it is the capture engine's, and most
    /// matches are resolved here.
    #[test]
    fn resolved_groups_equal_capture_engine() {
        let glue: &[&[u8]] = &[
            b" ",
            b"=",
            b": ",
            b":",
            b"\"",
            b"'",
            b"`",
            b"=>",
            b":=",
            b"-",
            b"_",
            b".",
            b"/",
            b"@",
            b"\n",
            b"\t",
            b"x",
            b"abc",
            b"s3cr3tV4lue9",
            b"hunter2!",
            b"https://",
            b"bob:Winter2021@db.example.com",
            b"is",
            b" to ",
            b" for the ",
            b"Bearer ",
            b"AKIAIOSFODNN7EXAMPLE",
            b"wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
            b"Zq8vR2mK7pL4xN9wQ1abcDEF",
            b"ghp_0123456789abcdefABCDEF0123456789ab",
            b"\xc3\xa9",
            b", ",
            b"(",
            b")",
            b"[",
            b"]",
            b"{",
            b"}",
            b";",
            b"#",
            b"$",
            b"%40",
            b"0",
        ];
        let mut rng = crate::testkit::XorShift(0x6A0B_5EED_0123_4567);
        let (mut resolved, mut unknown, mut rules_hit) = (0usize, 0usize, 0usize);
        for def in crate::rules::builtin().into_iter().filter(|d| d.group != 0) {
            let re = crate::engine::compile_builtin(def.pattern).expect("built-in pattern");
            let groups =
                Groups::new(def.pattern).unwrap_or_else(|| panic!("{}: pattern not cut", def.id));
            let mut cache = groups.create_cache();
            let mut locs = re.capture_locations();
            let kws: Vec<Vec<u8>> = def
                .keywords
                .iter()
                .flat_map(|k| [k.as_bytes().to_vec(), k.to_ascii_uppercase().into_bytes()])
                .collect();
            let mut parts: Vec<&[u8]> = glue.to_vec();
            for k in &kws {
                // Keywords as often as all the glue together.
                for _ in 0..glue.len() / kws.len().max(1) + 1 {
                    parts.push(k);
                }
            }
            let mut matched = 0;
            for _ in 0..3000 {
                let n = 2 + (rng.next() % 12) as usize;
                let t = rng.concat(&parts, n);
                let mut at = 0;
                while at <= t.len() {
                    let Some(m) = re.captures_read_at(&mut locs, &t, at) else {
                        break;
                    };
                    matched += 1;
                    let want = (1..locs.len()).find_map(|g| locs.get(g));
                    match groups.resolve(&mut cache, &t, m.start(), m.end()) {
                        Resolved::Unknown => unknown += 1,
                        Resolved::Group(a, b) => {
                            resolved += 1;
                            assert_eq!(
                                want,
                                Some((a, b)),
                                "{}: {:?}",
                                def.id,
                                t.escape_ascii().to_string()
                            );
                        }
                        Resolved::NoGroup => {
                            resolved += 1;
                            assert_eq!(
                                want,
                                None,
                                "{}: {:?}",
                                def.id,
                                t.escape_ascii().to_string()
                            );
                        }
                    }
                    at = m.end().max(m.start() + 1);
                }
            }
            if matched > 0 {
                rules_hit += 1;
            }
        }
        // Enough rules met to mean something, and the cut answers nearly
        // every match itself.
        assert!(rules_hit >= 60, "{rules_hit} rules matched");
        eprintln!("{rules_hit} rules matched; {resolved} resolved, {unknown} not");
        assert!(
            resolved >= 20 * unknown.max(1),
            "{resolved} resolved, {unknown} not"
        );
    }

    #[test]
    fn alternation_takes_the_first_branch_that_spells_the_match() {
        // Both branches spell `ab`: the first wins, and its group is empty
        // of `b`.
        let g = Groups::new(r"(a)b|a(b)").expect("cut");
        let mut c = g.create_cache();
        assert_eq!(g.resolve(&mut c, b"ab", 0, 2), Resolved::Group(0, 1));
        // A branch without a group.
        let g = Groups::new(r"xy|x(y)").expect("cut");
        let mut c = g.create_cache();
        assert_eq!(g.resolve(&mut c, b"xy", 0, 2), Resolved::NoGroup);
    }

    #[test]
    fn two_possible_splits_are_left_to_the_capture_engine() {
        // `a+` then `(a+)`: the split of `aaa` is the engine's choice of
        // priorities, which the DFAs cannot see.
        let g = Groups::new(r"a+(a+)").expect("cut");
        let mut c = g.create_cache();
        assert_eq!(g.resolve(&mut c, b"aaa", 0, 3), Resolved::Unknown);
        // One split only: decided here.
        let g = Groups::new(r"a+=(a+)").expect("cut");
        let mut c = g.create_cache();
        assert_eq!(g.resolve(&mut c, b"aa=aa", 0, 5), Resolved::Group(3, 5));
    }

    #[test]
    fn look_arounds_see_the_bytes_outside_the_match() {
        // `\b` at the group's end reads the byte after the match.
        let g = Groups::new(r"k=(\w+\b)").expect("cut");
        let mut c = g.create_cache();
        assert_eq!(g.resolve(&mut c, b"k=ab cd", 0, 4), Resolved::Group(2, 4));
    }

    #[test]
    fn a_rule_is_cut_only_after_its_matches() {
        let l = LazyGroups::new(r"k=(\w+)");
        for _ in 0..GROUPS_AFTER_MATCHES {
            assert!(l.ready().is_none());
            l.saw_match();
        }
        assert!(l.ready().is_some());
    }
}
