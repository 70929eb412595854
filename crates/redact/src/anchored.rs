//! Anchored rule searches: a rule whose every match begins with one of a
//! few literals is searched only where those literals occur, with anchored
//! searches that stop within a few bytes, instead of an unanchored search
//! over the whole segment.
//!
//! Owns: deciding, from a rule's pattern alone, which literals every match
//! starts with, and running the rule's regex anchored at their
//! occurrences. Must never: report a match the unanchored search would not
//! report, or miss one it would (see [`AnchoredRule::plan`] for why the two
//! agree).

use std::sync::OnceLock;

use regex_automata::util::captures::Captures;
use regex_automata::util::syntax;
use regex_automata::{meta, Anchored, Input, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};

/// Most start literals a rule may have: each is one more keyword in the
/// automaton.
const MAX_STARTS: usize = 64;
/// Shortest start literal: a one-byte literal would occur everywhere.
const MIN_START_LEN: usize = 2;
/// Start literals are cut to this length (a prefix of every match's start
/// is still one), which keeps them no longer than the longest keyword, so
/// the keyword walk's warm-up does not grow.
const MAX_START_LEN: usize = 20;
/// A byte class with more members than this ends a literal.
const MAX_CLASS_BYTES: usize = 4;

/// The lazy DFA's cache, as the `regex` crate sets it by default.
const HYBRID_CACHE_BYTES: usize = 2 << 20;

/// A rule whose matches all start with one of `starts`.
pub struct AnchoredRule {
    /// Lowercase ASCII literals (other bytes as they are): every match of
    /// the pattern begins with one of them, compared ASCII
    /// case-insensitively, as the keyword automaton finds them.
    pub starts: Vec<Vec<u8>>,
    pattern: String,
    size_limit: usize,
    /// Compiled on first use, with the flags the engine compiles the rule's
    /// own regex with; `None` if that fails (the caller then searches as
    /// before).
    re: OnceLock<Option<meta::Regex>>,
}

/// The syntax flags of a built-in rule: `regex::bytes::RegexBuilder` with
/// `unicode(false)` (it also sets `utf8(false)` for byte regexes).
fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

impl AnchoredRule {
    /// A plan for a built-in pattern (compiled with `unicode(false)` and
    /// `size_limit`), when every match of it starts with one of at most
    /// [`MAX_STARTS`] literals of at least [`MIN_START_LEN`] bytes.
    ///
    /// Why anchored searches at those literals' occurrences give exactly
    /// the matches of the unanchored iteration: the unanchored search from
    /// `at` returns, among matches starting at or after `at`, the one with
    /// the leftmost start, and at that start the one the pattern prefers;
    /// an anchored search at `c` returns the preferred match starting at
    /// `c` (look-behind still reads the byte before `c`). Every match starts
    /// at an occurrence of a start literal, so trying the occurrences at or
    /// after `at` in increasing order, the first anchored search that
    /// succeeds is at the leftmost start, and returns the same match.
    pub fn plan(pattern: &str, size_limit: usize) -> Option<AnchoredRule> {
        let hir = syntax::parse_with(pattern, &syntax_config()).ok()?;
        let starts = match_starts(&hir)?;
        Some(AnchoredRule {
            starts,
            pattern: pattern.to_string(),
            size_limit,
            re: OnceLock::new(),
        })
    }

    pub fn regex(&self) -> Option<&meta::Regex> {
        self.re
            .get_or_init(|| {
                // What `regex::bytes::RegexBuilder::build` configures.
                let config = meta::Config::new()
                    .nfa_size_limit(Some(self.size_limit))
                    .hybrid_cache_capacity(HYBRID_CACHE_BYTES)
                    .match_kind(MatchKind::LeftmostFirst)
                    .utf8_empty(false);
                meta::Builder::new()
                    .configure(config)
                    .syntax(syntax_config())
                    .build(&self.pattern)
                    .ok()
            })
            .as_ref()
    }
}

/// One match of an anchored search: the whole match and the span of the
/// first capture group that took part (as the engine reads `group`).
pub struct Found {
    pub start: usize,
    pub end: usize,
    pub group: Option<(usize, usize)>,
}

/// The first match, trying each candidate start `c` of `cands[*next..]`
/// (`(rule, c)` pairs of one rule, sorted) that is at or after `at`;
/// `*next` moves past the candidates tried. With `group == 0` no capture
/// engine runs.
pub fn next_match(
    re: &meta::Regex,
    caps: &mut Option<Captures>,
    v: &[u8],
    cands: &[(usize, usize)],
    next: &mut usize,
    at: usize,
    group: usize,
) -> Option<Found> {
    while let Some(&(_, c)) = cands.get(*next) {
        *next += 1;
        if c < at || c > v.len() {
            continue;
        }
        let input = Input::new(v).span(c..v.len()).anchored(Anchored::Yes);
        if group == 0 {
            if let Some(m) = re.search(&input) {
                return Some(Found {
                    start: m.start(),
                    end: m.end(),
                    group: Some((m.start(), m.end())),
                });
            }
            continue;
        }
        let caps = caps.get_or_insert_with(|| re.create_captures());
        re.search_captures(&input, caps);
        if let Some(m) = caps.get_match() {
            let g = (1..caps.group_len())
                .find_map(|g| caps.get_group(g))
                .map(|s| (s.start, s.end));
            return Some(Found {
                start: m.start(),
                end: m.end(),
                group: g,
            });
        }
    }
    None
}

/// Literals every match of `hir` starts with (see [`AnchoredRule::plan`]),
/// or `None` when they cannot be bounded.
pub fn match_starts(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let (mut set, _) = starts(hir)?;
    for s in set.iter_mut() {
        s.truncate(MAX_START_LEN);
    }
    set.sort();
    set.dedup();
    // A literal that another extends is enough: occurrences of the longer
    // one are occurrences of the shorter one too.
    let all = set.clone();
    set.retain(|s| !all.iter().any(|t| t != s && s.starts_with(t)));
    // Two hex digits (`dd`, `fc`) occur in every id and digest: as
    // keywords they would cost the walk more than the anchoring saves.
    let frequent = |s: &Vec<u8>| s.len() == MIN_START_LEN && s.iter().all(u8::is_ascii_hexdigit);
    (!set.is_empty()
        && set.len() <= MAX_STARTS
        && set.iter().all(|s| s.len() >= MIN_START_LEN && !frequent(s)))
    .then_some(set)
}

/// `(set, exact)`: every match of `h` starts with one of `set` (ASCII
/// lowercased); with `exact`, every match *is* one of `set`, so what
/// follows in a concatenation extends the literals.
fn starts(h: &Hir) -> Option<(Vec<Vec<u8>>, bool)> {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Some((vec![Vec::new()], true)),
        HirKind::Literal(l) => Some((vec![l.0.to_ascii_lowercase()], true)),
        HirKind::Class(c) => {
            let mut bytes: Vec<u8> = Vec::new();
            match c {
                Class::Bytes(b) => {
                    for r in b.ranges() {
                        if bytes.len() + (r.end() - r.start()) as usize >= MAX_CLASS_BYTES * 2 {
                            return None;
                        }
                        bytes.extend(r.start()..=r.end());
                    }
                }
                Class::Unicode(u) => {
                    for r in u.ranges() {
                        let (a, b) = (r.start() as u32, r.end() as u32);
                        if b > 0x7f || bytes.len() + (b - a) as usize >= MAX_CLASS_BYTES * 2 {
                            return None;
                        }
                        bytes.extend((a..=b).map(|x| x as u8));
                    }
                }
            }
            let mut set: Vec<Vec<u8>> =
                bytes.iter().map(|b| vec![b.to_ascii_lowercase()]).collect();
            set.sort();
            set.dedup();
            (!set.is_empty() && set.len() <= MAX_CLASS_BYTES).then_some((set, true))
        }
        HirKind::Repetition(r) => {
            if r.min == 0 {
                return None;
            }
            let (set, exact) = starts(&r.sub)?;
            Some((set, exact && r.min == 1 && r.max == Some(1)))
        }
        HirKind::Capture(c) => starts(&c.sub),
        HirKind::Concat(subs) => {
            let mut acc: Vec<Vec<u8>> = vec![Vec::new()];
            for sub in subs {
                let Some((set, exact)) = starts(sub) else {
                    return Some((acc, false));
                };
                if acc.len() * set.len() > MAX_STARTS * 4
                    || acc.iter().all(|a| a.len() >= MAX_START_LEN)
                {
                    return Some((acc, false));
                }
                acc = acc
                    .iter()
                    .flat_map(|a| {
                        set.iter().map(move |s| {
                            let mut x = a.clone();
                            x.extend_from_slice(s);
                            x
                        })
                    })
                    .collect();
                if !exact {
                    return Some((acc, false));
                }
            }
            Some((acc, true))
        }
        HirKind::Alternation(subs) => {
            let mut all = Vec::new();
            let mut exact = true;
            for sub in subs {
                let (set, e) = starts(sub)?;
                exact &= e;
                all.extend(set);
                if all.len() > MAX_STARTS * 4 {
                    return None;
                }
            }
            Some((all, exact))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(p: &str) -> Option<Vec<String>> {
        let hir = syntax::parse_with(p, &syntax_config()).ok()?;
        match_starts(&hir).map(|v| {
            v.into_iter()
                .map(|s| String::from_utf8(s).unwrap())
                .collect()
        })
    }

    #[test]
    fn starts_of_patterns() {
        assert_eq!(
            plan(r"(?i)\b(?:login|user(?:name)?)\b\s*x"),
            Some(vec!["login".into(), "user".into()])
        );
        assert_eq!(
            plan(r"sk-(?:proj|admin)-[a-z]{4}"),
            Some(vec!["sk-admin-".into(), "sk-proj-".into()])
        );
        // A possibly empty or wide start has no literal.
        assert_eq!(plan(r"[A-Za-z0-9_]*password"), None);
        assert_eq!(plan(r"(?m)^[ \t]*password"), None);
        assert_eq!(plan(r"(?i)\bab|[0-9]x"), None);
        // One-byte starts, and two hex digits, are too frequent to key on.
        assert_eq!(plan(r"a[0-9]+"), None);
        assert_eq!(plan(r"(?i)f[cd][0-9a-f]{2}:"), None);
        // `(?i)` classes fold to one lowercase literal; `[Pp]` too.
        assert_eq!(
            plan(r"(?i)aws\s+x|[Pp]W:"),
            Some(vec!["aws".into(), "pw:".into()])
        );
    }

    /// Every built-in rule with a plan: anchored searches at the start
    /// literals' occurrences give exactly the unanchored iteration's
    /// matches and groups, on texts built to put matches, near-matches and
    /// start literals next to each other.
    #[test]
    fn anchored_iteration_equals_full_iteration() {
        let defs = crate::rules::builtin();
        let mut planned = 0;
        let mut compared = 0;
        for def in &defs {
            let Some(plan) = AnchoredRule::plan(def.pattern, 8 << 20) else {
                continue;
            };
            planned += 1;
            let full = regex::bytes::RegexBuilder::new(def.pattern)
                .unicode(false)
                .size_limit(8 << 20)
                .build()
                .unwrap();
            let re = plan.regex().expect("plan compiles");
            for text in texts(def, &plan.starts) {
                compared += 1;
                let want = full_iter(&full, &text, def.group);
                let got = anchored_iter(re, &plan.starts, &text, def.group);
                assert_eq!(
                    got,
                    want,
                    "{}: {:?}",
                    def.id,
                    String::from_utf8_lossy(&text)
                );
            }
        }
        assert!(planned >= 20, "only {planned} rules planned");
        assert!(compared > 1000);
    }

    type Span = (usize, usize, Option<(usize, usize)>);

    fn full_iter(re: &regex::bytes::Regex, v: &[u8], group: usize) -> Vec<Span> {
        let mut out = Vec::new();
        let mut locs = re.capture_locations();
        let mut at = 0;
        while at <= v.len() {
            let Some(m) = re.captures_read_at(&mut locs, v, at) else {
                break;
            };
            at = if m.end() > m.start() {
                m.end()
            } else {
                m.end() + 1
            };
            let g = if group == 0 {
                Some((m.start(), m.end()))
            } else {
                (1..locs.len()).find_map(|g| locs.get(g))
            };
            out.push((m.start(), m.end(), g));
        }
        out
    }

    fn anchored_iter(re: &meta::Regex, starts: &[Vec<u8>], v: &[u8], group: usize) -> Vec<Span> {
        let lower = v.to_ascii_lowercase();
        let cands: Vec<(usize, usize)> = (0..v.len())
            .filter(|&i| starts.iter().any(|s| lower[i..].starts_with(s)))
            .map(|i| (0, i))
            .collect();
        let mut out = Vec::new();
        let (mut caps, mut next, mut at) = (None, 0, 0);
        while let Some(f) = next_match(re, &mut caps, v, &cands, &mut next, at, group) {
            at = if f.end > f.start { f.end } else { f.end + 1 };
            out.push((f.start, f.end, f.group));
        }
        out
    }

    /// Texts around a rule: its documented examples, its keywords and
    /// start literals in several cases, with values of several shapes
    /// after several separators, in prose, JSON and shell contexts, and
    /// the same texts with every other byte position cut out in turn.
    fn texts(def: &crate::rules::RuleDef, starts: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut seeds: Vec<String> = def.allow.iter().map(|s| s.to_string()).collect();
        let heads: Vec<String> = starts
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .chain(def.keywords.iter().map(|k| k.to_string()))
            .collect();
        let seps = [
            " ",
            "=",
            ": ",
            " is ",
            "\": \"",
            " -p ",
            " -u bob:",
            " configure set aws_secret_access_key ",
            " login -u bob -p ",
            "://bob:",
            " / ",
            "_",
            "-",
            "",
            ":",
            " --password ",
            " set ",
        ];
        let values = [
            "Xk9vQ2mT7pLs4RzW8nYb3cDe6fGh1JaK",
            "hunter2024!",
            "AKIAIOSFODNN7EXAMPL3",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9ab1c2d3",
            "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A",
            "10.1.2.3",
            "a.b",
            "",
        ];
        for h in &heads {
            for (i, sep) in seps.iter().enumerate() {
                let v = values[i % values.len()];
                seeds.push(format!("{h}{sep}{v}"));
                seeds.push(format!("x {} {h}{sep}{v} y", h.to_ascii_uppercase()));
                seeds.push(format!(
                    "{{\"k\":\"{h}{sep}{v}\",\"{h}\":\"{v}\"}} {h}{h}{sep}{v}"
                ));
            }
            seeds.push(format!(
                "user bob{h} / Secr3tPw9 and {h}login admin is x / Winter1998#"
            ));
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for s in &seeds {
            let b = s.as_bytes();
            out.push(b.to_vec());
            for cut in (0..b.len()).step_by(3) {
                let mut t = b[..cut].to_vec();
                t.extend_from_slice(&b[(cut + 1).min(b.len())..]);
                out.push(t);
            }
        }
        out
    }
}
