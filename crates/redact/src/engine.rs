//! The line scanner: prefilter, matchers, decoded views, allowlisted
//! transcript fields, and the placement of placeholders.
//!
//! Owns: turning one raw line into raw byte spans with a rule attached, and
//! rewriting a line from those spans. Must never: cut a line, split an escape
//! sequence, put a quote or backslash into the output, or keep a secret's
//! bytes anywhere but in the in-memory set of values to sweep for.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder};
use memchr::memmem::Finder;
use regex::bytes::Regex;

/// Substring searchers used on every line, built once (building a searcher
/// per call cost more than the search itself).
static F_REDACTED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"[REDACTED:"));
static F_BEGIN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"-----BEGIN "));
static F_MEMBER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\":\""));

/// The `":"` search keyed on its `:"` pair rather than the `":` pair
/// memchr picks by byte rank (which stops at every member, string or not),
/// and called directly rather than through the generic searcher, whose
/// per-call dispatch cost more than the search on short JSON texts.
#[cfg(target_arch = "x86_64")]
static MEMBER_PAIR: LazyLock<Option<memchr::arch::x86_64::avx2::packedpair::Finder>> =
    LazyLock::new(|| {
        let pair = memchr::arch::all::packedpair::Pair::with_indices(b"\":\"", 1, 2)?;
        memchr::arch::x86_64::avx2::packedpair::Finder::with_pair(b"\":\"", pair)
    });

/// Position of the next `":"` at or after `at`.
#[inline]
fn next_member(v: &[u8], at: usize) -> Option<usize> {
    let hay = &v[at..];
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = MEMBER_PAIR.as_ref() {
        if hay.len() >= f.min_haystack_len() {
            return f.find(hay, b"\":\"").map(|i| at + i);
        }
    }
    F_MEMBER.find(hay).map(|i| at + i)
}
static F_B64: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b";base64,"));
static F_TYPE_B64: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(br#""type":"base64""#));
static F_HOME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"/home/"));
static F_USERS: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"Users"));

/// The home-directory prefixes in `v` (`/home/`, `/Users/`, `\Users\`,
/// `/Users\`) as `(start, end)`, leftmost first and never overlapping.
/// Two memmem searches for the prefixes' rare parts: a search keyed on
/// their first byte stops at every `/` and `\`, which JSON-escaped
/// transcript text is full of.
fn home_prefixes(v: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    // The next `/home/` at or after `at`.
    let home = move |at: usize| F_HOME.find(&v[at..]).map(|p| (at + p, at + p + 6));
    // The next `/Users/`, `\Users\` or `/Users\` starting at or after `at`.
    let users = move |at: usize| {
        let mut q = at + 1;
        while q <= v.len() {
            let p = q + F_USERS.find(&v[q..])?;
            let after = v.get(p + 5).copied();
            if matches!(
                (v[p - 1], after),
                (b'/', Some(b'/' | b'\\')) | (b'\\', Some(b'\\'))
            ) {
                return Some((p - 1, p + 6));
            }
            q = p + 1;
        }
        None
    };
    // Each search's next candidate is kept while it lies at or after the
    // last match's end, so each search walks the line once.
    let mut at = 0;
    let (mut h, mut u) = (home(0), users(0));
    std::iter::from_fn(move || {
        if h.is_some_and(|(p, _)| p < at) {
            h = home(at);
        }
        if u.is_some_and(|(p, _)| p < at) {
            u = users(at);
        }
        let next = match (h, u) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        at = next.1;
        Some(next)
    })
}
static PLACEHOLDER_AC: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .build(PLACEHOLDER_MARKS)
        .ok()
});

/// Does `v` decode from base64 to at least six bytes of printable text?
pub fn base64_text(v: &[u8], buf: &mut Vec<u8>) -> bool {
    // A whole number of 4-byte groups (`is_multiple_of` needs Rust 1.87).
    v.len() & 3 == 0
        && b64_decode(v, buf, MAX_B64_DECODE)
        && buf.len() >= 6
        && buf
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) || matches!(b, b'\n' | b'\r' | b'\t'))
}

/// `ops_eyJzaWdu...`, `sk-proj-AbC…`, `tok_9f2c..[masked]`: a value cut
/// short with an ellipsis is quoted from elsewhere, not a usable credential
/// (the rest of it is what would work, and it is not there). Not applied to
/// passwords: a human password may end in dots.
fn is_elided(v: &[u8]) -> bool {
    v.ends_with(b"..") || v.ends_with("\u{2026}".as_bytes())
}

/// The bytes after a value start an ellipsis (`..`, `…`, see
/// [`is_elided`]) or a display mask (`#####`, `****`): the value shown is
/// the visible head of one kept elsewhere.
fn elided_after(rest: &[u8]) -> bool {
    rest.starts_with(b"..")
        || rest.starts_with("\u{2026}".as_bytes())
        || rest.starts_with(b"#####")
        || rest.starts_with(b"****")
}

/// The quoted "value" ends where a JSON member's name does (`"…":`): in
/// `{"command":"echo $PWD","description":"…"}` the tuple-like `"PWD","description"`
/// is the end of one string and the next member's name, not a name and its
/// value.
fn is_member_name(v: &[u8], e: usize) -> bool {
    v.get(e) == Some(&b'"') && v[e + 1..].trim_ascii_start().first() == Some(&b':')
}

/// `ENC[AES256_GCM,data:…,iv:…,tag:…,type:str]`: a value SOPS has
/// encrypted. Ciphertext is what a repository is meant to hold; the key
/// that opens it lives elsewhere.
fn is_sops_ciphertext(v: &[u8]) -> bool {
    v.starts_with(b"ENC[AES256_GCM,")
}

/// `sgp_5555555dAAAAA7777777CcccCFaaaaaaaaaaaaaa`: a run of ten or more
/// copies of one letter. A random token holds one about once in 10^10 per
/// position even in hex; a value typed to fill a slot often does. Digits
/// are left out: numeric groups (`xoxa-2-…-3111111111111-…`) legitimately
/// repeat, and `00000000` is a placeholder mark of its own.
fn has_long_run(v: &[u8]) -> bool {
    let mut run = 1;
    for w in v.windows(2) {
        run = if w[0] == w[1] && w[0].is_ascii_alphabetic() {
            run + 1
        } else {
            1
        };
        if run >= 10 {
            return true;
        }
    }
    false
}

/// `xoxp-1234-1234-1234-<hex>`: a Slack token whose id groups repeat one
/// number was typed to fill a slot — a workspace, a user and a token are
/// different ids. Slack's shape only: other providers' UUID-shaped keys
/// (`12345678-1234-1234-1234-…`) are how several peers write positives.
fn slack_repeated_ids(v: &[u8]) -> bool {
    if !(v.len() > 5 && v.starts_with(b"xox") && v[4] == b'-') {
        return false;
    }
    let mut prev: &[u8] = b"";
    v[5..].split(|&b| b == b'-').any(|g| {
        let repeated = !g.is_empty() && g == prev && g.iter().all(u8::is_ascii_digit);
        prev = g;
        repeated
    })
}

/// `eyJ….eyJ….signature`: a JWT whose signature segment is a lowercase
/// word was written by hand for an example. A real signature is base64url
/// of 32 or more bytes (an unsigned token has an empty one, still a token).
fn jwt_word_signature(v: &[u8]) -> bool {
    if !v.starts_with(b"eyJ") {
        return false;
    }
    let Some(dot) = v.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    let sig = &v[dot + 1..];
    (1..16).contains(&sig.len()) && sig.iter().all(u8::is_ascii_lowercase)
}

/// `…TokenHere`, `RANDOMSTRINGHERE`: a slot to fill in.
fn ends_with_here(v: &[u8]) -> bool {
    v.len() >= 4 && v[v.len() - 4..].eq_ignore_ascii_case(b"here")
}

fn has_placeholder_mark(v: &[u8]) -> bool {
    PLACEHOLDER_AC.as_ref().is_none_or(|ac| ac.is_match(v))
}

use crate::groups::{GroupCache, LazyGroups, Resolved};
use crate::keywords::{Keywords, KwMatch, LaneBufs};
use crate::reach::{ByteSet, LazyStops};
use crate::rules::{Check, Class, Severity};
use crate::timing;
use crate::view::Views;

/// Values shorter than this are not swept for elsewhere in the text: short
/// strings collide with ordinary words, and every rule that finds short
/// values (identity, passwords) already finds each occurrence by itself.
pub const MIN_REPEAT_LEN: usize = 8;

/// Base64 payloads after `data:` are decoded and scanned only up to this
/// many bytes: enough for any credential file, bounded so a large embedded
/// blob cannot multiply the work per byte.
pub const MAX_B64_DECODE: usize = 64 * 1024;

/// A PEM block is searched for its END marker at most this far after its
/// BEGIN marker (a 16 KiB RSA key is ~12 KiB of base64). Bounds the work per
/// BEGIN so many unterminated markers stay linear.
pub const MAX_PEM_BYTES: usize = 32 * 1024;

/// After a BEGIN marker with no END on its line, at most this many following
/// lines are consumed as key body (an 8192-bit key is ~100 lines).
pub const MAX_PEM_LINES: usize = 512;

/// Fewer key characters than this between `BEGIN` and `END` is an empty
/// frame (documentation), not a key.
const MIN_PEM_BODY: usize = 16;

/// Allowlisted values at least this long are cut out of the scan rather
/// than scanned and filtered: signatures and images run to kilobytes.
pub const SKIP_SCAN_MIN: usize = 128;

/// Prefixed tokens whose bytes are this repetitive are documentation
/// placeholders (`ghp_xxxx…`); real tokens sit near 5 bits per byte.
pub const MIN_TOKEN_ENTROPY: f64 = 2.5;

/// What a rule is, as far as placement and reporting go.
pub struct Meta {
    /// Shared with every finding that names this rule (a finding copies
    /// no string: every transcript line has one).
    pub id: std::sync::Arc<str>,
    pub kind: std::sync::Arc<str>,
    pub severity: Severity,
    pub class: Class,
    pub placeholder: Vec<u8>,
}

/// A rule's regex. A built-in one is compiled the first time its rule
/// runs: compiling every built-in pattern up front was most of the 25 ms a
/// scanner took to build in every process that builds one (each drain,
/// each `abcd redact`), and a short transcript runs few of them. A
/// repository's own patterns are compiled at once, so a bad one degrades
/// the scanner before it redacts anything.
pub struct LazyRegex {
    pattern: Option<&'static str>,
    cell: std::sync::OnceLock<Regex>,
}

impl LazyRegex {
    /// A built-in pattern, compiled on first use by [`compile_builtin`].
    pub fn builtin(pattern: &'static str) -> LazyRegex {
        LazyRegex {
            pattern: Some(pattern),
            cell: std::sync::OnceLock::new(),
        }
    }

    /// A regex already compiled.
    pub fn ready(re: Regex) -> LazyRegex {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(re);
        LazyRegex {
            pattern: None,
            cell,
        }
    }

    pub fn get(&self) -> &Regex {
        self.cell.get_or_init(|| {
            let _t = timing::span(timing::Phase::Compile);
            let p = self.pattern.unwrap_or_default();
            // Every built-in pattern compiles with exactly these settings:
            // `tests::every_builtin_pattern_compiles`.
            compile_builtin(p)
                .unwrap_or_else(|e| panic!("built-in pattern {p:?} does not compile: {e}"))
        })
    }
}

/// Compiled-size cap for built-in patterns (generous; they are ours).
pub const BUILTIN_PATTERN_BYTES: usize = 8 << 20;

/// How every built-in pattern is compiled. ASCII-only: no built-in needs
/// Unicode classes or word boundaries, and Unicode `\b` sends the regex
/// crate's DFA to its slow engines on every non-ASCII line.
pub fn compile_builtin(pattern: &str) -> Result<Regex, regex::Error> {
    regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(BUILTIN_PATTERN_BYTES)
        .build()
}

/// A built-in pattern's syntax tree, parsed with [`compile_builtin`]'s
/// settings (ASCII classes, any bytes), for the analyses that read it
/// (`reach`, `groups`).
pub fn parse_builtin(pattern: &str) -> Option<regex_syntax::hir::Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()
}

/// Where every match of a keyword-anchored rule starts
/// (`rules::ANCHORED_RULES`), relative to the occurrences of its keywords
/// that the automaton reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Anchor {
    /// Where one of its keywords starts (`\b(?:password|passwd|…)…`).
    Keyword,
    /// Within the run of name bytes (`[A-Za-z0-9_.-]`) that ends where one
    /// of its keywords starts: at the run's first byte (the rule's
    /// `[A-Za-z0-9_.-]*KEYNAME…`, which can start anywhere in the run, so a
    /// match starting later in it means one starting at its first byte), at
    /// a `--` in it (`--password V`), or at the keyword
    /// (`\bsshpass -p V`).
    NameRun,
    /// At the text's first byte, or at a byte no name holds (not
    /// `[A-Za-z0-9_.$-]`) just before a letter (`provider-named`: the
    /// provider's name opens the match after such a byte), before the last
    /// of its keywords.
    WordStart,
    /// At the last run of word bytes (`[A-Za-z0-9_]`) of one of the
    /// `tokens` whitespace-separated tokens before one of its keywords
    /// (`\bdocker\s+login`, `\bhelm\s+registry\s+login`, `\baws\s+configure`,
    /// `\bmachine\s+HOST\s+login\s+USER\s+password`: a `\b` word that a
    /// token ends with), or, with `line_start`, where the blanks before a
    /// keyword begin a line (`(?m)^[ \t]*password`).
    TokensBefore { tokens: u8, line_start: bool },
}

/// The candidates of [`Anchor::TokensBefore`] for the keyword at `k`.
fn tokens_before(hay: &[u8], k: usize, tokens: u8, line_start: bool, out: &mut Vec<usize>) {
    if line_start {
        let mut r = k;
        while r > 0 && matches!(hay[r - 1], b' ' | b'\t') {
            r -= 1;
        }
        if r == 0 || hay[r - 1] == b'\n' {
            out.push(r);
        }
    }
    let mut e = k;
    for _ in 0..tokens {
        // The blanks, then the token, before `e`.
        let mut t = e;
        while t > 0 && is_ascii_space(hay[t - 1]) {
            t -= 1;
        }
        if t == e && e != k {
            break;
        }
        let end = t;
        let mut w = end;
        while w > 0 && is_word_byte(hay[w - 1]) {
            w -= 1;
        }
        if w < end {
            out.push(w);
        }
        while t > 0 && !is_ascii_space(hay[t - 1]) {
            t -= 1;
        }
        e = t;
    }
}

/// A keyword-anchored rule's regex, compiled on first use with the
/// settings of [`compile_builtin`] (the same engine, which the `regex`
/// crate wraps without an anchored search).
///
/// Why: a rule's regex otherwise searches its whole segment (or zone) from
/// the start; the lazy DFA walks every byte before the match, then walks
/// the match again backwards to find where it starts. Anchored at the few
/// places a match can start, a search reads only the match (or the few
/// bytes that refute one) and needs no reverse pass. On the varied corpus
/// these rules matched at nearly every search: that walk was their cost.
pub struct AnchoredRegex {
    pub anchor: Anchor,
    pattern: &'static str,
    cell: std::sync::OnceLock<regex_automata::meta::Regex>,
}

/// [`compile_builtin`]'s settings, for the `regex_automata` engine itself
/// (as `regex::bytes::RegexBuilder` sets them).
pub fn compile_anchored(
    pattern: &str,
) -> Result<regex_automata::meta::Regex, Box<regex_automata::meta::BuildError>> {
    use regex_automata::{meta, util::syntax, MatchKind};
    meta::Builder::new()
        .configure(
            meta::Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                .utf8_empty(false)
                .nfa_size_limit(Some(BUILTIN_PATTERN_BYTES))
                .hybrid_cache_capacity(2 << 20),
        )
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .build(pattern)
        .map_err(Box::new)
}

/// Is `b` a byte of [`Anchor::NameRun`]'s runs (`[A-Za-z0-9_.-]`)?
fn is_name_run_byte(b: u8) -> bool {
    is_word_byte(b) || b == b'.' || b == b'-'
}

impl AnchoredRegex {
    pub fn builtin(anchor: Anchor, pattern: &'static str) -> AnchoredRegex {
        AnchoredRegex {
            anchor,
            pattern,
            cell: std::sync::OnceLock::new(),
        }
    }

    pub fn get(&self) -> &regex_automata::meta::Regex {
        self.cell.get_or_init(|| {
            let _t = timing::span(timing::Phase::Compile);
            let p = self.pattern;
            compile_anchored(p)
                .unwrap_or_else(|e| panic!("built-in pattern {p:?} does not compile: {e}"))
        })
    }

    /// The leftmost-first match of the rule in `hay` that starts in
    /// `at..stop`, as an unanchored search of `hay` from `at` finds it,
    /// given `starts`: the start offsets of every occurrence of the rule's
    /// keywords in `hay`, ascending. With `slots` (of
    /// [`AnchoredRegex::slot_len`]) the groups are resolved into it.
    ///
    /// Exact because every match starts at a candidate (see [`Anchor`]):
    /// the candidates are tried in ascending order, each with an anchored
    /// search, so the first that matches is the leftmost start, and an
    /// anchored search there finds the same (leftmost-first) match as the
    /// unanchored one.
    pub fn find(
        &self,
        hay: &[u8],
        at: usize,
        stop: usize,
        starts: &[usize],
        slots: Option<&mut [Option<regex_automata::util::primitives::NonMaxUsize>]>,
        cands: &mut Vec<usize>,
    ) -> Option<(usize, usize)> {
        use regex_automata::{Anchored, Input};
        let re = self.get();
        // A zone's `hay` ends before some of the segment's keywords; a match
        // in `hay` holds none of those, and a candidate too many only costs
        // a search.
        let lo = starts.partition_point(|&k| k < at);
        let hi = starts.partition_point(|&k| k <= hay.len());
        let starts = &starts[lo..hi.max(lo)];
        let cands: &[usize] = match self.anchor {
            Anchor::Keyword => starts,
            Anchor::NameRun => {
                cands.clear();
                for &k in starts {
                    let mut r = k;
                    while r > at && is_name_run_byte(hay[r - 1]) {
                        r -= 1;
                    }
                    cands.push(r);
                    cands.extend(
                        memchr::memchr_iter(b'-', &hay[r..k])
                            .map(|i| r + i)
                            .filter(|&i| hay.get(i + 1) == Some(&b'-')),
                    );
                    cands.push(k);
                }
                cands.sort_unstable();
                cands.dedup();
                cands
            }
            Anchor::TokensBefore { tokens, line_start } => {
                cands.clear();
                for &k in starts {
                    tokens_before(hay, k, tokens, line_start, cands);
                }
                cands.retain(|&c| c >= at);
                cands.sort_unstable();
                cands.dedup();
                cands
            }
            Anchor::WordStart => {
                cands.clear();
                let &last = starts.last()?;
                let name = |b: u8| is_name_run_byte(b) || b == b'$';
                let end = last.min(stop).min(hay.len().saturating_sub(1));
                if at == 0 && !hay.is_empty() {
                    cands.push(0);
                }
                cands.extend(
                    (at.max(1)..end).filter(|&q| !name(hay[q]) && hay[q + 1].is_ascii_alphabetic()),
                );
                cands
            }
        };
        let mut slots = slots;
        for &c in cands {
            if c >= stop || c > hay.len() {
                return None;
            }
            let input = Input::new(hay).range(c..).anchored(Anchored::Yes);
            let m = match slots.as_deref_mut() {
                Some(sl) => re.search_slots(&input, sl).and_then(|_| {
                    let (s, e) = (sl[0]?, sl[1]?);
                    Some((s.get(), e.get()))
                }),
                None => re.search(&input).map(|m| (m.start(), m.end())),
            };
            if m.is_some() {
                return m;
            }
        }
        None
    }

    /// How many slots [`AnchoredRegex::find`] fills: two per group, the
    /// whole match's first.
    pub fn slot_len(&self) -> usize {
        self.get().group_info().slot_len()
    }
}

pub enum Matcher {
    Regex {
        re: LazyRegex,
        group: usize,
        check: Check,
        min_entropy: f64,
        allow: Vec<Vec<u8>>,
        /// Bytes no match holds past its first byte (see `reach`): lets
        /// verify re-run the rule only between two of them around the
        /// placeholders.
        stops: LazyStops,
        /// For a keyword-anchored rule (`rules::ANCHORED_RULES`): the
        /// same pattern, searched only where a match can start.
        anchored: Option<Box<AnchoredRegex>>,
        /// For a built-in rule with a group: the pattern cut so a match's
        /// group is found without the capture engine (see `groups`).
        groups: Option<Box<LazyGroups>>,
    },
    Pem,
    OtherHome,
    DataUri,
}

pub struct Rule {
    pub meta: usize,
    pub matcher: Matcher,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Needle {
    /// The caller's home directory; `single` when it has one path segment
    /// (`/root`), which tightens the leading boundary.
    Home {
        single: bool,
    },
    Word,
    Email,
}

/// How a transcript line's working directory member opens.
pub const CWD_MEMBER: &[u8] = b"\"cwd\":\"";

pub struct IdentitySet {
    /// (needle kind, meta index) per identity string.
    pub needles: Vec<(Needle, usize)>,
    /// The home directory's spellings (as given, and with `/` spelled `-`)
    /// and their meta, for [`Engine::home_edits`].
    pub homes: Vec<(Vec<u8>, usize)>,
}

/// Where a scanned slice sits: decoded layer `k` (0 = raw) at offset `base`.
#[derive(Clone, Copy)]
pub struct L {
    k: usize,
    base: usize,
}

/// A hit on one raw line: half-open byte span and the meta it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub start: usize,
    pub end: usize,
    pub meta: usize,
}

pub struct Engine {
    pub metas: Vec<Meta>,
    pub rules: Vec<Rule>,
    /// Keyword automaton; pattern i triggers `kw_rules[i]`.
    pub keywords: Keywords,
    pub kw_rules: Vec<Vec<usize>>,
    /// Keyword i is also identity needle(s) `kw_identity[i]`.
    pub kw_identity: Vec<Vec<usize>>,
    /// Rules with no keyword: always run.
    pub always: Vec<usize>,
    pub identity: IdentitySet,
    pub allow_values: Vec<Vec<u8>>,
    pub allow_paths: Vec<Vec<u8>>,
    pub repeat_meta_base: usize,
    /// Every rule's documented provider examples and the values in
    /// `rules::PUBLISHED_VALUES`: never a finding under any rule (a generic
    /// `api_key = <stripe doc key>` is still the doc key).
    pub examples: Vec<Vec<u8>>,
    /// Index of the MAC-address rule: it has no keyword, so a cheap shape
    /// check (`hh:hh:` or `hh-hh-`) gates it instead.
    pub mac_rule: usize,
    /// Index of the private-IPv6 rule, gated by the shape check in `shape_gates` likewise.
    pub ipv6_rule: usize,
    /// Per rule: it has no keyword and runs only on a segment holding one
    /// of `rules::NON_ASCII_WORDS` (`rules::NON_ASCII_RULES`).
    pub non_ascii: Vec<bool>,
    /// The caller's home: other-home never claims it (it becomes `~`).
    pub home: Option<Vec<u8>>,
    /// Per rule: the check a keyword occurrence must pass to trigger it
    /// (see [`Gate`]).
    pub gates: Vec<Gate>,
    /// Keyword i triggers assignment-gated rules unconditionally: it anchors
    /// one of their alternatives that is not `NAME … = value` (`mysql … -p`,
    /// `sshpass -p`, `--pass value`).
    pub kw_ungated: Vec<bool>,
    /// Per rule: searched only around its keyword occurrences, between
    /// stop bytes (see [`keyword_windows`]). Only rules every match of
    /// which holds one of their keywords (`rules::WINDOWED_RULES`).
    pub windowed: Vec<bool>,
    /// Per rule: searched with its [`AnchoredRegex`] at the places its
    /// matches can start (set for the rules that have one; tests clear it
    /// to compare with whole searches).
    pub anchored: Vec<bool>,
    /// Per rule: a bare value of a setting that starts its line runs to the
    /// line's end (see [`setting_value_end`]; the two key-assignment
    /// rules, `rules::LINE_END_VALUE_RULES`).
    pub line_end_values: Vec<bool>,
    /// Per rule: a value opening a quoted string with a blank in it runs to
    /// the closing quote (see [`quoted_value_end`]; `rules::QUOTED_VALUE_RULES`).
    pub quoted_values: Vec<bool>,
}

/// A cheap look at the bytes around a keyword occurrence that can prove
/// the rule's matcher finds nothing in a segment where every occurrence of
/// its keywords fails it. Each variant says why skipping is exact; a rule
/// whose keyword occurrences all fail is not run, so a gate that is too
/// strict would lose findings — the tests compare each gate with its
/// matcher on adversarial texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Every occurrence triggers the rule.
    None,
    /// Keyword-assignment rules (`generic-secret`, `generic-password`),
    /// with the shortest value their pattern accepts: see [`AssignGate`].
    Assign(usize),
    /// `credential-url`: every match is `scheme://user:password@host`, so
    /// between the end of its `://` and its `@` there is a `:` and none of
    /// the bytes the user and password classes exclude (ASCII whitespace,
    /// `/`, `@`, quotes, `<`, `>`, backquote; `:` is allowed in the
    /// password). The first such byte after the `://` must be that `@`.
    /// Each walk stops at the next `/`, so walks never overlap.
    UserinfoAt,
    /// `other-home`: its matcher skips the caller's own home (at the same
    /// start, with no alphanumeric byte after it), and each of its matches
    /// begins at an occurrence of one of its keywords (the matcher's
    /// case-sensitive prefixes are the keywords' spellings). Every
    /// transcript line's `cwd` holds the caller's home; only other
    /// occurrences need the matcher.
    NotOwnHome,
    /// `provider-named`: its keywords are each closing secret word with the
    /// byte after it, and every match continues from there with separator
    /// bytes (quotes, spaces, `:`, `=`, `>`, `-`) and a value of this many
    /// bytes of its class starting with a letter or digit. Prose (`the
    /// secret is wrong`) fails here without running the regex.
    ValueAfter(usize),
    /// `named-secret-prose`, `named-password-prose`: [`Gate::Upper`], and
    /// the name run the occurrence is in (`[A-Za-z0-9_]`) is followed by
    /// an optional quote, blanks and `is`, `was`, `to` or `=` and a blank
    /// (`JWT_SECRET is V`); a `.env` line's `API_TOKEN=V` fails here. See
    /// [`prose_link_follows`].
    UpperLink,
    /// `table-row-secret`: every match is a row's first cell — a name run
    /// (`[A-Za-z0-9_.-]`) holding one of its keywords, after only blanks
    /// and an optional `|` since the start of the text, a `"` or a line
    /// end — followed by a `|` (past blanks) or by two blanks. Every
    /// transcript line holds `output_tokens`; only a name standing so
    /// needs the regex. See [`table_cell`].
    TableCell,
    /// `bare-secret-word-prose`: [`Gate::ValueAfter`], or `now` and a
    /// blank past blanks and then the value (`the token is now V`).
    ValueAfterNow(usize),
    /// `netrc-password`: both alternatives of its pattern hold `password`
    /// followed by `\s` (ASCII), its one keyword; an occurrence followed
    /// by anything else (`"password":`, `passwords`) cannot be part of a
    /// match.
    SpaceAfter,
    /// `registry-login-password`: every match holds `<tool>\s+login\b`,
    /// with `<tool>` one of these words (ASCII case-insensitive); the
    /// keyword is `login`, so an occurrence not preceded by ASCII
    /// whitespace and one of them, or followed by a word byte, is not in a
    /// match.
    AfterWord(&'static [&'static str]),
    /// `base64-encoded-secrets` (`echo`: true), `yaml-data-base64`: every
    /// match's value is a run of at least `min` bytes of `[A-Za-z0-9+/]`
    /// that starts right after an optional quote and ASCII whitespace
    /// after a `:` (or, with `echo`, after `echo` or `-n` and whitespace);
    /// the byte before the value is never of the run's class, so the value
    /// starts a maximal run. With `eol` (`yaml-data-base64`, whose value
    /// ends its line) the run is followed by at most two `=`, an optional
    /// quote, spaces or tabs and the end of the line. A segment with no
    /// such run cannot hold a match (looked for once per segment, when a
    /// rule first asks).
    Base64Value { min: usize, echo: bool, eol: bool },
    /// `session-cookie`: every match is `NAME=VALUE` with a session word
    /// (`sess`, `sid`, `auth`, `token`, `csrf`, `jwt`, `remember`, ASCII
    /// case-insensitive) in the name run (`[A-Za-z0-9_.-]`) that ends at
    /// the `=`, and eight value bytes that are not `;`, `,`, a quote or
    /// ASCII whitespace; its keyword (`cookie`) need not be in the match,
    /// so the whole segment is looked at, once.
    CookiePair,
    /// `login-slash-password`: every match holds `/` with, past ASCII
    /// whitespace, six bytes a password may hold (not whitespace, `/`, a
    /// quote or a backtick) after it and, past ASCII whitespace, a run of
    /// two or more `[A-Za-z0-9_.@-]` bytes before it, introduced by `:`,
    /// `=`, `is` or `are` — before the run past whitespace, or inside it
    /// after a word boundary. Its keywords (` / `, `/ `) need not be that
    /// slash, so the whole segment is looked at, once; a path's slashes
    /// fail (a run of path words follows a `/` or a quote).
    SlashPair,
    /// `byte-string-secret`: after its keyword `bytes` every match has
    /// ASCII whitespace then `=`; and before each of its keywords (`&str`,
    /// `&[u8`, `&'static`, `bytes`), past whitespace, a `:` and a name run
    /// (`[A-Za-z0-9_]`) holding a secret word (see [`secret_name_before`]):
    /// `fn f(s: &str)` fails here.
    BytesAssigned,
    /// `typed-secret-binding`: its keywords (`: string`, `= @"`) follow a
    /// name run holding a secret word, past whitespace.
    SecretNameBefore,
    /// `env-line-secret`, `env-line-password`: every match holds one of
    /// the pattern's upper-case words (`SECRET`, `TOKEN`, `PASSWORD`, …),
    /// each of which is a keyword; an occurrence with a lower-case letter
    /// (`"output_tokens"`, the `password` of a placeholder) is not that
    /// word.
    Upper,
    /// `prose-password`: every match is its word (`password`, `pw`, …, a
    /// keyword each) with no word byte before it (`\b`), or that word
    /// after `_` (the last word of a name, `MYSQL_ROOT_PASSWORD to S`,
    /// whose `_password` is a keyword too), and ASCII whitespace, `:`,
    /// `=` or `'s` (`’s`) right after it (the separators that follow).
    /// `passwords`, `password_hash` and the `password]` of a placeholder
    /// fail.
    WordThenSep,
    /// `login-with-pair`: every match holds one of its verbs (`login`,
    /// `sign in`, `log on`, …, a keyword each) followed by one space and
    /// `with`, `as`, `using`, `to` or `into`, or by `to` itself (`log
    /// into`), or preceded by `to ` (`use admin/S to log in`); an
    /// occurrence with none of those (`docker login -u`, `the login
    /// page`) is not that verb.
    LoginPair,
    /// `user-pass-words`: every match is `user|username|login|account`,
    /// then ASCII whitespace, at most one `:` or `=`, whitespace, a run of
    /// two or more `[A-Za-z0-9_.@-]` bytes, at most one `,` or `;`, and
    /// spaces ending in its keyword's (` pass `, ` pw:`, …). Walking back
    /// from the keyword over those spaces and that run, the word is inside
    /// the run or ends where the run's whitespace and operator begin;
    /// prose (`see the password policy`, `tests pass`) has neither.
    UserBefore,
    /// `lan-hostname`: every match ends with one of its keywords (`.local`,
    /// `.lan`, …), and a match is kept only when the byte after it is not
    /// a host byte (alphanumeric, `-`) and not a `.` followed by an
    /// alphanumeric byte (`settings.local.json`; see `Check::Host`).
    HostEnd,
}

/// Bytes of the base64 alphabet without padding (`[A-Za-z0-9+/]`).
fn is_b64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// Whether a base64 run ending at `k` ends its line as
/// `yaml-data-base64`'s value does: past at most two `=`, an optional
/// quote, spaces and tabs, the line's end.
fn ends_line_after(v: &[u8], mut k: usize) -> bool {
    let mut pad = 0;
    while pad < 2 && v.get(k) == Some(&b'=') {
        k += 1;
        pad += 1;
    }
    if matches!(v.get(k), Some(b'"' | b'\'')) {
        k += 1;
    }
    while matches!(v.get(k), Some(b' ' | b'\t')) {
        k += 1;
    }
    matches!(v.get(k), None | Some(b'\n'))
}

/// Whether `v` holds a [`Gate::Base64Value`] candidate: a maximal run of
/// at least `min` base64 bytes preceded, past an optional quote and ASCII
/// whitespace, by `:` (or, with `echo`, by whitespace after `echo`/`-n`).
///
/// Walked from the anchors, not over every byte: a run that qualifies
/// starts right after `:` (or `echo`/`-n`), spaces and one optional quote,
/// none of them base64 bytes, so the run that starts there is maximal and
/// every qualifying run is found from its anchor (memchr finds those).
fn b64_value(v: &[u8], min: usize, echo: bool, eol: bool) -> bool {
    // The run after the anchor ending at `at`: spaces (at least one when
    // `spaced`), an optional quote, then at least `min` base64 bytes that
    // (with `eol`) end the line past optional padding, quote and blanks.
    let run_after = |at: usize, spaced: bool| {
        let mut k = at;
        while k < v.len() && is_ascii_space(v[k]) {
            k += 1;
        }
        if spaced && k == at {
            return false;
        }
        if matches!(v.get(k), Some(b'"' | b'\'')) {
            k += 1;
        }
        let start = k;
        while k < v.len() && is_b64_byte(v[k]) {
            k += 1;
        }
        k - start >= min && (!eol || ends_line_after(v, k))
    };
    if memchr::memchr_iter(b':', v).any(|p| run_after(p + 1, false)) {
        return true;
    }
    // `echo` is found by its `c` (rarer in text than its other letters).
    echo && memchr::memchr3_iter(b'c', b'C', b'-', v).any(|p| {
        let (start, word): (usize, &[u8]) = if v[p] == b'-' {
            (p, b"-n")
        } else if p > 0 {
            (p - 1, b"echo")
        } else {
            return false;
        };
        let end = start + word.len();
        end <= v.len() && v[start..end].eq_ignore_ascii_case(word) && run_after(end, true)
    })
}

/// Whether the verb `v[start..end]` stands as [`Gate::LoginPair`] says.
fn login_pair_may(v: &[u8], start: usize, end: usize) -> bool {
    let starts_word =
        |rest: &[u8], w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    let after = &v[end..];
    let next_word = after.first() == Some(&b' ')
        && [&b"with"[..], b"as", b"using", b"to", b"into"]
            .iter()
            .any(|w| starts_word(&after[1..], w));
    let before = &v[..start];
    next_word
        || starts_word(after, b"to ")
        || (before.len() >= 3 && before[before.len() - 3..].eq_ignore_ascii_case(b"to "))
}

/// Whether the keyword starting at `k` (its first byte the last space
/// before `pass`/`pw`/…) stands as [`Gate::UserBefore`] says. A necessary
/// condition only: the run is taken whole (the pattern's may be its tail)
/// and the word is looked for anywhere in it, ignoring case.
fn user_before(v: &[u8], k: usize) -> bool {
    let words: [&[u8]; 4] = [b"user", b"username", b"login", b"account"];
    let mut p = k;
    while p > 0 && v[p - 1] == b' ' {
        p -= 1;
    }
    if p > 0 && matches!(v[p - 1], b',' | b';') {
        p -= 1;
    }
    let end = p;
    while p > 0 && is_user_byte(v[p - 1]) {
        p -= 1;
    }
    if end - p < 2 {
        return false;
    }
    let run = &v[p..end];
    let holds = |t: &[u8], w: &[u8]| t.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
    if words.iter().any(|w| holds(run, w)) {
        return true;
    }
    while p > 0 && is_ascii_space(v[p - 1]) {
        p -= 1;
    }
    if p > 0 && matches!(v[p - 1], b':' | b'=') {
        p -= 1;
        while p > 0 && is_ascii_space(v[p - 1]) {
            p -= 1;
        }
    }
    words
        .iter()
        .any(|w| p >= w.len() && v[p - w.len()..p].eq_ignore_ascii_case(w))
}

/// A byte of a user name or login as the login-pair rules spell it
/// (`[A-Za-z0-9_.@-]`).
fn is_user_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'-')
}

/// Whether `v` holds a [`Gate::SlashPair`] candidate.
fn slash_pair(v: &[u8]) -> bool {
    let pw = |b: u8| !(is_ascii_space(b) || matches!(b, b'/' | b'"' | b'\'' | b'`'));
    memchr::memchr_iter(b'/', v).any(|q| {
        let mut k = q + 1;
        while k < v.len() && is_ascii_space(v[k]) {
            k += 1;
        }
        if !(k + 6 <= v.len() && v[k..k + 6].iter().all(|&b| pw(b))) {
            return false;
        }
        let mut e = q;
        while e > 0 && is_ascii_space(v[e - 1]) {
            e -= 1;
        }
        let mut s = e;
        while s > 0 && is_user_byte(v[s - 1]) {
            s -= 1;
        }
        if e - s < 2 {
            return false;
        }
        let run = &v[s..e];
        // `is` or `are` inside the run (after a word boundary), two bytes
        // after it.
        let verb_at = |i: usize, w: &[u8]| {
            run.len() >= i + w.len() + 2
                && run[i..i + w.len()].eq_ignore_ascii_case(w)
                && (i == 0 || !is_word_byte(run[i - 1]))
        };
        if (0..run.len()).any(|i| verb_at(i, b"is") || verb_at(i, b"are")) {
            return true;
        }
        let mut k = s;
        while k > 0 && is_ascii_space(v[k - 1]) {
            k -= 1;
        }
        k > 0
            && (matches!(v[k - 1], b':' | b'=')
                || (k >= 2 && v[k - 2..k].eq_ignore_ascii_case(b"is"))
                || (k >= 3 && v[k - 3..k].eq_ignore_ascii_case(b"are")))
    })
}

/// Whether `v` holds a [`Gate::CookiePair`] candidate.
fn cookie_pair(v: &[u8]) -> bool {
    const WORDS: [&[u8]; 7] = [
        b"sess",
        b"sid",
        b"auth",
        b"token",
        b"csrf",
        b"jwt",
        b"remember",
    ];
    memchr::memchr_iter(b'=', v).any(|eq| {
        let value = v[eq + 1..]
            .iter()
            .take(8)
            .take_while(|&&b| !(is_ascii_space(b) || matches!(b, b';' | b'"' | b'\'' | b',')))
            .count();
        if value < 8 {
            return false;
        }
        let mut n = eq;
        while n > 0 && (v[n - 1].is_ascii_alphanumeric() || matches!(v[n - 1], b'_' | b'.' | b'-'))
        {
            n -= 1;
        }
        let name = &v[n..eq];
        WORDS
            .iter()
            .any(|w| name.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
    })
}

/// `\s+` then one of `words` (ASCII case-insensitive) ends right before
/// `at`, and the byte at `end` (if any) is not a word byte (`\b`).
fn word_before(v: &[u8], at: usize, end: usize, words: &[&str]) -> bool {
    if v.get(end).is_some_and(|&b| is_word_byte(b)) {
        return false;
    }
    let mut i = at;
    while i > 0 && is_ascii_space(v[i - 1]) {
        i -= 1;
    }
    i < at
        && words.iter().any(|w| {
            let w = w.as_bytes();
            i >= w.len() && v[i - w.len()..i].eq_ignore_ascii_case(w)
        })
}

/// A line's scan keeps copies of at most this many segment bytes for verify
/// to reuse: more would be a second line's worth of memory on a
/// newline-free file, and verify scans such long JSON lines in windows,
/// which cannot pair with stage one's segments anyway.
pub const MAX_REUSE_BYTES: usize = 1 << 20;

/// Per-call scratch, reused across lines so the hot loop does not allocate.
#[derive(Default)]
pub struct Scratch {
    views: Views,
    triggered: Vec<bool>,
    list: Vec<usize>,
    allowed: Vec<(usize, usize)>,
    b64: Vec<u8>,
    kw: Vec<KwMatch>,
    lanes: LaneBufs,
    /// Per entry of `list`: the stretch verify re-runs that rule on (see
    /// [`rule_zone`]), or `None` for the whole segment.
    zones: Vec<Option<(usize, usize)>>,
    /// Keyword occurrences of windowed and anchored rules: (rule, start,
    /// end).
    occ: Vec<(usize, usize, usize)>,
    windows: Vec<(usize, usize)>,
    /// An anchored rule's keyword starts, and its candidate starts.
    starts: Vec<usize>,
    cands: Vec<usize>,
    slots: Vec<Option<regex_automata::util::primitives::NonMaxUsize>>,
    /// Per rule: its group buffers, kept between runs.
    locs: Vec<Option<regex::bytes::CaptureLocations>>,
    /// Per rule: the caches of its `groups` DFAs.
    group_caches: Vec<Option<GroupCache>>,
    /// Keyword matches of every segment this scratch scanned on its current
    /// line, in scan order.
    pub cache: KwCache,
    /// Another scan's `cache` (verify gets stage one's), consulted by
    /// segment order; see [`Keywords::find_all_reusing`].
    pub prior: KwCache,
    /// Set on verify's scratch: nothing reads its cache, and on a
    /// newline-free file the copy would cost another line's worth of memory.
    pub no_record: bool,
    /// With `pre_kw_set`, set by the caller for the next scan only: the
    /// raw line's keyword matches, found by a walk over a block of lines
    /// (see `LineRedactor`); if the line is not JSON, the scan of the raw
    /// line takes them instead of walking it again.
    pub pre_kw: Vec<KwMatch>,
    pub pre_kw_set: bool,
    seg_index: usize,
    /// `views` hold the views of the text this scratch scanned last (set
    /// by a full scan, cleared at the start of every scan).
    views_valid: bool,
    /// The next scan uses `views` as they are (set by
    /// [`Scratch::derive_views`], consumed by that scan).
    prebuilt: bool,
    /// Per layer of the last full scan (recording scratches only): the
    /// allowlisted spans, whether the member walk met overlapping `":"`,
    /// and whether the layer was scanned as JSON at all.
    allowed_rec: Vec<AllowedRec>,
    /// With `prebuilt`: stage one's `allowed_rec` and the placeholder
    /// edits in each old layer's offsets, so the next scan derives its
    /// allowlisted spans too (see [`derive_allowed`]).
    prior_allowed: Vec<AllowedRec>,
    layer_edits: Vec<Vec<(usize, usize, usize)>>,
    /// Buffers reused across lines: [`derive_allowed`]'s windows, a
    /// layer's short allowlisted spans, the placeholders' spans.
    derive_windows: Vec<(usize, usize, isize)>,
    short: Vec<(usize, usize)>,
    placeholders: Vec<(usize, usize)>,
}

#[derive(Default)]
struct AllowedRec {
    spans: Vec<(usize, usize)>,
    overlap: bool,
    valid: bool,
}

/// Written out so that `clone_from` reuses `spans`' buffer (a derived
/// `Clone` replaces it with a fresh allocation on every line).
impl Clone for AllowedRec {
    fn clone(&self) -> AllowedRec {
        AllowedRec {
            spans: self.spans.clone(),
            overlap: self.overlap,
            valid: self.valid,
        }
    }

    fn clone_from(&mut self, source: &AllowedRec) {
        self.spans.clone_from(&source.spans);
        self.overlap = source.overlap;
        self.valid = source.valid;
    }
}

impl Scratch {
    /// Prepares the next scan, of the text `stage` scanned last with each
    /// `(start, end, put)` of `edits` replaced, to take its decoded views
    /// from `stage`'s instead of decoding again, when
    /// [`Views::derive`](crate::view::Views::derive) can do that exactly.
    pub fn derive_views(&mut self, stage: &Scratch, edits: &[(usize, usize, &[u8])]) {
        self.prebuilt = stage.views_valid
            && self
                .views
                .derive_recording(&stage.views, edits, &mut self.layer_edits);
        if self.prebuilt {
            self.prior_allowed.clone_from(&stage.allowed_rec);
        }
    }

    /// The allowlisted spans of the raw text this scratch scanned last, if
    /// it walked the raw text as JSON and [`derive_allowed`] can follow
    /// edits of it.
    pub fn raw_allowed(&self) -> Option<&[(usize, usize)]> {
        self.allowed_rec
            .first()
            .filter(|r| self.views_valid && r.valid && !r.overlap)
            .map(|r| &r.spans[..])
    }

    /// A scratch whose scans keep no keyword matches for reuse.
    pub fn not_recording() -> Scratch {
        Scratch {
            no_record: true,
            ..Scratch::default()
        }
    }
}

/// The keyword matches of the segments of one line's scan. Buffers are
/// reused line to line.
#[derive(Default)]
pub struct KwCache {
    segs: Vec<KwSeg>,
    used: usize,
    /// Segment bytes held by the first `used` entries.
    bytes: usize,
}

#[derive(Default)]
struct KwSeg {
    layer: usize,
    bytes: Vec<u8>,
    kws: Vec<KwMatch>,
    /// `shape_gates` of `bytes`.
    gates: (bool, bool),
    /// Known-value occurrences the sweep reported in `bytes`, and how many
    /// values it swept for.
    sweep: (usize, usize),
    /// Per regex rule run on `bytes`: the rule, and the first and last
    /// start of its matches that became hits (`u32::MAX, 0` for none).
    ran: Vec<(usize, u32, u32)>,
}

impl KwCache {
    fn clear(&mut self) {
        self.used = 0;
        self.bytes = 0;
    }

    fn record(&mut self, layer: usize, bytes: &[u8], kws: &[KwMatch], gates: (bool, bool)) {
        if self.used == self.segs.len() {
            self.segs.push(KwSeg::default());
        }
        let s = &mut self.segs[self.used];
        s.layer = layer;
        s.gates = gates;
        s.sweep = (usize::MAX, 0);
        s.bytes.clear();
        s.bytes.extend_from_slice(bytes);
        s.kws.clear();
        s.kws.extend_from_slice(kws);
        s.ran.clear();
        self.used += 1;
        self.bytes += bytes.len();
    }

    /// Sets the sweep result of the segment recorded last.
    fn set_last_sweep(&mut self, sweep: (usize, usize)) {
        if let Some(s) = self.used.checked_sub(1).and_then(|i| self.segs.get_mut(i)) {
            s.sweep = sweep;
        }
    }

    /// Records a regex rule's run on the segment recorded last.
    fn push_ran(&mut self, rule: usize, hits: (u32, u32)) {
        if let Some(s) = self.used.checked_sub(1).and_then(|i| self.segs.get_mut(i)) {
            s.ran.push((rule, hits.0, hits.1));
        }
    }

    fn get(&self, i: usize, layer: usize) -> Option<&KwSeg> {
        self.segs[..self.used].get(i).filter(|s| s.layer == layer)
    }
}

/// Sweep state for values already found (redact every later occurrence).
///
/// Values are at least [`MIN_REPEAT_LEN`] (8) bytes. Every value is indexed
/// by its four 4-byte grams at offsets 0, 1, 2 and 3; an occurrence starting
/// at `i` then contains, at the one position `j` in `i..i+4` that is a
/// multiple of [`GRAM_STRIDE`], the gram at offset `j - i` (it ends by
/// `i + 7`, inside the value). So the sweep probes only every fourth
/// position, and each occurrence is reported exactly once: from its own `j`,
/// through the one (value, offset) entry with offset `j - i`. A bit filter
/// over hashed grams rejects almost every probe with one load and one
/// multiply; survivors are checked against the values holding that gram.
/// Adding a value is O(1) — no automaton to rebuild as values arrive while
/// streaming.
#[derive(Default)]
pub struct Known {
    values: Vec<Vec<u8>>,
    metas: Vec<usize>,
    filter: Vec<u64>,
    /// log2 of the filter's size in bits (0 while empty).
    filter_log2: u32,
    /// gram -> the values holding it there.
    by_gram: std::collections::HashMap<u32, Vec<GramEntry>, GramHash>,
    /// Exact-value index, so adding a value twice is a no-op.
    by_value: std::collections::HashSet<Vec<u8>, GramHash>,
    /// Length of the longest value.
    max_len: usize,
}

/// Probe spacing of the sweep; see [`Known`]. Needs
/// `MIN_REPEAT_LEN >= GRAM_STRIDE + 3` so the probed gram lies in the value.
const GRAM_STRIDE: usize = 4;
// `next_candidate` reads two grams from one eight-byte word.
const _: () = assert!(GRAM_STRIDE == 4);
const _: () = assert!(MIN_REPEAT_LEN >= GRAM_STRIDE + 3);

/// Smallest gram filter, in bits (4 KiB: stays in L1 next to the line
/// being scanned, which is what makes the probe cheap).
const KNOWN_FILTER_MIN_LOG2: u32 = 15;
/// Largest gram filter, in bits (128 KiB: stays in L2, and with a few
/// thousand values fewer than 1% of probes reach the hash map).
const KNOWN_FILTER_MAX_LOG2: u32 = 20;
/// The filter grows (doubling, rebuilt from the grams) to keep at least
/// this many bits per distinct gram, i.e. a false-positive rate near 1/64.
const KNOWN_FILTER_BITS_PER_GRAM: usize = 64;

/// A value holding a gram: its index, the gram's offset in it, and its
/// first eight bytes, compared before the whole value (values sharing a
/// common head such as `ghp_` share its grams, and each probe of that
/// head would otherwise compare every one of them byte by byte).
#[derive(Clone, Copy)]
struct GramEntry {
    id: u32,
    off: u32,
    head: u64,
}
// Every value has a head of eight bytes.
const _: () = assert!(MIN_REPEAT_LEN >= 8);

/// Hashes [`Known`]'s grams and values: a multiply per word with a key
/// drawn once per process from the standard library's random source,
/// folded so that the bucket index (low bits) and the control byte (high
/// bits) both depend on every byte. SipHash was the larger part of each
/// lookup, one per probe that passes the filter and one per value a line
/// gives; the key keeps a text from choosing grams or values that share
/// one bucket without knowing it.
#[derive(Clone, Copy)]
pub struct GramHash(u64);

impl Default for GramHash {
    fn default() -> Self {
        static KEY: LazyLock<u64> = LazyLock::new(|| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(0x6b6e_6f77_6e5fu64)
        });
        GramHash(*KEY)
    }
}

impl std::hash::BuildHasher for GramHash {
    type Hasher = GramHasher;
    fn build_hasher(&self) -> GramHasher {
        GramHasher(self.0)
    }
}

pub struct GramHasher(u64);

impl std::hash::Hasher for GramHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.write_u64(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = words.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        // The tail's length in its top byte: `ab` and `ab\0` differ.
        self.write_u64(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 59));
    }

    fn write_u32(&mut self, k: u32) {
        self.write_u64(u64::from(k));
    }

    fn write_u64(&mut self, k: u64) {
        self.0 = (self.0 ^ k)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(23);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

#[inline(always)]
fn load_u64(v: &[u8], i: usize) -> u64 {
    let w: [u8; 8] = v[i..i + 8].try_into().expect("eight bytes");
    u64::from_le_bytes(w)
}

#[inline(always)]
fn load_u32(v: &[u8], i: usize) -> u32 {
    let w: [u8; 4] = v[i..i + 4].try_into().expect("four bytes");
    u32::from_le_bytes(w)
}

/// Gram `k`'s filter word (among `words`, a power of two) and bit. The
/// hash's top bits are cut at a fixed place, for the largest filter, and
/// a smaller one masks the word index: constant shifts and a mask, where a
/// shift by the filter's size put a load of the count on every probe.
#[inline(always)]
fn gram_slot(k: u32, words: usize) -> (usize, u32) {
    let h = k.wrapping_mul(0x9E37_79B1) >> (32 - KNOWN_FILTER_MAX_LOG2);
    ((h >> 6) as usize & (words - 1), h & 63)
}

/// The next probe position (a multiple of [`GRAM_STRIDE`], at or after
/// `from`) whose gram passes the filter. A separate, closure-free loop so
/// the gram stays in a register.
#[inline(never)]
fn next_candidate(v: &[u8], from: usize, filter: &[u64]) -> Option<usize> {
    // `filter.len()` is a power of two: `gram_slot`'s word index is in
    // bounds, and so no probe checks it.
    let words = filter.len();
    let hit = |g: u32| {
        let (w, b) = gram_slot(g, words);
        (filter[w] >> b) & 1 != 0
    };
    // Four probes per two eight-byte loads (the grams at `j`, `j + 4`,
    // `j + 8`, `j + 12`), tested together: one branch, the loads in flight
    // at once.
    let mut j = from;
    for c in v.get(from..).unwrap_or(&[]).chunks_exact(4 * GRAM_STRIDE) {
        let w = u64::from_le_bytes(c[..8].try_into().expect("eight bytes"));
        let x = u64::from_le_bytes(c[8..].try_into().expect("eight bytes"));
        let (a, b, c, d) = (
            hit(w as u32),
            hit((w >> 32) as u32),
            hit(x as u32),
            hit((x >> 32) as u32),
        );
        if a | b | c | d {
            let k = if a {
                0
            } else if b {
                1
            } else if c {
                2
            } else {
                3
            };
            return Some(j + k * GRAM_STRIDE);
        }
        j += 4 * GRAM_STRIDE;
    }
    while j + 4 <= v.len() {
        if hit(load_u32(v, j)) {
            return Some(j);
        }
        j += GRAM_STRIDE;
    }
    None
}

impl Known {
    /// Adds a value to sweep for; false when it is too short, holds a
    /// placeholder, or is already held.
    pub fn add(&mut self, v: &[u8], meta: usize) -> bool {
        if v.len() < MIN_REPEAT_LEN || F_REDACTED.find(v).is_some() || self.by_value.contains(v) {
            return false;
        }
        let id = self.values.len();
        self.max_len = self.max_len.max(v.len());
        self.by_value.insert(v.to_vec());
        self.values.push(v.to_vec());
        self.metas.push(meta);
        let mut fresh = Vec::with_capacity(GRAM_STRIDE);
        let head = load_u64(v, 0);
        for o in 0..GRAM_STRIDE {
            let k = load_u32(v, o);
            let e = self.by_gram.entry(k).or_default();
            if e.is_empty() {
                fresh.push(k);
            }
            e.push(GramEntry {
                id: id as u32,
                off: o as u32,
                head,
            });
        }
        let want = (self.by_gram.len() * KNOWN_FILTER_BITS_PER_GRAM)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(KNOWN_FILTER_MIN_LOG2, KNOWN_FILTER_MAX_LOG2);
        if want > self.filter_log2 {
            // Doubling keeps the rebuilds amortised O(1) per value.
            self.filter_log2 = want;
            self.filter = vec![0u64; (1usize << want) / 64];
            let keys: Vec<u32> = self.by_gram.keys().copied().collect();
            for k in keys {
                self.set_bit(k);
            }
        } else {
            for k in fresh {
                self.set_bit(k);
            }
        }
        true
    }

    fn set_bit(&mut self, k: u32) {
        let (w, b) = gram_slot(k, self.filter.len());
        self.filter[w] |= 1 << b;
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Length of the longest value.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Number of distinct values held; values are only ever added, so a
    /// count taken earlier marks where the newer ones start.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Kept for call sites that batch additions; the filter needs no rebuild.
    pub fn refresh(&mut self) {}

    /// Calls `f(start, end, meta)` for every occurrence of a known value
    /// (in no particular order; callers sort).
    pub fn find_all(&self, v: &[u8], f: impl FnMut(usize, usize, usize)) {
        self.find_all_from(v, 0, f)
    }

    /// As [`Known::find_all`], for the values added since [`Known::len`]
    /// was `first`.
    pub fn find_all_from(&self, v: &[u8], first: usize, f: impl FnMut(usize, usize, usize)) {
        self.sweep(v, first, v.len(), f)
    }

    /// As [`Known::find_all`], for the occurrences that start before
    /// `before` only (and possibly a few after it): the probes stop there,
    /// while each candidate is still compared with the whole of `v`.
    pub fn find_starting_before(
        &self,
        v: &[u8],
        before: usize,
        f: impl FnMut(usize, usize, usize),
    ) {
        self.sweep(v, 0, before, f)
    }

    fn sweep(&self, v: &[u8], first: usize, before: usize, mut f: impl FnMut(usize, usize, usize)) {
        if self.values.is_empty() || v.len() < MIN_REPEAT_LEN {
            return;
        }
        // An occurrence starting at `i` is found by the probe at the first
        // multiple of the stride at or after `i + b` (its gram offset `b`
        // is below `GRAM_STRIDE`): probes up to `before + GRAM_STRIDE`
        // find every occurrence starting before `before`.
        let probed = &v[..before.saturating_add(2 * GRAM_STRIDE).min(v.len())];
        let mut j = 0;
        while let Some(c) = next_candidate(probed, j, &self.filter) {
            j = c + GRAM_STRIDE;
            let Some(entries) = self.by_gram.get(&load_u32(v, c)) else {
                continue;
            };
            for e in entries {
                let id = e.id as usize;
                if id < first {
                    continue;
                }
                let Some(i) = c.checked_sub(e.off as usize) else {
                    continue;
                };
                if v.len() < i + MIN_REPEAT_LEN || load_u64(v, i) != e.head {
                    continue;
                }
                let val = &self.values[id];
                if v[i..].starts_with(val) {
                    f(i, i + val.len(), self.metas[id]);
                }
            }
        }
    }
}

pub fn entropy(v: &[u8]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in v {
        counts[b as usize] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn b64_val(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes standard or URL-safe base64 (padding optional) into `out`, at most
/// `cap` input bytes. Returns false on a non-base64 byte.
pub fn b64_decode(s: &[u8], out: &mut Vec<u8>, cap: usize) -> bool {
    out.clear();
    let s = &s[..s.len().min(cap)];
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in s {
        if b == b'=' {
            break;
        }
        let Some(v) = b64_val(b) else { return false };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    true
}

const STOPWORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "none",
    "nil",
    "undefined",
    "string",
    "str",
    "int",
    "bool",
    "boolean",
    "number",
    "required",
    "optional",
    "secret",
    "password",
    "token",
    "bearer",
    "basic",
    "object",
    "hidden",
    "default",
    "empty",
    "present",
    "missing",
    "redacted",
    "changeme",
    "example",
    "sample",
    "dummy",
    "placeholder",
    "value",
    "function",
    "return",
    "string;",
    "unknown",
    "invalid",
    "expired",
    "revoked",
    "enabled",
    "disabled",
    "pass",
    "passwd",
    "pw",
    "test",
    "user",
    "username",
];

const PLACEHOLDER_MARKS: &[&str] = &[
    // Keyboard runs stand in for values in documentation (`abc123…`,
    // `…abcdefghij…`, `0000…`); a random token holds one by chance about
    // once in 10^10. (Not `123456…`: real test fixtures and peers' own
    // positives are full of it.)
    "abcdefg",
    "abc123",
    "a1b2c3",
    "00000000",
    "xxxx",
    "****",
    // `xoxp-…-####################`: a value masked for display.
    "#####",
    "...",
    "your_",
    "your-",
    "yourpass",
    "example",
    "placeholder",
    "redacted",
    "${",
    "{{",
    "$(",
    "process.env",
    "os.environ",
    "getenv",
];

fn lower(v: &[u8]) -> Vec<u8> {
    v.to_ascii_lowercase()
}

fn contains(h: &[u8], n: &str) -> bool {
    memchr::memmem::find(h, n.as_bytes()).is_some()
}

/// A YAML tag that says where a value comes from, standing where the value
/// would: CloudFormation's `!Ref DbPassword` and `!Sub '{{resolve:…}}'`,
/// Home Assistant's `!secret db_password`, Ansible's `!vault |`, `!ENV`,
/// `!include`. What follows it is a name or a ciphertext, not the secret.
/// Only with a space or the end after it: `!Ref` glued to more bytes
/// (`!Refr3sh`) is a value that starts with `!`.
fn is_reference_tag(v: &[u8], next: Option<u8>) -> bool {
    const TAGS: &[&str] = &[
        "ref",
        "sub",
        "getatt",
        "importvalue",
        "join",
        "select",
        "if",
        "findinmap",
        "split",
        "cidr",
        "getazs",
        "secret",
        "vault",
        "env",
        "env_var",
        "include",
        "include_dir_list",
        "include_dir_named",
        "input",
        "lambda",
    ];
    let ends = next.is_none_or(|b| b == b' ' || b == b'\t' || b == b'\n' || b == b'\r');
    // `!!binary`, `!!str`, `!!python/bytes`: YAML's own tags, read as a
    // value only where nothing follows them on the line (a block scalar's
    // `!!binary |`, or the value already replaced after them).
    let core = v.len() > 2
        && v.starts_with(b"!!")
        && v[2..]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'/' || b == b':');
    ends && (core
        || (v.len() > 1
            && v[0] == b'!'
            && TAGS
                .iter()
                .any(|t| v[1..].eq_ignore_ascii_case(t.as_bytes()))))
}

/// Is the value an identifier or dotted reference (`settings.SECRET_KEY`,
/// `get_token`, `API_KEY`)? Code that names a secret is not a secret.
fn is_code_ref(v: &[u8]) -> bool {
    if v.is_empty() || !(v[0].is_ascii_alphabetic() || v[0] == b'_') {
        return false;
    }
    if !v
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return false;
    }
    let has_digit = v.iter().any(|b| b.is_ascii_digit());
    // `config.db2.password` is a path through code; a dotted token
    // (`<32 hex>.<24 random>`) has a long segment full of digits.
    let dotted = v.contains(&b'.')
        && !v
            .split(|&b| b == b'.')
            .any(|seg| seg.len() >= 16 && seg.iter().filter(|b| b.is_ascii_digit()).count() >= 3);
    let snake = v.contains(&b'_');
    let upper = v
        .iter()
        .all(|b| b.is_ascii_uppercase() || *b == b'_' || b.is_ascii_digit() || *b == b'.');
    let camel = v
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    // A camel-case name is made of words; random letters in mixed case
    // (`QTKjtayTfSlX`, a generated password with no digit) are not.
    let camel = camel && (v.len() < 8 || wordlike(v));
    dotted || (upper && snake) || (!has_digit && (snake || camel))
}

/// A value with no digit that is still a credential: `min_len` bytes or
/// more, upper- and lower-case letters, and letters that do not read as
/// words ([`wordlike`]). A random alphanumeric token holds no digit one
/// time in a thousand at 40 characters (`(52/62)^40`), one in thirty at
/// 20, one in eight at 12; a word or a camel-case name (`authentication`,
/// `accessTokenFromStorage`) reads as words. A bearer-style value
/// (`Check::Bearer`, where prose's next word may follow) needs 20 bytes; a
/// value under a key, token or secret name ([`generic_ok`]) 12.
fn random_letters(v: &[u8], min_len: usize) -> bool {
    v.len() >= min_len
        && v.iter().any(u8::is_ascii_uppercase)
        && v.iter().any(u8::is_ascii_lowercase)
        && !wordlike(v)
}

/// Letter pairs common in English words, row by first letter: a pair that
/// is at least one in 10,000 of the letter pairs in the words of the `//`
/// comments and Markdown of the crates this workspace builds with (2,790
/// files, 4.7 million pairs; `tools/redact-bench/bigrams.py` prints it).
const COMMON_PAIRS: [&[u8]; 26] = [
    b"bcdfghiklmnprstuvwxyz",
    b"aceijlorsuy",
    b"acefhiklmoprstuy",
    b"adefilorstuvy",
    b"abcdefghiklmnopqrstuvwxy",
    b"adefgilmorstuy",
    b"aeghilnorstuy",
    b"abeimorstuy",
    b"abcdefgiklmnoprstvxz",
    b"esu",
    b"aeinst",
    b"acdefilnoprstuvwy",
    b"abdeilmopsuy",
    b"abcdefgiklmnopstuvwy",
    b"abcdefgiklmnoprstuvwx",
    b"adehiloprstuy",
    b"lu",
    b"abcdefgiklmnoprstuvwy",
    b"acdefhiklmnopqrstuvwy",
    b"abcdefhilmoprstuwy",
    b"abcdefgilmnoprstx",
    b"aeimo",
    b"aehinorstw",
    b"aceimpt",
    b"beilmnoprst",
    b"aey",
];

/// Do `v`'s letters read as words? At most one in five of its letter pairs
/// (not counting the pair across a camel-case join, `tD` in `getDb`) is
/// rare in English. Measured: 98 % of the camel-case names of 6 letters or
/// more in code, transcripts and crate sources pass; 7 % of random
/// mixed-case strings of 12 letters and 2 % of 24 letters do.
fn wordlike(v: &[u8]) -> bool {
    let (mut pairs, mut rare) = (0usize, 0usize);
    for w in v.windows(2) {
        let (a, b) = (w[0], w[1]);
        if !(a.is_ascii_alphabetic() && b.is_ascii_alphabetic())
            || (a.is_ascii_lowercase() && b.is_ascii_uppercase())
        {
            continue;
        }
        pairs += 1;
        let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
        if !COMMON_PAIRS[(a - b'a') as usize].contains(&b) {
            rare += 1;
        }
    }
    rare * 5 <= pairs
}

/// Does decoded base64 hold a secret? A PEM private key, a `NAME=value`
/// line whose name says secret (a `.env` dump) with a real value, or JSON
/// with a secret field.
pub fn decoded_secret(d: &[u8]) -> bool {
    if contains(d, "PRIVATE KEY-----") {
        return true;
    }
    if !d
        .iter()
        .all(|&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return false;
    }
    const NAMES: &[&str] = &[
        "secret",
        "token",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "private_key",
    ];
    let l = lower(d);
    for n in NAMES {
        for p in memchr::memmem::find_iter(&l, n.as_bytes()) {
            // To the end of the name, then past its operator.
            let mut q = p + n.len();
            while q < l.len() && (l[q].is_ascii_alphanumeric() || matches!(l[q], b'_' | b'-')) {
                q += 1;
            }
            let Some(q) = value_start(d, q) else {
                continue;
            };
            let e = d[q..]
                .iter()
                .position(|b| b" \t\"',\r\n}".contains(b))
                .map_or(d.len(), |e| q + e);
            if generic_ok(&d[q..e], None, true, 0.0) {
                return true;
            }
        }
    }
    false
}

/// `jjwt-jackson-0.11.2`, `left-pad-1.3.0`: a package and its version.
fn is_versioned_name(v: &[u8]) -> bool {
    let Some(dash) = v.iter().rposition(|&b| b == b'-') else {
        return false;
    };
    let (name, ver) = (&v[..dash], &v[dash + 1..]);
    !name.is_empty()
        && name[0].is_ascii_lowercase()
        && name
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && ver.split(|&b| b == b'.').count() >= 2
        && ver
            .split(|&b| b == b'.')
            .all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
}

/// Name parts after which a value is about a secret rather than the secret:
/// `credentialsId`, `SECRET_NAME`, `token_url`, `password_file`, …
const REFERENCE_SUFFIXES: &[&str] = &[
    "id", "ids", "name", "names", "url", "uri", "path", "file", "type", "label", "count", "length",
    "len", "size", "ttl", "timeout", "expiry", "expires", "header", "field", "env", "var",
    "prefix", "policy", "hint", "format", "mode", "version", "ref", "arn", "secrets", "dir",
    "host", "endpoint", "user",
];

/// Words that only begin with a secret's name (`master-keying`,
/// `tokenizer`, `secretary`): a name ending in one is not a secret's name.
const EXTENDED_WORDS: &[&str] = &[
    "keying",
    "tokenizer",
    "tokenizers",
    "tokenized",
    "tokenize",
    "tokenization",
    "secretary",
];

/// Name parts before which a value is public by design (`publicToken`,
/// `csrf-token`) or made up for a test (`fakeToken`, `nonMatchingToken`).
const PUBLIC_PREFIXES: &[&str] = &[
    "public",
    "csrf",
    "xsrf",
    "fake",
    "dummy",
    "mock",
    "sample",
    "example",
    "invalid",
    "nonmatching",
    "non",
];

/// From `q`, just after a name: past a closing quote and blanks, an `=` or
/// `:`, then quotes and blanks — where the value starts (`None` without
/// the operator).
fn value_start(v: &[u8], mut q: usize) -> Option<usize> {
    let skip = |q: &mut usize| {
        while *q < v.len() && matches!(v[*q], b'"' | b'\'' | b' ' | b'\t') {
            *q += 1;
        }
    };
    skip(&mut q);
    if !matches!(v.get(q), Some(b'=' | b':')) {
        return None;
    }
    q += 1;
    skip(&mut q);
    Some(q)
}

/// Does a match starting at `start` take its name from a placeholder's
/// kind (`[REDACTED:password-hash]: 19000:0:…`, the rest of a shadow line
/// after its hash)? An index closes with `]` before its operator
/// (`settings[:secret_key] = …`), and so does a placeholder.
fn in_placeholder(v: &[u8], start: usize) -> bool {
    v[..start].ends_with(b"[REDACTED:")
}

/// The setting's name in `pre`, the match before its value when name and
/// value are two fields (`<add key="ApiKey" value="`, `- name:
/// SECRET_NAME` ⏎ `value: "`): the word after the first `key` or `name`
/// followed by `=` or `:`. Empty when there is none.
pub fn entry_name(pre: &[u8]) -> &[u8] {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':');
    for (i, w) in pre.windows(3).enumerate() {
        let at = if w.eq_ignore_ascii_case(b"key") {
            i + 3
        } else if pre[i..].len() >= 4 && pre[i..i + 4].eq_ignore_ascii_case(b"name") {
            i + 4
        } else {
            continue;
        };
        if i > 0 && pre[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let Some(j) = value_start(pre, at) else {
            continue;
        };
        let end = pre[j..]
            .iter()
            .position(|&b| !is_ident(b))
            .map_or(pre.len(), |k| j + k);
        return &pre[j..end];
    }
    b""
}

/// Does the last name in `pre` (the match before its value: a key, its
/// operator and quote) end in a part from [`REFERENCE_SUFFIXES`], or start
/// with one from [`PUBLIC_PREFIXES`]? Parts split at `_`, `-`, `.` and
/// camel-case humps.
pub(crate) fn names_a_reference(pre: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let Some(end) = pre.iter().rposition(|&b| b.is_ascii_alphanumeric()) else {
        return false;
    };
    let start = pre[..end]
        .iter()
        .rposition(|&b| !is_ident(b))
        .map_or(0, |i| i + 1);
    let name = &pre[start..=end];
    // `tokenizer`, `master-keying`: a word that only begins like a
    // secret's name, whatever comes before it.
    let tail_start = name
        .iter()
        .rposition(|&b| matches!(b, b'_' | b'-' | b'.'))
        .map_or(0, |i| i + 1);
    if EXTENDED_WORDS
        .iter()
        .any(|w| name[tail_start..].eq_ignore_ascii_case(w.as_bytes()))
    {
        return true;
    }
    // Split into parts.
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut from = 0;
    for i in 0..name.len() {
        let b = name[i];
        if matches!(b, b'_' | b'-' | b'.') {
            if i > from {
                parts.push(&name[from..i]);
            }
            from = i + 1;
        } else if i > from && b.is_ascii_uppercase() && name[i - 1].is_ascii_lowercase() {
            parts.push(&name[from..i]);
            from = i;
        }
    }
    if from < name.len() {
        parts.push(&name[from..]);
    }
    if parts.len() < 2 {
        return false;
    }
    let is = |p: &[u8], w: &str| p.eq_ignore_ascii_case(w.as_bytes());
    let last = parts[parts.len() - 1];
    REFERENCE_SUFFIXES.iter().any(|w| is(last, w))
        || PUBLIC_PREFIXES.iter().any(|w| is(parts[0], w))
}

/// Is `v`, the `default` of a block named like a secret, a secret? `pre`
/// is the text before it from the block's opening (`variable "okta_token"
/// {` … `default = "`); the block's quoted name, not `default`, is the
/// name [`names_a_reference`] reads. `Generic`'s checks, or `Password`'s
/// when the name is a password's. One test for both ways a block is read:
/// whole in a decoded view (`Check::BlockSecret` / `BlockPassword`) and
/// line by line in plain text (`conversation::Conversation::block_default`).
pub fn block_default_ok(pre: &[u8], v: &[u8], next: Option<u8>, password: bool) -> bool {
    let min = if password {
        crate::rules::PASSWORD_MIN_VALUE
    } else {
        crate::rules::GENERIC_MIN_VALUE
    };
    let mut quotes = memchr::memchr_iter(b'"', pre);
    let name = match (quotes.next(), quotes.next()) {
        (Some(_), Some(close)) => &pre[..close],
        _ => pre,
    };
    v.len() >= min && !names_a_reference(name) && generic_ok(v, next, password, 0.0)
}

/// `busybox@`, `anonymous@`, `ftp@`: the password of an anonymous FTP
/// login, which by convention (RFC 1635) is an e-mail address or a
/// program's name and `@` — public, hard-coded in every client.
fn anonymous_login_password(v: &[u8]) -> bool {
    v.len() >= 2
        && v.ends_with(b"@")
        && v[0].is_ascii_lowercase()
        && v[..v.len() - 1]
            .iter()
            .all(|&b| b.is_ascii_lowercase() || matches!(b, b'-' | b'.'))
}

/// `clm52649:AgencyIdentificationCodeContentType`: a namespace prefix and
/// a type name of three or more capitalised words (XML Schema `type=`),
/// not a token.
fn qualified_type_name(v: &[u8]) -> bool {
    let mut it = v.splitn(3, |&b| b == b':');
    let (Some(ns), Some(name), None) = (it.next(), it.next(), it.next()) else {
        return false;
    };
    !ns.is_empty()
        && ns[0].is_ascii_alphabetic()
        && ns.iter().all(u8::is_ascii_alphanumeric)
        && name.first().is_some_and(u8::is_ascii_uppercase)
        && name.iter().all(u8::is_ascii_alphabetic)
        && name.iter().filter(|b| b.is_ascii_uppercase()).count() >= 3
        && !name
            .windows(2)
            .any(|w| w[0].is_ascii_uppercase() && w[1].is_ascii_uppercase())
}

/// Bytes no reference, path or markup holds after its sigil and a name:
/// a value opening with a sigil that goes on with one of these is a
/// literal.
const LITERAL_MARKS: &[u8] = b"!#$%^&*+=@()?~";

/// A value opening with a sigil is a reference, markup or a path, not the
/// secret: `$VAR`, `${…}`, `$(…)`, `$this->pw`, `%APPDATA%`, `%(name)s`,
/// `{{ x }}`, `*alias`, `**`, `&anchor`, `&amp;`, `&#39;`, `@file.json`,
/// `@Value(…)`, `@Microsoft.KeyVault(…)`, `#{…}`, `#comment`, `~/path`,
/// `/path`, `./x`, `<placeholder>`, `<%= … %>`, `[REDACTED]`, `*tag*`. Unless what
/// follows the sigil holds a byte no such form holds after its name
/// ([`LITERAL_MARKS`]): then it is a literal that happens to begin with
/// that byte. Django's keys draw from `a-z0-9!@#$%^&*(-_=+)`, and one in
/// eight begins with `$ % & * @ #`; generated passwords, as often.
fn sigil_reference(v: &[u8]) -> bool {
    let Some((&s, rest)) = v.split_first() else {
        return false;
    };
    if v.starts_with(b"./") {
        return true;
    }
    if !matches!(
        s,
        b'$' | b'%' | b'{' | b'*' | b'/' | b'~' | b'@' | b'#' | b'&' | b'<' | b'['
    ) {
        return false;
    }
    let name_len = rest
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    let starts_name = rest
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
    let after_name = rest.get(name_len).copied();
    let always = match s {
        // Paths and template or JSON openers.
        b'/' | b'{' => true,
        b'<' => rest.contains(&b'>') || matches!(rest.first(), Some(b'%' | b'<' | b'?' | b'!')),
        b'[' => rest.contains(&b']'),
        // `${…}`, `$(…)`, `%(…)s`, `%{…}`, `#{…}`, `@{…}`, `@(…)`.
        b'$' | b'%' | b'#' | b'@' if matches!(rest.first(), Some(b'{' | b'(')) => true,
        // A mask or glob, a shell operator, a literal percent sign.
        b'*' | b'&' | b'%' if rest.first() == Some(&s) => true,
        // `%APPDATA%`, `%USERPROFILE%\…`.
        b'%' => starts_name && after_name == Some(b'%'),
        // An HTML character reference.
        b'&' => rest.first() == Some(&b'#'),
        // An annotation or a call: `@Value(…)`, `@Microsoft.KeyVault(…)`.
        b'@' => starts_name && after_name == Some(b'('),
        _ => false,
    };
    // A path under a name: `$BASE_URL/…`, `~user/…`, `@scope/pkg`.
    let path_under_name = starts_name && after_name == Some(b'/');
    // A name between two sigils is markup too: vim's `*tag*`, CVS's `$Id$`.
    let inner = rest.strip_suffix(&[s]).unwrap_or(rest);
    always || path_under_name || !inner.iter().any(|b| LITERAL_MARKS.contains(b))
}

/// Classifies the value of a keyword-anchored assignment.
pub fn generic_ok(v: &[u8], next: Option<u8>, password: bool, min_entropy: f64) -> bool {
    if (!password && (is_elided(v) || jwt_word_signature(v))) || is_sops_ciphertext(v) {
        return false;
    }
    let mut v = v;
    while let Some((&last, rest)) = v.split_last() {
        if matches!(last, b'.' | b':' | b'!' | b'?') && !rest.is_empty() {
            v = rest;
        } else {
            break;
        }
    }
    if v.len() < if password { 4 } else { 8 } {
        return false;
    }
    if matches!(next, Some(b'(')) {
        return false;
    }
    if sigil_reference(v) {
        return false;
    }
    let l = lower(v);
    if STOPWORDS.iter().any(|w| l == w.as_bytes())
        || has_placeholder_mark(&l)
        || contains(&l, "://")
    {
        return false;
    }
    if v.iter()
        .all(|b| b.is_ascii_digit() || *b == b'.' || *b == b'-')
    {
        return false;
    }
    if v.iter().all(|&b| b == v[0]) {
        return false;
    }
    if is_code_ref(v) || is_reference_tag(v, next) {
        return false;
    }
    if password {
        return !anonymous_login_password(v);
    }
    // A Slack token's shape is known: the Slack rule decides
    // (`"token1": "xoxp-1234567890"` is a placeholder it rejects).
    if v.len() > 5 && v.starts_with(b"xox") && v[3].is_ascii_lowercase() && v[4] == b'-' {
        return false;
    }
    // `lsv2_pt_short`, `os_v2_app_short`: a prefix with a word saying the
    // value was cut for an example.
    if l.ends_with(b"_short") || l.ends_with(b"-short") {
        return false;
    }
    if qualified_type_name(v) {
        return false;
    }
    if is_versioned_name(v) {
        return false;
    }
    let has_digit = v.iter().any(|b| b.is_ascii_digit());
    let has_alpha = v.iter().any(|b| b.is_ascii_alphabetic());
    if !(has_alpha && (has_digit || v.len() >= 24 || random_letters(v, 12))) {
        return false;
    }
    entropy(v) >= min_entropy
}

fn check_ipv4(v: &[u8]) -> bool {
    let mut oct = [0u32; 4];
    let mut n = 0;
    for part in v.split(|&b| b == b'.') {
        if n == 4 || part.is_empty() || part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return false;
        }
        let mut x = 0u32;
        for &b in part {
            x = x * 10 + (b - b'0') as u32;
        }
        if x > 255 {
            return false;
        }
        oct[n] = x;
        n += 1;
    }
    if n != 4 {
        return false;
    }
    match oct[0] {
        10 => true,
        172 => (16..32).contains(&oct[1]),
        192 => oct[1] == 168,
        169 => oct[1] == 254,
        100 => (64..128).contains(&oct[1]),
        _ => false,
    }
}

fn check_ipv6(v: &[u8]) -> bool {
    let addr = v.split(|&b| b == b'%').next().unwrap_or(v);
    let groups: Vec<&[u8]> = addr.split(|&b| b == b':').collect();
    let empties = groups.iter().filter(|g| g.is_empty()).count();
    if groups.len() < 3 || groups.len() > 8 || groups.iter().any(|g| g.len() > 4) {
        return false;
    }
    // Without `::` a full address has exactly 8 groups.
    let double = memchr::memmem::find(addr, b"::").is_some();
    if !double && groups.len() != 8 {
        return false;
    }
    if addr.ends_with(b":") && !addr.ends_with(b"::") {
        return false;
    }
    empties <= 3
}

fn check_mac(v: &[u8]) -> bool {
    let sep = v[2];
    if v.iter().skip(2).step_by(3).any(|&b| b != sep) {
        return false;
    }
    let hex: Vec<u8> = v
        .iter()
        .copied()
        .filter(|b| b.is_ascii_hexdigit())
        .collect();
    !(hex.iter().all(|&b| b == b'0') || hex.iter().all(|&b| b == b'f' || b == b'F'))
}

/// `name` is `host` or a name under it (`….host`).
fn is_or_under(name: &[u8], host: &[u8]) -> bool {
    name == host
        || (name.len() > host.len()
            && name.ends_with(host)
            && name[name.len() - host.len() - 1] == b'.')
}

const PUBLIC_HOSTS: &[&str] = &[
    "metadata.google.internal",
    "host.docker.internal",
    "gateway.docker.internal",
    "kubernetes.default.svc.cluster.local",
    "cluster.local",
    "svc.cluster.local",
];

/// Labels that mark a dotted name as code or configuration rather than a
/// host (`browser.storage.local`, `settings.local`, `process.env.local`).
const CODE_LABELS: &[&str] = &[
    "storage", "settings", "env", "config", "browser", "chrome", "window", "document", "this",
    "self", "process", "os", "sys", "module", "exports", "props", "state", "ctx", "app",
];

const HOME_NAME_STOPLIST: &[&str] = &[
    "shared",
    "public",
    "guest",
    "default",
    "all users",
    "user",
    "username",
    "you",
    "me",
    "your-name",
    "yourname",
    "name",
    "runner",
    "linuxbrew",
    "ubuntu",
    "node",
    "vscode",
    "dev",
    "admin",
    "root",
    "app",
    "user1",
    "<user>",
    "$user",
    "...",
    "*",
    "you.",
];

impl Engine {
    fn push(&self, hits: &mut Vec<Hit>, views: &Views, at: L, s: usize, e: usize, meta: usize) {
        let (s, e) = (s + at.base, e + at.base);
        let (start, end) = if at.k == 0 {
            (s, e)
        } else {
            views.to_raw(at.k, s, e)
        };
        if start < end {
            hits.push(Hit { start, end, meta });
        }
    }

    /// Scans one raw line (without its newline). Appends raw-span hits.
    /// `pem_open` carries an unterminated PEM block across lines.
    pub fn scan_line(
        &self,
        raw: &[u8],
        scratch: &mut Scratch,
        known: &Known,
        pem_open: &mut usize,
        found: &mut Vec<(Vec<u8>, usize)>,
        hits: &mut Vec<Hit>,
    ) {
        let json = raw.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        self.scan_line_as(raw, json, scratch, known, pem_open, found, hits)
    }

    /// As [`Engine::scan_line`], with the JSON decision made by the caller
    /// (verify scans windows of whole JSON members cut from a JSON line).
    #[allow(clippy::too_many_arguments)]
    pub fn scan_line_as(
        &self,
        raw: &[u8],
        json: bool,
        scratch: &mut Scratch,
        known: &Known,
        pem_open: &mut usize,
        found: &mut Vec<(Vec<u8>, usize)>,
        hits: &mut Vec<Hit>,
    ) {
        let first = hits.len();
        scratch.cache.clear();
        scratch.seg_index = 0;
        let use_pre = std::mem::take(&mut scratch.pre_kw_set);
        let pre_kw = std::mem::take(&mut scratch.pre_kw);
        let prebuilt = std::mem::take(&mut scratch.prebuilt);
        scratch.views_valid = false;
        for r in scratch.allowed_rec.iter_mut() {
            r.valid = false;
        }
        if *pem_open > 0 && self.pem_continuation(raw, pem_open) {
            hits.push(Hit {
                start: 0,
                end: raw.len(),
                meta: self.pem_meta(),
            });
            return;
        }
        let mut views = std::mem::take(&mut scratch.views);
        if !prebuilt {
            let _t = timing::span(timing::Phase::Views);
            views.build(raw);
        }
        let from = if json && views.count() > 0 { 1 } else { 0 };
        for layer in from..=views.count() {
            let v: &[u8] = if layer == 0 { raw } else { views.layer(layer) };
            if !json {
                let ends_line = self.scan_view(
                    v,
                    L { k: layer, base: 0 },
                    &views,
                    scratch,
                    known,
                    found,
                    hits,
                    0,
                    (use_pre && layer == 0).then_some(&pre_kw[..]),
                );
                if ends_line && layer == 0 {
                    *pem_open = MAX_PEM_LINES;
                }
                continue;
            }
            // Allowlisted values (ids, signatures, image data) are never
            // secrets. Long ones — most of a transcript's bytes — are not
            // scanned at all; hits inside short ones are dropped afterwards
            // (cheaper than splitting the scan at every id).
            let prior = scratch
                .prior_allowed
                .get(layer)
                .filter(|r| prebuilt && r.valid && !r.overlap)
                .zip(scratch.layer_edits.get(layer));
            let marking = timing::span(timing::Phase::Allowed);
            match prior {
                Some((rec, edits)) => derive_allowed(
                    v,
                    &rec.spans,
                    edits,
                    &mut scratch.allowed,
                    &mut scratch.derive_windows,
                ),
                None => {
                    let overlap = mark_allowed(v, &mut scratch.allowed);
                    // Same cap as the keyword cache: on a newline-free file
                    // a copy would be another line's worth of spans.
                    if !scratch.no_record && raw.len() <= MAX_REUSE_BYTES {
                        if scratch.allowed_rec.len() <= layer {
                            scratch
                                .allowed_rec
                                .resize_with(layer + 1, AllowedRec::default);
                        }
                        let r = &mut scratch.allowed_rec[layer];
                        r.spans.clone_from(&scratch.allowed);
                        r.overlap = overlap;
                        r.valid = true;
                    }
                }
            }
            drop(marking);
            let allowed = std::mem::take(&mut scratch.allowed);
            let layer_first = hits.len();
            let mut at = 0;
            for &(a, b) in allowed.iter().filter(|(a, b)| b - a >= SKIP_SCAN_MIN) {
                if a > at {
                    self.scan_view(
                        &v[at..a],
                        L { k: layer, base: at },
                        &views,
                        scratch,
                        known,
                        found,
                        hits,
                        0,
                        None,
                    );
                }
                at = at.max(b);
            }
            if at < v.len() {
                self.scan_view(
                    &v[at..],
                    L { k: layer, base: at },
                    &views,
                    scratch,
                    known,
                    found,
                    hits,
                    0,
                    None,
                );
            }
            if hits.len() > layer_first {
                let mut short = std::mem::take(&mut scratch.short);
                short.clear();
                short.extend(allowed.iter().filter(|(a, b)| b - a < SKIP_SCAN_MIN).map(
                    |&(a, b)| {
                        if layer == 0 {
                            (a, b)
                        } else {
                            views.to_raw(layer, a, b)
                        }
                    },
                ));
                drop_within(hits, layer_first, &short);
                scratch.short = short;
            }
            scratch.allowed = allowed;
        }
        // Placeholders are never findings (idempotence): drop hits that lie
        // wholly inside one.
        if F_REDACTED.find(raw).is_some() {
            placeholder_spans(raw, &mut scratch.placeholders);
            drop_within(hits, first, &scratch.placeholders);
        }
        scratch.views = views;
        scratch.views_valid = true;
        scratch.pre_kw = pre_kw;
    }

    /// Hits for every occurrence of the values `known` gained since it held
    /// `first`, in `raw` and in each decoded
    /// layer of it (`scratch` scanned `raw` last), as `Scanner::redact`'s
    /// sweep after detection finds them: a value a rule found on a line can
    /// stand elsewhere on that line without the context the rule needs, and
    /// the scan's own sweep ran before the value was known.
    pub fn sweep_line(
        &self,
        raw: &[u8],
        scratch: &Scratch,
        known: &Known,
        first: usize,
        hits: &mut Vec<Hit>,
    ) {
        let layers = if scratch.views_valid {
            scratch.views.count()
        } else {
            0
        };
        let _t = timing::span(timing::Phase::Sweep);
        for k in 0..=layers {
            let v = if k == 0 { raw } else { scratch.views.layer(k) };
            let at = L { k, base: 0 };
            known.find_all_from(v, first, |s, e, meta| {
                self.push(hits, &scratch.views, at, s, e, meta)
            });
        }
    }

    /// Returns true when a PEM block opened in this view runs to the end of
    /// the raw line (so the following lines are key body).
    #[allow(clippy::too_many_arguments)]
    fn scan_view(
        &self,
        v: &[u8],
        layer: L,
        views: &Views,
        scratch: &mut Scratch,
        known: &Known,
        found: &mut Vec<(Vec<u8>, usize)>,
        hits: &mut Vec<Hit>,
        depth: u8,
        pre_kw: Option<&[KwMatch]>,
    ) -> bool {
        let mut pem_to_end = false;
        let mut triggered = std::mem::take(&mut scratch.triggered);
        let mut list = std::mem::take(&mut scratch.list);
        triggered.resize(self.rules.len(), false);
        list.clear();
        // Segments pair up with the prior scan's by order; a wrong pairing
        // only shortens the shared prefix and suffix, so the result is
        // exact either way.
        let seg = scratch.seg_index;
        scratch.seg_index += 1;
        let prior = scratch.prior.get(seg, layer.k);
        // Where `v` differs from the paired segment: `v[pre..end]`.
        let shared = prior.map(|p| shared_ends(&p.bytes, v));
        let gating = timing::span(timing::Phase::ShapeGates);
        let (mac, ipv6) = match (prior, shared) {
            (Some(p), Some((pre, end))) if p.gates == (false, false) => {
                shape_gates_around(v, pre, end)
            }
            _ => shape_gates(v),
        };
        drop(gating);
        // The known-value sweep likewise, when the paired segment's sweep,
        // for the same values, reported nothing: an occurrence wholly in the
        // shared prefix or suffix would have been reported there, so every
        // occurrence in `v` overlaps the differing stretch.
        let sweep_range = match (prior, shared) {
            (Some(p), Some((pre, end))) if p.sweep == (0, known.len()) => (
                pre.saturating_sub(known.max_len),
                (end + known.max_len).min(v.len()),
            ),
            _ => (0, v.len()),
        };
        let mut trigger: Option<bool> = None;
        for &r in &self.always {
            if (r == self.mac_rule && !mac) || (r == self.ipv6_rule && !ipv6) {
                continue;
            }
            if self.non_ascii[r]
                && !*trigger
                    .get_or_insert_with(|| !v.is_ascii() && crate::rules::non_ascii_trigger(v))
            {
                continue;
            }
            triggered[r] = true;
            list.push(r);
        }
        let mut kw = std::mem::take(&mut scratch.kw);
        kw.clear();
        let walking = timing::span(timing::Phase::Keywords);
        match (prior, pre_kw) {
            (Some(p), _) => {
                self.keywords
                    .find_all_reusing(&p.bytes, &p.kws, v, &mut scratch.lanes, &mut kw)
            }
            (None, Some(pre)) => kw.extend_from_slice(pre),
            (None, None) => self.keywords.find_all(v, &mut scratch.lanes, &mut kw),
        }
        drop(walking);
        if !scratch.no_record {
            if scratch.cache.bytes + v.len() <= MAX_REUSE_BYTES {
                scratch.cache.record(layer.k, v, &kw, (mac, ipv6));
            } else {
                // Keeps later segments paired by position; never matches.
                scratch.cache.record(usize::MAX, &[], &[], (true, true));
            }
        }
        let mut gate = AssignGate::default();
        let mut occ = std::mem::take(&mut scratch.occ);
        occ.clear();
        for m in &kw {
            let pi = m.pattern;
            for &r in &self.kw_rules[pi] {
                if self.windowed[r] || self.anchored[r] {
                    occ.push((r, m.start, m.end));
                }
                if !triggered[r] && self.gate_passes(self.gates[r], pi, v, m, &mut gate) {
                    triggered[r] = true;
                    list.push(r);
                }
            }
            for &ni in &self.kw_identity[pi] {
                self.identity_hit(v, layer, views, hits, m.start, m.end, ni);
            }
        }
        scratch.kw = kw;
        // Regex rules stage one ran on the paired segment: where the rule's
        // matches can differ from stage one's (see `rule_zone`).
        let mut zones = std::mem::take(&mut scratch.zones);
        zones.clear();
        zones.extend(list.iter().map(|&ri| {
            if self.windowed[ri] {
                return None;
            }
            let (Some(p), Some((pre, end))) = (prior, shared) else {
                return None;
            };
            let Matcher::Regex { stops, .. } = &self.rules[ri].matcher else {
                return None;
            };
            let &(_, lo, hi) = p.ran.iter().find(|r| r.0 == ri)?;
            rule_zone(v, p.bytes.len(), pre, end, stops.get()?, (lo, hi))
        }));
        let ruling = timing::span(if timing::in_verify() {
            timing::Phase::RulesVerify
        } else {
            timing::Phase::Rules
        });
        for (&ri, &zone) in list.iter().zip(&zones) {
            triggered[ri] = false;
            let (clock, hits_before) = (timing::rule_clock(), hits.len());
            let rule = &self.rules[ri];
            match &rule.matcher {
                Matcher::Regex {
                    re,
                    group,
                    check,
                    min_entropy,
                    allow,
                    stops,
                    anchored,
                    groups,
                } => {
                    let anchored = anchored.as_deref().filter(|_| self.anchored[ri]);
                    if anchored.is_some() {
                        scratch.starts.clear();
                        scratch
                            .starts
                            .extend(occ.iter().filter(|o| o.0 == ri).map(|&(_, ks, _)| ks));
                        scratch.starts.sort_unstable();
                        scratch.starts.dedup();
                    }
                    // A windowed rule runs in the windows around its
                    // keywords; any other in its zone (or the whole line).
                    let mut windows = std::mem::take(&mut scratch.windows);
                    let keyed = stops.get().filter(|_| self.windowed[ri]);
                    match keyed {
                        Some(stops) => keyword_windows(v, stops, &occ, ri, &mut windows),
                        None => windows.clear(),
                    }
                    let runs = windows
                        .iter()
                        .copied()
                        .map(Some)
                        .chain(keyed.is_none().then_some(zone));
                    let mut ran = (u32::MAX, 0u32);
                    for w in runs {
                        let (lo, hi) = self.run_regex(
                            v,
                            layer,
                            views,
                            ri,
                            re,
                            anchored,
                            groups.as_deref(),
                            *group,
                            *check,
                            *min_entropy,
                            allow,
                            rule.meta,
                            w,
                            scratch,
                            found,
                            hits,
                        );
                        ran = (ran.0.min(lo), ran.1.max(hi));
                    }
                    scratch.windows = windows;
                    if !scratch.no_record {
                        scratch.cache.push_ran(ri, ran);
                    }
                }
                Matcher::Pem => {
                    if self.run_pem(v, layer, views, rule.meta, hits) && layer.k == 0 {
                        pem_to_end = true;
                    }
                }
                Matcher::OtherHome => self.run_other_home(v, layer, views, rule.meta, hits),
                Matcher::DataUri if depth == 0 => {
                    self.run_data_uri(v, layer, views, rule.meta, scratch, known, found, hits)
                }
                Matcher::DataUri => {}
            }
            timing::rule_ran(ri, clock, hits.len() - hits_before);
        }
        drop(ruling);
        scratch.triggered = triggered;
        scratch.list = list;
        scratch.zones = zones;
        scratch.occ = occ;
        let (lo, hi) = sweep_range;
        let at = L {
            k: layer.k,
            base: layer.base + lo,
        };
        let mut swept = 0;
        let sweeping = timing::span(timing::Phase::Sweep);
        known.find_all(&v[lo..hi], |s, e, meta| {
            swept += 1;
            self.push(hits, views, at, s, e, meta)
        });
        drop(sweeping);
        if !scratch.no_record {
            scratch.cache.set_last_sweep((swept, known.len()));
        }
        pem_to_end
    }

    /// Does keyword occurrence `m` (of keyword `pi`) in `v` trigger a rule
    /// with gate `g`? See [`Gate`].
    fn gate_passes(&self, g: Gate, pi: usize, v: &[u8], m: &KwMatch, a: &mut AssignGate) -> bool {
        match g {
            Gate::None => true,
            Gate::Assign(min_value) => self.kw_ungated[pi] || a.may_follow(v, m, min_value),
            Gate::UserinfoAt => userinfo_may_follow(v, m.end),
            Gate::ValueAfter(min_value) => value_follows(v, m.end, min_value),
            Gate::SpaceAfter => v.get(m.end).is_some_and(|&b| is_ascii_space(b)),
            Gate::TableCell => table_cell(v, m.start, m.end),
            Gate::ValueAfterNow(min_value) => value_after_now(v, m.end, min_value),
            Gate::UpperLink => upper_link(v, m.start, m.end),
            Gate::AfterWord(words) => word_before(v, m.start, m.end, words),
            Gate::Base64Value { min, echo, eol } => {
                *a.b64_value[usize::from(echo)].get_or_insert_with(|| b64_value(v, min, echo, eol))
            }
            Gate::CookiePair => *a.cookie_pair.get_or_insert_with(|| cookie_pair(v)),
            Gate::SlashPair => *a.slash_pair.get_or_insert_with(|| slash_pair(v)),
            Gate::Upper => no_lower_case(&v[m.start..m.end]),
            Gate::WordThenSep => {
                (v[m.start] == b'_' || !(m.start > 0 && is_word_byte(v[m.start - 1])))
                    && (v
                        .get(m.end)
                        .is_some_and(|&b| is_ascii_space(b) || b == b':' || b == b'=')
                        || v[m.end..].starts_with(b"'s")
                        || v[m.end..].starts_with("\u{2019}s".as_bytes()))
            }
            Gate::HostEnd => host_may_end(v, m.end),
            Gate::LoginPair => login_pair_may(v, m.start, m.end),
            Gate::UserBefore => user_before(v, m.start),
            Gate::BytesAssigned => {
                (!v[m.start..m.end].eq_ignore_ascii_case(b"bytes")
                    || v[m.end..].iter().find(|&&b| !is_ascii_space(b)) == Some(&b'='))
                    && secret_name_before(v, m.start, true)
            }
            Gate::SecretNameBefore => secret_name_before(v, m.start, false),
            Gate::NotOwnHome => !self.home.as_ref().is_some_and(|h| {
                let tail = &v[m.start..];
                tail.starts_with(h) && !tail.get(h.len()).is_some_and(|&b| is_alnum(b))
            }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_regex(
        &self,
        v: &[u8],
        layer: L,
        views: &Views,
        ri: usize,
        re: &LazyRegex,
        anchored: Option<&AnchoredRegex>,
        lazy_groups: Option<&LazyGroups>,
        group: usize,
        check: Check,
        min_entropy: f64,
        allow: &[Vec<u8>],
        meta: usize,
        zone: Option<(usize, usize)>,
        scratch: &mut Scratch,
        found: &mut Vec<(Vec<u8>, usize)>,
        hits: &mut Vec<Hit>,
    ) -> (u32, u32) {
        let fast = match lazy_groups {
            Some(l) if group != 0 => l.ready(),
            _ => None,
        };
        // A whole-match rule resolves no groups; the others reuse this
        // rule's buffers from the last run (a fresh one allocated twice per
        // run: 2 % of the varied corpus's time).
        let mut locs = match anchored {
            _ if group == 0 => None,
            None => {
                let re = re.get();
                Some(
                    scratch
                        .locs
                        .get_mut(ri)
                        .and_then(Option::take)
                        .filter(|l| l.len() == re.captures_len())
                        .unwrap_or_else(|| re.capture_locations()),
                )
            }
            Some(a) => {
                let n = a.slot_len();
                scratch.slots.clear();
                scratch.slots.resize(n, None);
                None
            }
        };
        // Within a zone `(x, y)` (see `rule_zone`) the matches starting in
        // `x..y` end by `y`, so the search needs the text up to `v[y]`
        // only (the byte a look-around at `y` reads).
        let (mut at, hay, stop) = match zone {
            Some((x, y)) => {
                #[cfg(test)]
                ZONED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (x, &v[..(y + 1).min(v.len())], y)
            }
            None => (0, v, usize::MAX),
        };
        // First and last start of the matches that became hits.
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        while at <= hay.len() {
            // A whole-match rule needs no capture engine: the search alone
            // gives the same span (`find_at` and `captures_read_at` share
            // one search; the latter then resolves the groups).
            // With `fast`, the search finds the span alone and the group
            // comes from `groups` (the capture engine only when that cannot
            // tell).
            // (`fast` is `None` for a whole-match rule.)
            let capture_now = group != 0 && fast.is_none();
            let from = at;
            let found_at = match (anchored, locs.as_mut()) {
                (Some(a), _) => {
                    let slots = capture_now.then_some(&mut scratch.slots[..]);
                    a.find(hay, at, stop, &scratch.starts, slots, &mut scratch.cands)
                }
                (None, Some(locs)) if capture_now => re
                    .get()
                    .captures_read_at(locs, hay, at)
                    .map(|m| (m.start(), m.end())),
                (None, _) => re.get().find_at(hay, at).map(|m| (m.start(), m.end())),
            };
            let Some((m_start, m_end)) = found_at else {
                break;
            };
            if m_start >= stop {
                break;
            }
            at = if m_end > m_start { m_end } else { m_end + 1 };
            if capture_now {
                if let Some(l) = lazy_groups {
                    l.saw_match();
                }
            }
            let resolved = match fast {
                Some(g) => {
                    if scratch.group_caches.len() <= ri {
                        scratch.group_caches.resize_with(ri + 1, || None);
                    }
                    let c = scratch.group_caches[ri].get_or_insert_with(|| g.create_cache());
                    g.resolve(c, hay, m_start, m_end)
                }
                _ => Resolved::Unknown,
            };
            #[cfg(test)]
            if resolved != Resolved::Unknown {
                GROUPS_RESOLVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if fast.is_some() && resolved == Resolved::Unknown {
                // The match again, with its groups: anchored at its start it
                // is the same match.
                match (anchored, locs.as_mut()) {
                    (Some(a), _) => {
                        let input = regex_automata::Input::new(hay)
                            .range(m_start..)
                            .anchored(regex_automata::Anchored::Yes);
                        a.get().search_slots(&input, &mut scratch.slots);
                    }
                    (None, Some(locs)) => {
                        re.get().captures_read_at(locs, hay, from);
                    }
                    (None, None) => {}
                }
            }
            let group_span = match (&locs, resolved) {
                _ if group == 0 => Some((m_start, m_end)),
                (_, Resolved::Group(a, b)) => Some((a, b)),
                (_, Resolved::NoGroup) => None,
                (Some(locs), Resolved::Unknown) => (1..locs.len()).find_map(|g| locs.get(g)),
                (None, Resolved::Unknown) => scratch.slots[2..]
                    .chunks_exact(2)
                    .find_map(|g| Some((g[0]?.get(), g[1]?.get()))),
            };
            let Some((s, e)) = group_span else {
                continue;
            };
            let val = &v[s..e];
            let prev = if s > 0 { Some(v[s - 1]) } else { None };
            let next = v.get(e).copied();
            let ok = match check {
                Check::Token => {
                    // Rules with no entropy floor (age keys) skip the
                    // repetition tests too.
                    (min_entropy == crate::rules::NO_ENTROPY_FLOOR
                        || (entropy(val) >= MIN_TOKEN_ENTROPY && !has_long_run(val)))
                        && !has_placeholder_mark(val)
                        && !ends_with_here(val)
                        && !elided_after(&v[e..])
                        && !jwt_word_signature(val)
                        && !slack_repeated_ids(val)
                        && !prev.is_some_and(is_alnum)
                        && !next.is_some_and(|b| is_alnum(b) || (b == b'-' && val.contains(&b'-')))
                }
                Check::Generic | Check::ProseSecret => {
                    !in_placeholder(v, m_start)
                        && !names_a_reference(&v[m_start..s])
                        && !elided_after(&v[e..])
                        && !is_member_name(v, e)
                        && if check == Check::Generic {
                            generic_ok(val, next, false, min_entropy)
                        } else {
                            prose_secret_ok(val, next, min_entropy)
                        }
                }
                Check::Password => {
                    !in_placeholder(v, m_start)
                        && !names_a_reference(&v[m_start..s])
                        && !is_member_name(v, e)
                        && generic_ok(val, next, true, 0.0)
                }
                Check::FlagPassword => flag_password_ok(val, next),
                Check::SecretPairs => secret_pairs_ok(val),
                Check::EntryPassword => {
                    !names_a_reference(entry_name(&v[m_start..s])) && flag_password_ok(val, next)
                }
                Check::BlockSecret | Check::BlockPassword => {
                    let password = check == Check::BlockPassword;
                    block_default_ok(&v[m_start..s], val, next, password) && !elided_after(&v[e..])
                }
                Check::Basic => {
                    b64_decode(val, &mut scratch.b64, MAX_B64_DECODE)
                        && scratch.b64.contains(&b':')
                        && scratch.b64.iter().all(|b| (0x20..0x7f).contains(b))
                }
                Check::Base64Text => base64_text(val, &mut scratch.b64),
                Check::DecodedSecret => {
                    b64_decode(val, &mut scratch.b64, MAX_B64_DECODE)
                        && decoded_secret(&scratch.b64)
                }
                Check::PasswordWord => {
                    let l = lower(val);
                    crate::rules::password_word_ok(&l) && !has_placeholder_mark(&l)
                }
                Check::Bearer => {
                    !is_sops_ciphertext(val)
                        && (val.iter().any(|b| b.is_ascii_digit()) || random_letters(val, 20))
                        && val.iter().any(|b| b.is_ascii_alphabetic())
                        && !has_placeholder_mark(val)
                }
                Check::UrlPassword => {
                    let l = lower(val);
                    // `https://[REDACTED:github-token]@github.com`: a
                    // placeholder standing for the URL's user is not a user
                    // and a password (redacting again must change nothing).
                    if in_placeholder(v, s) {
                        continue;
                    }
                    // `host:3000/@vite/client`, `[::1]:8080/a@b`: a port and
                    // a path, not a password holding a decoded `/`.
                    let port_path = val.iter().position(|&b| b == b'/').is_some_and(|i| {
                        let head = &val[..i];
                        let last = head.rsplit(|&b| b == b':').next().unwrap_or(head);
                        last.is_empty() || last.iter().all(u8::is_ascii_digit)
                    });
                    !(port_path
                        || val.starts_with(b"$")
                        || val.starts_with(b"[")
                        || val.starts_with(b"{")
                        || matches!(
                            &l[..],
                            b"password" | b"pass" | b"pw" | b"secret" | b"x" | b"x-oauth-basic"
                        )
                        || has_placeholder_mark(&l)
                        || val.iter().all(|b| *b == b'*' || *b == b'x'))
                }
                Check::Ipv4 => {
                    let glued_before = prev.is_some_and(|b| b.is_ascii_digit() || b == b'.');
                    let glued_after = next.is_some_and(|b| b.is_ascii_digit())
                        || (next == Some(b'.') && v.get(e + 1).is_some_and(u8::is_ascii_digit));
                    !glued_before && !glued_after && check_ipv4(val)
                }
                Check::Ipv6 => {
                    !prev.is_some_and(|b| b.is_ascii_hexdigit() || b == b':') && check_ipv6(val)
                }
                Check::Mac => {
                    !prev.is_some_and(|b| b.is_ascii_alphanumeric() || b == b':' || b == b'-')
                        && !next
                            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b':' || b == b'-')
                        && check_mac(val)
                }
                Check::Host => {
                    let l = lower(val);
                    // `settings.local.json`, `.env.local`, `browser.storage.local`
                    // are file names and code, not hosts.
                    let code = l
                        .split(|&b| b == b'.')
                        .any(|label| CODE_LABELS.iter().any(|c| c.as_bytes() == label));
                    // `sha512-PC/…`: a subresource-integrity digest (npm
                    // lockfiles), whose base64 may start like a machine name.
                    let sri = ["sha1-", "sha256-", "sha384-", "sha512-"]
                        .iter()
                        .any(|p| l.starts_with(p.as_bytes()));
                    !sri && !prev
                        .is_some_and(|b| is_alnum(b) || b == b'.' || b == b'-' || b == b'@')
                        && host_may_end(v, e)
                        && !code
                        && !PUBLIC_HOSTS.iter().any(|h| is_or_under(&l, h.as_bytes()))
                        && !self.path_allowed(val)
                }
                Check::ProviderNamed => {
                    crate::rules::provider_named_ok(&v[m_start..s], val)
                        && !elided_after(&v[e..])
                        // `00DE…!AQcA…`: cut at a byte the value holds.
                        && !next.is_some_and(|b| is_alnum(b) || b == b'!')
                }
                Check::ProviderValue => {
                    crate::rules::provider_value_ok(val)
                        && !elided_after(&v[e..])
                        && !next.is_some_and(|b| is_alnum(b) || b == b'!')
                }
                Check::Mnemonic => crate::rules::mnemonic_ok(val),
                Check::ProviderToken => {
                    crate::rules::provider_token_ok(val)
                        && !prev.is_some_and(is_alnum)
                        && !next.is_some_and(is_alnum)
                        && !elided_after(&v[e..])
                }
                Check::None => true,
            };
            if !ok || e <= s || val.starts_with(b"[REDACTED:") {
                continue;
            }
            if allow.iter().any(|a| a == val) || self.examples.iter().any(|a| a == val) {
                continue;
            }
            let m = &self.metas[meta];
            if m.class == Class::Secret && !m.id.starts_with("config:") {
                // Built-in secret rules ignore value allowlists except the
                // generic keyword rules (see config docs: allowlists never
                // weaken a provider rule).
                if matches!(
                    check,
                    Check::Generic
                        | Check::Password
                        | Check::FlagPassword
                        | Check::EntryPassword
                        | Check::BlockSecret
                        | Check::BlockPassword
                ) && self.allow_values.iter().any(|a| a == val)
                {
                    continue;
                }
            } else if self.allow_values.iter().any(|a| a == val) {
                continue;
            }
            // A setting that starts its line with a bare value: in YAML,
            // INI and properties files the value runs to the line's end
            // (`password: blue sky over Berlin`), and the words after the
            // first would leak.
            let e = if self.line_end_values[ri] {
                setting_value_end(v, m_start, s, e)
            } else {
                e
            };
            // A quoted value with blanks in it (`password = "Xk9qT2 hk2Goc
            // zpEjmq"`): the string runs to its closing quote.
            let e = if self.quoted_values[ri] {
                quoted_value_end(v, s, e)
            } else {
                e
            };
            if m.class == Class::Secret {
                found.push((v[s..e].to_vec(), meta));
            }
            lo = lo.min(m_start as u32);
            hi = hi.max(m_start as u32);
            self.push(hits, views, layer, s, e, meta);
        }
        if let Some(l) = locs {
            if scratch.locs.len() <= ri {
                scratch.locs.resize_with(ri + 1, || None);
            }
            scratch.locs[ri] = Some(l);
        }
        (lo, hi)
    }

    fn path_allowed(&self, v: &[u8]) -> bool {
        self.allow_paths.iter().any(|p| v.starts_with(p))
    }

    pub fn pem_meta(&self) -> usize {
        self.rules
            .iter()
            .find(|r| matches!(r.matcher, Matcher::Pem))
            .map(|r| r.meta)
            .unwrap_or(0)
    }

    /// Finds `-----BEGIN … PRIVATE KEY…-----` and its END within
    /// [`MAX_PEM_BYTES`]; without an END, takes the run of key-body bytes.
    fn run_pem(&self, v: &[u8], layer: L, views: &Views, meta: usize, hits: &mut Vec<Hit>) -> bool {
        let mut to_end = false;
        let finder = &*F_BEGIN;
        let mut at = 0;
        while let Some(off) = finder.find(&v[at..]) {
            let s = at + off;
            let label_start = s + 11;
            let label_end = match memchr::memmem::find(
                &v[label_start..v.len().min(label_start + 64)],
                b"-----",
            ) {
                Some(p) => label_start + p,
                None => {
                    at = label_start;
                    continue;
                }
            };
            let label = &v[label_start..label_end];
            if memchr::memmem::find(label, b"PRIVATE KEY").is_none() {
                at = label_end;
                continue;
            }
            let body_start = label_end + 5;
            let window = &v[body_start..v.len().min(body_start + MAX_PEM_BYTES)];
            let end = match memchr::memmem::find(window, b"-----END ") {
                // `BEGIN … KEY----------END … KEY-----`: a frame with no key.
                Some(p)
                    if window[..p]
                        .iter()
                        .filter(|b| b.is_ascii_alphanumeric())
                        .count()
                        < MIN_PEM_BODY =>
                {
                    at = body_start + p;
                    continue;
                }
                Some(p) => {
                    let e0 = body_start + p + 9;
                    match memchr::memmem::find(&v[e0..v.len().min(e0 + 64)], b"-----") {
                        Some(q) => e0 + q + 5,
                        None => e0,
                    }
                }
                None => {
                    let run = window
                        .iter()
                        .position(|&b| !is_pem_body(b))
                        .map_or(body_start + window.len(), |p| body_start + p);
                    if run == v.len() {
                        to_end = true;
                    }
                    run
                }
            };
            self.push(hits, views, layer, s, end, meta);
            at = end.max(s + 1);
        }
        to_end
    }

    /// A line following an unterminated BEGIN: key body, headers, or END.
    fn pem_continuation(&self, raw: &[u8], open: &mut usize) -> bool {
        let t = raw.trim_ascii();
        if memchr::memmem::find(t, b"-----END ").is_some() {
            *open = 0;
            return true;
        }
        if t.is_empty() || !t.iter().all(|&b| is_pem_body(b)) {
            *open = 0;
            return false;
        }
        *open -= 1;
        true
    }

    fn run_other_home(&self, v: &[u8], layer: L, views: &Views, meta: usize, hits: &mut Vec<Hit>) {
        {
            for (p, s) in home_prefixes(v) {
                let len = v[s..]
                    .iter()
                    .take(65)
                    .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')))
                    .unwrap_or(v.len() - s);
                if len == 0 || len > 64 {
                    continue;
                }
                let name = &v[s..s + len];
                if let Some(h) = &self.home {
                    let tail = &v[p..];
                    if tail.starts_with(h) && !tail.get(h.len()).is_some_and(|&b| is_alnum(b)) {
                        continue;
                    }
                }
                let l = lower(name);
                if HOME_NAME_STOPLIST.iter().any(|w| l == w.as_bytes())
                    || name.iter().all(|&b| b == b'.')
                {
                    continue;
                }
                if self.path_allowed(&v[p..s + len]) || self.allow_values.iter().any(|a| a == name)
                {
                    continue;
                }
                self.push(hits, views, layer, s, s + len, meta);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_data_uri(
        &self,
        v: &[u8],
        layer: L,
        views: &Views,
        meta: usize,
        scratch: &mut Scratch,
        known: &Known,
        found: &mut Vec<(Vec<u8>, usize)>,
        hits: &mut Vec<Hit>,
    ) {
        let finder = &*F_B64;
        let mut at = 0;
        while let Some(off) = finder.find(&v[at..]) {
            let p = at + off;
            let s = p + 8;
            let len = v[s..]
                .iter()
                .position(|&b| {
                    !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
                })
                .unwrap_or(v.len() - s);
            at = s + len.max(1);
            if at > v.len() {
                at = v.len();
            }
            let head_start = p.saturating_sub(100);
            let head = &v[head_start..p];
            let Some(d) = memchr::memmem::rfind(head, b"data:") else {
                continue;
            };
            let mime = lower(&head[d + 5..]);
            if mime.starts_with(b"image/") || mime.starts_with(b"font/") || len < 16 {
                continue;
            }
            let mut dec = std::mem::take(&mut scratch.b64);
            if b64_decode(&v[s..s + len], &mut dec, MAX_B64_DECODE) {
                let mut inner = Vec::new();
                let mut inner_found = Vec::new();
                let empty = Views::default();
                let mut sub = Scratch::default();
                self.scan_view(
                    &dec,
                    L { k: 0, base: 0 },
                    &empty,
                    &mut sub,
                    known,
                    &mut inner_found,
                    &mut inner,
                    1,
                    None,
                );
                // The most specific inner rule (catalogue order) names the payload.
                if let Some(h) = inner.iter().min_by_key(|h| h.meta) {
                    let m = if self.metas[h.meta].class == Class::Secret {
                        h.meta
                    } else {
                        meta
                    };
                    found.push((v[s..s + len].to_vec(), m));
                    self.push(hits, views, layer, s, s + len, m);
                }
            }
            scratch.b64 = dec;
        }
    }

    /// The caller's home directory where it opens the first `"cwd":"…"`
    /// member (after `{` or `,`) of a line that starts as a JSON object, and
    /// is followed by `/` or the string's end: Claude Code writes one on
    /// every transcript line. There stage one reports exactly this span
    /// (the neighbours are not alphanumeric, `/root`'s stricter left edge
    /// included). `LineRedactor::home_first` decides whether the line
    /// around it lets the span be replaced before the scan; any other
    /// occurrence stays in the text, where the scan finds it as before.
    pub fn home_edits(&self, raw: &[u8], out: &mut Vec<Hit>) {
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(CWD_MEMBER));
        out.clear();
        if raw.first() != Some(&b'{') {
            return;
        }
        let Some(at) = FINDER.find(raw) else {
            return;
        };
        if !matches!(raw[at - 1], b'{' | b',') {
            return;
        }
        let s = at + CWD_MEMBER.len();
        // The spellings start with different bytes: one matches at most.
        if let Some((pat, meta)) = self.identity.homes.iter().find(|(pat, _)| {
            raw[s..].starts_with(pat) && matches!(raw.get(s + pat.len()), Some(b'/' | b'"'))
        }) {
            out.push(Hit {
                start: s,
                end: s + pat.len(),
                meta: *meta,
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn identity_hit(
        &self,
        v: &[u8],
        layer: L,
        views: &Views,
        hits: &mut Vec<Hit>,
        s: usize,
        e: usize,
        ni: usize,
    ) {
        {
            let (needle, meta) = self.identity.needles[ni];
            let prev = if s > 0 { Some(v[s - 1]) } else { None };
            let next = v.get(e).copied();
            let ok = match needle {
                Needle::Home { single } => {
                    // `/root` must not be the tail of `/var/root` or `~/root`.
                    let inside_segment = single
                        && prev.is_some_and(|b| {
                            is_alnum(b) || matches!(b, b'.' | b'_' | b'-' | b'~' | b'/')
                        });
                    !next.is_some_and(is_alnum) && !inside_segment
                }
                Needle::Word => !prev.is_some_and(is_alnum) && !next.is_some_and(is_alnum),
                Needle::Email => {
                    let w = |b: u8| is_alnum(b) || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-');
                    !prev.is_some_and(w) && !next.is_some_and(is_alnum)
                }
            };
            if ok {
                self.push(hits, views, layer, s, e, meta);
            }
        }
    }

    /// Spans of JSON values that are transcript plumbing, never secrets:
    /// ids, signatures, image data. The key must be one of
    /// [`ALLOWED_ID_KEYS`] (or `signature` / image `data`) and the value must
    /// have the plumbing's shape, so a secret pasted into such a field is
    /// still caught.
    /// Allowlisted value spans of a JSON line (see `mark_allowed`).
    pub fn allowed_spans(&self, v: &[u8], out: &mut Vec<(usize, usize)>) {
        self.mark_allowed(v, out)
    }

    fn mark_allowed(&self, v: &[u8], out: &mut Vec<(usize, usize)>) {
        mark_allowed(v, out);
    }
}

/// The bytes that can make up the name run of a keyword assignment, as the
/// generic rules' regexes see it: `[A-Za-z0-9_.-]` plus any byte of a
/// multi-byte character (under `(?i)` in Unicode mode the class also holds
/// U+212A KELVIN SIGN and U+017F LONG S; over-approximating is safe).
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') || b >= 0x80
}

/// Whitespace as `\s` sees it in Unicode mode, over-approximated the same
/// way: ASCII whitespace (with vertical tab and form feed) plus any
/// non-ASCII byte.
fn is_space_byte(b: u8) -> bool {
    is_ascii_space(b) || b >= 0x80
}

/// A byte of an ASCII word (`\w` without Unicode): what `\b` looks at.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `Check::FlagPassword`'s test: `Password`'s, and not a bare lower-case
/// word.
fn flag_password_ok(v: &[u8], next: Option<u8>) -> bool {
    !v.iter().all(u8::is_ascii_lowercase) && generic_ok(v, next, true, 0.0)
}

/// `Check::SecretPairs`: some value of the blank-separated `NAME=V` pairs
/// passes [`flag_password_ok`] (quotes around a value are not its bytes).
fn secret_pairs_ok(v: &[u8]) -> bool {
    let mut rest = v;
    while !rest.is_empty() {
        let Some(eq) = memchr::memchr(b'=', rest) else {
            return false;
        };
        rest = &rest[eq + 1..];
        let (val, after) = match rest.first() {
            Some(&q @ (b'"' | b'\'')) => {
                let end = memchr::memchr(q, &rest[1..]).map_or(rest.len(), |i| i + 1);
                (&rest[1..end], &rest[(end + 1).min(rest.len())..])
            }
            _ => {
                let end = rest
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if flag_password_ok(val, None) {
            return true;
        }
        rest = after.trim_ascii_start();
    }
    false
}

/// Can a host name that `Check::Host` keeps end at `e` (see
/// [`Gate::HostEnd`])?
fn host_may_end(v: &[u8], e: usize) -> bool {
    match v.get(e) {
        Some(&b) if is_alnum(b) || b == b'-' => false,
        Some(b'.') => !v.get(e + 1).is_some_and(|&b| is_alnum(b)),
        _ => true,
    }
}

/// `\s` in ASCII mode.
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A byte of an unquoted generic value: the patterns' bare alternative is
/// `(?-u:[^\s"'`,;&|<>(){}\[\]\\])`.
fn is_bare_value_byte(b: u8) -> bool {
    !(is_ascii_space(b)
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b','
                | b';'
                | b'&'
                | b'|'
                | b'<'
                | b'>'
                | b'('
                | b')'
                | b'{'
                | b'}'
                | b'['
                | b']'
                | b'\\'
        ))
}

/// Does `v` hold a character that `(?i)` folds onto an ASCII letter of a
/// key name without being ASCII itself (U+017F LONG S = `C5 BF`, U+212A
/// KELVIN SIGN = `E2 84 AA`)? The keyword automaton is ASCII-only and
/// would not see such a name, so [`AssignGate`] stands aside.
fn has_case_fold_letters(v: &[u8]) -> bool {
    memchr::memchr2_iter(0xC5, 0xE2, v).any(|i| {
        let t = &v[i..];
        t.starts_with(b"\xC5\xBF") || t.starts_with(b"\xE2\x84\xAA")
    })
}

/// The gate in front of the keyword-assignment rules (`generic-secret`,
/// `generic-password`). Their regexes run over a whole segment when any of
/// their keywords occurs in it, and nearly every transcript line holds such
/// a keyword that is not an assignment of a secret (`"input_tokens":123`
/// has `token`), so ungated they cost a full regex pass per line.
///
/// Why skipping is exact: every match of the gated alternatives is
/// `NAME-RUN NAME NAME-RUN ["']? \s* (:=|=>|=|:) \s* VALUE` with VALUE,
/// past an optional YAML tag (`rules::YAML_VALUE_TAG`, which
/// [`value_may_start`] steps over too), a quote or at least `min_value`
/// bare value bytes, or `--NAME[= ]…`, where
/// NAME is a key name. When `v` holds no non-ASCII case-fold letter, NAME
/// is ASCII, so it contains one of the rule's keywords (the keyword list
/// spells out every ASCII form of every name;
/// `rules::tests::assignment_keywords_cover_every_key_name` checks it), and
/// the automaton reports that occurrence. From its end, the bytes up to the
/// operator are name bytes, at most one quote and spaces, which
/// [`AssignGate::may_follow`] skips with over-approximated classes; after
/// each operator reading it tries every start the spaces allow for a quote
/// or a long enough bare run. The `--NAME ` form has `--` within the nine
/// bytes before the keyword (`--client-secret`) and a space right after.
/// So a segment none of whose keyword occurrences passes holds no match,
/// and not running the regex there changes nothing. Other alternatives
/// (`mysql … -p`, `sshpass -p`, `--pass`) are keyed on keywords that skip
/// the gate (`Engine::kw_ungated`).
#[derive(Default)]
struct AssignGate {
    /// `None` until a gated keyword is seen: whether `v` has fold letters.
    folds: Option<bool>,
    /// The last name run skipped: where the skip started, where the run
    /// ended, the value length asked for, and the answer. Keyword
    /// occurrences come in end order, so one ending inside the same run
    /// reuses the answer and the gate stays linear in `v`.
    run: Option<(usize, usize, usize, bool)>,
    /// `None` until a [`Gate::Base64Value`] rule asks (one per `echo`):
    /// whether the segment holds a candidate value. One `min` and `eol`
    /// per `echo` (the engine's two rules).
    b64_value: [Option<bool>; 2],
    /// `None` until a [`Gate::CookiePair`] rule asks.
    cookie_pair: Option<bool>,
    /// `None` until a [`Gate::SlashPair`] rule asks.
    slash_pair: Option<bool>,
}

impl AssignGate {
    fn may_follow(&mut self, v: &[u8], m: &KwMatch, min_value: usize) -> bool {
        if *self.folds.get_or_insert_with(|| has_case_fold_letters(v)) {
            return true;
        }
        let e = m.end;
        if v.get(e) == Some(&b' ')
            && memchr::memmem::find(&v[m.start.saturating_sub(9)..m.start], b"--").is_some()
        {
            return true;
        }
        if let Some((from, end, min, ok)) = self.run {
            if from <= e && e <= end && min == min_value {
                return ok;
            }
        }
        let mut i = e;
        while i < v.len() && is_name_byte(v[i]) {
            i += 1;
        }
        let run_end = i;
        let mut ok = operator_follows(v, i, min_value);
        // A Go declaration's type between name and operator (`name string
        // = …`): the patterns' `(?:\s+(?:\[\]byte|[A-Za-z_]\w{0,20}))?`.
        let mut j = i;
        while !ok && j < v.len() && is_space_byte(v[j]) {
            j += 1;
        }
        if !ok
            && j > i
            && j < v.len()
            && (v[j].is_ascii_alphabetic() || v[j] == b'_' || v[j] == b'[')
        {
            while j < v.len()
                && (v[j].is_ascii_alphanumeric() || matches!(v[j], b'_' | b'[' | b']'))
            {
                j += 1;
            }
            ok = operator_follows(v, j, min_value);
        }
        self.run = Some((e, run_end, min_value, ok));
        ok
    }
}

/// From `i` (just after a key name), the rest of `assign_q!`: an optional
/// quote, an optional `]` (an index: `ENV["API_TOKEN"] = …`), spaces, an
/// operator (`:::=`, `::=`, `:=`, `??=`, `?=`, `.=`, `||=`, `=>`, `=`, `:`,
/// or `,` after a quote), and a value that may start after it.
fn operator_follows(v: &[u8], mut i: usize, min_value: usize) -> bool {
    let quoted = i < v.len() && matches!(v[i], b'"' | b'\'');
    if quoted {
        i += 1;
    }
    let indexed = i < v.len() && v[i] == b']';
    if indexed {
        i += 1;
    }
    while i < v.len() && is_space_byte(v[i]) {
        i += 1;
    }
    match v.get(i) {
        Some(b':') | Some(b'=') | Some(b'?') | Some(b'.') | Some(b'|') => {
            // The operator's length: `:::=`, `::=`, `:=`, `??=`, `?=`,
            // `.=`, `||=`, `=>`.
            let op = [
                &b":::="[..],
                b"::=",
                b":=",
                b"??=",
                b"?=",
                b".=",
                b"||=",
                b"=>",
            ]
            .iter()
            .find(|o| v[i..].starts_with(o))
            .map_or(1, |o| o.len());
            (!matches!(v[i], b'?' | b'.' | b'|') && value_may_start(v, i + 1, min_value))
                || (op > 1 && value_may_start(v, i + op, min_value))
        }
        Some(b',') => quoted && !indexed && value_may_start(v, i + 1, min_value),
        _ => false,
    }
}

/// See [`Gate::ValueAfter`]: from `e`, past any separator bytes, do
/// `min_value` value bytes follow, the first a letter or digit?
fn value_follows(v: &[u8], e: usize, min_value: usize) -> bool {
    let rest = &v[e.min(v.len())..];
    let skip = rest
        .iter()
        .take_while(|&&b| {
            matches!(
                b,
                b' ' | b'\t' | b'"' | b'\'' | b'`' | b':' | b'=' | b'>' | b'-' | b']' | b','
            )
        })
        .count();
    let value = &rest[skip..];
    value.first().is_some_and(|&b| is_alnum(b))
        && value
            .iter()
            .take(min_value)
            .take_while(|&&b| is_alnum(b) || matches!(b, b'_' | b'+' | b'/' | b'=' | b'.' | b'-'))
            .count()
            >= min_value
}

/// [`Gate::BytesAssigned`], [`Gate::SecretNameBefore`]: before `s`, past
/// ASCII whitespace (and, with `colon`, a `:` and whitespace again), does
/// the name run (`[A-Za-z0-9_]`) ending there hold `secret`, `token`,
/// `key` or `passw` (ASCII case-insensitive)?
fn secret_name_before(v: &[u8], s: usize, colon: bool) -> bool {
    let mut k = s;
    while k > 0 && is_ascii_space(v[k - 1]) {
        k -= 1;
    }
    if colon {
        if k == 0 || v[k - 1] != b':' {
            return false;
        }
        k -= 1;
        while k > 0 && is_ascii_space(v[k - 1]) {
            k -= 1;
        }
    }
    let end = k;
    while k > 0 && is_word_byte(v[k - 1]) {
        k -= 1;
    }
    let name = &v[k..end];
    [&b"secret"[..], b"token", b"key", b"passw"]
        .iter()
        .any(|w| name.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
}

/// [`Gate::UpperLink`] for the keyword occurrence `v[s..e]`.
fn upper_link(v: &[u8], s: usize, e: usize) -> bool {
    no_lower_case(&v[s..e]) && prose_link_follows(v, e)
}

/// [`Gate::Upper`]: a keyword occurrence with no lower-case letter.
fn no_lower_case(k: &[u8]) -> bool {
    !k.iter().any(u8::is_ascii_lowercase)
}

/// [`Gate::ValueAfterNow`] for a keyword occurrence ending at `e`.
fn value_after_now(v: &[u8], e: usize, min_value: usize) -> bool {
    value_follows(v, e, min_value) || {
        let k = e + v[e.min(v.len())..]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let rest = &v[k.min(v.len())..];
        rest.len() > 3
            && rest[..3].eq_ignore_ascii_case(b"now")
            && is_ascii_space(rest[3])
            && value_follows(v, k + 3, min_value)
    }
}

/// See [`Gate::UpperLink`]: past the rest of the name run from `e`, an
/// optional quote, blanks, then `is`, `was`, `to` or `=` and a blank?
fn prose_link_follows(v: &[u8], e: usize) -> bool {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let mut k = e;
    while k < v.len() && is_word_byte(v[k]) {
        k += 1;
    }
    if k < v.len() && matches!(v[k], b'"' | b'\'' | b'`') {
        k += 1;
    }
    let j = k + v[k.min(v.len())..].iter().take_while(|b| blank(b)).count();
    if j == k {
        return false;
    }
    let rest = &v[j..];
    [&b"is"[..], b"was", b"to", b"="]
        .iter()
        .any(|w| rest.starts_with(w) && rest.get(w.len()).is_some_and(blank))
}

/// See [`Gate::TableCell`]: does the name run around `v[start..end]` open
/// its line (past blanks and a `|`) and end before a `|` or two blanks?
fn table_cell(v: &[u8], start: usize, end: usize) -> bool {
    let name = |b: u8| is_word_byte(b) || b == b'.' || b == b'-';
    let blank = |b: u8| b == b' ' || b == b'\t';
    let mut e = end;
    while e < v.len() && name(v[e]) {
        e += 1;
    }
    let mut k = e;
    while k < v.len() && blank(v[k]) {
        k += 1;
    }
    if !(v.get(k) == Some(&b'|') || k - e >= 2) {
        return false;
    }
    let mut s = start;
    while s > 0 && name(v[s - 1]) {
        s -= 1;
    }
    while s > 0 && blank(v[s - 1]) {
        s -= 1;
    }
    if s > 0 && v[s - 1] == b'|' {
        s -= 1;
        while s > 0 && blank(v[s - 1]) {
            s -= 1;
        }
    }
    s == 0 || matches!(v[s - 1], b'"' | b'\n')
}

/// See [`Gate::UserinfoAt`]: from `e` (just after a `://`), is the first
/// byte the userinfo cannot hold an `@`, with a `:` before it?
fn userinfo_may_follow(v: &[u8], e: usize) -> bool {
    let rest = &v[e.min(v.len())..];
    let stop = rest.iter().position(|&b| {
        is_ascii_space(b) || matches!(b, b'/' | b'@' | b':' | b'"' | b'\'' | b'<' | b'>' | b'`')
    });
    match stop {
        Some(i) if rest[i] == b':' => rest[i + 1..]
            .iter()
            .take_while(|&&b| !is_ascii_space(b) && !matches!(b, b'"' | b'\'' | b'<' | b'>' | b'`'))
            .any(|&b| b == b'@'),
        _ => false,
    }
}

/// Can a generic value (`'…'`, `"…"` or `min_value` bare bytes) start at
/// `j` or after spaces from `j`? Tries every start the `\s*` could leave.
fn value_may_start(v: &[u8], j: usize, min_value: usize) -> bool {
    let mut p = j;
    loop {
        match v.get(p) {
            None => return false,
            Some(b'"') | Some(b'\'') | Some(b'`') => return true,
            Some(_) => {
                let bare = v[p..]
                    .iter()
                    .take(min_value)
                    .take_while(|&&b| is_bare_value_byte(b))
                    .count();
                if bare == min_value {
                    return true;
                }
            }
        }
        if !is_space_byte(v[p]) {
            // The patterns' `rules::YAML_VALUE_TAG` before the value
            // (`!!binary <base64>`): the value starts past it and its
            // spaces.
            return yaml_value_tag(&v[p..]).is_some_and(|t| value_may_start(v, p + t, min_value));
        }
        p += 1;
    }
}

/// Where the bare value `v[s..e]` of a key-assignment match starting at
/// `start` ends when the setting is a line of a YAML, INI or properties
/// file: the match starts its line (blanks before it; or a JSON string's
/// content, in a decoded view), the operator is a
/// `:` or an `=` with a blank before it (`NAME=value cmd` is a shell
/// command's environment, whose value ends at the blank), and a blank
/// follows the value. Then the value runs to the end of the line (or a
/// quote), short of a trailing comment (` #`, ` ;`) and blanks; otherwise
/// it ends at `e`.
fn setting_value_end(v: &[u8], start: usize, s: usize, e: usize) -> usize {
    let blank = |b: u8| b == b' ' || b == b'\t';
    if !v.get(e).is_some_and(|&b| blank(b)) || s == 0 || v[start] == b'-' {
        return e;
    }
    let mut op = s;
    while op > start && blank(v[op - 1]) {
        op -= 1;
    }
    let spaced_eq = op >= 2 && v[op - 1] == b'=' && blank(v[op - 2]);
    if op == s || !(v[op - 1] == b':' || spaced_eq) {
        return e;
    }
    // The line starts at a newline or at the text's start, or it is a JSON
    // string's content (a decoded view keeps the quotes around it).
    let mut k = start;
    while k > 0 && blank(v[k - 1]) {
        k -= 1;
    }
    let mut q = k.saturating_sub(1);
    while q > 0 && blank(v[q - 1]) {
        q -= 1;
    }
    let opens_string = k > 0 && v[k - 1] == b'"' && q > 0 && matches!(v[q - 1], b':' | b'[' | b',');
    if !(k == 0 || v[k - 1] == b'\n' || opens_string) {
        return e;
    }
    // It ends at a newline or a quote (a JSON string's end; stopping early
    // is never less safe than the first word).
    let line_end = memchr::memchr3(b'\n', b'"', b'\r', &v[e..]).map_or(v.len(), |i| e + i);
    let mut end = v[e..line_end]
        .windows(2)
        .position(|w| blank(w[0]) && matches!(w[1], b'#' | b';'))
        .map_or(line_end, |c| e + c);
    while end > e && blank(v[end - 1]) {
        end -= 1;
    }
    end
}

/// Where the value `v[s..e]` of a key-assignment match ends when it opens
/// a quoted string that goes on past a blank (`password = "Xk9qT2 hk2Goc
/// zpEjmq"`): at the string's closing quote, on the same line and within
/// [`QUOTED_VALUE_REACH`] bytes, short of trailing blanks; the words after
/// the first would leak. A string quoted with `\"` (a JSON string's
/// content, read undecoded) ends at its `\"`; any other escape, a
/// newline, or no closing quote in reach leaves the value at `e`. The
/// first word was already judged a credential: this only redacts the rest
/// of the same value.
fn quoted_value_end(v: &[u8], s: usize, e: usize) -> usize {
    let blank = |b: u8| b == b' ' || b == b'\t';
    if s == 0 || !matches!(v[s - 1], b'"' | b'\'') || !v.get(e).is_some_and(|&b| blank(b)) {
        return e;
    }
    let q = v[s - 1];
    let escaped = s >= 2 && v[s - 2] == b'\\';
    let reach = &v[e..v.len().min(e + QUOTED_VALUE_REACH)];
    let Some(i) = reach
        .iter()
        .position(|&b| b == q || b == b'\\' || b == b'\n' || b == b'\r')
    else {
        return e;
    };
    let closes = if escaped {
        reach[i] == b'\\' && reach.get(i + 1) == Some(&q)
    } else {
        reach[i] == q
    };
    if !closes {
        return e;
    }
    let mut end = e + i;
    while end > e && blank(v[end - 1]) {
        end -= 1;
    }
    end
}

/// How far [`quoted_value_end`] looks for a closing quote.
const QUOTED_VALUE_REACH: usize = 256;

/// The length of the YAML tag `rules::YAML_VALUE_TAG` steps over (`!!binary`,
/// `!binary`, `!!str`, `!str`, ASCII case-insensitive) at the start of `t`,
/// when a space or tab follows it.
fn yaml_value_tag(t: &[u8]) -> Option<usize> {
    let bangs = t.iter().take(2).take_while(|&&b| b == b'!').count();
    if bangs == 0 {
        return None;
    }
    [&b"binary"[..], b"str"].iter().find_map(|w| {
        let end = bangs + w.len();
        (t.len() > end && t[bangs..end].eq_ignore_ascii_case(w) && matches!(t[end], b' ' | b'\t'))
            .then_some(end)
    })
}

/// See [`Engine::allowed_spans`]. Returns whether two `":"` occurrences
/// overlap anywhere (`":":"`), which [`derive_allowed`] cannot follow.
fn mark_allowed(v: &[u8], out: &mut Vec<(usize, usize)>) -> bool {
    out.clear();
    let mut overlap = false;
    // Compact JSON (what Claude Code writes): every member is `"key":`.
    // Walking the `":"` separators is one SIMD search plus a short look
    // back per member. Non-overlapping, left to right, as
    // `memmem::find_iter`.
    let mut at = 0;
    while let Some(p) = next_member(v, at) {
        at = p + 3;
        // The occurrence at p + 2 (if any) is skipped by this walk.
        overlap |= v.get(p + 3..p + 5) == Some(b":\"");
        if let Some(span) = allowed_member(v, p) {
            out.push(span);
        }
    }
    overlap
}

/// The keys whose base64 value is allowlisted: a thinking block's
/// signature (kind 0) and an image's data (kind 1, with `"type":"base64"`
/// before it). Ids ([`ALLOWED_ID_KEYS`]) are kind 2.
const ALLOWED_B64_KEYS: [&str; 2] = ["signature", "data"];

/// Which kind of allowlisted member a key opens (see [`ALLOWED_B64_KEYS`]).
fn allowed_key(key: &[u8]) -> Option<u8> {
    if let Some(i) = ALLOWED_B64_KEYS.iter().position(|a| a.as_bytes() == key) {
        return Some(i as u8);
    }
    ALLOWED_ID_KEYS
        .iter()
        .any(|a| a.as_bytes() == key)
        .then_some(2)
}

/// The last bytes of the keys [`allowed_key`] knows.
static ALLOWED_KEY_LAST: [bool; 256] = {
    let mut t = [false; 256];
    let lists: [&[&str]; 2] = [&ALLOWED_B64_KEYS, ALLOWED_ID_KEYS];
    let mut l = 0;
    while l < lists.len() {
        let mut i = 0;
        while i < lists[l].len() {
            let k = lists[l][i].as_bytes();
            t[k[k.len() - 1] as usize] = true;
            i += 1;
        }
        l += 1;
    }
    t
};

/// Bytes before a member's `":"` that decide whether it is allowlisted:
/// the `"type":"base64"` look-back of image data (the key's own look-back
/// is 40).
const MEMBER_LOOK_BACK: usize = 200;

/// The allowlisted value span of the member whose `":"` is at `p`, if any.
/// Reads `v[p - MEMBER_LOOK_BACK .. p]` and the value up to its closing
/// quote.
fn allowed_member(v: &[u8], p: usize) -> Option<(usize, usize)> {
    // Most members' keys (`type`, `text`, `content`, …) end in a byte no
    // allowed key ends in: one load settles them.
    if !ALLOWED_KEY_LAST[usize::from(*v.get(p.checked_sub(1)?)?)] {
        return None;
    }
    // Keys are short: a plain backward loop, not a vector search's set-up.
    let back = p.saturating_sub(40);
    let q = v[back..p].iter().rposition(|&b| b == b'"')?;
    let which = allowed_key(&v[back + q + 1..p])?;
    let s = p + 3;
    // An id value is at most 128 bytes: its closing quote is looked for no
    // further (past that the answer is no either way).
    let reach = if which == 2 { 129 } else { usize::MAX };
    let len = memchr::memchr(b'"', &v[s..s.saturating_add(reach).min(v.len())])?;
    let val = &v[s..s + len];
    let ok = match which {
        0 => all_b64(val),
        1 => {
            all_b64(val)
                && F_TYPE_B64
                    .find(&v[p.saturating_sub(MEMBER_LOOK_BACK)..p])
                    .is_some()
        }
        _ => val.len() <= 128 && all_id_chars(val),
    };
    (ok && len > 0).then_some((s, s + len))
}

/// Does `v` hold an upper-case letter, a lower-case letter and a digit?
/// The value test of `Check::ProseSecret`: `generic_ok`, and a value
/// shorter than `rules::PROSE_SHORT_VALUE` mixes upper case, lower case
/// and digits.
pub fn prose_secret_ok(v: &[u8], next: Option<u8>, min_entropy: f64) -> bool {
    generic_ok(v, next, false, min_entropy)
        && (v.len() >= crate::rules::PROSE_SHORT_VALUE || mixed_case_digits(v))
}

fn mixed_case_digits(v: &[u8]) -> bool {
    v.iter().any(u8::is_ascii_uppercase)
        && v.iter().any(u8::is_ascii_lowercase)
        && v.iter().any(u8::is_ascii_digit)
}

/// [`mark_allowed`] of `new`, which is a text whose spans were `old` with
/// each `(start, end, put_len)` of `edits` (sorted, disjoint, old offsets)
/// replaced by a placeholder of `put_len` bytes, without walking all of
/// `new`. Only for an `old` without overlapping `":"` occurrences.
///
/// Why it is exact: a placeholder holds no quote, so `new`'s `":"`
/// occurrences are `old`'s outside the edits, shifted, and (with none
/// overlapping) a walk can start anywhere. A member at `p` depends on
/// `new[p - MEMBER_LOOK_BACK .. p]` and its value up to the next quote. So
/// around each placeholder at `ps..pe` only members from two bytes before
/// the last quote ahead of `ps` (an earlier member's value ends at or
/// before that quote) up to `pe + MEMBER_LOOK_BACK` are looked at again;
/// every other member reads the same bytes as in `old` and keeps its
/// answer, shifted.
///
/// `windows` is a buffer, reused across calls.
pub fn derive_allowed(
    new: &[u8],
    old: &[(usize, usize)],
    edits: &[(usize, usize, usize)],
    out: &mut Vec<(usize, usize)>,
    windows: &mut Vec<(usize, usize, isize)>,
) {
    out.clear();
    // Windows of `new` to recompute, each with the shift of the members
    // that follow it (old offset + shift = new offset).
    windows.clear();
    let mut delta = 0isize;
    for &(s, e, put) in edits {
        let ps = (s as isize + delta) as usize;
        delta += put as isize - (e - s) as isize;
        let pe = ps + put;
        let w0 = memchr::memrchr(b'"', &new[..ps]).map_or(0, |q| q.saturating_sub(2));
        let w1 = (pe + MEMBER_LOOK_BACK).min(new.len());
        match windows.last_mut() {
            Some(last) if w0 <= last.1 => {
                last.1 = last.1.max(w1);
                last.2 = delta;
            }
            _ => windows.push((w0, w1, delta)),
        }
    }
    // Positions as isize: an old member inside an edit can map before 0.
    let at_new = |span: (usize, usize), shift: isize| span.0 as isize - 3 + shift;
    let mut oi = 0;
    let (mut gap_start, mut gap_shift) = (0isize, 0isize);
    let end = (new.len(), new.len(), 0isize);
    for &(w0, w1, shift_after) in windows.iter().chain(std::iter::once(&end)) {
        // Old members whose `":"` lands in the gap before this window.
        while oi < old.len() {
            let p = at_new(old[oi], gap_shift);
            if p >= w0 as isize {
                break;
            }
            if p >= gap_start {
                out.push((
                    (old[oi].0 as isize + gap_shift) as usize,
                    (old[oi].1 as isize + gap_shift) as usize,
                ));
            }
            oi += 1;
        }
        let mut at = w0;
        while let Some(p) = next_member(new, at.min(new.len())) {
            if p >= w1 {
                break;
            }
            at = p + 3;
            if let Some(span) = allowed_member(new, p) {
                out.push(span);
            }
        }
        // Skip old members that fell inside this window.
        while oi < old.len() && at_new(old[oi], shift_after) < w1 as isize {
            oi += 1;
        }
        gap_start = w1 as isize;
        gap_shift = shift_after;
    }
}

#[inline(always)]
fn is_alnum_branchless(b: u8) -> bool {
    (b.wrapping_sub(b'A') < 26) | (b.wrapping_sub(b'a') < 26) | (b.wrapping_sub(b'0') < 10)
}

/// Bytes per block in the all-bytes-in-class checks below: a block is
/// checked without early exit so the compiler turns it into SIMD compares.
const CLASS_BLOCK: usize = 32;

/// Byte class tables for the all-bytes-in-class checks: one load per byte,
/// no branch, where the compare chain cost seven instructions per byte on
/// ids too short for SIMD blocks.
const fn class_table(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}
static B64_CLASS: [bool; 256] = class_table(b"+/=");
static ID_CLASS: [bool; 256] = class_table(b"-_");

/// Is every byte base64 (standard alphabet plus `=`)? The allowlist check
/// runs over every byte of every signature and image, so long values go in
/// branch-free blocks the compiler turns into SIMD compares.
fn all_b64(v: &[u8]) -> bool {
    all_in_blocks(
        v,
        |b| is_alnum_branchless(b) | (b == b'+') | (b == b'/') | (b == b'='),
        &B64_CLASS,
    )
}

/// Is every byte an id byte (`[A-Za-z0-9_-]`)? A uuid is one block and a
/// four-byte tail.
fn all_id_chars(v: &[u8]) -> bool {
    all_in_blocks(
        v,
        |b| is_alnum_branchless(b) | (b == b'-') | (b == b'_'),
        &ID_CLASS,
    )
}

/// Is `ok` true of every byte? `ok` and `table` must agree: whole blocks go
/// through `ok` (branch-free compares the compiler makes SIMD), the tail
/// through the table.
#[inline(always)]
fn all_in_blocks(v: &[u8], ok: impl Fn(u8) -> bool, table: &[bool; 256]) -> bool {
    let mut blocks = v.chunks_exact(CLASS_BLOCK);
    for c in &mut blocks {
        if !c.iter().fold(true, |acc, &b| acc & ok(b)) {
            return false;
        }
    }
    in_class(blocks.remainder(), table)
}

fn in_class(v: &[u8], table: &[bool; 256]) -> bool {
    v.iter().fold(true, |acc, &b| acc & table[b as usize])
}

/// Could `v` hold a MAC address? Looks for `h h sep h h sep` around each
/// `:`/`-`; a few compares per separator, far cheaper than the regex.
#[cfg(test)]
fn maybe_mac(v: &[u8]) -> bool {
    memchr::memchr2_iter(b':', b'-', v).any(|i| mac_at(v, i))
}

/// `hh` `sep` `hh` `sep` … around the separator at `i`.
fn mac_at(v: &[u8], i: usize) -> bool {
    let hex = |i: usize| v.get(i).is_some_and(u8::is_ascii_hexdigit);
    i >= 2
        && hex(i - 1)
        && hex(i - 2)
        && (0..4).all(|g| {
            let j = i + 3 * g;
            hex(j + 1) && hex(j + 2) && v.get(j + 3) == Some(&v[i])
        })
}

/// `fe8x:`…`febx:` or `fcxx:`/`fdxx:` before the `:` at `i`.
fn ipv6_at(v: &[u8], i: usize) -> bool {
    i >= 4 && {
        let g = &v[i - 4..i];
        g.iter().all(u8::is_ascii_hexdigit)
            && matches!(g[0] | 0x20, b'f')
            && (matches!(g[1] | 0x20, b'c' | b'd')
                || (matches!(g[1] | 0x20, b'e')
                    && matches!(g[2] | 0x20, b'8' | b'9' | b'a' | b'b')))
    }
}

/// Is hit `h` wholly inside one of `spans` (sorted by start, disjoint)?
/// Binary search: a long line can hold thousands of both.
fn within(spans: &[(usize, usize)], h: Hit) -> bool {
    let i = spans.partition_point(|&(s, _)| s <= h.start);
    i > 0 && h.end <= spans[i - 1].1
}

/// Removes from `hits[from..]` every hit lying wholly inside one of the
/// sorted `spans` (order after `from` is not kept).
fn drop_within(hits: &mut Vec<Hit>, from: usize, spans: &[(usize, usize)]) {
    let mut i = from;
    while i < hits.len() {
        if within(spans, hits[i]) {
            hits.swap_remove(i);
        } else {
            i += 1;
        }
    }
}

/// Could `v` hold a link-local or unique-local IPv6 address? Looks for
/// `fe8x:`…`febx:` or `fcxx:`/`fdxx:` before each `:`.
/// Positions per block in [`shape_gates`]: a block is tested without early
/// exit so the compiler turns the test into SIMD compares.
const GATE_BLOCK: usize = 64;

/// [`maybe_mac`] and [`maybe_ipv6`] in one pass. `:` and `-` are on every
/// JSON member, uuid and timestamp, so visiting each separator costs more
/// than the rest of the gate; instead a branch-free test over whole blocks
/// (a MAC has its separator byte at `i`, `i+3`, … `i+12`; a private IPv6
/// has `f` four bytes before a `:`) picks the rare blocks worth the exact
/// per-position checks.
fn shape_gates(v: &[u8]) -> (bool, bool) {
    let n = v.len();
    let (mut mac, mut ipv6) = (false, false);
    // One fused pass over the positions that have all the bytes either
    // test reads (`i + 12`); a block is tested with a necessary condition
    // (MAC: separator repeated at `i + 3` and `i + 6`; IPv6: `f` four
    // bytes before a `:`) and only a block that passes gets the exact
    // per-position checks. ISO dates, clock times and uuids repeat their
    // separators at most twice three bytes apart, so the condition is rare.
    let m = n.saturating_sub(12);
    let mut at = 0;
    while at < m && !(mac && ipv6) {
        let end = (at + GATE_BLOCK).min(m);
        let len = end - at;
        let c0 = &v[at..at + len];
        let c3 = &v[at + 3..at + 3 + len];
        let c4 = &v[at + 4..at + 4 + len];
        let c6 = &v[at + 6..at + 6 + len];
        let (mut am, mut av) = (0u8, 0u8);
        for (((&c, &d3), &d4), &d6) in c0.iter().zip(c3).zip(c4).zip(c6) {
            let sep = (c == b':') as u8 | (c == b'-') as u8;
            am |= sep & (d3 == c) as u8 & (d6 == c) as u8;
            av |= (d4 == b':') as u8 & ((c | 0x20) == b'f') as u8;
        }
        if am != 0 && !mac {
            // Candidate i needs v[i+12]: i < n - 12 = m, true for i < end.
            mac = (at..end).any(|i| mac_at(v, i));
        }
        if av != 0 && !ipv6 {
            ipv6 = (at + 4..end + 4).any(|i| v[i] == b':' && ipv6_at(v, i));
        }
        at = end;
    }
    // The last positions, too near the end for the MAC test, for IPv6:
    // colons at `m + 4 ..` (all of `4..n` when the text is short).
    if !ipv6 {
        ipv6 = (m + 4..n).any(|i| v[i] == b':' && ipv6_at(v, i));
    }
    (mac, ipv6)
}

/// Regex runs restricted to a zone (tests check the path is taken).
#[cfg(test)]
pub static ZONED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Matches whose group `groups` resolved (tests only).
#[cfg(test)]
pub static GROUPS_RESOLVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How far past a match's end its value checks read (`elided_after`
/// reads five bytes), plus margin.
const CHECK_REACH: usize = 8;

/// How far [`rule_zone`] looks for a stop byte on each side before giving
/// up (the whole segment is then searched, as without a zone).
const MAX_ZONE_WALK: usize = 512;

/// The stretch `(x, y)` of `v` on which a regex rule must be re-run, given
/// that stage one ran it on `prev` (of length `prev_len`; `v[..pre]` is a
/// prefix and `v[end..]` a suffix of it) and its matches that became hits
/// started from `hits.0` to `hits.1` (`u32::MAX` for none). `None`: search
/// all of `v`.
///
/// Why it is exact: `x <= pre - CHECK_REACH` and `y > end` are stop bytes
/// of the rule (or the ends of `v`): no match holds one past its first
/// byte. So a match starting before `x` ends by `x`, and reads (with its
/// look-arounds and value checks) only bytes the two texts share; the same
/// for a match starting at or after `y`. The leftmost-first iteration
/// therefore yields, before `x` and from `y` on, the same matches with the
/// same verdicts in both texts (each step picks among candidates that are
/// identical), and enters `x..y` at `x`. Stage one's hits all lay inside
/// the zone (checked here), so every hit of `v` is a match starting in
/// `x..y`, which the caller finds by searching from `x` and stopping at the
/// first match starting at `y` or later.
fn rule_zone(
    v: &[u8],
    prev_len: usize,
    pre: usize,
    end: usize,
    stops: &ByteSet,
    hits: (u32, u32),
) -> Option<(usize, usize)> {
    let mut x = pre.saturating_sub(CHECK_REACH);
    let floor = x.saturating_sub(MAX_ZONE_WALK);
    while x > 0 && !stops.contains(v[x]) {
        if x == floor {
            return None;
        }
        x -= 1;
    }
    let mut y = end + 1;
    let cap = y + MAX_ZONE_WALK;
    while y < v.len() && !stops.contains(v[y]) {
        if y == cap {
            return None;
        }
        y += 1;
    }
    let y = y.min(v.len());
    // The same stop byte in `prev`'s offsets.
    let y_prev = y + prev_len - v.len();
    let inside = hits.0 == u32::MAX || (hits.0 as usize >= x && (hits.1 as usize) < y_prev);
    inside.then_some((x, y))
}

/// The stretches `(x, y)` of `v` to search for windowed rule `rule`
/// (sorted, disjoint), from the occurrences `occ` of its keywords (in end
/// order; other rules' entries skipped): around each, from the last stop
/// byte at or before its start to the first one at or after its end (or
/// the ends of `v`).
///
/// Why it is exact: every match of the rule holds one of its keywords,
/// which the automaton reports, and holds no stop byte past its first; so
/// it starts at or after that occurrence's `x` and ends by its `y`, inside
/// a stretch. No match starts between two stretches, so the
/// leftmost-first iteration enters each at its `x` (a search from there
/// finds what the whole-text iteration finds) and, as in `rule_zone`,
/// finds the same matches searching up to `v[y]` and stopping at the first
/// match starting at `y` or later.
fn keyword_windows(
    v: &[u8],
    stops: &ByteSet,
    occ: &[(usize, usize, usize)],
    rule: usize,
    out: &mut Vec<(usize, usize)>,
) {
    out.clear();
    let mut cur: Option<(usize, usize)> = None;
    for &(r, ks, ke) in occ {
        if r != rule {
            continue;
        }
        if cur.is_some_and(|(cx, cy)| cx <= ks && ke <= cy) {
            continue;
        }
        let mut x = ks.min(v.len());
        while x > 0 && !stops.contains(v[x.min(v.len() - 1)]) {
            x -= 1;
        }
        let mut y = ke;
        while y < v.len() && !stops.contains(v[y]) {
            y += 1;
        }
        let w = (x, y.min(v.len()));
        out.push(w);
        cur = Some(w);
    }
    out.sort_unstable();
    let mut n = 0;
    for i in 0..out.len() {
        if n > 0 && out[i].0 <= out[n - 1].1 {
            out[n - 1].1 = out[n - 1].1.max(out[i].1);
        } else {
            out[n] = out[i];
            n += 1;
        }
    }
    out.truncate(n);
}

/// `(pre, end)` with `v[..pre]` a prefix and `v[end..]` a suffix of
/// `prev`, not overlapping in either text: `v[pre..end]` holds every byte
/// where the two differ.
fn shared_ends(prev: &[u8], v: &[u8]) -> (usize, usize) {
    let l = crate::keywords::common_suffix(prev, v);
    let end = v.len() - l;
    let pre = crate::keywords::common_prefix(prev, v)
        .min(end)
        .min(prev.len() - l);
    (pre, end)
}

/// How far a shape-gate candidate reads from the byte that decides it: a
/// MAC candidate at `i` reads `v[i - 2 ..= i + 12]`, an IPv6 one
/// `v[i - 4 ..= i]`.
const SHAPE_REACH: usize = 14;

/// [`shape_gates`] of `v`, given that both gates are false for `prev`, a
/// text sharing a prefix and a suffix with `v`. A candidate whose bytes all
/// lie in the shared prefix or suffix reads what the same candidate read in
/// `prev`, and failed there. The rest read some byte of the differing
/// middle, so lie within [`SHAPE_REACH`] bytes of it, and the gates of that
/// stretch are the gates of `v`.
fn shape_gates_around(v: &[u8], pre: usize, end: usize) -> (bool, bool) {
    shape_gates(&v[pre.saturating_sub(SHAPE_REACH)..(end + SHAPE_REACH + 1).min(v.len())])
}

#[cfg(test)]
fn shape_gates_after_edit(prev: &[u8], v: &[u8]) -> (bool, bool) {
    let (pre, end) = shared_ends(prev, v);
    shape_gates_around(v, pre, end)
}

#[cfg(test)]
fn maybe_ipv6(v: &[u8]) -> bool {
    memchr::memchr_iter(b':', v).any(|i| ipv6_at(v, i))
}

fn placeholder_spans(raw: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    for s in F_REDACTED.find_iter(raw) {
        let rest = &raw[s + 10..];
        let len = rest
            .iter()
            .take(crate::config::MAX_KIND_LEN + 1)
            .position(|&b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        if let Some(l) = len {
            if l > 0 && rest[l] == b']' {
                out.push((s, s + 10 + l + 1));
            }
        }
    }
}

fn is_pem_body(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'+' | b'/' | b'=' | b' ' | b'\t' | b'\r' | b'\n' | b':' | b',' | b'-' | b'.'
        )
}

/// Keys whose values are ids (uuids, `msg_…`, `toolu_…`, `req_…`, agent ids).
pub const ALLOWED_ID_KEYS: &[&str] = &[
    "id",
    "uuid",
    "parentUuid",
    "logicalParentUuid",
    "leafUuid",
    "sessionId",
    "session_id",
    "promptId",
    "requestId",
    "tool_use_id",
    "toolUseId",
    "sourceToolAssistantUUID",
    "agentId",
    "messageId",
];

/// Rewrites `raw` into `out`, replacing merged hit spans by placeholders.
/// Returns the merged spans (start, end, meta) for reporting.
pub fn apply(metas: &[Meta], raw: &[u8], hits: &mut [Hit], out: &mut Vec<u8>) -> Vec<Hit> {
    let mut merged = Vec::new();
    apply_into(metas, raw, hits, out, &mut merged);
    merged
}

/// [`apply`], leaving the merged spans in `merged` (cleared first): the
/// per-line path reuses that buffer.
pub fn apply_into(
    metas: &[Meta],
    raw: &[u8],
    hits: &mut [Hit],
    out: &mut Vec<u8>,
    merged: &mut Vec<Hit>,
) {
    hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end), h.meta));
    merged.clear();
    for &h in hits.iter() {
        if let Some(last) = merged.last_mut() {
            if h.start < last.end {
                let (lw, hw) = (last.end - last.start, h.end - h.start);
                if h.end > last.end {
                    last.end = h.end;
                }
                // The widest member names the merged span, except that a
                // secret always wins over identity/network (it must be
                // reported as the more serious kind).
                let lm = &metas[last.meta];
                let hm = &metas[h.meta];
                // Ties go to the earlier rule: the catalogue lists specific
                // provider rules before the generic keyword rules.
                if (hw > lw && hm.severity >= lm.severity)
                    || hm.severity > lm.severity
                    || (hw == lw && hm.severity == lm.severity && h.meta < last.meta)
                {
                    last.meta = h.meta;
                }
                continue;
            }
        }
        merged.push(h);
    }
    let mut at = 0;
    for h in merged.iter() {
        out.extend_from_slice(&raw[at..h.start]);
        out.extend_from_slice(&metas[h.meta].placeholder);
        at = h.end;
    }
    out.extend_from_slice(&raw[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// References, markup and paths that open with a sigil stay; literals
    /// that open with one (Django's keys, generated passwords) do not.
    #[test]
    fn sigil_led_values_are_references_only_when_they_read_as_one() {
        for r in [
            "$DB_PASSWORD",
            "${DB_PASSWORD}",
            "$(cat pw)",
            "$this->password",
            "%APPDATA%",
            "%(secret)s",
            "%%",
            "{{ secret }}",
            "*default_password",
            "**",
            "&anchor",
            "&amp;",
            "&#39;x",
            "@file.json",
            "@Value(x)",
            "@Microsoft.KeyVault(SecretUri=x)",
            "#{ENV}",
            "#comment",
            "~/secrets/db.txt",
            "/etc/secret",
            "./pw",
            "<your-password>",
            "<%= ENV %>",
            "[REDACTED]",
            "*netrw-passwd*",
            "$Id$",
            "$BASE_URL/a/#/b",
        ] {
            assert!(sigil_reference(r.as_bytes()), "{r} is a reference");
        }
        for l in [
            "$$q=w(=^7b3)p^dk",
            "%um8*%nl(mytbx0",
            "&y@a2c-l$mh+p3w6",
            "*(t4k_df#8zcp=#w",
            "@u4rs4zjhy8l%5v",
            "#)qu&r3s6^*wwr",
            "~!Abc123",
            "<7Fx!kq2",
            "[a!b2c",
            "$3cr3t!x",
        ] {
            assert!(!sigil_reference(l.as_bytes()), "{l} is a literal");
        }
        assert!(!sigil_reference(b"hunter2"));
    }

    /// [`b64_value`] as first written, a walk over every maximal run: the
    /// anchored version must agree with it.
    fn b64_value_by_runs(v: &[u8], min: usize, echo: bool, eol: bool) -> bool {
        let mut i = 0;
        while i < v.len() {
            if !is_b64_byte(v[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < v.len() && is_b64_byte(v[i]) {
                i += 1;
            }
            if i - start < min {
                continue;
            }
            if eol && !ends_line_after(v, i) {
                continue;
            }
            let mut j = start;
            if j > 0 && matches!(v[j - 1], b'"' | b'\'') {
                j -= 1;
            }
            let spaced = j;
            while j > 0 && is_ascii_space(v[j - 1]) {
                j -= 1;
            }
            if j > 0 && v[j - 1] == b':' {
                return true;
            }
            if echo && j < spaced {
                let before = &v[..j];
                let ends = |w: &[u8]| {
                    before.len() >= w.len()
                        && before[before.len() - w.len()..].eq_ignore_ascii_case(w)
                };
                if ends(b"echo") || ends(b"-n") {
                    return true;
                }
            }
        }
        false
    }

    #[test]
    fn home_prefixes_are_the_matches_of_one_automaton_over_all_four() {
        let ac = AhoCorasick::new([&b"/Users/"[..], b"/home/", b"\\Users\\", b"/Users\\"]).unwrap();
        let mut rng = crate::testkit::XorShift(0x40e5);
        let parts: &[&[u8]] = &[
            b"/",
            b"\\",
            b"Users",
            b"home",
            b"/home/",
            b"/Users/",
            b"\\Users\\",
            b"/Users\\",
            b"x",
            b"U",
            b"sers",
            b"hom",
            b"e/",
            "é".as_bytes(),
        ];
        let mut seen = 0;
        for _ in 0..100_000 {
            let n = (rng.next() % 16) as usize;
            let v = rng.concat(parts, n);
            let want: Vec<(usize, usize)> =
                ac.find_iter(&v).map(|m| (m.start(), m.end())).collect();
            seen += want.len();
            assert_eq!(
                home_prefixes(&v).collect::<Vec<_>>(),
                want,
                "{:?}",
                String::from_utf8_lossy(&v)
            );
        }
        assert!(seen > 50_000, "{seen}");
    }

    #[test]
    fn b64_value_from_anchors_agrees_with_the_run_walk() {
        let mut rng = crate::testkit::XorShift(0xb64_0001);
        let parts: &[&[u8]] = &[
            b":",
            b": ",
            b"\t",
            b"\n",
            b"\"",
            b"'",
            b"=",
            b"==",
            b" ",
            b"echo",
            b"ECHO",
            b"Echo ",
            b"-n",
            b"-N",
            b"x-n",
            b"ech",
            b"o",
            b"n",
            b"AbC+/09",
            b"QUJDREVGR0hJSktMTU5PUA",
            b"a",
            b"+/",
            b"data",
            "é".as_bytes(),
            b"{",
            b",",
            b"-",
        ];
        let mut agreed = [0usize; 2];
        for _ in 0..200_000 {
            let n = (rng.next() % 24) as usize;
            let v = rng.concat(parts, n);
            for (min, echo, eol) in [
                (24, true, false),
                (12, false, true),
                (4, true, true),
                (1, false, false),
            ] {
                let want = b64_value_by_runs(&v, min, echo, eol);
                assert_eq!(
                    b64_value(&v, min, echo, eol),
                    want,
                    "{:?} min {min} echo {echo} eol {eol}",
                    String::from_utf8_lossy(&v)
                );
                agreed[usize::from(want)] += 1;
            }
        }
        // Both answers occur often enough for the agreement to mean something.
        assert!(agreed[0] > 10_000 && agreed[1] > 10_000, "{agreed:?}");
    }

    /// Whether `AssignGate` lets rule `id` run on `v`, as `scan_view`
    /// decides it.
    fn gate_passes(id: &str, v: &[u8]) -> bool {
        let def = crate::rules::builtin()
            .into_iter()
            .find(|d| d.id == id)
            .unwrap();
        let pats: Vec<String> = def.keywords.iter().map(|k| k.to_string()).collect();
        let kw = Keywords::new(&pats).unwrap();
        let mut found = Vec::new();
        kw.find_all(v, &mut LaneBufs::default(), &mut found);
        let min = match id {
            "generic-secret" => crate::rules::GENERIC_MIN_VALUE,
            "aws-secret-access-key" => crate::rules::AWS_SECRET_KEY_LEN,
            "heroku-api-key" => crate::rules::UUID_LEN,
            _ => crate::rules::PASSWORD_MIN_VALUE,
        };
        let mut gate = AssignGate::default();
        found.iter().any(|m| {
            crate::rules::ASSIGN_UNGATED_KEYWORDS.contains(&pats[m.pattern].as_str())
                || gate.may_follow(v, m, min)
        })
    }

    /// 1 when rule `id`'s pattern `re` matches `v` (and then its
    /// assignment gate must pass), 0 otherwise.
    fn gate_holds_on_match(id: &str, re: &Regex, v: &[u8]) -> usize {
        if !re.is_match(v) {
            return 0;
        }
        assert!(gate_passes(id, v), "{id} {:?}", String::from_utf8_lossy(v));
        1
    }

    fn generic_regex(id: &str) -> Regex {
        let def = crate::rules::builtin()
            .into_iter()
            .find(|d| d.id == id)
            .unwrap();
        Regex::new(def.pattern).unwrap()
    }

    /// Session 18's gates (`TableCell`, `UpperLink`, `ValueAfterNow`) are
    /// necessary conditions of their rules' matches: wherever a rule's
    /// regex matches a random text built from the fragments they look at,
    /// one of the rule's keyword occurrences passes its gate.
    #[test]
    fn prose_and_table_gates_never_hide_a_match() {
        // Fragments every rule's texts draw on, and each rule's own.
        let common: &[&str] = &[
            " ",
            "  ",
            "\t",
            "\n",
            "\"",
            "'",
            "`",
            "=",
            ": ",
            "x",
            "_",
            "|",
            "Zq8vR2mK7pL4",
            "xN9wAb3Qe7Lm",
            "hunter2",
        ];
        let prose: &[&str] = &[
            "JWT_SECRET",
            "DB_PASSWORD",
            "ADMIN_PASS",
            "API_TOKEN",
            "SECRET_KEY_BASE",
            "db_pass",
            "token",
            "Token",
            "key",
            "secret",
            " is ",
            " was ",
            " to ",
            " = ",
            " now ",
            "now",
            "required",
            "Zq8vR2mK7pL4xN9wAb3Q",
        ];
        let typed: &[&str] = &[
            "apiToken",
            "myKey",
            "name",
            ": String = \"",
            ":string=\"",
            " = @\"",
            "=@\"",
            ": &str = \"",
            ":&[u8]=b\"",
            ": &'static str = r#\"",
            ": bytes = b\"",
            "bytes",
            "&str",
            "Zq8vR2mK7pL4\"",
        ];
        type GateFn = Box<dyn Fn(&[u8], usize, usize) -> bool>;
        let cases: Vec<(&str, &[&str], GateFn)> = vec![
            ("table-row-secret", prose, Box::new(table_cell)),
            ("named-secret-prose", prose, Box::new(upper_link)),
            ("named-password-prose", prose, Box::new(upper_link)),
            (
                "bare-secret-word-prose",
                prose,
                Box::new(|v: &[u8], _s: usize, e: usize| {
                    value_after_now(v, e, crate::rules::BARE_SECRET_MIN_VALUE)
                }),
            ),
            (
                "typed-secret-binding",
                typed,
                Box::new(|v: &[u8], s: usize, _e: usize| secret_name_before(v, s, false)),
            ),
            (
                "byte-string-secret",
                typed,
                Box::new(|v: &[u8], s: usize, _e: usize| secret_name_before(v, s, true)),
            ),
        ];
        let defs = crate::rules::builtin();
        let mut rng = crate::testkit::XorShift(0x2545_F491_4F6C_DD1D);
        for (id, own, gate) in &cases {
            let parts: Vec<&str> = common.iter().chain(own.iter()).copied().collect();
            let def = defs.iter().find(|d| d.id == *id).expect("rule exists");
            let re = compile_builtin(def.pattern).unwrap();
            let mut matched = 0;
            for _ in 0..60_000 {
                let n = 2 + (rng.next() % 7) as usize;
                let v: Vec<u8> = (0..n)
                    .flat_map(|_| parts[(rng.next() % parts.len() as u64) as usize].bytes())
                    .collect();
                if !re.is_match(&v) {
                    continue;
                }
                matched += 1;
                let lower = v.to_ascii_lowercase();
                let passes = def.keywords.iter().any(|k| {
                    lower
                        .windows(k.len())
                        .enumerate()
                        .any(|(i, w)| w == k.as_bytes() && gate(&v, i, i + k.len()))
                });
                assert!(passes, "{id}: {:?}", String::from_utf8_lossy(&v));
            }
            assert!(matched > 100, "{id}: only {matched} matches");
        }
    }

    /// The assignment gate may only skip segments where the rule's regex
    /// cannot match: checked on hand-picked edges and on random texts built
    /// from the fragments that decide it (names, quotes, operators,
    /// non-ASCII spaces and case-fold letters, short and long values).
    #[test]
    fn assignment_gate_never_hides_a_match() {
        let cases: &[&[u8]] = &[
            b"\"input_tokens\":1811,\"output_tokens\":803",
            b"token = abcdefgh1",
            b"TOKEN := 'abc'",
            b"my_secret_key\t\"  =>  \"x\"",
            b"--client-secret hunter2hunter2",
            b"--token abcdefgh12",
            b"api-key:\xC2\xA0abcdefgh12",
            b"api-key=\xC2\xA0\xC2\xA0x",
            b"\xC5\xBFecret=abcdefgh12 token",
            b"se\xE2\x84\xAAret token: 1",
            b"pwd: abcd",
            b"mysql -u root -pabcdefg",
            b"sshpass -p hunter22 ssh",
            b"--pass hunter22",
            b"password\":\"hunter2\"",
            b"tokentokentoken: 12345678",
            b"ENV[\"API_TOKEN\"] = \"abcdefgh12\"",
            b"settings[:secret_key]=abcdefgh12",
            b"ENV['STRIPE_SECRET'] ||= 'x'",
            b"apiKey ??= \"x\"",
            b"token\"] , \"x\"",
        ];
        for id in ["generic-secret", "generic-password"] {
            let re = generic_regex(id);
            for c in cases {
                if re.is_match(c) {
                    assert!(gate_passes(id, c), "{id} {:?}", String::from_utf8_lossy(c));
                }
            }
            // The gate must also skip the plumbing it exists for.
            assert!(!gate_passes(
                id,
                b"{\"usage\":{\"input_tokens\":1811,\"output_tokens\":80}}"
            ));
        }
        let parts: &[&[u8]] = &[
            b"token",
            b"secret",
            b"api_key",
            b"password",
            b"pwd",
            b"_pass",
            b"--",
            b"-",
            b"_",
            b".",
            b"\"",
            b"'",
            b" ",
            b"\t",
            b":",
            b"=",
            b">",
            b"abcd",
            b"1234",
            b",",
            b"\\",
            b"\xC2\xA0",
            b"\xC5\xBF",
            b"\xE2\x84\xAA",
            b"\xE2\x80\x83",
            b"\xC3\xA9",
            b"x",
            b"mysql",
            b"-p",
            b"\n",
            b"client-",
            b"key",
            b"]",
            b"[",
            b"|",
            b"?",
            b"||=",
            b"??=",
        ];
        let res = [
            generic_regex("generic-secret"),
            generic_regex("generic-password"),
        ];
        let mut rng = crate::testkit::XorShift(0x2545_F491_4F6C_DD1Du64);
        let mut matched = 0;
        for _ in 0..20_000 {
            let n = 2 + (rng.next() % 10) as usize;
            let v: Vec<u8> = rng.concat(parts, n);
            for (id, re) in ["generic-secret", "generic-password"].iter().zip(&res) {
                matched += gate_holds_on_match(id, re, &v);
            }
        }
        // The random texts must exercise the matching side too.
        assert!(matched > 500, "only {matched} random matches");
        // `aws-secret-access-key` and `heroku-api-key` take the gate with
        // their value's length (40, and a 36-byte UUID): every name their
        // patterns spell, glued to more name bytes, the operators, quotes,
        // spaces (non-ASCII too), case-fold letters, and values one byte
        // short and exact.
        let common: &[&[u8]] = &[
            b"x",
            b".",
            b"-",
            b"_",
            b"\"",
            b"'",
            b" ",
            b"\t",
            b"\n",
            b":",
            b"=",
            b":=",
            b"::=",
            b"?=",
            b"=>",
            b"\xC2\xA0",
            b"\xC5\xBF",
            b"\xE2\x84\xAA",
            b"1",
            b",",
        ];
        let ops: &[&[u8]] = &[
            b"=",
            b" = ",
            b"\": \"",
            b"'=>'",
            b" ::= ",
            b"\t:\t",
            b"\xC2\xA0=",
        ];
        type Case<'a> = (
            &'a str,
            &'a [&'a [u8]],
            &'a [&'a [u8]],
            &'a [u8],
            &'a [&'a [u8]],
        );
        let cases: [Case; 2] = [
            (
                "aws-secret-access-key",
                &[
                    b"aws_secret_access_key",
                    b"AWS_SECRET_ACCESS_KEY_ID",
                    b"SecretAccessKey",
                    b"secret-access-key",
                    b"aws_secret",
                    b"awssecret_key",
                    b"aws",
                    b"_id",
                    b"_key",
                    b"wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY",
                    b"Zq8+/",
                    b"[REDACTED:aws-secret-key]",
                ],
                &[
                    b"aws_secret_access_key",
                    b"AWS_SECRET_ACCESS_KEY_ID",
                    b"SecretAccess_Key",
                    b"secret-accesskey",
                    b"awssecret_key",
                    b"x.aws_secret",
                ],
                b"wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                &[
                    b"aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                    b"export AWS_SECRET_ACCESS_KEY",
                ],
            ),
            (
                "heroku-api-key",
                &[
                    b"heroku",
                    b"HEROKU_API_KEY",
                    b"herokuToken",
                    b"_oauth_secret",
                    b"key",
                    b"01234567-89ab-cdef-0123-456789abcde",
                    b"F",
                    b"[REDACTED:heroku-key]",
                ],
                &[
                    b"HEROKU_API_KEY",
                    b"heroku_oauth_token",
                    b"herokukey",
                    b"x.heroku_secret",
                    b"Heroku9Key",
                ],
                b"01234567-89ab-cdef-0123-456789abcdef",
                &[
                    b"machine api.heroku.com\n  login bob@x.io",
                    b"git push heroku main # heroku_api_key",
                ],
            ),
        ];
        for (id, own, names, value, skipped) in cases {
            let re = generic_regex(id);
            for c in skipped {
                assert!(!re.is_match(c) && !gate_passes(id, c), "{id}");
            }
            let parts: Vec<&[u8]> = common.iter().chain(own).copied().collect();
            let mut matched = 0;
            for _ in 0..20_000 {
                let n = 1 + (rng.next() % 6) as usize;
                let mut v: Vec<u8> = rng.concat(&parts, n);
                if rng.next().is_multiple_of(2) {
                    let at = (rng.next() as usize) % (v.len() + 1);
                    let shaped = [
                        names[(rng.next() % names.len() as u64) as usize],
                        ops[(rng.next() % ops.len() as u64) as usize],
                        &value[..value.len() - (rng.next() % 2) as usize],
                    ]
                    .concat();
                    v.splice(at..at, shaped);
                }
                matched += gate_holds_on_match(id, &re, &v);
            }
            assert!(matched > 200, "{id}: only {matched} random matches");
        }
    }

    /// Whether rule `id` runs on segment `v` as `scan_view` decides it:
    /// some occurrence of one of its keywords (that passes its gate, with
    /// `gated`; without, whether it would run with no gate at all).
    fn engine_runs(scanner: &crate::Scanner, id: &str, v: &[u8], gated: bool) -> bool {
        let e = &scanner.engine;
        let r = e
            .rules
            .iter()
            .position(|r| &*e.metas[r.meta].id == id)
            .unwrap();
        let mut kws = Vec::new();
        e.keywords.find_all(v, &mut LaneBufs::default(), &mut kws);
        let mut a = AssignGate::default();
        kws.iter().any(|m| {
            e.kw_rules[m.pattern].contains(&r)
                && (!gated || e.gate_passes(e.gates[r], m.pattern, v, m, &mut a))
        })
    }

    /// Each keyword-anchored rule's [`AnchoredRegex::find`], iterated as
    /// `run_regex` iterates it (from a start, up to a stop), yields exactly
    /// the matches and groups an unanchored search of the same text yields,
    /// on random texts from the fragments its alternatives start with
    /// (keywords glued to names, `--`, `\b` edges, operators, values) and
    /// random bytes, from random starts and stops. It fails when a rule's
    /// pattern gains an alternative that starts elsewhere.
    #[test]
    fn anchored_search_equals_whole_search() {
        let scanner = crate::Scanner::new(crate::Identity::default(), None);
        let e = &scanner.engine;
        let parts: &[&str] = &[
            "password",
            "PASSWORD",
            "Passwd",
            "passphrase",
            "pw",
            "pwd",
            "_pass",
            "db_pass",
            "--pass",
            "--password",
            "--token",
            "--api-key",
            "--client-secret",
            "sshpass",
            "mysql",
            "mysqldump",
            "mariadb",
            "secret",
            "Secret",
            "token",
            "api_key",
            "api-key",
            "ApiKey",
            "access key",
            "client secret",
            "client_secret",
            "app-secret",
            "secret key",
            "auth token",
            "api token",
            "credentials",
            "signing_key",
            "x",
            "my",
            "db",
            "DB_",
            ".",
            "-",
            "--",
            "_",
            " ",
            "  ",
            "\t",
            "\n",
            "=",
            ":",
            ": ",
            " = ",
            ":=",
            "::=",
            "?=",
            "||=",
            "=>",
            ".=",
            "\"",
            "'",
            "`",
            ",",
            "[",
            "]",
            "(",
            ")",
            "\\",
            " is ",
            " for ",
            " the ",
            " -p",
            " -p ",
            " -u root",
            "hunter22",
            "Zq8vR2mK7pL4xN9wQ1",
            "s3cr3t-V4lue",
            "abcdefgh",
            "é",
            "{",
            "}",
            "$",
            "#",
            "1",
            "&",
            ";",
            "|",
            "[]byte ",
            "string ",
            "now ",
            "zentrafy",
            "Owlbot",
            "cloud plan",
            "TOKEN",
            "access",
            "private",
            "key",
            "auth",
            "pat",
            "tkn",
            "$x",
            "docker",
            "helm registry",
            " login ",
            "login",
            " -u bob",
            " --password=",
            "aws",
            " configure set ",
            "aws_secret_access_key ",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
            "machine",
            " example.com ",
            "\n  ",
            "x.",
            "the token",
            "our  secret",
            "the",
            "heroku",
            "_api_key",
            "01234567-89ab-cdef-0123-456789abcdef",
            "<add",
            " key=\"Password\"",
            " value=",
            "column",
            "live_Zq8vR2mK7pL4xN9wQ1abcd",
        ];
        let mut rng = crate::testkit::XorShift(0x5EED_A11C_0FFE_E123u64);
        let mut next = || rng.next();
        let mut matched = vec![0usize; crate::rules::ANCHORED_RULES.len()];
        for (ai, &(id, anchor)) in crate::rules::ANCHORED_RULES.iter().enumerate() {
            let ri = e
                .rules
                .iter()
                .position(|r| &*e.metas[r.meta].id == id)
                .unwrap_or_else(|| panic!("no rule {id}"));
            let Matcher::Regex {
                re,
                group,
                anchored: Some(a),
                ..
            } = &e.rules[ri].matcher
            else {
                panic!("{id} is not an anchored regex rule");
            };
            assert_eq!(a.anchor, anchor);
            assert!(e.anchored[ri]);
            let re = re.get();
            let mut locs = re.capture_locations();
            let mut slots = vec![None; a.slot_len()];
            let mut cands = Vec::new();
            for _ in 0..40000 {
                let n = 1 + (next() % 14) as usize;
                let mut t: Vec<u8> = (0..n)
                    .flat_map(|_| {
                        if next() % 9 == 0 {
                            vec![next() as u8]
                        } else {
                            parts[(next() % parts.len() as u64) as usize]
                                .as_bytes()
                                .to_vec()
                        }
                    })
                    .collect();
                // Half the texts hold a name, a separator and a value.
                if next() % 2 == 0 {
                    let name = [
                        "password",
                        "db_password",
                        "api key",
                        "client_secret",
                        "x--token",
                        "zentrafy_api_token",
                        " owlbot access key",
                        "$cloud-PRIVATE-key",
                        "docker login -u bob -p",
                        "helm  registry login x.io --password",
                        "aws configure set aws_secret_access_key",
                        "machine h login u password",
                        "\n password",
                    ];
                    let sep = [
                        " is ",
                        ": ",
                        "=",
                        " = \"",
                        " for the db: ",
                        " ",
                        "-",
                        "\" := `",
                    ];
                    let val = [
                        "hunter22",
                        "Zq8vR2mK7pL4xN9wQ1abc",
                        "s3cr3t-V4lue",
                        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                    ];
                    let at = (next() as usize) % (t.len() + 1);
                    let shaped = [
                        name[(next() % name.len() as u64) as usize],
                        sep[(next() % sep.len() as u64) as usize],
                        val[(next() % val.len() as u64) as usize],
                    ]
                    .concat();
                    t.splice(at..at, shaped.bytes());
                }
                // And a quarter a whole command or file line of the rules
                // whose matches start before their keyword.
                let commands: &[&str] = match id {
                    "registry-login-password" => &[
                        "docker login -u bob -p hunter22",
                        "x.podman  login\t--password=s3cr3t-V4lue",
                        "helm registry login x.io --password 'hunter22'",
                        "mydocker login -p hunter22",
                    ],
                    "aws-cli-secret" => &[
                        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                        "$ aws  configure\tset default.aws_session_token \"wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1\"",
                        "xaws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                    ],
                    "netrc-password" => &[
                        "machine api.x.io login bob password hunter22",
                        "machine h\n  password s3cr3t-V4lue",
                        "login u password hunter22",
                        "\n  password hunter22x\n",
                        "x.machine h login u password hunter22",
                    ],
                    "prose-token-pointed" => &[
                        "use the token Zq8vR2mK7pL4xN9wQ1abc",
                        "Our Secret: \"s3cr3t-V4lue-Zq8vR2mK\"",
                        "my new secret,\n wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                        "bathe token Zq8vR2mK7pL4xN9wQ1abc",
                        "the  token Zq8vR2mK7pL4xN9wQ1abc and the\tsecret Zq8vR2mK7pL4xN9wQ1abc",
                    ],
                    "heroku-api-key" => &[
                        "HEROKU_API_KEY=01234567-89ab-cdef-0123-456789abcdef",
                        "heroku_oauth_token: '01234567-89AB-cdef-0123-456789abcdef'",
                        "xheroku_key := \"01234567-89ab-cdef-0123-456789abcdef\"",
                        "herokuheroku_secret = 01234567-89ab-cdef-0123-456789abcdef",
                    ],
                    "nuget-config-password" => &[
                        "<add key=\"ClearTextPassword\" value=\"hunter22\" />",
                        "<ADD\n   key = 'Password'  value='s3cr3t-V4lue'",
                        "<address key=\"Password\" value=\"x\"/>",
                        "<<add key=\"Password\" value=\"hunter22\"",
                    ],
                    "docker-config-auth" => &[
                        "{\"auths\":{\"r.io\":{\"auth\":\"Ym9iOmh1bnRlcjIy\"}}}",
                        "\"auth\" :\n \"Ym9iOmh1bnRlcjIyYWJj==\"",
                        "\"AUTH\": \"Ym9iOmh1bnRlcjIy\"",
                        "\"\"auth\":\"Ym9iOmh1bnRlcjIy\"",
                    ],
                    "named-column" => &[
                        "COLUMN_API_KEY=live_Zq8vR2mK7pL4xN9wQ1abcd",
                        "column.token: \"test_Zq8vR2mK7pL4xN9wQ1ab\"",
                        "<column_secret>live_Zq8vR2mK7pL4xN9wQ1abcd<",
                        "columncolumn_key = test_abcdefghijklmnopqrstuvwx;",
                    ],
                    _ => &[],
                };
                if !commands.is_empty() && next() % 2 == 0 {
                    let at = (next() as usize) % (t.len() + 1);
                    let c = commands[(next() % commands.len() as u64) as usize];
                    t.splice(at..at, c.bytes());
                }
                let mut kws = Vec::new();
                e.keywords.find_all(&t, &mut LaneBufs::default(), &mut kws);
                let mut starts: Vec<usize> = kws
                    .iter()
                    .filter(|m| e.kw_rules[m.pattern].contains(&ri))
                    .map(|m| m.start)
                    .collect();
                starts.sort_unstable();
                starts.dedup();
                let from = if next() % 2 == 0 {
                    0
                } else {
                    (next() as usize) % (t.len() + 1)
                };
                let (hay, stop) = if next() % 3 == 0 {
                    let y = from + (next() as usize) % (t.len() + 1 - from);
                    (&t[..(y + 1).min(t.len())], y)
                } else {
                    (&t[..], usize::MAX)
                };
                let (mut want, mut got) = (Vec::new(), Vec::new());
                let mut at = from;
                while at <= hay.len() {
                    let Some(m) = re.captures_read_at(&mut locs, hay, at) else {
                        break;
                    };
                    if m.start() >= stop {
                        break;
                    }
                    let g = (1..locs.len()).find_map(|g| locs.get(g));
                    want.push((m.start(), m.end(), g));
                    at = m.end().max(m.start() + 1);
                }
                let mut at = from;
                while at <= hay.len() {
                    let sl = (*group != 0).then_some(&mut slots[..]);
                    let Some((ms, me)) = a.find(hay, at, stop, &starts, sl, &mut cands) else {
                        break;
                    };
                    let g = slots[2..]
                        .chunks_exact(2)
                        .find_map(|g| Some((g[0]?.get(), g[1]?.get())));
                    got.push((ms, me, g));
                    at = me.max(ms + 1);
                }
                assert_eq!(
                    got,
                    want,
                    "{id} on {:?} from {from} stop {stop}",
                    String::from_utf8_lossy(hay)
                );
                matched[ai] += want.len();
            }
        }
        assert!(matched.iter().all(|&n| n >= 500), "{matched:?}");
    }

    /// Could rule `id` (pattern `re`) keep a match in `v`? For
    /// `lan-hostname`, a match `Check::Host` may keep (it drops one that
    /// [`host_may_end`] refuses); for the others, any match.
    fn kept_match(id: &str, re: &Regex, v: &[u8]) -> bool {
        if id == "lan-hostname" {
            re.find_iter(v).any(|m| host_may_end(v, m.end()))
        } else {
            re.is_match(v)
        }
    }

    /// The gates of `netrc-password`, `registry-login-password`,
    /// `base64-encoded-secrets`, `yaml-data-base64`, the two `env-line-*`
    /// rules, `prose-password`, `lan-hostname`, `login-with-pair`,
    /// `user-pass-words` and the others listed below may only skip
    /// segments where the rule's own (compiled) pattern cannot match:
    /// random texts from the fragments that decide them, and edges.
    #[test]
    fn shape_and_neighbour_gates_never_hide_a_match() {
        let scanner = crate::Scanner::new(crate::Identity::default(), None);
        let ids = [
            "netrc-password",
            "registry-login-password",
            "base64-encoded-secrets",
            "yaml-data-base64",
            "session-cookie",
            "byte-string-secret",
            "login-slash-password",
            "env-line-secret",
            "env-line-password",
            "prose-password",
            "lan-hostname",
            "login-with-pair",
            "user-pass-words",
        ];
        let res: Vec<Regex> = ids
            .iter()
            .map(|id| {
                let def = crate::rules::builtin()
                    .into_iter()
                    .find(|d| d.id == *id)
                    .unwrap();
                compile_builtin(def.pattern).unwrap()
            })
            .collect();
        for (id, re) in ids.iter().zip(&res) {
            let e = &scanner.engine;
            let r = e.rules.iter().position(|r| &*e.metas[r.meta].id == *id);
            assert!(
                r.is_some_and(|r| e.gates[r] != Gate::None),
                "{id} has a gate"
            );
            // The plumbing each gate exists for is skipped.
            let skipped: &[u8] = match *id {
                "netrc-password" => b"{\"password\":\"x\",\"machine\":1,\"login\":2}",
                "registry-login-password" => b"please login to the site with -p hunter22",
                "session-cookie" => b"set the cookie path=/ for sessions; max-age=3600",
                "byte-string-secret" => b"key_len: usize, // 32 bytes of key material",
                "login-slash-password" => {
                    b"{\"login\":\"see src/components / for the files at /home/user/dist\"}"
                }
                "env-line-secret" => {
                    b"{\"usage\":{\"output_tokens\":12},\"x\":\"[REDACTED:generic-secret]\"}"
                }
                "env-line-password" => b"the password=hunter22 is in passwords.txt",
                "prose-password" => b"[REDACTED:password] and the passwords_db, pwned",
                "lan-hostname" => b"edit .claude/settings.local.json and my.localhost",
                "login-with-pair" => b"docker login -u bob:hunter22 and the login page",
                "user-pass-words" => b"See the password policy; the tests pass: all_of_them",
                _ => b"metadata: {\"a\": 1, \"b\": \"x\"} at 0123456789abcdef0123456789abcdef",
            };
            assert!(!engine_runs(&scanner, id, skipped, true), "{id}");
            assert!(!kept_match(id, re, skipped), "{id}");
        }
        let parts: &[&[u8]] = &[
            b"password",
            b"PassWord",
            b"machine",
            b"login",
            b"LOGIN",
            b"docker",
            b"Podman",
            b"helm",
            b"registry",
            b"nerdctl",
            b"oras",
            b"az",
            b"OC",
            b"cf",
            b"x",
            b"-p",
            b"--password",
            b"=",
            b" ",
            b"\t",
            b"\n",
            b"\x0b",
            b"\x0c",
            b"\r",
            b"_",
            b".",
            b"\"",
            b"'",
            b":",
            b"data:",
            b"echo",
            b"-n",
            b"base64 -d",
            b"abcdEFGH",
            b"ijklMNOP",
            b"0123+/45",
            b"==",
            b"/",
            b"+",
            b"-",
            b"hunter22",
            b"s3cr3tPW",
            b"\xC3\xA9",
            b"key",
            b"  ",
            b"docker login",
            b"helm registry login",
            b"podman\tlogin",
            b"xdocker login",
            b" -p ",
            b" --password=",
            b"dockerlogin",
            b"login-",
            b"\n  data:\n  token: ",
            b"\n\tkey:",
            b"QUJDREVGR0hJSktMTU5P",
            b"QUJDREVGR0g",
            b"cookie",
            b"Cookie: ",
            b"sessid",
            b"X-Auth",
            b"csrf_token",
            b"JWT",
            b"remember_me",
            b";",
            b",",
            b"abc123XYZ",
            b"bytes",
            b"BYTES",
            b"&str",
            b"&[u8; 32]",
            b"&'static ",
            b"SECRET_KEY",
            b"API_TOKEN: &str = \"",
            b"api_key: bytes = b\"",
            b"KEY: &[u8; 32] =",
            b"password: &'static str",
            b"hunter22xyz\"",
            b"b\"",
            b"r#\"",
            b"user",
            b"Username",
            b"account",
            b"creds",
            b" is ",
            b" are ",
            b"Are",
            b"IS",
            b" / ",
            b"admin",
            b"x-is-ab",
            b" was set to ",
            b"_PASSWORD to ",
            b" with bob:",
            b"to ",
            b"use ",
            b"log into ",
            b"dist/",
            b"Winter1998#",
            b"`",
            b"@",
            b"PASSWORD",
            b"DB_PASSWD",
            b"TOKEN",
            b"Token",
            b"MY_SECRET",
            b"API_KEY",
            b"apikey",
            b"PRIVATE_KEY",
            b"export ",
            b"pw",
            b"pwd",
            b"PW",
            b"passphrase",
            b"[REDACTED:password]",
            b"host",
            b".local",
            b".LAN",
            b".internal",
            b".fritz.box",
            b".corp",
            b".json",
            b"-",
            b"9",
            b" pass ",
            b" PW:",
            b" pwd=",
            b"pass",
            b"user:",
            b"login=",
            b"xaccount",
            b"bob@x.io",
        ];
        let mut rng = crate::testkit::XorShift(0x9E37_79B9_7F4A_7C15u64);
        let mut matched = vec![0usize; ids.len()];
        for _ in 0..1_100_000 {
            let n = 2 + (rng.next() % 12) as usize;
            let v: Vec<u8> = rng.concat(parts, n);
            for (i, (id, re)) in ids.iter().zip(&res).enumerate() {
                if kept_match(id, re, &v) && engine_runs(&scanner, id, &v, false) {
                    matched[i] += 1;
                    assert!(
                        engine_runs(&scanner, id, &v, true),
                        "{id} {:?}",
                        String::from_utf8_lossy(&v)
                    );
                }
            }
        }
        // The random texts exercise the matching side of every rule.
        for (id, m) in ids.iter().zip(matched) {
            assert!(m > 200, "only {m} random matches of {id}");
        }
    }

    /// The fused gate must agree with the two separate shape checks it
    /// replaced, including when only one of them fires.
    #[test]
    fn fused_shape_gates_match_separate_checks() {
        let cases: &[&[u8]] = &[
            b"",
            b"{\"a\":\"b\",\"c\":1}",
            b"mac 00:1a:2b:3c:4d:5e here",
            b"mac 00-1a-2b-3c-4d-5e here",
            b"addr fe80::1%eth0",
            b"fd12:3456::1 and 0a:1b:2c:3d:4e:5f",
            b"fe7f:: ff80:: fcz1: 12:34:56",
            b"a-b-c:d:e-f 2026-01-05T10:08:23",
            b"00:1a:2b:3c:4d:5e",
            b"fe80:",
            b"Fd00:1",
        ];
        let long: Vec<u8> = b"{\"k\":\"2026-01-05T10:08:23\",\"u\":\"6f1c-aa\"} "
            .iter()
            .cycle()
            .take(700)
            .copied()
            .collect();
        for tail in [
            &b""[..],
            b"0a-1b-2c-3d-4e-5f",
            b"x fe9a::1 y",
            b"ab:cd:ef:01:23:4",
            b"fe80-fe80 fcde,",
        ] {
            for cut in [0usize, 1, 63, 64, 65, 130, 699] {
                let mut c = long[..cut].to_vec();
                c.extend_from_slice(tail);
                assert_eq!(
                    shape_gates(&c),
                    (maybe_mac(&c), maybe_ipv6(&c)),
                    "cut {cut}"
                );
            }
        }
        for c in cases {
            assert_eq!(shape_gates(c), (maybe_mac(c), maybe_ipv6(c)), "{c:?}");
        }
        assert_eq!(
            shape_gates(b"fd12:3456::1 and 0a:1b:2c:3d:4e:5f"),
            (true, true)
        );
        // Random texts over the bytes the gates read, every length around
        // the block and tail boundaries.
        let parts: &[&[u8]] = &[
            b"0a:1b:2c:",
            b"3d:4e:5f",
            b"0a-1b-",
            b"2c-3d-4e-5f",
            b"fe80:",
            b"Fd12:",
            b":",
            b"-",
            b"a",
            b"0",
            b"f",
            b" ",
            b"12:34",
            b"2026-01-05T10:08:23",
            b"ab",
            b"::1",
        ];
        let mut rng = crate::testkit::XorShift(0x1234_5678_9ABC_DEF1u64);
        // Up to 29 random parts, joined.
        fn text(rng: &mut crate::testkit::XorShift, parts: &[&[u8]]) -> Vec<u8> {
            let n = (rng.next() % 30) as usize;
            rng.concat(parts, n)
        }
        let (mut macs, mut v6s) = (0, 0);
        for _ in 0..20_000 {
            let c = text(&mut rng, parts);
            let want = (maybe_mac(&c), maybe_ipv6(&c));
            macs += usize::from(want.0);
            v6s += usize::from(want.1);
            assert_eq!(shape_gates(&c), want, "{:?}", String::from_utf8_lossy(&c));
        }
        assert!(macs > 100 && v6s > 100, "{macs} {v6s}");
        // Given a text whose gates are both false, the gates of an edited
        // copy follow from the stretch around the edit: an edit that
        // completes a MAC at its first byte or at its last, an IPv6 likewise.
        for (prev, v) in [
            (&b"0a-1b:2c:3d:4e:5f"[..], &b"0a:1b:2c:3d:4e:5f"[..]),
            (b"0a:1b:2c:3d:4e-5f", b"0a:1b:2c:3d:4e:5f"),
            (b"fe8z::1", b"fe80::1"),
        ] {
            assert_eq!(shape_gates(prev), (false, false), "{prev:?}");
            assert_eq!(shape_gates_after_edit(prev, v), shape_gates(v));
        }
        let mut checked = 0;
        for _ in 0..20_000 {
            let prev = text(&mut rng, parts);
            if shape_gates(&prev) != (false, false) {
                continue;
            }
            let mut v = prev.clone();
            let at = (rng.next() as usize) % (v.len() + 1);
            let cut = ((rng.next() % 20) as usize).min(v.len() - at);
            let put = parts[(rng.next() % parts.len() as u64) as usize];
            v.splice(at..at + cut, put.iter().copied());
            checked += 1;
            assert_eq!(
                shape_gates_after_edit(&prev, &v),
                shape_gates(&v),
                "{:?} -> {:?}",
                String::from_utf8_lossy(&prev),
                String::from_utf8_lossy(&v)
            );
        }
        assert!(checked > 2000, "{checked}");
    }

    /// The strided gram sweep reports every occurrence of every value
    /// exactly once, at every alignment, including overlapping and
    /// self-similar values and occurrences at both ends of the text.
    #[test]
    fn known_sweep_finds_each_occurrence_once() {
        let vals: [&[u8]; 5] = [
            b"ghp_abcdefgh",
            b"aaaaaaaa",
            b"aaaaaaaaab",
            b"xyzxyzxyzx",
            b"12345678",
        ];
        let mut k = Known::default();
        for (m, v) in vals.iter().enumerate() {
            k.add(v, m);
            k.add(v, 99); // a repeat add is a no-op
        }
        for pad in 0..9 {
            let mut text = vec![b'.'; pad];
            text.extend_from_slice(b"ghp_abcdefgh aaaaaaaaaaab xyzxyzxyzxyzx -12345678");
            text.extend_from_slice(&vec![b'-'; pad % 3]);
            text.extend_from_slice(b"ghp_abcdefgh");
            let mut want = Vec::new();
            for (m, v) in vals.iter().enumerate() {
                for i in 0..=text.len().saturating_sub(v.len()) {
                    if text[i..].starts_with(v) {
                        want.push((i, i + v.len(), m));
                    }
                }
            }
            let mut got = Vec::new();
            k.find_all(&text, |s, e, m| got.push((s, e, m)));
            want.sort();
            got.sort();
            assert_eq!(got, want, "pad {pad}");
        }
        // Many values sharing a prefix (one gram holds them all), found
        // whole, from any start, and only those added since a count.
        let mut k = Known::default();
        let mut rng = crate::testkit::XorShift(0x5851_F42D_4C95_7F2Du64);
        let vals: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                let len = 8 + (rng.next() % 9) as usize;
                let mut v = b"ghp_".to_vec();
                v.extend((4..len).map(|_| b"ab01"[(rng.next() % 4) as usize]));
                v
            })
            .collect();
        for (m, v) in vals.iter().enumerate() {
            k.add(v, m);
        }
        for round in 0..200 {
            let mut text: Vec<u8> = Vec::new();
            for _ in 0..rng.next() % 12 {
                if rng.next() & 1 == 0 {
                    text.extend_from_slice(&vals[(rng.next() % 400) as usize]);
                } else {
                    text.extend(
                        (0..rng.next() % 7).map(|_| b"ghp_ab01-"[(rng.next() % 9) as usize]),
                    );
                }
            }
            let first = (round * 7) % k.len();
            let mut want = Vec::new();
            // `first` counts held values (repeats were not added).
            for (v, &meta) in k.values.iter().zip(&k.metas).skip(first) {
                for i in 0..=text.len().saturating_sub(v.len()) {
                    if text.len() >= v.len() && text[i..].starts_with(v) {
                        want.push((i, i + v.len(), meta));
                    }
                }
            }
            let mut got = Vec::new();
            k.find_all_from(&text, first, |s, e, m| got.push((s, e, m)));
            want.sort();
            got.sort();
            assert_eq!(got, want, "round {round}");
        }
        // Enough distinct grams to grow the filter through every size to
        // the largest: each value is still found at every offset, after
        // every growth (checked at each size as it is reached).
        let mut k = Known::default();
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
        let mut vals: Vec<Vec<u8>> = Vec::new();
        let mut sizes = Vec::new();
        for m in 0..20_000 {
            let v: Vec<u8> = (0..8 + rng.next() % 30)
                .map(|_| alphabet[(rng.next() % 64) as usize])
                .collect();
            if k.add(&v, m) {
                vals.push(v);
            }
            if sizes.last() != Some(&k.filter.len()) {
                sizes.push(k.filter.len());
                for (i, v) in vals.iter().enumerate().step_by(97) {
                    for pad in 0..4 {
                        let mut text = vec![b' '; pad];
                        text.extend_from_slice(v);
                        let mut got = Vec::new();
                        k.find_all(&text, |s, e, _| got.push((s, e)));
                        assert!(got.contains(&(pad, pad + v.len())), "value {i} pad {pad}");
                    }
                }
            }
        }
        assert_eq!(
            sizes.last(),
            Some(&(1 << (KNOWN_FILTER_MAX_LOG2 - 6))),
            "{sizes:?}"
        );
        assert!(sizes.len() > 3, "{sizes:?}");
    }

    /// Allowlisted spans derived from the old text's equal a fresh walk of
    /// the edited text, for edits anywhere: inside values, keys, look-backs
    /// and between members, one or several, shorter and longer than what
    /// they replace.
    #[test]
    fn derived_allowed_spans_equal_fresh_walk() {
        let parts: &[&str] = &[
            r#"{"id":"toolu_01ab","#,
            r#""uuid":"6f1c-aa","#,
            r#""type":"base64","#,
            r#""data":"iVBORw0KGgo=","#,
            r#""signature":"EqQBCkYIARgC+/=","#,
            r#""cwd":"/home/zed/src","#,
            r#""t":"token=abc","#,
            r#""sessionId":"x"}"#,
            "\"",
            ":",
            "a",
            " ",
            &"q".repeat(90),
            r#""parentUuid":"#,
        ];
        let puts = [1usize, 12, 25];
        let mut rng = crate::testkit::XorShift(0xBF58_476D_1CE4_E5B9u64);
        let mut next = || rng.next();
        let (mut old_spans, mut want, mut got) = (Vec::new(), Vec::new(), Vec::new());
        let (mut checked, mut nonempty) = (0, 0);
        for _ in 0..20_000 {
            let n = 1 + (next() % 12) as usize;
            let old: Vec<u8> = (0..n)
                .flat_map(|_| parts[(next() % parts.len() as u64) as usize].bytes())
                .collect();
            let mut edits = Vec::new();
            let mut at = 0;
            for _ in 0..(next() % 4) {
                let s = at + (next() % 40) as usize;
                let e = s + 1 + (next() % 20) as usize;
                if e > old.len() {
                    break;
                }
                edits.push((s, e, puts[(next() % 3) as usize]));
                at = e;
            }
            let mut new = Vec::new();
            let mut at = 0;
            for &(s, e, put) in &edits {
                new.extend_from_slice(&old[at..s]);
                // Placeholder-like: no quote, no backslash.
                new.extend(std::iter::repeat_n(b'~', put));
                at = e;
            }
            new.extend_from_slice(&old[at..]);
            if mark_allowed(&old, &mut old_spans) {
                continue;
            }
            mark_allowed(&new, &mut want);
            derive_allowed(&new, &old_spans, &edits, &mut got, &mut Vec::new());
            checked += 1;
            nonempty += usize::from(!want.is_empty());
            assert_eq!(got, want, "{:?} {edits:?}", String::from_utf8_lossy(&old));
        }
        assert!(checked > 15_000 && nonempty > 5_000, "{checked} {nonempty}");
    }

    /// `allowed_member` as it was first written (vector searches over the
    /// whole look-back and the whole rest of the line): the reference the
    /// gated, bounded one is held to.
    fn allowed_member_by_search(v: &[u8], p: usize) -> Option<(usize, usize)> {
        let q = memchr::memrchr(b'"', &v[p.saturating_sub(40)..p])?;
        let which = allowed_key(&v[p.saturating_sub(40) + q + 1..p])?;
        let s = p + 3;
        let len = memchr::memchr(b'"', &v[s..])?;
        let val = &v[s..s + len];
        let ok = match which {
            0 => in_class(val, &B64_CLASS),
            1 => {
                in_class(val, &B64_CLASS)
                    && F_TYPE_B64
                        .find(&v[p.saturating_sub(MEMBER_LOOK_BACK)..p])
                        .is_some()
            }
            _ => val.len() <= 128 && in_class(val, &ID_CLASS),
        };
        (ok && len > 0).then_some((s, s + len))
    }

    /// The gated member check answers as the reference on random members:
    /// every allowed key and near misses, keys at and past the look-back,
    /// values of every length around 128 and past a block, bytes in and
    /// out of each class, unterminated values.
    #[test]
    fn allowed_member_equals_the_plain_search() {
        let mut keys: Vec<String> = ALLOWED_ID_KEYS.iter().map(|k| k.to_string()).collect();
        keys.extend(
            [
                "signature",
                "data",
                "type",
                "Id",
                "xid",
                "uuidd",
                "",
                "d",
                "e",
                "a",
            ]
            .map(String::from),
        );
        keys.push("k".repeat(38) + "id");
        keys.push("k".repeat(45) + "id");
        let mut rng = crate::testkit::XorShift(0x2F69_3C1D_9A0B_55E7u64);
        let bytes = b"aZ09-_+/=\\\" .,:{}\xc3\xa9";
        let (mut some, mut checked) = (0, 0);
        for _ in 0..40_000 {
            let key = &keys[(rng.next() % keys.len() as u64) as usize];
            let len = match rng.next() % 4 {
                0 => (rng.next() % 8) as usize,
                1 => 120 + (rng.next() % 16) as usize,
                _ => (rng.next() % 300) as usize,
            };
            let clean = !rng.next().is_multiple_of(3);
            let val: Vec<u8> = (0..len)
                .map(|_| {
                    if clean {
                        b"aZ09-_"[(rng.next() % 6) as usize]
                    } else {
                        bytes[(rng.next() % bytes.len() as u64) as usize]
                    }
                })
                .collect();
            let mut line = Vec::new();
            if rng.next() & 1 == 0 {
                line.extend_from_slice(br#"{"type":"base64","#);
            } else {
                line.push(b'{');
            }
            line.push(b'"');
            line.extend_from_slice(key.as_bytes());
            line.extend_from_slice(b"\":\"");
            line.extend_from_slice(&val);
            if !rng.next().is_multiple_of(5) {
                line.extend_from_slice(br#"","n":1}"#);
            }
            let p = line.windows(3).position(|w| w == b"\":\"").unwrap();
            let want = allowed_member_by_search(&line, p);
            assert_eq!(
                allowed_member(&line, p),
                want,
                "{}",
                String::from_utf8_lossy(&line)
            );
            checked += 1;
            some += usize::from(want.is_some());
        }
        assert!(
            some > 2_000 && checked - some > 20_000,
            "{some} of {checked}"
        );
    }

    /// Every key `allowed_member` allows passes its last-byte gate: each
    /// allowed key's member is marked, and the same member under a key one
    /// byte longer (`…x`) is not.
    #[test]
    fn every_allowed_key_passes_the_last_byte_gate() {
        let mut out = Vec::new();
        let keys = ALLOWED_ID_KEYS.iter().chain(&ALLOWED_B64_KEYS);
        for k in keys {
            for key in [k.to_string(), format!("{k}x")] {
                let line = format!(r#"{{"type":"base64","{key}":"AbC123def456"}}"#);
                mark_allowed(line.as_bytes(), &mut out);
                let val = line.find("AbC").unwrap();
                let want = if key == *k {
                    vec![(val, val + 12)]
                } else {
                    vec![]
                };
                assert_eq!(out, want, "{line}");
            }
        }
    }

    /// The pair-keyed member search finds what the generic substring
    /// search finds, from every start, on texts short and long.
    #[test]
    fn member_search_equals_substring_search() {
        let parts: &[&[u8]] = &[b"\"", b":", b"\":\"", b"a", b"\":1", b" ", b":\"", b"\"\""];
        let mut rng = crate::testkit::XorShift(0x5851_F42D_4C95_7F2Du64);
        for _ in 0..3000 {
            let n = (rng.next() % 60) as usize;
            let v: Vec<u8> = rng.concat(parts, n);
            for at in 0..=v.len() {
                let want = memchr::memmem::find(&v[at..], b"\":\"").map(|i| at + i);
                assert_eq!(next_member(&v, at), want, "{v:?} at {at}");
            }
        }
    }

    #[test]
    fn blocked_class_checks_match_bytewise_definitions() {
        let b64 = |v: &[u8]| {
            v.iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        };
        let id = |v: &[u8]| {
            v.iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        };
        for len in [0usize, 1, 31, 32, 33, 64, 100] {
            for bad in 0..=255u8 {
                let mut v = vec![b'A'; len];
                if len > 0 {
                    v[len / 2] = bad;
                }
                assert_eq!(all_b64(&v), b64(&v), "b64 len {len} byte {bad}");
                assert_eq!(all_id_chars(&v), id(&v), "id len {len} byte {bad}");
            }
        }
    }
}

#[cfg(test)]
mod lazy_regex_tests {
    use super::*;

    /// Built-in patterns are compiled on first use, where a failure could
    /// only panic: each must compile with exactly the engine's settings.
    #[test]
    fn every_builtin_pattern_compiles() {
        let defs = crate::rules::builtin();
        assert!(defs.len() > 100, "the catalogue has {} rules", defs.len());
        for def in defs {
            if let Err(e) = compile_builtin(def.pattern) {
                panic!("built-in rule {} does not compile: {e}", def.id);
            }
        }
    }

    #[test]
    fn a_lazy_regex_compiles_once_and_matches_like_the_pattern() {
        let lazy = LazyRegex::builtin(r"(?i)\bsecret\b");
        assert!(
            lazy.cell.get().is_none(),
            "nothing compiled before first use"
        );
        assert!(lazy.get().is_match(b"a SECRET here"));
        assert!(!lazy.get().is_match(b"secrets"));
        let first: *const Regex = lazy.get();
        assert_eq!(first, lazy.get() as *const Regex, "compiled once");
        let ready = LazyRegex::ready(regex::bytes::Regex::new("x").unwrap());
        assert!(ready.get().is_match(b"x"));
    }

    #[test]
    fn a_new_scanner_compiles_nothing_until_asked() {
        let s = crate::Scanner::new(crate::Identity::default(), None);
        let cells = |s: &crate::Scanner| {
            s.engine
                .rules
                .iter()
                .filter_map(|r| match &r.matcher {
                    // An anchored rule runs (and compiles) its own regex.
                    Matcher::Regex {
                        anchored: Some(a), ..
                    } => Some(a.cell.get().is_some()),
                    Matcher::Regex { re, .. } => Some(re.cell.get().is_some()),
                    _ => None,
                })
                .collect::<Vec<bool>>()
        };
        assert!(cells(&s).len() > 100);
        assert!(cells(&s).iter().all(|c| !c), "built lazily");
        s.compile_all();
        assert!(
            cells(&s).iter().all(|c| *c),
            "compile_all compiles every one"
        );
    }
}
