#!/usr/bin/env python3
"""Every peer-suite negative `abcd redact` still flags, one line each, with why.

Reads a peer-suite run (`run.py --out DIR` writes DIR/per_example.jsonl), the
suites' data (for the example texts) and an `abcd` binary, and writes a
Markdown table: the example's id, the abcd rule that fired and the context
shape `abcd redact --explain` prints (never the value), a class and the
reason redacting it is right (or, where it is not, says so).

Two classes are mechanical, from the suite itself:
  * `positive`: the same text is one of the suite's positives (under a
    sibling rule, or under the same rule with a file path the harness does
    not give);
  * `secret`: the text holds a value the suite lists as a positive's secret
    (the peer's rule wants a provider word or another context before it).
Every other negative takes the reason written below for its peer rule.

    python3 tools/redact-bench/negatives.py \
        --suites ../shared/peer-suites/data --run DIR --abcd target/.../abcd \
        > tools/redact-bench/NEGATIVES.md

Measurement only: nothing in the project's tests reads the peer suites.
"""

import argparse
import collections
import json
import subprocess
import sys


def vercel_sibling(prefix):
    """Why a `vcp_` token listed under another Vercel prefix's rule is redacted."""
    return (
        "a `vcp_` token in Vercel's exact format (the prefix and 56 characters), listed as a negative "
        f"of the rule for the `{prefix}` prefix; it is a personal access token, which the suite's own "
        "`vcp_` rule takes"
    )


# Why each remaining negative (bare context) is redacted, by the peer rule
# that lists it. "wrong" marks the ones that are not right to redact, with
# what keeping them would cost.
REASONS = {
    "aws-amazon-bedrock-api-key-short-lived": "Bedrock's `bedrock-api-key-` prefix and a base64 payload decoding to `bedrock.amazonaws.co…`: the head of a live token, cut short; what is there would still leak",
    "databricks-api-token": "Databricks' `dapi` prefix under `DATABRICKS_TOKEN`; the peer objects to one non-hex byte, a typo-level difference in a value the user put under a token's name",
    "kubernetes-secret-yaml": "the `data:` entries of a SopsSecret template are base64 secret values; decoded, `word-word1` is how a passphrase looks",
    "mailchimp-api-key": "32 hex and `-us18` is Mailchimp's exact key format; the peer wants the word `mailchimp` before it, not a call's `token:` argument",
    "cisco-meraki-api-key": "a 40-hex value with one capital or a 64-hex value with a tail under a `meraki` key/token name: credential-shaped under a secret name",
    "private-key": "a `BEGIN PRIVATE KEY` line: reading bare text line by line, the redactor decides at that line, before the body (`anything`) is seen; as one JSON-escaped string (contexts b and c) the empty frame is kept",
    "sentry-org-token": "Sentry's `sntrys_` prefix with a base64 JSON payload: the live format; the peer's test values cannot be told from real ones",
    "sourcegraph-access-token": "`sgp_local_` and 40 characters: Sourcegraph's local-instance token, a credential for that instance",
    "sumologic-access-token": "a 9-byte value under `SUMO_ACCESS_KEY`: short values under a key or password name are redacted (human-chosen keys and passwords are short)",
    "telegram-bot-api-token": "the bot-token shape (`<digits>:A<35 or more>`) under `telegram_api_token`, with an id of unusual length or bytes glued after it: a real token followed by junk would leak if the whole were kept",
    "amplitude-secret-key": "31 hex under `AMPLITUDE_SECRET_KEY`: the peer wants exactly 32; a secret name's credential-shaped value",
    "apify-api-token": "Apify's `apify_api_` prefix (in capitals) under `APIFY_TOKEN`",
    "authress-service-client-access-key": "an Authress service key whose last part is base64 of an Ed25519 private key (`MC4CAQAwBQYDK2VwBCIEI…`); the peer rejects the account part, the private key is still a private key",
    "bitly-access-token": "39 hex under `bitly_token`, one byte shorter than the peer's positive",
    "brave-search-api-key": "Brave's `BSA` prefix under `BRAVE_SEARCH_API_KEY`, shorter than the peer's pattern",
    "buildkite-service-token": "Buildkite's `bkaa_` prefix under `BUILDKITE_AGENT_TOKEN`; the peer objects to the length",
    "canva-client-secret": "a `cnvca…` value under `CANVA_CLIENT_SECRET`",
    "clickup-personal-api-token": "ClickUp's `pk_<user id>_<32>` format with a shorter user id, under `CLICKUP_API_TOKEN`",
    "cloudinary-api-secret": "**wrong**: an alphabet run under `CLOUDINARY_API_SECRET` is a placeholder. `provider-named` accepts sequential-looking values because kingfisher writes its positives that way (`abcdefghij` is in 151 of the kingfisher positives abcd catches); treating it as a placeholder mark would take recall under 90 %",
    "deepgram-api-key": "32 hex under `deepgram_key` (the peer wants 40)",
    "endorlabs-api-key": "Endor Labs' `endr-` prefix and 16 characters under `endorlabs_api_key`",
    "endorlabs-api-secret": "Endor Labs' `endr-` prefix and 16 characters under `endorlabs_api_secret`",
    "ebay-client-secret": "an eBay sandbox client secret (`SBX-…`) under `EBAY_CLIENT_SECRET`: it opens the sandbox app",
    "exoscale-api-key": "**wrong**: `EXA` and a keyboard sequence under `exoscale_api_key` is a placeholder; `abc123def` is in 10 of kingfisher's caught positives (see `cloudinary-api-secret`)",
    "canadian-digital-service-notify-api-key": "GC Notify's `gcntfy-<name>-<uuid>-<uuid>` key format; the peer objects to the key's name `my_test_key`",
    "gitea-access-token": "32 hex under `GITEA_TOKEN` (the peer wants 40)",
    "greptile-api-key": "24 characters under `greptile_api_key`",
    "infomaniak-api-token": "12 characters under `infomaniak_token`",
    "kimi-api-key": "an `sk-` key under `api_key` / `kimi_api_key`: the format of several providers' keys, at lengths the peer's Kimi rule does not take",
    "mercury-production-api-token": "a Mercury sandbox token under `MERCURY_API_TOKEN`: it opens the sandbox account",
    "midtrans-production-server-client-key": "**debatable**: a Midtrans sandbox client key under `MIDTRANS_CLIENT_KEY`; client keys are used in browsers, but the rule cannot tell a client key's name from a server key's reliably",
    "mistral-api-key": "28 characters under `mistral_token` (the peer wants 32)",
    "minimax-api-key": "`sk-api-…` / `sk-…` under `minimax_api_key`",
    "nvidia-api-key": "NVIDIA's `nvkey-` prefix and 64 characters",
    "ollama-api-key": "32 hex (and a tail) after `ollama key`",
    "openweather-api-key": "**wrong**: `abcdef1234567890` under `OPENWEATHER_API_KEY` is a placeholder; `abcdef1234` is in 179 of kingfisher's caught positives and 3 of betterleaks', so it is not a placeholder mark",
    "paddle-live-api-key": "Paddle's sandbox key (`pdl_sdbx_apikey_…`) under `PADDLE_API_KEY`: it opens the sandbox account",
    "posthog-project-api-key": "PostHog's `phc_` format at a length the peer's rule does not take; project keys are meant for browsers, but `phc_` values are also pasted as personal keys",
    "plivo-auth-token": "40 URL-safe characters under `AUTH_TOKEN`",
    "rainforest-pay-production-api-key": "`sbx_apikey_` / `apikey_` and 64 hex under an API key name: Rainforest's sandbox and unprefixed keys",
    "runpod-api-key.1": "RunPod's `rpa_` prefix under `REDIRECT_PIZZA_TOKEN`",
    "scaleway-secret-key": "a UUID-shaped value one digit short under `scw_token`; sequential digits are not a placeholder mark (peers' positives use them)",
    "segment-public-api-token.1": "Sourcegraph's legacy `sgp_` + 40 hex under `SOURCEGRAPH_TOKEN`",
    "supabase-project-api-key": "Supabase's `sb_secret_` secret-key format",
    "slack-session-cookie": "Slack's `xoxd-` session cookie format in a code comment",
    "checkout-secret-key": "`sk_` and a UUID-like body under `CHECKOUT_SECRET_KEY`",
    "stability-ai-api-key": "`sk-` and 36 characters under `stability_key`",
    "tailscale-api-key.1": "Tailscale's `tskey-auth-` format under `TAILSCALE_AUTH_KEY`",
    "temporal-cloud-api-key.1": "a signed JWT under `TEMPORAL_API_KEY`: a bearer credential whoever issued it",
    "unkey-root-key.1": "Unkey's `key_` prefix and 12 characters under `UNKEY_API_KEY`",
    "upcloud-api-token": "UpCloud's `ucat_` / `uca_` prefixes under `upcloud_token`",
    "vercel-api-token": "18 characters under `vercel_key`",
    "vercel-ai-gateway-key": vercel_sibling("vck_"),
    "vercel-app-refresh-token": vercel_sibling("vcr_"),
    "vercel-integration-token": vercel_sibling("vci_"),
    "weatherstack-api-key.1": "**wrong**: `abcdef0123456789…` under `API_KEY` is a placeholder; `abcdef0123` is in 37 of kingfisher's caught positives (see `openweather-api-key`)",
    "weights-and-biases-api-key": "32 hex under `wandb_api_key` (the peer wants 40)",
}

CLASSES = {
    "positive": "the same text is one of this suite's positives: under a sibling rule (Cloudflare's three key types list each other's values) or under the same rule with a file path the harness does not give",
    "secret": "the text holds a value this suite lists as a positive's secret (the peer wants a provider word or another context before it)",
}


def load(path):
    d = json.load(open(path))
    return d["examples"] if isinstance(d, dict) and "examples" in d else d


def explain(abcd, text):
    r = subprocess.run(
        [abcd, "redact", "--explain"],
        input=text.encode(),
        capture_output=True,
        check=False,
    )
    # 0: nothing found, 1: findings; anything else is a failure.
    if r.returncode not in (0, 1):
        sys.exit(f"abcd redact --explain failed ({r.returncode}): {r.stderr.decode()}")
    rows = []
    for line in r.stdout.decode().splitlines():
        # `line N bytes A..B rule R kind K context C`
        if not line.startswith("line ") or " rule " not in line:
            continue
        rule = line.split(" rule ", 1)[1].split(" ", 1)[0]
        ctx = line.split(" context ", 1)[1] if " context " in line else ""
        rows.append((rule, ctx))
    return rows


def cell(s):
    return s.replace("|", "\\|").replace("\n", "⏎")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", required=True, help="the peer suites' data directory")
    ap.add_argument("--run", required=True, help="a run.py --out directory")
    ap.add_argument("--abcd", required=True, help="the abcd binary that made the run")
    a = ap.parse_args()

    flagged = {}
    ran = set()
    for line in open(f"{a.run}/per_example.jsonl"):
        p = json.loads(line)
        ran.add(p["id"])
        if p["label"] == "negative" and p.get("abcd/a"):
            flagged[p["id"]] = p

    out = ["# Peer-suite negatives abcd still redacts (bare context), one line each", ""]
    out.append(
        "Written by `tools/redact-bench/negatives.py` from a `run.py` run; the "
        "context column is `abcd redact --explain`'s shape (letters `a`/`A`, "
        "digits `9`, the value as `«N bytes»`), never the value."
    )
    out.append("")
    missing = []
    summary = []
    for suite in ["gitleaks", "betterleaks", "kingfisher"]:
        ex = load(f"{a.suites}/{suite}.json")
        pos_texts = set()
        pos_secrets = set()
        for e in ex:
            if e["label"] == "positive":
                pos_texts.add(e["text"].strip())
                pos_secrets.update(s for s in e["secrets"] if len(s) >= 8)
        # The run's own denominator: the harness leaves out negatives it
        # cannot place (a binary file's example).
        negatives = [e for e in ex if e["label"] == "negative" and e["id"] in ran]
        rows = []
        counts = collections.Counter()
        for e in negatives:
            if e["id"] not in flagged:
                continue
            if e["text"].strip() in pos_texts:
                cls, why = "positive", CLASSES["positive"]
            elif any(s in e["text"] for s in pos_secrets):
                cls, why = "secret", CLASSES["secret"]
            else:
                cls = "other"
                why = REASONS.get(e["rule_id"])
                if why is None:
                    missing.append(e["id"])
                    why = "(no reason written)"
            counts[cls] += 1
            fired = explain(a.abcd, e["text"])
            rules = ", ".join(sorted({r for r, _ in fired})) or "(none in bare text)"
            ctx = "; ".join(c for _, c in fired[:2])
            rows.append(f"| `{e['id']}` | {rules} | `{cell(ctx)}` | {cls} | {cell(why)} |")
        n = len(negatives)
        other = counts["other"]
        summary.append(
            f"| {suite} | {len(rows)} of {n} ({100 * len(rows) / n:.1f} %) | "
            f"{counts['positive']} | {counts['secret']} | {other} of {n} ({100 * other / n:.1f} %) |"
        )
        out.append(f"## {suite}: {len(rows)} of {n} negatives flagged")
        out.append("")
        if rows:
            out.append("| example | abcd rule | context | class | why |")
            out.append("|---|---|---|---|---|")
            out.extend(rows)
        else:
            out.append("None.")
        out.append("")
    out[4:4] = [
        "| suite | flagged | same text is a positive | holds a positive's secret | other |",
        "|---|---:|---:|---:|---:|",
        *summary,
        "",
    ]
    print("\n".join(out))
    if missing:
        sys.exit("no reason written for: " + ", ".join(missing))


if __name__ == "__main__":
    main()
