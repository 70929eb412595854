//! Per-repository redaction configuration: `<repo_root>/.abcd/redact.json`.
//!
//! ```json
//! {
//!   "version": 1,
//!   "rules": [
//!     { "id": "acme-token", "kind": "acme-token", "pattern": "acme_[a-z0-9]{32}",
//!       "keywords": ["acme_"], "severity": "block" }
//!   ],
//!   "allow_values": ["not-a-secret-build-id-1234"],
//!   "allow_paths": ["/home/ci-shared"],
//!   "severity": { "hostname": "block" }
//! }
//! ```
//!
//! * `rules` add detectors (regex syntax of the `regex` crate; `keywords`
//!   gate the regex like the built-ins do — without keywords it runs on every
//!   line). A rule's `kind` names its placeholder: `[REDACTED:<kind>]`.
//! * `allow_values` are exact values that are not findings for the generic
//!   keyword rules, identity, network and added rules. They never silence a
//!   provider-format rule (a real token cannot be allowlisted away).
//! * `allow_paths` are path prefixes whose home-directory and host-name hits
//!   are not findings (a shared CI home, say).
//! * `severity` raises a rule (by id) or a kind to `block`. Lowering a
//!   built-in is refused.
//!
//! Owns: reading and validating that file. Must never: weaken a built-in
//! rule, or let a file it could not honour pass silently — every failure is
//! returned as a reason that makes the scanner degraded.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::rules::Severity;

/// The file is hand-written configuration; anything larger is a mistake or
/// an attack, and reading it must stay cheap on every capture.
pub const MAX_CONFIG_BYTES: u64 = 256 * 1024;
/// Each added rule runs on every triggered line; this bounds the added work.
pub const MAX_CONFIG_RULES: usize = 256;
/// Compiled-size cap per added pattern so one rule cannot cost megabytes or
/// blow up compile time.
pub const MAX_PATTERN_COMPILED_BYTES: usize = 1 << 20;
/// Kind names end up inside placeholders: short, and only `[a-z0-9-]`.
pub const MAX_KIND_LEN: usize = 40;

pub const CONFIG_RELATIVE_PATH: &str = ".abcd/redact.json";

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub version: u32,
    #[serde(default)]
    pub rules: Vec<ConfigRule>,
    #[serde(default)]
    pub allow_values: Vec<String>,
    #[serde(default)]
    pub allow_paths: Vec<String>,
    #[serde(default)]
    pub severity: BTreeMap<String, String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ConfigRule {
    pub id: String,
    pub kind: String,
    pub pattern: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub severity: Option<String>,
}

pub fn parse_severity(s: &str) -> Result<Severity, String> {
    match s {
        "block" => Ok(Severity::Block),
        "warn" => Ok(Severity::Warn),
        other => Err(format!(
            "unknown severity {other:?} (expected \"block\" or \"warn\")"
        )),
    }
}

pub fn valid_kind(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= MAX_KIND_LEN
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Loads the repository's configuration. `Ok(None)` when there is none.
pub fn load(repo_root: &Path) -> Result<Option<Config>, String> {
    let path = repo_root.join(CONFIG_RELATIVE_PATH);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot stat: {e}", path.display())),
    };
    if !meta.file_type().is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: {} bytes, over the {MAX_CONFIG_BYTES}-byte cap",
            path.display(),
            meta.len()
        ));
    }
    let mut buf = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut buf))
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if buf.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: grew past the {MAX_CONFIG_BYTES}-byte cap",
            path.display()
        ));
    }
    let cfg: Config = serde_json::from_slice(&buf)
        .map_err(|e| format!("{}: invalid configuration: {e}", path.display()))?;
    if cfg.version != 1 {
        return Err(format!(
            "{}: unsupported version {} (expected 1)",
            path.display(),
            cfg.version
        ));
    }
    if cfg.rules.len() > MAX_CONFIG_RULES {
        return Err(format!(
            "{}: {} rules, over the cap of {MAX_CONFIG_RULES}",
            path.display(),
            cfg.rules.len()
        ));
    }
    for r in &cfg.rules {
        if !valid_kind(&r.kind) || !valid_kind(&r.id) {
            return Err(format!(
                "{}: rule {:?}: id and kind must be 1-{MAX_KIND_LEN} chars of [a-z0-9-]",
                path.display(),
                r.id
            ));
        }
        if let Some(s) = &r.severity {
            parse_severity(s).map_err(|e| format!("{}: rule {:?}: {e}", path.display(), r.id))?;
        }
    }
    Ok(Some(cfg))
}
