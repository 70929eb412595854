//! Basic behaviour: create, append, dedup, batches, read_from, modes, index.

use std::os::unix::fs::PermissionsExt;

use abcd_journal::*;

fn id(n: u8) -> EventId {
    EventId([n; 16])
}

fn read_all(j: &Journal) -> Vec<Frame> {
    j.read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .collect()
}

#[test]
fn append_read_dedup_and_batches() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    let j = Journal::open(&dir).unwrap();
    assert_eq!(j.append(id(1), b"one").unwrap(), Appended::New { seq: 1 });
    assert_eq!(j.append(id(2), b"two").unwrap(), Appended::New { seq: 2 });
    assert_eq!(
        j.append(id(1), b"other bytes").unwrap(),
        Appended::AlreadyPresent { seq: 1 }
    );
    let acks = j
        .append_batch(&[
            (id(3), b"three"),
            (id(2), b"dup"),
            (id(4), b""),
            (id(3), b"again"),
        ])
        .unwrap();
    assert_eq!(
        acks,
        vec![
            Appended::New { seq: 3 },
            Appended::AlreadyPresent { seq: 2 },
            Appended::New { seq: 4 },
            Appended::AlreadyPresent { seq: 3 }
        ]
    );
    let frames = read_all(&j);
    let got: Vec<(u64, EventId, Vec<u8>)> = frames
        .iter()
        .map(|f| (f.seq, f.id, f.payload.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, id(1), b"one".to_vec()),
            (2, id(2), b"two".to_vec()),
            (3, id(3), b"three".to_vec()),
            (4, id(4), b"".to_vec())
        ]
    );
    assert_eq!(j.head().unwrap(), frames[3].end);
    assert_eq!(j.contains(&id(4)).unwrap(), Some(4));
    assert_eq!(j.contains(&id(9)).unwrap(), None);
    // Resume from a middle position yields exactly the suffix.
    let rest: Vec<u64> = j
        .read_from(&frames[1].end)
        .unwrap()
        .map(|f| f.unwrap().seq)
        .collect();
    assert_eq!(rest, vec![3, 4]);
    // A fresh handle (a fresh process) sees the same and still dedups.
    drop(j);
    let j = Journal::open_existing(&dir).unwrap();
    assert_eq!(
        j.append(id(3), b"x").unwrap(),
        Appended::AlreadyPresent { seq: 3 }
    );
    assert_eq!(j.append(id(5), b"five").unwrap(), Appended::New { seq: 5 });
    assert_eq!(
        verify(
            &dir,
            &VerifyOptions {
                chain: true,
                progress: None
            }
        )
        .unwrap()
        .status,
        VerifyStatus::Clean
    );
}

#[test]
fn modes_are_exact_whatever_the_umask() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("a/b");
    // SAFETY: umask is process-wide; this test only widens what the engine
    // must narrow, other tests are unaffected by a 0o000 or 0o022 umask.
    let old = unsafe { libc::umask(0o000) };
    let j = Journal::open(&dir).unwrap();
    j.append(id(1), b"x").unwrap();
    unsafe { libc::umask(old) };
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("journal")), 0o600);
    assert_eq!(mode(&dir.join("journal.lock")), 0o600);
    assert_eq!(mode(&dir.join("journal.ids")), 0o600);
}

#[test]
fn open_existing_not_found_and_bad_header() {
    let t = tempfile::tempdir().unwrap();
    assert!(matches!(
        Journal::open_existing(t.path()),
        Err(JournalError::NotFound(_))
    ));
    std::fs::write(
        t.path().join("journal"),
        b"not a journal at all, definitely not one, nope nope nope nope",
    )
    .unwrap();
    assert!(matches!(
        Journal::open_existing(t.path()),
        Err(JournalError::BadHeader { .. })
    ));
}

#[test]
fn read_from_foreign_position_is_checkpoint_mismatch() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    j.append(id(1), b"a").unwrap();
    let f = read_all(&j).pop().unwrap();
    let mut bad = f.end.clone();
    bad.hash[0] ^= 1;
    assert!(matches!(
        j.read_from(&bad),
        Err(JournalError::CheckpointMismatch { .. })
    ));
    let mut bad = f.end.clone();
    bad.offset -= 8;
    assert!(matches!(
        j.read_from(&bad),
        Err(JournalError::CheckpointMismatch { .. })
    ));
    let mut s = j.start();
    s.hash[3] ^= 1;
    assert!(matches!(
        j.read_from(&s),
        Err(JournalError::CheckpointMismatch { .. })
    ));
}

#[test]
fn payload_cap_is_enforced_before_writing() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    let big = vec![0u8; MAX_PAYLOAD + 1];
    assert!(matches!(
        j.append(id(1), &big),
        Err(JournalError::PayloadTooLarge { .. })
    ));
    assert_eq!(read_all(&j).len(), 0);
}

#[test]
fn index_is_rebuilt_when_missing_or_damaged() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    for n in 1..=200u8 {
        j.append(id(n), &[n; 10]).unwrap();
    }
    std::fs::remove_file(t.path().join("journal.ids")).unwrap();
    assert_eq!(
        j.append(id(7), b"again").unwrap(),
        Appended::AlreadyPresent { seq: 7 }
    );
    // Scribble over the index: header crc fails, it is rebuilt.
    std::fs::write(t.path().join("journal.ids"), vec![0xAB; 4096]).unwrap();
    assert_eq!(
        j.append(id(150), b"again").unwrap(),
        Appended::AlreadyPresent { seq: 150 }
    );
    assert_eq!(
        j.append(id(201), b"new").unwrap(),
        Appended::New { seq: 201 }
    );
    // Stale index from before more appends by "another writer" with the index removed.
    let saved = std::fs::read(t.path().join("journal.ids")).unwrap();
    j.append(id(202), b"x").unwrap();
    std::fs::write(t.path().join("journal.ids"), saved).unwrap();
    assert_eq!(
        j.append(id(202), b"x").unwrap(),
        Appended::AlreadyPresent { seq: 202 }
    );
}

#[test]
fn threads_sharing_one_handle_do_not_interleave() {
    let t = tempfile::tempdir().unwrap();
    let j = std::sync::Arc::new(Journal::open(t.path()).unwrap());
    let hs: Vec<_> = (0..4u8)
        .map(|k| {
            let j = j.clone();
            std::thread::spawn(move || {
                for n in 0..25u8 {
                    j.append(
                        EventId([k, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]),
                        &[n; 40],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let frames = read_all(&j);
    assert_eq!(frames.len(), 100);
    assert!(frames
        .iter()
        .enumerate()
        .all(|(i, f)| f.seq == i as u64 + 1));
}

#[test]
fn spooled_events_are_drained_by_the_next_append_idempotently() {
    let t = tempfile::tempdir().unwrap();
    let j = Journal::open(t.path()).unwrap();
    j.append(id(1), b"a").unwrap();
    // A caller that timed out on the lock parks its events...
    j.spool(&[(id(2), b"b"), (id(3), b"c")]).unwrap();
    // ...one of which it later also managed to append directly.
    j.spool(&[(id(1), b"a")]).unwrap();
    assert_eq!(stats(t.path()).unwrap().spool_events, 3);
    assert_eq!(j.append(id(4), b"d").unwrap(), Appended::New { seq: 4 });
    let got: Vec<(u64, EventId)> = read_all(&j).iter().map(|f| (f.seq, f.id)).collect();
    assert_eq!(got, vec![(1, id(1)), (2, id(2)), (3, id(3)), (4, id(4))]);
    let st = stats(t.path()).unwrap();
    assert_eq!((st.spool_files, st.spool_events), (0, 0));
    assert_eq!(drain_spool(t.path()).unwrap(), 0);
}

#[test]
fn lock_held_elsewhere_times_out_with_its_own_variant() {
    use std::os::unix::io::AsRawFd;
    let t = tempfile::tempdir().unwrap();
    Journal::open(t.path()).unwrap();
    let holder = std::fs::File::open(t.path().join("journal.lock")).unwrap();
    // SAFETY: flock on an open descriptor owned by this test.
    assert_eq!(unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX) }, 0);
    let opts = Options {
        lock_timeout: std::time::Duration::from_millis(30),
        ..Options::default()
    };
    let j = Journal::open_with(t.path(), opts).unwrap();
    assert!(matches!(
        j.append(id(1), b"x"),
        Err(JournalError::LockTimeout { .. })
    ));
    drop(holder);
    assert_eq!(j.append(id(1), b"x").unwrap(), Appended::New { seq: 1 });
}

#[test]
fn a_damaged_index_never_turns_a_new_event_into_a_duplicate() {
    // Two journals with the same journal_id, clock and frame sizes but
    // different event ids; graft the first one's index onto the second with
    // a header that claims to be current. Every hit is then a lie.
    let opts = || Options {
        fixed_journal_id: Some([42; 16]),
        fixed_clock_ns: Some(1),
        ..Options::default()
    };
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ja = Journal::open_with(a.path(), opts()).unwrap();
    let jb = Journal::open_with(b.path(), opts()).unwrap();
    for n in 1..=10u8 {
        ja.append(id(n), &[n; 8]).unwrap();
        jb.append(id(100 + n), &[n; 8]).unwrap();
    }
    let mut idx = std::fs::read(a.path().join("journal.ids")).unwrap();
    idx[80..112].copy_from_slice(&jb.head().unwrap().hash);
    let crc = abcd_journal::format::masked_crc(&idx[0..120]);
    idx[120..124].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(b.path().join("journal.ids"), &idx).unwrap();
    assert_eq!(jb.append(id(3), b"new").unwrap(), Appended::New { seq: 11 });
    assert_eq!(
        jb.append(id(103), b"dup").unwrap(),
        Appended::AlreadyPresent { seq: 3 }
    );
    assert_eq!(jb.contains(&id(3)).unwrap(), Some(11));
}
