"""Helpers the probe generators share. Each list seeds the module-level
`random` generator first, so its values are the same on every run."""
import json
import random
import string

HEX = "0123456789abcdef"
URLSAFE = string.ascii_letters + string.digits + "_-"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def rv(n=24, alpha=string.ascii_letters + string.digits):
    """A random value of `n` bytes from `alpha`, holding a letter and a digit."""
    while True:
        s = "".join(random.choice(alpha) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


def pw():
    """A password the way people pick one: a word, digits, a symbol, a tail."""
    return (random.choice(["Summer", "Falcon", "Quartz", "Maple", "Orbit"])
            + str(random.randint(10, 999)) + random.choice("!#&*") + rv(3))


def write_cases(templates, values, path, public=()):
    """Fills each `(template, command)` with a fresh `values()` and writes
    the cases to `path` as JSON: `[line, secrets]`, or `[output, secrets,
    command]` for a command's output (see `check.py`). The values named in
    `public` are not secrets (a JWK's public member)."""
    out = []
    for t, cmd in templates:
        vals = values()
        line = t.format(**vals)
        secrets = [vals[k] for k in vals if "{" + k + "}" in t and k not in public]
        out.append((line, secrets) if cmd is None else (line, secrets, cmd))
    json.dump(out, open(path, "w"))
    print(len(out))
