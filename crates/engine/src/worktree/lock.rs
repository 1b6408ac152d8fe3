//! One repository-changing git operation at a time, across processes.
//!
//! Concurrent `git worktree add`, merges and ref updates race on git's own
//! lock files and fail. Inside one process a mutex orders them; across
//! processes (two runs of one repository) an advisory `flock` on
//! `<common git dir>/baton.lock` does. The kernel drops a `flock` when its
//! holder dies, so a killed baton never leaves the repository locked and
//! nobody has to guess whether an owner is alive, and nobody proceeds on a
//! timeout.

use std::path::{Path, PathBuf};

use baton_executor::git;

/// Orders the holders inside this process (a `flock` would too, but each
/// waiter would park a blocking thread).
static PROCESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held while a repository is being changed; released on drop.
#[derive(Debug)]
pub(crate) struct RepositoryLock {
    _process: tokio::sync::MutexGuard<'static, ()>,
    _file: std::fs::File,
}

/// Takes the lock of the repository whose top level is `repository`.
pub(crate) async fn lock(repository: &Path) -> Result<RepositoryLock, String> {
    let process = PROCESS.lock().await;
    let common = git::run(
        repository,
        ["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await
    .map(PathBuf::from)
    .map_err(|error| format!("cannot find the repository's git directory: {error}"))?;
    let path = common.join("baton.lock");
    let file = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
        file.lock()
            .map_err(|error| format!("cannot lock {}: {error}", path.display()))?;
        Ok::<_, String>(file)
    })
    .await
    .map_err(|error| format!("the repository lock's task failed: {error}"))??;
    Ok(RepositoryLock {
        _process: process,
        _file: file,
    })
}
