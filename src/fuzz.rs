//! Entry points for the fuzz targets under `fuzz/` (and for the test that
//! runs their seed corpora on every CI run). Each takes arbitrary bytes and
//! must never panic; where a decoder accepts the input, the round trip
//! through the encoder is checked too.

use std::path::Path;

/// Journal payload → event (and back: the encoding is canonical).
pub fn event_decode(data: &[u8]) {
    crate::event::fuzz_decode(data);
}

/// A published sync segment → events; each event that decodes re-encodes
/// to the bytes its id was taken from.
pub fn sync_segment(data: &[u8]) {
    crate::sync::wire::fuzz_segment(data);
}

/// Record file bytes → frontmatter + body; a record that parses renders and
/// parses again to the same metadata and body.
pub fn record_parse(data: &[u8]) {
    if let Ok((meta, body)) = crate::record::parse(data) {
        let again = crate::record::render(&meta, body);
        if let Ok((meta2, body2)) = crate::record::parse(&again) {
            assert_eq!(meta2.lineage.session_id, meta.lineage.session_id);
            assert_eq!(meta2.source_sha256, meta.source_sha256);
            assert!(body2.starts_with(body) || body.starts_with(body2));
        }
        // The composite-id repair changes the lineage and nothing else:
        // the body after the fence, the source hash and the capture time
        // stay byte for byte.
        let lineage = crate::lineage::Lineage {
            session_id: "5a9221e2-0000-4000-8000-000000000001".into(),
            agent_id: Some("acf07c33".into()),
            lineage_source: Some(crate::lineage::LineageSource::Migrated),
            spawn_attribution: Some(crate::lineage::SpawnAttribution::Unattributed),
            ..crate::lineage::Lineage::default()
        };
        if let Ok(new) = crate::record::relineage(data, &lineage) {
            let (m2, b2) = crate::record::parse(&new).expect("a relineaged record parses");
            assert_eq!(b2, body);
            assert_eq!(m2.lineage, lineage);
            assert_eq!(m2.source_sha256, meta.source_sha256);
            assert_eq!(m2.captured_at_ns, meta.captured_at_ns);
        }
        let _ = crate::migrate::recover_session_id(body, "5a9221e2");
    }
}

/// Hook payloads (and the stdin scanner that finds their end), harness
/// sidecars and the settle predicate.
pub fn hook_inputs(data: &[u8]) {
    let _ = crate::hook::payload::HookPayload::parse(data);
    payload_scanner(data);
    let _ = crate::lineage::parse_harness_sidecar(data, Path::new("agent-x.meta.json"));
    // The streaming settle check answers as the whole-buffer one does,
    // wherever the chunks are cut.
    let settled = crate::hook::payload::transcript_settled(data);
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let mut tail = crate::hook::payload::LastLine::default();
    tail.feed(&data[..cut]);
    tail.feed(&data[cut..]);
    assert_eq!(tail.settled(), settled, "cut at {cut}");
    let mut tail = crate::hook::payload::LastLine::default();
    data.chunks(7).for_each(|c| tail.feed(c));
    assert_eq!(tail.settled(), settled, "chunks of 7");
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = crate::lineage::parse_composite_session_id(s);
        let _ = crate::stage::parse_blob_stem(s);
        let _ = crate::clock::parse_rfc3339(s);
    }
}

/// The stdin scanner ([`crate::hook::stdin::ObjectScanner`]) against
/// serde_json, the parser the hook hands its answer to:
/// - it answers the same wherever the input is cut;
/// - where serde_json reads a valid object first, the scanner ends exactly
///   where it does (so "incomplete" means no prefix is a complete object);
/// - where the scanner says complete at `n`, `input[..n]` parses as an
///   object, or serde_json refuses it for something other than running out
///   of input: the scanner does not validate, but never cuts an object
///   short;
/// - "not an object" points at the first non-whitespace byte, not `{`.
fn payload_scanner(data: &[u8]) {
    use crate::hook::stdin::{ObjectScanner, Scan};
    let scan = ObjectScanner::default().feed(data);
    let cut = data
        .last()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let mut s = ObjectScanner::default();
    s.feed(&data[..cut]);
    assert_eq!(s.feed(&data[cut..]), scan, "cut at {cut}");
    let mut s = ObjectScanner::default();
    data.chunks(5).for_each(|c| {
        s.feed(c);
    });
    assert_eq!(s.answer(), scan, "chunks of 5");

    let mut stream = serde_json::Deserializer::from_slice(data).into_iter::<serde_json::Value>();
    if let Some(Ok(serde_json::Value::Object(_))) = stream.next() {
        assert_eq!(
            scan,
            Scan::Complete(stream.byte_offset()),
            "serde_json's object end"
        );
    }
    match scan {
        Scan::Complete(n) => match serde_json::from_slice::<serde_json::Value>(&data[..n]) {
            Ok(v) => assert!(v.is_object(), "complete at {n} but not an object"),
            Err(e) => assert!(!e.is_eof(), "complete at {n} cuts an object short: {e}"),
        },
        Scan::NotAnObject(at) => {
            assert!(data[..at].iter().all(|b| b" \t\r\n".contains(b)));
            assert_ne!(data[at], b'{');
        }
        Scan::Pending => {}
    }
}
