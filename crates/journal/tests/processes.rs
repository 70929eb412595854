//! Real processes: SIGKILL at random moments while appending (crash test),
//! and 64 writers at once (concurrency test). Children are the crate's
//! `journal-stress` binary.
//!
//! Reproduce a crash-test run with ABCD_CRASH_SEED=<seed printed on failure>;
//! ABCD_CRASH_ROUNDS raises the number of rounds (default 40).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use abcd_journal::*;

const STRESS: &str = env!("CARGO_BIN_EXE_journal-stress");

/// Same derivation as the stress binary: id = seed (LE) || i (LE).
fn payload_for(id: &EventId) -> Vec<u8> {
    let n = 24 + (id.0[8] as usize * 4) + (id.0[0] as usize % 16);
    (0..n).map(|k| id.0[k % 16] ^ (k as u8)).collect()
}

/// Must match BIG_REPEAT in the stress binary.
const BIG_REPEAT: usize = 1500;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn spawn(dir: &Path, seed: u64, count: u64, batch: u64, big: bool, sync: &str) -> Child {
    let size = if big { "big" } else { "small" };
    Command::new(STRESS)
        .args([
            "append",
            dir.to_str().unwrap(),
            &seed.to_string(),
            &count.to_string(),
            &batch.to_string(),
            sync,
            size,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn journal-stress")
}

/// Parse complete `ack <id> <seq> <kind>` lines (a killed child may leave a
/// partial last line, which was never an acknowledgement we saw).
fn acks(out: &str) -> Vec<(EventId, u64)> {
    let mut v = Vec::new();
    let complete = match out.rfind('\n') {
        Some(p) => &out[..=p],
        None => "",
    };
    for line in complete.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 4, "bad ack line {line:?}");
        let mut id = [0u8; 16];
        id.copy_from_slice(&hex::decode(parts[1]).unwrap());
        v.push((EventId(id), parts[2].parse().unwrap()));
    }
    v
}

fn collect(mut c: Child) -> (std::process::ExitStatus, String, String) {
    let mut out = String::new();
    let mut err = String::new();
    c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (c.wait().unwrap(), out, err)
}

/// Journal contents as id -> (seq, payload); asserts seq gapless and ids unique.
fn check_journal(dir: &Path, ctx: &str) -> HashMap<EventId, u64> {
    let j = Journal::open_existing(dir).unwrap();
    let mut seen = HashMap::new();
    for (k, f) in j.read_from(&j.start()).unwrap().enumerate() {
        let f = f.unwrap();
        assert_eq!(f.seq, k as u64 + 1, "{ctx}: seq not gapless");
        if f.kind != FrameKind::Event {
            continue;
        }
        assert!(
            seen.insert(f.id, f.seq).is_none(),
            "{ctx}: id {} twice",
            f.id.to_hex()
        );
        if f.id.0[..8] != [0xEE; 8] {
            let base = payload_for(&f.id);
            let ok = f.payload == base || f.payload == base.repeat(BIG_REPEAT);
            assert!(ok, "{ctx}: payload of {}", f.id.to_hex());
        }
    }
    seen
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_event() {
    let seed: u64 = std::env::var("ABCD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    let rounds: u64 = std::env::var("ABCD_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    eprintln!("crash test seed {seed} (reproduce with ABCD_CRASH_SEED={seed})");
    let ctx = format!("seed {seed}");
    let mut rng = Rng(seed);
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("j");
    let mut acked: HashMap<EventId, u64> = HashMap::new();
    let mut streams: Vec<u64> = Vec::new();
    let mut kills = 0;
    for round in 0..rounds {
        let parallel = 1 + rng.below(3);
        let mut children = Vec::new();
        for _ in 0..parallel {
            // Re-send an earlier stream's ids a third of the time.
            let s = if !streams.is_empty() && rng.below(3) == 0 {
                streams[rng.below(streams.len() as u64) as usize]
            } else {
                let s = 1000 + round * 10 + children.len() as u64;
                streams.push(s);
                s
            };
            // Streams with odd seeds use big payloads, so the same ids always
            // carry the same bytes; kills then often land inside a write().
            let sync = if rng.below(2) == 0 {
                "inside"
            } else {
                "outside"
            };
            children.push(spawn(&dir, s, 400, 1 + rng.below(4), s % 2 == 1, sync));
        }
        std::thread::sleep(Duration::from_micros(500 + rng.below(20_000)));
        for mut c in children {
            if c.kill().is_ok() {
                kills += 1;
            }
            let (_, out, err) = collect(c);
            for (id, seq) in acks(&out) {
                if let Some(prev) = acked.insert(id, seq) {
                    assert_eq!(
                        prev,
                        seq,
                        "{ctx}: id {} acked with two seqs ({err})",
                        id.to_hex()
                    );
                }
            }
        }
    }
    assert!(kills > 0, "{ctx}: no child was killed");
    // The next writer recovers whatever the last kill left.
    let j = Journal::open(&dir).unwrap();
    j.append(EventId([0xEE; 16]), b"after the storm").unwrap();
    let v = verify(
        &dir,
        &VerifyOptions {
            chain: true,
            progress: None,
        },
    )
    .unwrap();
    assert_eq!(v.status, VerifyStatus::Clean, "{ctx}: {v:?}");
    let seen = check_journal(&dir, &ctx);
    assert!(!acked.is_empty(), "{ctx}: nothing was acknowledged");
    for (id, seq) in &acked {
        assert_eq!(
            seen.get(id),
            Some(seq),
            "{ctx}: acknowledged {} missing or moved",
            id.to_hex()
        );
    }
    let st = stats(&dir).unwrap();
    eprintln!(
        "{ctx}: {} acknowledged, {} in journal, {kills} kills, {} torn tails recovered",
        acked.len(),
        seen.len(),
        st.torn_files
    );
}

#[test]
fn sixty_four_writers_at_once_lose_and_duplicate_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("j");
    Journal::open(&dir).unwrap();
    const PER: u64 = 20;
    // 48 distinct streams; 16 more processes re-send 8 of them twice.
    let mut seeds: Vec<u64> = (1..=48).collect();
    for k in 0..16 {
        seeds.push(1 + (k % 8) * 3);
    }
    let children: Vec<(u64, Child)> = seeds
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let sync = if k % 2 == 0 { "inside" } else { "outside" };
            (s, spawn(&dir, s, PER, 1 + (k as u64 % 3), false, sync))
        })
        .collect();
    let mut acked: HashMap<EventId, u64> = HashMap::new();
    for (s, c) in children {
        let (status, out, err) = collect(c);
        assert!(status.success(), "writer {s} failed: {err}");
        let a = acks(&out);
        assert_eq!(a.len() as u64, PER, "writer {s}");
        for (id, seq) in a {
            if let Some(prev) = acked.insert(id, seq) {
                assert_eq!(prev, seq, "id {} acked with two seqs", id.to_hex());
            }
        }
    }
    let seen = check_journal(&dir, "64 writers");
    assert_eq!(seen.len() as u64, 48 * PER);
    assert_eq!(seen, acked);
    let v = verify(
        &dir,
        &VerifyOptions {
            chain: true,
            progress: None,
        },
    )
    .unwrap();
    assert_eq!(v.status, VerifyStatus::Clean);
}

#[test]
fn repair_killed_at_random_moments_loses_nothing() {
    let seed: u64 = std::env::var("ABCD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("repair crash test seed {seed} (reproduce with ABCD_CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    // A 2 MiB journal: 600 events in batches of 3, one flipped byte at 1/3.
    let base = tempfile::tempdir().unwrap();
    let j = Journal::open(base.path()).unwrap();
    let ids: Vec<EventId> = (0..600u64)
        .map(|i| EventId((i + 1).to_le_bytes().repeat(2).try_into().unwrap()))
        .collect();
    for chunk in ids.chunks(3) {
        let payloads: Vec<Vec<u8>> = chunk.iter().map(|id| payload_for(id).repeat(3)).collect();
        let evs: Vec<(EventId, &[u8])> = chunk
            .iter()
            .zip(&payloads)
            .map(|(i, p)| (*i, p.as_slice()))
            .collect();
        j.append_batch(&evs).unwrap();
    }
    let frames: Vec<Frame> = j
        .read_from(&j.start())
        .unwrap()
        .map(|f| f.unwrap())
        .collect();
    let victim = &frames[200];
    assert_eq!(
        victim.seq, 201,
        "victim is the last frame of batch 199..=201"
    );
    let mut bytes = std::fs::read(base.path().join("journal")).unwrap();
    bytes[victim.offset as usize + 100] ^= 0x10;
    // The victim's batch (seqs 199..=201) is lost atomically; all others stay.
    let lost: Vec<EventId> = frames[198..201].iter().map(|f| f.id).collect();
    // Calibrate: how long does an uninterrupted repair child take here?
    let full = {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("journal"), &bytes).unwrap();
        let start = std::time::Instant::now();
        let st = Command::new(STRESS)
            .args(["repair", t.path().to_str().unwrap()])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        start.elapsed().as_micros() as u64
    };
    let mut interrupted = 0;
    for round in 0..16 {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        std::fs::write(dir.join("journal"), &bytes).unwrap();
        let jr = Journal::open_existing(dir).unwrap();
        verify(dir, &VerifyOptions::default()).unwrap();
        let spooled = EventId([0xEE; 16]);
        assert!(jr.append(spooled, b"while corrupt").is_err());
        let mut child = Command::new(STRESS)
            .args(["repair", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill anywhere from before it starts to just after it would end.
        std::thread::sleep(Duration::from_micros(rng.below(full + full / 5)));
        let _ = child.kill();
        let _ = child.wait();
        let mid = stats(dir).unwrap();
        if mid.quarantine_files > 0 && (mid.spool_files > 0 || mid.corrupt_marker.is_some()) {
            interrupted += 1;
        }
        let rep = repair(dir, true).unwrap();
        let ctx = format!("seed {seed} round {round} ({rep:?})");
        let v = verify(
            dir,
            &VerifyOptions {
                chain: true,
                progress: None,
            },
        )
        .unwrap();
        assert_eq!(v.status, VerifyStatus::Clean, "{ctx}");
        let mut seen: HashMap<EventId, u64> = HashMap::new();
        for (k, f) in jr.read_from(&jr.start()).unwrap().enumerate() {
            let f = f.unwrap();
            assert_eq!(f.seq, k as u64 + 1, "{ctx}");
            if f.kind == FrameKind::Event {
                assert!(seen.insert(f.id, f.seq).is_none(), "{ctx}: {} twice", f.id);
            }
        }
        for id in &ids {
            assert_eq!(seen.contains_key(id), !lost.contains(id), "{ctx}: {id}");
        }
        assert!(seen.contains_key(&spooled), "{ctx}: spooled event missing");
        assert_eq!(stats(dir).unwrap().spool_files, 0, "{ctx}");
    }
    eprintln!("seed {seed}: repair took {full} µs uninterrupted; {interrupted} of 16 kills landed mid-repair");
}
