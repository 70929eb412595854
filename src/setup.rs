//! `abcd setup [--uninstall]`: wire the installed binary into Claude Code.
//!
//! Owns: the plugin files this binary carries (the same files as the
//! repository's plugin, embedded at build time), the local marketplace they
//! are written to (`$XDG_DATA_HOME/abcd/claude-marketplace`, else
//! `~/.local/share/abcd/claude-marketplace`), and the `claude plugin …`
//! commands that add and install it when `claude` is on PATH.
//!
//! Must never: touch the store (`$ABCD_HOME`), install or uninstall anything
//! but the `abcd` plugin and its own marketplace, or fail silently: every
//! `claude` command run is reported with its outcome.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use thiserror::Error;

/// The marketplace (and plugin) name Claude Code knows abcd by.
pub const MARKETPLACE: &str = "abcd";
/// `plugin@marketplace`, as `claude plugin install` takes it.
pub const PLUGIN_REF: &str = "abcd@abcd";

/// The plugin files, relative to the plugin root, as this binary was built
/// with them. `hooks/run-hook.sh` must stay executable-independent: the
/// hooks run it with `sh`.
pub const PLUGIN_FILES: [(&str, &str); 4] = [
    (
        ".claude-plugin/plugin.json",
        include_str!("../.claude-plugin/plugin.json"),
    ),
    ("hooks/hooks.json", include_str!("../hooks/hooks.json")),
    ("hooks/run-hook.sh", include_str!("../hooks/run-hook.sh")),
    (
        "commands/history.md",
        include_str!("../commands/history.md"),
    ),
];

/// Failures of setup.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("cannot locate a data directory: neither XDG_DATA_HOME nor HOME is set (or they are relative); set HOME")]
    NoDataDir,
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`claude {args}` failed: {detail}; run it yourself, or inside Claude Code type the slash commands `abcd setup` printed")]
    Claude { args: String, detail: String },
}

/// One `claude` command setup ran, and how it went.
#[derive(Debug, Serialize)]
pub struct Ran {
    pub command: String,
    pub ok: bool,
    pub output: String,
}

/// What setup (or uninstall) did.
#[derive(Debug, Serialize)]
pub struct SetupReport {
    pub version: &'static str,
    pub marketplace_dir: PathBuf,
    /// `claude` as found on PATH; `None` means the slash commands are for
    /// the user to type.
    pub claude: Option<PathBuf>,
    pub ran: Vec<Ran>,
    /// Slash commands to type inside Claude Code (when `claude` is not on PATH).
    pub slash_commands: Vec<String>,
    /// `abcd` on PATH, which the hooks run; `None` is a problem setup names.
    pub abcd_on_path: Option<PathBuf>,
}

/// `$XDG_DATA_HOME/abcd/claude-marketplace`, else `$HOME/.local/share/…`.
pub fn marketplace_dir() -> Result<PathBuf, SetupError> {
    let abs = |v: Option<std::ffi::OsString>| {
        v.filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = abs(std::env::var_os("XDG_DATA_HOME"))
        .or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".local/share")))
        .ok_or(SetupError::NoDataDir)?;
    Ok(base.join("abcd/claude-marketplace"))
}

/// The plugin root inside the marketplace.
pub fn plugin_dir(marketplace: &Path) -> PathBuf {
    marketplace.join("plugins/abcd")
}

/// The first executable `name` on PATH (absolute entries only).
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

fn marketplace_json() -> String {
    let v = serde_json::json!({
        "name": MARKETPLACE,
        "owner": {"name": "abcd maintainers"},
        "metadata": {
            "description": "abcd, as installed on this machine (written by `abcd setup`)",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "plugins": [{
            "name": "abcd",
            "source": "./plugins/abcd",
            "description": env!("CARGO_PKG_DESCRIPTION"),
            "version": env!("CARGO_PKG_VERSION"),
            "license": env!("CARGO_PKG_LICENSE"),
        }],
    });
    format!("{:#}\n", v)
}

fn write(path: &Path, text: &str) -> Result<(), SetupError> {
    let err = |source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

/// Writes the marketplace for this binary's version (replacing an older one).
pub fn write_marketplace(dir: &Path) -> Result<(), SetupError> {
    let plugin = plugin_dir(dir);
    if plugin.exists() {
        std::fs::remove_dir_all(&plugin).map_err(|source| SetupError::Write {
            path: plugin.clone(),
            source,
        })?;
    }
    write(
        &dir.join(".claude-plugin/marketplace.json"),
        &marketplace_json(),
    )?;
    for (rel, text) in PLUGIN_FILES {
        write(&plugin.join(rel), text)?;
    }
    Ok(())
}

fn run_claude(claude: &Path, args: &[&str]) -> Ran {
    let out = Command::new(claude)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
    let (ok, output) = match out {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
            .trim()
            .to_owned(),
        ),
        Err(e) => (false, format!("could not run {}: {e}", claude.display())),
    };
    Ran {
        command: format!("claude {}", args.join(" ")),
        ok,
        output,
    }
}

fn already(r: &Ran) -> bool {
    let o = r.output.to_ascii_lowercase();
    o.contains("already")
}

/// `abcd setup`: write the marketplace, then add and install it with
/// `claude` when it is on PATH, else say which slash commands to type.
pub fn setup() -> Result<SetupReport, SetupError> {
    let dir = marketplace_dir()?;
    write_marketplace(&dir)?;
    let claude = which("claude");
    let mut rep = SetupReport {
        version: env!("CARGO_PKG_VERSION"),
        marketplace_dir: dir.clone(),
        claude: claude.clone(),
        ran: Vec::new(),
        slash_commands: Vec::new(),
        abcd_on_path: which("abcd"),
    };
    let dir_s = dir.display().to_string();
    let Some(claude) = claude else {
        rep.slash_commands = vec![
            format!("/plugin marketplace add {dir_s}"),
            format!("/plugin install {PLUGIN_REF}"),
        ];
        return Ok(rep);
    };
    let steps: [(&[&str], bool); 4] = [
        (&["plugin", "marketplace", "add", &dir_s], true),
        // A second setup (a new abcd version) refreshes the marketplace.
        (&["plugin", "marketplace", "update", MARKETPLACE], false),
        (&["plugin", "install", PLUGIN_REF], true),
        // An install that was already there keeps its old version in Claude
        // Code's install record ("already installed"); update re-records it
        // (and says "already at the latest version" otherwise).
        (&["plugin", "update", PLUGIN_REF], false),
    ];
    for (args, must) in steps {
        let r = run_claude(&claude, args);
        let failed = must && !r.ok && !already(&r);
        let detail = r.output.clone();
        rep.ran.push(r);
        if failed {
            return Err(SetupError::Claude {
                args: args.join(" "),
                detail,
            });
        }
    }
    Ok(rep)
}

/// `abcd setup --uninstall`: uninstall the plugin and remove the
/// marketplace (through `claude` when on PATH), then delete the
/// marketplace directory. The store is not touched.
pub fn uninstall() -> Result<SetupReport, SetupError> {
    let dir = marketplace_dir()?;
    let claude = which("claude");
    let mut rep = SetupReport {
        version: env!("CARGO_PKG_VERSION"),
        marketplace_dir: dir.clone(),
        claude: claude.clone(),
        ran: Vec::new(),
        slash_commands: Vec::new(),
        abcd_on_path: which("abcd"),
    };
    match &claude {
        Some(c) => {
            rep.ran
                .push(run_claude(c, &["plugin", "uninstall", PLUGIN_REF]));
            rep.ran.push(run_claude(
                c,
                &["plugin", "marketplace", "remove", MARKETPLACE],
            ));
        }
        None => {
            rep.slash_commands = vec![
                format!("/plugin uninstall {PLUGIN_REF}"),
                format!("/plugin marketplace remove {MARKETPLACE}"),
            ];
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|source| SetupError::Write {
            path: dir.clone(),
            source,
        })?;
    }
    Ok(rep)
}
