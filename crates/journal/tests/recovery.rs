//! Torn tails at every byte offset, and mid-file corruption end to end:
//! verify finds it, appends refuse and spool, repair plans then applies.

use abcd_journal::*;

fn id(n: u8) -> EventId {
    EventId([n; 16])
}

fn ids_in(j: &Journal) -> Vec<(u64, EventId, Vec<u8>)> {
    j.read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .filter(|f| f.kind == FrameKind::Event)
        .map(|f| (f.seq, f.id, f.payload))
        .collect()
}

fn chain() -> VerifyOptions<'static> {
    VerifyOptions {
        chain: true,
        progress: None,
    }
}

fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

/// Build a journal with two single events and then `last` (a single event
/// or a batch); return its bytes and the offset where `last` starts.
fn build(last_batch: bool) -> (Vec<u8>, u64) {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    j.append(id(1), b"first event").unwrap();
    j.append(id(2), &[2u8; 37]).unwrap();
    let start = j.head().unwrap().offset;
    if last_batch {
        j.append_batch(&[(id(3), b"batch a"), (id(4), &[4u8; 100]), (id(5), b"c")])
            .unwrap();
    } else {
        j.append(id(3), &[3u8; 61]).unwrap();
    }
    (std::fs::read(t.path().join("journal")).unwrap(), start)
}

#[test]
fn torn_tail_at_every_byte_offset_is_recovered() {
    for last_batch in [false, true] {
        let (bytes, start) = build(last_batch);
        for cut in start as usize..bytes.len() {
            let t = tempfile::tempdir().unwrap();
            std::fs::write(t.path().join("journal"), &bytes[..cut]).unwrap();
            let v = verify(t.path(), &chain()).unwrap();
            if cut == start as usize {
                assert_eq!(v.status, VerifyStatus::Clean, "cut {cut}");
            } else {
                assert_eq!(
                    v.status,
                    VerifyStatus::TornTail,
                    "cut {cut} batch {last_batch}"
                );
                assert_eq!(v.exit_code(), 3);
                assert_eq!(v.damage.as_ref().unwrap().offset, start, "cut {cut}");
                assert_eq!(v.damage.as_ref().unwrap().frames_after, 0);
            }
            // A reader sees only the complete prefix, never a torn batch.
            let j = Journal::open_existing(t.path()).unwrap();
            assert_eq!(ids_in(&j).len(), 2, "cut {cut}");
            // The next writer recovers: torn bytes go aside, append lands.
            assert_eq!(
                j.append(id(9), b"after").unwrap(),
                Appended::New { seq: 3 },
                "cut {cut}"
            );
            let torn = files_in(&t.path().join("journal.torn"));
            if cut > start as usize {
                assert_eq!(torn.len(), 1, "cut {cut}");
                assert_eq!(
                    std::fs::read(&torn[0]).unwrap(),
                    &bytes[start as usize..cut]
                );
            } else {
                assert!(torn.is_empty());
            }
            let v = verify(t.path(), &chain()).unwrap();
            assert_eq!(v.status, VerifyStatus::Clean, "cut {cut}");
            let got: Vec<u8> = ids_in(&j).iter().map(|e| e.1 .0[0]).collect();
            assert_eq!(got, vec![1, 2, 9], "cut {cut}");
        }
    }
}

#[test]
fn zero_filled_tail_is_torn_and_looks_torn() {
    let (mut bytes, start) = build(false);
    let n = bytes.len();
    bytes.truncate(start as usize);
    bytes.resize(n + 1024, 0);
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("journal"), &bytes).unwrap();
    let v = verify(t.path(), &chain()).unwrap();
    assert_eq!(v.status, VerifyStatus::TornTail);
    assert!(v.damage.unwrap().looks_torn);
}

/// 20 events; flip one byte inside event 8's payload.
fn corrupt_journal(dir: &std::path::Path) -> (u64, Vec<Frame>) {
    let j = Journal::open(dir).unwrap();
    for n in 1..=10u8 {
        j.append(id(n), &[n; 50]).unwrap();
    }
    j.append_batch(&[(id(11), b"b1"), (id(12), b"b2")]).unwrap();
    for n in 13..=20u8 {
        j.append(id(n), &[n; 50]).unwrap();
    }
    let frames: Vec<Frame> = j
        .read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .collect();
    let bad = frames[7].offset;
    let mut bytes = std::fs::read(dir.join("journal")).unwrap();
    bytes[bad as usize + 90] ^= 0x40;
    std::fs::write(dir.join("journal"), &bytes).unwrap();
    (bad, frames)
}

#[test]
fn flipped_byte_mid_file_found_refused_spooled_and_repaired() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (bad, frames) = corrupt_journal(dir);
    let size_before = std::fs::metadata(dir.join("journal")).unwrap().len();

    // verify: right offset, right reason, frames after it.
    let v = verify(dir, &chain()).unwrap();
    assert_eq!(v.status, VerifyStatus::Corrupt);
    assert_eq!(v.exit_code(), 4);
    let d = v.damage.clone().unwrap();
    assert_eq!(d.offset, bad);
    assert_eq!(d.reason, Reason::Crc);
    assert!(!d.looks_torn);
    assert_eq!(d.frames_after, 12);
    assert_eq!(d.seq_after, Some((9, 20)));
    assert_eq!(v.frames, 7);
    // CRC-only mode finds the same.
    let v2 = verify(dir, &VerifyOptions::default()).unwrap();
    assert_eq!(v2.damage.unwrap().offset, bad);

    // Appends refuse and spool durably, with the distinct variant.
    let j = Journal::open_existing(dir).unwrap();
    let err = j.append(id(99), b"spooled event").unwrap_err();
    let spool_path = match err {
        JournalError::CorruptSpooled {
            bad_offset,
            spool_path,
            ..
        } => {
            assert_eq!(bad_offset, bad);
            spool_path
        }
        e => panic!("expected CorruptSpooled, got {e}"),
    };
    assert!(spool_path.exists());
    assert_eq!(
        std::fs::metadata(dir.join("journal")).unwrap().len(),
        size_before
    );

    // Dry run changes nothing.
    let snapshot = std::fs::read(dir.join("journal")).unwrap();
    let plan = repair(dir, false).unwrap();
    assert!(!plan.applied);
    assert_eq!(plan.status_before, VerifyStatus::Corrupt);
    assert_eq!(plan.cut_offset, Some(bad));
    assert_eq!(plan.recoverable_events, 12);
    assert_eq!(plan.unrecoverable_frames, 0);
    assert_eq!(plan.spool_files, 1);
    assert_eq!(std::fs::read(dir.join("journal")).unwrap(), snapshot);
    assert!(spool_path.exists());
    assert!(files_in(&dir.join("journal.quarantine")).is_empty());

    // Apply.
    let rep = repair(dir, true).unwrap();
    assert!(rep.applied);
    assert_eq!(rep.spool_drained, 13);
    let q = files_in(&dir.join("journal.quarantine"));
    assert_eq!(q.len(), 1);
    assert_eq!(std::fs::read(&q[0]).unwrap(), &snapshot[bad as usize..]);
    assert!(!spool_path.exists());
    assert_eq!(verify(dir, &chain()).unwrap().status, VerifyStatus::Clean);

    // Every intact event is back with its original id and payload, once;
    // the damaged one (seq 8, id 8) is the only loss; the spooled one is in.
    let j = Journal::open_existing(dir).unwrap();
    let all: Vec<Frame> = j
        .read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .collect();
    assert_eq!(all[7].kind, FrameKind::Repair);
    let rr = RepairRecord::decode(&all[7].payload).unwrap();
    assert_eq!(
        (rr.cut_offset, rr.cut_len, rr.last_good_seq),
        (bad, size_before - bad, 7)
    );
    assert_eq!((rr.recovered_events, rr.unrecoverable_frames), (12, 0));
    assert_eq!(
        rr.cut_sha256,
        abcd_journal::format::sha256(&snapshot[bad as usize..])
    );
    let evs = ids_in(&j);
    let mut want: Vec<(EventId, Vec<u8>)> = frames
        .iter()
        .filter(|f| f.id != id(8))
        .map(|f| (f.id, f.payload.clone()))
        .collect();
    want.push((id(99), b"spooled event".to_vec()));
    let got: Vec<(EventId, Vec<u8>)> = evs.iter().map(|e| (e.1, e.2.clone())).collect();
    assert_eq!(got, want);
    let seqs: Vec<u64> = all.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    // The batch stayed a batch and writers accept appends again.
    assert_eq!(
        j.append(id(11), b"x").unwrap().seq(),
        all.iter().find(|f| f.id == id(11)).unwrap().seq
    );
    assert!(matches!(
        j.append(id(100), b"y").unwrap(),
        Appended::New { .. }
    ));
    // Old checkpoints past the cut no longer resume.
    assert!(matches!(
        j.read_from(&frames[15].end),
        Err(JournalError::CheckpointMismatch { .. })
    ));
}

#[test]
fn writer_detects_damage_in_unindexed_region_by_itself() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (bad, _) = corrupt_journal(dir);
    // Drop the index: the writer must rescan and find the damage itself.
    std::fs::remove_file(dir.join("journal.ids")).unwrap();
    let j = Journal::open_existing(dir).unwrap();
    match j.append(id(77), b"z") {
        Err(JournalError::CorruptSpooled { bad_offset, .. }) => assert_eq!(bad_offset, bad),
        other => panic!("expected refusal, got {other:?}"),
    }
    assert!(dir.join("journal.corrupt").exists());
}

#[test]
fn spool_with_clean_journal_is_drained() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (_, _) = corrupt_journal(dir);
    let j = Journal::open_existing(dir).unwrap();
    verify(dir, &chain()).unwrap();
    assert!(j.append(id(50), b"s1").is_err());
    assert!(j.append_batch(&[(id(51), b"s2"), (id(52), b"s3")]).is_err());
    // Pretend an operator restored a good copy: the journal is clean, the
    // spool holds events. drain_spool appends them idempotently.
    repair(dir, true).unwrap();
    let st = stats(dir).unwrap();
    assert_eq!(st.spool_files, 0);
    assert!(st.corrupt_marker.is_none());
    assert_eq!(drain_spool(dir).unwrap(), 0);
    let evs = ids_in(&j);
    for n in [50u8, 51, 52] {
        assert_eq!(evs.iter().filter(|e| e.1 == id(n)).count(), 1);
    }
}

#[test]
fn stats_counts() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    j.append(id(1), b"a").unwrap();
    j.append_batch(&[(id(2), b"b"), (id(3), b"c")]).unwrap();
    let s = stats(t.path()).unwrap();
    assert_eq!(
        (s.frames, s.events, s.first_seq, s.last_seq),
        (3, 3, Some(1), Some(3))
    );
    assert_eq!(s.trailing_bytes, 0);
    assert!(s.first_ts_unix_ns.unwrap() <= s.last_ts_unix_ns.unwrap());
}

#[test]
fn verify_reports_progress_up_to_the_file_size() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    let big = vec![7u8; 1 << 20];
    for n in 0..10u8 {
        j.append(id(n), &big).unwrap();
    }
    let seen = std::sync::Mutex::new(Vec::new());
    let cb = |done: u64, total: u64| seen.lock().unwrap().push((done, total));
    let v = verify(
        t.path(),
        &VerifyOptions {
            chain: false,
            progress: Some(&cb),
        },
    )
    .unwrap();
    assert_eq!(v.status, VerifyStatus::Clean);
    let seen = seen.into_inner().unwrap();
    let size = std::fs::metadata(t.path().join("journal")).unwrap().len();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(*seen.last().unwrap(), (size, size));
}
