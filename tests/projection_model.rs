//! Property: random sequences of store operations, applied live through the
//! real API, leave projections that (1) agree with a plain in-memory model
//! and (2) a replay of the journal into empty directories reproduces byte
//! for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use abcd::corpus::Corpus;
use abcd::drain::{self, Budget};
use abcd::event::{Event, GapSighted, SessionNoted};
use abcd::lineage::{Lineage, LineageSource, SpawnAttribution};
use abcd::{clock, history, projection, stage};
use abcd_redact::{Identity, Scanner};
use proptest::prelude::*;

const BODIES: [&str; 5] = ["a\n", "a\nb\n", "a\nb\nc\n", "x\n", "x\ny\n"];

#[derive(Debug, Clone)]
enum Op {
    Stage {
        session: u8,
        agent: Option<u8>,
        body: u8,
    },
    Drain,
    DiscardFirst,
    Note {
        session: u8,
    },
    Gap,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..2, proptest::option::of(0u8..1), 0u8..5).prop_map(|(session, agent, body)| Op::Stage { session, agent, body }),
        2 => Just(Op::Drain),
        1 => Just(Op::DiscardFirst),
        1 => (0u8..3).prop_map(|session| Op::Note { session }),
        1 => Just(Op::Gap),
    ]
}

type Key = (String, Option<String>);

#[derive(Default, Debug)]
struct Model {
    staged: BTreeMap<Key, String>,
    records: BTreeMap<Key, Vec<String>>,
    sessions: BTreeSet<String>,
    gaps: u64,
}

impl Model {
    fn stage(&mut self, key: Key, body: &str) {
        if let Some(b) = self.staged.get(&key) {
            if b != body {
                self.staged.insert(key, body.to_owned());
            }
            return;
        }
        if self
            .records
            .get(&key)
            .is_some_and(|live| live.iter().any(|l| l == body))
        {
            return; // already stored with identical bytes
        }
        self.staged.insert(key, body.to_owned());
    }
    fn drain(&mut self) {
        // Main threads first, then sub-agents; each in key order is enough
        // here because keys are independent streams.
        for (key, body) in std::mem::take(&mut self.staged) {
            let live = self.records.entry(key).or_default();
            if live.iter().any(|l| l.starts_with(&body)) {
                continue;
            }
            live.retain(|l| !body.starts_with(l.as_str()));
            live.push(body);
        }
    }
}

fn lineage(key: &Key) -> Lineage {
    Lineage {
        session_id: key.0.clone(),
        agent_id: key.1.clone(),
        lineage_source: Some(LineageSource::Hook),
        spawn_attribution: key.1.as_ref().map(|_| SpawnAttribution::Unattributed),
        ..Lineage::default()
    }
}

fn snapshot(lane: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                if !rel.starts_with("index/checkpoint") {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    for d in ["records", "staging", "quarantine", "sessions", "index"] {
        walk(&lane.join(d), lane, &mut out);
    }
    if let Ok(b) = std::fs::read(lane.join("subagent-payload-gap.json")) {
        out.insert("gap".into(), b);
    }
    out
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = Corpus::open(tmp.path(), &"c".repeat(40)).unwrap();
    let scanner = || Scanner::new(Identity::default(), None);
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Stage {
                session,
                agent,
                body,
            } => {
                let key: Key = (format!("s{session}"), agent.map(|a| format!("a{a}")));
                let body = BODIES[body as usize];
                stage::stage(&corpus, &lineage(&key), body.as_bytes(), None).unwrap();
                model.stage(key, body);
            }
            Op::Drain => {
                let r = drain::drain(&corpus, &scanner, Budget::UNBOUNDED, clock::now_unix_ns())
                    .unwrap();
                prop_assert!(r.failed.is_empty(), "{:?}", r.failed);
                model.drain();
            }
            Op::DiscardFirst => {
                let staged = stage::list_staged(&corpus, clock::now_unix_ns()).unwrap();
                if let Some(e) = staged.first() {
                    history::discard(&corpus, &format!("{}.raw", e.stem), true).unwrap();
                    model
                        .staged
                        .remove(&(e.session_id.clone(), e.agent_id.clone()));
                }
            }
            Op::Note { session } => {
                let l = corpus.lock().unwrap();
                l.append(&Event::SessionNoted(SessionNoted {
                    session_id: format!("s{session}"),
                    noted_at_ns: clock::now_unix_ns(),
                }))
                .unwrap();
                model.sessions.insert(format!("s{session}"));
            }
            Op::Gap => {
                let l = corpus.lock().unwrap();
                l.append(&Event::SubagentGapSighted(GapSighted {
                    hook_event_name: "SubagentStop".into(),
                    seen_at_ns: clock::now_unix_ns(),
                }))
                .unwrap();
                model.gaps += 1;
            }
        }
    }
    // 1. The engine agrees with the model.
    let staged: BTreeMap<Key, String> = stage::list_staged(&corpus, clock::now_unix_ns())
        .unwrap()
        .into_iter()
        .map(|e| {
            let body = std::fs::read_to_string(&e.path).unwrap();
            ((e.session_id, e.agent_id), body)
        })
        .collect();
    prop_assert_eq!(&staged, &model.staged);
    let mut records: BTreeMap<Key, Vec<String>> = BTreeMap::new();
    for l in history::list(&corpus).unwrap() {
        let shown = history::show(&corpus, &l.file).unwrap();
        records
            .entry((
                l.meta.lineage.session_id.clone(),
                l.meta.lineage.agent_id.clone(),
            ))
            .or_default()
            .push(shown.body);
    }
    let mut want = model.records.clone();
    want.retain(|_, v| !v.is_empty());
    for v in records.values_mut().chain(want.values_mut()) {
        v.sort();
    }
    prop_assert_eq!(&records, &want);
    for s in &model.sessions {
        prop_assert!(corpus.lane.sessions_dir().join(s).is_file());
    }
    if model.gaps > 0 {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(corpus.lane.gap_marker_path()).unwrap()).unwrap();
        prop_assert_eq!(m["count"].as_u64().unwrap(), model.gaps);
    }
    // 2. Replaying the journal into empty directories reproduces everything.
    let live = snapshot(&corpus.lane.dir);
    {
        let _l = corpus.lock().unwrap();
        projection::rebuild(&corpus.lane, &corpus.journal).unwrap();
    }
    let rebuilt = snapshot(&corpus.lane.dir);
    prop_assert_eq!(
        live.keys().collect::<Vec<_>>(),
        rebuilt.keys().collect::<Vec<_>>()
    );
    for (k, v) in &live {
        prop_assert!(v == &rebuilt[k], "{} differs after replay", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn live_projections_match_the_model_and_a_replay(ops in proptest::collection::vec(op(), 1..16)) {
        run(ops)?;
    }
}
