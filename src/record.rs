//! The record file format: frontmatter fenced by `---` lines, then the
//! redacted body.
//!
//! Owns: the frontmatter keys and their fixed write order, rendering a
//! record to bytes, parsing one back (every schema version), the record file
//! name, and the label rules for `source_kind` / `source_tool`.
//!
//! Must never: redact (bodies and scalars arrive already redacted), touch the
//! file system, parse a file name back into fields (names are a convenience;
//! frontmatter is the truth), or depend on a YAML library — the format is a
//! strict subset that is parsed byte-exactly.

use thiserror::Error;

use crate::clock::{parse_rfc3339, rfc3339_nanos, stamp};
use crate::lineage::{
    check_scalar, is_stored_id, Lineage, LineageError, LineageSource, SpawnAttribution,
};
use crate::store::validate_root_sha;

/// Schema a first-generation record carries: the nine base keys only.
pub const SCHEMA_LEGACY: u32 = 1;
/// Schema with the lineage keys; what this build writes.
pub const SCHEMA_LINEAGE: u32 = 2;
/// Schema with `adopted_project` (ingest adoption).
pub const SCHEMA_ADOPTED: u32 = 3;

/// Route of a capture from the harness abcd runs in.
pub const KIND_NATIVE: &str = "native";
/// Route of a capture converted from another tool's export.
pub const KIND_IMPORT: &str = "import";
/// The tool label meaning "the harness abcd runs in".
pub const TOOL_HOST: &str = "host";
/// Longest tool label; labels are short slugs such as `specstory`.
const MAX_TOOL_BYTES: usize = 64;

const OPEN_FENCE: &[u8] = b"---\n";
const CLOSE_FENCE: &[u8] = b"\n---\n";

/// Why a record could not be parsed or is not fit to be written.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("the record does not start with a `---` frontmatter fence")]
    NoFrontmatter,
    #[error("the record's frontmatter has no closing `---` fence")]
    Unterminated,
    #[error("the record's frontmatter is not UTF-8")]
    NotUtf8,
    #[error("the record's frontmatter has no `{key}` key")]
    MissingKey { key: &'static str },
    #[error("the record's `{key}` value {value:?} is malformed: {why}")]
    BadField {
        key: &'static str,
        value: String,
        why: String,
    },
    #[error("the record's lineage is invalid: {0}")]
    Lineage(#[from] LineageError),
}

fn bad(key: &'static str, value: &str, why: impl Into<String>) -> RecordError {
    RecordError::BadField {
        key,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Every frontmatter field of a record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordMeta {
    pub schema: u32,
    pub root_commit: String,
    /// Capture time; 0 when an old record had no `captured_at`.
    pub captured_at_ns: u64,
    /// `native` or `import`.
    pub source_kind: String,
    pub source_tool: Option<String>,
    /// SHA-256 (hex) of the raw source bytes, before redaction.
    pub source_sha256: String,
    pub redacted_secrets: u64,
    pub redacted_home_paths: u64,
    #[serde(flatten)]
    pub lineage: Lineage,
    pub adopted_project: Option<String>,
    pub context_stamps: Vec<String>,
    /// The part's number (1-based) when a transcript over `RAW_CAP` was
    /// stored as a run of records (`bigfile`): its live parts, joined in
    /// this order, are the transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<u32>,
}

impl RecordMeta {
    /// A schema-2 native record for `lineage`, counters zero.
    pub fn native(
        lineage: &Lineage,
        root_commit: &str,
        captured_at_ns: u64,
        source_sha256: &str,
    ) -> Self {
        RecordMeta {
            schema: SCHEMA_LINEAGE,
            root_commit: root_commit.to_string(),
            captured_at_ns,
            source_kind: KIND_NATIVE.to_string(),
            source_tool: None,
            source_sha256: source_sha256.to_string(),
            redacted_secrets: 0,
            redacted_home_paths: 0,
            lineage: lineage.clone(),
            adopted_project: None,
            context_stamps: Vec::new(),
            part: None,
        }
    }

    pub fn is_main_thread(&self) -> bool {
        self.lineage.agent_id.is_none()
    }

    /// Checks everything a record must satisfy before it is written: the
    /// lineage rules, the root SHA and source hash shapes, the labels, and
    /// that no scalar can break out of its frontmatter line.
    pub fn validate(&self) -> Result<(), RecordError> {
        self.lineage.validate()?;
        validate_root_sha(&self.root_commit)
            .map_err(|e| bad("root_commit", &self.root_commit, e.to_string()))?;
        if !is_sha256_hex(&self.source_sha256) {
            return Err(bad(
                "source_sha256",
                &self.source_sha256,
                "expected 64 lowercase hex characters",
            ));
        }
        check_scalar("adopted_project", self.adopted_project.as_deref())?;
        validate_labels(&self.source_kind, self.source_tool.as_deref())?;
        for s in &self.context_stamps {
            if s.is_empty() || s.contains([',', '\r', '\n']) {
                return Err(bad(
                    "context_stamps",
                    s,
                    "a stamp may not be empty or hold a comma or line break",
                ));
            }
        }
        Ok(())
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_tool_slug(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_TOOL_BYTES
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

/// The two-label rule: route ∈ {native, import}; a tool is a lowercase slug
/// that is neither a route word nor a fused `*-import`; an import names its
/// tool and that tool is not `host`.
pub fn validate_labels(kind: &str, tool: Option<&str>) -> Result<(), RecordError> {
    if kind != KIND_NATIVE && kind != KIND_IMPORT {
        return Err(bad("source_kind", kind, "expected `native` or `import`"));
    }
    if let Some(t) = tool {
        if !is_tool_slug(t) {
            return Err(bad(
                "source_tool",
                t,
                "expected a lowercase slug of at most 64 characters",
            ));
        }
        if t == KIND_NATIVE || t == KIND_IMPORT || t.ends_with("-import") {
            return Err(bad(
                "source_tool",
                t,
                "a tool label may not be a route word",
            ));
        }
    }
    if kind == KIND_IMPORT {
        match tool {
            None => {
                return Err(bad(
                    "source_tool",
                    "",
                    "an import must name the tool it came from",
                ))
            }
            Some(TOOL_HOST) => {
                return Err(bad(
                    "source_tool",
                    TOOL_HOST,
                    "an import cannot come from the host harness",
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Renders a record: frontmatter in the fixed key order, then the body,
/// always newline-terminated. Callers validate first ([`RecordMeta::validate`]);
/// as a last line of defence a CR or LF inside a scalar is rendered as a
/// space, so no value can ever forge a frontmatter line.
pub fn render(meta: &RecordMeta, body: &[u8]) -> Vec<u8> {
    fn line(out: &mut Vec<u8>, key: &str, value: &str) {
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.replace(['\r', '\n'], " ").as_bytes());
        out.push(b'\n');
    }
    fn opt(out: &mut Vec<u8>, key: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            line(out, key, v);
        }
    }
    let mut out = Vec::with_capacity(body.len() + 512);
    out.extend_from_slice(OPEN_FENCE);
    line(&mut out, "schema", &meta.schema.to_string());
    line(&mut out, "session_id", &meta.lineage.session_id);
    line(&mut out, "root_commit", &meta.root_commit);
    line(&mut out, "captured_at", &rfc3339_nanos(meta.captured_at_ns));
    line(&mut out, "source_kind", &meta.source_kind);
    opt(&mut out, "source_tool", meta.source_tool.as_deref());
    line(&mut out, "source_sha256", &meta.source_sha256);
    line(
        &mut out,
        "redacted_secrets",
        &meta.redacted_secrets.to_string(),
    );
    line(
        &mut out,
        "redacted_home_paths",
        &meta.redacted_home_paths.to_string(),
    );
    opt(&mut out, "agent_id", meta.lineage.agent_id.as_deref());
    opt(
        &mut out,
        "parent_agent_id",
        meta.lineage.parent_agent_id.as_deref(),
    );
    opt(&mut out, "agent_type", meta.lineage.agent_type.as_deref());
    opt(
        &mut out,
        "spawn_tool_use_id",
        meta.lineage.spawn_tool_use_id.as_deref(),
    );
    opt(
        &mut out,
        "lineage_source",
        meta.lineage.lineage_source.map(LineageSource::as_str),
    );
    opt(
        &mut out,
        "spawn_attribution",
        meta.lineage.spawn_attribution.map(SpawnAttribution::as_str),
    );
    opt(&mut out, "adopted_project", meta.adopted_project.as_deref());
    if meta.lineage.spawn_depth > 0 {
        line(
            &mut out,
            "spawn_depth",
            &meta.lineage.spawn_depth.to_string(),
        );
    }
    if !meta.context_stamps.is_empty() {
        line(&mut out, "context_stamps", &meta.context_stamps.join(","));
    }
    if let Some(n) = meta.part {
        line(&mut out, "part", &n.to_string());
    }
    out.extend_from_slice(b"---\n");
    out.extend_from_slice(body);
    if body.last() != Some(&b'\n') {
        out.push(b'\n');
    }
    out
}

/// Splits a record into its frontmatter and body, byte-exactly: it must
/// start with `---\n` and the header ends at the first `\n---\n`.
pub fn split(bytes: &[u8]) -> Result<(&[u8], &[u8]), RecordError> {
    if !bytes.starts_with(OPEN_FENCE) {
        return Err(RecordError::NoFrontmatter);
    }
    // Search from the opening fence's newline so an empty header
    // (`---\n---\n`) is found too.
    let from = OPEN_FENCE.len() - 1;
    let at = bytes[from..]
        .windows(CLOSE_FENCE.len())
        .position(|w| w == CLOSE_FENCE)
        .ok_or(RecordError::Unterminated)?
        + from;
    let header = if at > from {
        &bytes[OPEN_FENCE.len()..at]
    } else {
        &[][..]
    };
    Ok((header, &bytes[at + CLOSE_FENCE.len()..]))
}

/// Parses a record of any schema. Keys are read by presence (the schema
/// number is informational), lines without `": "` are ignored, counters and
/// depth parse leniently (bad → 0), and `session_id`, `root_commit` and
/// `source_sha256` are required. A schema-1 record has no lineage keys and
/// so reads as a main-thread record. Reading checks shapes (ids, SHAs,
/// times, vocabularies) but not the attribution rules of
/// [`Lineage::validate`], so records written before those rules stay readable.
pub fn parse(bytes: &[u8]) -> Result<(RecordMeta, &[u8]), RecordError> {
    let (header, body) = split(bytes)?;
    let header = std::str::from_utf8(header).map_err(|_| RecordError::NotUtf8)?;
    let mut f = Fields::default();
    for l in header.split('\n') {
        let Some((k, v)) = l.split_once(": ") else {
            continue;
        };
        f.set(k, v);
    }
    let required = |v: Option<&str>, key: &'static str| {
        v.map(str::to_string).ok_or(RecordError::MissingKey { key })
    };
    let session_id = required(f.session_id, "session_id")?;
    let root_commit = required(f.root_commit, "root_commit")?;
    let source_sha256 = required(f.source_sha256, "source_sha256")?;
    for (key, v) in [
        ("session_id", Some(session_id.as_str())),
        ("agent_id", f.agent_id),
        ("parent_agent_id", f.parent_agent_id),
    ] {
        // Read back with the stored-id rule: an older abcd wrote ids up to
        // `STORED_MAX_ID_BYTES`, and those records stay readable.
        if let Some(v) = v.filter(|v| !is_stored_id(v)) {
            return Err(bad(key, v, "not a valid identifier"));
        }
    }
    validate_root_sha(&root_commit).map_err(|e| bad("root_commit", &root_commit, e.to_string()))?;
    if !is_sha256_hex(&source_sha256) {
        return Err(bad(
            "source_sha256",
            &source_sha256,
            "expected 64 lowercase hex characters",
        ));
    }
    let captured_at_ns = match f.captured_at {
        None => 0,
        Some(v) => parse_rfc3339(v).ok_or_else(|| bad("captured_at", v, "not an RFC 3339 time"))?,
    };
    let (source_kind, source_tool) = read_labels(f.source_kind, f.source_tool)?;
    let lenient = |v: Option<&str>| v.and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
    let lineage_source = match f.lineage_source {
        None => None,
        Some(v) => Some(
            LineageSource::parse(v)
                .ok_or_else(|| bad("lineage_source", v, "expected hook, ingest or migrated"))?,
        ),
    };
    let spawn_attribution = match f.spawn_attribution {
        None => None,
        Some(v) => Some(SpawnAttribution::parse(v).ok_or_else(|| {
            bad(
                "spawn_attribution",
                v,
                "expected sidecar, transcript or unattributed",
            )
        })?),
    };
    let own = |v: Option<&str>| v.map(str::to_string);
    let meta = RecordMeta {
        // An absent or unreadable schema is the oldest one.
        schema: f
            .schema
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(SCHEMA_LEGACY),
        root_commit,
        captured_at_ns,
        source_kind,
        source_tool,
        source_sha256,
        redacted_secrets: lenient(f.redacted_secrets),
        redacted_home_paths: lenient(f.redacted_home_paths),
        lineage: Lineage {
            session_id,
            agent_id: own(f.agent_id),
            parent_agent_id: own(f.parent_agent_id),
            agent_type: own(f.agent_type),
            spawn_depth: u32::try_from(lenient(f.spawn_depth)).unwrap_or(0),
            spawn_tool_use_id: own(f.spawn_tool_use_id),
            lineage_source,
            spawn_attribution,
        },
        adopted_project: own(f.adopted_project),
        context_stamps: f
            .context_stamps
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        part: match f.part {
            None => None,
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad("part", v, "expected a part number from 1"))?,
            ),
        },
    };
    Ok((meta, body))
}

/// Reads the two labels, folding the legacy fused `<tool>-import` kind into
/// route `import` plus that tool. A fused kind paired with a different tool
/// is malformed. An absent kind reads as `native` (the only route the
/// earliest binaries wrote).
fn read_labels(
    kind: Option<&str>,
    tool: Option<&str>,
) -> Result<(String, Option<String>), RecordError> {
    let kind = kind.unwrap_or(KIND_NATIVE);
    let tool = tool.filter(|t| !t.is_empty());
    let (kind, tool) = match kind.strip_suffix("-import") {
        Some(fused) if !fused.is_empty() => {
            if let Some(t) = tool.filter(|t| *t != fused) {
                return Err(bad(
                    "source_kind",
                    kind,
                    format!("fused kind names tool {fused:?} but source_tool is {t:?}; write it as kind import with tool {t}"),
                ));
            }
            (KIND_IMPORT, Some(fused))
        }
        _ => (kind, tool),
    };
    validate_labels(kind, tool)?;
    Ok((kind.to_string(), tool.map(str::to_string)))
}

/// Frontmatter values by key; the last occurrence of a key wins.
#[derive(Default)]
struct Fields<'a> {
    schema: Option<&'a str>,
    session_id: Option<&'a str>,
    root_commit: Option<&'a str>,
    captured_at: Option<&'a str>,
    source_kind: Option<&'a str>,
    source_tool: Option<&'a str>,
    source_sha256: Option<&'a str>,
    redacted_secrets: Option<&'a str>,
    redacted_home_paths: Option<&'a str>,
    agent_id: Option<&'a str>,
    parent_agent_id: Option<&'a str>,
    agent_type: Option<&'a str>,
    spawn_tool_use_id: Option<&'a str>,
    lineage_source: Option<&'a str>,
    spawn_attribution: Option<&'a str>,
    adopted_project: Option<&'a str>,
    spawn_depth: Option<&'a str>,
    context_stamps: Option<&'a str>,
    part: Option<&'a str>,
}

impl<'a> Fields<'a> {
    fn set(&mut self, key: &str, value: &'a str) {
        // Empty values mean "absent", as the writer omits empty scalars.
        let v = Some(value).filter(|v| !v.is_empty());
        let slot = match key {
            "schema" => &mut self.schema,
            "session_id" => &mut self.session_id,
            "root_commit" => &mut self.root_commit,
            "captured_at" => &mut self.captured_at,
            "source_kind" => &mut self.source_kind,
            "source_tool" => &mut self.source_tool,
            "source_sha256" => &mut self.source_sha256,
            "redacted_secrets" => &mut self.redacted_secrets,
            "redacted_home_paths" => &mut self.redacted_home_paths,
            "agent_id" => &mut self.agent_id,
            "parent_agent_id" => &mut self.parent_agent_id,
            "agent_type" => &mut self.agent_type,
            "spawn_tool_use_id" => &mut self.spawn_tool_use_id,
            "lineage_source" => &mut self.lineage_source,
            "spawn_attribution" => &mut self.spawn_attribution,
            "adopted_project" => &mut self.adopted_project,
            "spawn_depth" => &mut self.spawn_depth,
            "context_stamps" => &mut self.context_stamps,
            "part" => &mut self.part,
            _ => return,
        };
        *slot = v;
    }
}

/// Keys [`relineage`] writes (and removes when an older record carries
/// one without an `agent_id`): the lineage keys, in [`render`]'s order.
const LINEAGE_KEYS: [&str; 7] = [
    "agent_id",
    "parent_agent_id",
    "agent_type",
    "spawn_tool_use_id",
    "lineage_source",
    "spawn_attribution",
    "spawn_depth",
];

/// Rewrites a stored record's lineage in place, byte-exactly (the
/// composite-id repair, `history migrate`). Exactly these bytes change:
/// - the `schema:` line becomes `schema: 2` when it was lower (a record with
///   lineage keys is schema 2); a higher schema is kept;
/// - the `session_id:` value becomes `lineage.session_id`;
/// - any lineage-key line the header already had is removed, and the new
///   lineage lines (non-empty ones, in [`render`]'s order, `spawn_depth`
///   only when > 0) are inserted right after the `redacted_home_paths:`
///   line (at the end of the header when there is none).
///
/// Every other header line keeps its bytes and place (`captured_at` keeps
/// its spelling, `source_sha256` its value, unknown keys stay), and every
/// byte from the closing fence on — the body — is unchanged. The caller
/// redacted the scalars and validates the lineage; the result is parsed
/// back and checked field by field before it is returned.
pub fn relineage(bytes: &[u8], lineage: &Lineage) -> Result<Vec<u8>, RecordError> {
    let (old, _) = parse(bytes)?;
    let (header, body) = split(bytes)?;
    let header = std::str::from_utf8(header).map_err(|_| RecordError::NotUtf8)?;
    for (k, v) in [
        ("session_id", Some(lineage.session_id.as_str())),
        ("agent_id", lineage.agent_id.as_deref()),
        ("parent_agent_id", lineage.parent_agent_id.as_deref()),
        ("agent_type", lineage.agent_type.as_deref()),
        ("spawn_tool_use_id", lineage.spawn_tool_use_id.as_deref()),
    ] {
        check_scalar(k, v)?;
    }
    let mut block: Vec<String> = Vec::new();
    let mut push = |k: &str, v: Option<&str>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            block.push(format!("{k}: {v}"));
        }
    };
    push("agent_id", lineage.agent_id.as_deref());
    push("parent_agent_id", lineage.parent_agent_id.as_deref());
    push("agent_type", lineage.agent_type.as_deref());
    push("spawn_tool_use_id", lineage.spawn_tool_use_id.as_deref());
    push(
        "lineage_source",
        lineage.lineage_source.map(LineageSource::as_str),
    );
    push(
        "spawn_attribution",
        lineage.spawn_attribution.map(SpawnAttribution::as_str),
    );
    if lineage.spawn_depth > 0 {
        block.push(format!("spawn_depth: {}", lineage.spawn_depth));
    }
    let mut lines: Vec<String> = Vec::new();
    let mut placed = false;
    for l in header.split('\n') {
        let key = l.split_once(": ").map(|(k, _)| k);
        match key {
            Some("schema") => {
                let n: u32 = l["schema: ".len()..]
                    .trim()
                    .parse()
                    .unwrap_or(SCHEMA_LEGACY);
                if n < SCHEMA_LINEAGE {
                    lines.push(format!("schema: {SCHEMA_LINEAGE}"));
                } else {
                    lines.push(l.to_string());
                }
            }
            Some("session_id") => lines.push(format!("session_id: {}", lineage.session_id)),
            Some(k) if LINEAGE_KEYS.contains(&k) => {}
            Some("redacted_home_paths") if !placed => {
                lines.push(l.to_string());
                lines.append(&mut block);
                placed = true;
            }
            _ => lines.push(l.to_string()),
        }
    }
    if !placed {
        lines.append(&mut block);
    }
    let mut out = Vec::with_capacity(bytes.len() + 256);
    out.extend_from_slice(OPEN_FENCE);
    out.extend_from_slice(lines.join("\n").as_bytes());
    out.extend_from_slice(CLOSE_FENCE);
    out.extend_from_slice(body);
    // The proof: the same record with only its lineage (and schema) changed.
    let (new, new_body) = parse(&out)?;
    let mut expect = old.clone();
    expect.lineage = lineage.clone();
    expect.schema = new.schema;
    if new != expect || new_body != body {
        return Err(bad(
            "session_id",
            &old.lineage.session_id,
            "rewriting the lineage would change more than the lineage",
        ));
    }
    Ok(out)
}

/// `<stamp>-<session>.md` for a main thread, `<stamp>-<session>-agent-<agent>.md`
/// for a sub-agent, shortened by [`crate::naming::record_name`] when over
/// its bound (two long ids). A convenience for people; nothing parses it back.
pub fn record_filename(captured_at_ns: u64, session_id: &str, agent_id: Option<&str>) -> String {
    let full = match agent_id {
        Some(a) => format!("{}-{session_id}-agent-{a}.md", stamp(captured_at_ns)),
        None => format!("{}-{session_id}.md", stamp(captured_at_ns)),
    };
    crate::naming::record_name(&full).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ROOT: &str = "0123456789abcdef0123456789abcdef01234567";
    const SRC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    const T: u64 = 1_788_935_062_051_000_000;

    fn subagent_meta() -> RecordMeta {
        let l = Lineage {
            session_id: "8d1a1f9e-b38c-41fa-952a-5288179b5626".into(),
            agent_id: Some("a490235204f1c154d".into()),
            parent_agent_id: Some("a111".into()),
            agent_type: Some("Explore".into()),
            spawn_depth: 2,
            spawn_tool_use_id: Some("toolu_017eBSEutdVBmDn3sGEVdECP".into()),
            lineage_source: Some(LineageSource::Hook),
            spawn_attribution: Some(SpawnAttribution::Sidecar),
        };
        let mut m = RecordMeta::native(&l, ROOT, T, SRC);
        m.redacted_secrets = 3;
        m.redacted_home_paths = 7;
        m
    }

    #[test]
    fn relineage_changes_only_schema_session_and_the_lineage_lines() {
        let old = format!(
            "---\nschema: 1\nsession_id: 8d1a1f9e--wf_x--agent-a49\nroot_commit: {ROOT}\ncaptured_at: 2026-09-09T06:24:22.05Z\nsource_kind: native\nsource_sha256: {SRC}\nredacted_secrets: 2\nredacted_home_paths: 1\nunknown_key: kept\n---\n{{\"a\":1}}\n---\nno newline at end"
        );
        let mut l = subagent_meta().lineage;
        l.lineage_source = Some(LineageSource::Migrated);
        let new = relineage(old.as_bytes(), &l).unwrap();
        let want = format!(
            "---\nschema: 2\nsession_id: 8d1a1f9e-b38c-41fa-952a-5288179b5626\nroot_commit: {ROOT}\ncaptured_at: 2026-09-09T06:24:22.05Z\nsource_kind: native\nsource_sha256: {SRC}\nredacted_secrets: 2\nredacted_home_paths: 1\nagent_id: a490235204f1c154d\nparent_agent_id: a111\nagent_type: Explore\nspawn_tool_use_id: toolu_017eBSEutdVBmDn3sGEVdECP\nlineage_source: migrated\nspawn_attribution: sidecar\nspawn_depth: 2\nunknown_key: kept\n---\n{{\"a\":1}}\n---\nno newline at end"
        );
        assert_eq!(String::from_utf8(new.clone()).unwrap(), want);
        // Idempotent on its own output (stale lineage lines are replaced).
        assert_eq!(relineage(&new, &l).unwrap(), new);
        // A scalar that would forge a frontmatter line is refused.
        l.agent_type = Some("x\nsession_id: evil".into());
        assert!(relineage(old.as_bytes(), &l).is_err());
    }

    // Seed: TestLineageRoundTripsThroughTheRecord.
    #[test]
    fn lineage_round_trips_through_the_record() {
        let m = subagent_meta();
        m.validate().unwrap();
        let bytes = render(&m, b"{\"a\":1}\n{\"b\":2}");
        let (back, body) = parse(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.lineage, m.lineage);
        assert_eq!(body, b"{\"a\":1}\n{\"b\":2}\n");
        let text = String::from_utf8(bytes).unwrap();
        let expected_head = "---\nschema: 2\nsession_id: 8d1a1f9e-b38c-41fa-952a-5288179b5626\n\
            root_commit: 0123456789abcdef0123456789abcdef01234567\n\
            captured_at: 2026-09-09T06:24:22.051000000Z\nsource_kind: native\n\
            source_sha256: ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n\
            redacted_secrets: 3\nredacted_home_paths: 7\nagent_id: a490235204f1c154d\n\
            parent_agent_id: a111\nagent_type: Explore\n\
            spawn_tool_use_id: toolu_017eBSEutdVBmDn3sGEVdECP\nlineage_source: hook\n\
            spawn_attribution: sidecar\nspawn_depth: 2\n---\n";
        assert!(text.starts_with(expected_head), "{text}");
    }

    #[test]
    fn main_thread_schema_two_matches_schema_one_but_for_the_stamp() {
        let l = Lineage {
            session_id: "s1".into(),
            ..Lineage::default()
        };
        let m = RecordMeta::native(&l, ROOT, T, SRC);
        let two = String::from_utf8(render(&m, b"x\n")).unwrap();
        let one = String::from_utf8(render(&RecordMeta { schema: 1, ..m }, b"x\n")).unwrap();
        assert_eq!(two.replacen("schema: 2", "schema: 1", 1), one);
    }

    // Seed: TestSchemaOneRecordReadsAsMainThread.
    #[test]
    fn schema_one_record_reads_as_main_thread() {
        let legacy = format!(
            "---\nschema: 1\nsession_id: 5a9221e2--agent-acf07c33\nroot_commit: {ROOT}\n\
             captured_at: 2026-09-09T06:24:22.051Z\nsource_kind: specstory-import\n\
             source_sha256: {SRC}\nredacted_secrets: lots\nredacted_home_paths: 2\n---\nbody"
        );
        let (m, body) = parse(legacy.as_bytes()).unwrap();
        assert_eq!(m.schema, 1);
        assert!(m.is_main_thread());
        assert_eq!(m.lineage.spawn_attribution, None);
        assert_eq!(m.lineage.session_id, "5a9221e2--agent-acf07c33");
        assert_eq!(m.captured_at_ns, T);
        assert_eq!(
            (m.source_kind.as_str(), m.source_tool.as_deref()),
            ("import", Some("specstory"))
        );
        assert_eq!(m.redacted_secrets, 0, "lenient counter");
        assert_eq!(m.redacted_home_paths, 2);
        assert_eq!(body, b"body");
        // No schema key at all reads as schema 1 too.
        let bare = format!("---\nsession_id: s\nroot_commit: {ROOT}\nsource_sha256: {SRC}\n---\n");
        let (m, body) = parse(bare.as_bytes()).unwrap();
        assert_eq!(
            (m.schema, m.captured_at_ns, m.source_kind.as_str()),
            (1, 0, "native")
        );
        assert!(body.is_empty());
    }

    // Seed: TestSubagentRecordFilenameNamesTheAgent.
    #[test]
    fn subagent_record_filename_names_the_agent() {
        assert_eq!(
            record_filename(T, "sess", None),
            "20260909T062422.051000000Z-sess.md"
        );
        assert_eq!(
            record_filename(T, "sess", Some("ag1")),
            "20260909T062422.051000000Z-sess-agent-ag1.md"
        );
        // Two long ids: bounded, still readable at the front, still `.md`.
        let long = record_filename(T, &"s".repeat(128), Some(&"a".repeat(128)));
        assert!(long.len() <= crate::naming::MAX_NAME_BYTES, "{long}");
        assert!(long.starts_with("20260909T062422.051000000Z-sss") && long.ends_with(".md"));
    }

    #[test]
    fn parse_refuses_broken_records() {
        let ok = String::from_utf8(render(&subagent_meta(), b"b")).unwrap();
        assert!(matches!(
            parse(b"schema: 1\n"),
            Err(RecordError::NoFrontmatter)
        ));
        assert!(matches!(
            parse(b"---\nsession_id: s\n--\n"),
            Err(RecordError::Unterminated)
        ));
        assert!(matches!(
            parse(b"---\n---\n"),
            Err(RecordError::MissingKey { key: "session_id" })
        ));
        for (from, to, key) in [
            ("root_commit: 0123", "root_commit: 0123X", "root_commit"),
            ("captured_at: 2026", "captured_at: x2026", "captured_at"),
            (
                "lineage_source: hook",
                "lineage_source: hooked",
                "lineage_source",
            ),
            (
                "spawn_attribution: sidecar",
                "spawn_attribution: guess",
                "spawn_attribution",
            ),
            ("agent_id: a49", "agent_id: ../a49", "agent_id"),
            (
                "source_kind: native",
                "source_kind: cursor-import\nsource_tool: specstory",
                "source_kind",
            ),
            ("source_kind: native", "source_kind: import", "source_tool"),
        ] {
            let broken = ok.replacen(from, to, 1);
            assert_ne!(broken, ok, "{from}");
            match parse(broken.as_bytes()) {
                Err(RecordError::BadField { key: k, .. }) => assert_eq!(k, key, "{from}"),
                other => panic!("{from}: {other:?}"),
            }
        }
        let err = parse(
            ok.replacen(
                "source_kind: native",
                "source_kind: specstory-import\nsource_tool: cursor",
                1,
            )
            .as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("kind import with tool cursor"), "{err}");
    }

    #[test]
    fn header_ends_at_the_first_fence_and_lines_without_separator_are_ignored() {
        let rec = format!(
            "---\nnoise line\n\nsession_id: s\nroot_commit: {ROOT}\nsource_sha256: {SRC}\nunknown: x\n---\n---\nmore\n---\n"
        );
        let (m, body) = parse(rec.as_bytes()).unwrap();
        assert_eq!(m.lineage.session_id, "s");
        assert_eq!(body, b"---\nmore\n---\n");
    }

    #[test]
    fn validate_catches_what_render_must_not_write() {
        let mut m = subagent_meta();
        m.lineage.agent_type = Some("x\nsession_id: forged".into());
        assert!(matches!(m.validate(), Err(RecordError::Lineage(_))));
        let mut m = subagent_meta();
        m.source_tool = Some("host".into());
        m.validate().unwrap();
        m.source_kind = "import".into();
        assert!(m.validate().is_err());
        let mut m = subagent_meta();
        m.context_stamps = vec!["a,b".into()];
        assert!(m.validate().is_err());
        let mut m = subagent_meta();
        m.source_sha256 = "abc".into();
        assert!(m.validate().is_err());
        // Even unvalidated, render cannot forge a line.
        let mut m = subagent_meta();
        m.adopted_project = Some("p\nagent_id: forged".into());
        let (back, _) = parse(&render(&m, b"")).unwrap();
        assert_eq!(back.lineage.agent_id, subagent_meta().lineage.agent_id);
        assert_eq!(back.adopted_project.as_deref(), Some("p agent_id: forged"));
    }

    #[test]
    fn context_stamps_and_adopted_project_round_trip() {
        let mut m = subagent_meta();
        m.schema = SCHEMA_ADOPTED;
        m.adopted_project = Some("old project".into());
        m.context_stamps = vec!["itd-1".into(), "spc-2".into()];
        m.source_kind = KIND_IMPORT.into();
        m.source_tool = Some("cursor".into());
        m.validate().unwrap();
        let (back, _) = parse(&render(&m, b"")).unwrap();
        assert_eq!(back, m);
    }

    proptest! {
        #[test]
        fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut with_fence = b"---\n".to_vec();
            with_fence.extend_from_slice(&bytes);
            let _ = parse(&bytes);
            let _ = parse(&with_fence);
        }

        #[test]
        fn render_parse_round_trips(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            depth in 0u32..5,
            agent in proptest::option::of("[A-Za-z0-9._-]{1,20}"),
            agent_type in proptest::option::of("[^\r\n]{1,30}"),
            secrets in any::<u64>(),
            ns in 0u64..4_000_000_000_000_000_000,
        ) {
            let mut l = Lineage { session_id: "s".into(), agent_id: agent.clone(), agent_type, ..Lineage::default() };
            if agent.is_some() {
                l.spawn_attribution = Some(SpawnAttribution::Sidecar);
                l.spawn_depth = depth;
            }
            prop_assume!(l.validate().is_ok());
            let mut m = RecordMeta::native(&l, ROOT, ns, SRC);
            m.redacted_secrets = secrets;
            let bytes = render(&m, &body);
            let (back, got) = parse(&bytes).unwrap();
            prop_assert_eq!(back, m);
            let mut want = body.clone();
            if want.last() != Some(&b'\n') { want.push(b'\n'); }
            prop_assert_eq!(got, &want[..]);
        }
    }
}
