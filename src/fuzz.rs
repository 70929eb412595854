//! Entry points for the fuzz targets under `fuzz/` (and for the test that
//! runs their seed corpora on every CI run). Each takes arbitrary bytes and
//! must never panic; where a decoder accepts the input, the round trip
//! through the encoder is checked too.

use std::path::Path;

/// Journal payload → event (and back: the encoding is canonical).
pub fn event_decode(data: &[u8]) {
    crate::event::fuzz_decode(data);
}

/// Record file bytes → frontmatter + body; a record that parses renders and
/// parses again to the same metadata and body.
pub fn record_parse(data: &[u8]) {
    if let Ok((meta, body)) = crate::record::parse(data) {
        let again = crate::record::render(&meta, body);
        if let Ok((meta2, body2)) = crate::record::parse(&again) {
            assert_eq!(meta2.session_id, meta.session_id);
            assert_eq!(meta2.source_sha256, meta.source_sha256);
            assert!(body2.starts_with(body) || body.starts_with(body2));
        }
    }
}

/// Hook payloads, harness sidecars and the settle predicate.
pub fn hook_inputs(data: &[u8]) {
    let _ = crate::hook::payload::HookPayload::parse(data);
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
