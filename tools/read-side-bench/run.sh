#!/usr/bin/env bash
# Read-side timing: one session of ~SIZE_MB of transcript text with AGENTS
# sub-agents, captured through `abcd history capture` into a temporary
# ABCD_HOME, then `history reconstruct`, `history export --format html`,
# `history list` and `history stats` timed (best of 3).
#   tools/read-side-bench/run.sh [SIZE_MB=100] [AGENTS=50]
# Needs a release build: cargo build --release
set -euo pipefail
SIZE_MB=${1:-100}
AGENTS=${2:-50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The checkout's cargo config builds under target/<host>/release.
BIN=${ABCD_BIN:-$(ls -d "$ROOT"/target/*/release/abcd "$ROOT"/target/release/abcd 2>/dev/null | head -n 1)}
[ -x "$BIN" ] || { echo "read-side-bench: no release abcd under $ROOT/target; run cargo build --release (or set ABCD_BIN)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export HOME=$T/home ABCD_HOME=$T/abcd
mkdir -p "$HOME" "$T/repo" "$T/src" "$T/out"
cd "$T/repo"
git init -q && git -c user.name=b -c user.email=b@example.com commit -q --allow-empty -m root
python3 - "$T/src" "$SIZE_MB" "$AGENTS" <<'PY'
import json, sys, random
out, size_mb, agents = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
words = "the quick brown fox jumps over lazy dogs while parsing transcripts and counting tokens once".split()
def para(n): return " ".join(random.choice(words) for _ in range(n))
per_thread = size_mb * 1024 * 1024 // (agents + 1)
sid = "bench-session-0001"
def thread(path, agent, spawns):
    n, i = 0, 0
    with open(path, "w") as f:
        while n < per_thread:
            i += 1
            ts = "2026-05-01T10:%02d:%02d.000Z" % ((i // 60) % 60, i % 60)
            u = {"type": "user", "timestamp": ts, "sessionId": sid, "message": {"role": "user", "content": para(200)}}
            a = {"type": "assistant", "timestamp": ts, "sessionId": sid, "message": {"id": f"msg_{agent}_{i}", "role": "assistant", "model": "claude-sonnet-4", "content": [{"type": "text", "text": para(400)}], "usage": {"input_tokens": 10, "output_tokens": 100, "cache_read_input_tokens": 1000}}}
            for l in (u, a, a):
                s = json.dumps(l); f.write(s + "\n"); n += len(s) + 1
            if spawns and i <= len(spawns):
                ag = spawns[i - 1]
                tu = {"type": "assistant", "timestamp": ts, "message": {"id": f"msg_spawn_{ag}", "role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{ag}", "name": "Agent", "input": {"prompt": "go"}}], "usage": {"input_tokens": 1, "output_tokens": 1}}}
                tr = {"type": "user", "timestamp": ts, "toolUseResult": {"agentId": ag}, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{ag}", "content": f"agent {ag} done"}]}}
                for l in (tu, tr):
                    s = json.dumps(l); f.write(s + "\n"); n += len(s) + 1
ids = [f"ag{k:04d}" for k in range(agents)]
thread(f"{out}/{sid}.jsonl", "main", ids)
for ag in ids:
    thread(f"{out}/agent-{ag}.jsonl", ag, [])
PY
SID=bench-session-0001
"$BIN" history capture "$T/src/$SID.jsonl" >/dev/null
for f in "$T"/src/agent-*.jsonl; do
  a=$(basename "$f" .jsonl); a=${a#agent-}
  "$BIN" history capture "$f" --session "$SID" --agent "$a" --agent-type general-purpose >/dev/null
done
echo "corpus: $(du -sh "$ABCD_HOME/transcripts" | cut -f1) in $(ls "$ABCD_HOME"/transcripts/*/records | wc -l) records"
best() { # best of 3, seconds
  local b=999
  for _ in 1 2 3; do
    local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N)
    b=$(python3 -c "print(min($b, $e - $s))")
  done
  printf '%-60s %.3f s\n' "$*" "$b" | sed "s|$BIN|abcd|; s|$T|\$T|g"
}
best "$BIN" history reconstruct "$SID" --out "$T/out"
best "$BIN" history export "$SID" --format html --out "$T/out/page.html"
best "$BIN" history list
best "$BIN" history stats
