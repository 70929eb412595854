//! Generator of predecessor stores (the Go `abcd`), written from its format
//! notes: schema-1 records (the nine base keys, `captured_at` in Go's
//! trimmed-nanosecond spelling, `0644`), sub-agent records filed under a
//! composite session id (`<prefix>--agent-<id>`, and for workflow-launched
//! agents `<prefix>--wf_<run>--agent-<id>`), the harness's
//! `agent-<id>.meta.json` sidecars beside the transcripts, staged
//! `.raw` + `.stage.json` pairs and quarantine notes.
//!
//! The default corpus is the real distribution seen on the author's
//! machine: 176 composite records, 71 of them workflow-launched.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub const COMPOSITES: usize = 176;
pub const WORKFLOW: usize = 71;
/// Parent sessions the composites are spread over.
pub const SESSIONS: usize = 12;

/// One generated composite record.
#[derive(Debug, Clone)]
pub struct Composite {
    pub file: String,
    pub stored_session_id: String,
    pub session_id: String,
    pub agent_id: String,
    pub workflow: Option<String>,
    /// Whether a usable harness sidecar was written for it.
    pub sidecar: bool,
    pub bytes: Vec<u8>,
}

pub fn session_uuid(i: usize) -> String {
    let h = hex(&format!("session {i}"));
    format!(
        "{}-{}-4{}-8{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..15],
        &h[15..18],
        &h[18..30]
    )
}

pub fn agent_id(i: usize) -> String {
    format!("a{}", &hex(&format!("agent {i}"))[..16])
}

pub fn hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Go's `2006-01-02T15:04:05.999999999Z07:00`: trailing zeros of the
/// fraction trimmed, no fraction at all when it is zero.
pub fn go_time(secs_of_day: u64, nanos: u32) -> (String, String) {
    let (h, m, s) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
    let frac = format!("{nanos:09}");
    let trimmed = frac.trim_end_matches('0');
    let rfc = if trimmed.is_empty() {
        format!("2026-08-14T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("2026-08-14T{h:02}:{m:02}:{s:02}.{trimmed}Z")
    };
    let stamp = format!("20260814T{h:02}{m:02}{s:02}.{frac}Z");
    (rfc, stamp)
}

/// A sub-agent transcript body as the harness wrote it (every line names
/// the spawning session in `sessionId`).
pub fn agent_body(session: &str, agent: &str, i: usize) -> String {
    let mut s = String::new();
    let user = serde_json::json!({
        "parentUuid": null, "isSidechain": true, "userType": "external",
        "cwd": "/work/project", "sessionId": session, "version": "1.0.51",
        "agentId": agent, "type": "user",
        "message": {"role": "user", "content": format!("Investigate part {i} of the build")},
        "uuid": format!("u-{i}"), "timestamp": "2026-08-14T10:00:00.000Z"
    });
    let asst = serde_json::json!({
        "parentUuid": format!("u-{i}"), "isSidechain": true, "userType": "external",
        "cwd": "/work/project", "sessionId": session, "version": "1.0.51",
        "agentId": agent, "type": "assistant",
        "message": {"id": format!("msg_{i}"), "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": format!("Part {i} looks fine.")}],
            "usage": {"input_tokens": 10 + i, "output_tokens": 5}},
        "uuid": format!("a-{i}"), "timestamp": "2026-08-14T10:00:01.000Z"
    });
    s.push_str(&user.to_string());
    s.push('\n');
    s.push_str(&asst.to_string());
    s.push('\n');
    s
}

/// A schema-1 record as the predecessor wrote it.
pub fn schema1_record(session_id: &str, root_sha: &str, captured_at: &str, body: &str) -> Vec<u8> {
    format!(
        "---\nschema: 1\nsession_id: {session_id}\nroot_commit: {root_sha}\ncaptured_at: {captured_at}\nsource_kind: native\nsource_sha256: {}\nredacted_secrets: 0\nredacted_home_paths: 0\n---\n{body}",
        hex(body)
    )
    .into_bytes()
}

fn write_0644(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}

/// Writes the composite corpus into `records_dir` (created), with the
/// harness sidecars under `projects` (a `~/.claude/projects` stand-in)
/// when given: every agent but each fifth has one; workflow agents'
/// sidecars sit under `subagents/workflows/wf_<run>/`. Returns what was
/// written, in file-name order.
pub fn write_composites(
    records_dir: &Path,
    root_sha: &str,
    projects: Option<&Path>,
) -> Vec<Composite> {
    write_composites_n(records_dir, root_sha, projects, COMPOSITES, WORKFLOW)
}

pub fn write_composites_n(
    records_dir: &Path,
    root_sha: &str,
    projects: Option<&Path>,
    total: usize,
    workflow: usize,
) -> Vec<Composite> {
    fs::create_dir_all(records_dir).unwrap();
    let mut out = Vec::new();
    for i in 0..total {
        let session = session_uuid(i % SESSIONS);
        let prefix = &session[..8];
        let agent = agent_id(i);
        // Workflow agents are spread through the corpus, not bunched.
        let wf = (i * workflow / total != (i + 1) * workflow / total)
            .then(|| format!("wf_{}", &hex(&format!("run {}", i % 7))[..8]));
        let stored = match &wf {
            Some(w) => format!("{prefix}--{w}--agent-{agent}"),
            None => format!("{prefix}--agent-{agent}"),
        };
        // Some fractions trim, one has none at all.
        let nanos = match i % 4 {
            0 => 0,
            1 => 500_000_000,
            2 => 51_000_000 + i as u32,
            _ => 123_456_789,
        };
        let (rfc, stamp) = go_time(36_000 + i as u64 * 7, nanos);
        let body = agent_body(&session, &agent, i);
        let bytes = schema1_record(&stored, root_sha, &rfc, &body);
        let file = format!("{stamp}-{stored}.md");
        write_0644(&records_dir.join(&file), &bytes);
        let mut sidecar = false;
        if let Some(p) = projects {
            if i % 5 != 4 {
                let dir = match &wf {
                    Some(w) => p.join(format!("-work-project/{session}/subagents/workflows/{w}")),
                    None => p.join(format!("-work-project/{session}/subagents")),
                };
                fs::create_dir_all(&dir).unwrap();
                let meta = match &wf {
                    Some(_) => serde_json::json!({"agentType": "workflow-step", "spawnDepth": 1}),
                    None => {
                        serde_json::json!({"agentType": "Explore", "description": "look around",
                        "toolUseId": format!("toolu_{i:04}"), "spawnDepth": 1})
                    }
                };
                fs::write(
                    dir.join(format!("agent-{agent}.meta.json")),
                    meta.to_string(),
                )
                .unwrap();
                sidecar = true;
            }
        }
        out.push(Composite {
            file,
            stored_session_id: stored,
            session_id: session,
            agent_id: agent,
            workflow: wf,
            sidecar,
            bytes,
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// Main-thread schema-1 records, one per parent session.
pub fn write_main_threads(records_dir: &Path, root_sha: &str) -> Vec<String> {
    fs::create_dir_all(records_dir).unwrap();
    let mut names = Vec::new();
    for s in 0..SESSIONS {
        let session = session_uuid(s);
        let body = format!(
            "{}\n",
            serde_json::json!({"type": "user", "sessionId": session, "cwd": "/work/project",
                "message": {"role": "user", "content": format!("main thread {s}")}})
        );
        let (rfc, stamp) = go_time(30_000 + s as u64, 0);
        let name = format!("{stamp}-{session}.md");
        write_0644(
            &records_dir.join(&name),
            &schema1_record(&session, root_sha, &rfc, &body),
        );
        names.push(name);
    }
    names
}

/// A staged pair as the V-lineage predecessor wrote it: `<stamp>-<key>.raw`
/// (key = agent id when present) and its `.stage.json`.
pub fn write_staged(
    staging: &Path,
    stamp: &str,
    session: &str,
    agent: Option<&str>,
    raw: &str,
    with_sidecar: bool,
) -> PathBuf {
    fs::create_dir_all(staging).unwrap();
    let key = agent.unwrap_or(session);
    let raw_path = staging.join(format!("{stamp}-{key}.raw"));
    fs::write(&raw_path, raw).unwrap();
    if with_sidecar {
        let mut v = serde_json::json!({"schema": 1, "session_id": session,
            "staged_at": "2026-08-20T09:00:00Z"});
        if let Some(a) = agent {
            v["agent_id"] = a.into();
            v["agent_type"] = "Explore".into();
            v["spawn_depth"] = 1.into();
            v["spawn_tool_use_id"] = "toolu_staged".into();
            v["lineage_source"] = "hook".into();
            v["spawn_attribution"] = "sidecar".into();
        }
        fs::write(
            staging.join(format!("{stamp}-{key}.stage.json")),
            format!("{v}\n"),
        )
        .unwrap();
    }
    raw_path
}

/// A quarantined entry: the raw file, its sidecar and the reason note.
pub fn write_quarantined(quarantine: &Path, stamp: &str, session: &str, raw: &str) {
    fs::create_dir_all(quarantine).unwrap();
    let stem = format!("{stamp}-{session}");
    fs::write(quarantine.join(format!("{stem}.raw")), raw).unwrap();
    fs::write(
        quarantine.join(format!("{stem}.stage.json")),
        format!(
            "{}\n",
            serde_json::json!({"schema": 1, "session_id": session, "staged_at": "2026-08-19T08:00:00Z"})
        ),
    )
    .unwrap();
    fs::write(
        quarantine.join(format!("{stem}.quarantine.json")),
        format!(
            "{}\n",
            serde_json::json!({"schema": 1, "session_id": session,
                "reason": "redaction left a residual secret of kind aws-access-key",
                "staged_at": "2026-08-19T08:00:00Z", "quarantined_at": "2026-08-19T08:05:00Z"})
        ),
    )
    .unwrap();
}
