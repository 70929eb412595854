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
