//! Golden vectors in journal-format/vectors/: each `<name>.journal` is
//! dumped and compared byte for byte with `<name>.dump`, and the journals
//! the writer can produce are rebuilt with fixed journal_id and clock and
//! must reproduce the checked-in bytes exactly.
//!
//! Regenerate after an intentional format change with ABCD_BLESS=1. The
//! version-1 vectors (`vectors/v1/`) are kept as they were written: the
//! reader must still dump and read them exactly (the upgrade reads v1).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use abcd_journal::format::{FileHeader, HEADER_LEN};
use abcd_journal::*;

const JOURNAL_ID: [u8; 16] = *b"abcd-vector-jrnl";
const CLOCK_NS: u64 = 1_767_225_600_000_000_000; // 2026-01-01T00:00:00Z

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../journal-format/vectors")
}

fn opts() -> Options {
    Options {
        fixed_journal_id: Some(JOURNAL_ID),
        fixed_clock_ns: Some(CLOCK_NS),
        ..Options::default()
    }
}

fn id(s: &str) -> EventId {
    let mut b = [0u8; 16];
    b[..s.len()].copy_from_slice(s.as_bytes());
    EventId(b)
}

/// The text dump of a journal file: header, every frame decodable in
/// sequence from offset 64, then the chain-mode verify verdict.
fn dump(bytes: &[u8]) -> String {
    let mut s = String::new();
    match FileHeader::decode(bytes) {
        Ok(h) => writeln!(
            s,
            "header version={} flags={:#06x} segment_no={} journal_id={} base_seq={} created_unix_ms={}",
            h.version,
            h.flags,
            h.segment_no,
            hex::encode(h.journal_id),
            h.base_seq,
            h.created_unix_ms
        )
        .unwrap(),
        Err(e) => writeln!(s, "header invalid: {e}").unwrap(),
    }
    let mut off = HEADER_LEN;
    while off < bytes.len() {
        match decode_frame(&bytes[off..]) {
            Ok((h, payload)) => {
                let end = off + h.frame_len as usize;
                let hash = sha2_hex(&bytes[off..end]);
                writeln!(
                    s,
                    "frame offset={off} len={} seq={} kind={} flags={:#06x} ts_unix_ns={} id={} prev_hash={} payload_len={} payload={} hash={hash}",
                    h.frame_len,
                    h.seq,
                    h.kind.name(),
                    h.flags,
                    h.ts_unix_ns,
                    hex::encode(h.event_id),
                    hex::encode(h.prev_hash),
                    h.payload_len,
                    hex::encode(payload),
                )
                .unwrap();
                off = end;
            }
            Err(e) => {
                writeln!(
                    s,
                    "undecodable offset={off} reason={} bytes_left={}",
                    e.reason.code(),
                    bytes.len() - off
                )
                .unwrap();
                break;
            }
        }
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("journal"), bytes).unwrap();
    match verify(
        t.path(),
        &VerifyOptions {
            chain: true,
            progress: None,
        },
    ) {
        Ok(v) => {
            write!(
                s,
                "verify status={:?} exit_code={} frames={} events={} repairs={} head_seq={} head_offset={} head_hash={}",
                v.status,
                v.exit_code(),
                v.frames,
                v.events,
                v.repairs,
                v.head.seq,
                v.head.offset,
                hex::encode(v.head.hash)
            )
            .unwrap();
            if let Some(d) = v.damage {
                write!(
                    s,
                    " damage_offset={} reason={} looks_torn={} frames_after={} bytes_after={}",
                    d.offset,
                    d.reason.code(),
                    d.looks_torn,
                    d.frames_after,
                    d.bytes_after
                )
                .unwrap();
            }
            s.push('\n');
        }
        Err(e) => writeln!(s, "verify error: {e}").unwrap(),
    }
    s
}

fn sha2_hex(b: &[u8]) -> String {
    hex::encode(abcd_journal::format::sha256(b))
}

/// Build a vector journal in a temp dir; return its bytes.
fn build(name: &str) -> Vec<u8> {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let j = Journal::open_with(dir, opts()).unwrap();
    match name {
        "empty" => {}
        "single" => {
            j.append(id("event-1"), b"hello, journal").unwrap();
        }
        "batch" => {
            j.append(id("event-1"), b"first").unwrap();
            j.append_batch(&[
                (id("event-2"), b"second"),
                (id("event-1"), b"dup skipped"),
                (id("event-3"), b""),
                (id("event-4"), &[0xFF; 9]),
            ])
            .unwrap();
            j.append(id("event-3"), b"resent, no-op").unwrap();
            j.append(id("event-5"), b"last").unwrap();
        }
        "torn" => {
            j.append(id("event-1"), b"kept").unwrap();
            j.append(id("event-2"), b"this frame is cut short").unwrap();
            drop(j);
            let mut b = std::fs::read(dir.join("journal")).unwrap();
            b.truncate(b.len() - 13);
            return b;
        }
        "corrupt" => {
            for k in 1..=4 {
                j.append(id(&format!("event-{k}")), format!("payload {k}").as_bytes())
                    .unwrap();
            }
            drop(j);
            let mut b = std::fs::read(dir.join("journal")).unwrap();
            // Flip one bit in the payload of the second frame (header 64 + first
            // frame 104 + frame head 80).
            b[64 + 104 + 80] ^= 0x01;
            return b;
        }
        "repaired" => {
            for k in 1..=4 {
                j.append(id(&format!("event-{k}")), format!("payload {k}").as_bytes())
                    .unwrap();
            }
            let mut b = std::fs::read(dir.join("journal")).unwrap();
            b[64 + 104 + 80] ^= 0x01;
            std::fs::write(dir.join("journal"), &b).unwrap();
            let j2 = Journal::open_with(dir, opts()).unwrap();
            j2.repair(true).unwrap();
        }
        other => panic!("unknown vector {other}"),
    }
    std::fs::read(dir.join("journal")).unwrap()
}

const VECTORS: [&str; 6] = ["empty", "single", "batch", "torn", "corrupt", "repaired"];

#[test]
fn golden_vectors_reproduce_and_dump_exactly() {
    let vdir = vectors_dir();
    let bless = std::env::var_os("ABCD_BLESS").is_some();
    for name in VECTORS {
        let jpath = vdir.join(format!("{name}.journal"));
        let dpath = vdir.join(format!("{name}.dump"));
        let built = build(name);
        if bless {
            std::fs::create_dir_all(&vdir).unwrap();
            std::fs::write(&jpath, &built).unwrap();
            std::fs::write(&dpath, dump(&built)).unwrap();
        }
        let golden = std::fs::read(&jpath)
            .unwrap_or_else(|e| panic!("{}: {e} (run with ABCD_BLESS=1)", jpath.display()));
        assert!(
            golden == built,
            "{name}: writer output differs from {}",
            jpath.display()
        );
        let want = std::fs::read_to_string(&dpath).unwrap();
        assert_eq!(
            dump(&golden),
            want,
            "{name}: dump differs from {}",
            dpath.display()
        );
    }
}

#[test]
fn vectors_are_read_back_by_the_reader() {
    // The reader agrees with the dump on the valid vectors.
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("journal"),
        std::fs::read(vectors_dir().join("batch.journal")).unwrap(),
    )
    .unwrap();
    let j = Journal::open_existing(t.path()).unwrap();
    let got: Vec<(u64, EventId, Vec<u8>)> = j
        .read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .map(|f| (f.seq, f.id, f.payload))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, id("event-1"), b"first".to_vec()),
            (2, id("event-2"), b"second".to_vec()),
            (3, id("event-3"), b"".to_vec()),
            (4, id("event-4"), vec![0xFF; 9]),
            (5, id("event-5"), b"last".to_vec()),
        ]
    );
}

#[test]
fn version_1_vectors_are_still_read_exactly() {
    let v1 = vectors_dir().join("v1");
    for name in VECTORS {
        let golden = std::fs::read(v1.join(format!("{name}.journal"))).unwrap();
        assert_eq!(u16::from_le_bytes([golden[8], golden[9]]), 1, "{name}");
        let want = std::fs::read_to_string(v1.join(format!("{name}.dump"))).unwrap();
        assert_eq!(dump(&golden), want, "{name}: v1 dump differs");
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("journal"),
        std::fs::read(v1.join("batch.journal")).unwrap(),
    )
    .unwrap();
    let j = Journal::open_existing(t.path()).unwrap();
    assert_eq!(j.format_version(), 1);
    assert_eq!(j.read_from(&j.start()).unwrap().count(), 5);
}
