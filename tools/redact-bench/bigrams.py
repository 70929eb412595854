#!/usr/bin/env python3
"""Letter pairs common in English words, for `engine::COMMON_PAIRS`.

Counts the letter pairs of the words (three letters or more, lower-cased) in
the prose of the crate sources Cargo has downloaded for this workspace: the
`//` comment lines of their `src/**/*.rs` files and their Markdown files.
A pair is common when it is at least one in 10,000 of all pairs counted.
Prints the table in the engine's layout (one row per first letter).

    python3 tools/redact-bench/bigrams.py [REGISTRY_SRC]

REGISTRY_SRC defaults to ~/.cargo/registry/src; run `cargo fetch` first.
"""
import collections
import glob
import os
import re
import string
import sys

THRESHOLD = 1e-4


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cargo/registry/src")
    files = sorted(
        glob.glob(os.path.join(root, "*", "*", "**", "*.md"), recursive=True)
        + glob.glob(os.path.join(root, "*", "*", "src", "**", "*.rs"), recursive=True)
    )
    if not files:
        sys.exit(f"no crate sources under {root}: run `cargo fetch` first")
    count = collections.Counter()
    for path in files:
        with open(path, errors="ignore") as f:
            for line in f:
                line = line.strip()
                if not (path.endswith(".md") or line.startswith("//")):
                    continue
                for w in re.findall(r"[A-Za-z]{3,}", line):
                    w = w.lower()
                    count.update(a + b for a, b in zip(w, w[1:]))
    total = sum(count.values())
    print(f"// {len(files)} files, {total} letter pairs, threshold {THRESHOLD}")
    for a in string.ascii_lowercase:
        row = "".join(b for b in string.ascii_lowercase if count[a + b] / total >= THRESHOLD)
        print(f'    b"{row}",')


if __name__ == "__main__":
    main()
