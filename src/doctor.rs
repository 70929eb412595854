//! `abcd doctor`: check the whole capture chain and say what to do.
//!
//! Owns: the checks (binary on PATH, the installed plugin — found through
//! Claude Code's own install records, enabled, its version — the five
//! hooks in the folder Claude Code runs them from and the binary they
//! resolve to, the abcd home and its modes, this repository's lane, the
//! last journal write, the staged backlog, the redaction config, the
//! journal verdict) and the verdict: capture will work only when no check
//! failed.
//!
//! Must never: create a lane, refresh projections or drain: it reads (opening
//! an existing lane may add a leaf directory an older abcd did not create).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{capture, clock, corpus::Corpus, history, repo, setup, store};

/// The hook events the plugin wires, and their `abcd hook` verbs.
pub const WIRED: [(&str, &str); 5] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("SubagentStop", "subagent-stop"),
    ("SessionEnd", "session-end"),
];

/// How far below `~/.claude/plugins` an installed plugin is looked for
/// (`cache/<marketplace>/<plugin>/<version>/.claude-plugin` is 5 deep).
const PLUGIN_SEARCH_DEPTH: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    /// What to do about it (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub version: &'static str,
    /// Capture will work: no check failed.
    pub ok: bool,
    pub checks: Vec<Check>,
}

fn check(name: &'static str, level: Level, detail: String, fix: &str) -> Check {
    Check {
        name,
        level,
        detail,
        fix: fix.to_owned(),
    }
}

/// Claude Code's configuration directory: `$CLAUDE_CONFIG_DIR`, else
/// `~/.claude`.
fn claude_config_dir() -> Option<PathBuf> {
    let abs = |v: Option<std::ffi::OsString>| {
        v.filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    abs(std::env::var_os("CLAUDE_CONFIG_DIR"))
        .or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".claude")))
}

/// The abcd plugin as Claude Code has it installed.
#[derive(Debug)]
struct Installed {
    /// `abcd@<marketplace>` from the install records (`None`: found by
    /// walking the plugin cache, no record read).
    id: Option<String>,
    /// The version the install record names.
    recorded_version: Option<String>,
    /// The folder Claude Code runs the plugin from (`${CLAUDE_PLUGIN_ROOT}`).
    root: PathBuf,
    /// `enabledPlugins` in Claude Code's user settings (`None`: not said).
    enabled: Option<bool>,
    /// The directory marketplace Claude Code loads the plugin from, when
    /// it no longer holds the plugin: Claude Code then reports that the
    /// marketplace failed to load and runs none of the plugin's hooks, even
    /// with a cache copy in place (seen with 2.1.332).
    lost_marketplace: Option<PathBuf>,
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    crate::fsutil::guarded_read(path, 4 * 1024 * 1024)
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
}

/// The abcd plugin from Claude Code's own records: `plugins/installed_plugins.json`
/// (`{"plugins": {"abcd@<marketplace>": [{"installPath", "version", …}]}}`),
/// the marketplace it came from (`plugins/known_marketplaces.json`) and
/// `settings.json`'s `enabledPlugins`. A plugin from a directory
/// marketplace (what `abcd setup` writes) runs from that directory, not from
/// the cache copy `installPath` names, as `claude plugin list --json` says
/// (`readFromFolder`, Claude Code 2.1).
fn install_record(config: &Path) -> Option<Installed> {
    let records = read_json(&config.join("plugins/installed_plugins.json"))?;
    let plugins = records["plugins"].as_object()?;
    let (id, entries) = plugins
        .iter()
        .filter(|(k, _)| k.split('@').next() == Some("abcd"))
        .min_by_key(|(k, _)| k.as_str() != setup::PLUGIN_REF)?;
    let entry = entries.as_array()?.first()?;
    let install_path = PathBuf::from(entry["installPath"].as_str()?);
    let marketplace = id.split_once('@').map(|(_, m)| m).unwrap_or_default();
    let directory = read_json(&config.join("plugins/known_marketplaces.json")).and_then(|k| {
        let src = &k[marketplace]["source"];
        (src["source"] == "directory")
            .then(|| src["path"].as_str().map(PathBuf::from))
            .flatten()
    });
    let from_folder = directory
        .as_deref()
        .and_then(|dir| {
            let m = read_json(&dir.join(".claude-plugin/marketplace.json"))?;
            let rel = m["plugins"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == "abcd")?["source"]
                .as_str()?
                .to_owned();
            Some(dir.join(rel.trim_start_matches("./")))
        })
        .filter(|d| d.join(".claude-plugin/plugin.json").is_file());
    let lost_marketplace = directory.filter(|_| from_folder.is_none());
    let enabled = read_json(&config.join("settings.json"))
        .and_then(|s| s["enabledPlugins"][id.as_str()].as_bool());
    Some(Installed {
        id: Some(id.clone()),
        recorded_version: entry["version"].as_str().map(str::to_owned),
        root: from_folder.unwrap_or(install_path),
        enabled,
        lost_marketplace,
    })
}

/// The plugin check: installed, enabled, and of this binary's version (by
/// its install record and by the manifest of the copy that runs).
fn plugin_check(inst: &Installed) -> Check {
    let this = env!("CARGO_PKG_VERSION");
    let id = inst.id.as_deref().unwrap_or(setup::PLUGIN_REF);
    if inst.enabled == Some(false) {
        return check(
            "plugin",
            Level::Fail,
            format!("the abcd plugin ({id}) is installed but disabled in Claude Code's settings"),
            &format!("claude plugin enable {id} (or /plugin enable {id} inside Claude Code)"),
        );
    }
    if let Some(dir) = &inst.lost_marketplace {
        return check(
            "plugin",
            Level::Fail,
            format!(
                "Claude Code loads {id} from the marketplace folder {}, which no longer holds it: Claude Code reports that the marketplace failed to load and runs none of abcd's hooks",
                dir.display()
            ),
            "abcd setup (writes the marketplace again)",
        );
    }
    let manifest = read_json(&inst.root.join(".claude-plugin/plugin.json"))
        .and_then(|v| v["version"].as_str().map(str::to_owned));
    let Some(manifest) = manifest else {
        return check(
            "plugin",
            Level::Fail,
            format!(
                "{} has no readable .claude-plugin/plugin.json",
                inst.root.display()
            ),
            "abcd setup",
        );
    };
    let mut stale = Vec::new();
    if manifest != this {
        stale.push(format!("its manifest says {manifest}"));
    }
    if let Some(r) = inst.recorded_version.as_deref().filter(|r| *r != this) {
        stale.push(format!("Claude Code's install record says {r}"));
    }
    if stale.is_empty() {
        check(
            "plugin",
            Level::Ok,
            format!("{id} runs from {} (version {this})", inst.root.display()),
            "",
        )
    } else {
        check(
            "plugin",
            Level::Warn,
            format!(
                "the installed plugin at {} is not this binary's version {this}: {}",
                inst.root.display(),
                stale.join("; ")
            ),
            "abcd setup (reinstalls the plugin of this version)",
        )
    }
}

/// Installed copies of the abcd plugin under `<claude config>/plugins`,
/// Claude Code's plugin cache first: what an older Claude Code without
/// install records leaves.
fn installed_plugins(config: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let manifest = dir.join(".claude-plugin/plugin.json");
        if let Ok(text) = crate::fsutil::guarded_read(&manifest, 64 * 1024) {
            let named_abcd = serde_json::from_slice::<serde_json::Value>(&text)
                .ok()
                .is_some_and(|v| v["name"] == "abcd");
            if named_abcd && dir.join("hooks").is_dir() {
                out.push(dir.to_path_buf());
            }
        }
        if depth == 0 {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        subs.sort();
        for s in subs {
            walk(&s, depth - 1, out);
        }
    }
    let mut out = Vec::new();
    walk(&config.join("plugins"), PLUGIN_SEARCH_DEPTH, &mut out);
    out.sort_by_key(|p| !p.to_string_lossy().contains("/cache/"));
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Runs every check. `repo_arg` is `--repo`.
pub fn run(repo_arg: Option<&Path>) -> Report {
    let mut checks = Vec::new();
    let this = std::env::current_exe().ok();

    // 1. The binary the hooks and the slash command run.
    let on_path = setup::which("abcd");
    match &on_path {
        None => checks.push(check(
            "binary",
            Level::Fail,
            "no `abcd` on PATH: the plugin's hooks and its /abcd:history command cannot find it"
                .into(),
            "cargo install --locked --path <abcd checkout> (and put ~/.cargo/bin on PATH)",
        )),
        Some(p) => {
            let world_writable = |p: &Path| {
                std::fs::metadata(p)
                    .map(|m| m.permissions().mode() & 0o002 != 0)
                    .unwrap_or(true)
            };
            // As the wrapper judges it: the binary, its directory and, for a
            // link, the directory of the file it resolves to.
            let target_dir = std::fs::canonicalize(p)
                .ok()
                .and_then(|t| t.parent().map(Path::to_path_buf));
            if world_writable(p)
                || p.parent().is_some_and(world_writable)
                || target_dir.as_deref().is_some_and(world_writable)
            {
                checks.push(check(
                    "binary",
                    Level::Fail,
                    format!(
                        "{} (or its directory, or the directory of the file it links to) is world-writable; the hooks refuse to run it",
                        p.display()
                    ),
                    "chmod o-w the binary and its directory",
                ));
            } else if this.as_deref().is_some_and(|t| !same_file(t, p)) {
                checks.push(check(
                    "binary",
                    Level::Warn,
                    format!("`abcd` on PATH is {}, not this binary", p.display()),
                    "run the PATH one's `abcd doctor`, or reinstall so they agree",
                ));
            } else {
                checks.push(check(
                    "binary",
                    Level::Ok,
                    format!("{} (version {})", p.display(), env!("CARGO_PKG_VERSION")),
                    "",
                ));
            }
        }
    }

    // 2 and 3. The installed plugin and its hooks.
    let config = claude_config_dir();
    let found = config.as_deref().and_then(install_record).or_else(|| {
        config
            .as_deref()
            .and_then(|c| installed_plugins(c).into_iter().next())
            .map(|root| Installed {
                id: None,
                recorded_version: None,
                root,
                enabled: None,
                lost_marketplace: None,
            })
    });
    match found {
        None => checks.push(check(
            "plugin",
            Level::Fail,
            format!(
                "the abcd plugin is not installed in Claude Code (no install record in {}, nothing under it)",
                config
                    .as_deref()
                    .map(|c| c.join("plugins").display().to_string())
                    .unwrap_or_else(|| "~/.claude/plugins".into())
            ),
            "abcd setup",
        )),
        Some(inst) => {
            checks.push(plugin_check(&inst));
            checks.push(hooks_check(&inst.root, on_path.as_deref()));
        }
    }

    // 4. The abcd home.
    let abcd_home = store::abcd_home();
    checks.push(match &abcd_home {
        Err(e) => check(
            "home",
            Level::Fail,
            e.to_string(),
            "set ABCD_HOME to an absolute, private directory",
        ),
        Ok(h) => home_check(h),
    });

    // 5 to 9. This repository: lane, last write, backlog, redaction, journal.
    let Ok(h) = abcd_home else {
        return finish(checks);
    };
    let info = match repo::resolve_user_lane(repo_arg, &h) {
        Ok(i) => i,
        Err(e) => {
            checks.push(check(
                "repository",
                Level::Warn,
                format!("no repository here ({e}); capture works per git repository"),
                "run abcd doctor inside a git repository with a commit (or pass --repo)",
            ));
            return finish(checks);
        }
    };
    let scanner = capture::scanner_for(&info.root);
    checks.push(match scanner.degraded() {
        Some(why) => check(
            "redaction",
            Level::Fail,
            format!("the redaction config is broken, so every capture is refused: {why}"),
            &format!(
                "fix or remove {}",
                info.root.join(".abcd/redact.json").display()
            ),
        ),
        None => check(
            "redaction",
            Level::Ok,
            "the redaction rules load".into(),
            "",
        ),
    });
    let corpus = match Corpus::open_existing(&h, &info.root_sha) {
        Ok(Some(c)) => c,
        Ok(None) => {
            checks.push(check(
                "repository",
                Level::Ok,
                format!("{} (root commit {}): nothing captured yet — the first session here creates its lane", info.root.display(), info.root_sha),
                "",
            ));
            return finish(checks);
        }
        Err(e) => {
            checks.push(check(
                "repository",
                Level::Fail,
                format!("the store of this repository cannot be opened: {e}"),
                "abcd journal verify",
            ));
            return finish(checks);
        }
    };
    let journal = corpus.lane.journal_dir().join("journal");
    let last = std::fs::metadata(&journal)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| clock::rfc3339_nanos(d.as_nanos() as u64))
        .unwrap_or_else(|| "never".into());
    checks.push(check(
        "repository",
        Level::Ok,
        format!(
            "{} (root commit {}); last journal write {last}",
            info.root.display(),
            info.root_sha
        ),
        "",
    ));
    match history::staged(&corpus, clock::now_unix_ns()) {
        Ok(s) => {
            let overdue = s.staged.iter().filter(|e| e.overdue).count();
            let detail = format!(
                "{} staged, {overdue} overdue, {} quarantined",
                s.staged.len(),
                s.quarantined.len()
            );
            checks.push(if overdue > 0 || !s.quarantined.is_empty() {
                check(
                    "backlog",
                    Level::Warn,
                    detail,
                    "abcd history staged; abcd history drain",
                )
            } else {
                check("backlog", Level::Ok, detail, "")
            });
        }
        Err(e) => checks.push(check(
            "backlog",
            Level::Warn,
            e.to_string(),
            "abcd history staged",
        )),
    }
    let opts = abcd_journal::VerifyOptions {
        chain: true,
        progress: None,
    };
    checks.push(
        match abcd_journal::verify(&corpus.lane.journal_dir(), &opts) {
            Ok(r) if r.exit_code() == 0 => check("journal", Level::Ok, "clean".into(), ""),
            Ok(r) => check(
                "journal",
                Level::Fail,
                format!("journal verify exits {}", r.exit_code()),
                "abcd journal verify; abcd journal repair",
            ),
            Err(e) => check(
                "journal",
                Level::Fail,
                e.to_string(),
                "abcd journal verify; abcd journal repair",
            ),
        },
    );
    finish(checks)
}

fn finish(checks: Vec<Check>) -> Report {
    Report {
        version: env!("CARGO_PKG_VERSION"),
        ok: checks.iter().all(|c| c.level != Level::Fail),
        checks,
    }
}

fn hooks_check(root: &Path, on_path: Option<&Path>) -> Check {
    let fix = "abcd setup (reinstalls the plugin with its hooks)";
    let file = root.join("hooks/hooks.json");
    let v = crate::fsutil::guarded_read(&file, 1024 * 1024)
        .ok()
        .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok());
    let Some(v) = v else {
        return check(
            "hooks",
            Level::Fail,
            format!("{} is missing or not JSON", file.display()),
            fix,
        );
    };
    let missing: Vec<&str> = WIRED
        .iter()
        .filter(|(event, verb)| {
            let cmds = v["hooks"][event]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
                .filter_map(|h| h["command"].as_str());
            !cmds
                .into_iter()
                .any(|c| c.contains("run-hook.sh") && c.contains(verb))
        })
        .map(|(e, _)| *e)
        .collect();
    if !missing.is_empty() {
        return check(
            "hooks",
            Level::Fail,
            format!("{} does not wire {}", file.display(), missing.join(", ")),
            fix,
        );
    }
    if !root.join("hooks/run-hook.sh").is_file() {
        return check(
            "hooks",
            Level::Fail,
            format!("{}/hooks/run-hook.sh is missing", root.display()),
            fix,
        );
    }
    // The wrapper's own resolution order.
    let in_host_target = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root.join("target"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("release/abcd"))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found.into_iter().next()
    };
    let resolved = Some(root.join("bin/abcd"))
        .filter(|p| p.is_file())
        .or_else(in_host_target)
        .or_else(|| Some(root.join("target/release/abcd")).filter(|p| p.is_file()))
        .or_else(|| on_path.map(Path::to_path_buf));
    match resolved {
        Some(b) => check(
            "hooks",
            Level::Ok,
            format!("the five hooks are wired and run {}", b.display()),
            "",
        ),
        None => check(
            "hooks",
            Level::Fail,
            "the hooks resolve no abcd binary".into(),
            "cargo install --locked --path <abcd checkout>",
        ),
    }
}

fn home_check(h: &Path) -> Check {
    let fix = "make ABCD_HOME a directory you own, mode 0700, on a writable file system";
    match std::fs::metadata(h) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent_ok = h
                .ancestors()
                .skip(1)
                .find(|a| a.exists())
                .and_then(|a| std::fs::metadata(a).ok())
                .is_some_and(|m| m.is_dir() && m.permissions().mode() & 0o200 != 0);
            if parent_ok {
                check(
                    "home",
                    Level::Ok,
                    format!("{} (created on first capture)", h.display()),
                    "",
                )
            } else {
                check(
                    "home",
                    Level::Fail,
                    format!("{} does not exist and cannot be created", h.display()),
                    fix,
                )
            }
        }
        Err(e) => check("home", Level::Fail, format!("{}: {e}", h.display()), fix),
        Ok(m) if !m.is_dir() => check(
            "home",
            Level::Fail,
            format!("{} is not a directory", h.display()),
            fix,
        ),
        Ok(m) => {
            let mode = m.permissions().mode() & 0o7777;
            if mode & 0o200 == 0 || read_only_fs(h) {
                check(
                    "home",
                    Level::Fail,
                    format!(
                        "{} is read-only (mode {mode:04o}): nothing can be staged",
                        h.display()
                    ),
                    fix,
                )
            } else if m.uid() != current_uid() {
                check(
                    "home",
                    Level::Fail,
                    format!("{} belongs to another account", h.display()),
                    fix,
                )
            } else if mode & 0o077 != 0 {
                check(
                    "home",
                    Level::Warn,
                    format!("{} is mode {mode:04o}, readable by others", h.display()),
                    "chmod 700 it",
                )
            } else {
                check(
                    "home",
                    Level::Ok,
                    format!("{} (mode {mode:04o})", h.display()),
                    "",
                )
            }
        }
    }
}

fn read_only_fs(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: c is a valid NUL-terminated path; s is written by statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    // SAFETY: statvfs succeeded, so s is initialised.
    rc == 0 && unsafe { s.assume_init() }.f_flag & libc::ST_RDONLY != 0
}

fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
