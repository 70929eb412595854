//! The quality bar as an ordinary test: on a small generated corpus with
//! every planted kind and every decoy, recall >= 99% and no decoy touched;
//! and the scorer itself notices a miss (so the bar can fail).

use abcd_redact_bench::{corpus_identity, generate, score_redacted, KINDS};

#[test]
fn generated_corpus_meets_the_recall_and_decoy_bar() {
    let (corpus, truth) = generate(5, 600 * 1024, 0.6);
    let planted_kinds: std::collections::BTreeSet<_> = truth
        .iter()
        .filter(|t| !t.decoy)
        .map(|t| t.kind.clone())
        .collect();
    assert!(
        truth.iter().filter(|t| !t.decoy).count() >= KINDS,
        "corpus too small to plant every kind"
    );
    assert!(planted_kinds.len() >= 40, "{planted_kinds:?}");
    let scanner = abcd_redact::Scanner::new(corpus_identity(), None);
    let red = scanner.redact(&corpus).expect("corpus must not be refused");
    let s = score_redacted(
        &corpus,
        &red.text,
        &truth,
        &["secret", "network", "identity"],
    );
    let missed: Vec<_> = s
        .per_kind
        .iter()
        .filter(|(_, t)| t.caught < t.planted)
        .collect();
    assert!(
        s.recall() >= 0.99,
        "recall {:.4}; missed {missed:?}",
        s.recall()
    );
    assert!(
        s.decoy_hits.is_empty(),
        "decoys redacted: {:?}",
        s.decoy_hits
    );
    // Every valid JSON line stays valid JSON.
    for (a, b) in corpus.lines().zip(red.text.lines()) {
        if serde_json::from_str::<serde_json::Value>(a).is_ok() {
            assert!(serde_json::from_str::<serde_json::Value>(b).is_ok());
        }
    }
}

#[test]
fn the_scorer_counts_a_miss_and_a_false_positive() {
    let (corpus, truth) = generate(9, 64 * 1024, 1.0);
    // Unredacted output: every planted value survives, so recall is zero.
    let s = score_redacted(&corpus, &corpus, &truth, &["secret"]);
    assert!(s.planted > 0);
    assert_eq!(s.caught, 0);
    // Blank out one decoy: that is a false positive.
    let d = truth.iter().find(|t| t.decoy).expect("a decoy");
    let lines: Vec<String> = corpus
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i + 1 == d.line {
                l.replace(&d.value, "X")
            } else {
                l.to_string()
            }
        })
        .collect();
    let s = score_redacted(&corpus, &lines.join("\n"), &truth, &["secret"]);
    assert_eq!(s.decoy_hits.len(), 1);
}

/// The varied corpus's planted values (`generate_varied_with_truth`): the
/// corpus is `generate_varied`'s byte for byte, every value stands on the
/// line its truth names, and abcd redacts every one of them (each of the
/// twelve leak classes, ~30 of each), so the side-by-side on this corpus
/// scores what the generator planted.
#[test]
fn varied_corpus_truth_is_exact_and_fully_caught() {
    use abcd_redact_bench::{generate_varied, generate_varied_with_truth};
    let (corpus, truth) = generate_varied_with_truth(13, 600 * 1024);
    assert_eq!(corpus, generate_varied(13, 600 * 1024));
    let lines: Vec<&str> = corpus.lines().collect();
    let kinds: std::collections::BTreeSet<_> = truth.iter().map(|t| t.kind.as_str()).collect();
    assert_eq!(kinds.len(), 12, "{kinds:?}");
    for t in &truth {
        assert!(!t.decoy);
        let line = lines[t.line - 1];
        let spelled = serde_json::to_string(&t.value).expect("string");
        assert!(
            line.contains(spelled.trim_matches('"')),
            "{} not on line {}: {line}",
            t.value,
            t.line
        );
    }
    let scanner = abcd_redact::Scanner::new(corpus_identity(), None);
    let red = scanner.redact(&corpus).expect("corpus must not be refused");
    let s = score_redacted(&corpus, &red.text, &truth, &["secret", "identity"]);
    assert_eq!(s.planted, truth.len());
    let missed: Vec<_> = s
        .per_kind
        .iter()
        .filter(|(_, t)| t.caught < t.planted)
        .collect();
    assert!(missed.is_empty(), "missed {missed:?}");
}
