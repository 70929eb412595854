//! Runs every seed-corpus file of the root crate's fuzz targets through the
//! same entry points `cargo fuzz` uses, so CI exercises the decoders on
//! every run. `ABCD_WRITE_SEEDS=1` regenerates the generated seeds.

use std::fs;
use std::path::{Path, PathBuf};

use abcd::event::{
    self, Applied, BodyRef, CaptureOutcome, Captured, Event, Forgotten, GapSighted, Imported,
    Rewrite, SessionNoted, Staged, StagedRef,
};
use abcd::lineage::{Lineage, LineageSource, SpawnAttribution};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn seeds_events() -> Vec<Vec<u8>> {
    let lin = Lineage {
        session_id: "s1".into(),
        agent_id: Some("a1".into()),
        agent_type: Some("Explore".into()),
        spawn_depth: 2,
        spawn_tool_use_id: Some("toolu_1".into()),
        parent_agent_id: Some("p1".into()),
        lineage_source: Some(LineageSource::Hook),
        spawn_attribution: Some(SpawnAttribution::Sidecar),
    };
    let events = [
        Event::Staged(Staged {
            stem: "20260101T000000.000000000Z-s1-agent-a1".into(),
            raw_sha256: "c".repeat(64),
            bytes: 10,
            session_id: lin.session_id.clone(),
            agent_id: lin.agent_id.clone(),
            meta_sha256: "e".repeat(64),
            staged_at_ns: 1,
            adopted: false,
        }),
        Event::Captured(Box::new(Captured {
            outcome: CaptureOutcome::Stored {
                record_name: "r.md".into(),
                body: BodyRef {
                    sha256: "f".repeat(64),
                    bytes: 100,
                },
                supersedes: vec!["old.md".into()],
            },
            retires: Some(StagedRef {
                stem: "x".into(),
                raw_sha256: "d".repeat(64),
            }),
            extended: true,
        })),
        Event::Forgotten(Box::new(Forgotten {
            values: abcd::forget::digests("a value to forget"),
            rewrites: vec![Rewrite {
                from: "f".repeat(64),
                to: None,
            }],
            rewritten_records: vec![],
            removed_records: vec!["r.md".into()],
            forgotten_at_ns: 7,
        })),
        Event::SessionNoted(SessionNoted {
            session_id: "s1".into(),
            noted_at_ns: 5,
        }),
        Event::SubagentGapSighted(GapSighted {
            hook_event_name: "SubagentStop".into(),
            seen_at_ns: 6,
        }),
        Event::Imported(Box::new(Imported {
            origin: "0123456789abcdef0123456789abcdef".into(),
            event_id: "a".repeat(64),
            applied: Applied::Forgotten(Box::new(Forgotten {
                values: abcd::forget::digests("another value"),
                rewrites: vec![],
                rewritten_records: vec![],
                removed_records: vec![],
                forgotten_at_ns: 8,
            })),
            forwards: vec![Rewrite {
                from: "b".repeat(64),
                to: None,
            }],
        })),
    ];
    events
        .iter()
        .map(|e| event::encode(42, e).unwrap())
        .collect()
}

fn run(target: &str, f: fn(&[u8])) -> usize {
    let dir = corpus(target);
    let mut n = 0;
    for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        f(&fs::read(&p).unwrap());
        n += 1;
    }
    n
}

#[test]
fn event_decode_seeds() {
    if std::env::var_os("ABCD_WRITE_SEEDS").is_some() {
        fs::create_dir_all(corpus("event_decode")).unwrap();
        for (i, s) in seeds_events().iter().enumerate() {
            fs::write(corpus("event_decode").join(format!("seed-{i}")), s).unwrap();
        }
    }
    // Encodings decode back to themselves.
    for s in seeds_events() {
        let env = event::decode(&s).unwrap();
        assert_eq!(event::encode(env.at_ns, &env.event).unwrap(), s);
    }
    // Truncations and bit flips of every seed never panic.
    for s in seeds_events() {
        for cut in 0..s.len() {
            abcd::fuzz::event_decode(&s[..cut]);
        }
        for i in 0..s.len() {
            let mut m = s.clone();
            m[i] ^= 0xff;
            abcd::fuzz::event_decode(&m);
        }
    }
    assert!(run("event_decode", abcd::fuzz::event_decode) >= 4);
}

#[test]
fn record_parse_seeds() {
    assert!(run("record_parse", abcd::fuzz::record_parse) >= 3);
}

#[test]
fn hook_inputs_seeds() {
    assert!(run("hook_inputs", abcd::fuzz::hook_inputs) >= 4);
}

/// Segments of the sync format: the event seeds, one segment of all of
/// them, an empty one.
fn seeds_segments() -> Vec<Vec<u8>> {
    let all = seeds_events();
    vec![
        abcd::sync::wire::encode_segment(&all),
        abcd::sync::wire::encode_segment(&all[..1]),
        abcd::sync::wire::encode_segment(&[]),
    ]
}

#[test]
fn sync_segment_seeds() {
    if std::env::var_os("ABCD_WRITE_SEEDS").is_some() {
        fs::create_dir_all(corpus("sync_segment")).unwrap();
        for (i, s) in seeds_segments().iter().enumerate() {
            fs::write(corpus("sync_segment").join(format!("seed-{i}")), s).unwrap();
        }
    }
    for s in seeds_segments() {
        assert!(abcd::sync::wire::decode_segment(&s).is_ok());
        for cut in 0..s.len() {
            abcd::fuzz::sync_segment(&s[..cut]);
        }
        for i in 0..s.len().min(600) {
            let mut m = s.clone();
            m[i] ^= 0xff;
            abcd::fuzz::sync_segment(&m);
        }
    }
    assert!(run("sync_segment", abcd::fuzz::sync_segment) >= 3);
}
