//! Transcript shape: is a byte stream a Claude Code transcript, and which
//! session (and sub-agent) does it say it belongs to.
//!
//! Owns: the acceptance rule every door applies before anything is staged
//! or stored (`history capture`, `history ingest`, the hooks), and reading
//! the ids a transcript carries on its own lines (`sessionId`, `agentId`,
//! `cwd`), never from its file name.
//!
//! The rule: the first non-empty line is a JSON object carrying either a
//! string `sessionId` or a string `type` (the documented older shape: early
//! builds began a file with `{"type":"summary",…}` lines that carry no
//! `sessionId`). Anything else — a password file, `/proc/self/environ`, a
//! binary, an empty file — is refused with the reason.
//!
//! Cost: the hooks check only the head they already read (the first copy
//! chunk): no extra system call. When the first line is longer than that
//! head, only its opening (`{"` and one of the two keys) is checked.
//!
//! Must never: do I/O, or read more lines than [`MAX_ID_LINES`] looking for
//! ids (a file with thousands of session ids costs a bounded scan: the first
//! one wins, later ones are counted only within the bound).

use serde::Deserialize;
use thiserror::Error;

/// How many JSON lines are parsed looking for the ids and a cwd.
pub const MAX_ID_LINES: usize = 64;

/// Why bytes are not a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NotTranscript {
    #[error("the file is empty")]
    Empty,
    #[error("its first line is not a JSON object ({why})")]
    NotJson { why: String },
    #[error("its first line is a JSON object without a `sessionId` or `type` (not a Claude Code transcript line)")]
    NoEnvelope,
}

/// The ids a transcript carries on its lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids {
    /// The first `sessionId` (a workflow child's `<parent>#agent-<id>` is
    /// cut to the parent).
    pub session_id: Option<String>,
    /// The first top-level `agentId` (never `toolUseResult.agentId`), or
    /// the `#agent-<id>` suffix of a workflow child's `sessionId`.
    pub agent_id: Option<String>,
    /// The first `cwd`.
    pub cwd: Option<String>,
    /// Distinct session ids seen within the scanned lines (after the cut).
    pub distinct_sessions: usize,
    /// Distinct agent ids seen within the scanned lines.
    pub distinct_agents: usize,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type", default)]
    kind: Option<serde_json::Value>,
    #[serde(rename = "sessionId", default)]
    session_id: Option<serde_json::Value>,
    #[serde(rename = "agentId", default)]
    agent_id: Option<serde_json::Value>,
    #[serde(default)]
    cwd: Option<serde_json::Value>,
}

fn as_str(v: &Option<serde_json::Value>) -> Option<&str> {
    v.as_ref()
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
}

fn first_line(bytes: &[u8]) -> Option<(&[u8], bool)> {
    let mut rest = bytes;
    // A UTF-8 byte-order mark is tolerated.
    if let Some(r) = rest.strip_prefix(b"\xEF\xBB\xBF") {
        rest = r;
    }
    loop {
        let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        rest = &rest[start..];
        match rest.iter().position(|&b| b == b'\n') {
            Some(end) if rest[..end].iter().all(u8::is_ascii_whitespace) => rest = &rest[end..],
            Some(end) => return Some((&rest[..end], true)),
            None => return Some((rest, false)),
        }
    }
}

fn check_line(line: &[u8]) -> Result<Envelope, NotTranscript> {
    // serde would read an array into the struct's fields too.
    if line.first() != Some(&b'{') {
        return Err(NotTranscript::NotJson {
            why: "it does not start with `{`".into(),
        });
    }
    let env: Envelope =
        serde_json::from_slice(line).map_err(|e| NotTranscript::NotJson { why: e.to_string() })?;
    if as_str(&env.session_id).is_none() && as_str(&env.kind).is_none() {
        return Err(NotTranscript::NoEnvelope);
    }
    Ok(env)
}

/// Checks the head of a file: `head` is its first bytes, `whole` says
/// whether they are the whole file. The hooks call it on the first chunk
/// they already read.
pub fn check_head(head: &[u8], whole: bool) -> Result<(), NotTranscript> {
    let Some((line, complete)) = first_line(head) else {
        return Err(NotTranscript::Empty);
    };
    if complete || whole {
        return check_line(line).map(|_| ());
    }
    // A first line longer than the head: its opening must be a JSON object
    // (`{"`) of text (valid UTF-8 but for a character cut at the end); the
    // envelope keys may come after a long `message` (serializers that sort
    // keys), so they are not required here. Capture and ingest check the
    // whole line.
    if !line.starts_with(b"{\"") {
        return Err(NotTranscript::NotJson {
            why: "it does not start with `{\"`".into(),
        });
    }
    match std::str::from_utf8(line) {
        Ok(_) => Ok(()),
        Err(e) if e.error_len().is_none() => Ok(()),
        Err(e) => Err(NotTranscript::NotJson {
            why: format!("not UTF-8 text (bad byte at offset {})", e.valid_up_to()),
        }),
    }
}

/// Splits a workflow child's `<parent>#agent-<id>` session id.
fn split_session(s: &str) -> (&str, Option<&str>) {
    match s.split_once('#') {
        Some((parent, rest)) => (parent, rest.strip_prefix("agent-")),
        None => (s, None),
    }
}

/// Checks the whole of `bytes` is transcript-shaped and reads its ids from
/// the first [`MAX_ID_LINES`] JSON lines (lines that do not parse, such as
/// a torn last line, are passed over).
pub fn read_ids(bytes: &[u8]) -> Result<Ids, NotTranscript> {
    scan_ids(bytes).map(|(ids, _)| ids)
}

/// [`read_ids`] from the first bytes of a file, so a reader need not read
/// the rest: `None` while they cannot decide (`at_end` false and fewer
/// than [`MAX_ID_LINES`] JSON lines among their complete lines, or not even
/// a first line), else exactly what [`read_ids`] gives on the whole file.
/// The lines after the last `\n` of `head` are left out until `at_end`.
pub fn read_ids_prefix(head: &[u8], at_end: bool) -> Option<Result<Ids, NotTranscript>> {
    let complete = if at_end {
        head
    } else {
        let end = memchr::memrchr(b'\n', head)?;
        let complete = &head[..end + 1];
        // Blank lines so far: the first line is still to come.
        first_line(complete)?;
        complete
    };
    match scan_ids(complete) {
        Err(e) => Some(Err(e)),
        Ok((ids, full)) if full || at_end => Some(Ok(ids)),
        Ok(_) => None,
    }
}

/// [`read_ids`], and whether the scan stopped at [`MAX_ID_LINES`] (the
/// bytes after that line cannot change the answer).
fn scan_ids(bytes: &[u8]) -> Result<(Ids, bool), NotTranscript> {
    check_head(bytes, true)?;
    let mut ids = Ids::default();
    let mut sessions: Vec<String> = Vec::new();
    let mut agents: Vec<String> = Vec::new();
    let mut parsed = 0usize;
    for line in bytes.split(|&b| b == b'\n') {
        if parsed >= MAX_ID_LINES {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(env) = check_line(line.trim_ascii()) else {
            continue;
        };
        parsed += 1;
        let mut agent = as_str(&env.agent_id).map(str::to_owned);
        if let Some(s) = as_str(&env.session_id) {
            let (parent, child) = split_session(s);
            if agent.is_none() {
                agent = child.map(str::to_owned);
            }
            if !sessions.iter().any(|x| x == parent) {
                sessions.push(parent.to_owned());
            }
        }
        if let Some(a) = agent {
            if !agents.contains(&a) {
                agents.push(a);
            }
        }
        if ids.cwd.is_none() {
            ids.cwd = as_str(&env.cwd).map(str::to_owned);
        }
    }
    ids.distinct_sessions = sessions.len();
    ids.distinct_agents = agents.len();
    ids.session_id = sessions.into_iter().next();
    ids.agent_id = agents.into_iter().next();
    Ok((ids, parsed >= MAX_ID_LINES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_transcript() {
        assert_eq!(check_head(b"", true), Err(NotTranscript::Empty));
        assert_eq!(check_head(b"\n  \n", true), Err(NotTranscript::Empty));
        let passwd =
            b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n";
        assert!(matches!(
            check_head(passwd, true),
            Err(NotTranscript::NotJson { .. })
        ));
        let environ = b"PATH=/usr/bin\0HOME=/root\0";
        assert!(matches!(
            check_head(environ, true),
            Err(NotTranscript::NotJson { .. })
        ));
        assert_eq!(
            check_head(b"{\"name\":\"x\"}\n", true),
            Err(NotTranscript::NoEnvelope)
        );
        assert!(matches!(
            check_head(b"[1,2]\n", true),
            Err(NotTranscript::NotJson { .. })
        ));
        // A long first line cut by the head: the opening decides.
        assert!(check_head(b"{\"a\":\"xx\xff\xfexx", false).is_err());
        assert!(check_head(b"{\"type\":\"user\",\"message\":\"xxxx", false).is_ok());
        assert!(check_head(b"not json at all, and long", false).is_err());
    }

    #[test]
    fn accepts_both_shapes_and_reads_ids_from_content() {
        let old = b"{\"type\":\"summary\",\"summary\":\"s\",\"leafUuid\":\"u\"}\n";
        assert_eq!(read_ids(old).unwrap().session_id, None);
        let main = b"{\"type\":\"file-history-snapshot\"}\n{\"type\":\"user\",\"sessionId\":\"s1\",\"cwd\":\"/w\",\"toolUseResult\":{\"agentId\":\"nested\"}}\n{\"type\":\"assistant\",\"sessionId\":\"s1\"}\n{\"torn";
        let ids = read_ids(main).unwrap();
        assert_eq!(ids.session_id.as_deref(), Some("s1"));
        assert_eq!(
            ids.agent_id, None,
            "a nested toolUseResult.agentId is not the file's agent"
        );
        assert_eq!(ids.cwd.as_deref(), Some("/w"));
        assert_eq!(ids.distinct_sessions, 1);
        let sub =
            b"{\"type\":\"user\",\"sessionId\":\"s1\",\"agentId\":\"a7\",\"isSidechain\":true}\n";
        let ids = read_ids(sub).unwrap();
        assert_eq!(
            (ids.session_id.as_deref(), ids.agent_id.as_deref()),
            (Some("s1"), Some("a7"))
        );
        let wf = b"{\"type\":\"user\",\"sessionId\":\"s1#agent-a9\"}\n";
        let ids = read_ids(wf).unwrap();
        assert_eq!(
            (ids.session_id.as_deref(), ids.agent_id.as_deref()),
            (Some("s1"), Some("a9"))
        );
    }

    /// Every prefix either asks for more or answers what the whole file
    /// answers, and the answer comes before the end once the ids are read.
    #[test]
    fn a_prefix_answers_as_the_whole_file_or_asks_for_more() {
        let mut long = b"\xEF\xBB\xBF\n  \n".to_vec();
        for i in 0..120 {
            let line = match i % 7 {
                0 if i > 0 => "not json\n".to_string(),
                1 => "\n".to_string(),
                2 => format!(
                    "{{\"type\":\"user\",\"sessionId\":\"s{}\",\"agentId\":\"a{}\"}}\n",
                    i % 3,
                    i % 2
                ),
                _ => format!("{{\"type\":\"assistant\",\"sessionId\":\"s1\",\"cwd\":\"/w{i}\"}}\n"),
            };
            long.extend_from_slice(line.as_bytes());
        }
        let cases: Vec<Vec<u8>> = vec![
            long.clone(),
            b"{\"type\":\"user\",\"sessionId\":\"s1\"}\n{\"torn".to_vec(),
            b"\n\n{\"name\":\"x\"}\n".to_vec(),
            b"root:x:0:0:root:/root:/bin/bash\n".to_vec(),
            b"{\"type\":\"user\",\"sessionId\":\"s1\"}".to_vec(),
            b"\n \n".to_vec(),
        ];
        for b in &cases {
            let whole = read_ids(b);
            assert_eq!(read_ids_prefix(b, true), Some(whole.clone()));
            let mut early = None;
            for k in 0..b.len() {
                if let Some(r) = read_ids_prefix(&b[..k], false) {
                    assert_eq!(r, whole, "prefix of {k} bytes");
                    early.get_or_insert(k);
                }
            }
            if b == &long {
                let k = early.expect("the ids are known before the end");
                assert!(k < b.len() * 9 / 10, "answered at {k} of {}", b.len());
            }
        }
    }

    #[test]
    fn many_session_ids_cost_a_bounded_scan() {
        let mut b = Vec::new();
        for i in 0..5000 {
            b.extend_from_slice(
                format!("{{\"type\":\"user\",\"sessionId\":\"s{i}\"}}\n").as_bytes(),
            );
        }
        let ids = read_ids(&b).unwrap();
        assert_eq!(ids.session_id.as_deref(), Some("s0"));
        assert_eq!(ids.distinct_sessions, MAX_ID_LINES);
    }
}
