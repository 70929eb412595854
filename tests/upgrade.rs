//! A store the previous release wrote (journal format 1: record bodies and
//! the harness's lineage inside the events) is upgraded with nothing lost:
//! every record, staged entry, quarantine note and session note byte for
//! byte, the journal in format 2 with no free text, and the store working.
//! The fixture was written by the v1 binary (tests/fixtures/v1-store/make.sh).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::*;

fn copy_private(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_private(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
            set_mode(&dest, 0o600);
        }
    }
    set_mode(to, 0o700);
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// An env whose lane is the v1 fixture store.
fn v1_env() -> Env {
    let env = Env::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1-store/lane");
    for d in [env.abcd_home.clone(), env.abcd_home.join("transcripts")] {
        fs::create_dir_all(&d).unwrap();
        set_mode(&d, 0o700);
    }
    copy_private(&fixture, &env.lane());
    env
}

fn user_files(env: &Env) -> BTreeMap<String, Vec<u8>> {
    let mut m = env.snapshot(&["records", "staging", "quarantine", "sessions"]);
    // The metadata blobs are new in format 2.
    m.retain(|k, _| !k.ends_with(".meta.json"));
    m
}

fn header_version(env: &Env) -> u16 {
    let b = fs::read(env.lane().join("journal/journal")).unwrap();
    u16::from_le_bytes([b[8], b[9]])
}

#[test]
fn journal_upgrade_keeps_every_file_and_leaves_no_clear_text() {
    let env = v1_env();
    assert_eq!(header_version(&env), 1);
    let before = user_files(&env);
    assert!(before.len() >= 8, "{:?}", before.keys());
    let old_journal = fs::read(env.lane().join("journal/journal")).unwrap();
    // Clear text the v1 journal holds: a record body line and the
    // harness's agent type and source path.
    for needle in ["Give me a tour", "general-purpose", "pending.jsonl"] {
        assert!(
            old_journal
                .windows(needle.len())
                .any(|w| w == needle.as_bytes()),
            "the fixture's v1 journal holds {needle:?}"
        );
    }

    let out = env.abcd(&["journal", "upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("upgraded to journal format 2"),
        "{}",
        stdout(&out)
    );
    assert_eq!(header_version(&env), 2);
    assert_eq!(
        user_files(&env),
        before,
        "every user-visible file byte for byte"
    );
    assert!(!env.lane().join("journal.v1").exists());
    let journal = fs::read(env.lane().join("journal/journal")).unwrap();
    for needle in ["Give me a tour", "general-purpose", "pending.jsonl", "tmp/"] {
        assert!(
            !journal
                .windows(needle.len())
                .any(|w| w == needle.as_bytes()),
            "the v2 journal holds {needle:?}"
        );
    }
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    // Idempotent.
    let out = env.abcd(&["journal", "upgrade"]);
    assert!(stdout(&out).contains("nothing to do"), "{}", stdout(&out));

    // The store works: rebuild is identical, the staged entry drains with
    // its lineage, the quarantined one is still reported.
    let snap = |env: &Env| {
        let mut m = env.snapshot(&["records", "staging", "quarantine", "sessions", "index"]);
        m.retain(|k, _| !k.starts_with("index/checkpoint"));
        m
    };
    let s = snap(&env);
    assert!(env
        .abcd(&["journal", "replay", "--rebuild"])
        .status
        .success());
    assert_eq!(s, snap(&env));
    let staged = env.staged();
    assert_eq!(staged["staged"].as_array().unwrap().len(), 1, "{staged}");
    assert_eq!(
        staged["quarantined"].as_array().unwrap().len(),
        1,
        "{staged}"
    );
    let records = env.records();
    assert!(
        records
            .iter()
            .any(|r| r["agent_id"] == "showcol1" && r["agent_type"] == "Explore"),
        "{records:?}"
    );
}

#[test]
fn any_verb_upgrades_on_first_open_and_hooks_keep_working() {
    let env = v1_env();
    let before = user_files(&env);
    // A hook is the first to open it.
    let m = env.main_transcript(
        "99990000-0000-4000-8000-000000000009",
        &jsonl(&[&line(
            "99990000-0000-4000-8000-000000000009",
            "after the upgrade",
        )]),
    );
    let out = env.hook(
        "session-end",
        &env.end_payload("99990000-0000-4000-8000-000000000009", &m),
    );
    assert_eq!(hook_json(&out)["outcome"], "staged", "{}", stderr(&out));
    assert_eq!(header_version(&env), 2);
    let after = user_files(&env);
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{k}");
    }
    let d = env.drain();
    assert_eq!(d["captured"].as_array().unwrap().len(), 2, "{d}");
    let v = env.abcd(&["journal", "verify"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
}

/// An upgrade killed after the journals were swapped is finished by the
/// next open (the renames and the rebuild are restartable).
#[test]
fn an_upgrade_killed_at_any_step_is_finished_by_the_next_open() {
    let probe = v1_env();
    let trace = probe.tmp.path().join("trace");
    let out = probe.abcd_env(
        &["journal", "upgrade"],
        &[("ABCD_FAULT_TRACE", trace.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ops = fs::read_to_string(&trace).unwrap().lines().count();
    for n in (1..=ops).step_by(3) {
        let env = v1_env();
        let before = user_files(&env);
        let out = env.abcd_env(
            &["journal", "upgrade"],
            &[("ABCD_FAULT_INJECT", &format!("#{n}:KILL"))],
        );
        if out.status.code().is_some() {
            continue;
        }
        let out = env.abcd(&["--json", "history", "staged"]);
        assert_eq!(out.status.code(), Some(0), "KILL #{n}: {}", stderr(&out));
        assert_eq!(header_version(&env), 2, "KILL #{n}");
        let after = user_files(&env);
        for (k, v) in &before {
            assert_eq!(after.get(k), Some(v), "KILL #{n}: {k}");
        }
        let v = env.abcd(&["journal", "verify"]);
        assert_eq!(v.status.code(), Some(0), "KILL #{n}: {}", stdout(&v));
    }
}
