//! Who the caller is: home directory, login name, git identity and GitHub
//! owner, discovered from the environment and git configuration files.
//!
//! Owns: reading `$HOME`, `$USER`/`$LOGNAME`, the repository's git config
//! (worktree-aware), the global git config, and parsing them. Must never:
//! run a subprocess, write anything, or fail — a missing piece is `None` or
//! empty and simply not redacted by identity rules.

use std::path::{Path, PathBuf};

/// Git config files larger than this are not personal configuration; they
/// are skipped rather than read into memory.
const MAX_GIT_CONFIG_BYTES: u64 = 1024 * 1024;

/// `gitdir:` indirections followed at most this many times (worktrees and
/// submodules use one; a loop must not hang discovery).
const MAX_GITDIR_HOPS: usize = 4;

/// Everything identity-based redaction needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub home: Option<String>,
    pub user: Option<String>,
    pub git_names: Vec<String>,
    pub git_emails: Vec<String>,
    pub github_owner: Option<String>,
}

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

fn read_small(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > MAX_GIT_CONFIG_BYTES {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// Minimal git-config reader: `[section "sub"]` headers and `key = value`
/// lines; quotes and `#`/`;` comments handled; includes are not followed.
pub fn parse_git_config(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        if let Some(rest) = t.strip_prefix('[') {
            let Some(end) = rest.find(']') else { continue };
            let head = &rest[..end];
            section = match head.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    format!(
                        "{}.{}",
                        name.to_ascii_lowercase(),
                        sub.trim().trim_matches('"')
                    )
                }
                None => head.to_ascii_lowercase(),
            };
            continue;
        }
        let (k, v) = match t.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t, "true"),
        };
        let mut val = String::new();
        let mut in_q = false;
        for c in v.chars() {
            match c {
                '"' => in_q = !in_q,
                '#' | ';' if !in_q => break,
                _ => val.push(c),
            }
        }
        out.push((
            format!("{section}.{}", k.to_ascii_lowercase()),
            val.trim().to_string(),
        ));
    }
    out
}

/// Resolves `<root>/.git` to the directory that holds `config`, following
/// `gitdir:` files (worktrees point at `<main>/.git/worktrees/<name>`, whose
/// `commondir` names the shared directory holding `config`).
fn git_config_path(root: &Path) -> Option<PathBuf> {
    let mut dir = root.join(".git");
    for _ in 0..MAX_GITDIR_HOPS {
        let meta = std::fs::metadata(&dir).ok()?;
        if meta.is_file() {
            let text = read_small(&dir)?;
            let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
            let base = dir.parent().unwrap_or(root).to_path_buf();
            dir = base.join(target);
            continue;
        }
        if let Some(common) = read_small(&dir.join("commondir")) {
            dir = dir.join(common.trim());
        }
        return Some(dir.join("config"));
    }
    None
}

/// `owner` from `git@github.com:owner/repo.git`, `https://github.com/owner/repo`,
/// `ssh://git@github.com/owner/repo`.
pub fn github_owner_from_url(url: &str) -> Option<String> {
    let idx = url.find("github.com")?;
    let rest = &url[idx + "github.com".len()..];
    let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('/'))?;
    let owner = rest.split('/').next()?.trim();
    if owner.is_empty() || !owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    Some(owner.to_string())
}

impl Identity {
    /// Reads `$HOME`, `$USER`/`$LOGNAME`, git `user.name`/`user.email` from the
    /// repository's and the global configuration, and the GitHub owner from
    /// the origin remote. Never fails.
    pub fn discover(repo_root: Option<&Path>) -> Identity {
        let home = env_nonempty("HOME").map(|h| {
            let t = h.trim_end_matches('/');
            if t.is_empty() {
                h
            } else {
                t.to_string()
            }
        });
        let user = env_nonempty("USER").or_else(|| env_nonempty("LOGNAME"));
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(x) = env_nonempty("XDG_CONFIG_HOME") {
            files.push(Path::new(&x).join("git/config"));
        } else if let Some(h) = &home {
            files.push(Path::new(h).join(".config/git/config"));
        }
        if let Some(h) = &home {
            files.push(Path::new(h).join(".gitconfig"));
        }
        if let Some(p) = repo_root.and_then(git_config_path) {
            files.push(p);
        }
        let mut id = Identity {
            home,
            user,
            ..Identity::default()
        };
        for f in files {
            let Some(text) = read_small(&f) else { continue };
            for (k, v) in parse_git_config(&text) {
                if v.is_empty() {
                    continue;
                }
                match k.as_str() {
                    "user.name" if !id.git_names.contains(&v) => id.git_names.push(v),
                    "user.email" if !id.git_emails.contains(&v) => id.git_emails.push(v),
                    "remote.origin.url" => {
                        if let Some(o) = github_owner_from_url(&v) {
                            id.github_owner = Some(o);
                        }
                    }
                    _ => {}
                }
            }
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_quotes_and_comments() {
        let cfg = "[user]\n\tname = \"Jane Q. Doe\" # me\n\temail = jane@example.org\n[remote \"origin\"]\n\turl = git@github.com:janedoe/proj.git\n";
        let kv = parse_git_config(cfg);
        assert!(kv.contains(&("user.name".into(), "Jane Q. Doe".into())));
        assert!(kv.contains(&("user.email".into(), "jane@example.org".into())));
        assert!(kv.contains(&(
            "remote.origin.url".into(),
            "git@github.com:janedoe/proj.git".into()
        )));
    }

    #[test]
    fn owner_from_remote_forms() {
        assert_eq!(
            github_owner_from_url("git@github.com:octo/x.git").as_deref(),
            Some("octo")
        );
        assert_eq!(
            github_owner_from_url("https://github.com/octo-cat/x").as_deref(),
            Some("octo-cat")
        );
        assert_eq!(github_owner_from_url("https://gitlab.com/octo/x"), None);
    }

    #[test]
    fn worktree_gitdir_file_is_followed() {
        let d = tempfile::tempdir().unwrap();
        let main = d.path().join("main");
        std::fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        std::fs::write(
            main.join(".git/config"),
            "[user]\nname = Wt User\n[remote \"origin\"]\nurl = https://github.com/wtowner/r\n",
        )
        .unwrap();
        std::fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = d.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let p = git_config_path(&wt).unwrap();
        let kv = parse_git_config(&std::fs::read_to_string(p).unwrap());
        assert!(kv.contains(&("user.name".into(), "Wt User".into())));
    }
}
