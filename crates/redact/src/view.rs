//! Decoded views of one raw line, and the map from view offsets back to raw
//! byte spans.
//!
//! Owns: undoing JSON string escapes (`\"`, `\\`, `\/`, `\n`, `\uXXXX`
//! including surrogate pairs) and percent-encoding (`%XX`) one layer at a
//! time, so a secret written as `ghp\u005f…`, `\"token\":\"…\"` or
//! `token%3D…` is seen in its decoded form. Each layer records only the
//! positions where it changed the bytes ("units"), so the map costs memory in
//! proportion to the escapes, not to the line.
//!
//! Must never: hand out a raw span that cuts an escape sequence in half —
//! a span starting or ending inside a decoded unit is widened to the whole
//! unit, which is what keeps a redacted JSON line valid JSON.

/// Layers of escaping we undo. Claude Code transcripts nest JSON inside JSON
/// strings (tool inputs holding JSON, tool results holding escaped logs), so
/// two or three layers are common; more than this is either adversarial or
/// pathological and the remaining layers are still scanned raw.
pub const MAX_DECODE_LAYERS: usize = 4;

/// One place where a layer changed the bytes: `view_len` decoded bytes at
/// `view_start` came from `src_len` bytes at `src_start` of the layer below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    view_start: u32,
    view_len: u32,
    src_start: u32,
    src_len: u32,
}

/// One decoding layer: its bytes and the units that map it to the layer below.
#[derive(Default)]
pub struct Layer {
    pub bytes: Vec<u8>,
    units: Vec<Unit>,
}

impl Layer {
    /// Maps a half-open view span to a span of the layer below, widening to
    /// whole units at both ends.
    fn map_down(&self, start: usize, end: usize) -> (usize, usize) {
        (self.map_pos(start, false), self.map_pos(end, true))
    }

    fn map_pos(&self, pos: usize, is_end: bool) -> usize {
        let p = pos as u32;
        // Last unit whose view_start <= p (for an end, the unit containing p-1).
        let probe = if is_end && p > 0 { p - 1 } else { p };
        let idx = self.units.partition_point(|u| u.view_start <= probe);
        if idx == 0 {
            return pos;
        }
        let u = self.units[idx - 1];
        let u_end = u.view_start + u.view_len;
        if probe < u_end {
            // Inside a unit: widen to the unit's source bytes.
            return if is_end {
                (u.src_start + u.src_len) as usize
            } else {
                u.src_start as usize
            };
        }
        (u.src_start + u.src_len + (p - u_end)) as usize
    }
}

fn hex_val(b: u8) -> Option<u32> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as u32),
        b'a'..=b'f' => Some((b - b'a' + 10) as u32),
        b'A'..=b'F' => Some((b - b'A' + 10) as u32),
        _ => None,
    }
}

fn hex4(s: &[u8]) -> Option<u32> {
    if s.len() < 4 {
        return None;
    }
    let mut v = 0;
    for &b in &s[..4] {
        v = v * 16 + hex_val(b)?;
    }
    Some(v)
}

/// Whether `s` holds anything a layer could decode. Cheap: two memchr passes.
pub fn has_escapes(s: &[u8]) -> bool {
    // One pass for both (two `memchr` calls cost ~4 % of a line of code).
    memchr::memchr2_iter(b'\\', b'%', s).any(|i| {
        s[i] == b'\\'
            || (i + 2 < s.len() && hex_val(s[i + 1]).is_some() && hex_val(s[i + 2]).is_some())
    })
}

/// Decodes one layer of `src` into `out`. Returns false when nothing changed.
pub fn decode_layer(src: &[u8], out: &mut Layer) -> bool {
    out.bytes.clear();
    out.units.clear();
    out.bytes.reserve(src.len());
    let mut i = 0;
    let mut copied = 0;
    let push_unit = |out: &mut Layer, src_start: usize, src_len: usize, decoded: &[u8]| {
        out.units.push(Unit {
            view_start: out.bytes.len() as u32,
            view_len: decoded.len() as u32,
            src_start: src_start as u32,
            src_len: src_len as u32,
        });
        out.bytes.extend_from_slice(decoded);
    };
    while i < src.len() {
        let Some(off) = memchr::memchr2(b'\\', b'%', &src[i..]) else {
            break;
        };
        let at = i + off;
        let b = src[at];
        let mut buf = [0u8; 4];
        let decoded: Option<(usize, &[u8])> = if b == b'%' {
            match (src.get(at + 1).copied(), src.get(at + 2).copied()) {
                (Some(h), Some(l)) => match (hex_val(h), hex_val(l)) {
                    (Some(h), Some(l)) => {
                        buf[0] = (h * 16 + l) as u8;
                        Some((3, &buf[..1]))
                    }
                    _ => None,
                },
                _ => None,
            }
        } else {
            match src.get(at + 1).copied() {
                Some(c @ (b'"' | b'\\' | b'/')) => {
                    buf[0] = c;
                    Some((2, &buf[..1]))
                }
                Some(b'n') => Some((2, &b"\n"[..])),
                Some(b't') => Some((2, &b"\t"[..])),
                Some(b'r') => Some((2, &b"\r"[..])),
                Some(b'b') => Some((2, &b"\x08"[..])),
                Some(b'f') => Some((2, &b"\x0c"[..])),
                Some(b'u') => decode_u(&src[at..], &mut buf),
                _ => None,
            }
        };
        match decoded {
            Some((src_len, bytes)) => {
                out.bytes.extend_from_slice(&src[copied..at]);
                push_unit(out, at, src_len, bytes);
                i = at + src_len;
                copied = i;
            }
            None => i = at + 1,
        }
    }
    if copied == 0 {
        return false;
    }
    out.bytes.extend_from_slice(&src[copied..]);
    true
}

/// Decodes `\uXXXX` (and a following low surrogate) at the start of `s`.
fn decode_u<'b>(s: &[u8], buf: &'b mut [u8; 4]) -> Option<(usize, &'b [u8])> {
    let hi = hex4(s.get(2..)?)?;
    let (cp, len) = if (0xD800..0xDC00).contains(&hi) {
        if s.get(6) == Some(&b'\\') && s.get(7) == Some(&b'u') {
            let lo = hex4(s.get(8..)?)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), 12)
        } else {
            return None;
        }
    } else {
        (hi, 6)
    };
    let c = char::from_u32(cp)?;
    let n = c.encode_utf8(buf).len();
    Some((len, &buf[..n]))
}

/// The raw line plus up to [`MAX_DECODE_LAYERS`] decoded layers.
#[derive(Default)]
pub struct Views {
    pub layers: Vec<Layer>,
    used: usize,
    /// [`Views::derive_recording`]'s edits of the layer it is deriving and
    /// of the next, as `(start, end, index of the edit's put)`: buffers
    /// reused across lines.
    cur: Vec<(usize, usize, usize)>,
    next: Vec<(usize, usize, usize)>,
}

impl Views {
    /// Rebuilds the decoded layers of `raw`. Reuses buffers across lines.
    pub fn build(&mut self, raw: &[u8]) {
        self.used = 0;
        if !has_escapes(raw) {
            return;
        }
        while self.used < MAX_DECODE_LAYERS {
            if self.layers.len() <= self.used {
                self.layers.push(Layer::default());
            }
            let (below, rest) = self.layers.split_at_mut(self.used);
            let src: &[u8] = if self.used == 0 {
                raw
            } else {
                &below[self.used - 1].bytes
            };
            if !decode_layer(src, &mut rest[0]) {
                break;
            }
            self.used += 1;
            if !has_escapes(&self.layers[self.used - 1].bytes) {
                break;
            }
        }
    }

    /// Sets `self` to the views of `new`, the text whose views `prev` hold
    /// with each `(start, end, put)` of `edits` (sorted, disjoint, in the
    /// old text's offsets) replaced by `put`, without decoding `new` again.
    /// Returns false, leaving `self` unusable, when that cannot be done
    /// exactly; the caller then builds.
    ///
    /// Why it is exact: decoding is a left-to-right walk in which whether an
    /// escape decodes depends only on its own bytes, read forward. When no
    /// escape (unit) of a layer straddles an edge of an edit, the walk over
    /// the unedited bytes meets the same escapes in `new` as in the old
    /// text; a `put` without `\` or `%` holds none, and its first byte
    /// (`[` or `~` for placeholders, checked here as "not a hex digit and
    /// not an escape letter") cannot complete an escape begun just before
    /// it. So each layer of `new` is the old layer with every edit's image
    /// replaced by `put`, its units are the old ones outside the edits,
    /// shifted, and the edits' images are the next layer's edits. A layer
    /// whose units all fell inside edits does not exist for `new` (its
    /// decoding changes nothing), which ends the views there; the old views
    /// ending earlier means the same for `new` (nothing new to decode).
    pub fn derive(&mut self, prev: &Views, edits: &[(usize, usize, &[u8])]) -> bool {
        self.derive_recording(prev, edits, &mut Vec::new())
    }

    /// As [`Views::derive`], also leaving in `layer_edits[k]` the edits as
    /// `(start, end, put_len)` in the old layer `k`'s offsets (0 = raw), for
    /// every layer of the new views.
    pub fn derive_recording(
        &mut self,
        prev: &Views,
        edits: &[(usize, usize, &[u8])],
        layer_edits: &mut Vec<Vec<(usize, usize, usize)>>,
    ) -> bool {
        self.used = 0;
        if layer_edits.is_empty() {
            layer_edits.push(Vec::new());
        }
        layer_edits[0].clear();
        layer_edits[0].extend(edits.iter().map(|&(s, t, p)| (s, t, p.len())));
        let safe_put = |p: &[u8]| {
            !p.iter().any(|&b| b == b'\\' || b == b'%')
                && p.first().is_none_or(|&b| {
                    hex_val(b).is_none()
                        && !matches!(b, b'"' | b'/' | b'n' | b't' | b'r' | b'b' | b'f' | b'u')
                })
        };
        if !edits.iter().all(|&(s, e, p)| s < e && safe_put(p)) {
            return false;
        }
        let mut cur = std::mem::take(&mut self.cur);
        let mut next = std::mem::take(&mut self.next);
        cur.clear();
        cur.extend(edits.iter().enumerate().map(|(i, &(s, e, _))| (s, e, i)));
        let derived = self.derive_layers(prev, edits, &mut cur, &mut next, layer_edits);
        self.cur = cur;
        self.next = next;
        derived
    }

    /// The layer walk of [`Views::derive_recording`], with its edit
    /// buffers lent.
    fn derive_layers(
        &mut self,
        prev: &Views,
        edits: &[(usize, usize, &[u8])],
        cur: &mut Vec<(usize, usize, usize)>,
        next: &mut Vec<(usize, usize, usize)>,
        layer_edits: &mut Vec<Vec<(usize, usize, usize)>>,
    ) -> bool {
        let mut record = |k: usize, e: &[(usize, usize, usize)]| {
            if layer_edits.len() <= k {
                layer_edits.resize_with(k + 1, Vec::new);
            }
            layer_edits[k].clear();
            layer_edits[k].extend(e.iter().map(|&(s, t, i)| (s, t, edits[i].2.len())));
        };
        for k in 0..prev.used {
            if self.layers.len() <= k {
                self.layers.push(Layer::default());
            }
            let old = &prev.layers[k];
            let new = &mut self.layers[k];
            new.bytes.clear();
            new.units.clear();
            new.bytes.reserve(old.bytes.len());
            next.clear();
            // Shifts so far: old view offset minus old source offset, and
            // new minus old for views and sources.
            let (mut old_shift, mut dv, mut ds) = (0isize, 0isize, 0isize);
            let (mut u, mut vo) = (0usize, 0usize);
            let units = &old.units;
            let shifted = |x: &Unit, dv: isize, ds: isize| Unit {
                view_start: (x.view_start as isize + dv) as u32,
                view_len: x.view_len,
                src_start: (x.src_start as isize + ds) as u32,
                src_len: x.src_len,
            };
            for &(s, e, i) in cur.iter() {
                let put = edits[i].2;
                while u < units.len() && (units[u].src_start + units[u].src_len) as usize <= s {
                    let x = &units[u];
                    new.units.push(shifted(x, dv, ds));
                    old_shift += x.view_len as isize - x.src_len as isize;
                    u += 1;
                }
                if u < units.len() && (units[u].src_start as usize) < s {
                    return false; // an escape straddles the edit's start
                }
                let vs = (s as isize + old_shift) as usize;
                while u < units.len() && (units[u].src_start as usize) < e {
                    let x = &units[u];
                    if (x.src_start + x.src_len) as usize > e {
                        return false; // an escape straddles the edit's end
                    }
                    old_shift += x.view_len as isize - x.src_len as isize;
                    u += 1;
                }
                let ve = (e as isize + old_shift) as usize;
                if vs > ve || ve > old.bytes.len() || vo > vs {
                    return false;
                }
                new.bytes.extend_from_slice(&old.bytes[vo..vs]);
                new.bytes.extend_from_slice(put);
                next.push((vs, ve, i));
                vo = ve;
                dv += put.len() as isize - (ve - vs) as isize;
                ds += put.len() as isize - (e - s) as isize;
            }
            for x in &units[u..] {
                new.units.push(shifted(x, dv, ds));
            }
            new.bytes.extend_from_slice(&old.bytes[vo..]);
            if new.units.is_empty() {
                return true;
            }
            self.used = k + 1;
            record(k + 1, next);
            std::mem::swap(cur, next);
        }
        true
    }

    /// Number of decoded layers (0 when the line had nothing to decode).
    pub fn count(&self) -> usize {
        self.used
    }

    /// The bytes of decoded layer `k` (1-based; 0 is the raw line).
    pub fn layer(&self, k: usize) -> &[u8] {
        &self.layers[k - 1].bytes
    }

    /// Maps a span of layer `k` back to the raw line.
    pub fn to_raw(&self, k: usize, start: usize, end: usize) -> (usize, usize) {
        let (mut s, mut e) = (start, end);
        for layer in self.layers[..k].iter().rev() {
            let (ns, ne) = layer.map_down(s, e);
            s = ns;
            e = ne;
        }
        (s, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_backslashes_or_percent_hex_pairs() {
        for (s, want) in [
            (&b"plain text"[..], false),
            (b"a\\nb", true),
            (b"trailing\\", true),
            (b"50% off", false),
            (b"%2F", true),
            (b"100% 2F %4", false),
            (b"%zz then %41", true),
            (b"%", false),
            (b"", false),
        ] {
            assert_eq!(has_escapes(s), want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn json_and_percent_layers_map_back_to_whole_escapes() {
        let raw = br#"{"c":"echo \"tok\u0065n=ab%2Fcd\""}"#;
        let mut v = Views::default();
        v.build(raw);
        assert_eq!(v.count(), 1);
        let l1 = v.layer(1);
        assert_eq!(l1, br#"{"c":"echo "token=ab/cd""}"#);
        let s = l1.windows(5).position(|w| w == b"token").unwrap();
        // "token" spans the \u0065 escape: raw span must include all 6 bytes.
        let (rs, re) = v.to_raw(1, s, s + 5);
        assert_eq!(&raw[rs..re], br"tok\u0065n");
        let s = l1.windows(5).position(|w| w == b"ab/cd").unwrap();
        let (rs, re) = v.to_raw(1, s, s + 5);
        assert_eq!(&raw[rs..re], b"ab%2Fcd");
    }

    #[test]
    fn nested_layers_compose() {
        let raw = br#"{"a":"{\"b\":\"x\\\"y\"}"}"#;
        let mut v = Views::default();
        v.build(raw);
        assert_eq!(v.count(), 2);
        assert_eq!(v.layer(2), br#"{"a":"{"b":"x"y"}"}"#);
        let l2 = v.layer(2);
        let s = l2.iter().position(|&b| b == b'x').unwrap();
        let (rs, re) = v.to_raw(2, s, s + 3);
        assert_eq!(&raw[rs..re], br#"x\\\"y"#);
    }

    /// Derived views equal freshly built ones whenever derivation accepts
    /// the edits, and it accepts the common case (edits between escapes).
    #[test]
    fn derived_views_equal_built_views() {
        let parts: &[&[u8]] = &[
            b"\\",
            b"\\\\",
            b"\\n",
            b"\\\"",
            b"\\u0041",
            b"\\uD83D\\uDE00",
            b"\\uD83D",
            b"%2F",
            b"%4",
            b"%",
            b"ab",
            b"/home/zed",
            b"{\"a\":\"",
            b"\"}",
            b" ",
            b"x",
            b"\\\\\\\"",
        ];
        let puts: &[&[u8]] = &[b"~", b"[REDACTED:github-token]", b"[x]"];
        let mut rng = crate::testkit::XorShift(0xA076_1D64_78BD_642Fu64);
        let (mut accepted, mut layered) = (0, 0);
        let (mut old_v, mut built, mut derived) =
            (Views::default(), Views::default(), Views::default());
        for _ in 0..30_000 {
            let n = 1 + (rng.next() % 14) as usize;
            let old: Vec<u8> = rng.concat(parts, n);
            let mut edits: Vec<(usize, usize, &[u8])> = Vec::new();
            let mut at = 0;
            for _ in 0..(rng.next() % 3) {
                let s = at + (rng.next() % 12) as usize;
                let e = s + 1 + (rng.next() % 10) as usize;
                if e > old.len() {
                    break;
                }
                edits.push((s, e, puts[(rng.next() % puts.len() as u64) as usize]));
                at = e;
            }
            let mut new = Vec::new();
            let mut at = 0;
            for &(s, e, p) in &edits {
                new.extend_from_slice(&old[at..s]);
                new.extend_from_slice(p);
                at = e;
            }
            new.extend_from_slice(&old[at..]);
            old_v.build(&old);
            built.build(&new);
            if !derived.derive(&old_v, &edits) {
                continue;
            }
            accepted += 1;
            layered += usize::from(built.count() > 0 && !edits.is_empty());
            assert_eq!(derived.count(), built.count(), "{old:?} {edits:?}");
            for k in 0..built.count() {
                assert_eq!(
                    derived.layers[k].bytes, built.layers[k].bytes,
                    "{old:?} {edits:?}"
                );
                assert_eq!(
                    derived.layers[k].units, built.layers[k].units,
                    "{old:?} {edits:?}"
                );
            }
        }
        assert!(accepted > 15_000 && layered > 3_000, "{accepted} {layered}");
    }

    #[test]
    fn partial_escapes_are_left_alone() {
        let raw = br"C:\x %zz \u12 %4";
        let mut v = Views::default();
        v.build(raw);
        assert_eq!(v.count(), 0);
    }
}
