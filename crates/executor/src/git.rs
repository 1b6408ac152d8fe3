//! The git commands baton runs, always with hooks and fsmonitor disabled so
//! that nothing an agent put in a repository's configuration runs with
//! baton's privileges.

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
