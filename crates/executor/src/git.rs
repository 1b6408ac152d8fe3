//! The git commands baton runs, always with hooks and fsmonitor disabled so
//! that nothing an agent put in a repository's configuration runs with
//! baton's privileges.

#![expect(
    clippy::disallowed_methods,
    reason = "the executor is where processes start; git runs here"
)]

use std::path::Path;

use tokio::process::Command;

/// Flags that keep git from running repository-controlled programs.
const HARDENED: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

/// The top level of the work tree containing `directory`, or `None` when it
/// is not in one (or git is unavailable).
pub async fn top_level(directory: &Path) -> Option<std::path::PathBuf> {
    let output = Command::new("git")
        .args(HARDENED)
        .arg("-C")
        .arg(directory)
        .args(["rev-parse", "--show-toplevel"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    output.status.success().then(|| {
        std::path::PathBuf::from(String::from_utf8_lossy(&output.stdout).trim_end_matches('\n'))
    })
}

/// The git user configured for `directory` (its repository's
/// `user.name`, else `user.email`, from any configuration git reads), or
/// `None` when neither is set or git is unavailable.
pub async fn user(directory: &Path) -> Option<String> {
    for key in ["user.name", "user.email"] {
        if let Ok(found) = output(directory, ["config", "--get", key]).await
            && found.success
            && !found.stdout.trim().is_empty()
        {
            return Some(found.stdout.trim().to_owned());
        }
    }
    None
}

/// Paths `git status` reports as changed or untracked in `repository`
/// (relative to its top level), or `None` when it is not a git work tree or
/// git is unavailable.
pub async fn changed_paths(repository: &Path) -> Option<Vec<String>> {
    let output = Command::new("git")
        .args(HARDENED)
        .arg("-C")
        .arg(repository)
        .args([
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(
        output
            .stdout
            .split(|byte| *byte == 0)
            .filter(|entry| entry.len() > 3)
            .map(|entry| String::from_utf8_lossy(&entry[3..]).into_owned())
            .collect(),
    )
}

/// Why a git command failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
    /// git ran and exited unsuccessfully.
    #[error("git {command} failed: {stderr}")]
    Failed {
        /// The subcommand, for the message.
        command: String,
        /// The end of git's stderr.
        stderr: String,
    },
}

/// The result of a git command that ran: its exit status and output.
#[derive(Debug, Clone)]
pub struct GitOutput {
    /// Whether git exited 0.
    pub success: bool,
    /// Stdout, without the trailing newline.
    pub stdout: String,
    /// Stderr, trimmed.
    pub stderr: String,
}

/// Runs `git -C directory <args>` hardened (no hooks, no fsmonitor, no
/// system configuration, no prompts), with baton's identity for the commits
/// it makes. Arguments go to git as argv, never through a shell.
///
/// # Errors
///
/// Only when git cannot be started; a failing command is a `GitOutput`
/// with `success == false`.
pub async fn output<I, S>(directory: &Path, args: I) -> Result<GitOutput, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = Command::new("git")
        .args(HARDENED)
        .arg("-C")
        .arg(directory)
        .args(args)
        // Environment that could point git somewhere else, or make it run
        // configured programs, is dropped.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_EXTERNAL_DIFF")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "baton")
        .env("GIT_AUTHOR_EMAIL", "baton@localhost")
        .env("GIT_COMMITTER_NAME", "baton")
        .env("GIT_COMMITTER_EMAIL", "baton@localhost")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await?;
    Ok(GitOutput {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout)
            .trim_end_matches('\n')
            .to_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Like [`output`], but a failing command is an error; returns stdout.
///
/// # Errors
///
/// git cannot be started or exits unsuccessfully.
pub async fn run<I, S>(directory: &Path, args: I) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args
        .into_iter()
        .map(|arg| arg.as_ref().to_owned())
        .collect();
    let result = output(directory, &args).await?;
    if result.success {
        Ok(result.stdout)
    } else {
        Err(GitError::Failed {
            command: args
                .first()
                .map(|arg| arg.to_string_lossy().into_owned())
                .unwrap_or_default(),
            stderr: last_lines(&result.stderr, 5),
        })
    }
}

/// The last `count` lines of `text` on one line, joined by ` | `.
pub fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join(" | ")
}

/// The commit `HEAD` names in `directory`'s repository and the branch it is
/// on (`None` when HEAD is detached), or `None` outside a repository with
/// commits.
pub async fn head(directory: &Path) -> Option<(String, Option<String>)> {
    let commit = run(directory, ["rev-parse", "--verify", "HEAD^{commit}"])
        .await
        .ok()?;
    let branch = run(directory, ["symbolic-ref", "-q", "--short", "HEAD"])
        .await
        .ok()
        .filter(|branch| !branch.is_empty());
    Some((commit, branch))
}
