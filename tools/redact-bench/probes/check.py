"""Runs each probe case through `abcd redact` and prints the cases whose
secret survives. A case `[line, secrets]` is run bare and as a JSON-escaped
`tool_result`; a case `[output, secrets, command]` is a command and what it
printed, run as a transcript: a Bash `tool_use` running the command and the
`tool_result` answering it (its output alone is a bare string no rule could
know).

usage: python3 check.py ABCD_BINARY CASES.json
(CASES.json is written by one of the sessionNN-N.py generators.)
"""
import json, os, subprocess, sys, tempfile

abcd, cases = sys.argv[1], json.load(open(sys.argv[2]))
home = tempfile.mkdtemp()
env = dict(os.environ, ABCD_HOME=home, HOME=home)


def run(text):
    return subprocess.run([abcd, "redact"], input=text.encode(), capture_output=True, env=env).stdout.decode()


def result(line, id="t1"):
    return json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": id, "content": line}]}}) + "\n"


def command(cmd, id="t1"):
    return json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": cmd}}]}}) + "\n"


leaks = {"bare": 0, "json": 0, "command": 0}
runs = {"bare": 0, "json": 0, "command": 0}
for case in cases:
    line, secrets = case[0], case[1]
    if len(case) > 2:
        inputs = {"command": command(case[2]) + result(line)}
    else:
        inputs = {"bare": line + "\n", "json": result(line)}
    for ctx, inp in inputs.items():
        runs[ctx] += 1
        out = run(inp)
        if [s for s in secrets if s in out or json.dumps(s)[1:-1] in out]:
            leaks[ctx] += 1
            shown = case[2] + " => " + line if ctx == "command" else line
            print(ctx, "LEAK", shown.replace("\n", "\\n")[:160])
print(f"{len(cases)} cases; leaking: bare {leaks['bare']} of {runs['bare']}, "
      f"tool_result {leaks['json']} of {runs['json']}, command output {leaks['command']} of {runs['command']}")
