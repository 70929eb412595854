//! Issue #8, failure 1: a long but once-valid id must never wedge a store.
//! New input is refused before anything is written; ids an older abcd
//! journaled get bounded file names; an event no projection can apply is
//! recorded and skipped, not a permanent failure of every verb.

mod common;

use std::fs;
use std::path::Path;

use abcd::event::{self, CaptureOutcome, Captured, Event, SessionNoted, Staged};
use abcd::lineage::{Lineage, LineageSource, SpawnAttribution};
use abcd::record::RecordMeta;
use abcd_journal::{EventId, Journal};
use common::*;
use serde_json::json;

const UUID: &str = "11111111-2222-4333-8444-555555555555";

/// A valid-charset id of exactly `len` bytes.
fn id(prefix: &str, len: usize) -> String {
    let mut s = prefix.to_owned();
    while s.len() < len {
        s.push(if s.len().is_multiple_of(2) { 'x' } else { '-' });
    }
    s.truncate(len);
    s
}

/// Every file under ABCD_HOME (the whole store, not only one lane).
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

fn assert_refused(env: &Env, verb: &str, payload: &serde_json::Value, field: &str) {
    let out = env.hook(verb, payload);
    assert_eq!(out.status.code(), Some(0), "{verb}: {}", stderr(&out));
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "not-captured", "{verb}: {r}");
    let err = stderr(&out);
    assert_eq!(
        err.lines().count(),
        1,
        "{verb}: one stderr line, got {err:?}"
    );
    assert!(
        err.contains(field) && err.contains("not a valid identifier"),
        "{verb}: {err}"
    );
    assert!(
        err.contains("at most 128 bytes") && err.contains("letters, digits"),
        "{verb}: the rule is named: {err}"
    );
    let written = files_under(&env.abcd_home);
    assert!(written.is_empty(), "{verb} wrote {written:?}");
}

#[test]
fn hooks_refuse_long_and_malformed_ids_and_write_nothing() {
    let env = Env::new();
    let verbs = [
        "session-start",
        "session-end",
        "stop",
        "subagent-stop",
        "user-prompt-submit",
    ];
    let mut bad_sessions: Vec<String> = [129, 200, 256, 300]
        .iter()
        .map(|n| id("long-session", *n))
        .collect();
    bad_sessions.extend(["a/b".into(), "..".into(), "s\u{e9}ss".into(), "a b".into()]);
    for sid in &bad_sessions {
        let main = env.main_transcript("any-session", &jsonl(&[&line("any", "hi")]));
        let agent = env.agent_transcript("any-session", "a1", &jsonl(&[&line("any", "hi")]), None);
        for verb in verbs {
            let mut p = match verb {
                "subagent-stop" => env.subagent_payload(UUID, "a1", &agent),
                "session-start" => env.start_payload(UUID),
                _ => env.end_payload(UUID, &main),
            };
            p["session_id"] = json!(sid);
            p["prompt"] = json!("hello");
            assert_refused(&env, verb, &p, "session_id");
        }
    }
    let mut bad_agents: Vec<String> = [129, 155, 170, 185]
        .iter()
        .map(|n| id("long-agent", *n))
        .collect();
    bad_agents.extend(["../up".into(), "a\nb".into()]);
    for agent in &bad_agents {
        let path = env.agent_transcript(UUID, "a1", &jsonl(&[&line(UUID, "hi")]), None);
        for verb in verbs {
            let mut p = env.subagent_payload(UUID, "a1", &path);
            p["agent_id"] = json!(agent);
            assert_refused(&env, verb, &p, "agent_id");
        }
        // No transcript path either: still no gap marker.
        let p = json!({"session_id": UUID, "cwd": env.repo, "agent_id": agent});
        assert_refused(&env, "subagent-stop", &p, "agent_id");
    }
    // `history capture` applies the same rule before opening the store.
    let t = env.tmp.path().join("t.jsonl");
    fs::write(&t, jsonl(&[&line(UUID, "hi")])).unwrap();
    for (flag, value) in [
        ("--session", id("long-session", 129)),
        ("--agent", id("long-agent", 170)),
        ("--session", "a/b".to_owned()),
    ] {
        let mut args = vec!["history", "capture", t.to_str().unwrap(), flag, &value];
        if flag == "--agent" {
            args.extend(["--session", UUID]);
        }
        let out = env.abcd(&args);
        assert_ne!(out.status.code(), Some(0), "{flag} {value}");
        let err = stderr(&out);
        assert!(err.contains("not a valid identifier"), "{err}");
        assert!(files_under(&env.abcd_home).is_empty(), "{flag} wrote");
    }
    // The limit itself is accepted and stored under an ordinary name.
    let sid = id("edge-session", 128);
    let m = env.main_transcript("edge", &jsonl(&[&line("edge", "at the limit")]));
    let r = hook_json(&env.hook("session-end", &env.end_payload(&sid, &m)));
    assert_eq!(r["outcome"], "staged", "{r}");
    assert!(env.lane().join("sessions").join(&sid).is_file());
}

/// Appends events to the lane's journal directly, as an older abcd did:
/// no projection is caught up here.
fn append_raw(env: &Env, payloads: &[Vec<u8>]) {
    let lane = abcd::store::Lane::open(&env.abcd_home, &env.root_sha()).unwrap();
    let journal = Journal::open(&lane.journal_dir()).unwrap();
    for p in payloads {
        journal.append(EventId::random(), p).unwrap();
    }
}

/// The lane of `env`, for writing what the events name (bodies, metadata).
fn lane(env: &Env) -> abcd::store::Lane {
    abcd::store::Lane::open(&env.abcd_home, &env.root_sha()).unwrap()
}

/// A `Staged` event and the staging metadata blob it names (under the
/// bounded stem, where the projection looks for it).
fn staged_event(env: &Env, stem: String, lineage: Lineage, src: &Path, at: u64) -> Event {
    let meta = abcd::staging_view::StagedMeta {
        lineage: lineage.clone(),
        source_path: Some(src.display().to_string()),
    };
    let disk = abcd::naming::stem(&stem).into_owned();
    let meta_sha256 =
        abcd::corpus::write_staged_meta(&lane(env).staging_dir(), &disk, &meta).unwrap();
    Event::Staged(Staged {
        stem,
        raw_sha256: abcd::fsutil::sha256_hex(&fs::read(src).unwrap()),
        bytes: fs::metadata(src).unwrap().len(),
        session_id: lineage.session_id,
        agent_id: lineage.agent_id,
        meta_sha256,
        staged_at_ns: at,
        adopted: false,
    })
}

/// A `Stored` outcome whose record file is in `bodies/`.
fn stored(env: &Env, record_name: String, meta: &RecordMeta, body: &str) -> CaptureOutcome {
    let file = abcd::record::render(meta, body.as_bytes());
    CaptureOutcome::Stored {
        record_name,
        body: abcd::body::put(&lane(env), &file).unwrap(),
        supersedes: Vec::new(),
    }
}

fn now() -> u64 {
    abcd::clock::now_unix_ns()
}

#[test]
fn a_store_an_older_abcd_left_with_long_ids_works_after_the_upgrade() {
    let env = Env::new();
    let long_session = id("old-session", 250);
    let long_agent = id("old-agent", 185);
    let mid_agent = id("mid-agent", 155);
    let root = env.root_sha();
    let t0 = now() - 3_600_000_000_000;

    // What an older abcd journaled: a session note for the long session, a
    // main thread of it staged (its blob is gone: recovered from source),
    // a sub-agent with a 185-byte id beside a UUID session (likewise), one
    // with a 155-byte id whose blob the old hook did rename into place
    // under the long stem, and a record with both long ids.
    let main_src = env.main_transcript("old-main", &jsonl(&[&line("old", "main thread")]));
    let agent_src = env.agent_transcript(UUID, "old", &jsonl(&[&line(UUID, "agent")]), None);
    let mid_src = env.agent_transcript(UUID, "mid", &jsonl(&[&line(UUID, "mid agent")]), None);
    let stamp = |ns: u64| abcd::clock::stamp(ns);
    let sub = |agent: &str| Lineage {
        session_id: UUID.into(),
        agent_id: Some(agent.into()),
        lineage_source: Some(LineageSource::Hook),
        spawn_attribution: Some(SpawnAttribution::Unattributed),
        ..Lineage::default()
    };
    let staged = |stem: String, lineage: Lineage, src: &Path, at: u64| {
        staged_event(&env, stem, lineage, src, at)
    };
    let mid_stem = format!("{}-{UUID}-agent-{mid_agent}", stamp(t0 + 3));
    assert!(mid_stem.len() + 4 <= 255 && mid_stem.len() > 184);
    let mut meta = RecordMeta::native(&sub(&long_agent), &root, t0 + 10, &"a".repeat(64));
    meta.lineage.session_id = long_session.clone();
    let record_name = format!("{}-{long_session}-agent-{long_agent}.md", stamp(t0 + 10));
    let events = [
        Event::SessionNoted(SessionNoted {
            session_id: long_session.clone(),
            noted_at_ns: t0,
        }),
        staged(
            format!("{}-{long_session}", stamp(t0 + 1)),
            Lineage::main_thread(&long_session, LineageSource::Hook),
            &main_src,
            t0 + 1,
        ),
        staged(
            format!("{}-{UUID}-agent-{long_agent}", stamp(t0 + 2)),
            sub(&long_agent),
            &agent_src,
            t0 + 2,
        ),
        staged(mid_stem.clone(), sub(&mid_agent), &mid_src, t0 + 3),
        Event::Captured(Box::new(Captured {
            outcome: stored(&env, record_name.clone(), &meta, "{\"old\":\"record\"}\n"),
            retires: None,
            extended: false,
        })),
    ];
    let payloads: Vec<Vec<u8>> = events
        .iter()
        .map(|e| event::encode(t0, e).unwrap())
        .collect();
    append_raw(&env, &payloads);
    let staging = env.lane().join("staging");
    fs::copy(&mid_src, staging.join(format!("{mid_stem}.raw"))).unwrap();

    // Every verb works, and nothing is reported as a fault.
    let listed = env.records();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let file = listed[0]["file"].as_str().unwrap().to_owned();
    assert!(file.len() <= 200 && file.ends_with(".md"), "{file}");
    assert!(!staging.join(format!("{mid_stem}.raw")).exists(), "moved");
    let st = env.staged();
    assert_eq!(st["staged"].as_array().unwrap().len(), 3, "{st}");
    assert!(st.get("projection_faults").is_none(), "{st}");
    let shown = env.abcd(&["history", "show", &file]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(stdout(&shown).contains(&long_session) && stdout(&shown).contains("old"));

    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 3, "{d}");
    let recs = env.records();
    assert_eq!(recs.len(), 4);
    for r in &recs {
        let f = r["file"].as_str().unwrap();
        assert!(f.len() <= 200, "{f}");
        let out = env.abcd(&["history", "show", f]);
        assert_eq!(out.status.code(), Some(0), "{f}: {}", stderr(&out));
    }
    assert!(recs
        .iter()
        .any(|r| r["session_id"] == long_session.as_str()));
    assert!(recs.iter().any(|r| r["agent_id"] == long_agent.as_str()));
    assert!(recs.iter().any(|r| r["agent_id"] == mid_agent.as_str()));

    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));

    // Replay reproduces every projection byte for byte.
    let dirs = ["records", "staging", "quarantine", "sessions", "index"];
    let snap = |env: &Env| {
        let mut m = env.snapshot(&dirs);
        m.retain(|k, _| !k.starts_with("index/checkpoint"));
        m
    };
    let before = snap(&env);
    assert!(before
        .keys()
        .all(|k| k.rsplit('/').next().unwrap().len() <= 200));
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = snap(&env);
    let differ: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    let show = |m: &std::collections::BTreeMap<String, Vec<u8>>, k: &String| {
        m.get(k).map(|b| String::from_utf8_lossy(b).into_owned())
    };
    assert!(
        differ.is_empty(),
        "replay changed: {:?}",
        differ
            .iter()
            .map(|k| (k, show(&before, k), show(&after, k)))
            .collect::<Vec<_>>()
    );

    // Ordinary hooks keep working.
    let m = env.main_transcript(UUID, &jsonl(&[&line(UUID, "ordinary")]));
    let r = hook_json(&env.hook("session-end", &env.end_payload(UUID, &m)));
    assert_eq!(r["outcome"], "staged", "{r}");
    let p = env.agent_transcript(UUID, "a1", &jsonl(&[&line(UUID, "sub")]), None);
    let r = hook_json(&env.hook("subagent-stop", &env.subagent_payload(UUID, "a1", &p)));
    assert_eq!(r["outcome"], "staged", "{r}");
    let out = env.hook("session-start", &env.start_payload(UUID));
    assert_eq!(hook_json(&out)["drain"]["captured"], 2, "{}", stderr(&out));
    assert_eq!(env.records().len(), 6);
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
}

#[test]
fn an_unappliable_event_is_reported_and_retried_not_wedging() {
    let env = Env::new();
    let m = env.main_transcript(UUID, &jsonl(&[&line(UUID, "before")]));
    assert_eq!(
        hook_json(&env.hook("session-end", &env.end_payload(UUID, &m)))["outcome"],
        "staged"
    );
    // A frame whose payload is not an abcd event (schema 1, then garbage).
    append_raw(&env, &[vec![1, 0, 0xff, 0xfe, 0xfd]]);
    let bad_seq = 3; // session note, staged, then this one

    // The next verb meets it: says so once, and works.
    let out = env.abcd(&["--json", "history", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("seq 3"), "{}", stderr(&out));
    // Hooks keep working, and report success.
    let p = env.agent_transcript(UUID, "a1", &jsonl(&[&line(UUID, "after")]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(UUID, "a1", &p));
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 2, "{d}");

    // Reported, with what to do.
    let st = env.staged();
    assert_eq!(st["projection_faults"][0]["seq"], bad_seq, "{st}");
    let text = stdout(&env.abcd(&["history", "staged"]));
    assert!(
        text.contains("PROJECTION FAULTS") && text.contains("replay --rebuild"),
        "{text}"
    );
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(5), "{}", stdout(&v));
    assert!(
        stdout(&v).contains("seq 3") && stdout(&v).contains("replay --rebuild"),
        "{}",
        stdout(&v)
    );
    let s = env.json(&["journal", "stats"]);
    assert_eq!(s["projection_faults"][0]["seq"], bad_seq, "{s}");
    let plan = env.abcd(&["journal", "repair"]);
    assert!(
        stdout(&plan).contains("retry 1 journal event"),
        "{}",
        stdout(&plan)
    );

    // Retried by a rebuild: still undecodable, so recorded again; the
    // projections are otherwise whole and reproduced.
    let before = env.snapshot(&["records"]);
    let out = env.abcd(&["journal", "replay", "--rebuild"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("seq 3"), "{}", stdout(&out));
    assert_eq!(before, env.snapshot(&["records"]));
    let out = env.abcd(&["journal", "repair", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 of 1 fault(s) remain"),
        "{}",
        stdout(&out)
    );
    assert_eq!(env.records().len(), 2);
}

#[test]
fn a_failure_that_is_not_the_events_own_is_never_skipped() {
    let env = Env::new();
    let m = env.main_transcript(UUID, &jsonl(&[&line(UUID, "one")]));
    hook_json(&env.hook("session-end", &env.end_payload(UUID, &m)));
    env.drain();
    // The index table the next staged entry needs cannot be created (a
    // dangling symlink in its place, which reads as empty): not a property
    // of the event, so never recorded as a fault and skipped.
    let table = env.lane().join("index").join("staged");
    let _ = fs::remove_dir_all(&table);
    std::os::unix::fs::symlink(env.tmp.path().join("nowhere"), &table).unwrap();
    let p = env.agent_transcript(UUID, "a1", &jsonl(&[&line(UUID, "two")]), None);
    let out = env.hook("subagent-stop", &env.subagent_payload(UUID, "a1", &p));
    // The event is journaled: the hook says staged, with a warning.
    let r = hook_json(&out);
    assert_eq!(r["outcome"], "staged", "{r}");
    assert!(
        stderr(&out).contains("journaled") && !stderr(&out).contains("staging failed"),
        "{}",
        stderr(&out)
    );
    // Verbs fail with the reason until it is fixed, then catch up.
    let out = env.abcd(&["history", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("index/staged"), "{}", stderr(&out));
    fs::remove_file(&table).unwrap();
    let st = env.staged();
    assert_eq!(st["staged"].as_array().unwrap().len(), 1, "{st}");
    assert!(st.get("projection_faults").is_none(), "{st}");
}

/// Sets every checkpoint of the lane to the layout before names were
/// bounded, as an older abcd left them.
fn set_old_layout(env: &Env) {
    for name in ["checkpoint.json", "checkpoint.synced.json"] {
        let p = env.lane().join("index").join(name);
        let Ok(b) = fs::read(&p) else { continue };
        let mut c: serde_json::Value = serde_json::from_slice(&b).unwrap();
        c["format"] = json!(1);
        fs::write(&p, c.to_string()).unwrap();
    }
}

fn checkpoint_format(env: &Env) -> serde_json::Value {
    let b = fs::read(env.lane().join("index").join("checkpoint.json")).unwrap();
    serde_json::from_slice::<serde_json::Value>(&b).unwrap()["format"].clone()
}

#[test]
fn an_older_layout_is_rebuilt_only_when_it_holds_an_over_long_name() {
    // Ordinary ids: the upgrade is a catch-up, not a rebuild.
    let env = Env::new();
    let m = env.main_transcript(UUID, &jsonl(&[&line(UUID, "ordinary")]));
    hook_json(&env.hook("session-end", &env.end_payload(UUID, &m)));
    env.drain();
    set_old_layout(&env);
    let before = env.snapshot(&["records", "sessions"]);
    let r = env.json(&["journal", "replay"]);
    assert_eq!(r["rebuilt"], false, "{r}");
    assert_eq!(checkpoint_format(&env), abcd::projection::PROJECTION_FORMAT);
    assert_eq!(before, env.snapshot(&["records", "sessions"]));

    // Names an older abcd could still write (under 255 bytes, over the
    // bound): rebuilt once, under bounded names, nothing set aside.
    let env = Env::new();
    let t0 = now() - 3_600_000_000_000;
    let session = id("note-session", 210);
    let rec_session = id("rec-session", 185);
    let agent = id("agent", 120);
    let src = env.agent_transcript(UUID, "x", &jsonl(&[&line(UUID, "staged")]), None);
    let stem = format!("{}-{UUID}-agent-{agent}", abcd::clock::stamp(t0 + 1));
    let record = format!("{}-{rec_session}.md", abcd::clock::stamp(t0 + 2));
    let meta = RecordMeta::native(
        &Lineage::main_thread(&rec_session, LineageSource::Hook),
        &env.root_sha(),
        t0 + 2,
        &"b".repeat(64),
    );
    let events = [
        Event::SessionNoted(SessionNoted {
            session_id: session.clone(),
            noted_at_ns: t0,
        }),
        staged_event(
            &env,
            stem.clone(),
            Lineage {
                session_id: UUID.into(),
                agent_id: Some(agent.clone()),
                lineage_source: Some(LineageSource::Hook),
                spawn_attribution: Some(SpawnAttribution::Unattributed),
                ..Lineage::default()
            },
            &src,
            t0 + 1,
        ),
        Event::Captured(Box::new(Captured {
            outcome: stored(&env, record.clone(), &meta, "{\"kept\":1}\n"),
            retires: None,
            extended: false,
        })),
    ];
    let payloads: Vec<Vec<u8>> = events
        .iter()
        .map(|e| event::encode(t0, e).unwrap())
        .collect();
    append_raw(&env, &payloads);
    let staging = env.lane().join("staging");
    fs::copy(&src, staging.join(format!("{stem}.raw"))).unwrap();
    assert_eq!(env.records().len(), 1);
    // Put the files where the older abcd had them: under the long names.
    let short_stem = abcd::naming::stem(&stem).into_owned();
    let short_record = abcd::naming::record_name(&record).into_owned();
    let short_note = abcd::naming::session_note(&session).into_owned();
    assert!(short_stem != stem && short_record != record && short_note != session);
    let lane = env.lane();
    for (dir, from, to) in [
        (
            "staging",
            format!("{short_stem}.raw"),
            format!("{stem}.raw"),
        ),
        (
            "staging",
            format!("{short_stem}.stage.json"),
            format!("{stem}.stage.json"),
        ),
        ("records", short_record.clone(), record.clone()),
        ("sessions", short_note.clone(), session.clone()),
    ] {
        fs::rename(lane.join(dir).join(from), lane.join(dir).join(to)).unwrap();
    }
    set_old_layout(&env);
    let r = env.json(&["journal", "replay"]);
    assert_eq!(r["rebuilt"], true, "{r}");
    assert_eq!(checkpoint_format(&env), abcd::projection::PROJECTION_FORMAT);
    for (dir, short, long) in [
        (
            "staging",
            format!("{short_stem}.raw"),
            format!("{stem}.raw"),
        ),
        (
            "staging",
            format!("{short_stem}.stage.json"),
            format!("{stem}.stage.json"),
        ),
        ("records", short_record.clone(), record.clone()),
        ("sessions", short_note.clone(), session.clone()),
    ] {
        assert!(lane.join(dir).join(&short).is_file(), "{dir}/{short}");
        assert!(!lane.join(dir).join(&long).exists(), "{dir}/{long}");
    }
    assert!(!lane.join("records.unjournaled").exists());
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 1, "{d}");
    assert_eq!(env.records().len(), 2);
}
