//! The harness's hook payload and the flush-race guard for transcripts.
//!
//! Owns: decoding the JSON object a hook receives on stdin (only the fields
//! abcd uses; unknown ones are ignored), the payload size cap, and deciding
//! whether a transcript read looks complete (`transcript_settled`) with the
//! bounded re-read loop around it.
//!
//! Must never: read stdin itself without a cap (see
//! [`crate::fsutil::read_stdin_capped`]), print anything, or wait unboundedly
//! — a hook shares a 1.5 s budget with every other SessionEnd hook.

use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use crate::fsutil::{guarded_read, GuardedReadError};

/// Largest payload read from stdin. Real payloads are a few KiB (a
/// `last_assistant_message` can be longer); 1 MiB bounds memory and time
/// for a hostile or broken harness while never cutting a real one.
pub const PAYLOAD_CAP: usize = 1 << 20;

/// Reads of a sub-agent transcript before staging it unsettled: the harness
/// may fire SubagentStop before the last lines are flushed.
pub const SETTLE_ATTEMPTS: u32 = 4;
/// Pause between those reads; 3 pauses × 25 ms keeps the worst case under
/// 0.1 s, well inside a hook's budget.
pub const SETTLE_PAUSE: Duration = Duration::from_millis(25);

/// Why a payload could not be decoded.
#[derive(Debug, Error)]
pub enum PayloadError {
    #[error("the hook payload is empty; the harness sent nothing on stdin")]
    Empty,
    #[error("the hook payload is not JSON ({0})")]
    NotJson(#[from] serde_json::Error),
    #[error("the hook payload is JSON but not an object")]
    NotAnObject,
    #[error("the hook payload's `{field}` is not a string")]
    WrongType { field: &'static str },
}

/// The payload fields abcd reads. Each is `None` when absent, null or the
/// empty string, so callers never see `Some("")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookPayload {
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub hook_event_name: Option<String>,
    /// The main session's transcript (on SubagentStop: the parent's).
    pub transcript_path: Option<String>,
    pub agent_id: Option<String>,
    pub agent_type: Option<String>,
    /// SubagentStop: the finished sub-agent's own transcript.
    pub agent_transcript_path: Option<String>,
    pub prompt: Option<String>,
    /// SessionStart: startup / resume / clear / compact / fork.
    pub source: Option<String>,
}

impl HookPayload {
    /// Decodes the first JSON value in `bytes` (trailing bytes after it are
    /// ignored, as a harness may append a newline or more). The value must
    /// be an object; a known field holding a non-string is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, PayloadError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(PayloadError::Empty);
        }
        let mut stream =
            serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>();
        let value = match stream.next() {
            Some(v) => v?,
            None => return Err(PayloadError::Empty),
        };
        let obj = value.as_object().ok_or(PayloadError::NotAnObject)?;
        let get = |field: &'static str| -> Result<Option<String>, PayloadError> {
            match obj.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(PayloadError::WrongType { field }),
            }
        };
        Ok(HookPayload {
            session_id: get("session_id")?,
            cwd: get("cwd")?,
            hook_event_name: get("hook_event_name")?,
            transcript_path: get("transcript_path")?,
            agent_id: get("agent_id")?,
            agent_type: get("agent_type")?,
            agent_transcript_path: get("agent_transcript_path")?,
            prompt: get("prompt")?,
            source: get("source")?,
        })
    }

    /// The payload's `cwd`, or the process working directory when the
    /// payload has none (the harness starts hooks in the session's cwd).
    pub fn effective_cwd(&self) -> Option<PathBuf> {
        match &self.cwd {
            Some(c) => Some(PathBuf::from(c)),
            None => std::env::current_dir().ok(),
        }
    }
}

/// True when the last non-blank line is a complete JSON value — the sign a
/// JSONL transcript was not caught mid-write. Empty input is not settled.
pub fn transcript_settled(bytes: &[u8]) -> bool {
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let trimmed = &bytes[..end];
    if trimmed.is_empty() {
        return false;
    }
    let start = trimmed
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    serde_json::from_slice::<serde::de::IgnoredAny>(&trimmed[start..]).is_ok()
}

/// Reads `path` (guarded, `cap`) up to `attempts` times, calling `sleep`
/// with `pause` between reads, until [`transcript_settled`]. Returns the
/// bytes and whether they settled; a copy that never settles is returned
/// anyway (the caller stages it and says it may be short). A failure on the
/// first read is returned; a failure on a later read returns the previous,
/// complete read as unsettled rather than losing it.
pub fn read_settled(
    path: &Path,
    cap: u64,
    attempts: u32,
    pause: Duration,
    sleep: &mut dyn FnMut(Duration),
) -> Result<(Vec<u8>, bool), GuardedReadError> {
    let mut bytes = guarded_read(path, cap)?;
    for _ in 1..attempts.max(1) {
        if transcript_settled(&bytes) {
            return Ok((bytes, true));
        }
        sleep(pause);
        match guarded_read(path, cap) {
            Ok(b) => bytes = b,
            Err(_) => return Ok((bytes, false)),
        }
    }
    let settled = transcript_settled(&bytes);
    Ok((bytes, settled))
}

/// [`read_settled`] with the standard attempts and pause, sleeping for real.
pub fn read_settled_default(path: &Path, cap: u64) -> Result<(Vec<u8>, bool), GuardedReadError> {
    read_settled(
        path,
        cap,
        SETTLE_ATTEMPTS,
        SETTLE_PAUSE,
        &mut std::thread::sleep,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_subagent_stop_payload_and_ignores_unknown_fields() {
        let raw = br#"{"session_id":"s1","cwd":"/w","hook_event_name":"SubagentStop",
            "transcript_path":"/p/s1.jsonl","agent_id":"a1","agent_type":"Explore",
            "agent_transcript_path":"/p/s1/subagents/agent-a1.jsonl","stop_hook_active":false,
            "background_tasks":[],"effort":{"level":"high"}}
            trailing"#;
        let p = HookPayload::parse(raw).unwrap();
        assert_eq!(p.session_id.as_deref(), Some("s1"));
        assert_eq!(p.agent_id.as_deref(), Some("a1"));
        assert_eq!(p.agent_type.as_deref(), Some("Explore"));
        assert_eq!(
            p.agent_transcript_path.as_deref(),
            Some("/p/s1/subagents/agent-a1.jsonl")
        );
        assert_eq!(p.hook_event_name.as_deref(), Some("SubagentStop"));
        assert_eq!(p.prompt, None);
        assert_eq!(p.effective_cwd(), Some(PathBuf::from("/w")));
    }

    #[test]
    fn empty_and_null_strings_read_as_absent() {
        let p =
            HookPayload::parse(br#"{"session_id":"","agent_id":null,"source":"startup"}"#).unwrap();
        assert_eq!(p.session_id, None);
        assert_eq!(p.agent_id, None);
        assert_eq!(p.source.as_deref(), Some("startup"));
        assert_eq!(p.effective_cwd(), std::env::current_dir().ok());
    }

    #[test]
    fn malformed_payloads_are_distinct_errors() {
        assert!(matches!(HookPayload::parse(b""), Err(PayloadError::Empty)));
        assert!(matches!(
            HookPayload::parse(b" \n"),
            Err(PayloadError::Empty)
        ));
        assert!(matches!(
            HookPayload::parse(b"{\"session_id\":"),
            Err(PayloadError::NotJson(_))
        ));
        assert!(matches!(
            HookPayload::parse(b"[1,2]"),
            Err(PayloadError::NotAnObject)
        ));
        assert!(matches!(
            HookPayload::parse(br#"{"agent_id":7}"#),
            Err(PayloadError::WrongType { field: "agent_id" })
        ));
    }

    proptest::proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = HookPayload::parse(&bytes);
            let _ = super::transcript_settled(&bytes);
        }
    }

    // Seed: TestTranscriptSettled.
    #[test]
    fn transcript_settled() {
        assert!(!super::transcript_settled(b""));
        assert!(!super::transcript_settled(b"  \n\n"));
        assert!(super::transcript_settled(b"{\"a\":1}"));
        assert!(super::transcript_settled(b"{\"a\":1}\n{\"b\":2}\n"));
        assert!(super::transcript_settled(b"{\"a\":1}\n{\"b\":2}\r\n \n\t"));
        assert!(!super::transcript_settled(b"{\"a\":1}\n{\"b\":"));
        assert!(!super::transcript_settled(b"{\"a\":1}\n{\"b\":2}{"));
        assert!(!super::transcript_settled(b"{\"a\":1}\nnot json\n"));
        // Only the last line counts: a broken earlier line does not matter.
        assert!(super::transcript_settled(b"{\"a\":\n{\"b\":2}\n"));
    }

    #[test]
    fn read_settled_rereads_until_the_last_line_completes() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut sleeps = Vec::new();
        let (bytes, settled) = read_settled(&f, 1 << 20, 4, SETTLE_PAUSE, &mut |d| {
            sleeps.push(d);
            // The harness flushes its last line while we wait.
            std::fs::write(&f, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        })
        .unwrap();
        assert!(settled);
        assert_eq!(bytes, b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(sleeps, vec![SETTLE_PAUSE]);
    }

    #[test]
    fn read_settled_gives_up_after_the_attempts_and_returns_the_copy() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut n = 0;
        let (bytes, settled) = read_settled(&f, 1 << 20, 4, SETTLE_PAUSE, &mut |_| n += 1).unwrap();
        assert!(!settled);
        assert_eq!(bytes, b"{\"a\":1}\n{\"b\":");
        assert_eq!(n, 3, "four reads, three pauses");

        // A settled file is read once, without sleeping.
        std::fs::write(&f, b"{}\n").unwrap();
        let mut n = 0;
        assert!(
            read_settled(&f, 1 << 20, 4, SETTLE_PAUSE, &mut |_| n += 1)
                .unwrap()
                .1
        );
        assert_eq!(n, 0);
    }

    #[test]
    fn read_settled_keeps_the_first_copy_if_the_file_vanishes() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":").unwrap();
        let (bytes, settled) = read_settled(&f, 1 << 20, 4, SETTLE_PAUSE, &mut |_| {
            let _ = std::fs::remove_file(&f);
        })
        .unwrap();
        assert_eq!((bytes.as_slice(), settled), (&b"{\"a\":"[..], false));
        // But a first read that fails is an error the hook reports.
        let err = read_settled(&f, 1 << 20, 4, SETTLE_PAUSE, &mut |_| {}).unwrap_err();
        assert!(err.is_not_found());
        std::fs::write(&f, b"{}").unwrap();
        assert!(matches!(
            read_settled(&f, 1, 4, SETTLE_PAUSE, &mut |_| {}),
            Err(GuardedReadError::OverCap { .. })
        ));
    }
}
