//! What the worktree steps share around their git calls: a failed call
//! worded for the stage's error, and a killed git's index lock cleared.

use std::path::{Path, PathBuf};

use baton_executor::git;

pub(super) fn git_error(what: &str) -> impl Fn(git::GitError) -> String + '_ {
    move |error| format!("{what}: {error}")
}

/// Removes the index lock of one of this run's worktrees. Safe because
/// only the run's driver uses them, and a driver starts only after the one
/// before it (and every process it started) is gone: a lock there is a
/// leftover of a killed git, which would otherwise block every retry.
pub(super) async fn remove_index_lock(worktree: &Path) {
    if let Ok(git_dir) = git::run(
        worktree,
        ["rev-parse", "--path-format=absolute", "--git-dir"],
    )
    .await
    {
        let _ = std::fs::remove_file(PathBuf::from(git_dir).join("index.lock"));
    }
}
