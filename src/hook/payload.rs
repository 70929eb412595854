//! The harness's hook payload and the flush-race guard for transcripts.
//!
//! Owns: decoding the JSON object a hook receives on stdin (only the fields
//! abcd uses; unknown ones are ignored), the payload size cap, and deciding
//! whether a transcript read looks complete (`transcript_settled`) with the
//! bounded re-read loop around it.
//!
//! Must never: read stdin itself (that is [`crate::hook::stdin`]: capped,
//! with a deadline, up to the first complete object), print anything, or
//! wait unboundedly — a hook shares a 1.5 s budget with every other
//! SessionEnd hook.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

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

/// [`transcript_settled`] over a transcript read in pieces: fed every chunk
/// in order, [`LastLine::settled`] answers what `transcript_settled` would
/// on their concatenation, while holding only the last non-blank line (and
/// the line still open) instead of the whole file.
#[derive(Debug, Default)]
pub struct LastLine {
    /// Bytes after the last newline seen so far.
    open: Vec<u8>,
    /// The last complete line that holds a non-whitespace byte.
    last: Vec<u8>,
}

impl LastLine {
    pub fn feed(&mut self, chunk: &[u8]) {
        let Some(nl) = chunk.iter().rposition(|&b| b == b'\n') else {
            self.open.extend_from_slice(chunk);
            return;
        };
        let closed = &chunk[..nl];
        match closed.iter().rposition(|b| !b.is_ascii_whitespace()) {
            // The last non-blank line closed in this chunk starts after the
            // newline before its last non-blank byte, or in `open`.
            Some(k) => match closed[..k].iter().rposition(|&b| b == b'\n') {
                Some(j) => {
                    self.last.clear();
                    self.last.extend_from_slice(&closed[j + 1..]);
                }
                None => {
                    self.last.clear();
                    self.last.extend_from_slice(&self.open);
                    self.last.extend_from_slice(closed);
                }
            },
            // Only whitespace closed here: the open line, if not blank, is
            // the last non-blank line now.
            None => {
                if !is_blank(&self.open) {
                    std::mem::swap(&mut self.last, &mut self.open);
                }
            }
        }
        self.open.clear();
        self.open.extend_from_slice(&chunk[nl + 1..]);
    }

    pub fn settled(&self) -> bool {
        let line = if is_blank(&self.open) {
            &self.last
        } else {
            &self.open
        };
        transcript_settled(line)
    }
}

fn is_blank(b: &[u8]) -> bool {
    b.iter().all(u8::is_ascii_whitespace)
}

/// The settle loop: runs `attempt` (one read of the transcript, feeding
/// the [`LastLine`] it is given) up to `attempts` times, calling `sleep`
/// with `pause` between, until the copy's last line is complete. Returns
/// the copy and whether it settled; a copy that never settles is returned
/// anyway (the caller stages it and says it may be short). A failure on the
/// first attempt is returned; a failure on a later one returns the previous,
/// complete copy as unsettled rather than losing it.
pub fn settle<T, E>(
    attempts: u32,
    pause: Duration,
    sleep: &mut dyn FnMut(Duration),
    mut attempt: impl FnMut(&mut LastLine) -> Result<T, E>,
) -> Result<(T, bool), E> {
    let mut tail = LastLine::default();
    let mut copy = attempt(&mut tail)?;
    for _ in 1..attempts.max(1) {
        if tail.settled() {
            return Ok((copy, true));
        }
        sleep(pause);
        let mut again = LastLine::default();
        match attempt(&mut again) {
            Ok(c) => (copy, tail) = (c, again),
            Err(_) => return Ok((copy, false)),
        }
    }
    let settled = tail.settled();
    Ok((copy, settled))
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

    /// One attempt as the hook makes it: a guarded read in 3-byte pieces
    /// (so lines straddle chunks) fed to the tracker.
    fn read_in_pieces(
        f: &std::path::Path,
        cap: u64,
    ) -> impl FnMut(&mut LastLine) -> Result<Vec<u8>, crate::fsutil::GuardedReadError> + '_ {
        move |tail| {
            let b = crate::fsutil::guarded_read(f, cap)?;
            b.chunks(3).for_each(|c| tail.feed(c));
            Ok(b)
        }
    }

    #[test]
    fn last_line_agrees_with_transcript_settled_whatever_the_chunking() {
        let cases: &[&[u8]] = &[
            b"",
            b"  \n\n",
            b"{\"a\":1}",
            b"{\"a\":1}\n{\"b\":2}\n",
            b"{\"a\":1}\n{\"b\":2}\r\n \n\t",
            b"{\"a\":1}\n{\"b\":",
            b"{\"a\":1}\n{\"b\":2}{",
            b"{\"a\":1}\nnot json\n",
            b"{\"a\":\n{\"b\":2}\n",
            b"{\"a\":1}\n   \n \n",
            b"\n\n{\"long\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n\n",
            b"{\"a\":1}\n{\"b\"\n:2}",
        ];
        for case in cases {
            for size in 1..=case.len().max(1) {
                let mut t = LastLine::default();
                case.chunks(size).for_each(|c| t.feed(c));
                assert_eq!(
                    t.settled(),
                    super::transcript_settled(case),
                    "{:?} in chunks of {size}",
                    String::from_utf8_lossy(case)
                );
            }
        }
    }

    // Seed: TestSubagentStopWaitsForSettledTranscript (the re-read loop).
    #[test]
    fn settle_rereads_until_the_last_line_completes() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut sleeps = Vec::new();
        let (bytes, settled) = settle(
            4,
            SETTLE_PAUSE,
            &mut |d| {
                sleeps.push(d);
                // The harness flushes its last line while we wait.
                std::fs::write(&f, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
            },
            read_in_pieces(&f, 1 << 20),
        )
        .unwrap();
        assert!(settled);
        assert_eq!(bytes, b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(sleeps, vec![SETTLE_PAUSE]);
    }

    #[test]
    fn settle_gives_up_after_the_attempts_and_returns_the_copy() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut n = 0;
        let (bytes, settled) = settle(
            4,
            SETTLE_PAUSE,
            &mut |_| n += 1,
            read_in_pieces(&f, 1 << 20),
        )
        .unwrap();
        assert!(!settled);
        assert_eq!(bytes, b"{\"a\":1}\n{\"b\":");
        assert_eq!(n, 3, "four reads, three pauses");

        // A settled file is read once, without sleeping.
        std::fs::write(&f, b"{}\n").unwrap();
        let mut n = 0;
        assert!(
            settle(
                4,
                SETTLE_PAUSE,
                &mut |_| n += 1,
                read_in_pieces(&f, 1 << 20)
            )
            .unwrap()
            .1
        );
        assert_eq!(n, 0);
    }

    #[test]
    fn settle_keeps_the_first_copy_if_the_file_vanishes() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("agent-a1.jsonl");
        std::fs::write(&f, b"{\"a\":").unwrap();
        let (bytes, settled) = settle(
            4,
            SETTLE_PAUSE,
            &mut |_| {
                let _ = std::fs::remove_file(&f);
            },
            read_in_pieces(&f, 1 << 20),
        )
        .unwrap();
        assert_eq!((bytes.as_slice(), settled), (&b"{\"a\":"[..], false));
        // But a first read that fails is an error the hook reports.
        let err = settle(4, SETTLE_PAUSE, &mut |_| {}, read_in_pieces(&f, 1 << 20)).unwrap_err();
        assert!(err.is_not_found());
    }
}
