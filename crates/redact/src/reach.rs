//! Which bytes a rule's match can hold after its first byte, read from the
//! rule's pattern.
//!
//! Owns: the per-rule *stop bytes* verify uses to re-run a rule only around
//! the placeholders (see `engine::Engine::scan_view`). Must never: call a
//! byte a stop byte when some match of the pattern can hold it at a
//! position other than its first (that would let verify skip a match).
//!
//! Why it matters: no match of a rule can run across a stop byte, so the
//! rule's matches on two texts that differ only between two stop bytes are
//! the same outside them. The sets are over-approximated (a byte is kept
//! whenever the pattern's structure might allow it), which only makes the
//! zones verify re-runs wider.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// A set of bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    pub const FULL: ByteSet = ByteSet([u64::MAX; 4]);

    fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }

    fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    pub fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }

    fn union(self, o: ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }

    fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// What a sub-pattern can consume: the bytes it can start with, the bytes
/// it can hold at any later position, all its bytes, and whether it can
/// match the empty string.
#[derive(Clone, Copy)]
struct Reach {
    first: ByteSet,
    later: ByteSet,
    all: ByteSet,
    nullable: bool,
}

const EMPTY: Reach = Reach {
    first: ByteSet([0; 4]),
    later: ByteSet([0; 4]),
    all: ByteSet([0; 4]),
    nullable: true,
};

/// Look-arounds whose answer depends on at most the byte on each side of
/// the position (ASCII word boundaries, line and text anchors).
fn one_byte_look(l: Look) -> bool {
    matches!(
        l,
        Look::Start
            | Look::End
            | Look::StartLF
            | Look::EndLF
            | Look::StartCRLF
            | Look::EndCRLF
            | Look::WordAscii
            | Look::WordAsciiNegate
            | Look::WordStartAscii
            | Look::WordEndAscii
            | Look::WordStartHalfAscii
            | Look::WordEndHalfAscii
    )
}

/// `None` when the pattern holds a construct this analysis does not model
/// exactly enough (a look-around reading more than one byte each side).
fn reach(h: &Hir) -> Option<Reach> {
    Some(match h.kind() {
        HirKind::Empty => EMPTY,
        HirKind::Look(l) => {
            if !one_byte_look(*l) {
                return None;
            }
            EMPTY
        }
        HirKind::Literal(lit) => {
            let b = &lit.0;
            let mut r = Reach {
                nullable: b.is_empty(),
                ..EMPTY
            };
            for (i, &x) in b.iter().enumerate() {
                r.all.insert(x);
                if i == 0 {
                    r.first.insert(x);
                } else {
                    r.later.insert(x);
                }
            }
            r
        }
        HirKind::Class(Class::Bytes(c)) => {
            let mut s = ByteSet::default();
            for r in c.iter() {
                s.insert_range(r.start(), r.end());
            }
            Reach {
                first: s,
                later: ByteSet::default(),
                all: s,
                nullable: false,
            }
        }
        HirKind::Class(Class::Unicode(c)) => {
            let mut s = ByteSet::default();
            let mut multi = false;
            for r in c.iter() {
                if (r.end() as u32) < 0x80 {
                    s.insert_range(r.start() as u8, r.end() as u8);
                } else {
                    multi = true;
                }
            }
            if multi {
                // A character of several bytes: any byte, anywhere.
                Reach {
                    first: ByteSet::FULL,
                    later: ByteSet::FULL,
                    all: ByteSet::FULL,
                    nullable: false,
                }
            } else {
                Reach {
                    first: s,
                    later: ByteSet::default(),
                    all: s,
                    nullable: false,
                }
            }
        }
        HirKind::Repetition(rep) => {
            let sub = reach(&rep.sub)?;
            Reach {
                first: sub.first,
                // A second iteration's first byte is a later byte.
                later: if rep.max.is_some_and(|m| m <= 1) {
                    sub.later
                } else {
                    sub.all
                },
                all: sub.all,
                nullable: rep.min == 0 || sub.nullable,
            }
        }
        HirKind::Capture(c) => reach(&c.sub)?,
        HirKind::Concat(parts) => {
            let mut out = EMPTY;
            // Whether the parts before can consume a byte.
            let mut before_nonempty = false;
            for p in parts {
                let r = reach(p)?;
                if out.nullable {
                    out.first = out.first.union(r.first);
                }
                out.later = out
                    .later
                    .union(if before_nonempty { r.all } else { r.later });
                out.all = out.all.union(r.all);
                out.nullable &= r.nullable;
                before_nonempty |= !r.all.is_empty();
            }
            out
        }
        HirKind::Alternation(alts) => {
            let mut out = Reach {
                nullable: false,
                ..EMPTY
            };
            for a in alts {
                let r = reach(a)?;
                out.first = out.first.union(r.first);
                out.later = out.later.union(r.later);
                out.all = out.all.union(r.all);
                out.nullable |= r.nullable;
            }
            out
        }
    })
}

/// A rule's stop bytes, read from its pattern the first time they are
/// asked for: parsing every pattern up front cost each process (every
/// hook) milliseconds, and most rules never run on a changed line.
pub struct LazyStops {
    pattern: Option<&'static str>,
    cell: std::sync::OnceLock<Option<ByteSet>>,
}

impl LazyStops {
    /// `None`: no stop bytes (the rule is searched whole).
    pub fn new(pattern: Option<&'static str>) -> LazyStops {
        LazyStops {
            pattern,
            cell: std::sync::OnceLock::new(),
        }
    }

    pub fn get(&self) -> Option<&ByteSet> {
        self.cell
            .get_or_init(|| self.pattern.and_then(stop_bytes))
            .as_ref()
    }
}

/// The stop bytes of a built-in pattern (compiled as the engine compiles
/// it: bytes, Unicode off): bytes no match holds past its first byte.
/// `None` when every byte may (nothing to gain), when a match can be empty,
/// or when the pattern uses a construct [`reach`] does not model.
pub fn stop_bytes(pattern: &str) -> Option<ByteSet> {
    let hir = crate::engine::parse_builtin(pattern)?;
    if hir.properties().minimum_len().is_none_or(|m| m == 0) {
        return None;
    }
    let r = reach(&hir)?;
    if r.nullable {
        return None;
    }
    let stops = ByteSet(std::array::from_fn(|i| !r.later.0[i]));
    (!stops.is_empty()).then_some(stops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_bytes_of_simple_patterns() {
        let s = stop_bytes(r"ghp_[A-Za-z0-9]{36,}").unwrap();
        assert!(s.contains(b'"') && s.contains(b' ') && s.contains(b'-'));
        assert!(!s.contains(b'g') && !s.contains(b'_') && !s.contains(b'Q'));
        // A byte that may only start a match is a stop byte.
        let s = stop_bytes(r#"["\n][A-Z]+"#).unwrap();
        assert!(s.contains(b'"') && s.contains(b'\n') && !s.contains(b'Q'));
        // `(?i)` folds ASCII letters into the set.
        let s = stop_bytes(r"(?i)x[a-c]+").unwrap();
        assert!(!s.contains(b'B') && !s.contains(b'b') && s.contains(b'x'));
        // Repetition makes a first byte a later one.
        let s = stop_bytes(r"(?:ab)+").unwrap();
        assert!(!s.contains(b'a'));
        // Everything may follow: nothing to stop at.
        assert!(stop_bytes(r"a(?-u:[\x00-\xff])+").is_none());
        // Empty matches are not modelled.
        assert!(stop_bytes(r"a*").is_none());
    }

    /// Every built-in pattern that has stop bytes: no match the regex finds
    /// in random texts holds one past its first byte.
    #[test]
    fn no_match_holds_a_stop_byte_after_its_first() {
        let mut rng = crate::testkit::XorShift(0x2545_F491_4F6C_DD1Du64);
        let frags: &[&[u8]] = &[
            b"token",
            b"secret",
            b"password",
            b"=",
            b":",
            b"\"",
            b"'",
            b" ",
            b"\n",
            b"\t",
            b"/",
            b"@",
            b"https://",
            b"u:",
            b"pw9x",
            b".local",
            b".internal",
            b"db-1",
            b"Zq8vR2mK7pL4xN9w",
            b"ghp_",
            b"aB3",
            b"AKIA",
            b"10.0.",
            b"192.168.",
            b"1",
            b"-",
            b"_",
            b".",
            b",",
            b";",
            b"login",
            b"user",
            b"is",
            b"export ",
            b"API_KEY",
            b"\\",
            b"eyJ",
            b"abc",
            b"XYZ",
            b"sk-",
            b"xoxb-",
            b"{",
            b"}",
            b"[",
            b"]",
            b"<",
            b">",
            b"\xc3\xa9",
            b"#",
            b"%",
            b"$",
            b"machine ",
            b"curl ",
            b"-u ",
            b"docker login -p ",
        ];
        let mut checked = 0;
        for def in crate::rules::builtin() {
            let Some(stops) = stop_bytes(def.pattern) else {
                continue;
            };
            let re = crate::engine::compile_builtin(def.pattern).unwrap();
            const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
            for _ in 0..300 {
                let n = 1 + (rng.next() % 24) as usize;
                let mut t: Vec<u8> = Vec::new();
                for _ in 0..n {
                    match rng.next() % 4 {
                        // The rule's own keywords, then a random run: what
                        // its matches are made of.
                        0 if !def.keywords.is_empty() => {
                            let k = def.keywords[(rng.next() % def.keywords.len() as u64) as usize];
                            t.extend_from_slice(k.as_bytes());
                        }
                        1 => {
                            let len = 4 + rng.next() % 60;
                            t.extend((0..len).map(|_| ALNUM[(rng.next() % 62) as usize]));
                        }
                        _ => t.extend_from_slice(frags[(rng.next() % frags.len() as u64) as usize]),
                    }
                }
                for m in re.find_iter(&t) {
                    checked += 1;
                    assert!(
                        m.as_bytes()[1..].iter().all(|&b| !stops.contains(b)),
                        "{}: {:?}",
                        def.id,
                        String::from_utf8_lossy(m.as_bytes())
                    );
                }
            }
        }
        assert!(checked > 3000, "only {checked} matches checked");
    }
}
