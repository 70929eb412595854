//! The user's `git` binary, driven for `abcd sync`: every object, tree,
//! commit, ref, fetch and push goes through it (no hand-written pack
//! protocol).
//!
//! Owns: finding `git` and checking its version, running one command with
//! a clean environment (nothing from a hook's `GIT_DIR` or the user's
//! terminal prompts), the private bare repository a lane syncs through,
//! and a `cat-file --batch` reader.
//!
//! Never: reads or writes the store; every caller decides what the bytes
//! mean.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use thiserror::Error;

/// Oldest git this module relies on (`--force-with-lease=<ref>:<expect>`,
/// `ls-remote` patterns, `--stdin-paths`, `mktree --missing`).
pub const MIN_VERSION: (u32, u32) = (2, 20);

#[derive(Debug, Error)]
pub enum GitError {
    #[error("abcd sync needs git, and `git` was not found on PATH ({why}); install git {}.{} or newer", MIN_VERSION.0, MIN_VERSION.1)]
    Missing { why: String },
    #[error("abcd sync needs git {}.{} or newer; `git --version` says {found:?}", MIN_VERSION.0, MIN_VERSION.1)]
    TooOld { found: String },
    #[error("`git {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("could not run `git {args}`: {source}")]
    Spawn {
        args: String,
        source: std::io::Error,
    },
}

/// `git` against one repository (`--git-dir`), or none.
#[derive(Debug, Clone)]
pub struct Git {
    git_dir: Option<PathBuf>,
    index_file: Option<PathBuf>,
}

fn base_command() -> Command {
    let mut c = Command::new("git");
    // Nothing inherited may point git elsewhere (a hook runs with the
    // harness's environment), ask a question on a terminal, or sign.
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
    ] {
        c.env_remove(v);
    }
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "abcd")
        .env("GIT_AUTHOR_EMAIL", "abcd@invalid")
        .env("GIT_COMMITTER_NAME", "abcd")
        .env("GIT_COMMITTER_EMAIL", "abcd@invalid")
        .env("LC_ALL", "C");
    c
}

/// Checks that `git` runs and is recent enough; returns its version text.
pub fn check_version() -> Result<String, GitError> {
    let out = base_command()
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GitError::Missing { why: e.to_string() })?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let nums: Vec<u32> = text
        .split_whitespace()
        .nth(2)
        .unwrap_or("")
        .split('.')
        .take(2)
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    let found = (
        nums.first().copied().unwrap_or(0),
        nums.get(1).copied().unwrap_or(0),
    );
    if !out.status.success() || found < MIN_VERSION {
        return Err(GitError::TooOld { found: text });
    }
    Ok(text)
}

impl Git {
    /// `git` run in no repository (`ls-remote`, `remote get-url` with `-C`).
    pub fn bare() -> Git {
        Git {
            git_dir: None,
            index_file: None,
        }
    }

    pub fn at(git_dir: &Path) -> Git {
        Git {
            git_dir: Some(git_dir.to_path_buf()),
            index_file: None,
        }
    }

    /// The repository's directory, when it has one.
    pub fn dir(&self) -> Option<&Path> {
        self.git_dir.as_deref()
    }

    /// The same repository with its own index file (tree building).
    pub fn with_index(&self, index: &Path) -> Git {
        Git {
            git_dir: self.git_dir.clone(),
            index_file: Some(index.to_path_buf()),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = base_command();
        if let Some(d) = &self.git_dir {
            c.arg("--git-dir").arg(d);
        }
        if let Some(i) = &self.index_file {
            c.env("GIT_INDEX_FILE", i);
        }
        c.args(args);
        c
    }

    /// Runs git; stdout on success, `Failed` with stderr otherwise.
    pub fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, GitError> {
        let joined = args.join(" ");
        let mut c = self.command(args);
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|source| GitError::Spawn {
            args: joined.clone(),
            source,
        })?;
        // Feed stdin from a thread so a large output cannot deadlock us.
        let feeder = match (stdin, child.stdin.take()) {
            (Some(bytes), Some(mut pipe)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || {
                    let _ = pipe.write_all(&bytes);
                }))
            }
            _ => None,
        };
        let out = child.wait_with_output().map_err(|source| GitError::Spawn {
            args: joined.clone(),
            source,
        })?;
        if let Some(f) = feeder {
            let _ = f.join();
        }
        if !out.status.success() {
            return Err(GitError::Failed {
                args: joined,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(out.stdout)
    }

    /// Runs git and returns (success, stdout, stderr) whatever its status.
    pub fn run_status(&self, args: &[&str]) -> Result<(bool, String, String), GitError> {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| GitError::Spawn {
                args: args.join(" "),
                source,
            })?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// [`Git::run`], stdout as trimmed text.
    pub fn text(&self, args: &[&str]) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run(args, None)?)
            .trim()
            .to_owned())
    }

    /// Writes a blob; returns its object id.
    pub fn hash_blob(&self, bytes: &[u8]) -> Result<String, GitError> {
        Ok(
            String::from_utf8_lossy(&self.run(&["hash-object", "-w", "--stdin"], Some(bytes))?)
                .trim()
                .to_owned(),
        )
    }

    /// Writes many files as blobs (one process); ids in the same order.
    pub fn hash_paths(&self, paths: &[PathBuf]) -> Result<Vec<String>, GitError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(p.as_os_str().as_encoded_bytes());
            input.push(b'\n');
        }
        let out = self.run(&["hash-object", "-w", "--stdin-paths"], Some(&input))?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// Object id a revision names, or `None` when it does not resolve.
    pub fn resolve(&self, rev: &str) -> Result<Option<String>, GitError> {
        match self.run(&["rev-parse", "--verify", "--quiet", rev], None) {
            Ok(out) => Ok(Some(String::from_utf8_lossy(&out).trim().to_owned())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A streaming `cat-file --batch` reader.
    pub fn cat_file(&self) -> Result<CatFile, GitError> {
        let mut c = self.command(&["cat-file", "--batch"]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().map_err(|source| GitError::Spawn {
            args: "cat-file --batch".into(),
            source,
        })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(CatFile {
            child,
            stdin: Some(stdin),
            stdout,
        })
    }
}

/// One `git cat-file --batch` process: ask for an object, read it back.
pub struct CatFile {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    /// The bytes of the object `spec` names (`<commit>:<path>` or an id);
    /// `None` when it does not exist.
    pub fn get(&mut self, spec: &str, cap: u64) -> Result<Option<Vec<u8>>, GitError> {
        let fail = |why: String| GitError::Failed {
            args: format!("cat-file --batch ({spec})"),
            stderr: why,
        };
        let stdin = self.stdin.as_mut().ok_or_else(|| fail("closed".into()))?;
        stdin
            .write_all(format!("{spec}\n").as_bytes())
            .and_then(|_| stdin.flush())
            .map_err(|e| fail(e.to_string()))?;
        let mut head = String::new();
        self.stdout
            .read_line(&mut head)
            .map_err(|e| fail(e.to_string()))?;
        let head = head.trim_end();
        if head.ends_with(" missing") || head.ends_with(" ambiguous") || head.is_empty() {
            return Ok(None);
        }
        let size: u64 = head
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| fail(format!("unexpected header {head:?}")))?;
        if size > cap {
            return Err(fail(format!(
                "object of {size} bytes is over the cap of {cap}"
            )));
        }
        let mut buf = vec![0; size as usize + 1];
        self.stdout
            .read_exact(&mut buf)
            .map_err(|e| fail(e.to_string()))?;
        buf.pop(); // the newline after the content
        Ok(Some(buf))
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
