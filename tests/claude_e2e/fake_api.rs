//! A scripted stand-in for the Anthropic Messages API on loopback, so the
//! real Claude Code CLI runs a whole session offline: its hooks fire with
//! its own payloads, and it writes its main transcript, `subagents/` files
//! and `agent-<id>.meta.json` sidecars exactly as it does for real.
//!
//! The script (`Script::Nested`): the main thread spawns one sub-agent (L1)
//! through the `Agent` (or `Task`) tool, L1 spawns one (L2), each answers
//! once its child is done, and L2's answer carries the planted secret, the
//! way a tool output would put it in a transcript. `Script::Plain` answers
//! once with text. Streaming requests get server-sent events, others one
//! JSON message; `count_tokens` and anything else a small JSON body.
//!
//! Loopback only, one thread per connection, every response closes its
//! connection; the accept loop ends with the test process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    Nested,
    Plain,
}

/// The running server: its address, and a log of what it was asked
/// (method, path, message count), for a failing test to print.
pub struct FakeApi {
    pub base_url: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

struct State {
    script: Script,
    secret: String,
    counter: AtomicU32,
    log: Arc<Mutex<Vec<String>>>,
}

/// Request headers and bodies larger than this are refused (the CLI sends
/// a few hundred KiB at most: the system prompt and tool schemas).
const MAX_BODY: usize = 32 * 1024 * 1024;

impl FakeApi {
    pub fn start(script: Script, secret: &str) -> std::io::Result<FakeApi> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let log = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            script,
            secret: secret.to_owned(),
            counter: AtomicU32::new(1),
            log: Arc::clone(&log),
        });
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let state = Arc::clone(&state);
                std::thread::spawn(move || {
                    if let Err(e) = serve(&state, conn) {
                        state.note(format!("connection error: {e}"));
                    }
                });
            }
        });
        Ok(FakeApi { base_url, log })
    }

    pub fn requests(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl State {
    fn note(&self, line: String) {
        if let Ok(mut l) = self.log.lock() {
            l.push(line);
        }
    }

    fn next(&self) -> u32 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }

    /// The script: what the assistant says next in the conversation `body`.
    fn plan(&self, body: &Value) -> Vec<Value> {
        let done = || vec![json!({"type": "text", "text": "All done."})];
        if self.script == Script::Plain {
            return done();
        }
        let msgs = body["messages"].as_array().cloned().unwrap_or_default();
        let first = msgs
            .first()
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        let spawned = msgs
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"].to_string().contains("\"tool_use\""));
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        let tool = ["Agent", "Task"].into_iter().find(|t| tools.contains(t));
        let spawn = |id: String, description: &str, prompt: &str| {
            json!({"type": "tool_use", "id": id, "name": tool,
                   "input": {"description": description, "prompt": prompt,
                             "subagent_type": "general-purpose"}})
        };
        if first.contains("SUBAGENT-L2") {
            let text = format!("L2 done: the deploy token was {} in .env", self.secret);
            return vec![json!({"type": "text", "text": text})];
        }
        if first.contains("SUBAGENT-L1") {
            if !spawned && tool.is_some() {
                let id = format!("toolu_fakeL1{:04}", self.next());
                return vec![spawn(id, "dig deeper", "SUBAGENT-L2 read the env")];
            }
            return vec![json!({"type": "text", "text": "L1 done."})];
        }
        if !spawned && tool.is_some() {
            let id = format!("toolu_fakeM{:04}", self.next());
            return vec![
                json!({"type": "text", "text": "Spawning a helper."}),
                spawn(id, "look around", "SUBAGENT-L1 list files"),
            ];
        }
        done()
    }
}

fn respond_json(conn: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body)?;
    conn.flush()
}

/// A `transfer-encoding: chunked` body: hex size lines, each chunk, a zero
/// chunk, the (ignored) trailers.
fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let hex = size.split(';').next().unwrap_or_default().trim();
        let n = usize::from_str_radix(hex, 16)
            .map_err(|e| std::io::Error::other(format!("chunk size {hex:?}: {e}")))?;
        if body.len() + n > MAX_BODY {
            return Err(std::io::Error::other("chunked body over the cap"));
        }
        if n == 0 {
            let mut line = String::new();
            while reader.read_line(&mut line)? > 2 {
                line.clear();
            }
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + n, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn sse(out: &mut Vec<u8>, event: &str, data: Value) {
    out.extend_from_slice(format!("event: {event}\ndata: {data}\n\n").as_bytes());
}

fn serve(state: &State, conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.trim().eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.to_ascii_lowercase().contains("chunked");
            }
        }
    }
    let raw = if chunked {
        read_chunked(&mut reader)?
    } else {
        if length > MAX_BODY {
            return Err(std::io::Error::other(format!(
                "request body of {length} bytes"
            )));
        }
        let mut raw = vec![0u8; length];
        reader.read_exact(&mut raw)?;
        raw
    };
    let mut conn = conn;
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let nmsg = body["messages"].as_array().map_or(0, Vec::len);
    state.note(format!("{method} {path} messages={nmsg}"));
    if method != "POST" || !path.starts_with("/v1/messages") {
        return respond_json(&mut conn, b"{}");
    }
    if path.contains("count_tokens") {
        return respond_json(&mut conn, br#"{"input_tokens": 100}"#);
    }
    let blocks = state.plan(&body);
    let id = format!("msg_fake{:06}", state.next());
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_owned();
    let usage = json!({"input_tokens": 120, "output_tokens": 30,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let stop = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    if body["stream"] != true {
        let msg = json!({"id": id, "type": "message", "role": "assistant", "model": model,
                         "content": blocks, "stop_reason": stop, "stop_sequence": null,
                         "usage": usage});
        return respond_json(&mut conn, msg.to_string().as_bytes());
    }
    let mut out = Vec::new();
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    sse(
        &mut out,
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
               "role": "assistant", "model": model, "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": start_usage}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        let (start, delta) = if b["type"] == "text" {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": b["text"]}),
            )
        } else {
            (
                json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": b["input"].to_string()}),
            )
        };
        sse(
            &mut out,
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        );
        sse(
            &mut out,
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": delta}),
        );
        sse(
            &mut out,
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    sse(
        &mut out,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 30}}),
    );
    sse(&mut out, "message_stop", json!({"type": "message_stop"}));
    conn.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    )?;
    conn.write_all(&out)?;
    conn.flush()
}
