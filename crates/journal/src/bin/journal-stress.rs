//! journal-stress: a small real writer process for crash, concurrency and
//! latency tests and for tools/journal-bench.
//!
//! Usage:
//!   journal-stress append <dir> <seed> <count> [batch] [inside|outside] [big]
//!       Append <count> events whose ids and payloads derive from <seed>
//!       (so another process with the same seed re-sends the same ids), in
//!       atomic batches of [batch] (default 1). After every acknowledged
//!       append prints `ack <id-hex> <seq> <new|dup>` and flushes stdout.
//!       With `big`, each payload is its normal bytes repeated 1500 times
//!       (~0.6 MiB average) so a SIGKILL can land inside a multi-page write().
//!   journal-stress repair <dir>
//!       Run `repair` with apply (the crash test kills it mid-way).
//!   journal-stress append-one <dir>
//!       Append one random 256-byte event durably and exit (latency bench).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use abcd_journal::{Appended, EventId, Journal, Options, SyncMode};

/// Id of event `i` of stream `seed`.
fn event_id(seed: u64, i: u64) -> EventId {
    // Exactly decodable as (seed, i), so tests can recompute payloads.
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&seed.to_le_bytes());
    id[8..].copy_from_slice(&i.to_le_bytes());
    EventId(id)
}

/// Repetitions of the payload in `big` mode (must match the tests).
const BIG_REPEAT: usize = 1500;

/// Payload of an event: deterministic from its id, 24..=1047 bytes.
fn payload_for(id: &EventId) -> Vec<u8> {
    let n = 24 + (id.0[8] as usize * 4) + (id.0[0] as usize % 16);
    (0..n).map(|k| id.0[k % 16] ^ (k as u8)).collect()
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: journal-stress append <dir> <seed> <count> [batch] [inside|outside] | append-one <dir> | repair <dir>";
    let cmd = args.get(1).ok_or(usage)?;
    match cmd.as_str() {
        "append-one" => {
            let dir = args.get(2).ok_or(usage)?;
            let j = Journal::open(Path::new(dir)).map_err(|e| e.to_string())?;
            let id = EventId::random();
            j.append(id, &[0x5a; 256]).map_err(|e| e.to_string())?;
            Ok(())
        }
        "repair" => {
            let dir = args.get(2).ok_or(usage)?;
            let r = abcd_journal::repair(Path::new(dir), true).map_err(|e| e.to_string())?;
            println!("repaired {:?} drained {}", r.status_before, r.spool_drained);
            Ok(())
        }
        "append" => {
            let dir = args.get(2).ok_or(usage)?;
            let seed: u64 = args.get(3).ok_or(usage)?.parse().map_err(|_| "bad seed")?;
            let count: u64 = args.get(4).ok_or(usage)?.parse().map_err(|_| "bad count")?;
            let batch: u64 = args
                .get(5)
                .map(|s| s.parse().unwrap_or(1))
                .unwrap_or(1)
                .max(1);
            let sync = match args.get(6).map(String::as_str) {
                Some("inside") => SyncMode::InsideLock,
                _ => SyncMode::OutsideLock,
            };
            let opts = Options {
                sync,
                ..Options::default()
            };
            let big = args.get(7).map(String::as_str) == Some("big");
            let j = Journal::open_with(Path::new(dir), opts).map_err(|e| e.to_string())?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let mut i = 0;
            while i < count {
                let n = batch.min(count - i);
                let ids: Vec<EventId> = (i..i + n).map(|k| event_id(seed, k)).collect();
                let payloads: Vec<Vec<u8>> = ids
                    .iter()
                    .map(|id| {
                        if big {
                            payload_for(id).repeat(BIG_REPEAT)
                        } else {
                            payload_for(id)
                        }
                    })
                    .collect();
                let evs: Vec<(EventId, &[u8])> = ids
                    .iter()
                    .zip(&payloads)
                    .map(|(id, p)| (*id, p.as_slice()))
                    .collect();
                let acks = j.append_batch(&evs).map_err(|e| e.to_string())?;
                for (id, a) in ids.iter().zip(acks) {
                    let (seq, kind) = match a {
                        Appended::New { seq } => (seq, "new"),
                        Appended::AlreadyPresent { seq } => (seq, "dup"),
                    };
                    writeln!(out, "ack {} {seq} {kind}", id.to_hex()).map_err(|e| e.to_string())?;
                }
                out.flush().map_err(|e| e.to_string())?;
                i += n;
            }
            Ok(())
        }
        _ => Err(usage.into()),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("journal-stress: {e}");
            ExitCode::FAILURE
        }
    }
}
