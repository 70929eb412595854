//! `abcd setup`, `abcd doctor`, `abcd completions` and `abcd man` through
//! the real binary, in a temporary HOME with a stand-in `claude` that logs
//! its arguments and "installs" a plugin the way Claude Code's cache holds
//! it (`~/.claude/plugins/cache/<marketplace>/<plugin>/<version>/`).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{doctor_check as check, doctor_failed as failed, Env, BIN};
use serde_json::Value;

struct Setup {
    env: Env,
    bin: PathBuf,
    log: PathBuf,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Setup {
    /// `with_claude`: put the stand-in `claude` on PATH too.
    fn new(with_claude: bool) -> Setup {
        let env = Env::new();
        let bin = env.tmp.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("abcd")).unwrap();
        let log = env.tmp.path().join("claude.log");
        if with_claude {
            // What Claude Code 2.1 writes on `plugin install` from a
            // directory marketplace: the cache copy, the install record,
            // the marketplace record and the enabled flag.
            let script = format!(
                r#"#!/bin/sh
echo "$*" >> '{log}'
if [ "$1 $2" = 'plugin install' ]; then
  p="$HOME/.claude/plugins"; m="$XDG_DATA_HOME/abcd/claude-marketplace"
  d="$p/cache/abcd/abcd/{v}"
  mkdir -p "$d" && cp -R "$m/plugins/abcd/." "$d/"
  printf '{{"version":2,"plugins":{{"abcd@abcd":[{{"scope":"user","installPath":"%s","version":"{v}"}}]}}}}' "$d" > "$p/installed_plugins.json"
  printf '{{"abcd":{{"source":{{"source":"directory","path":"%s"}},"installLocation":"%s"}}}}' "$m" "$m" > "$p/known_marketplaces.json"
  printf '{{"enabledPlugins":{{"abcd@abcd":true}}}}' > "$HOME/.claude/settings.json"
fi
exit 0
"#,
                log = log.display(),
                v = env!("CARGO_PKG_VERSION")
            );
            let c = bin.join("claude");
            fs::write(&c, script).unwrap();
            fs::set_permissions(&c, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Setup { env, bin, log }
    }

    fn xdg(&self) -> PathBuf {
        self.env.tmp.path().join("data")
    }

    fn run(&self, args: &[&str], path: &str) -> Output {
        self.env
            .command(&self.env.repo)
            .args(args)
            .env("PATH", path)
            .env("XDG_DATA_HOME", self.xdg())
            .output()
            .unwrap()
    }

    fn path(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin.display())
    }

    fn doctor(&self, path: &str) -> (i32, Value) {
        let out = self.run(&["--json", "doctor"], path);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", text(&out.stdout)));
        (out.status.code().unwrap(), v)
    }

    /// The copy in Claude Code's plugin cache.
    fn cached(&self) -> PathBuf {
        self.env
            .home
            .join(".claude/plugins/cache/abcd/abcd")
            .join(env!("CARGO_PKG_VERSION"))
    }

    /// The folder Claude Code runs a directory marketplace's plugin from.
    fn installed(&self) -> PathBuf {
        self.xdg().join("abcd/claude-marketplace/plugins/abcd")
    }
}

#[test]
fn setup_without_claude_writes_the_marketplace_and_prints_the_slash_commands() {
    let s = Setup::new(false);
    let out = s.run(&["setup"], &s.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let mkt = s.xdg().join("abcd/claude-marketplace");
    assert!(
        o.contains(&format!("/plugin marketplace add {}", mkt.display())),
        "{o}"
    );
    assert!(o.contains("/plugin install abcd@abcd"), "{o}");
    let m: Value =
        serde_json::from_slice(&fs::read(mkt.join(".claude-plugin/marketplace.json")).unwrap())
            .unwrap();
    assert_eq!(m["plugins"][0]["version"], env!("CARGO_PKG_VERSION"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for rel in [
        ".claude-plugin/plugin.json",
        "hooks/hooks.json",
        "hooks/run-hook.sh",
        "commands/history.md",
    ] {
        assert_eq!(
            fs::read(mkt.join("plugins/abcd").join(rel)).unwrap(),
            fs::read(root.join(rel)).unwrap(),
            "{rel} is the repository's"
        );
    }
    // Not installed yet: doctor says so and what to run.
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["plugin"], "{v:#}");
}

#[test]
fn doctor_passes_after_setup_and_names_each_broken_link() {
    let s = Setup::new(true);
    let out = s.run(&["setup"], &s.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let log = fs::read_to_string(&s.log).unwrap();
    let mkt = s.xdg().join("abcd/claude-marketplace");
    assert!(
        log.contains(&format!("plugin marketplace add {}", mkt.display())),
        "{log}"
    );
    assert!(log.contains("plugin install abcd@abcd"), "{log}");
    assert!(log.contains("plugin update abcd@abcd"), "{log}");

    // A first capture, so the lane, backlog and journal are checked too.
    let p = s.env.main_transcript("s1", "{\"type\":\"user\"}\n");
    assert!(s
        .env
        .hook("stop", &s.env.end_payload("s1", &p))
        .status
        .success());
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["ok"], true);
    let human = s.run(&["doctor"], &s.path());
    assert!(text(&human.stdout).contains("capture will work"));

    // 1. The binary removed from PATH.
    let (code, v) = s.doctor("/usr/bin:/bin");
    assert_eq!(code, 1);
    assert!(failed(&v).contains(&"binary".to_owned()), "{v:#}");

    // 2. The hooks file edited away.
    let hooks = s.installed().join("hooks/hooks.json");
    let saved = fs::read(&hooks).unwrap();
    let mut h: Value = serde_json::from_slice(&saved).unwrap();
    h["hooks"].as_object_mut().unwrap().remove("SubagentStop");
    fs::write(&hooks, h.to_string()).unwrap();
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["hooks"], "{v:#}");
    assert!(check(&v, "hooks")["detail"]
        .as_str()
        .unwrap()
        .contains("SubagentStop"));
    fs::write(&hooks, &saved).unwrap();

    // The install record names another version: doctor warns, capture works.
    let records = s.env.home.join(".claude/plugins/installed_plugins.json");
    let saved = fs::read(&records).unwrap();
    let stale = text(&saved).replace(
        &format!("\"version\":\"{}\"", env!("CARGO_PKG_VERSION")),
        "\"version\":\"0.0.1\"",
    );
    fs::write(&records, stale).unwrap();
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 0, "{v:#}");
    let plugin = check(&v, "plugin");
    assert_eq!(plugin["level"], "warn", "{v:#}");
    assert!(
        plugin["detail"].as_str().unwrap().contains("0.0.1"),
        "{v:#}"
    );
    // Without install records (an older Claude Code), the cache copy is found.
    fs::remove_file(&records).unwrap();
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 0, "{v:#}");
    let detail = check(&v, "plugin")["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains(&*s.cached().to_string_lossy()), "{v:#}");
    fs::write(&records, &saved).unwrap();
    // The marketplace folder Claude Code loads the plugin from, gone.
    let mkt = s.xdg().join("abcd/claude-marketplace");
    let aside = s.env.tmp.path().join("marketplace-aside");
    fs::rename(&mkt, &aside).unwrap();
    let (code, v) = s.doctor(&s.path());
    fs::rename(&aside, &mkt).unwrap();
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["plugin"], "{v:#}");
    assert_eq!(
        check(&v, "plugin")["fix"],
        "abcd setup (writes the marketplace again)"
    );
    // Disabled in Claude Code's settings.
    let settings = s.env.home.join(".claude/settings.json");
    fs::write(&settings, r#"{"enabledPlugins":{"abcd@abcd":false}}"#).unwrap();
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["plugin"], "{v:#}");
    assert!(check(&v, "plugin")["fix"]
        .as_str()
        .unwrap()
        .contains("claude plugin enable abcd@abcd"));
    fs::write(&settings, r#"{"enabledPlugins":{"abcd@abcd":true}}"#).unwrap();

    // 3. ABCD_HOME read-only.
    let home = &s.env.abcd_home;
    fs::set_permissions(home, fs::Permissions::from_mode(0o500)).unwrap();
    let (code, v) = s.doctor(&s.path());
    fs::set_permissions(home, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["home"], "{v:#}");

    // 4. The redaction config broken.
    let cfg = s.env.repo.join(".abcd");
    fs::create_dir_all(&cfg).unwrap();
    fs::write(cfg.join("redact.json"), "{ not json").unwrap();
    let (code, v) = s.doctor(&s.path());
    assert_eq!(code, 1);
    assert_eq!(failed(&v), ["redaction"], "{v:#}");
    fs::remove_dir_all(&cfg).unwrap();
    assert_eq!(s.doctor(&s.path()).0, 0);

    // Uninstall: through claude, the marketplace removed, the store kept.
    let lane = s.env.lane();
    let out = s.run(&["setup", "--uninstall"], &s.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("plugin uninstall abcd@abcd"), "{log}");
    assert!(log.contains("plugin marketplace remove abcd"), "{log}");
    assert!(!mkt.exists());
    assert!(
        lane.join("journal/journal").is_file(),
        "the store is untouched"
    );
}

#[test]
fn completions_and_man_page_come_from_the_cli() {
    let env = Env::new();
    for (shell, needle) in [
        ("bash", "complete"),
        ("zsh", "#compdef abcd"),
        ("fish", "complete -c abcd"),
    ] {
        let out = env.abcd(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let o = text(&out.stdout);
        assert!(o.contains(needle), "{shell}: {o}");
        assert!(o.contains("doctor") && o.contains("history"), "{shell}");
    }
    let out = env.abcd(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let o = text(&out.stdout);
    assert!(o.starts_with(".ie") || o.contains(".TH abcd"), "{o}");
    assert!(o.contains("doctor"));
    assert_eq!(env.abcd(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn the_version_fast_path_prints_what_clap_would() {
    use clap::CommandFactory;
    let want = abcd::cli::Cli::command().render_version().to_string();
    let env = Env::new();
    for flag in ["--version", "-V"] {
        let out = env.abcd(&[flag]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(text(&out.stdout), want, "{flag}");
    }
}
