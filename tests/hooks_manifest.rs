//! The plugin's hook wiring: `hooks/hooks.json` names only live hook verbs
//! through `hooks/run-hook.sh`, and the wrapper fails loudly (exit 1, never
//! 0 or 2) when no abcd binary resolves, and otherwise runs the binary with
//! the verb and this hook's stdin.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Every `abcd hook` verb the harness may be wired to, by event. Keep in
/// step with the CLI's `hook` sub-commands.
const WIRED: [(&str, &str); 5] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("SubagentStop", "subagent-stop"),
    ("SessionEnd", "session-end"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn wrapper() -> PathBuf {
    root().join("hooks/run-hook.sh")
}

fn json(rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join(rel)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

#[test]
fn plugin_manifest_names_the_plugin() {
    let m = json(".claude-plugin/plugin.json");
    assert_eq!(m["name"], "abcd");
    // hooks/hooks.json is the default location; naming it again in the
    // manifest makes the harness load it twice.
    assert!(m.get("hooks").is_none());
}

#[test]
fn hooks_manifest_names_live_subverbs() {
    let m = json("hooks/hooks.json");
    let hooks = m["hooks"].as_object().expect("a hooks object");
    let mut events: Vec<_> = hooks.keys().map(String::as_str).collect();
    events.sort_unstable();
    let mut want: Vec<_> = WIRED.iter().map(|(e, _)| *e).collect();
    want.sort_unstable();
    assert_eq!(events, want);
    for (event, verb) in WIRED {
        let groups = hooks[event].as_array().unwrap();
        assert_eq!(groups.len(), 1, "{event}");
        let handlers = groups[0]["hooks"].as_array().unwrap();
        assert_eq!(handlers.len(), 1, "{event}");
        let h = &handlers[0];
        assert_eq!(h["type"], "command", "{event}");
        let cmd = h["command"].as_str().unwrap();
        assert!(
            cmd.contains(&format!("exec sh \"$f\" {verb};")),
            "{event}: {cmd}"
        );
        let timeout = h["timeout"].as_u64().unwrap();
        assert!((1..=60).contains(&timeout), "{event} timeout {timeout}");
        // The command, run as the harness would, reaches `abcd hook <verb>`.
        let t = tempfile::tempdir().unwrap();
        let seen = t.path().join("seen");
        write_exe(&t.path().join("bin/abcd"), &fake_abcd(&seen), 0o755);
        // An installed plugin: the wrapper sits under the plugin root.
        std::fs::create_dir_all(t.path().join("hooks")).unwrap();
        std::fs::copy(wrapper(), t.path().join("hooks/run-hook.sh")).unwrap();
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("CLAUDE_PLUGIN_ROOT", t.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{event}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&seen).unwrap(),
            format!("args:hook {verb}\n"),
            "{event}"
        );

        // A plugin root without the wrapper still fails as 1, never 2.
        let bare = tempfile::tempdir().unwrap();
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("CLAUDE_PLUGIN_ROOT", bare.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{event}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("capture is OFF") && err.contains(verb),
            "{event}: {err}"
        );
    }
}

/// Runs the wrapper with a scrubbed environment: only what is passed here.
fn run(verb: &str, env: &[(&str, &Path)], stdin: &[u8]) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg(wrapper())
        .arg(verb)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    common::feed_stdin(&mut child, stdin);
    child.wait_with_output().unwrap()
}

/// Writes an executable script. The file is created by a `cp` child, never
/// opened for writing by this (multi-threaded) test process: a sibling
/// test's fork would otherwise inherit the write descriptor until its exec,
/// and running the script inside that window fails with ETXTBSY (exit 126).
fn write_exe(path: &Path, body: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let src = path.with_extension("src");
    std::fs::write(&src, body).unwrap();
    let _ = std::fs::remove_file(path);
    let cp = std::process::Command::new("cp")
        .arg(&src)
        .arg(path)
        .status()
        .unwrap();
    assert!(cp.success(), "cp {} {}", src.display(), path.display());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A fake abcd that records its arguments and stdin using shell builtins
/// only (the test's PATH may hold nothing), then exits 0.
fn fake_abcd(out: &Path) -> String {
    format!(
        "#!/bin/sh\n{{ printf 'args:%s\\n' \"$*\"; while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done; }} > '{}'\nexit 0\n",
        out.display()
    )
}

#[test]
fn wrapper_without_a_binary_exits_one_with_a_reason() {
    let t = tempfile::tempdir().unwrap();
    let empty_path = t.path().join("empty-path");
    let plugin = t.path().join("plugin");
    std::fs::create_dir_all(&empty_path).unwrap();
    std::fs::create_dir_all(&plugin).unwrap();
    for (_, verb) in WIRED {
        for env in [
            vec![("PATH", empty_path.as_path())],
            vec![
                ("PATH", empty_path.as_path()),
                ("CLAUDE_PLUGIN_ROOT", plugin.as_path()),
            ],
        ] {
            let out = run(verb, &env, b"{}");
            assert_eq!(out.status.code(), Some(1), "{verb}: never 0, never 2");
            assert!(out.stdout.is_empty(), "{verb}: nothing on stdout");
            let err = String::from_utf8(out.stderr).unwrap();
            assert!(err.contains("capture is OFF"), "{verb}: {err}");
            assert!(err.contains(verb), "{verb}: {err}");
            assert!(!err.contains("unknown hook verb"), "{verb}: {err}");
            assert_eq!(err.lines().count(), 1, "{verb}: one line: {err}");
        }
    }
    let out = run("bogus", &[("PATH", empty_path.as_path())], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("unknown hook verb"));
}

#[test]
fn wrapper_runs_the_plugin_binary_with_verb_and_stdin() {
    let t = tempfile::tempdir().unwrap();
    let empty_path = t.path().join("empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let out_file = t.path().join("seen");
    for rel in [
        "bin/abcd",
        "target/x86_64-unknown-linux-gnu/release/abcd",
        "target/release/abcd",
    ] {
        let plugin = t.path().join(format!("plugin-{}", rel.replace('/', "-")));
        write_exe(&plugin.join(rel), &fake_abcd(&out_file), 0o755);
        let payload = b"{\"session_id\":\"s1\",\"agent_id\":\"a1\"}\n";
        let out = run(
            "subagent-stop",
            &[
                ("PATH", empty_path.as_path()),
                ("CLAUDE_PLUGIN_ROOT", plugin.as_path()),
            ],
            payload,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = std::fs::read_to_string(&out_file).unwrap();
        assert_eq!(
            seen, "args:hook subagent-stop\n{\"session_id\":\"s1\",\"agent_id\":\"a1\"}\n",
            "{rel}"
        );
        std::fs::remove_file(&out_file).unwrap();
    }
}

#[test]
fn wrapper_turns_a_binary_exit_two_into_one() {
    let t = tempfile::tempdir().unwrap();
    let plugin = t.path().join("plugin");
    write_exe(
        &plugin.join("bin/abcd"),
        "#!/bin/sh\necho 'usage: abcd' >&2\nexit 2\n",
        0o755,
    );
    let out = run(
        "subagent-stop",
        &[("CLAUDE_PLUGIN_ROOT", plugin.as_path()), ("PATH", t.path())],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit 2 would block the sub-agent"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("exited 2"), "{err}");
    write_exe(&plugin.join("bin/abcd"), "#!/bin/sh\nexit 3\n", 0o755);
    let out = run(
        "stop",
        &[("CLAUDE_PLUGIN_ROOT", plugin.as_path()), ("PATH", t.path())],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "other codes pass through");
}

#[test]
fn wrapper_prefers_the_plugin_bin_over_target_release() {
    let t = tempfile::tempdir().unwrap();
    let plugin = t.path().join("plugin");
    let seen_bin = t.path().join("seen-bin");
    let seen_target = t.path().join("seen-target");
    write_exe(&plugin.join("bin/abcd"), &fake_abcd(&seen_bin), 0o755);
    write_exe(
        &plugin.join("target/release/abcd"),
        &fake_abcd(&seen_target),
        0o755,
    );
    let out = run(
        "stop",
        &[("CLAUDE_PLUGIN_ROOT", plugin.as_path()), ("PATH", t.path())],
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(seen_bin.exists());
    assert!(!seen_target.exists());
}

/// `dir` first on PATH, the system directories after it (the wrapper's
/// PATH check needs `find`).
fn path_with(dir: &Path) -> std::ffi::OsString {
    std::ffi::OsString::from(format!("{}:/usr/bin:/bin", dir.display()))
}

/// The wrapper, with `dir` first on PATH, ran the fake abcd there (which
/// wrote `seen`) with the hook's verb and stdin.
fn assert_runs_from_path(verb: &str, dir: &Path, seen: &Path) {
    let out = run(verb, &[("PATH", Path::new(&path_with(dir)))], b"{}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(seen).unwrap(),
        format!("args:hook {verb}\n{{}}\n")
    );
    std::fs::remove_file(seen).unwrap();
}

/// The wrapper, with `dir` first on PATH, refused the abcd there as
/// world-writable: exit 1, one line saying so, and the binary never ran.
fn assert_refused_from_path(verb: &str, dir: &Path, seen: &Path) {
    let out = run(verb, &[("PATH", Path::new(&path_with(dir)))], b"{}");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("world-writable") && err.contains("capture is OFF"),
        "{err}"
    );
    assert!(!seen.exists(), "the unsafe binary never ran");
}

#[test]
fn wrapper_uses_a_safe_abcd_on_path_and_refuses_a_world_writable_one() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("safe-bin");
    let seen = t.path().join("seen");
    write_exe(&dir.join("abcd"), &fake_abcd(&seen), 0o755);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_runs_from_path("session-end", &dir, &seen);

    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&dir.join("abcd"), 0o757).unwrap();
    assert_refused_from_path("session-end", &dir, &seen);
    mode(&dir.join("abcd"), 0o755).unwrap();
    mode(&dir, 0o777).unwrap();
    assert_refused_from_path("session-end", &dir, &seen);
    mode(&dir, 0o755).unwrap();
}

/// `~/.local/bin/abcd -> ~/.cargo/bin/abcd` and the like: a link's own mode
/// is always 0777, so the wrapper judges the file it resolves to and that
/// file's directory (it once refused every linked `abcd` on PATH).
#[test]
fn wrapper_runs_a_symlinked_abcd_on_path_unless_its_target_is_unsafe() {
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real-bin");
    let links = t.path().join("link-bin");
    let seen = t.path().join("seen");
    write_exe(&real.join("abcd"), &fake_abcd(&seen), 0o755);
    std::fs::create_dir_all(&links).unwrap();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&real, 0o755).unwrap();
    mode(&links, 0o755).unwrap();
    std::os::unix::fs::symlink(real.join("abcd"), links.join("abcd")).unwrap();
    assert_runs_from_path("stop", &links, &seen);

    mode(&real, 0o777).unwrap();
    assert_refused_from_path("stop", &links, &seen);
    mode(&real, 0o755).unwrap();
    mode(&real.join("abcd"), 0o757).unwrap();
    assert_refused_from_path("stop", &links, &seen);
}

#[test]
fn marketplace_lists_this_plugin_at_the_repository_root() {
    let m = json(".claude-plugin/marketplace.json");
    let p = json(".claude-plugin/plugin.json");
    assert_eq!(m["name"], "abcd");
    assert!(m["owner"]["name"].is_string());
    let plugins = m["plugins"].as_array().expect("plugins");
    assert_eq!(plugins.len(), 1);
    assert_eq!(plugins[0]["name"], "abcd");
    assert_eq!(plugins[0]["source"], "./");
    assert_eq!(plugins[0]["version"], p["version"]);
    assert!(
        p["author"]["name"].is_string(),
        "plugin.json names an author"
    );
    assert_eq!(p["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    assert_eq!(p["license"].as_str(), Some(env!("CARGO_PKG_LICENSE")));
    for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
        assert!(root().join(f).is_file(), "{f}");
    }
    // Only slash commands live in commands/: each has frontmatter.
    for e in std::fs::read_dir(root().join("commands")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("---\n"),
            "{} has frontmatter",
            path.display()
        );
    }
}

#[test]
fn the_no_binary_hint_names_cargo_install_and_setup() {
    let t = tempfile::tempdir().unwrap();
    let empty_path = t.path().join("empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let out = run("stop", &[("PATH", empty_path.as_path())], b"{}");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cargo install --locked --path"), "{err}");
    assert!(err.contains("abcd setup"), "{err}");
}

/// `cargo install abcd` builds from the published package, which holds only
/// what `include` in Cargo.toml lists: every file the sources embed
/// (`include_str!`/`include_bytes!`) must be listed, or the install fails
/// to compile (the pricing table once was not).
#[test]
fn the_package_include_list_holds_every_embedded_file() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let list = manifest
        .split("\ninclude = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("Cargo.toml has an include list");
    let included: Vec<&str> = list
        .split(',')
        .map(|e| e.trim().trim_matches('"'))
        .filter(|e| !e.is_empty())
        .collect();
    let covered = |rel: &str| {
        included.iter().any(|inc| {
            let inc = inc.trim_start_matches('/');
            match inc.strip_suffix("**") {
                Some(dir) => rel.starts_with(dir),
                None => rel == inc,
            }
        })
    };
    let mut stack = vec![root().join("src")];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for macro_name in ["include_str!(\"", "include_bytes!(\""] {
                for rest in text.split(macro_name).skip(1) {
                    let target = rest.split('"').next().unwrap_or_default();
                    let mut resolved = p.parent().unwrap().to_path_buf();
                    for part in target.split('/') {
                        match part {
                            ".." => {
                                resolved.pop();
                            }
                            "." => {}
                            part => resolved.push(part),
                        }
                    }
                    let rel = resolved
                        .strip_prefix(root())
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    assert!(
                        covered(&rel),
                        "{} embeds {rel}, which Cargo.toml's include list leaves out of the package",
                        p.display()
                    );
                    seen += 1;
                }
            }
        }
    }
    assert!(seen >= 5, "found the embedded files ({seen})");
}
