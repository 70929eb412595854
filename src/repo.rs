//! Which repository a working directory belongs to, keyed by root commit.
//!
//! Owns: finding the work tree above a directory (a `.git` directory, or a
//! `.git` file pointing at a linked worktree's git dir), choosing the root
//! commit that keys the store, and the cache under `<home>/cache/roots/` that
//! lets a hook answer without starting `git`.
//!
//! Sessions are never dropped for their directory: [`resolve_lane`] gives a
//! directory in no repository, or in one without a commit, a directory
//! lane (`store::directory_key`) instead of an error.
//!
//! Must never: let the caller's `GIT_*` environment redirect the lookup
//! (those variables are cleared), start a pager, trust a cache entry that
//! names another git dir or another directory inode, or create the store —
//! only the cache directory is made here.
//!
//! Several root commits (merged unrelated histories): the key is the root
//! with the OLDEST committer timestamp, ties broken by the smallest SHA. That
//! is a property of the commits themselves, so every clone picks the same
//! one regardless of the order `git` prints them in, and the original
//! history (usually the oldest) keeps its key when another is merged in.
//!
//! Known limit: the cache is keyed by the git common dir, so linked worktrees
//! whose HEADs sit on unrelated (orphan) histories share the first answer.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use thiserror::Error;

use crate::fsutil::{ensure_private_dir, guarded_read, sha256_hex, write_atomic};
use crate::store::{directory_key, validate_root_sha, LaneKind};

/// Read cap for a `.git` file, a `commondir` file and a cache entry: each is
/// one path and a few short fields; anything larger is not what we wrote.
const GIT_FILE_CAP: u64 = 8 * 1024;
/// Upper bound on directories walked up looking for `.git`; deeper than any
/// real checkout, and it bounds the loop on a pathological path.
const MAX_WALK_DEPTH: usize = 256;
/// First line of a cache entry; bump when the layout changes so old entries
/// are simply re-resolved.
const CACHE_MAGIC: &str = "abcd-root-cache 2";

/// A resolved repository (or, from [`resolve_lane`], the directory that
/// stands in for one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    /// Top level of the work tree (the directory holding `.git`); for a
    /// directory lane, the directory it is keyed by.
    pub root: PathBuf,
    /// The lane key: the root-commit SHA (40 or 64 lowercase hex), or for a
    /// directory lane `dir-<64 hex>` ([`crate::store::directory_key`]).
    pub root_sha: String,
    pub kind: LaneKind,
}

/// Why a directory did not resolve to a repository.
#[derive(Debug, Error)]
pub enum RepoError {
    #[error("--repo {}: no such directory; pass the path of a git repository (or run abcd inside one)", path.display())]
    RepoArgMissing { path: PathBuf },
    #[error("{} does not exist (a sub-agent's worktree is often removed before its hook runs); resolve the repository another way", cwd.display())]
    CwdMissing { cwd: PathBuf },
    #[error("{} is not inside a git work tree; abcd keys its store by the repository's root commit", cwd.display())]
    NotARepo { cwd: PathBuf },
    #[error("{} points at a git dir abcd cannot use: {why}", git_file.display())]
    BadGitFile { git_file: PathBuf, why: String },
    #[error("the repository at {} has no commits yet; abcd keys its store by the root commit — commit once, then retry", root.display())]
    NoCommits { root: PathBuf },
    #[error("could not run git ({source}); install git or put it on PATH")]
    GitMissing {
        #[source]
        source: std::io::Error,
    },
    #[error("git failed in {}: {stderr}", root.display())]
    GitFailed { root: PathBuf, stderr: String },
    #[error("git printed an unexpected root commit line {line:?} in {}", root.display())]
    BadGitOutput { root: PathBuf, line: String },
    #[error("cannot inspect {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a work tree's git data lives.
#[derive(Debug, Clone)]
struct GitLocation {
    work_tree: PathBuf,
    /// The shared git dir (equal to the git dir outside linked worktrees).
    common_dir: PathBuf,
}

/// Resolves `cwd` to its work tree and root-commit SHA, using (and filling)
/// the cache under `<home>/cache/roots/`. A cache write failure is ignored:
/// the cache only saves time.
pub fn resolve_repo(cwd: &Path, home: &Path) -> Result<RepoInfo, RepoError> {
    let loc = locate(cwd)?;
    let cache_file = cache_path(home, &loc.common_dir);
    let common_meta = std::fs::metadata(&loc.common_dir).map_err(|source| RepoError::Io {
        path: loc.common_dir.clone(),
        source,
    })?;
    let ident = (common_meta.dev(), common_meta.ino());
    if let Some(sha) = read_cache(&cache_file, &loc.common_dir, ident) {
        return Ok(RepoInfo {
            root: loc.work_tree,
            root_sha: sha,
            kind: LaneKind::Repository,
        });
    }
    let sha = root_commit(&loc.work_tree)?;
    let _ = write_cache(home, &cache_file, &loc.common_dir, ident, &sha);
    Ok(RepoInfo {
        root: loc.work_tree,
        root_sha: sha,
        kind: LaneKind::Repository,
    })
}

/// The lane a working directory's sessions go to: its repository's
/// ([`resolve_repo`]) when it has a commit; else a **directory lane** keyed
/// by [`directory_key`] of the work tree's top level (a repository with no
/// commit yet) or of the canonical `cwd` itself (no repository). Nothing is
/// dropped for its directory; every other failure (a missing cwd, a broken
/// `.git` file, no `git`) is returned as [`resolve_repo`] returns it.
pub fn resolve_lane(cwd: &Path, home: &Path) -> Result<RepoInfo, RepoError> {
    match resolve_repo(cwd, home) {
        Ok(info) => Ok(info),
        Err(RepoError::NoCommits { root }) => Ok(directory_lane(root)),
        Err(RepoError::NotARepo { cwd }) => {
            let dir = std::fs::canonicalize(&cwd).map_err(|source| RepoError::Io {
                path: cwd.clone(),
                source,
            })?;
            Ok(directory_lane(dir))
        }
        Err(e) => Err(e),
    }
}

fn directory_lane(dir: PathBuf) -> RepoInfo {
    RepoInfo {
        root_sha: directory_key(&dir),
        root: dir,
        kind: LaneKind::Directory,
    }
}

/// [`resolve_user_repo`] with the directory fallback of [`resolve_lane`].
/// `--repo` may also name a lane by its key (`dir-<hex>` or a root commit,
/// as `history list --all-repos --json` shows) when no such path exists:
/// the way to reach a directory lane whose directory now resolves
/// elsewhere (after its move) or is gone.
pub fn resolve_user_lane(arg: Option<&Path>, home: &Path) -> Result<RepoInfo, RepoError> {
    if let Some(key) = arg
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .and_then(|p| p.to_str())
        .filter(|k| validate_root_sha(k).is_ok())
    {
        return Ok(RepoInfo {
            root: PathBuf::from(key),
            root_sha: key.to_string(),
            kind: crate::store::lane_kind(key),
        });
    }
    let dir = user_dir(arg)?;
    resolve_lane(&dir, home)
}

fn user_dir(arg: Option<&Path>) -> Result<PathBuf, RepoError> {
    match arg {
        Some(p) if !p.is_dir() => Err(RepoError::RepoArgMissing {
            path: p.to_path_buf(),
        }),
        Some(p) => Ok(p.to_path_buf()),
        None => std::env::current_dir().map_err(|source| RepoError::Io {
            path: PathBuf::from("."),
            source,
        }),
    }
}

/// The repository a user verb means: `--repo` when given (which must be an
/// existing directory), else the current directory.
pub fn resolve_user_repo(arg: Option<&Path>, home: &Path) -> Result<RepoInfo, RepoError> {
    let dir = user_dir(arg)?;
    resolve_repo(&dir, home)
}

/// Resolves without reading or writing any cache (always runs git).
pub fn resolve_repo_uncached(cwd: &Path) -> Result<RepoInfo, RepoError> {
    let loc = locate(cwd)?;
    let sha = root_commit(&loc.work_tree)?;
    Ok(RepoInfo {
        root: loc.work_tree,
        root_sha: sha,
        kind: LaneKind::Repository,
    })
}

fn locate(cwd: &Path) -> Result<GitLocation, RepoError> {
    let start = match std::fs::canonicalize(cwd) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RepoError::CwdMissing {
                cwd: cwd.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(RepoError::Io {
                path: cwd.to_path_buf(),
                source,
            })
        }
    };
    for dir in start.ancestors().take(MAX_WALK_DEPTH) {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_dir() {
            dot_git.clone()
        } else if meta.is_file() {
            git_dir_from_file(&dot_git, dir)?
        } else {
            continue;
        };
        let common_dir = common_dir_of(&git_dir, &dot_git)?;
        return Ok(GitLocation {
            work_tree: dir.to_path_buf(),
            common_dir,
        });
    }
    Err(RepoError::NotARepo {
        cwd: cwd.to_path_buf(),
    })
}

fn bad_git_file(git_file: &Path, why: impl Into<String>) -> RepoError {
    RepoError::BadGitFile {
        git_file: git_file.to_path_buf(),
        why: why.into(),
    }
}

/// Reads a `.git` file (`gitdir: <path>`, relative to the work tree).
fn git_dir_from_file(dot_git: &Path, work_tree: &Path) -> Result<PathBuf, RepoError> {
    let bytes =
        guarded_read(dot_git, GIT_FILE_CAP).map_err(|e| bad_git_file(dot_git, e.to_string()))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad_git_file(dot_git, "not UTF-8"))?;
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad_git_file(dot_git, "no `gitdir:` line"))?;
    let path = work_tree.join(target);
    std::fs::canonicalize(&path)
        .map_err(|e| bad_git_file(dot_git, format!("{}: {e}", path.display())))
}

/// The git common dir: `<git_dir>/commondir` (relative to the git dir) when
/// present, else the git dir itself. Canonical, so the cache key is stable.
fn common_dir_of(git_dir: &Path, dot_git: &Path) -> Result<PathBuf, RepoError> {
    let commondir_file = git_dir.join("commondir");
    let target = match guarded_read(&commondir_file, GIT_FILE_CAP) {
        Ok(bytes) => {
            let text =
                String::from_utf8(bytes).map_err(|_| bad_git_file(&commondir_file, "not UTF-8"))?;
            git_dir.join(text.trim())
        }
        Err(e) if e.is_not_found() => git_dir.to_path_buf(),
        Err(e) => return Err(bad_git_file(&commondir_file, e.to_string())),
    };
    std::fs::canonicalize(&target)
        .map_err(|e| bad_git_file(dot_git, format!("{}: {e}", target.display())))
}

fn cache_path(home: &Path, common_dir: &Path) -> PathBuf {
    home.join("cache")
        .join("roots")
        .join(sha256_hex(common_dir.as_os_str().as_encoded_bytes()))
}

/// Cache entry layout: magic line, `<dev>:<ino>` of the common dir, the
/// root SHA, then the SHA-256 of the common dir path bytes — never the path
/// itself: a path a user typed may hold a secret, and nothing under
/// `ABCD_HOME` outside staging keeps text that did not pass redaction. The
/// file name is a digest of the path too. Version 1 entries (the path in
/// clear) read as misses and are rewritten.
fn render_cache(common_dir: &Path, ident: (u64, u64), sha: &str) -> Vec<u8> {
    format!(
        "{CACHE_MAGIC}\n{}:{}\n{sha}\n{}\n",
        ident.0,
        ident.1,
        crate::fsutil::sha256_hex(common_dir.as_os_str().as_encoded_bytes())
    )
    .into_bytes()
}

fn read_cache(file: &Path, common_dir: &Path, ident: (u64, u64)) -> Option<String> {
    let bytes = crate::fsutil::read_private(file, GIT_FILE_CAP).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let mut parts = text.split('\n');
    let sha = match (parts.next(), parts.next(), parts.next()) {
        (Some(CACHE_MAGIC), Some(_), Some(sha)) => sha,
        _ => return None,
    };
    (validate_root_sha(sha).is_ok() && bytes == render_cache(common_dir, ident, sha))
        .then(|| sha.to_string())
}

fn write_cache(
    home: &Path,
    file: &Path,
    common_dir: &Path,
    ident: (u64, u64),
    sha: &str,
) -> Result<(), crate::fsutil::FsError> {
    for level in [
        home.to_path_buf(),
        home.join("cache"),
        home.join("cache").join("roots"),
    ] {
        ensure_private_dir(&level)?;
    }
    // Only on a miss: a writer killed between creating its temporary and
    // renaming it left one here; the next miss removes it.
    abcd_fsio::sweep_stale_temps(&home.join("cache").join("roots"))?;
    write_atomic(file, &render_cache(common_dir, ident, sha), false)
}

/// Removes every `GIT_*` name in `inherited` from the child's environment:
/// any of them (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE,
/// GIT_OBJECT_DIRECTORY, GIT_CONFIG_* …) could point git at another
/// repository than the one this directory belongs to.
fn scrub_git_env(cmd: &mut Command, inherited: impl IntoIterator<Item = OsString>) {
    for k in inherited {
        if k.as_encoded_bytes().starts_with(b"GIT_") {
            cmd.env_remove(&k);
        }
    }
}

fn git(work_tree: &Path) -> Command {
    let mut cmd = Command::new("git");
    scrub_git_env(&mut cmd, std::env::vars_os().map(|(k, _)| k));
    cmd.arg("--no-pager")
        .arg("-C")
        .arg(work_tree)
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    cmd
}

/// Runs `git rev-list --max-parents=0 --timestamp HEAD` and picks the root
/// (see the module docs for the rule).
fn root_commit(work_tree: &Path) -> Result<String, RepoError> {
    let out = git(work_tree)
        .args(["rev-list", "--max-parents=0", "--timestamp", "HEAD"])
        .output()
        .map_err(|source| RepoError::GitMissing { source })?;
    if !out.status.success() {
        if !has_head_commit(work_tree)? {
            return Err(RepoError::NoCommits {
                root: work_tree.to_path_buf(),
            });
        }
        return Err(RepoError::GitFailed {
            root: work_tree.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    pick_root(&String::from_utf8_lossy(&out.stdout), work_tree)
}

fn has_head_commit(work_tree: &Path) -> Result<bool, RepoError> {
    let st = git(work_tree)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| RepoError::GitMissing { source })?;
    Ok(st.success())
}

/// Chooses among `<timestamp> <sha>` lines: oldest timestamp, then smallest
/// SHA. No lines means no commits.
fn pick_root(stdout: &str, root: &Path) -> Result<String, RepoError> {
    let mut best: Option<(i64, &str)> = None;
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let bad = || RepoError::BadGitOutput {
            root: root.to_path_buf(),
            line: line.to_string(),
        };
        let (ts, sha) = line.trim().split_once(' ').ok_or_else(bad)?;
        let ts: i64 = ts.parse().map_err(|_| bad())?;
        validate_root_sha(sha).map_err(|_| bad())?;
        match best {
            Some(b) if b <= (ts, sha) => {}
            _ => best = Some((ts, sha)),
        }
    }
    best.map(|(_, sha)| sha.to_string())
        .ok_or_else(|| RepoError::NoCommits {
            root: root.to_path_buf(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs git in `dir` with a hermetic identity and config.
    fn g(dir: &Path, home: &Path, args: &[&str], date: &str) -> String {
        let out = git(dir)
            .args(args)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    struct Fixture {
        _t: tempfile::TempDir,
        home: PathBuf,
        abcd: PathBuf,
        repo: PathBuf,
    }

    fn fixture() -> Fixture {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let abcd = t.path().join("abcd");
        let repo = t.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&repo).unwrap();
        g(
            &repo,
            &home,
            &["init", "-q", "-b", "main"],
            "2020-01-01T00:00:00Z",
        );
        Fixture {
            _t: t,
            home,
            abcd,
            repo,
        }
    }

    fn commit(f: &Fixture, msg: &str, date: &str) -> String {
        g(
            &f.repo,
            &f.home,
            &["commit", "-q", "--allow-empty", "-m", msg],
            date,
        );
        g(&f.repo, &f.home, &["rev-parse", "HEAD"], date)
    }

    #[test]
    fn resolves_root_from_a_subdirectory_and_caches_it() {
        let f = fixture();
        let root = commit(&f, "first", "2020-01-01T00:00:00Z");
        commit(&f, "second", "2020-01-02T00:00:00Z");
        let sub = f.repo.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let info = resolve_repo(&sub, &f.abcd).unwrap();
        assert_eq!(info.root_sha, root);
        assert_eq!(info.root, std::fs::canonicalize(&f.repo).unwrap());
        let common = std::fs::canonicalize(f.repo.join(".git")).unwrap();
        let cache = cache_path(&f.abcd, &common);
        let meta = std::fs::metadata(&cache).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);

        // A hit answers from the cache: plant a different valid SHA in the
        // entry and see it returned without git being asked.
        let planted = "f".repeat(40);
        let ident = {
            let m = std::fs::metadata(&common).unwrap();
            (m.dev(), m.ino())
        };
        std::fs::write(&cache, render_cache(&common, ident, &planted)).unwrap();
        assert_eq!(resolve_repo(&f.repo, &f.abcd).unwrap().root_sha, planted);

        // An entry naming another directory identity is not trusted.
        std::fs::write(
            &cache,
            render_cache(&common, (ident.0, ident.1 + 1), &planted),
        )
        .unwrap();
        assert_eq!(resolve_repo(&f.repo, &f.abcd).unwrap().root_sha, root);
        // A garbled entry is re-resolved and rewritten.
        std::fs::write(&cache, b"garbage").unwrap();
        assert_eq!(resolve_repo(&f.repo, &f.abcd).unwrap().root_sha, root);
        assert_eq!(
            read_cache(&cache, &common, ident).as_deref(),
            Some(root.as_str())
        );
    }

    #[test]
    fn no_commits_and_not_a_repo() {
        let f = fixture();
        let err = resolve_repo(&f.repo, &f.abcd).unwrap_err();
        assert!(matches!(err, RepoError::NoCommits { .. }), "{err}");
        let outside = f.home.join("plain");
        std::fs::create_dir_all(&outside).unwrap();
        // The temp dir may sit inside some checkout on a dev machine; only
        // assert NotARepo when no ancestor has a .git.
        if !outside.ancestors().any(|a| a.join(".git").exists()) {
            assert!(matches!(
                resolve_repo(&outside, &f.abcd),
                Err(RepoError::NotARepo { .. })
            ));
        }
        assert!(matches!(
            resolve_repo(&f.home.join("gone"), &f.abcd),
            Err(RepoError::CwdMissing { .. })
        ));
    }

    #[test]
    fn linked_worktree_resolves_to_the_same_root() {
        let f = fixture();
        let root = commit(&f, "first", "2020-01-01T00:00:00Z");
        let wt = f.home.join("wt");
        g(
            &f.repo,
            &f.home,
            &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
            "2020-01-01T00:00:00Z",
        );
        assert!(wt.join(".git").is_file());
        let info = resolve_repo(&wt, &f.abcd).unwrap();
        assert_eq!(info.root_sha, root);
        assert_eq!(info.root, std::fs::canonicalize(&wt).unwrap());
        // Both share one cache entry, keyed by the common dir.
        let n = std::fs::read_dir(f.abcd.join("cache/roots"))
            .unwrap()
            .count();
        resolve_repo(&f.repo, &f.abcd).unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            std::fs::read_dir(f.abcd.join("cache/roots"))
                .unwrap()
                .count(),
            1
        );
    }

    #[test]
    fn several_roots_choose_the_oldest() {
        let f = fixture();
        let old_root = commit(&f, "old", "2020-01-01T00:00:00Z");
        g(
            &f.repo,
            &f.home,
            &["checkout", "-q", "--orphan", "other"],
            "2021-01-01T00:00:00Z",
        );
        let new_root = commit(&f, "new", "2021-01-01T00:00:00Z");
        g(
            &f.repo,
            &f.home,
            &[
                "merge",
                "-q",
                "--allow-unrelated-histories",
                "-m",
                "m",
                "main",
            ],
            "2021-01-02T00:00:00Z",
        );
        assert_ne!(old_root, new_root);
        assert_eq!(resolve_repo_uncached(&f.repo).unwrap().root_sha, old_root);
    }

    #[test]
    fn resolve_lane_falls_back_to_the_directory() {
        let f = fixture();
        // A repository without a commit: keyed by its work tree's top level,
        // from any directory inside it.
        let sub = f.repo.join("src");
        std::fs::create_dir_all(&sub).unwrap();
        let top = std::fs::canonicalize(&f.repo).unwrap();
        let info = resolve_lane(&sub, &f.abcd).unwrap();
        assert_eq!(info.kind, LaneKind::Directory);
        assert_eq!(info.root, top);
        assert_eq!(info.root_sha, directory_key(&top));
        assert!(info.root_sha.starts_with("dir-") && info.root_sha.len() == 68);
        validate_root_sha(&info.root_sha).unwrap();
        // No repository: the canonical cwd itself.
        let plain = f._t.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        let info = resolve_lane(&plain, &f.abcd).unwrap();
        assert_eq!(info.kind, LaneKind::Directory);
        assert_eq!(info.root, std::fs::canonicalize(&plain).unwrap());
        assert_ne!(info.root_sha, directory_key(&top));
        // A missing cwd is still an error (the session notes answer).
        assert!(matches!(
            resolve_lane(&f._t.path().join("gone"), &f.abcd),
            Err(RepoError::CwdMissing { .. })
        ));
        // Once committed, the repository's own key.
        let root = commit(&f, "first", "2020-01-01T00:00:00Z");
        let info = resolve_lane(&sub, &f.abcd).unwrap();
        assert_eq!((info.kind, info.root_sha), (LaneKind::Repository, root));
        // `--repo` may name a lane by its key when no such path exists.
        let key = directory_key(&top);
        let named = resolve_user_lane(Some(Path::new(&key)), &f.abcd).unwrap();
        assert_eq!((named.kind, named.root_sha), (LaneKind::Directory, key));
        assert!(matches!(
            resolve_user_lane(Some(Path::new("no-such-dir")), &f.abcd),
            Err(RepoError::RepoArgMissing { .. })
        ));
    }

    /// Cache-hit latency, the path every hook takes. Run in release:
    /// `cargo test --release -p abcd --lib repo::tests::cache_hit_latency -- --ignored --nocapture`
    #[test]
    #[ignore = "timing report; run in release"]
    fn cache_hit_latency() {
        let f = fixture();
        commit(&f, "first", "2020-01-01T00:00:00Z");
        let sub = f.repo.join("src/deep/er");
        std::fs::create_dir_all(&sub).unwrap();
        resolve_repo(&sub, &f.abcd).unwrap();
        let n = 10_000;
        let mut times: Vec<_> = (0..n)
            .map(|_| {
                let t = std::time::Instant::now();
                resolve_repo(&sub, &f.abcd).unwrap();
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "resolve_repo cache hit over {n} runs: median {:?}, p99 {:?}, max {:?}",
            times[n / 2],
            times[n * 99 / 100],
            times[n - 1]
        );
        assert!(times[n / 2] < std::time::Duration::from_millis(1));
    }

    #[test]
    fn pick_root_rule() {
        let p = Path::new("/r");
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        assert_eq!(pick_root(&format!("5 {b}\n5 {a}\n9 {a}\n"), p).unwrap(), a);
        assert_eq!(pick_root(&format!("9 {a}\n5 {b}\n"), p).unwrap(), b);
        assert!(matches!(pick_root("", p), Err(RepoError::NoCommits { .. })));
        assert!(matches!(
            pick_root("x y\n", p),
            Err(RepoError::BadGitOutput { .. })
        ));
    }

    #[test]
    fn caller_git_env_cannot_redirect() {
        let f = fixture();
        commit(&f, "first", "2020-01-01T00:00:00Z");
        let decoy = f.home.join("decoy");
        std::fs::create_dir_all(&decoy).unwrap();
        let mut cmd = Command::new("git");
        cmd.env("GIT_DIR", &decoy).env("GIT_WORK_TREE", &decoy);
        scrub_git_env(
            &mut cmd,
            ["GIT_DIR".into(), "GIT_WORK_TREE".into(), "PATH".into()],
        );
        let out = cmd
            .arg("-C")
            .arg(&f.repo)
            .args(["rev-parse", "--show-toplevel"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let top = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        assert_eq!(top, std::fs::canonicalize(&f.repo).unwrap());
    }
}
