//! Golden vectors of every schema-2 event (`journal-format/vectors/events-v2.txt`):
//! each line is `<name> <hex of the encoded envelope>`, re-encoded here byte
//! for byte and decoded back. A schema-1 payload is refused with the upgrade
//! hint. Regenerate after an intentional change with ABCD_BLESS=1.

use std::path::Path;

use abcd::event::{
    self, v1, Applied, BlobPlace, BodyRef, CaptureOutcome, Captured, DirectoryNamed, Discarded,
    Event, EventError, Forgotten, GapSighted, Imported, LaneMoved, LineageMigrated, Quarantined,
    Restaged, Rewrite, SessionNoted, Staged, StagedRef,
};

const AT: u64 = 1_767_225_600_000_000_000;

fn body(c: char) -> BodyRef {
    BodyRef {
        sha256: c.to_string().repeat(64),
        bytes: 4096,
    }
}

fn events() -> Vec<Event> {
    let session = "55550000-0000-4000-8000-000000000001".to_string();
    vec![
        Event::Staged(Staged {
            stem: format!("20260101T000000.000000000Z-{session}-agent-a1"),
            raw_sha256: "1".repeat(64),
            bytes: 1234,
            session_id: session.clone(),
            agent_id: Some("a1".into()),
            meta_sha256: "2".repeat(64),
            staged_at_ns: AT,
            adopted: false,
        }),
        Event::Restaged(Restaged {
            stem: format!("20260101T000000.000000000Z-{session}"),
            raw_sha256: "3".repeat(64),
            bytes: 2345,
            replaced_sha256: "1".repeat(64),
            replaced_bytes: 1234,
            meta_sha256: String::new(),
            staged_at_ns: AT + 1,
            adopted: true,
        }),
        Event::Captured(Box::new(Captured {
            outcome: CaptureOutcome::Stored {
                record_name: format!("20260101T000001.000000000Z-{session}.md"),
                body: body('a'),
                supersedes: vec![format!("20260101T000000.500000000Z-{session}.md")],
            },
            retires: Some(StagedRef {
                stem: format!("20260101T000000.000000000Z-{session}"),
                raw_sha256: "3".repeat(64),
            }),
            extended: true,
        })),
        Event::Captured(Box::new(Captured {
            outcome: CaptureOutcome::AlreadyStored {
                record_name: format!("20260101T000001.000000000Z-{session}.md"),
            },
            retires: None,
            extended: false,
        })),
        Event::Quarantined(Quarantined {
            stem: format!("20260101T000000.000000000Z-{session}-agent-a1"),
            raw_sha256: "1".repeat(64),
            reason: "the transcript is not valid UTF-8".into(),
            quarantined_at_ns: AT + 2,
        }),
        Event::Discarded(Discarded {
            stem: format!("20260101T000000.000000000Z-{session}-agent-a1"),
            place: BlobPlace::Quarantine,
            bytes: 1234,
        }),
        Event::LineageMigrated(Box::new(LineageMigrated {
            record_name: format!("20260101T000001.000000000Z-{session}.md"),
            body: body('b'),
        })),
        Event::SessionNoted(SessionNoted {
            session_id: session.clone(),
            noted_at_ns: AT + 3,
        }),
        Event::SubagentGapSighted(GapSighted {
            hook_event_name: "SubagentStop".into(),
            seen_at_ns: AT + 4,
        }),
        Event::Forgotten(Box::new(Forgotten {
            values: abcd::forgotten::digests("correct \"horse\" battery"),
            rewrites: vec![
                Rewrite {
                    from: "b".repeat(64),
                    to: Some(body('c')),
                },
                Rewrite {
                    from: "a".repeat(64),
                    to: None,
                },
            ],
            rewritten_records: vec!["r1.md".into()],
            removed_records: vec!["r0.md".into()],
            forgotten_at_ns: AT + 5,
        })),
        // Appended by `abcd sync` (issue 12); its variant index is the last.
        Event::Imported(Box::new(Imported {
            origin: "0123456789abcdef0123456789abcdef".into(),
            event_id: "d".repeat(64),
            applied: Applied::Captured(Box::new(Captured {
                outcome: CaptureOutcome::Stored {
                    record_name: "20260101T000002.000000000Z-s.md".into(),
                    body: body('e'),
                    supersedes: vec!["20260101T000001.000000000Z-s.md".into()],
                },
                retires: None,
                extended: false,
            })),
            forwards: vec![Rewrite {
                from: "f".repeat(64),
                to: None,
            }],
        })),
        Event::DirectoryNamed(DirectoryNamed {
            directory: "/work/<home>/scratch".into(),
            named_at_ns: AT + 5,
        }),
        Event::LaneMoved(Box::new(LaneMoved {
            to_root: "c".repeat(40),
            records: vec![format!("20260101T000001.000000000Z-{session}.md")],
            staged: vec![format!("20260101T000000.000000000Z-{session}-agent-a1")],
            sessions: vec![session.clone()],
            moved_at_ns: AT + 6,
        })),
    ]
}

#[test]
fn every_schema_2_event_encodes_to_its_golden_bytes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("journal-format/vectors/events-v2.txt");
    let mut text = String::new();
    for ev in events() {
        let bytes = event::encode(AT, &ev).unwrap();
        assert_eq!(event::decode(&bytes).unwrap().event, ev, "{}", ev.name());
        assert_eq!(&bytes[..2], &[2, 0], "schema 2 first");
        text.push_str(&format!("{} {}\n", ev.name(), hex::encode(&bytes)));
    }
    if std::env::var_os("ABCD_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with ABCD_BLESS=1)", path.display()));
    assert_eq!(
        golden, text,
        "an event's encoding changed: that is a new schema"
    );
}

#[test]
fn a_schema_1_payload_asks_for_the_upgrade() {
    let ev = v1::Event::SessionNoted(SessionNoted {
        session_id: "s".into(),
        noted_at_ns: 1,
    });
    let bytes = v1::encode(AT, &ev).unwrap();
    assert!(matches!(
        event::decode(&bytes),
        Err(EventError::OlderSchema { found: 1 })
    ));
    assert_eq!(v1::decode(&bytes).unwrap().event, ev);
}
