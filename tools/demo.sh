#!/usr/bin/env bash
# A one-minute tour on a fresh machine: build abcd, then in a temporary HOME,
# ABCD_HOME and git repository, stage a real Claude Code session (main thread
# plus two sub-agents, one with a harness sidecar) through the real hooks,
# drain it through redaction, list and show it, and verify the journal.
# Nothing outside the temporary directory is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
# Cargo says where it put the binary (its target directory and, with this
# checkout's .cargo/config.toml, target/<host>/release): ask it rather than
# guess, so CARGO_TARGET_DIR or a build.target-dir anywhere works.
ABCD=$(cargo build --release --quiet --bin abcd --message-format=json-render-diagnostics |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
if [ -z "$ABCD" ] || [ ! -x "$ABCD" ]; then
  echo "demo: cargo build succeeded but named no abcd executable (got '$ABCD'); run 'cargo build --release --bin abcd' and look for target/*/release/abcd" >&2
  exit 1
fi
FX="$PWD/tests/fixtures/public"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
export HOME="$T/home" ABCD_HOME="$T/abcd" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" "$T/repo"
cd "$T/repo"
git init -q && echo demo > README && git add README
git -c user.name=Demo -c user.email=demo@example.com commit -qm root

SID=cc1df109-4282-4321-8248-8bbcd471da78
SRC="$FX/cchistory/mock_data/.claude/projects/-Users-mock-user-workspace-chat-ui-kit"
PROJ="$HOME/.claude/projects/-demo"
mkdir -p "$PROJ/$SID/subagents"
cp "$SRC/$SID.jsonl" "$PROJ/$SID.jsonl"
cp "$SRC/$SID/subagents/agent-a0a2928875cb36a92.jsonl" "$PROJ/$SID/subagents/"
RK="$FX/rekal-cli/cmd/rekal/cli/session/testdata/real/8d1a1f9e-b38c-41fa-952a-5288179b5626/subagents"
cp "$RK/agent-a490235204f1c154d.jsonl" "$RK/agent-a490235204f1c154d.meta.json" "$PROJ/$SID/subagents/"

hook() { # verb, json payload
  echo "\$ abcd hook $1" >&2
  printf '%s' "$2" | "$ABCD" hook "$1"
}
echo "== the session starts, two sub-agents finish, the session ends"
hook session-start "{\"session_id\":\"$SID\",\"cwd\":\"$T/repo\"}"
for A in a0a2928875cb36a92 a490235204f1c154d; do
  hook subagent-stop "{\"session_id\":\"$SID\",\"cwd\":\"$T/repo\",\"agent_id\":\"$A\",\"agent_type\":\"Explore\",\"agent_transcript_path\":\"$PROJ/$SID/subagents/agent-$A.jsonl\",\"hook_event_name\":\"SubagentStop\"}"
done
hook session-end "{\"session_id\":\"$SID\",\"cwd\":\"$T/repo\",\"transcript_path\":\"$PROJ/$SID.jsonl\",\"hook_event_name\":\"SessionEnd\"}"
echo; echo "== staged (raw, waiting for redaction)"
"$ABCD" history staged
echo; echo "== drain: redact and store"
"$ABCD" history drain
echo; echo "== the corpus"
"$ABCD" history list --session "$SID"
echo; echo "== one sub-agent record (first lines)"
# Whole output first, then its head: `abcd | head` would let head close the
# pipe early, and abcd (like any Unix tool) stops on SIGPIPE — which
# pipefail would turn into a failed demo, depending on timing.
"$ABCD" history show a490235204f1c154d > "$T/show.txt"
head -n 12 "$T/show.txt" | cut -c1-160
echo; echo "== the journal behind it"
"$ABCD" journal verify
"$ABCD" journal dump | cut -c1-150
