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
    /// The repository to act on (default: the current directory); a lane
    /// key (`dir-…` for a directory lane, as `history list --all-repos
    /// --json` shows) when no such path exists.
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
    /// Wire this abcd into Claude Code: write a local plugin marketplace and
    /// install the plugin from it (with `claude` on PATH; otherwise print the
    /// slash commands to type). Never touches the store.
    Setup {
        /// Uninstall the plugin and remove the marketplace instead (the store is kept).
        #[arg(long)]
        uninstall: bool,
    },
    /// Check the whole capture chain (binary, plugin, hooks, store, this
    /// repository, redaction config, journal) and say what to fix. Exits 0
    /// only when capture will work.
    Doctor,
    /// Print a shell completion script.
    Completions {
        /// bash, zsh or fish (also elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout, e.g. `abcd man > abcd.1`.
    Man,
    /// Exchange this repository's redacted corpus with a git remote (default:
    /// the repository's `origin`) under `refs/abcd/…`; every machine that has
    /// exchanged everything holds the same records. `sync status` reports
    /// without touching the network.
    Sync(SyncArgs),
}

#[derive(Args, Debug)]
pub struct SyncArgs {
    #[command(subcommand)]
    pub status: Option<SyncCmd>,
    /// A remote name of this repository, or a URL (default: `git config
    /// abcd.remote`, else `origin`).
    #[arg(long, value_name = "NAME|URL")]
    pub remote: Option<String>,
    /// Publish this machine's events only; import nothing.
    #[arg(long, conflicts_with = "pull_only")]
    pub push_only: bool,
    /// Import other machines' events only; publish nothing.
    #[arg(long)]
    pub pull_only: bool,
    /// Fetch and count what would be imported and published; change nothing
    /// in the store and push nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Sync in the background from the session-start hook (at most every
    /// 10 minutes, killed after 2 minutes; with --remote, that remote), or
    /// stop doing so. Hooks never wait for it.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub auto: Option<String>,
    /// Kill this sync (safely: the next one finishes it) after N seconds.
    #[arg(long, hide = true, value_name = "N")]
    pub deadline_secs: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub enum SyncCmd {
    /// This machine's id, the remote, what is published and pushed, and
    /// every other machine as last fetched (no network).
    Status,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCmd {
    /// List stored sessions, newest first: start, duration, tokens, size, title, and the sub-agent tree.
    List {
        /// Only this session: its main thread first, then every sub-agent.
        #[arg(long)]
        session: Option<String>,
        /// Sessions that started at or after this time (YYYY-MM-DD or RFC 3339).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Sessions that started before this time (YYYY-MM-DD or RFC 3339).
        #[arg(long, value_name = "WHEN")]
        until: Option<String>,
        /// At most this many sessions.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Sessions with a sub-agent of this type.
        #[arg(long, value_name = "TYPE")]
        agent_type: Option<String>,
        /// Every repository in the store, each named by its work-tree path when a transcript names it.
        #[arg(long, conflicts_with = "session")]
        all_repos: bool,
    },
    /// Show one record as readable text: exact file name, then agent id, then session id.
    Show {
        /// A record file name (as `history list` prints it), an agent id or a session id.
        key: String,
        /// Print the stored (redacted) JSONL instead of the rendered text.
        #[arg(long)]
        raw: bool,
    },
    /// Render a session (main thread plus every sub-agent at its spawn point) as Markdown, with telemetry JSON beside it.
    Reconstruct {
        /// The session id.
        session: String,
        /// An existing directory for `<session>.md` and `<session>.telemetry.json`, or - for stdout.
        #[arg(long, default_value = "-", value_name = "DIR|-")]
        out: String,
        /// `full` renders every turn; `spine` keeps each sub-agent's first and last turn.
        #[arg(long, value_enum, default_value_t = ModeArg::Full)]
        mode: ModeArg,
        /// Cap on one tool input or result, in bytes (the rest is elided and counted).
        #[arg(long, default_value_t = crate::reconstruct::DEFAULT_MAX_BLOCK_BYTES, value_name = "N")]
        max_block_bytes: usize,
    },
    /// Sessions, sub-agents by type and depth, tokens by model, agent type and day (once per API message id), the sub-agent share.
    Stats {
        /// Sessions that started at or after this time (YYYY-MM-DD or RFC 3339).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Sessions that started before this time.
        #[arg(long, value_name = "WHEN")]
        until: Option<String>,
        /// Every repository in the store, summed (with sessions per repository).
        #[arg(long)]
        all_repos: bool,
    },
    /// Export a session as Markdown, JSON or one self-contained HTML page; --all writes every session and an index page.
    Export {
        /// The session id (omit with --all).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session: Option<String>,
        /// Every session of this repository (HTML only), into the directory --out.
        #[arg(long, requires = "out")]
        all: bool,
        #[arg(long, value_enum, default_value_t = FormatArg::Md)]
        format: FormatArg,
        /// Output file (a directory with --all); default stdout.
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
    },
    /// Full-text search over the redacted corpus (SQLite FTS5): words, "phrases", prefix*; newest hits first, each naming the record, the turn and a snippet.
    Search {
        /// Words (all must match), "a phrase", prefix*, OR, NOT.
        query: String,
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Only sub-agents of this type.
        #[arg(long, value_name = "TYPE")]
        agent_type: Option<String>,
        /// Only text of this role (tool = tool calls and their results).
        #[arg(long, value_enum)]
        role: Option<RoleArg>,
        /// Only calls of (and results from) this tool.
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
        /// Blocks written at or after this time (YYYY-MM-DD or RFC 3339).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Blocks written before this time.
        #[arg(long, value_name = "WHEN")]
        until: Option<String>,
        /// Every repository in the store.
        #[arg(long)]
        all_repos: bool,
        /// At most this many hits (across every repository with --all-repos).
        #[arg(long, default_value_t = crate::search::DEFAULT_LIMIT, value_name = "N")]
        limit: usize,
        /// Best matches first (BM25) instead of newest first; scores every match, so slower for common words.
        #[arg(long)]
        rank: bool,
    },
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
        /// The staged entry: its file name as `history staged` prints it
        /// (`<stem>.raw`), or the bare `stem` of `history staged --json`.
        file: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Remove values, or whole records, from every byte the store holds for
    /// this repository (journaled; later captures keep them out).
    Forget {
        /// Text to remove everywhere it occurs (repeatable; at least 8
        /// characters unless --force-short). It is never stored: only its
        /// digests are kept, so a later capture redacts it too.
        #[arg(long = "value", value_name = "VALUE")]
        values: Vec<String>,
        /// A record to remove whole (and what it superseded): a record file
        /// name, an agent id or a session id, resolved as `history show`
        /// does (repeatable).
        #[arg(long = "record", value_name = "KEY")]
        records: Vec<String>,
        /// Apply the values to every repository in the store.
        #[arg(long)]
        all_repos: bool,
        /// Accept a value shorter than 8 characters.
        #[arg(long)]
        force_short: bool,
        /// Do it (without it, only report what would change).
        #[arg(long)]
        yes: bool,
    },
    /// Repair sub-agent records an older abcd filed under a composite
    /// session id (`<prefix>--agent-<id>`): full session id from the body,
    /// agent id from the name, spawn point from the harness sidecars.
    /// Journaled; reports only, unless --apply.
    Migrate {
        /// Write the repairs (without it, only report what would change).
        #[arg(long)]
        apply: bool,
        /// Where to look for the harness's `agent-<id>.meta.json` sidecars
        /// (repeatable; default: ~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects).
        #[arg(long = "sidecar-root", value_name = "DIR")]
        sidecar_roots: Vec<PathBuf>,
    },
    /// Bring in the transcripts Claude Code keeps on disk (default
    /// $CLAUDE_CONFIG_DIR/projects or ~/.claude/projects), each session into
    /// the repository its cwd belongs to; idempotent.
    Ingest {
        /// Transcript files or directories (walked to depth 8, never
        /// following a symlink).
        paths: Vec<PathBuf>,
        /// Only this repository: sessions of others are skipped
        /// (owned-elsewhere); adopted orphans go here.
        #[arg(long, value_name = "REPO")]
        into: Option<PathBuf>,
        /// Store the orphans (no repository found) of this project
        /// directory name into --into (repeatable).
        #[arg(
            long = "adopt",
            value_name = "PROJECT",
            requires = "into",
            allow_hyphen_values = true
        )]
        adopt: Vec<String>,
        /// Report what would be stored; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Threads redacting while this one reads and stores (default: one
        /// per core).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: Option<u16>,
    },
    /// Capture a transcript file directly (redacted, then stored).
    Capture {
        /// A transcript file, or - for stdin.
        file: String,
        /// Session id, only for a transcript whose lines carry none (an
        /// older shape); one that contradicts the lines is refused.
        #[arg(long)]
        session: Option<String>,
        /// Sub-agent id, only where the lines carry no `agentId`.
        #[arg(long)]
        agent: Option<String>,
        /// Sub-agent type.
        #[arg(long)]
        agent_type: Option<String>,
    },
}

/// `--mode` of `history reconstruct`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Full,
    Spine,
}

/// `--role` of `history search`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum RoleArg {
    User,
    Assistant,
    Tool,
}

/// `--format` of `history export`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FormatArg {
    Md,
    Html,
    Json,
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

/// Parses a `--since`/`--until` value of `history VERB`.
fn time_flag(verb: &str, flag: &str, v: &Option<String>) -> Result<Option<u64>, String> {
    match v {
        None => Ok(None),
        Some(t) => crate::overview::parse_when(t).map(Some).ok_or_else(|| {
            format!("history {verb}: {flag} {t:?} is not a date (YYYY-MM-DD) or an RFC 3339 time")
        }),
    }
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

fn sync_cmd(
    repo_arg: &Option<PathBuf>,
    args: SyncArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, String> {
    let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
        writeln!(out, "{}", sanitize(&s)).map_err(|e| e.to_string())
    };
    let (corpus, info, _) = open_corpus(repo_arg, true)?;
    let corpus = corpus.expect("opened with create");
    if info.kind == store::LaneKind::Directory {
        return Err(format!(
            "{} is in no git repository with a commit, so its sessions are kept in a directory lane, which has no remote to sync through; commit once (the lane then moves into the repository's own) and run `abcd sync` again",
            info.root.display()
        ));
    }
    if args.status.is_some() {
        let st = crate::sync::status(&corpus, &info.root).map_err(|e| e.to_string())?;
        if json {
            print_json(out, &st)?;
            return Ok(0);
        }
        w(out, format!("abcd sync status — machine {}", st.machine))?;
        w(
            out,
            format!(
                "  remote: {}",
                st.remote.as_deref().map(sanitize).unwrap_or_else(|| {
                    "(none: pass --remote or `git config abcd.remote <url>`)".into()
                })
            ),
        )?;
        match &st.own_commit {
            Some(c) => w(
                out,
                format!(
                    "  published: commit {} ({}); {} event(s) of this machine to publish",
                    &c[..12.min(c.len())],
                    if st.own_pushed {
                        "pushed"
                    } else {
                        "not pushed yet"
                    },
                    st.unpublished_events
                ),
            )?,
            None => w(
                out,
                format!(
                    "  published: nothing yet; {} event(s) of this machine to publish",
                    st.unpublished_events
                ),
            )?,
        }
        for m in &st.machines {
            w(
                out,
                format!(
                    "  machine {}: {} segment(s), {} imported",
                    m.machine, m.segments, m.imported_segments
                ),
            )?;
        }
        return Ok(0);
    }
    if let Some(a) = &args.auto {
        let on = a == "on";
        crate::sync::auto::set(&corpus, on, args.remote.as_deref())
            .map_err(|e| format!("abcd sync --auto: {e}"))?;
        if json {
            print_json(out, &serde_json::json!({"auto": on, "remote": args.remote}))?;
        } else if on {
            w(out, "abcd sync --auto on — the session-start hook now syncs this repository in the background (at most every 10 minutes, for at most 2 minutes); `abcd sync --auto off` stops it".into())?;
        } else {
            w(
                out,
                "abcd sync --auto off — no background sync for this repository".into(),
            )?;
        }
        return Ok(0);
    }
    if let Some(secs) = args.deadline_secs {
        crate::sync::auto::arm_deadline(secs);
    }
    let opts = crate::sync::Options {
        remote: args.remote,
        push: !args.pull_only,
        pull: !args.push_only,
        dry_run: args.dry_run,
    };
    let rep =
        crate::sync::run(&corpus, &info.root, &opts).map_err(|e| format!("abcd sync: {e}"))?;
    if json {
        print_json(out, &rep)?;
        return Ok(0);
    }
    let verb = if rep.dry_run {
        "would import"
    } else {
        "imported"
    };
    w(
        out,
        format!(
            "abcd sync ({}) — machine {}: {verb} {} event(s) ({} forget(s)) from {} machine(s), {} already here; {} {} event(s) with {} bodies{}{}",
            sanitize(&rep.remote),
            rep.machine,
            rep.imported,
            rep.forgets_imported,
            rep.machines.len(),
            rep.already_known,
            if rep.dry_run { "would publish" } else { "published" },
            rep.published_events,
            rep.published_bodies,
            if rep.rewritten { "; this machine's ref was rewritten (a forget): the server drops the old objects at its next garbage collection" } else { "" },
            if rep.pushed { "; pushed" } else { "" },
        ),
    )?;
    Ok(0)
}

fn home() -> Result<PathBuf, String> {
    store::abcd_home().map_err(|e| e.to_string())
}

/// The repository the user means: `--repo`, else the current directory.
fn repo_info(cli_repo: &Option<PathBuf>, home: &Path) -> Result<repo::RepoInfo, String> {
    repo::resolve_user_lane(cli_repo.as_deref(), home).map_err(|e| {
        if matches!(e, repo::RepoError::RepoArgMissing { .. }) {
            return e.to_string();
        }
        format!("{e}\n  abcd keys its corpus by the repository's root commit (or, outside any repository with a commit, by the directory): run it in an existing directory, or pass --repo <path>")
    })
}

fn open_corpus(
    cli_repo: &Option<PathBuf>,
    create: bool,
) -> Result<(Option<Corpus>, repo::RepoInfo, PathBuf), String> {
    let home = home()?;
    let info = repo_info(cli_repo, &home)?;
    // A directory lane waiting inside this repository moves in first, so
    // the verb sees its records (the repository's lane is made for it).
    let create = create
        || (info.kind == store::LaneKind::Repository
            && !store::directory_lanes_within(&home, &info.root).is_empty());
    let corpus = if create {
        Some(Corpus::open(&home, &info.root_sha).map_err(|e| e.to_string())?)
    } else {
        Corpus::open_existing(&home, &info.root_sha).map_err(|e| e.to_string())?
    };
    if let Some(c) = &corpus {
        let crate::corpus::Refreshed {
            caught_up,
            adopted,
            imported,
        } = c.refresh_reporting().map_err(|e| e.to_string())?;
        // A first open that imported an older abcd's store says what it took.
        for line in imported.iter().flat_map(|i| i.lines()) {
            eprintln!("abcd: {}", sanitize(&line));
        }
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
        let moves = crate::lane_move::settle(&home, &info, c).map_err(|e| e.to_string())?;
        for m in moves {
            eprintln!(
                "abcd: moved {} record(s), {} staged transcript(s) and {} session note(s) from the directory lane {} into this repository's lane",
                m.records, m.staged, m.sessions, m.from
            );
            for f in &m.failed {
                eprintln!("abcd: directory lane {}: {}", m.from, sanitize(f));
            }
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
        Command::Setup { uninstall } => setup_cmd(uninstall, json, out),
        Command::Sync(args) => sync_cmd(&cli.repo, args, json, out),
        Command::Doctor => {
            let rep = crate::doctor::run(cli.repo.as_deref());
            if json {
                print_json(out, &rep)?;
            } else {
                for c in &rep.checks {
                    let tag = match c.level {
                        crate::doctor::Level::Ok => "ok  ",
                        crate::doctor::Level::Warn => "WARN",
                        crate::doctor::Level::Fail => "FAIL",
                    };
                    writeln!(out, "{tag}  {:<10} {}", c.name, sanitize(&c.detail))
                        .map_err(|e| e.to_string())?;
                    if !c.fix.is_empty() {
                        writeln!(out, "      {:<10} fix: {}", "", sanitize(&c.fix))
                            .map_err(|e| e.to_string())?;
                    }
                }
                let verdict = if rep.ok {
                    "capture will work"
                } else {
                    "capture will NOT work until each FAIL above is fixed"
                };
                writeln!(out, "\nabcd {} — {verdict}", rep.version).map_err(|e| e.to_string())?;
            }
            Ok(if rep.ok { 0 } else { EXIT_FAILURE })
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "abcd", out);
            Ok(0)
        }
        Command::Man => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Cli::command())
                .render(out)
                .map_err(|e| format!("cannot write the man page: {e}"))?;
            Ok(0)
        }
        Command::History(cmd) => history_cmd(cmd, &cli.repo, json, out, err),
        Command::Journal(cmd) => crate::journal_cli::run(cmd, &cli.repo, json, out, err),
    }
}

fn setup_cmd(uninstall: bool, json: bool, out: &mut dyn Write) -> Result<i32, String> {
    let rep = if uninstall {
        crate::setup::uninstall()
    } else {
        crate::setup::setup()
    }
    .map_err(|e| e.to_string())?;
    if json {
        print_json(out, &rep)?;
        return Ok(0);
    }
    let mut w = |s: String| writeln!(out, "{}", sanitize(&s)).map_err(|e| e.to_string());
    if uninstall {
        w(format!(
            "abcd setup --uninstall — removed the marketplace {} (your store is untouched)",
            rep.marketplace_dir.display()
        ))?;
    } else {
        w(format!(
            "abcd setup — wrote the abcd {} plugin marketplace to {}",
            rep.version,
            rep.marketplace_dir.display()
        ))?;
    }
    for r in &rep.ran {
        w(format!(
            "  $ {}  -> {}",
            r.command,
            if r.ok { "ok" } else { "failed" }
        ))?;
        for l in r.output.lines().filter(|l| !l.trim().is_empty()) {
            w(format!("    {l}"))?;
        }
    }
    if !rep.slash_commands.is_empty() {
        w("`claude` is not on PATH; inside Claude Code, type:".into())?;
        for c in &rep.slash_commands {
            w(format!("  {c}"))?;
        }
    }
    if !uninstall {
        match &rep.abcd_on_path {
            Some(p) => w(format!("The hooks will run {}.", p.display()))?,
            None => w("WARNING: `abcd` is not on PATH, so the hooks cannot find it: cargo install --locked --path <abcd checkout> (and put ~/.cargo/bin on PATH)".into())?,
        }
        w("Then start a new Claude Code session and run `abcd doctor`.".into())?;
    }
    Ok(0)
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
        HistoryCmd::List {
            session,
            since,
            until,
            limit,
            agent_type,
            all_repos,
        } => {
            let when = |flag: &str, v: &Option<String>| time_flag("list", flag, v);
            let filter = crate::overview::Filter {
                session: session.clone(),
                since_ns: when("--since", &since)?,
                until_ns: when("--until", &until)?,
                limit,
                agent_type,
            };
            if all_repos {
                let repos = crate::overview::repos(&home()?).map_err(|e| e.to_string())?;
                if json {
                    let mut records = Vec::new();
                    for r in &repos {
                        for mut l in crate::overview::records(&r.corpus, &filter)
                            .map_err(|e| e.to_string())?
                        {
                            l.repository = Some(r.repository.clone());
                            l.lane_kind = Some(r.kind);
                            records.push(l);
                        }
                    }
                    print_json(out, &records)?;
                    return Ok(0);
                }
                let mut any = false;
                for r in &repos {
                    let rows =
                        crate::overview::sessions(&r.corpus, &filter).map_err(|e| e.to_string())?;
                    if rows.is_empty() {
                        continue;
                    }
                    if any {
                        w(out, String::new())?;
                    }
                    any = true;
                    let heading = match r.kind {
                        store::LaneKind::Repository => format!(
                            "== {} ({})",
                            r.repository,
                            &r.root_sha[..12.min(r.root_sha.len())]
                        ),
                        store::LaneKind::Directory => format!(
                            "== directory {} ({}, no repository with a commit)",
                            r.repository,
                            &r.root_sha[..16.min(r.root_sha.len())]
                        ),
                    };
                    w(out, heading)?;
                    print_session_rows(out, &rows)?;
                }
                if !any {
                    w(out, "abcd history — no transcripts stored in any repository (or none matches the filters)".into())?;
                }
                return Ok(0);
            }
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            if json {
                // The record array (every field scripts read is kept), each
                // record with its summary: start, end, title, size, tokens.
                let records = match &corpus {
                    None => Vec::new(),
                    Some(c) => crate::overview::records(c, &filter).map_err(|e| e.to_string())?,
                };
                // A session asked for by name and not found is a miss, as
                // `history show` treats one: exit 1 (an empty corpus is not).
                let missed = session.is_some() && records.is_empty();
                print_json(out, &records)?;
                return Ok(if missed { EXIT_FAILURE } else { 0 });
            }
            let rows = match &corpus {
                None => Vec::new(),
                Some(c) => crate::overview::sessions(c, &filter).map_err(|e| e.to_string())?,
            };
            if rows.is_empty() {
                match &session {
                    Some(s) => {
                        let _ = writeln!(err, "abcd: history: no transcript stored for session {} in this repository; `abcd history list` shows what is stored", sanitize(s));
                        return Ok(EXIT_FAILURE);
                    }
                    None => w(out, "abcd history — no transcripts stored for this repository (or none matches the filters)".into())?,
                }
                return Ok(0);
            }
            print_session_rows(out, &rows)?;
            if let (Some(s), Some(r)) = (&session, rows.first()) {
                w(
                    out,
                    format!(
                        "\n{} record(s) for session {s} — the main thread first, then every sub-agent it spawned.",
                        r.records
                    ),
                )?;
            }
            Ok(0)
        }
        HistoryCmd::Show { key, raw } => {
            let (corpus, info, _) = open_corpus(repo_arg, false)?;
            let shown = match corpus {
                None => Err(format!(
                    "history: no record for {key:?}: nothing is stored for this repository ({}) yet",
                    info.root_sha
                )),
                Some(corpus) => history::show(&corpus, &key).map_err(|e| e.to_string()),
            };
            let shown = match shown {
                Ok(s) => s,
                // `--json` answers on stdout even on a miss (exit 1 still).
                Err(e) if json => {
                    print_json(out, &serde_json::json!({ "key": key, "error": e }))?;
                    let _ = writeln!(err, "abcd: {}", sanitize(&e));
                    return Ok(EXIT_FAILURE);
                }
                Err(e) => return Err(e),
            };
            if json {
                print_json(out, &shown)?;
                return Ok(0);
            }
            let m = &shown.record.meta;
            w(out, format!("session:    {}", m.lineage.session_id))?;
            if let Some(a) = &m.lineage.agent_id {
                w(
                    out,
                    format!(
                        "agent:      agent {a} ({})",
                        m.lineage.agent_type.as_deref().unwrap_or("type unknown")
                    ),
                )?;
                if let Some(p) = &m.lineage.parent_agent_id {
                    w(out, format!("parent:     {p}"))?;
                }
                if m.lineage.spawn_depth > 0 {
                    w(out, format!("depth:      {}", m.lineage.spawn_depth))?;
                }
                w(
                    out,
                    format!(
                        "spawn:      {}",
                        m.lineage
                            .spawn_attribution
                            .map(|a| a.as_str())
                            .unwrap_or("unattributed")
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
            let body = if raw {
                shown.body.clone()
            } else {
                crate::reconstruct::render_body(shown.body.as_bytes())
            };
            write!(out, "{}", sanitize(&body)).map_err(|e| e.to_string())?;
            Ok(0)
        }
        HistoryCmd::Reconstruct {
            session,
            out: out_arg,
            mode,
            max_block_bytes,
        } => {
            use crate::reconstruct::{self, Mode, Options};
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                return Err(reconstruct::ReconstructError::NoRecords { session }.to_string());
            };
            let s = reconstruct::load(&corpus, &session).map_err(|e| e.to_string())?;
            let opts = Options {
                mode: match mode {
                    ModeArg::Full => Mode::Full,
                    ModeArg::Spine => Mode::Spine,
                },
                max_block_bytes: max_block_bytes.max(1),
            };
            if out_arg == "-" {
                // Transcript text is fenced Markdown: control bytes are
                // stripped like every other text we print.
                write!(out, "{}", sanitize(&reconstruct::to_stdout(&s, opts)))
                    .map_err(|e| e.to_string())?;
                return Ok(0);
            }
            let written = reconstruct::write_into(Path::new(&out_arg), &s, opts)
                .map_err(|e| e.to_string())?;
            if json {
                print_json(out, &written)?;
            } else {
                w(out, format!("wrote {}", written.artefact))?;
                w(out, format!("wrote {}", written.telemetry))?;
            }
            Ok(0)
        }
        HistoryCmd::Stats {
            since,
            until,
            all_repos,
        } => {
            let when = |flag: &str, v: &Option<String>| time_flag("stats", flag, v);
            let filter = crate::overview::Filter {
                since_ns: when("--since", &since)?,
                until_ns: when("--until", &until)?,
                ..Default::default()
            };
            let mut st = if all_repos {
                crate::overview::stats_all_repos(&home()?, &filter).map_err(|e| e.to_string())?
            } else {
                let (corpus, _, _) = open_corpus(repo_arg, false)?;
                match &corpus {
                    None => crate::overview::Stats::default(),
                    Some(c) => crate::overview::stats(c, &filter).map_err(|e| e.to_string())?,
                }
            };
            let pricing = crate::pricing::Pricing::load(&home()?.join("pricing.json"))
                .map_err(|e| e.to_string())?;
            crate::overview::price(&mut st, &pricing);
            if json {
                print_json(out, &st)?;
                return Ok(0);
            }
            w(
                out,
                format!(
                    "sessions:    {} ({} without a stored main thread)",
                    st.sessions, st.sessions_without_main_thread
                ),
            )?;
            for (k, v) in &st.sessions_by_repository {
                w(out, format!("  {k}: {v}"))?;
            }
            w(out, format!("sub-agents:  {}", st.sub_agents))?;
            for (k, v) in &st.sub_agents_by_type {
                w(out, format!("  type {k}: {v}"))?;
            }
            for (k, v) in &st.sub_agents_by_depth {
                let d = if *k == 0 {
                    "unknown".to_owned()
                } else {
                    k.to_string()
                };
                w(out, format!("  depth {d}: {v}"))?;
            }
            if st.tool_outputs > 0 {
                w(
                    out,
                    format!(
                        "tool outputs: {} spilled (stored beside their sessions; not sub-agents)",
                        st.tool_outputs
                    ),
                )?;
            }
            w(out, format!(
                "tokens:      {} over {} API responses, counted once per message id (summing every usage line would say {}); {} usage(s) without a message id",
                st.tokens.total, st.api_responses, st.naive_tokens.total, st.usage_without_message_id
            ))?;
            w(
                out,
                format!(
                    "  sub-agents: {} ({:.1}%)",
                    st.subagent_tokens.total,
                    st.subagent_share * 100.0
                ),
            )?;
            if let Some(c) = &st.cost {
                w(
                    out,
                    format!(
                        "estimated cost: ${:.2} (pricing as of {}, {}{})",
                        c.usd,
                        c.pricing.as_of,
                        c.pricing.source,
                        match &c.pricing.user_file {
                            Some(f) => format!("; overridden by {f}"),
                            None => String::new(),
                        }
                    ),
                )?;
                for (m, usd) in &c.by_model_usd {
                    w(out, format!("  {m:<32} ${usd:.2}"))?;
                }
                if !c.unpriced_models.is_empty() {
                    w(
                        out,
                        format!(
                            "  not priced ({} tokens, no row in the table): {}",
                            c.unpriced_tokens,
                            c.unpriced_models.join(", ")
                        ),
                    )?;
                }
            }
            w(
                out,
                format!(
                    "captures that extended a staged transcript: {}",
                    st.extended
                ),
            )?;
            let ev: Vec<String> = st
                .journal_events
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            w(out, format!("journal events: {}", ev.join(", ")))?;
            let h = &st.hook_fires;
            w(
                out,
                format!(
                    "hook fires that changed something: stop/session-end staged a main thread {}, subagent-stop staged a sub-agent {}, subagent-stop without a transcript path {}, sessions noted {}; {} of the staged adopted after a crash (user-prompt-submit fires and fires that found their bytes already staged journal nothing, so are not counted)",
                    h.main_thread_staged,
                    h.subagent_staged,
                    h.subagent_without_transcript,
                    h.sessions_noted,
                    h.adopted
                ),
            )?;
            for (title, map) in [
                ("by model", &st.tokens_by_model),
                ("by agent type", &st.tokens_by_agent_type),
                ("by day", &st.tokens_by_day),
            ] {
                w(out, format!("tokens {title}:"))?;
                for (k, v) in map {
                    w(
                        out,
                        format!(
                            "  {k:<32} {:>12}  (in {}, out {}, cache write {}, cache read {})",
                            v.total, v.input, v.output, v.cache_creation_input, v.cache_read_input
                        ),
                    )?;
                }
            }
            Ok(0)
        }
        HistoryCmd::Search {
            query,
            session,
            agent_type,
            role,
            tool,
            since,
            until,
            all_repos,
            limit,
            rank,
        } => {
            let when = |flag: &str, v: &Option<String>| time_flag("search", flag, v);
            let q = crate::search::Query {
                text: query,
                session,
                agent_type,
                role: role.map(|r| {
                    match r {
                        RoleArg::User => "user",
                        RoleArg::Assistant => "assistant",
                        RoleArg::Tool => "tool",
                    }
                    .to_owned()
                }),
                tool,
                since_ns: when("--since", &since)?,
                until_ns: when("--until", &until)?,
                limit,
                rank,
            };
            let mut hits = Vec::new();
            let mut notes: Vec<String> = Vec::new();
            if all_repos {
                for r in crate::overview::repos(&home()?).map_err(|e| e.to_string())? {
                    let (found, n) =
                        crate::search::search_noted(&r.corpus, &q).map_err(|e| e.to_string())?;
                    for mut h in found {
                        h.repository = Some(r.repository.clone());
                        hits.push(h);
                    }
                    notes.extend(
                        n.into_iter()
                            .filter(|n| !notes.contains(n))
                            .collect::<Vec<_>>(),
                    );
                }
                hits = crate::search::merge(hits, q.rank, q.limit);
            } else if let (Some(c), _, _) = open_corpus(repo_arg, false)? {
                (hits, notes) = crate::search::search_noted(&c, &q).map_err(|e| e.to_string())?;
            }
            for n in &notes {
                writeln!(err, "abcd: note: {}", sanitize(n)).map_err(|e| e.to_string())?;
            }
            if json {
                print_json(out, &hits)?;
                return Ok(0);
            }
            if hits.is_empty() {
                w(
                    out,
                    format!("abcd history search — no match for {:?}", q.text),
                )?;
                return Ok(0);
            }
            for h in &hits {
                let who = match (&h.agent_id, &h.agent_type) {
                    (Some(a), Some(t)) => format!("agent {a} ({t})"),
                    (Some(a), None) => format!("agent {a}"),
                    (None, _) => "main thread".to_owned(),
                };
                let role = match &h.tool {
                    Some(t) => format!("{} {t}", h.role),
                    None => h.role.clone(),
                };
                let repo = h
                    .repository
                    .as_deref()
                    .map(|r| format!("{r}  "))
                    .unwrap_or_default();
                w(
                    out,
                    format!(
                        "{repo}{}  {who}  turn {}  {role}  {}",
                        h.session_id,
                        h.turn,
                        h.timestamp.as_deref().unwrap_or("-")
                    ),
                )?;
                w(out, format!("    {}", h.snippet))?;
                w(out, format!("    record {}", h.record))?;
            }
            Ok(0)
        }
        HistoryCmd::Export {
            session,
            all,
            format,
            out: out_path,
        } => {
            use crate::export::{self, Format};
            let format = match format {
                FormatArg::Md => Format::Md,
                FormatArg::Html => Format::Html,
                FormatArg::Json => Format::Json,
            };
            let (corpus, _, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                return Err(export::ExportError::Empty.to_string());
            };
            if all {
                if format != Format::Html {
                    return Err("history export --all: only --format html writes a site".into());
                }
                let dir = out_path.ok_or("history export --all needs --out DIR")?;
                let entries = export::export_site(&corpus, &dir).map_err(|e| e.to_string())?;
                if json {
                    print_json(out, &entries)?;
                } else {
                    w(
                        out,
                        format!(
                            "wrote {} session page(s) and {}",
                            entries.len(),
                            dir.join("index.html").display()
                        ),
                    )?;
                }
                return Ok(0);
            }
            let session = session.ok_or("history export: name a SESSION, or pass --all")?;
            let text = export::export_session(&corpus, &session, format, out_path.as_deref())
                .map_err(|e| e.to_string())?;
            match text {
                // HTML and JSON are escaped already; Markdown is sanitised
                // like every other text we print.
                Some(t) if format == Format::Md => {
                    write!(out, "{}", sanitize(&t)).map_err(|e| e.to_string())?
                }
                Some(t) => write!(out, "{t}").map_err(|e| e.to_string())?,
                None => {
                    if let Some(p) = &out_path {
                        w(out, format!("wrote {}", p.display()))?;
                    }
                }
            }
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
                    let label = match (&b.directory, b.lane_kind) {
                        (Some(d), _) => format!("directory {d}"),
                        (None, store::LaneKind::Directory) => "directory (unnamed)".to_string(),
                        (None, store::LaneKind::Repository) => {
                            b.name.clone().unwrap_or_else(|| "(unregistered)".into())
                        }
                    };
                    let mut line = format!(
                        "{}  {}  {} staged ({} bytes)",
                        &b.root_sha[..12],
                        label,
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
        HistoryCmd::Migrate {
            apply,
            sidecar_roots,
        } => {
            let (corpus, info, _) = open_corpus(repo_arg, false)?;
            let Some(corpus) = corpus else {
                return Err("history migrate: nothing is stored for this repository".into());
            };
            let sidecar_roots = if sidecar_roots.is_empty() {
                crate::migrate::default_sidecar_roots()
            } else {
                sidecar_roots
            };
            let req = crate::migrate::Request {
                apply,
                sidecar_roots,
            };
            let tty = progress_enabled();
            let progress = |done: u64, total: u64| {
                if tty && total > 0 {
                    eprint!("\rmigrate: {done}/{total} records read");
                    if done >= total {
                        eprintln!();
                    }
                }
            };
            let scanner = crate::capture::scanner_for(&info.root);
            let r = crate::migrate::run(&corpus, &scanner, &req, &progress)
                .map_err(|e| e.to_string())?;
            if json {
                print_json(out, &r)?;
                return Ok(0);
            }
            let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
                writeln!(out, "{s}").map_err(|e| e.to_string())
            };
            w(out, format!(
                "abcd history migrate — {} record(s) scanned, {} filed under a composite id ({})",
                r.scanned,
                r.composite,
                if r.applied { "applied" } else { "report only — nothing was written; re-run with --apply to write" }
            ))?;
            w(
                out,
                format!(
                    "  {} repairable, {} of them with recoverable lineage; {} refused",
                    r.migrated.len(),
                    r.with_lineage(),
                    r.refused.len()
                ),
            )?;
            if r.sidecar_roots.is_empty() {
                w(out, "  no sidecar root (none given, and no ~/.claude/projects): no spawn point can be recovered; repaired records are unattributed".to_string())?;
            } else {
                w(
                    out,
                    format!(
                        "  {} harness sidecar(s) indexed under {}",
                        r.sidecars_indexed,
                        sanitize(&r.sidecar_roots.join(", "))
                    ),
                )?;
            }
            if !r.sidecars_ambiguous.is_empty() {
                w(
                    out,
                    format!(
                        "  NOTE {} agent id(s) claimed by two sidecars were dropped: {}",
                        r.sidecars_ambiguous.len(),
                        sanitize(&r.sidecars_ambiguous.join(", "))
                    ),
                )?;
            }
            let mut dropped = 0;
            for e in &r.migrated {
                w(
                    out,
                    format!(
                        "  {} -> session {} agent {} ({}){}",
                        sanitize(&e.stored_session_id),
                        sanitize(e.session_id.as_deref().unwrap_or("")),
                        sanitize(e.agent_id.as_deref().unwrap_or("")),
                        e.spawn_attribution.as_deref().unwrap_or(""),
                        if e.wrote { "" } else { " [not written]" }
                    ),
                )?;
                if e.extra_segment.is_some() {
                    dropped += 1;
                }
            }
            if dropped > 0 {
                w(out, format!("  NOTE {dropped} composite id(s) carried a middle segment (such as wf_<run>); it is dropped: no field holds it"))?;
            }
            for e in &r.refused {
                w(
                    out,
                    format!(
                        "  REFUSED {}: {}",
                        sanitize(&e.stored_session_id),
                        sanitize(e.refused.as_deref().unwrap_or(""))
                    ),
                )?;
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
            // `history staged --json` gives the stem; the text view, `<stem>.raw`.
            let file = if file.ends_with(".raw") {
                file
            } else {
                format!("{file}.raw")
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
        HistoryCmd::Forget {
            values,
            records,
            all_repos,
            force_short,
            yes,
        } => {
            let req = crate::forget::Request {
                values,
                records,
                force_short,
                yes,
            };
            crate::forget::check(&req).map_err(|e| e.to_string())?;
            if all_repos && !req.records.is_empty() {
                return Err("history forget: --record names a record of one repository; use it without --all-repos".into());
            }
            let tty = progress_enabled();
            let progress = |done: u64, total: u64| {
                if tty && total > 0 {
                    eprint!("\rforget: {done}/{total} bodies scanned");
                    if done >= total {
                        eprintln!();
                    }
                }
            };
            let mut reports = Vec::new();
            if all_repos {
                let home = home()?;
                for sha in store::list_lanes(&home).map_err(|e| e.to_string())? {
                    if let Some(c) =
                        Corpus::open_existing(&home, &sha).map_err(|e| e.to_string())?
                    {
                        c.refresh().map_err(|e| e.to_string())?;
                        reports.push(
                            crate::forget::run(&c, None, &req, &progress)
                                .map_err(|e| e.to_string())?,
                        );
                    }
                }
            } else {
                let (corpus, info, _) = open_corpus(repo_arg, false)?;
                let Some(corpus) = corpus else {
                    return Err("history forget: nothing is stored for this repository".into());
                };
                reports.push(
                    crate::forget::run(&corpus, Some(&info.root), &req, &progress)
                        .map_err(|e| e.to_string())?,
                );
            }
            if json {
                print_json(out, &reports)?;
                return Ok(0);
            }
            for r in &reports {
                let verb = if r.applied { "removed" } else { "would remove" };
                let found: u64 = r.occurrences.iter().sum();
                w(out, format!(
                    "abcd history forget ({}) — {verb}: {found} occurrence(s) of {} value(s) in {} record(s), {} record(s) whole; {} stored bodies {}",
                    r.repository,
                    r.occurrences.len(),
                    r.records_rewritten.len(),
                    r.records_removed.len(),
                    r.bodies,
                    if r.applied { "rewritten" } else { "to rewrite" }
                ))?;
                for (i, n) in r.occurrences.iter().enumerate() {
                    w(out, format!("  value {}: {n} occurrence(s)", i + 1))?;
                }
                for n in &r.records_rewritten {
                    w(out, format!("  rewrite: {n}"))?;
                }
                for n in &r.records_removed {
                    w(out, format!("  remove:  {n}"))?;
                }
                if r.staged_drained > 0 {
                    w(
                        out,
                        format!(
                            "  {} staged transcript(s) drained first, with the value redacted",
                            r.staged_drained
                        ),
                    )?;
                }
                for q in &r.quarantined_holding {
                    w(out, format!("  quarantined {q} holds a value (raw, unredacted): `abcd history discard {q} --yes` removes it"))?;
                }
                if r.applied && home().is_ok_and(|h| crate::sync::is_set_up(&h, &r.repository)) {
                    w(out, "  this repository syncs: run `abcd sync` now — it publishes the forget to your other machines, rewrites what this machine published and drops this machine's copy; the remote keeps the old objects until its garbage collection runs".into())?;
                }
            }
            if reports.iter().any(|r| !r.applied) {
                w(
                    out,
                    "Nothing changed: re-run with --yes to apply.".to_string(),
                )?;
            }
            Ok(0)
        }
        HistoryCmd::Ingest {
            paths,
            into,
            adopt,
            dry_run,
            jobs,
        } => {
            let home = home()?;
            let tty = progress_enabled() && !json;
            let progress = |done: usize, total: usize| {
                if tty && total > 1 {
                    eprint!("\ringest: {done}/{total} transcript file(s)");
                    if done == total {
                        eprintln!();
                    }
                }
            };
            let opts = crate::ingest::Options {
                sources: paths,
                into,
                adopt,
                dry_run,
                jobs: jobs.map(usize::from),
            };
            let rep = crate::ingest::run(&home, &opts, &progress)
                .map_err(|e| format!("history ingest: {e}"))?;
            if json {
                print_json(out, &rep)?;
            } else {
                render_ingest(out, &rep)?;
            }
            let _ = err;
            Ok(if rep.failed.is_empty() { 0 } else { 1 })
        }
        HistoryCmd::Capture {
            file,
            session,
            agent,
            agent_type,
        } => {
            // A file over the in-memory cap is streamed into part records.
            let big = file != "-"
                && std::fs::symlink_metadata(&file)
                    .is_ok_and(|m| m.is_file() && crate::bigfile::streamed(m.len()));
            if big {
                let path = Path::new(&file);
                let (head, _) = crate::bigfile::read_head(path)
                    .map_err(|e| format!("history capture: {e}; nothing was written"))?;
                let lineage =
                    crate::capture::lineage_from_content(&file, &head, session, agent, agent_type)
                        .map_err(|e| format!("history capture: {e}"))?;
                let (corpus, info, _) = open_corpus(repo_arg, true)?;
                let corpus = corpus.expect("created");
                let scanner = crate::capture::scanner_for(&info.root);
                let tty = progress_enabled() && !json;
                let mut progress = |bytes: u64| {
                    if tty {
                        eprint!("\rhistory capture: {} streamed", human_size(bytes));
                    }
                };
                let o =
                    crate::bigfile::capture_file(&corpus, &scanner, &lineage, path, &mut progress);
                if tty {
                    eprintln!();
                }
                let o = o.map_err(|e| format!("history capture: {e}"))?;
                if json {
                    print_json(out, &o)?;
                } else {
                    let new = o.parts.iter().filter(|p| p.wrote).count();
                    w(out, format!("abcd history capture — {} ({}) streamed as {} part record(s), {new} new\n  redacted: secrets={} home={}", o.session_id, human_size(o.bytes), o.parts.len(), o.redacted_secrets, o.redacted_home_paths))?;
                    for p in o.parts.iter().filter(|p| p.wrote) {
                        w(
                            out,
                            format!(
                                "  stored {}",
                                corpus.lane.records_dir().join(&p.record).display()
                            ),
                        )?;
                    }
                }
                let _ = err;
                return Ok(0);
            }
            let raw = if file == "-" {
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
                v
            } else {
                crate::fsutil::guarded_read(Path::new(&file), stage::RAW_CAP)
                    .map_err(|e| format!("cannot read {file}: {e}"))?
            };
            // The ids come from the transcript's own lines, checked (shape,
            // flags, the new-input rule) before the store is even opened.
            let name = if file == "-" { "stdin" } else { file.as_str() };
            let lineage =
                crate::capture::lineage_from_content(name, &raw, session, agent, agent_type)
                    .map_err(|e| format!("history capture: {e}"))?;
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

fn render_ingest(out: &mut dyn Write, rep: &crate::ingest::Report) -> Result<(), String> {
    let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
        writeln!(out, "{s}").map_err(|e| e.to_string())
    };
    let verb = if rep.dry_run { "would store" } else { "stored" };
    w(
        out,
        format!(
            "abcd history ingest — {} file(s), {}: {verb} {}, already stored {}, skipped {}, orphans {}, failed {}",
            rep.files,
            human_size(rep.bytes_read),
            rep.stored.len(),
            rep.already_stored.len(),
            rep.skipped.len(),
            rep.orphans.len(),
            rep.failed.len()
        ),
    )?;
    for n in &rep.notes {
        w(out, format!("  note: {}", sanitize(n)))?;
    }
    for (reason, n) in rep.skipped_by_reason() {
        w(out, format!("  skipped ({reason}): {n}"))?;
    }
    for s in &rep.stored {
        let who = match &s.agent_id {
            Some(a) => format!("{} agent {a}", s.session_id),
            None => s.session_id.clone(),
        };
        w(
            out,
            format!(
                "  {verb} {who} → {} (via {})",
                &s.root_sha[..12.min(s.root_sha.len())],
                s.via
            ),
        )?;
    }
    for s in &rep.skipped {
        w(
            out,
            format!(
                "  skipped {} ({}{})",
                sanitize(&s.path),
                s.reason,
                s.detail
                    .as_deref()
                    .map(|d| format!(": {}", sanitize(d)))
                    .unwrap_or_default()
            ),
        )?;
    }
    for o in &rep.orphans {
        w(
            out,
            format!(
                "  orphan {} (project {}): {} — ignored; `--into REPO --adopt {}` stores it",
                sanitize(&o.path),
                sanitize(&o.project),
                sanitize(&o.why),
                sanitize(&o.project)
            ),
        )?;
    }
    for f in &rep.failed {
        w(
            out,
            format!("  FAILED {}: {}", sanitize(&f.path), sanitize(&f.error)),
        )?;
    }
    Ok(())
}

fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn human_duration(s: f64) -> String {
    let s = s as u64;
    match s {
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

fn session_line(r: &crate::overview::SessionRow) -> String {
    let started = r
        .started_at
        .as_deref()
        .map(|t| t.get(..19).unwrap_or(t).replace('T', " "))
        .unwrap_or_else(|| "-".into());
    let title = match (&r.title, r.main_thread) {
        (Some(t), _) => {
            let t: String = t.chars().take(70).collect();
            t
        }
        (None, true) => "(no prompt)".into(),
        (None, false) => "(main thread not stored)".into(),
    };
    format!(
        "{:<20} {:>9} {:>10} {:>9}  {:<36}  {}",
        started,
        human_duration(r.duration_seconds),
        r.tokens,
        human_size(r.bytes),
        r.session_id,
        title
    )
}

fn print_session_rows(
    out: &mut dyn Write,
    rows: &[crate::overview::SessionRow],
) -> Result<(), String> {
    let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
        writeln!(out, "{}", sanitize(&s)).map_err(|e| e.to_string())
    };
    w(
        out,
        format!(
            "{:<20} {:>9} {:>10} {:>9}  {:<36}  {}",
            "STARTED (UTC)", "DURATION", "TOKENS", "SIZE", "SESSION", "TITLE"
        ),
    )?;
    for r in rows {
        w(out, session_line(r))?;
        for a in &r.agents {
            w(
                out,
                format!(
                    "{:>20} {}└─ {} ({}, depth {}){}  {} turn(s), {} tokens",
                    "",
                    "   ".repeat(a.level.saturating_sub(1)),
                    a.agent_id,
                    a.agent_type.as_deref().unwrap_or("type unknown"),
                    if a.spawn_depth == 0 {
                        "?".to_owned()
                    } else {
                        a.spawn_depth.to_string()
                    },
                    if a.placed {
                        ""
                    } else {
                        " [spawn point unknown]"
                    },
                    a.turns,
                    a.tokens
                ),
            )?;
        }
        if r.tool_outputs > 0 {
            w(
                out,
                format!("{:>20} + {} spilled tool output(s)", "", r.tool_outputs),
            )?;
        }
    }
    Ok(())
}

fn list_line(r: &history::Listed) -> String {
    let m = &r.meta;
    let at = &m.captured_at[..19.min(m.captured_at.len())];
    let who = match &m.lineage.agent_id {
        Some(a) => format!(
            " agent {a} ({})",
            m.lineage.agent_type.as_deref().unwrap_or("type unknown")
        ),
        None => String::new(),
    };
    format!(
        "{at}Z  {}{who}  {}  redacted secrets={} home={}  {}",
        m.lineage.session_id, m.source_kind, m.redacted_secrets, m.redacted_home_paths, r.file
    )
}

/// The command reference (`docs/reference.md`), generated from the clap
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
