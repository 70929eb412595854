//! `docs/reference.md` is generated from the CLI and must match it.

use std::path::Path;

#[test]
fn the_command_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md");
    let want = abcd::cli::reference_markdown();
    if std::env::var_os("ABCD_UPDATE_REFERENCE").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/reference.md is stale; regenerate it with ABCD_UPDATE_REFERENCE=1 cargo test --test cli_reference"
    );
    for verb in [
        "list", "show", "staged", "drain", "discard", "capture", "verify", "replay", "dump",
        "repair", "stats",
    ] {
        assert!(want.contains(&format!(" {verb}`")), "{verb} documented");
    }
}

/// The README's command table and the `/abcd:history` slash command
/// (`commands/history.md`) name every verb, and the slash command every
/// flag, the CLI has: a verb or flag added to the CLI without them fails here.
#[test]
fn the_readme_and_the_slash_command_name_every_verb_and_flag() {
    use clap::CommandFactory;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).unwrap();
    let (readme, slash) = (read("README.md"), read("commands/history.md"));
    let hint = slash
        .lines()
        .find_map(|l| l.strip_prefix("argument-hint: "))
        .expect("commands/history.md has an argument-hint");
    let cli = abcd::cli::Cli::command();
    for top in cli.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = top.get_name();
        assert!(
            readme.contains(&format!("`abcd {name}")),
            "README.md's command table lacks `abcd {name}`"
        );
    }
    let history = cli
        .find_subcommand("history")
        .expect("abcd history")
        .clone();
    for verb in history.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = verb.get_name();
        assert!(
            readme.contains(&format!("`abcd history {name}")),
            "README.md's command table lacks `abcd history {name}`"
        );
        assert!(
            slash.contains(&format!("### `abcd history {name}")),
            "commands/history.md has no section for `{name}`"
        );
        assert!(
            hint.contains(name),
            "commands/history.md's argument-hint lacks `{name}`"
        );
        for flag in verb.get_arguments().filter_map(|a| a.get_long()) {
            if matches!(flag, "json" | "repo" | "help") {
                continue;
            }
            assert!(
                slash.contains(&format!("--{flag}")),
                "commands/history.md does not document `history {name} --{flag}`"
            );
        }
    }
}
