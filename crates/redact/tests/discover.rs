//! Identity discovery from a temporary HOME and repository (its own test
//! binary: it sets process environment variables, so nothing else may run
//! beside it).

use abcd_redact::{Identity, Scanner};

#[test]
fn discover_reads_env_global_and_repo_config_without_git() {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".gitconfig"),
        "[user]\n\tname = Global Person\n\temail = global@example.net\n",
    )
    .unwrap();
    std::fs::create_dir_all(repo.path().join(".git")).unwrap();
    std::fs::write(
        repo.path().join(".git/config"),
        "[user]\n\temail = repo@example.net\n[remote \"origin\"]\n\turl = git@github.com:octo-owner/thing.git\n",
    )
    .unwrap();
    // SAFETY of intent: this binary holds a single test, so no other thread
    // reads the environment while it changes.
    std::env::set_var("HOME", home.path());
    std::env::set_var("USER", "someone");
    std::env::remove_var("XDG_CONFIG_HOME");
    let id = Identity::discover(Some(repo.path()));
    let h = home
        .path()
        .to_str()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    assert_eq!(id.home.as_deref(), Some(h.as_str()));
    assert_eq!(id.user.as_deref(), Some("someone"));
    assert_eq!(id.git_names, vec!["Global Person".to_string()]);
    assert_eq!(
        id.git_emails,
        vec![
            "global@example.net".to_string(),
            "repo@example.net".to_string()
        ]
    );
    assert_eq!(id.github_owner.as_deref(), Some("octo-owner"));
    let s = Scanner::new(id, Some(repo.path()));
    let r = s
        .redact(&format!(
            "{h}/x by Global Person <repo@example.net> at github.com/octo-owner/thing"
        ))
        .unwrap();
    assert_eq!(
        r.text,
        "~/x by [REDACTED:git-name] <[REDACTED:git-email]> at github.com/[REDACTED:github-owner]/thing"
    );
}
