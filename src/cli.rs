//! The command line: argument parsing, dispatch and rendering (text and
//! `--json`).
//!
//! Owns: clap definitions, exit codes, text shapes, sanitising everything
//! printed. Never holds domain logic: each verb calls one function of a
//! domain module and renders what it returns.

pub use crate::journal_cli::JournalCmd;
pub use crate::render::{progress_enabled, sanitize};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::clock;
use crate::corpus::Corpus;
use crate::drain::{self, Budget};
use crate::hook::run::{self as hook_run, HookVerb};
use crate::{history, repo, stage, store};

/// Exit status of a verb that failed in a way the user must act on.
pub const EXIT_FAILURE: i32 = 1;

#[derive(Parser, Debug)]
#[command(
    name = "abcd",
    version,
    about = "A local, secret-redacted, append-only corpus of your AI coding sessions",
    long_about = "abcd keeps, for every git repository you work in, a local, secret-redacted, \
append-only corpus of your Claude Code sessions: every main thread and every sub-agent, with lineage. \
State lives under $ABCD_HOME (default ~/.abcd)."
)]
pub struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// The repository to act on (default: the current directory).
    #[arg(long, global = true, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read, drain and manage the corpus of this repository.
    #[command(subcommand)]
    History(HistoryCmd),
    /// Inspect, verify, replay and repair this repository's journal.
    #[command(subcommand)]
    Journal(JournalCmd),
    /// Claude Code hook entry points (wired in hooks/hooks.json). Always exit 0.
    Hook(HookArgs),
    /// Redact a file (or stdin) with the same engine capture uses.
    Redact(RedactArgs),
}

#[derive(Subcommand, Debug)]
pub enum HistoryCmd {
    /// List stored records, newest first.
    List {
        /// Only this session: its main thread first, then every sub-agent.
        #[arg(long)]
        session: Option<String>,
    },
    /// Show one record: exact file name, then agent id, then session id.
    Show { key: String },
    /// Staged (unredacted, awaiting capture), overdue and quarantined entries.
    Staged {
        /// Survey every repository in the store (counts, sizes, names only).
        #[arg(long)]
        all_repos: bool,
    },
    /// Redact and store everything staged, now.
    Drain,
    /// Delete one staged or quarantined transcript (irreversible).
    Discard {
        /// Bare file name ending in .raw, as `history staged` prints it.
        file: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Capture a transcript file directly (redacted, then stored).
    Capture {
        /// A transcript file, or - for stdin.
        file: String,
        /// Session id (default: the file name without extension).
        #[arg(long)]
        session: Option<String>,
        /// Sub-agent id, for a sub-agent transcript.
        #[arg(long)]
        agent: Option<String>,
        /// Sub-agent type.
        #[arg(long)]
        agent_type: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct HookArgs {
    /// session-start | session-end | stop | subagent-stop | user-prompt-submit (alias prompt-router)
    pub verb: String,
}

#[derive(Args, Debug)]
pub struct RedactArgs {
    /// File to redact, or - for stdin (the default).
    pub file: Option<String>,
    /// Print findings as JSON (rule, kind, line, column, length) instead of text.
    #[arg(long)]
    pub report: bool,
    /// Per finding: rule id, byte range and the context's shape, never the secret.
    #[arg(long)]
    pub explain: bool,
}

/// The argument vectors the hooks use (`abcd hook VERB`, with `--json`
/// before or after), parsed without building clap's whole command tree:
/// that costs ~0.2 ms, a tenth of a hook's budget. Anything else (help,
/// `--repo`, a flag-like verb) answers `None` and goes through clap, which
/// gives exactly this result for these vectors (tested).
pub fn hook_fast_path(args: &[std::ffi::OsString]) -> Option<Cli> {
    let rest: Vec<&str> = args
        .get(1..)?
        .iter()
        .map(|a| a.to_str())
        .collect::<Option<_>>()?;
    let (verb, json) = match rest.as_slice() {
        ["hook", verb] => (*verb, false),
        ["hook", verb, "--json"] | ["--json", "hook", verb] => (*verb, true),
        _ => return None,
    };
    (!verb.is_empty() && !verb.starts_with('-')).then(|| Cli {
        json,
        repo: None,
        command: Command::Hook(HookArgs {
            verb: verb.to_owned(),
        }),
    })
}

/// Runs the CLI; returns the process exit status.
pub fn main_with(cli: Cli) -> i32 {
    let out = &mut io::stdout().lock();
    let err = &mut io::stderr().lock();
    match run(cli, out, err) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "abcd: {}", sanitize(&e));
            EXIT_FAILURE
        }
    }
}

fn print_json<T: Serialize>(out: &mut dyn Write, v: &T) -> Result<(), String> {
    let s = serde_json::to_string(v).map_err(|e| e.to_string())?;
    writeln!(out, "{s}").map_err(|e| e.to_string())
}

fn home() -> Result<PathBuf, String> {
    store::abcd_home().map_err(|e| e.to_string())
}

/// The repository the user means: `--repo`, else the current directory.
fn repo_info(cli_repo: &Option<PathBuf>, home: &Path) -> Result<repo::RepoInfo, String> {
    let dir = match cli_repo {
        Some(p) => p.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    repo::resolve_repo(&dir, home).map_err(|e| {
        format!("{e}\n  abcd keys its corpus by the repository's root commit: run it inside a git repository with at least one commit, or pass --repo <path>")
    })
}

fn open_corpus(
    cli_repo: &Option<PathBuf>,
    create: bool,
) -> Result<(Option<Corpus>, repo::RepoInfo, PathBuf), String> {
    let home = home()?;
    let info = repo_info(cli_repo, &home)?;
    let corpus = if create {
        Some(Corpus::open(&home, &info.root_sha).map_err(|e| e.to_string())?)
    } else {
        Corpus::open_existing(&home, &info.root_sha).map_err(|e| e.to_string())?
    };
    if let Some(c) = &corpus {
        let (caught_up, adopted) = c.refresh().map_err(|e| e.to_string())?;
        // Blobs a crashed writer left without a journal entry were just
        // adopted as staged: say so once, whatever the verb.
        for a in adopted {
            eprintln!("abcd: adopted the staged file {a}, left by a crashed writer (or an older abcd) without a journal entry");
        }
        // Events the projections just had to skip: said once, when met
        // (`journal verify` and `history staged` keep reporting them).
        for f in &caught_up.faults {
            eprintln!(
                "abcd: journal event seq {} could not be applied to the projections ({}); it was skipped — run `abcd journal verify`",
                f.seq,
                sanitize(&f.reason)
            );
        }
    }
    Ok((corpus, info, home))
}

pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, String> {
    let json = cli.json;
    match cli.command {
        Command::Hook(h) => {
            let verb = match h.verb.as_str() {
                "session-start" => HookVerb::SessionStart,
                "session-end" => HookVerb::SessionEnd,
                "stop" => HookVerb::Stop,
                "subagent-stop" => HookVerb::SubagentStop,
                "user-prompt-submit" | "prompt-router" => HookVerb::UserPromptSubmit,
                other => {
                    // Hooks fail open: an unknown verb explains itself and exits 0.
                    let _ = writeln!(
                        err,
                        "abcd hook: unknown hook verb {:?}; nothing done",
                        sanitize(other)
                    );
                    return Ok(0);
                }
            };
            // Up to the first complete JSON object, within the deadline;
            // never waits for EOF (the harness may hold the pipe open).
            let read = crate::hook::stdin::read_payload(
                crate::hook::payload::PAYLOAD_CAP,
                crate::hook::stdin::STDIN_DEADLINE,
            );
            let result = match read {
                Err(e) => {
                    let msg = sanitize(&e.to_string());
                    let _ = writeln!(err, "abcd hook {}: {msg}", verb.name());
                    let mut r = hook_run::HookResult::not_captured(verb);
                    r.warnings.push(msg);
                    r
                }
                Ok(stdin) => {
                    // A bug must not turn into a non-zero exit the harness
                    // acts on: the panic message is already on stderr; the
                    // hook still exits 0 (nothing was acknowledged, so
                    // nothing is lost).
                    let run =
                        std::panic::AssertUnwindSafe(|| hook_run::run(verb, &stdin, &mut *err));
                    std::panic::catch_unwind(run).unwrap_or_else(|_| {
                        let _ = writeln!(
                            err,
                            "abcd hook {}: internal error (see the panic above); nothing was captured by this hook — please report it",
                            verb.name()
                        );
                        hook_run::HookResult::not_captured(verb)
                    })
                }
            };
            if json {
                let _ = print_json(out, &result);
            }
            Ok(0)
        }
        Command::Redact(r) => {
            let root = std::env::current_dir().ok().and_then(|d| {
                home()
                    .ok()
                    .and_then(|h| repo::resolve_repo(&d, &h).ok())
                    .map(|i| i.root)
            });
            let input = r.file.as_deref().filter(|f| *f != "-").map(Path::new);
            if r.explain {
                return Ok(abcd_redact::run_redact_explain(
                    input,
                    root.as_deref(),
                    out,
                    err,
                ));
            }
            Ok(abcd_redact::run_redact_command(
                input,
                r.report || json,
                root.as_deref(),
                out,
                err,
            ))
        }
        Command::History(cmd) => history_cmd(cmd, &cli.repo, json, out, err),
        Command::Journal(cmd) => crate::journal_cli::run(cmd, &cli.repo, json, out, err),
    }
}

fn history_cmd(
    cmd: HistoryCmd,
    repo_arg: &Option<PathBuf>,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, String> {
    let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
        writeln!(out, "{}", sanitize(&s)).map_err(|e| e.to_string())
    };
    let now = clock::now_unix_ns();
    match cmd {
        HistoryCmd::List { session } => {
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            let records = match (&corpus, &session) {
                (None, _) => Vec::new(),
                (Some(c), Some(s)) => history::list_session(c, s).map_err(|e| e.to_string())?,
                (Some(c), None) => history::list(c).map_err(|e| e.to_string())?,
            };
            if json {
                print_json(out, &records)?;
                return Ok(0);
            }
            if records.is_empty() {
                match &session {
                    Some(s) => w(out, format!("abcd history — no transcript stored for session {s} in this repository"))?,
                    None => w(out, "abcd history — no transcripts stored for this repository".into())?,
                }
                return Ok(0);
            }
            for r in &records {
                w(out, list_line(r))?;
            }
            if let Some(s) = &session {
                w(
                    out,
                    format!(
                        "\n{} record(s) for session {s} — the main thread first, then every sub-agent it spawned.",
                        records.len()
                    ),
                )?;
            }
            Ok(0)
        }
        HistoryCmd::Show { key } => {
            let (corpus, info, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                return Err(format!(
                    "history: no record for {key:?}: nothing is stored for this repository ({}) yet",
                    info.root_sha
                ));
            };
            let shown = history::show(&corpus, &key).map_err(|e| e.to_string())?;
            if json {
                print_json(out, &shown)?;
                return Ok(0);
            }
            let m = &shown.record.meta;
            w(out, format!("session:    {}", m.session_id))?;
            if let Some(a) = &m.agent_id {
                w(
                    out,
                    format!(
                        "agent:      agent {a} ({})",
                        m.agent_type.as_deref().unwrap_or("type unknown")
                    ),
                )?;
                if let Some(p) = &m.parent_agent_id {
                    w(out, format!("parent:     {p}"))?;
                }
                if m.spawn_depth > 0 {
                    w(out, format!("depth:      {}", m.spawn_depth))?;
                }
                w(
                    out,
                    format!(
                        "spawn:      {}",
                        m.spawn_attribution.as_deref().unwrap_or("unattributed")
                    ),
                )?;
            }
            w(out, format!("captured:   {}", m.captured_at))?;
            w(out, format!("source:     {}", m.source_kind))?;
            w(out, format!("path:       {}", shown.record.path))?;
            w(
                out,
                format!(
                    "redacted:   secrets={} home={}",
                    m.redacted_secrets, m.redacted_home_paths
                ),
            )?;
            if !shown.session_records.is_empty() {
                w(
                    out,
                    format!("also in this session ({}):", shown.session_records.len()),
                )?;
                for r in &shown.session_records {
                    w(out, format!("  {}", list_line(r)))?;
                }
            }
            w(out, "---".into())?;
            write!(out, "{}", sanitize(&shown.body)).map_err(|e| e.to_string())?;
            Ok(0)
        }
        HistoryCmd::Staged { all_repos } => {
            if all_repos {
                let home = home()?;
                let survey = history::survey(&home, now).map_err(|e| e.to_string())?;
                if json {
                    print_json(out, &survey)?;
                    return Ok(0);
                }
                if survey.is_empty() {
                    w(out, "abcd history — no repository in this store is holding unredacted transcript text".into())?;
                    return Ok(0);
                }
                for b in &survey {
                    let mut line = format!(
                        "{}  {}  {} staged ({} bytes)",
                        &b.root_sha[..12],
                        b.name.as_deref().unwrap_or("(unregistered)"),
                        b.staged,
                        b.staged_bytes
                    );
                    if b.overdue > 0 {
                        line.push_str(&format!("  {} OVERDUE", b.overdue));
                    }
                    if b.quarantined > 0 {
                        line.push_str(&format!(
                            "  {} quarantined ({} bytes)",
                            b.quarantined, b.quarantined_bytes
                        ));
                    }
                    if let Some(o) = &b.oldest_staged_at {
                        line.push_str(&format!("  oldest {}", &o[..10.min(o.len())]));
                    }
                    w(out, line)?;
                }
                let total: u64 = survey
                    .iter()
                    .map(|b| b.staged_bytes + b.quarantined_bytes)
                    .sum();
                w(
                    out,
                    format!(
                        "\n{} repositor{} hold {total} bytes of UNREDACTED transcript text.",
                        survey.len(),
                        if survey.len() == 1 { "y" } else { "ies" }
                    ),
                )?;
                return Ok(0);
            }
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                if json {
                    print_json(out, &serde_json::json!({"staged": [], "quarantined": []}))?;
                } else {
                    w(
                        out,
                        "abcd history — nothing staged; every ended session is stored".into(),
                    )?;
                }
                return Ok(0);
            };
            let rep = history::staged(&corpus, now).map_err(|e| e.to_string())?;
            if json {
                print_json(out, &rep)?;
                return Ok(0);
            }
            if rep.staged.is_empty() && rep.quarantined.is_empty() {
                w(
                    out,
                    "abcd history — nothing staged; every ended session is stored".into(),
                )?;
            }
            for e in &rep.staged {
                let who = match &e.agent_id {
                    Some(a) => format!(
                        "{} agent {a}{}",
                        e.session_id,
                        e.agent_type
                            .as_ref()
                            .map(|t| format!(" ({t})"))
                            .unwrap_or_default()
                    ),
                    None => e.session_id.clone(),
                };
                let state = match (&e.error, e.overdue) {
                    (Some(why), _) => format!("NOT DRAINABLE: {why}"),
                    (None, true) => {
                        "OVERDUE (staged more than 7 days ago), awaiting redaction".into()
                    }
                    (None, false) => "awaiting redaction".into(),
                };
                w(
                    out,
                    format!(
                        "{}  {who}  {} bytes  {state}  {}.raw",
                        e.staged_at, e.bytes, e.stem
                    ),
                )?;
            }
            if !rep.staged.is_empty() {
                w(out, format!("\n{} staged transcript(s) hold UNREDACTED text until drained; run `abcd history drain`.", rep.staged.len()))?;
            }
            if !rep.quarantined.is_empty() {
                w(
                    out,
                    "\nQUARANTINED — these can never be redacted; nothing will retry them:".into(),
                )?;
                let mut total = 0;
                for q in &rep.quarantined {
                    total += q.bytes;
                    let who = match &q.agent_id {
                        Some(a) => format!("{} agent {a}", q.session_id),
                        None => q.session_id.clone(),
                    };
                    w(
                        out,
                        format!(
                            "{}  {who}  {} bytes  {}.raw\n    {}",
                            q.quarantined_at.as_deref().unwrap_or("?"),
                            q.bytes,
                            q.stem,
                            q.reason.as_deref().unwrap_or("(no reason note)")
                        ),
                    )?;
                }
                w(out, format!("\n{} quarantined transcript(s) hold {total} bytes of UNREDACTED text indefinitely. Read one, then remove it deliberately with `abcd history discard <file> --yes`.", rep.quarantined.len()))?;
            }
            if !rep.projection_faults.is_empty() {
                w(out, format!("\nPROJECTION FAULTS — {} journal event(s) could not be applied to the projections and were skipped (the journal holds them; nothing is lost):", rep.projection_faults.len()))?;
                for f in &rep.projection_faults {
                    w(
                        out,
                        format!(
                            "  seq {} {}: {}",
                            f.seq,
                            f.event.as_deref().unwrap_or("(undecodable)"),
                            f.reason
                        ),
                    )?;
                }
                w(out, "Run `abcd journal replay --rebuild` to retry them (after upgrading abcd if the reason names a newer format).".into())?;
            }
            if let Some(n) =
                crate::projection::unjournaled_notice(&corpus.lane, &rep.unjournaled_records)
            {
                w(out, format!("\nNOTE: {n}"))?;
            }
            if let Some(g) = &rep.subagent_gap {
                w(out, format!("\nNOTE: this harness fired {} {} time(s) without an agent_transcript_path (first {}, last {}); sub-agent transcripts are not being captured for those.", g.event, g.count, g.first_seen, g.last_seen))?;
            }
            Ok(0)
        }
        HistoryCmd::Drain => {
            let (corpus, info, _) = open_corpus(repo_arg, true)?;
            let corpus = corpus.expect("created");
            let root = info.root.clone();
            let tty = progress_enabled();
            let progress = |done: usize, total: usize| {
                if tty && total > 1 {
                    eprint!("\rdrain: {done}/{total} staged transcript(s) redacted");
                    if done == total {
                        eprintln!();
                    }
                }
            };
            let rep = drain::drain_with_progress(
                &corpus,
                &|| crate::capture::scanner_for(&root),
                Budget::UNBOUNDED,
                now,
                &progress,
            )
            .map_err(|e| e.to_string())?;
            let failed = rep.failed.len();
            if json {
                print_json(out, &rep)?;
            } else {
                if rep.captured.is_empty() && rep.already_stored.is_empty() && rep.failed.is_empty()
                {
                    w(
                        out,
                        "abcd history — nothing staged; nothing to drain".into(),
                    )?;
                }
                for c in &rep.captured {
                    w(
                        out,
                        format!(
                            "stored  {}{}  redacted secrets={} home={}  {}",
                            c.session_id,
                            c.agent_id
                                .as_ref()
                                .map(|a| format!(" agent {a}"))
                                .unwrap_or_default(),
                            c.redacted_secrets,
                            c.redacted_home_paths,
                            c.record
                        ),
                    )?;
                }
                for c in &rep.already_stored {
                    w(
                        out,
                        format!(
                            "already stored  {}{}  {}",
                            c.session_id,
                            c.agent_id
                                .as_ref()
                                .map(|a| format!(" agent {a}"))
                                .unwrap_or_default(),
                            c.record
                        ),
                    )?;
                }
                for f in &rep.failed {
                    let what = if f.quarantined {
                        "QUARANTINED"
                    } else {
                        "FAILED"
                    };
                    w(
                        out,
                        format!(
                            "{what}  {}  {}\n  raw transcript kept (unredacted): {}",
                            f.session_id, f.error, f.path
                        ),
                    )?;
                }
                if rep.extended > 0 {
                    w(
                        out,
                        format!(
                            "{} transcript(s) had grown since staging; the longer copy was stored",
                            rep.extended
                        ),
                    )?;
                }
                for a in &rep.adopted {
                    w(
                        out,
                        format!("adopted {a} (left by a crashed writer without a journal entry)"),
                    )?;
                }
            }
            if failed > 0 {
                let _ = writeln!(
                    err,
                    "abcd history: {failed} staged transcript(s) could not be stored"
                );
                return Ok(EXIT_FAILURE);
            }
            Ok(0)
        }
        HistoryCmd::Discard { file, yes } => {
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                return Err(format!(
                    "history discard: {file} is neither staged nor quarantined for this repository"
                ));
            };
            let rep = history::discard(&corpus, &file, yes).map_err(|e| e.to_string())?;
            if json {
                print_json(out, &rep)?;
            } else {
                w(out, format!("abcd history discard — deleted {} bytes of unredacted transcript, unrecoverably", rep.bytes))?;
                for r in &rep.removed {
                    w(out, format!("  removed: {r}"))?;
                }
            }
            Ok(0)
        }
        HistoryCmd::Capture {
            file,
            session,
            agent,
            agent_type,
        } => {
            let (raw, default_session) = if file == "-" {
                let mut v = Vec::new();
                io::stdin()
                    .lock()
                    .take(stage::RAW_CAP + 1)
                    .read_to_end(&mut v)
                    .map_err(|e| format!("cannot read stdin: {e}"))?;
                if v.len() as u64 > stage::RAW_CAP {
                    return Err(format!(
                        "stdin is over the {}-byte cap; nothing captured",
                        stage::RAW_CAP
                    ));
                }
                (v, None)
            } else {
                let p = Path::new(&file);
                let raw = crate::fsutil::guarded_read(p, stage::RAW_CAP)
                    .map_err(|e| format!("cannot read {file}: {e}"))?;
                (raw, p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            };
            let session_id = session
                .or(default_session)
                .ok_or("history capture: --session is required when reading stdin")?;
            let lineage = crate::lineage::Lineage {
                session_id,
                spawn_attribution: agent
                    .as_ref()
                    .map(|_| crate::lineage::SpawnAttribution::Unattributed),
                agent_id: agent,
                agent_type,
                ..Default::default()
            };
            // The new-input rule, before the store is even opened: an id
            // that breaks it writes nothing.
            lineage
                .validate()
                .map_err(|e| format!("history capture: {e}; nothing was written"))?;
            let (corpus, info, _) = open_corpus(repo_arg, true)?;
            let corpus = corpus.expect("created");
            let r = crate::capture::capture_bytes(&corpus, &info.root, &lineage, &raw)
                .map_err(|e| format!("history capture: {e}; nothing was written"))?;
            if json {
                print_json(out, &r)?;
            } else if r.wrote {
                w(out, format!("abcd history capture — stored {}\n  path:     {}\n  redacted: secrets={} home={}", r.session_id, corpus.lane.records_dir().join(&r.record).display(), r.redacted_secrets, r.redacted_home_paths))?;
            } else {
                w(
                    out,
                    format!(
                        "abcd history capture — {} already stored as {} (no-op)",
                        r.session_id, r.record
                    ),
                )?;
            }
            let _ = err;
            Ok(0)
        }
    }
}

fn list_line(r: &history::Listed) -> String {
    let m = &r.meta;
    let at = &m.captured_at[..19.min(m.captured_at.len())];
    let who = match &m.agent_id {
        Some(a) => format!(
            " agent {a} ({})",
            m.agent_type.as_deref().unwrap_or("type unknown")
        ),
        None => String::new(),
    };
    format!(
        "{at}Z  {}{who}  {}  redacted secrets={} home={}  {}",
        m.session_id, m.source_kind, m.redacted_secrets, m.redacted_home_paths, r.file
    )
}

/// The command reference (`commands/reference.md`), generated from the clap
/// definitions so it cannot drift: `tests/cli_reference.rs` fails when the
/// checked-in file differs.
pub fn reference_markdown() -> String {
    use clap::CommandFactory;
    fn walk(cmd: &mut clap::Command, path: &str, out: &mut String) {
        let name = if path.is_empty() {
            cmd.get_name().to_owned()
        } else {
            format!("{path} {}", cmd.get_name())
        };
        let help = cmd.render_long_help().to_string();
        out.push_str(&format!(
            "## `{name}`\n\n```text\n{}\n```\n\n",
            help.trim_end()
        ));
        let mut subs: Vec<clap::Command> = cmd.get_subcommands().cloned().collect();
        for sub in subs.iter_mut() {
            if sub.get_name() == "help" {
                continue;
            }
            walk(sub, &name, out);
        }
    }
    let mut out = String::from(
        "# abcd command reference\n\nGenerated from the CLI definitions by `ABCD_UPDATE_REFERENCE=1 cargo test --test cli_reference`; CI fails when it is stale.\n\n",
    );
    let mut cmd = Cli::command();
    cmd.build();
    walk(&mut cmd, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn argv(s: &[&str]) -> Vec<OsString> {
        std::iter::once("abcd")
            .chain(s.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn hook_of(cli: &Cli) -> (&str, bool, bool) {
        match &cli.command {
            Command::Hook(h) => (h.verb.as_str(), cli.json, cli.repo.is_some()),
            other => panic!("not a hook: {other:?}"),
        }
    }

    #[test]
    fn hook_fast_path_agrees_with_clap() {
        for v in [
            &["hook", "subagent-stop"][..],
            &["hook", "stop", "--json"],
            &["--json", "hook", "session-start"],
            &["hook", "no-such-verb"],
        ] {
            let fast = hook_fast_path(&argv(v)).unwrap_or_else(|| panic!("{v:?} not fast"));
            let slow = Cli::try_parse_from(argv(v)).unwrap();
            assert_eq!(hook_of(&fast), hook_of(&slow), "{v:?}");
        }
    }

    #[test]
    fn everything_else_goes_through_clap() {
        for v in [
            &["hook"][..],
            &["hook", "--help"],
            &["hook", "-h"],
            &["hook", "stop", "extra"],
            &["--json", "hook", "stop", "--json"],
            &["--repo", "/x", "hook", "stop"],
            &["history", "list"],
            &[],
        ] {
            assert!(hook_fast_path(&argv(v)).is_none(), "{v:?}");
        }
    }
}
