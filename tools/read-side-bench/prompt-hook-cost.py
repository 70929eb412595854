#!/usr/bin/env python3
# What a journal append would cost the UserPromptSubmit hook (the hook-fire
# count decision in `history stats`): whole-process medians of `abcd hook
# user-prompt-submit` with nothing staged, `abcd --version`, `/bin/true`, and
# `abcd hook session-start` with and without one SessionNoted append.
#   python3 tools/read-side-bench/prompt-hook-cost.py target/release/abcd [RUNS=200]
import json, os, subprocess, sys, tempfile, time, statistics
bin_ = sys.argv[1]; runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
t = tempfile.mkdtemp(prefix="ups-")
env = dict(os.environ, HOME=t + "/home", ABCD_HOME=t + "/abcd")
os.makedirs(t + "/home"); os.makedirs(t + "/repo")
subprocess.run(["git", "init", "-q"], cwd=t + "/repo", check=True)
subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "--allow-empty", "-m", "r"], cwd=t + "/repo", check=True)
tr = t + "/s.jsonl"
open(tr, "w").write(json.dumps({"type": "user", "timestamp": "2026-06-01T00:00:00Z", "message": {"role": "user", "content": "hi"}}) + "\n")
sid = "ups-0001"
subprocess.run([bin_, "history", "capture", tr, "--session", sid], cwd=t + "/repo", env=env, check=True, capture_output=True)
payload = json.dumps({"session_id": sid, "cwd": t + "/repo", "hook_event_name": "UserPromptSubmit", "prompt": "hello", "transcript_path": tr}).encode()
def timeit(argv, inp):
    xs = []
    for _ in range(runs):
        s = time.perf_counter(); r = subprocess.run(argv, input=inp, cwd=t + "/repo", env=env, capture_output=True); xs.append((time.perf_counter() - s) * 1e3)
        assert r.returncode == 0, r.stderr
    xs.sort(); return statistics.median(xs), xs[int(len(xs) * 0.9)]
for name, argv, inp in [("abcd --version", [bin_, "--version"], b""), ("hook user-prompt-submit (nothing staged)", [bin_, "hook", "user-prompt-submit"], payload), ("/bin/true", ["/bin/true"], b"")]:
    m, p = timeit(argv, inp); print(f"{name}: median {m:.2f} ms, p90 {p:.2f} ms (n={runs})")
# The cost of one journal append in a hook: session-start with a session
# already noted (no event) vs a new session each run (SessionNoted appended:
# store lock, append + fdatasync, catch-up). Alternating run by run.
def ss(s):
    return json.dumps({"session_id": s, "cwd": t + "/repo", "hook_event_name": "SessionStart", "source": "startup", "transcript_path": tr}).encode()
subprocess.run([bin_, "hook", "session-start"], input=ss(sid), cwd=t + "/repo", env=env, check=True, capture_output=True)
a, b = [], []
for i in range(runs):
    for xs, p in ((a, ss(sid)), (b, ss(f"new-{i:05d}"))):
        s = time.perf_counter(); r = subprocess.run([bin_, "hook", "session-start"], input=p, cwd=t + "/repo", env=env, capture_output=True); xs.append((time.perf_counter() - s) * 1e3)
        assert r.returncode == 0, r.stderr
print(f"hook session-start, session already noted (no event): median {statistics.median(a):.2f} ms")
print(f"hook session-start, new session (one SessionNoted appended): median {statistics.median(b):.2f} ms")
print(f"one journal append in a hook: +{statistics.median(b) - statistics.median(a):.2f} ms (median difference)")
