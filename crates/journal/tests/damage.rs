//! Damage that is not a torn write (issue #8, failures 4 and 5).
//!
//! - A flipped bit anywhere in the complete last frame is corruption
//!   (exit 4), never a torn tail: writers refuse and spool instead of cutting
//!   it, and repair names the event it cannot recover. True torn tails
//!   (EOF inside the frame, a zero sector) stay torn and are cut.
//! - A flipped bit in any of the 64 header bytes is reported, writers
//!   refuse and spool, and repair restores the exact original header.

use std::path::Path;

use abcd_journal::format::HEADER_LEN;
use abcd_journal::*;

fn id(n: u8) -> EventId {
    EventId([n; 16])
}

fn chain() -> VerifyOptions<'static> {
    VerifyOptions {
        chain: true,
        progress: None,
    }
}

fn events(j: &Journal) -> Vec<(EventId, Vec<u8>)> {
    j.read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .filter(|f| f.kind == FrameKind::Event)
        .map(|f| (f.id, f.payload))
        .collect()
}

fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

/// A payload with no zero byte (a zero sector inside a frame is the torn
/// signature; journal-format §8).
fn payload(n: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| 1 + ((i as u8).wrapping_mul(7) ^ n) % 250)
        .collect()
}

/// Two single events, then `last`: a single event (id 3) or a batch (ids
/// 3, 4, 5). Returns the bytes and the offset of the last frame.
fn build(last_batch: bool, last_len: usize) -> (Vec<u8>, u64) {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    j.append(id(1), &payload(1, 40)).unwrap();
    j.append(id(2), &payload(2, 300)).unwrap();
    if last_batch {
        j.append_batch(&[
            (id(3), &payload(3, 20)),
            (id(4), &payload(4, 30)),
            (id(5), &payload(5, last_len)),
        ])
        .unwrap();
    } else {
        j.append(id(3), &payload(3, last_len)).unwrap();
    }
    let frames: Vec<Frame> = j
        .read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .collect();
    let last = frames.last().unwrap().offset;
    (std::fs::read(t.path().join("journal")).unwrap(), last)
}

#[test]
fn every_bit_of_the_last_frame_flipped_is_corrupt_refused_and_reported() {
    // A last frame that crosses a 512-byte sector boundary, and the final
    // frame of a batch.
    for (last_batch, last_len) in [(false, 700), (true, 61)] {
        let (bytes, last) = build(last_batch, last_len);
        let lost_seq = if last_batch { 5 } else { 3 };
        let len = bytes.len() - last as usize;
        // Every bit of the head, of every 16th payload byte and of the last
        // 16 bytes (padding, frame_len, CRC): the verdict; the whole flow
        // (refusal, repair) for the head's first 16 bytes, a few payload
        // bytes and the trailer (each case costs a few fsyncs).
        let full =
            |off: usize| off < 16 || [20, 40, 90, 300, len - 9].contains(&off) || off >= len - 8;
        let sampled = |off: usize| off < 80 || off % 16 == 5 || off >= len - 16;
        for pos in (last as usize..bytes.len()).filter(|&p| sampled(p - last as usize)) {
            for bit in 0..8 {
                let ctx = format!(
                    "batch {last_batch} byte {pos} (frame +{}) bit {bit}",
                    pos - last as usize
                );
                let mut b = bytes.clone();
                b[pos] ^= 1 << bit;
                let t = tempfile::tempdir().unwrap();
                let dir = t.path();
                std::fs::write(dir.join("journal"), &b).unwrap();
                let v = verify(dir, &chain()).unwrap();
                assert_eq!(v.status, VerifyStatus::Corrupt, "{ctx}");
                assert_eq!(v.exit_code(), 4, "{ctx}");
                let d = v.damage.clone().unwrap();
                assert_eq!(d.offset, last, "{ctx}");
                assert!(dir.join("journal.corrupt").exists(), "{ctx}");
                if !full(pos - last as usize) {
                    continue;
                }

                // The next writer refuses and spools; nothing is cut.
                let j = Journal::open_existing(dir).unwrap();
                match j.append(id(9), b"after the damage") {
                    Err(JournalError::CorruptSpooled { bad_offset, .. }) => {
                        assert_eq!(bad_offset, last, "{ctx}")
                    }
                    other => panic!("{ctx}: expected CorruptSpooled, got {other:?}"),
                }
                assert!(files_in(&dir.join("journal.torn")).is_empty(), "{ctx}");
                assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b, "{ctx}");
                // Without the marker (writer meets it by itself) too.
                std::fs::remove_file(dir.join("journal.corrupt")).unwrap();
                assert!(
                    matches!(
                        j.append(id(10), b"x"),
                        Err(JournalError::CorruptSpooled { .. })
                    ),
                    "{ctx}"
                );
                assert!(files_in(&dir.join("journal.torn")).is_empty(), "{ctx}");

                // Repair names what it cannot recover.
                let rep = repair(dir, true).unwrap();
                assert_eq!(rep.status_before, VerifyStatus::Corrupt, "{ctx}");
                let damaged = rep
                    .lost
                    .iter()
                    .find(|l| l.offset == last)
                    .unwrap_or_else(|| panic!("{ctx}: {:?}", rep.lost));
                assert_eq!(damaged.seq, lost_seq, "{ctx}");
                assert!(!damaged.verified);
                let off_in = pos - last as usize;
                if !(32..48).contains(&off_in) && off_in >= 4 {
                    assert_eq!(damaged.event_id, Some(id(lost_seq as u8)), "{ctx}");
                }
                if last_batch {
                    // The batch's first two frames are valid but go with it.
                    let verified: Vec<u64> = rep
                        .lost
                        .iter()
                        .filter(|l| l.verified)
                        .map(|l| l.seq)
                        .collect();
                    assert_eq!(verified, vec![3, 4], "{ctx}");
                }
                assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
                let j = Journal::open_existing(dir).unwrap();
                let got: Vec<u8> = events(&j).iter().map(|e| e.0 .0[0]).collect();
                assert_eq!(got, vec![1, 2, 9, 10], "{ctx}");
            }
        }
    }
}

/// Torn shapes stay torn: EOF inside the last frame, a zero sector, a
/// zero trailer, a zero first partial sector; the next writer cuts them.
#[test]
fn true_torn_tails_stay_torn_and_are_cut() {
    let (bytes, last) = build(false, 1500);
    let last = last as usize;
    let end = bytes.len();
    let first_sector_end = last.div_ceil(512) * 512;
    let inner_sector = first_sector_end; // a whole sector inside the frame
    assert!(inner_sector + 512 < end - 8);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("cut mid-frame", bytes[..last + 200].to_vec()),
        ("cut inside the head", bytes[..last + 40].to_vec()),
        ("cut at a sector boundary", bytes[..inner_sector].to_vec()),
        ("zero sector inside", {
            let mut b = bytes.clone();
            b[inner_sector..inner_sector + 512].fill(0);
            b
        }),
        ("zero trailer", {
            let mut b = bytes.clone();
            b[end - 8..].fill(0);
            b
        }),
        ("zero first partial sector", {
            let mut b = bytes.clone();
            b[last..first_sector_end].fill(0);
            b
        }),
        ("zero-filled extension", {
            let mut b = bytes[..last].to_vec();
            b.resize(end, 0);
            b
        }),
        ("zero tail from a sector boundary to EOF", {
            let mut b = bytes.clone();
            b[inner_sector..].fill(0);
            b
        }),
    ];
    for (name, b) in cases {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        std::fs::write(dir.join("journal"), &b).unwrap();
        let v = verify(dir, &chain()).unwrap();
        assert_eq!(v.status, VerifyStatus::TornTail, "{name}");
        assert_eq!(v.exit_code(), 3, "{name}");
        assert_eq!(v.damage.unwrap().offset, last as u64, "{name}");
        let j = Journal::open_existing(dir).unwrap();
        assert_eq!(
            j.append(id(9), b"next").unwrap(),
            Appended::New { seq: 3 },
            "{name}"
        );
        let torn = files_in(&dir.join("journal.torn"));
        assert_eq!(torn.len(), 1, "{name}");
        assert_eq!(std::fs::read(&torn[0]).unwrap(), &b[last..], "{name}");
        assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
    }
}

/// A journal whose header will be damaged: a single event, a batch, a
/// single event.
fn header_journal(dir: &Path) -> Vec<u8> {
    let j = Journal::open(dir).unwrap();
    j.append(id(1), b"first").unwrap();
    j.append_batch(&[(id(2), b"b1"), (id(3), b"b2")]).unwrap();
    j.append(id(4), b"last").unwrap();
    drop(j);
    std::fs::read(dir.join("journal")).unwrap()
}

#[test]
fn every_header_bit_flipped_is_reported_refused_and_restored_exactly() {
    let t0 = tempfile::tempdir().unwrap();
    let original = header_journal(t0.path());
    for pos in 0..HEADER_LEN {
        for bit in 0..8 {
            let ctx = format!("header byte {pos} bit {bit}");
            let t = tempfile::tempdir().unwrap();
            let dir = t.path();
            let mut b = original.clone();
            b[pos] ^= 1 << bit;
            std::fs::write(dir.join("journal"), &b).unwrap();
            // Reported at offset 0, with the way back.
            let v = verify(dir, &chain()).unwrap();
            assert_eq!(v.status, VerifyStatus::Corrupt, "{ctx}");
            assert_eq!(v.exit_code(), 4);
            let d = v.damage.clone().unwrap();
            assert_eq!((d.offset, d.reason.code()), (0, "header"), "{ctx}");
            let h = v.header.clone().unwrap();
            assert_eq!(h.proof, Some(HeaderProof::FirstFrame), "{ctx}");
            assert_eq!(&h.restored.unwrap()[..], &original[..HEADER_LEN], "{ctx}");
            assert_eq!(v.frames_status, VerifyStatus::Clean, "{ctx}");
            assert_eq!(v.events, 4, "{ctx}");
            // Opening works with the proven original; readers see every
            // event; writers refuse and spool.
            let j = Journal::open_existing(dir).unwrap();
            assert!(j.header_damage().is_some());
            assert_eq!(events(&j).len(), 4, "{ctx}");
            match j.append(id(9), b"spooled") {
                Err(JournalError::CorruptSpooled { bad_offset: 0, .. }) => {}
                other => panic!("{ctx}: expected CorruptSpooled at 0, got {other:?}"),
            }
            assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b, "{ctx}");
            // Dry run changes nothing; apply restores the exact header.
            let plan = repair(dir, false).unwrap();
            assert!(plan.plan[0].contains("restore the 64-byte header"), "{ctx}");
            assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b, "{ctx}");
            let rep = repair(dir, true).unwrap();
            assert_eq!(rep.status_before, VerifyStatus::Corrupt);
            assert!(rep.lost.is_empty(), "{ctx}");
            let after = std::fs::read(dir.join("journal")).unwrap();
            assert_eq!(&after[..original.len()], &original[..], "{ctx}");
            assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
            assert_eq!(files_in(&dir.join("journal.quarantine")).len(), 1);
            let j = Journal::open_existing(dir).unwrap();
            assert!(j.header_damage().is_none());
            let got: Vec<u8> = events(&j).iter().map(|e| e.0 .0[0]).collect();
            assert_eq!(got, vec![1, 2, 3, 4, 9], "{ctx}");
            assert_eq!(j.append(id(10), b"x").unwrap(), Appended::New { seq: 6 });
        }
    }
}

#[test]
fn every_header_bit_flipped_in_an_empty_journal_is_restored_by_its_crc() {
    let t0 = tempfile::tempdir().unwrap();
    drop(Journal::open(t0.path()).unwrap());
    let original = std::fs::read(t0.path().join("journal")).unwrap();
    assert_eq!(original.len(), HEADER_LEN);
    for pos in 0..HEADER_LEN {
        for bit in 0..8 {
            let ctx = format!("header byte {pos} bit {bit}");
            let t = tempfile::tempdir().unwrap();
            let dir = t.path();
            let mut b = original.clone();
            b[pos] ^= 1 << bit;
            std::fs::write(dir.join("journal"), &b).unwrap();
            let v = verify(dir, &chain()).unwrap();
            assert_eq!(v.status, VerifyStatus::Corrupt, "{ctx}");
            assert_eq!(v.header.unwrap().proof, Some(HeaderProof::SingleBitCrc));
            let j = Journal::open_existing(dir).unwrap();
            assert!(matches!(
                j.append(id(9), b"spooled"),
                Err(JournalError::CorruptSpooled { bad_offset: 0, .. })
            ));
            repair(dir, true).unwrap();
            let after = std::fs::read(dir.join("journal")).unwrap();
            assert_eq!(&after[..HEADER_LEN], &original[..], "{ctx}");
            assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
            let j = Journal::open_existing(dir).unwrap();
            let got: Vec<u8> = events(&j).iter().map(|e| e.0 .0[0]).collect();
            assert_eq!(got, vec![9], "{ctx}");
        }
    }
}

#[test]
fn an_unprovable_header_is_never_guessed() {
    // Frames present, but the first frame's prev_hash is damaged too: no
    // candidate is proven, so opening fails and repair refuses.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut b = header_journal(dir);
    b[20] ^= 0x10;
    b[HEADER_LEN + 60] ^= 0x01;
    std::fs::write(dir.join("journal"), &b).unwrap();
    assert!(matches!(
        Journal::open_existing(dir),
        Err(JournalError::BadHeader { .. })
    ));
    assert!(matches!(
        verify(dir, &chain()),
        Err(JournalError::BadHeader { .. })
    ));
    assert!(matches!(
        repair(dir, true),
        Err(JournalError::BadHeader { .. })
    ));
    assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b);

    // No frame and more than one bit damaged: repair writes a fresh header
    // (nothing can depend on it) and drains the spool.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    drop(Journal::open(dir).unwrap());
    let mut b = std::fs::read(dir.join("journal")).unwrap();
    b[20] ^= 0x11;
    b[41] ^= 0x80;
    std::fs::write(dir.join("journal"), &b).unwrap();
    assert!(matches!(
        Journal::open_existing(dir),
        Err(JournalError::BadHeader { .. })
    ));
    let plan = repair(dir, false).unwrap();
    assert!(plan.plan[0].contains("fresh header"), "{:?}", plan.plan);
    assert_eq!(std::fs::read(dir.join("journal")).unwrap(), b);
    let rep = repair(dir, true).unwrap();
    assert!(rep.applied);
    assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
    let j = Journal::open_existing(dir).unwrap();
    assert_eq!(j.append(id(1), b"a").unwrap(), Appended::New { seq: 1 });
}

#[test]
fn header_and_frame_damage_are_repaired_together() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut b = header_journal(dir);
    let original = b.clone();
    b[30] ^= 0x04;
    let last_frame = b.len() - 88 - 8; // "last" pads to 8 bytes
    b[last_frame + 82] ^= 0x01;
    std::fs::write(dir.join("journal"), &b).unwrap();
    let v = verify(dir, &chain()).unwrap();
    assert_eq!(v.damage.as_ref().unwrap().offset, 0);
    assert_eq!(v.frames_status, VerifyStatus::Corrupt);
    assert_eq!(v.frame_damage.as_ref().unwrap().offset, last_frame as u64);
    let plan = repair(dir, false).unwrap();
    assert!(plan
        .plan
        .iter()
        .any(|s| s.contains("restore the 64-byte header")));
    assert_eq!(plan.lost.len(), 1, "{:?}", plan.lost);
    let rep = repair(dir, true).unwrap();
    assert_eq!(rep.lost[0].seq, 4);
    assert_eq!(rep.lost[0].event_id, Some(id(4)));
    let after = std::fs::read(dir.join("journal")).unwrap();
    assert_eq!(&after[..last_frame], &original[..last_frame]);
    assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);
}
