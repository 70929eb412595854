#!/usr/bin/env bash
# Build cost of each engine alone: a minimal program using what `history
# search` uses (index, phrase query, snippet), built in release (the
# project's profile) from an empty target directory with one job, then its
# stripped size. Dependencies must be downloaded first (cargo fetch).
#   tools/tantivy-bench/build-cost.sh [JOBS=1]
set -euo pipefail
JOBS=${1:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
for e in fts5 tantivy; do
  T=$(mktemp -d)
  (cd "$HERE/minimal/$e" && cargo fetch -q)
  s=$(date +%s.%N)
  (cd "$HERE/minimal/$e" && CARGO_TARGET_DIR=$T CARGO_BUILD_JOBS=$JOBS cargo build -q --release)
  e2=$(date +%s.%N)
  bin=$(ls "$T"/release/engine-min-$e "$T"/*/release/engine-min-$e 2>/dev/null | head -n 1)
  printf '%-8s build %.0f s (-j%s), binary %.1f MB, crates %s\n' "$e" \
    "$(python3 -c "print($e2 - $s)")" "$JOBS" \
    "$(python3 -c "import os; print(os.path.getsize('$bin') / 1e6)")" \
    "$(cd "$HERE/minimal/$e" && cargo tree -q --prefix none -e normal | sort -u | wc -l)"
  "$bin" >/dev/null
  rm -rf "$T"
done
