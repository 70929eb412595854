"""Runs each probe case through `abcd redact`, bare and as a JSON-escaped
`tool_result`, and prints the cases whose secret survives.

usage: python3 check.py ABCD_BINARY CASES.json
(CASES.json is written by one of the session20-N.py generators.)
"""
import json, os, subprocess, sys, tempfile

abcd, cases = sys.argv[1], json.load(open(sys.argv[2]))
home = tempfile.mkdtemp()
env = dict(os.environ, ABCD_HOME=home, HOME=home)


def run(text):
    return subprocess.run([abcd, "redact"], input=text.encode(), capture_output=True, env=env).stdout.decode()


leaks = {"bare": 0, "json": 0}
for line, secrets in cases:
    for ctx in ("bare", "json"):
        if ctx == "bare":
            inp = line + "\n"
        else:
            inp = json.dumps({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": line}]}}) + "\n"
        out = run(inp)
        if [s for s in secrets if s in out or json.dumps(s)[1:-1] in out]:
            leaks[ctx] += 1
            print(ctx, "LEAK", line.replace("\n", "\\n")[:160])
print(f"{len(cases)} cases; leaking: bare {leaks['bare']}, tool_result {leaks['json']}")
