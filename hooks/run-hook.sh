#!/bin/sh
# abcd hook wrapper: finds the abcd binary and hands it this hook's stdin.
#
# Usage: run-hook.sh <verb>   (session-start | user-prompt-submit | stop |
#                              subagent-stop | session-end)
#
# Resolution order, first hit wins:
#   1. $CLAUDE_PLUGIN_ROOT/bin/abcd            (a binary shipped with the plugin)
#   2. $CLAUDE_PLUGIN_ROOT/target/<host>/release/abcd, then
#      $CLAUDE_PLUGIN_ROOT/target/release/abcd (a plugin checkout built in
#      place: the checkout's cargo config puts it under target/<host>/)
#   3. abcd on PATH, only if the path is absolute and neither the binary nor
#      its directory is world-writable (anyone could swap a world-writable one);
#      for a symbolic link, neither the file it resolves to nor that file's
#      directory either.
#
# Exit codes: whatever abcd exits (abcd's hooks always exit 0), except that
# 2 becomes 1. When no binary resolves this exits 1 with one stderr line:
# never 0, because silence would hide that capture is off, and never 2,
# because exit 2 BLOCKS SubagentStop, Stop and UserPromptSubmit.

verb="${1:-}"
case "$verb" in
  session-start|user-prompt-submit|stop|subagent-stop|session-end) ;;
  *)
    echo "abcd: hooks/run-hook.sh was given an unknown hook verb '$verb'; capture is OFF for this event — reinstall the abcd plugin" >&2
    exit 1
    ;;
esac

# True (0) when $1 is world-writable, or when that cannot be determined:
# an unverifiable binary is treated as unsafe. A symbolic link's own mode
# means nothing (always 0777): -L judges the file it points to.
world_writable() {
  found=$(find -L "$1" -prune -perm -0002 -print 2>/dev/null) || return 0
  [ -n "$found" ]
}

bin=""
if [ -n "${CLAUDE_PLUGIN_ROOT:-}" ]; then
  for candidate in "$CLAUDE_PLUGIN_ROOT/bin/abcd" "$CLAUDE_PLUGIN_ROOT"/target/*/release/abcd "$CLAUDE_PLUGIN_ROOT/target/release/abcd"; do
    if [ -f "$candidate" ] && [ -x "$candidate" ]; then
      bin="$candidate"
      break
    fi
  done
fi

why="no abcd binary in \$CLAUDE_PLUGIN_ROOT/bin, \$CLAUDE_PLUGIN_ROOT/target/*/release, \$CLAUDE_PLUGIN_ROOT/target/release or on PATH"
if [ -z "$bin" ]; then
  candidate=$(command -v abcd 2>/dev/null) || candidate=""
  case "$candidate" in
    /*)
      if [ ! -f "$candidate" ] || [ ! -x "$candidate" ]; then
        why="$candidate is not an executable file"
      elif world_writable "$candidate" || world_writable "${candidate%/*}/"; then
        why="$candidate (or its directory) is world-writable, so abcd refuses to run it"
      elif [ -L "$candidate" ]; then
        # A link on PATH (~/.local/bin/abcd -> …): the directory of the
        # file it resolves to must be safe too.
        target=$(readlink -f "$candidate" 2>/dev/null) || target=""
        case "$target" in
          /*)
            if world_writable "${target%/*}/"; then
              why="$candidate links to $target, whose directory is world-writable, so abcd refuses to run it"
            else
              bin="$candidate"
            fi
            ;;
          *) why="$candidate is a symbolic link abcd cannot resolve (readlink -f), so abcd refuses to run it" ;;
        esac
      else
        bin="$candidate"
      fi
      ;;
    "") ;;
    *) why="PATH resolves abcd to '$candidate', which is not an absolute path" ;;
  esac
fi

if [ -z "$bin" ]; then
  echo "abcd: capture is OFF for this $verb hook — $why; install abcd on PATH (cargo install --locked --path <abcd checkout>, then abcd setup) or run 'cargo build --release' in the plugin directory" >&2
  exit 1
fi

# Not exec: abcd's own hooks always exit 0, but a binary older than this
# plugin would answer an unknown verb with a usage error, exit 2, and exit 2
# BLOCKS the harness. Any 2 is therefore reported as 1.
"$bin" hook "$verb"
rc=$?
if [ "$rc" -eq 2 ]; then
  echo "abcd: '$bin hook $verb' exited 2 (a usage error — is that abcd older than this plugin?); reported as 1 so the harness is not blocked; capture may be OFF for this event" >&2
  exit 1
fi
exit "$rc"
