//! proptest: random appends (single and batches, repeated ids) read back
//! equal a plain in-memory model; resuming from any returned Position yields
//! exactly the suffix.

use abcd_journal::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    One(u8, Vec<u8>),
    Batch(Vec<(u8, Vec<u8>)>),
    /// Drop the handle and reopen (a fresh process).
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    // Ids from a small space so repeats are common.
    let ev = (0u8..40, proptest::collection::vec(any::<u8>(), 0..300));
    prop_oneof![
        6 => ev.clone().prop_map(|(i, p)| Op::One(i, p)),
        3 => proptest::collection::vec(ev, 1..6).prop_map(Op::Batch),
        1 => Just(Op::Reopen),
    ]
}

fn eid(i: u8) -> EventId {
    let mut b = [0u8; 16];
    b[0] = i;
    b[15] = i.wrapping_mul(7);
    EventId(b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        let t = tempfile::tempdir().unwrap();
        let mut j = Journal::open(t.path()).unwrap();
        let mut model: Vec<(EventId, Vec<u8>)> = Vec::new();
        let seq_of = |m: &Vec<(EventId, Vec<u8>)>, id: &EventId| m.iter().position(|e| e.0 == *id).map(|p| p as u64 + 1);
        for o in &ops {
            match o {
                Op::One(i, p) => {
                    let want = match seq_of(&model, &eid(*i)) {
                        Some(s) => Appended::AlreadyPresent { seq: s },
                        None => { model.push((eid(*i), p.clone())); Appended::New { seq: model.len() as u64 } }
                    };
                    prop_assert_eq!(j.append(eid(*i), p).unwrap(), want);
                }
                Op::Batch(evs) => {
                    let refs: Vec<(EventId, &[u8])> = evs.iter().map(|(i, p)| (eid(*i), p.as_slice())).collect();
                    let mut want = Vec::new();
                    for (i, p) in evs {
                        want.push(match seq_of(&model, &eid(*i)) {
                            Some(s) => Appended::AlreadyPresent { seq: s },
                            None => { model.push((eid(*i), p.clone())); Appended::New { seq: model.len() as u64 } }
                        });
                    }
                    prop_assert_eq!(j.append_batch(&refs).unwrap(), want);
                }
                Op::Reopen => { drop(j); j = Journal::open_existing(t.path()).unwrap(); }
            }
        }
        let frames: Vec<Frame> = j.read_from(&j.start()).unwrap().map(|f| f.unwrap()).collect();
        let got: Vec<(EventId, Vec<u8>)> = frames.iter().map(|f| (f.id, f.payload.clone())).collect();
        prop_assert_eq!(&got, &model);
        for (k, f) in frames.iter().enumerate() {
            prop_assert_eq!(f.seq, k as u64 + 1);
            let suffix: Vec<u64> = j.read_from(&f.end).unwrap().map(|x| x.unwrap().seq).collect();
            prop_assert_eq!(suffix, ((k as u64 + 2)..=(frames.len() as u64)).collect::<Vec<_>>());
        }
        for (k, (id, _)) in model.iter().enumerate() {
            prop_assert_eq!(j.contains(id).unwrap(), Some(k as u64 + 1));
        }
        prop_assert_eq!(verify(t.path(), &VerifyOptions { chain: true, progress: None }).unwrap().status, VerifyStatus::Clean);
    }
}
