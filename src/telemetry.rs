//! Telemetry: token figures people can trust.
//!
//! Owns: the counting rule. One API response is one `message.id`; Claude
//! Code writes one JSONL line per content block and repeats the response's
//! `usage` on each, and streamed partials grow the output count, so the
//! response counts **once**, with the bucket-wise largest usage seen among
//! its lines (naive summing over-counts 2–5×). Only `assistant` lines'
//! `message.usage` is an API response: usage echoed in a `progress` line or
//! a `toolUseResult` is not counted again. A usage without a message id
//! cannot be deduplicated: it is counted and reported
//! (`usage_without_message_id`). A message id seen in two threads of one
//! session counts once, for the first thread given.
//!
//! Must never: touch the file system or read record frontmatter (callers
//! pass each thread's agent id and type).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::transcript::{Line, Usage};

/// Token buckets plus their total, as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_creation_input: u64,
    pub cache_read_input: u64,
    pub total: u64,
}

impl Tokens {
    fn add(&mut self, u: &Usage) {
        let mut s = Usage {
            input: self.input,
            output: self.output,
            cache_creation_input: self.cache_creation_input,
            cache_read_input: self.cache_read_input,
        };
        s.add(u);
        *self = Tokens::from(s);
    }
}

impl From<Usage> for Tokens {
    fn from(u: Usage) -> Self {
        Tokens {
            input: u.input,
            output: u.output,
            cache_creation_input: u.cache_creation_input,
            cache_read_input: u.cache_read_input,
            total: u.total(),
        }
    }
}

/// One thread handed to [`count`]: its agent id (`None` = main thread),
/// type, and parsed lines.
pub struct ThreadInput<'a> {
    pub agent_id: Option<&'a str>,
    pub agent_type: Option<&'a str>,
    pub lines: &'a [Line],
}

/// The figures of one thread.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadTokens {
    pub tokens: Tokens,
    pub api_responses: u64,
    pub usage_lines_seen: u64,
    pub usage_without_message_id: u64,
}

/// The figures of a set of threads (a session, or a whole corpus).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub tokens: Tokens,
    /// Distinct API responses counted (message ids, plus usages without one).
    pub api_responses: u64,
    /// Lines carrying an assistant `message.usage`, before deduplication.
    pub usage_lines_seen: u64,
    /// Usages without a message id: counted, but they could not be deduplicated.
    pub usage_without_message_id: u64,
    /// What summing every usage line would have said (for comparison).
    pub naive_tokens: Tokens,
    pub by_model: BTreeMap<String, Tokens>,
    /// Keyed by agent type; the main thread is `main`, a sub-agent of
    /// unknown type `unknown`.
    pub by_agent_type: BTreeMap<String, Tokens>,
    /// UTC day (`YYYY-MM-DD`) of the response's last line; `unknown` without a timestamp.
    pub by_day: BTreeMap<String, Tokens>,
    /// Per thread: `main`, or the agent id.
    pub by_thread: BTreeMap<String, ThreadTokens>,
    /// Tokens of sub-agent threads.
    pub subagent_tokens: Tokens,
}

impl Report {
    /// The sub-agents' share of all tokens, 0..=1 (0 when there are none).
    pub fn subagent_share(&self) -> f64 {
        if self.tokens.total == 0 {
            0.0
        } else {
            self.subagent_tokens.total as f64 / self.tokens.total as f64
        }
    }
}

/// The key of a main thread in per-thread and per-type maps.
pub const MAIN: &str = "main";

fn day_of(ts: Option<&str>) -> String {
    match ts {
        Some(t) if t.len() >= 10 && t.as_bytes()[4] == b'-' => t[..10].to_owned(),
        _ => "unknown".to_owned(),
    }
}

/// A usage as four numbers: input, output, cache creation, cache read.
type Buckets = [u64; 4];

fn buckets(u: &Usage) -> Buckets {
    [
        u.input,
        u.output,
        u.cache_creation_input,
        u.cache_read_input,
    ]
}

fn usage(b: &Buckets) -> Usage {
    Usage {
        input: b[0],
        output: b[1],
        cache_creation_input: b[2],
        cache_read_input: b[3],
    }
}

/// One record's API responses, each message id once with its final
/// figures (bucket-wise largest usage among its lines, the model of its
/// last line naming one, the day of its last line), grouped by (model,
/// day). What the projection keeps per record (`index/tokens/`), so that
/// `history stats` adds tables instead of reading bodies: [`combine`]
/// over a session's tables says exactly what [`count`] over its bodies
/// says (the message ids are kept because one id may appear in two
/// threads of a session and must count once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTable {
    /// Lines carrying an assistant `message.usage`.
    pub usage_lines: u64,
    /// Every usage line summed (the naive figure).
    pub naive: Buckets,
    /// By (model, day), in that order; the model is `None` when no line of
    /// the response names one (or it is `<synthetic>`).
    pub groups: Vec<TokenGroup>,
}

/// The responses of one record with one (model, day).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenGroup {
    pub model: Option<String>,
    pub day: String,
    /// `(message id, input, output, cache creation, cache read)`, in the
    /// order the record first shows each id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responses: Vec<(String, u64, u64, u64, u64)>,
    /// Usages without a message id: how many, and their sum (each counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idless: Option<(u64, Buckets)>,
}

impl TokenTable {
    /// The table of one thread's lines.
    pub fn of(lines: &[Line]) -> TokenTable {
        struct Resp {
            usage: Usage,
            model: Option<String>,
            day: String,
        }
        let mut t = TokenTable::default();
        let mut naive = Usage::default();
        let mut order: Vec<String> = Vec::new();
        let mut by_id: HashMap<String, Resp> = HashMap::new();
        let mut idless: BTreeMap<(Option<String>, String), (u64, Usage)> = BTreeMap::new();
        for l in lines {
            if l.kind != "assistant" {
                continue;
            }
            let Some(u) = l.usage else { continue };
            t.usage_lines += 1;
            naive.add(&u);
            let model = l.model.clone().filter(|m| m != "<synthetic>");
            let day = day_of(l.timestamp.as_deref());
            match &l.message_id {
                Some(id) => match by_id.get_mut(id) {
                    Some(r) => {
                        r.usage.max_with(&u);
                        if model.is_some() {
                            r.model = model;
                        }
                        r.day = day;
                    }
                    None => {
                        order.push(id.clone());
                        by_id.insert(
                            id.clone(),
                            Resp {
                                usage: u,
                                model,
                                day,
                            },
                        );
                    }
                },
                None => {
                    let e = idless.entry((model, day)).or_default();
                    e.0 += 1;
                    e.1.add(&u);
                }
            }
        }
        t.naive = buckets(&naive);
        let mut groups: BTreeMap<(Option<String>, String), TokenGroup> = BTreeMap::new();
        for id in order {
            let Some(r) = by_id.remove(&id) else { continue };
            let g = groups
                .entry((r.model.clone(), r.day.clone()))
                .or_insert_with(|| TokenGroup {
                    model: r.model,
                    day: r.day,
                    ..TokenGroup::default()
                });
            let [a, b, c, d] = buckets(&r.usage);
            g.responses.push((id, a, b, c, d));
        }
        for ((model, day), (n, u)) in idless {
            groups
                .entry((model.clone(), day.clone()))
                .or_insert_with(|| TokenGroup {
                    model,
                    day,
                    ..TokenGroup::default()
                })
                .idless = Some((n, buckets(&u)));
        }
        t.groups = groups.into_values().collect();
        t
    }

    /// Tokens of this table alone, once per message id.
    pub fn total(&self) -> u64 {
        combine(&[TableInput {
            agent_id: None,
            agent_type: None,
            table: self,
        }])
        .tokens
        .total
    }
}

/// One thread handed to [`combine`]: its agent id (`None` = main thread),
/// type, and token table.
pub struct TableInput<'a> {
    pub agent_id: Option<&'a str>,
    pub agent_type: Option<&'a str>,
    pub table: &'a TokenTable,
}

/// Counts tokens over `threads` once per API message id.
pub fn count(threads: &[ThreadInput<'_>]) -> Report {
    let tables: Vec<TokenTable> = threads.iter().map(|t| TokenTable::of(t.lines)).collect();
    let inputs: Vec<TableInput<'_>> = threads
        .iter()
        .zip(&tables)
        .map(|(t, table)| TableInput {
            agent_id: t.agent_id,
            agent_type: t.agent_type,
            table,
        })
        .collect();
    combine(&inputs)
}

/// Adds the tables of a set of threads (a session) in order: a message id
/// met in several counts once (bucket-wise largest usage, the last model
/// and day given), for the first thread that shows it.
pub fn combine(threads: &[TableInput<'_>]) -> Report {
    struct Response<'t> {
        usage: Usage,
        model: Option<&'t str>,
        day: &'t str,
        thread: usize,
        /// Usages without a message id this entry stands for (0: one id).
        idless: u64,
    }
    let mut r = Report::default();
    let mut naive = Usage::default();
    let mut order: Vec<&str> = Vec::new();
    let mut by_id: HashMap<&str, Response<'_>> = HashMap::new();
    let mut loose: Vec<Response<'_>> = Vec::new();
    let mut per_thread = vec![ThreadTokens::default(); threads.len()];
    for (ti, t) in threads.iter().enumerate() {
        r.usage_lines_seen += t.table.usage_lines;
        per_thread[ti].usage_lines_seen += t.table.usage_lines;
        naive.add(&usage(&t.table.naive));
        for g in &t.table.groups {
            let model = g.model.as_deref();
            for (id, a, b, c, d) in &g.responses {
                let u = usage(&[*a, *b, *c, *d]);
                match by_id.get_mut(id.as_str()) {
                    Some(resp) => {
                        resp.usage.max_with(&u);
                        if model.is_some() {
                            resp.model = model;
                        }
                        resp.day = &g.day;
                    }
                    None => {
                        order.push(id);
                        by_id.insert(
                            id,
                            Response {
                                usage: u,
                                model,
                                day: &g.day,
                                thread: ti,
                                idless: 0,
                            },
                        );
                    }
                }
            }
            if let Some((n, u)) = &g.idless {
                r.usage_without_message_id += n;
                per_thread[ti].usage_without_message_id += n;
                loose.push(Response {
                    usage: usage(u),
                    model,
                    day: &g.day,
                    thread: ti,
                    idless: *n,
                });
            }
        }
    }
    let responses = order.iter().filter_map(|id| by_id.remove(id)).chain(loose);
    for resp in responses {
        let n = resp.idless.max(1);
        r.api_responses += n;
        r.tokens.add(&resp.usage);
        let t = &threads[resp.thread];
        let model = resp.model.unwrap_or("unknown");
        r.by_model
            .entry(model.to_owned())
            .or_default()
            .add(&resp.usage);
        let ty = match (t.agent_id, t.agent_type) {
            (None, _) => MAIN,
            (Some(_), Some(ty)) => ty,
            (Some(_), None) => "unknown",
        };
        r.by_agent_type
            .entry(ty.to_owned())
            .or_default()
            .add(&resp.usage);
        r.by_day
            .entry(resp.day.to_owned())
            .or_default()
            .add(&resp.usage);
        let th = &mut per_thread[resp.thread];
        th.api_responses += n;
        th.tokens.add(&resp.usage);
        if t.agent_id.is_some() {
            r.subagent_tokens.add(&resp.usage);
        }
    }
    r.naive_tokens = Tokens::from(naive);
    for (t, th) in threads.iter().zip(per_thread) {
        let key = t.agent_id.unwrap_or(MAIN).to_owned();
        let e = r.by_thread.entry(key).or_default();
        e.tokens.add(&Usage {
            input: th.tokens.input,
            output: th.tokens.output,
            cache_creation_input: th.tokens.cache_creation_input,
            cache_read_input: th.tokens.cache_read_input,
        });
        e.api_responses += th.api_responses;
        e.usage_lines_seen += th.usage_lines_seen;
        e.usage_without_message_id += th.usage_without_message_id;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::parse;
    use std::path::Path;

    fn fixture(rel: &str) -> Vec<u8> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/public")
            .join(rel);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn main_only(body: &[u8]) -> Report {
        let p = parse(body);
        count(&[ThreadInput {
            agent_id: None,
            agent_type: None,
            lines: &p.lines,
        }])
    }

    /// git-ai's real Claude Code transcript: 23 usage lines for 13 API
    /// responses. Hand-computed (bucket-wise max per message id, then sum):
    /// input 57, output 3306, cache creation 28933, cache read 293447.
    #[test]
    fn the_git_ai_fixture_counts_each_response_once() {
        let r = main_only(&fixture("git-ai/tests/fixtures/example-claude-code.jsonl"));
        assert_eq!(r.usage_lines_seen, 23);
        assert_eq!(r.api_responses, 13);
        assert_eq!(
            r.tokens,
            Tokens {
                input: 57,
                output: 3306,
                cache_creation_input: 28933,
                cache_read_input: 293447,
                total: 325743,
            }
        );
        // Naive summing says 573,645: 1.76× too high on this file.
        assert_eq!(r.naive_tokens.total, 573645);
        assert_eq!(r.by_model.len(), 1);
        assert_eq!(r.by_model["claude-sonnet-4-20250514"].total, 325743);
        assert_eq!(r.usage_without_message_id, 0);
    }

    /// The claude-code-log showcase: 5 main responses and 1 sub-agent
    /// response, each 120 in + 40 out.
    #[test]
    fn sub_agents_are_included_and_attributed_by_type() {
        let root =
            "claude-code-log/test/test_data/minimal_showcase/55550000-0000-4000-8000-000000000001";
        let main = parse(&fixture(&format!("{root}.jsonl")));
        let sub = parse(&fixture(&format!("{root}/subagents/agent-showcol1.jsonl")));
        let r = count(&[
            ThreadInput {
                agent_id: None,
                agent_type: None,
                lines: &main.lines,
            },
            ThreadInput {
                agent_id: Some("showcol1"),
                agent_type: Some("general-purpose"),
                lines: &sub.lines,
            },
        ]);
        assert_eq!(r.api_responses, 6);
        assert_eq!(r.tokens.total, 6 * 160);
        assert_eq!(r.by_agent_type[MAIN].total, 5 * 160);
        assert_eq!(r.by_agent_type["general-purpose"].total, 160);
        assert_eq!(r.subagent_tokens.total, 160);
        assert_eq!(r.by_thread["showcol1"].api_responses, 1);
        assert_eq!(r.by_day["2026-06-15"].total, 960);
        assert!((r.subagent_share() - 1.0 / 6.0).abs() < 1e-9);
    }

    /// Hand-made lines: one response streamed as three lines with growing
    /// output, a progress line and a tool result echoing usage, and a usage
    /// without an id. Naive summing says 3.9× the truth here.
    #[test]
    fn partials_echoes_and_idless_usage() {
        let lines = [
            r#"{"type":"assistant","timestamp":"2026-02-01T10:00:00Z","message":{"id":"msg_a","model":"claude-opus-4","role":"assistant","content":[{"type":"thinking","thinking":""}],"usage":{"input_tokens":10,"cache_read_input_tokens":1000,"output_tokens":1}}}"#,
            r#"{"type":"assistant","timestamp":"2026-02-01T10:00:01Z","message":{"id":"msg_a","model":"claude-opus-4","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"cache_read_input_tokens":1000,"output_tokens":50}}}"#,
            r#"{"type":"assistant","timestamp":"2026-02-01T10:00:02Z","message":{"id":"msg_a","model":"claude-opus-4","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}],"usage":{"input_tokens":10,"cache_read_input_tokens":1000,"output_tokens":90}}}"#,
            r#"{"type":"progress","data":{"message":{"type":"assistant","message":{"id":"msg_sub","usage":{"input_tokens":500,"output_tokens":500}}}}}"#,
            r#"{"type":"user","toolUseResult":{"usage":{"input_tokens":700,"output_tokens":700}},"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#,
            r#"{"type":"assistant","timestamp":"2026-02-02T09:00:00Z","message":{"model":"claude-haiku-4","role":"assistant","content":[{"type":"text","text":"no id"}],"usage":{"input_tokens":5,"output_tokens":5}}}"#,
        ];
        let body = lines.join("\n");
        let r = main_only(body.as_bytes());
        assert_eq!(
            r.usage_lines_seen, 4,
            "progress and toolUseResult are not API responses"
        );
        assert_eq!(r.api_responses, 2);
        assert_eq!(r.usage_without_message_id, 1);
        assert_eq!(r.tokens.input, 15);
        assert_eq!(r.tokens.output, 95);
        assert_eq!(r.tokens.cache_read_input, 1000);
        assert_eq!(r.tokens.total, 1110);
        assert_eq!(r.by_model["claude-opus-4"].total, 1100);
        assert_eq!(r.by_model["claude-haiku-4"].total, 10);
        assert_eq!(r.by_day["2026-02-01"].total, 1100);
        // Summing every usage line: 3 × 1010 + 141 + 10 = 3181.
        assert_eq!(r.naive_tokens.total, 3181);
        assert!(r.naive_tokens.total > 2 * r.tokens.total);
        // A naive reader that also took the echoes: 3181 + 1000 + 1400.
        let naive_with_echoes = 3181 + 1000 + 1400;
        assert!(naive_with_echoes as f64 / r.tokens.total as f64 > 5.0);
    }

    #[test]
    fn a_message_id_in_two_threads_counts_once() {
        let l = r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":7}}}"#;
        let p = parse(l.as_bytes());
        let r = count(&[
            ThreadInput {
                agent_id: None,
                agent_type: None,
                lines: &p.lines,
            },
            ThreadInput {
                agent_id: Some("a"),
                agent_type: Some("Explore"),
                lines: &p.lines,
            },
        ]);
        assert_eq!(r.tokens.total, 7);
        assert_eq!(r.by_thread[MAIN].tokens.total, 7);
        assert_eq!(r.by_thread["a"].tokens.total, 0);
        assert_eq!(r.by_thread["a"].usage_lines_seen, 1);
    }

    /// What the projection keeps per record, added per session, says what
    /// counting the bodies says — through a JSON round trip, across
    /// threads sharing a message id, with partials, echoes and id-less
    /// usage.
    #[test]
    fn tables_added_per_session_equal_counting_the_bodies() {
        let root =
            "claude-code-log/test/test_data/minimal_showcase/55550000-0000-4000-8000-000000000001";
        let main = parse(&fixture(&format!("{root}.jsonl")));
        let sub = parse(&fixture(&format!("{root}/subagents/agent-showcol1.jsonl")));
        let git_ai = parse(&fixture("git-ai/tests/fixtures/example-claude-code.jsonl"));
        let hand = parse(
            concat!(
                r#"{"type":"assistant","timestamp":"2026-02-01T10:00:00Z","message":{"id":"msg_a","model":"claude-opus-4","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}"#,
                "\n",
                r#"{"type":"assistant","timestamp":"2026-02-02T10:00:00Z","message":{"id":"msg_a","model":"<synthetic>","content":[],"usage":{"input_tokens":10,"output_tokens":90}}}"#,
                "\n",
                r#"{"type":"assistant","timestamp":"2026-02-02T10:00:01Z","message":{"model":"claude-haiku-4","content":[],"usage":{"input_tokens":5,"output_tokens":5}}}"#,
                "\n",
                r#"{"type":"assistant","message":{"content":[],"usage":{"input_tokens":2}}}"#,
                "\n",
                r#"{"type":"progress","data":{"message":{"type":"assistant","message":{"id":"x","usage":{"input_tokens":500}}}}}"#,
                "\n",
            )
            .as_bytes(),
        );
        // The same id in a later thread with larger output and another day.
        let again = parse(
            br#"{"type":"assistant","timestamp":"2026-02-03T00:00:00Z","message":{"id":"msg_a","content":[],"usage":{"input_tokens":10,"output_tokens":120}}}"#,
        );
        let threads = [
            (None, None, &main.lines),
            (Some("showcol1"), Some("general-purpose"), &sub.lines),
            (Some("g"), None, &git_ai.lines),
            (Some("h"), Some("Explore"), &hand.lines),
            (Some("h2"), Some("Plan"), &again.lines),
        ];
        let inputs: Vec<ThreadInput<'_>> = threads
            .iter()
            .map(|(a, t, l)| ThreadInput {
                agent_id: *a,
                agent_type: *t,
                lines: l,
            })
            .collect();
        let want = count(&inputs);
        let tables: Vec<TokenTable> = threads
            .iter()
            .map(|(_, _, l)| {
                let json = serde_json::to_string(&TokenTable::of(l)).unwrap();
                serde_json::from_str(&json).unwrap()
            })
            .collect();
        let got = combine(
            &threads
                .iter()
                .zip(&tables)
                .map(|((a, t, _), table)| TableInput {
                    agent_id: *a,
                    agent_type: *t,
                    table,
                })
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::to_value(&want).unwrap()
        );
        assert_eq!(got.tokens.total, 6 * 160 + 325743 + 130 + 10 + 2);
        assert_eq!(got.usage_without_message_id, 2);
        assert_eq!(got.by_day["2026-02-03"].total, 130, "the last line's day");
        assert_eq!(got.by_model["claude-opus-4"].total, 130);
        assert_eq!(got.by_agent_type["Explore"].total, 130 + 10 + 2);
        assert_eq!(got.by_thread["h2"].tokens.total, 0);
        assert_eq!(TokenTable::of(&git_ai.lines).total(), 325743);
    }
}
